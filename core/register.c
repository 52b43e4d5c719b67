/* Local memory: registering and unregistering buffers (a leaving one
 * once peers' requests on it are done), and the own descriptor that
 * describes them. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core/desc_internal.h"
#include "core/engine_internal.h"
#include "util/json_internal.h"
#include "util/wait_internal.h"

/* ---- the own descriptor ---- */

static void describe_buffer(const struct xfer_buffer *b,
			    struct xfer_desc_buf *db, void *arg)
{
	struct xfer_transport *t = arg;

	t->ops->describe_buffer(t, b, db);
}

/* Encode the own descriptor, with the remotely accessible buffers or
 * with none. */
static int encode_descriptor(struct xfer_engine *e, bool with_buffers,
			     char **json, size_t *len)
{
	struct xfer_transport *t = e->main;
	struct xfer_desc d = {
		.name = e->name,
		.protocol = (char *)t->ops->name,
		.codec = t->ops->codec,
	};
	int ret = 0;

	if (with_buffers)
		ret = xfer_buffers_describe(&e->buffers, &d, describe_buffer, t);
	t->ops->describe(t, &d); /* its fields stay the transport's */
	if (!ret)
		ret = xfer_desc_encode(&d, json, len);
	for (size_t i = 0; i < d.nbufs; i++)
		free(d.bufs[i].name);
	free(d.bufs);
	return ret;
}

int xfer_engine_update_descriptor(struct xfer_engine *e)
{
	char *json;
	size_t len;
	int ret = encode_descriptor(e, true, &json, &len);

	if (ret)
		return ret;
	pthread_mutex_lock(&e->desc_lock);
	free(e->desc_json);
	e->desc_json = json;
	e->desc_len = len;
	pthread_mutex_unlock(&e->desc_lock);
	return 0;
}

struct xfer_transport *xfer_engine_transport(struct xfer_engine *e,
					     const char *kind)
{
	return xfer_segments_kind(&e->segs, kind);
}

char *xfer_engine_own_descriptor(const char *kind, bool with_buffers,
				 size_t *len, void *arg)
{
	struct xfer_engine *e = arg;
	struct xfer_transport *t;
	char *copy;

	if (kind) {
		t = xfer_engine_transport(e, kind);
		return t ? t->ops->document(t, len) : NULL;
	}
	if (!with_buffers)
		return encode_descriptor(e, false, &copy, len) ? NULL : copy;
	pthread_mutex_lock(&e->desc_lock);
	copy = malloc(e->desc_len + 1);
	if (copy) {
		memcpy(copy, e->desc_json, e->desc_len + 1);
		*len = e->desc_len;
	}
	pthread_mutex_unlock(&e->desc_lock);
	return copy;
}

/* ---- registering and unregistering ---- */

static bool valid_location(const char *loc)
{
	size_t n;

	if (!loc)
		return false;
	n = strlen(loc);
	return n > 0 && n < XFER_JSON_MAX_STR;
}

/* Undo the registrations of @p b with the first @p n transports. */
static void unreg_buffer(struct xfer_engine *e, struct xfer_buffer *b, int n)
{
	while (n-- > 0)
		e->tps[n]->ops->unreg(e->tps[n], b);
}

static int ntransports(const struct xfer_engine *e)
{
	int n = 0;

	while (e->tps[n])
		n++;
	return n;
}

void xfer_engine_unreg_buffers(struct xfer_engine *e)
{
	int n = ntransports(e);

	for (size_t i = 0; i < e->buffers.n; i++)
		unreg_buffer(e, e->buffers.v[i], n);
}

