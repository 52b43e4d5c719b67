/* A waiter shared by a blocking call and the callback it waits for. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "util/wait_internal.h"

struct xfer_wait {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int refs;
	bool done;
	int64_t result;
};

struct xfer_wait *xfer_wait_new(void)
{
	struct xfer_wait *w = calloc(1, sizeof(*w));
	pthread_condattr_t ca;

	if (!w)
		return NULL;
	w->refs = 2;
	pthread_mutex_init(&w->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cond, &ca);
	pthread_condattr_destroy(&ca);
	return w;
}

/* Drop one reference, with the lock held; frees on the last. */
static void put_locked(struct xfer_wait *w)
{
	bool last = --w->refs == 0;

	pthread_mutex_unlock(&w->lock);
	if (!last)
		return;
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

void xfer_wait_done(struct xfer_wait *w, int64_t result)
{
	pthread_mutex_lock(&w->lock);
	w->result = result;
	w->done = true;
	pthread_cond_broadcast(&w->cond);
	put_locked(w);
}

void xfer_wait_cb(struct xfer_engine *e, int result, void *arg)
{
	(void)e;
	xfer_wait_done(arg, result);
}

void xfer_wait_drop(struct xfer_wait *w)
{
	pthread_mutex_lock(&w->lock);
	put_locked(w);
}

void xfer_deadline(struct timespec *ts, int timeout_ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += timeout_ms / 1000;
	ts->tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (ts->tv_nsec >= 1000000000) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000;
	}
}

int64_t xfer_wait_result(struct xfer_wait *w, int64_t started)
{
	if (!started)
		return xfer_wait_for(w, XFER_WAIT_MS);
	xfer_wait_drop(w);
	xfer_wait_drop(w);
	return started;
}

int xfer_wait_published(struct xfer_wait *w, int started)
{
	int64_t ret = xfer_wait_result(w, started);

	return started ? (int)ret : 0;
}

int64_t xfer_wait_for(struct xfer_wait *w, int timeout_ms)
{
	struct timespec deadline;
	int64_t ret = 0;

	xfer_deadline(&deadline, timeout_ms);
	pthread_mutex_lock(&w->lock);
	while (!w->done && ret == 0)
		ret = -pthread_cond_timedwait(&w->cond, &w->lock, &deadline);
	ret = w->done ? w->result : -ETIMEDOUT;
	put_locked(w);
	return ret;
}
