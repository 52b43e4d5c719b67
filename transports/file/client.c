/*
 * File transport, initiator side: slices of file segments this host
 * cannot reach go to the owner's data port (PROTOCOL.md §5). Each owner
 * gets a few persistent connections, each owned by a worker reactor; as
 * in the TCP transport, slices arrive from any thread in an inbox, their
 * headers and WRITE payloads leave in gathered sendmsg calls and the
 * in-order replies are read with scattered recvmsg straight into the
 * slices' memory. A task's adjacent slices go as few wire requests
 * (runs), spread over the connections; each queue holds runs by their
 * first slice. What one connection has on the wire is bounded; the rest
 * waits in its send queue.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <event2/event.h>

#include "transports/file/file_internal.h"
#include "transports/stream_internal.h"

#define WIRE_SLICES 64           /* runs one connection has out ... */
#define WIRE_BYTES (64u << 20)   /* ... and their bytes, but one at least */
#define SEND_MAX (4u << 20)      /* bytes per sendmsg */
#define IOVS 64
#define DISCARD_LEN 65536        /* READ payload of a canceled task */
#define ERRNO_MAX 4095           /* larger status codes are malformed */
#define RUN_MIN (1u << 20)       /* a run's least bytes, but a task's last */

static _Thread_local uint8_t discard[DISCARD_LEN];

/* A run's state, in its first slice's transport scratch space. */
struct rslice {
	uint8_t hdr[FILE_HDR_LEN];
	uint8_t status[8];
	uint32_t status_got;
	uint32_t data_got;
	uint32_t n;                    /* slices in the run */
	uint32_t len;                  /* and their bytes */
};
_Static_assert(sizeof(struct rslice) <= sizeof(((struct xfer_slice *)0)->tp),
	       "file remote slice state does not fit");

struct rconn {
	struct file_rpeer *p;
	struct xfer_reactor *r;

	pthread_mutex_t lock;          /* inbox and kicked: any thread */
	struct xfer_slice_queue inbox;
	bool kicked;
	struct xfer_job kick_job;

	/* Owned by the reactor. */
	struct xfer_stream s;          /* socket, events, exchange */
	struct event *timer;
	struct xfer_slice_queue sendq;      /* head may be partly sent */
	size_t sent;                   /* bytes of sendq's head sent */
	struct xfer_slice_queue waitq;      /* sent, awaiting the reply */
	unsigned wait_n;               /* runs in waitq */
	uint64_t wait_bytes;           /* and their lengths */
};

struct file_rpeer {
	SLIST_ENTRY(file_rpeer) link;  /* t->rpeers, under t->lock */
	struct file_transport *t;
	struct sockaddr_storage addr;
	socklen_t addrlen;
	atomic_uint next_conn;
	struct rconn conns[XFER_FILE_CONNS];
};

static struct rslice *rs(struct xfer_slice *s)
{
	return (struct rslice *)s->tp.bytes;
}

static const char *op_name(const struct xfer_slice *s)
{
	return s->opcode == XFER_WRITE ? "write" : "read";
}

static uint32_t run_len(struct xfer_slice *s)
{
	return rs(s)->len;
}

static size_t wire_len(struct xfer_slice *s)
{
	return FILE_HDR_LEN + (s->opcode == XFER_WRITE ? run_len(s) : 0);
}

/* End every slice of the run @p s heads as @p st. */
static void run_done(struct xfer_slice *s, enum xfer_status st)
{
	/* counted first: the last slice done may end the task, and its
	 * slices with it */
	uint32_t n = rs(s)->n;

	for (uint32_t i = 0; i < n; i++)
		xfer_slice_done(&s[i], st);
}

/* End every run of @p q as @p st and empty it. */
static void runs_fail(struct xfer_slice_queue *q, enum xfer_status st)
{
	while (q->head)
		run_done(xfer_slice_q_pop(q), st);
}

/* End the runs of canceled tasks in @p q as CANCELED, but its head if
 * @p keep_head. */
static void runs_cancel(struct xfer_slice_queue *q, bool keep_head)
{
	struct xfer_slice **p = &q->head, *s;

	if (keep_head && *p)
		p = &(*p)->next;
	while ((s = *p)) {
		if (xfer_slice_canceled(s)) {
			*p = s->next;
			run_done(s, XFER_CANCELED);
		} else {
			p = &s->next;
		}
	}
	q->tail = p;
}

