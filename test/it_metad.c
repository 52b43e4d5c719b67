/*
 * xfer-metad, the real program over real sockets (PROTOCOL.md §2): keys
 * round-trip byte for byte, bad requests get a 4xx with a reason and the
 * server goes on, 1000 keys, the persist file across SIGTERM and SIGKILL,
 * a failed save, a corrupt file, and the watch long-poll: a wake-up, the
 * prefix filter and timeout, compaction, and clients that hang up or
 * pipeline while held.
 *
 * XFER_TEST_WRAP puts a command in front of the server, e.g.
 *   XFER_TEST_WRAP="valgrind -q --error-exitcode=9 --leak-check=full" \
 *       build/test/it_metad
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yajl/yajl_tree.h>

#include "helpers.h"

#define IO_MS 10000         /* the most any one answer may take */
#define START_MS 30000      /* the server up, or down (valgrind is slow) */
#define KEY_MAX 4096        /* xfer-metad's longest key, bytes */

struct server {
	pid_t pid;
	uint16_t port;
};

/* A client connection; bytes read past one answer wait in buf. */
struct conn {
	int fd;
	char *buf;
	size_t len, cap;
};

struct resp {
	int status;
	char ctype[128];
	char *body;         /* len bytes, plus a NUL for convenience */
	size_t len;
};

static char dir[] = "/tmp/it_metad.XXXXXX";
static struct server S = { .pid = -1 };  /* in memory, shared */
static int S_fds;                        /* its open fds when idle */
static struct server P = { .pid = -1 };  /* with a persist file */

static char *fmt(const char *f, ...)
{
	char *s;
	va_list ap;

	va_start(ap, f);
	assert_true(vasprintf(&s, f, ap) >= 0);
	va_end(ap);
	return s;
}

/* --- the server program ---------------------------------------------- */

/* build/xfer-metad, found from this program's own build/test/it_metad. */
static const char *metad_path(void)
{
	static char path[PATH_MAX];
	char *slash;
	ssize_t n;

	if (path[0])
		return path;
	n = readlink("/proc/self/exe", path, sizeof(path) - 16);
	assert_true(n > 0);
	path[n] = '\0';
	for (int i = 0; i < 2; i++) {
		slash = strrchr(path, '/');
		assert_non_null(slash);
		*slash = '\0';
	}
	strcat(path, "/xfer-metad");
	return path;
}

/* Fork the server on a free port; its stderr to @p err_file if given. */
static pid_t spawn(const char *persist, const char *err_file)
{
	char *port_file = fmt("%s/port", dir), *out_file = fmt("%s/out", dir);
	const char *wrap = getenv("XFER_TEST_WRAP");
	char *words = strdup(wrap ? wrap : ""), *save;
	const char *argv[24];
	int argc = 0, fd;
	pid_t pid;

	unlink(port_file);
	for (char *w = strtok_r(words, " ", &save); w && argc < 12;
	     w = strtok_r(NULL, " ", &save))
		argv[argc++] = w;
	argv[argc++] = metad_path();
	argv[argc++] = "--port";
	argv[argc++] = "0";
	argv[argc++] = "--port-file";
	argv[argc++] = port_file;
	if (persist) {
		argv[argc++] = "--persist";
		argv[argc++] = persist;
	}
	argv[argc] = NULL;

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		fd = open(out_file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd >= 0)
			dup2(fd, STDOUT_FILENO);
		if (err_file) {
			fd = open(err_file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
			if (fd >= 0)
				dup2(fd, STDERR_FILENO);
		}
		execvp(argv[0], (char **)argv);
		_exit(127);
	}
	free(words);
	free(port_file);
	free(out_file);
	return pid;
}

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	if (len)
		*len = (size_t)n;
	return buf;
}

static void write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

/* Start a server and learn its port from --port-file (and stdout);
 * its stderr goes to @p err_file if given. */
static void server_start(struct server *s, const char *persist,
			 const char *err_file)
{
	char *port_file = fmt("%s/port", dir), *out_file = fmt("%s/out", dir);
	int64_t end = th_now_ms() + START_MS;
	char *out, *want;
	unsigned port;
	int status;
	FILE *f;

	s->pid = spawn(persist, err_file);
	while (!(f = fopen(port_file, "r"))) {
		if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
			s->pid = -1;
			fail_msg("xfer-metad exited at start (status 0x%x)",
				 status);
		}
		assert_true(th_now_ms() < end);
		usleep(5000);
	}
	assert_int_equal(fscanf(f, "%u", &port), 1);
	fclose(f);
	assert_true(port > 0 && port < 65536);
	s->port = (uint16_t)port;

	out = read_file(out_file, NULL);
	want = fmt("xfer-metad: listening on 127.0.0.1:%u\n", port);
	assert_string_equal(out, want);
	free(want);
	free(out);
	free(port_file);
	free(out_file);
}

