/*
 * Unit tests: the configuration API — defaults, the environment (XFER_*
 * over MC_*, MC_ units), setting keys by any of their names, ranges, what
 * xfer_engine_new() refuses, and xfer_config_next()'s descriptions of
 * the keys against what the keys do.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xfer/xfer.h>

#include "test/helpers.h"

/* Variables a test sets; cleared before and after each test. */
static const char *const vars[] = {
	"XFER_SLICE_SIZE", "MC_SLICE_SIZE", "XFER_TRANSFER_TIMEOUT_MS",
	"MC_TRANSFER_TIMEOUT", "XFER_TCP_CONNS", "XFER_PIN_WORKERS",
	"XFER_PROTOCOL", "XFER_METADATA_SERVER",
};

static int clear_env(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
	return 0;
}

static void expect(const struct xfer_config *cfg, const char *key,
		   const char *want)
{
	const char *got = xfer_config_get(cfg, key);

	if (!want)
		assert_null(got);
	else if (!got || strcmp(got, want))
		fail_msg("%s: %s, want %s", key, got ? got : "unset", want);
}

static void test_defaults(void **state)
{
	struct xfer_config *cfg = th_config();

	(void)state;
	expect(cfg, "slice_size", "65536");
	expect(cfg, "metadata_server", "p2p");
	expect(cfg, "protocol", "tcp");
	expect(cfg, "bind_addr", "0.0.0.0");
	expect(cfg, "transfer_timeout_ms", "30000");
	expect(cfg, "local_server_name", NULL);
	/* the transports' own keys are there too */
	expect(cfg, "tcp_conns", "2");
#ifdef XFER_HAVE_RDMA
	expect(cfg, "qps_per_ep", "2");
	expect(cfg, "gid_index", "-1");
	expect(cfg, "pin_workers", "true");
#else /* a part the build lacks brings no keys */
	assert_null(xfer_config_get(cfg, "qps_per_ep"));
#endif
	assert_null(xfer_config_get(cfg, "no_such_key"));
	xfer_config_free(cfg);
}

static void test_env(void **state)
{
	struct xfer_config *cfg;

	(void)state;
	setenv("MC_SLICE_SIZE", "8192", 1);
	setenv("MC_TRANSFER_TIMEOUT", "5", 1); /* seconds */
	setenv("XFER_TCP_CONNS", "7", 1);
	setenv("XFER_METADATA_SERVER", "", 1); /* empty: ignored */
#ifdef XFER_HAVE_RDMA
	setenv("XFER_PIN_WORKERS", "0", 1);
#endif
	cfg = th_config();
	expect(cfg, "slice_size", "8192");
	expect(cfg, "transfer_timeout_ms", "5000");
	expect(cfg, "tcp_conns", "7");
#ifdef XFER_HAVE_RDMA
	expect(cfg, "pin_workers", "false");
#endif
	expect(cfg, "metadata_server", "p2p");
	xfer_config_free(cfg);

	/* the XFER_ name wins over its alias */
	setenv("XFER_SLICE_SIZE", "16384", 1);
	setenv("XFER_TRANSFER_TIMEOUT_MS", "250", 1);
	cfg = th_config();
	expect(cfg, "slice_size", "16384");
	expect(cfg, "transfer_timeout_ms", "250");
	xfer_config_free(cfg);
}

static void test_env_malformed(void **state)
{
	static const char *const bad[] = { "4095", "x", "65536x", "-1", "" };

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setenv("XFER_SLICE_SIZE", bad[i], 1);
		errno = 0;
		if (!bad[i][0]) { /* empty is unset */
			struct xfer_config *cfg = th_config();

			expect(cfg, "slice_size", "65536");
			xfer_config_free(cfg);
			continue;
		}
		assert_null(xfer_config_new());
		assert_int_equal(errno, EINVAL);
	}
}

