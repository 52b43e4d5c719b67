/*
 * Handshake socket (PROTOCOL.md §1). Server: a listener on one
 * event_base; each connection carries one frame, answered with the same
 * type byte (a legacy untyped frame with an untyped one), then the write
 * side is shut. Anything malformed closes that connection only, without
 * a reply. Client: one exchange on an
 * event_base.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "core/handshake_internal.h"
#include "core/json_internal.h"
#include "core/log_internal.h"
#include "core/net_internal.h"

#define FRAME_HDR 8 /* u64 length of type byte + JSON */

struct hs_conn {
	struct xfer_hs_server *hs;
	struct bufferevent *bev;
	struct event *deadline;    /* the whole request within 5 s */
	LIST_ENTRY(hs_conn) link;
};

struct xfer_hs_server {
	struct xfer_hs_env env;
	struct evconnlistener *lev;
	LIST_HEAD(, hs_conn) conns;
};

static void conn_free(struct hs_conn *c)
{
	LIST_REMOVE(c, link);
	event_free(c->deadline);
	bufferevent_free(c->bev);
	free(c);
}

static const char probe_reply[] = "{\"status\":\"success\"}\n";

/*
 * Answer one request body: a malloc'd reply in *out, or a negative errno
 * to close without reply.
 */
static int answer(const struct xfer_hs_env *env, uint8_t type,
		  const char *json, size_t len, char **out, size_t *out_len)
{
	struct xfer_hs_notify n = { 0 };
	struct xfer_hs_conn hc = { 0 };
	char err[128];
	int ret;

	switch (type) {
	case XFER_HS_CONNECTION: {
		struct xfer_hs_conn reply = { 0 };

		ret = xfer_hs_conn_decode(json, len, &hc, err, sizeof(err));
		if (ret)
			break;
		ret = env->connection(&hc, &reply, env->arg);
		xfer_hs_conn_clear(&hc);
		if (ret == -EOPNOTSUPP) /* none takes them: every field empty */
			ret = 0;
		if (!ret)
			ret = xfer_hs_conn_encode(&reply, out, out_len);
		xfer_hs_conn_clear(&reply);
		return ret;
	}
	case XFER_HS_METADATA: {
		char *kind;

		ret = xfer_hs_meta_decode(json, len, &kind, err, sizeof(err));
		if (ret)
			break;
		*out = env->descriptor(kind, out_len, env->arg);
		free(kind);
		return *out ? 0 : -ENOENT;
	}
	case XFER_HS_NOTIFY:
		ret = xfer_hs_notify_decode(json, len, &n, err, sizeof(err));
		if (ret)
			break;
		ret = env->notify(&n, env->arg);
		xfer_hs_notify_clear(&n);
		n = (struct xfer_hs_notify){ .name = "",
					     .notify_msg = ret ? "" : "success" };
		return xfer_hs_notify_encode(&n, out, out_len);
	case XFER_HS_PROBE:
		ret = xfer_json_check_object(json, len, err, sizeof(err));
		if (ret)
			break;
		*out = strdup(probe_reply);
		*out_len = sizeof(probe_reply) - 1;
		return *out ? 0 : -ENOMEM;
	default:
		return -EPROTO;
	}
	xfer_log(XFER_LOG_WARN, "handshake: bad request body: %s", err);
	return ret;
}

static void on_written(struct bufferevent *bev, void *arg)
{
	struct hs_conn *c = arg;

	if (evbuffer_get_length(bufferevent_get_output(bev)))
		return;
	shutdown(bufferevent_getfd(bev), SHUT_WR);
	conn_free(c);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)what; /* EOF, error or timeout: all end the connection */
	conn_free(arg);
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	conn_free(arg);
}

