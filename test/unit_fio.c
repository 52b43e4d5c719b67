/*
 * Unit tests: the file I/O engine (transports/file/fio.c), on io_uring and
 * on its forced worker-thread fallback. The engine's reactor sits on a
 * test-owned event_base that the test dispatches itself, so every done
 * callback must come on the test's thread and never inside a submit.
 * Everything written is checked byte by byte against the file as pread()
 * sees it.
 */
#define _GNU_SOURCE /* O_DIRECT */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>
#include <liburing.h>

#include "reactor/reactor_internal.h"
#include "transports/file/fio_internal.h"
#include "test/helpers.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

/* A request of the test: where it stands and how it ended. */
struct treq {
	struct xfer_fio_req req;
	int calls;
	int res;
	int order;             /* dones before this one's */
	struct treq *then;     /* submitted by this one's done (chains) */
};

static struct {
	bool threads;          /* the mode asked for */
	struct event_base *base;
	struct xfer_reactor r;
	struct xfer_fio *f;
	pthread_t owner;       /* the test's thread */
	bool in_submit;
	int ndone;
	int fd;                /* the test's file, already unlinked */
	uint64_t rng;
} F;

static bool uring = false, threads = true;

static uint64_t rnd(void)
{
	F.rng ^= F.rng << 13;
	F.rng ^= F.rng >> 7;
	F.rng ^= F.rng << 17;
	return F.rng;
}

static void rnd_fill(void *buf, size_t len)
{
	uint8_t *p = buf;

	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)rnd();
}

static void on_done(struct xfer_fio_req *r, int res)
{
	struct treq *t = container_of(r, struct treq, req);

	assert_false(F.in_submit);
	assert_true(pthread_equal(pthread_self(), F.owner));
	assert_true(xfer_reactor_on_thread(&F.r));
	t->calls++;
	t->res = res;
	t->order = F.ndone++;
	if (t->then) {
		F.in_submit = true;
		xfer_fio_submit(F.f, &t->then->req);
		F.in_submit = false;
	}
}

static void prep(struct treq *t, int fd, bool write, void *buf, size_t len,
		 uint64_t off)
{
	memset(t, 0, sizeof(*t));
	t->req = (struct xfer_fio_req){ .fd = fd, .write = write, .buf = buf,
					.len = len, .off = off,
					.done = on_done };
	t->order = -1;
}

static void submit(struct treq *t, size_t n)
{
	F.in_submit = true;
	for (size_t i = 0; i < n; i++)
		xfer_fio_submit(F.f, &t[i].req);
	F.in_submit = false;
}

/* Dispatch the base until @p n more dones came (fails after 60 s). */
static void run(int n)
{
	int want = F.ndone + n;

	assert_true(th_run_until(F.base, F.ndone >= want, 60000));
	assert_int_equal(F.ndone, want);
}

/* One request, start to end. @return its result. */
static int io1(int fd, bool write, void *buf, size_t len, uint64_t off)
{
	struct treq t;

	prep(&t, fd, write, buf, len, off);
	submit(&t, 1);
	run(1);
	assert_int_equal(t.calls, 1);
	return t.res;
}

static void fio_open(unsigned depth)
{
	assert_int_equal(xfer_fio_new(&F.r, depth, F.threads, &F.f), 0);
	if (!F.threads && xfer_fio_threads(F.f))
		print_message("io_uring unavailable here: the fallback runs\n");
	if (F.threads)
		assert_true(xfer_fio_threads(F.f));
}

static void fio_close(void)
{
	xfer_fio_free(F.f);
	F.f = NULL;
}

/* A temporary file in @p dir, unlinked at once, opened with @p flags. */
static int tmp_open(const char *dir, int flags)
{
	char path[256];
	int fd, tmp;

	snprintf(path, sizeof(path), "%s/unit_fio.XXXXXX", dir);
	tmp = mkstemp(path);
	assert_true(tmp >= 0);
	fd = open(path, flags);
	if (fd < 0)
		fd = -errno;
	unlink(path);
	close(tmp);
	return fd;
}

