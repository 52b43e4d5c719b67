/* Unit tests: the RDMA descriptor fields, priority matrix and GID codecs
 * (PROTOCOL.md §2). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test/th_json.h"

/* ---- RDMA descriptor ---- */

static uint8_t gid0[16] = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0,
			    0x02, 0, 0, 0xff, 0xfe, 0, 0, 0x01 };
static uint8_t gid1[16] = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0,
			    0x0a, 0x0b, 0x0c, 0xff, 0xfe, 0x0d, 0x0e, 0x0f };
static char *row0_pref[] = { "mlx5_0" }, *row0_other[] = { "mlx5_1" };
static char *row1_pref[] = { "mlx5_1", "mlx5_0" };
static uint32_t lkey0[] = { 1, 2 }, rkey0[] = { 3, UINT32_MAX };
static uint32_t lkey1[] = { 0, 0x10203 }, rkey1[] = { 7, 8 };
static struct xfer_rdma_keys keys0 = { lkey0, rkey0 }, keys1 = { lkey1, rkey1 };
static struct xfer_rdma_desc rd;

/* Fills @d with two devices, two buffers and a two-row matrix. */
static void rdma_desc(struct xfer_desc *d, struct xfer_rdma_dev devs[2],
		      struct xfer_desc_buf bufs[2], struct xfer_rdma_prio prio[2])
{
	devs[0] = (struct xfer_rdma_dev){ .name = "mlx5_0", .lid = 1 };
	devs[1] = (struct xfer_rdma_dev){ .name = "mlx5_1", .lid = 65535 };
	memcpy(devs[0].gid, gid0, 16);
	memcpy(devs[1].gid, gid1, 16);
	bufs[0] = (struct xfer_desc_buf){ 4096, 1024, "cpu:0", &keys0 };
	bufs[1] = (struct xfer_desc_buf){ 1ULL << 63, 1ULL << 40, "cuda:1",
					  &keys1 };
	prio[0] = (struct xfer_rdma_prio){ "cpu:0", 1, 1, row0_pref, row0_other };
	prio[1] = (struct xfer_rdma_prio){ "*", 2, 0, row1_pref, NULL };
	*d = (struct xfer_desc){
		.name = "10.0.0.1:15001",
		.protocol = "rdma",
		.timestamp = "2026-01-02 03:04:05.000006",
		.nbufs = 2, .bufs = bufs,
		.codec = &xfer_rdma_codec, .tp = &rd,
	};
	rd = (struct xfer_rdma_desc){
		.ndevs = 2, .devs = devs,
		.nprio = 2, .prio = prio,
	};
}

static void test_desc_rdma_encode_exact(void **state)
{
	struct xfer_rdma_dev devs[2];
	struct xfer_desc_buf bufs[2];
	struct xfer_rdma_prio prio[2];
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
	rd.nprio = 0;
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
	struct xfer_rdma_dev devs[2];
	struct xfer_desc_buf bufs[2];
	struct xfer_rdma_prio prio[2];
	struct xfer_desc d, *out;
	size_t i, j;

	(void)state;
	rdma_desc(&d, devs, bufs, prio);
	out = desc_round_trip(&d);
	assert_string_equal(out->name, d.name);
	assert_string_equal(out->protocol, "rdma");
	/* the RDMA codec's fields only: no TCP port or version */
	assert_ptr_equal(out->codec, &xfer_rdma_codec);
	assert_string_equal(out->timestamp, d.timestamp);
	assert_int_equal(RDMA(out)->ndevs, 2);
	for (i = 0; i < 2; i++) {
		assert_string_equal(RDMA(out)->devs[i].name, devs[i].name);
		assert_int_equal(RDMA(out)->devs[i].lid, devs[i].lid);
		assert_memory_equal(RDMA(out)->devs[i].gid, devs[i].gid, 16);
	}
	assert_int_equal(out->nbufs, 2);
	for (i = 0; i < 2; i++) {
		assert_true(out->bufs[i].addr == bufs[i].addr);
		assert_true(out->bufs[i].length == bufs[i].length);
		assert_string_equal(out->bufs[i].name, bufs[i].name);
		for (j = 0; j < 2; j++) {
			assert_true(KEYS(out->bufs[i])->lkey[j] ==
				    KEYS(bufs[i])->lkey[j]);
			assert_true(KEYS(out->bufs[i])->rkey[j] ==
				    KEYS(bufs[i])->rkey[j]);
		}
	}
	assert_int_equal(RDMA(out)->nprio, 2);
	for (i = 0; i < 2; i++) {
		const struct xfer_rdma_prio *p = &RDMA(out)->prio[i];

		assert_string_equal(p->location, prio[i].location);
		assert_names_equal(p->pref, p->npref, prio[i].pref,
				   prio[i].npref);
		assert_names_equal(p->other, p->nother, prio[i].other,
				   prio[i].nother);
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
	json = rdma_with_devs(XFER_RDMA_MAX_DEVS);
	expect_ok(try_desc, json);
	free(json);
	json = rdma_with_devs(XFER_RDMA_MAX_DEVS + 1);
	expect_reject(try_desc, json);
	free(json);
}

/* ---- priority matrix ---- */

static void test_prio_decode(void **state)
{
	static const char json[] =
		"{\"cpu:0\":[[\"mlx5_0\",\"mlx5_1\"],[\"mlx5_2\"]],"
		"\"cuda:1\":[[\"mlx5_2\"]],\"*\":[[],[]],\"zz\":[[\"a\"],[]]}";
	struct xfer_rdma_prio *p;
	char err[256] = "";
	size_t n;

	(void)state;
	assert_int_equal(xfer_rdma_prio_decode(json, strlen(json), &p, &n, err,
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
	xfer_rdma_prio_free(p, n);

	assert_int_equal(xfer_rdma_prio_decode("{}\n", 3, &p, &n, err,
					  sizeof(err)), 0);
	assert_null(p);
	assert_int_equal(n, 0);
	xfer_rdma_prio_free(p, n);
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
	xfer_rdma_gid_format(gid0, s);
	assert_string_equal(s, GID0);
	assert_int_equal(xfer_rdma_gid_parse(GID1, gid), 0);
	assert_memory_equal(gid, gid1, 16);

	/* every byte value, both ways */
	for (k = 0; k < 16; k++) {
		for (i = 0; i < 16; i++)
			gid[i] = k * 16 + i;
		xfer_rdma_gid_format(gid, s);
		assert_int_equal(strlen(s), 47);
		assert_int_equal(xfer_rdma_gid_parse(s, back), 0);
		assert_memory_equal(gid, back, 16);
	}

	memset(back, 0xa5, sizeof(back));
	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		if (xfer_rdma_gid_parse(bad[i], gid) != -EINVAL)
			fail_msg("accepted: \"%s\"", bad[i]);
	}
}

/* A string that is not UTF-8 would make JSON no peer accepts. */
int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_desc_rdma_encode_exact),
		cmocka_unit_test(test_desc_rdma_round_trip),
		cmocka_unit_test(test_desc_rdma_valid_variants),
		cmocka_unit_test(test_desc_rdma_reject),
		cmocka_unit_test(test_desc_rdma_reject_reason),
		cmocka_unit_test(test_desc_rdma_limits),
		cmocka_unit_test(test_prio_decode),
		cmocka_unit_test(test_prio_reject),
		cmocka_unit_test(test_gid),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
