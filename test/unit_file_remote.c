/*
 * Unit tests: the file transport's data port (transports/file/server.c,
 * client.c; PROTOCOL.md §5). A file transport is put together by hand on
 * one reactor thread: the owner's files (files.c), its I/O engine, its
 * server, and the initiator's side. The tests against the owner run
 * twice: on files through bounce memory and the I/O engine, and on files
 * in memory (/dev/shm), spliced.
 *   - the initiator against the owner: writes and reads over two files,
 *     past the wire bound, errno statuses, refusals;
 *   - the owner against raw sockets: hostile headers, v1, pipelining,
 *     a WRITE the file refuses, a file cut shorter under a WRITE, a
 *     peer gone before its replies;
 *   - the initiator against a scripted owner (a thread of the test):
 *     errno and malformed statuses, connection loss, the transfer
 *     timeout, cancel with requests on the wire, close.
 */
#define _GNU_SOURCE /* memfd_create */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/net_internal.h"
#include "transports/file/file_internal.h"
#include "test/helpers.h"
#include "test/th_file.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define STATUS(code) (FILE_STATUS_MAGIC << 32 | (code))

static struct {
	struct xfer_reactor r;
	struct xfer_error err;
	struct xfer_transport_env env;
	struct file_transport *t;
	union xfer_knob_val knobs[K_BOUNCE + 1];
	char dir[64];
	bool mem;                  /* the files in /dev/shm, spliced */
} F;

static bool BOUNCE = false, MEM = true;

static struct xfer_reactor *worker(void *arg)
{
	(void)arg;
	return &F.r;
}

/* @p state: &BOUNCE or &MEM (NULL: BOUNCE). */
static int setup(void **state)
{
	struct file_transport *t;

	memset(&F, 0, sizeof(F));
	F.mem = *state && *(const bool *)*state;
	xfer_error_init(&F.err);
	F.env = (struct xfer_transport_env){
		.name = "owner", .bind_addr = "127.0.0.1", .control = &F.r,
		.worker = worker, .err = &F.err,
	};
	assert_int_equal(xfer_reactor_init(&F.r, NULL, "ft"), 0);
	t = F.t = calloc(1, sizeof(*t));
	assert_non_null(t);
	t->base.env = &F.env;
	F.knobs[K_BOUNCE].num = 64 * MiB; /* file_bounce_max's default */
	t->k = F.knobs;
	t->r = &F.r;
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->reads_done, NULL);
	TAILQ_INIT(&t->files);
	xfer_sstream_table_init(&t->sconns, "file");
	SLIST_INIT(&t->rpeers);
	t->in_tail = &t->in_head;
	assert_int_equal(xfer_fio_new(&F.r, 64, false, &t->fio), 0);
	assert_int_equal(xfer_file_server_start(t), 0);
	assert_true(t->data_port > 0);
	assert_int_equal(xfer_reactor_start(&F.r), 0);
	snprintf(F.dir, sizeof(F.dir), "%s/unit_file_remote.XXXXXX",
		 F.mem ? "/dev/shm" : "/tmp");
	assert_non_null(mkdtemp(F.dir));
	return 0;
}

/* The transport's stop, in file.c's order. */
static void stop(void)
{
	struct file_transport *t = F.t;

	if (!t)
		return;
	xfer_reactor_stop(&F.r);
	xfer_file_io_close(t);
	xfer_file_server_stop(t);
	xfer_file_client_close(t);
	xfer_file_own_free(t);
	xfer_reactor_destroy(&F.r);
	pthread_cond_destroy(&t->reads_done);
	pthread_mutex_destroy(&t->lock);
	xfer_sstream_table_fini(&t->sconns);
	free(t);
	F.t = NULL;
}

static int teardown(void **state)
{
	(void)state;
	stop();
	th_rm_tree(F.dir);
	xfer_error_fini(&F.err);
	return 0;
}

/* Register @p path with @p length (0: its size), as a file in memory
 * (spliced) or not, as the test runs: in /dev/shm it must be seen as one;
 * elsewhere (/tmp may be tmpfs too) it is made to go the bounce path. */
