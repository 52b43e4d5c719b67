/*
 * The engine: what one process's xfer_engine holds. Only the files that
 * implement the public API (engine.c, register.c, segment.c, batch.c)
 * look inside.
 */
#ifndef XFER_ENGINE_INTERNAL_H
#define XFER_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/queue.h>

#include "core/buffers_internal.h"
#include "core/config_internal.h"
#include "core/meta_internal.h"
#include "core/notify_internal.h"
#include "core/segment_internal.h"
#include "core/slice_internal.h"
#include "core/transport.h"
#include "reactor/reactor_internal.h"
#include "util/log_internal.h"

#define XFER_MAX_WORKERS 64
/* At most this many transports in the table. */
#define XFER_MAX_TRANSPORTS 8

struct xfer_auth;
struct xfer_hs_server;

struct xfer_engine {
	struct xfer_config *cfg;    /* the engine's own copy */
	size_t slice_size;
	char *name;                 /* own segment name */
	char *host;                 /* host part of name */
	uint16_t rpc_port;
	struct xfer_reactor control;
	struct xfer_reactor workers[XFER_MAX_WORKERS];
	int nworkers;
	atomic_uint next_worker;
	struct xfer_buffers buffers;
	struct xfer_meta meta;
	struct xfer_segments segs;
	struct xfer_hs_server *hs;
	struct evdns_base *dns;
	uint32_t hs_max_len;        /* largest handshake frame, bytes */
	struct xfer_auth *auth;     /* the cluster secret (auth_secret), NULL */
	struct xfer_notifier notes;

	/* The started transports, NULL-ended; main is the one the own
	 * descriptor advertises, local the one serving the own segment. */
	struct xfer_transport *tps[XFER_MAX_TRANSPORTS + 1];
	struct xfer_transport_env tp_env[XFER_MAX_TRANSPORTS];
	union xfer_knob_val *tp_knobs;
	struct xfer_transport *main, *local;
	/* The metadata kinds of the started transports, NULL-ended. */
	const char *kinds[XFER_MAX_TRANSPORTS + 1];

	pthread_mutex_t batches_lock; /* the batches not yet freed */
	LIST_HEAD(, xfer_batch) batches;

	pthread_mutex_t desc_lock;  /* own descriptor, encoded */
	char *desc_json;
	size_t desc_len;

	struct xfer_error err;
};

/* Implemented in core/batch.c, called by core/engine.c: once every
 * thread of @p e is stopped and its transports closed, the batches not
 * yet freed let go of it (tasks not terminal end CANCELED, callbacks and
 * notifications never come); xfer_batch_free() frees them later. */
void xfer_batches_orphan(struct xfer_engine *e);

/* Implemented in core/register.c, called by core/engine.c. */

/* Re-encode the own descriptor after the buffers changed (on the thread
 * that changed them). @return 0, -ENOMEM. */
int xfer_engine_update_descriptor(struct xfer_engine *e);

/* A malloc'd copy (the caller frees it; *@p len its length) of the own
 * document of metadata kind @p kind, or with @p kind NULL of the RAM
 * descriptor: the current one, or with @p with_buffers false one with
 * no buffers (published on shutdown). Any thread. @return NULL when out
 * of memory or no transport serves @p kind. */
char *xfer_engine_own_descriptor(const char *kind, bool with_buffers,
				 size_t *len, void *arg);

/* Start the engine's empty buffer registry, which tells register.c when
 * a leaving buffer's last peer request is done. */
void xfer_engine_buffers_init(struct xfer_engine *e);

/* Take every registered buffer out of every started transport (at
 * shutdown; the registry keeps them). */
void xfer_engine_unreg_buffers(struct xfer_engine *e);

#endif
