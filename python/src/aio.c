/*
 * The completion queue that asyncio waits on. The engine's callbacks run
 * on its control thread without the GIL: each puts its op on the queue
 * and, if the queue was empty, writes the eventfd. The event loop watches
 * that fd (loop.add_reader in xfer/_aio.py) and calls _aio_drain() on its
 * own thread, with the GIL, which resolves the futures. Nothing polls:
 * an idle engine under an idle loop sleeps in epoll on both sides.
 * A store client (_KV, store.c) has a queue of its own, drained alike.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "xfer_py.h"

struct xpy_cq {
	int efd;
	pthread_mutex_t lock;
	pthread_cond_t called;          /* a batch's callback ran */
	size_t batches;                 /* awaited batches not called back */
	struct xpy_op *head, **tail;
};

#define container_of(p, type, member) \
	((type *)((char *)(p) - offsetof(type, member)))

void xpy_cq_push(struct xpy_cq *cq, struct xpy_op *op)
{
	uint64_t one = 1;
	bool wake;

	pthread_mutex_lock(&cq->lock);
	op->called = true;
	op->qnext = NULL;
	wake = !cq->head;
	*cq->tail = op;
	cq->tail = &op->qnext;
	if (op->kind == XPY_OP_BATCH && --cq->batches == 0)
		pthread_cond_broadcast(&cq->called);
	pthread_mutex_unlock(&cq->lock);
	if (wake && write(cq->efd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is already non-zero, the loop wakes */
	}
}

struct xpy_cq *xpy_cq_new(void)
{
	struct xpy_cq *cq = calloc(1, sizeof(*cq));
	pthread_condattr_t ca;

	if (!cq) {
		PyErr_NoMemory();
		return NULL;
	}
	cq->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (cq->efd < 0) {
		PyErr_SetFromErrno(PyExc_OSError);
		free(cq);
		return NULL;
	}
	pthread_mutex_init(&cq->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&cq->called, &ca);
	pthread_condattr_destroy(&ca);
	cq->tail = &cq->head;
	return cq;
}

int xpy_cq_fd(const struct xpy_cq *cq)
{
	return cq->efd;
}

void xpy_cq_free(struct xpy_cq *cq)
{
	if (!cq)
		return;
	close(cq->efd);
	pthread_cond_destroy(&cq->called);
	pthread_mutex_destroy(&cq->lock);
	free(cq);
}

static struct xpy_cq *cq_get(EngineObject *eng)
{
	if (!eng->cq)
		eng->cq = xpy_cq_new();
	return eng->cq;
}

static void pending_link(EngineObject *eng, struct xpy_op *op)
{
	op->pnext = eng->pending;
	if (op->pnext)
		op->pnext->pprev = &op->pnext;
	op->pprev = &eng->pending;
	eng->pending = op;
}

static void pending_unlink(struct xpy_op *op)
{
	if (!op->pprev)
		return;
	*op->pprev = op->pnext;
	if (op->pnext)
		op->pnext->pprev = op->pprev;
	op->pprev = NULL;
}

/* A done/segment op for @p fut, on the pending list; the engine is kept
 * alive while it is there. */
static struct xpy_op *op_new(EngineObject *eng, enum xpy_op_kind kind,
			     PyObject *fut)
{
	struct xpy_cq *cq = cq_get(eng);
	struct xpy_op *op;

	if (!cq)
		return NULL;
	op = calloc(1, sizeof(*op));
	if (!op) {
		PyErr_NoMemory();
		return NULL;
	}
	op->kind = kind;
	op->cq = cq;
	op->fut = Py_NewRef(fut);
	Py_INCREF(eng);
	pending_link(eng, op);
	return op;
}

static void op_free(EngineObject *eng, struct xpy_op *op)
{
	pending_unlink(op);
	Py_CLEAR(op->fut);
	Py_CLEAR(op->value);
	free(op->name);
	free(op->msg);
	free(op);
	Py_DECREF(eng);
}

/* Settle @p fut with @p exc, else @p value, unless it is done (cancelled).
 * A future of a closed loop cannot be settled: nobody awaits it. */
void xpy_fut_settle(PyObject *fut, PyObject *value, PyObject *exc)
{
	PyObject *done = PyObject_CallMethod(fut, "done", NULL), *r = NULL;
	int yes = done ? PyObject_IsTrue(done) : -1;

	Py_XDECREF(done);
	/* "(O)": a lone tuple given as "O" would be the argument list */
	if (yes == 0)
		r = exc ? PyObject_CallMethod(fut, "set_exception", "(O)",
					      exc) :
			  PyObject_CallMethod(fut, "set_result", "(O)",
					      value ? value : Py_None);
	if (yes < 0 || (yes == 0 && !r))
		PyErr_Clear();
	Py_XDECREF(r);
}

static void resolve_batch(EngineObject *eng, struct xpy_op *op)
{
	BatchObject *bo = container_of(op, BatchObject, op);
	PyObject *exc = NULL;

	bo->outcome = (enum xfer_status)op->result;
	if (bo->outcome != XFER_COMPLETED && bo->b)
		exc = xpy_transfer_error(eng, bo->b, bo->outcome);
	if (bo->outcome != XFER_COMPLETED && !exc)
		exc = xpy_error(eng, -EIO, "transfer");
	bo->pending = false;
	xpy_batch_release(bo);
	pending_unlink(op);
	if (op->fut)
		xpy_fut_settle(op->fut, NULL, exc);
	Py_XDECREF(exc);
	PyErr_Clear();
	Py_CLEAR(op->fut);
	Py_DECREF(bo); /* the reference it held while pending */
}

static void resolve(EngineObject *eng, struct xpy_op *op)
{
	PyObject *value = NULL, *exc = NULL, *r;

	switch (op->kind) {
	case XPY_OP_BATCH:
		resolve_batch(eng, op);
		return;
	case XPY_OP_NOTIFY:
		if (eng->on_notify) {
			r = PyObject_CallFunction(eng->on_notify, "ss",
						  op->name, op->msg);
			if (!r)
				PyErr_WriteUnraisable(eng->on_notify);
			Py_XDECREF(r);
		}
		free(op->name);
		free(op->msg);
		free(op);
		return;
	case XPY_OP_SEGMENT:
		if (op->result >= 0)
			value = PyLong_FromLongLong(op->result);
		else
			exc = xpy_error(eng, (int)op->result, "open segment");
		break;
	case XPY_OP_DONE:
		if (op->result == 0)
			value = Py_NewRef(op->value ? op->value : Py_None);
		else
			exc = xpy_error(eng, (int)op->result, op->what);
		break;
	case XPY_OP_KV: /* only ever on a _KV's own queue */
		return;
	}
	if (value || exc)
		xpy_fut_settle(op->fut, value, exc);
	PyErr_Clear();
	Py_XDECREF(value);
	Py_XDECREF(exc);
	op_free(eng, op);
}

struct xpy_op *xpy_cq_take(struct xpy_cq *cq)
{
	struct xpy_op *list;
	uint64_t v;

	if (read(cq->efd, &v, sizeof(v)) < 0) {
		/* EAGAIN: woken for ops an earlier drain took */
	}
	pthread_mutex_lock(&cq->lock);
	list = cq->head;
	cq->head = NULL;
	cq->tail = &cq->head;
	pthread_mutex_unlock(&cq->lock);
	return list;
}

static void drain(EngineObject *eng)
{
	struct xpy_op *op, *next, *list;

	if (!eng->cq)
		return;
	/* ours from here on: a close() (or another drain) while resolving
	 * lets the GIL go must not see them pending */
	list = xpy_cq_take(eng->cq);
	for (op = list; op; op = op->qnext)
		pending_unlink(op);
	for (op = list; op; op = next) {
		next = op->qnext;
		resolve(eng, op);
	}
}

PyObject *xpy_aio_drain(EngineObject *eng, PyObject *unused)
{
	(void)unused;
	Py_INCREF(eng); /* an op may hold the last other reference */
	drain(eng);
	Py_DECREF(eng);
	Py_RETURN_NONE;
}

PyObject *xpy_aio_fileno(EngineObject *eng, PyObject *unused)
{
	struct xpy_cq *cq;

	(void)unused;
	if (!xpy_engine_get(eng))
		return NULL;
	xpy_engine_put(eng);
	cq = cq_get(eng);
	return cq ? PyLong_FromLong(cq->efd) : NULL;
}

/* ---- callbacks: the engine's thread, no GIL ----------------------------- */

void xpy_aio_batch_done(struct xfer_batch *b, enum xfer_status outcome,
			void *arg)
{
	BatchObject *bo = arg;

	(void)b;
	bo->op.result = outcome;
	xpy_cq_push(bo->op.cq, &bo->op);
}

static void done_cb(struct xfer_engine *e, int result, void *arg)
{
	struct xpy_op *op = arg;

	(void)e;
	op->result = result;
	xpy_cq_push(op->cq, op);
}

static void segment_cb(struct xfer_engine *e, int64_t id, void *arg)
{
	struct xpy_op *op = arg;

	(void)e;
	op->result = id;
	xpy_cq_push(op->cq, op);
}

static void notify_cb(struct xfer_engine *e, const char *name,
		      const char *msg, void *arg)
{
	struct xpy_op *op = calloc(1, sizeof(*op));

	(void)e;
	if (!op)
		return;
	op->kind = XPY_OP_NOTIFY;
	op->name = strdup(name);
	op->msg = strdup(msg);
	if (!op->name || !op->msg) {
		free(op->name);
		free(op->msg);
		free(op);
		return;
	}
	xpy_cq_push(arg, op);
}

/* ---- the calls ---------------------------------------------------------- */

PyObject *xpy_aio_submit(EngineObject *eng, PyObject *args, PyObject *kw)
{
	PyObject *fut, *rest;
	struct xpy_transfer t = { 0 };
	struct xpy_hold *h;
	BatchObject *bo = NULL;
	struct xpy_cq *cq;
	int ret = -1;

	/* (future, then the arguments of transfer()) */
	if (PyTuple_GET_SIZE(args) < 1) {
		PyErr_SetString(PyExc_TypeError, "_aio_submit(future, ...)");
		return NULL;
	}
	fut = PyTuple_GET_ITEM(args, 0);
	rest = PyTuple_GetSlice(args, 1, PyTuple_GET_SIZE(args));
	h = PyMem_Calloc(1, sizeof(*h));
	if (!rest || !h) {
		PyErr_NoMemory();
		goto out;
	}
	if (!(cq = cq_get(eng)) ||
	    xpy_transfer_parse(eng, rest, kw, "_aio_submit", XPY_REQS_MAX,
			       -EINVAL, &t, h) < 0)
		goto out;
	bo = xpy_batch_new(eng, t.n);
	if (!bo || xpy_batch_enter(bo) < 0)
		goto out;
	bo->holds = h;
	h = NULL;
	xfer_batch_set_callback_direct(bo->b, xpy_aio_batch_done, bo);
	bo->op.cq = cq;
	bo->op.fut = Py_NewRef(fut);
	bo->pending = true;
	Py_INCREF(bo); /* held while pending */
	pending_link(eng, &bo->op);
	pthread_mutex_lock(&cq->lock);
	cq->batches++;
	pthread_mutex_unlock(&cq->lock);
	ret = xpy_batch_submit(bo, &t);
	xpy_batch_leave(bo);
	if (ret) { /* the callback never runs */
		pthread_mutex_lock(&cq->lock);
		cq->batches--;
		pthread_mutex_unlock(&cq->lock);
		pending_unlink(&bo->op);
		Py_CLEAR(bo->op.fut);
		bo->pending = false;
		Py_DECREF(bo);
		xpy_raise(eng, ret, "submit");
	}
out:
	Py_XDECREF(rest);
	PyMem_Free(t.reqs);
	if (h) {
		xpy_hold_release(h);
		PyMem_Free(h);
	}
	if (ret)
		Py_CLEAR(bo);
	return (PyObject *)bo;
}

/* What the calls below start with. */
struct start {
	int (*fn)(struct xfer_engine *e, struct xpy_op *op,
		  const struct start *a);
	const char *what;
	const char *name, *msg, *loc;
	long long id;
	void *addr;
	size_t len;
	int ra;
};

static int start_open(struct xfer_engine *e, struct xpy_op *op,
		      const struct start *a)
{
	return xfer_segment_open_async(e, a->name, segment_cb, op);
}

static int start_notify(struct xfer_engine *e, struct xpy_op *op,
			const struct start *a)
{
	return xfer_notify_async(e, a->id, a->name, a->msg, done_cb, op);
}

static int start_refresh(struct xfer_engine *e, struct xpy_op *op,
			 const struct start *a)
{
	return xfer_segment_refresh_async(e, a->id, done_cb, op);
}

static int start_register(struct xfer_engine *e, struct xpy_op *op,
			  const struct start *a)
{
	return xfer_register_async(e, a->addr, a->len, a->loc, a->ra,
				   done_cb, op);
}

/* An op for @p fut whose callback @p a->fn starts (it does not wait);
 * NULL with an exception if it could not start. */
static struct xpy_op *aio_start(EngineObject *eng, enum xpy_op_kind kind,
				PyObject *fut, const struct start *a)
{
	struct xpy_op *op = op_new(eng, kind, fut);
	struct xfer_engine *e;
	int ret;

	if (!op)
		return NULL;
	op->what = a->what;
	e = xpy_engine_get(eng);
	if (!e) {
		op_free(eng, op);
		return NULL;
	}
	ret = a->fn(e, op, a);
	xpy_engine_put(eng);
	if (ret) {
		op_free(eng, op);
		xpy_raise(eng, ret, a->what);
		return NULL;
	}
	return op;
}

PyObject *xpy_aio_open(EngineObject *eng, PyObject *args)
{
	struct start a = { .fn = start_open, .what = "open segment" };
	PyObject *fut;

	if (!PyArg_ParseTuple(args, "Os:_aio_open", &fut, &a.name) ||
	    !aio_start(eng, XPY_OP_SEGMENT, fut, &a))
		return NULL;
	Py_RETURN_NONE;
}

PyObject *xpy_aio_notify(EngineObject *eng, PyObject *args)
{
	struct start a = { .fn = start_notify, .what = "notify" };
	PyObject *fut;

	if (!PyArg_ParseTuple(args, "OLss:_aio_notify", &fut, &a.id, &a.name,
			      &a.msg) ||
	    !aio_start(eng, XPY_OP_DONE, fut, &a))
		return NULL;
	Py_RETURN_NONE;
}

PyObject *xpy_aio_refresh(EngineObject *eng, PyObject *args)
{
	struct start a = { .fn = start_refresh, .what = "refresh segment" };
	PyObject *fut;

	if (!PyArg_ParseTuple(args, "OL:_aio_refresh", &fut, &a.id) ||
	    !aio_start(eng, XPY_OP_DONE, fut, &a))
		return NULL;
	Py_RETURN_NONE;
}

PyObject *xpy_aio_register(EngineObject *eng, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "future", "obj", "length", "location",
				  "remote_access", NULL };
	struct start a = { .fn = start_register, .what = "register",
			   .loc = "*", .ra = 1 };
	PyObject *fut, *obj, *length = Py_None;
	struct xpy_hold h = { 0 };
	struct xpy_op *op;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|Osp:_aio_register",
					 kwlist, &fut, &obj, &length, &a.loc,
					 &a.ra) ||
	    xpy_reg_args(obj, length, a.ra, &h, &a.addr, &a.len) < 0)
		return NULL;
	op = aio_start(eng, XPY_OP_DONE, fut, &a);
	if (op) {
		/* registered now: keep the view; the callback says when peers
		 * see it (after an error it stays registered, republished) */
		op->value = xpy_reg_keep(eng, (uintptr_t)a.addr, &h);
		if (!op->value)
			PyErr_Clear();
	}
	xpy_hold_release(&h);
	if (!op)
		return NULL;
	return PyLong_FromUnsignedLongLong((uintptr_t)a.addr);
}

