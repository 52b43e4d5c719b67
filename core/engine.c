/* Engine lifecycle: configuration, transports, the handshake listener
 * and metadata, start and stop (local memory is register.c's). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/dns.h>
#include <xfer/event.h>

#include "util/auth_internal.h"
#include "core/control_internal.h"
#include "core/engine_internal.h"
#include "core/handshake_internal.h"
#include "util/net_internal.h"
#include "core/notify_internal.h"
#include "util/wait_internal.h"

const char *xfer_engine_last_error(const struct xfer_engine *e)
{
	return xfer_error_get(&e->err);
}

const char *xfer_engine_name(const struct xfer_engine *e)
{
	return e->name;
}

uint16_t xfer_engine_rpc_port(const struct xfer_engine *e)
{
	return e->rpc_port;
}

const char *xfer_engine_host(const struct xfer_engine *e)
{
	return e->host;
}

struct xfer_reactor *xfer_engine_control(struct xfer_engine *e)
{
	return &e->control;
}

const struct xfer_auth *xfer_engine_auth(const struct xfer_engine *e)
{
	return e->auth;
}

double xfer_engine_cpu_seconds(const struct xfer_engine *e)
{
	double s = xfer_reactor_cpu_seconds(&e->control);

	for (int i = 0; i < e->nworkers; i++)
		s += xfer_reactor_cpu_seconds(&e->workers[i]);
	/* and the threads of the transports' own (RDMA devices, files) */
	for (int i = 0; e->tps[i]; i++)
		s += e->tps[i]->ops->cpu_seconds(e->tps[i]);
	return s;
}

static struct xfer_reactor *next_worker(void *arg)
{
	struct xfer_engine *e = arg;

	if (e->nworkers == 0)
		return &e->control;
	return &e->workers[atomic_fetch_add(&e->next_worker, 1) % e->nworkers];
}

/* ---- what transports answer for the engine ---- */

static char *hs_descriptor(const char *kind, size_t *len, void *arg)
{
	return xfer_engine_own_descriptor(kind, true, len, arg);
}

static int hs_notify(const struct xfer_hs_notify *n, void *arg)
{
	return xfer_notify_receive(arg, n->name, n->notify_msg);
}

/* A Connection request goes to the first transport that takes them. */
static int hs_connection(const struct xfer_hs_conn *req,
			 struct xfer_hs_conn *reply, void *arg)
{
	struct xfer_engine *e = arg;
	int ret = -EOPNOTSUPP;

	for (int i = 0; e->tps[i] && ret == -EOPNOTSUPP; i++)
		ret = e->tps[i]->ops->connection(e->tps[i], req, reply);
	return ret;
}

int xfer_engine_device_stats(struct xfer_engine *e, size_t index,
			     const char **name, uint64_t *bytes)
{
	int ret = -ENOENT;

	for (int i = 0; e->tps[i] && ret == -ENOENT; i++)
		ret = e->tps[i]->ops->device_stats(e->tps[i], index, name,
						   bytes);
	return ret;
}

/* ---- start and stop ---- */

/* Where the knob values of transport @p ops lie in e->tp_knobs: each
 * transport of the table has its place, started or not. */
static union xfer_knob_val *knobs_of(struct xfer_engine *e,
				     const struct xfer_transport_ops *ops)
{
	const struct xfer_transport_ops *const *tp = xfer_transports();
	union xfer_knob_val *knobs = e->tp_knobs;

	for (size_t i = 0; tp[i] != ops; i++)
		knobs += xfer_knobs_count(tp[i]->knobs);
	return knobs;
}

/* Start @p ops as the engine's transport number @p n, its knobs read
 * from e->cfg. */
static int start_transport(struct xfer_engine *e,
			   const struct xfer_transport_ops *ops, int n,
			   struct xfer_transport **out)
{
	struct xfer_transport_env *env = &e->tp_env[n];
	union xfer_knob_val *knobs = knobs_of(e, ops);
	struct xfer_transport *t;
	int ret;

