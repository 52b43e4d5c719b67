/*
 * xfer-stored's versions and upserts, spoken to over its RPC (the master
 * a real process): each put that ends gets the next version of one
 * counter, which sync answers and a SIGKILLed master's journal keeps; a
 * query with min_version fails with the version there; an upsert in
 * progress leaves readers the old object, preempts a put in progress,
 * and on its end replaces the object (revoked, the old one stays);
 * removal by pattern; replicas cleared by segment; a journal of before
 * versions is upgraded.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "test/helpers.h"
#include "test/th_master.h"

#define SEG (1u << 20)
#define UPSERT 4                       /* put_start's flag */

static const uint8_t A[STORE_ID_LEN] = { 'A' }, B[STORE_ID_LEN] = { 'B' };
static char dir[] = "/tmp/it_store_upsert.XXXXXX";
static char journal[64], journal_flag[80];

static int64_t sync_version(int fd)
{
	st_call(fd, STORE_SYNC);
	assert_int_equal(st_rep->err, 0);
	return st_rep->count;
}

/* Query @p key with @p min: its error; *@p version, *@p addr its. */
static int query(int fd, const char *key, uint64_t min, uint64_t *version,
		 uint64_t *addr)
{
	int ret;

	st_req->min_version = min;
	ret = st_one(fd, STORE_QUERY, A, key, 0, 0, false);
	st_req->min_version = 0;
	*version = st_rep->items[0].version;
	*addr = st_rep->items[0].nrep ? st_rep->items[0].rep[0].addr : 0;
	return ret;
}

static int upsert_start(int fd, const uint8_t *c, const char *key,
			uint64_t len, uint64_t *addr)
{
	int ret;

	st_req->flags = UPSERT;
	ret = st_one(fd, STORE_PUT_START, c, key, len, 1, false);
	st_req->flags = 0;
	*addr = st_rep->items[0].nrep ? st_rep->items[0].rep[0].addr : 0;
	return ret;
}

static void test_versions_upsert(void **state)
{
	uint64_t v, a0, a1, a2, got;
	int fd;

	(void)state;
	assert_int_equal(st_start(0, NULL), 0);
	fd = th_connect(st_port);
	assert_int_equal(st_mount(fd, A, 1, "a", 0x10000, SEG), 0);
	assert_int_equal(sync_version(fd), 0);
	assert_int_equal(st_put(fd, A, "k", 1000), 0);
	assert_int_equal(st_put(fd, A, "j", 1000), 0);
	assert_int_equal(sync_version(fd), 2);
	assert_int_equal(query(fd, "k", 0, &v, &a0), 0);
	assert_int_equal(v, 1);
	assert_int_equal(query(fd, "k", 1, &v, &got), 0);
	assert_int_equal(query(fd, "k", 2, &v, &got), -720);
	assert_int_equal(v, 1);                /* the largest readable */
	assert_int_equal(got, 0);              /* and nothing to read */
	assert_int_equal(query(fd, "none", 0, &v, &got), -704);
	assert_int_equal(v, 0);
	/* a put of a key there changes nothing, version included */
	assert_int_equal(st_one(fd, STORE_PUT_START, A, "k", 10, 1, 0), -705);

	/* an upsert in progress: readers get the old object */
	assert_int_equal(upsert_start(fd, A, "k", 2000, &a1), 0);
	assert_true(a1 && a1 != a0);
	assert_int_equal(query(fd, "k", 0, &v, &got), 0);
	assert_int_equal(v, 1);
	assert_int_equal(got, a0);
	assert_int_equal(st_rep->items[0].len, 1000);
	assert_int_equal(st_one(fd, STORE_EXIST, A, "k", 0, 0, 0), 1);
	/* a put does not preempt it; another upsert does */
	assert_int_equal(st_one(fd, STORE_PUT_START, B, "k", 10, 1, 0), -705);
	assert_int_equal(upsert_start(fd, B, "k", 3000, &a2), 0);
	assert_int_equal(st_one(fd, STORE_PUT_END, A, "k", 0, 0, 0), -601);
	assert_int_equal(query(fd, "k", 0, &v, &got), 0);
	assert_int_equal(got, a0);
	assert_int_equal(st_one(fd, STORE_PUT_END, B, "k", 0, 0, 0), 0);
	assert_int_equal(query(fd, "k", 3, &v, &got), 0);
	assert_int_equal(v, 3);
	assert_int_equal(got, a2);
	assert_int_equal(st_rep->items[0].len, 3000);
	assert_int_equal(sync_version(fd), 3);

	/* revoked, the old object stays; ended, the old space is reused
	 * only once its lease ran out (queried above: leased) */
	assert_int_equal(upsert_start(fd, A, "k", 500, &a1), 0);
	assert_int_equal(st_one(fd, STORE_PUT_REVOKE, A, "k", 0, 0, 0), 0);
	assert_int_equal(query(fd, "k", 0, &v, &got), 0);
	assert_int_equal(v, 3);
	assert_int_equal(got, a2);
	/* a remove while an upsert is in progress removes the old one */
	assert_int_equal(upsert_start(fd, A, "k", 700, &a1), 0);
	assert_int_equal(st_one(fd, STORE_REMOVE, A, "k", 0, 0, 1), 0);
	assert_int_equal(query(fd, "k", 0, &v, &got), -703);
	assert_int_equal(st_one(fd, STORE_PUT_END, A, "k", 0, 0, 0), 0);
	assert_int_equal(query(fd, "k", 0, &v, &got), 0);
	assert_int_equal(v, 4);
	assert_int_equal(got, a1);
	/* an upsert of a new key is a put */
	assert_int_equal(upsert_start(fd, A, "new", 64, &a1), 0);
	assert_int_equal(query(fd, "new", 0, &v, &got), -703);
	assert_int_equal(st_one(fd, STORE_PUT_END, A, "new", 0, 0, 0), 0);
	assert_int_equal(query(fd, "new", 0, &v, &got), 0);
	assert_int_equal(v, 5);
	close(fd);
	st_stop();
}

