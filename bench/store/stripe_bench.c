/*
 * xfer-store-stripe-bench: a get (and a put) of one large object striped
 * over several holders' segments against the same call on an object
 * whole in one holder, in one run, over loopback TCP.
 *
 *   xfer-store-stripe-bench [--size=67108864] [--shard=16777216]
 *                           [--holders=3] [--calls=9] [--workers=0]
 *
 * It runs two xfer-stored beside this program: A with
 * --dram_shard_size=--shard, B without. --holders child processes each
 * lend a segment to A; the first also lends one to B. This process lends
 * nothing: it puts one object of --size bytes to each master (so every
 * byte crosses to other processes: A's is cut into a shard per holder,
 * B's lies whole in one), then times --calls zero-copy gets of each,
 * alternating, and as many puts of new keys (each removed after): the
 * median of each, in GB/s, and striped over whole. Every get's bytes
 * are checked once. On one host the holders share its cores with the
 * reader: the gain is bounded by the cores that copy bytes, not by
 * NICs.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <xfer/store.h>

#include "bench/store/stored_run.h"
#include "util/gflags_internal.h"

#define HOLDERS_MAX 8

static pid_t stored_pid[2], holder_pid[HOLDERS_MAX];
static int holder_fd[HOLDERS_MAX];
static int nholders;

static void stop_children(void)
{
	for (int i = 0; i < nholders; i++) {
		close(holder_fd[i]);
		waitpid(holder_pid[i], NULL, 0);
	}
	for (int i = 0; i < 2; i++)
		if (stored_pid[i] > 0) {
			kill(stored_pid[i], SIGTERM);
			waitpid(stored_pid[i], NULL, 0);
		}
}

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "xfer-store-stripe-bench: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	stop_children();
	exit(1);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* xfer-stored beside this program on a free port of 127.0.0.1, with
 * @p shard_flag (or none): its address into @p addr. */
static pid_t start_master(const char *shard_flag, char *addr, size_t len)
{
	char err[PATH_MAX + 64];
	pid_t pid = bench_stored_start(shard_flag, addr, len, err,
				       sizeof(err));

	if (pid < 0)
		die("%s", err);
	return pid;
}

static struct xfer_kv *client(const char *master, uint64_t seg,
			      const char *workers)
{
	struct xfer_config *cfg = xfer_config_new();
	struct xfer_kv *kv = NULL;

	if (cfg && !xfer_config_set(cfg, "bind_addr", "127.0.0.1") &&
	    !xfer_config_set(cfg, "local_server_name", "127.0.0.1") &&
	    (!workers || !xfer_config_set(cfg, "workers", workers)))
		kv = xfer_kv_new(NULL, cfg, master, seg, 1 << 20);
	xfer_config_free(cfg);
	return kv;
}

/* Holder @p i: lends @p seg bytes to master @p a (and @p bseg to @p b if
 * not NULL), says it is up, holds until this process closes the pipe. */
static void start_holder(int i, const char *a, const char *b, uint64_t seg,
			 uint64_t bseg, const char *workers)
{
	int up[2], down[2];
	char c;

	if (pipe(up) || pipe(down))
		die("pipe: %s", strerror(errno));
	holder_pid[i] = fork();
	if (holder_pid[i] < 0)
		die("fork: %s", strerror(errno));
	if (!holder_pid[i]) {
		struct xfer_kv *ka = client(a, seg, workers);
		struct xfer_kv *kb = b ? client(b, bseg, workers) : NULL;

		close(up[0]);
		close(down[1]);
		/* the others' pipes: each ends when this process closes it */
		for (int k = 0; k < i; k++)
			close(holder_fd[k]);
		c = ka && (!b || kb) ? 'y' : 'n';
		if (write(up[1], &c, 1) < 0 || c != 'y')
			_exit(1);
		while (read(down[0], &c, 1) > 0)
			;
		_exit((xfer_kv_free(ka) | (kb ? xfer_kv_free(kb) : 0)) ? 1 :
		      0);
	}
	close(up[1]);
	close(down[0]);
	if (read(up[0], &c, 1) != 1 || c != 'y')
		die("holder %d could not start its clients", i);
	close(up[0]);
	holder_fd[i] = down[1];
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return a < b ? -1 : a > b;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return v[n / 2];
}

