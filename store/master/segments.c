/*
 * xfer-stored: clients and their segments (mount, unmount, ping, expiry
 * of the silent), the tick, and the dispatch of requests
 * (master_internal.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "store/alloc_internal.h"
#include "store/master/journal_internal.h"
#include "store/master/state_internal.h"
#include "util/log_internal.h"

#define TICK_MS 100

int64_t stored_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct client *client_find(struct stored *s, const uint8_t *id)
{
	for (struct list *l = s->clients.next; l != &s->clients; l = l->next) {
		struct client *c = container_of(l, struct client, link);

		if (!memcmp(c->id, id, STORE_ID_LEN))
			return c;
	}
	return NULL;
}

struct client *client_get(struct stored *s, const uint8_t *id, int64_t now)
{
	struct client *c = client_find(s, id);

	if (c)
		return c;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	memcpy(c->id, id, STORE_ID_LEN);
	c->last_ping_ms = now;
	list_init(&c->segments);
	list_add_before(&c->link, &s->clients);
	s->nclients++;
	return c;
}

static struct segment *segment_find(struct stored *s, const uint8_t *id)
{
	struct list *l;

	for (size_t i = 0; i < s->nsegs; i++)
		if (!memcmp(s->segs[i]->id, id, STORE_ID_LEN))
			return s->segs[i];
	for (l = s->offline.next; l != &s->offline; l = l->next) {
		struct segment *g = container_of(l, struct segment,
						 in_offline);

		if (!memcmp(g->id, id, STORE_ID_LEN))
			return g;
	}
	return NULL;
}

void segment_free(struct stored *s, struct segment *g)
{
	persist_unmount(s, g);
	while (!list_empty(&g->replicas)) {
		struct replica *r = container_of(g->replicas.next,
						 struct replica, in_seg);
		struct object *o = r->obj;

		if (objects_drop_replica(s, r))  /* made again elsewhere */
			replicate_lost(s, o);
	}
	if (g->online) {
		*(segment_ssd(g) ? &s->ssd_capacity : &s->capacity) -= g->size;
		s->segs[g->index] = s->segs[--s->nsegs];
		s->segs[g->index]->index = g->index;
	} else {
		list_del(&g->in_offline);
	}
	list_del(&g->in_client);
	store_alloc_free(g->alloc);
	free(g->name);
	free(g);
}

static void client_free(struct stored *s, struct client *c)
{
	while (!list_empty(&c->segments))
		segment_free(s, container_of(c->segments.next, struct segment,
					     in_client));
	list_del(&c->link);
	s->nclients--;
	free(c);
}

static struct store_alloc *seg_alloc_new(uint64_t size)
{
	uint64_t allocs = size / 4096 + 1;

	return store_alloc_new(size, SEG_ALIGN, allocs > SEG_ALLOCS_MAX ?
			       SEG_ALLOCS_MAX : (uint32_t)allocs);
}

/* Room in stored.segs for one more. @return 0, -ENOMEM. */
static int segs_room(struct stored *s)
{
	struct segment **segs;
	size_t cap;

	if (s->nsegs < s->segs_cap)
		return 0;
	cap = s->segs_cap ? 2 * s->segs_cap : 16;
	segs = realloc(s->segs, cap * sizeof(*segs));
	if (!segs)
		return -ENOMEM;
	s->segs = segs;
	s->segs_cap = cap;
	return 0;
}

static void segs_add(struct stored *s, struct segment *g)
{
	g->online = true;
	g->index = s->nsegs;
	s->segs[s->nsegs++] = g;
	*(segment_ssd(g) ? &s->ssd_capacity : &s->capacity) += g->size;
}

void segment_account(struct stored *s, const struct segment *g,
		     uint64_t len, int sign)
{
	uint64_t *used = segment_ssd(g) ? &s->ssd_used : &s->used;

	*used = sign > 0 ? *used + len : *used - len;
}

int segment_remount(struct stored *s, struct segment *g)
{
	struct store_alloc_range *r;
	struct list *l;
	uint32_t n = 0, *ids;
	int ret = -ENOMEM;

	for (l = g->replicas.next; l != &g->replicas; l = l->next)
		n++;
	r = malloc((n ? n : 1) * sizeof(*r));
	ids = malloc((n ? n : 1) * sizeof(*ids));
	if (!r || !ids || segs_room(s) || !(g->alloc = seg_alloc_new(g->size)))
		goto out;
	n = 0;
	for (l = g->replicas.next; l != &g->replicas; l = l->next) {
		struct replica *x = container_of(l, struct replica, in_seg);

		r[n++] = (struct store_alloc_range){ x->off,
						     stripe_len(x->obj, x) };
	}
	/* loading checked the order and the bounds */
	ret = store_alloc_restore(g->alloc, r, n, ids);
	if (ret) {
		store_alloc_free(g->alloc);
		g->alloc = NULL;
		goto out;
	}
	n = 0;
	for (l = g->replicas.next; l != &g->replicas; l = l->next) {
		struct replica *x = container_of(l, struct replica, in_seg);

		x->alloc_id = ids[n++];
		store_alloc_set_tag(g->alloc, x->alloc_id, x);
	}
	segment_account(s, g, store_alloc_used(g->alloc), 1);
	list_del(&g->in_offline);
	segs_add(s, g);
	xfer_log(XFER_LOG_INFO, "xfer-stored: %.*s mounted again: %u "
		 "objects restored", (int)g->name_len, g->name, n);
out:
	free(r);
	free(ids);
	return ret;
}

