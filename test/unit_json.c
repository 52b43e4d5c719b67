/* Unit tests for the JSON codecs of core/desc.c (PROTOCOL.md §1–2). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "desc_internal.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static void *xmalloc(size_t size)
{
	void *p = malloc(size);

	if (!p)
		abort();
	return p;
}

/*
 * Bodies are built from fields that each end in ',' and a closing unknown
 * field, so a case can drop or replace any one field.
 */
#define END	"\"zz\":0}"
#define GBUF	"{\"addr\":4096,\"length\":1024,\"name\":\"cpu:0\"}"
#define BUFS	"\"buffers\":[" GBUF "],"
#define NAME	"\"name\":\"h:1\","
#define PROTO	"\"protocol\":\"tcp\","
#define PORT	"\"tcp_data_port\":15432,"
#define DESC_OK	"{" BUFS NAME PROTO PORT END
/* A descriptor whose only buffer is @b. */
#define DBUF(b)	"{\"buffers\":[" b "]," NAME PROTO PORT END
#define BF(addr, len, name) \
	"{\"addr\":" addr ",\"length\":" len ",\"name\":" name "}"

/* RDMA: two devices, one buffer with a key per device, one matrix row. */
#define GID0	"fe:80:00:00:00:00:00:00:02:00:00:ff:fe:00:00:01"
#define GID1	"FE:80:00:00:00:00:00:00:0A:0B:0C:FF:FE:0D:0E:0F"
#define DEV(name, lid, gid) \
	"{\"name\":" name ",\"lid\":" lid ",\"gid\":" gid "}"
#define DEV0	DEV("\"mlx5_0\"", "1", "\"" GID0 "\"")
#define DEV1	DEV("\"mlx5_1\"", "65535", "\"" GID1 "\"")
#define R_PROTO	"\"protocol\":\"rdma\","
#define R_DEVS	"\"devices\":[" DEV0 "," DEV1 "],"
#define R_PRIO	\
	"\"priority_matrix\":{\"cpu:0\":[[\"mlx5_0\"],[\"mlx5_1\"]]},"
#define RBF(keys) "{\"addr\":4096,\"length\":1024,\"name\":\"cpu:0\"" keys "}"
#define R_KEYS	",\"lkey\":[1,2],\"rkey\":[3,4294967295]"
#define R_BUFS	"\"buffers\":[" RBF(R_KEYS) "],"
#define RDESC_OK "{" R_BUFS NAME R_PROTO R_DEVS R_PRIO END
/* One device @d, a buffer with one key each. */
#define RDEV(d)	"{\"buffers\":[" RBF(",\"lkey\":[1],\"rkey\":[2]") "]," \
	NAME R_PROTO "\"devices\":[" d "]," END
/* Two devices, the buffer's keys as @k. */
#define RKEY(k)	"{\"buffers\":[" RBF(k) "]," NAME R_PROTO R_DEVS END
/* The matrix as @m. */
#define RPRIO(m) "{" R_BUFS NAME R_PROTO R_DEVS "\"priority_matrix\":" m "," END

#define C_GID	"\"local_gid\":\"fe:80\","
#define C_LID	"\"local_lid\":7,"
#define C_LNIC	"\"local_nic_path\":\"h:1@mlx5_0\","
#define C_PAY	"\"payload\":\"\","
#define C_PNIC	"\"peer_nic_path\":\"h:2@mlx5_1\","
#define C_QP	"\"qp_num\":[1,2],"
#define C_ACK	"\"ready_ack\":false,"
#define C_REPLY	"\"reply_msg\":\"\","
#define CONN_OK	\
	"{" C_GID C_LID C_LNIC C_PAY C_PNIC C_QP C_ACK C_REPLY END

#define N_NAME	"\"name\":\"a\","
#define N_MSG	"\"notify_msg\":\"b\","
#define NOTIFY_OK "{" N_NAME N_MSG END

/* Each decoder behind one signature; each also checks its failure
 * contract (output left empty) and frees what it decoded. */
typedef int (*decode_fn)(const char *json, size_t len, char *err,
			 size_t errlen);

static int try_desc(const char *json, size_t len, char *err, size_t errlen)
{
	struct xfer_desc *d = NULL;
	int ret = xfer_desc_decode(json, len, &d, err, errlen);

	if (ret)
		assert_null(d);
	xfer_desc_free(d);
	return ret;
}

