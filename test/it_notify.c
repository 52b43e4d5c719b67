/*
 * Notifications between two processes over TCP: a forked peer engine
 * (test/th_notify.c) receives what this process's engine sends with
 * xfer_notify(), xfer_notify_async() and xfer_batch_submit_notify(), and
 * reports what arrived, in order, and whether a batch's data was in its
 * memory when the batch's notification came.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test/helpers.h"
#include "test/th_notify.h"

#define NREQ 8                          /* requests of a notifying batch */
#define SPAN ((1u << 20) + 12345)       /* bytes it writes */
#define ROFF 4099u                      /* where, in the peer's buffer */
#define NBURST 64                       /* xfer_notify_async() at once */
#define NRTT 10000

static struct {
	struct peer p;
	struct xfer_engine *e;
	uint8_t *lbuf;                  /* SPAN bytes, registered */
	int64_t seg;                    /* the peer's segment */
	uint64_t raddr, rlen;           /* its buffer */
} F;

static int setup(void **state)
{
	(void)state;
	peer_start(&F.p); /* before this process has engine threads */
	F.e = th_engine(1);
	F.lbuf = th_alloc(SPAN);
	assert_int_equal(xfer_register(F.e, F.lbuf, SPAN, "cpu:0", true), 0);
	F.seg = xfer_segment_open(F.e, F.p.name);
	assert_true(F.seg >= 0);
	assert_int_equal(xfer_segment_buffer(F.e, F.seg, 0, &F.raddr, &F.rlen,
					     NULL), 0);
	assert_int_equal(F.rlen, PEER_BUF);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	if (F.p.pid > 0)
		peer_kill(&F.p);
	xfer_engine_free(F.e);
	free(F.lbuf);
	return 0;
}

/* ---- what is sent ---- */

struct note {
	const char *name, *msg;
};

static const char empty_body[] = "{\"name\":\"\",\"notify_msg\":\"\"}\n";

/*
 * The longest message of plain letters that @p name can carry: a Notify
 * frame holds the type byte and the JSON body, at most handshake_max_len
 * bytes in all (PROTOCOL.md §1).
 */
static size_t msg_max(const char *name)
{
	struct xfer_config *cfg = th_config();
	size_t max = strtoull(xfer_config_get(cfg, "handshake_max_len"), NULL,
			      10);

	xfer_config_free(cfg);
	return max - 1 - (sizeof(empty_body) - 1) - strlen(name);
}

/* @p len letters, malloc'd. */
static char *letters(size_t len)
{
	char *s = malloc(len + 1);

	assert_non_null(s);
	for (size_t i = 0; i < len; i++)
		s[i] = (char)('a' + i * 7 % 26);
	s[len] = '\0';
	return s;
}

#define BIG "big"
#define LONG_NAME 8192                  /* longer than any name in a desc */

/* Notes that test the encoding, a long name (@p name: LONG_NAME letters)
 * and, last, a message as long as a frame allows (@p big: msg_max(BIG)
 * letters). @return how many, in @p v. */
static size_t note_list(struct note *v, const char *name, const char *big)
{
	static const struct note fixed[] = {
		{ "first", "hello" },
		{ "empty", "" },
		{ "", "no name" },
		{ "quotes", "\"quoted\" \\back\\slash\\ \\\" / {\"json\":[1]}" },
		{ "ctl", "tab\there\nnewline\r\x01\x1f end" },
		{ "utf8 \xe2\x9c\x93", "na\xc3\xafve caf\xc3\xa9 \xe2\x80\x94 "
		  "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x9a\x80" },
	};
	size_t n = sizeof(fixed) / sizeof(fixed[0]);

	memcpy(v, fixed, sizeof(fixed));
	v[n++] = (struct note){ name, "long name" };
	v[n++] = (struct note){ BIG, big };
	return n;
}

#define NOTES_MAX 9

/* @p got holds @p want's notes first, in order, intact, each taken by
 * the peer's callback on its callback base if @p on_base. */
static void expect_notes(const struct peer_note *got, const struct note *want,
			 size_t n, bool on_base)
{
	for (size_t i = 0; i < n; i++) {
		assert_string_equal(got[i].name, want[i].name);
		assert_int_equal(strlen(got[i].msg), strlen(want[i].msg));
		assert_string_equal(got[i].msg, want[i].msg);
		assert_int_equal(got[i].on_base, on_base);
	}
}

