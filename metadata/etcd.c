/*
 * etcd metadata through the v3 JSON gateway (grpc-gateway) with evhttp,
 * all on the control reactor. Keys and values travel as base64 in JSON
 * bodies; int64 fields come back as JSON strings. Every put carries this
 * engine's lease, kept alive every TTL/3, so the keys of an engine that
 * died expire (etcd_lease.c). A streaming watch on the prefix reports
 * changes (etcd_watch.c). Requests go through etcd_req.c, to one member
 * of the cluster and on to the next when it fails. This file: the ops and
 * their results.
 *
 * evhttp callbacks never call the user: finished calls and notifications
 * queue up and run from the deferred queue, so a user callback may close
 * the store without freeing evhttp's state under its feet, and no
 * callback ever runs inside a call (evhttp may call back synchronously
 * when a connect fails at once).
 */
#include <errno.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>

#include "util/log_internal.h"
#include "metadata/backends_internal.h"
#include "metadata/etcd_internal.h"
#include "metadata/resolve_internal.h"

#define ETCD_SCHEME "etcd://"

/* ---- results ---- */

/* The result of a get, put or del: queued for the user, or a put sent
 * again when its lease was gone (expired in an outage, revoked). */
static void user_done(struct etcd_op *op, int st, yajl_val root)
{
	struct etcd *e = op->e;
	const char *b64;
	yajl_val kvs;
	ssize_t n;

	if (op->kind == OP_PUT && st == HTTP_NOTFOUND && !op->retried) {
		op->retried = true;
		if (op->lease == e->lease)
			xfer_etcd_lease_lost(e);
		xfer_etcd_put_start(op);
		return;
	}
	if (st < 0) {
		xfer_etcd_finish(op, st);
		return;
	}
	if (st != HTTP_OK) {
		xfer_etcd_finish(op, xfer_etcd_http_errno(e, op->key, st,
							  root));
		return;
	}
	kvs = xfer_etcd_json_get(root, "kvs", NULL);
	if (!root || op->kind != OP_GET) {
		xfer_etcd_finish(op, root ? 0 : -EIO);
		return;
	}
	if (!YAJL_IS_ARRAY(kvs) || !kvs->u.array.len) {
		xfer_etcd_finish(op, -ENOENT);
		return;
	}
	/* An empty value is left out. */
	b64 = YAJL_GET_STRING(xfer_etcd_json_get(kvs->u.array.values[0],
						 "value", NULL));
	n = xfer_etcd_b64_decode(b64 ? b64 : "", &op->res);
	if (n >= 0)
		op->res_len = (size_t)n;
	xfer_etcd_finish(op, n >= 0 ? 0 : n == -ENOMEM ? -ENOMEM : -EIO);
}

/* ---- the ops ---- */

/* "etcd://host:port", or Mooncake's bare "host:port"; [v6]:port; a list
 * of them. */
static int etcd_accepts(const char *conn)
{
	if (!strncasecmp(conn, ETCD_SCHEME, strlen(ETCD_SCHEME)))
		return 1;
	/* No other scheme, and a port: not "p2p", "P2PHANDSHAKE". */
	return !strstr(conn, "://") && strchr(conn, ':');
}

/* The members @p conn names, separated by ',' or ';', into @p hosts and
 * @p ports. @return how many, or -EINVAL (logged). */
static int parse_members(const char *conn, char (*hosts)[256],
			 uint16_t *ports)
{
	const char *p = conn;
	int n = 0;

	if (!strncasecmp(p, ETCD_SCHEME, strlen(ETCD_SCHEME)))
		p += strlen(ETCD_SCHEME);
	do {
		if (n == ETCD_MAX_MEMBERS ||
		    !(p = xfer_store_parse_addr(p, ",;", hosts[n], 256,
						&ports[n], 0))) {
			xfer_log(XFER_LOG_ERROR, "etcd: bad connection string "
				 "\"%s\" (want etcd://host:port[,host:port]..., "
				 "at most %d)", conn, ETCD_MAX_MEMBERS);
			return -EINVAL;
		}
		n++;
	} while (*p++);
	return n;
}

/* The members @p conn names: each resolved, its connections made (they
 * connect when first used). @return 0, -EINVAL (logged), -ENOMEM. */
