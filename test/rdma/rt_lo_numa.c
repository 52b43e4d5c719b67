/*
 * RDMA tier, one guest with two NUMA nodes (rdmavm --topo lo --numa): a
 * context's worker thread runs on the CPUs of its device's node. rxe0 has
 * no node in sysfs, so the node comes from the priority matrix.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_* */
#include <dirent.h>
#include <numa.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test/helpers.h"
#include "test/rdma/rt.h"

/* The thread of this process named @p comm; fails the test if none. */
static pid_t find_thread(const char *comm)
{
	char path[300], name[64];
	struct dirent *d;
	pid_t tid = -1;
	DIR *dir = opendir("/proc/self/task");
	FILE *f;

	assert_non_null(dir);
	while (tid < 0 && (d = readdir(dir))) {
		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", d->d_name);
		f = fopen(path, "r");
		if (f && fgets(name, sizeof(name), f) &&
		    !strncmp(name, comm, strlen(comm)))
			tid = atoi(d->d_name);
		if (f)
			fclose(f);
	}
	closedir(dir);
	assert_true(tid > 0);
	return tid;
}

static struct xfer_engine *engine(bool pin)
{
	struct xfer_config *cfg = th_config();
	struct xfer_engine *e;

	th_set(cfg, "protocol", "rdma");
	th_set(cfg, "local_server_name", "127.0.0.1");
	th_set(cfg, "nic_priority_matrix", "{\"cpu:1\":[[\"rxe0\"],[]]}");
	th_set(cfg, "pin_workers", pin ? "true" : "false");
	e = xfer_engine_new(cfg);
	xfer_config_free(cfg);
	assert_non_null(e);
	return e;
}

static void test_worker_on_node(void **state)
{
	struct bitmask *node_cpus;
	cpu_set_t set;
	struct xfer_engine *e;
	int n = 0;

	(void)state;
	if (numa_available() < 0 || numa_max_node() < 1) {
		printf("one NUMA node here (run under rdmavm --numa)\n");
		skip();
	}
	node_cpus = numa_allocate_cpumask();
	assert_int_equal(numa_node_to_cpus(1, node_cpus), 0);
	e = engine(true);
	assert_int_equal(sched_getaffinity(find_thread("xfer-rxe0"),
					   sizeof(set), &set), 0);
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		assert_int_equal(!!CPU_ISSET(cpu, &set),
				 !!numa_bitmask_isbitset(node_cpus, cpu));
		n += CPU_ISSET(cpu, &set);
	}
	printf("xfer-rxe0 runs on %d CPU(s) of node 1\n", n);
	assert_true(n > 0);
	xfer_engine_free(e);

	/* Unpinned, the same worker may run anywhere. */
	e = engine(false);
	assert_int_equal(sched_getaffinity(find_thread("xfer-rxe0"),
					   sizeof(set), &set), 0);
	assert_int_equal(CPU_COUNT(&set), numa_num_configured_cpus());
	xfer_engine_free(e);
	numa_free_cpumask(node_cpus);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_worker_on_node),
	};

	return cmocka_run_group_tests_name("rdma numa", tests, NULL, NULL);
}
