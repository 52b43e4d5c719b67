/*
 * Runs of requests on the TCP data port (PROTOCOL.md §3), which the
 * target reads as a run and answers in one write, and the initiator
 * coalesces: from a raw socket, a long pipelined run of small READs and
 * WRITEs gets every reply in order, so does one of WRITEs small and
 * large in changing turns (many small ones a read on the target); a
 * request cut in two holds back the status of the one before it until
 * its rest came (but not past the peer's EOF); a refused request in the
 * middle of a run gets status 1, then the close, with nothing after it
 * served;
 * a READ and a WRITE of the same bytes sent together take effect in
 * their order (the READ gets the old bytes);
 * from an engine, one batch of small and large READs and WRITEs with a
 * request the target refuses in the middle: only that one fails (the
 * requests behind it on its connection go again on a new one), every
 * other byte arrives; a task of many slices at a buffer gone fails at
 * once, its slices refused once per connection, not once each; and
 * batches of large READs, whose headers the target reads ahead of room
 * in its reply ring, keep being answered.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/desc_internal.h"
#include "test/helpers.h"

#define OP_V2 0x80
#define OP_WRITE 1
#define OP_READ 0
#define CLOSE_MS 6000
#define TLEN (32u << 20)       /* the target's buffer */
#define GONE_LEN (8u << 20)    /* registered at open, gone at submit */

static const uint8_t status_ok[8] = { 0, 0, 0, 0, 0x56, 0x54, 0x43, 0x4d };
static const uint8_t status_refused[8] = { 1, 0, 0, 0, 0x56, 0x54, 0x43, 0x4d };

static struct xfer_engine *T;
static uint8_t *tb, *gone;
static uint16_t data_port;

static int setup(void **state)
{
	struct xfer_desc *d;

	(void)state;
	T = th_engine(1);
	tb = th_alloc(TLEN);
	gone = th_alloc(GONE_LEN);
	assert_int_equal(xfer_register(T, tb, TLEN, "cpu:0", true), 0);
	d = th_fetch_desc(xfer_engine_rpc_port(T));
	data_port = th_tcp(d)->data_port;
	xfer_desc_free(d);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	assert_int_equal(th_unregister(T, tb), 0);
	xfer_engine_free(T);
	free(tb);
	free(gone);
	return 0;
}

/* Append a request header to @p p. @return the byte after it. */
static uint8_t *header(uint8_t *p, uint64_t size, uint64_t addr, uint8_t op)
{
	th_put_le64(p, size);
	th_put_le64(p + 8, addr);
	p[16] = op;
	memset(p + 17, 0, 7);
	return p + 24;
}

/* A run of 300 requests in one send, READs and WRITEs of 1 to 700 bytes
 * in turn (headers fall across the target's reads): every reply comes,
 * in order, and every WRITE is in place. */
static void test_raw_run(void **state)
{
	enum { N = 300, SLOT = 1024 };
	uint8_t *msg = malloc(N * (24 + 700)), *p = msg, *got;
	size_t want = 0, len;
	int fd = th_connect(data_port);

	(void)state;
	assert_non_null(msg);
	th_fill(tb, N * SLOT, 11);
	memset(tb + N * SLOT, 0, N * SLOT);
	for (int i = 0; i < N; i++) {
		len = 1 + (size_t)i * 7 % 700;
		if (i % 2) { /* WRITE slot i of the second half */
			p = header(p, len, (uintptr_t)tb + (N + i) * SLOT,
				   OP_V2 | OP_WRITE);
			th_fill(p, len, 100 + i);
			p += len;
			want += 8;
		} else {     /* READ slot i */
			p = header(p, len, (uintptr_t)tb + i * SLOT,
				   OP_V2 | OP_READ);
			want += 8 + len;
		}
	}
	assert_int_equal(th_send_all(fd, msg, (size_t)(p - msg)), 0);
	got = malloc(want);
	assert_non_null(got);
	assert_int_equal(th_recv_all(fd, got, want, CLOSE_MS), (long)want);
	p = got;
	for (int i = 0; i < N; i++) {
		len = 1 + (size_t)i * 7 % 700;
		assert_memory_equal(p, status_ok, 8);
		p += 8;
		if (i % 2) {
			assert_int_equal(th_check(tb + (N + i) * SLOT, len,
						  100 + i), -1);
		} else {
			assert_memory_equal(p, tb + i * SLOT, len);
			p += len;
		}
	}
	close(fd);
	free(got);
	free(msg);
}

#define SLOT_W (20u << 10)

