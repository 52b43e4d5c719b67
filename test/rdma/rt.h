/* Helpers of the RDMA tier (run in rdmavm guests over Soft-RoCE). */
#ifndef XFER_RT_H
#define XFER_RT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <xfer/xfer.h>

/** An RDMA engine in p2p mode on @p host:@p port (0 = a free port),
 *  configured from the environment first; fails the test if not made. */
struct xfer_engine *rt_engine(const char *host, uint16_t port, int max_ep);

/** A forked process serving @p n RDMA engines on @p host, each with one
 *  buffer of @p len bytes filled with th_fill(seed = engine index + 1). */
struct rt_targets {
	pid_t pid;
	int ctl;              /* closing it ends the process */
	int n;
	char name[16][64];
	uint64_t addr[16];
};

/** Start them; names and buffer addresses come back over a pipe. */
void rt_targets_start(struct rt_targets *t, int n, const char *host,
		      size_t len);

/** Ask the process to end and reap it; @return its exit status. */
int rt_targets_stop(struct rt_targets *t);

/** Listen on TCP port @p port (any address) and accept one control
 *  connection (the other guest's). No cmocka. @return its fd, or -1. */
int rt_ctl_accept(uint16_t port);

/** Connect to @p host:@p port, trying every 200 ms for up to @p ms (the
 *  other guest may still be booting). No cmocka. @return the fd, or
 *  -1. */
int rt_ctl_connect(const char *host, uint16_t port, int ms);

/** CPU seconds (user + system) process @p pid has used so far. */
double rt_proc_cpu(pid_t pid);

#endif
