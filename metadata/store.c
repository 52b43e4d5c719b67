/* The one table of metadata backends, and the knobs they share. */
#include <stddef.h>

#include "metadata/store.h"

static const struct xfer_store_ops *const backends[] = {
	&xfer_p2p_ops,
	&xfer_http_ops,
	&xfer_redis_ops,
	&xfer_etcd_ops, /* last: a bare host:port means etcd */
};

const struct xfer_knob xfer_store_knobs[] = {
	XFER_KNOB_S("metadata_server", "XFER_METADATA_SERVER",
		    "MC_METADATA_SERVER", "p2p", "string", "where segments "
		    "are found: p2p, etcd://, redis://, redis+sentinel://, "
		    "http://"),
	XFER_KNOB_S("cluster_id", "XFER_CLUSTER_ID", "MC_METADATA_CLUSTER_ID",
		    NULL, "string", "keys go under mooncake/ID/, ID being this; "
		    "unset: under mooncake/"),
	XFER_KNOB_S("metadata_user", "XFER_METADATA_USER", "MC_REDIS_USERNAME",
		    NULL, "string", "user for the metadata server (redis "
		    "AUTH); unset: none"),
	XFER_KNOB_S("metadata_password", "XFER_METADATA_PASSWORD",
		    "MC_REDIS_PASSWORD", NULL, "string", "password for the "
		    "metadata server (redis AUTH); unset: none"),
	XFER_KNOB_END,
};

const struct xfer_store_ops *xfer_store_find(const char *conn)
{
	for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++)
		if (backends[i]->accepts(conn))
			return backends[i];
	return NULL;
}
