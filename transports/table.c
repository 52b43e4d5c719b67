/* The one table that names every transport. */
#include "transport.h"

const struct xfer_transport_ops *const xfer_transports[XFER_NTRANSPORTS + 1] = {
	&xfer_local_ops,
	&xfer_tcp_ops,
	&xfer_rdma_ops,
	NULL,
};
