/*
 * xfer-stored: the store's master (docs/STORE.md). Mooncake's
 * mooncake_master's flags, names, defaults and gflags syntax, for what it
 * implements; any other flag is refused by name. One thread, one
 * event_base: the listener and connections (conn.c), the state and its
 * timers (segments.c, objects.c). SIGINT or SIGTERM ends it, status 0.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <openssl/crypto.h>

#include "metadata/metad/http_internal.h"
#include "metadata/metad/store_internal.h"
#include "store/master/admin_internal.h"
#include "store/master/conn_internal.h"
#include "store/master/journal_internal.h"
#include "store/master/master_internal.h"
#include "util/auth_internal.h"
#include "util/gflags_internal.h"
#include "util/net_internal.h"

struct flags {
	long long port, rpc_port, client_ttl, discard_s, release_s;
	long long metrics_port, meta_port;
	long long max_threads, rpc_thread_num;
	const char *rpc_address, *lease_ttl, *journal, *cluster_id;
	const char *metrics_host, *meta_host;
	char *secret;
	double evict_ratio, high_watermark;
	long long promotion_threshold;
	long long shard_size;
	bool metric_reporting, no_delay, meta;
	bool offload, offload_on_evict, promotion_on_hit, disk_eviction;
};

/*
 * Mooncake's duration flags: milliseconds, or a number with ms, s, m or h
 * (its ParseDurationMs). @return 0, -EINVAL.
 */
static int parse_duration_ms(const char *s, uint64_t *ms)
{
	static const struct { const char *unit; uint64_t ms; } units[] = {
		{ "", 1 }, { "ms", 1 }, { "s", 1000 }, { "m", 60000 },
		{ "h", 3600000 },
	};
	char *end;
	uint64_t v;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (!strcmp(end, units[i].unit)) {
			if (v > UINT64_MAX / units[i].ms)
				return -EINVAL;
			*ms = v * units[i].ms;
			return *ms ? 0 : -EINVAL;
		}
	return -EINVAL;
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)sig;
	(void)what;
	event_base_loopbreak(arg);
}

/*
 * Serve the engines' HTTP metadata (PROTOCOL.md §2) from xfer-metad's
 * store and server, in memory as Mooncake's master keeps it (engines
 * publish theirs again when it is lost), writes guarded by the cluster
 * secret if there is one. @return 0, or -1 with a message on stderr.
 */
static int meta_start(struct event_base *base, const struct flags *f,
		      struct metad_store **store, struct metad_http **http)
{
	const struct metad_limits limits = {
		.value_bytes = METAD_VALUE_BYTES_DEFAULT,
		.keys = METAD_KEYS_DEFAULT, .bytes = METAD_BYTES_DEFAULT,
	};
	uint16_t port;
	char err[256];

	*store = metad_store_open(NULL, &limits, err, sizeof(err));
	if (!*store) {
		fprintf(stderr, "xfer-stored: %s\n", err);
		return -1;
	}
	*http = metad_http_new(base, *store, "/metadata");
	if (!*http || (f->secret && metad_http_set_secret(*http, f->secret))) {
		fprintf(stderr, "xfer-stored: out of memory\n");
		return -1;
	}
	if (metad_http_bind(*http, f->meta_host, (uint16_t)f->meta_port,
			    &port)) {
		fprintf(stderr, "xfer-stored: cannot serve "
			"--http_metadata_server_port on %s:%lld: %s\n",
			f->meta_host, f->meta_port, strerror(errno));
		return -1;
	}
	printf("xfer-stored: HTTP metadata on http://%s:%u/metadata\n",
	       f->meta_host, port);
	return 0;
}

