/*
 * File transport: the seeds' NVMe-oF segments as files (or block devices)
 * an engine registers and peers open as "nvmeof/<owner>". Offsets run
 * over the files end to end, in registration order. A file reachable on
 * this host (the engine's own, or one local_path_map names a path for on
 * this host) is read and written here with io_uring on the transport's
 * reactor; one that is not is served by its owner on the transport's own
 * data port (PROTOCOL.md §5).
 *
 *   file.c     ops table, knobs, start and stop
 *   files.c    open files, the own files and their document
 *   peer.c     peers' documents: adopt, covers, buffers
 *   io.c       slices on the file I/O engine (fio.c), cancel
 *   server.c   the owner's side of the data port
 *   splice.c   its requests on files in memory (sconn_internal.h)
 *   client.c   the initiator's side, for files it cannot reach
 *   api.c      the public calls (xfer_register_file ...)
 *
 * Stop (file.c's fini), the reactors stopped: xfer_file_io_close() sets
 * closing and frees the I/O engine, so every done callback left runs,
 * the data port's too (with closing set they only let their request go);
 * then xfer_file_server_stop(), then xfer_file_client_close().
 */
#ifndef XFER_FILE_INTERNAL_H
#define XFER_FILE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include "core/config_internal.h"
#include "core/segment_internal.h"
#include "core/slice_internal.h"
#include "core/transport.h"
#include "transports/file/doc_internal.h"
#include "transports/file/fio_internal.h"
#include "transports/sstream_internal.h"

/* The knobs of ops->knobs, in order. */
enum { K_DEPTH, K_THREADS, K_LOCAL, K_BOUNCE };

/* Connections to each owner: the owner serves each one request at a
 * time. */
#define XFER_FILE_CONNS 8

/* Most bytes one request of the data port may carry (a slice). */
#define XFER_FILE_MAX_IO (64u << 20)

/* The data port moves a request's payload through bounce memory this
 * much at a time (the least file_bounce_max may be). */
#define XFER_FILE_PIECE (1u << 20)

/* The data port's frames: TCP's header and status (PROTOCOL.md §3) with
 * a segment offset for the address; a status code other than OK and
 * REFUSED is the errno of the owner's failed read or write. */
#define FILE_HDR_LEN 24
#define FILE_OP_WRITE 1
#define FILE_STATUS_MAGIC 0x4D435456ull
#define FILE_STATUS_OK 0u
#define FILE_STATUS_REFUSED 1u

/* An open file, shared by the registry or a peer's document and by every
 * slice that uses it; closed with the last reference. */
struct file_open {
	atomic_long refs;
	struct file_transport *t;
	int fd;                   /* buffered */
	int dfd;                  /* O_DIRECT, or -1 */
	unsigned align;           /* O_DIRECT: memory, offset, length */
	atomic_uint lend;         /* io.c: what a submitter may not do */
	bool mem;                 /* a regular file on tmpfs or ramfs */
	char *path;
	/* splice.c's shared mapping of a file in memory, the peers' WRITEs
	 * received into it: made, remade larger and used on t->r only,
	 * unmapped with the file; NULL: none yet */
	uint8_t *map;
	size_t map_len;
};

/* A file of the engine's own segment. */
struct own_file {
	TAILQ_ENTRY(own_file) link;
	uint64_t length;
	struct file_open *fo;
	size_t nmap;              /* local_path_map given at registration */
	char **map_host, **map_path;
};

TAILQ_HEAD(own_files, own_file);

/** May @p len bytes at @p buf go to or from offset @p off of @p fo with
 *  O_DIRECT (memory, offset and length aligned as the file needs)? */
static inline bool xfer_file_direct(const struct file_open *fo,
				    const void *buf, uint64_t off,
				    uint64_t len)
{
	uint64_t a = fo->align;

	return fo->dfd >= 0 && !((uintptr_t)buf % a) && !(off % a) &&
	       !(len % a);
}

struct file_rpeer;
struct file_sconn;
TAILQ_HEAD(file_sconn_q, file_sconn);

/* A peer's file segment (seg->tp_priv). */
struct file_peer {
	struct xfer_file_doc *doc;
	struct file_open **fo;    /* per buffer of doc; NULL: not here */
	struct file_rpeer *remote; /* its owner's data port; NULL: none */
};

struct file_transport {
	struct xfer_transport base;
	const union xfer_knob_val *k;
	char host[256];           /* gethostname(): local_path_map's key */
	struct xfer_reactor *r;   /* file I/O and the data port's server */
	struct xfer_fio *fio;
	pthread_mutex_t lock;     /* files, the inbox, in flight */
	struct own_files files;
	/* io.c: slices waiting for room in the engine, and in it. */
	struct xfer_slice *in_head, **in_tail;
	unsigned inflight, reads;
	unsigned holds;           /* cancels waiting for reads to land */
	bool kick_pending, closing;
	pthread_cond_t reads_done;
	struct xfer_job kick;
	/* server.c */
	struct xfer_listener *listener; /* the data port */
	uint16_t data_port;
	struct xfer_sstream_table sconns;
	/* Bounce memory of the data port, on r: bytes held, of them bytes
	 * on their way back (partial WRITE pieces being written), the
	 * connections in line for some (FIFO), those holding some while
	 * they wait for their peer (oldest first; given back on demand),
	 * and the event that serves the line when memory comes back. */
	size_t bounce_used, bounce_coming;
	struct file_sconn_q waiters, stalled;
	struct event *wake;
	/* The pipe WRITEs to files in memory are spliced through, on r,
	 * empty between calls; open while pipe_cap (its bytes) is not 0. */
	int pipe[2];
	size_t pipe_cap;
	/* client.c: every owner reached, as long as the transport lives. */
	SLIST_HEAD(, file_rpeer) rpeers;
};

