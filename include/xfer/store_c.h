/*
 * store_c.h — Mooncake Store's C API (its Go and Rust bindings' ABI), on
 * xfer's store client (include/xfer/store.h), in libtransfer_engine.
 *
 * Names, argument types and the struct are those of Mooncake's
 * mooncake-store/include/store_c.h, so a program written against it
 * builds unchanged (the header is found as "store_c.h"); link with
 * -ltransfer_engine where Mooncake's link -lmooncake_store.
 *
 * Conventions, as Mooncake's:
 *  - strings passed in are used during the call only;
 *  - every call blocks its caller until done, from any thread (calls on
 *    one store may run at once from several threads, but not with
 *    mooncake_store_setup() or mooncake_store_destroy());
 *  - results are 0 (or a count, a length, 1/0 for exist) or a negative
 *    Mooncake ErrorCode: -1 INTERNAL_ERROR (also a NULL store or key, and
 *    out of memory, as Mooncake's wrapper answers), -200
 *    NO_AVAILABLE_HANDLE, -600 INVALID_PARAMS, -704 OBJECT_NOT_FOUND,
 *    -706 OBJECT_HAS_LEASE, -707 LEASE_EXPIRED, -800 TRANSFER_FAIL, -900
 *    RPC_FAIL, -1012 NOT_SUPPORTED (xfer/store.h says when each comes).
 */
#ifndef MOONCAKE_STORE_C_H
#define MOONCAKE_STORE_C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef XFER_TE_EXPORT
#if defined(__GNUC__)
#define XFER_TE_EXPORT __attribute__((visibility("default")))
#else
#define XFER_TE_EXPORT
#endif
#endif

/** A store client (xfer's struct xfer_kv once set up). */
typedef void *mooncake_store_t;

/** Mooncake's ReplicateConfig. */
struct mooncake_replicate_config {
	size_t replica_num;             /**< 1..16 */
	int with_soft_pin;
	int with_hard_pin;
	/** segment names to hold replicas; xfer's master takes the first
	 *  as the preferred one */
	const char **preferred_segments;
	size_t preferred_segments_count;
};
typedef struct mooncake_replicate_config mooncake_replicate_config_t;

/** A store not yet set up, or NULL (out of memory). */
XFER_TE_EXPORT
mooncake_store_t mooncake_store_create(void);

/** Free @p store (NULL is fine): as xfer_kv_free(), its engine too. */
XFER_TE_EXPORT
void mooncake_store_destroy(mooncake_store_t store);

/**
 * Set up the client: an engine named @p local_hostname (NULL or "": the
 * host's name) with metadata @p metadata_server ("P2PHANDSHAKE", NULL or
 * "": peer to peer; else as xfer_config_set() "metadata_server"), its
 * transport @p protocol (NULL: "tcp") on devices @p device_name (RDMA,
 * NULL or "": all), a segment of @p global_segment_size bytes and a
 * staging buffer of @p local_buffer_size, with the master at
 * @p master_server_addr (NULL: "127.0.0.1:50051").
 * @return 0; -600 (a bad argument, or set up already); -900 (the master
 *         could not be reached or refused the mount); -1.
 */
XFER_TE_EXPORT
int mooncake_store_setup(mooncake_store_t store, const char *local_hostname,
			 const char *metadata_server,
			 uint64_t global_segment_size,
			 uint64_t local_buffer_size, const char *protocol,
			 const char *device_name,
			 const char *master_server_addr);

/** mooncake_store_setup() with Mooncake's defaults: the host's name, peer
 *  to peer, a staging buffer of 1 GiB, the master at 127.0.0.1:50051,
 *  and a segment of @p mount_segment_size bytes. @return as it. */
XFER_TE_EXPORT
int mooncake_store_init_all(mooncake_store_t store, const char *protocol,
			    const char *device_name,
			    uint64_t mount_segment_size);

