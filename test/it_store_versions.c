/*
 * The store client's upserts, versions, sync and removal by pattern
 * (include/xfer/store.h) against a real xfer-stored, with a writer in
 * another process: an upsert replaces where a put keeps; zero-copy and
 * batched upserts of several parts; get with min_version fails with the
 * version there; sync answers the last version, also in its
 * asynchronous form; replica descriptors and clears; byte ranges; a
 * reader racing a process that upserts one key
 * over and over only ever reads one whole value, never older than the
 * last it read. Every byte read back is checked.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xfer/store.h>

#include "test/helpers.h"
#include "test/th_store.h"

#define MiB (1u << 20)
#define SEG (64 * MiB)
#define STAGE (4 * MiB)

/* Read @p key (@p len bytes, whole) as variant @p v: 1 if it is. */
static int is_variant(struct xfer_kv *kv, const char *key, size_t len,
		      uint64_t v, uint64_t *version)
{
	uint8_t *buf = malloc(len);
	int64_t got;
	int ok;

	assert_non_null(buf);
	got = xfer_kv_get_version(kv, key, buf, len, 0, 0, version);
	assert_int_equal(got, len);
	ok = th_check(buf, len, th_seed(key, v)) < 0;
	free(buf);
	return ok;
}

static void test_upsert(void **state)
{
	struct xfer_kv_replicate rc = { .replica_num = 1 };
	const char *keys[] = { "b/1", "b/2", "b/3" };
	static uint8_t parts[3][2][5000];
	struct iovec iov[6];
	size_t iovcnt[3] = { 2, 2, 2 };
	int64_t results[3] = { 1, 1, 1 };
	uint8_t *buf = malloc(3 * MiB), one[16];
	uint64_t version = 99;
	struct xfer_kv *kv;

	(void)state;
	assert_non_null(buf);
	th_master_start(NULL);
	kv = th_kv(SEG, STAGE);
	assert_int_equal(xfer_kv_sync(kv), 0);
	assert_int_equal(th_put_pattern(kv, "k", MiB + 13, 1, 1, false), 0);
	/* a put keeps what is there; an upsert replaces it */
	assert_int_equal(th_put_pattern(kv, "k", MiB + 13, 2, 1, false), 0);
	assert_true(is_variant(kv, "k", MiB + 13, 1, &version));
	assert_int_equal(version, 1);
	th_fill(buf, 2 * MiB, th_seed("k", 2));
	assert_int_equal(xfer_kv_upsert(kv, "k", buf, 2 * MiB, &rc), 0);
	assert_int_equal(xfer_kv_get_size(kv, "k"), 2 * MiB);
	assert_true(is_variant(kv, "k", 2 * MiB, 2, &version));
	assert_int_equal(version, 2);
	/* zero-copy */
	assert_int_equal(xfer_kv_register_buffer(kv, buf, 3 * MiB), 0);
	th_fill(buf, 3 * MiB, th_seed("k", 3));
	assert_int_equal(xfer_kv_upsert_from(kv, "k", buf, 3 * MiB, NULL), 0);
	memset(buf, 0, 3 * MiB);
	assert_int_equal(xfer_kv_get_version(kv, "k", buf, 3 * MiB,
					     XFER_KV_ZERO_COPY, 3, &version),
			 3 * MiB);
	assert_int_equal(version, 3);
	assert_true(th_check(buf, 3 * MiB, th_seed("k", 3)) < 0);
	assert_int_equal(xfer_kv_unregister_buffer(kv, buf), 0);

	/* min_version: the version there when it is older, or 0 */
	assert_int_equal(xfer_kv_get_version(kv, "k", buf, 3 * MiB, 0, 4,
					     &version),
			 XFER_KV_VERSION_TOO_OLD);
	assert_int_equal(version, 3);
	assert_int_equal(xfer_kv_get_version(kv, "none", buf, 3 * MiB, 0, 1,
					     &version),
			 XFER_KV_OBJECT_NOT_FOUND);
	assert_int_equal(version, 0);
	assert_int_equal(xfer_kv_get_version(kv, "k", one, sizeof(one), 0, 0,
					     NULL), XFER_KV_INVALID_PARAMS);
	assert_int_equal(xfer_kv_get_version(kv, "k", buf, 3 * MiB, 2, 0,
					     NULL), XFER_KV_INVALID_PARAMS);

	/* batched, two parts each: new keys, then replaced */
	for (int round = 1; round <= 2; round++) {
		for (int i = 0; i < 3; i++) {
			th_fill(parts[i], sizeof(parts[i]),
				th_seed(keys[i], round));
			iov[2 * i] = (struct iovec){ parts[i][0], 5000 };
			iov[2 * i + 1] = (struct iovec){ parts[i][1], 5000 };
		}
		assert_int_equal(xfer_kv_batch_upsert(kv, 3, keys, iov, iovcnt,
						      0, NULL, results), 0);
		for (int i = 0; i < 3; i++) {
			assert_int_equal(results[i], 0);
			assert_true(is_variant(kv, keys[i], 10000, round,
					       &version));
			assert_int_equal(version, 3 + 3 * (round - 1) + i + 1);
		}
	}
	assert_int_equal(xfer_kv_sync(kv), 9);
	assert_int_equal(xfer_kv_batch_upsert(kv, 1, keys, iov, iovcnt, 2,
					      NULL, results),
			 XFER_KV_INVALID_PARAMS);
	assert_int_equal(xfer_kv_upsert(kv, "", buf, 10, NULL),
			 XFER_KV_INVALID_PARAMS);
	assert_int_equal(xfer_kv_upsert(kv, "z", buf, 0, NULL),
			 XFER_KV_INVALID_PARAMS);

	/* removal by pattern: leased ones only forced */
	assert_int_equal(xfer_kv_remove_by_regex(kv, "^b/[12]$", false), 0);
	assert_int_equal(xfer_kv_remove_by_regex(kv, "^b/[12]$", true), 2);
	assert_int_equal(xfer_kv_exist(kv, "b/1"), 0);
	assert_int_equal(xfer_kv_exist(kv, "b/3"), 1);
	assert_int_equal(xfer_kv_remove_by_regex(kv, "(", true),
			 XFER_KV_INVALID_PARAMS);
	assert_int_equal(xfer_kv_remove_by_regex(kv, "", true),
			 XFER_KV_INVALID_PARAMS);
	assert_int_equal(xfer_kv_remove_by_regex(kv, NULL, true),
			 XFER_KV_INVALID_PARAMS);
	assert_int_equal(xfer_kv_remove_by_regex(kv, ".", true), 2);
	assert_int_equal(xfer_kv_sync(kv), 9);   /* removals take none */
	assert_int_equal(xfer_kv_free(kv), 0);
	free(buf);
}

