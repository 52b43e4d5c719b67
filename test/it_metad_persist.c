/*
 * xfer-metad --persist, the real program over real sockets: the persist
 * file across SIGTERM and SIGKILL, a save that fails, a corrupt file, a
 * path that cannot be created. Each test starts its own server.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yajl/yajl_tree.h>

#include "test/helpers.h"
#include "test/th_metad.h"

static struct server P = { .pid = -1 };  /* with a persist file */

#define NPERSIST 20

/* Value i: 300 + i bytes covering every byte value, NUL and '\n' too. */
static void persist_value(int i, uint8_t *buf, size_t *len)
{
	*len = 300 + (size_t)i;
	for (size_t j = 0; j < *len; j++)
		buf[j] = (uint8_t)(i * 7 + j);
}

/* Fill P's store, stop it with @p sig, restart it on the same file and
 * find everything back, and the revision going on. */
static void persist_cycle(const char *file, int sig)
{
	uint8_t val[400];
	char key[32], *t;
	uint64_t rev;
	size_t len;
	struct watch w;
	struct resp r;
	int status;

	unlink(file);
	server_start(&P, file, NULL);
	for (int i = 0; i < NPERSIST; i++) {
		snprintf(key, sizeof(key), "p/k%02d", i);
		persist_value(i, val, &len);
		put_key(P.port, key, val, len);
	}
	put_key(P.port, "p/k03", "{\"v\":2}\n", 8);   /* a newer value */
	t = key_target("p/k05");
	req_status(P.port, "DELETE", t, NULL, 0, 200);
	rev = current_rev(P.port);
	assert_int_equal(rev, NPERSIST + 2);

	status = server_stop(&P, sig);
	if (sig == SIGKILL)
		assert_true(WIFSIGNALED(status) &&
			    WTERMSIG(status) == SIGKILL);
	else
		assert_exit_0(status);

	server_start(&P, file, NULL);
	for (int i = 0; i < NPERSIST; i++) {
		snprintf(key, sizeof(key), "p/k%02d", i);
		persist_value(i, val, &len);
		if (i == 3)
			check_key(P.port, key, "{\"v\":2}\n", 8);
		else if (i != 5)
			check_key(P.port, key, val, len);
	}
	req_status(P.port, "GET", t, NULL, 0, 404);
	free(t);

	/* the revision goes on: nothing new since rev */
	r = watch1(P.port, "", rev, 300);
	w = watch_parse(&r);
	assert_false(w.compacted);
	assert_int_equal(w.n, 0);
	assert_int_equal(w.revision, rev);
	yajl_tree_free(w.root);
	free(r.body);
	/* the changes before it were not kept across the restart */
	r = watch1(P.port, "", rev - 1, 300);
	w = watch_parse(&r);
	assert_true(w.compacted);
	yajl_tree_free(w.root);
	free(r.body);
	put_key(P.port, "p/new", "{}\n", 3);
	assert_int_equal(current_rev(P.port), rev + 1);
	assert_exit_0(server_stop(&P, SIGTERM));
}

static void test_persist_sigterm(void **state)
{
	char *file = fmt("%s/store-term", tmp_dir);

	(void)state;
	persist_cycle(file, SIGTERM);
	free(file);
}

/* Durable without a clean exit: the 200 comes after fsync + rename. */
static void test_persist_sigkill(void **state)
{
	char *file = fmt("%s/store-kill", tmp_dir);

	(void)state;
	persist_cycle(file, SIGKILL);
	free(file);
}

