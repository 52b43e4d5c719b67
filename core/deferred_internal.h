/*
 * Deferred delivery for the metadata backends. Results and notifications
 * are queued as items and run from one zero-delay event on the control
 * reactor, so a user callback never runs inside the library that produced
 * it (hiredis, evhttp) nor inside the call that asked, and it may close the
 * store: the round then drops what is left and frees the store once the
 * callback has returned.
 *
 * Items are embedded in the backend's own structs, so queueing never
 * allocates and never fails. A round runs what was queued when it began;
 * what its callbacks queue waits for the next round, so a callback that
 * always asks again cannot starve the reactor.
 *
 * Everything runs on the reactor's thread.
 */
#ifndef XFER_DEFERRED_INTERNAL_H
#define XFER_DEFERRED_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/queue.h>

struct event;
struct event_base;
struct xfer_store_env;
struct xfer_deferred;
struct xfer_deferred_item;

/**
 * Run @p it, which is no longer queued: deliver it (@p drop false), or
 * drop it unseen (@p drop true: the store is closing). Either way the item
 * is the backend's again: free it, keep it, or queue it anew.
 */
typedef void (*xfer_deferred_fn)(struct xfer_deferred_item *it, bool drop);

struct xfer_deferred_item {
	TAILQ_ENTRY(xfer_deferred_item) link;
	xfer_deferred_fn fn;
	bool queued;
};

TAILQ_HEAD(xfer_deferred_list, xfer_deferred_item);

/** The queue, embedded in a store (zeroed memory is a valid empty one for
 *  xfer_deferred_clear). */
struct xfer_deferred {
	struct xfer_deferred_list ready;
	struct event *ev;
	const struct xfer_store_env *env;  /* for the notifications */
	void (*release)(struct xfer_deferred *d);
	struct xfer_deferred_item resync, reconnected;
	bool running, released;
};

/**
 * Set up @p d on @p base. @p env (may be NULL where nothing is notified)
 * names the callbacks of xfer_deferred_changed() and the others; it must
 * outlive @p d. @p release frees the store that embeds @p d (it calls
 * xfer_deferred_clear); see xfer_deferred_release().
 * @return 0, -ENOMEM (then xfer_deferred_clear is still safe).
 */
int xfer_deferred_init(struct xfer_deferred *d, struct event_base *base,
		       const struct xfer_store_env *env,
		       void (*release)(struct xfer_deferred *d));

/** Queue @p it (zeroed at first) to run @p fn in a later round. An item
 *  already queued stays where it is: it runs once. */
void xfer_deferred_push(struct xfer_deferred *d, struct xfer_deferred_item *it,
			xfer_deferred_fn fn);

/** Queue env->changed(@p key) (@p len bytes, copied); without memory,
 *  changed(NULL) instead, which says every key may have changed. */
void xfer_deferred_changed(struct xfer_deferred *d, const char *key,
			   size_t len);

/** Queue env->changed(NULL), once however often asked before it runs. */
void xfer_deferred_resync(struct xfer_deferred *d);

/** Queue env->reconnected(), once however often asked before it runs. */
void xfer_deferred_reconnected(struct xfer_deferred *d);

/** The store is closing: call d->release now, or, from inside a callback
 *  of a round, once that callback returns (the rest of the round is
 *  dropped). */
void xfer_deferred_release(struct xfer_deferred *d);

/** Drop every queued item unseen and free the event (the store's free). */
void xfer_deferred_clear(struct xfer_deferred *d);

#endif
