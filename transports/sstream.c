/* The target's end of a data port connection: admit, start, close
 * (sstream_internal.h). */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transports/sstream_internal.h"
#include "core/transport.h"

void xfer_sstream_table_init(struct xfer_sstream_table *tab,
			     const char *name)
{
	tab->name = name;
	pthread_mutex_init(&tab->lock, NULL);
	LIST_INIT(&tab->list);
	tab->n = 0;
}

void xfer_sstream_table_fini(struct xfer_sstream_table *tab)
{
	pthread_mutex_destroy(&tab->lock);
}

/* Into @p tab unless @p max (0: no cap) are there. @return true if
 * admitted. Any thread. */
static bool admit(struct xfer_sstream_table *tab, struct xfer_sstream *s,
		  unsigned max)
{
	bool full;

	pthread_mutex_lock(&tab->lock);
	full = max && tab->n >= max;
	if (!full) {
		LIST_INSERT_HEAD(&tab->list, s, link);
		tab->n++;
	}
	pthread_mutex_unlock(&tab->lock);
	return !full;
}

int xfer_sstream_accept(struct xfer_sstream_table *tab,
			struct xfer_sstream *s, int fd,
			struct xfer_reactor *r,
			const struct xfer_transport_env *env,
			struct xfer_log_limit *cap_log,
			void (*start)(struct xfer_job *))
{
	int one = 1;

	if (env->auth && !(s->auth = xfer_auth_srv_new(env->auth, tab->name)))
		goto err;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	s->fd = fd;
	s->r = r;
	s->start_job.fn = start;
	if (!admit(tab, s, env->max_conns)) {
		xfer_log_limited(cap_log, XFER_LOG_WARN, "%s: %u data "
				 "connections open (max_data_conns): a new one "
				 "closed", tab->name, env->max_conns);
		goto err;
	}
	xfer_reactor_post(r, &s->start_job);
	return 0;

err:
	xfer_auth_srv_free(s->auth);
	s->auth = NULL;
	close(fd);
	return -1;
}

int xfer_sstream_start(struct xfer_sstream *s, event_callback_fn on_io,
		       event_callback_fn on_timeout, void *arg)
{
	struct event_base *base = s->r->base;

	s->rev = event_new(base, s->fd, EV_READ | EV_PERSIST, on_io, arg);
	s->wev = event_new(base, s->fd, EV_WRITE | EV_PERSIST, on_io, arg);
	s->timer = evtimer_new(base, on_timeout, arg);
	if (!s->rev || !s->wev || !s->timer)
		return -1;
	xfer_event_want(s->rev, &s->reading, true);
	return 0;
}

void xfer_sstream_close(struct xfer_sstream_table *tab,
			struct xfer_sstream *s)
{
	pthread_mutex_lock(&tab->lock);
	LIST_REMOVE(s, link);
	tab->n--;
	pthread_mutex_unlock(&tab->lock);
	if (s->rev)
		event_free(s->rev);
	if (s->wev)
		event_free(s->wev);
	if (s->timer)
		event_free(s->timer);
	s->rev = s->wev = s->timer = NULL;
	xfer_auth_srv_free(s->auth);
	s->auth = NULL;
	close(s->fd);
	s->fd = -1;
}
