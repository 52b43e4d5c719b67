/*
 * The segment descriptor, the `mooncake/ram/<segment>` value of
 * PROTOCOL.md §2, and the `mooncake/rpc_meta/<server>` value. The core
 * owns the fields every descriptor has (name, protocol, timestamp, the
 * buffers' addr, length and location); the transport a descriptor names
 * owns the rest through its codec (a data port, or devices, keys
 * and priority matrix). Keys come out in alphabetical order across both,
 * as the peer's writer (jsoncpp) has them.
 */
#ifndef XFER_DESC_INTERNAL_H
#define XFER_DESC_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

/** Most buffers accepted in one descriptor from a peer. */
#define XFER_DESC_MAX_BUFFERS 65536

struct xfer_desc_buf {
	uint64_t addr;   /* owner's virtual address, non-zero */
	uint64_t length; /* bytes, non-zero, addr + length does not overflow */
	char *name;      /* location, e.g. "cpu:0" */
	void *tp;        /* the codec's fields of this buffer, or NULL */
};

struct xfer_desc_codec;

struct xfer_desc {
	char *name;
	char *protocol;
	char *timestamp;         /* "YYYY-MM-DD HH:MM:SS.ffffff", may be NULL */
	size_t nbufs;
	struct xfer_desc_buf *bufs;
	/* The codec of the protocol, NULL if none is known here; tp is its
	 * top-level fields. Decoded descriptors own tp and every buffer's
	 * tp; a descriptor the engine builds to encode borrows them. */
	const struct xfer_desc_codec *codec;
	void *tp;
};

/**
 * A transport's fields of the descriptor. @c keys and @c buf_keys are the
 * names it writes at the top level and in each buffer, sorted and
 * NULL-ended; a codec without buffer keys (NULL) has no buffer slots.
 * Parsers get the whole object and fill their own struct, setting *tp
 * first so that a failure midway leaves it for free() to take, or fail
 * as the JSON helpers do (-EPROTO with a reason, -ENOMEM).
 */
struct xfer_desc_codec {
	const char *protocol;
	const char *const *keys;
	const char *const *buf_keys;
	/** Emit the value of top-level @p key from @p tp. */
	int (*gen)(yajl_gen g, const char *key, const void *tp);
	/** Emit the value of buffer @p key from @p buf_tp. */
	int (*gen_buf)(yajl_gen g, const char *key, const void *tp,
		       const void *buf_tp);
	int (*parse)(yajl_val root, void **tp, char *err, size_t errlen);
	/** Called after parse(), for each buffer object @p obj. */
	int (*parse_buf)(yajl_val obj, const char *where, const void *tp,
			 void **buf_tp, char *err, size_t errlen);
	void (*free)(void *tp);
	void (*free_buf)(void *buf_tp);
};

/**
 * Encode @p d as compact JSON ending in '\n' into a malloc'd, NUL-ended
 * string (*json, *len without the NUL). A NULL timestamp encodes the
 * current time. @return 0, -EINVAL (a string that is not UTF-8), -ENOMEM.
 */
int xfer_desc_encode(const struct xfer_desc *d, char **json, size_t *len);

/**
 * Decode @p len bytes of JSON (need not be NUL-ended) into a new
 * descriptor; the codec is the one of @p codecs (NULL-ended) whose
 * protocol the descriptor names, if any. Unknown fields are ignored; the
 * fields above are required (timestamp excepted) and checked.
 * @return 0 with *out set, -EPROTO with a reason in @p err, -ENOMEM.
 */
int xfer_desc_decode(const char *json, size_t len,
		     const struct xfer_desc_codec *const *codecs,
		     struct xfer_desc **out, char *err, size_t errlen);

/** Free a decoded descriptor (NULL is fine). */
void xfer_desc_free(struct xfer_desc *d);

/** Sort the buffers by address. @return 0, -EPROTO if two overlap. */
int xfer_desc_sort(struct xfer_desc *d);

/** The buffer of sorted descriptor @p d holding all of [addr, addr+len);
 *  NULL if none. */
const struct xfer_desc_buf *xfer_desc_find_buf(const struct xfer_desc *d,
					       uint64_t addr, uint64_t len);

/** The `mooncake/rpc_meta/<server>` value
 *  `{"ip_or_host_name":str,"rpc_port":uint16}`. */
int xfer_rpc_meta_encode(const char *host, uint16_t port, char **json,
			 size_t *len);
/** Decode; host non-empty (malloc'd into *host), port 1..65535.
 *  @return as xfer_desc_decode(). */
int xfer_rpc_meta_decode(const char *json, size_t len, char **host,
			 uint16_t *port, char *err, size_t errlen);

#endif
