/* The redis tests' shared part (th_redis.h): servers, a raw client,
 * Sentinel. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test/th_redis.h"

int th_raw_connect(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port) };
	struct timeval tv = { TH_REDIS_IO_MS / 1000, 0 };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		close(fd);
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

static int raw_line(int fd, char *buf, size_t cap)
{
	size_t n = 0;

	while (n + 1 < cap) {
		if (recv(fd, buf + n, 1, 0) != 1)
			return -1;
		if (n && buf[n - 1] == '\r' && buf[n] == '\n') {
			buf[n - 1] = '\0';
			return 0;
		}
		n++;
	}
	return -1;
}

/* One reply, as th_raw_cmdv() says. */
static int raw_reply(int fd, char *out, size_t cap, size_t *len)
{
	char line[512];
	long n;

	if (raw_line(fd, line, sizeof(line)))
		return -1;
	n = atol(line + 1);
	if (line[0] == '*') {
		for (long i = 0; i < n; i++)
			if (raw_reply(fd, out, cap, len))
				return -1;
		return n > 0 ? 0 : -1;
	}
	if (line[0] != '$' || n < 0) {
		snprintf(out, cap, "%s", line);
		*len = strlen(out);
		return 0;
	}
	if ((size_t)n + 3 > cap)
		return -1;
	out[0] = '$';
	for (long got = 0, r; got < n + 2; got += r) {
		r = recv(fd, out + 1 + got, (size_t)(n + 2 - got), 0);
		if (r <= 0)
			return -1;
	}
	out[n + 1] = '\0';
	*len = (size_t)n;
	return 0;
}

/* Send one command of @p argc NUL-ended words. @return 0, -1. */
static int raw_send(int fd, int argc, const char **argv)
{
	char req[1024];
	int n = snprintf(req, sizeof(req), "*%d\r\n", argc);

	for (int i = 0; i < argc; i++)
		n += snprintf(req + n, sizeof(req) - (size_t)n, "$%zu\r\n%s\r\n",
			      strlen(argv[i]), argv[i]);
	assert_true(n < (int)sizeof(req));
	return send(fd, req, (size_t)n, MSG_NOSIGNAL) == n ? 0 : -1;
}

int th_raw_cmdv(int fd, char *out, size_t cap, size_t *len, int argc,
		const char **argv)
{
	if (raw_send(fd, argc, argv))
		return -1;
	return raw_reply(fd, out, cap, len);
}

void th_redis_start(struct th_redis *s, int port, const char *conf,
		    const char *const *extra)
{
	const char *argv[40] = { "redis-server" };
	const char *fixed[] = { "--port", NULL, "--bind", "127.0.0.1",
				"--save", "", "--appendonly", "no",
				"--daemonize", "no" };
	int64_t end = th_now_ms() + TH_REDIS_START_MS;
	char port_s[16], out[512];
	int argc = 1, fd, devnull;
	size_t len;

	s->port = port ? port : th_free_port();
	snprintf(port_s, sizeof(port_s), "%d", s->port);
	fixed[1] = port_s;
	if (conf) {
		argv[argc++] = conf;
		argv[argc++] = "--sentinel";
	}
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		argv[argc++] = fixed[i];
	while (extra && *extra && argc < 39)
		argv[argc++] = *extra++;
	s->pid = fork();
	assert_true(s->pid >= 0);
	if (s->pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		devnull = open("/dev/null", O_WRONLY);
		dup2(devnull, STDOUT_FILENO);
		dup2(devnull, STDERR_FILENO);
		execvp(argv[0], (char **)argv);
		_exit(127);
	}
	/* Polling: a server coming up has no callback to wait on. */
	for (;;) {
		fd = th_raw_connect(s->port);
		if (fd >= 0 && !th_raw_cmdv(fd, out, sizeof(out), &len, 1,
					    (const char *[]){ "PING" })) {
			close(fd);
			return;
		}
		if (fd >= 0)
			close(fd);
		assert_int_equal(waitpid(s->pid, NULL, WNOHANG), 0);
		assert_true(th_now_ms() < end);
		usleep(10000);
	}
}

void th_redis_stop(struct th_redis *s, int sig)
{
	if (s->pid <= 0)
		return;
	kill(s->pid, sig);
	waitpid(s->pid, NULL, 0);
	s->pid = 0;
}

/* ---- Sentinel ---- */

int th_sentinels_connect(struct th_sentinels *t, int port)
{
	int fd = th_raw_connect(port);

	assert_true(fd >= 0);
	if (t->password)
		assert_string_equal(th_raw_cmd(fd, "AUTH", t->password), "+OK");
	return fd;
}

