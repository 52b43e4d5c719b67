/*
 * xfer-metad with a cluster secret (docs/SECURITY.md "xfer-metad with a
 * secret"), the real program over real sockets: engines that share its
 * secret publish, find each other and withdraw through it; raw writes
 * without the X-Xfer-Auth header, with a wrong MAC, a replayed or unknown
 * nonce, or a MAC of another key or body get 401 and store nothing; a
 * stranger's flood of nonce requests takes no engine's nonce away; an
 * engine with another secret or none cannot register, and
 * says why; reads stay open; a server without a secret changes nothing
 * (an engine with one writes to it unproved). The MACs here are computed
 * from the spec (PROTOCOL.md §2), not with the code under test.
 *
 * XFER_TEST_WRAP puts a command in front of the server (th_metad.h).
 */
#define _GNU_SOURCE
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
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <xfer/xfer.h>

#include "util/auth_internal.h"
#include "metadata/backends_internal.h"
#include "test/helpers.h"
#include "test/th_metad.h"

#define SECRET "correct horse battery staple 42"
#define OTHER "another cluster's secret, 1234"
#define LEN (64u << 10)

static struct server S = { .pid = -1 };
static int refusals;            /* expect_401() calls */

/* --- writes by hand ------------------------------------------------------ */

static void hex(const uint8_t *b, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
}

/* A fresh nonce from GET /metadata/nonce on @p c: 64 hex digits, NUL. */
static void nonce_get(struct conn *c, char nonce[65])
{
	struct resp r;

	http_send(c, "GET", "/metadata/nonce", NULL, 0);
	http_recv(c, &r, IO_MS);
	if (r.status != 200)
		fail_msg("GET nonce: %d %s", r.status, r.body);
	assert_int_equal(r.len, 65);
	assert_int_equal(r.body[64], '\n');
	assert_int_equal(strspn(r.body, "0123456789abcdef"), 64);
	memcpy(nonce, r.body, 64);
	nonce[64] = '\0';
	free(r.body);
}

/* The X-Xfer-Auth line of @p method of @p key with @p body under
 * @p secret and the nonce @p nonce_hex, by the spec: HMAC-SHA256 keyed
 * with the secret over "xfer-metad-1 write", method, "\n", key, "\n",
 * SHA-256(body), nonce. Malloc'd. */
static char *auth_line(const char *secret, const char *method, const char *key,
		       const void *body, size_t len, const char *nonce_hex)
{
	uint8_t nonce[32], digest[32], mac[32];
	char mac_hex[65];
	struct iovec parts[6] = {
		{ (void *)method, strlen(method) }, { "\n", 1 },
		{ (void *)key, strlen(key) }, { "\n", 1 },
		{ digest, 32 }, { nonce, 32 },
	};

	for (int i = 0; i < 32; i++)
		assert_int_equal(sscanf(nonce_hex + 2 * i, "%2hhx", &nonce[i]),
				 1);
	SHA256(len ? body : (const void *)"", len, digest);
	assert_int_equal(xfer_auth_mac(secret, strlen(secret),
				       "xfer-metad-1 write", parts, 6, mac), 0);
	hex(mac, 32, mac_hex);
	return fmt("X-Xfer-Auth: %s:%s\r\n", nonce_hex, mac_hex);
}

/* Send @p method of @p key with @p body and the header line @p line
 * (NULL: none) on @p c. @return the status; the reason into @p why. */
static int write_with(struct conn *c, const char *method, const char *key,
		      const void *body, size_t len, const char *line,
		      char *why, size_t why_len)
{
	char *target = key_target(key);
	struct resp r;
	int status;

	http_send_hdr(c, method, target, line, body, len);
	http_recv(c, &r, IO_MS);
	status = r.status;
	if (why)
		snprintf(why, why_len, "%s", r.body);
	free(r.body);
	free(target);
	return status;
}

/* A proved write: a fresh nonce, then the write. @return the status. */
static int write_proved(struct conn *c, const char *secret, const char *method,
			const char *key, const void *body, size_t len)
{
	char nonce[65], *line;
	int status;

	nonce_get(c, nonce);
	line = auth_line(secret, method, key, body, len, nonce);
	status = write_with(c, method, key, body, len, line, NULL, 0);
	free(line);
	return status;
}

