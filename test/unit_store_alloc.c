/*
 * The store's segment allocator (store/alloc.c): ranges never overlap,
 * neighbours merge when released, a full segment refuses and serves again
 * once space comes back, runs of neighbours to release for a large get
 * are found, and random traffic agrees with a bitmap model.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "store/alloc_internal.h"

static void test_bad_args(void **state)
{
	struct store_alloc *a;
	uint64_t off;
	uint32_t id;

	(void)state;
	errno = 0;
	assert_null(store_alloc_new(1 << 20, 3, 16));
	assert_int_equal(errno, EINVAL);
	assert_null(store_alloc_new(1 << 20, 0, 16));
	assert_null(store_alloc_new(1 << 20, 2u << 20, 16));
	assert_null(store_alloc_new(100, 128, 16));       /* under one unit */
	assert_null(store_alloc_new(1 << 20, 64, 0));
	a = store_alloc_new((1 << 20) + 50, 64, 16);
	assert_non_null(a);
	assert_int_equal(store_alloc_size(a), 1 << 20);   /* aligned down */
	assert_int_equal(store_alloc_get(a, 0, &off, &id), -EINVAL);
	assert_int_equal(store_alloc_get(a, UINT64_MAX, &off, &id), -EINVAL);
	assert_int_equal(store_alloc_get(a, (1 << 20) + 1, &off, &id),
			 -ENOSPC);
	assert_int_equal(store_alloc_release(a, 0), -EINVAL); /* a free range */
	assert_int_equal(store_alloc_release(a, 12345), -EINVAL);
	assert_int_equal(store_alloc_get(a, 1, &off, &id), 0);
	assert_int_equal(store_alloc_len(a, id), 64);      /* rounded up */
	assert_int_equal(store_alloc_used(a), 64);
	assert_int_equal(store_alloc_release(a, id), 0);
	assert_int_equal(store_alloc_release(a, id), -EINVAL); /* twice */
	assert_int_equal(store_alloc_used(a), 0);
	assert_int_equal(store_alloc_count(a), 0);
	store_alloc_free(a);
	store_alloc_free(NULL);
}

/* 256 pages fill 1 MiB exactly; the 257th is refused; a page released
 * in the middle is served again, two released neighbours serve a
 * request of both. */
static void test_full_then_free(void **state)
{
	struct store_alloc *a = store_alloc_new(1 << 20, 4096, 1024);
	uint64_t off[256], o;
	uint32_t id[256], i2;

	(void)state;
	assert_non_null(a);
	for (int i = 0; i < 256; i++) {
		assert_int_equal(store_alloc_get(a, 4096, &off[i], &id[i]), 0);
		assert_int_equal(off[i], (uint64_t)i * 4096);
	}
	assert_int_equal(store_alloc_used(a), 1 << 20);
	assert_int_equal(store_alloc_get(a, 1, &o, &i2), -ENOSPC);
	assert_int_equal(store_alloc_release(a, id[100]), 0);
	assert_int_equal(store_alloc_get(a, 8192, &o, &i2), -ENOSPC);
	assert_int_equal(store_alloc_get(a, 4096, &o, &id[100]), 0);
	assert_int_equal(o, 100 * 4096);
	assert_int_equal(store_alloc_release(a, id[100]), 0);
	assert_int_equal(store_alloc_release(a, id[101]), 0);
	assert_int_equal(store_alloc_get(a, 8192, &o, &i2), 0);
	assert_int_equal(o, 100 * 4096);
	store_alloc_free(a);
}

/* At most max_allocs live, whatever the space. */
static void test_max_allocs(void **state)
{
	struct store_alloc *a = store_alloc_new(1 << 20, 64, 3);
	uint64_t o;
	uint32_t id[4];

	(void)state;
	for (int i = 0; i < 3; i++)
		assert_int_equal(store_alloc_get(a, 64, &o, &id[i]), 0);
	assert_int_equal(store_alloc_get(a, 64, &o, &id[3]), -ENOSPC);
	assert_int_equal(store_alloc_release(a, id[1]), 0);
	assert_int_equal(store_alloc_get(a, 64, &o, &id[3]), 0);
	store_alloc_free(a);
}