/* A change that cannot be saved is refused, and not kept in memory. */
static void test_persist_save_fails(void **state)
{
	char *file = fmt("%s/store-fail", tmp_dir);
	char *tmp = fmt("%s.tmp", file);
	char *err_file = fmt("%s/err", tmp_dir), *msg;
	char *t = key_target("f/a");
	struct resp r;

	(void)state;
	unlink(file);
	server_start(&P, file, err_file);
	put_key(P.port, "f/a", "1\n", 2);
	assert_int_equal(mkdir(tmp, 0755), 0);  /* FILE.tmp cannot be made */
	r = req1(P.port, "PUT", t, "2\n", 2);
	assert_int_equal(r.status, 500);
	assert_true(r.len > 1);
	free(r.body);
	req_status(P.port, "DELETE", t, NULL, 0, 500);
	check_key(P.port, "f/a", "1\n", 2);
	assert_int_equal(current_rev(P.port), 1);
	assert_int_equal(rmdir(tmp), 0);
	put_key(P.port, "f/a", "3\n", 2);
	assert_exit_0(server_stop(&P, SIGTERM));
	msg = read_file(err_file, NULL);
	assert_non_null(strstr(msg, "cannot save"));
	free(msg);
	free(err_file);

	server_start(&P, file, NULL);
	check_key(P.port, "f/a", "3\n", 2);
	assert_exit_0(server_stop(&P, SIGTERM));
	free(t);
	free(tmp);
	free(file);
}

/* Put a persist file's checksum (FNV-1a 64, last 8 bytes) right. */
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

/* The server refuses @p file: exit 1, a message naming it, file kept. */
static void refuses(const char *file, const void *data, size_t len)
{
	char *err_file = fmt("%s/err", tmp_dir), *msg, *after;
	size_t after_len;
	int status;

	write_file(file, data, len);
	status = reap(spawn(file, err_file));
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 1);
	msg = read_file(err_file, NULL);
	if (!strstr(msg, file))
		fail_msg("message without the file name: %s", msg);
	after = read_file(file, &after_len);
	assert_int_equal(after_len, len);
	assert_memory_equal(after, data, len);
	free(after);
	free(msg);
	free(err_file);
}

static void test_persist_corrupt(void **state)
{
	char *file = fmt("%s/store-corrupt", tmp_dir), *good, *bad;
	char *nodir = fmt("%s/no/such/dir/store", tmp_dir);
	size_t len;
	int status;

	(void)state;
	unlink(file);
	server_start(&P, file, NULL);
	put_key(P.port, "c/a", "{\"a\":1}\n", 8);
	put_key(P.port, "c/b", "{\"b\":2}\n", 8);
	assert_exit_0(server_stop(&P, SIGTERM));
	good = read_file(file, &len);
	bad = malloc(len);
	assert_non_null(bad);

	refuses(file, "not a store\n", 12);
	refuses(file, good, len - 5);           /* truncated */
	refuses(file, good, 20);
	memcpy(bad, good, len);
	bad[len / 2] ^= 0x40;                   /* one flipped bit */
	refuses(file, bad, len);
	/* well sealed, wrong inside */
	memcpy(bad, good, len);
	bad[8] = 2;                             /* version 2 */
	reseal(bad, len);
	refuses(file, bad, len);
	memcpy(bad, good, len);
	bad[20]++;                              /* one entry more */
	reseal(bad, len);
	refuses(file, bad, len);

	/* and it starts again once the file is good */
	write_file(file, good, len);
	server_start(&P, file, NULL);
	check_key(P.port, "c/b", "{\"b\":2}\n", 8);
	assert_exit_0(server_stop(&P, SIGTERM));

	/* a path it cannot create fails at start, not at the first PUT */
	status = reap(spawn(nodir, "/dev/null"));
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) != 0);

	free(bad);
	free(good);
	free(nodir);
	free(file);
}

/* --- main ---------------------------------------------------------------- */

/* A failed test may leave its server up. */
static int persist_cleanup(void **state)
{
	(void)state;
	if (P.pid > 0) {
		kill(P.pid, SIGKILL);
		waitpid(P.pid, NULL, 0);
		P.pid = -1;
	}
	return 0;
}

int main(void)
{
	const struct CMUnitTest persist[] = {
		cmocka_unit_test_teardown(test_persist_sigterm,
					  persist_cleanup),
		cmocka_unit_test_teardown(test_persist_sigkill,
					  persist_cleanup),
		cmocka_unit_test_teardown(test_persist_save_fails,
					  persist_cleanup),
		cmocka_unit_test_teardown(test_persist_corrupt,
					  persist_cleanup),
	};
	int failed;

	if (!mkdtemp(tmp_dir)) {
		perror("mkdtemp");
		return 1;
	}
	failed = cmocka_run_group_tests_name("xfer-metad --persist", persist,
					     NULL, NULL);
	th_rm_tree(tmp_dir);
	return failed;
}
