/* Engine lifecycle, local memory registration and the own descriptor. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <xfer/event.h>

#include "engine_internal.h"
#include "handshake_internal.h"
#include "net_internal.h"
#include "store.h"
#include "transport.h"

int xfer_engine_error(struct xfer_engine *e, int err, const char *fmt, ...)
{
	char msg[sizeof(e->last_error)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&e->err_lock);
	memcpy(e->last_error, msg, sizeof(msg));
	pthread_mutex_unlock(&e->err_lock);
	xfer_log(XFER_LOG_INFO, "%s", msg);
	return err;
}

const char *xfer_engine_last_error(const struct xfer_engine *e)
{
	return e->last_error;
}

const char *xfer_engine_name(const struct xfer_engine *e)
{
	return e->name;
}

uint16_t xfer_engine_rpc_port(const struct xfer_engine *e)
{
	return e->cfg.rpc_port;
}

double xfer_engine_cpu_seconds(const struct xfer_engine *e)
{
	double s = xfer_reactor_cpu_seconds(&e->control);

	for (int i = 0; i < e->nworkers; i++)
		s += xfer_reactor_cpu_seconds(&e->workers[i]);
	return s;
}

struct xfer_reactor *xfer_engine_worker(struct xfer_engine *e)
{
	if (e->nworkers == 0)
		return &e->control;
	return &e->workers[atomic_fetch_add(&e->next_worker, 1) % e->nworkers];
}

/* Encode the own descriptor, with the remotely accessible buffers or
 * with none. */
static int encode_descriptor(struct xfer_engine *e, bool with_buffers,
			     char **json, size_t *len)
{
	const struct xfer_transport_ops *ops = xfer_transports[e->main_tp];
	struct xfer_transport *t = e->tps[e->main_tp];
	struct xfer_desc d = {
		.name = e->name,
		.protocol = (char *)ops->name,
	};
	int ret = 0;

	if (with_buffers)
		ret = xfer_buffers_describe(&e->buffers, &d,
					    ops->describe_buffer, t);
	ops->describe(t, &d); /* devices and matrix stay the transport's */
	if (!ret)
		ret = xfer_desc_encode(&d, json, len);
	for (size_t i = 0; i < d.nbufs; i++) {
		free(d.bufs[i].name);
		free(d.bufs[i].lkey);
		free(d.bufs[i].rkey);
	}
	free(d.bufs);
	return ret;
}

/* Re-encode the own descriptor after the buffers changed. */
static int publish_descriptor(struct xfer_engine *e)
{
	char *json;
	size_t len;
	int ret = encode_descriptor(e, true, &json, &len);

	if (ret)
		return ret;
	pthread_mutex_lock(&e->desc_lock);
	free(e->desc_json);
	e->desc_json = json;
	e->desc_len = len;
	pthread_mutex_unlock(&e->desc_lock);
	return 0;
}

char *xfer_engine_descriptor_empty(struct xfer_engine *e, size_t *len)
{
	char *json;

	return encode_descriptor(e, false, &json, len) ? NULL : json;
}

char *xfer_engine_descriptor(struct xfer_engine *e, size_t *len)
{
	char *copy;

	pthread_mutex_lock(&e->desc_lock);
	copy = malloc(e->desc_len + 1);
	if (copy) {
		memcpy(copy, e->desc_json, e->desc_len + 1);
		*len = e->desc_len;
	}
	pthread_mutex_unlock(&e->desc_lock);
	return copy;
}

static bool valid_location(const char *loc)
{
	size_t n;

	if (!loc)
		return false;
	n = strlen(loc);
	return n > 0 && n < XFER_DESC_MAX_STR;
}

/* Undo the registrations of @p b with transports [0, n). */
static void unreg_buffer(struct xfer_engine *e, struct xfer_buffer *b, int n)
{
	while (n-- > 0)
		if (e->tps[n] && xfer_transports[n]->unreg)
			xfer_transports[n]->unreg(e->tps[n], b);
}

