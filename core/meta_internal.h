/*
 * The engine's side of the metadata store (PROTOCOL.md §2): the backend
 * its connection string names, opened on the control reactor; a blocking
 * bridge for API calls made on other threads; publication of the engine's
 * own keys; the watch, reported through the environment.
 */
#ifndef XFER_META_INTERNAL_H
#define XFER_META_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <xfer/xfer.h>

#include "core/store.h"
#include "reactor/reactor_internal.h"

struct xfer_auth;
struct xfer_error;

struct xfer_meta_env {
	struct xfer_reactor *control;
	const char *conn;          /* the connection string */
	const char *cluster_id, *user, *password; /* may be NULL */
	uint32_t handshake_max_len;
	const struct xfer_auth *auth;  /* p2p's handshakes prove it; NULL */
	/** The own document of metadata kind @p kind (NULL: the RAM
	 *  descriptor, with or without buffers), malloc'd; NULL on ENOMEM.
	 *  Any thread. */
	char *(*document)(const char *kind, bool with_buffers, size_t *len,
			  void *arg);
	/** The kinds of own documents besides "ram" ("nvmeof"), NULL-ended;
	 *  at most XFER_META_MAX_OWN - 2. */
	const char *const *kinds;
	/** Segment @p name's key changed ("<kind>/<name>" for a kind other
	 *  than ram); NULL: every segment may have (events lost). Control
	 *  reactor. */
	void (*changed)(const char *name, void *arg);
	struct xfer_error *err;
	void *arg;
};

/* Own keys: rpc_meta, ram and the kinds. */
#define XFER_META_MAX_OWN 8

struct xfer_meta_waiter;
struct xfer_meta_op;

struct xfer_meta {
	struct xfer_meta_env env;  /* strings stay the caller's */
	struct xfer_store *store;
	unsigned flags;            /* the backend's XFER_STORE_* */
	char *prefix;              /* "mooncake/" or "mooncake/<cluster>/" */
	/* The own keys, once started. */
	const char *name, *host;
	uint16_t port;
	struct xfer_job publish_job;
	atomic_uint publish_flags; /* what publish_job will put */
	pthread_mutex_t lock;      /* waiters */
	struct xfer_meta_waiter *waiters;    /* for the next ram put */
	/* Store calls of ours in flight (control reactor): the backend
	 * never answers them once closed, so close frees them. */
	struct xfer_meta_op *ops;
};

/**
 * Open the backend the connection string names, before the reactor runs.
 * @return 0, -EPROTONOSUPPORT (no backend takes it; logged), -EINVAL
 *         (malformed), -ENOMEM.
 */
int xfer_meta_open(struct xfer_meta *m, const struct xfer_meta_env *env);
/** Close the backend; the reactor is stopped. */
void xfer_meta_close(struct xfer_meta *m);

/** Does the backend keep keys (so that publishing waits for it)? */
bool xfer_meta_keeps(const struct xfer_meta *m);

/** Publish rpc_meta (@p host:@p port) and ram of segment @p name (kept
 *  by the caller): waited for, so an unreachable server fails it; on the
 *  control reactor's thread (plugin mode) sent when the base runs. */
int xfer_meta_start(struct xfer_meta *m, const char *name, const char *host,
		    uint16_t port);
/** Publish ram without buffers, then delete both keys; waited for (on the
 *  control reactor's thread, through a connection of its own). */
void xfer_meta_stop(struct xfer_meta *m);
/**
 * Republish the own document of @p kind (NULL: ram) after a change,
 * coalesced with other changes; @p cb(engine, 0 or the store's error,
 * @p arg) runs on the control reactor once the put that carries this
 * change is answered (with a store that keeps nothing: soon). A server
 * that is away gets it when it is back. Any thread.
 * @return 0, -ENOENT (not an own kind), -ENOMEM (then @p cb never runs).
 */
int xfer_meta_publish(struct xfer_meta *m, const char *kind, xfer_done_cb cb,
		      void *arg);

/** Start a get of `<kind>/<name>` ("ram", "rpc_meta", "nvmeof") on the
 *  control reactor (from it).
 *  @return 0 (@p cb runs later), or -ENOMEM (it never runs). */
int xfer_meta_get(struct xfer_meta *m, const char *kind, const char *name,
		  xfer_store_cb cb, void *arg);

#endif