static int serve(const struct stored_cfg *cfg, const struct flags *f)
{
	uint16_t port = (uint16_t)(f->rpc_port ? f->rpc_port : f->port);
	struct event *sigint = NULL, *sigterm = NULL;
	struct event_base *base = NULL;
	struct journal *journal = NULL;
	struct xfer_auth *auth = NULL;
	struct stored_srv *srv = NULL;
	struct stored *state = NULL;
	struct stored_admin *admin = NULL;
	struct metad_store *meta_store = NULL;
	struct metad_http *meta_http = NULL;
	uint16_t admin_port = 0;
	char err[512];
	struct sockaddr_storage ss;
	socklen_t len;
	int ret = 1;

	if (xfer_net_parse(f->rpc_address, port, &ss, &len)) {
		fprintf(stderr, "xfer-stored: --rpc_address '%s' is not a "
			"numeric address\n", f->rpc_address);
		return 2;
	}
	if (f->secret && !(auth = xfer_auth_new(f->secret))) {
		fprintf(stderr, "xfer-stored: out of memory\n");
		return 1;
	}
	if (f->journal && !(journal = journal_open(f->journal, f->cluster_id,
						  err, sizeof(err)))) {
		fprintf(stderr, "xfer-stored: %s\n", err);
		goto out;
	}
	base = event_base_new();
	state = base ? stored_new(base, cfg, journal, err, sizeof(err)) : NULL;
	if (!state) {
		fprintf(stderr, "xfer-stored: %s\n", base ? err :
			"out of memory");
		goto out;
	}
	/* before listening: whoever sees the port may stop us cleanly */
	sigint = evsignal_new(base, SIGINT, on_signal, base);
	sigterm = evsignal_new(base, SIGTERM, on_signal, base);
	if (!sigint || !sigterm || evsignal_add(sigint, NULL) ||
	    evsignal_add(sigterm, NULL)) {
		fprintf(stderr, "xfer-stored: cannot catch signals\n");
		goto out;
	}
	if (f->meta && meta_start(base, f, &meta_store, &meta_http))
		goto out;
	/* the admin first: once the RPC port answers, it does too */
	admin = stored_admin_new(base, state, f->metrics_host,
				 (uint16_t)f->metrics_port, &admin_port);
	if (!admin) {
		fprintf(stderr, "xfer-stored: cannot serve --metrics_port on "
			"%s:%lld: %s\n", f->metrics_host, f->metrics_port,
			strerror(errno));
		goto out;
	}
	srv = stored_srv_new(base, state, auth, (struct sockaddr *)&ss, len);
	if (!srv) {
		fprintf(stderr, "xfer-stored: cannot listen on %s:%u: %s\n",
			f->rpc_address, port, strerror(errno));
		goto out;
	}
	printf("xfer-stored: listening on %s:%u\n", f->rpc_address,
	       stored_srv_port(srv));
	printf("xfer-stored: metrics and admin on http://%s:%u\n",
	       f->metrics_host, admin_port);
	fflush(stdout);
	if (event_base_dispatch(base) == 0 && !stored_failed(state))
		ret = 0;
out:
	if (sigterm)
		event_free(sigterm);
	if (sigint)
		event_free(sigint);
	stored_admin_free(admin);
	metad_http_free(meta_http);
	metad_store_free(meta_store);
	stored_srv_free(srv);
	stored_free(state);
	if (base)
		event_base_free(base);
	journal_close(journal);
	xfer_auth_free(auth);
	return ret;
}

