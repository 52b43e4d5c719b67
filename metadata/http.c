/*
 * HTTP metadata backend (PROTOCOL.md §2): GET|PUT|DELETE <url>?key=<key>
 * through libevent's evhttp client on the control reactor; 200 is success,
 * a GET 404 is absent. The watch long-polls <url>/watch as xfer-metad
 * serves it (docs/METADATA.md, "xfer-metad"); a server without it (404)
 * is used without a watch.
 *
 * With the cluster secret (env->auth), each PUT and DELETE first GETs
 * <url>/nonce and then carries "X-Xfer-Auth: <nonce hex>:<mac hex>"
 * (xfer_auth_write_mac(); PROTOCOL.md §2), which xfer-metad with the same
 * secret checks; a server without the nonce path (404: writes open, or
 * not xfer-metad) gets the write without it. A 401 is -EACCES, logged
 * with the server's reason. Both requests go out on the control reactor,
 * one after the other on the command connection.
 *
 * User callbacks (results, changed, reconnected) never run inside evhttp:
 * they go through the deferred queue, so they may close the store.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <yajl/yajl_tree.h>

#include "metadata/write_mac_internal.h"
#include "util/log_internal.h"
#include "util/net_internal.h"
#include "metadata/backends_internal.h"
#include "core/deferred_internal.h"

#define CMD_TIMEOUT_S 5
#define POLL_MS 30000                  /* one long poll */
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000
#define HTTP_UNAUTHORIZED 401          /* libevent names no 401 */

struct http_store;

/* One get/put/del: in flight, then its result queued on the deferred
 * queue (callbacks never run inside evhttp nor inside the call). */
struct http_op {
	struct http_store *h;
	LIST_ENTRY(http_op) link;          /* in flight: in h->ops */
	struct xfer_deferred_item done;    /* its result, queued */
	struct evhttp_request *req;        /* in flight: the nonce's, the op's */
	/* put and del: the key, for the log and the MAC; with the secret,
	 * the write made but held until its nonce is in, its URI and the
	 * SHA-256 of its body */
	char *key;
	struct evhttp_request *write;
	char *uri;
	uint8_t digest[XFER_AUTH_SHA256_LEN];
	enum xfer_store_op op;
	xfer_store_cb cb;
	void *arg;
	int err;
	char *value;                       /* get: the body, len bytes */
	size_t len;
};

struct http_store {
	struct xfer_store store;
	struct xfer_store_env env;
	struct event_base *base;
	char *host, *path, *prefix, *conn;
	char addr[INET6_ADDRSTRLEN];  /* host, resolved at open */
	uint16_t port;
	struct evhttp_connection *cmd, *watch;
	LIST_HEAD(, http_op) ops;      /* in flight, dropped at close */
	struct xfer_deferred deferred; /* results and notifications */
	struct evhttp_request *poll;   /* the watch request in flight */
	struct event *retry;           /* next watch attempt */
	unsigned backoff_ms;
	uint64_t since;                /* last revision seen */
	bool watching;                 /* a poll has succeeded since start */
	bool down;                     /* the last poll failed */
	bool said_open;                /* logged: writes go unproved */
};

static const enum evhttp_cmd_type cmds[] = {
	[XFER_STORE_GET] = EVHTTP_REQ_GET,
	[XFER_STORE_PUT] = EVHTTP_REQ_PUT,
	[XFER_STORE_DEL] = EVHTTP_REQ_DELETE,
};
static const char *const cmd_names[] = { "GET", "PUT", "DELETE" };

static int http_accepts(const char *conn)
{
	return !strncmp(conn, "http://", 7);
}

/* What a put or del keeps until it is answered. */
static void op_clear(struct http_op *o)
{
	if (o->write)
		evhttp_request_free(o->write); /* never made */
	o->write = NULL;
	free(o->uri);
	o->uri = NULL;
	free(o->key);
	o->key = NULL;
}

