/* The etcd tests' shared part (th_etcd.h): a cluster on loopback. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/engine_internal.h"
#include "metadata/etcd_internal.h"
#include "test/th_etcd.h"

struct th_etcd th_cluster;

int th_etcd_setup1(void **state)
{
	(void)state;
	signal(SIGPIPE, SIG_IGN);
	th_etcd_start(&th_cluster, 1);
	return 0;
}

int th_etcd_setup3(void **state)
{
	(void)state;
	signal(SIGPIPE, SIG_IGN);
	th_etcd_start(&th_cluster, 3);
	return 0;
}

int th_etcd_teardown(void **state)
{
	(void)state;
	th_etcd_free(&th_cluster);
	return 0;
}

/* One HTTP/1.0 exchange with member port @p port: the whole answer, head
 * and body, into @p buf (NUL-ended); "" if none came within 1 s. */
static void http(uint16_t port, const char *req, char *buf, size_t cap)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(port) };
	struct timeval tv = { 1, 0 };
	size_t len = 0;
	ssize_t n;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (!connect(fd, (struct sockaddr *)&a, sizeof(a)) &&
	    send(fd, req, strlen(req), MSG_NOSIGNAL) == (ssize_t)strlen(req))
		while (len < cap - 1 &&
		       (n = recv(fd, buf + len, cap - 1 - len, 0)) > 0)
			len += (size_t)n;
	close(fd);
	buf[len] = '\0';
}

/* GET /health answers {"health":"true"}: up, with a leader. */
static bool healthy(uint16_t port)
{
	char buf[1024];

	http(port, "GET /health HTTP/1.0\r\n\r\n", buf, sizeof(buf));
	return strstr(buf, "\"health\":\"true\"");
}

/* The status of member @p port: its id and its leader's (0 if none). */
static int member_status(uint16_t port, int64_t *id, int64_t *leader)
{
	static const char req[] = "POST /v3/maintenance/status HTTP/1.0\r\n"
				  "Content-Length: 2\r\n\r\n{}";
	char buf[2048], *body;
	yajl_val j;

	http(port, req, buf, sizeof(buf));
	body = strstr(buf, "\r\n\r\n");
	j = body ? yajl_tree_parse(body + 4, NULL, 0) : NULL;
	*id = th_json_int(j, "header", "member_id");
	*leader = th_json_int(j, "leader", NULL);
	yajl_tree_free(j);
	return *id ? 0 : -1;
}

static void member_exec(struct th_etcd *c, int i)
{
	char name[8], data[96], log[96], client[64], peer[64], cluster[200];
	size_t used = 0;
	int fd;

	snprintf(name, sizeof(name), "m%d", i);
	snprintf(data, sizeof(data), "%s/%s", c->dir, name);
	snprintf(log, sizeof(log), "%s/%s.log", c->dir, name);
	snprintf(client, sizeof(client), "http://127.0.0.1:%u", c->m[i].port);
	snprintf(peer, sizeof(peer), "http://127.0.0.1:%u", c->m[i].peer_port);
	for (int k = 0; k < c->n; k++)
		used += (size_t)snprintf(cluster + used, sizeof(cluster) - used,
					 "%sm%d=http://127.0.0.1:%u",
					 k ? "," : "", k, c->m[k].peer_port);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
	dup2(fd, STDOUT_FILENO);
	dup2(fd, STDERR_FILENO);
	execlp("etcd", "etcd", "--name", name, "--data-dir", data,
	       "--listen-client-urls", client, "--advertise-client-urls", client,
	       "--listen-peer-urls", peer,
	       "--initial-advertise-peer-urls", peer,
	       "--initial-cluster", cluster, "--initial-cluster-state", "new",
	       (char *)NULL);
	_exit(127);
}