int main(int argc, char **argv)
{
	struct flags f = {
		.port = 50051, .rpc_address = "0.0.0.0", .lease_ttl = "10000",
		.cluster_id = "mooncake_cluster", .metrics_port = 9003,
		.metrics_host = "0.0.0.0", .meta_port = 8080,
		.meta_host = "0.0.0.0",
		.client_ttl = 10, .discard_s = 30, .release_s = 600,
		.evict_ratio = 0.05, .high_watermark = 0.90,
		.max_threads = 16, .metric_reporting = true, .no_delay = true,
		.promotion_threshold = 2, .disk_eviction = true,
	};
	const char *secret = NULL, *env = getenv("XFER_AUTH_SECRET");
	const struct xfer_gflag flags[] = {
		{ "port", XFER_GF_INT, &f.port, 0, 65535,
		  "port to listen on, 0 for any (50051)" },
		{ "rpc_port", XFER_GF_INT, &f.rpc_port, 0, 65535,
		  "port to listen on; 0: --port (0)" },
		{ "rpc_address", XFER_GF_STRING, &f.rpc_address, 0, 0,
		  "numeric address to listen on (0.0.0.0)" },
		{ "default_kv_lease_ttl", XFER_GF_STRING, &f.lease_ttl, 0, 0,
		  "lease a query grants: ms, or with ms, s, m, h (10000)" },
		{ "eviction_ratio", XFER_GF_DOUBLE, &f.evict_ratio, 0, 1,
		  "share of capacity one eviction frees (0.05)" },
		{ "eviction_high_watermark_ratio", XFER_GF_DOUBLE,
		  &f.high_watermark, 0, 1,
		  "share of capacity in use that starts eviction (0.90)" },
		{ "client_ttl", XFER_GF_INT, &f.client_ttl, 1, 86400,
		  "seconds without a ping before a client's segments are "
		  "unmounted (10)" },
		{ "put_start_discard_timeout_sec", XFER_GF_INT, &f.discard_s,
		  1, 86400, "seconds before a put never ended is discarded "
		  "(30)" },
		{ "put_start_release_timeout_sec", XFER_GF_INT, &f.release_s,
		  1, 86400, "seconds before its space is reused (600)" },
		{ "enable_offload", XFER_GF_BOOL, &f.offload, 0, 0,
		  "copy objects from DRAM to SSD segments: at put end, or "
		  "with --offload_on_evict when evicted (false)" },
		{ "offload_on_evict", XFER_GF_BOOL, &f.offload_on_evict, 0, 0,
		  "offload when eviction picks an object, not at put (false)" },
		{ "promotion_on_hit", XFER_GF_BOOL, &f.promotion_on_hit, 0, 0,
		  "copy an object only on SSD back to DRAM when read (false)" },
		{ "promotion_admission_threshold", XFER_GF_INT,
		  &f.promotion_threshold, 0, 255,
		  "reads of it before it is promoted (2)" },
		{ "enable_disk_eviction", XFER_GF_BOOL, &f.disk_eviction, 0, 0,
		  "evict objects only on SSD to make room there (true)" },
		{ "dram_shard_size", XFER_GF_INT, &f.shard_size, 0,
		  1ll << 50, "stripe objects longer than this many bytes "
		  "over distinct DRAM segments, a shard each (xfer's; 0: "
		  "off, else at least 65536; default 0)" },
		{ "metrics_port", XFER_GF_INT, &f.metrics_port, 0, 65535,
		  "port of the metrics and admin HTTP, 0 for any (9003)" },
		{ "metrics_host", XFER_GF_STRING, &f.metrics_host, 0, 0,
		  "address of the metrics and admin HTTP (0.0.0.0)" },
		{ "enable_http_metadata_server", XFER_GF_BOOL, &f.meta, 0, 0,
		  "serve the engines' HTTP metadata too (false)" },
		{ "http_metadata_server_port", XFER_GF_INT, &f.meta_port, 0,
		  65535, "its port, 0 for any (8080)" },
		{ "http_metadata_server_host", XFER_GF_STRING, &f.meta_host, 0,
		  0, "its address (0.0.0.0)" },
		{ "journal", XFER_GF_STRING, &f.journal, 0, 0,
		  "keep objects in this SQLite file, each change on disk "
		  "before it is answered, and load them at start (xfer's; "
		  "default: none)" },
		{ "cluster_id", XFER_GF_STRING, &f.cluster_id, 0, 0,
		  "the cluster's name; a journal of another is refused "
		  "(mooncake_cluster)" },
		{ "auth_secret", XFER_GF_STRING, &secret, 0, 0,
		  "cluster secret clients must prove (xfer's; default "
		  "$XFER_AUTH_SECRET)" },
		/* tuning only: one thread serves, TCP_NODELAY is always on,
		 * nothing is reported periodically */
		{ "max_threads", XFER_GF_INT, &f.max_threads, 1, 1024,
		  "tuning only, no effect (16)" },
		{ "rpc_thread_num", XFER_GF_INT, &f.rpc_thread_num, 0, 1024,
		  "tuning only, no effect (0)" },
		{ "rpc_enable_tcp_no_delay", XFER_GF_BOOL, &f.no_delay, 0, 0,
		  "tuning only, no effect (true)" },
		{ "enable_metric_reporting", XFER_GF_BOOL, &f.metric_reporting,
		  0, 0, "tuning only, no effect (true)" },
		{ NULL, 0, NULL, 0, 0, NULL },
	};
	struct stored_cfg cfg;
	char err[256];
	int i, ret;

	if (argc == 2 && (!strcmp(argv[1], "--help") ||
			  !strcmp(argv[1], "-h"))) {
		xfer_gflags_usage(stdout, "usage: xfer-stored [--flag=value "
				  "...]\n", flags);
		return 0;
	}
	i = xfer_gflags_parse(argc, argv, flags, err, sizeof(err));
	if (i >= 0 && i < argc) {
		snprintf(err, sizeof(err), "unexpected argument '%s'", argv[i]);
		i = -EINVAL;
	}
	if (i < 0) {
		fprintf(stderr, "xfer-stored: %s\n", err);
		return 2;
	}
	cfg = (struct stored_cfg){
		.high_watermark = f.high_watermark,
		.evict_ratio = f.evict_ratio,
		.client_ttl_ms = (uint64_t)f.client_ttl * 1000,
		.discard_ms = (uint64_t)f.discard_s * 1000,
		.release_ms = (uint64_t)f.release_s * 1000,
		.offload = f.offload,
		.offload_on_evict = f.offload && f.offload_on_evict,
		.promotion_on_hit = f.promotion_on_hit,
		.promotion_threshold = f.promotion_threshold ?
				       (unsigned)f.promotion_threshold : 1,
		.disk_eviction = f.disk_eviction,
		.shard_size = (uint64_t)f.shard_size,
	};
	if (f.shard_size && f.shard_size < 65536) {
		fprintf(stderr, "xfer-stored: --dram_shard_size: 0 (off) or at "
			"least 65536 bytes\n");
		return 2;
	}
	if (parse_duration_ms(f.lease_ttl, &cfg.lease_ms)) {
		fprintf(stderr, "xfer-stored: --default_kv_lease_ttl: '%s' is "
			"not a duration (ms, or a number with ms, s, m, h)\n",
			f.lease_ttl);
		return 2;
	}
	if (f.release_s < f.discard_s) {
		fprintf(stderr, "xfer-stored: --put_start_release_timeout_sec "
			"must be at least --put_start_discard_timeout_sec\n");
		return 2;
	}
	if (!secret && env && *env)
		secret = env;
	if (secret && !*secret) {
		fprintf(stderr, "xfer-stored: empty --auth_secret\n");
		return 2;
	}
	if (secret && !(f.secret = strdup(secret))) {
		fprintf(stderr, "xfer-stored: out of memory\n");
		return 1;
	}
	/* out of /proc/PID/cmdline (ps) from now on */
	if (secret && secret != env)
		memset((char *)secret, 'x', strlen(secret));
	/* a client gone before its reply is written must not end us */
	signal(SIGPIPE, SIG_IGN);
	ret = serve(&cfg, &f);
	if (f.secret) {
		OPENSSL_cleanse(f.secret, strlen(f.secret));
		free(f.secret);
	}
	return ret;
}
