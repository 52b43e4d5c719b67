/*
 * TCP transport, initiator side: one persistent connection per (peer,
 * index), owned by a worker reactor. Slices arrive from any thread in an
 * inbox; the reactor writes their headers and payloads with gathered
 * sendmsg, and reads the in-order replies (status frames, READ payloads)
 * with scattered recvmsg straight into the slices' memory. A task's
 * adjacent slices on one connection go as one request of up to RUN_MAX
 * bytes, carried by the first of them.
 *
 * A quiet connection (open, nothing in flight, protocol v2) is lent to
 * submitters: a task of one small slice is written by the submitting
 * thread itself, under the connection's lock, and waits on the lent
 * queue for the reactor, which the reply wakes. A lone request so costs
 * no wakeup of the reactor before it goes out. The reactor takes the
 * connection back (claim()) at the start of each of its handlers and
 * lends it again (settle()) at their end. A connection on which a slice
 * came while a lent one was out (a batch of small tasks) lends nothing
 * for BURST_MS: the reactor writes a batch's slices with one sendmsg,
 * where the first one lent would cost a write and a reply of its own.
 *
 * The transfer timeout runs only while something is in flight, so that
 * an idle connection has no timer at all: the reactor's on a libevent
 * timer (no syscall to start or stop), a submitter's for what it lent on
 * a timerfd (a syscall, not a wakeup of the reactor), which the reactor
 * stops when it takes the slice. Progress does not restart it: it notes
 * the time, and a timer that fires with progress since then is set
 * again for the rest.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/uio.h>

#include <event2/event.h>

#include "transports/stream_internal.h"
#include "transports/tcp/tcp_internal.h"

#define SEND_MAX (4u << 20) /* bytes per sendmsg */
#define CONN_IOV 256        /* iovecs per sendmsg and recvmsg: 127 slices */
#define DISCARD_LEN 65536   /* READ payload of a canceled task goes here */
/* Largest slice a submitter writes itself (header and payload, bytes). */
#define DIRECT_MAX ((64u << 10) + TCP_HDR_LEN)
#define BURST_MS 50 /* no lending for so long after a burst */
/* Most bytes of a task's consecutive slices that go as one request: its
 * header and status frame, the target's read and reply, paid once per
 * run instead of once per 64 KiB slice. */
#define RUN_MAX (1u << 20)

static _Thread_local uint8_t discard[DISCARD_LEN];

/* Per-slice state, in the slice's transport scratch space. */
struct tcp_slice {
	uint8_t hdr[TCP_HDR_LEN];
	uint64_t status;
	uint32_t status_got;
	uint32_t data_got;
};
_Static_assert(sizeof(struct tcp_slice) <= sizeof(((struct xfer_slice *)0)->tp),
	       "tcp slice state does not fit");

struct tcp_conn {
	struct tcp_transport *t;
	struct tcp_peer *peer;
	struct xfer_reactor *r;

	pthread_mutex_t lock;          /* up to "owned by the reactor" */
	struct xfer_slice_queue inbox; /* queued for the reactor to send */
	struct xfer_slice_queue lent;  /* written by a submitter... */
	size_t lent_sent;              /* ...this many bytes of them */
	int64_t lent_ms;               /* when (monotonic), for the timeout */
	bool quiet;                    /* lent to submitters */
	int64_t burst_ms;              /* a slice came while one was lent
					* (monotonic ms; 0: never) */
	bool kicked;                   /* kick_job is queued */
	struct xfer_job kick_job;

	/* Owned by the reactor (s.fd also read by a submitter that holds
	 * the lock while quiet). */
	struct xfer_stream s;          /* socket, events, exchange */
	struct event *timer;           /* the transfer timeout */
	bool armed;                    /* timer is pending */
	bool lent_armed;               /* so is tfd, for a slice taken */
	int64_t moved_ms;              /* bytes last moved (monotonic) */
	int tfd;                       /* a lent slice's timeout (timerfd), */
	struct event *lent_timer;      /* its readable event, */
	bool lent_added;               /* added by the first connect */
	struct xfer_slice_queue sendq;      /* head may be partly sent */
	size_t sent;                   /* bytes of sendq's head sent */
	struct xfer_slice_queue waitq;      /* sent, awaiting the reply */
};

