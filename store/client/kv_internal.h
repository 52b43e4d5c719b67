/*
 * The store's client (include/xfer/store.h): what its files share.
 *
 *   client.c  new and free, the own segment and staging buffer, mount,
 *             the ping timer
 *   conn.c    the connection to the master: connect, prove the secret,
 *             frames, requests in flight in order, their timeout
 *   op.c      a call's life: keys, requests to the master in chunks of
 *             1024, results, the callback
 *   move.c    the bytes of puts and gets: segments opened by name,
 *             rounds of one xfer batch each through the staging buffer
 *   api.c     the public calls, asynchronous and blocking
 *   api_more.c the calls beyond put, get, exist and remove: upsert,
 *             versions, sync, remove by pattern (through api.c's kv_call)
 *   flush.c   the slower tier: files of flushed objects, the lazy
 *             thread (its own locks) and its reports
 *   mount.c   more DRAM segments of the caller's memory
 *
 * Files call down this list only (conn.c lowest, then move.c, op.c, and
 * client.c and api.c on top: test/check_layers.py); what goes up goes
 * through the function pointers below. Everything but api.c's entry
 * points and new/free runs on the engine's control reactor (kv->r),
 * which owns every field below: no locks.
 */
#ifndef XFER_STORE_KV_INTERNAL_H
#define XFER_STORE_KV_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

#include <xfer/store.h>

#include "reactor/reactor_internal.h"
#include "store/proto_internal.h"
#include "util/auth_internal.h"

#define KV_PING_MS 1000        /* Mooncake's clients ping every second */
#define KV_RPC_TIMEOUT_MS 10000
#define KV_CONNECT_TIMEOUT_MS 10000
#define KV_STAGE_ALIGN 64
#define KV_SEG_ALIGN 64        /* the master's allocation unit */

struct bufferevent;
struct event;
struct store_alloc;
struct xfer_auth;
struct xfer_batch;
struct xfer_wait;
struct kv_op;
struct kv_task;
struct kv_tier;

/* A request in flight: answered (@p rep) or failed (NULL: the connection
 * broke or timed out). */
struct kv_rpc {
	struct kv_rpc *next;
	uint32_t seq;
	uint16_t type;
	int64_t sent_ms;
	void (*done)(struct kv_rpc *r, const struct store_msg *rep);
	struct kv_op *op;              /* the call it serves, if any */
	size_t from, count;            /* its keys: op->sel[from ..] */
};

/* A peer segment, opened by name with the engine (kept for the client's
 * life: an engine gives one id per name). */
enum kv_seg_state { SEG_CLOSED, SEG_OPENING, SEG_OPEN, SEG_FAILED };

struct kv_seg {
	struct kv_seg *next;
	struct xfer_kv *kv;
	int64_t id;
	uint8_t state;
	bool stale;                    /* a transfer failed: refresh first */
	char name[];
};

/* A buffer of a replica: in a peer segment, or the own one (seg NULL:
 * whole replicas only). It holds the key's bytes [lo, hi), the first at
 * addr. A replica is its first buffer and the parts - 1 after it: one
 * (whole), or a striped replica's shards (PROTOCOL.md §7). */
struct kv_rep {
	uint64_t addr;
	struct kv_seg *seg;
	uint64_t lo, hi;
	uint8_t parts;                 /* on the first buffer; 0 after it */
};

enum kv_key_state {
	KEY_DONE,                      /* result is final */
	KEY_MOVE,                      /* bytes to move */
	KEY_MOVED,                     /* put: written, to end */
	KEY_FAILED,                    /* put: a write failed, to revoke */
};

struct kv_key {
	const char *key;               /* in the op's copy */
	uint16_t klen;
	uint8_t state, nrep, cur;      /* get: reading rep[cur] */
	const struct iovec *iov;       /* the caller's parts */
	size_t niov;
	uint64_t len;                  /* put: the value; get: the object */
	uint64_t cap;                  /* get: the parts' room */
	uint64_t moved;                /* bytes of rep[cur] (get) or of
					  every replica (put) moved */
	int64_t lease_until_ms;
	uint64_t version;              /* get: read, or the largest there */
	uint64_t src_off;              /* a ranged get: from this byte */
	bool ranged;                   /* read cap bytes from src_off */
	bool retried;                  /* a failed round was tried again */
	struct kv_rep rep[STORE_REPLICA_MAX];
};

enum kv_kind { KV_PUT, KV_GET, KV_EXIST, KV_SIZE, KV_REMOVE, KV_REMOVE_ALL,
	       KV_SYNC, KV_REMOVE_REGEX, KV_DESC, KV_REPLICA_CLEAR,
	       KV_REPLICATE, KV_QUERY_TASK, KV_CREATE_TASK };

