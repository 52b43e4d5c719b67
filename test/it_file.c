/*
 * File segments between two processes: a forked owner registers a file
 * on disk, this process opens "nvmeof/<owner>" by name (p2p, and through
 * xfer-metad), WRITEs then READs back 1 B, 4 KiB, 64 KiB + 1 and 16 MiB,
 * O_DIRECT-aligned and not, and a batch of 1000 scattered requests; every
 * byte is compared with the file read independently. Through its own
 * files (io_uring, and the worker thread once) and through the owner.
 * Small buffered reads of a cached file end inside the submit (the
 * submitting thread moves them). And the registry as peers see it: files
 * added, grown and dropped; and the owner's data port with a cluster
 * secret.
 */
#define _GNU_SOURCE /* preadv2 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <linux/loop.h>

#include "test/helpers.h"
#include "test/th_file.h"

#define FILE_LEN (48u << 20)
#define BUF_LEN (40u << 20)
#define NSCATTER 1000
#define SLOT (FILE_LEN / NSCATTER)   /* each scattered request's room */

static const struct th_mode modes[] = {
	{ "p2p, local", false, true, false },
	{ "p2p, through the owner", false, false, false },
	{ "p2p, local, worker thread", false, true, true },
	{ "xfer-metad, local", true, true, false },
	{ "xfer-metad, through the owner", true, false, false },
};

struct fix {
	const struct th_mode *m;
	char path[128];
	struct th_owner owner;
	struct xfer_engine *e;
	uint8_t *buf, *want;
	int64_t seg;
	bool remove;        /* the file, at the end (th_dir goes as a whole) */
};

/* The file at @p path, made (or a device filled) here. */
static int start(void **state, const char *path, bool remove)
{
	struct fix *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->m = *state;
	f->remove = remove;
	snprintf(f->path, sizeof(f->path), "%s", path);
	th_file_make(f->path, FILE_LEN, 99);
	th_owner_start(&f->owner, f->path, FILE_LEN, f->m->metad);
	f->e = th_file_engine(f->m);
	f->buf = th_alloc(BUF_LEN);
	f->want = th_alloc(BUF_LEN);
	assert_int_equal(xfer_register(f->e, f->buf, BUF_LEN, "cpu:0", false),
			 0);
	f->seg = th_file_open(f->e, f->owner.name);
	*state = f;
	return 0;
}

static int setup(void **state)
{
	char path[128];

	snprintf(path, sizeof(path), "%s/seg", th_dir);
	return start(state, path, false);
}

/* The file on tmpfs. */
static int setup_shm(void **state)
{
	char path[128];

	snprintf(path, sizeof(path), "/dev/shm/it_file-%d", (int)getpid());
	return start(state, path, true);
}

static int teardown(void **state)
{
	struct fix *f = *state;

	xfer_engine_free(f->e);
	th_owner_stop(&f->owner);
	if (f->remove)
		unlink(f->path);
	free(f->buf);
	free(f->want);
	free(f);
	return 0;
}

/* The file's bytes at @p off must be th_fill(@p seed). */
static void expect_file(struct fix *f, uint64_t off, size_t len,
			uint64_t seed)
{
	long bad;

	th_file_read(f->path, off, f->want, len);
	bad = th_check(f->want, len, seed);
	if (bad >= 0)
		fail_msg("%s: file byte %llu+%ld differs after a write of %zu",
			 f->m->what, (unsigned long long)off, bad, len);
}

static void one(struct fix *f, enum xfer_opcode op, size_t local,
		uint64_t off, size_t len)
{
	enum xfer_status st = th_xfer1(f->e, op, f->buf + local, f->seg, off,
				       len, NULL);

	if (st != XFER_COMPLETED)
		fail_msg("%s: %s of %zu at %llu: %s (%s)", f->m->what,
			 op == XFER_READ ? "read" : "write", len,
			 (unsigned long long)off, xfer_status_str(st),
			 xfer_engine_last_error(f->e));
}

/* WRITE th_fill(seed) from buf+local to off, check the file, READ it back
 * into a cleared buffer, check that. */