static void on_read(struct bufferevent *bev, void *arg)
{
	struct hs_conn *c = arg;
	const struct xfer_hs_env *env = &c->hs->env;
	struct evbuffer *in = bufferevent_get_input(bev);
	uint64_t frame_len, reply_hdr;
	uint8_t *body, type;
	char *reply;
	size_t reply_len;
	bool legacy;

	if (evbuffer_get_length(in) < FRAME_HDR)
		return;
	evbuffer_copyout(in, &frame_len, sizeof(frame_len));
	if (frame_len == 0 || frame_len > env->max_len)
		goto close;
	if (evbuffer_get_length(in) < FRAME_HDR + frame_len)
		return;
	body = evbuffer_pullup(in, FRAME_HDR + frame_len);
	if (!body)
		goto close;
	body += FRAME_HDR;
	/* A legacy frame has no type byte. As Mooncake reads frames, a first
	 * byte past the last type and below 0x80 starts one (JSON text, '{'
	 * in practice); the body must then be a Connection object. */
	legacy = body[0] > XFER_HS_LAST_TYPE && body[0] < 0x80;
	type = legacy ? XFER_HS_CONNECTION : body[0];
	if (!legacy) {
		body++;
		frame_len--;
	}
	if (answer(env, type, (char *)body, frame_len, &reply, &reply_len))
		goto close;
	event_del(c->deadline); /* the write timeout covers the reply */
	reply_hdr = reply_len + !legacy;
	bufferevent_disable(bev, EV_READ);
	bufferevent_setcb(bev, NULL, on_written, on_event, c);
	if (bufferevent_write(bev, &reply_hdr, sizeof(reply_hdr)) ||
	    (!legacy && bufferevent_write(bev, &type, 1)) ||
	    bufferevent_write(bev, reply, reply_len)) {
		free(reply);
		goto close;
	}
	free(reply);
	return;
close:
	conn_free(c);
}

static void on_accept(struct evconnlistener *lev, evutil_socket_t fd,
		      struct sockaddr *sa, int salen, void *arg)
{
	static const struct timeval timeout = { XFER_HANDSHAKE_TIMEOUT_MS / 1000, 0 };
	struct xfer_hs_server *hs = arg;
	struct hs_conn *c = calloc(1, sizeof(*c));

	(void)sa;
	(void)salen;
	if (!c)
		goto err_close;
	c->deadline = evtimer_new(evconnlistener_get_base(lev), on_deadline, c);
	if (!c->deadline)
		goto err_free;
	c->bev = bufferevent_socket_new(evconnlistener_get_base(lev), fd,
					BEV_OPT_CLOSE_ON_FREE);
	if (!c->bev)
		goto err_timer;
	c->hs = hs;
	LIST_INSERT_HEAD(&hs->conns, c, link);
	bufferevent_setcb(c->bev, on_read, NULL, on_event, c);
	bufferevent_set_timeouts(c->bev, NULL, &timeout);
	bufferevent_enable(c->bev, EV_READ);
	evtimer_add(c->deadline, &timeout);
	return;

err_timer:
	event_free(c->deadline);
err_free:
	free(c);
err_close:
	close(fd);
}

int xfer_handshake_listen(const struct xfer_hs_env *env,
			  const struct sockaddr *sa, socklen_t salen,
			  uint16_t *port, struct xfer_hs_server **out)
{
	struct xfer_hs_server *hs = calloc(1, sizeof(*hs));
	int ret;

	if (!hs)
		return -ENOMEM;
	hs->env = *env;
	LIST_INIT(&hs->conns);
	hs->lev = evconnlistener_new_bind(env->base, on_accept, hs,
					  LEV_OPT_CLOSE_ON_FREE |
					  LEV_OPT_CLOSE_ON_EXEC |
					  LEV_OPT_REUSEABLE, -1, sa, salen);
	if (!hs->lev) {
		ret = errno ? -errno : -EADDRINUSE;
		free(hs);
		return ret;
	}
	*port = xfer_net_local_port(evconnlistener_get_fd(hs->lev));
	*out = hs;
	return 0;
}

