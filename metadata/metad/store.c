/*
 * xfer-metad's store: a chained hash table of keys (FNV-1a, doubled at
 * load factor 1), the revision counter and the ring of recent changes.
 * A change is made in memory, saved, and undone if the save fails, so the
 * store never answers with what the disk does not hold.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metadata/metad/key_internal.h"
#include "metadata/metad/persist_internal.h"
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

/* Link a new entry for @p key at @p pe (from find()); no value yet. */
static struct metad_entry *entry_add(struct metad_store *s,
				     struct metad_entry **pe, const char *key,
				     size_t klen, uint64_t hash)
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
	e->next = *pe;
	*pe = e;
	s->count++;
	return e;
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

/* metad_persist_walk_cb: every entry of the store at @p arg. */
static void save_entries(struct metad_persist_writer *w, void *arg)
{
	const struct metad_store *s = arg;
	const struct metad_entry *e;

	for (size_t i = 0; i < s->nbuckets; i++)
		for (e = s->buckets[i]; e; e = e->next)
			metad_persist_write(w, e->key, e->klen, e->val,
					    e->vlen);
}

static int save(struct metad_store *s)
{
	if (!s->persist)
		return 0;
	return metad_persist_save(s->persist, s->revision, s->count,
				  save_entries, s);
}

int metad_store_put(struct metad_store *s, const char *key, uint8_t *val,
		    size_t vlen)
{
	size_t klen = strlen(key);
	uint64_t hash = metad_fnv1a(METAD_FNV_OFFSET, key, klen);
	struct metad_entry **pe = find(s, key, klen, hash), *e = *pe;
	/* the history's copy, taken while nothing has changed yet */
	char *hkey = strdup(key);
	uint8_t *old_val = NULL;
	size_t old_len = 0;
	bool existed = e != NULL;
	int ret;

	if (!hkey)
		goto err_nomem;
	if (existed) {
		old_val = e->val;
		old_len = e->vlen;
	} else if (!(e = entry_add(s, pe, key, klen, hash))) {
		goto err_nomem;
	}
	e->val = val;
	e->vlen = vlen;
	s->revision++;

	ret = save(s);
	if (ret) {
		s->revision--;
		if (existed) {
			e->val = old_val;
			e->vlen = old_len;
		} else {
			*pe = e->next;      /* entry_add linked it at *pe */
			s->count--;
			e->val = NULL;
			entry_free(e);
		}
		free(val);
		free(hkey);
		return ret;
	}
	free(old_val);
	record(s, false, hkey);
	if (s->count > s->nbuckets)
		grow(s);
	return 0;

err_nomem:
	free(hkey);
	free(val);
	return -ENOMEM;
}

int metad_store_del(struct metad_store *s, const char *key)
{
	size_t klen = strlen(key);
	uint64_t hash = metad_fnv1a(METAD_FNV_OFFSET, key, klen);
	struct metad_entry **pe = find(s, key, klen, hash), *e = *pe;
	int ret;

	if (!e)
		return 0;
	*pe = e->next;
	s->count--;
	s->revision++;

	ret = save(s);
	if (ret) {
		s->revision--;
		s->count++;
		*pe = e;
		return ret;
	}
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

/* metad_persist_entry_cb: add a loaded key to the store at @p arg, without
 * history or saving. */
static int load_entry(const char *key, size_t klen, uint8_t *val,
		      size_t vlen, void *arg)
{
	struct metad_store *s = arg;
	uint64_t hash = metad_fnv1a(METAD_FNV_OFFSET, key, klen);
	struct metad_entry **pe = find(s, key, klen, hash), *e;

	if (*pe) {
		free(val);
		return -EEXIST;
	}
	e = entry_add(s, pe, key, klen, hash);
	if (!e) {
		free(val);
		return -ENOMEM;
	}
	e->val = val;
	e->vlen = vlen;
	if (s->count > s->nbuckets)
		grow(s);
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

struct metad_store *metad_store_open(const char *persist, char *err,
				     size_t errlen)
{
	struct metad_store *s = calloc(1, sizeof(*s));
	int ret;

	snprintf(err, errlen, "out of memory");
	if (!s)
		return NULL;
	s->nbuckets = BUCKETS_MIN;
	s->buckets = calloc(s->nbuckets, sizeof(*s->buckets));
	s->history = calloc(METAD_HISTORY, sizeof(*s->history));
	if (!s->buckets || !s->history)
		goto err_free;
	if (!persist)
		return s;

	s->persist = metad_persist_new(persist);
	if (!s->persist)
		goto err_free;
	ret = metad_persist_load(s->persist, load_entry, s, &s->revision, err,
				 errlen);
	if (ret < 0)
		goto err_free;
	if (ret == 1 && (ret = save(s)) < 0) {
		snprintf(err, errlen, "cannot create %s: %s", persist,
			 strerror(-ret));
		goto err_free;
	}
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
	metad_persist_free(s->persist);
	free(s);
}
