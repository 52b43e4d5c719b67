/*
 * File transport, owner side: the data port (PROTOCOL.md §5). Peers that
 * cannot reach the engine's files themselves send READ and WRITE requests
 * naming a range of the own segment; each is served through bounce
 * memory with the file I/O engine of t->r, which owns every connection.
 *
 * A connection serves one request at a time: header, then its payload a
 * piece (XFER_FILE_PIECE) at a time: a WRITE's piece read from the socket
 * and written to the file, a READ's read from the file and sent (the
 * status goes with the first piece, so a READ that fails later ends its
 * connection); the next header is read once the reply is out. Nothing is
 * allocated before a header has passed its checks, and a refused request
 * closes its connection once the status has gone out.
 *
 * A request on a file in memory (tmpfs, ramfs) goes to splice.c once
 * its header is taken: no pieces, no bounce memory.
 *
 * Bounce memory: every connection of the port takes its pieces from one
 * budget, file_bounce_max, in the order they asked (t->waiters). A
 * connection keeps its piece's memory while it waits for its peer, and
 * when idle for its next request (t->stalled), but gives it back as
 * soon as someone in line needs it (give_back()): so a peer that does
 * not read its replies, or trickles its payload, holds no memory that
 * another needs, only its connection, until the transfer timeout.
 *
 * With a cluster secret the peer proves it first (util/auth_internal.h);
 * a new connection must take a request (or prove itself) within
 * auth_timeout_ms, one with nothing in it for conn_idle_timeout_ms, or
 * stuck mid-request for the transfer timeout, is closed. The socket,
 * its events, the table of connections and its caps are
 * transports/sstream.c's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <event2/event.h>

#include "util/auth_internal.h"
#include "util/listen_internal.h"
#include "util/net_internal.h"
#include "transports/file/sconn_internal.h"

#define BUDGET (8u << 20)     /* bytes per callback, for fairness */
#define DRAIN_LEN 65536
#define PAGE 4096

/* A WRITE payload that will not be written (a failed piece, no memory)
 * is read into this; only t->r's thread uses it. */
static _Thread_local uint8_t drain_buf[DRAIN_LEN];

/* ---- bounce memory: t->bounce_used of file_bounce_max ---- */

static size_t bounce_max(const struct file_transport *t)
{
	return (size_t)t->k[K_BOUNCE].num;
}

/* What @p len bytes of a piece take from the budget: whole pages. */
static size_t bounce_cap(size_t len)
{
	return (len + PAGE - 1) & ~(size_t)(PAGE - 1);
}

static void unstall(struct file_sconn *c)
{
	if (c->stalled)
		TAILQ_REMOVE(&c->t->stalled, c, line);
	c->stalled = false;
}

/* Give the piece's memory back; the line moves on (on_wake()). */
static void bounce_put(struct file_sconn *c)
{
	struct file_transport *t = c->t;

	if (!c->buf)
		return;
	unstall(c); /* stalled: holding memory */
	free(c->buf);
	t->bounce_used -= c->cap;
	if (c->flushing)
		t->bounce_coming -= c->cap;
	c->buf = NULL;
	c->cap = c->len = 0;
	c->flushing = false;
	if (!TAILQ_EMPTY(&t->waiters) && t->wake)
		event_active(t->wake, EV_TIMEOUT, 0);
}

/* Memory for a piece of @p len bytes, unless others wait in line before
 * it (@p first: it was first in line): what the connection kept, if it
 * is enough, else new memory if it fits. @return 1 got, 0 not now (what
 * it kept is given back), -ENOMEM. */
static int bounce_take(struct file_sconn *c, size_t len, bool first)
{
	struct file_transport *t = c->t;
	size_t cap = bounce_cap(len);
	bool line = !first && !TAILQ_EMPTY(&t->waiters);

	if (c->buf && c->cap >= cap && !line) {
		c->len = len;
		return 1;
	}
	bounce_put(c);
	if (line || t->bounce_used + cap > bounce_max(t))
		return 0;
	/* page-aligned, so that aligned requests go with O_DIRECT */
	c->buf = aligned_alloc(PAGE, cap);
	if (!c->buf)
		return -ENOMEM;
	t->bounce_used += cap;
	c->cap = cap;
	c->len = len;
	return 1;
}