static void round_trip(struct fix *f, size_t local, uint64_t off, size_t len,
		       uint64_t seed)
{
	th_fill(f->buf + local, len, seed);
	one(f, XFER_WRITE, local, off, len);
	expect_file(f, off, len, seed);
	memset(f->buf + local, 0, len);
	one(f, XFER_READ, local, off, len);
	assert_int_equal(th_check(f->buf + local, len, seed), -1);
}

static void test_sizes(void **state)
{
	static const size_t lens[] = { 1, 4096, (64u << 10) + 1, 16u << 20 };
	struct fix *f = *state;

	for (size_t i = 0; i < 4; i++) {
		/* aligned: page-aligned memory, offset and length (O_DIRECT
		 * on this disk for 4 KiB and 16 MiB) */
		round_trip(f, 0, (uint64_t)i << 20, lens[i], i);
		/* unaligned: buffered */
		round_trip(f, 4099, (20u << 20) + 8197 + (i << 10), lens[i],
			   10 + i);
	}
}

/* 1000 requests at scattered offsets, one batch each way. */
static void test_scatter(void **state)
{
	struct fix *f = *state;
	struct xfer_request *r = calloc(NSCATTER, sizeof(*r));
	struct xfer_batch *b;
	size_t local = 0;
	uint64_t seed = 1000;

	assert_non_null(r);
	srand(7);
	for (size_t i = 0; i < NSCATTER; i++) {
		size_t len = 1 + (size_t)rand() % (16u << 10);
		size_t k = (i * 379) % NSCATTER; /* a permutation of slots */

		r[i] = (struct xfer_request){
			.opcode = XFER_WRITE, .source = f->buf + local,
			.target_id = f->seg, .length = len,
			.target_offset = (uint64_t)k * SLOT +
					 (size_t)rand() % (SLOT - len),
		};
		th_fill(f->buf + local, len, seed + i);
		local += len;
	}
	for (int pass = 0; pass < 2; pass++) {
		b = xfer_batch_new(f->e, NSCATTER);
		assert_non_null(b);
		assert_int_equal(xfer_batch_submit(b, r, NSCATTER), 0);
		assert_int_equal(xfer_batch_wait(b, 60000), 0);
		for (size_t i = 0; i < NSCATTER; i++) {
			struct xfer_task_status ts;

			assert_int_equal(xfer_batch_status(b, i, &ts), 0);
			th_assert_status(ts.status, XFER_COMPLETED);
			assert_int_equal(ts.transferred, r[i].length);
		}
		assert_int_equal(xfer_batch_free(b), 0);
		for (size_t i = 0; i < NSCATTER; i++) {
			if (pass == 0) {
				expect_file(f, r[i].target_offset, r[i].length,
					    seed + i);
				memset(r[i].source, 0, r[i].length);
				r[i].opcode = XFER_READ;
			} else {
				assert_int_equal(th_check(r[i].source,
							  r[i].length,
							  seed + i), -1);
			}
		}
	}
	free(r);
}

/* Does the page cache of @p path answer a read with RWF_NOWAIT? */
static bool nowait_reads(const char *path)
{
	char b[512];
	struct iovec iov = { b, sizeof(b) };
	int fd = open(path, O_RDONLY);
	bool yes = fd >= 0 && preadv2(fd, &iov, 1, 0, RWF_NOWAIT) > 0;

	if (fd >= 0)
		close(fd);
	return yes;
}

/* Batches of @p op of small pieces of the file, unaligned (buffered) or
 * @p aligned (O_DIRECT where the file system has it), each checked: did
 * every task of one end before xfer_batch_submit() returned, with no
 * thread of the engine put on a CPU meanwhile (the submitting thread
 * moved them itself)? A page being written back may make one wait, or
 * a reactor's timer fire, so up to 5 batches, one of which must. */
