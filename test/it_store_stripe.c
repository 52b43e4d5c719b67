/*
 * Striped replicas against a real xfer-stored started with
 * --dram_shard_size=4 MiB and client processes lending DRAM: a large
 * object's replica is cut into shards on distinct segments (seen in the
 * replica descriptors), read back from other processes, whole, ranged
 * across shard ends, staged and zero-copy, every byte checked,
 * upserted, and refused by replication tasks; placed whole when a
 * segment has no room for its shard; a remove gives every
 * shard's space back; a holder of one shard killed, the get reads the
 * other replica, and once the master drops that holder the broken
 * replica is gone whole, its other shard's space given back (the admin
 * HTTP's allocator bytes); a master restarted on its journal serves the
 * same shards.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <xfer/store.h>

#include "test/helpers.h"
#include "test/th_master.h"
#include "test/th_store.h"

#define MiB (1ull << 20)
#define SEG (32 * MiB)
#define HOLDERS 4

static char journal[96];
static uint16_t admin_port;
static struct th_proc holder[HOLDERS];
static char names[HOLDERS][64];

static void master_start(void)
{
	static char jflag[128], aflag[32];
	const char *args[] = { "--dram_shard_size=4194304", "--client_ttl=2",
			       jflag, aflag, NULL };

	snprintf(jflag, sizeof(jflag), "--journal=%s", journal);
	admin_port = th_free_port();
	snprintf(aflag, sizeof(aflag), "--metrics_port=%u", admin_port);
	th_master_start(args);
}

/* Bytes allocated over every segment (the admin HTTP's). */
static uint64_t used_bytes(void)
{
	const char *f = "\"allocator_used_bytes\":";
	uint64_t sum = 0;
	char *body, *p;

	assert_int_equal(st_http_get(admin_port, "/get_segments_detail", &body,
				     NULL), 200);
	for (p = body; (p = strstr(p, f)); p += strlen(f))
		sum += strtoull(p + strlen(f), NULL, 10);
	free(body);
	return sum;
}

/* The master, and @p n client processes lending SEG each. */
static void cluster(int n)
{
	static struct th_sizes sz = { SEG, 8 * MiB };

	snprintf(journal, sizeof(journal), "/tmp/xfer-stripe-%d.db",
		 (int)getpid());
	unlink(journal);
	master_start();
	for (int i = 0; i < n; i++)
		th_kv_proc_start(&holder[i], &sz, names[i]);
}

static int teardown(void **state)
{
	char wal[128];

	for (int i = 0; i < HOLDERS; i++)
		if (holder[i].pid > 0)
			th_proc_kill(&holder[i]);
	memset(holder, 0, sizeof(holder));
	th_master_teardown(state);
	unlink(journal);
	snprintf(wal, sizeof(wal), "%s-wal", journal);
	unlink(wal);
	snprintf(wal, sizeof(wal), "%s-shm", journal);
	unlink(wal);
	return 0;
}

/* Key @p key's descriptors into @p d: @return their count; each replica
 * checked to be whole or shards holding @p len bytes in order. */
static int descs(struct xfer_kv *kv, const char *key, uint64_t len,
		 struct xfer_kv_replica_desc *d, int *replicas)
{
	int n = xfer_kv_get_replica_desc(kv, key, d);

	*replicas = 0;
	for (int i = 0; i < n;) {
		uint64_t sum = 0;
		int s = d[i].shards;

		assert_true(s >= 1 && i + s <= n);
		for (int j = 0; j < s; j++) {
			assert_int_equal(d[i + j].shards, j ? 0 : s);
			sum += d[i + j].size;
		}
		assert_int_equal(sum, len);
		(*replicas)++;
		i += s;
	}
	return n;
}

/* Every entry of @p d on a segment of its own. */
static void distinct(const struct xfer_kv_replica_desc *d, int n)
{
	for (int i = 0; i < n; i++)
		for (int j = 0; j < i; j++)
			assert_string_not_equal(d[i].endpoint, d[j].endpoint);
}

static int holder_of(const char *endpoint)
{
	for (int i = 0; i < HOLDERS; i++)
		if (!strcmp(names[i], endpoint))
			return i;
	return -1;
}

