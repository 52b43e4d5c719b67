/*
 * xfer-stored's journal (--journal), with the master a real process
 * SIGKILLed and started again: objects come back at the same replica
 * locations once their segments are mounted again with the same
 * identity, not before; a segment mounted as something else, or not in
 * time, loses them; what was evicted or discarded stays gone; puts in
 * progress can still end; the allocator keeps
 * restored ranges apart from new ones; writers killed under are all
 * there; journals that are not ours, of another cluster or in use are
 * refused.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test/helpers.h"
#include "test/th_master.h"

#define SEG (1u << 20)

static const uint8_t A[STORE_ID_LEN] = { 'A' }, B[STORE_ID_LEN] = { 'B' },
		     W[STORE_ID_LEN] = { 'W' };
static char dir[] = "/tmp/it_store_persist.XXXXXX";
static char journal[64], journal_flag[80];

static int start_journal(const char *extra)
{
	const char *args[] = { journal_flag, extra, NULL };

	return st_start(0, args);
}

static void fresh_journal(const char *name)
{
	snprintf(journal, sizeof(journal), "%s/%s", dir, name);
	snprintf(journal_flag, sizeof(journal_flag), "--journal=%s", journal);
}

static int query(int fd, const char *key)
{
	return st_one(fd, STORE_QUERY, A, key, 0, 0, false);
}

/* The first replica's address in the last reply, if on @p endpoint. */
static uint64_t addr_on(const char *endpoint)
{
	for (unsigned i = 0; i < st_rep->items[0].nrep; i++) {
		const struct store_replica *r = &st_rep->items[0].rep[i];

		if (r->endpoint.len == strlen(endpoint) &&
		    !memcmp(r->endpoint.p, endpoint, r->endpoint.len))
			return r->addr;
	}
	return 0;
}

/* Objects come back where they were, once their segments are mounted
 * again; before, they are not there but their keys are taken. */
static void test_restart_remount(void **state)
{
	uint64_t a1, a2, b2, pend;
	int fd;

	(void)state;
	fresh_journal("remount");
	assert_int_equal(start_journal(NULL), 0);
	fd = th_connect(st_port);
	assert_int_equal(st_mount(fd, A, 1, "a", 0x10000, SEG), 0);
	assert_int_equal(st_mount(fd, B, 2, "b", 0x90000000, SEG), 0);
	st_req->preferred = st_str("a");
	assert_int_equal(st_put(fd, A, "k1", 5000), 0);
	assert_int_equal(st_one(fd, STORE_PUT_START, A, "k2", 3000, 2, 0), 0);
	assert_int_equal(st_one(fd, STORE_PUT_END, A, "k2", 0, 0, 0), 0);
	assert_int_equal(st_one(fd, STORE_PUT_START, W, "pend", 100, 1, 0), 0);
	pend = st_rep->items[0].rep[0].addr;
	assert_int_equal(st_put(fd, A, "gone", 100), 0);
	assert_int_equal(st_one(fd, STORE_REMOVE, A, "gone", 0, 0, 1), 0);
	st_req->preferred = st_str("");
	assert_int_equal(query(fd, "k1"), 0);
	a1 = addr_on("a");
	assert_int_equal(query(fd, "k2"), 0);
	assert_int_equal(st_rep->items[0].nrep, 2);
	a2 = addr_on("a");
	b2 = addr_on("b");
	assert_true(a1 && a2 && b2);
	close(fd);
	st_kill();

	assert_int_equal(start_journal(NULL), 0);
	fd = th_connect(st_port);
	assert_int_equal(query(fd, "k1"), -704);
	assert_int_equal(st_one(fd, STORE_EXIST, A, "k1", 0, 0, 0), 0);
	assert_int_equal(st_one(fd, STORE_PUT_START, B, "k1", 10, 1, 0), -705);
	assert_true(st_ping_needs_mount(fd, A));
	assert_int_equal(st_mount(fd, A, 1, "a", 0x10000, SEG), 0);
	assert_false(st_ping_needs_mount(fd, A));
	assert_true(st_ping_needs_mount(fd, B));
	assert_int_equal(query(fd, "k1"), 0);
	assert_int_equal(st_rep->items[0].len, 5000);
	assert_int_equal(addr_on("a"), a1);
	assert_int_equal(query(fd, "k2"), 0);
	assert_int_equal(st_rep->items[0].nrep, 1);   /* b is not back */
	assert_int_equal(addr_on("a"), a2);
	assert_int_equal(query(fd, "gone"), -704);
	/* the put in progress can end, by its writer only */
	assert_int_equal(query(fd, "pend"), -703);
	assert_int_equal(st_one(fd, STORE_PUT_END, A, "pend", 0, 0, 0), -601);
	assert_int_equal(st_one(fd, STORE_PUT_END, W, "pend", 0, 0, 0), 0);
	assert_int_equal(query(fd, "pend"), 0);
	assert_int_equal(addr_on("a"), pend);
	assert_int_equal(st_mount(fd, B, 2, "b", 0x90000000, SEG), 0);
	assert_int_equal(query(fd, "k2"), 0);
	assert_int_equal(st_rep->items[0].nrep, 2);
	assert_int_equal(addr_on("b"), b2);
	close(fd);

	/* a clean stop keeps them too */
	st_stop();
	assert_int_equal(start_journal(NULL), 0);
	fd = th_connect(st_port);
	assert_int_equal(st_mount(fd, A, 1, "a", 0x10000, SEG), 0);
	assert_int_equal(query(fd, "pend"), 0);
	assert_int_equal(addr_on("a"), pend);
	close(fd);
	st_stop();
}

