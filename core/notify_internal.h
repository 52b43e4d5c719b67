/*
 * Notifications (PROTOCOL.md §1, Notify): a (name, message) pair sent to
 * the owner of a segment over its handshake socket, and those received,
 * queued (bounded) for the application's callback or for draining.
 */
#ifndef XFER_NOTIFY_INTERNAL_H
#define XFER_NOTIFY_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/queue.h>

#include <xfer/xfer.h>

#include "reactor/reactor_internal.h"

/* Most notifications kept unread, and their bytes; more are refused. */
#define XFER_NOTIFY_QUEUE_MAX 4096
#define XFER_NOTIFY_QUEUE_BYTES (16u << 20)

struct xfer_notice;
struct xfer_notify_op;
struct xfer_segment;

struct xfer_notifier {
	pthread_mutex_t lock;           /* the queue and the callback */
	STAILQ_HEAD(, xfer_notice) queue;
	size_t n, bytes;
	bool full;                      /* refused one since the last pop */
	xfer_notify_cb cb;
	void *cb_arg;
	bool deliver_pending;
	struct xfer_job deliver_job;
	LIST_HEAD(, xfer_notify_op) ops; /* sends in flight: control reactor */
};

void xfer_notifier_init(struct xfer_notifier *nf);
/** Drop what is queued and what is in flight (callbacks never run). The
 *  control reactor is stopped. */
void xfer_notifier_fini(struct xfer_notifier *nf);

/** Can (@p name, @p msg) go out? @return 0, -EINVAL (NULL), -EMSGSIZE
 *  (the body would exceed the handshake's largest frame). */
int xfer_notify_check(struct xfer_engine *e, const char *name,
		      const char *msg);

/** Send to the owner of @p seg (a use of it is taken until done); @p cb
 *  runs on the control reactor, later. Any thread. @return 0, or as
 *  xfer_notify_check(), -ENOMEM (then @p cb never runs). */
int xfer_notify_send(struct xfer_engine *e, struct xfer_segment *seg,
		     const char *name, const char *msg, xfer_done_cb cb,
		     void *arg);

/** Queue one that arrived. @return 0, -ENOBUFS (the queue is full: the
 *  sender is told so), -ENOMEM. Control reactor. */
int xfer_notify_receive(struct xfer_engine *e, const char *name,
			const char *msg);

#endif