/* One replica over three holders; read back from the others and here. */
static void test_striped(void **state)
{
	const uint64_t len = 30 * MiB + 12345;
	struct xfer_kv_replica_desc d[XFER_KV_REPLICA_MAX];
	struct xfer_kv *kv;
	int n, reps;
	uint8_t *buf;

	(void)state;
	cluster(3);
	assert_int_equal(th_kv_cmd(&holder[0], "put big %llu 1 1",
				   (unsigned long long)len), 0);
	kv = th_kv(0, 8 * MiB);
	n = descs(kv, "big", len, d, &reps);
	assert_int_equal(n, 3);
	assert_int_equal(reps, 1);
	distinct(d, n);
	for (int i = 0; i < n; i++)
		assert_true(holder_of(d[i].endpoint) >= 0);
	/* staged, zero-copy, in two other processes and here */
	assert_int_equal(th_kv_cmd(&holder[1], "get big %llu 1",
				   (unsigned long long)len), (long long)len);
	assert_int_equal(th_kv_cmd(&holder[2], "getz big %llu 1",
				   (unsigned long long)len), (long long)len);
	assert_int_equal(th_get_pattern(kv, "big", len, 1, false),
			 (int64_t)len);
	assert_int_equal(th_get_pattern(kv, "big", len, 1, true),
			 (int64_t)len);
	/* ranges across the ends of shards, staged and zero-copy */
	buf = malloc(len);
	assert_non_null(buf);
	th_fill(buf, len, th_seed("big", 1));
	for (unsigned z = 0; z < 2; z++) {
		uint64_t off[3] = { d[0].size - 100, 5, d[0].size + d[1].size -
				    1 };
		size_t l[3] = { 200, d[0].size + d[1].size + 7, len - off[2] };
		const char *keys[3] = { "big", "big", "big" };
		struct iovec dst[3];
		int64_t res[3];

		for (int i = 0; i < 3; i++) {
			dst[i].iov_base = malloc(l[i]);
			dst[i].iov_len = l[i];
			assert_non_null(dst[i].iov_base);
			if (z)
				assert_int_equal(xfer_kv_register_buffer(
					kv, dst[i].iov_base, l[i]), 0);
		}
		assert_int_equal(xfer_kv_batch_get_ranges(kv, 3, keys, off, dst,
				 z ? XFER_KV_ZERO_COPY : 0, res), 0);
		for (int i = 0; i < 3; i++) {
			assert_int_equal(res[i], (int64_t)l[i]);
			assert_memory_equal(dst[i].iov_base, buf + off[i],
					    l[i]);
			if (z)
				xfer_kv_unregister_buffer(kv, dst[i].iov_base);
			free(dst[i].iov_base);
		}
	}
	free(buf);
	/* an upsert replaces it with another striped replica */
	assert_int_equal(th_kv_cmd(&holder[1], "upsn big %llu 2",
				   (unsigned long long)len), 0);
	assert_int_equal(descs(kv, "big", len, d, &reps), 3);
	distinct(d, 3);
	assert_int_equal(th_get_pattern(kv, "big", len, 2, true),
			 (int64_t)len);
	/* replication tasks leave a striped object alone */
	assert_int_equal(xfer_kv_replicate(kv, "big", 2, 0),
			 XFER_KV_INVALID_PARAMS);
	{
		const char *to[1] = { names[0] };

		assert_int_equal(xfer_kv_create_copy_task(kv, "big", to, 1),
				 XFER_KV_INVALID_PARAMS);
	}
	/* small objects stay whole */
	assert_int_equal(th_kv_cmd(&holder[0], "put small %llu 2 1",
				   (unsigned long long)(3 * MiB)), 0);
	assert_int_equal(descs(kv, "small", 3 * MiB, d, &reps), 1);
	assert_int_equal(d[0].shards, 1);
	assert_int_equal(xfer_kv_free(kv), 0);
	for (int i = 0; i < 3; i++)
		th_kv_proc_stop(&holder[i]);
	th_stored_stop(th_master.pid);
	th_master.pid = 0;
}

/* A remove gives back every shard: objects that each need most of
 * every segment fit one after the other only if it does; and so does
 * eviction, when a put finds no room. */
