/*
 * Scale: NPROC processes of NENG engines each (64 in all) through one
 * etcd cluster of three members. Every engine opens every other one
 * (4032 opens, all at once) and writes 64 KiB into its own slot of each;
 * each engine then checks every slot of its memory. Reported: the time
 * until all opens succeed, the keys in the store, and what one engine's
 * re-register costs the others: one watch event each, and one fetch for
 * each engine that has it open; and nothing at all while idle (no
 * periodic scans).
 *
 * The parent only coordinates: each child runs its engines and answers
 * one-line commands.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "metadata/etcd_internal.h"
#include "test/th_etcd.h"

#define NPROC 4
#define NENG 16               /* engines per process */
#define NALL (NPROC * NENG)
#define SLOT (64 << 10)       /* what each engine writes to each other */
#define STEP_MS 120000        /* the most one step may take */
#define FDS 4096              /* descriptors a child needs: 2 per data
				 connection (one to each peer, one from
				 each), and a few per engine */

struct eng {
	struct xfer_engine *e;
	int index;                /* 0 .. NALL-1 */
	uint8_t *mem;             /* NALL slots; slot w is engine w's */
	uint8_t *src;             /* SLOT bytes of pattern index */
	uint8_t *extra;           /* registered by "reg" */
	int64_t seg[NALL];        /* the others, opened */
};

static pid_t kids[NPROC];
static int fds[NPROC];

/* ---- a child: NENG engines ---- */

static struct eng engs[NENG];
static atomic_int opens_done, open_failures;

static void name_of(char *buf, size_t cap, int index)
{
	snprintf(buf, cap, "sc-%02d", index);
}

static void opened(struct xfer_engine *e, int64_t id, void *arg)
{
	int64_t *slot = arg;

	(void)e;
	*slot = id;
	if (id < 0)
		atomic_fetch_add(&open_failures, 1);
	atomic_fetch_add(&opens_done, 1);
}

/* Every engine opens every other, all at once. @return the failures. */
static int open_all(void)
{
	char name[16];

	atomic_store(&opens_done, 0);
	atomic_store(&open_failures, 0);
	for (int i = 0; i < NENG; i++)
		for (int w = 0; w < NALL; w++) {
			if (w == engs[i].index)
				continue;
			name_of(name, sizeof(name), w);
			if (xfer_segment_open_async(engs[i].e, name, opened,
						    &engs[i].seg[w])) {
				atomic_fetch_add(&open_failures, 1);
				atomic_fetch_add(&opens_done, 1);
			}
		}
	if (!th_wait_atomic(&opens_done, NENG * (NALL - 1), STEP_MS))
		return -1;
	return atomic_load(&open_failures);
}

/* Where engine @p g's peer @p w has its NALL slots, or 0. */
static uint64_t slots_of(struct eng *g, int w)
{
	uint64_t addr, len;

	for (size_t i = 0; !xfer_segment_buffer(g->e, g->seg[w], i, &addr,
						&len, NULL); i++)
		if (len == NALL * SLOT)
			return addr;
	return 0;
}

/* Each engine writes its pattern into its slot of every other, in one
 * batch. @return the requests that did not complete. */
static int write_all(void)
{
	struct xfer_request r[NALL];
	struct xfer_task_status st;
	struct xfer_batch *b[NENG];
	int bad = 0;

	for (int i = 0; i < NENG; i++) {
		struct eng *g = &engs[i];
		size_t n = 0;

		for (int w = 0; w < NALL; w++) {
			uint64_t mem = slots_of(g, w);

			if (w == g->index)
				continue;
			if (!mem)
				return -1;
			r[n++] = (struct xfer_request){
				XFER_WRITE, g->src, g->seg[w],
				mem + (uint64_t)g->index * SLOT, SLOT };
		}
		b[i] = xfer_batch_new(g->e, n);
		if (!b[i] || xfer_batch_submit(b[i], r, n))
			return -1;
	}
	for (int i = 0; i < NENG; i++) {
		if (xfer_batch_wait(b[i], STEP_MS))
			return -1;
		for (size_t k = 0; k < NALL - 1; k++)
			bad += xfer_batch_status(b[i], k, &st) ||
			       st.status != XFER_COMPLETED;
		xfer_batch_free(b[i]);
	}
	return bad;
}

/* Every slot of every engine's memory holds its writer's pattern. */
static int check_all(void)
{
	int bad = 0;

	for (int i = 0; i < NENG; i++)
		for (int w = 0; w < NALL; w++)
			bad += w != engs[i].index &&
			       th_check(engs[i].mem + (size_t)w * SLOT, SLOT,
					(uint64_t)w) != -1;
	return bad;
}

