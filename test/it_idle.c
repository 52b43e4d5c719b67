/*
 * Integration: an idle engine sleeps. Once transfers are over, with
 * connections open and nothing in flight, no thread of the engines wakes:
 * no reactor has a periodic timer, and a connection's transfer timeout
 * runs only while something is in flight (docs/DESIGN.md, "Threads").
 * Counted by the kernel: how often each thread was put on a CPU.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <time.h>

#include <xfer/xfer.h>

#include "test/helpers.h"

#define LEN (1u << 20)
#define IDLE_S 10

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts))
		;
}

/* Two engines with two workers each, both ways, small (a submitter
 * writes on a lent connection) and large (the workers do), then 10 s of
 * nothing: five transfer timeouts of 2 s, none of which may tick. */
static void test_idle_engines_sleep(void **state)
{
	struct xfer_engine *e[2];
	uint8_t *buf[2] = { th_alloc(LEN), th_alloc(LEN) };
	unsigned long long before, after;
	int64_t seg[2];

	(void)state;
	setenv("XFER_TRANSFER_TIMEOUT_MS", "2000", 1);
	e[0] = th_engine(2);
	e[1] = th_engine(2);
	unsetenv("XFER_TRANSFER_TIMEOUT_MS");
	for (int i = 0; i < 2; i++)
		assert_int_equal(xfer_register(e[i], buf[i], LEN, "cpu:0",
					       true), 0);
	for (int i = 0; i < 2; i++) {
		seg[i] = xfer_segment_open(e[i], xfer_engine_name(e[1 - i]));
		assert_true(seg[i] >= 0);
	}
	for (int round = 0; round < 4; round++)
		for (int i = 0; i < 2; i++) {
			th_write_verified(e[i], buf[i], seg[i], buf[1 - i],
					  4096, round);
			th_write_verified(e[i], buf[i], seg[i], buf[1 - i],
					  LEN, round);
			th_assert_status(th_xfer1(e[i], XFER_READ, buf[i],
						  seg[i],
						  (uintptr_t)buf[1 - i], 4096,
						  NULL), XFER_COMPLETED);
		}
	sleep_ms(500); /* the last replies' handlers return */
	before = th_threads_runs("xfer");
	sleep_ms(IDLE_S * 1000);
	after = th_threads_runs("xfer");
	print_message("engine threads woke %llu times in %d s idle\n",
		      after - before, IDLE_S);
	assert_int_equal(after - before, 0);

	/* and they still work */
	th_write_verified(e[0], buf[0], seg[0], buf[1], 4096, 99);
	for (int i = 0; i < 2; i++) {
		xfer_engine_free(e[i]);
		free(buf[i]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_idle_engines_sleep),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
