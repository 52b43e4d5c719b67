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
#include "store/master/stream_internal.h"
#ifdef XFER_HAVE_ETCD
#include "store/master/ha_internal.h"
#endif
#include "util/auth_internal.h"
#include "util/gflags_internal.h"
#include "util/net_internal.h"

struct flags {
	long long port, rpc_port, client_ttl, discard_s, release_s;
	long long metrics_port, meta_port;
	long long max_threads, rpc_thread_num, ha_ttl, max_conns;
	const char *rpc_address, *lease_ttl, *journal, *cluster_id;
	const char *etcd_endpoints, *ha_type, *ha_conn;
	const char *metrics_host, *meta_host;
	char *secret;
	double evict_ratio, high_watermark;
	long long promotion_threshold;
	long long shard_size;
	bool metric_reporting, no_delay, meta, ha, sync_standby;
	bool offload, offload_on_evict, promotion_on_hit, disk_eviction;
};

/* What serve() runs; with --enable_ha the state, admin and listener come
 * once this master leads (lead()). */
struct master {
	const struct stored_cfg *cfg;
	const struct flags *f;
	struct event_base *base;
	struct journal *journal;
	struct xfer_auth *auth;
	struct sockaddr_storage ss;
	socklen_t len;
	uint16_t port;
	struct stored *state;
	struct stored_admin *admin;
	struct stored_srv *srv;
	struct stream *stream;
	struct ha *ha;
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

/* --enable_ha's needs. @return 0, or -1 with a message on stderr. */
static int check_ha(const struct flags *f)
{
	const char *why = NULL;

	if (!f->ha)
		why = f->sync_standby ? "--sync_standby needs --enable_ha" :
		      NULL;
#ifndef XFER_HAVE_ETCD
	else
		why = "--enable_ha: this xfer-stored was built without etcd "
		      "(WITH_ETCD=no)";
#else
	else if (strcmp(f->ha_type, "etcd"))
		why = "--ha_backend_type: only etcd is implemented";
	else if (!*f->ha_conn)
		why = "--enable_ha needs --etcd_endpoints";
	else if (!f->journal)
		why = "--enable_ha needs --journal (a standby keeps the "
		      "leader's journal there)";
	else if (!strcmp(f->rpc_address, "0.0.0.0") ||
		 !strcmp(f->rpc_address, "::"))
		why = "--enable_ha needs --rpc_address: the address clients "
		      "and standbys reach this master at";
	else if (!f->port && !f->rpc_port)
		why = "--enable_ha needs a --port other than 0";
#endif
	if (why)
		fprintf(stderr, "xfer-stored: %s\n", why);
	return why ? -1 : 0;
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

/* Load the state, serve the admin HTTP and the RPC. @return 0, or -1
 * with a message on stderr. */
static int lead(void *arg)
{
	struct master *m = arg;
	const struct flags *f = m->f;
	uint16_t admin_port = 0;
	char err[512];

	if (m->stream)
		stream_unfollow(m->stream);
	m->state = stored_new(m->base, m->cfg, m->journal, err, sizeof(err));
	if (!m->state) {
		fprintf(stderr, "xfer-stored: %s\n", err);
		return -1;
	}
	/* the admin first: once the RPC port answers, it does too */
	m->admin = stored_admin_new(m->base, m->state, f->metrics_host,
				    (uint16_t)f->metrics_port, &admin_port);
	if (!m->admin) {
		fprintf(stderr, "xfer-stored: cannot serve --metrics_port on "
			"%s:%lld: %s\n", f->metrics_host, f->metrics_port,
			strerror(errno));
		return -1;
	}
	m->srv = stored_srv_new(m->base, m->state, m->auth,
				(struct sockaddr *)&m->ss, m->len,
				(unsigned)f->max_conns);
	if (!m->srv) {
		fprintf(stderr, "xfer-stored: cannot listen on %s:%u: %s\n",
			f->rpc_address, m->port, strerror(errno));
		return -1;
	}
	if (m->stream) {
		stream_lead(m->stream, m->state, f->sync_standby);
		stored_srv_set_follow(m->srv, stream_adopt, m->stream);
	}
	printf("xfer-stored: listening on %s:%u\n", f->rpc_address,
	       stored_srv_port(m->srv));
	printf("xfer-stored: metrics and admin on http://%s:%u\n",
	       f->metrics_host, admin_port);
	fflush(stdout);
	return 0;
}

#ifdef XFER_HAVE_ETCD
static void follow(void *arg, const char *addr)
{
	struct master *m = arg;

	printf("xfer-stored: standby of %s\n", addr);
	fflush(stdout);
	if (stream_follow(m->stream, addr))
		ha_leader_lost(m->ha, false);
}

static bool synced(void *arg)
{
	struct master *m = arg;

	return stream_synced(m->stream);
}

static void leader_lost(void *arg, bool dead)
{
	struct master *m = arg;

	ha_leader_lost(m->ha, dead);
}

/* Campaign; lead() once elected. @return 0, or -1 (a message out). */
static int ha_start(struct master *m)
{
	char self[300];
	struct ha_cfg hc = {
		.endpoints = m->f->ha_conn,
		.cluster_id = m->f->cluster_id, .self = self,
		.ttl_s = (int)m->f->ha_ttl, .lead = lead, .follow = follow,
		.synced = synced, .arg = m,
	};

	snprintf(self, sizeof(self), "%s%s%s:%u",
		 strchr(m->f->rpc_address, ':') ? "[" : "", m->f->rpc_address,
		 strchr(m->f->rpc_address, ':') ? "]" : "", m->port);
	m->stream = stream_new(m->base, m->journal, m->auth, leader_lost, m);
	if (!m->stream) {
		fprintf(stderr, "xfer-stored: out of memory\n");
		return -1;
	}
	m->ha = ha_new(m->base, &hc);
	return m->ha ? 0 : -1;
}
#endif

static int serve(const struct stored_cfg *cfg, const struct flags *f)
{
	struct master m = { .cfg = cfg, .f = f };
	struct event *sigint = NULL, *sigterm = NULL;
	struct metad_store *meta_store = NULL;
	struct metad_http *meta_http = NULL;
	char err[512];
	int ret = 1;

	m.port = (uint16_t)(f->rpc_port ? f->rpc_port : f->port);
	if (xfer_net_parse(f->rpc_address, m.port, &m.ss, &m.len)) {
		fprintf(stderr, "xfer-stored: --rpc_address '%s' is not a "
			"numeric address\n", f->rpc_address);
		return 2;
	}
	if (f->secret && !(m.auth = xfer_auth_new(f->secret))) {
		fprintf(stderr, "xfer-stored: out of memory\n");
		return 1;
	}
	if (f->journal && !(m.journal = journal_open(f->journal,
						    f->cluster_id, err,
						    sizeof(err)))) {
		fprintf(stderr, "xfer-stored: %s\n", err);
		goto out;
	}
	m.base = event_base_new();
	if (!m.base) {
		fprintf(stderr, "xfer-stored: out of memory\n");
		goto out;
	}
	/* before listening: whoever sees the port may stop us cleanly */
	sigint = evsignal_new(m.base, SIGINT, on_signal, m.base);
	sigterm = evsignal_new(m.base, SIGTERM, on_signal, m.base);
	if (!sigint || !sigterm || evsignal_add(sigint, NULL) ||
	    evsignal_add(sigterm, NULL)) {
		fprintf(stderr, "xfer-stored: cannot catch signals\n");
		goto out;
	}
	if (f->meta && meta_start(m.base, f, &meta_store, &meta_http))
		goto out;
#ifdef XFER_HAVE_ETCD
	if (f->ha ? ha_start(&m) : lead(&m))
		goto out;
#else
	if (lead(&m))
		goto out;
#endif
	if (event_base_dispatch(m.base) == 0 &&
	    !(m.state && stored_failed(m.state)))
		ret = 0;
out:
	if (sigterm)
		event_free(sigterm);
	if (sigint)
		event_free(sigint);
	/* the master's parts first: what runs while ha_free() gives the
	 * key up must find none of them */
	stored_srv_free(m.srv);
	stream_free(m.stream);
	stored_admin_free(m.admin);
	stored_free(m.state);
#ifdef XFER_HAVE_ETCD
	if (m.ha && ha_failed(m.ha))
		ret = 1;
	ha_free(m.ha);
#endif
	metad_http_free(meta_http);
	metad_store_free(meta_store);
	if (m.base)
		event_base_free(m.base);
	journal_close(m.journal);
	xfer_auth_free(m.auth);
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
		.ha_ttl = 2, .ha_type = "etcd", .max_conns = 4096,
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
		{ "max_rpc_conns", XFER_GF_INT, &f.max_conns, 1, 1048576,
		  "connections served at once; one more closes the oldest "
		  "silent or idle one (xfer's; 4096)" },
		{ "cluster_id", XFER_GF_STRING, &f.cluster_id, 0, 0,
		  "the cluster's name; a journal of another is refused "
		  "(mooncake_cluster)" },
		{ "enable_ha", XFER_GF_BOOL, &f.ha, 0, 0,
		  "elect a leader among masters on etcd; the others follow "
		  "its journal and take over (needs --journal, "
		  "--etcd_endpoints, --rpc_address; false)" },
		{ "ha_backend_type", XFER_GF_STRING, &f.ha_type, 0, 0,
		  "where --enable_ha elects: etcd (etcd)" },
		{ "ha_backend_connstring", XFER_GF_STRING, &f.ha_conn, 0, 0,
		  "its members; unset: --etcd_endpoints (none)" },
		{ "etcd_endpoints", XFER_GF_STRING, &f.etcd_endpoints, 0, 0,
		  "etcd members for --enable_ha: host:port[;host:port]... "
		  "or etcd://host:port[,host:port]... (none)" },
		{ "sync_standby", XFER_GF_BOOL, &f.sync_standby, 0, 0,
		  "with --enable_ha, answer a change only once a standby "
		  "has it in its journal (xfer's; false)" },
		{ "ha_lease_ttl", XFER_GF_INT, &f.ha_ttl, 1, 60,
		  "seconds the leader's etcd lease lives without it: how "
		  "long a dead leader goes unnoticed (xfer's; 2)" },
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
	if (!f.ha_conn || !*f.ha_conn)
		f.ha_conn = f.etcd_endpoints ? f.etcd_endpoints : "";
	if (check_ha(&f))
		return 2;
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
