/*
 * xfer-stored, the store's master, as a real process driven over TCP by
 * a small client of the RPC (store/proto.c): flags, mount and unmount,
 * put start/end/revoke, query and exist with leases, remove, replicas on
 * distinct segments, eviction and -200, expiry of a silent client,
 * discard and reclaim of puts never ended, bad frames, pipelining, the
 * cluster secret and the cap on connections.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test/helpers.h"
#include "test/th_master.h"
#include "util/auth_internal.h"

static const uint8_t A[STORE_ID_LEN] = { 'A' }, B[STORE_ID_LEN] = { 'B' },
		     C[STORE_ID_LEN] = { 'C' };

static void test_flags(void **state)
{
	(void)state;
	assert_int_equal(st_start(0, (const char *[]){ "--bogus=1", NULL }), 2);
	assert_int_equal(st_start(0, (const char *[]){
		"--default_kv_lease_ttl=soon", NULL }), 2);
	assert_int_equal(st_start(0, (const char *[]){
		"--put_start_release_timeout_sec=5",
		"--put_start_discard_timeout_sec=10", NULL }), 2);
	assert_int_equal(st_start(0, (const char *[]){
		"--eviction_ratio=1.5", NULL }), 2);
	assert_int_equal(st_start(0, (const char *[]){
		"--metrics_port=70000", NULL }), 2);
	assert_int_equal(st_start(0, (const char *[]){
		"--enable_ha", NULL }), 2);             /* not implemented */
	assert_int_equal(st_start(0, (const char *[]){
		"--default_kv_lease_ttl=2s", "--max_threads=4", NULL }), 0);
	st_stop();
}

static void test_put_get_remove(void **state)
{
	uint64_t addr;
	int fd;

	(void)state;
	assert_int_equal(st_start(0, NULL), 0);
	fd = th_connect(st_port);
	assert_true(st_ping_needs_mount(fd, A));
	assert_int_equal(st_mount(fd, A, 1, "127.0.0.1:1234", 0x100000,
				  1 << 20),
			 0);
	assert_int_equal(st_mount(fd, A, 1, "127.0.0.1:1234", 0x100000,
				  1 << 20),
			 0);                           /* again: the same */
	assert_int_equal(st_mount(fd, B, 1, "other", 0, 1 << 20), -102);
	assert_int_equal(st_mount(fd, A, 2, "x", 0, 0), -600);
	assert_false(st_ping_needs_mount(fd, A));

	assert_int_equal(st_one(fd, STORE_PUT_START, A, "k", 4096, 1, 0), 0);
	assert_int_equal(st_rep->items[0].nrep, 1);
	addr = st_rep->items[0].rep[0].addr;
	assert_true(addr >= 0x100000 && addr + 4096 <= 0x200000);
	assert_int_equal(st_rep->items[0].rep[0].len, 4096);
	assert_int_equal(st_rep->items[0].rep[0].endpoint.len, 14);
	assert_memory_equal(st_rep->items[0].rep[0].endpoint.p,
			    "127.0.0.1:1234", 14);
	assert_int_equal(st_one(fd, STORE_QUERY, A, "k", 0, 0, 0), -703);
	assert_int_equal(st_one(fd, STORE_EXIST, A, "k", 0, 0, 0), 0);
	assert_int_equal(st_one(fd, STORE_REMOVE, A, "k", 0, 0, 1), -703);
	assert_int_equal(st_one(fd, STORE_PUT_START, A, "k", 4096, 1, 0), -705);
	assert_int_equal(st_one(fd, STORE_PUT_END, B, "k", 0, 0, 0), -601);
	assert_int_equal(st_one(fd, STORE_PUT_END, A, "k", 0, 0, 0), 0);
	assert_int_equal(st_one(fd, STORE_PUT_END, A, "k", 0, 0, 0), -700);
	assert_int_equal(st_one(fd, STORE_PUT_END, A, "nope", 0, 0, 0), -704);
	assert_int_equal(st_one(fd, STORE_PUT_START, A, "k", 4096, 1, 0), -705);

	assert_int_equal(st_one(fd, STORE_QUERY, B, "k", 0, 0, 0), 0);
	assert_int_equal(st_rep->items[0].len, 4096);
	assert_int_equal(st_rep->items[0].lease_ms, 10000);
	assert_int_equal(st_rep->items[0].nrep, 1);
	assert_int_equal(st_rep->items[0].rep[0].addr, addr);
	assert_int_equal(st_one(fd, STORE_EXIST, B, "k", 0, 0, 0), 1);
	assert_int_equal(st_one(fd, STORE_QUERY, B, "nope", 0, 0, 0), -704);
	assert_int_equal(st_one(fd, STORE_REMOVE, B, "k", 0, 0, 0), -706);
	assert_int_equal(st_one(fd, STORE_REMOVE, B, "k", 0, 0, 1), 0);
	assert_int_equal(st_one(fd, STORE_QUERY, B, "k", 0, 0, 0), -704);
	assert_int_equal(st_one(fd, STORE_REMOVE, B, "k", 0, 0, 1), -704);

	assert_int_equal(st_one(fd, STORE_PUT_START, A, "", 4096, 1, 0), -600);
	assert_int_equal(st_one(fd, STORE_PUT_START, A, "z", 0, 1, 0), -600);
	assert_int_equal(st_one(fd, STORE_PUT_START, A, "z", 1, 0, 0), -600);
	assert_int_equal(st_one(fd, STORE_PUT_START, A, "z", 2 << 20, 1, 0),
			 -200);
	/* revoked: gone, and its space back */
	assert_int_equal(st_one(fd, STORE_PUT_START, A, "r", 1 << 20, 1, 0), 0);
	assert_int_equal(st_one(fd, STORE_PUT_REVOKE, A, "r", 0, 0, 0), 0);
	assert_int_equal(st_one(fd, STORE_QUERY, A, "r", 0, 0, 0), -704);
	assert_int_equal(st_put(fd, A, "r", 1 << 20), 0);

	memset(st_req->items, 0, sizeof(st_req->items[0]) * 3);
	assert_int_equal(st_unmount(fd, B, 1), -601);
	assert_int_equal(st_unmount(fd, A, 1), 0);
	assert_int_equal(st_unmount(fd, A, 1), -101);
	assert_int_equal(st_one(fd, STORE_QUERY, A, "r", 0, 0, 0), -704);
	close(fd);
	st_stop();
}

