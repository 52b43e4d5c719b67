/*
 * The soak's load (test/soak.c): transfer threads that read and write the
 * peers' buffers and check every byte, and a thread that churns buffers
 * of the own segment.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test/helpers.h"
#include "test/soak.h"

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
		soak_error("churn: own-segment copy not done in %d ms", WAIT_MS);
		xfer_batch_cancel(b);
		xfer_batch_wait(b, -1);
	}
	xfer_batch_status(b, 0, &st);
	xfer_batch_free(b);
	*done = st.transferred;
	return st.status;
}

/* Short-lived buffers, copied between through the own segment. */
void *soak_churn(void *arg)
{
	uint64_t state = 99;
	int64_t self;

	(void)arg;
	self = xfer_segment_open(soak.e, xfer_engine_name(soak.e));
	if (self < 0) {
		soak_error("open own segment: %s", strerror((int)-self));
		return NULL;
	}
	while (!atomic_load(&soak.stop)) {
		size_t len = 8 * (1 + soak_rnd(&state) % 32768);
		uint8_t *a = soak_alloc(len), *b = soak_alloc(len);
		uint64_t seed = soak_rnd(&state);
		uint64_t done = 0;
		int ra, rb;

		if (!a || !b) {
			soak_error("churn: out of memory");
			free(a);
			free(b);
			break;
		}
		soak_fill_words(a, len, seed);
		memset(b, 0, len);
		ra = xfer_register_async(soak.e, a, len, "cpu:0",
					 soak_rnd(&state) & 1, no_cb, NULL);
		rb = xfer_register(soak.e, b, len, "cpu:0", true);
		if (ra || rb) {
			/* xfer-metad away is not an error of register */
			soak_error("churn: register: %d, %d", ra, rb);
		} else if (copy_own(self, a, b, len, &done) != XFER_COMPLETED ||
			   done != len ||
			   soak_check_words(b, len, seed, 0) >= 0) {
			soak_error("churn: own-segment copy of %zu bytes", len);
		} else {
			atomic_fetch_add(&soak.n.bytes, len);
		}
		if (!ra && th_unregister(soak.e, a))
			soak_error("churn: unregister");
		if (!rb && th_unregister(soak.e, b))
			soak_error("churn: unregister");
		free(a);
		free(b);
		atomic_fetch_add(&soak.n.churns, 1);
	}
	return NULL;
}

/* ---- the transfer threads ---- */

static void on_batch(struct xfer_batch *b, enum xfer_status outcome,
		     void *arg)
{
	struct soak_worker *w = arg;

	(void)b;
	atomic_store(&w->cb_outcome, outcome);
	atomic_fetch_add(&w->cb_calls, 1);
}

static int buffers_new(struct soak_worker *w)
{
	int ret;

	w->src = soak_alloc(LOCAL_LEN);
	w->dst = soak_alloc(LOCAL_LEN);
	if (!w->src || !w->dst)
		return -ENOMEM;
	ret = xfer_register(soak.e, w->src, LOCAL_LEN, "cpu:0", false);
	if (!ret)
		ret = xfer_register(soak.e, w->dst, LOCAL_LEN, "cpu:0", false);
	return ret;
}

