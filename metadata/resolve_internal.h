/*
 * Addresses for the metadata backends that connect to servers (redis,
 * etcd): "host:port" parsed one way for all, and names resolved once, at
 * open, where blocking is allowed, since hiredis 0.14 and evhttp would
 * resolve, blocking the reactor, at every connect.
 */
#ifndef XFER_RESOLVE_INTERNAL_H
#define XFER_RESOLVE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/**
 * Parse one address at @p s: "host:port" or "[v6 address]:port", ended by
 * the end of @p s or by one of the characters of @p stops. ":port" may be
 * left out when @p defport is not 0 (it is then the port). The host is
 * not empty and holds no '@', '?', '/' nor any of @p stops; the port is
 * 1-65535 in decimal digits.
 * @return where it ends (a stop or the NUL), with the host in @p host
 *         (@p size bytes, NUL included) and the port in *@p port; NULL if
 *         malformed.
 */
const char *xfer_store_parse_addr(const char *s, const char *stops,
				  char *host, size_t size, uint16_t *port,
				  uint16_t defport);

/**
 * A numeric address for @p host (a name or a number) in @p addr, IPv4
 * first, as servers on "localhost" often listen there only. May block on
 * DNS. @p size: NI_MAXHOST is always enough.
 * @return 0, or an EAI_* code for gai_strerror().
 */
int xfer_store_resolve(const char *host, char *addr, size_t size);

#endif
