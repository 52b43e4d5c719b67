/* What the JSON codec tests share: decoders, checks (th_json.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test/th_json.h"

void *xmalloc(size_t size)
{
	void *p = malloc(size);

	if (!p)
		abort();
	return p;
}

int try_desc(const char *json, size_t len, char *err, size_t errlen)
{
	struct xfer_desc *d = NULL;
	int ret = xfer_desc_decode(json, len, CODECS, &d, err, errlen);

	if (ret)
		assert_null(d);
	xfer_desc_free(d);
	return ret;
}

int try_conn(const char *json, size_t len, char *err, size_t errlen)
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

int try_notify(const char *json, size_t len, char *err, size_t errlen)
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

void expect_ok(decode_fn fn, const char *json)
{
	char err[256] = "";
	int ret = fn(json, strlen(json), err, sizeof(err));

	if (ret)
		fail_msg("%d (%s) for: %s", ret, err, json);
}

const char *expect_reject_len(decode_fn fn, const char *json,
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

const char *expect_reject(decode_fn fn, const char *json)
{
	return expect_reject_len(fn, json, strlen(json));
}

void check_line(const char *json, size_t len)
{
	assert_int_equal(strlen(json), len);
	assert_true(len > 1);
	assert_int_equal(json[len - 1], '\n');
	assert_ptr_equal(strchr(json, '\n'), json + len - 1);
}

/* A TCP buffer: no keys. */

struct xfer_desc *desc_round_trip(const struct xfer_desc *in)
{
	struct xfer_desc *out = NULL;
	char err[256] = "";
	char *json;
	size_t len;

	assert_int_equal(xfer_desc_encode(in, &json, &len), 0);
	check_line(json, len);
	if (xfer_desc_decode(json, len, CODECS, &out, err, sizeof(err)))
		fail_msg("%s for: %s", err, json);
	free(json);
	return out;
}

int try_rpc(const char *json, size_t len, char *err, size_t errlen)
{
	char *host = NULL;
	uint16_t port = 0;
	int ret = xfer_rpc_meta_decode(json, len, &host, &port, err, errlen);

	if (ret)
		assert_null(host);
	free(host);
	return ret;
}

#ifdef XFER_HAVE_RDMA
int try_prio(const char *json, size_t len, char *err, size_t errlen)
{
	struct xfer_rdma_prio *p = (struct xfer_rdma_prio *)&p;
	size_t n = 99;
	int ret = xfer_rdma_prio_decode(json, len, &p, &n, err, errlen);

	if (ret) {
		assert_null(p);
		assert_int_equal(n, 0);
	}
	xfer_rdma_prio_free(p, n);
	return ret;
}
#endif

int try_check(const char *json, size_t len, char *err, size_t errlen)
{
	return xfer_json_check_object(json, len, err, errlen);
}

const decode_fn th_decoders[TH_NDECODERS] = {
	try_desc, try_conn, try_notify, try_rpc, try_check,
#ifdef XFER_HAVE_RDMA
	try_prio,
#endif
};