static int try_conn(const char *json, size_t len, char *err, size_t errlen)
{
	struct xfer_hs_conn c;
	int ret;

	memset(&c, 0xa5, sizeof(c));
	ret = xfer_hs_conn_decode(json, len, &c, err, errlen);
	if (ret) {
		assert_null(c.local_gid);
		assert_null(c.qp_num);
		assert_int_equal(c.nqp, 0);
	}
	xfer_hs_conn_clear(&c);
	return ret;
}

static int try_notify(const char *json, size_t len, char *err, size_t errlen)
{
	struct xfer_hs_notify n;
	int ret;

	memset(&n, 0xa5, sizeof(n));
	ret = xfer_hs_notify_decode(json, len, &n, err, errlen);
	if (ret) {
		assert_null(n.name);
		assert_null(n.notify_msg);
	}
	xfer_hs_notify_clear(&n);
	return ret;
}

static void expect_ok(decode_fn fn, const char *json)
{
	char err[256] = "";
	int ret = fn(json, strlen(json), err, sizeof(err));

	if (ret)
		fail_msg("%d (%s) for: %s", ret, err, json);
}

/* -EPROTO with a one-line reason; returns the reason for further checks. */
static const char *expect_reject_len(decode_fn fn, const char *json,
				     size_t len)
{
	static char err[256];
	int ret;

	err[0] = '\0';
	ret = fn(json, len, err, sizeof(err));
	if (ret != -EPROTO || !err[0] || strchr(err, '\n'))
		fail_msg("%d (\"%s\") for: %.200s", ret, err, json);
	return err;
}

static const char *expect_reject(decode_fn fn, const char *json)
{
	return expect_reject_len(fn, json, strlen(json));
}

/* A body on the wire is one compact line. */
static void check_line(const char *json, size_t len)
{
	assert_int_equal(strlen(json), len);
	assert_true(len > 1);
	assert_int_equal(json[len - 1], '\n');
	assert_ptr_equal(strchr(json, '\n'), json + len - 1);
}

/* A TCP buffer: no keys. */
#define TBUF(a, l, n) { .addr = (a), .length = (l), .name = (n) }

static struct xfer_desc *desc_round_trip(const struct xfer_desc *in)
{
	struct xfer_desc *out = NULL;
	char err[256] = "";
	char *json;
	size_t len;

	assert_int_equal(xfer_desc_encode(in, &json, &len), 0);
	check_line(json, len);
	if (xfer_desc_decode(json, len, &out, err, sizeof(err)))
		fail_msg("%s for: %s", err, json);
	free(json);
	return out;
}

/* ---- descriptor ---- */

static void test_desc_encode_exact(void **state)
{
	struct xfer_desc_buf bufs[] = {
		TBUF(4096, 1024, "cpu:0"),
		TBUF(9223372036854775808ULL, 1, "cuda:1"),
	};
	struct xfer_desc d = {
		.name = "127.0.0.1:15081",
		.protocol = "tcp",
		.tcp_data_port = 15432,
		.tcp_proto_version = 2,
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
		.tcp_data_port = 65535,
		.tcp_proto_version = 2,
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
		assert_int_equal(out->tcp_data_port, 65535);
		assert_int_equal(out->tcp_proto_version, 2);
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
	struct xfer_desc d = { .name = "h:1", .tcp_data_port = 1,
			       .tcp_proto_version = 2 };
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
	assert_int_equal(xfer_desc_decode(json, strlen(json), &d, err,
					  sizeof(err)), 0);
	assert_string_equal(d->name, "192.168.0.7:15123");
	assert_string_equal(d->protocol, "tcp");
	assert_int_equal(d->tcp_data_port, 16411);
	assert_int_equal(d->tcp_proto_version, 1);
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
	assert_int_equal(xfer_desc_decode(json, strlen(json), &d, err,
					  sizeof(err)), 0);
	assert_string_equal(d->protocol, "nvmeof");
	assert_int_equal(d->tcp_data_port, 0);
	assert_null(d->timestamp);
	assert_int_equal(d->nbufs, 1);
	assert_null(d->bufs[0].rkey);
	assert_int_equal(d->ndevs, 0);
	assert_int_equal(d->nprio, 0);
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
	assert_int_equal(xfer_desc_decode(json, strlen(json), &d, err,
					  sizeof(err)), 0);
	assert_string_equal(d->protocol, "tcp");
	assert_int_equal(d->tcp_data_port, 15432);
	assert_int_equal(d->tcp_proto_version, 1);
	assert_int_equal(d->nbufs, 1);
	assert_null(d->bufs[0].lkey);
	assert_null(d->bufs[0].rkey);
	assert_int_equal(d->ndevs, 0);
	assert_null(d->devs);
	assert_int_equal(d->nprio, 0);
	assert_null(d->prio);
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
	assert_int_equal(xfer_desc_decode(buf, len, &d, err, sizeof(err)), 0);
	assert_string_equal(d->name, "h:1");
	xfer_desc_free(d);
	free(buf);

	/* followed by garbage that would not parse */
	assert_true(asprintf(&buf, "%s}x{\"", body) > 0);
	d = NULL;
	assert_int_equal(xfer_desc_decode(buf, len, &d, err, sizeof(err)), 0);
	assert_int_equal(d->tcp_data_port, 15432);
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
	json = desc_with_name(XFER_DESC_MAX_STR);
	expect_ok(try_desc, json);
	free(json);
	json = desc_with_name(XFER_DESC_MAX_STR + 1);
	expect_reject(try_desc, json);
	free(json);

	json = desc_with_bufs(XFER_DESC_MAX_BUFFERS);
	expect_ok(try_desc, json);
	free(json);
	json = desc_with_bufs(XFER_DESC_MAX_BUFFERS + 1);
	expect_reject(try_desc, json);
	free(json);
}

/* ---- RDMA descriptor ---- */

static uint8_t gid0[16] = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0,
			    0x02, 0, 0, 0xff, 0xfe, 0, 0, 0x01 };
