/*
 * The file segment's document (transports/file/doc.c), a peer's
 * `mooncake/nvmeof/<name>` value. A document that decodes is searched
 * at its buffers' edges, encoded, and decoded again to the same files.
 */
#include <string.h>

#include "transports/file/doc_internal.h"
#include "test/fuzz/fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_quiet();
	return 0;
}

static void round_trip(const struct xfer_file_doc *d)
{
	struct xfer_file_doc *back = NULL;
	char err[256], *json;
	size_t len;

	if (xfer_file_doc_encode(d, &json, &len))
		return; /* not UTF-8 */
	if (xfer_file_doc_decode(json, len, &back, err, sizeof(err)))
		FUZZ_DIE("own document refused (%s): %s", err, json);
	if (back->nbufs != d->nbufs || back->data_port != d->data_port ||
	    strcmp(back->server_name, d->server_name))
		FUZZ_DIE("document changed in a round trip: %s", json);
	for (size_t i = 0; i < d->nbufs; i++)
		if (back->bufs[i].length != d->bufs[i].length ||
		    back->bufs[i].nmap != d->bufs[i].nmap ||
		    strcmp(back->bufs[i].file_path, d->bufs[i].file_path))
			FUZZ_DIE("file %zu changed in a round trip: %s", i,
				 json);
	xfer_file_doc_free(back);
	free(json);
}

static void search(const struct xfer_file_doc *d)
{
	uint64_t start = 0, in;

	for (size_t i = 0; i < d->nbufs; start += d->bufs[i++].length) {
		uint64_t len = d->bufs[i].length;

		if (xfer_file_doc_find(d, start, len, &in) != (long)i ||
		    in != 0)
			FUZZ_DIE("file %zu not found whole", i);
		if (xfer_file_doc_find(d, start + len - 1, 1, &in) != (long)i ||
		    in != len - 1)
			FUZZ_DIE("last byte of file %zu not found", i);
		if (xfer_file_doc_find(d, start, len + 1, &in) == (long)i)
			FUZZ_DIE("file %zu found past its end", i);
	}
	xfer_file_doc_find(d, UINT64_MAX, 1, &in);
	xfer_file_doc_find(d, 1, UINT64_MAX, &in);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct xfer_file_doc *d = NULL;
	char err[256];

	if (xfer_file_doc_decode((const char *)data, size, &d, err,
				 sizeof(err)))
		return 0;
	round_trip(d);
	search(d);
	xfer_file_doc_free(d);
	return 0;
}
