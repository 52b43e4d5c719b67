/*
 * The client's connection to the master (kv_internal.h): a non-blocking
 * connect on the control reactor, the cluster secret proved on the raw
 * socket (util/auth_sock.c) when the engine has one, then a bufferevent.
 * Requests go out as they come, each with the next sequence number, and
 * wait on a list in sending order: the master answers in order
 * (PROTOCOL.md §7), so a reply must be the head's. A reply that is not,
 * or does not decode, closes the connection; so does a head that waits
 * over KV_RPC_TIMEOUT_MS. Requests that cannot be answered any more fail
 * from a zero-delay event, never inside the call that sent them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "store/client/kv_internal.h"
#include "util/log_internal.h"

#define AUTH_TIMEOUT_S 5

static struct xfer_log_limit conn_log;

/* Move every request in flight to the failed list and have it fail. */
static void fail_all(struct xfer_kv *kv)
{
	if (!kv->rpcs)
		return;
	*kv->failed_tail = kv->rpcs;
	kv->failed_tail = kv->rpcs_tail;
	kv->rpcs = NULL;
	kv->rpcs_tail = &kv->rpcs;
	event_active(kv->fail_ev, 0, 0);
}

static void on_fail(evutil_socket_t fd, short what, void *arg)
{
	struct xfer_kv *kv = arg;
	struct kv_rpc *r = kv->failed;

	(void)fd;
	(void)what;
	/* what their handlers send now fails in a later round */
	kv->failed = NULL;
	kv->failed_tail = &kv->failed;
	while (r) {
		struct kv_rpc *next = r->next;

		r->done(r, NULL);
		r = next;
	}
}

/* Drop the socket of a connection being made. */
static void drop_connecting(struct xfer_kv *kv)
{
	if (kv->conn_ev) {
		event_free(kv->conn_ev);
		kv->conn_ev = NULL;
	}
	if (kv->fd >= 0) {
		close(kv->fd);
		kv->fd = -1;
	}
}

void kv_conn_close(struct xfer_kv *kv, const char *why)
{
	if (kv->bev || kv->fd >= 0)
		xfer_log_limited(&conn_log, XFER_LOG_WARN, "xfer store client: "
				 "the master's connection closed: %s", why);
	drop_connecting(kv);
	if (kv->bev) {
		bufferevent_free(kv->bev);
		kv->bev = NULL;
	}
	atomic_store(&kv->healthy, false);
	fail_all(kv);
}

static void connect_failed(struct xfer_kv *kv, int err)
{
	drop_connecting(kv);
	kv->connect_failed(kv, err);
}

static void on_read(struct bufferevent *bev, void *arg)
{
	struct xfer_kv *kv = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct store_msg *rep = kv->rep;
	uint8_t hdr[STORE_HDR_LEN];
	const uint8_t *frame;
	struct kv_rpc *r;

	while (kv->bev == bev &&
	       evbuffer_copyout(in, hdr, sizeof(hdr)) == sizeof(hdr)) {
		if (store_hdr_decode(hdr, &rep->h) ||
		    !(rep->h.flags & STORE_F_REPLY)) {
			kv_conn_close(kv, "not a reply frame");
			return;
		}
		if (evbuffer_get_length(in) < STORE_HDR_LEN + rep->h.len)
			return;
		frame = evbuffer_pullup(in, STORE_HDR_LEN + rep->h.len);
		r = kv->rpcs;
		if (!frame || !r || r->seq != rep->h.seq ||
		    r->type != rep->h.type ||
		    store_msg_decode(frame + STORE_HDR_LEN, rep)) {
			kv_conn_close(kv, frame ? "an unexpected reply" :
				      "no memory");
			return;
		}
		kv->rpcs = r->next;
		if (!kv->rpcs)
			kv->rpcs_tail = &kv->rpcs;
		/* the reply's strings point into @p in until the drain */
		r->done(r, rep);
		if (kv->bev != bev)
			return;
		evbuffer_drain(in, STORE_HDR_LEN + rep->h.len);
	}
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	kv_conn_close(arg, what & BEV_EVENT_EOF ? "closed by the master" :
		      "a socket error");
}

static void established(struct xfer_kv *kv)
{
	int fd = kv->fd;

	event_free(kv->conn_ev);
	kv->conn_ev = NULL;
	kv->bev = bufferevent_socket_new(kv->r->base, fd,
					 BEV_OPT_CLOSE_ON_FREE);
	if (!kv->bev) {
		connect_failed(kv, -ENOMEM);
		return;
	}
	kv->fd = -1;
	bufferevent_setcb(kv->bev, on_read, NULL, on_event, kv);
	if (bufferevent_enable(kv->bev, EV_READ)) {
		kv_conn_close(kv, "no memory");
		kv->connect_failed(kv, -ENOMEM);
		return;
	}
	kv->connected(kv);
}

