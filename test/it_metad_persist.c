/*
 * xfer-metad --persist, the real program over real sockets: the database
 * across SIGTERM and SIGKILL (rounds of kills under load lose no answered
 * change), a save that fails, a damaged or foreign file, a path that
 * cannot be created. Each test starts its own server. The old persist
 * format is test/it_metad_migrate.c's.
 *
 * XFER_TEST_WRAP puts a command in front of the server (th_metad.h).
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
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

/* --- SIGKILL under load ------------------------------------------------- */

#define NKEYS 16            /* keys the writer cycles through */
#define ROUNDS 5
#define BIG_EVERY 5         /* every 5th value is BIG bytes, else SMALL */
#define BIG (256u << 10)
#define SMALL 64

/* Version v goes to key v % NKEYS: its first 4 bytes, then th_fill(v). */
static size_t version_len(uint32_t v)
{
	return v % BIG_EVERY ? SMALL : BIG;
}

static void version_fill(uint8_t *buf, uint32_t v)
{
	th_fill(buf + 4, version_len(v) - 4, v);
	memcpy(buf, &v, 4);
}

/*
 * The writer (a child process, no cmocka): PUT versions first, first+1,
 * ... one at a time on one connection, and report each answered one on
 * @p report; end when the server goes away.
 */
static void writer_main(uint16_t port, uint32_t first, int report)
{
	static uint8_t msg[BIG + 256], in[4096];
	size_t head, got;
	int fd = th_connect_try(port);
	ssize_t n;

	if (fd < 0)
		_exit(1);
	for (uint32_t v = first;; v++) {
		head = (size_t)sprintf((char *)msg, "PUT /metadata?key=k%02u "
				       "HTTP/1.1\r\nHost: x\r\nContent-Length:"
				       " %zu\r\n\r\n", v % NKEYS,
				       version_len(v));
		version_fill(msg + head, v);
		if (th_send_all(fd, msg, head + version_len(v)))
			_exit(0);
		/* the answer to a PUT has no body */
		for (got = 0; !memmem(in, got, "\r\n\r\n", 4); got += (size_t)n)
			if ((n = recv(fd, in + got, sizeof(in) - got, 0)) <= 0)
				_exit(0);
		if (memcmp(in, "HTTP/1.1 200", 12) ||
		    write(report, &v, 4) != 4)
			_exit(1);
	}
}

/* Key k holds the last answered version of it, or the one in flight
 * when the server was killed (@p sent, if it is k's). */
static void check_versions(uint16_t port, const uint32_t *acked,
			   uint32_t sent)
{
	uint8_t want[BIG];
	uint32_t v;
	char key[8], *t;
	struct resp r;

	for (uint32_t k = 0; k < NKEYS; k++) {
		snprintf(key, sizeof(key), "k%02u", k);
		t = key_target(key);
		r = req1(port, "GET", t, NULL, 0);
		free(t);
		if (r.status == 404) {
			if (acked[k])
				fail_msg("%s: lost version %u", key, acked[k]);
			free(r.body);
			continue;
		}
		assert_int_equal(r.status, 200);
		assert_true(r.len >= 4);
		memcpy(&v, r.body, 4);
		if (v != acked[k] && !(v == sent && sent % NKEYS == k))
			fail_msg("%s: version %u, last answered %u, in flight "
				 "%u", key, v, acked[k], sent);
		assert_int_equal(r.len, version_len(v));
		version_fill(want, v);
		assert_memory_equal(r.body, want, r.len);
		free(r.body);
	}
}

/* Kill the server at a random moment while a writer PUTs, ROUNDS times;
 * after each restart every answered change is there. */
static void test_persist_kill_rounds(void **state)
{
	char *file = fmt("%s/store-rounds", tmp_dir);
	uint32_t acked[NKEYS] = { 0 }, last = 0, v;
	uint64_t rev;
	int64_t t0;
	int report[2], status;
	pid_t writer;

	(void)state;
	unlink(file);
	srand((unsigned)getpid());
	for (int round = 0; round < ROUNDS; round++) {
		t0 = th_now_ms();
		server_start(&P, file, NULL);
		check_versions(P.port, acked, last + 1);
		/* each version is a change: the revision counts them */
		rev = current_rev(P.port);
		assert_true(rev == last || rev == last + 1);
		if (rev == last + 1) {  /* the one in flight landed */
			last++;
			acked[last % NKEYS] = last;
		}

		assert_int_equal(pipe(report), 0);
		writer = fork();
		assert_true(writer >= 0);
		if (writer == 0) {
			close(report[0]);
			writer_main(P.port, last + 1, report[1]);
		}
		close(report[1]);
		usleep(100000 + (useconds_t)(rand() % 200000));
		server_stop(&P, SIGKILL);
		while (read(report[0], &v, 4) == 4) {
			assert_int_equal(v, last + 1);
			acked[v % NKEYS] = v;
			last = v;
		}
		close(report[0]);
		status = reap(writer);
		assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		printf("    round %d: %u changes answered so far (%" PRId64
		       " ms)\n", round, last, th_now_ms() - t0);
	}
	server_start(&P, file, NULL);
	check_versions(P.port, acked, last + 1);
	assert_exit_0(server_stop(&P, SIGTERM));
	free(file);
}

