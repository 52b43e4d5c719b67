/* Helpers shared by the tests: loopback engines, patterns, raw sockets. */
#ifndef XFER_TEST_HELPERS_H
#define XFER_TEST_HELPERS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <event2/event.h>
#include <xfer/xfer.h>

#include "metadata/backends_internal.h"
#include "transports/tcp/tcp_internal.h"

struct xfer_desc;

/** The TCP fields of a decoded descriptor of protocol "tcp". */
#define th_tcp(d) ((const struct xfer_tcp_desc *)(d)->tp)

/** xfer_config_new(); fails the test (cmocka) if it cannot be made. */
struct xfer_config *th_config(void);

/** xfer_config_set(); fails the test if it refuses. */
void th_set(struct xfer_config *cfg, const char *key, const char *value);

/** th_set() of a number. */
void th_set_num(struct xfer_config *cfg, const char *key, long long value);

/** A p2p engine bound to 127.0.0.1 on free ports with @p workers workers;
 *  fails the test (cmocka) if it cannot be made. */
struct xfer_engine *th_engine(int workers);

/** th_engine() without cmocka (a forked child may call it): NULL, with
 *  errno, if it cannot be made. */
struct xfer_engine *th_engine_try(int workers);

/** Fill @p buf with a pattern derived from @p seed and each byte's offset. */
void th_fill(void *buf, size_t len, uint64_t seed);

/** Offset of the first byte that differs from th_fill(@p seed), or -1. */
long th_check(const void *buf, size_t len, uint64_t seed);

/** Offset of the first byte of @p buf that is not @p byte, or -1. */
long th_check_byte(const void *buf, size_t len, uint8_t byte);

/** A listening socket on 127.0.0.1, a free port into *@p port (fails the
 *  test if it cannot be made). */
int th_listen(uint16_t *port);

/** Blocking TCP connection to 127.0.0.1:@p port (fails the test if not). */
int th_connect(uint16_t port);

/** th_connect() without cmocka (any thread): the fd, or -errno. */
int th_connect_try(uint16_t port);

/** Port part of a `host:port` segment name. */
uint16_t th_name_port(const char *name);

/** The xfer-metad of the build this program belongs to: NAME/../xfer-metad
 *  for a program at BUILD/test/NAME (build/asan/test/it_meta runs
 *  build/asan/xfer-metad); "build/xfer-metad" if /proc/self/exe cannot be
 *  read. No cmocka asserts. */
const char *th_metad_path(void);

/** The xfer-stored of the build, as th_metad_path() finds xfer-metad. */
const char *th_stored_path(void);

/** A page-aligned malloc'd block of @p len bytes (fails the test if not). */
void *th_alloc(size_t len);

/**
 * Whether the program runs under the sanitizers of make test-asan (it
 * sets XFER_TEST_ASAN=1). Only for checks of what ASan itself changes:
 * time (a few times slower, more under load) and memory (shadow,
 * quarantine, redzones); say at the check why it is relaxed.
 */
bool th_under_asan(void);

/** Monotonic clock in milliseconds. */
int64_t th_now_ms(void);

/** A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0,
 *  read back, closed); fails the test if it cannot get one. */
uint16_t th_free_port(void);

/** Remove the tree at @p dir, files and folders, depth first.
 *  @return 0, or -1 if something could not be removed. */
int th_rm_tree(const char *dir);

/** Wait up to @p timeout_ms for child @p pid to exit, and reap it.
 *  @return its wait status (>= 0), -ETIMEDOUT (not reaped), or -errno.
 *  No cmocka asserts. */
int th_wait_exit(pid_t pid, int timeout_ms);

/** Threads of this process (entries of /proc/self/task), or -1. */
int th_count_threads(void);

/**
 * CPU time, in seconds, used so far by this process's threads other than
 * the calling one (the first field of /proc/self/task/TID/schedstat, in
 * ns: the clock pthread_getcpuclockid() reads), only those whose name
 * starts with @p prefix unless it is NULL. Threads that have ended are
 * not counted. No cmocka asserts; 0 where schedstat is missing.
 */
double th_threads_cpu(const char *prefix);

/**
 * How many times the threads of this process whose name starts with
 * @p prefix have been put on a CPU so far (the third field of
 * /proc/self/task/TID/schedstat): each wake-up counts one. No cmocka
 * asserts; 0 where schedstat is missing.
 */
unsigned long long th_threads_runs(const char *prefix);

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

/** WRITE @p len bytes of pattern @p seed from @p src to @p dst, memory
 *  of this process that segment @p seg of @p e serves, and check every
 *  byte arrived; fails the test if not. */
