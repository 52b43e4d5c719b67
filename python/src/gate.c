/*
 * Who may use an engine, and when it is freed: calls count themselves in
 * and out on the engine's gate (a mutex and a condition, never held with
 * the GIL while waiting); close() moves the state on, refuses new calls,
 * cancels what is in flight and frees the engine once the calls in
 * flight are out. xfer_py.h has the rules.
 */
#include <time.h>

#include "xfer_py.h"

struct xfer_engine *xpy_engine_get(EngineObject *eng)
{
	enum xpy_state st;

	pthread_mutex_lock(&eng->gate);
	st = eng->state;
	if (st == XPY_OPEN)
		eng->users++;
	pthread_mutex_unlock(&eng->gate);
	if (st == XPY_OPEN)
		return eng->e;
	PyErr_SetString(PyExc_ValueError, st < XPY_OPEN ?
			"the engine is not started" : "the engine is closed");
	return NULL;
}

void xpy_engine_put(EngineObject *eng)
{
	pthread_mutex_lock(&eng->gate);
	if (!--eng->users && eng->state != XPY_OPEN)
		pthread_cond_broadcast(&eng->gate_cv);
	pthread_mutex_unlock(&eng->gate);
}

void xpy_gate_wait(EngineObject *eng, bool (*done)(void *arg), void *arg)
{
	Py_BEGIN_ALLOW_THREADS
	pthread_mutex_lock(&eng->gate);
	while (!done(arg))
		pthread_cond_wait(&eng->gate_cv, &eng->gate);
	pthread_mutex_unlock(&eng->gate);
	Py_END_ALLOW_THREADS
}

static bool eng_settled(void *arg)
{
	enum xpy_state st = ((EngineObject *)arg)->state;

	return st != XPY_STARTING && st != XPY_CLOSING && st != XPY_FREEING;
}

bool xpy_engine_try(EngineObject *eng)
{
	bool held;

	pthread_mutex_lock(&eng->gate);
	held = eng->state == XPY_OPEN || eng->state == XPY_CLOSING;
	if (held)
		eng->users++;
	pthread_mutex_unlock(&eng->gate);
	return held;
}

bool xpy_engine_hold(EngineObject *eng)
{
	if (xpy_engine_try(eng))
		return true;
	xpy_gate_wait(eng, eng_settled, eng); /* freeing: tasks end with it */
	return false;
}

void xpy_engine_set_state(EngineObject *eng, enum xpy_state st)
{
	pthread_mutex_lock(&eng->gate);
	eng->state = st;
	pthread_cond_broadcast(&eng->gate_cv);
	pthread_mutex_unlock(&eng->gate);
}


/* How long close() waits for cancelled batches before it frees the engine
 * anyway (a READ on the wire from a stalled peer ends only with the
 * transfer timeout). */
#define XPY_CLOSE_GRACE_MS 2000

/* Once no call is in flight (waiting up to @p ms), free the engine:
 * true; false if calls are still in flight then. Without the GIL. */
static bool eng_free_when_idle(EngineObject *self, int ms)
{
	struct timespec deadline;
	bool idle;

	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_nsec += (long)ms * 1000000;
	deadline.tv_sec += deadline.tv_nsec / 1000000000;
	deadline.tv_nsec %= 1000000000;
	pthread_mutex_lock(&self->gate);
	while (self->users && pthread_cond_timedwait(&self->gate_cv,
						     &self->gate,
						     &deadline) == 0)
		;
	idle = !self->users;
	if (idle)
		self->state = XPY_FREEING;
	pthread_mutex_unlock(&self->gate);
	if (!idle)
		return false;
	xfer_engine_free(self->e);
	xpy_engine_set_state(self, XPY_CLOSED);
	return true;
}

/* How often close() cancels again what calls in flight submitted after
 * it began (ms). */
#define XPY_CLOSE_RECANCEL_MS 100

/*
 * Cancel everything in flight, wait for the calls in flight to return,
 * then free the engine: its callbacks are over when xfer_engine_free()
 * returns, so what they never answered fails then.
 */
void xpy_engine_close(EngineObject *self)
{
	struct timespec deadline;
	bool mine, freed;

	Py_BEGIN_ALLOW_THREADS
	pthread_mutex_lock(&self->gate);
	while (self->state == XPY_STARTING)
		pthread_cond_wait(&self->gate_cv, &self->gate);
	mine = self->state == XPY_OPEN;
	if (mine)
		self->state = XPY_CLOSING;
	pthread_mutex_unlock(&self->gate);
	Py_END_ALLOW_THREADS
	if (!mine) {
		xpy_gate_wait(self, eng_settled, self);
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += XPY_CLOSE_GRACE_MS / 1000;
	xpy_batches_cancel(self, &deadline);
	xpy_aio_close(self, &deadline);
	for (;;) {
		Py_BEGIN_ALLOW_THREADS
		freed = eng_free_when_idle(self, XPY_CLOSE_RECANCEL_MS);
		Py_END_ALLOW_THREADS
		if (freed)
			break;
		xpy_batches_cancel(self, NULL);
	}
	self->e = NULL;
	xpy_aio_free(self);
	xpy_batches_close(self);
	PyDict_Clear(self->regs);
}