/* Replicas on distinct segments, as many as there are; one dropped with
 * its segment. A batch answers per key. */
static void test_replicas(void **state)
{
	int fd;

	(void)state;
	assert_int_equal(st_start(0, NULL), 0);
	fd = th_connect(st_port);
	assert_int_equal(st_mount(fd, A, 1, "a", 0, 1 << 20), 0);
	assert_int_equal(st_mount(fd, B, 2, "b", 0, 1 << 20), 0);
	assert_int_equal(st_mount(fd, C, 3, "c", 0, 1 << 20), 0);
	assert_int_equal(st_one(fd, STORE_PUT_START, A, "k3", 4096, 3, 0), 0);
	assert_int_equal(st_rep->items[0].nrep, 3);
	{
		char seen[4] = { 0 };

		for (int i = 0; i < 3; i++) {
			assert_int_equal(
				st_rep->items[0].rep[i].endpoint.len, 1);
			seen[st_rep->items[0].rep[i].endpoint.p[0] - 'a']++;
		}
		assert_memory_equal(seen, "\1\1\1", 3);
	}
	assert_int_equal(st_one(fd, STORE_PUT_START, A, "k5", 4096, 5, 0), 0);
	assert_int_equal(st_rep->items[0].nrep, 3);   /* best effort */
	assert_int_equal(st_one(fd, STORE_PUT_END, A, "k3", 0, 0, 0), 0);
	assert_int_equal(st_unmount(fd, B, 2), 0);
	assert_int_equal(st_one(fd, STORE_QUERY, A, "k3", 0, 0, 0), 0);
	assert_int_equal(st_rep->items[0].nrep, 2);
	for (int i = 0; i < 2; i++)
		assert_int_not_equal(st_rep->items[0].rep[i].endpoint.p[0],
				     'b');

	/* a batch: per key */
	st_req->n = 3;
	st_req->items[0].key = st_str("k3");
	st_req->items[1].key = st_str("none");
	st_req->items[2].key = st_str("k5");
	st_call(fd, STORE_EXIST);
	assert_int_equal(st_rep->n, 3);
	assert_int_equal(st_rep->items[0].err, 1);
	assert_int_equal(st_rep->items[1].err, 0);
	assert_int_equal(st_rep->items[2].err, 0);  /* not ended */
	close(fd);
	st_stop();
}

