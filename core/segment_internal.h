/*
 * Segments: the local one and remote ones opened by name through the
 * metadata store, each served by one transport; the table of an engine's
 * open segments.
 */
#ifndef XFER_SEGMENT_INTERNAL_H
#define XFER_SEGMENT_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>

struct evdns_base;
struct xfer_buffers;
struct xfer_desc;
struct xfer_desc_codec;
struct xfer_engine;
struct xfer_error;
struct xfer_meta;
struct xfer_segment_op;
struct xfer_segments;
struct xfer_transport;

struct xfer_segment {
	int64_t id;
	struct xfer_segments *set;
	char *name;
	char *host;                 /* where its listeners are */
	struct sockaddr_storage addr; /* host, resolved once at open */
	socklen_t addrlen;
	uint16_t rpc_port;          /* its handshake port */
	bool local;                 /* this engine's own segment */
	pthread_rwlock_t lock;      /* desc and tp_priv: a watch swaps them */
	struct xfer_desc *desc;     /* NULL when local */
	_Atomic bool gone;          /* its key was deleted: transfers fail */
	/* Closed asynchronously: out of the table, destroyed by the last
	 * xfer_segment_put(), which then runs the close's callback. */
	_Atomic bool closing;
	struct xfer_segment_op *close_op;
	struct xfer_transport *tp;  /* serves it */
	void *tp_priv;              /* the transport's per-segment state */
	atomic_long users;          /* tasks in flight, refreshes, lookups */
};

/* An engine's open segments, and what opening one needs. */
struct xfer_segments {
	pthread_mutex_t lock;       /* v, n */
	struct xfer_segment **v;    /* by id; NULL once closed */
	size_t n;
	LIST_HEAD(, xfer_segment_op) ops;   /* opens and refreshes running */
	struct xfer_engine *e;
	struct xfer_meta *meta;
	struct evdns_base *dns;             /* names in rpc_meta */
	struct xfer_buffers *buffers;       /* the local segment's */
	struct xfer_transport *const *tps;  /* started, NULL-ended */
	const struct xfer_desc_codec *const *codecs; /* every known one */
	const char *own_name;
	struct xfer_error *err;
};

void xfer_segments_init(struct xfer_segments *ss);
/** Hand every segment's transport state back (before the transports
 *  close). */
void xfer_segments_release(struct xfer_segments *ss);
/** Free every segment (the transports keep their peers). */
void xfer_segments_fini(struct xfer_segments *ss);

/** The started transport of metadata kind @p kind; NULL if none. */
struct xfer_transport *xfer_segments_kind(struct xfer_segments *ss,
					  const char *kind);

/** Look up an open segment and take a use of it; NULL if unknown. */
struct xfer_segment *xfer_segment_acquire(struct xfer_segments *ss,
					  int64_t id);
/** Take one more use of @p seg, which the caller holds a use of. */
void xfer_segment_get(struct xfer_segment *seg);
/** Drop a use; the last one of a closing segment destroys it. */
void xfer_segment_put(struct xfer_segment *seg);

/** Do the segment's buffers hold all of [addr, addr+len)? */
bool xfer_segment_covers(struct xfer_segment *seg, uint64_t addr,
			 uint64_t len);

/** Refetch the descriptor of the open segment @p name after the watch saw
 *  its key change (a missing key: the segment is gone); NULL: of every
 *  open remote segment, after events may have been lost (a missing key
 *  keeps the cached descriptor). Control reactor. */
void xfer_segments_refresh(struct xfer_segments *ss, const char *name);

#endif
