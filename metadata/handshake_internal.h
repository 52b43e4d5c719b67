/*
 * The handshake socket of PROTOCOL.md §1: framed JSON, one request per
 * connection. The server runs on the engine's control reactor; the client
 * is a short blocking exchange on the caller's thread.
 */
#ifndef XFER_HANDSHAKE_INTERNAL_H
#define XFER_HANDSHAKE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

struct event_base;
struct evdns_base;
struct xfer_engine;
struct handshake_server;
struct hs_req;

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
 * Start one client exchange on @p base: send a typed frame to
 * @p host:@p port (a name resolves through @p dns) and hand the reply's
 * body to @p cb (type byte checked and stripped; not NUL-ended), once,
 * later, on @p base. 5 s to connect, then 5 s for the whole reply, so a
 * peer that trickles bytes cannot hold it longer. Errors to @p cb:
 * -ECONNREFUSED, -ETIMEDOUT, -EHOSTUNREACH, -ENOENT (the name does not
 * resolve), -ECONNRESET (closed without a reply), -EPROTO (a bad reply
 * frame), -ENOMEM.
 * @return the request, or NULL for want of memory (then @p cb is never
 *         called).
 */
struct hs_req *xfer_handshake_request(struct event_base *base,
				      struct evdns_base *dns, const char *host,
				      uint16_t port, uint8_t type,
				      const char *body, size_t body_len,
				      uint32_t max_len, xfer_store_cb cb,
				      void *arg);

/** Drop a request before its callback ran; the callback never runs. */
void xfer_handshake_cancel(struct hs_req *q);

#endif
