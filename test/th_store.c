/* What the store's tests share (th_store.h). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test/helpers.h"
#include "test/th_store.h"

pid_t th_stored_start(const char *const *args, uint16_t port,
		      uint16_t *out_port)
{
	char portflag[32];
	const char *argv[24] = { th_stored_path(), portflag,
				 "--rpc_address=127.0.0.1" };
	int n = 3, fd, status;
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
