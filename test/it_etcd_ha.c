/*
 * Engines through a cluster of three etcd members that loses them: engine
 * ha-a here and ha-b in a forked child find each other and move data; the
 * leader is killed mid-run while transfers go on, ha-b registers a buffer
 * meanwhile, and ha-a's watch shows it; a fourth engine started after the
 * kill finds both; no watch event is lost nor comes twice (each engine's
 * count equals the revisions the cluster went through). Then a second
 * member is killed: calls fail within their bound, transfers go on. The
 * members come back: everything works again, nothing restarted.
 *
 * The tests run in order, one scenario, sharing the engines below.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "metadata/etcd_internal.h"
#include "test/th_etcd.h"

#define BUF (1 << 20)
#define CHUNK (64 << 10)
#define CMD_MS 30000        /* the most a child's command may take */
#define SEEN_MS 15000       /* a change shows in a peer's watch */
/* A call no member can serve fails within this. */
#define BOUND_MS (ETCD_CALL_MS + ETCD_MEMBER_TIMEOUT_S * 1000 + 2000)

static char conn[200];         /* the members, the leader first */
static pid_t child = -1;
static int cfd = -1;           /* our end of the child's socket */

/* Engine ha-a and its buffers; ha-c (made before the kill) and ha-d
 * (after); where ha-b's buffers are. */
static struct xfer_engine *a, *c, *d;
static uint8_t *ma, *la, *ld;  /* target; local source/dest of a, d */
static int64_t sb;             /* ha-b in ha-a */
static uint64_t b1, b2;        /* ha-b's buffers */
static int leader;
static struct counts { uint64_t events, resyncs; int64_t rev; } ca, cb;

/* ---- the child: engine ha-b, driven by one-line commands ---- */

/* An answer to the parent; a parent gone ends the child. */
#define answer(fd, ...) do { \
	if (th_line_write(fd, __VA_ARGS__)) \
		_exit(3); \
} while (0)

static void __attribute__((noreturn)) child_main(int fd)
{
	struct xfer_engine *e = th_etcd_engine(conn, "ha-b", 1);
	uint8_t *t1, *t2, *l;
	char cmd[256], name[64];
	unsigned long long addr, seed;
	long long id;

	if (!e || posix_memalign((void **)&t1, 4096, BUF) ||
	    posix_memalign((void **)&t2, 4096, BUF) ||
	    posix_memalign((void **)&l, 4096, 2 * CHUNK) ||
	    xfer_register(e, t1, BUF, "cpu:0", true) ||
	    xfer_register(e, l, 2 * CHUNK, "cpu:0", true))
		_exit(2);
	answer(fd, "ready %llx", (unsigned long long)(uintptr_t)t1);
	while (!th_line_read(fd, cmd, sizeof(cmd), 120000)) {
		struct etcd *et = th_etcd_of(e);

		if (sscanf(cmd, "open %63s", name) == 1)
			answer(fd, "%lld", (long long)xfer_segment_open(
						       e, name));
		else if (sscanf(cmd, "xfer %lld %llx %llu", &id, &addr,
				&seed) == 3)
			answer(fd, "%d", th_roundtrip(e, id, l, l + CHUNK,
							  addr, CHUNK, seed));
		else if (!strcmp(cmd, "reg"))
			answer(fd, "%d %llx", xfer_register(
					   e, t2, BUF, "cpu:0", true),
				   (unsigned long long)(uintptr_t)t2);
		else if (!strcmp(cmd, "unreg"))
			answer(fd, "%d", th_unregister(e, t2));
		else if (!strcmp(cmd, "stats"))
			answer(fd, "%" PRIu64 " %" PRId64 " %" PRIu64,
				   et->stats.events, et->rev,
				   et->stats.resyncs);
		else
			break;
	}
	xfer_engine_free(e);
	_exit(0);
}

/* Send a command to the child and read its answer into @p out (none if
 * NULL). */
