/* Socket helpers shared by the handshake and the transports. */
#ifndef XFER_NET_INTERNAL_H
#define XFER_NET_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/** A numeric IPv4/IPv6 @p host and @p port as a sockaddr; -EINVAL if not
 *  numeric. */
int xfer_net_parse(const char *host, uint16_t port,
		   struct sockaddr_storage *ss, socklen_t *len);

/** Set the port of an IPv4 or IPv6 address. */
void xfer_net_set_port(struct sockaddr_storage *ss, uint16_t port);

/** Resolve @p host (name or number), first address. May block on DNS.
 *  @return 0, -ENOENT. */
int xfer_net_resolve(const char *host, uint16_t port,
		     struct sockaddr_storage *ss, socklen_t *len);

/** The local port a bound socket got. */
uint16_t xfer_net_local_port(int fd);

/** Split `host:port` (port 1..65535). @return 0, -EINVAL. */
int xfer_split_host_port(const char *name, char *host, size_t hostlen,
			 uint16_t *port);

#endif
