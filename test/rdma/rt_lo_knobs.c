/*
 * RDMA tier, one guest (rdmavm --topo lo): the knobs that shape the work
 * requests, set through Mooncake's variables, against a forked target
 * over rxe0, every byte checked:
 *   MC_NUM_CQ_PER_CTX=2, MC_NUM_COMP_CHANNELS_PER_CTX=2: both CQs carry
 *     completions and both channels fire;
 *   MC_MAX_INLINE: small WRITEs go inline and land right;
 *   MC_MAX_WR=4 (and the smallest CQ) under batches of many WRs;
 *   MC_MAX_SGE: adjacent requests gathered into one WR, or not;
 * and selective signalling when a WR fails mid-chain: the WRs before it
 * complete, the failed one fails, the flushed ones after it are retried.
 * The counters are the transport's own (transports/rdma/rdma_internal.h).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "util/container_internal.h"
#include "core/engine_internal.h"
#include "test/helpers.h"
#include "test/rdma/rt.h"
#include "transports/rdma/rdma_internal.h"

#define TARGET_LEN (8u << 20)
#define LOCAL_LEN (8u << 20)

static struct rt_targets tg;
static int64_t seg;
static uint8_t *local, *back;

/* The context of the engine's first RDMA device. */
static struct rdma_ctx *ctx0(struct xfer_engine *e)
{
	for (int i = 0; e->tps[i]; i++)
		if (!strcmp(e->tps[i]->ops->name, "rdma"))
			return &container_of(e->tps[i], struct rdma_transport,
					     base)->ctx[0];
	fail_msg("no RDMA transport");
	return NULL;
}

/* An engine made with the variables of @p env ("NAME=VALUE", NULL-ended)
 * set, its buffers registered and the target's segment open. */
static struct xfer_engine *engine(const char *const *env)
{
	struct xfer_engine *e;
	char kv[128], *eq;

	for (const char *const *p = env; *p; p++) {
		snprintf(kv, sizeof(kv), "%s", *p);
		eq = strchr(kv, '=');
		*eq = '\0';
		setenv(kv, eq + 1, 1);
	}
	e = rt_engine("127.0.0.1", 0, 0);
	for (const char *const *p = env; *p; p++) {
		snprintf(kv, sizeof(kv), "%s", *p);
		*strchr(kv, '=') = '\0';
		unsetenv(kv);
	}
	assert_int_equal(xfer_register(e, local, LOCAL_LEN, "cpu:0", true), 0);
	assert_int_equal(xfer_register(e, back, LOCAL_LEN, "cpu:0", false), 0);
	seg = xfer_segment_open(e, tg.name[0]);
	assert_true(seg >= 0);
	return e;
}

/* One batch of @p n requests of @p len bytes, local (from @p buf) and
 * remote (from @p roff) both @p stride apart; every one must complete. */
static void batch(struct xfer_engine *e, enum xfer_opcode op, uint8_t *buf,
		  uint64_t roff, size_t n, size_t len, size_t stride)
{
	struct xfer_request *r = calloc(n, sizeof(*r));
	struct xfer_batch *b = xfer_batch_new(e, n);
	struct xfer_task_status st;

	assert_non_null(r);
	for (size_t i = 0; i < n; i++)
		r[i] = (struct xfer_request){ op, buf + i * stride, seg,
					      tg.addr[0] + roff + i * stride,
					      len };
	assert_int_equal(xfer_batch_submit(b, r, n), 0);
	assert_int_equal(xfer_batch_wait(b, 60000), 0);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(xfer_batch_status(b, i, &st), 0);
		th_assert_status(st.status, XFER_COMPLETED);
		assert_int_equal(st.transferred, len);
	}
	assert_int_equal(xfer_batch_free(b), 0);
	free(r);
}

/* WRITE th_fill(seed) in @p n requests, READ it back whole, compare. */
static void write_read(struct xfer_engine *e, uint64_t roff, size_t n,
		       size_t len, size_t stride, uint64_t seed)
{
	size_t span = (n - 1) * stride + len;

	th_fill(local, span, seed);
	batch(e, XFER_WRITE, local, roff, n, len, stride);
	memset(back, 0, span);
	th_assert_status(th_xfer1(e, XFER_READ, back, seg, tg.addr[0] + roff,
				  span, NULL), XFER_COMPLETED);
	for (size_t i = 0; i < n; i++)
		assert_memory_equal(back + i * stride, local + i * stride, len);
}

