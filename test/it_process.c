/*
 * Two processes: a forked child is the target engine, the parent opens its
 * segment by name, READs the child's pattern and WRITEs its own, and the
 * child checks what arrived in its memory.
 *
 * Child buffer layout (both sides know it):
 *   [0, GAP)                      FILL
 *   [GAP, GAP+size)               R: seed 7, READ by the parent
 *   [GAP+size, 2*GAP+size)        FILL
 *   [2*GAP+size, 2*GAP+2*size)    W: FILL, WRITTEN by the parent (seed 9)
 *   [2*GAP+2*size, 3*GAP+2*size)  FILL
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test/helpers.h"

#define GAP 4099u
#define FILL 0xC3
#define SEED_CHILD 7
#define SEED_PARENT 9

enum child_exit {
	CHILD_OK = 0,
	CHILD_BAD_DATA = 1,
	CHILD_NO_ENGINE = 2,
	CHILD_NO_MEMORY = 3,
	CHILD_NO_GO = 4,
	CHILD_PIPE = 5,
};

static pid_t child_pid = -1;

static size_t total_len(size_t size)
{
	return 3 * GAP + 2 * size;
}

/* The child: plain calls only (no cmocka), the verdict is the exit code. */
static void __attribute__((noreturn))
child_main(size_t size, int namefd, int gofd)
{
	size_t total = total_len(size);
	size_t r = GAP, w = 2 * GAP + size;
	struct xfer_engine *e = th_engine_try(1);
	struct pollfd pfd = { .fd = gofd, .events = POLLIN };
	const char *name;
	uint8_t *buf = NULL, *p;
	char go;
	int rc = CHILD_OK;

	if (!e)
		_exit(CHILD_NO_ENGINE);
	if (posix_memalign((void **)&buf, 4096, total) != 0)
		_exit(CHILD_NO_MEMORY);
	memset(buf, FILL, total);
	th_fill(buf + r, size, SEED_CHILD);
	if (xfer_register(e, buf, total, "cpu:0", true) != 0)
		_exit(CHILD_NO_MEMORY);

	name = xfer_engine_name(e);
	if (write(namefd, name, strlen(name)) != (ssize_t)strlen(name) ||
	    write(namefd, "\n", 1) != 1)
		_exit(CHILD_PIPE);
	close(namefd);

	/* the parent says when it is done; give up after a minute */
	if (poll(&pfd, 1, 60000) != 1 || read(gofd, &go, 1) != 1)
		_exit(CHILD_NO_GO);

	p = buf;
	if (th_check_byte(p, r, FILL) != -1 ||
	    th_check(p + r, size, SEED_CHILD) != -1 ||
	    th_check_byte(p + r + size, GAP, FILL) != -1 ||
	    th_check(p + w, size, SEED_PARENT) != -1 ||
	    th_check_byte(p + w + size, GAP, FILL) != -1)
		rc = CHILD_BAD_DATA;
	if (th_unregister(e, buf) != 0)
		rc = CHILD_BAD_DATA;
	xfer_engine_free(e);
	free(buf);
	_exit(rc);
}

/* Read the child's segment name (one line) within 10 s. */
static void read_name(int fd, char *name, size_t cap)
{
	size_t n = 0;
	int64_t end = th_now_ms() + 10000;

	while (n + 1 < cap) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int64_t left = end - th_now_ms();
		ssize_t got;

		assert_true(left > 0);
		assert_true(poll(&pfd, 1, (int)left) == 1);
		got = read(fd, name + n, 1);
		if (got != 1)
			fail_msg("the child closed the name pipe (exit early?)");
		if (name[n] == '\n')
			break;
		n++;
	}
	assert_true(n + 1 < cap);
	name[n] = '\0';
}

static int teardown(void **state)
{
	(void)state;
	if (child_pid > 0) {
		kill(child_pid, SIGKILL);
		waitpid(child_pid, NULL, 0);
		child_pid = -1;
	}
	return 0;
}

