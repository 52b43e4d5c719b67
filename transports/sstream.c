/* The target's end of a data port connection: admit under the caps,
 * start, prove, close (sstream_internal.h). */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/container_internal.h"
#include "transports/sstream_internal.h"
#include "core/transport.h"

void xfer_sstream_table_init(struct xfer_sstream_table *tab,
			     const char *name)
{
	tab->name = name;
	pthread_mutex_init(&tab->lock, NULL);
	for (int i = 0; i < 3; i++)
		TAILQ_INIT(&tab->lists[i]);
	tab->n = tab->nnew = 0;
	xfer_addrs_init(&tab->addrs);
}

void xfer_sstream_table_fini(struct xfer_sstream_table *tab)
{
	pthread_mutex_destroy(&tab->lock);
}

struct xfer_sstream *xfer_sstream_any(struct xfer_sstream_table *tab)
{
	struct xfer_sstream *s = NULL;

	pthread_mutex_lock(&tab->lock);
	for (int i = 0; i < 3 && !s; i++)
		s = TAILQ_FIRST(&tab->lists[i]);
	pthread_mutex_unlock(&tab->lock);
	return s;
}

/* Out of the counts and the address, into list @p to. Under the lock. */
static void move(struct xfer_sstream_table *tab, struct xfer_sstream *s,
		 enum xfer_sstream_list to)
{
	TAILQ_REMOVE(&tab->lists[s->list], s, link);
	if (s->list == XFER_SS_NEW) {
		tab->nnew--;
		s->from.a->unproved--;
	}
	if (s->list != XFER_SS_SHUT && to == XFER_SS_SHUT) {
		tab->n--;
		xfer_addrs_del(&s->from);
	}
	s->list = to;
	TAILQ_INSERT_TAIL(&tab->lists[to], s, link);
}

/* Close @p s for room: it leaves the counts now, and its reactor sees
 * its socket end (the fd stays open until then: the reactor closes it
 * under the lock's protection, after taking it out of its list).
 * Under the lock. */
static void shut(struct xfer_sstream_table *tab, struct xfer_sstream *s)
{
	move(tab, s, XFER_SS_SHUT);
	shutdown(s->fd, SHUT_RDWR);
}

static bool idle(struct xfer_sstream *s)
{
	return !atomic_load_explicit(&s->busy, memory_order_relaxed);
}

/* The oldest connection from @p self's address, but @p self, that holds
 * a slot for nothing (new or idle); NULL if none. */
static struct xfer_sstream *victim_of_addr(struct xfer_sstream *self)
{
	struct xfer_addr_node *n;
	struct xfer_sstream *s;

	TAILQ_FOREACH(n, &self->from.a->nodes, link) {
		s = container_of(n, struct xfer_sstream, from);
		if (s != self && (s->list == XFER_SS_NEW || idle(s)))
			return s;
	}
	return NULL;
}

/* The oldest new connection from the address with the most of them (so
 * that a flood from a few addresses closes its own); NULL if none. */
static struct xfer_sstream *victim_new(struct xfer_sstream_table *tab)
{
	struct xfer_sstream *s, *v = NULL;

	TAILQ_FOREACH(s, &tab->lists[XFER_SS_NEW], link)
		if (!v || s->from.a->unproved > v->from.a->unproved)
			v = s;
	return v;
}

/* A new connection (victim_new()), else the oldest idle one; NULL if
 * none. */
static struct xfer_sstream *victim(struct xfer_sstream_table *tab)
{
	struct xfer_sstream *s = victim_new(tab);

	if (s)
		return s;
	TAILQ_FOREACH(s, &tab->lists[XFER_SS_PROVED], link)
		if (idle(s))
			return s;
	return NULL;
}

/*
 * Room for @p s, already counted under its address, under env's caps (0:
 * none): at most one connection closed per cap reached. Under the lock.
 * @return NULL when admitted (@p what says which cap made room, or
 * NULL), else the cap that refused it.
 */