/* One piece of a round: key @p k's bytes [off, off + len) at staging
 * offset @p pos. */
struct kv_piece {
	uint32_t k;
	uint64_t off, len, pos;
	bool failed;
};

struct kv_op {
	struct xfer_job job;           /* start, posted to kv->r */
	struct kv_op *prev, *next;     /* kv->ops */
	struct kv_op *wait_next;       /* kv->stage_wait, kv->resolving */
	struct xfer_kv *kv;
	enum kv_kind kind;
	unsigned flags;                /* XFER_KV_ZERO_COPY */
	bool force, waiting;
	uint8_t replicas, ssd_replicas, pin; /* pin: put_start's flags */
	uint8_t flush;                 /* put: enum xfer_kv_flush */
	char *preferred;               /* or replica_clear's segment */
	char *pattern;                 /* remove_regex */
	uint64_t min_version;          /* get: 0, or the least to read */
	uint64_t *version;             /* get: the caller's, set at the end */
	struct xfer_kv_replica_desc *desc; /* desc: the caller's, per key
					      XFER_KV_REPLICA_MAX */
	uint64_t task_id;              /* query_task */
	struct xfer_kv_task *task;     /* query_task: the caller's */
	uint8_t task_type;             /* create_task */
	char **targets;                /* create_task: one allocation */
	size_t ntargets;
	size_t n;
	struct kv_key *keys;
	char *arena;                   /* the keys' bytes */
	struct iovec *iov;             /* the parts, copied */
	int64_t *results;              /* the caller's, or &one */
	int64_t one;
	xfer_kv_cb cb;
	void *arg;
	/* requests to the master */
	void (*then)(struct kv_op *op);/* once none is in flight */
	size_t *sel, nsel;
	struct kv_rpc *rpcs;
	size_t nrpcs, rpcs_out, rpcs_used;
	int64_t sent_ms;
	/* rounds of bytes */
	struct xfer_batch *batch;
	struct kv_piece *pieces;
	size_t npieces;
	struct kv_task *tasks;         /* a round's, by task index */
	void (*moved)(struct kv_op *op); /* kv_move()'s end */
	uint64_t stage_off, stage_len;
	uint32_t stage_id;
	bool staged;                   /* holds stage_id */
};

/* mount.c: a segment of the caller's memory, registered with the engine
 * while it is in kv->extras. */
struct kv_extra {
	struct kv_extra *next;
	struct xfer_kv *kv;
	uint8_t id[STORE_ID_LEN];
	uint64_t base, size;
	bool ready;                    /* registered: to mount */
	bool mounted, mount_out, unmounting, ends_close;
	bool dropped;                  /* to free once mount_rpc ends */
	struct kv_rpc mount_rpc, unmount_rpc;
	struct xfer_wait *wait;        /* a public call's */
};

struct xfer_kv {
	struct xfer_engine *e;
	bool own_engine;
	struct xfer_reactor *r;
	const struct xfer_auth *auth;
	const char *name;              /* the engine's: our segment's */
	uint8_t client_id[STORE_ID_LEN], segment_id[STORE_ID_LEN];
	uint8_t *seg_mem, *stage_mem;
	uint64_t seg_size, stage_size;
	uint64_t stage_max;            /* the largest round it grants */
	struct store_alloc *stage;
	struct kv_op *stage_wait, **stage_wait_tail;

	/* the master */
	struct kv_disc *disc;          /* found in etcd (discover.c) */
	struct sockaddr_storage addr;
	socklen_t addr_len;
	int fd;                        /* connecting or proving */
	struct event *conn_ev, *tick_ev, *fail_ev;
	struct bufferevent *bev;       /* connected */
	struct xfer_auth_cli auth_cli; /* while proving */
	int64_t conn_started_ms;
	bool mounted, mount_out, ping_out, drained;
	uint32_t seq;
	struct kv_rpc *rpcs, **rpcs_tail;     /* in flight, in order */
	struct kv_rpc *failed, **failed_tail; /* to fail from fail_ev */
	struct kv_rpc ping_rpc, mount_rpc, unmount_rpc;
	struct store_msg *req, *rep;   /* encoding, decoding */
	struct store_buf out;

	/* calls */
	struct kv_op *ops;
	struct kv_seg *segs;
	struct kv_op *resolving;
	atomic_bool closing;
	atomic_bool healthy;           /* the master answered the last ping */
	struct xfer_wait *ready_wait, *close_wait;
	int ready_err;
	struct kv_tier *tier;          /* flush.c's; NULL: none */

	/* ssd.c: the file segment, copies between tiers */
	char *ssd_name;                /* NULL: none */
	uint64_t ssd_base, ssd_size;
	uint8_t ssd_id[STORE_ID_LEN];
	bool ssd_mounted, ssd_mount_out, tier_out;
	struct kv_rpc ssd_mount_rpc, ssd_unmount_rpc, tier_rpc;
	struct xfer_wait *ssd_wait;

