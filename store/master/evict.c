/*
 * xfer-stored's eviction (state_internal.h): at the watermark, passes
 * over the LRU list freeing bytes wherever they lie; for a put that finds
 * no free range, a run of neighbours in one segment that merge into one.
 * What goes goes through tier.c (offloaded first where configured).
 */
#include <stdlib.h>
#include <time.h>

#include <event2/event.h>

#include "store/alloc_internal.h"
#include "store/master/state_internal.h"

/* Objects one eviction pass looks at: bounds the time an event waits;
 * fewer with a journal, where each one freed is a row deleted too. */
#define EVICT_SCAN_MAX 8000
#define EVICT_SCAN_JOURNAL 2000
/* A put that finds no free range evicts a run of neighbours in one
 * segment: at most this many objects go for it (fewer with a journal: a
 * row deleted takes some microseconds more, 4096 some 10 ms). */
#define RUN_MAX 16384
#define RUN_MAX_JOURNAL 4096

static double cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One pass of eviction, begun at CPU time @p t0, freed @p freed bytes:
 * what /metrics reports. */
static void count_pass(struct stored *s, uint64_t freed, double t0)
{
	double cpu = cpu_s() - t0;

	s->stats.evict_passes++;
	s->stats.evict_passes_ok += freed > 0;
	s->stats.evicted_bytes += freed;
	if (cpu > s->stats.evict_cpu_max_s)
		s->stats.evict_cpu_max_s = cpu;
}

uint64_t evict(struct stored *s, uint64_t target)
{
	unsigned scanned = 0, most = s->journal ? EVICT_SCAN_JOURNAL :
						  EVICT_SCAN_MAX;
	int64_t now = stored_now_ms();
	double t0 = cpu_s();
	uint64_t freed = 0, n;

	for (int pass = 0; pass < 2 && freed < target; pass++) {
		struct list *l = s->lru.prev, *prev;

		for (; l != &s->lru && freed < target &&
		       scanned < most; l = prev, scanned++) {
			struct object *o = container_of(l, struct object, link);

			prev = l->prev;
			if (o->lease_until_ms > now || o->task ||
			    (o->flags & STORED_HARD_PIN) ||
			    (!pass && (o->flags & STORED_SOFT_PIN)) ||
			    !objects_visible(o))  /* it holds no space yet */
				continue;
			n = tier_evict(s, o);
			freed += n;
			s->stats.evicted += n > 0;
		}
	}
	count_pass(s, freed, t0);
	return freed;
}

/* May @p o go to make room? Complete (a put in progress or set aside
 * is on no LRU list but holds ranges too), with no lease, no pin and
 * no copy between tiers. */
static bool obj_may_go(const struct object *o, int64_t now)
{
	return o->state == OBJ_COMPLETE && o->lease_until_ms <= now &&
	       !o->task && !(o->flags & (STORED_HARD_PIN | STORED_SOFT_PIN));
}

static bool may_go(void *tag, void *arg)
{
	return obj_may_go(((const struct replica *)tag)->obj,
			  *(const int64_t *)arg);
}

/* evict_run() (state_internal.h): the run found is evicted (offloaded
 * first where tier.c says so: then the room comes once the copies
 * end). */
bool evict_run(struct stored *s, uint64_t len, uint32_t *visits)
{
	int64_t now = stored_now_ms();
	double t0 = cpu_s();
	uint64_t freed = 0, b;
	struct list *l;
	uint32_t n = 0;

	if (!s->run && !(s->run = malloc(RUN_MAX * sizeof(*s->run))))
		return false;
	for (l = s->lru.prev; l != &s->lru && !n && *visits; l = l->prev) {
		struct object *o = container_of(l, struct object, link);

		--*visits;
		if (!obj_may_go(o, now))
			continue;
		for (unsigned i = 0; i < o->nrep && !n; i++) {
			struct segment *g = o->rep[i].seg;

			if (g && g->online && !segment_ssd(g) && g->size >= len)
				n = store_alloc_run(g->alloc, o->rep[i].alloc_id,
						    len, may_go, &now, s->run,
						    s->journal ? RUN_MAX_JOURNAL :
						    RUN_MAX, visits);
		}
	}
	for (uint32_t i = 0; i < n; i++) {
		b = tier_evict(s, ((struct replica *)s->run[i])->obj);
		freed += b;
		s->stats.evicted += b > 0;
	}
	count_pass(s, freed, t0);
	return n > 0;
}

bool objects_above_watermark(const struct stored *s)
{
	return (double)(s->used - s->offloading) >
	       s->cfg.high_watermark * (double)s->capacity;
}

/* A timer of 0 fires after the poll, so the sockets are served in
 * between (an event made active from a callback would run in this
 * pass). */
void objects_evict_soon(struct stored *s)
{
	static const struct timeval now = { 0, 0 };

	event_add(s->evict_ev, &now);
}

/* Past the watermark, eviction_ratio of the capacity goes, in passes;
 * it stops early if a pass frees nothing (all is leased or pinned). */
void objects_evict_watermark(struct stored *s)
{
	uint64_t freed;

	if (!s->evict_left) {
		if (!objects_above_watermark(s))
			return;
		s->evict_left = (uint64_t)(s->cfg.evict_ratio *
					   (double)s->capacity);
		if (!s->evict_left)
			s->evict_left = 1;
	}
	freed = evict(s, s->evict_left);
	s->evict_left = !freed || freed >= s->evict_left ?
			0 : s->evict_left - freed;
	if (s->evict_left)
		objects_evict_soon(s);
}
