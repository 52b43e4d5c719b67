/*
 * The transport contract, owned by the core (rdma-core's driver.h is the
 * model). A transport is a table of operations (libevent's eventop,
 * rdma-core's verbs_context_ops) in transports/, listed once in
 * transports/table.c; an instance embeds struct xfer_transport first and
 * gets back to its own struct with container_of. The core cuts requests
 * into slices and hands a transport the slices of one task; the transport
 * moves them on its reactors and reports every slice once through
 * xfer_slice_done().
 *
 * Slots a transport leaves NULL get the defaults of core/transport.c, installed
 * once, so callers never test for NULL: each slot says its default.
 */
#ifndef XFER_TRANSPORT_H
#define XFER_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config_internal.h"
#include "xfer/xfer.h"

struct xfer_auth;
struct xfer_buffer;
struct xfer_buffers;
struct xfer_desc;
struct xfer_desc_buf;
struct xfer_desc_codec;
struct xfer_engine;
struct xfer_error;
struct xfer_hs_conn;
struct xfer_reactor;
struct xfer_segment;
struct xfer_slice;

enum {
	/** Started by every engine: it reaches any peer of its protocol.
	 *  Otherwise only when it is the configured protocol. */
	XFER_TP_ALWAYS = 1 << 0,
	/** Serves the engine's own segment; no descriptor names it. */
	XFER_TP_LOCAL = 1 << 1,
};

/** What the engine lends a transport; valid until fini(). */
struct xfer_transport_env {
	const char *name;               /* the engine's segment name */
	const char *bind_addr;          /* numeric address to listen on */
	uint32_t transfer_timeout_ms;   /* 0: never */
	uint32_t handshake_max_len;     /* largest handshake frame, bytes */
	/** A data connection idle (no request in it) this long is closed;
	 *  0: never (conn_idle_timeout_ms). */
	uint32_t idle_timeout_ms;
	/** Data connections a listener keeps open at once (max_data_conns),
	 *  of them not yet proved (max_new_data_conns), and from one source
	 *  address (max_data_conns_per_addr): transports/sstream.c makes
	 *  room, or closes the new one. */
	unsigned max_conns, max_new_conns, max_conns_per_addr;
	/** A new data connection proves itself (or, without a secret,
	 *  sends its first request) within this (auth_timeout_ms). */
	uint32_t auth_timeout_ms;
	/** The cluster secret: peers must prove they know it before a
	 *  request is read or sent (core/auth_internal.h); NULL: none. */
	const struct xfer_auth *auth;
	struct xfer_reactor *control;
	int nworkers;                   /* 0: everything on control */
	/** A worker reactor, round robin (control with no workers). */
	struct xfer_reactor *(*worker)(void *arg);
	struct xfer_buffers *buffers;   /* the local segment's */
	struct xfer_error *err;         /* the engine's last error */
	/** The values of the transport's knobs, in the order of ops->knobs. */
	const union xfer_knob_val *knobs;
	void *arg;
};

struct xfer_transport {
	const struct xfer_transport_ops *ops;   /* with defaults filled */
	const struct xfer_transport_env *env;
};

