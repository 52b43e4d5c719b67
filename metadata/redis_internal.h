/*
 * The redis backend's private parts, shared by redis.c (the ops, the
 * requests and the watch's messages) and redis_conn.c (the two hiredis
 * connections: connect, handshake steps, stall watchdog, retries).
 * redis.c calls redis_conn.c; redis_conn.c calls back only through the
 * struct redis_conn_cbs redis.c gives it. Everything runs on the control
 * reactor.
 */
#ifndef XFER_REDIS_INTERNAL_H
#define XFER_REDIS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <netdb.h>
#include <sys/queue.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "metadata/deferred_internal.h"
#include "metadata/store.h"

struct event;

/* A connection's handshake, in order; steps that do not apply are skipped. */
enum redis_step {
	ST_DOWN,
	ST_CONNECTING,
	ST_AUTH,
	ST_SELECT,       /* command connection, db > 0 */
	ST_CONFIG_GET,   /* subscriber: notify-keyspace-events */
	ST_CONFIG_SET,   /* subscriber, when flags are missing */
	ST_SUBSCRIBE,    /* subscriber */
	ST_UP,
};

struct redis_store;
struct redis_conn;

/* What a connection tells the layer above it (redis.c), as hiredis tells
 * its user through callbacks: redis_conn.c calls nothing of redis.c. */
struct redis_conn_cbs {
	/** The handshake of @p c is done: it is up. */
	void (*up)(struct redis_conn *c);
	/** @p c is down: what waits on it fails with @p err. */
	void (*down)(struct redis_conn *c, int err);
	/** A message on @p c, which is up (the subscriber's pmessages). */
	void (*message)(struct redis_conn *c, const redisReply *r);
};

struct redis_conn {
	struct redis_store *s;
	const struct redis_conn_cbs *cbs;
	const char *name;        /* for the log */
	bool is_sub;
	redisAsyncContext *ac;   /* NULL while down */
	enum redis_step step;
	int busy;                /* answers awaited (the connect counts) */
	int drop_err;            /* what requests in flight get on a drop */
	int backoff_ms;
	struct event *timer;     /* down: retry; else: stall watchdog */
};

enum redis_note_kind { N_GET, N_PUT, N_DEL };

/* A request, from get/put/del to its callback. */
struct redis_note {
	TAILQ_ENTRY(redis_note) link;    /* s->waiting */
	struct xfer_deferred_item done;  /* its result, queued */
	enum redis_note_kind kind;
	xfer_store_cb cb;
	void *arg;
	int err;
	char *value;             /* get: the reply; put: into key[] */
	size_t len;
	char key[];              /* then a put's value */
};

TAILQ_HEAD(redis_note_list, redis_note);

struct redis_store {
	struct xfer_store pub;
	struct xfer_store_env env;     /* strings are our copies */
	char host[256];                /* as written, for the log */
	char ip[NI_MAXHOST];           /* resolved once at open */
	int port, db;
	char *chan;                    /* "__keyspace@<db>__:" */
	size_t chan_len, prefix_len;
	char *pattern;                 /* chan + escaped prefix + "*" */
	char events[32];               /* CONFIG SET value, "" if none */
	struct redis_conn cmd, sub;
	struct redis_note_list waiting; /* asked while the handshake runs */
	struct xfer_deferred deferred; /* results and notifications */
	bool ever_up;                  /* both were up once */
	bool lost;                     /* one dropped since */
	bool warned;                   /* this outage is logged */
	bool config_warned;
	bool closing;
};

/* ---- redis_conn.c ---- */

/** Set up @p c of @p s (not connected yet); @p cbs, which must outlive
 *  it, hears of its state. @return 0, -ENOMEM. */
int xfer_redis_conn_init(struct redis_store *s, struct redis_conn *c,
			 const char *name, bool is_sub,
			 const struct redis_conn_cbs *cbs);
/** Connect @p c and run its handshake; a failure retries after a
 *  backoff. */
void xfer_redis_conn_start(struct redis_conn *c);
/** Drop @p c without callbacks and free its timer. */
void xfer_redis_conn_free(struct redis_conn *c);
/** Send a command on @p c, counting the answer for the stall watchdog.
 *  @return 0, or -ENOMEM where hiredis refused it: the answer is counted
 *  all the same, left to the watchdog, unless the caller takes it back
 *  with xfer_redis_conn_answered(). */
int xfer_redis_conn_send(struct redis_conn *c, redisCallbackFn *fn,
			 void *priv, const char *fmt, ...);
/** A reply came: one answer less to wait for. */
void xfer_redis_conn_answered(struct redis_conn *c);

#endif