static void add_path(const char *path, uint64_t length)
{
	struct own_file *f;

	assert_int_equal(xfer_file_add(F.t, path, length, NULL), 1);
	f = TAILQ_LAST(&F.t->files, own_files);
	if (F.mem)
		assert_true(f->fo->mem);
	f->fo->mem = F.mem;
}

/* A file of @p size bytes (sparse) in the test's folder, registered with
 * @p length (0: its size). @return its path (static until the next). */
static const char *add_file(const char *name, size_t size, uint64_t length)
{
	static char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", F.dir, name);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	close(fd);
	add_path(path, length);
	return path;
}

static struct file_rpeer *rpeer(uint16_t port)
{
	struct sockaddr_storage ss;
	socklen_t len;
	struct file_rpeer *p;

	assert_int_equal(xfer_net_parse("127.0.0.1", port, &ss, &len), 0);
	p = xfer_file_rpeer(F.t, &ss, len);
	assert_non_null(p);
	assert_ptr_equal(xfer_file_rpeer(F.t, &ss, len), p);
	return p;
}

/* Submit a task of one kind and wait for it; @return its status. */
static enum xfer_status xfer1(struct file_rpeer *p, enum xfer_opcode op,
			      void *local, uint64_t remote, size_t len,
			      size_t slice)
{
	struct th_job *j = th_job_new(op, local, remote, len, slice);
	enum xfer_status st;

	xfer_file_rpeer_submit(p, j->s, j->n);
	st = th_job_wait(j);
	if (st == XFER_COMPLETED)
		assert_int_equal(atomic_load(&j->task.transferred), len);
	free(j);
	return st;
}

static void expect_error(const char *part)
{
	if (!strstr(F.err.msg, part))
		fail_msg("error \"%s\" lacks \"%s\"", F.err.msg, part);
}

/* ---- the initiator against the owner ---- */

/* Two files end to end, a task in each (as file.c submits them);
 * everything written comes back, and lies in the files where the offsets
 * say. Slices of 64 KiB, sent as runs. */
static void test_roundtrip(void **state)
{
	size_t a = 8 * MiB, b = 4 * MiB, len = a + b;
	uint8_t *src = th_alloc(len), *dst = th_alloc(len), *got;
	struct file_rpeer *p;
	char path_b[128];
	int fd;

	(void)state;
	add_file("a", a, 0);
	strcpy(path_b, add_file("b", b, 0));
	p = rpeer(F.t->data_port);
	th_fill(src, len, 7);
	th_assert_status(xfer1(p, XFER_WRITE, src, 0, a, 64 * KiB),
			 XFER_COMPLETED);
	th_assert_status(xfer1(p, XFER_WRITE, src + a, a, b, 64 * KiB),
			 XFER_COMPLETED);
	memset(dst, 0, len);
	th_assert_status(xfer1(p, XFER_READ, dst, 0, a, 64 * KiB),
			 XFER_COMPLETED);
	th_assert_status(xfer1(p, XFER_READ, dst + a, a, b, 64 * KiB),
			 XFER_COMPLETED);
	assert_int_equal(th_check(dst, len, 7), -1);
	/* the second file holds the tail */
	got = th_alloc(b);
	fd = open(path_b, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, got, b, 0), (ssize_t)b);
	close(fd);
	assert_int_equal(memcmp(got, src + a, b), 0);
	/* large slices: one at a time on the wire (64 MiB bound) */
	memset(dst, 0, len);
	th_assert_status(xfer1(p, XFER_READ, dst, 0, a, 4 * MiB),
			 XFER_COMPLETED);
	assert_int_equal(memcmp(dst, src, a), 0);
	free(got);
	free(src);
	free(dst);
}

/* A read past the end of a file says ENODATA, a slice that straddles two
 * files or leaves the segment is refused; the owner goes on serving. */
