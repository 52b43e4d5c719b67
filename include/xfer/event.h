/*
 * xfer on an application's libevent event_base (plugin mode).
 */
#ifndef XFER_EVENT_H
#define XFER_EVENT_H

#include <xfer/xfer.h>

#ifdef __cplusplus
extern "C" {
#endif

struct event_base;

/**
 * Create an engine whose control events (handshake listener, timers,
 * completion delivery) live on the application's @p base, so batch
 * callbacks run on the thread that dispatches @p base. With
 * `workers` 0 the data connections go on @p base too and the engine
 * starts no thread at all; otherwise it starts `workers` worker threads,
 * which hand completions back to @p base through a pipe-like wakeup, so
 * @p base needs no libevent locking.
 * The engine never dispatches or frees @p base; free the engine before the
 * base. Nothing happens until the application dispatches @p base.
 * Its threads block SIGPIPE; the thread that dispatches @p base is the
 * application's, and a handshake or metadata connection whose peer is
 * gone can raise SIGPIPE there (libevent writes without MSG_NOSIGNAL), so
 * ignore or block it as any libevent program does.
 * @return the engine, or NULL with errno as xfer_engine_new(), or EINVAL
 *         for a NULL base. Call on the thread that owns @p base, while it
 *         is not being dispatched by another thread.
 */
XFER_EXPORT
struct xfer_engine *xfer_engine_new_on_base(struct event_base *base,
					    const struct xfer_config *cfg);

#ifdef __cplusplus
}
#endif
#endif /* XFER_EVENT_H */
