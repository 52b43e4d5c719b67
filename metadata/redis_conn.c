/*
 * The redis backend's connections, hiredis async contexts on the control
 * reactor: to the server, the command connection (AUTH, ROLE, SELECT) and
 * the subscriber (AUTH, ROLE, CONFIG GET/SET notify-keyspace-events,
 * PSUBSCRIBE); with Sentinel, the link to one sentinel (SENTINEL
 * get-master-addr-by-name, SUBSCRIBE +switch-master). ROLE is asked only
 * with Sentinel: a server that is no longer the master is left.
 *
 * Each runs its handshake one step at a time, drops itself when an answer
 * takes longer than STALL_MS, and retries after a growing backoff when it
 * is down. The store is up when both server connections are. What the
 * layers above must hear goes through c->cbs: up, down, messages, and
 * the master the link was told of.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <event2/event.h>
#include <hiredis/adapters/libevent.h>

#include "metadata/redis_internal.h"
#include "metadata/resolve_internal.h"
#include "util/log_internal.h"

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000
/* hiredis 0.14 has no async timeouts: a connect, handshake step or command
 * that gets no answer for this long drops the connection. */
#define STALL_MS 5000
/* What the watch needs in notify-keyspace-events besides K (keyspace
 * channel): g (DEL ...), $ (SET), x (expired), e (evicted). A has them. */
#define EVENT_FLAGS "g$xe"

static const struct timeval stall_tv = { STALL_MS / 1000,
					  STALL_MS % 1000 * 1000 };

static void hello_next(struct redis_conn *c, enum redis_step from);

static void stall_arm(struct redis_conn *c)
{
	if (c->busy)
		evtimer_add(c->timer, &stall_tv);
	else
		evtimer_del(c->timer);
}

/* @p c is down (its context gone or going): fail what waits on it and
 * retry after the backoff. */
static void conn_lost(struct redis_conn *c, int err, const char *why)
{
	struct redis_store *s = c->s;
	struct timeval tv = { c->backoff_ms / 1000,
			      c->backoff_ms % 1000 * 1000 };

	c->ac = NULL;
	c->step = ST_DOWN;
	c->busy = 0;
	if (s->ever_up && c->kind != RC_SENTINEL)
		s->lost = true;
	if (!c->warned) {
		xfer_log(XFER_LOG_WARN, "redis %s:%d: %s connection: %s; retrying",
			 c->addr->host, c->addr->port, c->name, why);
		c->warned = true;
	}
	c->cbs->down(c, err);
	evtimer_add(c->timer, &tv);
	c->backoff_ms *= 2;
	if (c->backoff_ms > BACKOFF_MAX_MS)
		c->backoff_ms = BACKOFF_MAX_MS;
}

/* Drop a live connection from our side. Inside a hiredis reply callback
 * hiredis frees it once the callback returns; its pending callbacks then
 * run with NULL replies and see it is no longer c->ac. */
static void conn_drop(struct redis_conn *c, int err, const char *why)
{
	redisAsyncContext *ac = c->ac;

	c->drop_err = err;
	conn_lost(c, err, why);
	redisAsyncFree(ac);
}

/* Send a command on @p c, counting the answer for the stall watchdog. A
 * command hiredis refuses (out of memory) is left to that watchdog too:
 * dropping here could free the context under hiredis's connect callback. */
int xfer_redis_conn_send(struct redis_conn *c, redisCallbackFn *fn,
			 void *priv, const char *fmt, ...)
{
	va_list ap;
	int ret;

	va_start(ap, fmt);
	ret = redisvAsyncCommand(c->ac, fn, priv, fmt, ap);
	va_end(ap);
	c->busy++;
	stall_arm(c);
	return ret == REDIS_OK ? 0 : -ENOMEM;
}

void xfer_redis_conn_answered(struct redis_conn *c)
{
	c->busy--;
	stall_arm(c);
}

static void store_up(struct redis_store *s)
{
	if (s->cmd.step != ST_UP || s->sub.step != ST_UP)
		return;
	if (s->lost) {
		/* Changes may have been missed; a restarted server, or a new
		 * master, may not have the engine's keys. */
		xfer_deferred_resync(&s->deferred);
		xfer_deferred_reconnected(&s->deferred);
	}
	s->lost = false;
	s->ever_up = true;
}

static void conn_up(struct redis_conn *c)
{
	c->step = ST_UP;
	c->backoff_ms = BACKOFF_MIN_MS;
	stall_arm(c);
	if (c->warned)
		xfer_log(XFER_LOG_INFO, "redis %s:%d: %s connection up",
			 c->addr->host, c->addr->port, c->name);
	c->warned = false;
	c->cbs->up(c);
	if (c->kind != RC_SENTINEL)
		store_up(c->s);
}

/* Note what notify-keyspace-events lacks for the watch, from its value
 * @p cur; s->events stays "" when nothing is missing. */