static void test_owner_errors(void **state)
{
	uint8_t *buf = th_alloc(256 * KiB);
	struct file_rpeer *p;

	(void)state;
	add_file("short", 64 * KiB, 1 * MiB); /* may grow to 1 MiB */
	add_file("next", 64 * KiB, 0);
	p = rpeer(F.t->data_port);
	th_assert_status(xfer1(p, XFER_READ, buf, 128 * KiB, 64 * KiB,
			       64 * KiB), XFER_FAILED);
	expect_error("owner: ");
	expect_error(strerror(ENODATA));
	/* the same connections go on: write there, then read it */
	th_fill(buf, 64 * KiB, 3);
	th_assert_status(xfer1(p, XFER_WRITE, buf, 512 * KiB, 64 * KiB,
			       64 * KiB), XFER_COMPLETED);
	memset(buf, 0, 64 * KiB);
	th_assert_status(xfer1(p, XFER_READ, buf, 512 * KiB, 64 * KiB,
			       64 * KiB), XFER_COMPLETED);
	assert_int_equal(th_check(buf, 64 * KiB, 3), -1);
	/* across the two files; past the segment */
	th_assert_status(xfer1(p, XFER_READ, buf, MiB - 4 * KiB, 8 * KiB,
			       8 * KiB), XFER_FAILED);
	expect_error("refused");
	th_assert_status(xfer1(p, XFER_WRITE, buf, MiB + 64 * KiB, 4 * KiB,
			       4 * KiB), XFER_FAILED);
	/* a new connection serves the next */
	th_assert_status(xfer1(p, XFER_READ, buf, MiB, 64 * KiB, 64 * KiB),
			 XFER_COMPLETED);
	free(buf);
}

/* ---- the owner against raw sockets ---- */

static void put_hdr(uint8_t *h, uint64_t size, uint64_t addr, uint8_t op)
{
	memset(h, 0xee, FILE_HDR_LEN); /* padding is ignored */
	th_put_le64(h, size);
	th_put_le64(h + 8, addr);
	h[16] = op;
}

static uint64_t recv_status(int fd)
{
	uint64_t v = 0;

	assert_int_equal(th_recv_all(fd, &v, 8, 5000), 8);
	return le64toh(v);
}

/* @p hdr is refused: status 1, then the owner closes. */
static void expect_refused(uint64_t size, uint64_t addr, uint8_t op)
{
	uint8_t h[FILE_HDR_LEN];
	int fd = th_connect(F.t->data_port);

	put_hdr(h, size, addr, op);
	assert_int_equal(th_send_all(fd, h, sizeof(h)), 0);
	assert_int_equal(recv_status(fd), STATUS(FILE_STATUS_REFUSED));
	assert_int_equal(th_recv_until_close(fd, NULL, 0, 5000), 0);
	close(fd);
}

static void test_hostile(void **state)
{
	uint8_t h[2 * FILE_HDR_LEN], *buf = th_alloc(128 * KiB);
	int fd;

	(void)state;
	add_file("f", MiB, 0);
	expect_refused(1ull << 63, 0, 0x80);
	expect_refused(1ull << 63, 0, 0x81);
	expect_refused(0, 0, 0x80);
	expect_refused(XFER_FILE_MAX_IO + 1ull, 0, 0x81);
	expect_refused(16, UINT64_MAX - 8, 0x80);
	expect_refused(16, MiB - 8, 0x81);
	/* v1: closed with no status */
	fd = th_connect(F.t->data_port);
	put_hdr(h, 16, 0, 0x01);
	assert_int_equal(th_send_all(fd, h, FILE_HDR_LEN), 0);
	assert_int_equal(th_recv_until_close(fd, NULL, 0, 5000), 0);
	close(fd);
	/* half a header, half a payload, then gone */
	fd = th_connect(F.t->data_port);
	assert_int_equal(th_send_all(fd, h, 10), 0);
	close(fd);
	fd = th_connect(F.t->data_port);
	put_hdr(h, 64 * KiB, 0, 0x81);
	assert_int_equal(th_send_all(fd, h, FILE_HDR_LEN), 0);
	assert_int_equal(th_send_all(fd, buf, 100), 0);
	close(fd);
	/* a WRITE and a READ of it in one send: both served, in order */
	fd = th_connect(F.t->data_port);
	th_fill(buf, 64 * KiB, 11);
	put_hdr(h, 64 * KiB, 4096, 0x81);
	assert_int_equal(th_send_all(fd, h, FILE_HDR_LEN), 0);
	assert_int_equal(th_send_all(fd, buf, 64 * KiB), 0);
	put_hdr(h, 64 * KiB, 4096, 0x80);
	put_hdr(h + FILE_HDR_LEN, 8, MiB - 8, 0x80);
	assert_int_equal(th_send_all(fd, h, 2 * FILE_HDR_LEN), 0);
	assert_int_equal(recv_status(fd), STATUS(FILE_STATUS_OK));
	assert_int_equal(recv_status(fd), STATUS(FILE_STATUS_OK));
	memset(buf, 0, 64 * KiB);
	assert_int_equal(th_recv_all(fd, buf, 64 * KiB, 5000), 64 * KiB);
	assert_int_equal(th_check(buf, 64 * KiB, 11), -1);
	assert_int_equal(recv_status(fd), STATUS(FILE_STATUS_OK));
	assert_int_equal(th_recv_all(fd, buf, 8, 5000), 8);
	assert_int_equal(th_check_byte(buf, 8, 0), -1);
	close(fd);
	free(buf);
}

