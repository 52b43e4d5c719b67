/* Unit tests: the file segment's document (PROTOCOL.md §2, nvmeof): the
 * exact bytes written, decoding back, every rejection, and where an
 * offset lies. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test/th_json.h"
#include "transports/file/doc_internal.h"

static char *hosts[] = { "n1", "n2" }, *paths[] = { "/mnt/a", "/mnt/b" };

static void test_encode_exact(void **state)
{
	struct xfer_file_buf bufs[2] = {
		{ .length = 4096, .file_path = "/data/a", .nmap = 2,
		  .map_host = hosts, .map_path = paths },
		{ .length = 1ull << 40, .file_path = "/dev/nvme0n1" },
	};
	struct xfer_file_doc d = { .server_name = "h:1", .data_port = 15002,
				   .nbufs = 2, .bufs = bufs };
	char *json;
	size_t len;

	(void)state;
	assert_int_equal(xfer_file_doc_encode(&d, &json, &len), 0);
	assert_string_equal(json,
		"{\"buffers\":[{\"file_path\":\"/data/a\",\"length\":4096,"
		"\"local_path_map\":{\"n1\":\"/mnt/a\",\"n2\":\"/mnt/b\"}},"
		"{\"file_path\":\"/dev/nvme0n1\",\"length\":1099511627776,"
		"\"local_path_map\":{}}],\"protocol\":\"nvmeof\","
		"\"server_name\":\"h:1\",\"xfer_data_port\":15002}\n");
	assert_int_equal(len, strlen(json));
	free(json);
}

static struct xfer_file_doc *decode_ok(const char *json)
{
	struct xfer_file_doc *d = NULL;
	char err[128] = "";

	if (xfer_file_doc_decode(json, strlen(json), &d, err, sizeof(err)))
		fail_msg("refused %s: %s", json, err);
	return d;
}

static void test_decode(void **state)
{
	struct xfer_file_doc *d;
	uint64_t in = 0;

	(void)state;
	/* the seeds' form: no data port, any case of the protocol */
	d = decode_ok("{\"server_name\":\"s\",\"protocol\":\"NVMeoF\","
		      "\"buffers\":[{\"length\":10,\"file_path\":\"/f\","
		      "\"local_path_map\":{\"h\":\"/m/f\"}},"
		      "{\"length\":5,\"file_path\":\"/g\"}]}");
	assert_string_equal(d->server_name, "s");
	assert_int_equal(d->data_port, 0);
	assert_int_equal(d->nbufs, 2);
	assert_int_equal(d->bufs[0].length, 10);
	assert_string_equal(d->bufs[0].file_path, "/f");
	assert_int_equal(d->bufs[0].nmap, 1);
	assert_string_equal(d->bufs[0].map_host[0], "h");
	assert_string_equal(d->bufs[0].map_path[0], "/m/f");
	assert_int_equal(d->bufs[1].nmap, 0);
	/* end to end: [0,10) is /f, [10,15) is /g; nothing spans both */
	assert_int_equal(xfer_file_doc_find(d, 0, 10, &in), 0);
	assert_int_equal(in, 0);
	assert_int_equal(xfer_file_doc_find(d, 12, 3, &in), 1);
	assert_int_equal(in, 2);
	assert_int_equal(xfer_file_doc_find(d, 9, 2, &in), -1);
	assert_int_equal(xfer_file_doc_find(d, 15, 1, &in), -1);
	assert_int_equal(xfer_file_doc_find(d, 0, 0, &in), -1);
	assert_int_equal(xfer_file_doc_find(d, 1, UINT64_MAX, &in), -1);
	xfer_file_doc_free(d);
	d = decode_ok("{\"server_name\":\"s\",\"protocol\":\"nvmeof\","
		      "\"buffers\":[],\"xfer_data_port\":7}");
	assert_int_equal(d->nbufs, 0);
	assert_int_equal(d->data_port, 7);
	assert_int_equal(xfer_file_doc_find(d, 0, 1, &in), -1);
	xfer_file_doc_free(d);
}

