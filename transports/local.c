/* Local copy: a request whose target is this engine's own segment. */
#include <string.h>

#include "core/config_internal.h"
#include "core/slice_internal.h"
#include "core/transport.h"

static void local_submit(struct xfer_transport *t, struct xfer_segment *seg,
			 struct xfer_slice *s, size_t n)
{
	(void)t;
	(void)seg;
	for (size_t i = 0; i < n; i++) {
		void *remote = (void *)(uintptr_t)s[i].remote;

		if (s[i].opcode == XFER_WRITE)
			memmove(remote, s[i].local, s[i].len);
		else
			memmove(s[i].local, remote, s[i].len);
		xfer_slice_done(&s[i], XFER_COMPLETED);
	}
}

const struct xfer_transport_ops xfer_local_ops = {
	.name = "local",
	.flags = XFER_TP_ALWAYS | XFER_TP_LOCAL,
	.submit = local_submit,
};
