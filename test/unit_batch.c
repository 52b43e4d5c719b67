/*
 * Unit tests: task and batch status transitions. A real engine runs on a
 * test-owned event_base with no worker (no thread at all); its own segment
 * is given a recording transport, so the test decides when and how each
 * slice ends, and the batch accounting is watched step by step.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <xfer/event.h>

#include "core/engine_internal.h"
#include "test/helpers.h"

#define MAX_SLICES 64
#define SLICE 4096

static struct xfer_slice *held[MAX_SLICES];
static size_t nheld;

static void record_submit(struct xfer_transport *t, struct xfer_segment *seg,
			  struct xfer_slice *s, size_t n)
{
	(void)t;
	(void)seg;
	for (size_t i = 0; i < n; i++) {
		assert_true(nheld < MAX_SLICES);
		held[nheld++] = &s[i];
	}
}

static const struct xfer_transport_ops record_ops = {
	.name = "record",
	.submit = record_submit,
};
static struct xfer_transport record = { .ops = &record_ops };

struct fixture {
	struct event_base *base;
	struct xfer_engine *e;
	int64_t seg;
	char *mem;        /* [0, 64 KiB) source, [64 KiB, 128 KiB) target */
};

static struct fixture F;
static int calls;
static enum xfer_status last_outcome;
static bool free_in_cb;

static void on_done(struct xfer_batch *b, enum xfer_status outcome, void *arg)
{
	(void)arg;
	calls++;
	last_outcome = outcome;
	if (free_in_cb)
		assert_int_equal(xfer_batch_free(b), 0);
}

static int setup(void **state)
{
	struct xfer_config *cfg = th_config();
	struct xfer_segment *seg;

	(void)state;
	th_set(cfg, "bind_addr", "127.0.0.1");
	th_set(cfg, "workers", "0");
	th_set_num(cfg, "slice_size", SLICE);
	F.base = event_base_new();
	F.e = xfer_engine_new_on_base(F.base, cfg);
	xfer_config_free(cfg);
	assert_non_null(F.e);
	F.mem = calloc(1, 128 << 10);
	assert_int_equal(xfer_register(F.e, F.mem, 128 << 10, "cpu:0", true), 0);
	F.seg = xfer_segment_open(F.e, xfer_engine_name(F.e));
	assert_true(F.seg >= 0);
	seg = xfer_segment_acquire(&F.e->segs, F.seg);
	seg->tp = &record;
	atomic_fetch_sub(&seg->users, 1);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	xfer_engine_free(F.e);
	event_base_free(F.base);
	free(F.mem);
	return 0;
}

static int reset(void **state)
{
	(void)state;
	nheld = 0;
	calls = 0;
	free_in_cb = false;
	return 0;
}

/* A request of @p slices slices: source at @p i KiB, target above 64 KiB. */
static struct xfer_request req(int i, int slices)
{
	return (struct xfer_request){
		XFER_WRITE, F.mem + i * 1024, F.seg,
		(uintptr_t)F.mem + (64 << 10) + i * 1024, (size_t)slices * SLICE,
	};
}

static void expect(struct xfer_batch *b, size_t i, enum xfer_status st,
		   uint64_t transferred)
{
	struct xfer_task_status ts;

	assert_int_equal(xfer_batch_status(b, i, &ts), 0);
	assert_string_equal(xfer_status_str(ts.status), xfer_status_str(st));
	assert_int_equal(ts.transferred, transferred);
}

static void run_base(void)
{
	event_base_loop(F.base, EVLOOP_NONBLOCK);
}