/*
 * A WRITE the file refuses part of (a memfd sealed against growth: EPERM
 * past its end, said as EACCES) ends with that status once its payload,
 * larger than a piece, is in, and what lay before the end was written;
 * the connection then serves the next requests.
 */
static void test_write_refused(void **state)
{
	const size_t size = 64 * KiB, len = 3 * MiB, off = 32 * KiB;
	uint8_t h[FILE_HDR_LEN], *src = th_alloc(len), *got = th_alloc(size);
	char path[64];
	int mfd, fd;

	(void)state;
	mfd = memfd_create("unit_file_remote", MFD_ALLOW_SEALING);
	assert_true(mfd >= 0);
	assert_int_equal(ftruncate(mfd, (off_t)size), 0);
	assert_int_equal(fcntl(mfd, F_ADD_SEALS, F_SEAL_GROW), 0);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", mfd);
	add_path(path, 4 * MiB);
	fd = th_connect(F.t->data_port);
	th_fill(src, len, 21);
	put_hdr(h, len, off, 0x81);
	assert_int_equal(th_send_all(fd, h, sizeof(h)), 0);
	assert_int_equal(th_send_all(fd, src, len), 0);
	assert_int_equal(recv_status(fd), STATUS(EACCES));
	put_hdr(h, 4 * KiB, 0, 0x81);
	assert_int_equal(th_send_all(fd, h, sizeof(h)), 0);
	assert_int_equal(th_send_all(fd, src + len - 4 * KiB, 4 * KiB), 0);
	assert_int_equal(recv_status(fd), STATUS(FILE_STATUS_OK));
	put_hdr(h, size, 0, 0x80);
	assert_int_equal(th_send_all(fd, h, sizeof(h)), 0);
	assert_int_equal(recv_status(fd), STATUS(FILE_STATUS_OK));
	assert_int_equal(th_recv_all(fd, got, size, 5000), (long)size);
	assert_memory_equal(got, src + len - 4 * KiB, 4 * KiB);
	assert_memory_equal(got + off, src, size - off);
	close(fd);
	close(mfd);
	free(src);
	free(got);
}

/* Has the file at @p path come to hold @p want at @p off, within 5 s? */
static bool file_holds(const char *path, const uint8_t *want, size_t len,
		       uint64_t off)
{
	uint8_t *got = th_alloc(len);
	bool same = false;

	for (int i = 0; i < 500 && !same; i++) {
		th_file_read(path, off, got, len);
		same = !memcmp(got, want, len);
		if (!same)
			usleep(10000);
	}
	free(got);
	return same;
}

/*
 * A file cut shorter by someone else under a WRITE (one the owner of a
 * file in memory receives into the file's mapping, as it lay inside the
 * file): what comes after the cut grows the file back, as a write would,
 * the status is OK, and the owner (no SIGBUS) serves the next request.
 */
