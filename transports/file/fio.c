/*
 * The file I/O engine of a reactor (fio_internal.h). Requests wait in a
 * FIFO until fewer than depth are in flight, then go to the mechanism:
 * an io_uring whose completions raise an eventfd registered with
 * io_uring_register_eventfd, or the worker thread of fio_worker.c, which
 * raises an eventfd of the same kind. That eventfd is one EV_READ|
 * EV_PERSIST event on the reactor's base. Its handler and the one that
 * submits are one loop, cycle(): reap every completion, continue short
 * reads and writes, refill from the FIFO, submit once, run the done
 * callbacks, and go round again while that produced more: the page cache
 * completes inside io_uring_enter, and a done callback may submit again.
 * While it runs the ring's eventfd is off (IORING_CQ_EVENTFD_DISABLED),
 * so completions it reaps itself wake nobody; it looks once more after
 * turning it back on. Submissions made between events are gathered by
 * one activated event.
 *
 * Each request goes to the kernel in its own io_uring_submit(), as fio's
 * default iodepth_batch_submit=1 does: io_uring plugs a submission of
 * more than two, and the block layer merges adjacent requests in a plug
 * into one. On a disk that serves many requests at once better than one
 * large one (a virtual disk), merged requests feed back: they end
 * together, are submitted again together and merge again. 64 KiB reads
 * at depth 32 ran 2 MiB a request at 3.5 GB/s so, and 64 KiB a request
 * at 3.8 with one submission each (docs/BENCH.md).
 *
 * The ring is set up with IORING_SETUP_COOP_TASKRUN where the kernel has
 * it (5.19): a completion's task work (an O_DIRECT read's, say) then
 * waits for the reactor's next system call instead of interrupting it
 * with an IPI, and IORING_SETUP_TASKRUN_FLAG says when some waits, so
 * the loop collects it before it sleeps. Not SINGLE_ISSUER nor
 * DEFER_TASKRUN: xfer_fio_free() waits for the ring on whatever thread
 * frees the engine, which those would refuse (-EEXIST).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <event2/event.h>
#include <liburing.h>

#include "util/log_internal.h"
#include "reactor/reactor_internal.h"
#include "transports/file/fio_internal.h"
#include "transports/file/fio_worker_internal.h"

/* After io_uring_submit() failed (the kernel short of memory), try again
 * this much later; armed only while requests wait for it. */
static const struct timeval retry_tv = { 0, 10 * 1000 };

/* Rounds of one cycle() before the reactor's other events have a turn:
 * each may move depth requests. */
#define CYCLE_ROUNDS 8

/* The ring's setup flags, the first the kernel takes. */
static const unsigned ring_flags[] = {
	IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
	0,
};

struct xfer_fio {
	struct xfer_reactor *r;
	unsigned depth;
	unsigned inflight;       /* in the ring or with the worker */
	bool threads;
	bool closing;            /* in xfer_fio_free(): nothing starts */
	bool flush_pending;      /* flush_ev is active or armed */
	bool cycling;            /* in cycle(), which starts what is queued */
	bool toggle;             /* the ring's eventfd can be turned off */
	struct xfer_fio_queue waiting; /* in submission order */
	int efd;                 /* the ring's or the worker's eventfd */
	struct event *done_ev;   /* efd readable */
	struct event *flush_ev;  /* start what waits: activated or a timer */
	struct io_uring ring;
	struct xfer_fio_worker *worker;
};

/* Run the done callbacks of @p q, in order, with each ->res; @p q ends
 * empty. */
static void deliver(struct xfer_fio_queue *q)
{
	struct xfer_fio_req *req;

	while ((req = STAILQ_FIRST(q))) {
		STAILQ_REMOVE_HEAD(q, link); /* done may free or resubmit req */
		req->done(req, req->res);
	}
}

/* ---- io_uring ---- */

static void prep(struct xfer_fio *f, struct xfer_fio_req *req)
{
	/* Never NULL: at most depth requests hold an SQE, and the ring has
	 * at least depth of them. */
	struct io_uring_sqe *sqe = io_uring_get_sqe(&f->ring);
	char *buf = (char *)req->buf + req->moved;
	unsigned len = (unsigned)xfer_fio_next_len(req);
	uint64_t off = req->off + req->moved;

	if (req->write)
		io_uring_prep_write(sqe, req->fd, buf, len, off);
	else
		io_uring_prep_read(sqe, req->fd, buf, len, off);
	io_uring_sqe_set_data(sqe, req);
}

