/*
 * transfer_engine_c.h — Mooncake's C API for the Transfer Engine, on xfer
 * (libtransfer_engine, built on libxfer).
 *
 * Names, argument types, struct layouts, constants and status numbers are
 * those of Mooncake's mooncake-transfer-engine/include/transfer_engine_c.h,
 * so that a C program written against Mooncake's header compiles and links
 * against this library unchanged (`pkg-config --cflags --libs
 * transfer_engine`; the header is found as "transfer_engine_c.h").
 *
 * Conventions, as Mooncake's:
 *  - strings passed in are copied (or used) during the call only: the
 *    caller may free them as soon as it returns;
 *  - functions returning int answer 0 or a negative Mooncake error code:
 *      -1 invalid argument          -2 too many requests
 *      -3 address not registered    -4 busy (in use)
 *      -6 device not found          -7 address overlapped
 *      -102 socket (peer unreachable, connection broken)
 *      -103 malformed reply         -104 handshake refused
 *      -200 metadata (segment unknown, store error)
 *      -302 out of memory           -303 not implemented
 *    except submitTransfer, submitTransferWithNotify, getTransferStatus
 *    and freeBatchID, which answer Mooncake's Status code: 0 OK,
 *    1 invalid argument, 2 too many requests, 4 batch busy, 302 memory;
 *  - every call may come from any thread, and blocks its caller until
 *    done (network and store included); they run on xfer's reactors, so
 *    an idle engine uses no CPU.
 *
 * Where xfer's behaviour differs from Mooncake's, the comment of the call
 * says so and why.
 */
#ifndef TRANSFER_ENGINE_C
#define TRANSFER_ENGINE_C

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What libtransfer_engine exports: the calls below and nothing else. */
#if defined(__GNUC__)
#define XFER_TE_EXPORT __attribute__((visibility("default")))
#else
#define XFER_TE_EXPORT
#endif

/* Types are macros, as in Mooncake's header. */
#define segment_handle_t int32_t
#define segment_id_t int32_t
#define file_id_t uint32_t
#define batch_id_t uint64_t
/** The id of the engine's own segment: openSegment() of its own name. */
#define LOCAL_SEGMENT (0)
/** allocateBatchID() failed. */
#define INVALID_BATCH UINT64_MAX

#define OPCODE_READ (0)  /**< copy target → source */
#define OPCODE_WRITE (1) /**< copy source → target */

/**
 * One request (40 bytes on LP64). @c target_offset is an address in the
 * target segment as its owner registered it (a buffer's address plus an
 * offset). For a file segment (opened as "nvmeof/<name>") @c file_id
 * names the file (registerLocalFile()'s id) and @c target_offset is the
 * offset in that file; for a RAM segment it is ignored (it fills what was
 * padding in Mooncake's older header, so programs built against either
 * layout work).
 */
struct transfer_request {
	int opcode;
	void *source;
	segment_id_t target_id;
	file_id_t file_id;
	uint64_t target_offset;
	uint64_t length;
};

typedef struct transfer_request transfer_request_t;

/** A notification: both strings NUL-ended. */
struct notify_msg {
	char *name;
	char *msg;
};

typedef struct notify_msg notify_msg_t;

/* Task statuses, numbered as Mooncake's TransferStatusEnum. */
#define STATUS_WAITING (0)   /**< in transfer */
#define STATUS_PENDING (1)   /**< never reported (kept for the numbering) */
#define STATUS_INVALID (2)   /**< refused at submit; nothing was sent */
#define STATUS_CANCELED (3)  /**< ended before all its bytes moved */
#define STATUS_COMPLETED (4)
#define STATUS_TIMEOUT (5)   /**< no progress within the transfer timeout */
#define STATUS_FAILED (6)    /**< refused by the peer, or the link broke */

/** Progress of one task. */
struct transfer_status {
	int status;                 /**< STATUS_* */
	uint64_t transferred_bytes; /**< a lower bound while WAITING */
};

