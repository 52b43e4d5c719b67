/*
 * Robustness against the network, the TCP data port (PROTOCOL.md §3):
 * garbage, requests outside the registered buffers (v1 and v2), requests
 * inside them by hand, half-closes, and memory unregistered while a
 * peer's request is using it; after each a good engine-to-engine transfer
 * proving the engine still serves.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "test/helpers.h"
#include "test/th_robust.h"

#define OP_V2 0x80
#define OP_WRITE 1
#define OP_READ 0

static const uint8_t status_ok[8] = { 0, 0, 0, 0, 0x56, 0x54, 0x43, 0x4d };
static const uint8_t status_refused[8] = { 1, 0, 0, 0, 0x56, 0x54, 0x43, 0x4d };

static void data_header(uint8_t h[24], uint64_t size, uint64_t addr,
			uint8_t opcode, uint8_t pad)
{
	th_put_le64(h, size);
	th_put_le64(h + 8, addr);
	h[16] = opcode;
	memset(h + 17, pad, 7);
}

/* Send a header (and @payload_len bytes of @payload, if any) on a fresh
 * connection; @return everything the server sent before closing. */
static long data_refused(uint64_t size, uint64_t addr, uint8_t opcode,
			 const void *payload, size_t payload_len,
			 uint8_t *got, size_t cap)
{
	int fd = th_connect(F.data_port);
	uint8_t *msg = malloc(24 + payload_len);
	long r;

	assert_non_null(msg);
	data_header(msg, size, addr, opcode, 0);
	if (payload_len)
		memcpy(msg + 24, payload, payload_len);
	(void)th_send_all(fd, msg, 24 + payload_len);
	r = th_recv_until_close(fd, got, cap, CLOSE_MS);
	close(fd);
	free(msg);
	return r;
}

/* A v2 request outside the buffers gets status 1, then EOF. */
static void expect_v2_refused(const char *what, uint64_t size, uint64_t addr,
			      uint8_t opcode, const void *payload,
			      size_t payload_len)
{
	uint8_t got[64] = { 0 };
	long r = data_refused(size, addr, OP_V2 | opcode, payload, payload_len,
			      got, sizeof(got));

	if (r != 8 || memcmp(got, status_refused, 8) != 0)
		fail_msg("%s: %ld bytes (or -errno) instead of status 1 "
			 "then EOF; first: %02x %02x %02x %02x %02x %02x "
			 "%02x %02x", what, r, got[0], got[1], got[2], got[3],
			 got[4], got[5], got[6], got[7]);
}

/* A v1 request outside the buffers is closed without a byte. */
static void expect_v1_closed(const char *what, uint64_t size, uint64_t addr,
			     uint8_t opcode, const void *payload,
			     size_t payload_len)
{
	uint8_t got[64];
	long r = data_refused(size, addr, opcode, payload, payload_len, got,
			      sizeof(got));

	if (r != 0)
		fail_msg("%s: %ld bytes (or -errno) instead of a close", what, r);
}

static void test_data_garbage(void **state)
{
	uint8_t junk[64], ff[24];
	int idle[4];
	long r;

	(void)state;
	/* random bytes (byte 16 says v1 READ): closed without a byte */
	th_fill(junk, sizeof(junk), 123);
	junk[16] = 0x00;
	{
		int fd = th_connect(F.data_port);

		(void)th_send_all(fd, junk, sizeof(junk));
		r = th_recv_until_close(fd, NULL, 0, CLOSE_MS);
		if (r != 0)
			fail_msg("random bytes: %ld instead of a close", r);
		close(fd);
	}
	/* random bytes as a v1 WRITE */
	junk[16] = 0x01;
	{
		int fd = th_connect(F.data_port);

		(void)th_send_all(fd, junk, sizeof(junk));
		r = th_recv_until_close(fd, NULL, 0, CLOSE_MS);
		if (r != 0)
			fail_msg("random v1 WRITE: %ld instead of a close", r);
		close(fd);
	}
	/* all ones: a v2 READ of 2^64-1 bytes at 2^64-1 */
	memset(ff, 0xff, sizeof(ff));
	{
		int fd = th_connect(F.data_port);
		uint8_t got[16];

		assert_int_equal(th_send_all(fd, ff, sizeof(ff)), 0);
		r = th_recv_until_close(fd, got, sizeof(got), CLOSE_MS);
		if (r != 8 || memcmp(got, status_refused, 8) != 0)
			fail_msg("all-ones header: %ld bytes instead of status 1",
				 r);
		close(fd);
	}
	/* idle data connections (one with half a header) while a good
	 * transfer runs */
	for (int k = 0; k < 4; k++) {
		idle[k] = th_connect(F.data_port);
		if (k % 2)
			assert_int_equal(th_send_all(idle[k], ff, 10), 0);
	}
	assert_int_equal(th_check_byte(F.tb + TB_REG, TB_BLOCK - TB_REG,
				       TAIL_FILL), -1);
	good_transfer();
	for (int k = 0; k < 4; k++)
		close(idle[k]);
	good_transfer();
}

