/*
 * Plugin mode: the engine lives on the application's event_base. With
 * workers = 0 it starts no thread, callbacks run on the thread that
 * dispatches the base, and the engine never frees the base.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <xfer/event.h>

#include "test/helpers.h"

#define BUF_LEN (4u << 20)
#define TIMEOUT_S 10

static pthread_t main_thread;

struct plugin_cb {
	struct event_base *base;
	atomic_int *done;          /* shared by the batches of one run */
	int want;                  /* loopbreak when *done reaches it */
	atomic_int calls;
	atomic_int outcome;
	atomic_bool on_main;
	bool free_in_cb;
	atomic_int free_ret;
};

static void batch_cb(struct xfer_batch *b, enum xfer_status outcome, void *arg)
{
	struct plugin_cb *c = arg;

	atomic_store(&c->on_main, pthread_equal(pthread_self(), main_thread));
	atomic_store(&c->outcome, (int)outcome);
	atomic_fetch_add(&c->calls, 1);
	if (c->free_in_cb)
		atomic_store(&c->free_ret, xfer_batch_free(b));
	if (atomic_fetch_add(c->done, 1) + 1 == c->want)
		event_base_loopbreak(c->base);
}

struct timer_arg {
	struct event_base *base;
	atomic_bool fired;
};

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct timer_arg *t = arg;

	(void)fd;
	(void)what;
	atomic_store(&t->fired, true);
	event_base_loopbreak(t->base);
}

static struct xfer_engine *plugin_engine(struct event_base *base, int workers)
{
	struct xfer_config *cfg = th_config();
	struct xfer_engine *e;

	th_set(cfg, "bind_addr", "127.0.0.1");
	th_set(cfg, "local_server_name", "127.0.0.1");
	th_set(cfg, "rpc_port", "0");
	th_set_num(cfg, "workers", workers);
	e = xfer_engine_new_on_base(base, cfg);
	xfer_config_free(cfg);
	if (!e)
		fail_msg("xfer_engine_new_on_base: errno %d", errno);
	return e;
}

/* Dispatch @base until a callback breaks the loop; fails after 10 s. */
static void dispatch_bounded(struct event_base *base)
{
	struct timer_arg ta = { .base = base };
	struct timeval tv = { TIMEOUT_S, 0 };
	struct event *timer = evtimer_new(base, timer_cb, &ta);

	assert_non_null(timer);
	assert_int_equal(evtimer_add(timer, &tv), 0);
	assert_true(event_base_dispatch(base) >= 0);
	event_free(timer);
	if (atomic_load(&ta.fired))
		fail_msg("the callbacks did not come within %d s", TIMEOUT_S);
}

/* Run the base for @ms more, to see that no callback comes again. */
static void dispatch_for_ms(struct event_base *base, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	assert_int_equal(event_base_loopexit(base, &tv), 0);
	assert_true(event_base_dispatch(base) >= 0);
}

struct open_res {
	struct event_base *base;
	int64_t id;
	bool done;
};

static void opened(struct xfer_engine *e, int64_t id, void *arg)
{
	struct open_res *r = arg;

	(void)e;
	r->id = id;
	r->done = true;
	event_base_loopbreak(r->base);
}

/*
 * Open @p name from the base's own thread: the blocking form refuses at
 * once, the asynchronous one completes while the base is dispatched.
 */
static int64_t open_on_base(struct xfer_engine *p, struct event_base *base,
			    const char *name)
{
	struct open_res r = { .base = base };
	int64_t t0 = th_now_ms();

	assert_int_equal(xfer_segment_open(p, name), -EDEADLK);
	assert_true(th_now_ms() - t0 < 100);
	assert_int_equal(xfer_segment_open_async(p, name, opened, &r), 0);
	assert_false(r.done); /* never inside the call */
	dispatch_bounded(base);
	assert_true(r.done);
	return r.id;
}

/*
 * The initiator is a plugin engine with @workers workers; a WRITE batch and
 * a READ batch are submitted before the base runs and complete while the
 * application dispatches it. @return the thread count change the plugin
 * engine caused.
 */