/** Mooncake's segment description; no call of this API takes one. */
struct segment_desc {
	int type; /* RDMA / NVMeoF */
	union {
		struct {
			void *addr;
			uint64_t size;
			const char *location;
		} rdma;
		struct {
			const char *file_path;
			const char *subsystem_name;
			const char *proto;
			const char *ip;
			uint64_t port;
		} nvmeof;
	} desc_;
};

typedef struct transfer_status transfer_status_t;

/** One buffer of registerLocalMemoryBatch(). */
struct buffer_entry {
	void *addr;
	size_t length;
};
typedef struct buffer_entry buffer_entry_t;

typedef struct segment_desc segment_desc_t;
typedef void *transfer_engine_t;
typedef void *transport_t;

/**
 * Create an engine and bring it up: handshake listener bound, own segment
 * published. The environment applies as in xfer_config_new() (MC_* names
 * as Mooncake's, see docs/CONFIG.md).
 * @param metadata_conn_string "P2PHANDSHAKE" (peer to peer: segments are
 *        named `host:port` and asked of their owners), "etcd://h:p" or a
 *        bare "h:p", "redis://h:p[/db]", "http://h:p/path".
 * @param local_server_name this engine's segment name. Peer to peer: its
 *        host part names the host, the port is a free one, as Mooncake's
 *        (getLocalIpAndPort() tells which). With a store: the name as
 *        given; xfer listens on the port of a `host:port` name (Mooncake
 *        does so with MC_LEGACY_RPC_PORT_BINDING), on a free one for a
 *        bare name.
 * @param ip_or_host_name, rpc_port unused, as Mooncake leaves them
 *        (MC_TCP_BIND_ADDRESS names the address).
 * @param auto_discover non-zero: install RDMA when the host has RDMA
 *        devices (and MC_FORCE_TCP is unset), else TCP. Zero: TCP, until
 *        installTransport() says otherwise. (Mooncake installs nothing
 *        without auto discovery; every xfer engine reaches TCP peers.)
 * @return the engine, or NULL (bad argument, port taken, store away; the
 *         reason is logged).
 */
XFER_TE_EXPORT
transfer_engine_t createTransferEngine(const char *metadata_conn_string,
				       const char *local_server_name,
				       const char *ip_or_host_name,
				       uint64_t rpc_port, int auto_discover);

/**
 * Write "host:port" of the handshake listener (as published in rpc_meta)
 * into @p buf_out, cut to @p buf_len - 1 bytes and NUL-ended.
 * @return 0; -1 for a NULL engine or buffer.
 */
XFER_TE_EXPORT
int getLocalIpAndPort(transfer_engine_t engine, char *buf_out, size_t buf_len);

/**
 * Install a transport. "tcp": always there (every xfer engine reaches TCP
 * peers). "rdma": @p args NULL, or args[0] the NIC priority matrix as
 * JSON (`{"cpu:0":[["mlx5_0"],["mlx5_1"]]}`; "" or NULL: from sysfs,
 * every device). RDMA is added to the running engine
 * (xfer_engine_add_transport()): registered memory is registered with
 * it and the own segment advertises it; batches, open segments and the
 * name and port stay. Installed already: the handle, matrix as it was
 * (as Mooncake's). Peers that opened this segment before should open it
 * again (a store's watch does so); a peer reaches an RDMA engine's
 * memory only with RDMA itself.
 * @return a non-NULL handle; NULL for an unknown protocol, a bad matrix
 *         or no RDMA device (the engine stays as it was).
 */
XFER_TE_EXPORT
transport_t installTransport(transfer_engine_t engine, const char *proto,
			     void **args);

/**
 * Uninstall a transport: "rdma" remakes the engine with TCP (same name
 * and handshake port, registered memory registered again, open segments
 * opened again with the same ids); "tcp" stays (0): it is part of every
 * engine.
 * (Mooncake's does nothing and answers 0.)
 * @return 0; -1 for an unknown protocol; -4 while batches are allocated.
 */
XFER_TE_EXPORT
int uninstallTransport(transfer_engine_t engine, const char *proto);

