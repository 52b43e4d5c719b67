/*
 * xfer-stored's replication tasks: an object's replica counts changed
 * (the store design's Replicate(key, {dram_replicate_num,
 * nvmeof_replicate_num})), and replicas lost with a segment (a client
 * expired at --client_ttl, an unmount) made again while the object asks
 * for more than remain. A task is Mooncake's (QueryTask): an id, a type,
 * PENDING -> PROCESSING -> SUCCESS or FAILED, when it was made and last
 * changed, the client it was given to and a message. Mooncake's copy
 * and move tasks (CreateCopyTask, CreateMoveTask) are tasks too: new
 * replicas in named segments, and for a move the source's dropped.
 *
 * The master moves no bytes: each tick a task looks at its object and
 * takes one step. Too many replicas: the extra ones go (DRAM ones from
 * the last, once no lease is left that a reader may still read them
 * under). Too few: tier.c copies from a ready replica into a new one, a
 * task the owner of the source takes with tier_poll (a WRITE from its
 * own DRAM segment), or, when the source lies on SSD, the owner of the
 * new DRAM replica (a READ into its own). One copy at a time per
 * object; a copy that fails is tried again, MAX_FAILS in all. An SSD
 * replica is copied from a DRAM one only (a client copies to or from
 * its own DRAM segment).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/master/state_internal.h"
#include "util/log_internal.h"

/* Tasks at work at once (Mooncake's --max_total_pending_tasks), and
 * finished ones kept for query_task (--max_total_finished_tasks). */
#define ACTIVE_MAX 65536
#define DONE_MAX 10000
/* Tasks one tick steps: the others wait for the next ticks. */
#define STEP_MAX 512
#define MAX_FAILS 3
#define MSG_MAX 96

struct repl_task {
	struct list link;              /* repl_active or repl_done */
	uint64_t id, version;          /* the object's, when made */
	int64_t created_ms, updated_ms; /* since the epoch */
	uint8_t type, status, fails;
	uint8_t want_dram, want_ssd;
	uint8_t client[STORE_ID_LEN];  /* given to; zeros before */
	char msg[MSG_MAX];
	/* a copy's or move's segments: after the key, the source's name
	 * (a move's) and the targets' */
	uint8_t ntarget;
	uint16_t src_len, tlen[STORE_REPLICA_MAX];
	uint16_t klen;
	char key[];
};

static int64_t epoch_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void replicate_init(struct stored *s)
{
	list_init(&s->repl_active);
	list_init(&s->repl_done);
}

void replicate_fini(struct stored *s)
{
	struct list *heads[] = { &s->repl_active, &s->repl_done };

	for (unsigned i = 0; i < 2; i++)
		while (!list_empty(heads[i])) {
			struct list *l = heads[i]->next;

			list_del(l);
			free(container_of(l, struct repl_task, link));
		}
	s->repl_nactive = s->repl_ndone = 0;
}

static void set_status(struct repl_task *t, uint8_t status, const char *msg)
{
	if (t->status != status || strcmp(t->msg, msg))
		t->updated_ms = epoch_ms();
	t->status = status;
	snprintf(t->msg, sizeof(t->msg), "%s", msg);
}

/* @p t is finished: kept for query_task, the oldest finished one
 * forgotten past DONE_MAX; @p o (NULL: gone) is free for another. */
static void finish(struct stored *s, struct repl_task *t, struct object *o,
		   uint8_t status, const char *msg)
{
	set_status(t, status, msg);
	if (o)
		o->flags &= ~OBJ_REPLICATING;
	list_del(&t->link);
	s->repl_nactive--;
	list_add_before(&t->link, &s->repl_done);
	if (++s->repl_ndone > DONE_MAX) {
		struct list *l = s->repl_done.next;

		list_del(l);
		free(container_of(l, struct repl_task, link));
		s->repl_ndone--;
	}
}

