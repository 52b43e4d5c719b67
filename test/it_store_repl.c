/*
 * Replication tasks of the store against a real xfer-stored and three
 * client processes that lend DRAM: an object raised from 1 to 3
 * replicas (one on each client, each holder reading its own replica
 * back, bytes checked), query_task's states, lowered to 1, and, raised
 * to 2, a holder SIGKILLed: once the master expires it (--client_ttl)
 * the object is copied back to 2 replicas on the others; Mooncake's
 * copy and move tasks between them; SSD replicas made from DRAM, and
 * DRAM ones made again from SSD. The driving
 * client lends no memory: every byte moves between the holders.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xfer/store.h>
#include <xfer/xfer.h>

#include "test/helpers.h"
#include "test/th_store.h"

#define MiB (1u << 20)
#define LEN (MiB + 3)
#define NP 3

static struct xfer_kv_replica_desc desc[XFER_KV_REPLICA_MAX];

/* Which process holds replica @p i of the last descriptors: its index in
 * @p names, or -1. */
static int holder(char names[][64], int i)
{
	for (int p = 0; p < NP; p++)
		if (!strcmp(desc[i].endpoint, names[p]))
			return p;
	return -1;
}

/* Wait up to @p ms for task @p id to end: @return its status. */
static int wait_task(struct xfer_kv *kv, uint64_t id, int ms,
		     struct xfer_kv_task *t)
{
	for (int i = 0; i < ms / 20; i++) {
		assert_int_equal(xfer_kv_query_task(kv, id, t), 0);
		if (t->status == XFER_KV_TASK_SUCCESS ||
		    t->status == XFER_KV_TASK_FAILED)
			break;
		usleep(20000);
	}
	return t->status;
}