/* Wait up to START_MS for @p pid to end. @return its wait status. */
static int reap(pid_t pid)
{
	int64_t end = th_now_ms() + START_MS;
	int status;

	while (waitpid(pid, &status, WNOHANG) == 0) {
		if (th_now_ms() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			fail_msg("xfer-metad did not end");
		}
		usleep(2000);
	}
	return status;
}

/* Send @p sig and reap. @return the wait status. */
static int server_stop(struct server *s, int sig)
{
	pid_t pid = s->pid;

	s->pid = -1;
	assert_int_equal(kill(pid, sig), 0);
	return reap(pid);
}

static void assert_exit_0(int status)
{
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* Open fds of process @p pid. */
static int fd_count(pid_t pid)
{
	char *path = fmt("/proc/%d/fd", (int)pid);
	DIR *d = opendir(path);
	struct dirent *de;
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	free(path);
	return n;
}

/* Wait up to 2 s for @p pid to have at most @p want open fds.
 * @return the last count. */
static int wait_fds(pid_t pid, int want)
{
	int64_t end = th_now_ms() + 2000;
	int n;

	while ((n = fd_count(pid)) > want && th_now_ms() < end)
		usleep(5000);
	return n;
}

/* --- a small HTTP/1.1 client ------------------------------------------ */

static struct conn conn_open(uint16_t port)
{
	struct conn c = { .fd = th_connect(port), .cap = 4096 };

	c.buf = malloc(c.cap);
	assert_non_null(c.buf);
	return c;
}

static void conn_close(struct conn *c)
{
	close(c->fd);
	free(c->buf);
}

static void send_all(int fd, const void *data, size_t len)
{
	const char *p = data;
	ssize_t n;

	while (len) {
		n = send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		assert_true(n > 0);
		p += n;
		len -= (size_t)n;
	}
}

/* One send() per request: a body sent apart would wait for the delayed
 * ACK of the head (Nagle), 40 ms a request. */
static void http_send(struct conn *c, const char *method,
		      const char *target, const void *body, size_t len)
{
	char *head = fmt("%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
			 "Content-Length: %zu\r\n\r\n", method, target, len);
	size_t hlen = strlen(head);
	char *msg = realloc(head, hlen + len);

	assert_non_null(msg);
	if (len)
		memcpy(msg + hlen, body, len);
	send_all(c->fd, msg, hlen + len);
	free(msg);
}

/* Bytes in, up to @p end (monotonic ms); fails the test on EOF. */
static void fill(struct conn *c, int64_t end)
{
	struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
	int64_t left = end - th_now_ms();
	ssize_t n;

	if (c->len == c->cap) {
		c->cap *= 2;
		c->buf = realloc(c->buf, c->cap);
		assert_non_null(c->buf);
	}
	if (left <= 0 || poll(&pfd, 1, (int)left) != 1)
		fail_msg("no answer in time");
	n = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
	if (n <= 0)
		fail_msg("the server closed the connection");
	c->len += (size_t)n;
}

/* Read one answer (status, Content-Type, Content-Length body). */
static void http_recv(struct conn *c, struct resp *r, int timeout_ms)
{
	int64_t end = th_now_ms() + timeout_ms;
	char *eoh = NULL, *line, *save;
	size_t head, clen = 0;

	memset(r, 0, sizeof(*r));
	while (!(eoh = memmem(c->buf, c->len, "\r\n\r\n", 4)))
		fill(c, end);
	head = (size_t)(eoh - c->buf) + 4;
	eoh[2] = '\0';
	assert_int_equal(sscanf(c->buf, "HTTP/1.1 %d ", &r->status), 1);
	for (line = strtok_r(c->buf, "\r\n", &save); line;
	     line = strtok_r(NULL, "\r\n", &save)) {
		if (!strncasecmp(line, "Content-Length:", 15))
			clen = strtoul(line + 15, NULL, 10);
		else if (!strncasecmp(line, "Content-Type:", 13))
			snprintf(r->ctype, sizeof(r->ctype), "%s",
				 line + 13 + strspn(line + 13, " "));
	}
	while (c->len < head + clen)
		fill(c, end);
	r->body = malloc(clen + 1);
	assert_non_null(r->body);
	memcpy(r->body, c->buf + head, clen);
	r->body[clen] = '\0';
	r->len = clen;
	c->len -= head + clen;
	memmove(c->buf, c->buf + head + clen, c->len);
}

/* One request on a connection of its own. */
static struct resp req1(uint16_t port, const char *method, const char *target,
			const void *body, size_t len)
{
	struct conn c = conn_open(port);
	struct resp r;

	http_send(&c, method, target, body, len);
	http_recv(&c, &r, IO_MS);
	conn_close(&c);
	return r;
}

/* req1() that only checks the status. */
static void req_status(uint16_t port, const char *method, const char *target,
		       const void *body, size_t len, int status)
{
	struct resp r = req1(port, method, target, body, len);

	if (r.status != status)
		fail_msg("%s %s: %d (%s), want %d", method, target, r.status,
			 r.body, status);
	free(r.body);
}

/* "/metadata?key=" and @p key percent-encoded (all but unreserved). */
static char *key_target(const char *key)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(key);
	char *t = malloc(sizeof("/metadata?key=") + 3 * n), *p;

	assert_non_null(t);
	p = t + sprintf(t, "/metadata?key=");
	for (const unsigned char *k = (const unsigned char *)key; *k; k++) {
		if ((*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z') ||
		    (*k >= '0' && *k <= '9') || strchr("-._~", *k)) {
			*p++ = (char)*k;
		} else {
			*p++ = '%';
			*p++ = hex[*k >> 4];
			*p++ = hex[*k & 15];
		}
	}
	*p = '\0';
	return t;
}

static void put_key(uint16_t port, const char *key, const void *val,
		    size_t len)
{
	char *t = key_target(key);

	req_status(port, "PUT", t, val, len, 200);
	free(t);
}

/* GET @p key and check it holds exactly @p len bytes at @p val. */
static void check_key(uint16_t port, const char *key, const void *val,
		      size_t len)
{
	char *t = key_target(key);
	struct resp r = req1(port, "GET", t, NULL, 0);

	if (r.status != 200)
		fail_msg("GET %s: %d %s", key, r.status, r.body);
	assert_int_equal(r.len, len);
	assert_memory_equal(r.body, val, len);
	assert_string_equal(r.ctype, "application/json");
	free(r.body);
	free(t);
}

/* --- watch answers ----------------------------------------------------- */

struct watch {
	yajl_val root;
	uint64_t revision;
	bool compacted;
	yajl_val *events;
	size_t n;
};

static yajl_val member(yajl_val v, const char *name, yajl_type type)
{
	const char *path[] = { name, NULL };

	return yajl_tree_get(v, path, type);
}

/* Parse a watch answer and check its shape. */
static struct watch watch_parse(const struct resp *r)
{
	struct watch w = { 0 };
	yajl_val rev, events;
	char err[128];

	assert_int_equal(r->status, 200);
	assert_string_equal(r->ctype, "application/json");
	w.root = yajl_tree_parse(r->body, err, sizeof(err));
	if (!w.root)
		fail_msg("bad JSON (%s): %s", err, r->body);
	rev = member(w.root, "revision", yajl_t_number);
	events = member(w.root, "events", yajl_t_array);
	assert_non_null(rev);
	assert_non_null(events);
	w.revision = (uint64_t)YAJL_GET_INTEGER(rev);
	w.compacted = member(w.root, "compacted", yajl_t_true) != NULL;
	w.events = events->u.array.values;
	w.n = events->u.array.len;
	return w;
}

static void event_check(const struct watch *w, size_t i, uint64_t revision,
			const char *type, const char *key)
{
	yajl_val ev;

	assert_true(i < w->n);
	ev = w->events[i];
	assert_int_equal(YAJL_GET_INTEGER(member(ev, "revision",
						 yajl_t_number)), revision);
	assert_string_equal(YAJL_GET_STRING(member(ev, "type",
						   yajl_t_string)), type);
	assert_string_equal(YAJL_GET_STRING(member(ev, "key",
						   yajl_t_string)), key);
}

static char *watch_target(const char *prefix, uint64_t since,
			  int timeout_ms)
{
	char *pt = key_target(prefix);
	char *t = fmt("/metadata/watch?prefix=%s&since=%" PRIu64
		      "&timeout_ms=%d", pt + strlen("/metadata?key="), since,
		      timeout_ms);

	free(pt);
	return t;
}

/* One watch on a connection of its own. */
static struct resp watch1(uint16_t port, const char *prefix, uint64_t since,
			  int timeout_ms)
{
	char *t = watch_target(prefix, since, timeout_ms);
	struct resp r = req1(port, "GET", t, NULL, 0);

	free(t);
	return r;
}

/* The server's revision: a watch with timeout 0 always answers. */
static uint64_t current_rev(uint16_t port)
{
	struct resp r = watch1(port, "", 0, 0);
	struct watch w = watch_parse(&r);
	uint64_t rev = w.revision;

	yajl_tree_free(w.root);
	free(r.body);
	return rev;
}

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

	/* values up to 64 MiB: evhttp refuses more before reading it */
	c = conn_open(S.port);
	t = fmt("PUT /metadata?key=big HTTP/1.1\r\nHost: x\r\n"
		"Content-Length: %u\r\n\r\n", (64u << 20) + 1);
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

/* --- persistence ----------------------------------------------------- */

#define NPERSIST 20

/* Value i: 300 + i bytes covering every byte value, NUL and '\n' too. */
static void persist_value(int i, uint8_t *buf, size_t *len)
{
	*len = 300 + (size_t)i;
	for (size_t j = 0; j < *len; j++)
		buf[j] = (uint8_t)(i * 7 + j);
}

/* Fill P's store, stop it with @p sig, restart it on the same file and
 * find everything back, and the revision going on. */
static void persist_cycle(const char *file, int sig)
{
	uint8_t val[400];
	char key[32], *t;
	uint64_t rev;
	size_t len;
	struct watch w;
	struct resp r;
	int status;

	unlink(file);
	server_start(&P, file, NULL);
	for (int i = 0; i < NPERSIST; i++) {
		snprintf(key, sizeof(key), "p/k%02d", i);
		persist_value(i, val, &len);
		put_key(P.port, key, val, len);
	}
	put_key(P.port, "p/k03", "{\"v\":2}\n", 8);   /* a newer value */
	t = key_target("p/k05");
	req_status(P.port, "DELETE", t, NULL, 0, 200);
	rev = current_rev(P.port);
	assert_int_equal(rev, NPERSIST + 2);

	status = server_stop(&P, sig);
	if (sig == SIGKILL)
		assert_true(WIFSIGNALED(status) &&
			    WTERMSIG(status) == SIGKILL);
	else
		assert_exit_0(status);

	server_start(&P, file, NULL);
	for (int i = 0; i < NPERSIST; i++) {
		snprintf(key, sizeof(key), "p/k%02d", i);
		persist_value(i, val, &len);
		if (i == 3)
			check_key(P.port, key, "{\"v\":2}\n", 8);
		else if (i != 5)
			check_key(P.port, key, val, len);
	}
	req_status(P.port, "GET", t, NULL, 0, 404);
	free(t);

	/* the revision goes on: nothing new since rev */
	r = watch1(P.port, "", rev, 300);
	w = watch_parse(&r);
	assert_false(w.compacted);
	assert_int_equal(w.n, 0);
	assert_int_equal(w.revision, rev);
	yajl_tree_free(w.root);
	free(r.body);
	/* the changes before it were not kept across the restart */
	r = watch1(P.port, "", rev - 1, 300);
	w = watch_parse(&r);
	assert_true(w.compacted);
	yajl_tree_free(w.root);
	free(r.body);
	put_key(P.port, "p/new", "{}\n", 3);
	assert_int_equal(current_rev(P.port), rev + 1);
	assert_exit_0(server_stop(&P, SIGTERM));
}

static void test_persist_sigterm(void **state)
{
	char *file = fmt("%s/store-term", dir);

	(void)state;
	persist_cycle(file, SIGTERM);
	free(file);
}

/* Durable without a clean exit: the 200 comes after fsync + rename. */
static void test_persist_sigkill(void **state)
{
	char *file = fmt("%s/store-kill", dir);

	(void)state;
	persist_cycle(file, SIGKILL);
	free(file);
}

/* A change that cannot be saved is refused, and not kept in memory. */
static void test_persist_save_fails(void **state)
{
	char *file = fmt("%s/store-fail", dir);
	char *tmp = fmt("%s.tmp", file);
	char *err_file = fmt("%s/err", dir), *msg;
	char *t = key_target("f/a");
	struct resp r;

	(void)state;
	unlink(file);
	server_start(&P, file, err_file);
	put_key(P.port, "f/a", "1\n", 2);
	assert_int_equal(mkdir(tmp, 0755), 0);  /* FILE.tmp cannot be made */
	r = req1(P.port, "PUT", t, "2\n", 2);
	assert_int_equal(r.status, 500);
	assert_true(r.len > 1);
	free(r.body);
	req_status(P.port, "DELETE", t, NULL, 0, 500);
	check_key(P.port, "f/a", "1\n", 2);
	assert_int_equal(current_rev(P.port), 1);
	assert_int_equal(rmdir(tmp), 0);
	put_key(P.port, "f/a", "3\n", 2);
	assert_exit_0(server_stop(&P, SIGTERM));
	msg = read_file(err_file, NULL);
	assert_non_null(strstr(msg, "cannot save"));
	free(msg);
	free(err_file);

	server_start(&P, file, NULL);
	check_key(P.port, "f/a", "3\n", 2);
	assert_exit_0(server_stop(&P, SIGTERM));
	free(t);
	free(tmp);
	free(file);
}

/* Put a persist file's checksum (FNV-1a 64, last 8 bytes) right. */
static void reseal(char *buf, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < len - 8; i++) {
		h ^= (uint8_t)buf[i];
		h *= 0x100000001b3ull;
	}
	for (int i = 0; i < 8; i++)
		buf[len - 8 + i] = (char)(h >> (8 * i));
}

