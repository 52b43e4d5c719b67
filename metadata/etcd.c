/*
 * etcd metadata through the v3 JSON gateway (grpc-gateway) with evhttp,
 * all on the control reactor. Keys and values travel as base64 in JSON
 * bodies; int64 fields come back as JSON strings. Every put carries this
 * engine's lease, kept alive every TTL/3, so the keys of an engine that
 * died expire (etcd_lease.c). A streaming watch on the prefix reports
 * changes (etcd_watch.c). This file: the ops and the kv requests.
 *
 * evhttp callbacks never call the user: finished calls and notifications
 * queue up and run from the deferred queue, so a user callback may close
 * the store without freeing evhttp's state under its feet, and no
 * callback ever runs inside a call (evhttp may call back synchronously
 * when a connect fails at once).
 */
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>

#include "core/log_internal.h"
#include "metadata/store.h"
#include "metadata/etcd_internal.h"
#include "metadata/resolve_internal.h"

#define ETCD_SCHEME "etcd://"

/* ---- ops and their results ---- */

struct etcd_op *etcd_op_new(struct etcd *e, enum etcd_op_kind kind,
			    const char *key, const char *value, size_t vlen,
			    xfer_store_cb cb, void *arg)
{
	size_t klen = key ? strlen(key) : 0;
	struct etcd_op *op = calloc(1, sizeof(*op) + klen + 1 + vlen);

	if (!op)
		return NULL;
	op->e = e;
	op->kind = kind;
	op->cb = cb;
	op->arg = arg;
	if (klen)
		memcpy(op->key, key, klen);
	op->value = op->key + klen + 1;
	if (vlen)
		memcpy(op->value, value, vlen);
	op->vlen = vlen;
	return op;
}

void etcd_op_move(struct etcd_op *op, struct etcd_op_q *q)
{
	if (op->q)
		TAILQ_REMOVE(op->q, op, link);
	op->q = q;
	if (q)
		TAILQ_INSERT_TAIL(q, op, link);
}

void etcd_op_free(struct etcd_op *op)
{
	etcd_op_move(op, NULL);
	free(op->res);
	free(op);
}

static void op_deliver(struct xfer_deferred_item *it, bool drop)
{
	struct etcd_op *op = container_of(it, struct etcd_op, done);

	if (!drop)
		op->cb(op->err, op->res, op->res_len, op->arg);
	etcd_op_free(op);
}

void etcd_finish(struct etcd_op *op, int err)
{
	op->err = err;
	etcd_op_move(op, NULL);
	xfer_deferred_push(&op->e->deferred, &op->done, op_deliver);
}

/* ---- outages ---- */

void etcd_outage(struct etcd *e, const char *why)
{
	if (e->warned)
		return;
	xfer_log(XFER_LOG_WARN, "etcd %s: %s; retrying", e->hostport, why);
	e->warned = true;
}

void etcd_back(struct etcd *e)
{
	if (!e->warned)
		return;
	xfer_log(XFER_LOG_INFO, "etcd %s: reachable again", e->hostport);
	e->warned = false;
}

void etcd_arm(struct event *ev, int ms)
{
	struct timeval tv = { ms / 1000, ms % 1000 * 1000 };

	evtimer_add(ev, &tv);
}

int etcd_backoff(int *ms)
{
	int now = *ms;

	*ms = now * 2 < ETCD_BACKOFF_MAX_MS ? now * 2 : ETCD_BACKOFF_MAX_MS;
	return now;
}

/* ---- requests on the kv connection ---- */

/* Go's HTTP/1.1 server answers 400 without a Host header; evhttp adds
 * none. */
int etcd_add_headers(struct etcd *e, struct evhttp_request *req)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);

	return evhttp_add_header(h, "Host", e->hostport) ||
	       evhttp_add_header(h, "Content-Type", "application/json");
}

static void op_done(struct evhttp_request *req, void *arg);

