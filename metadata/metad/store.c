/*
 * xfer-metad's store: a chained hash table of keys (FNV-1a, doubled at
 * load factor 1), the revision counter, the ring of recent changes and
 * the limits. A change is checked against the limits, everything it needs
 * in memory is allocated, it is committed to the database, and only then
 * made in memory, so the store never answers with what the disk does not
 * hold and never holds what the disk refused.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metadata/metad/key_internal.h"
#include "metadata/metad/db_internal.h"
#include "metadata/metad/migrate_internal.h"
#include "metadata/metad/store_internal.h"

#define BUCKETS_MIN 64

/* The link that points at @p key's entry, or the NULL ending its chain. */
static struct metad_entry **find(const struct metad_store *s, const char *key,
				 size_t klen, uint64_t hash)
{
	struct metad_entry **pe = &s->buckets[hash & (s->nbuckets - 1)];

	for (; *pe; pe = &(*pe)->next)
		if ((*pe)->hash == hash && (*pe)->klen == klen &&
		    !memcmp((*pe)->key, key, klen))
			break;
	return pe;
}

/* Double the table; without memory keep the old one (longer chains,
 * the same answers). */
static void grow(struct metad_store *s)
{
	size_t n = s->nbuckets * 2;
	struct metad_entry **b = calloc(n, sizeof(*b));
	struct metad_entry *e;

	if (!b)
		return;
	for (size_t i = 0; i < s->nbuckets; i++) {
		while ((e = s->buckets[i])) {
			s->buckets[i] = e->next;
			e->next = b[e->hash & (n - 1)];
			b[e->hash & (n - 1)] = e;
		}
	}
	free(s->buckets);
	s->buckets = b;
	s->nbuckets = n;
}

/* A new entry for @p key, not linked yet, without a value. */
static struct metad_entry *entry_new(const char *key, size_t klen,
				     uint64_t hash)
{
	struct metad_entry *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->key = malloc(klen + 1);
	if (!e->key) {
		free(e);
		return NULL;
	}
	memcpy(e->key, key, klen);
	e->key[klen] = '\0';
	e->klen = klen;
	e->hash = hash;
	return e;
}

/* Link @p e at @p pe (from find()) and count it. */
static void entry_link(struct metad_store *s, struct metad_entry **pe,
		       struct metad_entry *e)
{
	e->next = *pe;
	*pe = e;
	s->count++;
	s->bytes += e->klen + e->vlen;
	if (s->count > s->nbuckets)
		grow(s);
}

static void entry_free(struct metad_entry *e)
{
	free(e->key);
	free(e->val);
	free(e);
}

/* Note the change that made the current revision; takes @p key. */
static void record(struct metad_store *s, bool deleted, char *key)
{
	struct metad_event *ev = &s->history[s->revision % METAD_HISTORY];

	free(ev->key);
	ev->rev = s->revision;
	ev->deleted = deleted;
	ev->key = key;
	if (s->nhistory < METAD_HISTORY)
		s->nhistory++;
}

int metad_store_fits(const struct metad_store *s, const char *key,
		     size_t vlen, char *why, size_t whylen)
{
	size_t klen = strlen(key);
	const struct metad_entry *e = metad_store_get(s, key);
	uint64_t bytes = s->bytes - (e ? e->vlen : 0) + (e ? 0 : klen) + vlen;

	if (vlen > s->limits.value_bytes) {
		snprintf(why, whylen, "value too large: %zu bytes, the most "
			 "is %" PRIu64 " (--max-value-bytes)", vlen,
			 s->limits.value_bytes);
		return -EFBIG;
	}
	if (!e && s->count >= s->limits.keys) {
		snprintf(why, whylen, "store full: it holds %zu keys, the "
			 "most is %" PRIu64 " (--max-keys)", s->count,
			 s->limits.keys);
		return -EDQUOT;
	}
	if (bytes > s->limits.bytes && bytes > s->bytes) {
		snprintf(why, whylen, "store full: keys and values would "
			 "take %" PRIu64 " bytes, the most is %" PRIu64
			 " (--max-bytes)", bytes, s->limits.bytes);
		return -EDQUOT;
	}
	return 0;
}