static void op_free(struct http_op *o)
{
	LIST_REMOVE(o, link);
	op_clear(o);
	free(o);
}

static int http_errno(struct evhttp_request *req)
{
	int code = req ? evhttp_request_get_response_code(req) : 0;

	if (code == 0)
		return -ECONNREFUSED; /* no answer at all */
	return code == HTTP_NOTFOUND ? -ENOENT : -EIO;
}

static void op_deliver(struct xfer_deferred_item *it, bool drop)
{
	struct http_op *o = container_of(it, struct http_op, done);

	if (!drop)
		o->cb(o->err, o->value, o->len, o->arg);
	free(o->value);
	free(o);
}

/* Out of the list, @p o waits on the deferred queue for its callback. */
static void op_finish(struct http_store *h, struct http_op *o, int err)
{
	LIST_REMOVE(o, link);
	op_clear(o);
	o->err = err;
	xfer_deferred_push(&h->deferred, &o->done, op_deliver);
}

/* A 401: say why, in the server's words (its first line, printable
 * bytes only), and what to check. */
static void log_refused(struct http_store *h, struct http_op *o,
			struct evhttp_request *req)
{
	struct evbuffer *body = evhttp_request_get_input_buffer(req);
	char why[160];
	ev_ssize_t got = evbuffer_copyout(body, why, sizeof(why) - 1);
	size_t n = got > 0 ? (size_t)got : 0;

	for (size_t i = 0; i < n; i++)
		if (why[i] == '\n' || why[i] == '\r')
			n = i;
		else if ((unsigned char)why[i] < 0x20 || why[i] == 0x7f)
			why[i] = '?';
	why[n] = '\0';
	xfer_log(XFER_LOG_ERROR, "metadata %s: %s %s refused (401 %s): %s",
		 h->conn, cmd_names[o->op], o->key ? o->key : "",
		 n ? why : "Unauthorized", h->env.auth ?
		 "the server's secret is not this engine's auth_secret" :
		 "the server takes writes proved with a cluster secret: set "
		 "auth_secret (XFER_AUTH_SECRET) to its secret");
}

/* A GET's body is copied: evhttp frees it when this returns. */
static void op_done(struct evhttp_request *req, void *arg)
{
	struct http_op *o = arg;
	struct http_store *h = o->h;
	int code = req ? evhttp_request_get_response_code(req) : 0;
	struct evbuffer *body;
	int err = 0;

	o->req = NULL; /* evhttp frees it after this callback */
	if (code == HTTP_UNAUTHORIZED) {
		log_refused(h, o, req);
		err = -EACCES;
	} else if (code != HTTP_OK) {
		err = http_errno(req);
	}
	if (err == -ENOENT && o->op == XFER_STORE_DEL)
		err = 0;
	if (!err && o->op == XFER_STORE_GET) {
		body = evhttp_request_get_input_buffer(req);
		o->len = evbuffer_get_length(body);
		o->value = o->len ? malloc(o->len) : NULL;
		if (o->value)
			evbuffer_copyout(body, o->value, o->len);
		else if (o->len)
			err = -ENOMEM;
		if (err)
			o->len = 0;
	}
	op_finish(h, o, err);
}

/* "<path><suffix><encoded key>": "<path>?key=<encoded key>", the watch
 * or the nonce URI. A @p suffix that starts with '/' follows a path that
 * ends in one without a second ("/" serves the watch at "/watch"). */
static char *make_uri(struct http_store *h, const char *suffix,
		      const char *key)
{
	char *enc = evhttp_uriencode(key, -1, 0), *uri = NULL;
	int plen = (int)strlen(h->path);
	size_t n;

	if (!enc)
		return NULL;
	if (suffix[0] == '/' && plen && h->path[plen - 1] == '/')
		plen--;
	n = (size_t)plen + strlen(suffix) + strlen(enc) + 8;
	uri = malloc(n);
	if (uri)
		snprintf(uri, n, "%.*s%s%s", plen, h->path, suffix, enc);
	free(enc);
	return uri;
}

