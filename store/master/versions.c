/*
 * xfer-stored's calls over many keys at once that are not a batch:
 * removal by a pattern of keys (Mooncake's RemoveByRegex). Versions
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
	/* complete objects only, as Mooncake's; keys may hold NULs, which
	 * end what the pattern sees */
	for (l = s->lru.next; l != &s->lru; l = next) {
		struct object *o = container_of(l, struct object, link);

		next = l->next;
		memcpy(key, o->key, o->klen);
		key[o->klen] = 0;
		if (regexec(&re, key, 0, NULL, 0))
			continue;
		/* frees o alone: a complete object shadows none */
		if (!objects_remove_one(s, o, req->force, now))
			n++;
	}
	free(key);
	regfree(&re);
	return n;
}
