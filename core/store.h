/*
 * The metadata store contract, owned by the core: a key/value view of
 * PROTOCOL.md §2. A backend is a table of operations in metadata/, one
 * per file, listed in metadata/store.c and chosen by the connection
 * string. Slots a backend leaves NULL get the defaults of core/store.c
 * (each slot says its default), so callers never test for NULL.
 *
 * Every call and every callback happens on the engine's control reactor
 * (env->base): backends do all their I/O there, never blocking it.
 */
#ifndef XFER_STORE_H
#define XFER_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "core/config_internal.h"
#include "util/container_internal.h"

struct event_base;
struct xfer_auth;
struct xfer_deferred;
struct xfer_store;

enum xfer_store_op { XFER_STORE_GET, XFER_STORE_PUT, XFER_STORE_DEL };

/**
 * Result of get, put or del. @p err is 0, -ENOENT (get: absent), or a
 * negative errno (-ECONNREFUSED, -ETIMEDOUT, -EIO, -EACCES: http's
 * server refused the write (401) ...). For get, @p value
 * holds @p len bytes (not NUL-ended), valid during the callback only.
 */
typedef void (*xfer_store_cb)(int err, const char *value, size_t len,
			      void *arg);

/** What the engine gives a backend at open. */
struct xfer_store_env {
	struct event_base *base;   /* the control reactor */
	/** Keys live under this prefix: "mooncake/" or
	 *  "mooncake/<cluster_id>/"; watch it. */
	const char *prefix;
	/** A key under the prefix changed or went away (full key). NULL:
	 *  changes may have been missed (reconnect, lost history): treat
	 *  every key as changed. */
	void (*changed)(const char *key, void *arg);
	/** The backend is (re)connected after a loss: the engine
	 *  republishes its keys. Not called for the first connection. */
	void (*reconnected)(void *arg);
	void *arg;
	/** Optional credentials (redis AUTH): may be NULL. */
	const char *user, *password;
	uint32_t handshake_max_len; /* p2p: largest reply frame */
	/** The cluster secret (NULL: none): p2p's handshakes prove it, and
	 *  http's writes (a 401 is -EACCES). */
	const struct xfer_auth *auth;
};

/* What a backend is (xfer_store_ops.flags). */
enum {
	/** It keeps keys: the engine publishes its own and deletes them. */
	XFER_STORE_KEEPS = 1 << 0,
	/** Segment names are their owners' `host:port` handshake addresses,
	 *  and a descriptor is asked of its owner (peer-to-peer). */
	XFER_STORE_ADDR_NAMES = 1 << 1,
};

struct xfer_store_ops {
	const char *name;
	unsigned flags;
	/** Does this backend serve connection string @p conn? */
	int (*accepts)(const char *conn);
	/**
	 * Parse @p conn and start connecting (and watching env->prefix).
	 * Called before the reactor runs, on the creating thread. A server
	 * that is down is not an error here; calls fail until it is up.
	 * @return 0, -EINVAL (malformed conn, naming what is wrong in the
	 *         log), -ENOMEM.
	 */
	int (*open)(const char *conn, const struct xfer_store_env *env,
		    struct xfer_store **out);
	/** Start a get; @p cb runs exactly once, later (never inside this
	 *  call), on the reactor. Key and value are copied as needed. */
	void (*get)(struct xfer_store *s, const char *key, xfer_store_cb cb,
		    void *arg);
	/** Start a put, as get. Default (a store that keeps no keys):
	 *  -EOPNOTSUPP, from the deferred queue. */
	void (*put)(struct xfer_store *s, const char *key, const char *value,
		    size_t len, xfer_store_cb cb, void *arg);
	/** Start a delete, as get; deleting an absent key succeeds.
	 *  Default: as put's. */
	void (*del)(struct xfer_store *s, const char *key, xfer_store_cb cb,
		    void *arg);
	/** Stop: pending callbacks are never called. Reactor stopped or on
	 *  its thread. */
	void (*close)(struct xfer_store *s);
};

/** A backend's instance embeds this first. */
struct xfer_store {
	/** The backend's table; xfer_store_open() sets the filled one. */
	const struct xfer_store_ops *ops;
	/** The backend's queue of results (core/deferred_internal.h), set
	 *  by open(): the defaults answer from it. */
	struct xfer_deferred *deferred;
};

/** The backends this build has, NULL-ended (metadata/store.c), at most
 *  XFER_STORES_MAX. The core reads it; no backend is named here. */
#define XFER_STORES_MAX 8
extern const struct xfer_store_ops *const xfer_store_list[];

/** The metadata knobs: the connection string (metadata_server), the
 *  cluster id and credentials; ended by a NULL name. */
extern const struct xfer_knob xfer_store_knobs[];

/** The backend for @p conn, its empty slots filled, or NULL. */
const struct xfer_store_ops *xfer_store_find(const char *conn);

/** @p ops->open(), then the instance's ops set to @p ops (a table
 *  xfer_store_find() gave, defaults filled). @return as open(). */
int xfer_store_open(const struct xfer_store_ops *ops, const char *conn,
		    const struct xfer_store_env *env, struct xfer_store **out);

#endif
