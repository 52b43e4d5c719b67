/* What the xfer-stored tests share (th_store.h). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test/helpers.h"
#include "test/th_master.h"

struct store_msg *st_req, *st_rep;
pid_t st_pid;
uint16_t st_port, st_metrics_port;
static uint32_t seq;
static uint8_t body[STORE_FRAME_MAX];

int st_setup(void **state)
{
	(void)state;
	st_req = calloc(1, sizeof(*st_req));
	st_rep = calloc(1, sizeof(*st_rep));
	return !st_req || !st_rep;
}

int st_teardown(void **state)
{
	(void)state;
	if (st_pid)
		st_kill();
	free(st_req);
	free(st_rep);
	return 0;
}

int st_start(uint16_t port, const char *const *args)
{
	char portflag[32], metricsflag[32];
	const char *argv[48] = { th_stored_path(), portflag,
				 "--rpc_address=127.0.0.1", metricsflag,
				 "--metrics_host=127.0.0.1" };
	int n = 5, fd, status;

	if (st_pid)
		st_kill();
	st_port = port ? port : th_free_port();
	st_metrics_port = th_free_port();
	memset(st_req, 0, sizeof(*st_req));
	snprintf(portflag, sizeof(portflag), "--port=%u", st_port);
	snprintf(metricsflag, sizeof(metricsflag), "--metrics_port=%u",
		 st_metrics_port);
	for (; args && *args && n < 31; args++)  /* room for a wrap */
		argv[n++] = *args;
	st_pid = fork();
	assert_true(st_pid >= 0);
	if (!st_pid) {
		const char *log = getenv("XFER_TEST_STORED_LOG");
		char *wrap = getenv("XFER_TEST_WRAP"), *w[16];
		int null = open("/dev/null", O_WRONLY), k = 0;

		dup2(null, 1);
		if (log)   /* to see what a failing test's master said */
			null = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
		dup2(null, 2);
		/* e.g. "valgrind -q --error-exitcode=9" in front */
		for (char *t = wrap ? strtok(wrap, " ") : NULL; t && k < 15;
		     t = strtok(NULL, " "))
			w[k++] = t;
		if (k) {
			memmove(argv + k, argv, (size_t)n * sizeof(*argv));
			memcpy(argv, w, (size_t)k * sizeof(*w));
			argv[n + k] = NULL;
			execvp(argv[0], (char **)argv);
		}
		execv(argv[0], (char **)argv);
		_exit(127);
	}
	for (int i = 0; i < 3000; i++) {
		if (waitpid(st_pid, &status, WNOHANG) == st_pid) {
			st_pid = 0;
			return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
		}
		fd = th_connect_try(st_port);
		if (fd >= 0) {
			close(fd);
			return 0;
		}
		usleep(10000);
	}
	fail_msg("xfer-stored did not serve");
	return -1;
}

