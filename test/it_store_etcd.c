/*
 * The etcd metadata backend against a real etcd (3.4, its v3 JSON
 * gateway), driven on a private event_base: byte-exact round trips,
 * connection strings, the watch and its prefix, the lease (kept alive,
 * gone after close, granted again when revoked), a server that is down,
 * a server killed and restarted, and close with work pending.
 *
 * One etcd serves the whole run; each test keeps to a prefix of its own.
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
#include <ftw.h>
#include <inttypes.h>
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
#include <yajl/yajl_tree.h>

#include "store.h"

extern const struct xfer_store_ops xfer_etcd_ops;

#define IO_MS 5000       /* the most a healthy answer may take */
#define START_MS 20000   /* etcd up, with a leader */
#define TTL_S 10         /* the backend's lease TTL */
#define MAX_KEYS 64

static struct {
	pid_t pid;
	int port, peer_port;
	char dir[64];
} etcd = { .pid = -1 };

struct fx {
	struct event_base *base;
	bool own_base;
	struct xfer_store *st;
	struct xfer_store_env env;
	char prefix[32];
	int changed_all, reconnected;
	char *keys[MAX_KEYS];          /* changed(key), in order */
	int nkeys;
};

struct res {
	int calls, err;
	char val[256];
	size_t len;
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- etcd and etcdctl ---- */

static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	assert_true(fd >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	port = ntohs(a.sin_port);
	close(fd);
	return port;
}

/* GET /health answers {"health":"true"}: up, with a leader. */
static bool healthy(void)
{
	static const char req[] = "GET /health HTTP/1.0\r\n\r\n";
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)etcd.port) };
	struct timeval tv = { 1, 0 };
	char buf[1024];
	size_t len = 0;
	ssize_t n;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (!connect(fd, (struct sockaddr *)&a, sizeof(a)) &&
	    send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) ==
	    (ssize_t)sizeof(req) - 1)
		while (len < sizeof(buf) - 1 &&
		       (n = recv(fd, buf + len, sizeof(buf) - 1 - len, 0)) > 0)
			len += (size_t)n;
	close(fd);
	buf[len] = '\0';
	return strstr(buf, "\"health\":\"true\"");
}

/* Start etcd on etcd.port with the data in etcd.dir (kept across
 * restarts), its output appended to etcd.dir/etcd.log. */
static void etcd_start(void)
{
	char data[96], log[96], client[64], peer[64], cluster[80], cmd[128];
	int64_t end = now_ms() + START_MS;
	int fd;

	snprintf(data, sizeof(data), "%s/data", etcd.dir);
	snprintf(log, sizeof(log), "%s/etcd.log", etcd.dir);
	snprintf(client, sizeof(client), "http://127.0.0.1:%d", etcd.port);
	snprintf(peer, sizeof(peer), "http://127.0.0.1:%d", etcd.peer_port);
	snprintf(cluster, sizeof(cluster), "t=%s", peer);
	etcd.pid = fork();
	assert_true(etcd.pid >= 0);
	if (etcd.pid == 0) {
		fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		dup2(fd, STDOUT_FILENO);
		dup2(fd, STDERR_FILENO);
		execlp("etcd", "etcd", "--name", "t", "--data-dir", data,
		       "--listen-client-urls", client,
		       "--advertise-client-urls", client,
		       "--listen-peer-urls", peer,
		       "--initial-advertise-peer-urls", peer,
		       "--initial-cluster", cluster, (char *)NULL);
		_exit(127);
	}
	/* Polling: a server coming up has no callback to wait on. */
	while (!healthy()) {
		if (waitpid(etcd.pid, NULL, WNOHANG) == etcd.pid) {
			etcd.pid = -1;
			snprintf(cmd, sizeof(cmd), "tail -n 20 %s >&2", log);
			if (system(cmd))
				fprintf(stderr, "no %s\n", log);
			fail_msg("etcd exited at start");
		}
		assert_true(now_ms() < end);
		usleep(20000);
	}
}

static void etcd_stop(int sig)
{
	if (etcd.pid <= 0)
		return;
	kill(etcd.pid, sig);
	waitpid(etcd.pid, NULL, 0);
	etcd.pid = -1;
}

/* Run etcdctl with @p args; its output, parsed as JSON (NULL if not). */
static yajl_val etcdctl(const char *fmt, ...)
{
	char args[256], cmd[512], out[4096];
	size_t len;
	va_list ap;
	FILE *p;

	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	snprintf(cmd, sizeof(cmd), "ETCDCTL_API=3 etcdctl "
		 "--endpoints=http://127.0.0.1:%d %s 2>&1", etcd.port, args);
	p = popen(cmd, "r");
	assert_non_null(p);
	len = fread(out, 1, sizeof(out) - 1, p);
	out[len] = '\0';
	if (pclose(p))
		fail_msg("%s: %s", cmd, out);
	return yajl_tree_parse(out, NULL, 0);
}