static void test_transitions(void **state)
{
	struct xfer_request r[3] = { req(0, 3), req(16, 2), req(32, 2) };
	struct xfer_batch *b = xfer_batch_new(F.e, 3);

	(void)state;
	assert_int_equal(xfer_batch_set_callback(b, on_done, NULL), 0);
	assert_int_equal(xfer_batch_submit(b, r, 3), 0);
	assert_int_equal(nheld, 7);
	for (int i = 0; i < 3; i++)
		expect(b, i, XFER_WAITING, 0);
	assert_int_equal(xfer_batch_free(b), -EBUSY);
	assert_int_equal(xfer_batch_set_callback(b, on_done, NULL), -EBUSY);
	assert_int_equal(xfer_unregister(F.e, F.mem), -EBUSY);
	assert_int_equal(xfer_segment_close(F.e, F.seg), -EBUSY);

	/* transferred grows slice by slice while the task stays WAITING */
	xfer_slice_done(held[0], XFER_COMPLETED);
	expect(b, 0, XFER_WAITING, SLICE);
	xfer_slice_done(held[2], XFER_COMPLETED);
	expect(b, 0, XFER_WAITING, 2 * SLICE);
	xfer_slice_done(held[1], XFER_COMPLETED);
	expect(b, 0, XFER_COMPLETED, 3 * SLICE);

	/* a task ends with its first failure, whatever comes after */
	xfer_slice_done(held[3], XFER_TIMEOUT);
	expect(b, 1, XFER_WAITING, 0);
	xfer_slice_done(held[4], XFER_COMPLETED);
	expect(b, 1, XFER_TIMEOUT, SLICE);
	xfer_slice_done(held[5], XFER_FAILED);
	xfer_slice_done(held[6], XFER_TIMEOUT);
	expect(b, 2, XFER_FAILED, 0);

	/* every task is terminal: the callback is queued on the base, and
	 * the batch cannot be freed before it has run */
	assert_int_equal(xfer_batch_wait(b, 0), 0);
	assert_int_equal(calls, 0);
	assert_int_equal(xfer_batch_free(b), -EBUSY);
	run_base();
	assert_int_equal(calls, 1);
	assert_int_equal(last_outcome, XFER_FAILED);
	run_base();
	assert_int_equal(calls, 1);
	assert_int_equal(xfer_batch_free(b), 0);
}

/* The outcome is COMPLETED only when every task completed; else the first
 * of FAILED, TIMEOUT, INVALID, CANCELED that any task has. */
static void test_outcome_order(void **state)
{
	static const struct {
		enum xfer_status a, b;
		bool invalid;  /* a third, INVALID request in the batch */
		enum xfer_status want;
	} cases[] = {
		{ XFER_COMPLETED, XFER_COMPLETED, false, XFER_COMPLETED },
		{ XFER_COMPLETED, XFER_COMPLETED, true, XFER_INVALID },
		{ XFER_CANCELED, XFER_COMPLETED, false, XFER_CANCELED },
		{ XFER_CANCELED, XFER_COMPLETED, true, XFER_INVALID },
		{ XFER_TIMEOUT, XFER_CANCELED, true, XFER_TIMEOUT },
		{ XFER_TIMEOUT, XFER_FAILED, false, XFER_FAILED },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct xfer_request r[3] = { req(0, 1), req(8, 1), req(16, 1) };
		struct xfer_batch *b = xfer_batch_new(F.e, 3);

		reset(NULL);
		r[2].length = 0;
		free_in_cb = true;
		assert_int_equal(xfer_batch_set_callback(b, on_done, NULL), 0);
		assert_int_equal(xfer_batch_submit(b, r, cases[i].invalid ? 3 : 2), 0);
		if (cases[i].invalid)
			expect(b, 2, XFER_INVALID, 0);
		xfer_slice_done(held[0], cases[i].a);
		xfer_slice_done(held[1], cases[i].b);
		run_base();
		assert_int_equal(calls, 1);
		assert_string_equal(xfer_status_str(last_outcome),
				    xfer_status_str(cases[i].want));
	}
}

/* A batch whose requests are all INVALID still completes: one callback. */
static void test_all_invalid(void **state)
{
	struct xfer_request r[2] = { req(0, 1), req(8, 1) };
	struct xfer_batch *b = xfer_batch_new(F.e, 2);

	(void)state;
	r[0].target_id = 999;
	r[1].source = (char *)F.mem - 4096;
	free_in_cb = true;
	assert_int_equal(xfer_batch_set_callback(b, on_done, NULL), 0);
	assert_int_equal(xfer_batch_submit(b, r, 2), 0);
	assert_int_equal(nheld, 0);
	expect(b, 0, XFER_INVALID, 0);
	expect(b, 1, XFER_INVALID, 0);
	run_base();
	assert_int_equal(calls, 1);
	assert_int_equal(last_outcome, XFER_INVALID);
}

/* Appending: the callback covers each round once; capacity is kept. */
static void test_rounds(void **state)
{
	struct xfer_request r[2] = { req(0, 1), req(8, 1) };
	struct xfer_batch *b = xfer_batch_new(F.e, 3);

	(void)state;
	assert_int_equal(xfer_batch_set_callback(b, on_done, NULL), 0);
	assert_int_equal(xfer_batch_submit(b, r, 2), 0);
	assert_int_equal(xfer_batch_submit(b, r, 2), -ENOSPC);
	assert_int_equal(xfer_batch_size(b), 2);
	xfer_slice_done(held[0], XFER_COMPLETED);
	xfer_slice_done(held[1], XFER_COMPLETED);
	run_base();
	assert_int_equal(calls, 1);
	assert_int_equal(last_outcome, XFER_COMPLETED);

	assert_int_equal(xfer_batch_submit(b, r, 1), 0);
	assert_int_equal(xfer_batch_size(b), 3);
	struct xfer_task_status ts;
	assert_int_equal(xfer_batch_status(b, 3, &ts), -ERANGE);
	expect(b, 2, XFER_WAITING, 0);
	assert_int_equal(xfer_batch_wait(b, 10), -ETIMEDOUT);
	xfer_slice_done(held[2], XFER_FAILED);
	run_base();
	assert_int_equal(calls, 2);
	assert_int_equal(last_outcome, XFER_FAILED);
	assert_int_equal(xfer_batch_free(b), 0);
}

