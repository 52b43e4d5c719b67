/*
 * Robustness against the network, the handshake port (PROTOCOL.md §1):
 * garbage and hostile frames, raw clients speaking the protocol by hand,
 * slow and idle ones, and after each a good engine-to-engine transfer
 * proving the engine still serves. The data port is
 * test/it_robust_data.c's.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/desc_internal.h"
#include "core/handshake_internal.h"
#include "test/helpers.h"
#include "test/th_robust.h"

/* ---- (a) the handshake port ---- */

/* Send @bytes to the handshake port: the server closes without a byte. */
static void hs_expect_close(const char *what, const void *bytes, size_t n)
{
	int fd = th_connect(F.rpc_port);
	uint8_t got[64];
	long r;

	/* the server may close before reading all: a failed send is fine */
	(void)th_send_all(fd, bytes, n);
	r = th_recv_until_close(fd, got, sizeof(got), CLOSE_MS);
	if (r != 0)
		fail_msg("%s: %ld (bytes, or -errno) instead of a close "
			 "without reply", what, r);
	close(fd);
}

/* A frame: length @len_field, then @tail (type byte and body). */
static void hs_expect_close_frame(const char *what, uint64_t len_field,
				  const void *tail, size_t n)
{
	uint8_t *f = malloc(8 + n);

	assert_non_null(f);
	th_put_le64(f, len_field);
	memcpy(f + 8, tail, n);
	hs_expect_close(what, f, 8 + n);
	free(f);
}

struct hs_case {
	const char *what;
	uint64_t len_field;   /* UINT64_MAX: use the length of tail */
	const char *tail;
	size_t tail_len;
};

static void test_hs_garbage(void **state)
{
	const struct hs_case *c = *state;

	if (c == NULL) { /* random bytes */
		uint8_t junk[64];

		th_fill(junk, sizeof(junk), 99);
		hs_expect_close("random bytes", junk, sizeof(junk));
	} else {
		hs_expect_close_frame(c->what, c->len_field == UINT64_MAX ?
				      c->tail_len : c->len_field,
				      c->tail, c->tail_len);
	}
	good_transfer();
}

#define TAIL(str) str, sizeof(str) - 1

static const struct hs_case hs_len0 = { "length 0", 0, TAIL("\x01{}\n") };
static const struct hs_case hs_len_big = { "length > 1 MiB",
	(1u << 20) + 2, TAIL("\x01{}\n") };
static const struct hs_case hs_len_huge = { "length 2^63",
	1ull << 63, TAIL("\x01{}\n") };
/* 0x04..0x7f starts a legacy (untyped) frame, which must be JSON */
static const struct hs_case hs_type9 = { "legacy frame, not JSON",
	UINT64_MAX, TAIL("\x09x{}\n") };
static const struct hs_case hs_legacy_array = { "legacy frame, an array",
	UINT64_MAX, TAIL("[{}]\n") };
static const struct hs_case hs_type80 = { "type 0x80", UINT64_MAX,
	TAIL("\x80{}\n") };
static const struct hs_case hs_type_ff = { "type 0xff", UINT64_MAX,
	TAIL("\xff{}\n") };
static const struct hs_case hs_bad_json = { "Metadata, malformed JSON",
	UINT64_MAX, TAIL("\x01{\"name\":}\n") };
static const struct hs_case hs_truncated_json = { "Probe, cut JSON",
	UINT64_MAX, TAIL("\x03{\"a\":[1,\n") };
static const struct hs_case hs_not_object = { "Probe, not an object",
	UINT64_MAX, TAIL("\x03[]\n") };
static const struct hs_case hs_two_objects = { "Metadata, two objects",
	UINT64_MAX, TAIL("\x01{}{}\n") };

/* A frame whose body never completes is closed after 5 s. */
static void test_hs_slow_body(void **state)
{
	int fd = th_connect(F.rpc_port);
	uint8_t f[8 + 11];
	int64_t t0 = th_now_ms();
	long r;

	(void)state;
	th_put_le64(f, 100);
	memcpy(f + 8, "\x01{\"buffers\"", 11);
	assert_int_equal(th_send_all(fd, f, sizeof(f)), 0);
	r = th_recv_until_close(fd, NULL, 0, CLOSE_MS + 1000);
	if (r != 0)
		fail_msg("incomplete frame: %ld after %lld ms", r,
			 (long long)(th_now_ms() - t0));
	close(fd);
	good_transfer();
}