/* A full segment evicts the least recently used object that has no
 * lease; with every object leased a put gets -200. */
static void test_eviction(void **state)
{
	char key[8];
	int fd;

	(void)state;
	assert_int_equal(st_start(0, (const char *[]){
		"--eviction_high_watermark_ratio=1", NULL }), 0);
	fd = th_connect(st_port);
	assert_int_equal(st_mount(fd, A, 1, "a", 0, 1 << 20), 0);
	for (int i = 0; i < 4; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		assert_int_equal(st_put(fd, A, key, 256 << 10), 0);
	}
	assert_int_equal(st_one(fd, STORE_EXIST, A, "k0", 0, 0, 0), 1);
	/* k1 is now the least recent, and k0 leased */
	assert_int_equal(st_put(fd, A, "k4", 256 << 10), 0);
	assert_int_equal(st_one(fd, STORE_EXIST, A, "k1", 0, 0, 0), 0);
	assert_int_equal(st_one(fd, STORE_EXIST, A, "k0", 0, 0, 0), 1);
	for (int i = 2; i < 5; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		assert_int_equal(st_one(fd, STORE_EXIST, A, key, 0, 0, 0), 1);
	}
	assert_int_equal(st_one(fd, STORE_PUT_START, A, "k5", 256 << 10, 1, 0),
			 -200);
	assert_int_equal(st_one(fd, STORE_REMOVE, A, "k3", 0, 0, 1), 0);
	assert_int_equal(st_put(fd, A, "k5", 256 << 10), 0);
	/* remove_all leaves the leased unless forced */
	st_req->force = 0;
	assert_int_equal(st_call(fd, STORE_REMOVE_ALL)->count, 1);   /* k5 */
	st_req->force = 1;
	assert_int_equal(st_call(fd, STORE_REMOVE_ALL)->count, 3);
	assert_int_equal(st_one(fd, STORE_EXIST, A, "k0", 0, 0, 0), 0);
	close(fd);
	st_stop();
}

/* Above the watermark the master evicts by itself. */
static void test_watermark(void **state)
{
	char key[8];
	int fd;

	(void)state;
	assert_int_equal(st_start(0, (const char *[]){
		"--eviction_high_watermark_ratio=0.5",
		"--eviction_ratio=0.25", NULL }), 0);
	fd = th_connect(st_port);
	assert_int_equal(st_mount(fd, A, 1, "a", 0, 1 << 20), 0);
	for (int i = 0; i < 3; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		assert_int_equal(st_put(fd, A, key, 256 << 10), 0);
	}
	/* 75 % used: k0 goes, the oldest (the pass runs after the puts) */
	usleep(300000);
	assert_int_equal(st_one(fd, STORE_EXIST, A, "k0", 0, 0, 0), 0);
	assert_int_equal(st_one(fd, STORE_EXIST, A, "k2", 0, 0, 0), 1);
	close(fd);
	st_stop();
}

/* A client that stops pinging loses its segments and their objects; one
 * that pings keeps them. */
static void test_client_ttl(void **state)
{
	int fd;

	(void)state;
	assert_int_equal(st_start(0, (const char *[]){ "--client_ttl=1",
						       NULL }), 0);
	fd = th_connect(st_port);
	assert_int_equal(st_mount(fd, A, 1, "a", 0, 1 << 20), 0);
	assert_int_equal(st_mount(fd, B, 2, "b", 0, 1 << 20), 0);
	st_req->preferred = st_str("a");
	assert_int_equal(st_put(fd, A, "ka", 4096), 0);
	assert_int_equal(st_one(fd, STORE_QUERY, A, "ka", 0, 0, 0), 0);
	assert_memory_equal(st_rep->items[0].rep[0].endpoint.p, "a", 1);
	st_req->preferred = st_str("");
	for (int i = 0; i < 8; i++) {              /* 1.6 s, B pinging */
		assert_false(st_ping_needs_mount(fd, B));
		usleep(200000);
	}
	assert_true(st_ping_needs_mount(fd, A));
	assert_false(st_ping_needs_mount(fd, B));
	assert_int_equal(st_one(fd, STORE_QUERY, B, "ka", 0, 0, 0), -704);
	assert_int_equal(st_one(fd, STORE_PUT_START, B, "kb", 4096, 2, 0), 0);
	assert_int_equal(st_rep->items[0].nrep, 1);
	assert_memory_equal(st_rep->items[0].rep[0].endpoint.p, "b", 1);
	close(fd);
	st_stop();
}