static void test_write_truncated(void **state)
{
	const size_t len = 3 * MiB;
	uint8_t h[FILE_HDR_LEN], *src = th_alloc(len), *got = th_alloc(len);
	char path[128];
	int fd, ffd;

	(void)state;
	strcpy(path, add_file("cut", 4 * MiB, 0));
	th_fill(src, len, 5);
	fd = th_connect(F.t->data_port);
	put_hdr(h, len, 0, 0x81);
	assert_int_equal(th_send_all(fd, h, sizeof(h)), 0);
	assert_int_equal(th_send_all(fd, src, MiB), 0);
	assert_true(file_holds(path, src, MiB, 0));
	ffd = open(path, O_RDWR);
	assert_true(ffd >= 0);
	assert_int_equal(ftruncate(ffd, 0), 0);
	assert_int_equal(th_send_all(fd, src + MiB, len - MiB), 0);
	assert_int_equal(recv_status(fd), STATUS(FILE_STATUS_OK));
	th_file_read(path, 0, got, len);
	assert_int_equal(th_check_byte(got, MiB, 0), -1); /* cut away */
	assert_memory_equal(got + MiB, src + MiB, len - MiB);
	/* the next request on the same connection */
	put_hdr(h, 64 * KiB, MiB, 0x80);
	assert_int_equal(th_send_all(fd, h, sizeof(h)), 0);
	assert_int_equal(recv_status(fd), STATUS(FILE_STATUS_OK));
	assert_int_equal(th_recv_all(fd, got, 64 * KiB, 5000), 64 * KiB);
	assert_memory_equal(got, src + MiB, 64 * KiB);
	close(ffd);
	close(fd);
	free(src);
	free(got);
}

/* A peer gone before its replies are out costs the owner that
 * connection only: its reply is EPIPE, not a SIGPIPE that ends the
 * process (found by test/fuzz/fuzz_file_server.c). A socketpair, so the
 * peer is gone for certain before the first reply. */
static void test_peer_gone(void **state)
{
	uint8_t h[2 * FILE_HDR_LEN];
	int64_t end = th_now_ms() + 5000;
	unsigned n;
	int sv[2];

	(void)state;
	add_file("f", MiB, 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK |
				    SOCK_CLOEXEC, 0, sv), 0);
	put_hdr(h, 64 * KiB, 0, 0x80);
	put_hdr(h + FILE_HDR_LEN, 64 * KiB, 0, 0x80);
	assert_int_equal(th_send_all(sv[0], h, sizeof(h)), 0);
	close(sv[0]);
	xfer_file_server_accept(F.t, sv[1]);
	do {
		usleep(1000);
		pthread_mutex_lock(&F.t->sconns.lock);
		n = F.t->sconns.n;
		pthread_mutex_unlock(&F.t->sconns.lock);
	} while (n && th_now_ms() < end);
	assert_int_equal(n, 0);
}

/* Stopping with requests in the owner's I/O engine, replies half out
 * and payloads half in frees everything (the sanitizers watch). */
static void test_stop_busy(void **state)
{
	uint8_t h[FILE_HDR_LEN];
	int fd[6];

	(void)state;
	add_file("big", XFER_FILE_MAX_IO, 0);
	for (int i = 0; i < 6; i++) {
		fd[i] = th_connect(F.t->data_port);
		put_hdr(h, XFER_FILE_MAX_IO, 0, i % 3 ? 0x80 : 0x81);
		assert_int_equal(th_send_all(fd[i], h, sizeof(h)), 0);
		if (i % 3 == 0)
			assert_int_equal(th_send_all(fd[i], h, sizeof(h)), 0);
	}
	usleep((useconds_t)(th_now_ms() % 20) * 1000);
	stop();
	for (int i = 0; i < 6; i++)
		close(fd[i]);
}

/* ---- the initiator against a scripted owner ---- */

enum mode {
	M_OK,      /* READ: status OK and th_fill(seed = offset) bytes */
	M_ERRNO,   /* status ENOSPC */
	M_BAD,     /* a status without the magic */
	M_CLOSE,   /* close at the next header */
	M_SILENT,  /* never answer */
	M_HOLD,    /* answer OK once release is set */
};

#define SCRIPT_CONNS (8 * XFER_FILE_CONNS)

static struct {
	int lfd;
	uint16_t port;
	pthread_t thread, conns[SCRIPT_CONNS];
	atomic_int nconns, headers, mode;
	atomic_int bad;            /* requests against §5, seen */
	atomic_bool stop, release;
} S;

