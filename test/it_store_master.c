/*
 * xfer-stored, the store's master, as a real process driven over TCP by
 * a small client of the RPC (store/proto.c): flags, mount and unmount,
 * put start/end/revoke, query and exist with leases, remove, replicas on
 * distinct segments, eviction and -200, expiry of a silent client,
 * discard and reclaim of puts never ended, bad frames, pipelining and the
 * cluster secret.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store/proto_internal.h"
#include "test/helpers.h"
#include "util/auth_internal.h"

static pid_t pid;
static uint16_t port;
static uint32_t seq;
static struct store_msg *req, *rep;
static uint8_t body[STORE_FRAME_MAX];

static const uint8_t A[STORE_ID_LEN] = { 'A' }, B[STORE_ID_LEN] = { 'B' },
		     C[STORE_ID_LEN] = { 'C' };

/* Run xfer-stored on a free port with @p args (NULL-ended); its exit
 * status if it exits first, else 0 once it serves (within 10 s). */
static int start(const char *const *args)
{
	char portflag[32];
	const char *argv[24] = { th_stored_path(), portflag,
				 "--rpc_address=127.0.0.1" };
	int n = 3, fd, status;

	port = th_free_port();
	memset(req, 0, sizeof(*req));
	snprintf(portflag, sizeof(portflag), "--port=%u", port);
	for (; args && *args; args++)
		argv[n++] = *args;
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		int null = open("/dev/null", O_WRONLY);

		dup2(null, 1);
		dup2(null, 2);
		execv(argv[0], (char **)argv);
		_exit(127);
	}
	for (int i = 0; i < 1000; i++) {
		if (waitpid(pid, &status, WNOHANG) == pid) {
			pid = 0;
			return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
		}
		fd = th_connect_try(port);
		if (fd >= 0) {
			close(fd);
			return 0;
		}
		usleep(10000);
	}
	fail_msg("xfer-stored did not serve");
	return -1;
}

static void stop(void)
{
	if (!pid)
		return;
	kill(pid, SIGTERM);
	assert_int_equal(th_wait_exit(pid, 5000), 0); /* exit 0, no crash */
	pid = 0;
}

static int setup(void **state)
{
	(void)state;
	req = calloc(1, sizeof(*req));
	rep = calloc(1, sizeof(*rep));
	return !req || !rep;
}

static int teardown(void **state)
{
	(void)state;
	if (pid) {
		kill(pid, SIGKILL);
		th_wait_exit(pid, 5000);
		pid = 0;
	}
	free(req);
	free(rep);
	return 0;
}

/* Read one reply frame into rep (strings point into body). @return 0, or
 * -1 if the master closed or sent something undecodable. */
static int recv_reply(int fd)
{
	uint8_t hdr[STORE_HDR_LEN];

	if (th_recv_all(fd, hdr, sizeof(hdr), 5000) != sizeof(hdr) ||
	    store_hdr_decode(hdr, &rep->h) ||
	    th_recv_all(fd, body, rep->h.len, 5000) != (long)rep->h.len ||
	    store_msg_decode(body, rep))
		return -1;
	return 0;
}

/* Send req as type @p type on @p fd and get its reply. */
static struct store_msg *call(int fd, unsigned type)
{
	struct store_buf b = { 0 };

	req->h = (struct store_hdr){ .type = (uint16_t)type, .seq = ++seq };
	assert_int_equal(store_msg_encode(&b, req), 0);
	assert_int_equal(th_send_all(fd, b.p, b.len), 0);
	store_buf_free(&b);
	assert_int_equal(recv_reply(fd), 0);
	assert_int_equal(rep->h.type, type);
	assert_int_equal(rep->h.flags, STORE_F_REPLY);
	assert_int_equal(rep->h.seq, seq);
	return rep;
}

static struct store_str S(const char *s)
{
	return (struct store_str){ s, (uint16_t)strlen(s) };
}

static int mount(int fd, const uint8_t *client, uint8_t segid,
		 const char *name, uint64_t base, uint64_t size)
{
	memcpy(req->client, client, STORE_ID_LEN);
	memset(req->segment, segid, STORE_ID_LEN);
	req->name = S(name);
	req->base = base;
	req->size = size;
	return call(fd, STORE_MOUNT)->err;
}

static int unmount(int fd, const uint8_t *client, uint8_t segid)
{
	memcpy(req->client, client, STORE_ID_LEN);
	memset(req->segment, segid, STORE_ID_LEN);
	return call(fd, STORE_UNMOUNT)->err;
}

