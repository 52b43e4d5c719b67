/*
 * One call of a _KV (store.c): its Python arguments copied into the
 * arrays the store client takes (include/xfer/store.h), the chain of the
 * client's asynchronous calls it runs, and its result as Python objects.
 *
 * A call counts itself in on the _KV's gate before its first request and
 * out when its chain ends, on whatever thread ends it (the client's
 * callbacks run on the engine's control thread, without the GIL). Then a
 * blocking call's thread, which waits without the GIL, is woken; a call
 * with a future goes on the _KV's completion queue, which the event loop
 * drains (xpy_kv_drain), settling the future on its own thread. The
 * buffer views a call holds are released, and its result built, with
 * the GIL, by whoever takes it after its end.
 *
 * A fetch (get into memory of its own: Mooncake's get, get_buffer) has
 * two steps: the length of every key (one query each, all in flight at
 * once), then one batch reading those found into memory allocated for
 * them; the bytes are then copied into bytes objects, or handed to
 * KVBuffer objects as they are.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "xfer_py.h"

#define container_of(p, type, member) \
	((type *)((char *)(p) - offsetof(type, member)))

struct kvc;

/* One key's length query of a fetch. */
struct kvc_slot {
	struct kvc *c;
	size_t i;
};

struct kvc {
	struct xpy_op op;               /* on the queue once ended (future) */
	KVObject *kv;                   /* owned */
	enum xpy_kv_kind kind;
	size_t n;
	const char **keys;              /* into arena */
	char *arena;
	struct iovec *iov;
	size_t *iovcnt;                 /* NULL: one part per key */
	unsigned flags;
	bool force, as_bytes, upsert;
	bool has_rc;
	uint64_t min_version, version;  /* getv's; query_task: the id */
	unsigned dram, ssd;             /* replicate */
	struct xfer_kv_task task;       /* query_task */
	uint64_t *src;                  /* a ranged get: n offsets */
	char *pattern;                  /* remove_regex, replica_clear */
	struct xfer_kv_replica_desc *desc; /* desc: 16 a key */
	struct xfer_kv_replicate rc;
	char *preferred;
	struct xpy_hold hold;           /* the buffer objects' views */
	int64_t *results;               /* n, or one (single) */
	/* a fetch */
	atomic_size_t left;             /* length queries not answered */
	struct kvc_slot *slots;
	void **mem;                     /* each key's memory, or NULL */
	size_t m, *idx;                 /* keys found: their indices */
	const char **keys2;
	struct iovec *iov2;
	int64_t *res2;
	/* a blocking call */
	bool sync, done;
	pthread_mutex_t lock;
	pthread_cond_t cv;
};

/* Calls of no key or of one, whose callback carries the result. */
static bool single(enum xpy_kv_kind kind)
{
	return kind == XPY_KV_REMOVE_ALL || kind == XPY_KV_GETV ||
	       kind == XPY_KV_SYNC || kind == XPY_KV_REMOVE_REGEX ||
	       kind == XPY_KV_REPLICATE || kind == XPY_KV_QUERY_TASK ||
	       kind == XPY_KV_CREATE_TASK;
}

/* No keys to parse. */
static bool keyless(enum xpy_kv_kind kind)
{
	return kind == XPY_KV_REMOVE_ALL || kind == XPY_KV_SYNC ||
	       kind == XPY_KV_REMOVE_REGEX || kind == XPY_KV_QUERY_TASK;
}

/* The client's answer as Mooncake's binding gives it: a local errno
 * (-ENOMEM, -EDEADLK, -ESHUTDOWN) is its INTERNAL_ERROR, -1. */
static int64_t mc(int64_t r)
{
	return r == -ENOMEM || r == -EDEADLK || r == -ESHUTDOWN ? -1 : r;
}

/* ---- the end of a chain: any thread, no GIL ----------------------------- */

static void kvc_end(struct kvc *c)
{
	KVObject *kv = c->kv;

	xpy_kv_leave(kv); /* the chain no longer uses the client */
	if (!c->sync) {
		xpy_cq_push(kv->cq, &c->op);
		return;
	}
	pthread_mutex_lock(&c->lock);
	c->done = true;
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->lock);
}

