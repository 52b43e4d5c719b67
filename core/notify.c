/*
 * Notifications: sent over the handshake socket as Mooncake's Notify
 * message (its reply carries "success"; an empty message is a refusal),
 * received into a bounded queue that the application's callback or
 * xfer_engine_notify_pop() empties.
 */
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine_internal.h"
#include "core/handshake_internal.h"
#include "util/wait_internal.h"

struct xfer_notice {
	STAILQ_ENTRY(xfer_notice) link;
	char *name, *msg;
	size_t bytes;
};

/* One send in flight, on the control reactor once started. */
struct xfer_notify_op {
	LIST_ENTRY(xfer_notify_op) link;
	struct xfer_job job;
	struct xfer_engine *e;
	struct xfer_segment *seg;
	struct xfer_hs_req *req;
	xfer_done_cb cb;
	void *arg;
	char *name, *msg;         /* for the own segment */
	size_t len;
	char body[];              /* the Notify body, len bytes */
};

void xfer_notifier_init(struct xfer_notifier *nf)
{
	memset(nf, 0, sizeof(*nf));
	pthread_mutex_init(&nf->lock, NULL);
	STAILQ_INIT(&nf->queue);
	LIST_INIT(&nf->ops);
}

static void notice_free(struct xfer_notice *n)
{
	free(n->name);
	free(n->msg);
	free(n);
}

static void op_free(struct xfer_notify_op *op)
{
	if (op->req)
		xfer_handshake_cancel(op->req);
	xfer_segment_put(op->seg);
	free(op->name);
	free(op->msg);
	free(op);
}

void xfer_notifier_fini(struct xfer_notifier *nf)
{
	struct xfer_notice *n;
	struct xfer_notify_op *op;

	while ((n = STAILQ_FIRST(&nf->queue))) {
		STAILQ_REMOVE_HEAD(&nf->queue, link);
		notice_free(n);
	}
	while ((op = LIST_FIRST(&nf->ops))) {
		LIST_REMOVE(op, link);
		op_free(op);
	}
	pthread_mutex_destroy(&nf->lock);
}

/* ---- receiving ---- */

static struct xfer_notice *pop(struct xfer_notifier *nf)
{
	struct xfer_notice *n;

	pthread_mutex_lock(&nf->lock);
	n = STAILQ_FIRST(&nf->queue);
	if (n) {
		STAILQ_REMOVE_HEAD(&nf->queue, link);
		nf->n--;
		nf->bytes -= n->bytes;
		nf->full = false;
	}
	pthread_mutex_unlock(&nf->lock);
	return n;
}

/* Hand the queue to the application's callback, on the control reactor. */
static void deliver(struct xfer_job *j)
{
	struct xfer_engine *e = container_of(j, struct xfer_engine,
					     notes.deliver_job);
	struct xfer_notifier *nf = &e->notes;
	struct xfer_notice *n;
	xfer_notify_cb cb;
	void *arg;

	pthread_mutex_lock(&nf->lock);
	nf->deliver_pending = false;
	pthread_mutex_unlock(&nf->lock);
	for (;;) {
		pthread_mutex_lock(&nf->lock);
		cb = nf->cb;
		arg = nf->cb_arg;
		pthread_mutex_unlock(&nf->lock);
		if (!cb || !(n = pop(nf)))
			return;
		cb(e, n->name, n->msg, arg);
		notice_free(n);
	}
}

/* With the lock held: deliver soon if there is a callback and a notice. */
static void kick_locked(struct xfer_engine *e)
{
	struct xfer_notifier *nf = &e->notes;

	if (nf->cb && nf->n && !nf->deliver_pending) {
		nf->deliver_pending = true;
		nf->deliver_job.fn = deliver;
		xfer_reactor_post(&e->control, &nf->deliver_job);
	}
}

int xfer_notify_receive(struct xfer_engine *e, const char *name,
			const char *msg)
{
	struct xfer_notifier *nf = &e->notes;
	struct xfer_notice *n = calloc(1, sizeof(*n));
	size_t unread = 0;
	bool log = false;
	int ret = 0;

	if (!n || !(n->name = strdup(name)) || !(n->msg = strdup(msg))) {
		if (n)
			notice_free(n);
		return -ENOMEM;
	}
	n->bytes = strlen(name) + strlen(msg);
	pthread_mutex_lock(&nf->lock);
	if (nf->n >= XFER_NOTIFY_QUEUE_MAX ||
	    nf->bytes + n->bytes > XFER_NOTIFY_QUEUE_BYTES) {
		ret = -ENOBUFS;
		/* one line until there is room again: a flood of refusals
		 * must not become a flood of log lines */
		log = !nf->full;
		nf->full = true;
		unread = nf->n;
	} else {
		STAILQ_INSERT_TAIL(&nf->queue, n, link);
		nf->n++;
		nf->bytes += n->bytes;
		kick_locked(e);
	}
	pthread_mutex_unlock(&nf->lock);
	if (ret) {
		if (log)
			xfer_log(XFER_LOG_WARN, "notification from %.64s "
				 "refused: %zu unread (more are refused "
				 "silently until some are read)", name, unread);
		notice_free(n);
	}
	return ret;
}

