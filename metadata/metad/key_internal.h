/*
 * xfer-metad's keys and values: the key limit, the check every key and
 * watch prefix passes (from a client, the database or an old persist
 * file), the callback entries are loaded through, and the FNV-1a hash the
 * store files keys under and the old persist file was sealed with. Shared
 * by the other files of metadata/metad/; depends on none of them.
 */
#ifndef XFER_METAD_KEY_INTERNAL_H
#define XFER_METAD_KEY_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#define METAD_KEY_MAX 4096u            /* bytes */

/**
 * Check a key or key prefix of @p len bytes: at most METAD_KEY_MAX bytes,
 * no NUL, valid UTF-8 (keys are written into watch answers as JSON
 * strings). @return NULL if fine, else a one-line reason.
 */
const char *metad_key_check(const char *key, size_t len);

/**
 * Takes one loaded entry: @p klen bytes of @p key (checked with
 * metad_key_check(), not NUL-ended) and @p vlen bytes of @p val; both
 * are the caller's and live only during the call.
 * @return 0, -EEXIST if the key came before, or another negative errno
 *         (-ENOMEM, an I/O error), which stops the load.
 */
typedef int (*metad_entry_cb)(const char *key, size_t klen,
			      const uint8_t *val, size_t vlen, void *arg);

#define METAD_FNV_OFFSET 0xcbf29ce484222325ull

/** FNV-1a 64 of @p len bytes, continuing from @p h. */
static inline uint64_t metad_fnv1a(uint64_t h, const void *data, size_t len)
{
	const uint8_t *p = data;

	while (len--) {
		h ^= *p++;
		h *= 0x100000001b3ull;
	}
	return h;
}

#endif