/* A write that must get 401 with a reason that contains @p want. */
static void expect_401(struct conn *c, const char *method, const char *key,
		       const void *body, size_t len, const char *line,
		       const char *want)
{
	char why[256];
	int status = write_with(c, method, key, body, len, line, why,
				sizeof(why));

	refusals++;
	if (status != 401 || !strstr(why, want))
		fail_msg("%s %s: %d %s, want 401 '%s'", method, key, status,
			 why, want);
}

static void check_absent(uint16_t port, const char *key)
{
	char *t = key_target(key);

	req_status(port, "GET", t, NULL, 0, 404);
	free(t);
}

static int count_lines(const char *path, const char *match)
{
	char *all = read_file(path, NULL), *p = all;
	int n = 0;

	while ((p = strstr(p, match))) {
		n++;
		p += strlen(match);
	}
	free(all);
	return n;
}

/* --- raw clients --------------------------------------------------------- */

static void test_raw_writes(void **state)
{
	const char *secret_args[] = { "--auth-secret", SECRET, NULL };
	char *err_file = fmt("%s/err", tmp_dir);
	char nonce[65], nonce2[65], *line, *line2;
	uint64_t rev;
	struct conn c, stranger;
	struct resp r;
	int64_t t0 = th_now_ms();
	int lines;

	(void)state;
	refusals = 0;
	server_start_args(&S, NULL, err_file, secret_args);
	c = conn_open(S.port);
	rev = current_rev(S.port);

	/* no header, a malformed one: 401, nothing stored */
	expect_401(&c, "PUT", "k", "v1", 2, NULL, "no X-Xfer-Auth header");
	expect_401(&c, "PUT", "k", "v1", 2, "X-Xfer-Auth: 1234:abcd\r\n",
		   "malformed");
	check_absent(S.port, "k");

	/* proved: stored */
	assert_int_equal(write_proved(&c, SECRET, "PUT", "k", "v1", 2), 200);
	check_key(S.port, "k", "v1", 2);
	assert_int_equal(current_rev(S.port), rev + 1);

	/* the same request again (a replay): the nonce is spent */
	nonce_get(&c, nonce);
	line = auth_line(SECRET, "PUT", "k", "v2", 2, nonce);
	assert_int_equal(write_with(&c, "PUT", "k", "v2", 2, line, NULL, 0),
			 200);
	expect_401(&c, "PUT", "k", "v2", 2, line, "spent nonce");
	free(line);

	/* another secret's MAC: refused; the nonce still proves the write
	 * it was asked for (one who saw it cannot spend it with garbage) */
	nonce_get(&c, nonce);
	line = auth_line(OTHER, "PUT", "k", "v3", 2, nonce);
	expect_401(&c, "PUT", "k", "v3", 2, line, "wrong MAC");
	free(line);
	line = auth_line(SECRET, "PUT", "k", "v3", 2, nonce);
	assert_int_equal(write_with(&c, "PUT", "k", "v3", 2, line, NULL, 0),
			 200);
	expect_401(&c, "PUT", "k", "v3", 2, line, "spent nonce");
	free(line);

	/* a MAC of another body, of another key, of another method */
	nonce_get(&c, nonce);
	line = auth_line(SECRET, "PUT", "k", "v4", 2, nonce);
	expect_401(&c, "PUT", "k", "v5", 2, line, "wrong MAC");
	free(line);
	nonce_get(&c, nonce);
	line = auth_line(SECRET, "PUT", "other", "v4", 2, nonce);
	expect_401(&c, "PUT", "k", "v4", 2, line, "wrong MAC");
	free(line);
	nonce_get(&c, nonce);
	line = auth_line(SECRET, "PUT", "k", NULL, 0, nonce);
	expect_401(&c, "DELETE", "k", NULL, 0, line, "wrong MAC");
	free(line);

	/* a nonce never handed out */
	assert_int_equal(RAND_bytes((uint8_t *)nonce, 32), 1);
	hex((uint8_t *)nonce, 32, nonce2);
	line = auth_line(SECRET, "PUT", "k", "v6", 2, nonce2);
	expect_401(&c, "PUT", "k", "v6", 2, line, "unknown nonce");
	free(line);

	/* a stranger asks for 10000 nonces on a connection of its own
	 * between an engine's nonce and its write: the write stands, and so
	 * does one over the stranger's first nonce (nothing pushes out) */
	nonce_get(&c, nonce);
	stranger = conn_open(S.port);
	nonce_get(&stranger, nonce2);
	line2 = auth_line(SECRET, "PUT", "k", "v6", 2, nonce2);
	for (int i = 1; i < 10000; i++)
		nonce_get(&stranger, nonce2);
	conn_close(&stranger);
	line = auth_line(SECRET, "PUT", "k", "v7", 2, nonce);
	assert_int_equal(write_with(&c, "PUT", "k", "v6", 2, line2, NULL, 0),
			 200);
	assert_int_equal(write_with(&c, "PUT", "k", "v7", 2, line, NULL, 0),
			 200);
	free(line);
	free(line2);
	check_key(S.port, "k", "v7", 2);
	assert_int_equal(current_rev(S.port), rev + 5);

	/* DELETE: without proof refused, proved done */
	expect_401(&c, "DELETE", "k", NULL, 0, NULL, "no X-Xfer-Auth");
	check_key(S.port, "k", "v7", 2);
	assert_int_equal(write_proved(&c, SECRET, "DELETE", "k", NULL, 0), 200);
	check_absent(S.port, "k");
	assert_int_equal(current_rev(S.port), rev + 6);

	/* reads need nothing; the nonce path takes GET only */
	assert_int_equal(write_proved(&c, SECRET, "PUT", "mooncake/ram/x",
				      "{}", 2), 200);
	check_key(S.port, "mooncake/ram/x", "{}", 2);
	r = watch1(S.port, "mooncake/", rev, 0);
	assert_int_equal(r.status, 200);
	free(r.body);
	req_status(S.port, "POST", "/metadata/nonce", NULL, 0, 405);
	req_status(S.port, "PUT", "/metadata/nonce", "x", 1, 405);
	conn_close(&c);

	assert_exit_0(server_stop(&S, SIGTERM));
	/* refusals in a short burst: a line a second at most */
	lines = count_lines(err_file, "xfer-metad: refused a ");
	print_message("    %d refusals in %.1f s: %d log lines\n", refusals,
		      (th_now_ms() - t0) / 1000.0, lines);
	assert_true(lines >= 1);
	assert_true(lines <= 1 + (th_now_ms() - t0) / 1000);
	free(err_file);
}

