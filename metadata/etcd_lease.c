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

#include "core/engine_internal.h"
#include "metadata/etcd_internal.h"

void etcd_put_start(struct etcd_op *op)
{
	struct etcd *e = op->e;
	int ret;

	if (!e->lease) {
		etcd_op_move(op, &e->waiting);
		etcd_lease_grant(e);
		return;
	}
	op->lease = e->lease;
	ret = etcd_op_send(op);
	if (ret)
		etcd_finish(op, ret);
}

void etcd_lease_lost(struct etcd *e)
{
	xfer_log(XFER_LOG_WARN, "etcd %s: lease %" PRIx64 " is gone; "
		 "granting another", e->hostport, (uint64_t)e->lease);
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
		etcd_finish(w, err);
	}
}

void etcd_lease_grant(struct etcd *e)
{
	struct etcd_op *op;
	int ret = -ENOMEM;

	if (e->grant)
		return;
	evtimer_del(e->lease_ev);
	op = etcd_op_new(e, OP_GRANT, NULL, NULL, 0, NULL, NULL);
	if (op) {
		e->grant = op;
		ret = etcd_op_send(op);
		if (!ret)
			return;
		e->grant = NULL;
		etcd_op_free(op);
	}
	fail_waiting(e, ret);
	etcd_arm(e->lease_ev, etcd_backoff(&e->lease_backoff_ms));
}

void etcd_grant_done(struct etcd *e, int st, yajl_val root)
{
	int64_t id = etcd_json_i64(etcd_json_get(root, "ID", NULL));
	int64_t ttl = etcd_json_i64(etcd_json_get(root, "TTL", NULL));
	struct etcd_op *w;
	int err;

	e->grant = NULL;
	if (st != HTTP_OK || !id || ttl <= 0) {
		err = st < 0 ? st : st == HTTP_OK ? -EIO :
		      etcd_http_errno(e, "lease grant", st, root);
		fail_waiting(e, err);
		etcd_arm(e->lease_ev, etcd_backoff(&e->lease_backoff_ms));
		return;
	}
	e->lease = id;
	e->ttl_s = ttl < INT_MAX / 1000 ? (int)ttl : INT_MAX / 1000;
	e->lease_backoff_ms = ETCD_BACKOFF_MIN_MS;
	etcd_arm(e->lease_ev, e->ttl_s * 1000 / 3);
	while ((w = TAILQ_FIRST(&e->waiting)))
		etcd_put_start(w);
}

void etcd_keepalive_done(struct etcd *e, int64_t lease, int st,
			 yajl_val root)
{
	yajl_val res = etcd_json_get(root, "result", NULL);

	if (lease != e->lease)
		return; /* lost meanwhile; grant_done arms the timer */
	if (st != HTTP_OK || !YAJL_IS_OBJECT(res)) {
		if (st > 0)
			etcd_http_errno(e, "lease keepalive", st, root);
		etcd_arm(e->lease_ev, etcd_backoff(&e->lease_backoff_ms));
		return;
	}
	/* An unknown lease (expired, revoked) comes back with TTL 0. */
	if (etcd_json_i64(etcd_json_get(res, "TTL", NULL)) <= 0) {
		etcd_lease_lost(e);
		etcd_lease_grant(e);
		return;
	}
	e->lease_backoff_ms = ETCD_BACKOFF_MIN_MS;
	etcd_arm(e->lease_ev, e->ttl_s * 1000 / 3);
}

void etcd_lease_tick(evutil_socket_t fd, short what, void *arg)
{
	struct etcd *e = arg;
	struct etcd_op *op;

	(void)fd;
	(void)what;
	if (!e->lease) {
		etcd_lease_grant(e);
		return;
	}
	op = etcd_op_new(e, OP_KEEPALIVE, NULL, NULL, 0, NULL, NULL);
	if (!op) {
		etcd_arm(e->lease_ev, etcd_backoff(&e->lease_backoff_ms));
		return;
	}
	op->lease = e->lease;
	if (etcd_op_send(op)) {
		etcd_op_free(op);
		etcd_arm(e->lease_ev, etcd_backoff(&e->lease_backoff_ms));
	}
}
