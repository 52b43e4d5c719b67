/*
 * The target's end of a data port connection, as the TCP transport
 * (tcp/server.c) and the file transport's owner side (file/server.c)
 * both keep it: an accepted socket with TCP_NODELAY, two persistent
 * events and a timer on the reactor the connection lives on, and, with a
 * cluster secret, the server's side of the exchange
 * (util/auth_internal.h) until the peer proved itself. The transport
 * embeds struct xfer_sstream in its connection, and struct
 * xfer_sstream_table (the connections open) in itself; it reads the
 * requests, replies, and keeps the timer as it says.
 *
 * The table keeps the port's slots from peers that would only hold them
 * (docs/SECURITY.md). A connection is new until it proves itself (with a
 * secret) or, without one, until its first request is taken; then idle
 * or busy (in a request), as the transport says. At accept, where a cap
 * is reached, the table makes room by closing the oldest connection that
 * holds a slot for nothing:
 *   - max_conns_per_addr from the peer's source address: that address's
 *     oldest new or idle connection;
 *   - max_new_conns new ones: the oldest new one from the address with
 *     the most new ones (a flood from a few addresses closes its own);
 *   - max_conns in all: a new one so chosen, else the oldest idle one.
 * Only where every connection in the way is busy is the new one closed
 * instead. A connection closed for room is shut (both ways) from the
 * accepting thread and leaves the counts at once; its reactor sees the
 * end of its socket and frees it as any other. Its transport gives a new
 * connection env->auth_timeout_ms to become proved.
 *
 * A connection is the reactor's once xfer_sstream_accept() posted its
 * start: everything on it runs there, unless a function says otherwise.
 * The table is shared: its lock guards its lists, counts and addresses,
 * and each connection's place in them.
 */
#ifndef XFER_SSTREAM_INTERNAL_H
#define XFER_SSTREAM_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/queue.h>

#include <event2/event.h>

#include "util/addrs_internal.h"
#include "util/auth_internal.h"
#include "util/log_internal.h"
#include "reactor/reactor_internal.h"

struct xfer_transport_env;

/* Which list of the table a connection is in. */
enum xfer_sstream_list {
	XFER_SS_NEW,                   /* not proved yet */
	XFER_SS_PROVED,
	XFER_SS_SHUT,                  /* closed for room; out of the counts */
};

struct xfer_sstream {
	/* Set by xfer_sstream_accept(). */
	struct xfer_reactor *r;        /* the one it lives on */
	struct xfer_job start_job;     /* posted to r */
	int fd;
	/* The table's, under its lock. */
	TAILQ_ENTRY(xfer_sstream) link; /* tab->lists[list], oldest first */
	enum xfer_sstream_list list;
	struct xfer_addr_node from;    /* under its source address */

	struct event *rev, *wev;       /* on fd, persistent */
	struct event *timer;           /* the transport's timeouts */
	bool reading, writing;         /* which events are added */
	struct xfer_auth_srv *auth;    /* until the peer proved itself */
	bool proved;                   /* written on r only */
	bool deadline;                 /* the new one's timer is set */
	atomic_bool busy;              /* in a request: not closed for room */
};

/* The connections a transport has open. */
struct xfer_sstream_table {
	const char *name;              /* "tcp", "file": in the log */
	pthread_mutex_t lock;
	TAILQ_HEAD(, xfer_sstream) lists[3]; /* by enum xfer_sstream_list */
	unsigned n, nnew;              /* new and proved; new */
	struct xfer_addrs addrs;       /* new and proved */
};

/**
 * An empty table whose connections name themselves @p name ("tcp",
 * "file", static) in the log. Any thread, before the table is shared.
 */
void xfer_sstream_table_init(struct xfer_sstream_table *tab,
			     const char *name);

/** Let the table go: it is empty (every connection closed) and no
 *  thread uses it any more. */
void xfer_sstream_table_fini(struct xfer_sstream_table *tab);

/** A connection of @p tab, any (to close them all once the reactors
 *  stopped); NULL when none is left. */
struct xfer_sstream *xfer_sstream_any(struct xfer_sstream_table *tab);

/**
 * Take the connected, non-blocking socket @p fd for the zeroed stream
 * @p s of a connection the caller made: the server's side of the
 * exchange when @p env has a secret, TCP_NODELAY, and a place in @p tab
 * as new, room made under env's caps as the top of this file says (a
 * line goes to the log, at most once a second per @p cap_log, when a
 * connection is closed for room or refused: "tcp: 4096 data connections
 * open (max_data_conns): the oldest idle one closed"). Admitted, the
 * connection lives on @p r: @p start is posted to it (s->start_job), and
 * calls xfer_sstream_start(). The caller sets the fields of its own that
 * others may read before this call: once admitted the connection is the
 * reactor's. Any thread.
 * @return 0: admitted; -1: not (out of memory, or every connection in
 * the way busy), @p fd closed and nothing of @p s left to free: the
 * caller frees its connection.
 */
int xfer_sstream_accept(struct xfer_sstream_table *tab,
			struct xfer_sstream *s, int fd,
			struct xfer_reactor *r,
			const struct xfer_transport_env *env,
			struct xfer_log_limit *cap_log,
			void (*start)(struct xfer_job *));

/**
 * The start of @p s on its reactor (s->start_job's function calls it):
 * the read and write events on s->fd calling @p on_io(fd, what, @p arg),
 * the timer calling @p on_timeout(-1, EV_TIMEOUT, @p arg), all on
 * s->r's base; the read event is added, the rest is the transport's
 * (its timer first).
 * @return 0; -1 when an event could not be made: the caller closes
 * (xfer_sstream_close() frees what was made).
 */
int xfer_sstream_start(struct xfer_sstream *s, event_callback_fn on_io,
		       event_callback_fn on_timeout, void *arg);

/**
 * With a secret, move the peer's proof on as far as it goes now
 * (readable), and once it is proved free the exchange and mark the
 * connection proved. @return 0 proved (now or before), 1 more to come,
 * -1 refused or broken (close).
 */
int xfer_sstream_auth(struct xfer_sstream_table *tab,
		      struct xfer_sstream *s);

/** Without a secret, the peer's first request was taken: the connection
 *  is proved (with one, xfer_sstream_auth() did it). Cheap once done. */
void xfer_sstream_proved(struct xfer_sstream_table *tab,
			 struct xfer_sstream *s);

/**
 * Bytes moved: note whether the connection is in a request (@p busy;
 * only one between requests may be closed for room), and run its timer
 * for @p ms from now (0: stop it). A new connection's timer is instead
 * env->auth_timeout_ms from its first call (its start), and does not
 * move until it is proved.
 */
void xfer_sstream_arm(struct xfer_sstream *s,
		      const struct xfer_transport_env *env, bool busy,
		      uint32_t ms);

/**
 * Close the admitted @p s: out of @p tab (under its lock), its events
 * and timer freed, the exchange's state freed, the socket closed. What
 * the transport's connection holds (buffers, files) goes back before
 * this; the connection's memory after it. On s->r, or on any thread once
 * the reactor is stopped (a transport's close).
 */
void xfer_sstream_close(struct xfer_sstream_table *tab,
			struct xfer_sstream *s);

#endif
