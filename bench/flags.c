/*
 * xfer-bench: the command line into struct bench_opts. Every flag of
 * Mooncake's transfer_engine_bench, with its defaults and gflags syntax
 * (util/gflags.c), then xfer's own; what the flags imply (the protocol with
 * --auto_discovery, the buffer size, the store of --metadata_type).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench_internal.h"

const char *const bench_mode_names[] = {
	[BENCH_LOOPBACK] = "loopback",
	[BENCH_TARGET] = "target",
	[BENCH_INITIATOR] = "initiator",
};

const char *const bench_op_names[] = {
	[XFER_READ] = "read",
	[XFER_WRITE] = "write",
};

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Mooncake's report units (bytes per unit), its --report_unit values. */
static const struct {
	const char *name;
	double bytes;
} units[] = {
	{ "GB", 1e9 }, { "GiB", 1073741824.0 }, { "Gb", 1e9 / 8 },
	{ "MB", 1e6 }, { "MiB", 1048576.0 }, { "Mb", 1e6 / 8 },
	{ "KB", 1e3 }, { "KiB", 1024.0 }, { "Kb", 1e3 / 8 },
};

/* The flags as given: where the table writes, with the defaults. */
struct raw {
	const char *mode, *operation, *protocol, *device_name, *matrix;
	const char *metadata_server, *metadata_type, *metadata_servers;
	const char *local_server_name, *segment_id, *report_unit, *backend;
	const char *bind_addr, *file;
	long long buffer_size, batch_size, block_size, threads;
	long long report_precision, gpu_id, workers, rpc_port, footprint;
	double duration;
	bool auto_discovery, use_vram, init_mem, verify, json, plugin, help;
	bool list_config, markdown, hugepages;
};

#define S(n, f, h) { n, XFER_GF_STRING, &r->f, 0, 0, h }
#define B(n, f, h) { n, XFER_GF_BOOL, &r->f, 0, 0, h }
#define I(n, f, lo, hi, h) { n, XFER_GF_INT, &r->f, lo, hi, h }

static void read_args(int argc, char **argv, struct raw *r)
{
	const struct xfer_gflag flags[] = {
		/* transfer_engine_bench's, with Mooncake's defaults */
		S("mode", mode, "initiator|target, or xfer's loopback "
		  "(initiator)"),
		S("operation", operation, "read|write (read)"),
		S("protocol", protocol, "rdma|tcp (rdma)"),
		S("device_name", device_name, "RDMA devices, a comma list "
		  "(every device)"),
		S("nic_priority_matrix", matrix, "a file holding the NIC "
		  "priority matrix, or the JSON itself (from sysfs)"),
		S("metadata_server", metadata_server, "p2p|P2PHANDSHAKE, "
		  "etcd://h:p or h:p, redis://h:p, http://h:p/path (p2p)"),
		S("metadata_type", metadata_type, "p2p|etcd|redis|http, with "
		  "--metadata_servers (Mooncake's TENT bench)"),
		S("metadata_servers", metadata_servers, "the servers of "
		  "--metadata_type"),
		S("local_server_name", local_server_name, "this engine's name "
		  "(the host name; loopback: 127.0.0.1)"),
		S("segment_id", segment_id, "the target's segment name "
		  "(initiator mode)"),
		I("buffer_size", buffer_size, 1, 1ll << 48, "registered bytes "
		  "(1 GiB; loopback: twice what the threads use)"),
		I("batch_size", batch_size, 1, 1 << 24, "requests per batch "
		  "(128)"),
		I("block_size", block_size, 1, 1ll << 40, "bytes per request "
		  "(65536)"),
		{ "duration", XFER_GF_DOUBLE, &r->duration, 0, 1000000000,
		  "seconds to run (10; target: until a signal)" },
		I("threads", threads, 1, 1024, "submitting threads (12)"),
		B("auto_discovery", auto_discovery, "RDMA on every device if "
		  "the host has some, else TCP (false)"),
		S("report_unit", report_unit, "GB|GiB|Gb|MB|MiB|Mb|KB|KiB|Kb "
		  "(GB)"),
		I("report_precision", report_precision, 0, UINT32_MAX,
		  "digits after the point (2)"),
		S("backend", backend, "classic (classic)"),
		B("use_vram", use_vram, "GPU memory: not in xfer (false)"),
		B("init_mem", init_mem, "initialise the buffers (true; "
		  "always)"),
		I("gpu_id", gpu_id, -1, INT32_MAX, "GPU of --use_vram (0)"),
		/* xfer's own */
		S("bind_addr", bind_addr, "address to listen on (0.0.0.0)"),
		I("rpc_port", rpc_port, 0, 65535, "handshake port (free)"),
		I("workers", workers, 0, 64, "engine worker reactors "
		  "(the config's)"),
		B("verify", verify, "fill with a pattern, check every byte"),
		I("footprint", footprint, 0, 1ll << 48, "bytes of memory a "
		  "thread's batch goes over, on each side: its requests wrap "
		  "round within them, so they overlap (at least one block; 0: "
		  "batch_size * block_size, every request its own)"),
		B("hugepages", hugepages, "buffers on transparent huge pages: "
		  "2 MiB-aligned, madvise(MADV_HUGEPAGE) (false)"),
		B("json", json, "one JSON line instead of text"),
		B("plugin", plugin, "the initiator on an event_base of the "
		  "bench, no thread; loop stalls"),
		S("file", file, "the target segment is the file segment "
		  "nvmeof/<target>: target and loopback register this path, "
		  "--buffer_size bytes (extended if shorter); initiator: the "
		  "target's path, not opened here (RAM)"),
		B("list_config", list_config, "print the configuration keys "
		  "(unit, default, range, variables, doc) and exit"),
		B("markdown", markdown, "--list_config as docs/CONFIG.md has "
		  "them"),
		B("help", help, "this text"),
		{ NULL },
	};
	char err[256];
	int i = xfer_gflags_parse(argc, argv, flags, err, sizeof(err));

	if (i < 0)
		die("%s (see --help)", err);
	if (i < argc)
		die("unexpected argument '%s' (see --help)", argv[i]);
	if (r->help) {
		xfer_gflags_usage(stdout, "usage: xfer-bench [--flag=value | "
			     "--flag value | --flag | --noflag]...\n", flags);
		exit(0);
	}
	if (r->list_config) {
		bench_list_config(stdout, r->markdown);
		exit(0);
	}
}

