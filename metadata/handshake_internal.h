/*
 * The handshake socket of PROTOCOL.md §1: framed JSON, one request per
 * connection. The server runs on the engine's control reactor; the client
 * is a short blocking exchange on the caller's thread.
 */
#ifndef XFER_HANDSHAKE_INTERNAL_H
#define XFER_HANDSHAKE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

struct xfer_engine;
struct handshake_server;

enum {
	XFER_HS_CONNECTION = 0,
	XFER_HS_METADATA = 1,
	XFER_HS_NOTIFY = 2,
	XFER_HS_PROBE = 3,
};

/**
 * Listen on @p bind_addr:*port (0 = any free port, written back) on the
 * engine's control reactor. Call before the reactor runs.
 * @return 0 or a negative errno (-EADDRINUSE, -EINVAL for a bad address).
 */
int xfer_handshake_listen(struct xfer_engine *e, const char *bind_addr,
			  uint16_t *port, struct handshake_server **out);

/** Close the listener and every open connection. Reactor stopped. */
void xfer_handshake_close(struct handshake_server *hs);

/**
 * Send one typed frame to @p host:@p port and read the reply's body (JSON,
 * type byte stripped and checked): *reply malloc'd, *len bytes, NUL-ended.
 * Connecting, sending and awaiting the reply each have 5 s in all, so a
 * peer that trickles bytes cannot hold the caller longer.
 * @return 0; -ECONNREFUSED, -ETIMEDOUT, -EHOSTUNREACH, -ENOENT (host does
 *         not resolve), -ECONNRESET (closed without a reply), -EPROTO (a
 *         bad reply frame), -ENOMEM.
 */
int xfer_handshake_request(const char *host, uint16_t port, uint8_t type,
			   const char *body, size_t body_len, uint32_t max_len,
			   char **reply, size_t *len);

#endif
