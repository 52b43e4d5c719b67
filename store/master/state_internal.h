/*
 * The records behind struct stored, shared by segments.c (clients,
 * segments, the tick, dispatch), objects.c (objects, puts, gets,
 * eviction) and persist.c (the journal: loading, changes, commits).
 * Lists are circular, with a head that is no element.
 */
#ifndef XFER_STORED_STATE_INTERNAL_H
#define XFER_STORED_STATE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "store/master/master_internal.h"
#include "util/container_internal.h"

struct event;
struct journal;
struct store_alloc;
struct flushed;

/* Offsets and sizes in a segment are multiples of this. */
#define SEG_ALIGN 64
/* Most live allocations of one segment: one per 4 KiB, within 2^24. */
#define SEG_ALLOCS_MAX (1u << 24)

struct list {
	struct list *prev, *next;
};

static inline void list_init(struct list *h)
{
	h->prev = h->next = h;
}

static inline bool list_empty(const struct list *h)
{
	return h->next == h;
}

/* Insert @p x before @p at (at the tail when @p at is the head). */
static inline void list_add_before(struct list *x, struct list *at)
{
	x->prev = at->prev;
	x->next = at;
	at->prev->next = x;
	at->prev = x;
}

static inline void list_del(struct list *x)
{
	x->prev->next = x->next;
	x->next->prev = x->prev;
	x->prev = x->next = x;
}

struct client {
	struct list link;              /* stored.clients */
	uint8_t id[STORE_ID_LEN];
	int64_t last_ping_ms;
	struct list segments;          /* segment.in_client */
};

/*
 * A segment is online (in stored.segs, with an allocator) or, restored
 * from the journal, offline (on stored.offline, no allocator) until its
 * client mounts it again with the same identity.
 */
struct segment {
	struct list in_client;
	size_t index;                  /* in stored.segs, when online */
	struct list in_offline;        /* stored.offline, when offline */
	bool online;
	int64_t sid;                   /* its journal row; 0 without one */
	uint8_t id[STORE_ID_LEN];
	struct client *client;
	char *name;                    /* the owner's engine segment */
	uint16_t name_len;
	uint64_t base, size;
	uint8_t medium;                /* STORE_MEDIUM_*, set by each mount */
	struct store_alloc *alloc;     /* NULL while offline */
	struct list replicas;          /* replica.in_seg; by offset while
					  offline */
};

struct object;
struct tier_task;

struct replica {
	struct list in_seg;
	struct object *obj;
	struct segment *seg;           /* NULL once its segment is gone */
	uint64_t off;                  /* in the segment */
	uint32_t alloc_id;             /* while the segment is online */
	bool filling;                  /* a tier copy writes it (tier.c):
					  not read, not journaled */
	/* a shard of a striped replica (stripe.c): its index and the
	 * replica's count, its buffers side by side in rep[] from index 0;
	 * parts 0 or 1: a whole replica */
	uint8_t part, parts;
};

enum obj_state { OBJ_PENDING, OBJ_COMPLETE, OBJ_DISCARDED };

/* object.flags beside the pins: an upsert in progress that has no
 * journal row (the row of its key is the older object's until it ends) */
#define OBJ_UNLOGGED 0x80
/* ... its rep[] is an array of its own (replicate.c grew it) */
#define OBJ_REP_HEAP 0x20
/* ... a replication task works on it (replicate.c) */
#define OBJ_REPLICATING 0x40

