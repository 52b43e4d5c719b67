/*
 * xfer-metad's database: SQLite in WAL mode with synchronous=FULL, so a
 * commit appends the pages it changed to the log and fsyncs it: a change
 * costs its own size (a few pages for a small value, the value itself
 * for a large one), not the store's, and is durable before the answer.
 * SQLite folds the log back into the file every 1000 pages (its
 * wal_autocheckpoint), a cost spread over the changes that made them.
 *
 * Tables (the file's application_id is "XFMD", user_version 1):
 *   kv    (key BLOB PRIMARY KEY, value BLOB)   every key and its value
 *   meta  (name TEXT PRIMARY KEY, value INT)   'revision': changes so far
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sqlite3.h>

#include "metadata/metad/db_internal.h"
#include "metadata/metad/file_internal.h"

#define APP_ID 1481002308           /* 0x58464d44, "XFMD" */
#define SCHEMA_VERSION 1
#define STR_(x) #x
#define STR(x) STR_(x)

static const char schema[] =
	"BEGIN;"
	"PRAGMA application_id = " STR(APP_ID) ";"
	"PRAGMA user_version = " STR(SCHEMA_VERSION) ";"
	"CREATE TABLE kv (key BLOB NOT NULL PRIMARY KEY,"
	"                 value BLOB NOT NULL);"
	"CREATE TABLE meta (name TEXT NOT NULL PRIMARY KEY,"
	"                   value INTEGER NOT NULL);"
	"INSERT INTO meta VALUES ('revision', 0);"
	"COMMIT;";

struct metad_db {
	sqlite3 *sql;
	char *path;
	sqlite3_stmt *begin, *commit, *upsert, *insert, *del, *set_rev;
	char why[256];                 /* SQLite's word on the last failure */
};

/*
 * A negative errno for SQLite's @p rc: -ENOSPC for a full disk, -EIO for
 * any other failure to read or write (the system's errno goes into the
 * message, db->why), -EEXIST for a key already there.
 */
static int to_errno(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_OK:
	case SQLITE_ROW:
	case SQLITE_DONE:
		return 0;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_CONSTRAINT:
		return -EEXIST;
	default:
		return -EIO;
	}
}

/* Step @p st to its end, then make it ready again. @return 0 or -errno. */
static int run(struct metad_db *db, sqlite3_stmt *st)
{
	int rc;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		;
	if (rc != SQLITE_DONE)
		snprintf(db->why, sizeof(db->why), "%s%s%s",
			 sqlite3_errmsg(db->sql),
			 sqlite3_system_errno(db->sql) ? ": " : "",
			 sqlite3_system_errno(db->sql) ?
			 strerror(sqlite3_system_errno(db->sql)) : "");
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return to_errno(rc);
}

/* The one integer that @p query answers into *v. @return SQLite's code. */
static int query_int(sqlite3 *sql, const char *query, int64_t *v)
{
	sqlite3_stmt *st;
	int rc;

	rc = sqlite3_prepare_v2(sql, query, -1, &st, NULL);
	if (rc)
		return rc;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*v = sqlite3_column_int64(st, 0);
		rc = SQLITE_OK;
	} else if (rc == SQLITE_DONE) {
		rc = SQLITE_NOTFOUND;
	}
	sqlite3_finalize(st);
	return rc;
}

/* The first row of @p query, a text, into @p out. @return SQLite's code. */
static int query_text(sqlite3 *sql, const char *query, char *out,
		      size_t outlen)
{
	const unsigned char *text;
	sqlite3_stmt *st;
	int rc;

	rc = sqlite3_prepare_v2(sql, query, -1, &st, NULL);
	if (rc)
		return rc;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		text = sqlite3_column_text(st, 0);
		snprintf(out, outlen, "%s", text ? (const char *)text : "");
		rc = SQLITE_OK;
	}
	sqlite3_finalize(st);
	return rc;
}

/* Bind @p vlen bytes at @p val as a blob (never NULL, even when empty). */
static int bind_blob(sqlite3_stmt *st, int i, const void *val, size_t vlen)
{
	if (!vlen)
		return sqlite3_bind_zeroblob(st, i, 0);
	return sqlite3_bind_blob64(st, i, val, vlen, SQLITE_STATIC);
}

/* SQLite's word on the failed @p rc, "damaged" first when it is so. */
static const char *why_rc(sqlite3 *sql, int rc)
{
	if ((rc & 0xff) == SQLITE_CORRUPT)
		return "damaged (database disk image is malformed)";
	if ((rc & 0xff) == SQLITE_BUSY)
		return "in use by another process (another xfer-metad?)";
	return sqlite3_errmsg(sql);
}

/*
 * Set the file up on the first open, check it on the later ones. Only
 * reads until it knows the file is xfer-metad's or new, so that a
 * foreign file is left as it was.
 * @return NULL, or the reason the file is refused.
 */
