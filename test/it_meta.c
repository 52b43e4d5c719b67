/*
 * Central metadata, end to end: real servers started here on free
 * loopback ports (xfer-metad, xfer-stored's HTTP metadata server,
 * redis-server, etcd), two engines that find
 * each other by name through them, the watch that keeps descriptors fresh,
 * a server restarted under running engines, bad values, a server that is
 * down. The store is read and written directly through the backend's ops
 * table on a private event_base, as a third party.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <unistd.h>

#include <event2/event.h>

#include "test/helpers.h"
#include "core/store.h"

#define BUF (1 << 20)

struct fixture;

struct backend {
	const char *name;
	/* argv of the server for the fixture's ports and data folder */
	void (*argv)(char **argv, struct fixture *f);
	const char *url_fmt; /* the URL engines use, from the client port */
};

struct fixture {
	const struct backend *b;
	uint16_t port, aux;     /* client port, and a second one (etcd peers) */
	char port_s[8];
	char dir[64];
	pid_t pid;
	char url[128];
	char args[3][64];       /* argument strings built for the server */
};

static void metad_argv(char **a, struct fixture *f)
{
	a[0] = (char *)th_metad_path();
	a[1] = "--port";
	a[2] = f->port_s;
	a[3] = NULL;
}

/* xfer-stored serving the engines' metadata beside the store's master
 * (--enable_http_metadata_server): xfer-metad's code in its process */
static void stored_argv(char **a, struct fixture *f)
{
	snprintf(f->args[0], sizeof(f->args[0]),
		 "--http_metadata_server_port=%u", f->port);
	a[0] = (char *)th_stored_path();
	a[1] = "--port=0";
	a[2] = "--rpc_address=127.0.0.1";
	a[3] = "--metrics_port=0";
	a[4] = "--metrics_host=127.0.0.1";
	a[5] = "--enable_http_metadata_server";
	a[6] = f->args[0];
	a[7] = "--http_metadata_server_host=127.0.0.1";
	a[8] = NULL;
}

static void redis_argv(char **a, struct fixture *f)
{
	a[0] = "redis-server";
	a[1] = "--port";
	a[2] = f->port_s;
	a[3] = "--bind";
	a[4] = "127.0.0.1";
	a[5] = "--save";
	a[6] = "";
	a[7] = "--appendonly";
	a[8] = "no";
	a[9] = NULL;
}

static void etcd_argv(char **a, struct fixture *f)
{
	snprintf(f->args[0], sizeof(f->args[0]), "http://127.0.0.1:%u", f->port);
	snprintf(f->args[1], sizeof(f->args[1]), "http://127.0.0.1:%u", f->aux);
	snprintf(f->args[2], sizeof(f->args[2]), "t=http://127.0.0.1:%u", f->aux);
	a[0] = "etcd";
	a[1] = "--name";
	a[2] = "t";
	a[3] = "--data-dir";
	a[4] = f->dir;
	a[5] = "--listen-client-urls";
	a[6] = f->args[0];
	a[7] = "--advertise-client-urls";
	a[8] = f->args[0];
	a[9] = "--listen-peer-urls";
	a[10] = f->args[1];
	a[11] = "--initial-advertise-peer-urls";
	a[12] = f->args[1];
	a[13] = "--initial-cluster";
	a[14] = f->args[2];
	a[15] = NULL;
}

static const struct backend backends[] = {
	{ "xfer-metad", metad_argv, "http://127.0.0.1:%u/metadata" },
	{ "xfer-stored", stored_argv, "http://127.0.0.1:%u/metadata" },
	{ "redis", redis_argv, "redis://127.0.0.1:%u" },
	{ "etcd", etcd_argv, "etcd://127.0.0.1:%u" },
};

