/*
 * xfer-stored's admin HTTP on --metrics_port, over real HTTP: Mooncake's
 * paths and answers (/health, /get_all_segments, /query_key,
 * /batch_query_keys, /get_segments_detail, /get_all_keys in chunks,
 * /metrics with Mooncake's names), reads that grant no lease, what is
 * refused, a listing whose client hangs up, and a master that serves on
 * through all of it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yajl/yajl_tree.h>

#include "test/helpers.h"
#include "test/th_master.h"

#define SEG (64u << 20)

static const uint8_t A[STORE_ID_LEN] = { 'A' }, B[STORE_ID_LEN] = { 'B' };

static char *get(const char *path, int want)
{
	char *body = NULL;

	assert_int_equal(st_http_get(st_metrics_port, path, &body, NULL),
			 want);
	assert_non_null(body);
	return body;
}

static yajl_val get_json(const char *path, int want)
{
	char *body = get(path, want), err[128];
	yajl_val v = yajl_tree_parse(body, err, sizeof(err));

	if (!v)
		fail_msg("%s: not JSON (%s): %s", path, err, body);
	free(body);
	return v;
}

static yajl_val at(yajl_val v, const char *const *path)
{
	yajl_val x = yajl_tree_get(v, (const char **)path, yajl_t_any);

	assert_non_null(x);
	return x;
}

#define AT(v, ...) at(v, (const char *const[]){ __VA_ARGS__, NULL })

static const char *str(yajl_val v)
{
	assert_true(YAJL_IS_STRING(v));
	return v->u.string;
}

static long long num(yajl_val v)
{
	assert_true(YAJL_IS_INTEGER(v));
	return YAJL_GET_INTEGER(v);
}

static void put_batch(int fd, int first, int n)
{
	static char keys[128][24];

	memcpy(st_req->client, A, STORE_ID_LEN);
	st_req->replicas = 1;
	st_req->n = (uint32_t)n;
	for (int k = 0; k < n; k++) {
		snprintf(keys[k], sizeof(keys[k]), "many-%d", first + k);
		st_req->items[k].key = st_str(keys[k]);
		st_req->items[k].len = 100;
	}
	st_call(fd, STORE_PUT_START);
	for (int k = 0; k < n; k++)
		assert_int_equal(st_rep->items[k].err, 0);
	st_call(fd, STORE_PUT_END);
	for (int k = 0; k < n; k++)
		assert_int_equal(st_rep->items[k].err, 0);
}

static void test_paths(void **state)
{
	uint64_t addr;
	yajl_val v, seg;
	char *body;
	int fd;

	(void)state;
	assert_int_equal(st_start(0, NULL), 0);
	fd = th_connect(st_port);
	assert_int_equal(st_mount(fd, A, 1, "seg-a", 0x1000000, SEG), 0);
	assert_int_equal(st_mount(fd, B, 2, "seg-b", 0x9000000, SEG), 0);
	st_req->preferred = st_str("seg-a");
	assert_int_equal(st_put(fd, A, "k1", 5000), 0);
	assert_int_equal(st_one(fd, STORE_PUT_START, A, "pending", 10, 1, 0),
			 0);
	st_req->preferred = st_str("");
	assert_int_equal(st_one(fd, STORE_QUERY, A, "k1", 0, 0, 0), 0);
	addr = st_rep->items[0].rep[0].addr;
	assert_int_equal(st_one(fd, STORE_REMOVE, A, "k1", 0, 0, 0), -706);

	v = get_json("/health", 200);
	assert_string_equal(str(AT(v, "status")), "ok");
	assert_true(YAJL_IS_TRUE(AT(v, "service_ready")));
	yajl_tree_free(v);

	body = get("/get_all_segments", 200);
	assert_true(!strcmp(body, "seg-a\nseg-b\n") ||
		    !strcmp(body, "seg-b\nseg-a\n"));
	free(body);

	v = get_json("/query_key?key=k1", 200);
	assert_true(YAJL_IS_TRUE(AT(v, "success")));
	seg = AT(v, "data");
	assert_int_equal(YAJL_GET_ARRAY(seg)->len, 1);
	seg = YAJL_GET_ARRAY(seg)->values[0];
	assert_int_equal(num(AT(seg, "size_")), 5000);
	assert_int_equal(num(AT(seg, "buffer_address_")), addr);
	assert_string_equal(str(AT(seg, "transport_endpoint_")),
			    "seg-a");
	yajl_tree_free(v);
	v = get_json("/query_key?key=none", 404);
	assert_true(YAJL_IS_FALSE(AT(v, "success")));
	assert_int_equal(num(AT(v, "error_code")), -704);
	assert_string_equal(str(AT(v, "error_message")),
			    "OBJECT_NOT_FOUND");
	yajl_tree_free(v);
	v = get_json("/query_key?key=pending", 404);
	assert_int_equal(num(AT(v, "error_code")), -703);
	yajl_tree_free(v);

	v = get_json("/batch_query_keys?keys=k1,none,pending", 200);
	assert_true(YAJL_IS_TRUE(AT(v, "data", "k1", "ok")));
	assert_int_equal(num(AT(YAJL_GET_ARRAY(AT(v, "data", "k1",
		"values"))->values[0], "buffer_address_")), addr);
	assert_true(YAJL_IS_FALSE(AT(v, "data", "none", "ok")));
	assert_string_equal(str(AT(v, "data", "none", "error")),
			    "OBJECT_NOT_FOUND");
	assert_string_equal(str(AT(v, "data", "pending",
					       "error")),
			    "REPLICA_IS_NOT_READY");
	yajl_tree_free(v);
	body = get("/batch_query_keys", 400);
	free(body);

	v = get_json("/get_segments_detail", 200);
	assert_int_equal(num(AT(v, "total_segments")), 2);
	seg = YAJL_GET_ARRAY(AT(v, "segments"))->values[0];
	if (strcmp(str(AT(seg, "segment_name")), "seg-a"))
		seg = YAJL_GET_ARRAY(AT(v, "segments"))->values[1];
	assert_string_equal(str(AT(seg, "segment_name")),
			    "seg-a");
	assert_string_equal(str(AT(seg, "base_address")),
			    "0x1000000");
	assert_int_equal(num(AT(seg, "size_bytes")), SEG);
	assert_int_equal(num(AT(seg, "allocator_used_bytes")), 5056 + 64);
	assert_string_equal(str(AT(seg, "status")), "OK");
	assert_string_equal(str(AT(seg, "client_id")), "65-0");
	yajl_tree_free(v);

	/* the lease the query above granted has run out? no: the admin
	 * reads granted none and k1 is still leased by the RPC query */
	assert_int_equal(st_one(fd, STORE_REMOVE, A, "k1", 0, 0, 0), -706);

	/* refused */
	assert_int_equal(st_http_get(st_metrics_port, "/nope", NULL, NULL),
			 404);
	assert_int_equal(st_http_get(st_metrics_port, "/query_key?key=a%00b",
				     NULL, NULL), 400);
	assert_int_equal(st_ping_needs_mount(fd, A), false);
	close(fd);
	st_stop();
}

