/*
 * xfer — a transfer engine on libevent reactors.
 *
 * The model is the Mooncake Transfer Engine's (Segment + BatchTransfer): an
 * engine per process registers local memory, opens remote segments by name,
 * submits batches of READ/WRITE requests and learns of their completion
 * through a callback or a status query.
 *
 * Conventions (see also xfer/event.h for the libevent integration):
 *  - functions return 0 or a negative errno; constructors return NULL and
 *    set errno;
 *  - lengths and offsets are in bytes, timeouts in the unit their name says;
 *  - every handle is opaque and every *_new has a *_free;
 *  - if a call that takes a callback fails, the callback is never called;
 *  - calls that wait on the network or the metadata store have an
 *    asynchronous form (*_async) whose callback runs on the engine's
 *    callback base: the application's event_base with
 *    xfer_engine_new_on_base(), else the engine's control thread. Their
 *    blocking forms are for other threads: called on that base's thread
 *    they fail at once with -EDEADLK (they would wait for themselves).
 */
#ifndef XFER_XFER_H
#define XFER_XFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What the shared library exports: the calls declared under include/xfer/
 * and nothing else (it is built with -fvisibility=hidden). */
#if defined(__GNUC__)
#define XFER_EXPORT __attribute__((visibility("default")))
#else
#define XFER_EXPORT
#endif

struct xfer_engine;
struct xfer_batch;

/**
 * Completion of an asynchronous call: @p result is 0 or a negative errno,
 * as the call's blocking form would return. Runs once, on the engine's
 * callback base, never inside the call that started it.
 */
typedef void (*xfer_done_cb)(struct xfer_engine *e, int result, void *arg);

/** Completion of xfer_segment_open_async(): the segment's id (>= 0) or a
 *  negative errno. As xfer_done_cb otherwise. */
typedef void (*xfer_segment_cb)(struct xfer_engine *e, int64_t segment_id,
				void *arg);

/** A notification arrived: @p name and @p msg (NUL-ended, valid during
 *  the call). Runs on the engine's callback base. */
typedef void (*xfer_notify_cb)(struct xfer_engine *e, const char *name,
			       const char *msg, void *arg);

/** Operation of a request, as the seed's TransferRequest::OpCode. */
enum xfer_opcode {
	XFER_READ = 0,  /**< copy target → source (local) */
	XFER_WRITE = 1, /**< copy source (local) → target */
};

/**
 * Status of a task, exactly the seed's TransferStatusEnum (values and
 * meanings): WAITING while in transfer, then one of the five terminal
 * ones. PENDING is never reported (the seeds do not use it either); it
 * keeps its value so the numbering stays the seeds'.
 */
enum xfer_status {
	XFER_WAITING = 0, /**< submitted, in transfer */
	XFER_PENDING,     /**< not used */
	XFER_INVALID,   /**< the request was refused at submit; nothing was sent */
	/** xfer_batch_cancel() ended it before all its bytes moved (nothing
	 *  of it is written into local memory after it says so), or the
	 *  engine shut down before it was sent */
	XFER_CANCELED,
	XFER_COMPLETED,
	XFER_TIMEOUT,   /**< no progress within the transfer timeout */
	XFER_FAILED,    /**< the peer refused it or the connection broke */
};

/** An engine configuration, opaque: its keys and calls are in
 *  <xfer/config.h>, which this header includes. */
struct xfer_config;

/**
 * Can this library move bytes with transport @p name ("tcp", "rdma",
 * "local", "file") on this host: was the build made with it (the
 * optional parts: WITH_RDMA, WITH_FILE; docs/INSTALL.md) and has the host
 * what it needs (for "rdma", a device listed by ibv_get_device_list(3))?
 * @return 1 yes, 0 no (also for NULL or an unknown name). Any thread; may
 *         load the verbs providers, so call it once, not per transfer.
 */
XFER_EXPORT
int xfer_transport_available(const char *name);

#include <xfer/config.h>

