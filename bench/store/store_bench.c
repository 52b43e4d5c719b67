/*
 * xfer-store-bench: the store's client (include/xfer/store.h) between two
 * client processes on this host over loopback TCP, against what the
 * same processes' engines move alone.
 *
 *   xfer-store-bench [--master=host:port] [--seconds=1] [--sizes=...]
 *                    [--batches=1,16,128] [--modes=zcopy,plain] ...
 *
 * Without --master it runs xfer-stored (beside this program) on a free
 * port. A child process lends the segment (--segment_size) every replica
 * lands in; this process puts and gets (one replica), so every byte
 * crosses between the two. For each value size and batch size, each mode
 * (zcopy: batch calls from and into registered memory, Mooncake's
 * batch_put_from / batch_get_into; plain: staged through --buffer_size,
 * Mooncake's put / get) and each of put and get, it runs one call at a
 * time for --seconds: calls/s, GB/s, p50 and p99 of a call's time, and
 * this process's CPU seconds per GB moved. The reference is one xfer
 * batch of the same requests at a time, WRITE (for put) or READ (for get)
 * straight into the child's segment with this process's engine: the
 * ratio is the store's GB/s over the engine's (those runs write over the
 * first bytes of the segment: the store's objects there are not read
 * back). Puts use new keys each time (the master evicts the oldest when
 * the segment is full; where it finds no room that large the put gets
 * -200, and the bench clears the store, untimed, and says so on the
 * line; the segment is written over once at the start, so puts do not
 * measure the holder's first touch of its pages); gets read one batch of
 * keys put beforehand.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <xfer/store.h>

#include "bench/store/stored_run.h"
#include "util/gflags_internal.h"

#define LAT_MAX (1 << 20)      /* calls timed per run */
#define LIST_MAX 16

struct opts {
	const char *master, *sizes, *batches, *modes;
	double seconds;
	long long segment, buffer, max_batch;
	bool help;
};

struct bench {
	struct opts o;
	struct xfer_kv *kv;
	struct xfer_engine *e;
	int64_t seg;                   /* the holder's, opened */
	uint64_t seg_addr;
	uint8_t *src, *dst;
	size_t buf_len;
	char (*names)[48];
	const char **keys;
	struct iovec *iov;
	int64_t *res;
	double *lat;
	unsigned run;                  /* makes put keys new */
};

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "xfer-store-bench: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/* A comma list of positive numbers (a K, M or G suffix: KiB ...). */
static int parse_list(const char *s, uint64_t *v)
{
	int n = 0;

	while (*s && n < LIST_MAX) {
		char *end;
		uint64_t x = strtoull(s, &end, 10);

		if (end == s || !x)
			die("bad number in '%s'", s);
		if (*end == 'K' || *end == 'M' || *end == 'G')
			x <<= *end == 'K' ? 10 : *end == 'M' ? 20 : 30, end++;
		v[n++] = x;
		if (*end && *end != ',')
			die("bad list at '%s'", end);
		s = *end ? end + 1 : end;
	}
	return n;
}

/* ---- the processes ---- */

static pid_t stored_pid, holder_pid;
static int holder_fd = -1;             /* its close lets the holder go */

static void stop_children(void)
{
	if (holder_fd >= 0)
		close(holder_fd);
	if (holder_pid > 0)
		waitpid(holder_pid, NULL, 0);
	if (stored_pid > 0) {
		kill(stored_pid, SIGTERM);
		waitpid(stored_pid, NULL, 0);
	}
}

/* xfer-stored beside this program, on a free port of 127.0.0.1. */
static void start_master(char *addr, size_t len)
{
	char err[PATH_MAX + 64];

	stored_pid = bench_stored_start(NULL, addr, len, err, sizeof(err));
	if (stored_pid < 0)
		die("%s", err);
}

static struct xfer_kv *client(const char *master, uint64_t seg,
			      uint64_t buf)
{
	struct xfer_config *cfg = xfer_config_new();
	struct xfer_kv *kv = NULL;

	if (cfg && !xfer_config_set(cfg, "bind_addr", "127.0.0.1") &&
	    !xfer_config_set(cfg, "local_server_name", "127.0.0.1"))
		kv = xfer_kv_new(NULL, cfg, master, seg, buf);
	xfer_config_free(cfg);
	return kv;
}

