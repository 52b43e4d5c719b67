/*
 * The slower tier (docs/STORE.md, "The slower tier") with a real
 * xfer-stored and clients, the tier a temporary folder: an eager put's
 * file is there, with its bytes and version, when the put returns; a
 * lazy one's appears later, and under a stream of upserts of one key the
 * file's version never goes back and ends at the last; a file of a later
 * version is never replaced by an older one; a put that does not flush
 * leaves no file; a key too long for a file name is named by a hash; an object evicted from DRAM is read back from
 * the tier, bytes checked; a SIGKILLed master restarted on its journal
 * still knows what is flushed, so a new client reads it back.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xfer/store.h>

#include "test/helpers.h"
#include "test/th_store.h"

#define KiB 1024u
#define MiB (1u << 20)
#define HDR 32

static char dir[] = "/tmp/it_store_flush.XXXXXX";

/* The tier's name of a short key: 'k' and its base64url. */
static void file_of(const char *key, char *path, size_t cap)
{
	static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	const uint8_t *k = (const uint8_t *)key;
	size_t n = strlen(key), o = 0;
	char name[256];

	name[o++] = 'k';
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)k[i] << 16 |
			     (i + 1 < n ? (uint32_t)k[i + 1] << 8 : 0) |
			     (i + 2 < n ? k[i + 2] : 0);

		name[o++] = b64[v >> 18];
		name[o++] = b64[(v >> 12) & 63];
		if (i + 1 < n)
			name[o++] = b64[(v >> 6) & 63];
		if (i + 2 < n)
			name[o++] = b64[v & 63];
	}
	name[o] = 0;
	snprintf(path, cap, "%s/%s", dir, name);
}

static uint64_t le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* The version in @p key's file, 0 if there is none. */
static uint64_t file_version(const char *key)
{
	char path[512];
	uint8_t h[HDR];
	int fd;
	ssize_t r;

	file_of(key, path, sizeof(path));
	if ((fd = open(path, O_RDONLY)) < 0)
		return 0;
	r = pread(fd, h, HDR, 0);
	close(fd);
	return r == HDR && !memcmp(h, "XFERTIR1", 8) ? le64(h + 8) : 0;
}

/* Check @p key's file: @p len bytes of th_fill(@p seed). @return its
 * version. */
static uint64_t file_check(const char *key, size_t len, uint64_t seed)
{
	char path[512];
	size_t klen = strlen(key);
	uint8_t *buf = malloc(HDR + klen + len + 1);
	uint64_t v;
	ssize_t r;
	int fd;

	file_of(key, path, sizeof(path));
	assert_non_null(buf);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	r = pread(fd, buf, HDR + klen + len + 1, 0);
	close(fd);
	assert_int_equal(r, HDR + klen + len);
	assert_memory_equal(buf, "XFERTIR1", 8);
	assert_int_equal(le64(buf + 16), len);
	assert_int_equal(le64(buf + 24), klen);
	assert_memory_equal(buf + HDR, key, klen);
	assert_int_equal(th_check(buf + HDR + klen, len, seed), -1);
	v = le64(buf + 8);
	free(buf);
	return v;
}

/* Write @p key's file as a writer would: @p version, @p len bytes of
 * th_fill(@p seed). */
static void write_file(const char *key, uint64_t version, size_t len,
		       uint64_t seed)
{
	size_t klen = strlen(key);
	uint8_t *buf = malloc(HDR + klen + len);
	char path[512];
	int fd;

	assert_non_null(buf);
	memcpy(buf, "XFERTIR1", 8);
	for (int i = 0; i < 8; i++) {
		buf[8 + i] = (uint8_t)(version >> (8 * i));
		buf[16 + i] = (uint8_t)((uint64_t)len >> (8 * i));
		buf[24 + i] = (uint8_t)((uint64_t)klen >> (8 * i));
	}
	memcpy(buf + HDR, key, klen);
	th_fill(buf + HDR + klen, len, seed);
	file_of(key, path, sizeof(path));
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, HDR + klen + len), HDR + klen + len);
	close(fd);
	free(buf);
}

static int put(struct xfer_kv *kv, const char *key, size_t len,
	       uint64_t variant, unsigned flush, bool upsert)
{
	struct xfer_kv_replicate rc = { .replica_num = 1, .flush = flush };
	void *buf = malloc(len);
	int ret;

	th_fill(buf, len, th_seed(key, variant));
	ret = upsert ? xfer_kv_upsert(kv, key, buf, len, &rc) :
		       xfer_kv_put(kv, key, buf, len, &rc);
	free(buf);
	return ret;
}

static struct xfer_kv *tier_kv(uint64_t seg)
{
	struct xfer_kv *kv = th_kv(seg, 4 * MiB);