/* The nonce in a 200 to GET <path>/nonce: 64 hex digits, then maybe
 * white space. @return 0, or -EPROTO. */
static int nonce_parse(struct evhttp_request *req,
		       uint8_t nonce[XFER_AUTH_NONCE_LEN])
{
	struct evbuffer *body = evhttp_request_get_input_buffer(req);
	size_t len = evbuffer_get_length(body);
	const char *p = len ? (const char *)evbuffer_pullup(body, -1) : "";

	if (len < 2 * XFER_AUTH_NONCE_LEN ||
	    xfer_auth_unhex(p, XFER_AUTH_NONCE_LEN, nonce))
		return -EPROTO;
	for (size_t i = 2 * XFER_AUTH_NONCE_LEN; i < len; i++)
		if (!strchr(" \t\r\n", p[i]) || !p[i])
			return -EPROTO;
	return 0;
}

/* Send the write held by @p o, proved with @p nonce (NULL: unproved). */
static void write_send(struct http_store *h, struct http_op *o,
		       const uint8_t *nonce)
{
	struct evhttp_request *w = o->write;
	uint8_t mac[XFER_AUTH_MAC_LEN];
	char hdr[XFER_AUTH_HEADER_LEN + 1];

	if (nonce) {
		if (xfer_auth_write_mac(h->env.auth, cmd_names[o->op], o->key,
					o->digest, nonce, mac)) {
			op_finish(h, o, -EIO);
			return;
		}
		xfer_auth_hex(nonce, XFER_AUTH_NONCE_LEN, hdr);
		hdr[2 * XFER_AUTH_NONCE_LEN] = ':';
		xfer_auth_hex(mac, XFER_AUTH_MAC_LEN,
			      hdr + 2 * XFER_AUTH_NONCE_LEN + 1);
		if (evhttp_add_header(evhttp_request_get_output_headers(w),
				      "X-Xfer-Auth", hdr)) {
			op_finish(h, o, -ENOMEM);
			return;
		}
	}
	o->write = NULL;
	o->req = w;
	if (evhttp_make_request(h->cmd, w, cmds[o->op], o->uri)) {
		o->req = NULL; /* evhttp freed it */
		op_finish(h, o, -ENOMEM);
	}
}

/* The answer to GET <path>/nonce for the write held by @p arg. Called
 * by evhttp once the command connection is free for the next request. */
static void nonce_done(struct evhttp_request *req, void *arg)
{
	struct http_op *o = arg;
	struct http_store *h = o->h;
	int code = req ? evhttp_request_get_response_code(req) : 0;
	uint8_t nonce[XFER_AUTH_NONCE_LEN];

	o->req = NULL; /* evhttp frees it after this callback */
	if (code == HTTP_NOTFOUND) {
		if (!h->said_open)
			xfer_log(XFER_LOG_WARN, "metadata %s: the server "
				 "serves no nonce, so it checks no writes: "
				 "writing without proof of auth_secret",
				 h->conn);
		h->said_open = true;
		write_send(h, o, NULL);
	} else if (code != HTTP_OK) {
		op_finish(h, o, http_errno(req));
	} else if (nonce_parse(req, nonce)) {
		xfer_log(XFER_LOG_ERROR, "metadata %s: the answer to GET "
			 "nonce is not 64 hex digits", h->conn);
		op_finish(h, o, -EPROTO);
	} else {
		write_send(h, o, nonce);
	}
}

/* Ask for the nonce of the write held by @p o. */
static void nonce_start(struct http_store *h, struct http_op *o)
{
	char *uri = make_uri(h, "/nonce", "");

	o->req = uri ? evhttp_request_new(nonce_done, o) : NULL;
	if (!o->req)
		goto fail;
	evhttp_add_header(evhttp_request_get_output_headers(o->req), "Host",
			  h->host);
	if (evhttp_make_request(h->cmd, o->req, EVHTTP_REQ_GET, uri)) {
		o->req = NULL; /* evhttp freed it */
		goto fail;
	}
	free(uri);
	return;
fail:
	if (o->req)
		evhttp_request_free(o->req);
	o->req = NULL;
	free(uri);
	op_finish(h, o, -ENOMEM);
}

