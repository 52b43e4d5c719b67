/*
 * RDMA tier, the store across two guests (rdmavm --topo pair): node0
 * runs xfer-stored and a client lending a segment; node1 runs a holder
 * process lending another and a client lending none, driven over a
 * control socket. Objects go both ways over RDMA (protocol "rdma"),
 * staged and zero-copy, and a read after the holder of one replica was
 * killed comes from the other. Every byte read back is checked.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <xfer/store.h>

#include "test/helpers.h"
#include "test/rdma/rt.h"
#include "test/th_store.h"

#define CTL_PORT 17801
#define STORED_PORT 17802
#define NODE0 "169.254.10.1"
#define NODE1 "169.254.10.2"
#define MiB (1u << 20)
#define SEG (16 * MiB)
#define STAGE (4 * MiB)

/* An RDMA engine on @p host and a client of the master at @p master on
 * it. No cmocka (node1's processes). @return the client, or NULL. */
static struct xfer_kv *kv_new(const char *host, const char *master,
			      uint64_t seg, uint64_t stage,
			      struct xfer_engine **e)
{
	struct xfer_config *cfg = xfer_config_new();
	struct xfer_kv *kv = NULL;

	*e = NULL;
	if (cfg && !xfer_config_set(cfg, "protocol", "rdma") &&
	    !xfer_config_set(cfg, "bind_addr", "0.0.0.0") &&
	    !xfer_config_set(cfg, "local_server_name", host))
		*e = xfer_engine_new(cfg);
	xfer_config_free(cfg);
	if (*e && !(kv = xfer_kv_new(*e, NULL, master, seg, stage))) {
		xfer_engine_free(*e);
		*e = NULL;
	}
	return kv;
}

/* th_put_pattern() with the first replica on segment @p pref. */
static int64_t put(struct xfer_kv *kv, const char *key, size_t len,
		   uint64_t v, unsigned repl, const char *pref, bool z)
{
	struct xfer_kv_replicate rc = { .replica_num = repl,
					.preferred_segment = pref };

	return th_put_pattern_rc(kv, key, len, v, &rc, z);
}

/* ---- node1: a holder process and a client driven by node0 ---- */

/* The holder: lends SEG bytes until killed (or its pipe closes). */
static pid_t holder_start(const char *master, char *name)
{
	int p[2];
	pid_t pid;
	FILE *f;

	if (pipe(p))
		return -1;
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		struct xfer_engine *e;
		struct xfer_kv *kv = kv_new(NODE1, master, SEG, 0, &e);

		close(p[0]);
		dprintf(p[1], "%s\n", kv ? xfer_engine_name(e) : "-");
		while (kv)
			pause();                /* until killed */
		_exit(3);
	}
	close(p[1]);
	f = fdopen(p[0], "r");
	if (pid < 0 || !f || fscanf(f, "%63s", name) != 1 || !strcmp(name, "-"))
		pid = -1;
	if (f)
		fclose(f);
	return pid;
}

static int run_node1(void)
{
	char line[256], op[8], key[64], master[64], pref[64], hname[64];
	int fd = rt_ctl_accept(CTL_PORT), n;
	unsigned long long len, v;
	unsigned repl;
	bool z;
	struct xfer_engine *e;
	struct xfer_kv *kv;
	pid_t holder;
	FILE *f;

	f = fd < 0 ? NULL : fdopen(fd, "r"); /* replies by dprintf on fd */
	if (!f || !fgets(line, sizeof(line), f) ||
	    sscanf(line, "master %63s", master) != 1)
		return 2;
	holder = holder_start(master, hname);
	kv = kv_new(NODE1, master, 0, STAGE, &e);
	if (holder < 0 || !kv)
		return 3;
	dprintf(fd, "%s %s\n", hname, xfer_engine_name(e));
	/* put[z] KEY LEN V REPL PREF | get[z] KEY LEN V | kill; EOF: done */
	while (fgets(line, sizeof(line), f)) {
		n = sscanf(line, "%7s %63s %llu %llu %u %63s", op, key, &len,
			   &v, &repl, pref);
		z = n > 0 && op[3] == 'z';
		if (n == 6 && !strncmp(op, "put", 3))
			dprintf(fd, "%lld\n", (long long)put(kv, key, len, v,
							     repl, pref, z));
		else if (n == 4 && !strncmp(op, "get", 3))
			dprintf(fd, "%lld\n", (long long)th_get_pattern(kv, key,
						len, v, z));
		else if (n == 1 && !strcmp(op, "kill")) {
			kill(holder, SIGKILL);
			waitpid(holder, NULL, 0);
			holder = 0;
			dprintf(fd, "0\n");
		} else {
			dprintf(fd, "bad\n");
		}
	}
	if (holder > 0) {
		kill(holder, SIGKILL);
		waitpid(holder, NULL, 0);
	}
	xfer_kv_free(kv);
	xfer_engine_free(e);
	return 0;
}

/* ---- node0: the master and the tests ---- */

static FILE *ctl;      /* node1's replies; requests go by dprintf */
static pid_t stored;
static struct xfer_engine *eng;
static struct xfer_kv *kv0;
static char holder[64], node1_kv[64];

