/*
 * More DRAM segments of the caller's memory (kv_internal.h,
 * xfer_kv_mount_segment()): each is registered with the engine and
 * mounted with a segment id of its own, under the engine's name as the
 * own segment is, so peers reach it as they reach that one; it is
 * mounted again whenever the own segment is, and unmounted by
 * xfer_kv_free().
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "store/client/kv_internal.h"
#include "util/log_internal.h"
#include "util/wait_internal.h"

static void unlink_extra(struct xfer_kv *kv, struct kv_extra *x)
{
	struct kv_extra **p = &kv->extras;

	while (*p != x)
		p = &(*p)->next;
	*p = x->next;
}

static void on_mount(struct kv_rpc *r, const struct store_msg *rep)
{
	struct kv_extra *x = container_of(r, struct kv_extra, mount_rpc);
	int err = rep ? rep->err : XFER_KV_RPC_FAIL;

	x->mount_out = false;
	if (x->dropped) {              /* its caller gave up waiting */
		unlink_extra(x->kv, x);
		free(x);
		return;
	}
	x->mounted = !err;
	if (x->wait) {
		xfer_wait_done(x->wait, err);
		x->wait = NULL;
	} else if (err) {
		xfer_log(XFER_LOG_WARN, "xfer store client: mounting a segment "
			 "of %llu bytes failed: %d",
			 (unsigned long long)x->size, err);
	}
}

static void send_mount(struct xfer_kv *kv, struct kv_extra *x)
{
	if (!x->ready || x->mount_out || x->unmounting || x->dropped ||
	    !kv->bev || kv->closing)
		return;
	x->mount_out = true;
	x->mount_rpc.done = on_mount;
	kv_mount_send(kv, &x->mount_rpc, x->id, x->base, x->size,
		      STORE_MEDIUM_DRAM, kv->name);
}

void kv_extra_mount(struct xfer_kv *kv)
{
	for (struct kv_extra *x = kv->extras; x; x = x->next)
		send_mount(kv, x);
}

static bool overlaps(uint64_t a, uint64_t alen, const void *b, uint64_t blen)
{
	uint64_t bb = (uintptr_t)b;

	return blen && a < bb + blen && bb < a + alen;
}

/* What the public calls hand the reactor, which owns kv->extras. */
struct extra_req {
	struct xfer_kv *kv;
	struct kv_extra *x;
	uint64_t base, size;
	struct xfer_wait *w;
	int err;
};

/* Take the range, unless it overlaps one of the client's own. */
static void add(void *arg)
{
	struct extra_req *q = arg;
	struct xfer_kv *kv = q->kv;

	q->err = XFER_KV_INVALID_PARAMS;
	if (overlaps(q->base, q->size, kv->seg_mem, kv->seg_size) ||
	    overlaps(q->base, q->size, kv->stage_mem, kv->stage_size))
		return;
	for (struct kv_extra *x = kv->extras; x; x = x->next)
		if (overlaps(q->base, q->size, (void *)(uintptr_t)x->base,
			     x->size))
			return;
	q->x->next = kv->extras;
	kv->extras = q->x;
	q->err = 0;
}

static void mount_begin(void *arg)
{
	struct extra_req *q = arg;

	q->x->ready = true;            /* a reconnect mounts it from now */
	if (!q->kv->bev) {             /* the tick connects, then mounts */
		xfer_wait_done(q->w, XFER_KV_RPC_FAIL);
		return;
	}
	q->x->wait = q->w;
	send_mount(q->kv, q->x);
}

/* The mount failed: forget it, now or once its answer came. */
static void drop(void *arg)
{
	struct extra_req *q = arg;
	struct kv_extra *x = q->x;

	if (x->wait)
		xfer_wait_drop(x->wait);
	x->wait = NULL;
	if (x->mount_out) {
		x->dropped = true;
		return;
	}
	unlink_extra(q->kv, x);
	free(x);
}

static void unregister(struct xfer_kv *kv, uint64_t base)
{
	/* peers' reads of the segment end first (or time out) */
	while (xfer_unregister(kv->e, (void *)(uintptr_t)base) == -EBUSY)
		nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
}

