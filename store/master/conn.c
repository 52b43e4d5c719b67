/*
 * xfer-stored's connections (conn_internal.h): with a cluster secret,
 * the challenge-response of util/auth_sock.c on the raw socket first
 * (5 s to prove itself); then a bufferevent whose input is cut into
 * frames (PROTOCOL.md §7), each checked, decoded, answered by the state
 * (master_internal.h) and its reply queued, in order. A bad frame closes
 * its connection only. A client that does not read its replies stops
 * being read once STORED_OUT_MAX bytes wait for it. While the journal
 * has changes not yet durable, replies are held (in order, after any
 * held before) and go out once it commits, at the end of the pass.
 *
 * At most max_conns connections (xfer's cap; the data ports of the
 * engine do the same, transports/sstream.c): one more closes the oldest
 * that has not sent a request yet, else the one idle longest (no byte
 * waiting either way, nothing held), else the new one itself. A client
 * that serves its pings is never idle long, so a flood of silent
 * connections closes its own.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "store/master/conn_internal.h"
#include "store/master/master_internal.h"
#include "util/auth_internal.h"
#include "util/listen_internal.h"
#include "util/log_internal.h"
#include "util/net_internal.h"

#define STORED_OUT_MAX (32u << 20)
#define AUTH_TIMEOUT_S 5

struct stored_srv {
	struct event_base *base;
	struct stored *state;
	const struct xfer_auth *auth;
	struct xfer_listener *listener;
	struct store_msg *req, *rep;   /* one request at a time */
	struct store_buf out;
	struct conn *conns;            /* open connections, newest first */
	unsigned nconns, max_conns;
	uint64_t seq;                  /* requests answered, over all */
	stored_follow_cb follow;       /* NULL: no standby is taken */
	void *follow_arg;
};

struct conn {
	struct conn *prev, *next;
	struct stored_srv *srv;
	int fd;
	struct event *auth_ev;         /* while proving itself */
	struct xfer_auth_srv *auth;
	struct bufferevent *bev;
	struct evbuffer *held;         /* replies waiting for a commit */
	uint64_t last;                 /* srv.seq at its last request; 0:
					  none yet */
};

static struct xfer_log_limit bad_log, cap_log;

static void conn_close(struct conn *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		c->srv->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->srv->nconns--;
	if (c->auth_ev)
		event_free(c->auth_ev);
	xfer_auth_srv_free(c->auth);
	if (c->held)
		evbuffer_free(c->held);
	if (c->bev)
		bufferevent_free(c->bev);  /* closes the socket */
	else if (c->fd >= 0)
		close(c->fd);
	free(c);
}

static void refuse(struct conn *c, const char *why)
{
	xfer_log_limited(&bad_log, XFER_LOG_WARN, "xfer-stored: closed a "
			 "connection: %s", why);
	conn_close(c);
}

/* Hand @p c, whose request is ha_follow, to the journal stream. */
static void follow(struct conn *c)
{
	struct stored_srv *srv = c->srv;
	struct bufferevent *bev = c->bev;

	if (!srv->follow || evbuffer_get_length(c->held)) {
		refuse(c, srv->follow ? "ha_follow after other requests" :
		       "ha_follow, and this master takes no standby");
		return;
	}
	evbuffer_drain(bufferevent_get_input(bev),
		       STORE_HDR_LEN + srv->req->h.len);
	c->bev = NULL;
	c->fd = -1;
	conn_close(c);
	srv->follow(srv->follow_arg, bev, srv->req);
}

/* Answer the whole frames in the input. @return false if @p c was
 * closed. */
