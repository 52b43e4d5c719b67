/*
 * What the robustness tests (test/it_robust*.c) share: a target engine
 * with one registered buffer, and the good transfer that proves, after
 * each attack, that it still serves.
 */
#ifndef XFER_TEST_TH_ROBUST_H
#define XFER_TEST_TH_ROBUST_H

#include <stddef.h>
#include <stdint.h>

struct xfer_engine;

/* The target registers the first TB_REG bytes of a TB_BLOCK block; the
 * rest (TAIL_FILL) lies just past the registered buffer. */
#define TB_BLOCK (256u << 10)
#define TB_REG (128u << 10)
#define TAIL_FILL 0x5A
#define CLOSE_MS 6000

/** The target, made by robust_setup(). */
struct robust_target {
	struct xfer_engine *t;
	uint8_t *tb;                   /* the TB_BLOCK block */
	uint16_t rpc_port, data_port;
};

extern struct robust_target F;

/** The address of byte @p off of F.tb, as a peer names it. */
uint64_t tb_addr(size_t off);

/** cmocka group setup: make F, with its descriptor checked. */
int robust_setup(void **state);

/** cmocka group teardown: free F. */
int robust_teardown(void **state);

/**
 * A fresh engine opens the target by name (a handshake) and WRITEs then
 * READs 64 KiB + 1 at an odd offset; every byte is checked, and the bytes
 * past the registered buffer are unchanged.
 */
void good_transfer(void);

#endif
