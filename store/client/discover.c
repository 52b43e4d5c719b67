/*
 * The master found in etcd (kv_internal.h): a master address
 * "etcd://host:port[,host:port]..." names the etcd cluster xfer-stored's
 * --enable_ha elects in. The client reads the leader's address from
 * `mooncake-store/<cluster_id>/master_view` (cluster id from
 * $MC_STORE_CLUSTER_ID, else "mooncake_cluster", xfer-stored's default),
 * watches it, and when it names another master closes its connection
 * (what is in flight fails, -900, for the caller to retry) and connects
 * there: connected() mounts its segment again, which brings the new
 * leader's copy of it online. On the control reactor, with the etcd
 * backend (metadata/etcd.c) as the engine's metadata uses it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "store/client/kv_internal.h"
#include "util/log_internal.h"
#include "util/net_internal.h"

#define ETCD_PREFIX "etcd://"
/* A new leader may not listen yet when its key appears: connect again
 * after 25 ms, doubling to the tick's 1 s. */
#define RETRY_MIN_MS 25
#define RETRY_MAX_MS 1000

#ifdef XFER_HAVE_ETCD
#include "core/store.h"

struct kv_disc {
	char *endpoints;
	struct xfer_store *etcd;       /* on the reactor, once started */
	struct xfer_store_env env;
	char prefix[300], key[320];
	char addr[300];                /* the master we connect to */
	bool asking, again;
	struct event *retry;           /* connect again (kv_disc_retry) */
	int retry_ms;
};

static void ask(struct xfer_kv *kv);

static void got(int err, const char *value, size_t len, void *arg)
{
	struct xfer_kv *kv = arg;
	struct kv_disc *d = kv->disc;
	char host[256];
	uint16_t port;

	d->asking = false;
	if (!err && len && len < sizeof(d->addr) &&
	    (strlen(d->addr) != len || memcmp(d->addr, value, len))) {
		memcpy(d->addr, value, len);
		d->addr[len] = 0;
		if (xfer_split_host_port(d->addr, host, sizeof(host), &port) ||
		    xfer_net_resolve(host, port, &kv->addr, &kv->addr_len)) {
			xfer_log(XFER_LOG_WARN, "xfer store client: etcd names "
				 "master '%s', which does not resolve",
				 d->addr);
		} else {
			xfer_log(XFER_LOG_INFO, "xfer store client: the "
				 "master is %s", d->addr);
			d->retry_ms = RETRY_MIN_MS;
			kv_conn_close(kv, "the master moved");
			if (!kv->closing)
				kv_conn_start(kv);
		}
	}
	if (d->again) {
		d->again = false;
		ask(kv);
	}
}

static void ask(struct xfer_kv *kv)
{
	struct kv_disc *d = kv->disc;

	if (d->asking) {
		d->again = true;
		return;
	}
	d->asking = true;
	d->etcd->ops->get(d->etcd, d->key, got, kv);
}

static void on_changed(const char *key, void *arg)
{
	struct xfer_kv *kv = arg;

	if (!key || !strcmp(key, kv->disc->key))
		ask(kv);
}

int kv_disc_new(struct xfer_kv *kv, const char *master)
{
	const char *cid = getenv("MC_STORE_CLUSTER_ID");
	struct kv_disc *d;
	size_t n;

	if (strncmp(master, ETCD_PREFIX, strlen(ETCD_PREFIX)))
		return 1;
	d = calloc(1, sizeof(*d));
	if (!d || !(d->endpoints = strdup(master))) {
		free(d);
		return -ENOMEM;
	}
	if (!cid || !*cid)
		cid = "mooncake_cluster";
	/* Mooncake's: one '/' that ends the id is dropped */
	n = strlen(cid);
	n -= cid[n - 1] == '/';
	snprintf(d->prefix, sizeof(d->prefix), "mooncake-store/%.*s/",
		 (int)n, cid);
	snprintf(d->key, sizeof(d->key), "%smaster_view", d->prefix);
	kv->disc = d;
	return 0;
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
	struct xfer_kv *kv = arg;

	(void)fd;
	(void)what;
	if (!kv->bev && !kv->closing && kv->addr_len)
		kv_conn_start(kv);
}

void kv_disc_retry(struct xfer_kv *kv)
{
	struct kv_disc *d = kv->disc;
	struct timeval tv;

	if (!d || !d->retry)
		return;
	tv.tv_sec = d->retry_ms / 1000;
	tv.tv_usec = d->retry_ms % 1000 * 1000;
	evtimer_add(d->retry, &tv);
	if (d->retry_ms < RETRY_MAX_MS)
		d->retry_ms *= 2;
}

int kv_disc_start(struct xfer_kv *kv)
{
	struct kv_disc *d = kv->disc;
	const struct xfer_store_ops *ops;
	int ret;

	d->retry_ms = RETRY_MIN_MS;
	d->retry = evtimer_new(kv->r->base, on_retry, kv);
	if (!d->retry)
		return -ENOMEM;
	d->env = (struct xfer_store_env){
		.base = kv->r->base, .prefix = d->prefix,
		.changed = on_changed, .arg = kv,
	};
	/* etcd from the core's list of backends, as the engine's metadata
	 * finds it (no call across to metadata/) */
	ops = xfer_store_find(d->endpoints);
	if (!ops || strcmp(ops->name, "etcd"))
		return -EPROTONOSUPPORT;
	ret = xfer_store_open(ops, d->endpoints, &d->env, &d->etcd);
	if (!ret)
		ask(kv);
	return ret;
}

void kv_disc_check(struct xfer_kv *kv)
{
	if (kv->disc && kv->disc->etcd)
		ask(kv);
}

void kv_disc_free(struct xfer_kv *kv)
{
	struct kv_disc *d = kv->disc;

	if (!d)
		return;
	if (d->etcd)
		d->etcd->ops->close(d->etcd);
	if (d->retry)
		event_free(d->retry);
	free(d->endpoints);
	free(d);
	kv->disc = NULL;
}
#else
int kv_disc_new(struct xfer_kv *kv, const char *master)
{
	(void)kv;
	if (strncmp(master, ETCD_PREFIX, strlen(ETCD_PREFIX)))
		return 1;
	xfer_log(XFER_LOG_ERROR, "xfer store client: an etcd:// master needs "
		 "etcd, and this build has none (WITH_ETCD=no)");
	return -EINVAL;
}

int kv_disc_start(struct xfer_kv *kv)
{
	(void)kv;
	return -EPROTONOSUPPORT;
}

void kv_disc_check(struct xfer_kv *kv)
{
	(void)kv;
}

void kv_disc_retry(struct xfer_kv *kv)
{
	(void)kv;
}

void kv_disc_free(struct xfer_kv *kv)
{
	(void)kv;
}
#endif