int xfer_register(struct xfer_engine *e, void *addr, size_t len,
		  const char *location, bool remote_access)
{
	uintptr_t a = (uintptr_t)addr;
	struct xfer_buffer *b;
	int ret = 0, i;

	if (!addr || len == 0 || a + len < a || !valid_location(location))
		return xfer_engine_error(e, -EINVAL,
					 "register %p+%zu: bad range or location",
					 addr, len);
	b = xfer_buffer_new(a, len, location, remote_access);
	if (!b)
		return -ENOMEM;
	for (i = 0; i < XFER_NTRANSPORTS && !ret; i++)
		if (e->tps[i] && xfer_transports[i]->reg)
			ret = xfer_transports[i]->reg(e->tps[i], b);
	if (ret) {
		unreg_buffer(e, b, i - 1);
		xfer_buffer_free(b);
		return xfer_engine_error(e, ret, "register %p+%zu: %s", addr,
					 len, strerror(-ret));
	}
	ret = xfer_buffers_insert(&e->buffers, b);
	if (ret) {
		unreg_buffer(e, b, XFER_NTRANSPORTS);
		xfer_buffer_free(b);
		if (ret == -EEXIST)
			return xfer_engine_error(e, ret, "register %p+%zu: "
						 "overlaps a registered buffer",
						 addr, len);
		return ret;
	}
	ret = publish_descriptor(e);
	if (!ret)
		xfer_meta_publish_ram(e);
	else if (!xfer_buffers_remove(&e->buffers, a, &b)) {
		unreg_buffer(e, b, XFER_NTRANSPORTS);
		xfer_buffer_free(b);
	}
	return ret;
}

int xfer_unregister(struct xfer_engine *e, void *addr)
{
	struct xfer_buffer *b;
	int ret = xfer_buffers_remove(&e->buffers, (uintptr_t)addr, &b);

	if (ret)
		return xfer_engine_error(e, ret, "unregister %p: %s", addr,
					 ret == -EBUSY ? "in use by a transfer"
						       : "not a registered buffer");
	ret = publish_descriptor(e);
	if (!ret)
		xfer_meta_publish_ram(e);
	unreg_buffer(e, b, XFER_NTRANSPORTS);
	xfer_buffer_free(b);
	return ret;
}

int xfer_engine_connection(struct xfer_engine *e,
			   const struct xfer_hs_conn *req,
			   struct xfer_hs_conn *reply)
{
	for (int i = 0; i < XFER_NTRANSPORTS; i++)
		if (e->tps[i] && xfer_transports[i]->connection)
			return xfer_transports[i]->connection(e->tps[i], req,
							      reply);
	return 0; /* no RDMA here: every field empty */
}

int xfer_engine_device_stats(struct xfer_engine *e, size_t index,
			     const char **name, uint64_t *bytes)
{
	for (int i = 0; i < XFER_NTRANSPORTS; i++)
		if (e->tps[i] && xfer_transports[i]->device_stats)
			return xfer_transports[i]->device_stats(e->tps[i], index,
								name, bytes);
	return -ENOENT;
}

/* Start the transports every engine runs and the configured one. */
static int start_transports(struct xfer_engine *e)
{
	int ret;

	for (int i = 0; xfer_transports[i]; i++) {
		const struct xfer_transport_ops *ops = xfer_transports[i];

		if (!strcmp(ops->name, e->cfg.protocol))
			e->main_tp = i;
		if (!ops->init || (!ops->always &&
				   strcmp(ops->name, e->cfg.protocol)))
			continue;
		ret = ops->init(e, &e->tps[i]);
		if (ret)
			return ret;
	}
	return 0;
}

/* Close the transports, after every buffer has left them. */
static void stop_transports(struct xfer_engine *e)
{
	for (size_t i = 0; i < e->buffers.n; i++)
		unreg_buffer(e, e->buffers.v[i], XFER_NTRANSPORTS);
	for (int i = XFER_NTRANSPORTS - 1; i >= 0; i--) {
		if (e->tps[i])
			xfer_transports[i]->fini(e->tps[i]);
		e->tps[i] = NULL;
	}
}