void th_write_verified(struct xfer_engine *e, void *src, int64_t seg,
		       void *dst, size_t len, uint64_t seed);

/** What a batch callback saw: th_count_cb() counts calls and keeps the
 *  last outcome; pass a zeroed one as the callback's arg. */
struct th_cbrec {
	atomic_int calls;
	atomic_int outcome;
};

void th_count_cb(struct xfer_batch *b, enum xfer_status outcome, void *arg);

/** After a batch's wait returned: the callback must come within 2 s and,
 *  200 ms later, have come exactly @p want times in all. */
void th_expect_callbacks(struct th_cbrec *r, int want);

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

/** Store @p v at @p p as 8 bytes, little-endian. */
void th_put_le64(uint8_t *p, uint64_t v);

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

/* ---- a metadata store backend driven on an event_base ---- */

/** Timer callback for th_run_until(): sets the bool at @p arg. */
void th_late_cb(evutil_socket_t fd, short what, void *arg);

/**
 * Run @p base (struct event_base *) until @p cond is true or @p ms
 * milliseconds pass; @p cond is re-evaluated after each loop iteration.
 * Evaluates to @p cond (as last evaluated, once more at the end).
 */
#define th_run_until(base, cond, ms) ({ \
	bool _late = false; \
	struct timeval _tv = { (ms) / 1000, (ms) % 1000 * 1000 }; \
	struct event *_ev = evtimer_new(base, th_late_cb, &_late); \
	evtimer_add(_ev, &_tv); \
	while (!(cond) && !_late) \
		event_base_loop(base, EVLOOP_ONCE); \
	event_free(_ev); \
	(cond); })

#define TH_STORE_MAX_KEYS 64

/**
 * One backend (@p ops) opened on an event_base, with an env whose
 * changed()/reconnected() callbacks record what they hear.
 */
struct th_store {
	const struct xfer_store_ops *ops;
	struct event_base *base;
	bool own_base;                 /* base is freed with the fixture */
	struct xfer_store *st;         /* NULL until opened, after close */
	struct xfer_store_env env;     /* .arg is the fixture */
	char prefix[32];               /* env.prefix points here */
	int changed_all;               /* changed(NULL) calls */
	int reconnected;               /* reconnected() calls */
	char *keys[TH_STORE_MAX_KEYS]; /* changed(key), in order, strdup'd */
	int nkeys;
};

/** What a th_res_cb() call got (th_store_op() fills one). */
struct th_res {
	int calls, err;
	char val[256];                 /* the value, if it fits */
	size_t len;
};

/** xfer_store_cb recording into the struct th_res at @p arg. */
void th_res_cb(int err, const char *value, size_t len, void *arg);

/**
 * A fixture for backend @p ops watching @p prefix (copied, up to 31
 * characters) on @p base, or on a base of its own if NULL; not open yet
 * (open with @p ops->open(conn, &f->env, &f->st)). Free with
 * th_store_free().
 */
struct th_store *th_store_new(const struct xfer_store_ops *ops,
			      const char *prefix, struct event_base *base);

/** Close the backend if open; st becomes NULL. */
void th_store_close(struct th_store *f);

/** th_store_close(), th_store_forget(), free the base if the fixture's
 *  own, and free @p f. */
void th_store_free(struct th_store *f);

/**
 * One call, synchronously: @p op is 'g' (get), 'p' (put @p value of
 * @p len bytes) or anything else (del). The callback must not come
 * inside the call, must come within @p ms milliseconds, and exactly once
 * (checked for 10 ms more); fails the test if not. @p r is cleared, then
 * filled. @return r->err.
 */
int th_store_op(struct th_store *f, char op, const char *key,
		const char *value, size_t len, struct th_res *r, int ms);

/** th_store_op() put of the NUL-ended @p value (its strlen() bytes).
 *  @return the callback's err. */
int th_store_put(struct th_store *f, const char *key, const char *value,
		 int ms);

/** th_store_op() del of @p key. @return the callback's err. */
int th_store_del(struct th_store *f, const char *key, int ms);

/** How many times changed(@p key) was heard. */
int th_store_seen(struct th_store *f, const char *key);

/** Forget the keys heard so far (nkeys back to 0). */
void th_store_forget(struct th_store *f);

/**
 * Wait until @p w's watch is live: put @p probe = "x" through @p by
 * (th_store_op() within @p ms) and run @p w->base up to 200 ms for
 * changed(@p probe), again until @p ms milliseconds have passed; fails
 * the test if it is never heard.
 */
void th_store_wait_watching(struct th_store *w, struct th_store *by,
			    const char *probe, int ms);

#endif
