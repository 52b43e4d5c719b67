/*
 * RDMA tier, one guest (rdmavm --topo lo): this process and a forked
 * target process talk RDMA over rxe0; every byte is checked. And the
 * engine's CPU: nothing when idle, its RDMA worker's when busy.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "test/helpers.h"
#include "test/rdma/rt.h"

#define TARGET_LEN (8u << 20)
#define LOCAL_LEN (8u << 20)

static struct rt_targets tg;
static struct xfer_engine *eng;
static int64_t seg;
static uint8_t *local, *back;

static int setup(void **state)
{
	(void)state;
	rt_targets_start(&tg, 1, "127.0.0.1", TARGET_LEN);
	eng = rt_engine("127.0.0.1", 0, 0);
	local = th_alloc(LOCAL_LEN);
	back = th_alloc(LOCAL_LEN);
	assert_int_equal(xfer_register(eng, local, LOCAL_LEN, "cpu:0", true), 0);
	assert_int_equal(xfer_register(eng, back, LOCAL_LEN, "cpu:0", false), 0);
	seg = xfer_segment_open(eng, tg.name[0]);
	assert_true(seg >= 0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	xfer_engine_free(eng);
	free(local);
	free(back);
	assert_int_equal(rt_targets_stop(&tg), 0);
	return 0;
}

/* READ of the target's pattern, and WRITE of a new one read back. */
static void test_sizes(void **state)
{
	static const size_t sizes[] = { 1, 4096, 65537, 4u << 20 };
	uint8_t *want = th_alloc(TARGET_LEN);

	(void)state;
	th_fill(want, TARGET_LEN, 1);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		uint64_t off = 4096 * i + i; /* unaligned remote offsets too */

		memset(local, 0, n);
		th_assert_status(th_xfer1(eng, XFER_READ, local, seg,
					  tg.addr[0] + off, n, NULL),
				 XFER_COMPLETED);
		assert_memory_equal(local, want + off, n);

		th_fill(local, n, 100 + i);
		th_assert_status(th_xfer1(eng, XFER_WRITE, local, seg,
					  tg.addr[0] + off, n, NULL),
				 XFER_COMPLETED);
		memset(back, 0, n);
		th_assert_status(th_xfer1(eng, XFER_READ, back, seg,
					  tg.addr[0] + off, n, NULL),
				 XFER_COMPLETED);
		assert_int_equal(th_check(back, n, 100 + i), -1);
		memcpy(want + off, local, n);
	}
	free(want);
}

/* 1000 WRITEs of 4 KiB in one batch, one callback, then read back. */
static void test_batch_1000(void **state)
{
	struct xfer_request r[1000];
	struct th_cbrec rec = { 0 };
	struct xfer_batch *b = xfer_batch_new(eng, 1000);
	struct xfer_task_status st;

	(void)state;
	th_fill(local, 1000 * 4096, 7);
	for (int i = 0; i < 1000; i++)
		r[i] = (struct xfer_request){ XFER_WRITE, local + i * 4096, seg,
					      tg.addr[0] + (uint64_t)i * 4096,
					      4096 };
	assert_int_equal(xfer_batch_set_callback(b, th_count_cb, &rec), 0);
	assert_int_equal(xfer_batch_submit(b, r, 1000), 0);
	assert_int_equal(xfer_batch_wait(b, 60000), 0);
	th_expect_callbacks(&rec, 1);
	th_assert_status(atomic_load(&rec.outcome), XFER_COMPLETED);
	for (size_t i = 0; i < 1000; i++) {
		assert_int_equal(xfer_batch_status(b, i, &st), 0);
		th_assert_status(st.status, XFER_COMPLETED);
		assert_int_equal(st.transferred, 4096);
	}
	assert_int_equal(xfer_batch_free(b), 0);
	th_assert_status(th_xfer1(eng, XFER_READ, back, seg, tg.addr[0],
				  1000 * 4096, NULL), XFER_COMPLETED);
	assert_int_equal(th_check(back, 1000 * 4096, 7), -1);
}

/* Bad requests are INVALID; the good ones beside them complete. */
static void test_invalid(void **state)
{
	uint8_t stack[64];
	struct xfer_request r[] = {
		{ XFER_READ, local, seg, tg.addr[0], 65536 },
		{ XFER_READ, local, seg, tg.addr[0], 0 },
		{ XFER_READ, stack, seg, tg.addr[0], sizeof(stack) },
		{ XFER_WRITE, local, seg, tg.addr[0] + TARGET_LEN - 10, 4096 },
		{ XFER_READ, local, 999, tg.addr[0], 16 },
		{ XFER_WRITE, local + 65536, seg, tg.addr[0] + 65536, 65536 },
	};
	static const enum xfer_status want[] = {
		XFER_COMPLETED, XFER_INVALID, XFER_INVALID, XFER_INVALID,
		XFER_INVALID, XFER_COMPLETED,
	};
	struct xfer_batch *b = xfer_batch_new(eng, 6);
	struct xfer_task_status st;

	(void)state;
	assert_int_equal(xfer_batch_submit(b, r, 6), 0);
	assert_int_equal(xfer_batch_wait(b, 30000), 0);
	for (size_t i = 0; i < 6; i++) {
		assert_int_equal(xfer_batch_status(b, i, &st), 0);
		th_assert_status(st.status, want[i]);
	}
	assert_int_equal(xfer_batch_free(b), 0);
}

