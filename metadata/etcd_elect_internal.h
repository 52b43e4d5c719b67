/*
 * Leader election on the etcd backend (metadata/etcd_elect.c), for
 * xfer-stored's --enable_ha: a campaign puts a key under the backend's
 * lease only if no one holds it (an etcd transaction), so the key lives
 * exactly as long as the winner keeps its lease alive. The rest (get,
 * watch, del) is the backend's ordinary ops (core/store.h).
 */
#ifndef XFER_ETCD_ELECT_INTERNAL_H
#define XFER_ETCD_ELECT_INTERNAL_H

#include <stddef.h>

#include "core/store.h"

/**
 * Open the etcd backend on @p conn ("etcd://h:p[,h:p]...", or Mooncake's
 * "h1:p1;h2:p2") as xfer_etcd_ops.open() does, with @p env, its lease
 * asked for a TTL of @p ttl_s seconds (etcd may raise it to its minimum).
 * @return 0, -EINVAL (a malformed @p conn, logged), -ENOMEM.
 */
int xfer_etcd_elect_open(const char *conn, const struct xfer_store_env *env,
			 int ttl_s, struct xfer_store **out);

/**
 * Campaign for @p key (full key): put @p len bytes of @p value under the
 * lease (granted first if there is none) if the key is absent. @p cb runs
 * once, later, on the reactor: err 0 (we hold it), -EEXIST (someone
 * does: value and len are the holder's value), or a negative errno of
 * the backend's (-ETIMEDOUT, -ECONNREFUSED, -EIO, -ENOMEM).
 * @p s must be an instance of xfer_etcd_elect_open().
 */
void xfer_etcd_campaign(struct xfer_store *s, const char *key,
			const char *value, size_t len, xfer_store_cb cb,
			void *arg);

/**
 * Delete @p key if its value is still @p len bytes of @p value (a dead
 * holder's: its lease would keep it for a TTL more). @p cb runs once,
 * later: err 0 (deleted), -ESTALE (the value is another, or the key is
 * gone), or a negative errno as for a campaign.
 */
void xfer_etcd_depose(struct xfer_store *s, const char *key,
		      const char *value, size_t len, xfer_store_cb cb,
		      void *arg);

#endif
