/* Opening segments by name through the metadata store; the segment table. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/desc_internal.h"
#include "core/engine_internal.h"
#include "core/json_internal.h"
#include "core/net_internal.h"

void xfer_segments_init(struct xfer_segments *ss)
{
	memset(ss, 0, sizeof(*ss));
	pthread_mutex_init(&ss->lock, NULL);
}

/* Hand a transport's per-segment state back to it. */
static void release_priv(struct xfer_segment *seg, void *priv)
{
	if (priv)
		seg->tp->ops->release(seg->tp, priv);
}

static void segment_destroy(struct xfer_segment *seg)
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

void xfer_segments_release(struct xfer_segments *ss)
{
	for (size_t i = 0; i < ss->n; i++)
		if (ss->v[i]) {
			release_priv(ss->v[i], ss->v[i]->tp_priv);
			ss->v[i]->tp_priv = NULL;
		}
}

void xfer_segments_fini(struct xfer_segments *ss)
{
	for (size_t i = 0; i < ss->n; i++)
		segment_destroy(ss->v[i]);
	free(ss->v);
	pthread_mutex_destroy(&ss->lock);
}

bool xfer_segment_covers(struct xfer_segment *seg, uint64_t addr,
			 uint64_t len)
{
	struct xfer_buffers *bs = seg->set->buffers;
	bool ok;

	if (addr + len < addr)
		return false;
	if (seg->local) {
		pthread_rwlock_rdlock(&bs->lock);
		ok = xfer_buffers_find(bs, addr, len, false) != NULL;
		pthread_rwlock_unlock(&bs->lock);
		return ok;
	}
	pthread_rwlock_rdlock(&seg->lock);
	ok = xfer_desc_find_buf(seg->desc, addr, len) != NULL;
	pthread_rwlock_unlock(&seg->lock);
	return ok;
}

/* The started transport a descriptor may name @p protocol; NULL if none. */
static struct xfer_transport *find_transport(struct xfer_segments *ss,
					     const char *protocol)
{
	for (struct xfer_transport *const *t = ss->tps; *t; t++)
		if (!((*t)->ops->flags & XFER_TP_LOCAL) &&
		    !strcmp((*t)->ops->name, protocol))
			return *t;
	return NULL;
}

/* Decode and check a descriptor from the store; sorted for lookups. */
static int parse_desc(struct xfer_segments *ss, const char *name,
		      const char *json, size_t len, struct xfer_desc **out)
{
	struct xfer_desc *d;
	char err[128];
	int ret;

	ret = xfer_desc_decode(json, len, ss->codecs, &d, err, sizeof(err));
	if (ret)
		return xfer_error_set(ss->err, ret,
				      "segment %s: bad descriptor: %s", name,
				      err);
	if (!find_transport(ss, d->protocol)) {
		ret = xfer_error_set(ss->err, -EPROTONOSUPPORT,
				     "segment %s: protocol %s not supported",
				     name, d->protocol);
		goto err_free;
	}
	if (xfer_desc_sort(d)) {
		ret = xfer_error_set(ss->err, -EPROTO,
				     "segment %s: buffers overlap", name);
		goto err_free;
	}
	*out = d;
	return 0;

err_free:
	xfer_desc_free(d);
	return ret;
}

