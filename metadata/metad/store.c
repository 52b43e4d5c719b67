/*
 * xfer-metad's store: a chained hash table of keys (FNV-1a, doubled at
 * load factor 1), the revision counter and the ring of recent changes.
 * A change is made in memory, saved, and undone if the save fails, so the
 * store never answers with what the disk does not hold.
 */
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"

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

static int save(const struct metad_store *s)
{
	return s->persist ? metad_persist_save(s) : 0;
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

int metad_store_load_entry(struct metad_store *s, const char *key,
			   size_t klen, uint8_t *val, size_t vlen)
{
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

/* Length of the UTF-8 sequence at @p p (@p n bytes left), 0 if invalid:
 * overlong forms, UTF-16 surrogates and code points past U+10FFFF are. */
static size_t utf8_len(const uint8_t *p, size_t n)
{
	uint32_t c;
	size_t len;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf) {
		len = 2;
		c = p[0] & 0x1f;
	} else if ((p[0] & 0xf0) == 0xe0) {
		len = 3;
		c = p[0] & 0x0f;
	} else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
		len = 4;
		c = p[0] & 0x07;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (p[i] & 0x3f);
	}
	if ((len == 3 && c < 0x800) || (len == 4 && c < 0x10000) ||
	    (c >= 0xd800 && c <= 0xdfff) || c > 0x10ffff)
		return 0;
	return len;
}

const char *metad_key_check(const char *key, size_t len)
{
	const uint8_t *p = (const uint8_t *)key;

	if (len > METAD_KEY_MAX)
		return "longer than 4096 bytes";
	if (memchr(key, '\0', len))
		return "contains a NUL byte";
	for (size_t i = 0, n; i < len; i += n)
		if (!(n = utf8_len(p + i, len - i)))
			return "not valid UTF-8";
	return NULL;
}

struct metad_store *metad_store_open(const char *persist, char *err,
				     size_t errlen)
{
	struct metad_store *s = calloc(1, sizeof(*s));
	char *copy = NULL;
	size_t len;
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

	len = strlen(persist);
	s->persist = strdup(persist);
	s->persist_tmp = malloc(len + sizeof(".tmp"));
	copy = strdup(persist);
	if (!s->persist || !s->persist_tmp || !copy)
		goto err_free;
	memcpy(s->persist_tmp, persist, len);
	memcpy(s->persist_tmp + len, ".tmp", sizeof(".tmp"));
	s->persist_dir = strdup(dirname(copy));
	if (!s->persist_dir)
		goto err_free;
	ret = metad_persist_load(s, err, errlen);
	if (ret < 0)
		goto err_free;
	if (ret == 1 && (ret = metad_persist_save(s)) < 0) {
		snprintf(err, errlen, "cannot create %s: %s", persist,
			 strerror(-ret));
		goto err_free;
	}
	free(copy);
	return s;

err_free:
	free(copy);
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
	free(s->persist);
	free(s->persist_tmp);
	free(s->persist_dir);
	free(s);
}
