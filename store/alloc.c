/*
 * The segment allocator (alloc_internal.h): two-level segregated fit on
 * ranges kept in arrays outside the managed memory. Sizes and offsets are
 * counted in units of the alignment inside.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "store/alloc_internal.h"

#define MANT_BITS 3
#define MANT_VALUE (1u << MANT_BITS)
#define MANT_MASK (MANT_VALUE - 1)
#define TOP_BINS 64
#define LEAF_BINS (TOP_BINS * MANT_VALUE)
#define NONE UINT32_MAX

/* One range: free (filed in its bin's list) or allocated. */
struct range {
	uint64_t off, len;           /* in units */
	uint32_t bin_prev, bin_next; /* the bin's list, free ranges only */
	uint32_t nb_prev, nb_next;   /* the ranges beside it in the segment */
	bool used;
	void *tag;                   /* the owner's, allocated ranges only */
};

struct store_alloc {
	unsigned shift;              /* log2 of the alignment */
	uint64_t units;              /* size in units */
	uint64_t free_units;
	uint32_t count, max_allocs;
	uint64_t top_mask;           /* bit t: some bin t*8 + l is filled */
	uint8_t leaf_mask[TOP_BINS]; /* bit l: bin t*8 + l is filled */
	uint32_t bins[LEAF_BINS];    /* first range of each bin, or NONE */
	struct range *r;             /* ranges[cap] */
	uint32_t cap, max_ranges;
	uint32_t *spare;             /* indices of unused range slots */
	uint32_t nspare;
	uint32_t next_new;           /* slots below it have been handed out */
};

/* The bin whose sizes start at or above @p n (the first that surely fits
 * @p n): a float of 3 mantissa bits, rounded up. */
static uint32_t bin_up(uint64_t n)
{
	unsigned start;
	uint32_t mant;

	if (n < MANT_VALUE)
		return (uint32_t)n;
	start = 63 - (unsigned)__builtin_clzll(n) - MANT_BITS;
	mant = (uint32_t)(n >> start) & MANT_MASK;
	if (n & ((1ull << start) - 1))
		mant++;          /* a carry moves to the next exponent */
	return ((start + 1) << MANT_BITS) + mant;
}

/* The bin that holds a free range of @p n units: rounded down. */
static uint32_t bin_down(uint64_t n)
{
	unsigned start;

	if (n < MANT_VALUE)
		return (uint32_t)n;
	start = 63 - (unsigned)__builtin_clzll(n) - MANT_BITS;
	return ((start + 1) << MANT_BITS) +
	       ((uint32_t)(n >> start) & MANT_MASK);
}

/* The smallest size that bin @p b holds: the inverse of bin_up(). */
static uint64_t bin_start(uint32_t b)
{
	if (b < MANT_VALUE)
		return b;
	return (uint64_t)(MANT_VALUE | (b & MANT_MASK)) <<
	       ((b >> MANT_BITS) - 1);
}

/* The lowest set bit of @p mask at or above @p from, or NONE. */
static uint32_t lowest_from(uint64_t mask, uint32_t from)
{
	mask = from >= 64 ? 0 : mask & (~0ull << from);
	return mask ? (uint32_t)__builtin_ctzll(mask) : NONE;
}

/* Room for @p n more ranges than are in use now. @return 0, -ENOMEM. */
static int reserve(struct store_alloc *a, uint32_t n)
{
	uint32_t cap = a->cap;
	struct range *r;
	uint32_t *spare;

	if (a->nspare + (cap - a->next_new) >= n)
		return 0;
	while (a->nspare + (cap - a->next_new) < n && cap < a->max_ranges)
		cap = cap > a->max_ranges / 2 ? a->max_ranges : 2 * cap;
	if (a->nspare + (cap - a->next_new) < n)
		return -ENOMEM;
	r = realloc(a->r, cap * sizeof(*r));
	if (!r)
		return -ENOMEM;
	a->r = r;
	spare = realloc(a->spare, cap * sizeof(*spare));
	if (!spare)
		return -ENOMEM;
	a->spare = spare;
	a->cap = cap;
	return 0;
}

/* A range slot; reserve() made sure there is one. */
static uint32_t slot_take(struct store_alloc *a)
{
	return a->nspare ? a->spare[--a->nspare] : a->next_new++;
}

static void slot_give(struct store_alloc *a, uint32_t i)
{
	a->spare[a->nspare++] = i;
}

/* File a free range of @p len units at @p off in its bin. @return its
 * slot. */
static uint32_t file_free(struct store_alloc *a, uint64_t off, uint64_t len)
{
	uint32_t b = bin_down(len), i = slot_take(a), head = a->bins[b];

	a->leaf_mask[b >> MANT_BITS] |= 1u << (b & MANT_MASK);
	a->top_mask |= 1ull << (b >> MANT_BITS);
	a->r[i] = (struct range){
		.off = off, .len = len, .bin_prev = NONE, .bin_next = head,
		.nb_prev = NONE, .nb_next = NONE,
	};
	if (head != NONE)
		a->r[head].bin_prev = i;
	a->bins[b] = i;
	a->free_units += len;
	return i;
}

