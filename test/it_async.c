/*
 * Never block the application's loop. A plugin engine with no worker
 * lives on the test's event_base, and a 1 ms timer on that base records
 * the largest gap between its ticks while the engines open a segment whose
 * peer answers its handshake 2 s late, register and unregister buffers
 * against a metadata server that stalls every answer for 2 s, move data
 * and send a notification: the gap stays far under the stall (250 ms).
 * The blocking forms refuse at once on the base's thread, also as the
 * very first engine call there, and work from another thread.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>
#include <xfer/event.h>

#include "test/helpers.h"
#include "test/th_async.h"

#define LEN (1u << 20)
#define STALL_MS 2000
/* Any wait on the network would cost a stall (2 s); the margin is for a
 * loaded machine's scheduling (gaps here are 3-8 ms when quiet). */
#define GAP_MAX_MS 250

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The test's loop, its 1 ms tick, and what the callbacks saw. */
struct app {
	struct event_base *base;
	struct event *tick;
	int64_t last_us, max_gap_us;
	struct xfer_engine *a, *b;   /* p2p; on the stalling HTTP store */
	struct th_fake_hs fake;      /* a's late peer */
	struct th_slow_http http;    /* b's store */
	struct xfer_engine *t;       /* the target, a threaded engine */
	uint8_t *tbuf, *abuf, *bbuf;
	int64_t late_seg, t_seg;
	int pending;                 /* callbacks still to come */
	int errors;
	atomic_int notes;            /* notifications t received */
};

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct app *a = arg;
	int64_t now = now_us();

	(void)fd;
	(void)what;
	if (a->last_us && now - a->last_us > a->max_gap_us)
		a->max_gap_us = now - a->last_us;
	a->last_us = now;
}

static void one_done(struct app *a, int err)
{
	if (err)
		a->errors++;
	if (--a->pending == 0)
		event_base_loopbreak(a->base);
}

static void t_note(struct xfer_engine *e, const char *name, const char *msg,
		   void *arg)
{
	struct app *a = arg;

	(void)e;
	if (!strcmp(name, "async") && !strcmp(msg, "landed"))
		atomic_fetch_add(&a->notes, 1);
}

/* A base whose timers use the precise clock: libevent's default one moves
 * in steps of a few ms, which would hide gaps smaller than that. */
static struct event_base *precise_base(void)
{
	struct event_config *c = event_config_new();
	struct event_base *base;

	assert_non_null(c);
	assert_int_equal(event_config_set_flag(c,
					       EVENT_BASE_FLAG_PRECISE_TIMER), 0);
	base = event_base_new_with_config(c);
	event_config_free(c);
	assert_non_null(base);
	return base;
}

static struct xfer_engine *plugin(struct event_base *base, const char *meta)
{
	struct xfer_config *cfg = th_config();
	struct xfer_engine *e;

	th_set(cfg, "bind_addr", "127.0.0.1");
	th_set(cfg, "workers", "0");
	if (meta) {
		th_set(cfg, "metadata_server", meta);
		th_set(cfg, "local_server_name", "async-b");
	} else {
		th_set(cfg, "local_server_name", "127.0.0.1");
	}
	e = xfer_engine_new_on_base(base, cfg);
	xfer_config_free(cfg);
	assert_non_null(e);
	return e;
}

static int setup(void **state)
{
	struct app *a = calloc(1, sizeof(*a));
	char url[64];

	assert_non_null(a);
	a->t = th_engine(1);
	a->tbuf = th_alloc(LEN);
	a->abuf = th_alloc(LEN);
	a->bbuf = th_alloc(LEN);
	assert_int_equal(xfer_register(a->t, a->tbuf, LEN, "cpu:0", true), 0);
	assert_int_equal(xfer_engine_set_notify_cb(a->t, t_note, a), 0);
	/* the late peer hands out the target's descriptor */
	th_fake_hs_start(&a->fake, th_desc_json(xfer_engine_rpc_port(a->t), 0),
			 STALL_MS);
	th_slow_http_start(&a->http, STALL_MS);
	a->base = precise_base();
	a->a = plugin(a->base, NULL);
	assert_int_equal(xfer_register(a->a, a->abuf, LEN, "cpu:0", false), 0);
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/metadata",
		 a->http.s.port);
	a->b = plugin(a->base, url); /* publishes once the base runs */
	a->tick = event_new(a->base, -1, EV_PERSIST, on_tick, a);
	assert_int_equal(event_add(a->tick, &(struct timeval){ 0, 1000 }), 0);
	*state = a;
	return 0;
}

