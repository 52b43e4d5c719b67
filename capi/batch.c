/*
 * Mooncake's C API: batch ids. An id is a slot of the table and the
 * slot's generation, (gen << 32) | index, so a freed id is never taken
 * for a later batch. Every batch gets a completion callback at birth:
 * when freeBatchID() finds every task terminal but the batch not yet
 * free to go (its completion, or its notification, on the way), the
 * slot becomes a zombie and the callback frees it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capi/capi_internal.h"

#define SLOT(id) ((size_t)((id) & 0xffffffffu))
#define GEN(id) ((uint32_t)((id) >> 32))

/* The batch of @p id, or NULL. Caller holds batch_lock. */
static struct xfer_batch *lookup(struct te *t, batch_id_t id)
{
	struct te_slot *s;

	if (SLOT(id) >= t->nslots)
		return NULL;
	s = &t->slots[SLOT(id)];
	return s->gen == GEN(id) && !s->zombie ? s->b : NULL;
}

/* The batch of @p id, or NULL; *@p cap (if not NULL) gets its capacity. */
static struct xfer_batch *batch_of(struct te *t, batch_id_t id, size_t *cap)
{
	struct xfer_batch *b;

	pthread_rwlock_rdlock(&t->batch_lock);
	b = lookup(t, id);
	if (b && cap)
		*cap = t->slots[SLOT(id)].cap;
	pthread_rwlock_unlock(&t->batch_lock);
	return b;
}

/* Free zombie @p s's batch if it can go now. Caller holds batch_lock
 * for writing. */
static void reap(struct te *t, struct te_slot *s)
{
	if (!xfer_batch_free(s->b)) {
		s->b = NULL;
		s->zombie = false;
		s->gen++;
		t->live--;
	}
}

/* The slot holding zombie @p b, or NULL. Caller holds batch_lock. */
static struct te_slot *zombie_of(struct te *t, struct xfer_batch *b)
{
	for (size_t i = 0; i < t->nslots; i++)
		if (t->slots[i].b == b)
			return t->slots[i].zombie ? &t->slots[i] : NULL;
	return NULL;
}

/* Every batch's completion; a zombie's is its last: it frees it. */
static void batch_done(struct xfer_batch *b, enum xfer_status outcome,
		       void *arg)
{
	struct te *t = arg;
	struct te_slot *s;

	(void)outcome;
	pthread_rwlock_rdlock(&t->batch_lock);
	s = zombie_of(t, b);
	pthread_rwlock_unlock(&t->batch_lock);
	if (!s)
		return;
	pthread_rwlock_wrlock(&t->batch_lock);
	s = zombie_of(t, b); /* only this callback and the end free it */
	if (s && !t->ending) /* te_batches_fini() holds it: it frees it */
		reap(t, s);
	pthread_rwlock_unlock(&t->batch_lock);
}

/* A free slot (the table grown if need be), or -1. Caller holds
 * batch_lock for writing. */
static long free_slot(struct te *t)
{
	size_t i, n = t->nslots ? 2 * t->nslots : 16;
	struct te_slot *v;

	for (i = 0; i < t->nslots; i++)
		if (!t->slots[i].b && t->slots[i].gen < UINT32_MAX)
			return (long)i;
	if (t->nslots >= UINT32_MAX / 2)
		return -1;
	v = realloc(t->slots, n * sizeof(*v));
	if (!v)
		return -1;
	for (i = t->nslots; i < n; i++)
		v[i] = (struct te_slot){ .gen = 1 };
	t->slots = v;
	i = t->nslots;
	t->nslots = n;
	return (long)i;
}

batch_id_t allocateBatchID(transfer_engine_t engine, size_t batch_size)
{
	struct te *t = engine;
	struct xfer_engine *e = te_enter(t);
	batch_id_t id = INVALID_BATCH;
	struct xfer_batch *b;
	long i = -1;

	if (!e)
		return INVALID_BATCH;
	b = xfer_batch_new(e, batch_size);
	if (b && !xfer_batch_set_callback(b, batch_done, t)) {
		pthread_rwlock_wrlock(&t->batch_lock);
		i = free_slot(t);
		if (i >= 0) {
			t->slots[i].b = b;
			t->slots[i].cap = batch_size;
			t->live++;
			id = (batch_id_t)t->slots[i].gen << 32 | (batch_id_t)i;
		}
		pthread_rwlock_unlock(&t->batch_lock);
	}
	if (i < 0 && b)
		xfer_batch_free(b);
	te_leave(t);
	return id;
}

