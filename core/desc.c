/*
 * The core descriptor codec (PROTOCOL.md §2): the fields every segment
 * descriptor has, merged in key order with the fields of its transport's
 * codec; and the rpc_meta value.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/desc_internal.h"
#include "util/json_internal.h"

/* Local time as the peer writes it: "YYYY-MM-DD HH:MM:SS.ffffff". */
static void now_str(char *buf, size_t size)
{
	struct timespec ts;
	struct tm tm;
	size_t n;

	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	n = strftime(buf, size, "%Y-%m-%d %H:%M:%S", &tm);
	snprintf(buf + n, size - n, ".%06ld", ts.tv_nsec / 1000);
}

/* ---- encoding ---- */

/* What the core writes of one object: keys sorted, values by index. */
struct core_fields {
	const char *const *keys;
	int (*gen)(yajl_gen g, size_t i, const void *obj, const void *ctx);
};

/*
 * Write an object whose keys are @p core's and @p tp_keys (the codec's,
 * NULL if none), both sorted, in one sorted run; the codec's values come
 * from @p tp_gen.
 */
static int gen_merged(yajl_gen g, const struct core_fields *core,
		      const void *obj, const void *ctx,
		      const char *const *tp_keys,
		      int (*tp_gen)(yajl_gen g, const char *key, void *arg),
		      void *arg)
{
	static const char *const none[] = { NULL };
	const char *const *k = core->keys, *const *t = tp_keys ? tp_keys : none;
	int failed = yajl_gen_map_open(g);

	while (!failed && (*k || *t)) {
		if (*t && (!*k || strcmp(*t, *k) < 0)) {
			failed = xfer_json_str(g, *t) || tp_gen(g, *t, arg);
			t++;
		} else {
			failed = xfer_json_str(g, *k) ||
				 core->gen(g, (size_t)(k - core->keys), obj, ctx);
			k++;
		}
	}
	return failed || yajl_gen_map_close(g);
}

struct enc {
	const struct xfer_desc *d;
	const struct xfer_desc_buf *b;
	const char *timestamp;
};

static const char *const buf_keys[] = { "addr", "length", "name", NULL };

static int gen_buf_field(yajl_gen g, size_t i, const void *obj,
			 const void *ctx)
{
	const struct xfer_desc_buf *b = obj;

	(void)ctx;
	switch (i) {
	case 0:
		return xfer_json_u64(g, b->addr);
	case 1:
		return xfer_json_u64(g, b->length);
	default:
		return xfer_json_str(g, b->name);
	}
}

static int gen_tp_buf(yajl_gen g, const char *key, void *arg)
{
	const struct enc *en = arg;

	return en->d->codec->gen_buf(g, key, en->d->tp, en->b->tp);
}

static int gen_bufs(yajl_gen g, const struct xfer_desc *d)
{
	static const struct core_fields buf = { buf_keys, gen_buf_field };
	const struct xfer_desc_codec *c = d->codec;
	int failed = yajl_gen_array_open(g);
	struct enc en = { .d = d };

	for (size_t i = 0; !failed && i < d->nbufs; i++) {
		en.b = &d->bufs[i];
		failed = gen_merged(g, &buf, en.b, NULL, c ? c->buf_keys : NULL,
				    gen_tp_buf, &en);
	}
	return failed || yajl_gen_array_close(g);
}

static const char *const desc_keys[] = {
	"buffers", "name", "protocol", "timestamp", NULL,
};

static int gen_desc_field(yajl_gen g, size_t i, const void *obj,
			  const void *ctx)
{
	const struct xfer_desc *d = obj;

	switch (i) {
	case 0:
		return gen_bufs(g, d);
	case 1:
		return xfer_json_str(g, d->name);
	case 2:
		return xfer_json_str(g, d->protocol);
	default:
		return xfer_json_str(g, ctx);
	}
}

static int gen_tp(yajl_gen g, const char *key, void *arg)
{
	const struct xfer_desc *d = arg;

	return d->codec->gen(g, key, d->tp);
}

int xfer_desc_encode(const struct xfer_desc *d, char **json, size_t *len)
{
	static const struct core_fields desc = { desc_keys, gen_desc_field };
	const char *ts = d->timestamp;
	char now[32];
	yajl_gen g;
	int failed;

	if (!ts) {
		now_str(now, sizeof(now));
		ts = now;
	}
	g = xfer_json_gen_new();
	failed = !g || gen_merged(g, &desc, d, ts,
				  d->codec ? d->codec->keys : NULL, gen_tp,
				  (void *)d);
	return xfer_json_finish(g, failed, json, len);
}

/* ---- decoding ---- */

static int buf_fill(const struct xfer_desc *d, struct xfer_desc_buf *b,
		    size_t i, yajl_val v, char *err, size_t errlen)
{
	char where[32];
	int ret;

	if (!YAJL_IS_OBJECT(v))
		return xfer_json_fail(err, errlen,
				      "buffers[%zu]: must be an object", i);
	snprintf(where, sizeof(where), "buffers[%zu].", i);
	ret = xfer_json_get_uint(v, where, "addr", 1, UINT64_MAX, &b->addr,
				 err, errlen);
	if (ret)
		return ret;
	ret = xfer_json_get_uint(v, where, "length", 1, UINT64_MAX,
				 &b->length, err, errlen);
	if (ret)
		return ret;
	if (b->length > UINT64_MAX - b->addr)
		return xfer_json_fail(err, errlen,
				      "buffers[%zu]: addr + length overflows", i);
	ret = xfer_json_get_str(v, where, "name", &b->name, err, errlen);
	if (ret || !d->codec || !d->codec->buf_keys)
		return ret;
	return d->codec->parse_buf(v, where, d->tp, &b->tp, err, errlen);
}