/* The index of @p arg in @p names, or -1. */
static int find_name(const char *arg, const char *const *names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(arg, names[i]))
			return (int)i;
	return -1;
}

/* The matrix as given (JSON), or the contents of the file it names. */
static char *read_matrix(const char *arg)
{
	size_t len = 0, cap = 4096;
	char *json;
	ssize_t n;
	int fd;

	if (arg[0] == '{') {
		json = strdup(arg);
		if (!json)
			die("out of memory");
		return json;
	}
	/* read(2) to the end, so pipes and <(...) work too */
	fd = open(arg, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die("--nic_priority_matrix: cannot open '%s': %s (JSON must "
		    "start with '{')", arg, strerror(errno));
	json = xmalloc(cap);
	for (;;) {
		if (len + 1 == cap) {
			if (cap >= 64u << 20)
				die("--nic_priority_matrix: '%s' is over 64 MiB",
				    arg);
			cap *= 2;
			json = realloc(json, cap);
			if (!json)
				die("out of memory");
		}
		n = read(fd, json + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die("--nic_priority_matrix: cannot read '%s': %s", arg,
			    strerror(errno));
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	json[len] = '\0';
	if (strlen(json) != len || json[strspn(json, " \t\r\n")] != '{')
		die("--nic_priority_matrix: '%s' does not hold a JSON object",
		    arg);
	return json;
}

/* --metadata_type's store, as Mooncake's TENT bench names them. */
static char *metadata_of(const char *type, const char *servers)
{
	static const char *const types[] = { "p2p", "etcd", "redis", "http" };
	char *url;
	int t = find_name(type, types, ARRAY_SIZE(types));

	if (t < 0)
		die("--metadata_type: '%s' is not p2p, etcd, redis or http",
		    type);
	if (t == 0)
		return strdup("p2p");
	if (!servers || !*servers)
		die("--metadata_type=%s needs --metadata_servers", type);
	if (strstr(servers, "://"))
		return strdup(servers);
	if (asprintf(&url, "%s://%s", types[t], servers) < 0)
		die("out of memory");
	return url;
}

static void set_unit(struct bench_opts *o, const char *unit)
{
	for (size_t i = 0; i < ARRAY_SIZE(units); i++) {
		if (!strcmp(unit, units[i].name)) {
			o->report_unit = units[i].name;
			o->report_bytes = units[i].bytes;
			return;
		}
	}
	/* as Mooncake: a warning, and GB */
	fprintf(stderr, "xfer-bench: --report_unit: '%s' is not GB, GiB, Gb, "
		"MB, MiB, Mb, KB, KiB or Kb: GB it is\n", unit);
	set_unit(o, "GB");
}

/* The settings of @p r that need a check or a conversion. */
static void convert(const struct raw *r, struct bench_opts *o)
{
	int i;

	i = find_name(r->mode, bench_mode_names, ARRAY_SIZE(bench_mode_names));
	if (i < 0)
		die("--mode: '%s' is not initiator, target or loopback",
		    r->mode);
	o->mode = (enum bench_mode)i;
	i = find_name(r->operation, bench_op_names, ARRAY_SIZE(bench_op_names));
	if (i < 0)
		die("--operation: '%s' is not read or write", r->operation);
	o->op = (enum xfer_opcode)i;
	if (strcmp(r->protocol, "rdma") && strcmp(r->protocol, "tcp"))
		die("--protocol: '%s' is not rdma or tcp", r->protocol);
	if (strcmp(r->backend, "classic"))
		die("--backend: '%s': xfer has one backend, classic",
		    r->backend);
	if (r->use_vram)
		die("--use_vram: xfer moves host memory only (--nouse_vram)");
	if (r->device_name && !*r->device_name)
		die("--device_name: empty list");
	o->auto_discovery = r->auto_discovery;
	/* Mooncake's engine picks its transport when it discovers */
	o->protocol = !r->auto_discovery ? r->protocol :
		      bench_have_rdma() ? "rdma" : "tcp";
	o->device_names = r->device_name;
	if (r->matrix && *r->matrix)
		o->matrix = read_matrix(r->matrix);
	o->metadata_server = r->metadata_type ?
		metadata_of(r->metadata_type, r->metadata_servers ?
			    r->metadata_servers : r->metadata_server) :
		r->metadata_server ? strdup(r->metadata_server) : NULL;
	if ((r->metadata_type || r->metadata_server) && !o->metadata_server)
		die("out of memory");
	o->local_server_name = r->local_server_name;
	o->segment_id = r->segment_id;
	o->bind_addr = r->bind_addr;
	o->rpc_port = (long)r->rpc_port;
	o->workers = (long)r->workers;
	o->batch_size = (size_t)r->batch_size;
	o->block_size = (size_t)r->block_size;
	o->threads = (size_t)r->threads;
	o->duration_s = r->duration;
	o->report_precision = r->report_precision > 30 ?
			      30 : (int)r->report_precision;
	set_unit(o, r->report_unit);
	o->verify = r->verify;
	o->footprint = (size_t)r->footprint;
	o->json = r->json;
	o->plugin = r->plugin;
	o->hugepages = r->hugepages;
	if (r->file && !*r->file)
		die("--file: empty path");
	o->file = r->file;
}

/* The buffer: Mooncake's 1 GiB unless given, raised (with a warning, as
 * Mooncake does) to what the threads use; loopback: twice that. */
static void buffer_size(long long given, struct bench_opts *o)
{
	size_t need;

	if (__builtin_mul_overflow(o->batch_size, o->block_size, &need) ||
	    __builtin_mul_overflow(need, o->threads, &need) ||
	    (o->mode == BENCH_LOOPBACK &&
	     __builtin_mul_overflow(need, 2, &o->buffer_size)))
		die("batch_size * block_size * threads overflows");
	if (given < 0 && o->mode == BENCH_LOOPBACK)
		return;
	o->buffer_size = given < 0 ? 1ul << 30 : (size_t)given;
	if (o->buffer_size < need && o->mode != BENCH_TARGET) {
		fprintf(stderr, "xfer-bench: --buffer_size %zu is below "
			"batch_size * block_size * threads: %zu it is\n",
			o->buffer_size, need);
		o->buffer_size = need;
	}
}

void bench_opts_parse(int argc, char **argv, struct bench_opts *o)
{
	struct raw r = {
		.mode = "initiator", .operation = "read", .protocol = "rdma",
		.report_unit = "GB", .backend = "classic",
		.buffer_size = -1, .batch_size = 128, .block_size = 65536,
		.threads = 12, .report_precision = 2, .workers = -1,
		.rpc_port = -1, .duration = -1, .init_mem = true,
	};

	*o = (struct bench_opts){ 0 };
	read_args(argc, argv, &r);
	convert(&r, o);
	buffer_size(r.buffer_size, o);
	if (o->footprint && o->verify &&
	    o->footprint < o->batch_size * o->block_size)
		die("--footprint below batch_size * block_size overlaps the "
		    "requests: not with --verify");
	if (o->mode == BENCH_TARGET) {
		/* Mooncake's target serves until a signal */
		o->duration_s = r.duration < 0 ? 0 : r.duration;
		if (o->plugin)
			die("--plugin is for the initiator and loopback modes");
		return;
	}
	if (r.duration < 0)
		o->duration_s = 10;
	if (o->mode == BENCH_INITIATOR && !o->segment_id)
		die("--mode=initiator needs --segment_id, the target's "
		    "segment name");
	if (o->duration_s <= 0)
		die("--duration must be > 0 in %s mode",
		    bench_mode_names[o->mode]);
	if (o->mode == BENCH_LOOPBACK && !o->local_server_name)
		o->local_server_name = "127.0.0.1";
}

void bench_opts_free(struct bench_opts *o)
{
	free(o->matrix);
	free(o->metadata_server);
	o->matrix = NULL;
	o->metadata_server = NULL;
}
