/*
 * The xfer-metad tests' shared part (th_metad.h): the server program, a
 * small HTTP/1.1 client, watch answers.
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

#include "test/helpers.h"
#include "test/th_metad.h"

char tmp_dir[] = "/tmp/it_metad.XXXXXX";

char *fmt(const char *f, ...)
{
	char *s;
	va_list ap;

	va_start(ap, f);
	assert_true(vasprintf(&s, f, ap) >= 0);
	va_end(ap);
	return s;
}

/* --- the server program ---------------------------------------------- */

pid_t spawn(const char *persist, const char *err_file)
{
	return spawn_args(persist, err_file, NULL);
}

pid_t spawn_args(const char *persist, const char *err_file,
		 const char *const *args)
{
	char *port_file = fmt("%s/port", tmp_dir);
	char *out_file = fmt("%s/out", tmp_dir);
	const char *wrap = getenv("XFER_TEST_WRAP");
	char *words = strdup(wrap ? wrap : ""), *save;
	const char *argv[40];
	int argc = 0, fd;
	pid_t pid;

	unlink(port_file);
	for (char *w = strtok_r(words, " ", &save); w && argc < 12;
	     w = strtok_r(NULL, " ", &save))
		argv[argc++] = w;
	argv[argc++] = th_metad_path();
	argv[argc++] = "--port";
	argv[argc++] = "0";
	argv[argc++] = "--port-file";
	argv[argc++] = port_file;
	if (persist) {
		argv[argc++] = "--persist";
		argv[argc++] = persist;
	}
	for (; args && *args && argc < 38; args++)
		argv[argc++] = *args;
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

char *read_file(const char *path, size_t *len)
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

void write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

void server_start(struct server *s, const char *persist, const char *err_file)
{
	server_start_args(s, persist, err_file, NULL);
}

void server_start_args(struct server *s, const char *persist,
		       const char *err_file, const char *const *args)
{
	char *port_file = fmt("%s/port", tmp_dir);
	char *out_file = fmt("%s/out", tmp_dir);
	int64_t end = th_now_ms() + START_MS;
	char *out, *want;
	unsigned port;
	int status;
	FILE *f;

	s->pid = spawn_args(persist, err_file, args);
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

int reap(pid_t pid)
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

int server_stop(struct server *s, int sig)
{
	pid_t pid = s->pid;

	s->pid = -1;
	assert_int_equal(kill(pid, sig), 0);
	return reap(pid);
}

void server_kill(struct server *s)
{
	if (s->pid > 0) {
		kill(s->pid, SIGKILL);
		waitpid(s->pid, NULL, 0);
		s->pid = -1;
	}
}

void assert_exit_0(int status)
{
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

int fd_count(pid_t pid)
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

int wait_fds(pid_t pid, int want)
{
	int64_t end = th_now_ms() + 2000;
	int n;

	while ((n = fd_count(pid)) > want && th_now_ms() < end)
		usleep(5000);
	return n;
}

/* --- a small HTTP/1.1 client ------------------------------------------ */

struct conn conn_open(uint16_t port)
{
	struct conn c = { .fd = th_connect(port), .cap = 4096 };

	c.buf = malloc(c.cap);
	assert_non_null(c.buf);
	return c;
}

void conn_close(struct conn *c)
{
	close(c->fd);
	free(c->buf);
}

void send_all(int fd, const void *data, size_t len)
{
	assert_int_equal(th_send_all(fd, data, len), 0);
}

/* One send() per request: a body sent apart would wait for the delayed
 * ACK of the head (Nagle), 40 ms a request. */
void http_send(struct conn *c, const char *method, const char *target,
	       const void *body, size_t len)
{
	http_send_hdr(c, method, target, NULL, body, len);
}

void http_send_hdr(struct conn *c, const char *method, const char *target,
		   const char *headers, const void *body, size_t len)
{
	char *head = fmt("%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s"
			 "Content-Length: %zu\r\n\r\n", method, target,
			 headers ? headers : "", len);
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

void http_recv(struct conn *c, struct resp *r, int timeout_ms)
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

struct resp req1(uint16_t port, const char *method, const char *target,
		 const void *body, size_t len)
{
	struct conn c = conn_open(port);
	struct resp r;

	http_send(&c, method, target, body, len);
	http_recv(&c, &r, IO_MS);
	conn_close(&c);
	return r;
}

void req_status(uint16_t port, const char *method, const char *target,
		const void *body, size_t len, int status)
{
	struct resp r = req1(port, method, target, body, len);

	if (r.status != status)
		fail_msg("%s %s: %d (%s), want %d", method, target, r.status,
			 r.body, status);
	free(r.body);
}

char *key_target(const char *key)
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

void put_key(uint16_t port, const char *key, const void *val, size_t len)
{
	char *t = key_target(key);

	req_status(port, "PUT", t, val, len, 200);
	free(t);
}

void check_key(uint16_t port, const char *key, const void *val, size_t len)
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

static yajl_val member(yajl_val v, const char *name, yajl_type type)
{
	const char *path[] = { name, NULL };

	return yajl_tree_get(v, path, type);
}

struct watch watch_parse(const struct resp *r)
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

void event_check(const struct watch *w, size_t i, uint64_t revision,
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

char *watch_target(const char *prefix, uint64_t since, int timeout_ms)
{
	char *pt = key_target(prefix);
	char *t = fmt("/metadata/watch?prefix=%s&since=%" PRIu64
		      "&timeout_ms=%d", pt + strlen("/metadata?key="), since,
		      timeout_ms);

	free(pt);
	return t;
}

struct resp watch1(uint16_t port, const char *prefix, uint64_t since,
		   int timeout_ms)
{
	char *t = watch_target(prefix, since, timeout_ms);
	struct resp r = req1(port, "GET", t, NULL, 0);

	free(t);
	return r;
}

uint64_t current_rev(uint16_t port)
{
	struct resp r = watch1(port, "", 0, 0);
	struct watch w = watch_parse(&r);
	uint64_t rev = w.revision;

	yajl_tree_free(w.root);
	free(r.body);
	return rev;
}
