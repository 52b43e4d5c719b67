/*
 * The document of a file segment (PROTOCOL.md §2, the seeds' NVMe-oF
 * segment): the value of `mooncake/nvmeof/<name>`,
 *   {"server_name":str, "protocol":"nvmeof", "buffers":[{"length":u64,
 *    "file_path":str, "local_path_map":{host:path,...}},...]}
 * and xfer's own "xfer_data_port", where the owner serves the files to
 * peers that cannot reach them. The buffers lie end to end: buffer i
 * starts where buffer i-1 ends.
 */
#ifndef XFER_FILE_DOC_INTERNAL_H
#define XFER_FILE_DOC_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/** Most files accepted in one document from a peer. */
#define XFER_FILE_MAX_FILES 4096

struct xfer_file_buf {
	uint64_t length;          /* bytes, non-zero */
	char *file_path;          /* on the owner's host */
	size_t nmap;
	char **map_host, **map_path; /* local_path_map */
};

struct xfer_file_doc {
	char *server_name;
	uint16_t data_port;       /* 0: none advertised */
	size_t nbufs;
	struct xfer_file_buf *bufs;
};

/** Encode @p d as compact JSON ending in '\n' (malloc'd, NUL-ended).
 *  @return 0, -EINVAL (not UTF-8), -ENOMEM. */
int xfer_file_doc_encode(const struct xfer_file_doc *d, char **json,
			 size_t *len);

/** Decode a peer's document; every field is checked; a protocol other
 *  than "nvmeof" (any case) is refused.
 *  @return 0 with *out set, -EPROTO with a reason in @p err, -ENOMEM. */
int xfer_file_doc_decode(const char *json, size_t len,
			 struct xfer_file_doc **out, char *err, size_t errlen);

/** Free a decoded document (NULL is fine). */
void xfer_file_doc_free(struct xfer_file_doc *d);

/** Where [off, off+len) lies: the buffer holding all of it, and off
 *  within it. @return the index, or -1 if no single buffer holds it. */
long xfer_file_doc_find(const struct xfer_file_doc *d, uint64_t off,
			uint64_t len, uint64_t *in_file);

#endif
