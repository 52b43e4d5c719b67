/*
 * A call's life on the control reactor (kv_internal.h): its keys copied,
 * its requests to the master sent in chunks of STORE_BATCH_MAX keys and
 * answered key by key, each phase going on once none is in flight
 * (op->then), and at the end the results and the callback.
 *
 *   put:    put_start -> move.c writes -> put_end + put_revoke
 *   get:    query -> move.c reads (lease checked per key)
 *   size, desc: query
 *   exist, remove, replica_clear, replicate, remove_all, sync,
 *           remove_regex, query_task, create_task: one phase
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store/client/kv_internal.h"

/* The last key and its object are in the reply: check what a peer says
 * of them before anything is written where it points. */
static bool replicas_take(struct xfer_kv *kv, struct kv_key *k,
			  const struct store_item *it, uint64_t len)
{
	size_t nlen = strlen(kv->name);
	unsigned left = 0;
	uint64_t at = 0;

	k->nrep = 0;
	for (unsigned i = 0; i < it->nrep; i++) {
		const struct store_replica *r = &it->rep[i];
		struct kv_rep *out = &k->rep[k->nrep];

		/* a replica's buffers hold its bytes in order, all of them */
		if (!left) {
			left = r->shards;
			at = 0;
		}
		if (!r->len || r->len > len - at ||
		    (left == 1 && r->len != len - at))
			return false;
		out->addr = r->addr;
		out->seg = NULL;
		out->lo = at;
		out->hi = at += r->len;
		out->parts = r->shards;
		left--;
		/* a shard in the own segment moves through the engine too:
		 * its bytes are read with the others' */
		if (r->shards == 1 && r->endpoint.len == nlen &&
		    !memcmp(r->endpoint.p, kv->name, nlen)) {
			/* an own segment: a memcpy, so it must lie there */
			if (!kv_own_has(kv, r->addr, len))
				return false;
		} else {
			out->seg = kv_seg_get(kv, r->endpoint.p,
					      r->endpoint.len);
			if (!out->seg)
				return false;
		}
		k->nrep++;
	}
	return k->nrep > 0 && !left;
}

_Static_assert(XFER_KV_REPLICA_MAX == STORE_REPLICA_MAX, "one limit");

/* The replicas of a query's answer into the caller's descriptors: @return
 * how many. */
static int64_t desc_take(struct kv_op *op, struct kv_key *k,
			 const struct store_item *it)
{
	struct xfer_kv_replica_desc *d =
		&op->desc[(size_t)(k - op->keys) * XFER_KV_REPLICA_MAX];

	for (unsigned i = 0; i < it->nrep; i++) {
		d[i].addr = it->rep[i].addr;
		d[i].size = it->rep[i].len;
		d[i].shards = it->rep[i].shards;
		memcpy(d[i].endpoint, it->rep[i].endpoint.p,
		       it->rep[i].endpoint.len);
		d[i].endpoint[it->rep[i].endpoint.len] = 0;
	}
	return it->nrep;
}

static void key_done(struct kv_op *op, struct kv_key *k, int64_t v);

/* A query_task's answer into the caller's @p t. */
static void kv_task_take(struct xfer_kv_task *t, const struct store_msg *rep)
{
	*t = (struct xfer_kv_task){
		.id = rep->task, .type = rep->task_type,
		.status = rep->task_status,
		.created_at_ms_epoch = (int64_t)rep->created_ms,
		.last_updated_at_ms_epoch = (int64_t)rep->updated_ms,
	};
	memcpy(t->assigned_client, rep->client, STORE_ID_LEN);
	memcpy(t->message, rep->message.p, rep->message.len);
	t->message[rep->message.len] = 0;
}

/* A ranged get reads cap bytes from src_off of each replica (checked to
 * lie in the object): each buffer's bytes from then on, the key's from
 * 0; an empty range is read at once. */
