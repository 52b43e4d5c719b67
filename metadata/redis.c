/*
 * Redis metadata (PROTOCOL.md §2): GET/SET/DEL on one connection, keyspace
 * notifications for the prefix on a second, both hiredis async connections
 * on the control reactor (redis_conn.c), to the server the connection
 * string names or, with "redis+sentinel://", to the master the sentinels
 * name (redis_sentinel.c). This file: the ops, the requests and the
 * watch's messages; the connections tell it their state through
 * conn_cbs.
 *
 * User callbacks (results, changed, reconnected) never run inside hiredis:
 * they are queued on the deferred queue and delivered from one zero-delay
 * event, so a user may call anything from them, close included, and a
 * result is never delivered inside the call that asked for it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "util/log_internal.h"
#include "metadata/backends_internal.h"
#include "metadata/redis_internal.h"
#include "metadata/resolve_internal.h"

#define DEFAULT_PORT 6379

/* ---- requests ---- */

static void note_free(struct redis_note *n)
{
	if (n->kind == N_GET)
		free(n->value);
	free(n);
}

static void note_deliver(struct xfer_deferred_item *it, bool drop)
{
	struct redis_note *n = container_of(it, struct redis_note, done);
	bool value = n->kind == N_GET && !n->err;

	if (!drop)
		n->cb(n->err, value ? n->value : NULL, value ? n->len : 0,
		      n->arg);
	note_free(n);
}

static void finish(struct redis_store *s, struct redis_note *n, int err)
{
	n->err = err;
	xfer_deferred_push(&s->deferred, &n->done, note_deliver);
}

static int reply_err(struct redis_store *s, struct redis_note *n,
		     const redisReply *r)
{
	static const char *const cmds[] = { "GET", "SET", "DEL" };

	if (r->type == REDIS_REPLY_ERROR) {
		xfer_log(XFER_LOG_WARN, "redis %s:%d: %s %s: %s",
			 s->server.host, s->server.port, cmds[n->kind], n->key,
			 r->str);
		return -EIO;
	}
	switch (n->kind) {
	case N_GET:
		if (r->type == REDIS_REPLY_NIL)
			return -ENOENT;
		if (r->type != REDIS_REPLY_STRING)
			return -EIO;
		n->value = malloc(r->len ? r->len : 1);
		if (!n->value)
			return -ENOMEM;
		memcpy(n->value, r->str, r->len);
		n->len = r->len;
		return 0;
	case N_PUT:
		return r->type == REDIS_REPLY_STATUS ? 0 : -EIO;
	default:
		return r->type == REDIS_REPLY_INTEGER ? 0 : -EIO;
	}
}

static void req_reply(redisAsyncContext *ac, void *r, void *priv)
{
	struct redis_conn *c = ac->data;
	struct redis_store *s = c->s;
	struct redis_note *n = priv;

	if (s->closing) {
		note_free(n);
		return;
	}
	if (r) {
		xfer_redis_conn_answered(c);
		finish(s, n, reply_err(s, n, r));
	} else {
		finish(s, n, c->drop_err);
	}
}

static void req_send(struct redis_store *s, struct redis_note *n)
{
	struct redis_conn *c = &s->cmd;
	int ret;

	switch (n->kind) {
	case N_GET:
		ret = xfer_redis_conn_send(c, req_reply, n, "GET %s", n->key);
		break;
	case N_PUT:
		ret = xfer_redis_conn_send(c, req_reply, n, "SET %s %b",
					   n->key, n->value, n->len);
		break;
	default:
		ret = xfer_redis_conn_send(c, req_reply, n, "DEL %s", n->key);
		break;
	}
	if (ret) {
		/* Not sent: nothing to wait for. */
		xfer_redis_conn_answered(c);
		finish(s, n, ret);
	}
}

/* ---- what the connections tell (conn_cbs) ---- */

/* The next request waiting for the command connection, out of the queue;
 * NULL when none waits, or when @p c is the subscriber. */
static struct redis_note *next_waiting(struct redis_conn *c)
{
	struct redis_store *s = c->s;
	struct redis_note *n = TAILQ_FIRST(&s->waiting);

	if (c != &s->cmd || !n)
		return NULL;
	TAILQ_REMOVE(&s->waiting, n, link);
	return n;
}

/* The command connection is up: send what waits for it. */
static void conn_up(struct redis_conn *c)
{
	struct redis_note *n;

	while ((n = next_waiting(c)))
		req_send(c->s, n);
}

