/*
 * xfer_engine_last_error() against errors recorded at the same time on
 * other threads (util/log.c): what it returns is a copy made under the
 * writers' lock, whole, and left as it was by later errors. The hammer is
 * for ThreadSanitizer too: build this file with -fsanitize=thread.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "core/engine_internal.h"
#include "test/helpers.h"

#define ROUNDS 200000

static struct xfer_engine *eng;
static atomic_bool stop;

/* Whole messages alternate: 255 'a's, then 7 'b's. */
static void *writer(void *arg)
{
	char longest[256];

	(void)arg;
	memset(longest, 'a', sizeof(longest) - 1);
	longest[sizeof(longest) - 1] = '\0';
	while (!atomic_load(&stop)) {
		xfer_error_set(&eng->err, -EIO, "%s", longest);
		xfer_error_set(&eng->err, -EIO, "bbbbbbb");
	}
	return NULL;
}

/* "" (none yet), or one of the writer's messages whole; counted in
 * @p seen by kind. */
static void assert_whole(const char *m, int seen[2])
{
	size_t len = strlen(m);

	if (!len)
		return;
	assert_true((len == 255 && m[0] == 'a') || (len == 7 && m[0] == 'b'));
	assert_int_equal(strspn(m, m[0] == 'a' ? "a" : "b"), len);
	seen[m[0] == 'b']++;
}

static void test_read_while_written(void **state)
{
	int64_t end = th_now_ms() + 20000;
	int seen[2] = { 0 };
	pthread_t t;

	(void)state;
	eng = th_engine(0);
	atomic_store(&stop, false);
	assert_int_equal(pthread_create(&t, NULL, writer, NULL), 0);
	/* Both kinds read many times: the writer ran all along. */
	for (int i = 0; i < ROUNDS || seen[0] < 1000 || seen[1] < 1000; i++) {
		assert_whole(xfer_engine_last_error(eng), seen);
		assert_true(th_now_ms() < end);
	}
	atomic_store(&stop, true);
	pthread_join(t, NULL);
	xfer_engine_free(eng);
}

/* An error recorded after the call leaves the text returned as it was. */
static void test_copy_stays(void **state)
{
	const char *m;

	(void)state;
	eng = th_engine(0);
	xfer_error_set(&eng->err, -EIO, "first");
	m = xfer_engine_last_error(eng);
	xfer_error_set(&eng->err, -EIO, "second");
	assert_string_equal(m, "first");
	assert_string_equal(xfer_engine_last_error(eng), "second");
	xfer_engine_free(eng);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_read_while_written),
		cmocka_unit_test(test_copy_stays),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
