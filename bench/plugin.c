/*
 * xfer-bench --plugin: the initiator engine as a guest on an event_base
 * the bench owns and dispatches, with no thread of its own (workers 0).
 * Nothing waits: the local buffer is registered and the target segment
 * opened with the asynchronous calls from inside the loop; each region
 * keeps one batch in flight, the next one submitted from the completion
 * callback of the one before; a timer ends the run, and the loop turns
 * until the batches in flight are back. A 1 ms persistent timer measures
 * how long the loop goes without turning.
 */
#include <stdlib.h>
#include <time.h>

#include <event2/event.h>

#include "bench/bench_internal.h"

#define TICK_US 1000

struct plugin;

/* The callback argument of a region's batches. */
struct slot {
	struct plugin *p;
	struct bench_worker *w;
};

struct plugin {
	const struct bench_opts *o;
	struct event_base *base;
	struct bench_initiator in;
	struct slot *slots;        /* --threads of them */
	struct event *tick, *stop;
	int setup_left;            /* register and open still to answer */
	int64_t seg;
	bool stopping;             /* --duration is over: submit no more */
	size_t in_flight;          /* regions not yet done */
	struct timespec last_tick;
	double *gaps_ms;           /* between consecutive ticks */
	size_t ngaps, cap;
};

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct plugin *p = arg;
	struct timespec now;

	(void)fd, (void)what;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (p->ngaps == p->cap) {
		p->cap = p->cap ? p->cap * 2 : 16384;
		p->gaps_ms = realloc(p->gaps_ms, p->cap * sizeof(*p->gaps_ms));
		if (!p->gaps_ms)
			die("out of memory for loop ticks");
	}
	p->gaps_ms[p->ngaps++] =
		(double)(now.tv_sec - p->last_tick.tv_sec) * 1e3 +
		(double)(now.tv_nsec - p->last_tick.tv_nsec) * 1e-6;
	p->last_tick = now;
}

static void on_batch(struct xfer_batch *b, enum xfer_status outcome,
		     void *arg);

/* The region's next batch, or, when it is done and it was the last one
 * in flight, the end of the loop. */
static void submit_next(struct slot *s)
{
	struct plugin *p = s->p;
	int op = bench_worker_next(s->w, p->stopping);

	if (op >= 0) {
		bench_batch_submit(s->w, (enum xfer_opcode)op, on_batch, s);
		return;
	}
	if (--p->in_flight == 0)
		event_base_loopbreak(p->base);
}

/* bench_batch_end() checks each task, so the outcome tells nothing more. */
static void on_batch(struct xfer_batch *b, enum xfer_status outcome,
		     void *arg)
{
	struct slot *s = arg;

	(void)outcome;
	bench_worker_done(s->w, bench_batch_end(s->w, b));
	submit_next(s);
}

static void on_stop(evutil_socket_t fd, short what, void *arg)
{
	struct plugin *p = arg;

	(void)fd, (void)what;
	p->stopping = true;
}

/* The buffer is registered and the segment open: start the timed run. */
static void begin(struct plugin *p)
{
	const struct bench_opts *o = p->o;
	struct timeval tick = { 0, TICK_US };
	struct timeval duration = {
		.tv_sec = (time_t)o->duration_s,
		.tv_usec = (suseconds_t)((o->duration_s -
					  (double)(time_t)o->duration_s) * 1e6),
	};

	bench_initiator_regions(o, &p->in, p->seg);
	for (size_t t = 0; t < o->threads; t++)
		p->slots[t] = (struct slot){ .p = p, .w = &p->in.w[t] };
	bench_initiator_start(&p->in);
	p->last_tick = p->in.start;
	/* timers count from the loop's cached time: not before the start */
	event_base_update_cache_time(p->base);
	if (event_add(p->tick, &tick) || event_add(p->stop, &duration))
		die("event_add failed");
	p->in_flight = o->threads;
	for (size_t t = 0; t < o->threads; t++)
		submit_next(&p->slots[t]);
}

static void setup_done(struct plugin *p)
{
	if (--p->setup_left == 0)
		begin(p);
}

/* As xfer_register(), a store that is away is no error here: the engine
 * publishes the buffer when it is back, and the target never needs it. */
static void on_registered(struct xfer_engine *e, int result, void *arg)
{
	(void)e, (void)result;
	setup_done(arg);
}

static void on_open(struct xfer_engine *e, int64_t seg, void *arg)
{
	struct plugin *p = arg;

	if (seg < 0)
		die_api(e, "xfer_segment_open_async", (int)seg);
	p->seg = seg;
	setup_done(p);
}

static void on_start(evutil_socket_t fd, short what, void *arg)
{
	struct plugin *p = arg;
	struct xfer_engine *e = p->in.e;
	int ret;

	(void)fd, (void)what;
	ret = xfer_register_async(e, p->in.local, p->o->buffer_size, "cpu:0",
				  true, on_registered, p);
	if (ret)
		die_api(e, "xfer_register_async", ret);
	ret = xfer_segment_open_async(e, p->in.seg_name, on_open, p);
	if (ret)
		die_api(e, "xfer_segment_open_async", ret);
}

/* A base whose clock is CLOCK_MONOTONIC: by default libevent reads the
 * coarse clock, which moves by the kernel's tick (4 ms at HZ=250), and a
 * 1 ms timer would fire at that tick's pace. */
static struct event_base *precise_base(void)
{
	struct event_config *cfg = event_config_new();
	struct event_base *base;

	if (!cfg || event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER))
		die("event_config failed");
	base = event_base_new_with_config(cfg);
	if (!base)
		die("event_base_new_with_config failed");
	event_config_free(cfg);
	return base;
}

void bench_run_plugin(const struct bench_opts *o)
{
	struct plugin p = { .o = o, .setup_left = 2 };
	struct bench_result r = { 0 };
	struct timeval now = { 0, 0 };

	p.base = precise_base();
	bench_initiator_new(o, &p.in, p.base);
	p.slots = xmalloc(o->threads * sizeof(*p.slots));
	p.tick = event_new(p.base, -1, EV_PERSIST, on_tick, &p);
	p.stop = evtimer_new(p.base, on_stop, &p);
	if (!p.tick || !p.stop ||
	    event_base_once(p.base, -1, EV_TIMEOUT, on_start, &p, &now))
		die("out of memory for events");

	if (event_base_dispatch(p.base) < 0)
		die("event_base_dispatch failed");
	if (!p.stopping || p.in_flight)
		die("the loop ended with batches in flight");
	event_free(p.tick);
	event_free(p.stop);

	bench_stalls(&r, p.gaps_ms, p.ngaps);
	bench_initiator_end(o, &p.in, &r); /* frees the engine first */
	event_base_free(p.base);
	free(p.gaps_ms);
	free(p.slots);
}