static void test_set(void **state)
{
	struct xfer_config *cfg = th_config();

	(void)state;
	/* by knob name, by variable, by alias in its own units */
	assert_int_equal(xfer_config_set(cfg, "slice_size", "4096"), 0);
	expect(cfg, "slice_size", "4096");
	assert_int_equal(xfer_config_set(cfg, "XFER_TCP_CONNS", "3"), 0);
	expect(cfg, "tcp_conns", "3");
	assert_int_equal(xfer_config_set(cfg, "MC_TRANSFER_TIMEOUT", "2"), 0);
	expect(cfg, "transfer_timeout_ms", "2000");
	expect(cfg, "MC_TRANSFER_TIMEOUT", "2000");
	assert_int_equal(xfer_config_set(cfg, "local_server_name", "h"), 0);
	expect(cfg, "local_server_name", "h");
#ifdef XFER_HAVE_RDMA
	assert_int_equal(xfer_config_set(cfg, "pin_workers", "false"), 0);
	expect(cfg, "pin_workers", "false");
	assert_int_equal(xfer_config_set(cfg, "gid_index", "-1"), 0);
#endif

	/* refused: the key keeps its value */
	assert_int_equal(xfer_config_set(cfg, "slice_size", "64"), -EINVAL);
	assert_int_equal(xfer_config_set(cfg, "slice_size", "1k"), -EINVAL);
	assert_int_equal(xfer_config_set(cfg, "slice_size", ""), -EINVAL);
	expect(cfg, "slice_size", "4096");
#ifdef XFER_HAVE_RDMA
	assert_int_equal(xfer_config_set(cfg, "mtu", "1000"), -EINVAL);
	assert_int_equal(xfer_config_set(cfg, "mtu", "1024"), 0);
	assert_int_equal(xfer_config_set(cfg, "pin_workers", "2"), -EINVAL);
	assert_int_equal(xfer_config_set(cfg, "gid_index", "-2"), -EINVAL);
#else
	assert_int_equal(xfer_config_set(cfg, "mtu", "1024"), -ENOENT);
#endif
	assert_int_equal(xfer_config_set(cfg, "MC_TRANSFER_TIMEOUT",
					 "4294968"), -EINVAL);
	assert_int_equal(xfer_config_set(cfg, "no_such_key", "1"), -ENOENT);
	assert_int_equal(xfer_config_set(cfg, NULL, "1"), -ENOENT);

	/* NULL: back to the default, or unset */
	assert_int_equal(xfer_config_set(cfg, "slice_size", NULL), 0);
	expect(cfg, "slice_size", "65536");
	assert_int_equal(xfer_config_set(cfg, "local_server_name", NULL), 0);
	expect(cfg, "local_server_name", NULL);
	xfer_config_free(cfg);
}

static bool in(const char *s, const char *const *set, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(s, set[i]))
			return true;
	return false;
}

/* Set @p key to @p v in a fresh configuration: xfer_config_set()'s. */
static int try_num(const char *key, long long v)
{
	struct xfer_config *cfg = th_config();
	char num[24];
	int ret;

	snprintf(num, sizeof(num), "%lld", v);
	ret = xfer_config_set(cfg, key, num);
	xfer_config_free(cfg);
	return ret;
}

/*
 * Every key xfer_config_next() describes is one the configuration has,
 * with the default it says, by each name it says, in the range it says,
 * with a unit of xfer.h's list and a line of doc that markdown and
 * Doxygen print as written.
 */
static void test_keys_described(void **state)
{
	static const char *const units[] = { "bytes", "ms", "s", "count",
					     "bool", "port", "index",
					     "string" };
	struct xfer_config *cfg = th_config();
	const struct xfer_config_key *k, *first = NULL;
	size_t it = 0, n = 0;

	(void)state;
	while (xfer_config_next(&it, &k) == 0) {
		bool num = strcmp(k->unit, "string") && strcmp(k->unit, "bool");

		first = first ? first : k;
		n++;
		assert_int_equal(it, n);
		assert_true(in(k->unit, units, sizeof(units) / sizeof(*units)));
		assert_true(k->doc && k->doc[0] && !strpbrk(k->doc, "<>*`\\@"));
		assert_int_equal(strncmp(k->env, "XFER_", 5), 0);
		assert_true(!k->alias || !strncmp(k->alias, "MC_", 3));
		assert_true(!k->alias_unit || k->alias);
		expect(cfg, k->name, k->def);
		expect(cfg, k->env, k->def);
		if (k->alias)
			expect(cfg, k->alias, k->def);
		if (!strcmp(k->unit, "bool")) {
			assert_int_equal(k->min, 0);
			assert_int_equal(k->max, 1);
			assert_int_equal(try_num(k->name, 2), -EINVAL);
		}
		if (!num)
			continue;
		assert_true(k->min < k->max);
		assert_int_equal(try_num(k->name, k->min), 0);
		assert_int_equal(try_num(k->name, k->max), 0);
		assert_int_equal(try_num(k->name, k->min - 1), -EINVAL);
		assert_int_equal(try_num(k->name, k->max + 1), -EINVAL);
	}
	assert_non_null(first);
	assert_string_equal(first->name, "local_server_name");
	/* past the last: -ENOENT, and nothing moves */
	k = NULL;
	assert_int_equal(xfer_config_next(&it, &k), -ENOENT);
	assert_null(k);
	assert_int_equal(it, n);
	assert_int_equal(xfer_config_next(NULL, &k), -EINVAL);
	assert_int_equal(xfer_config_next(&it, NULL), -EINVAL);
	xfer_config_free(cfg);
}