static bool same_identity(const struct segment *g, const struct client *c,
			  const struct store_msg *m)
{
	return g->client == c && g->base == m->base && g->size == m->size &&
	       g->name_len == m->name.len &&
	       !memcmp(g->name, m->name.p, m->name.len);
}

static int mount(struct stored *s, const struct store_msg *m)
{
	struct segment *g = segment_find(s, m->segment);
	struct client *c = client_find(s, m->client);

	if (!m->size || m->size < SEG_ALIGN || m->base > UINT64_MAX - m->size)
		return MC_INVALID_PARAMS;
	if (g && g->online)
		return same_identity(g, c, m) ? 0 : MC_SEGMENT_ALREADY_EXISTS;
	if (g && same_identity(g, c, m)) {
		c->last_ping_ms = stored_now_ms();
		g->medium = m->medium;
		return segment_remount(s, g) ? MC_INTERNAL_ERROR : 0;
	}
	/* restored, but not the memory it was: its objects are gone */
	if (g)
		segment_free(s, g);
	if (segs_room(s))
		return MC_INTERNAL_ERROR;
	g = calloc(1, sizeof(*g));
	if (!g || !(g->name = malloc(m->name.len)) ||
	    !(g->alloc = seg_alloc_new(m->size)))
		goto err_free;
	c = client_get(s, m->client, stored_now_ms());
	if (!c)
		goto err_free;
	c->last_ping_ms = stored_now_ms();
	memcpy(g->id, m->segment, STORE_ID_LEN);
	memcpy(g->name, m->name.p, m->name.len);
	g->name_len = m->name.len;
	g->base = m->base;
	g->size = m->size;
	g->medium = m->medium;
	g->client = c;
	list_init(&g->replicas);
	list_add_before(&g->in_client, &c->segments);
	segs_add(s, g);
	persist_mount(s, g);
	xfer_log(XFER_LOG_INFO, "xfer-stored: mounted %.*s: %llu bytes of %s",
		 (int)g->name_len, g->name, (unsigned long long)g->size,
		 segment_ssd(g) ? "SSD" : "DRAM");
	return 0;

err_free:
	if (g) {
		store_alloc_free(g->alloc);
		free(g->name);
		free(g);
	}
	return MC_INTERNAL_ERROR;
}

static int unmount(struct stored *s, const struct store_msg *m)
{
	struct segment *g = segment_find(s, m->segment);

	if (!g)
		return MC_SEGMENT_NOT_FOUND;
	if (memcmp(g->client->id, m->client, STORE_ID_LEN))
		return MC_ILLEGAL_CLIENT;
	segment_free(s, g);
	return 0;
}

/* Clients silent for client_ttl lose their segments. */
static void expire_clients(struct stored *s, int64_t now)
{
	struct list *l = s->clients.next, *next;

	for (; l != &s->clients; l = next) {
		struct client *c = container_of(l, struct client, link);

		next = l->next;
		if (now - c->last_ping_ms < (int64_t)s->cfg.client_ttl_ms)
			continue;
		xfer_log(XFER_LOG_WARN, "xfer-stored: a client was silent for "
			 "%llu ms: its segments are unmounted",
			 (unsigned long long)(now - c->last_ping_ms));
		client_free(s, c);
	}
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct stored *s = arg;
	int64_t now = stored_now_ms();

	(void)fd;
	(void)what;
	expire_clients(s, now);
	persist_expire(s, now);
	objects_sweep(s, now);
	tier_sweep(s, now);
	replicate_tick(s, now);
	objects_evict_watermark(s);
}

static void on_evict(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	objects_evict_watermark(arg);
}

