/*
 * A listener that survives running out of file descriptors (or memory):
 * when accept() fails, libevent would retry the readable socket at once,
 * for ever. The guard pauses accepting instead, 10 ms the first time,
 * doubling up to 1 s while failures go on, logs at most one line a second
 * with the count, and resumes by itself. Used by every listener of the
 * engine and by xfer-metad's.
 */
#ifndef XFER_LISTEN_INTERNAL_H
#define XFER_LISTEN_INTERNAL_H

struct evconnlistener;
struct xfer_listen_guard;

/**
 * Give @p lev (on any event_base) the error callback above; @p what names
 * the listener in the log ("handshake", "tcp data"; copied, up to 31
 * bytes). Call on the base's thread, or before it runs.
 * @return the guard, to free with xfer_listen_guard_free() before
 *         @p lev is freed; NULL for want of memory (errno ENOMEM).
 */
struct xfer_listen_guard *xfer_listen_guard_new(struct evconnlistener *lev,
						const char *what);

/** A connection was accepted: the next failure pauses for the shortest
 *  time again (a backlog drains quickly once descriptors are free). Call
 *  from the listener's accept callback, if its owner has one. */
void xfer_listen_guard_accepted(struct xfer_listen_guard *g);

/** Drop the guard (its timer with it); @p lev stays as it is. NULL is
 *  fine. On the base's thread, or with the base stopped. */
void xfer_listen_guard_free(struct xfer_listen_guard *g);

#endif