/* The active task of @p o, or NULL. */
static struct repl_task *active_of(struct stored *s, const struct object *o)
{
	for (struct list *l = s->repl_active.next; l != &s->repl_active;
	     l = l->next) {
		struct repl_task *t = container_of(l, struct repl_task, link);

		if (t->version == o->version && t->klen == o->klen &&
		    !memcmp(t->key, o->key, o->klen))
			return t;
	}
	return NULL;
}

/* A task of @p type on @p o; a copy's or move's segments from @p req
 * (its source in preferred, its targets as items). NULL: no memory, or
 * too many at work. */
static struct repl_task *task_new(struct stored *s, struct object *o,
				  uint8_t type, const struct store_msg *req)
{
	size_t names = req ? req->preferred.len : 0;
	struct repl_task *t;
	char *p;

	for (uint32_t i = 0; req && i < req->n; i++)
		names += req->items[i].key.len;
	if (s->repl_nactive >= ACTIVE_MAX ||
	    !(t = calloc(1, sizeof(*t) + o->klen + names)))
		return NULL;
	p = t->key + o->klen;
	if (req) {
		t->src_len = req->preferred.len;
		memcpy(p, req->preferred.p, t->src_len);
		p += t->src_len;
		t->ntarget = (uint8_t)req->n;
		for (uint32_t i = 0; i < req->n; i++) {
			t->tlen[i] = req->items[i].key.len;
			memcpy(p, req->items[i].key.p, t->tlen[i]);
			p += t->tlen[i];
		}
	}
	t->id = ++s->repl_next;
	t->version = o->version;
	t->type = type;
	t->created_ms = t->updated_ms = epoch_ms();
	t->want_dram = o->want_dram;
	t->want_ssd = o->want_ssd;
	t->klen = o->klen;
	memcpy(t->key, o->key, o->klen);
	snprintf(t->msg, sizeof(t->msg), "Task created");
	o->flags |= OBJ_REPLICATING;
	list_add_before(&t->link, &s->repl_active);
	s->repl_nactive++;
	return t;
}

/* Room for @p cap replicas in @p o's rep[]: an array of its own, each
 * replica's links in its segment's list moved with it. @return false
 * (no memory). */
static bool reserve(struct object *o, unsigned cap)
{
	struct replica *r;

	if (cap <= o->cap)
		return true;
	r = calloc(cap, sizeof(*r));
	if (!r)
		return false;
	memcpy(r, o->rep, o->nrep * sizeof(*r));
	for (unsigned i = 0; i < o->nrep; i++) {
		if (!r[i].seg) {
			list_init(&r[i].in_seg);
			continue;
		}
		/* replicas of one object lie in distinct segments: no two
		 * are neighbours */
		r[i].in_seg.prev->next = &r[i].in_seg;
		r[i].in_seg.next->prev = &r[i].in_seg;
	}
	if (o->flags & OBJ_REP_HEAP)
		free(o->rep);
	o->rep = r;
	o->cap = (uint8_t)cap;
	o->flags |= OBJ_REP_HEAP;
	return true;
}

/* Count @p o's replicas (filling ones not) by medium. */
static void count(const struct object *o, unsigned *dram, unsigned *ssd)
{
	*dram = *ssd = 0;
	for (unsigned i = 0; i < o->nrep; i++)
		if (o->rep[i].seg && !o->rep[i].filling)
			++*(segment_ssd(o->rep[i].seg) ? ssd : dram);
}

void replicate_keep(struct object *o)
{
	unsigned dram, ssd;

	count(o, &dram, &ssd);
	o->want_dram = (uint8_t)dram;
	o->want_ssd = (uint8_t)ssd;
}

/* A replica of @p o to copy from, online and not filling, on @p ssd. */
static struct replica *source(struct object *o, bool ssd)
{
	for (unsigned i = 0; i < o->nrep; i++)
		if (o->rep[i].seg && o->rep[i].seg->online &&
		    !o->rep[i].filling && segment_ssd(o->rep[i].seg) == ssd)
			return &o->rep[i];
	return NULL;
}

