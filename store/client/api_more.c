/*
 * The store client's calls beyond put, get, exist and remove
 * (include/xfer/store.h): upserts, reads of a version at least, sync and
 * removal by pattern, replication tasks. Each is a kv_call() (api.c)
 * with its fields set.
 */
#include "store/client/kv_internal.h"

/* ---- upsert ---- */

static struct kv_call upsert1(const char *key, const void *value, size_t len,
			      unsigned flags,
			      const struct xfer_kv_replicate *rc,
			      const char **k, struct iovec *iov)
{
	*k = key;
	*iov = (struct iovec){ (void *)value, len };
	return (struct kv_call){ .kind = KV_PUT, .upsert = true, .n = 1,
				 .keys = k, .iov = iov, .flags = flags,
				 .rc = rc };
}

int xfer_kv_upsert_async(struct xfer_kv *kv, const char *key,
			 const void *value, size_t len,
			 const struct xfer_kv_replicate *rc, xfer_kv_cb cb,
			 void *arg)
{
	struct iovec iov;
	const char *k;
	struct kv_call c = upsert1(key, value, len, 0, rc, &k, &iov);

	c.cb = cb;
	c.arg = arg;
	return kv_call(kv, &c);
}

int xfer_kv_upsert(struct xfer_kv *kv, const char *key, const void *value,
		   size_t len, const struct xfer_kv_replicate *rc)
{
	struct iovec iov;
	const char *k;
	struct kv_call c = upsert1(key, value, len, 0, rc, &k, &iov);

	return (int)kv_call_wait(kv, &c);
}

int xfer_kv_upsert_from_async(struct xfer_kv *kv, const char *key,
			      const void *buf, size_t len,
			      const struct xfer_kv_replicate *rc,
			      xfer_kv_cb cb, void *arg)
{
	struct iovec iov;
	const char *k;
	struct kv_call c = upsert1(key, buf, len, XFER_KV_ZERO_COPY, rc, &k,
				   &iov);

	c.cb = cb;
	c.arg = arg;
	return kv_call(kv, &c);
}

int xfer_kv_upsert_from(struct xfer_kv *kv, const char *key, const void *buf,
			size_t len, const struct xfer_kv_replicate *rc)
{
	struct iovec iov;
	const char *k;
	struct kv_call c = upsert1(key, buf, len, XFER_KV_ZERO_COPY, rc, &k,
				   &iov);

	return (int)kv_call_wait(kv, &c);
}

int xfer_kv_batch_upsert_async(struct xfer_kv *kv, size_t n,
			       const char *const *keys,
			       const struct iovec *iov, const size_t *iovcnt,
			       unsigned flags,
			       const struct xfer_kv_replicate *rc,
			       int64_t *results, xfer_kv_cb cb, void *arg)
{
	return kv_call(kv, &(struct kv_call){
		.kind = KV_PUT, .upsert = true, .n = n, .keys = keys,
		.iov = iov, .iovcnt = iovcnt, .flags = flags, .rc = rc,
		.batch = true, .results = results, .cb = cb, .arg = arg });
}

int xfer_kv_batch_upsert(struct xfer_kv *kv, size_t n,
			 const char *const *keys, const struct iovec *iov,
			 const size_t *iovcnt, unsigned flags,
			 const struct xfer_kv_replicate *rc, int64_t *results)
{
	return (int)kv_call_wait(kv, &(struct kv_call){
		.kind = KV_PUT, .upsert = true, .n = n, .keys = keys,
		.iov = iov, .iovcnt = iovcnt, .flags = flags, .rc = rc,
		.batch = true, .results = results });
}

/* ---- versions ---- */

static struct kv_call get_v(const char *key, void *buf, size_t cap,
			    unsigned flags, uint64_t min_version,
			    uint64_t *version, const char **k,
			    struct iovec *iov)
{
	*k = key;
	*iov = (struct iovec){ buf, cap };
	return (struct kv_call){ .kind = KV_GET, .n = 1, .keys = k,
				 .iov = iov, .flags = flags,
				 .min_version = min_version,
				 .version = version };
}

int xfer_kv_get_version_async(struct xfer_kv *kv, const char *key, void *buf,
			      size_t cap, unsigned flags,
			      uint64_t min_version, uint64_t *version,
			      xfer_kv_cb cb, void *arg)
{
	struct iovec iov;
	const char *k;
	struct kv_call c = get_v(key, buf, cap, flags, min_version, version,
				 &k, &iov);

	c.cb = cb;
	c.arg = arg;
	return kv_call(kv, &c);
}

