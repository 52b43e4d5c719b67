/*
 * xfer-bench: the runs. Engines and their buffers, batches of requests
 * and the steps of a region (--verify around the timed batches), the
 * timed loop of each submitting thread, and the modes: a target that
 * serves, an initiator (alone or with its target in this process, in
 * loopback mode) that moves batches. plugin.c drives the same regions
 * from an event loop instead of threads.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "bench/bench_internal.h"

static inline uint8_t pattern(uint64_t i)
{
	return (uint8_t)(i * 131 + (i >> 8) + 7);
}

void bench_fill_pattern(uint8_t *p, uint64_t off, size_t len)
{
	for (size_t i = 0; i < len; i++)
		p[i] = pattern(off + i);
}

/* @p got holds the bytes at target offsets [off, off+len). */
static void check_pattern(const uint8_t *got, const uint8_t *expect,
			  uint64_t off, size_t len, const char *what)
{
	if (memcmp(got, expect, len) == 0)
		return;
	for (size_t i = 0; i < len; i++)
		if (got[i] != expect[i])
			die("verify %s: mismatch at target offset %" PRIu64
			    ": got 0x%02x, want 0x%02x", what, off + i,
			    got[i], expect[i]);
}

static double ts_diff(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) +
	       (double)(b->tv_nsec - a->tv_nsec) * 1e-9;
}

/* Now on CLOCK_MONOTONIC plus @p s seconds. */
static struct timespec deadline_after(double s)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	t.tv_sec += (time_t)s;
	t.tv_nsec += (long)((s - (double)(time_t)s) * 1e9);
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	return t;
}