static int64_t json_int(yajl_val v, const char *a, const char *b)
{
	const char *path[] = { a, b, NULL };

	v = yajl_tree_get(v, path, yajl_t_number);
	return YAJL_IS_INTEGER(v) ? YAJL_GET_INTEGER(v) : 0;
}

/* The lease @p key is attached to: 0 for none, -1 when it is absent. */
static int64_t key_lease(const char *key)
{
	yajl_val j = etcdctl("get %s -w json", key);
	yajl_val kvs = yajl_tree_get(j, (const char *[]){ "kvs", NULL },
				     yajl_t_array);
	int64_t lease = -1;

	if (kvs && kvs->u.array.len)
		lease = json_int(kvs->u.array.values[0], "lease", NULL);
	yajl_tree_free(j);
	return lease;
}

/* ---- driving the base ---- */

static void late_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	*(bool *)arg = true;
}

/* Run @p base until @p cond or @p ms pass; evaluates to cond. */
#define run_until(base, cond, ms) ({ \
	bool _late = false; \
	struct timeval _tv = { (ms) / 1000, (ms) % 1000 * 1000 }; \
	struct event *_ev = evtimer_new(base, late_cb, &_late); \
	evtimer_add(_ev, &_tv); \
	while (!(cond) && !_late) \
		event_base_loop(base, EVLOOP_ONCE); \
	event_free(_ev); \
	(cond); })

static void on_changed(const char *key, void *arg)
{
	struct fx *f = arg;

	if (!key)
		f->changed_all++;
	else if (f->nkeys < MAX_KEYS)
		f->keys[f->nkeys++] = strdup(key);
}

static void on_reconnected(void *arg)
{
	((struct fx *)arg)->reconnected++;
}

static int seen(struct fx *f, const char *key)
{
	int n = 0;

	for (int i = 0; i < f->nkeys; i++)
		n += !strcmp(f->keys[i], key);
	return n;
}

static void forget(struct fx *f)
{
	for (int i = 0; i < f->nkeys; i++)
		free(f->keys[i]);
	f->nkeys = 0;
}

static void res_cb(int err, const char *value, size_t len, void *arg)
{
	struct res *r = arg;

	r->calls++;
	r->err = err;
	r->len = len;
	if (value && len <= sizeof(r->val))
		memcpy(r->val, value, len);
}

/* A backend watching @p prefix on @p base, or on a base of its own if
 * NULL; not open yet. */
static struct fx *fx_new_on(const char *prefix, struct event_base *base)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->own_base = !base;
	f->base = base ? base : event_base_new();
	assert_non_null(f->base);
	snprintf(f->prefix, sizeof(f->prefix), "%s", prefix);
	f->env = (struct xfer_store_env){
		.base = f->base,
		.prefix = f->prefix,
		.changed = on_changed,
		.reconnected = on_reconnected,
		.arg = f,
	};
	return f;
}

static struct fx *fx_new(const char *prefix)
{
	return fx_new_on(prefix, NULL);
}

static void fx_open(struct fx *f, int port)
{
	char conn[64];

	snprintf(conn, sizeof(conn), "etcd://127.0.0.1:%d", port);
	assert_int_equal(xfer_etcd_ops.open(conn, &f->env, &f->st), 0);
}

static void fx_close(struct fx *f)
{
	if (f->st)
		xfer_etcd_ops.close(f->st);
	f->st = NULL;
}

static void fx_free(struct fx *f)
{
	fx_close(f);
	forget(f);
	if (f->own_base)
		event_base_free(f->base);
	free(f);
}

/* Synchronous forms: the callback must come later, exactly once. */
static int do_op(struct fx *f, char op, const char *key, const char *value,
		 size_t len, struct res *r, int ms)
{
	memset(r, 0, sizeof(*r));
	if (op == 'g')
		xfer_etcd_ops.get(f->st, key, res_cb, r);
	else if (op == 'p')
		xfer_etcd_ops.put(f->st, key, value, len, res_cb, r);
	else
		xfer_etcd_ops.del(f->st, key, res_cb, r);
	assert_int_equal(r->calls, 0);
	assert_true(run_until(f->base, r->calls, ms));
	run_until(f->base, false, 10);
	assert_int_equal(r->calls, 1);
	return r->err;
}

