/*
 * Offsets in a remote segment: a two-level segregated-fit allocator
 * (the design of sebbbi's OffsetAllocator, which Mooncake's master uses)
 * whose bookkeeping lives in the master's memory, never in the segment it
 * manages: the segment's bytes belong to a client on another host.
 *
 * Free ranges sit in 512 bins indexed by a small float of their size (3
 * mantissa bits, 6 exponent bits: bins grow by 1/8 of their size), with
 * a 64-bit mask of non-empty top bins and an 8-bit mask of non-empty bins
 * under each. An allocation rounds its size up to a bin boundary, finds
 * the first non-empty bin at or above it with two bit scans, splits the
 * range it takes there and files the rest: O(1), no search of lists. A
 * release merges with free neighbours (each range knows the ranges
 * beside it) before it files the result. Waste: at most 1/8 of a request
 * is lost to picking a bin ranged above it, never to the range itself
 * (the remainder goes back to a bin).
 *
 * Not thread-safe: one reactor owns each allocator.
 */
#ifndef XFER_STORE_ALLOC_INTERNAL_H
#define XFER_STORE_ALLOC_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

/* Largest alignment store_alloc_new() takes (1 MiB). */
#define STORE_ALLOC_ALIGN_MAX (1u << 20)

struct store_alloc;

/**
 * An allocator for the offsets [0, @p size) of one segment.
 * @param size       bytes managed (rounded down to @p align), at least
 *                   @p align
 * @param align      every offset and size is a multiple of it: a power
 *                   of two from 1 to STORE_ALLOC_ALIGN_MAX
 * @param max_allocs most live allocations (>= 1); the bookkeeping grows
 *                   on demand up to 2 * @p max_allocs + 1 ranges of 48
 *                   bytes each
 * @return the allocator, or NULL with errno EINVAL (a bad argument) or
 *         ENOMEM.
 */
struct store_alloc *store_alloc_new(uint64_t size, uint64_t align,
				    uint32_t max_allocs);

/** Free @p a and its bookkeeping (NULL is fine). Live allocations go
 *  with it. */
void store_alloc_free(struct store_alloc *a);

/**
 * Allocate @p len bytes (rounded up to the alignment).
 * @param offset gets the offset of the range in the segment
 * @param id     gets the handle that store_alloc_release() takes
 * @return 0; -EINVAL (@p len is 0 or rounds past 2^63); -ENOSPC (no free
 *         range that large, or max_allocs allocations are live);
 *         -ENOMEM (the bookkeeping could not grow). On error nothing
 *         changed.
 */
int store_alloc_get(struct store_alloc *a, uint64_t len, uint64_t *offset,
		    uint32_t *id);

/**
 * Give back allocation @p id; its range merges with free neighbours.
 * @return 0, or -EINVAL if @p id is not a live allocation of @p a.
 */
int store_alloc_release(struct store_alloc *a, uint32_t id);

/* One allocation to restore: offset and length in bytes. */
struct store_alloc_range {
	uint64_t off, len;
};

/**
 * Rebuild the allocations of an earlier life of @p a (a master restarted
 * from its journal hands back the ranges its objects held): @p n ranges
 * in ascending order of offset, none overlapping, each length rounded up
 * to the alignment as store_alloc_get() does. @p a must have no live
 * allocation. Their handles go to @p ids (n of them), in order; the gaps
 * between them become free ranges.
 * @return 0; -EINVAL (@p a has live allocations, an offset that is not
 *         aligned, a length of 0, ranges out of order, overlapping or
 *         past the end); -ENOSPC (more than max_allocs); -ENOMEM. On
 *         error @p a is as it was.
 */
int store_alloc_restore(struct store_alloc *a,
			const struct store_alloc_range *r, uint32_t n,
			uint32_t *ids);

/** Attach @p tag to live allocation @p id (store_alloc_run() hands it
 *  back); a new allocation has NULL. Not live: nothing happens. */
void store_alloc_set_tag(struct store_alloc *a, uint32_t id, void *tag);

/**
 * A run of adjacent ranges around live allocation @p id that, were its
 * allocations released, would merge into one free range from which
 * store_alloc_get() of @p len surely succeeds (@p len rounded up to
 * the start of its bin, as a get searches: at most 1/8 more): @p id,
 * then the ranges after it, then those before it, each free or an
 * allocation whose tag @p may_go(tag, @p arg) accepts, taken until they
 * add up. Nothing changes: the caller releases what it chooses.
 * Work is bounded by @p visits: each range looked at takes one.
 * @param tags   gets the tags of the allocations in the run (@p id's
 *               first); @p max of them at most
 * @param visits ranges left to look at; decreased by those looked at
 * @return how many allocations the run holds (>= 1), or 0: no such run
 *         around @p id (one @p may_go refuses is in the way on both
 *         sides, the segment ends, it needs more than @p max
 *         allocations, or @p *visits ran out), or @p id is not live.
 */
uint32_t store_alloc_run(const struct store_alloc *a, uint32_t id,
			 uint64_t len, bool (*may_go)(void *tag, void *arg),
			 void *arg, void **tags, uint32_t max,
			 uint32_t *visits);

/** Bytes managed (the size given to store_alloc_new(), aligned). */
uint64_t store_alloc_size(const struct store_alloc *a);

/** Bytes allocated now (sizes rounded to the alignment). */
uint64_t store_alloc_used(const struct store_alloc *a);

/** Live allocations. */
uint32_t store_alloc_count(const struct store_alloc *a);

/** The size of allocation @p id (rounded), or 0 if @p id is not live. */
uint64_t store_alloc_len(const struct store_alloc *a, uint32_t id);

#endif