/* New puts in a segment mounted again never land on restored ranges. */
static void test_restored_ranges_kept(void **state)
{
	struct { uint64_t addr, len; } old[40];
	char key[16];
	int fd, n = 0, fresh = 0;

	(void)state;
	fresh_journal("ranges");
	assert_int_equal(start_journal("--eviction_high_watermark_ratio=1"),
			 0);
	fd = th_connect(st_port);
	assert_int_equal(st_mount(fd, A, 1, "a", 0, SEG), 0);
	for (int i = 0; i < 40; i++) {
		snprintf(key, sizeof(key), "old%d", i);
		assert_int_equal(st_put(fd, A, key, 4000 + 64 * i), 0);
	}
	for (int i = 0; i < 40; i += 2) {       /* holes between them */
		snprintf(key, sizeof(key), "old%d", i);
		assert_int_equal(st_one(fd, STORE_REMOVE, A, key, 0, 0, 1), 0);
	}
	close(fd);
	st_kill();

	assert_int_equal(start_journal("--eviction_high_watermark_ratio=1"),
			 0);
	fd = th_connect(st_port);
	assert_int_equal(st_mount(fd, A, 1, "a", 0, SEG), 0);
	for (int i = 1; i < 40; i += 2) {       /* leased: never evicted */
		snprintf(key, sizeof(key), "old%d", i);
		assert_int_equal(query(fd, key), 0);
		old[n].addr = st_rep->items[0].rep[0].addr;
		old[n++].len = st_rep->items[0].len;
	}
	for (;; fresh++) {
		uint64_t at;

		snprintf(key, sizeof(key), "new%d", fresh);
		if (st_one(fd, STORE_PUT_START, A, key, 3000, 1, 0))
			break;
		at = st_rep->items[0].rep[0].addr;
		for (int i = 0; i < n; i++)
			assert_true(at + 3000 <= old[i].addr ||
				    at >= old[i].addr + old[i].len);
	}
	assert_int_equal(st_rep->items[0].err, -200);
	assert_true(fresh > 200);               /* the holes were used */
	close(fd);
	st_stop();
}

/* What eviction and the discard of stale puts took is gone for good. */
static void test_evicted_and_discarded(void **state)
{
	char key[8];
	int fd;

	(void)state;
	fresh_journal("evicted");
	assert_int_equal(st_start(0, (const char *[]){ journal_flag,
		"--put_start_discard_timeout_sec=1",
		"--eviction_high_watermark_ratio=1", NULL }), 0);
	fd = th_connect(st_port);
	assert_int_equal(st_mount(fd, A, 1, "a", 0, SEG), 0);
	assert_int_equal(st_one(fd, STORE_PUT_START, W, "stale", 64, 1, 0),
			 0);
	for (int i = 0; i < 4; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		assert_int_equal(st_put(fd, A, key, 240 << 10), 0);
	}
	assert_int_equal(st_put(fd, A, "k4", 240 << 10), 0);   /* evicts */
	assert_int_equal(query(fd, "k0"), -704);
	usleep(1300000);                        /* "stale" is set aside */
	close(fd);
	st_kill();

	assert_int_equal(start_journal("--eviction_high_watermark_ratio=1"),
			 0);
	fd = th_connect(st_port);
	assert_int_equal(st_mount(fd, A, 1, "a", 0, SEG), 0);
	assert_int_equal(query(fd, "k0"), -704);
	for (int i = 1; i < 5; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		assert_int_equal(query(fd, key), 0);
	}
	assert_int_equal(st_one(fd, STORE_PUT_END, W, "stale", 0, 0, 0), -704);
	close(fd);
	st_stop();
}

/* A segment mounted again as other memory, or not in time, loses what
 * it held. */