static void on_end(struct xfer_kv *k, int64_t result, void *arg)
{
	struct kvc *c = arg;

	(void)k;
	if (single(c->kind))
		c->results[0] = result;
	kvc_end(c);
}

static void on_fetched(struct xfer_kv *k, int64_t result, void *arg)
{
	struct kvc *c = arg;

	(void)k;
	(void)result;
	for (size_t j = 0; j < c->m; j++)
		c->results[c->idx[j]] = c->res2[j];
	kvc_end(c);
}

/* Every length is known: read the keys found into memory of their own. */
static void fetch_read(struct kvc *c)
{
	struct xfer_kv *k = c->kv->k;
	int r;

	for (size_t i = 0; i < c->n; i++) {
		uint64_t len = (uint64_t)c->results[i];

		if (c->results[i] < 0)
			continue;
		if (len > SIZE_MAX || !(c->mem[i] = malloc(len ? len : 1))) {
			c->results[i] = -ENOMEM;
			continue;
		}
		c->idx[c->m] = i;
		c->keys2[c->m] = c->keys[i];
		c->iov2[c->m] = (struct iovec){ c->mem[i], len };
		c->m++;
	}
	if (!c->m) {
		kvc_end(c);
		return;
	}
	r = xfer_kv_batch_get_async(k, c->m, c->keys2, c->iov2, NULL, 0,
				    c->res2, on_fetched, c);
	if (r) { /* its callback never runs */
		for (size_t j = 0; j < c->m; j++)
			c->res2[j] = r;
		on_fetched(k, r, c);
	}
}

static void on_size(struct xfer_kv *k, int64_t result, void *arg)
{
	struct kvc_slot *s = arg;
	struct kvc *c = s->c;

	(void)k;
	c->results[s->i] = result;
	if (atomic_fetch_sub(&c->left, 1) != 1)
		return;
	if (c->kind == XPY_KV_SIZE)
		kvc_end(c);
	else
		fetch_read(c);
}

/* ---- the start: the caller's thread, with the GIL ----------------------- */

/* Start the chain of @p c (counted in); it ends in kvc_end(), maybe
 * before this returns, but @p c stays valid until then: its caller frees
 * it (blocking), or a drain, which needs the GIL this holds. */
static void kvc_start(struct kvc *c)
{
	struct xfer_kv *k = c->kv->k;
	const struct xfer_kv_replicate *rc = c->has_rc ? &c->rc : NULL;
	size_t n = c->n;
	int r = 0;

	switch (c->kind) {
	case XPY_KV_PUT:
		r = (c->upsert ? xfer_kv_batch_upsert_async :
				 xfer_kv_batch_put_async)(
			k, n, c->keys, c->iov, c->iovcnt, c->flags, rc,
			c->results, on_end, c);
		break;
	case XPY_KV_GETV:
		r = xfer_kv_get_version_async(k, c->keys[0], c->iov[0].iov_base,
					      c->iov[0].iov_len, c->flags,
					      c->min_version, &c->version,
					      on_end, c);
		break;
	case XPY_KV_SYNC:
		r = xfer_kv_sync_async(k, on_end, c);
		break;
	case XPY_KV_REPLICATE:
		r = xfer_kv_replicate_async(k, c->keys[0], c->dram, c->ssd,
					    on_end, c);
		break;
	case XPY_KV_QUERY_TASK:
		r = xfer_kv_query_task_async(k, c->min_version, &c->task,
					     on_end, c);
		break;
	case XPY_KV_CREATE_TASK:  /* a move: its source in pattern */
		r = c->pattern ? xfer_kv_create_move_task_async(
				k, c->keys[0], c->pattern, c->keys[1], on_end,
				c) : xfer_kv_create_copy_task_async(
				k, c->keys[0], c->keys + 1, n - 1, on_end, c);
		break;
	case XPY_KV_REPLICA_CLEAR:
		r = xfer_kv_batch_replica_clear_async(k, n, c->keys, c->pattern,
						      c->results, on_end, c);
		break;
	case XPY_KV_DESC:
		r = xfer_kv_batch_get_replica_desc_async(k, n, c->keys, c->desc,
							 c->results, on_end,
							 c);
		break;
	case XPY_KV_REMOVE_REGEX:
		r = xfer_kv_remove_by_regex_async(k, c->pattern, c->force,
						  on_end, c);
		break;
	case XPY_KV_GET:
		r = c->src ? xfer_kv_batch_get_ranges_async(
				k, n, c->keys, c->src, c->iov, c->flags,
				c->results, on_end, c) :
		    xfer_kv_batch_get_async(k, n, c->keys, c->iov, c->iovcnt,
					    c->flags, c->results, on_end, c);
		break;
	case XPY_KV_EXIST:
		r = xfer_kv_batch_exist_async(k, n, c->keys, c->results,
					      on_end, c);
		break;
	case XPY_KV_REMOVE:
		r = xfer_kv_batch_remove_async(k, n, c->keys, c->force,
					       c->results, on_end, c);
		break;
	case XPY_KV_REMOVE_ALL:
		r = xfer_kv_remove_all_async(k, c->force, on_end, c);
		break;
	case XPY_KV_SIZE:
	case XPY_KV_FETCH:
		if (!n) {
			kvc_end(c);
			return;
		}
		atomic_store(&c->left, n);
		for (size_t i = 0; i < n; i++) {
			struct kvc_slot *s = &c->slots[i];

			r = xfer_kv_get_size_async(k, c->keys[i], on_size, s);
			if (r)
				on_size(k, r, s);
		}
		return;
	}
	if (r && single(c->kind))
		c->results[0] = r;
	else if (r)
		for (size_t i = 0; i < n; i++)
			c->results[i] = r;
	if (r) /* the callback never runs */
		kvc_end(c);
}

