/*
 * The MAC that proves an xfer-metad write (PUT, DELETE) was made with the
 * cluster secret: the server (metadata/metad/auth.c) checks it, the HTTP
 * backend (metadata/http.c) makes it. Bytes in docs/PROTOCOL.md §2,
 * threat model in docs/SECURITY.md.
 */
#ifndef XFER_WRITE_MAC_INTERNAL_H
#define XFER_WRITE_MAC_INTERNAL_H

#include "util/auth_internal.h"

#define XFER_AUTH_WRITE_LABEL "xfer-metad-1 write"
/* X-Xfer-Auth: <nonce, 64 hex digits>:<mac, 64 hex digits> */
#define XFER_AUTH_HEADER_LEN (2 * XFER_AUTH_NONCE_LEN + 1 + \
			      2 * XFER_AUTH_MAC_LEN)

/**
 * The MAC of one write to xfer-metad: xfer_auth_mac() with the secret
 * @p a, label XFER_AUTH_WRITE_LABEL, over @p method ("PUT", "DELETE"),
 * "\n", @p key (its bytes, as stored: not percent-encoded), "\n",
 * @p body_sha256 (SHA-256 of the request body, empty for DELETE) and the
 * server's @p nonce. @return 0, or -EIO.
 */
int xfer_auth_write_mac(const struct xfer_auth *a, const char *method,
			const char *key,
			const uint8_t body_sha256[XFER_AUTH_SHA256_LEN],
			const uint8_t nonce[XFER_AUTH_NONCE_LEN],
			uint8_t mac[XFER_AUTH_MAC_LEN]);

#endif
