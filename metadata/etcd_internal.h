/*
 * The etcd backend's private parts, shared by its files, each calling
 * only those below it (the lease and the watch not each other):
 *
 *   etcd.c        the ops: open, close, get/put/del and their results
 *   etcd_lease.c  the lease every put carries
 *   etcd_watch.c  the watch stream
 *   etcd_req.c    requests, results, errors, outages, timers, and the
 *                 members: which one serves, moving to the next
 *   etcd_json.c   the gateway's encoding
 *   etcd_elect.c  a campaign for a key (xfer-stored's leader election)
 *
 * A lower file reaches a higher one only through a function pointer the
 * higher one set: a request's answered callback, e->on_kv_down.
 * Everything runs on the control reactor.
 */
#ifndef XFER_ETCD_INTERNAL_H
#define XFER_ETCD_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/time.h>
#include <sys/types.h>

#include <event2/util.h>
#include <yajl/yajl_tree.h>

#include "core/deferred_internal.h"
#include "core/store.h"

struct evbuffer;
struct evhttp_connection;
struct evhttp_request;

#define ETCD_TTL_S 10             /* lease TTL asked for */
#define ETCD_TIMEOUT_S 5          /* connect, and each answer */
/* The same with several members: a write sent to a follower just as its
 * leader died waits for etcd's own timeout (7 s) where another member
 * would take it once elected (about 1 s). */
#define ETCD_MEMBER_TIMEOUT_S 2
/* A request no member could serve (none answered, or none had a leader)
 * is tried again on each in turn, every ETCD_PARK_MS, until ETCD_CALL_MS
 * after it was made; then it fails (so within ETCD_CALL_MS plus one try's
 * timeout). Every member refusing connections fails it at once. */
#define ETCD_CALL_MS 8000
#define ETCD_PARK_MS 200
#define ETCD_BACKOFF_MIN_MS 100   /* retries of the watch and the lease */
#define ETCD_BACKOFF_MAX_MS 5000
#define ETCD_MAX_MSG (64 << 20)   /* longest answer or watch line, bytes */
#define ETCD_MAX_MEMBERS 16

enum etcd_op_kind {
	OP_GET, OP_PUT, OP_DEL,                /* user calls */
	OP_GRANT, OP_KEEPALIVE,                /* the lease */
	OP_CAMPAIGN, OP_DEPOSE,                /* etcd_elect.c */
};

TAILQ_HEAD(etcd_op_q, etcd_op);

/** The answer to @p op, out of its queue: HTTP status @p st with its JSON
 *  body @p root (NULL if none, or not JSON), or a negative errno in @p st
 *  where none came. The callback owns @p op (frees or finishes it);
 *  @p root is freed once it returns. */
typedef void (*etcd_answer_cb)(struct etcd_op *op, int st, yajl_val root);

/* A request to the server; a user call's result, once finished. */
struct etcd_op {
	TAILQ_ENTRY(etcd_op) link;
	struct etcd_op_q *q;     /* the queue it is in, or NULL */
	struct xfer_deferred_item done;  /* finished: queued for the user */
	struct etcd *e;
	enum etcd_op_kind kind;
	etcd_answer_cb answered; /* set by the layer that made it */
	/* its body, where that layer writes it (NULL: by its kind) */
	int (*body)(struct etcd_op *op, struct evbuffer *b);
	struct timeval made;     /* first sent: for ETCD_CALL_MS */
	struct timeval sent;     /* this try */
	int member;              /* this try's member */
	uint32_t tried;          /* members that failed it this round */
	bool served;             /* a member answered but could not serve
				    (no leader, timeout): worth waiting */
	int64_t lease;           /* put, keepalive: the lease it went with */
	bool retried;            /* put: sent again after a lost lease */
	int err;
	char *res;               /* get: the value, res_len bytes */
	size_t res_len;
	xfer_store_cb cb;
	void *arg;
	char *value;             /* put: vlen bytes, after key */
	size_t vlen;
	char key[];
};

/* One member of the cluster, as the connection string names it. */
struct etcd_member {
	char hostport[300];       /* Host header and log messages */
	struct evhttp_connection *kv, *w;  /* requests; the watch stream */
};

struct etcd {
	struct xfer_store base;
	struct xfer_store_env env;
	char *prefix;
	char *range_end;          /* the watch: keys in [prefix, range_end) */
	size_t range_end_len;
	struct etcd_member members[ETCD_MAX_MEMBERS];
	int nmembers;
	int cur;                  /* the member requests go to */
	int timeout_s;            /* of a connect, of each answer */
	char names[256];          /* "h1:p1,h2:p2...", for log messages */
	struct event *lease_ev;   /* keepalive tick, or grant retry */
	struct event *watch_ev;   /* watch retry */
	struct event *park_ev;    /* parked requests go again */
	struct xfer_deferred deferred;  /* results and notifications */
	/* Set by etcd.c for etcd_req.c: a request to @p member got no answer
	 * (@p err, a negative errno), the member seems out of reach. */
	void (*on_member_down)(struct etcd *e, int member, int err);
	/* Set by etcd.c for etcd_req.c: e->writing is finished. */
	void (*on_write_done)(struct etcd *e);
	/* Requests in flight; puts waiting for a lease; requests waiting to
	 * go again once no member could serve them; puts and deletes
	 * waiting for the one before (e->writing) to finish: a write that
	 * moves to another member must not overtake, nor be overtaken. */
	struct etcd_op_q inflight, waiting, parked, writes;
	struct etcd_op *writing;
	struct etcd_op *grant;    /* in flight */
	int64_t lease;            /* 0: none */
	int ttl_s;
	int ttl_want_s;           /* asked for: ETCD_TTL_S unless set */
	int lease_backoff_ms, watch_backoff_ms;
	bool kv_lost;             /* a put or delete failed, or the lease was
				     lost: tell the user when calls work */
	int fails;                /* member failures since one served */
	bool warned;              /* this outage is logged */
	bool compact_warned;      /* a compacted watch is logged once */
	struct evhttp_request *wreq;
	int wmember;              /* the member of the watch stream */
	struct evbuffer *wbuf;    /* watch bytes short of a full line */
	int64_t rev;              /* the watch has seen every change up to
				     this revision; 0: none yet */
	bool watch_up;            /* created, streaming */
	bool watch_missed;        /* events may have been missed */
	/* Counted for tests and debugging. */
	struct {
		uint64_t events;      /* watch events received */
		uint64_t resyncs;     /* changed(NULL) said */
		uint64_t gets;        /* user gets sent (tries counted once) */
		uint64_t switches;    /* moves to another member */
	} stats;
};

