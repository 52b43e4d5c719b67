/*
 * Redis metadata (PROTOCOL.md §2): GET/SET/DEL on one connection, keyspace
 * notifications for the prefix on a second, both hiredis async connections
 * on the control reactor.
 *
 * User callbacks (results, changed, reconnected) never run inside hiredis:
 * they are queued as notes and delivered from one zero-delay event, so a
 * user may call anything from them, close included, and a result is never
 * delivered inside the call that asked for it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <arpa/inet.h>

#include <event2/event.h>
#include <hiredis/adapters/libevent.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include "core/log_internal.h"
#include "metadata/store.h"

#define DEFAULT_PORT 6379
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000
/* hiredis 0.14 has no async timeouts: a connect, handshake step or command
 * that gets no answer for this long drops the connection. */
#define STALL_MS 5000
/* What the watch needs in notify-keyspace-events besides K (keyspace
 * channel): g (DEL ...), $ (SET), x (expired), e (evicted). A has them. */
#define EVENT_FLAGS "g$xe"

/* A connection's handshake, in order; steps that do not apply are skipped. */
enum step {
	ST_DOWN,
	ST_CONNECTING,
	ST_AUTH,
	ST_SELECT,       /* command connection, db > 0 */
	ST_CONFIG_GET,   /* subscriber: notify-keyspace-events */
	ST_CONFIG_SET,   /* subscriber, when flags are missing */
	ST_SUBSCRIBE,    /* subscriber */
	ST_UP,
};

struct rstore;

struct conn {
	struct rstore *s;
	const char *name;        /* for the log */
	bool is_sub;
	redisAsyncContext *ac;   /* NULL while down */
	enum step step;
	int busy;                /* answers awaited (the connect counts) */
	int drop_err;            /* what requests in flight get on a drop */
	int backoff_ms;
	struct event *timer;     /* down: retry; else: stall watchdog */
};

enum note_kind { N_GET, N_PUT, N_DEL, N_CHANGED };

/* A request (from get/put/del to its callback) or a changed key. */
struct note {
	TAILQ_ENTRY(note) link;
	enum note_kind kind;
	xfer_store_cb cb;
	void *arg;
	int err;
	char *value;             /* get: the reply; put: into key[] */
	size_t len;
	char key[];              /* then a put's value */
};

TAILQ_HEAD(note_list, note);

struct rstore {
	struct xfer_store pub;
	struct xfer_store_env env;     /* strings are our copies */
	char host[256];                /* as written, for the log */
	char ip[INET6_ADDRSTRLEN];     /* resolved once at open */
	int port, db;
	char *chan;                    /* "__keyspace@<db>__:" */
	size_t chan_len, prefix_len;
	char *pattern;                 /* chan + escaped prefix + "*" */
	char events[32];               /* CONFIG SET value, "" if none */
	struct conn cmd, sub;
	struct note_list waiting;      /* asked while the handshake runs */
	struct note_list ready;        /* for the next flush */
	struct event *flush;
	bool all_changed;              /* flush: changed(NULL) */
	bool reconnect_due;            /* flush: reconnected() */
	bool ever_up;                  /* both were up once */
	bool lost;                     /* one dropped since */
	bool warned;                   /* this outage is logged */
	bool config_warned;
	bool flushing, closing;
};

static const struct timeval stall_tv = { STALL_MS / 1000,
					  STALL_MS % 1000 * 1000 };

static void hello_next(struct conn *c, enum step from);
static void store_free(struct rstore *s);

/* ---- notes ---- */

static void note_free(struct note *n)
{
	if (n->kind == N_GET)
		free(n->value);
	free(n);
}

static void notes_free(struct note_list *l)
{
	struct note *n;

	while ((n = TAILQ_FIRST(l))) {
		TAILQ_REMOVE(l, n, link);
		note_free(n);
	}
}

static void ready_push(struct rstore *s, struct note *n)
{
	TAILQ_INSERT_TAIL(&s->ready, n, link);
	event_active(s->flush, EV_TIMEOUT, 0);
}

