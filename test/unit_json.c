/* Unit tests: the handshake bodies (PROTOCOL.md §1), rpc_meta, and what
 * every JSON decoder refuses. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test/th_json.h"

static void test_encode_invalid_utf8(void **state)
{
	struct xfer_desc d = {
		.name = "h\xff", .protocol = "tcp", .codec = &xfer_tcp_codec,
		.tp = &(struct xfer_tcp_desc){ .data_port = 1 },
	};
	struct xfer_hs_notify n = { .name = "\xc3" };
	char *json = NULL;
	size_t len = 0;

	(void)state;
	assert_int_equal(xfer_desc_encode(&d, &json, &len), -EINVAL);
	assert_int_equal(xfer_hs_notify_encode(&n, &json, &len), -EINVAL);
	assert_null(json);
}

/* ---- Connection ---- */

static void test_conn_encode_empty(void **state)
{
	struct xfer_hs_conn c = { 0 };
	char *json;
	size_t len;

	(void)state;
	assert_int_equal(xfer_hs_conn_encode(&c, &json, &len), 0);
	assert_string_equal(json,
		"{\"local_gid\":\"\",\"local_lid\":0,\"local_nic_path\":\"\","
		"\"payload\":\"\",\"peer_nic_path\":\"\",\"qp_num\":[],"
		"\"ready_ack\":false,\"reply_msg\":\"\"}\n");
	free(json);
}

static void test_conn_round_trip(void **state)
{
	uint32_t qps[] = { 0, 0x1234, UINT32_MAX };
	struct xfer_hs_conn in = {
		.local_gid = "fe:80:00:00:00:00:00:00:02:00:00:ff:fe:00:00:01",
		.local_lid = UINT32_MAX,
		.local_nic_path = "10.0.0.1:15001@mlx5_0",
		.payload = "p\"q\\r\n",
		.peer_nic_path = "10.0.0.2:15001@mlx5_1",
		.nqp = ARRAY_SIZE(qps),
		.qp_num = qps,
		.reply_msg = "",
	};
	struct xfer_hs_conn out;
	char err[256] = "";
	char *json;
	size_t len, i;
	int ack;

	(void)state;
	for (ack = 0; ack < 2; ack++) {
		in.ready_ack = ack;
		in.nqp = ack ? ARRAY_SIZE(qps) : 0;
		assert_int_equal(xfer_hs_conn_encode(&in, &json, &len), 0);
		check_line(json, len);
		if (xfer_hs_conn_decode(json, len, &out, err, sizeof(err)))
			fail_msg("%s for: %s", err, json);
		free(json);
		assert_string_equal(out.local_gid, in.local_gid);
		assert_true(out.local_lid == UINT32_MAX);
		assert_string_equal(out.local_nic_path, in.local_nic_path);
		assert_string_equal(out.payload, in.payload);
		assert_string_equal(out.peer_nic_path, in.peer_nic_path);
		assert_string_equal(out.reply_msg, "");
		assert_int_equal(out.ready_ack, ack);
		assert_int_equal(out.nqp, in.nqp);
		for (i = 0; i < in.nqp; i++)
			assert_true(out.qp_num[i] == qps[i]);
		xfer_hs_conn_clear(&out);
	}
}

static char *conn_with_qps(size_t n)
{
	char *json, *p;
	size_t i;

	json = xmalloc(512 + 16 * n);
	p = json + sprintf(json, "{" C_GID C_LID C_LNIC C_PAY C_PNIC
			   "\"qp_num\":[");
	for (i = 0; i < n; i++)
		p += sprintf(p, "%s%zu", i ? "," : "", i + 100);
	strcpy(p, "]," C_ACK C_REPLY END);
	return json;
}

/* Decode @p json (which must be accepted) into @p c. */
static void conn_ok(const char *json, struct xfer_hs_conn *c)
{
	char err[256] = "";

	if (xfer_hs_conn_decode(json, strlen(json), c, err, sizeof(err)))
		fail_msg("%s for: %s", err, json);
}

/*
 * What Mooncake's decoder accepts: any field missing (peers of other
 * versions leave out ready_ack, local_lid, local_gid, payload), read as
 * ""/0/false/no QPs; unknown fields ignored; a ready_ack that is not a
 * boolean read as false.
 */
