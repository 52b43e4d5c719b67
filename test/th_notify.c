/* The notification tests' shared part (th_notify.h): the peer process. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test/helpers.h"
#include "test/th_notify.h"

#define PEER_COLLECT 'R'
#define PEER_QUIT 'Q'
#define CMD_LEN 9                      /* cmd, u32 want, u32 timeout_ms */
#define PEER_IDLE_MS 60000             /* no command for this long: exit */

/* ---- the child: plain calls only, no cmocka ---- */

static struct {
	struct xfer_engine *e;
	uint8_t *buf;
	int64_t self;                  /* its own segment */
	int fd;
	bool cb;                       /* notifications come to a callback */
	pthread_mutex_t lock;          /* guards what follows */
	struct peer_note *notes;
	size_t n, cap;
	size_t hold;                   /* 1 asked, 2 holding, 3 let go */
} C = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void __attribute__((noreturn)) child_fail(const char *what)
{
	fprintf(stderr, "notify peer: %s: %s\n", what, strerror(errno));
	_exit(2);
}

static long check_msg(const char *msg)
{
	unsigned long long seed, off, len;

	if (sscanf(msg, "check %llu %llu %llu", &seed, &off, &len) != 3)
		return -1;
	if (off > PEER_BUF || len > PEER_BUF - off)
		return -2;
	return th_check(C.buf + off, len, seed);
}

static void note_add(const char *name, const char *msg, bool on_base)
{
	struct peer_note n = { strdup(name), strdup(msg), on_base,
			       check_msg(msg) };

	pthread_mutex_lock(&C.lock);
	if (C.n == C.cap) {
		C.cap = C.cap ? 2 * C.cap : 64;
		C.notes = realloc(C.notes, C.cap * sizeof(*C.notes));
	}
	if (!C.notes || !n.name || !n.msg)
		child_fail("note");
	C.notes[C.n++] = n;
	pthread_mutex_unlock(&C.lock);
}

static void on_note(struct xfer_engine *e, const char *name, const char *msg,
		    void *arg)
{
	(void)arg;
	note_add(name, msg, xfer_notify(e, C.self, "probe", "") == -EDEADLK);
}

/* Poll, 1 ms apart, until *@v (read under the lock) reaches @want;
 * without a callback, drain the engine's queue into the notes each time. */
static bool child_wait(size_t *v, size_t want, int timeout_ms)
{
	int64_t end = th_now_ms() + timeout_ms;
	struct timespec ms = { 0, 1000000 };
	bool ok;

	for (;;) {
		if (!C.cb) {
			char *name, *msg;

			while (xfer_engine_notify_pop(C.e, &name, &msg) == 0) {
				note_add(name, msg, false);
				free(name);
				free(msg);
			}
		}
		pthread_mutex_lock(&C.lock);
		ok = *v >= want;
		pthread_mutex_unlock(&C.lock);
		if (ok || th_now_ms() >= end)
			return ok;
		nanosleep(&ms, NULL);
	}
}

/* A callback on the control thread that blocks it until PEER_GO. */
static void hold_cb(struct xfer_engine *e, int64_t id, void *arg)
{
	struct timespec ms = { 0, 1000000 };

	(void)e;
	(void)id;
	(void)arg;
	pthread_mutex_lock(&C.lock);
	C.hold = 2;
	while (C.hold != 3) {
		pthread_mutex_unlock(&C.lock);
		nanosleep(&ms, NULL);
		pthread_mutex_lock(&C.lock);
	}
	C.hold = 0;
	pthread_mutex_unlock(&C.lock);
}

static void send_or_fail(const void *p, size_t len)
{
	int ret = th_send_all(C.fd, p, len);

	if (ret) {
		errno = -ret;
		child_fail("send");
	}
}

/* Send every note held: u32 count, then each as u32 name length, name,
 * u32 message length, message, u8 on_base, i64 bad. */
static void send_notes(void)
{
	uint32_t count, len;
	uint8_t on_base;
	int64_t bad;

	pthread_mutex_lock(&C.lock);
	count = (uint32_t)C.n;
	send_or_fail(&count, sizeof(count));
	for (size_t i = 0; i < C.n; i++) {
		struct peer_note *n = &C.notes[i];

		len = (uint32_t)strlen(n->name);
		send_or_fail(&len, sizeof(len));
		send_or_fail(n->name, len);
		len = (uint32_t)strlen(n->msg);
		send_or_fail(&len, sizeof(len));
		send_or_fail(n->msg, len);
		on_base = n->on_base;
		bad = n->bad;
		send_or_fail(&on_base, 1);
		send_or_fail(&bad, sizeof(bad));
	}
	peer_notes_free(C.notes, C.n);
	C.notes = NULL;
	C.n = C.cap = 0;
	pthread_mutex_unlock(&C.lock);
}

static int32_t child_cmd(char cmd)
{
	switch (cmd) {
	case PEER_CALLBACK:
		C.cb = true;
		return xfer_engine_set_notify_cb(C.e, on_note, NULL);
	case PEER_HOLD:
		pthread_mutex_lock(&C.lock);
		C.hold = 1;
		pthread_mutex_unlock(&C.lock);
		if (xfer_segment_open_async(C.e, xfer_engine_name(C.e),
					    hold_cb, NULL))
			return -EIO;
		return child_wait(&C.hold, 2, 5000) ? 0 : -ETIMEDOUT;
	case PEER_GO:
		pthread_mutex_lock(&C.lock);
		C.hold = 3;
		pthread_mutex_unlock(&C.lock);
		return 0;
	default:
		return -EINVAL;
	}
}

