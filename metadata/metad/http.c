/*
 * xfer-metad's HTTP side (PROTOCOL.md §2), one evhttp on one event_base:
 *
 *   GET|PUT|DELETE <path>?key=<percent-encoded key>
 *   GET <path>/watch?prefix=<p>&since=<revision>&timeout_ms=<n>
 *   GET <path>/nonce                      (with a secret only)
 *
 * A watch whose answer is not ready is held: its evhttp_request stays
 * with us until a matching change, its timer, or its client hanging up.
 * Nothing from a client is trusted; whatever is wrong gets a 4xx with a
 * one-line reason and the server goes on. A PUT over the store's limits
 * gets 413 (the value: evhttp's own answer, before the body is read) or
 * 507 (keys or bytes), a change the disk refused 500 (507 if full).
 * With a cluster secret (metad_http_set_secret()), a PUT or DELETE that
 * does not prove it (auth.c) gets 401 and changes nothing.
 */
#include <sys/queue.h>
#include <sys/socket.h>

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <netinet/in.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <yajl/yajl_gen.h>

#include "util/listen_internal.h"
#include "util/log_internal.h"
#include "metadata/metad/auth_internal.h"
#include "metadata/metad/http_internal.h"
#include "metadata/metad/key_internal.h"
#include "metadata/metad/store_internal.h"

#define WATCH_DEFAULT_MS 30000
#define WATCH_MAX_MS 300000
/* evhttp drops a connection that stays silent this long; a held watch is
 * silent for up to WATCH_MAX_MS, so this must be longer. */
#define CONN_TIMEOUT_S (WATCH_MAX_MS / 1000 + 30)
/* a 4096-byte key percent-encoded is 12 KiB of request line */
#define HEADERS_MAX (64u << 10)
/* what a client may send while its watch is held, kept for evhttp */
#define HOLD_INPUT_MAX (64u << 10)
/* over a limit of the store (libevent names 413, not 507) */
#define HTTP_INSUFFICIENT_STORAGE 507
/* a write that does not prove the secret (libevent names no 401) */
#define HTTP_UNAUTHORIZED 401

struct metad_watcher {
	struct metad_http *h;
	struct evhttp_request *req;
	struct event *timer;
	uint64_t since;
	char *prefix;
	size_t plen;
	LIST_ENTRY(metad_watcher) link;  /* in metad_http.watchers */
};

struct metad_http {
	struct event_base *base;
	struct evhttp *http;
	struct metad_store *store;
	char *path;
	char *watch_path;
	char *nonce_path;                     /* with auth only */
	LIST_HEAD(, metad_watcher) watchers;  /* held watches */
	struct xfer_listen_guard *guard;      /* backs off when accept fails */
	struct metad_auth *auth;              /* NULL: writes are open */
	struct xfer_log_limit refused_log;    /* 401s, a line a second */
};

/* Answer @p code with a one-line reason (the default Content-Type). */
static void reply_text(struct evhttp_request *req, int code,
		       const char *fmt, ...)
{
	struct evbuffer *out = evhttp_request_get_output_buffer(req);
	va_list ap;

	va_start(ap, fmt);
	evbuffer_add_vprintf(out, fmt, ap);
	va_end(ap);
	evbuffer_add(out, "\n", 1);
	evhttp_send_reply(req, code, NULL, NULL);
}

/* A decimal u64, digits only. */
static int parse_u64(const char *s, uint64_t *v)
{
	char *end;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	*v = strtoull(s, &end, 10);
	return errno || *end ? -EINVAL : 0;
}

/* --- watch ------------------------------------------------------------ */

static bool has_prefix(const char *key, const char *prefix, size_t plen)
{
	return !strncmp(key, prefix, plen);
}

/* Is there anything to say now: a lost history or a matching change? */
static bool watch_ready(const struct metad_store *s, uint64_t since,
			const char *prefix, size_t plen)
{
	if (!metad_store_history(s, since))
		return true;
	for (uint64_t rev = since + 1; rev <= s->revision; rev++)
		if (has_prefix(metad_store_event(s, rev)->key, prefix, plen))
			return true;
	return false;
}

