/*
 * xfer-stored's replication tasks (store/master/replicate.c) as a real
 * process driven by a small client of its RPC: replicas raised 1 -> 3
 * by copies handed to the owner of the source (tier_poll) and reported
 * by it (tier_done), query_task's states along the way, replicas lowered
 * once the lease is out, a replica lost with an unmounted segment made
 * again, a failed copy tried again, and bad input refused.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test/helpers.h"
#include "test/th_master.h"

static const uint8_t A[STORE_ID_LEN] = { 'A' }, B[STORE_ID_LEN] = { 'B' },
		     C[STORE_ID_LEN] = { 'C' };

#define KiB 1024u

/* DRAM segments "a", "b", "c" (ids 1, 2, 3) of clients A, B, C. */
static int start(void)
{
	int fd;

	assert_int_equal(st_start(0, (const char *[]){
		"--default_kv_lease_ttl=200", NULL }), 0);
	fd = th_connect(st_port);
	assert_int_equal(st_mount(fd, A, 1, "a", 0x100000, 1024 * KiB), 0);
	assert_int_equal(st_mount(fd, B, 2, "b", 0x200000, 1024 * KiB), 0);
	assert_int_equal(st_mount(fd, C, 3, "c", 0x300000, 1024 * KiB), 0);
	return fd;
}

/* Put @p key (64 KiB) with one replica in "a". */
static void put_a(int fd, const char *key)
{
	st_req->preferred = st_str("a");
	assert_int_equal(st_put(fd, A, key, 64 * KiB), 0);
	st_req->preferred = st_str("");
}

/* Replicate @p key to @p dram / @p ssd. @return the task id or error. */
static int64_t replicate(int fd, const char *key, uint8_t dram, uint8_t ssd)
{
	int err;

	st_req->ssd_replicas = ssd;
	err = st_one(fd, STORE_REPLICATE, A, key, 0, dram, false);
	st_req->ssd_replicas = 0;
	return err ? err : (int64_t)st_rep->items[0].task;
}

/* query_task @p id: its status, or the error. */
static int status(int fd, uint64_t id)
{
	st_req->task = id;
	st_call(fd, STORE_QUERY_TASK);
	return st_rep->err ? st_rep->err : st_rep->task_status;
}

/* How many replicas a query lists for @p key. */
static int nrep(int fd, const char *key)
{
	int err = st_one(fd, STORE_QUERY, A, key, 0, 0, false);

	return err ? err : st_rep->items[0].nrep;
}

/* Poll as @p c: @return the copies it got (the first one's source and
 * destination endpoints in @p src, @p dst). */
static unsigned poll_as(int fd, const uint8_t *c, char *src, char *dst)
{
	memcpy(st_req->client, c, STORE_ID_LEN);
	st_call(fd, STORE_TIER_POLL);
	assert_int_equal(st_rep->err, 0);
	if (st_rep->n) {
		snprintf(src, 8, "%.*s", st_rep->items[0].rep[0].endpoint.len,
			 st_rep->items[0].rep[0].endpoint.p);
		snprintf(dst, 8, "%.*s", st_rep->items[0].rep[1].endpoint.len,
			 st_rep->items[0].rep[1].endpoint.p);
	}
	return st_rep->n;
}

/* Wait up to 2 s for a copy given to @p c (the tick makes it). */
static unsigned wait_copy(int fd, const uint8_t *c, char *src, char *dst)
{
	for (int i = 0; i < 200; i++) {
		if (poll_as(fd, c, src, dst))
			return 1;
		usleep(10000);
	}
	return 0;
}

static int wait_status(int fd, uint64_t id, int want)
{
	int s = -1;

	for (int i = 0; i < 200 && (s = status(fd, id)) != want; i++)
		usleep(10000);
	return s;
}

