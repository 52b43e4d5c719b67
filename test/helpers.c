#define _GNU_SOURCE /* nftw */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/pidfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/desc_internal.h"
#include "test/helpers.h"
#include "core/transport.h"

struct xfer_config *th_config(void)
{
	struct xfer_config *cfg = xfer_config_new();

	assert_non_null(cfg);
	return cfg;
}

void th_set(struct xfer_config *cfg, const char *key, const char *value)
{
	int ret = xfer_config_set(cfg, key, value);

	if (ret)
		fail_msg("config %s=%s: %d", key, value ? value : "NULL", ret);
}

void th_set_num(struct xfer_config *cfg, const char *key, long long value)
{
	char num[24];

	snprintf(num, sizeof(num), "%lld", value);
	th_set(cfg, key, num);
}

struct xfer_engine *th_engine_try(int workers)
{
	struct xfer_config *cfg = xfer_config_new();
	struct xfer_engine *e = NULL;
	char num[24];

	snprintf(num, sizeof(num), "%d", workers);
	if (cfg && !xfer_config_set(cfg, "bind_addr", "127.0.0.1") &&
	    !xfer_config_set(cfg, "local_server_name", "127.0.0.1") &&
	    !xfer_config_set(cfg, "rpc_port", "0") &&
	    !xfer_config_set(cfg, "workers", num))
		e = xfer_engine_new(cfg);
	xfer_config_free(cfg);
	return e;
}

struct xfer_engine *th_engine(int workers)
{
	struct xfer_engine *e = th_engine_try(workers);

	if (!e)
		fail_msg("engine with %d workers: %s", workers, strerror(errno));
	return e;
}

static uint8_t pattern_byte(uint64_t seed, size_t i)
{
	uint64_t x = (seed + 1) * 0x9E3779B97F4A7C15ull ^ (i * 0xBF58476D1CE4E5B9ull);

	return (uint8_t)(x >> 56 ^ x >> 13 ^ i);
}

void th_fill(void *buf, size_t len, uint64_t seed)
{
	uint8_t *p = buf;

	for (size_t i = 0; i < len; i++)
		p[i] = pattern_byte(seed, i);
}

long th_check(const void *buf, size_t len, uint64_t seed)
{
	const uint8_t *p = buf;

	for (size_t i = 0; i < len; i++)
		if (p[i] != pattern_byte(seed, i))
			return (long)i;
	return -1;
}

long th_check_byte(const void *buf, size_t len, uint8_t byte)
{
	const uint8_t *p = buf;

	for (size_t i = 0; i < len; i++)
		if (p[i] != byte)
			return (long)i;
	return -1;
}

int th_listen(uint16_t *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 64), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	*port = ntohs(sa.sin_port);
	return fd;
}

int th_connect_try(uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0), ret;

	if (fd < 0)
		return -errno;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		return fd;
	ret = -errno;
	close(fd);
	return ret;
}

int th_connect(uint16_t port)
{
	int fd = th_connect_try(port);

	if (fd < 0)
		fail_msg("connect to 127.0.0.1:%u: %s", port, strerror(-fd));
	return fd;
}

uint16_t th_name_port(const char *name)
{
	const char *colon = strrchr(name, ':');

	assert_non_null(colon);
	return (uint16_t)atoi(colon + 1);
}

void *th_alloc(size_t len)
{
	void *p = NULL;

	assert_int_equal(posix_memalign(&p, 4096, len), 0);
	assert_non_null(p);
	return p;
}

bool th_under_asan(void)
{
	const char *v = getenv("XFER_TEST_ASAN");

	return v && *v && strcmp(v, "0");
}

/* BUILD/NAME for this program at BUILD/test/PROG, into @p path (once);
 * "build/NAME" if /proc/self/exe cannot be read. */
static const char *build_program(char *path, size_t size, const char *name)
{
	char *slash;
	ssize_t n;

	if (path[0])
		return path;
	n = readlink("/proc/self/exe", path, size - 32);
	if (n <= 0)
		goto fallback;
	path[n] = '\0';
	for (int i = 0; i < 2; i++) {
		slash = strrchr(path, '/');
		if (!slash)
			goto fallback;
		*slash = '\0';
	}
	strcat(path, "/");
	strcat(path, name);
	return path;
fallback:
	snprintf(path, size, "build/%s", name);
	return path;
}

const char *th_metad_path(void)
{
	static char path[PATH_MAX];

	return build_program(path, sizeof(path), "xfer-metad");
}

const char *th_stored_path(void)
{
	static char path[PATH_MAX];

	return build_program(path, sizeof(path), "xfer-stored");
}