static int setup(void **state)
{
	(void)state;
	rt_targets_start(&tg, 1, "127.0.0.1", TARGET_LEN);
	local = th_alloc(LOCAL_LEN);
	back = th_alloc(LOCAL_LEN);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	free(local);
	free(back);
	assert_int_equal(rt_targets_stop(&tg), 0);
	return 0;
}

/* Two CQs on two channels: the endpoint's two QPs take one each, chains
 * alternate between the QPs, so both CQs complete work and both channels'
 * events fire. */
static void test_two_cqs(void **state)
{
	static const char *const env[] = { "MC_NUM_CQ_PER_CTX=2",
					   "MC_NUM_COMP_CHANNELS_PER_CTX=2",
					   "MC_NUM_QP_PER_EP=2", NULL };
	struct xfer_engine *e = engine(env);
	struct rdma_ctx *c = ctx0(e);
	uint64_t ev[2], wc[2];

	(void)state;
	assert_int_equal(c->ncq, 2);
	assert_int_equal(c->nchan, 2);
	for (int round = 0; round < 8; round++) {
		write_read(e, 0, 32, 65536, 65536, 200 + round);
		batch(e, XFER_READ, back, 0, 32, 4096, 8192);
	}
	for (int i = 0; i < 2; i++) {
		ev[i] = atomic_load(&c->cqs[i].events);
		wc[i] = atomic_load(&c->cqs[i].wcs);
		assert_ptr_equal(c->cqs[i].chan, &c->chans[i]);
	}
	printf("CQ 0: %llu events, %llu completions; CQ 1: %llu, %llu\n",
	       (unsigned long long)ev[0], (unsigned long long)wc[0],
	       (unsigned long long)ev[1], (unsigned long long)wc[1]);
	assert_true(ev[0] > 0 && ev[1] > 0);
	assert_true(wc[0] > 0 && wc[1] > 0);
	/* selective signalling: far fewer completions than the 768 slices
	 * (one per chain or per RDMA_SIGNAL_EVERY WRs) */
	assert_true(wc[0] + wc[1] <= 8 * 96 / 4);
	xfer_engine_free(e);
}

/* WRITEs of 1 to 256 bytes go inline (max_inline 256; alone, max_sge 1)
 * and land where they should; larger ones do not go inline; with
 * MC_MAX_INLINE=0 nothing does. */
static void test_inline(void **state)
{
	static const char *const env[] = { "MC_MAX_INLINE=256",
					   "MC_MAX_SGE=1", NULL };
	static const char *const none[] = { "MC_MAX_INLINE=0", NULL };
	static const size_t lens[] = { 1, 7, 64, 100, 255, 256 };
	struct xfer_engine *e = engine(env);
	struct rdma_ctx *c = ctx0(e);
	uint64_t before;

	(void)state;
	assert_int_equal(c->max_inline, 256);
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		before = atomic_load(&c->inline_wrs);
		/* 16 requests 4 KiB apart, at an odd remote offset */
		write_read(e, 4096 * i + 3, 16, lens[i], 4096, 300 + i);
		assert_int_equal(atomic_load(&c->inline_wrs) - before, 16);
	}
	before = atomic_load(&c->inline_wrs);
	write_read(e, 0, 16, 257, 4096, 310);
	assert_int_equal(atomic_load(&c->inline_wrs), before);
	xfer_engine_free(e);

	e = engine(none);
	c = ctx0(e);
	assert_int_equal(c->max_inline, 0);
	write_read(e, 5, 16, 64, 4096, 320);
	assert_int_equal(atomic_load(&c->inline_wrs), 0);
	xfer_engine_free(e);
}

/* Send queues of 4 WRs and the smallest CQ (16 entries, 2 QPs) under
 * batches of 300 requests: posted in many chains as completions free
 * room, every one completes. */