/* The secret from XFER_AUTH_SECRET; a flag wins over it; an empty flag
 * is refused (a script's unset variable must not open writes). */
static void test_env_and_flag(void **state)
{
	const char *flag[] = { "--auth-secret", SECRET, NULL };
	const char *empty[] = { "--auth-secret", "", NULL };
	struct conn c;
	pid_t pid;

	(void)state;
	setenv("XFER_AUTH_SECRET", SECRET, 1);
	server_start(&S, NULL, NULL);
	unsetenv("XFER_AUTH_SECRET");
	c = conn_open(S.port);
	expect_401(&c, "PUT", "k", "v", 1, NULL, "no X-Xfer-Auth");
	assert_int_equal(write_proved(&c, SECRET, "PUT", "k", "v", 1), 200);
	conn_close(&c);
	assert_exit_0(server_stop(&S, SIGTERM));

	setenv("XFER_AUTH_SECRET", OTHER, 1);
	server_start_args(&S, NULL, NULL, flag);
	unsetenv("XFER_AUTH_SECRET");
	c = conn_open(S.port);
	expect_401(&c, "PUT", "k", "v", 1, NULL, "no X-Xfer-Auth");
	assert_int_equal(write_proved(&c, SECRET, "PUT", "k", "v", 1), 200);
	{
		char nonce[65], *line;

		nonce_get(&c, nonce);
		line = auth_line(OTHER, "PUT", "k", "v", 1, nonce);
		expect_401(&c, "PUT", "k", "v", 1, line, "wrong MAC");
		free(line);
	}
	conn_close(&c);
	assert_exit_0(server_stop(&S, SIGTERM));

	pid = spawn_args(NULL, "/dev/null", empty);
	{
		int status = reap(pid);

		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 2);
	}
}