/* Everything released in random order merges back into one range: the
 * whole segment can be had again. */
static void test_coalesce_all(void **state)
{
	enum { N = 2000 };
	struct store_alloc *a = store_alloc_new(64 << 20, 64, N);
	uint32_t id[N], t;
	uint64_t o;
	int n = 0;

	(void)state;
	srand(7);
	while (n < N && !store_alloc_get(a, 64 + (uint64_t)(rand() % 40000),
					 &o, &id[n]))
		n++;
	assert_true(n > 100);
	for (int i = n - 1; i > 0; i--) {        /* shuffle */
		int j = rand() % (i + 1);

		t = id[i];
		id[i] = id[j];
		id[j] = t;
	}
	for (int i = 0; i < n; i++)
		assert_int_equal(store_alloc_release(a, id[i]), 0);
	assert_int_equal(store_alloc_used(a), 0);
	assert_int_equal(store_alloc_get(a, 64 << 20, &o, &t), 0);
	assert_int_equal(o, 0);
	store_alloc_free(a);
}

/* Ranges of an earlier life come back at their offsets, the gaps
 * between them free; a bad list changes nothing. */
static void test_restore(void **state)
{
	typedef struct store_alloc_range R;
	static const R ok[] = { { 0, 64 }, { 128, 100 }, { 4096, 4096 } };
	static const R overlap[] = { { 0, 64 }, { 32, 64 } };
	static const R order[] = { { 128, 64 }, { 0, 64 } };
	static const R bad[] = {
		{ 10, 64 }, { 0, 0 }, { (1 << 20) - 64, 65 }, { 2u << 20, 64 },
	};
	static const R five[] = {
		{ 0, 64 }, { 64, 64 }, { 128, 64 }, { 192, 64 }, { 256, 64 },
	};
	static const R top[] = { { 512 << 10, 512 << 10 } };
	struct store_alloc *a = store_alloc_new(1 << 20, 64, 4);
	uint32_t ids[5], id;
	uint64_t o;

	(void)state;
	assert_int_equal(store_alloc_restore(a, overlap, 2, ids), -EINVAL);
	assert_int_equal(store_alloc_restore(a, order, 2, ids), -EINVAL);
	for (int i = 0; i < 4; i++)   /* unaligned, empty, past the end */
		assert_int_equal(store_alloc_restore(a, &bad[i], 1, ids),
				 -EINVAL);
	assert_int_equal(store_alloc_restore(a, five, 5, ids), -ENOSPC);
	assert_int_equal(store_alloc_used(a), 0);

	assert_int_equal(store_alloc_restore(a, ok, 3, ids), 0);
	assert_int_equal(store_alloc_count(a), 3);
	assert_int_equal(store_alloc_used(a), 64 + 128 + 4096);
	assert_int_equal(store_alloc_len(a, ids[1]), 128);
	assert_int_equal(store_alloc_restore(a, ok, 1, &id), -EINVAL);
	/* the smallest gap serves the smallest request */
	assert_int_equal(store_alloc_get(a, 64, &o, &id), 0);
	assert_int_equal(o, 64);
	assert_int_equal(store_alloc_release(a, id), 0);
	/* the gaps and the tail merge back with what is released */
	for (int i = 0; i < 3; i++)
		assert_int_equal(store_alloc_release(a, ids[i]), 0);
	assert_int_equal(store_alloc_get(a, 1 << 20, &o, &id), 0);
	assert_int_equal(o, 0);
	store_alloc_free(a);

	/* many at once: the bookkeeping grows to hold them all */
	{
		enum { N = 5000 };
		static struct store_alloc_range many[N];
		static uint32_t many_ids[N];

		a = store_alloc_new(64 << 20, 64, N);
		for (int i = 0; i < N; i++)
			many[i] = (struct store_alloc_range){ 128ull * i, 64 };
		assert_int_equal(store_alloc_restore(a, many, N, many_ids), 0);
		assert_int_equal(store_alloc_used(a), 64 * N);
		assert_int_equal(store_alloc_get(a, 64, &o, &id), -ENOSPC);
		assert_int_equal(store_alloc_release(a, many_ids[7]), 0);
		assert_int_equal(store_alloc_get(a, 128, &o, &id), 0);
		assert_int_equal(o, 7 * 128 - 64); /* the gap before it on */
		store_alloc_free(a);
	}

	/* a range that ends the segment leaves no tail */
	a = store_alloc_new(1 << 20, 64, 4);
	assert_int_equal(store_alloc_restore(a, top, 1, ids), 0);
	assert_int_equal(store_alloc_get(a, 512 << 10, &o, &id), 0);
	assert_int_equal(o, 0);
	assert_int_equal(store_alloc_get(a, 64, &o, &id), -ENOSPC);
	store_alloc_free(a);
}

