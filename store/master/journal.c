/*
 * xfer-stored's journal (journal_internal.h) on SQLite: prepared
 * statements run inside one transaction per pass of the master's loop.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "store/master/journal_internal.h"

#define APP_ID 0x58534a31          /* "XSJ1" */
#define REP_BYTES 16               /* u64 sid, u64 offset */
#define SHARD_BYTES 2              /* u8 part, u8 parts */

static const char schema[] =
	"BEGIN;"
	"PRAGMA application_id = 1481853489;"
	"PRAGMA user_version = 3;"
	"CREATE TABLE meta (name TEXT NOT NULL PRIMARY KEY, value);"
	"CREATE TABLE segments (sid INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  id BLOB NOT NULL UNIQUE, client BLOB NOT NULL, name BLOB NOT NULL,"
	"  base INTEGER NOT NULL, size INTEGER NOT NULL);"
	"CREATE TABLE objects (key BLOB NOT NULL PRIMARY KEY,"
	"  len INTEGER NOT NULL, flags INTEGER NOT NULL,"
	"  state INTEGER NOT NULL, writer BLOB NOT NULL,"
	"  replicas BLOB NOT NULL, version INTEGER NOT NULL DEFAULT 0,"
	"  shards BLOB) WITHOUT ROWID;";

/* A journal of user_version 1 gets the objects' versions (0: before). */
static const char upgrade_v1[] =
	"BEGIN;"
	"ALTER TABLE objects ADD COLUMN version INTEGER NOT NULL DEFAULT 0;"
	"PRAGMA user_version = 2;"
	"COMMIT;";

/* ... and of user_version 2 the shards of striped replicas (NULL: every
 * replica whole). */
static const char upgrade_v2[] =
	"BEGIN;"
	"ALTER TABLE objects ADD COLUMN shards BLOB;"
	"PRAGMA user_version = 3;"
	"COMMIT;";

enum { ST_BEGIN, ST_COMMIT, ST_MOUNT, ST_MOUNT_AS, ST_UNMOUNT, ST_PUT,
       ST_COMPLETE, ST_DEL, ST_VERSION, ST_FLUSHED, ST_COUNT };

static const char *const stmt_sql[ST_COUNT] = {
	[ST_BEGIN] = "BEGIN",
	[ST_COMMIT] = "COMMIT",
	[ST_MOUNT] = "INSERT INTO segments (id, client, name, base, size) "
		     "VALUES (?1, ?2, ?3, ?4, ?5)",
	[ST_MOUNT_AS] = "INSERT OR REPLACE INTO segments "
			"(id, client, name, base, size, sid) "
			"VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
	[ST_UNMOUNT] = "DELETE FROM segments WHERE sid = ?1",
	[ST_PUT] = "INSERT OR REPLACE INTO objects "
		   "(key, len, flags, state, writer, replicas, version, "
		   "shards) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
	[ST_COMPLETE] = "UPDATE objects SET state = 1, version = ?2 "
			"WHERE key = ?1",
	[ST_DEL] = "DELETE FROM objects WHERE key = ?1",
	[ST_VERSION] = "INSERT OR REPLACE INTO meta VALUES ('version', ?1)",
	[ST_FLUSHED] = "INSERT OR REPLACE INTO flushed VALUES (?1, ?2)",
};

/* The versions in the slower tier (store/master/flush.c): a table of its
 * own, made in any journal that lacks it, so older journals still load. */
static const char flushed_table[] =
	"CREATE TABLE IF NOT EXISTS flushed (key BLOB NOT NULL PRIMARY KEY,"
	"  version INTEGER NOT NULL) WITHOUT ROWID";

struct journal {
	sqlite3 *db;
	char *path;
	sqlite3_stmt *st[ST_COUNT];
	bool in_txn;
	const struct journal_tap *tap; /* NULL: none */
	void *tap_arg;
	int err;                       /* first failure in the transaction */
	char why[200];
};

