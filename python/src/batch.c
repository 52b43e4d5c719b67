/*
 * Batches from Python: the blocking transfer (submit, wait without the
 * GIL, raise TransferError unless every task completed) and the Batch
 * type, submitted now and polled or waited later (Mooncake's
 * batch_transfer_async_* and transfer_submit_write ride on it). Batches
 * with a future (asyncio) are submitted in aio.c.
 */
#include <errno.h>
#include <time.h>

#include "xfer_py.h"

/* How long a blocking wait sleeps before it looks at signals (ms). */
#define XPY_SIGNAL_MS 200

enum xfer_status xpy_batch_outcome(struct xfer_batch *b)
{
	static const enum xfer_status order[] = {
		XFER_FAILED, XFER_TIMEOUT, XFER_INVALID, XFER_CANCELED,
	};
	unsigned seen = 0;

	for (size_t i = 0, n = xfer_batch_size(b); i < n; i++) {
		struct xfer_task_status st = { 0 };

		xfer_batch_status(b, i, &st);
		seen |= 1u << st.status;
	}
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		if (seen & 1u << order[i])
			return order[i];
	return XFER_COMPLETED;
}

/* xfer_batch_cancel() without the GIL, never beside a submit on the same
 * batch (xfer.h's rule). */
static void cancel_nogil(BatchObject *bo)
{
	pthread_mutex_lock(&bo->submit_lock);
	xfer_batch_cancel(bo->b);
	pthread_mutex_unlock(&bo->submit_lock);
}

/*
 * Wait for every task of @p bo (entered), without the GIL, looking at
 * signals now and then: on KeyboardInterrupt (or another signal
 * handler's exception) cancel the batch, wait for it, and return -1 with
 * the exception set.
 */
int xpy_batch_wait(BatchObject *bo)
{
	int ret;

	for (;;) {
		Py_BEGIN_ALLOW_THREADS
		ret = xfer_batch_wait(bo->b, XPY_SIGNAL_MS);
		Py_END_ALLOW_THREADS
		if (ret == 0)
			return 0;
		if (PyErr_CheckSignals() < 0)
			break;
	}
	Py_BEGIN_ALLOW_THREADS
	cancel_nogil(bo);
	xfer_batch_wait(bo->b, -1);
	Py_END_ALLOW_THREADS
	return -1;
}

int xpy_batch_submit(BatchObject *bo, const struct xpy_transfer *t)
{
	struct xfer_batch *b = bo->b;
	int ret;

	bo->submitting++;
	Py_BEGIN_ALLOW_THREADS
	pthread_mutex_lock(&bo->submit_lock);
	ret = t->nname ? xfer_batch_submit_notify(b, t->reqs, t->n, t->nname,
						  t->nmsg) :
			 xfer_batch_submit(b, t->reqs, t->n);
	pthread_mutex_unlock(&bo->submit_lock);
	Py_END_ALLOW_THREADS
	bo->submitting--;
	return ret;
}

int xpy_batch_enter(BatchObject *bo)
{
	if (!bo->b || bo->freeing) {
		PyErr_SetString(PyExc_ValueError, "the batch is freed");
		return -1;
	}
	if (!xpy_engine_get(bo->eng))
		return -1;
	pthread_mutex_lock(&bo->eng->g.lock);
	bo->users++;
	pthread_mutex_unlock(&bo->eng->g.lock);
	return 0;
}

void xpy_batch_leave(BatchObject *bo)
{
	pthread_mutex_lock(&bo->eng->g.lock);
	if (!--bo->users && bo->freeing)
		pthread_cond_broadcast(&bo->eng->g.cv);
	pthread_mutex_unlock(&bo->eng->g.lock);
	xpy_engine_put(bo->eng);
}

/* A notifying batch's outcome comes from its callback. */
struct sync_done {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	enum xfer_status outcome;
};