static bool lent(struct fix *f, enum xfer_opcode op, bool aligned)
{
	enum { N = 16 };
	size_t len = aligned ? 65536 : 10000, step = aligned ? len : 20011;
	uint64_t at = !aligned;
	struct xfer_request r[N];
	bool inside = false;

	for (int i = 0; i < N; i++)
		r[i] = (struct xfer_request){
			.opcode = op, .source = f->buf + i * step,
			.target_id = f->seg, .length = len,
			.target_offset = i * step + at,
		};
	for (int round = 0; round < 5 && !inside; round++) {
		struct xfer_batch *b = xfer_batch_new(f->e, N);
		unsigned long long runs;

		th_fill(f->buf, N * step, 7 + round);
		if (op == XFER_READ)
			th_file_read(f->path, 0, f->want, N * step + at);
		assert_non_null(b);
		runs = th_threads_runs("xfer");
		assert_int_equal(xfer_batch_submit(b, r, N), 0);
		inside = th_threads_runs("xfer") == runs;
		for (int i = 0; i < N; i++) {
			struct xfer_task_status ts;

			assert_int_equal(xfer_batch_status(b, i, &ts), 0);
			inside = inside && ts.status == XFER_COMPLETED;
		}
		assert_int_equal(xfer_batch_wait(b, 60000), 0);
		assert_int_equal(xfer_batch_free(b), 0);
		if (op == XFER_WRITE)
			th_file_read(f->path, 0, f->want, N * step + at);
		for (int i = 0; i < N; i++)
			assert_memory_equal(f->buf + i * step,
					    f->want + i * step + at, len);
	}
	return inside;
}

/* The file on disk, in the page cache: reads end inside the submit,
 * where the file system has RWF_NOWAIT reads. */
static void test_lent(void **state)
{
	struct fix *f = *state;

	if (!nowait_reads(f->path)) {
		print_message("no RWF_NOWAIT reads on %s: skipped\n", th_dir);
		skip();
	}
	assert_true(lent(f, XFER_READ, false));
}

/* The file on tmpfs: reads and writes end inside the submit, aligned
 * (the O_DIRECT fd, which tmpfs takes since Linux 6.6) or not. */
static void test_lent_shm(void **state)
{
	struct fix *f = *state;

	for (int aligned = 0; aligned < 2; aligned++) {
		assert_true(lent(f, XFER_READ, aligned));
		assert_true(lent(f, XFER_WRITE, aligned));
	}
}

/* A loop device over a new FILE_LEN file in /dev/shm (@p backing), that
 * goes with its last close. @return its fd, its path in @p dev; -1 where
 * none can be had (not root, no loop driver). */
static int loop_make(char *backing, size_t blen, char *dev, size_t dlen)
{
	struct loop_info64 li = { .lo_flags = LO_FLAGS_AUTOCLEAR };
	int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	int n = ctl < 0 ? -1 : ioctl(ctl, LOOP_CTL_GET_FREE), fd = -1, bfd;

	if (ctl >= 0)
		close(ctl);
	if (n < 0)
		return -1;
	snprintf(dev, dlen, "/dev/loop%d", n);
	snprintf(backing, blen, "/dev/shm/it_file-loop-%d", (int)getpid());
	bfd = open(backing, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (bfd < 0)
		return -1;
	if (ftruncate(bfd, FILE_LEN) || (fd = open(dev, O_RDWR | O_CLOEXEC)) < 0)
		goto out;
	if (ioctl(fd, LOOP_SET_FD, bfd)) { /* taken meanwhile */
		close(fd);
		fd = -1;
	} else if (ioctl(fd, LOOP_SET_STATUS64, &li)) {
		ioctl(fd, LOOP_CLR_FD, 0);
		close(fd);
		fd = -1;
	}
out:
	close(bfd);
	if (fd < 0)
		unlink(backing);
	return fd;
}

/* A block device on devtmpfs is no file in memory: its O_DIRECT reads go
 * to the ring, none moved by the submitter (which would wait for the
 * device on the caller's thread). */
static void test_lent_blockdev(void **state)
{
	char backing[64], dev[32];
	int fd = loop_make(backing, sizeof(backing), dev, sizeof(dev));
	void *st = *state;

	if (fd < 0) {
		print_message("no loop device here: skipped\n");
		skip();
	}
	start(&st, dev, false);
	assert_false(lent(st, XFER_READ, true));
	teardown(&st);
	close(fd);
	unlink(backing);
}

/* The buffers of @p seg as @p e sees them after a refresh: @p n of them,
 * lengths @p lens, paths ending in @p tails. */
static void expect_files(struct xfer_engine *e, int64_t seg, size_t n,
			 const uint64_t *lens, const char *const *tails)
{
	uint64_t off, len, start = 0;
	const char *name;

	assert_int_equal(xfer_segment_refresh(e, seg), 0);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(xfer_segment_buffer(e, seg, i, &off, &len,
						     &name), 0);
		assert_int_equal(off, start);
		assert_int_equal(len, lens[i]);
		assert_non_null(strstr(name, tails[i]));
		start += len;
	}
	assert_int_equal(xfer_segment_buffer(e, seg, n, &off, &len, NULL),
			 -ENOENT);
}

