/*
 * The store contract's side in the core: the metadata knobs, the backend
 * for a connection string from the list metadata/store.c supplies, and
 * the defaults of the slots a backend leaves empty (core/store.h says
 * each one): a store that keeps no keys answers put and del with
 * -EOPNOTSUPP, later, from its deferred queue.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "core/deferred_internal.h"
#include "core/store.h"
#include "util/container_internal.h"

const struct xfer_knob xfer_store_knobs[] = {
	XFER_KNOB_S("metadata_server", "XFER_METADATA_SERVER",
		    "MC_METADATA_SERVER", "p2p", "string", "where segments "
		    "are found: p2p, etcd://, redis://, redis+sentinel://, "
		    "http://"),
	XFER_KNOB_S("cluster_id", "XFER_CLUSTER_ID", "MC_METADATA_CLUSTER_ID",
		    NULL, "string", "keys go under mooncake/ID/, ID being this; "
		    "unset: under mooncake/"),
	XFER_KNOB_S("metadata_user", "XFER_METADATA_USER", "MC_REDIS_USERNAME",
		    NULL, "string", "user for the metadata server (redis "
		    "AUTH); unset: none"),
	XFER_KNOB_S("metadata_password", "XFER_METADATA_PASSWORD",
		    "MC_REDIS_PASSWORD", NULL, "string", "password for the "
		    "metadata server (redis AUTH); unset: none"),
	XFER_KNOB_END,
};

/* A refused call, answered from the store's queue. */
struct refusal {
	struct xfer_deferred_item it;
	xfer_store_cb cb;
	void *arg;
};

static void refusal_run(struct xfer_deferred_item *it, bool drop)
{
	struct refusal *r = container_of(it, struct refusal, it);

	if (!drop)
		r->cb(-EOPNOTSUPP, NULL, 0, r->arg);
	free(r);
}

/* Without memory for the item the answer comes inside the call: the one
 * case where a store's callback does (core/store.h). */
static void refuse(struct xfer_store *s, xfer_store_cb cb, void *arg)
{
	struct refusal *r = calloc(1, sizeof(*r));

	if (!r) {
		cb(-ENOMEM, NULL, 0, arg);
		return;
	}
	r->cb = cb;
	r->arg = arg;
	xfer_deferred_push(s->deferred, &r->it, refusal_run);
}

static void def_put(struct xfer_store *s, const char *key, const char *value,
		    size_t len, xfer_store_cb cb, void *arg)
{
	(void)key;
	(void)value;
	(void)len;
	refuse(s, cb, arg);
}

static void def_del(struct xfer_store *s, const char *key, xfer_store_cb cb,
		    void *arg)
{
	(void)key;
	refuse(s, cb, arg);
}

static struct xfer_store_ops filled[XFER_STORES_MAX];
static size_t nfilled;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void fill(void)
{
	for (; nfilled < XFER_STORES_MAX && xfer_store_list[nfilled];
	     nfilled++) {
		struct xfer_store_ops *f = &filled[nfilled];

		*f = *xfer_store_list[nfilled];
		if (!f->put)
			f->put = def_put;
		if (!f->del)
			f->del = def_del;
	}
}

const struct xfer_store_ops *xfer_store_find(const char *conn)
{
	pthread_once(&once, fill);
	for (size_t i = 0; i < nfilled; i++)
		if (filled[i].accepts(conn))
			return &filled[i];
	return NULL;
}

int xfer_store_open(const struct xfer_store_ops *ops, const char *conn,
		    const struct xfer_store_env *env, struct xfer_store **out)
{
	int ret = ops->open(conn, env, out);

	if (!ret)
		(*out)->ops = ops;
	return ret;
}
