/*
 * The _KV type: one client of the store (include/xfer/store.h) with an
 * engine of its own, the calls it runs (store_call.c) counted in and out
 * on its gate, and close(); and the KVBuffer type, memory a fetch read an
 * object into (Mooncake's BufferHandle).
 *
 * Threads: any thread may call; a call releases the GIL while it waits.
 * close() refuses new calls, waits (without the GIL) until every call in
 * flight has ended, blocking ones and those with a future alike, and only
 * then frees the client (xfer_kv_free), so no chain of the client's calls
 * ever runs into a freed client.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "xfer_py.h"

bool xpy_kv_enter(KVObject *kv)
{
	return xpy_gate_enter(&kv->g, "store");
}

void xpy_kv_leave(KVObject *kv)
{
	xpy_gate_leave(&kv->g);
}

/* ---- life --------------------------------------------------------------- */

static PyObject *kv_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
	xpy_state *st = xpy_state_of(type);
	KVObject *self;

	(void)args;
	(void)kw;
	if (!st)
		return NULL;
	self = (KVObject *)type->tp_alloc(type, 0);
	if (!self)
		return NULL;
	self->st = st;
	xpy_gate_init(&self->g);
	return (PyObject *)self;
}

static int kv_init(KVObject *self, PyObject *args, PyObject *kw)
{
	static char *kwlist[] = { "config", "master", "segment_size",
				  "buffer_size", NULL };
	PyObject *config;
	const char *master;
	unsigned long long seg, buf;
	struct xfer_config *cfg;
	struct xfer_kv *k;
	int err = 0;

	if (!PyArg_ParseTupleAndKeywords(args, kw, "OsKK:_KV", kwlist,
					 &config, &master, &seg, &buf))
		return -1;
	if (self->g.state != XPY_NEW) {
		PyErr_SetString(PyExc_RuntimeError, "already set up");
		return -1;
	}
	cfg = xpy_config(self->st, config);
	if (!cfg)
		return -1;
	xpy_gate_set(&self->g, XPY_STARTING);
	Py_BEGIN_ALLOW_THREADS
	k = xfer_kv_new(NULL, cfg, master, seg, buf);
	if (!k)
		err = errno;
	Py_END_ALLOW_THREADS
	xfer_config_free(cfg);
	self->k = k;
	xpy_gate_set(&self->g, k ? XPY_OPEN : XPY_NEW);
	if (!k) {
		xpy_raise_st(self->st, err, "store client");
		return -1;
	}
	return 0;
}

/* Refuse new calls, wait for those in flight, free the client. A close
 * while another runs waits for that one. With the GIL; lets it go. */
static void kv_close(KVObject *self)
{
	Py_BEGIN_ALLOW_THREADS
	if (xpy_gate_close_begin(&self->g) && xpy_gate_idle(&self->g, NULL)) {
		xfer_kv_free(self->k);
		self->k = NULL;
		xpy_gate_set(&self->g, XPY_CLOSED);
	}
	Py_END_ALLOW_THREADS
}

PyDoc_STRVAR(kv_close_doc,
"close()\n\n"
"Refuse new calls, wait for every call in flight to end (the futures of\n"
"those with one are settled by the next drain), then unmount the\n"
"segment and free the client and its engine: objects whose replicas\n"
"lay only in this client's segment are gone. Idempotent.");

static PyObject *kv_close_m(KVObject *self, PyObject *unused)
{
	(void)unused;
	kv_close(self);
	Py_RETURN_NONE;
}

static int kv_traverse(KVObject *self, visitproc visit, void *arg)
{
	Py_VISIT(Py_TYPE(self));
	return 0;
}

static void kv_dealloc(KVObject *self)
{
	PyTypeObject *tp = Py_TYPE(self);

	PyObject_GC_UnTrack(self);
	if (self->g.state == XPY_OPEN) {
		PyObject *t, *v, *tb;

		PyErr_Fetch(&t, &v, &tb);
		kv_close(self);
		PyErr_Restore(t, v, tb);
	}
	xpy_cq_free(self->cq);
	xpy_gate_fini(&self->g);
	tp->tp_free(self);
	Py_DECREF(tp);
}

/* ---- small calls -------------------------------------------------------- */

static PyObject *kv_healthy(KVObject *self, PyObject *unused)
{
	int yes;

	(void)unused;
	if (!xpy_kv_enter(self)) {
		PyErr_Clear();
		Py_RETURN_FALSE;
	}
	yes = xfer_kv_healthy(self->k);
	xpy_kv_leave(self);
	return PyBool_FromLong(yes);
}

