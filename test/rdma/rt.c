/* Helpers of the RDMA tier: RDMA engines, a target process, the control
 * connection between two guests. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "test/helpers.h"
#include "test/rdma/rt.h"

struct xfer_engine *rt_engine(const char *host, uint16_t port, int max_ep)
{
	struct xfer_config *cfg = th_config();
	struct xfer_engine *e;

	th_set(cfg, "protocol", "rdma");
	th_set(cfg, "bind_addr", "0.0.0.0");
	th_set(cfg, "local_server_name", host);
	th_set_num(cfg, "rpc_port", port);
	if (max_ep)
		th_set_num(cfg, "max_ep_per_ctx", max_ep);
	e = xfer_engine_new(cfg);
	xfer_config_free(cfg);
	assert_non_null(e);
	return e;
}

/* The child: serve until the control pipe closes. No cmocka here. */
static void serve(int n, const char *host, size_t len, int out, int ctl)
{
	struct xfer_engine *e[16];
	void *buf[16];
	char c;

	for (int i = 0; i < n; i++) {
		struct xfer_config *cfg = xfer_config_new();

		if (!cfg || xfer_config_set(cfg, "protocol", "rdma") ||
		    xfer_config_set(cfg, "local_server_name", host))
			_exit(3);
		e[i] = xfer_engine_new(cfg);
		xfer_config_free(cfg);
		buf[i] = aligned_alloc(4096, len);
		if (!e[i] || !buf[i])
			_exit(3);
		th_fill(buf[i], len, (uint64_t)i + 1);
		if (xfer_register(e[i], buf[i], len, "cpu:0", true))
			_exit(4);
		dprintf(out, "%s %llu\n", xfer_engine_name(e[i]),
			(unsigned long long)(uintptr_t)buf[i]);
	}
	close(out);
	while (read(ctl, &c, 1) > 0)
		;
	for (int i = 0; i < n; i++)
		xfer_engine_free(e[i]);
	_exit(0);
}

void rt_targets_start(struct rt_targets *t, int n, const char *host,
		      size_t len)
{
	int names[2], ctl[2];
	FILE *f;

	assert_true(n <= 16);
	assert_int_equal(pipe(names), 0);
	assert_int_equal(pipe(ctl), 0);
	fflush(NULL);
	t->pid = fork();
	assert_true(t->pid >= 0);
	if (t->pid == 0) {
		/* Hold no other pipe, or another child never sees its EOF. */
		for (int fd = 3; fd < 1024; fd++)
			if (fd != names[1] && fd != ctl[0])
				close(fd);
		serve(n, host, len, names[1], ctl[0]);
	}
	close(names[1]);
	close(ctl[0]);
	t->ctl = ctl[1];
	t->n = n;
	f = fdopen(names[0], "r");
	assert_non_null(f);
	for (int i = 0; i < n; i++) {
		unsigned long long a;

		assert_int_equal(fscanf(f, "%63s %llu", t->name[i], &a), 2);
		t->addr[i] = a;
	}
	fclose(f);
}

int rt_targets_stop(struct rt_targets *t)
{
	int st = 0;

	close(t->ctl);
	waitpid(t->pid, &st, 0);
	return st;
}

int rt_ctl_accept(uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(port) };
	int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0), fd = -1;

	if (lfd < 0)
		return -1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (!bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) && !listen(lfd, 1))
		fd = accept(lfd, NULL, NULL);
	close(lfd);
	return fd;
}

int rt_ctl_connect(const char *host, uint16_t port, int ms)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(port) };
	int64_t end = th_now_ms() + ms;

	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		return -1;
	do {
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		if (fd >= 0 && !connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
			return fd;
		if (fd >= 0)
			close(fd);
		usleep(200000);
	} while (th_now_ms() < end);
	return -1;
}

double rt_proc_cpu(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long ut, st;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	assert_non_null(f);
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	p = strrchr(buf, ')'); /* the command may hold spaces */
	assert_non_null(p);
	/* fields 14 and 15, counted after "pid (comm)" as 3.. */
	assert_int_equal(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u "
				"%*u %*u %lu %lu", &ut, &st), 2);
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}