/* One key's call: put_start (@p len, @p replicas), put_end, put_revoke
 * by @p client, query, exist, remove (@p force). @return its item's
 * err; rep->items[0] holds the rest. */
static int one(int fd, unsigned type, const uint8_t *client, const char *key,
	       uint64_t len, uint8_t replicas, bool force)
{
	memcpy(req->client, client, STORE_ID_LEN);
	req->replicas = replicas;
	req->flags = 0;
	req->force = force;
	req->n = 1;
	req->items[0].key = S(key);
	req->items[0].len = len;
	call(fd, type);
	assert_int_equal(rep->err, 0);
	assert_int_equal(rep->n, 1);
	return rep->items[0].err;
}

static int put(int fd, const uint8_t *client, const char *key, uint64_t len)
{
	int ret = one(fd, STORE_PUT_START, client, key, len, 1, false);

	return ret ? ret : one(fd, STORE_PUT_END, client, key, 0, 0, false);
}

static bool ping_needs_mount(int fd, const uint8_t *client)
{
	memcpy(req->client, client, STORE_ID_LEN);
	call(fd, STORE_PING);
	assert_int_equal(rep->err, 0);
	return rep->flags & 1;
}

static void test_flags(void **state)
{
	(void)state;
	assert_int_equal(start((const char *[]){ "--bogus=1", NULL }), 2);
	assert_int_equal(start((const char *[]){
		"--default_kv_lease_ttl=soon", NULL }), 2);
	assert_int_equal(start((const char *[]){
		"--put_start_release_timeout_sec=5",
		"--put_start_discard_timeout_sec=10", NULL }), 2);
	assert_int_equal(start((const char *[]){
		"--eviction_ratio=1.5", NULL }), 2);
	assert_int_equal(start((const char *[]){
		"--default_kv_lease_ttl=2s", "--max_threads=4", NULL }), 0);
	stop();
}

static void test_put_get_remove(void **state)
{
	uint64_t addr;
	int fd;

	(void)state;
	assert_int_equal(start(NULL), 0);
	fd = th_connect(port);
	assert_true(ping_needs_mount(fd, A));
	assert_int_equal(mount(fd, A, 1, "127.0.0.1:1234", 0x100000, 1 << 20),
			 0);
	assert_int_equal(mount(fd, A, 1, "127.0.0.1:1234", 0x100000, 1 << 20),
			 0);                           /* again: the same */
	assert_int_equal(mount(fd, B, 1, "other", 0, 1 << 20), -102);
	assert_int_equal(mount(fd, A, 2, "x", 0, 0), -600);
	assert_false(ping_needs_mount(fd, A));

	assert_int_equal(one(fd, STORE_PUT_START, A, "k", 4096, 1, 0), 0);
	assert_int_equal(rep->items[0].nrep, 1);
	addr = rep->items[0].rep[0].addr;
	assert_true(addr >= 0x100000 && addr + 4096 <= 0x200000);
	assert_int_equal(rep->items[0].rep[0].len, 4096);
	assert_int_equal(rep->items[0].rep[0].endpoint.len, 14);
	assert_memory_equal(rep->items[0].rep[0].endpoint.p,
			    "127.0.0.1:1234", 14);
	assert_int_equal(one(fd, STORE_QUERY, A, "k", 0, 0, 0), -703);
	assert_int_equal(one(fd, STORE_EXIST, A, "k", 0, 0, 0), 0);
	assert_int_equal(one(fd, STORE_REMOVE, A, "k", 0, 0, 1), -703);
	assert_int_equal(one(fd, STORE_PUT_START, A, "k", 4096, 1, 0), -705);
	assert_int_equal(one(fd, STORE_PUT_END, B, "k", 0, 0, 0), -601);
	assert_int_equal(one(fd, STORE_PUT_END, A, "k", 0, 0, 0), 0);
	assert_int_equal(one(fd, STORE_PUT_END, A, "k", 0, 0, 0), -700);
	assert_int_equal(one(fd, STORE_PUT_END, A, "nope", 0, 0, 0), -704);
	assert_int_equal(one(fd, STORE_PUT_START, A, "k", 4096, 1, 0), -705);

	assert_int_equal(one(fd, STORE_QUERY, B, "k", 0, 0, 0), 0);
	assert_int_equal(rep->items[0].len, 4096);
	assert_int_equal(rep->items[0].lease_ms, 10000);
	assert_int_equal(rep->items[0].nrep, 1);
	assert_int_equal(rep->items[0].rep[0].addr, addr);
	assert_int_equal(one(fd, STORE_EXIST, B, "k", 0, 0, 0), 1);
	assert_int_equal(one(fd, STORE_QUERY, B, "nope", 0, 0, 0), -704);
	assert_int_equal(one(fd, STORE_REMOVE, B, "k", 0, 0, 0), -706);
	assert_int_equal(one(fd, STORE_REMOVE, B, "k", 0, 0, 1), 0);
	assert_int_equal(one(fd, STORE_QUERY, B, "k", 0, 0, 0), -704);
	assert_int_equal(one(fd, STORE_REMOVE, B, "k", 0, 0, 1), -704);

	assert_int_equal(one(fd, STORE_PUT_START, A, "", 4096, 1, 0), -600);
	assert_int_equal(one(fd, STORE_PUT_START, A, "z", 0, 1, 0), -600);
	assert_int_equal(one(fd, STORE_PUT_START, A, "z", 1, 0, 0), -600);
	assert_int_equal(one(fd, STORE_PUT_START, A, "z", 2 << 20, 1, 0),
			 -200);
	/* revoked: gone, and its space back */
	assert_int_equal(one(fd, STORE_PUT_START, A, "r", 1 << 20, 1, 0), 0);
	assert_int_equal(one(fd, STORE_PUT_REVOKE, A, "r", 0, 0, 0), 0);
	assert_int_equal(one(fd, STORE_QUERY, A, "r", 0, 0, 0), -704);
	assert_int_equal(put(fd, A, "r", 1 << 20), 0);

	memset(req->items, 0, sizeof(req->items[0]) * 3);
	assert_int_equal(unmount(fd, B, 1), -601);
	assert_int_equal(unmount(fd, A, 1), 0);
	assert_int_equal(unmount(fd, A, 1), -101);
	assert_int_equal(one(fd, STORE_QUERY, A, "r", 0, 0, 0), -704);
	close(fd);
	stop();
}

