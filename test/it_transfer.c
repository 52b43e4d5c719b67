/*
 * Transfers between two engines in one process over real loopback sockets:
 * READ and WRITE of several sizes both ways, a batch of 1000 requests, the
 * completion callback, the local (memcpy) segment, the batch rules
 * (-EBUSY, -ENOSPC, -ERANGE, same id for the same name), and a transport
 * added to a running engine.
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
#include <time.h>

#include "core/desc_internal.h"
#include "test/helpers.h"

/* Each engine registers one buffer this big: 16 MiB plus room for offsets. */
#define BUF_LEN ((16u << 20) + (256u << 10))
/* Non-zero, unaligned offsets into the local and the remote buffer. */
#define LOFF 4099u
#define ROFF 8197u
/* Guard bytes checked on both sides of every destination range. */
#define GUARD 64u
#define GUARD_BYTE 0xA5

struct fix {
	int workers;
	struct xfer_engine *e[2];
	uint8_t *buf[2];
	int64_t seg[2];    /* seg[i]: the other engine's segment, opened by e[i] */
	uint64_t raddr[2]; /* the other engine's buffer, from xfer_segment_buffer */
};

static struct fix F;

static int setup_engines(int workers)
{
	memset(&F, 0, sizeof(F));
	F.workers = workers;
	for (int i = 0; i < 2; i++) {
		F.e[i] = th_engine(workers);
		F.buf[i] = th_alloc(BUF_LEN);
		memset(F.buf[i], 0, BUF_LEN);
		assert_int_equal(xfer_register(F.e[i], F.buf[i], BUF_LEN,
					       "cpu:0", true), 0);
	}
	for (int i = 0; i < 2; i++) {
		uint64_t addr = 0, len = 0;
		const char *loc = NULL;

		F.seg[i] = xfer_segment_open(F.e[i], xfer_engine_name(F.e[1 - i]));
		assert_true(F.seg[i] >= 0);
		assert_int_equal(xfer_segment_buffer(F.e[i], F.seg[i], 0, &addr,
						     &len, &loc), 0);
		assert_int_equal(addr, (uintptr_t)F.buf[1 - i]);
		assert_int_equal(len, BUF_LEN);
		assert_non_null(loc);
		assert_string_equal(loc, "cpu:0");
		assert_int_equal(xfer_segment_buffer(F.e[i], F.seg[i], 1, &addr,
						     &len, NULL), -ENOENT);
		F.raddr[i] = addr;
	}
	return 0;
}

static int setup_w1(void **state)
{
	(void)state;
	return setup_engines(1);
}

static int setup_w2(void **state)
{
	(void)state;
	return setup_engines(2);
}

static int teardown_engines(void **state)
{
	(void)state;
	for (int i = 0; i < 2; i++)
		if (F.e[i] && F.seg[i] >= 0)
			assert_int_equal(xfer_segment_close(F.e[i], F.seg[i]), 0);
	for (int i = 0; i < 2; i++) {
		if (F.e[i])
			assert_int_equal(th_unregister(F.e[i], F.buf[i]), 0);
		xfer_engine_free(F.e[i]);
		free(F.buf[i]);
	}
	memset(&F, 0, sizeof(F));
	return 0;
}

/*
 * One request from engine @from to the other engine's buffer at ROFF, from
 * or to its own buffer at LOFF; every byte and the guards around the
 * destination are checked.
 */
static void rw_one(int from, enum xfer_opcode op, size_t len, uint64_t seed)
{
	int to = 1 - from;
	uint8_t *local = F.buf[from] + LOFF, *remote = F.buf[to] + ROFF;
	uint8_t *dst = op == XFER_READ ? local : remote;
	uint8_t *src = op == XFER_READ ? remote : local;
	uint64_t transferred = 0;
	enum xfer_status st;

	th_fill(src, len, seed);
	memset(dst - GUARD, GUARD_BYTE, len + 2 * GUARD);
	st = th_xfer1(F.e[from], op, local, F.seg[from], F.raddr[from] + ROFF,
		      len, &transferred);
	if (st != XFER_COMPLETED)
		print_error("%s of %zu bytes, engine %d -> %d: %s (%s)\n",
			    op == XFER_READ ? "READ" : "WRITE", len, from, to,
			    xfer_status_str(st),
			    xfer_engine_last_error(F.e[from]));
	th_assert_status(st, XFER_COMPLETED);
	assert_int_equal(transferred, len);
	assert_int_equal(th_check(dst, len, seed), -1);
	assert_int_equal(th_check_byte(dst - GUARD, GUARD, GUARD_BYTE), -1);
	assert_int_equal(th_check_byte(dst + len, GUARD, GUARD_BYTE), -1);
}