static uint8_t gid1[16] = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0,
			    0x0a, 0x0b, 0x0c, 0xff, 0xfe, 0x0d, 0x0e, 0x0f };
static char *row0_pref[] = { "mlx5_0" }, *row0_other[] = { "mlx5_1" };
static char *row1_pref[] = { "mlx5_1", "mlx5_0" };
static uint32_t lkey0[] = { 1, 2 }, rkey0[] = { 3, UINT32_MAX };
static uint32_t lkey1[] = { 0, 0x10203 }, rkey1[] = { 7, 8 };

/* Fills @d with two devices, two buffers and a two-row matrix. */
static void rdma_desc(struct xfer_desc *d, struct xfer_desc_dev devs[2],
		      struct xfer_desc_buf bufs[2], struct xfer_prio prio[2])
{
	devs[0] = (struct xfer_desc_dev){ .name = "mlx5_0", .lid = 1 };
	devs[1] = (struct xfer_desc_dev){ .name = "mlx5_1", .lid = 65535 };
	memcpy(devs[0].gid, gid0, 16);
	memcpy(devs[1].gid, gid1, 16);
	bufs[0] = (struct xfer_desc_buf){ 4096, 1024, "cpu:0", lkey0, rkey0 };
	bufs[1] = (struct xfer_desc_buf){ 1ULL << 63, 1ULL << 40, "cuda:1",
					  lkey1, rkey1 };
	prio[0] = (struct xfer_prio){ "cpu:0", 1, 1, row0_pref, row0_other };
	prio[1] = (struct xfer_prio){ "*", 2, 0, row1_pref, NULL };
	*d = (struct xfer_desc){
		.name = "10.0.0.1:15001",
		.protocol = "rdma",
		.timestamp = "2026-01-02 03:04:05.000006",
		.nbufs = 2, .bufs = bufs,
		.ndevs = 2, .devs = devs,
		.nprio = 2, .prio = prio,
	};
}

static void test_desc_rdma_encode_exact(void **state)
{
	struct xfer_desc_dev devs[2];
	struct xfer_desc_buf bufs[2];
	struct xfer_prio prio[2];
	struct xfer_desc d;
	const char *want =
		"{\"buffers\":[{\"addr\":4096,\"length\":1024,"
		"\"lkey\":[1,2],\"name\":\"cpu:0\",\"rkey\":[3,4294967295]},"
		"{\"addr\":9223372036854775808,\"length\":1099511627776,"
		"\"lkey\":[0,66051],\"name\":\"cuda:1\",\"rkey\":[7,8]}],"
		"\"devices\":[{\"gid\":\"" GID0 "\",\"lid\":1,"
		"\"name\":\"mlx5_0\"},{\"gid\":"
		"\"fe:80:00:00:00:00:00:00:0a:0b:0c:ff:fe:0d:0e:0f\","
		"\"lid\":65535,\"name\":\"mlx5_1\"}],"
		"\"name\":\"10.0.0.1:15001\","
		"\"priority_matrix\":{\"cpu:0\":[[\"mlx5_0\"],[\"mlx5_1\"]],"
		"\"*\":[[\"mlx5_1\",\"mlx5_0\"],[]]},"
		"\"protocol\":\"rdma\","
		"\"timestamp\":\"2026-01-02 03:04:05.000006\"}\n";
	char *json;
	size_t len;

	(void)state;
	rdma_desc(&d, devs, bufs, prio);
	assert_int_equal(xfer_desc_encode(&d, &json, &len), 0);
	assert_string_equal(json, want);
	assert_int_equal(len, strlen(want));
	free(json);

	/* no matrix: an empty object, which decodes to no rows */
	d.nprio = 0;
	assert_int_equal(xfer_desc_encode(&d, &json, &len), 0);
	assert_non_null(strstr(json, ",\"priority_matrix\":{},"));
	free(json);
}