static bool ts_before(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec ||
	       (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

static double thread_cpu_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Page-aligned and touched, so page faults stay out of the measurement.
 * With --hugepages, 2 MiB-aligned and on transparent huge pages where the
 * kernel has them: a 64 KiB O_DIRECT request is then one segment to the
 * device, not sixteen (docs/BENCH.md). */
static uint8_t *alloc_buffer(const struct bench_opts *o, size_t len)
{
	size_t align = o->hugepages ? 2u << 20 : 4096;
	void *p;
	int ret = posix_memalign(&p, align, len);

	if (ret)
		die("posix_memalign %zu bytes: %s", len, strerror(ret));
	if (o->hugepages && madvise(p, len, MADV_HUGEPAGE))
		fprintf(stderr, "xfer-bench: madvise(MADV_HUGEPAGE): %s\n",
			strerror(errno));
	memset(p, 0, len);
	return p;
}

void bench_register(struct xfer_engine *e, void *p, size_t len)
{
	int ret = xfer_register(e, p, len, "cpu:0", true);

	if (ret)
		die_api(e, "xfer_register", ret);
}

/* What a target serves, registered with @e: the file of --file (NULL
 * returned), or a buffer with the pattern for --verify, else zeros. */
static uint8_t *target_buffer(const struct bench_opts *o,
			      struct xfer_engine *e)
{
	uint8_t *buf;

	if (o->file) {
		bench_register_file(o, e);
		return NULL;
	}
	buf = alloc_buffer(o, o->buffer_size);
	if (o->verify)
		bench_fill_pattern(buf, 0, o->buffer_size);
	bench_register(e, buf, o->buffer_size);
	return buf;
}

struct xfer_batch *bench_batch_submit(struct bench_worker *w,
				      enum xfer_opcode op, xfer_batch_cb cb,
				      void *arg)
{
	struct xfer_batch *b;
	int ret;

	for (size_t i = 0; i < w->batch_size; i++)
		w->reqs[i].opcode = op;
	b = xfer_batch_new(w->e, w->batch_size);
	if (!b)
		die_api(w->e, "xfer_batch_new", -errno);
	if (cb) {
		ret = xfer_batch_set_callback(b, cb, arg);
		if (ret)
			die_api(w->e, "xfer_batch_set_callback", ret);
	}
	w->batch_op = op;
	clock_gettime(CLOCK_MONOTONIC, &w->batch_t0);
	ret = xfer_batch_submit(b, w->reqs, w->batch_size);
	if (ret)
		die_api(w->e, "xfer_batch_submit", ret);
	return b;
}

double bench_batch_end(struct bench_worker *w, struct xfer_batch *b)
{
	struct timespec t1;
	int ret;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	for (size_t i = 0; i < w->batch_size; i++) {
		struct xfer_task_status st;

		ret = xfer_batch_status(b, i, &st);
		if (ret)
			die_api(w->e, "xfer_batch_status", ret);
		if (st.status != XFER_COMPLETED)
			die("task %zu (%s of %zu bytes at 0x%" PRIx64 ") ended %s",
			    i, bench_op_names[w->batch_op],
			    w->block_size, w->reqs[i].target_offset,
			    xfer_status_str(st.status));
	}
	ret = xfer_batch_free(b);
	if (ret)
		die_api(w->e, "xfer_batch_free", ret);
	return ts_diff(&w->batch_t0, &t1) * 1e6;
}

static void record_latency(struct bench_worker *w, double us)
{
	if (w->nlat == w->cap) {
		w->cap = w->cap ? w->cap * 2 : 4096;
		w->lat_us = realloc(w->lat_us, w->cap * sizeof(*w->lat_us));
		if (!w->lat_us)
			die("out of memory for latencies");
	}
	w->lat_us[w->nlat++] = us;
}

/*
 * The batches of a region: with --verify write, first one that clears the
 * remote region (the local one is still zero), so the final check cannot
 * pass on a pre-filled target; then the timed ones; then, with --verify
 * write and no view of the target, one that reads the region back.
 */
int bench_worker_next(struct bench_worker *w, bool stop)
{
	size_t region = w->batch_size * w->block_size;

	switch (w->phase) {
	case BENCH_CLEAR:
		return XFER_WRITE;
	case BENCH_RUN:
		if (!stop) {
			/* Stale bytes of an earlier batch must not pass the check. */
			if (w->verify && w->op == XFER_READ)
				memset(w->local, 0, region);
			return w->op;
		}
		w->phase = BENCH_DONE;
		if (!w->verify || w->op != XFER_WRITE)
			return -1;
		if (w->target_view) {
			check_pattern(w->target_view, w->expect, w->region_off,
				      region, "write");
			return -1;
		}
		/* The local region becomes the scratch buffer. */
		memset(w->local, 0, region);
		w->phase = BENCH_CHECK;
		return XFER_READ;
	default:
		return -1;
	}
}

void bench_worker_done(struct bench_worker *w, double us)
{
	size_t region = w->batch_size * w->block_size;

	switch (w->phase) {
	case BENCH_CLEAR:
		memcpy(w->local, w->expect, region);
		w->phase = BENCH_RUN;
		break;
	case BENCH_RUN:
		record_latency(w, us);
		if (w->verify && w->op == XFER_READ)
			check_pattern(w->local, w->expect, w->region_off, region,
				      "read");
		break;
	case BENCH_CHECK:
		check_pattern(w->local, w->expect, w->region_off, region,
			      "write");
		w->phase = BENCH_DONE;
		break;
	default:
		break;
	}
}

static void *worker_main(void *arg)
{
	struct bench_worker *w = arg;
	struct xfer_batch *b;
	struct timespec now;
	int op, ret;

	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		op = bench_worker_next(w, !ts_before(&now, w->deadline));
		if (op < 0)
			break;
		b = bench_batch_submit(w, op, NULL, NULL);
		ret = xfer_batch_wait(b, -1);
		if (ret)
			die_api(w->e, "xfer_batch_wait", ret);
		bench_worker_done(w, bench_batch_end(w, b));
	}
	w->cpu_s = thread_cpu_s();
	return NULL;
}

/* Serve until the deadline or SIGINT/SIGTERM, asleep in sigtimedwait. */
static void serve(const sigset_t *stop, double duration_s)
{
	struct timespec end = deadline_after(duration_s), now, left;

	if (duration_s <= 0) {
		while (sigwaitinfo(stop, NULL) < 0)
			; /* EINTR: keep waiting */
		return;
	}
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (!ts_before(&now, &end))
			return;
		left.tv_sec = end.tv_sec - now.tv_sec;
		left.tv_nsec = end.tv_nsec - now.tv_nsec;
		if (left.tv_nsec < 0) {
			left.tv_sec--;
			left.tv_nsec += 1000000000L;
		}
		if (sigtimedwait(stop, NULL, &left) >= 0)
			return;
	}
}