struct object {
	struct object *hnext;          /* hash chain (not when discarded) */
	uint64_t hash;
	/* stored.pending, .lru (front: most recent) or .discarded */
	struct list link;
	uint8_t writer[STORE_ID_LEN];
	uint64_t len;
	uint64_t version;              /* set when its put ends; 0 before */
	int64_t put_start_ms, lease_until_ms;
	int64_t free_at_ms;            /* when discarded: freed then */
	/* an upsert in progress (newer, in the table) and the complete
	 * object it replaces when it ends (older, out of the table, still
	 * what readers of the key get) */
	struct object *older, *newer;
	uint8_t state, flags, nrep, nlive;
	uint8_t cap;                   /* room in rep[] */
	uint8_t hits;                  /* gets while only on SSD (tier.c) */
	/* the replicas its put or last replicate asked for (DRAM, SSD):
	 * replicate.c makes them again when a segment goes; 0, 0: none
	 * asked (restored from the journal) */
	uint8_t want_dram, want_ssd;
	uint16_t klen;
	struct tier_task *task;        /* a copy between tiers, or NULL */
	struct replica *rep;           /* nrep, after the key */
	char key[];
};

/* Calls of one type: those of one key (or of none), and batches. */
struct stored_count {
	uint64_t req, fail;
	uint64_t batch, batch_fail, batch_partial, items, failed_items;
};

/* What /metrics reports (metrics.c), Mooncake's master's counters. */
struct stored_stats {
	struct stored_count calls[STORE_TYPE_END];
	uint64_t evict_passes, evict_passes_ok, evicted, evicted_bytes;
	uint64_t discarded, released, commits;
	uint64_t alloc_failures;       /* put_start keys refused with -200 */
	uint64_t soft_pinned;          /* objects now */
	double evict_cpu_max_s;        /* the costliest eviction pass */
	double commit_max_s;           /* the slowest journal commit */
};

struct stored {
	struct event_base *base;
	struct stored_cfg cfg;
	struct event *tick, *evict_ev;
	struct list clients;
	struct segment **segs;         /* online */
	size_t nsegs, segs_cap;
	struct list offline;           /* segment.in_offline */
	int64_t restore_until_ms;      /* offline segments dropped then */
	struct journal *journal;       /* NULL: none, or shutting down */
	struct event *commit_ev;       /* active while changes wait */
	void (*committed)(void *arg);
	void *committed_arg;
	bool (*gate)(void *arg);       /* stored_set_gate() */
	void *gate_arg;
	bool gated;                    /* a commit waits for the gate */
	bool failed;                   /* the journal could not be written */
	struct stored_stats stats;
	size_t nclients;
	uint64_t capacity, used;       /* bytes over every DRAM segment */
	uint64_t ssd_capacity, ssd_used;
	uint64_t offloading;           /* DRAM bytes that go once copied */
	struct list tier_tasks;        /* tier_task.link (tier.c) */
	uint64_t offloaded, promoted;  /* copies done */
	uint64_t evict_left;           /* bytes this eviction still frees */
	struct object **buckets;
	size_t nbuckets, nobjects;
	struct list pending, lru, discarded;
	struct list ssd_lru;           /* complete, with no DRAM replica */
	void **run;                    /* objects.c's scratch: a run to evict */
	uint64_t rng;
	uint64_t version;              /* the last put that ended */
	struct flushed *flushed;       /* flush.c's */
	/* replicate.c: tasks at work (oldest first) and finished ones
	 * kept for query_task (oldest first) */
	struct list repl_active, repl_done;
	size_t repl_nactive, repl_ndone;
	uint64_t repl_next;            /* the last task id given */
	uint64_t repl_repairs;         /* tasks made for lost replicas */
};

/** Monotonic milliseconds. */
int64_t stored_now_ms(void);

/* ---- segments.c ---- */

/** The client of id @p id, made (last ping @p now) if unknown, or NULL
 *  (no memory). */
struct client *client_get(struct stored *s, const uint8_t *id, int64_t now);

/** Bring offline segment @p g online: an allocator holding its replicas'
 *  ranges (listed by offset). @return 0, -ENOMEM. */
int segment_remount(struct stored *s, struct segment *g);

/** Drop segment @p g (online or not) and every replica in it. */
void segment_free(struct stored *s, struct segment *g);

/* ---- objects.c ---- */

