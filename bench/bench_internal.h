/*
 * What the parts of xfer-bench share: the settings the flags fill, the
 * figures a run hands to the report, the engine made from the settings,
 * and how the program fails.
 *
 *   xfer_bench.c  main
 *   fail.c        die(), die_api(), xmalloc()
 *   flags.c       the flags (transfer_engine_bench's, then xfer's) into
 *                 struct bench_opts, --help
 *   config.c      the library's configuration from the settings
 *   config_list.c --list-config: the library's configuration keys
 *   runner.c      engines, buffers, batches, the timed loop, the modes
 *   plugin.c      --plugin: the initiator on the bench's event_base
 *   file.c        --file: the file segment a target serves, its name
 *   report.c      throughput, latency percentiles, CPU per GB, --json
 */
#ifndef XFER_BENCH_INTERNAL_H
#define XFER_BENCH_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <xfer/xfer.h>

#include "util/gflags_internal.h"

struct event_base;

enum bench_mode { BENCH_LOOPBACK, BENCH_TARGET, BENCH_INITIATOR };

/* "loopback", "target", "initiator", by enum bench_mode. */
extern const char *const bench_mode_names[];

/* "read", "write", by enum xfer_opcode. */
extern const char *const bench_op_names[];

/* The settings of a run, from the command line. */
struct bench_opts {
	enum bench_mode mode;
	enum xfer_opcode op;
	const char *protocol;       /* "rdma" or "tcp" */
	const char *device_names;   /* NULL: from the config */
	bool auto_discovery;        /* every device, whatever else says */
	char *matrix;               /* JSON, NULL: from the config */
	char *metadata_server;      /* NULL: the config's */
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
	size_t footprint; /* 0: the batch's, every request its own */
	bool json;
	bool plugin;      /* the initiator on our event_base, no waiting */
	bool hugepages;   /* buffers on transparent huge pages */
	const char *file; /* the target segment is this file's, NULL: RAM */
	const char *report_unit;    /* Mooncake's: "GB", "GiB" ... */
	double report_bytes;        /* bytes in one report_unit */
	int report_precision;       /* digits after the point */
};

/* Where request @p i of a batch starts in its thread's region, bytes: one
 * block after the other, round again past o->footprint (whole blocks, at
 * least one) when it is set. */
static inline size_t bench_block_off(const struct bench_opts *o, size_t i)
{
	size_t blocks = o->footprint / o->block_size;

	if (!o->footprint)
		return i * o->block_size;
	return (i % (blocks ? blocks : 1)) * o->block_size;
}

/* What a run measured, for the report. */
struct bench_result {
	double duration_s;
	uint64_t batches, bytes;
	double p50, p99, p999;       /* batch latency in us */
	bool have_init, have_target;
	double cpu_init_s, cpu_target_s;
	bool have_stall;             /* --plugin: the loop's tick gaps */
	double stall_max_ms, stall_p99_ms;
};

/* Where a region's batches are: the verify steps around the timed ones. */
enum bench_phase {
	BENCH_CLEAR,  /* --verify write: zero the remote region first */
	BENCH_RUN,    /* the timed batches */
	BENCH_CHECK,  /* --verify write: read the remote region back */
	BENCH_DONE,
};

/* One region of the initiator's buffers and what its batches measured:
 * a submitting thread's, or one batch in flight with --plugin. */
struct bench_worker {
	pthread_t tid;             /* threads only */
	struct xfer_engine *e;
	enum xfer_opcode op;
	enum bench_phase phase;
	size_t batch_size, block_size;
	uint64_t region_off;       /* offset of the region in both buffers */
	uint8_t *local;            /* local region */
	const uint8_t *target_view; /* loopback: the target's region, to check */
	bool verify;
	const struct timespec *deadline; /* threads: when to stop */
	struct xfer_request *reqs;
	uint8_t *expect;           /* the pattern of the region, for --verify */
	enum xfer_opcode batch_op; /* of the batch in flight */
	struct timespec batch_t0;  /* when it was submitted */
	double *lat_us;
	size_t nlat, cap;
	double cpu_s;              /* threads: CPU of the thread */
};

