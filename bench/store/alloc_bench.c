/*
 * xfer-store-alloc-bench: the store's segment allocator alone, on the
 * mixed workload of KV-cache blocks (4 KiB 70 %, 256 KiB 20 %, 3 MiB
 * 10 %).
 *
 *   xfer-store-alloc-bench [--capacity BYTES] [--ops N] [--seed N]
 *
 * First it fills an empty segment until the first refusal (utilisation
 * then: how much a fresh segment holds). Then, for --ops allocations, a
 * refused one releases a random live allocation and tries again, as
 * eviction would: the utilisation at each refusal is averaged (how full
 * a fragmented segment gets), and the time of every allocation and
 * release is measured in one run of the loop (the random draws are made
 * beforehand), as nanoseconds per call.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/alloc_internal.h"

static uint64_t rng = 88172645463325252ull;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static uint64_t mixed_size(uint64_t r)
{
	r %= 100;
	return r < 70 ? 4096 : r < 90 ? 256 << 10 : 3 << 20;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int parse_u64(const char *s, uint64_t *v)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 0);
	return errno || end == s || *end || !*v ? -1 : 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "capacity", required_argument, NULL, 'c' },
		{ "ops", required_argument, NULL, 'n' },
		{ "seed", required_argument, NULL, 's' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t cap = 16ull << 30, ops = 2000000, off, *draws;
	uint64_t gets = 0, releases = 0, refusals = 0, nlive = 0, maxlive;
	double util_sum = 0, t0, t;
	struct store_alloc *a;
	uint32_t *live, id;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if ((c != 'c' && c != 'n' && c != 's') ||
		    parse_u64(optarg, c == 'c' ? &cap : c == 'n' ? &ops : &rng)) {
			fprintf(stderr, "usage: xfer-store-alloc-bench "
				"[--capacity BYTES] [--ops N] [--seed N]\n");
			return 2;
		}
	}
	maxlive = cap / 4096 + 1;
	if (maxlive > UINT32_MAX / 4)
		maxlive = UINT32_MAX / 4;
	a = store_alloc_new(cap, 64, (uint32_t)maxlive);
	live = malloc(maxlive * sizeof(*live));
	draws = malloc(2 * ops * sizeof(*draws));
	if (!a || !live || !draws) {
		fprintf(stderr, "xfer-store-alloc-bench: %s\n", strerror(errno));
		return 1;
	}

	while (!store_alloc_get(a, mixed_size(next_rand()), &off, &live[nlive]))
		nlive++;
	printf("fill: %" PRIu64 " allocations, %.2f %% of %" PRIu64
	       " MiB used at the first refusal\n", nlive,
	       100.0 * (double)store_alloc_used(a) / (double)cap, cap >> 20);

	for (uint64_t i = 0; i < 2 * ops; i++)
		draws[i] = next_rand();
	t0 = now_s();
	for (uint64_t i = 0, d = 0; i < ops; i++) {
		uint64_t len = mixed_size(draws[2 * i]);

		while (store_alloc_get(a, len, &off, &id)) {
			uint64_t k = (draws[2 * i + 1] + d++) % nlive;

			util_sum += (double)store_alloc_used(a) / (double)cap;
			refusals++;
			store_alloc_release(a, live[k]);
			live[k] = live[--nlive];
			releases++;
		}
		live[nlive++] = id;
		gets++;
	}
	t = now_s() - t0;
	printf("churn: %" PRIu64 " allocations, %" PRIu64 " releases, "
	       "%.1f ns per call, %.2f %% used at a refusal (mean of %"
	       PRIu64 ")\n", gets, releases,
	       t * 1e9 / (double)(gets + releases + refusals),
	       refusals ? 100.0 * util_sum / (double)refusals : 100.0,
	       refusals);
	free(draws);
	free(live);
	store_alloc_free(a);
	return 0;
}