/* Register with the transports and the registry; describe it. */
static int register_local(struct xfer_engine *e, void *addr, size_t len,
			  const char *location, bool remote_access)
{
	uintptr_t a = (uintptr_t)addr;
	struct xfer_buffer *b;
	int ret = 0, i;

	if (!addr || len == 0 || a + len < a || !valid_location(location))
		return xfer_error_set(&e->err, -EINVAL, "register %p+%zu: bad "
				      "range or location", addr, len);
	b = xfer_buffer_new(a, len, location, remote_access);
	if (!b)
		return -ENOMEM;
	for (i = 0; e->tps[i] && !ret; i++)
		ret = e->tps[i]->ops->reg(e->tps[i], b);
	if (ret) {
		unreg_buffer(e, b, i - 1);
		xfer_buffer_free(b);
		return xfer_error_set(&e->err, ret, "register %p+%zu: %s", addr,
				      len, strerror(-ret));
	}
	ret = xfer_buffers_insert(&e->buffers, b);
	if (ret) {
		unreg_buffer(e, b, ntransports(e));
		xfer_buffer_free(b);
		if (ret == -EEXIST)
			return xfer_error_set(&e->err, ret, "register %p+%zu: "
					      "overlaps a registered buffer",
					      addr, len);
		return ret;
	}
	ret = xfer_engine_update_descriptor(e);
	if (ret && !xfer_buffers_remove(&e->buffers, a, &b)) {
		unreg_buffer(e, b, ntransports(e));
		xfer_buffer_free(b);
	}
	return ret;
}

/* Describe the segment without @p b, out of the registry, and take it
 * out of the transports. */
static int forget_buffer(struct xfer_engine *e, struct xfer_buffer *b)
{
	int ret = xfer_engine_update_descriptor(e);

	unreg_buffer(e, b, ntransports(e));
	xfer_buffer_free(b);
	return ret;
}

/* A buffer that leaves once peers' requests on it are done (b->leave). */
struct leave {
	struct xfer_job job;     /* on the control reactor */
	struct xfer_engine *e;
	struct xfer_buffer *b;
	xfer_done_cb cb;
	void *arg;
};

/* The last peer's request on a leaving buffer is done (any thread). */
static void buffer_unpinned(struct xfer_buffer *b, void *arg)
{
	struct xfer_engine *e = arg;
	struct leave *l = b->leave;

	l->b = b;
	xfer_reactor_post(&e->control, &l->job);
}

static void leave_done(struct xfer_job *j)
{
	struct leave *l = container_of(j, struct leave, job);
	struct xfer_engine *e = l->e;
	xfer_done_cb cb = l->cb;
	void *arg = l->arg;
	int ret;

	xfer_buffers_take(&e->buffers, l->b);
	ret = forget_buffer(e, l->b); /* frees l too */
	if (!ret)
		ret = xfer_meta_publish(&e->meta, NULL, cb, arg);
	if (ret)
		cb(e, ret, arg);
}

void xfer_engine_buffers_init(struct xfer_engine *e)
{
	xfer_buffers_init(&e->buffers);
	e->buffers.unpinned = buffer_unpinned;
	e->buffers.arg = e;
}

/* When peers' requests still on a leaving buffer are cut off. */
static int64_t leave_deadline(const struct xfer_engine *e)
{
	uint32_t ms = (uint32_t)xfer_config_val(e->cfg,
						"transfer_timeout_ms").num;

	return ms ? xfer_now_ms() + ms : INT64_MAX;
}

/*
 * Take the buffer out of the registry and the transports; describe the
 * segment without it. While peers' requests pin it: with @p cb it leaves
 * (return 1; @p cb runs once it is gone and published), else -EAGAIN.
 */
static int unregister_local(struct xfer_engine *e, void *addr,
			    xfer_done_cb cb, void *arg)
{
	struct leave *l = NULL;
	struct xfer_buffer *b;
	int ret;

	if (cb) {
		l = calloc(1, sizeof(*l));
		if (!l)
			return -ENOMEM;
		*l = (struct leave){ .job.fn = leave_done, .e = e, .cb = cb,
				     .arg = arg };
	}
	ret = xfer_buffers_leave(&e->buffers, (uintptr_t)addr,
				 leave_deadline(e), l, &b);
	if (ret == -EINPROGRESS)
		return 1;
	free(l);
	if (ret == -EAGAIN)
		return ret;
	if (ret)
		return xfer_error_set(&e->err, ret, "unregister %p: %s", addr,
				      ret == -EBUSY ? "in use by a transfer"
						    : "not a registered buffer");
	return forget_buffer(e, b);
}

