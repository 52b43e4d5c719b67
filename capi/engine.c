/*
 * Mooncake's C API: the engine. createTransferEngine() turns Mooncake's
 * arguments into an xfer configuration; installTransport() adds RDMA to
 * the running engine (xfer_engine_add_transport()); uninstallTransport()
 * remakes the engine with TCP, keeping its name, port, registered memory
 * and segment ids.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#include "capi/capi_internal.h"

/* Handles installTransport() returns: one per transport, never freed. */
static char tcp_handle, rdma_handle;

static void te_log(const char *fmt, const char *arg)
{
	fputs("transfer_engine: ", stderr);
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
}

/*
 * Peer to peer, Mooncake names the engine `host:<a free port>` whatever
 * port local_server_name carries: keep its host part only ("h", "h:p",
 * "[v6]:p"). *out is malloc'd.
 */
static int p2p_host(const char *name, char **out)
{
	const char *colon = strrchr(name, ':');
	size_t n = strlen(name);

	if (name[0] == '[' && colon && colon > name && colon[-1] == ']')
		n = (size_t)(colon - name);
	else if (colon && strchr(name, ':') == colon)
		n = (size_t)(colon - name);
	*out = strndup(name, n);
	return *out ? 0 : -ENOMEM;
}

static bool is_p2p(const char *conn)
{
	return !strcmp(conn, "P2PHANDSHAKE") || !strcmp(conn, "p2p");
}

static int config_for(struct xfer_config *cfg, const char *conn,
		      const char *name)
{
	char *host = NULL;
	int ret = xfer_config_set(cfg, "metadata_server", conn);

	if (!ret && name && *name && is_p2p(conn)) {
		ret = p2p_host(name, &host);
		if (!ret)
			ret = xfer_config_set(cfg, "local_server_name", host);
		free(host);
	} else if (!ret && name && *name) {
		ret = xfer_config_set(cfg, "local_server_name", name);
	}
	return ret;
}

/*
 * An engine of t->cfg with the transport @p rdma says and handshake port
 * @p port (0: as it is); the keys stay set in t->cfg. NULL with errno.
 */
static struct xfer_engine *engine_with(struct te *t, bool rdma,
				       uint16_t port)
{
	char num[8];
	int ret = xfer_config_set(t->cfg, "protocol", rdma ? "rdma" : "tcp");

	if (!ret && port) {
		snprintf(num, sizeof(num), "%u", port);
		ret = xfer_config_set(t->cfg, "rpc_port", num);
	}
	if (ret) {
		errno = -ret;
		return NULL;
	}
	return xfer_engine_new(t->cfg);
}

static void te_free(struct te *t)
{
	te_segs_fini(t);
	te_mems_fini(t);
	te_files_fini(t);
	free(t->slots);
	xfer_config_free(t->cfg);
	pthread_rwlock_destroy(&t->batch_lock);
	pthread_mutex_destroy(&t->seg_lock);
	pthread_mutex_destroy(&t->mem_lock);
	pthread_rwlock_destroy(&t->lock);
	free(t);
}

