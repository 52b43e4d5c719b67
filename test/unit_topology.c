/* Unit tests for transports/rdma/topology.c over a fake sysfs tree. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "test/helpers.h"
#include "transports/rdma/topology_internal.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static char root[] = "/tmp/xfer-topo-XXXXXX";

/* mkdir -p of <root>/<rel>. */
static void mkdirs(const char *rel)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	for (char *p = path + strlen(root) + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		assert_true(!mkdir(path, 0755) || errno == EEXIST);
		*p = '/';
	}
	assert_true(!mkdir(path, 0755) || errno == EEXIST);
}

/* Write @p text to <root>/<dir>/<file>, making @p dir first. */
static void put(const char *dir, const char *file, const char *text)
{
	char path[PATH_MAX];
	FILE *f;

	mkdirs(dir);
	snprintf(path, sizeof(path), "%s/%s/%s", root, dir, file);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/*
 * mlx5_0 on node 0, mlx5_1 on node 1, rxe0 on node 1 through its netdev
 * eth1, rxe1 with nothing to tell its node.
 */
static int setup_tree(void **state)
{
	(void)state;
	if (!mkdtemp(root))
		return -1;
	put("class/infiniband/mlx5_0/device", "numa_node", "0\n");
	put("class/infiniband/mlx5_1/device", "numa_node", "1\n");
	put("class/infiniband/rxe0/ports/1/gid_attrs/ndevs", "0", "eth1\n");
	put("class/net/eth1/device", "numa_node", "1\n");
	mkdirs("class/infiniband/rxe1");
	return 0;
}

static int teardown_tree(void **state)
{
	(void)state;
	return th_rm_tree(root);
}

static const struct xfer_rdma_prio *prio_row(const struct rdma_topo *t,
					     const char *location)
{
	for (size_t i = 0; i < t->nprio; i++)
		if (!strcmp(t->prio[i].location, location))
			return &t->prio[i];
	return NULL;
}

static bool has_name(char *const *list, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(list[i], name))
			return true;
	return false;
}

static void build_ok(const char *names, const char *matrix,
		     struct rdma_topo *t)
{
	char err[256] = "";
	int ret = xfer_rdma_topo_build(root, names, matrix, t, err, sizeof(err));

	if (ret)
		fail_msg("rdma_topo_build: %d %s", ret, err);
}

static void test_discover(void **state)
{
	static const char *const want[] = { "mlx5_0", "mlx5_1", "rxe0",
					    "rxe1" };
	static const int node[] = { 0, 1, 1, -1 };
	struct rdma_topo t;

	(void)state;
	build_ok(NULL, NULL, &t);
	assert_int_equal(t.ndevs, ARRAY_SIZE(want));
	for (size_t i = 0; i < t.ndevs; i++) {
		assert_string_equal(t.devs[i].name, want[i]);
		assert_int_equal(t.devs[i].numa_node, node[i]);
	}
	xfer_rdma_topo_free(&t);
}

static void test_filter(void **state)
{
	struct rdma_topo t;
	char err[256] = "";

	(void)state;
	build_ok("mlx5_1, rxe0", NULL, &t);
	assert_int_equal(t.ndevs, 2);
	assert_string_equal(t.devs[0].name, "mlx5_1");
	assert_string_equal(t.devs[1].name, "rxe0");
	assert_int_equal(t.matrix.any.n, 2);
	xfer_rdma_topo_free(&t);

	assert_int_equal(xfer_rdma_topo_build(root, "mlx5_0,mlx5_9", NULL, &t, err,
					      sizeof(err)), -ENODEV);
	assert_non_null(strstr(err, "mlx5_9"));
	assert_int_equal(t.ndevs, 0);
	assert_null(t.devs);
}

static void test_no_sysfs(void **state)
{
	char empty[PATH_MAX], err[256] = "";
	struct rdma_topo t;

	(void)state;
	snprintf(empty, sizeof(empty), "%s/class/net", root);
	assert_int_equal(xfer_rdma_topo_build(empty, NULL, NULL, &t, err,
					      sizeof(err)), -ENODEV);
	assert_true(err[0]);
}

static void test_default_matrix(void **state)
{
	const struct xfer_rdma_prio *p;
	const struct rdma_row *r;
	struct rdma_topo t;

	(void)state;
	build_ok(NULL, NULL, &t);
	p = prio_row(&t, "cpu:0");
	assert_non_null(p);
	assert_true(has_name(p->pref, p->npref, "mlx5_0"));
	assert_true(has_name(p->pref, p->npref, "rxe1"));
	assert_false(has_name(p->pref, p->npref, "mlx5_1"));
	assert_true(has_name(p->other, p->nother, "mlx5_1"));
	assert_true(has_name(p->other, p->nother, "rxe0"));
	p = prio_row(&t, "*");
	assert_non_null(p);
	assert_int_equal(p->npref, 4);
	assert_int_equal(p->nother, 0);

	r = xfer_rdma_matrix_find(&t.matrix, "cpu:0");
	assert_string_equal(r->location, "cpu:0");
	assert_int_equal(r->npref, 2);
	assert_int_equal(r->n, 4);
	assert_int_equal(r->idx[0], 0); /* mlx5_0 */
	assert_int_equal(r->idx[1], 3); /* rxe1 */
	r = xfer_rdma_matrix_find(&t.matrix, "cpu:1");
	assert_int_equal(r->npref, 3); /* mlx5_1, rxe0, rxe1 */
	r = xfer_rdma_matrix_find(&t.matrix, "cuda:3");
	assert_string_equal(r->location, "*");
	assert_int_equal(r->npref, 4);
	xfer_rdma_topo_free(&t);
}

