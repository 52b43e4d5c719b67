/*
 * Opt-in peer authentication (issue 13, part 3): engines that share
 * auth_secret open each other's segments and move data; a peer with no
 * secret or another one is refused at the handshake port and at the data
 * port and reads nothing, also when it found the descriptor in a central
 * store; a raw client that sends a request before it has proved itself
 * is closed without a byte of data; refusals are logged about once a
 * second, not once each.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <xfer/xfer.h>

#include "util/auth_internal.h"
#include "core/desc_internal.h"
#include "core/handshake_internal.h"
#include "test/helpers.h"
#include "test/th_harden.h"

#define SECRET "correct horse battery staple 42"
#define OTHER "another cluster's secret, 1234"
#define LEN (1u << 20)
#define OP_V2 0x80

static const char *const with_secret[] = { "auth_secret", SECRET, NULL };
static const char *const with_other[] = { "auth_secret", OTHER, NULL };

static const uint8_t status_ok[8] = { 0, 0, 0, 0, 0x56, 0x54, 0x43, 0x4d };

/* The target: an engine with SECRET, LEN registered bytes. */
static struct {
	struct xfer_engine *e;
	uint8_t *mem;
	uint16_t rpc_port, data_port;
} T;

static void target_start(const char *const *kv)
{
	T.e = hd_engine(1, kv);
	T.mem = th_alloc(LEN);
	th_fill(T.mem, LEN, 7);
	assert_int_equal(xfer_register(T.e, T.mem, LEN, "cpu:0", true), 0);
	T.rpc_port = xfer_engine_rpc_port(T.e);
}

static void target_stop(void)
{
	assert_int_equal(th_unregister(T.e, T.mem), 0);
	xfer_engine_free(T.e);
	free(T.mem);
}

static void read_header(uint8_t h[24], uint64_t size, uint64_t addr)
{
	memset(h, 0, 24);
	th_put_le64(h, size);
	th_put_le64(h + 8, addr);
	h[16] = OP_V2;
}

/* ---- engines ---- */

static void test_same_secret(void **state)
{
	struct xfer_engine *i;
	int64_t seg;

	(void)state;
	target_start(with_secret);
	hd_good_transfer(xfer_engine_name(T.e), (uintptr_t)T.mem + 10,
			 T.mem + 10, with_secret);
	/* notifications go through the handshake too */
	i = hd_engine(1, with_secret);
	seg = xfer_segment_open(i, xfer_engine_name(T.e));
	assert_true(seg >= 0);
	assert_int_equal(xfer_notify(i, seg, "a", "hello"), 0);
	xfer_engine_free(i);
	target_stop();
}

/* A peer with @p kv (no secret, another one) cannot open the segment. */
static void expect_open_refused(const char *const *kv, const char *what)
{
	struct xfer_engine *i = hd_engine(1, kv);
	int64_t seg = xfer_segment_open(i, xfer_engine_name(T.e));

	print_message("%s: open answered %lld (%s)\n", what, (long long)seg,
		      seg < 0 ? strerror((int)-seg) : "opened");
	assert_true(seg < 0);
	xfer_engine_free(i);
}

static void test_handshake_refused(void **state)
{
	long lines, matched;

	(void)state;
	target_start(with_secret);
	hd_capture_start("auth");
	expect_open_refused(NULL, "no secret");
	expect_open_refused(with_other, "another secret");
	/* and the other way round: a server without a secret is refused */
	{
		struct xfer_engine *plain = hd_engine(1, NULL);
		struct xfer_engine *i = hd_engine(1, with_secret);

		assert_true(xfer_segment_open(i, xfer_engine_name(plain)) < 0);
		xfer_engine_free(i);
		xfer_engine_free(plain);
	}
	/* raw requests without the exchange: closed without a byte */
	for (int type = 0; type < 4; type++) {
		int fd = th_connect(T.rpc_port);

		assert_int_equal(th_hs_send(fd, type, "{}\n", 3), 0);
		assert_int_equal(th_recv_until_close(fd, NULL, 0, 3000), 0);
		close(fd);
	}
	/* legacy frame (no type byte) */
	{
		int fd = th_connect(T.rpc_port);

		assert_int_equal(th_hs_send(fd, -1, "{}\n", 3), 0);
		assert_int_equal(th_recv_until_close(fd, NULL, 0, 3000), 0);
		close(fd);
	}
	/* the wrong secret, by hand: the client sees the server's proof
	 * fail and stops; the server has sent its challenge only */
	{
		int fd = th_connect(T.rpc_port);

		assert_int_equal(hd_raw_auth(fd, OTHER, true), -EACCES);
		close(fd);
	}
	/* the right one, by hand: a Probe is answered */
	{
		int fd = th_connect(T.rpc_port);
		char *body = NULL;
		size_t len;

		assert_int_equal(hd_raw_auth(fd, SECRET, true), 0);
		assert_int_equal(th_hs_send(fd, 3, "{}\n", 3), 0);
		assert_int_equal(th_hs_recv(fd, &body, &len, 3000), 0);
		assert_non_null(strstr(body, "success"));
		free(body);
		close(fd);
	}
	hd_capture_stop(&lines, &matched);
	print_message("refusals logged in %ld lines\n", matched);
	assert_true(matched >= 1 && matched <= 3);
	target_stop();
}