/* Replicas on distinct segments, as many as there are; one dropped with
 * its segment. A batch answers per key. */
static void test_replicas(void **state)
{
	int fd;

	(void)state;
	assert_int_equal(start(NULL), 0);
	fd = th_connect(port);
	assert_int_equal(mount(fd, A, 1, "a", 0, 1 << 20), 0);
	assert_int_equal(mount(fd, B, 2, "b", 0, 1 << 20), 0);
	assert_int_equal(mount(fd, C, 3, "c", 0, 1 << 20), 0);
	assert_int_equal(one(fd, STORE_PUT_START, A, "k3", 4096, 3, 0), 0);
	assert_int_equal(rep->items[0].nrep, 3);
	{
		char seen[4] = { 0 };

		for (int i = 0; i < 3; i++) {
			assert_int_equal(rep->items[0].rep[i].endpoint.len, 1);
			seen[rep->items[0].rep[i].endpoint.p[0] - 'a']++;
		}
		assert_memory_equal(seen, "\1\1\1", 3);
	}
	assert_int_equal(one(fd, STORE_PUT_START, A, "k5", 4096, 5, 0), 0);
	assert_int_equal(rep->items[0].nrep, 3);   /* best effort */
	assert_int_equal(one(fd, STORE_PUT_END, A, "k3", 0, 0, 0), 0);
	assert_int_equal(unmount(fd, B, 2), 0);
	assert_int_equal(one(fd, STORE_QUERY, A, "k3", 0, 0, 0), 0);
	assert_int_equal(rep->items[0].nrep, 2);
	for (int i = 0; i < 2; i++)
		assert_int_not_equal(rep->items[0].rep[i].endpoint.p[0], 'b');

	/* a batch: per key */
	req->n = 3;
	req->items[0].key = S("k3");
	req->items[1].key = S("none");
	req->items[2].key = S("k5");
	call(fd, STORE_EXIST);
	assert_int_equal(rep->n, 3);
	assert_int_equal(rep->items[0].err, 1);
	assert_int_equal(rep->items[1].err, 0);
	assert_int_equal(rep->items[2].err, 0);  /* not ended */
	close(fd);
	stop();
}

/* A full segment evicts the least recently used object that has no
 * lease; with every object leased a put gets -200. */
