/* Peer authentication: HMAC-SHA256 challenge-response (auth_internal.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "util/auth_internal.h"

#define MAGIC "XFERAUTH"
#define LABEL_SERVER "xfer-auth-1 server"
#define LABEL_CLIENT "xfer-auth-1 client"

struct xfer_auth {
	size_t len;
	unsigned char key[];
};

struct xfer_auth *xfer_auth_new(const char *secret)
{
	size_t len = secret ? strlen(secret) : 0;
	struct xfer_auth *a;

	if (!len) {
		errno = EINVAL;
		return NULL;
	}
	a = malloc(sizeof(*a) + len);
	if (!a)
		return NULL;
	a->len = len;
	memcpy(a->key, secret, len);
	return a;
}

void xfer_auth_free(struct xfer_auth *a)
{
	if (!a)
		return;
	OPENSSL_cleanse(a->key, a->len);
	free(a);
}

int xfer_auth_mac(const void *key, size_t key_len, const char *label,
		  const struct iovec *parts, size_t nparts,
		  uint8_t mac[XFER_AUTH_MAC_LEN])
{
	OSSL_PARAM params[] = {
		OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST,
						 (char *)"SHA256", 0),
		OSSL_PARAM_construct_end(),
	};
	EVP_MAC *hmac = EVP_MAC_fetch(NULL, "HMAC", NULL);
	EVP_MAC_CTX *ctx = hmac ? EVP_MAC_CTX_new(hmac) : NULL;
	size_t out = 0;
	int ok;

	ok = ctx && EVP_MAC_init(ctx, key, key_len, params) &&
	     EVP_MAC_update(ctx, (const unsigned char *)label, strlen(label));
	for (size_t i = 0; ok && i < nparts; i++)
		ok = EVP_MAC_update(ctx, parts[i].iov_base, parts[i].iov_len);
	ok = ok && EVP_MAC_final(ctx, mac, &out, XFER_AUTH_MAC_LEN) &&
	     out == XFER_AUTH_MAC_LEN;
	EVP_MAC_CTX_free(ctx);
	EVP_MAC_free(hmac);
	return ok ? 0 : -EIO;
}

int xfer_auth_mac_with(const struct xfer_auth *a, const char *label,
		       const struct iovec *parts, size_t nparts,
		       uint8_t mac[XFER_AUTH_MAC_LEN])
{
	return xfer_auth_mac(a->key, a->len, label, parts, nparts, mac);
}

int xfer_auth_equal(const void *x, const void *y, size_t len)
{
	return CRYPTO_memcmp(x, y, len) == 0;
}

int xfer_auth_sha256(const void *data, size_t len,
		     uint8_t out[XFER_AUTH_SHA256_LEN])
{
	unsigned int n = 0;

	return EVP_Digest(len ? data : "", len, out, &n, EVP_sha256(), NULL) &&
	       n == XFER_AUTH_SHA256_LEN ? 0 : -EIO;
}

void xfer_auth_hex(const uint8_t *b, size_t n, char *hex)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		hex[2 * i] = digits[b[i] >> 4];
		hex[2 * i + 1] = digits[b[i] & 15];
	}
	hex[2 * n] = '\0';
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int xfer_auth_unhex(const char *hex, size_t n, uint8_t *b)
{
	for (size_t i = 0; i < n; i++) {
		int hi = hex_value(hex[2 * i]);
		int lo = hi < 0 ? -1 : hex_value(hex[2 * i + 1]);

		if (lo < 0)
			return -EINVAL;
		b[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

/* The MAC of one side over both nonces. */
static int session_mac(const struct xfer_auth *a, const char *label,
		       const struct xfer_auth_session *s,
		       uint8_t mac[XFER_AUTH_MAC_LEN])
{
	struct iovec nonces = { (void *)s->nonces, sizeof(s->nonces) };

	return xfer_auth_mac_with(a, label, &nonces, 1, mac);
}

int xfer_auth_hello(struct xfer_auth_session *s,
		    uint8_t hello[XFER_AUTH_HELLO_LEN])
{
	if (RAND_bytes(s->nonces, XFER_AUTH_NONCE_LEN) != 1)
		return -EIO;
	memcpy(hello, MAGIC, 8);
	memcpy(hello + 8, s->nonces, XFER_AUTH_NONCE_LEN);
	return 0;
}

int xfer_auth_hello_prefix(const uint8_t *buf, size_t len)
{
	return memcmp(buf, MAGIC, len < 8 ? len : 8) == 0;
}

int xfer_auth_challenge(const struct xfer_auth *a, struct xfer_auth_session *s,
			const uint8_t hello[XFER_AUTH_HELLO_LEN],
			uint8_t challenge[XFER_AUTH_CHALLENGE_LEN])
{
	uint8_t *nonce_s = s->nonces + XFER_AUTH_NONCE_LEN;

	if (memcmp(hello, MAGIC, 8))
		return -EPROTO;
	memcpy(s->nonces, hello + 8, XFER_AUTH_NONCE_LEN);
	if (RAND_bytes(nonce_s, XFER_AUTH_NONCE_LEN) != 1)
		return -EIO;
	memcpy(challenge, nonce_s, XFER_AUTH_NONCE_LEN);
	return session_mac(a, LABEL_SERVER, s, challenge + XFER_AUTH_NONCE_LEN);
}

int xfer_auth_prove(const struct xfer_auth *a, struct xfer_auth_session *s,
		    const uint8_t challenge[XFER_AUTH_CHALLENGE_LEN],
		    uint8_t proof[XFER_AUTH_PROOF_LEN])
{
	uint8_t want[XFER_AUTH_MAC_LEN];
	int ret;

	memcpy(s->nonces + XFER_AUTH_NONCE_LEN, challenge, XFER_AUTH_NONCE_LEN);
	ret = session_mac(a, LABEL_SERVER, s, want);
	if (ret)
		return ret;
	if (!xfer_auth_equal(want, challenge + XFER_AUTH_NONCE_LEN,
			     XFER_AUTH_MAC_LEN))
		return -EACCES;
	return session_mac(a, LABEL_CLIENT, s, proof);
}

int xfer_auth_verify(const struct xfer_auth *a,
		     const struct xfer_auth_session *s,
		     const uint8_t proof[XFER_AUTH_PROOF_LEN])
{
	uint8_t want[XFER_AUTH_MAC_LEN];
	int ret = session_mac(a, LABEL_CLIENT, s, want);

	if (ret)
		return ret;
	return xfer_auth_equal(want, proof, XFER_AUTH_PROOF_LEN) ? 0 : -EACCES;
}