static void gen_u64(yajl_gen g, uint64_t v)
{
	char num[24];

	yajl_gen_number(g, num, (size_t)snprintf(num, sizeof(num),
						 "%" PRIu64, v));
}

static void gen_str(yajl_gen g, const char *s)
{
	yajl_gen_string(g, (const unsigned char *)s, strlen(s));
}

/*
 * Answer a watch: {"revision":R,"events":[{"revision":n,"type":"put",
 * "key":"..."},...]} with the changes after @p since under @p prefix, or
 * {"revision":R,"compacted":true,"events":[]} when some of them are no
 * longer known (the client then reads everything again). Keys passed
 * metad_key_check(), so they are valid JSON strings.
 */
static void watch_reply(struct evhttp_request *req,
			const struct metad_store *s, uint64_t since,
			const char *prefix, size_t plen)
{
	bool compacted = !metad_store_history(s, since);
	const struct metad_event *ev;
	const unsigned char *json;
	size_t len;
	yajl_gen g = yajl_gen_alloc(NULL);

	if (!g) {
		reply_text(req, HTTP_INTERNAL, "out of memory");
		return;
	}
	yajl_gen_map_open(g);
	gen_str(g, "revision");
	gen_u64(g, s->revision);
	if (compacted) {
		gen_str(g, "compacted");
		yajl_gen_bool(g, 1);
	}
	gen_str(g, "events");
	yajl_gen_array_open(g);
	for (uint64_t rev = since + 1; !compacted && rev <= s->revision;
	     rev++) {
		ev = metad_store_event(s, rev);
		if (!has_prefix(ev->key, prefix, plen))
			continue;
		yajl_gen_map_open(g);
		gen_str(g, "revision");
		gen_u64(g, ev->rev);
		gen_str(g, "type");
		gen_str(g, ev->deleted ? "delete" : "put");
		gen_str(g, "key");
		gen_str(g, ev->key);
		yajl_gen_map_close(g);
	}
	yajl_gen_array_close(g);
	/* a yajl generator in error stays there (ENSURE_VALID_STATE), so
	 * the last status speaks for every call before it */
	if (yajl_gen_map_close(g) != yajl_gen_status_ok ||
	    yajl_gen_get_buf(g, &json, &len) != yajl_gen_status_ok ||
	    evbuffer_add(evhttp_request_get_output_buffer(req), json, len)) {
		reply_text(req, HTTP_INTERNAL, "out of memory");
	} else {
		evhttp_add_header(evhttp_request_get_output_headers(req),
				  "Content-Type", "application/json");
		evhttp_send_reply(req, HTTP_OK, NULL, NULL);
	}
	yajl_gen_free(g);
}

/* Forget @p w; its request, if still on its connection, stays unanswered
 * (the caller answers it, or evhttp_free() drops it). */
static void watcher_free(struct metad_watcher *w)
{
	struct evhttp_connection *evcon = evhttp_request_get_connection(w->req);
	struct bufferevent *bev;

	LIST_REMOVE(w, link);
	if (evcon) {
		/* undo watch_hold(); evhttp resets its callbacks itself */
		evhttp_connection_set_closecb(evcon, NULL, NULL);
		bev = evhttp_connection_get_bufferevent(evcon);
		bufferevent_setwatermark(bev, EV_READ, 0, 0);
	}
	event_free(w->timer);
	free(w->prefix);
	free(w);
}

static void watcher_answer(struct metad_watcher *w)
{
	struct evhttp_request *req = w->req;
	struct metad_store *s = w->h->store;
	uint64_t since = w->since;
	char *prefix = w->prefix;
	size_t plen = w->plen;

	w->prefix = NULL;
	watcher_free(w);
	watch_reply(req, s, since, prefix, plen);
	free(prefix);
}

static void on_watch_timeout(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	watcher_answer(arg);
}

