/*
 * The redis metadata backend against a real redis-server, driven on a
 * private event_base: byte-exact round trips, the keyspace watch and its
 * prefix, a server that is down, killed, restarted or stopped, AUTH, the
 * db index, and close with work pending. test/it_redis_sentinel.c has
 * Sentinel.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "test/th_redis.h"
#include "metadata/backends_internal.h"

#define IO_MS 5000       /* the most a healthy answer may take */

/* ---- the fixture: a backend with its own base, and a server ---- */

static struct th_redis srv;   /* the running test's server, stopped at fx_free */

static struct th_store *fx_new(void)
{
	srv = (struct th_redis){ 0 };
	return th_store_new(&xfer_redis_ops, "mooncake/", NULL);
}

static int fx_open(struct th_store *f, const char *db)
{
	char conn[64];

	snprintf(conn, sizeof(conn), "redis://127.0.0.1:%d%s", srv.port,
		 db ? db : "");
	return xfer_redis_ops.open(conn, &f->env, &f->st);
}

static void fx_free(struct th_store *f)
{
	th_store_close(f);
	th_redis_stop(&srv, SIGTERM);
	th_store_free(f);
}

#define sget(f, key, r) th_store_op(f, 'g', key, NULL, 0, r, IO_MS)
#define sput(f, key, v) th_store_put(f, key, v, IO_MS)
#define sdel(f, key) th_store_del(f, key, IO_MS)

/* ---- tests ---- */

static void test_urls(void **state)
{
	static const char *const bad[] = {
		"redis://", "redis://:6379", "redis://h:", "redis://h:0",
		"redis://h:65536", "redis://h:12x", "redis://h:1/-1",
		"redis://h:1/x", "redis://h:1/3/4", "redis://u:p@h:1",
		"redis://[::1", "redis://h:1/99999999999",
	};
	static const char *const good[] = {
		"redis://127.0.0.1", "REDIS://localhost:1/0",
		"redis://127.0.0.1:1/", "redis://[::1]:1/15",
	};
	struct th_store *f = fx_new();
	struct xfer_store *st;

	(void)state;
	assert_true(xfer_redis_ops.accepts("redis://h:1"));
	assert_false(xfer_redis_ops.accepts("http://h:1"));
	assert_false(xfer_redis_ops.accepts("p2p"));
	assert_string_equal(xfer_redis_ops.name, "redis");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(xfer_redis_ops.open(bad[i], &f->env, &st),
				 -EINVAL);
	/* Closed at once, whether or not their connects got anywhere. */
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		assert_int_equal(xfer_redis_ops.open(good[i], &f->env, &st), 0);
		xfer_redis_ops.close(st);
	}
	fx_free(f);
}

static void test_roundtrip(void **state)
{
	static const char value[] = "{\"a\":1}\n\0tail\n";
	struct th_store *f = fx_new();
	struct th_res r;

	(void)state;
	th_redis_start(&srv, 0, NULL, NULL);
	assert_int_equal(fx_open(f, NULL), 0);
	assert_int_equal(th_store_op(f, 'p', "mooncake/ram/a", value,
				     sizeof(value) - 1, &r, IO_MS), 0);
	assert_int_equal(sget(f, "mooncake/ram/a", &r), 0);
	assert_int_equal(r.len, sizeof(value) - 1);
	assert_memory_equal(r.val, value, sizeof(value) - 1);
	assert_int_equal(sput(f, "mooncake/empty", ""), 0);
	assert_int_equal(sget(f, "mooncake/empty", &r), 0);
	assert_int_equal(r.len, 0);
	assert_int_equal(sget(f, "mooncake/absent", &r), -ENOENT);
	assert_int_equal(sdel(f, "mooncake/ram/a"), 0);
	assert_int_equal(sget(f, "mooncake/ram/a", &r), -ENOENT);
	assert_int_equal(sdel(f, "mooncake/ram/a"), 0);
	assert_int_equal(f->reconnected, 0);
	assert_int_equal(f->changed_all, 0);
	fx_free(f);
}