	struct kv_extra *extras;       /* mount.c's */

	/* client.c's, for the files below it */
	void (*connected)(struct xfer_kv *kv);
	void (*connect_failed)(struct xfer_kv *kv, int err); /* -errno */
	void (*op_gone)(struct xfer_kv *kv);  /* an op ended */
};

/** Monotonic milliseconds. */
static inline int64_t kv_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/** Does [@p addr, + @p len) lie in the own segment or one of mount.c's
 *  (memory of this process a memcpy reaches)? */
static inline bool kv_own_has(const struct xfer_kv *kv, uint64_t addr,
			      uint64_t len)
{
	uint64_t base = (uintptr_t)kv->seg_mem;

	if (kv->seg_size && addr >= base && addr - base <= kv->seg_size &&
	    len <= kv->seg_size - (addr - base))
		return true;
	for (const struct kv_extra *x = kv->extras; x; x = x->next)
		if (addr >= x->base && addr - x->base <= x->size &&
		    len <= x->size - (addr - x->base))
			return true;
	return false;
}

/* ---- api.c, for api_more.c ---- */

/* A call's arguments, checked by kv_call(). */
struct kv_call {
	enum kv_kind kind;
	size_t n;
	const char *const *keys;
	const struct iovec *iov;
	const size_t *iovcnt;
	unsigned flags;
	const struct xfer_kv_replicate *rc;
	bool force, batch;             /* batch: results[] wanted */
	bool upsert;                   /* put: replace what is there */
	uint64_t min_version;
	uint64_t *version;
	const char *pattern;
	const char *segment;           /* replica_clear: NULL or a name */
	const uint64_t *src_offsets;   /* a ranged get: one per key */
	struct xfer_kv_replica_desc *desc;
	uint8_t replicas, ssd_replicas; /* replicate */
	uint64_t task_id;              /* query_task */
	struct xfer_kv_task *task;
	uint8_t task_type;             /* create_task: copy or move */
	const char *const *targets;    /* create_task: 1..16 names */
	size_t ntargets;
	int64_t *results;
	xfer_kv_cb cb;
	void *arg;
};

/** Check @p c, make its op and post it. @return 0, or as
 *  xfer_kv_put_async() returns. Any thread. */
int kv_call(struct xfer_kv *kv, const struct kv_call *c);

/** kv_call() with a waiter as the callback: @return its result, or what
 *  kv_call() returned, or -EDEADLK on the reactor. */
int64_t kv_call_wait(struct xfer_kv *kv, struct kv_call *c);

/* ---- conn.c ---- */

/** Set up the connection's state (no connection yet). @return 0,
 *  -ENOMEM. */
int kv_conn_init(struct xfer_kv *kv);

/** Start connecting (a no-op while connected or connecting); then
 *  kv->connected() or kv->connect_failed(). */
void kv_conn_start(struct xfer_kv *kv);

/** Close the connection: every request in flight fails. */
void kv_conn_close(struct xfer_kv *kv, const char *why);

/** Free the connection's events (on the reactor, at the end). */
void kv_conn_fini(struct xfer_kv *kv);

/**
 * Send kv->req as a request of @p type for @p r (its done set), which
 * is answered or failed later, never inside this call.
 */
void kv_rpc_send(struct xfer_kv *kv, struct kv_rpc *r, uint16_t type);

/** Mount segment @p id ([@p base, + @p size) of @p medium, the engine
 *  segment @p name) for this client: a STORE_MOUNT on @p r, whose done
 *  the caller set: the own segment's, mount.c's, ssd.c's. */
void kv_mount_send(struct xfer_kv *kv, struct kv_rpc *r, const uint8_t *id,
		   uint64_t base, uint64_t size, uint8_t medium,
		   const char *name);

/** Unmount segment @p id: a STORE_UNMOUNT on @p r, done set as above. */
void kv_unmount_send(struct xfer_kv *kv, struct kv_rpc *r, const uint8_t *id);

/** Fail requests that waited over KV_RPC_TIMEOUT_MS (the tick). */
void kv_conn_check(struct xfer_kv *kv, int64_t now);

/* ---- discover.c ---- */

/** A master address of "etcd://...": set up kv->disc. @return 0; 1 (not
 *  one: a plain host:port); -ENOMEM; -EINVAL (built without etcd,
 *  logged). */
int kv_disc_new(struct xfer_kv *kv, const char *master);

/** On the reactor: open etcd, read and watch the leader's address; each
 *  new one closes the connection and connects there. @return 0, or the
 *  backend's open error. */
int kv_disc_start(struct xfer_kv *kv);

