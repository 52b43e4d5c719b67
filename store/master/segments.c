/*
 * xfer-stored: clients and their segments (mount, unmount, ping, expiry
 * of the silent), the tick, and the dispatch of requests
 * (master_internal.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "store/alloc_internal.h"
#include "store/master/state_internal.h"
#include "util/log_internal.h"

#define TICK_MS 100
/* Most live allocations of one segment: one per 4 KiB, within 2^24. */
#define SEG_ALLOCS_MAX (1u << 24)
#define SEG_ALIGN 64

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

static struct segment *segment_find(struct stored *s, const uint8_t *id)
{
	for (size_t i = 0; i < s->nsegs; i++)
		if (!memcmp(s->segs[i]->id, id, STORE_ID_LEN))
			return s->segs[i];
	return NULL;
}

static void segment_free(struct stored *s, struct segment *g)
{
	while (!list_empty(&g->replicas))
		objects_drop_replica(s, container_of(g->replicas.next,
						     struct replica, in_seg));
	s->capacity -= g->size;
	s->segs[g->index] = s->segs[--s->nsegs];
	s->segs[g->index]->index = g->index;
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
	free(c);
}

static int mount(struct stored *s, const struct store_msg *m)
{
	struct segment *g = segment_find(s, m->segment), **segs;
	struct client *c = client_find(s, m->client);
	uint64_t allocs = m->size / 4096 + 1;

	if (!m->size || m->size < SEG_ALIGN || m->base > UINT64_MAX - m->size)
		return MC_INVALID_PARAMS;
	if (g)
		return g->client == c && g->base == m->base &&
		       g->size == m->size && g->name_len == m->name.len &&
		       !memcmp(g->name, m->name.p, m->name.len) ?
		       0 : MC_SEGMENT_ALREADY_EXISTS;
	if (s->nsegs == s->segs_cap) {
		size_t cap = s->segs_cap ? 2 * s->segs_cap : 16;

		segs = realloc(s->segs, cap * sizeof(*segs));
		if (!segs)
			return MC_INTERNAL_ERROR;
		s->segs = segs;
		s->segs_cap = cap;
	}
	g = calloc(1, sizeof(*g));
	if (!g || !(g->name = malloc(m->name.len)) ||
	    !(g->alloc = store_alloc_new(m->size, SEG_ALIGN,
					 allocs > SEG_ALLOCS_MAX ?
					 SEG_ALLOCS_MAX : (uint32_t)allocs)))
		goto err_free;
	if (!c) {
		c = calloc(1, sizeof(*c));
		if (!c)
			goto err_free;
		memcpy(c->id, m->client, STORE_ID_LEN);
		list_init(&c->segments);
		list_add_before(&c->link, &s->clients);
	}
	c->last_ping_ms = stored_now_ms();
	memcpy(g->id, m->segment, STORE_ID_LEN);
	memcpy(g->name, m->name.p, m->name.len);
	g->name_len = m->name.len;
	g->base = m->base;
	g->size = m->size;
	g->client = c;
	list_init(&g->replicas);
	list_add_before(&g->in_client, &c->segments);
	g->index = s->nsegs;
	s->segs[s->nsegs++] = g;
	s->capacity += g->size;
	xfer_log(XFER_LOG_INFO, "xfer-stored: mounted %.*s: %llu bytes",
		 (int)g->name_len, g->name, (unsigned long long)g->size);
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
	objects_sweep(s, now);
	objects_evict_watermark(s);
}

static void on_evict(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	objects_evict_watermark(arg);
}

struct stored *stored_new(struct event_base *base,
			  const struct stored_cfg *cfg)
{
	struct timeval tv = { 0, TICK_MS * 1000 };
	struct stored *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->base = base;
	s->cfg = *cfg;
	s->rng = (uint64_t)stored_now_ms() | 1;
	list_init(&s->clients);
	if (objects_init(s))
		goto err;
	s->tick = event_new(base, -1, EV_PERSIST, on_tick, s);
	s->evict_ev = event_new(base, -1, 0, on_evict, s);
	if (!s->tick || !s->evict_ev || event_add(s->tick, &tv))
		goto err;
	return s;

err:
	stored_free(s);
	errno = ENOMEM;
	return NULL;
}

void stored_free(struct stored *s)
{
	if (!s)
		return;
	if (s->tick)
		event_free(s->tick);
	if (s->evict_ev)
		event_free(s->evict_ev);
	while (!list_empty(&s->clients))
		client_free(s, container_of(s->clients.next, struct client,
					    link));
	objects_fini(s);
	free(s->segs);
	free(s);
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
		rep->flags = !c;       /* unknown: mount again */
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
	}
}
