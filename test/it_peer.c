/*
 * The initiator against a peer it cannot trust: a fake peer (a thread
 * with raw listeners) answers the handshake and the TCP data protocol by
 * hand. It checks the bytes the engine sends (PROTOCOL.md §1, §3: zeroed
 * padding, the v1/v2 opcode) and misbehaves on demand: bad replies and
 * descriptors must fail xfer_segment_open, refusals, bad status frames,
 * early closes and silence must end tasks FAILED or TIMEOUT, in bounded
 * time, a peer slow but within the transfer timeout each time must not,
 * and the engine must recover once the peer behaves.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "test/helpers.h"

#define MEM_LEN (1u << 20)
#define TIMEOUT_MS 1500 /* the initiator's transfer timeout */
#define SLOW_MS 400     /* D_SLOW's wait before each request */
#define MAX_FDS 32

enum hs_mode {
	HS_REPLY,      /* type 1 + f->reply */
	HS_SILENT,     /* read the request, never answer, keep it open */
	HS_CLOSE,      /* read the request, close */
	HS_WRONG_TYPE, /* the reply frame has type 3 */
	HS_LEN0,       /* a reply length of 0 */
	HS_HUGE,       /* a reply length of 2^40 */
	HS_TRUNC,      /* a reply length of 1000, 10 bytes, close */
	HS_TRICKLE,    /* a reply length of 1000, then a byte a second, for
			* at most 8 s */
};

enum data_mode {
	D_SERVE,       /* by the book, f->version */
	D_SLOW,        /* the same, each request after SLOW_MS */
	D_REFUSE,      /* v2 status 1, close */
	D_BAD_MAGIC,   /* a status frame with a wrong magic, then the data */
	D_PARTIAL,     /* half the READ data / half the WRITE payload, close */
	D_SILENT,      /* read the header, never answer, keep it open */
	D_CLOSE,       /* close at the header */
};

struct fake {
	int hs_lfd, data_lfd, stop[2];
	uint16_t hs_port, data_port;
	char name[64];
	atomic_int hs_mode, data_mode;
	atomic_int version;            /* of D_SERVE */
	pthread_mutex_t reply_lock;    /* the test thread sets, the fake reads */
	char reply[2048];              /* Metadata reply JSON */
	uint8_t *mem;                  /* served at its own address */
	atomic_int bad_headers, requests, hs_requests;
	int fds[MAX_FDS], nfds;        /* data connections served */
	int held[MAX_FDS], nheld;      /* connections kept silent */
	pthread_t th;
};

static struct fake F;

/* ---- the fake peer ---- */

static void put_le64(uint8_t *p, uint64_t v)
{
	for (int k = 0; k < 8; k++)
		p[k] = (uint8_t)(v >> (8 * k));
}

static uint64_t get_le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int k = 7; k >= 0; k--)
		v = v << 8 | p[k];
	return v;
}

static void hold(int fd)
{
	if (F.nheld < MAX_FDS)
		F.held[F.nheld++] = fd;
	else
		close(fd);
}

