/* xfer-metad's file helpers, shared by db.c and migrate.c. */
#ifndef XFER_METAD_FILE_INTERNAL_H
#define XFER_METAD_FILE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/**
 * Read all of the regular file at @p path into a malloc'd *@p buf (the
 * caller frees it), its length to *@p len.
 * @return 0, or a negative errno (-ENOENT missing, -EINVAL not a regular
 *         file, -ENOMEM, -EIO if it shrank while read, ...).
 */
int metad_read_file(const char *path, uint8_t **buf, size_t *len);

/** fsync the folder that holds @p path, so that a file made, renamed or
 *  linked there stays after a crash. @return 0 or a negative errno. */
int metad_sync_dir(const char *path);

/** malloc'd @p a followed by @p b, or NULL (ENOMEM). */
char *metad_concat(const char *a, const char *b);

#endif