void xfer_handshake_close(struct xfer_hs_server *hs)
{
	while (!LIST_EMPTY(&hs->conns))
		conn_free(LIST_FIRST(&hs->conns));
	evconnlistener_free(hs->lev);
	free(hs);
}

/* One client exchange in flight. */
struct xfer_hs_req {
	struct bufferevent *bev;
	struct event *timer;
	uint8_t type;
	uint32_t max_len;
	xfer_hs_cb cb;
	void *arg;
};

static void req_finish(struct xfer_hs_req *q, int err, const char *body,
		       size_t len)
{
	q->cb(err, body, len, q->arg);
	xfer_handshake_cancel(q);
}

static void req_read(struct bufferevent *bev, void *arg)
{
	struct xfer_hs_req *q = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	uint64_t len;
	uint8_t *body;

	if (evbuffer_get_length(in) < FRAME_HDR)
		return;
	evbuffer_copyout(in, &len, sizeof(len));
	if (len < 2 || len > q->max_len) {
		req_finish(q, -EPROTO, NULL, 0);
		return;
	}
	if (evbuffer_get_length(in) < FRAME_HDR + len)
		return;
	body = evbuffer_pullup(in, FRAME_HDR + len);
	if (!body)
		req_finish(q, -ENOMEM, NULL, 0);
	else if (body[FRAME_HDR] != q->type)
		req_finish(q, -EPROTO, NULL, 0);
	else
		req_finish(q, 0, (char *)body + FRAME_HDR + 1, len - 1);
}

static void req_event(struct bufferevent *bev, short what, void *arg)
{
	static const struct timeval reply = { XFER_HANDSHAKE_TIMEOUT_MS / 1000, 0 };
	struct xfer_hs_req *q = arg;
	int err;

	if (what & BEV_EVENT_CONNECTED) {
		evtimer_add(q->timer, &reply); /* now 5 s for the reply */
		return;
	}
	if (what & BEV_EVENT_EOF)
		err = ECONNRESET;
	else if (bufferevent_socket_get_dns_error(bev))
		err = ENOENT;
	else
		err = EVUTIL_SOCKET_ERROR() ? EVUTIL_SOCKET_ERROR() : EIO;
	req_finish(q, -err, NULL, 0);
}

static void req_timeout(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	req_finish(arg, -ETIMEDOUT, NULL, 0);
}

void xfer_handshake_cancel(struct xfer_hs_req *q)
{
	bufferevent_free(q->bev);
	event_free(q->timer);
	free(q);
}

struct xfer_hs_req *xfer_handshake_request(struct event_base *base,
					   struct evdns_base *dns,
					   const char *host, uint16_t port,
					   uint8_t type, const char *body,
					   size_t body_len, uint32_t max_len,
					   xfer_hs_cb cb, void *arg)
{
	static const struct timeval connect = { XFER_HANDSHAKE_TIMEOUT_MS / 1000, 0 };
	uint64_t frame_len = body_len + 1;
	struct xfer_hs_req *q = calloc(1, sizeof(*q));

	if (!q)
		return NULL;
	q->type = type;
	q->max_len = max_len;
	q->cb = cb;
	q->arg = arg;
	q->timer = evtimer_new(base, req_timeout, q);
	q->bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (!q->timer || !q->bev)
		goto err_free;
	bufferevent_setcb(q->bev, req_read, NULL, req_event, q);
	if (bufferevent_write(q->bev, &frame_len, sizeof(frame_len)) ||
	    bufferevent_write(q->bev, &type, 1) ||
	    bufferevent_write(q->bev, body, body_len) ||
	    bufferevent_enable(q->bev, EV_READ) ||
	    evtimer_add(q->timer, &connect))
		goto err_free;
	/* Errors from here on, even immediate ones, come through req_event. */
	bufferevent_socket_connect_hostname(q->bev, dns, AF_UNSPEC, host, port);
	return q;

err_free:
	if (q->bev)
		bufferevent_free(q->bev);
	if (q->timer)
		event_free(q->timer);
	free(q);
	return NULL;
}
