/*
 * The store's RPC decoder (store/proto.c), as the master meets a peer's
 * bytes: a header, then as many bytes of body as it says. What decodes
 * must encode back to exactly the bytes it came from (one table drives
 * both ways, so a field read but not checked shows up as a difference).
 */
#include <string.h>

#include "store/proto_internal.h"
#include "test/fuzz/fuzz.h"

static struct store_msg m;
static struct store_buf out;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < STORE_HDR_LEN || store_hdr_decode(data, &m.h))
		return 0;
	if (m.h.len > size - STORE_HDR_LEN)
		return 0;
	if (store_msg_decode(data + STORE_HDR_LEN, &m))
		return 0;
	out.len = 0;
	if (store_msg_encode(&out, &m))
		FUZZ_DIE("a decoded %s did not encode",
			 store_type_name(m.h.type));
	if (out.len != STORE_HDR_LEN + m.h.len ||
	    memcmp(out.p, data, out.len))
		FUZZ_DIE("a decoded %s encoded to other bytes",
			 store_type_name(m.h.type));
	return 0;
}
