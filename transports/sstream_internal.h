/*
 * The target's end of a data port connection, as the TCP transport
 * (tcp/server.c) and the file transport's owner side (file/server.c)
 * both keep it: an accepted socket with TCP_NODELAY, two persistent
 * events and a timer on the reactor the connection lives on, and, with a
 * cluster secret, the server's side of the exchange
 * (core/auth_internal.h) until the peer proved itself. The transport
 * embeds struct xfer_sstream in its connection, and struct
 * xfer_sstream_table (the connections open, at most max_data_conns) in
 * itself; it reads the requests, replies, and keeps the timer as it
 * says.
 *
 * A connection is the reactor's once xfer_sstream_accept() posted its
 * start: everything on it runs there, unless a function says otherwise.
 * The table is shared: its lock guards list and n.
 */
#ifndef XFER_SSTREAM_INTERNAL_H
#define XFER_SSTREAM_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <sys/queue.h>

#include <event2/event.h>

#include "util/auth_internal.h"
#include "util/log_internal.h"
#include "reactor/reactor_internal.h"

struct xfer_transport_env;

/* An unproved connection gets this long (as a handshake): the timeout
 * the transport's timer keeps while s->auth is set. */
#define XFER_SSTREAM_AUTH_TIMEOUT_MS 5000

struct xfer_sstream {
	/* Set by xfer_sstream_accept(). */
	struct xfer_reactor *r;        /* the one it lives on */
	LIST_ENTRY(xfer_sstream) link; /* the table's list, under its lock */
	struct xfer_job start_job;     /* posted to r */
	int fd;

	struct event *rev, *wev;       /* on fd, persistent */
	struct event *timer;           /* the transport's timeouts */
	bool reading, writing;         /* which events are added */
	struct xfer_auth_srv *auth;    /* until the peer proved itself */
};

/* The connections a transport has open. */
struct xfer_sstream_table {
	const char *name;              /* "tcp", "file": in the log */
	pthread_mutex_t lock;          /* list and n */
	LIST_HEAD(, xfer_sstream) list;
	unsigned n;                    /* in list, at most env->max_conns */
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

/**
 * Take the connected, non-blocking socket @p fd for the zeroed stream
 * @p s of a connection the caller made: the server's side of the
 * exchange when @p env has a secret, TCP_NODELAY, and a place in @p tab
 * unless env->max_conns are open there already (then a line goes to the
 * log, at most once a second per @p cap_log: "tcp: 4 data connections
 * open (max_data_conns): a new one closed"). Admitted, the connection
 * lives on @p r: @p start is posted to it (s->start_job), and calls
 * xfer_sstream_start(). The caller sets the fields of its own that
 * others may read before this call: once admitted the connection is
 * the reactor's. Any thread.
 * @return 0: admitted; -1: not (out of memory, or the cap), @p fd closed
 * and nothing of @p s left to free: the caller frees its connection.
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
 * Close the admitted @p s: out of @p tab (under its lock), its events
 * and timer freed, the exchange's state freed, the socket closed. What
 * the transport's connection holds (buffers, files) goes back before
 * this; the connection's memory after it. On s->r, or on any thread once
 * the reactor is stopped (a transport's close).
 */
void xfer_sstream_close(struct xfer_sstream_table *tab,
			struct xfer_sstream *s);

#endif
