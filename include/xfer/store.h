/*
 * xfer's store client: objects (KV-cache blocks) kept in the memory of the
 * store's clients, their places known to the master, xfer-stored
 * (docs/STORE.md), their bytes moved by the transfer engine. The model is
 * Mooncake Store's (its Client and RealClient): a client lends a segment
 * of its memory to the store and puts, gets, tests and removes objects by
 * key; an object is immutable once its put ends (an upsert replaces it
 * with a new object, a new version, whole).
 *
 * A client (struct xfer_kv) is an engine (the caller's or its own) and a
 * connection to the master on the engine's control reactor, which also
 * runs a timer that pings the master every second (so a busy application
 * cannot starve it). Each call is a chain of steps on that reactor ending
 * in a callback:
 *  - put: the master allocates one buffer per replica on distinct
 *    segments (put_start); one xfer batch writes every replica; put_end
 *    makes the object visible, or put_revoke drops it if a write failed;
 *  - get: the master answers the replicas and grants a lease (query); one
 *    batch reads the first complete replica (the next one if that read
 *    fails); a read that ends after the lease ran out fails with
 *    XFER_KV_LEASE_EXPIRED, since the object may have been removed and
 *    its space reused meanwhile.
 * A replica in the client's own segment is a memcpy. Plain calls (put,
 * get) take any memory and stage it through the client's buffer of
 * buffer_size bytes, piece by piece when an object is larger; the
 * zero-copy calls (put_from, get_into, XFER_KV_ZERO_COPY) move straight
 * from or into memory registered with the engine (xfer_kv_register_buffer()
 * or xfer_register()).
 *
 * Conventions, beyond xfer.h's:
 *  - a call's result is 0 (or a count, a length, 1/0 for exist) or
 *    negative: one of Mooncake's ErrorCode numbers below (what the master
 *    answered, or what the transfer did), or one of three negative
 *    errnos: -ENOMEM (out of memory), -EDEADLK (a blocking call on the
 *    callback base), -ESHUTDOWN (the client is being freed);
 *  - an asynchronous call (*_async) returns 0 and later runs its callback
 *    once, on the engine's callback base (the application's event_base
 *    with xfer_engine_new_on_base(), else the engine's control thread),
 *    never inside the call; if it returns an error the callback never
 *    runs and a batch's results[] is left as it was. Keys are copied by
 *    the call; values and buffers are the caller's and must stay valid,
 *    and untouched by the caller, until the callback;
 *  - a blocking form waits for that callback: called on the callback base
 *    it fails at once with -EDEADLK. It always returns: each step has its
 *    own timeout (10 s for the master's reply, transfer_timeout_ms for a
 *    transfer);
 *  - keys are 1 to 4096 bytes, NUL-ended strings; a batch has at most
 *    1024 keys per request to the master and any number in all.
 */
#ifndef XFER_KV_STORE_H
#define XFER_KV_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <xfer/xfer.h>

