/* The hardening tests' shared part (th_harden.h). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <xfer/xfer.h>

#include "core/handshake_internal.h"
#include "util/auth_internal.h"
#include "test/helpers.h"
#include "test/th_harden.h"

#define PASS_ON 5 /* matching lines passed on to the real stderr */

struct xfer_engine *hd_engine(int workers, const char *const *kv)
{
	struct xfer_config *cfg = th_config();
	struct xfer_engine *e;

	th_set(cfg, "bind_addr", "127.0.0.1");
	th_set(cfg, "local_server_name", "127.0.0.1");
	th_set(cfg, "rpc_port", "0");
	th_set_num(cfg, "workers", workers);
	for (; kv && kv[0]; kv += 2)
		th_set(cfg, kv[0], kv[1]);
	e = xfer_engine_new(cfg);
	xfer_config_free(cfg);
	if (!e)
		fail_msg("engine: %s", strerror(errno));
	return e;
}

double hd_cpu_seconds(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long ut, st;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid ? pid : getpid());
	f = fopen(path, "r");
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* after the command name, which may hold spaces: fields 3.. */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
			 "%lu %lu", &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

long hd_rss_kib(pid_t pid)
{
	char line[256], path[64];
	long kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", pid ? pid : getpid());
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

int hd_fd_count(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the directory's own */
}

int hd_nofile_for(int spare)
{
	DIR *d = opendir("/proc/self/fd");
	static bool used[65536];
	struct dirent *de;
	int self, n;

	assert_non_null(d);
	memset(used, 0, sizeof(used));
	self = dirfd(d);
	while ((de = readdir(d))) {
		n = atoi(de->d_name);
		if (de->d_name[0] != '.' && n != self && n < 65536)
			used[n] = true;
	}
	closedir(d);
	for (n = 0; n < 65536 && spare > 0; n++)
		if (!used[n])
			spare--;
	return n;
}

static long saved_nofile = -1;

long hd_set_nofile(long n)
{
	struct rlimit rl;
	long old;

	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	old = (long)rl.rlim_cur;
	if (saved_nofile < 0)
		saved_nofile = old;
	rl.rlim_cur = (rlim_t)n;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
	return old;
}

/* ---- lines counted ---- */

/* A thread that reads a pipe to its end, counting lines. */
struct counter {
	bool on;
	pthread_t thread;
	int rd, pass_fd;        /* pass_fd: -1, or where lines go on */
	char match[64];
	_Atomic long bytes, lines, matched;
};

static void *counter_main(void *arg)
{
	struct counter *c = arg;
	char buf[65536], line[512];
	size_t len = 0;
	ssize_t n;

	while ((n = read(c->rd, buf, sizeof(buf))) > 0) {
		c->bytes += n;
		for (ssize_t i = 0; i < n; i++) {
			bool hit;

			if (len < sizeof(line) - 1)
				line[len++] = buf[i];
			if (buf[i] != '\n')
				continue;
			line[len] = '\0';
			c->lines++;
			hit = strstr(line, c->match) != NULL;
			if (hit)
				c->matched++;
			/* the test's own messages, and the first few hits */
			if (c->pass_fd >= 0 && (!hit || c->matched <= PASS_ON))
				(void)!write(c->pass_fd, line, len);
			len = 0;
		}
	}
	return NULL;
}

static void counter_start(struct counter *c, int rd, int pass_fd,
			  const char *match)
{
	c->rd = rd;
	c->pass_fd = pass_fd;
	c->bytes = c->lines = c->matched = 0;
	snprintf(c->match, sizeof(c->match), "%s", match);
	assert_int_equal(pthread_create(&c->thread, NULL, counter_main, c), 0);
	c->on = true;
}

/* Once the pipe's writers are gone. */
static void counter_join(struct counter *c)
{
	pthread_join(c->thread, NULL);
	close(c->rd);
	c->on = false;
}

static struct counter cap;
static int cap_saved = -1;

void hd_capture_start(const char *match)
{
	int p[2];

	fflush(stderr);
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	cap_saved = dup(STDERR_FILENO);
	assert_true(cap_saved >= 0);
	assert_true(dup2(p[1], STDERR_FILENO) >= 0);
	close(p[1]);
	counter_start(&cap, p[0], cap_saved, match);
}

long hd_capture_stop(long *lines, long *matched)
{
	if (!cap.on)
		return 0;
	fflush(stderr);
	dup2(cap_saved, STDERR_FILENO); /* the pipe's last writer goes */
	close(cap_saved);
	counter_join(&cap);
	if (lines)
		*lines = cap.lines;
	if (matched)
		*matched = cap.matched;
	return cap.bytes;
}

int hd_teardown(void **state)
{
	(void)state;
	hd_capture_stop(NULL, NULL);
	if (saved_nofile >= 0)
		hd_set_nofile(saved_nofile);
	saved_nofile = -1;
	return 0;
}

/* ---- a process that holds connections ---- */

/* Each holder's pipes: ctl (a byte: go; closed: stop) and ready (the
 * count of connections made). */
static struct {
	pid_t pid;
	int ctl, ready;
} holders[8];

/* A connection to 127.0.0.1:@p port from @p src (NULL: any); the fd or
 * -1. No cmocka (the holder's child calls it). */
static int connect_from(const char *src, uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int fd;

	if (!src)
		return th_connect_try(port);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	inet_pton(AF_INET, src, &sa.sin_addr);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)))
		goto err;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons(port);
	if (!connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
		return fd;
err:
	if (fd >= 0)
		close(fd);
	return -1;
}

