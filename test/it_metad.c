/*
 * xfer-metad, the real program over real sockets (PROTOCOL.md §2), one
 * server in memory for all the tests: keys round-trip byte for byte, bad
 * requests get a 4xx with a reason and the server goes on, 1000 keys, and
 * the watch long-poll: a wake-up, the prefix filter and timeout,
 * compaction, and clients that hang up or pipeline while held. The
 * database is test/it_metad_persist.c's, limits and load
 * test/it_metad_store.c's, the old persist file test/it_metad_migrate.c's.
 *
 * XFER_TEST_WRAP puts a command in front of the server (th_metad.h).
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yajl/yajl_tree.h>

#include "test/helpers.h"
#include "test/th_metad.h"

#define KEY_MAX 4096        /* xfer-metad's longest key, bytes */

static struct server S = { .pid = -1 };  /* in memory, shared */
static int S_fds;                        /* its open fds when idle */

/* --- keys ---------------------------------------------------------------- */

static void test_roundtrip(void **state)
{
	static const char val[] = "{\"a\":\"x\0y\"}\n";  /* NUL, newline */
	char *t = key_target("rt/key");
	struct resp r;

	(void)state;
	put_key(S.port, "rt/key", val, sizeof(val) - 1);
	check_key(S.port, "rt/key", val, sizeof(val) - 1);
	put_key(S.port, "rt/key", "v2\n", 3);
	check_key(S.port, "rt/key", "v2\n", 3);
	put_key(S.port, "rt/key", "", 0);
	check_key(S.port, "rt/key", "", 0);

	req_status(S.port, "DELETE", t, NULL, 0, 200);
	r = req1(S.port, "GET", t, NULL, 0);
	assert_int_equal(r.status, 404);
	free(r.body);
	/* idempotent */
	req_status(S.port, "DELETE", t, NULL, 0, 200);
	free(t);
}

static void test_get_absent(void **state)
{
	char *t = key_target("absent/never/put");
	struct resp r = req1(S.port, "GET", t, NULL, 0);

	(void)state;
	assert_int_equal(r.status, 404);
	free(r.body);
	free(t);
}

/* A 4xx whose body is one non-empty line. */
static void check_reason(const char *method, const char *target, int status)
{
	struct resp r = req1(S.port, method, target, NULL, 0);

	if (r.status != status)
		fail_msg("%s %s: %d, want %d", method, target, r.status,
			 status);
	assert_true(r.len >= 2);
	assert_true(memchr(r.body, '\n', r.len) == r.body + r.len - 1);
	free(r.body);
}

static void test_bad_requests(void **state)
{
	static const struct {
		const char *method, *target;
		int status;
	} cases[] = {
		{ "GET", "/metadata", 400 },            /* no key */
		{ "GET", "/metadata?other=1", 400 },
		{ "PUT", "/metadata?key=", 400 },       /* empty key */
		{ "GET", "/metadata?key=", 400 },
		{ "GET", "/metadata?key=a%00b", 400 },  /* NUL */
		{ "GET", "/metadata?key=%FF%FE", 400 }, /* not UTF-8 */
		{ "GET", "/metadata?key=%C0%AF", 400 }, /* overlong '/' */
		{ "GET", "/metadata?key=a&&b=1", 400 }, /* malformed */
		{ "GET", "/metadata?key", 400 },
		{ "POST", "/metadata?key=a", 405 },
		{ "PATCH", "/metadata?key=a", 405 },
		{ "OPTIONS", "/metadata?key=a", 405 },
		{ "GET", "/other?key=a", 404 },
		{ "GET", "/metadata/x?key=a", 404 },
		{ "GET", "/metadata/watch", 400 },      /* no since */
		{ "GET", "/metadata/watch?prefix=a", 400 },
		{ "GET", "/metadata/watch?since=abc", 400 },
		{ "GET", "/metadata/watch?since=-1", 400 },
		{ "GET", "/metadata/watch?since=99999999999999999999", 400 },
		{ "GET", "/metadata/watch?since=0&timeout_ms=300001", 400 },
		{ "GET", "/metadata/watch?since=0&timeout_ms=1e3", 400 },
		{ "GET", "/metadata/watch?since=0&prefix=%FF", 400 },
		{ "PUT", "/metadata/watch?since=0", 405 },
	};
	char big[KEY_MAX + 2];
	struct conn c;
	struct resp r;
	char *t;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_reason(cases[i].method, cases[i].target,
			     cases[i].status);

	/* keys up to 4096 bytes */
	memset(big, 'k', sizeof(big));
	big[KEY_MAX + 1] = '\0';
	t = key_target(big);
	check_reason("PUT", t, 400);
	free(t);
	big[KEY_MAX] = '\0';
	put_key(S.port, big, "1\n", 2);
	check_key(S.port, big, "1\n", 2);
	t = key_target(big);
	req_status(S.port, "DELETE", t, NULL, 0, 200);
	free(t);

	/* values up to --max-value-bytes (16 MiB): evhttp refuses more
	 * before reading it */
	c = conn_open(S.port);
	t = fmt("PUT /metadata?key=big HTTP/1.1\r\nHost: x\r\n"
		"Content-Length: %u\r\n\r\n", (16u << 20) + 1);
	send_all(c.fd, t, strlen(t));
	http_recv(&c, &r, IO_MS);
	assert_int_equal(r.status, 413);
	free(r.body);
	free(t);
	conn_close(&c);

	/* garbage that is not HTTP */
	c = conn_open(S.port);
	send_all(c.fd, "\x01\x02 nonsense\r\n\r\n", 15);
	conn_close(&c);

	/* still serving */
	put_key(S.port, "bad/after", "ok\n", 3);
	check_key(S.port, "bad/after", "ok\n", 3);
}

