/* The initiator's end of a data port connection: connect, authenticate,
 * close (stream_internal.h). */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <unistd.h>

#include "util/log_internal.h"
#include "reactor/reactor_internal.h"
#include "transports/stream_internal.h"

void xfer_stream_init(struct xfer_stream *s, const char *name,
		      const char *peer, const struct xfer_auth *auth)
{
	memset(s, 0, sizeof(*s));
	s->name = name;
	s->peer = peer;
	s->auth = auth;
	s->fd = -1;
}

/* A connect failed with @p err: say so, as "tcp: connect: ..." or "file:
 * connect to an owner: ...". */
static void log_connect(const struct xfer_stream *s, int err)
{
	if (s->peer)
		xfer_log(XFER_LOG_WARN, "%s: connect to %s: %s", s->name,
			 s->peer, strerror(err));
	else
		xfer_log(XFER_LOG_WARN, "%s: connect: %s", s->name,
			 strerror(err));
}

/* Connected: with a secret, the hello goes first and the requests wait
 * for the server's challenge. @return 0, -1 (close). */
static int start(struct xfer_stream *s)
{
	s->connecting = false;
	event_add(s->rev, NULL);
	if (!s->auth)
		return 0;
	s->authing = true;
	xfer_event_want(s->wev, &s->writing, false);
	return xfer_auth_cli_start(&s->cli, s->fd);
}

/* xfer_stream_connect() but for the log line. @return 0, -1 (errno
 * says why). */
static int connect_fd(struct xfer_stream *s, struct event_base *base,
		      const struct sockaddr_storage *addr, socklen_t addrlen,
		      event_callback_fn cb, void *arg)
{
	int one = 1;

	s->fd = socket(addr->ss_family,
		       SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s->fd < 0)
		return -1;
	setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	s->rev = event_new(base, s->fd, EV_READ | EV_PERSIST, cb, arg);
	s->wev = event_new(base, s->fd, EV_WRITE | EV_PERSIST, cb, arg);
	if (!s->rev || !s->wev)
		return -1;
	if (!connect(s->fd, (const struct sockaddr *)addr, addrlen))
		return start(s);
	if (errno != EINPROGRESS)
		return -1;
	s->connecting = true;
	xfer_event_want(s->wev, &s->writing, true);
	return 0;
}

int xfer_stream_connect(struct xfer_stream *s, struct event_base *base,
			const struct sockaddr_storage *addr,
			socklen_t addrlen, event_callback_fn cb, void *arg)
{
	if (!connect_fd(s, base, addr, addrlen, cb, arg))
		return 0;
	log_connect(s, errno);
	return -1;
}

/* The connect finished: did it work? @return 0 (the exchange started),
 * -1 (close). */
static int connected(struct xfer_stream *s)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len) || err) {
		log_connect(s, err);
		return -1;
	}
	return start(s);
}

enum xfer_stream_next xfer_stream_io(struct xfer_stream *s, short what)
{
	int ret;

	if (s->connecting && connected(s))
		return XFER_STREAM_FAILED;
	if (!s->authing)
		return XFER_STREAM_OPEN;
	if (!(what & EV_READ))
		return XFER_STREAM_WAIT;
	ret = xfer_auth_cli_step(s->auth, &s->cli, s->fd, s->name);
	if (ret)
		return ret > 0 ? XFER_STREAM_WAIT : XFER_STREAM_REFUSED;
	s->authing = false;
	return XFER_STREAM_PROVED;
}

bool xfer_stream_open(const struct xfer_stream *s)
{
	return s->fd >= 0 && !s->connecting && !s->authing;
}

void xfer_stream_close(struct xfer_stream *s)
{
	if (s->rev)
		event_free(s->rev);
	if (s->wev)
		event_free(s->wev);
	s->rev = s->wev = NULL;
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	s->connecting = s->writing = s->authing = false;
}