static const char *setup(struct metad_db *db, bool *made)
{
	char mode[16];
	int64_t app_id, version, tables;
	sqlite3 *sql = db->sql;
	int rc;

	/* before the first read: then SQLite keeps its log index in
	 * memory (no -shm file), and the lock, once taken, for good */
	rc = sqlite3_exec(sql, "PRAGMA locking_mode = EXCLUSIVE", NULL, NULL,
			  NULL);
	if (!rc)
		rc = query_int(sql, "PRAGMA application_id", &app_id);
	if (!rc)
		rc = query_int(sql, "SELECT count(*) FROM sqlite_master",
			       &tables);
	if (rc)
		return why_rc(sql, rc);
	if ((tables || app_id) && app_id != APP_ID)
		return "an SQLite file that is not an xfer-metad store";
	*made = !tables;

	rc = query_text(sql, "PRAGMA journal_mode = WAL", mode, sizeof(mode));
	if (!rc && strcmp(mode, "wal"))
		return "cannot switch it to WAL mode";
	if (!rc)
		rc = sqlite3_exec(sql, "PRAGMA synchronous = FULL", NULL, NULL,
				  NULL);
	/* take the write lock now, not at the first change */
	if (!rc)
		rc = sqlite3_exec(sql, "BEGIN EXCLUSIVE; COMMIT", NULL, NULL,
				  NULL);
	if (!rc && *made)
		rc = sqlite3_exec(sql, schema, NULL, NULL, NULL);
	if (rc)
		return why_rc(sql, rc);
	if (*made)
		return NULL;

	if ((rc = query_int(sql, "PRAGMA user_version", &version)))
		return why_rc(sql, rc);
	if (version != SCHEMA_VERSION)
		return "unknown schema version (made by a newer xfer-metad?)";
	return NULL;
}

/* PRAGMA quick_check: @return NULL if whole, else its first complaint,
 * on one line, in @p buf. */
static const char *check(sqlite3 *sql, char *buf, size_t buflen)
{
	static const char damaged[] = "damaged (PRAGMA quick_check: ";
	size_t n = sizeof(damaged) - 1;
	int rc;

	if (buflen < n + 16)
		return "damaged";
	rc = query_text(sql, "PRAGMA quick_check", buf + n, buflen - n - 1);
	if (rc)
		return why_rc(sql, rc);
	if (!strcmp(buf + n, "ok"))
		return NULL;
	memcpy(buf, damaged, n);
	for (char *p = buf; *p; p++)
		if (*p == '\n')
			*p = ' ';
	strcat(buf, ")");
	return buf;
}

static int prepare(struct metad_db *db)
{
	static const struct {
		size_t off;
		const char *sql;
	} stmts[] = {
		{ offsetof(struct metad_db, begin), "BEGIN IMMEDIATE" },
		{ offsetof(struct metad_db, commit), "COMMIT" },
		{ offsetof(struct metad_db, upsert),
		  "INSERT INTO kv (key, value) VALUES (?1, ?2) "
		  "ON CONFLICT (key) DO UPDATE SET value = excluded.value" },
		{ offsetof(struct metad_db, insert),
		  "INSERT INTO kv (key, value) VALUES (?1, ?2)" },
		{ offsetof(struct metad_db, del),
		  "DELETE FROM kv WHERE key = ?1" },
		{ offsetof(struct metad_db, set_rev),
		  "UPDATE meta SET value = ?1 WHERE name = 'revision'" },
	};
	sqlite3_stmt **st;
	int rc;

	for (size_t i = 0; i < sizeof(stmts) / sizeof(stmts[0]); i++) {
		st = (sqlite3_stmt **)((char *)db + stmts[i].off);
		rc = sqlite3_prepare_v3(db->sql, stmts[i].sql, -1,
					SQLITE_PREPARE_PERSISTENT, st, NULL);
		if (rc)
			return rc;
	}
	return SQLITE_OK;
}

struct metad_db *metad_db_open(const char *path, char *err, size_t errlen)
{
	struct metad_db *db = calloc(1, sizeof(*db));
	const char *why;
	char buf[256];
	bool made = false;
	int rc, ret;

	snprintf(err, errlen, "out of memory");
	if (!db || !(db->path = strdup(path)))
		goto err_free;
	rc = sqlite3_open_v2(path, &db->sql, SQLITE_OPEN_READWRITE |
			     SQLITE_OPEN_CREATE, NULL);
	if (rc) {
		snprintf(err, errlen, "cannot open %s: %s", path,
			 db->sql ? sqlite3_errmsg(db->sql) :
			 sqlite3_errstr(rc));
		goto err_free;
	}
	sqlite3_extended_result_codes(db->sql, 1);
	why = setup(db, &made);
	if (!why && !made)
		why = check(db->sql, buf, sizeof(buf));
	if (why) {
		snprintf(err, errlen, "%s: %s (refusing to start; the file is "
			 "left as it is)", path, why);
		goto err_free;
	}
	/* the new file's name must outlive a crash as well as its log */
	if (made && (ret = metad_sync_dir(path))) {
		snprintf(err, errlen, "cannot create %s: %s", path,
			 strerror(-ret));
		goto err_free;
	}
	if (prepare(db)) {
		snprintf(err, errlen, "%s: %s", path, sqlite3_errmsg(db->sql));
		goto err_free;
	}
	return db;

err_free:
	metad_db_close(db);
	return NULL;
}