static struct tcp_slice *ts(struct xfer_slice *s)
{
	return (struct tcp_slice *)s->tp.bytes;
}

static size_t wire_len(struct xfer_slice *s)
{
	return TCP_HDR_LEN + (s->opcode == XFER_WRITE ? s->len : 0);
}

/* Start the transfer timeout, due in @p ms (0: stop it). On the
 * reactor. */
static void arm(struct tcp_conn *c, uint32_t ms)
{
	struct timeval tv = { ms / 1000, (long)(ms % 1000) * 1000 };

	if (ms)
		event_add(c->timer, &tv);
	else if (c->armed)
		event_del(c->timer);
	c->armed = ms != 0;
}

/* Start (@p ms > 0) or stop (0) the timeout of a lent slice: by a
 * submitter that holds the lock of a quiet connection, or the reactor
 * that took the slice. timerfd_settime(2) needs no lock of libevent's. */
static void arm_lent(struct tcp_conn *c, uint32_t ms)
{
	struct itimerspec its = {
		.it_value = { ms / 1000, (long)(ms % 1000) * 1000000 },
	};

	timerfd_settime(c->tfd, 0, &its, NULL);
}

static void close_socket(struct tcp_conn *c)
{
	xfer_stream_close(&c->s);
	arm(c, 0);
	c->sent = 0;
}

/* The connection broke: every slice on it ends with @p st; the next
 * submit reconnects. */
static void conn_fail(struct tcp_conn *c, enum xfer_status st)
{
	close_socket(c);
	xfer_slice_q_fail(&c->waitq, st);
	xfer_slice_q_fail(&c->sendq, st);
}

/* Progress was made: the transfer timeout runs from now while slices
 * are in flight (settle() starts it if it was not; on_timeout() sets it
 * again for the rest if it fires early). On the reactor, between claim()
 * and settle(). */
static void touch(struct tcp_conn *c)
{
	if (c->sendq.head || c->waitq.head)
		c->moved_ms = xfer_now_ms();
}

/* The transfer timeout runs while slices are in flight, due the timeout
 * after bytes last moved (1 ms if that is past), and not else. A lent
 * slice's timer, which the reactor took over, stops. On the reactor, last
 * thing in a handler (settle()): its syscall comes after the replies
 * that came were delivered. */
static void clock_set(struct tcp_conn *c)
{
	uint32_t to = c->t->base.env->transfer_timeout_ms;
	int64_t age;

	if (c->lent_armed) {
		arm_lent(c, 0);
		c->lent_armed = false;
	}
	if (!c->sendq.head && !c->waitq.head) {
		arm(c, 0);
	} else if (!c->armed) {
		age = xfer_now_ms() - c->moved_ms;
		arm(c, age >= 0 && age < to ? to - (uint32_t)age : 1);
	}
}

/* The iovecs of the slices from @p s on, the first @p off bytes of @p s
 * already sent: at most @p max of them and about SEND_MAX bytes.
 * @return the count; *@p want gets their bytes. */
static int gather(struct xfer_slice *s, size_t off, struct iovec *iov,
		  int max, size_t *want)
{
	int k = 0;

	*want = 0;
	for (; s && k < max - 1 && *want < SEND_MAX; s = s->next, off = 0) {
		size_t from = off;

		if (off < TCP_HDR_LEN) {
			iov[k].iov_base = ts(s)->hdr + off;
			iov[k++].iov_len = TCP_HDR_LEN - off;
			off = TCP_HDR_LEN;
		}
		if (s->opcode == XFER_WRITE) {
			iov[k].iov_base = (uint8_t *)s->local + (off - TCP_HDR_LEN);
			iov[k++].iov_len = s->len - (off - TCP_HDR_LEN);
		}
		*want += wire_len(s) - from;
	}
	return k;
}

/* @p n more bytes of the send queue are on the wire: the slices sent
 * whole wait for their replies (v1 WRITEs have none: done). */
static void advance(struct tcp_conn *c, size_t n)
{
	struct xfer_slice *s;

	while (c->sendq.head && n >= wire_len(c->sendq.head) - c->sent) {
		n -= wire_len(c->sendq.head) - c->sent;
		c->sent = 0;
		s = xfer_slice_q_pop(&c->sendq);
		if (c->peer->version == 1 && s->opcode == XFER_WRITE)
			xfer_slice_done(s, XFER_COMPLETED); /* no reply */
		else
			xfer_slice_q_push(&c->waitq, s);
	}
	c->sent += n;
}

