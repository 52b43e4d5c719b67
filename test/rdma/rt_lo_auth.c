/*
 * RDMA tier, one guest (rdmavm --topo lo): peer authentication over RDMA.
 * Engines that share auth_secret connect their QPs (the Connection
 * request goes through the authenticated handshake) and move data both
 * ways; an engine with another secret cannot open the segment, so it
 * never gets to ask for a QP.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "test/helpers.h"
#include "test/rdma/rt.h"

#define LEN (1u << 20)

static void test_same_secret_rdma(void **state)
{
	struct rt_targets tg;
	struct xfer_engine *e, *other;
	uint8_t *local = th_alloc(LEN), *want = th_alloc(LEN);
	int64_t seg;

	(void)state;
	/* both processes take it from the environment */
	setenv("XFER_AUTH_SECRET", "rdma tier secret, 32 characters!", 1);
	rt_targets_start(&tg, 1, "127.0.0.1", LEN);
	e = rt_engine("127.0.0.1", 0, 0);
	assert_int_equal(xfer_register(e, local, LEN, "cpu:0", true), 0);
	seg = xfer_segment_open(e, tg.name[0]);
	assert_true(seg >= 0);
	th_fill(want, LEN, 1);
	th_assert_status(th_xfer1(e, XFER_READ, local, seg, tg.addr[0], LEN,
				  NULL), XFER_COMPLETED);
	assert_memory_equal(local, want, LEN);
	th_fill(local, LEN, 9);
	th_assert_status(th_xfer1(e, XFER_WRITE, local, seg, tg.addr[0], LEN,
				  NULL), XFER_COMPLETED);
	memset(local, 0, LEN);
	th_assert_status(th_xfer1(e, XFER_READ, local, seg, tg.addr[0], LEN,
				  NULL), XFER_COMPLETED);
	assert_int_equal(th_check(local, LEN, 9), -1);

	setenv("XFER_AUTH_SECRET", "another secret, also 32 chars...", 1);
	other = rt_engine("127.0.0.1", 0, 0);
	assert_true(xfer_segment_open(other, tg.name[0]) < 0);
	xfer_engine_free(other);
	unsetenv("XFER_AUTH_SECRET");

	assert_int_equal(xfer_segment_close(e, seg), 0);
	assert_int_equal(xfer_unregister(e, local), 0);
	xfer_engine_free(e);
	assert_int_equal(rt_targets_stop(&tg), 0);
	free(local);
	free(want);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_same_secret_rdma),
	};

	return cmocka_run_group_tests_name("rdma: peer authentication", tests,
					   NULL, NULL);
}
