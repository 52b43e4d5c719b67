/*
 * libevent_plugin: the engine as a guest on the application's event_base.
 *
 * The application owns and dispatches its base. The initiator engine is
 * created on it with workers = 0, so it starts no thread: its sockets,
 * timers and completion callbacks are all events of this base, and the
 * batch callback runs on main's thread. The target is an ordinary threaded
 * engine standing in for a remote peer. Nothing here blocks the loop: the
 * segment is opened with the asynchronous call, from inside the loop.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <event2/event.h>
#include <xfer/event.h>

#define LEN (256u << 10)
#define NREQ 4

struct app {
	struct event_base *base;
	struct xfer_engine *init;
	const char *peer;
	pthread_t main_thread;
	struct xfer_request reqs[NREQ];
	uint8_t *src, *dst;
	const char *failed; /* NULL once the read checked out */
};

static void fail(struct app *a, const char *why)
{
	fprintf(stderr, "libevent_plugin: %s: %s\n", why,
		xfer_engine_last_error(a->init));
	a->failed = why;
	event_base_loopbreak(a->base);
}

static void on_batch(struct xfer_batch *b, enum xfer_status outcome, void *arg)
{
	struct app *a = arg;

	if (!pthread_equal(pthread_self(), a->main_thread))
		a->failed = "callback ran off the application's thread";
	else if (outcome != XFER_COMPLETED)
		a->failed = xfer_status_str(outcome);
	else if (memcmp(a->dst, a->src, LEN))
		a->failed = "read returned other bytes";
	else
		a->failed = NULL;
	xfer_batch_free(b);
	event_base_loopbreak(a->base);
}

/* The peer's segment is open: read its first buffer in NREQ requests. */
static void on_open(struct xfer_engine *e, int64_t seg, void *arg)
{
	struct app *a = arg;
	struct xfer_batch *b;
	uint64_t addr, len;

	if (seg < 0 || xfer_segment_buffer(e, seg, 0, &addr, &len, NULL)) {
		fail(a, "open");
		return;
	}
	for (size_t i = 0; i < NREQ; i++)
		a->reqs[i] = (struct xfer_request){
			XFER_READ, a->dst + i * (LEN / NREQ), seg,
			addr + i * (LEN / NREQ), LEN / NREQ,
		};
	b = xfer_batch_new(e, NREQ);
	if (!b || xfer_batch_set_callback(b, on_batch, a) ||
	    xfer_batch_submit(b, a->reqs, NREQ))
		fail(a, "submit");
}

/* Starting from an event shows the engine needs no thread of its own. */
static void on_start(evutil_socket_t fd, short what, void *arg)
{
	struct app *a = arg;

	(void)fd, (void)what;
	/* the blocking form would wait for this very loop */
	if (xfer_segment_open(a->init, a->peer) != -EDEADLK ||
	    xfer_segment_open_async(a->init, a->peer, on_open, a))
		fail(a, "open");
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct app *a = arg;

	(void)fd, (void)what;
	a->failed = "no completion within 10 s";
	event_base_loopbreak(a->base);
}

int main(void)
{
	static uint8_t remote[LEN], local[LEN];
	struct app a = { .main_thread = pthread_self(), .src = remote,
			 .dst = local, .failed = "loop ended early" };
	struct timeval now = { 0, 0 }, limit = { 10, 0 };
	struct xfer_engine *target;
	struct xfer_config *cfg = xfer_config_new();
	struct event *start, *timeout;

	for (size_t i = 0; i < LEN; i++)
		remote[i] = (uint8_t)(i * 13 + 5);
	if (!cfg || xfer_config_set(cfg, "bind_addr", "127.0.0.1") ||
	    xfer_config_set(cfg, "rpc_port", "0")) {
		fprintf(stderr, "libevent_plugin: config: %s\n", strerror(errno));
		return 1;
	}
	target = xfer_engine_new(cfg);
	/* everything on our base, no engine thread */
	xfer_config_set(cfg, "workers", "0");
	a.base = event_base_new();
	a.init = a.base ? xfer_engine_new_on_base(a.base, cfg) : NULL;
	xfer_config_free(cfg);
	if (!target || !a.init) {
		fprintf(stderr, "libevent_plugin: engine: %s\n", strerror(errno));
		return 1;
	}
	if (xfer_register(target, remote, LEN, "cpu:0", true) ||
	    xfer_register(a.init, local, LEN, "cpu:0", false)) {
		/* One message at a time: each call reuses the thread's copy. */
		fprintf(stderr, "libevent_plugin: setup: target: %s\n",
			xfer_engine_last_error(target));
		fprintf(stderr, "libevent_plugin: setup: initiator: %s\n",
			xfer_engine_last_error(a.init));
		return 1;
	}
	a.peer = xfer_engine_name(target);

	start = evtimer_new(a.base, on_start, &a);
	timeout = evtimer_new(a.base, on_timeout, &a);
	evtimer_add(start, &now);
	evtimer_add(timeout, &limit);
	event_base_dispatch(a.base);

	event_free(start);
	event_free(timeout);
	xfer_engine_free(a.init); /* the engine's events leave the base first */
	event_base_free(a.base);
	xfer_engine_free(target);
	if (a.failed) {
		fprintf(stderr, "libevent_plugin: %s\n", a.failed);
		return 1;
	}
	puts("libevent_plugin: ok");
	return 0;
}