static void hs_serve(int fd)
{
	int mode = atomic_load(&F.hs_mode);
	uint8_t frame[9 + sizeof(F.reply)];
	char *req = NULL, reply[sizeof(F.reply)];
	size_t len = 0, rlen;

	pthread_mutex_lock(&F.reply_lock);
	memcpy(reply, F.reply, sizeof(reply));
	pthread_mutex_unlock(&F.reply_lock);
	rlen = strlen(reply);

	atomic_fetch_add(&F.hs_requests, 1);
	if (th_hs_recv(fd, &req, &len, 3000) != 0 || len < 1 || req[0] != 1)
		atomic_fetch_add(&F.bad_headers, 1); /* not a Metadata request */
	free(req);
	switch (mode) {
	case HS_REPLY:
	case HS_WRONG_TYPE:
		put_le64(frame, rlen + 1);
		frame[8] = mode == HS_REPLY ? 1 : 3;
		memcpy(frame + 9, reply, rlen);
		(void)th_send_all(fd, frame, 9 + rlen);
		shutdown(fd, SHUT_WR);
		break;
	case HS_SILENT:
		hold(fd);
		return;
	case HS_CLOSE:
		break;
	case HS_LEN0:
		put_le64(frame, 0);
		(void)th_send_all(fd, frame, 8);
		break;
	case HS_HUGE:
		put_le64(frame, 1ull << 40);
		frame[8] = 1;
		(void)th_send_all(fd, frame, 9);
		break;
	case HS_TRUNC:
		put_le64(frame, 1000);
		memcpy(frame + 8, "\x01{\"buffers", 10);
		(void)th_send_all(fd, frame, 18);
		break;
	case HS_TRICKLE: {
		struct timespec s1 = { 1, 0 };

		put_le64(frame, 1000);
		frame[8] = 1;
		frame[9] = '{';
		if (th_send_all(fd, frame, 10))
			break;
		/* the adversary's pace, not a synchronisation */
		for (int k = 0; k < 8; k++) {
			nanosleep(&s1, NULL);
			if (th_send_all(fd, " ", 1))
				break;
		}
		break;
	}
	}
	close(fd);
}

static const uint8_t status_ok[8] = { 0, 0, 0, 0, 0x56, 0x54, 0x43, 0x4d };
static const uint8_t status_refused[8] = { 1, 0, 0, 0, 0x56, 0x54, 0x43, 0x4d };
static const uint8_t status_bad_magic[8] = { 0, 0, 0, 0,
					      0x56, 0x54, 0x43, 0x4e };

/* Serve one request on @fd. @return 0 to keep it, -1 to close it. */
static int data_serve_one(int fd)
{
	int mode = atomic_load(&F.data_mode);
	uint8_t h[24], *p;
	uint64_t size, addr;
	bool write, v2;
	long n;

	n = th_recv_all(fd, h, 24, 3000);
	if (n == 0)
		return -1; /* the initiator closed */
	if (n != 24) {
		atomic_fetch_add(&F.bad_headers, 1);
		return -1;
	}
	atomic_fetch_add(&F.requests, 1);
	size = get_le64(h);
	addr = get_le64(h + 8);
	v2 = h[16] & 0x80;
	write = (h[16] & 0x7f) == 1;
	/* what xfer must send: zero padding, opcode 0/1 (+0x80 for v2),
	 * a range inside what we advertised */
	if (th_check_byte(h + 17, 7, 0) != -1 || (h[16] & 0x7f) > 1 ||
	    v2 != (atomic_load(&F.version) == 2) || size == 0 ||
	    size > MEM_LEN ||
	    addr < (uintptr_t)F.mem ||
	    addr + size > (uintptr_t)F.mem + MEM_LEN) {
		atomic_fetch_add(&F.bad_headers, 1);
		return -1;
	}
	p = (uint8_t *)(uintptr_t)addr;

	switch (mode) {
	case D_SLOW:
		usleep(SLOW_MS * 1000);
		/* fall through */
	case D_SERVE:
		if (write) {
			if (th_recv_all(fd, p, size, 3000) != (long)size)
				return -1;
			if (v2 && th_send_all(fd, status_ok, 8))
				return -1;
		} else {
			if (v2 && th_send_all(fd, status_ok, 8))
				return -1;
			if (th_send_all(fd, p, size))
				return -1;
		}
		return 0;
	case D_REFUSE:
		(void)th_send_all(fd, status_refused, 8);
		return -1;
	case D_BAD_MAGIC:
		if (write)
			(void)th_recv_all(fd, p, size, 3000);
		(void)th_send_all(fd, status_bad_magic, 8);
		if (!write)
			(void)th_send_all(fd, p, size);
		return 0;
	case D_PARTIAL:
		if (write) {
			(void)th_recv_all(fd, p, size / 2, 3000);
		} else {
			if (v2)
				(void)th_send_all(fd, status_ok, 8);
			(void)th_send_all(fd, p, size / 2);
		}
		return -1;
	case D_SILENT:
		hold(fd);
		return 1;
	default:
		return -1;
	}
}

