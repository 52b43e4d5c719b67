/* TCP transport: the ops table, the data listener and the peer table. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/listener.h>

#include "net_internal.h"
#include "tcp_internal.h"
#include "transport.h"

static void on_accept(struct evconnlistener *lev, evutil_socket_t fd,
		      struct sockaddr *sa, int salen, void *arg)
{
	(void)lev;
	(void)sa;
	(void)salen;
	tcp_server_accept(arg, fd);
}

static int tcp_init(struct xfer_engine *e, struct xfer_transport **out)
{
	struct xfer_transport *t;
	struct sockaddr_storage ss;
	socklen_t len;
	int ret;

	ret = xfer_net_parse(e->cfg.bind_addr, 0, &ss, &len);
	if (ret)
		return ret;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->e = e;
	pthread_mutex_init(&t->lock, NULL);
	t->lev = evconnlistener_new_bind(e->control.base, on_accept, t,
					 LEV_OPT_CLOSE_ON_FREE |
					 LEV_OPT_CLOSE_ON_EXEC |
					 LEV_OPT_REUSEABLE,
					 -1, (struct sockaddr *)&ss, len);
	if (!t->lev) {
		ret = errno ? -errno : -EADDRINUSE;
		pthread_mutex_destroy(&t->lock);
		free(t);
		return xfer_engine_error(e, ret, "tcp data listen: %s",
					 strerror(-ret));
	}
	t->port = xfer_net_local_port(evconnlistener_get_fd(t->lev));
	*out = t;
	return 0;
}

static void tcp_describe(struct xfer_transport *t, struct xfer_desc *d)
{
	d->tcp_data_port = t->port;
	d->tcp_proto_version = 2;
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
static int tcp_open(struct xfer_transport *t, struct xfer_segment *seg)
{
	struct sockaddr_storage ss = seg->addr;
	socklen_t len = seg->addrlen;
	struct tcp_peer *p;
	int ret, version = seg->desc->tcp_proto_version;

	xfer_net_set_port(&ss, seg->desc->tcp_data_port);
	pthread_mutex_lock(&t->lock);
	for (p = t->peers; p; p = p->next)
		if (same_addr(p, &ss, len, version))
			goto found;
	ret = -ENOMEM;
	p = calloc(1, sizeof(*p));
	if (!p)
		goto out;
	p->conns = calloc(t->e->cfg.tcp_conns, sizeof(*p->conns));
	if (!p->conns)
		goto err_peer;
	memcpy(&p->addr, &ss, len);
	p->addrlen = len;
	p->version = version;
	for (; p->nconns < t->e->cfg.tcp_conns; p->nconns++) {
		p->conns[p->nconns] = tcp_conn_new(t, p);
		if (!p->conns[p->nconns])
			goto err_conns;
	}
	p->next = t->peers;
	t->peers = p;
found:
	seg->tp_priv = p;
	ret = 0;
out:
	pthread_mutex_unlock(&t->lock);
	return ret;

err_conns:
	while (p->nconns)
		tcp_conn_free(p->conns[--p->nconns]);
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
	if (atomic_load(&seg->gone)) {
		for (size_t i = 0; i < n; i++)
			xfer_slice_done(&s[i], XFER_FAILED);
		return;
	}
	pthread_rwlock_rdlock(&seg->lock);
	p = seg->tp_priv; /* peers live as long as the transport */
	pthread_rwlock_unlock(&seg->lock);
	/* Runs of consecutive slices keep each connection's writes large. */
	per = (n + p->nconns - 1) / p->nconns;
	while (first < n) {
		size_t k = n - first < per ? n - first : per;
		unsigned c = atomic_fetch_add(&p->next_conn, 1) % p->nconns;

		tcp_conn_enqueue(p->conns[c], s + first, k);
		first += k;
	}
}

static void tcp_fini(struct xfer_transport *t)
{
	struct tcp_peer *p, *next;

	evconnlistener_free(t->lev);
	tcp_server_close_all(t);
	for (p = t->peers; p; p = next) {
		next = p->next;
		while (p->nconns)
			tcp_conn_free(p->conns[--p->nconns]);
		free(p->conns);
		free(p);
	}
	pthread_mutex_destroy(&t->lock);
	free(t);
}

const struct xfer_transport_ops xfer_tcp_ops = {
	.name = "tcp",
	.always = true,
	.init = tcp_init,
	.describe = tcp_describe,
	.open = tcp_open,
	.submit = tcp_submit,
	.fini = tcp_fini,
};