/* The space of an object an upsert replaced is not given again while a
 * reader's lease of it runs (1 s here), and is after. */
static void test_retired_space(void **state)
{
	const char *args[] = { "--default_kv_lease_ttl=1000",
			       "--eviction_high_watermark_ratio=1", NULL };
	uint64_t v, a0, a1;
	int fd;

	(void)state;
	assert_int_equal(st_start(0, args), 0);
	fd = th_connect(st_port);
	/* room for two objects of half the segment */
	assert_int_equal(st_mount(fd, A, 1, "a", 0x10000, 8192), 0);
	assert_int_equal(st_put(fd, A, "k", 4096), 0);
	assert_int_equal(query(fd, "k", 0, &v, &a0), 0);   /* leased */
	st_req->flags = UPSERT | 2;            /* hard-pinned: not evicted */
	assert_int_equal(st_one(fd, STORE_PUT_START, A, "k", 4096, 1, 0), 0);
	st_req->flags = 0;
	a1 = st_rep->items[0].rep[0].addr;
	assert_true(a1 != a0);
	assert_int_equal(st_one(fd, STORE_PUT_END, A, "k", 0, 0, 0), 0);
	usleep(300 * 1000);                    /* three ticks, in the lease */
	/* the old space is held: no room for a third */
	assert_int_equal(st_one(fd, STORE_PUT_START, A, "x", 4096, 1, 0),
			 -200);
	usleep(1300 * 1000);
	assert_int_equal(st_one(fd, STORE_PUT_START, A, "x", 4096, 1, 0), 0);
	assert_int_equal(st_rep->items[0].rep[0].addr, a0);
	close(fd);
	st_stop();
}