/* Take free range @p i out of its bin's list (the slot stays). */
static void unfile(struct store_alloc *a, uint32_t i)
{
	struct range *x = &a->r[i];
	uint32_t b;

	if (x->bin_next != NONE)
		a->r[x->bin_next].bin_prev = x->bin_prev;
	if (x->bin_prev != NONE) {
		a->r[x->bin_prev].bin_next = x->bin_next;
	} else {
		b = bin_down(x->len);
		a->bins[b] = x->bin_next;
		if (x->bin_next == NONE) {
			a->leaf_mask[b >> MANT_BITS] &=
				(uint8_t)~(1u << (b & MANT_MASK));
			if (!a->leaf_mask[b >> MANT_BITS])
				a->top_mask &= ~(1ull << (b >> MANT_BITS));
		}
	}
	a->free_units -= x->len;
}

struct store_alloc *store_alloc_new(uint64_t size, uint64_t align,
				    uint32_t max_allocs)
{
	struct store_alloc *a;

	if (!align || align > STORE_ALLOC_ALIGN_MAX || (align & (align - 1)) ||
	    size < align || !max_allocs || max_allocs > (UINT32_MAX - 2) / 2) {
		errno = EINVAL;
		return NULL;
	}
	a = calloc(1, sizeof(*a));
	if (!a)
		return NULL;
	a->shift = (unsigned)__builtin_ctzll(align);
	a->units = size >> a->shift;
	a->max_allocs = max_allocs;
	a->max_ranges = 2 * max_allocs + 1;
	memset(a->bins, 0xff, sizeof(a->bins));
	a->cap = a->max_ranges < 1024 ? a->max_ranges : 1024;
	a->r = malloc(a->cap * sizeof(*a->r));
	a->spare = malloc(a->cap * sizeof(*a->spare));
	if (!a->r || !a->spare) {
		store_alloc_free(a);
		errno = ENOMEM;
		return NULL;
	}
	file_free(a, 0, a->units);
	return a;
}

void store_alloc_free(struct store_alloc *a)
{
	if (!a)
		return;
	free(a->r);
	free(a->spare);
	free(a);
}

/* The first filled bin whose every range holds @p len units, or NONE. */
static uint32_t find_bin(const struct store_alloc *a, uint64_t len)
{
	uint32_t want = bin_up(len), top = want >> MANT_BITS, leaf = NONE;

	if (top >= TOP_BINS)
		return NONE;
	if (a->top_mask & (1ull << top))
		leaf = lowest_from(a->leaf_mask[top], want & MANT_MASK);
	if (leaf == NONE) {
		top = lowest_from(a->top_mask, top + 1);
		if (top == NONE)
			return NONE;
		leaf = (uint32_t)__builtin_ctz(a->leaf_mask[top]);
	}
	return (top << MANT_BITS) | leaf;
}

int store_alloc_get(struct store_alloc *a, uint64_t len, uint64_t *offset,
		    uint32_t *id)
{
	uint64_t mask = (1ull << a->shift) - 1, units, rest;
	uint32_t b, i, j;
	int ret;

	if (!len || len > UINT64_MAX - mask)
		return -EINVAL;
	units = (len + mask) >> a->shift;
	if (a->count == a->max_allocs)
		return -ENOSPC;
	b = find_bin(a, units);
	if (b == NONE)
		return -ENOSPC;
	ret = reserve(a, 1);     /* for the remainder of a split */
	if (ret)
		return ret;
	i = a->bins[b];
	unfile(a, i);
	rest = a->r[i].len - units;
	a->r[i].len = units;
	a->r[i].used = true;
	a->r[i].tag = NULL;
	if (rest) {
		j = file_free(a, a->r[i].off + units, rest);
		a->r[j].nb_prev = i;
		a->r[j].nb_next = a->r[i].nb_next;
		if (a->r[i].nb_next != NONE)
			a->r[a->r[i].nb_next].nb_prev = j;
		a->r[i].nb_next = j;
	}
	a->count++;
	*offset = a->r[i].off << a->shift;
	*id = i;
	return 0;
}

/* Free ranges and spare slots all have used false. */
static bool is_live(const struct store_alloc *a, uint32_t id)
{
	return id < a->next_new && a->r[id].used;
}

int store_alloc_release(struct store_alloc *a, uint32_t id)
{
	uint64_t off, len;
	uint32_t prev, next, i;

	if (!is_live(a, id))
		return -EINVAL;
	off = a->r[id].off;
	len = a->r[id].len;
	prev = a->r[id].nb_prev;
	next = a->r[id].nb_next;
	if (prev != NONE && !a->r[prev].used) {
		unfile(a, prev);
		off = a->r[prev].off;
		len += a->r[prev].len;
		slot_give(a, prev);
		prev = a->r[prev].nb_prev;
	}
	if (next != NONE && !a->r[next].used) {
		unfile(a, next);
		len += a->r[next].len;
		slot_give(a, next);
		next = a->r[next].nb_next;
	}
	a->r[id].used = false;
	slot_give(a, id);
	i = file_free(a, off, len);
	a->r[i].nb_prev = prev;
	a->r[i].nb_next = next;
	if (prev != NONE)
		a->r[prev].nb_next = i;
	if (next != NONE)
		a->r[next].nb_prev = i;
	a->count--;
	return 0;
}

