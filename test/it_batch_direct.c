/*
 * Integration: xfer_batch_set_callback_direct() — the callback runs on the
 * thread that ends the round (a worker here, or the submitter when every
 * request fails at submit), once per round, and the batch cannot be freed
 * while it runs; xfer_batch_free_wait() waits for it to return.
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
#include <unistd.h>

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
	atomic_bool hold;       /* the callback waits while it is set, */
	pthread_t submitter;    /* unless it runs on this thread */
	atomic_bool returned;   /* the callback has returned */
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
	while (atomic_load(&r->hold) &&
	       !pthread_equal(pthread_self(), r->submitter))
		sched_yield();
	atomic_store(&r->returned, true);
}

/* A fresh batch of one each round, freed once its callback returned. */
static struct xfer_batch *direct_batch(struct xfer_engine *e, struct rec *r)
{
	struct xfer_batch *b = xfer_batch_new(e, 1);

	assert_non_null(b);
	assert_int_equal(xfer_batch_set_callback_direct(b, direct_cb, r), 0);
	return b;
}

/* Two engines over TCP: a WRITE of src (registered with a) to dst (with
 * t), all LEN bytes. */
struct pair {
	struct xfer_engine *a, *t;
	uint8_t *src, *dst;
	struct xfer_request req;
};

static void pair_new(struct pair *p)
{
	int64_t seg;

	p->a = th_engine(1);
	p->t = th_engine(1);
	p->src = th_alloc(LEN);
	p->dst = th_alloc(LEN);
	assert_int_equal(xfer_register(p->a, p->src, LEN, "cpu:0", true), 0);
	assert_int_equal(xfer_register(p->t, p->dst, LEN, "cpu:0", true), 0);
	seg = xfer_segment_open(p->a, xfer_engine_name(p->t));
	assert_true(seg >= 0);
	p->req = (struct xfer_request){ .opcode = XFER_WRITE,
		.source = p->src, .target_id = seg,
		.target_offset = (uintptr_t)p->dst, .length = LEN };
}

static void pair_free(struct pair *p)
{
	xfer_engine_free(p->a);
	xfer_engine_free(p->t);
	free(p->src);
	free(p->dst);
}

static void free_after(struct xfer_batch *b)
{
	assert_int_equal(xfer_batch_free_wait(b, 10000), 0);
}

static void test_direct(void **state)
{
	struct rec r = { .try_free = true };
	struct pair p;
	struct xfer_batch *b;
	int workers = 0;

	(void)state;
	pair_new(&p);
	for (int i = 0; i < ROUNDS; i++) {
		b = direct_batch(p.a, &r);
		th_fill(p.src, LEN, i);
		assert_int_equal(xfer_batch_submit(b, &p.req, 1), 0);
		assert_true(th_wait_atomic(&r.calls, i + 1, 10000));
		assert_int_equal(atomic_load(&r.outcome), XFER_COMPLETED);
		assert_int_equal(th_check(p.dst, LEN, i), -1);
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
	b = direct_batch(p.a, &r);
	p.req.length = LEN + 1; /* past the target's buffer */
	assert_int_equal(xfer_batch_submit(b, &p.req, 1), 0);
	assert_int_equal(atomic_load(&r.calls), ROUNDS + 1);
	assert_true(pthread_equal(r.tid, pthread_self()));
	assert_int_equal(atomic_load(&r.outcome), XFER_INVALID);
	free_after(b);
	pair_free(&p);
}

static void *unhold(void *arg)
{
	struct rec *r = arg;

	usleep(100 * 1000);
	atomic_store(&r->hold, false);
	return NULL;
}

/* A direct callback still running on the worker keeps the batch: a free
 * that waits 50 ms times out and leaves it valid; one that waits for
 * ever returns once the callback has. */
static void test_free_wait(void **state)
{
	struct rec r = { .hold = true, .submitter = pthread_self() };
	struct xfer_task_status st;
	struct xfer_batch *b;
	struct pair p;
	pthread_t th;

	(void)state;
	pair_new(&p);
	b = direct_batch(p.a, &r);
	assert_int_equal(xfer_batch_submit(b, &p.req, 1), 0);
	assert_true(th_wait_atomic(&r.calls, 1, 10000));
	if (!pthread_equal(r.tid, pthread_self())) { /* held on the worker */
		assert_int_equal(xfer_batch_free_wait(b, 50), -ETIMEDOUT);
		assert_false(atomic_load(&r.returned));
		assert_int_equal(xfer_batch_status(b, 0, &st), 0);
		assert_int_equal(st.status, XFER_COMPLETED);
	}
	assert_int_equal(pthread_create(&th, NULL, unhold, &r), 0);
	assert_int_equal(xfer_batch_free_wait(b, -1), 0);
	assert_true(atomic_load(&r.returned));
	pthread_join(th, NULL);
	pair_free(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_direct),
		cmocka_unit_test(test_free_wait),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