static void sync_done_cb(struct xfer_batch *b, enum xfer_status outcome,
			 void *arg)
{
	struct sync_done *d = arg;

	(void)b;
	pthread_mutex_lock(&d->lock);
	d->outcome = outcome;
	d->done = true;
	pthread_cond_signal(&d->cond);
	pthread_mutex_unlock(&d->lock);
}

static void sync_done_wait(struct sync_done *d)
{
	Py_BEGIN_ALLOW_THREADS
	pthread_mutex_lock(&d->lock);
	while (!d->done)
		pthread_cond_wait(&d->cond, &d->lock);
	pthread_mutex_unlock(&d->lock);
	Py_END_ALLOW_THREADS
}

const char xpy_transfer_doc[] = (
"transfer(opcode, segment, sources=None, targets=None, lengths=None, *,\n"
"         pairs=None, notify=None)\n\n"
"One batch, submitted and waited for without the GIL (the blocking form\n"
"of Mooncake's batch transfers). @opcode READ or WRITE; @segment a segment\n"
"id (or a Segment); the requests as in Batch.submit(): @pairs\n"
"[(source, target address[, length]), ...] or the three lists, lengths\n"
"in bytes. @notify=(name, msg) goes to the segment's owner once every\n"
"task completed, and the call returns once it acknowledged it. Raises\n"
"TransferError (.outcome, .statuses) unless every task completed;\n"
"XferError (EINVAL: also more than 2^24 requests, EMSGSIZE, ENOMEM);\n"
"KeyboardInterrupt, or close() from another thread, cancels.");

PyObject *xpy_engine_transfer(EngineObject *eng, PyObject *args,
			      PyObject *kw)
{
	struct sync_done d = { .lock = PTHREAD_MUTEX_INITIALIZER,
			       .cond = PTHREAD_COND_INITIALIZER };
	struct xpy_hold h = { 0 };
	struct xpy_transfer t;
	enum xfer_status outcome;
	BatchObject *bo = NULL;
	PyObject *exc = NULL;
	int ret;

	if (xpy_transfer_parse(eng, args, kw, "transfer", XPY_REQS_MAX,
			       -EINVAL, &t, &h) < 0)
		return NULL;
	/* a Batch, on the engine's list, so that close() cancels it too */
	bo = xpy_batch_new(eng, t.n);
	if (!bo || xpy_batch_enter(bo) < 0)
		goto out;
	if (t.nname)
		xfer_batch_set_callback(bo->b, sync_done_cb, &d);
	ret = xpy_batch_submit(bo, &t);
	if (ret) {
		xpy_raise(eng, ret, "submit");
	} else if (xpy_batch_wait(bo) == 0) {
		if (t.nname)
			sync_done_wait(&d);
		outcome = t.nname ? d.outcome : xpy_batch_outcome(bo->b);
		if (outcome != XFER_COMPLETED) {
			exc = xpy_transfer_error(eng, bo->b, outcome);
			if (exc)
				PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
		}
	} else if (t.nname) {
		sync_done_wait(&d);
	}
	xpy_batch_leave(bo);
	xpy_batch_release(bo);
out:
	Py_XDECREF(bo);
	PyMem_Free(t.reqs);
	xpy_hold_release(&h);
	if (exc) {
		Py_DECREF(exc);
		return NULL;
	}
	if (PyErr_Occurred())
		return NULL;
	Py_RETURN_NONE;
}

/* ---- the Batch type ---------------------------------------------------- */

BatchObject *xpy_batch_new(EngineObject *eng, size_t cap)
{
	struct xfer_engine *e;
	BatchObject *bo;

	/* zeroed, and tracked by the collector from here on */
	bo = (BatchObject *)eng->st->BatchType->tp_alloc(eng->st->BatchType,
							 0);
	if (!bo)
		return NULL;
	bo->cap = cap;
	pthread_mutex_init(&bo->submit_lock, NULL);
	bo->outcome = XFER_WAITING;
	bo->op.kind = XPY_OP_BATCH;
	e = xpy_engine_get(eng);
	if (!e) {
		Py_DECREF(bo);
		return NULL;
	}
	bo->b = xfer_batch_new(e, cap);
	if (!bo->b) {
		int err = errno;

		xpy_engine_put(eng);
		xpy_raise(eng, -err, "batch");
		Py_DECREF(bo);
		return NULL;
	}
	bo->eng = (EngineObject *)Py_NewRef(eng);
	/* on the list while still counted on the gate: a close() that
	 * begins now finds it */
	bo->next = eng->batches;
	if (bo->next)
		bo->next->pprev = &bo->next;
	bo->pprev = &eng->batches;
	eng->batches = bo;
	xpy_engine_put(eng);
	return bo;
}

