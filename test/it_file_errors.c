/*
 * File segments when things go wrong, each through the initiator's own
 * files and through the owner: out-of-range requests end INVALID and
 * leave the file as it was; a file truncated under the engine and a full
 * file system end the affected tasks FAILED with the errno in the last
 * error while the others complete; and an idle engine holding a file
 * costs no CPU.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test/helpers.h"
#include "test/th_file.h"

#define MIB (1u << 20)
#define FILE_LEN (8 * MIB)
#define BUF_LEN (8 * MIB)

static const struct th_mode modes[] = {
	{ "local", false, true, false },
	{ "through the owner", false, false, false },
};

struct fix {
	const struct th_mode *m;
	char path[128];
	struct th_owner owner;
	struct xfer_engine *e;
	uint8_t *buf;
	int64_t seg;
};

/* An owner of @p path (made with @p made bytes, @p len registered) and an
 * initiator that opened it. */
static struct fix *fix_new(const struct th_mode *m, const char *path,
			   size_t made, uint64_t len)
{
	struct fix *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->m = m;
	snprintf(f->path, sizeof(f->path), "%s", path);
	th_file_make(f->path, made, 5);
	th_owner_start(&f->owner, f->path, len, false);
	f->e = th_file_engine(m);
	f->buf = th_alloc(BUF_LEN);
	memset(f->buf, 0, BUF_LEN);
	assert_int_equal(xfer_register(f->e, f->buf, BUF_LEN, "cpu:0", false),
			 0);
	f->seg = th_file_open(f->e, f->owner.name);
	return f;
}

static void fix_free(struct fix *f)
{
	xfer_engine_free(f->e);
	th_owner_stop(&f->owner);
	free(f->buf);
	free(f);
}

/* Submit @p n requests as one batch; expect status @p want[i] each. */
static void batch(struct fix *f, const struct xfer_request *r, size_t n,
		  const enum xfer_status *want)
{
	struct xfer_batch *b = xfer_batch_new(f->e, n);

	assert_non_null(b);
	assert_int_equal(xfer_batch_submit(b, r, n), 0);
	assert_int_equal(xfer_batch_wait(b, 30000), 0);
	for (size_t i = 0; i < n; i++) {
		struct xfer_task_status ts;

		assert_int_equal(xfer_batch_status(b, i, &ts), 0);
		if (ts.status != want[i])
			fail_msg("%s: task %zu (%llu+%zu): %s, not %s (%s)",
				 f->m->what, i,
				 (unsigned long long)r[i].target_offset,
				 r[i].length, xfer_status_str(ts.status),
				 xfer_status_str(want[i]),
				 xfer_engine_last_error(f->e));
	}
	assert_int_equal(xfer_batch_free(b), 0);
}

static void expect_error(struct fix *f, int err)
{
	const char *msg = xfer_engine_last_error(f->e);

	if (!strstr(msg, strerror(err)))
		fail_msg("%s: last error \"%s\" does not say \"%s\"",
			 f->m->what, msg, strerror(err));
}

static struct xfer_request req(struct fix *f, enum xfer_opcode op,
			       size_t local, uint64_t off, size_t len)
{
	return (struct xfer_request){ .opcode = op, .source = f->buf + local,
				      .target_id = f->seg,
				      .target_offset = off, .length = len };
}

/* Past the end, across it, wrapping around: INVALID, nothing written;
 * a good request in the same batch completes. */
static void test_out_of_range(void **state)
{
	const struct th_mode *m = *state;
	char path[128];
	struct fix *f;
	uint64_t sum;

	snprintf(path, sizeof(path), "%s/range", th_dir);
	f = fix_new(m, path, FILE_LEN, FILE_LEN);
	sum = th_file_sum(f->path);
	{
		struct xfer_request r[] = {
			req(f, XFER_WRITE, 0, FILE_LEN, 1),
			req(f, XFER_WRITE, 0, FILE_LEN - 10, 20),
			req(f, XFER_WRITE, 0, UINT64_MAX - 4, 10),
			req(f, XFER_WRITE, 0, 0, FILE_LEN + 1),
			req(f, XFER_READ, 0, FILE_LEN - 1, 2),
		};
		enum xfer_status want[] = { XFER_INVALID, XFER_INVALID,
					    XFER_INVALID, XFER_INVALID,
					    XFER_INVALID };

		batch(f, r, 5, want);
	}
	assert_true(th_file_sum(f->path) == sum);
	{
		struct xfer_request r[] = {
			req(f, XFER_WRITE, 0, FILE_LEN, 4096),
			req(f, XFER_WRITE, 0, FILE_LEN - 4096, 4096),
		};
		enum xfer_status want[] = { XFER_INVALID, XFER_COMPLETED };
		uint8_t tail[4096];

		th_fill(f->buf, 4096, 77);
		batch(f, r, 2, want);
		th_file_read(f->path, FILE_LEN - 4096, tail, sizeof(tail));
		assert_int_equal(th_check(tail, sizeof(tail), 77), -1);
	}
	fix_free(f);
}

