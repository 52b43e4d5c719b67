/* The registry of the local segment's buffers: sorted, read-mostly. */
#ifndef XFER_BUFFERS_INTERNAL_H
#define XFER_BUFFERS_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct xfer_desc;
struct xfer_desc_buf;

struct xfer_buffer {
	uint64_t addr, len;
	char *location;
	bool remote_access;
	atomic_long users; /* local tasks and peer requests using it now */
	void *tp_mem;      /* the transport's registration (memory regions) */
};

/* Sorted by address; entries never move while registered. */
struct xfer_buffers {
	pthread_rwlock_t lock;
	struct xfer_buffer **v;
	size_t n, cap;
};

void xfer_buffers_init(struct xfer_buffers *bs);
void xfer_buffers_fini(struct xfer_buffers *bs);
/** A new buffer, not yet in the registry; NULL on ENOMEM. */
struct xfer_buffer *xfer_buffer_new(uint64_t addr, uint64_t len,
				    const char *location, bool remote_access);
void xfer_buffer_free(struct xfer_buffer *b);
/** Insert @p b. @return 0, -EEXIST (overlaps; b not taken), -ENOMEM. */
int xfer_buffers_insert(struct xfer_buffers *bs, struct xfer_buffer *b);
/** Take the buffer starting at @p addr out of the registry into *out
 *  (the caller frees it). @return 0, -ENOENT, -EBUSY (in use). */
int xfer_buffers_remove(struct xfer_buffers *bs, uint64_t addr,
			struct xfer_buffer **out);
/** The buffer holding all of [addr, addr+len), with @p remote_only only a
 *  remotely accessible one; NULL if none. Caller holds bs->lock. */
struct xfer_buffer *xfer_buffers_find(struct xfer_buffers *bs, uint64_t addr,
				      uint64_t len, bool remote_only);
/** Take a use of the buffer holding the source range; NULL if none. */
struct xfer_buffer *xfer_buffers_acquire(struct xfer_buffers *bs,
					 uint64_t addr, uint64_t len);
/** Fill d->bufs with the remotely accessible buffers; @p keys (if not
 *  NULL) sets each one's transport fields. @return 0, -ENOMEM */
int xfer_buffers_describe(struct xfer_buffers *bs, struct xfer_desc *d,
			  void (*keys)(const struct xfer_buffer *b,
				       struct xfer_desc_buf *db, void *arg),
			  void *arg);

#endif