static int child_start(int p, const char *conn)
{
	char name[16];

	for (int i = 0; i < NENG; i++) {
		struct eng *g = &engs[i];

		g->index = p * NENG + i;
		name_of(name, sizeof(name), g->index);
		g->e = th_etcd_engine(conn, name, 1);
		if (!g->e ||
		    posix_memalign((void **)&g->mem, 4096, NALL * SLOT) ||
		    posix_memalign((void **)&g->src, 4096, SLOT) ||
		    posix_memalign((void **)&g->extra, 4096, SLOT))
			return -1;
		th_fill(g->src, SLOT, (uint64_t)g->index);
		if (xfer_register(g->e, g->mem, NALL * SLOT, "cpu:0", true) ||
		    xfer_register(g->e, g->src, SLOT, "cpu:0", true))
			return -1;
	}
	return 0;
}

#define answer(fd, ...) do { \
	if (th_line_write(fd, __VA_ARGS__)) \
		_exit(3); \
} while (0)

static void __attribute__((noreturn)) child_main(int p, int fd,
						 const char *conn)
{
	char cmd[64];
	int64_t t0;
	int ret;

	/* One data connection per peer (2 by default) is plenty here. */
	setenv("XFER_TCP_CONNS", "1", 1);
	answer(fd, "%d", child_start(p, conn));
	while (!th_line_read(fd, cmd, sizeof(cmd), 10 * STEP_MS)) {
		if (!strcmp(cmd, "open")) {
			t0 = th_now_ms();
			ret = open_all();
			answer(fd, "%d %lld", ret,
			       (long long)(th_now_ms() - t0));
		} else if (!strcmp(cmd, "write")) {
			answer(fd, "%d", write_all());
		} else if (!strcmp(cmd, "check")) {
			answer(fd, "%d", check_all());
		} else if (!strcmp(cmd, "stats")) {
			for (int i = 0; i < NENG; i++) {
				struct etcd *et = th_etcd_of(engs[i].e);

				answer(fd, "%" PRIu64 " %" PRIu64 " %" PRId64,
				       et->stats.events, et->stats.gets,
				       et->rev);
			}
		} else if (!strcmp(cmd, "reg")) {
			answer(fd, "%d", xfer_register(engs[0].e,
						       engs[0].extra, SLOT,
						       "cpu:0", true));
		} else {
			break;
		}
	}
	for (int i = 0; i < NENG; i++)
		xfer_engine_free(engs[i].e);
	_exit(0);
}

/* ---- the parent ---- */

/* Send @p cmd to every child, and read one answer line from each into
 * @p out; fails the test if one does not answer in time. */
static void all(const char *cmd, char (*out)[64])
{
	for (int p = 0; p < NPROC; p++)
		assert_int_equal(th_line_write(fds[p], "%s", cmd), 0);
	for (int p = 0; p < NPROC; p++)
		if (th_line_read(fds[p], out[p], sizeof(out[p]), STEP_MS))
			fail_msg("child %d did not answer \"%s\"", p, cmd);
}

struct stat1 {
	uint64_t events, gets;
	int64_t rev;
};

/* Every engine's watch count and gets, once every watch is at the
 * cluster's revision. */
static void stats_at_rest(struct stat1 *s)
{
	int64_t rev = th_etcd_revision(&th_cluster), end = th_now_ms() + 10000;
	char line[64];
	bool rest;

	do {
		rest = true;
		for (int p = 0; p < NPROC; p++)
			assert_int_equal(th_line_write(fds[p], "stats"), 0);
		for (int k = 0; k < NALL; k++) {
			struct stat1 *x = &s[k];

			if (th_line_read(fds[k / NENG], line, sizeof(line),
					 STEP_MS) ||
			    sscanf(line, "%" SCNu64 " %" SCNu64 " %" SCNd64,
				   &x->events, &x->gets, &x->rev) != 3)
				fail_msg("child %d: no stats", k / NENG);
			rest &= x->rev >= rev;
		}
		if (rest)
			return;
		usleep(50000);
	} while (th_now_ms() < end);
	fail_msg("the watches did not reach revision %lld", (long long)rev);
}