static void assert_names_equal(char *const *a, size_t na, char *const *b,
			       size_t nb)
{
	size_t i;

	assert_int_equal(na, nb);
	for (i = 0; i < na; i++)
		assert_string_equal(a[i], b[i]);
}

static void test_desc_rdma_round_trip(void **state)
{
	struct xfer_desc_dev devs[2];
	struct xfer_desc_buf bufs[2];
	struct xfer_prio prio[2];
	struct xfer_desc d, *out;
	size_t i, j;

	(void)state;
	rdma_desc(&d, devs, bufs, prio);
	out = desc_round_trip(&d);
	assert_string_equal(out->name, d.name);
	assert_string_equal(out->protocol, "rdma");
	assert_int_equal(out->tcp_data_port, 0);
	assert_int_equal(out->tcp_proto_version, 0);
	assert_string_equal(out->timestamp, d.timestamp);
	assert_int_equal(out->ndevs, 2);
	for (i = 0; i < 2; i++) {
		assert_string_equal(out->devs[i].name, devs[i].name);
		assert_int_equal(out->devs[i].lid, devs[i].lid);
		assert_memory_equal(out->devs[i].gid, devs[i].gid, 16);
	}
	assert_int_equal(out->nbufs, 2);
	for (i = 0; i < 2; i++) {
		assert_true(out->bufs[i].addr == bufs[i].addr);
		assert_true(out->bufs[i].length == bufs[i].length);
		assert_string_equal(out->bufs[i].name, bufs[i].name);
		for (j = 0; j < 2; j++) {
			assert_true(out->bufs[i].lkey[j] == bufs[i].lkey[j]);
			assert_true(out->bufs[i].rkey[j] == bufs[i].rkey[j]);
		}
	}
	assert_int_equal(out->nprio, 2);
	for (i = 0; i < 2; i++) {
		assert_string_equal(out->prio[i].location, prio[i].location);
		assert_names_equal(out->prio[i].pref, out->prio[i].npref,
				   prio[i].pref, prio[i].npref);
		assert_names_equal(out->prio[i].other, out->prio[i].nother,
				   prio[i].other, prio[i].nother);
	}
	xfer_desc_free(out);
}

static void test_desc_rdma_valid_variants(void **state)
{
	static const char *const ok[] = {
		RDESC_OK,
		/* the matrix is optional, and may name other devices */
		"{" R_BUFS NAME R_PROTO R_DEVS END,
		RPRIO("{}"),
		RPRIO("{\"cpu:0\":[[\"mlx5_0\"]]}"),
		RPRIO("{\"cpu:0\":[[],[]],\"*\":[[\"mlx5_9\"],[\"x\"]]}"),
		/* lid at both ends, GIDs in either case */
		RDEV(DEV("\"d\"", "0", "\"" GID1 "\"")),
		RDEV(DEV("\"d\"", "65535", "\"" GID0 "\"")),
		RDEV(DEV("\"d\"", "0", "\"00:00:00:00:00:00:00:00:"
			 "00:00:00:00:00:00:00:00\"")),
		/* no buffers, so no keys; TCP fields are not needed */
		"{\"buffers\":[]," NAME R_PROTO R_DEVS END,
		RKEY(",\"lkey\":[0,4294967295],\"rkey\":[0,0]"),
	};
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(ok); i++)
		expect_ok(try_desc, ok[i]);
}