struct pending {
	uint64_t size, off;
	bool write;
};

static int recv_exact(int fd, void *buf, size_t len)
{
	return recv(fd, buf, len, MSG_WAITALL) == (ssize_t)len ? 0 : -1;
}

static int reply_to(int fd, const struct pending *q, uint32_t code)
{
	uint64_t st = htole64(code == UINT32_MAX ? 0x1234ull << 32
						 : STATUS(code));
	uint8_t *buf;
	int ret;

	if (th_send_all(fd, &st, 8))
		return -1;
	if (q->write || code != FILE_STATUS_OK)
		return 0;
	buf = malloc(q->size);
	if (!buf)
		return -1;
	th_fill(buf, q->size, q->off);
	ret = th_send_all(fd, buf, q->size);
	free(buf);
	return ret;
}

static void *script_conn(void *arg)
{
	int fd = (int)(intptr_t)arg, npend = 0;
	struct pending *pend = calloc(4096, sizeof(*pend));
	uint8_t h[FILE_HDR_LEN], *sink = malloc(MiB);

	while (!atomic_load(&S.stop)) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int ready = poll(&pfd, 1, 10);
		struct pending q;

		if (npend && atomic_load(&S.release)) {
			for (int i = 0; i < npend; i++)
				reply_to(fd, &pend[i], FILE_STATUS_OK);
			npend = 0;
		}
		if (ready <= 0)
			continue;
		if (recv_exact(fd, h, FILE_HDR_LEN))
			break;
		atomic_fetch_add(&S.headers, 1);
		memcpy(&q.size, h, 8);
		memcpy(&q.off, h + 8, 8);
		q.size = le64toh(q.size);
		q.off = le64toh(q.off);
		q.write = (h[16] & 0x7f) == FILE_OP_WRITE;
		if (!(h[16] & 0x80) || th_check_byte(h + 17, 7, 0) != -1 ||
		    !q.size || q.size > MiB) {
			atomic_fetch_add(&S.bad, 1);
			break;
		}
		if (q.write && recv_exact(fd, sink, q.size))
			break;
		switch (atomic_load(&S.mode)) {
		case M_OK:
			reply_to(fd, &q, FILE_STATUS_OK);
			break;
		case M_ERRNO:
			reply_to(fd, &q, ENOSPC);
			break;
		case M_BAD:
			reply_to(fd, &q, UINT32_MAX);
			break;
		case M_CLOSE:
			goto out;
		case M_SILENT:
			break;
		case M_HOLD:
			pend[npend++] = q;
			break;
		}
	}
out:
	close(fd);
	free(pend);
	free(sink);
	return NULL;
}

static void *script_accept(void *arg)
{
	(void)arg;
	while (!atomic_load(&S.stop)) {
		struct pollfd pfd = { .fd = S.lfd, .events = POLLIN };
		int fd, i;

		if (poll(&pfd, 1, 10) <= 0)
			continue;
		fd = accept(S.lfd, NULL, NULL);
		i = atomic_load(&S.nconns);
		if (fd < 0 || i == SCRIPT_CONNS) {
			close(fd);
			continue;
		}
		pthread_create(&S.conns[i], NULL, script_conn,
			       (void *)(intptr_t)fd);
		atomic_store(&S.nconns, i + 1);
	}
	return NULL;
}

static int setup_script(void **state)
{
	setup(state);
	memset(&S, 0, sizeof(S));
	S.lfd = th_listen(&S.port);
	assert_int_equal(pthread_create(&S.thread, NULL, script_accept, NULL),
			 0);
	return 0;
}

static int teardown_script(void **state)
{
	stop();
	atomic_store(&S.stop, true);
	pthread_join(S.thread, NULL);
	for (int i = 0; i < atomic_load(&S.nconns); i++)
		pthread_join(S.conns[i], NULL);
	close(S.lfd);
	assert_int_equal(atomic_load(&S.bad), 0);
	return teardown(state);
}