/* A put never ended is set aside after the discard timeout (its key is
 * free), and its space reused only after the release timeout. */
static void test_discard(void **state)
{
	int fd;

	(void)state;
	assert_int_equal(st_start(0, (const char *[]){
		"--put_start_discard_timeout_sec=1",
		"--put_start_release_timeout_sec=2", NULL }), 0);
	fd = th_connect(st_port);
	assert_int_equal(st_mount(fd, A, 1, "a", 0, 1 << 20), 0);
	assert_int_equal(st_one(fd, STORE_PUT_START, A, "k", 600 << 10, 1, 0),
			 0);
	assert_int_equal(st_one(fd, STORE_PUT_START, B, "k", 600 << 10, 1, 0),
			 -705);
	usleep(1300000);
	assert_int_equal(st_one(fd, STORE_PUT_START, B, "k", 600 << 10, 1, 0),
			 -200);                       /* still held */
	assert_int_equal(st_one(fd, STORE_PUT_END, A, "k", 0, 0, 0), -704);
	usleep(1000000);
	assert_int_equal(st_one(fd, STORE_PUT_START, B, "k", 600 << 10, 1, 0),
			 0);
	assert_int_equal(st_one(fd, STORE_PUT_END, A, "k", 0, 0, 0), -601);
	assert_int_equal(st_one(fd, STORE_PUT_END, B, "k", 0, 0, 0), 0);
	close(fd);
	st_stop();
}

/* Bad frames close their own connection only; requests pipelined on one
 * connection are answered in order. */
static void test_bad_frames_and_pipelining(void **state)
{
	uint8_t junk[STORE_HDR_LEN] = "not a frame at.";
	struct store_buf b = { 0 };
	int fd, bad;

	(void)state;
	assert_int_equal(st_start(0, NULL), 0);
	fd = th_connect(st_port);
	bad = th_connect(st_port);
	assert_int_equal(th_send_all(bad, junk, sizeof(junk)), 0);
	assert_int_equal(th_recv_until_close(bad, NULL, 0, 5000), 0);
	close(bad);

	/* a reply where a request belongs */
	bad = th_connect(st_port);
	st_req->h = (struct store_hdr){ .type = STORE_PING,
				     .flags = STORE_F_REPLY };
	assert_int_equal(store_msg_encode(&b, st_req), 0);
	assert_int_equal(th_send_all(bad, b.p, b.len), 0);
	assert_int_equal(th_recv_until_close(bad, NULL, 0, 5000), 0);
	close(bad);

	/* a batch of none: malformed */
	bad = th_connect(st_port);
	b.len = 0;
	st_req->h = (struct store_hdr){ .type = STORE_EXIST };
	st_req->n = 1;
	st_req->items[0].key = st_str("k");
	assert_int_equal(store_msg_encode(&b, st_req), 0);
	memset(b.p + STORE_HDR_LEN, 0, 4);
	assert_int_equal(th_send_all(bad, b.p, b.len), 0);
	assert_int_equal(th_recv_until_close(bad, NULL, 0, 5000), 0);
	close(bad);

	b.len = 0;
	memcpy(st_req->client, A, STORE_ID_LEN);
	for (uint32_t i = 1; i <= 200; i++) {
		st_req->h = (struct store_hdr){ .type = STORE_PING, .seq = i };
		assert_int_equal(store_msg_encode(&b, st_req), 0);
	}
	assert_int_equal(th_send_all(fd, b.p, b.len), 0);
	for (uint32_t i = 1; i <= 200; i++) {
		assert_int_equal(st_recv(fd), 0);
		assert_int_equal(st_rep->h.seq, i);
	}
	store_buf_free(&b);
	close(fd);
	st_stop();
}