static void test_raise_lower(void **state)
{
	char src[8], dst[8], seen[2][8];
	int fd = start();
	int64_t id;

	(void)state;
	put_a(fd, "k");
	id = replicate(fd, "k", 3, 0);
	assert_true(id > 0);
	assert_int_equal(status(fd, (uint64_t)id), STORE_TASK_PENDING);
	assert_int_equal(st_rep->task_type, STORE_TASK_REPLICATE);
	assert_true(st_rep->created_ms > 0);
	/* the owner of the source copies, one copy at a time; B and C get
	 * none */
	for (int k = 0; k < 2; k++) {
		assert_int_equal(wait_copy(fd, A, src, dst), 1);
		assert_string_equal(src, "a");
		strcpy(seen[k], dst);
		assert_int_equal(poll_as(fd, B, src, dst), 0);
		assert_int_equal(poll_as(fd, C, src, dst), 0);
		assert_int_equal(wait_status(fd, (uint64_t)id,
					     STORE_TASK_PROCESSING),
				 STORE_TASK_PROCESSING);
		assert_memory_equal(st_rep->client, A, STORE_ID_LEN);
		/* not listed while it fills */
		assert_int_equal(nrep(fd, "k"), 1 + k);
		assert_int_equal(st_tier_done(fd, A, "k", 0), 0);
	}
	assert_string_not_equal(seen[0], seen[1]);
	assert_string_not_equal(seen[0], "a");
	assert_string_not_equal(seen[1], "a");
	assert_int_equal(wait_status(fd, (uint64_t)id, STORE_TASK_SUCCESS),
			 STORE_TASK_SUCCESS);
	assert_true(st_rep->message.len > 0);
	assert_true(st_rep->updated_ms >= st_rep->created_ms);
	assert_int_equal(nrep(fd, "k"), 3);   /* leased for 200 ms now */

	/* down to one: once the lease is out, the extra ones go */
	id = replicate(fd, "k", 1, 0);
	assert_true(id > 0);
	assert_int_equal(status(fd, (uint64_t)id), STORE_TASK_PENDING);
	assert_int_equal(wait_status(fd, (uint64_t)id, STORE_TASK_SUCCESS),
			 STORE_TASK_SUCCESS);
	assert_int_equal(nrep(fd, "k"), 1);
	/* the space went back: 960 KiB fit in b again */
	st_req->preferred = st_str("b");
	assert_int_equal(st_put(fd, B, "big", 960 * KiB), 0);
	st_req->preferred = st_str("");
	close(fd);
	st_stop();
}

/* A segment unmounted: the objects that asked for more replicas than
 * remain get them again, on a segment they are not in. */
static void test_repair(void **state)
{
	char src[8], dst[8], names[2][8], *body;
	int fd = start();
	bool gone_b;
	size_t len;

	(void)state;
	st_req->preferred = st_str("a");
	assert_int_equal(st_one(fd, STORE_PUT_START, A, "r", 64 * KiB, 2,
				false), 0);
	assert_int_equal(st_one(fd, STORE_PUT_END, A, "r", 0, 0, false), 0);
	st_req->preferred = st_str("");
	assert_int_equal(nrep(fd, "r"), 2);
	/* the one not in "a" goes; "a" copies into the third */
	st_one(fd, STORE_QUERY, A, "r", 0, 0, false);
	for (int i = 0; i < 2; i++)
		snprintf(names[i], 8, "%.*s",
			 st_rep->items[0].rep[i].endpoint.len,
			 st_rep->items[0].rep[i].endpoint.p);
	assert_string_equal(names[0], "a");
	gone_b = !strcmp(names[1], "b");
	assert_int_equal(st_unmount(fd, gone_b ? B : C, gone_b ? 2 : 3), 0);
	assert_int_equal(nrep(fd, "r"), 1);
	assert_int_equal(wait_copy(fd, A, src, dst), 1);
	assert_string_equal(src, "a");
	assert_string_equal(dst, gone_b ? "c" : "b");
	/* a failed copy is tried again */
	assert_int_equal(st_tier_done(fd, A, "r", -800), 0);
	assert_int_equal(wait_copy(fd, A, src, dst), 1);
	assert_int_equal(st_tier_done(fd, A, "r", 0), 0);
	for (int i = 0; i < 100 && nrep(fd, "r") != 2; i++)
		usleep(10000);
	assert_int_equal(nrep(fd, "r"), 2);
	/* the task is found by id: the first one made (1) */
	assert_int_equal(wait_status(fd, 1, STORE_TASK_SUCCESS),
			 STORE_TASK_SUCCESS);
	assert_int_equal(st_rep->task_type, STORE_TASK_REPLICATE);
	assert_int_equal(st_http_get(st_metrics_port, "/metrics", &body, &len),
			 200);
	assert_non_null(strstr(body, "\nxfer_stored_repair_tasks_total 1\n"));
	assert_non_null(strstr(body, "\nxfer_stored_active_tasks 0\n"));
	free(body);
	close(fd);
	st_stop();
}

/* create_task: a copy (@p move 0; source "") or a move of @p key into
 * the @p n segments @p to. @return the task id, or the error. */