/* ---- arguments ---------------------------------------------------------- */

/* What the methods take (all but keys optional). */
struct kvc_in {
	PyObject *keys, *parts, *counts, *lens, *rc, *fut, *src;
	int zero_copy, force, as_bytes, upsert;
	unsigned long long min_version;
	unsigned dram, ssd;
	const char *pattern;
};

static void kvc_free(struct kvc *c)
{
	xpy_hold_release(&c->hold);
	for (size_t i = 0; c->mem && i < c->n; i++)
		free(c->mem[i]);
	if (c->sync) {
		pthread_cond_destroy(&c->cv);
		pthread_mutex_destroy(&c->lock);
	}
	Py_XDECREF(c->op.fut);
	Py_XDECREF(c->kv);
	free(c->keys);
	free(c->arena);
	free(c->iov);
	free(c->iovcnt);
	free(c->preferred);
	free(c->pattern);
	free(c->desc);
	free(c->src);
	free(c->results);
	free(c->slots);
	free(c->mem);
	free(c->idx);
	free(c->keys2);
	free(c->iov2);
	free(c->res2);
	free(c);
}

/* The keys (str or bytes) into c->keys; one with a NUL inside becomes ""
 * (the client refuses it: INVALID_PARAMS). */
static int parse_keys(struct kvc *c, PyObject *seq)
{
	PyObject **items = PySequence_Fast_ITEMS(seq);
	size_t total = 0, off = 0;
	const char *s;
	Py_ssize_t len;

	c->n = (size_t)PySequence_Fast_GET_SIZE(seq);
	if (c->n > XPY_REQS_MAX) {
		PyErr_SetString(PyExc_ValueError, "too many keys");
		return -1;
	}
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < c->n; i++) {
			PyObject *o = items[i];

			if (PyUnicode_Check(o)) {
				s = PyUnicode_AsUTF8AndSize(o, &len);
			} else if (PyBytes_Check(o)) {
				s = PyBytes_AS_STRING(o);
				len = PyBytes_GET_SIZE(o);
			} else {
				PyErr_Format(PyExc_TypeError, "a key must be "
					     "str or bytes, not %.100s",
					     Py_TYPE(o)->tp_name);
				return -1;
			}
			if (!s)
				return -1;
			if (memchr(s, 0, (size_t)len))
				len = 0;
			if (!pass) {
				total += (size_t)len + 1;
				continue;
			}
			memcpy(c->arena + off, s, (size_t)len);
			c->arena[off + (size_t)len] = 0;
			c->keys[i] = c->arena + off;
			off += (size_t)len + 1;
		}
		if (!pass && (!(c->arena = malloc(total ? total : 1)) ||
			      !(c->keys = calloc(c->n + 1,
						 sizeof(*c->keys))))) {
			PyErr_NoMemory();
			return -1;
		}
	}
	return 0;
}

