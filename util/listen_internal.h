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

#include <sys/socket.h>

struct event_base;
struct evconnlistener;
struct xfer_listen_guard;
struct xfer_listener;

/**
 * Listen on @p sa (@p salen bytes) on @p base, guarded as above (@p what
 * names it in the log, as for xfer_listen_guard_new()), with the options
 * every listener of the engine has: close-on-exec, SO_REUSEADDR, a
 * SOMAXCONN backlog (bursts of connections wait there, not in SYN
 * retries). Each accepted socket, non-blocking, goes to @p accept(@p arg,
 * fd), which owns it, on @p base's thread. Call on that thread or before
 * the base runs.
 * @return the listener; NULL with errno (EADDRINUSE, EACCES, ENOMEM ...).
 */
struct xfer_listener *xfer_listen(struct event_base *base,
				  const struct sockaddr *sa, socklen_t salen,
				  const char *what,
				  void (*accept)(void *arg, int fd),
				  void *arg);

/** The listening socket of @p l (for its port). */
int xfer_listener_fd(const struct xfer_listener *l);

/** Close the listener; NULL is fine. On its base's thread, or with the
 *  base stopped. */
void xfer_listener_free(struct xfer_listener *l);

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