/* ---- random traffic against a bitmap of the units in use ---- */

#define UNITS 65536          /* of 64 bytes: 4 MiB */
#define MAXLIVE 4096

static uint8_t used_map[UNITS / 8];

static bool bit(uint64_t u)
{
	return used_map[u / 8] & (1u << (u % 8));
}

static bool page_may_go(void *tag, void *arg)
{
	(void)arg;
	return *(const bool *)tag;
}

/* Runs around an allocation: after it first, then before it, across free
 * ranges, stopped by one that may not go; sizes rounded as a get looks
 * for them; bounded by max and visits; releasing a run makes the get
 * succeed there. */
static void test_run(void **state)
{
	struct store_alloc *a = store_alloc_new(1 << 20, 4096, 1024);
	static bool ok[256];
	uint32_t id[256], visits = 1000, v;
	uint64_t off;
	void *tags[32];

	(void)state;
	for (int i = 0; i < 256; i++) {
		ok[i] = true;
		assert_int_equal(store_alloc_get(a, 4096, &off, &id[i]), 0);
		assert_int_equal(off, (uint64_t)i * 4096);
		store_alloc_set_tag(a, id[i], &ok[i]);
	}
	assert_int_equal(store_alloc_run(a, id[10], 3 * 4096, page_may_go,
					 NULL, tags, 32, &visits), 3);
	assert_ptr_equal(tags[0], &ok[10]);
	assert_ptr_equal(tags[1], &ok[11]);
	assert_ptr_equal(tags[2], &ok[12]);
	assert_int_equal(visits, 997);
	ok[12] = false;                          /* then it grows left */
	assert_int_equal(store_alloc_run(a, id[10], 3 * 4096, page_may_go,
					 NULL, tags, 32, &visits), 3);
	assert_ptr_equal(tags[1], &ok[11]);
	assert_ptr_equal(tags[2], &ok[9]);
	ok[8] = false;                           /* 9, 10, 11 only */
	assert_int_equal(store_alloc_run(a, id[10], 4 * 4096, page_may_go,
					 NULL, tags, 32, &visits), 0);
	assert_int_equal(store_alloc_run(a, id[8], 4096, page_may_go, NULL,
					 tags, 32, &visits), 0);
	/* free ranges count and hold no tag */
	assert_int_equal(store_alloc_release(a, id[14]), 0);
	assert_int_equal(store_alloc_release(a, id[15]), 0);
	ok[12] = true;
	assert_int_equal(store_alloc_run(a, id[13], 4 * 4096, page_may_go,
					 NULL, tags, 32, &visits), 2);
	assert_ptr_equal(tags[1], &ok[16]);
	/* 17 pages: a get looks in the bin from 18 pages */
	assert_int_equal(store_alloc_run(a, id[100], 17 * 4096, page_may_go,
					 NULL, tags, 32, &visits), 18);
	assert_int_equal(store_alloc_run(a, id[100], 17 * 4096, page_may_go,
					 NULL, tags, 17, &visits), 0);
	v = 10;
	assert_int_equal(store_alloc_run(a, id[100], 17 * 4096, page_may_go,
					 NULL, tags, 32, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(store_alloc_run(a, id[100], 17 * 4096, page_may_go,
					 NULL, tags, 32, &visits), 18);
	for (int i = 100; i < 118; i++)
		assert_int_equal(store_alloc_release(a, id[i]), 0);
	assert_int_equal(store_alloc_get(a, 17 * 4096, &off, &id[100]), 0);
	assert_int_equal(off, 100 * 4096);
	assert_int_equal(store_alloc_run(a, id[100], 2 << 20, page_may_go,
					 NULL, tags, 32, &visits), 0);
	assert_int_equal(store_alloc_run(a, id[14], 4096, page_may_go, NULL,
					 tags, 32, &visits), 0);   /* not live */
	store_alloc_free(a);
}

static void mark(uint64_t u, uint64_t n, bool on)
{
	for (uint64_t k = u; k < u + n; k++) {
		assert_int_equal(bit(k), !on);     /* no overlap, no double free */
		if (on)
			used_map[k / 8] |= (uint8_t)(1u << (k % 8));
		else
			used_map[k / 8] &= (uint8_t)~(1u << (k % 8));
	}
}

static uint64_t longest_free_run(void)
{
	uint64_t best = 0, run = 0;

	for (uint64_t k = 0; k < UNITS; k++) {
		run = bit(k) ? 0 : run + 1;
		if (run > best)
			best = run;
	}
	return best;
}

static void test_random_model(void **state)
{
	struct store_alloc *a = store_alloc_new(UNITS * 64, 64, MAXLIVE);
	struct { uint32_t id; uint64_t off, len; } live[MAXLIVE];
	uint64_t used = 0, off, len;
	int n = 0, refusals = 0;
	uint32_t id;

	(void)state;
	memset(used_map, 0, sizeof(used_map));
	srand(11);
	for (int op = 0; op < 200000; op++) {
		if (n && (n == MAXLIVE || rand() % 100 < 45)) {
			int k = rand() % n;

			assert_int_equal(store_alloc_release(a, live[k].id), 0);
			mark(live[k].off / 64, live[k].len / 64, false);
			used -= live[k].len;
			live[k] = live[--n];
			continue;
		}
		/* mostly small, some large: up to 1/16 of the segment */
		len = rand() % 10 ? 1 + (uint64_t)(rand() % 8192)
				  : 1 + (uint64_t)(rand() % (UNITS * 4));
		int ret = store_alloc_get(a, len, &off, &id);
		if (ret) {
			uint64_t units = (len + 63) / 64;

			assert_int_equal(ret, -ENOSPC);
			/* refused only if no free run could hold it: bins lose
			 * at most 1/8 of a request */
			if (refusals++ % 50 == 0)
				assert_true(longest_free_run() <
					    units + units / 8 + 8);
			continue;
		}
		assert_int_equal(off % 64, 0);
		assert_true(off + len <= UNITS * 64);
		assert_int_equal(store_alloc_len(a, id), (len + 63) / 64 * 64);
		live[n].id = id;
		live[n].off = off;
		live[n].len = (len + 63) / 64 * 64;
		mark(off / 64, live[n].len / 64, true);
		used += live[n++].len;
		assert_int_equal(store_alloc_used(a), used);
		assert_int_equal(store_alloc_count(a), n);
	}
	assert_true(refusals > 0);              /* the segment did fill */
	store_alloc_free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_args),
		cmocka_unit_test(test_full_then_free),
		cmocka_unit_test(test_max_allocs),
		cmocka_unit_test(test_coalesce_all),
		cmocka_unit_test(test_restore),
		cmocka_unit_test(test_run),
		cmocka_unit_test(test_random_model),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