/* A length or a count from @p seq[@p i]. */
static int seq_size(PyObject *seq, size_t i, uint64_t *v)
{
	PyObject *o = PySequence_GetItem(seq, (Py_ssize_t)i);
	int r = o ? xpy_addr(o, v) : -1;

	Py_XDECREF(o);
	return r;
}

/* The parts: buffer objects (their own length) or integer addresses
 * (with in->lens[j]); in->counts[i] of them for key i, or one each. */
static int parse_parts(struct kvc *c, const struct kvc_in *in, bool writable)
{
	PyObject *parts = PySequence_Fast(in->parts, "parts must be a list");
	size_t np, want = c->n;
	int ret = -1;

	if (!parts)
		return -1;
	np = (size_t)PySequence_Fast_GET_SIZE(parts);
	if (in->counts != Py_None) {
		if (PySequence_Size(in->counts) != (Py_ssize_t)c->n)
			goto bad;
		if (!(c->iovcnt = calloc(c->n + 1, sizeof(*c->iovcnt))))
			goto nomem;
		want = 0;
		for (size_t i = 0; i < c->n; i++) {
			uint64_t v;

			if (seq_size(in->counts, i, &v) < 0)
				goto out;
			if (v > np - want)
				goto bad;
			c->iovcnt[i] = (size_t)v;
			want += (size_t)v;
		}
	}
	if (np != want || (in->lens != Py_None &&
			   PySequence_Size(in->lens) != (Py_ssize_t)np))
		goto bad;
	if (!(c->iov = calloc(np + 1, sizeof(*c->iov))))
		goto nomem;
	for (size_t j = 0; j < np; j++) {
		PyObject *o = PySequence_Fast_GET_ITEM(parts, j);
		uint64_t addr, len;

		if (PyObject_CheckBuffer(o)) {
			if (xpy_hold_add(&c->hold, o, writable,
					 &c->iov[j].iov_base,
					 &c->iov[j].iov_len) < 0)
				goto out;
			continue;
		}
		if (in->lens == Py_None) {
			PyErr_SetString(PyExc_TypeError,
					"an integer address needs a length");
			goto out;
		}
		if (xpy_addr(o, &addr) < 0 || seq_size(in->lens, j, &len) < 0)
			goto out;
		if (addr > UINTPTR_MAX || len > SIZE_MAX) {
			PyErr_SetString(PyExc_OverflowError, "address");
			goto out;
		}
		c->iov[j] = (struct iovec){ (void *)(uintptr_t)addr, len };
	}
	ret = 0;
	goto out;
bad:
	PyErr_SetString(PyExc_ValueError,
			"parts, counts and lengths do not match the keys");
	goto out;
nomem:
	PyErr_NoMemory();
out:
	Py_DECREF(parts);
	return ret;
}

/* A ranged get's source offsets, one per key, one part each. */
static int parse_src(struct kvc *c, const struct kvc_in *in)
{
	if (in->counts != Py_None ||
	    PySequence_Size(in->src) != (Py_ssize_t)c->n) {
		PyErr_SetString(PyExc_ValueError, "src_offsets must have one "
				"offset per key, each of one part");
		return -1;
	}
	if (!(c->src = calloc(c->n + 1, sizeof(*c->src)))) {
		PyErr_NoMemory();
		return -1;
	}
	for (size_t i = 0; i < c->n; i++)
		if (seq_size(in->src, i, &c->src[i]) < 0)
			return -1;
	return 0;
}

/* (replica_num, soft_pin, hard_pin, preferred_segment or None
 *  [, nof_replica_num[, flush]]) */