void bench_run_target(const struct bench_opts *o)
{
	struct bench_result r = { .have_target = true };
	struct timespec t0, t1;
	struct xfer_engine *e;
	sigset_t stop;
	uint8_t *buf;
	double cpu0;
	int ret;

	/* Blocked before the engine starts its threads, so they inherit the
	 * mask and the signals wait for serve(). */
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	ret = pthread_sigmask(SIG_BLOCK, &stop, NULL);
	if (ret)
		die("pthread_sigmask: %s", strerror(ret));

	e = bench_engine_new(o, o->local_server_name, o->bind_addr,
			     o->rpc_port, NULL);
	buf = target_buffer(o, e);
	printf("xfer-bench target: segment %s\n", xfer_engine_name(e));
	fflush(stdout);

	cpu0 = xfer_engine_cpu_seconds(e);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	serve(&stop, o->duration_s);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	r.cpu_target_s = xfer_engine_cpu_seconds(e) - cpu0;
	r.duration_s = ts_diff(&t0, &t1);
	bench_report(o, &r, e);

	xfer_engine_free(e);
	free(buf);
}

void bench_initiator_new(const struct bench_opts *o,
			 struct bench_initiator *in, struct event_base *base)
{
	*in = (struct bench_initiator){ .seg = -1 };
	if (o->mode == BENCH_LOOPBACK) {
		const char *bind = o->bind_addr ? o->bind_addr : "127.0.0.1";

		in->target = bench_engine_new(o, o->local_server_name, bind,
					      o->rpc_port, NULL);
		in->target_buf = target_buffer(o, in->target);
		in->seg_name = bench_segment_name(o,
						  xfer_engine_name(in->target));
		/* its own default name: with a central store, names must differ */
		in->e = bench_engine_new(o, NULL, bind, 0, base);
	} else {
		in->seg_name = bench_segment_name(o, o->segment_id);
		in->e = bench_engine_new(o, o->local_server_name, o->bind_addr,
					 o->rpc_port, base);
	}
	in->local = alloc_buffer(o, o->buffer_size);
}

void bench_initiator_regions(const struct bench_opts *o,
			     struct bench_initiator *in, int64_t seg)
{
	size_t region = o->batch_size * o->block_size;
	uint64_t remote_addr, remote_len;
	struct bench_worker *w;
	int ret;

	in->seg = seg;
	ret = xfer_segment_buffer(in->e, seg, 0, &remote_addr, &remote_len,
				  NULL);
	if (ret)
		die_api(in->e, "xfer_segment_buffer", ret);
	if (remote_len < region * o->threads)
		die("segment %s: buffer 0 has %" PRIu64 " bytes, %zu threads need %zu",
		    in->seg_name, remote_len, o->threads, region * o->threads);

	in->w = w = calloc(o->threads, sizeof(*w));
	if (!w)
		die("out of memory");
	for (size_t t = 0; t < o->threads; t++) {
		w[t] = (struct bench_worker){
			.e = in->e,
			.op = o->op,
			.phase = o->verify && o->op == XFER_WRITE ?
				 BENCH_CLEAR : BENCH_RUN,
			.batch_size = o->batch_size,
			.block_size = o->block_size,
			.region_off = t * region,
			.local = in->local + t * region,
			.target_view = in->target_buf ?
				       in->target_buf + t * region : NULL,
			.verify = o->verify,
			.reqs = xmalloc(o->batch_size * sizeof(*w[t].reqs)),
		};
		for (size_t i = 0; i < o->batch_size; i++)
			w[t].reqs[i] = (struct xfer_request){
				.opcode = o->op,
				.source = w[t].local + bench_block_off(o, i),
				.target_id = seg,
				.target_offset = remote_addr + t * region +
						 bench_block_off(o, i),
				.length = o->block_size,
			};
		if (o->verify) {
			w[t].expect = xmalloc(region);
			bench_fill_pattern(w[t].expect, w[t].region_off, region);
		}
	}
}