int etcd_op_send(struct etcd_op *op)
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
		      etcd_add_b64_field(b, "key", op->key, strlen(op->key)) ||
		      evbuffer_add(b, ",", 1) ||
		      etcd_add_b64_field(b, "value", op->value, op->vlen) ||
		      evbuffer_add_printf(b, ",\"lease\":%" PRId64 "}",
					  op->lease) < 0;
		break;
	default:
		bad = evbuffer_add(b, "{", 1) ||
		      etcd_add_b64_field(b, "key", op->key, strlen(op->key)) ||
		      evbuffer_add(b, "}", 1);
		break;
	}
	if (bad || etcd_add_headers(e, req)) {
		evhttp_request_free(req);
		return -ENOMEM;
	}
	event_base_gettimeofday_cached(e->env.base, &op->sent);
	etcd_op_move(op, &e->inflight);
	/* On failure evhttp has dropped the request, without callback. */
	if (evhttp_make_request(e->kv, req, EVHTTP_REQ_POST,
				paths[op->kind])) {
		etcd_op_move(op, NULL);
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
		*root = etcd_parse_body(req);
		return st;
	}
	event_base_gettimeofday_cached(op->e->env.base, &now);
	if ((now.tv_sec - op->sent.tv_sec) * 1000 +
	    (now.tv_usec - op->sent.tv_usec) / 1000 >= ETCD_TIMEOUT_S * 1000)
		return -ETIMEDOUT;
	return req ? -ECONNREFUSED : -EIO;
}