/** Read the address again (the tick, while not connected). */
void kv_disc_check(struct xfer_kv *kv);

/** A connection to the master found failed: try again soon (25 ms,
 *  doubling to 1 s while it fails), not on the next tick. */
void kv_disc_retry(struct xfer_kv *kv);

/** Close etcd (on the reactor; no kv->disc is fine). */
void kv_disc_free(struct xfer_kv *kv);

/* ---- op.c ---- */

/**
 * A call of @p kind on @p n keys, each with its parts of @p iov
 * (@p iovcnt NULL: one each; NULL @p iov: none), both copied; a key's
 * result goes to @p results[i] (NULL: the op's own one). Keys that are
 * empty or too long, and parts whose lengths overflow, get
 * XFER_KV_INVALID_PARAMS at once. @return it, or NULL (ENOMEM).
 */
struct kv_op *kv_op_new(struct xfer_kv *kv, enum kv_kind kind, size_t n,
			const char *const *keys, const struct iovec *iov,
			const size_t *iovcnt, int64_t *results);

/** Copy the @p n names @p names into op->targets. @return 0, -ENOMEM. */
int kv_op_targets(struct kv_op *op, const char *const *names, size_t n);

/** Free an op that was never started. */
void kv_op_free(struct kv_op *op);

/** Post @p op to the reactor, which starts it. */
void kv_op_post(struct kv_op *op);

/** Move @p op's keys (state KEY_MOVE, replicas set) with move.c, then
 *  end it: its callback, as after a master's answer. */
void kv_op_move(struct kv_op *op);

/* ---- flush.c: the slower tier (kv->tier set) ---- */

/** Write put key @p k's version (k->version) into the tier, synced, on
 *  this thread. @return 0, or XFER_KV_FILE_WRITE_FAIL (logged). */
int kv_tier_eager(struct xfer_kv *kv, const struct kv_key *k);

/** Copy put key @p k's bytes onto the lazy thread's queue (waiting while
 *  it is full). @return 0, -ENOMEM. */
int kv_tier_lazy(struct xfer_kv *kv, const struct kv_key *k);

/**
 * Read key @p k from the tier into its parts (@p read; else only its
 * length), if the file there holds its key at version @p want (what the
 * master records) or later.
 * @return its length (k->version set); XFER_KV_OBJECT_NOT_FOUND (no such
 *         file, another key's, or an older version);
 *         XFER_KV_VERSION_TOO_OLD (older than @p min_version);
 *         XFER_KV_INVALID_PARAMS (the parts are too small);
 *         XFER_KV_FILE_READ_FAIL.
 */
int64_t kv_tier_get(struct xfer_kv *kv, struct kv_key *k, uint64_t want,
		    uint64_t min_version, bool read);

/** Stop the lazy thread once it has written what is queued (its last
 *  reports posted to the reactor). Not on the reactor. */
void kv_tier_stop(struct xfer_kv *kv);

/** Free the tier (the thread stopped). */
void kv_tier_free(struct xfer_kv *kv);

/* ---- move.c ---- */

/** Move the bytes of @p op's keys in state KEY_MOVE (those of a put end
 *  KEY_MOVED or KEY_FAILED, those of a get KEY_DONE), then call
 *  @p done. */
void kv_move(struct kv_op *op, void (*done)(struct kv_op *op));

/** Find or make the entry of peer segment @p name (@p len bytes);
 *  NULL on ENOMEM. */
struct kv_seg *kv_seg_get(struct xfer_kv *kv, const char *name,
			  size_t len);

/** Free the segment entries (at the end). */
void kv_segs_free(struct xfer_kv *kv);

/* ---- ssd.c ---- */

/** (Re)mount the file segment, if there is one (after the DRAM one). */
void kv_ssd_mount(struct xfer_kv *kv);

/** Unmount it at the end, if mounted. @return whether a request went
 *  out (its answer ends the close if the DRAM segment is not mounted). */
bool kv_ssd_unmount(struct xfer_kv *kv);

/** Forget the file segment (on the reactor, or at the end; @p arg the
 *  client). */
void kv_ssd_forget(void *arg);

/** The tick: poll the master for copies between tiers. */
void kv_ssd_tick(struct xfer_kv *kv);

/* ---- mount.c ---- */

/** (Re)mount the segments of xfer_kv_mount_segment() (with the own). */
void kv_extra_mount(struct xfer_kv *kv);

/** Unmount them at the end; the last answer ends the close if
 *  @p ends_close. @return whether a request went out. */
bool kv_extra_unmount_all(struct xfer_kv *kv, bool ends_close);

/** Forget them, unregistered unless the engine is the client's own (at
 *  the end, the reactor stopped). */
void kv_extra_free_all(struct xfer_kv *kv);

#endif