static const char *tmp_dir(void)
{
	const char *d = getenv("TMPDIR");

	return d && *d ? d : "/tmp";
}

static int setup(void **state)
{
	memset(&F, 0, sizeof(F));
	F.threads = *(bool *)*state;
	F.rng = 0x9e3779b97f4a7c15ull;
	F.owner = pthread_self();
	F.base = event_base_new();
	assert_non_null(F.base);
	assert_int_equal(xfer_reactor_init(&F.r, F.base, "t"), 0);
	F.fd = tmp_open(tmp_dir(), O_RDWR);
	assert_true(F.fd >= 0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	xfer_reactor_stop(&F.r);
	if (F.f)
		fio_close();
	xfer_reactor_destroy(&F.r);
	event_base_free(F.base);
	close(F.fd);
	return 0;
}

/* pread() @p len bytes at @p off of @p fd and compare them with @p want. */
static void expect_file(int fd, const void *want, size_t len, uint64_t off)
{
	char *got = malloc(len ? len : 1);

	assert_non_null(got);
	assert_int_equal(pread(fd, got, len, (off_t)off), (ssize_t)len);
	assert_memory_equal(got, want, len);
	free(got);
}

/* 1 B, 4 KiB, 64 KiB + 1 and 16 MiB at scattered offsets, written at
 * once, then read back at once. */
static void test_sizes(void **state)
{
	static const size_t len[] = { 1, 4 * KiB, 64 * KiB + 1, 16 * MiB };
	static const uint64_t off[] = { 40 * MiB + 4095, 7, 100 * MiB + 1,
					1 * MiB + 3 };
	enum { N = 4 };
	char *src[N], *dst[N];
	struct treq t[N];

	(void)state;
	fio_open(8);
	for (int i = 0; i < N; i++) {
		src[i] = malloc(len[i]);
		dst[i] = calloc(1, len[i]);
		rnd_fill(src[i], len[i]);
		prep(&t[i], F.fd, true, src[i], len[i], off[i]);
	}
	submit(t, N);
	run(N);
	for (int i = 0; i < N; i++) {
		assert_int_equal(t[i].calls, 1);
		assert_int_equal(t[i].res, 0);
		expect_file(F.fd, src[i], len[i], off[i]);
		prep(&t[i], F.fd, false, dst[i], len[i], off[i]);
	}
	submit(t, N);
	run(N);
	for (int i = 0; i < N; i++) {
		assert_int_equal(t[i].calls, 1);
		assert_int_equal(t[i].res, 0);
		assert_memory_equal(dst[i], src[i], len[i]);
		free(src[i]);
		free(dst[i]);
	}
}

/* Every request of @p t (@p n, submitted in order at once when F.ndone
 * was 0) ended once with 0, none before the ones ahead had started. */
static void expect_fifo(struct treq *t, int n, int depth)
{
	for (int i = 0; i < n; i++) {
		assert_int_equal(t[i].calls, 1);
		assert_int_equal(t[i].res, 0);
		/* It started with at most depth - 1 of those ahead in flight,
		 * and the others' dones had run before its own could. */
		assert_true(t[i].order >= i - (depth - 1));
		if (F.threads) /* one worker: strictly in order */
			assert_int_equal(t[i].order, i);
	}
}

/* 1000 requests at once, depth 8: scattered, of random sizes. */
static void test_many(void **state)
{
	enum { N = 1000, DEPTH = 8 };
	struct treq *t = calloc(N, sizeof(*t));
	uint64_t *off = calloc(N, sizeof(*off));
	size_t *len = calloc(N, sizeof(*len));
	int *perm = calloc(N, sizeof(*perm));
	uint64_t at = 0;
	char *src, *dst;

	(void)state;
	fio_open(DEPTH);
	/* Disjoint ranges with gaps, submitted in a shuffled order. */
	for (int i = 0; i < N; i++) {
		perm[i] = i;
		at += rnd() % 8192;
		off[i] = at;
		len[i] = 1 + rnd() % (20 * KiB);
		at += len[i];
	}
	for (int i = N - 1; i > 0; i--) {
		int j = (int)(rnd() % (uint64_t)(i + 1)), x = perm[i];

		perm[i] = perm[j];
		perm[j] = x;
	}
	src = malloc(at);
	dst = calloc(1, at);
	rnd_fill(src, at);
	for (int pass = 0; pass < 2; pass++) { /* write, then read back */
		char *buf = pass ? dst : src;

		for (int i = 0; i < N; i++) {
			int k = perm[i];

			prep(&t[i], F.fd, !pass, buf + off[k], len[k], off[k]);
		}
		F.ndone = 0;
		submit(t, N);
		run(N);
		expect_fifo(t, N, DEPTH);
	}
	for (int i = 0; i < N; i++) {
		expect_file(F.fd, src + off[i], len[i], off[i]);
		assert_memory_equal(dst + off[i], src + off[i], len[i]);
	}
	free(src);
	free(dst);
	free(perm);
	free(len);
	free(off);
	free(t);
}

/* Each done submits the next: 200 in a row through the done callbacks. */
static void test_chain(void **state)
{
	enum { N = 200, LEN = 3000 };
	struct treq t[N];
	char *src = malloc(N * LEN), *dst = calloc(1, N * LEN);

	(void)state;
	fio_open(2);
	rnd_fill(src, N * LEN);
	for (int i = 0; i < N; i++)
		prep(&t[i], F.fd, true, src + i * LEN, LEN, (uint64_t)i * LEN);
	for (int i = 0; i + 1 < N; i++)
		t[i].then = &t[i + 1];
	submit(t, 1);
	run(N);
	for (int i = 0; i < N; i++) {
		assert_int_equal(t[i].calls, 1);
		assert_int_equal(t[i].res, 0);
		assert_int_equal(t[i].order, i);
	}
	expect_file(F.fd, src, N * LEN, 0);
	assert_int_equal(io1(F.fd, false, dst, N * LEN, 0), 0);
	assert_memory_equal(dst, src, N * LEN);
	free(src);
	free(dst);
}

/* Reads that meet the end of the file end -ENODATA, after what was there;
 * a read of 0 bytes ends with 0. */
static void test_eof(void **state)
{
	char src[1000], dst[200];

	(void)state;
	fio_open(4);
	rnd_fill(src, sizeof(src));
	assert_int_equal(pwrite(F.fd, src, sizeof(src), 0), sizeof(src));
	memset(dst, 0, sizeof(dst));
	assert_int_equal(io1(F.fd, false, dst, 100, 950), -ENODATA);
	assert_memory_equal(dst, src + 950, 50); /* the short part landed */
	assert_int_equal(io1(F.fd, false, dst, 10, 5000), -ENODATA);
	assert_int_equal(io1(F.fd, false, dst, 0, 5000), 0);
	assert_int_equal(io1(F.fd, false, dst, 200, 800), 0);
	assert_memory_equal(dst, src + 800, 200);
}

/* Errors of the kernel end the request with its errno. */
static void test_errors(void **state)
{
	char path[] = "/proc/self/fd/XXXXXXXXXX";
	char buf[4096] = { 1 };
	int ro, wo, full;

	(void)state;
	fio_open(4);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", F.fd);
	ro = open(path, O_RDONLY);
	wo = open(path, O_WRONLY);
	assert_true(ro >= 0 && wo >= 0);
	assert_int_equal(io1(ro, true, buf, sizeof(buf), 0), -EBADF);
	assert_int_equal(io1(wo, false, buf, sizeof(buf), 0), -EBADF);
	assert_int_equal(io1(-1, false, buf, sizeof(buf), 0), -EBADF);
	assert_int_equal(io1(F.fd, false, buf, sizeof(buf), (uint64_t)-4096),
			 -EINVAL); /* a negative offset */
	close(ro);
	close(wo);
	/* The others go on: one good request after the failures. */
	assert_int_equal(io1(F.fd, true, buf, sizeof(buf), 0), 0);
	full = open("/dev/full", O_WRONLY);
	if (full < 0) {
		print_message("no /dev/full (%s): its ENOSPC not checked\n",
			      strerror(errno));
		return;
	}
	assert_int_equal(io1(full, true, buf, sizeof(buf), 0), -ENOSPC);
	close(full);
}

/* A full file system: a 64 KiB tmpfs, made if we may mount. */
static void test_enospc(void **state)
{
	char dir[256], *big = calloc(1, MiB);
	int fd;

	(void)state;
	snprintf(dir, sizeof(dir), "%s/unit_fio.XXXXXX", tmp_dir());
	assert_non_null(mkdtemp(dir));
	if (mount("unit_fio", dir, "tmpfs", 0, "size=64k")) {
		print_message("cannot mount a tmpfs (%s): skipped\n",
			      strerror(errno));
		rmdir(dir);
		free(big);
		skip();
	}
	fio_open(4);
	fd = tmp_open(dir, O_RDWR);
	assert_true(fd >= 0);
	rnd_fill(big, MiB);
	/* The first 64 KiB go in, the rest cannot. */
	assert_int_equal(io1(fd, true, big, MiB, 0), -ENOSPC);
	close(fd);
	umount2(dir, MNT_DETACH);
	rmdir(dir);
	free(big);
}

/* O_DIRECT with aligned buffers, offsets and lengths, where the file
 * system has it. */
static void test_direct(void **state)
{
	enum { N = 32 };
	const char *dir = getenv("TMPDIR") ? tmp_dir() : "/var/tmp";
	size_t len[N + 1], total = 0;
	struct treq t[N + 1];
	char *src, *dst;
	int fd;

	(void)state;
	fd = tmp_open(dir, O_RDWR | O_DIRECT);
	if (fd == -EINVAL) {
		print_message("no O_DIRECT on %s: skipped\n", dir);
		skip();
	}
	assert_true(fd >= 0);
	fio_open(8);
	for (int i = 0; i < N; i++)
		total += len[i] = 4096 * (1 + rnd() % 32);
	len[N] = 16 * MiB;
	total += len[N];
	src = th_alloc(total);
	dst = th_alloc(total);
	rnd_fill(src, total);
	memset(dst, 0, total);
	for (int pass = 0; pass < 2; pass++) {
		size_t at = 0;

		for (int i = 0; i <= N; i++) {
			prep(&t[i], fd, !pass, (pass ? dst : src) + at, len[i],
			     at);
			at += len[i];
		}
		submit(t, N + 1);
		run(N + 1);
		for (int i = 0; i <= N; i++)
			assert_int_equal(t[i].res, 0);
	}
	assert_memory_equal(dst, src, total);
	{ /* the file as a buffered reader sees it */
		char path[64];
		int buffered;

		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		buffered = open(path, O_RDONLY);
		assert_true(buffered >= 0);
		expect_file(buffered, src, total, 0);
		close(buffered);
	}
	/* Past the end: a short aligned read, then nothing. */
	assert_int_equal(io1(fd, false, dst, 8192, total - 4096), -ENODATA);
	assert_memory_equal(dst, src + total - 4096, 4096);
	free(src);
	free(dst);
	close(fd);
}

/* Does io_uring complete a read of @p fd's page cache inside
 * io_uring_enter here (ext4 and xfs do; tmpfs without RWF_NOWAIT not)? */
static bool uring_inline(int fd)
{
	struct io_uring ring;
	char b[4096];
	bool yes;

	if (io_uring_queue_init(2, &ring, 0))
		return false;
	io_uring_prep_read(io_uring_get_sqe(&ring), fd, b, sizeof(b), 0);
	yes = io_uring_submit(&ring) == 1 && io_uring_cq_ready(&ring) == 1;
	io_uring_queue_exit(&ring);
	return yes;
}

/* Reads the page cache answers inside io_uring_enter are reaped by the
 * handler that submitted them: one turn of the loop ends them all, with
 * no round trip through the eventfd. */
static void test_inline(void **state)
{
	enum { N = 16, LEN = 64 * KiB };
	char *src = malloc(N * LEN), *dst = calloc(N, LEN);
	struct treq t[N];

	(void)state;
	fio_open(N);
	rnd_fill(src, N * LEN);
	assert_int_equal(pwrite(F.fd, src, N * LEN, 0), N * LEN);
	if (xfer_fio_threads(F.f) || !uring_inline(F.fd)) {
		print_message("no inline page-cache reads here: skipped\n");
		free(src);
		free(dst);
		skip();
	}
	for (int i = 0; i < N; i++)
		prep(&t[i], F.fd, false, dst + i * LEN, LEN, (uint64_t)i * LEN);
	submit(t, N);
	assert_int_equal(event_base_loop(F.base, EVLOOP_ONCE), 0);
	assert_int_equal(F.ndone, N);
	for (int i = 0; i < N; i++)
		assert_int_equal(t[i].res, 0);
	assert_memory_equal(dst, src, N * LEN);
	free(src);
	free(dst);
}

/* Whether the page cache holds all of the first @p len bytes of @p fd. */
static bool all_cached(int fd, size_t len)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t n = (len + (size_t)page - 1) / (size_t)page;
	unsigned char *vec = calloc(n, 1);
	void *map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	bool all = true;

	assert_true(map != MAP_FAILED);
	assert_int_equal(mincore(map, len, vec), 0);
	for (size_t i = 0; i < n; i++)
		all = all && (vec[i] & 1);
	munmap(map, len);
	free(vec);
	if (all)
		print_message("the page cache kept the file: read at once\n");
	return all;
}

