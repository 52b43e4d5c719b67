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

#include "core/desc_internal.h"
#include "core/log_internal.h"
#include "core/meta_internal.h"

#define META_TIMEOUT_MS 15000 /* the slowest backend step is 10 s */

enum { PUBLISH_RPC = 1, PUBLISH_RAM = 2 };

/* One blocking call: shared by the caller and the reactor until both are
 * done with it (the caller may give up first). */
struct meta_call {
	struct xfer_job job;
	struct xfer_meta *m;
	enum xfer_store_op op;
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

/* Issue one store operation on the reactor (put and del only on a
 * backend that keeps keys: callers check). */
static void store_op(struct xfer_meta *m, enum xfer_store_op op,
		     const char *key, const char *value, size_t len,
		     xfer_store_cb cb, void *arg)
{
	const struct xfer_store_ops *ops = m->store->ops;

	if (op == XFER_STORE_GET)
		ops->get(m->store, key, cb, arg);
	else if (op == XFER_STORE_PUT)
		ops->put(m->store, key, value, len, cb, arg);
	else
		ops->del(m->store, key, cb, arg);
}

static void call_run(struct xfer_job *j)
{
	struct meta_call *c = container_of(j, struct meta_call, job);

	store_op(c->m, c->op, c->key, c->value, c->len, call_done, c);
}

/*
 * Run one store operation on the control reactor and wait for it, from an
 * application thread (*out malloc'd and NUL-ended for a get).
 * @return 0, the store's error, -ETIMEDOUT, or -EDEADLK when called on the
 *         thread that dispatches the control reactor.
 */
static int call(struct xfer_meta *m, enum xfer_store_op op, const char *key,
		const char *value, size_t len, char **out, size_t *out_len)
{
	struct xfer_reactor *r = m->env.control;
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
	c->m = m;
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

/* prefix + kind + name, malloc'd; NULL on ENOMEM. */
static char *key_of(struct xfer_meta *m, const char *kind, const char *name)
{
	size_t n = strlen(m->prefix) + strlen(kind) + strlen(name) + 1;
	char *key = malloc(n);

	if (key)
		snprintf(key, n, "%s%s%s", m->prefix, kind, name);
	return key;
}

int xfer_meta_get_sync(struct xfer_meta *m, const char *kind,
		       const char *name, char **out, size_t *out_len)
{
	char *key = key_of(m, kind, name);
	int ret;

	if (!key)
		return -ENOMEM;
	ret = call(m, XFER_STORE_GET, key, NULL, 0, out, out_len);
	free(key);
	return ret;
}

int xfer_meta_get(struct xfer_meta *m, const char *kind, const char *name,
		  xfer_store_cb cb, void *arg)
{
	char *key = key_of(m, kind, name);

	if (!key)
		return -ENOMEM;
	m->store->ops->get(m->store, key, cb, arg);
	free(key);
	return 0;
}

/* ---- publication of the engine's own keys ---- */

static void publish_done(int err, const char *value, size_t len, void *arg)
{
	struct xfer_meta *m = arg;

	(void)value;
	(void)len;
	if (err)
		xfer_error_set(m->env.err, err, "metadata %s: publish: %s",
			       m->env.conn, strerror(-err));
}

static const char *const own_kind[] = {
	[PUBLISH_RPC] = "rpc_meta/",
	[PUBLISH_RAM] = "ram/",
};

/* The value of own key @p what (PUBLISH_RPC or PUBLISH_RAM), malloc'd;
 * NULL on ENOMEM. */
static char *own_value(struct xfer_meta *m, unsigned what, size_t *len)
{
	char *json;

	if (what == PUBLISH_RAM)
		return m->env.descriptor(true, len, m->env.arg);
	return xfer_rpc_meta_encode(m->host, m->port, &json, len) ? NULL : json;
}

/* Put own key @p what: from the reactor, answered to publish_done(). */
static void put_own(struct xfer_meta *m, unsigned what)
{
	char *key = key_of(m, own_kind[what], m->name), *json;
	size_t len;

	json = own_value(m, what, &len);
	if (key && json)
		store_op(m, XFER_STORE_PUT, key, json, len, publish_done, m);
	else
		publish_done(-ENOMEM, NULL, 0, m);
	free(key);
	free(json);
}

/* Put own key @p what from an application thread and wait for it. */
static int put_own_sync(struct xfer_meta *m, unsigned what)
{
	char *key = key_of(m, own_kind[what], m->name), *json;
	size_t len;
	int ret = -ENOMEM;

	json = own_value(m, what, &len);
	if (key && json)
		ret = call(m, XFER_STORE_PUT, key, json, len, NULL, NULL);
	free(key);
	free(json);
	return ret;
}

/* Coalesced: however many registers happened since, the latest state. */
static void publish_run(struct xfer_job *j)
{
	struct xfer_meta *m = container_of(j, struct xfer_meta, publish_job);
	unsigned what = atomic_exchange(&m->publish_flags, 0);

	if (what & PUBLISH_RPC)
		put_own(m, PUBLISH_RPC);
	if (what & PUBLISH_RAM)
		put_own(m, PUBLISH_RAM);
}

static void publish(struct xfer_meta *m, unsigned what)
{
	if (!(m->flags & XFER_STORE_KEEPS))
		return;
	if (atomic_fetch_or(&m->publish_flags, what) == 0) {
		m->publish_job.fn = publish_run;
		xfer_reactor_post(m->env.control, &m->publish_job);
	}
}

void xfer_meta_publish_ram(struct xfer_meta *m)
{
	int ret;

	if (!(m->flags & XFER_STORE_KEEPS))
		return;
	/* Synchronous, so a peer that opens us after register() returns
	 * sees the buffer; on the reactor's own thread it cannot wait. */
	ret = put_own_sync(m, PUBLISH_RAM);
	if (ret == -EDEADLK)
		publish(m, PUBLISH_RAM);
	else if (ret) /* the reconnect will republish */
		publish_done(ret, NULL, 0, m);
}

/* The first publication is synchronous, so a server that is down makes
 * the engine fail at once with a clear error. */
int xfer_meta_start(struct xfer_meta *m, const char *name, const char *host,
		    uint16_t port)
{
	int ret;

	m->name = name;
	m->host = host;
	m->port = port;
	if (!(m->flags & XFER_STORE_KEEPS))
		return 0;
	ret = put_own_sync(m, PUBLISH_RPC);
	if (!ret)
		ret = put_own_sync(m, PUBLISH_RAM);
	if (ret)
		xfer_log(XFER_LOG_ERROR, "metadata server %s: %s", m->env.conn,
			 strerror(-ret));
	return ret;
}

/* On free: ram without buffers, then both keys deleted (PROTOCOL.md §2). */
void xfer_meta_stop(struct xfer_meta *m)
{
	char *rpc, *ram, *json;
	size_t len;

	if (!(m->flags & XFER_STORE_KEEPS))
		return;
	rpc = key_of(m, own_kind[PUBLISH_RPC], m->name);
	ram = key_of(m, own_kind[PUBLISH_RAM], m->name);
	json = m->env.descriptor(false, &len, m->env.arg);
	if (rpc && ram && json) {
		call(m, XFER_STORE_PUT, ram, json, len, NULL, NULL);
		call(m, XFER_STORE_DEL, rpc, NULL, 0, NULL, NULL);
		call(m, XFER_STORE_DEL, ram, NULL, 0, NULL, NULL);
	}
	free(json);
	free(rpc);
	free(ram);
}

/* ---- the watch ---- */

static void on_changed(const char *key, void *arg)
{
	struct xfer_meta *m = arg;
	const char *ram = own_kind[PUBLISH_RAM];
	size_t plen = strlen(m->prefix), n = strlen(ram);

	if (!key)
		m->env.changed(NULL, m->env.arg);
	else if (!strncmp(key, m->prefix, plen) && !strncmp(key + plen, ram, n))
		m->env.changed(key + plen + n, m->env.arg);
}

static void on_reconnected(void *arg)
{
	publish(arg, PUBLISH_RPC | PUBLISH_RAM);
}

int xfer_meta_open(struct xfer_meta *m, const struct xfer_meta_env *env)
{
	const struct xfer_store_ops *ops = xfer_store_find(env->conn);
	const char *cid = env->cluster_id;
	struct xfer_store_env senv = {
		.base = env->control->base,
		.changed = on_changed,
		.reconnected = on_reconnected,
		.arg = m,
		.user = env->user,
		.password = env->password,
		.handshake_max_len = env->handshake_max_len,
	};
	size_t n = strlen("mooncake/") + (cid ? strlen(cid) + 1 : 0) + 1;
	int ret;

	memset(m, 0, sizeof(*m));
	m->env = *env;
	if (!ops) {
		xfer_log(XFER_LOG_ERROR, "metadata server '%s': unknown backend",
			 env->conn);
		return -EPROTONOSUPPORT;
	}
	m->flags = ops->flags;
	m->prefix = malloc(n);
	if (!m->prefix)
		return -ENOMEM;
	snprintf(m->prefix, n, "mooncake/%s%s", cid ? cid : "", cid ? "/" : "");
	senv.prefix = m->prefix;
	ret = ops->open(env->conn, &senv, &m->store);
	if (ret) {
		free(m->prefix);
		m->prefix = NULL;
	}
	return ret;
}

void xfer_meta_close(struct xfer_meta *m)
{
	m->store->ops->close(m->store);
	free(m->prefix);
}
