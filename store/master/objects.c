/*
 * xfer-stored's objects: a chained hash table by key (FNV-1a, doubled
 * as it fills), puts (start, end, revoke), queries with leases, removal,
 * stale puts set aside and freed later (state_internal.h; eviction is
 * evict.c's). Complete objects sit on one list, most recently
 * used first; puts in progress on another, oldest first.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "store/alloc_internal.h"
#include "store/master/state_internal.h"

#define BUCKETS_MIN 1024
/* The objects and ranges the search of a run of neighbours to evict
 * for the items of one put_start request looks at, at most (each a
 * cache miss or two: some milliseconds in all; evict.c). */
#define RUN_VISITS 65536

uint64_t fnv1a(const char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	while (n--) {
		h ^= (uint8_t)*p++;
		h *= 0x100000001b3ull;
	}
	return h;
}

int objects_init(struct stored *s)
{
	list_init(&s->pending);
	list_init(&s->lru);
	list_init(&s->ssd_lru);
	list_init(&s->discarded);
	list_init(&s->tier_tasks);
	s->nbuckets = BUCKETS_MIN;
	s->buckets = calloc(s->nbuckets, sizeof(*s->buckets));
	return s->buckets ? 0 : -ENOMEM;
}

static struct object **find(struct stored *s, const struct store_str *key,
			    uint64_t hash)
{
	struct object **po = &s->buckets[hash & (s->nbuckets - 1)];

	for (; *po; po = &(*po)->hnext)
		if ((*po)->hash == hash && (*po)->klen == key->len &&
		    !memcmp((*po)->key, key->p, key->len))
			break;
	return po;
}

/* Double the table; on ENOMEM it stays as it is (chains grow). */
static void grow(struct stored *s)
{
	size_t n = s->nbuckets * 2;
	struct object **b = calloc(n, sizeof(*b)), *o;

	if (!b)
		return;
	for (size_t i = 0; i < s->nbuckets; i++) {
		while ((o = s->buckets[i])) {
			s->buckets[i] = o->hnext;
			o->hnext = b[o->hash & (n - 1)];
			b[o->hash & (n - 1)] = o;
		}
	}
	free(s->buckets);
	s->buckets = b;
	s->nbuckets = n;
}

static void hash_remove(struct stored *s, struct object *o)
{
	struct object **po = &s->buckets[o->hash & (s->nbuckets - 1)];

	while (*po != o)
		po = &(*po)->hnext;
	*po = o->hnext;
	s->nobjects--;
}

static void hash_add(struct stored *s, struct object *o)
{
	struct store_str key = { o->key, o->klen };
	struct object **po = find(s, &key, o->hash);

	o->hnext = *po;
	*po = o;
	s->nobjects++;
}

/* Upsert @p o is gone before its end: the object it was to replace is
 * the key's again. */
static void unshadow(struct stored *s, struct object *o)
{
	struct object *old = o->older;

	if (!old)
		return;
	o->older = NULL;
	old->newer = NULL;
	hash_add(s, old);
}

/* Out of the table: @p o, and the object an upsert of it replaces comes
 * back; an object an upsert shadows is not in it. */
static void unhash(struct stored *s, struct object *o)
{
	if (o->newer) {
		o->newer->older = NULL;
		o->newer = NULL;
		return;
	}
	hash_remove(s, o);
	unshadow(s, o);
}

/* Give back @p r's range, if its segment is still there (an offline one
 * has no allocator yet). */
static void replica_release(struct stored *s, struct replica *r)
{
	if (!r->seg)
		return;
	if (r->obj->task)
		tier_forget(s, r->obj, r);
	if (r->seg->online) {
		segment_account(s, r->seg, store_alloc_len(r->seg->alloc,
							   r->alloc_id), -1);
		store_alloc_release(r->seg->alloc, r->alloc_id);
	}
	list_del(&r->in_seg);
	r->seg = NULL;
	r->filling = false;
	r->obj->nlive--;
}

void objects_release_replica(struct stored *s, struct replica *r)
{
	replica_release(s, r);
}