static int errno_of(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_OK:
	case SQLITE_DONE:
	case SQLITE_ROW:
		return 0;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_FULL:
		return -ENOSPC;
	default:
		return -EIO;
	}
}

/* Run statement @p i with its bindings, then reset it; the first failure
 * of a transaction is kept. @return 0 or -errno. */
static int step(struct journal *j, int i)
{
	sqlite3_stmt *st = j->st[i];
	int rc = sqlite3_step(st), ret = errno_of(rc == SQLITE_ROW ?
						 SQLITE_DONE : rc);

	if (ret && !j->err) {
		j->err = ret;
		snprintf(j->why, sizeof(j->why), "%s", sqlite3_errmsg(j->db));
	}
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return ret;
}

/* The transaction for a change: begun if none is open. */
static bool begin(struct journal *j)
{
	if (!j->in_txn && !step(j, ST_BEGIN))
		j->in_txn = true;
	return j->in_txn;
}

/* The one value of @p sql into *v (integer) or @p text. @return SQLite's
 * code; SQLITE_NOTFOUND for no row. */
static int one_value(sqlite3 *db, const char *sql, int64_t *v, char *text,
		     size_t textlen)
{
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);

	if (rc)
		return rc;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		if (v)
			*v = sqlite3_column_int64(st, 0);
		if (text)
			snprintf(text, textlen, "%s",
				 sqlite3_column_text(st, 0) ?
				 (const char *)sqlite3_column_text(st, 0) : "");
		rc = SQLITE_OK;
	} else if (rc == SQLITE_DONE) {
		rc = SQLITE_NOTFOUND;
	}
	sqlite3_finalize(st);
	return rc;
}

/* A new file's name must outlive a crash too: fsync its folder. */
static int sync_parent(const char *path)
{
	char *copy = strdup(path);
	int fd, ret = 0;

	if (!copy)
		return -ENOMEM;
	fd = open(dirname(copy), O_RDONLY | O_DIRECTORY);
	if (fd < 0 || fsync(fd))
		ret = -errno;
	if (fd >= 0)
		close(fd);
	free(copy);
	return ret;
}

/*
 * Lock, recognise or create, switch to WAL and FULL, check. @return NULL
 * or why the file is refused (in @p buf or static).
 */
static const char *setup(struct journal *j, const char *cluster_id,
			 char *buf, size_t buflen)
{
	int64_t app = 0, tables = 0, uv = 0;
	char mode[16], cid[128];
	bool fresh;
	int rc;

	rc = sqlite3_exec(j->db, "PRAGMA locking_mode = EXCLUSIVE", NULL,
			  NULL, NULL);
	if (!rc)
		rc = one_value(j->db, "PRAGMA application_id", &app, NULL, 0);
	if (!rc)
		rc = one_value(j->db, "SELECT count(*) FROM sqlite_master",
			       &tables, NULL, 0);
	if (rc)
		goto sqlite_err;
	if ((app || tables) && app != APP_ID)
		return "not an xfer-stored journal";
	fresh = !tables;
	rc = one_value(j->db, "PRAGMA journal_mode = WAL", NULL, mode,
		       sizeof(mode));
	if (!rc && strcmp(mode, "wal"))
		return "cannot switch it to WAL mode";
	if (!rc)
		rc = sqlite3_exec(j->db, "PRAGMA synchronous = FULL;"
				  "BEGIN EXCLUSIVE; COMMIT", NULL, NULL, NULL);
	if (rc)
		goto sqlite_err;
	if (fresh) {
		sqlite3_stmt *st;

		rc = sqlite3_exec(j->db, schema, NULL, NULL, NULL);
		if (!rc)
			rc = sqlite3_prepare_v2(j->db, "INSERT INTO meta "
						"VALUES ('cluster_id', ?1)",
						-1, &st, NULL);
		if (!rc) {
			sqlite3_bind_text(st, 1, cluster_id, -1,
					  SQLITE_STATIC);
			rc = sqlite3_step(st) == SQLITE_DONE ?
			     SQLITE_OK : sqlite3_errcode(j->db);
			sqlite3_finalize(st);
		}
		if (!rc)
			rc = sqlite3_exec(j->db, "COMMIT", NULL, NULL, NULL);
		if (rc)
			goto sqlite_err;
		return sync_parent(j->path) ? "cannot sync its folder" : NULL;
	}
	rc = one_value(j->db, "PRAGMA quick_check", NULL, buf, buflen);
	if (!rc && strcmp(buf, "ok"))
		return "damaged (PRAGMA quick_check failed)";
	if (!rc)
		rc = one_value(j->db, "SELECT value FROM meta WHERE name = "
			       "'cluster_id'", NULL, cid, sizeof(cid));
	if (rc)
		goto sqlite_err;
	if (strcmp(cid, cluster_id)) {
		snprintf(buf, buflen, "written for --cluster_id=%.60s, not "
			 "%.60s", cid, cluster_id);
		return buf;
	}
	rc = one_value(j->db, "PRAGMA user_version", &uv, NULL, 0);
	if (!rc && uv == 1)
		rc = sqlite3_exec(j->db, upgrade_v1, NULL, NULL, NULL);
	if (!rc && (uv == 1 || uv == 2))
		rc = sqlite3_exec(j->db, upgrade_v2, NULL, NULL, NULL);
	else if (!rc && uv != 3)
		return "written by another version of xfer-stored";
	if (rc)
		goto sqlite_err;
	return NULL;

sqlite_err:
	if ((rc & 0xff) == SQLITE_BUSY)
		return "in use by another process (another xfer-stored?)";
	if ((rc & 0xff) == SQLITE_CORRUPT || (rc & 0xff) == SQLITE_NOTADB)
		return "damaged (not a whole SQLite database)";
	snprintf(buf, buflen, "%s", sqlite3_errmsg(j->db));
	return buf;
}

