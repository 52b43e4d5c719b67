/*
 * Handshake socket (PROTOCOL.md §1). Server: a listener on one
 * event_base; each connection carries one frame, answered with the same
 * type byte (a legacy untyped frame with an untyped one), then the write
 * side is shut. Anything malformed closes that connection only, without
 * a reply. With a cluster secret, the peer proves itself first (frames
 * of type 0xC1, PROTOCOL.md §6). Bounded: a frame is read only once its
 * length fits the bytes all connections may buffer (buffer_max); at most
 * max_conns connections, and max_conns_per_addr from one source address
 * (util/addrs_internal.h), where a cap makes room by closing the oldest
 * connection in the way that is not being answered (first one not yet
 * proved, from the address with the most of them); a new connection
 * must prove itself (with a secret) or send its request's header within
 * auth_timeout_ms, and then has 5 s for the request. Client: one
 * exchange on an event_base.
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

#include "util/addrs_internal.h"
#include "util/auth_internal.h"
#include "util/container_internal.h"
#include "core/handshake_internal.h"
#include "util/json_internal.h"
#include "util/listen_internal.h"
#include "util/log_internal.h"
#include "util/net_internal.h"

#define FRAME_HDR 8 /* u64 length of type byte + JSON */

/* Where a server connection is: proving the peer, then its request. */
enum { WAIT_HELLO, WAIT_PROOF, WAIT_REQUEST };

struct hs_conn {
	struct xfer_hs_server *hs;
	struct bufferevent *bev;
	struct event *deadline;    /* proved, then the request within 5 s */
	TAILQ_ENTRY(hs_conn) link; /* hs->conns, oldest first */
	struct xfer_addr_node from; /* under its source address */
	int phase;
	bool proved;               /* its proof, or its request's header */
	bool answering;            /* its reply is being written */
	uint64_t want;             /* the frame being read: its L; 0: none */
	struct xfer_auth_session s;
};

struct xfer_hs_server {
	struct xfer_hs_env env;
	struct xfer_listener *listener;
	TAILQ_HEAD(, hs_conn) conns;
	unsigned nconns;
	struct xfer_addrs addrs;
	uint64_t reserved;         /* bytes of frames being read, all conns */
};

static struct xfer_log_limit full_log, budget_log, refused_log;

/* The peer proved itself (its proof, or without a secret its request's
 * header): 5 s from now for the request. */
static void proved(struct hs_conn *c)
{
	static const struct timeval request = {
		XFER_HANDSHAKE_TIMEOUT_MS / 1000, 0 };

	if (c->proved)
		return;
	c->proved = true;
	c->from.a->unproved--;
	evtimer_add(c->deadline, &request);
}

/* The frame being read is done with: its bytes leave the budget, and at
 * most a header is read until the next one is seen. */
static void release(struct hs_conn *c)
{
	c->hs->reserved -= c->want;
	c->want = 0;
	bufferevent_setwatermark(c->bev, EV_READ, 0, FRAME_HDR);
}

