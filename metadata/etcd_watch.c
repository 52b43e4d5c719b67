/*
 * The etcd watch: one streaming POST /v3/watch to a member, for the keys
 * in [prefix, range_end). The gateway sends one JSON object per line;
 * each event's key is queued for the user's changed(), and its revision
 * noted. A stream that ends or goes wrong starts again after a backoff,
 * on the member requests go to, from the revision after the last one seen
 * (start_revision): nothing is lost, nothing comes twice. Only when that
 * history is gone (compacted), or no revision was ever seen, does the
 * user hear that changes may have been missed, once the new stream is
 * there.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>

#include "util/log_internal.h"
#include "metadata/etcd_internal.h"

static void watch_done(struct evhttp_request *req, void *arg);
static void watch_chunk(struct evhttp_request *req, void *arg);

/* The stream is gone (@p why); the member failed it unless @p benign.
 * It starts again after @p ms, or the backoff when negative. */
static void watch_lost(struct etcd *e, const char *why, bool benign, int ms)
{
	e->wreq = NULL;
	e->watch_up = false;
	if (!e->rev)
		e->watch_missed = true;
	evbuffer_drain(e->wbuf, evbuffer_get_length(e->wbuf));
	if (!benign)
		xfer_etcd_member_failed(e, e->wmember, why);
	if (ms < 0)
		ms = xfer_etcd_backoff(&e->watch_backoff_ms);
	xfer_etcd_arm(e->watch_ev, ms);
}

void xfer_etcd_watch_start(evutil_socket_t fd, short what, void *arg)
{
	struct etcd *e = arg;
	struct evhttp_request *req;
	struct evbuffer *b;

	(void)fd;
	(void)what;
	e->wmember = e->cur;
	req = evhttp_request_new(watch_done, e);
	if (!req)
		goto err;
	evhttp_request_set_chunked_cb(req, watch_chunk);
	b = evhttp_request_get_output_buffer(req);
	/* An empty prefix watches from key "\0": every key. Progress
	 * notifications move e->rev on while the prefix is quiet. */
	if (evbuffer_add_printf(b, "{\"create_request\":{") < 0 ||
	    xfer_etcd_add_b64_field(b, "key", e->prefix,
				    strlen(e->prefix) ?: 1) ||
	    evbuffer_add(b, ",", 1) ||
	    xfer_etcd_add_b64_field(b, "range_end", e->range_end,
				    e->range_end_len) ||
	    evbuffer_add_printf(b, ",\"progress_notify\":true") < 0 ||
	    (e->rev && evbuffer_add_printf(b, ",\"start_revision\":%" PRId64,
					   e->rev + 1) < 0) ||
	    evbuffer_add(b, "}}", 2) ||
	    xfer_etcd_add_headers(e, e->wmember, req)) {
		evhttp_request_free(req);
		goto err;
	}
	e->wreq = req;
	if (evhttp_make_request(e->members[e->wmember].w, req,
				EVHTTP_REQ_POST, "/v3/watch"))
		goto err;
	return;
err:
	watch_lost(e, "cannot start the watch", false, -1);
}

void xfer_etcd_watch_member_down(struct etcd *e, int member, int err)
{
	if (e->watch_up && e->wmember == member) {
		evhttp_cancel_request(e->wreq);
		watch_lost(e, strerror(-err), true, 0);
	}
}

static void watch_created(struct etcd *e, yajl_val res)
{
	e->watch_up = true;
	e->watch_backoff_ms = ETCD_BACKOFF_MIN_MS;
	/* A fresh stream starts after the revision of its header. */
	if (!e->rev)
		e->rev = xfer_etcd_json_i64(xfer_etcd_json_get(res, "header",
							       "revision"));
	/* A quiet stream is no failure; a dead one shows on the kv side,
	 * which then starts the watch again (xfer_etcd_watch_member_down). */
	bufferevent_set_timeouts(evhttp_connection_get_bufferevent(
					 e->members[e->wmember].w), NULL, NULL);
	xfer_etcd_back(e);
	if (e->watch_missed) {
		e->watch_missed = false;
		e->stats.resyncs++;
		xfer_deferred_resync(&e->deferred);
	}
}

/* A put or a delete alike (the gateway leaves out "type" for PUT, the
 * default): the key changed. */
static void watch_event(struct etcd *e, yajl_val ev)
{
	const char *b64 = YAJL_GET_STRING(xfer_etcd_json_get(ev, "kv", "key"));
	int64_t rev = xfer_etcd_json_i64(xfer_etcd_json_get(ev, "kv",
							    "mod_revision"));
	size_t plen = strlen(e->prefix);
	char *key;
	ssize_t n;

	e->stats.events++;
	if (rev > e->rev)
		e->rev = rev;
	if (!b64 || (n = xfer_etcd_b64_decode(b64, &key)) < 0)
		return;
	/* Only keys under the prefix, and only C strings. */
	if ((size_t)n >= plen && !memcmp(key, e->prefix, plen) &&
	    strlen(key) == (size_t)n)
		xfer_deferred_changed(&e->deferred, key, (size_t)n);
	free(key);
}

/* The history after e->rev is compacted away: a fresh stream, and the
 * user hears that changes may have been missed once it is there. */
static void watch_compacted(struct etcd *e, int64_t compact)
{
	xfer_log(e->compact_warned ? XFER_LOG_DEBUG : XFER_LOG_WARN,
		 "etcd %s: watch history compacted (revision %" PRId64
		 " gone, now from %" PRId64 "); refetching the open segments",
		 e->names, e->rev + 1, compact);
	e->compact_warned = true;
	e->rev = 0;
}

/* One JSON object of the stream. @return 0, 1 to start over at once (the
 * history was compacted), or -EPROTO to start over after the backoff: an
 * error object, a canceled watch, garbage. */
static int watch_line(struct etcd *e, const char *line)
{
	yajl_val root = yajl_tree_parse(line, NULL, 0), res, evs;
	bool created;
	int64_t rev;
	int ret = -EPROTO;

	res = xfer_etcd_json_get(root, "result", NULL);
	if (!YAJL_IS_OBJECT(res))
		goto out;
	if (YAJL_IS_TRUE(xfer_etcd_json_get(res, "canceled", NULL))) {
		rev = xfer_etcd_json_i64(xfer_etcd_json_get(
					res, "compact_revision", NULL));
		if (rev > 0) {
			watch_compacted(e, rev);
			ret = 1;
		}
		goto out;
	}
	created = YAJL_IS_TRUE(xfer_etcd_json_get(res, "created", NULL));
	if (created)
		watch_created(e, res);
	evs = xfer_etcd_json_get(res, "events", NULL);
	for (size_t i = 0; YAJL_IS_ARRAY(evs) && i < evs->u.array.len; i++)
		watch_event(e, evs->u.array.values[i]);
	/* A progress notification: nothing up to its revision is left. */
	rev = xfer_etcd_json_i64(xfer_etcd_json_get(res, "header", "revision"));
	if (!YAJL_IS_ARRAY(evs) && !created && e->watch_up && rev > e->rev)
		e->rev = rev;
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
		watch_lost(e, why, ret > 0, ret > 0 ? 0 : -1);
	}
}

/* The stream ended: the server closed it or the connection failed. */
static void watch_done(struct evhttp_request *req, void *arg)
{
	struct etcd *e = arg;

	if (!req)
		watch_lost(e, "watch connection lost", false, -1);
	else if (!evhttp_request_get_response_code(req))
		watch_lost(e, "cannot connect", false, -1);
	else
		watch_lost(e, "watch stream ended", false, -1);
}