static void test_desc_rdma_reject(void **state)
{
	static const char *const bad[] = {
		/* devices */
		"{" R_BUFS NAME R_PROTO R_PRIO END,
		"{" R_BUFS NAME R_PROTO "\"devices\":[]," END,
		"{" R_BUFS NAME R_PROTO "\"devices\":{}," END,
		"{" R_BUFS NAME R_PROTO "\"devices\":null," END,
		RDEV("1"),
		RDEV("[]"),
		RDEV(DEV("\"\"", "1", "\"" GID0 "\"")),
		RDEV(DEV("1", "1", "\"" GID0 "\"")),
		RDEV(DEV("null", "1", "\"" GID0 "\"")),
		RDEV("{\"lid\":1,\"gid\":\"" GID0 "\"}"),
		RDEV(DEV("\"d\"", "65536", "\"" GID0 "\"")),
		RDEV(DEV("\"d\"", "-1", "\"" GID0 "\"")),
		RDEV(DEV("\"d\"", "1.0", "\"" GID0 "\"")),
		RDEV(DEV("\"d\"", "\"1\"", "\"" GID0 "\"")),
		RDEV("{\"name\":\"d\",\"gid\":\"" GID0 "\"}"),
		RDEV("{\"name\":\"d\",\"lid\":1}"),
		RDEV(DEV("\"d\"", "1", "\"\"")),
		RDEV(DEV("\"d\"", "1", "null")),
		RDEV(DEV("\"d\"", "1", "[254,128]")),
		/* 15 bytes, 17 bytes, a trailing ':', a non-hex digit */
		RDEV(DEV("\"d\"", "1",
			 "\"fe:80:00:00:00:00:00:00:02:00:00:ff:fe:00:00\"")),
		RDEV(DEV("\"d\"", "1", "\"" GID0 ":02\"")),
		RDEV(DEV("\"d\"", "1", "\"" GID0 ":\"")),
		RDEV(DEV("\"d\"", "1", "\"fe:80:00:00:00:00:00:00:"
			 "02:00:00:ff:fe:00:00:0g\"")),
		RDEV(DEV("\"d\"", "1", "\"fe80::200:ff:fe00:1\"")),
		"{" R_BUFS NAME R_PROTO "\"devices\":[" DEV0 "," DEV0 "]," END,
		/* keys: missing, wrong count, wrong types or values */
		RKEY(",\"lkey\":[1,2]"),
		RKEY(",\"rkey\":[1,2]"),
		RKEY(""),
		RKEY(",\"lkey\":[1],\"rkey\":[3,4]"),
		RKEY(",\"lkey\":[1,2],\"rkey\":[3,4,5]"),
		RKEY(",\"lkey\":[1,2],\"rkey\":[]"),
		RKEY(",\"lkey\":[1,2],\"rkey\":3"),
		RKEY(",\"lkey\":[1,2],\"rkey\":{}"),
		RKEY(",\"lkey\":[1,2],\"rkey\":[3,\"4\"]"),
		RKEY(",\"lkey\":[1,2],\"rkey\":[3,4294967296]"),
		RKEY(",\"lkey\":[1,-2],\"rkey\":[3,4]"),
		RKEY(",\"lkey\":[1,2.5],\"rkey\":[3,4]"),
		RKEY(",\"lkey\":[1,null],\"rkey\":[3,4]"),
		/* the common checks still hold */
		"{\"buffers\":[" "{\"addr\":0,\"length\":1,\"name\":\"a\""
			R_KEYS "}]," NAME R_PROTO R_DEVS END,
		"{" R_BUFS "\"name\":\"\"," R_PROTO R_DEVS END,
		/* matrix */
		RPRIO("[]"),
		RPRIO("\"x\""),
		RPRIO("{\"cpu:0\":\"mlx5_0\"}"),
		RPRIO("{\"cpu:0\":{}}"),
		RPRIO("{\"cpu:0\":[]}"),
		RPRIO("{\"cpu:0\":[[\"a\"],[\"b\"],[]]}"),
		RPRIO("{\"cpu:0\":[\"mlx5_0\",[]]}"),
		RPRIO("{\"cpu:0\":[[\"mlx5_0\"],\"mlx5_1\"]}"),
		RPRIO("{\"cpu:0\":[[\"\"],[]]}"),
		RPRIO("{\"cpu:0\":[[\"a\"],[\"b\",\"\"]]}"),
		RPRIO("{\"cpu:0\":[[1],[]]}"),
		RPRIO("{\"\":[[\"a\"],[]]}"),
		RPRIO("{\"cpu:0\":[[\"a\"],[]],\"cpu:1\":[[null],[]]}"),
	};
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(bad); i++)
		expect_reject(try_desc, bad[i]);
}