/*
 * The client of a held watch hung up. On a hang-up evhttp takes the
 * unanswered request off the dying connection and leaves it to us; if
 * it is still on its connection, the connection frees it.
 */
static void on_watch_closed(struct evhttp_connection *evcon, void *arg)
{
	struct metad_watcher *w = arg;
	struct evhttp_request *req = w->req;

	(void)evcon;
	watcher_free(w);
	if (!evhttp_request_get_connection(req))
		evhttp_request_free(req);
}

/* Wake the watchers whose prefix @p key has. */
static void watchers_wake(struct metad_http *h, const char *key)
{
	struct metad_watcher *w, *next;

	for (w = LIST_FIRST(&h->watchers); w; w = next) {
		next = LIST_NEXT(w, link);
		if (has_prefix(key, w->prefix, w->plen))
			watcher_answer(w);
	}
}

/* Keep @p req until a change under @p prefix or @p timeout_ms. */
static int watch_hold(struct metad_http *h, struct evhttp_request *req,
		      uint64_t since, const char *prefix, uint64_t timeout_ms)
{
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	struct bufferevent *bev = evhttp_connection_get_bufferevent(evcon);
	struct timeval tv = {
		.tv_sec = (time_t)(timeout_ms / 1000),
		.tv_usec = (suseconds_t)(timeout_ms % 1000 * 1000),
	};
	struct metad_watcher *w = calloc(1, sizeof(*w));
	bufferevent_data_cb write_cb;
	bufferevent_event_cb event_cb;
	void *cb_arg;

	if (!w)
		return -ENOMEM;
	w->h = h;
	w->req = req;
	w->since = since;
	w->plen = strlen(prefix);
	w->prefix = strdup(prefix);
	w->timer = evtimer_new(h->base, on_watch_timeout, w);
	if (!w->prefix || !w->timer || evtimer_add(w->timer, &tv)) {
		if (w->timer)
			event_free(w->timer);
		free(w->prefix);
		free(w);
		return -ENOMEM;
	}
	LIST_INSERT_HEAD(&h->watchers, w, link);
	evhttp_connection_set_closecb(evcon, on_watch_closed, w);

	/*
	 * Once it has a request, evhttp stops reading its connection until
	 * the answer is out, so a client that hangs up would go unseen for
	 * the whole hold. Read meanwhile, as evhttp itself does while it
	 * writes an answer, with no read callback: bytes wait in the input
	 * buffer (up to HOLD_INPUT_MAX) for evhttp to parse after the answer,
	 * and an EOF takes evhttp's error path, which frees the connection
	 * and calls on_watch_closed().
	 */
	bufferevent_getcb(bev, NULL, &write_cb, &event_cb, &cb_arg);
	bufferevent_setcb(bev, NULL, write_cb, event_cb, cb_arg);
	bufferevent_setwatermark(bev, EV_READ, 0, HOLD_INPUT_MAX);
	bufferevent_enable(bev, EV_READ);
	return 0;
}

static void on_watch(struct metad_http *h, struct evhttp_request *req,
		     const struct evkeyvalq *q)
{
	const char *since_s = evhttp_find_header(q, "since");
	const char *prefix = evhttp_find_header(q, "prefix");
	const char *timeout_s = evhttp_find_header(q, "timeout_ms");
	uint64_t since, timeout_ms = WATCH_DEFAULT_MS;
	const char *why;

	if (!prefix)
		prefix = "";
	if (!since_s) {
		reply_text(req, HTTP_BADREQUEST, "missing since parameter");
	} else if (parse_u64(since_s, &since)) {
		reply_text(req, HTTP_BADREQUEST,
			   "since must be a decimal revision");
	} else if (timeout_s && (parse_u64(timeout_s, &timeout_ms) ||
				 timeout_ms > WATCH_MAX_MS)) {
		reply_text(req, HTTP_BADREQUEST,
			   "timeout_ms must be a decimal from 0 to %d",
			   WATCH_MAX_MS);
	} else if ((why = metad_key_check(prefix, strlen(prefix)))) {
		reply_text(req, HTTP_BADREQUEST, "prefix %s", why);
	} else if (timeout_ms == 0 ||
		   watch_ready(h->store, since, prefix, strlen(prefix))) {
		watch_reply(req, h->store, since, prefix, strlen(prefix));
	} else if (watch_hold(h, req, since, prefix, timeout_ms)) {
		reply_text(req, HTTP_INTERNAL, "out of memory");
	}
}