/* The server refuses @p file: exit 1, a message naming it, file kept. */
static void refuses(const char *file, const void *data, size_t len)
{
	char *err_file = fmt("%s/err", dir), *msg, *after;
	size_t after_len;
	int status;

	write_file(file, data, len);
	status = reap(spawn(file, err_file));
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 1);
	msg = read_file(err_file, NULL);
	if (!strstr(msg, file))
		fail_msg("message without the file name: %s", msg);
	after = read_file(file, &after_len);
	assert_int_equal(after_len, len);
	assert_memory_equal(after, data, len);
	free(after);
	free(msg);
	free(err_file);
}

static void test_persist_corrupt(void **state)
{
	char *file = fmt("%s/store-corrupt", dir), *good, *bad;
	char *nodir = fmt("%s/no/such/dir/store", dir);
	size_t len;
	int status;

	(void)state;
	unlink(file);
	server_start(&P, file, NULL);
	put_key(P.port, "c/a", "{\"a\":1}\n", 8);
	put_key(P.port, "c/b", "{\"b\":2}\n", 8);
	assert_exit_0(server_stop(&P, SIGTERM));
	good = read_file(file, &len);
	bad = malloc(len);
	assert_non_null(bad);

	refuses(file, "not a store\n", 12);
	refuses(file, good, len - 5);           /* truncated */
	refuses(file, good, 20);
	memcpy(bad, good, len);
	bad[len / 2] ^= 0x40;                   /* one flipped bit */
	refuses(file, bad, len);
	/* well sealed, wrong inside */
	memcpy(bad, good, len);
	bad[8] = 2;                             /* version 2 */
	reseal(bad, len);
	refuses(file, bad, len);
	memcpy(bad, good, len);
	bad[20]++;                              /* one entry more */
	reseal(bad, len);
	refuses(file, bad, len);

	/* and it starts again once the file is good */
	write_file(file, good, len);
	server_start(&P, file, NULL);
	check_key(P.port, "c/b", "{\"b\":2}\n", 8);
	assert_exit_0(server_stop(&P, SIGTERM));

	/* a path it cannot create fails at start, not at the first PUT */
	status = reap(spawn(nodir, "/dev/null"));
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) != 0);

	free(bad);
	free(good);
	free(nodir);
	free(file);
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

/* A failed persist test may leave its server up. */
static int persist_cleanup(void **state)
{
	(void)state;
	if (P.pid > 0) {
		kill(P.pid, SIGKILL);
		waitpid(P.pid, NULL, 0);
		P.pid = -1;
	}
	return 0;
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
	const struct CMUnitTest persist[] = {
		cmocka_unit_test_teardown(test_persist_sigterm,
					  persist_cleanup),
		cmocka_unit_test_teardown(test_persist_sigkill,
					  persist_cleanup),
		cmocka_unit_test_teardown(test_persist_save_fails,
					  persist_cleanup),
		cmocka_unit_test_teardown(test_persist_corrupt,
					  persist_cleanup),
	};
	int failed;

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	failed = cmocka_run_group_tests_name("xfer-metad", shared,
					     shared_start, shared_stop);
	failed += cmocka_run_group_tests_name("xfer-metad --persist", persist,
					      NULL, NULL);
	th_rm_tree(dir);
	return failed;
}
