/*
 * The redis backend with Sentinel: a master, its replica and three
 * sentinels on loopback (redis-server --sentinel). Connection strings; no
 * sentinel answering (calls fail, bounded); the master killed under a
 * backend (it follows +switch-master to the promoted replica, says
 * reconnected and that changes may have been missed, with AUTH); and
 * under two engines, which republish their keys on the new master (the
 * replica was made to lose them first), while a newcomer finds both.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "metadata/redis_internal.h"
#include "test/th_redis.h"

#define IO_MS 5000          /* the most a healthy answer may take */
/* The master killed: down-after, the sentinels' vote and promotion, then
 * our backoff. */
#define FAILOVER_MS 20000
#define BUF (1 << 20)
#define PASSWORD "s3cret"

static struct th_sentinels T;

static void test_urls(void **state)
{
	static const char *const bad[] = {
		"redis+sentinel://", "redis+sentinel://h", "redis+sentinel://h/",
		"redis+sentinel://h:0/m", "redis+sentinel://h,/m",
		"redis+sentinel://h:1/m/x", "redis+sentinel://h:1/m/1/2",
		"redis+sentinel://h:1/m y", "redis+sentinel://u@h:1/m",
		"redis+sentinel://h:1:2/m", "redis+sentinel:///m",
	};
	static const char *const good[] = {
		"redis+sentinel://127.0.0.1/m",
		"redis+sentinel://127.0.0.1:1,127.0.0.1:2/m/3",
		"REDIS+SENTINEL://[::1]:1;127.0.0.1/m/",
	};
	struct th_store *f = th_store_new(&xfer_redis_ops, "mooncake/", NULL);
	struct xfer_store *st;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(xfer_redis_ops.open(bad[i], &f->env, &st),
				 -EINVAL);
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		assert_true(xfer_redis_ops.accepts(good[i]));
		assert_int_equal(xfer_redis_ops.open(good[i], &f->env, &st), 0);
		xfer_redis_ops.close(st);
	}
	th_store_free(f);
}

/* No sentinel answers: what was asked fails once each was tried, and
 * later calls at once. */
static void test_no_sentinel(void **state)
{
	struct th_store *f = th_store_new(&xfer_redis_ops, "mooncake/", NULL);
	struct th_res r;
	char conn[128];
	int64_t t0 = th_now_ms();

	(void)state;
	snprintf(conn, sizeof(conn), "redis+sentinel://127.0.0.1:%u,"
		 "127.0.0.1:%u/%s", th_free_port(), th_free_port(), TH_MASTER);
	assert_int_equal(xfer_redis_ops.open(conn, &f->env, &f->st), 0);
	assert_true(th_store_op(f, 'p', "mooncake/k", "v", 1, &r, IO_MS) < 0);
	assert_true(th_now_ms() - t0 < 2000);
	t0 = th_now_ms();
	assert_true(th_store_op(f, 'g', "mooncake/k", NULL, 0, &r, IO_MS) < 0);
	assert_true(th_now_ms() - t0 < 100);
	th_store_free(f);
}

/* The backend follows the master to the promoted replica: reconnected
 * and changed(NULL) once; calls work there, with AUTH. */
static void test_failover(void **state)
{
	struct th_store *f = th_store_new(&xfer_redis_ops, "mooncake/", NULL);
	struct redis_store *s;
	struct th_res r;
	int64_t t0;

	(void)state;
	th_sentinels_start(&T, PASSWORD);
	f->env.password = PASSWORD;
	assert_int_equal(xfer_redis_ops.open(T.conn, &f->env, &f->st), 0);
	s = container_of(f->st, struct redis_store, pub);
	th_store_wait_watching(f, f, "mooncake/probe", IO_MS);
	assert_int_equal(th_store_put(f, "mooncake/k", "v1", IO_MS), 0);
	assert_int_equal(s->server.port, T.master.port);
	th_redis_stop(&T.master, SIGKILL);
	t0 = th_now_ms();
	assert_true(th_run_until(f->base, f->reconnected && f->changed_all,
				 FAILOVER_MS));
	print_message("master killed: the backend on the new master after "
		      "%lld ms\n", (long long)(th_now_ms() - t0));
	assert_int_equal(s->server.port, T.replica.port);
	assert_int_equal(th_sentinels_master(&T), T.replica.port);
	assert_int_equal(s->switches, 1);
	assert_int_equal(th_store_op(f, 'g', "mooncake/k", NULL, 0, &r,
				     IO_MS), 0);
	assert_int_equal(th_store_put(f, "mooncake/k", "v2", IO_MS), 0);
	th_store_forget(f);
	th_store_wait_watching(f, f, "mooncake/probe2", IO_MS);
	th_run_until(f->base, false, 100);
	assert_int_equal(f->reconnected, 1);
	assert_int_equal(f->changed_all, 1);
	th_store_free(f);
	th_sentinels_free(&T);
}

