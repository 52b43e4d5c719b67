/*
 * xfer-metad's database: the keys, values and revision of a store in an
 * SQLite file, each change one transaction that is durable (WAL, fsync'd
 * with synchronous=FULL) when the call returns. It knows nothing of the
 * store that keeps the entries in memory: loading, each row is handed
 * back through a callback.
 *
 * One thread at a time per handle (the server's event_base thread). The
 * file is locked for the handle's life (locking_mode=EXCLUSIVE): a second
 * server, or the sqlite3 shell, finds it busy.
 */
#ifndef XFER_METAD_DB_INTERNAL_H
#define XFER_METAD_DB_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "metadata/metad/key_internal.h"

struct metad_db;

/**
 * Open the database at @p path, creating it (and its tables) if missing,
 * and check it: an SQLite file of xfer-metad's (its application_id),
 * whole (PRAGMA quick_check, which reads all of it), not in use.
 * @return the handle, or NULL with a message naming @p path in @p err
 *         (@p errlen bytes): a file that is not xfer-metad's or is
 *         damaged is refused and left as it was.
 */
struct metad_db *metad_db_open(const char *path, char *err, size_t errlen);

/** Close @p db (NULL is fine); SQLite folds its log into the file. */
void metad_db_close(struct metad_db *db);

/**
 * Hand each row to @p cb with @p arg (keys checked with
 * metad_key_check() first), and the revision to *@p revision.
 * @return 0; -EINVAL for a row that is not valid (a message in @p err);
 *         the negative errno @p cb returned; or another negative errno
 *         for a read that failed (a message in @p err).
 */
int metad_db_load(struct metad_db *db, metad_entry_cb cb, void *arg,
		  uint64_t *revision, char *err, size_t errlen);

/**
 * Set @p key (@p klen bytes) to the @p vlen bytes at @p val, and the
 * revision to @p revision, in one transaction, durable on return.
 * @return 0, or a negative errno (-ENOSPC disk full, -EIO, -ENOMEM,
 *         -EFBIG past SQLite's length limit, ...), told on stderr too;
 *         the file then holds what it held before.
 */
int metad_db_put(struct metad_db *db, const char *key, size_t klen,
		 const uint8_t *val, size_t vlen, uint64_t revision);

/** metad_db_put() for deleting @p key (@p klen bytes), which must be
 *  there. @return as metad_db_put(). */
int metad_db_del(struct metad_db *db, const char *key, size_t klen,
		 uint64_t revision);

/**
 * Bulk load (migration): metad_db_begin(), metad_db_insert() per entry,
 * then metad_db_commit() or metad_db_rollback(). A failed insert leaves
 * the transaction open: roll it back.
 * @return 0 or a negative errno; metad_db_insert() -EEXIST for a key
 *         already there.
 */
int metad_db_begin(struct metad_db *db);
int metad_db_insert(struct metad_db *db, const char *key, size_t klen,
		    const uint8_t *val, size_t vlen);
int metad_db_commit(struct metad_db *db, uint64_t revision);
void metad_db_rollback(struct metad_db *db);

#endif
