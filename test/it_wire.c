/*
 * Mooncake's forms on the handshake port (PROTOCOL.md §1), byte for byte
 * as its writer puts them (jsoncpp's FastWriter: keys sorted, compact,
 * a trailing newline), from a raw socket: what xfer accepts as Mooncake
 * does (fields of other versions missing or added, legacy untyped
 * frames, Notify without a name), and what it still refuses by closing
 * without a reply. After each refusal the engine answers a Probe.
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
#include <unistd.h>

#include "core/desc_internal.h"
#include "core/handshake_internal.h"
#include "test/helpers.h"

#define CLOSE_MS 6000

static struct xfer_engine *E;
static uint16_t port;

static int setup(void **state)
{
	(void)state;
	E = th_engine(1);
	port = xfer_engine_rpc_port(E);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	xfer_engine_free(E);
	return 0;
}

/* The engine still answers: a Probe as Mooncake sends it. */
static void still_serves(void)
{
	size_t len;
	char *json = th_hs_call(port, XFER_HS_PROBE, "{}\n", &len);

	assert_string_equal(json, "{\"status\":\"success\"}\n");
	free(json);
}

/* Send one frame (@type < 0: untyped) and read the whole reply frame,
 * then the close; the reply (type byte included, if any) is returned. */
static char *exchange(int type, const char *body, size_t *len)
{
	int fd = th_connect(port);
	char *reply = NULL;

	assert_int_equal(th_hs_send(fd, type, body, strlen(body)), 0);
	if (th_hs_recv(fd, &reply, len, CLOSE_MS))
		fail_msg("no reply to %s frame: %s",
			 type < 0 ? "an untyped" : "a typed", body);
	assert_int_equal(th_recv_until_close(fd, NULL, 0, CLOSE_MS), 0);
	close(fd);
	return reply;
}

/* A typed Connection request answered with a typed Connection reply
 * that decodes (this engine has no RDMA: every field empty). */
static void conn_answered(const char *body)
{
	struct xfer_hs_conn c;
	char err[256] = "";
	size_t len;
	char *reply = exchange(XFER_HS_CONNECTION, body, &len);

	assert_int_equal(reply[0], XFER_HS_CONNECTION);
	if (xfer_hs_conn_decode(reply + 1, len - 1, &c, err, sizeof(err)))
		fail_msg("reply does not decode (%s): %s", err, reply + 1);
	assert_string_equal(c.local_nic_path, "");
	xfer_hs_conn_clear(&c);
	free(reply);
}

/* Mooncake today: "protocol" added, ready_ack left out for a peer that
 * has not shown it knows it. */
static void test_conn_current(void **state)
{
	(void)state;
	conn_answered("{\"local_gid\":\"fe:80:00:00:00:00:00:00:02:00:00:ff:"
		      "fe:00:00:01\",\"local_lid\":0,\"local_nic_path\":"
		      "\"127.0.0.1:12346@erdma_1\",\"payload\":\"\","
		      "\"peer_nic_path\":\"127.0.0.1:12345@erdma_0\","
		      "\"protocol\":\"rdma\",\"qp_num\":[4660,4661],"
		      "\"reply_msg\":\"\"}\n");
}

/* An older Mooncake: no ready_ack, no payload, no local_lid, no
 * local_gid (RoCE peers that filled neither). */
static void test_conn_older(void **state)
{
	(void)state;
	conn_answered("{\"local_nic_path\":\"127.0.0.1:12346@mlx5_1\","
		      "\"peer_nic_path\":\"127.0.0.1:12345@mlx5_0\","
		      "\"qp_num\":[17,18],\"reply_msg\":\"\"}\n");
	conn_answered("{\"local_lid\":3,\"local_nic_path\":\"a@mlx5_1\","
		      "\"peer_nic_path\":\"b@mlx5_0\",\"qp_num\":[17],"
		      "\"ready_ack\":true,\"reply_msg\":\"\"}\n");
}

/* The oldest Mooncake: no type byte at all. Answered with an untyped
 * frame: the reply's first byte is the JSON's own. */
static void test_conn_legacy(void **state)
{
	static const char *const bodies[] = {
		"{\"local_gid\":\"\",\"local_lid\":0,\"local_nic_path\":"
		"\"127.0.0.1:12346@mlx5_1\",\"peer_nic_path\":"
		"\"127.0.0.1:12345@mlx5_0\",\"qp_num\":[17,18],"
		"\"reply_msg\":\"\"}\n",
		/* Mooncake reads a first byte of 0x04..0x7f as untyped */
		" {\"qp_num\":[]}\n",
	};
	struct xfer_hs_conn c;
	char err[256] = "";
	size_t len;

	(void)state;
	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		char *reply = exchange(-1, bodies[i], &len);

		assert_int_equal(reply[0], '{');
		assert_int_equal(reply[len - 1], '\n');
		if (xfer_hs_conn_decode(reply, len, &c, err, sizeof(err)))
			fail_msg("legacy reply does not decode (%s): %s", err,
				 reply);
		xfer_hs_conn_clear(&c);
		free(reply);
	}
	still_serves();
}

