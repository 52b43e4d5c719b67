/*
 * xfer-metad's store, the real program over real sockets: its limits
 * (value size, keys, bytes) answer 413 and 507 and store nothing; a small
 * PUT costs about the same with 64 MiB stored as with nothing stored; and
 * how long GETs wait while a large PUT commits.
 *
 * XFER_TEST_WRAP puts a command in front of the server (th_metad.h).
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test/helpers.h"
#include "test/th_metad.h"

#define NLAT 20                     /* PUTs timed per figure */
#define BULK_VALUE (16u << 20)      /* bytes per bulk value */
#define BULK_COUNT 4                /* 64 MiB stored in all */
#define SMALL 300                   /* bytes per timed value */

static struct server P = { .pid = -1 };
static struct server E = { .pid = -1 };  /* the empty one beside P */

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* The time, µs, of one small PUT at @p key on @p c. */
static int64_t put_us(struct conn *c, const char *key)
{
	uint8_t val[SMALL];
	char *target = key_target(key);
	struct resp r;
	int64_t t0, t;

	memset(val, 'v', sizeof(val));
	t0 = now_us();
	http_send(c, "PUT", target, val, sizeof(val));
	http_recv(c, &r, IO_MS);
	t = now_us() - t0;
	assert_int_equal(r.status, 200);
	free(r.body);
	free(target);
	return t;
}

static int64_t median(int64_t *t, size_t n)
{
	qsort(t, n, sizeof(t[0]), cmp_i64);
	return (t[n / 2 - 1] + t[n / 2]) / 2;
}

struct big_put {
	uint16_t port;
	const char *key;
	const uint8_t *val;
	size_t len;
	int status;
	volatile int done;
};

static void *big_put_main(void *arg)
{
	struct big_put *b = arg;
	char *target = key_target(b->key);
	struct conn c = conn_open(b->port);
	struct resp r;

	http_send(&c, "PUT", target, b->val, b->len);
	http_recv(&c, &r, IO_MS);
	b->status = r.status;
	free(r.body);
	conn_close(&c);
	free(target);
	__atomic_store_n(&b->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* The longest GET, µs, of a small key while another connection PUTs
 * @p len bytes at @p key. */
static int64_t get_max_during_put_us(uint16_t port, const char *key,
				     const uint8_t *val, size_t len)
{
	struct big_put b = { .port = port, .key = key, .val = val,
			     .len = len };
	char *target = key_target("lat/00");
	struct conn c = conn_open(port);
	int64_t worst = 0, t0, t;
	struct resp r;
	pthread_t th;
	int n = 0;

	assert_int_equal(pthread_create(&th, NULL, big_put_main, &b), 0);
	while (!__atomic_load_n(&b.done, __ATOMIC_ACQUIRE)) {
		t0 = now_us();
		http_send(&c, "GET", target, NULL, 0);
		http_recv(&c, &r, IO_MS);
		t = now_us() - t0;
		assert_int_equal(r.status, 200);
		free(r.body);
		if (t > worst)
			worst = t;
		n++;
	}
	pthread_join(th, NULL);
	assert_int_equal(b.status, 200);
	conn_close(&c);
	free(target);
	printf("    %d GETs during a %zu-byte PUT\n", n, len);
	return worst;
}

/* A PUT refused with @p status and a one-line reason holding @p says. */
static void put_refused(uint16_t port, const char *key, size_t len,
			int status, const char *says)
{
	char *t = key_target(key), *val = malloc(len + 1);
	struct resp r;

	assert_non_null(val);
	memset(val, 'x', len);
	r = req1(port, "PUT", t, val, len);
	if (r.status != status || !strstr(r.body, says))
		fail_msg("PUT %s of %zu bytes: %d %s, want %d '%s'", key, len,
			 r.status, r.body, status, says);
	free(r.body);
	free(val);
	free(t);
}

static void put_len(uint16_t port, const char *key, size_t len)
{
	char *val = malloc(len + 1);

	assert_non_null(val);
	memset(val, 'x', len);
	put_key(port, key, val, len);
	free(val);
}

static void check_len(uint16_t port, const char *key, size_t len)
{
	char *val = malloc(len + 1);

	assert_non_null(val);
	memset(val, 'x', len);
	check_key(port, key, val, len);
	free(val);
}

/* Over a limit: 413 or 507 with a reason, nothing stored, no revision,
 * in memory or on disk. */
static void test_limits(void **state)
{
	const char *args[] = { "--max-value-bytes", "1000",
		"--max-keys", "3", "--max-bytes", "2500", NULL };
	char *file = fmt("%s/store-limits", tmp_dir);
	char *t = key_target("c");

	(void)state;
	server_start_args(&P, file, NULL, args);
	put_len(P.port, "a", 1000);
	/* evhttp refuses a longer body before it is read, with a reason
	 * of its own */
	put_refused(P.port, "b", 1001, 413, "Too Large");
	put_refused(P.port, "a", 1001, 413, "Too Large");
	put_len(P.port, "b", 10);
	put_len(P.port, "c", 10);
	put_refused(P.port, "d", 1, 507, "--max-keys");
	put_len(P.port, "b", 1000);         /* a key already there */
	/* 1 + 1000 + 1 + 1000 + 1 + 10 bytes stored; 990 more is too many */
	put_refused(P.port, "c", 1000, 507, "--max-bytes");
	assert_int_equal(current_rev(P.port), 4);
	check_len(P.port, "a", 1000);
	check_len(P.port, "c", 10);
	req_status(P.port, "GET", "/metadata?key=d", NULL, 0, 404);
	/* room again */
	req_status(P.port, "DELETE", t, NULL, 0, 200);
	put_len(P.port, "d", 400);
	assert_exit_0(server_stop(&P, SIGTERM));

	/* on disk as answered; past the limits of a later start, a store
	 * loads whole and only stops growing */
	args[5] = "1000";
	server_start_args(&P, file, NULL, args);
	check_len(P.port, "a", 1000);
	check_len(P.port, "b", 1000);
	check_len(P.port, "d", 400);
	req_status(P.port, "GET", t, NULL, 0, 404);
	assert_int_equal(current_rev(P.port), 6);
	put_refused(P.port, "d", 401, 507, "--max-bytes");
	put_len(P.port, "d", 300);          /* shrinking is fine */
	assert_exit_0(server_stop(&P, SIGTERM));
	free(t);
	free(file);
}

/* Limits that make no sense stop the program at once (status 2). */
static void test_bad_limits(void **state)
{
	static const char *const bad[][3] = {
		{ "--max-keys", "0", NULL },
		{ "--max-value-bytes", "1G", NULL },
		{ "--max-bytes", "12x", NULL },
		{ "--max-bytes", "-1", NULL },
		{ "--max-bytes", "99999999999999999999", NULL },
	};
	int status;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		status = reap(spawn_args(NULL, "/dev/null", bad[i]));
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 2);
	}
}