/* ---- etcd.c ---- */

/** The backend's open, its lease asked for a TTL of @p ttl_s seconds
 *  (0: ETCD_TTL_S). */
int xfer_etcd_open_ttl(const char *conn, const struct xfer_store_env *env,
		       int ttl_s, struct xfer_store **out);

/* ---- etcd_lease.c ---- */

/** Send a put with the lease, granting one first if there is none. */
void xfer_etcd_put_start(struct etcd_op *op);
/** The lease is gone (expired, revoked): forget it. */
void xfer_etcd_lease_lost(struct etcd *e);
/** Ask for a lease, unless a grant is in flight. */
void xfer_etcd_lease_grant(struct etcd *e);
/** The lease timer: a keepalive, or a grant retry. */
void xfer_etcd_lease_tick(evutil_socket_t fd, short what, void *arg);

/* ---- etcd_watch.c ---- */

/** Start the watch stream (also the watch retry timer's callback). */
void xfer_etcd_watch_start(evutil_socket_t fd, short what, void *arg);
/** A request to @p member got no answer (@p err): a watch on a dead path
 *  (a partition) might never see an error, so a stream from that member
 *  starts over, on the member requests now go to. */
void xfer_etcd_watch_member_down(struct etcd *e, int member, int err);

/* ---- etcd_req.c ---- */

/** A request of @p kind whose answer goes to @p answered; @p key (NULL:
 *  none) and @p vlen bytes of @p value copied. @return NULL if no
 *  memory. */
struct etcd_op *xfer_etcd_op_new(struct etcd *e, enum etcd_op_kind kind,
				 etcd_answer_cb answered, const char *key,
				 const char *value, size_t vlen);
/** Take @p op out of its queue and put it at the end of @p q (or none). */
void xfer_etcd_op_move(struct etcd_op *op, struct etcd_op_q *q);
void xfer_etcd_op_free(struct etcd_op *op);
/** Queue @p op's result for the user; it runs in a later round. */
void xfer_etcd_finish(struct etcd_op *op, int err);
/** Send @p op to the current member; if it gets no answer there, or no
 *  leader, it goes on to the next ones (see ETCD_CALL_MS) before its
 *  answered callback hears. @return 0, -ENOMEM, -EIO. */
int xfer_etcd_op_send(struct etcd_op *op);
/** Member @p member failed (@p why): unless requests have already moved
 *  on, they go to the next member from now on. */
void xfer_etcd_member_failed(struct etcd *e, int member, const char *why);
/** The parked requests' timer: they go again. */
void xfer_etcd_unpark(evutil_socket_t fd, short what, void *arg);
/** An HTTP error from the gateway, logged with etcd's message. */
int xfer_etcd_http_errno(struct etcd *e, const char *what, int st,
			 yajl_val root);
/** The headers of every request to @p member: Host, Content-Type, and
 *  the gRPC metadata that makes a member without a leader say so at once
 *  rather than wait. */
int xfer_etcd_add_headers(struct etcd *e, int member,
			  struct evhttp_request *req);
/** Log an outage once (naming every member); xfer_etcd_back() logs its
 *  end. */
void xfer_etcd_outage(struct etcd *e, const char *why);
void xfer_etcd_back(struct etcd *e);
/** Arm timer @p ev for @p ms. */
void xfer_etcd_arm(struct event *ev, int ms);
/** @return *ms, doubled for next time up to ETCD_BACKOFF_MAX_MS. */
int xfer_etcd_backoff(int *ms);

/* ---- etcd_json.c ---- */

/** Append "name":"<base64 of data>". @return 0, -1 (no memory). */
int xfer_etcd_add_b64_field(struct evbuffer *b, const char *name,
			    const void *data, size_t len);
/** Decode @p s into a malloc'd *out (NUL-ended too). @return its length,
 *  -EPROTO (not base64) or -ENOMEM. */
ssize_t xfer_etcd_b64_decode(const char *s, char **out);
/** Field @p a, or @p a.@p b, of object @p v; NULL if absent. */
yajl_val xfer_etcd_json_get(yajl_val v, const char *a, const char *b);
/** An int64 field: the gateway writes them as strings, and leaves out
 *  zeros. */
int64_t xfer_etcd_json_i64(yajl_val v);
/** The whole body of an answer, parsed; NULL if it is not JSON. */
yajl_val xfer_etcd_parse_body(struct evhttp_request *req);

#endif
