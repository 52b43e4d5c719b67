/*
 * The blocking forms of the asynchronous calls: a waiter that the caller
 * and the callback share until both are done with it, so that a caller
 * that gives up first leaves nothing dangling.
 */
#ifndef XFER_WAIT_INTERNAL_H
#define XFER_WAIT_INTERNAL_H

#include <stdint.h>

/* The longest a blocking call waits: each step of the asynchronous one
 * has its own, shorter timeout. */
#define XFER_WAIT_MS 60000

struct timespec;
struct xfer_engine;
struct xfer_wait;

/** @p timeout_ms from now on CLOCK_MONOTONIC. */
void xfer_deadline(struct timespec *ts, int timeout_ms);

/** A waiter for one result, with two references (caller, callback).
 *  NULL on ENOMEM. */
struct xfer_wait *xfer_wait_new(void);

/** The callback's side: record @p result and drop its reference. */
void xfer_wait_done(struct xfer_wait *w, int64_t result);

/** xfer_wait_done() as a completion callback (@p arg is the waiter). */
void xfer_wait_cb(struct xfer_engine *e, int result, void *arg);

/** Drop the callback's reference when its call failed (it never runs). */
void xfer_wait_drop(struct xfer_wait *w);

/** The caller's side: wait up to @p timeout_ms for the result, then drop
 *  its reference. @return the result, or -ETIMEDOUT. */
int64_t xfer_wait_for(struct xfer_wait *w, int timeout_ms);

/** After starting an asynchronous call with xfer_wait_cb: its callback's
 *  result (waiting up to XFER_WAIT_MS), or @p started if it failed to
 *  start (then its callback never runs). Drops both references. */
int64_t xfer_wait_result(struct xfer_wait *w, int64_t started);

/** xfer_wait_result() for a call that publishes: a store that is away is
 *  logged (and republished later), not this call's error. */
int xfer_wait_published(struct xfer_wait *w, int started);

#endif