static void test_data_port_refused(void **state)
{
	uint8_t h[24], st[8], got[64];
	struct xfer_desc *d;
	int fd;

	(void)state;
	target_start(with_secret);
	/* the descriptor, fetched with the secret */
	{
		int fd2 = th_connect(T.rpc_port);
		char *body = NULL, err[128];
		size_t len;

		assert_int_equal(hd_raw_auth(fd2, SECRET, true), 0);
		assert_int_equal(th_hs_send(fd2, 1, "{}\n", 3), 0);
		assert_int_equal(th_hs_recv(fd2, &body, &len, 3000), 0);
		assert_int_equal(xfer_desc_decode(body + 1, len - 1,
						  xfer_transport_codecs(), &d,
						  err, sizeof(err)), 0);
		free(body);
		close(fd2);
	}
	T.data_port = th_tcp(d)->data_port;
	xfer_desc_free(d);

	/* a request straight away: closed, 0 bytes */
	fd = th_connect(T.data_port);
	read_header(h, 64, (uintptr_t)T.mem);
	assert_int_equal(th_send_all(fd, h, 24), 0);
	assert_int_equal(th_recv_until_close(fd, got, sizeof(got), 3000), 0);
	close(fd);
	/* hello, then a request in place of the proof: the challenge, then
	 * a close; no data */
	{
		struct xfer_auth_session s;
		uint8_t hello[XFER_AUTH_HELLO_LEN];

		fd = th_connect(T.data_port);
		assert_int_equal(xfer_auth_hello(&s, hello), 0);
		assert_int_equal(th_send_all(fd, hello, sizeof(hello)), 0);
		assert_int_equal(th_send_all(fd, h, 24), 0);
		assert_int_equal(th_send_all(fd, h, 24), 0);
		assert_int_equal(th_recv_until_close(fd, got, sizeof(got),
						     3000),
				 XFER_AUTH_CHALLENGE_LEN);
		close(fd);
	}
	/* another secret: the client refuses the server's proof */
	fd = th_connect(T.data_port);
	assert_int_equal(hd_raw_auth(fd, OTHER, false), -EACCES);
	close(fd);
	/* the secret: served */
	fd = th_connect(T.data_port);
	assert_int_equal(hd_raw_auth(fd, SECRET, false), 0);
	assert_int_equal(th_send_all(fd, h, 24), 0);
	assert_int_equal(th_recv_all(fd, st, 8, 3000), 8);
	assert_memory_equal(st, status_ok, 8);
	assert_int_equal(th_recv_all(fd, got, 64, 3000), 64);
	assert_memory_equal(got, T.mem, 64);
	close(fd);
	target_stop();
}

/* Through xfer-metad: the descriptor is there for anyone who can read
 * the store, and still gets a peer without the secret nothing. */
static void test_central_store(void **state)
{
	char url[64];
	/* with a store, names are names: each engine its own */
	const char *kv_t[] = { "auth_secret", SECRET, "metadata_server", url,
			       "local_server_name", "auth-target", NULL };
	const char *kv_i[] = { "auth_secret", SECRET, "metadata_server", url,
			       "local_server_name", "auth-good", NULL };
	const char *kv_none[] = { "metadata_server", url,
				  "local_server_name", "auth-none", NULL };
	const char *kv_other[] = { "auth_secret", OTHER, "metadata_server",
				   url, "local_server_name", "auth-other",
				   NULL };
	const char *const *who[] = { kv_none, kv_other };
	uint16_t port;
	pid_t m;

	(void)state;
	m = hd_metad_start(0, NULL, &port);
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/metadata", port);
	target_start(kv_t);
	hd_good_transfer(xfer_engine_name(T.e), (uintptr_t)T.mem + 10,
			 T.mem + 10, kv_i);
	for (int k = 0; k < 2; k++) {
		struct xfer_engine *i = hd_engine(1, who[k]);
		uint8_t *ib = th_alloc(2 * 4096), before[4096];
		uint64_t tr = 1;
		int64_t seg;

		memset(ib, 0, 2 * 4096);
		th_fill(ib + 4096, 4096, 99);
		memcpy(before, T.mem + 8192, 4096);
		assert_int_equal(xfer_register(i, ib, 2 * 4096, "cpu:0", true),
				 0);
		seg = xfer_segment_open(i, xfer_engine_name(T.e));
		assert_true(seg >= 0); /* the store is not what is guarded */
		th_assert_status(th_xfer1(i, XFER_READ, ib, seg,
					  (uintptr_t)T.mem, 4096, &tr),
				 XFER_FAILED);
		assert_int_equal(tr, 0);
		assert_int_equal(th_check_byte(ib, 4096, 0), -1);
		th_assert_status(th_xfer1(i, XFER_WRITE, ib + 4096, seg,
					  (uintptr_t)T.mem + 8192, 4096, &tr),
				 XFER_FAILED);
		assert_memory_equal(T.mem + 8192, before, 4096);
		assert_int_equal(xfer_segment_close(i, seg), 0);
		assert_int_equal(xfer_unregister(i, ib), 0);
		xfer_engine_free(i);
		free(ib);
	}
	target_stop();
	hd_metad_stop(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_same_secret),
		cmocka_unit_test(test_handshake_refused),
		cmocka_unit_test(test_data_port_refused),
		cmocka_unit_test(test_central_store),
	};

	return cmocka_run_group_tests_name("harden: peer authentication",
					   tests, NULL, NULL);
}
