/* The RDMA codecs: descriptor fields, priority matrix, GIDs. */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/json_internal.h"
#include "transports/rdma/desc_internal.h"

/* ---- GIDs ---- */

/* Not isxdigit(): the locale must not change what a peer may send. */
static int hex_val(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int xfer_rdma_gid_parse(const char *s, uint8_t gid[16])
{
	uint8_t tmp[16];
	int i, hi, lo;

	for (i = 0; i < 16; i++, s += 3) {
		/* stops at a NUL before reading past it */
		hi = hex_val(s[0]);
		lo = hi < 0 ? -1 : hex_val(s[1]);
		if (lo < 0 || s[2] != (i < 15 ? ':' : '\0'))
			return -EINVAL;
		tmp[i] = hi << 4 | lo;
	}
	memcpy(gid, tmp, sizeof(tmp));
	return 0;
}

void xfer_rdma_gid_format(const uint8_t gid[16], char out[48])
{
	static const char hex[] = "0123456789abcdef";
	int i;

	for (i = 0; i < 16; i++) {
		out[3 * i] = hex[gid[i] >> 4];
		out[3 * i + 1] = hex[gid[i] & 0xf];
		out[3 * i + 2] = i < 15 ? ':' : '\0';
	}
}

/* ---- priority matrix ---- */

/* @v: an array of names into *out, *n. */
static int names_fill(yajl_val v, const char *where, size_t row, size_t list,
		      char ***out, size_t *n, char *err, size_t errlen)
{
	const char *s;
	size_t i;

	if (!YAJL_IS_ARRAY(v))
		return xfer_json_fail(err, errlen,
				      "%sentry %zu[%zu]: must be an array",
				      where, row, list);
	if (!v->u.array.len)
		return 0;
	*out = calloc(v->u.array.len, sizeof(**out));
	if (!*out)
		return xfer_json_oom(err, errlen);
	*n = v->u.array.len;
	for (i = 0; i < *n; i++) {
		s = xfer_json_name(v->u.array.values[i]);
		if (!s)
			return xfer_json_fail(err, errlen,
					      "%sentry %zu[%zu][%zu]: must be a "
					      "string of 1..%d bytes", where,
					      row, list, i, XFER_JSON_MAX_STR);
		(*out)[i] = strdup(s);
		if (!(*out)[i])
			return xfer_json_oom(err, errlen);
	}
	return 0;
}

/*
 * Entry @i of @obj: "<location>": [[preferred], [others]]. The message
 * names the entry by index: a location from a peer may hold a newline.
 */
static int prio_row_fill(struct xfer_rdma_prio *p, yajl_val obj, size_t i,
			 const char *where, char *err, size_t errlen)
{
	const char *loc = obj->u.object.keys[i];
	yajl_val v = obj->u.object.values[i];
	size_t n;
	int ret;

	if (!loc[0] || strlen(loc) > XFER_JSON_MAX_STR)
		return xfer_json_fail(err, errlen,
				      "%sentry %zu: location must be 1..%d bytes",
				      where, i, XFER_JSON_MAX_STR);
	/* the peer writes both lists; a missing others list means none */
	n = YAJL_IS_ARRAY(v) ? v->u.array.len : 0;
	if (n < 1 || n > 2)
		return xfer_json_fail(err, errlen,
				      "%sentry %zu: must be an array of 1 or 2 "
				      "arrays", where, i);
	p->location = strdup(loc);
	if (!p->location)
		return xfer_json_oom(err, errlen);
	ret = names_fill(v->u.array.values[0], where, i, 0, &p->pref,
			 &p->npref, err, errlen);
	if (!ret && n > 1)
		ret = names_fill(v->u.array.values[1], where, i, 1, &p->other,
				 &p->nother, err, errlen);
	return ret;
}

/* Shared by xfer_rdma_prio_decode() and the descriptor's
 * "priority_matrix". */
static int prio_fill(yajl_val obj, const char *where,
		     struct xfer_rdma_prio **out, size_t *n, char *err,
		     size_t errlen)
{
	struct xfer_rdma_prio *rows;
	size_t i, len = obj->u.object.len;
	int ret = 0;

	*out = NULL;
	*n = 0;
	if (!len)
		return 0;
	rows = calloc(len, sizeof(*rows));
	if (!rows)
		return xfer_json_oom(err, errlen);
	for (i = 0; !ret && i < len; i++)
		ret = prio_row_fill(&rows[i], obj, i, where, err, errlen);
	if (ret) {
		xfer_rdma_prio_free(rows, len);
		return ret;
	}
	*out = rows;
	*n = len;
	return 0;
}

int xfer_rdma_prio_decode(const char *json, size_t len,
			  struct xfer_rdma_prio **out, size_t *n, char *err,
			  size_t errlen)
{
	yajl_val root;
	int ret;

	*out = NULL;
	*n = 0;
	ret = xfer_json_parse(json, len, &root, err, errlen);
	if (ret)
		return ret;
	ret = prio_fill(root, "", out, n, err, errlen);
	yajl_tree_free(root);
	return ret;
}

static void names_free(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

void xfer_rdma_prio_free(struct xfer_rdma_prio *p, size_t n)
{
	if (!p)
		return;
	for (size_t i = 0; i < n; i++) {
		free(p[i].location);
		names_free(p[i].pref, p[i].npref);
		names_free(p[i].other, p[i].nother);
	}
	free(p);
}

/* ---- encoding ---- */

static const char *const desc_keys[] = { "devices", "priority_matrix", NULL };
static const char *const buf_keys[] = { "lkey", "rkey", NULL };

static int gen_devs(yajl_gen g, const struct xfer_rdma_desc *d)
{
	int failed = yajl_gen_array_open(g);
	char gid[48];

	for (size_t i = 0; !failed && i < d->ndevs; i++) {
		xfer_rdma_gid_format(d->devs[i].gid, gid);
		failed = yajl_gen_map_open(g) ||
			 xfer_json_str(g, "gid") || xfer_json_str(g, gid) ||
			 xfer_json_str(g, "lid") ||
			 xfer_json_u64(g, d->devs[i].lid) ||
			 xfer_json_str(g, "name") ||
			 xfer_json_str(g, d->devs[i].name) ||
			 yajl_gen_map_close(g);
	}
	return failed || yajl_gen_array_close(g);
}

static int gen_names(yajl_gen g, char *const *names, size_t n)
{
	int failed = yajl_gen_array_open(g);

	for (size_t i = 0; !failed && i < n; i++)
		failed = xfer_json_str(g, names[i]);
	return failed || yajl_gen_array_close(g);
}

static int gen_prio(yajl_gen g, const struct xfer_rdma_desc *d)
{
	int failed = yajl_gen_map_open(g);

	for (size_t i = 0; !failed && i < d->nprio; i++) {
		const struct xfer_rdma_prio *p = &d->prio[i];

		failed = xfer_json_str(g, p->location) ||
			 yajl_gen_array_open(g) ||
			 gen_names(g, p->pref, p->npref) ||
			 gen_names(g, p->other, p->nother) ||
			 yajl_gen_array_close(g);
	}
	return failed || yajl_gen_map_close(g);
}

static int rdma_gen(yajl_gen g, const char *key, const void *tp)
{
	if (!strcmp(key, "devices"))
		return gen_devs(g, tp);
	return gen_prio(g, tp);
}

static int rdma_gen_buf(yajl_gen g, const char *key, const void *tp,
			const void *buf_tp)
{
	const struct xfer_rdma_desc *d = tp;
	const struct xfer_rdma_keys *k = buf_tp;
	const uint32_t *keys = !strcmp(key, "lkey") ? k->lkey : k->rkey;
	int failed = yajl_gen_array_open(g);

	for (size_t i = 0; !failed && i < d->ndevs; i++)
		failed = xfer_json_u64(g, keys[i]);
	return failed || yajl_gen_array_close(g);
}

/* ---- decoding ---- */

static int dev_fill(struct xfer_rdma_dev *dev, size_t i, yajl_val v,
		    char *err, size_t errlen)
{
	char where[32];
	const char *gid;
	uint64_t lid;
	int ret;

	if (!YAJL_IS_OBJECT(v))
		return xfer_json_fail(err, errlen,
				      "devices[%zu]: must be an object", i);
	snprintf(where, sizeof(where), "devices[%zu].", i);
	ret = xfer_json_get_name(v, where, "name", &dev->name, err, errlen);
	if (ret)
		return ret;
	ret = xfer_json_get_uint(v, where, "lid", 0, UINT16_MAX, &lid, err,
				 errlen);
	if (ret)
		return ret;
	dev->lid = lid;
	ret = xfer_json_get_strv(v, where, "gid", &gid, err, errlen);
	if (ret)
		return ret;
	if (xfer_rdma_gid_parse(gid, dev->gid))
		return xfer_json_fail(err, errlen, "%sgid: must be 16 hex "
				      "bytes joined by ':'", where);
	return 0;
}

static int devs_fill(struct xfer_rdma_desc *d, yajl_val root, char *err,
		     size_t errlen)
{
	yajl_val devs = xfer_json_get(root, "devices");
	size_t n;
	int ret;

	if (!devs)
		return xfer_json_fail(err, errlen, "devices: missing");
	n = YAJL_IS_ARRAY(devs) ? devs->u.array.len : 0;
	if (n < 1 || n > XFER_RDMA_MAX_DEVS)
		return xfer_json_fail(err, errlen,
				      "devices: must be an array of 1..%d entries",
				      XFER_RDMA_MAX_DEVS);
	d->devs = calloc(n, sizeof(*d->devs));
	if (!d->devs)
		return xfer_json_oom(err, errlen);
	d->ndevs = n;
	for (size_t i = 0; i < n; i++) {
		ret = dev_fill(&d->devs[i], i, devs->u.array.values[i], err,
			       errlen);
		if (ret)
			return ret;
		/* keys and the matrix address devices by name */
		for (size_t j = 0; j < i; j++)
			if (!strcmp(d->devs[j].name, d->devs[i].name))
				return xfer_json_fail(err, errlen,
						      "devices[%zu].name: same as "
						      "devices[%zu]", i, j);
	}
	return 0;
}

static int rdma_parse(yajl_val root, void **tp, char *err, size_t errlen)
{
	struct xfer_rdma_desc *d = calloc(1, sizeof(*d));
	yajl_val m;
	int ret;

	if (!d)
		return xfer_json_oom(err, errlen);
	*tp = d;
	ret = devs_fill(d, root, err, errlen);
	if (ret)
		return ret;
	m = xfer_json_get(root, "priority_matrix");
	if (!m)
		return 0;
	if (!YAJL_IS_OBJECT(m))
		return xfer_json_fail(err, errlen,
				      "priority_matrix: must be an object");
	return prio_fill(m, "priority_matrix: ", &d->prio, &d->nprio, err,
			 errlen);
}

/* @n keys (one per device) under @key of buffer @obj. */
static int keys_fill(yajl_val obj, const char *where, const char *key,
		     size_t n, uint32_t **out, char *err, size_t errlen)
{
	yajl_val v = xfer_json_get(obj, key);
	uint64_t u;

	if (!v)
		return xfer_json_fail(err, errlen, "%s%s: missing", where, key);
	if (!YAJL_IS_ARRAY(v) || v->u.array.len != n)
		return xfer_json_fail(err, errlen, "%s%s: must be an array of "
				      "%zu keys, one per device", where, key, n);
	*out = calloc(n, sizeof(**out));
	if (!*out)
		return xfer_json_oom(err, errlen);
	for (size_t i = 0; i < n; i++) {
		if (!xfer_json_to_u64(v->u.array.values[i], &u) ||
		    u > UINT32_MAX)
			return xfer_json_fail(err, errlen,
					      "%s%s[%zu]: must be an integer in "
					      "0..%" PRIu32, where, key, i,
					      UINT32_MAX);
		(*out)[i] = u;
	}
	return 0;
}

static int rdma_parse_buf(yajl_val obj, const char *where, const void *tp,
			  void **buf_tp, char *err, size_t errlen)
{
	const struct xfer_rdma_desc *d = tp;
	struct xfer_rdma_keys *k = calloc(1, sizeof(*k));
	int ret;

	if (!k)
		return xfer_json_oom(err, errlen);
	*buf_tp = k;
	ret = keys_fill(obj, where, "lkey", d->ndevs, &k->lkey, err, errlen);
	if (ret)
		return ret;
	return keys_fill(obj, where, "rkey", d->ndevs, &k->rkey, err, errlen);
}

static void rdma_free(void *tp)
{
	struct xfer_rdma_desc *d = tp;

	for (size_t i = 0; i < d->ndevs; i++)
		free(d->devs[i].name);
	free(d->devs);
	xfer_rdma_prio_free(d->prio, d->nprio);
	free(d);
}

static void rdma_free_buf(void *buf_tp)
{
	struct xfer_rdma_keys *k = buf_tp;

	free(k->lkey);
	free(k->rkey);
	free(k);
}

const struct xfer_desc_codec xfer_rdma_codec = {
	.protocol = "rdma",
	.keys = desc_keys,
	.buf_keys = buf_keys,
	.gen = rdma_gen,
	.gen_buf = rdma_gen_buf,
	.parse = rdma_parse,
	.parse_buf = rdma_parse_buf,
	.free = rdma_free,
	.free_buf = rdma_free_buf,
};