static void test_encoded_keys(void **state)
{
	static const char *const keys[] = {
		"a/b/c", "with space", "amp&er=sand", "per%cent",
		"per%25cent", "plus+sign", "q?uestion#hash", "tab\there",
		"quote\"back\\slash", "ünïcødé/ключ/鍵",
	};
	size_t n = sizeof(keys) / sizeof(keys[0]);
	uint64_t r0 = current_rev(S.port);
	struct watch w;
	struct resp r;
	char *v;

	(void)state;
	for (size_t i = 0; i < n; i++) {
		v = fmt("{\"k\":%zu}\n", i);
		put_key(S.port, keys[i], v, strlen(v));
		free(v);
	}
	for (size_t i = 0; i < n; i++) {
		v = fmt("{\"k\":%zu}\n", i);
		check_key(S.port, keys[i], v, strlen(v));
		free(v);
	}
	/* the watch gives the keys back verbatim, as JSON strings */
	r = watch1(S.port, "", r0, 1000);
	w = watch_parse(&r);
	assert_int_equal(w.n, n);
	for (size_t i = 0; i < n; i++)
		event_check(&w, i, r0 + 1 + i, "put", keys[i]);
	yajl_tree_free(w.root);
	free(r.body);

	for (size_t i = 0; i < n; i++) {
		v = key_target(keys[i]);
		req_status(S.port, "DELETE", v, NULL, 0, 200);
		req_status(S.port, "GET", v, NULL, 0, 404);
		free(v);
	}
}

static void test_thousand_keys(void **state)
{
	struct conn c = conn_open(S.port);
	int64_t t0 = th_now_ms();
	char key[32], *t, *v;
	struct resp r;

	(void)state;
	for (int i = 0; i < 1000; i++) {
		snprintf(key, sizeof(key), "bulk/%04d", i);
		t = key_target(key);
		v = fmt("{\"i\":%d,\"sq\":%d}\n", i, i * i);
		http_send(&c, "PUT", t, v, strlen(v));
		http_recv(&c, &r, IO_MS);
		assert_int_equal(r.status, 200);
		free(r.body);
		free(v);
		free(t);
	}
	for (int i = 0; i < 1000; i++) {
		snprintf(key, sizeof(key), "bulk/%04d", i);
		t = key_target(key);
		v = fmt("{\"i\":%d,\"sq\":%d}\n", i, i * i);
		http_send(&c, "GET", t, NULL, 0);
		http_recv(&c, &r, IO_MS);
		assert_int_equal(r.status, 200);
		assert_int_equal(r.len, strlen(v));
		assert_memory_equal(r.body, v, r.len);
		free(r.body);
		free(v);
		free(t);
	}
	conn_close(&c);
	print_message("1000 PUT + 1000 GET on one connection: %" PRId64
		      " ms\n", th_now_ms() - t0);
}

