/*
 * xfer-metad's migration: an old persist file (legacy.c), found where the
 * database should be, is read whole, checked whole, written into a new
 * database in one transaction, and swapped in:
 *
 *   1. FILE.migrating       a new database with every entry and the
 *                           revision, committed and closed
 *   2. FILE.migrated        a second name (link) for the old file
 *   3. FILE.migrating -> FILE   rename, then fsync the folder
 *
 * A crash before 3 leaves FILE in the old format: the next start removes
 * FILE.migrating and a FILE.migrated that is the same file, and begins
 * again. A corrupt old file is refused and left as it was.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "metadata/metad/db_internal.h"
#include "metadata/metad/file_internal.h"
#include "metadata/metad/legacy_internal.h"
#include "metadata/metad/migrate_internal.h"

struct names {
	char *tmp;      /* FILE.migrating, the new database being built */
	char *aside;    /* FILE.migrated, the old file once done */
};

/* Does @p path start like an old persist file? @return 1 yes, 0 no (or
 * missing, or too short), or a negative errno. */
static int is_legacy(const char *path)
{
	uint8_t head[METAD_LEGACY_MAGIC_LEN];
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	n = read(fd, head, sizeof(head));
	close(fd);
	if (n < 0)
		return -errno;
	return metad_legacy_is(head, (size_t)n);
}

/* Remove @p base with each of @p suffixes ("" for @p base itself);
 * @return 0 or the first negative errno but ENOENT. */
static int remove_all(const char *base, const char *const *suffixes)
{
	char *p;
	int ret = 0;

	for (; *suffixes; suffixes++) {
		p = metad_concat(base, *suffixes);
		if (!p)
			return -ENOMEM;
		if (unlink(p) && errno != ENOENT && !ret)
			ret = -errno;
		free(p);
	}
	return ret;
}

static const char *const sqlite_files[] = { "", "-wal", "-shm", "-journal",
					    NULL };
static const char *const sqlite_logs[] = { "-wal", "-shm", "-journal",
					   NULL };

struct import {
	struct metad_db *db;
	uint64_t count;
};

/* metad_entry_cb: one old entry into the new database. */
static int import_entry(const char *key, size_t klen, const uint8_t *val,
			size_t vlen, void *arg)
{
	struct import *im = arg;
	int ret = metad_db_insert(im->db, key, klen, val, vlen);

	im->count += !ret;
	return ret;
}

/* Build the new database at n->tmp from the @p len bytes at @p buf. */
static int build(const char *path, const struct names *n, const uint8_t *buf,
		 size_t len, uint64_t *count, uint64_t *revision, char *err,
		 size_t errlen)
{
	struct import im = { 0 };
	char why[256];
	int ret;

	ret = remove_all(n->tmp, sqlite_files);
	if (ret) {
		snprintf(err, errlen, "cannot remove %s: %s", n->tmp,
			 strerror(-ret));
		return ret;
	}
	im.db = metad_db_open(n->tmp, err, errlen);
	if (!im.db)
		return -EIO;
	ret = metad_db_begin(im.db);
	if (!ret)
		ret = metad_legacy_parse(buf, len, import_entry, &im, revision,
					 why, sizeof(why));
	if (ret == -EINVAL)
		snprintf(err, errlen, "%s: a persist file of the old format "
			 "that cannot be read: %s. It is left as it was: "
			 "restore it from a backup, or move it away to start "
			 "with an empty store", path, why);
	else if (ret)
		snprintf(err, errlen, "cannot migrate %s into %s: %s", path,
			 n->tmp, strerror(-ret));
	if (ret)
		metad_db_rollback(im.db);
	else if ((ret = metad_db_commit(im.db, *revision)))
		snprintf(err, errlen, "cannot migrate %s: cannot commit %s: "
			 "%s", path, n->tmp, strerror(-ret));
	metad_db_close(im.db);
	*count = im.count;
	if (ret)
		remove_all(n->tmp, sqlite_files);
	return ret;
}

/* Give the old file its second name n->aside, clearing one left by a
 * migration that stopped between link and rename. */
static int keep_old(const char *path, const struct names *n, char *err,
		    size_t errlen)
{
	struct stat old, aside;

	if (stat(path, &old)) {
		snprintf(err, errlen, "cannot stat %s: %s", path,
			 strerror(errno));
		return -errno;
	}
	if (!lstat(n->aside, &aside)) {
		if (aside.st_dev != old.st_dev || aside.st_ino != old.st_ino) {
			snprintf(err, errlen, "cannot migrate %s: %s is in "
				 "the way; move it away and start again",
				 path, n->aside);
			return -EEXIST;
		}
		unlink(n->aside);
	}
	if (link(path, n->aside)) {
		snprintf(err, errlen, "cannot migrate %s: cannot link it to "
			 "%s: %s", path, n->aside, strerror(errno));
		return -errno;
	}
	return 0;
}

static int migrate(const char *path, const struct names *n, char *err,
		   size_t errlen)
{
	uint64_t count = 0, revision = 0;
	uint8_t *buf = NULL;
	bool linked = false;
	size_t len = 0;
	int ret;

	ret = metad_read_file(path, &buf, &len);
	if (ret) {
		snprintf(err, errlen, "cannot read %s: %s", path,
			 strerror(-ret));
		return ret;
	}
	ret = build(path, n, buf, len, &count, &revision, err, errlen);
	free(buf);
	if (ret)
		return ret;
	ret = keep_old(path, n, err, errlen);
	linked = !ret;
	/* logs of no database of ours: SQLite must not replay them */
	if (!ret && (ret = remove_all(path, sqlite_logs)))
		snprintf(err, errlen, "cannot migrate %s: cannot remove its "
			 "-wal, -shm, -journal: %s", path, strerror(-ret));
	if (!ret && rename(n->tmp, path)) {
		ret = -errno;
		snprintf(err, errlen, "cannot migrate %s: cannot rename %s "
			 "over it: %s", path, n->tmp, strerror(errno));
	}
	if (ret) {
		/* as it was: the old file under its one name */
		remove_all(n->tmp, sqlite_files);
		if (linked)
			unlink(n->aside);
		return ret;
	}
	/* the old file stays at n->aside whatever happens now */
	ret = metad_sync_dir(path);
	if (ret) {
		snprintf(err, errlen, "cannot migrate %s: cannot sync its "
			 "folder: %s", path, strerror(-ret));
		return ret;
	}
	fprintf(stderr, "xfer-metad: %s: migrated %" PRIu64 " keys at "
		"revision %" PRIu64 " from the old persist format into SQLite; "
		"the old file is kept as %s\n", path, count, revision,
		n->aside);
	return 0;
}

int metad_migrate(const char *path, char *err, size_t errlen)
{
	struct names n = { 0 };
	int ret = is_legacy(path);

	if (ret <= 0) {
		if (ret)
			snprintf(err, errlen, "cannot read %s: %s", path,
				 strerror(-ret));
		return ret;
	}
	n.tmp = metad_concat(path, ".migrating");
	n.aside = metad_concat(path, ".migrated");
	if (!n.tmp || !n.aside) {
		snprintf(err, errlen, "out of memory");
		ret = -ENOMEM;
	} else {
		ret = migrate(path, &n, err, errlen);
	}
	free(n.tmp);
	free(n.aside);
	return ret;
}