static void rw_all_ways(size_t len)
{
	uint64_t seed = len * 4;

	rw_one(0, XFER_WRITE, len, seed + 0);
	rw_one(0, XFER_READ, len, seed + 1);
	rw_one(1, XFER_WRITE, len, seed + 2);
	rw_one(1, XFER_READ, len, seed + 3);
}

static void test_rw_1B(void **state)
{
	(void)state;
	rw_all_ways(1);
}

static void test_rw_4KiB(void **state)
{
	(void)state;
	rw_all_ways(4096);
}

static void test_rw_64KiB_plus_1(void **state)
{
	(void)state;
	rw_all_ways((64u << 10) + 1);
}

static void test_rw_16MiB(void **state)
{
	(void)state;
	rw_all_ways(16u << 20);
}

/* 1000 × 4 KiB in one batch, even ones WRITE, odd ones READ, disjoint. */
static void test_batch_1000(void **state)
{
	enum { N = 1000, S = 4096 };
	uint8_t *lbase = F.buf[0] + LOFF, *rbase = F.buf[1] + ROFF;
	struct xfer_request *reqs = calloc(N, sizeof(*reqs));
	struct th_cbrec rec = { 0 };
	struct xfer_batch *b;

	(void)state;
	assert_non_null(reqs);
	for (size_t i = 0; i < N; i++) {
		bool w = i % 2 == 0;

		th_fill(w ? lbase + i * S : rbase + i * S, S, 10000 + i);
		memset(w ? rbase + i * S : lbase + i * S, 0, S);
		reqs[i] = (struct xfer_request){
			.opcode = w ? XFER_WRITE : XFER_READ,
			.source = lbase + i * S,
			.target_id = F.seg[0],
			.target_offset = F.raddr[0] + ROFF + i * S,
			.length = S,
		};
	}
	b = xfer_batch_new(F.e[0], N);
	assert_non_null(b);
	assert_int_equal(xfer_batch_set_callback(b, th_count_cb, &rec), 0);
	assert_int_equal(xfer_batch_submit(b, reqs, N), 0);
	assert_int_equal(xfer_batch_size(b), N);
	assert_int_equal(xfer_batch_wait(b, 30000), 0);
	for (size_t i = 0; i < N; i++) {
		struct xfer_task_status st;

		assert_int_equal(xfer_batch_status(b, i, &st), 0);
		th_assert_status(st.status, XFER_COMPLETED);
		assert_int_equal(st.transferred, S);
		assert_int_equal(th_check(i % 2 == 0 ? rbase + i * S :
					  lbase + i * S, S, 10000 + i), -1);
	}
	th_expect_callbacks(&rec, 1);
	th_assert_status(atomic_load(&rec.outcome), XFER_COMPLETED);
	assert_int_equal(xfer_batch_free(b), 0);
	free(reqs);
}

/* The engine's own name opens the local segment, served by memcpy. */
static void test_local_segment(void **state)
{
	static const size_t sizes[] = { 1, 4096, (64u << 10) + 1,
					(4u << 20) + 3 };
	struct xfer_engine *e = F.e[0];
	uint8_t *src = F.buf[0] + LOFF;
	uint8_t *tgt = F.buf[0] + (8u << 20) + 5;
	int64_t id = xfer_segment_open(e, xfer_engine_name(e));

	(void)state;
	assert_true(id >= 0);
	assert_true(id != F.seg[0]);
	assert_int_equal(xfer_segment_open(e, xfer_engine_name(e)), id);
	assert_int_equal(th_segment_find(e, id, (uintptr_t)F.buf[0]), BUF_LEN);
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t len = sizes[k];
		uint64_t tr = 0;

		th_fill(src, len, 70 + k);
		memset(tgt - GUARD, GUARD_BYTE, len + 2 * GUARD);
		th_assert_status(th_xfer1(e, XFER_WRITE, src, id,
					  (uintptr_t)tgt, len, &tr),
				 XFER_COMPLETED);
		assert_int_equal(tr, len);
		assert_int_equal(th_check(tgt, len, 70 + k), -1);
		assert_int_equal(th_check_byte(tgt - GUARD, GUARD, GUARD_BYTE), -1);
		assert_int_equal(th_check_byte(tgt + len, GUARD, GUARD_BYTE), -1);

		th_fill(tgt, len, 80 + k);
		memset(src - GUARD, GUARD_BYTE, len + 2 * GUARD);
		th_assert_status(th_xfer1(e, XFER_READ, src, id,
					  (uintptr_t)tgt, len, &tr),
				 XFER_COMPLETED);
		assert_int_equal(tr, len);
		assert_int_equal(th_check(src, len, 80 + k), -1);
		assert_int_equal(th_check_byte(src - GUARD, GUARD, GUARD_BYTE), -1);
		assert_int_equal(th_check_byte(src + len, GUARD, GUARD_BYTE), -1);
	}
	assert_int_equal(xfer_segment_close(e, id), 0);
}

