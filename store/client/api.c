/*
 * The store client's calls (include/xfer/store.h): each checks its
 * arguments, makes an op (op.c) and posts it to the control reactor; a
 * blocking form starts its asynchronous twin with a waiter (util/wait.c)
 * as the callback and waits for it, without a limit of its own since
 * every step has one.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "store/client/kv_internal.h"
#include "util/wait_internal.h"

static bool bad_args(const struct kv_call *c)
{
	const struct xfer_kv_replicate *rc = c->rc;

	if (!c->cb || (c->flags & ~XFER_KV_ZERO_COPY))
		return true;
	if (c->kind == KV_REMOVE_ALL || c->kind == KV_SYNC)
		return false;
	if (c->kind == KV_QUERY_TASK)
		return !c->task;
	if (c->kind == KV_CREATE_TASK) {
		if (!c->targets || !c->ntargets ||
		    c->ntargets > XFER_KV_REPLICA_MAX)
			return true;
		for (size_t i = 0; i < c->ntargets; i++)
			if (!c->targets[i] || !*c->targets[i] ||
			    strlen(c->targets[i]) > STORE_NAME_MAX)
				return true;
	}
	if (c->kind == KV_REMOVE_REGEX)
		return !c->pattern || !*c->pattern ||
		       strlen(c->pattern) > STORE_PATTERN_MAX;
	if (!c->n || !c->keys || ((c->kind == KV_PUT || c->kind == KV_GET) &&
				  !c->iov) || (c->batch && !c->results) ||
	    (c->kind == KV_DESC && !c->desc))
		return true;
	for (size_t i = 0; i < c->n; i++)
		if (!c->keys[i])
			return true;
	if (c->segment && strlen(c->segment) > STORE_NAME_MAX)
		return true;
	return rc && (!(rc->replica_num + rc->nof_replica_num) ||
		      rc->replica_num > STORE_REPLICA_MAX ||
		      rc->nof_replica_num > STORE_REPLICA_MAX ||
		      rc->replica_num + rc->nof_replica_num > STORE_REPLICA_MAX ||
		      rc->flush > XFER_KV_FLUSH_LAZY ||
		      (rc->preferred_segment &&
		       strlen(rc->preferred_segment) > STORE_NAME_MAX));
}

int kv_call(struct xfer_kv *kv, const struct kv_call *c)
{
	const struct xfer_kv_replicate *rc = c->rc;
	const char *pref;
	struct kv_op *op;

	if (atomic_load(&kv->closing))
		return -ESHUTDOWN;
	if (bad_args(c))
		return XFER_KV_INVALID_PARAMS;
	op = kv_op_new(kv, c->kind, c->n, c->keys, c->iov, c->iovcnt,
		       c->results);
	if (!op)
		return -ENOMEM;
	op->flags = c->flags;
	op->force = c->force;
	op->replicas = rc ? (uint8_t)rc->replica_num :
		       c->kind == KV_REPLICATE ? c->replicas : 1;
	op->ssd_replicas = rc ? (uint8_t)rc->nof_replica_num :
			   c->ssd_replicas;
	op->task_id = c->task_id;
	op->task = c->task;
	op->task_type = c->task_type;
	if (c->targets && kv_op_targets(op, c->targets, c->ntargets)) {
		kv_op_free(op);
		return -ENOMEM;
	}
	op->flush = rc && c->kind == KV_PUT ? (uint8_t)rc->flush : 0;
	op->pin = (rc ? (rc->with_soft_pin ? 1 : 0) |
			(rc->with_hard_pin ? 2 : 0) : 0) | (c->upsert ? 4 : 0);
	op->min_version = c->min_version;
	op->version = c->version;
	op->desc = c->desc;
	for (size_t i = 0; c->src_offsets && i < c->n; i++) {
		op->keys[i].ranged = true;
		op->keys[i].src_off = c->src_offsets[i];
	}
	if (c->pattern && !(op->pattern = strdup(c->pattern))) {
		kv_op_free(op);
		return -ENOMEM;
	}
	pref = c->segment ? c->segment : rc ? rc->preferred_segment : NULL;
	if (pref && *pref && !(op->preferred = strdup(pref))) {
		kv_op_free(op);
		return -ENOMEM;
	}
	op->cb = c->cb;
	op->arg = c->arg;
	kv_op_post(op);
	return 0;
}

/* ---- the blocking forms ---- */

static void wait_cb(struct xfer_kv *kv, int64_t result, void *arg)
{
	(void)kv;
	xfer_wait_done(arg, result);
}

static int wait_begin(struct xfer_kv *kv, struct xfer_wait **w)
{
	if (xfer_reactor_on_thread(kv->r))
		return -EDEADLK;
	*w = xfer_wait_new();
	return *w ? 0 : -ENOMEM;
}

static int64_t wait_end(struct xfer_wait *w, int started)
{
	if (!started)
		return xfer_wait_for(w, INT_MAX);
	xfer_wait_drop(w);
	xfer_wait_drop(w);
	return started;
}

