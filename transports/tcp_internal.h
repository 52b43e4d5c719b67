/*
 * TCP transport (PROTOCOL.md §3, v2 with status frames). The target side
 * (tcp_server.c) serves requests on accepted connections; the initiator
 * side (tcp_client.c) keeps a few persistent connections per peer and
 * pipelines slices on them. Every connection lives on one worker reactor.
 */
#ifndef XFER_TCP_INTERNAL_H
#define XFER_TCP_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>

#include "engine_internal.h"

#define TCP_HDR_LEN 24
#define TCP_OP_V2 0x80
#define TCP_OP_WRITE 1
#define TCP_STATUS_MAGIC 0x4D435456ull
#define TCP_STATUS_OK (TCP_STATUS_MAGIC << 32)
#define TCP_STATUS_REFUSED (TCP_STATUS_MAGIC << 32 | 1)
#define TCP_IOV_MAX 64

struct tcp_conn;
struct tcp_sconn;

/* One peer address, shared by every segment served there. */
struct tcp_peer {
	struct tcp_peer *next;
	struct sockaddr_storage addr;
	socklen_t addrlen;
	int version;            /* 1 or 2, from the descriptor */
	int nconns;
	atomic_uint next_conn;
	struct tcp_conn **conns;
};

struct xfer_transport {
	struct xfer_engine *e;
	struct evconnlistener *lev;
	uint16_t port;
	pthread_mutex_t lock;   /* peers and server connections lists */
	struct tcp_peer *peers;
	struct tcp_sconn *sconns;
};

/* tcp_server.c */
void tcp_server_accept(struct xfer_transport *t, int fd);
void tcp_server_close_all(struct xfer_transport *t);

/* tcp_client.c */
struct tcp_conn *tcp_conn_new(struct xfer_transport *t, struct tcp_peer *p);
void tcp_conn_enqueue(struct tcp_conn *c, struct xfer_slice *s, size_t n);
void tcp_conn_free(struct tcp_conn *c);

#endif
