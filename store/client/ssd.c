/*
 * The client's SSD segment and its copies between tiers
 * (kv_internal.h). A range of the engine's file segment ("nvmeof/<engine
 * name>", files the application registered with xfer_register_file())
 * is mounted as a segment of medium SSD: the master allocates in it as
 * in DRAM, and readers reach it through the
 * engine as any file segment (the file itself on this host, the owner's
 * file data port elsewhere). It is mounted again whenever the DRAM
 * segment is.
 *
 * A client with a DRAM segment polls the master every tick for the
 * copies it owes (tier.c of xfer-stored): an offload is a WRITE from its
 * own segment to an SSD one, a promotion a READ from an SSD segment into
 * its own. Each poll's copies move as zero-copy ops of move.c (one for
 * the writes, one for the reads), are reported with tier_done, and the
 * next poll follows at once while there was work.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "store/client/kv_internal.h"
#include "util/log_internal.h"
#include "util/wait_internal.h"

/* One poll's copies: keys[idx[p]] is position p of the ops, the
 * writes first, and its result res[p]. */
struct kv_tier {
	struct xfer_kv *kv;
	struct kv_rpc rpc;             /* tier_done */
	size_t n;
	unsigned ops_out;
	char **keys;                   /* n, each NUL-ended */
	struct iovec *iov;             /* n: the own segment's side */
	int64_t *res;                  /* n, by position */
	size_t *idx;                   /* n */
	size_t nput;
};

static void tier_free(struct kv_tier *t)
{
	for (size_t i = 0; t->keys && i < t->n; i++)
		free(t->keys[i]);
	free(t->keys);
	free(t->iov);
	free(t->res);
	free(t->idx);
	free(t);
}

/* ---- mounting ---- */

static void on_ssd_mount(struct kv_rpc *r, const struct store_msg *rep)
{
	struct xfer_kv *kv = container_of(r, struct xfer_kv, ssd_mount_rpc);
	int err = rep ? rep->err : XFER_KV_RPC_FAIL;

	kv->ssd_mount_out = false;
	kv->ssd_mounted = !err && kv->ssd_name;  /* not if given up */
	if (kv->ssd_wait) {
		xfer_wait_done(kv->ssd_wait, !err ? 0 : rep ? -EPROTO :
					     -ECONNRESET);
		kv->ssd_wait = NULL;
	} else if (err) {
		xfer_log(XFER_LOG_WARN, "xfer store client: mounting %s "
			 "failed: %d", kv->ssd_name, err);
	}
}

void kv_ssd_mount(struct xfer_kv *kv)
{
	if (!kv->ssd_name || kv->ssd_mount_out || !kv->bev || kv->closing)
		return;
	kv->ssd_mount_out = true;
	kv->ssd_mount_rpc.done = on_ssd_mount;
	kv_mount_send(kv, &kv->ssd_mount_rpc, kv->ssd_id, kv->ssd_base,
		      kv->ssd_size, STORE_MEDIUM_SSD, kv->ssd_name);
}

/* What xfer_kv_mount_file() hands the reactor, which owns kv->ssd_*. */
struct mount_req {
	struct xfer_kv *kv;
	char *name;
	uint64_t base, size;
	uint8_t id[STORE_ID_LEN];
	struct xfer_wait *w;
};

static void mount_begin(void *arg)
{
	struct mount_req *m = arg;
	struct xfer_kv *kv = m->kv;

	kv->ssd_name = m->name;
	kv->ssd_base = m->base;
	kv->ssd_size = m->size;
	memcpy(kv->ssd_id, m->id, STORE_ID_LEN);
	kv->ssd_wait = m->w;
	if (!kv->bev) {                /* the tick connects, then mounts */
		xfer_wait_done(kv->ssd_wait, -ECONNRESET);
		kv->ssd_wait = NULL;
		return;
	}
	kv_ssd_mount(kv);
}