static int run_initiator(int workers)
{
	enum { LOFF = 4099, ROFF = 8197 };
	const size_t w_len[2] = { 1, (256u << 10) + 3 };
	const size_t r_len[2] = { (64u << 10) + 1, 1u << 20 };
	const size_t w_src[2] = { LOFF, LOFF + 4096 };
	const size_t w_dst[2] = { ROFF, ROFF + 4096 };
	const size_t r_src[2] = { ROFF + (2u << 20), ROFF + (2u << 20) + 65536 + 7 };
	const size_t r_dst[2] = { LOFF + (2u << 20), LOFF + (2u << 20) + 65536 + 7 };
	struct xfer_engine *t = th_engine(1), *p;
	uint8_t *tbuf = th_alloc(BUF_LEN), *pbuf = th_alloc(BUF_LEN);
	struct event_base *base;
	struct xfer_request wr[2], rd[2];
	struct xfer_batch *wb, *rb;
	atomic_int done = 0;
	struct plugin_cb wc = { 0 }, rc = { 0 };
	struct xfer_task_status st;
	int64_t seg;
	uint64_t raddr;
	int n0, n1;

	memset(tbuf, 0, BUF_LEN);
	memset(pbuf, 0, BUF_LEN);
	assert_int_equal(xfer_register(t, tbuf, BUF_LEN, "cpu:0", true), 0);
	base = event_base_new();
	assert_non_null(base);

	n0 = th_count_threads();
	assert_true(n0 > 0);
	p = plugin_engine(base, workers);
	n1 = th_count_threads();

	assert_int_equal(xfer_register(p, pbuf, BUF_LEN, "cpu:0", true), 0);
	seg = open_on_base(p, base, xfer_engine_name(t));
	assert_true(seg >= 0);
	raddr = (uintptr_t)tbuf;
	assert_int_equal(th_segment_find(p, seg, raddr), BUF_LEN);

	for (int k = 0; k < 2; k++) {
		th_fill(pbuf + w_src[k], w_len[k], 30 + k);
		th_fill(tbuf + r_src[k], r_len[k], 40 + k);
		wr[k] = (struct xfer_request){ XFER_WRITE, pbuf + w_src[k], seg,
					       raddr + w_dst[k], w_len[k] };
		rd[k] = (struct xfer_request){ XFER_READ, pbuf + r_dst[k], seg,
					       raddr + r_src[k], r_len[k] };
	}
	wc = (struct plugin_cb){ .base = base, .done = &done, .want = 2 };
	rc = (struct plugin_cb){ .base = base, .done = &done, .want = 2,
				 .free_in_cb = true, .free_ret = 1 };
	wb = xfer_batch_new(p, 2);
	rb = xfer_batch_new(p, 2);
	assert_non_null(wb);
	assert_non_null(rb);
	assert_int_equal(xfer_batch_set_callback(wb, batch_cb, &wc), 0);
	assert_int_equal(xfer_batch_set_callback(rb, batch_cb, &rc), 0);
	assert_int_equal(xfer_batch_submit(wb, wr, 2), 0);
	assert_int_equal(xfer_batch_submit(rb, rd, 2), 0);
	/* callbacks run only on the base, which nobody dispatches yet */
	assert_int_equal(atomic_load(&wc.calls), 0);
	assert_int_equal(atomic_load(&rc.calls), 0);

	dispatch_bounded(base);
	assert_int_equal(atomic_load(&done), 2);
	dispatch_for_ms(base, 200);

	assert_int_equal(atomic_load(&wc.calls), 1);
	assert_int_equal(atomic_load(&rc.calls), 1);
	assert_true(atomic_load(&wc.on_main));
	assert_true(atomic_load(&rc.on_main));
	th_assert_status(atomic_load(&wc.outcome), XFER_COMPLETED);
	th_assert_status(atomic_load(&rc.outcome), XFER_COMPLETED);
	assert_int_equal(atomic_load(&rc.free_ret), 0); /* freed in its cb */
	for (int k = 0; k < 2; k++) {
		assert_int_equal(xfer_batch_status(wb, k, &st), 0);
		th_assert_status(st.status, XFER_COMPLETED);
		assert_int_equal(st.transferred, w_len[k]);
		assert_int_equal(th_check(tbuf + w_dst[k], w_len[k], 30 + k), -1);
		assert_int_equal(th_check(pbuf + r_dst[k], r_len[k], 40 + k), -1);
	}
	assert_int_equal(xfer_batch_free(wb), 0);
	/* the engine started no thread later either */
	assert_int_equal(th_count_threads(), n1);
	if (workers == 0) /* "0 when it started none" */
		assert_true(xfer_engine_cpu_seconds(p) == 0.0);

	assert_int_equal(xfer_segment_close(p, seg), 0);
	assert_int_equal(xfer_unregister(p, pbuf), 0);
	xfer_engine_free(p);
	/* the engine did not free the application's base */
	assert_non_null(event_base_get_method(base));
	event_base_free(base);
	assert_int_equal(th_wait_threads(n0, 2000), n0);

	assert_int_equal(th_unregister(t, tbuf), 0);
	xfer_engine_free(t);
	free(tbuf);
	free(pbuf);
	return n1 - n0;
}

static void test_plugin_no_thread(void **state)
{
	(void)state;
	assert_int_equal(run_initiator(0), 0);
}

