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
 * This file holds main(); bench_internal.h lists the other parts.
 */
#include "bench/bench_internal.h"

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
