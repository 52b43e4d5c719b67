/*
 * TCP transport: the ops table, its knob and descriptor fields, the data
 * listener and the peer table.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/json_internal.h"
#include "util/listen_internal.h"
#include "util/net_internal.h"
#include "transports/tcp/tcp_internal.h"

static void on_accept(void *arg, int fd)
{
	xfer_tcp_server_accept(arg, fd);
}

static int tcp_init(const struct xfer_transport_env *env,
		    struct xfer_transport **out)
{
	struct tcp_transport *t;
	struct sockaddr_storage ss;
	socklen_t len;
	int ret;

	ret = xfer_net_parse(env->bind_addr, 0, &ss, &len);
	if (ret)
		return ret;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->conns = (int)env->knobs[0].num;
	SLIST_INIT(&t->peers);
	xfer_sstream_table_init(&t->sconns, "tcp");
	pthread_mutex_init(&t->lock, NULL);
	t->listener = xfer_listen(env->control->base, (struct sockaddr *)&ss,
				  len, "tcp data", on_accept, t);
	if (!t->listener) {
		ret = -errno;
		pthread_mutex_destroy(&t->lock);
		xfer_sstream_table_fini(&t->sconns);
		free(t);
		return xfer_error_set(env->err, ret, "tcp data listen: %s",
				      strerror(-ret));
	}
	t->desc.data_port = xfer_net_local_port(xfer_listener_fd(t->listener));
	t->desc.version = 2;
	*out = &t->base;
	return 0;
}

static void tcp_describe(struct xfer_transport *tp, struct xfer_desc *d)
{
	struct tcp_transport *t = container_of(tp, struct tcp_transport, base);

	d->tp = &t->desc;
}

static bool same_addr(const struct tcp_peer *p,
		      const struct sockaddr_storage *ss, socklen_t len,
		      int version)
{
	return p->addrlen == len && !memcmp(&p->addr, ss, len) &&
	       p->version == version;
}

/* Find or make the peer for @p seg's data address: its host, resolved at
 * open, and the descriptor's data port. Never blocks. */
static int tcp_open(struct xfer_transport *tp, struct xfer_segment *seg)
{
	struct tcp_transport *t = container_of(tp, struct tcp_transport, base);
	const struct xfer_tcp_desc *d = seg->desc->tp;
	struct sockaddr_storage ss = seg->addr;
	socklen_t len = seg->addrlen;
	struct tcp_peer *p;
	int ret;

	xfer_net_set_port(&ss, d->data_port);
	pthread_mutex_lock(&t->lock);
	SLIST_FOREACH(p, &t->peers, link)
		if (same_addr(p, &ss, len, d->version))
			goto found;
	ret = -ENOMEM;
	p = calloc(1, sizeof(*p));
	if (!p)
		goto out;
	p->conns = calloc(t->conns, sizeof(*p->conns));
	if (!p->conns)
		goto err_peer;
	memcpy(&p->addr, &ss, len);
	p->addrlen = len;
	p->version = d->version;
	for (; p->nconns < t->conns; p->nconns++) {
		p->conns[p->nconns] = xfer_tcp_conn_new(t, p);
		if (!p->conns[p->nconns])
			goto err_conns;
	}
	SLIST_INSERT_HEAD(&t->peers, p, link);
found:
	seg->tp_priv = p;
	ret = 0;
out:
	pthread_mutex_unlock(&t->lock);
	return ret;

err_conns:
	while (p->nconns)
		xfer_tcp_conn_free(p->conns[--p->nconns]);
	free(p->conns);
err_peer:
	free(p);
	goto out;
}

/* Spread the slices of one task over the peer's connections. */
static void tcp_submit(struct xfer_transport *t, struct xfer_segment *seg,
		       struct xfer_slice *s, size_t n)
{
	struct tcp_peer *p;
	size_t per, first = 0;

