/*
 * xfer-stored's journal (--journal=PATH): what the master committed, in
 * an SQLite file in WAL mode with synchronous=FULL, the discipline of
 * xfer-metad's database: a commit appends the pages it changed to the log
 * and fsyncs it. Changes open a transaction at the first of them;
 * journal_commit() ends it, so every change the event loop makes in one
 * pass costs one fsync together. The journal knows nothing of the
 * state: loading hands each row back through callbacks.
 *
 * Tables (application_id "XSJ1", user_version 3; a file of version 1
 * gets objects.version, 0 in its rows, and one of 1 or 2 objects.shards,
 * NULL, when opened):
 *   meta     (name TEXT PRIMARY KEY, value)  'cluster_id': the cluster's;
 *                                            'version': the last put's
 *   segments (sid INTEGER PRIMARY KEY AUTOINCREMENT, id, client, name,
 *             base, size)                    mounted segments; a sid is
 *                                            never used twice
 *   objects  (key PRIMARY KEY, len, flags, state, writer, replicas,
 *             version, shards)
 *            replicas: per buffer u64 sid, u64 offset (little-endian);
 *            a sid with no segment row is a buffer that went with its
 *            segment; shards: NULL (every replica whole), or per buffer
 *            u8 part, u8 parts (a striped replica's shard, stripe.c)
 *
 * One thread (the master's); the file is locked for the handle's life
 * (locking_mode=EXCLUSIVE): a second master finds it busy.
 */
#ifndef XFER_STORED_JOURNAL_INTERNAL_H
#define XFER_STORED_JOURNAL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/proto_internal.h"

struct journal;

struct journal_segment {
	int64_t sid;
	const uint8_t *id, *client;    /* STORE_ID_LEN bytes each */
	const char *name;
	uint16_t name_len;
	uint64_t base, size;
};

struct journal_replica {
	int64_t sid;
	uint64_t off;                  /* in the segment */
	uint8_t part, parts;           /* a shard's (stripe.c); 0, 1 whole */
};

struct journal_object {
	const char *key;
	uint16_t klen;
	uint8_t flags, state;          /* state: 0 a put in progress, 1 done */
	uint8_t nrep;
	uint64_t len;
	uint64_t version;              /* 0 until its put ends */
	const uint8_t *writer;         /* STORE_ID_LEN bytes */
	struct journal_replica rep[STORE_REPLICA_MAX];
};

/* What journal_load() hands back; pointers valid during the call. A
 * callback's negative errno stops the load. */
struct journal_load_cb {
	int (*segment)(void *arg, const struct journal_segment *g);
	int (*object)(void *arg, const struct journal_object *o);
};

/**
 * Open the journal at @p path, creating it (and its tables, recording
 * @p cluster_id) if missing, and check it: an SQLite file of
 * xfer-stored's journal, whole (PRAGMA quick_check), not in use, written
 * for @p cluster_id.
 * @return the handle, or NULL with a message naming @p path in @p err
 *         (@p errlen bytes); a file that is refused is left as it was.
 */
struct journal *journal_open(const char *path, const char *cluster_id,
			     char *err, size_t errlen);

/** Close @p j (NULL is fine); a transaction still open is rolled back. */
void journal_close(struct journal *j);

/**
 * Hand every segment row, then every object row, to @p cb.
 * @return 0; -EINVAL for a row that is not valid (a key of 0 or more than
 *         STORE_KEY_MAX bytes, a length of 0, a state or replica list
 *         that is not one, ...; a message in @p err); the errno a
 *         callback returned; -EIO for a read that failed (a message).
 */
int journal_load(struct journal *j, const struct journal_load_cb *cb,
		 void *arg, char *err, size_t errlen);

/*
 * Changes, in the open transaction (begun here if none is). They return
 * nothing: the first failure (-ENOMEM, -EIO, -ENOSPC) is kept and
 * journal_commit() answers it.
 */

/** Record segment @p g: under a new sid, or (a standby replaying its
 *  leader's journal, store/master/stream.c) under g->sid if not 0,
 *  replacing a row of that sid or id. @return its sid, or 0 if the insert
 *  failed. */
int64_t journal_mount(struct journal *j, const struct journal_segment *g);
void journal_unmount(struct journal *j, int64_t sid);
/** Record object @p o, replacing any row of its key. */
void journal_put(struct journal *j, const struct journal_object *o);
/** Mark the put of @p key done, as @p version, which is recorded as the
 *  last version given too. */
void journal_complete(struct journal *j, const char *key, uint16_t klen,
		      uint64_t version);

/** The last version given (meta 'version', or the largest of an object
 *  if larger) into *@p version. @return 0, -EIO. */
int journal_version(struct journal *j, uint64_t *version);
void journal_del(struct journal *j, const char *key, uint16_t klen);

/** Record that the slower tier holds @p version of @p key (replacing
 *  what was recorded). */
void journal_flushed(struct journal *j, const char *key, uint16_t klen,
		     uint64_t version);

/** Hand every row of the flushed table to @p cb (pointers valid during
 *  the call). @return 0; -EINVAL (a key of 0 or over STORE_KEY_MAX
 *  bytes); -EIO (a read failed); or the callback's negative errno. */
int journal_load_flushed(struct journal *j,
			 int (*cb)(void *arg, const char *key, uint16_t klen,
				   uint64_t version),
			 void *arg);

/** Record @p version as the last given (a standby copying its leader's
 *  journal, whose objects may not hold the last). */
void journal_set_version(struct journal *j, uint64_t version);

/** Empty the segments, objects and flushed versions (a standby about to
 *  load its leader's whole journal). */
void journal_reset(struct journal *j);

/** Drop the open transaction's changes (none: nothing to do). */
void journal_rollback(struct journal *j);

/* What journal_set_tap() hears: each change once made in the open
 * transaction (mount: with its sid), and each commit once durable. */
struct journal_tap {
	void (*mount)(void *arg, const struct journal_segment *g);
	void (*unmount)(void *arg, int64_t sid);
	void (*put)(void *arg, const struct journal_object *o);
	void (*complete)(void *arg, const char *key, uint16_t klen,
			 uint64_t version);
	void (*flushed)(void *arg, const char *key, uint16_t klen,
			uint64_t version);
	void (*del)(void *arg, const char *key, uint16_t klen);
	void (*committed)(void *arg);
};

/** Tell @p tap (kept; NULL: none) of every change and commit from now on
 *  (the leader streaming its journal to standbys, stream.c). */
void journal_set_tap(struct journal *j, const struct journal_tap *tap,
		     void *arg);

/** Is a transaction open (changes not yet durable)? */
bool journal_dirty(const struct journal *j);

/**
 * End the open transaction (nothing to do without one): durable on
 * return 0.
 * @return 0, or the negative errno of the first change or of the commit
 *         that failed (-EIO, -ENOSPC, -ENOMEM), told on stderr; the
 *         transaction is then rolled back.
 */
int journal_commit(struct journal *j);

#endif