static int parse_rc(struct kvc *c, PyObject *rc)
{
	unsigned int num, nof = 0, flush = 0;
	int soft, hard;
	const char *pref = NULL;

	if (rc == Py_None)
		return 0;
	if (!PyTuple_Check(rc)) {
		PyErr_SetString(PyExc_TypeError, "rc must be a tuple");
		return -1;
	}
	if (!PyArg_ParseTuple(rc, "Ippz|II:rc", &num, &soft, &hard, &pref,
			      &nof, &flush))
		return -1;
	c->has_rc = true;
	c->rc = (struct xfer_kv_replicate){ .replica_num = num,
		.with_soft_pin = soft, .with_hard_pin = hard,
		.nof_replica_num = nof, .flush = flush };
	if (pref && *pref) {
		if (!(c->preferred = strdup(pref))) {
			PyErr_NoMemory();
			return -1;
		}
		c->rc.preferred_segment = c->preferred;
	}
	return 0;
}

static int parse_args(enum xpy_kv_kind kind, PyObject *args, PyObject *kw,
		      struct kvc_in *in)
{
	static char *kw_put[] = { "keys", "parts", "counts", "lens", "rc",
				  "zero_copy", "upsert", "future", NULL };
	static char *kw_getv[] = { "key", "parts", "lens", "zero_copy",
				   "min_version", "future", NULL };
	static char *kw_sync[] = { "future", NULL };
	static char *kw_repl[] = { "key", "replica_num", "nof_replica_num",
				   "future", NULL };
	static char *kw_task[] = { "task_id", "future", NULL };
	static char *kw_create[] = { "keys", "source", "future", NULL };
	static char *kw_regex[] = { "pattern", "force", "future", NULL };
	static char *kw_clear[] = { "keys", "segment", "future", NULL };
	static char *kw_get[] = { "keys", "parts", "counts", "lens", "rc",
				  "zero_copy", "src_offsets", "future", NULL };
	static char *kw_fetch[] = { "keys", "as_bytes", "future", NULL };
	static char *kw_keys[] = { "keys", "future", NULL };
	static char *kw_remove[] = { "keys", "force", "future", NULL };
	static char *kw_all[] = { "force", "future", NULL };

	switch (kind) {
	case XPY_KV_PUT:
		return PyArg_ParseTupleAndKeywords(
			args, kw, "OO|OOOppO:put", kw_put, &in->keys,
			&in->parts, &in->counts, &in->lens, &in->rc,
			&in->zero_copy, &in->upsert, &in->fut);
	case XPY_KV_GETV:
		return PyArg_ParseTupleAndKeywords(
			args, kw, "OO|OpKO:get_version", kw_getv, &in->keys,
			&in->parts, &in->lens, &in->zero_copy,
			&in->min_version, &in->fut);
	case XPY_KV_SYNC:
		return PyArg_ParseTupleAndKeywords(args, kw, "|O:sync",
						   kw_sync, &in->fut);
	case XPY_KV_REPLICATE:
		return PyArg_ParseTupleAndKeywords(
			args, kw, "OI|IO:replicate", kw_repl, &in->keys,
			&in->dram, &in->ssd, &in->fut);
	case XPY_KV_QUERY_TASK:
		return PyArg_ParseTupleAndKeywords(
			args, kw, "K|O:query_task", kw_task, &in->min_version,
			&in->fut);
	case XPY_KV_CREATE_TASK:
		return PyArg_ParseTupleAndKeywords(
			args, kw, "O|zO:create_task", kw_create, &in->keys,
			&in->pattern, &in->fut);
	case XPY_KV_REPLICA_CLEAR:
		return PyArg_ParseTupleAndKeywords(
			args, kw, "O|sO:replica_clear", kw_clear, &in->keys,
			&in->pattern, &in->fut);
	case XPY_KV_REMOVE_REGEX:
		return PyArg_ParseTupleAndKeywords(
			args, kw, "s|pO:remove_by_regex", kw_regex,
			&in->pattern, &in->force, &in->fut);
	case XPY_KV_GET:
		return PyArg_ParseTupleAndKeywords(
			args, kw, "OO|OOOpOO:get", kw_get, &in->keys,
			&in->parts, &in->counts, &in->lens, &in->rc,
			&in->zero_copy, &in->src, &in->fut);
	case XPY_KV_FETCH:
		return PyArg_ParseTupleAndKeywords(
			args, kw, "O|pO:fetch", kw_fetch, &in->keys,
			&in->as_bytes, &in->fut);
	case XPY_KV_EXIST:
	case XPY_KV_SIZE:
	case XPY_KV_DESC:
		return PyArg_ParseTupleAndKeywords(
			args, kw, "O|O:call", kw_keys, &in->keys, &in->fut);
	case XPY_KV_REMOVE:
		return PyArg_ParseTupleAndKeywords(
			args, kw, "O|pO:remove", kw_remove, &in->keys,
			&in->force, &in->fut);
	case XPY_KV_REMOVE_ALL:
		return PyArg_ParseTupleAndKeywords(
			args, kw, "|pO:remove_all", kw_all, &in->force,
			&in->fut);
	}
	return 0;
}