/* Hand the kernel every SQE prepared; if it refuses for now, try again
 * later (the SQEs stay in the ring). @return how many it took. */
static unsigned ring_submit(struct xfer_fio *f)
{
	unsigned took = 0;
	int ret;

	while (io_uring_sq_ready(&f->ring)) {
		ret = io_uring_submit(&f->ring);
		if (ret > 0) {
			took += (unsigned)ret;
			continue;
		}
		if (ret == -EINTR)
			continue;
		xfer_log(XFER_LOG_DEBUG, "fio %s: io_uring_submit: %s; again "
			 "soon", f->r->name, strerror(ret ? -ret : EAGAIN));
		if (!f->closing) {
			event_add(f->flush_ev, &retry_tv);
			f->flush_pending = true;
		}
		break;
	}
	return took;
}

/* Has the ring completions to reap, or task work that would post some
 * (IORING_SQ_TASKRUN: run it now rather than on the way to sleep)? */
static bool ring_ready(struct xfer_fio *f)
{
	if (IO_URING_READ_ONCE(*f->ring.sq.kflags) & IORING_SQ_TASKRUN)
		io_uring_get_events(&f->ring);
	return io_uring_cq_ready(&f->ring);
}

/* Reap every CQE: continue short ones (or with @p cancel end them
 * -ECANCELED), queue ended ones on @p ended. */
static void ring_reap(struct xfer_fio *f, struct xfer_fio_queue *ended,
		      bool cancel)
{
	struct io_uring_cqe *cqe;
	unsigned head, seen = 0;

	io_uring_for_each_cqe(&f->ring, head, cqe) {
		struct xfer_fio_req *req = io_uring_cqe_get_data(cqe);

		seen++;
		if (!xfer_fio_step(req, cqe->res, &req->res)) {
			if (!cancel) {
				prep(f, req); /* the rest, in the same slot */
				continue;
			}
			req->res = -ECANCELED;
		}
		f->inflight--;
		STAILQ_INSERT_TAIL(ended, req, link);
	}
	io_uring_cq_advance(&f->ring, seen);
}

/* pump() for the ring: the rest of short ones, then each request started
 * in its own submission (the file's header says why), until the kernel
 * refuses one for now. */
static bool ring_pump(struct xfer_fio *f)
{
	struct xfer_fio_req *req;
	bool any = ring_submit(f) > 0;

	while ((req = STAILQ_FIRST(&f->waiting)) && f->inflight < f->depth &&
	       !f->closing && !io_uring_sq_ready(&f->ring)) {
		STAILQ_REMOVE_HEAD(&f->waiting, link);
		f->inflight++;
		prep(f, req);
		any |= ring_submit(f) > 0;
	}
	return any;
}

/* Turn the ring's eventfd on or off (a no-op for the worker, and where
 * the kernel cannot). Off, the kernel reads the flag after publishing a
 * CQE (with a full barrier between); so do we after turning it back on,
 * before looking at the CQ once more. */
static void notify(struct xfer_fio *f, bool on)
{
	if (!f->toggle)
		return;
	io_uring_cq_eventfd_toggle(&f->ring, on);
	if (on)
		atomic_thread_fence(memory_order_seq_cst);
}

/* ---- both mechanisms ---- */

/* Start waiting requests while fewer than depth are in flight, and the
 * rest of short ones. @return did anything go to the kernel or the
 * worker? */
static bool pump(struct xfer_fio *f)
{
	struct xfer_fio_queue start = STAILQ_HEAD_INITIALIZER(start);
	struct xfer_fio_req *req;
	bool any;

	if (!f->threads)
		return ring_pump(f);
	while ((req = STAILQ_FIRST(&f->waiting)) && f->inflight < f->depth &&
	       !f->closing) {
		STAILQ_REMOVE_HEAD(&f->waiting, link);
		f->inflight++;
		STAILQ_INSERT_TAIL(&start, req, link);
	}
	any = !STAILQ_EMPTY(&start);
	xfer_fio_worker_push(f->worker, &start);
	return any;
}