static int add_members(struct etcd *e, const char *conn)
{
	char hosts[ETCD_MAX_MEMBERS][256], addr[NI_MAXHOST];
	uint16_t ports[ETCD_MAX_MEMBERS];
	struct etcd_member *m;
	int n = parse_members(conn, hosts, ports), ret;
	size_t used = 0;

	e->timeout_s = n > 1 ? ETCD_MEMBER_TIMEOUT_S : ETCD_TIMEOUT_S;
	for (int i = 0; i < n; i++) {
		ret = xfer_store_resolve(hosts[i], addr, sizeof(addr));
		if (ret) {
			xfer_log(XFER_LOG_ERROR, "etcd: cannot resolve \"%s\": "
				 "%s", hosts[i], gai_strerror(ret));
			return -EINVAL;
		}
		m = &e->members[e->nmembers++];
		snprintf(m->hostport, sizeof(m->hostport), "%s%.255s%s:%u",
			 strchr(hosts[i], ':') ? "[" : "", hosts[i],
			 strchr(hosts[i], ':') ? "]" : "", ports[i]);
		if (used < sizeof(e->names))
			used += (size_t)snprintf(e->names + used,
						 sizeof(e->names) - used, "%s%s",
						 used ? "," : "", m->hostport);
		m->kv = evhttp_connection_base_new(e->env.base, NULL, addr,
						   ports[i]);
		/* The watch streams for ever: a connection of its own. */
		m->w = evhttp_connection_base_new(e->env.base, NULL, addr,
						  ports[i]);
		if (!m->kv || !m->w)
			return -ENOMEM;
		evhttp_connection_set_timeout(m->kv, e->timeout_s);
		evhttp_connection_set_retries(m->kv, 0);
		evhttp_connection_set_max_body_size(m->kv, ETCD_MAX_MSG);
		evhttp_connection_set_timeout(m->w, e->timeout_s);
		evhttp_connection_set_retries(m->w, 0);
	}
	return n < 0 ? n : 0;
}

/* etcd's range end of a prefix: its last byte below 0xff plus one, what
 * follows cut; "\0" (to the end) when there is none. */
static char *prefix_end(const char *prefix, size_t *len)
{
	size_t n = strlen(prefix);
	char *end = malloc(n + 1);

	if (!end)
		return NULL;
	memcpy(end, prefix, n + 1);
	while (n && (unsigned char)end[n - 1] == 0xff)
		n--;
	if (n)
		end[n - 1]++;
	else
		end[0] = '\0';
	*len = n ? n : 1;
	return end;
}

static void etcd_free(struct etcd *e);
static void etcd_release(struct xfer_deferred *d);
static void write_done(struct etcd *e);

int xfer_etcd_open_ttl(const char *conn, const struct xfer_store_env *env,
		       int ttl_s, struct xfer_store **out)
{
	struct event_base *base = env->base;
	struct etcd *e;
	int ret;

	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->base.ops = &xfer_etcd_ops;
	e->base.deferred = &e->deferred;
	e->env = *env;
	e->on_member_down = xfer_etcd_watch_member_down;
	e->on_write_done = write_done;
	TAILQ_INIT(&e->inflight);
	TAILQ_INIT(&e->waiting);
	TAILQ_INIT(&e->parked);
	TAILQ_INIT(&e->writes);
	e->lease_backoff_ms = e->watch_backoff_ms = ETCD_BACKOFF_MIN_MS;
	e->ttl_want_s = ttl_s;
	ret = add_members(e, conn);
	if (ret)
		goto err_free;
	ret = -ENOMEM;
	if (env->user || env->password)
		xfer_log(XFER_LOG_WARN, "etcd: credentials are not supported; "
			 "connecting without");
	e->prefix = strdup(env->prefix);
	if (!e->prefix)
		goto err_free;
	e->env.prefix = e->prefix;
	e->range_end = prefix_end(e->prefix, &e->range_end_len);
	e->wbuf = evbuffer_new();
	e->lease_ev = evtimer_new(base, xfer_etcd_lease_tick, e);
	e->watch_ev = evtimer_new(base, xfer_etcd_watch_start, e);
	e->park_ev = evtimer_new(base, xfer_etcd_unpark, e);
	if (!e->range_end || !e->wbuf || !e->lease_ev || !e->watch_ev ||
	    !e->park_ev ||
	    xfer_deferred_init(&e->deferred, base, &e->env, etcd_release))
		goto err_free;
	xfer_etcd_lease_grant(e);
	xfer_etcd_watch_start(-1, 0, e);
	*out = &e->base;
	return 0;

err_free:
	etcd_free(e);
	return ret;
}