/* Changes by another client under the prefix are seen with their full
 * key; others, glob look-alikes included, are not. Flags the server had
 * are kept. */
static void test_watch(void **state)
{
	const char *const extra[] = { "--notify-keyspace-events", "Ex", NULL };
	struct th_store *f = fx_new();
	const char *flags;
	int fd;

	(void)state;
	f->env.prefix = "t/c*/";
	th_redis_start(&srv, 0, NULL, extra);
	assert_int_equal(fx_open(f, NULL), 0);
	th_store_wait_watching(f, f, "t/c*/probe", IO_MS);
	fd = th_raw_connect(srv.port);
	assert_true(fd >= 0);
	flags = th_raw_cmd(fd, "CONFIG", "GET", "notify-keyspace-events");
	for (const char *c = "KEg$x"; *c; c++)   /* after the bulk's '$' */
		assert_non_null(strchr(flags + 1, *c));
	assert_string_equal(th_raw_cmd(fd, "SET", "t/c*/k1", "v"), "+OK");
	assert_true(th_run_until(f->base, th_store_seen(f, "t/c*/k1") == 1,
				 IO_MS));
	assert_string_equal(th_raw_cmd(fd, "DEL", "t/c*/k1"), ":1");
	assert_true(th_run_until(f->base, th_store_seen(f, "t/c*/k1") == 2,
				 IO_MS));
	assert_string_equal(th_raw_cmd(fd, "SET", "t/cX/k", "v"), "+OK");
	assert_string_equal(th_raw_cmd(fd, "SET", "other/k", "v"), "+OK");
	assert_string_equal(th_raw_cmd(fd, "SET", "t/c*/end", "v"), "+OK");
	assert_true(th_run_until(f->base, th_store_seen(f, "t/c*/end"), IO_MS));
	assert_int_equal(th_store_seen(f, "t/cX/k"), 0);
	assert_int_equal(th_store_seen(f, "other/k"), 0);
	assert_int_equal(f->changed_all, 0);
	close(fd);
	fx_free(f);
}

static void test_down_at_open(void **state)
{
	struct th_store *f = fx_new();
	struct th_res r;
	int64_t t0;

	(void)state;
	srv.port = th_free_port();
	assert_int_equal(fx_open(f, NULL), 0);
	for (int i = 0; i < 3; i++) {
		t0 = th_now_ms();
		assert_true(th_store_op(f, "gpd"[i], "mooncake/k", "v", 1, &r,
					1000) < 0);
		assert_true(th_now_ms() - t0 < 1000);
	}
	fx_free(f);
}

/* Killed and restarted on the same port: requests fail meanwhile, then
 * the backend is back by itself and says so once. */
static void test_restart(void **state)
{
	struct th_store *f = fx_new();
	struct th_res r;
	int64_t t0;

	(void)state;
	th_redis_start(&srv, 0, NULL, NULL);
	assert_int_equal(fx_open(f, NULL), 0);
	th_store_wait_watching(f, f, "mooncake/probe", IO_MS);
	assert_int_equal(sput(f, "mooncake/k", "v"), 0);
	th_redis_stop(&srv, SIGTERM);
	t0 = th_now_ms();
	assert_true(sget(f, "mooncake/k", &r) < 0);
	assert_true(th_now_ms() - t0 < 1000);
	assert_int_equal(f->reconnected, 0);
	th_redis_start(&srv, srv.port, NULL, NULL);
	assert_true(th_run_until(f->base, f->reconnected == 1 &&
				 f->changed_all == 1, 3 * IO_MS));
	/* The new server lost the keys: why the engine republishes. */
	assert_int_equal(sget(f, "mooncake/k", &r), -ENOENT);
	assert_int_equal(sput(f, "mooncake/k", "v2"), 0);
	assert_int_equal(sget(f, "mooncake/k", &r), 0);
	assert_memory_equal(r.val, "v2", 2);
	th_store_wait_watching(f, f, "mooncake/probe2", IO_MS);
	th_run_until(f->base, false, 300);
	assert_int_equal(f->reconnected, 1);
	assert_int_equal(f->changed_all, 1);
	fx_free(f);
}