static void take_range(struct kv_op *op, struct kv_key *k)
{
	for (unsigned i = 0; i < k->nrep; i++) {
		struct kv_rep *r = &k->rep[i];

		if (r->hi <= k->src_off) {
			r->lo = r->hi = 0;     /* nothing of it is read */
			continue;
		}
		if (r->lo < k->src_off) {
			r->addr += k->src_off - r->lo;
			r->lo = k->src_off;
		}
		r->lo -= k->src_off;
		r->hi -= k->src_off;
	}
	k->len = k->cap;
	if (!k->len)
		key_done(op, k, 0);
}

static void set_result(struct kv_op *op, struct kv_key *k, int64_t v)
{
	op->results[k - op->keys] = v;
}

static void key_done(struct kv_op *op, struct kv_key *k, int64_t v)
{
	set_result(op, k, v);
	k->state = KEY_DONE;
}

/* One key's answer, @p err already the item's or the reply's. */
static void reply_key(struct kv_op *op, uint16_t type, struct kv_key *k,
		      const struct store_item *it, int32_t err)
{
	switch (type) {
	case STORE_PUT_START:
		if (err == XFER_KV_OBJECT_ALREADY_EXISTS)
			key_done(op, k, 0);    /* immutable: done already */
		else if (err)
			key_done(op, k, err);
		else if (!replicas_take(op->kv, k, it, k->len)) {
			/* what it allocated goes back */
			set_result(op, k, XFER_KV_INTERNAL_ERROR);
			k->state = KEY_FAILED;
		}
		break;
	case STORE_PUT_END:
		key_done(op, k, err);
		k->version = it && !err ? it->version : 0;
		break;
	case STORE_PUT_REVOKE:
		k->state = KEY_DONE;   /* the result says why */
		break;
	case STORE_REPLICATE:
		key_done(op, k, err ? err : (int64_t)it->task);
		break;
	case STORE_QUERY:
		k->version = it ? it->version : 0;
		/* gone from DRAM, and the master says the tier holds it */
		if (err == XFER_KV_OBJECT_NOT_FOUND && k->version &&
		    (op->kind == KV_GET || op->kind == KV_SIZE) &&
		    op->kv->tier && !k->ranged) {
			key_done(op, k, kv_tier_get(op->kv, k, k->version,
						    op->min_version,
						    op->kind == KV_GET));
			break;
		}
		if (err) {
			key_done(op, k, err);
			break;
		}
		k->len = it->len;
		k->lease_until_ms = op->sent_ms + (int64_t)it->lease_ms;
		if (op->kind == KV_DESC)
			key_done(op, k, desc_take(op, k, it));
		else if (op->kind == KV_SIZE)
			key_done(op, k, (int64_t)it->len);
		else if (k->ranged ? k->src_off > it->len ||
				     k->cap > it->len - k->src_off :
				     it->len > k->cap)
			key_done(op, k, XFER_KV_INVALID_PARAMS);
		else if (!replicas_take(op->kv, k, it, it->len))
			key_done(op, k, XFER_KV_INTERNAL_ERROR);
		else if (k->ranged)
			take_range(op, k);
		break;
	default:                       /* exist, remove */
		key_done(op, k, err);
	}
}

static void on_reply(struct kv_rpc *r, const struct store_msg *rep)
{
	struct kv_op *op = r->op;

	if (r->type == STORE_CREATE_TASK) {
		op->results[0] = !rep ? XFER_KV_RPC_FAIL :
				 rep->err ? rep->err : (int64_t)rep->task;
	} else if (r->type == STORE_QUERY_TASK) {
		op->results[0] = !rep ? XFER_KV_RPC_FAIL : rep->err;
		if (rep && !rep->err)
			kv_task_take(op->task, rep);
	} else if (r->type == STORE_REMOVE_ALL || r->type == STORE_SYNC ||
		   r->type == STORE_REMOVE_REGEX) {
		op->results[0] = !rep ? XFER_KV_RPC_FAIL :
				 rep->err ? rep->err : rep->count;
	} else {
		for (size_t j = 0; j < r->count; j++) {
			struct kv_key *k = &op->keys[op->sel[r->from + j]];
			int32_t err = !rep ? XFER_KV_RPC_FAIL :
				      rep->err ? rep->err :
				      rep->n != r->count ? XFER_KV_RPC_FAIL :
				      rep->items[j].err;

			reply_key(op, r->type, k, rep && !rep->err &&
				  rep->n == r->count ? &rep->items[j] : NULL,
				  err);
		}
	}
	if (!--op->rpcs_out)
		op->then(op);
}

