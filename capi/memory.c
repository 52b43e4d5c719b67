/*
 * Mooncake's C API: local memory. Each call is xfer's register or
 * unregister; the batch forms start every registration, then wait for
 * the store once for all. What is registered is listed, to register it
 * again when installTransport() remakes the engine.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capi/capi_internal.h"

/* How long unregistering waits for a peer's request being served. */
#define BUSY_WAIT_MS 2000

/* ---- the list ---- */

static int mem_add(struct te *t, void *addr, size_t len, const char *loc,
		   bool remote)
{
	struct te_mem *v;
	char *l = strdup(loc);
	int ret = -ENOMEM;

	pthread_mutex_lock(&t->mem_lock);
	v = l ? realloc(t->mems, (t->nmems + 1) * sizeof(*v)) : NULL;
	if (v) {
		t->mems = v;
		v[t->nmems++] = (struct te_mem){ addr, len, l, remote };
		l = NULL;
		ret = 0;
	}
	pthread_mutex_unlock(&t->mem_lock);
	free(l);
	return ret;
}

static void mem_remove(struct te *t, void *addr)
{
	pthread_mutex_lock(&t->mem_lock);
	for (size_t i = 0; i < t->nmems; i++) {
		if (t->mems[i].addr != addr)
			continue;
		free(t->mems[i].location);
		t->mems[i] = t->mems[--t->nmems];
		break;
	}
	pthread_mutex_unlock(&t->mem_lock);
}

int te_mems_reregister(struct te *t)
{
	int ret = 0, r;

	/* the write lock is held: the list does not change meanwhile */
	for (size_t i = 0; i < t->nmems; i++) {
		r = xfer_register(t->e, t->mems[i].addr, t->mems[i].len,
				  t->mems[i].location, t->mems[i].remote);
		if (r && !ret)
			ret = r;
	}
	return ret;
}

void te_mems_fini(struct te *t)
{
	for (size_t i = 0; i < t->nmems; i++)
		free(t->mems[i].location);
	free(t->mems);
	t->mems = NULL;
	t->nmems = 0;
}

/* ---- waiting for several asynchronous calls at once ---- */

struct waiter {
	pthread_mutex_t lock;
	pthread_cond_t done;
	int pending;
	int err;        /* the first error a callback got */
};

static void waiter_init(struct waiter *w)
{
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->done, NULL);
	w->pending = 0;
	w->err = 0;
}

static void waiter_add(struct waiter *w)
{
	pthread_mutex_lock(&w->lock);
	w->pending++;
	pthread_mutex_unlock(&w->lock);
}

static void waiter_cb(struct xfer_engine *e, int result, void *arg)
{
	struct waiter *w = arg;

	(void)e;
	pthread_mutex_lock(&w->lock);
	if (result && !w->err)
		w->err = result;
	if (--w->pending == 0)
		pthread_cond_signal(&w->done);
	pthread_mutex_unlock(&w->lock);
}

/* Wait for every callback; the first error one got. */
static int waiter_wait(struct waiter *w)
{
	int err;

	pthread_mutex_lock(&w->lock);
	while (w->pending)
		pthread_cond_wait(&w->done, &w->lock);
	err = w->err;
	pthread_mutex_unlock(&w->lock);
	pthread_cond_destroy(&w->done);
	pthread_mutex_destroy(&w->lock);
	return err;
}

/* ---- register ---- */

static int cmp_addr(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)((const buffer_entry_t *)a)->addr;
	uintptr_t y = (uintptr_t)((const buffer_entry_t *)b)->addr;

	return (x > y) - (x < y);
}

/* The list is registrable as a whole: lengths, and no two overlap. */
static int check_list(const buffer_entry_t *list, size_t n)
{
	buffer_entry_t *v;
	int ret = 0;

	if (n > SIZE_MAX / sizeof(*v)) /* the caller's count: no such list */
		return -EINVAL;
	v = malloc(n * sizeof(*v));
	if (!v)
		return -ENOMEM;
	memcpy(v, list, n * sizeof(*v));
	qsort(v, n, sizeof(*v), cmp_addr);
	for (size_t i = 0; i < n && !ret; i++) {
		if (!v[i].addr || !v[i].length)
			ret = -EINVAL;
		else if (i && (uintptr_t)v[i].addr - (uintptr_t)v[i - 1].addr <
			 v[i - 1].length)
			ret = -EEXIST;
	}
	free(v);
	return ret;
}