/* An errno status fails that slice only; the connection goes on. */
static void test_status_errno(void **state)
{
	struct file_rpeer *p = rpeer(S.port);
	uint8_t buf[4096];

	(void)state;
	atomic_store(&S.mode, M_ERRNO);
	th_assert_status(xfer1(p, XFER_WRITE, buf, 4096, 4096, 4096),
			 XFER_FAILED);
	expect_error("file: write at 4096: owner: ");
	expect_error(strerror(ENOSPC));
	th_assert_status(xfer1(p, XFER_READ, buf, 0, 4096, 4096),
			 XFER_FAILED);
	atomic_store(&S.mode, M_OK);
	for (int i = 0; i < 2 * XFER_FILE_CONNS; i++) {
		th_assert_status(xfer1(p, XFER_READ, buf, 8192, 4096, 4096),
				 XFER_COMPLETED);
		assert_int_equal(th_check(buf, 4096, 8192), -1);
	}
	assert_int_equal(atomic_load(&S.nconns), XFER_FILE_CONNS);
}

/* A malformed status or a lost connection fails what was on it; the
 * next submit connects again. A task's 16 slices go as one request (the
 * owner fills it as one, from its offset). */
static void test_broken(void **state)
{
	struct file_rpeer *p = rpeer(S.port);
	uint8_t *buf = th_alloc(MiB);

	(void)state;
	atomic_store(&S.mode, M_BAD);
	th_assert_status(xfer1(p, XFER_READ, buf, 0, 4096, 4096),
			 XFER_FAILED);
	atomic_store(&S.mode, M_CLOSE);
	th_assert_status(xfer1(p, XFER_READ, buf, 0, MiB, 64 * KiB),
			 XFER_FAILED);
	atomic_store(&S.mode, M_OK);
	th_assert_status(xfer1(p, XFER_READ, buf, 0, MiB, 64 * KiB),
			 XFER_COMPLETED);
	assert_int_equal(th_check(buf, MiB, 0), -1);
	free(buf);
}

/* A task's adjacent slices go as runs, each a request: an eighth of the
 * task each, or the whole task under 1 MiB (the scripted owner fills a
 * READ from its offset, and takes none over 1 MiB). */
static void test_runs(void **state)
{
	size_t len = 8 * MiB;
	uint8_t *buf = th_alloc(len);
	struct file_rpeer *p = rpeer(S.port);

	(void)state;
	atomic_store(&S.mode, M_OK);
	th_assert_status(xfer1(p, XFER_READ, buf, 0, len, 64 * KiB),
			 XFER_COMPLETED);
	assert_int_equal(atomic_load(&S.headers), 8);
	for (size_t i = 0; i < 8; i++)
		assert_int_equal(th_check(buf + i * MiB, MiB, i * MiB), -1);
	th_assert_status(xfer1(p, XFER_READ, buf, 5 * MiB, 768 * KiB,
			       64 * KiB), XFER_COMPLETED);
	assert_int_equal(atomic_load(&S.headers), 9);
	assert_int_equal(th_check(buf, 768 * KiB, 5 * MiB), -1);
	free(buf);
}

static void test_timeout(void **state)
{
	struct file_rpeer *p = rpeer(S.port);
	uint8_t buf[4096];
	int64_t t0 = th_now_ms();

	(void)state;
	F.env.transfer_timeout_ms = 200;
	atomic_store(&S.mode, M_SILENT);
	th_assert_status(xfer1(p, XFER_READ, buf, 0, 4096, 4096),
			 XFER_TIMEOUT);
	assert_true(th_now_ms() - t0 >= 190);
	atomic_store(&S.mode, M_OK);
	th_assert_status(xfer1(p, XFER_READ, buf, 0, 4096, 4096),
			 XFER_COMPLETED);
}

/* Cancels repeated (a closing engine's, every 100 ms) move no byte: a
 * silent owner's request on the wire still times out. */
static void test_timeout_cancels(void **state)
{
	struct file_rpeer *p = rpeer(S.port);
	uint8_t buf[4096];
	struct th_job *j = th_job_new(XFER_READ, buf, 0, sizeof(buf), 4096);
	int64_t t0 = th_now_ms();

	(void)state;
	F.env.transfer_timeout_ms = 200;
	atomic_store(&S.mode, M_SILENT);
	xfer_file_rpeer_submit(p, j->s, j->n);
	while (atomic_load(&S.headers) < 1 && th_now_ms() - t0 < 4000)
		usleep(1000);
	atomic_store(&j->task.canceled, true);
	while (th_job_left(j) && th_now_ms() - t0 < 4000) {
		xfer_file_client_cancel(F.t);
		usleep(20000);
	}
	assert_int_equal(th_job_left(j), 0);
	assert_true(th_now_ms() - t0 < 2000);
	th_job_wait(j);
	free(j);
	atomic_store(&S.mode, M_OK);
}