/* Send op->sel[from, to) as requests of @p type, chunk by chunk. */
static void send_keys(struct kv_op *op, uint16_t type, size_t from,
		      size_t to)
{
	struct xfer_kv *kv = op->kv;
	struct store_msg *m = kv->req;

	for (size_t i = from; i < to; i += STORE_BATCH_MAX) {
		struct kv_rpc *r = &op->rpcs[op->rpcs_used++];

		r->op = op;
		r->from = i;
		r->count = to - i < STORE_BATCH_MAX ? to - i : STORE_BATCH_MAX;
		r->done = on_reply;
		memcpy(m->client, kv->client_id, STORE_ID_LEN);
		m->replicas = op->replicas;
		m->ssd_replicas = op->ssd_replicas;
		m->flags = op->pin;
		m->force = op->force;
		m->min_version = op->min_version;
		m->preferred = (struct store_str){
			op->preferred, (uint16_t)(op->preferred ?
						  strlen(op->preferred) : 0) };
		m->n = (uint32_t)r->count;
		for (size_t j = 0; j < r->count; j++) {
			const struct kv_key *k = &op->keys[op->sel[i + j]];

			m->items[j].key = (struct store_str){ k->key, k->klen };
			m->items[j].len = k->len;
			m->items[j].version = k->version;
		}
		op->rpcs_out++;
		kv_rpc_send(kv, r, type);
	}
}

/* Select the keys in @p state into op->sel[from ..]. @return the end. */
static size_t select_keys(struct kv_op *op, uint8_t state, size_t from)
{
	for (size_t i = 0; i < op->n; i++)
		if (op->keys[i].state == state)
			op->sel[from++] = i;
	return from;
}

/* One request of @p type for the keys in KEY_MOVE, then @p then. */
static void phase(struct kv_op *op, uint16_t type,
		  void (*then)(struct kv_op *op))
{
	size_t n = select_keys(op, KEY_MOVE, 0);

	op->then = then;
	op->rpcs_used = 0;
	op->sent_ms = kv_now_ms();
	if (!n) {
		then(op);
		return;
	}
	send_keys(op, type, 0, n);
}

static void finish(struct kv_op *op);

/* The put ended: write what flushes to the tier (eager: now, then tell
 * the master; lazy: queued for the thread). */
static void put_flush(struct kv_op *op)
{
	for (size_t i = 0; op->flush && i < op->n; i++) {
		struct kv_key *k = &op->keys[i];

		if (k->state != KEY_DONE || op->results[i] || !k->version)
			continue;
		if (op->flush == XFER_KV_FLUSH_LAZY)
			set_result(op, k, kv_tier_lazy(op->kv, k));
		else if (!(op->results[i] = kv_tier_eager(op->kv, k)))
			k->state = KEY_MOVE;
	}
	phase(op, STORE_FLUSHED, finish);
}

/* The put's bytes moved, or failed: end and revoke. */
static void put_end(struct kv_op *op)
{
	size_t a = select_keys(op, KEY_MOVED, 0);
	size_t b = select_keys(op, KEY_FAILED, a);

	op->then = put_flush;
	op->rpcs_used = 0;
	if (!b) {
		finish(op);
		return;
	}
	send_keys(op, STORE_PUT_END, 0, a);
	send_keys(op, STORE_PUT_REVOKE, a, b);
}

static void put_move(struct kv_op *op)
{
	kv_move(op, put_end);
}

static void get_move(struct kv_op *op)
{
	kv_move(op, finish);
}