/* Every key the configuration reads is listed, once. */
static void test_keys_listed(void **state)
{
	static const char *const some[] = { "slice_size", "protocol",
					    "metadata_server", "tcp_conns",
#ifdef XFER_HAVE_RDMA /* a part's keys come with it */
					    "max_inline",
#endif
#ifdef XFER_HAVE_FILE
					    "file_local",
#endif
					    "auth_secret" };
	const struct xfer_config_key *k;
	const char *names[256];
	size_t it = 0, n = 0;

	(void)state;
	while (xfer_config_next(&it, &k) == 0) {
		assert_false(in(k->name, names, n));
		assert_true(n < sizeof(names) / sizeof(*names));
		names[n++] = k->name;
	}
	for (size_t i = 0; i < sizeof(some) / sizeof(*some); i++)
		assert_true(in(some[i], names, n));
}

/* The engine copies the configuration: freeing it after is fine. */
static void test_engine_copies(void **state)
{
	struct xfer_config *cfg = th_config();
	struct xfer_engine *e;

	(void)state;
	th_set(cfg, "bind_addr", "127.0.0.1");
	th_set(cfg, "local_server_name", "127.0.0.1");
	e = xfer_engine_new(cfg);
	assert_non_null(e);
	th_set(cfg, "local_server_name", "elsewhere");
	xfer_config_free(cfg);
	assert_int_equal(strncmp(xfer_engine_name(e), "127.0.0.1:", 10), 0);
	xfer_engine_free(e);
}

/* A protocol no transport has, or the local copy, is refused. */
static void test_engine_protocol(void **state)
{
	static const char *const bad[] = { "udp", "local", "" };
	struct xfer_config *cfg = th_config();

	(void)state;
	th_set(cfg, "bind_addr", "127.0.0.1");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		th_set(cfg, "protocol", bad[i]);
		errno = 0;
		assert_null(xfer_engine_new(cfg));
		assert_int_equal(errno, EINVAL);
	}
	xfer_config_free(cfg);
}

/* What the build has: the lists follow WITH_* (mk/config.mk). */
static void test_transport_available(void **state)
{
	(void)state;
	assert_int_equal(xfer_transport_available("tcp"), 1);
	assert_int_equal(xfer_transport_available("local"), 1);
	assert_int_equal(xfer_transport_available("udp"), 0);
	assert_int_equal(xfer_transport_available(NULL), 0);
#ifdef XFER_HAVE_FILE
	assert_int_equal(xfer_transport_available("file"), 1);
#else
	assert_int_equal(xfer_transport_available("file"), 0);
#endif
#ifndef XFER_HAVE_RDMA
	assert_int_equal(xfer_transport_available("rdma"), 0);
#endif
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_defaults, clear_env,
						clear_env),
		cmocka_unit_test_setup_teardown(test_env, clear_env, clear_env),
		cmocka_unit_test_setup_teardown(test_env_malformed, clear_env,
						clear_env),
		cmocka_unit_test_setup_teardown(test_set, clear_env, clear_env),
		cmocka_unit_test_setup_teardown(test_keys_described, clear_env,
						clear_env),
		cmocka_unit_test_setup_teardown(test_keys_listed, clear_env,
						clear_env),
		cmocka_unit_test_setup_teardown(test_engine_copies, clear_env,
						clear_env),
		cmocka_unit_test_setup_teardown(test_engine_protocol, clear_env,
						clear_env),
		cmocka_unit_test(test_transport_available),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
