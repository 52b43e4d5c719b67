/*
 * The _Engine type: one xfer engine (its own control and worker threads),
 * its configuration, registered memory, open segments and notifications.
 * The blocking calls here release the GIL while they wait; gate.c counts
 * them in and out and closes the engine.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "xfer_py.h"

static PyObject *eng_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	xpy_state *st = xpy_state_of(type);
	EngineObject *self;

	(void)args;
	(void)kw;
	if (!st)
		return NULL;
	self = (EngineObject *)type->tp_alloc(type, 0);
	if (!self)
		return NULL;
	self->st = st;
	xpy_gate_init(&self->g);
	self->regs = PyDict_New();
	if (!self->regs) {
		Py_DECREF(self);
		return NULL;
	}
	return (PyObject *)self;
}

/* One configuration key: str, int or bool values as text, None the
 * default. */
static int config_set(xpy_state *st, struct xfer_config *cfg, PyObject *key,
		      PyObject *val)
{
	const char *k = PyUnicode_AsUTF8(key), *v = NULL;
	PyObject *text = NULL;
	char what[160];
	int ret;

	if (!k)
		return -1;
	if (PyBool_Check(val))
		v = val == Py_True ? "true" : "false";
	else if (val != Py_None) {
		text = PyObject_Str(val);
		if (!text || !(v = PyUnicode_AsUTF8(text))) {
			Py_XDECREF(text);
			return -1;
		}
	}
	ret = xfer_config_set(cfg, k, v);
	Py_XDECREF(text);
	if (!ret)
		return 0;
	snprintf(what, sizeof(what), ret == -ENOENT ?
		 "unknown configuration key %.100s" :
		 "configuration key %.100s: bad value", k);
	xpy_raise_st(st, ret, what);
	return -1;
}

struct xfer_config *xpy_config(xpy_state *st, PyObject *config)
{
	struct xfer_config *cfg;
	PyObject *key, *val;
	Py_ssize_t pos = 0;

	if (config != Py_None && !PyDict_Check(config)) {
		PyErr_SetString(PyExc_TypeError, "config must be a dict");
		return NULL;
	}
	cfg = xfer_config_new();
	if (!cfg) {
		xpy_raise_st(st, -errno, "configuration from the environment");
		return NULL;
	}
	while (config != Py_None && PyDict_Next(config, &pos, &key, &val)) {
		if (config_set(st, cfg, key, val) < 0) {
			xfer_config_free(cfg);
			return NULL;
		}
	}
	return cfg;
}

static int eng_init(EngineObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "config", NULL };
	PyObject *config = Py_None;
	struct xfer_config *cfg;
	struct xfer_engine *e;
	int err = 0;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:_Engine", kwlist,
					 &config))
		return -1;
	if (self->g.state != XPY_NEW) {
		PyErr_SetString(PyExc_RuntimeError, "engine already started");
		return -1;
	}
	cfg = xpy_config(self->st, config);
	if (!cfg)
		return -1;
	xpy_engine_set_state(self, XPY_STARTING); /* checked and set with the GIL */
	Py_BEGIN_ALLOW_THREADS
	e = xfer_engine_new(cfg);
	if (!e)
		err = errno;
	Py_END_ALLOW_THREADS
	xfer_config_free(cfg);
	self->e = e;
	xpy_engine_set_state(self, e ? XPY_OPEN : XPY_NEW);
	if (!e) {
		xpy_raise(self, -err, "engine start");
		return -1;
	}
	return 0;
}

PyDoc_STRVAR(close_doc,
"close()\n\n"
"Cancel what is in flight and free the engine: its listeners, threads\n"
"and connections go; registered memory is forgotten (it stays yours).\n"
"Pending futures fail. From the call on, new calls from other threads\n"
"raise ValueError; those in flight are waited for (without the GIL).\n"
"Idempotent: a second close() returns once the first is done.");

static PyObject *eng_close(EngineObject *self, PyObject *unused)
{
	(void)unused;
	xpy_engine_close(self);
	Py_RETURN_NONE;
}

static int eng_traverse(EngineObject *self, visitproc visit, void *arg)
{
	Py_VISIT(Py_TYPE(self));
	Py_VISIT(self->regs);
	Py_VISIT(self->on_notify);
	return 0;
}

static int eng_clear(EngineObject *self)
{
	Py_CLEAR(self->on_notify);
	return 0;
}

