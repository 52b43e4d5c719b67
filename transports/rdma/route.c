/*
 * Routing: each slice goes to a (local NIC, peer NIC) path chosen from
 * both priority matrices, spread over the preferred NICs, and into that
 * context's inbox; a failed path is paused and the slice tries another.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "transports/rdma/rdma_internal.h"

uint64_t xfer_rdma_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The clock is read only when some path was ever paused: a slice's route
 * costs no system call (a slow one where the clock source is not the
 * TSC, as in a VM). *@p now: 0 until read. */
static bool paused(const struct rdma_seg *rs, int l, int p, uint64_t *now)
{
	uint64_t until = atomic_load(&rs->paused[(size_t)l * rs->ndevs + p]);

	if (!until)
		return false;
	if (!*now)
		*now = xfer_rdma_now_ns();
	return until > *now;
}

/* The peer device to pair with local context @p l: the one of the same
 * name if the row has it (rxe0 talks to rxe0), else the row's k-th. */
static int peer_for(const struct rdma_transport *t,
		    const struct xfer_rdma_desc *d, const struct rdma_row *pr,
		    int l, size_t k)
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
static int route(struct rdma_transport *t, const struct rdma_seg *rs,
		 const struct xfer_desc *d, struct xfer_slice *s,
		 unsigned spin)
{
	const struct xfer_desc_buf *tb = xfer_desc_find_buf(d, s->remote, s->len);
	const struct xfer_rdma_keys *keys = tb ? tb->tp : NULL;
	const struct rdma_row *lr, *pr;
	struct rdma_slice *r = rdma_slice(s);
	uint64_t now = 0;

	if (!keys)
		return -ENOENT;
	lr = xfer_rdma_matrix_find(&t->topo.matrix, s->task->source->location);
	pr = xfer_rdma_matrix_find(&rs->matrix, tb->name);
	if (!pr->n)
		return -ENOENT;
	for (int pass = 0; pass < 2; pass++)
		for (size_t k = 0; k < lr->n; k++) {
			size_t i = k < lr->npref ? (k + spin) % lr->npref : k;
			int l = lr->idx[i];

			if (!atomic_load(&t->ctx[l].port_up))
				continue;
			for (size_t j = 0; j < pr->n; j++) {
				int p = peer_for(t, d->tp, pr, l,
						 j + (j ? spin : 0));

				if (pass == 0 && paused(rs, l, p, &now))
					continue;
				r->ctx = (uint8_t)l;
				r->peer_dev = (uint16_t)p;
				r->rkey = keys->rkey[p];
				return 0;
			}
		}
	return -ENETDOWN;
}

/* Per-context chains of routed slices, handed over once each. */
struct chains {
	struct xfer_slice *head[XFER_RDMA_MAX_DEVS];
	struct xfer_slice **tail[XFER_RDMA_MAX_DEVS];
};

static void chains_add(struct chains *ch, struct xfer_slice *s, int l)
{
	s->next = NULL;
	if (!ch->head[l])
		ch->tail[l] = &ch->head[l];
	*ch->tail[l] = s;
	ch->tail[l] = &s->next;
}

/* Queue each chain in its context's inbox, kicking the worker. */
static void chains_send(struct rdma_transport *t, struct chains *ch)
{
	for (int l = 0; l < t->nctx; l++) {
		struct rdma_ctx *c = &t->ctx[l];
		bool kick;

		if (!ch->head[l])
			continue;
		pthread_mutex_lock(&c->lock);
		*c->in_tail = ch->head[l];
		c->in_tail = ch->tail[l];
		kick = !c->kick_pending;
		c->kick_pending = true;
		pthread_mutex_unlock(&c->lock);
		if (kick)
			xfer_reactor_post(c->r, &c->kick);
	}
}

void xfer_rdma_submit(struct rdma_transport *t, struct xfer_segment *seg,
		      struct xfer_slice *s, size_t n)
{
	struct chains ch = { 0 };
	unsigned spin = atomic_fetch_add(&t->rr, 1);
	bool gone;

	pthread_rwlock_rdlock(&seg->lock);
	gone = atomic_load(&((struct rdma_seg *)seg->tp_priv)->gone);
	for (size_t i = 0; i < n; i++) {
		memset(rdma_slice(&s[i]), 0, sizeof(struct rdma_slice));
		if (gone ||
		    route(t, seg->tp_priv, seg->desc, &s[i], spin + (unsigned)i))
			xfer_slice_done(&s[i], XFER_FAILED);
		else
			chains_add(&ch, &s[i], rdma_slice(&s[i])->ctx);
	}
	pthread_rwlock_unlock(&seg->lock);
	chains_send(t, &ch);
}

void xfer_rdma_retry(struct rdma_transport *t, struct xfer_slice *s,
		     enum xfer_status why, bool counts)
{
	struct xfer_segment *seg = s->task->segment;
	struct rdma_slice *r = rdma_slice(s);
	uint64_t pause_ns = (uint64_t)t->k[K_PAUSE].num * 1000000;
	struct rdma_seg *rs;
	struct chains ch = { 0 };
	int ret;

	if (counts && r->tries < UINT8_MAX)
		r->tries++;
	if (r->tries > t->k[K_RETRY].num || atomic_load(&seg->gone)) {
		xfer_slice_done(s, why);
		return;
	}
	pthread_rwlock_rdlock(&seg->lock);
	rs = seg->tp_priv;
	if (atomic_load(&rs->gone)) { /* no other path reaches it */
		pthread_rwlock_unlock(&seg->lock);
		xfer_slice_done(s, XFER_FAILED);
		return;
	}
	if (r->peer_dev < rs->ndevs)
		atomic_store(&rs->paused[(size_t)r->ctx * rs->ndevs + r->peer_dev],
			     xfer_rdma_now_ns() + pause_ns);
	ret = route(t, rs, seg->desc, s, atomic_fetch_add(&t->rr, 1));
	pthread_rwlock_unlock(&seg->lock);
	if (ret) {
		xfer_slice_done(s, why);
		return;
	}
	chains_add(&ch, s, r->ctx);
	chains_send(t, &ch);
}

void xfer_rdma_peer_gone(struct xfer_segment *seg, const char *why)
{
	struct rdma_seg *rs;

	pthread_rwlock_rdlock(&seg->lock);
	rs = seg->tp_priv;
	if (!atomic_exchange(&rs->gone, true))
		xfer_log(XFER_LOG_WARN, "rdma: peer %s is gone (%s): its "
			 "transfers fail", seg->name, why);
	pthread_rwlock_unlock(&seg->lock);
}

int xfer_rdma_peer_of(struct xfer_slice *s, char *path, size_t len,
		      char host[64], uint16_t *port)
{
	struct xfer_segment *seg = s->task->segment;
	const struct xfer_rdma_desc *d;
	struct rdma_seg *rs;
	int ret = -ENOENT;

	pthread_rwlock_rdlock(&seg->lock);
	rs = seg->tp_priv;
	d = seg->desc->tp;
	if (rdma_slice(s)->peer_dev < d->ndevs) {
		snprintf(path, len, "%s@%s", seg->name,
			 d->devs[rdma_slice(s)->peer_dev].name);
		memcpy(host, rs->host, 64);
		*port = rs->port;
		ret = 0;
	}
	pthread_rwlock_unlock(&seg->lock);
	return ret;
}