int st_http_get(uint16_t port, const char *path, char **body, size_t *len)
{
	char *buf = NULL, *p;
	size_t cap = 0, n = 0;
	int fd = th_connect_try(port), status = -1;
	int64_t t0 = th_now_ms();

	if (fd < 0)
		return -1;
	dprintf(fd, "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
	for (;;) {
		long got;

		if (n + 65536 + 1 > cap) {
			cap = 2 * (n + 65536 + 1);
			buf = realloc(buf, cap);
			assert_non_null(buf);
		}
		got = th_recv_all(fd, buf + n, 1, 10000);
		if (got <= 0 || th_now_ms() - t0 > 10000)
			break;
		n += (size_t)got;
		got = recv(fd, buf + n, cap - n - 1, MSG_DONTWAIT);
		if (got > 0)
			n += (size_t)got;
	}
	close(fd);
	if (!buf)
		return -1;
	buf[n] = 0;
	p = strstr(buf, "\r\n\r\n");
	if (p && sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
		status = -1;
	if (p && body) {
		p += 4;
		if (len)
			*len = n - (size_t)(p - buf);
		memmove(buf, p, n - (size_t)(p - buf) + 1);
		*body = buf;
		return status;
	}
	free(buf);
	return status;
}

void st_stop(void)
{
	if (!st_pid)
		return;
	kill(st_pid, SIGTERM);
	assert_int_equal(th_wait_exit(st_pid, 5000), 0); /* exit 0 */
	st_pid = 0;
}

void st_kill(void)
{
	kill(st_pid, SIGKILL);
	th_wait_exit(st_pid, 5000);
	st_pid = 0;
}

int st_recv(int fd)
{
	uint8_t hdr[STORE_HDR_LEN];

	if (th_recv_all(fd, hdr, sizeof(hdr), 5000) != sizeof(hdr) ||
	    store_hdr_decode(hdr, &st_rep->h) ||
	    th_recv_all(fd, body, st_rep->h.len, 5000) !=
	    (long)st_rep->h.len || store_msg_decode(body, st_rep))
		return -1;
	return 0;
}

struct store_msg *st_call(int fd, unsigned type)
{
	struct store_buf b = { 0 };

	st_req->h = (struct store_hdr){ .type = (uint16_t)type, .seq = ++seq };
	assert_int_equal(store_msg_encode(&b, st_req), 0);
	assert_int_equal(th_send_all(fd, b.p, b.len), 0);
	store_buf_free(&b);
	assert_int_equal(st_recv(fd), 0);
	assert_int_equal(st_rep->h.type, type);
	assert_int_equal(st_rep->h.flags, STORE_F_REPLY);
	assert_int_equal(st_rep->h.seq, seq);
	return st_rep;
}

struct store_str st_str(const char *s)
{
	return (struct store_str){ s, (uint16_t)strlen(s) };
}

int st_mount(int fd, const uint8_t *client, uint8_t segid, const char *name,
	     uint64_t base, uint64_t size)
{
	memcpy(st_req->client, client, STORE_ID_LEN);
	memset(st_req->segment, segid, STORE_ID_LEN);
	st_req->name = st_str(name);
	st_req->base = base;
	st_req->size = size;
	return st_call(fd, STORE_MOUNT)->err;
}

int st_unmount(int fd, const uint8_t *client, uint8_t segid)
{
	memcpy(st_req->client, client, STORE_ID_LEN);
	memset(st_req->segment, segid, STORE_ID_LEN);
	return st_call(fd, STORE_UNMOUNT)->err;
}

int st_one(int fd, unsigned type, const uint8_t *client, const char *key,
	   uint64_t len, uint8_t replicas, bool force)
{
	memcpy(st_req->client, client, STORE_ID_LEN);
	st_req->replicas = replicas;
	st_req->force = force;
	st_req->n = 1;
	st_req->items[0].key = st_str(key);
	st_req->items[0].len = len;
	st_call(fd, type);
	assert_int_equal(st_rep->err, 0);
	assert_int_equal(st_rep->n, 1);
	return st_rep->items[0].err;
}

int st_tier_done(int fd, const uint8_t *client, const char *key,
		 int32_t err)
{
	memcpy(st_req->client, client, STORE_ID_LEN);
	st_req->n = 1;
	st_req->items[0].key = st_str(key);
	st_req->items[0].err = err;
	st_call(fd, STORE_TIER_DONE);
	assert_int_equal(st_rep->n, 1);
	return st_rep->items[0].err;
}

int st_put(int fd, const uint8_t *client, const char *key, uint64_t len)
{
	int ret = st_one(fd, STORE_PUT_START, client, key, len, 1, false);

	return ret ? ret : st_one(fd, STORE_PUT_END, client, key, 0, 0, false);
}

bool st_ping_needs_mount(int fd, const uint8_t *client)
{
	memcpy(st_req->client, client, STORE_ID_LEN);
	st_call(fd, STORE_PING);
	assert_int_equal(st_rep->err, 0);
	return st_rep->flags & 1;
}
