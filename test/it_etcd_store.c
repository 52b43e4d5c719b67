/*
 * The etcd metadata backend against a real etcd (3.4, its v3 JSON
 * gateway) of one member, driven on a private event_base: byte-exact
 * round trips, connection strings, the watch and its prefix, the lease
 * (kept alive, gone after close, granted again when revoked), a server
 * that is down, a server killed and restarted, and close with work
 * pending. test/it_etcd_members.c has a cluster of three.
 *
 * One etcd serves the whole run; each test keeps to a prefix of its own.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <yajl/yajl_tree.h>

#include "test/th_etcd.h"
#include "metadata/backends_internal.h"

#define IO_MS 5000       /* the most a healthy answer may take */
#define TTL_S 10         /* the backend's lease TTL */


/* A backend watching @p prefix on a base of its own; not open yet. */
static struct th_store *fx_new(const char *prefix)
{
	return th_etcd_store(prefix, NULL);
}

static void fx_open(struct th_store *f)
{
	th_etcd_open(f, th_cluster.conn);
}

#define key_lease(key) th_etcd_key_lease(&th_cluster, key)
#define etcdctl(...) th_etcdctl(&th_cluster, __VA_ARGS__)

#define sget(f, key, r) th_store_op(f, 'g', key, NULL, 0, r, IO_MS)
#define sput(f, key, v) th_store_put(f, key, v, IO_MS)
#define sdel(f, key) th_store_del(f, key, IO_MS)

/* ---- tests ---- */

static void test_conn_strings(void **state)
{
	static const char *const bad[] = {
		"etcd://", "etcd://h", "etcd://:2379", "etcd://h:",
		"etcd://h:0", "etcd://h:65536", "etcd://h:12x", "etcd://h:+1",
		"etcd://h:2379/", "etcd://[::1", "etcd://[::1]", "::1:2379",
		"h:1:2", "etcd://h:1,", "etcd://h:1,,h:2", "h:1;", ",h:1",
		"etcd://h:1,h", "etcd://h:1 h:2", "etcd://u@h:1",
		"etcd://h:1,h:2,h:3,h:4,h:5,h:6,h:7,h:8,h:9,h:10,h:11,h:12,"
		"h:13,h:14,h:15,h:16,h:17",
	};
	static const char *const good[] = {
		"etcd://[::1]:1", "etcd://127.0.0.1:1,127.0.0.1:2",
		"127.0.0.1:1;127.0.0.1:2;[::1]:3", "localhost:1,127.0.0.1:2",
	};
	struct th_store *f = fx_new("cs/");
	struct xfer_store *st = NULL;
	char conn[64];
	struct th_res r;

	(void)state;
	assert_string_equal(xfer_etcd_ops.name, "etcd");
	assert_true(xfer_etcd_ops.accepts("etcd://127.0.0.1:2379"));
	assert_true(xfer_etcd_ops.accepts("ETCD://h:1"));
	assert_true(xfer_etcd_ops.accepts("127.0.0.1:2379"));
	assert_true(xfer_etcd_ops.accepts("[::1]:2379"));
	assert_false(xfer_etcd_ops.accepts("p2p"));
	assert_false(xfer_etcd_ops.accepts("P2PHANDSHAKE"));
	assert_false(xfer_etcd_ops.accepts("redis://h:6379"));
	assert_false(xfer_etcd_ops.accepts("http://h:8080/metadata"));
	assert_false(xfer_etcd_ops.accepts("localhost"));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(xfer_etcd_ops.open(bad[i], &f->env, &st),
				 -EINVAL);
	assert_null(st);
	/* Closed at once, whatever their connects got to. */
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		assert_true(xfer_etcd_ops.accepts(good[i]));
		assert_int_equal(xfer_etcd_ops.open(good[i], &f->env, &st), 0);
		xfer_etcd_ops.close(st);
	}
	/* Mooncake's bare host:port is etcd; a member that is down is
	 * passed over. */
	snprintf(conn, sizeof(conn), "127.0.0.1:%d;localhost:%d",
		 th_free_port(), th_cluster.m[0].port);
	assert_int_equal(xfer_etcd_ops.open(conn, &f->env, &f->st), 0);
	assert_int_equal(sget(f, "cs/absent", &r), -ENOENT);
	th_store_free(f);
}

static void close_cb(int err, const char *value, size_t len, void *arg)
{
	struct th_store *f = arg;

	(void)err;
	(void)value;
	(void)len;
	th_store_close(f);
}

