/*
 * What the redis tests (test/it_redis*.c) share: redis-server started on
 * loopback, a raw RESP client, and a Sentinel set-up (a master, a replica,
 * three sentinels). Linked into those programs only (mk/test.mk:
 * test/th_NAME.c goes with test/it_NAME*.c).
 */
#ifndef XFER_TEST_TH_REDIS_H
#define XFER_TEST_TH_REDIS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "test/helpers.h"

#define TH_REDIS_START_MS 10000   /* redis-server answering PING */
#define TH_REDIS_IO_MS 5000       /* the most the raw client waits */

struct th_redis {
	pid_t pid;
	int port;
};

/** Start redis-server on @p port (0: a free one) with @p extra arguments
 *  (NULL-ended) and wait until it answers; with @p conf, as a sentinel
 *  with that configuration file. Fails the test if it does not come. */
void th_redis_start(struct th_redis *s, int port, const char *conf,
		    const char *const *extra);

/** Stop @p s with @p sig and reap it. */
void th_redis_stop(struct th_redis *s, int sig);

/** Blocking connection to 127.0.0.1:@p port with a receive timeout, or
 *  -1. */
int th_raw_connect(int port);

/** Send one command of @p argc words and read its reply into @p out
 *  (@p cap bytes): "+OK", "-ERR ...", ":1", "$" then the bulk's bytes
 *  (their count in *@p len), "$-1" for nil; of an array, its last
 *  element. @return 0, or -1 on a socket error. */
int th_raw_cmdv(int fd, char *out, size_t cap, size_t *len, int argc,
		const char **argv);

/** A command on @p fd; fails the test on a socket error. The reply stays
 *  in a static buffer (bulk data after the '$'). */
#define th_raw_cmd(fd, ...) ({ \
	static char _out[512]; \
	const char *_argv[] = { __VA_ARGS__ }; \
	size_t _len; \
	assert_int_equal(th_raw_cmdv(fd, _out, sizeof(_out), &_len, \
		(int)(sizeof(_argv) / sizeof(_argv[0])), _argv), 0); \
	(const char *)_out; })

/* ---- Sentinel ---- */

#define TH_MASTER "mymaster"
#define TH_DOWN_AFTER_MS 1000     /* sentinels' down-after-milliseconds */

struct th_sentinels {
	struct th_redis master, replica, s[3];
	char dir[64];
	char conn[200];   /* redis+sentinel://127.0.0.1:p1,.../mymaster */
	const char *password;
};

/** A master, its replica (which also takes writes of its own, for tests:
 *  replica-read-only no) and three sentinels watching them, all knowing
 *  each other; with @p password (NULL: none) on master and replica. */
void th_sentinels_start(struct th_sentinels *t, const char *password);

/** Stop everything and remove the folder. */
void th_sentinels_free(struct th_sentinels *t);

/** The port of the master the sentinels name (asked of one that is up),
 *  or 0. */
int th_sentinels_master(struct th_sentinels *t);

/** A raw connection to the server at @p port, authenticated. */
int th_sentinels_connect(struct th_sentinels *t, int port);

#endif