/** FNV-1a of @p n bytes at @p p: the hash of the key tables. */
uint64_t fnv1a(const char *p, size_t n);

/** Set up and free the object table. @return 0, -ENOMEM. */
int objects_init(struct stored *s);
void objects_fini(struct stored *s);

/** A zeroed object for @p key with room for @p nrep replicas, or NULL. */
struct object *objects_alloc(const struct store_str *key, unsigned nrep);

/** Enter @p o (key, state and replicas set) in the table and on the
 *  list its state says. */
void objects_insert(struct stored *s, struct object *o);

/** The object of @p key (complete or in progress), or NULL. */
struct object *objects_lookup(struct stored *s, const struct store_str *key);

/** Does @p o have a replica in an online segment? */
bool objects_visible(const struct object *o);

/** Replica @p r's segment is going: drop it; an object left with no
 *  replica goes too (a copy into another one is cancelled with it).
 *  @return whether the object is still there. */
bool objects_drop_replica(struct stored *s, struct replica *r);

/** Move puts older than the discard timeout aside and free those older
 *  than the release timeout. */
void objects_sweep(struct stored *s, int64_t now);

/* ---- evict.c ---- */

/** Evict (bounded work) while above the watermark. */
void objects_evict_watermark(struct stored *s);

/** Is DRAM use (less what offloads in flight free) past the watermark? */
bool objects_above_watermark(const struct stored *s);

/** Evict in the next pass of the loop. */
void objects_evict_soon(struct stored *s);

/** Free up to @p target bytes in LRU order, leased, hard-pinned and
 *  copying objects skipped, soft-pinned ones only in a second pass.
 *  @return bytes freed. */
uint64_t evict(struct stored *s, uint64_t target);

/**
 * Make room for one DRAM replica of @p len bytes when no segment has a
 * free range that large: from the least recently used object that may
 * go, the allocator looks for a run of neighbours of one of its
 * replicas that may all go and would merge into such a range; the first
 * found is evicted. Work is bounded by *@p visits (objects and ranges
 * looked at, shared by the items of one request).
 * @return whether a run was evicted.
 */
bool evict_run(struct stored *s, uint64_t len, uint32_t *visits);

void objects_put_start(struct stored *s, const struct store_msg *req,
		       struct store_msg *rep);
void objects_put_end(struct stored *s, const struct store_msg *req,
		     struct store_msg *rep, bool revoke);
void objects_query(struct stored *s, const struct store_msg *req,
		   struct store_msg *rep, bool exist);
void objects_remove(struct stored *s, const struct store_msg *req,
		    struct store_msg *rep);
int64_t objects_remove_all(struct stored *s, bool force);

/** The object readers of @p key get: a complete one, the one an upsert
 *  in progress replaces, or one in progress; NULL if none. */
struct object *objects_readable(struct stored *s, const struct store_str *key);

/** Remove the object @p o (not leased, or @p force): the same checks and
 *  codes as a remove of its key. @return 0 or an MC_ code. */
int objects_remove_one(struct stored *s, struct object *o, bool force,
		       int64_t now);

/* ---- versions.c ---- */

/** Remove every complete object whose key matches @p req->pattern
 *  (POSIX extended, anywhere in the key), leased ones only if
 *  req->force. @return how many, or MC_INVALID_PARAMS (a pattern that
 *  does not compile). */
int64_t versions_remove_regex(struct stored *s, const struct store_msg *req);

/** Mooncake's BatchReplicaClear: per key, drop the replicas of a complete
 *  object the client put, not leased, in segment req->preferred (all of
 *  them, the object gone, when that is empty, or when none would be
 *  left). Per key 0, or -704, -703, -601 (another client's), -706
 *  (leased), -710 (none in that segment). */
void versions_replica_clear(struct stored *s, const struct store_msg *req,
			    struct store_msg *rep);