	*env = (struct xfer_transport_env){
		.name = e->name,
		.bind_addr = xfer_config_val(e->cfg, "bind_addr").str,
		.transfer_timeout_ms = (uint32_t)xfer_config_val(
			e->cfg, "transfer_timeout_ms").num,
		.handshake_max_len = (uint32_t)xfer_config_val(
			e->cfg, "handshake_max_len").num,
		.idle_timeout_ms = (uint32_t)xfer_config_val(
			e->cfg, "conn_idle_timeout_ms").num,
		.max_conns = (unsigned)xfer_config_val(
			e->cfg, "max_data_conns").num,
		.max_new_conns = (unsigned)xfer_config_val(
			e->cfg, "max_new_data_conns").num,
		.max_conns_per_addr = (unsigned)xfer_config_val(
			e->cfg, "max_data_conns_per_addr").num,
		.auth_timeout_ms = (uint32_t)xfer_config_val(
			e->cfg, "auth_timeout_ms").num,
		.auth = e->auth,
		.control = &e->control,
		.nworkers = e->nworkers,
		.worker = next_worker,
		.buffers = &e->buffers,
		.err = &e->err,
		.knobs = knobs,
		.arg = e,
	};
	xfer_config_vals(e->cfg, ops->knobs, knobs);
	ret = ops->init(env, &t);
	if (ret)
		return ret;
	t->ops = ops;
	t->env = env;
	*out = t;
	return 0;
}

/* Start the transports every engine runs and the configured one. */
static int start_transports(struct xfer_engine *e, const char *protocol)
{
	const struct xfer_transport_ops *const *tp = xfer_transports();
	size_t nknobs = 0;
	int n = 0, nkinds = 0, ret;

	for (size_t i = 0; tp[i]; i++)
		nknobs += xfer_knobs_count(tp[i]->knobs);
	e->tp_knobs = calloc(nknobs ? nknobs : 1, sizeof(*e->tp_knobs));
	if (!e->tp_knobs)
		return -ENOMEM;
	for (size_t i = 0; tp[i]; i++) {
		const struct xfer_transport_ops *ops = tp[i];
		struct xfer_transport *t;

		if (!(ops->flags & XFER_TP_ALWAYS) && strcmp(ops->name, protocol))
			continue;
		ret = start_transport(e, ops, n, &t);
		if (ret)
			return ret;
		e->tps[n++] = t;
		if (ops->kind)
			e->kinds[nkinds++] = ops->kind;
		if (ops->flags & XFER_TP_LOCAL)
			e->local = t;
		else if (!strcmp(ops->name, protocol))
			e->main = t;
	}
	return 0;
}

/* A transport added to the running engine, on the control reactor. */
struct add {
	struct xfer_engine *e;
	const struct xfer_transport_ops *ops;
	const struct xfer_config *cfg;
	int ret;
};

/* Its knobs taken from a->cfg into e->cfg (where their strings live as
 * long as the engine), started, every registered buffer registered with
 * it (here, where a leaving buffer is taken out of the registry), then
 * in the list and advertised; or the engine runs on as it was. It has no
 * metadata kind (xfer_transport_find() names none that has). */
static void add_transport(void *arg)
{
	struct add *a = arg;
	struct xfer_engine *e = a->e;
	struct xfer_transport *t, *was = e->main;
	const struct xfer_knob *k = a->ops->knobs;
	int n = 0, ret = 0;
	size_t i = 0;

	while (e->tps[n])
		n++;
	for (; a->cfg && k && k->key.name && !ret; k++)
		ret = xfer_config_set(e->cfg, k->key.name,
				      xfer_config_get(a->cfg, k->key.name));
	if (ret)
		ret = xfer_error_set(&e->err, ret, "add transport %s: knob %s: "
				     "%s", a->ops->name, k[-1].key.name,
				     strerror(-ret));
	if (!ret)
		ret = start_transport(e, a->ops, n, &t); /* says why */
	if (ret) {
		a->ret = ret;
		return;
	}
	for (; i < e->buffers.n; i++) {
		ret = t->ops->reg(t, e->buffers.v[i]);
		if (ret) {
			xfer_error_set(&e->err, ret, "add transport %s: "
				       "register %#llx: %s", a->ops->name,
				       (unsigned long long)e->buffers.v[i]->addr,
				       strerror(-ret));
			break;
		}
	}
	if (!ret) {
		e->tps[n] = t;
		e->main = t;
		ret = xfer_engine_update_descriptor(e);
		if (!ret) {
			a->ret = 0;
			return;
		}
		e->tps[n] = NULL;
		e->main = was;
	}
	while (i-- > 0)
		t->ops->unreg(t, e->buffers.v[i]);
	t->ops->fini(t);
	a->ret = ret;
}

