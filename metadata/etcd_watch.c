/*
 * The etcd watch: one streaming POST /v3/watch on a connection of its
 * own, for the keys in [prefix, range_end). The gateway sends one JSON
 * object per line; each event's key is queued for the user's changed().
 * A stream that ends or goes wrong starts again after a backoff, and the
 * user then hears that changes may have been missed.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>

#include "metadata/etcd_internal.h"

static void watch_done(struct evhttp_request *req, void *arg);
static void watch_chunk(struct evhttp_request *req, void *arg);

static void watch_lost(struct etcd *e, const char *why)
{
	e->wreq = NULL;
	e->watch_up = false;
	e->watch_missed = true;
	evbuffer_drain(e->wbuf, evbuffer_get_length(e->wbuf));
	xfer_etcd_outage(e, why);
	xfer_etcd_arm(e->watch_ev, xfer_etcd_backoff(&e->watch_backoff_ms));
}

void xfer_etcd_watch_start(evutil_socket_t fd, short what, void *arg)
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
	    xfer_etcd_add_b64_field(b, "key", e->prefix,
				    strlen(e->prefix) ?: 1) ||
	    evbuffer_add(b, ",", 1) ||
	    xfer_etcd_add_b64_field(b, "range_end", e->range_end,
				    e->range_end_len) ||
	    evbuffer_add(b, "}}", 2) || xfer_etcd_add_headers(e, req)) {
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

void xfer_etcd_watch_kv_down(struct etcd *e, int err)
{
	if (e->watch_up) {
		evhttp_cancel_request(e->wreq);
		watch_lost(e, strerror(-err));
	}
}

static void watch_created(struct etcd *e)
{
	e->watch_up = true;
	e->watch_backoff_ms = ETCD_BACKOFF_MIN_MS;
	/* A quiet stream is no failure; a dead one shows on the kv side,
	 * which then starts the watch again (xfer_etcd_watch_kv_down). */
	bufferevent_set_timeouts(evhttp_connection_get_bufferevent(e->wconn),
				 NULL, NULL);
	xfer_etcd_back(e);
	if (e->watch_missed) {
		e->watch_missed = false;
		xfer_deferred_resync(&e->deferred);
	}
}

/* A put or a delete alike (the gateway leaves out "type" for PUT, the
 * default): the key changed. */
static void watch_event(struct etcd *e, yajl_val ev)
{
	const char *b64 = YAJL_GET_STRING(xfer_etcd_json_get(ev, "kv", "key"));
	size_t plen = strlen(e->prefix);
	char *key;
	ssize_t n;

	if (!b64 || (n = xfer_etcd_b64_decode(b64, &key)) < 0)
		return;
	/* Only keys under the prefix, and only C strings. */
	if ((size_t)n >= plen && !memcmp(key, e->prefix, plen) &&
	    strlen(key) == (size_t)n)
		xfer_deferred_changed(&e->deferred, key, (size_t)n);
	free(key);
}

/* One JSON object of the stream. @return 0, or -EPROTO to start over:
 * an error object, a canceled watch (compaction), garbage. */
static int watch_line(struct etcd *e, const char *line)
{
	yajl_val root = yajl_tree_parse(line, NULL, 0), res, evs;
	int ret = -EPROTO;

	res = xfer_etcd_json_get(root, "result", NULL);
	if (!YAJL_IS_OBJECT(res) ||
	    YAJL_IS_TRUE(xfer_etcd_json_get(res, "canceled", NULL)))
		goto out;
	if (YAJL_IS_TRUE(xfer_etcd_json_get(res, "created", NULL)))
		watch_created(e);
	evs = xfer_etcd_json_get(res, "events", NULL);
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
