/*
 * etcd metadata through the v3 JSON gateway (grpc-gateway) with evhttp,
 * all on the control reactor. Keys and values travel as base64 in JSON
 * bodies; int64 fields come back as JSON strings. Every put carries this
 * engine's lease, kept alive every TTL/3, so the keys of an engine that
 * died expire. A streaming watch on the prefix reports changes.
 *
 * evhttp callbacks never call the user: finished calls and notifications
 * queue up and run from an event of ours, so a user callback may close
 * the store without freeing evhttp's state under its feet, and no
 * callback ever runs inside a call (evhttp may call back synchronously
 * when a connect fails at once).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <yajl/yajl_tree.h>

#include "core/log_internal.h"
#include "metadata/store.h"

#define ETCD_SCHEME "etcd://"
#define ETCD_TTL_S 10             /* lease TTL asked for */
#define ETCD_TIMEOUT_S 5          /* connect, and each answer */
#define ETCD_BACKOFF_MIN_MS 100   /* retries of the watch and the lease */
#define ETCD_BACKOFF_MAX_MS 5000
#define ETCD_MAX_MSG (64 << 20)   /* longest answer or watch line, bytes */

enum op_kind {
	OP_GET, OP_PUT, OP_DEL,                /* user calls */
	OP_GRANT, OP_KEEPALIVE,                /* the lease */
	OP_CHANGED, OP_RESYNC, OP_RECONNECTED, /* notifications */
};

TAILQ_HEAD(op_q, etcd_op);

/* A request to the server or a notification for the user. */
struct etcd_op {
	TAILQ_ENTRY(etcd_op) link;
	struct op_q *q;          /* the queue it is in, or NULL */
	struct etcd *e;
	enum op_kind kind;
	struct timeval sent;
	int64_t lease;           /* put, keepalive: the lease it went with */
	bool retried;            /* put: sent again after a lost lease */
	int err;
	char *res;               /* get: the value, res_len bytes */
	size_t res_len;
	xfer_store_cb cb;
	void *arg;
	char *value;             /* put: vlen bytes, after key */
	size_t vlen;
	char key[];
};

struct etcd {
	struct xfer_store base;
	struct xfer_store_env env;
	char *prefix;
	char *range_end;          /* the watch: keys in [prefix, range_end) */
	size_t range_end_len;
	char hostport[300];       /* Host header and log messages */
	struct evhttp_connection *kv, *wconn;
	struct event *lease_ev;   /* keepalive tick, or grant retry */
	struct event *watch_ev;   /* watch retry */
	struct event *dispatch_ev;
	/* Requests on kv; puts waiting for a lease; ops for the user. */
	struct op_q inflight, waiting, done;
	struct etcd_op *grant;    /* in flight */
	int64_t lease;            /* 0: none */
	int ttl_s;
	int lease_backoff_ms, watch_backoff_ms;
	bool up_once;             /* kv got an answer once */
	bool kv_lost;             /* a call failed, or the lease: tell the
				     user when kv works again */
	bool warned;              /* this outage is logged */
	struct evhttp_request *wreq;
	struct evbuffer *wbuf;    /* watch bytes short of a full line */
	bool watch_up;            /* created, streaming */
	bool watch_missed;        /* events may have been missed */
	bool dispatching, closing;
};

/* ---- base64 (RFC 4648, padded) ---- */

