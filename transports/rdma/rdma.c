/*
 * RDMA transport: the ops table and its knobs, memory registration, the
 * descriptor's RDMA fields, per-segment state, and the Connection requests
 * of the handshake socket.
 */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/handshake_internal.h"
#include "transports/rdma/rdma_internal.h"

static struct rdma_transport *rdma_of(struct xfer_transport *t)
{
	return container_of(t, struct rdma_transport, base);
}

static void rdma_fini(struct xfer_transport *tp)
{
	struct rdma_transport *t = rdma_of(tp);

	for (int i = 0; i < t->nctx; i++)
		xfer_rdma_ctx_close(&t->ctx[i]);
	free(t->ctx);
	free(t->desc.devs);
	xfer_rdma_topo_free(&t->topo);
	free(t);
}

static int rdma_init(const struct xfer_transport_env *env,
		     struct xfer_transport **out)
{
	struct rdma_transport *t = calloc(1, sizeof(*t));
	char err[160];
	int ret;

	if (!t)
		return -ENOMEM;
	t->base.env = env;
	t->k = env->knobs;
	ret = xfer_rdma_topo_build("/sys", t->k[K_DEVICES].str,
				   t->k[K_MATRIX].str, &t->topo, err,
				   sizeof(err));
	if (ret) {
		free(t);
		return xfer_error_set(env->err, ret, "rdma: %s%s", err,
				      ret == -ENODEV ? "; protocol \"tcp\" "
				      "(XFER_PROTOCOL=tcp) needs none" : "");
	}
	if (t->topo.ndevs > XFER_RDMA_MAX_DEVS) {
		xfer_rdma_topo_free(&t->topo);
		free(t);
		return xfer_error_set(env->err, -E2BIG, "rdma: more than %d "
				      "devices", XFER_RDMA_MAX_DEVS);
	}
	t->ctx = calloc(t->topo.ndevs, sizeof(*t->ctx));
	t->desc.devs = calloc(t->topo.ndevs, sizeof(*t->desc.devs));
	if (!t->ctx || !t->desc.devs) {
		ret = -ENOMEM;
		goto err_fini;
	}
	for (; t->nctx < (int)t->topo.ndevs; t->nctx++) {
		struct rdma_ctx *c = &t->ctx[t->nctx];
		struct xfer_rdma_dev *d = &t->desc.devs[t->nctx];

		ret = xfer_rdma_ctx_open(t, c, t->nctx);
		if (ret) {
			t->nctx++; /* close what it opened */
			goto err_fini;
		}
		d->name = c->name;
		d->lid = c->lid;
		memcpy(d->gid, c->gid.raw, 16);
	}
	t->desc.ndevs = (size_t)t->nctx;
	t->desc.nprio = t->topo.nprio;
	t->desc.prio = t->topo.prio;
	*out = &t->base;
	return 0;

err_fini:
	rdma_fini(&t->base);
	return ret;
}

static void rdma_describe(struct xfer_transport *t, struct xfer_desc *d)
{
	d->tp = &rdma_of(t)->desc;
}

static void rdma_describe_buffer(struct xfer_transport *t,
				 const struct xfer_buffer *b,
				 struct xfer_desc_buf *db)
{
	struct rdma_mem *m = b->tp_mem;

	(void)t;
	db->tp = &m->keys;
}

static void rdma_unreg(struct xfer_transport *tp, struct xfer_buffer *b)
{
	struct rdma_transport *t = rdma_of(tp);
	struct rdma_mem *m = b->tp_mem;

	for (int i = 0; m && i < t->nctx; i++)
		if (m->mrs[i])
			ibv_dereg_mr(m->mrs[i]);
	if (m) {
		free(m->mrs);
		free(m->keys.lkey);
		free(m->keys.rkey);
		free(m);
	}
	b->tp_mem = NULL;
}

static int rdma_reg(struct xfer_transport *tp, struct xfer_buffer *b)
{
	const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
			   IBV_ACCESS_REMOTE_WRITE;
	struct rdma_transport *t = rdma_of(tp);
	struct rdma_mem *m = calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	b->tp_mem = m;
	m->mrs = calloc(t->nctx, sizeof(*m->mrs));
	m->keys.lkey = calloc(t->nctx, sizeof(*m->keys.lkey));
	m->keys.rkey = calloc(t->nctx, sizeof(*m->keys.rkey));
	if (!m->mrs || !m->keys.lkey || !m->keys.rkey) {
		rdma_unreg(tp, b);
		return -ENOMEM;
	}
	for (int i = 0; i < t->nctx; i++) {
		m->mrs[i] = ibv_reg_mr(t->ctx[i].pd, (void *)(uintptr_t)b->addr,
				       b->len, access);
		if (!m->mrs[i]) {
			int ret = errno ? -errno : -ENOMEM;

			rdma_unreg(tp, b);
			return ret;
		}
		m->keys.lkey[i] = m->mrs[i]->lkey;
		m->keys.rkey[i] = m->mrs[i]->rkey;
	}
	return 0;
}