static void io_submit(struct file_sconn *c, size_t len);
static void settle(struct file_sconn *c);

/*
 * Take the memory of @p c, which waits for its peer, back: an idle
 * connection's at once; a READ's unsent bytes are dropped and read again
 * from the file once the peer reads; a WRITE's bytes that came are
 * written now (their memory comes back when that is done), and the rest
 * of the piece is read into new memory.
 */
static void give_back(struct file_sconn *c)
{
	unstall(c);
	if (c->state == S_PAYLOAD && c->got) {
		c->flushing = true;
		c->t->bounce_coming += c->cap;
		io_submit(c, c->got);
	} else {
		if (c->state == S_REPLY)
			c->done += c->got;
		bounce_put(c);
	}
	if (c->state != S_HEADER)
		c->got = 0;
	settle(c);
}

/* Memory for the first in line, from the stalled connections, oldest
 * first, counting what is on its way back. */
static void reclaim(struct file_transport *t)
{
	struct file_sconn *w = TAILQ_FIRST(&t->waiters);

	while (w && t->bounce_used - t->bounce_coming + bounce_cap(w->len) >
		    bounce_max(t) && !TAILQ_EMPTY(&t->stalled))
		give_back(TAILQ_FIRST(&t->stalled));
}

/* ---- a request's pieces ---- */

/* Read @p len bytes of the file into, or write them from, the piece at
 * the payload's offset c->done. */
static void io_submit(struct file_sconn *c, size_t len)
{
	uint64_t off = c->off + c->done;

	c->req.fd = xfer_file_direct(c->fo, c->buf, off, len) ? c->fo->dfd :
		    c->fo->fd;
	c->req.buf = c->buf;
	c->req.len = len;
	c->req.off = off;
	c->req.write = c->write;
	c->state = S_IO;
	xfer_fio_submit(c->t->fio, &c->req);
}

/* A piece could not be had or moved (@p code): a READ not yet answered
 * is answered with it, one answered ends the connection; a WRITE reads
 * the rest of its payload into nowhere and then answers. @return 0, -1
 * to close. */
static int piece_failed(struct file_sconn *c, uint32_t code)
{
	bounce_put(c);
	if (!c->write) {
		if (c->answered)
			return -1; /* the status said OK: nothing else to say */
		sconn_put_file(c);
		sconn_reply(c, code);
		return 0;
	}
	if (c->code == FILE_STATUS_OK)
		c->code = code;
	c->drain = true;
	c->got = 0;
	c->state = S_PAYLOAD;
	return 0;
}

/* The piece in buf is ready to be filled: from the file (READ), or from
 * the socket (WRITE). @return 0, -1 to close. */
static int piece_go(struct file_sconn *c)
{
	uint64_t in_file;

	c->got = 0;
	if (c->write) {
		c->state = S_PAYLOAD;
		return 0;
	}
	if (!c->fo) { /* let go after the last read; this piece is again */
		c->fo = xfer_file_own_find(c->t, c->addr + c->done,
					   c->size - c->done, &in_file);
		if (!c->fo)
			return piece_failed(c, ENOENT);
		c->off = in_file - c->done;
	}
	io_submit(c, c->len);
	return 0;
}

/* ---- the bounce path ---- */

/* The next piece of the payload, from c->done: its memory now, or a
 * place in line. @return 0, -1 to close. */
static int next_piece(struct file_sconn *c)
{
	struct file_transport *t = c->t;
	size_t len = sconn_min(XFER_FILE_PIECE, c->size - c->done);
	int ret = bounce_take(c, len, false);

	if (ret < 0)
		return piece_failed(c, ENOMEM);
	if (ret)
		return piece_go(c);
	c->len = len;
	c->state = S_WAIT;
	TAILQ_INSERT_TAIL(&t->waiters, c, line);
	reclaim(t);
	return 0;
}

/* The reply (status, READ piece) is out: the next piece, or the next
 * request; the memory stays for it, unless others wait. @return 0, -1
 * to close. */