static bool serve(struct conn *c)
{
	struct stored_srv *srv = c->srv;
	struct evbuffer *in = bufferevent_get_input(c->bev);
	struct evbuffer *out = bufferevent_get_output(c->bev);
	uint8_t hdr[STORE_HDR_LEN];
	const uint8_t *frame;
	struct evbuffer *to;

	while (evbuffer_get_length(out) + evbuffer_get_length(c->held) <
	       STORED_OUT_MAX &&
	       evbuffer_copyout(in, hdr, sizeof(hdr)) == sizeof(hdr)) {
		if (store_hdr_decode(hdr, &srv->req->h) ||
		    (srv->req->h.flags & STORE_F_REPLY)) {
			refuse(c, "not a request frame");
			return false;
		}
		/* held for a standby: only a standby's request goes on */
		if (stored_held(srv->state) &&
		    srv->req->h.type != STORE_HA_FOLLOW)
			break;
		if (evbuffer_get_length(in) < STORE_HDR_LEN + srv->req->h.len)
			break;
		frame = evbuffer_pullup(in, STORE_HDR_LEN + srv->req->h.len);
		if (!frame || store_msg_decode(frame + STORE_HDR_LEN,
					       srv->req)) {
			refuse(c, frame ? "a malformed request" : "no memory");
			return false;
		}
		if (srv->req->h.type == STORE_HA_FOLLOW) {
			follow(c);
			return false;
		}
		stored_handle(srv->state, srv->req, srv->rep);
		to = stored_pending(srv->state) ||
		     evbuffer_get_length(c->held) ? c->held : out;
		srv->out.len = 0;
		if (store_msg_encode(&srv->out, srv->rep) ||
		    evbuffer_add(to, srv->out.p, srv->out.len)) {
			refuse(c, "no memory for a reply");
			return false;
		}
		evbuffer_drain(in, STORE_HDR_LEN + srv->req->h.len);
		c->last = ++srv->seq;
	}
	/* read on only once the client has taken its replies */
	if (evbuffer_get_length(out) + evbuffer_get_length(c->held) >=
	    STORED_OUT_MAX)
		bufferevent_disable(c->bev, EV_READ);
	return true;
}

static void on_read(struct bufferevent *bev, void *arg)
{
	(void)bev;
	serve(arg);
}

static void on_write(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;

	/* called once the output drained: frames may wait in the input */
	if (!(bufferevent_get_enabled(bev) & EV_READ) && serve(c))
		bufferevent_enable(bev, EV_READ);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)what;
	conn_close(arg);               /* EOF or error */
}

/* The journal committed: what each connection held may go, and the
 * requests that waited while stored_held() are served. */
static void on_committed(void *arg)
{
	struct stored_srv *srv = arg;
	struct conn *c, *next;

	for (c = srv->conns; c; c = next) {
		next = c->next;
		if (c->held && evbuffer_get_length(c->held) &&
		    evbuffer_add_buffer(bufferevent_get_output(c->bev),
					c->held)) {
			refuse(c, "no memory for its replies");
			continue;
		}
		if (c->bev && (bufferevent_get_enabled(c->bev) & EV_READ) &&
		    evbuffer_get_length(bufferevent_get_input(c->bev)))
			serve(c);
	}
}

static int start_requests(struct conn *c)
{
	c->held = evbuffer_new();
	c->bev = bufferevent_socket_new(c->srv->base, c->fd,
					BEV_OPT_CLOSE_ON_FREE);
	if (!c->held || !c->bev)
		return -ENOMEM;
	bufferevent_setcb(c->bev, on_read, on_write, on_event, c);
	return bufferevent_enable(c->bev, EV_READ | EV_WRITE) ? -ENOMEM : 0;
}

static void on_auth(evutil_socket_t fd, short what, void *arg)
{
	struct conn *c = arg;
	int ret;

	if (what & EV_TIMEOUT) {
		refuse(c, "it did not prove itself within 5 s");
		return;
	}
	ret = xfer_auth_srv_step(c->auth, fd);
	if (ret > 0)
		return;
	if (ret < 0) {
		conn_close(c);         /* logged by the step */
		return;
	}
	event_free(c->auth_ev);
	c->auth_ev = NULL;
	xfer_auth_srv_free(c->auth);
	c->auth = NULL;
	if (start_requests(c))
		refuse(c, "no memory");
}

