/*
 * xfer._xfer: what the files of the extension module share.
 *
 * module.c    the module: its state (types, exceptions), constants,
 *             memory helpers
 * engine.c    the _Engine type: configuration, registration, segments,
 *             notifications (blocking forms)
 * gate.c      who may use an engine: calls counted in and out, close()
 * requests.c  Python arguments into struct xfer_request arrays, and the
 *             buffers they keep exported while a transfer runs
 * batch.c     the Batch type (submitted, polled, waited) and blocking
 *             transfers
 * aio.c       the completion queue: the engine's callbacks push, an
 *             eventfd wakes the event loop, drain() resolves futures
 * store.c     the _KV type: a client of the store (xfer/store.h), its
 *             calls blocking or settling a future through its own queue
 * store_call.c one call of a _KV: Python arguments into its arrays, the
 *             chain of the client's calls it runs, its result in Python
 *
 * Threads: a call counts itself in on the engine's gate (xpy_engine_get)
 * and out (xpy_engine_put), and releases the GIL while it waits. close()
 * refuses new calls, cancels what is in flight, waits (without the GIL)
 * until the calls in flight are out, and only then frees the engine: a
 * stream of calls from other threads cannot starve it, as readers of a
 * read-write lock starved its writer. The gate's lock is only ever held
 * for a few instructions, or in a condition wait without the GIL. A
 * Batch counts its own calls too: submits (and cancels) on one batch run
 * one at a time under its submit lock, as xfer_batch_submit() requires,
 * and free() waits for the calls of other threads on it. The engine's
 * callbacks never take the GIL: they queue what happened and write the
 * eventfd; the loop's thread resolves it.
 *
 * State: nothing is global. The types (heap types) and exceptions live in
 * the module's state (multi-phase initialisation, as CPython's _sqlite),
 * so each module object has its own; an engine keeps a pointer to its
 * module's state, its type keeps that module alive. Engines and batches
 * are tracked by the cycle collector.
 */
#ifndef XFER_PY_H
#define XFER_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <xfer/store.h>
#include <xfer/xfer.h>

/* Buffer-protocol objects a call keeps exported (released with the GIL);
 * a Batch keeps one per submit on its list. */
struct xpy_hold {
	Py_buffer *views;
	size_t n, cap;
	struct xpy_hold *next;
};

/* The most requests one call takes: xfer_batch_new()'s largest capacity
 * (include/xfer/xfer.h). */
#define XPY_REQS_MAX ((size_t)1 << 24)

/* Who may use an engine (EngineObject.state, under its gate). */
enum xpy_state {
	XPY_NEW,          /* __init__ has not run */
	XPY_STARTING,     /* __init__ starts it, without the GIL */
	XPY_OPEN,         /* calls welcome */
	XPY_CLOSING,      /* close() runs: new calls refused, frees allowed */
	XPY_FREEING,      /* no call in flight: the engine is being freed */
	XPY_CLOSED,
};

/* Who may use an engine or a store client (gate.c). */
struct xpy_gate {
	pthread_mutex_t lock;
	pthread_cond_t cv;                /* a count fell, the state moved */
	enum xpy_state state;
	unsigned users;                   /* calls in flight */
};

struct xpy_cq;

/* Kinds of completions that travel through the queue. */
enum xpy_op_kind {
	XPY_OP_BATCH,     /* a Batch's callback: outcome in result */
	XPY_OP_DONE,      /* an xfer_done_cb: 0 or -errno */
	XPY_OP_SEGMENT,   /* xfer_segment_open_async: id or -errno */
	XPY_OP_NOTIFY,    /* a notification arrived: name, msg */
	XPY_OP_KV,        /* a store call ended (store_call.c) */
};

/*
 * One asynchronous call in flight, or one notification. Linked on the
 * engine's pending list (under the GIL) from the call until drain(), and
 * on the queue (under the queue's lock) from its callback until drain().
 */