static const char *make_room(struct xfer_sstream_table *tab,
			     struct xfer_sstream *s,
			     const struct xfer_transport_env *env,
			     const char **what)
{
	struct xfer_sstream *v;

	*what = NULL;
	if (env->max_conns_per_addr &&
	    s->from.a->n > env->max_conns_per_addr) {
		if (!(v = victim_of_addr(s)))
			return "max_data_conns_per_addr";
		shut(tab, v);
		*what = "max_data_conns_per_addr";
	}
	if (env->max_new_conns && tab->nnew >= env->max_new_conns) {
		shut(tab, victim_new(tab));
		*what = "max_new_data_conns";
	}
	if (env->max_conns && tab->n >= env->max_conns) {
		if (!(v = victim(tab)))
			return "max_data_conns";
		shut(tab, v);
		*what = "max_data_conns";
	}
	return NULL;
}

/* Into @p tab as new, room made. @return true if admitted. */
static bool admit(struct xfer_sstream_table *tab, struct xfer_sstream *s,
		  const struct xfer_transport_env *env,
		  struct xfer_log_limit *cap_log)
{
	const char *refused = "memory", *made = NULL;
	unsigned n;

	pthread_mutex_lock(&tab->lock);
	if (!xfer_addrs_add(&tab->addrs, &s->from, s->fd)) {
		refused = make_room(tab, s, env, &made);
		if (refused)
			xfer_addrs_del(&s->from);
	}
	if (!refused) {
		s->list = XFER_SS_NEW;
		TAILQ_INSERT_TAIL(&tab->lists[XFER_SS_NEW], s, link);
		tab->nnew++;
		tab->n++;
		s->from.a->unproved++;
	}
	n = tab->n;
	pthread_mutex_unlock(&tab->lock);
	if (refused)
		xfer_log_limited(cap_log, XFER_LOG_WARN, "%s: %u data "
				 "connections open (%s): a new one closed, "
				 "those in the way busy", tab->name, n,
				 refused);
	else if (made)
		xfer_log_limited(cap_log, XFER_LOG_WARN, "%s: %u data "
				 "connections open (%s): the oldest new or "
				 "idle one closed", tab->name, n, made);
	return !refused;
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
	if (!admit(tab, s, env, cap_log))
		goto err;
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

void xfer_sstream_proved(struct xfer_sstream_table *tab,
			 struct xfer_sstream *s)
{
	if (s->proved)
		return;
	s->proved = true;
	pthread_mutex_lock(&tab->lock);
	if (s->list == XFER_SS_NEW) /* not closed for room meanwhile */
		move(tab, s, XFER_SS_PROVED);
	pthread_mutex_unlock(&tab->lock);
}

int xfer_sstream_auth(struct xfer_sstream_table *tab,
		      struct xfer_sstream *s)
{
	int ret;

	if (!s->auth)
		return 0;
	ret = xfer_auth_srv_step(s->auth, s->fd);
	if (ret)
		return ret;
	xfer_auth_srv_free(s->auth);
	s->auth = NULL;
	xfer_sstream_proved(tab, s);
	return 0;
}

void xfer_sstream_arm(struct xfer_sstream *s,
		      const struct xfer_transport_env *env, bool busy,
		      uint32_t ms)
{
	struct timeval tv;

	atomic_store_explicit(&s->busy, busy, memory_order_relaxed);
	if (!s->proved) {
		if (s->deadline)
			return; /* a peer cannot push it back by trickling */
		s->deadline = true;
		ms = env->auth_timeout_ms;
	}
	tv = (struct timeval){ ms / 1000, (ms % 1000) * 1000 };
	if (ms)
		event_add(s->timer, &tv);
	else
		event_del(s->timer);
}

void xfer_sstream_close(struct xfer_sstream_table *tab,
			struct xfer_sstream *s)
{
	pthread_mutex_lock(&tab->lock);
	if (s->list != XFER_SS_SHUT)
		move(tab, s, XFER_SS_SHUT);
	TAILQ_REMOVE(&tab->lists[XFER_SS_SHUT], s, link);
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
