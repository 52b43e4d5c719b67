/*
 * The store benches' master: xfer-stored, the one built beside the
 * bench, run as a child on a free port of 127.0.0.1.
 */
#ifndef XFER_BENCH_STORE_STORED_RUN_H
#define XFER_BENCH_STORE_STORED_RUN_H

#include <stddef.h>
#include <sys/types.h>

/**
 * Start xfer-stored beside this program (/proc/self/exe's folder) on a
 * port of 127.0.0.1 free a moment ago, with --metrics_port=0, its stdout
 * to /dev/null, and @p flag too unless NULL; wait (5 s at most) until
 * it accepts connections. Its "127.0.0.1:PORT" goes into @p addr
 * (@p len bytes). The caller stops it (SIGTERM, waitpid).
 * @return its pid; -1 with why in @p err (@p errlen bytes): no folder,
 *         no free port, fork failed, or it did not serve (then it is
 *         killed).
 */
pid_t bench_stored_start(const char *flag, char *addr, size_t len,
			 char *err, size_t errlen);

#endif
