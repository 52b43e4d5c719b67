/*
 * What the xfer-stored tests (test/it_store*.c) share: the master run as
 * a real process on a free port, and a small client of its RPC
 * (store/proto.c) over a blocking socket. One request in flight at a
 * time through st_req / st_rep; strings in st_rep point into a buffer
 * the next reply overwrites. Linked into the master's tests
 * (it_store_master, it_store_persist, it_store_admin: mk/store.mk).
 */
#ifndef XFER_TEST_TH_MASTER_H
#define XFER_TEST_TH_MASTER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "store/proto_internal.h"

extern struct store_msg *st_req, *st_rep;
extern pid_t st_pid;                   /* the master, or 0 */
extern uint16_t st_port;               /* its RPC port */
extern uint16_t st_metrics_port;       /* its admin HTTP port */

/** Allocate st_req and st_rep (a cmocka group setup). @return 0, 1. */
int st_setup(void **state);

/** Kill a master left running, free st_req and st_rep (a cmocka group
 *  teardown). */
int st_teardown(void **state);

/**
 * Run xfer-stored on @p port (0: a free one) and 127.0.0.1, its admin
 * HTTP on another free port, with the NULL-ended flags @p args (NULL:
 * none; they may name those ports again), its output to /dev/null (its
 * stderr appended to $XFER_TEST_STORED_LOG if set), behind the command
 * in $XFER_TEST_WRAP if set (XFER_TEST_WRAP="valgrind -q
 * --error-exitcode=9"). A master left by a test that failed is killed
 * first.
 * @return its exit status if it exits first, else 0 once it serves
 *         (within 10 s; fails the test if not).
 */
int st_start(uint16_t port, const char *const *args);

/**
 * GET @p path from 127.0.0.1:@p port over HTTP/1.0 (the answer ends
 * with the connection). @return the status (-1 if there was none
 * within 10 s); the body, NUL-ended, into a malloc'd *@p body (NULL
 * where not wanted), its length into *@p len if not NULL.
 */
int st_http_get(uint16_t port, const char *path, char **body, size_t *len);

/** SIGTERM the master and check it exits 0. */
void st_stop(void);

/** SIGKILL the master and reap it. */
void st_kill(void);

/** Read one reply frame into st_rep. @return 0, or -1 if the master
 *  closed or sent something undecodable within 5 s. */
int st_recv(int fd);

/** Send st_req as type @p type on @p fd; fails the test unless its reply
 *  (type, reply flag, sequence number) follows. @return st_rep. */
struct store_msg *st_call(int fd, unsigned type);

/** A string field of the body: @p s is not copied. */
struct store_str st_str(const char *s);

/** Mount segment id @p segid (every byte) of @p client: @p name, @p base,
 *  @p size. @return the reply's err. */
int st_mount(int fd, const uint8_t *client, uint8_t segid, const char *name,
	     uint64_t base, uint64_t size);

/** Unmount segment id @p segid of @p client. @return the reply's err. */
int st_unmount(int fd, const uint8_t *client, uint8_t segid);

/**
 * One key's call: put_start (@p len, @p replicas; st_req->preferred and
 * flags as set), put_end, put_revoke by @p client, query, exist, remove
 * (@p force). @return its item's err; st_rep->items[0] holds the rest.
 */
int st_one(int fd, unsigned type, const uint8_t *client, const char *key,
	   uint64_t len, uint8_t replicas, bool force);

/** tier_done of @p key's copy as @p client with @p err (0: copied).
 *  @return its item's err. */
int st_tier_done(int fd, const uint8_t *client, const char *key,
		 int32_t err);

/** put_start then put_end of @p key (@p len bytes, one replica). @return
 *  the first err that is not 0, or 0. */
int st_put(int fd, const uint8_t *client, const char *key, uint64_t len);

/** Ping as @p client. @return whether the master says "mount again". */
bool st_ping_needs_mount(int fd, const uint8_t *client);

#endif
