/*
 * Peer-to-peer metadata: no server. A segment's name is `host:port`; its
 * rpc_meta follows from the name and its descriptor (or its document of
 * another kind, `{"kind":...}`) is asked of the peer itself with a
 * Metadata handshake (PROTOCOL.md §1–2). Nothing is published (put and del
 * are absent) and nothing is watched.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>

#include <event2/dns.h>
#include <event2/event.h>

#include "core/desc_internal.h"
#include "core/handshake_internal.h"
#include "util/net_internal.h"
#include "metadata/backends_internal.h"
#include "core/deferred_internal.h"

#define RPC_META "rpc_meta/"
#define RAM "ram/"
#define KIND_MAX 32 /* bytes of a metadata kind asked of a peer */

/* One get: a handshake in flight, or a result known at once and
 * delivered from the deferred queue (callbacks never run inside the
 * call). */
struct p2p_get {
	LIST_ENTRY(p2p_get) link;        /* a handshake: in p->gets */
	struct xfer_deferred_item done;  /* a result known at once */
	struct xfer_hs_req *req;
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
	const struct xfer_auth *auth; /* the engine's secret, or NULL */
	struct xfer_deferred deferred;
	LIST_HEAD(, p2p_get) gets; /* handshakes in flight, cancelled at close */
};

static void p2p_release(struct xfer_deferred *d);

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
	p->store.deferred = &p->deferred;
	p->base = env->base;
	p->max_len = env->handshake_max_len;
	p->auth = env->auth;
	p->prefix = strdup(env->prefix);
	p->dns = evdns_base_new(env->base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
				EVDNS_BASE_DISABLE_WHEN_INACTIVE);
	LIST_INIT(&p->gets);
	if (!p->prefix || !p->dns ||
	    xfer_deferred_init(&p->deferred, env->base, NULL, p2p_release)) {
		p2p_release(&p->deferred);
		return -ENOMEM;
	}
	*out = &p->store;
	return 0;
}

/* The handshake's answer. Out of the list before the callback, which may
 * close the store. */
static void get_done(int err, const char *value, size_t len, void *arg)
{
	struct p2p_get *g = arg;

	LIST_REMOVE(g, link);
	g->cb(err, value, len, g->arg);
	free(g);
}

static void get_deliver(struct xfer_deferred_item *it, bool drop)
{
	struct p2p_get *g = container_of(it, struct p2p_get, done);

	if (!drop)
		g->cb(g->err, g->value, g->len, g->arg);
	free(g);
}

/* Deliver a result known now, from the deferred queue. */
static void defer(struct p2p *p, int err, const char *value, size_t len,
		  xfer_store_cb cb, void *arg)
{
	struct p2p_get *g = calloc(1, sizeof(*g) + len);

	if (!g) {
		/* Nothing else can carry the error: say so at once. */
		cb(-ENOMEM, NULL, 0, arg);
		return;
	}
	g->cb = cb;
	g->arg = arg;
	g->err = err;
	g->len = len;
	if (len)
		memcpy(g->value, value, len);
	xfer_deferred_push(&p->deferred, &g->done, get_deliver);
}

static void p2p_get(struct xfer_store *s, const char *key, xfer_store_cb cb,
		    void *arg)
{
	struct p2p *p = container_of(s, struct p2p, store);
	size_t plen = strlen(p->prefix), len, blen = 3;
	char host[256], body[KIND_MAX + 16] = "{}\n", *json;
	const char *name;
	struct p2p_get *g;
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
	/* "ram/<host:port>", or another kind's "<kind>/<host:port>" */
	name = strchr(key, '/');
	if (!name || name == key || (size_t)(name - key) > KIND_MAX)
		return defer(p, -ENOENT, NULL, 0, cb, arg);
	if (xfer_split_host_port(name + 1, host, sizeof(host), &port))
		return defer(p, -EINVAL, NULL, 0, cb, arg);
	if (strncmp(key, RAM, strlen(RAM)))
		blen = snprintf(body, sizeof(body), "{\"kind\":\"%.*s\"}\n",
				(int)(name - key), key);
	g = calloc(1, sizeof(*g));
	if (g) {
		g->cb = cb;
		g->arg = arg;
		LIST_INSERT_HEAD(&p->gets, g, link);
		g->req = xfer_handshake_request(p->base, p->dns, p->auth, host,
						port,
						XFER_HS_METADATA, body, blen,
						p->max_len, get_done, g);
	}
	if (!g || !g->req) {
		if (g)
			LIST_REMOVE(g, link);
		free(g);
		defer(p, -ENOMEM, NULL, 0, cb, arg);
	}
}

/* Also frees what open got to build. */
static void p2p_release(struct xfer_deferred *d)
{
	struct p2p *p = container_of(d, struct p2p, deferred);
	struct p2p_get *g;

	while ((g = LIST_FIRST(&p->gets))) {
		LIST_REMOVE(g, link);
		xfer_handshake_cancel(g->req);
		free(g);
	}
	xfer_deferred_clear(&p->deferred);
	if (p->dns)
		evdns_base_free(p->dns, 0);
	free(p->prefix);
	free(p);
}

/* From inside one of our callbacks the store is freed when it returns. */
static void p2p_close(struct xfer_store *s)
{
	xfer_deferred_release(&container_of(s, struct p2p, store)->deferred);
}

const struct xfer_store_ops xfer_p2p_ops = {
	.name = "p2p",
	.flags = XFER_STORE_ADDR_NAMES,
	.accepts = p2p_accepts,
	.open = p2p_open,
	.get = p2p_get,
	.close = p2p_close,
};
