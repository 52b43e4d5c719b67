/*
 * Batch cancel against a slow peer: a target engine reached through a
 * relay that moves a few MB/s, so a 1000-request batch is still on its
 * way when it is cancelled. Every task ends COMPLETED or CANCELED, the
 * callback runs exactly once, and no byte of a CANCELED task lands in
 * local memory after xfer_batch_cancel() returned. Cancelled from the
 * test's thread (READs of one slice, and of runs longer than the
 * scratch a canceled READ's payload goes to), and from inside another
 * batch's callback. And the
 * initiator freed with two batches on their way (one to notify at its
 * end): both outlive it, ended, their callbacks never called, and free.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xfer/xfer.h>

#include "test/helpers.h"
#include "test/th_async.h"

#define NREQ 1000
#define REQ_LEN (16u << 10)
#define LEN ((size_t)NREQ * REQ_LEN)
#define RATE (16u << 10)  /* bytes a millisecond, each way */
#define MARK 0xee

struct fixture {
	struct xfer_engine *t, *e;   /* the target; the initiator */
	struct th_proxy proxy;       /* to the target's data port */
	struct th_fake_hs hs;        /* names the proxy as the data port */
	uint8_t *tbuf, *ebuf, *snap;
	int64_t seg;                 /* through the relay */
	int64_t direct;              /* the target itself, no relay */
	struct xfer_request reqs[NREQ];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char name[32], *desc;
	uint16_t data_port;

	assert_non_null(f);
	f->t = th_engine(1);
	f->e = th_engine(1);
	f->tbuf = th_alloc(LEN);
	f->ebuf = th_alloc(LEN);
	f->snap = th_alloc(LEN);
	th_fill(f->tbuf, LEN, 11);
	assert_int_equal(xfer_register(f->t, f->tbuf, LEN, "cpu:0", true), 0);
	assert_int_equal(xfer_register(f->e, f->ebuf, LEN, "cpu:0", true), 0);
	desc = th_desc_json(xfer_engine_rpc_port(f->t), 0);
	data_port = (uint16_t)atoi(strstr(desc, "\"tcp_data_port\":") + 16);
	free(desc);
	th_proxy_start(&f->proxy, data_port, RATE);
	th_fake_hs_start(&f->hs, th_desc_json(xfer_engine_rpc_port(f->t),
					      f->proxy.s.port), 0);
	snprintf(name, sizeof(name), "127.0.0.1:%u", f->hs.s.port);
	f->seg = xfer_segment_open(f->e, name);
	assert_true(f->seg >= 0);
	f->direct = xfer_segment_open(f->e, xfer_engine_name(f->t));
	assert_true(f->direct >= 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	xfer_engine_free(f->e);
	th_fake_hs_stop(&f->hs);
	free((char *)f->hs.reply);
	th_proxy_stop(&f->proxy);
	assert_int_equal(th_unregister(f->t, f->tbuf), 0);
	xfer_engine_free(f->t);
	free(f->tbuf);
	free(f->ebuf);
	free(f->snap);
	free(f);
	return 0;
}

/* NREQ requests of @p op, request i at offset i * REQ_LEN both sides. */
static struct xfer_batch *submit_all(struct fixture *f, enum xfer_opcode op,
				     struct th_cbrec *rec)
{
	struct xfer_batch *b = xfer_batch_new(f->e, NREQ);