/*
 * A small PUT with 64 MiB stored takes at most twice (plus 1 ms) what it
 * takes on an empty store: the medians of NLAT each, from two servers
 * PUT to in turn, so that both see the same disk.
 */
static void test_put_latency(void **state)
{
	char *file_e = fmt("%s/store-empty", tmp_dir);
	char *file_f = fmt("%s/store-full", tmp_dir);
	uint8_t *bulk = malloc(BULK_VALUE);
	int64_t te[NLAT], tf[NLAT], empty, full, get_worst;
	struct conn ce, cf;
	char key[32];

	(void)state;
	assert_non_null(bulk);
	server_start(&E, file_e, NULL);
	server_start(&P, file_f, NULL);
	for (unsigned i = 0; i < BULK_COUNT; i++) {
		memset(bulk, 'a' + (int)i, BULK_VALUE);
		snprintf(key, sizeof(key), "bulk/%u", i);
		put_key(P.port, key, bulk, BULK_VALUE);
	}
	ce = conn_open(E.port);
	cf = conn_open(P.port);
	for (int i = 0; i < NLAT; i++) {
		snprintf(key, sizeof(key), "lat/%02d", i);
		te[i] = put_us(&ce, key);
		tf[i] = put_us(&cf, key);
	}
	conn_close(&ce);
	conn_close(&cf);
	empty = median(te, NLAT);
	full = median(tf, NLAT);
	printf("    PUT of %d bytes, median of %d: %.2f ms empty, %.2f ms "
	       "with %u MiB stored\n", SMALL, NLAT, empty / 1000.0,
	       full / 1000.0, BULK_COUNT * (BULK_VALUE >> 20));
	if (full > 2 * empty + 1000)
		fail_msg("PUT with 64 MiB stored: %.2f ms, empty: %.2f ms",
			 full / 1000.0, empty / 1000.0);

	memset(bulk, 'z', BULK_VALUE);
	get_worst = get_max_during_put_us(P.port, "bulk/0", bulk, BULK_VALUE);
	printf("    longest GET while a %u MiB PUT commits: %.2f ms\n",
	       BULK_VALUE >> 20, get_worst / 1000.0);
	check_key(P.port, "bulk/0", bulk, BULK_VALUE);
	assert_exit_0(server_stop(&P, SIGTERM));
	assert_exit_0(server_stop(&E, SIGTERM));
	free(bulk);
	free(file_f);
	free(file_e);
}

/* --- main ---------------------------------------------------------------- */

/* A failed test may leave its server up. */
static int cleanup(void **state)
{
	(void)state;
	server_kill(&P);
	server_kill(&E);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_limits, cleanup),
		cmocka_unit_test(test_bad_limits),
		cmocka_unit_test_teardown(test_put_latency, cleanup),
	};
	int failed;

	if (!mkdtemp(tmp_dir)) {
		perror("mkdtemp");
		return 1;
	}
	failed = cmocka_run_group_tests_name("xfer-metad store", tests,
					     NULL, NULL);
	th_rm_tree(tmp_dir);
	return failed;
}
