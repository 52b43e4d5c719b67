/*
 * xfer-bench: throughput, latency and CPU cost of batched transfers, with
 * the flags and the summary line of Mooncake's transfer_engine_bench.
 *
 *   target     serve a registered buffer until --duration ends or a signal
 *   initiator  open --segment_id and move batches to and from its buffer 0
 *   loopback   both engines in this process, over real loopback sockets
 *              (--protocol rdma: through this host's RDMA devices)
 *
 * Each initiator thread owns a disjoint region of batch_size * block_size
 * bytes, at the same offset locally and in the target buffer. With
 * --plugin the initiator engine lives on an event_base of the bench and
 * starts no thread: one batch per region in flight, each submitted from
 * the completion callback of the one before.
 *
 * This file holds main() and how the program fails; bench_internal.h
 * lists the other parts.
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

int main(int argc, char **argv)
{
	struct bench_opts o;

	bench_opts_parse(argc, argv, &o);
	if (o.mode == BENCH_TARGET)
		bench_run_target(&o);
	else if (o.plugin)
		bench_run_plugin(&o);
	else
		bench_run_initiator(&o);
	bench_opts_free(&o);
	return 0;
}
