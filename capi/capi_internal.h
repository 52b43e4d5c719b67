/*
 * Mooncake's C API on xfer: what its files share. A transfer_engine_t is
 * a struct te, which holds the xfer engine and the tables that turn
 * Mooncake's integer ids into xfer's handles:
 *
 *   engine.c   create, destroy, transports (the engine remade), the host
 *   memory.c   local memory, file stubs
 *   segment.c  segment ids (LOCAL_SEGMENT is the own one) and the cache
 *   batch.c    batch ids, submits, statuses
 *   notify.c   notifications
 *   errors.c   xfer's errnos as Mooncake's codes
 *
 * Locks, outermost first: te->lock (read by every call, written where the
 * engine is remade or freed), then one of seg_lock, batch_lock (read to
 * look an id up), mem_lock. No call holds a table lock while it waits on
 * the network.
 */
#ifndef XFER_CAPI_INTERNAL_H
#define XFER_CAPI_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <xfer/transfer_engine_c.h>
#include <xfer/xfer.h>

/* Mooncake's error codes (its error.h) and Status codes. */
enum {
	TE_ERR_INVALID_ARGUMENT = -1,
	TE_ERR_TOO_MANY_REQUESTS = -2,
	TE_ERR_ADDRESS_NOT_REGISTERED = -3,
	TE_ERR_BATCH_BUSY = -4,
	TE_ERR_DEVICE_NOT_FOUND = -6,
	TE_ERR_ADDRESS_OVERLAPPED = -7,
	TE_ERR_SOCKET = -102,
	TE_ERR_MALFORMED_JSON = -103,
	TE_ERR_REJECT_HANDSHAKE = -104,
	TE_ERR_METADATA = -200,
	TE_ERR_CONTEXT = -202,
	TE_ERR_MEMORY = -302,
	TE_ERR_NOT_IMPLEMENTED = -303,
};

enum {
	TE_OK = 0,
	TE_INVALID_ARGUMENT = 1,
	TE_TOO_MANY_REQUESTS = 2,
	TE_BATCH_BUSY = 4,
	TE_MEMORY = 302,
};

/* A registered buffer, kept to register again when the engine is remade. */
struct te_mem {
	void *addr;
	size_t len;
	char *location;
	bool remote;
};

/* A segment id: its name, and the xfer id it has now (-1: closed). */
struct te_file {
	char *path;
	size_t size;
};

struct te_seg {
	char *name;
	int64_t xid;
};

/* A batch id's slot: the id is (gen << 32) | index. */
struct te_slot {
	struct xfer_batch *b;   /* NULL: free */
	size_t cap;             /* the tasks b holds */
	uint32_t gen;
	bool zombie;            /* freed by the caller; its callback frees it */
};

struct te {
	pthread_rwlock_t lock;
	struct xfer_engine *e;
	struct xfer_config *cfg;  /* what the engine was made with */
	bool rdma;                /* the engine's transport is RDMA */

	pthread_mutex_t mem_lock;
	struct te_mem *mems;
	size_t nmems;
	struct te_file *files;    /* under mem_lock too */
	size_t nfiles;

	pthread_mutex_t seg_lock;
	struct te_seg *segs;      /* by id; [0] is the own segment */
	size_t nsegs;

	pthread_rwlock_t batch_lock;
	struct te_slot *slots;
	size_t nslots;
	size_t live;              /* slots holding a batch, zombies too */
	bool ending;              /* te_batches_fini() frees every batch */
};

/** Read-lock @p t for a call: its engine, or NULL (NULL @p t, or the
 *  engine was lost remaking it) with nothing held. */
static inline struct xfer_engine *te_enter(struct te *t)
{
	if (!t)
		return NULL;
	pthread_rwlock_rdlock(&t->lock);
	if (t->e)
		return t->e;
	pthread_rwlock_unlock(&t->lock);
	return NULL;
}

/** The end of a call that te_enter() let in. */
static inline void te_leave(struct te *t)
{
	pthread_rwlock_unlock(&t->lock);
}

/* ---- errors.c ---- */

/** Mooncake's error code (negative) for xfer's negative errno. */
int te_err(int neg_errno);

/** Mooncake's Status code (positive) for xfer's negative errno. */
int te_status(int neg_errno);

/* ---- segment.c ---- */

/** Set up the table with the own segment as id 0, opened on @p e. */
int te_segs_init(struct te *t);
void te_segs_fini(struct te *t);

/** Open every segment that was open again, on a new engine (ids kept). */
void te_segs_reopen(struct te *t);

/** The xfer id of segment @p id, or -1. Takes seg_lock. */
int64_t te_seg_xid(struct te *t, int64_t id);

/** Turn Mooncake's target ids of @p n requests into xfer requests. */
void te_requests(struct te *t, const struct transfer_request *in,
		 struct xfer_request *out, size_t n);

/* ---- memory.c ---- */

/** Register every buffer of the list again, on a new engine. */
int te_mems_reregister(struct te *t);
void te_mems_fini(struct te *t);

/* ---- file.c ---- */

/** Register every file of the list again, on a new engine. */
int te_files_reregister(struct te *t);
void te_files_fini(struct te *t);

/** Where a request's @p offset in file @p file_id of segment @p seg
 *  (xfer id @p xid) lies in the segment: itself for a RAM segment,
 *  UINT64_MAX (an INVALID task) for a file the segment lacks. */
uint64_t te_file_offset(struct te *t, const char *seg, int64_t xid,
			uint32_t file_id, uint64_t offset);

/* ---- batch.c ---- */

/** Cancel, wait for and free every batch (the engine is going). */
void te_batches_fini(struct te *t);

/** Whether batches are allocated (the engine cannot be remade). */
bool te_batches_live(struct te *t);

#endif