static void test_conn_lenient(void **state)
{
	static const char *const missing[] = {
		"{" C_LID C_LNIC C_PAY C_PNIC C_QP C_ACK C_REPLY END,
		"{" C_GID C_LNIC C_PAY C_PNIC C_QP C_ACK C_REPLY END,
		"{" C_GID C_LID C_PAY C_PNIC C_QP C_ACK C_REPLY END,
		"{" C_GID C_LID C_LNIC C_PNIC C_QP C_ACK C_REPLY END,
		"{" C_GID C_LID C_LNIC C_PAY C_QP C_ACK C_REPLY END,
		"{" C_GID C_LID C_LNIC C_PAY C_PNIC C_ACK C_REPLY END,
		"{" C_GID C_LID C_LNIC C_PAY C_PNIC C_QP C_REPLY END,
		"{" C_GID C_LID C_LNIC C_PAY C_PNIC C_QP C_ACK END,
	};
	static const char *const acks[] = {
		"1", "\"true\"", "null", "[]", "{}", "0",
	};
	struct xfer_hs_conn c;
	char json[512];
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(missing); i++)
		expect_ok(try_conn, missing[i]);

	/* Mooncake before ready_ack and payload, as its writer put it */
	conn_ok("{\"local_gid\":\"fe:80\",\"local_lid\":7,"
		"\"local_nic_path\":\"h:1@mlx5_0\",\"peer_nic_path\":"
		"\"h:2@mlx5_1\",\"qp_num\":[1,2],\"reply_msg\":\"\"}\n", &c);
	assert_false(c.ready_ack);
	assert_string_equal(c.payload, "");
	assert_int_equal(c.nqp, 2);
	assert_true(c.qp_num[1] == 2);
	xfer_hs_conn_clear(&c);

	/* no local_lid, no local_gid, a "protocol" field */
	conn_ok("{\"local_nic_path\":\"h:1@rxe0\",\"payload\":\"\","
		"\"peer_nic_path\":\"h:2@rxe0\",\"protocol\":\"rdma\","
		"\"qp_num\":[9],\"reply_msg\":\"\"}\n", &c);
	assert_true(c.local_lid == 0);
	assert_string_equal(c.local_gid, "");
	assert_string_equal(c.local_nic_path, "h:1@rxe0");
	assert_false(c.ready_ack);
	xfer_hs_conn_clear(&c);

	/* nothing at all: every field empty */
	conn_ok("{}", &c);
	assert_string_equal(c.local_gid, "");
	assert_string_equal(c.local_nic_path, "");
	assert_string_equal(c.peer_nic_path, "");
	assert_string_equal(c.payload, "");
	assert_string_equal(c.reply_msg, "");
	assert_true(c.local_lid == 0);
	assert_int_equal(c.nqp, 0);
	assert_null(c.qp_num);
	xfer_hs_conn_clear(&c);

	for (i = 0; i < ARRAY_SIZE(acks); i++) {
		snprintf(json, sizeof(json), "{" C_QP "\"ready_ack\":%s}",
			 acks[i]);
		conn_ok(json, &c);
		assert_false(c.ready_ack);
		xfer_hs_conn_clear(&c);
	}
	conn_ok("{\"ready_ack\":true}", &c);
	assert_true(c.ready_ack);
	xfer_hs_conn_clear(&c);
}

/* What stays refused: wrong types and out-of-bounds values of fields
 * that are there, too many QPs, overlong strings, a body that is not an
 * object. */