static int teardown(void **state)
{
	struct app *a = *state;

	event_free(a->tick);
	atomic_store(&a->http.s.delay_ms, 0); /* b withdraws its keys */
	assert_int_equal(xfer_unregister(a->a, a->abuf), 0);
	xfer_engine_free(a->a);
	xfer_engine_free(a->b);
	event_base_free(a->base);
	th_slow_http_stop(&a->http);
	th_fake_hs_stop(&a->fake);
	free((char *)a->fake.reply);
	assert_int_equal(th_unregister(a->t, a->tbuf), 0);
	xfer_engine_free(a->t);
	free(a->tbuf);
	free(a->abuf);
	free(a->bbuf);
	free(a);
	return 0;
}

/* Dispatch until every awaited callback came; fails after @p ms. */
static void run_until_done(struct app *a, int ms)
{
	int64_t t0 = th_now_ms();

	/* the 1 ms tick keeps each round short */
	while (a->pending > 0 && th_now_ms() - t0 < ms)
		event_base_loop(a->base, EVLOOP_ONCE);
	if (a->pending)
		fail_msg("%d callbacks did not come within %d ms", a->pending,
			 ms);
	assert_int_equal(a->errors, 0);
}

static void on_done(struct xfer_engine *e, int result, void *arg)
{
	(void)e;
	one_done(arg, result);
}

static void on_batch(struct xfer_batch *b, enum xfer_status st, void *arg)
{
	struct app *a = arg;

	th_assert_status(st, XFER_COMPLETED);
	xfer_batch_free(b);
	/* the data is there: tell the target, then wait for its ack */
	assert_int_equal(xfer_notify_async(a->a, a->t_seg, "async", "landed",
					   on_done, a), 0);
	one_done(a, 0);
}

/* Write to the late peer's segment (the target's memory), read it back. */
static void move_data(struct app *a)
{
	struct xfer_batch *b = xfer_batch_new(a->a, 2);
	struct xfer_request r[2] = {
		{ XFER_WRITE, a->abuf, a->late_seg, (uintptr_t)a->tbuf,
		  LEN / 2 },
		{ XFER_READ, a->abuf + LEN / 2, a->late_seg,
		  (uintptr_t)a->tbuf + LEN / 2, LEN / 2 },
	};

	assert_non_null(b);
	assert_int_equal(xfer_batch_set_callback(b, on_batch, a), 0);
	assert_int_equal(xfer_batch_submit(b, r, 2), 0);
}

static void on_open(struct xfer_engine *e, int64_t id, void *arg)
{
	struct app *a = arg;

	(void)e;
	if (a->late_seg == -2)
		a->late_seg = id;
	else
		a->t_seg = id;
	one_done(a, id < 0 ? (int)id : 0);
}

static void test_loop_never_stalls(void **state)
{
	struct app *a = *state;
	char late[32];
	int64_t t0;

	th_fill(a->abuf, LEN / 2, 7);
	th_fill(a->tbuf + LEN / 2, LEN / 2, 8);
	snprintf(late, sizeof(late), "127.0.0.1:%u", a->fake.s.port);

	/* the late peer's open (2 s), a register (2 s), the target's open */
	a->late_seg = -2;
	a->t_seg = -1;
	a->pending = 1;
	t0 = th_now_ms();
	assert_int_equal(xfer_segment_open_async(a->a, late, on_open, a), 0);
	assert_int_equal(xfer_register_async(a->b, a->bbuf, LEN, "cpu:0", true,
					     on_done, a), 0);
	a->pending++;
	run_until_done(a, 5000);
	assert_true(a->late_seg >= 0);
	assert_true(th_now_ms() - t0 >= STALL_MS - 50);
	a->pending = 1;
	assert_int_equal(xfer_segment_open_async(a->a, xfer_engine_name(a->t),
						 on_open, a), 0);
	run_until_done(a, 5000);
	assert_true(a->t_seg >= 0);

	/* an unregister (2 s), a batch, then a notification */
	a->pending = 3;
	assert_int_equal(xfer_unregister_async(a->b, a->bbuf, on_done, a), 0);
	move_data(a);
	run_until_done(a, 5000);

	assert_int_equal(th_check(a->tbuf, LEN / 2, 7), -1);
	assert_int_equal(th_check(a->abuf + LEN / 2, LEN / 2, 8), -1);
	assert_true(th_wait_atomic(&a->notes, 1, 2000));
	assert_true(atomic_load(&a->http.s.served) >= 2);
	printf("largest loop gap: %.2f ms\n", a->max_gap_us / 1000.0);
	assert_true(a->max_gap_us < GAP_MAX_MS * 1000);
}