/* Fetch a remote segment's location and descriptor; pick its transport. */
static int fetch_remote(struct xfer_segments *ss, struct xfer_segment *seg)
{
	char err[128], *json;
	size_t len;
	int ret;

	ret = xfer_meta_get_sync(ss->meta, "rpc_meta/", seg->name, &json, &len);
	if (ret)
		return xfer_error_set(ss->err, ret, "open %s: rpc_meta: %s",
				      seg->name, strerror(-ret));
	ret = xfer_rpc_meta_decode(json, len, &seg->host, &seg->rpc_port, err,
				   sizeof(err));
	free(json);
	if (ret)
		return xfer_error_set(ss->err, ret, "open %s: rpc_meta: %s",
				      seg->name, err);
	ret = xfer_net_resolve(seg->host, 0, &seg->addr, &seg->addrlen);
	if (ret)
		return xfer_error_set(ss->err, ret, "open %s: host %s does not "
				      "resolve", seg->name, seg->host);
	ret = xfer_meta_get_sync(ss->meta, "ram/", seg->name, &json, &len);
	if (ret)
		return xfer_error_set(ss->err, ret, "open %s: %s", seg->name,
				      strerror(-ret));
	ret = parse_desc(ss, seg->name, json, len, &seg->desc);
	free(json);
	if (ret)
		return ret;
	seg->tp = find_transport(ss, seg->desc->protocol);
	ret = seg->tp->ops->open(seg->tp, seg);
	if (ret)
		return xfer_error_set(ss->err, ret, "open %s: %s", seg->name,
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
	} else if (!parse_desc(seg->set, seg->name, json, len, &d)) {
		pthread_rwlock_wrlock(&seg->lock);
		old = seg->desc;
		old_priv = seg->tp_priv;
		seg->desc = d;
		if (strcmp(d->protocol, old->protocol) ||
		    seg->tp->ops->open(seg->tp, seg)) {
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

void xfer_segments_refresh(struct xfer_segments *ss, const char *name)
{
	struct xfer_segment **todo;
	size_t n = 0;

	pthread_mutex_lock(&ss->lock);
	todo = calloc(ss->n ? ss->n : 1, sizeof(*todo));
	for (size_t i = 0; todo && i < ss->n; i++) {
		struct xfer_segment *seg = ss->v[i];

		if (seg && !seg->local && (!name || !strcmp(seg->name, name))) {
			atomic_fetch_add(&seg->users, 1); /* until refresh_done */
			todo[n++] = seg;
		}
	}
	pthread_mutex_unlock(&ss->lock);
	for (size_t i = 0; i < n; i++) {
		struct refresh *rf = malloc(sizeof(*rf));

		if (rf)
			*rf = (struct refresh){ todo[i], name == NULL };
		if (!rf || xfer_meta_get(ss->meta, "ram/", todo[i]->name,
					 refresh_done, rf)) {
			xfer_log(XFER_LOG_WARN, "segment %s: refresh: %s",
				 todo[i]->name, strerror(ENOMEM));
			atomic_fetch_sub(&todo[i]->users, 1);
			free(rf);
		}
	}
	free(todo);
}

/* ---- the public calls ---- */

/* The open segment named @p name, or NULL. Caller holds ss->lock. */
static struct xfer_segment *find_by_name(struct xfer_segments *ss,
					 const char *name)
{
	for (size_t i = 0; i < ss->n; i++)
		if (ss->v[i] && !strcmp(ss->v[i]->name, name))
			return ss->v[i];
	return NULL;
}

int64_t xfer_segment_open(struct xfer_engine *e, const char *name)
{
	struct xfer_segments *ss = &e->segs;
	struct xfer_segment *seg, *old, **v;
	int64_t id;
	int ret;

	if (!name || !*name || strlen(name) >= XFER_JSON_MAX_STR)
		return xfer_error_set(&e->err, -EINVAL, "open: bad segment name");
	pthread_mutex_lock(&ss->lock);
	old = find_by_name(ss, name);
	pthread_mutex_unlock(&ss->lock);
	if (old)
		return old->id;

	seg = calloc(1, sizeof(*seg));
	if (!seg || !(seg->name = strdup(name))) {
		free(seg);
		return -ENOMEM;
	}
	seg->set = ss;
	pthread_rwlock_init(&seg->lock, NULL);
	if (!strcmp(name, ss->own_name)) {
		seg->local = true;
		seg->tp = e->local;
	} else {
		ret = fetch_remote(ss, seg);
		if (ret) {
			segment_destroy(seg);
			return ret;
		}
	}

	pthread_mutex_lock(&ss->lock);
	old = find_by_name(ss, name); /* another thread may have won */
	if (old) {
		id = old->id;
		goto out_unlock;
	}
	v = realloc(ss->v, (ss->n + 1) * sizeof(*v));
	if (!v) {
		id = -ENOMEM;
		goto out_unlock;
	}
	ss->v = v;
	seg->id = (int64_t)ss->n;
	ss->v[ss->n++] = seg;
	id = seg->id;
	seg = NULL;
out_unlock:
	pthread_mutex_unlock(&ss->lock);
	segment_destroy(seg);
	return id;
}

struct xfer_segment *xfer_segment_acquire(struct xfer_segments *ss,
					  int64_t id)
{
	struct xfer_segment *seg = NULL;

	pthread_mutex_lock(&ss->lock);
	if (id >= 0 && (uint64_t)id < ss->n && ss->v[id]) {
		seg = ss->v[id];
		atomic_fetch_add(&seg->users, 1);
	}
	pthread_mutex_unlock(&ss->lock);
	return seg;
}

int xfer_segment_close(struct xfer_engine *e, int64_t id)
{
	struct xfer_segments *ss = &e->segs;
	struct xfer_segment *seg = NULL;
	int ret = -ENOENT;

	pthread_mutex_lock(&ss->lock);
	if (id >= 0 && (uint64_t)id < ss->n && ss->v[id]) {
		seg = ss->v[id];
		ret = atomic_load(&seg->users) ? -EBUSY : 0;
		if (!ret)
			ss->v[id] = NULL;
	}
	pthread_mutex_unlock(&ss->lock);
	if (!ret)
		segment_destroy(seg);
	return ret;
}

int xfer_segment_buffer(struct xfer_engine *e, int64_t id, size_t index,
			uint64_t *addr, uint64_t *len, const char **location)
{
	struct xfer_segment *seg = xfer_segment_acquire(&e->segs, id);
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
