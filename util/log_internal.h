/*
 * Logging to stderr, and the readable last error of an engine that
 * xfer_engine_last_error() returns.
 */
#ifndef XFER_LOG_INTERNAL_H
#define XFER_LOG_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

enum { XFER_LOG_ERROR, XFER_LOG_WARN, XFER_LOG_INFO, XFER_LOG_DEBUG };

/** One line to stderr if @p level is within XFER_LOG_LEVEL
 *  (error|warn|info|debug), else Mooncake's MC_LOG_LEVEL
 *  (ERROR|WARNING|INFO|TRACE), else debug with MC_VERBOSE set, else
 *  warn; read once. Any thread. */
void xfer_log(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/** How often one kind of line was logged: zero it to start. */
struct xfer_log_limit {
	_Atomic int64_t next_ms;   /* monotonic: no line before this */
	_Atomic unsigned skipped;  /* calls left out since the last line */
};

/** xfer_log() at most once a second per @p lim: a call within a second
 *  of the last line is only counted, and the next line that goes out
 *  ends with how many were left out. For what a peer can make happen
 *  over and over (refused connections, failed accepts). Any thread.
 *  @return the calls the line stands for (1 + those left out), or 0 if
 *  this one was left out. */
unsigned xfer_log_limited(struct xfer_log_limit *lim, int level,
			  const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/** The last error of one engine, shared by its threads. */
struct xfer_error {
	pthread_mutex_t lock;
	char msg[256];
};

void xfer_error_init(struct xfer_error *er);
void xfer_error_fini(struct xfer_error *er);

/** Record a readable error (also logged at info) and return @p err
 *  unchanged. Any thread. */
int xfer_error_set(struct xfer_error *er, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/** The last error, copied under its lock into a buffer of the calling
 *  thread: unchanged by later errors, valid until this thread calls
 *  xfer_error_get() again (on any engine). Any thread. */
const char *xfer_error_get(const struct xfer_error *er);

#endif