static void test_replicate(void **state)
{
	struct th_sizes sz = { 8 * MiB, 4 * MiB };
	static const uint8_t zero[16];
	char names[NP][64];
	struct th_proc p[NP];
	struct xfer_kv_task t;
	struct xfer_kv *kv;
	int64_t id;
	int n, seen, dead, h;

	(void)state;
	th_master_start((const char *const[]){
		"--client_ttl=2", "--default_kv_lease_ttl=300", NULL });
	for (int i = 0; i < NP; i++)
		th_kv_proc_start(&p[i], &sz, names[i]);
	kv = th_kv(0, 4 * MiB);
	assert_int_equal(th_kv_cmd(&p[0], "put k %u 1 1", LEN), 0);
	assert_int_equal(xfer_kv_get_replica_desc(kv, "k", desc), 1);

	/* 1 -> 3: one on each client */
	id = xfer_kv_replicate(kv, "k", 3, 0);
	assert_true(id > 0);
	assert_int_equal(xfer_kv_query_task(kv, (uint64_t)id, &t), 0);
	assert_int_equal(t.id, id);
	assert_int_equal(t.type, XFER_KV_TASK_REPLICATE);
	assert_true(t.status == XFER_KV_TASK_PENDING ||
		    t.status == XFER_KV_TASK_PROCESSING);
	assert_true(t.created_at_ms_epoch > 1700000000000ll);
	assert_int_equal(wait_task(kv, (uint64_t)id, 20000, &t),
			 XFER_KV_TASK_SUCCESS);
	assert_string_equal(t.message, "Task completed successfully");
	assert_memory_not_equal(t.assigned_client, zero, 16);
	assert_true(t.last_updated_at_ms_epoch >= t.created_at_ms_epoch);
	n = xfer_kv_get_replica_desc(kv, "k", desc);
	assert_int_equal(n, 3);
	seen = 0;
	for (int i = 0; i < n; i++) {
		assert_true(holder(names, i) >= 0);
		seen |= 1 << holder(names, i);
		assert_int_equal(desc[i].size, LEN);
	}
	assert_int_equal(seen, 7);
	/* each holder reads its own replica first: every copy's bytes */
	for (int i = 0; i < NP; i++)
		assert_int_equal(th_kv_cmd(&p[i], "get k %u 1", LEN), LEN);

	/* 3 -> 1, once the lease of the query above is out */
	id = xfer_kv_replicate(kv, "k", 1, 0);
	assert_true(id > 0);
	assert_int_equal(wait_task(kv, (uint64_t)id, 10000, &t),
			 XFER_KV_TASK_SUCCESS);
	assert_int_equal(xfer_kv_get_replica_desc(kv, "k", desc), 1);
	assert_int_equal(th_get_pattern(kv, "k", LEN, 1, false), LEN);

	/* Mooncake's copy task into the two others; then, down to one
	 * again, its move into another client */
	h = holder(names, 0);
	id = xfer_kv_create_copy_task(kv, "k", (const char *[]){
		names[(h + 1) % NP], names[(h + 2) % NP] }, 2);
	assert_true(id > 0);
	assert_int_equal(wait_task(kv, (uint64_t)id, 20000, &t),
			 XFER_KV_TASK_SUCCESS);
	assert_int_equal(t.type, XFER_KV_TASK_REPLICA_COPY);
	assert_int_equal(xfer_kv_get_replica_desc(kv, "k", desc), 3);
	for (int i = 0; i < NP; i++)
		assert_int_equal(th_kv_cmd(&p[i], "get k %u 1", LEN), LEN);
	usleep(350000);
	id = xfer_kv_replicate(kv, "k", 1, 0);
	assert_int_equal(wait_task(kv, (uint64_t)id, 10000, &t),
			 XFER_KV_TASK_SUCCESS);
	assert_int_equal(xfer_kv_get_replica_desc(kv, "k", desc), 1);
	h = holder(names, 0);
	usleep(350000);
	id = xfer_kv_create_move_task(kv, "k", names[h], names[(h + 1) % NP]);
	assert_true(id > 0);
	assert_int_equal(wait_task(kv, (uint64_t)id, 20000, &t),
			 XFER_KV_TASK_SUCCESS);
	assert_int_equal(t.type, XFER_KV_TASK_REPLICA_MOVE);
	assert_int_equal(xfer_kv_get_replica_desc(kv, "k", desc), 1);
	assert_int_equal(holder(names, 0), (h + 1) % NP);
	assert_int_equal(th_kv_cmd(&p[(h + 1) % NP], "get k %u 1", LEN), LEN);
	assert_int_equal(xfer_kv_create_move_task(kv, "k", names[h],
						  names[(h + 2) % NP]),
			 XFER_KV_INVALID_PARAMS);   /* h holds none now */
	assert_int_equal(xfer_kv_create_copy_task(kv, "k", (const char *[]){
		"no-such-segment" }, 1), XFER_KV_SEGMENT_NOT_FOUND);

	/* 1 -> 2, then a holder dies: back to 2 on the two left */
	usleep(350000);
	id = xfer_kv_replicate(kv, "k", 2, 0);
	assert_int_equal(wait_task(kv, (uint64_t)id, 20000, &t),
			 XFER_KV_TASK_SUCCESS);
	assert_int_equal(xfer_kv_get_replica_desc(kv, "k", desc), 2);
	dead = holder(names, 1);
	assert_true(dead >= 0);
	th_proc_kill(&p[dead]);
	for (int i = 0; i < 300; i++) {
		n = xfer_kv_get_replica_desc(kv, "k", desc);
		if (n == 2 && holder(names, 0) != dead &&
		    holder(names, 1) != dead)
			break;
		usleep(50000);
	}
	assert_int_equal(n, 2);
	assert_int_not_equal(holder(names, 0), dead);
	assert_int_not_equal(holder(names, 1), dead);
	for (int i = 0; i < NP; i++)
		if (i != dead)
			assert_int_equal(th_kv_cmd(&p[i], "get k %u 1", LEN),
					 LEN);

	/* unknown tasks */
	assert_int_equal(xfer_kv_query_task(kv, 999999, &t),
			 XFER_KV_TASK_NOT_FOUND);
	assert_int_equal(xfer_kv_replicate(kv, "nope", 2, 0),
			 XFER_KV_OBJECT_NOT_FOUND);
	assert_int_equal(xfer_kv_replicate(kv, "k", 17, 0),
			 XFER_KV_INVALID_PARAMS);
	assert_int_equal(xfer_kv_query_task(kv, 1, NULL),
			 XFER_KV_INVALID_PARAMS);
	assert_int_equal(xfer_kv_free(kv), 0);
	for (int i = 0; i < NP; i++)
		if (i != dead)
			th_kv_proc_stop(&p[i]);
	th_stored_stop(th_master.pid);
	th_master.pid = 0;
}

static char file_path[128];

/*
 * A client that lends DRAM and the file at file_path (its SSD
 * segment), says its engine's name, then answers each line until "q":
 *   put KEY LEN VARIANT     a put of one DRAM replica
 *   get KEY LEN VARIANT     a get, bytes checked
 */