static void registered(struct xfer_engine *e, int result, void *arg)
{
	(void)e;
	atomic_store((atomic_int *)arg, result ? -1 : 1);
}

/* Through xfer-metad: what a call did is in the store when it returns. */
static void test_registry(void **state)
{
	static const struct th_mode m = { "xfer-metad", true, true, false };
	struct xfer_config *cfg = th_config();
	struct xfer_engine *owner, *peer;
	char a[128], b[128], none[128];
	atomic_int done = 0;
	int64_t seg;

	(void)state;
	snprintf(a, sizeof(a), "%s/a", th_dir);
	snprintf(b, sizeof(b), "%s/b", th_dir);
	snprintf(none, sizeof(none), "%s/none", th_dir);
	th_file_make(a, 1000, 1);
	th_file_make(b, 0, 2);
	th_set(cfg, "bind_addr", "127.0.0.1");
	th_set(cfg, "metadata_server", th_metad_url);
	th_set(cfg, "local_server_name", "registry-owner");
	owner = xfer_engine_new(cfg);
	xfer_config_free(cfg);
	assert_non_null(owner);
	peer = th_file_engine(&m);

	assert_int_equal(xfer_register_file(owner, a, 0, NULL), 0);
	seg = th_file_open(peer, "registry-owner");
	expect_files(peer, seg, 1, (uint64_t[]){ 1000 },
		     (const char *[]){ "/a" });
	/* an empty file needs a length; then it runs past the end */
	assert_int_equal(xfer_register_file(owner, b, 0, NULL), -EINVAL);
	assert_int_equal(xfer_register_file(owner, b, 4096,
			 (const char *[]){ "elsewhere", "/mnt/b", NULL }), 0);
	expect_files(peer, seg, 2, (uint64_t[]){ 1000, 4096 },
		     (const char *[]){ "/a", "/b" });
	/* growing is in place; shrinking is refused; the same is no change */
	assert_int_equal(xfer_register_file(owner, a, 3000, NULL), 0);
	assert_int_equal(xfer_register_file(owner, a, 2000, NULL), -EEXIST);
	assert_int_equal(xfer_register_file(owner, a, 3000, NULL), 0);
	expect_files(peer, seg, 2, (uint64_t[]){ 3000, 4096 },
		     (const char *[]){ "/a", "/b" });
	/* dropping the first moves the second to offset 0 */
	assert_int_equal(xfer_unregister_file(owner, a), 0);
	assert_int_equal(xfer_unregister_file(owner, a), -ENOENT);
	expect_files(peer, seg, 1, (uint64_t[]){ 4096 },
		     (const char *[]){ "/b" });
	/* the asynchronous form: its callback says peers can see it */
	assert_int_equal(xfer_register_file_async(owner, a, 0, NULL,
						  registered, &done), 0);
	assert_true(th_wait_atomic(&done, 1, 10000));
	expect_files(peer, seg, 2, (uint64_t[]){ 4096, 1000 },
		     (const char *[]){ "/b", "/a" });
	/* nothing registered by a bad call */
	assert_int_equal(xfer_register_file(owner, none, 10, NULL), -ENOENT);
	assert_int_equal(xfer_register_file(owner, "", 10, NULL), -EINVAL);
	assert_int_equal(xfer_register_file(owner, a, 10,
			 (const char *[]){ "", "/x", NULL }), -EINVAL);
	expect_files(peer, seg, 2, (uint64_t[]){ 4096, 1000 },
		     (const char *[]){ "/b", "/a" });
	xfer_engine_free(peer);
	xfer_engine_free(owner);
}