int etcd_http_errno(struct etcd *e, const char *what, int st, yajl_val root)
{
	const char *msg = YAJL_GET_STRING(etcd_json_get(root, "message", NULL));

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

/* The result of a get, put or del: queued for the user, or a put sent
 * again when its lease was gone (expired in an outage, revoked). */
static void user_done(struct etcd *e, struct etcd_op *op, int st,
		      yajl_val root)
{
	const char *b64;
	yajl_val kvs;
	ssize_t n;

	if (op->kind == OP_PUT && st == HTTP_NOTFOUND && !op->retried) {
		op->retried = true;
		if (op->lease == e->lease)
			etcd_lease_lost(e);
		etcd_put_start(op);
		return;
	}
	if (st < 0) {
		etcd_finish(op, st);
		return;
	}
	if (st != HTTP_OK) {
		etcd_finish(op, etcd_http_errno(e, op->key, st, root));
		return;
	}
	kvs = etcd_json_get(root, "kvs", NULL);
	if (!root || op->kind != OP_GET) {
		etcd_finish(op, root ? 0 : -EIO);
		return;
	}
	if (!YAJL_IS_ARRAY(kvs) || !kvs->u.array.len) {
		etcd_finish(op, -ENOENT);
		return;
	}
	/* An empty value is left out. */
	b64 = YAJL_GET_STRING(etcd_json_get(kvs->u.array.values[0], "value",
					    NULL));
	n = etcd_b64_decode(b64 ? b64 : "", &op->res);
	if (n >= 0)
		op->res_len = (size_t)n;
	etcd_finish(op, n >= 0 ? 0 : n == -ENOMEM ? -ENOMEM : -EIO);
}

/* A kv request got no answer: the server is out of reach. */
static void kv_down(struct etcd *e, int err, bool user)
{
	/* Before the first answer, only failed calls need a reconnect. */
	if (e->up_once || user)
		e->kv_lost = true;
	etcd_outage(e, strerror(-err));
	/* A watch on a dead path (a partition) might never see an error. */
	if (e->watch_up) {
		evhttp_cancel_request(e->wreq);
		etcd_watch_lost(e, strerror(-err));
	}
}

static void kv_up(struct etcd *e)
{
	e->up_once = true;
	etcd_back(e);
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

	etcd_op_move(op, NULL);
	switch (op->kind) {
	case OP_GRANT:
		etcd_op_free(op);
		etcd_grant_done(e, st, root);
		break;
	case OP_KEEPALIVE:
		etcd_keepalive_done(e, op->lease, st, root);
		etcd_op_free(op);
		break;
	default:
		user_done(e, op, st, root);
		break;
	}
	yajl_tree_free(root);
	if (st < 0)
		kv_down(e, st, user);
	else
		kv_up(e);
}

/* ---- the ops ---- */

/* "etcd://host:port", or Mooncake's bare "host:port"; [v6]:port. */
static int etcd_accepts(const char *conn)
{
	if (!strncasecmp(conn, ETCD_SCHEME, strlen(ETCD_SCHEME)))
		return 1;
	/* No other scheme, and a port: not "p2p", "P2PHANDSHAKE". */
	return !strstr(conn, "://") && strchr(conn, ':');
}

static int parse_conn(const char *conn, char *host, size_t size,
		      uint16_t *port)
{
	const char *h = conn, *end, *p;
	unsigned long v;
	char *q;

	if (!strncasecmp(h, ETCD_SCHEME, strlen(ETCD_SCHEME)))
		h += strlen(ETCD_SCHEME);
	if (*h == '[') {
		end = strchr(++h, ']');
		if (!end || end[1] != ':')
			return -1;
		p = end + 2;
	} else {
		end = strchr(h, ':');
		if (!end || strchr(end + 1, ':'))
			return -1;
		p = end + 1;
	}
	if (end == h || (size_t)(end - h) >= size ||
	    *p < '0' || *p > '9')
		return -1;
	v = strtoul(p, &q, 10);
	if (*q || !v || v > 65535)
		return -1;
	memcpy(host, h, (size_t)(end - h));
	host[end - h] = '\0';
	*port = (uint16_t)v;
	return 0;
}

/* etcd's range end of a prefix: its last byte below 0xff plus one, what
 * follows cut; "\0" (to the end) when there is none. */
static char *prefix_end(const char *prefix, size_t *len)
{
	size_t n = strlen(prefix);
	char *end = malloc(n + 1);

	if (!end)
		return NULL;
	memcpy(end, prefix, n + 1);
	while (n && (unsigned char)end[n - 1] == 0xff)
		n--;
	if (n)
		end[n - 1]++;
	else
		end[0] = '\0';
	*len = n ? n : 1;
	return end;
}

static void etcd_release(struct xfer_deferred *d);

static int etcd_open(const char *conn, const struct xfer_store_env *env,
		     struct xfer_store **out)
{
	char host[256], addr[NI_MAXHOST];
	struct event_base *base = env->base;
	struct etcd *e;
	uint16_t port;
	bool v6;
	int ret;

	if (parse_conn(conn, host, sizeof(host), &port)) {
		xfer_log(XFER_LOG_ERROR, "etcd: bad connection string \"%s\" "
			 "(want etcd://host:port)", conn);
		return -EINVAL;
	}
	ret = xfer_store_resolve(host, addr, sizeof(addr));
	if (ret) {
		xfer_log(XFER_LOG_ERROR, "etcd: cannot resolve \"%s\": %s",
			 host, gai_strerror(ret));
		return -EINVAL;
	}
	if (env->user || env->password)
		xfer_log(XFER_LOG_WARN, "etcd: credentials are not supported; "
			 "connecting without");
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->base.ops = &xfer_etcd_ops;
	e->env = *env;
	v6 = strchr(host, ':');
	snprintf(e->hostport, sizeof(e->hostport), "%s%s%s:%u", v6 ? "[" : "",
		 host, v6 ? "]" : "", port);
	TAILQ_INIT(&e->inflight);
	TAILQ_INIT(&e->waiting);
	e->lease_backoff_ms = e->watch_backoff_ms = ETCD_BACKOFF_MIN_MS;
	e->prefix = strdup(env->prefix);
	if (!e->prefix)
		goto err_free;
	e->env.prefix = e->prefix;
	e->range_end = prefix_end(e->prefix, &e->range_end_len);
	if (!e->range_end)
		goto err_free_prefix;
	e->kv = evhttp_connection_base_new(base, NULL, addr, port);
	if (!e->kv)
		goto err_free_end;
	evhttp_connection_set_timeout(e->kv, ETCD_TIMEOUT_S);
	evhttp_connection_set_retries(e->kv, 0);
	evhttp_connection_set_max_body_size(e->kv, ETCD_MAX_MSG);
	/* The watch streams for ever: a connection of its own. */
	e->wconn = evhttp_connection_base_new(base, NULL, addr, port);
	if (!e->wconn)
		goto err_free_kv;
	evhttp_connection_set_timeout(e->wconn, ETCD_TIMEOUT_S);
	evhttp_connection_set_retries(e->wconn, 0);
	e->wbuf = evbuffer_new();
	if (!e->wbuf)
		goto err_free_wconn;
	e->lease_ev = evtimer_new(base, etcd_lease_tick, e);
	if (!e->lease_ev)
		goto err_free_wbuf;
	e->watch_ev = evtimer_new(base, etcd_watch_start, e);
	if (!e->watch_ev)
		goto err_free_lease_ev;
	if (xfer_deferred_init(&e->deferred, base, &e->env, etcd_release))
		goto err_free_watch_ev;
	etcd_lease_grant(e);
	etcd_watch_start(-1, 0, e);
	*out = &e->base;
	return 0;

err_free_watch_ev:
	event_free(e->watch_ev);
err_free_lease_ev:
	event_free(e->lease_ev);
err_free_wbuf:
	evbuffer_free(e->wbuf);
err_free_wconn:
	evhttp_connection_free(e->wconn);
err_free_kv:
	evhttp_connection_free(e->kv);
err_free_end:
	free(e->range_end);
err_free_prefix:
	free(e->prefix);
err_free:
	free(e);
	return -ENOMEM;
}

static void call_start(struct xfer_store *s, enum etcd_op_kind kind,
		       const char *key, const char *value, size_t len,
		       xfer_store_cb cb, void *arg)
{
	struct etcd *e = container_of(s, struct etcd, base);
	struct etcd_op *op = etcd_op_new(e, kind, key, value, len, cb, arg);
	int ret;

	if (!op) {
		/* No way to call back without memory: the call is lost. */
		xfer_log(XFER_LOG_ERROR, "etcd %s: no memory for \"%s\"",
			 e->hostport, key);
		return;
	}
	if (kind == OP_PUT) {
		etcd_put_start(op);
		return;
	}
	ret = etcd_op_send(op);
	if (ret)
		etcd_finish(op, ret);
}

static void etcd_get(struct xfer_store *s, const char *key, xfer_store_cb cb,
		     void *arg)
{
	call_start(s, OP_GET, key, NULL, 0, cb, arg);
}

static void etcd_put(struct xfer_store *s, const char *key,
		     const char *value, size_t len, xfer_store_cb cb,
		     void *arg)
{
	call_start(s, OP_PUT, key, value, len, cb, arg);
}

static void etcd_del(struct xfer_store *s, const char *key, xfer_store_cb cb,
		     void *arg)
{
	call_start(s, OP_DEL, key, NULL, 0, cb, arg);
}

static void etcd_free(struct etcd *e)
{
	struct etcd_op_q *qs[] = { &e->inflight, &e->waiting };
	struct etcd_op *op;

	/* Freeing a connection drops its requests without calling back. */
	evhttp_connection_free(e->kv);
	evhttp_connection_free(e->wconn);
	for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++)
		while ((op = TAILQ_FIRST(qs[i])))
			etcd_op_free(op);
	xfer_deferred_clear(&e->deferred);
	event_free(e->watch_ev);
	event_free(e->lease_ev);
	evbuffer_free(e->wbuf);
	free(e->range_end);
	free(e->prefix);
	free(e);
}

static void etcd_release(struct xfer_deferred *d)
{
	etcd_free(container_of(d, struct etcd, deferred));
}

/* From a callback of ours the store is freed when it returns. */
static void etcd_close(struct xfer_store *s)
{
	xfer_deferred_release(&container_of(s, struct etcd, base)->deferred);
}

const struct xfer_store_ops xfer_etcd_ops = {
	.name = "etcd",
	.flags = XFER_STORE_KEEPS,
	.accepts = etcd_accepts,
	.open = etcd_open,
	.get = etcd_get,
	.put = etcd_put,
	.del = etcd_del,
	.close = etcd_close,
};
