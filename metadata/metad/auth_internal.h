/*
 * xfer-metad's guard on writes (docs/SECURITY.md "xfer-metad with a
 * secret", PROTOCOL.md §2): with a cluster secret, a PUT or DELETE must
 * carry "X-Xfer-Auth: <nonce hex>:<mac hex>", the MAC of
 * xfer_auth_write_mac() over a nonce this server handed out (GET
 * <path>/nonce) no more than METAD_NONCE_TTL_MS before, and that proved
 * no write since. Nothing is kept per nonce handed out (the nonce
 * carries a tag of the server's own), so asking for nonces, however
 * many, takes none from anyone; the nonces of the writes proved in the
 * last METAD_NONCE_TTL_MS are kept, at most METAD_SPENT_MAX in each such
 * time. Single-threaded: on the server's event_base.
 */
#ifndef XFER_METAD_AUTH_INTERNAL_H
#define XFER_METAD_AUTH_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "metadata/write_mac_internal.h"

#define METAD_NONCE_TTL_MS 60000   /* a nonce's life, ms */
#define METAD_SPENT_MAX 32768u     /* writes proved per METAD_NONCE_TTL_MS */
#define METAD_NONCE_HEX (2 * XFER_AUTH_NONCE_LEN)

struct metad_auth;

/**
 * The guard for the cluster secret @p secret (copied; its bytes up to
 * the NUL), with a fresh key for its nonces' tags (nonces of another
 * guard, or of this server before a restart, are unknown to it).
 * @return it, or NULL with errno EINVAL (empty), ENOMEM or EIO (no
 * random bytes).
 */
struct metad_auth *metad_auth_new(const char *secret);

/** Wipe the secret and free (NULL is fine). */
void metad_auth_free(struct metad_auth *a);

/**
 * A fresh nonce as METAD_NONCE_HEX lowercase hex digits and a NUL into
 * @p hex, good for one write until @p now_ms (a monotonic time, ms) +
 * METAD_NONCE_TTL_MS: @p now_ms, 8 bytes of RAND_bytes, and their tag.
 * Keeps nothing. @return 0, or -EIO (no random bytes, libcrypto failed).
 */
int metad_auth_nonce(struct metad_auth *a, int64_t now_ms,
		     char hex[METAD_NONCE_HEX + 1]);

/**
 * Check one write at @p now_ms: @p header is its X-Xfer-Auth value
 * (NULL: none), @p method "PUT" or "DELETE", @p key the key decoded,
 * @p body its @p len bytes. A nonce proves one write: a write it proved
 * spends it; a write it fails to prove (a wrong MAC) leaves it good for
 * the one it was asked for. Refused also when METAD_SPENT_MAX writes
 * were proved since the current METAD_NONCE_TTL_MS began.
 * @return NULL if the write is proved, else a one-line reason (static).
 */
const char *metad_auth_check(struct metad_auth *a, int64_t now_ms,
			     const char *header, const char *method,
			     const char *key, const void *body, size_t len);

#endif
