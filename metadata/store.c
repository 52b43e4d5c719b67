/* The one list of metadata backends this build has (core/store.h says
 * what a backend is; the core fills their empty slots); the optional
 * ones as the build has them (mk/config.mk: WITH_*). */
#include <stddef.h>

#include "metadata/backends_internal.h"

const struct xfer_store_ops *const xfer_store_list[] = {
	&xfer_p2p_ops,
	&xfer_http_ops,
#ifdef XFER_HAVE_REDIS
	&xfer_redis_ops,
#endif
#ifdef XFER_HAVE_ETCD
	&xfer_etcd_ops, /* last: a bare host:port means etcd */
#endif
	NULL,
};
