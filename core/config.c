/*
 * Configuration: every knob of the core and of the transports in the
 * table, from defaults, then XFER_* variables (MC_* aliases), then
 * xfer_config_set().
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xfer/xfer.h>

#include "core/config_internal.h"
#include "util/log_internal.h"
#include "core/store.h"
#include "core/transport.h"

#define XFER_MAX_WORKERS 64

static const struct xfer_knob core_knobs[] = {
	XFER_KNOB_S("local_server_name", "XFER_LOCAL_SERVER_NAME",
		    "MC_LOCAL_SERVER_NAME", NULL, "string",
		    "this engine's segment name, host or host:port; unset: "
		    "bind_addr, else the host name"),
	XFER_KNOB_S("bind_addr", "XFER_BIND_ADDRESS", "MC_TCP_BIND_ADDRESS",
		    "0.0.0.0", "string",
		    "numeric address the handshake and TCP data listeners "
		    "bind, and peers reach"),
	XFER_KNOB_N("rpc_port", "XFER_HANDSHAKE_PORT", "MC_HANDSHAKE_PORT",
		    0, 65535, "0", "port", "the handshake (rpc) port; 0: a "
		    "free one"),
	/* not MC_WORKERS_PER_CTX: Mooncake's counts threads per RDMA
	 * device, xfer's RDMA runs one per device whatever this says */
	XFER_KNOB_N("workers", "XFER_WORKERS", NULL, 0, XFER_MAX_WORKERS,
		    "1", "count", "worker reactors (threads) that own data "
		    "connections; 0: all on the control reactor"),
	XFER_KNOB_N("slice_size", "XFER_SLICE_SIZE", "MC_SLICE_SIZE", 4096,
		    64 << 20, "65536", "bytes",
		    "what a request is cut into, each slice moved at once"),
	{ .key = { .name = "transfer_timeout_ms",
		   .env = "XFER_TRANSFER_TIMEOUT_MS",
		   .alias = "MC_TRANSFER_TIMEOUT", .unit = "ms",
		   .alias_unit = "s", .def = "30000", .min = 0,
		   .max = UINT32_MAX,
		   .doc = "a task with no progress for this long ends "
			  "TIMEOUT; 0: never" },
	  .type = XFER_KNOB_NUM, .alias_scale = 1000 },
	XFER_KNOB_N("handshake_max_len", "XFER_HANDSHAKE_MAX_LENGTH",
		    "MC_HANDSHAKE_MAX_LENGTH", 64, 128 << 20, "1048576",
		    "bytes", "the largest handshake frame accepted"),
	XFER_KNOB_N("conn_idle_timeout_ms", "XFER_CONN_IDLE_TIMEOUT_MS", NULL,
		    0, UINT32_MAX, "300000", "ms", "a data connection from a "
		    "peer idle this long between requests is closed; 0: never"),
	XFER_KNOB_N("max_data_conns", "XFER_MAX_DATA_CONNS", NULL, 1,
		    1 << 20, "4096", "count", "data connections peers may "
		    "hold open at once; more are closed"),
	XFER_KNOB_N("max_handshake_conns", "XFER_MAX_HANDSHAKE_CONNS", NULL,
		    1, 1 << 20, "256", "count", "handshake connections open "
		    "at once; more are closed"),
	XFER_KNOB_N("max_new_data_conns", "XFER_MAX_NEW_DATA_CONNS", NULL, 1,
		    1 << 20, "256", "count", "data connections per port not "
		    "yet proved; the oldest is closed for a new one"),
	XFER_KNOB_N("max_data_conns_per_addr", "XFER_MAX_DATA_CONNS_PER_ADDR",
		    NULL, 1, 1 << 20, "1024", "count", "data connections per "
		    "port from one address (IPv6: a /64); its oldest idle goes"),
	XFER_KNOB_N("max_handshake_conns_per_addr",
		    "XFER_MAX_HANDSHAKE_CONNS_PER_ADDR", NULL, 1, 1 << 20, "128",
		    "count", "handshake connections from one address (IPv6: a "
		    "/64); its oldest waiting goes"),
	XFER_KNOB_N("auth_timeout_ms", "XFER_AUTH_TIMEOUT_MS", NULL, 1, 60000,
		    "2000", "ms", "a new connection must prove itself (no "
		    "secret: send a request) within this"),
	XFER_KNOB_N("handshake_buffer_max", "XFER_HANDSHAKE_BUFFER_MAX", NULL,
		    1 << 20, 1LL << 40, "67108864", "bytes", "handshake "
		    "frames being read, all connections together"),
	XFER_KNOB_S("auth_secret", "XFER_AUTH_SECRET", NULL, NULL, "string",
		    "the cluster secret every connection must prove; unset: "
		    "none, Mooncake's protocol"),
	XFER_KNOB_END,
};