/* Put slot @p x after @p prev in the segment's order (NONE: first). */
static void link_after(struct store_alloc *a, uint32_t prev, uint32_t x)
{
	a->r[x].nb_prev = prev;
	a->r[x].nb_next = NONE;
	if (prev != NONE)
		a->r[prev].nb_next = x;
}

int store_alloc_restore(struct store_alloc *a,
			const struct store_alloc_range *r, uint32_t n,
			uint32_t *ids)
{
	uint64_t mask = (1ull << a->shift) - 1, cur = 0, off, units;
	uint32_t prev = NONE, i;

	if (a->count)
		return -EINVAL;
	for (uint32_t k = 0; k < n; k++) {
		if ((r[k].off & mask) || !r[k].len ||
		    r[k].len > UINT64_MAX - mask)
			return -EINVAL;
		off = r[k].off >> a->shift;
		units = (r[k].len + mask) >> a->shift;
		if (off < cur || off > a->units || units > a->units - off)
			return -EINVAL;
		cur = off + units;
	}
	if (n > a->max_allocs)
		return -ENOSPC;
	/* the one free range a fresh allocator has goes, then 2n + 1 */
	if (reserve(a, 2 * n))
		return -ENOMEM;
	i = a->bins[bin_down(a->units)];
	unfile(a, i);
	slot_give(a, i);
	cur = 0;
	for (uint32_t k = 0; k < n; k++) {
		off = r[k].off >> a->shift;
		if (off > cur) {
			i = file_free(a, cur, off - cur);
			link_after(a, prev, i);
			prev = i;
		}
		i = slot_take(a);
		a->r[i] = (struct range){
			.off = off, .len = (r[k].len + mask) >> a->shift,
			.bin_prev = NONE, .bin_next = NONE, .used = true,
		};
		link_after(a, prev, i);
		prev = i;
		ids[k] = i;
		cur = off + a->r[i].len;
	}
	if (cur < a->units)
		link_after(a, prev, file_free(a, cur, a->units - cur));
	a->count = n;
	return 0;
}

void store_alloc_set_tag(struct store_alloc *a, uint32_t id, void *tag)
{
	if (is_live(a, id))
		a->r[id].tag = tag;
}

/* Take range @p i into the run: @return false if it may not go (or
 * @p tags is full). */
static bool run_take(const struct store_alloc *a, uint32_t i,
		     bool (*may_go)(void *tag, void *arg), void *arg,
		     void **tags, uint32_t max, uint32_t *n)
{
	if (!a->r[i].used)
		return true;
	if (*n == max || !may_go(a->r[i].tag, arg))
		return false;
	tags[(*n)++] = a->r[i].tag;
	return true;
}

uint32_t store_alloc_run(const struct store_alloc *a, uint32_t id,
			 uint64_t len, bool (*may_go)(void *tag, void *arg),
			 void *arg, void **tags, uint32_t max,
			 uint32_t *visits)
{
	uint64_t mask = (1ull << a->shift) - 1, need, got;
	uint32_t n = 0, i;

	if (!is_live(a, id) || !len || len > UINT64_MAX - mask || !*visits)
		return 0;
	need = (len + mask) >> a->shift;
	if (need >> 60)          /* past any segment; bin_start() overflows */
		return 0;
	need = bin_start(bin_up(need));   /* what find_bin() takes */
	if (need > a->units)
		return 0;
	--*visits;
	if (!run_take(a, id, may_go, arg, tags, max, &n))
		return 0;
	got = a->r[id].len;
	for (int dir = 0; dir < 2 && got < need; dir++) {
		i = dir ? a->r[id].nb_prev : a->r[id].nb_next;
		for (; i != NONE && got < need && *visits;
		     i = dir ? a->r[i].nb_prev : a->r[i].nb_next) {
			--*visits;
			if (!run_take(a, i, may_go, arg, tags, max, &n))
				break;
			got += a->r[i].len;
		}
	}
	return got >= need ? n : 0;
}

uint64_t store_alloc_size(const struct store_alloc *a)
{
	return a->units << a->shift;
}

uint64_t store_alloc_used(const struct store_alloc *a)
{
	return (a->units - a->free_units) << a->shift;
}

uint32_t store_alloc_count(const struct store_alloc *a)
{
	return a->count;
}

uint64_t store_alloc_len(const struct store_alloc *a, uint32_t id)
{
	return is_live(a, id) ? a->r[id].len << a->shift : 0;
}
