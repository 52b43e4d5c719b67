/* The registry of the local segment's buffers: sorted, read-mostly. */
#ifndef XFER_BUFFERS_INTERNAL_H
#define XFER_BUFFERS_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct xfer_desc;
struct xfer_desc_buf;

/* In xfer_buffer.pins once the buffer is being unregistered. */
#define XFER_BUFFER_LEAVING (1L << 62)

struct xfer_buffer {
	uint64_t addr, len;
	char *location;
	bool remote_access;
	atomic_long users; /* local tasks using it now (as their source) */
	/** Peers' requests using it now (xfer_buffer_pin()), plus
	 *  XFER_BUFFER_LEAVING once it is being unregistered: then no new
	 *  user finds it. */
	atomic_long pins;
	/** Leaving: when the requests still on it are cut off (monotonic
	 *  ms; INT64_MAX: never). */
	_Atomic int64_t deadline_ms;
	void *leave;       /* the unregistering caller's, malloc'd; freed
			    * with the buffer */
	void *tp_mem;      /* the transport's registration (memory regions) */
};

/* Sorted by address; entries never move while registered. */
struct xfer_buffers {
	pthread_rwlock_t lock;
	struct xfer_buffer **v;
	size_t n, cap;
	/** The last pin of a leaving buffer went away: called once, from the
	 *  thread of that xfer_buffer_unpin(); the buffer is still in the
	 *  registry (take it out with xfer_buffers_take()). Set before the
	 *  first buffer is registered. */
	void (*unpinned)(struct xfer_buffer *b, void *arg);
	void *arg;
};

void xfer_buffers_init(struct xfer_buffers *bs);
void xfer_buffers_fini(struct xfer_buffers *bs);
/** A new buffer, not yet in the registry; NULL on ENOMEM. */
struct xfer_buffer *xfer_buffer_new(uint64_t addr, uint64_t len,
				    const char *location, bool remote_access);
void xfer_buffer_free(struct xfer_buffer *b);
/** Insert @p b. @return 0, -EEXIST (overlaps; b not taken), -ENOMEM. */
int xfer_buffers_insert(struct xfer_buffers *bs, struct xfer_buffer *b);
/** Take the buffer starting at @p addr out of the registry into *out
 *  (the caller frees it). @return 0, -ENOENT, -EBUSY (in use). */
int xfer_buffers_remove(struct xfer_buffers *bs, uint64_t addr,
			struct xfer_buffer **out);
/**
 * Unregister the buffer starting at @p addr: take it out into *@p out
 * now if nothing uses it. If peers' requests pin it and @p leave is not
 * NULL, it leaves instead: no new user finds it from now on, those pins
 * are cut off at @p deadline_ms (monotonic ms, INT64_MAX: never) by the
 * transports that hold them (xfer_buffer_overdue()), b->leave takes
 * @p leave, and bs->unpinned() says when the last pin is gone.
 * @return 0 (*@p out is out of the registry, @p leave not taken);
 *         -EINPROGRESS (leaving, @p leave taken); -ENOENT (no buffer
 *         starts there); -EBUSY (local tasks use it, or it is leaving
 *         already); -EAGAIN (peers' requests pin it and @p leave is NULL).
 */
int xfer_buffers_leave(struct xfer_buffers *bs, uint64_t addr,
		       int64_t deadline_ms, void *leave,
		       struct xfer_buffer **out);
/** Take @p b, in the registry, out of it (the caller frees it). */
void xfer_buffers_take(struct xfer_buffers *bs, struct xfer_buffer *b);
/** A peer's request uses @p b, found with xfer_buffers_find() under
 *  bs->lock (still held). */
void xfer_buffer_pin(struct xfer_buffer *b);
/** The request is done with @p b: the last pin of a leaving buffer calls
 *  bs->unpinned(). Any thread, without bs->lock. */
void xfer_buffer_unpin(struct xfer_buffers *bs, struct xfer_buffer *b);
/** Is @p b leaving with its deadline passed? Its pins must go now. Any
 *  thread. */
bool xfer_buffer_overdue(const struct xfer_buffer *b);
/** The monotonic clock in milliseconds (the deadlines' clock). */
int64_t xfer_now_ms(void);
/** The buffer holding all of [addr, addr+len), with @p remote_only only a
 *  remotely accessible one; NULL if none or if it is leaving. Caller
 *  holds bs->lock. */
struct xfer_buffer *xfer_buffers_find(struct xfer_buffers *bs, uint64_t addr,
				      uint64_t len, bool remote_only);
/** Take a use of the buffer holding the source range; NULL if none. */
struct xfer_buffer *xfer_buffers_acquire(struct xfer_buffers *bs,
					 uint64_t addr, uint64_t len);
/** Fill d->bufs with the remotely accessible buffers; @p keys (if not
 *  NULL) sets each one's transport fields. @return 0, -ENOMEM */
int xfer_buffers_describe(struct xfer_buffers *bs, struct xfer_desc *d,
			  void (*keys)(const struct xfer_buffer *b,
				       struct xfer_desc_buf *db, void *arg),
			  void *arg);

#endif