static void eng_dealloc(EngineObject *self)
{
	PyTypeObject *tp = Py_TYPE(self);

	PyObject_GC_UnTrack(self);
	if (self->g.state == XPY_OPEN) {
#if PY_VERSION_HEX >= 0x030C0000
		PyObject *exc = PyErr_GetRaisedException();

		xpy_engine_close(self);
		PyErr_SetRaisedException(exc);
#else
		PyObject *t, *v, *tb;

		PyErr_Fetch(&t, &v, &tb);
		xpy_engine_close(self);
		PyErr_Restore(t, v, tb);
#endif
	}
	eng_clear(self);
	Py_CLEAR(self->regs);
	xpy_gate_fini(&self->g);
	tp->tp_free(self);
	Py_DECREF(tp);
}

/* The engine's attributes, by the closure of their getter. */
enum eng_attr { ATTR_NAME, ATTR_RPC_PORT, ATTR_LAST_ERROR, ATTR_CPU };

static PyObject *eng_attr(EngineObject *self, void *c)
{
	struct xfer_engine *e = xpy_engine_get(self);
	PyObject *r = NULL;

	if (!e)
		return NULL;
	switch ((enum eng_attr)(intptr_t)c) {
	case ATTR_NAME:
		r = PyUnicode_FromString(xfer_engine_name(e));
		break;
	case ATTR_RPC_PORT:
		r = PyLong_FromLong(xfer_engine_rpc_port(e));
		break;
	case ATTR_LAST_ERROR:
		r = PyUnicode_FromString(xfer_engine_last_error(e));
		break;
	case ATTR_CPU:
		r = PyFloat_FromDouble(xfer_engine_cpu_seconds(e));
		break;
	}
	xpy_engine_put(self);
	return r;
}

static PyObject *eng_get_closed(EngineObject *self, void *c)
{
	(void)c;
	return PyBool_FromLong(self->g.state >= XPY_CLOSING);
}

static PyObject *eng_cpu_seconds(EngineObject *self, PyObject *unused)
{
	(void)unused;
	return eng_attr(self, (void *)(intptr_t)ATTR_CPU);
}

PyDoc_STRVAR(device_stats_doc,
"device_stats() -> [(name, bytes), ...]\n\n"
"The RDMA devices the engine opened, in order, with the bytes it moved\n"
"through each as the initiator of completed slices; [] without RDMA.");

static PyObject *eng_device_stats(EngineObject *self, PyObject *unused)
{
	struct xfer_engine *e = xpy_engine_get(self);
	PyObject *list, *t;
	const char *name;
	uint64_t bytes;

	(void)unused;
	if (!e)
		return NULL;
	list = PyList_New(0);
	for (size_t i = 0; list &&
	     xfer_engine_device_stats(e, i, &name, &bytes) == 0; i++) {
		t = Py_BuildValue("(sK)", name, (unsigned long long)bytes);
		if (!t || PyList_Append(list, t) < 0)
			Py_CLEAR(list);
		Py_XDECREF(t);
	}
	xpy_engine_put(self);
	return list;
}

static void capsule_release(PyObject *cap)
{
	Py_buffer *v = PyCapsule_GetPointer(cap, "xfer.view");

	PyBuffer_Release(v);
	PyMem_Free(v);
}

/* Keep the view @p h holds (one, or none) in regs[addr] until unregister;
 * @return the address as an int, or NULL. */
PyObject *xpy_reg_keep(EngineObject *eng, uint64_t addr, struct xpy_hold *h)
{
	PyObject *key = PyLong_FromUnsignedLongLong(addr), *cap;
	Py_buffer *v;

	if (!key)
		return NULL;
	if (!h->n)
		return key;
	v = PyMem_Malloc(sizeof(*v));
	if (!v) {
		Py_DECREF(key);
		return PyErr_NoMemory();
	}
	*v = h->views[0];
	h->n = 0; /* the capsule owns the view now */
	cap = PyCapsule_New(v, "xfer.view", capsule_release);
	if (!cap) {
		PyBuffer_Release(v);
		PyMem_Free(v);
		Py_DECREF(key);
		return NULL;
	}
	if (PyDict_SetItem(eng->regs, key, cap) < 0)
		Py_CLEAR(key);
	Py_DECREF(cap);
	return key;
}

/* (obj, length) -> an address and length; a buffer object's view goes to
 * @p h. */
int xpy_reg_args(PyObject *obj, PyObject *length, bool writable,
		 struct xpy_hold *h, void **addr, size_t *len)
{
	uint64_t u, want = 0;

