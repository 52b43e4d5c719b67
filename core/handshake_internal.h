/*
 * The handshake socket of PROTOCOL.md §1: framed JSON, one request per
 * connection, answered with the same type byte. The server runs on one
 * event_base (the engine's control reactor) and answers through the
 * callbacks of its environment; the client is one exchange on an
 * event_base. Used by the engine (server), the peer-to-peer metadata
 * backend (Metadata requests) and transports (Connection requests).
 */
#ifndef XFER_HANDSHAKE_INTERNAL_H
#define XFER_HANDSHAKE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define XFER_HANDSHAKE_TIMEOUT_MS 5000

struct event_base;
struct evdns_base;
struct xfer_auth;
struct xfer_hs_server;
struct xfer_hs_req;

enum {
	XFER_HS_CONNECTION = 0,
	XFER_HS_METADATA = 1,
	XFER_HS_NOTIFY = 2,
	XFER_HS_PROBE = 3,
	XFER_HS_LAST_TYPE = XFER_HS_PROBE,
	/** xfer's: the challenge-response that opens a connection when a
	 *  cluster secret is set (core/auth_internal.h). Past 0x80, where a
	 *  peer without one (Mooncake, or xfer with none) closes: an
	 *  unknown type, not a legacy frame. */
	XFER_HS_AUTH = 0xC1,
};

/** Connection body, same schema both ways (PROTOCOL.md §1). */
struct xfer_hs_conn {
	char *local_gid;
	uint32_t local_lid;
	char *local_nic_path;
	char *payload;
	char *peer_nic_path;
	size_t nqp;
	uint32_t *qp_num;
	bool ready_ack;
	char *reply_msg;
};

/** Notify body `{"name":str,"notify_msg":str}`. */
struct xfer_hs_notify {
	char *name;
	char *notify_msg;
};

/** What the server answers with; every callback runs on @c base. */
struct xfer_hs_env {
	struct event_base *base;
	uint32_t max_len;          /* largest request frame, bytes */
	/** Connections open at once, and from one source address: past
	 *  either the oldest in the way not being answered is closed (the
	 *  new one if all are). */
	unsigned max_conns, max_conns_per_addr;
	/** A new connection proves itself (with a secret) or sends its
	 *  request's header within this; then 5 s for the request. */
	uint32_t auth_timeout_ms;
	/** Bytes of frames being read, all connections together: a frame
	 *  whose length would pass it closes its connection. At least
	 *  max_len + 1. */
	uint64_t buffer_max;
	/** The cluster secret: every connection starts with the peer's
	 *  proof (core/auth_internal.h); NULL: none, Mooncake's frames. */
	const struct xfer_auth *auth;
	/** Fill @p reply for a Connection request. @return 0; -EOPNOTSUPP
	 *  when nothing here takes them (answered with every field empty);
	 *  another negative errno closes without a reply. */
	int (*connection)(const struct xfer_hs_conn *req,
			  struct xfer_hs_conn *reply, void *arg);
	/** The document to answer a Metadata request with, malloc'd: of
	 *  metadata kind @p kind, or the RAM descriptor when NULL. NULL if
	 *  there is none of that kind (the connection closes) or on ENOMEM. */
	char *(*descriptor)(const char *kind, size_t *len, void *arg);
	/** A notification arrived. @return 0 (answered "success"), or a
	 *  negative errno (answered with an empty message: refused). */
	int (*notify)(const struct xfer_hs_notify *n, void *arg);
	void *arg;
};

/**
 * Listen on @p sa (port 0: any free port; the port taken goes to *port)
 * with the callbacks of @p env (copied). Call before the base runs.
 * @return 0 or a negative errno (-EADDRINUSE ...).
 */
int xfer_handshake_listen(const struct xfer_hs_env *env,
			  const struct sockaddr *sa, socklen_t salen,
			  uint16_t *port, struct xfer_hs_server **out);

/** Close the listener and every open connection. Base stopped or on its
 *  thread. */
void xfer_handshake_close(struct xfer_hs_server *hs);

/** Result of a client exchange: @p err 0 with the reply body (type byte
 *  stripped, not NUL-ended), else a negative errno. */
typedef void (*xfer_hs_cb)(int err, const char *body, size_t len, void *arg);

/**
 * Start one client exchange on @p base: send a typed frame to
 * @p host:@p port (a name resolves through @p dns) and hand the reply's
 * body to @p cb, once, later, on @p base. With the secret @p auth (NULL:
 * none) the server proves itself first, then the client, and only then
 * does the request go out. 5 s to connect, then 5 s for the whole reply,
 * so a peer that trickles bytes cannot hold it longer. Errors to @p cb:
 * -ECONNREFUSED, -ETIMEDOUT, -EHOSTUNREACH, -ENOENT (the name does not
 * resolve), -ECONNRESET (closed without a reply: also a server that
 * refused our proof, or takes none), -EACCES (the server does not know
 * the secret), -EPROTO (a bad reply frame), -ENOMEM.
 * @return the request, or NULL for want of memory (then @p cb is never
 *         called).
 */
struct xfer_hs_req *xfer_handshake_request(struct event_base *base,
					   struct evdns_base *dns,
					   const struct xfer_auth *auth,
					   const char *host, uint16_t port,
					   uint8_t type, const char *body,
					   size_t body_len, uint32_t max_len,
					   xfer_hs_cb cb, void *arg);

/** Drop a request before its callback ran; the callback never runs. */
void xfer_handshake_cancel(struct xfer_hs_req *q);

/* ---- bodies (handshake_msg.c); decoders as the JSON helpers ---- */

/** Encode compact JSON ending in '\n'; NULL strings encode as "".
 *  @return 0, -EINVAL (not UTF-8), -ENOMEM. */
int xfer_hs_conn_encode(const struct xfer_hs_conn *c, char **json,
			size_t *len);
/** Decode as Mooncake does: a missing field reads as ""/0/false/no QPs,
 *  a present one is type- and bounds-checked (ready_ack: not true reads
 *  as false). Strings are malloc'd (never NULL on success); on failure
 *  @p c is left empty.
 *  @return 0, -EPROTO with a reason in @p err, -ENOMEM. */
int xfer_hs_conn_decode(const char *json, size_t len, struct xfer_hs_conn *c,
			char *err, size_t errlen);
/** Free the strings and array of @p c (not @p c itself). */
void xfer_hs_conn_clear(struct xfer_hs_conn *c);

/**
 * A Metadata request body: any JSON object (Mooncake sends `{}` or its own
 * descriptor); a string "kind" in it asks for the document of that
 * metadata kind instead of the RAM descriptor (xfer's, PROTOCOL.md §1).
 * @return 0 with *@p kind malloc'd or NULL, -EPROTO, -ENOMEM.
 */
int xfer_hs_meta_decode(const char *json, size_t len, char **kind, char *err,
			size_t errlen);

int xfer_hs_notify_encode(const struct xfer_hs_notify *n, char **json,
			  size_t *len);
/** Decode; a missing field reads as "", a present one must be a string. */
int xfer_hs_notify_decode(const char *json, size_t len,
			  struct xfer_hs_notify *n, char *err, size_t errlen);
void xfer_hs_notify_clear(struct xfer_hs_notify *n);

#endif