int xfer_kv_mount_file(struct xfer_kv *kv, uint64_t offset, uint64_t length)
{
	size_t nlen = strlen(xfer_engine_name(kv->e)) + sizeof("nvmeof/");
	struct mount_req m = { .kv = kv, .base = offset, .size = length };
	int64_t ret;

	if (length < 64 || offset > UINT64_MAX - length ||
	    nlen - 1 > STORE_NAME_MAX)
		return -EINVAL;
	if (xfer_reactor_on_thread(kv->r))
		return -EDEADLK;
	if (kv->ssd_name)
		return -EEXIST;
	m.name = malloc(nlen);
	m.w = xfer_wait_new();
	if (!m.name || !m.w ||
	    getrandom(m.id, STORE_ID_LEN, 0) != STORE_ID_LEN) {
		free(m.name);
		if (m.w) {
			xfer_wait_drop(m.w);
			xfer_wait_drop(m.w);
		}
		return -ENOMEM;
	}
	snprintf(m.name, nlen, "nvmeof/%s", xfer_engine_name(kv->e));
	xfer_reactor_run(kv->r, mount_begin, &m);
	ret = xfer_wait_for(m.w, KV_RPC_TIMEOUT_MS + 1000);
	if (ret)
		xfer_reactor_run(kv->r, kv_ssd_forget, kv);
	return (int)ret;
}

void kv_ssd_forget(void *arg)
{
	struct xfer_kv *kv = arg;

	if (kv->ssd_wait)
		xfer_wait_drop(kv->ssd_wait);
	kv->ssd_wait = NULL;
	free(kv->ssd_name);
	kv->ssd_name = NULL;
	kv->ssd_mounted = false;
}

static void on_ssd_unmount(struct kv_rpc *r, const struct store_msg *rep)
{
	struct xfer_kv *kv = container_of(r, struct xfer_kv,
					  ssd_unmount_rpc);

	(void)rep;
	kv->ssd_mounted = false;
	if (!kv->mounted)              /* else the DRAM one's answer ends */
		xfer_wait_done(kv->close_wait, 0);
}

bool kv_ssd_unmount(struct xfer_kv *kv)
{
	if (!kv->ssd_mounted || !kv->bev)
		return false;
	kv->ssd_unmount_rpc.done = on_ssd_unmount;
	kv_unmount_send(kv, &kv->ssd_unmount_rpc, kv->ssd_id);
	return true;
}


/* ---- copies between tiers ---- */

static void poll_send(struct xfer_kv *kv);

static void on_done(struct kv_rpc *r, const struct store_msg *rep)
{
	struct kv_tier *t = container_of(r, struct kv_tier, rpc);
	struct xfer_kv *kv = t->kv;

	(void)rep;
	tier_free(t);
	kv->tier_out = false;
	poll_send(kv);                 /* there was work: maybe more */
}

/* Both ops ended: report each copy. */
static void on_moved(struct xfer_kv *kv, int64_t result, void *arg)
{
	struct kv_tier *t = arg;
	struct store_msg *m = kv->req;

	(void)result;
	if (--t->ops_out)
		return;
	memcpy(m->client, kv->client_id, STORE_ID_LEN);
	m->n = (uint32_t)t->n;
	for (size_t p = 0; p < t->n; p++) {
		const char *key = t->keys[t->idx[p]];

		m->items[p].key = (struct store_str){ key,
						      (uint16_t)strlen(key) };
		m->items[p].err = t->res[p] < 0 ? (int32_t)t->res[p] : 0;
	}
	t->rpc.done = on_done;
	kv_rpc_send(kv, &t->rpc, STORE_TIER_DONE);
}

/* The own segments' side of a copy, if @p r lies in one. */
static bool own_side(struct xfer_kv *kv, const struct store_replica *r,
		     struct iovec *iov)
{
	size_t nlen = strlen(kv->name);

	if (r->endpoint.len != nlen || memcmp(r->endpoint.p, kv->name, nlen) ||
	    !kv_own_has(kv, r->addr, r->len))
		return false;
	*iov = (struct iovec){ (void *)(uintptr_t)r->addr, r->len };
	return true;
}

/* An op moving the keys t->idx[from, to): writes to, or reads from,
 * their peer replicas @p peer; without memory for it they fail. */
static void start_op(struct kv_tier *t, enum kv_kind kind, size_t from,
		    size_t to, const struct kv_rep *peer)
{
	const char **keys = calloc(to - from, sizeof(*keys));
	struct iovec *iov = calloc(to - from, sizeof(*iov));
	struct kv_op *op = NULL;

	if (keys && iov) {
		for (size_t i = from; i < to; i++) {
			keys[i - from] = t->keys[t->idx[i]];
			iov[i - from] = t->iov[t->idx[i]];
		}
		op = kv_op_new(t->kv, kind, to - from, keys, iov, NULL,
			       t->res + from);
	}
	free(keys);
	free(iov);
	if (!op) {
		for (size_t i = from; i < to; i++)
			t->res[i] = -ENOMEM;
		return;
	}
	op->flags = XFER_KV_ZERO_COPY;
	op->cb = on_moved;
	op->arg = t;
	for (size_t i = from; i < to; i++) {
		struct kv_key *k = &op->keys[i - from];

		k->rep[0] = peer[i];
		k->nrep = 1;
		k->lease_until_ms = INT64_MAX;  /* not a lease's read */
	}
	t->ops_out++;
	kv_op_move(op);
}