int xfer_engine_add_transport(struct xfer_engine *e, const char *name,
			      const struct xfer_config *cfg)
{
	struct add a = { .e = e, .cfg = cfg };
	struct xfer_wait *w;
	int wait;

	if (!e || !name)
		return -EINVAL;
	a.ops = xfer_transport_find(name);
	if (!a.ops)
		return xfer_error_set(&e->err, -EINVAL, "add transport %s: none "
				      "of that name", name);
	for (int n = 0; e->tps[n]; n++)
		if (e->tps[n]->ops == a.ops)
			return xfer_error_set(&e->err, -EEXIST, "add transport "
					      "%s: started already", name);
	wait = xfer_engine_publish_wait(e);
	if (wait < 0)
		return wait;
	xfer_reactor_run(&e->control, add_transport, &a);
	if (a.ret)
		return a.ret;
	if (!wait)
		return 0; /* peers ask the engine itself */
	w = xfer_wait_new();
	if (!w)
		return -ENOMEM;
	return xfer_wait_published(w, xfer_meta_publish(&e->meta, NULL,
							 xfer_wait_cb, w));
}

/* Close the transports, after every segment and buffer has left them. */
static void stop_transports(struct xfer_engine *e)
{
	int n = 0;

	xfer_segments_release(&e->segs);
	xfer_engine_unreg_buffers(e);
	while (e->tps[n])
		n++;
	while (n-- > 0) {
		e->tps[n]->ops->fini(e->tps[n]);
		e->tps[n] = NULL;
	}
	free(e->tp_knobs);
}

/*
 * The host peers reach this engine at: the host of a `host:port` name
 * (whose port is then the handshake port), with names that are addresses
 * (peer to peer) a bare name, else a specific bind address, else the machine's
 * host name. With a central store a bare name is only a segment name.
 */
static int pick_host(struct xfer_engine *e, bool addr_names, uint16_t *port)
{
	const char *n = xfer_config_val(e->cfg, "local_server_name").str;
	const char *b = xfer_config_val(e->cfg, "bind_addr").str;
	char host[256];

	if (n && strchr(n, ':')) {
		if (xfer_split_host_port(n, host, sizeof(host), port))
			return -EINVAL;
		if (e->rpc_port && e->rpc_port != *port)
			return -EINVAL;
	} else if (n && addr_names) {
		snprintf(host, sizeof(host), "%s", n);
	} else if (strcmp(b, "0.0.0.0") && strcmp(b, "::")) {
		snprintf(host, sizeof(host), "%s", b);
	} else if (gethostname(host, sizeof(host))) {
		return -errno;
	}
	e->host = strdup(host);
	return e->host ? 0 : -ENOMEM;
}

/* Listen for handshakes on bind_addr:*port (0: any free port). */
static int listen_handshake(struct xfer_engine *e, uint16_t *port)
{
	const char *bind = xfer_config_val(e->cfg, "bind_addr").str;
	uint64_t budget = (uint64_t)xfer_config_val(e->cfg,
						    "handshake_buffer_max").num;
	struct xfer_hs_env env = {
		.base = e->control.base,
		.max_len = e->hs_max_len,
		.max_conns = (unsigned)xfer_config_val(e->cfg,
						       "max_handshake_conns").num,
		.max_conns_per_addr = (unsigned)xfer_config_val(e->cfg,
					"max_handshake_conns_per_addr").num,
		.auth_timeout_ms = (uint32_t)xfer_config_val(e->cfg,
							   "auth_timeout_ms").num,
		/* room for one largest frame at least */
		.buffer_max = budget > e->hs_max_len ? budget : e->hs_max_len + 1,
		.auth = e->auth,
		.connection = hs_connection,
		.descriptor = hs_descriptor,
		.notify = hs_notify,
		.arg = e,
	};
	struct sockaddr_storage ss;
	socklen_t len;
	int ret;

	if (xfer_net_parse(bind, *port, &ss, &len))
		return xfer_error_set(&e->err, -EINVAL,
				      "bind address %s: not numeric", bind);
	ret = xfer_handshake_listen(&env, (struct sockaddr *)&ss, len, port,
				    &e->hs);
	if (ret)
		return xfer_error_set(&e->err, ret, "handshake listen %s:%u: %s",
				      bind, *port, strerror(-ret));
	return 0;
}