/**
 * Open a segment by name (a leading '/' is dropped, as Mooncake does):
 * the own name gives LOCAL_SEGMENT (served by memcpy), a name already
 * open its id; otherwise its descriptor is fetched (from its owner peer to
 * peer, else the store) and a new id given.
 * @return the id (>= 0), or -1 (no such segment, peer or store away).
 */
XFER_TE_EXPORT
segment_id_t openSegment(transfer_engine_t engine, const char *segment_name);

/**
 * openSegment(), fetching the descriptor again if the name is open
 * (buffers its owner registered since). @return as openSegment().
 */
XFER_TE_EXPORT
segment_id_t openSegmentNoCache(transfer_engine_t engine,
				const char *segment_name);

/**
 * Close a segment id: its descriptor and connections are dropped once
 * tasks in flight to it finish; requests naming the id are INVALID until
 * openSegment() of its name, which gives the same id again. (Mooncake's
 * does nothing; xfer frees what the segment holds.)
 * @return 0; -1 for an id that was never given.
 */
XFER_TE_EXPORT
int closeSegment(transfer_engine_t engine, segment_id_t segment_id);

/**
 * Forget the segment @p segment_name from the cache, as Mooncake's
 * removeLocalSegment(): closed as closeSegment(), and its id with it (a
 * later openSegment() gives a new one). The own segment stays (it is
 * served by memcpy, not cached). @return 0; -1 for an empty name.
 */
XFER_TE_EXPORT
int removeLocalSegment(transfer_engine_t engine, const char *segment_name);

/**
 * Stop and free the engine: batches still allocated are canceled and
 * freed, listeners and connections closed, its keys withdrawn from the
 * store; registered memory stays the caller's. NULL is fine.
 */
XFER_TE_EXPORT
void destroyTransferEngine(transfer_engine_t engine);

/**
 * Register [addr, addr+length) for transfers (and, if
 * @p remote_accessible, for peers to read and write), then publish it.
 * @param location `cpu:N`, `cuda:N` or `*`.
 * @return 0; -1 (NULL or overflowing range, length 0, bad location),
 *         -7 (overlaps a registered buffer), -302, -202 (a device refused
 *         the memory region), -200 (the store did not take it).
 */
XFER_TE_EXPORT
int registerLocalMemory(transfer_engine_t engine, void *addr, size_t length,
			const char *location, int remote_accessible);

/**
 * Unregister the buffer that starts at @p addr and publish it gone. A
 * peer's request being served holds a buffer a moment: that is waited
 * for, up to 2 s. @return 0; -3 (no buffer starts there), -4 (a task in
 * flight still uses it), -200 (the store did not take it).
 */
XFER_TE_EXPORT
int unregisterLocalMemory(transfer_engine_t engine, void *addr);

/**
 * Register @p buffer_len buffers at one @p location, remotely
 * accessible, published once. All or nothing.
 * @return as registerLocalMemory(); -7 also for buffers of the list that
 *         overlap each other; -1 also for a @p buffer_len whose list
 *         would not fit in memory (nothing of it is read).
 */
XFER_TE_EXPORT
int registerLocalMemoryBatch(transfer_engine_t engine,
			     buffer_entry_t *buffer_list, size_t buffer_len,
			     const char *location);

/**
 * Unregister each address of @p addr_list (as unregisterLocalMemory()),
 * published once. @return 0, or the first error (the others are still
 * unregistered).
 */
XFER_TE_EXPORT
int unregisterLocalMemoryBatch(transfer_engine_t engine, void **addr_list,
			       size_t addr_len);

/** Whether file segments (registerLocalFile()) are there: true for any
 *  engine (xfer's file transport always runs). */
XFER_TE_EXPORT
bool supportFileBuffer(transfer_engine_t engine);

/**
 * Register the file or block device at @p path, @p size bytes (0: its
 * size now), as a file of the engine's file segment "nvmeof/<name>"
 * (xfer_register_file()), and wait until peers can see it. *@p id gets
 * its index in that segment, which requests name in @c file_id; ids of
 * files after one unregistered move down by one.
 * @return 0; -1 (NULL argument, a path that does not open read-write, an
 *         empty file with @p size 0, registered before with a larger
 *         size); -302 (no memory).
 */