/* /metrics speaks Prometheus with Mooncake's names and counts. */
static void test_metrics(void **state)
{
	char *body, line[128];
	int fd;

	(void)state;
	assert_int_equal(st_start(0, (const char *[]){
		"--eviction_high_watermark_ratio=1", NULL }), 0);
	fd = th_connect(st_port);
	assert_int_equal(st_mount(fd, A, 1, "seg-a", 0, 1 << 20), 0);
	for (int i = 0; i < 4; i++) {
		snprintf(line, sizeof(line), "k%d", i);
		assert_int_equal(st_put(fd, A, line, 256 << 10), 0);
	}
	assert_int_equal(st_put(fd, A, "k4", 256 << 10), 0);   /* evicts */
	assert_int_equal(st_one(fd, STORE_QUERY, A, "nope", 0, 0, 0), -704);
	st_req->n = 3;
	st_req->items[0].key = st_str("k1");
	st_req->items[1].key = st_str("k0");
	st_req->items[2].key = st_str("k4");
	st_call(fd, STORE_EXIST);
	body = get("/metrics", 200);
	{
		static const char *const want[] = {
			"master_key_count 4\n",
			"master_total_capacity_bytes 1048576\n",
			"segment_total_capacity_bytes{segment=\"seg-a\"} "
			"1048576\n",
			"master_active_clients 1\n",
			"master_put_start_requests_total 5\n",
			"master_put_end_requests_total 5\n",
			"master_batch_exist_key_requests_total 1\n",
			"master_batch_exist_key_items_total 3\n",
			"master_batch_exist_key_failed_items_total 0\n",
			"master_get_replica_list_requests_total 1\n",
			"master_get_replica_list_failures_total 1\n",
			"master_mount_segment_requests_total 1\n",
			"master_evicted_key_count 1\n",
			"master_successful_evictions_total 1\n",
			"# TYPE master_put_start_requests_total counter\n",
			"# TYPE master_allocated_bytes gauge\n",
		};

		for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
			if (!strstr(body, want[i]))
				fail_msg("no '%s' in:\n%s", want[i], body);
	}
	assert_non_null(strstr(body, "master_allocated_bytes 1048"));
	free(body);
	close(fd);
	st_stop();
}