static void test_small_queues(void **state)
{
	static const char *const env[] = { "MC_MAX_WR=4", "MC_MAX_SGE=1",
					   "MC_MAX_CQE_PER_CTX=16", NULL };
	struct xfer_engine *e = engine(env);
	struct rdma_ctx *c = ctx0(e);

	(void)state;
	assert_int_equal(c->max_wr, 4);
	write_read(e, 0, 300, 4096, 4096, 400);
	memset(back, 0, 300 * 4096);
	batch(e, XFER_READ, back, 0, 300, 4096, 4096);
	assert_int_equal(th_check(back, 300 * 4096, 400), -1);
	write_read(e, 64, 100, 65536 + 1, 65536 + 8, 401);
	xfer_engine_free(e);
}

/* Adjacent requests: with max_sge 4 one WR carries up to four of them
 * (fewer WRs than requests), with max_sge 1 one each; both land right,
 * READs scatter right. Requests that are not adjacent are never merged. */
static void test_gather(void **state)
{
	static const char *const four[] = { "MC_MAX_SGE=4", NULL };
	static const char *const one[] = { "MC_MAX_SGE=1", NULL };
	struct xfer_engine *e = engine(four);
	struct rdma_ctx *c = ctx0(e);

	(void)state;
	/* Only requests waiting on the worker together are gathered: most
	 * of a batch, as the submitter outruns the worker. */
	write_read(e, 0, 128, 4096, 4096, 500);
	printf("128 adjacent WRITEs, one READ: %llu WRs gathered\n",
	       (unsigned long long)atomic_load(&c->gathered_wrs));
	assert_true(atomic_load(&c->gathered_wrs) > 0);
	memset(back, 0, 128 * 4096);
	batch(e, XFER_READ, back, 0, 128, 4096, 4096);
	assert_int_equal(th_check(back, 128 * 4096, 500), -1);
	xfer_engine_free(e);

	/* a gap between requests: nothing to gather */
	e = engine(four);
	c = ctx0(e);
	th_fill(local, 64 * 4096, 501);
	batch(e, XFER_WRITE, local, 0, 64, 4000, 4096);
	assert_int_equal(atomic_load(&c->gathered_wrs), 0);
	memset(back, 0, 64 * 4096);
	batch(e, XFER_READ, back, 0, 64, 4000, 4096);
	for (size_t i = 0; i < 64; i++)
		assert_memory_equal(back + i * 4096, local + i * 4096, 4000);
	xfer_engine_free(e);

	e = engine(one);
	c = ctx0(e);
	write_read(e, 0, 128, 4096, 4096, 502);
	assert_int_equal(atomic_load(&c->gathered_wrs), 0);
	xfer_engine_free(e);
}

/* ---- a failure mid-chain ---- */

/* A target with two buffers, the second unregistered on request. */
struct two {
	pid_t pid;
	int cmd, ack;
	char name[64];
	uint64_t addr[2];
};

static void two_serve(int out, int cmd, int ack)
{
	struct xfer_config *cfg = xfer_config_new();
	struct xfer_engine *e;
	void *buf[2];
	char c;

	if (!cfg || xfer_config_set(cfg, "protocol", "rdma") ||
	    xfer_config_set(cfg, "local_server_name", "127.0.0.1"))
		_exit(3);
	e = xfer_engine_new(cfg);
	xfer_config_free(cfg);
	if (!e)
		_exit(3);
	for (int i = 0; i < 2; i++) {
		buf[i] = aligned_alloc(4096, 1u << 20);
		if (!buf[i] || xfer_register(e, buf[i], 1u << 20, "cpu:0", true))
			_exit(4);
	}
	dprintf(out, "%s %llu %llu\n", xfer_engine_name(e),
		(unsigned long long)(uintptr_t)buf[0],
		(unsigned long long)(uintptr_t)buf[1]);
	close(out);
	while (read(cmd, &c, 1) == 1)
		if (xfer_unregister(e, buf[1]) || write(ack, "k", 1) != 1)
			_exit(5);
	xfer_engine_free(e);
	_exit(0);
}

