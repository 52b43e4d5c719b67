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
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <xfer/xfer.h>

#include "test/helpers.h"

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

/* ---- the pattern of a peer's static region: 8-byte words ---- */

static uint64_t word(uint64_t seed, uint64_t index)
{
	uint64_t z = seed * 0x9E3779B97F4A7C15ull + index + 1;

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static void fill_words(void *buf, size_t len, uint64_t seed)
{
	uint64_t *w = buf;

	for (size_t i = 0; i < len / 8; i++)
		w[i] = word(seed, i);
}

/* The first offset of [buf, buf+len) that differs from the pattern of
 * @p seed at offset @p off (both multiples of 8), or -1. */
static long check_words(const void *buf, size_t len, uint64_t seed,
			uint64_t off)
{
	const uint64_t *w = buf;

	for (size_t i = 0; i < len / 8; i++)
		if (w[i] != word(seed, off / 8 + i))
			return (long)(i * 8);
	return -1;
}

/* A page-aligned block, or NULL (no cmocka here). */
static void *alloc_try(size_t len)
{
	return aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
}

static uint64_t rnd(uint64_t *state)
{
	*state += 0x9E3779B97F4A7C15ull;
	return word(*state, 0);
}

/* ---- a peer process ---- */

static struct xfer_engine *engine_new(const char *url, const char *name,
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

static volatile sig_atomic_t peer_stop;

static void on_term(int sig)
{
	(void)sig;
	peer_stop = 1;
}

/*
 * Register the patterned buffer, say "ready" on stdout, then churn small
 * buffers until stdin closes (the soak is over) or SIGTERM.
 */
static int peer_main(int index, const char *url)
{
	struct sigaction sa = { .sa_handler = on_term };
	uint64_t state = (uint64_t)getpid();
	struct xfer_engine *e;
	char name[32], c;
	uint8_t *buf;
	int ret;

	sigaction(SIGTERM, &sa, NULL);
	/* read() below only looks for the EOF */
	fcntl(STDIN_FILENO, F_SETFL, O_NONBLOCK);
	snprintf(name, sizeof(name), "soak-peer-%d", index);
	e = engine_new(url, name, 1);
	buf = alloc_try(PEER_LEN);
	if (!e || !buf) {
		fprintf(stderr, "soak peer %d: cannot start: %s\n", index,
			strerror(errno));
		return 2;
	}
	fill_words(buf, PEER_LEN, (uint64_t)index);
	/* xfer-metad may be restarting: a publish it missed is retried */
	ret = xfer_register(e, buf, PEER_LEN, "cpu:0", true);
	if (ret) {
		fprintf(stderr, "soak peer %d: register: %s\n", index,
			strerror(-ret));
		return 2;
	}
	printf("ready\n");
	fflush(stdout);
	while (!peer_stop) {
		size_t len = 4096 * (1 + rnd(&state) % 64);
		uint8_t *extra = alloc_try(len);
		struct timespec ts = { 0, (long)(20 + rnd(&state) % 200) *
					  1000000 };

		if (!extra)
			break;
		ret = xfer_register(e, extra, len, "cpu:0", true);
		nanosleep(&ts, NULL);
		if (!ret && (ret = th_unregister(e, extra))) {
			fprintf(stderr, "soak peer %d: unregister: %s\n", index,
				strerror(-ret));
			return 3;
		}
		free(extra);
		/* the soak closes our stdin when it is done */
		if (read(STDIN_FILENO, &c, 1) == 0)
			break;
	}
	ret = th_unregister(e, buf);
	xfer_engine_free(e);
	free(buf);
	return ret ? 3 : 0;
}

/* ---- the soak ---- */

struct peer {
	pthread_mutex_t lock;  /* pid, stdin while restarting */
	pid_t pid;
	int to_child;          /* its stdin: closed to end it */
	/* even: up; odd: being killed and restarted. A transfer that sees
	 * it change may have met the death. */
	atomic_uint epoch;
	int64_t seg;
};

struct counters {
	atomic_ulong batches, bytes, interrupted, errors, callbacks;
	atomic_ulong peer_kills, metad_restarts, churns, reregs;
};

static struct {
	char url[128];
	char dir[PATH_MAX];
	char persist[PATH_MAX + 16];
	char self[PATH_MAX];
	uint16_t metad_port;
	pid_t metad_pid;
	struct xfer_engine *e;
	struct peer peers[PEERS];
	struct counters n;
	atomic_bool stop;
	int64_t start_ms, end_ms;
} soak;

static void error(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

static void error(const char *fmt, ...)
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

/* Start xfer-metad on soak.metad_port (0 the first time: any). */
static int metad_start(void)
{
	char port_file[PATH_MAX + 16], ports[8], buf[16] = "";
	int64_t end = th_now_ms() + 20000;
	FILE *f;
	pid_t pid;

	snprintf(port_file, sizeof(port_file), "%s/port", soak.dir);
	snprintf(ports, sizeof(ports), "%u", soak.metad_port);
	unlink(port_file);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		execl(th_metad_path(), "xfer-metad", "--port", ports,
		      "--persist", soak.persist, "--port-file", port_file,
		      (char *)NULL);
		_exit(127);
	}
	soak.metad_pid = pid;
	while (th_now_ms() < end) {
		f = fopen(port_file, "r");
		if (f && fgets(buf, sizeof(buf), f)) {
			fclose(f);
			soak.metad_port = (uint16_t)atoi(buf);
			return 0;
		}
		if (f)
			fclose(f);
		if (waitpid(pid, NULL, WNOHANG) == pid) {
			soak.metad_pid = 0;
			return -ECHILD;
		}
		usleep(10000);
	}
	return -ETIMEDOUT;
}

/* Stop xfer-metad with @p sig; an exit of its own other than 0 after
 * SIGTERM (a sanitizer's report) is an error. */
static void metad_stop(int sig)
{
	int st;

	if (!soak.metad_pid)
		return;
	kill(soak.metad_pid, sig);
	st = th_wait_exit(soak.metad_pid, 20000);
	if (st < 0)
		error("xfer-metad did not exit: %s", strerror(-st));
	else if (sig == SIGTERM && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
		error("xfer-metad ended with status %#x after SIGTERM", st);
	else if (sig == SIGKILL && !(WIFSIGNALED(st) &&
				     WTERMSIG(st) == SIGKILL))
		error("xfer-metad ended with status %#x before SIGKILL", st);
	soak.metad_pid = 0;
}

/* Start peer @p i and wait for its "ready". Under the peer's lock. */
static int peer_start(int i)
{
	struct peer *p = &soak.peers[i];
	char idx[16], line[16] = "";
	int in[2], out[2];
	FILE *f;
	pid_t pid;

	snprintf(idx, sizeof(idx), "%d", i);
	if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(in[0], STDIN_FILENO);
		dup2(out[1], STDOUT_FILENO);
		execl(soak.self, "soak", "--peer", idx, soak.url, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	p->pid = pid;
	p->to_child = in[1];
	f = fdopen(out[0], "r");
	if (!f || !fgets(line, sizeof(line), f) || strcmp(line, "ready\n")) {
		if (f)
			fclose(f);
		else
			close(out[0]);
		return -EPROTO;
	}
	fclose(f);
	return 0;
}

/* Wait for the end of peer @p i, sent @p sig (0: asked to exit by
 * closing its stdin). Under the peer's lock. */
static void peer_stop_wait(int i, int sig)
{
	struct peer *p = &soak.peers[i];
	int st;

	if (sig)
		kill(p->pid, sig);
	close(p->to_child);
	st = th_wait_exit(p->pid, 30000);
	if (st < 0) {
		error("peer %d did not exit: %s", i, strerror(-st));
		kill(p->pid, SIGKILL);
		th_wait_exit(p->pid, 5000);
	} else if (!sig && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
		error("peer %d ended with status %#x", i, st);
	} else if (sig && !(WIFSIGNALED(st) && WTERMSIG(st) == sig)) {
		error("peer %d died on its own (status %#x)", i, st);
	}
	p->pid = 0;
}

/* Refresh peer @p i's segment until it answers (xfer-metad restarts). */
static int refresh(int i)
{
	int64_t end = th_now_ms() + 30000;
	int ret;

	while ((ret = xfer_segment_refresh(soak.e, soak.peers[i].seg)) &&
	       th_now_ms() < end)
		usleep(50000);
	return ret;
}

static void restart_peer(int i)
{
	struct peer *p = &soak.peers[i];
	int ret;

	pthread_mutex_lock(&p->lock);
	atomic_fetch_add(&p->epoch, 1);           /* odd: going down */
	peer_stop_wait(i, SIGKILL);
	atomic_fetch_add(&soak.n.peer_kills, 1);
	ret = peer_start(i);
	if (!ret)
		ret = refresh(i);
	if (ret)
		error("peer %d did not come back: %s", i, strerror(-ret));
	else
		atomic_fetch_add(&p->epoch, 1);   /* even: up again */
	pthread_mutex_unlock(&p->lock);
}

static void restart_metad(uint64_t *state)
{
	int sig = rnd(state) & 1 ? SIGKILL : SIGTERM;
	int ret;

	metad_stop(sig);
	usleep((useconds_t)(rnd(state) % 500) * 1000); /* down a while */
	ret = metad_start();
	if (ret)
		error("xfer-metad did not come back: %s", strerror(-ret));
	atomic_fetch_add(&soak.n.metad_restarts, 1);
}

static void sleep_ms(int64_t ms)
{
	int64_t end = th_now_ms() + ms;

	while (!atomic_load(&soak.stop) && th_now_ms() < end)
		usleep(20000);
}

/*
 * Kill and restart until @p end_ms. On the main thread: the children it
 * forks die with it (PR_SET_PDEATHSIG follows the forking thread, not
 * the process).
 */
static void chaos(int64_t end_ms)
{
	uint64_t state = 77;
	int64_t next_metad = th_now_ms() + METAD_KILL_MS, next;

	for (;;) {
		next = th_now_ms() + PEER_KILL_MS / 2 +
		       (int64_t)(rnd(&state) % PEER_KILL_MS);
		if (next > end_ms)
			next = end_ms;
		sleep_ms(next - th_now_ms());
		if (th_now_ms() >= end_ms)
			break;
		if (th_now_ms() >= next_metad) {
			restart_metad(&state);
			next_metad = th_now_ms() + METAD_KILL_MS;
		} else {
			restart_peer((int)(rnd(&state) % PEERS));
		}
	}
}

static void no_cb(struct xfer_engine *e, int result, void *arg)
{
	(void)e;
	(void)result;
	(void)arg;
}

/* One WRITE of @p len bytes from @p src to @p dst of the own segment
 * @p self. @return its final status, its bytes into *done. */
static enum xfer_status copy_own(int64_t self, void *src, void *dst,
				 size_t len, uint64_t *done)
{
	struct xfer_request r = {
		.opcode = XFER_WRITE, .source = src, .target_id = self,
		.target_offset = (uint64_t)(uintptr_t)dst, .length = len,
	};
	struct xfer_batch *b = xfer_batch_new(soak.e, 1);
	struct xfer_task_status st = { .status = XFER_FAILED };

	if (!b)
		return XFER_FAILED;
	if (xfer_batch_submit(b, &r, 1)) {
		xfer_batch_free(b);
		return XFER_FAILED;
	}
	if (xfer_batch_wait(b, WAIT_MS)) {
		error("churn: own-segment copy not done in %d ms", WAIT_MS);
		xfer_batch_cancel(b);
		xfer_batch_wait(b, -1);
	}
	xfer_batch_status(b, 0, &st);
	xfer_batch_free(b);
	*done = st.transferred;
	return st.status;
}

/* Short-lived buffers, copied between through the own segment. */
static void *churn_thread(void *arg)
{
	uint64_t state = 99;
	int64_t self;

	(void)arg;
	self = xfer_segment_open(soak.e, xfer_engine_name(soak.e));
	if (self < 0) {
		error("open own segment: %s", strerror((int)-self));
		return NULL;
	}
	while (!atomic_load(&soak.stop)) {
		size_t len = 8 * (1 + rnd(&state) % 32768);
		uint8_t *a = alloc_try(len), *b = alloc_try(len);
		uint64_t seed = rnd(&state);
		uint64_t done = 0;
		int ra, rb;

		if (!a || !b) {
			error("churn: out of memory");
			free(a);
			free(b);
			break;
		}
		fill_words(a, len, seed);
		memset(b, 0, len);
		ra = xfer_register_async(soak.e, a, len, "cpu:0",
					 rnd(&state) & 1, no_cb, NULL);
		rb = xfer_register(soak.e, b, len, "cpu:0", true);
		if (ra || rb) {
			/* xfer-metad away is not an error of register */
			error("churn: register: %d, %d", ra, rb);
		} else if (copy_own(self, a, b, len, &done) != XFER_COMPLETED ||
			   done != len ||
			   check_words(b, len, seed, 0) >= 0) {
			error("churn: own-segment copy of %zu bytes", len);
		} else {
			atomic_fetch_add(&soak.n.bytes, len);
		}
		if (!ra && th_unregister(soak.e, a))
			error("churn: unregister");
		if (!rb && th_unregister(soak.e, b))
			error("churn: unregister");
		free(a);
		free(b);
		atomic_fetch_add(&soak.n.churns, 1);
	}
	return NULL;
}

/* ---- the transfer threads ---- */

struct worker {
	int id;
	uint64_t state;
	uint8_t *src, *dst;
	atomic_int cb_calls;
	atomic_int cb_outcome;
};

static void on_batch(struct xfer_batch *b, enum xfer_status outcome,
		     void *arg)
{
	struct worker *w = arg;

	(void)b;
	atomic_store(&w->cb_outcome, outcome);
	atomic_fetch_add(&w->cb_calls, 1);
}

static int buffers_new(struct worker *w)
{
	int ret;

	w->src = alloc_try(LOCAL_LEN);
	w->dst = alloc_try(LOCAL_LEN);
	if (!w->src || !w->dst)
		return -ENOMEM;
	ret = xfer_register(soak.e, w->src, LOCAL_LEN, "cpu:0", false);
	if (!ret)
		ret = xfer_register(soak.e, w->dst, LOCAL_LEN, "cpu:0", false);
	return ret;
}

static void buffers_free(struct worker *w)
{
	if (th_unregister(soak.e, w->src) || th_unregister(soak.e, w->dst))
		error("thread %d: unregister its buffers", w->id);
	free(w->src);
	free(w->dst);
}

/* The main buffer of peer @p p as its descriptor says now: its address
 * (the one of PEER_LEN bytes; churned ones are smaller). */
static int peer_buffer(int p, uint64_t *addr)
{
	uint64_t a, len;

	for (size_t i = 0; !xfer_segment_buffer(soak.e, soak.peers[p].seg, i,
						 &a, &len, NULL); i++)
		if (len == PEER_LEN) {
			*addr = a;
			return 0;
		}
	return -ENOENT;
}

/*
 * One batch of @p n requests to peer @p p and its wait (by the callback
 * every other time). @return the outcome, or -1 if the batch could not be
 * made or waited for (an error).
 */
static int run_batch(struct worker *w, const struct xfer_request *reqs,
		     size_t n, bool by_callback)
{
	struct xfer_task_status st;
	struct xfer_batch *b = xfer_batch_new(soak.e, n);
	int outcome = XFER_COMPLETED;
	int64_t end;
	int ret;

	if (!b) {
		error("thread %d: batch_new: %s", w->id, strerror(errno));
		return -1;
	}
	atomic_store(&w->cb_calls, 0);
	if (by_callback && xfer_batch_set_callback(b, on_batch, w)) {
		error("thread %d: set_callback", w->id);
		by_callback = false;
	}
	ret = xfer_batch_submit(b, reqs, n);
	if (ret) {
		error("thread %d: submit: %s", w->id, strerror(-ret));
		xfer_batch_free(b);
		return -1;
	}
	if (by_callback) {
		end = th_now_ms() + WAIT_MS;
		while (!atomic_load(&w->cb_calls) && th_now_ms() < end)
			usleep(500);
		if (!atomic_load(&w->cb_calls)) {
			error("thread %d: no callback in %d ms", w->id, WAIT_MS);
			xfer_batch_cancel(b);
			xfer_batch_wait(b, -1);
		} else {
			atomic_fetch_add(&soak.n.callbacks, 1);
		}
	} else if (xfer_batch_wait(b, WAIT_MS)) {
		error("thread %d: batch not done in %d ms", w->id, WAIT_MS);
		xfer_batch_cancel(b);
		xfer_batch_wait(b, -1);
	}
	for (size_t i = 0; i < n; i++) {
		if (xfer_batch_status(b, i, &st)) {
			error("thread %d: status %zu", w->id, i);
			outcome = -1;
		} else if (st.status != XFER_COMPLETED &&
			   outcome == XFER_COMPLETED) {
			outcome = st.status;
		} else if (st.status == XFER_COMPLETED &&
			   st.transferred != reqs[i].length) {
			error("thread %d: task %zu completed with %" PRIu64
			      " of %zu bytes", w->id, i, st.transferred,
			      reqs[i].length);
			outcome = -1;
		}
	}
	/* the callback may still be on its way after the wait */
	end = th_now_ms() + 5000;
	while ((ret = xfer_batch_free(b)) == -EBUSY && th_now_ms() < end)
		usleep(1000);
	if (ret)
		error("thread %d: batch_free: %s", w->id, strerror(-ret));
	if (by_callback && atomic_load(&w->cb_calls) == 1 && outcome >= 0 &&
	    atomic_load(&w->cb_outcome) != outcome)
		error("thread %d: callback said %s, the tasks %s", w->id,
		      xfer_status_str(atomic_load(&w->cb_outcome)),
		      xfer_status_str(outcome));
	atomic_fetch_add(&soak.n.batches, 1);
	return outcome;
}

/* The outcome of a batch whose peer was up at @p epoch0: fine, an
 * interruption (its peer died meanwhile), or an error. @return true if
 * the data may be checked. */
static bool judge(struct worker *w, int p, unsigned epoch0, int outcome,
		  const char *what)
{
	bool stable = !(epoch0 & 1) &&
		      atomic_load(&soak.peers[p].epoch) == epoch0;

	if (outcome == XFER_COMPLETED)
		return stable;
	if (!stable) {
		atomic_fetch_add(&soak.n.interrupted, 1);
		return false;
	}
	if (outcome >= 0)
		error("thread %d: %s on peer %d ended %s", w->id, what, p,
		      xfer_status_str(outcome));
	return false;
}

/* READs of the peer's patterned half, checked. */
static void op_read(struct worker *w, int p, uint64_t base, unsigned epoch0)
{
	struct xfer_request reqs[MAX_REQS];
	size_t n = 1 + rnd(&w->state) % MAX_REQS, at = 0;
	int outcome;

	for (size_t i = 0; i < n; i++) {
		size_t len = 8 * (1 + rnd(&w->state) % (MAX_REQ_LEN / 8));
		uint64_t off = 8 * (rnd(&w->state) % ((STATIC_LEN - len) / 8 + 1));

		reqs[i] = (struct xfer_request){
			.opcode = XFER_READ, .source = w->dst + at,
			.target_id = soak.peers[p].seg,
			.target_offset = base + off, .length = len,
		};
		at += len;
	}
	memset(w->dst, 0xee, at);
	outcome = run_batch(w, reqs, n, rnd(&w->state) & 1);
	if (!judge(w, p, epoch0, outcome, "read"))
		return;
	for (size_t i = 0; i < n; i++) {
		uint8_t *got = reqs[i].source;
		long bad = check_words(got, reqs[i].length, (uint64_t)p,
				       reqs[i].target_offset - base);

		if (bad >= 0) {
			error("thread %d: read of peer %d at +%" PRIu64
			      " (%zu bytes) differs at byte %ld", w->id, p,
			      reqs[i].target_offset - base, reqs[i].length,
			      bad);
			return;
		}
		atomic_fetch_add(&soak.n.bytes, reqs[i].length);
	}
}

/* WRITEs into the thread's slot of the peer, read back and compared. */
static void op_write(struct worker *w, int p, uint64_t base, unsigned epoch0)
{
	struct xfer_request reqs[MAX_REQS];
	uint64_t slot = STATIC_LEN + (uint64_t)w->id * SLOT_LEN;
	size_t n = 1 + rnd(&w->state) % MAX_REQS, at = 0;
	int outcome;

	for (size_t i = 0; i < n; i++) {
		/* any length, consecutive in the slot */
		size_t len = 1 + rnd(&w->state) % (SLOT_LEN / MAX_REQS);

		reqs[i] = (struct xfer_request){
			.opcode = XFER_WRITE, .source = w->src + at,
			.target_id = soak.peers[p].seg,
			.target_offset = base + slot + at, .length = len,
		};
		at += len;
	}
	fill_words(w->src, (at + 7) & ~7ul, rnd(&w->state));
	outcome = run_batch(w, reqs, n, rnd(&w->state) & 1);
	if (!judge(w, p, epoch0, outcome, "write"))
		return;
	/* read the whole run back in one request */
	memset(w->dst, 0xee, at);
	reqs[0] = (struct xfer_request){
		.opcode = XFER_READ, .source = w->dst,
		.target_id = soak.peers[p].seg,
		.target_offset = base + slot, .length = at,
	};
	outcome = run_batch(w, reqs, 1, false);
	if (!judge(w, p, epoch0, outcome, "read-back"))
		return;
	if (memcmp(w->src, w->dst, at)) {
		error("thread %d: %zu bytes written to peer %d read back "
		      "different", w->id, at, p);
		return;
	}
	atomic_fetch_add(&soak.n.bytes, at);
}

static void *worker_thread(void *arg)
{
	struct worker *w = arg;
	unsigned long ops = 0;

	if (buffers_new(w)) {
		error("thread %d: its buffers", w->id);
		return NULL;
	}
	while (!atomic_load(&soak.stop)) {
		int p = (int)(rnd(&w->state) % PEERS);
		unsigned epoch0 = atomic_load(&soak.peers[p].epoch);
		uint64_t base;

		if (peer_buffer(p, &base)) {
			/* between a restart and its refresh */
			if (!(epoch0 & 1) &&
			    atomic_load(&soak.peers[p].epoch) == epoch0)
				error("thread %d: peer %d has no buffer", w->id,
				      p);
			usleep(10000);
			continue;
		}
		if (rnd(&w->state) & 1)
			op_read(w, p, base, epoch0);
		else
			op_write(w, p, base, epoch0);
		if (++ops % 40 == 0) {
			buffers_free(w);
			if (buffers_new(w)) {
				error("thread %d: its buffers again", w->id);
				return NULL;
			}
			atomic_fetch_add(&soak.n.reregs, 1);
		}
	}
	buffers_free(w);
	return NULL;
}

static int soak_main(int seconds)
{
	pthread_t workers[THREADS], churn;
	struct worker w[THREADS];
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
	ret = metad_start();
	if (ret) {
		fprintf(stderr, "soak: xfer-metad (%s): %s\n", th_metad_path(),
			strerror(-ret));
		return 2;
	}
	snprintf(soak.url, sizeof(soak.url), "http://127.0.0.1:%u/metadata",
		 soak.metad_port);
	soak.e = engine_new(soak.url, "soak-main", 2);
	if (!soak.e) {
		fprintf(stderr, "soak: engine: %s\n", strerror(errno));
		return 2;
	}
	for (int i = 0; i < PEERS; i++) {
		pthread_mutex_init(&soak.peers[i].lock, NULL);
		snprintf(name, sizeof(name), "soak-peer-%d", i);
		if ((ret = peer_start(i)) ||
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
		w[i] = (struct worker){ .id = i, .state = 1000 + (uint64_t)i };
		pthread_create(&workers[i], NULL, worker_thread, &w[i]);
	}
	pthread_create(&churn, NULL, churn_thread, NULL);
	chaos(soak.start_ms + (int64_t)seconds * 1000);
	atomic_store(&soak.stop, true);
	pthread_join(churn, NULL);
	for (int i = 0; i < THREADS; i++)
		pthread_join(workers[i], NULL);
	soak.end_ms = th_now_ms();

	for (int i = 0; i < PEERS; i++) {
		xfer_segment_close(soak.e, soak.peers[i].seg);
		pthread_mutex_lock(&soak.peers[i].lock);
		peer_stop_wait(i, 0);
		pthread_mutex_unlock(&soak.peers[i].lock);
	}
	xfer_engine_free(soak.e);
	metad_stop(SIGTERM);
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
		return peer_main(atoi(argv[2]), argv[3]);
	if (argc == 2)
		seconds = atoi(argv[1]);
	if (seconds <= 0) {
		fprintf(stderr, "usage: soak [SECONDS] (or SOAK_SECONDS)\n");
		return 2;
	}
	return soak_main(seconds);
}
