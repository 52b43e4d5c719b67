/*
 * The engine's side of the metadata store (PROTOCOL.md §2): a blocking
 * bridge for API calls made on application threads, publication of the
 * engine's own keys, and reactions to the store's watch. Every store call
 * happens on the control reactor.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "engine_internal.h"
#include "store.h"

#define META_TIMEOUT_MS 15000 /* the slowest backend step is 10 s */

enum { PUBLISH_RPC = 1, PUBLISH_RAM = 2 };

/* One blocking call: shared by the caller and the reactor until both are
 * done with it (the caller may give up first). */
struct meta_call {
	struct xfer_job job;
	struct xfer_engine *e;
	enum xfer_meta_op op;
	char *key, *value;
	size_t len;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int refs;
	bool done;
	int err;
	char *out;
	size_t out_len;
};

static void call_put(struct meta_call *c)
{
	int refs;

	pthread_mutex_lock(&c->lock);
	refs = --c->refs;
	pthread_mutex_unlock(&c->lock);
	if (refs)
		return;
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->lock);
	free(c->key);
	free(c->value);
	free(c->out);
	free(c);
}

static void call_done(int err, const char *value, size_t len, void *arg)
{
	struct meta_call *c = arg;

	pthread_mutex_lock(&c->lock);
	c->err = err;
	if (!err && value) {
		c->out = malloc(len + 1);
		if (c->out) {
			memcpy(c->out, value, len);
			c->out[len] = '\0';
			c->out_len = len;
		} else {
			c->err = -ENOMEM;
		}
	}
	c->done = true;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
	call_put(c);
}

/* Issue one store operation on the reactor; a backend without put/del
 * (p2p) keeps nothing, so those succeed at once. */
static void store_op(struct xfer_engine *e, enum xfer_meta_op op,
		     const char *key, const char *value, size_t len,
		     xfer_store_cb cb, void *arg)
{
	const struct xfer_store_ops *ops = e->store->ops;

	if (op == XFER_META_GET)
		ops->get(e->store, key, cb, arg);
	else if (op == XFER_META_PUT && ops->put)
		ops->put(e->store, key, value, len, cb, arg);
	else if (op == XFER_META_DEL && ops->del)
		ops->del(e->store, key, cb, arg);
	else
		cb(0, NULL, 0, arg);
}

static void call_run(struct xfer_job *j)
{
	struct meta_call *c = container_of(j, struct meta_call, job);

	store_op(c->e, c->op, c->key, c->value, c->len, call_done, c);
}

int xfer_meta_call(struct xfer_engine *e, enum xfer_meta_op op,
		   const char *key, const char *value, size_t len, char **out,
		   size_t *out_len)
{
	struct xfer_reactor *r = &e->control;
	struct meta_call *c;
	pthread_condattr_t ca;
	struct timespec deadline;
	int ret = 0;

	if (r->running && xfer_reactor_on_thread(r))
		return -EDEADLK; /* the reactor would wait for itself */
	c = calloc(1, sizeof(*c));
	if (!c || !(c->key = strdup(key)) ||
	    (value && !(c->value = malloc(len ? len : 1)))) {
		if (c)
			free(c->key);
		free(c);
		return -ENOMEM;
	}
	if (value)
		memcpy(c->value, value, len);
	c->e = e;
	c->op = op;
	c->len = len;
	c->refs = 2;
	pthread_mutex_init(&c->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cond, &ca);
	pthread_condattr_destroy(&ca);
	c->job.fn = call_run;
	xfer_reactor_post(r, &c->job);

	/* Plugin mode before the application dispatches its base: drive it
	 * here. -1 means it is dispatched already: by another thread, then
	 * wait; by this one (a call from an application callback), then the
	 * call cannot complete. */
	while (!r->running && !c->done) {
		if (event_base_loop(r->base, EVLOOP_ONCE) == 0)
			continue;
		if (xfer_reactor_on_thread(r))
			ret = -EDEADLK;
		break;
	}
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += META_TIMEOUT_MS / 1000;
	pthread_mutex_lock(&c->lock);
	while (!c->done && ret == 0)
		ret = -pthread_cond_timedwait(&c->cond, &c->lock, &deadline);
	if (c->done) {
		ret = c->err;
		if (!ret && out) {
			*out = c->out;
			*out_len = c->out_len;
			c->out = NULL;
		}
	}
	pthread_mutex_unlock(&c->lock);
	call_put(c);
	return ret;
}

char *xfer_meta_key(struct xfer_engine *e, const char *kind, const char *name)
{
	size_t n = strlen(e->prefix) + strlen(kind) + strlen(name) + 1;
	char *key = malloc(n);

	if (key)
		snprintf(key, n, "%s%s%s", e->prefix, kind, name);
	return key;
}

/* ---- publication of the engine's own keys ---- */

static void publish_done(int err, const char *value, size_t len, void *arg)
{
	struct xfer_engine *e = arg;

	(void)value;
	(void)len;
	if (err)
		xfer_engine_error(e, err, "metadata %s: publish: %s",
				  e->cfg.metadata_server, strerror(-err));
}

static const char *const own_kind[] = {
	[PUBLISH_RPC] = "rpc_meta/",
	[PUBLISH_RAM] = "ram/",
};

/* The value of own key @p what (PUBLISH_RPC or PUBLISH_RAM), malloc'd;
 * NULL on ENOMEM. */