static int reply_sent(struct file_sconn *c)
{
	c->done += c->len;
	c->len = 0;
	if (!c->write && c->answered && c->done < c->size)
		return next_piece(c);
	if (c->refused)
		return -1; /* the status is out; the connection ends */
	if (!TAILQ_EMPTY(&c->t->waiters))
		bounce_put(c);
	sconn_request_end(c);
	return 0;
}

/*
 * Act on a complete header: refuse it, or start the request's first
 * piece. @return -1 to close at once (not a v2 request).
 */
static int take_header(struct file_sconn *c)
{
	uint64_t size, addr, in_file;
	uint8_t op = c->hdr[16];

	memcpy(&size, c->hdr, 8);
	memcpy(&addr, c->hdr + 8, 8);
	size = le64toh(size);
	addr = le64toh(addr);
	if (!(op & 0x80))
		return -1; /* v1 has no status to refuse with */
	c->write = (op & 0x7f) == FILE_OP_WRITE;
	c->size = size;
	c->addr = addr;
	c->done = 0;
	c->drain = c->answered = false;
	c->code = FILE_STATUS_OK;
	c->fo = size && size <= XFER_FILE_MAX_IO ?
		xfer_file_own_find(c->t, addr, size, &in_file) : NULL;
	if (!c->fo) {
		xfer_log(XFER_LOG_WARN,
			 "file: refused %s of %llu bytes at %llu",
			 c->write ? "write" : "read", (unsigned long long)size,
			 (unsigned long long)addr);
		c->refused = true;
		sconn_reply(c, FILE_STATUS_REFUSED);
		return 0;
	}
	c->off = in_file;
	xfer_sstream_proved(&c->t->sconns, &c->s); /* a request taken */
	if (c->fo->mem && xfer_file_splice_takes(c)) {
		bounce_put(c); /* what it kept is not needed */
		xfer_file_splice_start(c);
		return 0;
	}
	return next_piece(c);
}

/* One step of reading. @return bytes read (1 when a piece was asked
 * for), 0 on EAGAIN, -1 to close. */
static ssize_t sconn_read(struct file_sconn *c)
{
	size_t end = c->state == S_HEADER ? FILE_HDR_LEN : c->len;
	uint8_t *p;
	ssize_t n;

	if (c->state == S_HEADER) {
		p = c->hdr + c->got;
	} else if (c->drain) {
		end = sconn_min(DRAIN_LEN, c->size - c->done);
		p = drain_buf;
	} else if (c->splice) {
		return xfer_file_splice_recv(c);
	} else if (!c->len) { /* given back: a piece again */
		return next_piece(c) ? -1 : 1;
	} else {
		p = c->buf + c->got;
	}
	n = recv(c->s.fd, p, end - c->got, 0);
	if (n == 0)
		return -1;
	if (n < 0)
		return errno == EAGAIN ? 0 : -1;
	c->got += (size_t)n;
	if (c->got < end)
		return n;
	if (c->state == S_HEADER)
		return take_header(c) ? -1 : n;
	if (!c->drain) {
		io_submit(c, c->len);
		return n;
	}
	c->done += c->got;
	c->got = 0;
	if (c->done == c->size) {
		sconn_put_file(c);
		sconn_reply(c, c->code);
	}
	return n;
}

/* One step of the reply. @return bytes sent, 0 on EAGAIN, -1 to close. */
static ssize_t sconn_write(struct file_sconn *c)
{
	struct iovec iov[2];
	struct msghdr msg = { .msg_iov = iov };
	size_t m;
	ssize_t n;

	if (c->splice)
		return xfer_file_splice_send(c);
	if (c->status_left)
		iov[msg.msg_iovlen++] = (struct iovec){
			c->status + 8 - c->status_left, c->status_left };
	if (c->len)
		iov[msg.msg_iovlen++] = (struct iovec){ c->buf + c->got,
							c->len - c->got };
	if (!msg.msg_iovlen) /* a READ's piece given back: the next one */
		return reply_sent(c) ? -1 : 1;
	/* a peer gone mid-reply is EPIPE here, not SIGPIPE for the process */
	n = sendmsg(c->s.fd, &msg, MSG_NOSIGNAL);
	if (n < 0)
		return errno == EAGAIN ? 0 : -1;
	m = sconn_min((size_t)n, c->status_left);
	c->status_left -= m;
	c->got += (size_t)n - m;
	if (c->status_left || c->got < c->len)
		return n;
	return reply_sent(c) ? -1 : n;
}