/** Is @p g an SSD segment (what the watermark does not count)? */
static inline bool segment_ssd(const struct segment *g)
{
	return g->medium == STORE_MEDIUM_SSD;
}

/** Count @p g's allocation of @p len bytes (@p sign +1) or its release
 *  (-1) in the used bytes of its medium. */
void segment_account(struct stored *s, const struct segment *g,
		     uint64_t len, int sign);

/** Allocate a replica of @p o (a slot free in rep[]) in @p g. @return it,
 *  or NULL (no slot, no room, or @p o already has one there). */
struct replica *objects_place_in(struct stored *s, struct object *o,
				 struct segment *g);

/** objects_place_in() of @p len bytes (a shard), whole replica marks
 *  left to the caller. */
struct replica *objects_place_len(struct stored *s, struct object *o,
				  struct segment *g, uint64_t len);

/** Release replica @p r's range; the object stays (it has others). */
void objects_release_replica(struct stored *s, struct replica *r);

/** Delete @p o, from the journal too. @return DRAM bytes freed. */
uint64_t objects_delete(struct stored *s, struct object *o);

/* ---- stripe.c: replicas cut into shards on distinct segments ---- */

/** Bytes of buffer @p r of @p o: the object's, or its shard's. */
uint64_t stripe_len(const struct object *o, const struct replica *r);

/** Shards per DRAM replica of an object of @p len bytes, @p want DRAM
 *  and @p ssd SSD replicas: 1 (whole) unless --dram_shard_size is set,
 *  @p len is over it and enough DRAM segments are online. */
unsigned stripe_parts(const struct stored *s, uint64_t len, unsigned want,
		      unsigned ssd);

/** Up to @p want striped replicas of @p o, @p parts shards each, every
 *  buffer on a segment of its own (@p preferred holds the first); a
 *  replica that does not fit whole is given back. @return how many. */
unsigned stripe_place(struct stored *s, struct object *o, unsigned want,
		      unsigned parts, const struct store_str *preferred);

/** Is the replica starting at rep[@p i] readable: every buffer in an
 *  online segment, none filling? */
bool stripe_ready(const struct object *o, unsigned i);

/** The wire form of the replica starting at rep[@p i] into @p out (room
 *  for its parts). @return its buffers. */
unsigned stripe_wire(const struct object *o, unsigned i,
		     struct store_replica *out);

/** Has @p o a striped replica? Replication tasks refuse it, and its
 *  lost replicas are not made again (replicate.c). */
bool stripe_any(const struct object *o);

/** The first buffer of the replica that @p r belongs to. */
static inline struct replica *stripe_head(struct replica *r)
{
	return r->parts > 1 ? r - r->part : r;
}

/* ---- tier.c: copies between DRAM and SSD segments ---- */

/** The list by last use that complete object @p o belongs on: lru, or
 *  ssd_lru if it has no DRAM replica (DRAM eviction skips those). */
struct list *tier_lru(struct stored *s, const struct object *o);

/** Evict objects that lie only on SSD, least recently used first, until
 *  an SSD segment may hold @p len bytes more (--enable_disk_eviction).
 *  @return whether any went. */
bool tier_ssd_room(struct stored *s, uint64_t len);

/** The room in rep[] an object of @p nrep replicas is given. */
unsigned tier_slots(const struct stored *s, unsigned nrep);

/** Eviction chose @p o: drop its DRAM replicas if an SSD one holds it,
 *  offload it, or delete it. @return the DRAM bytes freed or to be
 *  freed once its copy is done. */
uint64_t tier_evict(struct stored *s, struct object *o);

/** A put of @p o ended (eager offload). */
void tier_completed(struct stored *s, struct object *o);

/** A query found @p o (complete). */
void tier_hit(struct stored *s, struct object *o);

/** Replica @p r of @p o goes: a copy from or into it is cancelled. */
void tier_forget(struct stored *s, struct object *o, struct replica *r);

/** Copies given out longer than their timeout fail. */
void tier_sweep(struct stored *s, int64_t now);