static const char b64_chars[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int b64_add(struct evbuffer *out, const void *src, size_t len)
{
	const unsigned char *s = src;
	struct evbuffer_iovec v;
	size_t n = (len + 2) / 3 * 4;
	uint32_t w;
	char *d;

	if (!n)
		return 0;
	if (evbuffer_reserve_space(out, n, &v, 1) < 1)
		return -1;
	d = v.iov_base;
	for (; len >= 3; s += 3, len -= 3) {
		w = (uint32_t)s[0] << 16 | s[1] << 8 | s[2];
		*d++ = b64_chars[w >> 18];
		*d++ = b64_chars[w >> 12 & 63];
		*d++ = b64_chars[w >> 6 & 63];
		*d++ = b64_chars[w & 63];
	}
	if (len) {
		w = (uint32_t)s[0] << 16 | (len > 1 ? s[1] << 8 : 0);
		*d++ = b64_chars[w >> 18];
		*d++ = b64_chars[w >> 12 & 63];
		*d++ = len > 1 ? b64_chars[w >> 6 & 63] : '=';
		*d++ = '=';
	}
	v.iov_len = n;
	return evbuffer_commit_space(out, &v, 1);
}

static int b64_val(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Decode @p s into a malloc'd *out (NUL-ended too). @return its length,
 * -EPROTO (not base64) or -ENOMEM. */
static ssize_t b64_decode(const char *s, char **out)
{
	size_t n = strlen(s), o = 0;
	unsigned acc = 0;
	int bits = 0, v;
	char *d;

	if (n % 4)
		return -EPROTO;
	for (int pad = 0; pad < 2 && n && s[n - 1] == '='; pad++)
		n--;
	d = malloc(n / 4 * 3 + 3);
	if (!d)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		v = b64_val(s[i]);
		if (v < 0) {
			free(d);
			return -EPROTO;
		}
		acc = acc << 6 | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			d[o++] = (char)(acc >> bits);
		}
	}
	d[o] = '\0';
	*out = d;
	return (ssize_t)o;
}

/* ---- JSON ---- */

/* Append "name":"<base64 of data>". */
static int add_b64_field(struct evbuffer *b, const char *name,
			 const void *data, size_t len)
{
	if (evbuffer_add_printf(b, "\"%s\":\"", name) < 0 ||
	    b64_add(b, data, len) || evbuffer_add(b, "\"", 1))
		return -1;
	return 0;
}

static yajl_val json_get(yajl_val v, const char *a, const char *b)
{
	const char *path[] = { a, b, NULL };

	return yajl_tree_get(v, path, yajl_t_any);
}

/* An int64 field: the gateway writes them as strings, and leaves out
 * zeros. */
static int64_t json_i64(yajl_val v)
{
	if (YAJL_IS_STRING(v))
		return strtoll(v->u.string, NULL, 10);
	return YAJL_IS_INTEGER(v) ? YAJL_GET_INTEGER(v) : 0;
}

/* The whole body of an answer, parsed; NULL if it is not JSON. */
static yajl_val parse_body(struct evhttp_request *req)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	const char *s;

	if (evbuffer_add(in, "", 1))
		return NULL;
	s = (const char *)evbuffer_pullup(in, -1);
	return s ? yajl_tree_parse(s, NULL, 0) : NULL;
}

/* ---- the user's side ---- */

static struct etcd_op *op_new(struct etcd *e, enum op_kind kind,
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

static void op_move(struct etcd_op *op, struct op_q *q)
{
	if (op->q)
		TAILQ_REMOVE(op->q, op, link);
	op->q = q;
	if (q)
		TAILQ_INSERT_TAIL(q, op, link);
}

static void op_free(struct etcd_op *op)
{
	op_move(op, NULL);
	free(op->res);
	free(op);
}

/* Queue @p op for the user; it is called back from dispatch(). */
static void finish(struct etcd_op *op, int err)
{
	op->err = err;
	op_move(op, &op->e->done);
	event_active(op->e->dispatch_ev, EV_TIMEOUT, 0);
}

static void notify(struct etcd *e, enum op_kind kind, const char *key)
{
	struct etcd_op *op;

	if (kind == OP_RECONNECTED ? !e->env.reconnected : !e->env.changed)
		return;
	op = op_new(e, kind, key, NULL, 0, NULL, NULL);
	if (!op) {
		xfer_log(XFER_LOG_ERROR, "etcd %s: no memory for a "
			 "notification", e->hostport);
		return;
	}
	finish(op, 0);
}

static void etcd_free(struct etcd *e);

static void dispatch(evutil_socket_t fd, short what, void *arg)
{
	struct etcd *e = arg;
	struct etcd_op *op;

	(void)fd;
	(void)what;
	e->dispatching = true;
	while (!e->closing && (op = TAILQ_FIRST(&e->done))) {
		op_move(op, NULL);
		switch (op->kind) {
		case OP_CHANGED:
			e->env.changed(op->key, e->env.arg);
			break;
		case OP_RESYNC:
			e->env.changed(NULL, e->env.arg);
			break;
		case OP_RECONNECTED:
			e->env.reconnected(e->env.arg);
			break;
		default:
			op->cb(op->err, op->res, op->res_len, op->arg);
			break;
		}
		op_free(op);
	}
	e->dispatching = false;
	if (e->closing)
		etcd_free(e);
}

/* ---- outages ---- */

static void outage(struct etcd *e, const char *why)
{
	if (e->warned)
		return;
	xfer_log(XFER_LOG_WARN, "etcd %s: %s; retrying", e->hostport, why);
	e->warned = true;
}

static void back(struct etcd *e)
{
	if (!e->warned)
		return;
	xfer_log(XFER_LOG_INFO, "etcd %s: reachable again", e->hostport);
	e->warned = false;
}

static void arm(struct event *ev, int ms)
{
	struct timeval tv = { ms / 1000, ms % 1000 * 1000 };

	evtimer_add(ev, &tv);
}

static int backoff(int *ms)
{
	int now = *ms;

	*ms = now * 2 < ETCD_BACKOFF_MAX_MS ? now * 2 : ETCD_BACKOFF_MAX_MS;
	return now;
}

/* ---- the watch ---- */

static void watch_done(struct evhttp_request *req, void *arg);
static void watch_chunk(struct evhttp_request *req, void *arg);

/* Go's HTTP/1.1 server answers 400 without a Host header; evhttp adds
 * none. */
static int add_headers(struct etcd *e, struct evhttp_request *req)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);

	return evhttp_add_header(h, "Host", e->hostport) ||
	       evhttp_add_header(h, "Content-Type", "application/json");
}