int metad_store_put(struct metad_store *s, const char *key, uint8_t *val,
		    size_t vlen)
{
	size_t klen = strlen(key);
	uint64_t hash = metad_fnv1a(METAD_FNV_OFFSET, key, klen);
	struct metad_entry **pe = find(s, key, klen, hash), *e = *pe;
	/* everything the change needs, taken before the disk has it */
	char *hkey = strdup(key);
	struct metad_entry *added = NULL;
	char why[160];
	int ret;

	ret = s->revision >= INT64_MAX ? -EOVERFLOW /* kept signed */
				       : metad_store_fits(s, key, vlen, why,
							  sizeof(why));
	if (ret)
		goto err_free;
	ret = -ENOMEM;
	if (!hkey || (!e && !(added = entry_new(key, klen, hash))))
		goto err_free;
	if (s->db && (ret = metad_db_put(s->db, key, klen, val, vlen,
					 s->revision + 1)))
		goto err_free;

	s->revision++;
	if (added) {
		added->val = val;
		added->vlen = vlen;
		entry_link(s, pe, added);
	} else {
		s->bytes = s->bytes - e->vlen + vlen;
		free(e->val);
		e->val = val;
		e->vlen = vlen;
	}
	record(s, false, hkey);
	return 0;

err_free:
	if (added)
		entry_free(added);
	free(hkey);
	free(val);
	return ret;
}

int metad_store_del(struct metad_store *s, const char *key)
{
	size_t klen = strlen(key);
	uint64_t hash = metad_fnv1a(METAD_FNV_OFFSET, key, klen);
	struct metad_entry **pe = find(s, key, klen, hash), *e = *pe;
	int ret;

	if (!e)
		return 0;
	if (s->revision >= INT64_MAX) /* the database keeps it signed */
		return -EOVERFLOW;
	if (s->db && (ret = metad_db_del(s->db, key, klen, s->revision + 1)))
		return ret;
	*pe = e->next;
	s->count--;
	s->bytes -= e->klen + e->vlen;
	s->revision++;
	record(s, true, e->key);    /* the history takes the key */
	e->key = NULL;
	entry_free(e);
	return 1;
}

const struct metad_entry *metad_store_get(const struct metad_store *s,
					  const char *key)
{
	size_t klen = strlen(key);

	return *find(s, key, klen, metad_fnv1a(METAD_FNV_OFFSET, key, klen));
}

/* metad_entry_cb: add a loaded key to the store at @p arg, without
 * history or saving. */
static int load_entry(const char *key, size_t klen, const uint8_t *val,
		      size_t vlen, void *arg)
{
	struct metad_store *s = arg;
	uint64_t hash = metad_fnv1a(METAD_FNV_OFFSET, key, klen);
	struct metad_entry **pe = find(s, key, klen, hash), *e;

	if (*pe)
		return -EEXIST;
	e = entry_new(key, klen, hash);
	if (!e || !(e->val = malloc(vlen ? vlen : 1))) {
		if (e)
			entry_free(e);
		return -ENOMEM;
	}
	memcpy(e->val, val, vlen);
	e->vlen = vlen;
	entry_link(s, pe, e);
	return 0;
}

bool metad_store_history(const struct metad_store *s, uint64_t since)
{
	return since <= s->revision && s->revision - since <= s->nhistory;
}

const struct metad_event *metad_store_event(const struct metad_store *s,
					    uint64_t rev)
{
	return &s->history[rev % METAD_HISTORY];
}

struct metad_store *metad_store_open(const char *persist,
				     const struct metad_limits *limits,
				     char *err, size_t errlen)
{
	struct metad_store *s = calloc(1, sizeof(*s));

	snprintf(err, errlen, "out of memory");
	if (!s)
		return NULL;
	s->limits = *limits;
	s->nbuckets = BUCKETS_MIN;
	s->buckets = calloc(s->nbuckets, sizeof(*s->buckets));
	s->history = calloc(METAD_HISTORY, sizeof(*s->history));
	if (!s->buckets || !s->history)
		goto err_free;
	if (!persist)
		return s;

	if (metad_migrate(persist, err, errlen))
		goto err_free;
	s->db = metad_db_open(persist, err, errlen);
	if (!s->db)
		goto err_free;
	if (metad_db_load(s->db, load_entry, s, &s->revision, err, errlen))
		goto err_free;
	return s;

err_free:
	metad_store_free(s);
	return NULL;
}

void metad_store_free(struct metad_store *s)
{
	struct metad_entry *e;

	if (!s)
		return;
	for (size_t i = 0; s->buckets && i < s->nbuckets; i++) {
		while ((e = s->buckets[i])) {
			s->buckets[i] = e->next;
			entry_free(e);
		}
	}
	for (size_t i = 0; s->history && i < METAD_HISTORY; i++)
		free(s->history[i].key);
	free(s->buckets);
	free(s->history);
	metad_db_close(s->db);
	free(s);
}
