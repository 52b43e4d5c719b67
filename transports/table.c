/*
 * The one list of transports this build has (core/transport.h says what
 * a transport is; the core fills their empty slots).
 */
#include <stddef.h>

#include "core/transport.h"

extern const struct xfer_transport_ops xfer_local_ops;
extern const struct xfer_transport_ops xfer_tcp_ops;
extern const struct xfer_transport_ops xfer_rdma_ops;
extern const struct xfer_transport_ops xfer_file_ops;

const struct xfer_transport_ops *const xfer_transport_list[] = {
	&xfer_local_ops,
	&xfer_tcp_ops,
	&xfer_rdma_ops,
	&xfer_file_ops,
	NULL,
};
