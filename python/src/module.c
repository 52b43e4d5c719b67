/*
 * xfer._xfer: the module, its state (heap types and exceptions, per
 * module object: multi-phase initialisation, as CPython's _sqlite), its
 * constants, and the raw memory helpers the Mooncake-compatible layer
 * exposes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "xfer_py.h"

/* errno of a batch that did not complete, by its outcome */
static int outcome_errno(enum xfer_status st)
{
	switch (st) {
	case XFER_INVALID:
		return EINVAL;
	case XFER_CANCELED:
		return ECANCELED;
	case XFER_TIMEOUT:
		return ETIMEDOUT;
	default:
		return EIO;
	}
}

/* An instance of @p type: (errno, "what: strerror (engine's message)");
 * @p eng may be NULL (no message). */
static PyObject *error_new(PyObject *type, EngineObject *eng, int err,
			   const char *what)
{
	bool held = eng && xpy_engine_try(eng);
	const char *last = held ? xfer_engine_last_error(eng->e) : NULL;
	PyObject *msg;

	if (err < 0)
		err = -err;
	if (last && *last)
		msg = PyUnicode_FromFormat("%s: %s (%s)", what, strerror(err),
					   last);
	else
		msg = PyUnicode_FromFormat("%s: %s", what, strerror(err));
	if (held)
		xpy_engine_put(eng);
	if (!msg)
		return NULL;
	/* the module's state is cleared only with its last object, but a
	 * cycle collected at exit may clear it first */
	return PyObject_CallFunction(type ? type : PyExc_OSError, "iN", err,
				     msg);
}

PyObject *xpy_error(EngineObject *eng, int err, const char *what)
{
	return error_new(eng->st->XferError, eng, err, what);
}

static PyObject *raise(PyObject *exc)
{
	if (exc) {
		PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
		Py_DECREF(exc);
	}
	return NULL;
}

PyObject *xpy_raise(EngineObject *eng, int err, const char *what)
{
	return raise(xpy_error(eng, err, what));
}

PyObject *xpy_raise_st(xpy_state *st, int err, const char *what)
{
	return raise(error_new(st->XferError, NULL, err, what));
}

/* A TransferError (not raised) with .outcome and .statuses (one status
 * per task, as ints). */
PyObject *xpy_transfer_error(EngineObject *eng, struct xfer_batch *b,
			     enum xfer_status outcome)
{
	PyObject *exc, *statuses = xpy_statuses(b), *o;
	char what[64];

	if (!statuses)
		return NULL;
	snprintf(what, sizeof(what), "transfer %s",
		 xfer_status_str(outcome));
	exc = error_new(eng->st->TransferError, eng, outcome_errno(outcome),
			what);
	o = exc ? PyLong_FromLong(outcome) : NULL;
	if (exc && (!o || PyObject_SetAttrString(exc, "outcome", o) < 0 ||
		    PyObject_SetAttrString(exc, "statuses", statuses) < 0))
		Py_CLEAR(exc);
	Py_XDECREF(o);
	Py_DECREF(statuses);
	return exc;
}

PyDoc_STRVAR(alloc_doc,
"alloc(length) -> int\n\n"
"Allocate @length bytes, page-aligned and not initialised, and return\n"
"their address (free with release()). Raises MemoryError.");

static PyObject *mod_alloc(PyObject *m, PyObject *arg)
{
	uint64_t len;
	void *p;

	(void)m;
	if (xpy_addr(arg, &len) < 0)
		return NULL;
	if (len == 0 || posix_memalign(&p, 4096, (size_t)len))
		return PyErr_NoMemory();
	return PyLong_FromUnsignedLongLong((uintptr_t)p);
}

PyDoc_STRVAR(release_doc,
"release(address)\n\nFree memory that alloc() returned.");

static PyObject *mod_release(PyObject *m, PyObject *arg)
{
	uint64_t addr;

	(void)m;
	if (xpy_addr(arg, &addr) < 0)
		return NULL;
	free((void *)(uintptr_t)addr);
	Py_RETURN_NONE;
}

PyDoc_STRVAR(read_bytes_doc,
"read_bytes(address, length) -> bytes\n\n"
"Copy @length bytes from raw memory at @address into a new bytes object.\n"
"The memory must be mapped: nothing is checked.");

static PyObject *mod_read_bytes(PyObject *m, PyObject *args)
{
	unsigned long long addr;
	Py_ssize_t len;

	(void)m;
	if (!PyArg_ParseTuple(args, "Kn:read_bytes", &addr, &len))
		return NULL;
	if (len < 0) {
		PyErr_SetString(PyExc_ValueError, "negative length");
		return NULL;
	}
	return PyBytes_FromStringAndSize((const char *)(uintptr_t)addr, len);
}

PyDoc_STRVAR(write_bytes_doc,
"write_bytes(address, data, length=None)\n\n"
"Copy the first @length bytes of @data (a bytes-like object; all of it\n"
"by default) to raw memory at @address. Nothing is checked.");

static PyObject *mod_write_bytes(PyObject *m, PyObject *args)
{
	unsigned long long addr;
	Py_ssize_t len = -1;
	Py_buffer data;

	(void)m;
	if (!PyArg_ParseTuple(args, "Ky*|n:write_bytes", &addr, &data, &len))
		return NULL;
	if (len < 0 || len > data.len)
		len = data.len;
	memcpy((void *)(uintptr_t)addr, data.buf, (size_t)len);
	PyBuffer_Release(&data);
	Py_RETURN_NONE;
}