/* May one more run of @p len bytes go out with @p n runs of @p bytes
 * already out? */
static bool room_for(unsigned n, uint64_t bytes, uint32_t len)
{
	return n < WIRE_SLICES && (n == 0 || bytes + len <= WIRE_BYTES);
}

/* Can the head of the send queue go out now? */
static bool can_send(const struct rconn *c)
{
	return c->sendq.head && (c->sent || room_for(c->wait_n, c->wait_bytes,
						     run_len(c->sendq.head)));
}

static void wait_push(struct rconn *c, struct xfer_slice *s)
{
	xfer_slice_q_push(&c->waitq, s);
	c->wait_n++;
	c->wait_bytes += run_len(s);
}

static struct xfer_slice *wait_pop(struct rconn *c)
{
	struct xfer_slice *s = xfer_slice_q_pop(&c->waitq);

	c->wait_n--;
	c->wait_bytes -= run_len(s);
	return s;
}

static void close_socket(struct rconn *c)
{
	xfer_stream_close(&c->s);
	event_del(c->timer);
	c->sent = 0;
}

/* The connection broke: every slice on it ends with @p st; the next
 * submit reconnects. */
static void conn_fail(struct rconn *c, enum xfer_status st)
{
	close_socket(c);
	runs_fail(&c->waitq, st);
	c->wait_n = 0;
	c->wait_bytes = 0;
	runs_fail(&c->sendq, st);
}

/* Progress was made: restart the transfer timeout, or stop it if idle. */
static void touch(struct rconn *c)
{
	uint32_t ms = c->p->t->base.env->transfer_timeout_ms;
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	if (!c->waitq.head && !c->sendq.head)
		event_del(c->timer);
	else if (ms)
		event_add(c->timer, &tv);
}

/* Send what the wire bound lets out. @return 0, -1 to close. */
static int conn_send(struct rconn *c)
{
	struct iovec iov[IOVS];
	struct msghdr msg = { .msg_iov = iov };
	struct xfer_slice *s;
	ssize_t n;

	while (c->sendq.head) {
		unsigned out = c->wait_n;
		uint64_t out_bytes = c->wait_bytes;
		size_t off = c->sent, bytes = 0;
		int k = 0;

		for (s = c->sendq.head; s && k < IOVS - 1 && bytes < SEND_MAX;
		     s = s->next, off = 0) {
			/* a head partly sent was let out already */
			if (!off && !room_for(out, out_bytes, run_len(s)))
				break;
			out++;
			out_bytes += run_len(s);
			if (off < FILE_HDR_LEN) {
				iov[k].iov_base = rs(s)->hdr + off;
				iov[k++].iov_len = FILE_HDR_LEN - off;
				off = FILE_HDR_LEN;
			}
			if (s->opcode == XFER_WRITE) {
				size_t done = off - FILE_HDR_LEN;

				iov[k].iov_base = (uint8_t *)s->local + done;
				iov[k++].iov_len = run_len(s) - done;
			}
			bytes += wire_len(s);
		}
		if (k == 0)
			break;
		msg.msg_iovlen = k;
		n = sendmsg(c->s.fd, &msg, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EAGAIN)
				break;
			return -1;
		}
		/* Slices fully on the wire move to the reply queue. */
		while (c->sendq.head &&
		       (size_t)n >= wire_len(c->sendq.head) - c->sent) {
			n -= wire_len(c->sendq.head) - c->sent;
			c->sent = 0;
			wait_push(c, xfer_slice_q_pop(&c->sendq));
		}
		c->sent += n;
	}
	xfer_event_want(c->s.wev, &c->s.writing, can_send(c));
	touch(c);
	return 0;
}

static uint64_t status_of(struct rslice *x)
{
	uint64_t v;

	memcpy(&v, x->status, 8);
	return le64toh(v);
}

/* The status code of a complete status frame; -1 if malformed. */
static long status_code(struct rslice *x)
{
	uint64_t v = status_of(x);

	if (v >> 32 != FILE_STATUS_MAGIC || (v & 0xffffffffu) > ERRNO_MAX)
		return -1;
	return (long)(v & 0xffffffffu);
}