transfer_engine_t createTransferEngine(const char *metadata_conn_string,
				       const char *local_server_name,
				       const char *ip_or_host_name,
				       uint64_t rpc_port, int auto_discover)
{
	struct te *t;
	int ret;

	(void)ip_or_host_name; /* unused by Mooncake as well */
	(void)rpc_port;
	if (!metadata_conn_string || !*metadata_conn_string) {
		te_log("createTransferEngine: %s", "no metadata connection string");
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	pthread_rwlock_init(&t->lock, NULL);
	pthread_mutex_init(&t->mem_lock, NULL);
	pthread_mutex_init(&t->seg_lock, NULL);
	pthread_rwlock_init(&t->batch_lock, NULL);
	t->cfg = xfer_config_new();
	ret = t->cfg ? config_for(t->cfg, metadata_conn_string,
				  local_server_name) : -errno;
	if (ret) {
		te_log("createTransferEngine: bad configuration (%s)",
		       strerror(-ret));
		goto err_free;
	}
	t->rdma = auto_discover && !getenv("MC_FORCE_TCP") &&
		  xfer_transport_available("rdma");
	t->e = engine_with(t, t->rdma, 0);
	if (!t->e && t->rdma && errno == ENODEV) { /* none it can use */
		t->rdma = false;
		t->e = engine_with(t, false, 0);
	}
	if (!t->e) {
		te_log("createTransferEngine: %s", strerror(errno));
		goto err_free;
	}
	if (te_segs_init(t)) {
		xfer_engine_free(t->e);
		goto err_free;
	}
	return t;

err_free:
	te_free(t);
	return NULL;
}

int getLocalIpAndPort(transfer_engine_t engine, char *buf_out, size_t buf_len)
{
	struct te *t = engine;
	struct xfer_engine *e;

	if (!buf_out || !buf_len || !(e = te_enter(t)))
		return TE_ERR_INVALID_ARGUMENT;
	snprintf(buf_out, buf_len, "%s:%u", xfer_engine_host(e),
		 xfer_engine_rpc_port(e));
	te_leave(t);
	return 0;
}

/*
 * Remake the engine with TCP. On failure the engine of before is made
 * again. Caller holds the write lock. @return 0 or a negative errno.
 */
static int remake_tcp(struct te *t)
{
	int ret = 0;
	uint16_t port;

	if (!t->e) /* lost by a remake before */
		return -EIO;
	if (te_batches_live(t))
		return -EBUSY;
	port = xfer_engine_rpc_port(t->e);
	xfer_engine_free(t->e);
	t->e = engine_with(t, false, port);
	if (t->e) {
		t->rdma = false;
	} else { /* back to what it was, the matrix as installed */
		ret = -errno;
		t->e = engine_with(t, true, port);
	}
	if (!t->e) {
		te_log("engine lost: %s", strerror(errno));
		return ret;
	}
	te_mems_reregister(t);
	te_files_reregister(t);
	te_segs_reopen(t);
	return ret;
}

/* RDMA on the running engine, with @p matrix ("": from sysfs). Caller
 * holds the write lock. @return 0 or a negative errno. */
static int add_rdma(struct te *t, const char *matrix)
{
	const char *m = xfer_config_get(t->cfg, "nic_priority_matrix");
	char *was = m ? strdup(m) : NULL;
	int ret = m && !was ? -ENOMEM : 0;

	if (!ret)
		ret = xfer_config_set(t->cfg, "nic_priority_matrix",
				      *matrix ? matrix : NULL);
	if (!ret)
		ret = xfer_engine_add_transport(t->e, "rdma", t->cfg);
	if (ret) /* uninstallTransport() makes the engine of before */
		xfer_config_set(t->cfg, "nic_priority_matrix", was);
	else
		t->rdma = true;
	free(was);
	return ret;
}

transport_t installTransport(transfer_engine_t engine, const char *proto,
			     void **args)
{
	const char *matrix = args && args[0] ? args[0] : "";
	struct te *t = engine;
	int ret = 0;

	if (!t || !proto)
		return NULL;
	if (!strcmp(proto, "tcp"))
		return &tcp_handle; /* part of every engine */
	if (strcmp(proto, "rdma")) {
		te_log("installTransport: no transport '%s'", proto);
		return NULL;
	}
	/* Installed already: as it is, as Mooncake answers. */
	pthread_rwlock_wrlock(&t->lock);
	if (!t->rdma && !t->e)
		ret = -EIO;
	else if (!t->rdma)
		ret = xfer_transport_available("rdma") ? add_rdma(t, matrix) :
							 -ENODEV;
	pthread_rwlock_unlock(&t->lock);
	if (ret) {
		te_log("installTransport rdma: %s", strerror(-ret));
		return NULL;
	}
	return &rdma_handle;
}

int uninstallTransport(transfer_engine_t engine, const char *proto)
{
	struct te *t = engine;
	int ret = 0;

	if (!t || !proto || (strcmp(proto, "tcp") && strcmp(proto, "rdma")))
		return TE_ERR_INVALID_ARGUMENT;
	pthread_rwlock_wrlock(&t->lock);
	if (!strcmp(proto, "rdma") && t->rdma)
		ret = remake_tcp(t);
	pthread_rwlock_unlock(&t->lock);
	return te_err(ret);
}

void destroyTransferEngine(transfer_engine_t engine)
{
	struct te *t = engine;

	if (!t)
		return;
	pthread_rwlock_wrlock(&t->lock);
	te_batches_fini(t);
	xfer_engine_free(t->e);
	pthread_rwlock_unlock(&t->lock);
	te_free(t);
}
