/*
 * The engine's side of the metadata store (PROTOCOL.md §2): publication of
 * the engine's own keys, with a callback when a change is out; gets for
 * opens and refreshes; the store's watch. Every store call happens on the
 * control reactor; the blocking forms wait from other threads only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "core/desc_internal.h"
#include "util/log_internal.h"
#include "core/meta_internal.h"
#include "util/wait_internal.h"

#define META_TIMEOUT_MS 15000 /* the slowest backend step is 10 s */

/* The own keys, by index: rpc_meta, ram, then env.kinds. */
enum { OWN_RPC, OWN_RAM, OWN_KINDS };

static const char *own_kind(const struct xfer_meta *m, unsigned i)
{
	return i == OWN_RPC ? "rpc_meta" : i == OWN_RAM ? "ram"
						       : m->env.kinds[i - OWN_KINDS];
}

static unsigned own_count(const struct xfer_meta *m)
{
	unsigned n = OWN_KINDS;

	while (m->env.kinds && m->env.kinds[n - OWN_KINDS])
		n++;
	return n;
}

/* prefix + kind + "/" + name, malloc'd; NULL on ENOMEM. */
static char *key_of(struct xfer_meta *m, const char *kind, const char *name)
{
	size_t n = strlen(m->prefix) + strlen(kind) + strlen(name) + 2;
	char *key = malloc(n);

	if (key)
		snprintf(key, n, "%s%s/%s", m->prefix, kind, name);
	return key;
}

/* The value of own key @p i, malloc'd; NULL on ENOMEM. */
static char *own_value(struct xfer_meta *m, unsigned i, bool buffers,
		       size_t *len)
{
	char *json;

	if (i != OWN_RPC)
		return m->env.document(i == OWN_RAM ? NULL : own_kind(m, i),
				       buffers, len, m->env.arg);
	return xfer_rpc_meta_encode(m->host, m->port, &json, len) ? NULL : json;
}

/* ---- store calls in flight ---- */

/*
 * A store call of ours whose callback has not come: on the list of the
 * meta while the backend holds it, so that xfer_meta_close() can free it
 * (a closed backend never calls back). Control reactor only.
 */
struct xfer_meta_op {
	struct xfer_meta_op *next, **pprev;
	void (*drop)(struct xfer_meta_op *op); /* frees it, unanswered */
};

static void op_start(struct xfer_meta *m, struct xfer_meta_op *op,
		     void (*drop)(struct xfer_meta_op *op))
{
	op->drop = drop;
	op->next = m->ops;
	op->pprev = &m->ops;
	if (m->ops)
		m->ops->pprev = &op->next;
	m->ops = op;
}

static void op_end(struct xfer_meta_op *op)
{
	*op->pprev = op->next;
	if (op->next)
		op->next->pprev = op->pprev;
}

/* ---- the blocking bridge: a put or delete waited for ---- */

struct call {
	struct xfer_meta_op op;
	struct xfer_job job;
	struct xfer_meta *m;
	struct xfer_wait *w;
	char *key, *value;      /* value NULL: a delete */
	size_t len;
};

static void call_free(struct call *c, int err)
{
	xfer_wait_done(c->w, err);
	free(c->key);
	free(c->value);
	free(c);
}

static void call_done(int err, const char *value, size_t len, void *arg)
{
	struct call *c = arg;

	(void)value;
	(void)len;
	op_end(&c->op);
	call_free(c, err);
}

/* Its waiter has given up (it waits less than the backend may take). */
static void call_drop(struct xfer_meta_op *op)
{
	call_free(container_of(op, struct call, op), -ECANCELED);
}

static void call_run(struct xfer_job *j)
{
	struct call *c = container_of(j, struct call, job);
	struct xfer_store *s = c->m->store;

	op_start(c->m, &c->op, call_drop);
	if (c->value)
		s->ops->put(s, c->key, c->value, c->len, call_done, c);
	else
		s->ops->del(s, c->key, call_done, c);
}