/* Does a READ payload follow the (complete) status of @p s? */
static bool payload_follows(struct xfer_slice *s)
{
	return s->opcode == XFER_READ && status_code(rs(s)) == FILE_STATUS_OK;
}

/* Is the reply for @p s complete? */
static bool reply_done(struct xfer_slice *s)
{
	return rs(s)->status_got == 8 &&
	       (!payload_follows(s) || rs(s)->data_got == run_len(s));
}

/*
 * Where the next bytes go, in reply order: a status, then a READ payload
 * if the status says OK. A READ whose status is not in yet ends the list:
 * what follows it depends on that status.
 */
static int recv_iov(struct rconn *c, struct iovec *iov)
{
	struct xfer_slice *s;
	int k = 0;

	for (s = c->waitq.head; s && k < IOVS - 1; s = s->next) {
		struct rslice *x = rs(s);
		size_t left = run_len(s) - x->data_got;

		if (x->status_got < 8) {
			iov[k].iov_base = x->status + x->status_got;
			iov[k++].iov_len = 8 - x->status_got;
			if (s->opcode == XFER_READ)
				break;
			continue;
		}
		if (!payload_follows(s))
			continue;
		if (!xfer_slice_canceled(s)) {
			iov[k].iov_base = (uint8_t *)s->local + x->data_got;
			iov[k++].iov_len = left;
			continue;
		}
		iov[k].iov_base = discard;
		iov[k++].iov_len = left < DISCARD_LEN ? left : DISCARD_LEN;
		if (left > DISCARD_LEN)
			break;
	}
	return k;
}

/* Hand @p n received bytes out as recv_iov() laid them out.
 * @return 0, -1 on a malformed status. */
static int recv_take(struct rconn *c, size_t n)
{
	for (struct xfer_slice *s = c->waitq.head; s && n; s = s->next) {
		struct rslice *x = rs(s);
		size_t m;

		if (x->status_got < 8) {
			m = 8 - x->status_got;
			m = n < m ? n : m;
			x->status_got += m;
			n -= m;
			if (x->status_got < 8)
				break;
			if (status_code(x) < 0) {
				xfer_log(XFER_LOG_WARN,
					 "file: malformed status 0x%llx "
					 "from an owner",
					 (unsigned long long)status_of(x));
				return -1;
			}
		}
		if (payload_follows(s)) {
			m = run_len(s) - x->data_got;
			m = n < m ? n : m;
			x->data_got += m;
			n -= m;
		}
	}
	return 0;
}

/* End a run whose reply is complete. @return -1 when the owner refused
 * it (it closes the connection). */
static int reply_end(struct rconn *c, struct xfer_slice *s)
{
	struct xfer_error *err = c->p->t->base.env->err;
	long code = status_code(rs(s));

	if (code == FILE_STATUS_OK) {
		run_done(s, XFER_COMPLETED);
		return 0;
	}
	if (code == FILE_STATUS_REFUSED)
		xfer_error_set(err, -EACCES, "file: %s of %u bytes at %llu: "
			       "refused by the owner (not in its files)",
			       op_name(s), run_len(s),
			       (unsigned long long)s->remote);
	else
		xfer_error_set(err, (int)-code, "file: %s at %llu: owner: %s",
			       op_name(s), (unsigned long long)s->remote,
			       strerror((int)code));
	run_done(s, XFER_FAILED);
	return code == FILE_STATUS_REFUSED ? -1 : 0;
}

/* Read replies until the socket would block. @return 1 if runs left the
 * wire, 0 if none did, -1 to close. */
static int conn_recv(struct rconn *c)
{
	struct iovec iov[IOVS];
	struct msghdr msg = { .msg_iov = iov };
	int ended = 0;
	ssize_t n;

	for (;;) {
		msg.msg_iovlen = recv_iov(c, iov);
		if (msg.msg_iovlen == 0) {
			/* Nothing expected: EOF or junk both end the socket. */
			char junk;

			n = recv(c->s.fd, &junk, 1, 0);
			if (n < 0 && errno == EAGAIN)
				return ended;
			return -1;
		}
		n = recvmsg(c->s.fd, &msg, 0);
		if (n == 0)
			return -1;
		if (n < 0)
			return errno == EAGAIN ? ended : -1;
		if (recv_take(c, (size_t)n))
			return -1;
		while (c->waitq.head && reply_done(c->waitq.head)) {
			ended = 1;
			if (reply_end(c, wait_pop(c)))
				return -1;
		}
		touch(c);
	}
}

