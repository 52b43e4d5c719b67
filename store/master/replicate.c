/*
 * xfer-stored's replication tasks: an object's replica counts changed
 * (the store design's Replicate(key, {dram_replicate_num,
 * nvmeof_replicate_num})), and replicas lost with a segment (a client
 * expired at --client_ttl, an unmount) made again while the object asks
 * for more than remain. A task is Mooncake's (QueryTask): an id, a type,
 * PENDING -> PROCESSING -> SUCCESS or FAILED, when it was made and last
 * changed, the client it was given to and a message.
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

static struct repl_task *task_new(struct stored *s, struct object *o,
				  uint8_t type)
{
	struct repl_task *t;

	if (s->repl_nactive >= ACTIVE_MAX ||
	    !(t = calloc(1, sizeof(*t) + o->klen)))
		return NULL;
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

/* One step of @p t. */
static void step(struct stored *s, struct repl_task *t, int64_t now)
{
	struct store_str key = { t->key, t->klen };
	struct object *o = objects_readable(s, &key);
	unsigned dram, ssd;
	struct replica *src;
	bool given, from_ssd;

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
	from_ssd = segment_ssd(src->seg);
	/* rep[] may move: the source is found again */
	if (!reserve(o, o->nrep < STORE_REPLICA_MAX ? o->nrep + 1U :
			STORE_REPLICA_MAX) ||
	    !tier_copy(s, o, source(o, from_ssd), dram >= t->want_dram)) {
		finish(s, t, o, STORE_TASK_FAILED, "NO_AVAILABLE_HANDLE");
		return;
	}
	set_status(t, STORE_TASK_PENDING, "Waiting for a client");
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
	    (o->flags & OBJ_REPLICATING))
		return;
	count(o, &dram, &ssd);
	if (dram >= o->want_dram && ssd >= o->want_ssd)
		return;
	if (!task_new(s, o, STORE_TASK_REPLICATE)) {
		xfer_log(XFER_LOG_WARN, "xfer-stored: %zu replication tasks "
			 "at work: a lost replica is not made again",
			 s->repl_nactive);
		return;
	}
	s->repl_repairs++;
}

static int32_t request_one(struct stored *s, const struct store_msg *req,
			   const struct store_item *it, uint64_t *id)
{
	struct object *o = objects_readable(s, &it->key);
	unsigned want = (unsigned)req->replicas + req->ssd_replicas;
	struct repl_task *t;

	if (!want || want > STORE_REPLICA_MAX)
		return MC_INVALID_PARAMS;
	if (!o || (o->state == OBJ_COMPLETE && !objects_visible(o)))
		return MC_OBJECT_NOT_FOUND;
	if (o->state != OBJ_COMPLETE)
		return MC_REPLICA_IS_NOT_READY;
	if ((o->flags & OBJ_REPLICATING) && (t = active_of(s, o)))
		finish(s, t, o, STORE_TASK_FAILED, "replaced by a newer task");
	if (s->repl_nactive >= ACTIVE_MAX)
		return MC_TASK_PENDING_LIMIT_EXCEEDED;
	o->want_dram = req->replicas;
	o->want_ssd = req->ssd_replicas;
	t = task_new(s, o, STORE_TASK_REPLICATE);
	if (!t)
		return MC_INTERNAL_ERROR;
	*id = t->id;
	step(s, t, stored_now_ms());
	return 0;
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