static void test_conn_reject(void **state)
{
	static const char *const bad[] = {
		"{\"local_gid\":1," C_LID C_LNIC C_PAY C_PNIC C_QP C_ACK
			C_REPLY END,
		"{" C_GID "\"local_lid\":\"7\"," C_LNIC C_PAY C_PNIC C_QP C_ACK
			C_REPLY END,
		"{" C_GID "\"local_lid\":-1," C_LNIC C_PAY C_PNIC C_QP C_ACK
			C_REPLY END,
		"{" C_GID "\"local_lid\":4294967296," C_LNIC C_PAY C_PNIC C_QP
			C_ACK C_REPLY END,
		"{" C_GID "\"local_lid\":1.5," C_LNIC C_PAY C_PNIC C_QP C_ACK
			C_REPLY END,
		"{" C_GID "\"local_lid\":null," C_LNIC C_PAY C_PNIC C_QP C_ACK
			C_REPLY END,
		"{" C_GID C_LID "\"local_nic_path\":[]," C_PAY C_PNIC C_QP
			C_ACK C_REPLY END,
		"{" C_GID C_LID C_LNIC "\"payload\":null," C_PNIC C_QP C_ACK
			C_REPLY END,
		"{" C_GID C_LID C_LNIC C_PAY "\"peer_nic_path\":{}," C_QP
			C_ACK C_REPLY END,
		"{" C_GID C_LID C_LNIC C_PAY C_PNIC "\"qp_num\":1," C_ACK
			C_REPLY END,
		"{" C_GID C_LID C_LNIC C_PAY C_PNIC "\"qp_num\":null," C_ACK
			C_REPLY END,
		"{" C_GID C_LID C_LNIC C_PAY C_PNIC "\"qp_num\":[\"1\"],"
			C_ACK C_REPLY END,
		"{" C_GID C_LID C_LNIC C_PAY C_PNIC "\"qp_num\":[1,-2],"
			C_ACK C_REPLY END,
		"{" C_GID C_LID C_LNIC C_PAY C_PNIC "\"qp_num\":[4294967296],"
			C_ACK C_REPLY END,
		"{" C_GID C_LID C_LNIC C_PAY C_PNIC "\"qp_num\":[2.5],"
			C_ACK C_REPLY END,
		"{" C_GID C_LID C_LNIC C_PAY C_PNIC C_QP C_ACK
			"\"reply_msg\":false," END,
	};
	char *json;
	size_t i;

	(void)state;
	expect_ok(try_conn, CONN_OK);
	for (i = 0; i < ARRAY_SIZE(bad); i++)
		expect_reject(try_conn, bad[i]);

	json = conn_with_qps(64);
	expect_ok(try_conn, json);
	free(json);
	json = conn_with_qps(65);
	expect_reject(try_conn, json);
	free(json);

	/* a string past 4096 bytes */
	json = xmalloc(5000);
	i = (size_t)sprintf(json, "{\"local_nic_path\":\"");
	memset(json + i, 'a', 4097);
	strcpy(json + i + 4097, "\"}");
	expect_reject(try_conn, json);
	free(json);
}

/* ---- Notify ---- */

static void test_notify_round_trip(void **state)
{
	struct xfer_hs_notify in = { .name = "h:1",
				     .notify_msg = "d\xc3\xa9j\xc3\xa0 vu" };
	struct xfer_hs_notify reply = { .notify_msg = "success" };
	struct xfer_hs_notify out;
	char err[256] = "";
	char *json;
	size_t len;

	(void)state;
	assert_int_equal(xfer_hs_notify_encode(&reply, &json, &len), 0);
	assert_string_equal(json,
			    "{\"name\":\"\",\"notify_msg\":\"success\"}\n");
	free(json);

	assert_int_equal(xfer_hs_notify_encode(&in, &json, &len), 0);
	check_line(json, len);
	assert_int_equal(xfer_hs_notify_decode(json, len, &out, err,
					       sizeof(err)), 0);
	free(json);
	assert_string_equal(out.name, in.name);
	assert_string_equal(out.notify_msg, in.notify_msg);
	xfer_hs_notify_clear(&out);
}

/* A missing field reads as "", as Mooncake reads it; a present one must
 * be a string. */
static void test_notify_reject(void **state)
{
	static const char *const bad[] = {
		"{\"name\":1," N_MSG END,
		"{" N_NAME "\"notify_msg\":[]," END,
		"{\"name\":null," N_MSG END,
	};
	struct xfer_hs_notify n;
	char err[256] = "";
	size_t i;

	(void)state;
	expect_ok(try_notify, NOTIFY_OK);
	for (i = 0; i < ARRAY_SIZE(bad); i++)
		expect_reject(try_notify, bad[i]);
	assert_int_equal(xfer_hs_notify_decode("{" N_MSG END,
					       strlen("{" N_MSG END), &n, err,
					       sizeof(err)), 0);
	assert_string_equal(n.name, "");
	assert_string_equal(n.notify_msg, "b");
	xfer_hs_notify_clear(&n);
	assert_int_equal(xfer_hs_notify_decode("{}", 2, &n, err, sizeof(err)),
			 0);
	assert_string_equal(n.name, "");
	assert_string_equal(n.notify_msg, "");
	xfer_hs_notify_clear(&n);
}

/* ---- rpc_meta ---- */

static void test_rpc_meta(void **state)
{
	static const char *const bad[] = {
		"{\"rpc_port\":15081}",
		"{\"ip_or_host_name\":\"h\"}",
		"{\"ip_or_host_name\":\"\",\"rpc_port\":15081}",
		"{\"ip_or_host_name\":1,\"rpc_port\":15081}",
		"{\"ip_or_host_name\":\"h\",\"rpc_port\":\"15081\"}",
		"{\"ip_or_host_name\":\"h\",\"rpc_port\":0}",
		"{\"ip_or_host_name\":\"h\",\"rpc_port\":70000}",
		"{\"ip_or_host_name\":\"h\",\"rpc_port\":-1}",
	};
	char err[256] = "", *json, *host;
	uint16_t port;
	size_t len, i;

	(void)state;
	assert_int_equal(xfer_rpc_meta_encode("127.0.0.1", 15081, &json,
					      &len), 0);
	assert_string_equal(json,
		"{\"ip_or_host_name\":\"127.0.0.1\",\"rpc_port\":15081}\n");
	assert_int_equal(len, strlen(json));
	assert_int_equal(xfer_rpc_meta_decode(json, len, &host, &port, err,
					      sizeof(err)), 0);
	assert_string_equal(host, "127.0.0.1");
	assert_int_equal(port, 15081);
	free(host);
	free(json);

	for (i = 0; i < ARRAY_SIZE(bad); i++)
		expect_reject(try_rpc, bad[i]);
}

