/* The Connection and Notify bodies of the handshake (PROTOCOL.md §1). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/handshake_internal.h"
#include "util/json_internal.h"

/* Most QPs accepted in a Connection body (the peer uses 2 by default). */
#define HS_MAX_QP 64

int xfer_hs_conn_encode(const struct xfer_hs_conn *c, char **json,
			size_t *len)
{
	yajl_gen g = xfer_json_gen_new();
	int failed = !g || yajl_gen_map_open(g) ||
		 xfer_json_str(g, "local_gid") || xfer_json_str(g, c->local_gid) ||
		 xfer_json_str(g, "local_lid") || xfer_json_u64(g, c->local_lid) ||
		 xfer_json_str(g, "local_nic_path") ||
		 xfer_json_str(g, c->local_nic_path) ||
		 xfer_json_str(g, "payload") || xfer_json_str(g, c->payload) ||
		 xfer_json_str(g, "peer_nic_path") ||
		 xfer_json_str(g, c->peer_nic_path) ||
		 xfer_json_str(g, "qp_num") || yajl_gen_array_open(g);
	for (size_t i = 0; !failed && i < c->nqp; i++)
		failed = xfer_json_u64(g, c->qp_num[i]);
	failed = failed || yajl_gen_array_close(g) ||
		 xfer_json_str(g, "ready_ack") ||
		 yajl_gen_bool(g, c->ready_ack) ||
		 xfer_json_str(g, "reply_msg") || xfer_json_str(g, c->reply_msg) ||
		 yajl_gen_map_close(g);
	return xfer_json_finish(g, failed, json, len);
}

static int qps_fill(struct xfer_hs_conn *c, yajl_val v, char *err,
		    size_t errlen)
{
	uint64_t u;

	if (!v) /* an older peer: no QPs, which the QP count check refuses */
		return 0;
	if (!YAJL_IS_ARRAY(v))
		return xfer_json_fail(err, errlen, "qp_num: must be an array");
	if (v->u.array.len > HS_MAX_QP)
		return xfer_json_fail(err, errlen, "qp_num: more than %d entries",
				      HS_MAX_QP);
	if (!v->u.array.len)
		return 0;
	c->qp_num = calloc(v->u.array.len, sizeof(*c->qp_num));
	if (!c->qp_num)
		return xfer_json_oom(err, errlen);
	c->nqp = v->u.array.len;
	for (size_t i = 0; i < c->nqp; i++) {
		if (!xfer_json_to_u64(v->u.array.values[i], &u) || u > UINT32_MAX)
			return xfer_json_fail(err, errlen,
					      "qp_num[%zu]: must be an integer in 0..%"
					      PRIu32, i, UINT32_MAX);
		c->qp_num[i] = u;
	}
	return 0;
}

/* A string field that may be missing (read as "", as Mooncake reads it);
 * present, it must be a string of bounded length. */
static int opt_str(yajl_val root, const char *key, char **dst, char *err,
		   size_t errlen)
{
	if (xfer_json_get(root, key))
		return xfer_json_get_str(root, "", key, dst, err, errlen);
	*dst = strdup("");
	return *dst ? 0 : xfer_json_oom(err, errlen);
}

/*
 * Every field may be missing, as in Mooncake's decoder: peers of other
 * versions leave out ready_ack, local_lid, local_gid or payload (and add
 * fields such as "protocol", ignored here). Missing strings read as "",
 * local_lid as 0, qp_num as none, ready_ack as false. A field that is
 * there must have its type and bounds, except ready_ack, which Mooncake
 * reads as false when it is not a boolean.
 */