/*
 * On the reactor, first thing in each handler: take the connection back
 * from submitters, with what they wrote on it (and, with @p inbox, what
 * they queued).
 */
static void claim(struct tcp_conn *c, bool inbox)
{
	struct xfer_slice_queue lent, in;
	size_t sent;
	int64_t ms;

	xfer_slice_q_init(&in);
	pthread_mutex_lock(&c->lock);
	c->quiet = false;
	lent = c->lent;
	sent = c->lent_sent;
	ms = c->lent_ms;
	xfer_slice_q_init(&c->lent);
	c->lent_sent = 0;
	c->lent_ms = 0;
	if (inbox) {
		in = c->inbox;
		xfer_slice_q_init(&c->inbox);
		c->kicked = false;
	}
	pthread_mutex_unlock(&c->lock);
	if (ms) {
		/* The submitter started the lent timer then: the reactor's
		 * own runs on from there (clock_set()). */
		c->moved_ms = ms;
		c->lent_armed = true;
	}
	/* Lent only while nothing was in flight: these go first. */
	xfer_slice_q_append(&c->sendq, &lent);
	advance(c, sent);
	xfer_slice_q_append(&c->sendq, &in);
}

/* On the reactor, last thing in each handler: write what waits, and
 * lend the connection out if it is quiet. */
static void settle(struct tcp_conn *c)
{
	bool quiet = xfer_stream_open(&c->s) && !c->sendq.head &&
		     !c->waitq.head && c->peer->version == 2;

	clock_set(c);

	if (xfer_stream_open(&c->s))
		xfer_event_want(c->s.wev, &c->s.writing, c->sendq.head != NULL);
	pthread_mutex_lock(&c->lock);
	c->quiet = quiet;
	pthread_mutex_unlock(&c->lock);
}

/*
 * Write the send queue's headers and WRITE payloads, gathered: up to
 * CONN_IOV iovecs or SEND_MAX bytes a call, while the socket takes them
 * all (a short write means it is full: EV_WRITE brings us back).
 * @return 0, or -1 when the socket failed.
 */
static int conn_send(struct tcp_conn *c)
{
	struct iovec iov[CONN_IOV];
	struct msghdr msg = { .msg_iov = iov };
	size_t want;
	ssize_t n;

	while (c->sendq.head) {
		msg.msg_iovlen = gather(c->sendq.head, c->sent, iov, CONN_IOV,
					&want);
		n = sendmsg(c->s.fd, &msg, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EAGAIN)
				break;
			return -1;
		}
		advance(c, (size_t)n);
		if ((size_t)n < want)
			break; /* the socket is full */
	}
	xfer_event_want(c->s.wev, &c->s.writing, c->sendq.head != NULL);
	touch(c);
	return 0;
}

/* Is the reply for @p s complete? A refused status also counts. */
static bool reply_done(struct tcp_conn *c, struct xfer_slice *s)
{
	if (c->peer->version == 2 && ts(s)->status_got < 8)
		return false;
	if (c->peer->version == 2 && ts(s)->status != TCP_STATUS_OK)
		return true;
	return s->opcode == XFER_WRITE || ts(s)->data_got == s->len;
}

/*
 * Read replies in order, scattered: status frames and READ payloads of as
 * many slices as CONN_IOV iovecs hold, in one recvmsg, until the socket
 * gives less than asked. @return 0; 1 when the peer refused a request
 * (it closes after that status: conn_retry()); -1 when the connection
 * failed (EOF, error, or bytes no request asked for).
 */