static void test_open_same_name_same_id(void **state)
{
	(void)state;
	assert_int_equal(xfer_segment_open(F.e[0], xfer_engine_name(F.e[1])),
			 F.seg[0]);
	assert_int_equal(xfer_segment_open(F.e[1], xfer_engine_name(F.e[0])),
			 F.seg[1]);
}

/* Capacity 4: 5 at once do not fit, 2 + 2 do; index 4 is out of range;
 * the callback runs once per time all submitted tasks are terminal. */
static void test_batch_capacity(void **state)
{
	enum { S = 4096 };
	uint8_t *lbase = F.buf[0] + LOFF, *rbase = F.buf[1] + ROFF;
	struct xfer_request reqs[5];
	struct xfer_task_status st;
	struct th_cbrec rec = { 0 };
	struct xfer_batch *b;

	(void)state;
	errno = 0;
	assert_null(xfer_batch_new(F.e[0], 0));
	assert_int_equal(errno, EINVAL);

	for (size_t i = 0; i < 5; i++) {
		th_fill(lbase + i * S, S, 500 + i);
		memset(rbase + i * S, 0, S);
		reqs[i] = (struct xfer_request){
			.opcode = XFER_WRITE,
			.source = lbase + i * S,
			.target_id = F.seg[0],
			.target_offset = F.raddr[0] + ROFF + i * S,
			.length = S,
		};
	}
	b = xfer_batch_new(F.e[0], 4);
	assert_non_null(b);
	assert_int_equal(xfer_batch_set_callback(b, th_count_cb, &rec), 0);
	assert_int_equal(xfer_batch_submit(b, NULL, 1), -EINVAL);
	assert_int_equal(xfer_batch_submit(b, reqs, 0), -EINVAL);
	assert_int_equal(xfer_batch_submit(b, reqs, 5), -ENOSPC);
	assert_int_equal(xfer_batch_size(b), 0);
	assert_int_equal(xfer_batch_status(b, 0, &st), -ERANGE);

	assert_int_equal(xfer_batch_submit(b, reqs, 2), 0);
	assert_int_equal(xfer_batch_size(b), 2);
	assert_int_equal(xfer_batch_wait(b, 30000), 0);
	assert_true(th_wait_atomic(&rec.calls, 1, 2000));
	assert_int_equal(xfer_batch_status(b, 2, &st), -ERANGE);

	assert_int_equal(xfer_batch_submit(b, reqs + 2, 2), 0);
	assert_int_equal(xfer_batch_size(b), 4);
	assert_int_equal(xfer_batch_submit(b, reqs + 4, 1), -ENOSPC);
	assert_int_equal(xfer_batch_size(b), 4);
	assert_int_equal(xfer_batch_wait(b, 30000), 0);
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(xfer_batch_status(b, i, &st), 0);
		th_assert_status(st.status, XFER_COMPLETED);
		assert_int_equal(st.transferred, S);
		assert_int_equal(th_check(rbase + i * S, S, 500 + i), -1);
	}
	assert_int_equal(th_check_byte(rbase + 4 * S, S, 0), -1);
	assert_int_equal(xfer_batch_status(b, 4, &st), -ERANGE);
	th_expect_callbacks(&rec, 2);
	th_assert_status(atomic_load(&rec.outcome), XFER_COMPLETED);
	assert_int_equal(xfer_batch_free(b), 0);
}