static int64_t create(int fd, const char *key, int move, const char *from,
		      const char *const *to, uint32_t n)
{
	memcpy(st_req->client, A, STORE_ID_LEN);
	st_req->task_type = (uint8_t)move;
	st_req->key = st_str(key);
	st_req->preferred = st_str(from);
	st_req->n = n;
	for (uint32_t i = 0; i < n; i++)
		st_req->items[i].key = st_str(to[i]);
	st_call(fd, STORE_CREATE_TASK);
	st_req->preferred = st_str("");
	return st_rep->err ? st_rep->err : (int64_t)st_rep->task;
}

/* Mooncake's copy and move tasks: replicas made in the segments named,
 * in order; a move drops its source's once its copy is done. */
static void test_copy_move(void **state)
{
	char src[8], dst[8], w[2][8];
	int fd = start();
	int64_t id;

	(void)state;
	put_a(fd, "m");
	id = create(fd, "m", 0, "", (const char *[]){ "c", "b" }, 2);
	assert_true(id > 0);
	assert_int_equal(status(fd, (uint64_t)id), STORE_TASK_PENDING);
	assert_int_equal(st_rep->task_type, STORE_TASK_REPLICA_COPY);
	for (int k = 0; k < 2; k++) {
		assert_int_equal(wait_copy(fd, A, src, dst), 1);
		assert_string_equal(src, "a");
		assert_string_equal(dst, k ? "b" : "c");
		assert_int_equal(st_tier_done(fd, A, "m", 0), 0);
	}
	assert_int_equal(wait_status(fd, (uint64_t)id, STORE_TASK_SUCCESS),
			 STORE_TASK_SUCCESS);
	assert_int_equal(nrep(fd, "m"), 3);

	put_a(fd, "n");
	id = create(fd, "n", 1, "a", (const char *[]){ "b" }, 1);
	assert_true(id > 0);
	assert_int_equal(wait_copy(fd, A, src, dst), 1);
	assert_string_equal(dst, "b");
	assert_int_equal(nrep(fd, "n"), 1);   /* leases it: 200 ms */
	assert_int_equal(st_tier_done(fd, A, "n", 0), 0);
	assert_int_equal(wait_status(fd, (uint64_t)id, STORE_TASK_SUCCESS),
			 STORE_TASK_SUCCESS);
	assert_int_equal(st_rep->task_type, STORE_TASK_REPLICA_MOVE);
	assert_int_equal(st_one(fd, STORE_QUERY, A, "n", 0, 0, false), 0);
	assert_int_equal(st_rep->items[0].nrep, 1);
	snprintf(w[0], 8, "%.*s", st_rep->items[0].rep[0].endpoint.len,
		 st_rep->items[0].rep[0].endpoint.p);
	assert_string_equal(w[0], "b");
	/* a move from b to c, copied by b, the source's owner */
	usleep(250000);
	id = create(fd, "n", 1, "b", (const char *[]){ "c" }, 1);
	assert_int_equal(wait_copy(fd, B, src, dst), 1);
	assert_string_equal(src, "b");
	assert_string_equal(dst, "c");
	assert_int_equal(st_tier_done(fd, B, "n", 0), 0);
	assert_int_equal(wait_status(fd, (uint64_t)id, STORE_TASK_SUCCESS),
			 STORE_TASK_SUCCESS);
	st_one(fd, STORE_QUERY, A, "n", 0, 0, false);
	snprintf(w[1], 8, "%.*s", st_rep->items[0].rep[0].endpoint.len,
		 st_rep->items[0].rep[0].endpoint.p);
	assert_int_equal(st_rep->items[0].nrep, 1);
	assert_string_equal(w[1], "c");

	/* refused at once */
	assert_int_equal(create(fd, "zz", 0, "", (const char *[]){ "b" }, 1),
			 -704);
	assert_int_equal(create(fd, "n", 0, "", (const char *[]){ "zz" }, 1),
			 -101);
	assert_int_equal(create(fd, "n", 0, "", (const char *[]){ "" }, 1),
			 -600);
	assert_int_equal(create(fd, "n", 0, "c", (const char *[]){ "b" }, 1),
			 -600);                /* a copy names no source */
	assert_int_equal(create(fd, "n", 1, "a", (const char *[]){ "b" }, 1),
			 -600);                /* no replica in a */
	assert_int_equal(create(fd, "n", 1, "c", (const char *[]){ "c" }, 1),
			 -600);
	assert_int_equal(create(fd, "n", 1, "c",
				(const char *[]){ "a", "b" }, 2), -600);
	close(fd);
	st_stop();
}