static void rdma_release(struct xfer_transport *t, void *priv)
{
	struct rdma_seg *rs = priv;

	(void)t;
	xfer_rdma_matrix_free(&rs->matrix);
	free(rs->paused);
	free(rs);
}

/* Per-segment state: the peer's handshake address, its matrix over its
 * devices, and the paused paths. Under seg->lock (write). */
static int rdma_open(struct xfer_transport *tp, struct xfer_segment *seg)
{
	struct rdma_transport *t = rdma_of(tp);
	const struct xfer_rdma_desc *d = seg->desc->tp;
	struct rdma_seg *rs = calloc(1, sizeof(*rs));
	const char **names = calloc(d->ndevs ? d->ndevs : 1, sizeof(*names));
	int ret = -ENOMEM;

	if (!rs || !names)
		goto err_free;
	rs->ndevs = d->ndevs;
	rs->port = seg->rpc_port;
	if (getnameinfo((struct sockaddr *)&seg->addr, seg->addrlen, rs->host,
			sizeof(rs->host), NULL, 0, NI_NUMERICHOST)) {
		ret = -EHOSTUNREACH;
		goto err_free;
	}
	for (size_t i = 0; i < d->ndevs; i++)
		names[i] = d->devs[i].name;
	rs->paused = calloc((size_t)t->nctx * d->ndevs, sizeof(*rs->paused));
	if (!rs->paused || xfer_rdma_matrix_build(d->prio, d->nprio, names,
						  d->ndevs, &rs->matrix))
		goto err_free;
	free(names);
	seg->tp_priv = rs;
	return 0;

err_free:
	if (rs) {
		free(rs->paused);
		free(rs);
	}
	free(names);
	return ret;
}

static void rdma_submit(struct xfer_transport *t, struct xfer_segment *seg,
			struct xfer_slice *s, size_t n)
{
	xfer_rdma_submit(rdma_of(t), seg, s, n);
}

static void rdma_cancel(struct xfer_transport *tp)
{
	struct rdma_transport *t = rdma_of(tp);

	for (int i = 0; i < t->nctx; i++)
		xfer_rdma_ctx_cancel(&t->ctx[i]);
}

/* A passive Connection request, answered on the context's worker. */
struct accept {
	struct rdma_ctx *c;
	const struct xfer_hs_conn *req;
	struct xfer_hs_conn *reply;
	int ret;
};

static void run_accept(void *arg)
{
	struct accept *a = arg;

	a->ret = xfer_rdma_ep_accept(a->c, a->req, a->reply);
}

static int rdma_connection(struct xfer_transport *tp,
			   const struct xfer_hs_conn *req,
			   struct xfer_hs_conn *reply)
{
	struct rdma_transport *t = rdma_of(tp);
	struct accept a = { .req = req, .reply = reply };

	for (int i = 0; i < t->nctx && !a.c; i++)
		if (!strcmp(req->peer_nic_path, t->ctx[i].nic_path))
			a.c = &t->ctx[i];
	if (!a.c) {
		reply->reply_msg = strdup("no such NIC path here");
		return reply->reply_msg ? 0 : -ENOMEM;
	}
	/* The worker owns the endpoints; it never waits on this thread. */
	xfer_reactor_run(a.c->r, run_accept, &a);
	return a.ret;
}

static int rdma_device_stats(struct xfer_transport *tp, size_t i,
			     const char **name, uint64_t *bytes)
{
	struct rdma_transport *t = rdma_of(tp);

	if (i >= (size_t)t->nctx)
		return -ENOENT;
	*name = t->ctx[i].name;
	*bytes = atomic_load(&t->ctx[i].bytes);
	return 0;
}

/* The device workers; in plugin mode without workers the contexts run on
 * the engine's control reactor, which the engine counts. Soft-RoCE's and
 * the NIC driver's kernel work is not counted. */
static double rdma_cpu_seconds(struct xfer_transport *tp)
{
	struct rdma_transport *t = rdma_of(tp);
	double s = 0;

	for (int i = 0; i < t->nctx; i++)
		if (t->ctx[i].r == &t->ctx[i].own)
			s += xfer_reactor_cpu_seconds(&t->ctx[i].own);
	return s;
}

/* 0, or a power of two in 256..4096 */
static bool valid_mtu(long long v)
{
	return v == 0 || (v >= 256 && !(v & (v - 1)));
}

