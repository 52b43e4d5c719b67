/*
 * The TCP data port against peers that hold on (issue 13, defects 2 and
 * 6): idle and half-header connections closed after the idle timeout
 * while a good peer keeps working, at most max_data_conns connections
 * (the oldest silent ones closed for new ones),
 * xfer_unregister() not held hostage by a peer that pins the buffer (a
 * half-sent WRITE, READ replies never read), and every reply owed to a
 * peer that half-closed delivered.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <xfer/event.h>
#include <xfer/xfer.h>

#include "core/desc_internal.h"
#include "test/helpers.h"
#include "test/th_harden.h"

#define OP_V2 0x80
#define OP_WRITE 1
#define OP_READ 0
#define MIB (1u << 20)
#define MARK 0xEE

static const uint8_t status_ok[8] = { 0, 0, 0, 0, 0x56, 0x54, 0x43, 0x4d };

/* A target engine with @p kv and @p len registered bytes. */
struct target {
	struct xfer_engine *e;
	uint8_t *mem;
	size_t len;
	uint16_t data_port;
};

static void target_new(struct target *t, size_t len, const char *const *kv)
{
	struct xfer_desc *d;

	t->e = hd_engine(1, kv);
	t->len = len;
	t->mem = th_alloc(len);
	memset(t->mem, 0, len);
	assert_int_equal(xfer_register(t->e, t->mem, len, "cpu:0", true), 0);
	d = th_fetch_desc(xfer_engine_rpc_port(t->e));
	t->data_port = th_tcp(d)->data_port;
	xfer_desc_free(d);
}

static void target_free(struct target *t)
{
	assert_int_equal(th_unregister(t->e, t->mem), 0);
	xfer_engine_free(t->e);
	free(t->mem);
}

static void good(struct target *t)
{
	hd_good_transfer(xfer_engine_name(t->e), (uintptr_t)t->mem + 100,
			 t->mem + 100, NULL);
}

static void header(uint8_t h[24], uint64_t size, const void *addr,
		   uint8_t op)
{
	memset(h, 0, 24);
	th_put_le64(h, size);
	th_put_le64(h + 8, (uintptr_t)addr);
	h[16] = op;
}

/* How many of @p fds (-1 entries skipped) their peer has closed; closes
 * those and marks them -1. */
static int reap_closed(int *fds, int n)
{
	int closed = 0;

	for (int i = 0; i < n; i++)
		if (fds[i] >= 0 && hd_peer_closed(fds[i])) {
			close(fds[i]);
			fds[i] = -1;
			closed++;
		}
	return closed;
}

/* ---- idle and half-header connections ---- */

#define NIDLE 2000
#define IDLE_MS 1000

static void test_idle_connections_closed(void **state)
{
	static const char *const kv[] = { "conn_idle_timeout_ms", "1000", NULL };
	static const uint8_t junk[10] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };
	struct target t;
	int *fds = malloc(NIDLE * sizeof(int)), closed = 0;
	int64_t start, end;
	double cpu;

	(void)state;
	assert_non_null(fds);
	target_new(&t, MIB, kv);
	start = th_now_ms();
	for (int i = 0; i < NIDLE; i++) {
		fds[i] = th_connect(t.data_port);
		if (i % 2) /* half a request header */
			assert_int_equal(th_send_all(fds[i], junk, sizeof(junk)),
					 0);
	}
	good(&t); /* a good peer is served meanwhile */
	cpu = xfer_engine_cpu_seconds(t.e);
	end = th_now_ms() + IDLE_MS + 4000;
	while (closed < NIDLE && th_now_ms() < end) {
		usleep(50000);
		closed += reap_closed(fds, NIDLE);
	}
	cpu = xfer_engine_cpu_seconds(t.e) - cpu;
	print_message("%d idle and half-header connections: %d closed by the "
		      "target within %lld ms of the first (idle timeout %d "
		      "ms), %.2f CPU s meanwhile\n", NIDLE, closed,
		      (long long)(th_now_ms() - start), IDLE_MS, cpu);
	for (int i = 0; i < NIDLE; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	free(fds);
	assert_int_equal(closed, NIDLE);
	assert_true(cpu < 0.5);
	good(&t);
	target_free(&t);
}

