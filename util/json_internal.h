/*
 * JSON helpers on yajl for the codecs of PROTOCOL.md §1–2 (the core
 * descriptor, the handshake bodies, each transport's descriptor fields):
 * yajl_gen to encode, yajl_tree to decode. Decoders trust nothing: a
 * failure returns -EPROTO with a one-line reason in @p err (which may be
 * NULL), or -ENOMEM with "out of memory" there.
 */
#ifndef XFER_JSON_INTERNAL_H
#define XFER_JSON_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

/** Longest name, location or GID string accepted from a peer, in bytes. */
#define XFER_JSON_MAX_STR 4096

/** Write a reason into @p err. @return -EPROTO. */
int xfer_json_fail(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/** "out of memory" into @p err. @return -ENOMEM. */
int xfer_json_oom(char *err, size_t errlen);

/* ---- encoding: each returns non-zero once a yajl call failed ---- */

/** A generator that emits only valid UTF-8; NULL on ENOMEM. */
yajl_gen xfer_json_gen_new(void);
/** A string (NULL as ""). */
int xfer_json_str(yajl_gen g, const char *s);
/** An unsigned 64-bit integer (yajl's own takes a long long). */
int xfer_json_u64(yajl_gen g, uint64_t v);
/**
 * End a chain of yajl_gen calls whose status is @p failed: on success the
 * text, with the '\n' that ends every body on the wire, into a malloc'd,
 * NUL-ended *json (*len without the NUL). Frees @p g; a NULL @p g (its
 * allocation failed: start chains with `!g ||`) gives -ENOMEM.
 * @return 0, -EINVAL (a string that is not UTF-8), -ENOMEM.
 */
int xfer_json_finish(yajl_gen g, int failed, char **json, size_t *len);

/* ---- decoding ---- */

/**
 * Check that @p len bytes (need not be NUL-ended) are one well-formed JSON
 * object nested at most 32 levels (yajl_tree_free() recurses per level),
 * with no NUL byte anywhere (not even in a comment, which yajl allows).
 * @return 0, -EPROTO with the reason in @p err, -ENOMEM.
 */
int xfer_json_check_object(const char *json, size_t len, char *err,
			   size_t errlen);
/** Check as above, then parse into *root (free with yajl_tree_free()). */
int xfer_json_parse(const char *json, size_t len, yajl_val *root, char *err,
		    size_t errlen);
/** First value of @p key in object @p obj, NULL if absent. */
yajl_val xfer_json_get(yajl_val obj, const char *key);
/** A JSON integer in 0..2^64-1 (no sign, fraction or exponent). */
bool xfer_json_to_u64(yajl_val v, uint64_t *out);
/** A non-empty string of at most XFER_JSON_MAX_STR bytes, or NULL. */
const char *xfer_json_name(yajl_val v);

/*
 * Field readers of an object: @p where prefixes @p key in messages ("" at
 * top level, else e.g. "buffers[3]."); a missing field is an error.
 */
int xfer_json_get_uint(yajl_val obj, const char *where, const char *key,
		       uint64_t min, uint64_t max, uint64_t *out, char *err,
		       size_t errlen);
/** Borrow a string of at most XFER_JSON_MAX_STR bytes. */
int xfer_json_get_strv(yajl_val obj, const char *where, const char *key,
		       const char **out, char *err, size_t errlen);
/** A malloc'd copy of such a string. */
int xfer_json_get_str(yajl_val obj, const char *where, const char *key,
		      char **out, char *err, size_t errlen);
/** As xfer_json_get_str(), and it must not be empty. */
int xfer_json_get_name(yajl_val obj, const char *where, const char *key,
		       char **out, char *err, size_t errlen);

#endif