	for (size_t i = 0; i < NREQ; i++)
		f->reqs[i] = (struct xfer_request){
			op, f->ebuf + i * REQ_LEN, f->seg,
			(uintptr_t)f->tbuf + i * REQ_LEN, REQ_LEN,
		};
	assert_non_null(b);
	assert_int_equal(xfer_batch_set_callback(b, th_count_cb, rec), 0);
	assert_int_equal(xfer_batch_submit(b, f->reqs, NREQ), 0);
	return b;
}

/*
 * After the batch ended: every task COMPLETED (its bytes all there) or
 * CANCELED (its bytes as they were when the cancel returned), some of
 * each. @return the number cancelled.
 */
static size_t check_reads(struct fixture *f, struct xfer_batch *b)
{
	struct xfer_task_status st;
	size_t done = 0, canceled = 0;

	for (size_t i = 0; i < NREQ; i++) {
		size_t off = i * REQ_LEN;

		assert_int_equal(xfer_batch_status(b, i, &st), 0);
		if (st.status == XFER_COMPLETED) {
			done++;
			assert_int_equal(st.transferred, REQ_LEN);
			if (memcmp(f->ebuf + off, f->tbuf + off, REQ_LEN))
				fail_msg("task %zu COMPLETED, other bytes", i);
			continue;
		}
		th_assert_status(st.status, XFER_CANCELED);
		canceled++;
		if (memcmp(f->ebuf + off, f->snap + off, REQ_LEN))
			fail_msg("task %zu CANCELED, bytes landed after the "
				 "cancel returned", i);
	}
	printf("%zu completed, %zu cancelled\n", done, canceled);
	assert_true(done > 0);
	assert_true(canceled > 0);
	return canceled;
}

static void test_cancel_midway(void **state)
{
	struct fixture *f = *state;
	struct th_cbrec rec = { 0 };
	struct xfer_batch *b;

	memset(f->ebuf, MARK, LEN);
	b = submit_all(f, XFER_READ, &rec);
	usleep(300 * 1000);
	assert_int_equal(xfer_batch_cancel(b), 0);
	memcpy(f->snap, f->ebuf, LEN);
	assert_int_equal(xfer_batch_wait(b, 60000), 0);
	th_expect_callbacks(&rec, 1);
	th_assert_status(atomic_load(&rec.outcome), XFER_CANCELED);
	check_reads(f, b);
	/* a second cancel of an ended batch changes nothing */
	assert_int_equal(xfer_batch_cancel(b), 0);
	th_expect_callbacks(&rec, 1);
	assert_int_equal(xfer_batch_free(b), 0);
}

/*
 * The same with READs of 256 KiB, each a request of 128 KiB per
 * connection (adjacent slices go as one), longer than the buffer a
 * canceled READ's payload is read into: no task FAILED (its rest was
 * once read as the next replies), and a READ after them on the same
 * connections gets its bytes.
 */
static void test_cancel_long_reads(void **state)
{
	enum { N = 60, BIG = 256 << 10 };
	struct fixture *f = *state;
	struct xfer_batch *b = xfer_batch_new(f->e, N);
	struct xfer_task_status st;

	memset(f->ebuf, MARK, LEN);
	for (size_t i = 0; i < N; i++)
		f->reqs[i] = (struct xfer_request){ XFER_READ,
			f->ebuf + i * BIG, f->seg, (uintptr_t)f->tbuf +
			i * BIG, BIG };
	assert_int_equal(xfer_batch_submit(b, f->reqs, N), 0);
	usleep(300 * 1000);
	assert_int_equal(xfer_batch_cancel(b), 0);
	assert_int_equal(xfer_batch_wait(b, 60000), 0);
	for (size_t i = 0; i < N; i++) {
		assert_int_equal(xfer_batch_status(b, i, &st), 0);
		if (st.status != XFER_CANCELED)
			th_assert_status(st.status, XFER_COMPLETED);
	}
	assert_int_equal(xfer_batch_free(b), 0);
	memset(f->ebuf, MARK, BIG);
	th_assert_status(th_xfer1(f->e, XFER_READ, f->ebuf, f->seg,
				  (uintptr_t)f->tbuf, BIG, NULL),
			 XFER_COMPLETED);
	assert_memory_equal(f->ebuf, f->tbuf, BIG);
}

/* Cancel from inside a callback: a small batch's callback cancels the
 * large one and records when it returned. */
struct canceler {
	struct fixture *f;
	struct xfer_batch *victim;
	atomic_int done;
};

static void cancel_cb(struct xfer_batch *b, enum xfer_status st, void *arg)
{
	struct canceler *c = arg;

	(void)b;
	(void)st;
	xfer_batch_cancel(c->victim);
	memcpy(c->f->snap, c->f->ebuf, LEN);
	atomic_store(&c->done, 1);
}

static void test_cancel_in_callback(void **state)
{
	struct fixture *f = *state;
	struct th_cbrec rec = { 0 };
	struct canceler c = { .f = f };
	struct xfer_batch *b, *small = xfer_batch_new(f->e, 1);
	struct xfer_request r = {
		XFER_WRITE, f->ebuf, f->direct, (uintptr_t)f->tbuf, 1,
	};

	memset(f->ebuf, MARK, LEN);
	b = submit_all(f, XFER_READ, &rec);
	c.victim = b;
	usleep(300 * 1000);
	/* straight to the target: done while the reads crawl */
	assert_non_null(small);
	f->tbuf[0] = MARK;
	assert_int_equal(xfer_batch_set_callback(small, cancel_cb, &c), 0);
	assert_int_equal(xfer_batch_submit(small, &r, 1), 0);
	assert_int_equal(xfer_batch_wait(b, 60000), 0);
	assert_true(atomic_load(&c.done));
	th_expect_callbacks(&rec, 1);
	check_reads(f, b);
	assert_int_equal(xfer_batch_free(b), 0);
	assert_int_equal(xfer_batch_wait(small, 1000), 0);
	assert_int_equal(xfer_batch_free(small), 0);
	th_fill(f->tbuf, LEN, 11);
}

/* WRITEs: cancelled midway, each ends COMPLETED or CANCELED, once. */
static void test_cancel_writes(void **state)
{
	struct fixture *f = *state;
	struct th_cbrec rec = { 0 };
	struct xfer_task_status st;
	struct xfer_batch *b;
	size_t canceled = 0;

	th_fill(f->ebuf, LEN, 12);
	b = submit_all(f, XFER_WRITE, &rec);
	usleep(300 * 1000);
	assert_int_equal(xfer_batch_cancel(b), 0);
	assert_int_equal(xfer_batch_wait(b, 60000), 0);
	th_expect_callbacks(&rec, 1);
	for (size_t i = 0; i < NREQ; i++) {
		assert_int_equal(xfer_batch_status(b, i, &st), 0);
		if (st.status == XFER_CANCELED) {
			canceled++;
			continue;
		}
		th_assert_status(st.status, XFER_COMPLETED);
		assert_int_equal(memcmp(f->tbuf + i * REQ_LEN,
					f->ebuf + i * REQ_LEN, REQ_LEN), 0);
	}
	assert_true(canceled > 0);
	assert_int_equal(xfer_batch_free(b), 0);
	th_fill(f->tbuf, LEN, 11);
}

/* Every task of @p b terminal, and not COMPLETED all: the batch was cut
 * off. */
static void assert_cut_off(struct xfer_batch *b)
{
	struct xfer_task_status st;
	size_t done = 0;

	assert_int_equal(xfer_batch_size(b), NREQ);
	for (size_t i = 0; i < NREQ; i++) {
		assert_int_equal(xfer_batch_status(b, i, &st), 0);
		if (st.status == XFER_COMPLETED)
			done++;
		else if (st.status != XFER_CANCELED)
			th_assert_status(st.status, XFER_FAILED);
	}
	assert_true(done < NREQ);
}

static void test_engine_freed_midway(void **state)
{
	struct fixture *f = *state;
	struct th_cbrec rec = { 0 }, nrec = { 0 };
	struct xfer_batch *b, *nb = xfer_batch_new(f->e, NREQ);

	b = submit_all(f, XFER_READ, &rec);
	assert_non_null(nb);
	assert_int_equal(xfer_batch_set_callback(nb, th_count_cb, &nrec), 0);
	assert_int_equal(xfer_batch_submit_notify(nb, f->reqs, NREQ, "n",
						  "cut off"), 0);
	usleep(300 * 1000);
	xfer_engine_free(f->e);
	f->e = NULL;
	/* ended at once, never called back */
	assert_int_equal(xfer_batch_wait(b, 0), 0);
	assert_int_equal(xfer_batch_wait(nb, 0), 0);
	assert_cut_off(b);
	assert_cut_off(nb);
	usleep(200 * 1000);
	assert_int_equal(atomic_load(&rec.calls), 0);
	assert_int_equal(atomic_load(&nrec.calls), 0);
	assert_int_equal(xfer_batch_submit(b, f->reqs, 1), -ESHUTDOWN);
	assert_int_equal(xfer_batch_submit_notify(nb, f->reqs, 1, "n", "m"),
			 -ESHUTDOWN);
	assert_int_equal(xfer_batch_cancel(b), 0);
	/* and go (LeakSanitizer in make test-asan sees the rest) */
	assert_int_equal(xfer_batch_free(b), 0);
	assert_int_equal(xfer_batch_free(nb), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_cancel_midway, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_cancel_long_reads, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_cancel_in_callback, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_engine_freed_midway, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_cancel_writes, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
