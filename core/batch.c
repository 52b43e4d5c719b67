/*
 * Batches: validation at submit, task and batch accounting, cancel, the
 * notification a batch may carry, completion delivery on the control
 * reactor, and the blocking wait.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/engine_internal.h"
#include "core/notify_internal.h"
#include "util/wait_internal.h"

#define XFER_BATCH_MAX (1u << 24)

/* Slice storage of a batch: the first chunk comes with the batch, the
 * others are added when requests need more, and all are kept for its
 * life. */
struct slice_chunk {
	struct slice_chunk *next;
	size_t cap;
	struct xfer_slice slices[];
};

struct xfer_batch {
	struct xfer_engine *e;       /* NULL once the engine is freed */
	LIST_ENTRY(xfer_batch) link; /* e->batches, under e->batches_lock */
	size_t cap;
	_Atomic size_t n;            /* tasks submitted */
	struct xfer_task *tasks;     /* [cap], in the batch's allocation */
	struct slice_chunk *chunks;  /* the first in it too, cap slices */
	struct slice_chunk *cur;     /* slices are taken from here on */
	size_t used;                 /* of cur's */
	atomic_uint seen;            /* bit per terminal status any task had */

	pthread_mutex_t lock;        /* guards the fields below */
	pthread_cond_t idle;
	size_t inflight;             /* tasks not terminal, + 1 during submit */
	bool deliver_pending;        /* deliver_job is queued or running */
	struct xfer_job deliver_job;
	xfer_batch_cb cb;
	void *cb_arg;
	bool cb_direct;              /* cb runs where the last task ends */
	bool direct_again;           /* a round ended during a direct cb */
	/* A notification to send once every task completed. */
	char *notify_name, *notify_msg;
	struct xfer_segment *notify_seg; /* use held while it waits */
	bool notifying;              /* sent, not yet acknowledged */
};

const char *xfer_status_str(enum xfer_status s)
{
	static const char *const names[] = {
		"WAITING", "PENDING", "INVALID", "CANCELED",
		"COMPLETED", "TIMEOUT", "FAILED",
	};

	return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}

struct xfer_batch *xfer_batch_new(struct xfer_engine *e, size_t capacity)
{
	struct xfer_batch *b;
	pthread_condattr_t ca;

