/*
 * Segments: the table of an engine's open segments; opening one by name
 * (rpc_meta, the host's address, the descriptor, the transport's state),
 * refreshing its descriptor and closing it, each asynchronous on the
 * control reactor, with blocking forms that wait for them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/dns.h>
#include <event2/util.h>

#include "core/desc_internal.h"
#include "core/engine_internal.h"
#include "util/json_internal.h"
#include "util/net_internal.h"
#include "util/wait_internal.h"

enum op_kind { OP_OPEN, OP_REFRESH, OP_CLOSE };

/* An open, refresh or close on its way, finishing on the control reactor;
 * in ss->ops (under ss->lock) until it does. */
struct xfer_segment_op {
	LIST_ENTRY(xfer_segment_op) link;
	enum op_kind kind;
	struct xfer_job job;
	struct xfer_segments *ss;
	/* An open's own new segment; a refreshed one (a use held); a
	 * closing one, NULL once destroyed. */
	struct xfer_segment *seg;
	struct evdns_getaddrinfo_request *dns;
	int err;                   /* what the name lookup found */
	bool resync;               /* refresh after events may be lost */
	xfer_segment_cb open_cb;   /* opens */
	xfer_done_cb done_cb;      /* refreshes, closes */
	void *arg;
};

void xfer_segments_init(struct xfer_segments *ss)
{
	memset(ss, 0, sizeof(*ss));
	pthread_mutex_init(&ss->lock, NULL);
	LIST_INIT(&ss->ops);
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

static struct xfer_segment *segment_new(struct xfer_segments *ss,
					const char *name)
{
	struct xfer_segment *seg = calloc(1, sizeof(*seg));

	if (!seg || !(seg->name = strdup(name))) {
		free(seg);
		return NULL;
	}
	seg->set = ss;
	pthread_rwlock_init(&seg->lock, NULL);
	return seg;
}

static struct xfer_segment_op *op_new(struct xfer_segments *ss,
				      enum op_kind kind, void *arg)
{
	struct xfer_segment_op *op = calloc(1, sizeof(*op));

	if (!op)
		return NULL;
	op->ss = ss;
	op->kind = kind;
	op->arg = arg;
	pthread_mutex_lock(&ss->lock);
	LIST_INSERT_HEAD(&ss->ops, op, link);
	pthread_mutex_unlock(&ss->lock);
	return op;
}

static void op_free(struct xfer_segment_op *op)
{
	pthread_mutex_lock(&op->ss->lock);
	LIST_REMOVE(op, link);
	pthread_mutex_unlock(&op->ss->lock);
	if (op->dns)
		evdns_getaddrinfo_cancel(op->dns);
	free(op);
}

void xfer_segments_release(struct xfer_segments *ss)
{
	for (size_t i = 0; i < ss->n; i++)
		if (ss->v[i]) {
			release_priv(ss->v[i], ss->v[i]->tp_priv);
			ss->v[i]->tp_priv = NULL;
		}
}

/* The operations still running never finish: their callbacks are not
 * called (the engine is being freed). */
void xfer_segments_fini(struct xfer_segments *ss)
{
	struct xfer_segment_op *op;

	while ((op = LIST_FIRST(&ss->ops))) {
		if (op->kind != OP_REFRESH) /* not in the table */
			segment_destroy(op->seg);
		op_free(op);
	}
	for (size_t i = 0; i < ss->n; i++)
		segment_destroy(ss->v[i]);
	free(ss->v);
	pthread_mutex_destroy(&ss->lock);
}

/* The part of @p name after "<kind>/" for a segment of another kind than
 * ram (the owner's name), else @p name. */
static const char *owner_of(const struct xfer_segment *seg)
{
	return seg->tp && seg->tp->ops->kind ? strchr(seg->name, '/') + 1
					      : seg->name;
}

bool xfer_segment_covers(struct xfer_segment *seg, uint64_t addr,
			 uint64_t len)
{
	struct xfer_buffers *bs = seg->set->buffers;
	bool ok;

	if (addr + len < addr)
		return false;
	if (seg->tp->ops->kind) {
		pthread_rwlock_rdlock(&seg->lock);
		ok = seg->tp->ops->covers(seg->tp, seg, addr, len);
		pthread_rwlock_unlock(&seg->lock);
		return ok;
	}
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

struct xfer_transport *xfer_segments_kind(struct xfer_segments *ss,
					  const char *kind)
{
	for (struct xfer_transport *const *t = ss->tps; t && *t; t++)
		if ((*t)->ops->kind && !strcmp((*t)->ops->kind, kind))
			return *t;
	return NULL;
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

/* ---- the table ---- */

/* The open segment named @p name, or NULL. Caller holds ss->lock. */
static struct xfer_segment *find_by_name(struct xfer_segments *ss,
					 const char *name)
{
	for (size_t i = 0; i < ss->n; i++)
		if (ss->v[i] && !strcmp(ss->v[i]->name, name))
			return ss->v[i];
	return NULL;
}

/* Put @p seg in the table. @return its id, or the id of one of the same
 * name that got there first (then @p seg is destroyed), or -ENOMEM. */
static int64_t insert(struct xfer_segments *ss, struct xfer_segment *seg)
{
	struct xfer_segment *old, **v;
	int64_t id;

	pthread_mutex_lock(&ss->lock);
	old = find_by_name(ss, seg->name);
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

void xfer_segment_get(struct xfer_segment *seg)
{
	atomic_fetch_add(&seg->users, 1);
}

static void closed(struct xfer_job *j)
{
	struct xfer_segment_op *op = container_of(j, struct xfer_segment_op,
						  job);

	op->done_cb(op->ss->e, 0, op->arg);
	op_free(op);
}

void xfer_segment_put(struct xfer_segment *seg)
{
	struct xfer_segment_op *op;

	if (atomic_fetch_sub(&seg->users, 1) != 1 ||
	    !atomic_load(&seg->closing))
		return;
	op = seg->close_op;
	op->seg = NULL;
	segment_destroy(seg);
	op->job.fn = closed; /* the callback runs on the control reactor */
	xfer_reactor_post(&op->ss->e->control, &op->job);
}

/* ---- opening ---- */

/* An open ends: the segment's id, or a negative errno. */
static void open_end(struct xfer_segment_op *op, int64_t id)
{
	if (id < 0)
		segment_destroy(op->seg);
	else if (op->seg)
		id = insert(op->ss, op->seg);
	op->seg = NULL;
	op->open_cb(op->ss->e, id, op->arg);
	op_free(op);
}

/* Take a document of another kind than ram for @p seg (served by
 * seg->tp); the old state goes back to the transport once replaced. */
static int adopt(struct xfer_segment *seg, const char *json, size_t len)
{
	void *old = seg->tp_priv;
	char why[128];
	int ret;

	ret = seg->tp->ops->adopt(seg->tp, seg, json, len, why, sizeof(why));
	if (ret)
		return xfer_error_set(seg->set->err, ret, "segment %s: bad "
				      "document: %s", seg->name, why);
	if (old && old != seg->tp_priv)
		release_priv(seg, old);
	return 0;
}

static void ram_done(int err, const char *json, size_t len, void *arg)
{
	struct xfer_segment_op *op = arg;
	struct xfer_segments *ss = op->ss;
	struct xfer_segment *seg = op->seg;
	int ret = err;

	if (err)
		ret = xfer_error_set(ss->err, err, "open %s: %s", seg->name,
				     strerror(-err));
	else if (seg->tp) /* another kind: its transport reads it */
		ret = adopt(seg, json, len);
	else
		ret = parse_desc(ss, seg->name, json, len, &seg->desc);
	if (!ret && !seg->tp) {
		seg->tp = find_transport(ss, seg->desc->protocol);
		ret = seg->tp->ops->open(seg->tp, seg);
		if (ret)
			xfer_error_set(ss->err, ret, "open %s: %s", seg->name,
				       strerror(-ret));
	}
	open_end(op, ret ? ret : 0);
}

/* The metadata kind of @p seg's document. */
static const char *kind_of(const struct xfer_segment *seg)
{
	return seg->tp && seg->tp->ops->kind ? seg->tp->ops->kind : "ram";
}

/* The host is known: fetch the descriptor (or document). */
static void fetch_ram(struct xfer_segment_op *op)
{
	if (xfer_meta_get(op->ss->meta, kind_of(op->seg), owner_of(op->seg),
			  ram_done, op))
		open_end(op, -ENOMEM);
}

static void after_lookup(struct xfer_job *j)
{
	struct xfer_segment_op *op = container_of(j, struct xfer_segment_op,
						  job);

	if (op->err) {
		xfer_error_set(op->ss->err, op->err, "open %s: host %s does "
			       "not resolve", op->seg->name, op->seg->host);
		open_end(op, op->err);
	} else {
		fetch_ram(op);
	}
}

/* The lookup may end inside evdns_getaddrinfo(): go on from a job. */
static void resolved(int result, struct evutil_addrinfo *ai, void *arg)
{
	struct xfer_segment_op *op = arg;
	struct xfer_segment *seg = op->seg;

	op->dns = NULL;
	if (result == EVUTIL_EAI_CANCEL)
		return; /* the engine is being freed */
	op->err = result || !ai ? -ENOENT : 0;
	if (!op->err) {
		memcpy(&seg->addr, ai->ai_addr, ai->ai_addrlen);
		seg->addrlen = ai->ai_addrlen;
	}
	if (ai)
		evutil_freeaddrinfo(ai);
	op->job.fn = after_lookup;
	xfer_reactor_post(&op->ss->e->control, &op->job);
}

static void rpc_done(int err, const char *json, size_t len, void *arg)
{
	static const struct evutil_addrinfo hints = {
		.ai_socktype = SOCK_STREAM,
	};
	struct xfer_segment_op *op = arg;
	struct xfer_segment *seg = op->seg;
	char why[128];
	int ret;

	if (err) {
		xfer_error_set(op->ss->err, err, "open %s: rpc_meta: %s",
			       seg->name, strerror(-err));
		open_end(op, err);
		return;
	}
	ret = xfer_rpc_meta_decode(json, len, &seg->host, &seg->rpc_port, why,
				   sizeof(why));
	if (ret) {
		xfer_error_set(op->ss->err, ret, "open %s: rpc_meta: %s",
			       seg->name, why);
		open_end(op, ret);
		return;
	}
	if (!xfer_net_parse(seg->host, 0, &seg->addr, &seg->addrlen)) {
		fetch_ram(op);
		return;
	}
	/* A name: resolved on the reactor, never blocking it. The request
	 * may finish at once, inside this call. */
	op->dns = evdns_getaddrinfo(op->ss->dns, seg->host, NULL, &hints,
				    resolved, op);
}

static void open_start(struct xfer_job *j)
{
	struct xfer_segment_op *op = container_of(j, struct xfer_segment_op,
						  job);
	struct xfer_segments *ss = op->ss;
	struct xfer_segment *seg = op->seg, *old;
	int64_t id = -1;

	pthread_mutex_lock(&ss->lock);
	old = find_by_name(ss, seg->name);
	if (old)
		id = old->id;
	pthread_mutex_unlock(&ss->lock);
	if (id >= 0) {
		segment_destroy(seg);
		op->seg = NULL;
		open_end(op, id);
	} else if (seg->local) {
		open_end(op, 0);
	} else if (xfer_meta_get(ss->meta, "rpc_meta", owner_of(seg), rpc_done,
				 op)) {
		open_end(op, -ENOMEM);
	}
}

/* A new segment for @p name, with its transport when that is known now:
 * the engine's own, or one serving the kind of a "<kind>/<owner>" name.
 * NULL with *@p ret -EINVAL, -EPROTONOSUPPORT or -ENOMEM. */
static struct xfer_segment *segment_for(struct xfer_engine *e,
					const char *name, int *ret)
{
	struct xfer_segments *ss = &e->segs;
	struct xfer_transport *kind = NULL;
	const char *slash = name ? strchr(name, '/') : NULL;
	struct xfer_segment *seg;
	char k[32];

	*ret = -EINVAL;
	if (!name || !*name || strlen(name) >= XFER_JSON_MAX_STR ||
	    (slash && (slash == name || !slash[1] ||
		       (size_t)(slash - name) >= sizeof(k)))) {
		xfer_error_set(&e->err, -EINVAL, "open: bad segment name");
		return NULL;
	}
	if (slash) { /* "<kind>/<owner>": a document of that kind */
		snprintf(k, sizeof(k), "%.*s", (int)(slash - name), name);
		kind = xfer_segments_kind(ss, k);
		if (!kind) {
			*ret = xfer_error_set(&e->err, -EPROTONOSUPPORT,
					      "open %s: no transport serves "
					      "kind %s", name, k);
			return NULL;
		}
	}
	*ret = -ENOMEM;
	seg = segment_new(ss, name);
	if (!seg)
		return NULL;
	seg->tp = kind;
	if (!strcmp(owner_of(seg), ss->own_name)) {
		seg->local = true;
		if (!kind)
			seg->tp = e->local;
	}
	return seg;
}

int xfer_segment_open_async(struct xfer_engine *e, const char *name,
			    xfer_segment_cb cb, void *arg)
{
	struct xfer_segment_op *op;
	int ret;

	if (!cb)
		return xfer_error_set(&e->err, -EINVAL, "open: no callback");
	op = op_new(&e->segs, OP_OPEN, arg);
	if (!op)
		return -ENOMEM;
	op->seg = segment_for(e, name, &ret);
	if (!op->seg) {
		op_free(op);
		return ret;
	}
	op->open_cb = cb;
	op->job.fn = open_start;
	xfer_reactor_post(&e->control, &op->job);
	return 0;
}

static void open_waited(struct xfer_engine *e, int64_t id, void *arg)
{
	(void)e;
	xfer_wait_done(arg, id);
}

int64_t xfer_segment_open(struct xfer_engine *e, const char *name)
{
	struct xfer_segments *ss = &e->segs;
	struct xfer_segment *seg;
	struct xfer_wait *w;
	int64_t id = -1;
	int ret;

	if (name) {
		pthread_mutex_lock(&ss->lock);
		seg = find_by_name(ss, name);
		if (seg)
			id = seg->id;
		pthread_mutex_unlock(&ss->lock);
		if (id >= 0)
			return id;
	}
	seg = segment_for(e, name, &ret);
	if (!seg)
		return ret;
	if (seg->local) /* the engine's own: nothing to wait for */
		return insert(ss, seg);
	segment_destroy(seg);
	if (xfer_reactor_on_thread(&e->control))
		return xfer_error_set(&e->err, -EDEADLK, "open: on the engine's "
				      "callback thread: use "
				      "xfer_segment_open_async()");
	w = xfer_wait_new();
	if (!w)
		return -ENOMEM;
	return xfer_wait_result(w, xfer_segment_open_async(e, name, open_waited,
							   w));
}

/* ---- refreshing ---- */

/* A refresh ends: 0, -ENOENT (the key is gone), or another error. */
static void refresh_end(struct xfer_segment_op *op, int ret)
{
	if (op->done_cb)
		op->done_cb(op->ss->e, ret, op->arg);
	xfer_segment_put(op->seg);
	op_free(op);
}

static void refresh_done(int err, const char *json, size_t len, void *arg)
{
	struct xfer_segment_op *op = arg;
	struct xfer_segment *seg = op->seg;
	struct xfer_desc *d = NULL, *old;
	void *old_priv;
	int ret = err;

	if (err == -ENOENT && !op->resync) {
		xfer_log(XFER_LOG_INFO, "segment %s is gone", seg->name);
		atomic_store(&seg->gone, true);
	} else if (err) {
		/* The server is away: keep serving from the cached one. */
		xfer_log(XFER_LOG_WARN, "segment %s: refresh: %s", seg->name,
			 strerror(-err));
	} else if (seg->tp->ops->kind) {
		pthread_rwlock_wrlock(&seg->lock);
		ret = adopt(seg, json, len);
		pthread_rwlock_unlock(&seg->lock);
		atomic_store(&seg->gone, false);
	} else if (!(ret = parse_desc(seg->set, seg->name, json, len, &d))) {
		pthread_rwlock_wrlock(&seg->lock);
		old = seg->desc;
		old_priv = seg->tp_priv;
		seg->desc = d;
		if (strcmp(d->protocol, old->protocol) ||
		    (ret = seg->tp->ops->open(seg->tp, seg))) {
			seg->desc = old; /* keep what worked */
			seg->tp_priv = old_priv;
			old = d;
			old_priv = NULL;
			ret = ret ? ret : -EPROTONOSUPPORT;
		}
		pthread_rwlock_unlock(&seg->lock);
		release_priv(seg, old_priv == seg->tp_priv ? NULL : old_priv);
		xfer_desc_free(old);
		atomic_store(&seg->gone, false);
	}
	refresh_end(op, ret);
}

/* On the control reactor: refetch @p seg's descriptor (a use is held). */
static void refresh_start(struct xfer_segment_op *op)
{
	if (op->seg->local)
		refresh_end(op, 0);
	else if (xfer_meta_get(op->ss->meta, kind_of(op->seg),
			       owner_of(op->seg), refresh_done, op))
		refresh_end(op, -ENOMEM);
}

void xfer_segments_refresh(struct xfer_segments *ss, const char *name)
{
	struct xfer_segment_op *op;

	pthread_mutex_lock(&ss->lock);
	for (size_t i = 0; i < ss->n; i++) {
		struct xfer_segment *seg = ss->v[i];

		if (!seg || seg->local || (name && strcmp(seg->name, name)))
			continue;
		pthread_mutex_unlock(&ss->lock); /* op_new takes it */
		op = op_new(ss, OP_REFRESH, NULL);
		pthread_mutex_lock(&ss->lock);
		if (!op) {
			xfer_log(XFER_LOG_WARN, "segment %s: refresh: %s",
				 seg->name, strerror(ENOMEM));
			continue;
		}
		xfer_segment_get(seg); /* until refresh_end */
		op->seg = seg;
		op->resync = name == NULL;
		pthread_mutex_unlock(&ss->lock); /* the get may fail at once */
		refresh_start(op);
		pthread_mutex_lock(&ss->lock);
	}
	pthread_mutex_unlock(&ss->lock);
}

static void refresh_job(struct xfer_job *j)
{
	refresh_start(container_of(j, struct xfer_segment_op, job));
}

int xfer_segment_refresh_async(struct xfer_engine *e, int64_t id,
			       xfer_done_cb cb, void *arg)
{
	struct xfer_segment_op *op;

	if (!cb)
		return -EINVAL;
	op = op_new(&e->segs, OP_REFRESH, arg);
	if (!op)
		return -ENOMEM;
	op->seg = xfer_segment_acquire(&e->segs, id);
	if (!op->seg) {
		op_free(op);
		return xfer_error_set(&e->err, -ENOENT, "refresh: no segment "
				      "%lld", (long long)id);
	}
	op->done_cb = cb;
	op->job.fn = refresh_job;
	xfer_reactor_post(&e->control, &op->job);
	return 0;
}

int xfer_segment_refresh(struct xfer_engine *e, int64_t id)
{
	struct xfer_wait *w;

	if (xfer_reactor_on_thread(&e->control))
		return -EDEADLK;
	w = xfer_wait_new();
	if (!w)
		return -ENOMEM;
	return (int)xfer_wait_result(w, xfer_segment_refresh_async(e, id,
								   xfer_wait_cb,
								   w));
}

/* ---- closing ---- */

/* Take @p id out of the table; @p busy_ok: even while it is used. */
static struct xfer_segment *take(struct xfer_segments *ss, int64_t id,
				 bool busy_ok, int *ret)
{
	struct xfer_segment *seg = NULL;

	*ret = -ENOENT;
	pthread_mutex_lock(&ss->lock);
	if (id >= 0 && (uint64_t)id < ss->n && ss->v[id]) {
		seg = ss->v[id];
		*ret = !busy_ok && atomic_load(&seg->users) ? -EBUSY : 0;
		if (!*ret)
			ss->v[id] = NULL;
	}
	pthread_mutex_unlock(&ss->lock);
	return *ret ? NULL : seg;
}

int xfer_segment_close(struct xfer_engine *e, int64_t id)
{
	int ret;
	struct xfer_segment *seg = take(&e->segs, id, false, &ret);

	segment_destroy(seg);
	return ret;
}

int xfer_segment_close_async(struct xfer_engine *e, int64_t id,
			     xfer_done_cb cb, void *arg)
{
	struct xfer_segment_op *op = cb ? op_new(&e->segs, OP_CLOSE, arg)
					: NULL;
	struct xfer_segment *seg;
	int ret;

	if (!op)
		return cb ? -ENOMEM : -EINVAL;
	op->done_cb = cb;
	seg = take(&e->segs, id, true, &ret);
	if (!seg) {
		op_free(op);
		return ret;
	}
	op->seg = seg;
	seg->close_op = op;
	atomic_fetch_add(&seg->users, 1);
	atomic_store(&seg->closing, true);
	xfer_segment_put(seg); /* destroys it now if nothing uses it */
	return 0;
}

int xfer_segment_buffer(struct xfer_engine *e, int64_t id, size_t index,
			uint64_t *addr, uint64_t *len, const char **location)
{
	struct xfer_segment *seg = xfer_segment_acquire(&e->segs, id);
	int ret = -ENOENT;

	if (!seg)
		return ret;
	if (seg->tp->ops->kind) {
		pthread_rwlock_rdlock(&seg->lock);
		ret = seg->tp->ops->buffer(seg->tp, seg, index, addr, len,
					   location);
		pthread_rwlock_unlock(&seg->lock);
	} else if (seg->local) {
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
	xfer_segment_put(seg);
	return ret;
}
