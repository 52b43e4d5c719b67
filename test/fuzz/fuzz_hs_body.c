/*
 * The handshake bodies (core/handshake_msg.c): Connection, Metadata and
 * Notify, and the strict object check a Probe body passes
 * (util/json.c). A body that decodes is encoded again, and that
 * encoding must decode to the same fields.
 */
#include <string.h>

#include "core/handshake_internal.h"
#include "util/json_internal.h"
#include "test/fuzz/fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_quiet();
	return 0;
}

static void conn_round_trip(const struct xfer_hs_conn *c)
{
	struct xfer_hs_conn back;
	char err[256], *json;
	size_t len;

	if (xfer_hs_conn_encode(c, &json, &len))
		return; /* not UTF-8 */
	if (xfer_hs_conn_decode(json, len, &back, err, sizeof(err)))
		FUZZ_DIE("own Connection body refused (%s): %s", err, json);
	if (back.nqp != c->nqp || back.local_lid != c->local_lid ||
	    back.ready_ack != c->ready_ack ||
	    strcmp(back.local_nic_path, c->local_nic_path) ||
	    strcmp(back.payload, c->payload) ||
	    (c->nqp && memcmp(back.qp_num, c->qp_num,
			      c->nqp * sizeof(*c->qp_num))))
		FUZZ_DIE("Connection body changed in a round trip: %s", json);
	xfer_hs_conn_clear(&back);
	free(json);
}

static void notify_round_trip(const struct xfer_hs_notify *n)
{
	struct xfer_hs_notify back;
	char err[256], *json;
	size_t len;

	if (xfer_hs_notify_encode(n, &json, &len))
		return;
	if (xfer_hs_notify_decode(json, len, &back, err, sizeof(err)))
		FUZZ_DIE("own Notify body refused (%s): %s", err, json);
	if (strcmp(back.name, n->name) || strcmp(back.notify_msg, n->notify_msg))
		FUZZ_DIE("Notify body changed in a round trip: %s", json);
	xfer_hs_notify_clear(&back);
	free(json);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *json = (const char *)data;
	struct xfer_hs_notify n;
	struct xfer_hs_conn c;
	char err[256], *kind;

	if (!xfer_hs_conn_decode(json, size, &c, err, sizeof(err))) {
		conn_round_trip(&c);
		xfer_hs_conn_clear(&c);
	}
	if (!xfer_hs_meta_decode(json, size, &kind, err, sizeof(err)))
		free(kind);
	if (!xfer_hs_notify_decode(json, size, &n, err, sizeof(err))) {
		notify_round_trip(&n);
		xfer_hs_notify_clear(&n);
	}
	xfer_json_check_object(json, size, err, sizeof(err));
	return 0;
}
