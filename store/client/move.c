/*
 * The bytes of puts and gets (kv_internal.h), on the control reactor.
 *
 * First what needs no transfer: a put copies its value into each replica
 * in the own segment, a get whose object has one there copies it out.
 * The rest moves in rounds, each one xfer batch: a zero-copy call's
 * round takes every key, its requests straight from and into the
 * caller's registered parts; a staged call's round takes as many bytes
 * as one piece of the staging buffer holds, packing whole keys and the
 * next part of a larger one, copied in (put) before the batch or out
 * (get) after it. A put writes every replica of a key and fails the key
 * if one write fails (it is revoked); a get reads the replica at rep[cur]
 * and goes on from the next replica if that read fails, and ends a key
 * with its lease checked. A key's failed round with no replica left to
 * go on to is tried again once, its segments fetched anew. A striped replica's shards are moved side by
 * side in the same batch: each request of a piece is cut where a shard
 * ends.
 *
 * Segments are opened by name before a round needs them (kv->segs), or
 * fetched again after a transfer to them failed (their owner may have
 * restarted). Ops that wait for a segment, or for room in the staging
 * buffer (first come, first served), are resumed by those events.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store/alloc_internal.h"
#include "store/client/kv_internal.h"
#include "util/log_internal.h"

/* A round's task: the piece it moves and the segment it targets. */
struct kv_task {
	uint32_t piece;
	struct kv_seg *seg;
};

static void step(struct kv_op *op);

/* ---- segments ---- */

struct kv_seg *kv_seg_get(struct xfer_kv *kv, const char *name, size_t len)
{
	struct kv_seg *s;

	for (s = kv->segs; s; s = s->next)
		if (strlen(s->name) == len && !memcmp(s->name, name, len))
			return s;
	s = calloc(1, sizeof(*s) + len + 1);
	if (!s)
		return NULL;
	memcpy(s->name, name, len);
	s->kv = kv;
	s->id = -1;
	s->next = kv->segs;
	kv->segs = s;
	return s;
}

void kv_segs_free(struct xfer_kv *kv)
{
	while (kv->segs) {
		struct kv_seg *s = kv->segs;

		kv->segs = s->next;
		free(s);
	}
}

/* @p s is open (or failed: @p ok false): resume the ops waiting. */
static void seg_settled(struct kv_seg *s, bool ok)
{
	struct xfer_kv *kv = s->kv;
	struct kv_op *op = kv->resolving;

	s->state = ok ? SEG_OPEN : SEG_FAILED;
	kv->resolving = NULL;
	while (op) {
		struct kv_op *next = op->wait_next;

		op->waiting = false;
		step(op);
		op = next;
	}
	/* a failure is this round's: the next use tries again */
	if (!ok)
		s->state = s->id >= 0 ? SEG_OPEN : SEG_CLOSED;
}

static void on_open(struct xfer_engine *e, int64_t id, void *arg)
{
	struct kv_seg *s = arg;

	(void)e;
	if (id >= 0)
		s->id = id;
	else
		xfer_log(XFER_LOG_WARN, "xfer store client: cannot open "
			 "segment %s: %s", s->name, strerror((int)-id));
	seg_settled(s, id >= 0);
}

static void on_refresh(struct xfer_engine *e, int result, void *arg)
{
	struct kv_seg *s = arg;

	(void)e;
	s->stale = result != 0;
	seg_settled(s, !result);
}

/* @return 0 ready, 1 opening (wait), -1 failed. */
static int seg_ready(struct xfer_kv *kv, struct kv_seg *s)
{
	switch (s->state) {
	case SEG_OPEN:
		if (!s->stale)
			return 0;
		s->state = SEG_OPENING;
		if (xfer_segment_refresh_async(kv->e, s->id, on_refresh, s)) {
			s->state = SEG_OPEN;
			return -1;
		}
		return 1;
	case SEG_OPENING:
		return 1;
	case SEG_FAILED:
		return -1;
	default:
		s->state = SEG_OPENING;
		if (xfer_segment_open_async(kv->e, s->name, on_open, s)) {
			s->state = SEG_CLOSED;
			return -1;
		}
		return 1;
	}
}

/* ---- keys ---- */

static void key_result(struct kv_op *op, struct kv_key *k, int64_t v)
{
	op->results[k - op->keys] = v;
}

/* A put's write of @p k failed: it is revoked with this result. */
static void put_fail(struct kv_op *op, struct kv_key *k, int64_t why)
{
	key_result(op, k, why);
	k->state = KEY_FAILED;
}