/* ---- 1. xfer_notify(), xfer_notify_async(): to a callback, to pop ---- */

struct slot {
	atomic_int calls, result;
};

static struct slot slots[NBURST], refused;
static atomic_int slots_done;

static void slot_cb(struct xfer_engine *e, int result, void *arg)
{
	struct slot *s = arg;

	(void)e;
	atomic_store(&s->result, result);
	atomic_fetch_add(&s->calls, 1);
	atomic_fetch_add(&slots_done, 1);
}

/* Refused at the call: too long, NULL, unknown segment; nothing sent. */
static void expect_refused(const char *big)
{
	char *over = letters(strlen(big) + 1);
	struct xfer_request r = { XFER_WRITE, F.lbuf, F.seg, F.raddr, 1 };
	struct xfer_batch *b = xfer_batch_new(F.e, 1);

	assert_int_equal(xfer_notify(F.e, F.seg, BIG, over), -EMSGSIZE);
	assert_int_equal(xfer_notify_async(F.e, F.seg, BIG, over, slot_cb,
					   &refused), -EMSGSIZE);
	assert_non_null(b);
	assert_int_equal(xfer_batch_submit_notify(b, &r, 1, BIG, over),
			 -EMSGSIZE);
	assert_int_equal(xfer_batch_size(b), 0);
	assert_int_equal(xfer_batch_free(b), 0);
	assert_int_equal(xfer_notify(F.e, F.seg, NULL, "x"), -EINVAL);
	assert_int_equal(xfer_notify(F.e, F.seg, "x", NULL), -EINVAL);
	assert_int_equal(xfer_notify(F.e, F.seg + 100, "x", "y"), -ENOENT);
	free(over);
}

static void test_notify_callback(void **state)
{
	char *big = letters(msg_max(BIG)), *name = letters(LONG_NAME);
	struct note v[NOTES_MAX + 1];
	size_t n = note_list(v, name, big), got;
	struct peer_note *pn;
	char msg[NBURST][16];
	bool seen[NBURST] = { false };

	(void)state;
	assert_int_equal(peer_cmd(&F.p, PEER_CALLBACK), 0);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(xfer_notify(F.e, F.seg, v[i].name, v[i].msg),
				 0);
	expect_refused(big);
	v[n++] = (struct note){ "end", "" }; /* nothing came in between */
	assert_int_equal(xfer_notify(F.e, F.seg, "end", ""), 0);

	/* a burst of asynchronous ones: each callback once, with 0 */
	atomic_store(&slots_done, 0);
	memset(slots, 0, sizeof(slots));
	for (int i = 0; i < NBURST; i++) {
		snprintf(msg[i], sizeof(msg[i]), "async %d", i);
		assert_int_equal(xfer_notify_async(F.e, F.seg, "async", msg[i],
						   slot_cb, &slots[i]), 0);
	}
	assert_true(th_wait_atomic(&slots_done, NBURST, 10000));
	for (int i = 0; i < NBURST; i++) {
		assert_int_equal(atomic_load(&slots[i].calls), 1);
		assert_int_equal(atomic_load(&slots[i].result), 0);
	}

	got = peer_collect(&F.p, (unsigned)(n + NBURST), 10000, &pn);
	assert_int_equal(got, n + NBURST);
	expect_notes(pn, v, n, true);
	/* concurrent sends may arrive in any order: each exactly once */
	for (size_t i = n; i < got; i++) {
		int k = -1;

		assert_string_equal(pn[i].name, "async");
		assert_int_equal(sscanf(pn[i].msg, "async %d", &k), 1);
		assert_true(k >= 0 && k < NBURST && !seen[k]);
		assert_string_equal(pn[i].msg, msg[k]);
		assert_true(pn[i].on_base);
		seen[k] = true;
	}
	peer_notes_free(pn, got);
	assert_int_equal(peer_collect(&F.p, 1, 200, &pn), 0); /* no more */
	free(pn);
	assert_int_equal(atomic_load(&refused.calls), 0);
	peer_stop(&F.p);
	free(name);
	free(big);
}

/* Each xfer_notify_async() from the previous one's callback, so in order. */
struct chain {
	const struct note *v;
	size_t n, next;
	int err, deadlk;
	atomic_int done;
};

