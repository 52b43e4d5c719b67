/*
 * Redis Sentinel for the redis backend: the connection string names the
 * sentinels and the master, "redis+sentinel://h1[:26379],h2.../name[/db]"
 * (the form of redis clients' Sentinel URLs). One sentinel at a time is
 * asked for the master's address (SENTINEL get-master-addr-by-name), and
 * the same connection then follows +switch-master; a sentinel that fails
 * passes the question to the next. The server connections (redis_conn.c)
 * go to the master it names, check that it is one (ROLE), and start over
 * on a switch: the user then hears reconnected (the engine republishes
 * its keys) and that changes may have been missed.
 *
 * When a server connection fails the sentinels are asked again, so a
 * switch missed while the link was down is caught up. Credentials are the
 * server's; sentinels are asked without.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/log_internal.h"
#include "metadata/redis_internal.h"
#include "metadata/resolve_internal.h"

#define SCHEME "redis+sentinel://"
#define SENTINEL_PORT 26379

bool xfer_redis_sentinel_conn(const char *conn)
{
	return !strncasecmp(conn, SCHEME, strlen(SCHEME));
}

static int bad(const char *conn, const char *what)
{
	xfer_log(XFER_LOG_ERROR, "redis: %s: %s (want redis+sentinel://"
		 "host[:port][,host[:port]].../master[/db], at most %d "
		 "sentinels)", conn, what, REDIS_MAX_SENTINELS);
	return -EINVAL;
}

int xfer_redis_sentinel_parse(struct redis_store *s, const char *conn)
{
	const char *p = conn + strlen(SCHEME), *end;
	struct redis_addr *a;
	size_t used = 0, len;
	uint16_t port;
	char *q;
	long db;

	for (;;) {
		if (s->nsentinels == REDIS_MAX_SENTINELS)
			return bad(conn, "too many sentinels");
		a = &s->sentinels[s->nsentinels++];
		p = xfer_store_parse_addr(p, ",;/", a->host, sizeof(a->host),
					  &port, SENTINEL_PORT);
		if (!p)
			return bad(conn, "bad sentinel address");
		a->port = port;
		if (used < sizeof(s->sentinel_names))
			used += (size_t)snprintf(s->sentinel_names + used,
						 sizeof(s->sentinel_names) -
						 used, "%s%s:%d", used ? "," : "",
						 a->host, a->port);
		if (*p != ',' && *p != ';')
			break;
		p++;
	}
	if (*p != '/')
		return bad(conn, "no master name");
	len = strcspn(++p, "/");
	end = p + len;
	if (!len || strcspn(p, " \t\r\n") < len)
		return bad(conn, "bad master name");
	if (*end == '/' && end[1]) {
		db = strtol(end + 1, &q, 10);
		if (end[1] < '0' || end[1] > '9' || *q || db > 1 << 30)
			return bad(conn, "bad db index (a number from 0)");
		s->db = (int)db;
	} else if (*end && end[1]) {
		return bad(conn, "unexpected text after the master name");
	}
	s->master_name = strndup(p, len);
	if (!s->master_name)
		return -ENOMEM;
	for (int i = 0; i < s->nsentinels; i++)
		if (xfer_redis_addr_resolve(&s->sentinels[i], conn))
			return -EINVAL;
	return 0;
}

void xfer_redis_sentinel_start(struct redis_store *s)
{
	s->cmd.step = s->sub.step = ST_WAIT;
	xfer_redis_conn_start(&s->link);
}

void xfer_redis_sentinel_down(struct redis_store *s, int err)
{
	const char *why = strerror(-err);

	s->cur_sentinel = (s->cur_sentinel + 1) % s->nsentinels;
	s->link.addr = &s->sentinels[s->cur_sentinel];
	if (++s->sentinel_fails != s->nsentinels || s->master_known)
		return;
	xfer_log(XFER_LOG_WARN, "redis sentinels %s: none answers for "
		 "master %s (last: %s); retrying", s->sentinel_names,
		 s->master_name, why);
	/* Nobody to ask: calls fail at once until somebody answers. */
	s->cmd.step = s->sub.step = ST_DOWN;
	s->cmd.cbs->down(&s->cmd, err);
}

void xfer_redis_sentinel_recheck(struct redis_store *s)
{
	if (s->link.step == ST_UP)
		xfer_redis_conn_restart(&s->link);
}

void xfer_redis_sentinel_master(struct redis_store *s, const char *ip,
				int port)
{
	struct redis_addr *m = &s->server;
	bool moved = s->master_known &&
		     (strcmp(m->host, ip) || m->port != port);

	s->sentinel_fails = 0;
	/* The same master: connections that fail to reach it keep their
	 * backoff. */
	if (s->master_known && !moved)
		return;
	if (moved)
		xfer_log(XFER_LOG_WARN, "redis sentinel %s:%d: master %s moved "
			 "from %s:%d to %s:%d", s->link.addr->host,
			 s->link.addr->port, s->master_name, m->host, m->port,
			 ip, port);
	else
		xfer_log(XFER_LOG_INFO, "redis sentinel %s:%d: master %s at "
			 "%s:%d", s->link.addr->host, s->link.addr->port,
			 s->master_name, ip, port);
	if (moved)
		s->switches++;
	/* A sentinel's address is numeric unless it was told to announce
	 * names; hiredis resolves those itself. */
	snprintf(m->host, sizeof(m->host), "%s", ip);
	snprintf(m->ip, sizeof(m->ip), "%s", ip);
	m->port = port;
	s->master_known = true;
	xfer_redis_conn_restart(&s->cmd);
	xfer_redis_conn_restart(&s->sub);
}

/* "+switch-master" carries "<name> <old ip> <old port> <new ip> <new
 * port>". */
void xfer_redis_sentinel_message(struct redis_store *s, const redisReply *r)
{
	char name[256], ip[NI_MAXHOST];
	int port;

	if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
	    r->element[0]->type != REDIS_REPLY_STRING ||
	    strcasecmp(r->element[0]->str, "message") ||
	    r->element[1]->type != REDIS_REPLY_STRING ||
	    strcmp(r->element[1]->str, "+switch-master") ||
	    r->element[2]->type != REDIS_REPLY_STRING ||
	    sscanf(r->element[2]->str, "%255s %*s %*d %1024s %d", name, ip,
		   &port) != 3 ||
	    strcmp(name, s->master_name))
		return;
	xfer_redis_sentinel_master(s, ip, port);
}
