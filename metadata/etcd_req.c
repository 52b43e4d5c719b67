/*
 * The etcd backend's request plumbing, under the ops (etcd.c), the lease
 * (etcd_lease.c) and the watch (etcd_watch.c): requests allocated, sent
 * to a member and answered; results queued for the user; the gateway's
 * HTTP errors mapped to errnos; outages logged once; retry timers and
 * their backoff.
 *
 * The members: requests go to one member, e->cur, until it fails them (no
 * answer, or no leader to serve them); then to the next, and the request
 * goes on there. One that no member could serve waits ETCD_PARK_MS and
 * goes round again, up to ETCD_CALL_MS after it was made: an election
 * takes about a second. Only then does its caller hear, with the last
 * failure; with every member refusing connections, at once.
 *
 * It calls nothing above it: an answer goes to the callback its request
 * was made with, a member out of reach to the e->on_member_down etcd.c
 * sets.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>

#include "util/log_internal.h"
#include "metadata/etcd_internal.h"

/* ---- ops and their results ---- */

struct etcd_op *xfer_etcd_op_new(struct etcd *e, enum etcd_op_kind kind,
				 etcd_answer_cb answered, const char *key,
				 const char *value, size_t vlen)
{
	size_t klen = key ? strlen(key) : 0;
	struct etcd_op *op = calloc(1, sizeof(*op) + klen + 1 + vlen);

	if (!op)
		return NULL;
	op->e = e;
	op->kind = kind;
	op->answered = answered;
	if (klen)
		memcpy(op->key, key, klen);
	op->value = op->key + klen + 1;
	if (vlen)
		memcpy(op->value, value, vlen);
	op->vlen = vlen;
	return op;
}

void xfer_etcd_op_move(struct etcd_op *op, struct etcd_op_q *q)
{
	if (op->q)
		TAILQ_REMOVE(op->q, op, link);
	op->q = q;
	if (q)
		TAILQ_INSERT_TAIL(q, op, link);
}

void xfer_etcd_op_free(struct etcd_op *op)
{
	xfer_etcd_op_move(op, NULL);
	free(op->res);
	free(op);
}

static void op_deliver(struct xfer_deferred_item *it, bool drop)
{
	struct etcd_op *op = container_of(it, struct etcd_op, done);

	if (!drop)
		op->cb(op->err, op->res, op->res_len, op->arg);
	xfer_etcd_op_free(op);
}

void xfer_etcd_finish(struct etcd_op *op, int err)
{
	/* What the user wanted in the store may not be there: once calls
	 * work again, the user hears reconnected and publishes again. */
	if (err && (op->kind == OP_PUT || op->kind == OP_DEL))
		op->e->kv_lost = true;
	op->err = err;
	xfer_etcd_op_move(op, NULL);
	xfer_deferred_push(&op->e->deferred, &op->done, op_deliver);
	if (op == op->e->writing)
		op->e->on_write_done(op->e);
}

/* ---- outages and retries ---- */

void xfer_etcd_outage(struct etcd *e, const char *why)
{
	if (e->warned)
		return;
	xfer_log(XFER_LOG_WARN, "etcd %s: %s; retrying", e->names, why);
	e->warned = true;
}

void xfer_etcd_back(struct etcd *e)
{
	e->fails = 0;
	if (!e->warned)
		return;
	xfer_log(XFER_LOG_INFO, "etcd %s: reachable again (%s)", e->names,
		 e->members[e->cur].hostport);
	e->warned = false;
}

void xfer_etcd_member_failed(struct etcd *e, int member, const char *why)
{
	char msg[400];

	if (member != e->cur)
		return;     /* moved on already */
	e->cur = (e->cur + 1) % e->nmembers;
	if (e->nmembers > 1)
		e->stats.switches++;
	if (++e->fails < e->nmembers) {
		xfer_log(XFER_LOG_WARN, "etcd %s: %s; moving to %s",
			 e->members[member].hostport, why,
			 e->members[e->cur].hostport);
		return;
	}
	if (e->nmembers > 1) {
		snprintf(msg, sizeof(msg), "no member can serve (last: %s: %s)",
			 e->members[member].hostport, why);
		why = msg;
	}
	xfer_etcd_outage(e, why);
}

void xfer_etcd_arm(struct event *ev, int ms)
{
	struct timeval tv = { ms / 1000, ms % 1000 * 1000 };

	evtimer_add(ev, &tv);
}

