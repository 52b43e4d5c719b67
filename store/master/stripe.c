/*
 * Striped replicas (docs/STORE.md, Striping): with --dram_shard_size,
 * a DRAM replica of an object longer than it is cut into shards, each
 * on a segment of its own, so that one get or put moves its bytes
 * through several hosts at once (the store's design: an object of
 * ceil(size / dram_shard_size) blocks per replica; a Mooncake memory
 * replica's descriptor is likewise a list of buffer descriptors).
 *
 * A striped replica's shards sit side by side in the object's rep[],
 * part 0 first, each knowing its index and their count; shard i holds
 * bytes [i * S, min((i + 1) * S, len)) with S = len / parts rounded up
 * to SEG_ALIGN, so a shard's place in the object is never stored. A
 * replica is kept or dropped whole: losing one shard's segment drops
 * the others too (objects.c).
 */
#include <string.h>

#include "store/alloc_internal.h"
#include "store/master/state_internal.h"

/* Bytes of every shard but the last of a @p len byte object. */
static uint64_t shard_span(uint64_t len, unsigned parts)
{
	uint64_t s = (len + parts - 1) / parts;

	return (s + SEG_ALIGN - 1) & ~(uint64_t)(SEG_ALIGN - 1);
}

uint64_t stripe_len(const struct object *o, const struct replica *r)
{
	uint64_t span;

	if (r->parts <= 1)
		return o->len;
	span = shard_span(o->len, r->parts);
	return r->part + 1u < r->parts ? span :
					 o->len - span * (r->parts - 1u);
}

unsigned stripe_parts(const struct stored *s, uint64_t len, unsigned want,
		      unsigned ssd)
{
	uint64_t parts, dram = 0;
	unsigned room;

	if (!s->cfg.shard_size || !want || len <= s->cfg.shard_size)
		return 1;
	for (size_t i = 0; i < s->nsegs; i++)
		dram += !segment_ssd(s->segs[i]);
	/* rep[] holds every buffer, and a slot for a tier copy */
	room = STORE_REPLICA_MAX - ssd -
	       (s->cfg.offload || s->cfg.promotion_on_hit);
	parts = (len - 1) / s->cfg.shard_size + 1;
	if (parts > dram / want)
		parts = dram / want;
	if (parts > room / want)
		parts = room / want;
	/* no shard left empty by the rounding of the others */
	while (parts > 1 && shard_span(len, (unsigned)parts) * (parts - 1) >=
	       len)
		parts--;
	return parts > 1 ? (unsigned)parts : 1;
}

/* A segment of @p o's replica not yet holding any of its buffers, with
 * room for @p len bytes: @p preferred if given, else from @p start on. */
static struct replica *place_shard(struct stored *s, struct object *o,
				   uint64_t len, size_t start,
				   const struct store_str *preferred)
{
	struct replica *r = NULL;

	for (size_t k = 0; k < s->nsegs && !r; k++) {
		struct segment *g = s->segs[(start + k) % s->nsegs];

		if (segment_ssd(g))
			continue;
		if (preferred && (g->name_len != preferred->len ||
				  memcmp(g->name, preferred->p,
					 preferred->len)))
			continue;
		r = objects_place_len(s, o, g, len);
	}
	return r;
}

unsigned stripe_place(struct stored *s, struct object *o, unsigned want,
		      unsigned parts, const struct store_str *preferred)
{
	struct replica *got[STORE_REPLICA_MAX];
	unsigned done = 0;
	size_t start;

	for (; done < want; done++) {
		unsigned n = 0;

		for (; n < parts; n++) {
			struct replica tmp = { .part = (uint8_t)n,
					       .parts = (uint8_t)parts };
			uint64_t len = stripe_len(o, &tmp);
			struct replica *r = NULL;

			s->rng ^= s->rng << 13;
			s->rng ^= s->rng >> 7;
			s->rng ^= s->rng << 17;
			start = s->rng % s->nsegs;
			if (!done && !n && preferred->len)
				r = place_shard(s, o, len, 0, preferred);
			if (!r)
				r = place_shard(s, o, len, start, NULL);
			if (!r)
				break;
			/* side by side: a slot given back earlier is the
			 * next one, or the object's rep[] grows by it */
			if (n && r != got[n - 1] + 1) {
				objects_release_replica(s, r);
				break;
			}
			r->part = (uint8_t)n;
			r->parts = (uint8_t)parts;
			got[n] = r;
		}
		if (n < parts) {
			while (n--)
				objects_release_replica(s, got[n]);
			break;
		}
	}
	return done;
}

bool stripe_any(const struct object *o)
{
	for (unsigned i = 0; i < o->nrep; i++)
		if (o->rep[i].seg && o->rep[i].parts > 1)
			return true;
	return false;
}

bool stripe_ready(const struct object *o, unsigned i)
{
	const struct replica *r = &o->rep[i];
	unsigned n = r->parts > 1 ? r->parts : 1;

	if (r->part || i + n > o->nrep)
		return false;
	for (unsigned j = 0; j < n; j++, r++)
		if (!r->seg || !r->seg->online || r->filling)
			return false;
	return true;
}

unsigned stripe_wire(const struct object *o, unsigned i,
		     struct store_replica *out)
{
	const struct replica *r = &o->rep[i];
	unsigned n = r->parts > 1 ? r->parts : 1;

	for (unsigned j = 0; j < n; j++, r++)
		out[j] = (struct store_replica){
			.addr = r->seg->base + r->off,
			.len = stripe_len(o, r),
			.endpoint = { r->seg->name, r->seg->name_len },
			.shards = (uint8_t)(j ? 0 : n),
		};
	return n;
}