/* --- the secret ------------------------------------------------------- */

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* GET <path>/nonce: a fresh nonce, 64 hex digits and a newline. */
static void on_nonce(struct metad_http *h, struct evhttp_request *req)
{
	char hex[METAD_NONCE_HEX + 1];

	if (metad_auth_nonce(h->auth, now_ms(), hex)) {
		reply_text(req, HTTP_INTERNAL, "no random bytes for a nonce");
		return;
	}
	evhttp_add_header(evhttp_request_get_output_headers(req),
			  "Cache-Control", "no-store");
	reply_text(req, HTTP_OK, "%s", hex);
}

/* Does write @p req of @p key prove the secret? If not, it is answered
 * 401 (and logged, at most a line a second). */
static bool write_proved(struct metad_http *h, struct evhttp_request *req,
			 const char *key)
{
	bool put = evhttp_request_get_command(req) == EVHTTP_REQ_PUT;
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t len = evbuffer_get_length(in);
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	const char *why;
	char *addr = NULL;
	ev_uint16_t port = 0;

	why = metad_auth_check(h->auth, now_ms(),
			       evhttp_find_header(
				       evhttp_request_get_input_headers(req),
				       "X-Xfer-Auth"),
			       put ? "PUT" : "DELETE", key,
			       len ? evbuffer_pullup(in, -1) : NULL, len);
	if (!why)
		return true;
	if (evcon)
		evhttp_connection_get_peer(evcon, &addr, &port);
	xfer_log_limited(&h->refused_log, XFER_LOG_WARN, "xfer-metad: "
			 "refused a %s from %s:%u: %s", put ? "PUT" : "DELETE",
			 addr ? addr : "?", port, why);
	evhttp_add_header(evhttp_request_get_output_headers(req),
			  "WWW-Authenticate", "xfer-metad-1");
	reply_text(req, HTTP_UNAUTHORIZED, "%s", why);
	return false;
}

/* --- keys ------------------------------------------------------------- */

static void on_get(struct metad_http *h, struct evhttp_request *req,
		   const char *key)
{
	const struct metad_entry *e = metad_store_get(h->store, key);

	if (!e) {
		reply_text(req, HTTP_NOTFOUND, "no such key");
	} else if (evbuffer_add(evhttp_request_get_output_buffer(req),
				e->val, e->vlen)) {
		reply_text(req, HTTP_INTERNAL, "out of memory");
	} else {
		evhttp_add_header(evhttp_request_get_output_headers(req),
				  "Content-Type", "application/json");
		evhttp_send_reply(req, HTTP_OK, NULL, NULL);
	}
}

/* The status for a change that failed with @p ret. */
static int change_status(int ret)
{
	if (ret == -EFBIG)
		return HTTP_ENTITYTOOLARGE;
	if (ret == -EDQUOT || ret == -ENOSPC || ret == -EOVERFLOW)
		return HTTP_INSUFFICIENT_STORAGE;
	return HTTP_INTERNAL;
}

static void on_put(struct metad_http *h, struct evhttp_request *req,
		   const char *key)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t len = evbuffer_get_length(in);  /* evhttp capped it: 413 */
	uint8_t *val;
	char why[160];
	int ret;

	ret = metad_store_fits(h->store, key, len, why, sizeof(why));
	if (ret) {
		reply_text(req, change_status(ret), "%s", why);
		return;
	}
	val = malloc(len ? len : 1);
	if (!val || evbuffer_remove(in, val, len) != (int)len) {
		free(val);
		reply_text(req, HTTP_INTERNAL, "out of memory");
		return;
	}
	ret = metad_store_put(h->store, key, val, len);
	if (ret) {
		reply_text(req, change_status(ret),
			   "cannot store the change: %s", strerror(-ret));
		return;
	}
	evhttp_send_reply(req, HTTP_OK, NULL, NULL);
	watchers_wake(h, key);
}