static void test_remove_regex(void **state)
{
	static const char *keys[] = { "a/1", "a/2", "ab/3", "b/1" };
	int fd;

	(void)state;
	assert_int_equal(st_start(0, NULL), 0);
	fd = th_connect(st_port);
	assert_int_equal(st_mount(fd, A, 1, "a", 0x10000, SEG), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(st_put(fd, A, keys[i], 100), 0);
	assert_int_equal(st_one(fd, STORE_EXIST, A, "a/2", 0, 0, 0), 1);
	st_req->pattern = st_str("^a/[0-9]$");
	st_req->force = 0;
	st_call(fd, STORE_REMOVE_REGEX);
	assert_int_equal(st_rep->err, 0);
	assert_int_equal(st_rep->count, 1);    /* a/2 is leased */
	st_req->force = 1;
	st_call(fd, STORE_REMOVE_REGEX);
	assert_int_equal(st_rep->count, 1);
	st_req->pattern = st_str("(");
	st_call(fd, STORE_REMOVE_REGEX);
	assert_int_equal(st_rep->count, -600);
	assert_int_equal(st_one(fd, STORE_EXIST, A, "ab/3", 0, 0, 0), 1);
	assert_int_equal(st_one(fd, STORE_EXIST, A, "b/1", 0, 0, 0), 1);
	assert_int_equal(st_one(fd, STORE_EXIST, A, "a/1", 0, 0, 0), 0);
	/* anywhere in the key */
	st_req->pattern = st_str("/");
	st_req->force = 1;                     /* leased by the tests */
	st_call(fd, STORE_REMOVE_REGEX);
	assert_int_equal(st_rep->count, 2);
	st_req->force = 0;
	close(fd);
	st_stop();
}

static int clear(int fd, const uint8_t *c, const char *key, const char *seg)
{
	st_req->preferred = st_str(seg);
	return st_one(fd, STORE_REPLICA_CLEAR, c, key, 0, 0, false);
}

/* Replicas cleared from one segment or all, by the client that put the
 * object only, not while leased; the journal keeps what is left. */
static void test_replica_clear(void **state)
{
	const char *args[] = { journal_flag, NULL };
	uint64_t v, got;
	int fd;

	(void)state;
	snprintf(journal, sizeof(journal), "%s/clear", dir);
	snprintf(journal_flag, sizeof(journal_flag), "--journal=%s", journal);
	assert_int_equal(st_start(0, args), 0);
	fd = th_connect(st_port);
	assert_int_equal(st_mount(fd, A, 1, "a", 0x10000, SEG), 0);
	assert_int_equal(st_mount(fd, B, 2, "b", 0x90000000, SEG), 0);
	assert_int_equal(st_one(fd, STORE_PUT_START, A, "k", 100, 2, 0), 0);
	assert_int_equal(st_one(fd, STORE_PUT_END, A, "k", 0, 0, 0), 0);
	assert_int_equal(st_one(fd, STORE_PUT_START, A, "p", 100, 1, 0), 0);
	assert_int_equal(clear(fd, B, "k", "b"), -601);
	assert_int_equal(clear(fd, A, "k", "c"), -710);
	assert_int_equal(clear(fd, A, "none", ""), -704);
	assert_int_equal(clear(fd, A, "p", ""), -703);
	assert_int_equal(clear(fd, A, "k", "b"), 0);
	assert_int_equal(clear(fd, A, "k", "b"), -710);
	st_req->preferred = st_str("");
	close(fd);
	st_kill();

	assert_int_equal(st_start(0, args), 0);
	fd = th_connect(st_port);
	assert_int_equal(st_mount(fd, A, 1, "a", 0x10000, SEG), 0);
	assert_int_equal(st_mount(fd, B, 2, "b", 0x90000000, SEG), 0);
	assert_int_equal(query(fd, "k", 0, &v, &got), 0);    /* leases it */
	assert_int_equal(st_rep->items[0].nrep, 1);
	assert_int_equal(st_rep->items[0].rep[0].endpoint.len, 1);
	assert_int_equal(st_rep->items[0].rep[0].endpoint.p[0], 'a');
	assert_int_equal(clear(fd, A, "k", ""), -706);
	assert_int_equal(st_one(fd, STORE_REMOVE, A, "k", 0, 0, 1), 0);
	/* the last replica cleared, the object is gone */
	st_req->preferred = st_str("a");
	assert_int_equal(st_put(fd, A, "j", 100), 0);
	assert_int_equal(clear(fd, A, "j", "a"), 0);
	assert_int_equal(clear(fd, A, "j", "a"), -704);
	st_req->preferred = st_str("");
	assert_int_equal(query(fd, "j", 0, &v, &got), -704);
	close(fd);
	st_stop();
}

/* The counter outlives its objects and a SIGKILL; objects keep theirs. */
static void test_journal(void **state)
{
	const char *args[] = { journal_flag, NULL };
	uint64_t v, got;
	int fd;

	(void)state;
	snprintf(journal, sizeof(journal), "%s/j", dir);
	snprintf(journal_flag, sizeof(journal_flag), "--journal=%s", journal);
	assert_int_equal(st_start(0, args), 0);
	fd = th_connect(st_port);
	assert_int_equal(st_mount(fd, A, 1, "a", 0x10000, SEG), 0);
	assert_int_equal(st_put(fd, A, "k", 100), 0);
	assert_int_equal(st_put(fd, A, "gone", 100), 0);
	assert_int_equal(upsert_start(fd, A, "k", 200, &got), 0);
	assert_int_equal(st_one(fd, STORE_PUT_END, A, "k", 0, 0, 0), 0);
	assert_int_equal(st_put(fd, A, "last", 100), 0);
	assert_int_equal(st_one(fd, STORE_REMOVE, A, "last", 0, 0, 1), 0);
	assert_int_equal(sync_version(fd), 4);
	close(fd);
	st_kill();

	assert_int_equal(st_start(0, args), 0);
	fd = th_connect(st_port);
	assert_int_equal(sync_version(fd), 4);
	assert_int_equal(st_mount(fd, A, 1, "a", 0x10000, SEG), 0);
	assert_int_equal(query(fd, "k", 0, &v, &got), 0);
	assert_int_equal(v, 3);
	assert_int_equal(st_rep->items[0].len, 200);
	assert_int_equal(query(fd, "gone", 0, &v, &got), 0);
	assert_int_equal(v, 2);
	assert_int_equal(st_put(fd, A, "next", 100), 0);
	assert_int_equal(query(fd, "next", 0, &v, &got), 0);
	assert_int_equal(v, 5);
	close(fd);
	st_stop();
}

/* A journal written before versions (user_version 1, no column) opens,
 * its objects at version 0, the counter from 0. */
static void test_journal_upgrade(void **state)
{
	const char *args[] = { journal_flag, NULL };
	sqlite3 *db;
	uint64_t v, got;
	int fd;

	(void)state;
	assert_int_equal(st_start(0, args), 0);   /* test_journal's file */
	fd = th_connect(st_port);
	assert_int_equal(st_mount(fd, A, 1, "a", 0x10000, SEG), 0);
	close(fd);
	st_stop();
	assert_int_equal(sqlite3_open(journal, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db,
		"BEGIN; CREATE TABLE o2 AS SELECT key, len, flags, state, "
		"writer, replicas FROM objects; DROP TABLE objects;"
		"CREATE TABLE objects (key BLOB NOT NULL PRIMARY KEY,"
		" len INTEGER NOT NULL, flags INTEGER NOT NULL,"
		" state INTEGER NOT NULL, writer BLOB NOT NULL,"
		" replicas BLOB NOT NULL) WITHOUT ROWID;"
		"INSERT INTO objects SELECT * FROM o2; DROP TABLE o2;"
		"DELETE FROM meta WHERE name = 'version';"
		"PRAGMA user_version = 1; COMMIT;", NULL, NULL, NULL),
		SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(st_start(0, args), 0);
	fd = th_connect(st_port);
	assert_int_equal(sync_version(fd), 0);
	assert_int_equal(st_mount(fd, A, 1, "a", 0x10000, SEG), 0);
	assert_int_equal(query(fd, "k", 0, &v, &got), 0);
	assert_int_equal(v, 0);
	assert_int_equal(st_rep->items[0].len, 200);
	assert_int_equal(query(fd, "k", 1, &v, &got), -720);
	assert_int_equal(st_put(fd, A, "n", 100), 0);
	assert_int_equal(sync_version(fd), 1);
	close(fd);
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
		cmocka_unit_test(test_versions_upsert),
		cmocka_unit_test(test_retired_space),
		cmocka_unit_test(test_remove_regex),
		cmocka_unit_test(test_replica_clear),
		cmocka_unit_test(test_journal),
		cmocka_unit_test(test_journal_upgrade),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
