/*
 * The store's client when things go wrong, with clients in several
 * processes (test/th_store.h): replicas on distinct segments read after
 * their holders are killed, concurrent puts of one key from two
 * processes (one object, never torn bytes), a writer killed in the
 * middle of a put, a thousand batch calls in flight from four threads,
 * and a master that is killed and restarts. Every byte read back is
 * checked.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xfer/store.h>

#include "store/proto_internal.h"
#include "test/helpers.h"
#include "test/th_store.h"

#define MiB (1u << 20)
#define SEG (64 * MiB)
#define STAGE (4 * MiB)

/* th_raw_query() of an object that must be there. */
static int replicas(const char *key, char names[][64])
{
	int32_t err;
	int n = th_raw_query(key, names, &err);

	assert_int_equal(err, 0);
	return n;
}


/* Three replicas on the three holders' segments; killed holders: the
 * read goes on from the next replica, and once the master expired them
 * one replica is left, still read. */
static void test_replicas_kill(void **state)
{
	struct th_sizes holder = { SEG, STAGE };
	char names[3][64], reps[STORE_REPLICA_MAX][64];
	struct th_proc h[3];
	struct xfer_kv *kv;

	(void)state;
	th_master_start((const char *[]){ "--client_ttl=2", NULL });
	for (int i = 0; i < 3; i++)
		th_kv_proc_start(&h[i], &holder, names[i]);
	kv = th_kv(0, STAGE);
	assert_int_equal(th_put_pattern(kv, "r", 8 * MiB, 3, 3, false), 0);
	assert_int_equal(replicas("r", reps), 3);
	/* distinct: each holder's name once */
	for (int j = 0; j < 3; j++) {
		int seen = 0;

		for (int i = 0; i < 3; i++)
			seen += !strcmp(reps[i], names[j]);
		assert_int_equal(seen, 1);
	}
	/* kill the holders of the first two replicas the client will try */
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 3; j++)
			if (!strcmp(reps[i], names[j]))
				th_proc_kill(&h[j]);
	assert_int_equal(th_get_pattern(kv, "r", 8 * MiB, 3, false), 8 * MiB);
	/* the master drops their segments after --client_ttl */
	for (int64_t end = th_now_ms() + 10000;
	     replicas("r", reps) > 1 && th_now_ms() < end;)
		usleep(100000);
	assert_int_equal(replicas("r", reps), 1);
	assert_int_equal(th_get_pattern(kv, "r", 8 * MiB, 3, true), 8 * MiB);
	assert_int_equal(xfer_kv_free(kv), 0);
	for (int j = 0; j < 3; j++)
		if (h[j].pid)
			th_kv_proc_stop(&h[j]);
}


/* Two processes put the same keys with different bytes at once while
 * this one reads them: every put succeeds, each key ends as one object,
 * and no read ever sees bytes of both. */
static void test_concurrent_puts(void **state)
{
	enum { N = 40, LEN = 256 << 10 };
	struct th_sizes holder = { SEG, STAGE }, writer = { 0, STAGE };
	struct th_proc h, w[2];
	char name[64], key[16], line[32];
	uint8_t *buf = th_alloc(LEN);
	struct xfer_kv *kv;
	int reads = 0;

	(void)state;
	th_master_start(NULL);
	th_kv_proc_start(&h, &holder, name);
	for (int i = 0; i < 2; i++)
		th_kv_proc_start(&w[i], &writer, name);
	kv = th_kv(0, STAGE);
	for (int i = 0; i < 2; i++)
		assert_int_equal(th_line_send(w[i].to,
					      i ? "race c 40 262144 200" :
						  "race c 40 262144 100"), 0);
	for (int round = 0; round < 20; round++)
		for (int i = 0; i < N; i++) {
			int64_t ret;

			snprintf(key, sizeof(key), "c%d", i);
			ret = xfer_kv_get(kv, key, buf, LEN);
			if (ret == XFER_KV_OBJECT_NOT_FOUND ||
			    ret == XFER_KV_REPLICA_IS_NOT_READY)
				continue;
			assert_int_equal(ret, LEN);
			assert_true(th_check(buf, LEN, th_seed(key, 100)) < 0 ||
				    th_check(buf, LEN, th_seed(key, 200)) < 0);
			reads++;
		}
	for (int i = 0; i < 2; i++) {
		assert_true(th_line_recv(w[i].from, line, sizeof(line),
					 120000) > 0);
		assert_string_equal(line, "0");         /* no put failed */
	}
	for (int i = 0; i < N; i++) {
		snprintf(key, sizeof(key), "c%d", i);
		assert_int_equal(xfer_kv_get(kv, key, buf, LEN), LEN);
		assert_true(th_check(buf, LEN, th_seed(key, 100)) < 0 ||
			    th_check(buf, LEN, th_seed(key, 200)) < 0);
	}
	print_message("concurrent puts: %d reads during the race\n", reads);
	assert_int_equal(xfer_kv_free(kv), 0);
	for (int i = 0; i < 2; i++)
		th_kv_proc_stop(&w[i]);
	th_kv_proc_stop(&h);
	free(buf);
}