const char xpy_batch_doc[] = (
"batch(capacity) -> Batch\n\n"
"A batch for up to @capacity requests (Mooncake's allocateBatchID), to\n"
"submit() now and wait() or poll later; `with` frees it. Usable from\n"
"any thread. Raises ValueError (capacity <= 0, or the engine closed),\n"
"XferError EINVAL (capacity over 2^24), ENOMEM.");

PyObject *xpy_engine_batch(EngineObject *eng, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "capacity", NULL };
	Py_ssize_t cap;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "n:batch", kwlist, &cap))
		return NULL;
	if (cap <= 0) {
		PyErr_SetString(PyExc_ValueError, "capacity must be positive");
		return NULL;
	}
	return (PyObject *)xpy_batch_new(eng, (size_t)cap);
}

static bool batch_gone(void *arg)
{
	return !((BatchObject *)arg)->b;
}

static bool batch_idle(void *arg)
{
	return !((BatchObject *)arg)->users;
}

/* Cancel what is in flight on @p bo (freeing: no new calls) and wait for
 * it and for the calls of other threads, without the GIL. */
static void batch_quiesce(BatchObject *bo)
{
	struct xfer_batch *b = bo->b;
	bool idle;

	for (;;) {
		pthread_mutex_lock(&bo->eng->g.lock);
		idle = !bo->users;
		pthread_mutex_unlock(&bo->eng->g.lock);
		if (idle && xfer_batch_wait(b, 0) == 0)
			return;
		Py_BEGIN_ALLOW_THREADS
		cancel_nogil(bo);
		if (idle)
			xfer_batch_wait(b, -1);
		Py_END_ALLOW_THREADS
		if (!idle) /* their waits end with the cancel */
			xpy_gate_wait(bo->eng, batch_idle, bo);
	}
}

/* Off the engine's list of live batches (with the GIL). */
static void batch_unlink(BatchObject *bo)
{
	if (!bo->pprev)
		return;
	*bo->pprev = bo->next;
	if (bo->next)
		bo->next->pprev = bo->pprev;
	bo->pprev = NULL;
}

/* Free the core's batch. It is -EBUSY while a direct callback or the
 * batch's notification still ends on another thread (xfer_batch_free()),
 * after its tasks did: waited out (xfer_batch_free_wait()) without the
 * GIL, which that callback may need, rather than leaked. */
static void batch_free_core(struct xfer_batch *b)
{
	if (xfer_batch_free(b) != -EBUSY)
		return;
	Py_BEGIN_ALLOW_THREADS
	(void)xfer_batch_free_wait(b, -1); /* never -ETIMEDOUT */
	Py_END_ALLOW_THREADS
}

/*
 * With the engine alive, what is in flight is cancelled and waited for
 * first (a batch with a callback has had it, or has none set); once the
 * engine is freed its tasks are over and the batch frees as it is
 * (xfer_engine_free()). Another thread freeing it is waited for.
 */
