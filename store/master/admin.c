/*
 * xfer-stored's admin HTTP (admin_internal.h): evhttp on the master's
 * event_base, GET only, with mooncake_master's paths and answers
 * (its master_admin_service.cpp):
 *
 *   /metrics              Prometheus text (metrics.c)
 *   /health               {"status":"ok","role":"leader",...}
 *   /get_all_segments     the mounted segments' names, a line each
 *   /get_segments_detail  {"total_segments":N,"segments":[...]}
 *   /query_key?key=K      {"success":true,"data":[replica, ...]}
 *   /batch_query_keys?keys=K1,K2,...
 *                         {"success":true,"data":{"K1":{"ok":true,
 *                         "values":[replica, ...]},...}}
 *   /get_all_keys         every key, a line each
 *
 * A replica is Mooncake's buffer descriptor: {"size_":..,
 * "buffer_address_":..,"protocol_":"","transport_endpoint_":"<segment>"}
 * (the master does not know the protocol its clients use). Reading an
 * object here grants no lease and does not count as a use. Every answer
 * is bounded: /get_all_keys is sent in chunks of about 64 KiB, each made
 * once the one before has gone out, so neither memory nor the time of
 * one event grows with the number of keys; a key added or removed while
 * it runs may be listed or not, the others are listed once.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <yajl/yajl_gen.h>

#include "store/alloc_internal.h"
#include "store/master/admin_internal.h"
#include "store/master/state_internal.h"
#include "util/listen_internal.h"

#define HEADERS_MAX (64u << 10)        /* a batch of keys in the URL */
#define CHUNK_BYTES (64u << 10)
#define CONN_TIMEOUT_S 60

struct keys_stream {
	struct stored_admin *a;
	struct evhttp_request *req;
	size_t step;                   /* the table's size when it began */
	size_t next;                   /* the next bucket below step */
	LIST_ENTRY(keys_stream) link;
};

struct stored_admin {
	struct stored *s;
	struct evhttp *http;
	struct xfer_listen_guard *guard;
	LIST_HEAD(, keys_stream) streams;
};

static void reply(struct evhttp_request *req, int code, const char *ctype)
{
	evhttp_add_header(evhttp_request_get_output_headers(req),
			  "Content-Type", ctype);
	evhttp_send_reply(req, code, NULL, NULL);
}

static void reply_text(struct evhttp_request *req, int code, const char *msg)
{
	evbuffer_add_printf(evhttp_request_get_output_buffer(req), "%s\n",
			    msg);
	reply(req, code, "text/plain; charset=utf-8");
}

