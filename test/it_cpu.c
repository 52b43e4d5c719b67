/*
 * The engine's CPU figure (xfer_engine_cpu_seconds) covers every thread
 * it started: here the file transport forced onto its worker thread
 * (file_threads) copies a file in and out of memory until that thread
 * alone has burnt a known amount of CPU, and the figure must have grown by
 * the CPU of all the engine's threads, the worker's included, each
 * measured apart by the kernel (schedstat). CPU time, not wall time: a
 * loaded machine slows the test, not its figures.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test/helpers.h"

#define FILE_LEN (32u << 20)
#define BURN_S 0.3     /* CPU seconds the worker must burn */
#define MAX_ROUNDS 200

static void test_file_worker_counted(void **state)
{
	char dir[] = "/tmp/xfer-cpu-XXXXXX", path[64], name[160];
	struct xfer_config *cfg = th_config();
	struct xfer_engine *e;
	uint8_t *buf = th_alloc(FILE_LEN + 4096);
	double e0, all0, w0, e1, all1, w1;
	int64_t seg;
	int fd, rounds = 0;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/f", dir);
	fd = open(path, O_CREAT | O_RDWR, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, FILE_LEN), 0);
	close(fd);

	th_set(cfg, "file_threads", "1");
	e = xfer_engine_new(cfg);
	xfer_config_free(cfg);
	assert_non_null(e);
	/* unaligned memory: buffered I/O, the copies on the worker */
	assert_int_equal(xfer_register(e, buf, FILE_LEN + 4096, "cpu:0", false),
			 0);
	assert_int_equal(xfer_register_file(e, path, FILE_LEN, NULL), 0);
	snprintf(name, sizeof(name), "nvmeof/%s", xfer_engine_name(e));
	seg = xfer_segment_open(e, name);
	assert_true(seg >= 0);
	th_fill(buf + 1, FILE_LEN, 5);

	e0 = xfer_engine_cpu_seconds(e);
	all0 = th_threads_cpu(NULL);
	w0 = th_threads_cpu("fio-");
	do {
		th_assert_status(th_xfer1(e, XFER_WRITE, buf + 1, seg, 0,
					  FILE_LEN, NULL), XFER_COMPLETED);
		th_assert_status(th_xfer1(e, XFER_READ, buf + 1, seg, 0,
					  FILE_LEN, NULL), XFER_COMPLETED);
	} while (th_threads_cpu("fio-") - w0 < BURN_S && ++rounds < MAX_ROUNDS);
	e1 = xfer_engine_cpu_seconds(e);
	all1 = th_threads_cpu(NULL);
	w1 = th_threads_cpu("fio-");
	printf("%d rounds of %u MiB each way: file worker %.3f s, all engine "
	       "threads %.3f s, engine figure %.3f s\n", rounds + 1,
	       FILE_LEN >> 20, w1 - w0, all1 - all0, e1 - e0);
	assert_int_equal(th_check(buf + 1, FILE_LEN, 5), -1);

	/* The worker burnt what was asked of it ... */
	assert_true(w1 - w0 >= BURN_S);
	/* ... and the figure holds it beside the reactors' share (both are
	 * read from the same kernel clocks, microseconds apart). */
	assert_true(e1 - e0 >= 0.9 * (all1 - all0));
	assert_true(e1 - e0 - ((all1 - all0) - (w1 - w0)) >= 0.8 * (w1 - w0));

	xfer_engine_free(e);
	free(buf);
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_file_worker_counted),
	};

	return cmocka_run_group_tests_name("cpu", tests, NULL, NULL);
}
