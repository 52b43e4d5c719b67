/*
 * What the parts of xfer-bench share: the settings the flags fill, the
 * figures a run hands to the report, the engine made from the settings,
 * and how the program fails.
 *
 *   xfer_bench.c  main, die(), xmalloc()
 *   flags.c       the command line into struct bench_opts, --help
 *   config.c      the library's configuration from the settings
 *   runner.c      engines, buffers, batches, the timed loop, the modes
 *   report.c      throughput, latency percentiles, CPU per GB, --json
 */
#ifndef XFER_BENCH_INTERNAL_H
#define XFER_BENCH_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <xfer/xfer.h>

enum bench_mode { BENCH_LOOPBACK, BENCH_TARGET, BENCH_INITIATOR };

/* "loopback", "target", "initiator", by enum bench_mode. */
extern const char *const bench_mode_names[];

/* "read", "write", by enum xfer_opcode. */
extern const char *const bench_op_names[];

/* The settings of a run, from the command line. */
struct bench_opts {
	enum bench_mode mode;
	enum xfer_opcode op;
	const char *protocol;       /* from the config unless given */
	const char *device_names;   /* NULL: from the config */
	bool auto_discovery;        /* every device, whatever else says */
	char *matrix;               /* JSON, NULL: from the config */
	const char *metadata_server;
	const char *local_server_name;
	const char *segment_id;
	const char *bind_addr;
	long rpc_port;    /* -1: from the config */
	long workers;     /* -1: from the config */
	size_t batch_size;
	size_t block_size;
	size_t buffer_size; /* 0: derived from the mode */
	double duration_s;
	size_t threads;
	bool verify;
	bool json;
};

/* What a run measured, for the report. */
struct bench_result {
	double duration_s;
	uint64_t batches, bytes;
	double p50, p99, p999;       /* batch latency in us */
	bool have_init, have_target;
	double cpu_init_s, cpu_target_s;
};

/* Print "xfer-bench: " and the message on stderr, then exit(1). The first
 * failing thread reports; others wait for the exit. */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* An API call failed with -@ret; @e may be NULL when there is no engine. */
void die_api(const struct xfer_engine *e, const char *what, int ret)
	__attribute__((noreturn));

/* malloc() that dies rather than return NULL. */
void *xmalloc(size_t len);

/* Fill @o from the command line: defaults, flags, then what they imply
 * (the protocol of the config, the buffer size). --help prints the usage
 * and exits 0; a bad flag or combination of flags dies. Free with
 * bench_opts_free(). */
void bench_opts_parse(int argc, char **argv, struct bench_opts *o);
void bench_opts_free(struct bench_opts *o);

/* An engine configured by @o, with @name, @bind and @rpc_port for this
 * engine (NULL, NULL, -1: those of the config). Dies on failure. */
struct xfer_engine *bench_engine_new(const struct bench_opts *o,
				     const char *name, const char *bind,
				     long rpc_port);

/* The protocol the engines of @o get from the config, when no flag names
 * one. Dies on a bad config. */
const char *bench_config_protocol(const struct bench_opts *o);

/* Serve a registered buffer until --duration ends or SIGINT/SIGTERM. */
void bench_run_target(const struct bench_opts *o);

/* Move batches from --threads threads until --duration ends (initiator
 * and loopback modes). */
void bench_run_initiator(const struct bench_opts *o);

/* Sort the @r->batches latencies in @lat_us and set @r's percentiles. */
void bench_percentiles(struct bench_result *r, double *lat_us);

/* Print @r as text or a JSON line (--json); @e gives the bytes per RDMA
 * device. */
void bench_report(const struct bench_opts *o, const struct bench_result *r,
		  struct xfer_engine *e);

#endif
