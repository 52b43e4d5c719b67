/* Engine configuration: defaults, then XFER_* variables (MC_* aliases). */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

/* The value of @p name, else of its Mooncake @p alias (may be NULL). */
static const char *env2(const char *name, const char *alias)
{
	const char *v = getenv(name);

	if (!v && alias)
		v = getenv(alias);
	return v && *v ? v : NULL;
}

/* Parse an unsigned number in [lo, hi] times @p scale; -EINVAL if not. */
static int env_num(const char *name, const char *alias, unsigned long long lo,
		   unsigned long long hi, unsigned long long scale,
		   unsigned long long *out)
{
	const char *v = env2(name, alias);
	unsigned long long n;
	char *end;

	if (!v)
		return 0;
	errno = 0;
	n = strtoull(v, &end, 10);
	if (errno || *end || v[0] == '-' || n < lo || n > hi) {
		xfer_log(XFER_LOG_ERROR, "%s=%s: expected %llu..%llu", name, v,
			 lo, hi);
		return -EINVAL;
	}
	*out = n * scale;
	return 0;
}

/* Parse @p name (alias @p alias) into the int *out within [lo, hi]. */
static int env_int(const char *name, const char *alias, unsigned long long lo,
		   unsigned long long hi, int *out)
{
	unsigned long long n = (unsigned long long)*out;
	int ret = env_num(name, alias, lo, hi, 1, &n);

	*out = (int)n;
	return ret;
}

/* The RDMA knobs, named as Mooncake's where it has one. */
static int rdma_env(struct xfer_config *cfg)
{
	int ret = 0, pin = cfg->pin_workers;
	unsigned long long n;
	const char *v;

	if ((v = env2("XFER_PROTOCOL", "MC_PROTOCOL")))
		cfg->protocol = v;
	if ((v = env2("XFER_DEVICE_NAME", "MC_DEVICE_NAME")))
		cfg->device_names = v;
	if ((v = env2("XFER_NIC_PRIORITY_MATRIX", "MC_NIC_PRIORITY_MATRIX")))
		cfg->nic_priority_matrix = v;
	ret |= env_int("XFER_NUM_QP_PER_EP", "MC_NUM_QP_PER_EP", 1, 64,
		       &cfg->qps_per_ep);
	ret |= env_int("XFER_MAX_EP_PER_CTX", "MC_MAX_EP_PER_CTX", 1, 65536,
		       &cfg->max_ep_per_ctx);
	ret |= env_int("XFER_RETRY_CNT", "MC_RETRY_CNT", 0, 64, &cfg->retry_cnt);
	ret |= env_int("XFER_GID_INDEX", "MC_GID_INDEX", 0, 65535,
		       &cfg->gid_index);
	ret |= env_int("XFER_MTU", "MC_MTU", 256, 4096, &cfg->mtu);
	ret |= env_int("XFER_MAX_WR", "MC_MAX_WR", 1, 16384, &cfg->max_wr);
	ret |= env_int("XFER_MAX_CQE", "MC_MAX_CQE_PER_CTX", 16, 1u << 20,
		       &cfg->max_cqe);
	ret |= env_int("XFER_IB_PORT", "MC_IB_PORT", 1, 255, &cfg->ib_port);
	ret |= env_int("XFER_PIN_WORKERS", NULL, 0, 1, &pin);
	cfg->pin_workers = pin;
	n = cfg->path_pause_ms;
	ret |= env_num("XFER_PATH_PAUSE_MS", NULL, 0, UINT_MAX, 1, &n);
	cfg->path_pause_ms = (uint32_t)n;
	return ret;
}

int xfer_config_init(struct xfer_config *cfg)
{
	unsigned long long n;
	int ret = 0;
	const char *v;

	memset(cfg, 0, sizeof(*cfg));
	cfg->metadata_server = "p2p";
	cfg->bind_addr = "0.0.0.0";
	cfg->workers = 1;
	cfg->slice_size = 65536;
	cfg->tcp_conns = 2;
	cfg->transfer_timeout_ms = 30000;
	cfg->handshake_max_len = 1u << 20;
	cfg->protocol = "tcp";
	cfg->qps_per_ep = 2;
	cfg->max_ep_per_ctx = 256;
	cfg->retry_cnt = 9;
	cfg->gid_index = -1;
	cfg->max_wr = 256;
	cfg->max_cqe = 4096;
	cfg->ib_port = 1;
	cfg->pin_workers = true;
	cfg->path_pause_ms = 1000;

	if ((v = env2("XFER_LOCAL_SERVER_NAME", "MC_LOCAL_SERVER_NAME")))
		cfg->local_server_name = v;
	if ((v = env2("XFER_METADATA_SERVER", "MC_METADATA_SERVER")))
		cfg->metadata_server = v;
	if ((v = env2("XFER_CLUSTER_ID", "MC_CLUSTER_ID")))
		cfg->cluster_id = v;
	if ((v = env2("XFER_METADATA_USER", "MC_REDIS_USERNAME")))
		cfg->metadata_user = v;
	if ((v = env2("XFER_METADATA_PASSWORD", "MC_REDIS_PASSWORD")))
		cfg->metadata_password = v;
	if ((v = env2("XFER_BIND_ADDRESS", "MC_TCP_BIND_ADDRESS")))
		cfg->bind_addr = v;
	n = cfg->rpc_port;
	ret |= env_num("XFER_HANDSHAKE_PORT", "MC_HANDSHAKE_PORT", 0, 65535, 1, &n);
	cfg->rpc_port = (uint16_t)n;
	n = (unsigned)cfg->workers;
	ret |= env_num("XFER_WORKERS", "MC_WORKERS_PER_CTX", 0, XFER_MAX_WORKERS,
		       1, &n);
	cfg->workers = (int)n;
	n = cfg->slice_size;
	ret |= env_num("XFER_SLICE_SIZE", "MC_SLICE_SIZE", 4096, 64u << 20, 1, &n);
	cfg->slice_size = n;
	n = (unsigned)cfg->tcp_conns;
	ret |= env_num("XFER_TCP_CONNS", "MC_TCP_CONNS", 1, 64, 1, &n);
	cfg->tcp_conns = (int)n;
	n = cfg->transfer_timeout_ms;
	if (env2("XFER_TRANSFER_TIMEOUT_MS", NULL))
		ret |= env_num("XFER_TRANSFER_TIMEOUT_MS", NULL, 0, UINT_MAX, 1, &n);
	else
		ret |= env_num("MC_TRANSFER_TIMEOUT", NULL, 0, UINT_MAX / 1000,
			       1000, &n);
	cfg->transfer_timeout_ms = (uint32_t)n;
	n = cfg->handshake_max_len;
	ret |= env_num("XFER_HANDSHAKE_MAX_LENGTH", "MC_HANDSHAKE_MAX_LENGTH", 64,
		       128u << 20, 1, &n);
	cfg->handshake_max_len = (uint32_t)n;
	ret |= rdma_env(cfg);
	return ret ? -EINVAL : 0;
}
