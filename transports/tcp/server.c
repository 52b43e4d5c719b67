/*
 * TCP transport, target side: serve READ/WRITE requests on accepted
 * connections, straight between the socket and registered memory. Every
 * (addr, size) is checked against the remotely accessible buffers before
 * memory is touched; a refused request gets status 1 (v2), then the
 * write side is shut and the connection closed once the peer closes
 * (linger()).
 *
 * To keep syscalls few, a connection reads while requests keep coming and
 * answers when the socket runs dry (or its replies fill up, or RUN_MAX
 * bytes came): headers are read into a read-ahead (STAGE bytes), a large
 * WRITE payload straight into place together with the header behind it,
 * and the replies of the whole run (status frames, READ payloads) go out
 * in one gathered sendmsg. A lone READ costs one read and one send. Small
 * WRITEs (up to COPY_MAX) come through the read-ahead, many in one read,
 * and are copied to their place: a copy of a few KiB costs less than the
 * read it saves. (A run of large WRITEs is answered every RUN_MAX bytes:
 * held back longer, their statuses cost the initiator more than the
 * sends they save. One of small WRITEs is answered every RUN_SMALL
 * bytes, past a full ring of 4 KiB ones, and not when the socket runs
 * dry in the middle of one (hold()): each answer is a segment the
 * initiator wakes for, reads and acknowledges.) The
 * replies point into registered memory, so a WRITE to bytes that a READ
 * before it has yet to send waits until they went out (held()): requests
 * on a connection take effect in order.
 *
 * What a connection may hold: at most REPLIES replies (pointers into
 * registered memory, no copies) and STAGE bytes read ahead, so nothing a
 * peer sends is buffered beyond 64 KiB; connections within the caps of
 * transports/sstream.c; a new connection must take a request (or prove
 * itself) within auth_timeout_ms, and one that moves no byte for the
 * idle timeout (between requests) or the transfer timeout (in a
 * request) is closed, and so is one whose peer still holds
 * a leaving buffer past its deadline (xfer_unregister()). A peer that
 * shuts its write side gets every reply it is owed, then the close.
 * Each connection lives on one worker reactor; nothing here is called
 * from another thread but xfer_tcp_server_accept(). The socket, its
 * events and the table of connections are transports/sstream.c's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <event2/event.h>

#include "transports/tcp/tcp_internal.h"

#define REPLIES 64             /* replies queued before the reads pause */
#define BUDGET (8u << 20)      /* bytes per callback, for fairness */
#define RUN_MAX (64u << 10)    /* bytes read before the replies go out */
#define RUN_SMALL (512u << 10) /* the same in a run of small WRITEs */
/* Bytes read ahead of the request being served: headers, and the head
 * of a WRITE payload (copied to its place once its header is checked). */
#define STAGE (64u << 10)
/* Read ahead behind a large WRITE, or READs: a ring's worth of headers. */
#define HDRS (REPLIES * TCP_HDR_LEN)
/* A WRITE payload up to this long may come through the read-ahead, and
 * the WRITEs after it are read ahead the same way; a longer one makes the
 * reads behind it take only the next header. */
#define COPY_MAX (16u << 10)
#define LINGER_MS 5000         /* a refused peer's time to close */

/* One reply, in request order: a status frame (v2) and/or READ payload. */
struct reply {
	uint64_t status;
	uint8_t status_left;   /* bytes of status still to send: 8 or 0 */
	uint8_t *ptr;          /* READ payload still to send */
	size_t left;
	struct xfer_buffer *buf; /* pinned until the payload is out */
};

struct tcp_sconn {
	struct tcp_transport *t;
	struct xfer_sstream s;         /* in t->sconns; its timer: the
					* idle or transfer timeout */
	uint8_t *in;                   /* STAGE bytes: [in_off, in_len) */
	size_t in_off, in_len;         /* read, not yet acted on */
	bool copy;                     /* the last WRITE was small */
	uint8_t *wptr;                 /* WRITE payload being read */
	size_t wleft;
	bool wv2;
	struct xfer_buffer *wbuf;      /* pinned until it has arrived */
	struct reply rq[REPLIES];      /* ring of replies to send */
	unsigned rq_head, rq_n;
	unsigned rq_reads;             /* of them with payload left */
	bool refused;                  /* close once the replies are out */
	bool lingering;                /* refused, replies out: linger() */
	bool eof;                      /* the peer shut its write side */
	bool dry;                      /* the last read got less than asked */
};