static void test_desc_rdma_reject_reason(void **state)
{
	static const struct {
		const char *json, *reason;
	} cases[] = {
		{ RKEY(",\"lkey\":[1,2]"), "buffers[0].rkey: missing" },
		{ RKEY(",\"lkey\":[1],\"rkey\":[3,4]"), "buffers[0].lkey" },
		{ "{" R_BUFS NAME R_PROTO "\"devices\":[" DEV0 ","
		  DEV("\"\"", "1", "\"" GID0 "\"") "]," END,
		  "devices[1].name" },
		{ "{" R_BUFS NAME R_PROTO "\"devices\":[" DEV0 "," DEV0 "],"
		  END, "devices[1].name" },
		{ RDEV(DEV("\"d\"", "1", "\"1\"")), "devices[0].gid" },
		{ RDEV(DEV("\"d\"", "65536", "\"" GID0 "\"")),
		  "devices[0].lid" },
		/* the index, not the location, which may hold a newline */
		{ RPRIO("{\"a\":[[]],\"b\\nc\":[[],[\"\"]]}"),
		  "priority_matrix: entry 1[1][0]" },
	};
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(cases); i++)
		if (!strstr(expect_reject(try_desc, cases[i].json),
			    cases[i].reason))
			fail_msg("no \"%s\" for: %s", cases[i].reason,
				 cases[i].json);
}

static char *rdma_with_devs(size_t n)
{
	size_t i, each = strlen(DEV0) + 16;
	char *json, *p;

	json = xmalloc(512 + n * (each + 8));
	p = json + sprintf(json, "{\"buffers\":[{\"addr\":1,\"length\":1,"
			   "\"name\":\"a\",\"lkey\":[");
	for (i = 0; i < n; i++)
		p += sprintf(p, "%s%zu", i ? "," : "", i);
	p += sprintf(p, "],\"rkey\":[");
	for (i = 0; i < n; i++)
		p += sprintf(p, "%s%zu", i ? "," : "", i);
	p += sprintf(p, "]}]," NAME R_PROTO "\"devices\":[");
	for (i = 0; i < n; i++)
		p += sprintf(p, "%s{\"name\":\"d%zu\",\"lid\":%zu,"
			     "\"gid\":\"" GID0 "\"}", i ? "," : "", i, i);
	strcpy(p, "]," END);
	return json;
}

static void test_desc_rdma_limits(void **state)
{
	char *json;

	(void)state;
	json = rdma_with_devs(XFER_DESC_MAX_DEVS);
	expect_ok(try_desc, json);
	free(json);
	json = rdma_with_devs(XFER_DESC_MAX_DEVS + 1);
	expect_reject(try_desc, json);
	free(json);
}

/* ---- priority matrix ---- */

static int try_prio(const char *json, size_t len, char *err, size_t errlen)
{
	struct xfer_prio *p = (struct xfer_prio *)&p;
	size_t n = 99;
	int ret = xfer_prio_decode(json, len, &p, &n, err, errlen);

	if (ret) {
		assert_null(p);
		assert_int_equal(n, 0);
	}
	xfer_prio_free(p, n);
	return ret;
}

static void test_prio_decode(void **state)
{
	static const char json[] =
		"{\"cpu:0\":[[\"mlx5_0\",\"mlx5_1\"],[\"mlx5_2\"]],"
		"\"cuda:1\":[[\"mlx5_2\"]],\"*\":[[],[]],\"zz\":[[\"a\"],[]]}";
	struct xfer_prio *p;
	char err[256] = "";
	size_t n;

	(void)state;
	assert_int_equal(xfer_prio_decode(json, strlen(json), &p, &n, err,
					  sizeof(err)), 0);
	assert_int_equal(n, 4);
	assert_string_equal(p[0].location, "cpu:0");
	assert_int_equal(p[0].npref, 2);
	assert_string_equal(p[0].pref[0], "mlx5_0");
	assert_string_equal(p[0].pref[1], "mlx5_1");
	assert_int_equal(p[0].nother, 1);
	assert_string_equal(p[0].other[0], "mlx5_2");
	assert_string_equal(p[1].location, "cuda:1");
	assert_int_equal(p[1].npref, 1);
	assert_string_equal(p[1].pref[0], "mlx5_2");
	assert_int_equal(p[1].nother, 0);
	assert_null(p[1].other);
	assert_string_equal(p[2].location, "*");
	assert_int_equal(p[2].npref, 0);
	assert_int_equal(p[2].nother, 0);
	assert_string_equal(p[3].location, "zz");
	xfer_prio_free(p, n);

	assert_int_equal(xfer_prio_decode("{}\n", 3, &p, &n, err,
					  sizeof(err)), 0);
	assert_null(p);
	assert_int_equal(n, 0);
	xfer_prio_free(p, n);
}

