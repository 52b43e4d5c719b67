/* The file segment's document (doc_internal.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/json_internal.h"
#include "transports/file/doc_internal.h"

static int gen_map(yajl_gen g, const struct xfer_file_buf *b)
{
	int failed = yajl_gen_map_open(g);

	for (size_t i = 0; !failed && i < b->nmap; i++)
		failed = xfer_json_str(g, b->map_host[i]) ||
			 xfer_json_str(g, b->map_path[i]);
	return failed || yajl_gen_map_close(g);
}

int xfer_file_doc_encode(const struct xfer_file_doc *d, char **json,
			 size_t *len)
{
	yajl_gen g = xfer_json_gen_new();
	int failed = !g || yajl_gen_map_open(g) ||
		     xfer_json_str(g, "buffers") || yajl_gen_array_open(g);

	for (size_t i = 0; !failed && i < d->nbufs; i++) {
		const struct xfer_file_buf *b = &d->bufs[i];

		failed = yajl_gen_map_open(g) ||
			 xfer_json_str(g, "file_path") ||
			 xfer_json_str(g, b->file_path) ||
			 xfer_json_str(g, "length") ||
			 xfer_json_u64(g, b->length) ||
			 xfer_json_str(g, "local_path_map") || gen_map(g, b) ||
			 yajl_gen_map_close(g);
	}
	failed = failed || yajl_gen_array_close(g) ||
		 xfer_json_str(g, "protocol") || xfer_json_str(g, "nvmeof") ||
		 xfer_json_str(g, "server_name") ||
		 xfer_json_str(g, d->server_name) ||
		 xfer_json_str(g, "xfer_data_port") ||
		 xfer_json_u64(g, d->data_port) || yajl_gen_map_close(g);
	return xfer_json_finish(g, failed, json, len);
}

static int map_fill(struct xfer_file_buf *b, yajl_val v, const char *where,
		    char *err, size_t errlen)
{
	size_t n;

	if (!v) /* written by hand without one: none */
		return 0;
	if (!YAJL_IS_OBJECT(v))
		return xfer_json_fail(err, errlen,
				      "%slocal_path_map: must be an object",
				      where);
	n = v->u.object.len;
	if (!n)
		return 0;
	b->map_host = calloc(n, sizeof(*b->map_host));
	b->map_path = calloc(n, sizeof(*b->map_path));
	if (!b->map_host || !b->map_path)
		return xfer_json_oom(err, errlen);
	b->nmap = n;
	for (size_t i = 0; i < n; i++) {
		const char *path = xfer_json_name(v->u.object.values[i]);

		if (!path || !v->u.object.keys[i][0])
			return xfer_json_fail(err, errlen,
					      "%slocal_path_map: entry %zu must "
					      "map a host to a path", where, i);
		b->map_host[i] = strdup(v->u.object.keys[i]);
		b->map_path[i] = strdup(path);
		if (!b->map_host[i] || !b->map_path[i])
			return xfer_json_oom(err, errlen);
	}
	return 0;
}

static int buf_fill(struct xfer_file_buf *b, size_t i, yajl_val v, char *err,
		    size_t errlen)
{
	char where[32];
	int ret;

	if (!YAJL_IS_OBJECT(v))
		return xfer_json_fail(err, errlen,
				      "buffers[%zu]: must be an object", i);
	snprintf(where, sizeof(where), "buffers[%zu].", i);
	ret = xfer_json_get_uint(v, where, "length", 1, UINT64_MAX, &b->length,
				 err, errlen);
	if (!ret)
		ret = xfer_json_get_name(v, where, "file_path", &b->file_path,
					 err, errlen);
	if (!ret)
		ret = map_fill(b, xfer_json_get(v, "local_path_map"), where,
			       err, errlen);
	return ret;
}

static int doc_fill(struct xfer_file_doc *d, yajl_val root, char *err,
		    size_t errlen)
{
	yajl_val bufs = xfer_json_get(root, "buffers");
	const char *proto;
	uint64_t total = 0, port = 0;
	int ret;

	ret = xfer_json_get_strv(root, "", "protocol", &proto, err, errlen);
	if (!ret && strcasecmp(proto, "nvmeof"))
		ret = xfer_json_fail(err, errlen, "protocol: not nvmeof");
	if (!ret)
		ret = xfer_json_get_name(root, "", "server_name",
					 &d->server_name, err, errlen);
	if (!ret && xfer_json_get(root, "xfer_data_port"))
		ret = xfer_json_get_uint(root, "", "xfer_data_port", 0,
					 UINT16_MAX, &port, err, errlen);
	if (ret)
		return ret;
	d->data_port = (uint16_t)port;
	if (!bufs || !YAJL_IS_ARRAY(bufs))
		return xfer_json_fail(err, errlen, "buffers: must be an array");
	if (bufs->u.array.len > XFER_FILE_MAX_FILES)
		return xfer_json_fail(err, errlen, "buffers: more than %d "
				      "entries", XFER_FILE_MAX_FILES);
	d->nbufs = bufs->u.array.len;
	d->bufs = calloc(d->nbufs ? d->nbufs : 1, sizeof(*d->bufs));
	if (!d->bufs)
		return xfer_json_oom(err, errlen);
	for (size_t i = 0; i < d->nbufs; i++) {
		ret = buf_fill(&d->bufs[i], i, bufs->u.array.values[i], err,
			       errlen);
		if (ret)
			return ret;
		if (d->bufs[i].length > UINT64_MAX - total)
			return xfer_json_fail(err, errlen, "buffers: the "
					      "lengths overflow");
		total += d->bufs[i].length;
	}
	return 0;
}

int xfer_file_doc_decode(const char *json, size_t len,
			 struct xfer_file_doc **out, char *err, size_t errlen)
{
	struct xfer_file_doc *d;
	yajl_val root;
	int ret;

	ret = xfer_json_parse(json, len, &root, err, errlen);
	if (ret)
		return ret;
	d = calloc(1, sizeof(*d));
	ret = d ? doc_fill(d, root, err, errlen) : xfer_json_oom(err, errlen);
	yajl_tree_free(root);
	if (ret) {
		xfer_file_doc_free(d);
		return ret;
	}
	*out = d;
	return 0;
}

void xfer_file_doc_free(struct xfer_file_doc *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->nbufs; i++) {
		struct xfer_file_buf *b = &d->bufs[i];

		for (size_t k = 0; k < b->nmap; k++) {
			free(b->map_host ? b->map_host[k] : NULL);
			free(b->map_path ? b->map_path[k] : NULL);
		}
		free(b->map_host);
		free(b->map_path);
		free(b->file_path);
	}
	free(d->bufs);
	free(d->server_name);
	free(d);
}

long xfer_file_doc_find(const struct xfer_file_doc *d, uint64_t off,
			uint64_t len, uint64_t *in_file)
{
	uint64_t start = 0;

	if (len == 0 || off + len < off)
		return -1;
	for (size_t i = 0; i < d->nbufs; start += d->bufs[i++].length)
		if (off >= start && off - start < d->bufs[i].length) {
			if (off - start + len > d->bufs[i].length)
				return -1;
			*in_file = off - start;
			return (long)i;
		}
	return -1;
}
