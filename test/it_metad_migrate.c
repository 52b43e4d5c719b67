/*
 * xfer-metad --persist on a file of the old format (the whole store in
 * one file, before SQLite), the real program: migrated at start with its
 * revision, the old file kept aside; a migration cut short is done again;
 * something in the way, or a damaged old file, is refused with a message
 * that says what to do, and nothing is changed.
 *
 * XFER_TEST_WRAP puts a command in front of the server (th_metad.h).
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test/helpers.h"
#include "test/th_metad.h"

static struct server P = { .pid = -1 };

#define KEY_MAX 4096        /* xfer-metad's longest key, bytes */
#define REVISION 57         /* the old file's */

/* --- the old format ------------------------------------------------------ */

struct enc {
	char *buf;
	size_t len;
};

static void put_bytes(struct enc *e, const void *p, size_t n)
{
	e->buf = realloc(e->buf, e->len + n);
	assert_non_null(e->buf);
	memcpy(e->buf + e->len, p, n);
	e->len += n;
}

static void put_le(struct enc *e, uint64_t v, size_t bytes)
{
	uint8_t b[8];

	for (size_t i = 0; i < bytes; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	put_bytes(e, b, bytes);
}

/* Put the checksum (FNV-1a 64 of all before it, the last 8 bytes) right. */
static void reseal(char *buf, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < len - 8; i++) {
		h ^= (uint8_t)buf[i];
		h *= 0x100000001b3ull;
	}
	for (int i = 0; i < 8; i++)
		buf[len - 8 + i] = (char)(h >> (8 * i));
}

struct entry {
	const char *key;
	const void *val;
	size_t vlen;
};

/* An old persist file: "XFERMETA", u32 1, u64 revision, u64 count, then
 * per entry u32 klen, u64 vlen, key, value; a u64 FNV-1a 64 last. */
static struct enc encode(uint64_t revision, const struct entry *ents,
			 size_t n)
{
	struct enc e = { 0 };

	put_bytes(&e, "XFERMETA", 8);
	put_le(&e, 1, 4);
	put_le(&e, revision, 8);
	put_le(&e, n, 8);
	for (size_t i = 0; i < n; i++) {
		put_le(&e, strlen(ents[i].key), 4);
		put_le(&e, ents[i].vlen, 8);
		put_bytes(&e, ents[i].key, strlen(ents[i].key));
		put_bytes(&e, ents[i].val, ents[i].vlen);
	}
	put_le(&e, 0, 8);
	reseal(e.buf, e.len);
	return e;
}

/* Three entries: every byte value, an empty value, the longest key. */
static char long_key[KEY_MAX + 1];
static uint8_t all_bytes[256];

static struct enc sample(void)
{
	struct entry ents[] = {
		{ "m/bytes", all_bytes, sizeof(all_bytes) },
		{ "m/empty", "", 0 },
		{ long_key, "{\"k\":1}\n", 8 },
	};

	for (int i = 0; i < 256; i++)
		all_bytes[i] = (uint8_t)i;
	memset(long_key, 'k', KEY_MAX);
	return encode(REVISION, ents, 3);
}

static void check_sample(uint16_t port)
{
	check_key(port, "m/bytes", all_bytes, sizeof(all_bytes));
	check_key(port, "m/empty", "", 0);
	check_key(port, long_key, "{\"k\":1}\n", 8);
}

static bool exists(const char *path)
{
	struct stat st;

	return !lstat(path, &st);
}

/* @p path holds exactly the @p len bytes at @p data. */
static void check_file(const char *path, const void *data, size_t len)
{
	size_t got;
	char *buf = read_file(path, &got);

	assert_int_equal(got, len);
	assert_memory_equal(buf, data, len);
	free(buf);
}

/* --- tests ---------------------------------------------------------------- */

static void test_migrate(void **state)
{
	char *file = fmt("%s/store", tmp_dir);
	char *aside = fmt("%s.migrated", file);
	char *tmp = fmt("%s.migrating", file);
	char *err_file = fmt("%s/err", tmp_dir), *msg;
	struct enc old = sample();

	(void)state;
	write_file(file, old.buf, old.len);
	server_start(&P, file, err_file);
	check_sample(P.port);
	assert_int_equal(current_rev(P.port), REVISION);
	put_key(P.port, "m/new", "{}\n", 3);
	assert_int_equal(current_rev(P.port), REVISION + 1);
	msg = read_file(err_file, NULL);
	if (!strstr(msg, "migrated 3 keys at revision 57") ||
	    !strstr(msg, aside))
		fail_msg("no word of the migration: %s", msg);
	free(msg);
	check_file(aside, old.buf, old.len);
	assert_false(exists(tmp));
	/* killed: the new database holds it all */
	server_stop(&P, SIGKILL);

	server_start(&P, file, err_file);
	check_sample(P.port);
	check_key(P.port, "m/new", "{}\n", 3);
	assert_int_equal(current_rev(P.port), REVISION + 1);
	msg = read_file(err_file, NULL);
	assert_null(strstr(msg, "migrated"));   /* once only */
	free(msg);
	assert_exit_0(server_stop(&P, SIGTERM));
	check_file(aside, old.buf, old.len);

	unlink(aside);
	unlink(file);
	free(old.buf);
	free(err_file);
	free(tmp);
	free(aside);
	free(file);
}