	(void)t;
	pthread_rwlock_rdlock(&seg->lock);
	p = seg->tp_priv; /* peers live as long as the transport */
	pthread_rwlock_unlock(&seg->lock);
	/* Runs of consecutive slices keep each connection's writes large. */
	per = (n + p->nconns - 1) / p->nconns;
	while (first < n) {
		size_t k = n - first < per ? n - first : per;
		unsigned c = atomic_fetch_add(&p->next_conn, 1) % p->nconns;

		xfer_tcp_conn_enqueue(p->conns[c], s + first, k);
		first += k;
	}
}

static void conn_cancel(void *arg)
{
	xfer_tcp_conn_cancel(arg);
}

/* Each connection on its own reactor; peers and connections live as long
 * as the transport, so the list can be walked unlocked once taken. */
static void tcp_cancel(struct xfer_transport *tp)
{
	struct tcp_transport *t = container_of(tp, struct tcp_transport, base);
	struct tcp_peer *p;

	pthread_mutex_lock(&t->lock);
	p = SLIST_FIRST(&t->peers);
	pthread_mutex_unlock(&t->lock);
	for (; p; p = SLIST_NEXT(p, link))
		for (int i = 0; i < p->nconns; i++)
			xfer_reactor_run(xfer_tcp_conn_reactor(p->conns[i]),
					 conn_cancel, p->conns[i]);
}

static void tcp_fini(struct xfer_transport *tp)
{
	struct tcp_transport *t = container_of(tp, struct tcp_transport, base);
	struct tcp_peer *p;

	xfer_listener_free(t->listener);
	xfer_tcp_server_close_all(t);
	while ((p = SLIST_FIRST(&t->peers))) {
		SLIST_REMOVE_HEAD(&t->peers, link);
		while (p->nconns)
			xfer_tcp_conn_free(p->conns[--p->nconns]);
		free(p->conns);
		free(p);
	}
	pthread_mutex_destroy(&t->lock);
	xfer_sstream_table_fini(&t->sconns);
	free(t);
}

/* ---- descriptor fields: tcp_data_port, tcp_proto_version ---- */

static const char *const desc_keys[] = {
	"tcp_data_port", "tcp_proto_version", NULL,
};

static int tcp_gen(yajl_gen g, const char *key, const void *tp)
{
	const struct xfer_tcp_desc *d = tp;

	return xfer_json_u64(g, !strcmp(key, "tcp_data_port") ?
				d->data_port : (uint64_t)d->version);
}

static int tcp_parse(yajl_val root, void **tp, char *err, size_t errlen)
{
	struct xfer_tcp_desc *d = calloc(1, sizeof(*d));
	uint64_t v;
	int ret;

	if (!d)
		return xfer_json_oom(err, errlen);
	*tp = d;
	ret = xfer_json_get_uint(root, "", "tcp_data_port", 1, UINT16_MAX, &v,
				 err, errlen);
	if (ret)
		return ret;
	d->data_port = v;
	/* Peers from before protocol v2 do not send the field. */
	v = 1;
	if (xfer_json_get(root, "tcp_proto_version")) {
		ret = xfer_json_get_uint(root, "", "tcp_proto_version", 1, 2,
					 &v, err, errlen);
		if (ret)
			return ret;
	}
	d->version = v;
	return 0;
}

const struct xfer_desc_codec xfer_tcp_codec = {
	.protocol = "tcp",
	.keys = desc_keys,
	.parse = tcp_parse,
	.gen = tcp_gen,
	.free = free,
};

static const struct xfer_knob tcp_knobs[] = {
	XFER_KNOB_N("tcp_conns", "XFER_TCP_CONNS", NULL, 1, 64, "2", "count",
		    "TCP data connections kept per peer segment"),
	XFER_KNOB_END,
};

const struct xfer_transport_ops xfer_tcp_ops = {
	.name = "tcp",
	.flags = XFER_TP_ALWAYS,
	.knobs = tcp_knobs,
	.codec = &xfer_tcp_codec,
	.init = tcp_init,
	.describe = tcp_describe,
	.open = tcp_open,
	.submit = tcp_submit,
	.cancel = tcp_cancel,
	.fini = tcp_fini,
};
