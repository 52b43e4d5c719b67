/*
 * The file I/O engine of a reactor: reads and writes of whole byte ranges
 * of open files, at most a fixed number at once, the rest waiting in
 * submission order, every result delivered on the reactor's thread.
 *
 * It runs on io_uring (one ring per engine, its completions signalled
 * through an eventfd that is one persistent event on the reactor's base,
 * reaped in batches by the handler that submits), or, where io_uring
 * cannot be set up or the caller asks for it, on one worker thread doing
 * preadv/pwritev that signals its results through the same kind of
 * eventfd event. Short reads and writes are continued until the whole
 * range has moved; nothing polls and an idle engine costs no CPU. What
 * the page cache can answer at once, a caller may also do on its own
 * thread (xfer_fio_now()), as io_uring would inside io_uring_enter.
 */
#ifndef XFER_FIO_INTERNAL_H
#define XFER_FIO_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

struct xfer_reactor;

/** The most requests one engine may have in flight (its ring's size). */
#define XFER_FIO_MAX_DEPTH 4096

/** One engine; one per reactor. */
struct xfer_fio;

/**
 * One read or write, the caller's, embedded in its own struct (get back
 * with container_of). The engine neither copies nor aligns anything:
 * @c buf and @c off reach the kernel as they are, so an fd opened with
 * O_DIRECT works when the caller aligns them (and @c len) itself.
 */
struct xfer_fio_req {
	int fd;
	bool write;          /* write buf to the file, else read into buf */
	void *buf;
	size_t len;          /* bytes; 0 is allowed (done gets 0) */
	uint64_t off;        /* file offset of buf[0], bytes */
	/**
	 * Runs once per submit, on the reactor's thread, never inside
	 * xfer_fio_submit(). @p res: 0 when all len bytes moved, else:
	 * -ENODATA, a read that met the end of the file first (the bytes
	 * before it are in buf); -EIO, a write the kernel accepted 0 bytes
	 * of; -ECANCELED, xfer_fio_free() came first; another -errno, what
	 * the kernel answered (-EBADF, -ENOSPC, -EIO, -EINVAL for O_DIRECT
	 * misalignment ...). After a failure an unknown prefix of the range
	 * may have moved. The request is the caller's again from here: it
	 * may be freed or submitted anew inside done.
	 */
	void (*done)(struct xfer_fio_req *r, int res);

	/* The engine's, from submit until done. */
	size_t moved;        /* bytes done so far */
	int res;             /* result, on its way back from the worker */
	STAILQ_ENTRY(xfer_fio_req) link; /* waiting, the worker's lists */
};

/** A queue of requests, in order. */
STAILQ_HEAD(xfer_fio_queue, xfer_fio_req);

/**
 * An engine for reactor @p r with at most @p depth requests in flight;
 * io_uring unless @p threads or io_uring cannot be set up, then a worker
 * thread. Logs which mechanism it chose and why (a warning when io_uring
 * was wanted but cannot be set up, else info). Call on @p r's thread or
 * before it runs.
 * @return 0 with *@p out set; -EINVAL if @p depth is 0 or over
 *         XFER_FIO_MAX_DEPTH; -ENOMEM; or the -errno of eventfd(),
 *         event_add() or pthread_create().
 */
int xfer_fio_new(struct xfer_reactor *r, unsigned depth, bool threads,
		 struct xfer_fio **out);

/**
 * Queue @p req (its public fields set; the private ones are reset): it
 * starts once every request submitted before it has started and fewer
 * than depth are in flight; req->done runs later, once. Never fails.
 * On the reactor's thread only (a done callback may submit).
 */
void xfer_fio_submit(struct xfer_fio *f, struct xfer_fio_req *req);

/**
 * Free @p f once its reactor no longer dispatches (after
 * xfer_reactor_stop(), or when a test-owned base is not run again).
 * Waits for the requests in flight; those that finished end with their
 * result, one cut short -ECANCELED; requests still waiting (and any a
 * done callback submits meanwhile) end -ECANCELED. Every done runs on the
 * calling thread before the return, and from then on the engine touches
 * no buffer. Not from inside a done callback. NULL is a no-op.
 */
void xfer_fio_free(struct xfer_fio *f);

/**
 * Do @p req (its public fields set, done unused) on the calling thread,
 * if that takes no wait for a device: with @p nowait, a buffered read or
 * write that the page cache answers at once (preadv2/pwritev2 with
 * RWF_NOWAIT), which is what io_uring completes inline in io_uring_enter;
 * without, any read or write (for a file in memory: tmpfs, ramfs, whose
 * pages no device holds unless swapped out, O_DIRECT or not). Never on
 * another file's O_DIRECT fd: that waits for the device whatever the
 * flag. Any thread; needs no engine.
 * @return 0 when the request has ended, its result (as done would get it,
 *         see struct xfer_fio_req) in req->res; -EAGAIN when it would wait
 *         (a page not cached, a lock held): submit it; -EOPNOTSUPP when
 *         the file cannot say (no RWF_NOWAIT for this direction on its
 *         file system, or a kernel before 4.14), as it will not next time
 *         either. After -EAGAIN a prefix of the range may have moved; a
 *         submission moves it again.
 */
int xfer_fio_now(struct xfer_fio_req *req, bool nowait);

/** Does @p f run on its worker thread (true) or io_uring (false)? */
bool xfer_fio_threads(const struct xfer_fio *f);

/** CPU time, in seconds, of @p f's worker thread so far (user and
 *  system); 0 on io_uring, whose kernel work is not counted. Any thread,
 *  until xfer_fio_free(). */
double xfer_fio_cpu_seconds(const struct xfer_fio *f);

#endif