	if (!e || capacity == 0 || capacity > XFER_BATCH_MAX) {
		errno = EINVAL;
		return NULL;
	}
	/* One allocation: the batch, its tasks and a slice for each, all a
	 * submit of requests no longer than slice_size takes (sizes within
	 * XFER_BATCH_MAX cannot overflow). */
	b = calloc(1, sizeof(*b) + capacity * sizeof(*b->tasks) +
		      sizeof(*b->chunks) + capacity * sizeof(struct xfer_slice));
	if (!b) {
		errno = ENOMEM;
		return NULL;
	}
	b->tasks = (struct xfer_task *)(b + 1);
	b->chunks = (struct slice_chunk *)(b->tasks + capacity);
	b->chunks->cap = capacity;
	b->cur = b->chunks;
	b->e = e;
	b->cap = capacity;
	pthread_mutex_init(&b->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&b->idle, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_lock(&e->batches_lock);
	LIST_INSERT_HEAD(&e->batches, b, link);
	pthread_mutex_unlock(&e->batches_lock);
	return b;
}

/* Forget the notification (sent, or not to be sent). */
static void drop_notify(struct xfer_batch *b)
{
	free(b->notify_name);
	free(b->notify_msg);
	b->notify_name = b->notify_msg = NULL;
	if (b->notify_seg)
		xfer_segment_put(b->notify_seg);
	b->notify_seg = NULL;
}

/* What keeps xfer_batch_free() at -EBUSY; under b->lock. Each change of
 * it to false broadcasts b->idle. */
static bool busy(const struct xfer_batch *b)
{
	return b->inflight || b->deliver_pending || b->notifying;
}

int xfer_batch_free(struct xfer_batch *b)
{
	struct slice_chunk *c, *next;

	pthread_mutex_lock(&b->lock);
	if (busy(b)) {
		pthread_mutex_unlock(&b->lock);
		return -EBUSY;
	}
	pthread_mutex_unlock(&b->lock);
	if (b->e) {
		pthread_mutex_lock(&b->e->batches_lock);
		LIST_REMOVE(b, link);
		pthread_mutex_unlock(&b->e->batches_lock);
	}
	drop_notify(b);
	for (c = b->chunks->next; c; c = next) {
		next = c->next;
		free(c);
	}
	pthread_cond_destroy(&b->idle);
	pthread_mutex_destroy(&b->lock);
	free(b);
	return 0;
}

/* The engine of @p b is being freed and none of its threads runs: what
 * is not terminal ends CANCELED, the callback and the notification are
 * off (its segment's use goes with the engine's segments), and nothing
 * refers to the engine any more. */
static void orphan(struct xfer_batch *b)
{
	size_t n = atomic_load(&b->n);

	pthread_mutex_lock(&b->lock);
	for (size_t i = 0; i < n; i++) {
		int waiting = XFER_WAITING;

		if (atomic_compare_exchange_strong(&b->tasks[i].status,
						   &waiting, XFER_CANCELED))
			atomic_fetch_or(&b->seen, 1u << XFER_CANCELED);
	}
	b->inflight = 0;
	b->deliver_pending = false;
	b->notifying = false;
	b->notify_seg = NULL;
	drop_notify(b);
	b->e = NULL;
	pthread_cond_broadcast(&b->idle);
	pthread_mutex_unlock(&b->lock);
}

void xfer_batches_orphan(struct xfer_engine *e)
{
	struct xfer_batch *b;

	pthread_mutex_lock(&e->batches_lock);
	while ((b = LIST_FIRST(&e->batches))) {
		LIST_REMOVE(b, link);
		orphan(b);
	}
	pthread_mutex_unlock(&e->batches_lock);
}

static int set_callback(struct xfer_batch *b, xfer_batch_cb cb, void *arg,
			bool direct)
{
	int ret = 0;

	pthread_mutex_lock(&b->lock);
	if (b->inflight)
		ret = -EBUSY;
	else {
		b->cb = cb;
		b->cb_arg = arg;
		b->cb_direct = direct;
	}
	pthread_mutex_unlock(&b->lock);
	return ret;
}

int xfer_batch_set_callback(struct xfer_batch *b, xfer_batch_cb cb, void *arg)
{
	return set_callback(b, cb, arg, false);
}

int xfer_batch_set_callback_direct(struct xfer_batch *b, xfer_batch_cb cb,
				   void *arg)
{
	return set_callback(b, cb, arg, true);
}

static enum xfer_status outcome(unsigned seen)
{
	static const enum xfer_status order[] = {
		XFER_FAILED, XFER_TIMEOUT, XFER_INVALID, XFER_CANCELED,
	};

	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		if (seen & 1u << order[i])
			return order[i];
	return XFER_COMPLETED;
}

/* The round is over: wake waiters, then the callback with @p st. */
static void finish(struct xfer_batch *b, enum xfer_status st)
{
	xfer_batch_cb cb;
	void *cb_arg;

	pthread_mutex_lock(&b->lock);
	b->deliver_pending = false;
	b->notifying = false;
	pthread_cond_broadcast(&b->idle);
	cb = b->cb;
	cb_arg = b->cb_arg;
	pthread_mutex_unlock(&b->lock);
	/* Last touch of b: the callback may free it. */
	if (cb)
		cb(b, st, cb_arg);
}

static void notified(struct xfer_engine *e, int result, void *arg)
{
	struct xfer_batch *b = arg;

	(void)e;
	drop_notify(b);
	finish(b, result ? XFER_FAILED : XFER_COMPLETED);
}

static void deliver(struct xfer_job *j)
{
	struct xfer_batch *b = container_of(j, struct xfer_batch, deliver_job);
	enum xfer_status st = outcome(atomic_load(&b->seen));
	int ret;

	if (!b->notify_name) {
		finish(b, st);
		return;
	}
	if (st != XFER_COMPLETED) { /* only after every task completed */
		drop_notify(b);
		finish(b, st);
		return;
	}
	ret = xfer_notify_send(b->e, b->notify_seg, b->notify_name,
			       b->notify_msg, notified, b);
	if (ret) {
		xfer_error_set(&b->e->err, ret, "batch notification: %s",
			       strerror(-ret));
		notified(b->e, ret, b);
	}
}

/* A direct callback, on the thread that ended the round: the batch is
 * not freed meanwhile (deliver_pending keeps xfer_batch_free() at
 * -EBUSY), and the callback may not free it. */
static void deliver_direct(struct xfer_batch *b, xfer_batch_cb cb, void *arg)
{
	bool again;

	do {
		cb(b, outcome(atomic_load(&b->seen)), arg);
		pthread_mutex_lock(&b->lock);
		again = b->direct_again; /* once for the rounds since */
		b->direct_again = false;
		b->deliver_pending = again;
		pthread_cond_broadcast(&b->idle);
		pthread_mutex_unlock(&b->lock);
	} while (again);
}

/* @p n tasks (or the submit guard) of @p b are done. */
static void batch_release(struct xfer_batch *b, size_t n)
{
	xfer_batch_cb direct = NULL;
	void *arg = NULL;

	pthread_mutex_lock(&b->lock);
	b->inflight -= n;
	if (b->inflight == 0) {
		if (b->notify_name)
			b->notifying = true; /* waiters wait for the ack */
		else
			pthread_cond_broadcast(&b->idle);
		if (b->cb_direct && !b->notify_name && b->deliver_pending) {
			b->direct_again = true; /* its caller runs it again */
		} else if ((b->cb || b->notify_name) && !b->deliver_pending) {
			b->deliver_pending = true;
			if (b->cb_direct && !b->notify_name) {
				direct = b->cb;
				arg = b->cb_arg;
			} else {
				b->deliver_job.fn = deliver;
				xfer_reactor_post(&b->e->control,
						  &b->deliver_job);
			}
		}
	}
	pthread_mutex_unlock(&b->lock);
	if (direct)
		deliver_direct(b, direct, arg);
}

static void task_end(struct xfer_task *t, enum xfer_status st)
{
	if (t->source)
		atomic_fetch_sub(&t->source->users, 1);
	if (t->segment)
		xfer_segment_put(t->segment);
	atomic_fetch_or(&t->batch->seen, 1u << st);
	atomic_store(&t->status, st);
	batch_release(t->batch, 1);
}

void xfer_slice_done(struct xfer_slice *s, enum xfer_status st)
{
	struct xfer_task *t = s->task;
	int none = 0;

	if (st == XFER_COMPLETED && atomic_load(&t->canceled))
		st = XFER_CANCELED; /* what it brought was discarded */
	if (st == XFER_COMPLETED)
		atomic_fetch_add(&t->transferred, s->len);
	else
		atomic_compare_exchange_strong(&t->failure, &none, st);
	if (atomic_fetch_sub(&t->slices_left, 1) == 1) {
		int f = atomic_load(&t->failure);

		task_end(t, f ? (enum xfer_status)f : XFER_COMPLETED);
	}
}

void xfer_slices_cancel(struct xfer_slice **head, struct xfer_slice ***tail,
			size_t keep)
{
	struct xfer_slice **p = head, *s;

	for (; keep && *p; keep--)
		p = &(*p)->next;
	while ((s = *p)) {
		if (xfer_slice_canceled(s)) {
			*p = s->next;
			xfer_slice_done(s, XFER_CANCELED);
		} else {
			p = &s->next;
		}
	}
	*tail = p;
}

/*
 * Check one request and take uses of its source buffer and segment.
 * @return 0, or a reason for INVALID.
 */
static const char *validate(struct xfer_engine *e, struct xfer_task *t,
			    const struct xfer_request *r)
{
	if (r->length == 0)
		return "length 0";
	if (r->opcode != XFER_READ && r->opcode != XFER_WRITE)
		return "bad opcode";
	t->segment = xfer_segment_acquire(&e->segs, r->target_id);
	if (!t->segment)
		return "unknown segment id";
	t->source = xfer_buffers_acquire(&e->buffers, (uintptr_t)r->source,
					 r->length);
	if (!t->source)
		return "source outside registered memory";
	if (!xfer_segment_covers(t->segment, r->target_offset, r->length))
		return "target range outside the segment's buffers";
	return NULL;
}

static void release_uses(struct xfer_task *t)
{
	if (t->source)
		atomic_fetch_sub(&t->source->users, 1);
	if (t->segment)
		xfer_segment_put(t->segment);
	t->source = NULL;
	t->segment = NULL;
}

/*
 * @p n slices in a row from the batch's storage: on from the last taken,
 * else in a later chunk with room, else in a chunk added (as large as all
 * before it, at least @p n). With no task in flight, no slice is in use
 * (a transport leaves a slice once it reported it): all are free again.
 * NULL: out of memory. On the submitting thread.
 */
static struct xfer_slice *take_slices(struct xfer_batch *b, size_t n)
{
	struct slice_chunk *c;
	size_t total = 0;
	bool idle;