static int conn_recv(struct tcp_conn *c)
{
	struct iovec iov[CONN_IOV];
	struct msghdr msg = { .msg_iov = iov };
	bool v2 = c->peer->version == 2;
	struct xfer_slice *s;
	size_t want;
	ssize_t n;
	int k;

	for (;;) {
		k = 0;
		want = 0;
		for (s = c->waitq.head; s && k < CONN_IOV - 1; s = s->next) {
			struct tcp_slice *x = ts(s);

			if (v2 && x->status_got < 8) {
				iov[k].iov_base = (uint8_t *)&x->status +
						  x->status_got;
				iov[k++].iov_len = 8 - x->status_got;
			}
			if (s->opcode == XFER_READ && xfer_slice_canceled(s)) {
				size_t left = s->len - x->data_got;

				iov[k].iov_base = discard;
				iov[k++].iov_len = left < DISCARD_LEN ? left
								     : DISCARD_LEN;
				if (left > DISCARD_LEN)
					break; /* its rest comes first */
			} else if (s->opcode == XFER_READ) {
				iov[k].iov_base = (uint8_t *)s->local + x->data_got;
				iov[k++].iov_len = s->len - x->data_got;
			}
		}
		if (k == 0) {
			/* Nothing expected: EOF or junk both end the socket. */
			char junk;

			n = recv(c->s.fd, &junk, 1, 0);
			if (n < 0 && errno == EAGAIN)
				return 0;
			return -1;
		}
		for (int i = 0; i < k; i++)
			want += iov[i].iov_len;
		msg.msg_iovlen = k;
		n = recvmsg(c->s.fd, &msg, 0);
		if (n == 0)
			return -1;
		if (n < 0)
			return errno == EAGAIN ? 0 : -1;
		want -= (size_t)n;
		/* Hand the bytes out in the order the iovecs were built. */
		for (s = c->waitq.head; n > 0; s = s->next) {
			struct tcp_slice *x = ts(s);

			if (v2 && x->status_got < 8) {
				size_t m = 8 - x->status_got;

				m = (size_t)n < m ? (size_t)n : m;
				x->status_got += m;
				n -= m;
			}
			if (s->opcode == XFER_READ && n > 0) {
				size_t m = s->len - x->data_got;

				m = (size_t)n < m ? (size_t)n : m;
				x->data_got += m;
				n -= m;
			}
		}
		while (c->waitq.head && reply_done(c, c->waitq.head)) {
			s = xfer_slice_q_pop(&c->waitq);
			if (v2 && ts(s)->status != TCP_STATUS_OK) {
				xfer_slice_done(s, XFER_FAILED);
				return 1;
			}
			xfer_slice_done(s, XFER_COMPLETED);
		}
		touch(c);
		/* Drained, or all answered: the read event says when more
		 * comes (an EOF or junk then, as above). */
		if (want || !c->waitq.head)
			return 0;
	}
}

static void conn_retry(struct tcp_conn *c);

/*
 * Send what waits. A send that fails (the peer reset the connection) may
 * follow a refusal whose status is already here, before the peer's
 * close: the replies that came are read first, and a refusal among them
 * sends the rest again (conn_retry()); else everything on it fails.
 */
static void conn_push(struct tcp_conn *c)
{
	if (!conn_send(c))
		return;
	if (conn_recv(c) > 0)
		conn_retry(c);
	else
		conn_fail(c, XFER_FAILED);
}

static void on_io(evutil_socket_t fd, short what, void *arg)
{
	struct tcp_conn *c = arg;
	int ret;

	(void)fd;
	claim(c, false);
	/* Connecting or authenticating: once the server proved itself and
	 * has our proof, the slices go. */
	ret = xfer_stream_io(&c->s, what);
	if (ret < 0)
		conn_fail(c, XFER_FAILED);
	else if (ret == XFER_STREAM_PROVED)
		conn_push(c);
	if (ret != XFER_STREAM_OPEN)
		goto out;
	ret = (what & EV_READ) ? conn_recv(c) : 0;
	if (ret > 0)
		conn_retry(c);
	else if (ret < 0)
		conn_fail(c, XFER_FAILED);
	else if (what & EV_WRITE)
		conn_push(c);
out:
	settle(c);
}

/* The transfer timeout fired. With nothing in flight (the reply came as
 * it fired) it stays stopped; bytes moved since it was set (or a
 * submitter's slice went out): it is set again for the rest (settle());
 * else no byte moved for the timeout, and the slices in flight time out. */
static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct tcp_conn *c = arg;

	(void)fd;
	(void)what;
	c->armed = false; /* a one-shot event: it ran out */
	claim(c, false);
	if ((c->sendq.head || c->waitq.head) &&
	    xfer_now_ms() - c->moved_ms >= c->t->base.env->transfer_timeout_ms) {
		xfer_log(XFER_LOG_WARN,
			 "tcp: no progress within the transfer timeout");
		conn_fail(c, XFER_TIMEOUT);
	}
	settle(c);
}