static int check_config(const struct xfer_config *c)
{
	if (c->workers < 0 || c->workers > XFER_MAX_WORKERS ||
	    c->slice_size < 4096 || c->slice_size > (64u << 20) ||
	    c->tcp_conns < 1 || c->tcp_conns > 64 ||
	    c->handshake_max_len < 64 || c->handshake_max_len > (128u << 20) ||
	    !c->bind_addr || !c->metadata_server || !c->protocol ||
	    (strcmp(c->protocol, "tcp") && strcmp(c->protocol, "rdma")) ||
	    c->qps_per_ep < 1 || c->qps_per_ep > 64 ||
	    c->max_ep_per_ctx < 1 || c->max_ep_per_ctx > 65536 ||
	    c->retry_cnt < 0 || c->retry_cnt > 64 || c->gid_index < -1 ||
	    (c->mtu && (c->mtu < 256 || c->mtu > 4096 ||
			(c->mtu & (c->mtu - 1)))) ||
	    c->max_wr < 1 || c->max_wr > 16384 ||
	    c->max_cqe < 16 || c->max_cqe > (1 << 20) || c->ib_port < 1 ||
	    c->ib_port > 255)
		return -EINVAL;
	return 0;
}

/*
 * The host peers reach this engine at: the host of a `host:port` name
 * (whose port is then the handshake port), in p2p mode a bare name, else a
 * specific bind address, else the machine's host name. With a central
 * store a bare name is only a segment name.
 */
static int pick_host(struct xfer_engine *e, bool p2p, uint16_t *port)
{
	const char *n = e->cfg.local_server_name, *b = e->cfg.bind_addr;
	char host[256];

	*port = e->cfg.rpc_port;
	if (n && strchr(n, ':')) {
		if (xfer_split_host_port(n, host, sizeof(host), port))
			return -EINVAL;
		if (e->cfg.rpc_port && e->cfg.rpc_port != *port)
			return -EINVAL;
	} else if (n && p2p) {
		snprintf(host, sizeof(host), "%s", n);
	} else if (strcmp(b, "0.0.0.0") && strcmp(b, "::")) {
		snprintf(host, sizeof(host), "%s", b);
	} else if (gethostname(host, sizeof(host))) {
		return -errno;
	}
	e->host = strdup(host);
	return e->host ? 0 : -ENOMEM;
}

/* Copy optional string @p src into *copy and point *field at it. */
static int dup_opt(const char *src, char **copy, const char **field)
{
	*field = NULL;
	if (!src)
		return 0;
	*copy = strdup(src);
	*field = *copy;
	return *copy ? 0 : -ENOMEM;
}

/* Free what the engine holds once its reactors and transports are gone. */
static void engine_release(struct xfer_engine *e)
{
	xfer_buffers_fini(&e->buffers);
	free(e->desc_json);
	free(e->prefix);
	free(e->name);
	free(e->host);
	free(e->cfg_bind);
	free(e->cfg_meta);
	free(e->cfg_name);
	free(e->cfg_cluster);
	free(e->cfg_user);
	free(e->cfg_password);
	free(e->cfg_protocol);
	free(e->cfg_devices);
	free(e->cfg_matrix);
	pthread_mutex_destroy(&e->seg_lock);
	pthread_mutex_destroy(&e->desc_lock);
	pthread_mutex_destroy(&e->err_lock);
	free(e);
}