/**
 * Create an engine that runs its own reactors: a control thread (handshake
 * listener, timers, completion callbacks) and `workers` worker threads.
 * The listeners are bound before this returns.
 * @param cfg NULL for xfer_config_new()'s; copied, not kept.
 * @return the engine, or NULL with errno: EINVAL (bad config, such as an
 *         unknown protocol, named in the log), EADDRINUSE
 *         (port taken), EPROTONOSUPPORT (unknown metadata backend),
 *         EACCES (the metadata server refused the engine's first keys:
 *         xfer-metad with another cluster secret, or with one when
 *         auth_secret is unset; the log says which), ENOMEM, or the
 *         errno of a failed socket/thread call or of the metadata
 *         server (ECONNREFUSED, ETIMEDOUT ...).
 * Call from any thread.
 */
XFER_EXPORT
struct xfer_engine *xfer_engine_new(const struct xfer_config *cfg);

/**
 * Stop and free the engine: listeners and connections are closed, worker
 * threads joined, local memory forgotten (not freed: it is the caller's).
 * Batches not yet freed outlive it: their tasks still in flight end
 * CANCELED or FAILED, their callbacks and notifications never come, and
 * they answer xfer_batch_status(), _size(), _wait() (at once) and
 * _free(); a submit answers -ESHUTDOWN. Not from a callback of this
 * engine, nor while another thread uses it or its batches.
 */
XFER_EXPORT
void xfer_engine_free(struct xfer_engine *e);

/**
 * Start transport @p name ("rdma") on a running engine, as Mooncake's
 * installTransport() does: its knobs (only those) are taken from @p cfg
 * (NULL: as the engine was made), every registered buffer is registered
 * with it, and it becomes the transport the own descriptor advertises
 * ("protocol" and its fields), published again (waited for as
 * xfer_register() waits). Batches, open segments and buffers stay as
 * they are; peers that cached the descriptor see the change when they
 * fetch it again. The work runs on the engine's control reactor, which
 * does nothing else meanwhile (in plugin mode: once the application
 * dispatches its base, or at once from its thread).
 * @return 0; -EINVAL (NULL @p e or @p name, or no transport @p name);
 *         -EEXIST (started already: every engine starts "tcp"); a bad
 *         knob's error as xfer_config_set() gives it; the transport's
 *         start's or a buffer's registration's (ENODEV: no RDMA device);
 *         -EDEADLK as xfer_register(). On error the engine runs on as
 *         it was.
 *         Not concurrently with other calls on @p e.
 */
XFER_EXPORT
int xfer_engine_add_transport(struct xfer_engine *e, const char *name,
			      const struct xfer_config *cfg);

/**
 * The name of this engine's own RAM segment (`host:port` in p2p mode).
 * Owned by the engine, valid until xfer_engine_free(). Any thread.
 */
XFER_EXPORT
const char *xfer_engine_name(const struct xfer_engine *e);

/** The handshake port the engine listens on. Any thread. */
XFER_EXPORT
uint16_t xfer_engine_rpc_port(const struct xfer_engine *e);

/**
 * The host peers reach this engine's handshake port at: what it publishes
 * in rpc_meta (the host part of its name in p2p mode). Owned by the
 * engine, valid until xfer_engine_free(). Any thread.
 */
XFER_EXPORT
const char *xfer_engine_host(const struct xfer_engine *e);

/**
 * A readable message for the last error of this engine ("" if none yet);
 * the engine's threads share it, so it is best read right after the
 * failing call. Copied, under the lock its writers take, into a buffer
 * of the calling thread (as strerror() does): an error recorded later,
 * on any thread, leaves the text as it was; it stays valid until this
 * thread calls xfer_engine_last_error() again, for any engine, or ends.
 * Any thread.
 */
XFER_EXPORT
const char *xfer_engine_last_error(const struct xfer_engine *e);

/**
 * CPU time, in seconds, used so far by the threads this engine started
 * (0 when it started none): user and system time of its control and
 * worker reactors, of each RDMA device's worker and of the file I/O
 * worker thread (when io_uring is not used). Not counted: the
 * application's threads (in plugin mode, the one that dispatches its
 * base), kernel work done elsewhere for the engine (softirqs, Soft-RoCE's
 * and io_uring's kernel threads), and threads that have ended. Any thread.
 */