struct rec {
	atomic_int calls;
	_Atomic int64_t result;
	_Atomic uint64_t seen;                 /* *version when called */
	uint64_t *version;
};

static void on_done(struct xfer_kv *kv, int64_t result, void *arg)
{
	struct rec *r = arg;

	(void)kv;
	r->result = result;
	if (r->version)
		r->seen = *r->version;
	atomic_fetch_add(&r->calls, 1);
}

/* The asynchronous forms: a put in another process is seen after a
 * sync; the version is stored before the callback. */
static void test_async(void **state)
{
	struct th_sizes writer = { 0, STAGE };
	static uint8_t val[8192], back[8192];
	uint64_t version = 0;
	struct rec r = { .version = &version };
	struct th_proc w;
	struct xfer_kv *kv;
	char wname[64];

	(void)state;
	th_master_start(NULL);
	kv = th_kv(SEG, STAGE);
	th_kv_proc_start(&w, &writer, wname);
	assert_int_equal(th_kv_cmd(&w, "put far 8192 5"), 0);
	assert_int_equal(xfer_kv_sync_async(kv, on_done, &r), 0);
	assert_true(th_wait_atomic(&r.calls, 1, 10000));
	assert_int_equal(r.result, 1);
	assert_int_equal(xfer_kv_get_version_async(kv, "far", back,
						   sizeof(back), 0, 1,
						   &version, on_done, &r), 0);
	assert_true(th_wait_atomic(&r.calls, 2, 10000));
	assert_int_equal(r.result, 8192);
	assert_int_equal(r.seen, 1);
	assert_true(th_check(back, sizeof(back), th_seed("far", 5)) < 0);
	th_fill(val, sizeof(val), 7);
	assert_int_equal(xfer_kv_upsert_async(kv, "far", val, sizeof(val),
					      NULL, on_done, &r), 0);
	assert_true(th_wait_atomic(&r.calls, 3, 10000));
	assert_int_equal(r.result, 0);
	assert_int_equal(th_kv_cmd(&w, "get far 8192 5"), -9999);
	assert_int_equal(xfer_kv_remove_by_regex_async(kv, "^f", true,
						       on_done, &r), 0);
	assert_true(th_wait_atomic(&r.calls, 4, 10000));
	assert_int_equal(r.result, 1);
	assert_int_equal(xfer_kv_sync_async(kv, NULL, NULL),
			 XFER_KV_INVALID_PARAMS);
	assert_int_equal(xfer_kv_upsert_async(kv, "x", val, 1, NULL, NULL,
					      NULL), XFER_KV_INVALID_PARAMS);
	th_kv_proc_stop(&w);
	assert_int_equal(xfer_kv_free(kv), 0);
}

/* Replica descriptors: where each replica lies, the own one readable at
 * its address in this process. */
