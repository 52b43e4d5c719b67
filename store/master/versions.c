/*
 * xfer-stored's removals beyond remove and remove_all: by a pattern of
 * keys (Mooncake's RemoveByRegex), and of replicas in one segment
 * (Mooncake's BatchReplicaClear). Versions
 * themselves live with the objects (objects.c gives each put that ends
 * the next one of s->version; persist.c keeps the counter).
 */
#include <regex.h>
#include <stdlib.h>
#include <string.h>

#include "store/master/state_internal.h"

int64_t versions_remove_regex(struct stored *s, const struct store_msg *req)
{
	int64_t now = stored_now_ms(), n = 0;
	char *pat = malloc((size_t)req->pattern.len + 1), *key = NULL;
	struct list *l, *next;
	regex_t re;

	if (!pat)
		return MC_INTERNAL_ERROR;
	memcpy(pat, req->pattern.p, req->pattern.len);
	pat[req->pattern.len] = 0;
	if (regcomp(&re, pat, REG_EXTENDED | REG_NOSUB)) {
		free(pat);
		return MC_INVALID_PARAMS;
	}
	free(pat);
	key = malloc(STORE_KEY_MAX + 1);
	if (!key) {
		regfree(&re);
		return MC_INTERNAL_ERROR;
	}
	/* complete objects only (on both lists by last use), as Mooncake's;
	 * keys may hold NULs, which end what the pattern sees */
	for (int h = 0; h < 2; h++) {
		struct list *head = h ? &s->ssd_lru : &s->lru;

		for (l = head->next; l != head; l = next) {
			struct object *o = container_of(l, struct object,
							link);

			next = l->next;
			memcpy(key, o->key, o->klen);
			key[o->klen] = 0;
			if (regexec(&re, key, 0, NULL, 0))
				continue;
			/* frees o alone: a complete object shadows none */
			if (!objects_remove_one(s, o, req->force, now))
				n++;
		}
	}
	free(key);
	regfree(&re);
	return n;
}

static bool in_segment(const struct replica *r, const struct store_str *name)
{
	return r->seg && r->seg->name_len == name->len &&
	       !memcmp(r->seg->name, name->p, name->len);
}

/* Does the replica of buffer @p r (all its shards) lie in @p name? A
 * striped replica loses every shard with one. */
static bool group_in_segment(struct replica *r, const struct store_str *name)
{
	struct replica *h = stripe_head(r);
	unsigned n = h->parts > 1 ? h->parts : 1;

	for (unsigned j = 0; j < n; j++)
		if (in_segment(h + j, name))
			return true;
	return false;
}

static int32_t replica_clear(struct stored *s, const struct store_msg *req,
			     struct object *o, int64_t now)
{
	unsigned n = 0, kept = 0;

	if (!o)
		return MC_OBJECT_NOT_FOUND;
	if (o->state != OBJ_COMPLETE)
		return MC_REPLICA_IS_NOT_READY;
	if (memcmp(o->writer, req->client, STORE_ID_LEN))
		return MC_ILLEGAL_CLIENT;
	if (o->lease_until_ms > now)
		return MC_OBJECT_HAS_LEASE;
	for (unsigned i = 0; i < o->nrep; i++) {
		n += in_segment(&o->rep[i], &req->preferred);
		kept += o->rep[i].seg &&
			!group_in_segment(&o->rep[i], &req->preferred);
	}
	if (req->preferred.len && !n)
		return MC_REPLICA_NOT_FOUND;
	if (!req->preferred.len || !kept)
		return objects_remove_one(s, o, true, now);
	for (unsigned i = 0; i < o->nrep; i++)
		if (in_segment(&o->rep[i], &req->preferred))
			objects_drop_replica(s, &o->rep[i]);
	replicate_keep(o);             /* not made again when one goes */
	persist_put(s, o);             /* the row, with those left */
	return 0;
}

void versions_replica_clear(struct stored *s, const struct store_msg *req,
			    struct store_msg *rep)
{
	int64_t now = stored_now_ms();

	rep->n = req->n;
	for (uint32_t i = 0; i < req->n; i++)
		rep->items[i].err = replica_clear(
			s, req, objects_readable(s, &req->items[i].key), now);
}