/* Every knob: the core's, the metadata's, the transport table's, then
 * each transport's. */
static const struct xfer_knob **all;
static size_t nall;
static pthread_once_t all_once = PTHREAD_ONCE_INIT;

static void add_knobs(const struct xfer_knob *k)
{
	for (; k && k->key.name; k++)
		all[nall++] = k;
}

size_t xfer_knobs_count(const struct xfer_knob *k)
{
	size_t n = 0;

	while (k && k[n].key.name)
		n++;
	return n;
}

static void all_build(void)
{
	const struct xfer_transport_ops *const *tp = xfer_transports();
	size_t n = xfer_knobs_count(core_knobs) +
		   xfer_knobs_count(xfer_store_knobs) +
		   xfer_knobs_count(xfer_transport_knobs);

	for (size_t i = 0; tp[i]; i++)
		n += xfer_knobs_count(tp[i]->knobs);
	all = calloc(n, sizeof(*all));
	if (!all)
		return; /* every config then fails with ENOMEM */
	add_knobs(core_knobs);
	add_knobs(xfer_store_knobs);
	add_knobs(xfer_transport_knobs);
	for (size_t i = 0; tp[i]; i++)
		add_knobs(tp[i]->knobs);
}

struct xfer_config {
	size_t n;
	struct {
		const struct xfer_knob *k;
		char *text;
		union xfer_knob_val v;
	} v[];
};

/* The index of the knob that @p key names (its name, or either variable);
 * *scale gets the factor its value is in. -1 if none. */
static long find(const char *key, unsigned *scale)
{
	for (size_t i = 0; key && i < nall; i++) {
		const struct xfer_knob *k = all[i];

		*scale = 1;
		if (!strcmp(key, k->key.name) || !strcmp(key, k->key.env))
			return (long)i;
		if (k->key.alias && !strcmp(key, k->key.alias)) {
			*scale = k->alias_scale ? k->alias_scale : 1;
			return (long)i;
		}
	}
	return -1;
}

/* A number of @p k in the units of @p scale. @return 0, -EINVAL. */
static int parse_num(const struct xfer_knob *k, const char *text,
		     unsigned scale, long long *out)
{
	long long n;
	char *end;

	if (k->type == XFER_KNOB_BOOL &&
	    (!strcmp(text, "true") || !strcmp(text, "false"))) {
		*out = text[0] == 't';
		return 0;
	}
	errno = 0;
	n = strtoll(text, &end, 10);
	if (errno || end == text || *end || n < k->key.min / scale ||
	    n > k->key.max / scale)
		return -EINVAL;
	n *= scale;
	if (k->check && !k->check(n))
		return -EINVAL;
	*out = n;
	return 0;
}

/* Set value @p i of @p cfg from @p text (NULL: unset). */
static int set_val(struct xfer_config *cfg, size_t i, const char *text,
		   unsigned scale)
{
	const struct xfer_knob *k = cfg->v[i].k;
	char num[24], *copy = NULL;
	long long n = 0;

	if (text && k->type != XFER_KNOB_STR) {
		if (parse_num(k, text, scale, &n))
			return -EINVAL;
		if (k->type == XFER_KNOB_BOOL)
			snprintf(num, sizeof(num), "%s", n ? "true" : "false");
		else
			snprintf(num, sizeof(num), "%lld", n);
		text = num;
	}
	if (text && !(copy = strdup(text)))
		return -ENOMEM;
	free(cfg->v[i].text);
	cfg->v[i].text = copy;
	if (k->type == XFER_KNOB_STR)
		cfg->v[i].v.str = copy;
	else
		cfg->v[i].v.num = n;
	return 0;
}