int64_t th_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uint16_t th_free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	close(fd);
	return ntohs(a.sin_port);
}

int th_wait_exit(pid_t pid, int timeout_ms)
{
	int pidfd = pidfd_open(pid, 0);
	struct pollfd pfd = { .fd = pidfd, .events = POLLIN };
	int status = 0, n;

	if (pidfd < 0)
		return -errno;
	while ((n = poll(&pfd, 1, timeout_ms)) < 0 && errno == EINTR)
		;
	close(pidfd);
	if (n == 0)
		return -ETIMEDOUT;
	if (n < 0)
		return -errno;
	if (waitpid(pid, &status, 0) != pid)
		return -errno;
	return status;
}

int th_count_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)) != NULL)
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* One line of /proc/self/task/TID/FILE into @p buf; false if none. */
static bool task_line(const char *tid, const char *file, char *buf,
		      size_t len)
{
	char path[320];
	FILE *f;
	bool ok;

	snprintf(path, sizeof(path), "/proc/self/task/%s/%s", tid, file);
	f = fopen(path, "r");
	if (!f)
		return false;
	ok = fgets(buf, (int)len, f) != NULL;
	fclose(f);
	return ok;
}

double th_threads_cpu(const char *prefix)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	char self[24], line[128];
	double s = 0;

	if (!d)
		return 0;
	snprintf(self, sizeof(self), "%ld", (long)syscall(SYS_gettid));
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.' || !strcmp(de->d_name, self))
			continue;
		if (prefix && (!task_line(de->d_name, "comm", line, sizeof(line)) ||
			       strncmp(line, prefix, strlen(prefix))))
			continue;
		if (task_line(de->d_name, "schedstat", line, sizeof(line)))
			s += strtoull(line, NULL, 10) / 1e9;
	}
	closedir(d);
	return s;
}

unsigned long long th_threads_runs(const char *prefix)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	char line[128], *p;
	unsigned long long n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.' ||
		    !task_line(de->d_name, "comm", line, sizeof(line)) ||
		    strncmp(line, prefix, strlen(prefix)) ||
		    !task_line(de->d_name, "schedstat", line, sizeof(line)))
			continue;
		/* on-CPU ns, waiting ns, times run */
		p = strchr(line, ' ');
		p = p ? strchr(p + 1, ' ') : NULL;
		if (p)
			n += strtoull(p + 1, NULL, 10);
	}
	closedir(d);
	return n;
}

int th_wait_threads(int want, int timeout_ms)
{
	int64_t end = th_now_ms() + timeout_ms;
	struct timespec ms = { 0, 1000000 };
	int n;

	while ((n = th_count_threads()) > want && th_now_ms() < end)
		nanosleep(&ms, NULL);
	return n;
}

bool th_wait_atomic(atomic_int *v, int want, int timeout_ms)
{
	int64_t end = th_now_ms() + timeout_ms;
	struct timespec ms = { 0, 1000000 };

	while (atomic_load(v) < want) {
		if (th_now_ms() >= end)
			return false;
		nanosleep(&ms, NULL);
	}
	return true;
}

enum xfer_status th_xfer1(struct xfer_engine *e, enum xfer_opcode op,
			  void *source, int64_t target_id,
			  uint64_t target_offset, size_t length,
			  uint64_t *transferred)
{
	struct xfer_request r = {
		.opcode = op,
		.source = source,
		.target_id = target_id,
		.target_offset = target_offset,
		.length = length,
	};
	struct xfer_task_status st = { 0 };
	struct xfer_batch *b = xfer_batch_new(e, 1);

	assert_non_null(b);
	assert_int_equal(xfer_batch_submit(b, &r, 1), 0);
	assert_int_equal(xfer_batch_wait(b, 30000), 0);
	assert_int_equal(xfer_batch_status(b, 0, &st), 0);
	assert_int_equal(xfer_batch_free(b), 0);
	if (transferred)
		*transferred = st.transferred;
	return st.status;
}

void th_write_verified(struct xfer_engine *e, void *src, int64_t seg,
		       void *dst, size_t len, uint64_t seed)
{
	th_fill(src, len, seed);
	th_assert_status(th_xfer1(e, XFER_WRITE, src, seg, (uintptr_t)dst, len,
				  NULL), XFER_COMPLETED);
	assert_int_equal(th_check(dst, len, seed), -1);
}

int th_unregister(struct xfer_engine *e, void *addr)
{
	int64_t end = th_now_ms() + 2000;
	struct timespec ms = { 0, 1000000 };
	int ret;

	while ((ret = xfer_unregister(e, addr)) == -EBUSY && th_now_ms() < end)
		nanosleep(&ms, NULL);
	return ret;
}