/* A connection is down: what waits for the command connection fails;
 * with Sentinel, the next sentinel is asked, or (a server connection)
 * the sentinels again. */
static void conn_down(struct redis_conn *c, int err)
{
	struct redis_store *s = c->s;
	struct redis_note *n;

	if (c->kind == RC_SENTINEL) {
		xfer_redis_sentinel_down(s, err);
		return;
	}
	while ((n = next_waiting(c)))
		finish(s, n, err);
	if (s->master_name)
		xfer_redis_sentinel_recheck(s);
}

/* The watch: a pmessage on the subscriber, whose key is the channel after
 * s->chan. */
static void watch_message(struct redis_conn *c, const redisReply *r)
{
	struct redis_store *s = c->s;
	const redisReply *ch;
	const char *key;
	size_t len;

	if (r->type != REDIS_REPLY_ARRAY || r->elements != 4 ||
	    r->element[0]->type != REDIS_REPLY_STRING ||
	    strcasecmp(r->element[0]->str, "pmessage") ||
	    r->element[2]->type != REDIS_REPLY_STRING)
		return;
	ch = r->element[2];
	if (ch->len < s->chan_len + s->prefix_len ||
	    memcmp(ch->str, s->chan, s->chan_len))
		return;
	key = ch->str + s->chan_len;
	len = ch->len - s->chan_len;
	if (memcmp(key, s->env.prefix, s->prefix_len) ||
	    memchr(key, '\0', len))
		return;
	xfer_deferred_changed(&s->deferred, key, len);
}

static void conn_message(struct redis_conn *c, const redisReply *r)
{
	if (c->kind == RC_SENTINEL)
		xfer_redis_sentinel_message(c->s, r);
	else
		watch_message(c, r);
}

static void conn_master(struct redis_conn *c, const char *ip, int port)
{
	xfer_redis_sentinel_master(c->s, ip, port);
}

static const struct redis_conn_cbs conn_cbs = {
	.up = conn_up,
	.down = conn_down,
	.message = conn_message,
	.master = conn_master,
};

/* ---- the ops ---- */

static void req_start(struct xfer_store *st, enum redis_note_kind kind,
		      const char *key, const char *value, size_t len,
		      xfer_store_cb cb, void *arg)
{
	struct redis_store *s = (struct redis_store *)st;
	size_t klen = strlen(key);
	struct redis_note *n;

	n = calloc(1, sizeof(*n) + klen + 1 + len);
	if (!n) {
		/* Nothing to queue the failure on: better now than never. */
		cb(-ENOMEM, NULL, 0, arg);
		return;
	}
	n->kind = kind;
	n->cb = cb;
	n->arg = arg;
	memcpy(n->key, key, klen + 1);
	if (kind == N_PUT) {
		n->value = n->key + klen + 1;
		memcpy(n->value, value, len);
		n->len = len;
	}
	switch (s->cmd.step) {
	case ST_UP:
		req_send(s, n);
		break;
	case ST_DOWN:
		finish(s, n, -ECONNREFUSED);
		break;
	default:
		TAILQ_INSERT_TAIL(&s->waiting, n, link);
		break;
	}
}

static void redis_get(struct xfer_store *st, const char *key,
		      xfer_store_cb cb, void *arg)
{
	req_start(st, N_GET, key, NULL, 0, cb, arg);
}

static void redis_put(struct xfer_store *st, const char *key,
		      const char *value, size_t len, xfer_store_cb cb,
		      void *arg)
{
	req_start(st, N_PUT, key, value, len, cb, arg);
}

static void redis_del(struct xfer_store *st, const char *key,
		      xfer_store_cb cb, void *arg)
{
	req_start(st, N_DEL, key, NULL, 0, cb, arg);
}

/* ---- open and close ---- */

static int redis_accepts(const char *conn)
{
	return !strncasecmp(conn, "redis://", 8) ||
	       xfer_redis_sentinel_conn(conn);
}

/* "redis://host[:port][/db]"; host may be "[v6 address]". */
static int parse_conn(struct redis_store *s, const char *conn)
{
	const char *p;
	uint16_t port;
	char *end;
	long db;

	p = xfer_store_parse_addr(conn + 8, "/", s->server.host,
				  sizeof(s->server.host), &port, DEFAULT_PORT);
	if (!p) {
		xfer_log(XFER_LOG_ERROR, "redis: %s: bad host or port (want "
			 "redis://host[:port][/db])", conn);
		return -EINVAL;
	}
	s->server.port = port;
	if (*p == '/' && p[1]) {
		db = strtol(p + 1, &end, 10);
		if (p[1] < '0' || p[1] > '9' || *end || db > INT_MAX) {
			xfer_log(XFER_LOG_ERROR, "redis: %s: bad db index (a "
				 "number from 0)", conn);
			return -EINVAL;
		}
		s->db = (int)db;
	}
	return xfer_redis_addr_resolve(&s->server, conn);
}

