/*
 * The segment descriptor decoder (core/desc.c) with every transport's
 * codec (TCP's data port, RDMA's devices, keys and priority matrix), and
 * the other decoders of the same values: rpc_meta and the priority
 * matrix alone. A descriptor that decodes is sorted, searched, encoded
 * and decoded again, which must succeed and keep it.
 */
#include <string.h>

#include "core/desc_internal.h"
#include "transports/rdma/desc_internal.h"
#include "core/transport.h"
#include "test/fuzz/fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_quiet();
	return 0;
}

static void check_round_trip(const struct xfer_desc *d)
{
	struct xfer_desc *back = NULL;
	char err[256], *json;
	size_t len;
	int ret;

	if (xfer_desc_encode(d, &json, &len))
		return; /* a string that is not UTF-8 is refused: fine */
	ret = xfer_desc_decode(json, len, xfer_transport_codecs(), &back, err,
			       sizeof(err));
	if (ret)
		FUZZ_DIE("own encoding refused (%s): %s", err, json);
	if (back->nbufs != d->nbufs || strcmp(back->name, d->name) ||
	    strcmp(back->protocol, d->protocol) || back->codec != d->codec)
		FUZZ_DIE("round trip changed the descriptor: %s", json);
	for (size_t i = 0; i < d->nbufs; i++)
		if (back->bufs[i].addr != d->bufs[i].addr ||
		    back->bufs[i].length != d->bufs[i].length)
			FUZZ_DIE("round trip changed buffer %zu: %s", i, json);
	xfer_desc_free(back);
	free(json);
}

static void use(struct xfer_desc *d)
{
	check_round_trip(d);
	if (xfer_desc_sort(d))
		return;
	for (size_t i = 0; i < d->nbufs; i++) {
		const struct xfer_desc_buf *b = &d->bufs[i];

		if (xfer_desc_find_buf(d, b->addr, b->length) != b ||
		    xfer_desc_find_buf(d, b->addr + b->length - 1, 1) != b)
			FUZZ_DIE("buffer %zu not found in its own descriptor", i);
		xfer_desc_find_buf(d, b->addr - 1, 2);
		xfer_desc_find_buf(d, b->addr, UINT64_MAX);
	}
	xfer_desc_find_buf(d, 0, 1);
	xfer_desc_find_buf(d, UINT64_MAX, 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *json = (const char *)data;
	struct xfer_rdma_prio *prio = NULL;
	struct xfer_desc *d = NULL;
	char err[256], *host = NULL;
	uint16_t port;
	size_t n = 0;

	if (!xfer_desc_decode(json, size, xfer_transport_codecs(), &d, err,
			      sizeof(err))) {
		use(d);
		xfer_desc_free(d);
	}
	if (!xfer_rpc_meta_decode(json, size, &host, &port, err, sizeof(err)))
		free(host);
	if (!xfer_rdma_prio_decode(json, size, &prio, &n, err, sizeof(err)))
		xfer_rdma_prio_free(prio, n);
	return 0;
}