PyDoc_STRVAR(address_of_doc,
"address_of(obj) -> (address, length)\n\n"
"Address and length in bytes of an object with the buffer protocol\n"
"(one contiguous block). The address stays valid only while the object\n"
"lives and is not resized: registering the object keeps it so.");

static PyObject *mod_address_of(PyObject *m, PyObject *obj)
{
	Py_buffer v;
	PyObject *r;

	(void)m;
	if (PyObject_GetBuffer(obj, &v, PyBUF_SIMPLE) < 0)
		return NULL;
	r = Py_BuildValue("(Kn)", (unsigned long long)(uintptr_t)v.buf,
			  v.len);
	PyBuffer_Release(&v);
	return r;
}

static PyMethodDef mod_methods[] = {
	{ "alloc", mod_alloc, METH_O, alloc_doc },
	{ "release", mod_release, METH_O, release_doc },
	{ "read_bytes", mod_read_bytes, METH_VARARGS, read_bytes_doc },
	{ "write_bytes", mod_write_bytes, METH_VARARGS, write_bytes_doc },
	{ "address_of", mod_address_of, METH_O, address_of_doc },
	{ NULL, NULL, 0, NULL },
};

static int add_constants(PyObject *m)
{
	static const struct { const char *name; long v; } c[] = {
		{ "READ", XFER_READ }, { "WRITE", XFER_WRITE },
		{ "WAITING", XFER_WAITING }, { "PENDING", XFER_PENDING },
		{ "INVALID", XFER_INVALID }, { "CANCELED", XFER_CANCELED },
		{ "COMPLETED", XFER_COMPLETED }, { "TIMEOUT", XFER_TIMEOUT },
		{ "FAILED", XFER_FAILED },
	};

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		if (PyModule_AddIntConstant(m, c[i].name, c[i].v) < 0)
			return -1;
	return 0;
}

xpy_state *xpy_state_of(PyTypeObject *type)
{
	PyObject *m = PyType_GetModuleByDef(type, &xpy_module);

	return m ? PyModule_GetState(m) : NULL;
}

static int mod_exec(PyObject *m)
{
	xpy_state *st = PyModule_GetState(m);

	st->EngineType = (PyTypeObject *)PyType_FromModuleAndSpec(
		m, &xpy_engine_spec, NULL);
	st->BatchType = (PyTypeObject *)PyType_FromModuleAndSpec(
		m, &xpy_batch_spec, NULL);
	st->KVType = (PyTypeObject *)PyType_FromModuleAndSpec(
		m, &xpy_kv_spec, NULL);
	st->KVBufferType = (PyTypeObject *)PyType_FromModuleAndSpec(
		m, &xpy_kvbuf_spec, NULL);
	if (!st->EngineType || !st->BatchType || !st->KVType ||
	    !st->KVBufferType)
		return -1;
	st->XferError = PyErr_NewExceptionWithDoc(
		"xfer.XferError",
		"An engine call failed: .errno is the errno (ECONNREFUSED, "
		"EINVAL ...), .strerror says what failed, with the engine's "
		"own message.", PyExc_OSError, NULL);
	if (!st->XferError)
		return -1;
	st->TransferError = PyErr_NewExceptionWithDoc(
		"xfer.TransferError",
		"A batch did not complete: .outcome is its status (FAILED, "
		"TIMEOUT, INVALID or CANCELED), .statuses the status of each "
		"task; .errno EIO, ETIMEDOUT, EINVAL or ECANCELED.",
		st->XferError, NULL);
	if (!st->TransferError ||
	    PyModule_AddObjectRef(m, "XferError", st->XferError) < 0 ||
	    PyModule_AddObjectRef(m, "TransferError", st->TransferError) < 0 ||
	    PyModule_AddType(m, st->EngineType) < 0 ||
	    PyModule_AddType(m, st->BatchType) < 0 ||
	    PyModule_AddType(m, st->KVType) < 0 ||
	    PyModule_AddType(m, st->KVBufferType) < 0 || add_constants(m) < 0)
		return -1;
	return 0;
}

static int mod_traverse(PyObject *m, visitproc visit, void *arg)
{
	xpy_state *st = PyModule_GetState(m);

	Py_VISIT(st->EngineType);
	Py_VISIT(st->BatchType);
	Py_VISIT(st->KVType);
	Py_VISIT(st->KVBufferType);
	Py_VISIT(st->XferError);
	Py_VISIT(st->TransferError);
	return 0;
}

static int mod_clear(PyObject *m)
{
	xpy_state *st = PyModule_GetState(m);

	Py_CLEAR(st->EngineType);
	Py_CLEAR(st->BatchType);
	Py_CLEAR(st->KVType);
	Py_CLEAR(st->KVBufferType);
	Py_CLEAR(st->XferError);
	Py_CLEAR(st->TransferError);
	return 0;
}

static void mod_free(void *m)
{
	mod_clear(m);
}

static PyModuleDef_Slot mod_slots[] = {
	{ Py_mod_exec, mod_exec },
	{ 0, NULL },
};

struct PyModuleDef xpy_module = {
	PyModuleDef_HEAD_INIT,
	.m_name = "xfer._xfer",
	.m_doc = "The C core of the xfer package: engines, batches, store "
		 "clients and the completion queues that asyncio waits on.",
	.m_size = sizeof(xpy_state),
	.m_methods = mod_methods,
	.m_slots = mod_slots,
	.m_traverse = mod_traverse,
	.m_clear = mod_clear,
	.m_free = mod_free,
};

PyMODINIT_FUNC PyInit__xfer(void)
{
	return PyModuleDef_Init(&xpy_module);
}