/* Put (@p value) or delete own key @p what on the control reactor and
 * wait, from another thread. @return 0, the store's error, -ETIMEDOUT,
 * -ENOMEM. */
static int call(struct xfer_meta *m, unsigned what, bool put, bool buffers)
{
	struct call *c = calloc(1, sizeof(*c));
	struct xfer_wait *w;

	if (!c || !(c->key = key_of(m, own_kind(m, what), m->name)) ||
	    (put && !(c->value = own_value(m, what, buffers, &c->len))) ||
	    !(c->w = xfer_wait_new())) {
		if (c) {
			free(c->key);
			free(c->value);
		}
		free(c);
		return -ENOMEM;
	}
	c->m = m;
	c->job.fn = call_run;
	w = c->w; /* call_done may free c before the post returns */
	xfer_reactor_post(m->env.control, &c->job);
	return (int)xfer_wait_for(w, META_TIMEOUT_MS);
}

/* ---- gets ---- */

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

/* A callback that waits for the next put of own key @c what. */
struct xfer_meta_waiter {
	struct xfer_meta_waiter *next;
	unsigned what;
	xfer_done_cb cb;
	void *arg;
};

/* One put of own key @p what, and those it answers. */
struct put {
	struct xfer_meta_op op;
	struct xfer_meta *m;
	struct xfer_meta_waiter *waiters;
};

static void run_waiters(struct xfer_meta *m, struct xfer_meta_waiter *w, int err)
{
	struct xfer_meta_waiter *next;

	for (; w; w = next) {
		next = w->next;
		w->cb(m->env.arg, err, w->arg);
		free(w);
	}
}

static void free_waiters(struct xfer_meta_waiter *w)
{
	struct xfer_meta_waiter *next;

	for (; w; w = next) {
		next = w->next;
		free(w);
	}
}

/* The engine is being freed: its waiters never run. */
static void put_drop(struct xfer_meta_op *op)
{
	struct put *p = container_of(op, struct put, op);

	free_waiters(p->waiters);
	free(p);
}

static void publish_done(int err, const char *value, size_t len, void *arg)
{
	struct put *p = arg;
	struct xfer_meta *m = p->m;

	(void)value;
	(void)len;
	op_end(&p->op);
	if (err) /* the reconnect will republish */
		xfer_error_set(m->env.err, err, "metadata %s: publish: %s",
			       m->env.conn, strerror(-err));
	run_waiters(m, p->waiters, err);
	free(p);
}

/* Put own key @p what from the reactor, answered to publish_done(). */
static void put_own(struct xfer_meta *m, unsigned what, struct xfer_meta_waiter *w)
{
	char *key = key_of(m, own_kind(m, what), m->name), *json;
	struct put *p = calloc(1, sizeof(*p));
	size_t len;

	json = own_value(m, what, true, &len);
	if (p) {
		p->m = m;
		p->waiters = w;
	}
	if (p)
		op_start(m, &p->op, put_drop);
	if (key && json && p)
		m->store->ops->put(m->store, key, json, len, publish_done, p);
	else if (p)
		publish_done(-ENOMEM, NULL, 0, p);
	else
		run_waiters(m, w, -ENOMEM);
	free(key);
	free(json);
}

/* Coalesced: however many changes happened since, the latest state. */
static void publish_run(struct xfer_job *j)
{
	struct xfer_meta *m = container_of(j, struct xfer_meta, publish_job);
	unsigned what = atomic_exchange(&m->publish_flags, 0);
	struct xfer_meta_waiter *w, *next, *per[XFER_META_MAX_OWN] = { 0 };

	pthread_mutex_lock(&m->lock);
	w = m->waiters;
	m->waiters = NULL;
	pthread_mutex_unlock(&m->lock);
	for (; w; w = next) { /* each to the put of its key */
		next = w->next;
		w->next = per[w->what];
		per[w->what] = w;
	}
	for (unsigned i = 0; i < own_count(m); i++) {
		if (!(m->flags & XFER_STORE_KEEPS) || !(what & 1u << i))
			run_waiters(m, per[i], 0); /* peers ask us */
		else
			put_own(m, i, per[i]);
	}
}

