/*
 * async_server: the callback API in a threaded program.
 *
 * A target engine serves a 1 MiB buffer; an initiator engine writes its own
 * 1 MiB into it as one batch of 16 requests. Completion arrives as a
 * callback on the initiator's control thread, which hands the outcome to
 * main through a condition variable.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <xfer/xfer.h>

#define LEN (1u << 20)
#define NREQ 16

struct done {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool fired;
	enum xfer_status outcome;
};

static int fail(const char *what, const char *why)
{
	fprintf(stderr, "async_server: %s: %s\n", what, why);
	return 1;
}

/* Runs on the engine's control thread: keep it short, never block. */
static void on_batch(struct xfer_batch *b, enum xfer_status outcome, void *arg)
{
	struct done *d = arg;

	xfer_batch_free(b); /* allowed here; main never touches b again */
	pthread_mutex_lock(&d->lock);
	d->fired = true;
	d->outcome = outcome;
	pthread_cond_signal(&d->cond);
	pthread_mutex_unlock(&d->lock);
}

static struct xfer_engine *engine(void)
{
	struct xfer_config *cfg = xfer_config_new();
	struct xfer_engine *e = NULL;

	/* rpc_port 0: let the kernel pick: two engines, one host */
	if (cfg && !xfer_config_set(cfg, "bind_addr", "127.0.0.1") &&
	    !xfer_config_set(cfg, "rpc_port", "0"))
		e = xfer_engine_new(cfg);
	xfer_config_free(cfg);
	return e;
}

int main(void)
{
	static uint8_t src[LEN], dst[LEN];
	struct done d = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
			  false, XFER_WAITING };
	struct xfer_request reqs[NREQ];
	struct xfer_engine *target = engine(), *init = engine();
	struct xfer_batch *b;
	struct timespec limit;
	uint64_t addr, len;
	bool fired;
	int64_t seg;

	if (!target || !init)
		return fail("xfer_engine_new", strerror(errno));
	for (size_t i = 0; i < LEN; i++)
		src[i] = (uint8_t)(i * 7 + 1);
	/* Peers may only touch registered memory; the source must be too. */
	if (xfer_register(target, dst, LEN, "cpu:0", true))
		return fail("register", xfer_engine_last_error(target));
	if (xfer_register(init, src, LEN, "cpu:0", false))
		return fail("register", xfer_engine_last_error(init));

	/* Open the target by name; its buffer 0 tells where to write. */
	seg = xfer_segment_open(init, xfer_engine_name(target));
	if (seg < 0 || xfer_segment_buffer(init, seg, 0, &addr, &len, NULL))
		return fail("open", xfer_engine_last_error(init));
	for (size_t i = 0; i < NREQ; i++)
		reqs[i] = (struct xfer_request){ XFER_WRITE, src + i * (LEN / NREQ),
						 seg, addr + i * (LEN / NREQ), LEN / NREQ };

	/* The callback is set before submit and covers it. */
	b = xfer_batch_new(init, NREQ);
	if (!b || xfer_batch_set_callback(b, on_batch, &d) ||
	    xfer_batch_submit(b, reqs, NREQ))
		return fail("submit", xfer_engine_last_error(init));

	/* Bounded, so a lost completion fails the test suite, not hangs it. */
	clock_gettime(CLOCK_REALTIME, &limit);
	limit.tv_sec += 10;
	pthread_mutex_lock(&d.lock);
	while (!d.fired && !pthread_cond_timedwait(&d.cond, &d.lock, &limit))
		;
	fired = d.fired;
	pthread_mutex_unlock(&d.lock);
	if (!fired)
		return fail("batch", "no callback within 10 s");
	if (d.outcome != XFER_COMPLETED)
		return fail("batch", xfer_status_str(d.outcome));
	if (memcmp(src, dst, LEN))
		return fail("check", "the target holds other bytes");

	xfer_segment_close(init, seg);
	xfer_engine_free(init);
	xfer_engine_free(target);
	puts("async_server: ok");
	return 0;
}