static void test_eviction(void **state)
{
	char key[8];
	int fd;

	(void)state;
	assert_int_equal(start((const char *[]){
		"--eviction_high_watermark_ratio=1", NULL }), 0);
	fd = th_connect(port);
	assert_int_equal(mount(fd, A, 1, "a", 0, 1 << 20), 0);
	for (int i = 0; i < 4; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		assert_int_equal(put(fd, A, key, 256 << 10), 0);
	}
	assert_int_equal(one(fd, STORE_EXIST, A, "k0", 0, 0, 0), 1);
	/* k1 is now the least recent, and k0 leased */
	assert_int_equal(put(fd, A, "k4", 256 << 10), 0);
	assert_int_equal(one(fd, STORE_EXIST, A, "k1", 0, 0, 0), 0);
	assert_int_equal(one(fd, STORE_EXIST, A, "k0", 0, 0, 0), 1);
	for (int i = 2; i < 5; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		assert_int_equal(one(fd, STORE_EXIST, A, key, 0, 0, 0), 1);
	}
	assert_int_equal(one(fd, STORE_PUT_START, A, "k5", 256 << 10, 1, 0),
			 -200);
	assert_int_equal(one(fd, STORE_REMOVE, A, "k3", 0, 0, 1), 0);
	assert_int_equal(put(fd, A, "k5", 256 << 10), 0);
	/* remove_all leaves the leased unless forced */
	req->force = 0;
	assert_int_equal(call(fd, STORE_REMOVE_ALL)->count, 1);   /* k5 */
	req->force = 1;
	assert_int_equal(call(fd, STORE_REMOVE_ALL)->count, 3);
	assert_int_equal(one(fd, STORE_EXIST, A, "k0", 0, 0, 0), 0);
	close(fd);
	stop();
}

/* Above the watermark the master evicts by itself. */
static void test_watermark(void **state)
{
	char key[8];
	int fd;

	(void)state;
	assert_int_equal(start((const char *[]){
		"--eviction_high_watermark_ratio=0.5",
		"--eviction_ratio=0.25", NULL }), 0);
	fd = th_connect(port);
	assert_int_equal(mount(fd, A, 1, "a", 0, 1 << 20), 0);
	for (int i = 0; i < 3; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		assert_int_equal(put(fd, A, key, 256 << 10), 0);
	}
	/* 75 % used: k0 goes, the oldest (the pass runs after the puts) */
	usleep(300000);
	assert_int_equal(one(fd, STORE_EXIST, A, "k0", 0, 0, 0), 0);
	assert_int_equal(one(fd, STORE_EXIST, A, "k2", 0, 0, 0), 1);
	close(fd);
	stop();
}

/* A client that stops pinging loses its segments and their objects; one
 * that pings keeps them. */
static void test_client_ttl(void **state)
{
	int fd;

	(void)state;
	assert_int_equal(start((const char *[]){ "--client_ttl=1", NULL }), 0);
	fd = th_connect(port);
	assert_int_equal(mount(fd, A, 1, "a", 0, 1 << 20), 0);
	assert_int_equal(mount(fd, B, 2, "b", 0, 1 << 20), 0);
	req->preferred = S("a");
	assert_int_equal(put(fd, A, "ka", 4096), 0);
	assert_int_equal(one(fd, STORE_QUERY, A, "ka", 0, 0, 0), 0);
	assert_memory_equal(rep->items[0].rep[0].endpoint.p, "a", 1);
	req->preferred = S("");
	for (int i = 0; i < 8; i++) {              /* 1.6 s, B pinging */
		assert_false(ping_needs_mount(fd, B));
		usleep(200000);
	}
	assert_true(ping_needs_mount(fd, A));
	assert_false(ping_needs_mount(fd, B));
	assert_int_equal(one(fd, STORE_QUERY, B, "ka", 0, 0, 0), -704);
	assert_int_equal(one(fd, STORE_PUT_START, B, "kb", 4096, 2, 0), 0);
	assert_int_equal(rep->items[0].nrep, 1);
	assert_memory_equal(rep->items[0].rep[0].endpoint.p, "b", 1);
	close(fd);
	stop();
}

/* A put never ended is set aside after the discard timeout (its key is
 * free), and its space reused only after the release timeout. */
