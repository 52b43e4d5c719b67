/*
 * Mooncake's C API: segment ids. Mooncake's are int32 and the own segment
 * is LOCAL_SEGMENT (0); xfer's are int64 in the order segments opened. A
 * table maps one to the other: id → (name, xfer id). A closed id keeps
 * its name (openSegment() gives it back); removeLocalSegment() drops
 * both, as Mooncake forgets the name.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "capi/capi_internal.h"

int te_segs_init(struct te *t)
{
	const char *own = xfer_engine_name(t->e);

	t->segs = calloc(1, sizeof(*t->segs));
	if (!t->segs)
		return -ENOMEM;
	t->nsegs = 1;
	t->segs[0].name = strdup(own);
	t->segs[0].xid = xfer_segment_open(t->e, own); /* nothing to wait for */
	return t->segs[0].name && t->segs[0].xid >= 0 ? 0 : -ENOMEM;
}

void te_segs_fini(struct te *t)
{
	for (size_t i = 0; i < t->nsegs; i++)
		free(t->segs[i].name);
	free(t->segs);
	t->segs = NULL;
	t->nsegs = 0;
}

void te_segs_reopen(struct te *t)
{
	char *own = strdup(xfer_engine_name(t->e));

	/* the write lock is held: no other call reads the table */
	if (own) {
		free(t->segs[0].name);
		t->segs[0].name = own;
	}
	for (size_t i = 0; i < t->nsegs; i++)
		if (t->segs[i].name && (i == 0 || t->segs[i].xid >= 0))
			t->segs[i].xid = xfer_segment_open(t->e,
							   t->segs[i].name);
}

int64_t te_seg_xid(struct te *t, int64_t id)
{
	int64_t xid = -1;

	pthread_mutex_lock(&t->seg_lock);
	if (id >= 0 && (uint64_t)id < t->nsegs && t->segs[id].name)
		xid = t->segs[id].xid;
	pthread_mutex_unlock(&t->seg_lock);
	return xid;
}

/* Mooncake's layout of a request, which programs built against its
 * header pass in (LP64). */
#if UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(struct transfer_request) == 40 &&
	       offsetof(struct transfer_request, source) == 8 &&
	       offsetof(struct transfer_request, target_id) == 16 &&
	       offsetof(struct transfer_request, file_id) == 20 &&
	       offsetof(struct transfer_request, target_offset) == 24 &&
	       offsetof(struct transfer_request, length) == 32,
	       "struct transfer_request is not Mooncake's");
_Static_assert(sizeof(struct transfer_status) == 16 &&
	       offsetof(struct transfer_status, transferred_bytes) == 8,
	       "struct transfer_status is not Mooncake's");
#endif

void te_requests(struct te *t, const struct transfer_request *in,
		 struct xfer_request *out, size_t n)
{
	pthread_mutex_lock(&t->seg_lock);
	for (size_t i = 0; i < n; i++) {
		int64_t id = in[i].target_id;
		const struct te_seg *s = id >= 0 && (uint64_t)id < t->nsegs &&
					 t->segs[id].name ? &t->segs[id] : NULL;

		out[i] = (struct xfer_request){
			/* another opcode stays another: an INVALID task */
			.opcode = (enum xfer_opcode)in[i].opcode,
			.source = in[i].source,
			.target_id = s ? s->xid : -1,
			.target_offset = s ? te_file_offset(t, s->name, s->xid,
							    in[i].file_id,
							    in[i].target_offset)
					   : in[i].target_offset,
			.length = (size_t)in[i].length,
		};
	}
	pthread_mutex_unlock(&t->seg_lock);
}

/* The id named @p name, or -1. Caller holds seg_lock. */
static int64_t find(struct te *t, const char *name)
{
	for (size_t i = 0; i < t->nsegs; i++)
		if (t->segs[i].name && !strcmp(t->segs[i].name, name))
			return (int64_t)i;
	return -1;
}

/* @p name with its leading '/' dropped, as Mooncake does; NULL if none
 * is left. */
static const char *trimmed(const char *name)
{
	while (name && *name == '/')
		name++;
	return name && *name ? name : NULL;
}

/* Record @p xid for @p name: its id, or -1 for want of memory. */
static int64_t record(struct te *t, const char *name, int64_t xid)
{
	struct te_seg *v;
	int64_t id;

	pthread_mutex_lock(&t->seg_lock);
	id = find(t, name);
	if (id < 0 && t->nsegs < INT32_MAX) {
		v = realloc(t->segs, (t->nsegs + 1) * sizeof(*v));
		if (v) {
			t->segs = v;
			v[t->nsegs].name = strdup(name);
			if (v[t->nsegs].name)
				id = (int64_t)t->nsegs++;
		}
	}
	if (id >= 0)
		t->segs[id].xid = xid;
	pthread_mutex_unlock(&t->seg_lock);
	return id;
}

