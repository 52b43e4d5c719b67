/*
 * The etcd backend against a cluster of three members on loopback: a
 * member killed under a stream of puts (requests move on; the watch
 * resumes from its revision, every event seen once, none twice; the lease
 * lives on), a member that stops answering (writes move on in order), a
 * compacted history (one refetch, said once), quorum lost
 * (calls fail within their bound, naming the members), every member down
 * (calls fail at once), and all of it back without reopening.
 *
 * One cluster serves the whole run; each test keeps to a prefix of its
 * own and leaves every member running.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <yajl/yajl_tree.h>

#include "metadata/etcd_internal.h"
#include "test/th_etcd.h"

#define IO_MS 5000          /* the most a healthy answer may take */
/* A request no member can serve fails within this. */
#define BOUND_MS (ETCD_CALL_MS + ETCD_MEMBER_TIMEOUT_S * 1000 + 1000)
#define FAILOVER_MS 15000   /* a leader killed: calls work again */
#define NPUTS 40


#define sget(f, key, r) th_store_op(f, 'g', key, NULL, 0, r, IO_MS)
#define sput(f, key, v) th_store_put(f, key, v, FAILOVER_MS)

/* "etcd://" and the members in the order of @p order (indexes, -1 ends
 * it early), into @p conn. */
static void conn_of(char *conn, size_t cap, const int *order, int n)
{
	size_t used = 0;

	for (int i = 0; i < n && order[i] >= 0; i++)
		used += (size_t)snprintf(conn + used, cap - used,
					 "%s127.0.0.1:%u", i ? "," : "etcd://",
					 th_cluster.m[order[i]].port);
}

/* The members other than @p i, in order, after @p i. */
static void others(int i, int *order)
{
	order[0] = i;
	order[1] = (i + 1) % th_cluster.n;
	order[2] = (i + 2) % th_cluster.n;
}

static struct etcd *backend(struct th_store *f)
{
	return container_of(f->st, struct etcd, base);
}

/* Every member running again, with a leader they all follow. */
static void all_back(void)
{
	for (int i = 0; i < th_cluster.n; i++)
		if (!th_cluster.m[i].pid)
			th_etcd_restart(&th_cluster, i);
		else /* one a failed test left stopped */
			kill(th_cluster.m[i].pid, SIGCONT);
	assert_true(th_etcd_wait_leader(&th_cluster, TH_ETCD_START_MS) >= 0);
}

/* The leader killed while another client puts NPUTS keys: every put
 * works, the watcher (on the leader) sees each key once, hears of no
 * missed changes and no reconnect, and its lease is the same. */
static void test_leader_killed(void **state)
{
	struct th_store *w = th_etcd_store("k/", NULL);
	struct th_store *p = th_etcd_store("k/", w->base);
	int leader, order[3];
	char conn[200], key[32];
	int64_t lease, t0, first_ok = -1;
	struct th_res r;

	(void)state;
	all_back();
	leader = th_etcd_leader(&th_cluster);
	assert_true(leader >= 0);
	others(leader, order);
	conn_of(conn, sizeof(conn), order, 3);
	th_etcd_open(w, conn);
	others((leader + 1) % th_cluster.n, order);
	conn_of(conn, sizeof(conn), order, 3);
	th_etcd_open(p, conn);
	th_store_wait_watching(w, p, "k/probe", IO_MS);
	assert_int_equal(sput(w, "k/own", "x"), 0);
	lease = th_etcd_key_lease(&th_cluster, "k/own");
	assert_true(lease > 0);
	th_store_forget(w);
	t0 = th_now_ms();
	for (int i = 0; i < NPUTS; i++) {
		snprintf(key, sizeof(key), "k/%d", i);
		if (i == NPUTS / 2) {
			/* The leader now: it may have moved on a busy
			 * machine. */
			leader = th_etcd_wait_leader(&th_cluster,
						     TH_ETCD_START_MS);
			assert_true(leader >= 0);
			th_etcd_kill(&th_cluster, leader, SIGKILL);
			t0 = th_now_ms();
			/* The watcher's own requests move on too. */
			assert_int_equal(th_store_op(w, 'g', "k/own", NULL, 0,
						     &r, FAILOVER_MS), 0);
			first_ok = th_now_ms() - t0;
		}
		assert_int_equal(th_store_put(p, key, "v", FAILOVER_MS), 0);
	}
	print_message("leader killed: the watcher's next get after %lld ms, "
		      "%d puts after it in %lld ms\n", (long long)first_ok,
		      NPUTS - NPUTS / 2, (long long)(th_now_ms() - t0));
	snprintf(key, sizeof(key), "k/%d", NPUTS - 1);
	assert_true(th_run_until(w->base, th_store_seen(w, key), FAILOVER_MS));
	th_run_until(w->base, false, 300);
	assert_int_equal(w->nkeys, NPUTS);
	for (int i = 0; i < NPUTS; i++) {
		snprintf(key, sizeof(key), "k/%d", i);
		assert_int_equal(th_store_seen(w, key), 1);
	}
	assert_int_equal(w->changed_all, 0);
	assert_int_equal(w->reconnected, 0);
	assert_true(backend(w)->stats.switches >= 1);
	assert_int_equal(th_etcd_key_lease(&th_cluster, "k/own"), lease);
	th_store_free(p);
	th_store_free(w);
}

