/*
 * xfer-metad's guard on writes (docs/SECURITY.md "xfer-metad with a
 * secret", PROTOCOL.md §2): with a cluster secret, a PUT or DELETE must
 * carry "X-Xfer-Auth: <nonce hex>:<mac hex>", the MAC of
 * xfer_auth_write_mac() over a nonce this server handed out (GET
 * <path>/nonce) no more than METAD_NONCE_TTL_MS before, and not used
 * since. The last METAD_NONCES nonces are remembered; an older one is
 * forgotten. Single-threaded: on the server's event_base.
 */
#ifndef XFER_METAD_AUTH_INTERNAL_H
#define XFER_METAD_AUTH_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "metadata/write_mac_internal.h"

#define METAD_NONCES 4096u         /* nonces remembered */
#define METAD_NONCE_TTL_MS 60000   /* a nonce's life, ms */
#define METAD_NONCE_HEX (2 * XFER_AUTH_NONCE_LEN)

struct metad_auth;

/**
 * The guard for the cluster secret @p secret (copied; its bytes up to
 * the NUL). @return it, or NULL with errno EINVAL (empty) or ENOMEM.
 */
struct metad_auth *metad_auth_new(const char *secret);

/** Wipe the secret and free (NULL is fine). */
void metad_auth_free(struct metad_auth *a);

/**
 * A fresh nonce (RAND_bytes) as METAD_NONCE_HEX lowercase hex digits and
 * a NUL into @p hex, good for one write until @p now_ms (a monotonic
 * time, ms) + METAD_NONCE_TTL_MS; it takes the place of the oldest
 * nonce remembered. @return 0, or -EIO (no random bytes).
 */
int metad_auth_nonce(struct metad_auth *a, int64_t now_ms,
		     char hex[METAD_NONCE_HEX + 1]);

/**
 * Check one write at @p now_ms: @p header is its X-Xfer-Auth value
 * (NULL: none), @p method "PUT" or "DELETE", @p key the key decoded,
 * @p body its @p len bytes. The nonce the header names, if remembered,
 * is forgotten whatever the outcome: each serves one try.
 * @return NULL if the write is proved, else a one-line reason (static).
 */
const char *metad_auth_check(struct metad_auth *a, int64_t now_ms,
			     const char *header, const char *method,
			     const char *key, const void *body, size_t len);

#endif