/* ---- malformed text, every decoder ---- */

static void test_malformed(void **state)
{
	static const char *const bad[] = {
		"", " ", "\n", "{", "{\"name\":\"a\"", "{\"a\":}", "{'a':1}",
		"{\"a\":1,}", "{\"a\" 1}", "{\"a\":\"\xff\"}", "\xef\xbb\xbf{}",
		"[]", "[{}]", "\"s\"", "1", "null", "true",
		"{} x", "{}{}", "{}]", "{\"a\":1}}",
	};
	size_t i, j;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(th_decoders); i++) {
		for (j = 0; j < ARRAY_SIZE(bad); j++)
			expect_reject(th_decoders[i], bad[j]);
		/* a NUL byte, after the object or inside a string */
		expect_reject_len(th_decoders[i], "{}\0{}", 5);
		expect_reject_len(th_decoders[i], "{\"a\":\"\0\"}", 9);
	}
}

/* A NUL byte inside a comment: a parse error that says so, not "out of
 * memory" (comments are allowed, as yajl_tree_parse() allows them). */
static void test_nul_in_comment(void **state)
{
	static const char block[] = "{/* a\0b */}", line[] = "{// a\0b\n}",
			  after[] = "{} /*\0*/";
	const char *err;
	size_t i;

	(void)state;
	expect_ok(try_check, "{/* a comment */}");
	for (i = 0; i < ARRAY_SIZE(th_decoders); i++) {
		err = expect_reject_len(th_decoders[i], block, sizeof(block) - 1);
		if (!strstr(err, "NUL"))
			fail_msg("block comment: \"%s\"", err);
		err = expect_reject_len(th_decoders[i], line, sizeof(line) - 1);
		if (!strstr(err, "NUL"))
			fail_msg("line comment: \"%s\"", err);
		err = expect_reject_len(th_decoders[i], after, sizeof(after) - 1);
		if (!strstr(err, "NUL"))
			fail_msg("comment after the object: \"%s\"", err);
	}
}

static void test_check_object(void **state)
{
	static const char *const ok[] = {
		"{}", "{}\n", " {\"a\":[1,{\"b\":null}]} ", NOTIFY_OK,
	};
	char err[256] = "";
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(ok); i++)
		assert_int_equal(xfer_json_check_object(ok[i], strlen(ok[i]),
							err, sizeof(err)), 0);
}

/* Deep nesting is refused before a tree is built (yajl frees one
 * recursively); a megabyte of it would overflow the stack. */
static void test_nesting(void **state)
{
	char err[256] = "";
	size_t i;
	char *s;

	(void)state;
	assert_true(asprintf(&s, "{\"a\":%.*s%.*s}", 31,
			     "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", 31,
			     "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]") > 0);
	assert_int_equal(xfer_json_check_object(s, strlen(s), err,
						sizeof(err)), 0);
	free(s);
	assert_true(asprintf(&s, "{\"a\":%.*s%.*s}", 32,
			     "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", 32,
			     "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]") > 0);
	for (i = 0; i < ARRAY_SIZE(th_decoders); i++)
		expect_reject(th_decoders[i], s);
	free(s);

	s = xmalloc(1 << 20);
	memset(s, '[', 1 << 20);
	memcpy(s, "{\"a\":", 5);
	for (i = 0; i < ARRAY_SIZE(th_decoders); i++)
		expect_reject_len(th_decoders[i], s, 1 << 20);
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_encode_invalid_utf8),
		cmocka_unit_test(test_conn_encode_empty),
		cmocka_unit_test(test_conn_round_trip),
		cmocka_unit_test(test_conn_lenient),
		cmocka_unit_test(test_conn_reject),
		cmocka_unit_test(test_notify_round_trip),
		cmocka_unit_test(test_notify_reject),
		cmocka_unit_test(test_rpc_meta),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_nul_in_comment),
		cmocka_unit_test(test_check_object),
		cmocka_unit_test(test_nesting),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
