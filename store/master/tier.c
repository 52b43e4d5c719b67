/*
 * xfer-stored's tiers: copies of objects between DRAM and SSD segments
 * (segments mounted with medium SSD, a client's file registered with
 * its engine). The master only decides: it allocates the new replica
 * (not read, not journaled while it fills) and keeps a task that the
 * client owning the DRAM side takes with tier_poll, copies with its
 * engine (a WRITE from its own segment to the SSD one, or a READ from
 * the SSD one into its own), and reports with tier_done. Mooncake's
 * master flags, its semantics:
 *
 *   --enable_offload      a completed put is copied to SSD at once
 *   --offload_on_evict    ... only when eviction picks it; its DRAM
 *                         replicas go once the copy is done
 *   --promotion_on_hit    an object only on SSD is copied back to DRAM
 *                         after --promotion_admission_threshold reads
 *
 * Eviction of an object that has an SSD replica drops its DRAM ones
 * only. A copy not reported within TIER_TASK_MS fails: its new replica
 * is released (an offload on eviction then deletes the object).
 */
#include <stdlib.h>
#include <string.h>

#include "store/alloc_internal.h"
#include "store/master/state_internal.h"
#include "util/log_internal.h"

#define TIER_TASK_MS 30000
#define TIER_POLL_MAX 64
/* Objects one search for SSD room looks at (as eviction's passes). */
#define TIER_SCAN_MAX 2000
#define TIER_ROOM_TRIES 8

/* TIER_REPLICATE: replicate.c's copies, between any two segments */
enum tier_kind { TIER_OFFLOAD, TIER_EVICT, TIER_PROMOTE, TIER_REPLICATE };

struct tier_task {
	struct list link;              /* stored.tier_tasks, oldest first */
	struct object *o;
	uint8_t src, dst;              /* in o->rep */
	uint8_t kind;
	bool given;                    /* taken by a poll */
	uint64_t bytes;                /* of stored.offloading */
	struct client *to;             /* who copies: the owner of the
					  source if in DRAM, else of the
					  new replica */
	int64_t made_ms;
};

unsigned tier_slots(const struct stored *s, unsigned nrep)
{
	unsigned n = nrep + (s->cfg.offload || s->cfg.promotion_on_hit);

	return n < STORE_REPLICA_MAX ? n : STORE_REPLICA_MAX;
}

static bool ready(const struct replica *r)
{
	return r->seg && r->seg->online && !r->filling;
}

/* A ready whole replica of @p o on @p ssd or DRAM, or NULL: a striped
 * one is neither copied from nor into (its shards have several owners). */
static struct replica *find(struct object *o, bool ssd)
{
	for (unsigned i = 0; i < o->nrep; i++)
		if (ready(&o->rep[i]) && o->rep[i].parts <= 1 &&
		    segment_ssd(o->rep[i].seg) == ssd)
			return &o->rep[i];
	return NULL;
}

/* Has @p o a DRAM buffer in an online segment (whole or a shard)? */
static bool in_dram(const struct object *o)
{
	for (unsigned i = 0; i < o->nrep; i++)
		if (ready(&o->rep[i]) && !segment_ssd(o->rep[i].seg))
			return true;
	return false;
}

struct list *tier_lru(struct stored *s, const struct object *o)
{
	for (unsigned i = 0; i < o->nrep; i++)
		if (o->rep[i].seg && !segment_ssd(o->rep[i].seg) &&
		    !o->rep[i].filling)
			return &s->lru;
	return &s->ssd_lru;
}

/* @p o is most recently used on the list its replicas say. */
static void relist(struct stored *s, struct object *o)
{
	list_del(&o->link);
	list_add_before(&o->link, tier_lru(s, o)->next);
}

bool tier_ssd_room(struct stored *s, uint64_t len)
{
	struct list *l = s->ssd_lru.prev, *prev;
	uint64_t used = s->ssd_used;
	int64_t now = stored_now_ms();

	for (unsigned n = 0; s->cfg.disk_eviction && l != &s->ssd_lru &&
	     used - s->ssd_used < len && n < TIER_SCAN_MAX; l = prev, n++) {
		struct object *o = container_of(l, struct object, link);

		prev = l->prev;
		if (o->lease_until_ms > now || o->task ||
		    (o->flags & (STORED_SOFT_PIN | STORED_HARD_PIN)) ||
		    !objects_visible(o))
			continue;
		objects_delete(s, o);
		s->stats.evicted++;
	}
	return used > s->ssd_used;
}