void xpy_batch_release(BatchObject *bo)
{
	struct xpy_hold *h, *next;
	bool alive;

	/* Off the list before the GIL can go (the hold below may wait): a
	 * close() takes a reference to each batch on it, and this may be the
	 * dealloc of one whose count is 0 (that reference would free it a
	 * second time). The quiesce below cancels it, as close() would, and
	 * its count on the gate keeps the engine until then. */
	batch_unlink(bo);
	if (!bo->b)
		return;
	alive = xpy_engine_hold(bo->eng); /* may wait out a close */
	if (bo->b && bo->freeing && alive) {
		xpy_gate_wait(bo->eng, batch_gone, bo);
	} else if (bo->b) {
		bo->freeing = true;
		if (alive)
			batch_quiesce(bo);
		if (!bo->op.fut) /* an awaited one's comes from its callback */
			bo->outcome = xpy_batch_outcome(bo->b);
		batch_free_core(bo->b);
		pthread_mutex_lock(&bo->eng->g.lock);
		bo->b = NULL;
		pthread_cond_broadcast(&bo->eng->g.cv);
		pthread_mutex_unlock(&bo->eng->g.lock);
		for (h = bo->holds; h; h = next) {
			next = h->next;
			xpy_hold_release(h);
			PyMem_Free(h);
		}
		bo->holds = NULL;
	}
	if (alive)
		xpy_engine_put(bo->eng);
}

int xpy_ms_left(const struct timespec *deadline)
{
	struct timespec now;
	int64_t ms;

	clock_gettime(CLOCK_MONOTONIC, &now);
	ms = (int64_t)(deadline->tv_sec - now.tv_sec) * 1000 +
	     (deadline->tv_nsec - now.tv_nsec) / 1000000;
	return ms > 0 ? (int)ms : 0;
}

/* Run @p fn on the batch of @p bo without the GIL, counted as a user of
 * it so that a free() waits; not on one being freed. */
static void batch_nogil(BatchObject *bo, void (*fn)(BatchObject *bo,
						    void *arg), void *arg)
{
	if (!bo->b || bo->freeing)
		return;
	pthread_mutex_lock(&bo->eng->g.lock);
	bo->users++;
	pthread_mutex_unlock(&bo->eng->g.lock);
	Py_BEGIN_ALLOW_THREADS
	fn(bo, arg);
	Py_END_ALLOW_THREADS
	pthread_mutex_lock(&bo->eng->g.lock);
	if (!--bo->users && bo->freeing)
		pthread_cond_broadcast(&bo->eng->g.cv);
	pthread_mutex_unlock(&bo->eng->g.lock);
}

static void close_cancel(BatchObject *bo, void *arg)
{
	(void)arg;
	if (xfer_batch_wait(bo->b, 0) == 0)
		return; /* nothing in flight: no need to stop the reactors */
	cancel_nogil(bo);
}

static void close_wait(BatchObject *bo, void *arg)
{
	xfer_batch_wait(bo->b, xpy_ms_left(arg));
}

void xpy_batches_cancel(EngineObject *eng, const struct timespec *deadline)
{
	PyObject *live = PyList_New(0);
	Py_ssize_t n;

	/* held in a list: another thread may free one while the GIL is out */
	for (BatchObject *bo = eng->batches; live && bo; bo = bo->next)
		if (PyList_Append(live, (PyObject *)bo) < 0)
			Py_CLEAR(live);
	if (!live) {
		PyErr_Clear();
		return;
	}
	n = PyList_GET_SIZE(live);
	for (Py_ssize_t i = 0; i < n; i++)
		batch_nogil((BatchObject *)PyList_GET_ITEM(live, i),
			    close_cancel, NULL);
	for (Py_ssize_t i = 0; deadline && i < n; i++) {
		BatchObject *bo = (BatchObject *)PyList_GET_ITEM(live, i);

		if (!bo->op.fut) /* an awaited one: aio.c waits for it */
			batch_nogil(bo, close_wait, (void *)deadline);
	}
	Py_DECREF(live);
}

void xpy_batches_close(EngineObject *eng)
{
	BatchObject *bo;

	/* each held: another thread may drop its last reference while the
	 * release waits without the GIL */
	while ((bo = eng->batches)) {
		Py_INCREF(bo);
		xpy_batch_release(bo);
		Py_DECREF(bo);
	}
}

/* What the collector sees: the engine, a pending future, and the
 * objects of the buffers the batch keeps exported. */
