/*
 * The etcd backend's request plumbing, under the ops (etcd.c), the lease
 * (etcd_lease.c) and the watch (etcd_watch.c): requests allocated, sent
 * on the kv connection and answered; results queued for the user; the
 * gateway's HTTP errors mapped to errnos; outages logged once; retry
 * timers and their backoff. It calls nothing above it: an answer goes to
 * the callback its request was made with, a server out of reach to the
 * e->on_kv_down etcd.c sets.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>

#include "core/log_internal.h"
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
	op->err = err;
	xfer_etcd_op_move(op, NULL);
	xfer_deferred_push(&op->e->deferred, &op->done, op_deliver);
}

/* ---- outages and retries ---- */

void xfer_etcd_outage(struct etcd *e, const char *why)
{
	if (e->warned)
		return;
	xfer_log(XFER_LOG_WARN, "etcd %s: %s; retrying", e->hostport, why);
	e->warned = true;
}

void xfer_etcd_back(struct etcd *e)
{
	if (!e->warned)
		return;
	xfer_log(XFER_LOG_INFO, "etcd %s: reachable again", e->hostport);
	e->warned = false;
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

/* ---- requests on the kv connection ---- */

/* Go's HTTP/1.1 server answers 400 without a Host header; evhttp adds
 * none. */
int xfer_etcd_add_headers(struct etcd *e, struct evhttp_request *req)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);

	return evhttp_add_header(h, "Host", e->hostport) ||
	       evhttp_add_header(h, "Content-Type", "application/json");
}

static void op_done(struct evhttp_request *req, void *arg);

int xfer_etcd_op_send(struct etcd_op *op)
{
	static const char *const paths[] = {
		[OP_GET] = "/v3/kv/range",
		[OP_PUT] = "/v3/kv/put",
		[OP_DEL] = "/v3/kv/deleterange",
		[OP_GRANT] = "/v3/lease/grant",
		[OP_KEEPALIVE] = "/v3/lease/keepalive",
	};
	struct etcd *e = op->e;
	struct evhttp_request *req;
	struct evbuffer *b;
	int bad;

	req = evhttp_request_new(op_done, op);
	if (!req)
		return -ENOMEM;
	b = evhttp_request_get_output_buffer(req);
	switch (op->kind) {
	case OP_GRANT:
		bad = evbuffer_add_printf(b, "{\"TTL\":%d}", ETCD_TTL_S) < 0;
		break;
	case OP_KEEPALIVE:
		bad = evbuffer_add_printf(b, "{\"ID\":%" PRId64 "}",
					  op->lease) < 0;
		break;
	case OP_PUT:
		bad = evbuffer_add(b, "{", 1) ||
		      xfer_etcd_add_b64_field(b, "key", op->key,
					      strlen(op->key)) ||
		      evbuffer_add(b, ",", 1) ||
		      xfer_etcd_add_b64_field(b, "value", op->value,
					      op->vlen) ||
		      evbuffer_add_printf(b, ",\"lease\":%" PRId64 "}",
					  op->lease) < 0;
		break;
	default:
		bad = evbuffer_add(b, "{", 1) ||
		      xfer_etcd_add_b64_field(b, "key", op->key,
					      strlen(op->key)) ||
		      evbuffer_add(b, "}", 1);
		break;
	}
	if (bad || xfer_etcd_add_headers(e, req)) {
		evhttp_request_free(req);
		return -ENOMEM;
	}
	event_base_gettimeofday_cached(e->env.base, &op->sent);
	xfer_etcd_op_move(op, &e->inflight);
	/* On failure evhttp has dropped the request, without callback. */
	if (evhttp_make_request(e->kv, req, EVHTTP_REQ_POST,
				paths[op->kind])) {
		xfer_etcd_op_move(op, NULL);
		return -EIO;
	}
	return 0;
}

/* The HTTP status of @p op's answer and its JSON body in *root, or a
 * negative errno where none came: evhttp passes no request when the
 * connection broke, a request without status when the connect failed. */
static int answer(struct etcd_op *op, struct evhttp_request *req,
		  yajl_val *root)
{
	int st = req ? evhttp_request_get_response_code(req) : 0;
	struct timeval now;

	*root = NULL;
	if (st) {
		*root = xfer_etcd_parse_body(req);
		return st;
	}
	event_base_gettimeofday_cached(op->e->env.base, &now);
	if ((now.tv_sec - op->sent.tv_sec) * 1000 +
	    (now.tv_usec - op->sent.tv_usec) / 1000 >= ETCD_TIMEOUT_S * 1000)
		return -ETIMEDOUT;
	return req ? -ECONNREFUSED : -EIO;
}

int xfer_etcd_http_errno(struct etcd *e, const char *what, int st,
			 yajl_val root)
{
	const char *msg = YAJL_GET_STRING(xfer_etcd_json_get(root, "message",
							     NULL));

	xfer_log(XFER_LOG_WARN, "etcd %s: %s: HTTP %d %s", e->hostport, what,
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

/* A kv request got no answer: the server is out of reach. */
static void kv_down(struct etcd *e, int err, bool user)
{
	/* Before the first answer, only failed calls need a reconnect. */
	if (e->up_once || user)
		e->kv_lost = true;
	xfer_etcd_outage(e, strerror(-err));
	e->on_kv_down(e, err);
}

static void kv_up(struct etcd *e)
{
	e->up_once = true;
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
	bool user = op->kind <= OP_DEL;
	yajl_val root;
	int st = answer(op, req, &root);

	xfer_etcd_op_move(op, NULL);
	op->answered(op, st, root);
	yajl_tree_free(root);
	if (st < 0)
		kv_down(e, st, user);
	else
		kv_up(e);
}
