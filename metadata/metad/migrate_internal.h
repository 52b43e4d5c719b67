/* xfer-metad's migration of an old persist file into its database. */
#ifndef XFER_METAD_MIGRATE_INTERNAL_H
#define XFER_METAD_MIGRATE_INTERNAL_H

#include <stddef.h>

/**
 * If @p path holds a persist file of the old format (legacy.c), move its
 * keys, values and revision into a new database (db.c) at @p path and
 * keep the old file as @p path ".migrated"; a line on stderr says so.
 * The new database is built aside (@p path ".migrating") and renamed
 * over the old file only when complete, so a crash at any point leaves
 * either the old file, which the next start migrates again, or the new
 * database. Anything else at @p path (a database, nothing) is left to
 * metad_db_open(). Runs at start, on the main thread, before serving.
 * @return 0 (nothing to migrate, or migrated), or a negative errno with a
 *         message in @p err (@p errlen bytes) that names the file and
 *         says what to do; the old file is then left as it was.
 */
int metad_migrate(const char *path, char *err, size_t errlen);

#endif
