/*
 * Bad input: requests refused at submit (INVALID at once, nothing sent)
 * next to good ones in the same batch, the batch outcome, and the error
 * returns of xfer_register, xfer_unregister and xfer_segment_open.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "test/helpers.h"

#define IB_LEN (1u << 20)
#define TB_LEN (1u << 20)
#define PRIV_LEN (64u << 10)
#define FILL 0x3C

static struct {
	struct xfer_engine *i, *t;   /* initiator, target */
	uint8_t *ib, *tb, *priv;     /* priv: registered on t, not remote */
	int64_t seg;                 /* t's segment, opened by i */
} F;

static void expect_one_callback(struct th_cbrec *r, enum xfer_status outcome)
{
	th_expect_callbacks(r, 1);
	th_assert_status(atomic_load(&r->outcome), outcome);
}

static int setup(void **state)
{
	(void)state;
	F.i = th_engine(1);
	F.t = th_engine(1);
	F.ib = th_alloc(IB_LEN);
	F.tb = th_alloc(TB_LEN);
	F.priv = th_alloc(PRIV_LEN);
	memset(F.ib, 0, IB_LEN);
	memset(F.priv, FILL, PRIV_LEN);
	assert_int_equal(xfer_register(F.i, F.ib, IB_LEN, "cpu:0", true), 0);
	assert_int_equal(xfer_register(F.t, F.tb, TB_LEN, "cpu:0", true), 0);
	assert_int_equal(xfer_register(F.t, F.priv, PRIV_LEN, "cpu:0", false),
			 0);
	F.seg = xfer_segment_open(F.i, xfer_engine_name(F.t));
	assert_true(F.seg >= 0);
	assert_int_equal(th_segment_find(F.i, F.seg, (uintptr_t)F.tb), TB_LEN);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	assert_int_equal(xfer_segment_close(F.i, F.seg), 0);
	assert_int_equal(xfer_unregister(F.i, F.ib), 0);
	assert_int_equal(th_unregister(F.t, F.tb), 0);
	assert_int_equal(th_unregister(F.t, F.priv), 0);
	xfer_engine_free(F.i);
	xfer_engine_free(F.t);
	free(F.ib);
	free(F.tb);
	free(F.priv);
	return 0;
}

static uint64_t taddr(size_t off)
{
	return (uintptr_t)F.tb + off;
}

/* Bad requests in one batch with good ones: each bad one is INVALID right
 * after submit, the good ones complete, no byte of the target changes but
 * those the good WRITE wrote, the outcome is INVALID. */
