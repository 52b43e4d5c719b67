/* The robustness tests' shared part (th_robust.h): the target engine and
 * the good transfer. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "core/desc_internal.h"
#include "test/helpers.h"
#include "test/th_robust.h"

struct robust_target F;

uint64_t tb_addr(size_t off)
{
	return (uintptr_t)F.tb + off;
}

int robust_setup(void **state)
{
	struct xfer_config *cfg = th_config();
	struct xfer_desc *d;

	(void)state;
	/* unregister waits for peers' requests on a buffer up to the
	 * transfer timeout: the attacks here stall them on purpose */
	th_set(cfg, "bind_addr", "127.0.0.1");
	th_set(cfg, "local_server_name", "127.0.0.1");
	th_set(cfg, "workers", "1");
	th_set(cfg, "transfer_timeout_ms", "2000");
	F.t = xfer_engine_new(cfg);
	xfer_config_free(cfg);
	assert_non_null(F.t);
	F.tb = th_alloc(TB_BLOCK);
	memset(F.tb, 0, TB_REG);
	memset(F.tb + TB_REG, TAIL_FILL, TB_BLOCK - TB_REG);
	assert_int_equal(xfer_register(F.t, F.tb, TB_REG, "cpu:0", true), 0);
	F.rpc_port = xfer_engine_rpc_port(F.t);
	assert_int_equal(F.rpc_port, th_name_port(xfer_engine_name(F.t)));
	d = th_fetch_desc(F.rpc_port);
	assert_string_equal(d->name, xfer_engine_name(F.t));
	assert_string_equal(d->protocol, "tcp");
	assert_int_equal(th_tcp(d)->version, 2);
	assert_int_equal(d->nbufs, 1);
	assert_int_equal(d->bufs[0].addr, (uintptr_t)F.tb);
	assert_int_equal(d->bufs[0].length, TB_REG);
	assert_string_equal(d->bufs[0].name, "cpu:0");
	assert_true(th_tcp(d)->data_port != 0);
	F.data_port = th_tcp(d)->data_port;
	xfer_desc_free(d);
	return 0;
}

int robust_teardown(void **state)
{
	(void)state;
	assert_int_equal(th_unregister(F.t, F.tb), 0);
	xfer_engine_free(F.t);
	free(F.tb);
	return 0;
}

void good_transfer(void)
{
	enum { LEN = (64 << 10) + 1, OFF = 1001 };
	static uint64_t seed = 1000;
	struct xfer_engine *i = th_engine(1);
	uint8_t *ib = th_alloc(2 * LEN);
	uint64_t tr = 0;
	int64_t seg;

	seed++;
	th_fill(ib, LEN, seed);
	memset(ib + LEN, 0, LEN);
	assert_int_equal(xfer_register(i, ib, 2 * LEN, "cpu:0", true), 0);
	seg = xfer_segment_open(i, xfer_engine_name(F.t));
	if (seg < 0)
		fail_msg("open after the attack: %lld (%s)", (long long)seg,
			 xfer_engine_last_error(i));
	th_assert_status(th_xfer1(i, XFER_WRITE, ib, seg, tb_addr(OFF), LEN,
				  &tr), XFER_COMPLETED);
	assert_int_equal(tr, LEN);
	assert_int_equal(th_check(F.tb + OFF, LEN, seed), -1);
	th_assert_status(th_xfer1(i, XFER_READ, ib + LEN, seg, tb_addr(OFF),
				  LEN, &tr), XFER_COMPLETED);
	assert_int_equal(tr, LEN);
	assert_int_equal(th_check(ib + LEN, LEN, seed), -1);
	assert_int_equal(th_check_byte(F.tb + TB_REG, TB_BLOCK - TB_REG,
				       TAIL_FILL), -1);
	assert_int_equal(xfer_segment_close(i, seg), 0);
	assert_int_equal(xfer_unregister(i, ib), 0);
	xfer_engine_free(i);
	free(ib);
}