/* --- watch --------------------------------------------------------------- */

static void test_watch_wakes(void **state)
{
	uint64_t rev = current_rev(S.port);
	struct conn c = conn_open(S.port);
	char *t = watch_target("w1/", rev, 10000);
	int64_t t0, took;
	struct watch w;
	struct resp r;

	(void)state;
	http_send(&c, "GET", t, NULL, 0);
	free(t);
	usleep(100 * 1000);             /* let it be held */
	t0 = th_now_ms();
	put_key(S.port, "w1/x", "{}\n", 3);
	http_recv(&c, &r, IO_MS);
	took = th_now_ms() - t0;
	print_message("watch woke %" PRId64 " ms after the PUT\n", took);
	assert_true(took < 2000);       /* its timeout is 10 s */
	w = watch_parse(&r);
	assert_false(w.compacted);
	assert_int_equal(w.revision, rev + 1);
	assert_int_equal(w.n, 1);
	event_check(&w, 0, rev + 1, "put", "w1/x");
	yajl_tree_free(w.root);
	free(r.body);

	/* the same connection holds the next watch; a DELETE wakes it */
	t = watch_target("w1/", rev + 1, 10000);
	http_send(&c, "GET", t, NULL, 0);
	free(t);
	usleep(50 * 1000);
	t = key_target("w1/x");
	req_status(S.port, "DELETE", t, NULL, 0, 200);
	http_recv(&c, &r, IO_MS);
	w = watch_parse(&r);
	assert_int_equal(w.n, 1);
	event_check(&w, 0, rev + 2, "delete", "w1/x");
	yajl_tree_free(w.root);
	free(r.body);
	conn_close(&c);

	/* deleting what is absent changes nothing */
	req_status(S.port, "DELETE", t, NULL, 0, 200);
	assert_int_equal(current_rev(S.port), rev + 2);
	free(t);
}

static void test_watch_prefix_timeout(void **state)
{
	uint64_t rev = current_rev(S.port);
	struct conn c = conn_open(S.port);
	char *t = watch_target("w2/", rev, 300);
	int64_t t0 = th_now_ms(), took;
	struct watch w;
	struct resp r;

	(void)state;
	http_send(&c, "GET", t, NULL, 0);
	free(t);
	usleep(50 * 1000);
	put_key(S.port, "other/y", "{}\n", 3);   /* not under w2/ */
	http_recv(&c, &r, IO_MS);
	took = th_now_ms() - t0;
	assert_true(took >= 250);
	w = watch_parse(&r);
	assert_false(w.compacted);
	assert_int_equal(w.n, 0);
	assert_int_equal(w.revision, rev + 1);
	yajl_tree_free(w.root);
	free(r.body);
	conn_close(&c);

	/* a matching change already made answers at once */
	t0 = th_now_ms();
	r = watch1(S.port, "other/", rev, 10000);
	assert_true(th_now_ms() - t0 < 2000);
	w = watch_parse(&r);
	assert_int_equal(w.n, 1);
	event_check(&w, 0, rev + 1, "put", "other/y");
	yajl_tree_free(w.root);
	free(r.body);
}

static void test_watch_compacted(void **state)
{
	uint64_t rev = current_rev(S.port), now;
	struct conn c = conn_open(S.port);
	char *t = key_target("ring/k");
	struct watch w;
	struct resp r;

	(void)state;
	/* push the history ring (4096 changes) past rev */
	for (int i = 0; i < 4100; i++) {
		http_send(&c, "PUT", t, "x\n", 2);
		http_recv(&c, &r, IO_MS);
		assert_int_equal(r.status, 200);
		free(r.body);
	}
	conn_close(&c);
	free(t);
	now = rev + 4100;

	r = watch1(S.port, "", rev, 10000);
	w = watch_parse(&r);
	assert_true(w.compacted);
	assert_int_equal(w.n, 0);
	assert_int_equal(w.revision, now);
	yajl_tree_free(w.root);
	free(r.body);

	/* the oldest since the ring still covers, and one before it */
	r = watch1(S.port, "ring/", now - 4096, 10000);
	w = watch_parse(&r);
	assert_false(w.compacted);
	assert_int_equal(w.n, 4096);
	event_check(&w, 0, now - 4095, "put", "ring/k");
	event_check(&w, 4095, now, "put", "ring/k");
	yajl_tree_free(w.root);
	free(r.body);
	r = watch1(S.port, "ring/", now - 4097, 10000);
	w = watch_parse(&r);
	assert_true(w.compacted);
	yajl_tree_free(w.root);
	free(r.body);

	/* a since from the future (a server that lost its store) too */
	r = watch1(S.port, "", now + 5, 10000);
	w = watch_parse(&r);
	assert_true(w.compacted);
	assert_int_equal(w.revision, now);
	yajl_tree_free(w.root);
	free(r.body);
}

