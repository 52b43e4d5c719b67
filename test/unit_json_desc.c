/* Unit tests: the core descriptor codec with TCP's fields (PROTOCOL.md §2). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test/th_json.h"

static void test_desc_encode_exact(void **state)
{
	struct xfer_desc_buf bufs[] = {
		TBUF(4096, 1024, "cpu:0"),
		TBUF(9223372036854775808ULL, 1, "cuda:1"),
	};
	struct xfer_desc d = {
		.name = "127.0.0.1:15081",
		.protocol = "tcp",
		.codec = &xfer_tcp_codec,
		.tp = &(struct xfer_tcp_desc){ .data_port = 15432, .version = 2 },
		.timestamp = "2026-01-02 03:04:05.000006",
		.nbufs = ARRAY_SIZE(bufs),
		.bufs = bufs,
	};
	const char *want =
		"{\"buffers\":[{\"addr\":4096,\"length\":1024,"
		"\"name\":\"cpu:0\"},{\"addr\":9223372036854775808,"
		"\"length\":1,\"name\":\"cuda:1\"}],"
		"\"name\":\"127.0.0.1:15081\","
		"\"protocol\":\"tcp\",\"tcp_data_port\":15432,"
		"\"tcp_proto_version\":2,"
		"\"timestamp\":\"2026-01-02 03:04:05.000006\"}\n";
	char *json;
	size_t len;

	(void)state;
	assert_int_equal(xfer_desc_encode(&d, &json, &len), 0);
	assert_string_equal(json, want);
	assert_int_equal(len, strlen(want));
	free(json);
}

static void test_desc_round_trip(void **state)
{
	static const size_t counts[] = { 0, 1, 5 };
	struct xfer_desc_buf bufs[5] = {
		TBUF(0x7f0000001000ULL, 4096, "cpu:0"),
		TBUF(1ULL << 63, 1ULL << 40, "cpu:1"),
		/* ends at 2^64 - 1 */
		TBUF(UINT64_MAX - 99, 99, "cuda:0"),
		TBUF(1, 1, ""),
		TBUF(0x10000, UINT64_MAX - 0x10000, "cpu:0"),
	};
	struct xfer_desc d = {
		.name = "host:15001",
		.protocol = "tcp",
		.codec = &xfer_tcp_codec,
		.tp = &(struct xfer_tcp_desc){ .data_port = 65535, .version = 2 },
		.timestamp = "2026-05-06 07:08:09.101112",
		.bufs = bufs,
	};
	struct xfer_desc *out;
	size_t i, j;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(counts); i++) {
		d.nbufs = counts[i];
		out = desc_round_trip(&d);
		assert_string_equal(out->name, d.name);
		assert_string_equal(out->protocol, "tcp");
		assert_int_equal(TCP(out)->data_port, 65535);
		assert_int_equal(TCP(out)->version, 2);
		assert_string_equal(out->timestamp, d.timestamp);
		assert_int_equal(out->nbufs, d.nbufs);
		for (j = 0; j < d.nbufs; j++) {
			assert_true(out->bufs[j].addr == bufs[j].addr);
			assert_true(out->bufs[j].length == bufs[j].length);
			assert_string_equal(out->bufs[j].name, bufs[j].name);
		}
		xfer_desc_free(out);
	}
}

/* No timestamp given: the current one, in the peer's format. */
static void test_desc_timestamp_now(void **state)
{
	struct xfer_desc d = {
		.name = "h:1", .protocol = "tcp", .codec = &xfer_tcp_codec,
		.tp = &(struct xfer_tcp_desc){ .data_port = 1, .version = 2 },
	};
	struct xfer_desc *out;
	const char *ts;
	size_t i;

	(void)state;
	out = desc_round_trip(&d);
	assert_string_equal(out->protocol, "tcp");
	ts = out->timestamp;
	assert_non_null(ts);
	assert_int_equal(strlen(ts), 26);
	for (i = 0; i < 26; i++) {
		switch (i) {
		case 4: case 7:
			assert_int_equal(ts[i], '-');
			break;
		case 10:
			assert_int_equal(ts[i], ' ');
			break;
		case 13: case 16:
			assert_int_equal(ts[i], ':');
			break;
		case 19:
			assert_int_equal(ts[i], '.');
			break;
		default:
			assert_true(ts[i] >= '0' && ts[i] <= '9');
		}
	}
	xfer_desc_free(out);
}

/* As a Mooncake peer without protocol v2 writes it (pretty-printed here),
 * with fields this codec does not know. */