	if (length != Py_None && xpy_addr(length, &want) < 0)
		return -1;
	if (!PyObject_CheckBuffer(obj)) {
		if (length == Py_None) {
			PyErr_SetString(PyExc_TypeError,
					"an integer address needs a length");
			return -1;
		}
		if (xpy_addr(obj, &u) < 0)
			return -1;
		*addr = (void *)(uintptr_t)u;
		*len = (size_t)want;
		return 0;
	}
	if (xpy_hold_add(h, obj, writable, addr, len) < 0)
		return -1;
	if (length != Py_None) {
		if (want > *len) {
			PyErr_SetString(PyExc_ValueError,
					"length exceeds the buffer");
			xpy_hold_release(h);
			return -1;
		}
		*len = (size_t)want;
	}
	return 0;
}

PyDoc_STRVAR(register_doc,
"register(obj, length=None, location='*', remote_access=True) -> int\n\n"
"Register memory (Mooncake's registerLocalMemory) and return its\n"
"address. @obj is an integer address (then @length, in bytes, is\n"
"needed) or a writable buffer object, kept exported (not resizable)\n"
"until unregister(). Waits, without the GIL, until peers can see it.\n"
"Raises XferError: EINVAL, EEXIST (overlaps a registered buffer),\n"
"ENOMEM.");

static PyObject *eng_register(EngineObject *self, PyObject *args,
			      PyObject *kw)
{
	static char *kwlist[] = { "obj", "length", "location",
				  "remote_access", NULL };
	PyObject *obj, *length = Py_None, *r = NULL;
	const char *loc = "*";
	struct xpy_hold h = { 0 };
	struct xfer_engine *e;
	int ra = 1, ret;
	size_t len;
	void *addr;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "O|Osp:register", kwlist,
					 &obj, &length, &loc, &ra))
		return NULL;
	if (xpy_reg_args(obj, length, ra, &h, &addr, &len) < 0)
		return NULL;
	e = xpy_engine_get(self);
	if (!e)
		goto out;
	Py_BEGIN_ALLOW_THREADS
	ret = xfer_register(e, addr, len, loc, ra);
	Py_END_ALLOW_THREADS
	if (ret)
		xpy_raise(self, ret, "register");
	else
		r = xpy_reg_keep(self, (uintptr_t)addr, &h);
	xpy_engine_put(self);
out:
	xpy_hold_release(&h);
	return r;
}

PyDoc_STRVAR(unregister_doc,
"unregister(addr)\n\n"
"Unregister the buffer that starts at @addr (an int, or the buffer object\n"
"given to register()) and wait until peers see it gone. Raises XferError:\n"
"ENOENT (no buffer starts there), EBUSY (a transfer uses it).");

static PyObject *eng_unregister(EngineObject *self, PyObject *obj)
{
	struct xfer_engine *e;
	PyObject *key;
	uint64_t addr;
	int ret;

	if (!PyObject_CheckBuffer(obj)) {
		if (xpy_addr(obj, &addr) < 0)
			return NULL;
	} else {
		Py_buffer v;

		if (PyObject_GetBuffer(obj, &v, PyBUF_SIMPLE) < 0)
			return NULL;
		addr = (uintptr_t)v.buf;
		PyBuffer_Release(&v);
	}
	e = xpy_engine_get(self);
	if (!e)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	ret = xfer_unregister(e, (void *)(uintptr_t)addr);
	Py_END_ALLOW_THREADS
	xpy_engine_put(self);
	if (ret)
		return xpy_raise(self, ret, "unregister");
	key = PyLong_FromUnsignedLongLong(addr);
	if (!key)
		return NULL;
	if (PyDict_DelItem(self->regs, key) < 0)
		PyErr_Clear(); /* registered by address: nothing kept */
	Py_DECREF(key);
	Py_RETURN_NONE;
}

PyDoc_STRVAR(open_doc,
"open_segment_sync(name) -> int\n\n"
"Open a segment by name (Mooncake's openSegment; `host:port` in p2p\n"
"mode) and return its id, waiting without the GIL. Raises XferError:\n"
"ECONNREFUSED, ETIMEDOUT, EHOSTUNREACH, ENOENT, EPROTO, EINVAL.");