/* A batch in flight cannot be freed (nor its callback changed, its source
 * unregistered or its target segment closed); after the wait it can. */
static void test_free_in_flight_ebusy(void **state)
{
	enum { SL = 64u << 10, N = 1024 };
	const size_t len = (size_t)SL * N; /* 64 MiB */
	struct xfer_engine *a = th_engine(1), *t = th_engine(1);
	uint8_t *lbuf = th_alloc(len), *tbuf = th_alloc(len);
	struct xfer_request *reqs = calloc(N, sizeof(*reqs));
	struct th_cbrec rec = { 0 };
	struct xfer_batch *b;
	int64_t seg;
	uint64_t raddr, rlen;

	(void)state;
	assert_non_null(reqs);
	th_fill(lbuf, len, 64);
	memset(tbuf, 0, len);
	assert_int_equal(xfer_register(a, lbuf, len, "cpu:0", true), 0);
	assert_int_equal(xfer_register(t, tbuf, len, "cpu:0", true), 0);
	seg = xfer_segment_open(a, xfer_engine_name(t));
	assert_true(seg >= 0);
	assert_int_equal(xfer_segment_buffer(a, seg, 0, &raddr, &rlen, NULL),
			 0);
	assert_int_equal(raddr, (uintptr_t)tbuf);
	assert_int_equal(rlen, len);
	for (size_t i = 0; i < N; i++)
		reqs[i] = (struct xfer_request){
			.opcode = XFER_WRITE,
			.source = lbuf + i * SL,
			.target_id = seg,
			.target_offset = raddr + i * SL,
			.length = SL,
		};
	b = xfer_batch_new(a, N);
	assert_non_null(b);
	assert_int_equal(xfer_batch_submit(b, reqs, N), 0);
	assert_int_equal(xfer_batch_free(b), -EBUSY);
	assert_int_equal(xfer_batch_set_callback(b, th_count_cb, &rec), -EBUSY);
	assert_int_equal(xfer_unregister(a, lbuf), -EBUSY);
	assert_int_equal(xfer_segment_close(a, seg), -EBUSY);
	assert_int_equal(xfer_batch_wait(b, 30000), 0);
	for (size_t i = 0; i < N; i++) {
		struct xfer_task_status st;

		assert_int_equal(xfer_batch_status(b, i, &st), 0);
		th_assert_status(st.status, XFER_COMPLETED);
		assert_int_equal(st.transferred, SL);
	}
	assert_int_equal(xfer_batch_free(b), 0);
	assert_int_equal(atomic_load(&rec.calls), 0);
	assert_int_equal(th_check(tbuf, len, 64), -1);
	assert_int_equal(xfer_segment_close(a, seg), 0);
	assert_int_equal(xfer_segment_close(a, seg), -ENOENT);
	assert_int_equal(xfer_unregister(a, lbuf), 0);
	assert_int_equal(th_unregister(t, tbuf), 0);
	xfer_engine_free(a);
	xfer_engine_free(t);
	free(reqs);
	free(lbuf);
	free(tbuf);
}

/* The callback may free its own batch. */
struct free_rec {
	atomic_int calls;
	atomic_int free_ret;
};

static void free_cb(struct xfer_batch *b, enum xfer_status outcome, void *arg)
{
	struct free_rec *r = arg;

	atomic_store(&r->free_ret, outcome == XFER_COMPLETED ?
		     xfer_batch_free(b) : -1000 - (int)outcome);
	atomic_fetch_add(&r->calls, 1);
}

static void test_free_in_callback(void **state)
{
	enum { S = (64u << 10) + 1 };
	struct free_rec rec = { 0, 1 };
	struct xfer_request r = { XFER_WRITE, F.buf[0] + LOFF, F.seg[0],
				  F.raddr[0] + ROFF, S };
	struct xfer_batch *b = xfer_batch_new(F.e[0], 1);

	(void)state;
	assert_non_null(b);
	th_fill(F.buf[0] + LOFF, S, 90);
	memset(F.buf[1] + ROFF, 0, S);
	assert_int_equal(xfer_batch_set_callback(b, free_cb, &rec), 0);
	assert_int_equal(xfer_batch_submit(b, &r, 1), 0);
	/* the batch may be gone any time now: only the record is read */
	assert_true(th_wait_atomic(&rec.calls, 1, 30000));
	assert_int_equal(atomic_load(&rec.free_ret), 0);
	assert_int_equal(th_check(F.buf[1] + ROFF, S, 90), -1);
}

