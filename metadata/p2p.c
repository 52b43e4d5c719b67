/*
 * Peer-to-peer metadata: no server. A segment's name is `host:port`; its
 * rpc_meta follows from the name and its descriptor is asked of the peer
 * itself with a Metadata handshake (PROTOCOL.md §1–2). Nothing is
 * published (put and del are absent) and nothing is watched.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/dns.h>
#include <event2/event.h>

#include "core/desc_internal.h"
#include "core/handshake_internal.h"
#include "core/net_internal.h"
#include "metadata/store.h"

#define RPC_META "rpc_meta/"
#define RAM "ram/"

/* One get in flight: a handshake, or a result known at once and delivered
 * by a zero timer (callbacks never run inside the call). */
struct p2p_get {
	struct p2p *p;
	struct p2p_get *prev, *next;
	struct xfer_hs_req *req;
	struct event *timer;
	xfer_store_cb cb;
	void *arg;
	int err;
	size_t len;
	char value[];
};

struct p2p {
	struct xfer_store store;
	struct event_base *base;
	struct evdns_base *dns;
	char *prefix;
	uint32_t max_len;
	struct p2p_get *gets; /* in flight, cancelled at close */
};

static int p2p_accepts(const char *conn)
{
	return !strcasecmp(conn, "p2p") || !strcmp(conn, "P2PHANDSHAKE");
}

static int p2p_open(const char *conn, const struct xfer_store_env *env,
		    struct xfer_store **out)
{
	struct p2p *p = calloc(1, sizeof(*p));

	(void)conn;
	if (!p)
		return -ENOMEM;
	p->store.ops = &xfer_p2p_ops;
	p->base = env->base;
	p->max_len = env->handshake_max_len;
	p->prefix = strdup(env->prefix);
	p->dns = evdns_base_new(env->base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
				EVDNS_BASE_DISABLE_WHEN_INACTIVE);
	if (!p->prefix || !p->dns) {
		if (p->dns)
			evdns_base_free(p->dns, 0);
		free(p->prefix);
		free(p);
		return -ENOMEM;
	}
	*out = &p->store;
	return 0;
}

static void get_free(struct p2p_get *g)
{
	if (g->prev)
		g->prev->next = g->next;
	else
		g->p->gets = g->next;
	if (g->next)
		g->next->prev = g->prev;
	if (g->timer)
		event_free(g->timer);
	free(g);
}

static void get_done(int err, const char *value, size_t len, void *arg)
{
	struct p2p_get *g = arg;

	g->req = NULL; /* the handshake frees itself */
	g->cb(err, value, len, g->arg);
	get_free(g);
}

static void get_timer(evutil_socket_t fd, short what, void *arg)
{
	struct p2p_get *g = arg;

	(void)fd;
	(void)what;
	get_done(g->err, g->value, g->len, g);
}

static struct p2p_get *get_new(struct p2p *p, size_t len, xfer_store_cb cb,
			       void *arg)
{
	struct p2p_get *g = calloc(1, sizeof(*g) + len);

	if (!g)
		return NULL;
	g->p = p;
	g->cb = cb;
	g->arg = arg;
	g->next = p->gets;
	if (p->gets)
		p->gets->prev = g;
	p->gets = g;
	return g;
}

/* Deliver a result known now, from a zero timer. */
static void defer(struct p2p *p, int err, const char *value, size_t len,
		  xfer_store_cb cb, void *arg)
{
	static const struct timeval now = { 0, 0 };
	struct p2p_get *g = get_new(p, len, cb, arg);

	if (g)
		g->timer = evtimer_new(p->base, get_timer, g);
	if (!g || !g->timer || evtimer_add(g->timer, &now)) {
		if (g)
			get_free(g);
		/* Nothing else can carry the error: say so at once. */
		cb(-ENOMEM, NULL, 0, arg);
		return;
	}
	g->err = err;
	g->len = len;
	if (len)
		memcpy(g->value, value, len);
}

static void p2p_get(struct xfer_store *s, const char *key, xfer_store_cb cb,
		    void *arg)
{
	struct p2p *p = container_of(s, struct p2p, store);
	size_t plen = strlen(p->prefix), len;
	struct p2p_get *g;
	char host[256], *json;
	uint16_t port;
	int ret;

	if (strncmp(key, p->prefix, plen))
		return defer(p, -ENOENT, NULL, 0, cb, arg);
	key += plen;
	if (!strncmp(key, RPC_META, strlen(RPC_META))) {
		key += strlen(RPC_META);
		if (xfer_split_host_port(key, host, sizeof(host), &port))
			return defer(p, -EINVAL, NULL, 0, cb, arg);
		ret = xfer_rpc_meta_encode(host, port, &json, &len);
		defer(p, ret, ret ? NULL : json, ret ? 0 : len, cb, arg);
		if (!ret)
			free(json);
		return;
	}
	if (strncmp(key, RAM, strlen(RAM)))
		return defer(p, -ENOENT, NULL, 0, cb, arg);
	key += strlen(RAM);
	if (xfer_split_host_port(key, host, sizeof(host), &port))
		return defer(p, -EINVAL, NULL, 0, cb, arg);
	g = get_new(p, 0, cb, arg);
	if (g)
		g->req = xfer_handshake_request(p->base, p->dns, host, port,
						XFER_HS_METADATA, "{}\n", 3,
						p->max_len, get_done, g);
	if (!g || !g->req) {
		if (g)
			get_free(g);
		defer(p, -ENOMEM, NULL, 0, cb, arg);
	}
}

static void p2p_close(struct xfer_store *s)
{
	struct p2p *p = container_of(s, struct p2p, store);

	while (p->gets) {
		if (p->gets->req)
			xfer_handshake_cancel(p->gets->req);
		get_free(p->gets);
	}
	evdns_base_free(p->dns, 0);
	free(p->prefix);
	free(p);
}

const struct xfer_store_ops xfer_p2p_ops = {
	.name = "p2p",
	.flags = XFER_STORE_ADDR_NAMES,
	.accepts = p2p_accepts,
	.open = p2p_open,
	.get = p2p_get,
	.close = p2p_close,
};
