/*
 * More DRAM segments of a client's memory (xfer_kv_mount_segment(),
 * Mooncake's MountSegment) against a real xfer-stored: an owner process
 * whose client lends no segment of its own mounts one of its memory;
 * puts preferring the owner's name land there (the master says where)
 * and a client of this process reads them back, bytes checked; the
 * unmount drops them (-704) and later puts go elsewhere; bad ranges get
 * Mooncake's INVALID_PARAMS; the segment is mounted again on a master
 * that restarted, and unmounted when the owner frees its client.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xfer/store.h>
#include <xfer/xfer.h>

#include "test/helpers.h"
#include "test/th_store.h"

#define MiB (1u << 20)
#define LENT (4 * MiB)

static char owner_name[64];

/*
 * The owner: a client with no segment of its own and 8 MiB of memory to
 * lend; says its engine's name, then answers each line until "q":
 *   put KEY LEN VARIANT     a put preferring its own name
 *   get KEY LEN VARIANT     a get, bytes checked
 *   mount OFF LEN           xfer_kv_mount_segment(mem + OFF, LEN)
 *   unmount OFF LEN         xfer_kv_unmount_segment(mem + OFF, LEN)
 */
static int role_owner(int in, int out, void *arg)
{
	struct xfer_kv *kv = th_kv_try(0, 8 * MiB);
	uint8_t *mem = aligned_alloc(4096, 2 * LENT);
	char line[256], op[8], key[128], res[32];
	unsigned long long a, b;
	const char *name;
	int64_t ret;

	(void)arg;
	if (!kv || !mem)
		return 10;
	name = xfer_engine_name(xfer_kv_engine(kv));
	th_line_send(out, name);
	while (th_line_recv(in, line, sizeof(line), 300000) >= 0 &&
	       strcmp(line, "q")) {
		struct xfer_kv_replicate rc = { .replica_num = 1,
						.preferred_segment = name };
		unsigned long long v = 0;

		if (sscanf(line, "%7s %127s %llu %llu", op, key, &a, &v) >= 3 &&
		    !strcmp(op, "put"))
			ret = th_put_pattern_rc(kv, key, a, v, &rc, false);
		else if (!strcmp(op, "get"))
			ret = th_get_pattern(kv, key, a, v, false);
		else if (sscanf(line, "%7s %llu %llu", op, &a, &b) != 3)
			return 11;
		else if (!strcmp(op, "mount"))
			ret = xfer_kv_mount_segment(kv, mem + a, b);
		else
			ret = xfer_kv_unmount_segment(kv, mem + a, b);
		snprintf(res, sizeof(res), "%lld", (long long)ret);
		th_line_send(out, res);
	}
	/* unmounts what is mounted, then unregisters it */
	if (xfer_kv_free(kv))
		return 12;
	free(mem);
	return 0;
}

static void owner_start(struct th_proc *p)
{
	th_spawn(p, role_owner, NULL);
	assert_true(th_line_recv(p->from, owner_name, sizeof(owner_name),
				 30000) > 0);
}

/* Where the master holds @p key: 1 (the owner's segment), 0 (another's),
 * or its error. */
static int where(const char *key)
{
	char names[16][64];
	int32_t err;
	int n = th_raw_query(key, names, &err);

	if (err)
		return err;
	assert_int_equal(n, 1);
	return !strcmp(names[0], owner_name);
}