PyObject *xpy_aio_listen(EngineObject *eng, PyObject *cb)
{
	struct xfer_engine *e;
	struct xpy_cq *cq;

	if (cb != Py_None && !PyCallable_Check(cb)) {
		PyErr_SetString(PyExc_TypeError, "a callable or None");
		return NULL;
	}
	cq = cq_get(eng);
	if (!cq || !(e = xpy_engine_get(eng)))
		return NULL;
	Py_XSETREF(eng->on_notify, cb == Py_None ? NULL : Py_NewRef(cb));
	xfer_engine_set_notify_cb(e, eng->on_notify ? notify_cb : NULL, cq);
	xpy_engine_put(eng);
	Py_RETURN_NONE;
}

/* ---- closing ------------------------------------------------------------ */

/* Before the engine is freed: no more notifications; the callbacks of the
 * awaited batches (cancelled) waited for until @p deadline, and what came
 * settled. */
void xpy_aio_close(EngineObject *eng, const struct timespec *deadline)
{
	struct xpy_cq *cq = eng->cq;

	if (!cq)
		return;
	xfer_engine_set_notify_cb(eng->e, NULL, NULL);
	Py_BEGIN_ALLOW_THREADS
	pthread_mutex_lock(&cq->lock);
	while (cq->batches && pthread_cond_timedwait(&cq->called, &cq->lock,
						     deadline) == 0)
		;
	pthread_mutex_unlock(&cq->lock);
	Py_END_ALLOW_THREADS
	drain(eng);
}

/* After the engine is freed: settle what its callbacks answered, fail
 * what they never will, and close the queue. */
void xpy_aio_free(EngineObject *eng)
{
	struct xpy_cq *cq = eng->cq;
	PyObject *exc;

	if (!cq)
		return;
	drain(eng);
	while (eng->pending) {
		struct xpy_op *op = eng->pending;

		if (op->kind == XPY_OP_BATCH) { /* tasks over, no callback */
			BatchObject *bo = container_of(op, BatchObject, op);

			op->result = bo->b ? xpy_batch_outcome(bo->b) :
					     XFER_CANCELED;
			resolve_batch(eng, op);
			continue;
		}
		exc = xpy_error(eng, -ECANCELED, "the engine closed");
		if (op->fut && exc)
			xpy_fut_settle(op->fut, NULL, exc);
		Py_XDECREF(exc);
		PyErr_Clear();
		op_free(eng, op);
	}
	xpy_cq_free(cq);
	eng->cq = NULL;
}