static struct xfer_engine *engine_new(struct event_base *base,
				      const struct xfer_config *cfg)
{
	const struct xfer_store_ops *store_ops;
	struct xfer_config defaults;
	struct xfer_engine *e;
	uint16_t port;
	char name[300];
	int ret, i;

	if (!cfg) {
		xfer_config_init(&defaults);
		cfg = &defaults;
	}
	if (check_config(cfg)) {
		errno = EINVAL;
		return NULL;
	}
	store_ops = xfer_store_find(cfg->metadata_server);
	if (!store_ops) {
		xfer_log(XFER_LOG_ERROR, "metadata server '%s': unknown backend",
			 cfg->metadata_server);
		errno = EPROTONOSUPPORT;
		return NULL;
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		errno = ENOMEM;
		return NULL;
	}
	e->cfg = *cfg;
	xfer_buffers_init(&e->buffers);
	pthread_mutex_init(&e->seg_lock, NULL);
	pthread_mutex_init(&e->desc_lock, NULL);
	pthread_mutex_init(&e->err_lock, NULL);
	ret = -ENOMEM;
	/* Own copies of the strings: the caller's need not outlive this. */
	if (dup_opt(cfg->bind_addr, &e->cfg_bind, &e->cfg.bind_addr) ||
	    dup_opt(cfg->protocol, &e->cfg_protocol, &e->cfg.protocol) ||
	    dup_opt(cfg->device_names, &e->cfg_devices,
		    &e->cfg.device_names) ||
	    dup_opt(cfg->nic_priority_matrix, &e->cfg_matrix,
		    &e->cfg.nic_priority_matrix) ||
	    dup_opt(cfg->metadata_server, &e->cfg_meta,
		    &e->cfg.metadata_server) ||
	    dup_opt(cfg->local_server_name, &e->cfg_name,
		    &e->cfg.local_server_name) ||
	    dup_opt(cfg->cluster_id, &e->cfg_cluster, &e->cfg.cluster_id) ||
	    dup_opt(cfg->metadata_user, &e->cfg_user, &e->cfg.metadata_user) ||
	    dup_opt(cfg->metadata_password, &e->cfg_password,
		    &e->cfg.metadata_password))
		goto err_free;
	ret = pick_host(e, store_ops == &xfer_p2p_ops, &port);
	if (ret)
		goto err_free;

	ret = xfer_reactor_init(&e->control, base, "xfer-control");
	if (ret)
		goto err_free;
	for (i = 0; i < cfg->workers; i++, e->nworkers++) {
		char wname[16];

		snprintf(wname, sizeof(wname), "xfer-w%d", i & 0xff);
		ret = xfer_reactor_init(&e->workers[i], NULL, wname);
		if (ret)
			goto err_reactors;
	}
	ret = xfer_meta_open(e, store_ops);
	if (ret)
		goto err_reactors;
	ret = xfer_handshake_listen(e, e->cfg_bind, &port, &e->hs);
	if (ret)
		goto err_store;
	e->cfg.rpc_port = port;
	snprintf(name, sizeof(name), "%s:%u", e->host, port);
	e->name = strdup(store_ops == &xfer_p2p_ops || !e->cfg_name ? name
								     : e->cfg_name);
	ret = -ENOMEM;
	if (!e->name)
		goto err_handshake;
	ret = start_transports(e);
	if (ret)
		goto err_tcp;
	ret = publish_descriptor(e);
	if (ret)
		goto err_tcp;
	ret = xfer_reactor_start(&e->control);
	for (i = 0; i < e->nworkers && !ret; i++)
		ret = xfer_reactor_start(&e->workers[i]);
	if (!ret)
		ret = xfer_meta_start(e);
	if (ret)
		goto err_stop;
	xfer_log(XFER_LOG_INFO, "engine %s up: %d workers", e->name,
		 e->nworkers);
	return e;

err_stop:
	xfer_reactor_stop(&e->control);
	for (i = 0; i < e->nworkers; i++)
		xfer_reactor_stop(&e->workers[i]);
err_tcp:
	stop_transports(e);
err_handshake:
	xfer_handshake_close(e->hs);
err_store:
	e->store->ops->close(e->store);
err_reactors:
	for (i = 0; i < e->nworkers; i++)
		xfer_reactor_destroy(&e->workers[i]);
	xfer_reactor_destroy(&e->control);
err_free:
	xfer_log(XFER_LOG_ERROR, "engine: %s", strerror(-ret));
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
	xfer_meta_stop(e);
	xfer_reactor_stop(&e->control);
	for (i = 0; i < e->nworkers; i++)
		xfer_reactor_stop(&e->workers[i]);
	xfer_handshake_close(e->hs);
	stop_transports(e);
	e->store->ops->close(e->store);
	for (i = 0; i < e->nworkers; i++)
		xfer_reactor_destroy(&e->workers[i]);
	xfer_reactor_destroy(&e->control);
	for (size_t s = 0; s < e->nsegs; s++)
		xfer_segment_destroy(e->segs[s]);
	free(e->segs);
	engine_release(e);
}