/* A segment gone (its key deleted) fails its requests at submit, and no
 * transport sees their slices; back, it serves again. */
static void test_segment_gone(void **state)
{
	struct xfer_request r[2] = { req(0, 2), req(16, 1) };
	struct xfer_batch *b = xfer_batch_new(F.e, 2);
	struct xfer_segment *seg = xfer_segment_acquire(&F.e->segs, F.seg);

	(void)state;
	atomic_store(&seg->gone, true);
	assert_int_equal(xfer_batch_set_callback(b, on_done, NULL), 0);
	assert_int_equal(xfer_batch_submit(b, r, 2), 0);
	assert_int_equal(nheld, 0);
	expect(b, 0, XFER_FAILED, 0);
	expect(b, 1, XFER_FAILED, 0);
	assert_non_null(strstr(xfer_engine_last_error(F.e), "is gone"));
	run_base();
	assert_int_equal(calls, 1);
	assert_int_equal(last_outcome, XFER_FAILED);
	assert_int_equal(xfer_batch_free(b), 0);

	atomic_store(&seg->gone, false);
	xfer_segment_put(seg);
	b = xfer_batch_new(F.e, 1);
	assert_int_equal(xfer_batch_submit(b, r, 1), 0);
	assert_int_equal(nheld, 2);
	xfer_slice_done(held[0], XFER_COMPLETED);
	xfer_slice_done(held[1], XFER_COMPLETED);
	expect(b, 0, XFER_COMPLETED, 2 * SLICE);
	assert_int_equal(xfer_batch_free(b), 0);
}

/* Bytes the allocator holds for this (the main) thread's arena. */
static size_t heap_bytes(void)
{
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
}

/* Complete the @p n held slices and deliver the round. */
static void complete_held(size_t n)
{
	for (size_t i = 0; i < n; i++)
		xfer_slice_done(held[i], XFER_COMPLETED);
	run_base();
	nheld = 0;
}

/* The batch owns its slices: requests of one slice each take them from
 * what xfer_batch_new() allocated, a submit allocates nothing, and a
 * later round, nothing in flight, reuses the same slices; requests of
 * more slices grow the storage once, and it is kept. */
static void test_slice_storage(void **state)
{
	struct xfer_request r[2] = { req(0, 1), req(8, 1) };
	struct xfer_request big = req(16, 3);
	struct xfer_slice *first[3];
	struct xfer_batch *b = xfer_batch_new(F.e, 4);
	size_t before;

	(void)state;
	before = heap_bytes();
	assert_int_equal(xfer_batch_submit(b, r, 2), 0);
	assert_int_equal(heap_bytes(), before);
	assert_int_equal(nheld, 2);
	first[0] = held[0];
	first[1] = held[1];
	complete_held(2);
	assert_int_equal(xfer_batch_submit(b, r, 2), 0);
	assert_int_equal(heap_bytes(), before);
	assert_ptr_equal(held[0], first[0]);
	assert_ptr_equal(held[1], first[1]);
	complete_held(2);
	assert_int_equal(xfer_batch_free(b), 0);

	b = xfer_batch_new(F.e, 2);
	assert_int_equal(xfer_batch_submit(b, &big, 1), 0);
	assert_int_equal(nheld, 3);
	memcpy(first, held, sizeof(first));
	complete_held(3);
	before = heap_bytes();
	assert_int_equal(xfer_batch_submit(b, &big, 1), 0);
	assert_int_equal(heap_bytes(), before);
	assert_memory_equal(held, first, sizeof(first));
	complete_held(3);
	expect(b, 1, XFER_COMPLETED, 3 * SLICE);
	assert_int_equal(xfer_batch_free(b), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_transitions, reset),
		cmocka_unit_test_setup(test_outcome_order, reset),
		cmocka_unit_test_setup(test_all_invalid, reset),
		cmocka_unit_test_setup(test_rounds, reset),
		cmocka_unit_test_setup(test_segment_gone, reset),
		cmocka_unit_test_setup(test_slice_storage, reset),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
