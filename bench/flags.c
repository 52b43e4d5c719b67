/*
 * xfer-bench: the command line into struct bench_opts, the usage text,
 * and the settings the flags imply (the protocol, the buffer size).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
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

static const char *const protocol_names[] = { "tcp", "rdma" };

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* The index of @p arg in @p names, or -1. */
static int find_name(const char *arg, const char *const *names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(arg, names[i]))
			return (int)i;
	return -1;
}

static void usage(FILE *f)
{
	fputs("usage: xfer-bench [--flag=value | --flag value]...\n"
	      "  --mode target|initiator|loopback  (loopback)\n"
	      "  --operation read|write            (read)\n"
	      "  --protocol tcp|rdma               (tcp, or XFER_PROTOCOL)\n"
	      "  --device_name LIST                RDMA devices, e.g. rxe0,rxe1 (all)\n"
	      "  --auto_discovery                  every RDMA device, over --device_name\n"
	      "  --nic_priority_matrix JSON|FILE   '{...}' or a file of it (from sysfs)\n"
	      "  --metadata_server STR             (p2p)\n"
	      "  --local_server_name NAME          (127.0.0.1 in loopback)\n"
	      "  --segment_id NAME                 target segment, initiator mode\n"
	      "  --batch_size N                    (128)\n"
	      "  --block_size BYTES                (65536)\n"
	      "  --buffer_size BYTES               (1 GiB; loopback: 2 x the regions)\n"
	      "  --duration SECONDS                (10; target: 0 = until a signal)\n"
	      "  --threads N                       (1)\n"
	      "  --workers N                       engine workers (from the config)\n"
	      "  --bind_addr ADDR, --rpc_port PORT\n"
	      "  --verify                          check every byte against a pattern\n"
	      "  --json                            one JSON line instead of text\n"
	      "  --plugin                          initiator on the bench's event_base,\n"
	      "                                    no thread, no waiting; loop stalls\n"
	      "  --file PATH                       target segment: the file segment\n"
	      "                                    nvmeof/<target name>; target and\n"
	      "                                    loopback register PATH, --buffer_size\n"
	      "                                    bytes (extended if shorter); initiator:\n"
	      "                                    the target's PATH, not opened here\n",
	      f);
}

static unsigned long long parse_u64(const char *flag, const char *s,
				    unsigned long long min,
				    unsigned long long max)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || v < min || v > max)
		die("--%s: '%s' is not an integer in [%llu, %llu]", flag, s,
		    min, max);
	return v;
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