static int batch_traverse(BatchObject *bo, visitproc visit, void *arg)
{
	Py_VISIT(Py_TYPE(bo));
	Py_VISIT(bo->eng);
	Py_VISIT(bo->op.fut);
	for (struct xpy_hold *h = bo->holds; h; h = h->next)
		for (size_t i = 0; i < h->n; i++)
			Py_VISIT(h->views[i].obj);
	return 0;
}

/* Breaking a cycle frees the batch as free() does (an awaited one holds
 * a reference to itself until its callback is settled: never here). */
static int batch_clear(BatchObject *bo)
{
	if (bo->eng)
		xpy_batch_release(bo);
	Py_CLEAR(bo->eng);
	Py_CLEAR(bo->op.fut);
	return 0;
}

static void batch_dealloc(BatchObject *bo)
{
	PyTypeObject *tp = Py_TYPE(bo);

	PyObject_GC_UnTrack(bo);
	batch_clear(bo);
	pthread_mutex_destroy(&bo->submit_lock);
	tp->tp_free(bo);
	Py_DECREF(tp);
}

/* The batch, usable; NULL with ValueError once freed. */
static struct xfer_batch *batch_get(BatchObject *bo)
{
	if (!bo->b) {
		PyErr_SetString(PyExc_ValueError, "the batch is freed");
		return NULL;
	}
	return bo->b;
}

PyDoc_STRVAR(submit_doc,
"submit(opcode, segment, sources=None, targets=None, lengths=None, *,\n"
"       pairs=None, notify=None)\n\n"
"Append requests as tasks (Mooncake's submitTransfer) and return at once.\n"
"@segment is a segment id; the requests are @pairs [(source, target\n"
"address[, length]), ...] or the three lists. A source is an integer\n"
"address or a buffer object (kept exported until the batch is freed);\n"
"lengths are in bytes. @notify=(name, msg) is sent to the segment's\n"
"owner once every task completed. A bad request becomes an INVALID task.\n"
"Any thread: submits to one batch from several threads take turns.\n"
"Raises XferError: ENOSPC (more requests than free capacity, checked\n"
"before anything is taken), EBUSY (a notification is pending), EINVAL,\n"
"EMSGSIZE; ValueError once the batch is freed or the engine closing.");

static PyObject *batch_submit(BatchObject *bo, PyObject *args, PyObject *kw)
{
	struct xfer_batch *b = batch_get(bo);
	struct xpy_transfer t;
	struct xpy_hold *h;
	int ret;

	if (!b)
		return NULL;
	h = PyMem_Calloc(1, sizeof(*h));
	if (!h)
		return PyErr_NoMemory();
	if (xpy_transfer_parse(bo->eng, args, kw, "submit",
			       bo->cap - xfer_batch_size(b), -ENOSPC, &t,
			       h) < 0)
		goto err_free;
	if (xpy_batch_enter(bo) < 0)
		goto err_reqs;
	ret = xpy_batch_submit(bo, &t);
	xpy_batch_leave(bo);
	if (ret) {
		xpy_raise(bo->eng, ret, "submit");
		goto err_reqs;
	}
	PyMem_Free(t.reqs);
	h->next = bo->holds; /* exported until the batch is freed */
	bo->holds = h;
	Py_RETURN_NONE;

err_reqs:
	PyMem_Free(t.reqs);
err_free:
	xpy_hold_release(h);
	PyMem_Free(h);
	return NULL;
}

PyDoc_STRVAR(wait_doc,
"wait(timeout_ms=-1) -> bool\n\n"
"Wait, without the GIL, until every task is done (and a notification\n"
"acknowledged): True, or False after @timeout_ms (< 0: no limit). What\n"
"Mooncake's get_batch_transfer_status polls for; a signal's exception\n"
"(KeyboardInterrupt) cancels the batch and is raised. Any thread; a\n"
"free() or close() from another thread cancels the batch and ends it.");