static PyObject *kv_set_root_fs_dir(KVObject *self, PyObject *arg)
{
	const char *dir = PyUnicode_AsUTF8(arg);
	int ret;

	if (!dir || !xpy_kv_enter(self))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	ret = xfer_kv_set_root_fs_dir(self->k, dir);
	Py_END_ALLOW_THREADS
	xpy_kv_leave(self);
	return PyLong_FromLong(ret);
}

static PyObject *kv_get_name(KVObject *self, void *c)
{
	PyObject *r;

	(void)c;
	if (!xpy_kv_enter(self))
		return NULL;
	r = PyUnicode_FromString(xfer_engine_name(xfer_kv_engine(self->k)));
	xpy_kv_leave(self);
	return r;
}

PyDoc_STRVAR(kv_register_doc,
"register_buffer(address, length) -> int\n\n"
"Register @length bytes at @address with the engine for the zero-copy\n"
"calls (xfer_kv_register_buffer): 0, or a negative errno.");

static PyObject *kv_register(KVObject *self, PyObject *args)
{
	PyObject *a, *l;
	uint64_t addr, len;
	int r;

	if (!PyArg_ParseTuple(args, "OO:register_buffer", &a, &l) ||
	    xpy_addr(a, &addr) < 0 || xpy_addr(l, &len) < 0 ||
	    !xpy_kv_enter(self))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	r = xfer_kv_register_buffer(self->k, (void *)(uintptr_t)addr,
				    (size_t)len);
	Py_END_ALLOW_THREADS
	xpy_kv_leave(self);
	return PyLong_FromLong(r);
}

PyDoc_STRVAR(kv_mount_file_doc,
"mount_file(path, length=0) -> int\n\n"
"Register the file at @path (@length bytes, 0: its size) as the first\n"
"file of the client's engine and lend it to the store as an SSD segment\n"
"(xfer_register_file, xfer_kv_mount_file): 0, or a negative errno (the\n"
"file unregistered again).");

/* The client's own engine has no other file: this one starts at 0. */
static int mount_file(struct xfer_kv *k, const char *path, uint64_t len)
{
	struct xfer_engine *e = xfer_kv_engine(k);
	struct stat st;
	int r;

	if (!len) {
		if (stat(path, &st))
			return -errno;
		len = (uint64_t)st.st_size;
	}
	r = xfer_register_file(e, path, len, NULL);
	if (r)
		return r;
	r = xfer_kv_mount_file(k, 0, len);
	if (r)
		xfer_unregister_file(e, path);
	return r;
}

static PyObject *kv_mount_file(KVObject *self, PyObject *args)
{
	unsigned long long len = 0;
	const char *path;
	int r;

	if (!PyArg_ParseTuple(args, "s|K:mount_file", &path, &len) ||
	    !xpy_kv_enter(self))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	r = mount_file(self->k, path, len);
	Py_END_ALLOW_THREADS
	xpy_kv_leave(self);
	return PyLong_FromLong(r);
}

PyDoc_STRVAR(kv_mount_segment_doc,
"mount_segment(address, length) -> int\n\n"
"Register @length bytes at @address with the engine and lend them to the\n"
"store as one more DRAM segment (xfer_kv_mount_segment): 0, a store\n"
"error code (-600, -900 ...) or a negative errno.");

PyDoc_STRVAR(kv_unmount_segment_doc,
"unmount_segment(address, length) -> int\n\n"
"Unmount and unregister a segment of mount_segment()\n"
"(xfer_kv_unmount_segment): as mount_segment().");

static PyObject *kv_segment(KVObject *self, PyObject *args, bool mount)
{
	PyObject *a, *l;
	uint64_t addr, len;
	int r;

	if (!PyArg_ParseTuple(args, "OO", &a, &l) ||
	    xpy_addr(a, &addr) < 0 || xpy_addr(l, &len) < 0 ||
	    !xpy_kv_enter(self))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	r = (mount ? xfer_kv_mount_segment : xfer_kv_unmount_segment)(
		self->k, (void *)(uintptr_t)addr, (size_t)len);
	Py_END_ALLOW_THREADS
	xpy_kv_leave(self);
	return PyLong_FromLong(r);
}

static PyObject *kv_mount_segment(KVObject *self, PyObject *args)
{
	return kv_segment(self, args, true);
}

static PyObject *kv_unmount_segment(KVObject *self, PyObject *args)
{
	return kv_segment(self, args, false);
}

