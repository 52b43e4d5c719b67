/*
 * The store client's replication tasks (docs/STORE.md, "Replication
 * tasks"): the store design's Replicate and Mooncake's copy, move and
 * query_task. Part of <xfer/store.h>, which includes it; the conventions
 * are that header's.
 */
#ifndef XFER_KV_STORE_TASKS_H
#define XFER_KV_STORE_TASKS_H

#ifndef XFER_KV_STORE_H
#error "include <xfer/store.h>, not this header"
#endif

/* ---- replication tasks (the store design's Replicate; Mooncake's
 * QueryTask) ---- */

/** A task's type and status: Mooncake's TaskType and TaskStatus, with
 *  their values; XFER_KV_TASK_REPLICATE is xfer's. */
enum xfer_kv_task_type {
	XFER_KV_TASK_REPLICA_COPY = 0,
	XFER_KV_TASK_REPLICA_MOVE = 1,
	XFER_KV_TASK_REPLICATE = 2,      /**< counts changed, or repaired */
};

enum xfer_kv_task_status {
	XFER_KV_TASK_PENDING = 0,        /**< no client has taken its copy */
	XFER_KV_TASK_PROCESSING = 1,     /**< a client copies */
	XFER_KV_TASK_FAILED = 2,
	XFER_KV_TASK_SUCCESS = 3,
};

/** What xfer_kv_query_task() answers: Mooncake's QueryTaskResponse. */
struct xfer_kv_task {
	uint64_t id;
	int type;                        /**< enum xfer_kv_task_type */
	int status;                      /**< enum xfer_kv_task_status */
	int64_t created_at_ms_epoch;     /**< ms since 1970, master's clock */
	int64_t last_updated_at_ms_epoch; /**< the last change of status */
	uint8_t assigned_client[16];     /**< the copying client's id; zeros
					      before one took a copy */
	char message[256];               /**< NUL-ended: "Task completed
					      successfully", or why it failed
					      (an ErrorCode's name) */
};

/**
 * Bring object @p key to @p replica_num DRAM and @p nof_replica_num SSD
 * replicas (the store design's Replicate(key, {dram_replicate_num,
 * nvmeof_replicate_num})), up or down, as a task of the master's. The
 * counts are also the object's from then on: a replica lost with its
 * segment (its client expired at --client_ttl, or unmounted it) is made
 * again by a task of its own while the object asks for more than remain.
 *
 * The master allocates each new replica on a segment the object is not
 * in yet and asks a client to copy, one copy at a time: the owner of a
 * DRAM replica WRITEs from it with its engine (client to client, never
 * through the master), or, for a new DRAM replica of an object that is
 * only on SSD, the new replica's owner READs it from SSD. Extra replicas
 * are released, the last first, once the object's lease has run out (a
 * reader may still read them). An SSD replica is only copied from a DRAM
 * one. A copy that fails is tried again, three times in all; a new call
 * for the object replaces its task at work (which then fails).
 * @p cb gets the task's id (> 0; follow it with xfer_kv_query_task()),
 * or XFER_KV_OBJECT_NOT_FOUND, XFER_KV_REPLICA_IS_NOT_READY (its put has
 * not ended), XFER_KV_INVALID_PARAMS (counts add up to 0 or past 16, or
 * an object with a striped replica: xfer-stored's --dram_shard_size),
 * XFER_KV_TASK_PENDING_LIMIT_EXCEEDED (65536 tasks at work),
 * XFER_KV_RPC_FAIL.
 * @return as xfer_kv_put_async(); XFER_KV_INVALID_PARAMS for counts
 *         past XFER_KV_REPLICA_MAX (checked again by the master). Any
 *         thread.
 */
XFER_EXPORT
int xfer_kv_replicate_async(struct xfer_kv *kv, const char *key,
			    unsigned replica_num, unsigned nof_replica_num,
			    xfer_kv_cb cb, void *arg);