static int bufs_fill(struct xfer_desc *d, yajl_val root, char *err,
		     size_t errlen)
{
	yajl_val bufs = xfer_json_get(root, "buffers");
	size_t n;
	int ret;

	if (!bufs)
		return xfer_json_fail(err, errlen, "buffers: missing");
	if (!YAJL_IS_ARRAY(bufs))
		return xfer_json_fail(err, errlen, "buffers: must be an array");
	n = bufs->u.array.len;
	if (n > XFER_DESC_MAX_BUFFERS)
		return xfer_json_fail(err, errlen, "buffers: more than %d entries",
				      XFER_DESC_MAX_BUFFERS);
	if (!n)
		return 0;
	d->bufs = calloc(n, sizeof(*d->bufs));
	if (!d->bufs)
		return xfer_json_oom(err, errlen);
	d->nbufs = n;
	for (size_t i = 0; i < n; i++) {
		ret = buf_fill(d, &d->bufs[i], i, bufs->u.array.values[i], err,
			       errlen);
		if (ret)
			return ret;
	}
	return 0;
}

/* Fill @d from @root; on failure what was filled is left for the caller. */
static int desc_fill(struct xfer_desc *d, yajl_val root,
		     const struct xfer_desc_codec *const *codecs, char *err,
		     size_t errlen)
{
	int ret;

	ret = xfer_json_get_name(root, "", "name", &d->name, err, errlen);
	if (ret)
		return ret;
	ret = xfer_json_get_str(root, "", "protocol", &d->protocol, err,
				errlen);
	if (ret)
		return ret;
	/* A protocol without a codec here carries no fields of ours. */
	for (; codecs && *codecs && !d->codec; codecs++)
		if (!strcmp((*codecs)->protocol, d->protocol))
			d->codec = *codecs;
	if (d->codec) {
		ret = d->codec->parse(root, &d->tp, err, errlen);
		if (ret)
			return ret;
	}
	if (xfer_json_get(root, "timestamp")) {
		ret = xfer_json_get_str(root, "", "timestamp", &d->timestamp,
					err, errlen);
		if (ret)
			return ret;
	}
	return bufs_fill(d, root, err, errlen);
}

int xfer_desc_decode(const char *json, size_t len,
		     const struct xfer_desc_codec *const *codecs,
		     struct xfer_desc **out, char *err, size_t errlen)
{
	struct xfer_desc *d;
	yajl_val root;
	int ret;

	ret = xfer_json_parse(json, len, &root, err, errlen);
	if (ret)
		return ret;
	d = calloc(1, sizeof(*d));
	if (!d) {
		ret = xfer_json_oom(err, errlen);
		goto err_free_tree;
	}
	ret = desc_fill(d, root, codecs, err, errlen);
	if (ret)
		goto err_free_desc;
	yajl_tree_free(root);
	*out = d;
	return 0;

err_free_desc:
	xfer_desc_free(d);
err_free_tree:
	yajl_tree_free(root);
	return ret;
}

void xfer_desc_free(struct xfer_desc *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->nbufs; i++) {
		free(d->bufs[i].name);
		if (d->codec && d->bufs[i].tp)
			d->codec->free_buf(d->bufs[i].tp);
	}
	free(d->bufs);
	if (d->codec && d->tp)
		d->codec->free(d->tp);
	free(d->timestamp);
	free(d->protocol);
	free(d->name);
	free(d);
}

static int cmp_buf(const void *a, const void *b)
{
	const struct xfer_desc_buf *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

int xfer_desc_sort(struct xfer_desc *d)
{
	if (d->nbufs > 1)
		qsort(d->bufs, d->nbufs, sizeof(*d->bufs), cmp_buf);
	for (size_t i = 1; i < d->nbufs; i++)
		if (d->bufs[i - 1].addr + d->bufs[i - 1].length > d->bufs[i].addr)
			return -EPROTO;
	return 0;
}

const struct xfer_desc_buf *xfer_desc_find_buf(const struct xfer_desc *d,
					       uint64_t addr, uint64_t len)
{
	size_t lo = 0, hi = d->nbufs;

	if (addr + len < addr)
		return NULL;
	/* Buffers are sorted by address: find the last start <= addr. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (d->bufs[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || addr + len > d->bufs[lo - 1].addr + d->bufs[lo - 1].length)
		return NULL;
	return &d->bufs[lo - 1];
}

/* ---- rpc_meta ---- */

int xfer_rpc_meta_encode(const char *host, uint16_t port, char **json,
			 size_t *len)
{
	yajl_gen g = xfer_json_gen_new();
	int failed = !g || yajl_gen_map_open(g) ||
		 xfer_json_str(g, "ip_or_host_name") || xfer_json_str(g, host) ||
		 xfer_json_str(g, "rpc_port") || xfer_json_u64(g, port) ||
		 yajl_gen_map_close(g);
	return xfer_json_finish(g, failed, json, len);
}

int xfer_rpc_meta_decode(const char *json, size_t len, char **host,
			 uint16_t *port, char *err, size_t errlen)
{
	yajl_val root;
	char *h = NULL;
	uint64_t p;
	int ret;

	ret = xfer_json_parse(json, len, &root, err, errlen);
	if (ret)
		return ret;
	ret = xfer_json_get_name(root, "", "ip_or_host_name", &h, err, errlen);
	if (!ret)
		ret = xfer_json_get_uint(root, "", "rpc_port", 1, UINT16_MAX, &p,
					 err, errlen);
	yajl_tree_free(root);
	if (ret) {
		free(h);
		return ret;
	}
	*host = h;
	*port = p;
	return 0;
}