struct journal *journal_open(const char *path, const char *cluster_id,
			     char *err, size_t errlen)
{
	struct journal *j = calloc(1, sizeof(*j));
	const char *why;
	char buf[256];

	snprintf(err, errlen, "%s: out of memory", path);
	if (!j || !(j->path = strdup(path)))
		goto err_free;
	if (sqlite3_open_v2(path, &j->db, SQLITE_OPEN_READWRITE |
			    SQLITE_OPEN_CREATE, NULL)) {
		snprintf(err, errlen, "cannot open %s: %s", path,
			 j->db ? sqlite3_errmsg(j->db) : "out of memory");
		goto err_free;
	}
	sqlite3_extended_result_codes(j->db, 1);
	why = setup(j, cluster_id, buf, sizeof(buf));
	if (why) {
		snprintf(err, errlen, "%s: %s (refusing to start; the file is "
			 "left as it is)", path, why);
		goto err_free;
	}
	if (sqlite3_exec(j->db, flushed_table, NULL, NULL, NULL)) {
		snprintf(err, errlen, "%s: %s", path, sqlite3_errmsg(j->db));
		goto err_free;
	}
	for (int i = 0; i < ST_COUNT; i++)
		if (sqlite3_prepare_v3(j->db, stmt_sql[i], -1,
				       SQLITE_PREPARE_PERSISTENT, &j->st[i],
				       NULL)) {
			snprintf(err, errlen, "%s: %s", path,
				 sqlite3_errmsg(j->db));
			goto err_free;
		}
	return j;

err_free:
	journal_close(j);
	return NULL;
}

void journal_close(struct journal *j)
{
	if (!j)
		return;
	for (int i = 0; i < ST_COUNT; i++)
		sqlite3_finalize(j->st[i]);
	sqlite3_close(j->db);          /* rolls back what is open */
	free(j->path);
	free(j);
}

static uint64_t get_le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++, v >>= 8)
		p[i] = (uint8_t)v;
}

/* Column @p c of @p st, a blob of @p min to @p max bytes, or NULL. */
static const uint8_t *blob(sqlite3_stmt *st, int c, int min, int max,
			   int *len)
{
	if (sqlite3_column_type(st, c) != SQLITE_BLOB)
		return NULL;
	*len = sqlite3_column_bytes(st, c);
	if (*len < min || *len > max)
		return NULL;
	return sqlite3_column_blob(st, c);
}