/* A get's read of the replica at rep[cur] failed: go on from the next. */
static void get_next(struct kv_op *op, struct kv_key *k)
{
	k->moved = 0;
	k->cur += k->rep[k->cur].parts;
	if (k->cur < k->nrep)
		return;
	key_result(op, k, XFER_KV_TRANSFER_FAIL);
	k->state = KEY_DONE;
}

/* Every byte of @p k is read: it stands if its lease still does. */
static void get_done(struct kv_op *op, struct kv_key *k)
{
	key_result(op, k, kv_now_ms() >= k->lease_until_ms ?
		   XFER_KV_LEASE_EXPIRED : (int64_t)k->len);
	k->state = KEY_DONE;
}

/* Copy bytes [off, off + len) of @p k's value between its parts and
 * @p buf: into @p buf (@p in false) or from it. */
static void copy_parts(const struct kv_key *k, uint64_t off, uint8_t *buf,
		       uint64_t len, bool in)
{
	uint64_t at = 0;

	for (size_t i = 0; i < k->niov && len; i++) {
		uint64_t plen = k->iov[i].iov_len, skip, n;
		uint8_t *p = k->iov[i].iov_base;

		if (off >= at + plen) {
			at += plen;
			continue;
		}
		skip = off - at;
		n = plen - skip < len ? plen - skip : len;
		if (in)
			memcpy(p + skip, buf, n);
		else
			memcpy(buf, p + skip, n);
		buf += n;
		off += n;
		len -= n;
		at += plen;
	}
}

/* What needs no transfer: own-segment replicas. */
static void local_pass(struct kv_op *op)
{
	bool staged = !(op->flags & XFER_KV_ZERO_COPY);

	for (size_t i = 0; i < op->n; i++) {
		struct kv_key *k = &op->keys[i];
		unsigned n = 0;

		if (k->state != KEY_MOVE)
			continue;
		if (op->kind == KV_GET) {
			for (unsigned r = 0; r < k->nrep; r += k->rep[r].parts)
				if (!k->rep[r].seg) {
					copy_parts(k, 0, (uint8_t *)(uintptr_t)
						   k->rep[r].addr, k->len,
						   true);
					get_done(op, k);
					break;
				}
			if (k->state == KEY_MOVE && staged && !op->kv->stage) {
				key_result(op, k, XFER_KV_INVALID_PARAMS);
				k->state = KEY_DONE;
			}
			continue;
		}
		for (unsigned r = 0; r < k->nrep; r++) {
			if (k->rep[r].seg) {
				k->rep[n++] = k->rep[r];
				continue;
			}
			copy_parts(k, 0, (uint8_t *)(uintptr_t)k->rep[r].addr,
				   k->len, false);
		}
		k->nrep = (uint8_t)n;
		if (!n)
			k->state = KEY_MOVED;
		else if (staged && !op->kv->stage)
			put_fail(op, k, XFER_KV_INVALID_PARAMS);
	}
}

/* Are the segments of the replica a get reads open? @return as
 * seg_ready(), for all of them. */
static int group_ready(struct xfer_kv *kv, struct kv_key *k)
{
	int ret = 0;

	for (unsigned j = 0; j < k->rep[k->cur].parts; j++) {
		int r = seg_ready(kv, k->rep[k->cur + j].seg);

		if (r < 0)
			return r;
		ret |= r;
	}
	return ret;
}

/* Are the segments of this round open? Keys whose segment failed fail
 * (put) or go on to the next replica (get). @return false to wait. */
static bool resolve(struct kv_op *op)
{
	bool wait = false;

	for (size_t i = 0; i < op->n; i++) {
		struct kv_key *k = &op->keys[i];

		if (k->state != KEY_MOVE)
			continue;
		if (op->kind == KV_GET) {
			int ret = 0;

			while (k->state == KEY_MOVE &&
			       (ret = group_ready(op->kv, k)) < 0)
				get_next(op, k);
			wait |= k->state == KEY_MOVE && ret > 0;
			continue;
		}
		for (unsigned r = 0; r < k->nrep && k->state == KEY_MOVE; r++) {
			int ret = seg_ready(op->kv, k->rep[r].seg);

			if (ret < 0)
				put_fail(op, k, XFER_KV_TRANSFER_FAIL);
			wait |= ret > 0;
		}
	}
	if (wait && !op->waiting) {
		op->waiting = true;
		op->wait_next = op->kv->resolving;
		op->kv->resolving = op;
	}
	return !wait;
}

/* ---- staging ---- */

