/*
 * The file I/O engine's synchronous side: the fallback, one thread that
 * does requests one after the other with preadv/pwritev, continuing short
 * ones, and hands them back through a list and an eventfd, which the
 * engine watches on its reactor (the thread sleeps on a condition
 * variable when idle); and xfer_fio_now(), the same calls made on the
 * caller's thread, with RWF_NOWAIT unless the file is in memory.
 */
#define _GNU_SOURCE /* pthread_setname_np, preadv2 */
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "transports/file/fio_worker_internal.h"

struct xfer_fio_worker {
	pthread_t thread;
	clockid_t clock;        /* its CPU clock; have_clock */
	bool have_clock;
	pthread_mutex_t lock;
	pthread_cond_t cond;    /* todo is not empty, or stop */
	bool stop;
	struct xfer_fio_queue todo;
	struct xfer_fio_queue finished; /* results in ->res */
	int efd;
	char name[16];
};

/* One read or write of the rest of @p req (the next piece of it), with
 * preadv2/pwritev2's @p flags. @return bytes moved, or -errno. */
static ssize_t rw_next(struct xfer_fio_req *req, int flags)
{
	struct iovec iov = {
		.iov_base = (char *)req->buf + req->moved,
		.iov_len = xfer_fio_next_len(req),
	};
	off_t off = (off_t)(req->off + req->moved);
	ssize_t n = req->write ? pwritev2(req->fd, &iov, 1, off, flags) :
				 preadv2(req->fd, &iov, 1, off, flags);

	return n < 0 ? -errno : n;
}

/* The whole of @p req; its result into req->res. */
static void run(struct xfer_fio_req *req)
{
	for (;;) {
		ssize_t n = rw_next(req, 0);

		if (n != -EINTR && xfer_fio_step(req, n, &req->res))
			return;
	}
}

int xfer_fio_now(struct xfer_fio_req *req, bool nowait)
{
	req->moved = 0;
	req->res = 0;
	for (;;) {
		ssize_t n = rw_next(req, nowait ? RWF_NOWAIT : 0);

		if (n == -EAGAIN)
			return -EAGAIN;
		/* ENOSYS: no preadv2 (before Linux 4.6) */
		if (n == -EOPNOTSUPP || n == -ENOSYS)
			return -EOPNOTSUPP;
		if (n != -EINTR && xfer_fio_step(req, n, &req->res))
			return 0;
	}
}

static void *worker_main(void *arg)
{
	struct xfer_fio_worker *w = arg;
	static const uint64_t one = 1;

	pthread_setname_np(pthread_self(), w->name);
	pthread_mutex_lock(&w->lock);
	for (;;) {
		struct xfer_fio_req *req;
		bool first;

		while (STAILQ_EMPTY(&w->todo) && !w->stop)
			pthread_cond_wait(&w->cond, &w->lock);
		if (w->stop)
			break;
		req = STAILQ_FIRST(&w->todo);
		STAILQ_REMOVE_HEAD(&w->todo, link);
		pthread_mutex_unlock(&w->lock);

		run(req);

		pthread_mutex_lock(&w->lock);
		first = STAILQ_EMPTY(&w->finished);
		STAILQ_INSERT_TAIL(&w->finished, req, link);
		/* Only the first of a list nobody took yet needs a wakeup: the
		 * reactor takes the whole list after reading the eventfd. */
		if (first) {
			ssize_t n = write(w->efd, &one, sizeof(one));

			(void)n; /* full only if the reactor is long gone */
		}
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

int xfer_fio_worker_new(int efd, const char *name,
			struct xfer_fio_worker **out)
{
	struct xfer_fio_worker *w = calloc(1, sizeof(*w));
	int ret;

	if (!w)
		return -ENOMEM;
	w->efd = efd;
	STAILQ_INIT(&w->todo);
	STAILQ_INIT(&w->finished);
	snprintf(w->name, sizeof(w->name), "%s", name);
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	ret = pthread_create(&w->thread, NULL, worker_main, w);
	if (ret) {
		pthread_cond_destroy(&w->cond);
		pthread_mutex_destroy(&w->lock);
		free(w);
		return -ret;
	}
	w->have_clock = !pthread_getcpuclockid(w->thread, &w->clock);
	*out = w;
	return 0;
}

double xfer_fio_worker_cpu_seconds(const struct xfer_fio_worker *w)
{
	struct timespec ts;

	if (!w->have_clock || clock_gettime(w->clock, &ts))
		return 0;
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void xfer_fio_worker_push(struct xfer_fio_worker *w,
			  struct xfer_fio_queue *reqs)
{
	if (STAILQ_EMPTY(reqs))
		return;
	pthread_mutex_lock(&w->lock);
	STAILQ_CONCAT(&w->todo, reqs);
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

void xfer_fio_worker_take(struct xfer_fio_worker *w,
			  struct xfer_fio_queue *out)
{
	pthread_mutex_lock(&w->lock);
	STAILQ_CONCAT(out, &w->finished);
	pthread_mutex_unlock(&w->lock);
}

void xfer_fio_worker_free(struct xfer_fio_worker *w,
			  struct xfer_fio_queue *finished,
			  struct xfer_fio_queue *todo)
{
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->thread, NULL);

	STAILQ_CONCAT(finished, &w->finished);
	STAILQ_CONCAT(todo, &w->todo);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	free(w);
}