static void test_roundtrip(void **state)
{
	static const char value[] = "{\"a\":1}\n\0tail\n";
	struct th_store *f = fx_new("rt/");
	struct th_res r, r2 = { 0 };

	(void)state;
	fx_open(f);
	assert_int_equal(th_store_op(f, 'p', "rt/ram/a", value,
				     sizeof(value) - 1, &r, IO_MS), 0);
	assert_int_equal(sget(f, "rt/ram/a", &r), 0);
	assert_int_equal(r.len, sizeof(value) - 1);
	assert_memory_equal(r.val, value, sizeof(value) - 1);
	assert_int_equal(sput(f, "rt/ram/a", "again"), 0);
	assert_int_equal(sget(f, "rt/ram/a", &r), 0);
	assert_int_equal(r.len, 5);
	assert_memory_equal(r.val, "again", 5);
	/* The gateway leaves an empty value out of its answer. */
	assert_int_equal(sput(f, "rt/empty", ""), 0);
	assert_int_equal(sget(f, "rt/empty", &r), 0);
	assert_int_equal(r.len, 0);
	assert_int_equal(sget(f, "rt/absent", &r), -ENOENT);
	assert_int_equal(sdel(f, "rt/ram/a"), 0);
	assert_int_equal(sget(f, "rt/ram/a", &r), -ENOENT);
	assert_int_equal(sdel(f, "rt/ram/a"), 0);
	assert_int_equal(sdel(f, "rt/empty"), 0);
	assert_int_equal(f->reconnected, 0);
	assert_int_equal(f->changed_all, 0);

	/* A callback closes the store: the call behind it never returns. */
	xfer_etcd_ops.get(f->st, "rt/absent", close_cb, f);
	xfer_etcd_ops.get(f->st, "rt/absent", th_res_cb, &r2);
	assert_true(th_run_until(f->base, !f->st, IO_MS));
	th_run_until(f->base, false, 50);
	assert_int_equal(r2.calls, 0);
	th_store_free(f);
}

/* Puts and deletes by another client under the prefix are seen with their
 * full key, in order; keys outside are not. */
static void test_watch(void **state)
{
	struct th_store *a = fx_new("w/"), *b = fx_new("w/");
	struct th_res r;

	(void)state;
	fx_open(a);
	fx_open(b);
	th_store_wait_watching(a, b, "w/probe", IO_MS);
	th_store_forget(a);
	assert_int_equal(sput(b, "x/out", "1"), 0);
	assert_int_equal(sput(b, "w", "1"), 0);
	assert_int_equal(sput(b, "w/k", "1"), 0);
	assert_int_equal(sdel(b, "w/k"), 0);
	assert_int_equal(sdel(b, "w/never"), 0);  /* deletes nothing */
	assert_int_equal(sput(b, "w/end", "1"), 0);
	assert_true(th_run_until(a->base, th_store_seen(a, "w/end"), IO_MS));
	assert_int_equal(a->nkeys, 3);
	assert_string_equal(a->keys[0], "w/k");
	assert_string_equal(a->keys[1], "w/k");
	assert_int_equal(a->changed_all, 0);
	assert_int_equal(sget(a, "w/k", &r), -ENOENT);
	assert_int_equal(sdel(b, "x/out"), 0);
	assert_int_equal(sdel(b, "w"), 0);
	th_store_free(a);
	th_store_free(b);
}

/* Every put carries the lease; once the backend is closed (no more
 * keepalives), the key goes within the TTL. */
static void test_lease(void **state)
{
	struct th_store *a = fx_new("l/"), *b = fx_new("l/");
	struct th_res r;
	int64_t lease;

	(void)state;
	fx_open(a);
	/* Before the grant is back: the put waits for it. */
	assert_int_equal(sput(a, "l/k", "v"), 0);
	lease = key_lease("l/k");
	assert_true(lease > 0);
	fx_open(b);
	th_store_wait_watching(b, b, "l/probe", IO_MS);
	th_store_forget(b);
	th_store_close(a);
	assert_true(th_run_until(b->base, th_store_seen(b, "l/k"),
				 (TTL_S + 3) * 1000));
	assert_int_equal(sget(b, "l/k", &r), -ENOENT);
	th_store_free(a);
	th_store_free(b);
}

/* A revoked lease is granted anew, and the user hears reconnected to
 * publish again: found by the keepalive (so keepalives go out every
 * TTL/3), or by a put that then goes again under the new lease. */