/* A lent slice's timeout fired with the slice not yet taken: taking it
 * stops this timer and starts the reactor's for what is left of it. */
static void on_lent_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct tcp_conn *c = arg;

	(void)fd;
	(void)what;
	claim(c, false);
	settle(c);
}

/* Slices were queued on a closed connection: connect and send.
 * On failure every slice fails. */
static void conn_start_send(struct tcp_conn *c)
{
	if (c->s.fd < 0 && xfer_stream_connect(&c->s, c->r->base,
					       &c->peer->addr,
					       c->peer->addrlen, on_io, c)) {
		conn_fail(c, XFER_FAILED);
		return;
	}
	/* on the reactor, which owns the base: added once, for good */
	xfer_event_want(c->lent_timer, &c->lent_added, true);
	touch(c);
	if (!c->s.connecting && !c->s.authing)
		conn_push(c);
}

/*
 * The peer refused a request and closes the connection (PROTOCOL.md §3).
 * It serves a connection's requests one after another and read none past
 * the refused one, so the requests behind it, sent or not, go again, in
 * order, on a new connection: only the refused request fails. Those of
 * its task, which has failed with it, end FAILED here rather than go
 * again (each would cost a round of its own: a task of n slices at a
 * gone buffer took n rounds, its WRITE payloads sent again each time).
 * Each round ends one refused slice, so this ends.
 */
static void conn_retry(struct tcp_conn *c)
{
	struct xfer_slice **p, *s;

	close_socket(c); /* a head partly sent goes again whole */
	xfer_slice_q_append(&c->waitq, &c->sendq);
	xfer_slice_q_append(&c->sendq, &c->waitq);
	xfer_slices_cancel(&c->sendq.head, &c->sendq.tail, 0);
	for (p = &c->sendq.head; (s = *p);) {
		if (xfer_slice_task_failed(s)) {
			*p = s->next;
			xfer_slice_done(s, XFER_FAILED);
			continue;
		}
		ts(s)->status = ts(s)->status_got = ts(s)->data_got = 0;
		p = &s->next;
	}
	c->sendq.tail = p;
	if (c->sendq.head)
		conn_start_send(c);
	else
		touch(c);
}

static void conn_kick(struct xfer_job *j)
{
	struct tcp_conn *c = container_of(j, struct tcp_conn, kick_job);

	claim(c, true);
	if (c->sendq.head)
		conn_start_send(c);
	settle(c);
}

void xfer_tcp_conn_cancel(struct tcp_conn *c)
{
	claim(c, false);
	pthread_mutex_lock(&c->lock);
	xfer_slices_cancel(&c->inbox.head, &c->inbox.tail, 0);
	pthread_mutex_unlock(&c->lock);
	/* a head partly on the wire goes out whole: the stream needs it */
	xfer_slices_cancel(&c->sendq.head, &c->sendq.tail, c->sent ? 1 : 0);
	/* no touch(): a cancel moves no byte, and one repeated (a closing
	 * engine's) must not keep a stalled peer's slices from timing out */
	settle(c);
}

/*
 * A submitter writes slice @p s on a quiet connection itself, with the
 * connection's lock held; what went out of it waits on the lent queue
 * for the reactor. @return 1: all of it went out; 0: a part (the reactor
 * sends the rest); -1: nothing (the caller queues it as usual).
 */
static int send_lent(struct tcp_conn *c, struct xfer_slice *s)
{
	struct iovec iov[2];
	struct msghdr msg = { .msg_iov = iov };
	size_t want;
	ssize_t n;

	msg.msg_iovlen = gather(s, 0, iov, 3, &want);
	n = sendmsg(c->s.fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n <= 0)
		return -1; /* the reactor finds out why */
	xfer_slice_q_push(&c->lent, s);
	c->lent_sent = (size_t)n;
	c->lent_ms = xfer_now_ms();
	arm_lent(c, c->t->base.env->transfer_timeout_ms);
	return (size_t)n == want;
}

