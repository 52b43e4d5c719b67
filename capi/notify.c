/*
 * Mooncake's C API: notifications. They wait in xfer's queue (bounded:
 * 4096 of them, 16 MiB; more are refused and their senders told) until
 * getNotifsFromEngine() takes them all.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "capi/capi_internal.h"

notify_msg_t *getNotifsFromEngine(transfer_engine_t engine, int *size)
{
	struct te *t = engine;
	struct xfer_engine *e = te_enter(t);
	notify_msg_t *v = NULL, *nv;
	int n = 0, cap = 0;
	char *name, *msg;

	if (size)
		*size = 0;
	if (!e)
		return NULL;
	if (!size) {
		te_leave(t);
		return NULL;
	}
	while (n < INT32_MAX) {
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			nv = realloc(v, (size_t)cap * sizeof(*v));
			if (!nv)
				break; /* those not taken stay queued */
			v = nv;
		}
		if (xfer_engine_notify_pop(e, &name, &msg))
			break;
		v[n++] = (notify_msg_t){ name, msg };
	}
	te_leave(t);
	if (!n) {
		free(v);
		return NULL;
	}
	*size = n;
	return v;
}

int freeNotifsMsgBuf(notify_msg_t *msg, int size)
{
	for (int i = 0; msg && i < size; i++) {
		free(msg[i].name);
		free(msg[i].msg);
	}
	free(msg);
	return 0;
}

int genNotifyInEngine(transfer_engine_t engine, uint64_t target_id,
		      notify_msg_t notify_msg)
{
	struct te *t = engine;
	struct xfer_engine *e;
	int64_t xid;
	int ret;

	if (!notify_msg.name || !notify_msg.msg || !(e = te_enter(t)))
		return TE_ERR_INVALID_ARGUMENT;
	xid = target_id <= INT32_MAX ? te_seg_xid(t, (int64_t)target_id) : -1;
	ret = xid < 0 ? -ENOENT :
	      xfer_notify(e, xid, notify_msg.name, notify_msg.msg);
	te_leave(t);
	return te_err(ret);
}