/* The payload of WRITE @p i: 4 KiB mostly, each 37th larger than 16 KiB,
 * odd ends. */
static size_t run_len(int i)
{
	if (i % 37 == 5)
		return SLOT_W - 7u * (unsigned)(i % 3);
	return i % 5 ? 4096 : 1 + (size_t)i * 13 % 9000;
}

/*
 * A long run of WRITEs, sent at once, most of them small enough to come
 * through the target's read-ahead many in one read (copied to their
 * place from there), some too large for it (read straight into place,
 * and the reads behind them take only the next header), in changing
 * turns: every payload lands whole in its slot, every status is OK.
 */
static void test_raw_small_writes(void **state)
{
	enum { N = 400, SLOT = SLOT_W };
	uint8_t *msg = malloc(N * (24 + SLOT)), *p = msg, got[8 * N];
	int fd = th_connect(data_port);

	(void)state;
	assert_non_null(msg);
	memset(tb, 0, N * SLOT);
	for (int i = 0; i < N; i++) {
		size_t len = run_len(i);

		p = header(p, len, (uintptr_t)tb + (size_t)i * SLOT,
			   OP_V2 | OP_WRITE);
		th_fill(p, len, 7000 + i);
		p += len;
	}
	assert_int_equal(th_send_all(fd, msg, (size_t)(p - msg)), 0);
	assert_int_equal(th_recv_all(fd, got, sizeof(got), CLOSE_MS),
			 (long)sizeof(got));
	for (int i = 0; i < N; i++) {
		size_t len = run_len(i);

		assert_memory_equal(got + 8 * i, status_ok, 8);
		assert_int_equal(th_check(tb + (size_t)i * SLOT, len, 7000 + i),
				 -1);
		assert_int_equal(th_check_byte(tb + (size_t)i * SLOT + len,
					       SLOT - len, 0), -1);
	}
	close(fd);
	free(msg);
}

/*
 * A 4 KiB WRITE sent whole with part of the next behind it, cut in its
 * payload, then in its header: the target holds the first one's status
 * until the rest of the second came (a peer sends a request whole), then
 * answers both in one go; cut in a header and then the peer's EOF: the
 * status goes at once, then the close.
 */
static void test_raw_split_request(void **state)
{
	enum { LEN = 4096, REQ = 24 + LEN };
	const size_t cuts[3] = { REQ + 24 + LEN / 2, REQ + 10, REQ + 10 };
	uint8_t msg[2 * REQ], got[16], *p;

	(void)state;
	for (int k = 0; k < 3; k++) {
		uint8_t *dst = tb + (size_t)k * 2 * LEN;
		int fd = th_connect(data_port);

		p = header(msg, LEN, (uintptr_t)dst, OP_V2 | OP_WRITE);
		th_fill(p, LEN, 40 + k);
		p = header(p + LEN, LEN, (uintptr_t)dst + LEN, OP_V2 | OP_WRITE);
		th_fill(p, LEN, 50 + k);
		assert_int_equal(th_send_all(fd, msg, cuts[k]), 0);
		if (k == 2) { /* EOF: the first status, then the close */
			assert_int_equal(shutdown(fd, SHUT_WR), 0);
			assert_int_equal(th_recv_until_close(fd, got, 8, CLOSE_MS),
					 8);
			assert_memory_equal(got, status_ok, 8);
			assert_int_equal(th_check(dst, LEN, 40 + k), -1);
			close(fd);
			continue;
		}
		assert_int_equal(th_recv_all(fd, got, 8, 300), -ETIMEDOUT);
		assert_int_equal(th_send_all(fd, msg + cuts[k],
					     sizeof(msg) - cuts[k]), 0);
		assert_int_equal(th_recv_all(fd, got, 16, CLOSE_MS), 16);
		assert_memory_equal(got, status_ok, 8);
		assert_memory_equal(got + 8, status_ok, 8);
		assert_int_equal(th_check(dst, LEN, 40 + k), -1);
		assert_int_equal(th_check(dst + LEN, LEN, 50 + k), -1);
		close(fd);
	}
}

/* A refused WRITE in the middle of a run: the requests before it are
 * answered, it gets status 1, then the close; the WRITE after it is not
 * served (the target reads no header past a refusal). */