static void test_desc_mooncake_v1(void **state)
{
	static const char json[] =
		"{\n"
		"  \"buffers\" : [ { \"addr\" : 140234567892992,\n"
		"    \"length\" : 1073741824, \"lkey\" : [], \"rkey\" : [],\n"
		"    \"name\" : \"cpu:0\" } ],\n"
		"  \"name\" : \"192.168.0.7:15123\",\n"
		"  \"priority_matrix\" : {},\n"
		"  \"protocol\" : \"tcp\",\n"
		"  \"tcp_data_port\" : 16411,\n"
		"  \"timestamp\" : \"2026-03-01 10:20:30.123456\"\n"
		"}\n";
	struct xfer_desc *d = NULL;
	char err[256] = "";

	(void)state;
	assert_int_equal(xfer_desc_decode(json, strlen(json), CODECS, &d,
					  err, sizeof(err)), 0);
	assert_string_equal(d->name, "192.168.0.7:15123");
	assert_string_equal(d->protocol, "tcp");
	assert_int_equal(TCP(d)->data_port, 16411);
	assert_int_equal(TCP(d)->version, 1);
	assert_string_equal(d->timestamp, "2026-03-01 10:20:30.123456");
	assert_int_equal(d->nbufs, 1);
	assert_true(d->bufs[0].addr == 140234567892992ULL);
	assert_true(d->bufs[0].length == 1073741824ULL);
	assert_string_equal(d->bufs[0].name, "cpu:0");
	xfer_desc_free(d);
}

/* Another protocol: common fields only, no TCP or RDMA field required
 * and those present ignored. */
static void test_desc_other_protocol(void **state)
{
	static const char json[] =
		"{\"buffers\":[" RBF(",\"rkey\":1") "],\"name\":\"h:1\","
		"\"protocol\":\"nvmeof\",\"devices\":[],"
		"\"priority_matrix\":[]}";
	struct xfer_desc *d = NULL;
	char err[256] = "";

	(void)state;
	assert_int_equal(xfer_desc_decode(json, strlen(json), CODECS, &d,
					  err, sizeof(err)), 0);
	assert_string_equal(d->protocol, "nvmeof");
	/* no codec: no TCP fields, no devices, matrix or keys */
	assert_null(d->codec);
	assert_null(d->tp);
	assert_null(d->timestamp);
	assert_int_equal(d->nbufs, 1);
	assert_null(d->bufs[0].tp);
	xfer_desc_free(d);
}

/* TCP decodes as before: RDMA fields, even malformed, are not read. */
static void test_desc_tcp_ignores_rdma(void **state)
{
	static const char json[] =
		"{\"buffers\":[" RBF(",\"lkey\":\"x\",\"rkey\":[-1]") "],"
		NAME PROTO PORT "\"devices\":[{\"name\":\"\"}],"
		"\"priority_matrix\":1," END;
	struct xfer_desc *d = NULL;
	char err[256] = "";

	(void)state;
	assert_int_equal(xfer_desc_decode(json, strlen(json), CODECS, &d,
					  err, sizeof(err)), 0);
	assert_string_equal(d->protocol, "tcp");
	/* the TCP codec's fields only: no devices, matrix or keys */
	assert_ptr_equal(d->codec, &xfer_tcp_codec);
	assert_int_equal(TCP(d)->data_port, 15432);
	assert_int_equal(TCP(d)->version, 1);
	assert_int_equal(d->nbufs, 1);
	assert_null(d->bufs[0].tp);
	xfer_desc_free(d);
}

/* Input is a frame body: not NUL-ended, and what follows is not ours. */
static void test_desc_not_nul_terminated(void **state)
{
	static const char body[] = DESC_OK;
	size_t len = strlen(body);
	struct xfer_desc *d = NULL;
	char err[256] = "";
	char *buf;

	(void)state;
	/* exactly @len bytes: valgrind flags a read past them */
	buf = xmalloc(len);
	memcpy(buf, body, len);
	assert_int_equal(xfer_desc_decode(buf, len, CODECS, &d, err,
					  sizeof(err)), 0);
	assert_string_equal(d->name, "h:1");
	xfer_desc_free(d);
	free(buf);

	/* followed by garbage that would not parse */
	assert_true(asprintf(&buf, "%s}x{\"", body) > 0);
	d = NULL;
	assert_int_equal(xfer_desc_decode(buf, len, CODECS, &d, err,
					  sizeof(err)), 0);
	assert_int_equal(TCP(d)->data_port, 15432);
	xfer_desc_free(d);
	/* the same bytes with the garbage counted in are refused */
	expect_reject_len(try_desc, buf, len + 2);
	free(buf);
}

static void test_desc_valid_variants(void **state)
{
	static const char *const ok[] = {
		DESC_OK,
		"{" BUFS NAME PROTO PORT "\"tcp_proto_version\":1," END,
		"{" BUFS NAME PROTO PORT "\"tcp_proto_version\":2," END,
		"{\"buffers\":[]," NAME PROTO "\"tcp_data_port\":1," END,
		DBUF(BF("18446744073709551614", "1", "\"\"")),
		"{" BUFS NAME PROTO PORT "\"timestamp\":\"x\"," END,
	};
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(ok); i++)
		expect_ok(try_desc, ok[i]);
}