/* Notify as Mooncake sends it, and without a name: queued, answered
 * "success", popped as sent (a missing name as ""). */
static void test_notify(void **state)
{
	static const struct {
		const char *body, *name, *msg;
	} cases[] = {
		{ "{\"name\":\"127.0.0.1:12346\",\"notify_msg\":\"kv ready\"}\n",
		  "127.0.0.1:12346", "kv ready" },
		{ "{\"notify_msg\":\"nameless\"}\n", "", "nameless" },
		{ "{\"name\":\"only a name\"}\n", "only a name", "" },
	};
	char *name, *msg;
	size_t len;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *reply = exchange(XFER_HS_NOTIFY, cases[i].body, &len);

		assert_string_equal(reply,
				    "\x02{\"name\":\"\",\"notify_msg\":"
				    "\"success\"}\n");
		free(reply);
		assert_int_equal(xfer_engine_notify_pop(E, &name, &msg), 0);
		assert_string_equal(name, cases[i].name);
		assert_string_equal(msg, cases[i].msg);
		free(name);
		free(msg);
	}
}

/* Metadata with the client's own descriptor, as Mooncake sends it:
 * answered with this engine's descriptor. */
static void test_metadata(void **state)
{
	struct xfer_desc *d = NULL;
	char err[256] = "";
	size_t len;
	char *json = th_hs_call(port, XFER_HS_METADATA,
				"{\"buffers\":[],\"name\":\"127.0.0.1:12346\","
				"\"protocol\":\"rdma\",\"tcp_data_port\":0,"
				"\"tcp_proto_version\":2,\"timestamp\":"
				"\"2026-01-02 03:04:05.000006\"}\n", &len);

	(void)state;
	if (xfer_desc_decode(json, len, xfer_transport_codecs(), &d, err,
			     sizeof(err)))
		fail_msg("descriptor does not decode (%s): %s", err, json);
	assert_string_equal(d->name, xfer_engine_name(E));
	xfer_desc_free(d);
	free(json);
}

/* What stays refused, closed without a reply. */
static void expect_close(int type, const char *body)
{
	int fd = th_connect(port);
	long r;

	assert_int_equal(th_hs_send(fd, type, body, strlen(body)), 0);
	r = th_recv_until_close(fd, NULL, 0, CLOSE_MS);
	if (r != 0)
		fail_msg("%ld (bytes, or -errno) instead of a close for: %s",
			 r, body);
	close(fd);
	still_serves();
}

static void test_refused(void **state)
{
	char qps[1024];
	size_t n;

	(void)state;
	/* a field that is there with the wrong type or out of bounds */
	expect_close(XFER_HS_CONNECTION, "{\"local_lid\":\"7\"}\n");
	expect_close(XFER_HS_CONNECTION, "{\"local_lid\":4294967296}\n");
	expect_close(XFER_HS_CONNECTION, "{\"local_gid\":0}\n");
	expect_close(XFER_HS_CONNECTION, "{\"qp_num\":[-1]}\n");
	n = (size_t)snprintf(qps, sizeof(qps), "{\"qp_num\":[0");
	for (int i = 1; i < 65; i++)
		n += (size_t)snprintf(qps + n, sizeof(qps) - n, ",%d", i);
	snprintf(qps + n, sizeof(qps) - n, "]}\n");
	expect_close(XFER_HS_CONNECTION, qps);
	expect_close(XFER_HS_NOTIFY, "{\"name\":1,\"notify_msg\":\"x\"}\n");
	/* not an object, typed or untyped; not JSON */
	expect_close(XFER_HS_CONNECTION, "[]\n");
	expect_close(-1, "[{\"qp_num\":[]}]\n");
	expect_close(-1, "qp_num\n");
	/* a first byte of 0x80 or more: an unknown type */
	expect_close(0x80, "{}\n");
	expect_close(0xfe, "{}\n");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_conn_current),
		cmocka_unit_test(test_conn_older),
		cmocka_unit_test(test_conn_legacy),
		cmocka_unit_test(test_notify),
		cmocka_unit_test(test_metadata),
		cmocka_unit_test(test_refused),
	};

	return cmocka_run_group_tests_name("wire: Mooncake's forms", tests,
					   setup, teardown);
}