struct stored *stored_new(struct event_base *base,
			  const struct stored_cfg *cfg, struct journal *journal,
			  char *err, size_t errlen)
{
	struct timeval tv = { 0, TICK_MS * 1000 };
	struct stored *s = calloc(1, sizeof(*s));
	int ret = -ENOMEM;

	snprintf(err, errlen, "out of memory");
	if (!s)
		goto err;
	s->base = base;
	s->cfg = *cfg;
	s->rng = (uint64_t)stored_now_ms() | 1;
	list_init(&s->clients);
	list_init(&s->offline);
	replicate_init(s);
	if (objects_init(s))
		goto err;
	s->tick = event_new(base, -1, EV_PERSIST, on_tick, s);
	s->evict_ev = event_new(base, -1, 0, on_evict, s);
	if (!s->tick || !s->evict_ev || event_add(s->tick, &tv))
		goto err;
	s->journal = journal;
	if (journal && (ret = persist_load(s, err, errlen)))
		goto err;
	if ((ret = flush_init(s, err, errlen)))
		goto err;
	return s;

err:
	stored_free(s);
	errno = -ret;
	return NULL;
}

void stored_free(struct stored *s)
{
	if (!s)
		return;
	s->journal = NULL;      /* going down is no change to record */
	if (s->tick)
		event_free(s->tick);
	if (s->evict_ev)
		event_free(s->evict_ev);
	if (s->commit_ev)
		event_free(s->commit_ev);
	while (!list_empty(&s->clients))
		client_free(s, container_of(s->clients.next, struct client,
					    link));
	replicate_fini(s);
	objects_fini(s);
	flush_fini(s);
	free(s->segs);
	free(s);
}

void stored_set_committed(struct stored *s, void (*cb)(void *arg),
			  void *arg)
{
	s->committed = cb;
	s->committed_arg = arg;
}

bool stored_pending(const struct stored *s)
{
	return s->gated || (s->journal && journal_dirty(s->journal));
}

bool stored_failed(const struct stored *s)
{
	return s->failed;
}

/* Must @p c mount again? One of its segments waits offline. */
static bool needs_mount(const struct client *c)
{
	for (struct list *l = c->segments.next; l != &c->segments;
	     l = l->next)
		if (!container_of(l, struct segment, in_client)->online)
			return true;
	return false;
}

/* Count @p rep, the answer to a call of a batch of keys or of none, as
 * Mooncake's master counts its calls: one key (or none) as a request,
 * more as a batch; a failure is a negative err. */
static void count(struct stored *s, const struct store_msg *req,
		  const struct store_msg *rep)
{
	struct stored_count *n = &s->stats.calls[req->h.type];
	uint32_t failed = 0;

	for (uint32_t i = 0; i < rep->n; i++)
		failed += rep->items[i].err < 0;
	if (rep->n <= 1) {
		n->req++;
		n->fail += rep->err < 0 || failed;
		return;
	}
	n->batch++;
	n->items += rep->n;
	n->failed_items += failed;
	n->batch_fail += failed == rep->n;
	n->batch_partial += failed && failed < rep->n;
}

void stored_handle(struct stored *s, const struct store_msg *req,
		   struct store_msg *rep)
{
	struct client *c;

	rep->h = (struct store_hdr){ .type = req->h.type,
				     .flags = STORE_F_REPLY,
				     .seq = req->h.seq };
	rep->err = 0;
	rep->n = 0;
	switch (req->h.type) {
	case STORE_PING:
		c = client_find(s, req->client);
		if (c)
			c->last_ping_ms = stored_now_ms();
		rep->flags = !c || needs_mount(c);
		break;
	case STORE_MOUNT:
		rep->err = mount(s, req);
		break;
	case STORE_UNMOUNT:
		rep->err = unmount(s, req);
		break;
	case STORE_PUT_START:
		objects_put_start(s, req, rep);
		break;
	case STORE_PUT_END:
	case STORE_PUT_REVOKE:
		objects_put_end(s, req, rep, req->h.type == STORE_PUT_REVOKE);
		break;
	case STORE_QUERY:
	case STORE_EXIST:
		objects_query(s, req, rep, req->h.type == STORE_EXIST);
		break;
	case STORE_REMOVE:
		objects_remove(s, req, rep);
		break;
	case STORE_REMOVE_ALL:
		rep->count = objects_remove_all(s, req->force);
		break;
	case STORE_SYNC:
		/* answered after the journal's commit, as every answer */
		rep->count = (int64_t)s->version;
		break;
	case STORE_REMOVE_REGEX:
		rep->count = versions_remove_regex(s, req);
		break;
	case STORE_REPLICA_CLEAR:
		versions_replica_clear(s, req, rep);
		break;
	case STORE_TIER_POLL:
		tier_poll(s, req, rep);
		break;
	case STORE_TIER_DONE:
		tier_done(s, req, rep);
		break;
	case STORE_FLUSHED:
		flush_report(s, req, rep);
		break;
	case STORE_REPLICATE:
		replicate_request(s, req, rep);
		break;
	case STORE_QUERY_TASK:
		replicate_query(s, req, rep);
		break;
	case STORE_CREATE_TASK:
		replicate_create(s, req, rep);
		break;
	}
	count(s, req, rep);
}
