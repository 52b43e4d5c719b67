/*
 * Soak: mixed load through the public API for a while (make soak, under
 * ASan+UBSan; not in make test), then one summary line:
 *
 *   soak: S s, B batches, N bytes verified, E errors (...)
 *
 * One process of engines against PEERS peer processes, all finding each
 * other through an xfer-metad with a persist file:
 *  - THREADS threads submit batches of 1..8 requests to random peers:
 *    READs of a region each peer filled with a known pattern (checked),
 *    and WRITEs into a region of their own, read back and compared; some
 *    batches wait with xfer_batch_wait(), some through their callback;
 *    every few dozen batches a thread replaces its buffers (unregister,
 *    free, allocate, register);
 *  - a churn thread registers and unregisters short-lived buffers and
 *    copies between them through the own segment; each peer churns
 *    buffers of its own, so its descriptor keeps changing under the
 *    transfers;
 *  - the main thread SIGKILLs a random peer every few seconds and starts
 *    it again, and every half minute kills xfer-metad (SIGKILL or
 *    SIGTERM) and starts it again on the same port and file.
 * A request that overlaps the death of its peer may fail: that is counted
 * (interrupted), not an error. An error is a batch that fails, or bytes
 * that differ, while its peer lived throughout; a peer or xfer-metad that
 * dies unasked or exits with a sanitizer report; a callback that does not
 * come. The exit status is 0 only with no error.
 *
 *   soak [SECONDS]          (default $SOAK_SECONDS, else 600)
 *   soak --peer INDEX URL   (one peer; the soak starts these itself)
 *
 * This file holds main(), the state and the helpers; test/soak.h lists
 * the other parts.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test/helpers.h"
#include "test/soak.h"

struct soak_state soak;

void soak_error(const char *fmt, ...)
{
	unsigned long n = atomic_fetch_add(&soak.n.errors, 1);
	va_list ap;

	if (n >= MAX_ERRORS_SHOWN)
		return;
	va_start(ap, fmt);
	fprintf(stderr, "soak: error at %.1f s: ",
		(th_now_ms() - soak.start_ms) / 1000.0);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* ---- the pattern of a peer's static region: 8-byte words ---- */