static void test_remove_frees(void **state)
{
	const uint64_t len = 3 * (SEG - 4 * MiB);
	struct xfer_kv_replica_desc d[XFER_KV_REPLICA_MAX];
	struct xfer_kv *kv;
	int reps;

	(void)state;
	cluster(3);
	kv = th_kv(0, 8 * MiB);
	for (int i = 0; i < 4; i++) {
		char key[16];

		snprintf(key, sizeof(key), "r%d", i);
		assert_int_equal(th_kv_cmd(&holder[i % 3], "putz %s %llu %d 1",
					   key, (unsigned long long)len, i), 0);
		assert_int_equal(descs(kv, key, len, d, &reps), 3);
		assert_int_equal(th_get_pattern(kv, key, len, (uint64_t)i,
						true), (int64_t)len);
		/* leased by that get: forced */
		assert_int_equal(xfer_kv_remove(kv, key, true), 0);
		assert_int_equal(xfer_kv_exist(kv, key), 0);
	}
	/* no room: the put evicts the object before it (not leased, a put
	 * grants none) and is striped in the space its shards leave */
	assert_int_equal(th_kv_cmd(&holder[0], "putz e0 %llu 7 1",
				   (unsigned long long)len), 0);
	assert_int_equal(th_kv_cmd(&holder[1], "putz e1 %llu 8 1",
				   (unsigned long long)len), 0);
	assert_int_equal(descs(kv, "e1", len, d, &reps), 3);
	assert_int_equal(th_get_pattern(kv, "e1", len, 8, true),
			 (int64_t)len);
	assert_int_equal(xfer_kv_exist(kv, "e0"), 0);
	assert_int_equal(xfer_kv_free(kv), 0);
	for (int i = 0; i < 3; i++)
		th_kv_proc_stop(&holder[i]);
	th_stored_stop(th_master.pid);
	th_master.pid = 0;
}

/* A segment too full for a shard: the replica is placed whole, in the
 * slots the stripe gave back, and reads back. */
static void test_fallback_whole(void **state)
{
	const uint64_t len = 27 * MiB;
	struct xfer_kv_replica_desc d[XFER_KV_REPLICA_MAX];
	struct xfer_kv *kv;
	uint8_t *buf;
	int reps;

	(void)state;
	cluster(3);
	kv = th_kv(0, 8 * MiB);
	/* whole objects in holder 2's segment, named as preferred */
	buf = calloc(1, 3 * MiB);
	assert_non_null(buf);
	for (int i = 0; i < 8; i++) {
		struct xfer_kv_replicate rc = { .replica_num = 1,
						.preferred_segment = names[2] };
		char key[16];

		snprintf(key, sizeof(key), "f%d", i);
		assert_int_equal(xfer_kv_put(kv, key, buf, 3 * MiB, &rc), 0);
		assert_int_equal(descs(kv, key, 3 * MiB, d, &reps), 1);
		assert_string_equal(d[0].endpoint, names[2]);
	}
	free(buf);
	/* 9 MiB shards: holder 2 has 8 MiB left */
	assert_int_equal(th_kv_cmd(&holder[0], "put w %llu 9 1",
				   (unsigned long long)len), 0);
	assert_int_equal(descs(kv, "w", len, d, &reps), 1);
	assert_int_equal(d[0].shards, 1);
	assert_string_not_equal(d[0].endpoint, names[2]);
	assert_int_equal(th_get_pattern(kv, "w", len, 9, true), (int64_t)len);
	assert_int_equal(xfer_kv_free(kv), 0);
	for (int i = 0; i < 3; i++)
		th_kv_proc_stop(&holder[i]);
	th_stored_stop(th_master.pid);
	th_master.pid = 0;
}

/* Two replicas of two shards on four holders: one holder killed, gets go
 * on from the other replica; once the master drops it, the replica it
 * held a shard of is gone whole. */
