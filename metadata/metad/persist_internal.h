/*
 * xfer-metad's persist file: a revision and a set of entries (key, value)
 * on disk, rewritten whole on every change. It knows nothing of the store
 * that keeps the entries in memory: saving, the store walks its entries
 * into a writer; loading, each entry is handed back through a callback.
 */
#ifndef XFER_METAD_PERSIST_INTERNAL_H
#define XFER_METAD_PERSIST_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

struct metad_persist;
struct metad_persist_writer;

/**
 * The persist file at @p path; nothing is read or written yet.
 * @return the handle, or NULL with errno set (ENOMEM).
 */
struct metad_persist *metad_persist_new(const char *path);
void metad_persist_free(struct metad_persist *p);

/**
 * Takes one loaded entry: @p klen bytes of @p key (checked with
 * metad_key_check(), not NUL-ended) and @p vlen bytes of @p val, which
 * the callback takes over, and frees if it fails.
 * @return 0, -EEXIST if the key came before, or -ENOMEM.
 */
typedef int (*metad_persist_entry_cb)(const char *key, size_t klen,
				      uint8_t *val, size_t vlen, void *arg);

/**
 * Read the file and hand each entry to @p cb with @p arg. The checksum
 * is checked before the first entry goes out, lengths and keys as each
 * comes: a failed load may have handed out some entries, which the
 * caller then drops.
 * @param revision set to the file's revision on success
 * @return 0; 1 if the file is missing (nothing handed out); -ENOMEM; or
 *         -EINVAL (a corrupt file, a duplicate key) or another negative
 *         errno (unreadable), with a message naming the file in @p err.
 */
int metad_persist_load(const struct metad_persist *p, metad_persist_entry_cb cb,
		       void *arg, uint64_t *revision, char *err,
		       size_t errlen);

/** Writes the entries: call metad_persist_write() once per entry. */
typedef void (*metad_persist_walk_cb)(struct metad_persist_writer *w,
				      void *arg);

/** Write one entry (@p klen bytes of @p key, @p vlen of @p val); from a
 *  metad_persist_walk_cb only. Errors are reported by the save. */
void metad_persist_write(struct metad_persist_writer *w, const char *key,
			 size_t klen, const uint8_t *val, size_t vlen);

/**
 * Replace the file durably with @p revision and the @p count entries that
 * @p walk (called once, with @p arg) writes: FILE.tmp is written and
 * fsync'd, renamed over FILE, and the folder fsync'd. A failure is also
 * told on stderr.
 * @return 0 or a negative errno (the file then holds the old contents,
 *         or, if only the folder's fsync failed, maybe the new ones).
 */
int metad_persist_save(const struct metad_persist *p, uint64_t revision,
		       uint64_t count, metad_persist_walk_cb walk, void *arg);

#endif
