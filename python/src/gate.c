/*
 * Who may use an engine or a store client, and when it is freed: calls
 * count themselves in and out on its gate (a mutex and a condition, never
 * held with the GIL while waiting); close() moves the state on, refuses
 * new calls, and frees it once the calls in flight are out (an engine's
 * close cancels what is in flight first). xfer_py.h has the rules.
 */
#include <time.h>

#include "xfer_py.h"

void xpy_gate_init(struct xpy_gate *g)
{
	pthread_condattr_t ca;

	pthread_mutex_init(&g->lock, NULL);
	pthread_condattr_init(&ca);
	/* the deadlines of xpy_gate_idle() */
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&g->cv, &ca);
	pthread_condattr_destroy(&ca);
	g->state = XPY_NEW;
	g->users = 0;
}

void xpy_gate_fini(struct xpy_gate *g)
{
	pthread_cond_destroy(&g->cv);
	pthread_mutex_destroy(&g->lock);
}

bool xpy_gate_enter(struct xpy_gate *g, const char *noun)
{
	enum xpy_state st;

	pthread_mutex_lock(&g->lock);
	st = g->state;
	if (st == XPY_OPEN)
		g->users++;
	pthread_mutex_unlock(&g->lock);
	if (st == XPY_OPEN)
		return true;
	PyErr_Format(PyExc_ValueError, st < XPY_OPEN ?
		     "the %s is not started" : "the %s is closed", noun);
	return false;
}

void xpy_gate_leave(struct xpy_gate *g)
{
	pthread_mutex_lock(&g->lock);
	if (!--g->users && g->state != XPY_OPEN)
		pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->lock);
}

void xpy_gate_set(struct xpy_gate *g, enum xpy_state st)
{
	pthread_mutex_lock(&g->lock);
	g->state = st;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->lock);
}

static bool settled(enum xpy_state st)
{
	return st != XPY_STARTING && st != XPY_CLOSING && st != XPY_FREEING;
}

bool xpy_gate_close_begin(struct xpy_gate *g)
{
	bool mine;

	pthread_mutex_lock(&g->lock);
	while (g->state == XPY_STARTING)
		pthread_cond_wait(&g->cv, &g->lock);
	mine = g->state == XPY_OPEN;
	if (mine)
		g->state = XPY_CLOSING;
	while (!mine && !settled(g->state))
		pthread_cond_wait(&g->cv, &g->lock);
	pthread_mutex_unlock(&g->lock);
	return mine;
}

bool xpy_gate_idle(struct xpy_gate *g, const struct timespec *deadline)
{
	bool idle;

	pthread_mutex_lock(&g->lock);
	while (g->users && (deadline ? pthread_cond_timedwait(
				    &g->cv, &g->lock, deadline) == 0 :
			    pthread_cond_wait(&g->cv, &g->lock) == 0))
		;
	idle = !g->users;
	if (idle)
		g->state = XPY_FREEING;
	pthread_mutex_unlock(&g->lock);
	return idle;
}

/* ---- an engine's ------------------------------------------------------- */

struct xfer_engine *xpy_engine_get(EngineObject *eng)
{
	return xpy_gate_enter(&eng->g, "engine") ? eng->e : NULL;
}

void xpy_engine_put(EngineObject *eng)
{
	xpy_gate_leave(&eng->g);
}

void xpy_gate_wait(EngineObject *eng, bool (*done)(void *arg), void *arg)
{
	Py_BEGIN_ALLOW_THREADS
	pthread_mutex_lock(&eng->g.lock);
	while (!done(arg))
		pthread_cond_wait(&eng->g.cv, &eng->g.lock);
	pthread_mutex_unlock(&eng->g.lock);
	Py_END_ALLOW_THREADS
}

static bool eng_settled(void *arg)
{
	return settled(((EngineObject *)arg)->g.state);
}

bool xpy_engine_try(EngineObject *eng)
{
	struct xpy_gate *g = &eng->g;
	bool held;

	pthread_mutex_lock(&g->lock);
	held = g->state == XPY_OPEN || g->state == XPY_CLOSING;
	if (held)
		g->users++;
	pthread_mutex_unlock(&g->lock);
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
	xpy_gate_set(&eng->g, st);
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

	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_nsec += (long)ms * 1000000;
	deadline.tv_sec += deadline.tv_nsec / 1000000000;
	deadline.tv_nsec %= 1000000000;
	if (!xpy_gate_idle(&self->g, &deadline))
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
	mine = xpy_gate_close_begin(&self->g);
	Py_END_ALLOW_THREADS
	if (!mine)
		return;
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