/* What has ended, onto the empty @p ended. */
static void take(struct xfer_fio *f, struct xfer_fio_queue *ended)
{
	struct xfer_fio_req *req;

	if (!f->threads) {
		ring_reap(f, ended, false);
		return;
	}
	xfer_fio_worker_take(f->worker, ended);
	STAILQ_FOREACH(req, ended, link)
		f->inflight--;
}

/* Have the reactor call cycle() soon, once. */
static void flush_soon(struct xfer_fio *f)
{
	if (!f->flush_pending && !f->closing) {
		f->flush_pending = true;
		event_active(f->flush_ev, EV_TIMEOUT, 1);
	}
}

/*
 * Reap, refill, submit, deliver, round after round while that produced
 * more, then once more if the ring has something after its eventfd came
 * back on. After CYCLE_ROUNDS the reactor's other events go first.
 */
static void cycle(struct xfer_fio *f)
{
	struct xfer_fio_queue ended = STAILQ_HEAD_INITIALIZER(ended);
	bool more = true;

	f->cycling = true;
	for (int round = 0; more && round < CYCLE_ROUNDS; round++) {
		notify(f, false);
		take(f, &ended);
		/* the kernel works while the callbacks run */
		more = pump(f) || !STAILQ_EMPTY(&ended);
		deliver(&ended);
		if (!more) {
			notify(f, true);
			more = !f->threads && ring_ready(f);
		}
	}
	notify(f, true);
	f->cycling = false;
	if (more)
		flush_soon(f);
}