static struct xfer_log_limit cap_log;

static void put_buffer(struct tcp_sconn *c, struct xfer_buffer *b)
{
	if (b)
		xfer_buffer_unpin(c->t->base.env->buffers, b);
}

static void sconn_free(struct tcp_sconn *c)
{
	struct tcp_transport *t = c->t;

	put_buffer(c, c->wbuf);
	for (unsigned i = 0; i < c->rq_n; i++)
		put_buffer(c, c->rq[(c->rq_head + i) % REPLIES].buf);

	xfer_sstream_close(&t->sconns, &c->s);
	free(c->in);
	free(c);
}

/* In a request: a payload on its way in, or replies owed (a header
 * partly read holds nothing: idle). */
static bool busy(const struct tcp_sconn *c)
{
	return c->rq_n || c->wleft;
}

/* Bytes moved: the clock starts again, with the timeout of the state the
 * connection is in now (0: none). */
static void rearm(struct tcp_sconn *c)
{
	const struct xfer_transport_env *env = c->t->base.env;

	xfer_sstream_arm(&c->s, env, busy(c), busy(c) ?
			 env->transfer_timeout_ms : env->idle_timeout_ms);
}

/* Does the peer hold a buffer past its leaving deadline? */
static bool overdue(const struct tcp_sconn *c)
{
	if (c->wbuf && xfer_buffer_overdue(c->wbuf))
		return true;
	for (unsigned i = 0; i < c->rq_n; i++) {
		struct xfer_buffer *b = c->rq[(c->rq_head + i) % REPLIES].buf;

		if (b && xfer_buffer_overdue(b))
			return true;
	}
	return false;
}

static void push_reply(struct tcp_sconn *c, bool v2, uint64_t status,
		       uint8_t *ptr, size_t len, struct xfer_buffer *buf)
{
	struct reply *r = &c->rq[(c->rq_head + c->rq_n++) % REPLIES];

	r->status = status;
	r->status_left = v2 ? 8 : 0;
	r->ptr = ptr;
	r->left = len;
	r->buf = buf;
	c->rq_reads += len > 0;
}

/*
 * Act on one complete header: queue a READ reply, start reading a WRITE
 * payload, or refuse. @return false when refused without a status (v1).
 */
static bool take_header(struct tcp_sconn *c, const uint8_t *hdr)
{
	struct xfer_buffers *bs = c->t->base.env->buffers;
	uint64_t size, addr;
	uint8_t op = hdr[16];
	bool v2 = op & TCP_OP_V2, write = (op & 0x7f) == TCP_OP_WRITE;
	struct xfer_buffer *b;

	memcpy(&size, hdr, 8);
	memcpy(&addr, hdr + 8, 8);
	/* The pin keeps the buffer registered while its bytes move. */
	pthread_rwlock_rdlock(&bs->lock);
	b = xfer_buffers_find(bs, addr, size, true);
	if (b)
		xfer_buffer_pin(b);
	pthread_rwlock_unlock(&bs->lock);
	if (!b) {
		xfer_log(XFER_LOG_WARN, "tcp: refused %s of %llu bytes at 0x%llx",
			 write ? "write" : "read", (unsigned long long)size,
			 (unsigned long long)addr);
		c->refused = true;
		if (v2)
			push_reply(c, true, TCP_STATUS_REFUSED, NULL, 0, NULL);
		return v2;
	}
	xfer_sstream_proved(&c->t->sconns, &c->s); /* a request taken */
	if (write) {
		c->copy = size <= COPY_MAX;
		c->wptr = (uint8_t *)(uintptr_t)addr;
		c->wleft = size;
		c->wv2 = v2;
		c->wbuf = b;
	} else {
		push_reply(c, v2, TCP_STATUS_OK, (uint8_t *)(uintptr_t)addr,
			   size, b);
	}
	return true;
}