static void chain_cb(struct xfer_engine *e, int result, void *arg)
{
	struct chain *c = arg;
	int ret;

	if (c->next == 1) /* the callback base: a blocking call is refused */
		c->deadlk = xfer_notify(e, F.seg, "x", "y");
	if (result || c->next == c->n) {
		c->err = result;
		atomic_store(&c->done, 1);
		return;
	}
	ret = xfer_notify_async(e, F.seg, c->v[c->next].name,
				c->v[c->next].msg, chain_cb, c);
	c->next++;
	if (ret) {
		c->err = ret;
		atomic_store(&c->done, 1);
	}
}

static void test_notify_pop(void **state)
{
	char *big = letters(msg_max(BIG)), *name = letters(LONG_NAME);
	struct note v[NOTES_MAX];
	struct chain c = { .v = v, .next = 1 };
	struct peer_note *pn;
	size_t got;

	(void)state;
	c.n = note_list(v, name, big);
	assert_int_equal(xfer_notify_async(F.e, F.seg, v[0].name, v[0].msg,
					   chain_cb, &c), 0);
	assert_true(th_wait_atomic(&c.done, 1, 20000));
	assert_int_equal(c.err, 0);
	assert_int_equal(c.next, c.n);
	assert_int_equal(c.deadlk, -EDEADLK);

	/* every one acknowledged is queued: the peer drains them */
	got = peer_collect(&F.p, (unsigned)c.n, 0, &pn);
	assert_int_equal(got, c.n);
	expect_notes(pn, v, c.n, false);
	peer_notes_free(pn, got);
	assert_int_equal(peer_collect(&F.p, 1, 200, &pn), 0);
	free(pn);
	peer_stop(&F.p);
	free(name);
	free(big);
}

/* ---- 2. xfer_batch_submit_notify() ---- */

/*
 * Write th_fill(@p seed) over the peer's [ROFF, ROFF+SPAN) in NREQ requests
 * of uneven lengths, with notification "batch", "check SEED ROFF SPAN";
 * request @p invalid (if < NREQ) points past the peer's buffer.
 */
static void submit_pattern(struct xfer_batch *b, uint64_t seed,
			   size_t invalid, char *msg, size_t cap)
{
	struct xfer_request r[NREQ];
	size_t off = 0;

	th_fill(F.lbuf, SPAN, seed);
	for (size_t i = 0; i < NREQ; i++) {
		size_t end = (size_t)((uint64_t)SPAN * (i + 1) * (i + 1) /
				      (NREQ * NREQ));

		r[i] = (struct xfer_request){ XFER_WRITE, F.lbuf + off, F.seg,
					      F.raddr + ROFF + off, end - off };
		if (i == invalid)
			r[i].target_offset = F.raddr + F.rlen - 1;
		off = end;
	}
	snprintf(msg, cap, "check %llu %u %u", (unsigned long long)seed, ROFF,
		 SPAN);
	assert_int_equal(xfer_batch_submit_notify(b, r, NREQ, "batch", msg), 0);
}

/* Tasks [first, first+NREQ) of @p b are all COMPLETED within 5 s. */
static void wait_completed(struct xfer_batch *b, size_t first)
{
	int64_t end = th_now_ms() + 5000;
	struct xfer_task_status st;
	struct timespec ms = { 0, 1000000 };

	for (size_t i = first; i < first + NREQ; i++) {
		for (;;) {
			assert_int_equal(xfer_batch_status(b, i, &st), 0);
			if (st.status != XFER_WAITING || th_now_ms() > end)
				break;
			nanosleep(&ms, NULL);
		}
		th_assert_status(st.status, XFER_COMPLETED);
	}
}

/* The peer got one notification, "batch" @p msg, by its callback, and
 * the batch's bytes were all in its memory when it came. */
static void expect_checked(const char *msg)
{
	struct peer_note *pn;
	size_t got = peer_collect(&F.p, 1, 5000, &pn);

	assert_int_equal(got, 1);
	assert_string_equal(pn[0].name, "batch");
	assert_string_equal(pn[0].msg, msg);
	assert_true(pn[0].on_base);
	assert_int_equal(pn[0].bad, -1);
	peer_notes_free(pn, got);
}