int xfer_engine_set_notify_cb(struct xfer_engine *e, xfer_notify_cb cb,
			      void *arg)
{
	pthread_mutex_lock(&e->notes.lock);
	e->notes.cb = cb;
	e->notes.cb_arg = arg;
	kick_locked(e);
	pthread_mutex_unlock(&e->notes.lock);
	return 0;
}

int xfer_engine_notify_pop(struct xfer_engine *e, char **name, char **msg)
{
	struct xfer_notice *n = pop(&e->notes);

	if (!n)
		return -EAGAIN;
	*name = n->name;
	*msg = n->msg;
	free(n);
	return 0;
}

/* ---- sending ---- */

static void op_finish(struct xfer_notify_op *op, int ret)
{
	LIST_REMOVE(op, link);
	op->req = NULL; /* the handshake frees itself */
	op->cb(op->e, ret, op->arg);
	op_free(op);
}

static void on_reply(int err, const char *body, size_t len, void *arg)
{
	struct xfer_notify_op *op = arg;
	struct xfer_hs_notify n;
	char why[128];

	if (!err) {
		err = xfer_hs_notify_decode(body, len, &n, why, sizeof(why));
		/* an empty message is a refusal (Mooncake's too) */
		if (!err && !n.notify_msg[0])
			err = -ENOBUFS;
		if (!err || err == -ENOBUFS)
			xfer_hs_notify_clear(&n);
	}
	if (err)
		xfer_error_set(&op->e->err, err, "notify %s: %s",
			       op->seg->name, strerror(-err));
	op_finish(op, err);
}

static void op_start(struct xfer_job *j)
{
	struct xfer_notify_op *op = container_of(j, struct xfer_notify_op, job);
	struct xfer_engine *e = op->e;
	struct xfer_segment *seg = op->seg;
	char host[64];

	LIST_INSERT_HEAD(&e->notes.ops, op, link);
	if (seg->local) {
		op_finish(op, xfer_notify_receive(e, op->name, op->msg));
		return;
	}
	if (getnameinfo((struct sockaddr *)&seg->addr, seg->addrlen, host,
			sizeof(host), NULL, 0, NI_NUMERICHOST)) {
		op_finish(op, -EHOSTUNREACH);
		return;
	}
	op->req = xfer_handshake_request(e->control.base, NULL, e->auth, host,
					 seg->rpc_port, XFER_HS_NOTIFY,
					 op->body, op->len,
					 e->hs_max_len, on_reply, op);
	if (!op->req)
		op_finish(op, -ENOMEM);
}

int xfer_notify_check(struct xfer_engine *e, const char *name,
		      const char *msg)
{
	struct xfer_hs_notify n = { (char *)name, (char *)msg };
	char *json;
	size_t len;
	int ret;

	if (!name || !msg)
		return -EINVAL;
	ret = xfer_hs_notify_encode(&n, &json, &len);
	if (ret)
		return ret;
	free(json);
	return len + 1 > e->hs_max_len ? -EMSGSIZE : 0; /* + the type byte */
}

int xfer_notify_send(struct xfer_engine *e, struct xfer_segment *seg,
		     const char *name, const char *msg, xfer_done_cb cb,
		     void *arg)
{
	struct xfer_hs_notify n = { (char *)name, (char *)msg };
	struct xfer_notify_op *op;
	char *json;
	size_t len;
	int ret = xfer_notify_check(e, name, msg);

	if (ret || (ret = xfer_hs_notify_encode(&n, &json, &len)))
		return ret;
	op = calloc(1, sizeof(*op) + len);
	if (!op || (seg->local && (!(op->name = strdup(name)) ||
				   !(op->msg = strdup(msg))))) {
		if (op) {
			free(op->name);
			free(op);
		}
		free(json);
		return -ENOMEM;
	}
	memcpy(op->body, json, len);
	free(json);
	op->len = len;
	op->e = e;
	op->seg = seg;
	xfer_segment_get(seg);
	op->cb = cb;
	op->arg = arg;
	op->job.fn = op_start;
	xfer_reactor_post(&e->control, &op->job);
	return 0;
}

int xfer_notify_async(struct xfer_engine *e, int64_t segment_id,
		      const char *name, const char *msg, xfer_done_cb cb,
		      void *arg)
{
	struct xfer_segment *seg = xfer_segment_acquire(&e->segs, segment_id);
	int ret;

	if (!seg)
		return xfer_error_set(&e->err, -ENOENT, "notify: no segment "
				      "%lld", (long long)segment_id);
	ret = xfer_notify_send(e, seg, name, msg, cb, arg);
	xfer_segment_put(seg);
	return ret;
}

int xfer_notify(struct xfer_engine *e, int64_t segment_id, const char *name,
		const char *msg)
{
	struct xfer_wait *w;

	if (xfer_reactor_on_thread(&e->control))
		return -EDEADLK;
	w = xfer_wait_new();
	if (!w)
		return -ENOMEM;
	return (int)xfer_wait_result(w, xfer_notify_async(e, segment_id, name,
							  msg, xfer_wait_cb,
							  w));
}