int xfer_register_async(struct xfer_engine *e, void *addr, size_t len,
			const char *location, bool remote_access,
			xfer_done_cb cb, void *arg)
{
	int ret = cb ? register_local(e, addr, len, location, remote_access)
		     : -EINVAL;

	if (!ret && (ret = xfer_meta_publish(&e->meta, NULL, cb, arg)))
		unregister_local(e, addr, NULL, NULL);
	return ret;
}

int xfer_unregister_async(struct xfer_engine *e, void *addr,
			  xfer_done_cb cb, void *arg)
{
	int ret = cb ? unregister_local(e, addr, cb, arg) : -EINVAL;

	if (ret == 1)
		return 0; /* cb once peers' requests on it are done */
	return ret ? ret : xfer_meta_publish(&e->meta, NULL, cb, arg);
}

int xfer_engine_republish(struct xfer_engine *e, const char *kind,
			  xfer_done_cb cb, void *arg)
{
	return xfer_meta_publish(&e->meta, kind, cb, arg);
}

int xfer_engine_publish_wait(struct xfer_engine *e)
{
	if (!xfer_meta_keeps(&e->meta))
		return 0;
	return xfer_reactor_on_thread(&e->control) ? -EDEADLK : 1;
}

/*
 * The blocking forms wait for the store when it keeps keys (and refuse
 * on the control reactor's thread, which would have to answer); with
 * peer-to-peer metadata peers ask the engine itself: nothing to wait for.
 */

int xfer_register(struct xfer_engine *e, void *addr, size_t len,
		  const char *location, bool remote_access)
{
	int wait = xfer_engine_publish_wait(e);
	struct xfer_wait *w;

	if (wait <= 0)
		return wait ? wait : register_local(e, addr, len, location,
						    remote_access);
	w = xfer_wait_new();
	if (!w)
		return -ENOMEM;
	return xfer_wait_published(w, xfer_register_async(e, addr, len,
							  location,
							  remote_access,
							  xfer_wait_cb, w));
}

/*
 * Peers' requests on a buffer end within the transfer timeout (cut off
 * then), so the blocking form waits that long and the store's time on
 * top. Peer to peer with nothing pinning the buffer, it needs no thread
 * hop; on the callback base it cannot wait for pins (-EBUSY).
 */
int xfer_unregister(struct xfer_engine *e, void *addr)
{
	uint32_t ms = (uint32_t)xfer_config_val(e->cfg,
						"transfer_timeout_ms").num;
	int wait = xfer_engine_publish_wait(e), ret;
	struct xfer_wait *w;

	if (wait < 0)
		return wait;
	if (wait == 0) {
		ret = unregister_local(e, addr, NULL, NULL);
		if (ret != -EAGAIN)
			return ret;
		if (xfer_reactor_on_thread(&e->control))
			return xfer_error_set(&e->err, -EBUSY, "unregister %p: "
					      "in use by a peer's request", addr);
	}
	w = xfer_wait_new();
	if (!w)
		return -ENOMEM;
	ret = xfer_unregister_async(e, addr, xfer_wait_cb, w);
	if (ret) {
		xfer_wait_drop(w);
		xfer_wait_drop(w);
		return ret;
	}
	/* a store that is away is logged and republished later, not an
	 * error here (as for register) */
	xfer_wait_for(w, ms && ms < INT_MAX - XFER_WAIT_MS ? (int)ms + XFER_WAIT_MS
							 : INT_MAX);
	return 0;
}