/* Nothing to read, write or hold: closing it loses no request. */
static bool idle(const struct conn *c)
{
	return c->bev && !evbuffer_get_length(bufferevent_get_input(c->bev)) &&
	       !evbuffer_get_length(bufferevent_get_output(c->bev)) &&
	       !evbuffer_get_length(c->held);
}

/* The connection to close for a new one: the oldest that has sent no
 * request (proving itself or not), else the idle one whose last request
 * is oldest; NULL if every one is busy. */
static struct conn *victim(struct stored_srv *srv)
{
	struct conn *c, *fresh = NULL, *old = NULL;

	for (c = srv->conns; c; c = c->next) {
		if (!c->last)
			fresh = c;     /* the list is newest first */
		else if (!fresh && idle(c) && (!old || c->last < old->last))
			old = c;
	}
	return fresh ? fresh : old;
}

/* Room for one more under the cap. @return false if there is none. */
static bool make_room(struct stored_srv *srv)
{
	struct conn *v;

	if (srv->nconns < srv->max_conns)
		return true;
	v = victim(srv);
	xfer_log_limited(&cap_log, XFER_LOG_WARN, "xfer-stored: %u "
			 "connections open (--max_rpc_conns): %s", srv->nconns,
			 !v ? "a new one closed, every other busy" :
			 !v->last ? "the oldest that sent no request closed" :
			 "the one idle longest closed");
	if (!v)
		return false;
	conn_close(v);
	return true;
}

static void on_accept(void *arg, int fd)
{
	struct timeval tv = { AUTH_TIMEOUT_S, 0 };
	struct stored_srv *srv = arg;
	struct conn *c;
	int one = 1;

	if (!make_room(srv) || !(c = calloc(1, sizeof(*c)))) {
		close(fd);
		return;
	}
	srv->nconns++;
	c->srv = srv;
	c->fd = fd;
	c->next = srv->conns;
	if (c->next)
		c->next->prev = c;
	srv->conns = c;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (!srv->auth) {
		if (start_requests(c))
			refuse(c, "no memory");
		return;
	}
	c->auth = xfer_auth_srv_new(srv->auth, "xfer-stored");
	c->auth_ev = event_new(srv->base, fd, EV_READ | EV_PERSIST, on_auth,
			       c);
	if (!c->auth || !c->auth_ev || event_add(c->auth_ev, &tv))
		refuse(c, "no memory");
}

struct stored_srv *stored_srv_new(struct event_base *base,
				  struct stored *state,
				  const struct xfer_auth *auth,
				  const struct sockaddr *sa, socklen_t salen,
				  unsigned max_conns)
{
	struct stored_srv *srv;
	int err = ENOMEM;

	if (!max_conns) {
		errno = EINVAL;
		return NULL;
	}
	if (!(srv = calloc(1, sizeof(*srv))))
		return NULL;
	srv->max_conns = max_conns;
	srv->base = base;
	srv->state = state;
	srv->auth = auth;
	srv->req = malloc(sizeof(*srv->req));
	srv->rep = malloc(sizeof(*srv->rep));
	if (!srv->req || !srv->rep)
		goto err;
	stored_set_committed(state, on_committed, srv);
	srv->listener = xfer_listen(base, sa, salen, "xfer-stored", on_accept,
				    srv);
	if (!srv->listener) {
		err = errno;
		goto err;
	}
	return srv;

err:
	stored_srv_free(srv);
	errno = err;
	return NULL;
}

void stored_srv_set_follow(struct stored_srv *srv, stored_follow_cb cb,
			   void *arg)
{
	srv->follow = cb;
	srv->follow_arg = arg;
}

uint16_t stored_srv_port(const struct stored_srv *srv)
{
	return xfer_net_local_port(xfer_listener_fd(srv->listener));
}

void stored_srv_free(struct stored_srv *srv)
{
	if (!srv)
		return;
	while (srv->conns)
		conn_close(srv->conns);
	xfer_listener_free(srv->listener);
	store_buf_free(&srv->out);
	free(srv->req);
	free(srv->rep);
	free(srv);
}
