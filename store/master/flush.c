/*
 * Which version of each key the slower tier holds (docs/STORE.md, "The
 * slower tier"): clients write an object's file there and report it
 * (STORE_FLUSHED); the master keeps the largest version reported per
 * key, beyond the object's life in DRAM (evicted, removed), journaled,
 * so that a restart keeps it. A get of a key no longer in DRAM is
 * answered -704 with this version, which the client reads from the tier.
 * The table is a hash by key, grown by doubling; one thread (the
 * master's loop), no locks.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "store/master/journal_internal.h"
#include "store/master/state_internal.h"

struct fkey {
	struct fkey *next;
	uint64_t hash, version;
	uint16_t klen;
	char key[];
};

struct flushed {
	struct fkey **b;
	size_t nb, n;
};

static struct fkey *find(const struct flushed *f, const char *key,
			 uint16_t klen, uint64_t h)
{
	struct fkey *e = f->b[h & (f->nb - 1)];

	while (e && (e->hash != h || e->klen != klen ||
		     memcmp(e->key, key, klen)))
		e = e->next;
	return e;
}

static int grow(struct flushed *f)
{
	size_t nb = f->nb * 2;
	struct fkey **b = calloc(nb, sizeof(*b));

	if (!b)
		return -ENOMEM;
	for (size_t i = 0; i < f->nb; i++)
		while (f->b[i]) {
			struct fkey *e = f->b[i];

			f->b[i] = e->next;
			e->next = b[e->hash & (nb - 1)];
			b[e->hash & (nb - 1)] = e;
		}
	free(f->b);
	f->b = b;
	f->nb = nb;
	return 0;
}

/* Raise @p key's version to @p version. @return 1 if it rose, 0 if not,
 * -ENOMEM. */
static int raise_to(struct flushed *f, const char *key, uint16_t klen,
		    uint64_t version)
{
	uint64_t h = fnv1a(key, klen);
	struct fkey *e = find(f, key, klen, h);

	if (e) {
		if (e->version >= version)
			return 0;
		e->version = version;
		return 1;
	}
	if (f->n >= f->nb && grow(f))
		return -ENOMEM;
	if (!(e = malloc(sizeof(*e) + klen)))
		return -ENOMEM;
	e->hash = h;
	e->version = version;
	e->klen = klen;
	memcpy(e->key, key, klen);
	e->next = f->b[h & (f->nb - 1)];
	f->b[h & (f->nb - 1)] = e;
	f->n++;
	return 1;
}

static int load_one(void *arg, const char *key, uint16_t klen,
		    uint64_t version)
{
	return raise_to(arg, key, klen, version) < 0 ? -ENOMEM : 0;
}

int flush_init(struct stored *s, char *err, size_t errlen)
{
	struct flushed *f = calloc(1, sizeof(*f));
	int ret;

	snprintf(err, errlen, "out of memory");
	if (!f || !(f->b = calloc(64, sizeof(*f->b)))) {
		free(f);
		return -ENOMEM;
	}
	f->nb = 64;
	s->flushed = f;
	if (s->journal &&
	    (ret = journal_load_flushed(s->journal, load_one, f))) {
		snprintf(err, errlen, "cannot load the flushed versions of "
			 "the journal: %s", strerror(-ret));
		return ret;
	}
	return 0;
}

void flush_fini(struct stored *s)
{
	struct flushed *f = s->flushed;

	if (!f)
		return;
	for (size_t i = 0; i < f->nb; i++)
		while (f->b[i]) {
			struct fkey *e = f->b[i];

			f->b[i] = e->next;
			free(e);
		}
	free(f->b);
	free(f);
	s->flushed = NULL;
}

uint64_t flush_version(const struct stored *s, const struct store_str *key)
{
	const struct fkey *e;

	if (!s->flushed)
		return 0;
	e = find(s->flushed, key->p, key->len, fnv1a(key->p, key->len));
	return e ? e->version : 0;
}

void flush_report(struct stored *s, const struct store_msg *req,
		  struct store_msg *rep)
{
	rep->n = req->n;
	for (uint32_t i = 0; i < req->n; i++) {
		const struct store_item *it = &req->items[i];
		struct store_item *out = &rep->items[i];
		int ret = 0;

		out->err = 0;
		/* only a version the master gave can be in the tier */
		if (!it->key.len || it->version > s->version)
			out->err = MC_INVALID_PARAMS;
		else if (it->version &&
			 (ret = raise_to(s->flushed, it->key.p, it->key.len,
					 it->version)) < 0)
			out->err = MC_INTERNAL_ERROR;
		if (ret > 0 && s->journal) {
			journal_flushed(s->journal, it->key.p, it->key.len,
					it->version);
			event_active(s->commit_ev, 0, 0);
		}
		out->version = flush_version(s, &it->key);
	}
}