/* Where a write's callback came in the order of all. */
struct seq {
	int *next, at, err;
};

static void seq_cb(int err, const char *value, size_t len, void *arg)
{
	struct seq *q = arg;

	(void)value;
	(void)len;
	q->at = ++*q->next;
	q->err = err;
}

/* The member in use stops answering (SIGSTOP): requests move on after a
 * try's timeout, writes issued together land in their order, and the
 * watch, quiet on that member, starts over on the next from its
 * revision and sees each of them. */
static void test_stopped_member(void **state)
{
	struct th_store *f = th_etcd_store("s/", NULL);
	struct seq q[4] = { { 0 } };
	int order[3], stopped, next = 0;
	char conn[200];
	struct th_res r;
	int64_t t0, ms;

	(void)state;
	all_back();
	stopped = (th_etcd_leader(&th_cluster) + 1) % th_cluster.n;
	others(stopped, order);
	conn_of(conn, sizeof(conn), order, 3);
	th_etcd_open(f, conn);
	th_store_wait_watching(f, f, "s/probe", IO_MS);
	th_store_forget(f);
	kill(th_cluster.m[stopped].pid, SIGSTOP);
	t0 = th_now_ms();
	for (int i = 0; i < 4; i++)
		q[i].next = &next;
	xfer_etcd_ops.put(f->st, "s/k", "1", 1, seq_cb, &q[0]);
	xfer_etcd_ops.put(f->st, "s/k", "2", 1, seq_cb, &q[1]);
	xfer_etcd_ops.del(f->st, "s/k", seq_cb, &q[2]);
	xfer_etcd_ops.put(f->st, "s/k", "3", 1, seq_cb, &q[3]);
	assert_true(th_run_until(f->base, next == 4, FAILOVER_MS));
	ms = th_now_ms() - t0;
	print_message("member stopped: 4 writes done after %lld ms\n",
		      (long long)ms);
	assert_true(ms >= ETCD_MEMBER_TIMEOUT_S * 1000 - 100);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(q[i].err, 0);
		assert_int_equal(q[i].at, i + 1);
	}
	assert_int_equal(th_store_op(f, 'g', "s/k", NULL, 0, &r, IO_MS), 0);
	assert_memory_equal(r.val, "3", 1);
	assert_true(th_run_until(f->base, th_store_seen(f, "s/k") == 4,
				 FAILOVER_MS));
	th_run_until(f->base, false, 100);
	assert_int_equal(th_store_seen(f, "s/k"), 4);
	assert_int_equal(f->changed_all, 0);
	kill(th_cluster.m[stopped].pid, SIGCONT);
	th_store_free(f);
}

/* The watch's member (a follower, and the only one it knows) down while
 * the history it needs is compacted away: once back, one changed(NULL),
 * logged once; events after it come. */