pid_t hd_holder_new(uint16_t port, int n, const void *first,
		    size_t first_len)
{
	return hd_holder_new_from(NULL, port, n, first, first_len);
}

pid_t hd_holder_new_from(const char *src, uint16_t port, int n,
			 const void *first, size_t first_len)
{
	int ready[2], ctl[2], count = 0, slot;
	pid_t pid;

	for (slot = 0; slot < 8 && holders[slot].pid; slot++)
		;
	assert_true(slot < 8);
	assert_int_equal(pipe(ready), 0);
	assert_int_equal(pipe(ctl), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rlimit rl = { 65536, 65536 };
		int null = open("/dev/null", O_WRONLY);
		char c;

		prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed test leaves none */
		dup2(null, STDOUT_FILENO);
		dup2(null, STDERR_FILENO);
		close(ready[0]);
		close(ctl[1]);
		for (int i = 0; i < 8; i++) /* only the parent may stop it */
			if (holders[i].pid) {
				close(holders[i].ctl);
				close(holders[i].ready);
			}
		(void)setrlimit(RLIMIT_NOFILE, &rl);
		if (read(ctl[0], &c, 1) != 1)
			_exit(1);
		for (int i = 0; i < n; i++) {
			int fd = connect_from(src, port);

			if (fd < 0)
				continue;
			count++;
			if (first_len)
				(void)!send(fd, first, first_len, MSG_NOSIGNAL);
		}
		(void)!write(ready[1], &count, sizeof(count));
		(void)!read(ctl[0], &c, 1); /* until the parent closes it */
		_exit(0);
	}
	close(ready[1]);
	close(ctl[0]);
	holders[slot].pid = pid;
	holders[slot].ctl = ctl[1];
	holders[slot].ready = ready[0];
	return pid;
}

int hd_holder_go(pid_t pid)
{
	int count = -1;

	for (int i = 0; i < 8; i++)
		if (holders[i].pid == pid) {
			assert_int_equal(write(holders[i].ctl, "g", 1), 1);
			assert_int_equal(read(holders[i].ready, &count,
					      sizeof(count)), sizeof(count));
		}
	return count;
}

pid_t hd_holder_start(uint16_t port, int n, const void *first,
		      size_t first_len, int *made)
{
	pid_t pid = hd_holder_new(port, n, first, first_len);
	int count = hd_holder_go(pid);

	if (made)
		*made = count;
	return pid;
}

void hd_holder_stop(pid_t pid)
{
	for (int i = 0; i < 8; i++)
		if (holders[i].pid == pid) {
			close(holders[i].ctl); /* its read() returns: it exits */
			close(holders[i].ready);
			holders[i].pid = 0;
		}
	assert_true(th_wait_exit(pid, 5000) >= 0);
}

/* ---- xfer-metad ---- */

static char metad_dir[64];
static struct counter metad_err;

static const char *metad_path(void)
{
	static char path[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 16);

	assert_true(n > 0);
	path[n] = '\0';
	for (int i = 0; i < 2; i++)
		*strrchr(path, '/') = '\0';
	strcat(path, "/xfer-metad");
	return path;
}

pid_t hd_metad_start(long nofile, const char *match, uint16_t *port)
{
	char port_file[128], buf[16] = "";
	const char *prog = metad_path();
	int p[2] = { -1, -1 };
	int64_t end;
	pid_t pid;

	snprintf(metad_dir, sizeof(metad_dir), "/tmp/it_harden.XXXXXX");
	assert_non_null(mkdtemp(metad_dir));
	snprintf(port_file, sizeof(port_file), "%s/port", metad_dir);
	if (match)
		assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rlimit rl;
		int null = open("/dev/null", O_WRONLY);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (null >= 0)
			dup2(null, STDOUT_FILENO);
		if (p[1] >= 0)
			dup2(p[1], STDERR_FILENO);
		if (nofile && !getrlimit(RLIMIT_NOFILE, &rl)) {
			rl.rlim_cur = (rlim_t)nofile;
			(void)setrlimit(RLIMIT_NOFILE, &rl);
		}
		execl(prog, prog, "--port", "0", "--port-file", port_file,
		      (char *)NULL);
		_exit(127);
	}
	if (match) {
		close(p[1]);
		counter_start(&metad_err, p[0], -1, match);
	}
	end = th_now_ms() + 5000;
	for (;;) {
		FILE *f = fopen(port_file, "r");

		if (f) {
			size_t n = fread(buf, 1, sizeof(buf) - 1, f);

			fclose(f);
			buf[n] = '\0';
			if (n > 0)
				break;
		}
		assert_true(th_now_ms() < end);
		usleep(10000);
	}
	*port = (uint16_t)atoi(buf);
	assert_true(*port != 0);
	return pid;
}