static int etcd_open(const char *conn, const struct xfer_store_env *env,
		     struct xfer_store **out)
{
	return xfer_etcd_open_ttl(conn, env, 0, out);
}

/* Send write @p op (a put with the lease). */
static void write_start(struct etcd_op *op)
{
	int ret;

	if (op->kind == OP_PUT) {
		xfer_etcd_put_start(op);
		return;
	}
	ret = xfer_etcd_op_send(op);
	if (ret)
		xfer_etcd_finish(op, ret);
}

/* The write in flight is finished: the next one goes. */
static void write_done(struct etcd *e)
{
	struct etcd_op *op = TAILQ_FIRST(&e->writes);

	e->writing = op;
	if (op) {
		xfer_etcd_op_move(op, NULL);
		write_start(op);
	}
}

static void call_start(struct xfer_store *s, enum etcd_op_kind kind,
		       const char *key, const char *value, size_t len,
		       xfer_store_cb cb, void *arg)
{
	struct etcd *e = container_of(s, struct etcd, base);
	struct etcd_op *op;
	int ret;

	op = xfer_etcd_op_new(e, kind, user_done, key, value, len);
	if (!op) {
		/* No way to call back without memory: the call is lost. */
		xfer_log(XFER_LOG_ERROR, "etcd %s: no memory for \"%s\"",
			 e->names, key);
		return;
	}
	op->cb = cb;
	op->arg = arg;
	if (kind == OP_GET) {
		e->stats.gets++;
		ret = xfer_etcd_op_send(op);
		if (ret)
			xfer_etcd_finish(op, ret);
	} else if (e->writing) {
		xfer_etcd_op_move(op, &e->writes);
	} else {
		e->writing = op;
		write_start(op);
	}
}

static void etcd_get(struct xfer_store *s, const char *key, xfer_store_cb cb,
		     void *arg)
{
	call_start(s, OP_GET, key, NULL, 0, cb, arg);
}

static void etcd_put(struct xfer_store *s, const char *key,
		     const char *value, size_t len, xfer_store_cb cb,
		     void *arg)
{
	call_start(s, OP_PUT, key, value, len, cb, arg);
}

static void etcd_del(struct xfer_store *s, const char *key, xfer_store_cb cb,
		     void *arg)
{
	call_start(s, OP_DEL, key, NULL, 0, cb, arg);
}

/* Frees what open got to build, too. */
static void etcd_free(struct etcd *e)
{
	struct etcd_op_q *qs[] = { &e->inflight, &e->waiting, &e->parked,
				   &e->writes };
	struct etcd_op *op;

	/* Freeing a connection drops its requests without calling back. */
	for (int i = 0; i < e->nmembers; i++) {
		if (e->members[i].kv)
			evhttp_connection_free(e->members[i].kv);
		if (e->members[i].w)
			evhttp_connection_free(e->members[i].w);
	}
	for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++)
		while ((op = TAILQ_FIRST(qs[i])))
			xfer_etcd_op_free(op);
	xfer_deferred_clear(&e->deferred);
	if (e->park_ev)
		event_free(e->park_ev);
	if (e->watch_ev)
		event_free(e->watch_ev);
	if (e->lease_ev)
		event_free(e->lease_ev);
	if (e->wbuf)
		evbuffer_free(e->wbuf);
	free(e->range_end);
	free(e->prefix);
	free(e);
}

static void etcd_release(struct xfer_deferred *d)
{
	etcd_free(container_of(d, struct etcd, deferred));
}

/* From a callback of ours the store is freed when it returns. */
static void etcd_close(struct xfer_store *s)
{
	xfer_deferred_release(&container_of(s, struct etcd, base)->deferred);
}

const struct xfer_store_ops xfer_etcd_ops = {
	.name = "etcd",
	.flags = XFER_STORE_KEEPS,
	.accepts = etcd_accepts,
	.open = etcd_open,
	.get = etcd_get,
	.put = etcd_put,
	.del = etcd_del,
	.close = etcd_close,
};
