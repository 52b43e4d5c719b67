/* Reactor: event_base + thread + cross-thread job queue (eventfd wakeup). */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <event2/event.h>

#include "reactor/reactor_internal.h"

static struct xfer_job *take_all(struct xfer_reactor *r)
{
	struct xfer_job *jobs;

	pthread_mutex_lock(&r->lock);
	jobs = r->head;
	r->head = NULL;
	r->tail = &r->head;
	pthread_mutex_unlock(&r->lock);
	return jobs;
}

static void run_jobs(struct xfer_reactor *r)
{
	struct xfer_job *j, *next;

	if (!r->owns_base) {
		atomic_store(&r->last_thread, pthread_self());
		atomic_store(&r->seen_thread, true);
	}

	for (j = take_all(r); j; j = next) {
		next = j->next;
		j->fn(j);
	}
}

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
	uint64_t n;

	(void)what;
	if (read(fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		return;
	run_jobs(arg);
}

int xfer_reactor_init(struct xfer_reactor *r, struct event_base *base,
		      const char *name)
{
	int ret = -ENOMEM;

	memset(r, 0, sizeof(*r));
	snprintf(r->name, sizeof(r->name), "%s", name);
	r->tail = &r->head;
	pthread_mutex_init(&r->lock, NULL);
	r->owns_base = base == NULL;
	if (base) { /* the application's thread owns it: until it runs our
		     * events elsewhere, the one that makes the engine */
		atomic_store(&r->last_thread, pthread_self());
		atomic_store(&r->seen_thread, true);
	}
	r->base = base ? base : event_base_new();
	if (!r->base)
		goto err_lock;
	r->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (r->wake_fd < 0) {
		ret = -errno;
		goto err_base;
	}
	r->wake_ev = event_new(r->base, r->wake_fd, EV_READ | EV_PERSIST,
			       on_wake, r);
	if (!r->wake_ev || event_add(r->wake_ev, NULL))
		goto err_events;
	return 0;

err_events:
	if (r->wake_ev)
		event_free(r->wake_ev);
	close(r->wake_fd);
err_base:
	if (r->owns_base)
		event_base_free(r->base);
err_lock:
	pthread_mutex_destroy(&r->lock);
	return ret;
}

/*
 * A write to a connection whose peer is gone raises SIGPIPE (whose default
 * is to end the process) unless the caller passed MSG_NOSIGNAL, which
 * xfer's own sends do but libevent's bufferevents, evhttp and hiredis do
 * not: the kernel answers the first such write ECONNRESET, a later one
 * EPIPE with the signal. Blocked on the engine's threads, the signal stays
 * pending there and the write fails with EPIPE alone. (In plugin mode the
 * application's thread is its own, as with any libevent application.)
 */
static void *reactor_main(void *arg)
{
	struct xfer_reactor *r = arg;
	sigset_t pipe;

	sigemptyset(&pipe);
	sigaddset(&pipe, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe, NULL);
	pthread_setname_np(pthread_self(), r->name);
	event_base_loop(r->base, EVLOOP_NO_EXIT_ON_EMPTY);
	return NULL;
}

int xfer_reactor_start(struct xfer_reactor *r)
{
	int ret;

	if (!r->owns_base)
		return 0;
	ret = pthread_create(&r->thread, NULL, reactor_main, r);
	if (ret)
		return -ret;
	pthread_getcpuclockid(r->thread, &r->cpu_clock);
	r->running = true;
	return 0;
}

void xfer_reactor_post(struct xfer_reactor *r, struct xfer_job *j)
{
	uint64_t one = 1;
	bool first;

	j->next = NULL;
	pthread_mutex_lock(&r->lock);
	first = r->head == NULL;
	*r->tail = j;
	r->tail = &j->next;
	pthread_mutex_unlock(&r->lock);
	/* Only the first job of a drained queue needs a wakeup. The write
	 * cannot be lost: an eventfd refuses one (EAGAIN) only when its
	 * counter is near 2^64, i.e. unread and so readable already. Nothing
	 * else wakes an idle reactor: no timer polls. */
	if (first && r->running && pthread_equal(pthread_self(), r->thread)) {
		/* Posted by the reactor's own thread (a completion that ends a
		 * batch on an engine with no workers): it runs the queue on its
		 * next turn, with no syscall. Not in plugin mode, where the
		 * thread that dispatches the base may change unseen. */
		event_active(r->wake_ev, EV_READ, 0);
	} else if (first) {
		ssize_t n = write(r->wake_fd, &one, sizeof(one));
		(void)n;
	}
}

/* A job run on the reactor for a waiting caller. */
struct run_job {
	struct xfer_job job;
	void (*fn)(void *arg);
	void *arg;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
};

static void run_one(struct xfer_job *j)
{
	struct run_job *rj = container_of(j, struct run_job, job);

	rj->fn(rj->arg);
	pthread_mutex_lock(&rj->lock);
	rj->done = true;
	pthread_cond_signal(&rj->cond);
	pthread_mutex_unlock(&rj->lock);
}

void xfer_reactor_run(struct xfer_reactor *r, void (*fn)(void *arg),
		      void *arg)
{
	struct run_job rj = { .job.fn = run_one, .fn = fn, .arg = arg };

	if (xfer_reactor_on_thread(r)) {
		fn(arg);
		return;
	}
	pthread_mutex_init(&rj.lock, NULL);
	pthread_cond_init(&rj.cond, NULL);
	xfer_reactor_post(r, &rj.job);
	pthread_mutex_lock(&rj.lock);
	while (!rj.done)
		pthread_cond_wait(&rj.cond, &rj.lock);
	pthread_mutex_unlock(&rj.lock);
	pthread_cond_destroy(&rj.cond);
	pthread_mutex_destroy(&rj.lock);
}

static void do_break(struct xfer_job *j)
{
	struct xfer_reactor *r = container_of(j, struct xfer_reactor, stop_job);

	event_base_loopbreak(r->base);
}

void xfer_reactor_stop(struct xfer_reactor *r)
{
	if (r->running) {
		r->stop_job.fn = do_break;
		xfer_reactor_post(r, &r->stop_job);
		pthread_join(r->thread, NULL);
		r->running = false;
	}
	take_all(r);
}

void xfer_reactor_destroy(struct xfer_reactor *r)
{
	event_free(r->wake_ev);
	close(r->wake_fd);
	if (r->owns_base)
		event_base_free(r->base);
	pthread_mutex_destroy(&r->lock);
}

bool xfer_reactor_on_thread(struct xfer_reactor *r)
{
	if (r->running)
		return pthread_equal(pthread_self(), r->thread);
	return atomic_load(&r->seen_thread) &&
	       pthread_equal(pthread_self(), atomic_load(&r->last_thread));
}

double xfer_reactor_cpu_seconds(const struct xfer_reactor *r)
{
	struct timespec ts;

	if (!r->running || clock_gettime(r->cpu_clock, &ts))
		return 0;
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

void xfer_event_want(struct event *ev, bool *added, bool want)
{
	if (*added == want)
		return;
	*added = want;
	if (want)
		event_add(ev, NULL);
	else
		event_del(ev);
}