void metad_db_close(struct metad_db *db)
{
	if (!db)
		return;
	sqlite3_finalize(db->begin);
	sqlite3_finalize(db->commit);
	sqlite3_finalize(db->upsert);
	sqlite3_finalize(db->insert);
	sqlite3_finalize(db->del);
	sqlite3_finalize(db->set_rev);
	sqlite3_close(db->sql);
	free(db->path);
	free(db);
}

int metad_db_load(struct metad_db *db, metad_entry_cb cb, void *arg,
		  uint64_t *revision, char *err, size_t errlen)
{
	static const uint8_t none[1];
	const uint8_t *key, *val;
	sqlite3_stmt *st = NULL;
	int64_t rev, count = 0;
	const char *why = NULL;
	int rc, klen, vlen, ret = 0;

	rc = sqlite3_prepare_v2(db->sql, "SELECT key, value FROM kv", -1,
				&st, NULL);
	while (!rc && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		key = sqlite3_column_blob(st, 0);
		klen = sqlite3_column_bytes(st, 0);
		val = sqlite3_column_blob(st, 1);
		vlen = sqlite3_column_bytes(st, 1);
		if (sqlite3_column_type(st, 0) != SQLITE_BLOB ||
		    sqlite3_column_type(st, 1) != SQLITE_BLOB || !key ||
		    klen <= 0 || metad_key_check((const char *)key,
						 (size_t)klen)) {
			why = "a row with a key or value that is not valid";
			break;
		}
		ret = cb((const char *)key, (size_t)klen, val ? val : none,
			 (size_t)vlen, arg);
		if (ret)
			break;
		count++;
		rc = SQLITE_OK;
	}
	if (!why && !ret && rc != SQLITE_DONE)
		why = sqlite3_errmsg(db->sql);
	if (!why && !ret) {
		if (query_int(db->sql, "SELECT value FROM meta WHERE "
			      "name = 'revision'", &rev))
			why = sqlite3_errmsg(db->sql);
		else if (rev < count)
			why = "more keys than changes";
	}
	if (why) {
		snprintf(err, errlen, "%s: %s (refusing to start rather than "
			 "lose data)", db->path, why);
		ret = -EINVAL;
	} else if (ret) {
		snprintf(err, errlen, "cannot load %s: %s", db->path,
			 strerror(-ret));
	} else {
		*revision = (uint64_t)rev;
	}
	sqlite3_finalize(st);
	return ret;
}

int metad_db_begin(struct metad_db *db)
{
	return run(db, db->begin);
}

int metad_db_insert(struct metad_db *db, const char *key, size_t klen,
		    const uint8_t *val, size_t vlen)
{
	sqlite3_bind_blob64(db->insert, 1, key, klen, SQLITE_STATIC);
	bind_blob(db->insert, 2, val, vlen);
	return run(db, db->insert);
}

int metad_db_commit(struct metad_db *db, uint64_t revision)
{
	int ret;

	sqlite3_bind_int64(db->set_rev, 1, (sqlite3_int64)revision);
	ret = run(db, db->set_rev);
	if (!ret)
		ret = run(db, db->commit);
	if (ret)
		metad_db_rollback(db);
	return ret;
}

void metad_db_rollback(struct metad_db *db)
{
	/* an I/O error may have ended the transaction already */
	if (!sqlite3_get_autocommit(db->sql))
		sqlite3_exec(db->sql, "ROLLBACK", NULL, NULL, NULL);
}

/* One change, @p st with key and maybe value bound, as a transaction. */
static int change(struct metad_db *db, sqlite3_stmt *st, uint64_t revision)
{
	int ret = metad_db_begin(db);

	if (ret)
		sqlite3_clear_bindings(st);
	else if ((ret = run(db, st)))
		metad_db_rollback(db);
	else
		ret = metad_db_commit(db, revision);
	if (ret)
		fprintf(stderr, "xfer-metad: cannot save to %s: %s (%s)\n",
			db->path, strerror(-ret), db->why);
	return ret;
}

int metad_db_put(struct metad_db *db, const char *key, size_t klen,
		 const uint8_t *val, size_t vlen, uint64_t revision)
{
	sqlite3_bind_blob64(db->upsert, 1, key, klen, SQLITE_STATIC);
	bind_blob(db->upsert, 2, val, vlen);
	return change(db, db->upsert, revision);
}

int metad_db_del(struct metad_db *db, const char *key, size_t klen,
		 uint64_t revision)
{
	sqlite3_bind_blob64(db->del, 1, key, klen, SQLITE_STATIC);
	return change(db, db->del, revision);
}