static void test_data_v2_read_outside(void **state)
{
	(void)state;
	expect_v2_refused("READ just past the buffer", 16, tb_addr(TB_REG),
			  OP_READ, NULL, 0);
	expect_v2_refused("READ at 0x1000", 16, 0x1000, OP_READ, NULL, 0);
	expect_v2_refused("READ over the end", 16, tb_addr(TB_REG - 8),
			  OP_READ, NULL, 0);
	expect_v2_refused("READ over the start", 16, tb_addr(0) - 8, OP_READ,
			  NULL, 0);
	expect_v2_refused("READ of 0 bytes", 0, tb_addr(0), OP_READ, NULL, 0);
	expect_v2_refused("READ of 2^64-1 bytes", UINT64_MAX, tb_addr(0),
			  OP_READ, NULL, 0);
	expect_v2_refused("READ wrapping around", 64, UINT64_MAX - 31,
			  OP_READ, NULL, 0);
	expect_v2_refused("READ of the whole block", TB_BLOCK, tb_addr(0),
			  OP_READ, NULL, 0);
	good_transfer();
}

static void test_data_v2_write_outside(void **state)
{
	uint8_t payload[16];

	(void)state;
	memset(payload, 0xEE, sizeof(payload));
	memset(F.tb + TB_REG - 64, 0x11, 64);
	expect_v2_refused("WRITE just past the buffer", 16, tb_addr(TB_REG),
			  OP_WRITE, payload, sizeof(payload));
	expect_v2_refused("WRITE over the end", 16, tb_addr(TB_REG - 8),
			  OP_WRITE, payload, sizeof(payload));
	expect_v2_refused("WRITE at 0x1000", 16, 0x1000, OP_WRITE, payload,
			  sizeof(payload));
	expect_v2_refused("WRITE of 0 bytes", 0, tb_addr(0), OP_WRITE, NULL, 0);
	expect_v2_refused("WRITE of 2^64-1 bytes", UINT64_MAX, tb_addr(16),
			  OP_WRITE, payload, sizeof(payload));
	/* not a byte written: not past the buffer, not its last bytes */
	assert_int_equal(th_check_byte(F.tb + TB_REG, TB_BLOCK - TB_REG,
				       TAIL_FILL), -1);
	assert_int_equal(th_check_byte(F.tb + TB_REG - 64, 64, 0x11), -1);
	good_transfer();
}

static void test_data_v1_outside(void **state)
{
	uint8_t payload[16];

	(void)state;
	memset(payload, 0xEE, sizeof(payload));
	memset(F.tb + TB_REG - 64, 0x11, 64);
	expect_v1_closed("v1 READ just past the buffer", 16, tb_addr(TB_REG),
			 OP_READ, NULL, 0);
	expect_v1_closed("v1 READ at 0x1000", 16, 0x1000, OP_READ, NULL, 0);
	expect_v1_closed("v1 WRITE just past the buffer", 16,
			 tb_addr(TB_REG), OP_WRITE, payload, sizeof(payload));
	expect_v1_closed("v1 WRITE over the end", 16, tb_addr(TB_REG - 8),
			 OP_WRITE, payload, sizeof(payload));
	assert_int_equal(th_check_byte(F.tb + TB_REG, TB_BLOCK - TB_REG,
				       TAIL_FILL), -1);
	assert_int_equal(th_check_byte(F.tb + TB_REG - 64, 64, 0x11), -1);
	good_transfer();
}

/* v2 inside a buffer: status 0 then exactly the bytes; requests follow
 * one another on one connection; padding is ignored. */