int xfer_etcd_backoff(int *ms)
{
	int now = *ms;

	*ms = now * 2 < ETCD_BACKOFF_MAX_MS ? now * 2 : ETCD_BACKOFF_MAX_MS;
	return now;
}

/* ---- requests ---- */

/* Go's HTTP/1.1 server answers 400 without a Host header; evhttp adds
 * none. A member that lost its leader answers 503 at once to a request
 * that asks for one (rpctypes.MetadataRequireLeaderKey), where it would
 * keep it for seven seconds otherwise. */
int xfer_etcd_add_headers(struct etcd *e, int member,
			  struct evhttp_request *req)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);

	return evhttp_add_header(h, "Host", e->members[member].hostport) ||
	       evhttp_add_header(h, "Content-Type", "application/json") ||
	       evhttp_add_header(h, "Grpc-Metadata-Hasleader", "true");
}

static void op_done(struct evhttp_request *req, void *arg);

/* @p op's body, by its kind. @return 0, -1 (no memory). */
static int op_body(struct etcd_op *op, struct evbuffer *b)
{
	if (op->body)
		return op->body(op, b);
	switch (op->kind) {
	case OP_GRANT:
		return evbuffer_add_printf(b, "{\"TTL\":%d}",
					   op->e->ttl_want_s ?: ETCD_TTL_S) < 0;
	case OP_KEEPALIVE:
		return evbuffer_add_printf(b, "{\"ID\":%" PRId64 "}",
					   op->lease) < 0;
	case OP_PUT:
		return evbuffer_add(b, "{", 1) ||
		       xfer_etcd_add_b64_field(b, "key", op->key,
					       strlen(op->key)) ||
		       evbuffer_add(b, ",", 1) ||
		       xfer_etcd_add_b64_field(b, "value", op->value,
					       op->vlen) ||
		       evbuffer_add_printf(b, ",\"lease\":%" PRId64 "}",
					   op->lease) < 0;
	default:
		return evbuffer_add(b, "{", 1) ||
		       xfer_etcd_add_b64_field(b, "key", op->key,
					       strlen(op->key)) ||
		       evbuffer_add(b, "}", 1);
	}
}

/* The member for @p op's next try: the current one, unless it failed @p op
 * in this round already (others' failures move e->cur too), then the next
 * that did not. */
static int op_member(struct etcd_op *op)
{
	struct etcd *e = op->e;
	int m = e->cur;

	for (int i = 0; i < e->nmembers && op->tried & 1u << m; i++)
		m = (m + 1) % e->nmembers;
	return m;
}

/* One try of @p op. @return 0, -ENOMEM, -EIO. */
static int op_try(struct etcd_op *op)
{
	static const char *const paths[] = {
		[OP_GET] = "/v3/kv/range",
		[OP_PUT] = "/v3/kv/put",
		[OP_DEL] = "/v3/kv/deleterange",
		[OP_GRANT] = "/v3/lease/grant",
		[OP_KEEPALIVE] = "/v3/lease/keepalive",
		[OP_CAMPAIGN] = "/v3/kv/txn",
		[OP_DEPOSE] = "/v3/kv/txn",
	};
	struct etcd *e = op->e;
	struct evhttp_request *req;

	req = evhttp_request_new(op_done, op);
	if (!req)
		return -ENOMEM;
	op->member = op_member(op);
	if (op_body(op, evhttp_request_get_output_buffer(req)) ||
	    xfer_etcd_add_headers(e, op->member, req)) {
		evhttp_request_free(req);
		return -ENOMEM;
	}
	event_base_gettimeofday_cached(e->env.base, &op->sent);
	xfer_etcd_op_move(op, &e->inflight);
	/* On failure evhttp has dropped the request, without callback. */
	if (evhttp_make_request(e->members[op->member].kv, req,
				EVHTTP_REQ_POST, paths[op->kind])) {
		xfer_etcd_op_move(op, NULL);
		return -EIO;
	}
	return 0;
}

int xfer_etcd_op_send(struct etcd_op *op)
{
	event_base_gettimeofday_cached(op->e->env.base, &op->made);
	op->tried = 0;
	op->served = false;
	return op_try(op);
}

static int64_t ms_since(struct etcd *e, const struct timeval *t)
{
	struct timeval now;

	event_base_gettimeofday_cached(e->env.base, &now);
	return (int64_t)(now.tv_sec - t->tv_sec) * 1000 +
	       (now.tv_usec - t->tv_usec) / 1000;
}

