/*
 * The transport ops table. The core cuts requests into slices and hands
 * each transport the slices of one task; the transport moves them on its
 * reactors and reports every slice once through xfer_slice_done().
 */
#ifndef XFER_TRANSPORT_H
#define XFER_TRANSPORT_H

#include <stddef.h>

struct xfer_desc;
struct xfer_engine;
struct xfer_segment;
struct xfer_slice;
struct xfer_transport;

struct xfer_transport_ops {
	const char *name; /* matches the descriptor's "protocol" */
	/** Create the transport's listeners and state; *out on success. */
	int (*init)(struct xfer_engine *e, struct xfer_transport **out);
	/** Fill this transport's fields of the engine's own descriptor. */
	void (*describe)(struct xfer_transport *t, struct xfer_desc *d);
	/** Prepare to reach @p seg (resolve, set seg->tp). May block. */
	int (*open)(struct xfer_transport *t, struct xfer_segment *seg);
	/** Move the @p n slices of one task; never fails: a slice that
	 *  cannot move is reported done with a failure status. Any thread. */
	void (*submit)(struct xfer_transport *t, struct xfer_segment *seg,
		       struct xfer_slice *slices, size_t n);
	/** Close everything; the reactors are stopped. Slices still queued
	 *  end CANCELED (never sent) or FAILED (in flight). */
	void (*fini)(struct xfer_transport *t);
};

extern const struct xfer_transport_ops xfer_local_ops;
extern const struct xfer_transport_ops xfer_tcp_ops;

#endif
