/*
 * xfer-bench: throughput, latency and CPU cost of batched transfers, with
 * the flags and the summary line of Mooncake's transfer_engine_bench.
 *
 *   target     serve a registered buffer until --duration ends or a signal
 *   initiator  open --segment_id and move batches to and from its buffer 0
 *   loopback   both engines in this process, over real loopback sockets
 *              (--protocol rdma: through this host's RDMA devices)
 *
 * Each initiator thread owns a disjoint region of batch_size * block_size
 * bytes, at the same offset locally and in the target buffer.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <xfer/xfer.h>

enum mode { MODE_LOOPBACK, MODE_TARGET, MODE_INITIATOR };

static const char *const mode_names[] = {
	[MODE_LOOPBACK] = "loopback",
	[MODE_TARGET] = "target",
	[MODE_INITIATOR] = "initiator",
};

struct opts {
	enum mode mode;
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

/* One submitting thread and what it measured. */
struct worker {
	pthread_t tid;
	struct xfer_engine *e;
	int64_t seg;
	enum xfer_opcode op;
	size_t batch_size, block_size;
	uint64_t region_off;       /* offset of the region in both buffers */
	uint8_t *local;            /* local region */
	uint64_t remote;           /* target address of the region */
	const uint8_t *target_view; /* loopback: the target's region, to check */
	bool verify;
	const struct timespec *deadline;
	struct xfer_request *reqs;
	uint8_t *expect;           /* the pattern of the region, for --verify */
	double *lat_us;
	size_t nlat, cap;
	double cpu_s;
};

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
	static pthread_mutex_t once = PTHREAD_MUTEX_INITIALIZER;
	va_list ap;

	/* Never unlocked: the first failure is reported, other threads that
	 * fail meanwhile wait here until exit() ends the process. */
	pthread_mutex_lock(&once);
	fputs("xfer-bench: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/* An API call failed with -ret; @e may be NULL when there is no engine. */
static void __attribute__((noreturn))
die_api(const struct xfer_engine *e, const char *what, int ret)
{
	const char *msg = e ? xfer_engine_last_error(e) : NULL;

	if (msg && *msg)
		die("%s: %s (%s)", what, strerror(-ret), msg);
	die("%s: %s", what, strerror(-ret));
}

static inline uint8_t pattern(uint64_t i)
{
	return (uint8_t)(i * 131 + (i >> 8) + 7);
}

static void fill_pattern(uint8_t *p, uint64_t off, size_t len)
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

static void *xmalloc(size_t len)
{
	void *p = malloc(len);

	if (!p)
		die("out of memory (%zu bytes)", len);
	return p;
}

/* Page-aligned and touched, so page faults stay out of the measurement. */
static uint8_t *alloc_buffer(size_t len)
{
	void *p;
	int ret = posix_memalign(&p, 4096, len);

	if (ret)
		die("posix_memalign %zu bytes: %s", len, strerror(ret));
	memset(p, 0, len);
	return p;
}

static void register_buffer(struct xfer_engine *e, void *p, size_t len)
{
	int ret = xfer_register(e, p, len, "cpu:0", true);

	if (ret)
		die_api(e, "xfer_register", ret);
}

/* Submit the worker's requests with @p op as one batch and wait for it. */
static double run_batch(struct worker *w, enum xfer_opcode op)
{
	struct timespec t0, t1;
	struct xfer_batch *b;
	int ret;

	for (size_t i = 0; i < w->batch_size; i++)
		w->reqs[i].opcode = op;
	b = xfer_batch_new(w->e, w->batch_size);
	if (!b)
		die_api(w->e, "xfer_batch_new", -errno);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ret = xfer_batch_submit(b, w->reqs, w->batch_size);
	if (ret)
		die_api(w->e, "xfer_batch_submit", ret);
	ret = xfer_batch_wait(b, -1);
	if (ret)
		die_api(w->e, "xfer_batch_wait", ret);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	for (size_t i = 0; i < w->batch_size; i++) {
		struct xfer_task_status st;

		ret = xfer_batch_status(b, i, &st);
		if (ret)
			die_api(w->e, "xfer_batch_status", ret);
		if (st.status != XFER_COMPLETED)
			die("task %zu (%s of %zu bytes at 0x%" PRIx64 ") ended %s",
			    i, op == XFER_READ ? "read" : "write",
			    w->block_size, w->reqs[i].target_offset,
			    xfer_status_str(st.status));
	}
	ret = xfer_batch_free(b);
	if (ret)
		die_api(w->e, "xfer_batch_free", ret);
	return ts_diff(&t0, &t1) * 1e6;
}

static void record_latency(struct worker *w, double us)
{
	if (w->nlat == w->cap) {
		w->cap = w->cap ? w->cap * 2 : 4096;
		w->lat_us = realloc(w->lat_us, w->cap * sizeof(*w->lat_us));
		if (!w->lat_us)
			die("out of memory for latencies");
	}
	w->lat_us[w->nlat++] = us;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	size_t region = w->batch_size * w->block_size;
	struct timespec now;

	if (w->verify && w->op == XFER_WRITE) {
		/* Clear the remote region first (the local one is still zero),
		 * so the final check cannot pass on a pre-filled target. */
		run_batch(w, XFER_WRITE);
		memcpy(w->local, w->expect, region);
	}
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (!ts_before(&now, w->deadline))
			break;
		/* Stale bytes of an earlier batch must not pass the check. */
		if (w->verify && w->op == XFER_READ)
			memset(w->local, 0, region);
		record_latency(w, run_batch(w, w->op));
		if (w->verify && w->op == XFER_READ)
			check_pattern(w->local, w->expect, w->region_off, region,
				      "read");
	}
	if (w->verify && w->op == XFER_WRITE) {
		if (w->target_view) {
			check_pattern(w->target_view, w->expect, w->region_off,
				      region, "write");
		} else {
			/* The local region becomes the scratch buffer. */
			memset(w->local, 0, region);
			run_batch(w, XFER_READ);
			check_pattern(w->local, w->expect, w->region_off, region,
				      "write");
		}
	}
	w->cpu_s = thread_cpu_s();
	return NULL;
}

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