static void on_changed(const char *name, void *arg)
{
	struct xfer_engine *e = arg;

	xfer_segments_refresh(&e->segs, name);
}

static int open_meta(struct xfer_engine *e)
{
	const struct xfer_config *c = e->cfg;
	struct xfer_meta_env env = {
		.control = &e->control,
		.conn = xfer_config_val(c, "metadata_server").str,
		.cluster_id = xfer_config_val(c, "cluster_id").str,
		.user = xfer_config_val(c, "metadata_user").str,
		.password = xfer_config_val(c, "metadata_password").str,
		.handshake_max_len = (uint32_t)xfer_config_val(
			c, "handshake_max_len").num,
		.auth = e->auth,
		.document = xfer_engine_own_descriptor,
		.kinds = e->kinds,
		.changed = on_changed,
		.err = &e->err,
		.arg = e,
	};

	return xfer_meta_open(&e->meta, &env);
}

/* Drop what lives on the control base: segments and their operations,
 * the resolver, notifications. The reactors are stopped. */
/* The notifier first: a notification still out holds a use of its
 * segment, which it gives back as it goes. */
static void control_fini(struct xfer_engine *e)
{
	xfer_notifier_fini(&e->notes);
	xfer_segments_fini(&e->segs);
	if (e->dns)
		evdns_base_free(e->dns, 0);
}

/* Free what the engine holds once its reactors and transports are gone. */
static void engine_release(struct xfer_engine *e)
{
	xfer_buffers_fini(&e->buffers);
	free(e->desc_json);
	free(e->name);
	free(e->host);
	xfer_config_free(e->cfg);
	xfer_auth_free(e->auth);
	pthread_mutex_destroy(&e->desc_lock);
	pthread_mutex_destroy(&e->batches_lock);
	xfer_error_fini(&e->err);
	free(e);
}

/* Copy @p cfg (NULL: a new one) and read the core's knobs from it. */
static int engine_config(struct xfer_engine *e, const struct xfer_config *cfg)
{
	const char *protocol, *secret;

	e->cfg = cfg ? xfer_config_dup(cfg) : xfer_config_new();
	if (!e->cfg)
		return -errno;
	protocol = xfer_config_val(e->cfg, "protocol").str;
	if (!protocol || !xfer_transport_find(protocol)) {
		xfer_log(XFER_LOG_ERROR, "protocol '%s': no such transport",
			 protocol ? protocol : "");
		return -EINVAL;
	}
	e->slice_size = (size_t)xfer_config_val(e->cfg, "slice_size").num;
	e->hs_max_len = (uint32_t)xfer_config_val(e->cfg,
						  "handshake_max_len").num;
	e->rpc_port = (uint16_t)xfer_config_val(e->cfg, "rpc_port").num;
	secret = xfer_config_val(e->cfg, "auth_secret").str;
	if (secret && *secret && !(e->auth = xfer_auth_new(secret)))
		return -ENOMEM;
	return 0;
}

