/*
 * xfer-stored's side of its journal (journal_internal.h): the state
 * loaded at start, each change recorded as the state makes it, and the
 * commit that makes a pass's changes durable before their answers go
 * out (conn.c holds them until the committed callback).
 *
 * Loaded segments wait offline, their objects' replicas listed in them
 * by offset, until their clients mount them again with the same
 * identity (segments.c): then an allocator is rebuilt from those ranges.
 * What does not come back within client_ttl is dropped. A row whose
 * replicas all lie in segments that are gone is deleted at load: an
 * unmount deletes only its segment's row, whatever it held.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "store/master/journal_internal.h"
#include "store/master/state_internal.h"
#include "util/log_internal.h"

struct load {
	struct stored *s;
	int64_t now;
	struct segment **segs;         /* by ascending sid */
	size_t nsegs, segs_cap;
	struct store_str *dead;        /* keys to delete (malloc'd) */
	size_t ndead, dead_cap;
	size_t objects;
};

static void on_commit(evutil_socket_t fd, short what, void *arg)
{
	struct stored *s = arg;

	(void)fd;
	(void)what;
	struct timespec t0, t1;
	double dt;
	int ret;

	if (!s->journal)
		return;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ret = journal_commit(s->journal);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	dt = (double)(t1.tv_sec - t0.tv_sec) +
	     (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	if (dt > s->stats.commit_max_s)
		s->stats.commit_max_s = dt;
	s->stats.commits++;
	if (ret) {
		xfer_log(XFER_LOG_ERROR, "xfer-stored: the journal cannot be "
			 "written: stopping, what waits on it unanswered");
		s->failed = true;
		event_base_loopbreak(s->base);
		return;
	}
	if (s->gate && s->gate(s->gate_arg)) {
		s->gated = true;
		return;
	}
	s->gated = false;
	if (s->committed)
		s->committed(s->committed_arg);
}

void stored_set_gate(struct stored *s, bool (*gate)(void *arg), void *arg)
{
	s->gate = gate;
	s->gate_arg = arg;
}

void stored_release(struct stored *s)
{
	if (!s->gated)
		return;
	s->gated = false;
	if (s->committed)
		s->committed(s->committed_arg);
}

bool stored_held(const struct stored *s)
{
	return s->gated;
}

static void changed(struct stored *s)
{
	event_active(s->commit_ev, 0, 0);
}

static int grow_array(void **p, size_t *cap, size_t n, size_t size)
{
	void *q;

	if (n < *cap)
		return 0;
	q = realloc(*p, (*cap ? 2 * *cap : 64) * size);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = *cap ? 2 * *cap : 64;
	return 0;
}

static int load_segment(void *arg, const struct journal_segment *jg)
{
	struct load *ld = arg;
	struct client *c = client_get(ld->s, jg->client, ld->now);
	struct segment *g;

	if (!c || grow_array((void **)&ld->segs, &ld->segs_cap, ld->nsegs,
			     sizeof(*ld->segs)))
		return -ENOMEM;
	g = calloc(1, sizeof(*g));
	if (!g || !(g->name = malloc(jg->name_len))) {
		free(g);
		return -ENOMEM;
	}
	g->sid = jg->sid;
	memcpy(g->id, jg->id, STORE_ID_LEN);
	memcpy(g->name, jg->name, jg->name_len);
	g->name_len = jg->name_len;
	g->base = jg->base;
	g->size = jg->size;
	g->client = c;
	list_init(&g->replicas);
	list_add_before(&g->in_client, &c->segments);
	list_add_before(&g->in_offline, &ld->s->offline);
	ld->segs[ld->nsegs++] = g;
	return 0;
}

static struct segment *by_sid(const struct load *ld, int64_t sid)
{
	size_t lo = 0, hi = ld->nsegs;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (ld->segs[mid]->sid < sid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < ld->nsegs && ld->segs[lo]->sid == sid ? ld->segs[lo] : NULL;
}

/* Keep @p key to delete once loaded. */
static int load_dead(struct load *ld, const struct journal_object *jo)
{
	char *key;

	if (grow_array((void **)&ld->dead, &ld->dead_cap, ld->ndead,
		       sizeof(*ld->dead)) || !(key = malloc(jo->klen)))
		return -ENOMEM;
	memcpy(key, jo->key, jo->klen);
	ld->dead[ld->ndead++] = (struct store_str){ key, jo->klen };
	return 0;
}

static int load_object(void *arg, const struct journal_object *jo)
{
	struct store_str key = { jo->key, jo->klen };
	struct segment *segs[STORE_REPLICA_MAX];
	struct replica shard[STORE_REPLICA_MAX];
	struct object sized = { .len = jo->len };
	struct load *ld = arg;
	struct object *o;
	unsigned n = 0;

	if (jo->len > UINT64_MAX - SEG_ALIGN)
		return -EINVAL;
	for (unsigned i = 0; i < jo->nrep; i++) {
		const struct journal_replica *jr = &jo->rep[i];
		unsigned parts = jr->parts ? jr->parts : 1, j;
		struct segment *g;
		uint64_t span;

		/* a striped replica's shards: side by side, in order, from
		 * its first, which is where a replica is checked */
		if (jr->part || jo->nrep - i < parts)
			return -EINVAL;
		for (j = 1; j < parts; j++)
			if (jo->rep[i + j].part != j ||
			    jo->rep[i + j].parts != parts)
				return -EINVAL;
		/* one shard gone: the replica went with it */
		for (j = 0; j < parts; j++)
			if (!by_sid(ld, jo->rep[i + j].sid))
				break;
		if (j < parts) {
			i += parts - 1;
			continue;
		}
		for (j = 0; j < parts; j++, i++, jr++) {
			g = by_sid(ld, jr->sid);
			shard[n] = (struct replica){ .part = (uint8_t)j,
						     .parts = (uint8_t)parts };
			span = (stripe_len(&sized, &shard[n]) + SEG_ALIGN - 1) &
			       ~(uint64_t)(SEG_ALIGN - 1);
			if (jr->off % SEG_ALIGN || jr->off > g->size ||
			    span > g->size - jr->off)
				return -EINVAL;
			for (unsigned k = 0; k < n; k++)
				if (segs[k] == g)
					return -EINVAL;
			segs[n] = g;
			shard[n++].off = jr->off;
		}
		i--;
	}
	if (!n)
		return load_dead(ld, jo);
	o = objects_alloc(&key, tier_slots(ld->s, n));
	if (!o)
		return -ENOMEM;
	o->cap = (uint8_t)tier_slots(ld->s, n);
	o->len = jo->len;
	o->flags = jo->flags & (STORED_SOFT_PIN | STORED_HARD_PIN);
	o->state = jo->state ? OBJ_COMPLETE : OBJ_PENDING;
	o->version = jo->version;
	o->put_start_ms = ld->now;     /* its timeouts run from now */
	ld->s->stats.soft_pinned += !!(o->flags & STORED_SOFT_PIN);
	memcpy(o->writer, jo->writer, STORE_ID_LEN);
	for (unsigned i = 0; i < n; i++) {
		struct replica *r = &o->rep[i];

		r->obj = o;
		r->seg = segs[i];
		r->off = shard[i].off;
		r->part = shard[i].part;
		r->parts = shard[i].parts;
		list_add_before(&r->in_seg, &segs[i]->replicas);
	}
	o->nrep = o->nlive = (uint8_t)n;
	objects_insert(ld->s, o);
	ld->objects++;
	return 0;
}

static int by_offset(const void *a, const void *b)
{
	const struct replica *x = *(struct replica *const *)a;
	const struct replica *y = *(struct replica *const *)b;

	return x->off < y->off ? -1 : x->off > y->off;
}

/* List @p g's replicas by offset, checking that none overlap and that
 * its allocator will hold them. @return 0, -EINVAL, -ENOMEM. */
static int sort_replicas(struct segment *g)
{
	struct replica **v;
	struct list *l;
	size_t n = 0, i;
	uint64_t end = 0;
	int ret = 0;

	for (l = g->replicas.next; l != &g->replicas; l = l->next)
		n++;
	if (n > g->size / 4096 + 1 || n > SEG_ALLOCS_MAX)
		return -EINVAL;
	v = malloc((n ? n : 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (i = 0, l = g->replicas.next; l != &g->replicas; l = l->next)
		v[i++] = container_of(l, struct replica, in_seg);
	qsort(v, n, sizeof(*v), by_offset);
	list_init(&g->replicas);
	for (i = 0; i < n; i++) {
		if (v[i]->off < end)
			ret = -EINVAL;
		end = v[i]->off + ((stripe_len(v[i]->obj, v[i]) + SEG_ALIGN -
				    1) & ~(uint64_t)(SEG_ALIGN - 1));
		list_add_before(&v[i]->in_seg, &g->replicas);
	}
	free(v);
	return ret;
}

int persist_load(struct stored *s, char *err, size_t errlen)
{
	const struct journal_load_cb cb = { load_segment, load_object };
	struct load ld = { .s = s, .now = stored_now_ms() };
	int ret;

	s->commit_ev = event_new(s->base, -1, 0, on_commit, s);
	if (!s->commit_ev) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	ret = journal_load(s->journal, &cb, &ld, err, errlen);
	if (!ret && (ret = journal_version(s->journal, &s->version)))
		snprintf(err, errlen, "cannot read the journal's version");
	for (size_t i = 0; !ret && i < ld.nsegs; i++) {
		ret = sort_replicas(ld.segs[i]);
		if (ret == -EINVAL)
			snprintf(err, errlen, "the journal's objects overlap "
				 "in segment %.*s (refusing to start rather "
				 "than lose objects)",
				 (int)ld.segs[i]->name_len, ld.segs[i]->name);
		else if (ret)
			snprintf(err, errlen, "out of memory");
	}
	for (size_t i = 0; i < ld.ndead; i++) {
		if (!ret)
			journal_del(s->journal, ld.dead[i].p, ld.dead[i].len);
		free((char *)ld.dead[i].p);
	}
	if (!ret && (ret = journal_commit(s->journal)))
		snprintf(err, errlen, "cannot write the journal: %s",
			 strerror(-ret));
	if (!ret && ld.nsegs) {
		s->restore_until_ms = ld.now + (int64_t)s->cfg.client_ttl_ms;
		xfer_log(XFER_LOG_INFO, "xfer-stored: restored %zu objects in "
			 "%zu segments; each is served once its client mounts "
			 "it again, within %llu ms", ld.objects, ld.nsegs,
			 (unsigned long long)s->cfg.client_ttl_ms);
	}
	free(ld.segs);
	free(ld.dead);
	return ret;
}

void persist_expire(struct stored *s, int64_t now)
{
	size_t n = 0;

	if (!s->restore_until_ms || now < s->restore_until_ms)
		return;
	s->restore_until_ms = 0;
	while (!list_empty(&s->offline)) {
		segment_free(s, container_of(s->offline.next, struct segment,
					     in_offline));
		n++;
	}
	if (n)
		xfer_log(XFER_LOG_WARN, "xfer-stored: %zu restored segments "
			 "were not mounted again in time: their objects are "
			 "dropped", n);
}

void persist_mount(struct stored *s, struct segment *g)
{
	struct journal_segment jg = {
		.id = g->id, .client = g->client->id, .name = g->name,
		.name_len = g->name_len, .base = g->base, .size = g->size,
	};

	if (!s->journal)
		return;
	g->sid = journal_mount(s->journal, &jg);
	changed(s);
}

void persist_unmount(struct stored *s, const struct segment *g)
{
	if (!s->journal || !g->sid)
		return;
	journal_unmount(s->journal, g->sid);
	changed(s);
}

void persist_put(struct stored *s, const struct object *o)
{
	struct journal_object jo = {
		.key = o->key, .klen = o->klen, .flags = o->flags,
		.state = o->state == OBJ_COMPLETE, .len = o->len,
		.version = o->version, .writer = o->writer,
	};

	if (!s->journal)
		return;
	for (unsigned i = 0; i < o->nrep; i++)
		if (o->rep[i].seg && !o->rep[i].filling)
			jo.rep[jo.nrep++] = (struct journal_replica){
				o->rep[i].seg->sid, o->rep[i].off,
				o->rep[i].part, o->rep[i].parts };
	journal_put(s->journal, &jo);
	changed(s);
}

void persist_complete(struct stored *s, const struct object *o)
{
	if (!s->journal)
		return;
	journal_complete(s->journal, o->key, o->klen, o->version);
	changed(s);
}

void persist_del(struct stored *s, const struct object *o)
{
	if (!s->journal)
		return;
	journal_del(s->journal, o->key, o->klen);
	changed(s);
}