/* A batch of @p cap tasks whose callback is th_count_cb(@p r). */
static struct xfer_batch *notify_batch(size_t cap, struct th_cbrec *r)
{
	struct xfer_batch *b = xfer_batch_new(F.e, cap);

	assert_non_null(b);
	assert_int_equal(xfer_batch_set_callback(b, th_count_cb, r), 0);
	return b;
}

/*
 * The round of tasks [first, first+NREQ) of @p b ends within 10 s: its
 * callback comes, the @p calls-th time, with @p outcome; every task ends
 * @p st but task @p invalid (if < NREQ), which is INVALID.
 */
static void expect_round(struct xfer_batch *b, struct th_cbrec *r, int calls,
			 enum xfer_status outcome, size_t first,
			 enum xfer_status st, size_t invalid)
{
	struct xfer_task_status ts;

	assert_int_equal(xfer_batch_wait(b, 10000), 0);
	th_expect_callbacks(r, calls);
	th_assert_status(atomic_load(&r->outcome), outcome);
	for (size_t i = 0; i < NREQ; i++) {
		assert_int_equal(xfer_batch_status(b, first + i, &ts), 0);
		th_assert_status(ts.status, i == invalid ? XFER_INVALID : st);
	}
}

/* One round that completes and notifies, on a batch with callback @p r. */
static void round_ok(struct xfer_batch *b, struct th_cbrec *r, uint64_t seed)
{
	int calls = atomic_load(&r->calls);
	size_t first = xfer_batch_size(b);
	char msg[64];

	submit_pattern(b, seed, NREQ, msg, sizeof(msg));
	expect_round(b, r, calls + 1, XFER_COMPLETED, first, XFER_COMPLETED,
		     NREQ);
	expect_checked(msg);
}

/* With the peer's control thread held: the data lands, the notification
 * waits for its acknowledgement, the callback waits for it. */
static void round_held(struct xfer_batch *b, struct th_cbrec *r,
		       uint64_t seed, char *msg, size_t cap)
{
	size_t first = xfer_batch_size(b);
	int calls = atomic_load(&r->calls);
	struct timespec pause = { 0, 300 * 1000000 };

	assert_int_equal(peer_cmd(&F.p, PEER_HOLD), 0);
	submit_pattern(b, seed, NREQ, msg, cap);
	wait_completed(b, first);
	nanosleep(&pause, NULL);
	assert_int_equal(atomic_load(&r->calls), calls);
	assert_int_equal(xfer_batch_wait(b, 0), -ETIMEDOUT);
	assert_int_equal(xfer_batch_free(b), -EBUSY);
}

static void test_batch_notify(void **state)
{
	struct th_cbrec r = { 0 };
	struct xfer_batch *b = notify_batch(4 * NREQ, &r);
	char msg[64];

	(void)state;
	assert_int_equal(peer_cmd(&F.p, PEER_CALLBACK), 0);
	round_ok(b, &r, 11);

	round_held(b, &r, 12, msg, sizeof(msg));
	assert_int_equal(peer_cmd(&F.p, PEER_GO), 0);
	expect_round(b, &r, 2, XFER_COMPLETED, NREQ, XFER_COMPLETED, NREQ);
	expect_checked(msg);

	round_ok(b, &r, 13); /* the batch takes another notifying round */
	assert_int_equal(xfer_batch_free(b), 0);
	peer_stop(&F.p);
}

static void test_batch_notify_invalid(void **state)
{
	struct th_cbrec r = { 0 };
	struct xfer_batch *b = notify_batch(NREQ, &r);
	struct peer_note *pn;
	char msg[64];

	(void)state;
	assert_int_equal(peer_cmd(&F.p, PEER_CALLBACK), 0);
	submit_pattern(b, 21, 3, msg, sizeof(msg));
	expect_round(b, &r, 1, XFER_INVALID, 0, XFER_COMPLETED, 3);
	assert_int_equal(peer_collect(&F.p, 1, 1000, &pn), 0);
	free(pn);
	assert_int_equal(xfer_batch_free(b), 0);

	/* the next batch's notification is the only one that comes */
	b = notify_batch(NREQ, &r);
	round_ok(b, &r, 22);
	assert_int_equal(xfer_batch_free(b), 0);
	peer_stop(&F.p);
}

/* ---- 3. a peer that is gone ---- */