static void on_auth(evutil_socket_t fd, short what, void *arg)
{
	struct xfer_kv *kv = arg;
	int ret;

	if (what & EV_TIMEOUT) {
		connect_failed(kv, -ETIMEDOUT);
		return;
	}
	ret = xfer_auth_cli_step(kv->auth, &kv->auth_cli, fd, "xfer-stored");
	if (ret < 0)
		connect_failed(kv, -EACCES);
	else if (ret == 0)
		established(kv);
}

static void on_connect(evutil_socket_t fd, short what, void *arg)
{
	struct timeval tv = { AUTH_TIMEOUT_S, 0 };
	struct xfer_kv *kv = arg;
	socklen_t len = sizeof(int);
	int err = 0;

	if (what & EV_TIMEOUT) {
		connect_failed(kv, -ETIMEDOUT);
		return;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) || err) {
		connect_failed(kv, err ? -err : -errno);
		return;
	}
	if (!kv->auth) {
		established(kv);
		return;
	}
	event_free(kv->conn_ev);
	kv->conn_ev = event_new(kv->r->base, fd, EV_READ | EV_PERSIST,
				on_auth, kv);
	if (!kv->conn_ev || event_add(kv->conn_ev, &tv))
		connect_failed(kv, -ENOMEM);
	else if (xfer_auth_cli_start(&kv->auth_cli, fd))
		connect_failed(kv, -ECONNRESET);
}

void kv_conn_start(struct xfer_kv *kv)
{
	struct timeval tv = { KV_CONNECT_TIMEOUT_MS / 1000, 0 };
	int one = 1, fd;

	if (kv->bev || kv->fd >= 0)
		return;
	fd = socket(kv->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK |
		    SOCK_CLOEXEC, 0);
	if (fd < 0) {
		kv->connect_failed(kv, -errno);
		return;
	}
	kv->fd = fd;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&kv->addr, kv->addr_len) &&
	    errno != EINPROGRESS) {
		connect_failed(kv, -errno);
		return;
	}
	kv->conn_ev = event_new(kv->r->base, fd, EV_WRITE, on_connect, kv);
	if (!kv->conn_ev || event_add(kv->conn_ev, &tv))
		connect_failed(kv, -ENOMEM);
}

void kv_rpc_send(struct xfer_kv *kv, struct kv_rpc *r, uint16_t type)
{
	r->type = type;
	r->seq = ++kv->seq;
	r->sent_ms = kv_now_ms();
	r->next = NULL;
	kv->req->h = (struct store_hdr){ .type = type, .seq = r->seq };
	kv->out.len = 0;
	if (!kv->bev || store_msg_encode(&kv->out, kv->req) ||
	    bufferevent_write(kv->bev, kv->out.p, kv->out.len)) {
		*kv->failed_tail = r;
		kv->failed_tail = &r->next;
		event_active(kv->fail_ev, 0, 0);
		return;
	}
	*kv->rpcs_tail = r;
	kv->rpcs_tail = &r->next;
}

void kv_mount_send(struct xfer_kv *kv, struct kv_rpc *r, const uint8_t *id,
		   uint64_t base, uint64_t size, uint8_t medium,
		   const char *name)
{
	struct store_msg *m = kv->req;

	memcpy(m->client, kv->client_id, STORE_ID_LEN);
	memcpy(m->segment, id, STORE_ID_LEN);
	m->base = base;
	m->size = size;
	m->medium = medium;
	m->name = (struct store_str){ name, (uint16_t)strlen(name) };
	kv_rpc_send(kv, r, STORE_MOUNT);
}

void kv_unmount_send(struct xfer_kv *kv, struct kv_rpc *r, const uint8_t *id)
{
	memcpy(kv->req->client, kv->client_id, STORE_ID_LEN);
	memcpy(kv->req->segment, id, STORE_ID_LEN);
	kv_rpc_send(kv, r, STORE_UNMOUNT);
}

void kv_conn_check(struct xfer_kv *kv, int64_t now)
{
	if (kv->rpcs && now - kv->rpcs->sent_ms > KV_RPC_TIMEOUT_MS)
		kv_conn_close(kv, "no reply within 10 s");
}

int kv_conn_init(struct xfer_kv *kv)
{
	kv->fd = -1;
	kv->rpcs_tail = &kv->rpcs;
	kv->failed_tail = &kv->failed;
	kv->fail_ev = event_new(kv->r->base, -1, 0, on_fail, kv);
	return kv->fail_ev ? 0 : -ENOMEM;
}

void kv_conn_fini(struct xfer_kv *kv)
{
	drop_connecting(kv);
	if (kv->bev) {
		bufferevent_free(kv->bev);
		kv->bev = NULL;
	}
	if (kv->fail_ev) {
		event_free(kv->fail_ev);
		kv->fail_ev = NULL;
	}
}