static void test_mixed_batch(void **state)
{
	enum { S = 4096, G1_OFF = 200000, G1_LEN = (64 << 10) + 1 };
	uint8_t *ub = th_alloc(2 * S); /* never registered */
	struct th_cbrec rec = { 0 };
	struct xfer_request r[] = {
		/* 0: good WRITE ib → tb+100 */
		{ XFER_WRITE, F.ib, F.seg, taddr(100), S },
		/* 1: source not registered (WRITE) */
		{ XFER_WRITE, ub, F.seg, taddr(300000), S },
		/* 2: destination not registered (READ) */
		{ XFER_READ, ub, F.seg, taddr(300000), S },
		/* 3: source starts inside a buffer and ends past it */
		{ XFER_WRITE, F.ib + IB_LEN - 100, F.seg, taddr(310000), S },
		/* 4: unknown segment id */
		{ XFER_WRITE, F.ib, 12345, taddr(320000), S },
		/* 5: target starts inside the peer's buffer, ends past it */
		{ XFER_WRITE, F.ib, F.seg, taddr(TB_LEN - 100), S },
		/* 6: target entirely past the buffer */
		{ XFER_WRITE, F.ib, F.seg, taddr(TB_LEN + S), S },
		/* 7: target entirely outside any buffer, low address */
		{ XFER_WRITE, F.ib, F.seg, 0x1000, S },
		/* 8: target starts before the buffer, ends inside it */
		{ XFER_WRITE, F.ib, F.seg, taddr(0) - 16, S },
		/* 9: zero length */
		{ XFER_WRITE, F.ib, F.seg, taddr(330000), 0 },
		/* 10: zero length READ */
		{ XFER_READ, F.ib + 2 * S, F.seg, taddr(330000), 0 },
		/* 11: target range wraps around the address space */
		{ XFER_WRITE, F.ib, F.seg, UINT64_MAX - 8, S },
		/* 12: good READ tb+G1_OFF → ib+S*4 */
		{ XFER_READ, F.ib + 4 * S, F.seg, taddr(G1_OFF), G1_LEN },
	};
	const size_t n = sizeof(r) / sizeof(r[0]);
	struct xfer_task_status st;
	struct xfer_batch *b;

	(void)state;
	memset(F.tb, FILL, TB_LEN);
	th_fill(F.tb + G1_OFF, G1_LEN, 2);
	memset(F.ib, 0, IB_LEN);
	th_fill(F.ib, S, 1);
	memset(ub, 0x77, 2 * S);

	b = xfer_batch_new(F.i, n);
	assert_non_null(b);
	assert_int_equal(xfer_batch_set_callback(b, th_count_cb, &rec), 0);
	assert_int_equal(xfer_batch_submit(b, r, n), 0);
	assert_int_equal(xfer_batch_size(b), n);
	for (size_t k = 1; k < n - 1; k++) {
		assert_int_equal(xfer_batch_status(b, k, &st), 0);
		if (st.status != XFER_INVALID)
			print_error("request %zu is %s after submit\n", k,
				    xfer_status_str(st.status));
		th_assert_status(st.status, XFER_INVALID);
		assert_int_equal(st.transferred, 0);
	}
	assert_int_equal(xfer_batch_wait(b, 30000), 0);

	assert_int_equal(xfer_batch_status(b, 0, &st), 0);
	th_assert_status(st.status, XFER_COMPLETED);
	assert_int_equal(st.transferred, S);
	assert_int_equal(xfer_batch_status(b, n - 1, &st), 0);
	th_assert_status(st.status, XFER_COMPLETED);
	assert_int_equal(st.transferred, G1_LEN);
	for (size_t k = 1; k < n - 1; k++) {
		assert_int_equal(xfer_batch_status(b, k, &st), 0);
		th_assert_status(st.status, XFER_INVALID);
	}
	expect_one_callback(&rec, XFER_INVALID);
	assert_int_equal(xfer_batch_free(b), 0);

	/* the good ones moved the right bytes */
	assert_int_equal(th_check(F.tb + 100, S, 1), -1);
	assert_int_equal(th_check(F.ib + 4 * S, G1_LEN, 2), -1);
	/* nothing else of the target changed */
	assert_int_equal(th_check_byte(F.tb, 100, FILL), -1);
	assert_int_equal(th_check_byte(F.tb + 100 + S, G1_OFF - 100 - S, FILL),
			 -1);
	assert_int_equal(th_check(F.tb + G1_OFF, G1_LEN, 2), -1);
	assert_int_equal(th_check_byte(F.tb + G1_OFF + G1_LEN,
				       TB_LEN - G1_OFF - G1_LEN, FILL), -1);
	/* the unregistered destination was not written */
	assert_int_equal(th_check_byte(ub, 2 * S, 0x77), -1);
	/* nor the local bytes between the good ranges */
	assert_int_equal(th_check_byte(F.ib + S, 3 * S, 0), -1);
	free(ub);
}

/* A batch of only bad requests is terminal at once: wait returns, the
 * callback runs once with INVALID. */
static void test_all_invalid_batch(void **state)
{
	struct th_cbrec rec = { 0 };
	struct xfer_request r[] = {
		{ XFER_WRITE, F.ib, 12345, taddr(0), 16 },
		{ XFER_READ, F.ib, F.seg, taddr(0), 0 },
	};
	struct xfer_task_status st;
	struct xfer_batch *b = xfer_batch_new(F.i, 2);

	(void)state;
	assert_non_null(b);
	assert_int_equal(xfer_batch_set_callback(b, th_count_cb, &rec), 0);
	assert_int_equal(xfer_batch_submit(b, r, 2), 0);
	for (size_t k = 0; k < 2; k++) {
		assert_int_equal(xfer_batch_status(b, k, &st), 0);
		th_assert_status(st.status, XFER_INVALID);
	}
	assert_int_equal(xfer_batch_wait(b, 5000), 0);
	expect_one_callback(&rec, XFER_INVALID);
	assert_int_equal(xfer_batch_free(b), 0);
}

