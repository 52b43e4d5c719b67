/*
 * The store's client (include/xfer/store.h) against a real xfer-stored,
 * with clients in this process and in others (test/th_store.h): puts
 * and gets across processes, staged in pieces and zero-copy, the own
 * segment by memcpy, batches past one request, a full store (-200) and
 * room after a remove, leases (-706, forced 0, -707 for a read that
 * outlives its lease), no staging buffer, and the callback base's rules
 * (-EDEADLK, never inside the call). Every byte read back is checked.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
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


/* A writer process puts, through a holder's segment, what this process
 * reads: small, odd, larger than the staging buffer (in pieces), and
 * zero-copy; the holder reads its own segment by memcpy. Objects are
 * immutable; bad arguments are -600, a miss -704. */
static void test_put_get(void **state)
{
	struct th_sizes holder = { SEG, STAGE }, writer = { 0, STAGE };
	static const struct { const char *key; size_t len; bool z; } objs[] = {
		{ "small", 4096, false }, { "odd", MiB + 13, false },
		{ "large", 20 * MiB + 7, false }, { "zc", 3 * MiB, true },
	};
	struct th_proc h, w;
	char hname[64], wname[64];
	struct xfer_kv *kv;
	uint8_t one[16];

	(void)state;
	th_master_start(NULL);
	th_kv_proc_start(&h, &holder, hname);
	th_kv_proc_start(&w, &writer, wname);
	assert_string_not_equal(hname, wname);
	kv = th_kv(0, STAGE);
	for (size_t i = 0; i < 4; i++)
		assert_int_equal(th_kv_cmd(&w, "put%s %s %zu 1",
					   objs[i].z ? "z" : "", objs[i].key,
					   objs[i].len), 0);
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(th_get_pattern(kv, objs[i].key, objs[i].len, 1,
					     false), objs[i].len);
		assert_int_equal(th_get_pattern(kv, objs[i].key, 32 * MiB, 1,
					     true), objs[i].len);
		assert_int_equal(xfer_kv_get_size(kv, objs[i].key),
				 objs[i].len);
	}
	/* the holder reads its own segment: a memcpy, no staging needed */
	assert_int_equal(th_kv_cmd(&h, "get large %zu 1", 21 * MiB),
			 20 * MiB + 7);
	assert_int_equal(th_kv_cmd(&h, "put own %zu 2", 2 * MiB), 0);
	assert_int_equal(th_get_pattern(kv, "own", 2 * MiB, 2, false), 2 * MiB);

	/* a put of an existing key succeeds and changes nothing */
	assert_int_equal(th_put_pattern(kv, "small", 4096, 99, 1, false), 0);
	assert_int_equal(th_get_pattern(kv, "small", 4096, 1, false), 4096);
	assert_int_equal(xfer_kv_get(kv, "missing", one, sizeof(one)),
			 XFER_KV_OBJECT_NOT_FOUND);
	assert_int_equal(xfer_kv_get(kv, "small", one, sizeof(one)),
			 XFER_KV_INVALID_PARAMS);       /* too small */
	assert_int_equal(xfer_kv_put(kv, "", one, 1, NULL),
			 XFER_KV_INVALID_PARAMS);
	assert_int_equal(xfer_kv_put(kv, "k", one, 0, NULL),
			 XFER_KV_INVALID_PARAMS);
	assert_int_equal(xfer_kv_put(kv, "k", one, 1,
				     &(struct xfer_kv_replicate){ 0 }),
			 XFER_KV_INVALID_PARAMS);
	assert_int_equal(xfer_kv_exist(kv, "odd"), 1);
	assert_int_equal(xfer_kv_exist(kv, "missing"), 0);
	assert_int_equal(xfer_kv_free(kv), 0);
	th_kv_proc_stop(&w);
	th_kv_proc_stop(&h);
	th_stored_stop(th_master.pid);
	th_master.pid = 0;
}


/* Batches past one request (1024 keys), staged through a small buffer in
 * many rounds, with two replicas (the own segment's by memcpy); then
 * zero-copy from and into several parts per object. */