static uint64_t obj_free(struct stored *s, struct object *o)
{
	uint64_t freed = s->used;

	for (unsigned i = 0; i < o->nrep; i++)
		replica_release(s, &o->rep[i]);
	freed -= s->used;
	s->stats.soft_pinned -= !!(o->flags & STORED_SOFT_PIN);
	list_del(&o->link);
	if (o->state != OBJ_DISCARDED)
		unhash(s, o);
	if (o->flags & OBJ_REP_HEAP)
		free(o->rep);
	free(o);
	return freed;
}

/* obj_free() of an object the journal holds (an upsert in progress has
 * no row: its key's is the older object's). */
static uint64_t obj_delete(struct stored *s, struct object *o)
{
	if (!(o->flags & OBJ_UNLOGGED))
		persist_del(s, o);
	return obj_free(s, o);
}

uint64_t objects_delete(struct stored *s, struct object *o)
{
	return obj_delete(s, o);
}

bool objects_visible(const struct object *o)
{
	for (unsigned i = 0; i < o->nrep; i++)
		if (stripe_ready(o, i))
			return true;
	return false;
}

/* An object whose last replica goes with its segment stays in the
 * journal: loading drops rows whose segments are all gone. */
bool objects_drop_replica(struct stored *s, struct replica *r)
{
	struct object *o = r->obj;
	struct replica *head = stripe_head(r);

	/* a striped replica is kept whole or not at all */
	for (unsigned j = 0; head->parts > 1 && j < head->parts; j++)
		replica_release(s, head + j);
	replica_release(s, r);
	if (o->nlive)
		return true;
	obj_free(s, o);
	return false;
}

void objects_fini(struct stored *s)
{
	struct list *heads[] = { &s->pending, &s->lru, &s->ssd_lru,
				 &s->discarded };

	/* the segments went first: no replica is left to release */
	for (unsigned i = 0; i < 4 && s->buckets; i++)
		while (!list_empty(heads[i]))
			obj_free(s, container_of(heads[i]->next,
						 struct object, link));
	free(s->buckets);
	s->buckets = NULL;
	free(s->run);
	s->run = NULL;
}

/* A put that was never ended: out of the table (the key is free again),
 * its ranges kept until release_ms after its start (its writer may still
 * be writing them). */
static void discard(struct stored *s, struct object *o)
{
	if (!(o->flags & OBJ_UNLOGGED))
		persist_del(s, o);
	unhash(s, o);
	list_del(&o->link);
	o->state = OBJ_DISCARDED;
	o->free_at_ms = o->put_start_ms + (int64_t)s->cfg.release_ms;
	s->stats.discarded++;
	list_add_before(&o->link, &s->discarded);
}

void objects_sweep(struct stored *s, int64_t now)
{
	struct list *l, *next;

	while (!list_empty(&s->pending)) {
		struct object *o = container_of(s->pending.next, struct object,
						link);

		if (now - o->put_start_ms < (int64_t)s->cfg.discard_ms)
			break;
		discard(s, o);
	}
	/* a few; discarded as the sweep found them or a new put did */
	for (l = s->discarded.next; l != &s->discarded; l = next) {
		struct object *o = container_of(l, struct object, link);

		next = l->next;
		if (now >= o->free_at_ms) {
			obj_free(s, o);
			s->stats.released++;
		}
	}
}

static bool has_segment(const struct object *o, const struct segment *g)
{
	for (unsigned i = 0; i < o->nrep; i++)
		if (o->rep[i].seg == g)
			return true;
	return false;
}

struct replica *objects_place_in(struct stored *s, struct object *o,
				 struct segment *g)
{
	return objects_place_len(s, o, g, o->len);
}

struct replica *objects_place_len(struct stored *s, struct object *o,
				  struct segment *g, uint64_t len)
{
	struct replica *r = NULL;
	unsigned i;

	for (i = 0; i < o->nrep && !r; i++)
		if (!o->rep[i].seg)
			r = &o->rep[i];        /* a slot a dropped one left */
	if (!r && o->nrep < o->cap)
		r = &o->rep[o->nrep];
	if (!r || has_segment(o, g) ||
	    store_alloc_get(g->alloc, len, &r->off, &r->alloc_id))
		return NULL;
	segment_account(s, g, store_alloc_len(g->alloc, r->alloc_id), 1);
	store_alloc_set_tag(g->alloc, r->alloc_id, r);
	r->obj = o;
	r->seg = g;
	r->filling = false;
	r->part = 0;
	r->parts = 1;
	list_add_before(&r->in_seg, &g->replicas);
	if (r == &o->rep[o->nrep])
		o->nrep++;
	o->nlive++;
	return r;
}

