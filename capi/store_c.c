/*
 * Mooncake Store's C API (include/xfer/store_c.h) on xfer's store client
 * (include/xfer/store.h): a mooncake_store_t holds a struct xfer_kv once
 * set up; its answers are already Mooncake's ErrorCodes, but for the
 * errnos of what is local, which Mooncake's wrapper answers as -1.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include <xfer/store.h>
#include <xfer/store_c.h>

#define MC_INTERNAL_ERROR (-1)

struct ms {
	struct xfer_kv *kv;
};

static struct xfer_kv *kv_of(mooncake_store_t store)
{
	return store ? ((struct ms *)store)->kv : NULL;
}

/* The client's answers, Mooncake's; a local errno is -1. */
static int64_t mc(int64_t r)
{
	return r == -ENOMEM || r == -EDEADLK || r == -ESHUTDOWN ?
	       MC_INTERNAL_ERROR : r;
}

static struct xfer_kv_replicate rc_of(const mooncake_replicate_config_t *c)
{
	struct xfer_kv_replicate rc = { .replica_num = 1 };

	if (!c)
		return rc;
	rc.replica_num = c->replica_num > 16 ? 17 : (unsigned)c->replica_num;
	rc.with_soft_pin = c->with_soft_pin;
	rc.with_hard_pin = c->with_hard_pin;
	if (c->preferred_segments && c->preferred_segments_count)
		rc.preferred_segment = c->preferred_segments[0];
	return rc;
}

mooncake_store_t mooncake_store_create(void)
{
	return calloc(1, sizeof(struct ms));
}

void mooncake_store_destroy(mooncake_store_t store)
{
	if (!store)
		return;
	xfer_kv_free(kv_of(store));
	free(store);
}

static int set(struct xfer_config *cfg, const char *key, const char *v)
{
	return v && *v ? xfer_config_set(cfg, key, v) : 0;
}

int mooncake_store_setup(mooncake_store_t store, const char *local_hostname,
			 const char *metadata_server,
			 uint64_t global_segment_size,
			 uint64_t local_buffer_size, const char *protocol,
			 const char *device_name,
			 const char *master_server_addr)
{
	struct ms *s = store;
	struct xfer_config *cfg;
	int err = EINVAL;

	if (!s || s->kv)
		return s ? XFER_KV_INVALID_PARAMS : MC_INTERNAL_ERROR;
	if (metadata_server && !strcmp(metadata_server, "P2PHANDSHAKE"))
		metadata_server = NULL;
	cfg = xfer_config_new();
	if (!cfg)
		return MC_INTERNAL_ERROR;
	if (!set(cfg, "local_server_name", local_hostname) &&
	    !set(cfg, "metadata_server", metadata_server) &&
	    !set(cfg, "protocol", protocol) &&
	    !set(cfg, "device_names", device_name)) {
		s->kv = xfer_kv_new(NULL, cfg, master_server_addr ?
				    master_server_addr : "127.0.0.1:50051",
				    global_segment_size, local_buffer_size);
		err = s->kv ? 0 : errno;
	}
	xfer_config_free(cfg);
	switch (err) {
	case 0:
		return 0;
	case EINVAL:
		return XFER_KV_INVALID_PARAMS;
	case ENOENT: case ECONNREFUSED: case ETIMEDOUT: case EACCES:
	case EPROTO: case ECONNRESET: case EHOSTUNREACH:
		return XFER_KV_RPC_FAIL;
	default:
		return MC_INTERNAL_ERROR;
	}
}

int mooncake_store_init_all(mooncake_store_t store, const char *protocol,
			    const char *device_name,
			    uint64_t mount_segment_size)
{
	return mooncake_store_setup(store, NULL, NULL, mount_segment_size,
				    1ull << 30, protocol, device_name, NULL);
}

int mooncake_store_health_check(mooncake_store_t store)
{
	if (!store)
		return MC_INTERNAL_ERROR;
	if (!kv_of(store))
		return 1;
	return xfer_kv_healthy(kv_of(store)) ? 0 : 2;
}

int mooncake_store_put(mooncake_store_t store, const char *key,
		       const void *value, size_t size,
		       const mooncake_replicate_config_t *config)
{
	struct xfer_kv_replicate rc = rc_of(config);

	if (!kv_of(store) || !key)
		return MC_INTERNAL_ERROR;
	return (int)mc(xfer_kv_put(kv_of(store), key, value, size, &rc));
}

int mooncake_store_put_from(mooncake_store_t store, const char *key,
			    void *buffer, size_t size,
			    const mooncake_replicate_config_t *config)
{
	struct xfer_kv_replicate rc = rc_of(config);

	if (!kv_of(store) || !key)
		return MC_INTERNAL_ERROR;
	return (int)mc(xfer_kv_put_from(kv_of(store), key, buffer, size,
					&rc));
}

/* A result not set: the call was refused whole (then no key's is). */
#define UNSET INT64_MIN

static void unset_to(int64_t *res, size_t n, int64_t r)
{
	for (size_t i = 0; i < n; i++)
		if (res[i] == UNSET)
			res[i] = r;
}

