/*
 * The transport ops table. The core cuts requests into slices and hands
 * each transport the slices of one task; the transport moves them on its
 * reactors and reports every slice once through xfer_slice_done().
 * Optional slots may be NULL; the core checks them in one place each.
 */
#ifndef XFER_TRANSPORT_H
#define XFER_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct xfer_buffer;
struct xfer_desc;
struct xfer_desc_buf;
struct xfer_engine;
struct xfer_hs_conn;
struct xfer_segment;
struct xfer_slice;
struct xfer_transport;

struct xfer_transport_ops {
	const char *name; /* matches the descriptor's "protocol" */
	/** Started by every engine (it reaches any peer of its protocol);
	 *  otherwise only when it is the configured protocol. */
	bool always;
	/** Create the transport's listeners and state; *out on success. */
	int (*init)(struct xfer_engine *e, struct xfer_transport **out);
	/** Fill this transport's fields of the engine's own descriptor
	 *  (buffers are filled already). */
	void (*describe)(struct xfer_transport *t, struct xfer_desc *d);
	/** Optional: fill @p db's fields for local buffer @p b (keys). */
	void (*describe_buffer)(struct xfer_transport *t,
				const struct xfer_buffer *b,
				struct xfer_desc_buf *db);
	/** Optional: make @p b reachable (memory registration), setting
	 *  b->tp_mem. @return 0 or a negative errno. */
	int (*reg)(struct xfer_transport *t, struct xfer_buffer *b);
	/** Optional: undo reg(); no transfer uses @p b any more. */
	void (*unreg)(struct xfer_transport *t, struct xfer_buffer *b);
	/** Prepare to reach @p seg (set seg->tp_priv). Never blocks. */
	int (*open)(struct xfer_transport *t, struct xfer_segment *seg);
	/** Optional: free a seg->tp_priv that open() made and that is being
	 *  replaced or whose segment is closed. */
	void (*release)(struct xfer_transport *t, void *priv);
	/** Move the @p n slices of one task; never fails: a slice that
	 *  cannot move is reported done with a failure status. Any thread. */
	void (*submit)(struct xfer_transport *t, struct xfer_segment *seg,
		       struct xfer_slice *slices, size_t n);
	/** Optional: answer a Connection request of the handshake socket on
	 *  the control reactor. @return 0 with @p reply filled, or a
	 *  negative errno (then the connection closes without a reply). */
	int (*connection)(struct xfer_transport *t,
			  const struct xfer_hs_conn *req,
			  struct xfer_hs_conn *reply);
	/** Optional: per-device counter @p i. @return 0, -ENOENT past the
	 *  last device. */
	int (*device_stats)(struct xfer_transport *t, size_t i,
			    const char **name, uint64_t *bytes);
	/** Close everything; the reactors are stopped. Slices still queued
	 *  end CANCELED (never sent) or FAILED (in flight). */
	void (*fini)(struct xfer_transport *t);
};

extern const struct xfer_transport_ops xfer_local_ops;
extern const struct xfer_transport_ops xfer_tcp_ops;
extern const struct xfer_transport_ops xfer_rdma_ops;

/** Every transport, local copy first, NULL-terminated; an engine's
 *  e->tps[i] is the instance of xfer_transports[i] (NULL if not started). */
extern const struct xfer_transport_ops *const xfer_transports[];
#define XFER_NTRANSPORTS 3

#endif