static struct xfer_engine *engine_new(struct event_base *base,
				      const struct xfer_config *cfg)
{
	struct xfer_engine *e = calloc(1, sizeof(*e));
	int ret, i, workers;
	uint16_t port;
	char name[300];
	bool addr_names;

	if (!e) {
		errno = ENOMEM;
		return NULL;
	}
	xfer_engine_buffers_init(e);
	xfer_segments_init(&e->segs);
	xfer_notifier_init(&e->notes);
	pthread_mutex_init(&e->desc_lock, NULL);
	pthread_mutex_init(&e->batches_lock, NULL);
	LIST_INIT(&e->batches);
	xfer_error_init(&e->err);
	ret = engine_config(e, cfg);
	if (ret)
		goto err_free;
	ret = xfer_reactor_init(&e->control, base, "xfer-control");
	if (ret)
		goto err_free;
	workers = (int)xfer_config_val(e->cfg, "workers").num;
	for (i = 0; i < workers; i++, e->nworkers++) {
		char wname[16];

		snprintf(wname, sizeof(wname), "xfer-w%d", i & 0xff);
		ret = xfer_reactor_init(&e->workers[i], NULL, wname);
		if (ret)
			goto err_reactors;
	}
	ret = open_meta(e);
	if (ret)
		goto err_reactors;
	addr_names = e->meta.flags & XFER_STORE_ADDR_NAMES;
	port = e->rpc_port;
	ret = pick_host(e, addr_names, &port);
	if (ret)
		goto err_store;
	ret = listen_handshake(e, &port);
	if (ret)
		goto err_store;
	e->rpc_port = port;
	snprintf(name, sizeof(name), "%s:%u", e->host, port);
	if (!addr_names && xfer_config_val(e->cfg, "local_server_name").str)
		snprintf(name, sizeof(name), "%s",
			 xfer_config_val(e->cfg, "local_server_name").str);
	e->name = strdup(name);
	ret = -ENOMEM;
	if (!e->name)
		goto err_handshake;
	ret = start_transports(e, xfer_config_val(e->cfg, "protocol").str);
	if (ret)
		goto err_transports;
	/* names in rpc_meta resolve on the reactor, never blocking it */
	e->dns = evdns_base_new(e->control.base,
				EVDNS_BASE_INITIALIZE_NAMESERVERS |
				EVDNS_BASE_DISABLE_WHEN_INACTIVE);
	ret = -ENOMEM;
	if (!e->dns)
		goto err_transports;
	e->segs.e = e;
	e->segs.dns = e->dns;
	e->segs.meta = &e->meta;
	e->segs.buffers = &e->buffers;
	e->segs.tps = e->tps;
	e->segs.codecs = xfer_transport_codecs();
	e->segs.own_name = e->name;
	e->segs.err = &e->err;
	ret = xfer_engine_update_descriptor(e);
	if (ret)
		goto err_transports;
	ret = xfer_reactor_start(&e->control);
	for (i = 0; i < e->nworkers && !ret; i++)
		ret = xfer_reactor_start(&e->workers[i]);
	if (!ret)
		ret = xfer_meta_start(&e->meta, e->name, e->host, e->rpc_port);
	if (ret)
		goto err_stop;
	xfer_log(XFER_LOG_INFO, "engine %s up: %d workers", e->name,
		 e->nworkers);
	return e;

err_stop:
	xfer_reactor_stop(&e->control);
	for (i = 0; i < e->nworkers; i++)
		xfer_reactor_stop(&e->workers[i]);
err_transports:
	stop_transports(e);
err_handshake:
	xfer_handshake_close(e->hs);
err_store:
	xfer_meta_close(&e->meta);
err_reactors:
	control_fini(e);
	for (i = 0; i < e->nworkers; i++)
		xfer_reactor_destroy(&e->workers[i]);
	xfer_reactor_destroy(&e->control);
err_free:
	/* the step that failed said why (no RDMA device, which one ...) */
	xfer_log(XFER_LOG_ERROR, "engine: %s%s%s", strerror(-ret),
		 e->err.msg[0] ? ": " : "", e->err.msg);
	engine_release(e);
	errno = -ret;
	return NULL;
}

struct xfer_engine *xfer_engine_new(const struct xfer_config *cfg)
{
	return engine_new(NULL, cfg);
}

struct xfer_engine *xfer_engine_new_on_base(struct event_base *base,
					    const struct xfer_config *cfg)
{
	if (!base) {
		errno = EINVAL;
		return NULL;
	}
	return engine_new(base, cfg);
}

void xfer_engine_free(struct xfer_engine *e)
{
	int i;

	if (!e)
		return;
	xfer_meta_stop(&e->meta);
	xfer_reactor_stop(&e->control);
	for (i = 0; i < e->nworkers; i++)
		xfer_reactor_stop(&e->workers[i]);
	xfer_handshake_close(e->hs);
	stop_transports(e);
	xfer_batches_orphan(e);
	xfer_meta_close(&e->meta);
	control_fini(e);
	for (i = 0; i < e->nworkers; i++)
		xfer_reactor_destroy(&e->workers[i]);
	xfer_reactor_destroy(&e->control);
	engine_release(e);
}