struct xpy_op {
	struct xpy_op *qnext;             /* queue link */
	struct xpy_op *pnext, **pprev;    /* pending list link */
	enum xpy_op_kind kind;
	bool called;                      /* its callback ran (queue lock) */
	const char *what;                 /* names the call in errors */
	int64_t result;
	struct xpy_cq *cq;
	PyObject *fut;                    /* resolved by drain(); owned */
	PyObject *value;                  /* result for 0 (XPY_OP_DONE); owned */
	char *name, *msg;                 /* XPY_OP_NOTIFY */
};

typedef struct BatchObject BatchObject;

/* The module's state: its heap types and exceptions (module.c). */
typedef struct {
	PyTypeObject *EngineType;
	PyTypeObject *BatchType;
	PyTypeObject *KVType;
	PyTypeObject *KVBufferType;
	PyObject *XferError;
	PyObject *TransferError;
} xpy_state;

typedef struct {
	PyObject_HEAD
	xpy_state *st;                    /* its module's */
	struct xfer_engine *e;            /* NULL once closed */
	struct xpy_gate g;                /* its lock also guards each
					     Batch's users */
	PyObject *regs;                   /* addr -> capsule of a Py_buffer */
	BatchObject *batches;             /* batches not being freed (GIL) */
	struct xpy_cq *cq;                /* NULL until the first async call */
	struct xpy_op *pending;           /* async calls in flight */
	PyObject *on_notify;              /* callable(name, msg) or NULL */
} EngineObject;

struct BatchObject {
	PyObject_HEAD
	EngineObject *eng;                /* owned */
	struct xfer_batch *b;             /* NULL once freed (gate and GIL) */
	size_t cap;
	pthread_mutex_t submit_lock;      /* one submit or cancel at a time */
	unsigned users;                   /* calls using b without the GIL */
	unsigned submitting;              /* submits in progress (GIL) */
	bool freeing;                     /* free() began: calls refused */
	struct xpy_hold *holds;           /* each submit's views (GIL) */
	bool pending;                     /* awaited: its callback is due */
	enum xfer_status outcome;         /* once its callback ran */
	struct xpy_op op;                 /* XPY_OP_BATCH, with a future */
	BatchObject *next, **pprev;       /* the engine's live list */
};

/* A client of the store (store.c): its gate counts calls in flight, each
 * from its start to the end of its chain, so close() frees the client
 * only once none uses it. */
typedef struct {
	PyObject_HEAD
	xpy_state *st;                    /* its module's */
	struct xfer_kv *k;                /* set once open; NULL once closed */
	struct xpy_gate g;
	struct xpy_cq *cq;                /* NULL until a call with a future */
} KVObject;

/* The calls of a _KV (store_call.c). */
enum xpy_kv_kind {
	XPY_KV_PUT,          /* from parts: staged, or zero-copy */
	XPY_KV_GET,          /* into parts */
	XPY_KV_FETCH,        /* into memory of its own: bytes or KVBuffer */
	XPY_KV_EXIST,
	XPY_KV_SIZE,
	XPY_KV_REMOVE,
	XPY_KV_REMOVE_ALL,
	XPY_KV_GETV,         /* one key into one part, with min_version */
	XPY_KV_SYNC,
	XPY_KV_REMOVE_REGEX,
	XPY_KV_DESC,         /* replica descriptors */
	XPY_KV_REPLICA_CLEAR,
	XPY_KV_REPLICATE,    /* one key: a task's id */
	XPY_KV_QUERY_TASK,   /* a task's state */
	XPY_KV_CREATE_TASK,  /* keys: the object's, then the targets */
};

/* module.c */
extern struct PyModuleDef xpy_module;
extern PyType_Spec xpy_engine_spec, xpy_batch_spec, xpy_kv_spec,
	xpy_kvbuf_spec;
/* The state of the module that defined @p type (or its base); NULL with
 * TypeError if none did. */
xpy_state *xpy_state_of(PyTypeObject *type);
/* XferError (errno -@p err or @p err, "what: strerror (the engine's last
 * message)") raised: NULL. */