static struct xfer_engine *make_engine(const struct opts *o, const char *name,
				       const char *bind, long rpc_port)
{
	struct xfer_config cfg;
	struct xfer_engine *e;
	int ret = xfer_config_init(&cfg);

	if (ret)
		die_api(NULL, "xfer_config_init", ret);
	if (o->metadata_server)
		cfg.metadata_server = o->metadata_server;
	if (name)
		cfg.local_server_name = name;
	if (bind)
		cfg.bind_addr = bind;
	if (rpc_port >= 0)
		cfg.rpc_port = (uint16_t)rpc_port;
	if (o->workers >= 0)
		cfg.workers = (int)o->workers;
	if (o->protocol)
		cfg.protocol = o->protocol;
	if (o->device_names)
		cfg.device_names = o->device_names;
	if (o->auto_discovery)
		cfg.device_names = NULL;
	if (o->matrix)
		cfg.nic_priority_matrix = o->matrix;
	e = xfer_engine_new(&cfg);
	if (!e)
		die_api(NULL, "xfer_engine_new", -errno);
	return e;
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

struct result {
	double duration_s;
	uint64_t batches, bytes;
	double p50, p99, p999;
	bool have_init, have_target;
	double cpu_init_s, cpu_target_s;
};

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

static void report(const struct opts *o, const struct result *r,
		   struct xfer_engine *e)
{
	bool ran = o->mode != MODE_TARGET;
	double gb = (double)r->bytes / 1e9;
	double gbps = r->duration_s > 0 ? gb / r->duration_s : 0;

	if (o->json) {
		printf("{\"mode\":\"%s\",\"operation\":\"%s\",\"protocol\":\"%s\","
		       "\"block_size\":%zu,\"batch_size\":%zu,\"threads\":%zu,",
		       mode_names[o->mode], o->op == XFER_READ ? "read" : "write",
		       o->protocol, o->block_size, o->batch_size, o->threads);
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
		print_num("cpu_s_target", r->cpu_target_s, r->have_target, true);
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
	printf("Test completed: duration %.2f, batch count %lu, throughput %.2f GB/s\n",
	       r->duration_s, (unsigned long)r->batches, gbps);
	printf("latency (us): p50 %.1f p99 %.1f p999 %.1f\n",
	       r->p50, r->p99, r->p999);
	if (r->have_target)
		printf("cpu: initiator %.3f s/GB, target %.3f s/GB\n",
		       r->cpu_init_s / gb, r->cpu_target_s / gb);
	else
		printf("cpu: initiator %.3f s/GB\n", r->cpu_init_s / gb);
	print_nics(e, false);
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

static void run_target(const struct opts *o)
{
	struct result r = { .have_target = true };
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

	e = make_engine(o, o->local_server_name, o->bind_addr, o->rpc_port);
	buf = alloc_buffer(o->buffer_size);
	if (o->verify)
		fill_pattern(buf, 0, o->buffer_size);
	register_buffer(e, buf, o->buffer_size);
	printf("xfer-bench target: segment %s\n", xfer_engine_name(e));
	fflush(stdout);

	cpu0 = xfer_engine_cpu_seconds(e);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	serve(&stop, o->duration_s);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	r.cpu_target_s = xfer_engine_cpu_seconds(e) - cpu0;
	r.duration_s = ts_diff(&t0, &t1);
	report(o, &r, e);

	xfer_engine_free(e);
	free(buf);
}

/* Initiator and loopback modes. */
static void run_initiator(const struct opts *o)
{
	struct xfer_engine *target = NULL, *e;
	uint8_t *target_buf = NULL, *local;
	size_t region = o->batch_size * o->block_size;
	struct timespec start, deadline, end;
	struct result r = { .have_init = true };
	const char *seg_name = o->segment_id;
	double cpu_init0, cpu_target0 = 0;
	uint64_t remote_addr, remote_len;
	struct worker *w;
	double *lat;
	int64_t seg;
	int ret;

	if (o->mode == MODE_LOOPBACK) {
		const char *bind = o->bind_addr ? o->bind_addr : "127.0.0.1";

		target = make_engine(o, o->local_server_name, bind, o->rpc_port);
		target_buf = alloc_buffer(o->buffer_size);
		if (o->verify)
			fill_pattern(target_buf, 0, o->buffer_size);
		register_buffer(target, target_buf, o->buffer_size);
		seg_name = xfer_engine_name(target);
		/* its own default name: with a central store, names must differ */
		e = make_engine(o, NULL, bind, 0);
	} else {
		e = make_engine(o, o->local_server_name, o->bind_addr, o->rpc_port);
	}

	seg = xfer_segment_open(e, seg_name);
	if (seg < 0)
		die_api(e, "xfer_segment_open", (int)seg);
	ret = xfer_segment_buffer(e, seg, 0, &remote_addr, &remote_len, NULL);
	if (ret)
		die_api(e, "xfer_segment_buffer", ret);
	if (remote_len < region * o->threads)
		die("segment %s: buffer 0 has %" PRIu64 " bytes, %zu threads need %zu",
		    seg_name, remote_len, o->threads, region * o->threads);
	local = alloc_buffer(o->buffer_size);
	register_buffer(e, local, o->buffer_size);

	w = calloc(o->threads, sizeof(*w));
	if (!w)
		die("out of memory");
	for (size_t t = 0; t < o->threads; t++) {
		w[t] = (struct worker){
			.e = e,
			.seg = seg,
			.op = o->op,
			.batch_size = o->batch_size,
			.block_size = o->block_size,
			.region_off = t * region,
			.local = local + t * region,
			.remote = remote_addr + t * region,
			.target_view = target_buf ? target_buf + t * region : NULL,
			.verify = o->verify,
			.deadline = &deadline,
			.reqs = xmalloc(o->batch_size * sizeof(*w[t].reqs)),
		};
		for (size_t i = 0; i < o->batch_size; i++)
			w[t].reqs[i] = (struct xfer_request){
				.opcode = o->op,
				.source = w[t].local + i * o->block_size,
				.target_id = seg,
				.target_offset = w[t].remote + i * o->block_size,
				.length = o->block_size,
			};
		if (o->verify) {
			w[t].expect = xmalloc(region);
			fill_pattern(w[t].expect, w[t].region_off, region);
		}
	}

	cpu_init0 = xfer_engine_cpu_seconds(e);
	if (target)
		cpu_target0 = xfer_engine_cpu_seconds(target);
	clock_gettime(CLOCK_MONOTONIC, &start);
	deadline = deadline_after(o->duration_s);
	for (size_t t = 0; t < o->threads; t++) {
		ret = pthread_create(&w[t].tid, NULL, worker_main, &w[t]);
		if (ret)
			die("pthread_create: %s", strerror(ret));
	}
	for (size_t t = 0; t < o->threads; t++)
		pthread_join(w[t].tid, NULL);
	clock_gettime(CLOCK_MONOTONIC, &end);

	r.duration_s = ts_diff(&start, &end);
	r.cpu_init_s = xfer_engine_cpu_seconds(e) - cpu_init0;
	if (target) {
		r.have_target = true;
		r.cpu_target_s = xfer_engine_cpu_seconds(target) - cpu_target0;
	}
	for (size_t t = 0; t < o->threads; t++) {
		r.batches += w[t].nlat;
		r.cpu_init_s += w[t].cpu_s;
	}
	r.bytes = r.batches * region;
	lat = xmalloc((r.batches ? r.batches : 1) * sizeof(*lat));
	for (size_t t = 0, n = 0; t < o->threads; n += w[t++].nlat)
		if (w[t].nlat) /* lat_us stays NULL for a thread that ran none */
			memcpy(lat + n, w[t].lat_us, w[t].nlat * sizeof(*lat));
	qsort(lat, r.batches, sizeof(*lat), cmp_double);
	r.p50 = percentile(lat, r.batches, 0.50);
	r.p99 = percentile(lat, r.batches, 0.99);
	r.p999 = percentile(lat, r.batches, 0.999);
	report(o, &r, e);

	free(lat);
	for (size_t t = 0; t < o->threads; t++) {
		free(w[t].reqs);
		free(w[t].expect);
		free(w[t].lat_us);
	}
	free(w);
	ret = xfer_segment_close(e, seg);
	if (ret)
		die_api(e, "xfer_segment_close", ret);
	xfer_engine_free(e);
	if (target)
		xfer_engine_free(target);
	free(local);
	free(target_buf);
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
	      "  --json                            one JSON line instead of text\n",
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

static void parse_args(int argc, char **argv, struct opts *o)
{
	enum {
		O_MODE = 256, O_OPERATION, O_PROTOCOL, O_METADATA, O_NAME,
		O_SEGMENT, O_BATCH, O_BLOCK, O_BUFFER, O_DURATION, O_THREADS,
		O_VERIFY, O_JSON, O_WORKERS, O_BIND, O_RPC_PORT, O_HELP,
		O_DEVICE, O_AUTO, O_MATRIX,
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
		{ NULL, 0, NULL, 0 },
	};
	char *end;
	int c;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case O_MODE:
			if (!strcmp(optarg, "loopback"))
				o->mode = MODE_LOOPBACK;
			else if (!strcmp(optarg, "target"))
				o->mode = MODE_TARGET;
			else if (!strcmp(optarg, "initiator"))
				o->mode = MODE_INITIATOR;
			else
				die("--mode: '%s' is not target, initiator or loopback",
				    optarg);
			break;
		case O_OPERATION:
			if (!strcmp(optarg, "read"))
				o->op = XFER_READ;
			else if (!strcmp(optarg, "write"))
				o->op = XFER_WRITE;
			else
				die("--operation: '%s' is not read or write", optarg);
			break;
		case O_PROTOCOL:
			if (strcmp(optarg, "tcp") && strcmp(optarg, "rdma"))
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

int main(int argc, char **argv)
{
	struct opts o = {
		.mode = MODE_LOOPBACK,
		.op = XFER_READ,
		.rpc_port = -1,
		.workers = -1,
		.batch_size = 128,
		.block_size = 65536,
		.duration_s = 10,
		.threads = 1,
	};
	size_t need;

	parse_args(argc, argv, &o);
	if (!o.protocol) {
		/* for the report: what the config gives the engines */
		struct xfer_config cfg;
		int ret = xfer_config_init(&cfg);

		if (ret)
			die_api(NULL, "xfer_config_init", ret);
		o.protocol = cfg.protocol;
	}
	if (__builtin_mul_overflow(o.batch_size, o.block_size, &need) ||
	    __builtin_mul_overflow(need, o.threads, &need))
		die("batch_size * block_size * threads overflows");
	if (o.buffer_size == 0) {
		if (o.mode == MODE_LOOPBACK) {
			if (__builtin_mul_overflow(need, 2, &o.buffer_size))
				die("batch_size * block_size * threads overflows");
		} else {
			o.buffer_size = need > (1ul << 30) ? need : 1ul << 30;
		}
	}

	switch (o.mode) {
	case MODE_TARGET:
		run_target(&o);
		break;
	case MODE_INITIATOR:
		if (!o.segment_id)
			die("--mode initiator needs --segment_id (the target's segment name)");
		/* fall through */
	case MODE_LOOPBACK:
		if (o.buffer_size < need)
			die("--buffer_size %zu is below batch_size * block_size * threads = %zu",
			    o.buffer_size, need);
		if (o.duration_s <= 0)
			die("--duration must be > 0 in %s mode", mode_names[o.mode]);
		if (o.mode == MODE_LOOPBACK && !o.local_server_name)
			o.local_server_name = "127.0.0.1";
		run_initiator(&o);
		break;
	}
	free(o.matrix);
	return 0;
}
