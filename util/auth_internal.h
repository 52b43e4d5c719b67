/*
 * Peer authentication with a cluster secret (auth_secret; threat model in
 * docs/SECURITY.md, bytes in docs/PROTOCOL.md §6): an HMAC-SHA256
 * challenge-response, mutual, with fresh 32-byte nonces from both sides.
 * The same three messages open a handshake connection (each in a frame
 * of type 0xC1) and a TCP data connection (raw, before any request):
 *
 *   hello      client -> server  "XFERAUTH" nonce_c              40 bytes
 *   challenge  server -> client  nonce_s  HMAC(K, "xfer-auth-1 server"
 *                                          nonce_c nonce_s)      64 bytes
 *   proof      client -> server  HMAC(K, "xfer-auth-1 client"
 *                                          nonce_c nonce_s)      32 bytes
 *
 * The client checks the server's MAC before it proves itself or sends
 * anything else; the server reads nothing after the hello but the proof,
 * and checks it before it reads a request. MACs are compared in constant
 * time. The labels keep one side's MAC from serving as the other's.
 * Thread-safe: a struct xfer_auth is read-only once made.
 */
#ifndef XFER_AUTH_INTERNAL_H
#define XFER_AUTH_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define XFER_AUTH_NONCE_LEN 32
#define XFER_AUTH_MAC_LEN 32       /* HMAC-SHA256 */
#define XFER_AUTH_HELLO_LEN 40
#define XFER_AUTH_CHALLENGE_LEN 64
#define XFER_AUTH_PROOF_LEN 32

/** The cluster secret. */
struct xfer_auth;

/** One exchange's nonces, either side: nonce_c then nonce_s. */
struct xfer_auth_session {
	uint8_t nonces[2 * XFER_AUTH_NONCE_LEN];
};

/**
 * The secret @p secret (its bytes up to the NUL), copied.
 * @return it, or NULL with errno EINVAL (NULL or empty) or ENOMEM.
 */
struct xfer_auth *xfer_auth_new(const char *secret);

/** Wipe and free (NULL is fine). */
void xfer_auth_free(struct xfer_auth *a);

/**
 * HMAC-SHA256 with key @p key (@p key_len bytes) over @p label (its bytes
 * without the NUL) followed by the @p nparts parts, into @p mac. For
 * anything that proves knowledge of the cluster secret (xfer-metad's
 * writes too: a label of its own, the request's parts and a nonce).
 * @return 0, or -EIO if libcrypto failed.
 */
int xfer_auth_mac(const void *key, size_t key_len, const char *label,
		  const struct iovec *parts, size_t nparts,
		  uint8_t mac[XFER_AUTH_MAC_LEN]);

/** xfer_auth_mac() with the secret @p a. */
int xfer_auth_mac_with(const struct xfer_auth *a, const char *label,
		       const struct iovec *parts, size_t nparts,
		       uint8_t mac[XFER_AUTH_MAC_LEN]);

#define XFER_AUTH_SHA256_LEN 32

/** SHA-256 of the @p len bytes at @p data (NULL if @p len is 0) into
 *  @p out. @return 0, or -EIO if libcrypto failed. */
int xfer_auth_sha256(const void *data, size_t len,
		     uint8_t out[XFER_AUTH_SHA256_LEN]);

/** The @p n bytes at @p b as 2 * @p n lowercase hex digits and a NUL,
 *  into @p hex. */
void xfer_auth_hex(const uint8_t *b, size_t n, char *hex);

/** Exactly 2 * @p n hex digits (either case) at @p hex into @p n bytes
 *  at @p b. @return 0, or -EINVAL (a character that is not one; @p b
 *  may be half written). */
int xfer_auth_unhex(const char *hex, size_t n, uint8_t *b);

/** Are @p x and @p y (@p len bytes) equal? In time that depends on
 *  @p len only (CRYPTO_memcmp). */
int xfer_auth_equal(const void *x, const void *y, size_t len);

/** Client: a fresh nonce into @p s and the hello to send.
 *  @return 0, -EIO (no random bytes). */
int xfer_auth_hello(struct xfer_auth_session *s,
		    uint8_t hello[XFER_AUTH_HELLO_LEN]);

/** Could the @p len bytes at @p buf begin a hello? (A server may refuse
 *  a peer that does not authenticate before the whole hello is in.) */
int xfer_auth_hello_prefix(const uint8_t *buf, size_t len);

/** Server: take @p hello, make a nonce and the challenge to send.
 *  @return 0, -EPROTO (not a hello: the peer does not authenticate),
 *  -EIO. */
int xfer_auth_challenge(const struct xfer_auth *a, struct xfer_auth_session *s,
			const uint8_t hello[XFER_AUTH_HELLO_LEN],
			uint8_t challenge[XFER_AUTH_CHALLENGE_LEN]);

/** Client: check the server's MAC in @p challenge, make the proof.
 *  @return 0, -EACCES (the server does not know the secret), -EIO. */
int xfer_auth_prove(const struct xfer_auth *a, struct xfer_auth_session *s,
		    const uint8_t challenge[XFER_AUTH_CHALLENGE_LEN],
		    uint8_t proof[XFER_AUTH_PROOF_LEN]);

/** Server: check the client's @p proof. @return 0, -EACCES (the client
 *  does not know the secret), -EIO. */
int xfer_auth_verify(const struct xfer_auth *a,
		     const struct xfer_auth_session *s,
		     const uint8_t proof[XFER_AUTH_PROOF_LEN]);

/* ---- the exchange on a raw non-blocking socket (auth_sock.c) ---- */

struct xfer_auth_srv;

/** The server's side of one connection; @p what names the port in the
 *  log ("tcp", static). NULL on ENOMEM. */
struct xfer_auth_srv *xfer_auth_srv_new(const struct xfer_auth *a,
				       const char *what);
/** NULL is fine. */
void xfer_auth_srv_free(struct xfer_auth_srv *x);
/** Move the exchange on @p fd as far as it goes now: read the hello
 *  (refusing at its first byte that differs), send the challenge, read
 *  and check the proof; a refusal is logged (at most once a second). On
 *  the connection's reactor, when readable. @return 0 proved (requests
 *  may be read now), 1 more to come, -1 refused or broken (close). */
int xfer_auth_srv_step(struct xfer_auth_srv *x, int fd);

/** The client's side of one connection. */
struct xfer_auth_cli {
	struct xfer_auth_session s;
	size_t got;
	uint8_t buf[XFER_AUTH_CHALLENGE_LEN];
};

/** Connected: send the hello. @return 0, -1 (close). */
int xfer_auth_cli_start(struct xfer_auth_cli *x, int fd);
/** Readable: take the challenge; once whole, check the server's MAC and
 *  send the proof. @return 0 done (send requests), 1 more to come, -1
 *  refused, broken, or the server does not know the secret (logged,
 *  naming @p what). */
int xfer_auth_cli_step(const struct xfer_auth *a, struct xfer_auth_cli *x,
		       int fd, const char *what);

#endif