static struct xfer_config *config_alloc(void)
{
	struct xfer_config *cfg;

	pthread_once(&all_once, all_build);
	cfg = all ? calloc(1, sizeof(*cfg) + nall * sizeof(cfg->v[0])) : NULL;
	if (!cfg) {
		errno = ENOMEM;
		return NULL;
	}
	cfg->n = nall;
	for (size_t i = 0; i < nall; i++)
		cfg->v[i].k = all[i];
	return cfg;
}

/* The variable that sets knob @p k, with its scale; NULL if unset. */
static const char *env_of(const struct xfer_knob *k, const char **name,
			  unsigned *scale)
{
	const char *v = getenv(k->key.env);

	*name = k->key.env;
	*scale = 1;
	if ((!v || !*v) && k->key.alias) {
		v = getenv(k->key.alias);
		*name = k->key.alias;
		*scale = k->alias_scale ? k->alias_scale : 1;
	}
	return v && *v ? v : NULL;
}

struct xfer_config *xfer_config_new(void)
{
	struct xfer_config *cfg = config_alloc();
	int ret = 0;

	for (size_t i = 0; cfg && i < cfg->n && !ret; i++) {
		const struct xfer_knob *k = cfg->v[i].k;
		const char *name, *v;
		unsigned scale;

		ret = set_val(cfg, i, k->key.def, 1);
		v = env_of(k, &name, &scale);
		if (!ret && v && (ret = set_val(cfg, i, v, scale)) == -EINVAL)
			xfer_log(XFER_LOG_ERROR, "%s=%s: expected %lld..%lld", name,
				 v, k->key.min / scale, k->key.max / scale);
	}
	if (cfg && ret) {
		xfer_config_free(cfg);
		errno = -ret;
		return NULL;
	}
	return cfg;
}

void xfer_config_free(struct xfer_config *cfg)
{
	if (!cfg)
		return;
	for (size_t i = 0; i < cfg->n; i++)
		free(cfg->v[i].text);
	free(cfg);
}

int xfer_config_set(struct xfer_config *cfg, const char *key,
		    const char *value)
{
	unsigned scale;
	long i = find(key, &scale);

	if (i < 0)
		return -ENOENT;
	return set_val(cfg, (size_t)i, value ? value : cfg->v[i].k->key.def,
		       value ? scale : 1);
}

const char *xfer_config_get(const struct xfer_config *cfg, const char *key)
{
	unsigned scale;
	long i = find(key, &scale);

	return i < 0 ? NULL : cfg->v[i].text;
}

struct xfer_config *xfer_config_dup(const struct xfer_config *cfg)
{
	struct xfer_config *copy = config_alloc();

	for (size_t i = 0; copy && i < copy->n; i++)
		if (set_val(copy, i, cfg->v[i].text, 1)) {
			xfer_config_free(copy);
			errno = ENOMEM;
			return NULL;
		}
	return copy;
}

union xfer_knob_val xfer_config_val(const struct xfer_config *cfg,
				    const char *name)
{
	unsigned scale;

	return cfg->v[find(name, &scale)].v;
}

void xfer_config_vals(const struct xfer_config *cfg,
		      const struct xfer_knob *knobs, union xfer_knob_val *out)
{
	for (size_t j = 0; knobs && knobs[j].key.name; j++)
		for (size_t i = 0; i < cfg->n; i++)
			if (cfg->v[i].k == &knobs[j])
				out[j] = cfg->v[i].v;
}

int xfer_config_next(size_t *iter, const struct xfer_config_key **out)
{
	if (!iter || !out)
		return -EINVAL;
	pthread_once(&all_once, all_build);
	if (!all)
		return -ENOMEM;
	if (*iter >= nall)
		return -ENOENT;
	*out = &all[(*iter)++]->key;
	return 0;
}
