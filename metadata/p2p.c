/*
 * Peer-to-peer metadata: no server. A segment's name is `host:port`; its
 * rpc_meta follows from the name and its descriptor is asked of the peer
 * itself with a Metadata handshake (PROTOCOL.md §1–2).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "desc_internal.h"
#include "handshake_internal.h"
#include "net_internal.h"
#include "store.h"

#define RPC_META_PREFIX "mooncake/rpc_meta/"
#define RAM_PREFIX "mooncake/ram/"

static int p2p_accepts(const char *conn)
{
	return !strcasecmp(conn, "p2p") || !strcmp(conn, "P2PHANDSHAKE");
}

static int p2p_open(const char *conn, struct xfer_store **out)
{
	(void)conn;
	*out = calloc(1, sizeof(**out));
	if (!*out)
		return -ENOMEM;
	(*out)->ops = &xfer_p2p_ops;
	return 0;
}

static int p2p_get(struct xfer_store *s, const char *key, char **value,
		   size_t *len)
{
	size_t rpc = strlen(RPC_META_PREFIX), ram = strlen(RAM_PREFIX);
	char host[256];
	uint16_t port;

	if (!strncmp(key, RPC_META_PREFIX, rpc)) {
		if (xfer_split_host_port(key + rpc, host, sizeof(host), &port))
			return -EINVAL;
		return xfer_rpc_meta_encode(host, port, value, len);
	}
	if (strncmp(key, RAM_PREFIX, ram))
		return -ENOENT;
	if (xfer_split_host_port(key + ram, host, sizeof(host), &port))
		return -EINVAL;
	return xfer_handshake_request(host, port, XFER_HS_METADATA, "{}\n", 3,
				      s->handshake_max_len, value, len);
}

static void p2p_close(struct xfer_store *s)
{
	free(s);
}

const struct xfer_store_ops xfer_p2p_ops = {
	.name = "p2p",
	.accepts = p2p_accepts,
	.open = p2p_open,
	.get = p2p_get,
	.close = p2p_close,
};
