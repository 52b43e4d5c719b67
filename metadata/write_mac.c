/* xfer-metad's write MAC (metadata/write_mac_internal.h). */
#include <string.h>
#include <sys/uio.h>

#include "metadata/write_mac_internal.h"

int xfer_auth_write_mac(const struct xfer_auth *a, const char *method,
			const char *key,
			const uint8_t body_sha256[XFER_AUTH_SHA256_LEN],
			const uint8_t nonce[XFER_AUTH_NONCE_LEN],
			uint8_t mac[XFER_AUTH_MAC_LEN])
{
	const struct iovec parts[] = {
		{ (void *)method, strlen(method) },
		{ (void *)"\n", 1 },
		{ (void *)key, strlen(key) },
		{ (void *)"\n", 1 },
		{ (void *)body_sha256, XFER_AUTH_SHA256_LEN },
		{ (void *)nonce, XFER_AUTH_NONCE_LEN },
	};

	return xfer_auth_mac_with(a, XFER_AUTH_WRITE_LABEL, parts, 6, mac);
}