void th_etcd_start(struct th_etcd *c, int n)
{
	size_t a = 0, b = 0;

	assert_true(n >= 1 && n <= TH_ETCD_MAX);
	memset(c, 0, sizeof(*c));
	c->n = n;
	snprintf(c->dir, sizeof(c->dir), "%s/xfer_etcd.XXXXXX",
		 access("/dev/shm", W_OK) ? "/tmp" : "/dev/shm");
	assert_non_null(mkdtemp(c->dir));
	for (int i = 0; i < n; i++) {
		do {
			c->m[i].port = th_free_port();
			c->m[i].peer_port = th_free_port();
		} while (c->m[i].port == c->m[i].peer_port);
		a += (size_t)snprintf(c->conn + a, sizeof(c->conn) - a,
				      "%s127.0.0.1:%u", i ? "," : "etcd://",
				      c->m[i].port);
		b += (size_t)snprintf(c->endpoints + b,
				      sizeof(c->endpoints) - b,
				      "%shttp://127.0.0.1:%u", i ? "," : "",
				      c->m[i].port);
	}
	/* Members of a new cluster wait for each other: start all, then
	 * wait for a leader. */
	for (int i = 0; i < n; i++)
		th_etcd_restart(c, i);
	assert_true(th_etcd_wait_leader(c, TH_ETCD_START_MS) >= 0);
}

void th_etcd_kill(struct th_etcd *c, int i, int sig)
{
	if (c->m[i].pid <= 0)
		return;
	kill(c->m[i].pid, sig);
	kill(c->m[i].pid, SIGCONT); /* a member a failed test left stopped */
	waitpid(c->m[i].pid, NULL, 0);
	c->m[i].pid = 0;
}

/* A member serves once the cluster has quorum, so only a cluster of one
 * is waited for. */
void th_etcd_restart(struct th_etcd *c, int i)
{
	int64_t end = th_now_ms() + TH_ETCD_START_MS;

	assert_int_equal(c->m[i].pid, 0);
	c->m[i].pid = fork();
	assert_true(c->m[i].pid >= 0);
	if (c->m[i].pid == 0)
		member_exec(c, i);
	while (c->n == 1 && !healthy(c->m[i].port)) {
		assert_int_equal(waitpid(c->m[i].pid, NULL, WNOHANG), 0);
		assert_true(th_now_ms() < end);
		usleep(20000);
	}
}

void th_etcd_free(struct th_etcd *c)
{
	for (int i = 0; i < c->n; i++)
		th_etcd_kill(c, i, SIGTERM);
	if (c->dir[0])
		th_rm_tree(c->dir);
	c->dir[0] = '\0';
}

int th_etcd_leader(struct th_etcd *c)
{
	int64_t ids[TH_ETCD_MAX] = { 0 }, lead[TH_ETCD_MAX] = { 0 }, leader = 0;
	int found = -1;

	for (int i = 0; i < c->n; i++)
		if (c->m[i].pid > 0)
			member_status(c->m[i].port, &ids[i], &lead[i]);
	for (int i = 0; i < c->n; i++) {
		if (c->m[i].pid <= 0)
			continue;
		if (!lead[i] || (leader && lead[i] != leader))
			return -1;
		leader = lead[i];
	}
	for (int i = 0; i < c->n; i++)
		if (ids[i] && ids[i] == leader)
			found = i;
	return found;
}

int th_etcd_wait_leader(struct th_etcd *c, int ms)
{
	int64_t end = th_now_ms() + ms;
	int l;

	while ((l = th_etcd_leader(c)) < 0 && th_now_ms() < end)
		usleep(20000);
	return l;
}

yajl_val th_etcdctl(struct th_etcd *c, const char *fmt, ...)
{
	char args[256], cmd[640], out[8192];
	size_t len;
	va_list ap;
	FILE *p;

	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	snprintf(cmd, sizeof(cmd), "ETCDCTL_API=3 etcdctl --endpoints=%s %s "
		 "2>&1", c->endpoints, args);
	p = popen(cmd, "r");
	assert_non_null(p);
	len = fread(out, 1, sizeof(out) - 1, p);
	out[len] = '\0';
	if (pclose(p))
		fail_msg("%s: %s", cmd, out);
	return yajl_tree_parse(out, NULL, 0);
}

int64_t th_json_int(yajl_val v, const char *a, const char *b)
{
	const char *path[] = { a, b, NULL };

	v = yajl_tree_get(v, path, yajl_t_any);
	/* Member ids are uint64: kept bit for bit. */
	if (YAJL_IS_STRING(v))
		return (int64_t)strtoull(v->u.string, NULL, 10);
	return YAJL_IS_INTEGER(v) ? YAJL_GET_INTEGER(v) : 0;
}