/* The stream is gone: start it again after a backoff, and tell the user
 * then that changes may have been missed. */
static void watch_lost(struct etcd *e, const char *why)
{
	e->wreq = NULL;
	e->watch_up = false;
	e->watch_missed = true;
	evbuffer_drain(e->wbuf, evbuffer_get_length(e->wbuf));
	outage(e, why);
	arm(e->watch_ev, backoff(&e->watch_backoff_ms));
}

static void watch_start(evutil_socket_t fd, short what, void *arg)
{
	struct etcd *e = arg;
	struct evhttp_request *req;
	struct evbuffer *b;

	(void)fd;
	(void)what;
	req = evhttp_request_new(watch_done, e);
	if (!req)
		goto err;
	evhttp_request_set_chunked_cb(req, watch_chunk);
	b = evhttp_request_get_output_buffer(req);
	/* An empty prefix watches from key "\0": every key. */
	if (evbuffer_add_printf(b, "{\"create_request\":{") < 0 ||
	    add_b64_field(b, "key", e->prefix, strlen(e->prefix) ?: 1) ||
	    evbuffer_add(b, ",", 1) ||
	    add_b64_field(b, "range_end", e->range_end, e->range_end_len) ||
	    evbuffer_add(b, "}}", 2) || add_headers(e, req)) {
		evhttp_request_free(req);
		goto err;
	}
	e->wreq = req;
	if (evhttp_make_request(e->wconn, req, EVHTTP_REQ_POST, "/v3/watch"))
		goto err;
	return;
err:
	watch_lost(e, "cannot start the watch");
}

static void watch_created(struct etcd *e)
{
	e->watch_up = true;
	e->watch_backoff_ms = ETCD_BACKOFF_MIN_MS;
	/* A quiet stream is no failure; a dead one shows on the kv side,
	 * which then starts the watch again (kv_down). */
	bufferevent_set_timeouts(evhttp_connection_get_bufferevent(e->wconn),
				 NULL, NULL);
	back(e);
	if (e->watch_missed) {
		e->watch_missed = false;
		notify(e, OP_RESYNC, NULL);
	}
}

/* A put or a delete alike (the gateway leaves out "type" for PUT, the
 * default): the key changed. */
static void watch_event(struct etcd *e, yajl_val ev)
{
	const char *b64 = YAJL_GET_STRING(json_get(ev, "kv", "key"));
	size_t plen = strlen(e->prefix);
	char *key;
	ssize_t n;

	if (!b64 || (n = b64_decode(b64, &key)) < 0)
		return;
	/* Only keys under the prefix, and only C strings. */
	if ((size_t)n >= plen && !memcmp(key, e->prefix, plen) &&
	    strlen(key) == (size_t)n)
		notify(e, OP_CHANGED, key);
	free(key);
}