static int load_segment(sqlite3_stmt *st, const struct journal_load_cb *cb,
			void *arg)
{
	struct journal_segment g;
	int len = 0, n;

	g.sid = sqlite3_column_int64(st, 0);
	g.id = blob(st, 1, STORE_ID_LEN, STORE_ID_LEN, &n);
	g.client = blob(st, 2, STORE_ID_LEN, STORE_ID_LEN, &n);
	g.name = (const char *)blob(st, 3, 1, STORE_NAME_MAX, &len);
	g.name_len = (uint16_t)len;
	g.base = (uint64_t)sqlite3_column_int64(st, 4);
	g.size = (uint64_t)sqlite3_column_int64(st, 5);
	if (g.sid <= 0 || !g.id || !g.client || !g.name || !g.size ||
	    g.base > UINT64_MAX - g.size)
		return -EINVAL;
	return cb->segment(arg, &g);
}

static int load_object(sqlite3_stmt *st, const struct journal_load_cb *cb,
		       void *arg)
{
	struct journal_object o;
	const uint8_t *reps, *shards = NULL;
	int64_t state, flags;
	int len = 0, n, slen = 0;

	o.key = (const char *)blob(st, 0, 1, STORE_KEY_MAX, &len);
	o.klen = (uint16_t)len;
	o.len = (uint64_t)sqlite3_column_int64(st, 1);
	flags = sqlite3_column_int64(st, 2);
	state = sqlite3_column_int64(st, 3);
	o.writer = blob(st, 4, STORE_ID_LEN, STORE_ID_LEN, &n);
	o.version = (uint64_t)sqlite3_column_int64(st, 6);
	reps = blob(st, 5, REP_BYTES, REP_BYTES * STORE_REPLICA_MAX, &len);
	if (!o.key || !o.len || flags < 0 || flags > 255 || state < 0 ||
	    state > 1 || !o.writer || !reps || len % REP_BYTES)
		return -EINVAL;
	o.flags = (uint8_t)flags;
	o.state = (uint8_t)state;
	o.nrep = (uint8_t)(len / REP_BYTES);
	if (sqlite3_column_type(st, 7) != SQLITE_NULL) {
		shards = blob(st, 7, SHARD_BYTES * o.nrep,
			      SHARD_BYTES * o.nrep, &slen);
		if (!shards)
			return -EINVAL;
	}
	for (unsigned i = 0; i < o.nrep; i++) {
		o.rep[i].sid = (int64_t)get_le64(reps + i * REP_BYTES);
		o.rep[i].off = get_le64(reps + i * REP_BYTES + 8);
		o.rep[i].part = shards ? shards[i * SHARD_BYTES] : 0;
		o.rep[i].parts = shards ? shards[i * SHARD_BYTES + 1] : 1;
	}
	return cb->object(arg, &o);
}

int journal_load(struct journal *j, const struct journal_load_cb *cb,
		 void *arg, char *err, size_t errlen)
{
	static const char *const sql[2] = {
		"SELECT sid, id, client, name, base, size FROM segments "
		"ORDER BY sid",
		"SELECT key, len, flags, state, writer, replicas, version, "
		"shards FROM objects",
	};
	sqlite3_stmt *st;
	int rc, ret = 0;

	for (int t = 0; t < 2 && !ret; t++) {
		rc = sqlite3_prepare_v2(j->db, sql[t], -1, &st, NULL);
		while (!rc && !ret && (rc = sqlite3_step(st)) == SQLITE_ROW) {
			ret = t ? load_object(st, cb, arg) :
				  load_segment(st, cb, arg);
			rc = SQLITE_OK;
		}
		if (!ret && rc != SQLITE_DONE) {
			snprintf(err, errlen, "cannot read %s: %s", j->path,
				 sqlite3_errmsg(j->db));
			ret = -EIO;
		} else if (ret == -EINVAL) {
			snprintf(err, errlen, "%s: a %s row that is not valid "
				 "(refusing to start rather than lose objects)",
				 j->path, t ? "objects" : "segments");
		} else if (ret) {
			snprintf(err, errlen, "cannot load %s: %s", j->path,
				 strerror(-ret));
		}
		sqlite3_finalize(st);
	}
	return ret;
}

