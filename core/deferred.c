/* Deferred delivery for the metadata backends: see deferred_internal.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "core/deferred_internal.h"
#include "core/store.h"
#include "reactor/reactor_internal.h"

/* A changed key, for env->changed. */
struct changed_note {
	struct xfer_deferred_item item;
	struct xfer_deferred *d;
	char key[];
};

static void run(evutil_socket_t fd, short what, void *arg)
{
	struct xfer_deferred *d = arg;
	struct xfer_deferred_list round = TAILQ_HEAD_INITIALIZER(round);
	struct xfer_deferred_item *it;

	(void)fd;
	(void)what;
	TAILQ_CONCAT(&round, &d->ready, link);
	d->running = true;
	while ((it = TAILQ_FIRST(&round))) {
		TAILQ_REMOVE(&round, it, link);
		it->queued = false;
		it->fn(it, d->released);
	}
	d->running = false;
	if (d->released)
		d->release(d);
}

int xfer_deferred_init(struct xfer_deferred *d, struct event_base *base,
		       const struct xfer_store_env *env,
		       void (*release)(struct xfer_deferred *d))
{
	TAILQ_INIT(&d->ready);
	d->env = env;
	d->release = release;
	d->ev = event_new(base, -1, 0, run, d);
	return d->ev ? 0 : -ENOMEM;
}

void xfer_deferred_push(struct xfer_deferred *d, struct xfer_deferred_item *it,
			xfer_deferred_fn fn)
{
	if (it->queued)
		return;
	it->fn = fn;
	it->queued = true;
	TAILQ_INSERT_TAIL(&d->ready, it, link);
	event_active(d->ev, EV_TIMEOUT, 0);
}

static void resync_run(struct xfer_deferred_item *it, bool drop)
{
	struct xfer_deferred *d = container_of(it, struct xfer_deferred,
					       resync);

	if (!drop && d->env && d->env->changed)
		d->env->changed(NULL, d->env->arg);
}

void xfer_deferred_resync(struct xfer_deferred *d)
{
	xfer_deferred_push(d, &d->resync, resync_run);
}

static void reconnected_run(struct xfer_deferred_item *it, bool drop)
{
	struct xfer_deferred *d = container_of(it, struct xfer_deferred,
					       reconnected);

	if (!drop && d->env && d->env->reconnected)
		d->env->reconnected(d->env->arg);
}

void xfer_deferred_reconnected(struct xfer_deferred *d)
{
	xfer_deferred_push(d, &d->reconnected, reconnected_run);
}

static void changed_run(struct xfer_deferred_item *it, bool drop)
{
	struct changed_note *n = container_of(it, struct changed_note, item);
	const struct xfer_store_env *env = n->d->env;

	if (!drop && env && env->changed)
		env->changed(n->key, env->arg);
	free(n);
}

void xfer_deferred_changed(struct xfer_deferred *d, const char *key,
			   size_t len)
{
	struct changed_note *n = calloc(1, sizeof(*n) + len + 1);

	if (!n) {
		xfer_deferred_resync(d);
		return;
	}
	n->d = d;
	memcpy(n->key, key, len);
	xfer_deferred_push(d, &n->item, changed_run);
}

void xfer_deferred_release(struct xfer_deferred *d)
{
	if (d->running)
		d->released = true;
	else
		d->release(d);
}

void xfer_deferred_clear(struct xfer_deferred *d)
{
	struct xfer_deferred_item *it;

	while ((it = TAILQ_FIRST(&d->ready))) {
		TAILQ_REMOVE(&d->ready, it, link);
		it->queued = false;
		it->fn(it, true);
	}
	if (d->ev)
		event_free(d->ev);
	d->ev = NULL;
}