/* Several threads submit to one engine at once ("any thread"). */
#define SUBMITTERS 4
#define ROUNDS 16
#define PER 16
#define CHUNK (16u << 10)

struct submitter {
	int idx;
	int err; /* 0, or the line that failed */
};

#define SUB_CHECK(c) \
	do { if (!(c)) { a->err = __LINE__; return NULL; } } while (0)

static void *submitter_main(void *arg)
{
	struct submitter *a = arg;
	/* each thread owns a disjoint PER * CHUNK range on both sides */
	size_t base = LOFF + (size_t)a->idx * PER * CHUNK;
	uint8_t *local = F.buf[0] + base, *remote = F.buf[1] + base;

	for (int round = 0; round < ROUNDS; round++) {
		struct xfer_request r[PER];
		struct xfer_task_status st;
		struct xfer_batch *b = xfer_batch_new(F.e[0], PER);
		uint64_t seed = 7000 + a->idx * 100 + round;
		bool w = round % 2 == 0;

		SUB_CHECK(b);
		for (int k = 0; k < PER; k++) {
			th_fill((w ? local : remote) + k * CHUNK, CHUNK, seed + k);
			r[k] = (struct xfer_request){
				w ? XFER_WRITE : XFER_READ, local + k * CHUNK,
				F.seg[0], F.raddr[0] + base + k * CHUNK, CHUNK };
		}
		SUB_CHECK(xfer_batch_submit(b, r, PER) == 0);
		SUB_CHECK(xfer_batch_wait(b, 30000) == 0);
		for (int k = 0; k < PER; k++) {
			SUB_CHECK(xfer_batch_status(b, k, &st) == 0);
			SUB_CHECK(st.status == XFER_COMPLETED);
			SUB_CHECK(st.transferred == CHUNK);
			SUB_CHECK(th_check((w ? remote : local) + k * CHUNK,
					   CHUNK, seed + k) == -1);
		}
		SUB_CHECK(xfer_batch_free(b) == 0);
	}
	return NULL;
}

