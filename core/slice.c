/* Cutting requests into slices. */
#include "core/slice_internal.h"

/* A tail shorter than a quarter slice rides with the last full slice
 * rather than costing a work request (or a header) of its own. */
size_t xfer_slice_count(uint64_t len, size_t slice_size)
{
	uint64_t n = len / slice_size, rem = len % slice_size;

	if (n == 0 || (rem && rem >= slice_size / 4))
		n++;
	return (size_t)n;
}

void xfer_slice_cut(struct xfer_task *t, const struct xfer_request *req,
		    size_t slice_size, struct xfer_slice *out)
{
	size_t n = xfer_slice_count(req->length, slice_size);

	for (size_t i = 0; i < n; i++) {
		uint64_t off = (uint64_t)i * slice_size;

		out[i] = (struct xfer_slice){
			.task = t,
			.opcode = req->opcode,
			.len = (uint32_t)(i + 1 < n ? slice_size
						    : req->length - off),
			.local = (char *)req->source + off,
			.remote = req->target_offset + off,
			.next = i + 1 < n ? &out[i + 1] : NULL,
		};
	}
}