/** 0 healthy, 1 not set up, 2 the master unreachable (Mooncake's
 *  HC_* numbers); -1 for NULL. */
XFER_TE_EXPORT
int mooncake_store_health_check(mooncake_store_t store);

/** xfer_kv_put(): @p size bytes of @p value, staged; @p config NULL: one
 *  replica. @return 0 or an ErrorCode. */
XFER_TE_EXPORT
int mooncake_store_put(mooncake_store_t store, const char *key,
		       const void *value, size_t size,
		       const mooncake_replicate_config_t *config);

/** xfer_kv_put_from(): from registered memory (register_buffer). */
XFER_TE_EXPORT
int mooncake_store_put_from(mooncake_store_t store, const char *key,
			    void *buffer, size_t size,
			    const mooncake_replicate_config_t *config);

/** xfer_kv_batch_put() zero-copy of @p count keys, each key's result in
 *  @p results_out. @return 0 once they are there; -1 (NULL arrays). */
XFER_TE_EXPORT
int mooncake_store_batch_put_from(mooncake_store_t store, const char **keys,
				  void **buffers, const size_t *sizes,
				  size_t count,
				  const mooncake_replicate_config_t *config,
				  int *results_out);

/** xfer_kv_get_into(): into registered memory of @p size bytes. @return
 *  the object's length, or an ErrorCode (-600: longer than @p size). */
XFER_TE_EXPORT
int64_t mooncake_store_get_into(mooncake_store_t store, const char *key,
				void *buffer, size_t size);

/** xfer_kv_batch_get() zero-copy, as mooncake_store_batch_put_from(). */
XFER_TE_EXPORT
int mooncake_store_batch_get_into(mooncake_store_t store, const char **keys,
				  void **buffers, const size_t *sizes,
				  size_t count, int64_t *results_out);

/** xfer_kv_exist(): 1, 0 or an ErrorCode. */
XFER_TE_EXPORT
int mooncake_store_is_exist(mooncake_store_t store, const char *key);

/** xfer_kv_batch_exist(), as mooncake_store_batch_put_from(). */
XFER_TE_EXPORT
int mooncake_store_batch_is_exist(mooncake_store_t store, const char **keys,
				  size_t count, int *results_out);

/** xfer_kv_get_size(): the length, or an ErrorCode. */
XFER_TE_EXPORT
int64_t mooncake_store_get_size(mooncake_store_t store, const char *key);

/** The engine's name, `host:port`, into @p buf_out (NUL-ended).
 *  @return 0; -1 (not set up, or @p buf_len too small). */
XFER_TE_EXPORT
int mooncake_store_get_hostname(mooncake_store_t store, char *buf_out,
				size_t buf_len);

/** xfer_kv_remove(). @return 0 or an ErrorCode. */
XFER_TE_EXPORT
int mooncake_store_remove(mooncake_store_t store, const char *key, int force);

/** xfer_kv_remove_by_regex() (POSIX extended patterns): how many, or an
 *  ErrorCode (-600 a pattern that does not compile; -1 for NULL). */
XFER_TE_EXPORT
int64_t mooncake_store_remove_by_regex(mooncake_store_t store,
				       const char *pattern, int force);

/** xfer_kv_remove_all(): how many, or an ErrorCode. */
XFER_TE_EXPORT
int64_t mooncake_store_remove_all(mooncake_store_t store, int force);

/** xfer_kv_register_buffer(). @return 0; -600 (a bad range, or one
 *  that overlaps a registered buffer); -1. */
XFER_TE_EXPORT
int mooncake_store_register_buffer(mooncake_store_t store, void *buffer,
				   size_t size);

/** xfer_kv_unregister_buffer(). @return 0; -600 (not registered); -1. */
XFER_TE_EXPORT
int mooncake_store_unregister_buffer(mooncake_store_t store, void *buffer);

#ifdef __cplusplus
}
#endif

#endif /* MOONCAKE_STORE_C_H */