int64_t kv_call_wait(struct xfer_kv *kv, struct kv_call *c)
{
	struct xfer_wait *w;
	int ret = wait_begin(kv, &w);

	if (ret)
		return ret;
	c->cb = wait_cb;
	c->arg = w;
	return wait_end(w, kv_call(kv, c));
}

/* ---- put ---- */

static struct kv_call put1(const char *key, const void *value, size_t len,
			unsigned flags, const struct xfer_kv_replicate *rc,
			const char **k, struct iovec *iov)
{
	*k = key;
	*iov = (struct iovec){ (void *)value, len };
	return (struct kv_call){ .kind = KV_PUT, .n = 1, .keys = k, .iov = iov,
			      .flags = flags, .rc = rc };
}

int xfer_kv_put_async(struct xfer_kv *kv, const char *key, const void *value,
		      size_t len, const struct xfer_kv_replicate *rc,
		      xfer_kv_cb cb, void *arg)
{
	struct iovec iov;
	const char *k;
	struct kv_call c = put1(key, value, len, 0, rc, &k, &iov);

	c.cb = cb;
	c.arg = arg;
	return kv_call(kv, &c);
}

int xfer_kv_put(struct xfer_kv *kv, const char *key, const void *value,
		size_t len, const struct xfer_kv_replicate *rc)
{
	struct iovec iov;
	const char *k;
	struct kv_call c = put1(key, value, len, 0, rc, &k, &iov);

	return (int)kv_call_wait(kv, &c);
}

int xfer_kv_put_from_async(struct xfer_kv *kv, const char *key,
			   const void *buf, size_t len,
			   const struct xfer_kv_replicate *rc, xfer_kv_cb cb,
			   void *arg)
{
	struct iovec iov;
	const char *k;
	struct kv_call c = put1(key, buf, len, XFER_KV_ZERO_COPY, rc, &k, &iov);

	c.cb = cb;
	c.arg = arg;
	return kv_call(kv, &c);
}

int xfer_kv_put_from(struct xfer_kv *kv, const char *key, const void *buf,
		     size_t len, const struct xfer_kv_replicate *rc)
{
	struct iovec iov;
	const char *k;
	struct kv_call c = put1(key, buf, len, XFER_KV_ZERO_COPY, rc, &k, &iov);

	return (int)kv_call_wait(kv, &c);
}

int xfer_kv_batch_put_async(struct xfer_kv *kv, size_t n,
			    const char *const *keys, const struct iovec *iov,
			    const size_t *iovcnt, unsigned flags,
			    const struct xfer_kv_replicate *rc,
			    int64_t *results, xfer_kv_cb cb, void *arg)
{
	return kv_call(kv, &(struct kv_call){
		.kind = KV_PUT, .n = n, .keys = keys, .iov = iov,
		.iovcnt = iovcnt, .flags = flags, .rc = rc,
		.batch = true, .results = results, .cb = cb, .arg = arg });
}

int xfer_kv_batch_put(struct xfer_kv *kv, size_t n, const char *const *keys,
		      const struct iovec *iov, const size_t *iovcnt,
		      unsigned flags, const struct xfer_kv_replicate *rc,
		      int64_t *results)
{
	return (int)kv_call_wait(kv, &(struct kv_call){
		.kind = KV_PUT, .n = n, .keys = keys, .iov = iov,
		.iovcnt = iovcnt, .flags = flags, .rc = rc,
		.batch = true, .results = results });
}

/* ---- get ---- */

static struct kv_call get1(const char *key, void *buf, size_t cap,
			unsigned flags, const char **k, struct iovec *iov)
{
	*k = key;
	*iov = (struct iovec){ buf, cap };
	return (struct kv_call){ .kind = KV_GET, .n = 1, .keys = k, .iov = iov,
			      .flags = flags };
}

int xfer_kv_get_async(struct xfer_kv *kv, const char *key, void *buf,
		      size_t cap, xfer_kv_cb cb, void *arg)
{
	struct iovec iov;
	const char *k;
	struct kv_call c = get1(key, buf, cap, 0, &k, &iov);

	c.cb = cb;
	c.arg = arg;
	return kv_call(kv, &c);
}

int64_t xfer_kv_get(struct xfer_kv *kv, const char *key, void *buf,
		    size_t cap)
{
	struct iovec iov;
	const char *k;
	struct kv_call c = get1(key, buf, cap, 0, &k, &iov);

	return kv_call_wait(kv, &c);
}

int xfer_kv_get_into_async(struct xfer_kv *kv, const char *key, void *buf,
			   size_t cap, xfer_kv_cb cb, void *arg)
{
	struct iovec iov;
	const char *k;
	struct kv_call c = get1(key, buf, cap, XFER_KV_ZERO_COPY, &k, &iov);

	c.cb = cb;
	c.arg = arg;
	return kv_call(kv, &c);
}