int64_t xfer_kv_get_version(struct xfer_kv *kv, const char *key, void *buf,
			    size_t cap, unsigned flags, uint64_t min_version,
			    uint64_t *version)
{
	struct iovec iov;
	const char *k;
	struct kv_call c = get_v(key, buf, cap, flags, min_version, version,
				 &k, &iov);

	return kv_call_wait(kv, &c);
}

int xfer_kv_sync_async(struct xfer_kv *kv, xfer_kv_cb cb, void *arg)
{
	return kv_call(kv, &(struct kv_call){ .kind = KV_SYNC, .cb = cb,
					      .arg = arg });
}

int64_t xfer_kv_sync(struct xfer_kv *kv)
{
	return kv_call_wait(kv, &(struct kv_call){ .kind = KV_SYNC });
}

/* ---- ranges ---- */

int xfer_kv_batch_get_ranges_async(struct xfer_kv *kv, size_t n,
				   const char *const *keys,
				   const uint64_t *src_offsets,
				   const struct iovec *dst, unsigned flags,
				   int64_t *results, xfer_kv_cb cb, void *arg)
{
	if (!src_offsets)
		return XFER_KV_INVALID_PARAMS;
	return kv_call(kv, &(struct kv_call){
		.kind = KV_GET, .n = n, .keys = keys, .iov = dst,
		.src_offsets = src_offsets, .flags = flags, .batch = true,
		.results = results, .cb = cb, .arg = arg });
}

int xfer_kv_batch_get_ranges(struct xfer_kv *kv, size_t n,
			     const char *const *keys,
			     const uint64_t *src_offsets,
			     const struct iovec *dst, unsigned flags,
			     int64_t *results)
{
	if (!src_offsets)
		return XFER_KV_INVALID_PARAMS;
	return (int)kv_call_wait(kv, &(struct kv_call){
		.kind = KV_GET, .n = n, .keys = keys, .iov = dst,
		.src_offsets = src_offsets, .flags = flags, .batch = true,
		.results = results });
}

/* ---- replica descriptors ---- */

int xfer_kv_batch_get_replica_desc_async(struct xfer_kv *kv, size_t n,
					 const char *const *keys,
					 struct xfer_kv_replica_desc *desc,
					 int64_t *results, xfer_kv_cb cb,
					 void *arg)
{
	return kv_call(kv, &(struct kv_call){ .kind = KV_DESC, .n = n,
					      .keys = keys, .desc = desc,
					      .batch = true,
					      .results = results, .cb = cb,
					      .arg = arg });
}

int xfer_kv_batch_get_replica_desc(struct xfer_kv *kv, size_t n,
				   const char *const *keys,
				   struct xfer_kv_replica_desc *desc,
				   int64_t *results)
{
	return (int)kv_call_wait(kv, &(struct kv_call){
		.kind = KV_DESC, .n = n, .keys = keys, .desc = desc,
		.batch = true, .results = results });
}

int xfer_kv_get_replica_desc(struct xfer_kv *kv, const char *key,
			     struct xfer_kv_replica_desc *desc)
{
	return (int)kv_call_wait(kv, &(struct kv_call){
		.kind = KV_DESC, .n = 1, .keys = &key, .desc = desc });
}

/* ---- replica clear ---- */

int xfer_kv_batch_replica_clear_async(struct xfer_kv *kv, size_t n,
				      const char *const *keys,
				      const char *segment, int64_t *results,
				      xfer_kv_cb cb, void *arg)
{
	return kv_call(kv, &(struct kv_call){ .kind = KV_REPLICA_CLEAR,
					      .n = n, .keys = keys,
					      .segment = segment,
					      .batch = true,
					      .results = results, .cb = cb,
					      .arg = arg });
}

int xfer_kv_batch_replica_clear(struct xfer_kv *kv, size_t n,
				const char *const *keys, const char *segment,
				int64_t *results)
{
	return (int)kv_call_wait(kv, &(struct kv_call){
		.kind = KV_REPLICA_CLEAR, .n = n, .keys = keys,
		.segment = segment, .batch = true, .results = results });
}

/* ---- remove by pattern ---- */