/* Drop @p o's replicas of medium @p ssd past @p keep, the last first. */
static void trim(struct stored *s, struct object *o, bool ssd, unsigned keep)
{
	unsigned n = 0;

	for (unsigned i = 0; i < o->nrep; i++)
		if (o->rep[i].seg && !o->rep[i].filling &&
		    segment_ssd(o->rep[i].seg) == ssd && ++n > keep)
			objects_release_replica(s, &o->rep[i]);
	list_del(&o->link);            /* no DRAM one left: ssd_lru */
	list_add_before(&o->link, tier_lru(s, o)->next);
	persist_put(s, o);
}

/* Copy @p o from @p src into a new replica in @p g, or anywhere on
 * medium @p ssd (@p g NULL); the task fails if there is no room. */
static void copy(struct stored *s, struct repl_task *t, struct object *o,
		 struct replica *src, bool ssd, struct segment *g)
{
	unsigned i = (unsigned)(src - o->rep);  /* rep[] may move */

	if (!reserve(o, o->nrep < STORE_REPLICA_MAX ? o->nrep + 1U :
			STORE_REPLICA_MAX) ||
	    !tier_copy(s, o, &o->rep[i], ssd, g)) {
		finish(s, t, o, STORE_TASK_FAILED, "NO_AVAILABLE_HANDLE");
		return;
	}
	set_status(t, STORE_TASK_PENDING, "Waiting for a client");
}

/* A replicate's step: drop the extra replicas, or copy one more. */
static void step_counts(struct stored *s, struct repl_task *t,
			struct object *o, int64_t now)
{
	unsigned dram, ssd;
	struct replica *src;

	count(o, &dram, &ssd);
	if (dram > t->want_dram || ssd > t->want_ssd) {
		if (o->lease_until_ms > now)  /* a reader may be on them */
			return;
		if (dram > t->want_dram)
			trim(s, o, false, t->want_dram);
		if (ssd > t->want_ssd)
			trim(s, o, true, t->want_ssd);
		count(o, &dram, &ssd);
	}
	if (dram >= t->want_dram && ssd >= t->want_ssd) {
		finish(s, t, o, STORE_TASK_SUCCESS,
		       "Task completed successfully");
		return;
	}
	src = source(o, false);
	if (dram >= t->want_dram && !src) {
		finish(s, t, o, STORE_TASK_FAILED,
		       "no DRAM replica to copy to SSD from");
		return;
	}
	if (!src && !(src = source(o, true)))
		return;                /* its segments are offline: wait */
	copy(s, t, o, src, dram >= t->want_dram, NULL);
}

/* The online segment named @p len bytes at @p p, or NULL. */
static struct segment *named(struct stored *s, const char *p, size_t len)
{
	for (size_t i = 0; i < s->nsegs; i++)
		if (s->segs[i]->name_len == len &&
		    !memcmp(s->segs[i]->name, p, len))
			return s->segs[i];
	return NULL;
}

/* @p o's replica in @p g, or NULL. */
static struct replica *in(struct object *o, const struct segment *g)
{
	for (unsigned i = 0; g && i < o->nrep; i++)
		if (o->rep[i].seg == g)
			return &o->rep[i];
	return NULL;
}

/* A copy's or a move's step: a copy into the next target without a
 * replica, then (a move) the source's replica dropped. */
static void step_targets(struct stored *s, struct repl_task *t,
			 struct object *o, int64_t now)
{
	const char *name = t->key + t->klen + t->src_len;
	struct segment *from = named(s, t->key + t->klen, t->src_len);
	struct replica *src = in(o, from);