/* xfer_fio_now(): what the page cache holds ends at once, on this
 * thread; an evicted range would wait and is left to a submission. */
static void test_now(void **state)
{
	enum { LEN = 256 * KiB };
	char *src = malloc(LEN), *dst = calloc(1, LEN);
	struct xfer_fio_req r = { .fd = F.fd, .buf = dst, .len = LEN };
	bool cached;
	int ret;

	(void)state;
	rnd_fill(src, LEN);
	assert_int_equal(pwrite(F.fd, src, LEN, 0), LEN);
	ret = xfer_fio_now(&r, true);
	if (ret == -EOPNOTSUPP) {
		print_message("no RWF_NOWAIT reads in %s: skipped\n",
			      tmp_dir());
		free(src);
		free(dst);
		skip();
	}
	assert_int_equal(ret, 0);
	assert_int_equal(r.res, 0);
	assert_memory_equal(dst, src, LEN);
	r.off = LEN - 100; /* meets the end of the file */
	assert_int_equal(xfer_fio_now(&r, true), 0);
	assert_int_equal(r.res, -ENODATA);
	assert_memory_equal(dst, src + LEN - 100, 100);
	/* Written back and dropped from the cache: it would wait. The
	 * kernel may keep some pages (tmpfs keeps all): mincore() says which
	 * answer is right. */
	assert_int_equal(fsync(F.fd), 0);
	assert_int_equal(posix_fadvise(F.fd, 0, LEN, POSIX_FADV_DONTNEED), 0);
	r.off = 0;
	cached = all_cached(F.fd, LEN); /* first: a refused read reads ahead */
	assert_int_equal(xfer_fio_now(&r, true), cached ? 0 : -EAGAIN);
	/* Without RWF_NOWAIT (a file in memory) it waits and ends. */
	memset(dst, 0, LEN);
	assert_int_equal(xfer_fio_now(&r, false), 0);
	assert_int_equal(r.res, 0);
	assert_memory_equal(dst, src, LEN);
	/* A write ends at once or is refused, as the file system can. */
	r = (struct xfer_fio_req){ .fd = F.fd, .write = true, .buf = src,
				   .len = 4096, .off = LEN };
	ret = xfer_fio_now(&r, true);
	assert_true(ret == 0 || ret == -EOPNOTSUPP || ret == -EAGAIN);
	if (!ret)
		expect_file(F.fd, src, 4096, LEN);
	free(src);
	free(dst);
}