int main(int argc, char **argv)
{
	long long size = 64ll << 20, shard = 16ll << 20, holders = 3;
	long long calls = 9, workers = 0;
	const struct xfer_gflag flags[] = {
		{ "size", XFER_GF_INT, &size, 1, 1ll << 34,
		  "object bytes (67108864)" },
		{ "shard", XFER_GF_INT, &shard, 65536, 1ll << 34,
		  "master A's --dram_shard_size (16777216)" },
		{ "holders", XFER_GF_INT, &holders, 1, HOLDERS_MAX,
		  "processes lending a segment to A (3)" },
		{ "calls", XFER_GF_INT, &calls, 1, 1001,
		  "gets and puts timed of each (9)" },
		{ "workers", XFER_GF_INT, &workers, 0, 64,
		  "each engine's workers (0: its default)" },
		{ NULL, 0, NULL, 0, 0, NULL },
	};
	struct xfer_kv_replica_desc d[XFER_KV_REPLICA_MAX];
	char a[64], b[64], sflag[64], wstr[16], err[256], key[32];
	double *tg[2], *tp[2], g[2], p[2];
	struct xfer_kv *kv[2];
	const char *w = NULL;
	uint8_t *val, *out;
	int i = xfer_gflags_parse(argc, argv, flags, err, sizeof(err));
	int n;

	if (i < 0 || i < argc) {
		fprintf(stderr, "%s\n", i < 0 ? err : "unexpected argument");
		return 2;
	}
	if (workers) {
		snprintf(wstr, sizeof(wstr), "%lld", workers);
		w = wstr;
	}
	signal(SIGPIPE, SIG_IGN);
	snprintf(sflag, sizeof(sflag), "--dram_shard_size=%lld", shard);
	stored_pid[0] = start_master(sflag, a, sizeof(a));
	stored_pid[1] = start_master("--client_ttl=10", b, sizeof(b));
	nholders = (int)holders;
	for (i = 0; i < nholders; i++)
		/* room for the object and a put's, beside it */
		start_holder(i, a, i ? NULL : b, (uint64_t)size /
			     (uint64_t)holders * 2 + (16 << 20),
			     (uint64_t)size * 2 + (16 << 20), w);
	kv[0] = client(a, 0, w);
	kv[1] = client(b, 0, w);
	val = malloc((size_t)size);
	out = malloc((size_t)size);
	for (i = 0; i < 2; i++) {
		tg[i] = calloc((size_t)calls, sizeof(double));
		tp[i] = calloc((size_t)calls, sizeof(double));
	}
	if (!kv[0] || !kv[1] || !val || !out || !tg[1] || !tp[1])
		die("no clients or no memory");
	for (long long k = 0; k < size; k++)
		val[k] = (uint8_t)(k * 2654435761u >> 13);
	if (xfer_kv_register_buffer(kv[0], val, (size_t)size) ||
	    xfer_kv_register_buffer(kv[1], val, (size_t)size) ||
	    xfer_kv_register_buffer(kv[0], out, (size_t)size) ||
	    xfer_kv_register_buffer(kv[1], out, (size_t)size))
		die("cannot register the buffers");
	for (i = 0; i < 2; i++)
		if (xfer_kv_put_from(kv[i], "obj", val, (size_t)size, NULL))
			die("the first put failed");
	n = xfer_kv_get_replica_desc(kv[0], "obj", d);
	printf("striped object: %d buffers (shards %u)", n,
	       n > 0 ? d[0].shards : 0);
	printf(", whole one: %d\n", xfer_kv_get_replica_desc(kv[1], "obj", d));
	for (long long c = 0; c < calls; c++) {
		for (i = 0; i < 2; i++) {
			double t0 = now_s();
			int64_t r = xfer_kv_get_into(kv[i], "obj", out,
						     (size_t)size);

			tg[i][c] = now_s() - t0;
			if (r != size)
				die("get: %lld", (long long)r);
			if (!c && memcmp(out, val, (size_t)size))
				die("get: the bytes differ");
			snprintf(key, sizeof(key), "p%lld", c);
			t0 = now_s();
			r = xfer_kv_put_from(kv[i], key, val, (size_t)size,
					     NULL);
			tp[i][c] = now_s() - t0;
			if (r || xfer_kv_remove(kv[i], key, true))
				die("put: %lld", (long long)r);
		}
	}
	for (i = 0; i < 2; i++) {
		g[i] = size / median(tg[i], (int)calls) / 1e9;
		p[i] = size / median(tp[i], (int)calls) / 1e9;
	}
	printf("get %lld bytes: striped over %d %.2f GB/s, whole in one "
	       "%.2f GB/s, ratio %.2f (median of %lld)\n", size, nholders,
	       g[0], g[1], g[0] / g[1], calls);
	printf("put %lld bytes: striped over %d %.2f GB/s, whole in one "
	       "%.2f GB/s, ratio %.2f (median of %lld)\n", size, nholders,
	       p[0], p[1], p[0] / p[1], calls);
	xfer_kv_unregister_buffer(kv[0], val);
	xfer_kv_unregister_buffer(kv[1], val);
	xfer_kv_unregister_buffer(kv[0], out);
	xfer_kv_unregister_buffer(kv[1], out);
	xfer_kv_free(kv[0]);
	xfer_kv_free(kv[1]);
	fflush(stdout);
	stop_children();
	return 0;
}