XFER_EXPORT
double xfer_engine_cpu_seconds(const struct xfer_engine *e);

/**
 * Bytes this engine has moved through RDMA device @p index (0, 1, ... in
 * the order the engine opened them), as the initiator of completed slices.
 * @param name set to the device name (owned by the engine).
 * @return 0; -ENOENT past the last device, or for an engine without RDMA.
 *         Any thread.
 */
XFER_EXPORT
int xfer_engine_device_stats(struct xfer_engine *e, size_t index,
			     const char **name, uint64_t *bytes);

/**
 * Register [addr, addr+len) as a buffer of the local segment (Mooncake's
 * registerLocalMemory) and wait until peers can see it: with a store that
 * keeps keys, until the updated descriptor is published (a server that is
 * away gets it when it is back; that is logged, not an error here). The
 * memory stays the caller's; it must stay mapped until xfer_unregister().
 * @param location where the memory lives, `cpu:N` or `*`; copied.
 * @param remote_access whether peers may read and write it.
 * With protocol "rdma" the range is registered as a memory region on every
 * device (local write, remote read and write; ibv_reg_mr(3)).
 * @return 0; -EINVAL for NULL addr, len 0, an overflowing range or a bad
 *         location; -EEXIST if the range overlaps a registered buffer;
 *         -ENOMEM; the negated errno of ibv_reg_mr; -EDEADLK on the
 *         engine's callback base with a store that keeps keys (nothing is
 *         registered: use xfer_register_async()). Any thread.
 */
XFER_EXPORT
int xfer_register(struct xfer_engine *e, void *addr, size_t len,
		  const char *location, bool remote_access);

/**
 * xfer_register() without the wait: the buffer is registered, and usable
 * as a source, when this returns; @p cb runs once peers can see it, with
 * 0 or the store's error (-ECONNREFUSED, -ETIMEDOUT, -EACCES when
 * xfer-metad refuses the write ...; the engine republishes when the
 * server is back).
 * @return as xfer_register() (never -EDEADLK); on failure nothing is
 *         registered and @p cb is never called. Any thread.
 */
XFER_EXPORT
int xfer_register_async(struct xfer_engine *e, void *addr, size_t len,
			const char *location, bool remote_access,
			xfer_done_cb cb, void *arg);

/**
 * Unregister the buffer that starts at @p addr, and wait until peers see
 * it gone (as xfer_register()). New peers' requests to it, and new local
 * requests using it, are refused from the moment this is called. What it
 * waits for, in this order:
 *  - peers' requests already being served on it (a READ whose bytes are
 *    going out, a WRITE whose payload is coming in) to finish; those
 *    still on it transfer_timeout_ms after the call (or that make no
 *    progress for that long) are cut off: their connections are closed
 *    and the peer's task fails. With transfer_timeout_ms 0 it waits for
 *    them however long they take;
 *  - the store, as xfer_register().
 * Its memory is the caller's again when it returns 0: nothing of a
 * peer's touches it after that. Tasks of this engine using it as their
 * source are not waited for: -EBUSY.
 * @return 0; -ENOENT if no buffer starts there; -EBUSY while a task in
 *         flight uses it as its source, while another unregister of it
 *         is under way, or, on the engine's callback base (which cannot
 *         wait), while a peer's request uses it (the buffer stays
 *         registered); -EDEADLK as xfer_register(); -ENOMEM. Any thread.
 */
XFER_EXPORT
int xfer_unregister(struct xfer_engine *e, void *addr);

/**
 * xfer_unregister() without the wait: @p cb says when peers see the
 * buffer gone. Unless peers' requests are using it, it is gone and its
 * memory the caller's again when this returns; if they are, it leaves
 * as xfer_unregister() says (refused to new requests at once, those on
 * it cut off after transfer_timeout_ms) and its memory is the caller's
 * again when @p cb runs.
 * @return as xfer_unregister() (never -EDEADLK, and never -EBUSY for a
 *         peer's request: it waits); on failure @p cb is never called.
 *         Any thread.
 */
