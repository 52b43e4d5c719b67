/*
 * Tasks and slices as a transport sees them: the core cuts each request
 * into slices and hands a transport the slices of one task; the
 * transport reports every slice exactly once through xfer_slice_done().
 */
#ifndef XFER_SLICE_INTERNAL_H
#define XFER_SLICE_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <xfer/xfer.h>

struct xfer_buffer;
struct xfer_segment;

struct xfer_task {
	struct xfer_batch *batch;
	_Atomic int status;          /* enum xfer_status */
	atomic_uint_fast64_t transferred;
	atomic_size_t slices_left;
	_Atomic int failure;         /* first failure status, 0 = none */
	_Atomic bool canceled;       /* xfer_batch_cancel() asked */
	struct xfer_buffer *source;  /* use held while in flight */
	struct xfer_segment *segment;
};

struct xfer_slice {
	struct xfer_slice *next;     /* transport queues */
	struct xfer_task *task;
	enum xfer_opcode opcode;
	uint32_t len;
	void *local;
	uint64_t remote;
	/* Scratch space for the transport that owns the slice. */
	union {
		uint8_t bytes[72];
		uint64_t words[9];
	} tp;
};

/**
 * Cut a request of @p len bytes into slices of @p slice_size (the last one
 * takes the rest, a tail under a quarter slice included) in @p out, which
 * has room for xfer_slice_count().
 */
size_t xfer_slice_count(uint64_t len, size_t slice_size);
void xfer_slice_cut(struct xfer_task *t, const struct xfer_request *req,
		    size_t slice_size, struct xfer_slice *out);

/** Report one slice; the task ends with its last slice. A slice of a
 *  canceled task that completes counts as CANCELED. Any thread; the
 *  caller must not touch @p s afterwards. */
void xfer_slice_done(struct xfer_slice *s, enum xfer_status st);

/**
 * End the slices of canceled tasks in the list at *@p head (linked by
 * ->next; @p tail points at the last ->next, or at @p head when empty) as
 * CANCELED, but the first @p keep; *@p tail follows.
 */
void xfer_slices_cancel(struct xfer_slice **head, struct xfer_slice ***tail,
			size_t keep);

/** A FIFO of slices linked by ->next: a transport's queues. */
struct xfer_slice_queue {
	struct xfer_slice *head, **tail;
};

static inline void xfer_slice_q_init(struct xfer_slice_queue *q)
{
	q->head = NULL;
	q->tail = &q->head;
}

static inline void xfer_slice_q_push(struct xfer_slice_queue *q,
				     struct xfer_slice *s)
{
	s->next = NULL;
	*q->tail = s;
	q->tail = &s->next;
}

/** The head of a non-empty @p q, taken off it. */
static inline struct xfer_slice *xfer_slice_q_pop(struct xfer_slice_queue *q)
{
	struct xfer_slice *s = q->head;

	q->head = s->next;
	if (!q->head)
		q->tail = &q->head;
	return s;
}

/** Move every slice of @p q to the tail of @p to; @p q ends empty. */
static inline void xfer_slice_q_append(struct xfer_slice_queue *to,
				       struct xfer_slice_queue *q)
{
	if (!q->head)
		return;
	*to->tail = q->head;
	to->tail = q->tail;
	xfer_slice_q_init(q);
}

/** Report every slice of @p q with @p st and empty it. */
static inline void xfer_slice_q_fail(struct xfer_slice_queue *q,
				     enum xfer_status st)
{
	while (q->head)
		xfer_slice_done(xfer_slice_q_pop(q), st);
}

/**
 * A stream connection's slices at teardown, no thread left to move them:
 * those on the wire (@p waitq, and @p sendq's head when @p head_sent) end
 * FAILED, those never sent (the rest of @p sendq, @p inbox) CANCELED.
 */
static inline void xfer_slice_qs_drop(struct xfer_slice_queue *inbox,
				      struct xfer_slice_queue *sendq,
				      bool head_sent,
				      struct xfer_slice_queue *waitq)
{
	if (sendq->head && head_sent)
		xfer_slice_done(xfer_slice_q_pop(sendq), XFER_FAILED);
	xfer_slice_q_fail(waitq, XFER_FAILED);
	xfer_slice_q_fail(sendq, XFER_CANCELED);
	xfer_slice_q_fail(inbox, XFER_CANCELED);
}

/** Was the slice's task canceled? Then a transport ends it CANCELED if it
 *  has not gone out, and writes nothing more of it into local memory. */
static inline bool xfer_slice_canceled(const struct xfer_slice *s)
{
	return atomic_load(&s->task->canceled);
}

/** Has a slice of @p s's task ended otherwise than COMPLETED? Then the
 *  task cannot complete, whatever its other slices do. */
static inline bool xfer_slice_task_failed(const struct xfer_slice *s)
{
	return atomic_load(&s->task->failure) != 0;
}

#endif