static void deliver(struct rstore *s, struct note *n)
{
	bool value = n->kind == N_GET && !n->err;

	if (n->kind != N_CHANGED)
		n->cb(n->err, value ? n->value : NULL, value ? n->len : 0,
		      n->arg);
	else if (s->env.changed)
		s->env.changed(n->key, s->env.arg);
}

/* Deliver what is ready now; what the callbacks add waits for the next
 * round, so a callback that always asks again cannot starve the reactor. */
static void flush_cb(evutil_socket_t fd, short what, void *arg)
{
	struct rstore *s = arg;
	struct note_list batch = TAILQ_HEAD_INITIALIZER(batch);
	struct note *n;

	(void)fd;
	(void)what;
	TAILQ_CONCAT(&batch, &s->ready, link);
	s->flushing = true;
	if (s->all_changed && s->env.changed) {
		s->all_changed = false;
		s->env.changed(NULL, s->env.arg);
	}
	if (!s->closing && s->reconnect_due && s->env.reconnected) {
		s->reconnect_due = false;
		s->env.reconnected(s->env.arg);
	}
	while (!s->closing && (n = TAILQ_FIRST(&batch))) {
		TAILQ_REMOVE(&batch, n, link);
		deliver(s, n);
		note_free(n);
	}
	s->flushing = false;
	notes_free(&batch);
	if (s->closing)
		store_free(s);
}

/* ---- connections ---- */

static void stall_arm(struct conn *c)
{
	if (c->busy)
		evtimer_add(c->timer, &stall_tv);
	else
		evtimer_del(c->timer);
}

static void fail_waiting(struct rstore *s, int err)
{
	struct note *n;

	while ((n = TAILQ_FIRST(&s->waiting))) {
		TAILQ_REMOVE(&s->waiting, n, link);
		n->err = err;
		ready_push(s, n);
	}
}

/* @p c is down (its context gone or going): fail what waits on it and
 * retry after the backoff. */
static void conn_lost(struct conn *c, int err, const char *why)
{
	struct rstore *s = c->s;
	struct timeval tv = { c->backoff_ms / 1000,
			      c->backoff_ms % 1000 * 1000 };

	c->ac = NULL;
	c->step = ST_DOWN;
	c->busy = 0;
	if (s->ever_up)
		s->lost = true;
	if (!s->warned) {
		xfer_log(XFER_LOG_WARN, "redis %s:%d: %s connection: %s; retrying",
			 s->host, s->port, c->name, why);
		s->warned = true;
	}
	if (c == &s->cmd)
		fail_waiting(s, err);
	evtimer_add(c->timer, &tv);
	c->backoff_ms *= 2;
	if (c->backoff_ms > BACKOFF_MAX_MS)
		c->backoff_ms = BACKOFF_MAX_MS;
}

/* Drop a live connection from our side. Inside a hiredis reply callback
 * hiredis frees it once the callback returns; its pending callbacks then
 * run with NULL replies and see it is no longer c->ac. */
static void conn_drop(struct conn *c, int err, const char *why)
{
	redisAsyncContext *ac = c->ac;

	c->drop_err = err;
	conn_lost(c, err, why);
	redisAsyncFree(ac);
}

/* Send a command on @p c, counting the answer for the stall watchdog. A
 * command hiredis refuses (out of memory) is left to that watchdog too:
 * dropping here could free the context under hiredis's connect callback. */
static int conn_send(struct conn *c, redisCallbackFn *fn, void *priv,
		     const char *fmt, ...)
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

static void req_reply(redisAsyncContext *ac, void *r, void *priv);

static void req_send(struct rstore *s, struct note *n)
{
	struct conn *c = &s->cmd;
	int ret;

	switch (n->kind) {
	case N_GET:
		ret = conn_send(c, req_reply, n, "GET %s", n->key);
		break;
	case N_PUT:
		ret = conn_send(c, req_reply, n, "SET %s %b", n->key, n->value,
				n->len);
		break;
	default:
		ret = conn_send(c, req_reply, n, "DEL %s", n->key);
		break;
	}
	if (ret) {
		c->busy--;   /* not sent: nothing to wait for */
		stall_arm(c);
		n->err = ret;
		ready_push(s, n);
	}
}

