/*
 * What the three parts of the soak share (test/soak.c says what it does):
 *   soak.c        main(), the state, errors, the pattern, engines
 *   soak_chaos.c  the peer processes and xfer-metad: start, kill, restart
 *   soak_load.c   the transfer threads and the churn thread
 */
#ifndef XFER_TEST_SOAK_H
#define XFER_TEST_SOAK_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <xfer/xfer.h>

#define PEERS        3
#define THREADS      4
#define PEER_LEN     (8u << 20)          /* each peer's main buffer */
#define STATIC_LEN   (PEER_LEN / 2)      /* its patterned half */
#define SLOT_LEN     ((PEER_LEN - STATIC_LEN) / THREADS) /* per thread */
#define LOCAL_LEN    (2u << 20)          /* a thread's src and dst */
#define MAX_REQS     8
#define MAX_REQ_LEN  (LOCAL_LEN / MAX_REQS)
#define WAIT_MS      60000
#define PEER_KILL_MS 6000                /* mean time between peer kills */
#define METAD_KILL_MS 30000              /* ... and xfer-metad restarts */
#define MAX_ERRORS_SHOWN 20

struct soak_peer {
	pthread_mutex_t lock;  /* pid, stdin while restarting */
	pid_t pid;
	int to_child;          /* its stdin: closed to end it */
	/* even: up; odd: being killed and restarted. A transfer that sees
	 * it change may have met the death. */
	atomic_uint epoch;
	int64_t seg;
};

struct soak_counters {
	atomic_ulong batches, bytes, interrupted, errors, callbacks;
	atomic_ulong peer_kills, metad_restarts, churns, reregs;
};

struct soak_state {
	char url[128];
	char dir[PATH_MAX];
	char persist[PATH_MAX + 16];
	char self[PATH_MAX];
	uint16_t metad_port;
	pid_t metad_pid;
	struct xfer_engine *e;
	struct soak_peer peers[PEERS];
	struct soak_counters n;
	atomic_bool stop;
	int64_t start_ms, end_ms;
};

extern struct soak_state soak;

/* A transfer thread. */
struct soak_worker {
	int id;
	uint64_t state;
	uint8_t *src, *dst;
	atomic_int cb_calls;
	atomic_int cb_outcome;
};

/* soak.c */
/** Count an error; the first MAX_ERRORS_SHOWN are printed. */
void soak_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/** The pattern of seed @p seed in 8-byte words. */
void soak_fill_words(void *buf, size_t len, uint64_t seed);
/** The first offset of [buf, buf+len) that differs from the pattern of
 *  @p seed at offset @p off (both multiples of 8), or -1. */
long soak_check_words(const void *buf, size_t len, uint64_t seed,
		      uint64_t off);
/** A page-aligned block, or NULL (no cmocka here). */
void *soak_alloc(size_t len);
uint64_t soak_rnd(uint64_t *state);
/** An engine on xfer-metad at @p url, named @p name. */
struct xfer_engine *soak_engine_new(const char *url, const char *name,
				    int workers);

/* soak_chaos.c */
/** The program as peer @p index (soak --peer INDEX URL). */
int soak_peer_main(int index, const char *url);
/** Start xfer-metad on soak.metad_port (0 the first time: any). */
int soak_metad_start(void);
/** Stop xfer-metad with @p sig (an exit of its own is an error). */
void soak_metad_stop(int sig);
/** Start peer @p i and wait for its "ready". Under the peer's lock. */
int soak_peer_start(int i);
/** Wait for the end of peer @p i, sent @p sig (0: asked to exit by
 *  closing its stdin). Under the peer's lock. */
void soak_peer_stop_wait(int i, int sig);
/** Kill and restart peers and xfer-metad until @p end_ms, on the main
 *  thread. */
void soak_chaos(int64_t end_ms);

/* soak_load.c: thread bodies */
void *soak_churn(void *arg);
void *soak_worker(void *arg);  /* arg: its struct soak_worker */

#endif