static void test_watch_hangup(void **state)
{
	uint64_t rev = current_rev(S.port);
	struct conn c = conn_open(S.port), d;
	char *t = watch_target("dc/", rev, 10000), *two;
	struct watch w;
	struct resp r;

	(void)state;
	/* hangs up while held */
	http_send(&c, "GET", t, NULL, 0);
	usleep(100 * 1000);
	conn_close(&c);
	/* sends more bytes while held, then hangs up */
	d = conn_open(S.port);
	http_send(&d, "GET", t, NULL, 0);
	usleep(100 * 1000);
	send_all(d.fd, "GARBAGE \x01\x02\r\n", 12);
	usleep(100 * 1000);
	conn_close(&d);
	free(t);
	/* their sockets are closed at once, not at their timeout */
	assert_int_equal(wait_fds(S.pid, S_fds), S_fds);
	put_key(S.port, "dc/x", "v\n", 2);      /* would wake them */
	check_key(S.port, "dc/x", "v\n", 2);

	/* requests pipelined behind a held watch, sent with it and sent
	 * while it is held, are answered after it */
	c = conn_open(S.port);
	t = watch_target("pl/", rev + 1, 10000);
	two = fmt("GET %s HTTP/1.1\r\nHost: x\r\n\r\n"
		  "GET /metadata?key=pl%%2Fa HTTP/1.1\r\nHost: x\r\n\r\n", t);
	send_all(c.fd, two, strlen(two));
	usleep(100 * 1000);
	http_send(&c, "GET", "/metadata?key=dc%2Fx", NULL, 0);
	usleep(100 * 1000);
	put_key(S.port, "pl/a", "pv\n", 3);
	http_recv(&c, &r, IO_MS);
	w = watch_parse(&r);
	assert_int_equal(w.n, 1);
	event_check(&w, 0, rev + 2, "put", "pl/a");
	yajl_tree_free(w.root);
	free(r.body);
	http_recv(&c, &r, IO_MS);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.len, 3);
	assert_memory_equal(r.body, "pv\n", 3);
	free(r.body);
	http_recv(&c, &r, IO_MS);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.len, 2);
	assert_memory_equal(r.body, "v\n", 2);
	free(r.body);
	conn_close(&c);
	free(two);
	free(t);
}


/* --- main ---------------------------------------------------------------- */

static int shared_start(void **state)
{
	(void)state;
	server_start(&S, NULL, NULL);
	S_fds = fd_count(S.pid);
	return 0;
}

/* The shared server must still be up and end cleanly on SIGTERM. */
static int shared_stop(void **state)
{
	int status;

	(void)state;
	if (S.pid < 0)
		return -1;
	status = server_stop(&S, SIGTERM);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest shared[] = {
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_get_absent),
		cmocka_unit_test(test_bad_requests),
		cmocka_unit_test(test_encoded_keys),
		cmocka_unit_test(test_thousand_keys),
		cmocka_unit_test(test_watch_wakes),
		cmocka_unit_test(test_watch_prefix_timeout),
		cmocka_unit_test(test_watch_compacted),
		cmocka_unit_test(test_watch_hangup),
	};
	int failed;

	if (!mkdtemp(tmp_dir)) {
		perror("mkdtemp");
		return 1;
	}
	failed = cmocka_run_group_tests_name("xfer-metad", shared,
					     shared_start, shared_stop);
	th_rm_tree(tmp_dir);
	return failed;
}