XFER_EXPORT
int xfer_unregister_async(struct xfer_engine *e, void *addr,
			  xfer_done_cb cb, void *arg);

/**
 * Register the file or block device at @p path as the next buffer of the
 * engine's file segment, which peers open as "nvmeof/<engine name>" (the
 * seeds' NVMe-oF segment; Mooncake's registerLocalFile). Its buffers lie
 * end to end in registration order: target_offset 0 is the first byte of
 * the first file, and the next file starts where the one before ends, so
 * dropping a file moves the ones after it. The document is published
 * under `mooncake/nvmeof/<name>` (PROTOCOL.md §2) and answered over the
 * handshake, and this waits until peers can see it (as xfer_register()).
 *
 * @p length: bytes peers may address; 0 takes the size the file has now.
 * It may run past the end of a regular file: writes there extend it,
 * reads there fail. Registering a registered path again with a larger
 * length grows it in place; with the same length it changes nothing.
 * @p local_path_map: NULL, or host, path pairs ended by a NULL host: where
 * initiators on that host reach the same file themselves (an NVMe-oF
 * mount); the engine adds its own host with @p path. Everyone else gets
 * the bytes from this engine over its file data port.
 *
 * @return 0; -EINVAL (no path, a map entry empty, no length and an empty
 *         file); -EEXIST (registered with a larger length); -ENOENT,
 *         -EACCES ... (the errno of opening it read-write); -ENOMEM;
 *         -EPROTONOSUPPORT (the engine runs no file transport); -EDEADLK
 *         as xfer_register(). Any thread.
 */
XFER_EXPORT
int xfer_register_file(struct xfer_engine *e, const char *path,
		       uint64_t length, const char *const *local_path_map);

/**
 * xfer_register_file() without the wait: the file is registered, and
 * this engine's own requests may use it, when this returns; @p cb runs
 * once peers can see it (as xfer_register_async()).
 * @return as xfer_register_file() (never -EDEADLK); on failure nothing
 *         changes and @p cb is never called. Any thread.
 */
XFER_EXPORT
int xfer_register_file_async(struct xfer_engine *e, const char *path,
			     uint64_t length,
			     const char *const *local_path_map,
			     xfer_done_cb cb, void *arg);

/**
 * Drop the file registered as @p path from the file segment and wait until
 * peers see it gone (as xfer_unregister()).
 * @return 0; -ENOENT (not registered); -EBUSY while a transfer or a peer's
 *         request uses it (it stays registered); -EPROTONOSUPPORT;
 *         -EDEADLK as xfer_register(). Any thread.
 */
XFER_EXPORT
int xfer_unregister_file(struct xfer_engine *e, const char *path);

/**
 * xfer_unregister_file() without the wait; @p cb says when peers see it.
 * @return as xfer_unregister_file() (never -EDEADLK); on failure @p cb is
 *         never called. Any thread.
 */
XFER_EXPORT
int xfer_unregister_file_async(struct xfer_engine *e, const char *path,
			       xfer_done_cb cb, void *arg);

/**
 * Open a segment by name (Mooncake's openSegment) and call @p cb with its
 * id. In p2p mode @p name is `host:port` and the descriptor is fetched
 * from that peer's handshake port (a Metadata request, PROTOCOL.md §1);
 * with a central store from the store (rpc_meta, then ram; a host name in
 * rpc_meta is resolved with evdns on the reactor). The engine's own name
 * opens the local segment, served by memcpy. A name already open gets the
 * same id. Each network step has its own timeout (5 s for a handshake, up
 * to 10 s for a store).
 * @p cb gets the id ≥ 0, or -ECONNREFUSED, -ETIMEDOUT, -EHOSTUNREACH
 * (peer unreachable), -ENOENT (no such segment, or its host does not
 * resolve), -EPROTO (a bad descriptor), -EPROTONOSUPPORT (a transport
 * this engine lacks), -ENOMEM.
 * @return 0; -EINVAL (malformed name, NULL @p cb), -ENOMEM (then @p cb is
 *         never called). Any thread.
 */