/* @p n more bytes of the WRITE payload are in: the last ones end it. */
static void payload_in(struct tcp_sconn *c, size_t n)
{
	if (!n)
		return; /* wptr may be NULL: no WRITE under way */
	c->wptr += n;
	c->wleft -= n;
	if (!c->wleft) {
		put_buffer(c, c->wbuf);
		c->wbuf = NULL;
		if (c->wv2) /* v1 has no status frames */
			push_reply(c, true, TCP_STATUS_OK, NULL, 0, NULL);
	}
}

/* Whole headers wait in c->in (for room in the reply ring). */
static bool staged(const struct tcp_sconn *c)
{
	return !c->wleft && c->in_len - c->in_off >= TCP_HDR_LEN;
}

/*
 * Is @p hdr a WRITE to bytes that a READ before it still has to send?
 * Then it waits until they went out: requests on a connection take
 * effect in order (PROTOCOL.md §3), and a READ's reply points into the
 * registered memory the WRITE would change.
 */
static bool held(const struct tcp_sconn *c, const uint8_t *hdr)
{
	uint64_t size, addr;

	if ((hdr[16] & 0x7f) != TCP_OP_WRITE || !c->rq_reads)
		return false;
	memcpy(&size, hdr, 8);
	memcpy(&addr, hdr + 8, 8);
	for (unsigned i = 0; i < c->rq_n; i++) {
		const struct reply *r = &c->rq[(c->rq_head + i) % REPLIES];
		uint64_t p = (uintptr_t)r->ptr;

		if (r->left && (p >= addr ? p - addr < size
					  : addr - p < r->left))
			return true;
	}
	return false;
}

/*
 * Act on the headers in c->in while replies have room: queue READ
 * replies, start WRITEs and copy what of their payload came along. Stops
 * at a WRITE whose payload is still to come (then c->in is empty), at a
 * refusal, or at a part of a header. @return 0, -1 to close (a v1
 * request refused).
 */
static int take_staged(struct tcp_sconn *c)
{
	size_t used = c->in_off, m;

	while (!c->wleft && !c->refused && c->rq_n < REPLIES &&
	       c->in_len - used >= TCP_HDR_LEN) {
		if (held(c, c->in + used))
			break;
		if (!take_header(c, c->in + used))
			return -1;
		used += TCP_HDR_LEN;
		m = c->in_len - used < c->wleft ? c->in_len - used : c->wleft;
		if (m)
			memcpy(c->wptr, c->in + used, m);
		used += m;
		payload_in(c, m);
	}
	c->in_off = used;
	if (c->in_off == c->in_len)
		c->in_off = c->in_len = 0;
	return 0;
}

/*
 * Read what can be read now, with room for one more reply: the rest of
 * a WRITE payload straight into place and what is behind it into c->in,
 * in one readv (behind a large WRITE only the next header: its payload,
 * if it is a large WRITE, goes straight into place by the next read);
 * else headers, and what of a WRITE payload comes with them, up to STAGE
 * bytes after small WRITEs, HDRS otherwise. Then act on the headers
 * that came.
 * Sets c->dry when the socket gave less than asked (it is likely empty:
 * the caller answers now, unless a request is cut (hold()), rather than
 * spend a call on EAGAIN).
 * @return bytes read (1 for headers that waited in c->in), 0 on EAGAIN
 * or at the peer's EOF (c->eof set), -1 to close.
 */
static ssize_t sconn_read(struct tcp_sconn *c)
{
	struct iovec iov[2];
	size_t want = 0, m;
	ssize_t n;
	int k = 0;

	if (staged(c))
		return take_staged(c) ? -1 : 1;
	/* Less than a header waits: it moves to the front. */
	memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
	c->in_len -= c->in_off;
	c->in_off = 0;
	if (c->wleft)
		iov[k++] = (struct iovec){ c->wptr, c->wleft };
	iov[k++] = (struct iovec){ c->in + c->in_len,
				   c->copy ? STAGE - c->in_len :
				   c->wleft ? TCP_HDR_LEN : HDRS - c->in_len };
	for (int i = 0; i < k; i++)
		want += iov[i].iov_len;
	n = readv(c->s.fd, iov, k);
	c->dry = n < (ssize_t)want;
	if (n == 0) {
		c->eof = true; /* the replies owed still go out */
		return 0;
	}
	if (n < 0)
		return errno == EAGAIN ? 0 : -1;
	m = (size_t)n < c->wleft ? (size_t)n : c->wleft;
	payload_in(c, m);
	c->in_len += (size_t)n - m;
	return take_staged(c) ? -1 : n;
}