/* Cancel with 64 requests on the wire per connection and the rest
 * queued (slices apart, one request each): the queued end at once, those
 * on the wire once their replies are in, which are read but land
 * nowhere. */
static void test_cancel(void **state)
{
	size_t wire = 64 * XFER_FILE_CONNS, n = wire + 72, len = n * 4096;
	uint8_t *buf = th_alloc(len);
	struct file_rpeer *p = rpeer(S.port);
	struct th_job *j = th_job_new(XFER_READ, buf, 0, len, 4096);

	(void)state;
	th_job_spread(j);
	memset(buf, 0x5a, len);
	atomic_store(&S.mode, M_HOLD);
	xfer_file_rpeer_submit(p, j->s, j->n);
	for (int64_t end = th_now_ms() + 10000;
	     atomic_load(&S.headers) < (int)wire && th_now_ms() < end;)
		usleep(1000);
	usleep(50000);
	assert_int_equal(atomic_load(&S.headers), wire);
	assert_int_equal(th_job_left(j), n);
	atomic_store(&j->task.canceled, true);
	xfer_file_client_cancel(F.t);
	assert_int_equal(th_job_left(j), wire);
	atomic_store(&S.release, true);
	th_assert_status(th_job_wait(j), XFER_CANCELED);
	assert_int_equal(atomic_load(&j->task.transferred), 0);
	assert_int_equal(th_check_byte(buf, len, 0x5a), -1);
	free(j);
	free(buf);
}

/* Closing with slices on the wire and queued ends them all. */
static void test_close(void **state)
{
	uint8_t *buf = th_alloc(MiB);
	struct file_rpeer *p = rpeer(S.port);
	struct th_job *j = th_job_new(XFER_WRITE, buf, 0, MiB, 4096);

	(void)state;
	th_job_spread(j);
	atomic_store(&S.mode, M_SILENT);
	xfer_file_rpeer_submit(p, j->s, j->n);
	for (int64_t end = th_now_ms() + 10000; atomic_load(&S.headers) < 128 &&
	     th_now_ms() < end;)
		usleep(1000);
	stop();
	assert_int_equal(th_job_left(j), 0);
	th_assert_status(atomic_load(&j->task.failure), XFER_FAILED);
	free(j);
	free(buf);
}

/* The tests against the owner, on one kind of file. */
#define OWNER_TEST(f, kind)                                             \
	{ #f " (" #kind ")", f, setup, teardown, &kind }
#define OWNER_TESTS(kind)                                               \
	OWNER_TEST(test_roundtrip, kind), OWNER_TEST(test_owner_errors, kind), \
	OWNER_TEST(test_hostile, kind), OWNER_TEST(test_write_refused, kind), \
	OWNER_TEST(test_write_truncated, kind), \
	OWNER_TEST(test_peer_gone, kind), OWNER_TEST(test_stop_busy, kind)

int main(void)
{
	const struct CMUnitTest tests[] = {
		OWNER_TESTS(BOUNCE),
		OWNER_TESTS(MEM),
		cmocka_unit_test_setup_teardown(test_status_errno,
						setup_script, teardown_script),
		cmocka_unit_test_setup_teardown(test_broken, setup_script,
						teardown_script),
		cmocka_unit_test_setup_teardown(test_runs, setup_script,
						teardown_script),
		cmocka_unit_test_setup_teardown(test_timeout, setup_script,
						teardown_script),
		cmocka_unit_test_setup_teardown(test_timeout_cancels,
						setup_script, teardown_script),
		cmocka_unit_test_setup_teardown(test_cancel, setup_script,
						teardown_script),
		cmocka_unit_test_setup_teardown(test_close, setup_script,
						teardown_script),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