/* The blocking forms on the base's thread, as the very first engine call
 * made there: -EDEADLK at once; then the asynchronous form completes. */
struct first {
	struct app *a;
	struct xfer_engine *c;
	int64_t took_ms;
	int open_ret, reg_ret, notify_ret, refresh_ret;
};

static void first_call(evutil_socket_t fd, short what, void *arg)
{
	struct first *f = arg;
	int64_t t0 = th_now_ms();

	(void)fd;
	(void)what;
	f->open_ret = (int)xfer_segment_open(f->c, xfer_engine_name(f->a->t));
	f->reg_ret = xfer_register(f->a->b, f->a->bbuf, LEN, "cpu:0", true);
	f->notify_ret = xfer_notify(f->c, 0, "n", "m");
	f->refresh_ret = xfer_segment_refresh(f->c, 0);
	f->took_ms = th_now_ms() - t0;
	f->a->pending = 1;
	assert_int_equal(xfer_segment_open_async(f->c, xfer_engine_name(f->a->t),
						 on_open, f->a), 0);
}

static void test_blocking_on_base_refused(void **state)
{
	struct app *a = *state;
	struct first f = { .a = a };
	struct event *ev;

	f.c = plugin(a->base, NULL);
	ev = evtimer_new(a->base, first_call, &f);
	assert_int_equal(event_add(ev, &(struct timeval){ 0, 0 }), 0);
	a->late_seg = -1; /* the open's id goes to t_seg */
	a->pending = 1;
	run_until_done(a, 5000);
	assert_int_equal(f.open_ret, -EDEADLK);
	assert_int_equal(f.reg_ret, -EDEADLK);
	assert_int_equal(f.notify_ret, -EDEADLK);
	assert_int_equal(f.refresh_ret, -EDEADLK);
	assert_true(f.took_ms < 50);
	assert_true(a->t_seg >= 0);
	/* nothing was registered by the refused call; the store answers its
	 * requests one after the other, 2 s each */
	assert_int_equal(xfer_register_async(a->b, a->bbuf, LEN, "cpu:0", true,
					     on_done, a), 0);
	a->pending = 1;
	run_until_done(a, 5 * STALL_MS);
	event_free(ev);
	xfer_engine_free(f.c);
}

/* The same calls in their blocking form from another thread, while the
 * base runs: they work, and the loop still never stalls. */
struct worker_arg {
	struct app *a;
	atomic_int done;
	int64_t seg;
	int reg, unreg, notify, refresh;
};

static void *worker(void *arg)
{
	struct worker_arg *w = arg;
	struct app *a = w->a;

	w->seg = xfer_segment_open(a->a, xfer_engine_name(a->t));
	w->reg = xfer_register(a->b, a->bbuf, LEN, "cpu:0", true);
	w->unreg = xfer_unregister(a->b, a->bbuf);
	w->notify = w->seg < 0 ? -1 :
		    xfer_notify(a->a, w->seg, "async", "landed");
	w->refresh = w->seg < 0 ? -1 : xfer_segment_refresh(a->a, w->seg);
	atomic_store(&w->done, 1);
	return NULL;
}

