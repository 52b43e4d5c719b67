/*
 * The owner's side of the file data port (PROTOCOL.md §5), as its two
 * files share it: a connection and its request. server.c has the
 * connections, their requests through bounce memory and the file I/O
 * engine, and calls splice.c for a request on a file in memory, which
 * moves it with sendfile() and splice() and calls nothing back.
 */
#ifndef XFER_FILE_SCONN_INTERNAL_H
#define XFER_FILE_SCONN_INTERNAL_H

#include <endian.h>
#include <errno.h>
#include <string.h>
#include <sys/types.h>

#include "util/log_internal.h"
#include "transports/file/file_internal.h"

enum sstate {
	S_HEADER,     /* reading a header (the connection is idle) */
	S_PAYLOAD,    /* reading a WRITE payload: a piece, or drained */
	S_REPLY,      /* sending the status and the READ piece in buf */
	S_WAIT,       /* in t->waiters for bounce memory */
	S_IO,         /* the file I/O engine has c->req */
};

struct file_sconn {
	struct file_transport *t;
	struct xfer_sstream s;         /* in t->sconns, on t->r */
	enum sstate state;
	uint8_t hdr[FILE_HDR_LEN];
	size_t got;                    /* bytes of hdr, or of the piece */
	/* The request being served: its payload moves a piece at a time,
	 * [done, done + len) in buf. */
	bool write, refused;
	bool splice;                   /* on a file in memory, no pieces */
	bool mapped;                   /* and its WRITE into fo->map */
	bool answered;                 /* a READ's status is decided */
	bool drain;                    /* the rest of the payload is dropped */
	uint32_t code;                 /* a WRITE's first failure, or OK */
	uint64_t size, addr;           /* bytes, segment offset */
	uint64_t off;                  /* file offset of the payload's start */
	uint64_t done;                 /* bytes written, drained or sent */
	struct file_open *fo;          /* a reference while the file is used */
	struct xfer_fio_req req;
	uint8_t status[8];
	size_t status_left;            /* bytes of status still to send */
	uint8_t *buf;                  /* the piece's bounce memory, or NULL */
	size_t cap, len;               /* its bytes (from the budget), used */
	bool flushing;                 /* buf's memory is on its way back */
	bool stalled;                  /* in t->stalled */
	TAILQ_ENTRY(file_sconn) line;  /* t->waiters or t->stalled */
};

static inline size_t sconn_min(uint64_t a, uint64_t b)
{
	return (size_t)(a < b ? a : b);
}

static inline void sconn_put_status(struct file_sconn *c, uint32_t code)
{
	uint64_t v = htole64(FILE_STATUS_MAGIC << 32 | code);

	memcpy(c->status, &v, 8);
	c->status_left = 8;
}

/* The I/O is over: the file may go. */
static inline void sconn_put_file(struct file_sconn *c)
{
	if (c->fo)
		xfer_file_open_put(c->fo);
	c->fo = NULL;
}

static inline void sconn_reply(struct file_sconn *c, uint32_t code)
{
	sconn_put_status(c, code);
	c->splice = false; /* the status alone */
	c->got = 0;
	c->state = S_REPLY;
}

/* The request is over: the next header. */
static inline void sconn_request_end(struct file_sconn *c)
{
	sconn_put_file(c);
	c->splice = false;
	c->got = 0;
	c->state = S_HEADER;
}

/* The status of a failed read or write of @p len bytes at @p off, logged:
 * @p err's errno, but EPERM (1 says refused on the wire). */
static inline uint32_t sconn_io_failed(struct file_sconn *c, int err,
				       size_t len, uint64_t off)
{
	xfer_log(XFER_LOG_WARN, "file: %s of %zu bytes at %llu of %s for a "
		 "peer: %s", c->write ? "write" : "read", len,
		 (unsigned long long)off, c->fo->path, strerror(err));
	return err == EPERM ? EACCES : (uint32_t)err;
}

/* splice.c: requests on files in memory (c->fo->mem), on t->r */

/**
 * May the request whose header was just taken (c->write, c->size,
 * c->fo, c->off set) go here? A READ may; a WRITE where its range lies
 * inside the file, into the file's mapping (c->mapped, the mapping made
 * now), else where the transport's pipe can be had. Otherwise it goes
 * the bounce path.
 */
bool xfer_file_splice_takes(struct file_sconn *c);

/**
 * Start the request xfer_file_splice_takes() took (no bounce memory
 * held now): a WRITE reads its payload (xfer_file_splice_recv()); a
 * READ's status is decided now, OK (then xfer_file_splice_send()) or
 * ENODATA where the file ends before the range, as the bounce path's
 * read would find it.
 */
void xfer_file_splice_start(struct file_sconn *c);

/**
 * Send what the socket takes of a READ's status, then of the file's
 * pages; at the end the connection waits for its next header.
 * @return bytes sent, 0 on EAGAIN, -1 to close (also where the file got
 * shorter since the status said OK: nothing else can be said).
 */
ssize_t xfer_file_splice_send(struct file_sconn *c);

/**
 * Receive what came of a WRITE's payload into the file's mapping, or
 * splice it into the file through the transport's pipe, which it leaves
 * empty. A write through the pipe that fails drops what the pipe holds,
 * with the pipe; the rest of the payload is then drained (c->drain) and
 * the status says the errno. Once all of it is in, the status is next
 * (sconn_reply()).
 * @return bytes taken from the socket (1 where a fault turned it to the
 * pipe), 0 on EAGAIN, -1 to close.
 */
ssize_t xfer_file_splice_recv(struct file_sconn *c);

/** The transport's pipe, made at its first use. @return 0, -1 when
 *  none can be had (the request then goes the bounce path). */
int xfer_file_pipe_get(struct file_transport *t);

/** Close the transport's pipe (if open), and with it what it holds. */
void xfer_file_pipe_drop(struct file_transport *t);

#endif