static void test_raw_refused_mid_run(void **state)
{
	enum { W = 4096 };
	uint8_t msg[5 * 24 + 3 * W], got[256], *p = msg;
	int fd = th_connect(data_port);
	long r;

	(void)state;
	memset(tb, 0, 3 * W);
	th_fill(tb + 3 * W, 100, 21);
	p = header(p, W, (uintptr_t)tb, OP_V2 | OP_WRITE);
	th_fill(p, W, 22);
	p += W;
	p = header(p, 100, (uintptr_t)tb + 3 * W, OP_V2 | OP_READ);
	p = header(p, W, (uintptr_t)tb + TLEN - W / 2, OP_V2 | OP_WRITE);
	th_fill(p, W, 23);
	p += W;
	p = header(p, W, (uintptr_t)tb + W, OP_V2 | OP_WRITE);
	th_fill(p, W, 24);
	p += W;
	p = header(p, 100, (uintptr_t)tb + 3 * W, OP_V2 | OP_READ);
	assert_int_equal(th_send_all(fd, msg, (size_t)(p - msg)), 0);
	r = th_recv_until_close(fd, got, sizeof(got), CLOSE_MS);
	assert_int_equal(r, 8 + 8 + 100 + 8);
	assert_memory_equal(got, status_ok, 8);
	assert_memory_equal(got + 8, status_ok, 8);
	assert_int_equal(th_check(got + 16, 100, 21), -1);
	assert_memory_equal(got + 116, status_refused, 8);
	assert_int_equal(th_check(tb, W, 22), -1);
	assert_int_equal(th_check_byte(tb + W, W, 0), -1);
	close(fd);
}

/*
 * A READ then a WRITE of the same bytes, sent together, 200 times: the
 * READ gets the bytes from before the WRITE, the WRITE is in place.
 * Sizes in turn: a WRITE payload that comes along with the headers, and
 * one too large for the target's read-ahead (read straight into place).
 */
static void test_raw_read_then_write(void **state)
{
	enum { ROUNDS = 200, BIG = 64 << 10 };
	uint8_t *msg = malloc(2 * 24 + BIG), *got = malloc(8 + BIG + 8), *p;
	int fd = th_connect(data_port), stale = 0;

	(void)state;
	assert_non_null(msg);
	assert_non_null(got);
	for (int r = 0; r < ROUNDS; r++) {
		size_t len = r % 2 ? BIG : 512;

		th_fill(tb, len, 1000 + r);
		p = header(msg, len, (uintptr_t)tb, OP_V2 | OP_READ);
		p = header(p, len, (uintptr_t)tb, OP_V2 | OP_WRITE);
		th_fill(p, len, 5000 + r);
		p += len;
		assert_int_equal(th_send_all(fd, msg, (size_t)(p - msg)), 0);
		assert_int_equal(th_recv_all(fd, got, 8 + len + 8, CLOSE_MS),
				 (long)(8 + len + 8));
		assert_memory_equal(got, status_ok, 8);
		assert_memory_equal(got + 8 + len, status_ok, 8);
		stale += th_check(got + 8, len, 1000 + r) != -1;
		assert_int_equal(th_check(tb, len, 5000 + r), -1);
	}
	if (stale)
		fail_msg("%d of %d READs got the WRITE behind them", stale,
			 ROUNDS);
	close(fd);
	free(got);
	free(msg);
}

/*
 * An initiator engine with one worker and @p conns connections a peer,
 * @p len bytes at @p mem registered, T's segment open in *@p seg. With
 * @p gone, T's buffer gone is registered while it opens and unregistered
 * after: its descriptor still lists it, so requests to it go out and the
 * target refuses them.
 */
static struct xfer_engine *initiator(int conns, void *mem, size_t len,
				     bool with_gone, int64_t *seg)
{
	struct xfer_config *cfg = th_config();
	struct xfer_engine *e;

	th_set(cfg, "bind_addr", "127.0.0.1");
	th_set(cfg, "local_server_name", "127.0.0.1");
	th_set(cfg, "workers", "1");
	th_set_num(cfg, "tcp_conns", conns);
	e = xfer_engine_new(cfg);
	xfer_config_free(cfg);
	assert_non_null(e);
	assert_int_equal(xfer_register(e, mem, len, "cpu:0", true), 0);
	if (with_gone)
		assert_int_equal(xfer_register(T, gone, GONE_LEN, "cpu:0",
					       true), 0);
	*seg = xfer_segment_open(e, xfer_engine_name(T));
	assert_true(*seg >= 0);
	if (with_gone)
		assert_int_equal(xfer_unregister(T, gone), 0);
	return e;
}

/*
 * One batch from an engine with @p conns connections: small and large
 * WRITEs and READs in turn, and in the middle a 4 KiB WRITE to a buffer
 * the target unregistered after the initiator's open (its descriptor
 * still lists it, so the request goes out and the target refuses it).
 */