/* --- failures ------------------------------------------------------------ */

/* server_start() with the server's files limited to @p max bytes (and
 * SIGXFSZ ignored, so that a write past it fails with EFBIG). */
static void server_start_fsize(struct server *s, const char *file,
			       const char *err_file, rlim_t max)
{
	struct rlimit old, lim;
	void (*old_sig)(int) = signal(SIGXFSZ, SIG_IGN);

	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	lim = old;
	lim.rlim_cur = max;
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
	server_start(s, file, err_file);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	signal(SIGXFSZ, old_sig);
}

/* A change that cannot be saved is refused, and not kept in memory. */
static void test_persist_save_fails(void **state)
{
	char *file = fmt("%s/store-fail", tmp_dir);
	char *err_file = fmt("%s/err", tmp_dir), *msg;
	char *t = key_target("f/a");
	size_t big_len = 2u << 20;
	char *big = malloc(big_len);
	struct resp r;

	(void)state;
	assert_non_null(big);
	memset(big, 'b', big_len);
	unlink(file);
	server_start_fsize(&P, file, err_file, 1u << 20);
	put_key(P.port, "f/a", "1\n", 2);
	/* the database's log cannot grow past 1 MiB */
	r = req1(P.port, "PUT", t, big, big_len);
	assert_int_equal(r.status, 500);
	assert_non_null(strstr(r.body, "cannot store the change"));
	free(r.body);
	check_key(P.port, "f/a", "1\n", 2);
	assert_int_equal(current_rev(P.port), 1);
	/* and it goes on */
	put_key(P.port, "f/a", "3\n", 2);
	put_key(P.port, "f/b", "4\n", 2);
	req_status(P.port, "DELETE", t, NULL, 0, 200);
	assert_int_equal(current_rev(P.port), 4);
	assert_exit_0(server_stop(&P, SIGTERM));
	msg = read_file(err_file, NULL);
	if (!strstr(msg, "cannot save"))
		fail_msg("no word of the failure: %s", msg);
	free(msg);

	server_start(&P, file, NULL);
	req_status(P.port, "GET", t, NULL, 0, 404);
	check_key(P.port, "f/b", "4\n", 2);
	assert_int_equal(current_rev(P.port), 4);
	assert_exit_0(server_stop(&P, SIGTERM));
	free(big);
	free(err_file);
	free(t);
	free(file);
}

/* The server refuses @p file: exit 1, a message naming it and holding
 * @p says, the file left as it was. */
static void refuses(const char *file, const void *data, size_t len,
		    const char *says)
{
	char *err_file = fmt("%s/err", tmp_dir), *msg, *after;
	size_t after_len;
	int status;

	write_file(file, data, len);
	status = reap(spawn(file, err_file));
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 1);
	msg = read_file(err_file, NULL);
	if (!strstr(msg, file) || !strstr(msg, says))
		fail_msg("want a message with the file name and '%s': %s",
			 says, msg);
	after = read_file(file, &after_len);
	assert_int_equal(after_len, len);
	assert_memory_equal(after, data, len);
	free(after);
	free(msg);
	free(err_file);
}

/* SQLite's header: user_version and application_id, big-endian. */
#define HDR_USER_VERSION 60
#define HDR_APP_ID 68
#define PAGE 4096

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
	assert_true(len >= 4 * PAGE);
	bad = malloc(len);
	assert_non_null(bad);

	refuses(file, "not a store\n", 12, "not a database");
	memcpy(bad, good, len);
	memset(bad, 0, 16);                     /* no SQLite header */
	refuses(file, bad, len, "not a database");
	memcpy(bad, good, len);
	bad[HDR_APP_ID + 3] ^= 1;               /* someone else's file */
	refuses(file, bad, len, "not an xfer-metad store");
	memcpy(bad, good, len);
	bad[HDR_USER_VERSION + 3] = 2;          /* a newer schema */
	refuses(file, bad, len, "schema version");
	memcpy(bad, good, len);
	memset(bad + PAGE, 0x5a, PAGE);         /* page 2 overwritten */
	refuses(file, bad, len, "damaged");
	refuses(file, good, PAGE, "damaged"); /* truncated */

	/* and it starts again once the file is good */
	write_file(file, good, len);
	server_start(&P, file, NULL);
	check_key(P.port, "c/b", "{\"b\":2}\n", 8);
	/* one server per file */
	status = reap(spawn(file, "/dev/null"));
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 1);
	check_key(P.port, "c/a", "{\"a\":1}\n", 8);
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
	server_kill(&P);
	return 0;
}

int main(void)
{
	const struct CMUnitTest persist[] = {
		cmocka_unit_test_teardown(test_persist_sigterm,
					  persist_cleanup),
		cmocka_unit_test_teardown(test_persist_sigkill,
					  persist_cleanup),
		cmocka_unit_test_teardown(test_persist_kill_rounds,
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