void tier_poll(struct stored *s, const struct store_msg *req,
	       struct store_msg *rep);
void tier_done(struct stored *s, const struct store_msg *req,
	       struct store_msg *rep);

/* ---- flush.c: the versions in the slower tier ---- */

/** Set up the table, loading the journal's rows. @return 0, -ENOMEM,
 *  -EINVAL or -EIO (a message in @p err). */
int flush_init(struct stored *s, char *err, size_t errlen);
void flush_fini(struct stored *s);

/** The version of @p key the tier holds, or 0. */
uint64_t flush_version(const struct stored *s, const struct store_str *key);

/** STORE_FLUSHED: per key, raise its recorded version to the item's (0:
 *  only read it); answer the version recorded, or -600 (an empty key, a
 *  version never given) or -1 (no memory). */
void flush_report(struct stored *s, const struct store_msg *req,
		  struct store_msg *rep);

/** Make a copy of @p o from its ready replica @p src into a new one,
 *  filling, in segment @p g, or (@p g NULL) on a segment of medium
 *  @p ssd that @p o is not in yet, taken by the owner of @p src (or of
 *  the new one, when @p src is on SSD). @return whether a copy was made
 *  (false: no room, or @p o is in @p g already). */
bool tier_copy(struct stored *s, struct object *o, struct replica *src,
	       bool ssd, struct segment *g);

/** Is @p o's copy in flight one of tier_copy()'s? Then whether a poll
 *  took it, and by whom (@p client, STORE_ID_LEN bytes). */
bool tier_copying(const struct object *o, bool *given, uint8_t *client);

/* ---- replicate.c: replica counts changed, lost ones made again ---- */

/** Set up and free the tasks. */
void replicate_init(struct stored *s);
void replicate_fini(struct stored *s);

/** replicate: per key a task that brings the object to req->replicas
 *  DRAM and req->ssd_replicas SSD replicas (its id in the item's task),
 *  or -704, -703, -600, -1401. */
void replicate_request(struct stored *s, const struct store_msg *req,
		       struct store_msg *rep);

/** create_task: a copy of req->key into the segments named by the
 *  items (REPLICA_COPY), or its replica in segment req->preferred moved
 *  into the one item's (REPLICA_MOVE); the task id in rep->task, or
 *  rep->err -704, -703, -600, -101, -1401. */
void replicate_create(struct stored *s, const struct store_msg *req,
		      struct store_msg *rep);

/** query_task of req->task into @p rep, or rep->err -1400. */
void replicate_query(struct stored *s, const struct store_msg *req,
		     struct store_msg *rep);

/** A replica of @p o went with its segment: a task makes it again if
 *  the object asked for more than are left. */
void replicate_lost(struct stored *s, struct object *o);

/** What @p o holds now is what it asks for (its replicas were cleared
 *  on purpose). */
void replicate_keep(struct object *o);

/** A copy of tier_copy() for @p o failed. */
void replicate_copy_failed(struct stored *s, struct object *o);

/** Move tasks on (the tick): copies to start, replicas to drop. */
void replicate_tick(struct stored *s, int64_t now);

/* ---- persist.c: the journal (no-ops without one) ---- */

/** Load the journal into the empty state: clients, their segments
 *  offline, objects. @return 0, or -errno with a message in @p err. */
int persist_load(struct stored *s, char *err, size_t errlen);

/** Drop the offline segments whose time to come back is over. */
void persist_expire(struct stored *s, int64_t now);

void persist_mount(struct stored *s, struct segment *g);
void persist_unmount(struct stored *s, const struct segment *g);
void persist_put(struct stored *s, const struct object *o);
/** The put of @p o ended: its row complete, with its version, which is
 *  also kept as the last one given (the counter outlives its objects). */
void persist_complete(struct stored *s, const struct object *o);
void persist_del(struct stored *s, const struct object *o);

#endif