/*
 * Register the @p n buffers of @p list, all or nothing, and wait for the
 * store once. A store error (it is away) leaves them registered: xfer
 * publishes them when it is back. @return 0 or a negative errno.
 */
static int register_list(struct te *t, struct xfer_engine *e,
			 const buffer_entry_t *list, size_t n,
			 const char *loc, bool remote)
{
	struct waiter w;
	size_t i;
	int ret = n ? check_list(list, n) : 0, r;

	waiter_init(&w);
	for (i = 0; i < n && !ret; i++) {
		ret = xfer_register_async(e, list[i].addr, list[i].length, loc,
					  remote, waiter_cb, &w);
		if (ret)
			break;
		waiter_add(&w);
		ret = mem_add(t, list[i].addr, list[i].length, loc, remote);
	} /* on a mem_add() failure, i is past the one registered */
	if (ret) { /* undo those before */
		while (i-- > 0) {
			mem_remove(t, list[i].addr);
			xfer_unregister(e, list[i].addr);
		}
	}
	r = waiter_wait(&w);
	return ret ? ret : r;
}

int registerLocalMemory(transfer_engine_t engine, void *addr, size_t length,
			const char *location, int remote_accessible)
{
	buffer_entry_t one = { addr, length };
	struct te *t = engine;
	struct xfer_engine *e = te_enter(t);
	int ret;

	if (!e)
		return TE_ERR_INVALID_ARGUMENT;
	ret = register_list(t, e, &one, 1, location ? location : "*",
			    remote_accessible != 0);
	te_leave(t);
	return te_err(ret);
}

int registerLocalMemoryBatch(transfer_engine_t engine,
			     buffer_entry_t *buffer_list, size_t buffer_len,
			     const char *location)
{
	struct te *t = engine;
	struct xfer_engine *e;
	int ret;

	if ((!buffer_list && buffer_len) || !(e = te_enter(t)))
		return TE_ERR_INVALID_ARGUMENT;
	ret = register_list(t, e, buffer_list, buffer_len,
			    location ? location : "*", true);
	te_leave(t);
	return te_err(ret);
}

/* ---- unregister ---- */

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* xfer_unregister_async(), again while a peer's request holds the
 * buffer, up to BUSY_WAIT_MS. */
static int unregister_one(struct te *t, struct xfer_engine *e, void *addr,
			  struct waiter *w)
{
	int ret = -EBUSY;

	for (int ms = 0; ret == -EBUSY && ms <= BUSY_WAIT_MS; ms++) {
		if (ms)
			sleep_ms(1);
		ret = xfer_unregister_async(e, addr, waiter_cb, w);
	}
	if (!ret) {
		waiter_add(w);
		mem_remove(t, addr);
	}
	return ret == -ENOENT ? TE_ERR_ADDRESS_NOT_REGISTERED : te_err(ret);
}

int unregisterLocalMemoryBatch(transfer_engine_t engine, void **addr_list,
			       size_t addr_len)
{
	struct te *t = engine;
	struct xfer_engine *e;
	struct waiter w;
	int ret = 0, r;

	if ((!addr_list && addr_len) || !(e = te_enter(t)))
		return TE_ERR_INVALID_ARGUMENT;
	waiter_init(&w);
	for (size_t i = 0; i < addr_len; i++)
		if ((r = unregister_one(t, e, addr_list[i], &w)) && !ret)
			ret = r;
	r = waiter_wait(&w);
	te_leave(t);
	return ret ? ret : te_err(r);
}

int unregisterLocalMemory(transfer_engine_t engine, void *addr)
{
	return unregisterLocalMemoryBatch(engine, &addr, 1);
}