static void test_discard(void **state)
{
	int fd;

	(void)state;
	assert_int_equal(start((const char *[]){
		"--put_start_discard_timeout_sec=1",
		"--put_start_release_timeout_sec=2", NULL }), 0);
	fd = th_connect(port);
	assert_int_equal(mount(fd, A, 1, "a", 0, 1 << 20), 0);
	assert_int_equal(one(fd, STORE_PUT_START, A, "k", 600 << 10, 1, 0), 0);
	assert_int_equal(one(fd, STORE_PUT_START, B, "k", 600 << 10, 1, 0),
			 -705);
	usleep(1300000);
	assert_int_equal(one(fd, STORE_PUT_START, B, "k", 600 << 10, 1, 0),
			 -200);                       /* still held */
	assert_int_equal(one(fd, STORE_PUT_END, A, "k", 0, 0, 0), -704);
	usleep(1000000);
	assert_int_equal(one(fd, STORE_PUT_START, B, "k", 600 << 10, 1, 0), 0);
	assert_int_equal(one(fd, STORE_PUT_END, A, "k", 0, 0, 0), -601);
	assert_int_equal(one(fd, STORE_PUT_END, B, "k", 0, 0, 0), 0);
	close(fd);
	stop();
}

/* Bad frames close their own connection only; requests pipelined on one
 * connection are answered in order. */
static void test_bad_frames_and_pipelining(void **state)
{
	uint8_t junk[STORE_HDR_LEN] = "not a frame at.";
	struct store_buf b = { 0 };
	int fd, bad;

	(void)state;
	assert_int_equal(start(NULL), 0);
	fd = th_connect(port);
	bad = th_connect(port);
	assert_int_equal(th_send_all(bad, junk, sizeof(junk)), 0);
	assert_int_equal(th_recv_until_close(bad, NULL, 0, 5000), 0);
	close(bad);

	/* a reply where a request belongs */
	bad = th_connect(port);
	req->h = (struct store_hdr){ .type = STORE_PING,
				     .flags = STORE_F_REPLY };
	assert_int_equal(store_msg_encode(&b, req), 0);
	assert_int_equal(th_send_all(bad, b.p, b.len), 0);
	assert_int_equal(th_recv_until_close(bad, NULL, 0, 5000), 0);
	close(bad);

	/* a batch of none: malformed */
	bad = th_connect(port);
	b.len = 0;
	req->h = (struct store_hdr){ .type = STORE_EXIST };
	req->n = 1;
	req->items[0].key = S("k");
	assert_int_equal(store_msg_encode(&b, req), 0);
	memset(b.p + STORE_HDR_LEN, 0, 4);
	assert_int_equal(th_send_all(bad, b.p, b.len), 0);
	assert_int_equal(th_recv_until_close(bad, NULL, 0, 5000), 0);
	close(bad);

	b.len = 0;
	memcpy(req->client, A, STORE_ID_LEN);
	for (uint32_t i = 1; i <= 200; i++) {
		req->h = (struct store_hdr){ .type = STORE_PING, .seq = i };
		assert_int_equal(store_msg_encode(&b, req), 0);
	}
	assert_int_equal(th_send_all(fd, b.p, b.len), 0);
	for (uint32_t i = 1; i <= 200; i++) {
		assert_int_equal(recv_reply(fd), 0);
		assert_int_equal(rep->h.seq, i);
	}
	store_buf_free(&b);
	close(fd);
	stop();
}

/* With a secret, a client must prove it before a request is read. */
static void test_secret(void **state)
{
	struct xfer_auth *auth = xfer_auth_new("s3cret");
	struct xfer_auth_cli cli;
	int fd, ret;

	(void)state;
	assert_int_equal(start((const char *[]){ "--auth_secret=s3cret",
						 NULL }), 0);
	fd = th_connect(port);
	memcpy(req->client, A, STORE_ID_LEN);
	{
		struct store_buf b = { 0 };

		req->h = (struct store_hdr){ .type = STORE_PING, .seq = 1 };
		assert_int_equal(store_msg_encode(&b, req), 0);
		assert_int_equal(th_send_all(fd, b.p, b.len), 0);
		store_buf_free(&b);
	}
	assert_int_equal(th_recv_until_close(fd, NULL, 0, 5000), 0);
	close(fd);

	fd = th_connect(port);
	assert_int_equal(xfer_auth_cli_start(&cli, fd), 0);
	do
		ret = xfer_auth_cli_step(auth, &cli, fd, "test");
	while (ret == 1);
	assert_int_equal(ret, 0);
	assert_true(ping_needs_mount(fd, A));
	close(fd);
	xfer_auth_free(auth);
	stop();
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
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