static void test_replica_desc(void **state)
{
	struct th_sizes holder = { SEG, STAGE };
	struct xfer_kv_replica_desc d[3 * 16];
	const char *keys[] = { "d", "none", "e" };
	const char *me;
	int64_t results[3];
	struct th_proc h;
	char hname[64];
	struct xfer_kv *kv;
	int own = -1;

	(void)state;
	th_master_start(NULL);
	kv = th_kv(SEG, STAGE);
	me = xfer_engine_name(xfer_kv_engine(kv));
	th_kv_proc_start(&h, &holder, hname);
	assert_int_equal(th_put_pattern(kv, "d", 70000, 3, 2, false), 0);
	assert_int_equal(th_put_pattern(kv, "e", 100, 4, 1, false), 0);
	assert_int_equal(xfer_kv_get_replica_desc(kv, "d", d), 2);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(d[i].size, 70000);
		if (!strcmp(d[i].endpoint, me))
			own = i;
		else
			assert_string_equal(d[i].endpoint, hname);
	}
	assert_true(own >= 0);
	assert_true(th_check((const void *)(uintptr_t)d[own].addr, 70000,
			     th_seed("d", 3)) < 0);
	assert_int_equal(xfer_kv_get_replica_desc(kv, "none", d),
			 XFER_KV_OBJECT_NOT_FOUND);
	assert_int_equal(xfer_kv_batch_get_replica_desc(kv, 3, keys, d,
							results),
			 XFER_KV_OBJECT_NOT_FOUND);
	assert_int_equal(results[0], 2);
	assert_int_equal(results[1], XFER_KV_OBJECT_NOT_FOUND);
	assert_int_equal(results[2], 1);
	assert_int_equal(d[32].size, 100);
	assert_int_equal(xfer_kv_batch_get_replica_desc(kv, 3, keys, NULL,
							results),
			 XFER_KV_INVALID_PARAMS);
	assert_int_equal(xfer_kv_get_replica_desc(kv, "", d),
			 XFER_KV_INVALID_PARAMS);
	/* leased by the query, as a get's */
	assert_int_equal(xfer_kv_remove(kv, "e", false),
			 XFER_KV_OBJECT_HAS_LEASE);

	/* replicas cleared: the holder's, then all */
	assert_int_equal(th_put_pattern(kv, "c", 5000, 5, 2, false), 0);
	assert_int_equal(th_put_pattern(kv, "f", 5000, 6, 1, false), 0);
	keys[0] = "c";
	keys[2] = "d";
	assert_int_equal(xfer_kv_batch_replica_clear(kv, 3, keys, hname,
						     results),
			 XFER_KV_OBJECT_NOT_FOUND);
	assert_int_equal(results[0], 0);
	assert_int_equal(results[1], XFER_KV_OBJECT_NOT_FOUND);
	assert_int_equal(results[2], XFER_KV_OBJECT_HAS_LEASE);
	keys[1] = "f";
	assert_int_equal(xfer_kv_get_replica_desc(kv, "c", d), 1);
	assert_string_equal(d[0].endpoint, me);
	assert_int_equal(th_get_pattern(kv, "c", 5000, 5, false), 5000);
	assert_int_equal(xfer_kv_batch_replica_clear(kv, 1, &keys[1], NULL,
						     results), 0);
	assert_int_equal(xfer_kv_exist(kv, "f"), 0);
	assert_int_equal(xfer_kv_batch_replica_clear(kv, 1, keys, "",
						     results),
			 XFER_KV_OBJECT_HAS_LEASE);
	assert_int_equal(xfer_kv_batch_replica_clear(kv, 0, keys, "", results),
			 XFER_KV_INVALID_PARAMS);
	th_kv_proc_stop(&h);
	assert_int_equal(xfer_kv_free(kv), 0);
}

/* Byte ranges of objects, staged and zero-copy, through a holder's
 * segment and the own one. */