/* Submit, with a notification when @p note is not NULL. */
static int submit(struct te *t, batch_id_t batch_id,
		  struct transfer_request *entries, size_t count,
		  const notify_msg_t *note)
{
	struct xfer_request *reqs;
	struct xfer_batch *b;
	size_t cap = 0;
	int ret;

	if (!te_enter(t))
		return TE_INVALID_ARGUMENT;
	b = batch_of(t, batch_id, &cap);
	if (!b || (!entries && count) || (note && !count)) {
		te_leave(t);
		return TE_INVALID_ARGUMENT;
	}
	if (!count) { /* nothing to do, as Mooncake */
		te_leave(t);
		return TE_OK;
	}
	/* Before anything is sized by it: a count past the batch's room is
	 * refused (xfer_batch_submit() checks again, against submits that
	 * came meanwhile), so count * size below stays under 2^24 * 40. */
	if (count > cap - xfer_batch_size(b)) {
		te_leave(t);
		return TE_TOO_MANY_REQUESTS;
	}
	reqs = malloc(count * sizeof(*reqs));
	if (!reqs) {
		te_leave(t);
		return TE_MEMORY;
	}
	te_requests(t, entries, reqs, count);
	if (note)
		ret = xfer_batch_submit_notify(b, reqs, count, note->name,
					       note->msg);
	else
		ret = xfer_batch_submit(b, reqs, count);
	free(reqs);
	te_leave(t);
	return te_status(ret);
}

int submitTransfer(transfer_engine_t engine, batch_id_t batch_id,
		   struct transfer_request *entries, size_t count)
{
	return submit(engine, batch_id, entries, count, NULL);
}

int submitTransferWithNotify(transfer_engine_t engine, batch_id_t batch_id,
			     struct transfer_request *entries, size_t count,
			     notify_msg_t notify_msg)
{
	return submit(engine, batch_id, entries, count, &notify_msg);
}

int getTransferStatus(transfer_engine_t engine, batch_id_t batch_id,
		      size_t task_id, struct transfer_status *status)
{
	struct te *t = engine;
	struct xfer_task_status st;
	struct xfer_batch *b;
	int ret = -EINVAL;

	if (!status || !te_enter(t))
		return TE_INVALID_ARGUMENT;
	b = batch_of(t, batch_id, NULL);
	if (b)
		ret = xfer_batch_status(b, task_id, &st);
	te_leave(t);
	if (ret)
		return TE_INVALID_ARGUMENT;
	status->status = (int)st.status; /* the same numbers */
	status->transferred_bytes = st.transferred;
	return TE_OK;
}

/* Whether a task of @p b is still WAITING. */
static bool in_flight(struct xfer_batch *b)
{
	struct xfer_task_status st;
	size_t n = xfer_batch_size(b);

	for (size_t i = 0; i < n; i++)
		if (!xfer_batch_status(b, i, &st) && st.status == XFER_WAITING)
			return true;
	return false;
}

int freeBatchID(transfer_engine_t engine, batch_id_t batch_id)
{
	struct te *t = engine;
	struct xfer_batch *b;
	int ret = TE_OK;

	if (!te_enter(t))
		return TE_INVALID_ARGUMENT;
	pthread_rwlock_wrlock(&t->batch_lock);
	b = lookup(t, batch_id);
	if (!b) {
		ret = TE_INVALID_ARGUMENT;
	} else if (in_flight(b)) {
		ret = TE_BATCH_BUSY;
	} else {
		/* The id is gone from here on. If the batch cannot go yet
		 * (its completion or notification on the way), the callback
		 * that comes frees it. */
		t->slots[SLOT(batch_id)].zombie = true;
		reap(t, &t->slots[SLOT(batch_id)]);
	}
	pthread_rwlock_unlock(&t->batch_lock);
	te_leave(t);
	return ret;
}

bool te_batches_live(struct te *t)
{
	bool live;

	pthread_rwlock_rdlock(&t->batch_lock);
	live = t->live > 0;
	pthread_rwlock_unlock(&t->batch_lock);
	return live;
}

void te_batches_fini(struct te *t)
{
	struct timespec ms = { 0, 1000000L };
	struct xfer_batch **live = NULL;
	size_t n = 0;

	pthread_rwlock_wrlock(&t->batch_lock);
	t->ending = true; /* callbacks free nothing now: live[] stays valid */
	if (t->live)
		live = malloc(t->live * sizeof(*live));
	for (size_t i = 0; i < t->nslots; i++) {
		struct te_slot *s = &t->slots[i];

		if (!s->b || s->zombie)
			continue;
		s->zombie = true;
		if (live)
			live[n++] = s->b;
	}
	pthread_rwlock_unlock(&t->batch_lock);
	/* Not under the lock: a cancel waits for the reactors, whose batch
	 * callbacks take it. Zombies stay until their callback or below. */
	for (size_t i = 0; i < n; i++)
		xfer_batch_cancel(live[i]);
	free(live);
	/* canceled tasks end once nothing of them can arrive; the callbacks
	 * free those batches, this the ones with nothing in flight */
	for (int k = 0; k < 10000 && te_batches_live(t); k++) {
		pthread_rwlock_wrlock(&t->batch_lock);
		for (size_t i = 0; i < t->nslots; i++)
			if (t->slots[i].b)
				reap(t, &t->slots[i]);
		pthread_rwlock_unlock(&t->batch_lock);
		if (te_batches_live(t))
			nanosleep(&ms, NULL);
	}
}