/* A migration that stopped between its steps (the old file linked aside,
 * a half-built database beside it) is done again from the start. */
static void test_migrate_resumed(void **state)
{
	char *file = fmt("%s/store", tmp_dir);
	char *aside = fmt("%s.migrated", file);
	char *tmp = fmt("%s.migrating", file);
	struct enc old = sample();

	(void)state;
	write_file(file, old.buf, old.len);
	assert_int_equal(link(file, aside), 0);
	write_file(tmp, "half a database", 15);
	server_start(&P, file, NULL);
	check_sample(P.port);
	assert_int_equal(current_rev(P.port), REVISION);
	assert_exit_0(server_stop(&P, SIGTERM));
	check_file(aside, old.buf, old.len);
	assert_false(exists(tmp));

	unlink(aside);
	unlink(file);
	free(old.buf);
	free(tmp);
	free(aside);
	free(file);
}

/* The server refuses @p file: exit 1, a message naming it and holding
 * @p says; the file as it was, nothing made beside it. */
static void refuses(const char *file, const void *data, size_t len,
		    const char *says)
{
	char *err_file = fmt("%s/err", tmp_dir), *msg;
	char *tmp = fmt("%s.migrating", file);
	int status;

	write_file(file, data, len);
	status = reap(spawn(file, err_file));
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 1);
	msg = read_file(err_file, NULL);
	if (!strstr(msg, file) || !strstr(msg, says))
		fail_msg("want a message with the file name and '%s': %s",
			 says, msg);
	check_file(file, data, len);
	assert_false(exists(tmp));
	free(msg);
	free(tmp);
	free(err_file);
}

/* Another file where the old one would go aside: moved away by hand. */
static void test_migrate_in_the_way(void **state)
{
	char *file = fmt("%s/store", tmp_dir);
	char *aside = fmt("%s.migrated", file);
	struct enc old = sample();

	(void)state;
	write_file(aside, "mine\n", 5);
	refuses(file, old.buf, old.len, "move it away");
	check_file(aside, "mine\n", 5);
	unlink(aside);
	server_start(&P, file, NULL);
	check_sample(P.port);
	assert_exit_0(server_stop(&P, SIGTERM));

	unlink(aside);
	unlink(file);
	free(old.buf);
	free(aside);
	free(file);
}

/* A damaged old file: refused, with what to do, and left as it was. */
static void test_migrate_corrupt(void **state)
{
	char *file = fmt("%s/store", tmp_dir);
	char *aside = fmt("%s.migrated", file);
	struct enc good = sample(), dup;
	struct entry twice[] = { { "d/a", "1", 1 }, { "d/a", "2", 1 } };
	static const char says[] = "move it away to start with an empty store";
	char *bad = malloc(good.len);

	(void)state;
	assert_non_null(bad);
	refuses(file, good.buf, good.len - 5, says);    /* truncated */
	refuses(file, good.buf, 20, says);              /* half a header */
	memcpy(bad, good.buf, good.len);
	bad[good.len / 2] ^= 0x40;                      /* one flipped bit */
	refuses(file, bad, good.len, "checksum");
	/* well sealed, wrong inside */
	memcpy(bad, good.buf, good.len);
	bad[8] = 2;                                     /* version 2 */
	reseal(bad, good.len);
	refuses(file, bad, good.len, "version");
	memcpy(bad, good.buf, good.len);
	bad[20]++;                                      /* one entry more */
	reseal(bad, good.len);
	refuses(file, bad, good.len, "truncated entry");
	memcpy(bad, good.buf, good.len);
	bad[12] = 1;                                    /* revision 1 */
	reseal(bad, good.len);
	refuses(file, bad, good.len, "more keys than changes");
	memcpy(bad, good.buf, good.len);
	memset(bad + 12, 0xff, 7);                      /* revision ≥ 2^63 */
	bad[19] = 0x7f;
	reseal(bad, good.len);
	refuses(file, bad, good.len, "revision out of range");
	dup = encode(5, twice, 2);
	refuses(file, dup.buf, dup.len, "duplicate key");
	assert_false(exists(aside));

	free(dup.buf);
	free(bad);
	free(good.buf);
	unlink(file);
	free(aside);
	free(file);
}

/* --- main ---------------------------------------------------------------- */

/* A failed test may leave its server up. */
static int cleanup(void **state)
{
	(void)state;
	server_kill(&P);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_migrate, cleanup),
		cmocka_unit_test_teardown(test_migrate_resumed, cleanup),
		cmocka_unit_test_teardown(test_migrate_in_the_way, cleanup),
		cmocka_unit_test_teardown(test_migrate_corrupt, cleanup),
	};
	int failed;

	if (!mkdtemp(tmp_dir)) {
		perror("mkdtemp");
		return 1;
	}
	failed = cmocka_run_group_tests_name("xfer-metad migration", tests,
					     NULL, NULL);
	th_rm_tree(tmp_dir);
	return failed;
}
