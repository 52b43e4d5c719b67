/* xfer-metad's guard on writes: nonces and their MACs (auth_internal.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>

#include "metadata/metad/auth_internal.h"

struct nonce {
	uint8_t bytes[XFER_AUTH_NONCE_LEN];
	int64_t born_ms;               /* handed out then (monotonic) */
	bool live;                     /* not used yet */
};

struct metad_auth {
	struct xfer_auth *secret;
	unsigned next;                 /* the oldest slot, written next */
	struct nonce nonces[METAD_NONCES];
};

struct metad_auth *metad_auth_new(const char *secret)
{
	struct metad_auth *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	a->secret = xfer_auth_new(secret);
	if (!a->secret) {
		free(a);
		return NULL;
	}
	return a;
}

void metad_auth_free(struct metad_auth *a)
{
	if (!a)
		return;
	xfer_auth_free(a->secret);
	free(a);
}

int metad_auth_nonce(struct metad_auth *a, int64_t now_ms,
		     char hex[METAD_NONCE_HEX + 1])
{
	struct nonce *n = &a->nonces[a->next];

	if (RAND_bytes(n->bytes, XFER_AUTH_NONCE_LEN) != 1) {
		n->live = false;
		return -EIO;
	}
	n->born_ms = now_ms;
	n->live = true;
	a->next = (a->next + 1) % METAD_NONCES;
	xfer_auth_hex(n->bytes, XFER_AUTH_NONCE_LEN, hex);
	return 0;
}

/* Forget the nonce @p bytes. @return -ENOENT (not remembered), -ETIME
 * (remembered, but too old), or 0. Nonces are public: no need for a
 * constant-time search. */
static int nonce_take(struct metad_auth *a, int64_t now_ms,
		      const uint8_t bytes[XFER_AUTH_NONCE_LEN])
{
	for (unsigned i = 0; i < METAD_NONCES; i++) {
		struct nonce *n = &a->nonces[i];

		if (!n->live || memcmp(n->bytes, bytes, XFER_AUTH_NONCE_LEN))
			continue;
		n->live = false;
		return now_ms - n->born_ms > METAD_NONCE_TTL_MS ? -ETIME : 0;
	}
	return -ENOENT;
}

const char *metad_auth_check(struct metad_auth *a, int64_t now_ms,
			     const char *header, const char *method,
			     const char *key, const void *body, size_t len)
{
	uint8_t nonce[XFER_AUTH_NONCE_LEN], mac[XFER_AUTH_MAC_LEN];
	uint8_t digest[XFER_AUTH_SHA256_LEN], want[XFER_AUTH_MAC_LEN];
	int ret;

	if (!header)
		return "no X-Xfer-Auth header: this server takes writes "
		       "proved with the cluster secret only";
	if (strlen(header) != XFER_AUTH_HEADER_LEN ||
	    header[METAD_NONCE_HEX] != ':' ||
	    xfer_auth_unhex(header, XFER_AUTH_NONCE_LEN, nonce) ||
	    xfer_auth_unhex(header + METAD_NONCE_HEX + 1, XFER_AUTH_MAC_LEN,
			    mac))
		return "malformed X-Xfer-Auth header: want "
		       "<nonce: 64 hex digits>:<mac: 64 hex digits>";
	ret = nonce_take(a, now_ms, nonce);
	if (ret == -ETIME)
		return "expired nonce: older than 60 s";
	if (ret)
		return "unknown nonce: not handed out here, used already, "
		       "or pushed out by 4096 newer ones";
	if (xfer_auth_sha256(body, len, digest) ||
	    xfer_auth_write_mac(a->secret, method, key, digest, nonce, want))
		return "cannot compute the MAC (libcrypto failed)";
	if (!xfer_auth_equal(want, mac, XFER_AUTH_MAC_LEN))
		return "wrong MAC: not the cluster secret";
	return NULL;
}