/* Initiator and loopback modes: the engines, buffers and regions. */
struct bench_initiator {
	struct xfer_engine *e, *target; /* target: loopback only */
	uint8_t *local, *target_buf;    /* target_buf: NULL with --file */
	char *seg_name;
	int64_t seg;
	struct bench_worker *w;         /* --threads of them */
	struct timespec start;
	double cpu_init0, cpu_target0;  /* the engines' at the start */
	double cpu_self0;               /* this thread's at the start */
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
 * engine (NULL, NULL, -1: those of the config); with @base, on that
 * event_base with 0 workers (NULL: its own threads). Dies on failure. */
struct xfer_engine *bench_engine_new(const struct bench_opts *o,
				     const char *name, const char *bind,
				     long rpc_port, struct event_base *base);

/* Whether the host has an RDMA device (--auto_discovery). */
bool bench_have_rdma(void);

/* Print every configuration key of the library on @f (--list-config):
 * its unit, default, range, variables and doc; @markdown: as the list of
 * docs/CONFIG.md. Dies if the library cannot list them. */
void bench_list_config(FILE *f, bool markdown);

/* Serve a registered buffer until --duration ends or SIGINT/SIGTERM. */
void bench_run_target(const struct bench_opts *o);

/* Move batches from --threads threads until --duration ends (initiator
 * and loopback modes). */
void bench_run_initiator(const struct bench_opts *o);

/* As bench_run_initiator(), with the initiator engine on an event_base of
 * ours: --threads batches in flight, each submitted from the callback of
 * the one before (--plugin). */
void bench_run_plugin(const struct bench_opts *o);

/* The engines of @in (the initiator's on @base unless NULL; the target in
 * loopback mode, its buffer registered) and the local buffer, not yet
 * registered. */
void bench_initiator_new(const struct bench_opts *o,
			 struct bench_initiator *in, struct event_base *base);

/* @in->e's local buffer is registered and segment @seg open: check its
 * buffer 0 and set up the regions. */
void bench_initiator_regions(const struct bench_opts *o,
			     struct bench_initiator *in, int64_t seg);

/* Note the clocks at the start of the timed run. */
void bench_initiator_start(struct bench_initiator *in);

/* The run is over: gather @r (stall figures as set by the caller), report
 * it, free what @in holds. */
void bench_initiator_end(const struct bench_opts *o,
			 struct bench_initiator *in, struct bench_result *r);

/* Register @p with @e for peers to read and write. Dies on failure. */
void bench_register(struct xfer_engine *e, void *p, size_t len);

/* Fill @p with the --verify pattern of target offsets [@off, @off+@len). */
void bench_fill_pattern(uint8_t *p, uint64_t off, size_t len);

/* --file: make @o->file hold --buffer_size bytes (the pattern with
 * --verify) and register it as the file segment of @e. Dies on failure. */
void bench_register_file(const struct bench_opts *o, struct xfer_engine *e);

/* The segment an initiator opens to reach target @name: @name, or with
 * --file "nvmeof/@name". The caller frees it. */
char *bench_segment_name(const struct bench_opts *o, const char *name);

/* The opcode of @w's next batch, or -1 when the region is done; @stop:
 * the timed run is over. Prepares the local region for it. */
int bench_worker_next(struct bench_worker *w, bool stop);

/* @w's batch ended after @us: its latency and --verify checks. */
void bench_worker_done(struct bench_worker *w, double us);

/* Submit @w's requests with @op as a new batch, with completion callback
 * @cb (NULL: none). Dies on failure. */
struct xfer_batch *bench_batch_submit(struct bench_worker *w,
				      enum xfer_opcode op, xfer_batch_cb cb,
				      void *arg);

/* @w's batch @b has ended: check every task completed, free @b, and
 * return its latency in us. Dies on a task that did not complete. */
double bench_batch_end(struct bench_worker *w, struct xfer_batch *b);

/* Sort the @r->batches latencies in @lat_us and set @r's percentiles. */
void bench_percentiles(struct bench_result *r, double *lat_us);

/* Sort the @n loop tick gaps in @gaps_ms and set @r's stall figures. */
void bench_stalls(struct bench_result *r, double *gaps_ms, size_t n);

/* Print @r as text or a JSON line (--json); @e gives the bytes per RDMA
 * device. */
void bench_report(const struct bench_opts *o, const struct bench_result *r,
		  struct xfer_engine *e);

#endif