/* The file loses its second half: reads there fail, the rest complete. */
static void test_truncated(void **state)
{
	const struct th_mode *m = *state;
	struct xfer_request r[8];
	enum xfer_status want[8];
	char path[128];
	struct fix *f;

	snprintf(path, sizeof(path), "%s/trunc", th_dir);
	f = fix_new(m, path, FILE_LEN, FILE_LEN);
	assert_int_equal(truncate(f->path, 4 * MIB + 100), 0);
	for (int i = 0; i < 8; i++) {
		r[i] = req(f, XFER_READ, (size_t)i * MIB, (uint64_t)i * MIB,
			   MIB);
		want[i] = i < 4 ? XFER_COMPLETED : XFER_FAILED;
	}
	batch(f, r, 8, want);
	expect_error(f, ENODATA);
	for (int i = 0; i < 4; i++) {
		uint8_t *want_bytes = malloc(MIB);

		assert_non_null(want_bytes);
		th_file_read(f->path, (uint64_t)i * MIB, want_bytes, MIB);
		assert_memory_equal(f->buf + (size_t)i * MIB, want_bytes, MIB);
		free(want_bytes);
	}
	fix_free(f);
}

/* A 1 MiB tmpfs: a write that does not fit fails with ENOSPC; one that
 * fits and one to another segment complete. */
static void test_full(void **state)
{
	const struct th_mode *m = *state;
	char dir[128], path[160];
	struct fix *f;
	int64_t own;

	snprintf(dir, sizeof(dir), "%s/small", th_dir);
	assert_int_equal(mkdir(dir, 0700), 0);
	if (mount("tmpfs", dir, "tmpfs", 0, "size=1m")) {
		rmdir(dir);
		print_message("no tmpfs of our own (%s): skipped\n",
			      strerror(errno));
		skip();
	}
	snprintf(path, sizeof(path), "%s/full", dir);
	f = fix_new(m, path, 0, 8 * MIB);
	own = xfer_segment_open(f->e, xfer_engine_name(f->e));
	assert_true(own >= 0);
	th_fill(f->buf, 4 * MIB, 3);
	{
		struct xfer_request r[] = {
			req(f, XFER_WRITE, 0, 0, 256 << 10),
			req(f, XFER_WRITE, 0, 4 * MIB, 2 * MIB),
			{ .opcode = XFER_WRITE, .source = f->buf,
			  .target_id = own, .length = 256 << 10,
			  .target_offset = (uintptr_t)(f->buf + 6 * MIB) },
		};
		enum xfer_status want[] = { XFER_COMPLETED, XFER_FAILED,
					    XFER_COMPLETED };

		batch(f, r, 3, want);
	}
	expect_error(f, ENOSPC);
	assert_memory_equal(f->buf + 6 * MIB, f->buf, 256 << 10);
	fix_free(f);
	assert_int_equal(umount(dir), 0);
	rmdir(dir);
}

/* CPU seconds of process @p pid so far (utime + stime). */
static double cpu_of(pid_t pid)
{
	unsigned long ut, st;
	char path[64], buf[1024], *p;
	FILE *fp;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fp = fopen(path, "r");
	assert_non_null(fp);
	assert_non_null(fgets(buf, sizeof(buf), fp));
	fclose(fp);
	p = strrchr(buf, ')');
	assert_non_null(p);
	/* fields 14 and 15, after the state and 10 more */
	assert_int_equal(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u "
				"%*u %*u %lu %lu", &ut, &st), 2);
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* An engine holding a file and a peer that moved bytes, both idle for
 * 10 s: under 1% of a core each. */
static void test_idle(void **state)
{
	const struct th_mode *m = *state;
	double owner0, self0, owner, self;
	char path[128];
	struct fix *f;

	snprintf(path, sizeof(path), "%s/idle", th_dir);
	f = fix_new(m, path, MIB, MIB);
	assert_int_equal(th_xfer1(f->e, XFER_READ, f->buf, f->seg, 0, MIB,
				  NULL), XFER_COMPLETED);
	owner0 = cpu_of(f->owner.pid);
	self0 = cpu_of(getpid());
	sleep(10);
	owner = cpu_of(f->owner.pid) - owner0;
	self = cpu_of(getpid()) - self0;
	print_message("idle 10 s, %s: owner %.2f s, initiator %.2f s CPU\n",
		      m->what, owner, self);
	assert_true(owner < 0.1);
	assert_true(self < 0.1);
	fix_free(f);
}

#define NMODES (sizeof(modes) / sizeof(modes[0]))

static int run(void)
{
	static const struct {
		const char *what;
		CMUnitTestFunction fn;
	} cases[] = {
		{ "out of range", test_out_of_range },
		{ "truncated", test_truncated },
		{ "full file system", test_full },
	};
	static char names[4 * NMODES][64];
	struct CMUnitTest t[4 * NMODES];
	size_t n = 0;

	for (size_t i = 0; i < NMODES; i++)
		for (size_t k = 0; k < 3; k++, n++) {
			t[n] = (struct CMUnitTest)cmocka_unit_test_prestate(
				cases[k].fn, (void *)&modes[i]);
			snprintf(names[n], sizeof(names[n]), "%s, %s",
				 cases[k].what, modes[i].what);
			t[n].name = names[n];
		}
	t[n] = (struct CMUnitTest)cmocka_unit_test_prestate(test_idle,
		(void *)&modes[1]);
	t[n++].name = "idle, through the owner";
	return _cmocka_run_group_tests("it_file_errors", t, n, NULL, NULL);
}

int main(int argc, char **argv)
{
	return th_file_main(argc, argv, false, run);
}
