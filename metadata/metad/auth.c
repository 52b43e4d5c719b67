/*
 * xfer-metad's guard on writes: nonces and their MACs (auth_internal.h).
 *
 * A nonce carries what the server needs to check it again: the time it
 * was handed out, 8 random bytes, and a tag (HMAC-SHA256 under a key
 * drawn when the server starts, cut to 16 bytes) over both. So nothing
 * is kept per nonce handed out, and no number of them asked for can
 * push another out. What is kept: the nonces that proved a write, for
 * as long as they could prove one again (METAD_NONCE_TTL_MS), so that
 * each proves one write. They sit in two generations of a table, each
 * covering at least METAD_NONCE_TTL_MS: the older is dropped whole when
 * the newer is that old.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "metadata/metad/auth_internal.h"

#define KEY_LEN 32
#define TAG_LEN 16                     /* of the nonce's 32 bytes */
#define SLOTS (2 * METAD_SPENT_MAX)    /* a table at most half full */

/* Nonces that proved a write: their random bytes (| 1, so that 0 marks
 * a free slot), open addressing. Two nonces sharing those bytes would
 * cost the second its write, never let one prove two. */
struct spent {
	uint64_t slot[SLOTS];
	unsigned n;
};

struct metad_auth {
	struct xfer_auth *secret;
	uint8_t key[KEY_LEN];          /* the nonces' tags */
	int64_t since_ms;              /* spent[cur] holds writes from then */
	unsigned cur;
	struct spent spent[2];
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
	if (RAND_bytes(a->key, KEY_LEN) != 1) {
		metad_auth_free(a);
		errno = EIO;
		return NULL;
	}
	return a;
}

void metad_auth_free(struct metad_auth *a)
{
	if (!a)
		return;
	xfer_auth_free(a->secret);
	OPENSSL_cleanse(a->key, KEY_LEN);
	free(a);
}

/* The tag of the nonce whose first 16 bytes are @p head. */
static int tag(const struct metad_auth *a, const uint8_t *head,
	       uint8_t out[XFER_AUTH_MAC_LEN])
{
	struct iovec part = { (void *)head, XFER_AUTH_NONCE_LEN - TAG_LEN };

	return xfer_auth_mac(a->key, KEY_LEN, "xfer-metad-1 nonce", &part, 1,
			     out);
}

int metad_auth_nonce(struct metad_auth *a, int64_t now_ms,
		     char hex[METAD_NONCE_HEX + 1])
{
	uint8_t n[XFER_AUTH_NONCE_LEN], mac[XFER_AUTH_MAC_LEN];

	memcpy(n, &now_ms, 8);
	if (RAND_bytes(n + 8, 8) != 1 || tag(a, n, mac))
		return -EIO;
	memcpy(n + XFER_AUTH_NONCE_LEN - TAG_LEN, mac, TAG_LEN);
	xfer_auth_hex(n, XFER_AUTH_NONCE_LEN, hex);
	return 0;
}

/* Start a new generation once the current one covers the nonces' life:
 * a nonce still good now proved its write (if any) after the older
 * one's start. */
static void rotate(struct metad_auth *a, int64_t now_ms)
{
	if (now_ms - a->since_ms < METAD_NONCE_TTL_MS)
		return;
	a->cur ^= 1;
	if (now_ms - a->since_ms >= 2 * METAD_NONCE_TTL_MS)
		memset(&a->spent[a->cur ^ 1], 0, sizeof(a->spent[0]));
	memset(&a->spent[a->cur], 0, sizeof(a->spent[0]));
	a->since_ms = now_ms;
}

/* The slot of @p id in @p s: where it is, or the free one it would take. */
static uint64_t *spent_slot(struct spent *s, uint64_t id)
{
	size_t i = id & (SLOTS - 1);

	while (s->slot[i] && s->slot[i] != id)
		i = (i + 1) & (SLOTS - 1);
	return &s->slot[i];
}

const char *metad_auth_check(struct metad_auth *a, int64_t now_ms,
			     const char *header, const char *method,
			     const char *key, const void *body, size_t len)
{
	uint8_t nonce[XFER_AUTH_NONCE_LEN], mac[XFER_AUTH_MAC_LEN];
	uint8_t digest[XFER_AUTH_SHA256_LEN], want[XFER_AUTH_MAC_LEN];
	uint64_t *slot[2], id;
	int64_t born;

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
	if (tag(a, nonce, want))
		return "cannot compute the MAC (libcrypto failed)";
	if (!xfer_auth_equal(want, nonce + XFER_AUTH_NONCE_LEN - TAG_LEN,
			     TAG_LEN))
		return "unknown nonce: not handed out by this server since "
		       "it started";
	memcpy(&born, nonce, 8);
	memcpy(&id, nonce + 8, 8);
	id |= 1;
	if (born > now_ms || now_ms - born > METAD_NONCE_TTL_MS)
		return "expired nonce: older than 60 s";
	rotate(a, now_ms);
	slot[0] = spent_slot(&a->spent[a->cur], id);
	slot[1] = spent_slot(&a->spent[a->cur ^ 1], id);
	if (*slot[0] || *slot[1])
		return "spent nonce: it proved a write already";
	if (xfer_auth_sha256(body, len, digest) ||
	    xfer_auth_write_mac(a->secret, method, key, digest, nonce, want))
		return "cannot compute the MAC (libcrypto failed)";
	if (!xfer_auth_equal(want, mac, XFER_AUTH_MAC_LEN))
		return "wrong MAC: not the cluster secret";
	if (a->spent[a->cur].n >= METAD_SPENT_MAX)
		return "too many writes: 32768 proved within 60 s already";
	*slot[0] = id;
	a->spent[a->cur].n++;
	return NULL;
}