static void test_user_matrix(void **state)
{
	struct rdma_topo t;

	(void)state;
	build_ok(NULL, "{\"cpu:0\":[[\"mlx5_1\"],[\"mlx5_0\"]]}", &t);
	assert_int_equal(t.ndevs, 2);
	assert_string_equal(t.devs[0].name, "mlx5_0");
	assert_string_equal(t.devs[1].name, "mlx5_1");
	assert_int_equal(t.devs[1].numa_node, 1); /* sysfs wins */
	assert_int_equal(t.nprio, 1);
	assert_string_equal(t.prio[0].location, "cpu:0");
	assert_int_equal(t.matrix.nrows, 1);
	assert_int_equal(t.matrix.rows[0].npref, 1);
	assert_int_equal(t.matrix.rows[0].idx[0], 1);
	assert_int_equal(t.matrix.rows[0].idx[1], 0);
	/* No "*" row: an unknown location gets every device. */
	assert_ptr_equal(xfer_rdma_matrix_find(&t.matrix, "cuda:0"),
			 &t.matrix.any);
	xfer_rdma_topo_free(&t);

	/* rxe1 has no node in sysfs: the row that prefers it gives one. */
	build_ok(NULL, "{\"*\":[[\"mlx5_0\"],[]],"
		       "\"cpu:1\":[[\"rxe1\"],[\"mlx5_0\"]]}", &t);
	assert_int_equal(t.ndevs, 2);
	assert_string_equal(t.devs[1].name, "rxe1");
	assert_int_equal(t.devs[1].numa_node, 1);
	assert_string_equal(xfer_rdma_matrix_find(&t.matrix, "cpu:0")->location,
			    "*");
	xfer_rdma_topo_free(&t);

	/* With a filter, the filter picks the devices. */
	build_ok("rxe0,mlx5_1", "{\"cpu:0\":[[\"mlx5_1\"],[]]}", &t);
	assert_int_equal(t.ndevs, 2);
	assert_int_equal(t.matrix.rows[0].n, 1);
	xfer_rdma_topo_free(&t);
}

/* Names rxe0, outside a filter of mlx5_0. */
#define USES_RXE0 "{\"cpu:0\":[[\"mlx5_0\"],[\"rxe0\"]]}"

static void test_user_matrix_bad(void **state)
{
	char err[256] = "";
	struct rdma_topo t;

	(void)state;
	assert_int_equal(xfer_rdma_topo_build(root, NULL,
					      "{\"cpu:0\":[[\"mlx5_7\"],[]]}",
					      &t, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "mlx5_7"));
	assert_int_equal(xfer_rdma_topo_build(root, "mlx5_0", USES_RXE0, &t, err,
					      sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "rxe0"));
	assert_int_equal(xfer_rdma_topo_build(root, NULL, "{\"cpu:0\":", &t, err,
					      sizeof(err)), -EPROTO);
	assert_null(t.devs);
}

static void test_matrix_build(void **state)
{
	char *pref0[] = { "a", "x", "b", "a" }, *other0[] = { "b", "c", "y" };
	char *pref1[] = { "zz" };
	const struct xfer_rdma_prio rows[] = {
		{ "cpu:0", 4, 3, pref0, other0 },
		{ "cpu:1", 1, 0, pref1, NULL },
	};
	const char *const names[] = { "a", "b", "c" };
	struct rdma_matrix m;
	const struct rdma_row *r;

	(void)state;
	assert_int_equal(xfer_rdma_matrix_build(rows, 2, names, 3, &m), 0);
	r = xfer_rdma_matrix_find(&m, "cpu:0");
	assert_int_equal(r->npref, 2);
	assert_int_equal(r->n, 3);
	assert_int_equal(r->idx[0], 0);
	assert_int_equal(r->idx[1], 1);
	assert_int_equal(r->idx[2], 2);
	/* A row left with no device falls back to any. */
	assert_int_equal(m.rows[1].n, 0);
	assert_ptr_equal(xfer_rdma_matrix_find(&m, "cpu:1"), &m.any);
	assert_string_equal(m.any.location, "*");
	assert_int_equal(m.any.npref, 3);
	assert_int_equal(m.any.n, 3);
	for (size_t i = 0; i < 3; i++)
		assert_int_equal(m.any.idx[i], i);
	xfer_rdma_matrix_free(&m);
	xfer_rdma_matrix_free(&m); /* zeroed: safe again */
}

static void test_free_zeroed(void **state)
{
	struct rdma_topo t = { 0 };
	struct rdma_matrix m = { 0 };

	(void)state;
	xfer_rdma_topo_free(&t);
	xfer_rdma_matrix_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_discover),
		cmocka_unit_test(test_filter),
		cmocka_unit_test(test_no_sysfs),
		cmocka_unit_test(test_default_matrix),
		cmocka_unit_test(test_user_matrix),
		cmocka_unit_test(test_user_matrix_bad),
		cmocka_unit_test(test_matrix_build),
		cmocka_unit_test(test_free_zeroed),
	};

	return cmocka_run_group_tests(tests, setup_tree, teardown_tree);
}