/*
 * The target closes an idle connection while the initiator is not
 * looking: the initiator runs on this test's event_base (plugin mode, no
 * worker), not dispatched while the target's idle timeout passes. Its
 * next WRITE finds the close and goes out on a new connection.
 */
static void on_opened(struct xfer_engine *e, int64_t seg, void *arg)
{
	(void)e;
	*(int64_t *)arg = seg;
}

static void on_batch(struct xfer_batch *b, enum xfer_status st, void *arg)
{
	(void)b;
	*(int *)arg = (int)st + 1;
}

static void test_idle_close_race(void **state)
{
	static const char *const kv[] = { "conn_idle_timeout_ms", "200", NULL };
	struct event_base *base = event_base_new();
	struct xfer_config *cfg = th_config();
	struct xfer_engine *i;
	uint8_t *buf = th_alloc(65536);
	int64_t seg = INT64_MIN;
	struct target t;

	(void)state;
	target_new(&t, MIB, kv);
	th_set(cfg, "bind_addr", "127.0.0.1");
	th_set(cfg, "local_server_name", "127.0.0.1");
	th_set(cfg, "workers", "0");
	i = xfer_engine_new_on_base(base, cfg);
	xfer_config_free(cfg);
	assert_non_null(i);
	assert_int_equal(xfer_register(i, buf, 65536, "cpu:0", true), 0);
	assert_int_equal(xfer_segment_open_async(i, xfer_engine_name(t.e),
						 on_opened, &seg), 0);
	assert_true(th_run_until(base, seg != INT64_MIN, 5000));
	assert_true(seg >= 0);
	for (int round = 0; round < 2; round++) {
		struct xfer_request r = { XFER_WRITE, buf, seg,
					  (uintptr_t)t.mem, 65536 };
		struct xfer_batch *b = xfer_batch_new(i, 1);
		int done = 0;

		th_fill(buf, 65536, 300 + round);
		assert_int_equal(xfer_batch_set_callback(b, on_batch, &done), 0);
		assert_int_equal(xfer_batch_submit(b, &r, 1), 0);
		assert_true(th_run_until(base, done, 5000));
		th_assert_status(done - 1, XFER_COMPLETED);
		assert_int_equal(th_check(t.mem, 65536, 300 + round), -1);
		assert_int_equal(xfer_batch_free(b), 0);
		/* the target closes the connection; we do not look */
		usleep(600000);
	}
	xfer_engine_free(i);
	event_base_free(base);
	free(buf);
	target_free(&t);
}

/* ---- the connection cap ---- */

#define CAP 64
#define OVER 100

