/* The engine's private state: buffers, segments, batches, tasks, slices. */
#ifndef XFER_ENGINE_INTERNAL_H
#define XFER_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <xfer/xfer.h>

#include "desc_internal.h"
#include "reactor_internal.h"
#include "transport.h"

#define XFER_MAX_WORKERS 64
#define XFER_HANDSHAKE_TIMEOUT_MS 5000

struct xfer_store;
struct xfer_store_ops;
struct xfer_transport;
struct xfer_transport_ops;

/* ---- local buffers (buffers.c) ---- */

struct xfer_buffer {
	uint64_t addr, len;
	char *location;
	bool remote_access;
	atomic_long users; /* local tasks and peer requests using it now */
	void *tp_mem;      /* the transport's registration (RDMA MRs) */
};

/* Sorted by address; entries never move while registered. */
struct xfer_buffers {
	pthread_rwlock_t lock;
	struct xfer_buffer **v;
	size_t n, cap;
};

void xfer_buffers_init(struct xfer_buffers *bs);
void xfer_buffers_fini(struct xfer_buffers *bs);
/** A new buffer, not yet in the registry; NULL on ENOMEM. */
struct xfer_buffer *xfer_buffer_new(uint64_t addr, uint64_t len,
				    const char *location, bool remote_access);
void xfer_buffer_free(struct xfer_buffer *b);
/** Insert @p b. @return 0, -EEXIST (overlaps; b not taken), -ENOMEM. */
int xfer_buffers_insert(struct xfer_buffers *bs, struct xfer_buffer *b);
/** Take the buffer starting at @p addr out of the registry into *out
 *  (the caller frees it). @return 0, -ENOENT, -EBUSY (in use). */
int xfer_buffers_remove(struct xfer_buffers *bs, uint64_t addr,
			struct xfer_buffer **out);
/** The buffer holding all of [addr, addr+len), with @p remote_only only a
 *  remotely accessible one; NULL if none. Caller holds bs->lock. */
struct xfer_buffer *xfer_buffers_find(struct xfer_buffers *bs, uint64_t addr,
				      uint64_t len, bool remote_only);
/** Take a use of the buffer holding the source range; NULL if none. */
struct xfer_buffer *xfer_buffers_acquire(struct xfer_buffers *bs,
					 uint64_t addr, uint64_t len);
/** Fill d->bufs with the remotely accessible buffers; @p keys (if not
 *  NULL) adds a transport's fields to each. @return 0, -ENOMEM */
int xfer_buffers_describe(struct xfer_buffers *bs, struct xfer_desc *d,
			  void (*keys)(struct xfer_transport *t,
				       const struct xfer_buffer *b,
				       struct xfer_desc_buf *db),
			  struct xfer_transport *t);

/* ---- segments (segment.c) ---- */

struct xfer_segment {
	int64_t id;
	struct xfer_engine *e;
	char *name;
	char *host;                 /* where its listeners are */
	struct sockaddr_storage addr; /* host, resolved once at open */
	socklen_t addrlen;
	uint16_t rpc_port;          /* its handshake port */
	bool local;                 /* this engine's own segment */
	pthread_rwlock_t lock;      /* desc and tp_priv: a watch swaps them */
	struct xfer_desc *desc;     /* NULL when local */
	_Atomic bool gone;          /* its key was deleted: transfers fail */
	const struct xfer_transport_ops *ops;
	struct xfer_transport *tp;
	void *tp_priv;              /* the transport's per-segment state */
	atomic_long users;          /* tasks in flight, refreshes, lookups */
};

/** Free a segment's own memory (the transport keeps its peers). */
void xfer_segment_destroy(struct xfer_segment *seg);

/** Refetch the descriptor of the open segment @p name after the watch saw
 *  its key change (a missing key: the segment is gone); NULL: of every
 *  open remote segment, after events may have been lost (a missing key
 *  keeps the cached descriptor). Control reactor. */
void xfer_segment_refresh(struct xfer_engine *e, const char *name);

/** The buffer of sorted descriptor @p d holding all of [addr, addr+len);
 *  NULL if none. */
const struct xfer_desc_buf *xfer_desc_find_buf(const struct xfer_desc *d,
					       uint64_t addr, uint64_t len);

/** Do the segment's buffers hold all of [addr, addr+len)? */
bool xfer_segment_covers(struct xfer_segment *seg, uint64_t addr,
			 uint64_t len);

/* ---- batches, tasks, slices (batch.c, slice.c) ---- */

struct xfer_task {
	struct xfer_batch *batch;
	_Atomic int status;          /* enum xfer_status */
	atomic_uint_fast64_t transferred;
	atomic_size_t slices_left;
	_Atomic int failure;         /* first failure status, 0 = none */
	struct xfer_buffer *source;  /* use held while in flight */
	struct xfer_segment *segment;
};