/* GET @p path over HTTP/1.1 and undo its chunked encoding. @return the
 * body (malloc'd, NUL-ended). */
static char *get_chunked(const char *path)
{
	size_t cap = 1 << 20, n = 0, out = 0, size;
	char *buf = malloc(cap), *p, *body;
	int fd = th_connect(st_metrics_port);
	long got;

	assert_non_null(buf);
	dprintf(fd, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
		"\r\n", path);
	while ((got = th_recv_all(fd, buf + n, 1, 10000)) == 1) {
		if (++n + 1 == cap)
			assert_non_null(buf = realloc(buf, cap *= 2));
	}
	close(fd);
	buf[n] = 0;
	assert_non_null(strstr(buf, "Transfer-Encoding: chunked"));
	p = strstr(buf, "\r\n\r\n") + 4;
	body = malloc(n + 1);
	assert_non_null(body);
	while (sscanf(p, "%zx", &size) == 1 && size) {
		p = strstr(p, "\r\n") + 2;
		memcpy(body + out, p, size);
		out += size;
		p += size + 2;
	}
	body[out] = 0;
	free(buf);
	return body;
}

/* Every key listed once, in chunks; a client that hangs up midway
 * does not hurt the master. */
static void test_all_keys(void **state)
{
	enum { N = 40000 };
	static char seen[N];
	size_t len;
	char *body, *p;
	int fd, lines = 0, hang;

	(void)state;
	assert_int_equal(st_start(0, NULL), 0);
	fd = th_connect(st_port);
	assert_int_equal(st_mount(fd, A, 1, "seg-a", 0, 1u << 30), 0);
	for (int i = 0; i < N; i += 128)
		put_batch(fd, i, N - i < 128 ? N - i : 128);
	assert_int_equal(st_http_get(st_metrics_port, "/get_all_keys", &body,
				     &len), 200);
	assert_true(len > 64 << 10);            /* more than one chunk */
	memset(seen, 0, sizeof(seen));
	for (p = body; *p; p = strchr(p, '\n') + 1) {
		int k;

		assert_int_equal(sscanf(p, "many-%d\n", &k), 1);
		assert_true(k >= 0 && k < N);
		assert_int_equal(seen[k]++, 0);
		lines++;
	}
	assert_int_equal(lines, N);
	free(body);
	body = get_chunked("/get_all_keys");
	assert_int_equal(strlen(body), len);
	free(body);

	for (int i = 0; i < 20; i++) {
		hang = th_connect(st_metrics_port);
		dprintf(hang, "GET /get_all_keys HTTP/1.1\r\nHost: x\r\n\r\n");
		usleep(1000);
		close(hang);
	}
	assert_false(st_ping_needs_mount(fd, A));
	assert_int_equal(st_http_get(st_metrics_port, "/health", NULL, NULL),
			 200);
	close(fd);
	st_stop();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_paths),
		cmocka_unit_test(test_metrics),
		cmocka_unit_test(test_all_keys),
	};

	return cmocka_run_group_tests(tests, st_setup, st_teardown);
}