/* In the order of K_*, named as Mooncake's where it has one. */
static const struct xfer_knob rdma_knobs[] = {
	/* Mooncake takes these from its programs, not the environment */
	[K_DEVICES] = XFER_KNOB_S("device_names", "XFER_DEVICE_NAME", NULL,
				  NULL, "string", "RDMA devices to use, a "
				  "comma list; unset: every device"),
	[K_MATRIX] = XFER_KNOB_S("nic_priority_matrix",
				 "XFER_NIC_PRIORITY_MATRIX", NULL, NULL,
				 "string", "the NIC priority matrix, JSON; "
				 "unset: from sysfs NUMA nodes"),
	[K_QPS] = XFER_KNOB_N("qps_per_ep", "XFER_NUM_QP_PER_EP",
			      "MC_NUM_QP_PER_EP", 1, 64, "2", "count",
			      "QPs per endpoint (one device to one peer NIC)"),
	[K_MAX_EP] = XFER_KNOB_N("max_ep_per_ctx", "XFER_MAX_EP_PER_CTX",
				 "MC_MAX_EP_PER_CTX", 1, 65536, "256", "count",
				 "endpoints a device keeps before SIEVE "
				 "eviction"),
	[K_RETRY] = XFER_KNOB_N("retry_cnt", "XFER_RETRY_CNT", "MC_RETRY_CNT",
				0, 64, "9", "count", "tries of a failed slice "
				"on other NIC paths before its task fails"),
	[K_GID] = XFER_KNOB_N("gid_index", "XFER_GID_INDEX", "MC_GID_INDEX",
			      -1, 65535, "-1", "index", "GID index of every "
			      "device; -1: RoCE v2 with an IPv4 address"),
	[K_MTU] = { .key = XFER_KNOB_KEY("mtu", "XFER_MTU", "MC_MTU", 0, 4096,
					 "0", "bytes", "path MTU, a power of "
					 "two from 256; 0: the ports' active "
					 "MTU"),
		    .type = XFER_KNOB_NUM, .check = valid_mtu },
	[K_MAX_WR] = XFER_KNOB_N("max_wr", "XFER_MAX_WR", "MC_MAX_WR", 1,
				 65535, "256", "count", "send queue depth of "
				 "each QP, in work requests"),
	[K_MAX_CQE] = XFER_KNOB_N("max_cqe", "XFER_MAX_CQE",
				  "MC_MAX_CQE_PER_CTX", 16, 1 << 20, "4096",
				  "count", "entries of each CQ of a device"),
	[K_IB_PORT] = XFER_KNOB_N("ib_port", "XFER_IB_PORT", "MC_IB_PORT", 1,
				  255, "1", "index", "port of every device"),
	[K_PIN] = XFER_KNOB_B("pin_workers", "XFER_PIN_WORKERS", NULL, "true",
			      "each device's worker and its memory on the "
			      "device's NUMA node"),
	[K_PAUSE] = XFER_KNOB_N("path_pause_ms", "XFER_PATH_PAUSE_MS", NULL,
				0, UINT32_MAX, "1000", "ms", "a NIC path whose "
				"slice failed is not chosen for this long"),
	/* Mooncake's ranges and defaults; each within the device's limits */
	[K_NUM_CQ] = XFER_KNOB_N("num_cq", "XFER_NUM_CQ_PER_CTX",
				 "MC_NUM_CQ_PER_CTX", 1, 255, "1", "count",
				 "CQs per device; its QPs take them in turn"),
	[K_NUM_CHAN] = XFER_KNOB_N("num_comp_channels",
				   "XFER_NUM_COMP_CHANNELS_PER_CTX",
				   "MC_NUM_COMP_CHANNELS_PER_CTX", 1, 255, "1",
				   "count", "completion channels per device; "
				   "CQ i reports to channel i mod n"),
	[K_MAX_SGE] = XFER_KNOB_N("max_sge", "XFER_MAX_SGE", "MC_MAX_SGE", 1,
				  65535, "4", "count", "SGEs per work request: "
				  "adjacent slices one WR gathers"),
	[K_MAX_INLINE] = XFER_KNOB_N("max_inline", "XFER_MAX_INLINE",
				     "MC_MAX_INLINE", 0, 65535, "64", "bytes",
				     "a WRITE of at most this many bytes goes "
				     "inline in its work request"),
	XFER_KNOB_END,
};

/* A device the verbs library lists (it loads the providers to know). */
static bool rdma_available(void)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);

	if (list)
		ibv_free_device_list(list);
	return n > 0;
}

const struct xfer_transport_ops xfer_rdma_ops = {
	.name = "rdma",
	.available = rdma_available,
	.knobs = rdma_knobs,
	.codec = &xfer_rdma_codec,
	.init = rdma_init,
	.describe = rdma_describe,
	.describe_buffer = rdma_describe_buffer,
	.reg = rdma_reg,
	.unreg = rdma_unreg,
	.open = rdma_open,
	.release = rdma_release,
	.submit = rdma_submit,
	.cancel = rdma_cancel,
	.connection = rdma_connection,
	.device_stats = rdma_device_stats,
	.cpu_seconds = rdma_cpu_seconds,
	.fini = rdma_fini,
};