/* The arrays of a fetch, n each. */
static int fetch_alloc(struct kvc *c)
{
	size_t n = c->n + 1;

	c->slots = calloc(n, sizeof(*c->slots));
	c->mem = calloc(n, sizeof(*c->mem));
	c->idx = calloc(n, sizeof(*c->idx));
	c->keys2 = calloc(n, sizeof(*c->keys2));
	c->iov2 = calloc(n, sizeof(*c->iov2));
	c->res2 = calloc(n, sizeof(*c->res2));
	if (!c->slots || !c->mem || !c->idx || !c->keys2 || !c->iov2 ||
	    !c->res2) {
		PyErr_NoMemory();
		return -1;
	}
	for (size_t i = 0; i < c->n; i++)
		c->slots[i] = (struct kvc_slot){ c, i };
	return 0;
}

static struct kvc *kvc_new(KVObject *kv, enum xpy_kv_kind kind,
			   const struct kvc_in *in)
{
	struct kvc *c = calloc(1, sizeof(*c));
	PyObject *keys = NULL;
	int ret = -1;

	if (!c) {
		PyErr_NoMemory();
		return NULL;
	}
	c->kv = (KVObject *)Py_NewRef(kv);
	c->kind = kind;
	c->op.kind = XPY_OP_KV;
	c->flags = in->zero_copy ? XFER_KV_ZERO_COPY : 0;
	c->force = in->force;
	c->as_bytes = in->as_bytes;
	c->upsert = in->upsert;
	c->min_version = in->min_version;
	c->dram = in->dram;
	c->ssd = in->ssd;
	if (in->pattern && !(c->pattern = strdup(in->pattern))) {
		PyErr_NoMemory();
		goto out;
	}
	if (kind == XPY_KV_GETV || kind == XPY_KV_REPLICATE) {
		keys = PyTuple_Pack(1, in->keys);
		if (!keys || parse_keys(c, keys) < 0 ||
		    (kind == XPY_KV_GETV && parse_parts(c, in, true) < 0))
			goto out;
	} else if (!keyless(kind)) {
		keys = PySequence_Fast(in->keys, "keys must be a list");
		if (!keys || parse_keys(c, keys) < 0)
			goto out;
	}
	if (!(c->results = calloc(c->n + 1, sizeof(*c->results)))) {
		PyErr_NoMemory();
		goto out;
	}
	if ((kind == XPY_KV_PUT || kind == XPY_KV_GET) &&
	    (parse_parts(c, in, kind == XPY_KV_GET) < 0 ||
	     parse_rc(c, in->rc) < 0))
		goto out;
	if ((kind == XPY_KV_FETCH || kind == XPY_KV_SIZE) &&
	    fetch_alloc(c) < 0)
		goto out;
	if (in->src != Py_None && parse_src(c, in) < 0)
		goto out;
	if (kind == XPY_KV_DESC &&
	    !(c->desc = calloc(c->n * XFER_KV_REPLICA_MAX + 1, sizeof(*c->desc)))) {
		PyErr_NoMemory();
		goto out;
	}
	ret = 0;
out:
	Py_XDECREF(keys);
	if (ret) {
		kvc_free(c);
		return NULL;
	}
	return c;
}

/* ---- results: with the GIL ---------------------------------------------- */

/* Key @p i's replicas: a list of (address, size, endpoint). */
static PyObject *desc_list(struct kvc *c, size_t i)
{
	const struct xfer_kv_replica_desc *d = &c->desc[i * XFER_KV_REPLICA_MAX];
	PyObject *list = PyList_New((Py_ssize_t)c->results[i]);

	for (Py_ssize_t j = 0; list && j < PyList_GET_SIZE(list); j++) {
		PyObject *t = Py_BuildValue("(KKs)",
					    (unsigned long long)d[j].addr,
					    (unsigned long long)d[j].size,
					    d[j].endpoint);

		if (!t) {
			Py_CLEAR(list);
			break;
		}
		PyList_SET_ITEM(list, j, t);
	}
	return list;
}