static void conn_free(struct hs_conn *c)
{
	release(c);
	TAILQ_REMOVE(&c->hs->conns, c, link);
	if (!c->proved)
		c->from.a->unproved--;
	xfer_addrs_del(&c->from);
	c->hs->nconns--;
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

/* A peer that does not prove itself: closed without a reply. */
static int refuse(const char *why)
{
	xfer_log_limited(&refused_log, XFER_LOG_WARN,
			 "handshake: auth: refused a peer: %s", why);
	return -EACCES;
}

/* A frame header announcing @p len bytes: within the limits, what the
 * phase expects, and room in the budget. @return 0, or -1 to close. */
static int frame_ok(struct hs_conn *c, uint64_t len)
{
	const struct xfer_hs_env *env = &c->hs->env;

	if (len == 0 || len > env->max_len)
		return -1;
	if (c->phase == WAIT_HELLO && len != 1 + XFER_AUTH_HELLO_LEN)
		return refuse("it does not authenticate (no secret set?)");
	if (c->phase == WAIT_PROOF && len != 1 + XFER_AUTH_PROOF_LEN)
		return refuse("no proof after the challenge");
	if (c->hs->reserved + len > env->buffer_max) {
		xfer_log_limited(&budget_log, XFER_LOG_WARN, "handshake: %llu "
				 "bytes of frames being read "
				 "(handshake_buffer_max): one of %llu refused",
				 (unsigned long long)c->hs->reserved,
				 (unsigned long long)len);
		return -1;
	}
	return 0;
}

/* An auth frame (type, then the message) in the phases before the
 * request: answer the hello with the challenge, check the proof.
 * @return 0, or -1 to close. */
static int take_auth(struct hs_conn *c, const uint8_t *body)
{
	const struct xfer_auth *a = c->hs->env.auth;
	uint8_t ch[XFER_AUTH_CHALLENGE_LEN], type = XFER_HS_AUTH;
	uint64_t len = 1 + sizeof(ch);

	if (body[0] != XFER_HS_AUTH)
		return refuse("it does not authenticate (no secret set?)");
	if (c->phase == WAIT_PROOF) {
		if (xfer_auth_verify(a, &c->s, body + 1))
			return refuse("it does not know the secret");
		c->phase = WAIT_REQUEST;
		proved(c);
		return 0;
	}
	if (xfer_auth_challenge(a, &c->s, body + 1, ch))
		return refuse("a malformed hello");
	c->phase = WAIT_PROOF;
	if (bufferevent_write(c->bev, &len, sizeof(len)) ||
	    bufferevent_write(c->bev, &type, 1) ||
	    bufferevent_write(c->bev, ch, sizeof(ch)))
		return -1;
	return 0;
}

/* Answer the request frame of @p len bytes at @p body. @return 0, -1 to
 * close. */
static int take_request(struct hs_conn *c, uint8_t *body, uint64_t len)
{
	uint64_t reply_hdr;
	uint8_t type;
	char *reply;
	size_t reply_len;
	bool legacy;

	/* A legacy frame has no type byte. As Mooncake reads frames, a first
	 * byte past the last type and below 0x80 starts one (JSON text, '{'
	 * in practice); the body must then be a Connection object. */
	legacy = body[0] > XFER_HS_LAST_TYPE && body[0] < 0x80;
	type = legacy ? XFER_HS_CONNECTION : body[0];
	if (!legacy) {
		body++;
		len--;
	}
	if (answer(&c->hs->env, type, (char *)body, len, &reply, &reply_len))
		return -1;
	event_del(c->deadline); /* the write timeout covers the reply */
	c->answering = true;
	reply_hdr = reply_len + !legacy;
	bufferevent_disable(c->bev, EV_READ);
	bufferevent_setcb(c->bev, NULL, on_written, on_event, c);
	if (bufferevent_write(c->bev, &reply_hdr, sizeof(reply_hdr)) ||
	    (!legacy && bufferevent_write(c->bev, &type, 1)) ||
	    bufferevent_write(c->bev, reply, reply_len)) {
		free(reply);
		return -1;
	}
	free(reply);
	return 0;
}

/* Frames one after another: with a secret the hello and the proof, then
 * the request. Each frame's bytes are reserved from the budget once its
 * header is in, and no more than the frame is read. */
static void on_read(struct bufferevent *bev, void *arg)
{
	struct hs_conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	uint64_t len;
	uint8_t *body;

	for (;;) {
		if (!c->want) {
			if (evbuffer_get_length(in) < FRAME_HDR)
				return;
			evbuffer_copyout(in, &len, sizeof(len));
			if (frame_ok(c, len))
				goto close;
			c->want = len;
			c->hs->reserved += len;
			if (c->phase == WAIT_REQUEST)
				proved(c);
			bufferevent_setwatermark(bev, EV_READ, 0, FRAME_HDR + len);
		}
		len = c->want;
		if (evbuffer_get_length(in) < FRAME_HDR + len)
			return;
		body = evbuffer_pullup(in, FRAME_HDR + len);
		if (!body)
			goto close;
		body += FRAME_HDR;
		if (c->phase == WAIT_REQUEST) {
			if (take_request(c, body, len))
				goto close;
			return;
		}
		if (take_auth(c, body))
			goto close;
		evbuffer_drain(in, FRAME_HDR + len);
		release(c);
	}
close:
	conn_free(c);
}

/* The oldest connection from @p self's address, but @p self, that is not
 * being answered; NULL if none. */
static struct hs_conn *victim_of_addr(struct hs_conn *self)
{
	struct xfer_addr_node *n;
	struct hs_conn *c;

	TAILQ_FOREACH(n, &self->from.a->nodes, link) {
		c = container_of(n, struct hs_conn, from);
		if (c != self && !c->answering)
			return c;
	}
	return NULL;
}

/* The oldest connection not proved from the address with the most of
 * them (a flood from a few addresses closes its own), else the oldest
 * not being answered; NULL if none. */
static struct hs_conn *victim(struct xfer_hs_server *hs)
{
	struct hs_conn *c, *v = NULL, *waiting = NULL;

	TAILQ_FOREACH(c, &hs->conns, link) {
		if (!c->proved && (!v || c->from.a->unproved >
					 v->from.a->unproved))
			v = c;
		if (!waiting && !c->answering)
			waiting = c;
	}
	return v ? v : waiting;
}

/* Room for @p c, counted under its address, within the caps: at most one
 * connection closed per cap. @return NULL, or the cap that refuses it. */
static const char *make_room(struct xfer_hs_server *hs, struct hs_conn *c)
{
	struct hs_conn *v;

	if (hs->env.max_conns_per_addr &&
	    c->from.a->n > hs->env.max_conns_per_addr) {
		if (!(v = victim_of_addr(c)))
			return "max_handshake_conns_per_addr";
		conn_free(v);
	}
	if (hs->nconns >= hs->env.max_conns) {
		if (!(v = victim(hs)))
			return "max_handshake_conns";
		conn_free(v);
	}
	return NULL;
}

static void on_accept(void *arg, int fd)
{
	struct xfer_hs_server *hs = arg;
	struct timeval proof = { hs->env.auth_timeout_ms / 1000,
				 hs->env.auth_timeout_ms % 1000 * 1000 };
	static const struct timeval timeout = {
		XFER_HANDSHAKE_TIMEOUT_MS / 1000, 0 };
	struct hs_conn *c = calloc(1, sizeof(*c));
	const char *cap;

	if (!c)
		goto err_close;
	if (xfer_addrs_add(&hs->addrs, &c->from, fd))
		goto err_free;
	cap = make_room(hs, c);
	if (cap) {
		xfer_log_limited(&full_log, XFER_LOG_WARN, "handshake: %u "
				 "connections open (%s), all being answered: "
				 "a new one closed", hs->nconns, cap);
		goto err_addr;
	}
	c->deadline = evtimer_new(hs->env.base, on_deadline, c);
	if (!c->deadline)
		goto err_addr;
	c->bev = bufferevent_socket_new(hs->env.base, fd,
					BEV_OPT_CLOSE_ON_FREE);
	if (!c->bev)
		goto err_timer;
	c->hs = hs;
	c->phase = hs->env.auth ? WAIT_HELLO : WAIT_REQUEST;
	c->from.a->unproved++;
	TAILQ_INSERT_TAIL(&hs->conns, c, link);
	hs->nconns++;
	/* a header at a time: a frame is read once its bytes are reserved */
	bufferevent_setwatermark(c->bev, EV_READ, 0, FRAME_HDR);
	bufferevent_setcb(c->bev, on_read, NULL, on_event, c);
	bufferevent_set_timeouts(c->bev, NULL, &timeout);
	bufferevent_enable(c->bev, EV_READ);
	evtimer_add(c->deadline, &proof);
	return;

err_timer:
	event_free(c->deadline);
err_addr:
	xfer_addrs_del(&c->from);
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
	TAILQ_INIT(&hs->conns);
	xfer_addrs_init(&hs->addrs);
	hs->listener = xfer_listen(env->base, sa, salen, "handshake",
				   on_accept, hs);
	if (!hs->listener) {
		ret = -errno;
		free(hs);
		return ret;
	}
	*port = xfer_net_local_port(xfer_listener_fd(hs->listener));
	*out = hs;
	return 0;
}

void xfer_handshake_close(struct xfer_hs_server *hs)
{
	while (!TAILQ_EMPTY(&hs->conns))
		conn_free(TAILQ_FIRST(&hs->conns));
	xfer_listener_free(hs->listener);
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
	/* with a secret: the request waits here for the server's challenge */
	const struct xfer_auth *auth;
	struct evbuffer *held;
	struct xfer_auth_session s;
};

static struct xfer_log_limit server_log;

static void req_finish(struct xfer_hs_req *q, int err, const char *body,
		       size_t len)
{
	q->cb(err, body, len, q->arg);
	xfer_handshake_cancel(q);
}

/* The challenge frame (type 0xC1) at @p body: the server proved itself,
 * so our proof and the request held back go out. @return 0, -EACCES (the
 * server does not know the secret), -EPROTO, -ENOMEM. */
static int req_challenge(struct xfer_hs_req *q, const uint8_t *body,
			 uint64_t len)
{
	uint8_t proof[XFER_AUTH_PROOF_LEN], type = XFER_HS_AUTH;
	uint64_t plen = 1 + sizeof(proof);
	struct evbuffer *out = bufferevent_get_output(q->bev);

	if (len != 1 + XFER_AUTH_CHALLENGE_LEN || body[0] != XFER_HS_AUTH)
		return -EPROTO;
	if (xfer_auth_prove(q->auth, &q->s, body + 1, proof)) {
		xfer_log_limited(&server_log, XFER_LOG_WARN, "handshake: auth: "
				 "a peer's handshake port does not know the "
				 "secret");
		return -EACCES;
	}
	if (evbuffer_add(out, &plen, sizeof(plen)) ||
	    evbuffer_add(out, &type, 1) ||
	    evbuffer_add(out, proof, sizeof(proof)) ||
	    evbuffer_add_buffer(out, q->held))
		return -ENOMEM;
	evbuffer_free(q->held);
	q->held = NULL;
	return 0;
}

static void req_read(struct bufferevent *bev, void *arg)
{
	struct xfer_hs_req *q = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	uint64_t len;
	uint8_t *body;
	int ret;

	for (;;) {
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
		if (!body) {
			req_finish(q, -ENOMEM, NULL, 0);
			return;
		}
		if (!q->held)
			break;
		ret = req_challenge(q, body + FRAME_HDR, len);
		if (ret) {
			req_finish(q, ret, NULL, 0);
			return;
		}
		evbuffer_drain(in, FRAME_HDR + len);
	}
	if (body[FRAME_HDR] != q->type)
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
	if (q->held)
		evbuffer_free(q->held);
	free(q);
}

/* Queue a frame of @p type with @p len bytes of @p body on @p out. */
static int add_frame(struct evbuffer *out, uint8_t type, const void *body,
		     size_t len)
{
	uint64_t frame_len = len + 1;

	return evbuffer_add(out, &frame_len, sizeof(frame_len)) ||
	       evbuffer_add(out, &type, 1) || evbuffer_add(out, body, len) ?
	       -ENOMEM : 0;
}

struct xfer_hs_req *xfer_handshake_request(struct event_base *base,
					   struct evdns_base *dns,
					   const struct xfer_auth *auth,
					   const char *host, uint16_t port,
					   uint8_t type, const char *body,
					   size_t body_len, uint32_t max_len,
					   xfer_hs_cb cb, void *arg)
{
	static const struct timeval connect = { XFER_HANDSHAKE_TIMEOUT_MS / 1000, 0 };
	uint8_t hello[XFER_AUTH_HELLO_LEN];
	struct xfer_hs_req *q = calloc(1, sizeof(*q));
	struct evbuffer *out;

	if (!q)
		return NULL;
	q->type = type;
	q->max_len = max_len;
	q->cb = cb;
	q->arg = arg;
	q->auth = auth;
	q->timer = evtimer_new(base, req_timeout, q);
	q->bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (!q->timer || !q->bev)
		goto err_free;
	out = bufferevent_get_output(q->bev);
	if (auth) {
		/* the hello now; the request once the server proved itself */
		q->held = evbuffer_new();
		if (!q->held || xfer_auth_hello(&q->s, hello) ||
		    add_frame(out, XFER_HS_AUTH, hello, sizeof(hello)))
			goto err_free;
		out = q->held;
	}
	bufferevent_setcb(q->bev, req_read, NULL, req_event, q);
	if (add_frame(out, type, body, body_len) ||
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
	if (q->held)
		evbuffer_free(q->held);
	free(q);
	return NULL;
}
