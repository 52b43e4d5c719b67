/* Helpers shared by the tests: loopback engines, patterns, raw sockets. */
#ifndef XFER_TEST_HELPERS_H
#define XFER_TEST_HELPERS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <xfer/xfer.h>

struct xfer_desc;

/** A p2p engine bound to 127.0.0.1 on free ports with @p workers workers;
 *  fails the test (cmocka) if it cannot be made. */
struct xfer_engine *th_engine(int workers);

/** Fill @p buf with a pattern derived from @p seed and each byte's offset. */
void th_fill(void *buf, size_t len, uint64_t seed);

/** Offset of the first byte that differs from th_fill(@p seed), or -1. */
long th_check(const void *buf, size_t len, uint64_t seed);

/** Offset of the first byte of @p buf that is not @p byte, or -1. */
long th_check_byte(const void *buf, size_t len, uint8_t byte);

/** Blocking TCP connection to 127.0.0.1:@p port (fails the test if not). */
int th_connect(uint16_t port);

/** Port part of a `host:port` segment name. */
uint16_t th_name_port(const char *name);

/** A page-aligned malloc'd block of @p len bytes (fails the test if not). */
void *th_alloc(size_t len);

/** Monotonic clock in milliseconds. */
int64_t th_now_ms(void);

/** Threads of this process (entries of /proc/self/task), or -1. */
int th_count_threads(void);

/**
 * Poll th_count_threads() until it is at most @p want or @p timeout_ms
 * passed (a joined thread can stay listed for a moment while the kernel
 * reaps it). @return the last count.
 */
int th_wait_threads(int want, int timeout_ms);

/**
 * Poll @p v (every millisecond) until it is at least @p want or
 * @p timeout_ms passed. @return true if it reached @p want.
 */
bool th_wait_atomic(atomic_int *v, int want, int timeout_ms);

/**
 * Transfer one request synchronously: a fresh batch of capacity 1, submit,
 * xfer_batch_wait() (fails the test after 30 s), read the task status, free
 * the batch. @return the task's final status; *transferred (if not NULL)
 * gets its byte count.
 */
enum xfer_status th_xfer1(struct xfer_engine *e, enum xfer_opcode op,
			  void *source, int64_t target_id,
			  uint64_t target_offset, size_t length,
			  uint64_t *transferred);

/** Fail the test, with status names, unless @p got equals @p want. */
#define th_assert_status(got, want) \
	assert_string_equal(xfer_status_str(got), xfer_status_str(want))

/**
 * xfer_unregister() for a buffer peers use as a target: a peer's READ
 * that has just completed may hold it a moment longer (the target lets go
 * after its last send returns, which can be after the peer has the bytes),
 * so -EBUSY is retried for up to 2 s. No cmocka asserts (a forked child
 * may call it). @return what xfer_unregister() last returned.
 */
int th_unregister(struct xfer_engine *e, void *addr);

/** Find the buffer of open segment @p seg that starts at @p addr; fails
 *  the test unless there is one. @return its length. */
uint64_t th_segment_find(struct xfer_engine *e, int64_t seg, uint64_t addr);

/* ---- raw sockets (no cmocka asserts: they return errors) ---- */

/** Send all of @p buf (MSG_NOSIGNAL). @return 0 or -errno. */
int th_send_all(int fd, const void *buf, size_t len);

/**
 * Receive exactly @p len bytes within @p timeout_ms in all.
 * @return @p len; fewer (>= 0) if the peer closed first (EOF or
 *         ECONNRESET); -ETIMEDOUT; or another -errno.
 */
long th_recv_all(int fd, void *buf, size_t len, int timeout_ms);

/**
 * Read until the peer closes (EOF or ECONNRESET), at most @p cap bytes
 * kept in @p buf (@p buf may be NULL when @p cap is 0).
 * @return the total bytes received before the close (counting those past
 *         @p cap), or -ETIMEDOUT if the peer did not close within
 *         @p timeout_ms, or another -errno.
 */
long th_recv_until_close(int fd, void *buf, size_t cap, int timeout_ms);

/**
 * Send a handshake frame (PROTOCOL.md §1): u64 LE length, the type byte,
 * @p body. A negative @p type sends a legacy frame with no type byte.
 * @return 0 or -errno.
 */
int th_hs_send(int fd, int type, const void *body, size_t len);

/**
 * Receive one handshake frame: its length and the @p *len bytes after it
 * (type byte included, if any) into a malloc'd, NUL-ended @p *body.
 * @return 0; -EPROTO for a length of 0 or over 16 MiB; -ECONNRESET or
 *         -EPIPE if the peer closed early; -ETIMEDOUT; another -errno.
 */
int th_hs_recv(int fd, char **body, size_t *len, int timeout_ms);

/**
 * One typed handshake exchange with 127.0.0.1:@p port: connect, send a
 * frame of @p type with @p req, receive the reply frame, then expect the
 * server to close. Fails the test on any error, if the reply's type byte
 * differs from @p type, or if the server does not close after the reply.
 * @return the reply's JSON (after the type byte), malloc'd and NUL-ended;
 *         its length in *len.
 */
char *th_hs_call(uint16_t port, int type, const char *req, size_t *len);

/** The segment descriptor of the engine whose handshake port is @p port,
 *  fetched with a raw Metadata request and decoded (fails the test if
 *  not). Free with xfer_desc_free(). */
struct xfer_desc *th_fetch_desc(uint16_t port);

#endif