PyDoc_STRVAR(kv_unregister_doc,
"unregister_buffer(address) -> int\n\n"
"Unregister memory of register_buffer(): 0, or a negative errno.");

static PyObject *kv_unregister(KVObject *self, PyObject *a)
{
	uint64_t addr;
	int r;

	if (xpy_addr(a, &addr) < 0 || !xpy_kv_enter(self))
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	r = xfer_kv_unregister_buffer(self->k, (void *)(uintptr_t)addr);
	Py_END_ALLOW_THREADS
	xpy_kv_leave(self);
	return PyLong_FromLong(r);
}

static PyObject *kv_fileno(KVObject *self, PyObject *unused)
{
	(void)unused;
	if (!self->cq && !(self->cq = xpy_cq_new()))
		return NULL;
	return PyLong_FromLong(xpy_cq_fd(self->cq));
}

static PyObject *kv_drain(KVObject *self, PyObject *unused)
{
	(void)unused;
	xpy_kv_drain(self);
	Py_RETURN_NONE;
}

/* ---- the calls of store_call.c ------------------------------------------ */

#define KV_CALL(fn, kind)                                                   \
	static PyObject *fn(KVObject *self, PyObject *args, PyObject *kw)   \
	{                                                                   \
		return xpy_kv_call(self, kind, args, kw);                   \
	}

KV_CALL(kv_put, XPY_KV_PUT)
KV_CALL(kv_get, XPY_KV_GET)
KV_CALL(kv_fetch, XPY_KV_FETCH)
KV_CALL(kv_exist, XPY_KV_EXIST)
KV_CALL(kv_size, XPY_KV_SIZE)
KV_CALL(kv_remove, XPY_KV_REMOVE)
KV_CALL(kv_remove_all, XPY_KV_REMOVE_ALL)
KV_CALL(kv_get_version, XPY_KV_GETV)
KV_CALL(kv_sync, XPY_KV_SYNC)
KV_CALL(kv_remove_by_regex, XPY_KV_REMOVE_REGEX)
KV_CALL(kv_replica_desc, XPY_KV_DESC)
KV_CALL(kv_replica_clear, XPY_KV_REPLICA_CLEAR)
KV_CALL(kv_replicate, XPY_KV_REPLICATE)
KV_CALL(kv_query_task, XPY_KV_QUERY_TASK)
KV_CALL(kv_create_task, XPY_KV_CREATE_TASK)

PyDoc_STRVAR(kv_put_doc,
"put(keys, parts, counts=None, lens=None, rc=None, zero_copy=False,\n"
"    upsert=False, future=None) -> [int]\n\n"
"upsert: replace what is there (xfer_kv_batch_upsert).\n"
"Put one object per key (xfer_kv_batch_put): the concatenation of its\n"
"counts[i] parts (one each without counts); a part is a buffer object\n"
"or an integer address whose length is lens[j]. rc: (replica_num,\n"
"soft_pin, hard_pin, preferred_segment or None[, nof_replica_num]).\n"
"Each key's result: 0\n"
"or a negative ErrorCode (-1 for a local error).");

PyDoc_STRVAR(kv_get_doc,
"get(keys, parts, counts=None, lens=None, zero_copy=False,\n"
"    src_offsets=None, future=None) -> [int]\n\n"
"Read each key into its parts (writable buffer objects or addresses);\n"
"each key's result: its length in bytes, or a negative ErrorCode. With\n"
"src_offsets (one part each): the part's length of bytes from that\n"
"offset of the object (xfer_kv_batch_get_ranges).");

PyDoc_STRVAR(kv_fetch_doc,
"fetch(keys, as_bytes=True, future=None) -> [bytes | KVBuffer | int]\n\n"
"Each key's length (a query each), then one batch reading those found\n"
"into memory of their own: bytes, or KVBuffer objects (as_bytes=False);\n"
"a negative ErrorCode for a key that could not be read.");

PyDoc_STRVAR(kv_keys_doc,
"exist(keys, future=None), size(keys, future=None),\n"
"remove(keys, force=False, future=None) -> [int]\n\n"
"Per key: 1/0 (exist, which leases), the length (size), 0 (remove); or\n"
"a negative ErrorCode.");

PyDoc_STRVAR(kv_remove_all_doc,
"remove_all(force=False, future=None) -> int\n\n"
"Remove every object (leased ones too if force): how many, or a\n"
"negative ErrorCode.");