static void test_ranges(void **state)
{
	struct th_sizes holder = { SEG, STAGE };
	const size_t len = 3 * MiB + 7;
	uint8_t *want = malloc(len), *dst = malloc(len + 64);
	const char *keys[] = { "r", "r", "r", "r", "r", "none", "own" };
	uint64_t src[] = { 0, 3 * MiB, 1000, len, 3 * MiB, 0, 5 };
	size_t lens[] = { 100, 7, 2 * MiB + 5, 0, 8, 10, 50 };
	struct iovec dv[7];
	int64_t res[7];
	struct th_proc h;
	char hname[64];
	struct xfer_kv *kv;

	(void)state;
	assert_non_null(want);
	assert_non_null(dst);
	th_master_start(NULL);
	kv = th_kv(SEG, MiB);                  /* staged in pieces */
	th_kv_proc_start(&h, &holder, hname);
	assert_int_equal(th_kv_cmd(&h, "put r %zu 9", len), 0);
	assert_int_equal(th_put_pattern(kv, "own", 4096, 2, 2, false), 0);
	th_fill(want, len, th_seed("r", 9));
	for (int zc = 0; zc < 2; zc++) {
		size_t at = 0;

		memset(dst, 0, len + 64);
		for (int i = 0; i < 7; i++) {
			dv[i] = (struct iovec){ dst + at, lens[i] };
			at += lens[i];
		}
		if (zc)
			assert_int_equal(xfer_kv_register_buffer(kv, dst,
								 len + 64), 0);
		assert_int_equal(xfer_kv_batch_get_ranges(
			kv, 7, keys, src, dv, zc ? XFER_KV_ZERO_COPY : 0,
			res), XFER_KV_INVALID_PARAMS);
		for (int i = 0; i < 3; i++) {
			assert_int_equal(res[i], lens[i]);
			assert_memory_equal(dv[i].iov_base, want + src[i],
					    lens[i]);
		}
		assert_int_equal(res[3], 0);
		assert_int_equal(res[4], XFER_KV_INVALID_PARAMS);
		assert_int_equal(res[5], XFER_KV_OBJECT_NOT_FOUND);
		assert_int_equal(res[6], 50);
		/* the own segment, by memcpy */
		th_fill(want, 4096, th_seed("own", 2));
		assert_memory_equal(dv[6].iov_base, want + 5, 50);
		th_fill(want, len, th_seed("r", 9));
		if (zc)
			assert_int_equal(xfer_kv_unregister_buffer(kv, dst), 0);
	}
	assert_int_equal(xfer_kv_batch_get_ranges(kv, 1, keys, NULL, dv, 0,
						  res),
			 XFER_KV_INVALID_PARAMS);
	th_kv_proc_stop(&h);
	assert_int_equal(xfer_kv_free(kv), 0);
	free(want);
	free(dst);
}

#define RACE_LEN (6 * MiB + 13)                /* two staged rounds */
#define RACE_N 40

/* A process upserts "hot" as variants 1 .. 40 while this one reads it:
 * each read is one variant whole, never older than the one before. */
static void test_upsert_race(void **state)
{
	const char *args[] = { "--default_kv_lease_ttl=500", NULL };
	struct th_sizes writer = { 0, STAGE };
	uint8_t *buf = malloc(RACE_LEN);
	uint64_t last_v = 0, last_ver = 0, version;
	int reads = 0, changes = 0, expired = 0;
	struct pollfd pfd;
	struct th_proc w;
	struct xfer_kv *kv;
	char wname[64], line[32];

	(void)state;
	assert_non_null(buf);
	th_master_start(args);
	/* room for all 40 variants: retired ones are held through their
	 * leases, and eviction of the one an upsert replaces would read as
	 * -703 */
	kv = th_kv(RACE_N * 8 * MiB, MiB);      /* six rounds a read */
	th_kv_proc_start(&w, &writer, wname);
	assert_int_equal(th_kv_cmd(&w, "put hot %d 0", RACE_LEN), 0);
	assert_int_equal(th_line_send(w.to, "upsn hot 6291469 40"), 0);
	pfd = (struct pollfd){ .fd = w.from, .events = POLLIN };
	for (;;) {
		bool done = poll(&pfd, 1, 0) > 0;
		int64_t got = xfer_kv_get_version(kv, "hot", buf, RACE_LEN, 0,
						  0, &version);
		uint64_t v;

		if (got == XFER_KV_LEASE_EXPIRED) {   /* said, not torn */
			expired++;
			continue;
		}
		assert_int_equal(got, RACE_LEN);
		for (v = last_v; v <= RACE_N; v++)
			if (th_check(buf, RACE_LEN, th_seed("hot", v)) < 0)
				break;
		assert_true(v <= RACE_N);       /* one variant, whole */
		assert_true(version >= last_ver);
		changes += v != last_v;
		last_v = v;
		last_ver = version;
		reads++;
		if (done)
			break;
	}
	assert_true(th_line_recv(w.from, line, sizeof(line), 1000) > 0);
	assert_string_equal(line, "0");
	assert_int_equal(last_v, RACE_N);      /* read after the last */
	assert_int_equal(last_ver, RACE_N + 1);
	print_message("%d reads saw %d values (%d lease expiries)\n", reads,
		      changes, expired);
	th_kv_proc_stop(&w);
	assert_int_equal(xfer_kv_free(kv), 0);
	free(buf);
}

#define T(f) cmocka_unit_test_teardown(f, th_master_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_upsert),
		T(test_async),
		T(test_replica_desc),
		T(test_ranges),
		T(test_upsert_race),
	};

	signal(SIGPIPE, SIG_IGN);
	if (getenv("TEST_FILTER"))
		cmocka_set_test_filter(getenv("TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