static void publish(struct xfer_meta *m, unsigned what)
{
	if (atomic_fetch_or(&m->publish_flags, what) == 0) {
		m->publish_job.fn = publish_run;
		xfer_reactor_post(m->env.control, &m->publish_job);
	}
}

/* Every own key. */
static unsigned all_own(const struct xfer_meta *m)
{
	return (1u << own_count(m)) - 1;
}

int xfer_meta_publish(struct xfer_meta *m, const char *kind, xfer_done_cb cb,
		      void *arg)
{
	struct xfer_meta_waiter *w;
	unsigned i = OWN_RAM;

	while (kind && i < own_count(m) && strcmp(own_kind(m, i), kind))
		i++;
	if (i == own_count(m))
		return -ENOENT;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->what = i;
	w->cb = cb;
	w->arg = arg;
	pthread_mutex_lock(&m->lock);
	w->next = m->waiters;
	m->waiters = w;
	pthread_mutex_unlock(&m->lock);
	publish(m, 1u << i);
	return 0;
}

bool xfer_meta_keeps(const struct xfer_meta *m)
{
	return m->flags & XFER_STORE_KEEPS;
}

/* The first publication waits, so a server that is down makes the engine
 * fail at once with a clear error; on the control reactor's own thread
 * (plugin mode) it goes out when the application dispatches its base. */
int xfer_meta_start(struct xfer_meta *m, const char *name, const char *host,
		    uint16_t port)
{
	int ret = 0;

	m->name = name;
	m->host = host;
	m->port = port;
	if (!(m->flags & XFER_STORE_KEEPS))
		return 0;
	if (xfer_reactor_on_thread(m->env.control)) {
		publish(m, all_own(m));
		return 0;
	}
	for (unsigned i = 0; i < own_count(m) && !ret; i++)
		ret = call(m, i, true, true);
	if (ret)
		xfer_log(XFER_LOG_ERROR, "metadata server %s: %s", m->env.conn,
			 strerror(-ret));
	return ret;
}

/* ---- withdrawal ---- */

/* One store call on a private base, driven here. */
struct oneshot {
	struct event_base *base;
	int err;
	bool done;
};

static void oneshot_done(int err, const char *value, size_t len, void *arg)
{
	struct oneshot *o = arg;

	(void)value;
	(void)len;
	o->err = err;
	o->done = true;
	event_base_loopbreak(o->base);
}

static void oneshot_changed(const char *key, void *arg)
{
	(void)key;
	(void)arg;
}

static void oneshot_reconnected(void *arg)
{
	(void)arg;
}

/* Run one store call on the private base of @p o and wait for it. */
static void oneshot_run(struct oneshot *o)
{
	static const struct timeval limit = { META_TIMEOUT_MS / 1000, 0 };

	o->done = false;
	event_base_loopexit(o->base, &limit);
	event_base_dispatch(o->base);
	if (!o->done)
		o->err = -ETIMEDOUT;
}

/*
 * Withdraw the own keys through a connection of our own on a private
 * base, so that the application's base is never dispatched here (plugin
 * mode, on its thread): ram without buffers, then every key deleted.
 */