/* The master is killed: calls fail with -900; restarted on its port, the
 * client reconnects and mounts again on its own. */
static void test_master_restart(void **state)
{
	struct xfer_kv *kv;
	int64_t ret = 0, end;

	(void)state;
	th_master_start(NULL);
	kv = th_kv(16 * MiB, MiB);
	assert_int_equal(th_put_pattern(kv, "k", 4096, 1, 1, false), 0);
	assert_int_equal(xfer_kv_healthy(kv), 1);
	th_kill(th_master.pid);
	th_master.pid = 0;
	assert_int_equal(th_put_pattern(kv, "k2", 4096, 1, 1, false),
			 XFER_KV_RPC_FAIL);
	assert_int_equal(xfer_kv_healthy(kv), 0);
	th_master.pid = th_stored_start(NULL, th_master.port, &th_master.port);
	end = th_now_ms() + 10000;
	do {
		usleep(100000);
		ret = th_put_pattern(kv, "k3", 4096, 1, 1, false);
	} while (ret && th_now_ms() < end);
	assert_int_equal(ret, 0);
	assert_int_equal(xfer_kv_healthy(kv), 1);
	assert_int_equal(th_get_pattern(kv, "k3", 4096, 1, false), 4096);
	assert_int_equal(xfer_kv_exist(kv, "k"), 0);    /* forgotten */
	assert_int_equal(xfer_kv_free(kv), 0);
}

/* A writer killed in the middle of a put (staged through a small
 * buffer, so it takes many rounds): its object is never visible, and
 * once --put_start_discard_timeout_sec passes the key takes a new put. */
static void test_killed_mid_put(void **state)
{
	struct th_sizes holder = { SEG, STAGE }, writer = { 0, 64 << 10 };
	char name[64], reps[STORE_REPLICA_MAX][64];
	struct th_proc h, w;
	struct xfer_kv *kv;
	int32_t err = 0;
	int64_t end, ret;

	(void)state;
	th_master_start((const char *[]){
		"--put_start_discard_timeout_sec=1", NULL });
	th_kv_proc_start(&h, &holder, name);
	th_kv_proc_start(&w, &writer, name);
	kv = th_kv(0, STAGE);
	assert_int_equal(th_line_send(w.to, "put m 33554432 1"), 0);
	/* until its put started: then kill it mid-way */
	for (end = th_now_ms() + 10000;
	     th_raw_query("m", reps, &err) >= 0 &&
	     err == XFER_KV_OBJECT_NOT_FOUND && th_now_ms() < end;)
		usleep(1000);
	assert_int_equal(err, XFER_KV_REPLICA_IS_NOT_READY);
	th_proc_kill(&w);
	th_raw_query("m", reps, &err);
	assert_int_equal(err, XFER_KV_REPLICA_IS_NOT_READY);  /* never ended */
	assert_int_equal(th_get_pattern(kv, "m", 32 * MiB, 1, false),
			 XFER_KV_REPLICA_IS_NOT_READY);
	/* discarded after a second: the key is free again */
	end = th_now_ms() + 10000;
	do {
		usleep(100000);
		ret = th_put_pattern(kv, "m", 4 * MiB, 2, 1, false);
	} while (!ret && xfer_kv_exist(kv, "m") != 1 && th_now_ms() < end);
	assert_int_equal(ret, 0);
	assert_int_equal(th_get_pattern(kv, "m", 32 * MiB, 2, false), 4 * MiB);
	assert_int_equal(xfer_kv_free(kv), 0);
	th_kv_proc_stop(&h);
}

