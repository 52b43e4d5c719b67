/*
 * TCP transport (PROTOCOL.md §3, v2 with status frames). The target side
 * (server.c) serves requests on accepted connections; the initiator
 * side (client.c) keeps a few persistent connections per peer and
 * pipelines slices on them. Every connection lives on one worker reactor.
 */
#ifndef XFER_TCP_INTERNAL_H
#define XFER_TCP_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include "core/buffers_internal.h"
#include "core/config_internal.h"
#include "core/desc_internal.h"
#include "core/segment_internal.h"
#include "core/slice_internal.h"
#include "core/transport.h"
#include "transports/sstream_internal.h"
#include "util/auth_internal.h"

#define TCP_HDR_LEN 24
#define TCP_OP_V2 0x80
#define TCP_OP_WRITE 1
#define TCP_STATUS_MAGIC 0x4D435456ull
#define TCP_STATUS_OK (TCP_STATUS_MAGIC << 32)
#define TCP_STATUS_REFUSED (TCP_STATUS_MAGIC << 32 | 1)

struct tcp_conn;
struct tcp_sconn;

/* One peer address, shared by every segment served there. */
struct tcp_peer {
	SLIST_ENTRY(tcp_peer) link;
	struct sockaddr_storage addr;
	socklen_t addrlen;
	int version;            /* 1 or 2, from the descriptor */
	int nconns;
	atomic_uint next_conn;
	struct tcp_conn **conns;
};

/* The descriptor's TCP fields (PROTOCOL.md §2). */
struct xfer_tcp_desc {
	uint16_t data_port;     /* non-zero */
	int version;            /* 1 or 2; a missing field means 1 */
};

extern const struct xfer_desc_codec xfer_tcp_codec;

struct tcp_transport {
	struct xfer_transport base;
	int conns;              /* per peer (the tcp_conns knob) */
	struct xfer_tcp_desc desc;
	struct xfer_listener *listener; /* the data port */
	pthread_mutex_t lock;   /* peers */
	SLIST_HEAD(, tcp_peer) peers;
	struct xfer_sstream_table sconns; /* server.c's connections */
};

/* server.c */
void xfer_tcp_server_accept(struct tcp_transport *t, int fd);
void xfer_tcp_server_close_all(struct tcp_transport *t);

/* client.c */
struct tcp_conn *xfer_tcp_conn_new(struct tcp_transport *t,
				   struct tcp_peer *p);
void xfer_tcp_conn_enqueue(struct tcp_conn *c, struct xfer_slice *s,
			   size_t n);
void xfer_tcp_conn_free(struct tcp_conn *c);
/** On the connection's reactor: end the unsent slices of canceled tasks
 *  (the READ payloads of those on the wire are discarded on arrival). */
void xfer_tcp_conn_cancel(struct tcp_conn *c);
/** The reactor that owns @p c. */
struct xfer_reactor *xfer_tcp_conn_reactor(const struct tcp_conn *c);

#endif