static void mixed_batch(int conns)
{
	enum { N = 41, MID = 20, SMALL = 4096, LARGE = 300000, SLOT = 320 << 10 };
	struct xfer_request reqs[N];
	struct xfer_batch *b;
	uint8_t *ib = th_alloc(N * SLOT);
	int64_t seg;
	struct xfer_engine *e = initiator(conns, ib, N * SLOT, true, &seg);

	/* slot i: i even WRITEs local -> target, i odd READs target -> local */
	memset(tb, 0, TLEN);
	memset(ib, 0, N * SLOT);
	for (int i = 0; i < N; i++) {
		size_t len = i % 4 < 2 ? SMALL : LARGE;
		size_t off = (size_t)i * (TLEN / N);

		reqs[i] = (struct xfer_request){
			.opcode = i % 2 ? XFER_READ : XFER_WRITE,
			.source = ib + (size_t)i * SLOT,
			.target_id = seg,
			.target_offset = (uintptr_t)tb + off,
			.length = len,
		};
		if (i % 2)
			th_fill(tb + off, len, 300 + i);
		else
			th_fill(ib + (size_t)i * SLOT, len, 300 + i);
	}
	reqs[MID].opcode = XFER_WRITE;
	reqs[MID].target_offset = (uintptr_t)gone;
	reqs[MID].length = SMALL;

	b = xfer_batch_new(e, N);
	assert_non_null(b);
	assert_int_equal(xfer_batch_submit(b, reqs, N), 0);
	assert_int_equal(xfer_batch_wait(b, 30000), 0);
	for (int i = 0; i < N; i++) {
		struct xfer_task_status st;
		size_t off = (size_t)i * (TLEN / N);

		assert_int_equal(xfer_batch_status(b, i, &st), 0);
		if (i == MID) {
			th_assert_status(st.status, XFER_FAILED);
			continue;
		}
		if (st.status != XFER_COMPLETED)
			fail_msg("%d connection(s): task %d (%s of %zu) ended %s",
				 conns, i, i % 2 ? "READ" : "WRITE",
				 reqs[i].length, xfer_status_str(st.status));
		assert_int_equal(st.transferred, reqs[i].length);
		if (i % 2)
			assert_int_equal(th_check(ib + (size_t)i * SLOT,
						  reqs[i].length, 300 + i), -1);
		else
			assert_int_equal(th_check(tb + off, reqs[i].length,
						  300 + i), -1);
	}
	assert_int_equal(xfer_batch_free(b), 0);
	assert_int_equal(xfer_segment_close(e, seg), 0);
	xfer_engine_free(e);
	free(ib);
}

static void test_engine_refused_mid_batch(void **state)
{
	(void)state;
	mixed_batch(1);
	mixed_batch(2);
}

/* How many times @p needle occurs in the file at @p path. */
static int count_in(const char *path, const char *needle)
{
	FILE *f = fopen(path, "r");
	char line[512];
	int n = 0;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		n += strstr(line, needle) != NULL;
	fclose(f);
	return n;
}

/*
 * A WRITE of GONE_LEN (128 slices) to a buffer the target unregistered
 * after the initiator's open, between two tasks that are served, on two
 * connections: the task fails, the others complete, and the target
 * refuses its slices once per connection (its log says each), not once
 * a slice: the slices of a failed task do not go again. (They did, a
 * connection and a round each, 80 to 330 ms for this task.) What it
 * refuses is a run of 16 slices, 1 MiB, as one request: a task's
 * adjacent slices go together (they went one request each).
 */