static void test_concurrent_submitters(void **state)
{
	pthread_t th[SUBMITTERS];
	struct submitter a[SUBMITTERS];

	(void)state;
	for (int i = 0; i < SUBMITTERS; i++) {
		a[i] = (struct submitter){ .idx = i };
		assert_int_equal(pthread_create(&th[i], NULL, submitter_main,
						&a[i]), 0);
	}
	for (int i = 0; i < SUBMITTERS; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	for (int i = 0; i < SUBMITTERS; i++)
		if (a[i].err)
			fail_msg("submitter %d failed at line %d", i, a[i].err);
}

/* A buffer peers may not access is still a fine source or destination
 * for the engine's own requests. */
static void test_private_local_buffer(void **state)
{
	enum { S = 10000 };
	uint8_t *priv = th_alloc(2 * S);
	uint64_t tr;

	(void)state;
	assert_int_equal(xfer_register(F.e[0], priv, 2 * S, "cpu:0", false), 0);
	th_fill(priv, S, 95);
	memset(F.buf[1] + ROFF, 0, S);
	th_assert_status(th_xfer1(F.e[0], XFER_WRITE, priv, F.seg[0],
				  F.raddr[0] + ROFF, S, &tr), XFER_COMPLETED);
	assert_int_equal(th_check(F.buf[1] + ROFF, S, 95), -1);
	memset(priv + S, 0, S);
	th_assert_status(th_xfer1(F.e[0], XFER_READ, priv + S, F.seg[0],
				  F.raddr[0] + ROFF, S, &tr), XFER_COMPLETED);
	assert_int_equal(th_check(priv + S, S, 95), -1);
	assert_int_equal(xfer_unregister(F.e[0], priv), 0);
	free(priv);
}

/* xfer_engine_add_transport(): no such transport, or one every engine
 * starts, is refused; RDMA starts where the host has a device (then the
 * descriptor advertises it), else the engine runs on as it was. Either
 * way a batch made before goes on moving bytes over TCP. */
static void test_add_transport(void **state)
{
	struct xfer_batch *b = xfer_batch_new(F.e[0], 2);
	struct xfer_request r = { XFER_WRITE, F.buf[0] + LOFF, F.seg[0],
				  F.raddr[0] + ROFF, 4096 };
	struct xfer_task_status st;
	struct xfer_desc *d;
	int ret;

	(void)state;
	th_fill(F.buf[0] + LOFF, 4096, 96);
	assert_int_equal(xfer_batch_submit(b, &r, 1), 0);
	assert_int_equal(xfer_engine_add_transport(F.e[0], "tcp", NULL),
			 -EEXIST);
	assert_int_equal(xfer_engine_add_transport(F.e[0], "local", NULL),
			 -EINVAL);
	assert_int_equal(xfer_engine_add_transport(F.e[0], "nosuch", NULL),
			 -EINVAL);
	assert_int_equal(xfer_engine_add_transport(NULL, "rdma", NULL),
			 -EINVAL);
	ret = xfer_engine_add_transport(F.e[0], "rdma", NULL);
	d = th_fetch_desc(xfer_engine_rpc_port(F.e[0]));
	if (ret) {
		assert_int_equal(ret, -ENODEV);
		assert_non_null(strstr(xfer_engine_last_error(F.e[0]), "rdma"));
		assert_string_equal(d->protocol, "tcp");
	} else {
		assert_string_equal(d->protocol, "rdma");
		assert_int_equal(xfer_engine_add_transport(F.e[0], "rdma",
							   NULL), -EEXIST);
	}
	xfer_desc_free(d);
	assert_int_equal(xfer_batch_wait(b, 10000), 0);
	memset(F.buf[1] + ROFF, 0, 4096);
	assert_int_equal(xfer_batch_submit(b, &r, 1), 0);
	assert_int_equal(xfer_batch_wait(b, 10000), 0);
	assert_int_equal(xfer_batch_status(b, 1, &st), 0);
	th_assert_status(st.status, XFER_COMPLETED);
	assert_int_equal(th_check(F.buf[1] + ROFF, 4096, 96), -1);
	assert_int_equal(xfer_batch_free(b), 0);
}

/* An idle engine uses no CPU: no thread busy-polls. */
static void test_idle_engines_use_no_cpu(void **state)
{
	struct timespec s1 = { 1, 0 };
	double c0 = xfer_engine_cpu_seconds(F.e[0]) +
		    xfer_engine_cpu_seconds(F.e[1]);
	double c1;

	(void)state;
	assert_true(c0 > 0); /* they did work and have threads */
	nanosleep(&s1, NULL); /* measuring idleness, not a sync */
	c1 = xfer_engine_cpu_seconds(F.e[0]) + xfer_engine_cpu_seconds(F.e[1]);
	if (c1 - c0 > 0.02)
		fail_msg("two idle engines used %.3f s of CPU in 1 s", c1 - c0);
}

int main(void)
{
	const struct CMUnitTest one_worker[] = {
		cmocka_unit_test(test_rw_1B),
		cmocka_unit_test(test_rw_4KiB),
		cmocka_unit_test(test_rw_64KiB_plus_1),
		cmocka_unit_test(test_rw_16MiB),
		cmocka_unit_test(test_batch_1000),
		cmocka_unit_test(test_local_segment),
		cmocka_unit_test(test_open_same_name_same_id),
		cmocka_unit_test(test_batch_capacity),
		cmocka_unit_test(test_free_in_flight_ebusy),
		cmocka_unit_test(test_free_in_callback),
		cmocka_unit_test(test_concurrent_submitters),
		cmocka_unit_test(test_private_local_buffer),
		cmocka_unit_test(test_idle_engines_use_no_cpu),
		/* last: with RDMA, e[0] advertises it from then on */
		cmocka_unit_test(test_add_transport),
	};
	const struct CMUnitTest two_workers[] = {
		cmocka_unit_test(test_rw_1B),
		cmocka_unit_test(test_rw_4KiB),
		cmocka_unit_test(test_rw_64KiB_plus_1),
		cmocka_unit_test(test_rw_16MiB),
		cmocka_unit_test(test_batch_1000),
		cmocka_unit_test(test_local_segment),
		cmocka_unit_test(test_free_in_callback),
		cmocka_unit_test(test_concurrent_submitters),
	};
	int fails = 0;

	fails += cmocka_run_group_tests_name("transfer, 1 worker", one_worker,
					     setup_w1, teardown_engines);
	fails += cmocka_run_group_tests_name("transfer, 2 workers",
					     two_workers, setup_w2,
					     teardown_engines);
	return fails ? 1 : 0;
}