uint64_t th_segment_find(struct xfer_engine *e, int64_t seg, uint64_t addr)
{
	uint64_t a, len;

	for (size_t i = 0; xfer_segment_buffer(e, seg, i, &a, &len, NULL) == 0;
	     i++)
		if (a == addr)
			return len;
	fail_msg("segment %lld has no buffer at 0x%llx", (long long)seg,
		 (unsigned long long)addr);
	return 0;
}

/* ---- raw sockets ---- */

int th_send_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Wait for @fd to be readable until @end (ms); 0, or -ETIMEDOUT. */
static int wait_readable(int fd, int64_t end)
{
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int64_t left = end - th_now_ms();
		int n;

		if (left <= 0)
			return -ETIMEDOUT;
		n = poll(&pfd, 1, (int)left);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
	}
}

long th_recv_all(int fd, void *buf, size_t len, int timeout_ms)
{
	int64_t end = th_now_ms() + timeout_ms;
	char *p = buf;
	size_t got = 0;

	while (got < len) {
		ssize_t n;
		int ret = wait_readable(fd, end);

		if (ret)
			return ret;
		n = recv(fd, p + got, len - got, 0);
		if (n == 0)
			break;
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			if (errno == ECONNRESET)
				break;
			return -errno;
		}
		got += (size_t)n;
	}
	return (long)got;
}

long th_recv_until_close(int fd, void *buf, size_t cap, int timeout_ms)
{
	int64_t end = th_now_ms() + timeout_ms;
	char scratch[4096];
	long total = 0;

	for (;;) {
		ssize_t n;
		int ret = wait_readable(fd, end);

		if (ret)
			return ret;
		if ((size_t)total < cap)
			n = recv(fd, (char *)buf + total, cap - (size_t)total, 0);
		else
			n = recv(fd, scratch, sizeof(scratch), 0);
		if (n == 0)
			return total;
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			if (errno == ECONNRESET)
				return total;
			return -errno;
		}
		total += n;
	}
}

void th_put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

int th_hs_send(int fd, int type, const void *body, size_t len)
{
	size_t hdr = type >= 0 ? 9 : 8;
	uint8_t *frame = malloc(hdr + len);
	int ret;

	if (!frame)
		return -ENOMEM;
	th_put_le64(frame, (uint64_t)len + (type >= 0 ? 1 : 0));
	if (type >= 0)
		frame[8] = (uint8_t)type;
	if (len)
		memcpy(frame + hdr, body, len);
	ret = th_send_all(fd, frame, hdr + len);
	free(frame);
	return ret;
}

int th_hs_recv(int fd, char **body, size_t *len, int timeout_ms)
{
	int64_t end = th_now_ms() + timeout_ms;
	uint8_t lenbuf[8];
	uint64_t l;
	long n;
	char *b;

	*body = NULL;
	*len = 0;
	n = th_recv_all(fd, lenbuf, 8, timeout_ms);
	if (n < 0)
		return (int)n;
	if (n < 8)
		return -ECONNRESET;
	l = get_le64(lenbuf);
	if (l == 0 || l > 16u << 20)
		return -EPROTO;
	b = malloc(l + 1);
	if (!b)
		return -ENOMEM;
	n = th_recv_all(fd, b, l, (int)(end - th_now_ms() > 0 ?
					end - th_now_ms() : 1));
	if (n < 0 || (uint64_t)n < l) {
		free(b);
		return n < 0 ? (int)n : -EPIPE;
	}
	b[l] = '\0';
	*body = b;
	*len = l;
	return 0;
}

char *th_hs_call(uint16_t port, int type, const char *req, size_t *len)
{
	int fd = th_connect(port);
	char *body = NULL, *json;
	size_t blen = 0;

	assert_int_equal(th_hs_send(fd, type, req, strlen(req)), 0);
	assert_int_equal(th_hs_recv(fd, &body, &blen, 6000), 0);
	assert_true(blen >= 1);
	assert_int_equal((uint8_t)body[0], type);
	/* the server shuts down its write side after its one reply */
	assert_int_equal(th_recv_until_close(fd, NULL, 0, 6000), 0);
	close(fd);
	json = malloc(blen);
	assert_non_null(json);
	memcpy(json, body + 1, blen - 1);
	json[blen - 1] = '\0';
	free(body);
	*len = blen - 1;
	return json;
}

