/*
 * How xfer-bench fails: one message on stderr and exit(1), from any
 * thread (test/unit_bench_flags.c has stand-ins of its own).
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_internal.h"

void die(const char *fmt, ...)
{
	static pthread_mutex_t once = PTHREAD_MUTEX_INITIALIZER;
	va_list ap;

	/* Never unlocked: the first failure is reported, other threads that
	 * fail meanwhile wait here until exit() ends the process. */
	pthread_mutex_lock(&once);
	fputs("xfer-bench: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

void die_api(const struct xfer_engine *e, const char *what, int ret)
{
	const char *msg = e ? xfer_engine_last_error(e) : NULL;

	if (msg && *msg)
		die("%s: %s (%s)", what, strerror(-ret), msg);
	die("%s: %s", what, strerror(-ret));
}

void *xmalloc(size_t len)
{
	void *p = malloc(len);

	if (!p)
		die("out of memory (%zu bytes)", len);
	return p;
}