/* Freed with requests queued: each done runs once, before the return,
 * on the caller's thread; those that never started -ECANCELED. */
static void test_free_queued(void **state)
{
	enum { N = 1000, DEPTH = 8, LEN = 4096 };
	struct treq *t = calloc(N + 1, sizeof(*t));
	char *buf = calloc(N, LEN);
	int ok = 0, before;

	(void)state;
	fio_open(DEPTH);
	assert_int_equal(ftruncate(F.fd, (off_t)N * LEN), 0);
	for (int i = 0; i < N; i++)
		prep(&t[i], F.fd, false, buf + (size_t)i * LEN, LEN,
		     (uint64_t)i * LEN);
	/* One done resubmits during the free: that one is canceled too. */
	prep(&t[N], F.fd, false, buf, LEN, 0);
	t[N - 1].then = &t[N];
	submit(t, N);
	/* Let the first few go, then stop dispatching. */
	assert_true(th_run_until(F.base, F.ndone >= 3, 10000));
	before = F.ndone;
	xfer_reactor_stop(&F.r);
	fio_close();
	assert_int_equal(F.ndone, N + 1);
	for (int i = 0; i <= N; i++) {
		assert_int_equal(t[i].calls, 1);
		if (t[i].res == 0)
			ok++;
		else
			assert_int_equal(t[i].res, -ECANCELED);
	}
	/* Those done, and at most depth that had started after them. */
	assert_true(ok >= before && ok <= before + DEPTH);
	for (int i = before + DEPTH; i <= N; i++)
		assert_int_equal(t[i].res, -ECANCELED);
	free(buf);
	free(t);
}

