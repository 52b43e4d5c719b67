/*
 * A reactor is one event_base driven by one thread: its own, or the
 * application's in plugin mode. Other threads hand it work through a
 * mutex-guarded job queue and an eventfd wakeup, so the base itself needs
 * no libevent locking and nobody ever spins; an idle reactor sleeps until
 * an fd or a timer of its own is due (no periodic timer).
 */
#ifndef XFER_REACTOR_INTERNAL_H
#define XFER_REACTOR_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdbool.h>
#include <time.h>

#include "util/container_internal.h"

struct event;
struct event_base;

/* A unit of work, embedded in its owner (get back with container_of), so
 * posting never allocates and never fails. */
struct xfer_job {
	void (*fn)(struct xfer_job *job);
	struct xfer_job *next;
};


struct xfer_reactor {
	struct event_base *base;
	bool owns_base;    /* false in plugin mode: never dispatched or freed */
	bool running;      /* a thread of ours dispatches it */
	pthread_t thread;
	/* Plugin mode: the thread that last ran our events, i.e. the one
	 * that dispatches the application's base. */
	_Atomic pthread_t last_thread;
	_Atomic bool seen_thread;
	clockid_t cpu_clock;
	int wake_fd;       /* eventfd */
	struct event *wake_ev;
	pthread_mutex_t lock;
	struct xfer_job *head, **tail;
	struct xfer_job stop_job;
	char name[16];
};

/**
 * Set up @p r on @p base (plugin mode, not owned) or on a new base of its
 * own when @p base is NULL. @return 0 or a negative errno.
 */
int xfer_reactor_init(struct xfer_reactor *r, struct event_base *base,
		      const char *name);

/** Start the thread of an owned reactor. @return 0 or a negative errno. */
int xfer_reactor_start(struct xfer_reactor *r);

/**
 * Run job->fn(job) on the reactor's thread, soon, in posting order. Any
 * thread. The job must not be posted again before it has run.
 */
void xfer_reactor_post(struct xfer_reactor *r, struct xfer_job *job);

/**
 * Run @p fn(@p arg) on the reactor's thread and wait for it: at once when
 * the caller is that thread, else as a job (in plugin mode, once the
 * application's thread dispatches the base). Any thread.
 */
void xfer_reactor_run(struct xfer_reactor *r, void (*fn)(void *arg),
		      void *arg);

/** Stop and join the thread (if any); queued jobs are dropped unrun (their
 *  owners free them). */
void xfer_reactor_stop(struct xfer_reactor *r);

/** Free the reactor's events and, if owned, its base. After stop. */
void xfer_reactor_destroy(struct xfer_reactor *r);

/** Is the caller the thread that dispatches @p r: ours, or in plugin mode
 *  the application's (the one that made the reactor, until another runs
 *  its events)? */
bool xfer_reactor_on_thread(struct xfer_reactor *r);

/** CPU seconds used by the reactor's thread so far (0 without one). */
double xfer_reactor_cpu_seconds(const struct xfer_reactor *r);

/** Add @p ev (no timeout) or delete it, as @p want says, when *@p added
 *  says it is not so already; *@p added follows. On the thread that
 *  dispatches the event's base. */
void xfer_event_want(struct event *ev, bool *added, bool want);

#endif