int64_t xfer_kv_get_into(struct xfer_kv *kv, const char *key, void *buf,
			 size_t cap)
{
	struct iovec iov;
	const char *k;
	struct kv_call c = get1(key, buf, cap, XFER_KV_ZERO_COPY, &k, &iov);

	return kv_call_wait(kv, &c);
}

int xfer_kv_batch_get_async(struct xfer_kv *kv, size_t n,
			    const char *const *keys, const struct iovec *iov,
			    const size_t *iovcnt, unsigned flags,
			    int64_t *results, xfer_kv_cb cb, void *arg)
{
	return kv_call(kv, &(struct kv_call){
		.kind = KV_GET, .n = n, .keys = keys, .iov = iov,
		.iovcnt = iovcnt, .flags = flags, .batch = true,
		.results = results,
		.cb = cb, .arg = arg });
}

int xfer_kv_batch_get(struct xfer_kv *kv, size_t n, const char *const *keys,
		      const struct iovec *iov, const size_t *iovcnt,
		      unsigned flags, int64_t *results)
{
	return (int)kv_call_wait(kv, &(struct kv_call){
		.kind = KV_GET, .n = n, .keys = keys, .iov = iov,
		.iovcnt = iovcnt, .flags = flags, .batch = true,
		.results = results });
}

/* ---- exist, size, remove ---- */

int xfer_kv_exist_async(struct xfer_kv *kv, const char *key, xfer_kv_cb cb,
			void *arg)
{
	return kv_call(kv, &(struct kv_call){ .kind = KV_EXIST, .n = 1,
					.keys = &key, .cb = cb, .arg = arg });
}

int xfer_kv_exist(struct xfer_kv *kv, const char *key)
{
	return (int)kv_call_wait(kv, &(struct kv_call){ .kind = KV_EXIST, .n = 1,
						  .keys = &key });
}

int xfer_kv_batch_exist_async(struct xfer_kv *kv, size_t n,
			      const char *const *keys, int64_t *results,
			      xfer_kv_cb cb, void *arg)
{
	return kv_call(kv, &(struct kv_call){ .kind = KV_EXIST, .n = n,
					.keys = keys, .batch = true,
					.results = results,
					.cb = cb, .arg = arg });
}

int xfer_kv_batch_exist(struct xfer_kv *kv, size_t n, const char *const *keys,
			int64_t *results)
{
	return (int)kv_call_wait(kv, &(struct kv_call){
		.kind = KV_EXIST, .n = n, .keys = keys, .batch = true,
		.results = results });
}

int xfer_kv_get_size_async(struct xfer_kv *kv, const char *key, xfer_kv_cb cb,
			   void *arg)
{
	return kv_call(kv, &(struct kv_call){ .kind = KV_SIZE, .n = 1,
					.keys = &key, .cb = cb, .arg = arg });
}

int64_t xfer_kv_get_size(struct xfer_kv *kv, const char *key)
{
	return kv_call_wait(kv, &(struct kv_call){ .kind = KV_SIZE, .n = 1,
					     .keys = &key });
}

int xfer_kv_remove_async(struct xfer_kv *kv, const char *key, bool force,
			 xfer_kv_cb cb, void *arg)
{
	return kv_call(kv, &(struct kv_call){ .kind = KV_REMOVE, .n = 1,
					.keys = &key, .force = force,
					.cb = cb, .arg = arg });
}

int xfer_kv_remove(struct xfer_kv *kv, const char *key, bool force)
{
	return (int)kv_call_wait(kv, &(struct kv_call){
		.kind = KV_REMOVE, .n = 1, .keys = &key, .force = force });
}

int xfer_kv_batch_remove_async(struct xfer_kv *kv, size_t n,
			       const char *const *keys, bool force,
			       int64_t *results, xfer_kv_cb cb, void *arg)
{
	return kv_call(kv, &(struct kv_call){ .kind = KV_REMOVE, .n = n,
					.keys = keys, .force = force,
					.batch = true, .results = results,
					.cb = cb,
					.arg = arg });
}

int xfer_kv_batch_remove(struct xfer_kv *kv, size_t n,
			 const char *const *keys, bool force,
			 int64_t *results)
{
	return (int)kv_call_wait(kv, &(struct kv_call){
		.kind = KV_REMOVE, .n = n, .keys = keys, .force = force,
		.batch = true, .results = results });
}

int xfer_kv_remove_all_async(struct xfer_kv *kv, bool force, xfer_kv_cb cb,
			     void *arg)
{
	return kv_call(kv, &(struct kv_call){ .kind = KV_REMOVE_ALL, .force = force,
					.cb = cb, .arg = arg });
}

int64_t xfer_kv_remove_all(struct xfer_kv *kv, bool force)
{
	return kv_call_wait(kv, &(struct kv_call){ .kind = KV_REMOVE_ALL,
					     .force = force });
}