/* Up to @p want replicas of @p o on distinct segments of @p medium: the
 * one named @p preferred first, then from a random one on. */
static void place(struct stored *s, struct object *o, unsigned want,
		  uint8_t medium, const struct store_str *preferred)
{
	unsigned got = 0;
	size_t start;

	if (!s->nsegs || !want)
		return;
	for (size_t i = 0; preferred->len && i < s->nsegs; i++) {
		struct segment *g = s->segs[i];

		if (g->medium == medium && g->name_len == preferred->len &&
		    !memcmp(g->name, preferred->p, preferred->len)) {
			got += !!objects_place_in(s, o, g);
			break;
		}
	}
	s->rng ^= s->rng << 13;
	s->rng ^= s->rng >> 7;
	s->rng ^= s->rng << 17;
	start = s->rng % s->nsegs;
	for (size_t k = 0; k < s->nsegs && got < want; k++) {
		struct segment *g = s->segs[(start + k) % s->nsegs];

		if (g->medium == medium)
			got += !!objects_place_in(s, o, g);
	}
}

struct object *objects_alloc(const struct store_str *key, unsigned nrep)
{
	struct object *o = calloc(1, sizeof(*o) + key->len +
				  nrep * sizeof(struct replica) +
				  _Alignof(struct replica));

	if (!o)
		return NULL;
	o->rep = (struct replica *)(((uintptr_t)(o->key + key->len) +
				     _Alignof(struct replica) - 1) &
				    ~(uintptr_t)(_Alignof(struct replica) - 1));
	memcpy(o->key, key->p, key->len);
	o->klen = key->len;
	o->hash = fnv1a(key->p, key->len);
	return o;
}

void objects_insert(struct stored *s, struct object *o)
{
	hash_add(s, o);
	if (o->state == OBJ_PENDING)
		list_add_before(&o->link, &s->pending);
	else
		list_add_before(&o->link, tier_lru(s, o));
	if (s->nobjects > s->nbuckets)
		grow(s);
}

static int put_start_one(struct stored *s, const struct store_msg *req,
			 const struct store_item *it, int64_t now,
			 uint32_t *visits, struct store_item *out)
{
	struct object *o = *find(s, &it->key, fnv1a(it->key.p, it->key.len));
	unsigned want = (unsigned)req->replicas + req->ssd_replicas;
	unsigned parts, got = 0;
	bool upsert = req->flags & STORED_UPSERT;
	struct object *old;

	if (!it->key.len || !it->len || !want || want > STORE_REPLICA_MAX)
		return MC_INVALID_PARAMS;
	/* a put waits out another put in progress; an upsert preempts it */
	if (o && o->state == OBJ_PENDING &&
	    (upsert || now - o->put_start_ms >= (int64_t)s->cfg.discard_ms)) {
		discard(s, o);
		o = objects_lookup(s, &it->key); /* what an upsert shadowed */
	}
	if (o && !upsert)
		return MC_OBJECT_ALREADY_EXISTS;
	parts = stripe_parts(s, it->len, req->replicas, req->ssd_replicas);
	o = objects_alloc(&it->key, tier_slots(s, want + req->replicas *
					       (parts - 1)));
	if (!o)
		return MC_INTERNAL_ERROR;
	o->len = it->len;
	o->cap = (uint8_t)tier_slots(s, want + req->replicas * (parts - 1));
	o->want_dram = req->replicas;
	o->want_ssd = req->ssd_replicas;
	if (parts > 1)
		got = stripe_place(s, o, req->replicas, parts,
				   &req->preferred);
	/* what does not stripe is placed whole */
	place(s, o, req->replicas - got, STORE_MEDIUM_DRAM, &req->preferred);
	/* space that offloads in flight free is not evicted twice; a run
	 * evicted for the put frees one range it fits in whole, striped
	 * again first */
	if (req->replicas && !o->nlive && s->offloading < it->len &&
	    (evict_run(s, it->len, visits) ||
	     (parts > 1 && evict(s, it->len)))) {
		got = parts > 1 ? stripe_place(s, o, req->replicas, parts,
					       &req->preferred) : 0;
		place(s, o, req->replicas - got, STORE_MEDIUM_DRAM,
		      &req->preferred);
	}
	place(s, o, req->ssd_replicas, STORE_MEDIUM_SSD, &req->preferred);
	for (int i = 0; i < 8 && !o->nlive && req->ssd_replicas &&
	     tier_ssd_room(s, o->len); i++)
		place(s, o, req->ssd_replicas, STORE_MEDIUM_SSD,
		      &req->preferred);
	if (!o->nlive) {
		free(o);
		s->stats.alloc_failures++;
		return MC_NO_AVAILABLE_HANDLE;
	}
	memcpy(o->writer, req->client, STORE_ID_LEN);
	o->put_start_ms = now;
	o->flags = req->flags & (STORED_SOFT_PIN | STORED_HARD_PIN);
	o->state = OBJ_PENDING;
	s->stats.soft_pinned += !!(o->flags & STORED_SOFT_PIN);
	/* eviction above may have changed the chain (or evicted the object
	 * an upsert replaces): found again */
	old = upsert ? objects_lookup(s, &it->key) : NULL;
	if (old) {
		hash_remove(s, old);
		old->newer = o;
		o->older = old;
		o->flags |= OBJ_UNLOGGED;
	}
	objects_insert(s, o);
	if (!old)
		persist_put(s, o);
	out->nrep = 0;
	for (unsigned i = 0; i < o->nrep; i++)
		if (stripe_ready(o, i))
			out->nrep += stripe_wire(o, i, out->rep + out->nrep);
	return 0;
}