static PyObject *kvc_result(struct kvc *c)
{
	PyObject *list, *o;

	if (c->kind == XPY_KV_GETV)
		return Py_BuildValue("(LK)", (long long)mc(c->results[0]),
				     (unsigned long long)c->version);
	if (c->kind == XPY_KV_QUERY_TASK && !c->results[0]) {
		const struct xfer_kv_task *t = &c->task;

		return Py_BuildValue("(KiiLLy#s)", (unsigned long long)t->id,
				     t->type, t->status,
				     (long long)t->created_at_ms_epoch,
				     (long long)t->last_updated_at_ms_epoch,
				     (const char *)t->assigned_client,
				     (Py_ssize_t)16, t->message);
	}
	if (single(c->kind))
		return PyLong_FromLongLong(mc(c->results[0]));
	list = PyList_New((Py_ssize_t)c->n);
	for (size_t i = 0; list && i < c->n; i++) {
		int64_t r = c->results[i];

		if (c->kind == XPY_KV_DESC && r >= 0)
			o = desc_list(c, i);
		else if (c->kind != XPY_KV_FETCH || r < 0)
			o = PyLong_FromLongLong(mc(r));
		else if (c->as_bytes)
			o = PyBytes_FromStringAndSize(c->mem[i], r);
		else if ((o = xpy_kvbuf_new(c->kv->st, c->mem[i], (size_t)r)))
			c->mem[i] = NULL; /* the KVBuffer's now */
		if (!o) {
			Py_CLEAR(list);
			break;
		}
		PyList_SET_ITEM(list, (Py_ssize_t)i, o);
	}
	return list;
}

PyObject *xpy_kv_call(KVObject *kv, enum xpy_kv_kind kind, PyObject *args,
		      PyObject *kw)
{
	struct kvc_in in = { .counts = Py_None, .lens = Py_None,
			     .rc = Py_None, .fut = Py_None, .src = Py_None,
			     .as_bytes = 1 };
	struct kvc *c;
	PyObject *r;

	if (!parse_args(kind, args, kw, &in))
		return NULL;
	if (in.fut != Py_None && !kv->cq && !(kv->cq = xpy_cq_new()))
		return NULL;
	c = kvc_new(kv, kind, &in);
	if (!c)
		return NULL;
	if (!xpy_kv_enter(kv)) {
		kvc_free(c);
		return NULL;
	}
	if (in.fut != Py_None) {
		c->op.fut = Py_NewRef(in.fut);
		c->op.cq = kv->cq;
		kvc_start(c); /* drained on the loop's thread, with the GIL */
		Py_RETURN_NONE;
	}
	c->sync = true;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cv, NULL);
	kvc_start(c);
	Py_BEGIN_ALLOW_THREADS
	pthread_mutex_lock(&c->lock);
	while (!c->done)
		pthread_cond_wait(&c->cv, &c->lock);
	pthread_mutex_unlock(&c->lock);
	Py_END_ALLOW_THREADS
	r = kvc_result(c);
	kvc_free(c);
	return r;
}

void xpy_kv_drain(KVObject *kv)
{
	struct xpy_op *op, *next;

	if (!kv->cq)
		return;
	Py_INCREF(kv); /* a call may hold the last other reference */
	for (op = xpy_cq_take(kv->cq); op; op = next) {
		struct kvc *c = container_of(op, struct kvc, op);
		PyObject *value = kvc_result(c), *exc = NULL;

		next = op->qnext;
		if (!value) {
			PyObject *t, *tb;

			PyErr_Fetch(&t, &exc, &tb);
			PyErr_NormalizeException(&t, &exc, &tb);
			Py_XDECREF(t);
			Py_XDECREF(tb);
		}
		xpy_fut_settle(op->fut, value, exc);
		Py_XDECREF(value);
		Py_XDECREF(exc);
		kvc_free(c);
	}
	Py_DECREF(kv);
}