static void test_refused_task_fails_at_once(void **state)
{
	enum { CONNS = 2, LEN = 256 << 10 };
	struct xfer_request reqs[3];
	struct xfer_engine *e;
	struct xfer_batch *b;
	uint8_t *ib = th_alloc(GONE_LEN);
	char log[] = "/tmp/it_tcp_runs.XXXXXX";
	int fd = mkstemp(log), saved, refusals, runs;
	int64_t seg, t0, took;

	(void)state;
	assert_true(fd >= 0);
	e = initiator(CONNS, ib, GONE_LEN, true, &seg);
	th_fill(ib, LEN, 41);
	th_fill(tb + LEN, LEN, 42);
	memset(tb, 0, LEN);
	reqs[0] = (struct xfer_request){ XFER_WRITE, ib, seg, (uintptr_t)tb,
					 LEN };
	reqs[1] = (struct xfer_request){ XFER_WRITE, ib, seg, (uintptr_t)gone,
					 GONE_LEN };
	reqs[2] = (struct xfer_request){ XFER_READ, ib + LEN, seg,
					 (uintptr_t)tb + LEN, LEN };

	fflush(stderr);
	saved = dup(STDERR_FILENO);
	dup2(fd, STDERR_FILENO);
	t0 = th_now_ms();
	b = xfer_batch_new(e, 3);
	assert_non_null(b);
	assert_int_equal(xfer_batch_submit(b, reqs, 3), 0);
	assert_int_equal(xfer_batch_wait(b, 30000), 0);
	took = th_now_ms() - t0;
	dup2(saved, STDERR_FILENO);
	close(saved);
	close(fd);

	for (int i = 0; i < 3; i++) {
		struct xfer_task_status st;

		assert_int_equal(xfer_batch_status(b, i, &st), 0);
		th_assert_status(st.status, i == 1 ? XFER_FAILED
						   : XFER_COMPLETED);
	}
	assert_int_equal(th_check(tb, LEN, 41), -1);
	assert_int_equal(th_check(ib + LEN, LEN, 42), -1);
	refusals = count_in(log, "tcp: refused write");
	runs = count_in(log, "tcp: refused write of 1048576 bytes");
	unlink(log);
	print_message("    %d refusals, the batch done in %lld ms\n", refusals,
		      (long long)took);
	if (refusals < 1 || refusals > CONNS)
		fail_msg("%d refusals of a task's slices, want 1 to %d",
			 refusals, CONNS);
	if (runs != refusals)
		fail_msg("%d of %d refused requests are 1 MiB runs", runs,
			 refusals);
	assert_int_equal(xfer_batch_free(b), 0);
	assert_int_equal(xfer_segment_close(e, seg), 0);
	xfer_engine_free(e);
	free(ib);
}

/*
 * Batches of 32 READs of 1 MiB (16 slices each) on two connections, back
 * to back for 3 s: the target reads their headers ahead of room in its
 * reply ring, and those it holds once every reply went out must be
 * served without a read event (the socket is empty by then: the
 * initiator waits for the replies). Each batch must end within 10 s.
 */
static void test_large_reads_read_ahead(void **state)
{
	enum { N = 32, LEN = 1 << 20 };
	struct xfer_request reqs[N];
	struct xfer_engine *e;
	uint8_t *ib = th_alloc((size_t)N * LEN);
	int64_t seg, end;
	int batches = 0;

	(void)state;
	e = initiator(2, ib, (size_t)N * LEN, false, &seg);
	th_fill(tb, (size_t)N * LEN, 77);
	memset(ib, 0, (size_t)N * LEN);
	for (int i = 0; i < N; i++)
		reqs[i] = (struct xfer_request){
			XFER_READ, ib + (size_t)i * LEN, seg,
			(uintptr_t)tb + (size_t)i * LEN, LEN,
		};
	end = th_now_ms() + 3000;
	while (th_now_ms() < end) {
		struct xfer_batch *b = xfer_batch_new(e, N);

		assert_non_null(b);
		assert_int_equal(xfer_batch_submit(b, reqs, N), 0);
		if (xfer_batch_wait(b, 10000))
			fail_msg("batch %d of 32 x 1 MiB READs: not done in "
				 "10 s", batches);
		for (int i = 0; i < N; i++) {
			struct xfer_task_status st;

			assert_int_equal(xfer_batch_status(b, i, &st), 0);
			th_assert_status(st.status, XFER_COMPLETED);
		}
		assert_int_equal(xfer_batch_free(b), 0);
		batches++;
	}
	/* back to back, so the bytes are checked once, at the end */
	assert_int_equal(th_check(ib, (size_t)N * LEN, 77), -1);
	print_message("%d batches of 32 x 1 MiB READs\n", batches);
	assert_int_equal(xfer_segment_close(e, seg), 0);
	xfer_engine_free(e);
	free(ib);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_raw_run),
		cmocka_unit_test(test_raw_small_writes),
		cmocka_unit_test(test_raw_split_request),
		cmocka_unit_test(test_raw_refused_mid_run),
		cmocka_unit_test(test_raw_read_then_write),
		cmocka_unit_test(test_engine_refused_mid_batch),
		cmocka_unit_test(test_refused_task_fails_at_once),
		cmocka_unit_test(test_large_reads_read_ahead),
	};

	return cmocka_run_group_tests_name("tcp: runs of requests", tests,
					   setup, teardown);
}