static void config_merge(struct redis_store *s, const char *cur, size_t len)
{
	char want[sizeof(s->events)];
	size_t n;

	s->events[0] = '\0';
	if (len > sizeof(want) - 6 || memchr(cur, '\0', len))
		return;
	memcpy(want, cur, len);
	n = len;
	if (!memchr(cur, 'K', len))
		want[n++] = 'K';
	for (const char *f = EVENT_FLAGS; *f && !memchr(cur, 'A', len); f++)
		if (!memchr(cur, *f, len))
			want[n++] = *f;
	want[n] = '\0';
	if (n > len)
		memcpy(s->events, want, n + 1);
}

static void config_warn(struct redis_store *s, const char *why)
{
	if (s->config_warned)
		return;
	xfer_log(XFER_LOG_WARN,
		 "redis %s:%d: cannot set notify-keyspace-events (%s): it must "
		 "include K, g, $, x and e (or KA) for the watch to see changes",
		 s->server.host, s->server.port, why);
	s->config_warned = true;
}


/* Every reply of a handshake, and the subscriber's messages. Steps go one
 * at a time: with hiredis 0.14 an error reply to PSUBSCRIBE comes to the
 * callback of the command before it, so each reply is read by c->step. */
static void hello_reply(redisAsyncContext *ac, void *r, void *priv)
{
	struct redis_conn *c = ac->data;
	struct redis_store *s = c->s;
	redisReply *reply = r;
	bool error;

	(void)priv;
	if (!reply || c->ac != ac)
		return;
	if (c->step == ST_UP) {
		c->cbs->message(c, reply);
		return;
	}
	xfer_redis_conn_answered(c);
	error = reply->type == REDIS_REPLY_ERROR;
	switch (c->step) {
	case ST_AUTH:
	case ST_SELECT:
		if (error) {
			conn_drop(c, c->step == ST_AUTH ? -EACCES : -EINVAL,
				  reply->str);
			return;
		}
		break;
	case ST_ROLE:
		if (reply->type != REDIS_REPLY_ARRAY || !reply->elements ||
		    reply->element[0]->type != REDIS_REPLY_STRING ||
		    strcmp(reply->element[0]->str, "master")) {
			conn_drop(c, -ECONNREFUSED, "not the master");
			return;
		}
		break;
	case ST_ASK:
		if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
		    reply->element[0]->type != REDIS_REPLY_STRING ||
		    reply->element[1]->type != REDIS_REPLY_STRING) {
			conn_drop(c, -ENOENT, error ? reply->str :
				  "it does not know the master");
			return;
		}
		c->cbs->master(c, reply->element[0]->str,
			       atoi(reply->element[1]->str));
		if (c->ac != ac)
			return;    /* dropped meanwhile */
		break;
	case ST_CONFIG_GET:
		s->events[0] = '\0';
		if (error)
			config_warn(s, reply->str);
		else if (reply->type == REDIS_REPLY_ARRAY &&
			 reply->elements == 2 &&
			 reply->element[1]->type == REDIS_REPLY_STRING)
			config_merge(s, reply->element[1]->str,
				     reply->element[1]->len);
		break;
	case ST_CONFIG_SET:
		if (error)
			config_warn(s, reply->str);
		break;
	case ST_SUBSCRIBE:
		if (reply->type == REDIS_REPLY_ARRAY)
			conn_up(c);
		else
			conn_drop(c, -EIO, error ? reply->str :
				  "unexpected SUBSCRIBE reply");
		return;
	default:
		return;
	}
	hello_next(c, c->step + 1);
}

/* Does step @p st apply to @p c? */
static bool step_applies(struct redis_conn *c, enum redis_step st)
{
	struct redis_store *s = c->s;
	bool server = c->kind != RC_SENTINEL, sub = c->kind == RC_SUB;

	switch (st) {
	case ST_AUTH:
		return server && s->env.password;
	case ST_ROLE:
		return server && s->master_name;
	case ST_SELECT:
		return c->kind == RC_CMD && s->db;
	case ST_CONFIG_GET:
		return sub;
	case ST_CONFIG_SET:
		return sub && s->events[0];
	case ST_ASK:
		return !server;
	case ST_SUBSCRIBE:
		return c->kind != RC_CMD;
	default:
		return false;
	}
}

