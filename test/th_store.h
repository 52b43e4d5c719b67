/*
 * What the store's tests share (it_store_*): xfer-stored as a child
 * process, and client processes driven over pipes.
 */
#ifndef XFER_TEST_TH_STORE_H
#define XFER_TEST_TH_STORE_H

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

#endif