/* Move the connection on until the socket would block, it waits for
 * memory or the file, or the budget is spent. @return -1 to close,
 * never while the engine has the request. */
static int sconn_run(struct file_sconn *c)
{
	size_t budget = BUDGET;
	ssize_t n;

	do {
		switch (c->state) {
		case S_HEADER:
		case S_PAYLOAD:
			n = sconn_read(c);
			break;
		case S_REPLY:
			n = sconn_write(c);
			break;
		default:
			n = 0;
			break;
		}
		if (n < 0)
			return -1;
		budget -= (size_t)n < budget ? (size_t)n : budget;
	} while (n && budget);

	if (!budget && c->state != S_IO && c->state != S_WAIT)
		event_active(c->state == S_REPLY ? c->s.wev : c->s.rev,
			     c->state == S_REPLY ? EV_WRITE : EV_READ, 0);
	return 0;
}

/* The timer for the connection's state: new, idle between requests,
 * mid-request (a header partly read too); none while it waits for
 * memory or the file. */
static void rearm(struct file_sconn *c)
{
	const struct xfer_transport_env *env = c->t->base.env;
	bool idle = c->state == S_HEADER && !c->got;
	bool ours = c->state == S_IO || c->state == S_WAIT;

	xfer_sstream_arm(&c->s, env, c->state != S_HEADER, ours ? 0 :
			 idle ? env->idle_timeout_ms : env->transfer_timeout_ms);
}

/* After the connection moved: the events and the timer of its state, and
 * in t->stalled while it holds memory and waits for its peer (or, idle,
 * keeps it for its next request). */
static void settle(struct file_sconn *c)
{
	bool in = c->state == S_HEADER || c->state == S_PAYLOAD;
	bool out = c->state == S_REPLY;

	if (c->buf && (in || out)) {
		if (!c->stalled)
			TAILQ_INSERT_TAIL(&c->t->stalled, c, line);
		c->stalled = true;
	} else {
		unstall(c);
	}
	xfer_event_want(c->s.rev, &c->s.reading, in);
	xfer_event_want(c->s.wev, &c->s.writing, out);
	rearm(c);
}

static void sconn_free(struct file_sconn *c)
{
	struct file_transport *t = c->t;

	sconn_put_file(c);
	if (c->state == S_WAIT)
		TAILQ_REMOVE(&t->waiters, c, line);
	unstall(c);
	bounce_put(c);
	xfer_sstream_close(&t->sconns, &c->s);
	free(c);
}

/* Serve what can be served now. @return 0, or -1 to close. */
static int sconn_step(struct file_sconn *c)
{
	int ret;

	ret = xfer_sstream_auth(&c->t->sconns, &c->s);
	if (ret)
		return ret < 0 ? -1 : 0;
	return sconn_run(c); /* proved: requests from now on */
}

static void on_io(evutil_socket_t fd, short what, void *arg)
{
	struct file_sconn *c = arg;

	(void)fd;
	(void)what;
	if (sconn_step(c))
		sconn_free(c);
	else
		settle(c);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	sconn_free(arg);
}

/* Memory came back: the line, in order, while its first fits. */
static void on_wake(evutil_socket_t fd, short what, void *arg)
{
	struct file_transport *t = arg;
	struct file_sconn *c;
	int ret;

	(void)fd;
	(void)what;
	while ((c = TAILQ_FIRST(&t->waiters))) {
		reclaim(t);
		TAILQ_REMOVE(&t->waiters, c, line);
		ret = bounce_take(c, c->len, true);
		if (!ret) { /* more is on its way back */
			TAILQ_INSERT_HEAD(&t->waiters, c, line);
			return;
		}
		ret = ret < 0 ? piece_failed(c, ENOMEM) : piece_go(c);
		if (ret || sconn_run(c))
			sconn_free(c);
		else
			settle(c);
	}
}