PyObject *xpy_raise(EngineObject *eng, int err, const char *what);
/* XferError of @p st raised, without an engine's message: NULL. */
PyObject *xpy_raise_st(xpy_state *st, int err, const char *what);
PyObject *xpy_error(EngineObject *eng, int err, const char *what);
PyObject *xpy_transfer_error(EngineObject *eng, struct xfer_batch *b,
			     enum xfer_status outcome);
int xpy_addr(PyObject *o, uint64_t *addr);

/* gate.c */
void xpy_gate_init(struct xpy_gate *g);
void xpy_gate_fini(struct xpy_gate *g);
/* Count a call in: true while open, else false with ValueError ("the
 * @p noun is not started" or "... is closed"). */
bool xpy_gate_enter(struct xpy_gate *g, const char *noun);
/* Count it out: any thread, no GIL. */
void xpy_gate_leave(struct xpy_gate *g);
/* Move to @p st, waking who waits on the gate. */
void xpy_gate_set(struct xpy_gate *g, enum xpy_state st);
/* Without the GIL: wait while it starts; if open, move it to CLOSING:
 * true (the caller closes it); else wait until another close is done:
 * false. */
bool xpy_gate_close_begin(struct xpy_gate *g);
/* Without the GIL: wait until no call is in flight (until @p deadline,
 * CLOCK_MONOTONIC, if not NULL), then move to FREEING: true; false if
 * calls are still in flight at the deadline. */
bool xpy_gate_idle(struct xpy_gate *g, const struct timespec *deadline);
/* The engine, counted in for a call that may let the GIL go; NULL with
 * ValueError set unless it is open. */
struct xfer_engine *xpy_engine_get(EngineObject *eng);
/* Count out a call of xpy_engine_get() or xpy_engine_hold(). */
void xpy_engine_put(EngineObject *eng);
/* For a cleanup (freeing a batch): counted in while the engine is open or
 * closing: true; false once it is freed (its tasks are over), waiting
 * without the GIL while it is being freed. Never raises. */
bool xpy_engine_hold(EngineObject *eng);
/* Counted in while open or closing, as xpy_engine_hold(); never waits. */
bool xpy_engine_try(EngineObject *eng);
/* Wait, without the GIL, until @p done(@p arg) holds under the gate. */
void xpy_gate_wait(EngineObject *eng, bool (*done)(void *arg), void *arg);
/* Move to @p st, waking who waits on the gate. */
void xpy_engine_set_state(EngineObject *eng, enum xpy_state st);
/* Refuse new calls, cancel what is in flight, wait for the calls in
 * flight, free the engine (with the GIL; lets it go while it waits). A
 * close while another runs waits for that one. */
void xpy_engine_close(EngineObject *eng);

/* engine.c */
/* An engine's configuration from None or a dict of keys to values (str,
 * int or bool, as text); NULL with TypeError or XferError. */
struct xfer_config *xpy_config(xpy_state *st, PyObject *config);
int xpy_reg_args(PyObject *obj, PyObject *length, bool writable,
		 struct xpy_hold *h, void **addr, size_t *len);
PyObject *xpy_reg_keep(EngineObject *eng, uint64_t addr,
		       struct xpy_hold *h);

/* requests.c */
int xpy_hold_add(struct xpy_hold *h, PyObject *obj, bool writable,
		 void **addr, size_t *len);
void xpy_hold_release(struct xpy_hold *h);
/* The requests of a call (opcode, segment, sources=None, targets=None,
 * lengths=None, *, pairs=None, notify=None); @p h keeps their buffer
 * objects. More than @p max requests raise XferError @p err before
 * anything is allocated. The strings stay valid while @p args does. */
struct xpy_transfer {
	struct xfer_request *reqs;        /* PyMem_Free() them */
	size_t n;
	const char *nname, *nmsg;         /* a notification, or NULL */
};
int xpy_transfer_parse(EngineObject *eng, PyObject *args, PyObject *kw,
		       const char *fname, size_t max, int err,
		       struct xpy_transfer *t, struct xpy_hold *h);

/* batch.c */
extern const char xpy_transfer_doc[], xpy_batch_doc[];
PyObject *xpy_engine_transfer(EngineObject *eng, PyObject *args,
			      PyObject *kw);