static struct xfer_engine *engine(const char *name)
{
	struct xfer_config *cfg = th_config();
	struct xfer_engine *e;

	th_set(cfg, "bind_addr", "127.0.0.1");
	th_set(cfg, "metadata_server", T.conn);
	th_set(cfg, "metadata_password", PASSWORD);
	th_set(cfg, "local_server_name", name);
	e = xfer_engine_new(cfg);
	xfer_config_free(cfg);
	if (!e)
		fail_msg("engine %s: %s", name, strerror(errno));
	return e;
}

/* Does the server at @p port hold all of @p keys? A connection each
 * time, and a socket error is a no: a promoted replica drops its
 * clients. */
static bool holds(int port, const char *const *keys)
{
	int fd = th_raw_connect(port);
	char out[64];
	size_t len;
	bool all = fd >= 0 &&
		   !th_raw_cmdv(fd, out, sizeof(out), &len, 2, (const char *[]){
				"AUTH", PASSWORD }) && !strcmp(out, "+OK");

	for (; *keys && all; keys++)
		all = !th_raw_cmdv(fd, out, sizeof(out), &len, 2,
				   (const char *[]){ "EXISTS", *keys }) &&
		      !strcmp(out, ":1");
	if (fd >= 0)
		close(fd);
	return all;
}

/* Two engines; their keys deleted on the replica, then the master
 * killed: once promoted, the replica has them again (republished); a
 * newcomer opens both, and data moves all along. */
static void test_engines(void **state)
{
	static const char *const keys[] = {
		"mooncake/rpc_meta/sn-a", "mooncake/ram/sn-a",
		"mooncake/rpc_meta/sn-b", "mooncake/ram/sn-b", NULL,
	};
	struct xfer_engine *a, *b, *c;
	char *ma = th_alloc(BUF), *mb = th_alloc(BUF), *mc = th_alloc(BUF);
	int64_t sb, t0, sa2, sb2;
	int fd;

	(void)state;
	th_sentinels_start(&T, PASSWORD);
	a = engine("sn-a");
	b = engine("sn-b");
	assert_int_equal(xfer_register(a, ma, BUF, "cpu:0", true), 0);
	assert_int_equal(xfer_register(b, mb, BUF, "cpu:0", true), 0);
	sb = xfer_segment_open(a, "sn-b");
	assert_true(sb >= 0);
	th_write_verified(a, ma, sb, mb, BUF, 1);
	fd = th_sentinels_connect(&T, T.replica.port);
	for (const char *const *k = keys; *k; k++)
		assert_string_equal(th_raw_cmd(fd, "DEL", *k), ":1");
	close(fd);

	th_redis_stop(&T.master, SIGKILL);
	t0 = th_now_ms();
	th_write_verified(a, ma, sb, mb, BUF, 2);   /* the cached descriptor */
	while (!holds(T.replica.port, keys)) {
		assert_true(th_now_ms() - t0 < FAILOVER_MS);
		usleep(20000);
	}
	print_message("master killed: both engines republished on the new "
		      "master after %lld ms\n", (long long)(th_now_ms() - t0));
	assert_int_equal(th_sentinels_master(&T), T.replica.port);
	c = engine("sn-c");
	assert_int_equal(xfer_register(c, mc, BUF, "cpu:0", true), 0);
	sa2 = xfer_segment_open(c, "sn-a");
	sb2 = xfer_segment_open(c, "sn-b");
	assert_true(sa2 >= 0 && sb2 >= 0);
	th_write_verified(c, mc, sa2, ma, BUF, 3);
	th_write_verified(c, mc, sb2, mb, BUF, 4);
	xfer_engine_free(c);
	xfer_engine_free(b);
	xfer_engine_free(a);
	free(ma);
	free(mb);
	free(mc);
	th_sentinels_free(&T);
}

static int teardown(void **state)
{
	(void)state;
	th_sentinels_free(&T);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_urls),
		cmocka_unit_test(test_no_sentinel),
		cmocka_unit_test_teardown(test_failover, teardown),
		cmocka_unit_test_teardown(test_engines, teardown),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
