/*
 * xfer-bench: the report of a run. Throughput, latency percentiles, CPU
 * seconds per GB, bytes per RDMA device, the loop's stalls (--plugin):
 * Mooncake's result line and ours as text, or all of it as one JSON line
 * (--json).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench/bench_internal.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted @p v. */
static double percentile(const double *v, size_t n, double q)
{
	size_t rank = (size_t)ceil(q * (double)n);

	if (n == 0)
		return 0;
	return v[rank ? rank - 1 : 0];
}

void bench_percentiles(struct bench_result *r, double *lat_us)
{
	qsort(lat_us, r->batches, sizeof(*lat_us), cmp_double);
	r->p50 = percentile(lat_us, r->batches, 0.50);
	r->p99 = percentile(lat_us, r->batches, 0.99);
	r->p999 = percentile(lat_us, r->batches, 0.999);
}

void bench_stalls(struct bench_result *r, double *gaps_ms, size_t n)
{
	qsort(gaps_ms, n, sizeof(*gaps_ms), cmp_double);
	r->have_stall = true;
	r->stall_max_ms = n ? gaps_ms[n - 1] : 0;
	r->stall_p99_ms = percentile(gaps_ms, n, 0.99);
}

static void print_num(const char *key, double v, bool have, bool last)
{
	if (have)
		printf("\"%s\":%.6g%s", key, v, last ? "" : ",");
	else
		printf("\"%s\":null%s", key, last ? "" : ",");
}

static void print_u64(const char *key, uint64_t v, bool have)
{
	if (have)
		printf("\"%s\":%" PRIu64 ",", key, v);
	else
		printf("\"%s\":null,", key);
}

/* Bytes per RDMA device of @p e: text, or a JSON member (nothing for an
 * engine without devices). */
static void print_nics(struct xfer_engine *e, bool json)
{
	const char *name;
	uint64_t bytes;
	size_t i;

	for (i = 0; !xfer_engine_device_stats(e, i, &name, &bytes); i++) {
		if (json)
			printf("%s\"%s\":%" PRIu64, i ? "," : ",\"nic_bytes\":{",
			       name, bytes);
		else
			printf("%s %s %" PRIu64, i ? "," : "nic bytes:", name,
			       bytes);
	}
	if (i)
		printf(json ? "}" : "\n");
}

void bench_report(const struct bench_opts *o, const struct bench_result *r,
		  struct xfer_engine *e)
{
	bool ran = o->mode != BENCH_TARGET;
	double gb = (double)r->bytes / 1e9;
	double gbps = r->duration_s > 0 ? gb / r->duration_s : 0;

	if (o->json) {
		printf("{\"mode\":\"%s\",\"operation\":\"%s\",\"protocol\":\"%s\","
		       "\"segment\":\"%s\",\"block_size\":%zu,"
		       "\"batch_size\":%zu,\"threads\":%zu,",
		       bench_mode_names[o->mode],
		       bench_op_names[o->op], o->protocol,
		       o->file ? "file" : "ram",
		       o->block_size, o->batch_size, o->threads);
		print_num("duration_s", r->duration_s, true, false);
		print_u64("batches", r->batches, ran);
		print_u64("bytes", r->bytes, ran);
		print_num("throughput_gbps", gbps, ran, false);
		print_num("lat_p50_us", r->p50, ran, false);
		print_num("lat_p99_us", r->p99, ran, false);
		print_num("lat_p999_us", r->p999, ran, false);
		print_num("cpu_s_per_gb_initiator", r->cpu_init_s / gb,
			  r->have_init && gb > 0, false);
		print_num("cpu_s_per_gb_target", r->cpu_target_s / gb,
			  r->have_target && ran && gb > 0, false);
		print_num("cpu_s_initiator", r->cpu_init_s, r->have_init, false);
		print_num("cpu_s_target", r->cpu_target_s, r->have_target, false);
		print_num("loop_stall_max_ms", r->stall_max_ms, r->have_stall,
			  false);
		print_num("loop_stall_p99_ms", r->stall_p99_ms, r->have_stall,
			  false);
		/* a failed check ends the run before the report */
		printf("\"verified\":%s", ran && o->verify ? "true" : "null");
		if (ran)
			print_nics(e, true);
		printf("}\n");
		return;
	}
	if (!ran) {
		/* The target cannot count the bytes peers moved: raw seconds. */
		printf("cpu: target %.3f s in %.2f s\n", r->cpu_target_s,
		       r->duration_s);
		return;
	}
	/* Mooncake's line, in its --report_unit and --report_precision */
	printf("Test completed: duration %.2f, batch count %lu, throughput "
	       "%.*f %s/s\n", r->duration_s, (unsigned long)r->batches,
	       o->report_precision, r->duration_s > 0 ?
	       (double)r->bytes / r->duration_s / o->report_bytes : 0,
	       o->report_unit);
	if (r->have_stall)
		printf("loop stall: max %.2f ms, p99 %.2f ms\n",
		       r->stall_max_ms, r->stall_p99_ms);
	printf("latency (us): p50 %.1f p99 %.1f p999 %.1f\n",
	       r->p50, r->p99, r->p999);
	if (r->have_target)
		printf("cpu: initiator %.3f s/GB, target %.3f s/GB\n",
		       r->cpu_init_s / gb, r->cpu_target_s / gb);
	else
		printf("cpu: initiator %.3f s/GB\n", r->cpu_init_s / gb);
	print_nics(e, false);
}
