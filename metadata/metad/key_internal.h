/*
 * xfer-metad's keys and values: their limits, the check every key and
 * watch prefix passes (from a client or from the persist file), and the
 * FNV-1a hash the store files keys under and the persist file is sealed
 * with. Shared by store.c, persist.c and http.c; depends on none of them.
 */
#ifndef XFER_METAD_KEY_INTERNAL_H
#define XFER_METAD_KEY_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#define METAD_KEY_MAX 4096u            /* bytes */
#define METAD_VALUE_MAX (64u << 20)    /* bytes */

/**
 * Check a key or key prefix of @p len bytes: at most METAD_KEY_MAX bytes,
 * no NUL, valid UTF-8 (keys are written into watch answers as JSON
 * strings). @return NULL if fine, else a one-line reason.
 */
const char *metad_key_check(const char *key, size_t len);

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