static void on_delete(struct metad_http *h, struct evhttp_request *req,
		      const char *key)
{
	int ret = metad_store_del(h->store, key);

	if (ret < 0) {
		reply_text(req, change_status(ret),
			   "cannot store the change: %s", strerror(-ret));
		return;
	}
	/* Deleting an absent key succeeds too (idempotent): Mooncake's
	 * clients take 200 as done and anything else as an error, and an
	 * engine deletes its keys again on shutdown. */
	evhttp_send_reply(req, HTTP_OK, NULL, NULL);
	if (ret > 0)
		watchers_wake(h, key);
}

static void on_key(struct metad_http *h, struct evhttp_request *req,
		   const struct evkeyvalq *q)
{
	const char *key = evhttp_find_header(q, "key");
	const char *why;

	if (!key) {
		reply_text(req, HTTP_BADREQUEST, "missing key parameter");
	} else if (!*key) {
		reply_text(req, HTTP_BADREQUEST, "empty key");
	} else if ((why = metad_key_check(key, strlen(key)))) {
		reply_text(req, HTTP_BADREQUEST, "key %s", why);
	} else if (h->auth &&
		   evhttp_request_get_command(req) != EVHTTP_REQ_GET &&
		   !write_proved(h, req, key)) {
		return;
	} else {
		switch (evhttp_request_get_command(req)) {
		case EVHTTP_REQ_GET:
			on_get(h, req, key);
			break;
		case EVHTTP_REQ_PUT:
			on_put(h, req, key);
			break;
		default:
			on_delete(h, req, key);
			break;
		}
	}
}

/* --- dispatch --------------------------------------------------------- */

/*
 * Percent-decode the query of @p req into @p q. evhttp would decode %00
 * into a NUL that silently cuts a key short, so it is refused here; '+'
 * decodes to a space (a literal '+' travels as %2B).
 * @return NULL, or the reason the query is refused.
 */
static const char *parse_query(struct evhttp_request *req,
			       struct evkeyvalq *q)
{
	const char *query =
		evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));

	TAILQ_INIT(q);
	if (!query)
		return NULL;
	if (strstr(query, "%00"))
		return "NUL byte (%00) in the query";
	if (evhttp_parse_query_str(query, q))
		return "malformed query string";
	return NULL;
}

static void on_request(struct evhttp_request *req, void *arg)
{
	struct metad_http *h = arg;
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	const char *path = evhttp_uri_get_path(uri);
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	struct evkeyvalq q;
	const char *why;
	bool watch;

	if (path && h->auth && !strcmp(path, h->nonce_path)) {
		if (cmd == EVHTTP_REQ_GET) {
			on_nonce(h, req);
			return;
		}
		evhttp_add_header(evhttp_request_get_output_headers(req),
				  "Allow", "GET");
		reply_text(req, HTTP_BADMETHOD, "method not allowed");
		return;
	}
	if (!path || (strcmp(path, h->path) && strcmp(path, h->watch_path))) {
		reply_text(req, HTTP_NOTFOUND, "no such path; keys are at %s, "
			   "the watch at %s", h->path, h->watch_path);
		return;
	}
	watch = !strcmp(path, h->watch_path);
	if (watch ? cmd != EVHTTP_REQ_GET :
	    !(cmd & (EVHTTP_REQ_GET | EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE))) {
		evhttp_add_header(evhttp_request_get_output_headers(req),
				  "Allow", watch ? "GET" : "GET, PUT, DELETE");
		reply_text(req, HTTP_BADMETHOD, "method not allowed");
		return;
	}
	why = parse_query(req, &q);
	if (why)
		reply_text(req, HTTP_BADREQUEST, "%s", why);
	else if (watch)
		on_watch(h, req, &q);
	else
		on_key(h, req, &q);
	evhttp_clear_headers(&q);
}

