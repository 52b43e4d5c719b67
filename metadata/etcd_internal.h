/*
 * The etcd backend's private parts, shared by its files: etcd.c (the ops
 * and the kv requests), etcd_lease.c (the lease every put carries),
 * etcd_watch.c (the watch stream), etcd_json.c (the gateway's encoding).
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

#include "metadata/deferred_internal.h"
#include "metadata/store.h"

struct evbuffer;
struct evhttp_connection;
struct evhttp_request;

#define ETCD_TTL_S 10             /* lease TTL asked for */
#define ETCD_TIMEOUT_S 5          /* connect, and each answer */
#define ETCD_BACKOFF_MIN_MS 100   /* retries of the watch and the lease */
#define ETCD_BACKOFF_MAX_MS 5000
#define ETCD_MAX_MSG (64 << 20)   /* longest answer or watch line, bytes */

enum etcd_op_kind {
	OP_GET, OP_PUT, OP_DEL,                /* user calls */
	OP_GRANT, OP_KEEPALIVE,                /* the lease */
};

TAILQ_HEAD(etcd_op_q, etcd_op);

/* A request to the server; a user call's result, once finished. */
struct etcd_op {
	TAILQ_ENTRY(etcd_op) link;
	struct etcd_op_q *q;     /* the queue it is in, or NULL */
	struct xfer_deferred_item done;  /* finished: queued for the user */
	struct etcd *e;
	enum etcd_op_kind kind;
	struct timeval sent;
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

struct etcd {
	struct xfer_store base;
	struct xfer_store_env env;
	char *prefix;
	char *range_end;          /* the watch: keys in [prefix, range_end) */
	size_t range_end_len;
	char hostport[300];       /* Host header and log messages */
	struct evhttp_connection *kv, *wconn;
	struct event *lease_ev;   /* keepalive tick, or grant retry */
	struct event *watch_ev;   /* watch retry */
	struct xfer_deferred deferred;  /* results and notifications */
	/* Requests on kv; puts waiting for a lease. */
	struct etcd_op_q inflight, waiting;
	struct etcd_op *grant;    /* in flight */
	int64_t lease;            /* 0: none */
	int ttl_s;
	int lease_backoff_ms, watch_backoff_ms;
	bool up_once;             /* kv got an answer once */
	bool kv_lost;             /* a call failed, or the lease: tell the
				     user when kv works again */
	bool warned;              /* this outage is logged */
	struct evhttp_request *wreq;
	struct evbuffer *wbuf;    /* watch bytes short of a full line */
	bool watch_up;            /* created, streaming */
	bool watch_missed;        /* events may have been missed */
};

/* ---- etcd.c: ops and kv requests ---- */

struct etcd_op *etcd_op_new(struct etcd *e, enum etcd_op_kind kind,
			    const char *key, const char *value, size_t vlen,
			    xfer_store_cb cb, void *arg);
/** Take @p op out of its queue and put it at the end of @p q (or none). */
void etcd_op_move(struct etcd_op *op, struct etcd_op_q *q);
void etcd_op_free(struct etcd_op *op);
/** Queue @p op's result for the user; it runs in a later round. */
void etcd_finish(struct etcd_op *op, int err);
/** Send @p op on the kv connection. @return 0, -ENOMEM, -EIO. */
int etcd_op_send(struct etcd_op *op);
/** An HTTP error from the gateway, logged with etcd's message. */
int etcd_http_errno(struct etcd *e, const char *what, int st, yajl_val root);
/** The Host and Content-Type headers of every request. */
int etcd_add_headers(struct etcd *e, struct evhttp_request *req);
/** Log an outage once; etcd_back() logs its end. */
void etcd_outage(struct etcd *e, const char *why);
void etcd_back(struct etcd *e);
/** Arm timer @p ev for @p ms. */
void etcd_arm(struct event *ev, int ms);
/** @return *ms, doubled for next time up to ETCD_BACKOFF_MAX_MS. */
int etcd_backoff(int *ms);

/* ---- etcd_lease.c ---- */

/** Send a put with the lease, granting one first if there is none. */
void etcd_put_start(struct etcd_op *op);
/** The lease is gone (expired, revoked): forget it. */
void etcd_lease_lost(struct etcd *e);
/** Ask for a lease, unless a grant is in flight. */
void etcd_lease_grant(struct etcd *e);
void etcd_grant_done(struct etcd *e, int st, yajl_val root);
void etcd_keepalive_done(struct etcd *e, int64_t lease, int st,
			 yajl_val root);
/** The lease timer: a keepalive, or a grant retry. */
void etcd_lease_tick(evutil_socket_t fd, short what, void *arg);

/* ---- etcd_watch.c ---- */

/** Start the watch stream (also the watch retry timer's callback). */
void etcd_watch_start(evutil_socket_t fd, short what, void *arg);
/** The stream is gone: start it again after a backoff. */
void etcd_watch_lost(struct etcd *e, const char *why);

/* ---- etcd_json.c ---- */

/** Append "name":"<base64 of data>". @return 0, -1 (no memory). */
int etcd_add_b64_field(struct evbuffer *b, const char *name,
		       const void *data, size_t len);
/** Decode @p s into a malloc'd *out (NUL-ended too). @return its length,
 *  -EPROTO (not base64) or -ENOMEM. */
ssize_t etcd_b64_decode(const char *s, char **out);
/** Field @p a, or @p a.@p b, of object @p v; NULL if absent. */
yajl_val etcd_json_get(yajl_val v, const char *a, const char *b);
/** An int64 field: the gateway writes them as strings, and leaves out
 *  zeros. */
int64_t etcd_json_i64(yajl_val v);
/** The whole body of an answer, parsed; NULL if it is not JSON. */
yajl_val etcd_parse_body(struct evhttp_request *req);

#endif