/* With a secret, a client must prove it before a request is read. */
static void test_secret(void **state)
{
	struct xfer_auth *auth = xfer_auth_new("s3cret");
	struct xfer_auth_cli cli;
	int fd, ret;

	(void)state;
	assert_int_equal(st_start(0, (const char *[]){ "--auth_secret=s3cret",
						 NULL }), 0);
	fd = th_connect(st_port);
	memcpy(st_req->client, A, STORE_ID_LEN);
	{
		struct store_buf b = { 0 };

		st_req->h = (struct store_hdr){ .type = STORE_PING, .seq = 1 };
		assert_int_equal(store_msg_encode(&b, st_req), 0);
		assert_int_equal(th_send_all(fd, b.p, b.len), 0);
		store_buf_free(&b);
	}
	assert_int_equal(th_recv_until_close(fd, NULL, 0, 5000), 0);
	close(fd);

	fd = th_connect(st_port);
	assert_int_equal(xfer_auth_cli_start(&cli, fd), 0);
	do
		ret = xfer_auth_cli_step(auth, &cli, fd, "test");
	while (ret == 1);
	assert_int_equal(ret, 0);
	assert_true(st_ping_needs_mount(fd, A));
	close(fd);
	xfer_auth_free(auth);
	st_stop();
}

/* Has the master closed @p fd (within @p ms)? */
static bool closed_within(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char c;

	return poll(&p, 1, ms) == 1 &&
	       recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
}

/* --max_rpc_conns=8: a flood of silent connections closes its own (the
 * oldest first) while a client that sent requests is served; with every
 * connection sending, the one idle longest goes; with every one in the
 * middle of a request, the new one is closed and no request is lost. */
static void test_conn_cap(void **state)
{
	enum { FLOOD = 100, CAP = 8 };
	int good, fds[FLOOD], busy[CAP - 1], fd, open = 0;
	uint8_t half[STORE_HDR_LEN / 2] = { 0 };
	char key[16];

	(void)state;
	assert_int_equal(st_start(0, (const char *[]){ "--max_rpc_conns=0",
						 NULL }), 2);
	assert_int_equal(st_start(0, (const char *[]){ "--max_rpc_conns=8",
						 NULL }), 0);
	good = th_connect(st_port);
	assert_true(st_ping_needs_mount(good, A));
	assert_int_equal(st_mount(good, A, 1, "127.0.0.1:1234", 0x100000,
				  1 << 20), 0);
	for (int i = 0; i < FLOOD; i++) {
		fds[i] = th_connect(st_port);
		if (i % 10 == 9) {
			snprintf(key, sizeof(key), "k%d", i);
			assert_int_equal(st_put(good, A, key, 4096), 0);
		}
	}
	assert_int_equal(st_one(good, STORE_QUERY, A, "k99", 0, 0, 0), 0);
	for (int i = 0; i < FLOOD - (CAP - 1); i++)
		assert_true(closed_within(fds[i], 5000));
	for (int i = FLOOD - (CAP - 1); i < FLOOD; i++)
		open += !closed_within(fds[i], 100);
	assert_int_equal(open, CAP - 1);

	/* all sent a request: the one idle longest goes (fds[93] first) */
	for (int i = FLOOD - (CAP - 1); i < FLOOD; i++)
		assert_false(st_ping_needs_mount(fds[i], A));
	assert_false(st_ping_needs_mount(good, A));
	fd = th_connect(st_port);
	assert_true(closed_within(fds[FLOOD - (CAP - 1)], 5000));
	assert_false(closed_within(fds[FLOOD - 1], 100));
	assert_false(st_ping_needs_mount(good, A));
	close(fd);
	for (int i = 0; i < FLOOD; i++)
		close(fds[i]);

	/* every one in the middle of a request: the new one is closed */
	for (int i = 0; i < CAP - 1; i++) {
		busy[i] = th_connect(st_port);
		assert_false(st_ping_needs_mount(busy[i], A));
		assert_int_equal(th_send_all(busy[i], half, sizeof(half)), 0);
	}
	assert_int_equal(th_send_all(good, half, sizeof(half)), 0);
	usleep(100 * 1000);
	fd = th_connect(st_port);
	assert_true(closed_within(fd, 5000));
	close(fd);
	for (int i = 0; i < CAP - 1; i++) {
		assert_false(closed_within(busy[i], 0));
		close(busy[i]);
	}
	close(good);
	st_stop();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_flags),
		cmocka_unit_test(test_put_get_remove),
		cmocka_unit_test(test_replicas),
		cmocka_unit_test(test_eviction),
		cmocka_unit_test(test_watermark),
		cmocka_unit_test(test_client_ttl),
		cmocka_unit_test(test_discard),
		cmocka_unit_test(test_bad_frames_and_pipelining),
		cmocka_unit_test(test_secret),
		cmocka_unit_test(test_conn_cap),
	};

	return cmocka_run_group_tests(tests, st_setup, st_teardown);
}
