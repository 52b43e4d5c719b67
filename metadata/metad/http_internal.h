/* xfer-metad's HTTP side: the key endpoint and the watch long-poll. */
#ifndef XFER_METAD_HTTP_INTERNAL_H
#define XFER_METAD_HTTP_INTERNAL_H

#include <stdint.h>

struct event_base;
struct metad_http;
struct metad_store;

/**
 * Serve @p store under @p path ("/metadata"; the watch is @p path
 * "/watch") on @p base, which must outlive the server. The store stays
 * the caller's; a request body longer than its limits.value_bytes is
 * refused (413) before it is read. @return the server, or NULL with
 * errno set.
 */
struct metad_http *metad_http_new(struct event_base *base,
				  struct metad_store *store, const char *path);

/** Listen on @p addr:@p port (0 picks a free port, written to *bound).
 *  @return 0, or -1 (errno set). */
int metad_http_bind(struct metad_http *h, const char *addr, uint16_t port,
		    uint16_t *bound);

/** Drop held watchers unanswered, close every connection, free @p h. */
void metad_http_free(struct metad_http *h);

#endif
