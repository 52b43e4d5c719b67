/*
 * The persist file of xfer-metad before it kept its store in SQLite
 * (format version 1), read so that it can be migrated (migrate.c). Only
 * read: nothing writes this format any more. Pure functions over bytes,
 * no file I/O, so that a fuzzer can call them directly.
 */
#ifndef XFER_METAD_LEGACY_INTERNAL_H
#define XFER_METAD_LEGACY_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "metadata/metad/key_internal.h"

#define METAD_LEGACY_MAGIC "XFERMETA"
#define METAD_LEGACY_MAGIC_LEN 8
#define METAD_LEGACY_VALUE_MAX (64u << 20)   /* bytes, the old limit */

/** True if the @p len bytes at @p buf start like an old persist file
 *  (its magic), damaged or not. */
bool metad_legacy_is(const uint8_t *buf, size_t len);

/**
 * Check the whole of an old persist file, @p len bytes at @p buf, then
 * hand each entry to @p cb with @p arg, in file order. Everything is
 * checked (magic, version, checksum, lengths, keys, nothing left over)
 * before the first entry goes out; a duplicate key is found by @p cb
 * (-EEXIST).
 * @param revision set to the file's revision on success
 * @return 0; -EINVAL for a corrupt file (a duplicate key too), with a
 *         one-line reason in @p err (@p errlen bytes, NUL-ended); or the
 *         negative errno @p cb returned, which stopped the load.
 * Thread-safe (no state of its own).
 */
int metad_legacy_parse(const uint8_t *buf, size_t len, metad_entry_cb cb,
		       void *arg, uint64_t *revision, char *err,
		       size_t errlen);

#endif