int64_t journal_mount(struct journal *j, const struct journal_segment *g)
{
	int i = g->sid ? ST_MOUNT_AS : ST_MOUNT;
	sqlite3_stmt *st = j->st[i];
	struct journal_segment tg = *g;

	if (!begin(j))
		return 0;
	sqlite3_bind_blob(st, 1, g->id, STORE_ID_LEN, SQLITE_STATIC);
	sqlite3_bind_blob(st, 2, g->client, STORE_ID_LEN, SQLITE_STATIC);
	sqlite3_bind_blob(st, 3, g->name, g->name_len, SQLITE_STATIC);
	sqlite3_bind_int64(st, 4, (sqlite3_int64)g->base);
	sqlite3_bind_int64(st, 5, (sqlite3_int64)g->size);
	if (g->sid)
		sqlite3_bind_int64(st, 6, g->sid);
	if (step(j, i))
		return 0;
	tg.sid = g->sid ? g->sid : sqlite3_last_insert_rowid(j->db);
	if (j->tap)
		j->tap->mount(j->tap_arg, &tg);
	return tg.sid;
}

void journal_unmount(struct journal *j, int64_t sid)
{
	if (!begin(j))
		return;
	sqlite3_bind_int64(j->st[ST_UNMOUNT], 1, sid);
	if (!step(j, ST_UNMOUNT) && j->tap)
		j->tap->unmount(j->tap_arg, sid);
}

void journal_put(struct journal *j, const struct journal_object *o)
{
	sqlite3_stmt *st = j->st[ST_PUT];
	uint8_t reps[REP_BYTES * STORE_REPLICA_MAX];
	uint8_t shards[SHARD_BYTES * STORE_REPLICA_MAX];
	bool striped = false;

	if (!begin(j))
		return;
	for (unsigned i = 0; i < o->nrep; i++) {
		put_le64(reps + i * REP_BYTES, (uint64_t)o->rep[i].sid);
		put_le64(reps + i * REP_BYTES + 8, o->rep[i].off);
		shards[i * SHARD_BYTES] = o->rep[i].part;
		shards[i * SHARD_BYTES + 1] = o->rep[i].parts;
		striped |= o->rep[i].parts > 1;
	}
	sqlite3_bind_blob(st, 1, o->key, o->klen, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)o->len);
	sqlite3_bind_int(st, 3, o->flags);
	sqlite3_bind_int(st, 4, o->state);
	sqlite3_bind_blob(st, 5, o->writer, STORE_ID_LEN, SQLITE_STATIC);
	sqlite3_bind_blob(st, 6, reps, o->nrep * REP_BYTES, SQLITE_STATIC);
	sqlite3_bind_int64(st, 7, (sqlite3_int64)o->version);
	if (striped)
		sqlite3_bind_blob(st, 8, shards, o->nrep * SHARD_BYTES,
				  SQLITE_STATIC);
	else
		sqlite3_bind_null(st, 8);
	if (!step(j, ST_PUT) && j->tap)
		j->tap->put(j->tap_arg, o);
}

static void by_key(struct journal *j, int i, const char *key, uint16_t klen)
{
	if (!begin(j))
		return;
	sqlite3_bind_blob(j->st[i], 1, key, klen, SQLITE_STATIC);
	step(j, i);
}

void journal_complete(struct journal *j, const char *key, uint16_t klen,
		      uint64_t version)
{
	if (!begin(j))
		return;
	sqlite3_bind_blob(j->st[ST_COMPLETE], 1, key, klen, SQLITE_STATIC);
	sqlite3_bind_int64(j->st[ST_COMPLETE], 2, (sqlite3_int64)version);
	step(j, ST_COMPLETE);
	sqlite3_bind_int64(j->st[ST_VERSION], 1, (sqlite3_int64)version);
	if (!step(j, ST_VERSION) && j->tap)
		j->tap->complete(j->tap_arg, key, klen, version);
}