static void test_identity_and_ttl(void **state)
{
	int fd;

	(void)state;
	fresh_journal("identity");
	assert_int_equal(start_journal(NULL), 0);
	fd = th_connect(st_port);
	assert_int_equal(st_mount(fd, A, 1, "a", 0, SEG), 0);
	assert_int_equal(st_mount(fd, A, 2, "a2", 0, SEG), 0);
	assert_int_equal(st_mount(fd, B, 3, "b", 0, SEG), 0);
	st_req->preferred = st_str("a");
	assert_int_equal(st_put(fd, A, "ka", 100), 0);
	st_req->preferred = st_str("a2");
	assert_int_equal(st_put(fd, A, "ka2", 100), 0);
	st_req->preferred = st_str("b");
	assert_int_equal(st_put(fd, A, "kb", 100), 0);
	st_req->preferred = st_str("");
	close(fd);
	st_kill();

	assert_int_equal(start_journal("--client_ttl=2"), 0);
	fd = th_connect(st_port);
	assert_int_equal(st_mount(fd, A, 1, "a", 0, SEG * 2), 0);  /* size */
	assert_int_equal(query(fd, "ka"), -704);
	assert_int_equal(st_mount(fd, B, 2, "a2", 0, SEG), 0);     /* client */
	assert_int_equal(query(fd, "ka2"), -704);
	assert_true(st_ping_needs_mount(fd, B)); /* b waits offline */
	for (int i = 0; i < 14; i++) {          /* its client pings, late */
		st_ping_needs_mount(fd, B);
		usleep(200000);
	}
	assert_false(st_ping_needs_mount(fd, B)); /* b was dropped */
	assert_int_equal(st_mount(fd, B, 3, "b", 0, SEG), 0);
	assert_int_equal(query(fd, "kb"), -704);
	close(fd);
	st_kill();

	/* and they stay gone */
	assert_int_equal(start_journal(NULL), 0);
	fd = th_connect(st_port);
	assert_int_equal(st_mount(fd, B, 3, "b", 0, SEG), 0);
	assert_int_equal(query(fd, "kb"), -704);
	close(fd);
	st_stop();
}

/* ---- writers SIGKILLed under ---- */

#define WRITERS 3
#define KEYS 100000
#define BATCH 8

struct rec {
	uint8_t state;         /* 1 started, 2 acknowledged */
	uint8_t seg;           /* 'a' + segment */
	uint64_t addr;
};

static void key_of(char *buf, size_t len, int w, int i)
{
	snprintf(buf, len, "w%d-%d", w, i);
}

/* Send st_req as @p type; @return 0 with the reply in st_rep, or -1
 * (the master is gone). No cmocka: a child runs it. */
static int try_call(int fd, unsigned type)
{
	struct store_buf b = { 0 };
	int ret;

	st_req->h = (struct store_hdr){ .type = (uint16_t)type };
	ret = store_msg_encode(&b, st_req) || th_send_all(fd, b.p, b.len) ||
	      st_recv(fd) ? -1 : 0;
	store_buf_free(&b);
	return ret;
}

/* Put batches until the master dies, recording what it said. */
static void writer(int w, struct rec *recs)
{
	static char keys[BATCH][32];
	int fd = th_connect_try(st_port);

	if (fd < 0)
		_exit(1);
	st_req->replicas = 1;
	memset(st_req->client, 'w' + w, STORE_ID_LEN);
	for (int i = 0; i + BATCH <= KEYS; i += BATCH) {
		st_req->n = BATCH;
		for (int k = 0; k < BATCH; k++) {
			key_of(keys[k], sizeof(keys[k]), w, i + k);
			st_req->items[k].key = st_str(keys[k]);
			st_req->items[k].len = 4096;
		}
		if (try_call(fd, STORE_PUT_START))
			_exit(0);
		for (int k = 0; k < BATCH; k++) {
			const struct store_item *it = &st_rep->items[k];

			if (it->err || it->nrep != 1)
				_exit(2);
			recs[i + k].addr = it->rep[0].addr;
			recs[i + k].seg = (uint8_t)it->rep[0].endpoint.p[0];
			recs[i + k].state = 1;
		}
		if (try_call(fd, STORE_PUT_END))
			_exit(0);
		for (int k = 0; k < BATCH; k++)
			if (!st_rep->items[k].err)
				recs[i + k].state = 2;
	}
	_exit(3);
}

static void mount_all(int fd)
{
	static const char *const names[] = { "a", "b", "c" };

	for (int g = 0; g < 3; g++)
		assert_int_equal(st_mount(fd, A, (uint8_t)(g + 1), names[g],
					  (uint64_t)g << 32, 256u << 20), 0);
}

/* Every put acknowledged before the SIGKILL is there after the restart
 * and the remount, at the same place. */