int xfer_kv_remove_by_regex_async(struct xfer_kv *kv, const char *pattern,
				  bool force, xfer_kv_cb cb, void *arg)
{
	return kv_call(kv, &(struct kv_call){ .kind = KV_REMOVE_REGEX,
					      .pattern = pattern,
					      .force = force, .cb = cb,
					      .arg = arg });
}

int64_t xfer_kv_remove_by_regex(struct xfer_kv *kv, const char *pattern,
				bool force)
{
	return kv_call_wait(kv, &(struct kv_call){ .kind = KV_REMOVE_REGEX,
						   .pattern = pattern,
						   .force = force });
}

/* ---- replication tasks ---- */

static struct kv_call replicate1(const char *const *key, unsigned dram,
				 unsigned ssd)
{
	return (struct kv_call){ .kind = KV_REPLICATE, .n = 1, .keys = key,
				 .replicas = (uint8_t)dram,
				 .ssd_replicas = (uint8_t)ssd };
}

int xfer_kv_replicate_async(struct xfer_kv *kv, const char *key,
			    unsigned replica_num, unsigned nof_replica_num,
			    xfer_kv_cb cb, void *arg)
{
	struct kv_call c = replicate1(&key, replica_num, nof_replica_num);

	if (replica_num > XFER_KV_REPLICA_MAX ||
	    nof_replica_num > XFER_KV_REPLICA_MAX)
		return XFER_KV_INVALID_PARAMS;
	c.cb = cb;
	c.arg = arg;
	return kv_call(kv, &c);
}

int64_t xfer_kv_replicate(struct xfer_kv *kv, const char *key,
			  unsigned replica_num, unsigned nof_replica_num)
{
	struct kv_call c = replicate1(&key, replica_num, nof_replica_num);

	if (replica_num > XFER_KV_REPLICA_MAX ||
	    nof_replica_num > XFER_KV_REPLICA_MAX)
		return XFER_KV_INVALID_PARAMS;
	return kv_call_wait(kv, &c);
}

int xfer_kv_query_task_async(struct xfer_kv *kv, uint64_t id,
			     struct xfer_kv_task *out, xfer_kv_cb cb,
			     void *arg)
{
	return kv_call(kv, &(struct kv_call){ .kind = KV_QUERY_TASK,
					      .task_id = id, .task = out,
					      .cb = cb, .arg = arg });
}

int xfer_kv_query_task(struct xfer_kv *kv, uint64_t id,
		       struct xfer_kv_task *out)
{
	return (int)kv_call_wait(kv, &(struct kv_call){
		.kind = KV_QUERY_TASK, .task_id = id, .task = out });
}

static struct kv_call create1(const char *const *key, uint8_t type,
			      const char *source,
			      const char *const *targets, size_t n)
{
	return (struct kv_call){ .kind = KV_CREATE_TASK, .n = 1, .keys = key,
				 .task_type = type, .segment = source,
				 .targets = targets, .ntargets = n };
}

int xfer_kv_create_copy_task_async(struct xfer_kv *kv, const char *key,
				   const char *const *targets, size_t n,
				   xfer_kv_cb cb, void *arg)
{
	struct kv_call c = create1(&key, XFER_KV_TASK_REPLICA_COPY, NULL,
				   targets, n);

	c.cb = cb;
	c.arg = arg;
	return kv_call(kv, &c);
}

int64_t xfer_kv_create_copy_task(struct xfer_kv *kv, const char *key,
				 const char *const *targets, size_t n)
{
	struct kv_call c = create1(&key, XFER_KV_TASK_REPLICA_COPY, NULL,
				   targets, n);

	return kv_call_wait(kv, &c);
}

int xfer_kv_create_move_task_async(struct xfer_kv *kv, const char *key,
				   const char *source, const char *target,
				   xfer_kv_cb cb, void *arg)
{
	struct kv_call c = create1(&key, XFER_KV_TASK_REPLICA_MOVE, source,
				   &target, 1);

	if (!source || !*source)
		return XFER_KV_INVALID_PARAMS;
	c.cb = cb;
	c.arg = arg;
	return kv_call(kv, &c);
}

int64_t xfer_kv_create_move_task(struct xfer_kv *kv, const char *key,
				 const char *source, const char *target)
{
	struct kv_call c = create1(&key, XFER_KV_TASK_REPLICA_MOVE, source,
				   &target, 1);

	if (!source || !*source)
		return XFER_KV_INVALID_PARAMS;
	return kv_call_wait(kv, &c);
}