/* --- engines ------------------------------------------------------------- */

/* An engine on 127.0.0.1 with the store at @p port, named @p name, with
 * @p secret (NULL: none). NULL with errno if it cannot be made. */
static struct xfer_engine *engine_try(uint16_t port, const char *name,
				      const char *secret)
{
	struct xfer_config *cfg = th_config();
	struct xfer_engine *e;
	char url[64];

	snprintf(url, sizeof(url), "http://127.0.0.1:%u/metadata", port);
	th_set(cfg, "bind_addr", "127.0.0.1");
	th_set(cfg, "rpc_port", "0");
	th_set(cfg, "metadata_server", url);
	th_set(cfg, "local_server_name", name);
	if (secret)
		th_set(cfg, "auth_secret", secret);
	e = xfer_engine_new(cfg);
	xfer_config_free(cfg);
	return e;
}

static struct xfer_engine *engine(uint16_t port, const char *name,
				  const char *secret)
{
	struct xfer_engine *e = engine_try(port, name, secret);

	if (!e)
		fail_msg("engine %s: %s", name, strerror(errno));
	return e;
}

/* Engine @p t (name @p name) registers a buffer; engine @p i opens the
 * segment through the store and READs and WRITEs it. */
static void transfer_through(struct xfer_engine *t, struct xfer_engine *i,
			     const char *name)
{
	uint8_t *tm = th_alloc(LEN), *im = th_alloc(2 * LEN);
	uint64_t tr = 0;
	int64_t seg;

	th_fill(tm, LEN, 11);
	th_fill(im, LEN, 12);
	assert_int_equal(xfer_register(t, tm, LEN, "cpu:0", true), 0);
	assert_int_equal(xfer_register(i, im, 2 * LEN, "cpu:0", true), 0);
	seg = xfer_segment_open(i, name);
	if (seg < 0)
		fail_msg("open %s: %lld (%s)", name, (long long)seg,
			 xfer_engine_last_error(i));
	th_assert_status(th_xfer1(i, XFER_READ, im + LEN, seg, (uintptr_t)tm,
				  LEN, &tr), XFER_COMPLETED);
	assert_int_equal(th_check(im + LEN, LEN, 11), -1);
	th_assert_status(th_xfer1(i, XFER_WRITE, im, seg, (uintptr_t)tm, LEN,
				  &tr), XFER_COMPLETED);
	assert_int_equal(th_check(tm, LEN, 12), -1);
	assert_int_equal(xfer_segment_close(i, seg), 0);
	assert_int_equal(xfer_unregister(i, im), 0);
	assert_int_equal(th_unregister(t, tm), 0);
	free(tm);
	free(im);
}

/* Where this process's stderr goes meanwhile (engines log there). */
static int stderr_to(const char *path)
{
	int saved, fd;

	fflush(stderr);
	saved = dup(STDERR_FILENO);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(saved >= 0 && fd >= 0);
	dup2(fd, STDERR_FILENO);
	close(fd);
	return saved;
}

static void stderr_back(int saved)
{
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
}

