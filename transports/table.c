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

/* The optional ones as the build has them (mk/config.mk: WITH_*). */
const struct xfer_transport_ops *const xfer_transport_list[] = {
	&xfer_local_ops,
	&xfer_tcp_ops,
#ifdef XFER_HAVE_RDMA
	&xfer_rdma_ops,
#endif
#ifdef XFER_HAVE_FILE
	&xfer_file_ops,
#endif
	NULL,
};