	pthread_mutex_lock(&b->lock);
	idle = b->inflight == 0;
	pthread_mutex_unlock(&b->lock);
	if (idle) {
		b->cur = b->chunks;
		b->used = 0;
	}
	while (b->cur->cap - b->used < n) {
		if (!b->cur->next) {
			for (c = b->chunks; c; c = c->next)
				total += c->cap;
			total = total > n ? total : n;
			c = malloc(sizeof(*c) + total * sizeof(*c->slices));
			if (!c)
				return NULL;
			c->next = NULL;
			c->cap = total;
			b->cur->next = c;
		}
		b->cur = b->cur->next;
		b->used = 0;
	}
	b->used += n;
	return b->cur->slices + b->used - n;
}

int xfer_batch_submit(struct xfer_batch *b, const struct xfer_request *reqs,
		      size_t n)
{
	struct xfer_engine *e = b->e;
	size_t first = atomic_load(&b->n), nslices = 0, valid = 0;
	size_t slice_size;
	struct xfer_slice *s;

	if (!e)
		return -ESHUTDOWN;
	slice_size = e->slice_size;
	if (!reqs || n == 0)
		return -EINVAL;
	if (n > b->cap - first)
		return -ENOSPC;

	for (size_t i = 0; i < n; i++) {
		struct xfer_task *t = &b->tasks[first + i];
		const char *why;

		memset(t, 0, sizeof(*t));
		t->batch = b;
		why = validate(e, t, &reqs[i]);
		if (t->segment && atomic_load(&t->segment->gone)) {
			/* The peer left: FAILED, as a transfer it broke. The
			 * one check: no transport is handed the slices of a
			 * segment known gone (one that goes later fails as
			 * its connections do). */
			xfer_error_set(&e->err, -ENOENT, "request %zu: segment "
				       "%s is gone", first + i,
				       t->segment->name);
			release_uses(t);
			atomic_store(&t->status, XFER_FAILED);
			continue;
		}
		if (why) {
			release_uses(t);
			atomic_store(&t->status, XFER_INVALID);
			xfer_error_set(&e->err, -EINVAL, "request %zu: %s",
				       first + i, why);
			continue;
		}
		valid++;
		nslices += xfer_slice_count(reqs[i].length, slice_size);
	}

	s = take_slices(b, nslices);
	if (!s) {
		for (size_t i = 0; i < n; i++)
			release_uses(&b->tasks[first + i]);
		return -ENOMEM;
	}

	pthread_mutex_lock(&b->lock);
	b->inflight += valid + 1; /* + 1: no callback before submit is done */
	pthread_mutex_unlock(&b->lock);
	atomic_store(&b->n, first + n);
	for (size_t i = 0; i < n; i++) {
		struct xfer_task *t = &b->tasks[first + i];
		struct xfer_segment *seg = t->segment;
		size_t k;

		if (atomic_load(&t->status) != XFER_WAITING) {
			atomic_fetch_or(&b->seen, 1u << atomic_load(&t->status));
			continue;
		}
		k = xfer_slice_count(reqs[i].length, slice_size);
		xfer_slice_cut(t, &reqs[i], slice_size, s);
		atomic_store(&t->slices_left, k);
		seg->tp->ops->submit(seg->tp, seg, s, k);
		s += k;
	}
	batch_release(b, 1);
	return 0;
}

int xfer_batch_submit_notify(struct xfer_batch *b,
			     const struct xfer_request *reqs, size_t n,
			     const char *name, const char *msg)
{
	struct xfer_engine *e = b->e;
	int ret;

	if (!e)
		return -ESHUTDOWN;
	if (!reqs || n == 0 || !name || !msg)
		return -EINVAL;
	ret = xfer_notify_check(e, name, msg);
	if (ret)
		return ret;
	pthread_mutex_lock(&b->lock);
	ret = b->notify_name || b->inflight || b->deliver_pending ? -EBUSY : 0;
	pthread_mutex_unlock(&b->lock);
	if (ret)
		return ret;
	b->notify_seg = xfer_segment_acquire(&e->segs, reqs[0].target_id);
	b->notify_name = strdup(name);
	b->notify_msg = strdup(msg);
	ret = !b->notify_seg ? -EINVAL :
	      !b->notify_name || !b->notify_msg ? -ENOMEM : 0;
	if (!ret)
		ret = xfer_batch_submit(b, reqs, n);
	if (ret)
		drop_notify(b);
	return ret;
}

int xfer_batch_cancel(struct xfer_batch *b)
{
	struct xfer_engine *e = b->e;
	size_t n = atomic_load(&b->n);

	if (!e)
		return 0; /* nothing is in flight any more */
	for (size_t i = 0; i < n; i++)
		if (atomic_load(&b->tasks[i].status) == XFER_WAITING)
			atomic_store(&b->tasks[i].canceled, true);
	for (int i = 0; e->tps[i]; i++)
		e->tps[i]->ops->cancel(e->tps[i]);
	return 0;
}

int xfer_batch_status(struct xfer_batch *b, size_t index,
		      struct xfer_task_status *st)
{
	struct xfer_task *t;