/* Does @p b go on where @p a ends, in memory and in the segment? */
static bool adjacent(const struct xfer_slice *a, const struct xfer_slice *b)
{
	return b->opcode == a->opcode && b->task == a->task &&
	       (uint8_t *)b->local == (uint8_t *)a->local + a->len &&
	       b->remote == a->remote + a->len;
}

void xfer_tcp_conn_enqueue(struct tcp_conn *c, struct xfer_slice *s,
			   size_t n)
{
	uint8_t op = (c->peer->version == 2 ? TCP_OP_V2 : 0);
	struct xfer_slice *head = NULL, **tail = &head, *last = NULL;
	size_t runs = 0;
	int lent = -1;
	bool kick;

	/* Runs of adjacent slices, each one request in its first slice,
	 * which grows to the run's length; the others end at once with no
	 * bytes of their own (the task ends with the first). */
	for (size_t i = 0, j; i < n; i = j) {
		struct tcp_slice *x = ts(&s[i]);
		uint64_t len = s[i].len;

		for (j = i + 1; j < n && adjacent(&s[j - 1], &s[j]) &&
		     len + s[j].len <= RUN_MAX; j++)
			len += s[j].len;
		memset(x, 0, sizeof(*x));
		memcpy(x->hdr, &len, 8);
		memcpy(x->hdr + 8, &s[i].remote, 8);
		x->hdr[16] = op | (s[i].opcode == XFER_WRITE ? TCP_OP_WRITE : 0);
		for (size_t k = i + 1; k < j; k++) {
			s[k].len = 0;
			xfer_slice_done(&s[k], XFER_COMPLETED);
		}
		s[i].len = (uint32_t)len;
		*tail = last = &s[i];
		tail = &s[i].next;
		runs++;
	}
	*tail = NULL;
	s = head;
	pthread_mutex_lock(&c->lock);
	if (c->lent.head)
		c->burst_ms = xfer_now_ms();
	if (c->quiet && !c->inbox.head && runs == 1 &&
	    wire_len(s) <= DIRECT_MAX &&
	    (!c->burst_ms || xfer_now_ms() - c->burst_ms >= BURST_MS)) {
		c->quiet = false; /* the reactor's again after the reply */
		lent = send_lent(c, s);
	}
	if (lent < 0) {
		*c->inbox.tail = s;
		c->inbox.tail = &last->next;
	}
	kick = lent < 1 && !c->kicked;
	c->kicked |= kick;
	pthread_mutex_unlock(&c->lock);
	if (kick)
		xfer_reactor_post(c->r, &c->kick_job);
}

struct tcp_conn *xfer_tcp_conn_new(struct tcp_transport *t,
				   struct tcp_peer *p)
{
	struct tcp_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->t = t;
	c->peer = p;
	xfer_stream_init(&c->s, "tcp", NULL, t->base.env->auth);
	c->r = t->base.env->worker(t->base.env->arg);
	c->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (c->tfd < 0)
		goto err_free;
	c->lent_timer = event_new(c->r->base, c->tfd, EV_READ | EV_PERSIST,
				  on_lent_timeout, c);
	if (!c->lent_timer)
		goto err_close;
	c->timer = evtimer_new(c->r->base, on_timeout, c);
	if (!c->timer)
		goto err_lent;
	pthread_mutex_init(&c->lock, NULL);
	xfer_slice_q_init(&c->inbox);
	xfer_slice_q_init(&c->lent);
	xfer_slice_q_init(&c->sendq);
	xfer_slice_q_init(&c->waitq);
	c->kick_job.fn = conn_kick;
	return c;

err_lent:
	event_free(c->lent_timer);
err_close:
	close(c->tfd);
err_free:
	free(c);
	return NULL;
}

struct xfer_reactor *xfer_tcp_conn_reactor(const struct tcp_conn *c)
{
	return c->r;
}

/* With the reactors stopped: slices on the wire fail, the rest were never
 * sent and are canceled. */
void xfer_tcp_conn_free(struct tcp_conn *c)
{
	bool head_sent;

	claim(c, false);
	head_sent = c->sent > 0;
	close_socket(c); /* sets c->sent to 0 */
	xfer_slice_qs_drop(&c->inbox, &c->sendq, head_sent, &c->waitq);
	event_free(c->timer);
	event_free(c->lent_timer);
	close(c->tfd);
	pthread_mutex_destroy(&c->lock);
	free(c);
}