static int conn_fill(struct xfer_hs_conn *c, yajl_val root, char *err,
		     size_t errlen)
{
	const struct {
		const char *key;
		char **dst;
	} strs[] = {
		{ "local_gid", &c->local_gid },
		{ "local_nic_path", &c->local_nic_path },
		{ "payload", &c->payload },
		{ "peer_nic_path", &c->peer_nic_path },
		{ "reply_msg", &c->reply_msg },
	};
	uint64_t u = 0;
	int ret;

	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
		ret = opt_str(root, strs[i].key, strs[i].dst, err, errlen);
		if (ret)
			return ret;
	}
	if (xfer_json_get(root, "local_lid")) {
		ret = xfer_json_get_uint(root, "", "local_lid", 0, UINT32_MAX,
					 &u, err, errlen);
		if (ret)
			return ret;
	}
	c->local_lid = u;
	c->ready_ack = YAJL_IS_TRUE(xfer_json_get(root, "ready_ack"));
	return qps_fill(c, xfer_json_get(root, "qp_num"), err, errlen);
}

int xfer_hs_conn_decode(const char *json, size_t len, struct xfer_hs_conn *c,
			char *err, size_t errlen)
{
	yajl_val root;
	int ret;

	memset(c, 0, sizeof(*c));
	ret = xfer_json_parse(json, len, &root, err, errlen);
	if (ret)
		return ret;
	ret = conn_fill(c, root, err, errlen);
	if (ret)
		xfer_hs_conn_clear(c);
	yajl_tree_free(root);
	return ret;
}

void xfer_hs_conn_clear(struct xfer_hs_conn *c)
{
	free(c->local_gid);
	free(c->local_nic_path);
	free(c->payload);
	free(c->peer_nic_path);
	free(c->qp_num);
	free(c->reply_msg);
	memset(c, 0, sizeof(*c));
}

int xfer_hs_meta_decode(const char *json, size_t len, char **kind, char *err,
			size_t errlen)
{
	yajl_val root;
	int ret;

	*kind = NULL;
	ret = xfer_json_parse(json, len, &root, err, errlen);
	if (ret)
		return ret;
	if (xfer_json_get(root, "kind"))
		ret = xfer_json_get_name(root, "", "kind", kind, err, errlen);
	if (ret) {
		free(*kind);
		*kind = NULL;
	}
	yajl_tree_free(root);
	return ret;
}

int xfer_hs_notify_encode(const struct xfer_hs_notify *n, char **json,
			  size_t *len)
{
	yajl_gen g = xfer_json_gen_new();
	int failed = !g || yajl_gen_map_open(g) ||
		 xfer_json_str(g, "name") || xfer_json_str(g, n->name) ||
		 xfer_json_str(g, "notify_msg") ||
		 xfer_json_str(g, n->notify_msg) ||
		 yajl_gen_map_close(g);
	return xfer_json_finish(g, failed, json, len);
}

/* A Notify field: a string as long as the frame allows (the frame was
 * bounded by handshake_max_len, as the sender's check is), not a name;
 * a missing one reads as "". */
static int notify_field(yajl_val root, const char *key, char **out,
			char *err, size_t errlen)
{
	yajl_val v = xfer_json_get(root, key);

	if (v && !YAJL_IS_STRING(v))
		return xfer_json_fail(err, errlen, "%s: must be a string", key);
	*out = strdup(v ? v->u.string : ""); /* missing: "", as Mooncake */
	return *out ? 0 : xfer_json_oom(err, errlen);
}

int xfer_hs_notify_decode(const char *json, size_t len,
			  struct xfer_hs_notify *n, char *err, size_t errlen)
{
	yajl_val root;
	int ret;

	memset(n, 0, sizeof(*n));
	ret = xfer_json_parse(json, len, &root, err, errlen);
	if (ret)
		return ret;
	ret = notify_field(root, "name", &n->name, err, errlen);
	if (!ret)
		ret = notify_field(root, "notify_msg", &n->notify_msg, err,
				   errlen);
	if (ret)
		xfer_hs_notify_clear(n);
	yajl_tree_free(root);
	return ret;
}

void xfer_hs_notify_clear(struct xfer_hs_notify *n)
{
	free(n->name);
	free(n->notify_msg);
	memset(n, 0, sizeof(*n));
}