/* One create_task for the key and its targets. */
static void create_task(struct kv_op *op)
{
	struct store_msg *m = op->kv->req;
	const struct kv_key *k = &op->keys[0];

	op->then = finish;
	if (k->state == KEY_DONE) {    /* refused: results[0] says why */
		finish(op);
		return;
	}
	memcpy(m->client, op->kv->client_id, STORE_ID_LEN);
	m->task_type = op->task_type;
	m->key = (struct store_str){ k->key, k->klen };
	m->preferred = (struct store_str){
		op->preferred, (uint16_t)(op->preferred ?
					  strlen(op->preferred) : 0) };
	m->n = (uint32_t)op->ntargets;
	for (size_t i = 0; i < op->ntargets; i++)
		m->items[i].key = (struct store_str){
			op->targets[i], (uint16_t)strlen(op->targets[i]) };
	op->rpcs[0] = (struct kv_rpc){ .op = op, .done = on_reply };
	op->rpcs_out = 1;
	kv_rpc_send(op->kv, &op->rpcs[0], STORE_CREATE_TASK);
}

static void op_start(struct xfer_job *job)
{
	struct kv_op *op = container_of(job, struct kv_op, job);
	struct xfer_kv *kv = op->kv;

	op->next = kv->ops;
	if (op->next)
		op->next->prev = op;
	kv->ops = op;
	if (kv->closing) {
		for (size_t i = 0; i < op->n; i++)
			key_done(op, &op->keys[i], -ESHUTDOWN);
		finish(op);
		return;
	}
	switch (op->kind) {
	case KV_PUT:
		for (size_t i = 0; i < op->n; i++)
			if (op->keys[i].state == KEY_MOVE &&
			    (!op->keys[i].len || (op->flush && !kv->tier)))
				key_done(op, &op->keys[i],
					 XFER_KV_INVALID_PARAMS);
		phase(op, STORE_PUT_START, put_move);
		break;
	case KV_GET:
		phase(op, STORE_QUERY, get_move);
		break;
	case KV_SIZE:
	case KV_DESC:
		phase(op, STORE_QUERY, finish);
		break;
	case KV_EXIST:
		phase(op, STORE_EXIST, finish);
		break;
	case KV_REMOVE:
		phase(op, STORE_REMOVE, finish);
		break;
	case KV_REPLICA_CLEAR:
		phase(op, STORE_REPLICA_CLEAR, finish);
		break;
	case KV_REPLICATE:
		phase(op, STORE_REPLICATE, finish);
		break;
	case KV_CREATE_TASK:
		create_task(op);
		break;
	case KV_REMOVE_ALL:
	case KV_SYNC:
	case KV_REMOVE_REGEX:
	case KV_QUERY_TASK:
		op->then = finish;
		op->rpcs[0] = (struct kv_rpc){ .op = op, .done = on_reply };
		kv->req->force = op->force;
		kv->req->task = op->task_id;
		kv->req->pattern = (struct store_str){
			op->pattern, (uint16_t)(op->pattern ?
						strlen(op->pattern) : 0) };
		op->rpcs_out = 1;
		kv_rpc_send(kv, &op->rpcs[0], op->kind == KV_SYNC ? STORE_SYNC :
			    op->kind == KV_REMOVE_REGEX ? STORE_REMOVE_REGEX :
			    op->kind == KV_QUERY_TASK ? STORE_QUERY_TASK :
			    STORE_REMOVE_ALL);
		break;
	}
}

void kv_op_post(struct kv_op *op)
{
	op->job.fn = op_start;
	xfer_reactor_post(op->kv->r, &op->job);
}

int kv_op_targets(struct kv_op *op, const char *const *names, size_t n)
{
	size_t bytes = n * sizeof(char *);
	char *p;

	for (size_t i = 0; i < n; i++)
		bytes += strlen(names[i]) + 1;
	op->targets = malloc(bytes);
	if (!op->targets)
		return -ENOMEM;
	p = (char *)(op->targets + n);
	for (size_t i = 0; i < n; i++) {
		op->targets[i] = strcpy(p, names[i]);
		p += strlen(p) + 1;
	}
	op->ntargets = n;
	return 0;
}

void kv_op_free(struct kv_op *op)
{
	free(op->targets);
	free(op->preferred);
	free(op->pattern);
	free(op->arena);
	free(op->iov);
	free(op->keys);
	free(op->sel);
	free(op->rpcs);
	free(op->pieces);
	free(op);
}