	for (unsigned i = 0; i < t->ntarget; name += t->tlen[i++]) {
		struct segment *g = named(s, name, t->tlen[i]);
		struct replica *r;

		if (!g) {
			finish(s, t, o, STORE_TASK_FAILED,
			       "SEGMENT_NOT_FOUND");
			return;
		}
		if (in(o, g))
			continue;
		/* a move copies from its source when it can */
		r = src && src->seg->online &&
		    (!segment_ssd(src->seg) || !segment_ssd(g)) ? src : NULL;
		if (!r && !(r = source(o, false)) && !segment_ssd(g))
			r = source(o, true);
		if (!r && segment_ssd(g) && !source(o, true)) {
			return;        /* its segments are offline: wait */
		} else if (!r) {
			finish(s, t, o, STORE_TASK_FAILED,
			       "no DRAM replica to copy to SSD from");
			return;
		}
		copy(s, t, o, r, segment_ssd(g), g);
		return;
	}
	if (t->type == STORE_TASK_REPLICA_MOVE && src) {
		if (o->lease_until_ms > now)  /* a reader may be on it */
			return;
		objects_release_replica(s, src);
		list_del(&o->link);
		list_add_before(&o->link, tier_lru(s, o)->next);
		persist_put(s, o);
	}
	replicate_keep(o);
	finish(s, t, o, STORE_TASK_SUCCESS, "Task completed successfully");
}

/* One step of @p t. */
static void step(struct stored *s, struct repl_task *t, int64_t now)
{
	struct store_str key = { t->key, t->klen };
	struct object *o = objects_readable(s, &key);
	bool given;

	if (!o || o->state != OBJ_COMPLETE || o->version != t->version) {
		finish(s, t, NULL, STORE_TASK_FAILED, "OBJECT_NOT_FOUND");
		return;
	}
	if (tier_copying(o, &given, t->client)) {
		if (given)
			set_status(t, STORE_TASK_PROCESSING, "Copying");
		return;
	}
	if (o->task)                   /* an offload or promotion first */
		return;
	if (t->type == STORE_TASK_REPLICATE)
		step_counts(s, t, o, now);
	else
		step_targets(s, t, o, now);
}

void replicate_tick(struct stored *s, int64_t now)
{
	/* the first STEP_MAX, each moved to the end: the next tick goes
	 * on with the others */
	for (unsigned n = 0; n < STEP_MAX && n < s->repl_nactive; n++) {
		struct repl_task *t = container_of(s->repl_active.next,
						   struct repl_task, link);

		list_del(&t->link);
		list_add_before(&t->link, &s->repl_active);
		step(s, t, now);
	}
}

void replicate_copy_failed(struct stored *s, struct object *o)
{
	struct repl_task *t = (o->flags & OBJ_REPLICATING) ?
			      active_of(s, o) : NULL;

	if (t && ++t->fails >= MAX_FAILS)
		finish(s, t, o, STORE_TASK_FAILED, "TRANSFER_FAIL");
}

void replicate_lost(struct stored *s, struct object *o)
{
	unsigned dram, ssd;

	if (o->state != OBJ_COMPLETE || o->newer ||
	    (o->flags & OBJ_REPLICATING) || stripe_any(o))
		return;
	count(o, &dram, &ssd);
	if (dram >= o->want_dram && ssd >= o->want_ssd)
		return;
	if (!task_new(s, o, STORE_TASK_REPLICATE, NULL)) {
		xfer_log(XFER_LOG_WARN, "xfer-stored: %zu replication tasks "
			 "at work: a lost replica is not made again",
			 s->repl_nactive);
		return;
	}
	s->repl_repairs++;
}

/* Is @p o one a task may work on? @return 0, -704, -703, -600 (a
 * striped object: its replicas are not copied, docs/STORE.md). */
static int32_t workable(const struct object *o)
{
	if (!o || (o->state == OBJ_COMPLETE && !objects_visible(o)))
		return MC_OBJECT_NOT_FOUND;
	if (stripe_any(o))
		return MC_INVALID_PARAMS;
	return o->state == OBJ_COMPLETE ? 0 : MC_REPLICA_IS_NOT_READY;
}

/* Start a task of @p type on @p o (one at work on it fails): its id in
 * @p id. @return 0, -1401, -1. */