PyDoc_STRVAR(kv_get_version_doc,
"get_version(key, parts, lens=None, zero_copy=False, min_version=0,\n"
"            future=None) -> (int, int)\n\n"
"Read key into its one part if its version is at least min_version\n"
"(xfer_kv_get_version): (its length or a negative ErrorCode, the\n"
"version read, or with -720 the largest there, or 0).");

PyDoc_STRVAR(kv_sync_doc,
"sync(future=None) -> int\n\n"
"The last version given, after everything the master took before\n"
"(xfer_kv_sync); or a negative ErrorCode.");

PyDoc_STRVAR(kv_remove_by_regex_doc,
"remove_by_regex(pattern, force=False, future=None) -> int\n\n"
"Remove the objects whose keys the POSIX extended pattern matches\n"
"(leased ones too if force): how many, or a negative ErrorCode.");

PyDoc_STRVAR(kv_replica_desc_doc,
"replica_desc(keys, future=None) -> [[(int, int, str)] | int]\n\n"
"Each key's complete replicas (xfer_kv_batch_get_replica_desc, which\n"
"leases): (address, size, endpoint) each, or a negative ErrorCode.");

PyDoc_STRVAR(kv_replica_clear_doc,
"replica_clear(keys, segment=\"\", future=None) -> [int]\n\n"
"Drop each key's replicas in segment (every one: \"\"), of objects this\n"
"client put, not leased (xfer_kv_batch_replica_clear): 0 or a negative\n"
"ErrorCode each.");

PyDoc_STRVAR(kv_replicate_doc,
"replicate(key, replica_num, nof_replica_num=0, future=None) -> int\n\n"
"Bring key to replica_num DRAM and nof_replica_num SSD replicas, up or\n"
"down, as a task of the master's (xfer_kv_replicate): its id (> 0), or\n"
"a negative ErrorCode.");

PyDoc_STRVAR(kv_query_task_doc,
"query_task(task_id, future=None) -> tuple | int\n\n"
"Task task_id's state (xfer_kv_query_task): (id, type, status,\n"
"created_at_ms_epoch, last_updated_at_ms_epoch, assigned_client as\n"
"16 bytes, message), or a negative ErrorCode.");

PyDoc_STRVAR(kv_create_task_doc,
"create_task(keys, source=None, future=None) -> int\n\n"
"keys: [key, target, ...]. A copy of key into the target segments\n"
"(xfer_kv_create_copy_task), or with source the move of its replica\n"
"there into the one target (xfer_kv_create_move_task): the task's id\n"
"(> 0), or a negative ErrorCode.");

#define KW_METHOD(name, fn, doc)                                           \
	{ name, (PyCFunction)(void (*)(void))fn,                            \
	  METH_VARARGS | METH_KEYWORDS, doc }