XFER_EXPORT
int xfer_segment_open_async(struct xfer_engine *e, const char *name,
			    xfer_segment_cb cb, void *arg);

/**
 * xfer_segment_open_async() and wait: an id ≥ 0, or a negative errno as
 * its callback gets, or -EINVAL, or -EDEADLK on the engine's callback
 * base (unless @p name is open already or the engine's own: nothing to
 * wait for). Any thread.
 */
XFER_EXPORT
int64_t xfer_segment_open(struct xfer_engine *e, const char *name);

/**
 * Fetch the descriptor of an open segment again (from the store, or the
 * peer itself in p2p mode, which has no watch), for the buffers a peer
 * registered since; transfers in flight keep their view. @p cb gets 0,
 * -ENOENT (the segment's key is gone: its transfers fail from now on),
 * or the error of the fetch (the cached descriptor stays).
 * @return 0; -ENOENT (unknown id), -EINVAL (NULL @p cb), -ENOMEM (then
 *         @p cb is never called). Any thread.
 */
XFER_EXPORT
int xfer_segment_refresh_async(struct xfer_engine *e, int64_t segment_id,
			       xfer_done_cb cb, void *arg);

/** xfer_segment_refresh_async() and wait: 0 or a negative errno, as its
 *  callback gets or it returns, or -EDEADLK on the engine's callback
 *  base. Any thread. */
XFER_EXPORT
int xfer_segment_refresh(struct xfer_engine *e, int64_t segment_id);

/**
 * Close a segment id. @return 0, -ENOENT for an unknown id, -EBUSY while
 * tasks in flight target it. Any thread.
 */
XFER_EXPORT
int xfer_segment_close(struct xfer_engine *e, int64_t segment_id);

/**
 * Close a segment id once nothing uses it: the id is unknown from this
 * call on (new requests to it are INVALID), tasks in flight finish, and
 * then @p cb gets 0 (before or after the callbacks of their batches).
 * @return 0; -ENOENT for an unknown id, -EINVAL (NULL @p cb), -ENOMEM
 *         (then @p cb is never called). Any thread.
 */
XFER_EXPORT
int xfer_segment_close_async(struct xfer_engine *e, int64_t segment_id,
			     xfer_done_cb cb, void *arg);

/**
 * Describe buffer @p index of an open segment: the address peers use as
 * target_offset, its length in bytes and, if @p location is not NULL, its
 * location string (owned by the engine, valid until the segment closes
 * or a metadata watch replaces its descriptor: copy it to keep it).
 * @return 0, -ENOENT (unknown id or index past the last buffer). Any thread.
 */
XFER_EXPORT
int xfer_segment_buffer(struct xfer_engine *e, int64_t segment_id,
			size_t index, uint64_t *addr, uint64_t *len,
			const char **location);

/** One request, as the seed's TransferRequest. */
struct xfer_request {
	enum xfer_opcode opcode;
	void *source;          /**< local address inside a registered buffer */
	int64_t target_id;     /**< from xfer_segment_open() */
	/** Target address in the segment: for RAM segments the owner's
	 *  virtual address (a buffer's addr plus an offset), as Mooncake. */
	uint64_t target_offset;
	size_t length;         /**< bytes, > 0 */
};

/** Progress of one task. */
struct xfer_task_status {
	enum xfer_status status;
	/** Bytes known to have arrived; a lower bound while WAITING. */
	uint64_t transferred;
};

/**
 * Completion callback of a batch: called once each time every task
 * submitted so far is terminal (so exactly once for a batch submitted
 * once), with the batch's outcome: COMPLETED if every task completed, else
 * FAILED, TIMEOUT, INVALID or CANCELED, the first of those any task has.
 * It runs on the engine's control reactor: the application's event_base
 * with xfer_engine_new_on_base(), else the engine's control thread. It may
 * free the batch.
 */
