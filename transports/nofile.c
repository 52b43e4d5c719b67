/* The file segments' public calls (include/xfer/xfer.h) in a build
 * without them (WITH_FILE=no): each answers -EPROTONOSUPPORT, as an
 * engine that has not started the file transport does. */
#include <errno.h>

#include "xfer/xfer.h"

int xfer_register_file_async(struct xfer_engine *e, const char *path,
			     uint64_t length,
			     const char *const *local_path_map,
			     xfer_done_cb cb, void *arg)
{
	(void)e;
	(void)path;
	(void)length;
	(void)local_path_map;
	(void)cb;
	(void)arg;
	return -EPROTONOSUPPORT;
}

int xfer_unregister_file_async(struct xfer_engine *e, const char *path,
			       xfer_done_cb cb, void *arg)
{
	(void)e;
	(void)path;
	(void)cb;
	(void)arg;
	return -EPROTONOSUPPORT;
}

int xfer_register_file(struct xfer_engine *e, const char *path,
		       uint64_t length, const char *const *local_path_map)
{
	(void)e;
	(void)path;
	(void)length;
	(void)local_path_map;
	return -EPROTONOSUPPORT;
}

int xfer_unregister_file(struct xfer_engine *e, const char *path)
{
	(void)e;
	(void)path;
	return -EPROTONOSUPPORT;
}