#define sget(f, key, r) do_op(f, 'g', key, NULL, 0, r, IO_MS)
#define sput(f, key, v) ({ struct res _r; \
	do_op(f, 'p', key, v, strlen(v), &_r, IO_MS); })
#define sdel(f, key) ({ struct res _r; \
	do_op(f, 'd', key, NULL, 0, &_r, IO_MS); })

/* Wait until @p w's watch reports puts by @p by: it is live. */
static void wait_watching(struct fx *w, struct fx *by, const char *probe)
{
	int64_t end = now_ms() + IO_MS;

	do {
		assert_int_equal(sput(by, probe, "x"), 0);
		if (run_until(w->base, seen(w, probe), 200))
			return;
	} while (now_ms() < end);
	fail_msg("the watch never reported %s", probe);
}

/* ---- tests ---- */

static void test_conn_strings(void **state)
{
	static const char *const bad[] = {
		"etcd://", "etcd://h", "etcd://:2379", "etcd://h:",
		"etcd://h:0", "etcd://h:65536", "etcd://h:12x", "etcd://h:+1",
		"etcd://h:2379/", "etcd://[::1", "etcd://[::1]", "::1:2379",
		"h:1:2",
	};
	struct fx *f = fx_new("cs/");
	struct xfer_store *st = NULL;
	char conn[64];
	struct res r;

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
	assert_int_equal(xfer_etcd_ops.open("etcd://[::1]:1", &f->env, &st),
			 0);
	xfer_etcd_ops.close(st);
	/* Mooncake's bare host:port is etcd. */
	snprintf(conn, sizeof(conn), "localhost:%d", etcd.port);
	assert_int_equal(xfer_etcd_ops.open(conn, &f->env, &f->st), 0);
	assert_int_equal(sget(f, "cs/absent", &r), -ENOENT);
	fx_free(f);
}

static void close_cb(int err, const char *value, size_t len, void *arg)
{
	struct fx *f = arg;

	(void)err;
	(void)value;
	(void)len;
	fx_close(f);
}

static void test_roundtrip(void **state)
{
	static const char value[] = "{\"a\":1}\n\0tail\n";
	struct fx *f = fx_new("rt/");
	struct res r, r2 = { 0 };

	(void)state;
	fx_open(f, etcd.port);
	assert_int_equal(do_op(f, 'p', "rt/ram/a", value, sizeof(value) - 1,
			       &r, IO_MS), 0);
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
	xfer_etcd_ops.get(f->st, "rt/absent", res_cb, &r2);
	assert_true(run_until(f->base, !f->st, IO_MS));
	run_until(f->base, false, 50);
	assert_int_equal(r2.calls, 0);
	fx_free(f);
}

/* Puts and deletes by another client under the prefix are seen with their
 * full key, in order; keys outside are not. */
static void test_watch(void **state)
{
	struct fx *a = fx_new("w/"), *b = fx_new("w/");
	struct res r;

	(void)state;
	fx_open(a, etcd.port);
	fx_open(b, etcd.port);
	wait_watching(a, b, "w/probe");
	forget(a);
	assert_int_equal(sput(b, "x/out", "1"), 0);
	assert_int_equal(sput(b, "w", "1"), 0);
	assert_int_equal(sput(b, "w/k", "1"), 0);
	assert_int_equal(sdel(b, "w/k"), 0);
	assert_int_equal(sdel(b, "w/never"), 0);  /* deletes nothing */
	assert_int_equal(sput(b, "w/end", "1"), 0);
	assert_true(run_until(a->base, seen(a, "w/end"), IO_MS));
	assert_int_equal(a->nkeys, 3);
	assert_string_equal(a->keys[0], "w/k");
	assert_string_equal(a->keys[1], "w/k");
	assert_int_equal(a->changed_all, 0);
	assert_int_equal(sget(a, "w/k", &r), -ENOENT);
	assert_int_equal(sdel(b, "x/out"), 0);
	assert_int_equal(sdel(b, "w"), 0);
	fx_free(a);
	fx_free(b);
}

/* Every put carries the lease; once the backend is closed (no more
 * keepalives), the key goes within the TTL. */
static void test_lease(void **state)
{
	struct fx *a = fx_new("l/"), *b = fx_new("l/");
	struct res r;
	int64_t lease;

	(void)state;
	fx_open(a, etcd.port);
	/* Before the grant is back: the put waits for it. */
	assert_int_equal(sput(a, "l/k", "v"), 0);
	lease = key_lease("l/k");
	assert_true(lease > 0);
	fx_open(b, etcd.port);
	wait_watching(b, b, "l/probe");
	forget(b);
	fx_close(a);
	assert_true(run_until(b->base, seen(b, "l/k"), (TTL_S + 3) * 1000));
	assert_int_equal(sget(b, "l/k", &r), -ENOENT);
	fx_free(a);
	fx_free(b);
}

