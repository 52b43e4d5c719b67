/* What the store's tests share (th_store.h). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <xfer/store.h>

#include "store/proto_internal.h"
#include "test/helpers.h"
#include "test/th_store.h"

pid_t th_stored_start(const char *const *args, uint16_t port,
		      uint16_t *out_port)
{
	char portflag[32];
	/* --metrics_port=0: the admin port is any free one, not 9003 */
	const char *argv[24] = { th_stored_path(), portflag,
				 "--rpc_address=127.0.0.1", "--metrics_port=0" };
	int n = 4, fd, status;
	pid_t pid;

	if (!port)
		port = th_free_port();
	snprintf(portflag, sizeof(portflag), "--port=%u", port);
	for (; args && *args && n < 23; args++)
		argv[n++] = *args;
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		int null = open("/dev/null", O_WRONLY);

		dup2(null, 1);
		dup2(null, 2);
		execv(argv[0], (char **)argv);
		_exit(127);
	}
	for (int i = 0; i < 1000; i++) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			fail_msg("xfer-stored exited: status %d", status);
		fd = th_connect_try(port);
		if (fd >= 0) {
			close(fd);
			*out_port = port;
			return pid;
		}
		usleep(10000);
	}
	th_kill(pid);
	fail_msg("xfer-stored did not serve");
	return -1;
}

void th_stored_stop(pid_t pid)
{
	if (!pid)
		return;
	kill(pid, SIGTERM);
	assert_int_equal(th_wait_exit(pid, 5000), 0); /* exit 0, no crash */
}

void th_kill(pid_t pid)
{
	if (pid <= 0)
		return;
	kill(pid, SIGKILL);
	th_wait_exit(pid, 5000);
}

void th_spawn(struct th_proc *p, int (*fn)(int in, int out, void *arg),
	      void *arg)
{
	int down[2], up[2];

	assert_int_equal(pipe(down), 0);
	assert_int_equal(pipe(up), 0);
	p->pid = fork();
	assert_true(p->pid >= 0);
	if (!p->pid) {
		/* a crash is the child's, not a test of cmocka's to go on */
		signal(SIGSEGV, SIG_DFL);
		signal(SIGBUS, SIG_DFL);
		signal(SIGILL, SIG_DFL);
		signal(SIGFPE, SIG_DFL);
		signal(SIGABRT, SIG_DFL);
		close(down[1]);
		close(up[0]);
		_exit(fn(down[0], up[1], arg));
	}
	close(down[0]);
	close(up[1]);
	p->to = down[1];
	p->from = up[0];
}

int th_line_send(int fd, const char *s)
{
	size_t len = strlen(s);

	if (write(fd, s, len) != (ssize_t)len || write(fd, "\n", 1) != 1)
		return -1;
	return 0;
}

int th_line_recv(int fd, char *buf, size_t cap, int timeout_ms)
{
	int64_t end = th_now_ms() + timeout_ms;
	size_t n = 0;

	while (n < cap) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int left = (int)(end - th_now_ms());

		if (left <= 0 || poll(&pfd, 1, left) <= 0 ||
		    read(fd, buf + n, 1) != 1)
			return -1;
		if (buf[n] == '\n') {
			buf[n] = 0;
			return (int)n;
		}
		n++;
	}
	return -1;
}

void th_proc_kill(struct th_proc *p)
{
	th_kill(p->pid);
	close(p->to);
	close(p->from);
	p->pid = 0;
}

int th_proc_exit(struct th_proc *p, int timeout_ms)
{
	int status = th_wait_exit(p->pid, timeout_ms);

	close(p->to);
	close(p->from);
	if (status < 0) {
		th_kill(p->pid);
		return -1;
	}
	p->pid = 0;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* ---- clients of the store ---- */

struct th_master th_master;

void th_master_start(const char *const *args)
{
	th_master.pid = th_stored_start(args, 0, &th_master.port);
	snprintf(th_master.addr, sizeof(th_master.addr), "127.0.0.1:%u",
		 th_master.port);
}

uint64_t th_seed(const char *key, uint64_t variant)
{
	uint64_t h = 0xcbf29ce484222325ull ^ variant;

	while (*key)
		h = (h ^ (uint8_t)*key++) * 0x100000001b3ull;
	return h;
}

struct xfer_kv *th_kv_try(uint64_t seg, uint64_t stage)
{
	struct xfer_config *cfg = xfer_config_new();
	struct xfer_kv *kv = NULL;

	if (cfg && !xfer_config_set(cfg, "bind_addr", "127.0.0.1") &&
	    !xfer_config_set(cfg, "local_server_name", "127.0.0.1") &&
	    !xfer_config_set(cfg, "workers", "1"))
		kv = xfer_kv_new(NULL, cfg, th_master.addr, seg, stage);
	xfer_config_free(cfg);
	return kv;
}

struct xfer_kv *th_kv(uint64_t seg, uint64_t stage)
{
	struct xfer_kv *kv = th_kv_try(seg, stage);

	if (!kv)
		fail_msg("client: %s", strerror(errno));
	return kv;
}

int64_t th_put_pattern_rc(struct xfer_kv *kv, const char *key, size_t len,
			  uint64_t v, const struct xfer_kv_replicate *rc,
			  bool z)
{
	uint8_t *buf = malloc(len);
	int64_t ret = -ENOMEM;

	if (!buf)
		return ret;
	th_fill(buf, len, th_seed(key, v));
	if (!z)
		ret = xfer_kv_put(kv, key, buf, len, rc);
	else if (!(ret = xfer_kv_register_buffer(kv, buf, len))) {
		ret = xfer_kv_put_from(kv, key, buf, len, rc);
		xfer_kv_unregister_buffer(kv, buf);
	}
	free(buf);
	return ret;
}

int64_t th_put_pattern(struct xfer_kv *kv, const char *key, size_t len,
		       uint64_t v, unsigned repl, bool z)
{
	struct xfer_kv_replicate rc = { .replica_num = repl };

	return th_put_pattern_rc(kv, key, len, v, &rc, z);
}

int64_t th_get_pattern(struct xfer_kv *kv, const char *key, size_t len,
		       uint64_t v, bool z)
{
	uint8_t *buf = malloc(len);
	int64_t ret = -ENOMEM;

	if (!buf)
		return ret;
	if (!z)
		ret = xfer_kv_get(kv, key, buf, len);
	else if (!(ret = xfer_kv_register_buffer(kv, buf, len))) {
		ret = xfer_kv_get_into(kv, key, buf, len);
		xfer_kv_unregister_buffer(kv, buf);
	}
	if (ret > 0 && th_check(buf, (size_t)ret, th_seed(key, v)) >= 0)
		ret = -9999;
	free(buf);
	return ret;
}

/* Put keys PREFIX0 .. PREFIX(n-1), as two processes racing each other. */
static int64_t race(struct xfer_kv *kv, const char *prefix, int n,
		    size_t len, uint64_t v)
{
	int64_t failed = 0;
	char key[160];

	for (int i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "%s%d", prefix, i);
		failed += th_put_pattern(kv, key, len, v, 1, false) != 0;
	}
	return failed;
}