/* Bytes still to move through staging, at most one round's worth. */
static uint64_t stage_want(const struct kv_op *op)
{
	uint64_t want = 0, max = op->kv->stage_max;

	for (size_t i = 0; i < op->n && want < max; i++) {
		const struct kv_key *k = &op->keys[i];
		uint64_t left = k->len - k->moved;

		if (k->state == KEY_MOVE)
			want += (left + KV_STAGE_ALIGN - 1) &
				~(uint64_t)(KV_STAGE_ALIGN - 1);
	}
	return want < max ? want : max;
}

static bool stage_take(struct kv_op *op)
{
	uint64_t want = stage_want(op), off;
	uint32_t id;

	if (store_alloc_get(op->kv->stage, want, &off, &id))
		return false;
	op->staged = true;
	op->stage_id = id;
	op->stage_off = off;
	op->stage_len = want;
	return true;
}

static void stage_wake(struct xfer_kv *kv)
{
	struct kv_op *op;

	while ((op = kv->stage_wait) && stage_take(op)) {
		kv->stage_wait = op->wait_next;
		if (!kv->stage_wait)
			kv->stage_wait_tail = &kv->stage_wait;
		op->waiting = false;
		step(op);
	}
}

static void stage_give(struct kv_op *op)
{
	if (!op->staged)
		return;
	op->staged = false;
	store_alloc_release(op->kv->stage, op->stage_id);
	stage_wake(op->kv);
}

/* ---- rounds ---- */

/* The pieces of this round into op->pieces. @return the tasks it needs. */
static size_t plan(struct kv_op *op, bool staged)
{
	uint64_t pos = 0;
	size_t tasks = 0;

	op->npieces = 0;
	for (size_t i = 0; i < op->n; i++) {
		struct kv_key *k = &op->keys[i];
		uint64_t take = k->len - k->moved;
		struct kv_piece *p;

		if (k->state != KEY_MOVE)
			continue;
		if (staged) {
			if (pos >= op->stage_len)
				break;
			if (take > op->stage_len - pos)
				take = op->stage_len - pos;
		}
		p = &op->pieces[op->npieces++];
		*p = (struct kv_piece){ .k = (uint32_t)i, .off = k->moved,
					.len = take, .pos = pos };
		pos += (take + KV_STAGE_ALIGN - 1) &
		       ~(uint64_t)(KV_STAGE_ALIGN - 1);
		/* a buffer's requests: one per part it holds bytes of */
		tasks += (staged ? 1 : k->niov) * k->nrep;
	}
	return tasks;
}

/* Add the tasks of piece @p pi: per buffer written (put) or of the
 * replica read (get), one for the bytes of the piece it holds, and per
 * part those cover when zero-copy. */
static size_t piece_tasks(struct kv_op *op, size_t pi, bool staged,
			  struct xfer_request *req, struct kv_task *task)
{
	const struct kv_piece *p = &op->pieces[pi];
	const struct kv_key *k = &op->keys[p->k];
	bool get = op->kind == KV_GET;
	unsigned r0 = get ? k->cur : 0;
	unsigned r1 = get ? k->cur + k->rep[k->cur].parts : k->nrep;
	uint8_t *stage = op->kv->stage_mem + op->stage_off + p->pos;
	size_t n = 0;

	for (unsigned r = r0; r < r1; r++) {
		const struct kv_rep *b = &k->rep[r];
		uint64_t x0 = p->off > b->lo ? p->off : b->lo;
		uint64_t x1 = p->off + p->len < b->hi ? p->off + p->len : b->hi;
		uint64_t at = 0;

		if (x0 >= x1)
			continue;
		if (staged) {
			req[n] = (struct xfer_request){
				.opcode = get ? XFER_READ : XFER_WRITE,
				.source = stage + (x0 - p->off),
				.target_id = b->seg->id,
				.target_offset = b->addr + (x0 - b->lo),
				.length = x1 - x0 };
			task[n++] = (struct kv_task){ (uint32_t)pi, b->seg };
			continue;
		}
		for (size_t i = 0; i < k->niov && at < x1; i++) {
			uint64_t y0 = at > x0 ? at : x0;
			uint64_t y1 = at + k->iov[i].iov_len;

			at = y1;
			if (y1 > x1)
				y1 = x1;
			if (y0 >= y1)
				continue;
			req[n] = (struct xfer_request){
				.opcode = get ? XFER_READ : XFER_WRITE,
				.source = (uint8_t *)k->iov[i].iov_base +
					  (y0 - (at - k->iov[i].iov_len)),
				.target_id = b->seg->id,
				.target_offset = b->addr + (y0 - b->lo),
				.length = y1 - y0 };
			task[n++] = (struct kv_task){ (uint32_t)pi, b->seg };
		}
	}
	return n;
}

