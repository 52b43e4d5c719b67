/*
 * Python arguments into requests. A source is an integer address (its
 * length given beside it, as Mooncake's) or an object with the buffer
 * protocol (bytearray, memoryview, numpy array: one contiguous block),
 * whose length is the object's unless a shorter one is given. Such an
 * object stays exported (so it cannot be resized or freed) until the
 * transfer that uses it is over.
 */
#include <errno.h>
#include <limits.h>

#include "xfer_py.h"

/* Addresses and lengths in bytes are uint64_t in Python's hands and
 * size_t or pointers in the engine's: the same width, so no cast cuts. */
_Static_assert(sizeof(size_t) >= sizeof(uint64_t) &&
	       sizeof(uintptr_t) >= sizeof(uint64_t), "64-bit sizes");

int xpy_addr(PyObject *o, uint64_t *addr)
{
	PyObject *i = PyLong_CheckExact(o) ? Py_NewRef(o) : PyNumber_Index(o);
	unsigned long long v;

	if (!i)
		return -1;
	/* PyLong_AsUnsignedLongLong() takes an int of more than one digit
	 * (any address) through a byte array; PyLong_AsUnsignedLong(), as
	 * wide here, reads its digits, with the same OverflowError */
#if ULONG_MAX == UINT64_MAX
	v = PyLong_AsUnsignedLong(i);
#else
	v = PyLong_AsUnsignedLongLong(i);
#endif
	Py_DECREF(i);
	if (v == (unsigned long long)-1 && PyErr_Occurred())
		return -1;
	*addr = v;
	return 0;
}

int xpy_hold_add(struct xpy_hold *h, PyObject *obj, bool writable,
		 void **addr, size_t *len)
{
	Py_buffer *v;

	if (h->n == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 4;
		Py_buffer *views = NULL;

		if (cap <= PY_SSIZE_T_MAX / sizeof(*views))
			views = PyMem_Realloc(h->views, cap * sizeof(*views));
		if (!views) {
			PyErr_NoMemory();
			return -1;
		}
		h->views = views;
		h->cap = cap;
	}
	v = &h->views[h->n];
	if (PyObject_GetBuffer(obj, v, writable ? PyBUF_WRITABLE :
			       PyBUF_SIMPLE) < 0)
		return -1;
	h->n++;
	*addr = v->buf;
	*len = (size_t)v->len;
	return 0;
}

void xpy_hold_release(struct xpy_hold *h)
{
	for (size_t i = 0; i < h->n; i++)
		PyBuffer_Release(&h->views[i]);
	PyMem_Free(h->views);
	h->views = NULL;
	h->n = h->cap = 0;
}

/*
 * One request from its three parts; @p length may be NULL (the buffer's
 * own length). A READ writes into its source, so a buffer object must be
 * writable then.
 */
static int one_request(struct xfer_request *r, PyObject *src,
		       PyObject *target, PyObject *length, int opcode,
		       int64_t seg, struct xpy_hold *h)
{
	uint64_t u, want = 0;

	*r = (struct xfer_request){ .opcode = opcode, .target_id = seg };
	if (xpy_addr(target, &r->target_offset) < 0)
		return -1;
	if (length && length != Py_None) {
		if (xpy_addr(length, &want) < 0)
			return -1;
	}
	if (!PyObject_CheckBuffer(src)) {
		if (!length || length == Py_None) {
			PyErr_SetString(PyExc_TypeError,
					"an integer source needs a length");
			return -1;
		}
		if (xpy_addr(src, &u) < 0)
			return -1;
		r->source = (void *)(uintptr_t)u;
		r->length = want;
		return 0;
	}
	if (xpy_hold_add(h, src, opcode == XFER_READ, &r->source,
			 &r->length) < 0)
		return -1;
	if (length && length != Py_None) {
		if (want > r->length) {
			PyErr_Format(PyExc_ValueError,
				     "length %llu exceeds the buffer's %zu bytes",
				     (unsigned long long)want, r->length);
			return -1;
		}
		r->length = want;
	}
	return 0;
}

/* What a call may take: at most max requests, else XferError err. */
struct limit {
	EngineObject *eng;
	size_t max;
	int err;
};

/* Room for @p n requests, once @p n is known to fit @p lim. */
static struct xfer_request *reqs_alloc(Py_ssize_t n, const struct limit *lim)
{
	struct xfer_request *reqs;
	char what[80];

	if (n == 0) {
		PyErr_SetString(PyExc_ValueError, "no requests");
		return NULL;
	}
	if ((size_t)n > lim->max) {
		snprintf(what, sizeof(what), "%zd requests, room for %zu",
			 n, lim->max);
		xpy_raise(lim->eng, lim->err, what);
		return NULL;
	}
	if ((size_t)n > PY_SSIZE_T_MAX / sizeof(*reqs)) {
		PyErr_NoMemory();
		return NULL;
	}
	reqs = PyMem_Calloc((size_t)n, sizeof(*reqs));
	if (!reqs)
		PyErr_NoMemory();
	return reqs;
}

static struct xfer_request *reqs_lists(PyObject *sources,
				       PyObject *targets, PyObject *lengths,
				       int opcode, int64_t seg,
				       const struct limit *lim, size_t *n,
				       struct xpy_hold *h)
{
	PyObject *fs = NULL, *ft = NULL, *fl = NULL;
	struct xfer_request *reqs = NULL;
	Py_ssize_t len;

