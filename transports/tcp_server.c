/*
 * TCP transport, target side: serve READ/WRITE requests on accepted
 * connections, straight between the socket and registered memory. Every
 * (addr, size) is checked against the remotely accessible buffers before
 * memory is touched; a refused request gets status 1 (v2) and the
 * connection is closed.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <event2/event.h>

#include "tcp_internal.h"

#define OUT_MAX 64                 /* status frames held before a flush */
#define BUDGET (8u << 20)          /* bytes per callback, for fairness */

enum sconn_state { S_HDR, S_RECV, S_SEND };

struct tcp_sconn {
	struct xfer_transport *t;
	struct xfer_reactor *r;
	struct tcp_sconn *prev, *next; /* t->sconns, under t->lock */
	struct xfer_job start_job;
	int fd;
	struct event *rev, *wev;
	bool writing;                  /* waiting for EV_WRITE, not EV_READ */
	enum sconn_state state;
	uint8_t hdr[TCP_HDR_LEN];
	size_t hdr_got;
	uint8_t *ptr;                  /* payload in progress */
	size_t left;
	bool v2;
	uint64_t out[OUT_MAX];         /* status frames to send */
	size_t out_n, out_off;         /* frames queued; bytes already sent */
	bool refused;                  /* close once out is flushed */
};

static void sconn_free(struct tcp_sconn *c)
{
	struct xfer_transport *t = c->t;

	pthread_mutex_lock(&t->lock);
	if (c->prev)
		c->prev->next = c->next;
	else
		t->sconns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	pthread_mutex_unlock(&t->lock);
	if (c->rev)
		event_free(c->rev);
	if (c->wev)
		event_free(c->wev);
	close(c->fd);
	free(c);
}

static void want_write(struct tcp_sconn *c, bool w)
{
	if (c->writing == w)
		return;
	c->writing = w;
	event_del(w ? c->rev : c->wev);
	event_add(w ? c->wev : c->rev, NULL);
}

/* Send @p iov (queued statuses first); @return bytes sent or -errno. */
static ssize_t send_iov(struct tcp_sconn *c, struct iovec *iov, int n)
{
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = n };
	ssize_t sent = sendmsg(c->fd, &msg, MSG_NOSIGNAL);

	return sent < 0 ? -errno : sent;
}

/* Consume @p n sent bytes of the status queue; @return the rest. */
static size_t out_advance(struct tcp_sconn *c, size_t n)
{
	size_t pending = c->out_n * 8 - c->out_off;

	if (n < pending) {
		c->out_off += n;
		return 0;
	}
	c->out_n = c->out_off = 0;
	return n - pending;
}

/* @return 0 once the status queue is empty, -EAGAIN, or another -errno. */
static int flush_out(struct tcp_sconn *c)
{
	struct iovec iov;
	ssize_t n;

	while (c->out_n) {
		iov.iov_base = (uint8_t *)c->out + c->out_off;
		iov.iov_len = c->out_n * 8 - c->out_off;
		n = send_iov(c, &iov, 1);
		if (n < 0)
			return (int)n;
		out_advance(c, (size_t)n);
	}
	return 0;
}

/* Parse and check a complete header; @return false if refused. */
static bool start_request(struct tcp_sconn *c)
{
	struct xfer_buffers *bs = &c->t->e->buffers;
	uint64_t size, addr;
	uint8_t op = c->hdr[16];
	bool ok;

	memcpy(&size, c->hdr, 8);
	memcpy(&addr, c->hdr + 8, 8);
	c->v2 = op & TCP_OP_V2;
	pthread_rwlock_rdlock(&bs->lock);
	ok = size > 0 && xfer_buffers_find(bs, addr, size, true);
	pthread_rwlock_unlock(&bs->lock);
	if (!ok) {
		xfer_log(XFER_LOG_WARN, "tcp: refused %s of %llu bytes at 0x%llx",
			 (op & 0x7f) == TCP_OP_WRITE ? "write" : "read",
			 (unsigned long long)size, (unsigned long long)addr);
		return false;
	}
	c->ptr = (uint8_t *)(uintptr_t)addr;
	c->left = size;
	c->hdr_got = 0;
	if ((op & 0x7f) == TCP_OP_WRITE) {
		c->state = S_RECV;
	} else {
		if (c->v2)
			c->out[c->out_n++] = TCP_STATUS_OK;
		c->state = S_SEND;
	}
	return true;
}