/* "prefix" with what a glob pattern would read as special escaped. */
static char *glob_escape(const char *prefix)
{
	char *out = malloc(2 * strlen(prefix) + 1), *p = out;

	if (!out)
		return NULL;
	for (; *prefix; prefix++) {
		if (strchr("*?[]\\", *prefix))
			*p++ = '\\';
		*p++ = *prefix;
	}
	*p = '\0';
	return out;
}

/* Frees what open got to build, too. */
static void store_free(struct redis_store *s)
{
	struct redis_note *n;

	s->closing = true;
	xfer_redis_conn_free(&s->cmd);
	xfer_redis_conn_free(&s->sub);
	xfer_redis_conn_free(&s->link);
	while ((n = TAILQ_FIRST(&s->waiting))) {
		TAILQ_REMOVE(&s->waiting, n, link);
		note_free(n);
	}
	xfer_deferred_clear(&s->deferred);
	free(s->master_name);
	free(s->pattern);
	free(s->chan);
	free((char *)s->env.prefix);
	free((char *)s->env.user);
	free((char *)s->env.password);
	free(s);
}

static void store_release(struct xfer_deferred *d)
{
	store_free(container_of(d, struct redis_store, deferred));
}

static int redis_open(const char *conn, const struct xfer_store_env *env,
		      struct xfer_store **out)
{
	struct redis_store *s;
	char *escaped;
	int ret;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->pub.ops = &xfer_redis_ops;
	s->pub.deferred = &s->deferred;
	TAILQ_INIT(&s->waiting);
	s->env = *env;
	s->env.prefix = s->env.user = s->env.password = NULL;
	if (xfer_redis_sentinel_conn(conn))
		ret = xfer_redis_sentinel_parse(s, conn);
	else
		ret = parse_conn(s, conn);
	if (ret)
		goto err_free;
	ret = -ENOMEM;
	s->env.prefix = strdup(env->prefix);
	s->env.user = env->user ? strdup(env->user) : NULL;
	s->env.password = env->password ? strdup(env->password) : NULL;
	if (!s->env.prefix || (env->user && !s->env.user) ||
	    (env->password && !s->env.password))
		goto err_free;
	s->prefix_len = strlen(s->env.prefix);
	escaped = glob_escape(s->env.prefix);
	if (!escaped)
		goto err_free;
	/* Keyspace channels name the db; pub/sub itself ignores SELECT. */
	if (asprintf(&s->chan, "__keyspace@%d__:", s->db) < 0)
		s->chan = NULL;
	if (asprintf(&s->pattern, "__keyspace@%d__:%s*", s->db, escaped) < 0)
		s->pattern = NULL;
	free(escaped);
	if (!s->chan || !s->pattern)
		goto err_free;
	s->chan_len = strlen(s->chan);
	if (xfer_deferred_init(&s->deferred, env->base, &s->env,
			       store_release) ||
	    xfer_redis_conn_init(s, &s->cmd, "command", RC_CMD, &s->server,
				 &conn_cbs) ||
	    xfer_redis_conn_init(s, &s->sub, "subscriber", RC_SUB, &s->server,
				 &conn_cbs) ||
	    xfer_redis_conn_init(s, &s->link, "sentinel", RC_SENTINEL,
				 &s->sentinels[0], &conn_cbs))
		goto err_free;
	if (s->master_name) {
		xfer_redis_sentinel_start(s);
	} else {
		xfer_redis_conn_start(&s->cmd);
		xfer_redis_conn_start(&s->sub);
	}
	*out = &s->pub;
	return 0;
err_free:
	store_free(s);
	return ret;
}

/* Inside one of our callbacks the store is freed when it returns. */
static void redis_close(struct xfer_store *st)
{
	xfer_deferred_release(&((struct redis_store *)st)->deferred);
}

const struct xfer_store_ops xfer_redis_ops = {
	.name = "redis",
	.flags = XFER_STORE_KEEPS,
	.accepts = redis_accepts,
	.open = redis_open,
	.get = redis_get,
	.put = redis_put,
	.del = redis_del,
	.close = redis_close,
};