static void stop_private(struct xfer_meta *m)
{
	struct oneshot o = { .base = event_base_new() };
	struct xfer_store_env env = {
		.base = o.base,
		.prefix = m->prefix,
		.changed = oneshot_changed,
		.reconnected = oneshot_reconnected,
		.user = m->env.user,
		.password = m->env.password,
		.handshake_max_len = m->env.handshake_max_len,
		.auth = m->env.auth,
	};
	const struct xfer_store_ops *ops = m->store->ops;
	struct xfer_store *s = NULL;
	size_t len;
	char *json = own_value(m, OWN_RAM, false, &len), *key;

	if (!o.base || !json || xfer_store_open(ops, m->env.conn, &env, &s))
		goto out;
	for (unsigned i = 0; i <= own_count(m) && !o.err; i++) {
		/* first the empty ram, then each key */
		key = key_of(m, own_kind(m, i ? i - 1 : OWN_RAM), m->name);
		if (!key)
			o.err = -ENOMEM;
		else if (i == 0)
			ops->put(s, key, json, len, oneshot_done, &o);
		else
			ops->del(s, key, oneshot_done, &o);
		if (key)
			oneshot_run(&o);
		free(key);
	}
	ops->close(s);
out:
	if (o.err || !s)
		xfer_log(XFER_LOG_WARN, "metadata %s: keys of %s not withdrawn",
			 m->env.conn, m->name);
	free(json);
	if (o.base)
		event_base_free(o.base);
}

/* On free: ram without buffers, then every own key deleted
 * (PROTOCOL.md §2). */
void xfer_meta_stop(struct xfer_meta *m)
{
	if (!(m->flags & XFER_STORE_KEEPS) || !m->name)
		return;
	if (xfer_reactor_on_thread(m->env.control)) {
		stop_private(m);
		return;
	}
	call(m, OWN_RAM, true, false);
	for (unsigned i = 0; i < own_count(m); i++)
		call(m, i, false, false);
}

/* ---- the watch ---- */

/* A segment's key changed: "ram/<name>" is segment <name>, another
 * kind's "<kind>/<name>" the segment of that name; rpc_meta is not one. */
static void on_changed(const char *key, void *arg)
{
	struct xfer_meta *m = arg;
	size_t plen = strlen(m->prefix);

	if (!key) {
		m->env.changed(NULL, m->env.arg);
		return;
	}
	if (strncmp(key, m->prefix, plen))
		return;
	key += plen;
	for (unsigned i = OWN_RAM; i < own_count(m); i++) {
		size_t n = strlen(own_kind(m, i));

		if (!strncmp(key, own_kind(m, i), n) && key[n] == '/')
			m->env.changed(i == OWN_RAM ? key + n + 1 : key,
				       m->env.arg);
	}
}

static void on_reconnected(void *arg)
{
	publish(arg, all_own(arg));
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
		.auth = env->auth,
	};
	size_t n = strlen("mooncake/") + (cid ? strlen(cid) + 1 : 0) + 1;
	int ret;

	memset(m, 0, sizeof(*m));
	m->env = *env;
	pthread_mutex_init(&m->lock, NULL);
	if (!ops) {
		xfer_log(XFER_LOG_ERROR, "metadata server '%s': unknown backend",
			 env->conn);
		return -EPROTONOSUPPORT;
	}
	m->flags = ops->flags;
	m->prefix = malloc(n);
	if (!m->prefix)
		return -ENOMEM;
	/* as Mooncake: a '/' after the id unless it ends in one */
	snprintf(m->prefix, n, "mooncake/%s%s", cid ? cid : "",
		 cid && cid[0] && cid[strlen(cid) - 1] != '/' ? "/" : "");
	senv.prefix = m->prefix;
	ret = xfer_store_open(ops, env->conn, &senv, &m->store);
	if (ret) {
		free(m->prefix);
		m->prefix = NULL;
	}
	return ret;
}

/* Pending waiters never run: the engine is being freed. The backend
 * drops the calls it holds unanswered; what they carry is freed here. */
void xfer_meta_close(struct xfer_meta *m)
{
	m->store->ops->close(m->store);
	while (m->ops) {
		struct xfer_meta_op *op = m->ops;

		op_end(op);
		op->drop(op);
	}
	free_waiters(m->waiters);
	pthread_mutex_destroy(&m->lock);
	free(m->prefix);
}
