/*
 * xfer-bench: the library's engine configuration from the bench settings.
 * engine_config() is the only place that speaks the configuration API;
 * bench_have_rdma() asks the host for RDMA devices.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xfer/event.h>

#include "bench/bench_internal.h"

static void set(struct xfer_config *cfg, const char *key, const char *value)
{
	int ret = xfer_config_set(cfg, key, value);

	if (ret)
		die_api(NULL, "xfer_config_set", ret);
}

/*
 * The configuration an engine of @o gets: the defaults and XFER_*
 * environment of the library, then the settings of @o, then @name, @bind
 * and @rpc_port for this engine (NULL, NULL, -1: keep the config's).
 * Dies on failure.
 */
static struct xfer_config *engine_config(const struct bench_opts *o,
					 const char *name, const char *bind,
					 long rpc_port)
{
	struct xfer_config *cfg = xfer_config_new();
	char num[24];

	if (!cfg)
		die_api(NULL, "xfer_config_new", -errno);
	if (o->metadata_server)
		set(cfg, "metadata_server", o->metadata_server);
	if (name)
		set(cfg, "local_server_name", name);
	if (bind)
		set(cfg, "bind_addr", bind);
	if (rpc_port >= 0) {
		snprintf(num, sizeof(num), "%ld", rpc_port);
		set(cfg, "rpc_port", num);
	}
	if (o->workers >= 0) {
		snprintf(num, sizeof(num), "%lld", (long long)o->workers);
		set(cfg, "workers", num);
	}
	set(cfg, "protocol", o->protocol);
	if (o->device_names)
		set(cfg, "device_names", o->device_names);
	if (o->auto_discovery)
		set(cfg, "device_names", NULL);
	if (o->matrix)
		set(cfg, "nic_priority_matrix", o->matrix);
	return cfg;
}

struct xfer_engine *bench_engine_new(const struct bench_opts *o,
				     const char *name, const char *bind,
				     long rpc_port, struct event_base *base)
{
	struct xfer_config *cfg = engine_config(o, name, bind, rpc_port);
	struct xfer_engine *e;

	if (base) {
		/* no thread: everything on the base, whatever --workers says */
		set(cfg, "workers", "0");
		e = xfer_engine_new_on_base(base, cfg);
	} else {
		e = xfer_engine_new(cfg);
	}
	if (!e && errno == ENODEV && !strcmp(o->protocol, "rdma"))
		die("--protocol=rdma (Mooncake's default): no RDMA device "
		    "could be opened%s%s (looked in /sys/class/infiniband); "
		    "pass --protocol=tcp to run over TCP", o->device_names ?
		    " among --device_name=" : "", o->device_names ?
		    o->device_names : "");
	if (!e)
		die_api(NULL, base ? "xfer_engine_new_on_base" :
			"xfer_engine_new", -errno);
	xfer_config_free(cfg);
	return e;
}

bool bench_have_rdma(void)
{
	if (getenv("MC_FORCE_TCP")) /* as Mooncake's discovery */
		return false;
	return xfer_transport_available("rdma");
}