static void test_engines(void **state)
{
	const char *secret_args[] = { "--auth-secret", SECRET, NULL };
	char *log = fmt("%s/engine.log", tmp_dir), *all;
	struct xfer_engine *t, *i, *bad;
	int saved;

	(void)state;
	server_start_args(&S, NULL, NULL, secret_args);
	t = engine(S.port, "auth-t", SECRET);
	i = engine(S.port, "auth-i", SECRET);
	transfer_through(t, i, "auth-t");
	/* a read needs no secret: the descriptor is there for anyone */
	{
		struct resp r = req1(S.port, "GET",
				     "/metadata?key=mooncake%2Fram%2Fauth-t",
				     NULL, 0);

		assert_int_equal(r.status, 200);
		assert_non_null(strstr(r.body, "\"buffers\""));
		free(r.body);
	}

	/* another secret, or none: the engine cannot be made, and the log
	 * says why; nothing of it is stored */
	saved = stderr_to(log);
	bad = engine_try(S.port, "auth-other", OTHER);
	stderr_back(saved);
	all = read_file(log, NULL);
	print_message("    another secret: %s", all);
	assert_null(bad);
	assert_int_equal(errno, EACCES);
	assert_non_null(strstr(all, "refused (401 wrong MAC"));
	assert_non_null(strstr(all, "not this engine's auth_secret"));
	free(all);
	check_absent(S.port, "mooncake/rpc_meta/auth-other");

	saved = stderr_to(log);
	bad = engine_try(S.port, "auth-none", NULL);
	stderr_back(saved);
	all = read_file(log, NULL);
	assert_null(bad);
	assert_int_equal(errno, EACCES);
	assert_non_null(strstr(all, "refused (401 no X-Xfer-Auth header"));
	assert_non_null(strstr(all, "set auth_secret"));
	free(all);
	check_absent(S.port, "mooncake/rpc_meta/auth-none");

	/* withdrawal on free is proved too: the keys go */
	xfer_engine_free(t);
	xfer_engine_free(i);
	check_absent(S.port, "mooncake/rpc_meta/auth-t");
	check_absent(S.port, "mooncake/ram/auth-t");
	check_absent(S.port, "mooncake/ram/auth-i");
	assert_exit_0(server_stop(&S, SIGTERM));
	free(log);
}

/* No secret on the server: nothing changes. Plain writes work, there is
 * no nonce path, and engines with a secret write unproved (saying so
 * once) and still find each other. */
static void test_server_without_secret(void **state)
{
	char *log = fmt("%s/engine.log", tmp_dir), *all;
	struct xfer_engine *t, *i;
	int saved;

	(void)state;
	server_start(&S, NULL, NULL);
	put_key(S.port, "plain", "v", 1);
	check_key(S.port, "plain", "v", 1);
	req_status(S.port, "GET", "/metadata/nonce", NULL, 0, 404);

	saved = stderr_to(log);
	t = engine_try(S.port, "open-t", SECRET);
	stderr_back(saved);
	all = read_file(log, NULL);
	assert_non_null(t);
	assert_non_null(strstr(all, "checks no writes"));
	assert_null(strstr(all, "error"));
	free(all);
	i = engine(S.port, "open-i", SECRET);
	transfer_through(t, i, "open-t");
	xfer_engine_free(t);
	xfer_engine_free(i);
	check_absent(S.port, "mooncake/rpc_meta/open-t");
	assert_exit_0(server_stop(&S, SIGTERM));
	free(log);
}

/* The HTTP backend alone, on a server whose path is "/": its nonce is at
 * "/nonce" (not "//nonce"); puts and deletes with the secret work, with
 * another -EACCES, and gets need none. */
static void test_backend_root_path(void **state)
{
	const char *args[] = { "--auth-secret", SECRET, "--path", "/", NULL };
	struct xfer_auth *good = xfer_auth_new(SECRET);
	struct xfer_auth *other = xfer_auth_new(OTHER);
	struct th_store *f = th_store_new(&xfer_http_ops, "mooncake/", NULL);
	struct th_res res;
	char url[64];
	int saved;

	(void)state;
	server_start_args(&S, NULL, NULL, args);
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/", S.port);

	f->env.auth = good;
	assert_int_equal(f->ops->open(url, &f->env, &f->st), 0);
	assert_int_equal(th_store_put(f, "mooncake/a", "1", IO_MS), 0);
	assert_int_equal(th_store_op(f, 'g', "mooncake/a", NULL, 0, &res,
				     IO_MS), 0);
	assert_int_equal(res.len, 1);
	assert_int_equal(th_store_del(f, "mooncake/a", IO_MS), 0);
	assert_int_equal(th_store_op(f, 'g', "mooncake/a", NULL, 0, &res,
				     IO_MS), -ENOENT);
	/* several writes in flight at once, each with its own nonce */
	{
		struct th_res rs[8] = { 0 };
		char key[32];
		int done = 0;

		for (int k = 0; k < 8; k++) {
			snprintf(key, sizeof(key), "mooncake/m%d", k);
			f->ops->put(f->st, key, "xy", 2, th_res_cb, &rs[k]);
		}
		th_run_until(f->base, ({
			done = 0;
			for (int k = 0; k < 8; k++)
				done += rs[k].calls;
			done == 8; }), IO_MS);
		for (int k = 0; k < 8; k++) {
			assert_int_equal(rs[k].calls, 1);
			assert_int_equal(rs[k].err, 0);
		}
	}
	th_store_close(f);

	f->env.auth = other;
	assert_int_equal(f->ops->open(url, &f->env, &f->st), 0);
	saved = stderr_to("/dev/null");
	assert_int_equal(th_store_put(f, "mooncake/a", "2", IO_MS), -EACCES);
	assert_int_equal(th_store_del(f, "mooncake/m0", IO_MS), -EACCES);
	stderr_back(saved);
	assert_int_equal(th_store_op(f, 'g', "mooncake/m0", NULL, 0, &res,
				     IO_MS), 0);
	th_store_free(f);
	xfer_auth_free(good);
	xfer_auth_free(other);
	assert_exit_0(server_stop(&S, SIGTERM));
}

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The median time, µs, of @p n PUTs of 1 KiB through @p f, one after
 * the other. */