static PyObject *batch_wait(BatchObject *bo, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "timeout_ms", NULL };
	int timeout_ms = -1, ret;

	if (!batch_get(bo) ||
	    !PyArg_ParseTupleAndKeywords(args, kw, "|i:wait", kwlist,
					 &timeout_ms) ||
	    xpy_batch_enter(bo) < 0)
		return NULL;
	if (timeout_ms < 0) {
		ret = xpy_batch_wait(bo);
	} else {
		Py_BEGIN_ALLOW_THREADS
		ret = xfer_batch_wait(bo->b, timeout_ms);
		Py_END_ALLOW_THREADS
	}
	xpy_batch_leave(bo);
	if (ret < 0 && PyErr_Occurred())
		return NULL;
	return PyBool_FromLong(ret == 0);
}

PyDoc_STRVAR(status_doc,
"status(index) -> (status, transferred)\n\n"
"Task @index (Mooncake's getTransferStatus): its status (an int of\n"
"xfer.Status) and the bytes known to have arrived. IndexError past the\n"
"last task.");

static PyObject *batch_status(BatchObject *bo, PyObject *arg)
{
	struct xfer_batch *b = batch_get(bo);
	struct xfer_task_status st;
	Py_ssize_t i;

	if (!b)
		return NULL;
	i = PyNumber_AsSsize_t(arg, PyExc_IndexError);
	if (i == -1 && PyErr_Occurred())
		return NULL;
	if (i < 0 || xfer_batch_status(b, (size_t)i, &st)) {
		PyErr_SetString(PyExc_IndexError, "no such task");
		return NULL;
	}
	return Py_BuildValue("(iK)", (int)st.status,
			     (unsigned long long)st.transferred);
}

PyObject *xpy_statuses(struct xfer_batch *b)
{
	size_t n = xfer_batch_size(b);
	PyObject *list = PyList_New((Py_ssize_t)n), *o;

	for (size_t i = 0; list && i < n; i++) {
		struct xfer_task_status st = { 0 };

		xfer_batch_status(b, i, &st);
		o = PyLong_FromLong(st.status);
		if (!o)
			Py_CLEAR(list);
		else
			PyList_SET_ITEM(list, (Py_ssize_t)i, o);
	}
	return list;
}

static PyObject *batch_statuses(BatchObject *bo, PyObject *unused)
{
	struct xfer_batch *b = batch_get(bo);

	(void)unused;
	return b ? xpy_statuses(b) : NULL;
}

PyDoc_STRVAR(cancel_doc,
"cancel()\n\n"
"Cancel the batch (xfer_batch_cancel; Mooncake has none): tasks not yet\n"
"done end CANCELED; nothing more of them is written into local memory\n"
"from the return on. Raises ValueError once the batch is freed.");

static PyObject *batch_cancel(BatchObject *bo, PyObject *unused)
{
	(void)unused;
	if (xpy_batch_enter(bo) < 0)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	cancel_nogil(bo);
	Py_END_ALLOW_THREADS
	xpy_batch_leave(bo);
	Py_RETURN_NONE;
}

/* Once the task awaiting @p fut was cancelled (xfer/_aio.py): a cancelled
 * future cancels its batch. */
static PyObject *batch_on_future_done(BatchObject *bo, PyObject *fut)
{
	PyObject *c, *r;
	int yes;

	if (!bo->b || !bo->pending)
		Py_RETURN_NONE;
	c = PyObject_CallMethod(fut, "cancelled", NULL);
	if (!c)
		return NULL;
	yes = PyObject_IsTrue(c);
	Py_DECREF(c);
	if (yes > 0) {
		r = batch_cancel(bo, NULL);
		Py_XDECREF(r);
	}
	PyErr_Clear(); /* closing: close() cancels it */
	Py_RETURN_NONE;
}

PyDoc_STRVAR(free_doc,
"free()\n\n"
"Free the batch (Mooncake's freeBatchID), cancelling and waiting for\n"
"what is in flight first, and for the calls of other threads on it\n"
"(their waits end). Idempotent, also while the engine closes; `with`\n"
"calls it on exit.");

