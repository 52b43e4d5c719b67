/*
 * The etcd lease: every put carries this engine's lease, granted with a
 * TTL of ETCD_TTL_S and kept alive every TTL/3, so the keys of an engine
 * that died expire. Puts wait for a lease while none is granted; a lease
 * found gone is granted again and the user hears reconnected once calls
 * work.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>

#include <event2/event.h>
#include <event2/http.h>

#include "metadata/etcd_internal.h"
#include "util/log_internal.h"

static void grant_done(struct etcd_op *op, int st, yajl_val root);
static void keepalive_done(struct etcd_op *op, int st, yajl_val root);

/* The lease timer, after the backoff: a keepalive or a grant again. */
static void retry_later(struct etcd *e)
{
	xfer_etcd_arm(e->lease_ev, xfer_etcd_backoff(&e->lease_backoff_ms));
}

void xfer_etcd_put_start(struct etcd_op *op)
{
	struct etcd *e = op->e;
	int ret;

	if (!e->lease) {
		xfer_etcd_op_move(op, &e->waiting);
		xfer_etcd_lease_grant(e);
		return;
	}
	op->lease = e->lease;
	ret = xfer_etcd_op_send(op);
	if (ret)
		xfer_etcd_finish(op, ret);
}

void xfer_etcd_lease_lost(struct etcd *e)
{
	xfer_log(XFER_LOG_WARN, "etcd %s: lease %" PRIx64 " is gone; "
		 "granting another", e->names, (uint64_t)e->lease);
	e->lease = 0;
	e->kv_lost = true;
	evtimer_del(e->lease_ev);
}

/* No lease to be had: the puts waiting for one fail, and the user will
 * hear reconnected once calls work. */
static void fail_waiting(struct etcd *e, int err)
{
	struct etcd_op *w;

	while ((w = TAILQ_FIRST(&e->waiting))) {
		e->kv_lost = true;
		xfer_etcd_finish(w, err);
	}
}

void xfer_etcd_lease_grant(struct etcd *e)
{
	struct etcd_op *op;
	int ret = -ENOMEM;

	if (e->grant)
		return;
	evtimer_del(e->lease_ev);
	op = xfer_etcd_op_new(e, OP_GRANT, grant_done, NULL, NULL, 0);
	if (op) {
		e->grant = op;
		ret = xfer_etcd_op_send(op);
		if (!ret)
			return;
		e->grant = NULL;
		xfer_etcd_op_free(op);
	}
	fail_waiting(e, ret);
	retry_later(e);
}

static void grant_done(struct etcd_op *op, int st, yajl_val root)
{
	struct etcd *e = op->e;
	int64_t id, ttl;
	struct etcd_op *w;
	int err;

	id = xfer_etcd_json_i64(xfer_etcd_json_get(root, "ID", NULL));
	ttl = xfer_etcd_json_i64(xfer_etcd_json_get(root, "TTL", NULL));
	xfer_etcd_op_free(op);
	e->grant = NULL;
	if (st != HTTP_OK || !id || ttl <= 0) {
		err = st < 0 ? st : st == HTTP_OK ? -EIO :
		      xfer_etcd_http_errno(e, "lease grant", st, root);
		fail_waiting(e, err);
		retry_later(e);
		return;
	}
	e->lease = id;
	e->ttl_s = ttl < INT_MAX / 1000 ? (int)ttl : INT_MAX / 1000;
	e->lease_backoff_ms = ETCD_BACKOFF_MIN_MS;
	xfer_etcd_arm(e->lease_ev, e->ttl_s * 1000 / 3);
	while ((w = TAILQ_FIRST(&e->waiting)))
		xfer_etcd_put_start(w);
}

static void keepalive_done(struct etcd_op *op, int st, yajl_val root)
{
	struct etcd *e = op->e;
	int64_t lease = op->lease;
	yajl_val res = xfer_etcd_json_get(root, "result", NULL);

	xfer_etcd_op_free(op);
	if (lease != e->lease)
		return; /* lost meanwhile; grant_done arms the timer */
	if (st != HTTP_OK || !YAJL_IS_OBJECT(res)) {
		if (st > 0)
			xfer_etcd_http_errno(e, "lease keepalive", st, root);
		retry_later(e);
		return;
	}
	/* An unknown lease (expired, revoked) comes back with TTL 0. */
	if (xfer_etcd_json_i64(xfer_etcd_json_get(res, "TTL", NULL)) <= 0) {
		xfer_etcd_lease_lost(e);
		xfer_etcd_lease_grant(e);
		return;
	}
	e->lease_backoff_ms = ETCD_BACKOFF_MIN_MS;
	xfer_etcd_arm(e->lease_ev, e->ttl_s * 1000 / 3);
}

void xfer_etcd_lease_tick(evutil_socket_t fd, short what, void *arg)
{
	struct etcd *e = arg;
	struct etcd_op *op;

	(void)fd;
	(void)what;
	if (!e->lease) {
		xfer_etcd_lease_grant(e);
		return;
	}
	op = xfer_etcd_op_new(e, OP_KEEPALIVE, keepalive_done, NULL, NULL, 0);
	if (!op) {
		retry_later(e);
		return;
	}
	op->lease = e->lease;
	if (xfer_etcd_op_send(op)) {
		xfer_etcd_op_free(op);
		retry_later(e);
	}
}
