/*
 * xfer-stored's admin HTTP (admin.c) on --metrics_port, with
 * mooncake_master's paths, and the Prometheus text of its /metrics
 * (metrics.c). On the master's event_base: what it answers is read from
 * the state between two events, never while one runs.
 */
#ifndef XFER_STORED_ADMIN_INTERNAL_H
#define XFER_STORED_ADMIN_INTERNAL_H

#include <stdint.h>

struct evbuffer;
struct event_base;
struct stored;
struct stored_admin;

/**
 * Serve @p s's admin paths on @p host:@p port (0: any free port, written
 * to *@p bound) on @p base; both must outlive the server.
 * @return it, or NULL with errno (EADDRINUSE, EACCES, EINVAL for a host
 *         that is not an address, ENOMEM).
 */
struct stored_admin *stored_admin_new(struct event_base *base,
				      struct stored *s, const char *host,
				      uint16_t port, uint16_t *bound);

/** Close every connection, stop listening, free @p a (NULL is fine). */
void stored_admin_free(struct stored_admin *a);

/**
 * Append @p s's metrics to @p out in Prometheus' text format (0.0.4):
 * Mooncake's master's names where it has one (master_*, segment_*),
 * xfer_stored_* for the rest.
 * @return 0, -ENOMEM.
 */
int stored_metrics(struct stored *s, struct evbuffer *out);

#endif