static void start(struct http_store *h, enum xfer_store_op op, const char *key,
		  const char *value, size_t len, xfer_store_cb cb, void *arg)
{
	struct http_op *o = calloc(1, sizeof(*o));
	char *uri = NULL;
	int err = -ENOMEM;

	if (!o) {
		cb(-ENOMEM, NULL, 0, arg); /* nothing else can carry it */
		return;
	}
	*o = (struct http_op){ .h = h, .op = op, .cb = cb, .arg = arg };
	LIST_INSERT_HEAD(&h->ops, o, link);
	o->req = evhttp_request_new(op_done, o);
	uri = make_uri(h, "?key=", key);
	if (!o->req || !uri)
		goto fail;
	evhttp_add_header(evhttp_request_get_output_headers(o->req), "Host",
			  h->host);
	if (value && evbuffer_add(evhttp_request_get_output_buffer(o->req),
				  value, len))
		goto fail;
	if (op != XFER_STORE_GET && !(o->key = strdup(key)))
		goto fail;
	if (op != XFER_STORE_GET && h->env.auth) {
		/* held until its nonce is in */
		err = xfer_auth_sha256(value, len, o->digest);
		if (err)
			goto fail;
		o->write = o->req;
		o->req = NULL;
		o->uri = uri;
		nonce_start(h, o);
		return;
	}
	if (evhttp_make_request(h->cmd, o->req, cmds[op], uri)) {
		o->req = NULL; /* evhttp freed it */
		goto fail;
	}
	free(uri);
	return;

fail:
	free(uri);
	if (o->req)
		evhttp_request_free(o->req);
	op_finish(h, o, err);
}

static void http_get(struct xfer_store *s, const char *key, xfer_store_cb cb,
		     void *arg)
{
	start(container_of(s, struct http_store, store), XFER_STORE_GET, key,
	      NULL, 0, cb, arg);
}

static void http_put(struct xfer_store *s, const char *key, const char *value,
		     size_t len, xfer_store_cb cb, void *arg)
{
	start(container_of(s, struct http_store, store), XFER_STORE_PUT, key,
	      value, len, cb, arg);
}

static void http_del(struct xfer_store *s, const char *key, xfer_store_cb cb,
		     void *arg)
{
	start(container_of(s, struct http_store, store), XFER_STORE_DEL, key,
	      NULL, 0, cb, arg);
}

/* ---- the watch ---- */

static void poll_start(struct http_store *h, int timeout_ms);

static void retry_later(struct http_store *h)
{
	struct timeval tv = { h->backoff_ms / 1000,
			      (h->backoff_ms % 1000) * 1000 };

	if (!h->down)
		xfer_log(XFER_LOG_WARN, "metadata %s: watch lost, retrying",
			 h->conn);
	h->down = true;
	evtimer_add(h->retry, &tv);
	h->backoff_ms = h->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
							   : h->backoff_ms * 2;
}

/* Hand the events of one answer to the engine; @return false if the
 * answer is malformed. */