	fs = PySequence_Fast(sources, "sources must be a sequence");
	if (!fs)
		goto out;
	ft = PySequence_Fast(targets, "targets must be a sequence");
	if (!ft)
		goto out;
	if (lengths != Py_None) {
		fl = PySequence_Fast(lengths, "lengths must be a sequence");
		if (!fl)
			goto out;
	}
	len = PySequence_Fast_GET_SIZE(fs);
	if (PySequence_Fast_GET_SIZE(ft) != len ||
	    (fl && PySequence_Fast_GET_SIZE(fl) != len)) {
		PyErr_SetString(PyExc_ValueError, "buffers, peer addresses "
				"and lengths differ in size");
		goto out;
	}
	reqs = reqs_alloc(len, lim);
	if (!reqs)
		goto out;
	for (Py_ssize_t i = 0; i < len; i++) {
		if (one_request(&reqs[i], PySequence_Fast_GET_ITEM(fs, i),
				PySequence_Fast_GET_ITEM(ft, i),
				fl ? PySequence_Fast_GET_ITEM(fl, i) : NULL,
				opcode, seg, h) < 0) {
			PyMem_Free(reqs);
			reqs = NULL;
			xpy_hold_release(h);
			goto out;
		}
	}
	*n = (size_t)len;
out:
	Py_XDECREF(fs);
	Py_XDECREF(ft);
	Py_XDECREF(fl);
	return reqs;
}

static struct xfer_request *reqs_pairs(PyObject *pairs, int opcode,
				       int64_t seg, const struct limit *lim,
				       size_t *n, struct xpy_hold *h)
{
	PyObject *fp = PySequence_Fast(pairs, "pairs must be a sequence");
	struct xfer_request *reqs = NULL;
	Py_ssize_t len;

	if (!fp)
		return NULL;
	len = PySequence_Fast_GET_SIZE(fp);
	reqs = reqs_alloc(len, lim);
	for (Py_ssize_t i = 0; reqs && i < len; i++) {
		PyObject *p = PySequence_Fast(PySequence_Fast_GET_ITEM(fp, i),
					      "each pair must be a sequence");
		Py_ssize_t k = p ? PySequence_Fast_GET_SIZE(p) : 0;
		int ret = -1;

		if (p && (k == 2 || k == 3))
			ret = one_request(&reqs[i],
					  PySequence_Fast_GET_ITEM(p, 0),
					  PySequence_Fast_GET_ITEM(p, 1),
					  k == 3 ? PySequence_Fast_GET_ITEM(p, 2)
						 : NULL, opcode, seg, h);
		else if (p)
			PyErr_SetString(PyExc_ValueError, "a pair is (source, "
					"target address[, length])");
		Py_XDECREF(p);
		if (ret < 0) {
			PyMem_Free(reqs);
			reqs = NULL;
			xpy_hold_release(h);
		}
	}
	Py_DECREF(fp);
	if (reqs)
		*n = (size_t)len;
	return reqs;
}

/* The requests of a transfer or submit call: pairs, or Mooncake's three
 * lists. */
static struct xfer_request *reqs_from(PyObject *pairs, PyObject *sources,
				      PyObject *targets, PyObject *lengths,
				      int opcode, long long seg,
				      const struct limit *lim, size_t *n,
				      struct xpy_hold *h)
{
	if (opcode != XFER_READ && opcode != XFER_WRITE) {
		PyErr_SetString(PyExc_ValueError, "opcode is READ or WRITE");
		return NULL;
	}
	if (pairs != Py_None)
		return reqs_pairs(pairs, opcode, seg, lim, n, h);
	if (sources == Py_None || targets == Py_None) {
		PyErr_SetString(PyExc_TypeError,
				"give pairs, or sources and targets");
		return NULL;
	}
	return reqs_lists(sources, targets, lengths, opcode, seg, lim, n, h);
}

/* A notification argument: None or (name, msg). */
static int notify_arg(PyObject *o, const char **name, const char **msg)
{
	*name = *msg = NULL;
	if (o == Py_None)
		return 0;
	if (!PyTuple_Check(o)) { /* PyArg_ParseTuple takes tuples only */
		PyErr_SetString(PyExc_TypeError, "notify is (name, msg)");
		return -1;
	}
	if (!PyArg_ParseTuple(o, "ss;notify is (name, msg)", name, msg))
		return -1;
	return 0;
}

int xpy_transfer_parse(EngineObject *eng, PyObject *args, PyObject *kw,
		       const char *fname, size_t max, int err,
		       struct xpy_transfer *t, struct xpy_hold *h)
{
	const struct limit lim = { .eng = eng, .max = max, .err = err };
	static char *kwlist[] = { "opcode", "segment", "sources", "targets",
				  "lengths", "pairs", "notify", NULL };
	PyObject *sources = Py_None, *targets = Py_None, *lengths = Py_None;
	PyObject *pairs = Py_None, *notify = Py_None;
	long long seg;
	char fmt[64];
	int opcode;

	snprintf(fmt, sizeof(fmt), "iL|OOOO$O:%s", fname);
	if (!PyArg_ParseTupleAndKeywords(args, kw, fmt, kwlist, &opcode, &seg,
					 &sources, &targets, &lengths, &pairs,
					 &notify) ||
	    notify_arg(notify, &t->nname, &t->nmsg) < 0)
		return -1;
	t->reqs = reqs_from(pairs, sources, targets, lengths, opcode, seg,
			    &lim, &t->n, h);
	return t->reqs ? 0 : -1;
}