/* One JSON object of the stream. @return 0, or -EPROTO to start over:
 * an error object, a canceled watch (compaction), garbage. */
static int watch_line(struct etcd *e, const char *line)
{
	yajl_val root = yajl_tree_parse(line, NULL, 0), res, evs;
	int ret = -EPROTO;

	res = json_get(root, "result", NULL);
	if (!YAJL_IS_OBJECT(res) || YAJL_IS_TRUE(json_get(res, "canceled",
							  NULL)))
		goto out;
	if (YAJL_IS_TRUE(json_get(res, "created", NULL)))
		watch_created(e);
	evs = json_get(res, "events", NULL);
	for (size_t i = 0; YAJL_IS_ARRAY(evs) && i < evs->u.array.len; i++)
		watch_event(e, evs->u.array.values[i]);
	ret = 0;
out:
	yajl_tree_free(root);
	return ret;
}

static void watch_chunk(struct evhttp_request *req, void *arg)
{
	struct etcd *e = arg;
	const char *why = "bad watch stream";
	char *line;
	int ret = 0;

	evbuffer_add_buffer(e->wbuf, evhttp_request_get_input_buffer(req));
	while (!ret && (line = evbuffer_readln(e->wbuf, NULL,
					       EVBUFFER_EOL_LF))) {
		if (*line)
			ret = watch_line(e, line);
		free(line);
	}
	if (!ret && evbuffer_get_length(e->wbuf) > ETCD_MAX_MSG) {
		why = "watch message too long";
		ret = -EMSGSIZE;
	}
	if (ret) {
		/* evhttp allows this inside the chunk callback: it frees
		 * the request once we return. */
		evhttp_cancel_request(req);
		watch_lost(e, why);
	}
}

/* The stream ended: the server closed it or the connection failed. */
static void watch_done(struct evhttp_request *req, void *arg)
{
	struct etcd *e = arg;

	if (!req)
		watch_lost(e, "watch connection lost");
	else if (!evhttp_request_get_response_code(req))
		watch_lost(e, "cannot connect");
	else
		watch_lost(e, "watch stream ended");
}

/* ---- requests on the kv connection ---- */

static void op_done(struct evhttp_request *req, void *arg);

static int op_send(struct etcd_op *op)
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
		      add_b64_field(b, "key", op->key, strlen(op->key)) ||
		      evbuffer_add(b, ",", 1) ||
		      add_b64_field(b, "value", op->value, op->vlen) ||
		      evbuffer_add_printf(b, ",\"lease\":%" PRId64 "}",
					  op->lease) < 0;
		break;
	default:
		bad = evbuffer_add(b, "{", 1) ||
		      add_b64_field(b, "key", op->key, strlen(op->key)) ||
		      evbuffer_add(b, "}", 1);
		break;
	}
	if (bad || add_headers(e, req)) {
		evhttp_request_free(req);
		return -ENOMEM;
	}
	event_base_gettimeofday_cached(e->env.base, &op->sent);
	op_move(op, &e->inflight);
	/* On failure evhttp has dropped the request, without callback. */
	if (evhttp_make_request(e->kv, req, EVHTTP_REQ_POST,
				paths[op->kind])) {
		op_move(op, NULL);
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
		*root = parse_body(req);
		return st;
	}
	event_base_gettimeofday_cached(op->e->env.base, &now);
	if ((now.tv_sec - op->sent.tv_sec) * 1000 +
	    (now.tv_usec - op->sent.tv_usec) / 1000 >= ETCD_TIMEOUT_S * 1000)
		return -ETIMEDOUT;
	return req ? -ECONNREFUSED : -EIO;
}

/* An HTTP error from the gateway, logged with etcd's message. */
static int http_errno(struct etcd *e, const char *what, int st,
		      yajl_val root)
{
	const char *msg = YAJL_GET_STRING(json_get(root, "message", NULL));

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

static void lease_grant(struct etcd *e);

static void put_start(struct etcd_op *op)
{
	struct etcd *e = op->e;
	int ret;

	if (!e->lease) {
		op_move(op, &e->waiting);
		lease_grant(e);
		return;
	}
	op->lease = e->lease;
	ret = op_send(op);
	if (ret)
		finish(op, ret);
}

static void lease_lost(struct etcd *e)
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
		finish(w, err);
	}
}