static bool take_answer(struct http_store *h, const char *json, bool first)
{
	static const char *rev_path[] = { "revision", NULL };
	static const char *comp_path[] = { "compacted", NULL };
	static const char *ev_path[] = { "events", NULL };
	static const char *key_path[] = { "key", NULL };
	char err[128];
	yajl_val root = yajl_tree_parse(json, err, sizeof(err)), rev, evs;
	bool ok = false;

	if (!root)
		return false;
	rev = yajl_tree_get(root, rev_path, yajl_t_number);
	evs = yajl_tree_get(root, ev_path, yajl_t_array);
	if (!rev || !YAJL_IS_INTEGER(rev) || YAJL_GET_INTEGER(rev) < 0 || !evs)
		goto out;
	h->since = (uint64_t)YAJL_GET_INTEGER(rev);
	ok = true;
	if (first)
		goto out; /* a baseline: nothing is cached from before */
	if (YAJL_IS_TRUE(yajl_tree_get(root, comp_path, yajl_t_true))) {
		xfer_deferred_resync(&h->deferred);
		goto out;
	}
	for (size_t i = 0; i < evs->u.array.len; i++) {
		yajl_val k = yajl_tree_get(evs->u.array.values[i], key_path,
					   yajl_t_string);
		const char *key = YAJL_GET_STRING(k);

		if (key)
			xfer_deferred_changed(&h->deferred, key, strlen(key));
	}
out:
	yajl_tree_free(root);
	return ok;
}

static void poll_done(struct evhttp_request *req, void *arg)
{
	struct http_store *h = arg;
	int code = req ? evhttp_request_get_response_code(req) : 0;
	bool first = !h->watching, was_down = h->down;
	struct evbuffer *body;
	char *json;

	h->poll = NULL;
	if (code == HTTP_NOTFOUND) {
		xfer_log(XFER_LOG_WARN, "metadata %s: the server has no watch; "
			 "cached descriptors refresh only on reopen", h->conn);
		return;
	}
	if (code != HTTP_OK) {
		retry_later(h);
		return;
	}
	body = evhttp_request_get_input_buffer(req);
	json = strndup((char *)evbuffer_pullup(body, -1),
		       evbuffer_get_length(body));
	if (!json || !take_answer(h, json, first)) {
		free(json);
		retry_later(h);
		return;
	}
	free(json);
	h->watching = true;
	h->down = false;
	h->backoff_ms = BACKOFF_MIN_MS;
	if (was_down) {
		/* Back after a loss: changes may be missed and the server
		 * may have lost our keys. */
		xfer_log(XFER_LOG_INFO, "metadata %s: back", h->conn);
		xfer_deferred_resync(&h->deferred);
		xfer_deferred_reconnected(&h->deferred);
	}
	poll_start(h, POLL_MS);
}

static void poll_start(struct http_store *h, int timeout_ms)
{
	char suffix[96], *uri;

	snprintf(suffix, sizeof(suffix), "/watch?since=%" PRIu64
		 "&timeout_ms=%d&prefix=", h->since, timeout_ms);
	uri = make_uri(h, suffix, h->prefix);
	h->poll = uri ? evhttp_request_new(poll_done, h) : NULL;
	if (!h->poll)
		goto fail;
	evhttp_add_header(evhttp_request_get_output_headers(h->poll), "Host",
			  h->host);
	if (evhttp_make_request(h->watch, h->poll, EVHTTP_REQ_GET, uri)) {
		h->poll = NULL; /* evhttp freed it */
		goto fail;
	}
	free(uri);
	return;
fail:
	if (h->poll)
		evhttp_request_free(h->poll);
	h->poll = NULL;
	free(uri);
	retry_later(h);
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
	struct http_store *h = arg;

	(void)fd;
	(void)what;
	/* The first answer of a fresh watch only sets the baseline. */
	poll_start(h, h->watching ? POLL_MS : 0);
}

/* ---- lifecycle ---- */

static int parse_conn(struct http_store *h, const char *conn)
{
	struct evhttp_uri *u = evhttp_uri_parse(conn);
	const char *host, *path;
	int port, ret = -EINVAL;

	if (!u)
		goto out;
	host = evhttp_uri_get_host(u);
	path = evhttp_uri_get_path(u);
	port = evhttp_uri_get_port(u);
	if (!host || !*host || evhttp_uri_get_query(u) || port == 0 ||
	    port > 65535)
		goto out;
	h->port = port < 0 ? 80 : (uint16_t)port;
	h->host = strdup(host);
	h->path = strdup(path && *path ? path : "/");
	ret = h->host && h->path ? 0 : -ENOMEM;
out:
	if (u)
		evhttp_uri_free(u);
	if (ret == -EINVAL)
		xfer_log(XFER_LOG_ERROR, "metadata %s: expected "
			 "http://host[:port]/path", conn);
	return ret;
}