static PyObject *eng_open_sync(EngineObject *self, PyObject *arg)
{
	const char *name = PyUnicode_AsUTF8(arg);
	struct xfer_engine *e;
	int64_t id;

	if (!name)
		return NULL;
	e = xpy_engine_get(self);
	if (!e)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	id = xfer_segment_open(e, name);
	Py_END_ALLOW_THREADS
	xpy_engine_put(self);
	if (id < 0)
		return xpy_raise(self, (int)id, "open segment");
	return PyLong_FromLongLong(id);
}

/* Calls on a segment id that return 0 or -errno. */
static PyObject *seg_call(EngineObject *self, PyObject *arg, bool refresh,
			  const char *what)
{
	long long id = PyLong_AsLongLong(arg);
	struct xfer_engine *e;
	int ret;

	if (id == -1 && PyErr_Occurred())
		return NULL;
	e = xpy_engine_get(self);
	if (!e)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	ret = refresh ? xfer_segment_refresh(e, id) :
			xfer_segment_close(e, id);
	Py_END_ALLOW_THREADS
	xpy_engine_put(self);
	if (ret)
		return xpy_raise(self, ret, what);
	Py_RETURN_NONE;
}

PyDoc_STRVAR(seg_close_doc,
"segment_close(id)\n\nClose a segment id. Raises XferError: ENOENT, EBUSY.");

static PyObject *eng_seg_close(EngineObject *self, PyObject *arg)
{
	return seg_call(self, arg, false, "close segment");
}

PyDoc_STRVAR(seg_refresh_doc,
"segment_refresh_sync(id)\n\n"
"Fetch the descriptor of an open segment again, waiting without the GIL.\n"
"Raises XferError: ENOENT, or the fetch's error.");

static PyObject *eng_seg_refresh(EngineObject *self, PyObject *arg)
{
	return seg_call(self, arg, true, "refresh segment");
}

PyDoc_STRVAR(seg_buffers_doc,
"segment_buffers(id) -> [(addr, length, location), ...]\n\n"
"The buffers of an open segment: the address peers use as a target,\n"
"the length in bytes, the location. Raises XferError ENOENT.");

static PyObject *eng_seg_buffers(EngineObject *self, PyObject *arg)
{
	long long id = PyLong_AsLongLong(arg);
	struct xfer_engine *e;
	PyObject *list, *t;
	const char *loc;
	uint64_t addr, len;

	if (id == -1 && PyErr_Occurred())
		return NULL;
	list = PyList_New(0);
	if (!list)
		return NULL;
	e = xpy_engine_get(self);
	if (!e) {
		Py_DECREF(list);
		return NULL;
	}
	for (size_t i = 0;; i++) {
		if (xfer_segment_buffer(e, id, i, &addr, &len, &loc))
			break; /* past the last one, or an unknown id */
		t = Py_BuildValue("(KKs)", (unsigned long long)addr,
				  (unsigned long long)len, loc ? loc : "");
		if (!t || PyList_Append(list, t) < 0) {
			Py_XDECREF(t);
			Py_CLEAR(list);
			break;
		}
		Py_DECREF(t);
	}
	xpy_engine_put(self);
	return list;
}

PyDoc_STRVAR(notify_sync_doc,
"notify_sync(segment_id, name, msg)\n\n"
"Send a notification to the owner of an open segment (Mooncake's Notify\n"
"message) and wait, without the GIL, until it is queued there. Raises\n"
"XferError: ENOENT, EMSGSIZE, ENOBUFS (the peer's queue is full), or\n"
"the connection's error.");

static PyObject *eng_notify_sync(EngineObject *self, PyObject *args)
{
	const char *name, *msg;
	struct xfer_engine *e;
	long long id;
	int ret;

	if (!PyArg_ParseTuple(args, "Lss:notify_sync", &id, &name, &msg))
		return NULL;
	e = xpy_engine_get(self);
	if (!e)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	ret = xfer_notify(e, id, name, msg);
	Py_END_ALLOW_THREADS
	xpy_engine_put(self);
	if (ret)
		return xpy_raise(self, ret, "notify");
	Py_RETURN_NONE;
}

PyDoc_STRVAR(notify_pop_doc,
"notify_pop() -> (name, msg) or None\n\n"
"Take the oldest queued notification (Mooncake's getNotifsFromEngine).");