/* Is [p, p + len) valid UTF-8 (no overlong forms, no surrogates)? */
static bool utf8_ok(const unsigned char *p, size_t len)
{
	for (size_t i = 0; i < len;) {
		unsigned c = p[i], n = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 :
				       (c & 0xf0) == 0xe0 ? 2 :
				       (c & 0xf8) == 0xf0 ? 3 : 4;
		uint32_t cp = n == 0 ? c : c & (0x3f >> n);

		if (n == 4 || i + n >= len)
			return false;
		for (unsigned k = 1; k <= n; k++) {
			if ((p[i + k] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (p[i + k] & 0x3f);
		}
		if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) ||
		    (n == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += n + 1;
	}
	return true;
}

/* A key or name as a JSON string: bytes that are not UTF-8 (keys are any
 * bytes) each become U+FFFD, so the answer stays JSON. */
static int gen_bytes(yajl_gen g, const char *p, size_t len)
{
	unsigned char *u;
	size_t n = 0;
	int ret;

	if (utf8_ok((const unsigned char *)p, len))
		return yajl_gen_string(g, (const unsigned char *)p, len);
	u = malloc(3 * len + 1);
	if (!u)
		return yajl_gen_generation_complete;   /* any error */
	for (size_t i = 0; i < len; i++) {
		if ((unsigned char)p[i] < 0x80) {
			u[n++] = (unsigned char)p[i];
		} else {
			memcpy(u + n, "\xef\xbf\xbd", 3);
			n += 3;
		}
	}
	ret = yajl_gen_string(g, u, n);
	free(u);
	return ret;
}

static int gen_str(yajl_gen g, const char *s)
{
	return yajl_gen_string(g, (const unsigned char *)s, strlen(s));
}

static int gen_u64(yajl_gen g, uint64_t v)
{
	char num[24];

	return yajl_gen_number(g, num, (size_t)snprintf(num, sizeof(num),
							"%" PRIu64, v));
}

/* Send what @p g made, as JSON with @p code; free it. */
static void reply_json(struct evhttp_request *req, int code, yajl_gen g,
		       int failed)
{
	const unsigned char *json;
	size_t len;

	if (failed || yajl_gen_get_buf(g, &json, &len) ||
	    evbuffer_add(evhttp_request_get_output_buffer(req), json, len))
		reply_text(req, HTTP_INTERNAL, "out of memory");
	else
		reply(req, code, "application/json; charset=utf-8");
	yajl_gen_free(g);
}

/* Mooncake's buffer descriptors of @p o's replicas that can be read. */
static int gen_replicas(yajl_gen g, const struct object *o)
{
	int failed = yajl_gen_array_open(g);

	for (unsigned i = 0; i < o->nrep; i++) {
		const struct segment *seg = o->rep[i].seg;

		if (!seg || !seg->online)
			continue;
		failed |= yajl_gen_map_open(g);
		failed |= gen_str(g, "size_") |
			  gen_u64(g, stripe_len(o, &o->rep[i]));
		failed |= gen_str(g, "buffer_address_") |
			  gen_u64(g, seg->base + o->rep[i].off);
		failed |= gen_str(g, "protocol_") | gen_str(g, "");
		failed |= gen_str(g, "transport_endpoint_") |
			  gen_bytes(g, seg->name, seg->name_len);
		failed |= yajl_gen_map_close(g);
	}
	return failed | yajl_gen_array_close(g);
}

/* What a read of @p key finds: 0, or Mooncake's error and its name. */
static int readable(struct stored *s, const char *key, size_t len,
		    const struct object **o, const char **why)
{
	struct store_str k = { key, (uint16_t)len };

	*o = len && len <= STORE_KEY_MAX ? objects_lookup(s, &k) : NULL;
	if (*o && (*o)->state == OBJ_COMPLETE && objects_visible(*o))
		return 0;
	if (*o && (*o)->state == OBJ_PENDING) {
		*why = "REPLICA_IS_NOT_READY";
		return MC_REPLICA_IS_NOT_READY;
	}
	*why = "OBJECT_NOT_FOUND";
	return MC_OBJECT_NOT_FOUND;
}

static void on_query_key(struct stored_admin *a, struct evhttp_request *req,
			 const struct evkeyvalq *q)
{
	const char *key = evhttp_find_header(q, "key"), *why;
	yajl_gen g = yajl_gen_alloc(NULL);
	const struct object *o;
	int err, failed;

	if (!g) {
		reply_text(req, HTTP_INTERNAL, "out of memory");
		return;
	}
	err = readable(a->s, key ? key : "", key ? strlen(key) : 0, &o, &why);
	failed = yajl_gen_map_open(g) | gen_str(g, "success") |
		 yajl_gen_bool(g, !err);
	if (err) {
		failed |= gen_str(g, "error_code") |
			  yajl_gen_integer(g, err) |
			  gen_str(g, "error_message") | gen_str(g, why);
	} else {
		failed |= gen_str(g, "data") | gen_replicas(g, o);
	}
	failed |= yajl_gen_map_close(g);
	reply_json(req, err ? HTTP_NOTFOUND : HTTP_OK, g, failed);
}

static void on_batch_query(struct stored_admin *a,
			   struct evhttp_request *req,
			   const struct evkeyvalq *q)
{
	const char *keys = evhttp_find_header(q, "keys"), *p, *end, *why;
	yajl_gen g;
	const struct object *o;
	unsigned n = 0;
	int failed;

	if (!keys || !*keys) {
		reply_text(req, HTTP_BADREQUEST, "No keys provided. Use "
			   "?keys=key1,key2,...");
		return;
	}
	for (p = keys; p; p = strchr(p, ','), p = p ? p + 1 : NULL)
		n++;
	if (n > STORE_BATCH_MAX) {
		reply_text(req, HTTP_BADREQUEST, "more than 1024 keys");
		return;
	}
	if (!(g = yajl_gen_alloc(NULL))) {
		reply_text(req, HTTP_INTERNAL, "out of memory");
		return;
	}
	failed = yajl_gen_map_open(g) | gen_str(g, "success") |
		 yajl_gen_bool(g, 1) | gen_str(g, "data") |
		 yajl_gen_map_open(g);
	for (p = keys; p; p = *end ? end + 1 : NULL) {
		end = strchr(p, ',');
		if (!end)
			end = p + strlen(p);
		failed |= gen_bytes(g, p, (size_t)(end - p));
		failed |= yajl_gen_map_open(g);
		if (readable(a->s, p, (size_t)(end - p), &o, &why)) {
			failed |= gen_str(g, "ok") | yajl_gen_bool(g, 0) |
				  gen_str(g, "error") | gen_str(g, why);
		} else {
			failed |= gen_str(g, "ok") | yajl_gen_bool(g, 1) |
				  gen_str(g, "values") | gen_replicas(g, o);
		}
		failed |= yajl_gen_map_close(g);
	}
	failed |= yajl_gen_map_close(g) | yajl_gen_map_close(g);
	reply_json(req, HTTP_OK, g, failed);
}

/* Mooncake's UUID text: the two halves as decimal u64s. */
static int gen_id(yajl_gen g, const uint8_t *id)
{
	uint64_t half[2] = { 0, 0 };
	char text[48];

	for (int h = 0; h < 2; h++)
		for (int i = 7; i >= 0; i--)
			half[h] = half[h] << 8 | id[h * 8 + i];
	snprintf(text, sizeof(text), "%" PRIu64 "-%" PRIu64, half[0],
		 half[1]);
	return gen_str(g, text);
}

static int gen_segment(yajl_gen g, const struct segment *seg)
{
	uint64_t used = seg->online ? store_alloc_used(seg->alloc) : 0;
	char text[48];
	int failed = yajl_gen_map_open(g);

	failed |= gen_str(g, "segment_name") |
		  gen_bytes(g, seg->name, seg->name_len);
	failed |= gen_str(g, "segment_id") | gen_id(g, seg->id);
	failed |= gen_str(g, "client_id") | gen_id(g, seg->client->id);
	snprintf(text, sizeof(text), "0x%" PRIx64, seg->base);
	failed |= gen_str(g, "base_address") | gen_str(g, text);
	failed |= gen_str(g, "size_bytes") | gen_u64(g, seg->size);
	snprintf(text, sizeof(text), "%g GiB",
		 (double)seg->size / (1024.0 * 1024 * 1024));
	failed |= gen_str(g, "size_human") | gen_str(g, text);
	failed |= gen_str(g, "te_endpoint") |
		  gen_bytes(g, seg->name, seg->name_len);
	failed |= gen_str(g, "protocol") | gen_str(g, "");
	/* OFFLINE is xfer's: restored, waiting to be mounted again */
	failed |= gen_str(g, "status") |
		  gen_str(g, seg->online ? "OK" : "OFFLINE");
	failed |= gen_str(g, "allocator_used_bytes") | gen_u64(g, used);
	failed |= gen_str(g, "allocator_capacity_bytes") |
		  gen_u64(g, seg->size);
	failed |= gen_str(g, "allocator_usage_percent") |
		  yajl_gen_double(g, (double)used * 100.0 /
				  (double)seg->size);
	return failed | yajl_gen_map_close(g);
}

static void on_segments_detail(struct stored_admin *a,
			       struct evhttp_request *req,
			       const struct evkeyvalq *q)
{
	struct stored *s = a->s;
	yajl_gen g = yajl_gen_alloc(NULL);
	size_t n = s->nsegs;
	struct list *l;
	int failed;

	(void)q;
	if (!g) {
		reply_text(req, HTTP_INTERNAL, "out of memory");
		return;
	}
	for (l = s->offline.next; l != &s->offline; l = l->next)
		n++;
	failed = yajl_gen_map_open(g) | gen_str(g, "total_segments") |
		 gen_u64(g, n) | gen_str(g, "segments") |
		 yajl_gen_array_open(g);
	for (size_t i = 0; i < s->nsegs; i++)
		failed |= gen_segment(g, s->segs[i]);
	for (l = s->offline.next; l != &s->offline; l = l->next)
		failed |= gen_segment(g, container_of(l, struct segment,
						      in_offline));
	failed |= yajl_gen_array_close(g) | yajl_gen_map_close(g);
	reply_json(req, HTTP_OK, g, failed);
}

static void on_segments(struct stored_admin *a, struct evhttp_request *req,
			const struct evkeyvalq *q)
{
	struct evbuffer *out = evhttp_request_get_output_buffer(req);
	int failed = 0;

	(void)q;
	for (size_t i = 0; i < a->s->nsegs; i++)
		failed |= evbuffer_add_printf(out, "%.*s\n",
					      (int)a->s->segs[i]->name_len,
					      a->s->segs[i]->name) < 0;
	if (failed)
		reply_text(req, HTTP_INTERNAL, "out of memory");
	else
		reply(req, HTTP_OK, "text/plain; version=0.0.4");
}

static void on_health(struct stored_admin *a, struct evhttp_request *req,
		      const struct evkeyvalq *q)
{
	(void)a;
	(void)q;
	evbuffer_add_printf(evhttp_request_get_output_buffer(req),
			    "{\"status\":\"ok\",\"role\":\"leader\","
			    "\"ha_state\":\"serving\","
			    "\"service_ready\":true}");
	reply(req, HTTP_OK, "application/json; charset=utf-8");
}

static void on_metrics(struct stored_admin *a, struct evhttp_request *req,
		       const struct evkeyvalq *q)
{
	(void)q;
	if (stored_metrics(a->s, evhttp_request_get_output_buffer(req)))
		reply_text(req, HTTP_INTERNAL, "out of memory");
	else
		reply(req, HTTP_OK, "text/plain; version=0.0.4");
}

/* ---- /get_all_keys, in chunks ---- */

static void stream_free(struct keys_stream *ks)
{
	struct evhttp_connection *evcon;

	evcon = evhttp_request_get_connection(ks->req);

	if (evcon)
		evhttp_connection_set_closecb(evcon, NULL, NULL);
	LIST_REMOVE(ks, link);
	free(ks);
}

/*
 * The client hung up midway. evhttp takes an unfinished request off the
 * dying connection and leaves it to us; one still on it goes with it.
 */
static void on_stream_closed(struct evhttp_connection *evcon, void *arg)
{
	struct keys_stream *ks = arg;

	(void)evcon;
	if (!evhttp_request_get_connection(ks->req))
		evhttp_request_free(ks->req);
	LIST_REMOVE(ks, link);
	free(ks);
}

/*
 * The next chunk: old bucket j of a table of @p step buckets is now
 * buckets j, j + step, j + 2 step, ... (it only doubles, by the hash's
 * low bits), so walking j over the first size lists each key once.
 */
static void on_stream_sent(struct evhttp_connection *evcon, void *arg)
{
	struct keys_stream *ks = arg;
	struct evhttp_request *req = ks->req;
	struct stored *s = ks->a->s;
	struct evbuffer *chunk = evbuffer_new();
	int failed = !chunk;
	bool done;

	(void)evcon;
	while (!failed && ks->next < ks->step &&
	       evbuffer_get_length(chunk) < CHUNK_BYTES) {
		for (size_t b = ks->next; b < s->nbuckets; b += ks->step)
			for (struct object *o = s->buckets[b]; o; o = o->hnext)
				failed |= evbuffer_add(chunk, o->key, o->klen) |
					  evbuffer_add(chunk, "\n", 1);
		ks->next++;
	}
	/* on a failure the client gets a listing cut short */
	done = failed || ks->next == ks->step;
	if (done)
		stream_free(ks);
	if (!failed && evbuffer_get_length(chunk)) {
		if (done)
			evhttp_send_reply_chunk(req, chunk);
		else
			evhttp_send_reply_chunk_with_cb(req, chunk,
							on_stream_sent, ks);
	}
	if (chunk)
		evbuffer_free(chunk);
	if (done)
		evhttp_send_reply_end(req);
}

static void on_all_keys(struct stored_admin *a, struct evhttp_request *req,
			const struct evkeyvalq *q)
{
	struct keys_stream *ks = calloc(1, sizeof(*ks));

	(void)q;
	if (!ks) {
		reply_text(req, HTTP_INTERNAL, "out of memory");
		return;
	}
	ks->a = a;
	ks->req = req;
	ks->step = a->s->nbuckets;
	LIST_INSERT_HEAD(&a->streams, ks, link);
	evhttp_add_header(evhttp_request_get_output_headers(req),
			  "Content-Type", "text/plain; version=0.0.4");
	evhttp_send_reply_start(req, HTTP_OK, "OK");
	evhttp_connection_set_closecb(evhttp_request_get_connection(req),
				      on_stream_closed, ks);
	on_stream_sent(NULL, ks);
}

/* ---- dispatch ---- */

static const struct {
	const char *path;
	void (*fn)(struct stored_admin *a, struct evhttp_request *req,
		   const struct evkeyvalq *q);
} routes[] = {
	{ "/metrics", on_metrics },
	{ "/health", on_health },
	{ "/get_all_segments", on_segments },
	{ "/get_segments_detail", on_segments_detail },
	{ "/query_key", on_query_key },
	{ "/batch_query_keys", on_batch_query },
	{ "/get_all_keys", on_all_keys },
};

static void on_request(struct evhttp_request *req, void *arg)
{
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	const char *path = evhttp_uri_get_path(uri);
	const char *query = evhttp_uri_get_query(uri);
	struct evkeyvalq q;

	TAILQ_INIT(&q);
	for (size_t i = 0; path && i < sizeof(routes) / sizeof(routes[0]);
	     i++) {
		if (strcmp(path, routes[i].path))
			continue;
		if (evhttp_request_get_command(req) != EVHTTP_REQ_GET) {
			evhttp_add_header(
				evhttp_request_get_output_headers(req),
				"Allow", "GET");
			reply_text(req, HTTP_BADMETHOD, "method not allowed");
		} else if (query && (strstr(query, "%00") ||
				     evhttp_parse_query_str(query, &q))) {
			/* %00 would end a key short, silently */
			reply_text(req, HTTP_BADREQUEST, "malformed query");
		} else {
			routes[i].fn(arg, req, &q);
		}
		evhttp_clear_headers(&q);
		return;
	}
	reply_text(req, HTTP_NOTFOUND, "no such path");
}

struct stored_admin *stored_admin_new(struct event_base *base,
				      struct stored *s, const char *host,
				      uint16_t port, uint16_t *bound)
{
	struct stored_admin *a = calloc(1, sizeof(*a));
	struct evhttp_bound_socket *sock;
	struct sockaddr_storage ss;
	socklen_t sslen = sizeof(ss);
	int err = ENOMEM;

	if (!a)
		return NULL;
	a->s = s;
	LIST_INIT(&a->streams);
	a->http = evhttp_new(base);
	if (!a->http)
		goto err;
	evhttp_set_gencb(a->http, on_request, a);
	evhttp_set_max_headers_size(a->http, HEADERS_MAX);
	evhttp_set_max_body_size(a->http, 0);
	evhttp_set_timeout(a->http, CONN_TIMEOUT_S);
	evhttp_set_allowed_methods(a->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST |
		EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
		EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH);
	sock = evhttp_bind_socket_with_handle(a->http, host, port);
	if (!sock) {
		err = errno ? errno : EADDRINUSE;
		goto err;
	}
	/* when fds run out, pause accepting instead of spinning on it */
	a->guard = xfer_listen_guard_new(evhttp_bound_socket_get_listener(sock),
					 "xfer-stored admin");
	if (!a->guard)
		goto err;
	if (getsockname(evhttp_bound_socket_get_fd(sock),
			(struct sockaddr *)&ss, &sslen)) {
		err = errno;
		goto err;
	}
	*bound = ntohs(ss.ss_family == AF_INET6 ?
		       ((struct sockaddr_in6 *)&ss)->sin6_port :
		       ((struct sockaddr_in *)&ss)->sin_port);
	return a;

err:
	stored_admin_free(a);
	errno = err;
	return NULL;
}

void stored_admin_free(struct stored_admin *a)
{
	if (!a)
		return;
	xfer_listen_guard_free(a->guard);
	while (!LIST_EMPTY(&a->streams))
		stream_free(LIST_FIRST(&a->streams));
	if (a->http)
		evhttp_free(a->http);
	free(a);
}
