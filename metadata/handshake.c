/*
 * Handshake socket (PROTOCOL.md §1). Server: a listener on the control
 * reactor; each connection carries one frame, answered with the same type
 * byte, then the write side is shut. Anything malformed closes that
 * connection only, without a reply. Client: one blocking exchange.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "engine_internal.h"
#include "handshake_internal.h"
#include "net_internal.h"

#define FRAME_HDR 8 /* u64 length of type byte + JSON */

struct hs_conn {
	struct handshake_server *hs;
	struct bufferevent *bev;
	struct event *deadline;    /* the whole request within 5 s */
	struct hs_conn *prev, *next;
};

struct handshake_server {
	struct xfer_engine *e;
	struct evconnlistener *lev;
	struct hs_conn *conns;
};

static void conn_free(struct hs_conn *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		c->hs->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	event_free(c->deadline);
	bufferevent_free(c->bev);
	free(c);
}

static const char probe_reply[] = "{\"status\":\"success\"}\n";

/*
 * Answer one request body: a malloc'd reply in *out, or a negative errno
 * to close without reply.
 */
static int answer(struct xfer_engine *e, uint8_t type, const char *json,
		  size_t len, char **out, size_t *out_len)
{
	struct xfer_hs_notify n = { 0 };
	struct xfer_hs_conn hc = { 0 };
	char err[128];
	int ret;

	switch (type) {
	case XFER_HS_CONNECTION:
		/* No RDMA in this engine: all fields empty. */
		ret = xfer_hs_conn_decode(json, len, &hc, err, sizeof(err));
		xfer_hs_conn_clear(&hc);
		memset(&hc, 0, sizeof(hc));
		return ret ? ret : xfer_hs_conn_encode(&hc, out, out_len);
	case XFER_HS_METADATA:
		ret = xfer_json_check_object(json, len, err, sizeof(err));
		if (ret)
			break;
		*out = xfer_engine_descriptor(e, out_len);
		return *out ? 0 : -ENOMEM;
	case XFER_HS_NOTIFY:
		ret = xfer_hs_notify_decode(json, len, &n, err, sizeof(err));
		if (ret)
			break;
		xfer_log(XFER_LOG_INFO, "notify from %s: %s", n.name,
			 n.notify_msg);
		xfer_hs_notify_clear(&n);
		n = (struct xfer_hs_notify){ .name = "", .notify_msg = "success" };
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
	struct xfer_engine *e = c->hs->e;
	struct evbuffer *in = bufferevent_get_input(bev);
	uint64_t frame_len, reply_hdr;
	uint8_t *body, type;
	char *reply;
	size_t reply_len;
	bool legacy;

	if (evbuffer_get_length(in) < FRAME_HDR)
		return;
	evbuffer_copyout(in, &frame_len, sizeof(frame_len));
	if (frame_len == 0 || frame_len > e->cfg.handshake_max_len)
		goto close;
	if (evbuffer_get_length(in) < FRAME_HDR + frame_len)
		return;
	body = evbuffer_pullup(in, FRAME_HDR + frame_len);
	if (!body)
		goto close;
	body += FRAME_HDR;
	/* A legacy frame has no type byte: its body starts with '{'. */
	legacy = body[0] == '{';
	type = legacy ? XFER_HS_CONNECTION : body[0];
	if (!legacy) {
		body++;
		frame_len--;
	}
	if (answer(e, type, (char *)body, frame_len, &reply, &reply_len))
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
	struct handshake_server *hs = arg;
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
	c->next = hs->conns;
	if (hs->conns)
		hs->conns->prev = c;
	hs->conns = c;
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

int xfer_handshake_listen(struct xfer_engine *e, const char *bind_addr,
			  uint16_t *port, struct handshake_server **out)
{
	struct handshake_server *hs;
	struct sockaddr_storage ss;
	socklen_t len;
	int ret;

	ret = xfer_net_parse(bind_addr, *port, &ss, &len);
	if (ret)
		return xfer_engine_error(e, ret, "bind address %s: not numeric",
					 bind_addr);
	hs = calloc(1, sizeof(*hs));
	if (!hs)
		return -ENOMEM;
	hs->e = e;
	hs->lev = evconnlistener_new_bind(e->control.base, on_accept, hs,
					  LEV_OPT_CLOSE_ON_FREE |
					  LEV_OPT_CLOSE_ON_EXEC |
					  LEV_OPT_REUSEABLE,
					  -1, (struct sockaddr *)&ss, len);
	if (!hs->lev) {
		ret = errno ? -errno : -EADDRINUSE;
		free(hs);
		return xfer_engine_error(e, ret, "handshake listen %s:%u: %s",
					 bind_addr, *port, strerror(-ret));
	}
	*port = xfer_net_local_port(evconnlistener_get_fd(hs->lev));
	*out = hs;
	return 0;
}

void xfer_handshake_close(struct handshake_server *hs)
{
	while (hs->conns)
		conn_free(hs->conns);
	evconnlistener_free(hs->lev);
	free(hs);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Send or receive exactly @p len bytes before @p deadline (monotonic ms):
 * a peer that trickles bytes cannot hold the caller longer than that.
 */
static int xfer_all(int fd, void *buf, size_t len, bool send_it,
		    int64_t deadline)
{
	struct pollfd pfd = { .fd = fd, .events = send_it ? POLLOUT : POLLIN };
	char *p = buf;

	while (len) {
		int64_t left = deadline - now_ms();
		ssize_t n;

		if (left <= 0 || poll(&pfd, 1, (int)left) == 0)
			return -ETIMEDOUT;
		n = send_it ? send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT)
			    : recv(fd, p, len, MSG_DONTWAIT);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		p += n;
		len -= n;
	}
	return 0;
}

int xfer_handshake_request(const char *host, uint16_t port, uint8_t type,
			   const char *body, size_t body_len, uint32_t max_len,
			   char **reply, size_t *len)
{
	struct sockaddr_storage ss;
	uint64_t frame_len = body_len + 1;
	socklen_t salen;
	int64_t deadline;
	char *buf;
	int fd, ret;

	ret = xfer_net_resolve(host, port, &ss, &salen);
	if (ret)
		return ret;
	fd = xfer_net_connect((struct sockaddr *)&ss, salen,
			      XFER_HANDSHAKE_TIMEOUT_MS);
	if (fd < 0)
		return fd;
	deadline = now_ms() + XFER_HANDSHAKE_TIMEOUT_MS;
	ret = xfer_all(fd, &frame_len, sizeof(frame_len), true, deadline);
	if (!ret)
		ret = xfer_all(fd, &type, 1, true, deadline);
	if (!ret)
		ret = xfer_all(fd, (void *)body, body_len, true, deadline);
	deadline = now_ms() + XFER_HANDSHAKE_TIMEOUT_MS;
	if (!ret)
		ret = xfer_all(fd, &frame_len, sizeof(frame_len), false,
			       deadline);
	if (ret)
		goto out;
	ret = -EPROTO;
	if (frame_len < 2 || frame_len > max_len)
		goto out;
	buf = malloc(frame_len + 1);
	ret = -ENOMEM;
	if (!buf)
		goto out;
	ret = xfer_all(fd, buf, frame_len, false, deadline);
	if (!ret && (uint8_t)buf[0] != type)
		ret = -EPROTO;
	if (ret) {
		free(buf);
		goto out;
	}
	memmove(buf, buf + 1, frame_len - 1);
	buf[frame_len - 1] = '\0';
	*reply = buf;
	*len = frame_len - 1;
out:
	close(fd);
	return ret;
}