static long long cmd(const char *fmt, ...)
{
	char line[64];
	va_list ap;

	va_start(ap, fmt);
	assert_true(vdprintf(fileno(ctl), fmt, ap) > 0);
	va_end(ap);
	assert_non_null(fgets(line, sizeof(line), ctl));
	return strtoll(line, NULL, 10);
}

static int setup(void **state)
{
	const char *path = getenv("XFER_STORED");
	char port[32], master[64], line[160];
	int fd;

	(void)state;
	snprintf(port, sizeof(port), "--port=%d", STORED_PORT);
	snprintf(master, sizeof(master), "%s:%d", NODE0, STORED_PORT);
	fflush(NULL);
	stored = fork();
	assert_true(stored >= 0);
	if (stored == 0) {
		/* leases long enough for the emulated guests' transfers */
		execl(path ? path : "build/xfer-stored", "xfer-stored", port,
		      "--metrics_port=0", "--default_kv_lease_ttl=120s",
		      (char *)NULL);
		_exit(127);
	}
	fd = rt_ctl_connect(NODE0, STORED_PORT, 60000);
	assert_true(fd >= 0);
	close(fd);
	fd = rt_ctl_connect(NODE1, CTL_PORT, 120000);
	assert_true(fd >= 0);
	ctl = fdopen(fd, "r");
	dprintf(fd, "master %s\n", master);
	assert_non_null(fgets(line, sizeof(line), ctl));
	assert_int_equal(sscanf(line, "%63s %63s", holder, node1_kv), 2);
	kv0 = kv_new(NODE0, master, SEG, STAGE, &eng);
	assert_non_null(kv0);
	printf("master %s, holder %s, node1's client %s, node0's %s\n", master,
	       holder, node1_kv, xfer_engine_name(eng));
	return 0;
}

static int teardown(void **state)
{
	int status = -1;

	(void)state;
	fclose(ctl);
	assert_int_equal(xfer_kv_free(kv0), 0);
	xfer_engine_free(eng);
	kill(stored, SIGTERM);
	waitpid(stored, &status, 0);
	assert_int_equal(status, 0);
	return 0;
}

/* Bytes node0's engine moved over its RDMA devices. */
static uint64_t nic_bytes(void)
{
	uint64_t sum = 0, bytes;
	const char *name;

	for (size_t i = 0; !xfer_engine_device_stats(eng, i, &name, &bytes);
	     i++)
		sum += bytes;
	return sum;
}

/* node0 writes into node1's holder and reads it back, staged and
 * zero-copy; node1 writes into node0's segment and reads it back; node1
 * reads what node0 wrote from the holder beside it. */
static void test_both_ways(void **state)
{
	const char *self = xfer_engine_name(eng);

	(void)state;
	assert_int_equal(put(kv0, "a", 3 * MiB + 5, 1, 1, holder, false), 0);
	assert_int_equal(th_get_pattern(kv0, "a", 3 * MiB + 5, 1, false),
			 3 * MiB + 5);
	assert_int_equal(put(kv0, "az", 2 * MiB, 2, 1, holder, true), 0);
	assert_int_equal(th_get_pattern(kv0, "az", 2 * MiB, 2, true), 2 * MiB);
	assert_int_equal(cmd("get a %u 1\n", 3 * MiB + 5), 3 * MiB + 5);
	assert_int_equal(cmd("put b %u 3 1 %s\n", 5 * MiB + 3, self), 0);
	assert_int_equal(cmd("get b %u 3\n", 5 * MiB + 3), 5 * MiB + 3);
	assert_int_equal(cmd("putz bz %u 4 1 %s\n", MiB, self), 0);
	assert_int_equal(cmd("getz bz %u 4\n", MiB), MiB);
	/* node0 reads its own segment: b lies there */
	assert_int_equal(th_get_pattern(kv0, "b", 5 * MiB + 3, 3, false),
			 5 * MiB + 3);
	printf("node0's NICs moved %llu bytes\n",
	       (unsigned long long)nic_bytes());
	assert_true(nic_bytes() >= 2 * (5 * MiB + 5));
}

/* Two replicas, the holder's first; the holder is killed: node1's read
 * fails over to node0's replica, over RDMA; an object whose only
 * replica was the holder's cannot be read, never read wrong. */
static void test_holder_killed(void **state)
{
	int64_t t0, got;

	(void)state;
	assert_int_equal(cmd("put r %u 5 2 %s\n", 4 * MiB + 1, holder), 0);
	assert_int_equal(cmd("kill\n"), 0);
	t0 = th_now_ms();
	assert_int_equal(cmd("get r %u 5\n", 4 * MiB + 1), 4 * MiB + 1);
	printf("read after the holder was killed: %lld ms\n",
	       (long long)(th_now_ms() - t0));
	assert_int_equal(th_get_pattern(kv0, "r", 4 * MiB + 1, 5, false),
			 4 * MiB + 1);
	got = th_get_pattern(kv0, "a", 3 * MiB + 5, 1, false);
	assert_true(got < 0 && got != -9999);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_both_ways),
		cmocka_unit_test(test_holder_killed),
	};
	const char *node = getenv("RDMAVM_NODE");

	signal(SIGPIPE, SIG_IGN);
	if (node && !strcmp(node, "1"))
		return run_node1();
	return cmocka_run_group_tests_name("rdma pair store", tests, setup,
					   teardown);
}
