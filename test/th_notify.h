/*
 * What the notification tests (test/it_notify*.c) share: a peer engine in
 * a forked child, driven over a socketpair. It keeps the notifications it
 * receives (through its callback, or drained with xfer_engine_notify_pop())
 * and, for a message "check SEED OFF LEN", checks at once that its buffer
 * holds th_fill(SEED) at [OFF, OFF+LEN).
 */
#ifndef XFER_TEST_TH_NOTIFY_H
#define XFER_TEST_TH_NOTIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The peer registers one buffer of PEER_BUF bytes, filled with PEER_FILL. */
#define PEER_BUF (4u << 20)
#define PEER_FILL 0xA5

struct peer {
	pid_t pid;                     /* -1: none (exited or reaped) */
	int fd;                        /* the parent's end of the socketpair */
	char name[128];                /* its segment name, host:port */
};

/** A notification the peer received. */
struct peer_note {
	char *name, *msg;
	/** it came to the callback on the engine's callback base (there a
	 *  blocking xfer_notify() is refused with -EDEADLK) */
	bool on_base;
	/** for a "check" message: th_check()'s verdict at arrival (-1: every
	 *  byte in place; -2: a range outside the buffer); else -1 */
	long bad;
};

/** Commands with an int answer (peer_cmd()). */
enum {
	PEER_CALLBACK = 'C',           /* take notifications with a callback */
	PEER_HOLD = 'H',               /* block its control thread */
	PEER_GO = 'G',                 /* let it go again */
};

/** Fork the peer and read its segment name (fails the test if not).
 *  Call with no engine running in this process. */
void peer_start(struct peer *p);

/** Send command @p cmd; @return the peer's answer (0 or -errno). */
int peer_cmd(struct peer *p, char cmd);

/**
 * Wait up to @p timeout_ms for the peer to hold at least @p want
 * notifications (draining its queue, unless it has a callback), then take
 * every one it holds, oldest first, into a malloc'd @p *out.
 * @return how many (may be fewer than @p want, or more).
 */
size_t peer_collect(struct peer *p, unsigned want, int timeout_ms,
		    struct peer_note **out);

/** Free what peer_collect() gave. */
void peer_notes_free(struct peer_note *v, size_t n);

/** Ask the peer to free its engine and exit; it must exit 0 within 10 s. */
void peer_stop(struct peer *p);

/** SIGKILL the peer and reap it. */
void peer_kill(struct peer *p);

#endif