static void store_up(struct rstore *s)
{
	if (s->cmd.step != ST_UP || s->sub.step != ST_UP)
		return;
	if (s->lost) {
		/* Changes may have been missed; a restarted server may have
		 * lost the engine's keys. */
		s->all_changed = s->reconnect_due = true;
		event_active(s->flush, EV_TIMEOUT, 0);
	}
	if (s->warned)
		xfer_log(XFER_LOG_INFO, "redis %s:%d: connected", s->host,
			 s->port);
	s->warned = s->lost = false;
	s->ever_up = true;
}

static void conn_up(struct conn *c)
{
	struct rstore *s = c->s;
	struct note *n;

	c->step = ST_UP;
	c->backoff_ms = BACKOFF_MIN_MS;
	stall_arm(c);
	if (c == &s->cmd) {
		while ((n = TAILQ_FIRST(&s->waiting))) {
			TAILQ_REMOVE(&s->waiting, n, link);
			req_send(s, n);
		}
	}
	store_up(s);
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

/* Note what notify-keyspace-events lacks for the watch, from its value
 * @p cur; s->events stays "" when nothing is missing. */
static void config_merge(struct rstore *s, const char *cur, size_t len)
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

static void config_warn(struct rstore *s, const char *why)
{
	if (s->config_warned)
		return;
	xfer_log(XFER_LOG_WARN,
		 "redis %s:%d: cannot set notify-keyspace-events (%s): it must "
		 "include K, g, $, x and e (or KA) for the watch to see changes",
		 s->host, s->port, why);
	s->config_warned = true;
}

/* A pmessage on the subscriber: the key is the channel after s->chan. */
static void watch_message(struct rstore *s, const redisReply *r)
{
	const redisReply *ch;
	const char *key;
	struct note *n;
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
	if (memcmp(key, s->env.prefix, s->prefix_len) || memchr(key, '\0', len))
		return;
	n = calloc(1, sizeof(*n) + len + 1);
	if (!n) {
		s->all_changed = true;
		event_active(s->flush, EV_TIMEOUT, 0);
		return;
	}
	n->kind = N_CHANGED;
	memcpy(n->key, key, len);
	ready_push(s, n);
}

/* Every reply of a handshake, and the subscriber's messages. Steps go one
 * at a time: with hiredis 0.14 an error reply to PSUBSCRIBE comes to the
 * callback of the command before it, so each reply is read by c->step. */
static void hello_reply(redisAsyncContext *ac, void *r, void *priv)
{
	struct conn *c = ac->data;
	struct rstore *s = c->s;
	redisReply *reply = r;
	bool error;

	(void)priv;
	if (!reply || c->ac != ac)
		return;
	if (c->step == ST_UP) {
		watch_message(s, reply);
		return;
	}
	c->busy--;
	stall_arm(c);
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
				  "unexpected PSUBSCRIBE reply");
		return;
	default:
		return;
	}
	hello_next(c, c->step + 1);
}

/* Send the first handshake step from @p from that applies to @p c. */
static void hello_next(struct conn *c, enum step from)
{
	struct rstore *s = c->s;
	const char *pw = s->env.password, *user = s->env.user;

	for (c->step = from; c->step < ST_UP; c->step++) {
		switch (c->step) {
		case ST_AUTH:
			if (!pw)
				continue;
			if (user)
				conn_send(c, hello_reply, NULL, "AUTH %s %s",
					  user, pw);
			else
				conn_send(c, hello_reply, NULL, "AUTH %s", pw);
			return;
		case ST_SELECT:
			if (c->is_sub || !s->db)
				continue;
			conn_send(c, hello_reply, NULL, "SELECT %d", s->db);
			return;
		case ST_CONFIG_GET:
			if (!c->is_sub)
				continue;
			conn_send(c, hello_reply, NULL,
				  "CONFIG GET notify-keyspace-events");
			return;
		case ST_CONFIG_SET:
			if (!c->is_sub || !s->events[0])
				continue;
			conn_send(c, hello_reply, NULL,
				  "CONFIG SET notify-keyspace-events %s",
				  s->events);
			return;
		case ST_SUBSCRIBE:
			if (!c->is_sub)
				continue;
			conn_send(c, hello_reply, NULL, "PSUBSCRIBE %s",
				  s->pattern);
			return;
		default:
			continue;
		}
	}
	conn_up(c);
}

