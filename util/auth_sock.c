/*
 * The challenge-response on a raw, non-blocking socket (a data port: the
 * TCP transport's, the file transport's), before any request. Each side
 * reads exactly the bytes of the message it waits for, so the requests
 * that follow the proof stay in the socket for the server's request loop.
 * A message of at most 64 bytes on a connection that has sent nothing
 * else always fits the socket's send buffer: a short send is an error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "util/auth_internal.h"
#include "util/log_internal.h"

enum { WAIT_HELLO, WAIT_PROOF };

struct xfer_auth_srv {
	const struct xfer_auth *a;
	struct xfer_auth_session s;
	int phase;
	size_t got;
	uint8_t buf[XFER_AUTH_HELLO_LEN];
	const char *what;
};

static struct xfer_log_limit refused_log, server_log;

/* Receive up to @p want bytes into @p buf + *got. @return 1 when all are
 * in, 0 when more are to come, -1 on EOF or error. */
static int recv_some(int fd, uint8_t *buf, size_t *got, size_t want)
{
	ssize_t n = recv(fd, buf + *got, want - *got, 0);

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
		return -1;
	if (n > 0)
		*got += (size_t)n;
	return *got == want;
}

static int send_msg(int fd, const uint8_t *msg, size_t len)
{
	return send(fd, msg, len, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -1;
}

struct xfer_auth_srv *xfer_auth_srv_new(const struct xfer_auth *a,
				       const char *what)
{
	struct xfer_auth_srv *x = calloc(1, sizeof(*x));

	if (x) {
		x->a = a;
		x->what = what;
	}
	return x;
}

void xfer_auth_srv_free(struct xfer_auth_srv *x)
{
	free(x);
}

static int refuse(const struct xfer_auth_srv *x, const char *why)
{
	xfer_log_limited(&refused_log, XFER_LOG_WARN, "%s: auth: refused a "
			 "connection: %s", x->what, why);
	return -1;
}

int xfer_auth_srv_step(struct xfer_auth_srv *x, int fd)
{
	uint8_t challenge[XFER_AUTH_CHALLENGE_LEN];
	size_t want = x->phase == WAIT_HELLO ? XFER_AUTH_HELLO_LEN
					     : XFER_AUTH_PROOF_LEN;
	int ret = recv_some(fd, x->buf, &x->got, want);

	if (ret < 0)
		return refuse(x, "closed before it proved itself");
	/* a request header where the hello should be: refused at once */
	if (x->phase == WAIT_HELLO && !xfer_auth_hello_prefix(x->buf, x->got))
		return refuse(x, "it does not authenticate (no secret set?)");
	if (ret == 0)
		return 1;
	x->got = 0;
	if (x->phase == WAIT_PROOF)
		return xfer_auth_verify(x->a, &x->s, x->buf) ?
		       refuse(x, "it does not know the secret") : 0;
	ret = xfer_auth_challenge(x->a, &x->s, x->buf, challenge);
	if (ret == -EPROTO)
		return refuse(x, "it does not authenticate (no secret set?)");
	if (ret || send_msg(fd, challenge, sizeof(challenge)))
		return -1;
	x->phase = WAIT_PROOF;
	return 1;
}

int xfer_auth_cli_start(struct xfer_auth_cli *x, int fd)
{
	uint8_t hello[XFER_AUTH_HELLO_LEN];

	x->got = 0;
	if (xfer_auth_hello(&x->s, hello))
		return -1;
	return send_msg(fd, hello, sizeof(hello));
}

int xfer_auth_cli_step(const struct xfer_auth *a, struct xfer_auth_cli *x,
		       int fd, const char *what)
{
	uint8_t proof[XFER_AUTH_PROOF_LEN];
	int ret = recv_some(fd, x->buf, &x->got, XFER_AUTH_CHALLENGE_LEN);

	if (ret < 0) {
		xfer_log_limited(&server_log, XFER_LOG_WARN, "%s: auth: the "
				 "peer closed the connection before its "
				 "challenge (no secret, or another one?)", what);
		return -1;
	}
	if (ret == 0)
		return 1;
	if (xfer_auth_prove(a, &x->s, x->buf, proof)) {
		xfer_log_limited(&server_log, XFER_LOG_WARN, "%s: auth: the "
				 "peer's data port does not know the secret",
				 what);
		return -1;
	}
	return send_msg(fd, proof, sizeof(proof));
}
