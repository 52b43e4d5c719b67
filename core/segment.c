/* Opening segments by name through the metadata store; the segment table. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"
#include "net_internal.h"
#include "store.h"
#include "transport.h"

/* Hand a transport's per-segment state back to it. */
static void release_priv(struct xfer_segment *seg, void *priv)
{
	if (priv && seg->ops->release)
		seg->ops->release(seg->tp, priv);
}

void xfer_segment_destroy(struct xfer_segment *seg)
{
	if (!seg)
		return;
	release_priv(seg, seg->tp_priv);
	xfer_desc_free(seg->desc);
	pthread_rwlock_destroy(&seg->lock);
	free(seg->name);
	free(seg->host);
	free(seg);
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

bool xfer_segment_covers(struct xfer_segment *seg, uint64_t addr,
			 uint64_t len)
{
	bool ok;

	if (addr + len < addr)
		return false;
	if (seg->local) {
		struct xfer_engine *e = seg->e;

		pthread_rwlock_rdlock(&e->buffers.lock);
		ok = xfer_buffers_find(&e->buffers, addr, len, false) != NULL;
		pthread_rwlock_unlock(&e->buffers.lock);
		return ok;
	}
	pthread_rwlock_rdlock(&seg->lock);
	ok = xfer_desc_find_buf(seg->desc, addr, len) != NULL;
	pthread_rwlock_unlock(&seg->lock);
	return ok;
}

static int cmp_buf(const void *a, const void *b)
{
	const struct xfer_desc_buf *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* The started transport named @p protocol, as an index; -1 if none. */
static int find_transport(struct xfer_engine *e, const char *protocol)
{
	for (int i = 0; xfer_transports[i]; i++)
		if (e->tps[i] && !strcmp(xfer_transports[i]->name, protocol))
			return i;
	return -1;
}

/* Decode and check a descriptor from the store; sorted for lookups. */
static int parse_desc(struct xfer_engine *e, const char *name,
		      const char *json, size_t len, struct xfer_desc **out)
{
	struct xfer_desc *d;
	char err[128];
	int ret;

	ret = xfer_desc_decode(json, len, &d, err, sizeof(err));
	if (ret)
		return xfer_engine_error(e, ret, "segment %s: bad descriptor: %s",
					 name, err);
	if (find_transport(e, d->protocol) < 0) {
		ret = xfer_engine_error(e, -EPROTONOSUPPORT,
					"segment %s: protocol %s not supported",
					name, d->protocol);
		goto err_free;
	}
	if (d->nbufs > 1)
		qsort(d->bufs, d->nbufs, sizeof(*d->bufs), cmp_buf);
	for (size_t i = 1; i < d->nbufs; i++)
		if (d->bufs[i - 1].addr + d->bufs[i - 1].length > d->bufs[i].addr) {
			ret = xfer_engine_error(e, -EPROTO, "segment %s: buffers "
						"overlap", name);
			goto err_free;
		}
	*out = d;
	return 0;

err_free:
	xfer_desc_free(d);
	return ret;
}

/* Get @p kind/@p name from the store, blocking. */
static int store_get(struct xfer_engine *e, const char *kind,
		     const char *name, char **value, size_t *len)
{
	char *key = xfer_meta_key(e, kind, name);
	int ret;

	if (!key)
		return -ENOMEM;
	ret = xfer_meta_call(e, XFER_META_GET, key, NULL, 0, value, len);
	free(key);
	return ret;
}

/* Fetch a remote segment's location and descriptor; pick its transport. */
static int fetch_remote(struct xfer_engine *e, struct xfer_segment *seg)
{
	char err[128], *json;
	size_t len;
	int ret, tp;

	ret = store_get(e, "rpc_meta/", seg->name, &json, &len);
	if (ret)
		return xfer_engine_error(e, ret, "open %s: rpc_meta: %s",
					 seg->name, strerror(-ret));
	ret = xfer_rpc_meta_decode(json, len, &seg->host, &seg->rpc_port, err,
				   sizeof(err));
	free(json);
	if (ret)
		return xfer_engine_error(e, ret, "open %s: rpc_meta: %s",
					 seg->name, err);
	ret = xfer_net_resolve(seg->host, 0, &seg->addr, &seg->addrlen);
	if (ret)
		return xfer_engine_error(e, ret, "open %s: host %s does not "
					 "resolve", seg->name, seg->host);
	ret = store_get(e, "ram/", seg->name, &json, &len);
	if (ret)
		return xfer_engine_error(e, ret, "open %s: %s", seg->name,
					 strerror(-ret));
	ret = parse_desc(e, seg->name, json, len, &seg->desc);
	free(json);
	if (ret)
		return ret;
	tp = find_transport(e, seg->desc->protocol);
	seg->ops = xfer_transports[tp];
	seg->tp = e->tps[tp];
	ret = seg->ops->open(seg->tp, seg);
	if (ret)
		return xfer_engine_error(e, ret, "open %s: %s", seg->name,
					 strerror(-ret));
	return 0;
}

/* ---- refresh after a watch event, on the control reactor ---- */

/* A refresh in flight; @resync: after a possible loss of events, when a
 * missing key may just not be republished yet. */
struct refresh {
	struct xfer_segment *seg;
	bool resync;
};

static void refresh_done(int err, const char *json, size_t len, void *arg)
{
	struct refresh *rf = arg;
	struct xfer_segment *seg = rf->seg;
	struct xfer_desc *d = NULL, *old;
	void *old_priv;

	if (err == -ENOENT && !rf->resync) {
		xfer_log(XFER_LOG_INFO, "segment %s is gone", seg->name);
		atomic_store(&seg->gone, true);
	} else if (err) {
		/* The server is away: keep serving from the cached one. */
		xfer_log(XFER_LOG_WARN, "segment %s: refresh: %s", seg->name,
			 strerror(-err));
	} else if (!parse_desc(seg->e, seg->name, json, len, &d)) {
		pthread_rwlock_wrlock(&seg->lock);
		old = seg->desc;
		old_priv = seg->tp_priv;
		seg->desc = d;
		if (strcmp(d->protocol, old->protocol) ||
		    seg->ops->open(seg->tp, seg)) {
			seg->desc = old; /* keep what worked */
			seg->tp_priv = old_priv;
			old = d;
			old_priv = NULL;
		}
		pthread_rwlock_unlock(&seg->lock);
		release_priv(seg, old_priv == seg->tp_priv ? NULL : old_priv);
		xfer_desc_free(old);
		atomic_store(&seg->gone, false);
	}
	atomic_fetch_sub(&seg->users, 1);
	free(rf);
}

void xfer_segment_refresh(struct xfer_engine *e, const char *name)
{
	struct xfer_segment **todo;
	size_t n = 0;

	pthread_mutex_lock(&e->seg_lock);
	todo = calloc(e->nsegs ? e->nsegs : 1, sizeof(*todo));
	for (size_t i = 0; todo && i < e->nsegs; i++) {
		struct xfer_segment *seg = e->segs[i];

		if (seg && !seg->local && (!name || !strcmp(seg->name, name))) {
			atomic_fetch_add(&seg->users, 1); /* until refresh_done */
			todo[n++] = seg;
		}
	}
	pthread_mutex_unlock(&e->seg_lock);
	for (size_t i = 0; i < n; i++) {
		char *key = xfer_meta_key(e, "ram/", todo[i]->name);
		struct refresh *rf = malloc(sizeof(*rf));

		if (!key || !rf) {
			xfer_log(XFER_LOG_WARN, "segment %s: refresh: %s",
				 todo[i]->name, strerror(ENOMEM));
			atomic_fetch_sub(&todo[i]->users, 1);
			free(rf);
		} else {
			*rf = (struct refresh){ todo[i], name == NULL };
			e->store->ops->get(e->store, key, refresh_done, rf);
		}
		free(key);
	}
	free(todo);
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
	seg->e = e;
	pthread_rwlock_init(&seg->lock, NULL);
	if (!strcmp(name, e->name)) {
		seg->local = true;
		seg->ops = &xfer_local_ops;
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
	} else {
		pthread_rwlock_rdlock(&seg->lock);
		if (index < seg->desc->nbufs) {
			*addr = seg->desc->bufs[index].addr;
			*len = seg->desc->bufs[index].length;
			if (location)
				*location = seg->desc->bufs[index].name;
			ret = 0;
		}
		pthread_rwlock_unlock(&seg->lock);
	}
	atomic_fetch_sub(&seg->users, 1);
	return ret;
}