typedef void (*xfer_batch_cb)(struct xfer_batch *b, enum xfer_status outcome,
			      void *arg);

/**
 * Allocate a batch that holds up to @p capacity tasks (Mooncake's
 * allocateBatchID).
 * @return the batch, or NULL with errno EINVAL (capacity 0 or > 2^24) or
 *         ENOMEM. Any thread.
 */
XFER_EXPORT
struct xfer_batch *xfer_batch_new(struct xfer_engine *e, size_t capacity);

/**
 * Set the completion callback. Only while no task of the batch is in
 * flight; the callback then covers later submits.
 * @return 0, -EBUSY while tasks are in flight. Any thread.
 */
XFER_EXPORT
int xfer_batch_set_callback(struct xfer_batch *b, xfer_batch_cb cb, void *arg);

/**
 * xfer_batch_set_callback(), but @p cb runs one wake-up sooner, on the
 * thread that ends the round (a worker, the control reactor, or the
 * submitter inside xfer_batch_submit()), to hand the outcome to another
 * loop (Python's asyncio): it must not block, call blocking forms or free
 * the batch (xfer_batch_free() is -EBUSY until it returns). Rounds with a
 * notification end on the control reactor. @return as the other.
 */
XFER_EXPORT
int xfer_batch_set_callback_direct(struct xfer_batch *b, xfer_batch_cb cb,
				   void *arg);

/**
 * Append @p n requests as tasks (Mooncake's submitTransfer): their indices
 * follow those already in the batch. Each request is checked at once; a
 * bad one (source outside registered memory, unknown segment, target range
 * outside the segment's buffers, length 0) becomes an INVALID task while
 * the others go ahead. Copies @p reqs.
 * @return 0 (even when some tasks are INVALID); -EINVAL for NULL reqs or
 *         n 0; -ENOSPC if the batch has fewer than @p n free slots
 *         (nothing appended); -ENOMEM; -ESHUTDOWN once the batch's engine
 *         was freed. Any thread; not concurrently with another submit on
 *         the same batch.
 */
XFER_EXPORT
int xfer_batch_submit(struct xfer_batch *b, const struct xfer_request *reqs,
		      size_t n);

/**
 * Read task @p index (Mooncake's getTransferStatus).
 * @return 0, -ERANGE if no such task was submitted. Any thread.
 */
XFER_EXPORT
int xfer_batch_status(struct xfer_batch *b, size_t index,
		      struct xfer_task_status *st);

/** Number of tasks submitted to the batch so far. Any thread. */
XFER_EXPORT
size_t xfer_batch_size(const struct xfer_batch *b);

/**
 * Block until every submitted task is terminal, for callers without an
 * event loop. @param timeout_ms < 0 waits for ever.
 * @return 0, -ETIMEDOUT. Not on the engine's control reactor.
 */
XFER_EXPORT
int xfer_batch_wait(struct xfer_batch *b, int timeout_ms);

/**
 * Free a batch (Mooncake's freeBatchID), also after its engine was freed.
 * @return 0; -EBUSY while a task is in flight or its callback has not yet
 *         been called (the batch stays valid). Any thread, also from the
 *         batch's own callback.
 */
XFER_EXPORT
int xfer_batch_free(struct xfer_batch *b);

/**
 * xfer_batch_free(), once nothing keeps it -EBUSY: waits up to
 * @p timeout_ms (< 0: for ever) for the tasks in flight to end and for
 * the last round's callback or notification to be delivered (a direct
 * callback running on another thread to return), as a binding that
 * frees a batch from its destructor must.
 * @return 0 (freed); -ETIMEDOUT (not freed, the batch stays valid). Not
 *         on the engine's control reactor, nor from the batch's own
 *         callback (either would wait for itself); any other thread.
 */
XFER_EXPORT
int xfer_batch_free_wait(struct xfer_batch *b, int timeout_ms);

