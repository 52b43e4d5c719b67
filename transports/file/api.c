/* The public calls of file segments (include/xfer/xfer.h): the registry
 * of files.c, then the document republished as for RAM buffers. */
#include <errno.h>

#include "util/container_internal.h"
#include "util/wait_internal.h"
#include "transports/file/file_internal.h"

#define KIND "nvmeof"

static struct file_transport *file_tp(struct xfer_engine *e)
{
	struct xfer_transport *t = xfer_engine_transport(e, KIND);

	return t ? container_of(t, struct file_transport, base) : NULL;
}

int xfer_register_file_async(struct xfer_engine *e, const char *path,
			     uint64_t length,
			     const char *const *local_path_map,
			     xfer_done_cb cb, void *arg)
{
	struct file_transport *t = file_tp(e);
	int added, ret;

	if (!t)
		return -EPROTONOSUPPORT;
	if (!cb)
		return -EINVAL;
	added = xfer_file_add(t, path, length, local_path_map);
	if (added < 0)
		return added;
	ret = xfer_engine_republish(e, KIND, cb, arg);
	if (ret && added) /* a grown file stays grown: peers see it later */
		xfer_file_remove(t, path);
	return ret;
}

int xfer_unregister_file_async(struct xfer_engine *e, const char *path,
			       xfer_done_cb cb, void *arg)
{
	struct file_transport *t = file_tp(e);
	int ret;

	if (!t)
		return -EPROTONOSUPPORT;
	if (!cb)
		return -EINVAL;
	ret = xfer_file_remove(t, path);
	return ret ? ret : xfer_engine_republish(e, KIND, cb, arg);
}

/* As xfer_register(): with peer-to-peer metadata peers ask the engine
 * itself, so there is nothing to wait for. */
int xfer_register_file(struct xfer_engine *e, const char *path,
		       uint64_t length, const char *const *local_path_map)
{
	struct file_transport *t = file_tp(e);
	int wait = xfer_engine_publish_wait(e), ret;
	struct xfer_wait *w;

	if (!t)
		return -EPROTONOSUPPORT;
	if (wait < 0)
		return wait;
	if (!wait) {
		ret = xfer_file_add(t, path, length, local_path_map);
		return ret < 0 ? ret : 0;
	}
	w = xfer_wait_new();
	if (!w)
		return -ENOMEM;
	return xfer_wait_published(w, xfer_register_file_async(e, path, length,
							       local_path_map,
							       xfer_wait_cb,
							       w));
}

int xfer_unregister_file(struct xfer_engine *e, const char *path)
{
	struct file_transport *t = file_tp(e);
	int wait = xfer_engine_publish_wait(e);
	struct xfer_wait *w;

	if (!t)
		return -EPROTONOSUPPORT;
	if (wait <= 0)
		return wait ? wait : xfer_file_remove(t, path);
	w = xfer_wait_new();
	if (!w)
		return -ENOMEM;
	return xfer_wait_published(w, xfer_unregister_file_async(e, path,
								 xfer_wait_cb,
								 w));
}