/* What a slice carries here (its transport scratch space). */
struct file_slice {
	struct xfer_fio_req req;
	struct file_open *fo;     /* a reference held */
};
_Static_assert(sizeof(struct file_slice) <=
	       sizeof(((struct xfer_slice *)0)->tp), "file slice scratch");

static inline struct file_slice *file_slice(struct xfer_slice *s)
{
	return (struct file_slice *)s->tp.bytes;
}

/* files.c */
/** Open @p path for reading and writing: buffered, and O_DIRECT where
 *  the file system takes it. @return 0 with *@p out (one reference),
 *  -errno of open(), -ENOMEM. */
int xfer_file_open(struct file_transport *t, const char *path,
		   struct file_open **out);
void xfer_file_open_get(struct file_open *fo);
void xfer_file_open_put(struct file_open *fo);
/** Add @p path of @p length bytes (0: its size now) to the own segment,
 *  or grow it; @p map: NULL or host, path pairs ended by NULL.
 *  @return 1 added, 0 grown or unchanged; -EINVAL, -EEXIST (registered
 *  with a larger length), -errno of open(), -ENOMEM. Any thread. */
int xfer_file_add(struct file_transport *t, const char *path,
		  uint64_t length, const char *const *map);
/** Drop @p path from the own segment. @return 0, -ENOENT, -EBUSY (in
 *  use by a transfer or a peer's request). Any thread. */
int xfer_file_remove(struct file_transport *t, const char *path);
/** The own file holding all of [off, off+len), a reference taken, and off
 *  within it; NULL if none. Any thread. */
struct file_open *xfer_file_own_find(struct file_transport *t, uint64_t off,
				     uint64_t len, uint64_t *in_file);
/** ops->document, ops->covers and ops->buffer of the own segment. */
char *xfer_file_document(struct xfer_transport *t, size_t *len);
int xfer_file_own_buffer(struct file_transport *t, size_t index,
			 uint64_t *off, uint64_t *len, const char **name);
void xfer_file_own_free(struct file_transport *t);

/* peer.c */
int xfer_file_adopt(struct xfer_transport *t, struct xfer_segment *seg,
		    const char *json, size_t len, char *err, size_t errlen);
void xfer_file_release(struct xfer_transport *t, void *priv);
bool xfer_file_covers(struct xfer_transport *t, struct xfer_segment *seg,
		      uint64_t off, uint64_t len);
int xfer_file_buffer(struct xfer_transport *t, struct xfer_segment *seg,
		     size_t index, uint64_t *off, uint64_t *len,
		     const char **name);

/* io.c */
/** Move @p n slices of one task on @p fo (references of its own taken),
 *  the file offset of each being s->remote - @p base. Any thread. */
void xfer_file_io_submit(struct file_transport *t, struct file_open *fo,
			 uint64_t base, struct xfer_slice *s, size_t n);
/** ops->cancel's local part: end waiting slices of canceled tasks, wait
 *  for the reads in flight. */
void xfer_file_io_cancel(struct file_transport *t);
/** After the reactors stopped: end every slice. */
void xfer_file_io_close(struct file_transport *t);

/* server.c */
/** The data port's bounce memory, with nothing held (the start's first
 *  step; a test's or fuzzer's own server calls it alone). t->r and t->k
 *  are set. @return 0, -ENOMEM. */
int xfer_file_server_init(struct file_transport *t);
/** Listen on the bind address, any port (t->data_port), on the control
 *  reactor; connections move to t->r and use t->fio, so both are set
 *  first. @return 0, -errno (with the engine's error set). */
int xfer_file_server_start(struct file_transport *t);
/** Serve the connected, non-blocking socket @p fd (the listener's, or a
 *  test's or fuzzer's own): it moves to t->r; closed at once when
 *  max_data_conns are open or memory is short. Any thread. */
void xfer_file_server_accept(struct file_transport *t, int fd);
/** After xfer_file_io_close() (no request of the data port left in the
 *  I/O engine): close the listener and the connections. Without a start,
 *  nothing to do. */
void xfer_file_server_stop(struct file_transport *t);

/* client.c */
/** The owner at @p ss (its data port set), found or made; NULL on ENOMEM.
 *  Lives as long as the transport. Any thread. */
struct file_rpeer *xfer_file_rpeer(struct file_transport *t,
				   const struct sockaddr_storage *ss,
				   socklen_t len);
/** Send the @p n slices of one task to @p p; s->remote is the segment
 *  offset. Never fails: a slice that cannot move ends FAILED. */
void xfer_file_rpeer_submit(struct file_rpeer *p, struct xfer_slice *s,
			    size_t n);
/** ops->cancel's remote part. */
void xfer_file_client_cancel(struct file_transport *t);
/** After the reactors stopped: end every slice, free the owners. */
void xfer_file_client_close(struct file_transport *t);

#endif