/* A request in flight when the connection drops fails with ECONNRESET. */
static void test_drop_in_flight(void **state)
{
	struct th_store *f = fx_new();
	struct th_res r = { 0 };

	(void)state;
	th_redis_start(&srv, 0, NULL, NULL);
	assert_int_equal(fx_open(f, NULL), 0);
	assert_int_equal(sput(f, "mooncake/k", "v"), 0);
	kill(srv.pid, SIGSTOP);
	xfer_redis_ops.get(f->st, "mooncake/k", th_res_cb, &r);
	th_run_until(f->base, r.calls, 200);
	assert_int_equal(r.calls, 0);
	th_redis_stop(&srv, SIGKILL);
	assert_true(th_run_until(f->base, r.calls, IO_MS));
	assert_int_equal(r.err, -ECONNRESET);
	fx_free(f);
}

/* A server that stops answering: the request times out, the connection is
 * made again, and work goes on once the server does. */
static void test_stall(void **state)
{
	struct th_store *f = fx_new();
	struct th_res r;
	int64_t t0;

	(void)state;
	th_redis_start(&srv, 0, NULL, NULL);
	assert_int_equal(fx_open(f, NULL), 0);
	th_store_wait_watching(f, f, "mooncake/probe", IO_MS);
	kill(srv.pid, SIGSTOP);
	t0 = th_now_ms();
	assert_int_equal(th_store_op(f, 'g', "mooncake/k", NULL, 0, &r,
				     3 * IO_MS), -ETIMEDOUT);
	assert_true(th_now_ms() - t0 >= IO_MS - 100);
	kill(srv.pid, SIGCONT);
	assert_true(th_run_until(f->base, f->reconnected == 1, 3 * IO_MS));
	assert_int_equal(sput(f, "mooncake/k", "v"), 0);
	assert_int_equal(sget(f, "mooncake/k", &r), 0);
	fx_free(f);
}

static void test_auth(void **state)
{
	const char *const extra[] = { "--requirepass", "secret", NULL };
	struct th_store *f = fx_new();
	struct th_res r;
	int64_t t0;

	(void)state;
	th_redis_start(&srv, 0, NULL, extra);
	/* AUTH pass, then AUTH user pass. */
	f->env.password = "secret";
	assert_int_equal(fx_open(f, NULL), 0);
	th_store_wait_watching(f, f, "mooncake/probe", IO_MS);
	assert_int_equal(sput(f, "mooncake/k", "v"), 0);
	xfer_redis_ops.close(f->st);
	f->env.user = "default";
	assert_int_equal(fx_open(f, "/0"), 0);
	assert_int_equal(sget(f, "mooncake/k", &r), 0);
	xfer_redis_ops.close(f->st);
	/* Wrong or no password: errors, not hangs. */
	f->env.user = NULL;
	f->env.password = "wrong";
	assert_int_equal(fx_open(f, NULL), 0);
	t0 = th_now_ms();
	assert_true(sget(f, "mooncake/k", &r) < 0);
	assert_true(sget(f, "mooncake/k", &r) < 0);
	assert_true(th_now_ms() - t0 < 2000);
	xfer_redis_ops.close(f->st);
	f->env.password = NULL;
	assert_int_equal(fx_open(f, NULL), 0);
	assert_true(sget(f, "mooncake/k", &r) < 0);
	assert_int_equal(f->reconnected, 0);
	fx_free(f);
}

