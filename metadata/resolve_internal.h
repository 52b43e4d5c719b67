/*
 * Name resolution for the metadata backends that connect to a server
 * (redis, etcd): done once, at open, where blocking is allowed, since
 * hiredis 0.14 and evhttp would resolve, blocking the reactor, at every
 * connect.
 */
#ifndef XFER_RESOLVE_INTERNAL_H
#define XFER_RESOLVE_INTERNAL_H

#include <stddef.h>

/**
 * A numeric address for @p host (a name or a number) in @p addr, IPv4
 * first, as servers on "localhost" often listen there only. May block on
 * DNS. @p size: NI_MAXHOST is always enough.
 * @return 0, or an EAI_* code for gai_strerror().
 */
int xfer_store_resolve(const char *host, char *addr, size_t size);

#endif