static PyObject *batch_free_m(BatchObject *bo, PyObject *unused)
{
	(void)unused;
	if (bo->op.fut) {
		PyErr_SetString(PyExc_RuntimeError,
				"an awaited batch frees itself");
		return NULL;
	}
	xpy_batch_release(bo);
	Py_RETURN_NONE;
}

static PyObject *batch_enter(BatchObject *bo, PyObject *unused)
{
	(void)unused;
	return Py_NewRef(bo);
}

static PyObject *batch_exit(BatchObject *bo, PyObject *args)
{
	(void)args;
	return batch_free_m(bo, NULL);
}

static PyObject *batch_get_size(BatchObject *bo, void *c)
{
	(void)c;
	return PyLong_FromSize_t(bo->b ? xfer_batch_size(bo->b) : 0);
}

static PyObject *batch_get_capacity(BatchObject *bo, void *c)
{
	(void)c;
	return PyLong_FromSize_t(bo->cap);
}

/* Every submitted task is over and no submit is under way. */
static bool batch_done(BatchObject *bo)
{
	if (!bo->b)
		return !bo->pending;
	return !bo->pending && !bo->submitting &&
	       xfer_batch_wait(bo->b, 0) == 0;
}

static PyObject *batch_get_done(BatchObject *bo, void *c)
{
	(void)c;
	return PyBool_FromLong(batch_done(bo));
}

static PyObject *batch_get_outcome(BatchObject *bo, void *c)
{
	(void)c;
	if (!batch_done(bo))
		return PyLong_FromLong(XFER_WAITING);
	if (!bo->b)
		return PyLong_FromLong(bo->outcome);
	return PyLong_FromLong(xpy_batch_outcome(bo->b));
}

static PyMethodDef batch_methods[] = {
	{ "submit", (PyCFunction)(void (*)(void))batch_submit,
	  METH_VARARGS | METH_KEYWORDS, submit_doc },
	{ "wait", (PyCFunction)(void (*)(void))batch_wait,
	  METH_VARARGS | METH_KEYWORDS, wait_doc },
	{ "status", (PyCFunction)batch_status, METH_O, status_doc },
	{ "statuses", (PyCFunction)batch_statuses, METH_NOARGS,
	  "statuses() -> [status, ...]\n\nThe status of every task." },
	{ "cancel", (PyCFunction)batch_cancel, METH_NOARGS, cancel_doc },
	{ "free", (PyCFunction)batch_free_m, METH_NOARGS, free_doc },
	{ "_on_future_done", (PyCFunction)batch_on_future_done, METH_O, NULL },
	{ "__enter__", (PyCFunction)batch_enter, METH_NOARGS, NULL },
	{ "__exit__", (PyCFunction)batch_exit, METH_VARARGS, NULL },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef batch_getset[] = {
	{ "size", (getter)batch_get_size, NULL, "Tasks submitted so far.",
	  NULL },
	{ "capacity", (getter)batch_get_capacity, NULL,
	  "Tasks the batch holds.", NULL },
	{ "done", (getter)batch_get_done, NULL,
	  "Whether every submitted task is over (does not wait).", NULL },
	{ "outcome", (getter)batch_get_outcome, NULL,
	  "WAITING while in flight, then COMPLETED if every task completed, "
	  "else FAILED, TIMEOUT, INVALID or CANCELED (the first any task "
	  "has).", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PyType_Slot batch_slots[] = {
	{ Py_tp_doc, "A batch of transfer requests (Mooncake's BatchID); made "
		     "by Engine.batch(capacity). A context manager that frees "
		     "it." },
	{ Py_tp_dealloc, batch_dealloc },
	{ Py_tp_traverse, batch_traverse },
	{ Py_tp_clear, batch_clear },
	{ Py_tp_methods, batch_methods },
	{ Py_tp_getset, batch_getset },
	{ 0, NULL },
};

PyType_Spec xpy_batch_spec = {
	.name = "xfer._xfer.Batch",
	.basicsize = sizeof(BatchObject),
	.flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
		 Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
	.slots = batch_slots,
};