static void test_db(void **state)
{
	struct th_store *f = fx_new();
	size_t len;
	char out[64];
	int fd;

	(void)state;
	th_redis_start(&srv, 0, NULL, NULL);
	assert_int_equal(fx_open(f, "/3"), 0);
	th_store_wait_watching(f, f, "mooncake/probe", IO_MS);
	assert_int_equal(sput(f, "mooncake/k", "in 3\n"), 0);
	fd = th_raw_connect(srv.port);
	assert_true(fd >= 0);
	assert_string_equal(th_raw_cmd(fd, "GET", "mooncake/k"), "$-1");
	assert_string_equal(th_raw_cmd(fd, "SELECT", "3"), "+OK");
	assert_int_equal(th_raw_cmdv(fd, out, sizeof(out), &len, 2,
				  (const char *[]){ "GET", "mooncake/k" }), 0);
	assert_int_equal(len, 5);
	assert_memory_equal(out, "$in 3\n", 6);
	assert_string_equal(th_raw_cmd(fd, "DEL", "mooncake/k"), ":1");
	assert_true(th_run_until(f->base, th_store_seen(f, "mooncake/k") == 2,
				 IO_MS));
	close(fd);
	fx_free(f);
}

/* The server refuses CONFIG: the backend carries on, and a watch the
 * server was set up for works. */
static void test_config_refused(void **state)
{
	const char *const extra[] = { "--rename-command", "CONFIG", "",
				      "--notify-keyspace-events", "K$g",
				      NULL };
	struct th_store *f = fx_new();
	struct th_res r;

	(void)state;
	th_redis_start(&srv, 0, NULL, extra);
	assert_int_equal(fx_open(f, NULL), 0);
	th_store_wait_watching(f, f, "mooncake/probe", IO_MS);
	assert_int_equal(sget(f, "mooncake/probe", &r), 0);
	fx_free(f);
}

static void close_cb(int err, const char *value, size_t len, void *arg)
{
	struct th_store *f = arg;

	(void)err;
	(void)value;
	(void)len;
	xfer_redis_ops.close(f->st);
	f->st = NULL;
}

/* Close with requests queued, in flight, or from inside a callback: no
 * callback afterwards (valgrind checks the rest). */
static void test_close_pending(void **state)
{
	struct th_store *f = fx_new();
	struct th_res r[3] = { { 0 } };

	(void)state;
	th_redis_start(&srv, 0, NULL, NULL);
	assert_int_equal(fx_open(f, NULL), 0);
	xfer_redis_ops.put(f->st, "mooncake/k", "v", 1, th_res_cb, &r[0]);
	xfer_redis_ops.close(f->st);
	assert_int_equal(fx_open(f, NULL), 0);
	assert_int_equal(sput(f, "mooncake/k", "v"), 0);
	xfer_redis_ops.get(f->st, "mooncake/k", th_res_cb, &r[1]);
	xfer_redis_ops.close(f->st);
	th_run_until(f->base, false, 100);
	assert_int_equal(r[0].calls + r[1].calls, 0);

	assert_int_equal(fx_open(f, NULL), 0);
	xfer_redis_ops.get(f->st, "mooncake/k", close_cb, f);
	xfer_redis_ops.get(f->st, "mooncake/k", th_res_cb, &r[2]);
	assert_true(th_run_until(f->base, !f->st, IO_MS));
	th_run_until(f->base, false, 100);
	assert_int_equal(r[2].calls, 0);

	th_redis_stop(&srv, SIGTERM);
	assert_int_equal(fx_open(f, NULL), 0);
	th_run_until(f->base, false, 150);   /* a retry timer pending */
	fx_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_urls),
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_watch),
		cmocka_unit_test(test_down_at_open),
		cmocka_unit_test(test_restart),
		cmocka_unit_test(test_drop_in_flight),
		cmocka_unit_test(test_stall),
		cmocka_unit_test(test_auth),
		cmocka_unit_test(test_db),
		cmocka_unit_test(test_config_refused),
		cmocka_unit_test(test_close_pending),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