#ifdef __cplusplus
extern "C" {
#endif

/** A client of the store. */
struct xfer_kv;

/** Mooncake's ErrorCode numbers (its mooncake-store/include/types.h) that
 *  the calls return. */
enum xfer_kv_error {
	XFER_KV_INTERNAL_ERROR = -1,         /**< the master failed */
	XFER_KV_SEGMENT_NOT_FOUND = -101,
	XFER_KV_SEGMENT_ALREADY_EXISTS = -102,
	/** no space for the object, even after eviction */
	XFER_KV_NO_AVAILABLE_HANDLE = -200,
	XFER_KV_INVALID_PARAMS = -600,       /**< a bad argument */
	XFER_KV_ILLEGAL_CLIENT = -601,
	XFER_KV_INVALID_WRITE = -700,
	XFER_KV_REPLICA_IS_NOT_READY = -703, /**< its put has not ended */
	XFER_KV_OBJECT_NOT_FOUND = -704,
	XFER_KV_OBJECT_ALREADY_EXISTS = -705,
	XFER_KV_OBJECT_HAS_LEASE = -706,     /**< leased: remove refused */
	XFER_KV_LEASE_EXPIRED = -707,        /**< the read outlived its lease */
	XFER_KV_REPLICA_NOT_FOUND = -710,    /**< none in that segment */
	/** xfer's own: no version of the object as new as a get asked */
	XFER_KV_VERSION_TOO_OLD = -720,
	XFER_KV_TRANSFER_FAIL = -800,        /**< a transfer failed */
	XFER_KV_FILE_READ_FAIL = -1102,      /**< the slower tier's file */
	XFER_KV_FILE_WRITE_FAIL = -1103,     /**< the slower tier's file */
	XFER_KV_RPC_FAIL = -900,             /**< the master is unreachable */
	XFER_KV_TASK_NOT_FOUND = -1400,      /**< no such task (or forgotten) */
	XFER_KV_TASK_PENDING_LIMIT_EXCEEDED = -1401, /**< too many at work */
};

/** When a put's object reaches the slower tier (xfer_kv_set_root_fs_dir()),
 *  the three modes of Mooncake Store's design (its ReplicateConfig's
 *  flush). */
enum xfer_kv_flush {
	XFER_KV_FLUSH_NONE = 0,  /**< never */
	/** before the put returns: its file written, synced, renamed and
	 *  reported to the master */
	XFER_KV_FLUSH_EAGER,
	/** later, by a thread of the client, versions in order (some may be
	 *  skipped, none overwrites a later one) */
	XFER_KV_FLUSH_LAZY,
};

/** Mooncake's ReplicateConfig, what a put asks of the master. */
struct xfer_kv_replicate {
	/** DRAM replicas wanted, 0..16, each on a distinct segment; fewer
	 *  are made when fewer segments have room (at least one replica
	 *  of either medium) */
	unsigned replica_num;
	/** kept from eviction until nothing else can be evicted */
	bool with_soft_pin;
	/** never evicted (removed only by a remove call) */
	bool with_hard_pin;
	/** segment name (an engine's name) to hold the first replica,
	 *  when it is mounted and has room; NULL or "": any */
	const char *preferred_segment;
	/** SSD replicas wanted (Mooncake's nof_replica_num), in segments
	 *  mounted with xfer_kv_mount_file(); replica_num + nof_replica_num
	 *  is 1..16 */
	unsigned nof_replica_num;
	/** enum xfer_kv_flush: to the slower tier or not (0: never) */
	unsigned flush;
};

/**
 * Give the client its slower tier: the folder @p dir (local disk, or any
 * POSIX mount shared by the clients: NFS, a FUSE object-store mount),
 * which must exist. Puts with a flush mode write one file per key there
 * (docs/STORE.md, "The slower tier"); a get of an object no longer in
 * DRAM (evicted, removed) whose version the master records as flushed
 * reads it back from there. Mooncake's master hands its clients such a
 * folder (--root_fs_dir); xfer's clients are given it by this call.
 * Call it once, before puts that flush; not on the callback base.
 * @return 0; -EINVAL (NULL or empty @p dir); -EBUSY (already set);
 *         -EDEADLK (on the callback base); -ENOMEM; -errno of opening
 *         @p dir (-ENOENT, -ENOTDIR, -EACCES ...).
 */
XFER_EXPORT
int xfer_kv_set_root_fs_dir(struct xfer_kv *kv, const char *dir);

/** Completion of an asynchronous call: @p result as the blocking form
 *  returns it. Runs once, on the engine's callback base. */
typedef void (*xfer_kv_cb)(struct xfer_kv *kv, int64_t result, void *arg);

/** The flag of the batch calls: every buffer lies in memory registered
 *  with the engine, and moves without staging (Mooncake's put_from,
 *  get_into). */
#define XFER_KV_ZERO_COPY 1u

/**
 * A client of the master at @p master, `host:port` (host a name or a
 * number; xfer-stored's --port, 50051 by default), or
 * `etcd://host:port[,host:port]...`: the leader of masters run with
 * --enable_ha, found under mooncake-store/<cluster_id>/master_view
 * (cluster id $MC_STORE_CLUSTER_ID, else mooncake_cluster) and followed
 * when it changes (calls in flight then fail, XFER_KV_RPC_FAIL; the
 * segment is mounted again there; docs/STORE.md): connect (proving the
 * engine's cluster secret, auth_secret, if it has one), and mount a
 * segment of @p segment_size bytes of this process's memory that the
 * store allocates objects in. The segment is registered with the engine,
 * whose name names it to peers (Mooncake's segment name = its
 * local_hostname), so every engine can open it; buffer_size bytes more
 * are registered as the staging buffer.
 * @param e            the engine to use (not freed with the client: it
 *                     must outlive it), or NULL for one of its own
 * @param cfg          the configuration of its own engine (NULL: the
 *                     defaults); ignored with @p e
 * @param segment_size bytes lent to the store (Mooncake's
 *                     global_segment_size); 0: none, the client only uses
 *                     others' (else at least 64)
 * @param buffer_size  bytes of the staging buffer (Mooncake's
 *                     local_buffer_size) through which plain puts and
 *                     gets move what does not go by memcpy; 0: none (they
 *                     then move only to and from the own segment)
 * @return the client, or NULL with errno: EINVAL (a malformed @p master,
 *         @p segment_size or @p buffer_size 1..63, etcd:// without
 *         etcd in this build), ENOENT (its host
 *         does not resolve), ECONNREFUSED, ETIMEDOUT (the master did not
 *         answer: 10 s to connect, 5 s to prove the secret, 10 s to
 *         mount),
 *         EACCES (the master refused the cluster secret, or
 *         closed the connection while it was proved),
 *         EPROTO (the master refused the mount), ECONNRESET (the
 *         connection broke before the mount was answered), EDEADLK
 *         (called on the callback base of @p e: it waits), ENOMEM, or
 *         the errno of xfer_engine_new() or xfer_register(). Any other
 *         thread.
 */
XFER_EXPORT
struct xfer_kv *xfer_kv_new(struct xfer_engine *e,
			    const struct xfer_config *cfg, const char *master,
			    uint64_t segment_size, uint64_t buffer_size);

/**
 * Free a client: wait for its calls in flight to end (their callbacks
 * run), unmount its segment (best effort: a master that does not answer
 * within 10 s drops it after --client_ttl), close the connection,
 * unregister its memory (waiting for peers' reads of the segment, as
 * xfer_unregister() does) and free it, and its engine if its own.
 * Objects whose replicas lay only in its segment are gone.
 * @return 0 (also for NULL); -EDEADLK on the engine's callback base
 *         (nothing is freed). Not from its callbacks, nor while another
 *         thread calls it.
 */
XFER_EXPORT
int xfer_kv_free(struct xfer_kv *kv);

/**
 * Is the master reachable: connected, and its last answer to a ping or a
 * mount (every second) said yes? (Mooncake's health_check.)
 * @return 1 yes, 0 no. Any thread.
 */
XFER_EXPORT
int xfer_kv_healthy(const struct xfer_kv *kv);

/** The client's engine (its own or the one given). Any thread. */
XFER_EXPORT
struct xfer_engine *xfer_kv_engine(struct xfer_kv *kv);

/**
 * Register [@p addr, @p addr + @p len) with the engine for the
 * zero-copy calls (Mooncake's register_buffer): xfer_register() of it as
 * location "*" without remote access.
 * @return 0, or as xfer_register() (-EINVAL, -EEXIST, -ENOMEM, -EDEADLK
 *         ...). Any thread.
 */
XFER_EXPORT
int xfer_kv_register_buffer(struct xfer_kv *kv, void *addr, size_t len);

/** Unregister a buffer of xfer_kv_register_buffer() (Mooncake's
 *  unregister_buffer). @return as xfer_unregister(). Any thread. */
XFER_EXPORT
int xfer_kv_unregister_buffer(struct xfer_kv *kv, void *addr);

/**
 * Lend bytes [@p offset, @p offset + @p length) of the client's engine's
 * file segment ("nvmeof/<engine name>": the files registered with
 * xfer_register_file(), end to end in registration order, so 0 is the
 * first file's first byte) to the store as an SSD segment (the seed's
 * NVMe-oF segment): the master allocates SSD replicas (nof_replica_num)
 * and offloaded objects in it as it does in DRAM segments. Peers read
 * and write it through the engine: the file itself on this host, this
 * engine's file data port elsewhere. Register the file first, and
 * unregister it only after xfer_kv_free(), which unmounts it (a client's
 * own engine goes with it, its files too); it is mounted again with the
 * DRAM segment. One per client.
 * @return 0; -EINVAL (@p length under 64, or the range overflows);
 *         -EEXIST (one is mounted already); -EDEADLK (on the engine's
 *         callback base); -EPROTO (the master refused the mount);
 *         -ECONNRESET (no connection to the master now); -ETIMEDOUT;
 *         -ENOMEM. Any other thread, not while another calls it on the
 *         same client.
 */
XFER_EXPORT
int xfer_kv_mount_file(struct xfer_kv *kv, uint64_t offset, uint64_t length);

/* ---- put ---- */

/**
 * Put the object @p key: the @p len bytes at @p value, staged through the
 * client's buffer (Mooncake's put). A put of a key that exists, or whose
 * put another client has started, succeeds without writing anything
 * (objects are immutable; Mooncake's). Until its put ends the object is
 * invisible: no reader sees part of it.
 * @param rc  NULL: one replica, no pin, any segment
 * @p cb gets 0; XFER_KV_INVALID_PARAMS (a key that is empty or over 4096
 * bytes, @p len 0, or a replica to write that is not in the own segment
 * while buffer_size is 0: the put is revoked); XFER_KV_NO_AVAILABLE_HANDLE;
 * XFER_KV_TRANSFER_FAIL (a replica could not be written: the put is
 * revoked); XFER_KV_RPC_FAIL; or another error of the master's.
 * @return 0; XFER_KV_INVALID_PARAMS (NULL @p key or @p cb, replica_num 0
 *         or over 16, a preferred segment over 255 bytes); -ENOMEM;
 *         -ESHUTDOWN (the client is being freed). On error @p cb is never
 *         called. Any thread.
 */
XFER_EXPORT
int xfer_kv_put_async(struct xfer_kv *kv, const char *key, const void *value,
		      size_t len, const struct xfer_kv_replicate *rc,
		      xfer_kv_cb cb, void *arg);

/** xfer_kv_put_async() and wait: its callback's result, or what it
 *  returned, or -EDEADLK on the callback base. Any thread. */
XFER_EXPORT
int xfer_kv_put(struct xfer_kv *kv, const char *key, const void *value,
		size_t len, const struct xfer_kv_replicate *rc);

/** xfer_kv_put_async() from @p buf, memory registered with the engine,
 *  without staging (Mooncake's put_from); memory that is not registered
 *  fails with XFER_KV_TRANSFER_FAIL. */
XFER_EXPORT
int xfer_kv_put_from_async(struct xfer_kv *kv, const char *key,
			   const void *buf, size_t len,
			   const struct xfer_kv_replicate *rc, xfer_kv_cb cb,
			   void *arg);

/** xfer_kv_put_from_async() and wait, as xfer_kv_put(). */
XFER_EXPORT
int xfer_kv_put_from(struct xfer_kv *kv, const char *key, const void *buf,
		     size_t len, const struct xfer_kv_replicate *rc);

/**
 * Put @p n objects at once: one put_start for them all (per 1024 keys),
 * one xfer batch (per staging-buffer-full) writing every replica of
 * every key, one put_end and one put_revoke (Mooncake's batch_put_from
 * and batch_put_from_multi_buffers). Object i is keys[i], the
 * concatenation of its @p iovcnt[i] parts taken in order from @p iov
 * (@p iovcnt NULL: one part each).
 * @param flags   0, or XFER_KV_ZERO_COPY
 * @param results n entries, each set to what xfer_kv_put_async() gives
 *                that key; the caller's until the callback
 * @p cb gets 0 if every key's result is 0, else the first that is not.
 * @return 0; XFER_KV_INVALID_PARAMS (@p n 0, a NULL array or key, unknown
 *         flags, or @p rc as xfer_kv_put_async() says: nothing starts);
 *         -ENOMEM; -ESHUTDOWN. On error @p cb is never called. Any
 *         thread.
 */
XFER_EXPORT
int xfer_kv_batch_put_async(struct xfer_kv *kv, size_t n,
			    const char *const *keys, const struct iovec *iov,
			    const size_t *iovcnt, unsigned flags,
			    const struct xfer_kv_replicate *rc,
			    int64_t *results, xfer_kv_cb cb, void *arg);

/** xfer_kv_batch_put_async() and wait: its callback's result (each key's
 *  in @p results), or what it returned, or -EDEADLK on the callback
 *  base. Any thread. */
XFER_EXPORT
int xfer_kv_batch_put(struct xfer_kv *kv, size_t n, const char *const *keys,
		      const struct iovec *iov, const size_t *iovcnt,
		      unsigned flags, const struct xfer_kv_replicate *rc,
		      int64_t *results);

/* ---- get ---- */

/**
 * Read the object @p key into the @p cap bytes at @p buf, staged through
 * the client's buffer (Mooncake's get). Its replicas are tried in turn,
 * the one in the own segment first: a read that fails goes on from the
 * next replica.
 * @p cb gets the object's length in bytes (it was read whole); or
 * XFER_KV_OBJECT_NOT_FOUND; XFER_KV_REPLICA_IS_NOT_READY (its put has not
 * ended); XFER_KV_INVALID_PARAMS (a bad key, an object longer than @p cap,
 * or a replica not in the own segment with buffer_size 0);
 * XFER_KV_LEASE_EXPIRED (the read ended after the lease of the query ran
 * out: the bytes in @p buf may be another object's); XFER_KV_TRANSFER_FAIL
 * (no replica could be read); XFER_KV_RPC_FAIL.
 * @return as xfer_kv_put_async(). Any thread.
 */
XFER_EXPORT
int xfer_kv_get_async(struct xfer_kv *kv, const char *key, void *buf,
		      size_t cap, xfer_kv_cb cb, void *arg);

/** xfer_kv_get_async() and wait, as xfer_kv_put(). */
XFER_EXPORT
int64_t xfer_kv_get(struct xfer_kv *kv, const char *key, void *buf,
		    size_t cap);

/** xfer_kv_get_async() into @p buf, memory registered with the engine,
 *  without staging (Mooncake's get_into). */
XFER_EXPORT
int xfer_kv_get_into_async(struct xfer_kv *kv, const char *key, void *buf,
			   size_t cap, xfer_kv_cb cb, void *arg);

/** xfer_kv_get_into_async() and wait, as xfer_kv_put(). */
XFER_EXPORT
int64_t xfer_kv_get_into(struct xfer_kv *kv, const char *key, void *buf,
			 size_t cap);

/**
 * Read @p n objects at once: one query for them all (per 1024 keys), one
 * xfer batch per staging-buffer-full, replicas as xfer_kv_get_async()
 * (Mooncake's batch_get_into and batch_get_into_multi_buffers). Object i
 * fills its @p iovcnt[i] parts of @p iov in order (@p iovcnt NULL: one
 * each); their lengths add up to its capacity.
 * @param results n entries, each set to what xfer_kv_get_async() gives
 *                that key
 * @p cb gets 0 if every key was read, else the first error.
 * @return as xfer_kv_batch_put_async(). Any thread.
 */
XFER_EXPORT
int xfer_kv_batch_get_async(struct xfer_kv *kv, size_t n,
			    const char *const *keys, const struct iovec *iov,
			    const size_t *iovcnt, unsigned flags,
			    int64_t *results, xfer_kv_cb cb, void *arg);

/** xfer_kv_batch_get_async() and wait, as xfer_kv_batch_put(). */
XFER_EXPORT
int xfer_kv_batch_get(struct xfer_kv *kv, size_t n, const char *const *keys,
		      const struct iovec *iov, const size_t *iovcnt,
		      unsigned flags, int64_t *results);

/* ---- exist, size, remove ---- */

/**
 * Is there a complete object @p key (Mooncake's is_exist)? One that
 * exists is leased, as a query leases it (Mooncake's).
 * @p cb gets 1, 0 (none, or its put has not ended), XFER_KV_INVALID_PARAMS
 * (a bad key) or XFER_KV_RPC_FAIL.
 * @return as xfer_kv_put_async(). Any thread.
 */
XFER_EXPORT
int xfer_kv_exist_async(struct xfer_kv *kv, const char *key, xfer_kv_cb cb,
			void *arg);

/** xfer_kv_exist_async() and wait, as xfer_kv_put(). */
XFER_EXPORT
int xfer_kv_exist(struct xfer_kv *kv, const char *key);

/** xfer_kv_exist_async() of @p n keys in one request (per 1024), each
 *  key's answer in @p results; @p cb gets 0, or the first negative one.
 *  @return as xfer_kv_batch_put_async(). Any thread. */
XFER_EXPORT
int xfer_kv_batch_exist_async(struct xfer_kv *kv, size_t n,
			      const char *const *keys, int64_t *results,
			      xfer_kv_cb cb, void *arg);

/** xfer_kv_batch_exist_async() and wait, as xfer_kv_batch_put(). */
XFER_EXPORT
int xfer_kv_batch_exist(struct xfer_kv *kv, size_t n, const char *const *keys,
			int64_t *results);

/** The length in bytes of object @p key (Mooncake's get_size), which the
 *  query leases: @p cb gets it, or an error of xfer_kv_get_async()'s
 *  query (-704, -703, -600, -900). @return as xfer_kv_put_async(). */
XFER_EXPORT
int xfer_kv_get_size_async(struct xfer_kv *kv, const char *key, xfer_kv_cb cb,
			   void *arg);

/** xfer_kv_get_size_async() and wait, as xfer_kv_put(). */
XFER_EXPORT
int64_t xfer_kv_get_size(struct xfer_kv *kv, const char *key);

/**
 * Remove object @p key (Mooncake's remove). @p cb gets 0;
 * XFER_KV_OBJECT_HAS_LEASE (a lease granted by a query or exist has not
 * run out, and @p force is false); XFER_KV_OBJECT_NOT_FOUND;
 * XFER_KV_REPLICA_IS_NOT_READY (its put has not ended, even forced);
 * XFER_KV_INVALID_PARAMS; XFER_KV_RPC_FAIL. A forced remove frees the
 * object's space at once: a read of it still in flight may read what a
 * later put writes there, and only its lease check tells.
 * @return as xfer_kv_put_async(). Any thread.
 */
XFER_EXPORT
int xfer_kv_remove_async(struct xfer_kv *kv, const char *key, bool force,
			 xfer_kv_cb cb, void *arg);

/** xfer_kv_remove_async() and wait, as xfer_kv_put(). */
XFER_EXPORT
int xfer_kv_remove(struct xfer_kv *kv, const char *key, bool force);

/** xfer_kv_remove_async() of @p n keys (Mooncake's batch_remove), as
 *  xfer_kv_batch_exist_async(). */
XFER_EXPORT
int xfer_kv_batch_remove_async(struct xfer_kv *kv, size_t n,
			       const char *const *keys, bool force,
			       int64_t *results, xfer_kv_cb cb, void *arg);

/** xfer_kv_batch_remove_async() and wait, as xfer_kv_batch_put(). */
XFER_EXPORT
int xfer_kv_batch_remove(struct xfer_kv *kv, size_t n,
			 const char *const *keys, bool force,
			 int64_t *results);

/** Remove every complete object not leased, leased ones too if @p force
 *  (Mooncake's remove_all): @p cb gets how many, or XFER_KV_RPC_FAIL.
 *  @return as xfer_kv_put_async(). */
XFER_EXPORT
int xfer_kv_remove_all_async(struct xfer_kv *kv, bool force, xfer_kv_cb cb,
			     void *arg);

/** xfer_kv_remove_all_async() and wait, as xfer_kv_put(). */
XFER_EXPORT
int64_t xfer_kv_remove_all(struct xfer_kv *kv, bool force);

/* ---- upsert (Mooncake's upsert, upsert_from, batch_upsert_from) ---- */

/**
 * Put the object @p key, replacing the one there (Mooncake's upsert): as
 * xfer_kv_put_async(), but an object of the key is replaced rather than
 * kept. The new value goes to new space; until its put ends readers get
 * the old object whole, after it the new one whole (a new version), and
 * the old object's space is freed only when the leases of its readers
 * have run out, so no reader sees torn bytes. An upsert preempts a put or
 * upsert of the key still in progress (that one's end then fails with
 * XFER_KV_OBJECT_NOT_FOUND or XFER_KV_INVALID_WRITE; Mooncake's too).
 * While an upsert is in progress a remove of the key removes the old
 * object. Pins and the replica count are the new object's.
 * @p cb gets 0 or an error of xfer_kv_put_async()'s callback; an upsert
 * never answers XFER_KV_OBJECT_ALREADY_EXISTS.
 * @return as xfer_kv_put_async(). Any thread.
 */
XFER_EXPORT
int xfer_kv_upsert_async(struct xfer_kv *kv, const char *key,
			 const void *value, size_t len,
			 const struct xfer_kv_replicate *rc, xfer_kv_cb cb,
			 void *arg);

/** xfer_kv_upsert_async() and wait, as xfer_kv_put(). */
XFER_EXPORT
int xfer_kv_upsert(struct xfer_kv *kv, const char *key, const void *value,
		   size_t len, const struct xfer_kv_replicate *rc);

/** xfer_kv_upsert_async() from registered memory without staging
 *  (Mooncake's upsert_from), as xfer_kv_put_from_async(). */
XFER_EXPORT
int xfer_kv_upsert_from_async(struct xfer_kv *kv, const char *key,
			      const void *buf, size_t len,
			      const struct xfer_kv_replicate *rc,
			      xfer_kv_cb cb, void *arg);

/** xfer_kv_upsert_from_async() and wait, as xfer_kv_put(). */
XFER_EXPORT
int xfer_kv_upsert_from(struct xfer_kv *kv, const char *key, const void *buf,
			size_t len, const struct xfer_kv_replicate *rc);

/** xfer_kv_batch_put_async() whose keys are upserts (Mooncake's
 *  batch_upsert_from with XFER_KV_ZERO_COPY, upsert_batch and
 *  upsert_parts without): same arguments, results and errors. */
XFER_EXPORT
int xfer_kv_batch_upsert_async(struct xfer_kv *kv, size_t n,
			       const char *const *keys,
			       const struct iovec *iov, const size_t *iovcnt,
			       unsigned flags,
			       const struct xfer_kv_replicate *rc,
			       int64_t *results, xfer_kv_cb cb, void *arg);

/** xfer_kv_batch_upsert_async() and wait, as xfer_kv_batch_put(). */
XFER_EXPORT
int xfer_kv_batch_upsert(struct xfer_kv *kv, size_t n,
			 const char *const *keys, const struct iovec *iov,
			 const size_t *iovcnt, unsigned flags,
			 const struct xfer_kv_replicate *rc, int64_t *results);

/**
 * Read byte ranges of objects (what Mooncake's get_into_ranges reads):
 * entry i is the dst[i].iov_len bytes of object keys[i] from byte
 * src_offsets[i] on, into dst[i].iov_base. A key may come in several
 * entries; each is queried (leased) and read as a get is, in one query
 * per 1024 entries and one xfer batch per staging-buffer-full (or one,
 * XFER_KV_ZERO_COPY).
 * @param results each entry's bytes read (dst[i].iov_len), or what
 *                xfer_kv_get_async() gives, XFER_KV_INVALID_PARAMS for a
 *                range past the object's end
 * @p cb gets 0 if every entry was read, else the first error.
 * @return as xfer_kv_batch_put_async(); XFER_KV_INVALID_PARAMS for NULL
 *         @p src_offsets or @p dst. Any thread.
 */
XFER_EXPORT
int xfer_kv_batch_get_ranges_async(struct xfer_kv *kv, size_t n,
				   const char *const *keys,
				   const uint64_t *src_offsets,
				   const struct iovec *dst, unsigned flags,
				   int64_t *results, xfer_kv_cb cb, void *arg);

/** xfer_kv_batch_get_ranges_async() and wait, as xfer_kv_batch_put(). */
XFER_EXPORT
int xfer_kv_batch_get_ranges(struct xfer_kv *kv, size_t n,
			     const char *const *keys,
			     const uint64_t *src_offsets,
			     const struct iovec *dst, unsigned flags,
			     int64_t *results);

/* ---- replica descriptors (Mooncake's get_replica_desc) ---- */

/** Buffers of one object's replicas, at most: the entries of a key's
 *  descriptors. */
#define XFER_KV_REPLICA_MAX 16

/** Where one buffer of a replica of an object lies (Mooncake's
 *  Replica::Descriptor of a memory replica, a buffer descriptor's
 *  fields). A replica is whole (one buffer) or, on a master with
 *  --dram_shard_size, striped: several buffers on distinct segments
 *  holding its bytes in order, as a Mooncake memory descriptor's list of
 *  buffer descriptors does. */
struct xfer_kv_replica_desc {
	uint64_t addr;                 /**< buffer_address, in the owner */
	uint64_t size;                 /**< bytes: the object's length, or
					    the shard's */
	char endpoint[256];            /**< transport_endpoint: the segment's
					    name (its owner engine's),
					    NUL-ended */
	uint8_t shards;                /**< on a replica's first entry: its
					    entries (1: whole); 0 on the
					    entries after it (xfer's) */
};

/**
 * The complete replicas of @p n objects (Mooncake's
 * batch_get_replica_desc, and get_replica_desc for one): one query per
 * 1024 keys, which leases each object found, as a get's does.
 * @param desc    XFER_KV_REPLICA_MAX entries per key (key i's from
 *                desc[XFER_KV_REPLICA_MAX * i]), the
 *                caller's until the callback; entries past a key's count
 *                are left as they were
 * @param results each key's count of entries (1..16; those in segments
 *                that are not mounted are left out), or
 *                XFER_KV_OBJECT_NOT_FOUND, XFER_KV_REPLICA_IS_NOT_READY,
 *                XFER_KV_INVALID_PARAMS (a bad key), XFER_KV_RPC_FAIL
 * @p cb gets 0 if every key was found, else the first error.
 * @return as xfer_kv_batch_put_async(); XFER_KV_INVALID_PARAMS for a NULL
 *         @p desc. Any thread.
 */
XFER_EXPORT
int xfer_kv_batch_get_replica_desc_async(struct xfer_kv *kv, size_t n,
					 const char *const *keys,
					 struct xfer_kv_replica_desc *desc,
					 int64_t *results, xfer_kv_cb cb,
					 void *arg);

/** xfer_kv_batch_get_replica_desc_async() and wait, as
 *  xfer_kv_batch_put(). */
XFER_EXPORT
int xfer_kv_batch_get_replica_desc(struct xfer_kv *kv, size_t n,
				   const char *const *keys,
				   struct xfer_kv_replica_desc *desc,
				   int64_t *results);

/** The replicas of @p key into @p desc (XFER_KV_REPLICA_MAX entries):
 *  their count, or a
 *  key's error of xfer_kv_batch_get_replica_desc(), or what it returns.
 *  Any thread but the callback base (-EDEADLK). */
XFER_EXPORT
int xfer_kv_get_replica_desc(struct xfer_kv *kv, const char *key,
			     struct xfer_kv_replica_desc *desc);

/**
 * Drop replicas of @p n objects (Mooncake's batch_replica_clear): those
 * in segment @p segment (an engine's name; NULL or "": every replica,
 * the object removed). An object left with none is removed. Only
 * complete objects this client put (or upserted), not leased, are
 * touched. One request per 1024 keys.
 * @param results each key's 0 (cleared), or XFER_KV_OBJECT_NOT_FOUND,
 *                XFER_KV_REPLICA_IS_NOT_READY, XFER_KV_ILLEGAL_CLIENT
 *                (another client put it), XFER_KV_OBJECT_HAS_LEASE,
 *                XFER_KV_REPLICA_NOT_FOUND (none in @p segment),
 *                XFER_KV_INVALID_PARAMS (a bad key), XFER_KV_RPC_FAIL
 * @p cb gets 0 if every key was cleared, else the first error.
 * @return as xfer_kv_batch_put_async(); XFER_KV_INVALID_PARAMS for a
 *         @p segment over 255 bytes. Any thread.
 */
XFER_EXPORT
int xfer_kv_batch_replica_clear_async(struct xfer_kv *kv, size_t n,
				      const char *const *keys,
				      const char *segment, int64_t *results,
				      xfer_kv_cb cb, void *arg);

/** xfer_kv_batch_replica_clear_async() and wait, as xfer_kv_batch_put(). */
XFER_EXPORT
int xfer_kv_batch_replica_clear(struct xfer_kv *kv, size_t n,
				const char *const *keys, const char *segment,
				int64_t *results);

/* ---- versions and sync (xfer's own, after the store's design) ---- */

/**
 * Versions: every put or upsert that ends gets the next number of one
 * counter of the master's (1, 2, ...), which its journal keeps across
 * restarts; a later put of any key has a larger version. A restored
 * object keeps its version (objects of a journal written before versions
 * have 0).
 *
 * Read object @p key as xfer_kv_get_async() does (@p flags 0 or
 * XFER_KV_ZERO_COPY: xfer_kv_get_into_async()), if its version is at
 * least @p min_version (0: any).
 * @param version NULL, or where the callback's caller stores, before the
 *                callback runs, the version read; with
 *                XFER_KV_VERSION_TOO_OLD the largest version readable
 *                (the object's, which was not read); 0 when there is none
 * @p cb gets what xfer_kv_get_async()'s gets, or XFER_KV_VERSION_TOO_OLD
 * (the object is older than @p min_version; no lease is granted).
 * @return as xfer_kv_put_async(), and XFER_KV_INVALID_PARAMS for unknown
 *         @p flags. Any thread.
 */
XFER_EXPORT
int xfer_kv_get_version_async(struct xfer_kv *kv, const char *key, void *buf,
			      size_t cap, unsigned flags,
			      uint64_t min_version, uint64_t *version,
			      xfer_kv_cb cb, void *arg);

/** xfer_kv_get_version_async() and wait, as xfer_kv_put(). */
XFER_EXPORT
int64_t xfer_kv_get_version(struct xfer_kv *kv, const char *key, void *buf,
			    size_t cap, unsigned flags, uint64_t min_version,
			    uint64_t *version);

/**
 * Sync with the master (ZooKeeper's sync, as the store's design asks):
 * answered after every request the master took before it, and after its
 * journal has them. Every put that ended before the call began has a
 * version no larger than the one answered, and a get issued after the
 * callback sees it (or a later put of its key), whichever client put it.
 * @p cb gets the last version given (0: no put has ended yet), or
 * XFER_KV_RPC_FAIL.
 * @return 0; XFER_KV_INVALID_PARAMS (NULL @p cb); -ENOMEM; -ESHUTDOWN.
 *         Any thread.
 */
XFER_EXPORT
int xfer_kv_sync_async(struct xfer_kv *kv, xfer_kv_cb cb, void *arg);

/** xfer_kv_sync_async() and wait, as xfer_kv_put(). */
XFER_EXPORT
int64_t xfer_kv_sync(struct xfer_kv *kv);

/**
 * Remove every complete object whose key @p pattern matches anywhere
 * (Mooncake's remove_by_regex, which searches with ECMAScript regexes;
 * ours are POSIX extended, the same for the common cases: classes,
 * anchors, alternation, repetition), leased ones too if @p force.
 * @p cb gets how many were removed; XFER_KV_INVALID_PARAMS (the pattern
 * does not compile); XFER_KV_INTERNAL_ERROR (the master ran out of
 * memory); XFER_KV_RPC_FAIL.
 * @return as xfer_kv_put_async(); XFER_KV_INVALID_PARAMS for a NULL or
 *         empty @p pattern or one over 4096 bytes. Any thread.
 */
XFER_EXPORT
int xfer_kv_remove_by_regex_async(struct xfer_kv *kv, const char *pattern,
				  bool force, xfer_kv_cb cb, void *arg);

/** xfer_kv_remove_by_regex_async() and wait, as xfer_kv_put(). */
XFER_EXPORT
int64_t xfer_kv_remove_by_regex(struct xfer_kv *kv, const char *pattern,
				bool force);

#include <xfer/store_tasks.h>
#include <xfer/store_segments.h>

#ifdef __cplusplus
}
#endif
#endif /* XFER_KV_STORE_H */