/* hiredis 0.14 frees the context itself after a failed connect, and calls
 * this outside its callback guard: nothing here may free it. */
static void on_connect(const redisAsyncContext *ac, int status)
{
	struct conn *c = ac->data;

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
	struct conn *c = ac->data;

	(void)status;
	if (c->ac == ac)
		conn_lost(c, -ECONNRESET,
			  ac->err ? ac->errstr : "connection closed");
}

static void conn_start(struct conn *c)
{
	struct rstore *s = c->s;
	redisAsyncContext *ac;

	ac = redisAsyncConnect(s->ip, s->port);
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
	struct conn *c = arg;
	char why[64];

	(void)fd;
	(void)what;
	if (!c->ac) {
		conn_start(c);
		return;
	}
	snprintf(why, sizeof(why), "no answer in %d ms", STALL_MS);
	conn_drop(c, -ETIMEDOUT, why);
}

static void conn_free(struct conn *c)
{
	redisAsyncContext *ac = c->ac;

	/* Pending callbacks and on_disconnect see c->ac != ac, or closing. */
	c->ac = NULL;
	if (ac)
		redisAsyncFree(ac);
	if (c->timer)
		event_free(c->timer);
}

/* ---- requests ---- */

static int reply_err(struct rstore *s, struct note *n, const redisReply *r)
{
	static const char *const cmds[] = { "GET", "SET", "DEL" };

	if (r->type == REDIS_REPLY_ERROR) {
		xfer_log(XFER_LOG_WARN, "redis %s:%d: %s %s: %s", s->host,
			 s->port, cmds[n->kind], n->key, r->str);
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
	struct conn *c = ac->data;
	struct rstore *s = c->s;
	struct note *n = priv;

	if (s->closing) {
		note_free(n);
		return;
	}
	if (r) {
		c->busy--;
		stall_arm(c);
		n->err = reply_err(s, n, r);
	} else {
		n->err = c->drop_err;
	}
	ready_push(s, n);
}

static void req_start(struct xfer_store *st, enum note_kind kind,
		      const char *key, const char *value, size_t len,
		      xfer_store_cb cb, void *arg)
{
	struct rstore *s = (struct rstore *)st;
	size_t klen = strlen(key);
	struct note *n;

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
		n->err = -ECONNREFUSED;
		ready_push(s, n);
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
	return !strncasecmp(conn, "redis://", 8);
}

static int parse_uint(const char *p, const char **end, long max, long *out)
{
	long v = 0;

	if (*p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		v = v * 10 + (*p - '0');
		if (v > max)
			return -EINVAL;
	}
	*end = p;
	*out = v;
	return 0;
}

/* "redis://host[:port][/db]"; host may be "[v6 address]". */
static int parse_conn(struct rstore *s, const char *conn)
{
	const char *p = conn + 8, *end;
	size_t len;
	long v;

	if (*p == '[') {
		end = strchr(++p, ']');
		if (!end)
			goto bad_host;
		len = (size_t)(end++ - p);
	} else {
		len = strcspn(p, ":/");
		end = p + len;
	}
	if (!len || len >= sizeof(s->host) || memchr(p, '@', len) ||
	    memchr(p, '?', len))
		goto bad_host;
	memcpy(s->host, p, len);
	s->host[len] = '\0';
	p = end;
	s->port = DEFAULT_PORT;
	if (*p == ':') {
		if (parse_uint(p + 1, &p, 65535, &v) || !v) {
			xfer_log(XFER_LOG_ERROR, "redis: %s: bad port "
				 "(1-65535)", conn);
			return -EINVAL;
		}
		s->port = (int)v;
	}
	if (*p == '/' && p[1]) {
		if (parse_uint(p + 1, &p, INT_MAX, &v)) {
			xfer_log(XFER_LOG_ERROR, "redis: %s: bad db index "
				 "(a number from 0)", conn);
			return -EINVAL;
		}
		s->db = (int)v;
	} else if (*p == '/') {
		p++;
	}
	if (*p) {
		xfer_log(XFER_LOG_ERROR, "redis: %s: unexpected \"%s\" (want "
			 "redis://host[:port][/db])", conn, p);
		return -EINVAL;
	}
	return 0;
bad_host:
	xfer_log(XFER_LOG_ERROR, "redis: %s: bad host (want "
		 "redis://host[:port][/db])", conn);
	return -EINVAL;
}

/* Resolve once, here, where blocking is allowed: hiredis 0.14 resolves in
 * redisAsyncConnect, which would block the reactor on every retry. */
static int resolve(struct rstore *s, const char *conn)
{
	static const int families[] = { AF_INET, AF_INET6 };
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	const void *addr;
	int ret = EAI_FAIL;

	for (size_t i = 0; i < 2; i++) {
		hints.ai_family = families[i];
		ret = getaddrinfo(s->host, NULL, &hints, &ai);
		if (ret)
			continue;
		if (ai->ai_family == AF_INET)
			addr = &((struct sockaddr_in *)ai->ai_addr)->sin_addr;
		else
			addr = &((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr;
		inet_ntop(ai->ai_family, addr, s->ip, sizeof(s->ip));
		freeaddrinfo(ai);
		return 0;
	}
	xfer_log(XFER_LOG_ERROR, "redis: %s: cannot resolve \"%s\": %s", conn,
		 s->host, gai_strerror(ret));
	return -EINVAL;
}

/* Frees what open got to build, too. */
static void store_free(struct rstore *s)
{
	s->closing = true;
	conn_free(&s->cmd);
	conn_free(&s->sub);
	notes_free(&s->waiting);
	notes_free(&s->ready);
	if (s->flush)
		event_free(s->flush);
	free(s->pattern);
	free(s->chan);
	free((char *)s->env.prefix);
	free((char *)s->env.user);
	free((char *)s->env.password);
	free(s);
}

static int conn_init(struct rstore *s, struct conn *c, const char *name,
		     bool is_sub)
{
	c->s = s;
	c->name = name;
	c->is_sub = is_sub;
	c->backoff_ms = BACKOFF_MIN_MS;
	c->timer = evtimer_new(s->env.base, timer_cb, c);
	return c->timer ? 0 : -ENOMEM;
}

static int redis_open(const char *conn, const struct xfer_store_env *env,
		      struct xfer_store **out)
{
	struct rstore *s;
	char *escaped;
	int ret;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->pub.ops = &xfer_redis_ops;
	TAILQ_INIT(&s->waiting);
	TAILQ_INIT(&s->ready);
	s->env = *env;
	s->env.prefix = s->env.user = s->env.password = NULL;
	ret = parse_conn(s, conn);
	if (!ret)
		ret = resolve(s, conn);
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
	s->flush = event_new(env->base, -1, 0, flush_cb, s);
	if (!s->flush || conn_init(s, &s->cmd, "command", false) ||
	    conn_init(s, &s->sub, "subscriber", true))
		goto err_free;
	conn_start(&s->cmd);
	conn_start(&s->sub);
	*out = &s->pub;
	return 0;
err_free:
	store_free(s);
	return ret;
}

/* Inside one of our callbacks the flush frees the store when it returns. */
static void redis_close(struct xfer_store *st)
{
	struct rstore *s = (struct rstore *)st;

	if (s->flushing)
		s->closing = true;
	else
		store_free(s);
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