static void *fake_main(void *arg)
{
	(void)arg;
	for (;;) {
		struct pollfd pfd[3 + MAX_FDS];
		int n = 3;

		pfd[0] = (struct pollfd){ .fd = F.stop[0], .events = POLLIN };
		pfd[1] = (struct pollfd){ .fd = F.hs_lfd, .events = POLLIN };
		pfd[2] = (struct pollfd){ .fd = F.data_lfd, .events = POLLIN };
		for (int k = 0; k < F.nfds; k++)
			pfd[n++] = (struct pollfd){ .fd = F.fds[k],
						    .events = POLLIN };
		if (poll(pfd, n, -1) < 0)
			continue;
		if (pfd[0].revents)
			break;
		if (pfd[1].revents & POLLIN) {
			int fd = accept(F.hs_lfd, NULL, NULL);

			if (fd >= 0)
				hs_serve(fd);
		}
		if (pfd[2].revents & POLLIN) {
			int fd = accept(F.data_lfd, NULL, NULL);

			if (fd >= 0 && F.nfds < MAX_FDS)
				F.fds[F.nfds++] = fd;
			else if (fd >= 0)
				close(fd);
		}
		for (int k = 3; k < n; k++) {
			int fd = pfd[k].fd, ret;

			if (!pfd[k].revents)
				continue;
			ret = data_serve_one(fd);
			if (ret == 0)
				continue;
			if (ret < 0)
				close(fd);
			/* closed or held: no longer served */
			for (int j = 0; j < F.nfds; j++)
				if (F.fds[j] == fd) {
					F.fds[j] = F.fds[--F.nfds];
					break;
				}
		}
	}
	for (int k = 0; k < F.nfds; k++)
		close(F.fds[k]);
	for (int k = 0; k < F.nheld; k++)
		close(F.held[k]);
	return NULL;
}

static void set_reply(const char *r)
{
	pthread_mutex_lock(&F.reply_lock);
	snprintf(F.reply, sizeof(F.reply), "%s", r);
	pthread_mutex_unlock(&F.reply_lock);
}

/* The reply: a TCP descriptor advertising F.mem, with @version (0: the
 * field left out, as a v1 peer). */
static void good_reply(int version)
{
	char ver[40] = "", r[sizeof(F.reply)];

	if (version)
		snprintf(ver, sizeof(ver), ",\"tcp_proto_version\":%d", version);

	snprintf(r, sizeof(r),
		 "{\"buffers\":[{\"addr\":%llu,\"length\":%u,\"name\":\"cpu:0\"}],"
		 "\"name\":\"%s\",\"protocol\":\"tcp\",\"tcp_data_port\":%u%s,"
		 "\"timestamp\":\"2026-01-01 00:00:00.000000\"}\n",
		 (unsigned long long)(uintptr_t)F.mem, MEM_LEN, F.name,
		 F.data_port, ver);
	set_reply(r);
}

/* ---- fixture ---- */

static struct xfer_engine *E; /* the initiator */
static int64_t OPEN_ID = -1;  /* the fake's segment, closed after each test */
static uint8_t *LB;           /* its buffer */