static void two_start(struct two *t)
{
	int names[2], cmd[2], ack[2];
	unsigned long long a, b;
	FILE *f;

	assert_int_equal(pipe(names), 0);
	assert_int_equal(pipe(cmd), 0);
	assert_int_equal(pipe(ack), 0);
	fflush(NULL);
	t->pid = fork();
	assert_true(t->pid >= 0);
	if (t->pid == 0) {
		for (int fd = 3; fd < 1024; fd++)
			if (fd != names[1] && fd != cmd[0] && fd != ack[1])
				close(fd);
		two_serve(names[1], cmd[0], ack[1]);
	}
	close(names[1]);
	close(cmd[0]);
	close(ack[1]);
	t->cmd = cmd[1];
	t->ack = ack[0];
	f = fdopen(names[0], "r");
	assert_non_null(f);
	assert_int_equal(fscanf(f, "%63s %llu %llu", t->name, &a, &b), 3);
	fclose(f);
	t->addr[0] = a;
	t->addr[1] = b;
}

/*
 * One chain of three WRs, only the last signalled: 8 KiB gathered into
 * buffer 0, 4 KiB into buffer 1 (unregistered by the target after we
 * opened it, so the peer refuses it), 4 KiB into buffer 0 again. The
 * first WR completes without a completion of its own, the second fails
 * (and is retried, and fails again: retry_cnt 1), the third is flushed
 * and completes on a new endpoint.
 */
static void test_fail_mid_chain(void **state)
{
	struct two t;
	struct xfer_config *cfg = th_config();
	struct xfer_engine *e;
	struct xfer_task_status st;
	struct xfer_batch *b;
	int64_t id;
	char c;
	static const enum xfer_status want[] = {
		XFER_COMPLETED, XFER_COMPLETED, XFER_FAILED, XFER_COMPLETED,
	};

	(void)state;
	two_start(&t);
	th_set(cfg, "protocol", "rdma");
	th_set(cfg, "local_server_name", "127.0.0.1");
	th_set(cfg, "retry_cnt", "1");
	th_set(cfg, "path_pause_ms", "0");
	e = xfer_engine_new(cfg);
	xfer_config_free(cfg);
	assert_non_null(e);
	assert_int_equal(xfer_register(e, local, LOCAL_LEN, "cpu:0", true), 0);
	id = xfer_segment_open(e, t.name);
	assert_true(id >= 0);
	/* connect first, so the batch goes out as one chain */
	th_fill(local, 65536, 600);
	th_assert_status(th_xfer1(e, XFER_WRITE, local, id, t.addr[0], 4096,
				  NULL), XFER_COMPLETED);
	assert_int_equal(write(t.cmd, "u", 1), 1);
	assert_int_equal(read(t.ack, &c, 1), 1);

	struct xfer_request r[] = {
		{ XFER_WRITE, local, id, t.addr[0], 4096 },
		{ XFER_WRITE, local + 4096, id, t.addr[0] + 4096, 4096 },
		{ XFER_WRITE, local + 8192, id, t.addr[1], 4096 },
		{ XFER_WRITE, local + 12288, id, t.addr[0] + 65536, 4096 },
	};
	b = xfer_batch_new(e, 4);
	assert_int_equal(xfer_batch_submit(b, r, 4), 0);
	assert_int_equal(xfer_batch_wait(b, 60000), 0);
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(xfer_batch_status(b, i, &st), 0);
		th_assert_status(st.status, want[i]);
	}
	assert_int_equal(xfer_batch_free(b), 0);
	/* what completed is there */
	memset(local + 65536, 0, 8192);
	th_assert_status(th_xfer1(e, XFER_READ, local + 65536, id, t.addr[0],
				  8192, NULL), XFER_COMPLETED);
	assert_memory_equal(local + 65536, local, 8192);
	th_assert_status(th_xfer1(e, XFER_READ, local + 65536, id,
				  t.addr[0] + 65536, 4096, NULL),
			 XFER_COMPLETED);
	assert_memory_equal(local + 65536, local + 12288, 4096);

	xfer_engine_free(e);
	close(t.cmd);
	close(t.ack);
	assert_int_equal(th_wait_exit(t.pid, 30000), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_two_cqs),
		cmocka_unit_test(test_inline),
		cmocka_unit_test(test_small_queues),
		cmocka_unit_test(test_gather),
		cmocka_unit_test(test_fail_mid_chain),
	};

	return cmocka_run_group_tests_name("rdma lo knobs", tests, setup,
					   teardown);
}