	assert_int_equal(xfer_kv_set_root_fs_dir(kv, dir), 0);
	assert_int_equal(xfer_kv_set_root_fs_dir(kv, dir), -EBUSY);
	return kv;
}

static int setup(void **state)
{
	(void)state;
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	th_master_teardown(state);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

/* Eager: the file, bytes and version, before the put returns; none:
 * never a file; a flush without a tier is refused. */
static void test_eager_none(void **state)
{
	struct xfer_kv *plain, *kv;
	struct xfer_kv_replicate rc = { .replica_num = 1,
					.flush = XFER_KV_FLUSH_EAGER };
	uint8_t one = 1;

	(void)state;
	th_master_start(NULL);
	plain = th_kv(0, MiB);
	assert_int_equal(xfer_kv_put(plain, "x", &one, 1, &rc),
			 XFER_KV_INVALID_PARAMS);
	rc.flush = 3;
	assert_int_equal(xfer_kv_put(plain, "x", &one, 1, &rc),
			 XFER_KV_INVALID_PARAMS);
	assert_int_equal(xfer_kv_free(plain), 0);
	kv = tier_kv(16 * MiB);
	for (int i = 1; i <= 3; i++) {
		char key[16];

		snprintf(key, sizeof(key), "eager%d", i);
		assert_int_equal(put(kv, key, 100 * KiB + (size_t)i, 1,
				     XFER_KV_FLUSH_EAGER, false), 0);
		assert_int_equal(file_check(key, 100 * KiB + (size_t)i,
					    th_seed(key, 1)),
				 xfer_kv_sync(kv));
	}
	assert_int_equal(put(kv, "none", 64 * KiB, 1, XFER_KV_FLUSH_NONE,
			     false), 0);
	/* a long key (its file named by a hash), removed from DRAM, is
	 * read back from the tier */
	{
		char *lk = malloc(3001), *buf = malloc(4 * KiB);

		memset(lk, 'L', 3000);
		lk[3000] = 0;
		assert_int_equal(put(kv, lk, 4 * KiB, 5, XFER_KV_FLUSH_EAGER,
				     false), 0);
		assert_int_equal(xfer_kv_remove(kv, lk, true), 0);
		assert_int_equal(xfer_kv_get(kv, lk, buf, 4 * KiB), 4 * KiB);
		assert_int_equal(th_check(buf, 4 * KiB, th_seed(lk, 5)), -1);
		free(lk);
		free(buf);
	}
	/* a later version in the tier (another writer's) is never replaced
	 * by an older one: the put's own stays out */
	write_file("later", 1ull << 40, 8 * KiB, th_seed("later", 9));
	assert_int_equal(put(kv, "later", 8 * KiB, 1, XFER_KV_FLUSH_EAGER,
			     false), 0);
	assert_int_equal(file_check("later", 8 * KiB, th_seed("later", 9)),
			 1ull << 40);
	assert_int_equal(xfer_kv_free(kv), 0);  /* the lazy thread drained */
	assert_int_equal(file_version("none"), 0);
	th_stored_stop(th_master.pid);
	th_master.pid = 0;
}

struct watch {
	atomic_bool stop;
	uint64_t seen, backwards;
};

static void *watcher(void *arg)
{
	struct watch *w = arg;

	while (!atomic_load(&w->stop)) {
		uint64_t v = file_version("lazy");

		if (v < w->seen)
			w->backwards++;
		if (v > w->seen)
			w->seen = v;
	}
	return NULL;
}

/* Lazy: upserts of one key, a thread reading the file's version all the
 * while: never backwards, and at the last version in the end. */
static void test_lazy_order(void **state)
{
	struct watch w = { .stop = false };
	struct xfer_kv *kv;
	pthread_t t;
	uint64_t last;

	(void)state;
	th_master_start(NULL);
	kv = tier_kv(64 * MiB);
	assert_int_equal(pthread_create(&t, NULL, watcher, &w), 0);
	for (int i = 1; i <= 300; i++)
		assert_int_equal(put(kv, "lazy", 64 * KiB + (size_t)i,
				     (uint64_t)i, XFER_KV_FLUSH_LAZY, true), 0);
	last = (uint64_t)xfer_kv_sync(kv);
	for (int i = 0; i < 1000 && file_version("lazy") < last; i++)
		usleep(10000);
	atomic_store(&w.stop, true);
	pthread_join(t, NULL);
	assert_int_equal(w.backwards, 0);
	assert_int_equal(file_check("lazy", 64 * KiB + 300,
				    th_seed("lazy", 300)), last);
	assert_int_equal(xfer_kv_free(kv), 0);
	th_stored_stop(th_master.pid);
	th_master.pid = 0;
}

/* Evicted from DRAM: read back from the tier, bytes checked; one that
 * never flushed is gone (-704). */
static void test_evict_readback(void **state)
{
	struct xfer_kv *kv;
	uint8_t *buf = malloc(300 * KiB);
	uint64_t v = 0;
	int i;

	(void)state;
	th_master_start(NULL);
	kv = tier_kv(2 * MiB);
	assert_int_equal(put(kv, "cold", 300 * KiB, 7, XFER_KV_FLUSH_EAGER,
			     false), 0);
	assert_int_equal(put(kv, "cold2", 300 * KiB, 7, XFER_KV_FLUSH_LAZY,
			     false), 0);
	assert_int_equal(put(kv, "gone", 300 * KiB, 7, XFER_KV_FLUSH_NONE,
			     false), 0);
	/* fill the segment: the three are the least recently used */
	for (i = 0; i < 20; i++) {
		char key[16];
		int ret;

		snprintf(key, sizeof(key), "fill%d", i);
		ret = put(kv, key, 300 * KiB, 1, XFER_KV_FLUSH_NONE, false);
		assert_true(ret == 0 || ret == XFER_KV_NO_AVAILABLE_HANDLE);
	}
	assert_int_equal(xfer_kv_exist(kv, "gone"), 0);
	assert_int_equal(xfer_kv_exist(kv, "cold"), 0);
	assert_int_equal(xfer_kv_exist(kv, "cold2"), 0);
	assert_int_equal(xfer_kv_get_size(kv, "cold"), 300 * KiB);
	memset(buf, 0, 300 * KiB);
	assert_int_equal(xfer_kv_get_version(kv, "cold", buf, 300 * KiB, 0, 0,
					     &v), 300 * KiB);
	assert_int_equal(th_check(buf, 300 * KiB, th_seed("cold", 7)), -1);
	assert_int_equal(v, file_version("cold"));
	assert_int_equal(xfer_kv_get_version(kv, "cold", buf, 300 * KiB, 0,
					     v + 1, &v),
			 XFER_KV_VERSION_TOO_OLD);
	assert_int_equal(xfer_kv_get(kv, "cold", buf, KiB),
			 XFER_KV_INVALID_PARAMS);
	/* lazy: written and reported to the master later */
	memset(buf, 0, 300 * KiB);
	for (i = 0; i < 500 && xfer_kv_get(kv, "cold2", buf, 300 * KiB) ==
			       XFER_KV_OBJECT_NOT_FOUND; i++)
		usleep(10000);
	assert_int_equal(xfer_kv_get(kv, "cold2", buf, 300 * KiB), 300 * KiB);
	assert_int_equal(th_check(buf, 300 * KiB, th_seed("cold2", 7)), -1);
	assert_int_equal(xfer_kv_get(kv, "gone", buf, 300 * KiB),
			 XFER_KV_OBJECT_NOT_FOUND);
	assert_int_equal(xfer_kv_free(kv), 0);
	free(buf);
	th_stored_stop(th_master.pid);
	th_master.pid = 0;
}

/* SIGKILL and restart the master on its journal: a new client (the old
 * one's segment, and the objects in it, gone) reads the flushed object
 * back, so the master kept its version. */
static void test_restart(void **state)
{
	char journal[80], flag[100];
	struct xfer_kv *kv;
	uint8_t *buf = malloc(200 * KiB);
	uint16_t port;

	(void)state;
	snprintf(journal, sizeof(journal), "%s/journal.db", dir);
	snprintf(flag, sizeof(flag), "--journal=%s", journal);
	th_master_start((const char *[]){ flag, NULL });
	port = th_master.port;
	kv = tier_kv(16 * MiB);
	assert_int_equal(put(kv, "kept", 200 * KiB, 3, XFER_KV_FLUSH_EAGER,
			     false), 0);
	assert_int_equal(xfer_kv_free(kv), 0);  /* its objects go */
	th_kill(th_master.pid);
	th_master.pid = th_stored_start((const char *[]){ flag, NULL }, port,
					&th_master.port);
	kv = tier_kv(0);
	assert_int_equal(xfer_kv_exist(kv, "kept"), 0);
	assert_int_equal(xfer_kv_get(kv, "kept", buf, 200 * KiB), 200 * KiB);
	assert_int_equal(th_check(buf, 200 * KiB, th_seed("kept", 3)), -1);
	assert_int_equal(xfer_kv_free(kv), 0);
	free(buf);
	th_stored_stop(th_master.pid);
	th_master.pid = 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_eager_none, th_master_teardown),
		cmocka_unit_test_teardown(test_lazy_order, th_master_teardown),
		cmocka_unit_test_teardown(test_evict_readback,
					  th_master_teardown),
		cmocka_unit_test_teardown(test_restart, th_master_teardown),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