static int32_t start(struct stored *s, struct object *o, uint8_t type,
		     const struct store_msg *req, uint64_t *id)
{
	struct repl_task *t;

	if ((o->flags & OBJ_REPLICATING) && (t = active_of(s, o)))
		finish(s, t, o, STORE_TASK_FAILED, "replaced by a newer task");
	if (s->repl_nactive >= ACTIVE_MAX)
		return MC_TASK_PENDING_LIMIT_EXCEEDED;
	t = task_new(s, o, type, req);
	if (!t)
		return MC_INTERNAL_ERROR;
	*id = t->id;
	step(s, t, stored_now_ms());
	return 0;
}

static int32_t request_one(struct stored *s, const struct store_msg *req,
			   const struct store_item *it, uint64_t *id)
{
	struct object *o = objects_readable(s, &it->key);
	unsigned want = (unsigned)req->replicas + req->ssd_replicas;
	int32_t err = workable(o);

	if (!want || want > STORE_REPLICA_MAX)
		return MC_INVALID_PARAMS;
	if (err)
		return err;
	o->want_dram = req->replicas;
	o->want_ssd = req->ssd_replicas;
	return start(s, o, STORE_TASK_REPLICATE, NULL, id);
}

void replicate_request(struct stored *s, const struct store_msg *req,
		       struct store_msg *rep)
{
	rep->n = req->n;
	for (uint32_t i = 0; i < req->n; i++) {
		rep->items[i].task = 0;
		rep->items[i].err = request_one(s, req, &req->items[i],
						&rep->items[i].task);
	}
}

/* Mooncake's CreateCopyTask and CreateMoveTask. */
static int32_t create(struct stored *s, const struct store_msg *req,
		      uint64_t *id)
{
	struct object *o = objects_readable(s, &req->key);
	bool move = req->task_type == STORE_TASK_REPLICA_MOVE;
	int32_t err = workable(o);
	struct segment *from;

	if (err)
		return err;
	if (req->n > STORE_REPLICA_MAX || (move && req->n != 1) ||
	    (!move && req->preferred.len))
		return MC_INVALID_PARAMS;
	for (uint32_t i = 0; i < req->n; i++) {
		const struct store_str *k = &req->items[i].key;

		if (!k->len || k->len > STORE_NAME_MAX)
			return MC_INVALID_PARAMS;
		if (!named(s, k->p, k->len))
			return MC_SEGMENT_NOT_FOUND;
	}
	if (move) {
		from = named(s, req->preferred.p, req->preferred.len);
		if (!from || from == named(s, req->items[0].key.p,
					   req->items[0].key.len) ||
		    !in(o, from) || in(o, from)->filling)
			return MC_INVALID_PARAMS;  /* no replica to move */
	}
	return start(s, o, req->task_type, req, id);
}

void replicate_create(struct stored *s, const struct store_msg *req,
		      struct store_msg *rep)
{
	rep->task = 0;
	rep->err = create(s, req, &rep->task);
}

static struct repl_task *find_task(struct list *head, uint64_t id)
{
	for (struct list *l = head->next; l != head; l = l->next) {
		struct repl_task *t = container_of(l, struct repl_task, link);

		if (t->id == id)
			return t;
	}
	return NULL;
}

void replicate_query(struct stored *s, const struct store_msg *req,
		     struct store_msg *rep)
{
	struct repl_task *t = find_task(&s->repl_active, req->task);

	/* every field is encoded, an error's too: none left from before */
	rep->task = rep->created_ms = rep->updated_ms = 0;
	rep->task_type = rep->task_status = 0;
	memset(rep->client, 0, STORE_ID_LEN);
	rep->message = (struct store_str){ "", 0 };
	if (!t)
		t = find_task(&s->repl_done, req->task);
	if (!t) {
		rep->err = MC_TASK_NOT_FOUND;
		return;
	}
	rep->task = t->id;
	rep->task_type = t->type;
	rep->task_status = t->status;
	rep->created_ms = (uint64_t)t->created_ms;
	rep->updated_ms = (uint64_t)t->updated_ms;
	memcpy(rep->client, t->client, STORE_ID_LEN);
	rep->message = (struct store_str){ t->msg, (uint16_t)strlen(t->msg) };
}