/* An initiator with @p secret (NULL: none) reading through the owner. */
static enum xfer_status read_with(const char *secret, const char *owner,
				  uint8_t *buf, size_t len)
{
	static const struct th_mode m = { "secret", true, false, false };
	struct xfer_engine *e;
	enum xfer_status st;

	if (secret)
		setenv("XFER_AUTH_SECRET", secret, 1);
	e = th_file_engine(&m);
	unsetenv("XFER_AUTH_SECRET");
	assert_int_equal(xfer_register(e, buf, len, "cpu:0", false), 0);
	st = th_xfer1(e, XFER_READ, buf, th_file_open(e, owner), 0, len, NULL);
	xfer_engine_free(e);
	return st;
}

/* An owner with a cluster secret serves its files to peers that know it
 * and to no one else: not a byte lands for them. */
static void test_secret(void **state)
{
	struct th_owner owner;
	char path[128];
	uint8_t *buf = th_alloc(1 << 20);

	(void)state;
	snprintf(path, sizeof(path), "%s/secret", th_dir);
	th_file_make(path, 1 << 20, 42);
	setenv("XFER_AUTH_SECRET", "file-secret", 1);
	th_owner_start(&owner, path, 1 << 20, true);
	unsetenv("XFER_AUTH_SECRET");
	memset(buf, 0x5a, 1 << 20);
	th_assert_status(read_with("another", owner.name, buf, 1 << 20),
			 XFER_FAILED);
	th_assert_status(read_with(NULL, owner.name, buf, 1 << 20),
			 XFER_FAILED);
	assert_int_equal(th_check_byte(buf, 1 << 20, 0x5a), -1);
	th_assert_status(read_with("file-secret", owner.name, buf, 1 << 20),
			 XFER_COMPLETED);
	assert_int_equal(th_check(buf, 1 << 20, 42), -1);
	th_owner_stop(&owner);
	free(buf);
}

#define NMODES (sizeof(modes) / sizeof(modes[0]))

static int run(void)
{
	static char names[3 * NMODES][64];
	struct CMUnitTest t[3 * NMODES + 4];
	size_t n = 0;

	for (size_t i = 0; i < NMODES; i++) {
		t[n] = (struct CMUnitTest)cmocka_unit_test_prestate_setup_teardown(
			test_sizes, setup, teardown, (void *)&modes[i]);
		snprintf(names[n], sizeof(names[n]), "sizes, %s", modes[i].what);
		t[n].name = names[n];
		n++;
		t[n] = (struct CMUnitTest)cmocka_unit_test_prestate_setup_teardown(
			test_scatter, setup, teardown, (void *)&modes[i]);
		snprintf(names[n], sizeof(names[n]), "1000 scattered, %s",
			 modes[i].what);
		t[n].name = names[n];
		n++;
		if (!modes[i].local)
			continue;
		t[n] = (struct CMUnitTest)cmocka_unit_test_prestate_setup_teardown(
			test_lent, setup, teardown, (void *)&modes[i]);
		snprintf(names[n], sizeof(names[n]), "lent reads, %s",
			 modes[i].what);
		t[n].name = names[n];
		n++;
	}
	t[n++] = (struct CMUnitTest)cmocka_unit_test_prestate_setup_teardown(
		test_lent_shm, setup_shm, teardown, (void *)&modes[0]);
	t[n++] = (struct CMUnitTest)cmocka_unit_test_prestate(
		test_lent_blockdev, (void *)&modes[0]);
	t[n++] = (struct CMUnitTest)cmocka_unit_test(test_registry);
	t[n++] = (struct CMUnitTest)cmocka_unit_test(test_secret);
	return _cmocka_run_group_tests("it_file", t, n, NULL, NULL);
}

int main(int argc, char **argv)
{
	return th_file_main(argc, argv, true, run);
}