/* A new replica of @p o, filling, on a segment of medium @p ssd: one of
 * client @p c first (the copy stays on its host), then from a random
 * one on. */
static struct replica *place_once(struct stored *s, struct object *o,
				  bool ssd, const struct client *c)
{
	struct replica *r = NULL;
	size_t start;

	for (size_t i = 0; i < s->nsegs && !r; i++)
		if (segment_ssd(s->segs[i]) == ssd && s->segs[i]->client == c)
			r = objects_place_in(s, o, s->segs[i]);
	if (!r && s->nsegs) {
		s->rng ^= s->rng << 13;
		s->rng ^= s->rng >> 7;
		s->rng ^= s->rng << 17;
		start = s->rng % s->nsegs;
		for (size_t k = 0; k < s->nsegs && !r; k++) {
			struct segment *g = s->segs[(start + k) % s->nsegs];

			if (segment_ssd(g) == ssd)
				r = objects_place_in(s, o, g);
		}
	}
	if (r)
		r->filling = true;
	return r;
}

/* place_once(), then again each time SSD room was made for it (a hole
 * of its size is not always one the allocator's bins take). */
static struct replica *place(struct stored *s, struct object *o, bool ssd,
			     const struct client *c)
{
	struct replica *r = place_once(s, o, ssd, c);

	for (int i = 0; !r && ssd && i < TIER_ROOM_TRIES &&
	     tier_ssd_room(s, o->len); i++)
		r = place_once(s, o, ssd, c);
	return r;
}

static bool task_new(struct stored *s, struct object *o, struct replica *src,
		     struct replica *dst, enum tier_kind kind)
{
	struct tier_task *t = calloc(1, sizeof(*t));

	if (!t) {
		objects_release_replica(s, dst);
		return false;
	}
	t->o = o;
	t->src = (uint8_t)(src - o->rep);
	t->dst = (uint8_t)(dst - o->rep);
	t->kind = (uint8_t)kind;
	/* a client copies from or into its own DRAM segment */
	t->to = (segment_ssd(src->seg) ? dst : src)->seg->client;
	t->made_ms = stored_now_ms();
	if (kind == TIER_EVICT)
		for (unsigned i = 0; i < o->nrep; i++)
			if (o->rep[i].seg && !segment_ssd(o->rep[i].seg) &&
			    o->rep[i].seg->online)
				t->bytes += store_alloc_len(o->rep[i].seg->alloc,
							    o->rep[i].alloc_id);
	s->offloading += t->bytes;
	o->task = t;
	list_add_before(&t->link, &s->tier_tasks);
	return true;
}

static void task_free(struct stored *s, struct object *o)
{
	struct tier_task *t = o->task;

	s->offloading -= t->bytes;
	o->task = NULL;
	list_del(&t->link);
	free(t);
}

/* @p o's copy ended: its new replica stands (@p ok) or goes. What an
 * offload on eviction would drop stays while a lease may be reading it
 * (eviction takes it later). */
static void task_end(struct stored *s, struct object *o, bool ok)
{
	struct tier_task *t = o->task;
	struct replica *dst = &o->rep[t->dst];
	bool drop = t->kind == TIER_EVICT &&
		    o->lease_until_ms <= stored_now_ms();
	uint8_t kind = t->kind;

	task_free(s, o);
	if (!ok) {
		objects_release_replica(s, dst);
		if (drop)                 /* eviction wanted it gone */
			objects_delete(s, o);
		else if (kind == TIER_REPLICATE)
			replicate_copy_failed(s, o);
		return;
	}
	dst->filling = false;
	for (unsigned i = 0; drop && i < o->nrep; i++)
		if (o->rep[i].seg && !segment_ssd(o->rep[i].seg))
			objects_release_replica(s, &o->rep[i]);
	if (kind == TIER_PROMOTE)
		s->promoted++;
	else if (kind != TIER_REPLICATE)
		s->offloaded++;
	relist(s, o);
	persist_put(s, o);
}

uint64_t tier_evict(struct stored *s, struct object *o)
{
	struct replica *src = find(o, false), *dst;
	uint64_t used = s->used;

	if (!src && !in_dram(o)) {
		relist(s, o);          /* out of the way of the next scans */
		return 0;
	}
	if (find(o, true)) {
		for (unsigned i = 0; i < o->nrep; i++)
			if (o->rep[i].seg && !segment_ssd(o->rep[i].seg))
				objects_release_replica(s, &o->rep[i]);
		relist(s, o);
		persist_put(s, o);
		return used - s->used;
	}
	if (s->cfg.offload_on_evict && src &&
	    (dst = place(s, o, true, src->seg->client)) &&
	    task_new(s, o, src, dst, TIER_EVICT))
		return o->task->bytes;
	return objects_delete(s, o);
}