struct metad_http *metad_http_new(struct event_base *base,
				  struct metad_store *store, const char *path)
{
	struct metad_http *h = calloc(1, sizeof(*h));
	/* "/" serves keys at "/" and the watch at "/watch" */
	size_t len = strcmp(path, "/") ? strlen(path) : 0;

	if (!h)
		return NULL;
	h->base = base;
	h->store = store;
	LIST_INIT(&h->watchers);
	h->path = strdup(path);
	h->watch_path = malloc(len + sizeof("/watch"));
	h->http = evhttp_new(base);
	if (!h->path || !h->watch_path || !h->http) {
		metad_http_free(h);
		errno = ENOMEM;
		return NULL;
	}
	memcpy(h->watch_path, path, len);
	memcpy(h->watch_path + len, "/watch", sizeof("/watch"));

	evhttp_set_gencb(h->http, on_request, h);
	evhttp_set_default_content_type(h->http, "text/plain; charset=utf-8");
	/* a longer body gets evhttp's own 413 before it is read */
	evhttp_set_max_body_size(h->http,
				 (ev_ssize_t)store->limits.value_bytes);
	evhttp_set_max_headers_size(h->http, HEADERS_MAX);
	evhttp_set_timeout(h->http, CONN_TIMEOUT_S);
	/* let every method evhttp knows reach on_request, to get a 405
	 * with Allow instead of evhttp's bare 501 */
	evhttp_set_allowed_methods(h->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST |
		EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
		EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE | EVHTTP_REQ_CONNECT |
		EVHTTP_REQ_PATCH);
	return h;
}

int metad_http_set_secret(struct metad_http *h, const char *secret)
{
	/* "/" serves the nonces at "/nonce" */
	size_t len = strcmp(h->path, "/") ? strlen(h->path) : 0;

	if (h->auth || !secret || !*secret)
		return -EINVAL;
	h->nonce_path = malloc(len + sizeof("/nonce"));
	h->auth = metad_auth_new(secret);
	if (!h->nonce_path || !h->auth) {
		metad_auth_free(h->auth);
		h->auth = NULL;
		free(h->nonce_path);
		h->nonce_path = NULL;
		return -ENOMEM;
	}
	memcpy(h->nonce_path, h->path, len);
	memcpy(h->nonce_path + len, "/nonce", sizeof("/nonce"));
	return 0;
}

int metad_http_bind(struct metad_http *h, const char *addr, uint16_t port,
		    uint16_t *bound)
{
	struct evhttp_bound_socket *sock;
	struct sockaddr_storage ss;
	socklen_t sslen = sizeof(ss);

	sock = evhttp_bind_socket_with_handle(h->http, addr, port);
	if (!sock)
		return -1;
	/* when fds run out, pause accepting instead of spinning on it */
	h->guard = xfer_listen_guard_new(evhttp_bound_socket_get_listener(sock),
					 "xfer-metad");
	if (!h->guard)
		return -1;
	if (getsockname(evhttp_bound_socket_get_fd(sock),
			(struct sockaddr *)&ss, &sslen))
		return -1;
	*bound = ntohs(ss.ss_family == AF_INET6 ?
		       ((struct sockaddr_in6 *)&ss)->sin6_port :
		       ((struct sockaddr_in *)&ss)->sin_port);
	return 0;
}

void metad_http_free(struct metad_http *h)
{
	if (!h)
		return;
	while (!LIST_EMPTY(&h->watchers))
		watcher_free(LIST_FIRST(&h->watchers));
	xfer_listen_guard_free(h->guard);
	if (h->http)
		evhttp_free(h->http);
	metad_auth_free(h->auth);
	free(h->path);
	free(h->watch_path);
	free(h->nonce_path);
	free(h);
}
