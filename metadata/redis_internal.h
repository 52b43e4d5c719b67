/*
 * The redis backend's private parts, shared by its files, each calling
 * only those below it:
 *
 *   redis.c           the ops, the requests and the watch's messages
 *   redis_sentinel.c  Sentinel: the sentinels asked for the master, its
 *                     switches followed
 *   redis_conn.c      the hiredis connections: connect, handshake steps,
 *                     stall watchdog, retries
 *
 * redis_conn.c calls back only through the struct redis_conn_cbs redis.c
 * gives it. Everything runs on the control reactor.
 */
#ifndef XFER_REDIS_INTERNAL_H
#define XFER_REDIS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <netdb.h>
#include <sys/queue.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "core/deferred_internal.h"
#include "core/store.h"

struct event;

#define REDIS_MAX_SENTINELS 16

/* A connection's handshake, in order; steps that do not apply are skipped. */
enum redis_step {
	ST_DOWN,
	ST_WAIT,         /* Sentinel: the master is not known yet */
	ST_CONNECTING,
	ST_AUTH,         /* to the server, with a password */
	ST_ROLE,         /* to the server, with Sentinel: is it the master? */
	ST_SELECT,       /* command connection, db > 0 */
	ST_CONFIG_GET,   /* subscriber: notify-keyspace-events */
	ST_CONFIG_SET,   /* subscriber, when flags are missing */
	ST_ASK,          /* sentinel link: SENTINEL get-master-addr-by-name */
	ST_SUBSCRIBE,    /* subscriber: the keyspace; sentinel link: switches */
	ST_UP,
};

enum redis_conn_kind {
	RC_CMD,          /* GET, SET, DEL */
	RC_SUB,          /* the keyspace notifications */
	RC_SENTINEL,     /* a sentinel, asked, then subscribed to switches */
};

/* Where a connection goes. */
struct redis_addr {
	char host[256];          /* as written, or as a sentinel said */
	char ip[NI_MAXHOST];     /* resolved once */
	int port;
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
	/** A message on @p c, which is up (the subscriber's pmessages, the
	 *  sentinel link's switches). */
	void (*message)(struct redis_conn *c, const redisReply *r);
	/** The sentinel link @p c has the master's address: @p ip, @p port. */
	void (*master)(struct redis_conn *c, const char *ip, int port);
};

struct redis_conn {
	struct redis_store *s;
	const struct redis_conn_cbs *cbs;
	const char *name;        /* for the log */
	enum redis_conn_kind kind;
	struct redis_addr *addr; /* where it connects */
	redisAsyncContext *ac;   /* NULL while down */
	enum redis_step step;
	int busy;                /* answers awaited (the connect counts) */
	int drop_err;            /* what requests in flight get on a drop */
	int backoff_ms;
	struct event *timer;     /* down: retry; else: stall watchdog */
	bool warned;             /* this outage is logged */
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
	struct redis_addr server;      /* the server, or the master the
					  sentinels name */
	int db;
	char *chan;                    /* "__keyspace@<db>__:" */
	size_t chan_len, prefix_len;
	char *pattern;                 /* chan + escaped prefix + "*" */
	char events[32];               /* CONFIG SET value, "" if none */
	struct redis_conn cmd, sub;
	struct redis_note_list waiting; /* asked while the handshake runs */
	struct xfer_deferred deferred; /* results and notifications */
	bool ever_up;                  /* both were up once */
	bool lost;                     /* one dropped since */
	bool config_warned;
	bool closing;
	/* Sentinel (master_name set): the sentinels, one asked at a time. */
	char *master_name;
	struct redis_addr sentinels[REDIS_MAX_SENTINELS];
	int nsentinels;
	int cur_sentinel;
	int sentinel_fails;            /* in a row */
	char sentinel_names[256];      /* "h1:p1,h2:p2...", for the log */
	struct redis_conn link;
	bool master_known;
	uint64_t switches;             /* master moves followed (tests) */
};

/* ---- redis_conn.c ---- */

/** Set up @p c of @p s, of @p kind, to connect to @p addr (not yet);
 *  @p cbs, which must outlive it, hears of its state. @return 0,
 *  -ENOMEM. */
int xfer_redis_conn_init(struct redis_store *s, struct redis_conn *c,
			 const char *name, enum redis_conn_kind kind,
			 struct redis_addr *addr,
			 const struct redis_conn_cbs *cbs);
/** Connect @p c and run its handshake; a failure retries after a
 *  backoff. */
void xfer_redis_conn_start(struct redis_conn *c);
/** Drop @p c if it is connected (what it had in flight fails; no down
 *  callback) and connect again now; the user hears reconnected once the
 *  store is up again. Not from inside @p c's own callbacks. */
void xfer_redis_conn_restart(struct redis_conn *c);
/** Resolve @p a->host into @p a->ip. @return 0, -EINVAL (logged). */
int xfer_redis_addr_resolve(struct redis_addr *a, const char *conn);
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

/* ---- redis_sentinel.c ---- */

/** Does @p conn name sentinels ("redis+sentinel://")? */
bool xfer_redis_sentinel_conn(const char *conn);
/** Parse "redis+sentinel://h1[:p],h2[:p].../name[/db]" into @p s and
 *  resolve the sentinels. @return 0, -EINVAL (logged), -ENOMEM. */
int xfer_redis_sentinel_parse(struct redis_store *s, const char *conn);
/** Start asking the sentinels; the server connections wait for them. */
void xfer_redis_sentinel_start(struct redis_store *s);
/** The sentinel link is down (@p err): the next sentinel is asked; once
 *  every one failed with no master known, what waits fails. */
void xfer_redis_sentinel_down(struct redis_store *s, int err);
/** A connection to the master failed: ask the sentinels again (it may
 *  have moved while we were not listening). */
void xfer_redis_sentinel_recheck(struct redis_store *s);
/** The master is at @p ip:@p port (the link's answer or a switch). */
void xfer_redis_sentinel_master(struct redis_store *s, const char *ip,
				int port);
/** A message on the sentinel link: +switch-master for our master moves
 *  it. */
void xfer_redis_sentinel_message(struct redis_store *s, const redisReply *r);

#endif