static PyMethodDef kv_methods[] = {
	{ "close", (PyCFunction)kv_close_m, METH_NOARGS, kv_close_doc },
	{ "healthy", (PyCFunction)kv_healthy, METH_NOARGS,
	  "healthy() -> bool\n\nThe master answered the last ping." },
	{ "set_root_fs_dir", (PyCFunction)kv_set_root_fs_dir, METH_O,
	  "set_root_fs_dir(dir) -> int\n\nThe slower tier, a folder that "
	  "puts with a flush\nmode write to (xfer_kv_set_root_fs_dir): 0 or "
	  "a negative errno." },
	{ "register_buffer", (PyCFunction)kv_register, METH_VARARGS,
	  kv_register_doc },
	{ "mount_file", (PyCFunction)kv_mount_file, METH_VARARGS,
	  kv_mount_file_doc },
	{ "unregister_buffer", (PyCFunction)kv_unregister, METH_O,
	  kv_unregister_doc },
	{ "mount_segment", (PyCFunction)kv_mount_segment, METH_VARARGS,
	  kv_mount_segment_doc },
	{ "unmount_segment", (PyCFunction)kv_unmount_segment, METH_VARARGS,
	  kv_unmount_segment_doc },
	KW_METHOD("put", kv_put, kv_put_doc),
	KW_METHOD("get", kv_get, kv_get_doc),
	KW_METHOD("fetch", kv_fetch, kv_fetch_doc),
	KW_METHOD("exist", kv_exist, kv_keys_doc),
	KW_METHOD("size", kv_size, kv_keys_doc),
	KW_METHOD("remove", kv_remove, kv_keys_doc),
	KW_METHOD("remove_all", kv_remove_all, kv_remove_all_doc),
	KW_METHOD("get_version", kv_get_version, kv_get_version_doc),
	KW_METHOD("sync", kv_sync, kv_sync_doc),
	KW_METHOD("replica_desc", kv_replica_desc, kv_replica_desc_doc),
	KW_METHOD("replica_clear", kv_replica_clear, kv_replica_clear_doc),
	KW_METHOD("remove_by_regex", kv_remove_by_regex,
		  kv_remove_by_regex_doc),
	KW_METHOD("replicate", kv_replicate, kv_replicate_doc),
	KW_METHOD("query_task", kv_query_task, kv_query_task_doc),
	KW_METHOD("create_task", kv_create_task, kv_create_task_doc),
	{ "_aio_fileno", (PyCFunction)kv_fileno, METH_NOARGS, NULL },
	{ "_aio_drain", (PyCFunction)kv_drain, METH_NOARGS, NULL },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef kv_getset[] = {
	{ "name", (getter)kv_get_name, NULL,
	  "The engine's name, `host:port`: the segment's name.", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PyType_Slot kv_slots[] = {
	{ Py_tp_doc, "_KV(config, master, segment_size, buffer_size): a client "
		     "of the store at master (host:port) with an engine of its "
		     "own made from config (a dict of configuration keys); "
		     "segment_size bytes lent, buffer_size of staging." },
	{ Py_tp_new, kv_new },
	{ Py_tp_init, kv_init },
	{ Py_tp_dealloc, kv_dealloc },
	{ Py_tp_traverse, kv_traverse },
	{ Py_tp_methods, kv_methods },
	{ Py_tp_getset, kv_getset },
	{ 0, NULL },
};

PyType_Spec xpy_kv_spec = {
	.name = "xfer._xfer._KV",
	.basicsize = sizeof(KVObject),
	.flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE |
		 Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
	.slots = kv_slots,
};

/* ---- KVBuffer ----------------------------------------------------------- */

typedef struct {
	PyObject_HEAD
	void *mem;                        /* malloc()ed, owned */
	size_t len;
} KVBufferObject;

PyObject *xpy_kvbuf_new(xpy_state *st, void *mem, size_t len)
{
	KVBufferObject *b = PyObject_New(KVBufferObject, st->KVBufferType);

	if (!b)
		return NULL;
	b->mem = mem;
	b->len = len;
	return (PyObject *)b;
}

static void kvbuf_dealloc(KVBufferObject *self)
{
	PyTypeObject *tp = Py_TYPE(self);

	free(self->mem);
	PyObject_Free(self);
	Py_DECREF(tp);
}

static PyObject *kvbuf_ptr(KVBufferObject *self, PyObject *unused)
{
	(void)unused;
	return PyLong_FromUnsignedLongLong((uintptr_t)self->mem);
}

static PyObject *kvbuf_size(KVBufferObject *self, PyObject *unused)
{
	(void)unused;
	return PyLong_FromSize_t(self->len);
}

static Py_ssize_t kvbuf_len(KVBufferObject *self)
{
	return (Py_ssize_t)self->len;
}

static int kvbuf_getbuffer(KVBufferObject *self, Py_buffer *view, int flags)
{
	return PyBuffer_FillInfo(view, (PyObject *)self, self->mem,
				 (Py_ssize_t)self->len, 0, flags);
}

static PyMethodDef kvbuf_methods[] = {
	{ "ptr", (PyCFunction)kvbuf_ptr, METH_NOARGS,
	  "ptr() -> int\n\nThe address of the bytes." },
	{ "size", (PyCFunction)kvbuf_size, METH_NOARGS,
	  "size() -> int\n\nTheir length in bytes." },
	{ NULL, NULL, 0, NULL },
};

static PyType_Slot kvbuf_slots[] = {
	{ Py_tp_doc, "An object read into memory of its own (Mooncake's "
		     "BufferHandle): ptr(), size(), len() and the buffer "
		     "protocol (writable); freed with the object." },
	{ Py_tp_dealloc, kvbuf_dealloc },
	{ Py_tp_methods, kvbuf_methods },
	{ Py_sq_length, kvbuf_len },
	{ Py_bf_getbuffer, kvbuf_getbuffer },
	{ 0, NULL },
};

PyType_Spec xpy_kvbuf_spec = {
	.name = "xfer._xfer.KVBuffer",
	.basicsize = sizeof(KVBufferObject),
	.flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE |
		 Py_TPFLAGS_DISALLOW_INSTANTIATION,
	.slots = kvbuf_slots,
};