void bench_initiator_start(struct bench_initiator *in)
{
	in->cpu_init0 = xfer_engine_cpu_seconds(in->e);
	if (in->target)
		in->cpu_target0 = xfer_engine_cpu_seconds(in->target);
	in->cpu_self0 = thread_cpu_s();
	clock_gettime(CLOCK_MONOTONIC, &in->start);
}

/* The CPU of the initiator counts its engine's threads, the submitting
 * threads and this one (which runs the loop with --plugin). */
void bench_initiator_end(const struct bench_opts *o,
			 struct bench_initiator *in, struct bench_result *r)
{
	struct bench_worker *w = in->w;
	struct timespec end;
	double *lat;
	int ret;

	clock_gettime(CLOCK_MONOTONIC, &end);
	r->have_init = true;
	r->duration_s = ts_diff(&in->start, &end);
	r->cpu_init_s = xfer_engine_cpu_seconds(in->e) - in->cpu_init0 +
			thread_cpu_s() - in->cpu_self0;
	if (in->target) {
		r->have_target = true;
		r->cpu_target_s = xfer_engine_cpu_seconds(in->target) -
				  in->cpu_target0;
	}
	for (size_t t = 0; t < o->threads; t++) {
		r->batches += w[t].nlat;
		r->cpu_init_s += w[t].cpu_s;
	}
	r->bytes = r->batches * o->batch_size * o->block_size;
	lat = xmalloc((r->batches ? r->batches : 1) * sizeof(*lat));
	for (size_t t = 0, n = 0; t < o->threads; n += w[t++].nlat)
		if (w[t].nlat) /* lat_us stays NULL for a region that ran none */
			memcpy(lat + n, w[t].lat_us, w[t].nlat * sizeof(*lat));
	bench_percentiles(r, lat);
	bench_report(o, r, in->e);

	free(lat);
	for (size_t t = 0; t < o->threads; t++) {
		free(w[t].reqs);
		free(w[t].expect);
		free(w[t].lat_us);
	}
	free(w);
	ret = xfer_segment_close(in->e, in->seg);
	if (ret)
		die_api(in->e, "xfer_segment_close", ret);
	xfer_engine_free(in->e);
	if (in->target)
		xfer_engine_free(in->target);
	free(in->local);
	free(in->target_buf);
	free(in->seg_name);
}

/* Initiator and loopback modes, one thread per region. */
void bench_run_initiator(const struct bench_opts *o)
{
	struct bench_result r = { 0 };
	struct bench_initiator in;
	struct timespec deadline;
	int64_t seg;
	int ret;

	bench_initiator_new(o, &in, NULL);
	seg = xfer_segment_open(in.e, in.seg_name);
	if (seg < 0)
		die_api(in.e, "xfer_segment_open", (int)seg);
	bench_register(in.e, in.local, o->buffer_size);
	bench_initiator_regions(o, &in, seg);

	bench_initiator_start(&in);
	deadline = deadline_after(o->duration_s);
	for (size_t t = 0; t < o->threads; t++) {
		in.w[t].deadline = &deadline;
		ret = pthread_create(&in.w[t].tid, NULL, worker_main, &in.w[t]);
		if (ret)
			die("pthread_create: %s", strerror(ret));
	}
	for (size_t t = 0; t < o->threads; t++)
		pthread_join(in.w[t].tid, NULL);
	bench_initiator_end(o, &in, &r);
}