PyObject *xpy_engine_batch(EngineObject *eng, PyObject *args, PyObject *kw);
BatchObject *xpy_batch_new(EngineObject *eng, size_t cap);
int xpy_batch_wait(BatchObject *bo);
/* Count a call on @p bo in (its batch and engine): 0, or -1 with
 * ValueError once either is freed or closing. */
int xpy_batch_enter(BatchObject *bo);
void xpy_batch_leave(BatchObject *bo);
/* On an entered batch, without the GIL, under its submit lock:
 * xfer_batch_submit(_notify): 0 or -errno. */
int xpy_batch_submit(BatchObject *bo, const struct xpy_transfer *t);
enum xfer_status xpy_batch_outcome(struct xfer_batch *b);
/* [status of each task, ...] as ints */
PyObject *xpy_statuses(struct xfer_batch *b);
/* Free the xfer batch of @p bo and let go of its buffers (cancelling and
 * waiting for what is in flight while the engine is alive). */
void xpy_batch_release(BatchObject *bo);
int xpy_ms_left(const struct timespec *deadline);
/* Closing, before the engine is freed: cancel every batch in flight and,
 * with a @p deadline (CLOCK_MONOTONIC), wait for those not awaited until
 * then. */
void xpy_batches_cancel(EngineObject *eng, const struct timespec *deadline);
/* After: free them all (their tasks are over). */
void xpy_batches_close(EngineObject *eng);

/* store.c */
/* Count a call in: true while the client is open, else false with
 * ValueError. */
bool xpy_kv_enter(KVObject *kv);
/* Count it out: any thread, no GIL. */
void xpy_kv_leave(KVObject *kv);
/* A KVBuffer owning @p mem (malloc()ed, @p len bytes); NULL with an
 * exception (@p mem is then still the caller's). */
PyObject *xpy_kvbuf_new(xpy_state *st, void *mem, size_t len);

/* store_call.c */
/* Run a call of @p kind: blocking, or with future= settled later by
 * xpy_kv_drain() (then None at once). */
PyObject *xpy_kv_call(KVObject *kv, enum xpy_kv_kind kind, PyObject *args,
		      PyObject *kw);
/* Settle the futures of the calls that ended (the loop's thread). */
void xpy_kv_drain(KVObject *kv);

/* aio.c */
/* A queue of ops whose callbacks ran, and the eventfd that says so; NULL
 * with an exception. */
struct xpy_cq *xpy_cq_new(void);
void xpy_cq_free(struct xpy_cq *cq);
int xpy_cq_fd(const struct xpy_cq *cq);
/* Any thread, no GIL: queue @p op (its callback ran), waking the fd. */
void xpy_cq_push(struct xpy_cq *cq, struct xpy_op *op);
/* The ops queued so far, oldest first (linked by qnext); clears the fd. */
struct xpy_op *xpy_cq_take(struct xpy_cq *cq);
/* Settle @p fut with @p exc, else @p value, unless it is done; never
 * raises. */
void xpy_fut_settle(PyObject *fut, PyObject *value, PyObject *exc);
PyObject *xpy_aio_fileno(EngineObject *eng, PyObject *unused);
PyObject *xpy_aio_drain(EngineObject *eng, PyObject *unused);
PyObject *xpy_aio_submit(EngineObject *eng, PyObject *args, PyObject *kw);
PyObject *xpy_aio_open(EngineObject *eng, PyObject *args);
PyObject *xpy_aio_notify(EngineObject *eng, PyObject *args);
PyObject *xpy_aio_register(EngineObject *eng, PyObject *args, PyObject *kw);
PyObject *xpy_aio_refresh(EngineObject *eng, PyObject *args);
PyObject *xpy_aio_listen(EngineObject *eng, PyObject *cb);
void xpy_aio_batch_done(struct xfer_batch *b, enum xfer_status outcome,
			void *arg);
void xpy_aio_close(EngineObject *eng, const struct timespec *deadline);
void xpy_aio_free(EngineObject *eng);

#endif /* XFER_PY_H */