static void test_sigkill_under_writers(void **state)
{
	struct rec *recs = mmap(NULL, sizeof(struct rec) * WRITERS * KEYS,
				PROT_READ | PROT_WRITE,
				MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pid_t pids[WRITERS];
	int64_t t0, dt;
	int fd, acked = 0, checked = 0;
	static char keys[128][32];
	int idx[128][2];

	(void)state;
	assert_true(recs != MAP_FAILED);
	fresh_journal("writers");
	assert_int_equal(start_journal(NULL), 0);
	fd = th_connect(st_port);
	mount_all(fd);
	for (int w = 0; w < WRITERS; w++) {
		pids[w] = fork();
		assert_true(pids[w] >= 0);
		if (!pids[w])
			writer(w, recs + (size_t)w * KEYS);
	}
	/* kill it under them once a few hundred puts were answered */
	for (int64_t t0 = th_now_ms(); th_now_ms() - t0 < 20000;
	     usleep(20000)) {
		int done = 0;

		for (size_t i = 0; i < (size_t)WRITERS * KEYS; i++)
			done += recs[i].state == 2;
		if (done >= 500)
			break;
	}
	st_kill();
	for (int w = 0; w < WRITERS; w++) {
		int status = th_wait_exit(pids[w], 10000);

		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
	}
	close(fd);

	t0 = th_now_ms();
	assert_int_equal(start_journal(NULL), 0);
	fd = th_connect(st_port);
	mount_all(fd);
	for (int w = 0; w < WRITERS; w++) {
		for (int i = 0; i < KEYS; i++) {
			if (recs[(size_t)w * KEYS + i].state != 2)
				continue;
			key_of(keys[acked % 128], sizeof(keys[0]), w, i);
			idx[acked % 128][0] = w;
			idx[acked % 128][1] = i;
			if (++acked % 128)
				continue;
			st_req->n = 128;
			for (int k = 0; k < 128; k++)
				st_req->items[k].key = st_str(keys[k]);
			st_call(fd, STORE_QUERY);
			for (int k = 0; k < 128; k++, checked++) {
				const struct rec *r = &recs[(size_t)idx[k][0] *
							    KEYS + idx[k][1]];

				assert_int_equal(st_rep->items[k].err, 0);
				assert_int_equal(st_rep->items[k].nrep, 1);
				assert_int_equal(st_rep->items[k].rep[0].addr,
						 r->addr);
				assert_int_equal(
					st_rep->items[k].rep[0].endpoint.p[0],
					r->seg);
			}
		}
	}
	for (int k = 0; k < acked % 128; k++, checked++) {  /* the rest */
		const struct rec *r = &recs[(size_t)idx[k][0] * KEYS +
					    idx[k][1]];

		assert_int_equal(query(fd, keys[k]), 0);
		assert_int_equal(st_rep->items[0].rep[0].addr, r->addr);
	}
	dt = th_now_ms() - t0;
	assert_true(checked >= 500);
	assert_int_equal(checked, acked);
	print_message("%d acknowledged puts all there; restart, remount and "
		      "reads took %lld ms\n", checked, (long long)dt);
	assert_true(dt < 5000 || th_under_asan());
	close(fd);
	st_stop();
	munmap(recs, sizeof(struct rec) * WRITERS * KEYS);
}

/* ---- journals refused ---- */

static void test_refused(void **state)
{
	char flag2[80];
	int fd;

	(void)state;
	fresh_journal("notours");
	fd = open(journal, O_WRONLY | O_CREAT, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "not a database at all, no", 25), 25);
	close(fd);
	assert_int_equal(start_journal(NULL), 1);

	fresh_journal("cluster");
	assert_int_equal(start_journal("--cluster_id=one"), 0);
	snprintf(flag2, sizeof(flag2), "%s", journal_flag);
	{
		const char *args[] = { flag2, "--cluster_id=one", NULL };
		pid_t first = st_pid;
		uint16_t port = st_port;

		/* in use by the first (which st_start() must not stop) */
		st_pid = 0;
		assert_int_equal(st_start(0, args), 1);
		st_pid = first;
		st_port = port;
	}
	st_stop();
	assert_int_equal(start_journal("--cluster_id=two"), 1);
	assert_int_equal(start_journal(NULL), 1);   /* mooncake_cluster */
	assert_int_equal(start_journal("--cluster_id=one"), 0);
	st_stop();
}

static int group_setup(void **state)
{
	assert_non_null(mkdtemp(dir));
	return st_setup(state);
}

static int group_teardown(void **state)
{
	st_teardown(state);
	return th_rm_tree(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_restart_remount),
		cmocka_unit_test(test_restored_ranges_kept),
		cmocka_unit_test(test_evicted_and_discarded),
		cmocka_unit_test(test_identity_and_ttl),
		cmocka_unit_test(test_sigkill_under_writers),
		cmocka_unit_test(test_refused),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