void journal_set_version(struct journal *j, uint64_t version)
{
	if (!begin(j))
		return;
	sqlite3_bind_int64(j->st[ST_VERSION], 1, (sqlite3_int64)version);
	step(j, ST_VERSION);
}

int journal_version(struct journal *j, uint64_t *version)
{
	int64_t v = 0;
	int rc = one_value(j->db, "SELECT max(coalesce((SELECT value FROM "
			   "meta WHERE name = 'version'), 0), coalesce((SELECT "
			   "max(version) FROM objects), 0))", &v, NULL, 0);

	*version = (uint64_t)v;
	return rc ? -EIO : 0;
}

void journal_del(struct journal *j, const char *key, uint16_t klen)
{
	by_key(j, ST_DEL, key, klen);
	if (!j->err && j->tap)
		j->tap->del(j->tap_arg, key, klen);
}

bool journal_dirty(const struct journal *j)
{
	return j->in_txn || j->err;
}

int journal_commit(struct journal *j)
{
	int ret = j->err;

	if (!j->in_txn && !ret)
		return 0;
	if (!ret)
		ret = step(j, ST_COMMIT);
	if (ret) {
		fprintf(stderr, "xfer-stored: cannot save to %s: %s (%s)\n",
			j->path, strerror(-ret), j->why);
		if (!sqlite3_get_autocommit(j->db))
			sqlite3_exec(j->db, "ROLLBACK", NULL, NULL, NULL);
	}
	j->in_txn = false;
	j->err = 0;
	if (!ret && j->tap)
		j->tap->committed(j->tap_arg);
	return ret;
}

void journal_flushed(struct journal *j, const char *key, uint16_t klen,
		     uint64_t version)
{
	sqlite3_stmt *st = j->st[ST_FLUSHED];

	if (!begin(j))
		return;
	sqlite3_bind_blob(st, 1, key, klen, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, (int64_t)version);
	if (!step(j, ST_FLUSHED) && j->tap)
		j->tap->flushed(j->tap_arg, key, klen, version);
}

int journal_load_flushed(struct journal *j,
			 int (*cb)(void *arg, const char *key, uint16_t klen,
				   uint64_t version),
			 void *arg)
{
	sqlite3_stmt *st;
	int rc, ret = 0;

	rc = sqlite3_prepare_v2(j->db, "SELECT key, version FROM flushed", -1,
				&st, NULL);
	while (!rc && !ret && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		int klen = sqlite3_column_bytes(st, 0);
		const char *key = sqlite3_column_blob(st, 0);

		rc = SQLITE_OK;
		if (!key || klen < 1 || klen > STORE_KEY_MAX)
			ret = -EINVAL;
		else
			ret = cb(arg, key, (uint16_t)klen,
				 (uint64_t)sqlite3_column_int64(st, 1));
	}
	if (!ret && rc != SQLITE_DONE)
		ret = -EIO;
	sqlite3_finalize(st);
	return ret;
}

void journal_rollback(struct journal *j)
{
	if (j->in_txn && !sqlite3_get_autocommit(j->db))
		sqlite3_exec(j->db, "ROLLBACK", NULL, NULL, NULL);
	j->in_txn = false;
	j->err = 0;
}

void journal_reset(struct journal *j)
{
	if (begin(j) && sqlite3_exec(j->db, "DELETE FROM segments;"
				     "DELETE FROM objects;"
				     "DELETE FROM flushed", NULL, NULL,
				     NULL) && !j->err) {
		j->err = -EIO;
		snprintf(j->why, sizeof(j->why), "%s", sqlite3_errmsg(j->db));
	}
}

void journal_set_tap(struct journal *j, const struct journal_tap *tap,
		     void *arg)
{
	j->tap = tap;
	j->tap_arg = arg;
}