static int64_t put_median_us(struct th_store *f, int n)
{
	char val[1024], key[32];
	int64_t t[64];

	memset(val, 'v', sizeof(val));
	assert_true(n <= 64);
	for (int i = 0; i < n; i++) {
		struct th_res r = { 0 };
		int64_t t0 = now_us();

		snprintf(key, sizeof(key), "mooncake/t%d", i);
		f->ops->put(f->st, key, val, sizeof(val), th_res_cb, &r);
		assert_true(th_run_until(f->base, r.calls, IO_MS));
		t[i] = now_us() - t0;
		assert_int_equal(r.err, 0);
	}
	for (int i = 1; i < n; i++) /* insertion sort */
		for (int j = i; j > 0 && t[j - 1] > t[j]; j--) {
			int64_t x = t[j];

			t[j] = t[j - 1];
			t[j - 1] = x;
		}
	return t[n / 2];
}

/* What the proof costs a write: a second round trip (the nonce) and two
 * SHA-256 and HMAC computations. Printed, not judged. */
static void test_write_cost(void **state)
{
	const char *args[] = { "--auth-secret", SECRET, NULL };
	struct xfer_auth *good = xfer_auth_new(SECRET);
	struct th_store *f = th_store_new(&xfer_http_ops, "mooncake/", NULL);
	int64_t open_us, proved_us;
	char url[64];

	(void)state;
	server_start(&S, NULL, NULL);
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/metadata", S.port);
	assert_int_equal(f->ops->open(url, &f->env, &f->st), 0);
	open_us = put_median_us(f, 51);
	th_store_close(f);
	assert_exit_0(server_stop(&S, SIGTERM));

	server_start_args(&S, NULL, NULL, args);
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/metadata", S.port);
	f->env.auth = good;
	assert_int_equal(f->ops->open(url, &f->env, &f->st), 0);
	proved_us = put_median_us(f, 51);
	th_store_free(f);
	xfer_auth_free(good);
	assert_exit_0(server_stop(&S, SIGTERM));
	print_message("    1 KiB PUT through the HTTP backend, median of 51: "
		      "%lld us open, %lld us proved (nonce + write)\n",
		      (long long)open_us, (long long)proved_us);
}

/* --- main ---------------------------------------------------------------- */

/* A failed test may leave its server up. */
static int cleanup(void **state)
{
	(void)state;
	unsetenv("XFER_AUTH_SECRET");
	server_kill(&S);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_raw_writes, cleanup),
		cmocka_unit_test_teardown(test_env_and_flag, cleanup),
		cmocka_unit_test_teardown(test_engines, cleanup),
		cmocka_unit_test_teardown(test_server_without_secret, cleanup),
		cmocka_unit_test_teardown(test_backend_root_path, cleanup),
		cmocka_unit_test_teardown(test_write_cost, cleanup),
	};
	int failed;

	if (!mkdtemp(tmp_dir)) {
		perror("mkdtemp");
		return 1;
	}
	failed = cmocka_run_group_tests_name("xfer-metad with a secret", tests,
					     NULL, NULL);
	th_rm_tree(tmp_dir);
	return failed;
}
