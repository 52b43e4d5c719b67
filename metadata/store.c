/* The one table of metadata backends. */
#include <stddef.h>

#include "metadata/store.h"

static const struct xfer_store_ops *const backends[] = {
	&xfer_p2p_ops,
	&xfer_http_ops,
	&xfer_redis_ops,
	&xfer_etcd_ops, /* last: a bare host:port means etcd */
};

const struct xfer_store_ops *xfer_store_find(const char *conn)
{
	for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++)
		if (backends[i]->accepts(conn))
			return backends[i];
	return NULL;
}