static void test_rejects(void **state)
{
	static const char *const bad[] = {
		"",
		"[]",
		"{\"server_name\":\"s\",\"protocol\":\"tcp\",\"buffers\":[]}",
		"{\"server_name\":\"s\",\"buffers\":[]}",
		"{\"protocol\":\"nvmeof\",\"buffers\":[]}",
		"{\"server_name\":\"\",\"protocol\":\"nvmeof\",\"buffers\":[]}",
		"{\"server_name\":\"s\",\"protocol\":\"nvmeof\"}",
		"{\"server_name\":\"s\",\"protocol\":\"nvmeof\",\"buffers\":{}}",
		"{\"server_name\":\"s\",\"protocol\":\"nvmeof\",\"buffers\":[1]}",
		"{\"server_name\":\"s\",\"protocol\":\"nvmeof\",\"buffers\":"
		"[{\"length\":0,\"file_path\":\"/f\"}]}",
		"{\"server_name\":\"s\",\"protocol\":\"nvmeof\",\"buffers\":"
		"[{\"length\":-1,\"file_path\":\"/f\"}]}",
		"{\"server_name\":\"s\",\"protocol\":\"nvmeof\",\"buffers\":"
		"[{\"length\":1}]}",
		"{\"server_name\":\"s\",\"protocol\":\"nvmeof\",\"buffers\":"
		"[{\"length\":1,\"file_path\":\"\"}]}",
		"{\"server_name\":\"s\",\"protocol\":\"nvmeof\",\"buffers\":"
		"[{\"length\":1,\"file_path\":\"/f\",\"local_path_map\":[]}]}",
		"{\"server_name\":\"s\",\"protocol\":\"nvmeof\",\"buffers\":"
		"[{\"length\":1,\"file_path\":\"/f\",\"local_path_map\":"
		"{\"h\":1}}]}",
		"{\"server_name\":\"s\",\"protocol\":\"nvmeof\",\"buffers\":"
		"[{\"length\":1,\"file_path\":\"/f\",\"local_path_map\":"
		"{\"\":\"/m\"}}]}",
		"{\"server_name\":\"s\",\"protocol\":\"nvmeof\",\"buffers\":"
		"[{\"length\":18446744073709551615,\"file_path\":\"/f\"},"
		"{\"length\":1,\"file_path\":\"/g\"}]}",
		"{\"server_name\":\"s\",\"protocol\":\"nvmeof\",\"buffers\":[],"
		"\"xfer_data_port\":65536}",
	};
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct xfer_file_doc *d = NULL;
		char err[128] = "";
		int ret = xfer_file_doc_decode(bad[i], strlen(bad[i]), &d, err,
					       sizeof(err));

		if (ret != -EPROTO || d || !err[0])
			fail_msg("case %zu %s: %d, no reason or a document",
				 i, bad[i], ret);
	}
}

/* More files than a peer may send: refused, not allocated. */
static void test_too_many(void **state)
{
	size_t n = XFER_FILE_MAX_FILES + 1, len = 0;
	char *json = malloc(n * 40 + 100);
	struct xfer_file_doc *d = NULL;
	char err[128];

	(void)state;
	assert_non_null(json);
	len += (size_t)sprintf(json, "{\"server_name\":\"s\",\"protocol\":"
			       "\"nvmeof\",\"buffers\":[");
	for (size_t i = 0; i < n; i++)
		len += (size_t)sprintf(json + len, "%s{\"length\":1,"
				       "\"file_path\":\"/f\"}", i ? "," : "");
	len += (size_t)sprintf(json + len, "]}");
	assert_int_equal(xfer_file_doc_decode(json, len, &d, err, sizeof(err)),
			 -EPROTO);
	assert_null(d);
	free(json);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_encode_exact),
		cmocka_unit_test(test_decode),
		cmocka_unit_test(test_rejects),
		cmocka_unit_test(test_too_many),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