static void lease_grant(struct etcd *e)
{
	struct etcd_op *op;
	int ret = -ENOMEM;

	if (e->grant)
		return;
	evtimer_del(e->lease_ev);
	op = op_new(e, OP_GRANT, NULL, NULL, 0, NULL, NULL);
	if (op) {
		e->grant = op;
		ret = op_send(op);
		if (!ret)
			return;
		e->grant = NULL;
		op_free(op);
	}
	fail_waiting(e, ret);
	arm(e->lease_ev, backoff(&e->lease_backoff_ms));
}

static void grant_done(struct etcd *e, int st, yajl_val root)
{
	int64_t id = json_i64(json_get(root, "ID", NULL));
	int64_t ttl = json_i64(json_get(root, "TTL", NULL));
	struct etcd_op *w;
	int err;

	e->grant = NULL;
	if (st != HTTP_OK || !id || ttl <= 0) {
		err = st < 0 ? st : st == HTTP_OK ? -EIO :
		      http_errno(e, "lease grant", st, root);
		fail_waiting(e, err);
		arm(e->lease_ev, backoff(&e->lease_backoff_ms));
		return;
	}
	e->lease = id;
	e->ttl_s = ttl < INT_MAX / 1000 ? (int)ttl : INT_MAX / 1000;
	e->lease_backoff_ms = ETCD_BACKOFF_MIN_MS;
	arm(e->lease_ev, e->ttl_s * 1000 / 3);
	while ((w = TAILQ_FIRST(&e->waiting)))
		put_start(w);
}

static void keepalive_done(struct etcd *e, int64_t lease, int st,
			   yajl_val root)
{
	yajl_val res = json_get(root, "result", NULL);

	if (lease != e->lease)
		return; /* lost meanwhile; grant_done arms the timer */
	if (st != HTTP_OK || !YAJL_IS_OBJECT(res)) {
		if (st > 0)
			http_errno(e, "lease keepalive", st, root);
		arm(e->lease_ev, backoff(&e->lease_backoff_ms));
		return;
	}
	/* An unknown lease (expired, revoked) comes back with TTL 0. */
	if (json_i64(json_get(res, "TTL", NULL)) <= 0) {
		lease_lost(e);
		lease_grant(e);
		return;
	}
	e->lease_backoff_ms = ETCD_BACKOFF_MIN_MS;
	arm(e->lease_ev, e->ttl_s * 1000 / 3);
}

static void lease_tick(evutil_socket_t fd, short what, void *arg)
{
	struct etcd *e = arg;
	struct etcd_op *op;

	(void)fd;
	(void)what;
	if (!e->lease) {
		lease_grant(e);
		return;
	}
	op = op_new(e, OP_KEEPALIVE, NULL, NULL, 0, NULL, NULL);
	if (!op) {
		arm(e->lease_ev, backoff(&e->lease_backoff_ms));
		return;
	}
	op->lease = e->lease;
	if (op_send(op)) {
		op_free(op);
		arm(e->lease_ev, backoff(&e->lease_backoff_ms));
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
			lease_lost(e);
		put_start(op);
		return;
	}
	if (st < 0) {
		finish(op, st);
		return;
	}
	if (st != HTTP_OK) {
		finish(op, http_errno(e, op->key, st, root));
		return;
	}
	kvs = json_get(root, "kvs", NULL);
	if (!root || op->kind != OP_GET) {
		finish(op, root ? 0 : -EIO);
		return;
	}
	if (!YAJL_IS_ARRAY(kvs) || !kvs->u.array.len) {
		finish(op, -ENOENT);
		return;
	}
	/* An empty value is left out. */
	b64 = YAJL_GET_STRING(json_get(kvs->u.array.values[0], "value", NULL));
	n = b64_decode(b64 ? b64 : "", &op->res);
	if (n >= 0)
		op->res_len = (size_t)n;
	finish(op, n >= 0 ? 0 : n == -ENOMEM ? -ENOMEM : -EIO);
}