static void __attribute__((format(printf, 3, 4)))
cmd(char *out, size_t cap, const char *fmt, ...)
{
	char buf[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	assert_int_equal(th_line_write(cfd, "%s", buf), 0);
	if (out && th_line_read(cfd, out, cap, CMD_MS))
		fail_msg("the child did not answer \"%s\"", buf);
}

/* ---- watch counts ---- */

/* What ha-a's and ha-b's watches have seen, once both are at the
 * cluster's revision (nothing more is on its way). */
static void counts_at_rest(struct counts *ca, struct counts *cb)
{
	int64_t rev = th_etcd_revision(&th_cluster), end = th_now_ms() + SEEN_MS;
	struct etcd *ea = th_etcd_of(a);
	char out[128];

	do {
		cmd(out, sizeof(out), "stats");
		assert_int_equal(sscanf(out, "%" SCNu64 " %" SCNd64 " %"
					SCNu64, &cb->events, &cb->rev,
					&cb->resyncs), 3);
		ca->events = ea->stats.events;
		ca->resyncs = ea->stats.resyncs;
		ca->rev = ea->rev;
		if (ca->rev >= rev && cb->rev >= rev)
			break;
		usleep(20000);
	} while (th_now_ms() < end);
	assert_int_equal(ca->rev, rev);
	assert_int_equal(cb->rev, rev);
}

/* Between @p x and @p y: one event per revision, no resync. */
static void counts_exact(const struct counts *x, const struct counts *y,
			 const char *who)
{
	print_message("%s: %" PRIu64 " watch events for %" PRId64
		      " revisions\n", who, y->events - x->events,
		      y->rev - x->rev);
	assert_int_equal(y->events - x->events, y->rev - x->rev);
	assert_int_equal(y->resyncs, x->resyncs);
}

/* ---- transfers in the background ---- */

static atomic_bool moving;
static atomic_int moved, failed;

static void *mover(void *arg)
{
	uint64_t seed = 1000;

	(void)arg;
	while (atomic_load(&moving)) {
		if (th_roundtrip(a, sb, la, la + CHUNK,
				 b1 + (seed % 8) * CHUNK, CHUNK, seed))
			atomic_fetch_add(&failed, 1);
		else
			atomic_fetch_add(&moved, 1);
		seed++;
	}
	return NULL;
}

/* Wait until ha-a's ha-b has (@p want) or lacks a buffer at @p addr.
 * @return the milliseconds it took. */
static int64_t wait_buffer(uint64_t addr, bool want)
{
	int64_t t0 = th_now_ms();
	uint64_t got, len;
	bool has;

	for (;;) {
		has = false;
		for (size_t i = 0; !xfer_segment_buffer(a, sb, i, &got, &len,
							NULL); i++)
			has |= got == addr;
		if (has == want)
			return th_now_ms() - t0;
		if (th_now_ms() - t0 > SEEN_MS)
			fail_msg("ha-a's watch did not show ha-b's buffer %s",
				 want ? "added" : "removed");
		usleep(10000);
	}
}

static struct xfer_engine *engine(const char *name)
{
	struct xfer_engine *e = th_etcd_engine(conn, name, 1);

	if (!e)
		fail_msg("engine %s: %s", name, strerror(errno));
	return e;
}

/* ---- the scenario ---- */

static void test_find_and_move(void **state)
{
	int order[3], sp[2];
	char out[128];
	size_t used = 0;
	long long id;

	(void)state;
	leader = th_etcd_leader(&th_cluster);
	assert_true(leader >= 0);
	for (int i = 0; i < 3; i++)
		order[i] = (leader + i) % 3;
	for (int i = 0; i < 3; i++)
		used += (size_t)snprintf(conn + used, sizeof(conn) - used,
					 "%s127.0.0.1:%u", i ? "," : "etcd://",
					 th_cluster.m[order[i]].port);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		close(sp[0]);
		child_main(sp[1]);
	}
	close(sp[1]);
	cfd = sp[0];
	a = engine("ha-a");
	c = engine("ha-c");
	ma = th_alloc(BUF);
	la = th_alloc(2 * CHUNK);
	ld = th_alloc(2 * CHUNK);
	assert_int_equal(xfer_register(a, ma, BUF, "cpu:0", true), 0);
	assert_int_equal(xfer_register(a, la, 2 * CHUNK, "cpu:0", true), 0);
	if (th_line_read(cfd, out, sizeof(out), CMD_MS) ||
	    sscanf(out, "ready %" SCNx64, &b1) != 1)
		fail_msg("the child did not start");
	sb = xfer_segment_open(a, "ha-b");
	assert_true(sb >= 0);
	assert_int_equal(th_roundtrip(a, sb, la, la + CHUNK, b1, CHUNK, 1), 0);
	cmd(out, sizeof(out), "open ha-a");
	id = atoll(out);
	assert_true(id >= 0);
	cmd(out, sizeof(out), "xfer %lld %llx 2", id,
	    (unsigned long long)(uintptr_t)(ma + CHUNK));
	assert_string_equal(out, "0");
}