/* Send queued replies. @return bytes sent, 0 on EAGAIN, -1 to close. */
static ssize_t sconn_write(struct tcp_sconn *c)
{
	struct iovec iov[2 * REPLIES];
	struct msghdr msg = { .msg_iov = iov };
	ssize_t n, sent;
	int k = 0;

	for (unsigned i = 0; i < c->rq_n; i++) {
		struct reply *r = &c->rq[(c->rq_head + i) % REPLIES];

		if (r->status_left)
			iov[k++] = (struct iovec){
				(uint8_t *)&r->status + 8 - r->status_left,
				r->status_left };
		if (r->left)
			iov[k++] = (struct iovec){ r->ptr, r->left };
	}
	if (k == 0)
		return 0;
	msg.msg_iovlen = k;
	sent = n = sendmsg(c->s.fd, &msg, MSG_NOSIGNAL);
	if (n < 0)
		return errno == EAGAIN ? 0 : -1;
	while (c->rq_n) {
		struct reply *r = &c->rq[c->rq_head];
		size_t m = (size_t)n < r->status_left ? (size_t)n : r->status_left;

		r->status_left -= m;
		n -= m;
		m = (size_t)n < r->left ? (size_t)n : r->left;
		if (m) { /* a status-only reply has no payload pointer */
			r->ptr += m;
			r->left -= m;
			n -= m;
			c->rq_reads -= !r->left;
		}
		if (r->status_left || r->left)
			break;
		put_buffer(c, r->buf);
		c->rq_head = (c->rq_head + 1) % REPLIES;
		c->rq_n--;
	}
	return sent;
}

/* Nothing more to do: refused or shut by the peer, and nothing owed. */
static bool done(const struct tcp_sconn *c)
{
	return (c->refused || (c->eof && !staged(c))) && c->rq_n == 0;
}

/* Is there more to read: from the socket, or headers that waited (and
 * may be served now)? */
static bool can_read(const struct tcp_sconn *c)
{
	return !c->refused && (!c->eof || staged(c)) && c->rq_n < REPLIES &&
	       !(staged(c) && held(c, c->in + c->in_off));
}

/*
 * The socket ran dry in the middle of a small request (a WRITE of up to
 * COPY_MAX, or a header): its rest is on the way, since a peer sends a
 * request whole, so the replies owed wait for it and leave with those
 * of the requests behind it, rather than as a segment of their own that
 * the peer wakes for. Not with a full ring, a header that waits, or the
 * peer's EOF. (A large WRITE's payload may take long: its replies go.)
 */
static bool hold(const struct tcp_sconn *c)
{
	return c->dry && !c->eof && !c->refused && c->rq_n < REPLIES &&
	       (c->wleft ? c->copy : c->in_len > c->in_off && !staged(c));
}

/*
 * A refused connection whose replies are out: the write side is shut, so
 * the peer reads the refusal's status, then EOF; what it still sends is
 * read and dropped until it closes, or LINGER_MS pass. (Closing with its
 * bytes unread would reset the connection, and a reset can cost the peer
 * the replies still on their way to it.) @return 0, -1 to close.
 */
static int linger(struct tcp_sconn *c)
{
	static _Thread_local uint8_t sink[16384];
	struct timeval tv = { LINGER_MS / 1000, (LINGER_MS % 1000) * 1000 };
	size_t budget = BUDGET;
	ssize_t n;

	if (!c->lingering) {
		c->lingering = true;
		if (shutdown(c->s.fd, SHUT_WR))
			return -1;
		xfer_event_want(c->s.wev, &c->s.writing, false);
		xfer_event_want(c->s.rev, &c->s.reading, true);
		event_add(c->s.timer, &tv);
	}
	while (budget) {
		n = recv(c->s.fd, sink, sizeof(sink), 0);
		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n <= 0)
			return -1;
		budget -= (size_t)n < budget ? (size_t)n : budget;
	}
	event_active(c->s.rev, EV_READ, 0);
	return 0;
}