static void test_data_v2_inside(void **state)
{
	enum { RLEN = 100000, ROFF = 777, WLEN = 5000, WOFF = 120000 };
	int fd = th_connect(F.data_port);
	uint8_t h[24], st[8];
	uint8_t *got = malloc(RLEN), *wdata = malloc(WLEN);

	(void)state;
	assert_non_null(got);
	assert_non_null(wdata);
	th_fill(F.tb + ROFF, RLEN, 31);
	memset(F.tb + WOFF - 16, 0x22, WLEN + 32);
	th_fill(wdata, WLEN, 32);

	/* READ, garbage in the padding */
	data_header(h, RLEN, tb_addr(ROFF), OP_V2 | OP_READ, 0xEE);
	assert_int_equal(th_send_all(fd, h, 24), 0);
	assert_int_equal(th_recv_all(fd, st, 8, CLOSE_MS), 8);
	assert_memory_equal(st, status_ok, 8);
	assert_int_equal(th_recv_all(fd, got, RLEN, CLOSE_MS), RLEN);
	assert_int_equal(th_check(got, RLEN, 31), -1);

	/* WRITE on the same connection: status 0 once it is in memory */
	data_header(h, WLEN, tb_addr(WOFF), OP_V2 | OP_WRITE, 0);
	assert_int_equal(th_send_all(fd, h, 24), 0);
	assert_int_equal(th_send_all(fd, wdata, WLEN), 0);
	assert_int_equal(th_recv_all(fd, st, 8, CLOSE_MS), 8);
	assert_memory_equal(st, status_ok, 8);
	assert_int_equal(th_check(F.tb + WOFF, WLEN, 32), -1);
	assert_int_equal(th_check_byte(F.tb + WOFF - 16, 16, 0x22), -1);
	assert_int_equal(th_check_byte(F.tb + WOFF + WLEN, 16, 0x22), -1);

	/* READ it back, opcode 0x85: low bits other than 1 mean READ */
	data_header(h, WLEN, tb_addr(WOFF), 0x85, 0);
	assert_int_equal(th_send_all(fd, h, 24), 0);
	assert_int_equal(th_recv_all(fd, st, 8, CLOSE_MS), 8);
	assert_memory_equal(st, status_ok, 8);
	assert_int_equal(th_recv_all(fd, got, WLEN, CLOSE_MS), WLEN);
	assert_int_equal(th_check(got, WLEN, 32), -1);

	/* the last byte of the buffer, exactly */
	F.tb[TB_REG - 1] = 0x9C;
	data_header(h, 1, tb_addr(TB_REG - 1), OP_V2 | OP_READ, 0);
	assert_int_equal(th_send_all(fd, h, 24), 0);
	assert_int_equal(th_recv_all(fd, st, 8, CLOSE_MS), 8);
	assert_memory_equal(st, status_ok, 8);
	assert_int_equal(th_recv_all(fd, got, 1, CLOSE_MS), 1);
	assert_int_equal(got[0], 0x9C);

	/* nothing more comes: our EOF ends the connection */
	assert_int_equal(shutdown(fd, SHUT_WR), 0);
	assert_int_equal(th_recv_until_close(fd, NULL, 0, CLOSE_MS), 0);
	close(fd);
	free(got);
	free(wdata);
	good_transfer();
}

/* v1 inside a buffer: the bytes with no status frame. */
static void test_data_v1_inside(void **state)
{
	enum { RLEN = (64 << 10) + 1, ROFF = 333, WLEN = 3000, WOFF = 90000 };
	int fd = th_connect(F.data_port);
	uint8_t h[24];
	uint8_t *got = malloc(RLEN), *wdata = malloc(WLEN);

	(void)state;
	assert_non_null(got);
	assert_non_null(wdata);
	th_fill(F.tb + ROFF, RLEN, 41);
	th_fill(wdata, WLEN, 42);
	memset(F.tb + WOFF, 0, WLEN);

	data_header(h, RLEN, tb_addr(ROFF), OP_READ, 0);
	assert_int_equal(th_send_all(fd, h, 24), 0);
	assert_int_equal(th_recv_all(fd, got, RLEN, CLOSE_MS), RLEN);
	assert_int_equal(th_check(got, RLEN, 41), -1);

	data_header(h, WLEN, tb_addr(WOFF), OP_WRITE, 0);
	assert_int_equal(th_send_all(fd, h, 24), 0);
	assert_int_equal(th_send_all(fd, wdata, WLEN), 0);

	/* the READ after it sees the WRITE (one request after another) */
	data_header(h, WLEN, tb_addr(WOFF), OP_READ, 0);
	assert_int_equal(th_send_all(fd, h, 24), 0);
	assert_int_equal(th_recv_all(fd, got, WLEN, CLOSE_MS), WLEN);
	assert_int_equal(th_check(got, WLEN, 42), -1);
	assert_int_equal(th_check(F.tb + WOFF, WLEN, 42), -1);

	assert_int_equal(shutdown(fd, SHUT_WR), 0);
	assert_int_equal(th_recv_until_close(fd, NULL, 0, CLOSE_MS), 0);
	close(fd);
	free(got);
	free(wdata);
	good_transfer();
}

