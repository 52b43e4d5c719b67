/*
 * The initiator's end of a data port connection, as the TCP transport
 * (tcp/client.c) and the file transport's remote side (file/client.c)
 * both keep it: a non-blocking TCP socket with TCP_NODELAY and two
 * persistent events, connected in the background and, with a cluster
 * secret, authenticated (core/auth_internal.h) before any request goes.
 * The transport embeds struct xfer_stream in its connection and does its
 * own reads and writes once the stream is open.
 *
 * Everything here runs on the reactor whose base the events use, unless
 * a function says otherwise; the transport says who else may read the
 * fields (tcp/client.c lends fd to submitters under its lock).
 */
#ifndef XFER_STREAM_INTERNAL_H
#define XFER_STREAM_INTERNAL_H

#include <stdbool.h>
#include <sys/socket.h>

#include <event2/event.h>

#include "util/auth_internal.h"

struct xfer_stream {
	/* Set once by xfer_stream_init(). */
	const char *name;              /* "tcp", "file": in the log */
	const char *peer;              /* "an owner": in the log; or NULL */
	const struct xfer_auth *auth;  /* the cluster secret; NULL: none */

	int fd;                        /* -1: not connected */
	bool connecting;               /* until the socket is connected */
	bool writing;                  /* wev is added */
	bool authing;                  /* until the server took our proof */
	struct xfer_auth_cli cli;
	struct event *rev, *wev;       /* on fd, persistent */
};

/** What xfer_stream_io() leaves to the transport. */
enum xfer_stream_next {
	/** The connect failed (logged), or the hello could not be sent:
	 *  close. */
	XFER_STREAM_FAILED = -2,
	/** The server refused us or broke off the exchange (the auth code
	 *  logged why): close. */
	XFER_STREAM_REFUSED = -1,
	/** Nothing more for this event: the exchange goes on. */
	XFER_STREAM_WAIT = 0,
	/** Open: the event is the transport's, to read and write as it
	 *  says. */
	XFER_STREAM_OPEN = 1,
	/** The exchange ended just now: send what waits. */
	XFER_STREAM_PROVED = 2,
};

/**
 * A closed stream (fd -1) that names itself @p name ("tcp", "file") and
 * its server @p peer (as "an owner"; NULL to say nothing) in the log,
 * and proves itself with @p auth (NULL: no secret). The strings are
 * static; @p auth outlives the stream. Any thread, before the stream is
 * shared; the rest of @p s is zeroed.
 */
void xfer_stream_init(struct xfer_stream *s, const char *name,
		      const char *peer, const struct xfer_auth *auth);

/**
 * Connect the closed stream @p s to @p addr (@p addrlen bytes): a
 * non-blocking socket with TCP_NODELAY, its read and write events on
 * @p base calling @p cb(fd, what, @p arg), and a connect that may finish
 * later (then wev is added: the next xfer_stream_io() sees it through).
 * When it connects at once the exchange starts (with a secret: the
 * hello goes out, rev is added and wev deleted).
 * @return 0: connecting, authenticating or open (xfer_stream_open());
 * -1: failed, logged with errno's reason; what it made stays for
 * xfer_stream_close().
 */
int xfer_stream_connect(struct xfer_stream *s, struct event_base *base,
			const struct sockaddr_storage *addr,
			socklen_t addrlen, event_callback_fn cb, void *arg);

/**
 * First thing for an event @p what (EV_READ, EV_WRITE) on the stream
 * @p s: a connect that finished is checked (SO_ERROR) and the exchange
 * started, a readable socket moves the exchange on.
 * @return one of enum xfer_stream_next; on XFER_STREAM_FAILED and
 * XFER_STREAM_REFUSED the caller closes (xfer_stream_close()).
 */
enum xfer_stream_next xfer_stream_io(struct xfer_stream *s, short what);

/** Is @p s connected and past the exchange, open for requests? */
bool xfer_stream_open(const struct xfer_stream *s);

/** Free the events and close the socket: @p s is closed (fd -1, no
 *  flags), ready for xfer_stream_connect() again. A closed stream is
 *  fine. */
void xfer_stream_close(struct xfer_stream *s);

#endif