/* The only replica's segment goes while it is copied: the object goes
 * (its new replica with it), its task fails, the master serves on. */
static void test_source_gone(void **state)
{
	char src[8], dst[8];
	int fd = start();
	int64_t id;

	(void)state;
	put_a(fd, "g");
	id = replicate(fd, "g", 2, 0);
	assert_int_equal(wait_copy(fd, A, src, dst), 1);
	assert_int_equal(st_unmount(fd, A, 1), 0);
	assert_int_equal(nrep(fd, "g"), -704);
	assert_int_equal(wait_status(fd, (uint64_t)id, STORE_TASK_FAILED),
			 STORE_TASK_FAILED);
	assert_int_equal(st_tier_done(fd, A, "g", 0), -704);
	assert_false(st_ping_needs_mount(fd, B));
	close(fd);
	st_stop();
}

/* SSD replicas: copied from DRAM by its owner; an object only on SSD
 * is copied back into DRAM by the new replica's owner, reading. */
static void test_ssd(void **state)
{
	char src[8], dst[16], w[64];
	int fd = start();
	int64_t id;
	const uint8_t *who = NULL;

	(void)state;
	st_req->medium = STORE_MEDIUM_SSD;
	assert_int_equal(st_mount(fd, B, 5, "nvmeof/b", 0, 1024 * KiB), 0);
	st_req->medium = STORE_MEDIUM_DRAM;
	put_a(fd, "s");
	id = replicate(fd, "s", 1, 1);
	assert_true(id > 0);
	assert_int_equal(wait_copy(fd, A, src, dst), 1);
	assert_string_equal(src, "a");
	assert_int_equal(st_rep->items[0].rep[1].endpoint.len, 8);
	assert_memory_equal(st_rep->items[0].rep[1].endpoint.p, "nvmeof/b", 8);
	assert_int_equal(st_tier_done(fd, A, "s", 0), 0);
	assert_int_equal(wait_status(fd, (uint64_t)id, STORE_TASK_SUCCESS),
			 STORE_TASK_SUCCESS);
	/* DRAM ones first, then SSD */
	assert_int_equal(nrep(fd, "s"), 2);
	snprintf(w, sizeof(w), "%.*s", st_rep->items[0].rep[1].endpoint.len,
		 st_rep->items[0].rep[1].endpoint.p);
	assert_string_equal(w, "nvmeof/b");
	usleep(250000);
	/* down to SSD only, then back to DRAM: read by the new one's owner */
	id = replicate(fd, "s", 0, 1);
	assert_int_equal(wait_status(fd, (uint64_t)id, STORE_TASK_SUCCESS),
			 STORE_TASK_SUCCESS);
	assert_int_equal(nrep(fd, "s"), 1);
	usleep(250000);
	id = replicate(fd, "s", 1, 1);
	for (int i = 0; i < 200 && !who; i++) {
		const uint8_t *c[] = { A, B, C };

		for (int k = 0; k < 3 && !who; k++)
			if (poll_as(fd, c[k], src, dst))
				who = c[k];
		usleep(10000);
	}
	assert_non_null(who);
	snprintf(w, sizeof(w), "%.*s", st_rep->items[0].rep[0].endpoint.len,
		 st_rep->items[0].rep[0].endpoint.p);
	assert_string_equal(w, "nvmeof/b");
	assert_int_equal(dst[0], "abc"[who == A ? 0 : who == B ? 1 : 2]);
	assert_int_equal(st_tier_done(fd, who, "s", 0), 0);
	assert_int_equal(wait_status(fd, (uint64_t)id, STORE_TASK_SUCCESS),
			 STORE_TASK_SUCCESS);
	assert_int_equal(nrep(fd, "s"), 2);
	/* one SSD segment only: a second SSD replica has no room */
	id = replicate(fd, "s", 1, 2);
	assert_int_equal(wait_status(fd, (uint64_t)id, STORE_TASK_FAILED),
			 STORE_TASK_FAILED);
	assert_int_equal(st_rep->message.len, strlen("NO_AVAILABLE_HANDLE"));
	close(fd);
	st_stop();
}

/* Replicas cleared on purpose (replica_clear) lower what the object
 * asks for: a later loss brings it back to what was left, no more. */