static void test_dead_peer(void **state)
{
	struct th_cbrec r = { 0 };
	struct xfer_batch *b = notify_batch(4 * NREQ, &r);
	char msg[64];
	int64_t t0;
	int ret;

	(void)state;
	assert_int_equal(peer_cmd(&F.p, PEER_CALLBACK), 0);
	round_ok(b, &r, 31);

	/* it dies while a batch's notification waits for its answer: the
	 * tasks completed, the batch FAILED */
	round_held(b, &r, 32, msg, sizeof(msg));
	peer_kill(&F.p);
	expect_round(b, &r, 2, XFER_FAILED, NREQ, XFER_COMPLETED, NREQ);
	assert_non_null(strstr(xfer_engine_last_error(F.e), "notify"));
	print_message("batch notify to a killed peer: %s\n",
		      xfer_engine_last_error(F.e));

	/* a notification to it now */
	t0 = th_now_ms();
	ret = xfer_notify(F.e, F.seg, "late", "anyone?");
	print_message("notify to a dead peer: %d (%s) in %lld ms\n", ret,
		      strerror(-ret), (long long)(th_now_ms() - t0));
	assert_int_equal(ret, -ECONNREFUSED);
	assert_true(th_now_ms() - t0 < 5000);

	/* a batch with a notification: its data fails, it ends */
	t0 = th_now_ms();
	submit_pattern(b, 33, NREQ, msg, sizeof(msg));
	expect_round(b, &r, 3, XFER_FAILED, 2 * NREQ, XFER_FAILED, NREQ);
	assert_true(th_now_ms() - t0 < 10000);
	assert_int_equal(xfer_batch_free(b), 0);
}

/* ---- 4. an engine freed with a notification out ---- */

static void gone_cb(struct xfer_engine *e, int result, void *arg)
{
	(void)e;
	(void)result;
	atomic_fetch_add((atomic_int *)arg, 1);
}

/* The peer holds its control thread, so the notification waits for its
 * answer while the engine is freed: the notification goes before the
 * segment it holds does (a use after free under make test-asan before). */
static void test_free_with_notify_out(void **state)
{
	struct xfer_engine *e = th_engine(1);
	int64_t seg = xfer_segment_open(e, F.p.name);
	struct timespec pause = { 0, 200 * 1000000 };
	atomic_int calls = 0;

	(void)state;
	assert_true(seg >= 0);
	assert_int_equal(peer_cmd(&F.p, PEER_HOLD), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(xfer_notify_async(e, seg, "gone", "soon",
						   gone_cb, &calls), 0);
	nanosleep(&pause, NULL);
	xfer_engine_free(e);
	assert_true(atomic_load(&calls) <= 4);
	assert_int_equal(peer_cmd(&F.p, PEER_GO), 0);
}

/* ---- 5. round trip ---- */

static int cmp_ns(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void test_rtt(void **state)
{
	int64_t *ns = calloc(NRTT, sizeof(*ns)), t0;
	struct peer_note *pn;
	char msg[16];
	size_t got;

	(void)state;
	assert_non_null(ns);
	assert_int_equal(peer_cmd(&F.p, PEER_CALLBACK), 0);
	for (int i = 0; i < NRTT; i++) {
		snprintf(msg, sizeof(msg), "%d", i);
		t0 = now_ns();
		assert_int_equal(xfer_notify(F.e, F.seg, "rtt", msg), 0);
		ns[i] = now_ns() - t0;
	}
	qsort(ns, NRTT, sizeof(*ns), cmp_ns);
	print_message("notify rtt: median %.1f us, p99 %.1f us (%d)\n",
		      ns[NRTT / 2] / 1e3, ns[NRTT * 99 / 100] / 1e3, NRTT);
	got = peer_collect(&F.p, NRTT, 10000, &pn);
	assert_int_equal(got, NRTT);
	for (int i = 0; i < NRTT; i++) {
		snprintf(msg, sizeof(msg), "%d", i);
		assert_string_equal(pn[i].msg, msg);
	}
	peer_notes_free(pn, got);
	peer_stop(&F.p);
	free(ns);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_notify_callback, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_notify_pop, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_batch_notify, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_batch_notify_invalid,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_dead_peer, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_free_with_notify_out,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_rtt, setup, teardown),
	};

	return cmocka_run_group_tests_name("notify", tests, NULL, NULL);
}