/* Take item @p it of a poll's answer into @p t as key t->n, with its
 * peer side into @p peer. @return 1 taken, 0 skipped (not ours to copy,
 * or malformed: it times out at the master), -ENOMEM. */
static int copy_take(struct xfer_kv *kv, struct kv_tier *t,
		     const struct store_item *it, struct kv_rep *peer,
		     bool *put)
{
	const struct store_replica *other;
	struct iovec iov;

	if (it->nrep != 2 || !it->key.len || !it->len ||
	    it->rep[0].len != it->len || it->rep[1].len != it->len)
		return 0;
	*put = own_side(kv, &it->rep[0], &iov);
	if (!*put && !own_side(kv, &it->rep[1], &iov))
		return 0;
	other = &it->rep[*put ? 1 : 0];
	*peer = (struct kv_rep){ other->addr,
				 kv_seg_get(kv, other->endpoint.p,
					    other->endpoint.len),
				 .hi = it->len, .parts = 1 };
	t->keys[t->n] = strndup(it->key.p, it->key.len);
	if (!peer->seg || !t->keys[t->n])
		return -ENOMEM;
	t->iov[t->n++] = iov;
	return 1;
}

/* Start the copies of a poll's answer @p rep: the writes as one op, the
 * reads as another. */
static int copies_start(struct xfer_kv *kv, const struct store_msg *rep)
{
	struct kv_tier *t = calloc(1, sizeof(*t));
	struct kv_rep *peer = calloc(rep->n, sizeof(*peer));
	struct kv_rep *byop = calloc(rep->n, sizeof(*byop));
	size_t nget = 0;
	int ret = -ENOMEM;

	if (!t || !peer || !byop ||
	    !(t->keys = calloc(rep->n, sizeof(*t->keys))) ||
	    !(t->iov = calloc(rep->n, sizeof(*t->iov))) ||
	    !(t->res = calloc(rep->n, sizeof(*t->res))) ||
	    !(t->idx = calloc(rep->n, sizeof(*t->idx))))
		goto out;
	t->kv = kv;
	/* writes at the front of idx, reads at the back */
	for (uint32_t i = 0; i < rep->n; i++) {
		size_t k = t->n;
		bool put;

		ret = copy_take(kv, t, &rep->items[i], &peer[k], &put);
		if (ret < 0)
			goto out;
		if (ret && put)
			t->idx[t->nput++] = k;
		else if (ret)
			t->idx[rep->n - ++nget] = k;
	}
	ret = 0;
	if (!t->n)
		goto out;
	memmove(t->idx + t->nput, t->idx + rep->n - nget,
		nget * sizeof(*t->idx));
	for (size_t p = 0; p < t->n; p++)
		byop[p] = peer[t->idx[p]];
	kv->tier_out = true;
	t->ops_out = 1;                /* held until both are started */
	if (t->nput)
		start_op(t, KV_PUT, 0, t->nput, byop);
	if (nget)
		start_op(t, KV_GET, t->nput, t->n, byop);
	free(byop);
	free(peer);
	on_moved(kv, 0, t);
	return 0;
out:
	free(byop);
	free(peer);
	if (t)
		tier_free(t);
	return ret;
}

static void on_poll(struct kv_rpc *r, const struct store_msg *rep)
{
	struct xfer_kv *kv = container_of(r, struct xfer_kv, tier_rpc);

	kv->tier_out = false;
	if (!rep || rep->err || !rep->n || kv->closing)
		return;
	if (copies_start(kv, rep))
		xfer_log(XFER_LOG_WARN, "xfer store client: no memory for "
			 "copies between tiers");
}

static void poll_send(struct xfer_kv *kv)
{
	if (kv->tier_out || !kv->mounted || !kv->bev || kv->closing)
		return;
	kv->tier_out = true;
	memcpy(kv->req->client, kv->client_id, STORE_ID_LEN);
	kv->tier_rpc.done = on_poll;
	kv_rpc_send(kv, &kv->tier_rpc, STORE_TIER_POLL);
}

void kv_ssd_tick(struct xfer_kv *kv)
{
	poll_send(kv);
}