static void buffers_free(struct soak_worker *w)
{
	if (th_unregister(soak.e, w->src) || th_unregister(soak.e, w->dst))
		soak_error("thread %d: unregister its buffers", w->id);
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
static int run_batch(struct soak_worker *w, const struct xfer_request *reqs,
		     size_t n, bool by_callback)
{
	struct xfer_task_status st;
	struct xfer_batch *b = xfer_batch_new(soak.e, n);
	int outcome = XFER_COMPLETED;
	int64_t end;
	int ret;

	if (!b) {
		soak_error("thread %d: batch_new: %s", w->id, strerror(errno));
		return -1;
	}
	atomic_store(&w->cb_calls, 0);
	if (by_callback && xfer_batch_set_callback(b, on_batch, w)) {
		soak_error("thread %d: set_callback", w->id);
		by_callback = false;
	}
	ret = xfer_batch_submit(b, reqs, n);
	if (ret) {
		soak_error("thread %d: submit: %s", w->id, strerror(-ret));
		xfer_batch_free(b);
		return -1;
	}
	if (by_callback) {
		end = th_now_ms() + WAIT_MS;
		while (!atomic_load(&w->cb_calls) && th_now_ms() < end)
			usleep(500);
		if (!atomic_load(&w->cb_calls)) {
			soak_error("thread %d: no callback in %d ms", w->id, WAIT_MS);
			xfer_batch_cancel(b);
			xfer_batch_wait(b, -1);
		} else {
			atomic_fetch_add(&soak.n.callbacks, 1);
		}
	} else if (xfer_batch_wait(b, WAIT_MS)) {
		soak_error("thread %d: batch not done in %d ms", w->id, WAIT_MS);
		xfer_batch_cancel(b);
		xfer_batch_wait(b, -1);
	}
	for (size_t i = 0; i < n; i++) {
		if (xfer_batch_status(b, i, &st)) {
			soak_error("thread %d: status %zu", w->id, i);
			outcome = -1;
		} else if (st.status != XFER_COMPLETED &&
			   outcome == XFER_COMPLETED) {
			outcome = st.status;
		} else if (st.status == XFER_COMPLETED &&
			   st.transferred != reqs[i].length) {
			soak_error("thread %d: task %zu completed with %" PRIu64
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
		soak_error("thread %d: batch_free: %s", w->id, strerror(-ret));
	if (by_callback && atomic_load(&w->cb_calls) == 1 && outcome >= 0 &&
	    atomic_load(&w->cb_outcome) != outcome)
		soak_error("thread %d: callback said %s, the tasks %s", w->id,
		      xfer_status_str(atomic_load(&w->cb_outcome)),
		      xfer_status_str(outcome));
	atomic_fetch_add(&soak.n.batches, 1);
	return outcome;
}

/* The outcome of a batch whose peer was up at @p epoch0: fine, an
 * interruption (its peer died meanwhile), or an error. @return true if
 * the data may be checked. */
static bool judge(struct soak_worker *w, int p, unsigned epoch0, int outcome,
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
		soak_error("thread %d: %s on peer %d ended %s", w->id, what, p,
		      xfer_status_str(outcome));
	return false;
}

/* READs of the peer's patterned half, checked. */
static void op_read(struct soak_worker *w, int p, uint64_t base, unsigned epoch0)
{
	struct xfer_request reqs[MAX_REQS];
	size_t n = 1 + soak_rnd(&w->state) % MAX_REQS, at = 0;
	int outcome;

	for (size_t i = 0; i < n; i++) {
		size_t len = 8 * (1 + soak_rnd(&w->state) % (MAX_REQ_LEN / 8));
		uint64_t off = 8 * (soak_rnd(&w->state) % ((STATIC_LEN - len) / 8 + 1));

		reqs[i] = (struct xfer_request){
			.opcode = XFER_READ, .source = w->dst + at,
			.target_id = soak.peers[p].seg,
			.target_offset = base + off, .length = len,
		};
		at += len;
	}
	memset(w->dst, 0xee, at);
	outcome = run_batch(w, reqs, n, soak_rnd(&w->state) & 1);
	if (!judge(w, p, epoch0, outcome, "read"))
		return;
	for (size_t i = 0; i < n; i++) {
		uint8_t *got = reqs[i].source;
		long bad = soak_check_words(got, reqs[i].length, (uint64_t)p,
				       reqs[i].target_offset - base);

		if (bad >= 0) {
			soak_error("thread %d: read of peer %d at +%" PRIu64
			      " (%zu bytes) differs at byte %ld", w->id, p,
			      reqs[i].target_offset - base, reqs[i].length,
			      bad);
			return;
		}
		atomic_fetch_add(&soak.n.bytes, reqs[i].length);
	}
}

/* WRITEs into the thread's slot of the peer, read back and compared. */
static void op_write(struct soak_worker *w, int p, uint64_t base, unsigned epoch0)
{
	struct xfer_request reqs[MAX_REQS];
	uint64_t slot = STATIC_LEN + (uint64_t)w->id * SLOT_LEN;
	size_t n = 1 + soak_rnd(&w->state) % MAX_REQS, at = 0;
	int outcome;

	for (size_t i = 0; i < n; i++) {
		/* any length, consecutive in the slot */
		size_t len = 1 + soak_rnd(&w->state) % (SLOT_LEN / MAX_REQS);

		reqs[i] = (struct xfer_request){
			.opcode = XFER_WRITE, .source = w->src + at,
			.target_id = soak.peers[p].seg,
			.target_offset = base + slot + at, .length = len,
		};
		at += len;
	}
	soak_fill_words(w->src, (at + 7) & ~7ul, soak_rnd(&w->state));
	outcome = run_batch(w, reqs, n, soak_rnd(&w->state) & 1);
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
		soak_error("thread %d: %zu bytes written to peer %d read back "
		      "different", w->id, at, p);
		return;
	}
	atomic_fetch_add(&soak.n.bytes, at);
}

void *soak_worker(void *arg)
{
	struct soak_worker *w = arg;
	unsigned long ops = 0;

	if (buffers_new(w)) {
		soak_error("thread %d: its buffers", w->id);
		return NULL;
	}
	while (!atomic_load(&soak.stop)) {
		int p = (int)(soak_rnd(&w->state) % PEERS);
		unsigned epoch0 = atomic_load(&soak.peers[p].epoch);
		uint64_t base;

		if (peer_buffer(p, &base)) {
			/* between a restart and its refresh */
			if (!(epoch0 & 1) &&
			    atomic_load(&soak.peers[p].epoch) == epoch0)
				soak_error("thread %d: peer %d has no buffer", w->id,
				      p);
			usleep(10000);
			continue;
		}
		if (soak_rnd(&w->state) & 1)
			op_read(w, p, base, epoch0);
		else
			op_write(w, p, base, epoch0);
		if (++ops % 40 == 0) {
			buffers_free(w);
			if (buffers_new(w)) {
				soak_error("thread %d: its buffers again", w->id);
				return NULL;
			}
			atomic_fetch_add(&soak.n.reregs, 1);
		}
	}
	buffers_free(w);
	return NULL;
}