/* The 5 s for a frame are not renewed by every byte: a client that
 * trickles one byte a second is closed within about 5 s all the same. */
static void test_hs_trickle(void **state)
{
	int fd = th_connect(F.rpc_port);
	uint8_t f[8 + 1];
	int64_t t0 = th_now_ms();
	long r = -ETIMEDOUT;

	(void)state;
	th_put_le64(f, 4000);
	f[8] = 1;
	assert_int_equal(th_send_all(fd, f, sizeof(f)), 0);
	while (th_now_ms() - t0 < CLOSE_MS + 2000) {
		/* wait up to 1 s for the close, else send one more byte */
		r = th_recv_until_close(fd, NULL, 0, 1000);
		if (r != -ETIMEDOUT)
			break;
		(void)th_send_all(fd, " ", 1);
	}
	if (r != 0 || th_now_ms() - t0 > CLOSE_MS + 500)
		fail_msg("trickled frame: %ld (bytes or -errno) after %lld ms; "
			 "want a close without reply within 5 s", r,
			 (long long)(th_now_ms() - t0));
	close(fd);
	good_transfer();
}

static void test_hs_metadata(void **state)
{
	struct xfer_desc *d;

	(void)state;
	d = th_fetch_desc(F.rpc_port); /* checks type byte 1 and the close */
	assert_string_equal(d->name, xfer_engine_name(F.t));
	assert_int_equal(th_tcp(d)->data_port, F.data_port);
	assert_int_equal(d->nbufs, 1);
	assert_int_equal(d->bufs[0].addr, (uintptr_t)F.tb);
	assert_int_equal(d->bufs[0].length, TB_REG);
	xfer_desc_free(d);

	/* a request carrying the client's own descriptor is fine too */
	{
		static const char req[] =
			"{\"buffers\":[],\"name\":\"127.0.0.1:1\","
			"\"protocol\":\"tcp\",\"tcp_data_port\":1,"
			"\"tcp_proto_version\":2}\n";
		struct xfer_desc *d2 = NULL;
		char err[256] = "";
		size_t len;
		char *json = th_hs_call(F.rpc_port, 1, req, &len);

		assert_int_equal(xfer_desc_decode(json, len,
						  xfer_transport_codecs(), &d2,
						  err, sizeof(err)), 0);
		assert_string_equal(d2->name, xfer_engine_name(F.t));
		xfer_desc_free(d2);
		free(json);
	}
	good_transfer();
}

static void test_hs_probe(void **state)
{
	size_t len;
	char *json = th_hs_call(F.rpc_port, 3, "{}\n", &len);

	(void)state;
	assert_string_equal(json, "{\"status\":\"success\"}\n");
	assert_int_equal(len, strlen(json));
	free(json);
	good_transfer();
}

static void test_hs_notify(void **state)
{
	struct xfer_hs_notify n = { 0 };
	char err[256] = "";
	size_t len;
	char *json = th_hs_call(F.rpc_port, 2,
				"{\"name\":\"peer\",\"notify_msg\":\"hi\"}\n",
				&len);

	(void)state;
	assert_int_equal(json[len - 1], '\n');
	if (xfer_hs_notify_decode(json, len, &n, err, sizeof(err)) != 0)
		fail_msg("notify reply does not decode (%s): %s", err, json);
	assert_string_equal(n.name, "");
	assert_string_equal(n.notify_msg, "success");
	xfer_hs_notify_clear(&n);
	free(json);
	good_transfer();
}

static const char conn_req[] =
	"{\"local_gid\":\"\",\"local_lid\":0,\"local_nic_path\":\"x@mlx5_0\","
	"\"payload\":\"\",\"peer_nic_path\":\"y@mlx5_0\",\"qp_num\":[],"
	"\"ready_ack\":false,\"reply_msg\":\"\"}\n";