/* Connected and idle, neither side burns CPU: nothing polls. Once the
 * last completion's tick has passed, the initiator's threads (control,
 * RDMA worker) do not wake at all: no timer runs while nothing is out. */
static void test_idle_cpu(void **state)
{
	unsigned long long runs;
	double mine, theirs;

	(void)state;
	th_assert_status(th_xfer1(eng, XFER_READ, local, seg, tg.addr[0],
				  65536, NULL), XFER_COMPLETED);
	sleep(1);
	runs = th_threads_runs("xfer");
	mine = xfer_engine_cpu_seconds(eng);
	theirs = rt_proc_cpu(tg.pid);
	sleep(10);
	mine = xfer_engine_cpu_seconds(eng) - mine;
	theirs = rt_proc_cpu(tg.pid) - theirs;
	runs = th_threads_runs("xfer") - runs;
	printf("idle 10 s: initiator %.3f s, target %.3f s of CPU; the "
	       "initiator's threads woke %llu times\n", mine, theirs, runs);
	assert_true(mine < 0.1);
	assert_true(theirs < 0.1);
	assert_int_equal(runs, 0);
}

/* The engine's CPU figure holds its RDMA worker, which posts every WR and
 * takes every completion (and, on Soft-RoCE, runs the device's protocol
 * inside those calls): after 64 MiB each way the figure has grown by what
 * all the engine's threads used, each measured apart (schedstat). */
static void test_cpu_counted(void **state)
{
	double e0, all0, w0, e1, all1, w1;

	(void)state;
	e0 = xfer_engine_cpu_seconds(eng);
	all0 = th_threads_cpu(NULL);
	w0 = th_threads_cpu("xfer-rxe0");
	for (int i = 0; i < 8; i++) {
		th_assert_status(th_xfer1(eng, XFER_WRITE, local, seg,
					  tg.addr[0], LOCAL_LEN, NULL),
				 XFER_COMPLETED);
		th_assert_status(th_xfer1(eng, XFER_READ, back, seg,
					  tg.addr[0], LOCAL_LEN, NULL),
				 XFER_COMPLETED);
	}
	e1 = xfer_engine_cpu_seconds(eng);
	all1 = th_threads_cpu(NULL);
	w1 = th_threads_cpu("xfer-rxe0");
	printf("64 MiB each way: RDMA worker %.3f s, all engine threads "
	       "%.3f s, engine figure %.3f s\n", w1 - w0, all1 - all0,
	       e1 - e0);
	assert_true(w1 - w0 > 0.05);
	assert_true(e1 - e0 >= 0.9 * (all1 - all0));
	assert_true(e1 - e0 - ((all1 - all0) - (w1 - w0)) >= 0.8 * (w1 - w0));
}

/* RC QPs of this process, from `rdma resource show qp` (its "pid" is the
 * thread that made the QP, so any thread of ours counts). */
static int own_qps(void)
{
	char line[512], task[64];
	const char *p;
	int n = 0, tid;
	FILE *f = popen("rdma resource show qp 2>/dev/null", "r");

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		p = strstr(line, " pid ");
		if (!p || !strstr(line, "type RC") || sscanf(p, " pid %d", &tid) != 1)
			continue;
		snprintf(task, sizeof(task), "/proc/self/task/%d", tid);
		n += access(task, F_OK) == 0;
	}
	pclose(f);
	return n;
}

/* Ten peers through a pool of two endpoints: evicted endpoints go, new
 * ones connect, data stays right. */
static void test_pool_churn(void **state)
{
	struct rt_targets ten;
	struct xfer_engine *small;
	int64_t ids[10];
	uint8_t *buf = th_alloc(2 * 65536);
	int qps;

	(void)state;
	rt_targets_start(&ten, 10, "127.0.0.1", 1u << 20);
	small = rt_engine("127.0.0.1", 0, 2);
	assert_int_equal(xfer_register(small, buf, 2 * 65536, "cpu:0", true), 0);
	for (int i = 0; i < 10; i++) {
		ids[i] = xfer_segment_open(small, ten.name[i]);
		assert_true(ids[i] >= 0);
	}
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < 10; i++) {
			uint64_t seed = 1000 + 10 * round + i;

			th_fill(buf, 65536, seed);
			th_assert_status(th_xfer1(small, XFER_WRITE, buf, ids[i],
						  ten.addr[i], 65536, NULL),
					 XFER_COMPLETED);
			memset(buf + 65536, 0, 65536);
			th_assert_status(th_xfer1(small, XFER_READ, buf + 65536,
						  ids[i], ten.addr[i], 65536, NULL),
					 XFER_COMPLETED);
			assert_int_equal(th_check(buf + 65536, 65536, seed), -1);
			/* at most 2 endpoints of 2 QPs, plus the main
			 * engine's one endpoint */
			qps = own_qps();
			if (qps < 2 || qps > 2 * 2 + 2)
				fail_msg("%d QPs after peer %d", qps, i);
		}
	xfer_engine_free(small);
	free(buf);
	assert_int_equal(rt_targets_stop(&ten), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_batch_1000),
		cmocka_unit_test(test_invalid),
		cmocka_unit_test(test_idle_cpu),
		cmocka_unit_test(test_cpu_counted),
		cmocka_unit_test(test_pool_churn),
	};

	return cmocka_run_group_tests_name("rdma lo", tests, setup, teardown);
}