static void test_scale(void **state)
{
	struct stat1 s0[NALL], s1[NALL], s2[NALL];
	char out[NPROC][64];
	struct rlimit rl;
	int64_t t0, opens_ms, slowest = 0;
	int sp[2], min_ev = 1 << 30, max_ev = 0, min_get = 1 << 30,
	    max_get = 0, status;
	yajl_val j;

	(void)state;
	getrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_max < FDS) {
		print_message("skipped: %llu descriptors at most, %d needed\n",
			      (unsigned long long)rl.rlim_max, FDS);
		skip();
	}
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	t0 = th_now_ms();
	for (int p = 0; p < NPROC; p++) {
		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
		kids[p] = fork();
		assert_true(kids[p] >= 0);
		if (kids[p] == 0) {
			close(sp[0]);
			child_main(p, sp[1], th_cluster.conn);
		}
		close(sp[1]);
		fds[p] = sp[0];
	}
	for (int p = 0; p < NPROC; p++)
		if (th_line_read(fds[p], out[p], sizeof(out[p]), STEP_MS) ||
		    strcmp(out[p], "0"))
			fail_msg("child %d did not start its engines", p);
	print_message("%d engines up in %lld ms\n", NALL,
		      (long long)(th_now_ms() - t0));

	t0 = th_now_ms();
	all("open", out);
	opens_ms = th_now_ms() - t0;
	for (int p = 0; p < NPROC; p++) {
		long long ms;

		assert_int_equal(sscanf(out[p], "%d %lld", &status, &ms), 2);
		assert_int_equal(status, 0);
		slowest = ms > slowest ? ms : slowest;
	}
	j = th_etcdctl(&th_cluster, "get mooncake/ --prefix --keys-only --limit=1 "
		       "-w json");
	print_message("%d opens: all done in %lld ms (slowest process %lld "
		      "ms); %lld keys in the store\n", NALL * (NALL - 1),
		      (long long)opens_ms, (long long)slowest,
		      (long long)th_json_int(j, "count", NULL));
	/* each engine's rpc_meta, ram and nvmeof (its files, none here) */
	assert_int_equal(th_json_int(j, "count", NULL), 3 * NALL);
	yajl_tree_free(j);

	t0 = th_now_ms();
	all("write", out);
	for (int p = 0; p < NPROC; p++)
		assert_string_equal(out[p], "0");
	all("check", out);
	for (int p = 0; p < NPROC; p++)
		assert_string_equal(out[p], "0");
	print_message("%d x 64 KiB written and checked in %lld ms\n",
		      NALL * (NALL - 1), (long long)(th_now_ms() - t0));

	/* Idle, past a lease keepalive (every TTL/3): nothing moves. */
	stats_at_rest(s0);
	usleep(ETCD_TTL_S * 1000000 / 3 + 200000);
	stats_at_rest(s1);
	for (int k = 0; k < NALL; k++) {
		assert_int_equal(s1[k].events, s0[k].events);
		assert_int_equal(s1[k].gets, s0[k].gets);
	}

	/* One engine re-registers: one event for each watcher, one fetch
	 * for each engine that has it open. */
	assert_int_equal(th_line_write(fds[0], "reg"), 0);
	assert_int_equal(th_line_read(fds[0], out[0], sizeof(out[0]),
				      STEP_MS), 0);
	assert_string_equal(out[0], "0");
	stats_at_rest(s2);
	for (int k = 0; k < NALL; k++) {
		int ev = (int)(s2[k].events - s1[k].events);
		int gets = (int)(s2[k].gets - s1[k].gets);

		min_ev = ev < min_ev ? ev : min_ev;
		max_ev = ev > max_ev ? ev : max_ev;
		if (k) {
			min_get = gets < min_get ? gets : min_get;
			max_get = gets > max_get ? gets : max_get;
		}
		assert_int_equal(ev, 1);
		assert_int_equal(gets, k ? 1 : 0);
	}
	print_message("one re-register: %d to %d watch events per engine, "
		      "%d to %d gets per engine that has it open\n", min_ev,
		      max_ev, min_get, max_get);

	for (int p = 0; p < NPROC; p++)
		assert_int_equal(th_line_write(fds[p], "quit"), 0);
	for (int p = 0; p < NPROC; p++) {
		status = th_wait_exit(kids[p], STEP_MS);
		kids[p] = 0;
		assert_true(status >= 0 && WIFEXITED(status) &&
			    WEXITSTATUS(status) == 0);
	}
}

static int teardown(void **state)
{
	for (int p = 0; p < NPROC; p++)
		if (kids[p] > 0) {
			kill(kids[p], SIGKILL);
			waitpid(kids[p], NULL, 0);
		}
	return th_etcd_teardown(state);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_scale),
	};

	return cmocka_run_group_tests(tests, th_etcd_setup3, teardown);
}