int xfer_kv_mount_segment(struct xfer_kv *kv, void *addr, size_t len)
{
	struct extra_req q = { .kv = kv, .base = (uintptr_t)addr,
			       .size = len };
	int64_t ret;

	if (!addr || len < KV_SEG_ALIGN || q.base % KV_SEG_ALIGN ||
	    len % KV_SEG_ALIGN || q.base > UINT64_MAX - len)
		return XFER_KV_INVALID_PARAMS;
	if (xfer_reactor_on_thread(kv->r))
		return -EDEADLK;
	q.x = calloc(1, sizeof(*q.x));
	if (!q.x || getrandom(q.x->id, STORE_ID_LEN, 0) != STORE_ID_LEN) {
		free(q.x);
		return -ENOMEM;
	}
	q.x->kv = kv;
	q.x->base = q.base;
	q.x->size = len;
	xfer_reactor_run(kv->r, add, &q);
	if (q.err) {
		free(q.x);
		return q.err;
	}
	ret = xfer_register(kv->e, addr, len, "*", true);
	if (ret) {
		xfer_reactor_run(kv->r, drop, &q);
		return ret == -ENOMEM ? -ENOMEM : XFER_KV_INVALID_PARAMS;
	}
	q.w = xfer_wait_new();
	if (!q.w) {
		ret = -ENOMEM;
		goto fail;
	}
	xfer_reactor_run(kv->r, mount_begin, &q);
	ret = xfer_wait_for(q.w, KV_RPC_TIMEOUT_MS + 1000);
	if (!ret)
		return 0;
fail:
	xfer_reactor_run(kv->r, drop, &q);
	unregister(kv, q.base);
	return ret == -ETIMEDOUT ? XFER_KV_RPC_FAIL : (int)ret;
}

static void on_unmount(struct kv_rpc *r, const struct store_msg *rep)
{
	struct kv_extra *x = container_of(r, struct kv_extra, unmount_rpc);
	int err = rep ? rep->err : XFER_KV_RPC_FAIL;

	/* a master that lost it (expired us, restarted) holds none of it */
	if (err == XFER_KV_SEGMENT_NOT_FOUND)
		err = 0;
	if (err) {
		x->unmounting = false;
		xfer_wait_done(x->wait, err);
		x->wait = NULL;
		return;
	}
	xfer_wait_done(x->wait, 0);
	unlink_extra(x->kv, x);
	free(x);
}

static void unmount_begin(void *arg)
{
	struct extra_req *q = arg;
	struct xfer_kv *kv = q->kv;
	struct kv_extra *x = kv->extras;

	while (x && (x->base != q->base || x->size != q->size ||
		     !x->ready || x->unmounting))
		x = x->next;
	if (!x || !kv->bev) {
		xfer_wait_done(q->w, x ? XFER_KV_RPC_FAIL :
				     XFER_KV_INVALID_PARAMS);
		return;
	}
	x->unmounting = true;
	x->wait = q->w;
	x->unmount_rpc.done = on_unmount;
	kv_unmount_send(kv, &x->unmount_rpc, x->id);
}

int xfer_kv_unmount_segment(struct xfer_kv *kv, void *addr, size_t len)
{
	struct extra_req q = { .kv = kv, .base = (uintptr_t)addr,
			       .size = len };
	int64_t ret;

	if (xfer_reactor_on_thread(kv->r))
		return -EDEADLK;
	q.w = xfer_wait_new();
	if (!q.w)
		return -ENOMEM;
	xfer_reactor_run(kv->r, unmount_begin, &q);
	/* the request fails at KV_RPC_TIMEOUT_MS: its answer comes first */
	ret = xfer_wait_for(q.w, KV_RPC_TIMEOUT_MS + 1000);
	if (ret)
		return ret == -ETIMEDOUT ? XFER_KV_RPC_FAIL : (int)ret;
	unregister(kv, q.base);
	return 0;
}

static void on_close_unmount(struct kv_rpc *r, const struct store_msg *rep)
{
	struct kv_extra *x = container_of(r, struct kv_extra, unmount_rpc);

	(void)rep;
	x->mounted = false;
	if (x->ends_close)
		xfer_wait_done(x->kv->close_wait, 0);
}

bool kv_extra_unmount_all(struct xfer_kv *kv, bool ends_close)
{
	struct kv_extra *last = NULL;

	if (!kv->bev)
		return false;
	for (struct kv_extra *x = kv->extras; x; x = x->next)
		if (x->mounted && !x->unmounting)
			last = x;
	for (struct kv_extra *x = kv->extras; last && x; x = x->next) {
		if (!x->mounted || x->unmounting)
			continue;
		x->unmounting = true;
		x->ends_close = ends_close && x == last;
		x->unmount_rpc.done = on_close_unmount;
		kv_unmount_send(kv, &x->unmount_rpc, x->id);
	}
	return last != NULL;
}

void kv_extra_free_all(struct xfer_kv *kv)
{
	while (kv->extras) {
		struct kv_extra *x = kv->extras;

		kv->extras = x->next;
		if (!kv->own_engine)   /* else it goes with the engine */
			unregister(kv, x->base);
		if (x->wait)
			xfer_wait_drop(x->wait);
		free(x);
	}
}