static void on_io(evutil_socket_t fd, short what, void *arg)
{
	struct rconn *c = arg;
	int ret;

	(void)fd;
	/* Connecting or authenticating: once the owner proved itself and
	 * has our proof, the slices go. */
	ret = xfer_stream_io(&c->s, what);
	if (ret == XFER_STREAM_FAILED) {
		conn_fail(c, XFER_FAILED);
		return;
	}
	if (ret == XFER_STREAM_REFUSED ||
	    (ret == XFER_STREAM_PROVED && conn_send(c)))
		goto fail;
	if (ret != XFER_STREAM_OPEN)
		return;
	ret = 0;
	if (what & EV_READ)
		ret = conn_recv(c);
	if (ret < 0)
		goto fail;
	/* Replies in make room on the wire; EV_WRITE comes by itself when
	 * the socket was what held the send queue. */
	if (((what & EV_WRITE) || (ret > 0 && !c->s.writing)) && conn_send(c))
		goto fail;
	return;
fail:
	xfer_log(XFER_LOG_WARN, "file: a connection to an owner ends");
	conn_fail(c, XFER_FAILED);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	xfer_log(XFER_LOG_WARN,
		 "file: an owner made no progress within the transfer timeout");
	conn_fail(arg, XFER_TIMEOUT);
}

static void conn_kick(struct xfer_job *j)
{
	struct rconn *c = container_of(j, struct rconn, kick_job);
	struct xfer_slice_queue in;

	pthread_mutex_lock(&c->lock);
	in = c->inbox;
	xfer_slice_q_init(&c->inbox);
	c->kicked = false;
	pthread_mutex_unlock(&c->lock);
	if (!in.head)
		return;
	xfer_slice_q_append(&c->sendq, &in);
	if (c->s.fd < 0 && xfer_stream_connect(&c->s, c->r->base, &c->p->addr,
					       c->p->addrlen, on_io, c)) {
		conn_fail(c, XFER_FAILED);
		return;
	}
	touch(c);
	if (!c->s.connecting && !c->s.authing && conn_send(c))
		conn_fail(c, XFER_FAILED);
}

/* On the connection's reactor: end the unsent runs of canceled tasks;
 * a head partly on the wire goes out whole, as the stream needs it. */
static void conn_cancel(void *arg)
{
	struct rconn *c = arg;

	pthread_mutex_lock(&c->lock);
	runs_cancel(&c->inbox, false);
	pthread_mutex_unlock(&c->lock);
	runs_cancel(&c->sendq, c->sent > 0);
	if (xfer_stream_open(&c->s))
		xfer_event_want(c->s.wev, &c->s.writing, can_send(c));
	/* no touch(): a cancel moves no byte, and one repeated (a closing
	 * engine's) must not keep a stalled owner's runs from timing out */
	if (!c->waitq.head && !c->sendq.head)
		event_del(c->timer);
}

/* Queue the run of the @p n slices at @p s, @p len bytes, as one
 * request. */
static void conn_enqueue(struct rconn *c, struct xfer_slice *s, size_t n,
			 uint32_t len)
{
	struct rslice *x = rs(s);
	uint64_t size = htole64(len), off = htole64(s->remote);
	bool kick;

	memset(x, 0, sizeof(*x));
	memcpy(x->hdr, &size, 8);
	memcpy(x->hdr + 8, &off, 8);
	x->hdr[16] = 0x80 | (s->opcode == XFER_WRITE ? FILE_OP_WRITE : 0);
	x->n = (uint32_t)n;
	x->len = len;
	s->next = NULL;
	pthread_mutex_lock(&c->lock);
	*c->inbox.tail = s;
	c->inbox.tail = &s->next;
	kick = !c->kicked;
	c->kicked = true;
	pthread_mutex_unlock(&c->lock);
	if (kick)
		xfer_reactor_post(c->r, &c->kick_job);
}

static int conn_init(struct rconn *c, struct file_rpeer *p)
{
	const struct xfer_transport_env *env = p->t->base.env;

	c->p = p;
	xfer_stream_init(&c->s, "file", "an owner", env->auth);
	c->r = env->worker(env->arg);
	c->timer = evtimer_new(c->r->base, on_timeout, c);
	if (!c->timer)
		return -ENOMEM;
	pthread_mutex_init(&c->lock, NULL);
	xfer_slice_q_init(&c->inbox);
	xfer_slice_q_init(&c->sendq);
	xfer_slice_q_init(&c->waitq);
	c->kick_job.fn = conn_kick;
	return 0;
}