/*
 * Move as far as the socket allows. @return 0 to keep the connection,
 * -1 to close it.
 */
static int sconn_run(struct tcp_sconn *c)
{
	size_t budget = BUDGET;
	struct iovec iov[2];
	ssize_t n;
	int ret;

	if (c->refused)
		goto flush;
	while (budget) {
		if (c->state == S_SEND) {
			int k = 0;

			if (c->out_n) {
				iov[k].iov_base = (uint8_t *)c->out + c->out_off;
				iov[k++].iov_len = c->out_n * 8 - c->out_off;
			}
			iov[k].iov_base = c->ptr;
			iov[k++].iov_len = c->left;
			n = send_iov(c, iov, k);
			if (n == -EAGAIN)
				goto wait_write;
			if (n < 0)
				return -1;
			n = (ssize_t)out_advance(c, (size_t)n);
			c->ptr += n;
			c->left -= n;
			budget -= n < (ssize_t)budget ? (size_t)n : budget;
			if (!c->left)
				c->state = S_HDR;
			continue;
		}
		if (c->state == S_HDR && c->out_n == OUT_MAX) {
			ret = flush_out(c);
			if (ret == -EAGAIN)
				goto wait_write;
			if (ret)
				return -1;
		}
		if (c->state == S_RECV)
			n = recv(c->fd, c->ptr, c->left, 0);
		else
			n = recv(c->fd, c->hdr + c->hdr_got,
				 TCP_HDR_LEN - c->hdr_got, 0);
		if (n == 0)
			return -1;
		if (n < 0) {
			if (errno != EAGAIN)
				return -1;
			break;
		}
		if (c->state == S_RECV) {
			c->ptr += n;
			c->left -= n;
			budget -= (size_t)n < budget ? (size_t)n : budget;
			if (c->left)
				continue;
			if (c->v2)
				c->out[c->out_n++] = TCP_STATUS_OK;
			c->state = S_HDR;
			continue;
		}
		c->hdr_got += n;
		if (c->hdr_got < TCP_HDR_LEN)
			continue;
		if (!start_request(c)) {
			/* v1 has no way to say no: just close. */
			if (!(c->hdr[16] & TCP_OP_V2))
				return -1;
			c->out[c->out_n++] = TCP_STATUS_REFUSED;
			c->refused = true;
			break;
		}
	}
	/* Input drained (or budget spent): send the statuses now. */
flush:
	ret = flush_out(c);
	if (ret == -EAGAIN)
		goto wait_write;
	if (ret || c->refused)
		return -1;
	want_write(c, false);
	if (!budget)
		event_active(c->rev, EV_READ, 0);
	return 0;

wait_write:
	want_write(c, true);
	return 0;
}

static void on_io(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	if (sconn_run(arg))
		sconn_free(arg);
}

static void sconn_start(struct xfer_job *j)
{
	struct tcp_sconn *c = container_of(j, struct tcp_sconn, start_job);

	c->rev = event_new(c->r->base, c->fd, EV_READ | EV_PERSIST, on_io, c);
	c->wev = event_new(c->r->base, c->fd, EV_WRITE | EV_PERSIST, on_io, c);
	if (!c->rev || !c->wev || event_add(c->rev, NULL))
		sconn_free(c);
}

void tcp_server_accept(struct xfer_transport *t, int fd)
{
	struct tcp_sconn *c = calloc(1, sizeof(*c));
	int one = 1;

	if (!c) {
		close(fd);
		return;
	}
	evutil_make_socket_nonblocking(fd);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->t = t;
	c->fd = fd;
	c->r = xfer_engine_worker(t->e);
	pthread_mutex_lock(&t->lock);
	c->next = t->sconns;
	if (t->sconns)
		t->sconns->prev = c;
	t->sconns = c;
	pthread_mutex_unlock(&t->lock);
	c->start_job.fn = sconn_start;
	xfer_reactor_post(c->r, &c->start_job);
}

void tcp_server_close_all(struct xfer_transport *t)
{
	while (t->sconns)
		sconn_free(t->sconns);
}
