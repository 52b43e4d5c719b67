/* Opening segments by name through the metadata store; the segment table. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "store.h"
#include "transport.h"

#define RPC_META_PREFIX "mooncake/rpc_meta/"
#define RAM_PREFIX "mooncake/ram/"

void xfer_segment_destroy(struct xfer_segment *seg)
{
	if (!seg)
		return;
	xfer_desc_free(seg->desc);
	free(seg->name);
	free(seg->host);
	free(seg);
}

bool xfer_segment_covers(const struct xfer_segment *seg, uint64_t addr,
			 uint64_t len)
{
	const struct xfer_desc *d = seg->desc;
	size_t lo = 0, hi;

	if (addr + len < addr)
		return false;
	if (seg->local) {
		struct xfer_engine *e = seg->tp_priv;
		bool ok;

		pthread_rwlock_rdlock(&e->buffers.lock);
		ok = xfer_buffers_find(&e->buffers, addr, len, false) != NULL;
		pthread_rwlock_unlock(&e->buffers.lock);
		return ok;
	}
	/* Buffers are sorted by address at open: find the last start <= addr. */
	hi = d->nbufs;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (d->bufs[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo > 0 && addr + len <= d->bufs[lo - 1].addr +
				       d->bufs[lo - 1].length;
}

static int cmp_buf(const void *a, const void *b)
{
	const struct xfer_desc_buf *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Get @p prefix + @p name from the store. */
static int store_get(struct xfer_engine *e, const char *prefix,
		     const char *name, char **value, size_t *len)
{
	size_t n = strlen(prefix) + strlen(name) + 1;
	char *key = malloc(n);
	int ret;

	if (!key)
		return -ENOMEM;
	snprintf(key, n, "%s%s", prefix, name);
	ret = e->store->ops->get(e->store, key, value, len);
	free(key);
	return ret;
}

/* Fetch a remote segment's location and descriptor; pick its transport. */
static int fetch_remote(struct xfer_engine *e, struct xfer_segment *seg)
{
	char err[128], *json;
	uint16_t port;
	size_t len;
	int ret;

	ret = store_get(e, RPC_META_PREFIX, seg->name, &json, &len);
	if (ret)
		return xfer_engine_error(e, ret, "open %s: rpc_meta: %s",
					 seg->name, strerror(-ret));
	ret = xfer_rpc_meta_decode(json, len, &seg->host, &port, err,
				   sizeof(err));
	free(json);
	if (ret)
		return xfer_engine_error(e, ret, "open %s: rpc_meta: %s",
					 seg->name, err);
	ret = store_get(e, RAM_PREFIX, seg->name, &json, &len);
	if (ret)
		return xfer_engine_error(e, ret, "open %s: %s", seg->name,
					 strerror(-ret));
	ret = xfer_desc_decode(json, len, &seg->desc, err, sizeof(err));
	free(json);
	if (ret)
		return xfer_engine_error(e, ret, "open %s: bad descriptor: %s",
					 seg->name, err);
	if (strcmp(seg->desc->protocol, xfer_tcp_ops.name))
		return xfer_engine_error(e, -EPROTONOSUPPORT,
					 "open %s: protocol %s not supported",
					 seg->name, seg->desc->protocol);
	qsort(seg->desc->bufs, seg->desc->nbufs, sizeof(*seg->desc->bufs),
	      cmp_buf);
	for (size_t i = 1; i < seg->desc->nbufs; i++)
		if (seg->desc->bufs[i - 1].addr + seg->desc->bufs[i - 1].length >
		    seg->desc->bufs[i].addr)
			return xfer_engine_error(e, -EPROTO, "open %s: buffers "
						 "overlap", seg->name);
	seg->ops = &xfer_tcp_ops;
	seg->tp = e->tcp;
	ret = seg->ops->open(seg->tp, seg);
	if (ret)
		return xfer_engine_error(e, ret, "open %s: %s", seg->name,
					 strerror(-ret));
	return 0;
}

/* The open segment named @p name, or NULL. Caller holds seg_lock. */
static struct xfer_segment *find_by_name(struct xfer_engine *e,
					 const char *name)
{
	for (size_t i = 0; i < e->nsegs; i++)
		if (e->segs[i] && !strcmp(e->segs[i]->name, name))
			return e->segs[i];
	return NULL;
}

int64_t xfer_segment_open(struct xfer_engine *e, const char *name)
{
	struct xfer_segment *seg, *old, **v;
	int64_t id;
	int ret;

	if (!name || !*name || strlen(name) >= XFER_DESC_MAX_STR)
		return xfer_engine_error(e, -EINVAL, "open: bad segment name");
	pthread_mutex_lock(&e->seg_lock);
	old = find_by_name(e, name);
	pthread_mutex_unlock(&e->seg_lock);
	if (old)
		return old->id;

	seg = calloc(1, sizeof(*seg));
	if (!seg || !(seg->name = strdup(name))) {
		free(seg);
		return -ENOMEM;
	}
	if (!strcmp(name, e->name)) {
		seg->local = true;
		seg->ops = &xfer_local_ops;
		seg->tp_priv = e;
	} else {
		ret = fetch_remote(e, seg);
		if (ret) {
			xfer_segment_destroy(seg);
			return ret;
		}
	}

	pthread_mutex_lock(&e->seg_lock);
	old = find_by_name(e, name); /* another thread may have won */
	if (old) {
		id = old->id;
		goto out_unlock;
	}
	v = realloc(e->segs, (e->nsegs + 1) * sizeof(*v));
	if (!v) {
		id = -ENOMEM;
		goto out_unlock;
	}
	e->segs = v;
	seg->id = (int64_t)e->nsegs;
	e->segs[e->nsegs++] = seg;
	seg = NULL;
	id = e->segs[e->nsegs - 1]->id;
out_unlock:
	pthread_mutex_unlock(&e->seg_lock);
	xfer_segment_destroy(seg);
	return id;
}

struct xfer_segment *xfer_engine_segment_acquire(struct xfer_engine *e,
						 int64_t id)
{
	struct xfer_segment *seg = NULL;

	pthread_mutex_lock(&e->seg_lock);
	if (id >= 0 && (uint64_t)id < e->nsegs && e->segs[id]) {
		seg = e->segs[id];
		atomic_fetch_add(&seg->users, 1);
	}
	pthread_mutex_unlock(&e->seg_lock);
	return seg;
}

int xfer_segment_close(struct xfer_engine *e, int64_t id)
{
	struct xfer_segment *seg = NULL;
	int ret = -ENOENT;

	pthread_mutex_lock(&e->seg_lock);
	if (id >= 0 && (uint64_t)id < e->nsegs && e->segs[id]) {
		seg = e->segs[id];
		ret = atomic_load(&seg->users) ? -EBUSY : 0;
		if (!ret)
			e->segs[id] = NULL;
	}
	pthread_mutex_unlock(&e->seg_lock);
	if (!ret)
		xfer_segment_destroy(seg);
	return ret;
}

int xfer_segment_buffer(struct xfer_engine *e, int64_t id, size_t index,
			uint64_t *addr, uint64_t *len, const char **location)
{
	struct xfer_segment *seg = xfer_engine_segment_acquire(e, id);
	int ret = -ENOENT;

	if (!seg)
		return ret;
	if (seg->local) {
		pthread_rwlock_rdlock(&e->buffers.lock);
		if (index < e->buffers.n) {
			struct xfer_buffer *b = e->buffers.v[index];

			*addr = b->addr;
			*len = b->len;
			if (location)
				*location = b->location;
			ret = 0;
		}
		pthread_rwlock_unlock(&e->buffers.lock);
	} else if (index < seg->desc->nbufs) {
		*addr = seg->desc->bufs[index].addr;
		*len = seg->desc->bufs[index].length;
		if (location)
			*location = seg->desc->bufs[index].name;
		ret = 0;
	}
	atomic_fetch_sub(&seg->users, 1);
	return ret;
}