static void test_prio_reject(void **state)
{
	static const char *const bad[] = {
		"{\"cpu:0\":null}",
		"{\"cpu:0\":\"mlx5_0\"}",
		"{\"cpu:0\":{\"a\":[]}}",
		"{\"cpu:0\":[]}",
		"{\"cpu:0\":[[],[],[]]}",
		"{\"cpu:0\":[\"mlx5_0\"]}",
		"{\"cpu:0\":[[\"mlx5_0\"],null]}",
		"{\"cpu:0\":[[\"\"]]}",
		"{\"cpu:0\":[[\"a\"],[\"\"]]}",
		"{\"cpu:0\":[[1]]}",
		"{\"cpu:0\":[[[\"a\"]]]}",
		"{\"\":[[\"a\"]]}",
		"{\"cpu:0\":[[\"a\"]],\"cpu:1\":[[\"b\"],[true]]}",
	};
	size_t i;

	(void)state;
	for (i = 0; i < ARRAY_SIZE(bad); i++)
		expect_reject(try_prio, bad[i]);
	assert_non_null(strstr(expect_reject(try_prio, bad[12]),
			       "entry 1[1][0]"));
}

/* ---- GID ---- */

static void test_gid(void **state)
{
	static const char *const bad[] = {
		"", "fe", GID0 ":", GID0 ":02", GID0 " ", " " GID0,
		"fe:80:00:00:00:00:00:00:02:00:00:ff:fe:00:00",
		"fe:80:00:00:00:00:00:00:02:00:00:ff:fe:00:00:",
		"fe:80:00:00:00:00:00:00:02:00:00:ff:fe:00:00:1",
		"fe:80:00:00:00:00:00:00:02:00:00:ff:fe:00:00:0g",
		"fe-80-00-00-00-00-00-00-02-00-00-ff-fe-00-00-01",
		"fe:80:00:00:00:00:00:00:02:00:00:ff:fe:00:0:001",
		"fe:80:00:00:00:00:00:00:02:00:00:ff:fe:00:+1:01",
		"fe800000000000000200000ffffe00000001000000000000",
	};
	uint8_t gid[16], back[16];
	char s[48];
	size_t i, k;

	(void)state;
	xfer_gid_format(gid0, s);
	assert_string_equal(s, GID0);
	assert_int_equal(xfer_gid_parse(GID1, gid), 0);
	assert_memory_equal(gid, gid1, 16);

	/* every byte value, both ways */
	for (k = 0; k < 16; k++) {
		for (i = 0; i < 16; i++)
			gid[i] = k * 16 + i;
		xfer_gid_format(gid, s);
		assert_int_equal(strlen(s), 47);
		assert_int_equal(xfer_gid_parse(s, back), 0);
		assert_memory_equal(gid, back, 16);
	}

	memset(back, 0xa5, sizeof(back));
	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		if (xfer_gid_parse(bad[i], gid) != -EINVAL)
			fail_msg("accepted: \"%s\"", bad[i]);
	}
}