static void test_hs_connection_typed(void **state)
{
	struct xfer_hs_conn c = { 0 };
	char err[256] = "";
	size_t len;
	char *json = th_hs_call(F.rpc_port, 0, conn_req, &len);

	(void)state;
	if (xfer_hs_conn_decode(json, len, &c, err, sizeof(err)) != 0)
		fail_msg("connection reply does not decode (%s): %s", err, json);
	xfer_hs_conn_clear(&c);
	free(json);
	good_transfer();
}

/* A legacy frame (no type byte, body starts with '{') is a Connection and
 * is answered with an untyped frame. */
static void test_hs_legacy(void **state)
{
	int fd = th_connect(F.rpc_port);
	struct xfer_hs_conn c = { 0 };
	char err[256] = "";
	char *body = NULL;
	size_t len = 0;

	(void)state;
	assert_int_equal(th_hs_send(fd, -1, conn_req, strlen(conn_req)), 0);
	assert_int_equal(th_hs_recv(fd, &body, &len, CLOSE_MS), 0);
	assert_true(len > 0);
	assert_int_equal(body[0], '{');
	if (xfer_hs_conn_decode(body, len, &c, err, sizeof(err)) != 0)
		fail_msg("legacy reply does not decode (%s): %s", err, body);
	xfer_hs_conn_clear(&c);
	assert_int_equal(th_recv_until_close(fd, NULL, 0, CLOSE_MS), 0);
	close(fd);
	free(body);
	good_transfer();
}

/* Many raw connections stay open and idle (nothing, a partial length, a
 * partial body) while a good peer opens the engine and transfers. */
static void test_hs_many_idle(void **state)
{
	enum { N = 48 };
	int fds[N];
	uint8_t partial[8 + 5];

	(void)state;
	th_put_le64(partial, 200);
	memcpy(partial + 8, "\x01{\"na", 5);
	for (int k = 0; k < N; k++) {
		fds[k] = th_connect(F.rpc_port);
		if (k % 3 == 1)
			assert_int_equal(th_send_all(fds[k], partial, 3), 0);
		else if (k % 3 == 2)
			assert_int_equal(th_send_all(fds[k], partial,
						     sizeof(partial)), 0);
	}
	good_transfer();
	{
		size_t len;
		char *json = th_hs_call(F.rpc_port, 3, "{}\n", &len);

		assert_string_equal(json, "{\"status\":\"success\"}\n");
		free(json);
	}
	for (int k = 0; k < N; k++)
		close(fds[k]);
	good_transfer();
}

/* One garbage case as a test of its own name. */
#define HS_CASE(name, c) { name, test_hs_garbage, NULL, NULL, (void *)(c) }

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hs_metadata),
		cmocka_unit_test(test_hs_probe),
		cmocka_unit_test(test_hs_notify),
		cmocka_unit_test(test_hs_connection_typed),
		cmocka_unit_test(test_hs_legacy),
		HS_CASE("test_hs_random_bytes", NULL),
		HS_CASE("test_hs_length_0", &hs_len0),
		HS_CASE("test_hs_length_over_1MiB", &hs_len_big),
		HS_CASE("test_hs_length_2e63", &hs_len_huge),
		HS_CASE("test_hs_legacy_not_json", &hs_type9),
		HS_CASE("test_hs_legacy_array", &hs_legacy_array),
		HS_CASE("test_hs_type_0x80", &hs_type80),
		HS_CASE("test_hs_type_0xff", &hs_type_ff),
		HS_CASE("test_hs_metadata_bad_json", &hs_bad_json),
		HS_CASE("test_hs_probe_cut_json", &hs_truncated_json),
		HS_CASE("test_hs_probe_not_object", &hs_not_object),
		HS_CASE("test_hs_metadata_two_objects", &hs_two_objects),
		cmocka_unit_test(test_hs_slow_body),
		cmocka_unit_test(test_hs_trickle),
		cmocka_unit_test(test_hs_many_idle),
	};

	return cmocka_run_group_tests_name("robust: handshake port", tests,
					   robust_setup, robust_teardown);
}