static void test_batches(void **state)
{
	enum { N = 1500, LEN = 5000 };
	struct th_sizes holder = { SEG, STAGE };
	struct xfer_kv_replicate rc = { .replica_num = 2 };
	static char names[N + 1][16];
	const char *keys[N + 1];
	struct iovec iov[2 * N];
	size_t cnt[N];
	int64_t res[N + 1];
	char hname[64];
	struct th_proc h;
	struct xfer_kv *kv;
	uint8_t *src, *dst;

	(void)state;
	th_master_start(NULL);
	th_kv_proc_start(&h, &holder, hname);
	kv = th_kv(SEG, 1 * MiB);
	src = th_alloc((size_t)N * LEN);
	dst = th_alloc((size_t)N * LEN);
	th_fill(src, (size_t)N * LEN, 7);
	for (int i = 0; i <= N; i++) {
		snprintf(names[i], sizeof(names[i]), "b%d", i);
		keys[i] = names[i];
		iov[i] = (struct iovec){ src + (size_t)i * LEN, LEN };
	}
	assert_int_equal(xfer_kv_batch_put(kv, N, keys, iov, NULL, 0, &rc,
					   res), 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(res[i], 0);
	assert_int_equal(xfer_kv_batch_exist(kv, N + 1, keys, res), 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(res[i], 1);
	assert_int_equal(res[N], 0);                    /* never put */
	for (int i = 0; i < N; i++)
		iov[i] = (struct iovec){ dst + (size_t)i * LEN, LEN };
	assert_int_equal(xfer_kv_batch_get(kv, N, keys, iov, NULL, 0, res),
			 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(res[i], LEN);
	assert_int_equal(th_check(dst, (size_t)N * LEN, 7), -1);
	/* leased by the query: refused unless forced */
	assert_int_equal(xfer_kv_batch_remove(kv, 2, keys, false, res),
			 XFER_KV_OBJECT_HAS_LEASE);
	assert_int_equal(xfer_kv_batch_remove(kv, N, keys, true, res), 0);
	assert_int_equal(xfer_kv_exist(kv, "b1"), 0);

	/* zero-copy, object i from two parts and back into three */
	assert_int_equal(xfer_kv_register_buffer(kv, src, (size_t)N * LEN), 0);
	assert_int_equal(xfer_kv_register_buffer(kv, dst, (size_t)N * LEN), 0);
	for (int i = 0; i < 64; i++) {
		iov[2 * i] = (struct iovec){ src + (size_t)i * LEN, 100 };
		iov[2 * i + 1] = (struct iovec){ src + (size_t)i * LEN + 100,
						 LEN - 100 };
		cnt[i] = 2;
	}
	assert_int_equal(xfer_kv_batch_put(kv, 64, keys, iov, cnt,
					   XFER_KV_ZERO_COPY, &rc, res), 0);
	memset(dst, 0, (size_t)N * LEN);
	for (int i = 0; i < 64; i++) {
		uint8_t *d = dst + (size_t)i * LEN;

		iov[3 * i] = (struct iovec){ d, 50 };
		iov[3 * i + 1] = (struct iovec){ d + 50, 50 };
		iov[3 * i + 2] = (struct iovec){ d + 100, LEN };  /* room */
		cnt[i] = 3;
	}
	assert_int_equal(xfer_kv_batch_get(kv, 64, keys, iov, cnt,
					   XFER_KV_ZERO_COPY, res), 0);
	for (int i = 0; i < 64; i++)
		assert_int_equal(res[i], LEN);
	assert_int_equal(th_check(dst, (size_t)64 * LEN, 7), -1);
	assert_int_equal(xfer_kv_remove_all(kv, true), 64);
	assert_int_equal(xfer_kv_free(kv), 0);  /* unregisters its own */
	free(src);
	free(dst);
	th_kv_proc_stop(&h);
}


/* Hard-pinned objects fill the store: -200; a remove makes room. */
static void test_capacity(void **state)
{
	struct xfer_kv_replicate pin = { .replica_num = 1,
					 .with_hard_pin = true };
	uint8_t *buf = th_alloc(MiB);
	struct xfer_kv *kv;
	char key[16];
	int i, ret = 0;

	(void)state;
	th_master_start(NULL);
	kv = th_kv(4 * MiB, MiB);
	th_fill(buf, MiB, 5);
	for (i = 0; i < 8 && !ret; i++) {
		snprintf(key, sizeof(key), "p%d", i);
		ret = xfer_kv_put(kv, key, buf, MiB, &pin);
	}
	assert_int_equal(ret, XFER_KV_NO_AVAILABLE_HANDLE);
	assert_true(i >= 4 && i <= 5);
	assert_int_equal(xfer_kv_put(kv, key, buf, MiB, &pin),
			 XFER_KV_NO_AVAILABLE_HANDLE);
	assert_int_equal(xfer_kv_remove(kv, "p0", false), 0);
	assert_int_equal(xfer_kv_put(kv, key, buf, MiB, &pin), 0);
	assert_int_equal(xfer_kv_get(kv, key, buf, MiB), MiB);
	assert_int_equal(th_check(buf, MiB, 5), -1);
	assert_int_equal(xfer_kv_free(kv), 0);
	free(buf);
}


/* 512 objects of 64 KiB fill a holder's 32 MiB, the even ones least
 * recently used: a put of 16 MiB evicts a run of 256 neighbours (not 16
 * MiB of even ones, scattered), the first half; every byte is read back.
 * With a hard-pinned object every 4 MiB no run can be found: -200, and
 * nothing is evicted for it; 2 MiB still fit between two pins. */
static void test_room_for_large(void **state)
{
	struct th_sizes holder = { 32 * MiB, STAGE };
	struct xfer_kv_replicate pin = { .replica_num = 1,
					 .with_hard_pin = true };
	uint8_t *buf = th_alloc(64 << 10);
	struct th_proc h;
	char hname[64], key[16];
	struct xfer_kv *kv;

	(void)state;
	th_master_start((const char *[]){ "--eviction_high_watermark_ratio=1",
					  "--default_kv_lease_ttl=1000", NULL });
	th_kv_proc_start(&h, &holder, hname);
	kv = th_kv(0, STAGE);
	for (int i = 0; i < 512; i++) {
		snprintf(key, sizeof(key), "s%d", i);
		assert_int_equal(th_put_pattern(kv, key, 64 << 10, 1, 1,
						false), 0);
	}
	for (int i = 1; i < 512; i += 2) {
		snprintf(key, sizeof(key), "s%d", i);
		assert_int_equal(xfer_kv_exist(kv, key), 1);
	}
	usleep(1100 * 1000);                    /* the leases end */
	assert_int_equal(th_put_pattern(kv, "big", 16 * MiB, 2, 1, false), 0);
	assert_int_equal(th_get_pattern(kv, "big", 16 * MiB, 2, false),
			 16 * MiB);
	for (int i = 0; i < 512; i++) {
		snprintf(key, sizeof(key), "s%d", i);
		assert_int_equal(th_get_pattern(kv, key, 64 << 10, 1, false),
				 i < 256 ? XFER_KV_OBJECT_NOT_FOUND : 64 << 10);
	}

	assert_int_equal(xfer_kv_remove_all(kv, true), 257);
	th_fill(buf, 64 << 10, 3);
	for (int i = 0; i < 512; i++) {
		snprintf(key, sizeof(key), "p%d", i);
		assert_int_equal(i % 64 == 32 ?
				 xfer_kv_put(kv, key, buf, 64 << 10, &pin) :
				 th_put_pattern(kv, key, 64 << 10, 1, 1,
						false), 0);
	}
	assert_int_equal(th_put_pattern(kv, "big", 16 * MiB, 2, 1, false),
			 XFER_KV_NO_AVAILABLE_HANDLE);
	for (int i = 0; i < 512; i++) {
		snprintf(key, sizeof(key), "p%d", i);
		assert_int_equal(xfer_kv_exist(kv, key), 1);
	}
	usleep(1100 * 1000);
	assert_int_equal(th_put_pattern(kv, "mid", 2 * MiB, 2, 1, false), 0);
	assert_int_equal(th_get_pattern(kv, "mid", 2 * MiB, 2, false),
			 2 * MiB);
	assert_int_equal(xfer_kv_free(kv), 0);
	th_kv_proc_stop(&h);
	free(buf);
}


/* A query or exist leases: remove is refused (-706) unless forced, and
 * remove_all skips leased objects unless forced. */
static void test_leases(void **state)
{
	struct xfer_kv *kv;

	(void)state;
	th_master_start(NULL);
	kv = th_kv(16 * MiB, MiB);
	assert_int_equal(th_put_pattern(kv, "l", 4096, 1, 1, false), 0);
	assert_int_equal(xfer_kv_remove(kv, "l", false), 0);  /* no lease */
	assert_int_equal(th_put_pattern(kv, "l", 4096, 1, 1, false), 0);
	assert_int_equal(xfer_kv_exist(kv, "l"), 1);
	assert_int_equal(xfer_kv_remove(kv, "l", false),
			 XFER_KV_OBJECT_HAS_LEASE);
	assert_int_equal(xfer_kv_remove(kv, "l", true), 0);
	assert_int_equal(xfer_kv_exist(kv, "l"), 0);
	assert_int_equal(xfer_kv_remove(kv, "l", true),
			 XFER_KV_OBJECT_NOT_FOUND);
	assert_int_equal(th_put_pattern(kv, "l", 4096, 1, 1, false), 0);
	assert_int_equal(th_put_pattern(kv, "m", 4096, 1, 1, false), 0);
	assert_int_equal(th_get_pattern(kv, "l", 4096, 1, false), 4096);
	assert_int_equal(xfer_kv_remove_all(kv, false), 1);    /* m only */
	assert_int_equal(xfer_kv_exist(kv, "l"), 1);
	assert_int_equal(xfer_kv_remove_all(kv, true), 1);
	assert_int_equal(xfer_kv_exist(kv, "l"), 0);
	assert_int_equal(xfer_kv_free(kv), 0);
}


/* A client without a staging buffer moves only zero-copy (or by memcpy
 * to and from its own segment, which it has none of here). */
static void test_no_staging(void **state)
{
	uint8_t *buf = th_alloc(MiB);
	struct xfer_kv *kv, *bare;

	(void)state;
	th_master_start(NULL);
	kv = th_kv(16 * MiB, 0);
	bare = th_kv(0, 0);
	th_fill(buf, MiB, 9);
	assert_int_equal(xfer_kv_put(bare, "s", buf, MiB, NULL),
			 XFER_KV_INVALID_PARAMS);
	assert_int_equal(xfer_kv_exist(bare, "s"), 0);      /* revoked */
	assert_int_equal(xfer_kv_register_buffer(bare, buf, MiB), 0);
	assert_int_equal(xfer_kv_put_from(bare, "s", buf, MiB, NULL), 0);
	assert_int_equal(xfer_kv_get(bare, "s", buf, MiB),
			 XFER_KV_INVALID_PARAMS);
	memset(buf, 0, MiB);
	assert_int_equal(xfer_kv_get_into(bare, "s", buf, MiB), MiB);
	assert_int_equal(th_check(buf, MiB, 9), -1);
	/* the holder reads its own segment by memcpy, staging or not */
	memset(buf, 0, MiB);
	assert_int_equal(xfer_kv_get(kv, "s", buf, MiB), MiB);
	assert_int_equal(th_check(buf, MiB, 9), -1);
	assert_int_equal(xfer_kv_free(bare), 0);
	assert_int_equal(xfer_kv_free(kv), 0);
	free(buf);
}


/* With a lease of 1 ms, a read of 32 MiB outlives it: -707, staged,
 * zero-copy and by memcpy from the own segment alike. */
static void test_lease_expired(void **state)
{
	struct th_sizes holder = { SEG, STAGE };
	struct th_proc h;
	char hname[64];
	struct xfer_kv *kv;

	(void)state;
	th_master_start((const char *[]){ "--default_kv_lease_ttl=1", NULL });
	th_kv_proc_start(&h, &holder, hname);
	kv = th_kv(0, STAGE);
	assert_int_equal(th_put_pattern(kv, "x", 32 * MiB, 4, 1, false), 0);
	assert_int_equal(th_get_pattern(kv, "x", 32 * MiB, 4, false),
			 XFER_KV_LEASE_EXPIRED);
	assert_int_equal(th_get_pattern(kv, "x", 32 * MiB, 4, true),
			 XFER_KV_LEASE_EXPIRED);
	assert_int_equal(th_kv_cmd(&h, "get x %u 4", 32 * MiB),
			 XFER_KV_LEASE_EXPIRED);
	/* a small read within its lease still stands */
	assert_int_equal(xfer_kv_get_size(kv, "x"), 32 * MiB);
	assert_int_equal(xfer_kv_free(kv), 0);
	th_kv_proc_stop(&h);
}

struct cb_rec {
	atomic_int calls;
	_Atomic int64_t result, nested, freed, exist;
	bool returned, inside;              /* the reactor's */
	pthread_t thread;
};

static void on_exist(struct xfer_kv *kv, int64_t result, void *arg)
{
	struct cb_rec *r = arg;

	(void)kv;
	r->inside = !r->returned;
	r->exist = result;
	atomic_fetch_add(&r->calls, 1);
}

static void on_put(struct xfer_kv *kv, int64_t result, void *arg)
{
	struct cb_rec *r = arg;

	r->thread = pthread_self();
	r->nested = xfer_kv_exist(kv, "a");     /* would wait for itself */
	r->freed = xfer_kv_free(kv);
	r->result = result;
	/* on this thread: a callback inside the call would run first */
	if (!xfer_kv_exist_async(kv, "a", on_exist, r))
		r->returned = true;
	atomic_fetch_add(&r->calls, 1);
}



/* Callbacks run on the engine's control thread, never inside the call;
 * there a blocking call or a free refuses with -EDEADLK. */
static void test_callbacks(void **state)
{
	static uint8_t val[8192];
	struct cb_rec r = { 0 };
	struct xfer_engine *e;
	struct xfer_kv *kv;

	(void)state;
	th_master_start(NULL);
	e = th_engine(1);
	kv = xfer_kv_new(e, NULL, th_master.addr, 16 * MiB, MiB);
	assert_non_null(kv);
	assert_int_equal(xfer_kv_put_async(kv, "a", val, sizeof(val), NULL,
					   on_put, &r), 0);
	assert_true(th_wait_atomic(&r.calls, 2, 10000));
	assert_int_equal(r.result, 0);
	assert_int_equal(r.exist, 1);
	assert_false(r.inside);
	assert_int_equal(r.nested, -EDEADLK);
	assert_int_equal(r.freed, -EDEADLK);
	assert_false(pthread_equal(r.thread, pthread_self()));
	assert_int_equal(xfer_kv_put_async(kv, "b", val, sizeof(val), NULL,
					   NULL, NULL),
			 XFER_KV_INVALID_PARAMS);
	assert_int_equal(xfer_kv_free(kv), 0);
	assert_null(xfer_kv_new(e, NULL, "127.0.0.1", 0, 0));
	assert_int_equal(errno, EINVAL);
	assert_null(xfer_kv_new(e, NULL, th_master.addr, 63, 0));
	assert_int_equal(errno, EINVAL);
	xfer_engine_free(e);
	th_stored_stop(th_master.pid);
	th_master.pid = 0;
	/* no master */
	assert_null(th_kv_try(0, 0));
	assert_int_equal(errno, ECONNREFUSED);
}

#define T(f) cmocka_unit_test_teardown(f, th_master_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_put_get),
		T(test_batches),
		T(test_capacity),
		T(test_room_for_large),
		T(test_leases),
		T(test_no_staging),
		T(test_lease_expired),
		T(test_callbacks),
	};

	signal(SIGPIPE, SIG_IGN);
	if (getenv("TEST_FILTER"))
		cmocka_set_test_filter(getenv("TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