/* A kv request got no answer: the server is out of reach. */
static void kv_down(struct etcd *e, int err, bool user)
{
	/* Before the first answer, only failed calls need a reconnect. */
	if (e->up_once || user)
		e->kv_lost = true;
	outage(e, strerror(-err));
	/* A watch on a dead path (a partition) might never see an error. */
	if (e->watch_up) {
		evhttp_cancel_request(e->wreq);
		watch_lost(e, strerror(-err));
	}
}

static void kv_up(struct etcd *e)
{
	e->up_once = true;
	back(e);
	if (e->kv_lost && e->lease) {
		e->kv_lost = false;
		notify(e, OP_RECONNECTED, NULL);
	}
}

static void op_done(struct evhttp_request *req, void *arg)
{
	struct etcd_op *op = arg;
	struct etcd *e = op->e;
	bool user = op->kind <= OP_DEL;
	yajl_val root;
	int st = answer(op, req, &root);

	op_move(op, NULL);
	switch (op->kind) {
	case OP_GRANT:
		op_free(op);
		grant_done(e, st, root);
		break;
	case OP_KEEPALIVE:
		keepalive_done(e, op->lease, st, root);
		op_free(op);
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

/* A numeric address for @p host, resolved once here, where blocking is
 * allowed: evhttp would resolve, blocking, at every connect. IPv4 first,
 * as servers on "localhost" often listen there only. */
static int resolve(const char *host, char *addr, size_t size)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *ai;
	int ret;

	ret = getaddrinfo(host, NULL, &hints, &res);
	if (ret) {
		xfer_log(XFER_LOG_ERROR, "etcd: cannot resolve \"%s\": %s",
			 host, gai_strerror(ret));
		return -EINVAL;
	}
	for (ai = res; ai && ai->ai_family != AF_INET; ai = ai->ai_next)
		;
	if (!ai)
		ai = res;
	ret = getnameinfo(ai->ai_addr, ai->ai_addrlen, addr, size, NULL, 0,
			  NI_NUMERICHOST);
	freeaddrinfo(res);
	if (ret) {
		xfer_log(XFER_LOG_ERROR, "etcd: \"%s\": %s", host,
			 gai_strerror(ret));
		return -EINVAL;
	}
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
	ret = resolve(host, addr, sizeof(addr));
	if (ret)
		return ret;
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
	TAILQ_INIT(&e->done);
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
	e->lease_ev = evtimer_new(base, lease_tick, e);
	if (!e->lease_ev)
		goto err_free_wbuf;
	e->watch_ev = evtimer_new(base, watch_start, e);
	if (!e->watch_ev)
		goto err_free_lease_ev;
	e->dispatch_ev = event_new(base, -1, 0, dispatch, e);
	if (!e->dispatch_ev)
		goto err_free_watch_ev;
	lease_grant(e);
	watch_start(-1, 0, e);
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

static void call_start(struct xfer_store *s, enum op_kind kind,
		       const char *key, const char *value, size_t len,
		       xfer_store_cb cb, void *arg)
{
	struct etcd *e = container_of(s, struct etcd, base);
	struct etcd_op *op = op_new(e, kind, key, value, len, cb, arg);
	int ret;

	if (!op) {
		/* No way to call back without memory: the call is lost. */
		xfer_log(XFER_LOG_ERROR, "etcd %s: no memory for \"%s\"",
			 e->hostport, key);
		return;
	}
	if (kind == OP_PUT) {
		put_start(op);
		return;
	}
	ret = op_send(op);
	if (ret)
		finish(op, ret);
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
	struct op_q *qs[] = { &e->inflight, &e->waiting, &e->done };
	struct etcd_op *op;

	/* Freeing a connection drops its requests without calling back. */
	evhttp_connection_free(e->kv);
	evhttp_connection_free(e->wconn);
	for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++)
		while ((op = TAILQ_FIRST(qs[i])))
			op_free(op);
	event_free(e->dispatch_ev);
	event_free(e->watch_ev);
	event_free(e->lease_ev);
	evbuffer_free(e->wbuf);
	free(e->range_end);
	free(e->prefix);
	free(e);
}

static void etcd_close(struct xfer_store *s)
{
	struct etcd *e = container_of(s, struct etcd, base);

	/* From a callback of ours: free when it returns. */
	if (e->dispatching)
		e->closing = true;
	else
		etcd_free(e);
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
