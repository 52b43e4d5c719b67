/*
 * xfer-metad's store: keys and values in a hash table, a revision counter
 * that counts every change, the last METAD_HISTORY changes for watchers,
 * limits on what it holds, and (with a database, db.c) every change on
 * disk before it is answered. Single-threaded: everything runs on the
 * server's event_base.
 */
#ifndef XFER_METAD_STORE_INTERNAL_H
#define XFER_METAD_STORE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct metad_db;

#define METAD_HISTORY 4096u            /* changes kept for watchers */

/* What a store may hold: the defaults of xfer-metad's flags. */
#define METAD_VALUE_BYTES_DEFAULT (16ull << 20)
#define METAD_VALUE_BYTES_MAX (512ull << 20)   /* below SQLite's 1e9 */
#define METAD_KEYS_DEFAULT 1000000ull
#define METAD_BYTES_DEFAULT (1ull << 30)

struct metad_limits {
	uint64_t value_bytes;          /* most bytes in one value */
	uint64_t keys;                 /* most keys */
	uint64_t bytes;                /* most bytes of keys and values */
};

struct metad_entry {
	struct metad_entry *next;      /* bucket chain */
	uint64_t hash;
	char *key;                     /* klen bytes + NUL, none inside */
	size_t klen;
	uint8_t *val;                  /* any bytes; malloc'd even when empty */
	size_t vlen;
};

/** One change: revision @c rev put or deleted @c key. */
struct metad_event {
	uint64_t rev;
	bool deleted;
	char *key;
};

struct metad_store {
	struct metad_entry **buckets;
	size_t nbuckets;               /* a power of two */
	size_t count;
	uint64_t bytes;                /* of every key and value */
	struct metad_limits limits;
	uint64_t revision;             /* changes so far, persisted */
	/* revision n sits at history[n % METAD_HISTORY]; the last nhistory
	 * revisions are there, older ones were overwritten or predate the
	 * start of this process */
	struct metad_event *history;
	size_t nhistory;
	struct metad_db *db;           /* the file, or NULL */
};

/**
 * Open a store that keeps to @p limits; with @p persist, its database
 * (db.c): an old persist file there is migrated first (migrate.c), a
 * missing file is made at once (so that a bad path fails here and not
 * at the first change), and what the file holds is loaded, even past
 * @p limits (which then only stop it growing).
 * @return the store, or NULL with a message naming the file in @p err
 *         (@p errlen bytes).
 */
struct metad_store *metad_store_open(const char *persist,
				     const struct metad_limits *limits,
				     char *err, size_t errlen);
void metad_store_free(struct metad_store *s);

/**
 * Would setting @p key to @p vlen bytes keep the store within its
 * limits?
 * @return 0; -EFBIG (the value is over limits.value_bytes) or -EDQUOT
 *         (the store would be over limits.keys or limits.bytes), with a
 *         one-line reason in @p why (@p whylen bytes).
 */
int metad_store_fits(const struct metad_store *s, const char *key,
		     size_t vlen, char *why, size_t whylen);

/** The entry for @p key, or NULL. */
const struct metad_entry *metad_store_get(const struct metad_store *s,
					  const char *key);

/**
 * Set @p key to the @p vlen bytes at @p val, which the store takes over
 * (and frees on failure). The change is on disk when this returns 0.
 * @return 0; -EFBIG or -EDQUOT (over a limit: metad_store_fits());
 *         -EOVERFLOW (the revision is at INT64_MAX, the database's
 *         most); -ENOMEM; or the negative errno of a failed save. On
 *         failure the store, in memory and on disk, is as it was.
 */
int metad_store_put(struct metad_store *s, const char *key, uint8_t *val,
		    size_t vlen);

/**
 * Delete @p key; on disk when this returns.
 * @return 1 if it was there, 0 if absent (no change, no revision),
 * -EOVERFLOW (as metad_store_put()), -ENOMEM, or the negative errno of
 * a failed save (nothing deleted).
 */
int metad_store_del(struct metad_store *s, const char *key);

/** True if every change after revision @p since is still in the history
 *  (false too for a @p since beyond the current revision). */
bool metad_store_history(const struct metad_store *s, uint64_t since);

/** The change that made revision @p rev; only for revisions that
 *  metad_store_history(s, rev - 1) covers. */
const struct metad_event *metad_store_event(const struct metad_store *s,
					    uint64_t rev);

#endif