static void round_end(struct kv_op *op, bool staged)
{
	for (size_t i = 0; i < op->npieces; i++) {
		struct kv_piece *p = &op->pieces[i];
		struct kv_key *k = &op->keys[p->k];

		if (k->state != KEY_MOVE)
			continue;
		if (p->failed && !k->retried &&
		    (op->kind != KV_GET ||
		     k->cur + k->rep[k->cur].parts >= k->nrep)) {
			/* once a key with no replica left to go on to, from
			 * its start, its segments fetched anew: their owner
			 * may have registered the range since they were
			 * opened, or restarted */
			k->retried = true;
			k->moved = 0;
			continue;
		}
		if (p->failed) {
			if (op->kind == KV_GET)
				get_next(op, k);
			else
				put_fail(op, k, XFER_KV_TRANSFER_FAIL);
			continue;
		}
		if (staged && op->kind == KV_GET)
			copy_parts(k, p->off, op->kv->stage_mem +
				   op->stage_off + p->pos, p->len, true);
		k->moved += p->len;
		if (k->moved < k->len)
			continue;
		if (op->kind == KV_GET)
			get_done(op, k);
		else
			k->state = KEY_MOVED;
	}
	free(op->tasks);
	op->tasks = NULL;
	stage_give(op);
	step(op);
}

static void on_round(struct xfer_batch *b, enum xfer_status outcome,
		     void *arg)
{
	struct kv_op *op = arg;
	size_t n = xfer_batch_size(b);

	for (size_t i = 0; outcome != XFER_COMPLETED && i < n; i++) {
		struct xfer_task_status st;

		if (xfer_batch_status(b, i, &st) ||
		    st.status != XFER_COMPLETED) {
			op->pieces[op->tasks[i].piece].failed = true;
			/* its owner may have restarted: fetch it again */
			op->tasks[i].seg->stale = true;
		}
	}
	xfer_batch_free(b);
	round_end(op, !(op->flags & XFER_KV_ZERO_COPY));
}

/* Start a round of the pieces planned. */
static void submit(struct kv_op *op, bool staged, size_t ntasks)
{
	struct xfer_request *req = malloc(ntasks * sizeof(*req));
	struct xfer_batch *b = NULL;
	size_t n = 0;

	op->tasks = malloc(ntasks * sizeof(*op->tasks));
	if (req && op->tasks) {
		for (size_t i = 0; i < op->npieces; i++) {
			struct kv_piece *p = &op->pieces[i];

			p->failed = false;
			if (staged && op->kind == KV_PUT)
				copy_parts(&op->keys[p->k], p->off,
					   op->kv->stage_mem + op->stage_off +
					   p->pos, p->len, false);
			n += piece_tasks(op, i, staged, req + n,
					 op->tasks + n);
		}
		b = xfer_batch_new(op->kv->e, n);
	}
	if (!b || xfer_batch_set_callback(b, on_round, op) ||
	    xfer_batch_submit(b, req, n)) {
		xfer_log(XFER_LOG_WARN, "xfer store client: a batch of %zu "
			 "transfers could not start", n);
		if (b)
			xfer_batch_free(b);
		for (size_t i = 0; i < op->npieces; i++)
			op->pieces[i].failed = true;
		free(req);
		round_end(op, staged);
		return;
	}
	free(req);
}

static bool has_moves(const struct kv_op *op)
{
	for (size_t i = 0; i < op->n; i++)
		if (op->keys[i].state == KEY_MOVE)
			return true;
	return false;
}

/* Go on with @p op: the next round, a wait, or the end. */
static void step(struct kv_op *op)
{
	bool staged = !(op->flags & XFER_KV_ZERO_COPY);

	if (op->waiting || (has_moves(op) && !resolve(op)))
		return;
	if (!has_moves(op)) {
		op->moved(op);
		return;
	}
	/* first come, first served */
	if (staged && !op->staged &&
	    (op->kv->stage_wait || !stage_take(op))) {
		op->waiting = true;
		op->wait_next = NULL;
		*op->kv->stage_wait_tail = op;
		op->kv->stage_wait_tail = &op->wait_next;
		return;
	}
	submit(op, staged, plan(op, staged));
}

void kv_move(struct kv_op *op, void (*done)(struct kv_op *op))
{
	op->moved = done;
	local_pass(op);
	step(op);
}