/* A batch of @p count buffers as iovecs and int64 results. */
static int batch(mooncake_store_t store, bool put, const char **keys,
		 void **buffers, const size_t *sizes, size_t count,
		 const mooncake_replicate_config_t *config, int *ires,
		 int64_t *lres)
{
	struct xfer_kv_replicate rc = rc_of(config);
	int64_t *res = lres ? lres : calloc(count ? count : 1, sizeof(*res));
	struct iovec *iov = calloc(count ? count : 1, sizeof(*iov));
	int ret = 0;

	if (!res || !iov) {
		ret = MC_INTERNAL_ERROR;
		goto out;
	}
	for (size_t i = 0; i < count; i++) {
		iov[i] = (struct iovec){ buffers[i], sizes[i] };
		res[i] = UNSET;
	}
	if (count) {
		int64_t r = put ? xfer_kv_batch_put(kv_of(store), count, keys,
						    iov, NULL,
						    XFER_KV_ZERO_COPY, &rc,
						    res) :
			    xfer_kv_batch_get(kv_of(store), count, keys, iov,
					      NULL, XFER_KV_ZERO_COPY, res);

		unset_to(res, count, r);
	}
	for (size_t i = 0; i < count; i++) {
		if (ires)
			ires[i] = (int)mc(res[i]);
		else
			res[i] = mc(res[i]);
	}
out:
	if (res != lres)
		free(res);
	free(iov);
	return ret;
}

int mooncake_store_batch_put_from(mooncake_store_t store, const char **keys,
				  void **buffers, const size_t *sizes,
				  size_t count,
				  const mooncake_replicate_config_t *config,
				  int *results_out)
{
	if (!kv_of(store) || !keys || !buffers || !sizes || !results_out)
		return MC_INTERNAL_ERROR;
	return batch(store, true, keys, buffers, sizes, count, config,
		     results_out, NULL);
}

int64_t mooncake_store_get_into(mooncake_store_t store, const char *key,
				void *buffer, size_t size)
{
	if (!kv_of(store) || !key)
		return MC_INTERNAL_ERROR;
	return mc(xfer_kv_get_into(kv_of(store), key, buffer, size));
}

int mooncake_store_batch_get_into(mooncake_store_t store, const char **keys,
				  void **buffers, const size_t *sizes,
				  size_t count, int64_t *results_out)
{
	if (!kv_of(store) || !keys || !buffers || !sizes || !results_out)
		return MC_INTERNAL_ERROR;
	return batch(store, false, keys, buffers, sizes, count, NULL, NULL,
		     results_out);
}

int mooncake_store_is_exist(mooncake_store_t store, const char *key)
{
	if (!kv_of(store) || !key)
		return MC_INTERNAL_ERROR;
	return (int)mc(xfer_kv_exist(kv_of(store), key));
}

int mooncake_store_batch_is_exist(mooncake_store_t store, const char **keys,
				  size_t count, int *results_out)
{
	int64_t *res;
	int64_t r;

	if (!kv_of(store) || !keys || !results_out)
		return MC_INTERNAL_ERROR;
	if (!count)
		return 0;
	res = malloc(count * sizeof(*res));
	if (!res)
		return MC_INTERNAL_ERROR;
	for (size_t i = 0; i < count; i++)
		res[i] = UNSET;
	r = xfer_kv_batch_exist(kv_of(store), count, keys, res);
	unset_to(res, count, r);
	for (size_t i = 0; i < count; i++)
		results_out[i] = (int)mc(res[i]);
	free(res);
	return 0;
}

int64_t mooncake_store_get_size(mooncake_store_t store, const char *key)
{
	if (!kv_of(store) || !key)
		return MC_INTERNAL_ERROR;
	return mc(xfer_kv_get_size(kv_of(store), key));
}

int mooncake_store_get_hostname(mooncake_store_t store, char *buf_out,
				size_t buf_len)
{
	const char *name;

	if (!kv_of(store) || !buf_out || !buf_len)
		return MC_INTERNAL_ERROR;
	name = xfer_engine_name(xfer_kv_engine(kv_of(store)));
	if (strlen(name) >= buf_len)
		return MC_INTERNAL_ERROR;
	memcpy(buf_out, name, strlen(name) + 1);
	return 0;
}

int mooncake_store_remove(mooncake_store_t store, const char *key, int force)
{
	if (!kv_of(store) || !key)
		return MC_INTERNAL_ERROR;
	return (int)mc(xfer_kv_remove(kv_of(store), key, force != 0));
}

int64_t mooncake_store_remove_by_regex(mooncake_store_t store,
				       const char *pattern, int force)
{
	if (!kv_of(store) || !pattern)
		return MC_INTERNAL_ERROR;
	return mc(xfer_kv_remove_by_regex(kv_of(store), pattern, force != 0));
}

int64_t mooncake_store_remove_all(mooncake_store_t store, int force)
{
	if (!kv_of(store))
		return MC_INTERNAL_ERROR;
	return mc(xfer_kv_remove_all(kv_of(store), force != 0));
}

int mooncake_store_register_buffer(mooncake_store_t store, void *buffer,
				   size_t size)
{
	int ret;

	if (!kv_of(store) || !buffer || !size)
		return MC_INTERNAL_ERROR;
	ret = xfer_kv_register_buffer(kv_of(store), buffer, size);
	return !ret ? 0 : ret == -EINVAL || ret == -EEXIST ?
	       XFER_KV_INVALID_PARAMS : MC_INTERNAL_ERROR;
}

int mooncake_store_unregister_buffer(mooncake_store_t store, void *buffer)
{
	int ret;

	if (!kv_of(store))
		return MC_INTERNAL_ERROR;
	ret = xfer_kv_unregister_buffer(kv_of(store), buffer);
	return !ret ? 0 : ret == -ENOENT ? XFER_KV_INVALID_PARAMS :
	       MC_INTERNAL_ERROR;
}