static void test_clear_then_loss(void **state)
{
	char src[8], dst[8], names[3][8];
	int fd = start();
	unsigned n = 0;

	(void)state;
	assert_int_equal(st_mount(fd, C, 4, "d", 0x400000, 1024 * KiB), 0);
	st_req->preferred = st_str("a");
	assert_int_equal(st_one(fd, STORE_PUT_START, A, "q", 64 * KiB, 3,
				false), 0);
	assert_int_equal(st_one(fd, STORE_PUT_END, A, "q", 0, 0, false), 0);
	st_req->preferred = st_str("");
	assert_int_equal(st_one(fd, STORE_QUERY, A, "q", 0, 0, false), 0);
	assert_int_equal(st_rep->items[0].nrep, 3);
	for (int i = 0; i < 3; i++)
		snprintf(names[i], 8, "%.*s",
			 st_rep->items[0].rep[i].endpoint.len,
			 st_rep->items[0].rep[i].endpoint.p);
	usleep(250000);                /* the query's lease */
	st_req->preferred = st_str(names[1]);
	assert_int_equal(st_one(fd, STORE_REPLICA_CLEAR, A, "q", 0, 0, false),
			 0);
	st_req->preferred = st_str("");
	/* names[2]'s segment goes: back to 2, not 3 */
	assert_int_equal(st_unmount(fd, names[2][0] == 'b' ? B : C,
				    (uint8_t)(names[2][0] - 'a' + 1)), 0);
	assert_int_equal(nrep(fd, "q"), 1);
	assert_int_equal(wait_copy(fd, A, src, dst), 1);
	assert_int_equal(st_tier_done(fd, A, "q", 0), 0);
	for (int i = 0; i < 50; i++) {   /* half a second of ticks */
		n += poll_as(fd, A, src, dst);
		usleep(10000);
	}
	assert_int_equal(n, 0);
	assert_int_equal(nrep(fd, "q"), 2);
	close(fd);
	st_stop();
}

static void test_bad_input(void **state)
{
	int fd = start();
	struct store_buf b = { 0 };
	char src[8], dst[8];
	int64_t id;

	(void)state;
	put_a(fd, "k");
	assert_int_equal(replicate(fd, "k", 0, 0), -600);
	assert_int_equal(replicate(fd, "k", 9, 8), -600);
	assert_int_equal(replicate(fd, "k", 200, 0), -600);
	assert_int_equal(replicate(fd, "nope", 2, 0), -704);
	assert_int_equal(replicate(fd, "", 2, 0), -704);
	/* a put not ended */
	assert_int_equal(st_one(fd, STORE_PUT_START, A, "p", 64 * KiB, 1,
				false), 0);
	assert_int_equal(replicate(fd, "p", 2, 0), -703);
	assert_int_equal(status(fd, 0), -1400);
	assert_int_equal(status(fd, 12345), -1400);
	/* an SSD replica without any SSD segment: no room */
	id = replicate(fd, "k", 1, 1);
	assert_true(id > 0);
	assert_int_equal(wait_status(fd, (uint64_t)id, STORE_TASK_FAILED),
			 STORE_TASK_FAILED);
	assert_int_equal(poll_as(fd, A, src, dst), 0);
	/* a newer task replaces the one at work */
	id = replicate(fd, "k", 3, 0);
	assert_true(replicate(fd, "k", 2, 0) > id);
	assert_int_equal(status(fd, (uint64_t)id), STORE_TASK_FAILED);
	/* a replicate with no key is malformed: the connection closes */
	st_req->h = (struct store_hdr){ .type = STORE_REPLICATE, .seq = 99 };
	st_req->n = 1;
	st_req->items[0].key = st_str("");
	assert_int_equal(store_msg_encode(&b, st_req), 0);
	/* client, r, d: 18 bytes, then the count (0) and no key */
	assert_int_equal(b.len, STORE_HDR_LEN + 18 + 4 + 2);
	memset(b.p + STORE_HDR_LEN + 18, 0, 4);
	b.p[12] = 18 + 4;
	assert_int_equal(th_send_all(fd, b.p, b.len - 2), 0);
	store_buf_free(&b);
	assert_int_not_equal(st_recv(fd), 0);
	close(fd);
	/* the master serves on */
	fd = th_connect(st_port);
	assert_int_equal(nrep(fd, "k") > 0, 1);
	close(fd);
	st_stop();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_raise_lower),
		cmocka_unit_test(test_repair),
		cmocka_unit_test(test_copy_move),
		cmocka_unit_test(test_clear_then_loss),
		cmocka_unit_test(test_ssd),
		cmocka_unit_test(test_source_gone),
		cmocka_unit_test(test_bad_input),
	};

	return cmocka_run_group_tests(tests, st_setup, st_teardown);
}