/** xfer_kv_replicate_async() and wait, as xfer_kv_put(). */
XFER_EXPORT
int64_t xfer_kv_replicate(struct xfer_kv *kv, const char *key,
			  unsigned replica_num, unsigned nof_replica_num);

/**
 * Copy object @p key into each of the @p n (1..16) segments @p targets
 * names (engine segment names, as replica descriptors give them; SSD
 * ones `nvmeof/<engine name>`), as a task of the master's (Mooncake's
 * CreateCopyTask): one copy at a time, in order, made as
 * xfer_kv_replicate_async()'s are; a target holding a replica already
 * is skipped. The object's replica counts are what it holds when the
 * task ends (a loss is made good to them).
 * @p cb gets the task's id (> 0), or XFER_KV_OBJECT_NOT_FOUND,
 * XFER_KV_REPLICA_IS_NOT_READY, XFER_KV_SEGMENT_NOT_FOUND (a target not
 * mounted), XFER_KV_INVALID_PARAMS, XFER_KV_TASK_PENDING_LIMIT_EXCEEDED,
 * XFER_KV_RPC_FAIL.
 * @return as xfer_kv_put_async(); XFER_KV_INVALID_PARAMS for NULL or
 *         empty names, names over 255 bytes, @p n 0 or over 16. Any
 *         thread.
 */
XFER_EXPORT
int xfer_kv_create_copy_task_async(struct xfer_kv *kv, const char *key,
				   const char *const *targets, size_t n,
				   xfer_kv_cb cb, void *arg);

/** xfer_kv_create_copy_task_async() and wait, as xfer_kv_put(). */
XFER_EXPORT
int64_t xfer_kv_create_copy_task(struct xfer_kv *kv, const char *key,
				 const char *const *targets, size_t n);

/**
 * Move object @p key's replica in segment @p source into segment
 * @p target (Mooncake's CreateMoveTask): a copy, as
 * xfer_kv_create_copy_task_async()'s, from the source's replica (or
 * another, when the source is on SSD and the target too), then the
 * source's replica dropped once the object's lease is out.
 * @p cb gets the task's id, or what xfer_kv_create_copy_task_async()'s
 * gets; XFER_KV_INVALID_PARAMS also when @p source holds no replica of
 * it or is @p target.
 * @return as xfer_kv_create_copy_task_async(). Any thread.
 */
XFER_EXPORT
int xfer_kv_create_move_task_async(struct xfer_kv *kv, const char *key,
				   const char *source, const char *target,
				   xfer_kv_cb cb, void *arg);

/** xfer_kv_create_move_task_async() and wait, as xfer_kv_put(). */
XFER_EXPORT
int64_t xfer_kv_create_move_task(struct xfer_kv *kv, const char *key,
				 const char *source, const char *target);

/**
 * The state of task @p id into @p out (the caller's, written before
 * @p cb runs, on success only). The master keeps the last 10000
 * finished tasks; a task's status moves PENDING -> PROCESSING (a client
 * took its copy) -> PENDING (the next copy) ... -> SUCCESS or FAILED.
 * @p cb gets 0, XFER_KV_TASK_NOT_FOUND (unknown or forgotten), or
 * XFER_KV_RPC_FAIL.
 * @return 0; XFER_KV_INVALID_PARAMS (NULL @p out or @p cb); -ENOMEM;
 *         -ESHUTDOWN. Any thread.
 */
XFER_EXPORT
int xfer_kv_query_task_async(struct xfer_kv *kv, uint64_t id,
			     struct xfer_kv_task *out, xfer_kv_cb cb,
			     void *arg);

/** xfer_kv_query_task_async() and wait, as xfer_kv_put(). */
XFER_EXPORT
int xfer_kv_query_task(struct xfer_kv *kv, uint64_t id,
		       struct xfer_kv_task *out);

#endif /* XFER_KV_STORE_TASKS_H */