int64_t th_etcd_revision(struct th_etcd *c)
{
	yajl_val j = th_etcdctl(c, "get x-no-such-key -w json");
	int64_t rev = th_json_int(j, "header", "revision");

	yajl_tree_free(j);
	return rev;
}

int64_t th_etcd_key_lease(struct th_etcd *c, const char *key)
{
	yajl_val j = th_etcdctl(c, "get %s -w json", key);
	yajl_val kvs = yajl_tree_get(j, (const char *[]){ "kvs", NULL },
				     yajl_t_array);
	int64_t lease = -1;

	if (kvs && kvs->u.array.len)
		lease = th_json_int(kvs->u.array.values[0], "lease", NULL);
	yajl_tree_free(j);
	return lease;
}

struct th_store *th_etcd_store(const char *prefix, struct event_base *base)
{
	return th_store_new(&xfer_etcd_ops, prefix, base);
}

void th_etcd_open(struct th_store *f, const char *conn)
{
	assert_int_equal(xfer_etcd_ops.open(conn, &f->env, &f->st), 0);
}

int th_line_read(int fd, char *buf, size_t cap, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int64_t end = th_now_ms() + ms;
	size_t n = 0;

	while (n + 1 < cap) {
		if (poll(&p, 1, (int)(end - th_now_ms())) != 1 ||
		    read(fd, buf + n, 1) != 1)
			return -1;
		if (buf[n] == '\n')
			break;
		n++;
	}
	buf[n] = '\0';
	return 0;
}

int th_line_write(int fd, const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
	va_end(ap);
	if (n < 0 || n >= (int)sizeof(buf) - 1)
		return -1;
	buf[n++] = '\n';
	return write(fd, buf, (size_t)n) == n ? 0 : -1;
}

struct xfer_engine *th_etcd_engine(const char *conn, const char *name,
				   int workers)
{
	struct xfer_config *cfg = xfer_config_new();
	struct xfer_engine *e = NULL;
	char num[24];

	snprintf(num, sizeof(num), "%d", workers);
	if (cfg && !xfer_config_set(cfg, "bind_addr", "127.0.0.1") &&
	    !xfer_config_set(cfg, "local_server_name", name) &&
	    !xfer_config_set(cfg, "metadata_server", conn) &&
	    !xfer_config_set(cfg, "workers", num))
		e = xfer_engine_new(cfg);
	xfer_config_free(cfg);
	return e;
}

/* One request, waited for. @return 0, -EIO if it did not complete. */
static int xfer_one(struct xfer_engine *e, enum xfer_opcode op, void *src,
		    int64_t seg, uint64_t remote, size_t len)
{
	struct xfer_request r = { op, src, seg, remote, len };
	struct xfer_task_status st = { 0 };
	struct xfer_batch *b = xfer_batch_new(e, 1);
	int ret;

	if (!b)
		return -errno;
	ret = xfer_batch_submit(b, &r, 1);
	if (!ret)
		ret = xfer_batch_wait(b, 30000);
	if (!ret)
		ret = xfer_batch_status(b, 0, &st);
	if (!ret && st.status != XFER_COMPLETED)
		ret = -EIO;
	while (xfer_batch_free(b) == -EBUSY)
		usleep(1000);
	return ret;
}

int th_roundtrip(struct xfer_engine *e, int64_t seg, uint8_t *src,
		 uint8_t *dst, uint64_t remote, size_t len, uint64_t seed)
{
	int ret;

	th_fill(src, len, seed);
	memset(dst, 0, len);
	ret = xfer_one(e, XFER_WRITE, src, seg, remote, len);
	if (!ret)
		ret = xfer_one(e, XFER_READ, dst, seg, remote, len);
	if (!ret && th_check(dst, len, seed) != -1)
		ret = -EILSEQ;
	return ret;
}

struct etcd *th_etcd_of(struct xfer_engine *e)
{
	return container_of(e->meta.store, struct etcd, base);
}