/* With the reactors stopped: runs on the wire fail, the rest were never
 * sent and are canceled. */
static void conn_free(struct rconn *c)
{
	bool head_sent = c->sent > 0;

	close_socket(c); /* sets c->sent to 0 */
	if (c->sendq.head && head_sent)
		run_done(xfer_slice_q_pop(&c->sendq), XFER_FAILED);
	runs_fail(&c->waitq, XFER_FAILED);
	runs_fail(&c->sendq, XFER_CANCELED);
	runs_fail(&c->inbox, XFER_CANCELED);
	event_free(c->timer);
	pthread_mutex_destroy(&c->lock);
}

struct file_rpeer *xfer_file_rpeer(struct file_transport *t,
				   const struct sockaddr_storage *ss,
				   socklen_t len)
{
	struct file_rpeer *p;
	int i;

	pthread_mutex_lock(&t->lock);
	SLIST_FOREACH(p, &t->rpeers, link)
		if (p->addrlen == len && !memcmp(&p->addr, ss, len))
			goto out;
	p = calloc(1, sizeof(*p));
	if (!p)
		goto out;
	p->t = t;
	memcpy(&p->addr, ss, len);
	p->addrlen = len;
	for (i = 0; i < XFER_FILE_CONNS; i++)
		if (conn_init(&p->conns[i], p))
			goto err_conns;
	SLIST_INSERT_HEAD(&t->rpeers, p, link);
out:
	pthread_mutex_unlock(&t->lock);
	return p;

err_conns:
	while (i--)
		conn_free(&p->conns[i]);
	free(p);
	p = NULL;
	goto out;
}

/* Do @p b's bytes follow @p a's, in memory and in the segment? */
static bool adjacent(const struct xfer_slice *a, const struct xfer_slice *b)
{
	return (const uint8_t *)a->local + a->len == b->local &&
	       a->remote + a->len == b->remote;
}

/*
 * The task's slices as runs of adjacent ones, each one request: as few
 * as the connections can share (an eighth of the task each, at least
 * RUN_MIN), none over what the owner takes at once, each run on the next
 * connection.
 */
void xfer_file_rpeer_submit(struct file_rpeer *p, struct xfer_slice *s,
			    size_t n)
{
	uint64_t total = 0, want;
	size_t first = 0, k;

	for (size_t i = 0; i < n; i++)
		total += s[i].len;
	want = (total + XFER_FILE_CONNS - 1) / XFER_FILE_CONNS;
	want = want < RUN_MIN ? RUN_MIN : want;
	for (; first < n; first = k) {
		uint64_t len = s[first].len;
		unsigned i;

		for (k = first + 1; k < n && len < want &&
		     len + s[k].len <= XFER_FILE_MAX_IO &&
		     adjacent(&s[k - 1], &s[k]); k++)
			len += s[k].len;
		i = atomic_fetch_add(&p->next_conn, 1) % XFER_FILE_CONNS;
		conn_enqueue(&p->conns[i], &s[first], k - first,
			     (uint32_t)len);
	}
}

/* Owners live as long as the transport and new ones go in at the head,
 * so the list can be walked unlocked once its head is taken. */
void xfer_file_client_cancel(struct file_transport *t)
{
	struct file_rpeer *p;

	pthread_mutex_lock(&t->lock);
	p = SLIST_FIRST(&t->rpeers);
	pthread_mutex_unlock(&t->lock);
	for (; p; p = SLIST_NEXT(p, link))
		for (int i = 0; i < XFER_FILE_CONNS; i++)
			xfer_reactor_run(p->conns[i].r, conn_cancel,
					 &p->conns[i]);
}

void xfer_file_client_close(struct file_transport *t)
{
	struct file_rpeer *p;

	while ((p = SLIST_FIRST(&t->rpeers))) {
		SLIST_REMOVE_HEAD(&t->rpeers, link);
		for (int i = 0; i < XFER_FILE_CONNS; i++)
			conn_free(&p->conns[i]);
		free(p);
	}
}