static void on_done(evutil_socket_t fd, short what, void *arg)
{
	struct xfer_fio *f = arg;
	uint64_t n;

	(void)what;
	/* Read first: a completion after the read raises the eventfd again. */
	if (read(fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		xfer_log(XFER_LOG_WARN, "fio %s: eventfd read: %s", f->r->name,
			 strerror(errno));
	cycle(f);
}

static void on_flush(evutil_socket_t fd, short what, void *arg)
{
	struct xfer_fio *f = arg;

	(void)fd;
	(void)what;
	f->flush_pending = false;
	cycle(f);
}

void xfer_fio_submit(struct xfer_fio *f, struct xfer_fio_req *req)
{
	req->moved = 0;
	req->res = 0;
	STAILQ_INSERT_TAIL(&f->waiting, req, link);
	if (!f->cycling) /* else cycle() starts it */
		flush_soon(f);
}

bool xfer_fio_threads(const struct xfer_fio *f)
{
	return f->threads;
}

double xfer_fio_cpu_seconds(const struct xfer_fio *f)
{
	return f->threads ? xfer_fio_worker_cpu_seconds(f->worker) : 0;
}

/* ---- lifecycle ---- */

/* Set up the ring with its eventfd. @return 0, or -errno (with @p why
 * naming the call that failed). */
static int ring_init(struct xfer_fio *f, const char **why)
{
	struct io_uring_probe *probe;
	bool ok;
	int ret;

	*why = "io_uring_queue_init";
	ret = -EINVAL;
	for (size_t i = 0; ret == -EINVAL &&
	     i < sizeof(ring_flags) / sizeof(ring_flags[0]); i++)
		ret = io_uring_queue_init(f->depth, &f->ring, ring_flags[i]);
	if (ret)
		return ret;
	*why = "io_uring_get_probe";
	probe = io_uring_get_probe_ring(&f->ring);
	if (!probe) {
		ret = -EOPNOTSUPP;
		goto err_exit;
	}
	ok = io_uring_opcode_supported(probe, IORING_OP_READ) &&
	     io_uring_opcode_supported(probe, IORING_OP_WRITE);
	io_uring_free_probe(probe);
	*why = "IORING_OP_READ and _WRITE";
	if (!ok) {
		ret = -EOPNOTSUPP;
		goto err_exit;
	}
	*why = "io_uring_register_eventfd";
	ret = io_uring_register_eventfd(&f->ring, f->efd);
	if (ret)
		goto err_exit;
	f->toggle = f->ring.cq.kflags != NULL; /* the CQ's flags: 5.8 */
	return 0;

err_exit:
	io_uring_queue_exit(&f->ring);
	return ret;
}

/* The mechanism: io_uring if it can be had and is wanted, else a worker
 * thread; one log line says which and why. */
static int pick(struct xfer_fio *f, bool threads)
{
	const char *why = "asked for";
	char name[16];
	int ret;

	if (!threads) {
		ret = ring_init(f, &why);
		if (!ret) {
			xfer_log(XFER_LOG_INFO, "fio %s: io_uring, depth "
				 "%u%s%s", f->r->name, f->depth,
				 f->ring.flags & IORING_SETUP_COOP_TASKRUN ?
				 ", COOP_TASKRUN" : "", f->toggle ?
				 ", eventfd off while reaping" : "");
			return 0;
		}
		/* not what was asked for: said at the default level */
		xfer_log(XFER_LOG_WARN, "fio %s: worker thread, depth %u: "
			 "io_uring unavailable (%s: %s)", f->r->name, f->depth,
			 why, strerror(-ret));
	} else {
		xfer_log(XFER_LOG_INFO, "fio %s: worker thread, depth %u: %s",
			 f->r->name, f->depth, why);
	}
	f->threads = true;
	snprintf(name, sizeof(name), "fio-%.11s", f->r->name);
	return xfer_fio_worker_new(f->efd, name, &f->worker);
}

int xfer_fio_new(struct xfer_reactor *r, unsigned depth, bool threads,
		 struct xfer_fio **out)
{
	struct xfer_fio *f;
	int ret = -ENOMEM;

	if (!depth || depth > XFER_FIO_MAX_DEPTH)
		return -EINVAL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->r = r;
	f->depth = depth;
	STAILQ_INIT(&f->waiting);
	f->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (f->efd < 0) {
		ret = -errno;
		goto err_free;
	}
	f->done_ev = event_new(r->base, f->efd, EV_READ | EV_PERSIST, on_done, f);
	if (!f->done_ev)
		goto err_close;
	f->flush_ev = event_new(r->base, -1, 0, on_flush, f);
	if (!f->flush_ev)
		goto err_done_ev;
	if (event_add(f->done_ev, NULL)) {
		ret = -EIO;
		goto err_flush_ev;
	}
	ret = pick(f, threads);
	if (ret)
		goto err_flush_ev;
	*out = f;
	return 0;

err_flush_ev:
	event_free(f->flush_ev);
err_done_ev:
	event_free(f->done_ev);
err_close:
	close(f->efd);
err_free:
	free(f);
	return ret;
}

/* Wait for what the kernel or the worker has and queue it on @p ended:
 * finished with their results, cut short or not started -ECANCELED. */
static void drain(struct xfer_fio *f, struct xfer_fio_queue *ended)
{
	struct xfer_fio_queue todo = STAILQ_HEAD_INITIALIZER(todo);
	struct xfer_fio_req *req;

	if (f->threads) {
		xfer_fio_worker_free(f->worker, ended, &todo);
		f->worker = NULL;
		f->inflight = 0;
		STAILQ_FOREACH(req, &todo, link)
			req->res = -ECANCELED;
		STAILQ_CONCAT(ended, &todo);
		return;
	}
	while (f->inflight) {
		int ret = io_uring_submit_and_wait(&f->ring, 1);

		if (ret < 0 && ret != -EINTR && ret != -EAGAIN &&
		    ret != -EBUSY) { /* not with a live ring */
			xfer_log(XFER_LOG_ERROR, "fio %s: io_uring wait: %s; "
				 "%u requests lost", f->r->name,
				 strerror(-ret), f->inflight);
			return;
		}
		ring_reap(f, ended, true);
	}
}

void xfer_fio_free(struct xfer_fio *f)
{
	struct xfer_fio_queue ended = STAILQ_HEAD_INITIALIZER(ended);
	struct xfer_fio_req *req;

	if (!f)
		return;
	f->closing = true;
	drain(f, &ended);
	deliver(&ended);
	/* Waiting ones, and any a done callback submits meanwhile. */
	while ((req = STAILQ_FIRST(&f->waiting))) {
		STAILQ_REMOVE_HEAD(&f->waiting, link);
		req->done(req, -ECANCELED);
	}
	event_free(f->flush_ev);
	event_free(f->done_ev);
	if (!f->threads)
		io_uring_queue_exit(&f->ring);
	close(f->efd);
	free(f);
}
