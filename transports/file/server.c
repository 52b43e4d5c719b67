/*
 * File transport, owner side: the data port (PROTOCOL.md §5). Peers that
 * cannot reach the engine's files themselves send READ and WRITE requests
 * naming a range of the own segment; each is served through a bounce
 * buffer with the file I/O engine of t->r, which owns every connection.
 *
 * A connection serves one request at a time: header, WRITE payload, file
 * I/O, reply (status, READ payload); the next header is read once the
 * reply is out. Nothing is allocated before a header has passed its
 * checks, and a refused request closes its connection once the status
 * has gone out. With a cluster secret the peer proves it first
 * (core/auth_internal.h); a connection with nothing in it for
 * conn_idle_timeout_ms, or stuck mid-request for the transfer timeout,
 * is closed, and at most max_data_conns are open. The socket, its
 * events and the table of connections are transports/sstream.c's.
 */
#include <endian.h>
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
#include "transports/file/file_internal.h"

#define BUDGET (8u << 20)     /* bytes per callback, for fairness */
#define KEEP_BUF (1u << 20)   /* larger bounce buffers go after use */
#define DRAIN_LEN 65536

/* A WRITE payload with no memory to hold it is read into this and
 * answered ENOMEM; only t->r's thread uses it. */
static _Thread_local uint8_t drain_buf[DRAIN_LEN];

enum sstate {
	S_HEADER,     /* reading a header (the connection is idle) */
	S_PAYLOAD,    /* reading a WRITE payload */
	S_IO,         /* the file I/O engine has c->req */
	S_REPLY,      /* sending the status and READ payload */
};

struct file_sconn {
	struct file_transport *t;
	struct xfer_sstream s;         /* in t->sconns, on t->r */
	enum sstate state;
	uint8_t hdr[FILE_HDR_LEN];
	size_t got;                    /* bytes of hdr, payload or reply */
	/* The request being served. */
	bool write, drain, refused;
	uint64_t size;
	struct file_open *fo;          /* a reference, from header to done */
	struct xfer_fio_req req;
	uint8_t status[8];
	size_t out_len;                /* the reply: 8, or 8 + size */
	uint8_t *buf;                  /* bounce buffer of cap bytes */
	size_t cap;
};

static void sconn_free(struct file_sconn *c)
{
	if (c->fo)
		xfer_file_open_put(c->fo);
	xfer_sstream_close(&c->t->sconns, &c->s);
	free(c->buf);
	free(c);
}

static void put_status(struct file_sconn *c, uint32_t code)
{
	uint64_t v = htole64(FILE_STATUS_MAGIC << 32 | code);

	memcpy(c->status, &v, 8);
}

/* Queue the reply: @p code, and the READ payload when it is OK. */
static void reply(struct file_sconn *c, uint32_t code)
{
	put_status(c, code);
	c->out_len = 8 + (code == FILE_STATUS_OK && !c->write ? c->size : 0);
	c->got = 0;
	c->state = S_REPLY;
}

/* Room for @p size bytes in the bounce buffer. @return false on ENOMEM. */
static bool reserve(struct file_sconn *c, size_t size)
{
	if (c->cap >= size)
		return true;
	free(c->buf);
	/* page-aligned, so that aligned requests go with O_DIRECT */
	c->buf = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);
	c->cap = c->buf ? size : 0;
	return c->buf != NULL;
}

/* The I/O is over: the file may go. */
static void put_file(struct file_sconn *c)
{
	if (c->fo)
		xfer_file_open_put(c->fo);
	c->fo = NULL;
}

static void io_submit(struct file_sconn *c)
{
	c->req.buf = c->buf;
	c->req.len = c->size;
	c->req.write = c->write;
	c->state = S_IO;
	xfer_fio_submit(c->t->fio, &c->req);
}

/*
 * Act on a complete header: refuse it, start reading a WRITE payload, or
 * start a READ. @return -1 to close at once (not a v2 request).
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
	c->drain = false;
	c->fo = size && size <= XFER_FILE_MAX_IO ?
		xfer_file_own_find(c->t, addr, size, &in_file) : NULL;
	if (!c->fo) {
		xfer_log(XFER_LOG_WARN,
			 "file: refused %s of %llu bytes at %llu",
			 c->write ? "write" : "read", (unsigned long long)size,
			 (unsigned long long)addr);
		c->refused = true;
		reply(c, FILE_STATUS_REFUSED);
		return 0;
	}
	c->req.off = in_file;
	if (reserve(c, size)) {
		c->req.fd = xfer_file_direct(c->fo, c->buf, in_file, size) ?
			    c->fo->dfd : c->fo->fd;
	} else {
		if (c->write) {
			c->drain = true; /* the stream needs the payload read */
		} else {
			put_file(c);
			reply(c, ENOMEM);
			return 0;
		}
	}
	c->got = 0;
	if (c->write)
		c->state = S_PAYLOAD;
	else
		io_submit(c);
	return 0;
}

/* One step of reading. @return bytes read, 0 on EAGAIN, -1 to close. */
static ssize_t sconn_read(struct file_sconn *c)
{
	size_t end = c->state == S_HEADER ? FILE_HDR_LEN : c->size;
	size_t want = end - c->got;
	uint8_t *p;
	ssize_t n;

	if (c->state == S_HEADER) {
		p = c->hdr + c->got;
	} else if (c->drain) {
		p = drain_buf;
		want = want < DRAIN_LEN ? want : DRAIN_LEN;
	} else {
		p = c->buf + c->got;
	}
	n = recv(c->s.fd, p, want, 0);
	if (n == 0)
		return -1;
	if (n < 0)
		return errno == EAGAIN ? 0 : -1;
	c->got += (size_t)n;
	if (c->got < end)
		return n;
	if (c->state == S_HEADER)
		return take_header(c) ? -1 : n;
	if (c->drain) {
		put_file(c);
		reply(c, ENOMEM);
	} else {
		io_submit(c);
	}
	return n;
}