static int setup(void **state)
{
	struct xfer_config *cfg;

	(void)state;
	memset(&F, 0, sizeof(F));
	F.hs_lfd = th_listen(&F.hs_port);
	F.data_lfd = th_listen(&F.data_port);
	assert_int_equal(pipe(F.stop), 0);
	snprintf(F.name, sizeof(F.name), "127.0.0.1:%u", F.hs_port);
	F.mem = th_alloc(MEM_LEN);
	memset(F.mem, 0, MEM_LEN);
	pthread_mutex_init(&F.reply_lock, NULL);
	atomic_store(&F.version, 2);
	good_reply(2);
	assert_int_equal(pthread_create(&F.th, NULL, fake_main, NULL), 0);

	cfg = th_config();
	th_set(cfg, "bind_addr", "127.0.0.1");
	th_set(cfg, "local_server_name", "127.0.0.1");
	th_set(cfg, "workers", "1");
	th_set(cfg, "tcp_conns", "1");
	th_set_num(cfg, "transfer_timeout_ms", TIMEOUT_MS);
	E = xfer_engine_new(cfg);
	xfer_config_free(cfg);
	assert_non_null(E);
	LB = th_alloc(MEM_LEN);
	assert_int_equal(xfer_register(E, LB, MEM_LEN, "cpu:0", true), 0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	assert_int_equal(xfer_unregister(E, LB), 0);
	xfer_engine_free(E);
	assert_int_equal(write(F.stop[1], "x", 1), 1);
	pthread_join(F.th, NULL);
	close(F.hs_lfd);
	close(F.data_lfd);
	close(F.stop[0]);
	close(F.stop[1]);
	pthread_mutex_destroy(&F.reply_lock);
	free(F.mem);
	free(LB);
	return 0;
}

/* A test that failed half-way may leave the segment open. */
static int close_open(void **state)
{
	(void)state;
	if (OPEN_ID >= 0)
		(void)xfer_segment_close(E, OPEN_ID);
	OPEN_ID = -1;
	return 0;
}

/* Each test starts with a well-behaved v2 peer. */
static int reset(void **state)
{
	(void)state;
	atomic_store(&F.hs_mode, HS_REPLY);
	atomic_store(&F.data_mode, D_SERVE);
	atomic_store(&F.bad_headers, 0);
	atomic_store(&F.version, 2);
	good_reply(2);
	return 0;
}

static int64_t open_fake(void)
{
	int64_t id = xfer_segment_open(E, F.name);
	uint64_t addr, len;

	if (id < 0)
		fail_msg("open %s: %lld (%s)", F.name, (long long)id,
			 xfer_engine_last_error(E));
	OPEN_ID = id;
	assert_int_equal(xfer_segment_buffer(E, id, 0, &addr, &len, NULL), 0);
	assert_int_equal(addr, (uintptr_t)F.mem);
	assert_int_equal(len, MEM_LEN);
	return id;
}

/* WRITE then READ @len bytes at an odd offset; all must complete. */
static void roundtrip(int64_t id, size_t len, uint64_t seed)
{
	uint64_t tr = 0;

	th_fill(LB, len, seed);
	memset(LB + len, 0, len);
	memset(F.mem + 5, 0, len);
	th_assert_status(th_xfer1(E, XFER_WRITE, LB, id,
				  (uintptr_t)F.mem + 5, len, &tr),
			 XFER_COMPLETED);
	assert_int_equal(tr, len);
	/* v2: COMPLETED means in the peer's memory; v1 has no reply, so
	 * only the READ after it (same connection) proves it */
	if (atomic_load(&F.version) == 2)
		assert_int_equal(th_check(F.mem + 5, len, seed), -1);
	th_assert_status(th_xfer1(E, XFER_READ, LB + len, id,
				  (uintptr_t)F.mem + 5, len, &tr),
			 XFER_COMPLETED);
	assert_int_equal(tr, len);
	assert_int_equal(th_check(LB + len, len, seed), -1);
	assert_int_equal(th_check(F.mem + 5, len, seed), -1);
}

/* ---- the data protocol ---- */

static void test_peer_v2(void **state)
{
	int64_t id = open_fake();
	int before = atomic_load(&F.requests);

	(void)state;
	roundtrip(id, (200u << 10) + 3, 1);
	roundtrip(id, 1, 2);
	/* 200 KiB + 3, 3 adjacent slices, is one request each way; 1 B one */
	assert_int_equal(atomic_load(&F.requests) - before, 4);
	assert_int_equal(atomic_load(&F.bad_headers), 0);
	assert_int_equal(xfer_segment_close(E, id), 0);
}

/* A peer whose descriptor has no tcp_proto_version speaks v1: no status
 * frames, opcodes without bit 7. */
static void test_peer_v1(void **state)
{
	int64_t id;

	(void)state;
	atomic_store(&F.version, 1);
	good_reply(0);
	id = open_fake();
	roundtrip(id, (200u << 10) + 3, 3);
	roundtrip(id, 1, 4);
	assert_int_equal(atomic_load(&F.bad_headers), 0);
	assert_int_equal(xfer_segment_close(E, id), 0);
}

/* The peer misbehaves on the data connection with @mode: a READ and a
 * WRITE of @p len bytes end @want within @max_ms; then it behaves and
 * the same segment works again. Each comes after a round trip of its
 * size, so a small one goes out on a quiet connection, written by the
 * submitting thread itself. */
static void data_fault_len(int mode, enum xfer_status want, int max_ms,
			   size_t len)
{
	int64_t id = open_fake();
	enum xfer_opcode ops[2] = { XFER_READ, XFER_WRITE };

	roundtrip(id, len, 19);
	for (int k = 0; k < 2; k++) {
		int64_t t0 = th_now_ms(), took;
		enum xfer_status st;

		atomic_store(&F.data_mode, mode);
		th_fill(LB, len, 10);
		st = th_xfer1(E, ops[k], LB, id, (uintptr_t)F.mem + 5, len,
			      NULL);
		took = th_now_ms() - t0;
		if (st != want || took > max_ms)
			fail_msg("%s against a peer in mode %d: %s after %lld "
				 "ms, want %s within %d ms",
				 ops[k] == XFER_READ ? "READ" : "WRITE", mode,
				 xfer_status_str(st), (long long)took,
				 xfer_status_str(want), max_ms);
		atomic_store(&F.data_mode, D_SERVE);
		roundtrip(id, len, 20 + k);
	}
	assert_int_equal(atomic_load(&F.bad_headers), 0);
	assert_int_equal(xfer_segment_close(E, id), 0);
}

static void data_fault(int mode, enum xfer_status want, int max_ms)
{
	data_fault_len(mode, want, max_ms, (64u << 10) + 1);
}

static void test_peer_refuses(void **state)
{
	(void)state;
	data_fault(D_REFUSE, XFER_FAILED, 3000);
}

static void test_peer_bad_magic(void **state)
{
	(void)state;
	data_fault(D_BAD_MAGIC, XFER_FAILED, 3000);
}

static void test_peer_closes_midway(void **state)
{
	(void)state;
	data_fault(D_PARTIAL, XFER_FAILED, 3000);
}

static void test_peer_closes_at_header(void **state)
{
	(void)state;
	data_fault(D_CLOSE, XFER_FAILED, 3000);
}

static void test_peer_silent(void **state)
{
	(void)state;
	data_fault(D_SILENT, XFER_TIMEOUT, TIMEOUT_MS + 3000);
}

/* The same for a lone 4 KiB request, which the submitting thread writes
 * itself (the timeout its own, on no wakeup of the worker). */
static void test_peer_silent_small(void **state)
{
	(void)state;
	data_fault_len(D_SILENT, XFER_TIMEOUT, TIMEOUT_MS + 3000, 4096);
}

/* A peer that serves each request SLOW_MS late: 5 tasks of 64 KiB (a
 * request each), one connection, take longer than the transfer timeout,
 * but bytes move well within it each time: they complete, both ways. */
static void test_peer_slow(void **state)
{
	enum { N = 5, PART = 64 << 10, len = N * PART };
	int64_t id = open_fake();

	(void)state;
	th_fill(LB, len, 30);
	memset(LB + len, 0, len);
	atomic_store(&F.data_mode, D_SLOW);
	for (int k = 0; k < 2; k++) {
		struct xfer_request reqs[N];
		struct xfer_batch *b = xfer_batch_new(E, N);
		struct xfer_task_status ts = { .status = XFER_COMPLETED };
		int64_t t0 = th_now_ms(), took;

		assert_non_null(b);
		for (int i = 0; i < N; i++)
			reqs[i] = (struct xfer_request){ k ? XFER_READ :
				XFER_WRITE, LB + k * len + i * PART, id,
				(uintptr_t)F.mem + 5 + i * PART, PART };
		assert_int_equal(xfer_batch_submit(b, reqs, N), 0);
		assert_int_equal(xfer_batch_wait(b, 30000), 0);
		took = th_now_ms() - t0;
		for (int i = 0; i < N && ts.status == XFER_COMPLETED; i++)
			assert_int_equal(xfer_batch_status(b, i, &ts), 0);
		assert_int_equal(xfer_batch_free(b), 0);
		if (ts.status != XFER_COMPLETED || took <= TIMEOUT_MS)
			fail_msg("%s, slow peer: %s after %lld ms (want "
				 "COMPLETED, > %d ms)", k ? "READ" : "WRITE",
				 xfer_status_str(ts.status), (long long)took,
				 TIMEOUT_MS);
	}
	atomic_store(&F.data_mode, D_SERVE);
	assert_int_equal(th_check(F.mem + 5, len, 30), -1);
	assert_int_equal(th_check(LB + len, len, 30), -1);
	assert_int_equal(atomic_load(&F.bad_headers), 0);
	assert_int_equal(xfer_segment_close(E, id), 0);
}

/* Nothing listens on the advertised data port. */
static void test_peer_data_port_closed(void **state)
{
	uint16_t dead;
	int fd = th_listen(&dead);
	int64_t id;

	(void)state;
	close(fd);
	{
		char r[sizeof(F.reply)];

		snprintf(r, sizeof(r),
			 "{\"buffers\":[{\"addr\":%llu,\"length\":%u,"
			 "\"name\":\"cpu:0\"}],\"name\":\"%s\","
			 "\"protocol\":\"tcp\",\"tcp_data_port\":%u,"
			 "\"tcp_proto_version\":2}\n",
			 (unsigned long long)(uintptr_t)F.mem, MEM_LEN, F.name,
			 dead);
		set_reply(r);
	}
	id = xfer_segment_open(E, F.name);
	assert_true(id >= 0);
	OPEN_ID = id;
	th_assert_status(th_xfer1(E, XFER_WRITE, LB, id, (uintptr_t)F.mem, 64,
				  NULL), XFER_FAILED);
	th_assert_status(th_xfer1(E, XFER_READ, LB, id, (uintptr_t)F.mem, 64,
				  NULL), XFER_FAILED);
	assert_int_equal(xfer_segment_close(E, id), 0);
}

/* ---- the handshake ---- */

/* After a failed open the name is not cached: a good answer opens it. */
static void open_recovers(void)
{
	int64_t id;

	atomic_store(&F.hs_mode, HS_REPLY);
	good_reply(2);
	id = open_fake();
	roundtrip(id, 100, 30);
	assert_int_equal(xfer_segment_close(E, id), 0);
}

struct hs_fault {
	int mode;
	int want; /* 0: any negative errno */
};

static void test_open_bad_reply(void **state)
{
	const struct hs_fault *c = *state;
	int64_t t0 = th_now_ms(), id;

	atomic_store(&F.hs_mode, c->mode);
	id = xfer_segment_open(E, F.name);
	if (id >= 0 || (c->want && id != c->want) || th_now_ms() - t0 > 6500)
		fail_msg("open with handshake mode %d: %lld after %lld ms, "
			 "want %d", c->mode, (long long)id,
			 (long long)(th_now_ms() - t0), c->want);
	assert_int_equal(atomic_load(&F.bad_headers), 0);
	open_recovers();
}

static const struct hs_fault hs_close = { HS_CLOSE, 0 };
static const struct hs_fault hs_wrong_type = { HS_WRONG_TYPE, -EPROTO };
static const struct hs_fault hs_len0 = { HS_LEN0, -EPROTO };
static const struct hs_fault hs_huge = { HS_HUGE, -EPROTO };
static const struct hs_fault hs_trunc = { HS_TRUNC, 0 };
static const struct hs_fault hs_silent = { HS_SILENT, -ETIMEDOUT };
static const struct hs_fault hs_trickle = { HS_TRICKLE, -ETIMEDOUT };


struct bad_desc {
	const char *fmt;
	int want;
};

static const struct bad_desc bad_descs[] = {
	{ "not json\n", -EPROTO },
	{ "[]\n", -EPROTO },
	{ "{\"buffers\":[],\"protocol\":\"tcp\",\"tcp_data_port\":@P}\n",
	  -EPROTO }, /* no name */
	{ "{\"buffers\":[{\"addr\":0,\"length\":4096,\"name\":\"cpu:0\"}],"
	  "\"name\":\"@N\",\"protocol\":\"tcp\",\"tcp_data_port\":@P}\n",
	  -EPROTO }, /* address 0 */
	{ "{\"buffers\":[{\"addr\":@A,\"length\":0,\"name\":\"cpu:0\"}],"
	  "\"name\":\"@N\",\"protocol\":\"tcp\",\"tcp_data_port\":@P}\n",
	  -EPROTO }, /* length 0 */
	{ "{\"buffers\":[{\"addr\":18446744073709551600,\"length\":32,"
	  "\"name\":\"cpu:0\"}],"
	  "\"name\":\"@N\",\"protocol\":\"tcp\",\"tcp_data_port\":@P}\n",
	  -EPROTO }, /* wraps around */
	{ "{\"buffers\":[{\"addr\":-4096,\"length\":32,\"name\":\"cpu:0\"}],"
	  "\"name\":\"@N\",\"protocol\":\"tcp\",\"tcp_data_port\":@P}\n",
	  -EPROTO }, /* negative address */
	{ "{\"buffers\":[{\"addr\":@A,\"length\":8192,\"name\":\"cpu:0\"},"
	  "{\"addr\":@A,\"length\":4096,\"name\":\"cpu:0\"}],"
	  "\"name\":\"@N\",\"protocol\":\"tcp\",\"tcp_data_port\":@P}\n",
	  -EPROTO }, /* overlapping buffers */
	{ "{\"buffers\":[{\"addr\":@A,\"length\":4096,\"name\":\"cpu:0\"}],"
	  "\"name\":\"@N\",\"protocol\":\"tcp\",\"tcp_data_port\":0}\n",
	  -EPROTO }, /* data port 0 */
	{ "{\"buffers\":[{\"addr\":@A,\"length\":4096,\"name\":\"cpu:0\"}],"
	  "\"name\":\"@N\",\"protocol\":\"tcp\",\"tcp_data_port\":70000}\n",
	  -EPROTO }, /* data port out of range */
	{ "{\"buffers\":[{\"addr\":@A,\"length\":4096,\"name\":\"cpu:0\"}],"
	  "\"name\":\"@N\",\"protocol\":\"tcp\",\"tcp_data_port\":@P,"
	  "\"tcp_proto_version\":3}\n",
	  -EPROTO }, /* unknown data protocol version */
	{ "{\"buffers\":[{\"addr\":\"@A\",\"length\":4096,"
	  "\"name\":\"cpu:0\"}],"
	  "\"name\":\"@N\",\"protocol\":\"tcp\",\"tcp_data_port\":@P}\n",
	  -EPROTO }, /* address as a string */
	{ "{\"buffers\":[{\"addr\":@A,\"length\":4096,\"name\":\"cpu:0\","
	  "\"rkey\":[7],\"lkey\":[8]}],"
	  "\"devices\":[{\"name\":\"mlx5_0\",\"lid\":1,\"gid\":"
	  "\"fe:80:00:00:00:00:00:00:00:00:00:00:00:00:00:01\"}],"
	  "\"name\":\"@N\",\"priority_matrix\":{\"cpu:0\":[[\"mlx5_0\"],[]]},"
	  "\"protocol\":\"rdma\","
	  "\"timestamp\":\"2026-01-01 00:00:00.000000\"}\n",
	  -EPROTONOSUPPORT }, /* a transport this engine lacks */
	{ "{\"buffers\":[{\"addr\":@A,\"length\":4096,\"name\":\"cpu:0\"}],"
	  "\"name\":\"@N\",\"protocol\":\"local\"}\n",
	  -EPROTONOSUPPORT }, /* the local copy: never a peer's transport */
};

/* Copy @fmt to @out with @A, @N and @P replaced. */
static void expand(char *out, size_t cap, const char *fmt)
{
	size_t n = 0;

	for (const char *p = fmt; *p; p++) {
		char val[64];

		if (p[0] == '@' && (p[1] == 'A' || p[1] == 'N' || p[1] == 'P')) {
			if (p[1] == 'A')
				snprintf(val, sizeof(val), "%llu",
					 (unsigned long long)(uintptr_t)F.mem);
			else if (p[1] == 'N')
				snprintf(val, sizeof(val), "%s", F.name);
			else
				snprintf(val, sizeof(val), "%u", F.data_port);
			assert_true(n + strlen(val) < cap);
			memcpy(out + n, val, strlen(val));
			n += strlen(val);
			p++;
			continue;
		}
		assert_true(n + 1 < cap);
		out[n++] = *p;
	}
	out[n] = '\0';
}

static void test_open_bad_descriptor(void **state)
{
	(void)state;
	for (size_t k = 0; k < sizeof(bad_descs) / sizeof(bad_descs[0]); k++) {
		int64_t id;

		char r[sizeof(F.reply)];

		expand(r, sizeof(r), bad_descs[k].fmt);
		set_reply(r);
		atomic_store(&F.hs_mode, HS_REPLY);
		id = xfer_segment_open(E, F.name);
		if (id != bad_descs[k].want)
			fail_msg("descriptor %zu gave %lld, want %d: %s", k,
				 (long long)id, bad_descs[k].want, r);
		open_recovers();
	}
}

#define PEER_TEST(f) cmocka_unit_test_setup_teardown(f, reset, close_open)
#define HS_CASE(name, c) \
	{ name, test_open_bad_reply, reset, close_open, (void *)(c) }

int main(void)
{
	const struct CMUnitTest tests[] = {
		PEER_TEST(test_peer_v2),
		PEER_TEST(test_peer_v1),
		PEER_TEST(test_peer_refuses),
		PEER_TEST(test_peer_bad_magic),
		PEER_TEST(test_peer_closes_midway),
		PEER_TEST(test_peer_closes_at_header),
		PEER_TEST(test_peer_silent),
		PEER_TEST(test_peer_silent_small),
		PEER_TEST(test_peer_slow),
		PEER_TEST(test_peer_data_port_closed),
		HS_CASE("test_open_reply_closed", &hs_close),
		HS_CASE("test_open_reply_wrong_type", &hs_wrong_type),
		HS_CASE("test_open_reply_length_0", &hs_len0),
		HS_CASE("test_open_reply_length_2e40", &hs_huge),
		HS_CASE("test_open_reply_truncated", &hs_trunc),
		HS_CASE("test_open_reply_never", &hs_silent),
		HS_CASE("test_open_reply_trickled", &hs_trickle),
		PEER_TEST(test_open_bad_descriptor),
	};

	return cmocka_run_group_tests_name("hostile peer", tests, setup,
					   teardown);
}
