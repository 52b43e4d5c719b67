/*
 * xfer-stored's listener and connections (conn.c): requests framed as
 * docs/PROTOCOL.md §7 says, answered by the state in order. On the
 * server's event_base only.
 */
#ifndef XFER_STORED_CONN_INTERNAL_H
#define XFER_STORED_CONN_INTERNAL_H

#include <stdint.h>
#include <sys/socket.h>

struct event_base;
struct stored;
struct stored_srv;
struct xfer_auth;

/**
 * Listen on @p sa (@p salen bytes) and serve @p state's requests on
 * @p base. With @p auth (not NULL; kept, not copied), every connection
 * must prove the secret first (docs/PROTOCOL.md §6). At most
 * @p max_conns (>= 1) connections: a new one past it closes the oldest
 * that sent no request, else the one idle longest, else itself (xfer's
 * --max_rpc_conns, as the engine's data ports cap theirs).
 * @return the server, or NULL with errno (EINVAL: @p max_conns is 0;
 *         EADDRINUSE, EACCES, ENOMEM).
 */
struct stored_srv *stored_srv_new(struct event_base *base,
				  struct stored *state,
				  const struct xfer_auth *auth,
				  const struct sockaddr *sa, socklen_t salen,
				  unsigned max_conns);

/** A standby asked for the journal stream with @p req (ha_follow): the
 *  callee owns @p bev from now on, its request drained from the input. */
struct bufferevent;
struct store_msg;
typedef void (*stored_follow_cb)(void *arg, struct bufferevent *bev,
				 const struct store_msg *req);

/** Hand ha_follow requests to @p cb (store/master/stream.c); without,
 *  they close their connection. */
void stored_srv_set_follow(struct stored_srv *srv, stored_follow_cb cb,
			   void *arg);

/** The port it listens on. */
uint16_t stored_srv_port(const struct stored_srv *srv);

/** Close the listener and every connection (NULL is fine). */
void stored_srv_free(struct stored_srv *srv);

#endif