segment_id_t openSegment(transfer_engine_t engine, const char *segment_name)
{
	const char *name = trimmed(segment_name);
	struct te *t = engine;
	struct xfer_engine *e;
	int64_t id = -1, xid;

	if (!name || !(e = te_enter(t)))
		return TE_ERR_INVALID_ARGUMENT;
	pthread_mutex_lock(&t->seg_lock);
	id = find(t, name);
	if (id >= 0 && t->segs[id].xid < 0)
		id = -1; /* closed: open it again */
	pthread_mutex_unlock(&t->seg_lock);
	if (id < 0) {
		/* the table is not locked while the descriptor comes */
		xid = xfer_segment_open(e, name);
		id = xid >= 0 ? record(t, name, xid) : -1;
	}
	te_leave(t);
	return id >= 0 ? (segment_id_t)id : TE_ERR_INVALID_ARGUMENT;
}

static void closed(struct xfer_engine *e, int result, void *arg)
{
	(void)e;
	(void)result;
	(void)arg;
}

/* Close segment @p id in xfer once its tasks are done; @p forget: drop
 * its name too. @return 0, or -1 for an id never given. */
static int close_id(struct te *t, struct xfer_engine *e, int64_t id,
		    bool forget)
{
	int64_t xid = -1;

	pthread_mutex_lock(&t->seg_lock);
	if (id < 0 || (uint64_t)id >= t->nsegs || !t->segs[id].name)
		id = -1;
	else if (id > 0) { /* the own segment stays */
		xid = t->segs[id].xid;
		t->segs[id].xid = -1;
		if (forget) {
			free(t->segs[id].name);
			t->segs[id].name = NULL;
		}
	}
	pthread_mutex_unlock(&t->seg_lock);
	if (xid >= 0)
		xfer_segment_close_async(e, xid, closed, NULL);
	return id < 0 ? TE_ERR_INVALID_ARGUMENT : 0;
}

segment_id_t openSegmentNoCache(transfer_engine_t engine,
				const char *segment_name)
{
	const char *name = trimmed(segment_name);
	struct te *t = engine;
	struct xfer_engine *e;
	int64_t id, xid = -1;
	int ret = 0;

	if (!name || !(e = te_enter(t)))
		return TE_ERR_INVALID_ARGUMENT;
	pthread_mutex_lock(&t->seg_lock);
	id = find(t, name);
	if (id > 0)
		xid = t->segs[id].xid;
	pthread_mutex_unlock(&t->seg_lock);
	if (xid >= 0)
		ret = xfer_segment_refresh(e, xid);
	/* Its owner changed protocol (installTransport()): an open segment
	 * keeps its transport, so it is opened anew under the same id. */
	if (ret == -EPROTONOSUPPORT) {
		close_id(t, e, id, false);
		ret = 0;
	}
	te_leave(t);
	if (ret)
		return te_err(ret);
	return openSegment(engine, name);
}

int closeSegment(transfer_engine_t engine, segment_id_t segment_id)
{
	struct te *t = engine;
	struct xfer_engine *e = te_enter(t);
	int ret;

	if (!e)
		return TE_ERR_INVALID_ARGUMENT;
	ret = close_id(t, e, segment_id, false);
	te_leave(t);
	return ret;
}

int removeLocalSegment(transfer_engine_t engine, const char *segment_name)
{
	const char *name = trimmed(segment_name);
	struct te *t = engine;
	struct xfer_engine *e;
	int64_t id;

	if (!name || !(e = te_enter(t)))
		return TE_ERR_INVALID_ARGUMENT;
	pthread_mutex_lock(&t->seg_lock);
	id = find(t, name);
	pthread_mutex_unlock(&t->seg_lock);
	if (id > 0)
		close_id(t, e, id, true);
	te_leave(t);
	return 0;
}

int syncSegmentCache(transfer_engine_t engine)
{
	struct te *t = engine;
	struct xfer_engine *e = te_enter(t);
	int64_t *xids;
	size_t n = 0;
	int ret = 0, r;

	if (!e)
		return TE_ERR_INVALID_ARGUMENT;
	pthread_mutex_lock(&t->seg_lock);
	xids = malloc(t->nsegs * sizeof(*xids));
	for (size_t i = 1; xids && i < t->nsegs; i++)
		if (t->segs[i].name && t->segs[i].xid >= 0)
			xids[n++] = t->segs[i].xid;
	pthread_mutex_unlock(&t->seg_lock);
	if (!xids)
		ret = TE_ERR_MEMORY;
	/* a key that is gone is news, not an error: its transfers fail */
	for (size_t i = 0; i < n; i++)
		if ((r = xfer_segment_refresh(e, xids[i])) && r != -ENOENT)
			ret = TE_ERR_METADATA;
	free(xids);
	te_leave(t);
	return ret;
}