static int role_owner(int in, int out, void *arg)
{
	struct xfer_config *cfg = xfer_config_new();
	struct xfer_kv *kv = NULL;
	char line[256], op[8], key[128], res[32];
	unsigned long long len, v;
	int64_t ret;

	(void)arg;
	if (cfg && !xfer_config_set(cfg, "bind_addr", "127.0.0.1") &&
	    !xfer_config_set(cfg, "local_server_name", "127.0.0.1") &&
	    !xfer_config_set(cfg, "workers", "1"))
		kv = xfer_kv_new(NULL, cfg, th_master.addr, 8 * MiB, 4 * MiB);
	xfer_config_free(cfg);
	if (!kv || xfer_register_file(xfer_kv_engine(kv), file_path,
				      8 * MiB, NULL) ||
	    xfer_kv_mount_file(kv, 0, 8 * MiB))
		return 10;
	th_line_send(out, xfer_engine_name(xfer_kv_engine(kv)));
	while (th_line_recv(in, line, sizeof(line), 300000) >= 0 &&
	       strcmp(line, "q")) {
		if (sscanf(line, "%7s %127s %llu %llu", op, key, &len,
			   &v) < 4)
			return 11;
		ret = op[0] == 'p' ? th_put_pattern(kv, key, len, v, 1, false) :
				     th_get_pattern(kv, key, len, v, false);
		snprintf(res, sizeof(res), "%lld", (long long)ret);
		th_line_send(out, res);
	}
	return xfer_kv_free(kv) ? 12 : 0;
}

/* Count the SSD ("nvmeof/...") replicas among the last descriptors. */
static int on_ssd(int n)
{
	int k = 0;

	for (int i = 0; i < n; i++)
		k += !strncmp(desc[i].endpoint, "nvmeof/", 7);
	return k;
}

/* An SSD replica copied from DRAM into the owner's file, the DRAM ones
 * dropped, the object read from SSD, then copied back into DRAM by the
 * new replica's owner: every holder's bytes checked. */
static void test_ssd(void **state)
{
	struct th_sizes sz = { 8 * MiB, 4 * MiB };
	char name[2][64];
	struct th_proc p[2];
	struct xfer_kv_task t;
	struct xfer_kv *kv;
	int64_t id;
	int fd;

	(void)state;
	snprintf(file_path, sizeof(file_path), "/dev/shm/it_store_repl-%d",
		 (int)getpid());
	fd = open(file_path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 8 * MiB), 0);
	close(fd);
	th_master_start((const char *const[]){
		"--default_kv_lease_ttl=300", NULL });
	th_spawn(&p[0], role_owner, NULL);
	assert_true(th_line_recv(p[0].from, name[0], 64, 30000) > 0);
	th_kv_proc_start(&p[1], &sz, name[1]);
	kv = th_kv(0, 4 * MiB);
	assert_int_equal(th_kv_cmd(&p[0], "put s %u 2", LEN), 0);

	id = xfer_kv_replicate(kv, "s", 1, 1);
	assert_int_equal(wait_task(kv, (uint64_t)id, 20000, &t),
			 XFER_KV_TASK_SUCCESS);
	assert_int_equal(xfer_kv_get_replica_desc(kv, "s", desc), 2);
	assert_int_equal(on_ssd(2), 1);
	assert_int_equal(on_ssd(1), 0);        /* DRAM listed first */
	usleep(350000);
	id = xfer_kv_replicate(kv, "s", 0, 1);
	assert_int_equal(wait_task(kv, (uint64_t)id, 10000, &t),
			 XFER_KV_TASK_SUCCESS);
	assert_int_equal(xfer_kv_get_replica_desc(kv, "s", desc), 1);
	assert_int_equal(on_ssd(1), 1);
	/* the bytes in the file, read through its owner and by it */
	assert_int_equal(th_get_pattern(kv, "s", LEN, 2, false), LEN);
	assert_int_equal(th_kv_cmd(&p[0], "get s %u 2", LEN), LEN);
	usleep(350000);
	id = xfer_kv_replicate(kv, "s", 2, 1);
	assert_int_equal(wait_task(kv, (uint64_t)id, 20000, &t),
			 XFER_KV_TASK_SUCCESS);
	assert_int_equal(xfer_kv_get_replica_desc(kv, "s", desc), 3);
	assert_int_equal(on_ssd(3), 1);
	for (int i = 0; i < 2; i++)    /* each reads its own DRAM one */
		assert_int_equal(th_kv_cmd(&p[i], "get s %u 2", LEN), LEN);

	assert_int_equal(xfer_kv_free(kv), 0);
	for (int i = 0; i < 2; i++)
		th_kv_proc_stop(&p[i]);
	th_stored_stop(th_master.pid);
	th_master.pid = 0;
	unlink(file_path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_replicate),
		cmocka_unit_test(test_ssd),
	};

	return cmocka_run_group_tests(tests, NULL, th_master_teardown);
}
