/*
 * Integration: xfer_batch_set_callback_direct() — the callback runs on the
 * thread that ends the round (a worker here, or the submitter when every
 * request fails at submit), once per round, and the batch cannot be freed
 * while it runs.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <xfer/xfer.h>

#include "test/helpers.h"

#define LEN (1u << 20)
#define ROUNDS 50

struct rec {
	atomic_int calls;
	atomic_int outcome;
	char thread[16];        /* name of the thread of the last call */
	pthread_t tid;
	int free_ret;           /* xfer_batch_free() from inside */
	bool try_free;
};

static void direct_cb(struct xfer_batch *b, enum xfer_status outcome,
		      void *arg)
{
	struct rec *r = arg;

	pthread_getname_np(pthread_self(), r->thread, sizeof(r->thread));
	r->tid = pthread_self();
	if (r->try_free)
		r->free_ret = xfer_batch_free(b);
	atomic_store(&r->outcome, outcome);
	atomic_fetch_add(&r->calls, 1);
}

/* A fresh batch of one each round, freed once its callback returned. */
static struct xfer_batch *direct_batch(struct xfer_engine *e, struct rec *r)
{
	struct xfer_batch *b = xfer_batch_new(e, 1);

	assert_non_null(b);
	assert_int_equal(xfer_batch_set_callback_direct(b, direct_cb, r), 0);
	return b;
}

static void free_after(struct xfer_batch *b)
{
	int ret;

	while ((ret = xfer_batch_free(b)) == -EBUSY)
		sched_yield();
	assert_int_equal(ret, 0);
}

static void test_direct(void **state)
{
	struct xfer_engine *a = th_engine(1), *t = th_engine(1);
	uint8_t *src = th_alloc(LEN), *dst = th_alloc(LEN);
	struct rec r = { .try_free = true };
	struct xfer_request req;
	struct xfer_batch *b;
	int64_t seg;
	int workers = 0;

	(void)state;
	assert_int_equal(xfer_register(a, src, LEN, "cpu:0", true), 0);
	assert_int_equal(xfer_register(t, dst, LEN, "cpu:0", true), 0);
	seg = xfer_segment_open(a, xfer_engine_name(t));
	assert_true(seg >= 0);
	req = (struct xfer_request){ .opcode = XFER_WRITE, .source = src,
		.target_id = seg, .target_offset = (uintptr_t)dst,
		.length = LEN };
	for (int i = 0; i < ROUNDS; i++) {
		b = direct_batch(a, &r);
		th_fill(src, LEN, i);
		assert_int_equal(xfer_batch_submit(b, &req, 1), 0);
		assert_true(th_wait_atomic(&r.calls, i + 1, 10000));
		assert_int_equal(atomic_load(&r.outcome), XFER_COMPLETED);
		assert_int_equal(th_check(dst, LEN, i), -1);
		/* where the round ended: the worker that took the last reply,
		 * or this thread when that came before the submit's end; never
		 * by way of the control thread */
		if (strncmp(r.thread, "xfer-w", 6) &&
		    !pthread_equal(r.tid, pthread_self()))
			fail_msg("callback on %s", r.thread);
		workers += !strncmp(r.thread, "xfer-w", 6);
		assert_int_equal(r.free_ret, -EBUSY);
		free_after(b);
	}
	assert_int_equal(atomic_load(&r.calls), ROUNDS);
	print_message("%d of %d rounds called back on the worker\n", workers,
		      ROUNDS);
	assert_true(workers > 0);

	/* every request invalid: the round ends inside the submit, on the
	 * submitting thread */
	r.try_free = false;
	b = direct_batch(a, &r);
	req.length = LEN + 1; /* past the target's buffer */
	assert_int_equal(xfer_batch_submit(b, &req, 1), 0);
	assert_int_equal(atomic_load(&r.calls), ROUNDS + 1);
	assert_true(pthread_equal(r.tid, pthread_self()));
	assert_int_equal(atomic_load(&r.outcome), XFER_INVALID);
	free_after(b);

	xfer_engine_free(a);
	xfer_engine_free(t);
	free(src);
	free(dst);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_direct),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