static void test_blocking_from_thread(void **state)
{
	struct app *a = *state;
	struct worker_arg w = { .a = a };
	int64_t t0 = th_now_ms();
	pthread_t th;

	atomic_store(&a->notes, 0);
	a->last_us = a->max_gap_us = 0;
	assert_int_equal(pthread_create(&th, NULL, worker, &w), 0);
	while (!atomic_load(&w.done) && th_now_ms() - t0 < 15000)
		event_base_loop(a->base, EVLOOP_ONCE);
	pthread_join(th, NULL);
	assert_true(w.seg >= 0);
	assert_int_equal(w.reg, 0);
	assert_int_equal(w.unreg, 0);
	assert_int_equal(w.notify, 0);
	assert_int_equal(w.refresh, 0);
	/* the register and unregister each waited for the stalling store */
	assert_true(th_now_ms() - t0 >= 2 * STALL_MS - 100);
	assert_true(th_wait_atomic(&a->notes, 1, 2000));
	printf("largest loop gap: %.2f ms\n", a->max_gap_us / 1000.0);
	assert_true(a->max_gap_us < GAP_MAX_MS * 1000);
}

/* Refresh: a buffer the target registers after the open is seen once the
 * descriptor is fetched again (p2p has no watch). Close: the id is gone
 * at once, the segment waits for the task in flight, then the callback. */
struct order {
	struct app *a;
	struct xfer_batch *b;
	int task_at_close;           /* the task's status then */
};

static void ordered_batch(struct xfer_batch *b, enum xfer_status st,
			  void *arg)
{
	(void)b;
	th_assert_status(st, XFER_COMPLETED);
	one_done(((struct order *)arg)->a, 0);
}

static void ordered_close(struct xfer_engine *e, int result, void *arg)
{
	struct order *o = arg;
	struct xfer_task_status st;

	(void)e;
	o->task_at_close = xfer_batch_status(o->b, 0, &st) ? -1
							   : (int)st.status;
	one_done(o->a, result);
}

static void test_refresh_and_close(void **state)
{
	struct app *a = *state;
	uint8_t *extra = th_alloc(LEN);
	struct order o = { .a = a };
	struct xfer_request r = { XFER_READ, a->abuf, 0, (uintptr_t)a->tbuf,
				  LEN };
	struct xfer_task_status st;
	struct xfer_batch *b, *late;
	uint64_t addr, len;

	a->late_seg = -1;
	a->pending = 1;
	assert_int_equal(xfer_segment_open_async(a->a, xfer_engine_name(a->t),
						 on_open, a), 0);
	run_until_done(a, 5000);
	assert_int_equal(xfer_register(a->t, extra, LEN, "cpu:0", true), 0);
	assert_int_equal(xfer_segment_buffer(a->a, a->t_seg, 1, &addr, &len,
					     NULL), -ENOENT);
	a->pending = 1;
	assert_int_equal(xfer_segment_refresh_async(a->a, a->t_seg, on_done,
						    a), 0);
	run_until_done(a, 5000);
	assert_int_equal(xfer_segment_buffer(a->a, a->t_seg, 1, &addr, &len,
					     NULL), 0);
	assert_int_equal(len, LEN);

	r.target_id = a->t_seg;
	b = o.b = xfer_batch_new(a->a, 1);
	assert_non_null(b);
	assert_int_equal(xfer_batch_set_callback(b, ordered_batch, &o), 0);
	assert_int_equal(xfer_batch_submit(b, &r, 1), 0);
	assert_int_equal(xfer_segment_close_async(a->a, a->t_seg,
						  ordered_close, &o), 0);
	/* the id is unknown from now on */
	late = xfer_batch_new(a->a, 1);
	assert_int_equal(xfer_batch_submit(late, &r, 1), 0);
	assert_int_equal(xfer_batch_status(late, 0, &st), 0);
	th_assert_status(st.status, XFER_INVALID);
	assert_int_equal(xfer_batch_free(late), 0);
	assert_int_equal(xfer_segment_close_async(a->a, a->t_seg,
						  ordered_close, &o), -ENOENT);
	a->pending = 2;
	run_until_done(a, 5000);
	th_assert_status(o.task_at_close, XFER_COMPLETED);
	assert_int_equal(xfer_batch_free(b), 0);
	assert_int_equal(th_unregister(a->t, extra), 0);
	free(extra);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_loop_never_stalls, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_blocking_on_base_refused,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_blocking_from_thread, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_refresh_and_close, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