static void test_compacted(void **state)
{
	struct th_store *w = th_etcd_store("c/", NULL);
	struct th_store *p = th_etcd_store("c/", w->base);
	int order[3], gone;
	char conn[200];
	yajl_val j;

	(void)state;
	all_back();
	gone = (th_etcd_leader(&th_cluster) + 1) % th_cluster.n;
	others(gone, order);
	conn_of(conn, sizeof(conn), order, 1);
	th_etcd_open(w, conn);
	conn_of(conn, sizeof(conn), order + 1, 2);
	th_etcd_open(p, conn);
	th_store_wait_watching(w, p, "c/probe", IO_MS);
	th_etcd_kill(&th_cluster, gone, SIGKILL);
	assert_int_equal(sput(p, "c/lost", "1"), 0);
	assert_int_equal(sput(p, "c/lost", "2"), 0);
	j = th_etcdctl(&th_cluster, "compact %lld",
		       (long long)th_etcd_revision(&th_cluster));
	yajl_tree_free(j);
	th_store_forget(w);
	th_etcd_restart(&th_cluster, gone);
	assert_true(th_run_until(w->base, w->changed_all, FAILOVER_MS));
	assert_int_equal(sput(p, "c/after", "1"), 0);
	assert_true(th_run_until(w->base, th_store_seen(w, "c/after"), IO_MS));
	th_run_until(w->base, false, 100);
	assert_int_equal(w->changed_all, 1);
	assert_int_equal(th_store_seen(w, "c/lost"), 0);
	assert_true(backend(w)->compact_warned);
	th_store_free(p);
	th_store_free(w);
}

/* Two members killed, the leader first: the one left has no quorum and
 * calls fail within their bound; the last killed too: they fail at once.
 * All restarted: calls work, the failed put makes the user republish,
 * and the watch is back from its revision, nothing missed. */
static void test_quorum_lost(void **state)
{
	struct th_store *f = th_etcd_store("q/", NULL);
	struct th_res rg = { 0 }, rp = { 0 }, r;
	int leader, left, t0;
	yajl_val j;

	(void)state;
	all_back();
	leader = th_etcd_leader(&th_cluster);
	th_etcd_open(f, th_cluster.conn);
	th_store_wait_watching(f, f, "q/probe", IO_MS);
	assert_int_equal(sput(f, "q/k", "v"), 0);
	th_etcd_kill(&th_cluster, leader, SIGKILL);
	th_etcd_kill(&th_cluster, (leader + 1) % th_cluster.n, SIGKILL);
	left = (leader + 2) % th_cluster.n;
	t0 = (int)th_now_ms();
	xfer_etcd_ops.get(f->st, "q/k", th_res_cb, &rg);
	xfer_etcd_ops.put(f->st, "q/k", "w", 1, th_res_cb, &rp);
	assert_true(th_run_until(f->base, rg.calls && rp.calls, BOUND_MS));
	print_message("quorum lost: get %d, put %d after %d ms\n", rg.err,
		      rp.err, (int)th_now_ms() - t0);
	assert_true(rg.err < 0 && rp.err < 0);
	th_etcd_kill(&th_cluster, left, SIGKILL);
	t0 = (int)th_now_ms();
	assert_int_equal(sget(f, "q/k", &r), -ECONNREFUSED);
	assert_true(th_now_ms() - t0 < 1000);
	all_back();
	j = th_etcdctl(&th_cluster, "put q/back x");
	yajl_tree_free(j);
	th_store_forget(f);
	assert_true(th_run_until(f->base, f->reconnected &&
				 th_store_seen(f, "q/back"), FAILOVER_MS));
	assert_int_equal(sget(f, "q/k", &r), 0);
	assert_int_equal(f->changed_all, 0);
	assert_int_equal(f->reconnected, 1);
	th_store_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_leader_killed),
		cmocka_unit_test(test_stopped_member),
		cmocka_unit_test(test_compacted),
		cmocka_unit_test(test_quorum_lost),
	};

	return cmocka_run_group_tests(tests, th_etcd_setup3, th_etcd_teardown);
}