static void parse_args(int argc, char **argv, struct bench_opts *o)
{
	enum {
		O_MODE = 256, O_OPERATION, O_PROTOCOL, O_METADATA, O_NAME,
		O_SEGMENT, O_BATCH, O_BLOCK, O_BUFFER, O_DURATION, O_THREADS,
		O_VERIFY, O_JSON, O_WORKERS, O_BIND, O_RPC_PORT, O_HELP,
		O_DEVICE, O_AUTO, O_MATRIX, O_PLUGIN, O_FILE,
	};
	static const struct option longopts[] = {
		{ "mode", required_argument, NULL, O_MODE },
		{ "operation", required_argument, NULL, O_OPERATION },
		{ "protocol", required_argument, NULL, O_PROTOCOL },
		{ "metadata_server", required_argument, NULL, O_METADATA },
		{ "local_server_name", required_argument, NULL, O_NAME },
		{ "segment_id", required_argument, NULL, O_SEGMENT },
		{ "batch_size", required_argument, NULL, O_BATCH },
		{ "block_size", required_argument, NULL, O_BLOCK },
		{ "buffer_size", required_argument, NULL, O_BUFFER },
		{ "duration", required_argument, NULL, O_DURATION },
		{ "threads", required_argument, NULL, O_THREADS },
		{ "verify", no_argument, NULL, O_VERIFY },
		{ "json", no_argument, NULL, O_JSON },
		{ "workers", required_argument, NULL, O_WORKERS },
		{ "bind_addr", required_argument, NULL, O_BIND },
		{ "rpc_port", required_argument, NULL, O_RPC_PORT },
		{ "help", no_argument, NULL, O_HELP },
		{ "device_name", required_argument, NULL, O_DEVICE },
		{ "auto_discovery", no_argument, NULL, O_AUTO },
		{ "nic_priority_matrix", required_argument, NULL, O_MATRIX },
		{ "plugin", no_argument, NULL, O_PLUGIN },
		{ "file", required_argument, NULL, O_FILE },
		{ NULL, 0, NULL, 0 },
	};
	char *end;
	int c, i;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case O_MODE:
			i = find_name(optarg, bench_mode_names,
				      ARRAY_SIZE(bench_mode_names));
			if (i < 0)
				die("--mode: '%s' is not target, initiator or loopback",
				    optarg);
			o->mode = (enum bench_mode)i;
			break;
		case O_OPERATION:
			i = find_name(optarg, bench_op_names,
				      ARRAY_SIZE(bench_op_names));
			if (i < 0)
				die("--operation: '%s' is not read or write", optarg);
			o->op = (enum xfer_opcode)i;
			break;
		case O_PROTOCOL:
			if (find_name(optarg, protocol_names,
				      ARRAY_SIZE(protocol_names)) < 0)
				die("--protocol: '%s' is not tcp or rdma", optarg);
			o->protocol = optarg;
			break;
		case O_DEVICE:
			if (!*optarg)
				die("--device_name: empty list");
			o->device_names = optarg;
			break;
		case O_AUTO:
			o->auto_discovery = true;
			break;
		case O_MATRIX:
			free(o->matrix);
			o->matrix = read_matrix(optarg);
			break;
		case O_METADATA:
			o->metadata_server = optarg;
			break;
		case O_NAME:
			o->local_server_name = optarg;
			break;
		case O_SEGMENT:
			o->segment_id = optarg;
			break;
		case O_BATCH:
			o->batch_size = parse_u64("batch_size", optarg, 1, 1u << 24);
			break;
		case O_BLOCK:
			o->block_size = parse_u64("block_size", optarg, 1, 1ull << 40);
			break;
		case O_BUFFER:
			o->buffer_size = parse_u64("buffer_size", optarg, 1, 1ull << 48);
			break;
		case O_DURATION:
			errno = 0;
			o->duration_s = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(o->duration_s >= 0) ||
			    o->duration_s > 1e9)
				die("--duration: '%s' is not a number of seconds",
				    optarg);
			break;
		case O_THREADS:
			o->threads = parse_u64("threads", optarg, 1, 1024);
			break;
		case O_VERIFY:
			o->verify = true;
			break;
		case O_JSON:
			o->json = true;
			break;
		case O_PLUGIN:
			o->plugin = true;
			break;
		case O_FILE:
			if (!*optarg)
				die("--file: empty path");
			o->file = optarg;
			break;
		case O_WORKERS:
			o->workers = (long)parse_u64("workers", optarg, 0, 64);
			break;
		case O_BIND:
			o->bind_addr = optarg;
			break;
		case O_RPC_PORT:
			o->rpc_port = (long)parse_u64("rpc_port", optarg, 0, 65535);
			break;
		case O_HELP:
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			exit(1);
		}
	}
	if (optind < argc)
		die("unexpected argument '%s' (see --help)", argv[optind]);
}

void bench_opts_parse(int argc, char **argv, struct bench_opts *o)
{
	size_t need;

	*o = (struct bench_opts){
		.mode = BENCH_LOOPBACK,
		.op = XFER_READ,
		.rpc_port = -1,
		.workers = -1,
		.batch_size = 128,
		.block_size = 65536,
		.duration_s = 10,
		.threads = 1,
	};
	parse_args(argc, argv, o);
	/* for the report: what the config gives the engines */
	if (!o->protocol)
		o->protocol = bench_config_protocol(o);
	if (__builtin_mul_overflow(o->batch_size, o->block_size, &need) ||
	    __builtin_mul_overflow(need, o->threads, &need))
		die("batch_size * block_size * threads overflows");
	if (o->buffer_size == 0) {
		if (o->mode == BENCH_LOOPBACK) {
			if (__builtin_mul_overflow(need, 2, &o->buffer_size))
				die("batch_size * block_size * threads overflows");
		} else {
			o->buffer_size = need > (1ul << 30) ? need : 1ul << 30;
		}
	}
	if (o->mode == BENCH_TARGET) {
		if (o->plugin)
			die("--plugin is for the initiator and loopback modes");
		return;
	}
	if (o->mode == BENCH_INITIATOR && !o->segment_id)
		die("--mode initiator needs --segment_id (the target's segment name)");
	if (o->buffer_size < need)
		die("--buffer_size %zu is below batch_size * block_size * threads = %zu",
		    o->buffer_size, need);
	if (o->duration_s <= 0)
		die("--duration must be > 0 in %s mode",
		    bench_mode_names[o->mode]);
	if (o->mode == BENCH_LOOPBACK && !o->local_server_name)
		o->local_server_name = "127.0.0.1";
}

void bench_opts_free(struct bench_opts *o)
{
	free(o->matrix);
	o->matrix = NULL;
}