/* A string that is not UTF-8 would make JSON no peer accepts. */
static void test_encode_invalid_utf8(void **state)
{
	struct xfer_desc d = { .name = "h\xff", .tcp_data_port = 1 };
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

static void test_conn_reject(void **state)
{
	static const char *const bad[] = {
		/* each field missing */
		"{" C_LID C_LNIC C_PAY C_PNIC C_QP C_ACK C_REPLY END,
		"{" C_GID C_LNIC C_PAY C_PNIC C_QP C_ACK C_REPLY END,
		"{" C_GID C_LID C_PAY C_PNIC C_QP C_ACK C_REPLY END,
		"{" C_GID C_LID C_LNIC C_PNIC C_QP C_ACK C_REPLY END,
		"{" C_GID C_LID C_LNIC C_PAY C_QP C_ACK C_REPLY END,
		"{" C_GID C_LID C_LNIC C_PAY C_PNIC C_ACK C_REPLY END,
		"{" C_GID C_LID C_LNIC C_PAY C_PNIC C_QP C_REPLY END,
		"{" C_GID C_LID C_LNIC C_PAY C_PNIC C_QP C_ACK END,
		/* wrong types or values */
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
		"{" C_GID C_LID "\"local_nic_path\":[]," C_PAY C_PNIC C_QP
			C_ACK C_REPLY END,
		"{" C_GID C_LID C_LNIC "\"payload\":null," C_PNIC C_QP C_ACK
			C_REPLY END,
		"{" C_GID C_LID C_LNIC C_PAY "\"peer_nic_path\":{}," C_QP
			C_ACK C_REPLY END,
		"{" C_GID C_LID C_LNIC C_PAY C_PNIC "\"qp_num\":1," C_ACK
			C_REPLY END,
		"{" C_GID C_LID C_LNIC C_PAY C_PNIC "\"qp_num\":[\"1\"],"
			C_ACK C_REPLY END,
		"{" C_GID C_LID C_LNIC C_PAY C_PNIC "\"qp_num\":[1,-2],"
			C_ACK C_REPLY END,
		"{" C_GID C_LID C_LNIC C_PAY C_PNIC "\"qp_num\":[4294967296],"
			C_ACK C_REPLY END,
		"{" C_GID C_LID C_LNIC C_PAY C_PNIC "\"qp_num\":[2.5],"
			C_ACK C_REPLY END,
		"{" C_GID C_LID C_LNIC C_PAY C_PNIC C_QP "\"ready_ack\":1,"
			C_REPLY END,
		"{" C_GID C_LID C_LNIC C_PAY C_PNIC C_QP
			"\"ready_ack\":\"true\"," C_REPLY END,
		"{" C_GID C_LID C_LNIC C_PAY C_PNIC C_QP "\"ready_ack\":null,"
			C_REPLY END,
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

static void test_notify_reject(void **state)
{
	static const char *const bad[] = {
		"{" N_MSG END,
		"{" N_NAME END,
		"{\"name\":1," N_MSG END,
		"{" N_NAME "\"notify_msg\":[]," END,
	};
	size_t i;

	(void)state;
	expect_ok(try_notify, NOTIFY_OK);
	for (i = 0; i < ARRAY_SIZE(bad); i++)
		expect_reject(try_notify, bad[i]);
}

/* ---- rpc_meta ---- */

static int try_rpc(const char *json, size_t len, char *err, size_t errlen)
{
	char *host = NULL;
	uint16_t port = 0;
	int ret = xfer_rpc_meta_decode(json, len, &host, &port, err, errlen);

	if (ret)
		assert_null(host);
	free(host);
	return ret;
}

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

static int try_check(const char *json, size_t len, char *err, size_t errlen)
{
	return xfer_json_check_object(json, len, err, errlen);
}

static const decode_fn decoders[] = {
	try_desc, try_conn, try_notify, try_rpc, try_check, try_prio,
};

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
	for (i = 0; i < ARRAY_SIZE(decoders); i++) {
		for (j = 0; j < ARRAY_SIZE(bad); j++)
			expect_reject(decoders[i], bad[j]);
		/* a NUL byte, after the object or inside a string */
		expect_reject_len(decoders[i], "{}\0{}", 5);
		expect_reject_len(decoders[i], "{\"a\":\"\0\"}", 9);
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
	for (i = 0; i < ARRAY_SIZE(decoders); i++)
		expect_reject(decoders[i], s);
	free(s);

	s = xmalloc(1 << 20);
	memset(s, '[', 1 << 20);
	memcpy(s, "{\"a\":", 5);
	for (i = 0; i < ARRAY_SIZE(decoders); i++)
		expect_reject_len(decoders[i], s, 1 << 20);
	free(s);
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
		cmocka_unit_test(test_desc_rdma_encode_exact),
		cmocka_unit_test(test_desc_rdma_round_trip),
		cmocka_unit_test(test_desc_rdma_valid_variants),
		cmocka_unit_test(test_desc_rdma_reject),
		cmocka_unit_test(test_desc_rdma_reject_reason),
		cmocka_unit_test(test_desc_rdma_limits),
		cmocka_unit_test(test_prio_decode),
		cmocka_unit_test(test_prio_reject),
		cmocka_unit_test(test_gid),
		cmocka_unit_test(test_encode_invalid_utf8),
		cmocka_unit_test(test_conn_encode_empty),
		cmocka_unit_test(test_conn_round_trip),
		cmocka_unit_test(test_conn_reject),
		cmocka_unit_test(test_notify_round_trip),
		cmocka_unit_test(test_notify_reject),
		cmocka_unit_test(test_rpc_meta),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_check_object),
		cmocka_unit_test(test_nesting),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
