/*
 * What the etcd tests (test/it_etcd*.c) share: an etcd cluster of one to
 * three members started on free loopback ports, members stopped and
 * started again on their data, the leader found, etcdctl, and a fixture
 * for the backend on an event_base. Linked into those programs only
 * (mk/test.mk: test/th_NAME.c goes with test/it_NAME*.c).
 *
 * Data lives in /dev/shm where there is one (etcd syncs every write; on
 * tmpfs that costs nothing), else in /tmp.
 */
#ifndef XFER_TEST_TH_ETCD_H
#define XFER_TEST_TH_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <yajl/yajl_tree.h>

#include "test/helpers.h"

struct etcd;

#define TH_ETCD_MAX 3
#define TH_ETCD_START_MS 20000   /* a member up; a cluster with a leader */

struct th_etcd {
	int n;
	struct {
		pid_t pid;           /* 0: stopped */
		uint16_t port, peer_port;
	} m[TH_ETCD_MAX];
	char dir[64];
	char conn[200];          /* "etcd://127.0.0.1:p1,127.0.0.1:p2..." */
	char endpoints[200];     /* etcdctl's "http://127.0.0.1:p1,..." */
};

/** The cluster of the running test program, for the group fixtures. */
extern struct th_etcd th_cluster;

/** cmocka group setup: th_cluster of one member, or three; SIGPIPE
 *  ignored. */
int th_etcd_setup1(void **state);
int th_etcd_setup3(void **state);

/** cmocka group teardown: th_etcd_free(&th_cluster). */
int th_etcd_teardown(void **state);

/** Start a cluster of @p n members (1 to TH_ETCD_MAX) and wait for its
 *  leader; fails the test if it does not come. */
void th_etcd_start(struct th_etcd *c, int n);

/** Stop every member (SIGTERM) and remove the data. */
void th_etcd_free(struct th_etcd *c);

/** Stop member @p i with @p sig, and reap it. */
void th_etcd_kill(struct th_etcd *c, int i, int sig);

/** Start member @p i again on its data. A member serves once the cluster
 *  has quorum: this returns at once (see th_etcd_wait_leader), but for a
 *  cluster of one, once it serves. */
void th_etcd_restart(struct th_etcd *c, int i);

/** The member that leads, by index, as the running members see it; -1
 *  if none does now. */
int th_etcd_leader(struct th_etcd *c);

/** Wait up to @p ms for a leader that every running member follows.
 *  @return its index, or -1. */
int th_etcd_wait_leader(struct th_etcd *c, int ms);

/** Run etcdctl with @p fmt on every member; fails the test if it fails.
 *  @return its output parsed as JSON (NULL if it is not). */
yajl_val th_etcdctl(struct th_etcd *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/** The current revision of the cluster, from etcdctl. */
int64_t th_etcd_revision(struct th_etcd *c);

/** The lease @p key is attached to: 0 for none, -1 when it is absent. */
int64_t th_etcd_key_lease(struct th_etcd *c, const char *key);

/** An int field @p a (or @p a.@p b) of JSON object @p v, 0 if absent;
 *  a uint64 in a string comes back bit for bit. */
int64_t th_json_int(yajl_val v, const char *a, const char *b);

/* ---- a parent and its children, one line at a time (no cmocka) ---- */

/** Read one line (without its '\n') within @p ms. @return 0, -1. */
int th_line_read(int fd, char *buf, size_t cap, int ms);

/** Write one line of @p fmt and a '\n'. @return 0, -1. */
int th_line_write(int fd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* ---- engines (no cmocka asserts: forked children and threads call
 * these) ---- */

/** An engine named @p name on 127.0.0.1 with @p workers workers and the
 *  store at @p conn. @return it, or NULL with errno. */
struct xfer_engine *th_etcd_engine(const char *conn, const char *name,
				   int workers);

/**
 * WRITE @p len bytes of pattern @p seed from @p src to @p remote of
 * segment @p seg, READ them back into @p dst, and compare.
 * @return 0; -EIO (a task did not complete), -EILSEQ (bytes differ), or
 *         what the batch calls returned.
 */
int th_roundtrip(struct xfer_engine *e, int64_t seg, uint8_t *src,
		 uint8_t *dst, uint64_t remote, size_t len, uint64_t seed);

/** The etcd backend of engine @p e (one with an etcd store). */
struct etcd *th_etcd_of(struct xfer_engine *e);

/** A fixture for the etcd backend watching @p prefix on @p base (NULL:
 *  a base of its own); not open yet (see th_etcd_open). */
struct th_store *th_etcd_store(const char *prefix, struct event_base *base);

/** Open fixture @p f on connection string @p conn; fails the test if it
 *  fails. */
void th_etcd_open(struct th_store *f, const char *conn);

#endif
