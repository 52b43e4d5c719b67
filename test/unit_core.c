/* Unit tests: slicing and the local buffer registry. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>

#include "core/buffers_internal.h"
#include "core/slice_internal.h"

static void test_slice_count(void **state)
{
	(void)state;
	assert_int_equal(xfer_slice_count(1, 65536), 1);
	assert_int_equal(xfer_slice_count(65536, 65536), 1);
	/* a tail under a quarter slice joins the last slice */
	assert_int_equal(xfer_slice_count(65537, 65536), 1);
	assert_int_equal(xfer_slice_count(65536 + 16383, 65536), 1);
	assert_int_equal(xfer_slice_count(65536 + 16384, 65536), 2);
	assert_int_equal(xfer_slice_count(16u << 20, 65536), 256);
	assert_int_equal(xfer_slice_count(100, 65536), 1);
	assert_int_equal(xfer_slice_count(5ull << 32, 4096), 5ull << 20);
}

/* Cut lengths around the slice size: the slices tile the request exactly,
 * in order, each a slice but the last (at most 1.25 slices), linked in
 * order. */
static void test_slice_cut(void **state)
{
	static const uint64_t lens[] = { 1, 4095, 4096, 4097, 5119, 5120,
					 3 * 4096, 10000 };
	char src[3 * 4096 + 1];

	(void)state;
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		struct xfer_request r = { XFER_WRITE, src, 0, 0x10000, lens[i] };
		size_t n = xfer_slice_count(lens[i], 4096);
		struct xfer_slice *s = calloc(n, sizeof(*s));
		struct xfer_task t;
		uint64_t off = 0;

		if (lens[i] > sizeof(src))
			r.source = malloc(lens[i]);
		xfer_slice_cut(&t, &r, 4096, s);
		for (size_t k = 0; k < n; k++) {
			assert_ptr_equal(s[k].task, &t);
			assert_int_equal(s[k].opcode, XFER_WRITE);
			assert_ptr_equal(s[k].local, (char *)r.source + off);
			assert_int_equal(s[k].remote, 0x10000 + off);
			if (k + 1 < n)
				assert_int_equal(s[k].len, 4096);
			assert_true(s[k].len > 0 && s[k].len < 4096 + 1024);
			assert_ptr_equal(s[k].next, k + 1 < n ? &s[k + 1] : NULL);
			off += s[k].len;
		}
		assert_int_equal(off, lens[i]);
		if (r.source != src)
			free(r.source);
		free(s);
	}
}

/* Register as the engine does: a new buffer, then into the registry. */
static int buf_add(struct xfer_buffers *bs, uint64_t addr, uint64_t len,
		   const char *location, bool remote)
{
	struct xfer_buffer *b = xfer_buffer_new(addr, len, location, remote);
	int ret = xfer_buffers_insert(bs, b);

	if (ret)
		xfer_buffer_free(b);
	return ret;
}

static int buf_rm(struct xfer_buffers *bs, uint64_t addr)
{
	struct xfer_buffer *b;
	int ret = xfer_buffers_remove(bs, addr, &b);

	if (!ret)
		xfer_buffer_free(b);
	return ret;
}

static void test_buffers_lookup(void **state)
{
	struct xfer_buffers bs;
	struct xfer_buffer *b;

	(void)state;
	xfer_buffers_init(&bs);
	assert_int_equal(buf_add(&bs, 0x3000, 0x1000, "cpu:0", true), 0);
	assert_int_equal(buf_add(&bs, 0x1000, 0x1000, "cpu:1", false), 0);
	assert_int_equal(buf_add(&bs, 0x5000, 0x100, "*", true), 0);
	/* overlaps on either side and inside are refused */
	assert_int_equal(buf_add(&bs, 0x0800, 0x1000, "x", true), -EEXIST);
	assert_int_equal(buf_add(&bs, 0x3fff, 0x10, "x", true), -EEXIST);
	assert_int_equal(buf_add(&bs, 0x3100, 0x10, "x", true), -EEXIST);
	assert_int_equal(buf_add(&bs, 0x2f00, 0x2000, "x", true), -EEXIST);
	/* adjacent is fine */
	assert_int_equal(buf_add(&bs, 0x2000, 0x1000, "cpu:0", true), 0);

	b = xfer_buffers_find(&bs, 0x3000, 0x1000, true);
	assert_non_null(b);
	assert_int_equal(b->addr, 0x3000);
	assert_string_equal(b->location, "cpu:0");
	assert_ptr_equal(xfer_buffers_find(&bs, 0x3fff, 1, true), b);
	/* a range spanning two adjacent buffers lies in neither */
	assert_null(xfer_buffers_find(&bs, 0x2fff, 2, false));
	assert_null(xfer_buffers_find(&bs, 0x4000, 1, false));
	assert_null(xfer_buffers_find(&bs, 0xfff, 1, false));
	assert_null(xfer_buffers_find(&bs, 0x3000, 0, false));
	assert_null(xfer_buffers_find(&bs, UINT64_MAX, 2, false));
	/* the remote-only lookup skips a local-only buffer */
	assert_non_null(xfer_buffers_find(&bs, 0x1000, 0x10, false));
	assert_null(xfer_buffers_find(&bs, 0x1000, 0x10, true));

	/* a buffer in use cannot be removed */
	b = xfer_buffers_acquire(&bs, 0x5000, 0x80);
	assert_non_null(b);
	assert_int_equal(buf_rm(&bs, 0x5000), -EBUSY);
	atomic_fetch_sub(&b->users, 1);
	assert_int_equal(buf_rm(&bs, 0x5000), 0);
	assert_int_equal(buf_rm(&bs, 0x5000), -ENOENT);
	assert_int_equal(buf_rm(&bs, 0x3100), -ENOENT);
	assert_null(xfer_buffers_acquire(&bs, 0x5000, 1));
	xfer_buffers_fini(&bs);
}

static void test_buffers_many(void **state)
{
	struct xfer_buffers bs;

	(void)state;
	xfer_buffers_init(&bs);
	/* inserted out of order; each is found, its neighbours' gaps are not */
	for (uint64_t i = 0; i < 1000; i++) {
		uint64_t k = (i * 7919) % 1000;

		assert_int_equal(buf_add(&bs, 0x100000 + k * 0x2000,
						  0x1000, "cpu:0", true), 0);
	}
	for (uint64_t k = 0; k < 1000; k++) {
		uint64_t a = 0x100000 + k * 0x2000;
		struct xfer_buffer *b = xfer_buffers_find(&bs, a + 0x800, 0x800, true);

		assert_non_null(b);
		assert_int_equal(b->addr, a);
		assert_null(xfer_buffers_find(&bs, a + 0x1000, 1, false));
	}
	xfer_buffers_fini(&bs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_slice_count),
		cmocka_unit_test(test_slice_cut),
		cmocka_unit_test(test_buffers_lookup),
		cmocka_unit_test(test_buffers_many),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
