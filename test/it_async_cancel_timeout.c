/*
 * A cancel is no progress: a READ whose request went to a data port that
 * never answers (a listener nobody accepts on, named by a handshake
 * server in a real target's descriptor) still ends at the transfer
 * timeout while it is cancelled every 50 ms, as a closing Python engine
 * does every 100 ms. Each cancel restarted the timeout, so it never
 * ended.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <xfer/xfer.h>

#include "test/helpers.h"
#include "test/th_async.h"

#define TIMEOUT_MS 1000 /* the initiator's transfer timeout */
#define LEN (64u << 10)

static void test_cancels_do_not_stop_the_timeout(void **state)
{
	struct xfer_engine *t = th_engine(1), *e;
	struct xfer_config *cfg = th_config();
	uint8_t *tbuf = th_alloc(LEN), *ebuf = th_alloc(LEN);
	struct xfer_task_status st;
	struct th_fake_hs hs;
	struct xfer_batch *b;
	uint16_t silent_port;
	int lfd = th_listen(&silent_port);
	int64_t seg, t0, took;
	char name[32];

	(void)state;
	th_set(cfg, "bind_addr", "127.0.0.1");
	th_set_num(cfg, "transfer_timeout_ms", TIMEOUT_MS);
	e = xfer_engine_new(cfg);
	xfer_config_free(cfg);
	assert_non_null(e);
	assert_int_equal(xfer_register(t, tbuf, LEN, "cpu:0", true), 0);
	assert_int_equal(xfer_register(e, ebuf, LEN, "cpu:0", true), 0);
	th_fake_hs_start(&hs, th_desc_json(xfer_engine_rpc_port(t),
					   silent_port), 0);
	snprintf(name, sizeof(name), "127.0.0.1:%u", hs.s.port);
	seg = xfer_segment_open(e, name);
	assert_true(seg >= 0);

	b = xfer_batch_new(e, 1);
	assert_non_null(b);
	t0 = th_now_ms();
	assert_int_equal(xfer_batch_submit(b, &(struct xfer_request){
		.opcode = XFER_READ, .source = ebuf, .target_id = seg,
		.target_offset = (uintptr_t)tbuf, .length = LEN }, 1), 0);
	while (xfer_batch_wait(b, 50) && th_now_ms() - t0 < 8 * TIMEOUT_MS)
		assert_int_equal(xfer_batch_cancel(b), 0);
	took = th_now_ms() - t0;
	assert_int_equal(xfer_batch_status(b, 0, &st), 0);
	if (st.status == XFER_WAITING || took > TIMEOUT_MS + 3000)
		fail_msg("a READ cancelled every 50 ms: %s after %lld ms, want "
			 "an end within %d ms", xfer_status_str(st.status),
			 (long long)took, TIMEOUT_MS + 3000);
	assert_int_equal(xfer_batch_wait(b, 10000), 0);
	assert_int_equal(xfer_batch_free(b), 0);

	xfer_engine_free(e);
	th_fake_hs_stop(&hs);
	free((char *)hs.reply);
	close(lfd);
	xfer_engine_free(t);
	free(tbuf);
	free(ebuf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cancels_do_not_stop_the_timeout),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