void objects_put_start(struct stored *s, const struct store_msg *req,
		       struct store_msg *rep)
{
	int64_t now = stored_now_ms();
	uint32_t visits = RUN_VISITS;

	rep->n = req->n;
	for (uint32_t i = 0; i < req->n; i++) {
		rep->items[i].nrep = 0;
		rep->items[i].err = put_start_one(s, req, &req->items[i], now,
						  &visits, &rep->items[i]);
	}
	if (objects_above_watermark(s))
		objects_evict_soon(s);
}

struct object *objects_lookup(struct stored *s, const struct store_str *key)
{
	return *find(s, key, fnv1a(key->p, key->len));
}

/* Retire @p old, replaced by an upsert: out of reach, and freed once
 * the lease of its last reader runs out (no read sees its space reused).
 * The journal's row of the key is the new object's already. */
static void retire(struct stored *s, struct object *old)
{
	int64_t now = stored_now_ms();

	old->newer = NULL;
	list_del(&old->link);
	old->state = OBJ_DISCARDED;
	old->free_at_ms = old->lease_until_ms > now ? old->lease_until_ms :
						      now;
	list_add_before(&old->link, &s->discarded);
}

/* The put of @p o ended: visible, with the next version. */
static void complete(struct stored *s, struct object *o)
{
	o->state = OBJ_COMPLETE;
	o->version = ++s->version;
	list_del(&o->link);
	list_add_before(&o->link, tier_lru(s, o)->next);
	if (o->older) {
		retire(s, o->older);
		o->older = NULL;
	}
	if (o->flags & OBJ_UNLOGGED) {
		o->flags &= ~OBJ_UNLOGGED;
		persist_put(s, o);
	}
	persist_complete(s, o);
	tier_completed(s, o);
}

void objects_put_end(struct stored *s, const struct store_msg *req,
		     struct store_msg *rep, bool revoke)
{
	rep->n = req->n;
	for (uint32_t i = 0; i < req->n; i++) {
		struct object *o = objects_lookup(s, &req->items[i].key);
		int32_t *err = &rep->items[i].err;

		*err = 0;
		if (!o)
			*err = MC_OBJECT_NOT_FOUND;
		else if (o->state != OBJ_PENDING)
			*err = MC_INVALID_WRITE;
		else if (memcmp(o->writer, req->client, STORE_ID_LEN))
			*err = MC_ILLEGAL_CLIENT;
		else if (revoke)
			obj_delete(s, o);
		else
			complete(s, o);
		rep->items[i].version = !*err && !revoke ? o->version : 0;
	}
}

/* A read lease from now, and the object is the most recent. */
static void touch(struct stored *s, struct object *o, int64_t now)
{
	o->lease_until_ms = now + (int64_t)s->cfg.lease_ms;
	list_del(&o->link);
	list_add_before(&o->link, tier_lru(s, o)->next);
}

