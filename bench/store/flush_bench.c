/*
 * xfer-store-flush-bench: does the lazy flush to the slower tier keep up
 * with a stream of puts? (docs/STORE.md, "The slower tier")
 *
 *   xfer-store-flush-bench --master=HOST:PORT --dir=DIR [--seconds=5]
 *                          [--size=4194304] [--keys=64] [--rate=1e9]
 *                          [--mode=lazy|eager|none]
 *
 * One client (its own segment, 2 GiB) upserts --keys keys in turn, each
 * --size bytes zero-copy from registered memory, for --seconds, at most
 * --rate bytes/s (0: as fast as it can), each put flushed as --mode says
 * into DIR (a tmpfs such as /dev/shm to measure the flush path rather
 * than a disk). Then it frees the client, which waits until the lazy
 * thread has written everything queued. It prints the put stream's
 * GB/s, how long the drain took, and the flush's GB/s over the whole
 * (bytes over the stream's time plus the drain): the flush keeps up
 * when the put rate is the one asked and the drain is short.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <xfer/store.h>

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void usage(void)
{
	fprintf(stderr, "usage: xfer-store-flush-bench --master=HOST:PORT "
		"--dir=DIR [--seconds=5] [--size=BYTES] [--keys=N] "
		"[--rate=BYTES_PER_S] [--mode=lazy|eager|none]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "master", 1, NULL, 'm' }, { "dir", 1, NULL, 'd' },
		{ "seconds", 1, NULL, 's' }, { "size", 1, NULL, 'z' },
		{ "keys", 1, NULL, 'k' }, { "rate", 1, NULL, 'r' },
		{ "mode", 1, NULL, 'o' }, { NULL, 0, NULL, 0 },
	};
	const char *master = NULL, *dir = NULL, *mode = "lazy";
	double seconds = 5, rate = 1e9, t0, t1, t2, ahead;
	size_t size = 4 << 20, keys = 64, n = 0;
	struct xfer_kv_replicate rc = { .replica_num = 1 };
	struct xfer_config *cfg;
	struct xfer_kv *kv;
	char *buf;
	int c, ret;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'm': master = optarg; break;
		case 'd': dir = optarg; break;
		case 's': seconds = atof(optarg); break;
		case 'z': size = strtoull(optarg, NULL, 0); break;
		case 'k': keys = strtoull(optarg, NULL, 0); break;
		case 'r': rate = atof(optarg); break;
		case 'o': mode = optarg; break;
		default: usage();
		}
	}
	rc.flush = !strcmp(mode, "lazy") ? XFER_KV_FLUSH_LAZY :
		   !strcmp(mode, "eager") ? XFER_KV_FLUSH_EAGER :
		   !strcmp(mode, "none") ? XFER_KV_FLUSH_NONE : 99;
	if (!master || !dir || !size || !keys || rc.flush == 99)
		usage();
	cfg = xfer_config_new();
	if (!cfg || xfer_config_set(cfg, "bind_addr", "127.0.0.1") ||
	    xfer_config_set(cfg, "local_server_name", "127.0.0.1") ||
	    !(kv = xfer_kv_new(NULL, cfg, master, 2ull << 30, 0))) {
		fprintf(stderr, "xfer-store-flush-bench: no client of %s\n",
			master);
		return 1;
	}
	xfer_config_free(cfg);
	if ((ret = xfer_kv_set_root_fs_dir(kv, dir))) {
		fprintf(stderr, "xfer-store-flush-bench: %s: %s\n", dir,
			strerror(-ret));
		return 1;
	}
	if (!(buf = aligned_alloc(4096, size)) ||
	    xfer_kv_register_buffer(kv, buf, size))
		return 1;
	memset(buf, 0x5a, size);
	t0 = now_s();
	while ((t1 = now_s()) - t0 < seconds) {
		char key[48];

		/* at most --rate: wait while ahead of it */
		ahead = rate > 0 ? (double)n * (double)size / rate -
				   (t1 - t0) : 0;
		if (ahead > 0)
			usleep((useconds_t)(ahead * 1e6));
		snprintf(key, sizeof(key), "flush-bench-%zu", n % keys);
		buf[0] = (char)n;
		ret = xfer_kv_upsert_from(kv, key, buf, size, &rc);
		if (ret) {
			fprintf(stderr, "xfer-store-flush-bench: put: %d\n",
				ret);
			return 1;
		}
		n++;
	}
	t1 = now_s();
	xfer_kv_free(kv);      /* waits for the lazy thread's last write */
	t2 = now_s();
	printf("mode %s, %zu puts of %zu bytes over %zu keys to %s\n", mode,
	       n, size, keys, dir);
	printf("put stream  %.3f GB/s over %.2f s (asked %.3f GB/s)\n",
	       (double)n * (double)size / (t1 - t0) / 1e9, t1 - t0,
	       rate / 1e9);
	printf("drain       %.3f s after the last put\n", t2 - t1);
	printf("flush       %.3f GB/s over the stream and drain\n",
	       (double)n * (double)size / (t2 - t0) / 1e9);
	free(buf);
	return 0;
}
