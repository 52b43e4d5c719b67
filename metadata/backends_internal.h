/* The metadata backends of this tree, by name (metadata/store.c lists
 * them; tests reach one directly). */
#ifndef XFER_BACKENDS_INTERNAL_H
#define XFER_BACKENDS_INTERNAL_H

#include "core/store.h"

extern const struct xfer_store_ops xfer_p2p_ops;
extern const struct xfer_store_ops xfer_http_ops;
extern const struct xfer_store_ops xfer_redis_ops;
extern const struct xfer_store_ops xfer_etcd_ops;

#endif
