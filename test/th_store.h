/*
 * What the store's tests share (it_store_*): xfer-stored as a child
 * process, clients of it (include/xfer/store.h) in this process and in
 * child processes driven over pipes, and a raw query.
 */
#ifndef XFER_TEST_TH_STORE_H
#define XFER_TEST_TH_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/**
 * Run xfer-stored on 127.0.0.1:@p port (0: a free one) with @p args
 * (NULL-ended, may be NULL), its output to /dev/null, and wait up to 10 s
 * until it serves; fails the test if it does not. *@p out_port gets the
 * port. @return its pid.
 */
pid_t th_stored_start(const char *const *args, uint16_t port,
		      uint16_t *out_port);

/** SIGTERM it and expect exit status 0 within 5 s (fails the test if
 *  not). 0 is fine. */
void th_stored_stop(pid_t pid);

/** SIGKILL @p pid (0 is fine) and reap it. No cmocka asserts. */
void th_kill(pid_t pid);

/** A child process and the pipes to and from it. */
struct th_proc {
	pid_t pid;
	int to, from;
};

/**
 * Fork a child that runs @p fn(@p in, @p out, @p arg) and exits with
 * what it returns; @p in and @p out are its ends of the pipes whose other
 * ends are @p p->to and @p p->from. The child must not use cmocka.
 */
void th_spawn(struct th_proc *p, int (*fn)(int in, int out, void *arg),
	      void *arg);

/** Send one line @p s ('\n' added) down a pipe. @return 0, -1. */
int th_line_send(int fd, const char *s);

/** Read one line (without its '\n') into @p buf (@p cap bytes) within
 *  @p timeout_ms. @return its length, or -1 (EOF, timeout, too long). */
int th_line_recv(int fd, char *buf, size_t cap, int timeout_ms);

/** SIGKILL @p p, reap it, close its pipes; its pid becomes 0. */
void th_proc_kill(struct th_proc *p);

/** Wait up to @p timeout_ms for @p p to exit. @return its exit status,
 *  or -1 (killed by a signal, or still running: then SIGKILLed). */
int th_proc_exit(struct th_proc *p, int timeout_ms);

/* ---- clients of the store ---- */

struct xfer_kv;

/** The master the clients below connect to. */
struct th_master {
	pid_t pid;
	uint16_t port;
	char addr[32];                 /* "127.0.0.1:port" */
};
extern struct th_master th_master;

/** th_stored_start() into th_master (fails the test if it cannot). */
void th_master_start(const char *const *args);

/** A cmocka teardown: SIGKILL th_master's process, if any. */
int th_master_teardown(void **state);

/** The pattern seed of @p key's value (variant @p variant). */
uint64_t th_seed(const char *key, uint64_t variant);

/** A client of th_master with an engine of its own (p2p on 127.0.0.1),
 *  @p seg bytes lent, @p stage of staging; NULL with errno if not. No
 *  cmocka (children call it). */
struct xfer_kv *th_kv_try(uint64_t seg, uint64_t stage);

/** th_kv_try(); fails the test if it cannot. */
struct xfer_kv *th_kv(uint64_t seg, uint64_t stage);

/** Put @p len bytes of th_fill(th_seed(@p key, @p v)) with @p repl
 *  replicas, staged or (@p z) zero-copy from a buffer registered for the
 *  call. @return the put's result. No cmocka. */
int64_t th_put_pattern(struct xfer_kv *kv, const char *key, size_t len,
		       uint64_t v, unsigned repl, bool z);

struct xfer_kv_replicate;

/** th_put_pattern() with the replicas, pins and preferred segment of
 *  @p rc. No cmocka. */
int64_t th_put_pattern_rc(struct xfer_kv *kv, const char *key, size_t len,
			  uint64_t v, const struct xfer_kv_replicate *rc,
			  bool z);

/** Get @p key into @p len bytes (@p z: registered ones, zero-copy).
 *  @return its length, an error, or -9999 if its bytes are not those of
 *  th_seed(@p key, @p v). No cmocka. */
int64_t th_get_pattern(struct xfer_kv *kv, const char *key, size_t len,
		       uint64_t v, bool z);

/** The sizes of a client process's client. */
struct th_sizes {
	uint64_t seg, stage;
};

/**
 * Start a client process (a th_kv_try() of @p sz): its engine's name
 * into @p name (64 bytes). It answers each line
 *   put|putz|get|getz KEY LEN VARIANT [REPLICAS]   (z: zero-copy)
 *   race PREFIX N LEN VARIANT     (puts PREFIX0..: how many failed)
 * with the call's result, until "q" (th_kv_proc_stop()).
 */
void th_kv_proc_start(struct th_proc *p, struct th_sizes *sz, char *name);

/** Send a line to @p p; @return the number it answers (fails the test
 *  if none within 120 s). */
long long th_kv_cmd(struct th_proc *p, const char *fmt, ...);

/** "q", and expect exit status 0 within 30 s. */
void th_kv_proc_stop(struct th_proc *p);

/**
 * Query @p key on th_master by raw RPC (it leases the object): the
 * endpoints of its replicas into @p names (NUL-ended, 64 bytes each),
 * its error into *@p err. @return how many replicas.
 */
int th_raw_query(const char *key, char names[][64], int32_t *err);

#endif