/* What readers of @p o's key get: the object an upsert in progress
 * replaces, while it does. */
static struct object *readable(struct object *o)
{
	return o && o->older ? o->older : o;
}

/* The keys of a batch hashed into @p hash, and their buckets, then the
 * first object of each, asked of the memory ahead of the lookups: their
 * cache misses overlap instead of coming one after the other. */
static void prefetch(const struct stored *s, const struct store_msg *req,
		     uint64_t *hash)
{
	size_t mask = s->nbuckets - 1;

	for (uint32_t i = 0; i < req->n; i++) {
		hash[i] = fnv1a(req->items[i].key.p, req->items[i].key.len);
		__builtin_prefetch(&s->buckets[hash[i] & mask]);
	}
	for (uint32_t i = 0; i < req->n; i++)
		if (s->buckets[hash[i] & mask])
			__builtin_prefetch(s->buckets[hash[i] & mask]);
}

void objects_query(struct stored *s, const struct store_msg *req,
		   struct store_msg *rep, bool exist)
{
	int64_t now = stored_now_ms();
	uint64_t hash[STORE_BATCH_MAX];

	prefetch(s, req, hash);
	rep->n = req->n;
	for (uint32_t i = 0; i < req->n; i++) {
		struct object *o = readable(*find(s, &req->items[i].key,
						  hash[i]));
		struct store_item *out = &rep->items[i];

		out->nrep = 0;
		out->len = out->lease_ms = out->version = 0;
		/* an object whose segments are all offline is not there
		 * until one comes back */
		if (o && o->state == OBJ_COMPLETE && !objects_visible(o))
			o = NULL;
		if (!o || o->state != OBJ_COMPLETE) {
			out->err = exist ? 0 : !o ? MC_OBJECT_NOT_FOUND :
						    MC_REPLICA_IS_NOT_READY;
			/* where the slower tier holds it: its version */
			if (!o && !exist)
				out->version = flush_version(
					s, &req->items[i].key);
			continue;
		}
		out->version = o->version;
		if (!exist && o->version < req->min_version) {
			out->err = MC_VERSION_TOO_OLD;
			continue;
		}
		touch(s, o, now);
		out->err = exist;
		if (exist)
			continue;
		out->len = o->len;
		out->lease_ms = s->cfg.lease_ms;
		/* DRAM first: a reader tries them in order */
		for (int ssd = 0; ssd < 2; ssd++)
			for (unsigned k = 0; k < o->nrep; k++)
				if (stripe_ready(o, k) &&
				    segment_ssd(o->rep[k].seg) == ssd)
					out->nrep += stripe_wire(
						o, k, out->rep + out->nrep);
		tier_hit(s, o);
	}
}

void objects_remove(struct stored *s, const struct store_msg *req,
		    struct store_msg *rep)
{
	int64_t now = stored_now_ms();

	rep->n = req->n;
	for (uint32_t i = 0; i < req->n; i++)
		rep->items[i].err = objects_remove_one(
			s, objects_readable(s, &req->items[i].key), req->force,
			now);
}

int objects_remove_one(struct stored *s, struct object *o, bool force,
		       int64_t now)
{
	if (!o)
		return MC_OBJECT_NOT_FOUND;
	if (o->state != OBJ_COMPLETE)
		return MC_REPLICA_IS_NOT_READY;
	if (!force && (o->lease_until_ms > now || o->task))
		return MC_OBJECT_HAS_LEASE;
	obj_delete(s, o);
	return 0;
}

struct object *objects_readable(struct stored *s, const struct store_str *key)
{
	return readable(objects_lookup(s, key));
}

int64_t objects_remove_all(struct stored *s, bool force)
{
	struct list *heads[] = { &s->lru, &s->ssd_lru }, *l, *next;
	int64_t now = stored_now_ms(), n = 0;

	for (unsigned i = 0; i < 2; i++)
		for (l = heads[i]->next; l != heads[i]; l = next) {
			struct object *o = container_of(l, struct object,
							link);

			next = l->next;
			if (force || (o->lease_until_ms <= now && !o->task)) {
				obj_delete(s, o);
				n++;
			}
		}
	return n;
}