static void test_plugin_one_worker(void **state)
{
	(void)state;
	/* one worker thread, no control thread: callbacks still on main */
	assert_int_equal(run_initiator(1), 1);
}

/* A peer opens the plugin engine and moves data to and from it while the
 * application dispatches the base (handshake and data on the base). */
struct peer_arg {
	struct xfer_engine *t, *p;
	uint8_t *tbuf, *pbuf;
	int wakefd;
	int result; /* 0 ok, else a line number */
};

/* th_xfer1 without cmocka asserts, for a thread other than the test's. */
static int xfer1_plain(struct xfer_engine *e, enum xfer_opcode op, void *src,
		       int64_t seg, uint64_t target, size_t len)
{
	struct xfer_request r = { op, src, seg, target, len };
	struct xfer_task_status st = { 0 };
	struct xfer_batch *b = xfer_batch_new(e, 1);

	if (!b)
		return -1;
	if (xfer_batch_submit(b, &r, 1) != 0 ||
	    xfer_batch_wait(b, 30000) != 0 ||
	    xfer_batch_status(b, 0, &st) != 0 ||
	    st.transferred != len) {
		xfer_batch_free(b);
		return -1;
	}
	if (xfer_batch_free(b) != 0)
		return -1;
	return (int)st.status;
}

#define PEER_CHECK(c) \
	do { if (!(c)) { a->result = __LINE__; goto out; } } while (0)

static void *peer_thread(void *arg)
{
	struct peer_arg *a = arg;
	int64_t seg;
	char one = 1;

	a->result = 0;
	seg = xfer_segment_open(a->t, xfer_engine_name(a->p));
	PEER_CHECK(seg >= 0);
	th_fill(a->tbuf, (64u << 10) + 1, 50);
	PEER_CHECK(xfer1_plain(a->t, XFER_WRITE, a->tbuf, seg,
			       (uintptr_t)a->pbuf + 3, (64u << 10) + 1) ==
		   XFER_COMPLETED);
	th_fill(a->pbuf + (1u << 20), (1u << 20) + 5, 51);
	PEER_CHECK(xfer1_plain(a->t, XFER_READ, a->tbuf + (1u << 20), seg,
			       (uintptr_t)a->pbuf + (1u << 20),
			       (1u << 20) + 5) == XFER_COMPLETED);
	PEER_CHECK(th_check(a->pbuf + 3, (64u << 10) + 1, 50) == -1);
	PEER_CHECK(th_check(a->tbuf + (1u << 20), (1u << 20) + 5, 51) == -1);
	PEER_CHECK(xfer_segment_close(a->t, seg) == 0);
out:
	if (write(a->wakefd, &one, 1) != 1)
		a->result = -1;
	return NULL;
}

static void wake_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	event_base_loopbreak(arg);
}

static void test_plugin_serves_peer(void **state)
{
	struct peer_arg a = { 0 };
	struct event_base *base = event_base_new();
	struct event *wake;
	pthread_t th;
	int pfd[2];

	(void)state;
	assert_non_null(base);
	assert_int_equal(pipe(pfd), 0);
	a.t = th_engine(1);
	a.p = plugin_engine(base, 0);
	a.tbuf = th_alloc(BUF_LEN);
	a.pbuf = th_alloc(BUF_LEN);
	a.wakefd = pfd[1];
	memset(a.pbuf, 0, BUF_LEN);
	assert_int_equal(xfer_register(a.t, a.tbuf, BUF_LEN, "cpu:0", true), 0);
	assert_int_equal(xfer_register(a.p, a.pbuf, BUF_LEN, "cpu:0", true), 0);
	wake = event_new(base, pfd[0], EV_READ, wake_cb, base);
	assert_non_null(wake);
	assert_int_equal(event_add(wake, NULL), 0);
	/* the peer's calls block; the base must run meanwhile */
	assert_int_equal(pthread_create(&th, NULL, peer_thread, &a), 0);
	dispatch_bounded(base);
	assert_int_equal(pthread_join(th, NULL), 0);
	if (a.result != 0)
		fail_msg("peer thread failed at line %d", a.result);

	event_free(wake);
	assert_int_equal(th_unregister(a.p, a.pbuf), 0);
	xfer_engine_free(a.p);
	assert_non_null(event_base_get_method(base));
	event_base_free(base);
	assert_int_equal(th_unregister(a.t, a.tbuf), 0);
	xfer_engine_free(a.t);
	close(pfd[0]);
	close(pfd[1]);
	free(a.tbuf);
	free(a.pbuf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plugin_no_thread),
		cmocka_unit_test(test_plugin_one_worker),
		cmocka_unit_test(test_plugin_serves_peer),
	};

	main_thread = pthread_self();
	return cmocka_run_group_tests_name("plugin", tests, NULL, NULL);
}