struct xfer_desc *th_fetch_desc(uint16_t port)
{
	struct xfer_desc *d = NULL;
	char err[256] = "";
	size_t len;
	char *json = th_hs_call(port, 1, "{}\n", &len);
	int ret = xfer_desc_decode(json, len, xfer_transport_codecs(), &d, err,
				   sizeof(err));

	if (ret != 0)
		fail_msg("descriptor does not decode (%d: %s): %s", ret, err,
			 json);
	free(json);
	assert_non_null(d);
	return d;
}

/* ---- a metadata store backend driven on an event_base ---- */

void th_late_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	*(bool *)arg = true;
}

static void store_changed(const char *key, void *arg)
{
	struct th_store *f = arg;

	if (!key)
		f->changed_all++;
	else if (f->nkeys < TH_STORE_MAX_KEYS)
		f->keys[f->nkeys++] = strdup(key);
}

static void store_reconnected(void *arg)
{
	((struct th_store *)arg)->reconnected++;
}

void th_res_cb(int err, const char *value, size_t len, void *arg)
{
	struct th_res *r = arg;

	r->calls++;
	r->err = err;
	r->len = len;
	if (value && len <= sizeof(r->val))
		memcpy(r->val, value, len);
}

struct th_store *th_store_new(const struct xfer_store_ops *ops,
			      const char *prefix, struct event_base *base)
{
	struct th_store *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->ops = ops;
	f->own_base = !base;
	f->base = base ? base : event_base_new();
	assert_non_null(f->base);
	snprintf(f->prefix, sizeof(f->prefix), "%s", prefix);
	f->env = (struct xfer_store_env){
		.base = f->base,
		.prefix = f->prefix,
		.changed = store_changed,
		.reconnected = store_reconnected,
		.arg = f,
	};
	return f;
}

void th_store_close(struct th_store *f)
{
	if (f->st)
		f->ops->close(f->st);
	f->st = NULL;
}

void th_store_free(struct th_store *f)
{
	th_store_close(f);
	th_store_forget(f);
	if (f->own_base)
		event_base_free(f->base);
	free(f);
}

int th_store_op(struct th_store *f, char op, const char *key,
		const char *value, size_t len, struct th_res *r, int ms)
{
	memset(r, 0, sizeof(*r));
	if (op == 'g')
		f->ops->get(f->st, key, th_res_cb, r);
	else if (op == 'p')
		f->ops->put(f->st, key, value, len, th_res_cb, r);
	else
		f->ops->del(f->st, key, th_res_cb, r);
	assert_int_equal(r->calls, 0);
	assert_true(th_run_until(f->base, r->calls, ms));
	th_run_until(f->base, false, 10);
	assert_int_equal(r->calls, 1);
	return r->err;
}

int th_store_put(struct th_store *f, const char *key, const char *value,
		 int ms)
{
	struct th_res r;

	return th_store_op(f, 'p', key, value, strlen(value), &r, ms);
}

int th_store_del(struct th_store *f, const char *key, int ms)
{
	struct th_res r;

	return th_store_op(f, 'd', key, NULL, 0, &r, ms);
}

int th_store_seen(struct th_store *f, const char *key)
{
	int n = 0;

	for (int i = 0; i < f->nkeys; i++)
		n += !strcmp(f->keys[i], key);
	return n;
}

void th_store_forget(struct th_store *f)
{
	for (int i = 0; i < f->nkeys; i++)
		free(f->keys[i]);
	f->nkeys = 0;
}

void th_store_wait_watching(struct th_store *w, struct th_store *by,
			    const char *probe, int ms)
{
	int64_t end = th_now_ms() + ms;

	do {
		assert_int_equal(th_store_put(by, probe, "x", ms), 0);
		if (th_run_until(w->base, th_store_seen(w, probe), 200))
			return;
	} while (th_now_ms() < end);
	fail_msg("the watch never reported %s", probe);
}

void th_count_cb(struct xfer_batch *b, enum xfer_status outcome, void *arg)
{
	struct th_cbrec *r = arg;

	(void)b;
	atomic_store(&r->outcome, (int)outcome);
	atomic_fetch_add(&r->calls, 1);
}

void th_expect_callbacks(struct th_cbrec *r, int want)
{
	struct timespec ms200 = { 0, 200 * 1000000 };

	assert_true(th_wait_atomic(&r->calls, want, 2000));
	nanosleep(&ms200, NULL); /* a check for extra calls, not a sync */
	assert_int_equal(atomic_load(&r->calls), want);
}

static int rm_entry(const char *path, const struct stat *st, int flag,
		    struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

int th_rm_tree(const char *dir)
{
	return nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) ? -1 : 0;
}