void tier_completed(struct stored *s, struct object *o)
{
	struct replica *src, *dst;

	if (!s->cfg.offload || s->cfg.offload_on_evict || o->task ||
	    find(o, true) || !(src = find(o, false)))
		return;
	dst = place(s, o, true, src->seg->client);
	if (dst)
		task_new(s, o, src, dst, TIER_OFFLOAD);
}

bool tier_copy(struct stored *s, struct object *o, struct replica *src,
	       bool ssd, struct segment *g)
{
	struct replica *dst = g ? objects_place_in(s, o, g) :
				  place(s, o, ssd, NULL);

	if (dst)
		dst->filling = true;
	return dst && task_new(s, o, src, dst, TIER_REPLICATE);
}

bool tier_copying(const struct object *o, bool *given, uint8_t *client)
{
	const struct tier_task *t = o->task;

	if (!t || t->kind != TIER_REPLICATE)
		return false;
	*given = t->given;
	memcpy(client, t->to->id, STORE_ID_LEN);
	return true;
}

void tier_hit(struct stored *s, struct object *o)
{
	struct replica *src, *dst;

	if (!s->cfg.promotion_on_hit || o->task || find(o, false)) {
		o->hits = 0;
		return;
	}
	src = find(o, true);
	if (!src || (o->hits < UINT8_MAX && ++o->hits <
		     s->cfg.promotion_threshold))
		return;
	dst = place(s, o, false, src->seg->client);
	if (dst && task_new(s, o, src, dst, TIER_PROMOTE))
		o->hits = 0;
}

void tier_forget(struct stored *s, struct object *o, struct replica *r)
{
	struct tier_task *t = o->task;
	struct replica *dst = &o->rep[t->dst];

	if (r != dst && r != &o->rep[t->src])
		return;
	task_free(s, o);
	if (r != dst)
		objects_release_replica(s, dst);
}

void tier_sweep(struct stored *s, int64_t now)
{
	while (!list_empty(&s->tier_tasks)) {
		struct tier_task *t = container_of(s->tier_tasks.next,
						   struct tier_task, link);

		if (now - t->made_ms < TIER_TASK_MS)
			break;
		xfer_log(XFER_LOG_WARN, "xfer-stored: a copy between tiers "
			 "was not done in %d ms: dropped", TIER_TASK_MS);
		task_end(s, t->o, false);
	}
}

static struct store_replica wire(const struct object *o,
				 const struct replica *r)
{
	return (struct store_replica){
		.addr = r->seg->base + r->off, .len = o->len,
		.endpoint = { r->seg->name, r->seg->name_len },
	};
}

/* The copies waiting for the client that polls: each item the key, its
 * length, the replica to copy from and the one to copy into. */
void tier_poll(struct stored *s, const struct store_msg *req,
	       struct store_msg *rep)
{
	struct list *l;

	rep->n = 0;
	for (l = s->tier_tasks.next; l != &s->tier_tasks &&
	     rep->n < TIER_POLL_MAX; l = l->next) {
		struct tier_task *t = container_of(l, struct tier_task, link);
		struct store_item *it = &rep->items[rep->n];
		struct object *o = t->o;

		if (t->given || memcmp(t->to->id, req->client, STORE_ID_LEN))
			continue;
		t->given = true;
		it->key = (struct store_str){ o->key, o->klen };
		it->len = o->len;
		it->nrep = 2;
		it->rep[0] = wire(o, &o->rep[t->src]);
		it->rep[1] = wire(o, &o->rep[t->dst]);
		rep->n++;
	}
}

/* A client reports its copies: each item's err 0 (done) or not. */
void tier_done(struct stored *s, const struct store_msg *req,
	       struct store_msg *rep)
{
	rep->n = req->n;
	for (uint32_t i = 0; i < req->n; i++) {
		struct object *o = objects_lookup(s, &req->items[i].key);
		int32_t *err = &rep->items[i].err;

		*err = 0;
		if (!o || !o->task || !o->task->given)
			*err = MC_OBJECT_NOT_FOUND;
		else if (memcmp(o->task->to->id, req->client, STORE_ID_LEN))
			*err = MC_ILLEGAL_CLIENT;
		else
			task_end(s, o, !req->items[i].err);
	}
}