static void test_lease_lost(void **state)
{
	struct th_store *f = fx_new("ll/");
	int64_t first, second, third;
	struct th_res r;
	yajl_val j;

	(void)state;
	fx_open(f);
	assert_int_equal(sput(f, "ll/k", "v"), 0);
	first = key_lease("ll/k");
	assert_true(first > 0);
	j = etcdctl("lease revoke %" PRIx64, (uint64_t)first);
	yajl_tree_free(j);
	assert_true(th_run_until(f->base, f->reconnected, TTL_S * 1000 / 3 +
				 IO_MS));
	assert_int_equal(sget(f, "ll/k", &r), -ENOENT);
	assert_int_equal(sput(f, "ll/k", "v"), 0);
	second = key_lease("ll/k");
	assert_true(second > 0 && second != first);

	j = etcdctl("lease revoke %" PRIx64, (uint64_t)second);
	yajl_tree_free(j);
	assert_int_equal(sput(f, "ll/k2", "v"), 0);
	third = key_lease("ll/k2");
	assert_true(third > 0 && third != second);
	assert_true(th_run_until(f->base, f->reconnected == 2, IO_MS));
	assert_int_equal(sget(f, "ll/k", &r), -ENOENT);
	assert_int_equal(sdel(f, "ll/k2"), 0);
	th_run_until(f->base, false, 10);
	assert_int_equal(f->reconnected, 2);
	th_store_free(f);
}

/* Nothing listens: open works, calls fail at once; close with calls in
 * flight drops them. */
static void test_server_down(void **state)
{
	struct th_store *f = fx_new("d/");
	struct th_res r, r2 = { 0 };
	int64_t t0 = th_now_ms();
	char conn[64];

	(void)state;
	snprintf(conn, sizeof(conn), "etcd://127.0.0.1:%d", th_free_port());
	th_etcd_open(f, conn);
	assert_int_equal(sget(f, "d/k", &r), -ECONNREFUSED);
	assert_true(sput(f, "d/k", "v") < 0);
	assert_true(sdel(f, "d/k") < 0);
	assert_true(th_now_ms() - t0 < 1000);
	xfer_etcd_ops.get(f->st, "d/k", th_res_cb, &r2);
	xfer_etcd_ops.put(f->st, "d/k", "v", 1, th_res_cb, &r2);
	th_store_close(f);
	th_run_until(f->base, false, 50);
	assert_int_equal(r2.calls, 0);
	assert_int_equal(f->reconnected, 0);
	th_store_free(f);
}

/* etcd killed and started again on the same data: the watch comes back
 * from the revision it had seen, so a change made at once is seen once
 * and nothing is said to be missed; the lease lived through it, so a
 * failed get asks for no republishing. A backend opened while the server
 * was down hears that changes may have been missed once its watch is
 * there, and reconnected (its put failed) once calls work. */
static void test_restart(void **state)
{
	struct th_store *f = fx_new("r/");
	struct th_store *g = th_store_new(&xfer_etcd_ops, "r/", f->base);
	struct th_res r;
	int64_t lease;
	yajl_val j;

	(void)state;
	fx_open(f);
	th_store_wait_watching(f, f, "r/probe", IO_MS);
	assert_int_equal(sput(f, "r/k", "v1"), 0);
	lease = key_lease("r/k");
	th_etcd_kill(&th_cluster, 0, SIGKILL);
	assert_true(sget(f, "r/k", &r) < 0);
	fx_open(g);
	assert_true(sput(g, "r/g", "v") < 0);
	th_etcd_restart(&th_cluster, 0);
	th_store_forget(f);
	j = etcdctl("put r/other x");
	yajl_tree_free(j);
	assert_true(th_run_until(f->base, th_store_seen(f, "r/other") &&
				 g->changed_all && g->reconnected, 3 * IO_MS));
	th_run_until(f->base, false, 100);
	assert_int_equal(f->nkeys, 1);
	assert_int_equal(f->changed_all, 0);
	assert_int_equal(f->reconnected, 0);
	assert_int_equal(g->changed_all, 1);
	assert_int_equal(g->reconnected, 1);
	assert_int_equal(key_lease("r/k"), lease);
	assert_int_equal(sput(f, "r/k", "v2"), 0);
	assert_int_equal(sget(g, "r/k", &r), 0);
	assert_int_equal(r.len, 2);
	assert_memory_equal(r.val, "v2", 2);
	assert_int_equal(sput(g, "r/g", "v"), 0);
	assert_true(key_lease("r/g") > 0);
	th_store_free(g);
	th_store_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_conn_strings),
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_watch),
		cmocka_unit_test(test_lease),
		cmocka_unit_test(test_lease_lost),
		cmocka_unit_test(test_server_down),
		cmocka_unit_test(test_restart),
	};

	return cmocka_run_group_tests(tests, th_etcd_setup1, th_etcd_teardown);
}