/*
 * A read or write of the file ended; the connection's events were off
 * meanwhile, so it is still here. While the transport closes (the reactor
 * stopped, xfer_fio_free() ending what it holds) only the request is let
 * go: xfer_file_server_stop() frees the connection.
 */
static void on_fio_done(struct xfer_fio_req *r, int res)
{
	struct file_sconn *c = container_of(r, struct file_sconn, req);
	uint32_t code = FILE_STATUS_OK;
	int ret = 0;

	if (res)
		code = sconn_io_failed(c, -res, r->len, r->off);
	if (c->t->closing) {
		c->state = S_HEADER;
		return;
	}
	if (c->write) {
		c->done += r->len;
		c->len = 0;
		if (c->flushing)
			bounce_put(c); /* promised to the line */
		if (code)
			ret = piece_failed(c, code);
		else if (c->done < c->size)
			ret = next_piece(c);
		if (!ret && c->done == c->size) {
			sconn_put_file(c);
			sconn_reply(c, c->code);
		}
	} else if (code) {
		ret = piece_failed(c, code);
	} else {
		if (c->done + c->len == c->size)
			sconn_put_file(c); /* the last read: the file may go */
		if (!c->answered)
			sconn_put_status(c, FILE_STATUS_OK);
		c->answered = true;
		c->got = 0;
		c->state = S_REPLY;
	}
	if (ret || sconn_run(c))
		sconn_free(c);
	else
		settle(c);
}

static void sconn_start(struct xfer_job *j)
{
	struct file_sconn *c = container_of(j, struct file_sconn, s.start_job);

	if (xfer_sstream_start(&c->s, on_io, on_timeout, c)) {
		sconn_free(c);
		return;
	}
	settle(c);
}

void xfer_file_server_accept(struct file_transport *t, int fd)
{
	static struct xfer_log_limit cap_log;
	struct file_sconn *c = calloc(1, sizeof(*c));

	if (!c) {
		close(fd);
		return;
	}
	c->t = t;
	c->req.done = on_fio_done;
	if (xfer_sstream_accept(&t->sconns, &c->s, fd, t->r, t->base.env,
				&cap_log, sconn_start))
		free(c);
}

/* On the control reactor. */
static void on_accept(void *arg, int fd)
{
	xfer_file_server_accept(arg, fd);
}

int xfer_file_server_init(struct file_transport *t)
{
	TAILQ_INIT(&t->waiters);
	TAILQ_INIT(&t->stalled);
	t->wake = event_new(t->r->base, -1, 0, on_wake, t);
	return t->wake ? 0 : -ENOMEM;
}

int xfer_file_server_start(struct file_transport *t)
{
	const struct xfer_transport_env *env = t->base.env;
	struct sockaddr_storage ss;
	socklen_t len;
	int ret;

	ret = xfer_net_parse(env->bind_addr, 0, &ss, &len);
	if (!ret)
		ret = xfer_file_server_init(t);
	if (ret)
		return xfer_error_set(env->err, ret, "file data port: %s",
				      strerror(-ret));
	t->listener = xfer_listen(env->control->base, (struct sockaddr *)&ss,
				  len, "file data", on_accept, t);
	if (!t->listener) {
		ret = -errno;
		event_free(t->wake);
		t->wake = NULL;
		return xfer_error_set(env->err, ret, "file data listen: %s",
				      strerror(-ret));
	}
	t->data_port = xfer_net_local_port(xfer_listener_fd(t->listener));
	return 0;
}

void xfer_file_server_stop(struct file_transport *t)
{
	struct xfer_sstream *s;

	xfer_listener_free(t->listener);
	t->listener = NULL;
	while ((s = xfer_sstream_any(&t->sconns)))
		sconn_free(container_of(s, struct file_sconn, s));
	if (t->wake)
		event_free(t->wake);
	t->wake = NULL;
	xfer_file_pipe_drop(t);
}