XFER_TE_EXPORT
int registerLocalFile(transfer_engine_t engine, const char *path, size_t size,
		      file_id_t *id);

/** Drop the file registered as @p path and wait until peers see it gone.
 *  @return 0; -1 (NULL argument, not registered); -4 (a transfer or a
 *  peer's request uses it). */
XFER_TE_EXPORT
int unregisterLocalFile(transfer_engine_t engine, const char *path);

/**
 * A batch that holds up to @p batch_size tasks. Ids are small integers
 * with a generation (never reused while this engine lives), not pointers.
 * @return the id, or INVALID_BATCH (size 0 or over 2^24, no memory).
 */
XFER_TE_EXPORT
batch_id_t allocateBatchID(transfer_engine_t engine, size_t batch_size);

/**
 * Append @p count requests to the batch as tasks, numbered on from those
 * already in it. A bad request (source outside registered memory, unknown
 * segment id, target range outside the segment's buffers, length 0,
 * another opcode) becomes an INVALID task while the others go ahead.
 * @return 0 (also for @p count 0), 1 (unknown batch, NULL @p entries),
 *         2 (more tasks than the batch holds; none appended), 302.
 */
XFER_TE_EXPORT
int submitTransfer(transfer_engine_t engine, batch_id_t batch_id,
		   struct transfer_request *entries, size_t count);

/**
 * submitTransfer(), and once every task of the batch is COMPLETED the
 * notification @p notify_msg to the owner of @p entries[0]'s segment (if
 * a task ends otherwise, nothing is sent). freeBatchID() waits for the
 * peer's answer. @return as submitTransfer(), 1 also for NULL strings,
 *         too long a message or an unknown segment in entries[0], 4 if the
 *         batch has tasks in flight or a notification pending.
 */
XFER_TE_EXPORT
int submitTransferWithNotify(transfer_engine_t engine, batch_id_t batch_id,
			     struct transfer_request *entries, size_t count,
			     notify_msg_t notify_msg);

/**
 * Take every notification that arrived, oldest first: an array of *size
 * entries, each string malloc'd; free it with freeNotifsMsgBuf().
 * @return the array, or NULL with *size 0 when none waits (or no memory:
 *         they stay queued).
 */
XFER_TE_EXPORT
notify_msg_t *getNotifsFromEngine(transfer_engine_t engine, int *size);

/** Free what getNotifsFromEngine() gave (NULL is fine). @return 0. */
XFER_TE_EXPORT
int freeNotifsMsgBuf(notify_msg_t *msg, int size);

/**
 * Send a notification to the owner of open segment @p target_id and wait
 * for its answer. @return 0; -200 (unknown segment id), -1 (NULL strings,
 *         too long), -104 (the peer refused it: its queue is full), -102
 *         (peer unreachable).
 */
XFER_TE_EXPORT
int genNotifyInEngine(transfer_engine_t engine, uint64_t target_id,
		      notify_msg_t notify_msg);

/**
 * Read task @p task_id of a batch into @p status.
 * @return 0; 1 (unknown batch, no such task, NULL @p status).
 */
XFER_TE_EXPORT
int getTransferStatus(transfer_engine_t engine, batch_id_t batch_id,
		      size_t task_id, struct transfer_status *status);

/**
 * Free a batch id. Refused while a task of it is WAITING; once every task
 * is terminal it is freed (with a notification, after the peer answered
 * it). @return 0; 1 (unknown batch); 4 (a task is in flight).
 */
XFER_TE_EXPORT
int freeBatchID(transfer_engine_t engine, batch_id_t batch_id);

/**
 * Fetch the descriptor of every open segment again.
 * @return 0; -200 if a fetch failed (that segment keeps its descriptor).
 */
XFER_TE_EXPORT
int syncSegmentCache(transfer_engine_t engine);

#ifdef __cplusplus
}
#endif
#endif /* TRANSFER_ENGINE_C */
