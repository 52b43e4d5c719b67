/* Helpers shared by the tests: loopback engines, patterns, raw sockets. */
#ifndef XFER_TEST_HELPERS_H
#define XFER_TEST_HELPERS_H

#include <stddef.h>
#include <stdint.h>
#include <xfer/xfer.h>

/** A p2p engine bound to 127.0.0.1 on free ports with @p workers workers;
 *  fails the test (cmocka) if it cannot be made. */
struct xfer_engine *th_engine(int workers);

/** Fill @p buf with a pattern derived from @p seed and each byte's offset. */
void th_fill(void *buf, size_t len, uint64_t seed);

/** Offset of the first byte that differs from th_fill(@p seed), or -1. */
long th_check(const void *buf, size_t len, uint64_t seed);

/** Blocking TCP connection to 127.0.0.1:@p port (fails the test if not). */
int th_connect(uint16_t port);

/** Port part of a `host:port` segment name. */
uint16_t th_name_port(const char *name);

#endif
