/*
 * What fio.c shares with its fallback, fio_worker.c: the accounting of one
 * read or write, and the worker thread that does requests one after the
 * other with preadv/pwritev when io_uring is not used.
 */
#ifndef XFER_FIO_WORKER_INTERNAL_H
#define XFER_FIO_WORKER_INTERNAL_H

#include <errno.h>

#include "transports/file/fio_internal.h"

/* The most bytes one read or write asks for: io_uring takes a 32-bit
 * length, and Linux moves at most 2 GiB - 4 KiB at once anyway. */
#define XFER_FIO_MAX_OP ((size_t)1 << 30)

/** Bytes the next read or write of @p req asks for. */
static inline size_t xfer_fio_next_len(const struct xfer_fio_req *req)
{
	size_t left = req->len - req->moved;

	return left < XFER_FIO_MAX_OP ? left : XFER_FIO_MAX_OP;
}

/**
 * Count the outcome @p res (bytes moved, or -errno) of one read or write
 * of @p req. @return true when the request has ended, its result (see
 * struct xfer_fio_req) in *@p result; false when the rest is to be asked
 * for (a short read or write).
 */
static inline bool xfer_fio_step(struct xfer_fio_req *req, long res,
				 int *result)
{
	if (res < 0) {
		*result = (int)res;
		return true;
	}
	req->moved += (size_t)res;
	if (req->moved >= req->len) {
		*result = 0;
		return true;
	}
	if (res == 0) { /* end of file, or a write that cannot go on */
		*result = req->write ? -EIO : -ENODATA;
		return true;
	}
	return false;
}

/** The worker thread of one engine. */
struct xfer_fio_worker;

/**
 * Start a worker thread named @p name; it writes 1 to the eventfd
 * @p efd whenever its list of finished requests stops being empty.
 * @return 0 with *@p out set, -ENOMEM, or pthread_create()'s -errno.
 */
int xfer_fio_worker_new(int efd, const char *name,
			struct xfer_fio_worker **out);

/** CPU time, in seconds, the worker thread has used so far (user and
 *  system, its clock of pthread_getcpuclockid()); 0 if that clock cannot
 *  be read. Any thread, until xfer_fio_worker_free(). */
double xfer_fio_worker_cpu_seconds(const struct xfer_fio_worker *w);

/** Move the requests of @p reqs to the end of the worker's, done in
 *  order; @p reqs is left empty. Any thread. */
void xfer_fio_worker_push(struct xfer_fio_worker *w,
			  struct xfer_fio_queue *reqs);

/** Move the requests finished so far to the end of @p out, in the order
 *  they finished, each result in ->res. Any thread. */
void xfer_fio_worker_take(struct xfer_fio_worker *w,
			  struct xfer_fio_queue *out);

/**
 * Stop the worker once the request it is doing (if any) has ended, join
 * it and free it. The requests it finished that nobody took yet go to
 * the end of @p finished, those it had not started to the end of
 * @p todo, in order.
 */
void xfer_fio_worker_free(struct xfer_fio_worker *w,
			  struct xfer_fio_queue *finished,
			  struct xfer_fio_queue *todo);

#endif