/* The elements of the array that answers @p argc words on @p fd. */
static long array_len(int fd, int argc, const char **argv)
{
	char line[512], out[512];
	size_t len;
	long n;

	assert_int_equal(raw_send(fd, argc, argv), 0);
	assert_int_equal(raw_line(fd, line, sizeof(line)), 0);
	assert_int_equal(line[0], '*');
	n = atol(line + 1);
	for (long i = 0; i < n; i++)
		assert_int_equal(raw_reply(fd, out, sizeof(out), &len), 0);
	return n;
}

/* Every sentinel knows the replica and the two others. */
static bool sentinels_ready(struct th_sentinels *t)
{
	bool ready = true;
	int fd;

	for (int i = 0; i < 3 && ready; i++) {
		fd = th_raw_connect(t->s[i].port);
		assert_true(fd >= 0);
		ready = array_len(fd, 3, (const char *[]){
			"SENTINEL", "replicas", TH_MASTER }) == 1 &&
			array_len(fd, 3, (const char *[]){
			"SENTINEL", "sentinels", TH_MASTER }) == 2;
		close(fd);
	}
	return ready;
}

void th_sentinels_start(struct th_sentinels *t, const char *password)
{
	/* A replica keeps the copy it syncs from in its folder. */
	const char *extra[14] = { "--replica-read-only", "no", "--dir" };
	char conf[96], mport[16], info[4096];
	int n = 4;
	int64_t end;
	size_t used, len;
	FILE *f;
	int fd;

	memset(t, 0, sizeof(*t));
	t->password = password;
	snprintf(t->dir, sizeof(t->dir), "/tmp/xfer_sentinel.XXXXXX");
	assert_non_null(mkdtemp(t->dir));
	extra[3] = t->dir;
	if (password) {
		extra[n++] = "--requirepass";
		extra[n++] = password;
		extra[n++] = "--masterauth";
		extra[n++] = password;
	}
	th_redis_start(&t->master, 0, NULL, extra);
	snprintf(mport, sizeof(mport), "%d", t->master.port);
	extra[n++] = "--replicaof";
	extra[n++] = "127.0.0.1";
	extra[n++] = mport;
	th_redis_start(&t->replica, 0, NULL, extra);
	/* Sentinels learn of replicas from the master's INFO: once the
	 * replica is in. */
	fd = th_sentinels_connect(t, t->replica.port);
	end = th_now_ms() + TH_REDIS_START_MS;
	for (;;) {
		assert_int_equal(th_raw_cmdv(fd, info, sizeof(info), &len, 2,
					     (const char *[]){ "INFO",
							       "replication" }),
				 0);
		if (strstr(info, "master_link_status:up"))
			break;
		assert_true(th_now_ms() < end);
		usleep(20000);
	}
	close(fd);
	used = (size_t)snprintf(t->conn, sizeof(t->conn), "redis+sentinel://");
	for (int i = 0; i < 3; i++) {
		snprintf(conf, sizeof(conf), "%s/s%d.conf", t->dir, i);
		f = fopen(conf, "w");
		assert_non_null(f);
		fprintf(f, "sentinel monitor %s 127.0.0.1 %d 2\n"
			"sentinel down-after-milliseconds %s %d\n"
			"sentinel failover-timeout %s 5000\n", TH_MASTER,
			t->master.port, TH_MASTER, TH_DOWN_AFTER_MS, TH_MASTER);
		if (password)
			fprintf(f, "sentinel auth-pass %s %s\n", TH_MASTER,
				password);
		fclose(f);
		th_redis_start(&t->s[i], 0, conf, (const char *const[]){
			"--dir", t->dir, NULL });
		used += (size_t)snprintf(t->conn + used, sizeof(t->conn) - used,
					 "%s127.0.0.1:%d", i ? "," : "",
					 t->s[i].port);
	}
	snprintf(t->conn + used, sizeof(t->conn) - used, "/%s", TH_MASTER);
	/* They find each other through the master every 2 s. */
	end = th_now_ms() + 4 * TH_REDIS_START_MS;
	while (!sentinels_ready(t)) {
		assert_true(th_now_ms() < end);
		usleep(100000);
	}
}

void th_sentinels_free(struct th_sentinels *t)
{
	for (int i = 0; i < 3; i++)
		th_redis_stop(&t->s[i], SIGTERM);
	th_redis_stop(&t->replica, SIGTERM);
	th_redis_stop(&t->master, SIGTERM);
	if (t->dir[0])
		th_rm_tree(t->dir);
	t->dir[0] = '\0';
}

int th_sentinels_master(struct th_sentinels *t)
{
	int port = 0, fd;

	for (int i = 0; i < 3 && !port; i++) {
		if (t->s[i].pid <= 0)
			continue;
		fd = th_raw_connect(t->s[i].port);
		if (fd < 0)
			continue;
		port = atoi(th_raw_cmd(fd, "SENTINEL",
				       "get-master-addr-by-name",
				       TH_MASTER) + 1);
		close(fd);
	}
	return port;
}
