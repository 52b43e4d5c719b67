/* Cutting requests into slices, and counting them back into tasks. */
#include "engine_internal.h"

size_t xfer_slice_count(uint64_t len, size_t slice_size)
{
	return (size_t)((len + slice_size - 1) / slice_size);
}

void xfer_slice_cut(struct xfer_task *t, const struct xfer_request *req,
		    size_t slice_size, struct xfer_slice *out)
{
	uint64_t off = 0;

	for (size_t i = 0; off < req->length; i++, off += slice_size) {
		uint64_t len = req->length - off;

		out[i] = (struct xfer_slice){
			.task = t,
			.opcode = req->opcode,
			.len = (uint32_t)(len < slice_size ? len : slice_size),
			.local = (char *)req->source + off,
			.remote = req->target_offset + off,
		};
		out[i].next = off + slice_size < req->length ? &out[i + 1] : NULL;
	}
}