/* Upsert @p key as variants 1 .. @p n in turn: 0, or the first error. */
static int64_t upserts(struct xfer_kv *kv, const char *key, size_t len,
		       uint64_t n)
{
	struct xfer_kv_replicate rc = { .replica_num = 1 };
	uint8_t *buf = malloc(len);
	int64_t ret = buf ? 0 : -ENOMEM;

	for (uint64_t v = 1; v <= n && !ret; v++) {
		th_fill(buf, len, th_seed(key, v));
		ret = xfer_kv_upsert(kv, key, buf, len, &rc);
	}
	free(buf);
	return ret;
}

/*
 * A client process: says its engine's name, then answers each line
 *   put|putz|get|getz KEY LEN VARIANT [REPLICAS]   (z: zero-copy)
 *   race PREFIX N LEN VARIANT
 *   upsn KEY LEN N                 (upserts of variants 1 .. N)
 * with the call's result, until "q".
 */
static int role_client(int in, int out, void *arg)
{
	const struct th_sizes *sz = arg;
	struct xfer_kv *kv = th_kv_try(sz->seg, sz->stage);
	char line[256], op[8], key[128], res[32];
	unsigned long long len, v;
	unsigned repl;
	int64_t ret;

	if (!kv)
		return 10;
	th_line_send(out, xfer_engine_name(xfer_kv_engine(kv)));
	while (th_line_recv(in, line, sizeof(line), 300000) >= 0 &&
	       strcmp(line, "q")) {
		repl = 1;
		if (sscanf(line, "%7s %127s %llu %llu %u", op, key, &len, &v,
			   &repl) < 4)
			return 11;
		if (!strcmp(op, "upsn"))
			ret = upserts(kv, key, len, v);
		else if (!strcmp(op, "race"))
			ret = race(kv, key, (int)len, (size_t)v, repl);
		else if (op[0] == 'p')
			ret = th_put_pattern(kv, key, len, v, repl,
					     op[3] == 'z');
		else
			ret = th_get_pattern(kv, key, len, v, op[3] == 'z');
		snprintf(res, sizeof(res), "%lld", (long long)ret);
		th_line_send(out, res);
	}
	return xfer_kv_free(kv) ? 12 : 0;
}

void th_kv_proc_start(struct th_proc *p, struct th_sizes *sz, char *name)
{
	th_spawn(p, role_client, sz);
	assert_true(th_line_recv(p->from, name, 64, 30000) > 0);
}

long long th_kv_cmd(struct th_proc *p, const char *fmt, ...)
{
	char line[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	assert_int_equal(th_line_send(p->to, line), 0);
	assert_true(th_line_recv(p->from, line, sizeof(line), 120000) > 0);
	return atoll(line);
}

void th_kv_proc_stop(struct th_proc *p)
{
	th_line_send(p->to, "q");
	assert_int_equal(th_proc_exit(p, 30000), 0);
}

int th_master_teardown(void **state)
{
	(void)state;
	th_kill(th_master.pid);
	th_master.pid = 0;
	return 0;
}

int th_raw_query(const char *key, char names[][64], int32_t *err)
{
	static struct store_msg m, rep;
	static uint8_t body[1 << 16];
	struct store_buf b = { 0 };
	uint8_t hdr[STORE_HDR_LEN];
	int fd = th_connect(th_master.port);

	m.h = (struct store_hdr){ .type = STORE_QUERY, .seq = 1 };
	m.n = 1;
	m.items[0].key = (struct store_str){ key, (uint16_t)strlen(key) };
	assert_int_equal(store_msg_encode(&b, &m), 0);
	assert_int_equal(th_send_all(fd, b.p, b.len), 0);
	store_buf_free(&b);
	assert_int_equal(th_recv_all(fd, hdr, sizeof(hdr), 5000), sizeof(hdr));
	assert_int_equal(store_hdr_decode(hdr, &rep.h), 0);
	assert_int_equal(th_recv_all(fd, body, rep.h.len, 5000), rep.h.len);
	assert_int_equal(store_msg_decode(body, &rep), 0);
	close(fd);
	*err = rep.items[0].err;
	for (unsigned i = 0; i < rep.items[0].nrep; i++)
		snprintf(names[i], 64, "%.*s", rep.items[0].rep[i].endpoint.len,
			 rep.items[0].rep[i].endpoint.p);
	return rep.items[0].nrep;
}