enum { THREADS = 4, CALLS = 250, KEYS = 4, VLEN = 4096 };

struct many {
	struct xfer_kv *kv;
	int t;
	uint8_t *src, *dst;
	int64_t res[CALLS][KEYS];
	char names[CALLS][KEYS][24];
	const char *keys[CALLS][KEYS];
	struct iovec iov[CALLS][KEYS];
	atomic_int done, bad;
};

static void on_many(struct xfer_kv *kv, int64_t result, void *arg)
{
	struct many *m = arg;

	(void)kv;
	if (result)
		atomic_fetch_add(&m->bad, 1);
	atomic_fetch_add(&m->done, 1);
}

/* Start CALLS batch calls (put, or get into dst) of thread @p m->t. */
static void *many_start(void *arg)
{
	struct many *m = arg;
	bool get = m->dst != NULL;

	for (int c = 0; c < CALLS; c++) {
		for (int k = 0; k < KEYS; k++) {
			size_t off = ((size_t)c * KEYS + k) * VLEN;

			snprintf(m->names[c][k], sizeof(m->names[c][k]),
				 "t%d-%d-%d", m->t, c, k);
			m->keys[c][k] = m->names[c][k];
			m->iov[c][k] = (struct iovec){
				(get ? m->dst : m->src) + off, VLEN };
		}
		if (get ? xfer_kv_batch_get_async(m->kv, KEYS, m->keys[c],
						  m->iov[c], NULL, 0,
						  m->res[c], on_many, m) :
			  xfer_kv_batch_put_async(m->kv, KEYS, m->keys[c],
						  m->iov[c], NULL, 0, NULL,
						  m->res[c], on_many, m))
			atomic_fetch_add(&m->bad, 1000);
	}
	return NULL;
}

/* A thousand batch calls in flight at once from four threads, sharing a
 * staging buffer that holds a fraction of them: every one ends, every
 * byte is right (and under make test-asan, nothing is touched after it
 * is freed). */
static void test_many_calls(void **state)
{
	struct th_sizes holder = { SEG, STAGE };
	static struct many m[THREADS];
	size_t len = (size_t)CALLS * KEYS * VLEN;
	pthread_t th[THREADS];
	struct th_proc h;
	char name[64];
	struct xfer_kv *kv;

	(void)state;
	th_master_start(NULL);
	th_kv_proc_start(&h, &holder, name);
	kv = th_kv(0, 256 << 10);
	for (int pass = 0; pass < 2; pass++) {
		for (int t = 0; t < THREADS; t++) {
			if (!pass) {
				m[t] = (struct many){ .kv = kv, .t = t };
				m[t].src = th_alloc(len);
				th_fill(m[t].src, len, 50 + (uint64_t)t);
			} else {
				m[t].dst = th_alloc(len);
				atomic_store(&m[t].done, 0);
			}
			assert_int_equal(pthread_create(&th[t], NULL,
							many_start, &m[t]), 0);
		}
		for (int t = 0; t < THREADS; t++) {
			pthread_join(th[t], NULL);
			assert_true(th_wait_atomic(&m[t].done, CALLS, 60000));
			assert_int_equal(atomic_load(&m[t].bad), 0);
			for (int c = 0; c < CALLS; c++)
				for (int k = 0; k < KEYS; k++)
					assert_int_equal(m[t].res[c][k],
							 pass ? VLEN : 0);
		}
	}
	for (int t = 0; t < THREADS; t++) {
		assert_int_equal(th_check(m[t].dst, len, 50 + (uint64_t)t), -1);
		free(m[t].src);
		free(m[t].dst);
	}
	assert_int_equal(xfer_kv_free(kv), 0);
	th_kv_proc_stop(&h);
}

#define T(f) cmocka_unit_test_teardown(f, th_master_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_replicas_kill),
		T(test_concurrent_puts),
		T(test_killed_mid_put),
		T(test_many_calls),
		T(test_master_restart),
	};

	signal(SIGPIPE, SIG_IGN);
	if (getenv("TEST_FILTER"))
		cmocka_set_test_filter(getenv("TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