/* A closed segment id is unknown to later submits. */
static void test_closed_segment_invalid(void **state)
{
	int64_t old = F.seg;

	(void)state;
	th_fill(F.ib, 64, 5);
	memset(F.tb, FILL, 64);
	assert_int_equal(xfer_segment_close(F.i, old), 0);
	th_assert_status(th_xfer1(F.i, XFER_WRITE, F.ib, old, taddr(0), 64,
				  NULL), XFER_INVALID);
	assert_int_equal(th_check_byte(F.tb, 64, FILL), -1);
	F.seg = xfer_segment_open(F.i, xfer_engine_name(F.t));
	assert_true(F.seg >= 0);
	th_assert_status(th_xfer1(F.i, XFER_WRITE, F.ib, F.seg, taddr(0), 64,
				  NULL), XFER_COMPLETED);
	assert_int_equal(th_check(F.tb, 64, 5), -1);
}

/* A buffer registered without remote access is neither read nor written
 * by a peer: the request is refused (INVALID if the descriptor leaves it
 * out, FAILED if the target's data server refuses it). */
static void test_private_buffer(void **state)
{
	enum xfer_status st;

	(void)state;
	th_fill(F.ib, 256, 6);
	st = th_xfer1(F.i, XFER_WRITE, F.ib, F.seg, (uintptr_t)F.priv + 64,
		      256, NULL);
	if (st != XFER_INVALID && st != XFER_FAILED)
		fail_msg("WRITE to a private buffer ended %s",
			 xfer_status_str(st));
	assert_int_equal(th_check_byte(F.priv, PRIV_LEN, FILL), -1);
	memset(F.ib, 0, 256);
	st = th_xfer1(F.i, XFER_READ, F.ib, F.seg, (uintptr_t)F.priv + 64,
		      256, NULL);
	if (st != XFER_INVALID && st != XFER_FAILED)
		fail_msg("READ of a private buffer ended %s",
			 xfer_status_str(st));
	assert_int_equal(th_check_byte(F.ib, 256, 0), -1);
}

/* The initiator's descriptor is older than the target's registry: the
 * target itself refuses a range it no longer has (FAILED, not a byte
 * moved), and a reopen sees the target's buffers as they are now. */
static void test_stale_descriptor(void **state)
{
	enum { S = 64u << 10 };
	uint8_t *gone = th_alloc(S), *fresh = th_alloc(S);
	uint64_t tr;
	int64_t id;

	(void)state;
	/* registered before the open, unregistered after it */
	memset(gone, FILL, S);
	assert_int_equal(xfer_register(F.t, gone, S, "cpu:0", true), 0);
	assert_int_equal(xfer_segment_close(F.i, F.seg), 0);
	F.seg = xfer_segment_open(F.i, xfer_engine_name(F.t));
	assert_true(F.seg >= 0);
	assert_int_equal(th_segment_find(F.i, F.seg, (uintptr_t)gone), S);
	assert_int_equal(xfer_unregister(F.t, gone), 0);

	th_fill(F.ib, S, 8);
	th_assert_status(th_xfer1(F.i, XFER_WRITE, F.ib, F.seg,
				  (uintptr_t)gone, S, NULL), XFER_FAILED);
	assert_int_equal(th_check_byte(gone, S, FILL), -1);
	memset(F.ib, 0, S);
	th_assert_status(th_xfer1(F.i, XFER_READ, F.ib, F.seg,
				  (uintptr_t)gone, S, NULL), XFER_FAILED);
	assert_int_equal(th_check_byte(F.ib, S, 0), -1);
	/* the engine goes on serving what is registered */
	th_fill(F.ib, S, 9);
	th_assert_status(th_xfer1(F.i, XFER_WRITE, F.ib, F.seg, taddr(64), S,
				  &tr), XFER_COMPLETED);
	assert_int_equal(th_check(F.tb + 64, S, 9), -1);

	/* registered after the open: a reopen sees it */
	memset(fresh, 0, S);
	assert_int_equal(xfer_register(F.t, fresh, S, "cpu:0", true), 0);
	assert_int_equal(xfer_segment_close(F.i, F.seg), 0);
	F.seg = xfer_segment_open(F.i, xfer_engine_name(F.t));
	assert_true(F.seg >= 0);
	assert_int_equal(th_segment_find(F.i, F.seg, (uintptr_t)fresh), S);
	id = F.seg;
	th_assert_status(th_xfer1(F.i, XFER_WRITE, F.ib, id, (uintptr_t)fresh,
				  S, &tr), XFER_COMPLETED);
	assert_int_equal(tr, S);
	assert_int_equal(th_check(fresh, S, 9), -1);
	assert_int_equal(th_unregister(F.t, fresh), 0);
	free(gone);
	free(fresh);
}