/* A revoked lease is granted anew, and the user hears reconnected to
 * publish again: found by the keepalive (so keepalives go out every
 * TTL/3), or by a put that then goes again under the new lease. */
static void test_lease_lost(void **state)
{
	struct fx *f = fx_new("ll/");
	int64_t first, second, third;
	struct res r;
	yajl_val j;

	(void)state;
	fx_open(f, etcd.port);
	assert_int_equal(sput(f, "ll/k", "v"), 0);
	first = key_lease("ll/k");
	assert_true(first > 0);
	j = etcdctl("lease revoke %" PRIx64, (uint64_t)first);
	yajl_tree_free(j);
	assert_true(run_until(f->base, f->reconnected, TTL_S * 1000 / 3 +
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
	assert_true(run_until(f->base, f->reconnected == 2, IO_MS));
	assert_int_equal(sget(f, "ll/k", &r), -ENOENT);
	assert_int_equal(sdel(f, "ll/k2"), 0);
	run_until(f->base, false, 10);
	assert_int_equal(f->reconnected, 2);
	fx_free(f);
}

/* Nothing listens: open works, calls fail at once; close with calls in
 * flight drops them. */
static void test_server_down(void **state)
{
	struct fx *f = fx_new("d/");
	struct res r, r2 = { 0 };
	int64_t t0 = now_ms();

	(void)state;
	fx_open(f, free_port());
	assert_int_equal(sget(f, "d/k", &r), -ECONNREFUSED);
	assert_true(sput(f, "d/k", "v") < 0);
	assert_true(sdel(f, "d/k") < 0);
	assert_true(now_ms() - t0 < 1000);
	xfer_etcd_ops.get(f->st, "d/k", res_cb, &r2);
	xfer_etcd_ops.put(f->st, "d/k", "v", 1, res_cb, &r2);
	fx_close(f);
	run_until(f->base, false, 50);
	assert_int_equal(r2.calls, 0);
	assert_int_equal(f->reconnected, 0);
	fx_free(f);
}

/* etcd killed and started again on the same data: the watch comes back
 * and says changes may have been missed, the kv side says reconnected
 * (a call failed meanwhile), calls work again. A backend opened while
 * the server was down hears the same once its failed calls can be made
 * again. */
static void test_restart(void **state)
{
	struct fx *f = fx_new("r/"), *g = fx_new_on("r/", f->base);
	struct res r;
	yajl_val j;

	(void)state;
	fx_open(f, etcd.port);
	wait_watching(f, f, "r/probe");
	assert_int_equal(sput(f, "r/k", "v1"), 0);
	etcd_stop(SIGKILL);
	assert_true(sget(f, "r/k", &r) < 0);
	fx_open(g, etcd.port);
	assert_true(sput(g, "r/g", "v") < 0);
	etcd_start();
	assert_true(run_until(f->base, f->changed_all && f->reconnected &&
			      g->changed_all && g->reconnected, 3 * IO_MS));
	run_until(f->base, false, 10);
	assert_int_equal(f->changed_all, 1);
	assert_int_equal(f->reconnected, 1);
	assert_int_equal(g->changed_all, 1);
	assert_int_equal(g->reconnected, 1);
	assert_int_equal(sput(f, "r/k", "v2"), 0);
	assert_int_equal(sget(g, "r/k", &r), 0);
	assert_int_equal(r.len, 2);
	assert_memory_equal(r.val, "v2", 2);
	assert_true(key_lease("r/k") > 0);
	assert_int_equal(sput(g, "r/g", "v"), 0);
	forget(f);
	j = etcdctl("put r/other x");
	yajl_tree_free(j);
	assert_true(run_until(f->base, seen(f, "r/other"), IO_MS));
	fx_free(g);
	fx_free(f);
}

static int rm_entry(const char *path, const struct stat *sb, int flag,
		    struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int setup(void **state)
{
	(void)state;
	signal(SIGPIPE, SIG_IGN);
	snprintf(etcd.dir, sizeof(etcd.dir), "/tmp/it_store_etcd.XXXXXX");
	if (!mkdtemp(etcd.dir))
		return -1;
	etcd.port = free_port();
	do
		etcd.peer_port = free_port();
	while (etcd.peer_port == etcd.port);
	etcd_start();
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	etcd_stop(SIGTERM);
	return nftw(etcd.dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
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

	return cmocka_run_group_tests(tests, setup, teardown);
}
