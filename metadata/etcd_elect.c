/*
 * A campaign for a key (etcd_elect_internal.h): one transaction through
 * the gateway, compare the key's create_revision with 0 (absent), then
 * put it with the lease, or else read it. Sent as a lease put is
 * (etcd_lease.c): it waits for a lease, and goes to the next member when
 * one cannot serve. A depose is a transaction too: compare the value,
 * then delete.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>

#include "metadata/etcd_elect_internal.h"
#include "metadata/etcd_internal.h"

/* A campaign's body: its key put with the lease if absent, else read.
 * @return 0, -1 (no memory). */
static int campaign_body(struct etcd_op *op, struct evbuffer *b)
{
	size_t klen = strlen(op->key);

	return evbuffer_add(b, "{\"compare\":[{", 13) ||
	       xfer_etcd_add_b64_field(b, "key", op->key, klen) ||
	       evbuffer_add_printf(b, ",\"result\":\"EQUAL\",\"target\":"
				   "\"CREATE\",\"create_revision\":\"0\"}],"
				   "\"success\":[{\"request_put\":{") < 0 ||
	       xfer_etcd_add_b64_field(b, "key", op->key, klen) ||
	       evbuffer_add(b, ",", 1) ||
	       xfer_etcd_add_b64_field(b, "value", op->value, op->vlen) ||
	       evbuffer_add_printf(b, ",\"lease\":\"%" PRId64 "\"}}],"
				   "\"failure\":[{\"request_range\":{",
				   op->lease) < 0 ||
	       xfer_etcd_add_b64_field(b, "key", op->key, klen) ||
	       evbuffer_add(b, "}}]}", 4);
}

/* A depose's body: its key deleted if its value is op->value. */
static int depose_body(struct etcd_op *op, struct evbuffer *b)
{
	size_t klen = strlen(op->key);

	return evbuffer_add(b, "{\"compare\":[{", 13) ||
	       xfer_etcd_add_b64_field(b, "key", op->key, klen) ||
	       evbuffer_add_printf(b, ",\"result\":\"EQUAL\",\"target\":"
				   "\"VALUE\",") < 0 ||
	       xfer_etcd_add_b64_field(b, "value", op->value, op->vlen) ||
	       evbuffer_add_printf(b, "}],\"success\":[{"
				   "\"request_delete_range\":{") < 0 ||
	       xfer_etcd_add_b64_field(b, "key", op->key, klen) ||
	       evbuffer_add(b, "}}]}", 4);
}

/* The holder's value, from the failure branch's range answer. */
static int holder(struct etcd_op *op, yajl_val root)
{
	yajl_val res = xfer_etcd_json_get(root, "responses", NULL), kvs;
	const char *b64;
	ssize_t n;

	if (!YAJL_IS_ARRAY(res) || !res->u.array.len)
		return -EIO;
	kvs = xfer_etcd_json_get(res->u.array.values[0], "response_range",
				 "kvs");
	/* gone between the compare and the read: the caller asks again */
	if (!YAJL_IS_ARRAY(kvs) || !kvs->u.array.len)
		return -EEXIST;
	b64 = YAJL_GET_STRING(xfer_etcd_json_get(kvs->u.array.values[0],
						 "value", NULL));
	n = xfer_etcd_b64_decode(b64 ? b64 : "", &op->res);
	if (n < 0)
		return n == -ENOMEM ? -ENOMEM : -EIO;
	op->res_len = (size_t)n;
	return -EEXIST;
}

static void campaign_done(struct etcd_op *op, int st, yajl_val root)
{
	struct etcd *e = op->e;
	yajl_val ok;

	if (st != HTTP_OK) {
		xfer_etcd_finish(op, st < 0 ? st :
				 xfer_etcd_http_errno(e, "transaction", st,
						      root));
		return;
	}
	if (!root) {
		xfer_etcd_finish(op, -EIO);
		return;
	}
	/* the gateway leaves out a false "succeeded" */
	ok = xfer_etcd_json_get(root, "succeeded", NULL);
	if (YAJL_IS_TRUE(ok))
		xfer_etcd_finish(op, 0);
	else
		xfer_etcd_finish(op, op->kind == OP_DEPOSE ? -ESTALE :
				 holder(op, root));
}

int xfer_etcd_elect_open(const char *conn, const struct xfer_store_env *env,
			 int ttl_s, struct xfer_store **out)
{
	return xfer_etcd_open_ttl(conn, env, ttl_s, out);
}

/* Send a transaction of @p kind. */
static void txn(struct xfer_store *s, enum etcd_op_kind kind,
		const char *key, const char *value, size_t len,
		xfer_store_cb cb, void *arg)
{
	struct etcd *e = container_of(s, struct etcd, base);
	struct etcd_op *op = xfer_etcd_op_new(e, kind, campaign_done, key,
					      value, len);
	int ret;

	if (!op) {
		/* a result of its own, from the deferred queue */
		op = xfer_etcd_op_new(e, OP_GET, NULL, NULL, NULL, 0);
		if (!op)
			return;
		op->cb = cb;
		op->arg = arg;
		xfer_etcd_finish(op, -ENOMEM);
		return;
	}
	op->cb = cb;
	op->arg = arg;
	op->body = kind == OP_CAMPAIGN ? campaign_body : depose_body;
	if (kind == OP_CAMPAIGN) {
		xfer_etcd_put_start(op);   /* with the lease */
		return;
	}
	ret = xfer_etcd_op_send(op);
	if (ret)
		xfer_etcd_finish(op, ret);
}

void xfer_etcd_campaign(struct xfer_store *s, const char *key,
			const char *value, size_t len, xfer_store_cb cb,
			void *arg)
{
	txn(s, OP_CAMPAIGN, key, value, len, cb, arg);
}

void xfer_etcd_depose(struct xfer_store *s, const char *key,
		      const char *value, size_t len, xfer_store_cb cb,
		      void *arg)
{
	txn(s, OP_DEPOSE, key, value, len, cb, arg);
}