/* The child that lends its segment: says its engine's name, then holds
 * until this process closes the pipe. */
static void start_holder(const struct opts *o, char *name, size_t len)
{
	int up[2], down[2];
	ssize_t n;

	if (pipe(up) || pipe(down))
		die("pipe: %s", strerror(errno));
	holder_pid = fork();
	if (holder_pid < 0)
		die("fork: %s", strerror(errno));
	if (!holder_pid) {
		struct xfer_kv *kv = client(o->master, (uint64_t)o->segment,
					    1 << 20);
		const char *me = kv ? xfer_engine_name(xfer_kv_engine(kv)) :
				 "";
		char c;

		close(up[0]);
		close(down[1]);
		if (write(up[1], me, strlen(me) + 1) < 0 || !kv)
			_exit(1);
		while (read(down[0], &c, 1) > 0)
			;
		_exit(xfer_kv_free(kv) ? 1 : 0);
	}
	close(up[1]);
	close(down[0]);
	n = read(up[0], name, len - 1);
	if (n <= 1)
		die("the holder process could not start its client");
	name[n] = 0;
	close(up[0]);
	holder_fd = down[1];
}

/* ---- one run ---- */

struct result {
	uint64_t calls, bytes, cleared;
	double secs, cpu, p50, p99;
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* One call of @p op ('p' put, 'g' get, 'W' WRITE, 'R' READ) of @p n
 * values of @p len bytes, keys named after @p tag ('p': new ones each
 * time). @return 0, or the first error. */
static int64_t one_call(struct bench *b, char op, bool zcopy, size_t n,
			size_t len, char tag)
{
	unsigned flags = zcopy ? XFER_KV_ZERO_COPY : 0;

	for (size_t i = 0; i < n; i++) {
		snprintf(b->names[i], sizeof(b->names[i]), "%c-%zu-%u-%zu",
			 tag, len, tag == 'p' ? b->run++ : 0, i);
		b->iov[i] = (struct iovec){
			(op == 'g' || op == 'R' ? b->dst : b->src) + i * len,
			len };
	}
	if (op == 'W' || op == 'R') {
		struct xfer_batch *bt = xfer_batch_new(b->e, n);
		struct xfer_request *req = calloc(n, sizeof(*req));
		int64_t ret = -ENOMEM;

		for (size_t i = 0; req && bt && i < n; i++)
			req[i] = (struct xfer_request){
				op == 'W' ? XFER_WRITE : XFER_READ,
				b->iov[i].iov_base, b->seg,
				b->seg_addr + i * len, len };
		if (req && bt && !xfer_batch_submit(bt, req, n) &&
		    !xfer_batch_wait(bt, -1)) {
			struct xfer_task_status st;

			ret = 0;
			for (size_t i = 0; i < n && !ret; i++)
				if (xfer_batch_status(bt, i, &st) ||
				    st.status != XFER_COMPLETED)
					ret = -EIO;
		}
		free(req);
		if (bt)
			xfer_batch_free(bt);
		return ret;
	}
	if (n == 1 && !zcopy)
		return op == 'p' ? xfer_kv_put(b->kv, b->keys[0], b->src, len,
					       NULL) :
		       xfer_kv_get(b->kv, b->keys[0], b->dst, len) ==
		       (int64_t)len ? 0 : -EIO;
	if (op == 'p')
		return xfer_kv_batch_put(b->kv, n, b->keys, b->iov, NULL,
					 flags, NULL, b->res);
	return xfer_kv_batch_get(b->kv, n, b->keys, b->iov, NULL, flags,
				 b->res);
}

static struct result run(struct bench *b, char op, bool zcopy, size_t n,
			 size_t len)
{
	struct result r = { 0 };
	double t0, c0, t;
	int64_t ret;
	size_t nlat = 0;

	/* the keys a get reads; and a first call, untimed (connections) */
	if (op == 'g' && (ret = one_call(b, 'p', true, n, len, 'g')))
		die("put of the keys to get: %lld", (long long)ret);
	if (op == 'p')
		xfer_kv_remove_all(b->kv, true);
	if ((ret = one_call(b, op, zcopy, n, len, op)))
		die("%c of %zu x %zu: %lld", op, n, len, (long long)ret);
	c0 = cpu_s();
	t0 = now_s();
	do {
		t = now_s();
		ret = one_call(b, op, zcopy, n, len, op);
		if (ret == XFER_KV_NO_AVAILABLE_HANDLE && op == 'p') {
			/* eviction found no room that large: clear the
			 * store, untimed, and go on */
			xfer_kv_remove_all(b->kv, true);
			t0 += now_s() - t;
			r.cleared++;
			continue;
		}
		if (ret)
			die("%c of %zu x %zu: %lld", op, n, len,
			    (long long)ret);
		if (nlat < LAT_MAX)
			b->lat[nlat++] = now_s() - t;
		r.calls++;
	} while (now_s() - t0 < b->o.seconds || r.calls < 3);
	r.secs = now_s() - t0;
	r.cpu = cpu_s() - c0;
	r.bytes = r.calls * n * len;
	qsort(b->lat, nlat, sizeof(*b->lat), cmp_double);
	r.p50 = b->lat[nlat / 2] * 1e6;
	r.p99 = b->lat[nlat * 99 / 100] * 1e6;
	return r;
}

static void report(const char *op, const char *mode, size_t len, size_t n,
		   const struct result *r, const struct result *ref)
{
	double gbs = (double)r->bytes / r->secs / 1e9;
	double ref_gbs = (double)ref->bytes / ref->secs / 1e9;

	printf("%-4s %-6s %9zu %6zu %10.0f %8.3f %9.1f %9.1f %8.2f %8.3f "
	       "%6.2f", op, mode, len, n, (double)r->calls / r->secs, gbs,
	       r->p50, r->p99, r->cpu / ((double)r->bytes / 1e9), ref_gbs,
	       gbs / ref_gbs);
	if (r->cleared)
		printf("  (-200: cleared %llu times)",
		       (unsigned long long)r->cleared);
	printf("\n");
	fflush(stdout);
}

/* ---- setup ---- */

static void parse(int argc, char **argv, struct opts *o)
{
	const struct xfer_gflag flags[] = {
		{ "master", XFER_GF_STRING, &o->master, 0, 0,
		  "xfer-stored's host:port (default: run one)" },
		{ "seconds", XFER_GF_DOUBLE, &o->seconds, 0, 86400,
		  "time of each run" },
		{ "sizes", XFER_GF_STRING, &o->sizes, 0, 0,
		  "value sizes in bytes, K/M/G suffixes" },
		{ "batches", XFER_GF_STRING, &o->batches, 0, 0,
		  "keys per call" },
		{ "modes", XFER_GF_STRING, &o->modes, 0, 0,
		  "zcopy, plain or both" },
		{ "segment_size", XFER_GF_INT, &o->segment, 1 << 20,
		  1ll << 40, "bytes the holder process lends" },
		{ "buffer_size", XFER_GF_INT, &o->buffer, 64, 1ll << 40,
		  "this client's staging buffer (plain mode)" },
		{ "max_batch_bytes", XFER_GF_INT, &o->max_batch, 1,
		  1ll << 40, "runs whose batch would be larger are skipped" },
		{ "help", XFER_GF_BOOL, &o->help, 0, 0, "this text" },
		{ NULL },
	};
	char err[256];
	int i = xfer_gflags_parse(argc, argv, flags, err, sizeof(err));

	if (i < 0)
		die("%s (see --help)", err);
	if (o->help) {
		xfer_gflags_usage(stdout, "usage: xfer-store-bench "
				  "[--flag=value]...\n", flags);
		exit(0);
	}
	if (o->seconds <= 0)
		die("--seconds must be positive");
}

/* Open the holder's segment and find its lent buffer. */
static void find_segment(struct bench *b, const char *holder)
{
	uint64_t addr, len;

	b->seg = xfer_segment_open(b->e, holder);
	if (b->seg < 0)
		die("cannot open %s: %s", holder, strerror((int)-b->seg));
	for (size_t i = 0; !xfer_segment_buffer(b->e, b->seg, i, &addr, &len,
						NULL); i++)
		if (len == (uint64_t)b->o.segment) {
			b->seg_addr = addr;
			return;
		}
	die("no buffer of %lld bytes in %s", b->o.segment, holder);
}

/* Write over the whole segment once, so that puts measure steady state,
 * not the holder's first touch of its pages. */
static void warm_segment(struct bench *b)
{
	size_t chunk = b->buf_len < (64 << 20) ? b->buf_len : 64 << 20;
	uint64_t addr = b->seg_addr;

	for (uint64_t off = 0; off < (uint64_t)b->o.segment; off += chunk) {
		size_t len = (uint64_t)b->o.segment - off < chunk ?
			     (size_t)((uint64_t)b->o.segment - off) : chunk;

		b->seg_addr = addr + off;
		if (one_call(b, 'W', true, 1, len, 'W'))
			die("cannot write over the segment");
	}
	b->seg_addr = addr;
}

int main(int argc, char **argv)
{
	struct bench b = { .o = { .seconds = 1, .sizes = "4K,64K,1M,16M",
				  .batches = "1,16,128",
				  .modes = "zcopy,plain",
				  .segment = 512 << 20, .buffer = 64 << 20,
				  .max_batch = 256 << 20 } };
	uint64_t sizes[LIST_MAX], batches[LIST_MAX];
	int nsizes, nbatches;
	char master[64], holder[256];
	size_t max_n = 1;

	signal(SIGPIPE, SIG_IGN);
	parse(argc, argv, &b.o);
	nsizes = parse_list(b.o.sizes, sizes);
	nbatches = parse_list(b.o.batches, batches);
	for (int i = 0; i < nbatches; i++)
		max_n = batches[i] > max_n ? batches[i] : max_n;
	if (!b.o.master) {
		start_master(master, sizeof(master));
		b.o.master = master;
	}
	atexit(stop_children);
	start_holder(&b.o, holder, sizeof(holder));
	b.kv = client(b.o.master, 0, (uint64_t)b.o.buffer);
	if (!b.kv)
		die("client of %s: %s", b.o.master, strerror(errno));
	b.e = xfer_kv_engine(b.kv);
	find_segment(&b, holder);
	b.buf_len = (size_t)b.o.max_batch;
	b.src = aligned_alloc(4096, b.buf_len);
	b.dst = aligned_alloc(4096, b.buf_len);
	b.names = calloc(max_n, sizeof(*b.names));
	b.keys = calloc(max_n, sizeof(*b.keys));
	b.iov = calloc(max_n, sizeof(*b.iov));
	b.res = calloc(max_n, sizeof(*b.res));
	b.lat = calloc(LAT_MAX, sizeof(*b.lat));
	if (!b.src || !b.dst || !b.names || !b.keys || !b.iov || !b.res ||
	    !b.lat)
		die("out of memory");
	memset(b.src, 0x5a, b.buf_len);
	memset(b.dst, 0, b.buf_len);
	for (size_t i = 0; i < max_n; i++)
		b.keys[i] = b.names[i];
	if (xfer_kv_register_buffer(b.kv, b.src, b.buf_len) ||
	    xfer_kv_register_buffer(b.kv, b.dst, b.buf_len))
		die("cannot register the buffers");
	warm_segment(&b);
	printf("xfer-store-bench: master %s, segment of %s (%lld bytes), "
	       "one replica, TCP over loopback\n", b.o.master, holder,
	       b.o.segment);
	printf("%-4s %-6s %9s %6s %10s %8s %9s %9s %8s %8s %6s\n", "op",
	       "mode", "value", "batch", "calls/s", "GB/s", "p50 us",
	       "p99 us", "cpu s/GB", "engine", "ratio");
	for (int s = 0; s < nsizes; s++)
		for (int k = 0; k < nbatches; k++) {
			size_t len = sizes[s], n = batches[k];
			struct result wr, rd, r;

			if (len * n > b.buf_len ||
			    len * n > (uint64_t)b.o.segment / 2)
				continue;
			wr = run(&b, 'W', true, n, len);
			rd = run(&b, 'R', true, n, len);
			for (int m = 0; m < 2; m++) {
				const char *mode = m ? "plain" : "zcopy";

				if (!strstr(b.o.modes, mode))
					continue;
				r = run(&b, 'p', !m, n, len);
				report("put", mode, len, n, &r, &wr);
				r = run(&b, 'g', !m, n, len);
				report("get", mode, len, n, &r, &rd);
			}
		}
	xfer_kv_free(b.kv);
	return 0;
}