static PyObject *eng_notify_pop(EngineObject *self, PyObject *unused)
{
	struct xfer_engine *e = xpy_engine_get(self);
	char *name, *msg;
	PyObject *r;
	int ret;

	(void)unused;
	if (!e)
		return NULL;
	ret = xfer_engine_notify_pop(e, &name, &msg);
	xpy_engine_put(self);
	if (ret == -EAGAIN)
		Py_RETURN_NONE;
	if (ret)
		return xpy_raise(self, ret, "notify_pop");
	r = Py_BuildValue("(ss)", name, msg);
	free(name);
	free(msg);
	return r;
}

static PyMethodDef eng_methods[] = {
	{ "close", (PyCFunction)eng_close, METH_NOARGS, close_doc },
	{ "cpu_seconds", (PyCFunction)eng_cpu_seconds, METH_NOARGS,
	  "cpu_seconds() -> float\n\nCPU seconds the engine's threads used." },
	{ "device_stats", (PyCFunction)eng_device_stats, METH_NOARGS,
	  device_stats_doc },
	{ "register", (PyCFunction)(void (*)(void))eng_register,
	  METH_VARARGS | METH_KEYWORDS, register_doc },
	{ "unregister", (PyCFunction)eng_unregister, METH_O, unregister_doc },
	{ "open_segment_sync", (PyCFunction)eng_open_sync, METH_O, open_doc },
	{ "segment_close", (PyCFunction)eng_seg_close, METH_O, seg_close_doc },
	{ "segment_refresh_sync", (PyCFunction)eng_seg_refresh, METH_O,
	  seg_refresh_doc },
	{ "segment_buffers", (PyCFunction)eng_seg_buffers, METH_O,
	  seg_buffers_doc },
	{ "notify_sync", (PyCFunction)eng_notify_sync, METH_VARARGS,
	  notify_sync_doc },
	{ "notify_pop", (PyCFunction)eng_notify_pop, METH_NOARGS,
	  notify_pop_doc },
	{ "transfer", (PyCFunction)(void (*)(void))xpy_engine_transfer,
	  METH_VARARGS | METH_KEYWORDS, xpy_transfer_doc },
	{ "batch", (PyCFunction)(void (*)(void))xpy_engine_batch,
	  METH_VARARGS | METH_KEYWORDS, xpy_batch_doc },
	{ "_aio_fileno", (PyCFunction)xpy_aio_fileno, METH_NOARGS, NULL },
	{ "_aio_drain", (PyCFunction)xpy_aio_drain, METH_NOARGS, NULL },
	{ "_aio_submit", (PyCFunction)(void (*)(void))xpy_aio_submit,
	  METH_VARARGS | METH_KEYWORDS, NULL },
	{ "_aio_open", (PyCFunction)xpy_aio_open, METH_VARARGS, NULL },
	{ "_aio_notify", (PyCFunction)xpy_aio_notify, METH_VARARGS, NULL },
	{ "_aio_register", (PyCFunction)(void (*)(void))xpy_aio_register,
	  METH_VARARGS | METH_KEYWORDS, NULL },
	{ "_aio_refresh", (PyCFunction)xpy_aio_refresh, METH_VARARGS, NULL },
	{ "_aio_listen", (PyCFunction)xpy_aio_listen, METH_O, NULL },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef eng_getset[] = {
	{ "name", (getter)eng_attr, NULL,
	  "Name of the engine's own segment (`host:port` in p2p mode).",
	  (void *)(intptr_t)ATTR_NAME },
	{ "rpc_port", (getter)eng_attr, NULL,
	  "The handshake port the engine listens on.",
	  (void *)(intptr_t)ATTR_RPC_PORT },
	{ "last_error", (getter)eng_attr, NULL,
	  "The engine's message for its last error.",
	  (void *)(intptr_t)ATTR_LAST_ERROR },
	{ "closed", (getter)eng_get_closed, NULL,
	  "Whether close() has begun.", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PyType_Slot eng_slots[] = {
	{ Py_tp_doc, "_Engine(config=None): an xfer engine with its own "
		     "threads; config maps configuration keys to values." },
	{ Py_tp_new, eng_new },
	{ Py_tp_init, eng_init },
	{ Py_tp_dealloc, eng_dealloc },
	{ Py_tp_traverse, eng_traverse },
	{ Py_tp_clear, eng_clear },
	{ Py_tp_methods, eng_methods },
	{ Py_tp_getset, eng_getset },
	{ 0, NULL },
};

PyType_Spec xpy_engine_spec = {
	.name = "xfer._xfer._Engine",
	.basicsize = sizeof(EngineObject),
	.flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE |
		 Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
	.slots = eng_slots,
};