static void test_desc_reject(void **state)
{
	static const char *const bad[] = {
		/* each required field missing */
		"{" NAME PROTO PORT END,
		"{" BUFS PROTO PORT END,
		"{" BUFS NAME PORT END,
		"{" BUFS NAME PROTO END,
		DBUF("{\"length\":1,\"name\":\"a\"}"),
		DBUF("{\"addr\":1,\"name\":\"a\"}"),
		DBUF("{\"addr\":1,\"length\":1}"),
		/* wrong types */
		"{\"buffers\":{}," NAME PROTO PORT END,
		"{\"buffers\":null," NAME PROTO PORT END,
		DBUF("1"),
		DBUF("[]"),
		"{" BUFS "\"name\":7," PROTO PORT END,
		"{" BUFS "\"name\":null," PROTO PORT END,
		"{" BUFS NAME "\"protocol\":1," PORT END,
		"{" BUFS NAME PROTO "\"tcp_data_port\":\"15432\"," END,
		"{" BUFS NAME PROTO PORT "\"tcp_proto_version\":\"2\"," END,
		"{" BUFS NAME PROTO PORT "\"timestamp\":1," END,
		DBUF(BF("\"4096\"", "1", "\"a\"")),
		DBUF(BF("true", "1", "\"a\"")),
		DBUF(BF("1", "[1]", "\"a\"")),
		DBUF(BF("1", "1", "1")),
		/* out of range or not an integer */
		"{" BUFS "\"name\":\"\"," PROTO PORT END,
		DBUF(BF("0", "1", "\"a\"")),
		DBUF(BF("1", "0", "\"a\"")),
		DBUF(BF("18446744073709551615", "1", "\"a\"")),
		DBUF(BF("1", "18446744073709551615", "\"a\"")),
		DBUF(BF("18446744073709551616", "1", "\"a\"")),
		DBUF(BF("99999999999999999999999", "1", "\"a\"")),
		DBUF(BF("-4096", "1", "\"a\"")),
		DBUF(BF("-0", "1", "\"a\"")),
		DBUF(BF("4096.0", "1", "\"a\"")),
		DBUF(BF("4096", "1.5", "\"a\"")),
		DBUF(BF("4096", "1e3", "\"a\"")),
		"{" BUFS NAME PROTO "\"tcp_data_port\":0," END,
		"{" BUFS NAME PROTO "\"tcp_data_port\":65536," END,
		"{" BUFS NAME PROTO "\"tcp_data_port\":70000," END,
		"{" BUFS NAME PROTO "\"tcp_data_port\":-1," END,
		"{" BUFS NAME PROTO "\"tcp_data_port\":15432.5," END,
		"{" BUFS NAME PROTO PORT "\"tcp_proto_version\":0," END,
		"{" BUFS NAME PROTO PORT "\"tcp_proto_version\":3," END,
		"{" BUFS NAME PROTO PORT "\"tcp_proto_version\":-1," END,
		"{" BUFS NAME PROTO PORT "\"tcp_proto_version\":2.0," END,
	};
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(bad); i++)
		expect_reject(try_desc, bad[i]);
}

/* The reason names the field, with the buffer's index. */
static void test_desc_reject_reason(void **state)
{
	static const char json[] =
		"{\"buffers\":[" GBUF "," BF("8192", "0", "\"a\"") "],"
		NAME PROTO PORT END;

	(void)state;
	assert_non_null(strstr(expect_reject(try_desc, json),
			       "buffers[1].length"));
}

static char *desc_with_name(size_t n)
{
	char *name, *json;

	name = xmalloc(n + 1);
	memset(name, 'a', n);
	name[n] = '\0';
	assert_true(asprintf(&json, "{" BUFS "\"name\":\"%s\"," PROTO PORT END,
			     name) > 0);
	free(name);
	return json;
}

static char *desc_with_bufs(size_t n)
{
	size_t each = strlen(GBUF) + 1, i;
	char *json, *p;

	json = xmalloc(256 + n * each);
	p = json + sprintf(json, "{\"buffers\":[");
	for (i = 0; i < n; i++)
		p += sprintf(p, "%s%s", i ? "," : "", GBUF);
	strcpy(p, "]," NAME PROTO PORT END);
	return json;
}

static void test_desc_limits(void **state)
{
	char *json;

	(void)state;
	json = desc_with_name(XFER_JSON_MAX_STR);
	expect_ok(try_desc, json);
	free(json);
	json = desc_with_name(XFER_JSON_MAX_STR + 1);
	expect_reject(try_desc, json);
	free(json);

	json = desc_with_bufs(XFER_DESC_MAX_BUFFERS);
	expect_ok(try_desc, json);
	free(json);
	json = desc_with_bufs(XFER_DESC_MAX_BUFFERS + 1);
	expect_reject(try_desc, json);
	free(json);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_desc_encode_exact),
		cmocka_unit_test(test_desc_round_trip),
		cmocka_unit_test(test_desc_timestamp_now),
		cmocka_unit_test(test_desc_mooncake_v1),
		cmocka_unit_test(test_desc_other_protocol),
		cmocka_unit_test(test_desc_tcp_ignores_rdma),
		cmocka_unit_test(test_desc_not_nul_terminated),
		cmocka_unit_test(test_desc_valid_variants),
		cmocka_unit_test(test_desc_reject),
		cmocka_unit_test(test_desc_reject_reason),
		cmocka_unit_test(test_desc_limits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