/* Send the first handshake step from @p from that applies to @p c. */
static void hello_next(struct redis_conn *c, enum redis_step from)
{
	struct redis_store *s = c->s;
	const char *pw = s->env.password, *user = s->env.user;

	for (c->step = from; c->step < ST_UP; c->step++)
		if (step_applies(c, c->step))
			break;
	switch (c->step) {
	case ST_AUTH:
		if (user)
			xfer_redis_conn_send(c, hello_reply, NULL, "AUTH %s %s",
					     user, pw);
		else
			xfer_redis_conn_send(c, hello_reply, NULL, "AUTH %s",
					     pw);
		break;
	case ST_ROLE:
		xfer_redis_conn_send(c, hello_reply, NULL, "ROLE");
		break;
	case ST_SELECT:
		xfer_redis_conn_send(c, hello_reply, NULL, "SELECT %d", s->db);
		break;
	case ST_CONFIG_GET:
		xfer_redis_conn_send(c, hello_reply, NULL, "CONFIG GET "
				     "notify-keyspace-events");
		break;
	case ST_CONFIG_SET:
		xfer_redis_conn_send(c, hello_reply, NULL, "CONFIG SET "
				     "notify-keyspace-events %s", s->events);
		break;
	case ST_ASK:
		xfer_redis_conn_send(c, hello_reply, NULL, "SENTINEL "
				     "get-master-addr-by-name %s",
				     s->master_name);
		break;
	case ST_SUBSCRIBE:
		if (c->kind == RC_SUB)
			xfer_redis_conn_send(c, hello_reply, NULL,
					     "PSUBSCRIBE %s", s->pattern);
		else
			xfer_redis_conn_send(c, hello_reply, NULL,
					     "SUBSCRIBE +switch-master");
		break;
	default:
		conn_up(c);
		break;
	}
}

/* hiredis 0.14 frees the context itself after a failed connect, and calls
 * this outside its callback guard: nothing here may free it. */
static void on_connect(const redisAsyncContext *ac, int status)
{
	struct redis_conn *c = ac->data;

	if (status != REDIS_OK) {
		conn_lost(c, -ECONNREFUSED, ac->c.errstr);
		return;
	}
	c->busy--;
	hello_next(c, ST_AUTH);
}

/* hiredis frees the context after this; requests in flight have had their
 * NULL replies already. Ignored for a context we dropped ourselves. */
static void on_disconnect(const redisAsyncContext *ac, int status)
{
	struct redis_conn *c = ac->data;

	(void)status;
	if (c->ac == ac)
		conn_lost(c, -ECONNRESET,
			  ac->err ? ac->errstr : "connection closed");
}

void xfer_redis_conn_start(struct redis_conn *c)
{
	struct redis_store *s = c->s;
	redisAsyncContext *ac;

	evtimer_del(c->timer);
	ac = redisAsyncConnect(c->addr->ip, c->addr->port);
	if (!ac) {
		conn_lost(c, -ENOMEM, "out of memory");
		return;
	}
	if (ac->err) {
		conn_lost(c, -ECONNREFUSED, ac->errstr);
		redisAsyncFree(ac);
		return;
	}
	ac->data = c;
	redisLibeventAttach(ac, s->env.base);
	redisAsyncSetConnectCallback(ac, on_connect);
	redisAsyncSetDisconnectCallback(ac, on_disconnect);
	/* A server host that vanishes without a reset is noticed in time
	 * even on the subscriber, which awaits no answer. */
	redisEnableKeepAlive(&ac->c);
	c->ac = ac;
	c->step = ST_CONNECTING;
	c->busy = 1;
	c->drop_err = -ECONNRESET;
	stall_arm(c);
}

/* The retry timer while down, else the stall watchdog. */
static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct redis_conn *c = arg;
	char why[64];

	(void)fd;
	(void)what;
	if (!c->ac) {
		xfer_redis_conn_start(c);
		return;
	}
	snprintf(why, sizeof(why), "no answer in %d ms", STALL_MS);
	conn_drop(c, -ETIMEDOUT, why);
}

void xfer_redis_conn_restart(struct redis_conn *c)
{
	redisAsyncContext *ac = c->ac;

	if (c->s->ever_up && c->kind != RC_SENTINEL)
		c->s->lost = true;
	/* Pending callbacks and on_disconnect see c->ac != ac. */
	c->ac = NULL;
	c->step = ST_DOWN;
	c->busy = 0;
	c->drop_err = -ECONNRESET;
	c->backoff_ms = BACKOFF_MIN_MS;
	if (ac)
		redisAsyncFree(ac);
	xfer_redis_conn_start(c);
}

void xfer_redis_conn_free(struct redis_conn *c)
{
	redisAsyncContext *ac = c->ac;

	/* Pending callbacks and on_disconnect see c->ac != ac, or closing. */
	c->ac = NULL;
	if (ac)
		redisAsyncFree(ac);
	if (c->timer)
		event_free(c->timer);
}


int xfer_redis_addr_resolve(struct redis_addr *a, const char *conn)
{
	int ret = xfer_store_resolve(a->host, a->ip, sizeof(a->ip));

	if (ret) {
		xfer_log(XFER_LOG_ERROR, "redis: %s: cannot resolve \"%s\": %s",
			 conn, a->host, gai_strerror(ret));
		return -EINVAL;
	}
	return 0;
}

int xfer_redis_conn_init(struct redis_store *s, struct redis_conn *c,
			 const char *name, enum redis_conn_kind kind,
			 struct redis_addr *addr,
			 const struct redis_conn_cbs *cbs)
{
	c->s = s;
	c->cbs = cbs;
	c->name = name;
	c->kind = kind;
	c->addr = addr;
	c->backoff_ms = BACKOFF_MIN_MS;
	c->timer = evtimer_new(s->env.base, timer_cb, c);
	return c->timer ? 0 : -ENOMEM;
}