static void test_mount_put_unmount(void **state)
{
	struct th_proc owner;
	struct xfer_kv *reader;

	(void)state;
	th_master_start(NULL);
	reader = th_kv(16 * MiB, 8 * MiB);
	owner_start(&owner);
	assert_int_equal(th_kv_cmd(&owner, "mount 0 %u", LENT), 0);

	/* the owner's only segment is the mounted one: its puts land there,
	 * and another process reads them */
	assert_int_equal(th_kv_cmd(&owner, "put a %u 1", MiB), 0);
	assert_int_equal(th_kv_cmd(&owner, "put b 5000 2"), 0);
	assert_int_equal(where("a"), 1);
	assert_int_equal(where("b"), 1);
	assert_int_equal(th_get_pattern(reader, "a", MiB, 1, false), MiB);
	assert_int_equal(th_get_pattern(reader, "b", 5000, 2, false), 5000);
	assert_int_equal(th_kv_cmd(&owner, "get a %u 1", MiB), MiB);
	/* a put from the reader preferring the owner writes into it */
	{
		struct xfer_kv_replicate rc = { .replica_num = 1,
						.preferred_segment =
							owner_name };

		assert_int_equal(th_put_pattern_rc(reader, "c", MiB, 3,
						   &rc, false), 0);
	}
	assert_int_equal(where("c"), 1);
	assert_int_equal(th_kv_cmd(&owner, "get c %u 3", MiB), MiB);

	/* bad ranges: Mooncake's INVALID_PARAMS (-600) */
	assert_int_equal(th_kv_cmd(&owner, "mount 0 %u", LENT), -600);
	assert_int_equal(th_kv_cmd(&owner, "mount 4096 4096"), -600);
	assert_int_equal(th_kv_cmd(&owner, "mount %u 100", LENT), -600);
	assert_int_equal(th_kv_cmd(&owner, "mount %u 4096", LENT + 8), -600);
	assert_int_equal(th_kv_cmd(&owner, "mount %u 0", LENT), -600);
	assert_int_equal(th_kv_cmd(&owner, "unmount 0 4096"), -600);
	assert_int_equal(th_kv_cmd(&owner, "unmount %u %u", LENT, LENT),
			 -600);

	/* unmounted: its objects are gone, new puts go elsewhere */
	assert_int_equal(th_kv_cmd(&owner, "unmount 0 %u", LENT), 0);
	assert_int_equal(th_kv_cmd(&owner, "unmount 0 %u", LENT), -600);
	assert_int_equal(where("a"), XFER_KV_OBJECT_NOT_FOUND);
	assert_int_equal(where("c"), XFER_KV_OBJECT_NOT_FOUND);
	assert_int_equal(th_get_pattern(reader, "b", 5000, 2, false),
			 XFER_KV_OBJECT_NOT_FOUND);
	assert_int_equal(th_kv_cmd(&owner, "put d 5000 4"), 0);
	assert_int_equal(where("d"), 0);

	/* the second half, then freeing the owner unmounts it at once */
	assert_int_equal(th_kv_cmd(&owner, "mount %u %u", LENT, LENT), 0);
	assert_int_equal(th_kv_cmd(&owner, "put e 5000 5"), 0);
	assert_int_equal(where("e"), 1);
	assert_int_equal(th_get_pattern(reader, "e", 5000, 5, false), 5000);
	th_kv_proc_stop(&owner);
	assert_int_equal(where("e"), XFER_KV_OBJECT_NOT_FOUND);
	assert_int_equal(th_get_pattern(reader, "d", 5000, 4, false), 5000);
	assert_int_equal(xfer_kv_free(reader), 0);
}

static void test_remount_after_restart(void **state)
{
	struct th_proc owner;
	struct xfer_kv *reader;
	int64_t end;
	char key[16];
	int ret, i = 0;

	(void)state;
	th_master_start(NULL);
	reader = th_kv(16 * MiB, 8 * MiB);
	owner_start(&owner);
	assert_int_equal(th_kv_cmd(&owner, "mount 0 %u", LENT), 0);
	assert_int_equal(th_kv_cmd(&owner, "put a 5000 1"), 0);
	th_kill(th_master.pid);
	th_master.pid = th_stored_start(NULL, th_master.port, &th_master.port);
	/* the owner's client mounts it again: a put preferring it lands
	 * there (until then in the reader's segment, once that is back) */
	end = th_now_ms() + 10000;
	do {
		usleep(100000);
		snprintf(key, sizeof(key), "f%d", i++);
		ret = (int)th_kv_cmd(&owner, "put %s 5000 6", key);
	} while ((ret || where(key) != 1) && th_now_ms() < end);
	assert_int_equal(ret, 0);
	assert_int_equal(where(key), 1);
	assert_int_equal(th_get_pattern(reader, key, 5000, 6, false), 5000);
	th_kv_proc_stop(&owner);
	assert_int_equal(xfer_kv_free(reader), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_mount_put_unmount,
					  th_master_teardown),
		cmocka_unit_test_teardown(test_remount_after_restart,
					  th_master_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