static void test_connection_cap(void **state)
{
	static const char *const kv[] = { "max_data_conns", "64", NULL };
	struct target t;
	int fds[OVER], closed = 0;
	int64_t end;

	(void)state;
	target_new(&t, MIB, kv);
	for (int i = 0; i < OVER; i++)
		fds[i] = th_connect(t.data_port);
	end = th_now_ms() + 2000;
	while (closed < OVER - CAP && th_now_ms() < end) {
		usleep(20000);
		closed += reap_closed(fds, OVER);
	}
	usleep(100000);
	closed += reap_closed(fds, OVER);
	print_message("max_data_conns %d: %d of %d connections closed at "
		      "once\n", CAP, closed, OVER);
	assert_int_equal(closed, OVER - CAP);
	/* silent ones all: the oldest made room for the newer */
	for (int i = 0; i < OVER; i++)
		assert_true((fds[i] < 0) == (i < OVER - CAP));
	good(&t); /* and for a good peer, the cap reached */
	for (int i = 0; i < OVER; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	target_free(&t);
}

/* ---- half-close: every reply owed is delivered ---- */

static void test_half_close_delivers_replies(void **state)
{
	enum { N = 8 };
	const size_t want = N * (8 + MIB);
	struct target t;
	uint8_t h[N * 24], *got = malloc(want);
	int fd;
	long r;

	(void)state;
	assert_non_null(got);
	target_new(&t, N * MIB, NULL);
	th_fill(t.mem, N * MIB, 77);
	fd = th_connect(t.data_port);
	for (int i = 0; i < N; i++)
		header(h + 24 * i, MIB, t.mem + (size_t)i * MIB, OP_V2 | OP_READ);
	assert_int_equal(th_send_all(fd, h, sizeof(h)), 0);
	assert_int_equal(shutdown(fd, SHUT_WR), 0);
	r = th_recv_until_close(fd, got, want, 5000);
	close(fd);
	print_message("8 READs of 1 MiB then shutdown(SHUT_WR): %ld of %zu "
		      "bytes delivered\n", r, want);
	assert_int_equal(r, (long)want);
	for (int i = 0; i < N; i++) {
		uint8_t *rep = got + (size_t)i * (8 + MIB);

		assert_memory_equal(rep, status_ok, 8);
		assert_memory_equal(rep + 8, t.mem + (size_t)i * MIB, MIB);
	}
	free(got);
	good(&t);
	target_free(&t);
}

/* ---- unregister with a peer pinning the buffer ---- */

#define TIMEOUT_MS 1000
static const char *const short_timeout[] = {
	"transfer_timeout_ms", "1000", NULL,
};

/* xfer_unregister() of @p addr, retried on -EBUSY for 4 s (the old
 * behaviour): @return its last result; *ms the time it took, *busy the
 * -EBUSY answers. */
static int unregister_timed(struct xfer_engine *e, void *addr, int64_t *ms,
			    int *busy)
{
	int64_t start = th_now_ms();
	int ret;

	*busy = 0;
	while ((ret = xfer_unregister(e, addr)) == -EBUSY &&
	       th_now_ms() - start < 4000) {
		(*busy)++;
		usleep(10000);
	}
	*ms = th_now_ms() - start;
	return ret;
}

static void test_unregister_half_sent_write(void **state)
{
	const size_t len = 4 * MIB, first = 1000;
	struct target t;
	uint8_t *big = th_alloc(len), *payload = th_alloc(len), h[24];
	volatile uint8_t *probe = big;
	int64_t ms, end;
	int fd, busy, ret;

	(void)state;
	target_new(&t, MIB, short_timeout);
	memset(big, 0, len);
	th_fill(payload, len, 91);
	payload[first - 1] |= 1;
	assert_int_equal(xfer_register(t.e, big, len, "cpu:0", true), 0);
	fd = th_connect(t.data_port);
	header(h, len, big, OP_V2 | OP_WRITE);
	assert_int_equal(th_send_all(fd, h, 24), 0);
	assert_int_equal(th_send_all(fd, payload, first), 0);
	end = th_now_ms() + 2000;
	while (probe[first - 1] != payload[first - 1] && th_now_ms() < end)
		usleep(1000);
	assert_int_equal(probe[first - 1], payload[first - 1]);

	ret = unregister_timed(t.e, big, &ms, &busy);
	print_message("half-sent WRITE pinning the buffer: xfer_unregister "
		      "%d after %lld ms (%d times -EBUSY before), transfer "
		      "timeout %d ms\n", ret, (long long)ms, busy, TIMEOUT_MS);
	assert_int_equal(ret, 0);
	assert_int_equal(busy, 0);
	assert_true(ms <= TIMEOUT_MS + 1000);
	memset(big, MARK, len); /* the application's memory again */
	/* the peer is cut off: the rest never lands */
	(void)th_send_all(fd, payload + first, len - first);
	assert_true(th_recv_until_close(fd, NULL, 0, 3000) >= 0);
	close(fd);
	assert_int_equal(th_check_byte(big, len, MARK), -1);
	good(&t);
	target_free(&t);
	free(big);
	free(payload);
}

static void test_unregister_unread_replies(void **state)
{
	const size_t len = 32 * MIB;
	struct target t;
	uint8_t *big = th_alloc(len), *ref = th_alloc(len), *got = th_alloc(len);
	uint8_t h[24];
	int64_t ms;
	int fd, busy, ret;
	long r;

	(void)state;
	target_new(&t, MIB, short_timeout);
	th_fill(big, len, 92);
	memcpy(ref, big, len);
	assert_int_equal(xfer_register(t.e, big, len, "cpu:0", true), 0);
	fd = th_connect(t.data_port);
	header(h, len, big, OP_V2 | OP_READ);
	assert_int_equal(th_send_all(fd, h, 24), 0);
	usleep(100000); /* the socket buffers fill; nothing is read */

	ret = unregister_timed(t.e, big, &ms, &busy);
	print_message("READ replies never read, pinning the buffer: "
		      "xfer_unregister %d after %lld ms (%d times -EBUSY "
		      "before), transfer timeout %d ms\n", ret, (long long)ms,
		      busy, TIMEOUT_MS);
	assert_int_equal(ret, 0);
	assert_int_equal(busy, 0);
	assert_true(ms <= TIMEOUT_MS + 1000);
	memset(big, MARK, len);
	/* what the peer still gets was sent before: the bytes of before */
	r = th_recv_until_close(fd, got, len, 3000);
	close(fd);
	assert_true(r >= 8 && (size_t)r < len + 8);
	assert_memory_equal(got, status_ok, 8);
	assert_memory_equal(got + 8, ref, (size_t)r - 8);
	good(&t);
	target_free(&t);
	free(big);
	free(ref);
	free(got);
}

static void on_unregistered(struct xfer_engine *e, int result, void *arg)
{
	(void)e;
	atomic_store((atomic_int *)arg, result == 0 ? 1 : result);
}

/* The asynchronous form: 0 at once; the callback once the pin is gone. */
static void test_unregister_async_pinned(void **state)
{
	const size_t len = 4 * MIB;
	struct target t;
	uint8_t *big = th_alloc(len), h[24];
	atomic_int done = 0;
	int64_t start;
	int fd, ret;

	(void)state;
	target_new(&t, MIB, short_timeout);
	memset(big, 0, len);
	assert_int_equal(xfer_register(t.e, big, len, "cpu:0", true), 0);
	fd = th_connect(t.data_port);
	header(h, len, big, OP_V2 | OP_WRITE);
	assert_int_equal(th_send_all(fd, h, 24), 0);
	assert_int_equal(th_send_all(fd, big, 100), 0);
	usleep(100000);
	start = th_now_ms();
	ret = xfer_unregister_async(t.e, big, on_unregistered, &done);
	assert_int_equal(ret, 0);
	assert_true(th_wait_atomic(&done, 1, TIMEOUT_MS + 2000));
	print_message("xfer_unregister_async with a pinned buffer: callback "
		      "after %lld ms\n", (long long)(th_now_ms() - start));
	/* gone: a second unregister finds nothing */
	assert_int_equal(xfer_unregister(t.e, big), -ENOENT);
	close(fd);
	good(&t);
	target_free(&t);
	free(big);
}

/* The engine freed while a buffer waits for a peer's pin: the callback
 * never runs (as for batches), and nothing is left behind. */
static void test_free_while_leaving(void **state)
{
	const size_t len = 4 * MIB;
	struct target t;
	uint8_t *big = th_alloc(len), h[24];
	atomic_int done = 0;
	int fd;

	(void)state;
	target_new(&t, MIB, NULL);
	assert_int_equal(xfer_register(t.e, big, len, "cpu:0", true), 0);
	fd = th_connect(t.data_port);
	header(h, len, big, OP_V2 | OP_WRITE);
	assert_int_equal(th_send_all(fd, h, 24), 0);
	usleep(100000);
	assert_int_equal(xfer_unregister_async(t.e, big, on_unregistered,
					       &done), 0);
	target_free(&t);
	assert_int_equal(atomic_load(&done), 0);
	assert_true(th_recv_until_close(fd, NULL, 0, 3000) >= 0);
	close(fd);
	free(big);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_idle_connections_closed),
		cmocka_unit_test(test_idle_close_race),
		cmocka_unit_test(test_connection_cap),
		cmocka_unit_test(test_half_close_delivers_replies),
		cmocka_unit_test(test_unregister_half_sent_write),
		cmocka_unit_test(test_unregister_unread_replies),
		cmocka_unit_test(test_unregister_async_pinned),
		cmocka_unit_test(test_free_while_leaving),
	};

	return cmocka_run_group_tests_name("harden: data connections", tests,
					   NULL, NULL);
}