void xfer_etcd_unpark(evutil_socket_t fd, short what, void *arg)
{
	struct etcd *e = arg;
	struct etcd_op_q q = TAILQ_HEAD_INITIALIZER(q);
	struct etcd_op *op;
	int ret;

	(void)fd;
	(void)what;
	TAILQ_CONCAT(&q, &e->parked, link);
	while ((op = TAILQ_FIRST(&q))) {
		op->q = NULL;
		TAILQ_REMOVE(&q, op, link);
		op->tried = 0;
		op->served = false;
		ret = op_try(op);
		if (ret)
			op->answered(op, ret, NULL);
	}
}

/* The HTTP status of @p op's answer and its JSON body in *root, or a
 * negative errno where none came: evhttp passes no request when the
 * connection broke, a request without status when the connect failed. */
static int answer(struct etcd_op *op, struct evhttp_request *req,
		  yajl_val *root)
{
	int st = req ? evhttp_request_get_response_code(req) : 0;

	*root = NULL;
	if (st) {
		*root = xfer_etcd_parse_body(req);
		return st;
	}
	if (ms_since(op->e, &op->sent) >= op->e->timeout_s * 1000)
		return -ETIMEDOUT;
	return req ? -ECONNREFUSED : -EIO;
}

int xfer_etcd_http_errno(struct etcd *e, const char *what, int st,
			 yajl_val root)
{
	const char *msg = YAJL_GET_STRING(xfer_etcd_json_get(root, "message",
							     NULL));

	xfer_log(XFER_LOG_WARN, "etcd %s: %s: HTTP %d %s", e->names, what,
		 st, msg ? msg : "");
	switch (st) {
	case HTTP_BADREQUEST:
		return -EINVAL;
	case 429:
	case HTTP_SERVUNAVAIL:
		return -EAGAIN;
	case 504:
		return -ETIMEDOUT;
	default:
		return -EIO;
	}
}

/* What a member that could not serve @p op said, for the log. */
static const char *why_failed(int st, yajl_val root)
{
	const char *msg = YAJL_GET_STRING(xfer_etcd_json_get(root, "message",
							     NULL));

	if (!msg)
		msg = YAJL_GET_STRING(xfer_etcd_json_get(root, "error",
							 "message"));
	if (st < 0)
		return strerror(-st);
	return msg ? msg : "unavailable";
}

/*
 * The member of @p op could not serve it (@p st: no answer, or 503/504
 * with @p root). @return true if it goes on (to the next member, or
 * parked for another round); false, with the error it ends with in *st,
 * once every member had its chance.
 */
static bool op_next(struct etcd_op *op, int *st, yajl_val root)
{
	struct etcd *e = op->e;
	int64_t age = ms_since(e, &op->made);
	int ret;

	if (*st == -ETIMEDOUT || *st > 0)
		op->served = true;
	xfer_etcd_member_failed(e, op->member, why_failed(*st, root));
	if (*st < 0)
		e->on_member_down(e, op->member, *st);
	if (age >= ETCD_CALL_MS) {
		*st = -ETIMEDOUT;
		return false;
	}
	op->tried |= 1u << op->member;
	if (op->tried != (1u << e->nmembers) - 1) {
		ret = op_try(op);
		if (!ret)
			return true;
		*st = ret;
		return false;
	}
	/* Every member refused: nobody is there to wait for. */
	if (!op->served)
		return false;
	if (age + ETCD_PARK_MS >= ETCD_CALL_MS) {
		*st = -ETIMEDOUT;
		return false;
	}
	if (!TAILQ_FIRST(&e->parked))
		xfer_etcd_arm(e->park_ev, ETCD_PARK_MS);
	xfer_etcd_op_move(op, &e->parked);
	return true;
}

static void kv_up(struct etcd *e)
{
	xfer_etcd_back(e);
	if (e->kv_lost && e->lease) {
		e->kv_lost = false;
		xfer_deferred_reconnected(&e->deferred);
	}
}

static void op_done(struct evhttp_request *req, void *arg)
{
	struct etcd_op *op = arg;
	struct etcd *e = op->e;
	yajl_val root;
	int st = answer(op, req, &root);

	xfer_etcd_op_move(op, NULL);
	if (st < 0 || st == HTTP_SERVUNAVAIL || st == 504) {
		if (op_next(op, &st, root)) {
			yajl_tree_free(root);
			return;
		}
	} else {
		kv_up(e);
	}
	op->answered(op, st, root);
	yajl_tree_free(root);
}
