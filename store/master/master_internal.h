/*
 * xfer-stored's state: clients, their mounted segments (each with an
 * allocator, store/alloc.c), and the objects whose replicas live in them.
 * One event_base owns all of it (no locks): the connections' requests
 * (conn.c) and the timers that expire clients, discard stale puts and
 * evict call in here in turn. Semantics and error numbers are Mooncake's
 * master's (docs/PROTOCOL.md §7).
 */
#ifndef XFER_STORED_MASTER_INTERNAL_H
#define XFER_STORED_MASTER_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "store/proto_internal.h"

/* Mooncake's ErrorCode numbers (its mooncake-store/include/types.h). */
enum {
	MC_INTERNAL_ERROR = -1,
	MC_SEGMENT_NOT_FOUND = -101,
	MC_SEGMENT_ALREADY_EXISTS = -102,
	MC_NO_AVAILABLE_HANDLE = -200,
	MC_INVALID_PARAMS = -600,
	MC_ILLEGAL_CLIENT = -601,
	MC_INVALID_WRITE = -700,
	MC_REPLICA_IS_NOT_READY = -703,
	MC_OBJECT_NOT_FOUND = -704,
	MC_OBJECT_ALREADY_EXISTS = -705,
	MC_OBJECT_HAS_LEASE = -706,
	MC_REPLICA_NOT_FOUND = -710,
	/* xfer's own: no version of the object is as new as asked */
	MC_VERSION_TOO_OLD = -720,
	MC_TASK_NOT_FOUND = -1400,
	MC_TASK_PENDING_LIMIT_EXCEEDED = -1401,
};

/* put_start flags (ReplicateConfig): pins keep an object from eviction,
 * a soft pin only until nothing else is left to evict. */
#define STORED_SOFT_PIN 1
#define STORED_HARD_PIN 2
/* upsert: an object of the key is replaced by this put once it ends
 * (readers see the old one until then), a put in progress preempted */
#define STORED_UPSERT 4

/* What the flags set (main.c). */
struct stored_cfg {
	uint64_t lease_ms;             /* --default_kv_lease_ttl */
	double high_watermark;         /* --eviction_high_watermark_ratio */
	double evict_ratio;            /* --eviction_ratio */
	uint64_t client_ttl_ms;        /* --client_ttl */
	uint64_t discard_ms;           /* --put_start_discard_timeout_sec */
	uint64_t release_ms;           /* --put_start_release_timeout_sec */
	bool offload;                  /* --enable_offload */
	bool offload_on_evict;         /* --offload_on_evict */
	bool promotion_on_hit;         /* --promotion_on_hit */
	unsigned promotion_threshold;  /* --promotion_admission_threshold */
	bool disk_eviction;            /* --enable_disk_eviction */
	uint64_t shard_size;           /* --dram_shard_size: 0, no stripes */
};

struct event_base;
struct journal;
struct stored;

/**
 * The state, with its timers on @p base (a tick every 100 ms: client
 * expiry, stale puts; eviction when above the watermark). @p cfg is
 * copied. With @p journal (kept, not owned), what it holds is loaded
 * first: its segments wait offline for their clients to mount them
 * again, and every change is journaled from then on.
 * @return it, or NULL with errno (ENOMEM; EINVAL, EIO: the journal could
 *         not be loaded) and a message in @p err (@p errlen bytes).
 */
struct stored *stored_new(struct event_base *base,
			  const struct stored_cfg *cfg, struct journal *journal,
			  char *err, size_t errlen);

/** Free everything (NULL is fine); nothing more is journaled. With the
 *  base stopped or on its thread. */
void stored_free(struct stored *s);

/**
 * Call @p cb(@p arg) after each commit of the journal: the answers held
 * while it was open (stored_pending()) may go out then.
 */
void stored_set_committed(struct stored *s, void (*cb)(void *arg),
			  void *arg);

/**
 * Are changes waiting for the journal's commit? An answer given now must
 * wait for it: the commit runs once the events of this pass of the loop
 * are done, and calls the committed callback.
 */
bool stored_pending(const struct stored *s);

/**
 * After each commit, ask @p gate(@p arg) whether the answers it holds
 * must wait longer (--sync_standby: until a standby has the commit,
 * store/master/stream.c). While they wait, stored_held() is true and no
 * request is served (a later commit's answer must not overtake); then
 * stored_release() lets them go, calling the committed callback.
 */
void stored_set_gate(struct stored *s, bool (*gate)(void *arg), void *arg);
void stored_release(struct stored *s);
bool stored_held(const struct stored *s);

/** Did a commit fail? The loop was then broken: the master must exit
 *  without answering what waits (its clients retry a restarted one). */
bool stored_failed(const struct stored *s);

/**
 * Answer request @p req (decoded, a request of a known type) into
 * @p rep: header (type, reply flag, seq) and fields. Strings in @p rep
 * point into @p req or the state, valid until the next call.
 */
void stored_handle(struct stored *s, const struct store_msg *req,
		   struct store_msg *rep);

#endif