static void __attribute__((noreturn)) child_main(int fd)
{
	const char *name;
	uint8_t cmd[CMD_LEN];
	uint32_t want, timeout_ms, len;
	int32_t ret;

	C.fd = fd;
	C.e = th_engine_try(1);
	if (!C.e)
		child_fail("engine");
	if (posix_memalign((void **)&C.buf, 4096, PEER_BUF))
		child_fail("memory");
	memset(C.buf, PEER_FILL, PEER_BUF);
	if (xfer_register(C.e, C.buf, PEER_BUF, "cpu:0", true))
		child_fail("register");
	name = xfer_engine_name(C.e);
	C.self = xfer_segment_open(C.e, name);
	if (C.self < 0)
		child_fail("own segment");
	len = (uint32_t)strlen(name);
	send_or_fail(&len, sizeof(len));
	send_or_fail(name, len);

	while (th_recv_all(fd, cmd, CMD_LEN, PEER_IDLE_MS) == CMD_LEN) {
		memcpy(&want, cmd + 1, 4);
		memcpy(&timeout_ms, cmd + 5, 4);
		if (cmd[0] == PEER_QUIT)
			break;
		if (cmd[0] == PEER_COLLECT) {
			child_wait(&C.n, want, (int)timeout_ms);
			send_notes();
			continue;
		}
		ret = child_cmd((char)cmd[0]);
		send_or_fail(&ret, sizeof(ret));
	}
	if (C.hold)
		child_cmd(PEER_GO); /* the engine joins its control thread */
	xfer_engine_free(C.e);
	free(C.buf);
	_exit(0);
}

/* ---- the parent ---- */

#define REPLY_MS 15000 /* beyond a command's own timeout */

static void recv_or_fail(struct peer *p, void *buf, size_t len)
{
	long n = th_recv_all(p->fd, buf, len, REPLY_MS);

	if (n != (long)len)
		fail_msg("notify peer: %ld of %zu bytes (did it die?)", n, len);
}

static void send_cmd(struct peer *p, char cmd, uint32_t want,
		     uint32_t timeout_ms)
{
	uint8_t b[CMD_LEN] = { (uint8_t)cmd };

	memcpy(b + 1, &want, 4);
	memcpy(b + 5, &timeout_ms, 4);
	assert_int_equal(th_send_all(p->fd, b, sizeof(b)), 0);
}

/* A u32 length, then that many bytes, NUL-ended, malloc'd. */
static char *recv_str(struct peer *p)
{
	uint32_t len;
	char *s;

	recv_or_fail(p, &len, sizeof(len));
	assert_true(len <= (16u << 20));
	s = malloc(len + 1);
	assert_non_null(s);
	if (len)
		recv_or_fail(p, s, len);
	s[len] = '\0';
	return s;
}

void peer_start(struct peer *p)
{
	int sv[2];
	char *name;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	p->pid = fork();
	assert_true(p->pid >= 0);
	if (p->pid == 0) {
		close(sv[0]);
		child_main(sv[1]);
	}
	close(sv[1]);
	p->fd = sv[0];
	name = recv_str(p);
	assert_true(strlen(name) < sizeof(p->name));
	strcpy(p->name, name);
	free(name);
}

int peer_cmd(struct peer *p, char cmd)
{
	int32_t ret;

	send_cmd(p, cmd, 0, 0);
	recv_or_fail(p, &ret, sizeof(ret));
	return ret;
}

size_t peer_collect(struct peer *p, unsigned want, int timeout_ms,
		    struct peer_note **out)
{
	struct peer_note *v;
	uint32_t count;
	uint8_t on_base;
	int64_t bad;

	send_cmd(p, PEER_COLLECT, want, (uint32_t)timeout_ms);
	recv_or_fail(p, &count, sizeof(count));
	v = calloc(count ? count : 1, sizeof(*v));
	assert_non_null(v);
	for (uint32_t i = 0; i < count; i++) {
		v[i].name = recv_str(p);
		v[i].msg = recv_str(p);
		recv_or_fail(p, &on_base, 1);
		recv_or_fail(p, &bad, sizeof(bad));
		v[i].on_base = on_base;
		v[i].bad = (long)bad;
	}
	*out = v;
	return count;
}

void peer_notes_free(struct peer_note *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].name);
		free(v[i].msg);
	}
	free(v);
}

static void reap(struct peer *p, int status)
{
	if (status < 0)
		fail_msg("notify peer %d not reaped: %s", (int)p->pid,
			 strerror(-status));
	p->pid = -1;
	close(p->fd);
	p->fd = -1;
}

void peer_stop(struct peer *p)
{
	int status;

	send_cmd(p, PEER_QUIT, 0, 0);
	status = th_wait_exit(p->pid, 10000);
	reap(p, status);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("notify peer: status 0x%x", status);
}

void peer_kill(struct peer *p)
{
	assert_int_equal(kill(p->pid, SIGKILL), 0);
	reap(p, th_wait_exit(p->pid, 10000));
}