/* End @p op: the callback, then free. */
static void finish(struct kv_op *op)
{
	struct xfer_kv *kv = op->kv;
	xfer_kv_cb cb = op->cb;
	void *arg = op->arg;
	int64_t res = 0;

	if (op->results == &op->one) {
		res = op->one;
	} else {
		for (size_t i = 0; i < op->n && !res; i++)
			if (op->results[i] < 0)
				res = op->results[i];
	}
	if (op->version && op->n)
		*op->version = op->keys[0].version;
	if (op->prev)
		op->prev->next = op->next;
	else
		kv->ops = op->next;
	if (op->next)
		op->next->prev = op->prev;
	kv_op_free(op);
	cb(kv, res, arg);
	kv->op_gone(kv);
}

void kv_op_move(struct kv_op *op)
{
	struct xfer_kv *kv = op->kv;

	op->next = kv->ops;
	if (op->next)
		op->next->prev = op;
	kv->ops = op;
	kv_move(op, finish);
}

/* Copy the keys and parts of the caller's arrays into @p op. */
static int copy_args(struct kv_op *op, const char *const *keys,
		     const struct iovec *iov, const size_t *iovcnt)
{
	size_t bytes = 0, parts = 0;
	char *p;

	for (size_t i = 0; i < op->n; i++) {
		size_t klen = strlen(keys[i]);

		/* a key past the limit is refused, not copied */
		bytes += klen <= STORE_KEY_MAX ? klen : 0;
		parts += iovcnt ? iovcnt[i] : 1;
	}
	op->arena = p = malloc(bytes + 1);
	if (iov && parts > SIZE_MAX / sizeof(*iov))
		return -ENOMEM;
	op->iov = iov ? malloc(parts * sizeof(*iov) + 1) : NULL;
	if (!p || (iov && !op->iov))
		return -ENOMEM;
	if (iov)
		memcpy(op->iov, iov, parts * sizeof(*iov));
	parts = 0;
	for (size_t i = 0; i < op->n; i++) {
		struct kv_key *k = &op->keys[i];
		size_t klen = strlen(keys[i]);

		k->state = KEY_MOVE;
		if (!klen || klen > STORE_KEY_MAX)
			k->state = KEY_DONE;
		else
			memcpy(p, keys[i], klen);
		k->key = p;
		k->klen = k->state == KEY_MOVE ? (uint16_t)klen : 0;
		p += k->klen;
		if (iov) {
			k->iov = &op->iov[parts];
			k->niov = iovcnt ? iovcnt[i] : 1;
			parts += k->niov;
		}
		for (size_t j = 0; j < k->niov; j++) {
			if (k->len + k->iov[j].iov_len < k->len)
				k->state = KEY_DONE;   /* it overflows */
			k->len += k->iov[j].iov_len;
		}
		k->cap = k->len;
		op->results[i] = k->state == KEY_DONE ?
				 XFER_KV_INVALID_PARAMS : 0;
	}
	return 0;
}

struct kv_op *kv_op_new(struct xfer_kv *kv, enum kv_kind kind, size_t n,
			const char *const *keys, const struct iovec *iov,
			const size_t *iovcnt, int64_t *results)
{
	struct kv_op *op = calloc(1, sizeof(*op));
	size_t chunks = n / STORE_BATCH_MAX + 1;

	if (!op)
		return NULL;
	op->kv = kv;
	op->kind = kind;
	op->n = n;
	op->results = results ? results : &op->one;
	op->keys = calloc(n ? n : 1, sizeof(*op->keys));
	op->sel = calloc(n ? n : 1, sizeof(*op->sel));
	op->rpcs = calloc(2 * chunks, sizeof(*op->rpcs));
	op->pieces = calloc(n ? n : 1, sizeof(*op->pieces));
	if (!op->keys || !op->sel || !op->rpcs || !op->pieces ||
	    copy_args(op, keys, iov, iovcnt)) {
		kv_op_free(op);
		return NULL;
	}
	return op;
}