/* The host's address as a numeric string, in h->addr. */
static int numeric_host(struct http_store *h)
{
	struct sockaddr_storage ss;
	socklen_t len;
	const void *in;

	if (xfer_net_resolve(h->host, h->port, &ss, &len)) {
		xfer_log(XFER_LOG_ERROR, "metadata %s: host %s does not resolve",
			 h->conn, h->host);
		return -EINVAL;
	}
	in = ss.ss_family == AF_INET6 ?
	     (const void *)&((struct sockaddr_in6 *)&ss)->sin6_addr :
	     (const void *)&((struct sockaddr_in *)&ss)->sin_addr;
	return inet_ntop(ss.ss_family, in, h->addr, sizeof(h->addr)) ? 0
								  : -EINVAL;
}

/* Also frees what open got to build. */
static void http_free(struct http_store *h)
{
	/* Freeing a connection drops its requests without their callbacks. */
	if (h->cmd)
		evhttp_connection_free(h->cmd);
	if (h->watch)
		evhttp_connection_free(h->watch);
	while (!LIST_EMPTY(&h->ops))
		op_free(LIST_FIRST(&h->ops));
	xfer_deferred_clear(&h->deferred);
	if (h->retry)
		event_free(h->retry);
	free(h->host);
	free(h->path);
	free(h->prefix);
	free(h->conn);
	free(h);
}

static void http_release(struct xfer_deferred *d)
{
	http_free(container_of(d, struct http_store, deferred));
}

/* From inside one of our callbacks the store is freed when it returns. */
static void http_close(struct xfer_store *s)
{
	xfer_deferred_release(&container_of(s, struct http_store,
					    store)->deferred);
}

static int http_open(const char *conn, const struct xfer_store_env *env,
		     struct xfer_store **out)
{
	static const struct timeval now = { 0, 0 };
	struct http_store *h = calloc(1, sizeof(*h));
	int ret;

	if (!h)
		return -ENOMEM;
	h->store.ops = &xfer_http_ops;
	h->store.deferred = &h->deferred;
	LIST_INIT(&h->ops);
	h->env = *env;
	h->base = env->base;
	h->backoff_ms = BACKOFF_MIN_MS;
	ret = parse_conn(h, conn);
	if (ret)
		goto err_close;
	ret = -ENOMEM;
	h->prefix = strdup(env->prefix);
	h->conn = strdup(conn);
	if (!h->prefix || !h->conn)
		goto err_close;
	h->env.prefix = h->prefix;
	/* Resolved once here: evhttp would look a name up, blocking, on
	 * every connect. */
	ret = numeric_host(h);
	if (ret)
		goto err_close;
	ret = -ENOMEM;
	h->cmd = evhttp_connection_base_new(h->base, NULL, h->addr, h->port);
	h->watch = evhttp_connection_base_new(h->base, NULL, h->addr, h->port);
	h->retry = evtimer_new(h->base, on_retry, h);
	if (!h->cmd || !h->watch || !h->retry ||
	    xfer_deferred_init(&h->deferred, h->base, &h->env, http_release))
		goto err_close;
	evhttp_connection_set_timeout(h->cmd, CMD_TIMEOUT_S);
	evhttp_connection_set_timeout(h->watch, POLL_MS / 1000 + CMD_TIMEOUT_S);
	evtimer_add(h->retry, &now);
	*out = &h->store;
	return 0;

err_close:
	http_free(h);
	return ret;
}

const struct xfer_store_ops xfer_http_ops = {
	.name = "http",
	.flags = XFER_STORE_KEEPS,
	.accepts = http_accepts,
	.open = http_open,
	.get = http_get,
	.put = http_put,
	.del = http_del,
	.close = http_close,
};