static void test_register_errors(void **state)
{
	const size_t M = 1u << 20;
	uint8_t *x = th_alloc(3 * M);
	uint8_t *mid = x + M;

	(void)state;
	assert_int_equal(xfer_register(F.i, mid, 0, "cpu:0", true), -EINVAL);
	assert_int_equal(xfer_register(F.i, NULL, 4096, "cpu:0", true), -EINVAL);
	assert_int_equal(xfer_register(F.i, (void *)(UINTPTR_MAX - 100), 4096,
				       "cpu:0", true), -EINVAL);

	assert_int_equal(xfer_register(F.i, mid, M, "cpu:0", true), 0);
	/* identical, inside, over the start, over the end, covering */
	assert_int_equal(xfer_register(F.i, mid, M, "cpu:0", true), -EEXIST);
	assert_int_equal(xfer_register(F.i, mid + 4096, 4096, "cpu:0", true),
			 -EEXIST);
	assert_int_equal(xfer_register(F.i, mid - 4096, 8192, "cpu:0", true),
			 -EEXIST);
	assert_int_equal(xfer_register(F.i, mid + M - 4096, 8192, "cpu:0",
				       true), -EEXIST);
	assert_int_equal(xfer_register(F.i, x, 3 * M, "cpu:0", true), -EEXIST);
	/* a byte inside the fixture's buffer */
	assert_int_equal(xfer_register(F.i, F.ib + 1, 1, "cpu:0", false),
			 -EEXIST);
	/* adjacent ranges do not overlap */
	assert_int_equal(xfer_register(F.i, mid + M, 4096, "cpu:0", true), 0);
	assert_int_equal(xfer_register(F.i, mid - 4096, 4096, "cpu:0", true), 0);

	assert_int_equal(xfer_unregister(F.i, x), -ENOENT);
	assert_int_equal(xfer_unregister(F.i, mid + 4096), -ENOENT);
	assert_int_equal(xfer_unregister(F.i, mid), 0);
	assert_int_equal(xfer_unregister(F.i, mid), -ENOENT);
	assert_int_equal(xfer_unregister(F.i, mid + M), 0);
	assert_int_equal(xfer_unregister(F.i, mid - 4096), 0);
	free(x);
}

static void test_open_nothing_listening(void **state)
{
	int64_t t0 = th_now_ms();
	int64_t id = xfer_segment_open(F.i, "127.0.0.1:1");
	int64_t took = th_now_ms() - t0;

	(void)state;
	if (id >= 0 || took > 6000)
		fail_msg("open of 127.0.0.1:1 gave %lld after %lld ms",
			 (long long)id, (long long)took);
}

static void test_open_malformed(void **state)
{
	(void)state;
	assert_int_equal(xfer_segment_open(F.i, "nocolon"), -EINVAL);
	assert_int_equal(xfer_segment_open(F.i, "host:99999"), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mixed_batch),
		cmocka_unit_test(test_all_invalid_batch),
		cmocka_unit_test(test_closed_segment_invalid),
		cmocka_unit_test(test_private_buffer),
		cmocka_unit_test(test_stale_descriptor),
		cmocka_unit_test(test_register_errors),
		cmocka_unit_test(test_open_nothing_listening),
		cmocka_unit_test(test_open_malformed),
	};

	return cmocka_run_group_tests_name("invalid", tests, setup, teardown);
}