/* A client may half-close after its last WRITE: the status frame of that
 * WRITE still comes, then EOF. */
static void test_data_v2_write_then_half_close(void **state)
{
	enum { WLEN = 3000, WOFF = 50000 };
	int fd = th_connect(F.data_port);
	uint8_t msg[24 + WLEN], got[16];
	long r;

	(void)state;
	memset(F.tb + WOFF, 0, WLEN);
	data_header(msg, WLEN, tb_addr(WOFF), OP_V2 | OP_WRITE, 0);
	th_fill(msg + 24, WLEN, 71);
	assert_int_equal(th_send_all(fd, msg, sizeof(msg)), 0);
	assert_int_equal(shutdown(fd, SHUT_WR), 0);
	r = th_recv_until_close(fd, got, sizeof(got), CLOSE_MS);
	assert_int_equal(th_check(F.tb + WOFF, WLEN, 71), -1);
	if (r != 8 || memcmp(got, status_ok, 8) != 0)
		fail_msg("WRITE then half-close: %ld bytes (or -errno) instead "
			 "of status 0 then EOF", r);
	close(fd);
	good_transfer();
}

/* A refused request ends its connection, not the others. */
static void test_data_refusal_is_per_connection(void **state)
{
	int good = th_connect(F.data_port);
	uint8_t h[24], st[8], got[32];

	(void)state;
	th_fill(F.tb + 64, 32, 51);
	expect_v2_refused("READ past the buffer", 16, tb_addr(TB_REG), OP_READ,
			  NULL, 0);
	data_header(h, 32, tb_addr(64), OP_V2 | OP_READ, 0);
	assert_int_equal(th_send_all(good, h, 24), 0);
	assert_int_equal(th_recv_all(good, st, 8, CLOSE_MS), 8);
	assert_memory_equal(st, status_ok, 8);
	assert_int_equal(th_recv_all(good, got, 32, CLOSE_MS), 32);
	assert_int_equal(th_check(got, 32, 51), -1);
	close(good);
	good_transfer();
}

/* ---- unregistering memory a peer is using ---- */

/*
 * xfer_register: "it must stay mapped until xfer_unregister()", so once
 * xfer_unregister() returns 0 the engine must not touch the memory again,
 * also not for a peer's request that started before. (Returning -EBUSY
 * while a peer's request is in progress is acceptable too.)
 */
#define BIG (32u << 20)
#define MARK 0xEE

static void set_send_timeout(int fd, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv,
				    sizeof(tv)), 0);
}

static void test_unregister_during_remote_read(void **state)
{
	uint8_t *big = th_alloc(BIG), *ref = th_alloc(BIG);
	uint8_t *chunk = malloc(1u << 20);
	int fd = th_connect(F.data_port);
	uint8_t h[24], st[8];
	size_t got = 0, bad_at = SIZE_MAX;
	int ret;

	(void)state;
	assert_non_null(chunk);
	th_fill(ref, BIG, 61);
	memcpy(big, ref, BIG);
	assert_int_equal(xfer_register(F.t, big, BIG, "cpu:0", true), 0);

	/* a READ of all of it; take the status and the first MiB: the rest
	 * cannot fit in the socket buffers, so the server is mid-request */
	data_header(h, BIG, (uintptr_t)big, OP_V2 | OP_READ, 0);
	assert_int_equal(th_send_all(fd, h, 24), 0);
	assert_int_equal(th_recv_all(fd, st, 8, CLOSE_MS), 8);
	assert_memory_equal(st, status_ok, 8);
	assert_int_equal(th_recv_all(fd, chunk, 1u << 20, CLOSE_MS), 1u << 20);
	assert_memory_equal(chunk, ref, 1u << 20);
	got = 1u << 20;

	ret = xfer_unregister(F.t, big);
	if (ret == 0)
		memset(big, MARK, BIG); /* the application reuses its memory */
	else
		assert_int_equal(ret, -EBUSY);

	/* whatever still comes must be the bytes from before */
	while (got < BIG) {
		size_t want = BIG - got < (1u << 20) ? BIG - got : (1u << 20);
		long n = th_recv_all(fd, chunk, want, CLOSE_MS);

		assert_true(n >= 0);
		if (bad_at == SIZE_MAX && memcmp(chunk, ref + got, (size_t)n))
			for (long k = 0; k < n; k++)
				if (chunk[k] != ref[got + k]) {
					bad_at = got + (size_t)k;
					break;
				}
		got += (size_t)n;
		if ((size_t)n < want)
			break; /* closed */
	}
	close(fd);
	if (bad_at != SIZE_MAX)
		fail_msg("xfer_unregister returned %d while a peer's READ was "
			 "in progress; the peer then got memory written after "
			 "it (first changed byte at offset %zu of %u; %zu bytes "
			 "sent in all)", ret, bad_at, BIG, got);
	if (ret != 0)
		assert_int_equal(th_unregister(F.t, big), 0);
	free(chunk);
	free(ref);
	free(big);
	good_transfer();
}

