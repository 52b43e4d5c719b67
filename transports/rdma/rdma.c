/*
 * RDMA transport: the ops table, memory registration, the descriptor's
 * RDMA fields, and routing: each slice goes to a (local NIC, peer NIC)
 * path chosen from both priority matrices, spread over the preferred
 * NICs; a failed path is paused and the slice tries another.
 */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rdma_internal.h"

uint64_t rdma_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void rdma_fini(struct xfer_transport *t)
{
	for (int i = 0; i < t->nctx; i++)
		rdma_ctx_close(&t->ctx[i]);
	free(t->ctx);
	free(t->devs);
	rdma_topo_free(&t->topo);
	free(t);
}

static int rdma_init(struct xfer_engine *e, struct xfer_transport **out)
{
	struct xfer_transport *t = calloc(1, sizeof(*t));
	char err[160];
	int ret;

	if (!t)
		return -ENOMEM;
	t->e = e;
	ret = rdma_topo_build("/sys", e->cfg.device_names,
			      e->cfg.nic_priority_matrix, &t->topo, err,
			      sizeof(err));
	if (ret) {
		free(t);
		return xfer_engine_error(e, ret, "rdma: %s", err);
	}
	if (t->topo.ndevs > XFER_DESC_MAX_DEVS) {
		rdma_topo_free(&t->topo);
		free(t);
		return xfer_engine_error(e, -E2BIG, "rdma: more than %d devices",
					 XFER_DESC_MAX_DEVS);
	}
	t->ctx = calloc(t->topo.ndevs, sizeof(*t->ctx));
	t->devs = calloc(t->topo.ndevs, sizeof(*t->devs));
	if (!t->ctx || !t->devs) {
		ret = -ENOMEM;
		goto err_fini;
	}
	for (; t->nctx < (int)t->topo.ndevs; t->nctx++) {
		struct rdma_ctx *c = &t->ctx[t->nctx];

		ret = rdma_ctx_open(t, c, t->nctx);
		if (ret) {
			t->nctx++; /* close what it opened */
			goto err_fini;
		}
		t->devs[t->nctx].name = c->name;
		t->devs[t->nctx].lid = c->lid;
		memcpy(t->devs[t->nctx].gid, c->gid.raw, 16);
	}
	*out = t;
	return 0;

err_fini:
	rdma_fini(t);
	return ret;
}

static void rdma_describe(struct xfer_transport *t, struct xfer_desc *d)
{
	d->ndevs = (size_t)t->nctx;
	d->devs = t->devs;
	d->nprio = t->topo.nprio;
	d->prio = t->topo.prio;
}

static void rdma_describe_buffer(struct xfer_transport *t,
				 const struct xfer_buffer *b,
				 struct xfer_desc_buf *db)
{
	struct ibv_mr **mrs = b->tp_mem;

	db->lkey = calloc(t->nctx, sizeof(*db->lkey));
	db->rkey = calloc(t->nctx, sizeof(*db->rkey));
	for (int i = 0; db->lkey && db->rkey && i < t->nctx; i++) {
		db->lkey[i] = mrs[i]->lkey;
		db->rkey[i] = mrs[i]->rkey;
	}
}

static void rdma_unreg(struct xfer_transport *t, struct xfer_buffer *b)
{
	struct ibv_mr **mrs = b->tp_mem;

	for (int i = 0; mrs && i < t->nctx; i++)
		if (mrs[i])
			ibv_dereg_mr(mrs[i]);
	free(mrs);
	b->tp_mem = NULL;
}

static int rdma_reg(struct xfer_transport *t, struct xfer_buffer *b)
{
	const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
			   IBV_ACCESS_REMOTE_WRITE;
	struct ibv_mr **mrs = calloc(t->nctx, sizeof(*mrs));

	if (!mrs)
		return -ENOMEM;
	b->tp_mem = mrs;
	for (int i = 0; i < t->nctx; i++) {
		mrs[i] = ibv_reg_mr(t->ctx[i].pd, (void *)(uintptr_t)b->addr,
				    b->len, access);
		if (!mrs[i]) {
			int ret = errno ? -errno : -ENOMEM;

			rdma_unreg(t, b);
			return ret;
		}
	}
	return 0;
}

static void rdma_release(struct xfer_transport *t, void *priv)
{
	struct rdma_seg *rs = priv;

	(void)t;
	rdma_matrix_free(&rs->matrix);
	free(rs->paused);
	free(rs);
}