static void run_pair(size_t size)
{
	size_t total = total_len(size);
	int namep[2], gop[2];
	char name[256];
	struct xfer_engine *e;
	uint8_t *lbuf;
	uint64_t raddr, rlen, tr = 0;
	int64_t seg;
	int status;

	assert_int_equal(pipe(namep), 0);
	assert_int_equal(pipe(gop), 0);
	child_pid = fork();
	assert_true(child_pid >= 0);
	if (child_pid == 0) {
		close(namep[0]);
		close(gop[1]);
		child_main(size, namep[1], gop[0]);
	}
	close(namep[1]);
	close(gop[0]);

	read_name(namep[0], name, sizeof(name));
	close(namep[0]);

	e = th_engine(1);
	lbuf = th_alloc(size + 2 * GAP);
	memset(lbuf, FILL, size + 2 * GAP);
	assert_int_equal(xfer_register(e, lbuf, size + 2 * GAP, "cpu:0", true),
			 0);
	seg = xfer_segment_open(e, name);
	assert_true(seg >= 0);
	assert_int_equal(xfer_segment_buffer(e, seg, 0, &raddr, &rlen, NULL), 0);
	assert_int_equal(rlen, total);

	/* READ the child's pattern */
	th_assert_status(th_xfer1(e, XFER_READ, lbuf + GAP, seg, raddr + GAP,
				  size, &tr), XFER_COMPLETED);
	assert_int_equal(tr, size);
	assert_int_equal(th_check(lbuf + GAP, size, SEED_CHILD), -1);
	assert_int_equal(th_check_byte(lbuf, GAP, FILL), -1);
	assert_int_equal(th_check_byte(lbuf + GAP + size, GAP, FILL), -1);

	/* WRITE ours into W */
	th_fill(lbuf + GAP, size, SEED_PARENT);
	th_assert_status(th_xfer1(e, XFER_WRITE, lbuf + GAP, seg,
				  raddr + 2 * GAP + size, size, &tr),
			 XFER_COMPLETED);
	assert_int_equal(tr, size);

	assert_int_equal(write(gop[1], "g", 1), 1);
	close(gop[1]);
	status = th_wait_exit(child_pid, 10000);
	assert_true(status >= 0);
	child_pid = -1;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != CHILD_OK)
		fail_msg("child: %s %d", WIFEXITED(status) ? "exit" : "signal",
			 WIFEXITED(status) ? WEXITSTATUS(status) :
			 WTERMSIG(status));

	/* the peer is gone: a transfer to it fails, in bounded time */
	{
		struct xfer_request rq = { XFER_READ, lbuf + GAP, seg,
					   raddr + GAP, size };
		struct xfer_task_status st;
		struct xfer_batch *b = xfer_batch_new(e, 1);

		assert_non_null(b);
		assert_int_equal(xfer_batch_submit(b, &rq, 1), 0);
		assert_int_equal(xfer_batch_wait(b, 10000), 0);
		assert_int_equal(xfer_batch_status(b, 0, &st), 0);
		th_assert_status(st.status, XFER_FAILED);
		assert_int_equal(xfer_batch_free(b), 0);
	}

	assert_int_equal(xfer_segment_close(e, seg), 0);
	assert_int_equal(xfer_unregister(e, lbuf), 0);
	xfer_engine_free(e);
	free(lbuf);
}

static void test_process_1B(void **state)
{
	(void)state;
	run_pair(1);
}

static void test_process_4KiB(void **state)
{
	(void)state;
	run_pair(4096);
}

static void test_process_64KiB_plus_1(void **state)
{
	(void)state;
	run_pair((64u << 10) + 1);
}

static void test_process_16MiB(void **state)
{
	(void)state;
	run_pair(16u << 20);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_process_1B, teardown),
		cmocka_unit_test_teardown(test_process_4KiB, teardown),
		cmocka_unit_test_teardown(test_process_64KiB_plus_1, teardown),
		cmocka_unit_test_teardown(test_process_16MiB, teardown),
	};

	return cmocka_run_group_tests_name("process", tests, NULL, NULL);
}