static void test_leader_killed(void **state)
{
	struct counts a0, b0;
	int64_t t0, open_ms, seen_ms, reg_ms, s;
	pthread_t th;
	char out[128];
	int ret;

	(void)state;
	counts_at_rest(&a0, &b0);
	atomic_store(&moving, true);
	assert_int_equal(pthread_create(&th, NULL, mover, NULL), 0);
	usleep(200000);
	/* Leadership may have moved on a busy machine: the leader now. */
	leader = th_etcd_wait_leader(&th_cluster, TH_ETCD_START_MS);
	assert_true(leader >= 0);
	th_etcd_kill(&th_cluster, leader, SIGKILL);
	t0 = th_now_ms();
	/* ha-b registers while there is no leader yet; ha-c opens. */
	cmd(NULL, 0, "reg");
	s = xfer_segment_open(c, "ha-a");
	open_ms = th_now_ms() - t0;
	assert_true(s >= 0);
	if (th_line_read(cfd, out, sizeof(out), CMD_MS) ||
	    sscanf(out, "%d %" SCNx64, &ret, &b2) != 2)
		fail_msg("the child did not register");
	reg_ms = th_now_ms() - t0;
	assert_int_equal(ret, 0);
	seen_ms = wait_buffer(b2, true) + reg_ms;
	/* A newcomer finds both, and moves data to both. */
	d = engine("ha-d");
	assert_int_equal(xfer_register(d, ld, 2 * CHUNK, "cpu:0", true), 0);
	s = xfer_segment_open(d, "ha-a");
	assert_true(s >= 0);
	assert_int_equal(th_roundtrip(d, s, ld, ld + CHUNK,
				      (uintptr_t)ma + 2 * CHUNK, CHUNK, 3), 0);
	s = xfer_segment_open(d, "ha-b");
	assert_true(s >= 0);
	assert_int_equal(th_roundtrip(d, s, ld, ld + CHUNK, b2, CHUNK, 4), 0);
	print_message("leader killed: first open after %lld ms; ha-b's "
		      "register out after %lld ms, seen by ha-a after %lld "
		      "ms; ha-d up and both open after %lld ms\n",
		      (long long)open_ms, (long long)reg_ms,
		      (long long)seen_ms, (long long)(th_now_ms() - t0));
	atomic_store(&moving, false);
	pthread_join(th, NULL);
	print_message("transfers meanwhile: %d verified, %d failed\n",
		      atomic_load(&moved), atomic_load(&failed));
	assert_int_equal(atomic_load(&failed), 0);
	assert_true(atomic_load(&moved) > 0);
	counts_at_rest(&ca, &cb);
	counts_exact(&a0, &ca, "ha-a");
	counts_exact(&b0, &cb, "ha-b");
}

static void test_quorum_lost(void **state)
{
	int second = (leader + 1) % 3;
	int64_t t0, ms, s;
	char out[128];

	(void)state;
	th_etcd_kill(&th_cluster, second, SIGKILL);
	/* ha-b's unregister cannot be published; ha-d's open fails. */
	cmd(NULL, 0, "unreg");
	t0 = th_now_ms();
	s = xfer_segment_open(d, "ha-c");
	ms = th_now_ms() - t0;
	print_message("quorum lost: open failed with %lld (%s) after %lld "
		      "ms\n", (long long)s, xfer_engine_last_error(d),
		      (long long)ms);
	assert_true(s < 0);
	assert_true(ms < BOUND_MS);
	/* Cached descriptors serve on. */
	assert_int_equal(th_roundtrip(a, sb, la, la + CHUNK, b1, CHUNK, 5), 0);
	if (th_line_read(cfd, out, sizeof(out), BOUND_MS + CMD_MS))
		fail_msg("the child's unregister hangs");
	assert_string_equal(out, "0");
}

static void test_members_back(void **state)
{
	struct counts a0, b0;
	int64_t t0, s;
	int status;

	(void)state;
	t0 = th_now_ms();
	th_etcd_restart(&th_cluster, leader);
	th_etcd_restart(&th_cluster, (leader + 1) % 3);
	assert_true(th_etcd_wait_leader(&th_cluster, TH_ETCD_START_MS) >= 0);
	/* ha-b republishes without its second buffer; ha-a sees it. */
	wait_buffer(b2, false);
	s = xfer_segment_open(d, "ha-c");
	assert_true(s >= 0);
	print_message("members back: ha-b's republish seen and a new open "
		      "after %lld ms\n", (long long)(th_now_ms() - t0));
	assert_int_equal(th_roundtrip(a, sb, la, la + CHUNK, b1, CHUNK, 6), 0);
	/* The watches came back from their revisions: still exact. */
	counts_at_rest(&a0, &b0);
	counts_exact(&ca, &a0, "ha-a, through the outage");
	counts_exact(&cb, &b0, "ha-b, through the outage");
	cmd(NULL, 0, "quit");
	status = th_wait_exit(child, 10000);
	child = -1;
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static int teardown(void **state)
{
	if (child > 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
	}
	if (d)
		xfer_engine_free(d);
	if (c)
		xfer_engine_free(c);
	if (a)
		xfer_engine_free(a);
	free(ma);
	free(la);
	free(ld);
	return th_etcd_teardown(state);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_find_and_move),
		cmocka_unit_test(test_leader_killed),
		cmocka_unit_test(test_quorum_lost),
		cmocka_unit_test(test_members_back),
	};

	return cmocka_run_group_tests(tests, th_etcd_setup3, teardown);
}