static void test_unregister_during_remote_write(void **state)
{
	uint8_t *big = th_alloc(BIG), *payload = th_alloc(BIG);
	volatile uint8_t *probe = big;
	int fd = th_connect(F.data_port);
	const size_t first = 1u << 20;
	uint8_t h[24], st[8];
	int64_t end;
	long r;
	int ret, sret;

	(void)state;
	memset(big, 0, BIG);
	th_fill(payload, BIG, 62);
	payload[first - 1] |= 1; /* non-zero: the probe below sees it land */
	assert_int_equal(xfer_register(F.t, big, BIG, "cpu:0", true), 0);
	set_send_timeout(fd, CLOSE_MS);

	/* a WRITE of all of it, the first MiB now */
	data_header(h, BIG, (uintptr_t)big, OP_V2 | OP_WRITE, 0);
	assert_int_equal(th_send_all(fd, h, 24), 0);
	assert_int_equal(th_send_all(fd, payload, first), 0);
	/* the server is mid-request once that MiB is in memory */
	end = th_now_ms() + CLOSE_MS;
	while (probe[first - 1] != payload[first - 1] && th_now_ms() < end)
		;
	assert_int_equal(probe[first - 1], payload[first - 1]);

	ret = xfer_unregister(F.t, big);
	if (ret == 0)
		memset(big, MARK, BIG); /* the application reuses its memory */
	else
		assert_int_equal(ret, -EBUSY);

	/* the rest: the server may close (a failed send is fine) */
	sret = th_send_all(fd, payload + first, BIG - first);
	if (sret == -EAGAIN || sret == -EWOULDBLOCK)
		fail_msg("after xfer_unregister (%d) the server neither reads "
			 "the WRITE's payload nor closes", ret);
	/* its answer: a status frame, or a close */
	r = th_recv_all(fd, st, sizeof(st), CLOSE_MS);
	assert_true(r >= 0);
	close(fd);
	if (ret == 0) {
		long k = th_check_byte(big, BIG, MARK);

		if (k != -1)
			fail_msg("xfer_unregister returned 0 while a peer's "
				 "WRITE was in progress; the server then wrote "
				 "into the memory (first changed byte at offset "
				 "%ld of %u; the server answered %ld bytes)", k,
				 BIG, r);
	} else {
		/* still registered: the WRITE completed */
		assert_int_equal(sret, 0);
		assert_int_equal(r, 8);
		assert_memory_equal(st, status_ok, 8);
		assert_memory_equal(big, payload, BIG);
		assert_int_equal(th_unregister(F.t, big), 0);
	}
	free(payload);
	free(big);
	good_transfer();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_data_garbage),
		cmocka_unit_test(test_data_v2_read_outside),
		cmocka_unit_test(test_data_v2_write_outside),
		cmocka_unit_test(test_data_v1_outside),
		cmocka_unit_test(test_data_v2_inside),
		cmocka_unit_test(test_data_v1_inside),
		cmocka_unit_test(test_data_v2_write_then_half_close),
		cmocka_unit_test(test_data_refusal_is_per_connection),
		cmocka_unit_test(test_unregister_during_remote_read),
		cmocka_unit_test(test_unregister_during_remote_write),
	};

	return cmocka_run_group_tests_name("robust: data port", tests,
					   robust_setup, robust_teardown);
}