struct xfer_transport_ops {
	const char *name; /* matches the descriptor's "protocol" */
	unsigned flags;   /* XFER_TP_* */
	/** Its configuration keys, ended by one with a NULL name; NULL for
	 *  none. Their values reach init() in env->knobs. */
	const struct xfer_knob *knobs;
	/** Its fields of the segment descriptor; NULL for none. */
	const struct xfer_desc_codec *codec;
	/** The metadata kind of the segments it serves whole, each with a
	 *  document of its own under `mooncake/<kind>/<name>` and opened as
	 *  "<kind>/<name>" ("nvmeof"); NULL: it serves RAM segments, whose
	 *  descriptor is the core's with the codec above. The slots below
	 *  marked "kind" are for such a transport. */
	const char *kind;
	/** Can it run on this host now (RDMA: a device is present)? For
	 *  xfer_transport_available(); any thread, before init(). Default:
	 *  true. */
	bool (*available)(void);
	/** Create the transport's listeners and state; *out on success, with
	 *  ops and env set by the caller. Default: a bare instance. */
	int (*init)(const struct xfer_transport_env *env,
		    struct xfer_transport **out);
	/** Close everything; the reactors are stopped. Slices still queued
	 *  end CANCELED (never sent) or FAILED (in flight). Default: free. */
	void (*fini)(struct xfer_transport *t);
	/** Point d->tp at this transport's fields of the own descriptor;
	 *  they stay the transport's. Default: none. */
	void (*describe)(struct xfer_transport *t, struct xfer_desc *d);
	/** Point db->tp at local buffer @p b's fields (keys); they stay the
	 *  transport's while @p b is registered. Default: none. */
	void (*describe_buffer)(struct xfer_transport *t,
				const struct xfer_buffer *b,
				struct xfer_desc_buf *db);
	/** Make @p b reachable (memory registration), setting b->tp_mem.
	 *  @return 0 or a negative errno. Default: 0, nothing to do. */
	int (*reg)(struct xfer_transport *t, struct xfer_buffer *b);
	/** Undo reg(); no transfer uses @p b any more. Default: nothing. */
	void (*unreg)(struct xfer_transport *t, struct xfer_buffer *b);
	/** Prepare to reach @p seg (set seg->tp_priv). Never blocks.
	 *  Default: 0, no state. */
	int (*open)(struct xfer_transport *t, struct xfer_segment *seg);
	/** Free a seg->tp_priv that open() made and that is being replaced
	 *  or whose segment is closed. Default: nothing. */
	void (*release)(struct xfer_transport *t, void *priv);
	/** Move the @p n slices of one task; never fails: a slice that
	 *  cannot move is reported done with a failure status. Any thread.
	 *  Default: every slice FAILED. */
	void (*submit)(struct xfer_transport *t, struct xfer_segment *seg,
		       struct xfer_slice *slices, size_t n);
	/** Answer a Connection request of the handshake socket on the
	 *  control reactor. @return 0 with @p reply filled, or a negative
	 *  errno (then the connection closes without a reply).
	 *  Default: -EOPNOTSUPP, it takes none. */
	int (*connection)(struct xfer_transport *t,
			  const struct xfer_hs_conn *req,
			  struct xfer_hs_conn *reply);
	/** Some tasks were canceled (xfer_slice_canceled()): end their
	 *  slices that have not gone out as CANCELED; from the return on,
	 *  write nothing of theirs into local memory (slices on the wire
	 *  finish, and what they bring is discarded). Any thread; waits for
	 *  the transport's reactors to pass between events. Default:
	 *  nothing, every slice is done within submit. */
	void (*cancel)(struct xfer_transport *t);
	/** Per-device counter @p i. @return 0, -ENOENT past the last
	 *  device. Default: -ENOENT, no devices. */
	int (*device_stats)(struct xfer_transport *t, size_t i,
			    const char **name, uint64_t *bytes);
	/** CPU time, in seconds, used so far by the threads the transport
	 *  started itself (not the engine's reactors it is lent): user and
	 *  system time of each thread (pthread_getcpuclockid), 0 for one not
	 *  running. Work the kernel does for it elsewhere (softirqs, a
	 *  driver's kernel threads) is not counted. Any thread, between
	 *  init() and fini(). Default: 0, it starts none. */
	double (*cpu_seconds)(struct xfer_transport *t);
	/** Kind: the document of the engine's own segment, malloc'd, in
	 *  *@p len bytes; NULL on ENOMEM. Any thread. Default: NULL. */
	char *(*document)(struct xfer_transport *t, size_t *len);
	/** Kind: take @p json, a peer's document, as @p seg's (set
	 *  seg->tp_priv; the old one, if any, goes to release()). Never
	 *  blocks. @return 0, -EPROTO with a reason in @p err, -ENOMEM.
	 *  Default: -EOPNOTSUPP. */
	int (*adopt)(struct xfer_transport *t, struct xfer_segment *seg,
		     const char *json, size_t len, char *err, size_t errlen);
	/** Kind: does @p seg (the engine's own when seg->local) hold all of
	 *  [off, off+len)? Caller holds seg->lock. Default: false. */
	bool (*covers)(struct xfer_transport *t, struct xfer_segment *seg,
		       uint64_t off, uint64_t len);
	/** Kind: where buffer @p index of @p seg starts in it and its length,
	 *  and a name for it (valid while the segment's document is).
	 *  @return 0, -ENOENT past the last. Default: -ENOENT. */
	int (*buffer)(struct xfer_transport *t, struct xfer_segment *seg,
		      size_t index, uint64_t *off, uint64_t *len,
		      const char **name);
};

/* What a transport's own public calls (declared in include/xfer/) may
 * ask of the engine that runs it (core/engine.c). */

/** The started transport of metadata kind @p kind; NULL if none. */
struct xfer_transport *xfer_engine_transport(struct xfer_engine *e,
					     const char *kind);
/** Republish the engine's document of @p kind; @p cb as for
 *  xfer_register_async(). @return 0, -ENOMEM (then @p cb never runs). */
int xfer_engine_republish(struct xfer_engine *e, const char *kind,
			  xfer_done_cb cb, void *arg);
/** What a blocking call that publishes does: 0, nothing to wait for
 *  (peers ask the engine itself); 1, wait for the store; -EDEADLK, it
 *  cannot wait here (the engine's callback thread). */
int xfer_engine_publish_wait(struct xfer_engine *e);

/** The core's knob: protocol, the transport the engine advertises. */
extern const struct xfer_knob xfer_transport_knobs[];

/** The transports this build has, NULL-ended (transports/table.c), at
 *  most XFER_TRANSPORTS_MAX. The core reads it; none is named here. */
#define XFER_TRANSPORTS_MAX 8
extern const struct xfer_transport_ops *const xfer_transport_list[];

/** Every transport with its defaults filled, NULL-ended. */
const struct xfer_transport_ops *const *xfer_transports(void);

/** The transport a descriptor or the configuration may name @p name
 *  (never one with XFER_TP_LOCAL or a kind); NULL if none. */
const struct xfer_transport_ops *xfer_transport_find(const char *name);

/** The descriptor codecs of every transport that has one, NULL-ended. */
const struct xfer_desc_codec *const *xfer_transport_codecs(void);

#endif