static uint64_t word(uint64_t seed, uint64_t index)
{
	uint64_t z = seed * 0x9E3779B97F4A7C15ull + index + 1;

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

void soak_fill_words(void *buf, size_t len, uint64_t seed)
{
	uint64_t *w = buf;

	for (size_t i = 0; i < len / 8; i++)
		w[i] = word(seed, i);
}

long soak_check_words(const void *buf, size_t len, uint64_t seed,
		      uint64_t off)
{
	const uint64_t *w = buf;

	for (size_t i = 0; i < len / 8; i++)
		if (w[i] != word(seed, off / 8 + i))
			return (long)(i * 8);
	return -1;
}

void *soak_alloc(size_t len)
{
	return aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
}

uint64_t soak_rnd(uint64_t *state)
{
	*state += 0x9E3779B97F4A7C15ull;
	return word(*state, 0);
}

struct xfer_engine *soak_engine_new(const char *url, const char *name,
				    int workers)
{
	struct xfer_config *cfg = xfer_config_new();
	struct xfer_engine *e = NULL;
	char num[16];

	snprintf(num, sizeof(num), "%d", workers);
	if (cfg && !xfer_config_set(cfg, "metadata_server", url) &&
	    !xfer_config_set(cfg, "local_server_name", name) &&
	    !xfer_config_set(cfg, "bind_addr", "127.0.0.1") &&
	    !xfer_config_set(cfg, "workers", num) &&
	    !xfer_config_set(cfg, "transfer_timeout_ms", "10000"))
		e = xfer_engine_new(cfg);
	xfer_config_free(cfg);
	return e;
}

static int soak_main(int seconds)
{
	pthread_t workers[THREADS], churn;
	struct soak_worker w[THREADS];
	char name[32];
	int ret;

	signal(SIGPIPE, SIG_IGN);
	snprintf(soak.dir, sizeof(soak.dir), "/tmp/xfer-soak-XXXXXX");
	if (!mkdtemp(soak.dir) ||
	    readlink("/proc/self/exe", soak.self, sizeof(soak.self) - 1) <= 0) {
		perror("soak: setup");
		return 2;
	}
	snprintf(soak.persist, sizeof(soak.persist), "%s/store", soak.dir);
	ret = soak_metad_start();
	if (ret) {
		fprintf(stderr, "soak: xfer-metad (%s): %s\n", th_metad_path(),
			strerror(-ret));
		return 2;
	}
	snprintf(soak.url, sizeof(soak.url), "http://127.0.0.1:%u/metadata",
		 soak.metad_port);
	soak.e = soak_engine_new(soak.url, "soak-main", 2);
	if (!soak.e) {
		fprintf(stderr, "soak: engine: %s\n", strerror(errno));
		return 2;
	}
	for (int i = 0; i < PEERS; i++) {
		pthread_mutex_init(&soak.peers[i].lock, NULL);
		snprintf(name, sizeof(name), "soak-peer-%d", i);
		if ((ret = soak_peer_start(i)) ||
		    (soak.peers[i].seg = xfer_segment_open(soak.e, name)) < 0) {
			fprintf(stderr, "soak: peer %d: %s\n", i,
				strerror(ret ? -ret : (int)-soak.peers[i].seg));
			return 2;
		}
	}
	printf("soak: %d s, %d peers, %d threads, xfer-metad at %s\n",
	       seconds, PEERS, THREADS, soak.url);
	fflush(stdout);

	soak.start_ms = th_now_ms();
	for (int i = 0; i < THREADS; i++) {
		w[i] = (struct soak_worker){ .id = i, .state = 1000 + (uint64_t)i };
		pthread_create(&workers[i], NULL, soak_worker, &w[i]);
	}
	pthread_create(&churn, NULL, soak_churn, NULL);
	soak_chaos(soak.start_ms + (int64_t)seconds * 1000);
	atomic_store(&soak.stop, true);
	pthread_join(churn, NULL);
	for (int i = 0; i < THREADS; i++)
		pthread_join(workers[i], NULL);
	soak.end_ms = th_now_ms();

	for (int i = 0; i < PEERS; i++) {
		xfer_segment_close(soak.e, soak.peers[i].seg);
		pthread_mutex_lock(&soak.peers[i].lock);
		soak_peer_stop_wait(i, 0);
		pthread_mutex_unlock(&soak.peers[i].lock);
	}
	xfer_engine_free(soak.e);
	soak_metad_stop(SIGTERM);
	th_rm_tree(soak.dir);

	printf("soak: %.0f s, %lu batches, %lu bytes verified, %lu errors "
	       "(%lu batches interrupted by %lu peer kills, %lu xfer-metad "
	       "restarts, %lu callbacks, %lu churned and %lu re-registered "
	       "buffer pairs)\n",
	       (soak.end_ms - soak.start_ms) / 1000.0,
	       atomic_load(&soak.n.batches), atomic_load(&soak.n.bytes),
	       atomic_load(&soak.n.errors), atomic_load(&soak.n.interrupted),
	       atomic_load(&soak.n.peer_kills),
	       atomic_load(&soak.n.metad_restarts),
	       atomic_load(&soak.n.callbacks), atomic_load(&soak.n.churns),
	       atomic_load(&soak.n.reregs));
	return atomic_load(&soak.n.errors) ? 1 : 0;
}

int main(int argc, char **argv)
{
	const char *env = getenv("SOAK_SECONDS");
	int seconds = env ? atoi(env) : 600;

	if (argc == 4 && !strcmp(argv[1], "--peer"))
		return soak_peer_main(atoi(argv[2]), argv[3]);
	if (argc == 2)
		seconds = atoi(argv[1]);
	if (seconds <= 0) {
		fprintf(stderr, "usage: soak [SECONDS] (or SOAK_SECONDS)\n");
		return 2;
	}
	return soak_main(seconds);
}