long hd_metad_lines(long *bytes)
{
	if (bytes)
		*bytes = metad_err.bytes;
	return metad_err.matched;
}

void hd_metad_stop(pid_t pid)
{
	char path[128];

	kill(pid, SIGTERM);
	assert_true(th_wait_exit(pid, 5000) >= 0);
	if (metad_err.on)
		counter_join(&metad_err);
	snprintf(path, sizeof(path), "%s/port", metad_dir);
	unlink(path);
	rmdir(metad_dir);
}

/* ---- a raw client that knows the protocol ---- */

int hd_raw_auth(int fd, const char *secret, bool framed)
{
	struct xfer_auth *a = xfer_auth_new(secret);
	struct xfer_auth_session s;
	uint8_t hello[XFER_AUTH_HELLO_LEN], ch[XFER_AUTH_CHALLENGE_LEN];
	uint8_t proof[XFER_AUTH_PROOF_LEN];
	char *body = NULL;
	size_t len;
	int ret;

	assert_non_null(a);
	assert_int_equal(xfer_auth_hello(&s, hello), 0);
	if (framed) {
		ret = th_hs_send(fd, XFER_HS_AUTH, hello, sizeof(hello));
		if (!ret)
			ret = th_hs_recv(fd, &body, &len, 3000);
		if (!ret && (len != 1 + sizeof(ch) || (uint8_t)body[0] != XFER_HS_AUTH))
			ret = -EPROTO;
		if (!ret)
			memcpy(ch, body + 1, sizeof(ch));
		free(body);
	} else {
		ret = th_send_all(fd, hello, sizeof(hello));
		if (!ret && th_recv_all(fd, ch, sizeof(ch), 3000) != sizeof(ch))
			ret = -EPROTO;
	}
	if (!ret)
		ret = xfer_auth_prove(a, &s, ch, proof);
	if (!ret)
		ret = framed ? th_hs_send(fd, XFER_HS_AUTH, proof, sizeof(proof))
			     : th_send_all(fd, proof, sizeof(proof));
	xfer_auth_free(a);
	return ret;
}

/* ---- the good transfer ---- */

void hd_good_transfer(const char *name, uint64_t addr, const uint8_t *mem,
		      const char *const *kv)
{
	enum { LEN = (64 << 10) + 1 };
	static uint64_t seed = 5000;
	struct xfer_engine *i = hd_engine(1, kv);
	uint8_t *ib = th_alloc(2 * LEN);
	uint64_t tr = 0;
	int64_t seg;

	seed++;
	th_fill(ib, LEN, seed);
	memset(ib + LEN, 0, LEN);
	assert_int_equal(xfer_register(i, ib, 2 * LEN, "cpu:0", true), 0);
	seg = xfer_segment_open(i, name);
	if (seg < 0)
		fail_msg("open %s: %lld (%s)", name, (long long)seg,
			 xfer_engine_last_error(i));
	th_assert_status(th_xfer1(i, XFER_WRITE, ib, seg, addr, LEN, &tr),
			 XFER_COMPLETED);
	assert_int_equal(tr, LEN);
	assert_int_equal(th_check(mem, LEN, seed), -1);
	th_assert_status(th_xfer1(i, XFER_READ, ib + LEN, seg, addr, LEN, &tr),
			 XFER_COMPLETED);
	assert_int_equal(th_check(ib + LEN, LEN, seed), -1);
	assert_int_equal(xfer_segment_close(i, seg), 0);
	assert_int_equal(xfer_unregister(i, ib), 0);
	xfer_engine_free(i);
	free(ib);
}

bool hd_probe_ok(uint16_t port, int ms)
{
	int64_t end = th_now_ms() + ms;

	do {
		int fd = th_connect_try(port);
		char *body = NULL;
		size_t len;
		bool ok;

		if (fd < 0) {
			usleep(20000);
			continue;
		}
		ok = th_hs_send(fd, 3, "{}\n", 3) == 0 &&
		     th_hs_recv(fd, &body, &len, 1000) == 0 && len > 1 &&
		     strstr(body + 1, "success");
		free(body);
		close(fd);
		if (ok)
			return true;
		usleep(20000);
	} while (th_now_ms() < end);
	return false;
}

void hd_scratch_file(char *path, size_t size, uint64_t len)
{
	char dir[64];
	int fd;

	snprintf(dir, sizeof(dir), "/var/tmp/xfer-harden.XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(path, size, "%s/segment", dir);
	fd = open(path, O_CREAT | O_RDWR, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)len), 0);
	close(fd);
}

void hd_scratch_rm(const char *path)
{
	char dir[PATH_MAX];

	snprintf(dir, sizeof(dir), "%s", path);
	unlink(path);
	*strrchr(dir, '/') = '\0';
	rmdir(dir);
}

bool hd_peer_closed(int fd)
{
	char buf[4096];

	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);

		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return true;
		if (n < 0)
			return false;
	}
}