	if (index >= atomic_load(&b->n))
		return -ERANGE;
	t = &b->tasks[index];
	st->status = atomic_load(&t->status);
	st->transferred = atomic_load(&t->transferred);
	return 0;
}

size_t xfer_batch_size(const struct xfer_batch *b)
{
	return atomic_load(&b->n);
}

/* What xfer_batch_wait() waits out; under b->lock. */
static bool tasks_busy(const struct xfer_batch *b)
{
	return b->inflight || b->notifying;
}

/* Wait on b->idle while @p still(b), at most @p timeout_ms (< 0: for
 * ever). @return 0, -ETIMEDOUT. */
static int idle_wait(struct xfer_batch *b,
		     bool (*still)(const struct xfer_batch *b), int timeout_ms)
{
	struct timespec deadline;
	int ret = 0;

	xfer_deadline(&deadline, timeout_ms);
	pthread_mutex_lock(&b->lock);
	while (still(b) && ret == 0) {
		if (timeout_ms < 0)
			pthread_cond_wait(&b->idle, &b->lock);
		else
			ret = -pthread_cond_timedwait(&b->idle, &b->lock,
						      &deadline);
	}
	if (!still(b))
		ret = 0;
	pthread_mutex_unlock(&b->lock);
	return ret;
}

int xfer_batch_free_wait(struct xfer_batch *b, int timeout_ms)
{
	int ret = idle_wait(b, busy, timeout_ms);

	return ret ? ret : xfer_batch_free(b);
}

int xfer_batch_wait(struct xfer_batch *b, int timeout_ms)
{
	return idle_wait(b, tasks_busy, timeout_ms);
}