static bool port_open(uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	bool ok;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

static void server_start(struct fixture *f)
{
	char *argv[32] = { 0 };
	int64_t t0 = th_now_ms();

	f->b->argv(argv, f);
	f->pid = fork();
	assert_true(f->pid >= 0);
	if (f->pid == 0) {
		int null = open("/dev/null", 1);

		dup2(null, 1);
		dup2(null, 2);
		execvp(argv[0], argv);
		_exit(127);
	}
	while (!port_open(f->port)) {
		assert_true(th_now_ms() - t0 < 20000);
		usleep(20000);
	}
}

static void server_stop(struct fixture *f)
{
	int status;

	if (f->pid <= 0)
		return;
	kill(f->pid, SIGKILL);
	waitpid(f->pid, &status, 0);
	f->pid = -1;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	f->b = *state;
	f->port = th_free_port();
	f->aux = th_free_port();
	snprintf(f->port_s, sizeof(f->port_s), "%u", f->port);
	snprintf(f->dir, sizeof(f->dir), "/tmp/it_meta.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->url, sizeof(f->url), f->b->url_fmt, f->port);
	server_start(f);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[128];

	server_stop(f);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

static struct xfer_engine *engine_in(struct fixture *f, const char *name,
				     const char *cluster)
{
	struct xfer_config *cfg = th_config();
	struct xfer_engine *e;

	th_set(cfg, "bind_addr", "127.0.0.1");
	th_set(cfg, "metadata_server", f->url);
	th_set(cfg, "local_server_name", name);
	th_set(cfg, "cluster_id", cluster);
	e = xfer_engine_new(cfg);
	xfer_config_free(cfg);
	assert_non_null(e);
	assert_string_equal(xfer_engine_name(e), name);
	return e;
}

static struct xfer_engine *engine(struct fixture *f, const char *name)
{
	return engine_in(f, name, NULL);
}

/* ---- the store as a third party sees it ---- */

struct raw {
	struct event_base *base;
	struct xfer_store *s;
	bool done;
	int err;
	char *value;
};

static void raw_cb(int err, const char *value, size_t len, void *arg)
{
	struct raw *r = arg;

	r->done = true;
	r->err = err;
	r->value = value ? strndup(value, len) : NULL;
}

static void ignore_key(const char *key, void *arg)
{
	(void)key;
	(void)arg;
}

static void raw_open(struct fixture *f, struct raw *r)
{
	struct xfer_store_env env = {
		.prefix = "mooncake/", .changed = ignore_key,
	};

	r->base = event_base_new();
	env.base = r->base;
	assert_int_equal(xfer_store_find(f->url)->open(f->url, &env, &r->s), 0);
}

static void raw_wait(struct raw *r)
{
	int64_t t0 = th_now_ms();
	struct timeval tick = { 0, 20000 };

	while (!r->done) {
		assert_true(th_now_ms() - t0 < 10000);
		event_base_loopexit(r->base, &tick);
		event_base_dispatch(r->base);
	}
}

/* GET @p key: its value (malloc'd) or NULL if absent. */
static char *raw_get(struct fixture *f, const char *key)
{
	struct raw r = { 0 };

	raw_open(f, &r);
	r.s->ops->get(r.s, key, raw_cb, &r);
	raw_wait(&r);
	assert_true(r.err == 0 || r.err == -ENOENT);
	r.s->ops->close(r.s);
	event_base_free(r.base);
	return r.value;
}

static void raw_put(struct fixture *f, const char *key, const char *value)
{
	struct raw r = { 0 };

	raw_open(f, &r);
	r.s->ops->put(r.s, key, value, strlen(value), raw_cb, &r);
	raw_wait(&r);
	assert_int_equal(r.err, 0);
	r.s->ops->close(r.s);
	event_base_free(r.base);
}

/* The store holds @p key with a buffer of BUF bytes. */
static void has_buffer(struct fixture *f, const char *key)
{
	char *v = raw_get(f, key);

	assert_non_null(v);
	assert_non_null(strstr(v, "\"length\":1048576"));
	free(v);
}

/* ---- tests ---- */

/* Keys appear with the engine and go with it (PROTOCOL.md §2). */
static void test_own_keys(void **state)
{
	struct fixture *f = *state;
	struct xfer_engine *e = engine(f, "keys-a");
	char *v;

	v = raw_get(f, "mooncake/rpc_meta/keys-a");
	assert_non_null(v);
	assert_non_null(strstr(v, "\"ip_or_host_name\":\"127.0.0.1\""));
	free(v);
	v = raw_get(f, "mooncake/ram/keys-a");
	assert_non_null(v);
	assert_non_null(strstr(v, "\"name\":\"keys-a\""));
	free(v);
	xfer_engine_free(e);
	assert_null(raw_get(f, "mooncake/rpc_meta/keys-a"));
	assert_null(raw_get(f, "mooncake/ram/keys-a"));
}

/* Two engines open each other by name and move data both ways. */
static void test_by_name(void **state)
{
	struct fixture *f = *state;
	struct xfer_engine *a = engine(f, "name-a"), *b = engine(f, "name-b");
	char *ma = th_alloc(BUF), *mb = th_alloc(BUF);
	int64_t sa, sb;

	assert_int_equal(xfer_register(a, ma, BUF, "cpu:0", true), 0);
	assert_int_equal(xfer_register(b, mb, BUF, "cpu:0", true), 0);
	/* register() returns once the store has the new descriptor */
	has_buffer(f, "mooncake/ram/name-a");
	has_buffer(f, "mooncake/ram/name-b");
	sb = xfer_segment_open(a, "name-b");
	assert_true(sb >= 0);
	th_write_verified(a, ma, sb, mb, BUF, 1);

	sa = xfer_segment_open(b, "name-a");
	assert_true(sa >= 0);
	th_fill(ma, BUF, 2);
	th_assert_status(th_xfer1(b, XFER_READ, mb, sa, (uintptr_t)ma, BUF,
				  NULL), XFER_COMPLETED);
	assert_int_equal(th_check(mb, BUF, 2), -1);
	xfer_engine_free(a);
	xfer_engine_free(b);
	free(ma);
	free(mb);
}

/* Wait until segment @p id of @p e shows buffer 0 at @p addr. */
static void wait_buffer(struct xfer_engine *e, int64_t id, void *addr)
{
	uint64_t got = 0, len;

	for (int64_t t0 = th_now_ms(); got != (uintptr_t)addr; usleep(20000)) {
		if (xfer_segment_buffer(e, id, 0, &got, &len, NULL))
			got = 0;
		if (th_now_ms() - t0 > 10000)
			fail_msg("descriptor not refreshed within 10 s");
	}
}

/* A peer re-registers; the watch brings the new descriptor without a
 * reopen; then the peer goes away and transfers to it fail cleanly. */
static void test_watch(void **state)
{
	struct fixture *f = *state;
	struct xfer_engine *a = engine(f, "watch-a"), *b = engine(f, "watch-b");
	char *ma = th_alloc(BUF), *m1 = th_alloc(BUF), *m2 = th_alloc(BUF);
	int64_t sb;

	assert_int_equal(xfer_register(a, ma, BUF, "cpu:0", true), 0);
	assert_int_equal(xfer_register(b, m1, BUF, "cpu:0", true), 0);
	sb = xfer_segment_open(a, "watch-b");
	assert_true(sb >= 0);
	wait_buffer(a, sb, m1);

	assert_int_equal(th_unregister(b, m1), 0);
	assert_int_equal(xfer_register(b, m2, BUF, "cpu:0", true), 0);
	wait_buffer(a, sb, m2);
	th_write_verified(a, ma, sb, m2, BUF, 3);

	xfer_engine_free(b);
	for (int64_t t0 = th_now_ms(); ; usleep(50000)) {
		enum xfer_status st = th_xfer1(a, XFER_WRITE, ma, sb,
					       (uintptr_t)m2, 4096, NULL);

		if (st == XFER_FAILED)
			break;
		/* until the watch has seen it go: still served, or (its
		 * buffers withdrawn first) outside them */
		assert_true(st == XFER_COMPLETED || st == XFER_INVALID);
		assert_true(th_now_ms() - t0 < 10000);
	}
	xfer_engine_free(a);
	free(ma);
	free(m1);
	free(m2);
}

/* The server restarts (empty) under running engines: cached descriptors
 * keep serving, both engines republish, and a newcomer finds them. */
static void test_restart(void **state)
{
	struct fixture *f = *state;
	struct xfer_engine *a = engine(f, "rs-a"), *b = engine(f, "rs-b"), *c;
	char *ma = th_alloc(BUF), *mb = th_alloc(BUF), *v;
	int64_t sb;

	assert_int_equal(xfer_register(a, ma, BUF, "cpu:0", true), 0);
	assert_int_equal(xfer_register(b, mb, BUF, "cpu:0", true), 0);
	sb = xfer_segment_open(a, "rs-b");
	assert_true(sb >= 0);
	wait_buffer(a, sb, mb);

	server_stop(f);
	th_write_verified(a, ma, sb, mb, BUF, 4);
	server_start(f);

	for (int64_t t0 = th_now_ms(); ; usleep(50000)) {
		char *va = raw_get(f, "mooncake/ram/rs-a");

		v = raw_get(f, "mooncake/ram/rs-b");
		if (va && v && strstr(va, "\"length\":1048576") &&
		    strstr(v, "\"length\":1048576")) {
			free(va);
			break;
		}
		free(va);
		free(v);
		assert_true(th_now_ms() - t0 < 15000); /* both republished */
	}
	free(v);
	c = engine(f, "rs-c");
	assert_true(xfer_segment_open(c, "rs-a") >= 0);
	assert_true(xfer_segment_open(c, "rs-b") >= 0);
	th_write_verified(a, ma, sb, mb, BUF, 5);
	xfer_engine_free(c);
	xfer_engine_free(a);
	xfer_engine_free(b);
	free(ma);
	free(mb);
}

/* With a cluster id, keys live under mooncake/<id>/ and only engines of
 * that cluster find each other. */
static void test_cluster_id(void **state)
{
	struct fixture *f = *state;
	struct xfer_engine *a = engine_in(f, "cl-a", "c1");
	struct xfer_engine *b = engine_in(f, "cl-b", "c1");
	struct xfer_engine *o = engine(f, "cl-o");
	char *ma = th_alloc(BUF), *mb = th_alloc(BUF), *v;
	int64_t sb;

	assert_int_equal(xfer_register(b, mb, BUF, "cpu:0", true), 0);
	assert_int_equal(xfer_register(a, ma, BUF, "cpu:0", true), 0);
	has_buffer(f, "mooncake/c1/ram/cl-b");
	v = raw_get(f, "mooncake/c1/rpc_meta/cl-b");
	assert_non_null(v);
	free(v);
	assert_null(raw_get(f, "mooncake/ram/cl-b"));
	assert_null(raw_get(f, "mooncake/rpc_meta/cl-b"));
	assert_int_equal(xfer_segment_open(o, "cl-b"), -ENOENT);

	sb = xfer_segment_open(a, "cl-b");
	assert_true(sb >= 0);
	th_write_verified(a, ma, sb, mb, BUF, 6);
	xfer_engine_free(o);
	xfer_engine_free(a);
	xfer_engine_free(b);
	assert_null(raw_get(f, "mooncake/c1/ram/cl-b"));
	free(ma);
	free(mb);
}

/* A malformed value under a peer's key: open fails clearly, the engine
 * carries on. */
static void test_bad_value(void **state)
{
	struct fixture *f = *state;
	struct xfer_engine *a = engine(f, "bad-a"), *b = engine(f, "bad-b");

	raw_put(f, "mooncake/rpc_meta/bad-x",
		"{\"ip_or_host_name\":\"127.0.0.1\",\"rpc_port\":1}\n");
	raw_put(f, "mooncake/ram/bad-x", "{\"name\":\"bad-x\",\"buffers\":[{\n");
	assert_int_equal(xfer_segment_open(a, "bad-x"), -EPROTO);
	assert_non_null(strstr(xfer_engine_last_error(a), "bad-x"));
	assert_int_equal(xfer_segment_open(a, "nobody"), -ENOENT);
	assert_true(xfer_segment_open(a, "bad-b") >= 0);
	xfer_engine_free(a);
	xfer_engine_free(b);
}

/* Server down at engine start: a clear error, no hang. */
static void test_server_down(void **state)
{
	struct fixture *f = *state;
	struct xfer_config *cfg = th_config();
	int64_t t0;

	server_stop(f);
	th_set(cfg, "bind_addr", "127.0.0.1");
	th_set(cfg, "metadata_server", f->url);
	th_set(cfg, "local_server_name", "down-a");
	t0 = th_now_ms();
	assert_null(xfer_engine_new(cfg));
	assert_int_equal(errno, ECONNREFUSED);
	xfer_config_free(cfg);
	assert_true(th_now_ms() - t0 < 6000);
	server_start(f);
}

#define FOR_BACKEND(t, b) \
	cmocka_unit_test_prestate_setup_teardown(t, setup, teardown, (void *)(b))

int main(void)
{
	int failed = 0;

	signal(SIGPIPE, SIG_IGN);
	for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++) {
		const struct backend *b = &backends[i];
		const struct CMUnitTest tests[] = {
			FOR_BACKEND(test_own_keys, b),
			FOR_BACKEND(test_by_name, b),
			FOR_BACKEND(test_watch, b),
			FOR_BACKEND(test_restart, b),
			FOR_BACKEND(test_cluster_id, b),
			FOR_BACKEND(test_bad_value, b),
			FOR_BACKEND(test_server_down, b),
		};

		failed |= _cmocka_run_group_tests(b->name, tests,
						  sizeof(tests) / sizeof(tests[0]),
						  NULL, NULL);
	}
	return failed;
}