/* Per-segment state: the peer's handshake address, its matrix over its
 * devices, and the paused paths. Under seg->lock (write). */
static int rdma_open(struct xfer_transport *t, struct xfer_segment *seg)
{
	const struct xfer_desc *d = seg->desc;
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
	if (!rs->paused ||
	    rdma_matrix_build(d->prio, d->nprio, names, d->ndevs, &rs->matrix))
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

static bool paused(const struct rdma_seg *rs, int l, int p, uint64_t now)
{
	return atomic_load(&rs->paused[(size_t)l * rs->ndevs + p]) > now;
}

/* The peer device to pair with local context @p l: the one of the same
 * name if the row has it (rxe0 talks to rxe0), else the row's k-th. */
static int peer_for(const struct xfer_transport *t, const struct xfer_desc *d,
		    const struct rdma_row *pr, int l, size_t k)
{
	if (k == 0)
		for (size_t j = 0; j < pr->npref; j++)
			if (!strcmp(d->devs[pr->idx[j]].name, t->ctx[l].name))
				return pr->idx[j];
	return pr->idx[k % pr->n];
}

/*
 * Choose the path of slice @p s: local NICs of the source's location,
 * preferred first (rotated by @p spin so slices spread), each paired with
 * a peer NIC serving the target buffer; paused paths only when nothing
 * else is left. Caller holds seg->lock. @return 0, -ENOENT (no target
 * buffer), -ENETDOWN (no local NIC up).
 */
static int route(struct xfer_transport *t, const struct rdma_seg *rs,
		 const struct xfer_desc *d, struct xfer_slice *s,
		 unsigned spin)
{
	const struct xfer_desc_buf *tb = xfer_desc_find_buf(d, s->remote, s->len);
	const struct rdma_row *lr, *pr;
	struct rdma_slice *r = rdma_slice(s);
	uint64_t now = rdma_now_ns();

	if (!tb || !tb->rkey)
		return -ENOENT;
	lr = rdma_matrix_find(&t->topo.matrix, s->task->source->location);
	pr = rdma_matrix_find(&rs->matrix, tb->name);
	if (!pr->n)
		return -ENOENT;
	for (int pass = 0; pass < 2; pass++)
		for (size_t k = 0; k < lr->n; k++) {
			size_t i = k < lr->npref ? (k + spin) % lr->npref : k;
			int l = lr->idx[i];

			if (!atomic_load(&t->ctx[l].port_up))
				continue;
			for (size_t j = 0; j < pr->n; j++) {
				int p = peer_for(t, d, pr, l, j + (j ? spin : 0));

				if (pass == 0 && paused(rs, l, p, now))
					continue;
				r->ctx = (uint8_t)l;
				r->peer_dev = (uint16_t)p;
				r->rkey = tb->rkey[p];
				return 0;
			}
		}
	return -ENETDOWN;
}

/* Per-context chains of routed slices, handed over once each. */
struct chains {
	struct xfer_slice *head[XFER_DESC_MAX_DEVS], **tail[XFER_DESC_MAX_DEVS];
};

static void chains_add(struct chains *ch, struct xfer_slice *s, int l)
{
	s->next = NULL;
	if (!ch->head[l])
		ch->tail[l] = &ch->head[l];
	*ch->tail[l] = s;
	ch->tail[l] = &s->next;
}

static void chains_send(struct xfer_transport *t, struct chains *ch)
{
	for (int l = 0; l < t->nctx; l++)
		if (ch->head[l])
			rdma_ctx_enqueue(&t->ctx[l], ch->head[l], ch->tail[l]);
}

static void rdma_submit(struct xfer_transport *t, struct xfer_segment *seg,
			struct xfer_slice *s, size_t n)
{
	struct chains ch = { 0 };
	unsigned spin = atomic_fetch_add(&t->rr, 1);

	if (atomic_load(&seg->gone)) {
		for (size_t i = 0; i < n; i++)
			xfer_slice_done(&s[i], XFER_FAILED);
		return;
	}
	pthread_rwlock_rdlock(&seg->lock);
	for (size_t i = 0; i < n; i++) {
		memset(rdma_slice(&s[i]), 0, sizeof(struct rdma_slice));
		if (route(t, seg->tp_priv, seg->desc, &s[i], spin + (unsigned)i))
			xfer_slice_done(&s[i], XFER_FAILED);
		else
			chains_add(&ch, &s[i], rdma_slice(&s[i])->ctx);
	}
	pthread_rwlock_unlock(&seg->lock);
	chains_send(t, &ch);
}

void rdma_retry(struct xfer_transport *t, struct xfer_slice *s,
		enum xfer_status why)
{
	struct xfer_segment *seg = s->task->segment;
	struct rdma_slice *r = rdma_slice(s);
	struct rdma_seg *rs;
	struct chains ch = { 0 };
	int ret = -ENOENT;

	if (++r->tries > t->e->cfg.retry_cnt || atomic_load(&seg->gone)) {
		xfer_slice_done(s, why);
		return;
	}
	pthread_rwlock_rdlock(&seg->lock);
	rs = seg->tp_priv;
	if (r->peer_dev < rs->ndevs)
		atomic_store(&rs->paused[(size_t)r->ctx * rs->ndevs + r->peer_dev],
			     rdma_now_ns() +
				     (uint64_t)t->e->cfg.path_pause_ms * 1000000);
	ret = route(t, rs, seg->desc, s, atomic_fetch_add(&t->rr, 1));
	pthread_rwlock_unlock(&seg->lock);
	if (ret) {
		xfer_slice_done(s, why);
		return;
	}
	chains_add(&ch, s, r->ctx);
	chains_send(t, &ch);
}

int rdma_peer_of(struct xfer_slice *s, char *path, size_t len,
		 char host[64], uint16_t *port)
{
	struct xfer_segment *seg = s->task->segment;
	struct rdma_seg *rs;
	int ret = -ENOENT;

	pthread_rwlock_rdlock(&seg->lock);
	rs = seg->tp_priv;
	if (rdma_slice(s)->peer_dev < seg->desc->ndevs) {
		snprintf(path, len, "%s@%s", seg->name,
			 seg->desc->devs[rdma_slice(s)->peer_dev].name);
		memcpy(host, rs->host, 64);
		*port = rs->port;
		ret = 0;
	}
	pthread_rwlock_unlock(&seg->lock);
	return ret;
}

/* A passive Connection request, answered on the context's worker. */
struct accept_job {
	struct xfer_job job;
	struct rdma_ctx *c;
	const struct xfer_hs_conn *req;
	struct xfer_hs_conn *reply;
	int ret;
	bool done;
};

static void run_accept(struct xfer_job *j)
{
	struct accept_job *aj = container_of(j, struct accept_job, job);

	aj->ret = rdma_ep_accept(aj->c, aj->req, aj->reply);
	pthread_mutex_lock(&aj->c->lock);
	aj->done = true;
	pthread_cond_broadcast(&aj->c->accepted);
	pthread_mutex_unlock(&aj->c->lock);
}

static int rdma_connection(struct xfer_transport *t,
			   const struct xfer_hs_conn *req,
			   struct xfer_hs_conn *reply)
{
	struct accept_job aj = { .job.fn = run_accept, .req = req,
				 .reply = reply };

	for (int i = 0; i < t->nctx && !aj.c; i++)
		if (!strcmp(req->peer_nic_path, t->ctx[i].nic_path))
			aj.c = &t->ctx[i];
	if (!aj.c) {
		reply->reply_msg = strdup("no such NIC path here");
		return reply->reply_msg ? 0 : -ENOMEM;
	}
	if (aj.c->r == &t->e->control)
		return rdma_ep_accept(aj.c, req, reply);
	/* The worker owns the endpoints; it never waits on this thread. */
	xfer_reactor_post(aj.c->r, &aj.job);
	pthread_mutex_lock(&aj.c->lock);
	while (!aj.done)
		pthread_cond_wait(&aj.c->accepted, &aj.c->lock);
	pthread_mutex_unlock(&aj.c->lock);
	return aj.ret;
}

static int rdma_device_stats(struct xfer_transport *t, size_t i,
			     const char **name, uint64_t *bytes)
{
	if (i >= (size_t)t->nctx)
		return -ENOENT;
	*name = t->ctx[i].name;
	*bytes = atomic_load(&t->ctx[i].bytes);
	return 0;
}

const struct xfer_transport_ops xfer_rdma_ops = {
	.name = "rdma",
	.init = rdma_init,
	.describe = rdma_describe,
	.describe_buffer = rdma_describe_buffer,
	.reg = rdma_reg,
	.unreg = rdma_unreg,
	.open = rdma_open,
	.release = rdma_release,
	.submit = rdma_submit,
	.connection = rdma_connection,
	.device_stats = rdma_device_stats,
	.fini = rdma_fini,
};
