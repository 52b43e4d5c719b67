/*
 * The handshake socket's frame readers (core/handshake.c), on real
 * sockets through libevent, as a peer reaches them.
 *
 * The first input byte picks the side (bit 0) and whether a cluster
 * secret is set (bit 1: the peer must then pass the challenge-response of
 * util/auth.c first, which the fuzzer's bytes meet as they are); the rest
 * is what the peer sends.
 *  - server (bit 0 clear): a listener of xfer_handshake_listen() on an
 *    abstract AF_UNIX address (the same code path as TCP, with no ports
 *    to run out of); the fuzzer connects, sends the bytes, shuts its
 *    write side and runs the base until the server closes. The server's
 *    environment answers every request type: Connection (echoed back),
 *    Metadata (a small document, or none for a kind), Notify.
 *  - client (bit 0 set): xfer_handshake_request() to a loopback TCP
 *    listener of the fuzzer, which answers with the bytes and closes;
 *    the base runs until the client's callback has run, exactly once.
 */
#define _GNU_SOURCE
#include <string.h>
#include <sys/un.h>
#include <netinet/in.h>

#include <event2/event.h>

#include "util/auth_internal.h"
#include "core/handshake_internal.h"
#include "test/fuzz/fuzz.h"

#define MAX_LEN 65536 /* the frame limit, as handshake_max_len */

static struct event_base *base;
static struct xfer_auth *auth;
/* [0] without a secret, [1] with one */
static struct xfer_hs_server *hs[2];
static struct sockaddr_un hs_addr[2];
static socklen_t hs_addrlen[2];
static int tcp_lfd = -1;
static uint16_t tcp_port;

static int on_connection(const struct xfer_hs_conn *req,
			 struct xfer_hs_conn *reply, void *arg)
{
	(void)arg;
	if (req->payload[0] == 'x')
		return -EOPNOTSUPP;
	if (req->payload[0] == 'y')
		return -EINVAL;
	reply->local_gid = strdup(req->local_gid);
	reply->local_nic_path = strdup(req->peer_nic_path);
	reply->peer_nic_path = strdup(req->local_nic_path);
	reply->local_lid = req->local_lid;
	if (req->nqp) {
		reply->qp_num = calloc(req->nqp, sizeof(*reply->qp_num));
		if (reply->qp_num) {
			memcpy(reply->qp_num, req->qp_num,
			       req->nqp * sizeof(*req->qp_num));
			reply->nqp = req->nqp;
		}
	}
	reply->ready_ack = true;
	return 0;
}

static char *on_descriptor(const char *kind, size_t *len, void *arg)
{
	static const char doc[] = "{\"name\":\"fuzz\",\"buffers\":[]}\n";

	(void)arg;
	if (kind && strcmp(kind, "nvmeof"))
		return NULL;
	*len = sizeof(doc) - 1;
	return strdup(doc);
}

static int on_notify(const struct xfer_hs_notify *n, void *arg)
{
	(void)arg;
	return n->name[0] ? 0 : -EINVAL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct xfer_hs_env env = {
		.max_len = MAX_LEN,
		.max_conns = 16,
		.max_conns_per_addr = 16,
		.auth_timeout_ms = 2000,
		.buffer_max = 4 * MAX_LEN,
		.connection = on_connection,
		.descriptor = on_descriptor,
		.notify = on_notify,
	};
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sin);
	uint16_t port;

	(void)argc;
	(void)argv;
	fuzz_quiet();
	base = event_base_new();
	if (!base)
		FUZZ_DIE("event_base_new");
	env.base = base;
	auth = xfer_auth_new("xfer-fuzz-secret");
	if (!auth)
		FUZZ_DIE("xfer_auth_new");
	for (int i = 0; i < 2; i++) {
		env.auth = i ? auth : NULL;
		hs_addr[i].sun_family = AF_UNIX;
		/* abstract: a NUL, then the name */
		hs_addrlen[i] = offsetof(struct sockaddr_un, sun_path) + 1 +
			snprintf(hs_addr[i].sun_path + 1,
				 sizeof(hs_addr[i].sun_path) - 1,
				 "xfer-fuzz-hs-%d-%d", (int)getpid(), i);
		if (xfer_handshake_listen(&env, (struct sockaddr *)&hs_addr[i],
					  hs_addrlen[i], &port, &hs[i]))
			FUZZ_DIE("xfer_handshake_listen");
	}

	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	tcp_lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (tcp_lfd < 0 || bind(tcp_lfd, (struct sockaddr *)&sin, sizeof(sin)) ||
	    listen(tcp_lfd, 16) ||
	    getsockname(tcp_lfd, (struct sockaddr *)&sin, &sl))
		FUZZ_DIE("listen: %s", strerror(errno));
	tcp_port = ntohs(sin.sin_port);
	return 0;
}

static void run_server(const uint8_t *data, size_t size, int with_auth)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	size_t off = 0;
	bool shut = false;

	if (fd < 0 || fuzz_connect(fd, (struct sockaddr *)&hs_addr[with_auth],
				   hs_addrlen[with_auth]))
		FUZZ_DIE("connect: %s", strerror(errno));
	for (;;) {
		if (!fuzz_write_some(fd, data, size, &off))
			break;
		if (off == size && !shut) {
			shutdown(fd, SHUT_WR);
			shut = true;
		}
		event_base_loop(base, EVLOOP_NONBLOCK);
		if (!fuzz_drain(fd))
			break;
	}
	close(fd);
	/* let the server see our close if it had not closed first */
	event_base_loop(base, EVLOOP_NONBLOCK);
}

struct client_run {
	int calls;
	uint8_t sum;
};

static void on_reply(int err, const char *body, size_t len, void *arg)
{
	struct client_run *r = arg;

	/* touch every byte the client hands us */
	for (size_t i = 0; !err && i < len; i++)
		r->sum ^= (uint8_t)body[i];
	r->calls++;
}

static void run_client(const uint8_t *data, size_t size, int with_auth)
{
	static const char req[] = "{}\n";
	struct client_run r = { 0 };
	struct xfer_hs_req *q;
	bool shut = false;
	size_t off = 0;
	int fd = -1;

	q = xfer_handshake_request(base, NULL, with_auth ? auth : NULL,
				   "127.0.0.1", tcp_port,
				   XFER_HS_METADATA, req, sizeof(req) - 1,
				   MAX_LEN, on_reply, &r);
	if (!q)
		FUZZ_DIE("xfer_handshake_request");
	while (!r.calls) {
		event_base_loop(base, EVLOOP_NONBLOCK);
		if (fd < 0) {
			fd = accept4(tcp_lfd, NULL, NULL,
				     SOCK_CLOEXEC | SOCK_NONBLOCK);
			continue;
		}
		fuzz_drain(fd);
		/* all sent: our EOF ends a short reply */
		if (fuzz_write_some(fd, data, size, &off) && off == size &&
		    !shut) {
			shutdown(fd, SHUT_WR);
			shut = true;
		}
	}
	/* the client closed; our end follows, so TIME_WAIT stays theirs */
	if (fd >= 0)
		close(fd);
	else /* it gave up before we took it: leave none for the next run */
		while ((fd = accept4(tcp_lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0)
			close(fd);
	event_base_loop(base, EVLOOP_NONBLOCK);
	if (r.calls != 1)
		FUZZ_DIE("client callback ran %d times", r.calls);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	if (data[0] & 1)
		run_client(data + 1, size - 1, !!(data[0] & 2));
	else
		run_server(data + 1, size - 1, !!(data[0] & 2));
	return 0;
}