static void test_holder_killed(void **state)
{
	const uint64_t len = 20 * MiB + 64;
	struct xfer_kv_replica_desc d[XFER_KV_REPLICA_MAX];
	struct xfer_kv *kv;
	int n, reps, victim;
	uint64_t used;

	(void)state;
	cluster(4);
	assert_int_equal(th_kv_cmd(&holder[0], "put two %llu 3 2",
				   (unsigned long long)len), 0);
	kv = th_kv(0, 8 * MiB);
	n = descs(kv, "two", len, d, &reps);
	assert_int_equal(n, 4);
	assert_int_equal(reps, 2);
	distinct(d, n);
	/* a holder of the first replica's second shard */
	victim = holder_of(d[1].endpoint);
	assert_true(victim >= 0);
	th_proc_kill(&holder[victim]);
	for (int i = 0; i < 3; i++)
		assert_int_equal(th_get_pattern(kv, "two", len, 3, i & 1),
				 (int64_t)len);
	/* --client_ttl=2: its segment goes, and the shards beside it */
	for (int i = 0; i < 100 && n == 4; i++) {
		usleep(100000);
		n = descs(kv, "two", len, d, &reps);
	}
	assert_int_equal(n, 2);
	assert_int_equal(reps, 1);
	for (int i = 0; i < n; i++)
		assert_int_not_equal(holder_of(d[i].endpoint), victim);
	/* the dropped replica's other shard is given back (a shard's
	 * allocation may be rounded up a little) */
	used = used_bytes();
	assert_true(used >= d[0].size + d[1].size &&
		    used < d[0].size + d[1].size + MiB);
	assert_int_equal(th_get_pattern(kv, "two", len, 3, false),
			 (int64_t)len);
	/* the three segments left hold an object that needs most of each */
	assert_int_equal(xfer_kv_remove(kv, "two", true), 0);
	assert_int_equal(used_bytes(), 0);
	assert_int_equal(th_kv_cmd(&holder[victim ? 0 : 1], "putz big %llu 6 1",
				   (unsigned long long)(3 * (SEG - 4 * MiB))),
			 0);
	assert_int_equal(xfer_kv_free(kv), 0);
	for (int i = 0; i < HOLDERS; i++)
		if (i != victim)
			th_kv_proc_stop(&holder[i]);
	th_stored_stop(th_master.pid);
	th_master.pid = 0;
}

/* A master killed and started again on its journal serves the shards at
 * the same places once their holders mount again. */
static void test_journal(void **state)
{
	const uint64_t len = 24 * MiB + 1000;
	struct xfer_kv_replica_desc d[XFER_KV_REPLICA_MAX];
	struct xfer_kv_replica_desc e[XFER_KV_REPLICA_MAX];
	uint16_t port;
	int n, m = 0, reps;

	(void)state;
	cluster(3);
	assert_int_equal(th_kv_cmd(&holder[1], "put kept %llu 4 1",
				   (unsigned long long)len), 0);
	assert_int_equal(th_kv_cmd(&holder[2], "put whole %llu 5 1",
				   (unsigned long long)MiB), 0);
	{
		struct xfer_kv *kv = th_kv(0, 8 * MiB);

		n = descs(kv, "kept", len, d, &reps);
		assert_int_equal(n, 3);
		assert_int_equal(xfer_kv_free(kv), 0);
	}
	/* SIGKILL: nothing but the journal survives */
	th_kill(th_master.pid);
	port = th_master.port;
	{
		static char jflag[128];
		const char *args[] = { "--dram_shard_size=4194304",
				       "--client_ttl=5", jflag, NULL };

		snprintf(jflag, sizeof(jflag), "--journal=%s", journal);
		th_master.pid = th_stored_start(args, port, &th_master.port);
	}
	{
		struct xfer_kv *kv = th_kv(0, 8 * MiB);

		/* the holders mount again at their next ping */
		for (int i = 0; i < 100 && m != n; i++) {
			usleep(100000);
			m = xfer_kv_get_replica_desc(kv, "kept", e);
		}
		assert_int_equal(m, n);
		m = descs(kv, "kept", len, e, &reps);
		for (int i = 0; i < n; i++) {
			assert_int_equal(e[i].addr, d[i].addr);
			assert_int_equal(e[i].size, d[i].size);
			assert_string_equal(e[i].endpoint, d[i].endpoint);
		}
		assert_int_equal(th_get_pattern(kv, "kept", len, 4, true),
				 (int64_t)len);
		assert_int_equal(th_get_pattern(kv, "whole", MiB, 5, false),
				 (int64_t)MiB);
		assert_int_equal(xfer_kv_free(kv), 0);
	}
	assert_int_equal(th_kv_cmd(&holder[0], "get kept %llu 4",
				   (unsigned long long)len), (long long)len);
	for (int i = 0; i < 3; i++)
		th_kv_proc_stop(&holder[i]);
	th_stored_stop(th_master.pid);
	th_master.pid = 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_striped, teardown),
		cmocka_unit_test_teardown(test_remove_frees, teardown),
		cmocka_unit_test_teardown(test_fallback_whole, teardown),
		cmocka_unit_test_teardown(test_holder_killed, teardown),
		cmocka_unit_test_teardown(test_journal, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