/* Not a check: 1 GiB of 1 MiB reads from the page cache, 8 at once;
 * each done submits its request again for the next MiB. */
enum { SPEED_DEPTH = 8, SPEED_FILE_MIB = 64 };
static int speed_left;

static void speed_done(struct xfer_fio_req *r, int res)
{
	assert_int_equal(res, 0);
	F.ndone++;
	if (speed_left > 0) {
		speed_left--;
		r->off = (r->off + SPEED_DEPTH * MiB) % (SPEED_FILE_MIB * MiB);
		xfer_fio_submit(F.f, r);
	}
}

static void test_speed(void **state)
{
	struct xfer_fio_req t[SPEED_DEPTH];
	char *buf = th_alloc(SPEED_DEPTH * MiB);
	double ms = 0;

	(void)state;
	fio_open(SPEED_DEPTH);
	rnd_fill(buf, MiB);
	for (size_t i = 0; i < SPEED_FILE_MIB; i++)
		assert_int_equal(pwrite(F.fd, buf, MiB, (off_t)(i * MiB)),
				 (ssize_t)MiB);
	for (int pass = 0; pass < 2; pass++) { /* the first warms the cache */
		int total = pass ? 1024 : SPEED_FILE_MIB;
		int64_t t0 = th_now_ms();

		speed_left = total - SPEED_DEPTH;
		for (int i = 0; i < SPEED_DEPTH; i++) {
			t[i] = (struct xfer_fio_req){ .fd = F.fd,
				.buf = buf + i * MiB, .len = MiB,
				.off = i * MiB, .done = speed_done };
			xfer_fio_submit(F.f, &t[i]);
		}
		run(total);
		ms = (double)(th_now_ms() - t0);
	}
	print_message("%s: %.2f GB/s (1 GiB of 1 MiB reads, depth %d, page "
		      "cache)\n", xfer_fio_threads(F.f) ? "worker thread" :
		      "io_uring", 1024 * (double)MiB / 1e6 / (ms ? ms : 1),
		      SPEED_DEPTH);
	free(buf);
}

#define BOTH(fn) \
	{ #fn " io_uring", fn, setup, teardown, &uring }, \
	{ #fn " threads", fn, setup, teardown, &threads }

int main(void)
{
	const struct CMUnitTest tests[] = {
		BOTH(test_sizes),
		BOTH(test_many),
		BOTH(test_chain),
		BOTH(test_eof),
		BOTH(test_errors),
		BOTH(test_enospc),
		BOTH(test_direct),
		{ "test_inline io_uring", test_inline, setup, teardown, &uring },
		{ "test_now", test_now, setup, teardown, &uring },
		BOTH(test_free_queued),
		BOTH(test_speed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