static char *own_value(struct xfer_engine *e, unsigned what, size_t *len)
{
	char *json;

	if (what == PUBLISH_RAM)
		return xfer_engine_descriptor(e, len);
	return xfer_rpc_meta_encode(e->host, e->cfg.rpc_port, &json, len) ?
	       NULL : json;
}

/* Put own key @p what: from the reactor, answered to publish_done(). */
static void put_own(struct xfer_engine *e, unsigned what)
{
	char *key = xfer_meta_key(e, own_kind[what], e->name), *json;
	size_t len;

	json = own_value(e, what, &len);
	if (key && json)
		store_op(e, XFER_META_PUT, key, json, len, publish_done, e);
	else
		publish_done(-ENOMEM, NULL, 0, e);
	free(key);
	free(json);
}

/* Put own key @p what from an application thread and wait for it. */
static int put_own_sync(struct xfer_engine *e, unsigned what)
{
	char *key = xfer_meta_key(e, own_kind[what], e->name), *json;
	size_t len;
	int ret = -ENOMEM;

	json = own_value(e, what, &len);
	if (key && json)
		ret = xfer_meta_call(e, XFER_META_PUT, key, json, len, NULL,
				     NULL);
	free(key);
	free(json);
	return ret;
}

/* Coalesced: however many registers happened since, the latest state. */
static void publish_run(struct xfer_job *j)
{
	struct xfer_engine *e = container_of(j, struct xfer_engine,
					     publish_job);
	unsigned what = atomic_exchange(&e->publish_flags, 0);

	if (what & PUBLISH_RPC)
		put_own(e, PUBLISH_RPC);
	if (what & PUBLISH_RAM)
		put_own(e, PUBLISH_RAM);
}

static void publish(struct xfer_engine *e, unsigned what)
{
	if (!e->store->ops->put)
		return;
	if (atomic_fetch_or(&e->publish_flags, what) == 0) {
		e->publish_job.fn = publish_run;
		xfer_reactor_post(&e->control, &e->publish_job);
	}
}

void xfer_meta_publish_ram(struct xfer_engine *e)
{
	int ret;

	if (!e->store->ops->put)
		return;
	/* Synchronous, so a peer that opens us after register() returns
	 * sees the buffer; on the reactor's own thread it cannot wait. */
	ret = put_own_sync(e, PUBLISH_RAM);
	if (ret == -EDEADLK)
		publish(e, PUBLISH_RAM);
	else if (ret) /* the reconnect will republish */
		publish_done(ret, NULL, 0, e);
}

/* The first publication is synchronous, so a server that is down makes
 * the engine fail at once with a clear error. */
int xfer_meta_start(struct xfer_engine *e)
{
	int ret;

	if (!e->store->ops->put)
		return 0;
	ret = put_own_sync(e, PUBLISH_RPC);
	if (!ret)
		ret = put_own_sync(e, PUBLISH_RAM);
	if (ret)
		xfer_log(XFER_LOG_ERROR, "metadata server %s: %s",
			 e->cfg.metadata_server, strerror(-ret));
	return ret;
}

/* On free: ram without buffers, then both keys deleted (PROTOCOL.md §2). */
void xfer_meta_stop(struct xfer_engine *e)
{
	char *rpc, *ram, *json;
	size_t len;

	if (!e->store->ops->put)
		return;
	rpc = xfer_meta_key(e, "rpc_meta/", e->name);
	ram = xfer_meta_key(e, "ram/", e->name);
	json = xfer_engine_descriptor_empty(e, &len);
	if (rpc && ram && json) {
		xfer_meta_call(e, XFER_META_PUT, ram, json, len, NULL, NULL);
		xfer_meta_call(e, XFER_META_DEL, rpc, NULL, 0, NULL, NULL);
		xfer_meta_call(e, XFER_META_DEL, ram, NULL, 0, NULL, NULL);
	}
	free(json);
	free(rpc);
	free(ram);
}

/* ---- the watch ---- */

static void on_changed(const char *key, void *arg)
{
	struct xfer_engine *e = arg;
	size_t plen = strlen(e->prefix), n = strlen("ram/");

	if (!key) {
		xfer_segment_refresh(e, NULL);
		return;
	}
	if (!strncmp(key, e->prefix, plen) && !strncmp(key + plen, "ram/", n))
		xfer_segment_refresh(e, key + plen + n);
}

static void on_reconnected(void *arg)
{
	publish(arg, PUBLISH_RPC | PUBLISH_RAM);
}

int xfer_meta_open(struct xfer_engine *e, const struct xfer_store_ops *ops)
{
	const char *cid = e->cfg.cluster_id;
	struct xfer_store_env env = {
		.base = e->control.base,
		.changed = on_changed,
		.reconnected = on_reconnected,
		.arg = e,
		.user = e->cfg.metadata_user,
		.password = e->cfg.metadata_password,
		.handshake_max_len = e->cfg.handshake_max_len,
	};
	size_t n = strlen("mooncake/") + (cid ? strlen(cid) + 1 : 0) + 1;

	e->prefix = malloc(n);
	if (!e->prefix)
		return -ENOMEM;
	snprintf(e->prefix, n, "mooncake/%s%s", cid ? cid : "", cid ? "/" : "");
	env.prefix = e->prefix;
	return ops->open(e->cfg.metadata_server, &env, &e->store);
}