struct xfer_slice {
	struct xfer_slice *next;     /* transport queues */
	struct xfer_task *task;
	enum xfer_opcode opcode;
	uint32_t len;
	void *local;
	uint64_t remote;
	/* Scratch space for the transport that owns the slice. */
	union {
		uint8_t bytes[48];
		uint64_t words[6];
	} tp;
};

/**
 * Cut a request of @p len bytes into slices of @p slice_size (the last one
 * takes the rest, a tail under a quarter slice included) in @p out, which
 * has room for xfer_slice_count().
 */
size_t xfer_slice_count(uint64_t len, size_t slice_size);
void xfer_slice_cut(struct xfer_task *t, const struct xfer_request *req,
		    size_t slice_size, struct xfer_slice *out);

/** Report one slice; the task ends with its last slice. Any thread; the
 *  caller must not touch @p s afterwards. */
void xfer_slice_done(struct xfer_slice *s, enum xfer_status st);

/* ---- the engine (engine.c) ---- */

struct xfer_engine {
	struct xfer_config cfg;     /* strings point into the fields below */
	char *cfg_name, *cfg_meta, *cfg_bind;
	char *name;                 /* own segment name */
	char *host;                 /* host part of name */
	struct xfer_reactor control;
	struct xfer_reactor workers[XFER_MAX_WORKERS];
	int nworkers;
	atomic_uint next_worker;
	struct xfer_buffers buffers;
	struct xfer_store *store;
	char *cfg_cluster, *cfg_user, *cfg_password;
	char *cfg_protocol, *cfg_devices, *cfg_matrix;
	char *prefix;               /* "mooncake/" or "mooncake/<cluster>/" */
	struct xfer_job publish_job;
	atomic_uint publish_flags;  /* what publish_job will put */
	/* tps[i] runs xfer_transports[i]; NULL if not started. */
	struct xfer_transport *tps[XFER_NTRANSPORTS];
	int main_tp;                /* the one the descriptor advertises */
	struct handshake_server *hs;

	pthread_mutex_t seg_lock;   /* segment table */
	struct xfer_segment **segs;
	size_t nsegs;

	pthread_mutex_t desc_lock;  /* own descriptor, encoded */
	char *desc_json;
	size_t desc_len;

	pthread_mutex_t err_lock;
	char last_error[256];
};

/** A worker reactor, round robin; the control reactor with no workers. */
struct xfer_reactor *xfer_engine_worker(struct xfer_engine *e);

/** Record a readable error (also logged) and return @p err unchanged. */
int xfer_engine_error(struct xfer_engine *e, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/** A malloc'd copy of the own descriptor's JSON; NULL on ENOMEM. */
char *xfer_engine_descriptor(struct xfer_engine *e, size_t *len);

/** Answer a Connection request through the transport that takes them;
 *  an engine without one answers with every field empty. */
int xfer_engine_connection(struct xfer_engine *e,
			   const struct xfer_hs_conn *req,
			   struct xfer_hs_conn *reply);

/** The own descriptor with no buffers (published on shutdown). */
char *xfer_engine_descriptor_empty(struct xfer_engine *e, size_t *len);

/* ---- the metadata store, engine side (meta.c) ---- */

enum xfer_meta_op { XFER_META_GET, XFER_META_PUT, XFER_META_DEL };

/** Open the backend @p ops on the control reactor. */
int xfer_meta_open(struct xfer_engine *e, const struct xfer_store_ops *ops);
/** Publish rpc_meta and ram; fails if the server cannot be reached. */
int xfer_meta_start(struct xfer_engine *e);
/** Publish ram without buffers, then delete both keys. */
void xfer_meta_stop(struct xfer_engine *e);
/** Republish ram after register/unregister: before returning, or soon
 *  when called on the control reactor's thread. A server that is away
 *  gets it when it is back. */
void xfer_meta_publish_ram(struct xfer_engine *e);
/**
 * Run one store operation on the control reactor and wait for it, from an
 * application thread (*out malloc'd and NUL-ended for a get).
 * @return 0, the store's error, -ETIMEDOUT, or -EDEADLK when called on the
 *         thread that dispatches the control reactor.
 */
int xfer_meta_call(struct xfer_engine *e, enum xfer_meta_op op,
		   const char *key, const char *value, size_t len, char **out,
		   size_t *out_len);
/** prefix + kind + name, malloc'd; NULL on ENOMEM. */
char *xfer_meta_key(struct xfer_engine *e, const char *kind, const char *name);

/** Look up an open segment and take a use of it; NULL if unknown. */
struct xfer_segment *xfer_engine_segment_acquire(struct xfer_engine *e,
						 int64_t id);

/* ---- logging (log.c) ---- */

enum { XFER_LOG_ERROR, XFER_LOG_WARN, XFER_LOG_INFO, XFER_LOG_DEBUG };
void xfer_log(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