/*
 * Read the requests that are there, up to a run of RUN_MAX bytes
 * (RUN_SMALL after a small WRITE) or a full reply ring, then send the
 * replies of the whole run at once; again while bytes move, within
 * BUDGET. A socket that ran dry ends the turn: the
 * level-triggered read event brings the connection back for more.
 * @return 0, or -1 to close.
 */
static int sconn_run(struct tcp_sconn *c)
{
	size_t budget = BUDGET;
	ssize_t in, out, n;
	bool moved = false;

	if (c->lingering)
		return linger(c);
	do {
		in = 0;
		c->dry = false;
		while (can_read(c) && !c->dry &&
		       (size_t)in < (c->copy ? RUN_SMALL : RUN_MAX)) {
			n = sconn_read(c);
			if (n < 0)
				return -1;
			if (n == 0)
				break;
			in += n;
		}
		out = hold(c) ? 0 : sconn_write(c);
		if (out < 0)
			return -1;
		if (done(c))
			return c->refused && !c->eof ? linger(c) : -1;
		moved |= in || out;
		budget -= (size_t)(in + out) < budget ? (size_t)(in + out)
						      : budget;
		/* Headers read ahead wait for room in the reply ring (or a
		 * WRITE for the READ replies it would change): once replies
		 * went out they are served now, whatever the socket has (an
		 * empty one brings no read event for them). */
	} while ((((in || out) && !c->dry) || (staged(c) && can_read(c))) &&
		 budget);
	if (overdue(c))
		return -1;

	xfer_event_want(c->s.wev, &c->s.writing, c->rq_n > 0 && !hold(c));
	xfer_event_want(c->s.rev, &c->s.reading, !c->eof && can_read(c));
	if (moved)
		rearm(c);
	if (!budget)
		event_active(c->s.reading ? c->s.rev : c->s.wev,
			     c->s.reading ? EV_READ : EV_WRITE, 0);
	return 0;
}

static void on_io(evutil_socket_t fd, short what, void *arg)
{
	struct tcp_sconn *c = arg;
	int ret;

	(void)fd;
	(void)what;
	if (c->s.auth) {
		ret = xfer_sstream_auth(&c->t->sconns, &c->s);
		if (ret == 0) {         /* proved: requests from now on */
			rearm(c);
			ret = sconn_run(c);
		} else if (ret > 0) {   /* more to come */
			rearm(c);
			return;
		}
	} else {
		ret = sconn_run(c);
	}
	if (ret)
		sconn_free(c);
}

/* No byte moved for the timeout of the connection's state. */
static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	sconn_free(arg);
}

static void sconn_start(struct xfer_job *j)
{
	struct tcp_sconn *c = container_of(j, struct tcp_sconn, s.start_job);

	if (xfer_sstream_start(&c->s, on_io, on_timeout, c)) {
		sconn_free(c);
		return;
	}
	rearm(c);
}

void xfer_tcp_server_accept(struct tcp_transport *t, int fd)
{
	const struct xfer_transport_env *env = t->base.env;
	struct tcp_sconn *c = calloc(1, sizeof(*c));

	if (!c) {
		close(fd);
		return;
	}
	c->in = malloc(STAGE);
	if (!c->in) {
		close(fd);
		free(c);
		return;
	}
	evutil_make_socket_nonblocking(fd);
	c->t = t;
	c->copy = true;
	if (xfer_sstream_accept(&t->sconns, &c->s, fd, env->worker(env->arg),
				env, &cap_log, sconn_start)) {
		free(c->in);
		free(c);
	}
}

void xfer_tcp_server_close_all(struct tcp_transport *t)
{
	struct xfer_sstream *s;

	while ((s = xfer_sstream_any(&t->sconns)))
		sconn_free(container_of(s, struct tcp_sconn, s));
}
