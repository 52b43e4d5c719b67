/*
 * Listeners that back off when accept() fails (listen_internal.h): the
 * listener is disabled for a pause, and a timer enables it again; and
 * the engine's listeners, made the one way they all need.
 *
 * libevent hands an error callback the accept callback's argument, which
 * the guard does not own (evhttp's listener passes its evhttp), so the
 * callback finds its guard by listener in a short list of every guard of
 * the process: few (two per engine), and looked at only on errors.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <time.h>

#include <event2/event.h>
#include <event2/listener.h>

#include "util/listen_internal.h"
#include "util/log_internal.h"

#define PAUSE_MIN_MS 10
#define PAUSE_MAX_MS 1000

struct xfer_listen_guard {
	LIST_ENTRY(xfer_listen_guard) link;   /* guards, under guards_lock */
	struct evconnlistener *lev;
	struct event *timer;
	unsigned pause_ms;       /* the next pause */
	int64_t last_error_ms;   /* monotonic */
	struct xfer_log_limit log;
	char what[32];
};

static LIST_HEAD(, xfer_listen_guard) guards = LIST_HEAD_INITIALIZER(guards);
static pthread_mutex_t guards_lock = PTHREAD_MUTEX_INITIALIZER;

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void on_resume(evutil_socket_t fd, short what, void *arg)
{
	struct xfer_listen_guard *g = arg;

	(void)fd;
	(void)what;
	evconnlistener_enable(g->lev);
}

/* accept() failed with something other than EAGAIN or ECONNABORTED
 * (EMFILE, ENFILE, ENOBUFS, ENOMEM ...): the connections wait in the
 * backlog until the pause is over. */
static void on_error(struct evconnlistener *lev, void *arg)
{
	struct xfer_listen_guard *g;
	int err = EVUTIL_SOCKET_ERROR();
	int64_t now = now_ms();
	struct timeval tv;

	(void)arg; /* the accept callback's, not ours */
	pthread_mutex_lock(&guards_lock);
	LIST_FOREACH(g, &guards, link)
		if (g->lev == lev)
			break;
	pthread_mutex_unlock(&guards_lock);
	/* only its own thread frees the guard: it stays valid here */
	if (!g)
		return;

	/* a new run of failures starts with the shortest pause (so does
	 * one after an accept, where the owner says so) */
	if (now - g->last_error_ms > PAUSE_MAX_MS + g->pause_ms)
		g->pause_ms = PAUSE_MIN_MS;
	g->last_error_ms = now;
	tv.tv_sec = g->pause_ms / 1000;
	tv.tv_usec = (g->pause_ms % 1000) * 1000;
	evconnlistener_disable(lev);
	evtimer_add(g->timer, &tv);
	xfer_log_limited(&g->log, XFER_LOG_WARN,
			 "%s listener: accept: %s; accepting again in %u ms",
			 g->what, strerror(err), g->pause_ms);
	if (g->pause_ms < PAUSE_MAX_MS)
		g->pause_ms = g->pause_ms * 2 < PAUSE_MAX_MS ? g->pause_ms * 2
							     : PAUSE_MAX_MS;
}

struct xfer_listen_guard *xfer_listen_guard_new(struct evconnlistener *lev,
						const char *what)
{
	struct xfer_listen_guard *g = calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	g->timer = evtimer_new(evconnlistener_get_base(lev), on_resume, g);
	if (!g->timer) {
		free(g);
		errno = ENOMEM;
		return NULL;
	}
	g->lev = lev;
	g->pause_ms = PAUSE_MIN_MS;
	snprintf(g->what, sizeof(g->what), "%s", what);
	pthread_mutex_lock(&guards_lock);
	LIST_INSERT_HEAD(&guards, g, link);
	pthread_mutex_unlock(&guards_lock);
	evconnlistener_set_error_cb(lev, on_error);
	return g;
}

void xfer_listen_guard_accepted(struct xfer_listen_guard *g)
{
	g->pause_ms = PAUSE_MIN_MS;
}

void xfer_listen_guard_free(struct xfer_listen_guard *g)
{
	if (!g)
		return;
	evconnlistener_set_error_cb(g->lev, NULL);
	pthread_mutex_lock(&guards_lock);
	LIST_REMOVE(g, link);
	pthread_mutex_unlock(&guards_lock);
	event_free(g->timer);
	free(g);
}

/* ---- the engine's listeners ---- */

struct xfer_listener {
	struct evconnlistener *lev;
	struct xfer_listen_guard *guard;
	void (*accept)(void *arg, int fd);
	void *arg;
};

static void on_accept(struct evconnlistener *lev, evutil_socket_t fd,
		      struct sockaddr *sa, int salen, void *arg)
{
	struct xfer_listener *l = arg;

	(void)lev;
	(void)sa;
	(void)salen;
	xfer_listen_guard_accepted(l->guard);
	l->accept(l->arg, fd);
}

struct xfer_listener *xfer_listen(struct event_base *base,
				  const struct sockaddr *sa, socklen_t salen,
				  const char *what,
				  void (*accept)(void *arg, int fd),
				  void *arg)
{
	struct xfer_listener *l = calloc(1, sizeof(*l));
	int err;

	if (!l)
		return NULL;
	l->accept = accept;
	l->arg = arg;
	l->lev = evconnlistener_new_bind(base, on_accept, l,
					 LEV_OPT_CLOSE_ON_FREE |
					 LEV_OPT_CLOSE_ON_EXEC |
					 LEV_OPT_REUSEABLE, SOMAXCONN, sa,
					 (int)salen);
	if (!l->lev) {
		err = errno ? errno : EADDRINUSE;
		free(l);
		errno = err;
		return NULL;
	}
	l->guard = xfer_listen_guard_new(l->lev, what);
	if (!l->guard) {
		evconnlistener_free(l->lev);
		free(l);
		errno = ENOMEM;
		return NULL;
	}
	return l;
}

int xfer_listener_fd(const struct xfer_listener *l)
{
	return evconnlistener_get_fd(l->lev);
}

void xfer_listener_free(struct xfer_listener *l)
{
	if (!l)
		return;
	xfer_listen_guard_free(l->guard);
	evconnlistener_free(l->lev);
	free(l);
}