/**
 * Cancel a batch: every task not yet terminal ends CANCELED, unless it
 * completes or fails first. Slices not yet sent are never sent; from the
 * return on, nothing more of a canceled task is written into local memory
 * (a READ on the wire is read to its end and discarded); with RDMA, work
 * already posted to the NIC completes first, so a canceled READ may write
 * its slice until its task ends. Each task says CANCELED only once
 * nothing of it can still arrive; the callback runs once, as usual.
 * Waits for the reactors that move the batch's slices to pass between
 * events (in plugin mode, the application's thread to dispatch its base).
 * @return 0 (also once the engine was freed: nothing is in flight then).
 *         Any thread, also from a callback; not concurrently with a
 *         submit on the same batch.
 */
XFER_EXPORT
int xfer_batch_cancel(struct xfer_batch *b);

/**
 * xfer_batch_submit(), and once every task of the batch is COMPLETED, a
 * notification (@p name, @p msg) to the owner of the segment of
 * @p reqs[0] (Mooncake's submitTransferWithNotify). If any task ends
 * otherwise, nothing is sent. The batch's callback runs after the peer
 * acknowledged the notification, with COMPLETED, or FAILED if it could
 * not be delivered (the tasks stay COMPLETED; xfer_engine_last_error()
 * says why); xfer_batch_wait() waits for it too. One notification per
 * batch at a time.
 * @return as xfer_batch_submit(), and -EINVAL (NULL @p name or @p msg, or
 *         an unknown segment in @p reqs[0]), -EMSGSIZE (the notification
 *         exceeds handshake_max_len), -EBUSY (a notification is pending,
 *         or tasks are in flight), -ESHUTDOWN (the engine was freed). Any
 *         thread.
 */
XFER_EXPORT
int xfer_batch_submit_notify(struct xfer_batch *b,
			     const struct xfer_request *reqs, size_t n,
			     const char *name, const char *msg);

/**
 * Send a notification (@p name, @p msg; Mooncake's Notify message,
 * PROTOCOL.md §1) to the owner of an open segment; @p cb gets 0 once the
 * peer has queued it, -ENOBUFS if the peer refused it (its queue is
 * full), or the handshake's error (-ECONNREFUSED, -ETIMEDOUT ...). To the
 * own segment it goes to the own queue.
 * @return 0; -ENOENT (unknown id), -EINVAL (NULL @p name or @p msg),
 *         -EMSGSIZE (the body exceeds handshake_max_len), -ENOMEM (then
 *         @p cb is never called). Any thread.
 */
XFER_EXPORT
int xfer_notify_async(struct xfer_engine *e, int64_t segment_id,
		      const char *name, const char *msg, xfer_done_cb cb,
		      void *arg);

/** xfer_notify_async() and wait: 0 or a negative errno, as its callback
 *  gets or it returns, or -EDEADLK on the engine's callback base. Any
 *  thread. */
XFER_EXPORT
int xfer_notify(struct xfer_engine *e, int64_t segment_id, const char *name,
		const char *msg);

/**
 * Have notifications that arrive (and those queued) delivered to @p cb,
 * in order, on the engine's callback base; NULL: keep them queued for
 * xfer_engine_notify_pop(). At most 4096 notifications and 16 MiB of
 * them wait unread; more are refused, and their senders told so
 * (-ENOBUFS, or an empty reply message for Mooncake's).
 * @return 0. Any thread.
 */
XFER_EXPORT
int xfer_engine_set_notify_cb(struct xfer_engine *e, xfer_notify_cb cb,
			      void *arg);

/**
 * Take the oldest queued notification (Mooncake's getNotifsFromEngine):
 * @p name and @p msg malloc'd, NUL-ended, the caller's to free().
 * @return 0, -EAGAIN if none is queued. Any thread.
 */
XFER_EXPORT
int xfer_engine_notify_pop(struct xfer_engine *e, char **name, char **msg);

/** Name of a status, "COMPLETED" etc.; static storage. */
XFER_EXPORT
const char *xfer_status_str(enum xfer_status s);

#ifdef __cplusplus
}
#endif
#endif /* XFER_XFER_H */