/* One step of the reply. @return bytes sent, 0 on EAGAIN, -1 to close. */
static ssize_t sconn_write(struct file_sconn *c)
{
	struct iovec iov[2];
	struct msghdr msg = { .msg_iov = iov };
	ssize_t n;

	if (c->got < 8)
		iov[msg.msg_iovlen++] = (struct iovec){ c->status + c->got,
							8 - c->got };
	if (c->out_len > 8) {
		size_t off = c->got > 8 ? c->got - 8 : 0;

		iov[msg.msg_iovlen++] = (struct iovec){ c->buf + off,
							c->out_len - 8 - off };
	}
	/* a peer gone mid-reply is EPIPE here, not SIGPIPE for the process */
	n = sendmsg(c->s.fd, &msg, MSG_NOSIGNAL);
	if (n < 0)
		return errno == EAGAIN ? 0 : -1;
	c->got += (size_t)n;
	if (c->got < c->out_len)
		return n;
	if (c->refused)
		return -1; /* the status is out; the connection ends */
	if (c->cap > KEEP_BUF) {
		free(c->buf);
		c->buf = NULL;
		c->cap = 0;
	}
	c->got = 0;
	c->state = S_HEADER;
	return n;
}

/* Move the connection on until the socket would block, the file I/O
 * engine has the request, or the budget is spent. @return -1 to close,
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

	xfer_event_want(c->s.rev, &c->s.reading,
			c->state == S_HEADER || c->state == S_PAYLOAD);
	xfer_event_want(c->s.wev, &c->s.writing, c->state == S_REPLY);
	if (!budget && c->state != S_IO)
		event_active(c->s.reading ? c->s.rev : c->s.wev,
			     c->s.reading ? EV_READ : EV_WRITE, 0);
	return 0;
}

/* The timer for the connection's state: proving itself, idle between
 * requests, mid-request; none while the file I/O runs (the owner's). */
static void rearm(struct file_sconn *c)
{
	const struct xfer_transport_env *env = c->t->base.env;
	bool idle = c->state == S_HEADER && !c->got;
	uint32_t ms = c->s.auth ? XFER_SSTREAM_AUTH_TIMEOUT_MS :
		      idle ? env->idle_timeout_ms : env->transfer_timeout_ms;
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	if (ms && c->state != S_IO)
		event_add(c->s.timer, &tv);
	else
		event_del(c->s.timer);
}

/* Serve what can be served now. @return 0, or -1 to close. */
static int sconn_step(struct file_sconn *c)
{
	int ret;

	if (c->s.auth) {
		ret = xfer_auth_srv_step(c->s.auth, c->s.fd);
		if (ret)
			return ret < 0 ? -1 : 0;
		/* proved: requests from now on */
		xfer_auth_srv_free(c->s.auth);
		c->s.auth = NULL;
	}
	return sconn_run(c);
}

static void on_io(evutil_socket_t fd, short what, void *arg)
{
	struct file_sconn *c = arg;

	(void)fd;
	(void)what;
	if (sconn_step(c))
		sconn_free(c);
	else
		rearm(c);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	sconn_free(arg);
}

/*
 * The read or write of the file ended; the connection's events were off
 * meanwhile, so it is still here. While the transport closes (the reactor
 * stopped, xfer_fio_free() ending what it holds) only the request is let
 * go: xfer_file_server_stop() frees the connection.
 */
static void on_fio_done(struct xfer_fio_req *r, int res)
{
	struct file_sconn *c = container_of(r, struct file_sconn, req);
	uint32_t code = FILE_STATUS_OK;

	if (res) {
		xfer_log(XFER_LOG_WARN, "file: %s of %llu bytes at %llu of %s "
			 "for a peer: %s", c->write ? "write" : "read",
			 (unsigned long long)c->size,
			 (unsigned long long)r->off, c->fo->path,
			 strerror(-res));
		/* 1 says refused on the wire */
		code = res == -EPERM ? EACCES : (uint32_t)-res;
	}
	put_file(c);
	if (c->t->closing) {
		c->state = S_HEADER;
		return;
	}
	reply(c, code);
	if (sconn_run(c))
		sconn_free(c);
	else
		rearm(c);
}

static void sconn_start(struct xfer_job *j)
{
	struct file_sconn *c = container_of(j, struct file_sconn, s.start_job);

	if (xfer_sstream_start(&c->s, on_io, on_timeout, c)) {
		sconn_free(c);
		return;
	}
	rearm(c);
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

int xfer_file_server_start(struct file_transport *t)
{
	const struct xfer_transport_env *env = t->base.env;
	struct sockaddr_storage ss;
	socklen_t len;
	int ret;

	ret = xfer_net_parse(env->bind_addr, 0, &ss, &len);
	if (ret)
		return ret;
	t->listener = xfer_listen(env->control->base, (struct sockaddr *)&ss,
				  len, "file data", on_accept, t);
	if (!t->listener) {
		ret = -errno;
		return xfer_error_set(env->err, ret, "file data listen: %s",
				      strerror(-ret));
	}
	t->data_port = xfer_net_local_port(xfer_listener_fd(t->listener));
	return 0;
}

void xfer_file_server_stop(struct file_transport *t)
{
	xfer_listener_free(t->listener);
	t->listener = NULL;
	while (!LIST_EMPTY(&t->sconns.list))
		sconn_free(container_of(LIST_FIRST(&t->sconns.list),
					struct file_sconn, s));
}
