/*
 * A device context: verbs context, protection domain, the device's limits
 * on what a QP may ask for, its CQs and completion channels (cq.c) and
 * the device's async event fd, all events of the context's worker
 * reactor, which is pinned to the device's NUMA node.
 */
#define _GNU_SOURCE /* asprintf */
#include <errno.h>
#include <fcntl.h>
#include <numa.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "util/json_internal.h"
#include "transports/rdma/rdma_internal.h"

/* Break every endpoint of the context (its port went down). */
static void break_all(struct rdma_ctx *c, const char *why)
{
	struct rdma_ep *ep, *next;

	for (ep = TAILQ_FIRST(&c->pool.eps); ep; ep = next) {
		next = TAILQ_NEXT(ep, link);
		xfer_rdma_ep_break(ep, why);
	}
	for (ep = TAILQ_FIRST(&c->retired); ep; ep = next) {
		next = TAILQ_NEXT(ep, link);
		xfer_rdma_ep_break(ep, why);
	}
}

static void on_async(evutil_socket_t fd, short what, void *arg)
{
	struct rdma_ctx *c = arg;
	struct ibv_async_event ev;

	(void)fd;
	(void)what;
	while (!ibv_get_async_event(c->verbs, &ev)) {
		enum ibv_event_type type = ev.event_type;
		struct rdma_ep *ep = NULL;

		if (type == IBV_EVENT_QP_FATAL || type == IBV_EVENT_QP_REQ_ERR ||
		    type == IBV_EVENT_QP_ACCESS_ERR)
			ep = ev.element.qp->qp_context;
		ibv_ack_async_event(&ev);
		xfer_log(XFER_LOG_WARN, "rdma %s: async event: %s", c->name,
			 ibv_event_type_str(type));
		if (type == IBV_EVENT_PORT_ERR || type == IBV_EVENT_DEVICE_FATAL) {
			atomic_store(&c->port_up, false);
			break_all(c, ibv_event_type_str(type));
		} else if (type == IBV_EVENT_PORT_ACTIVE) {
			atomic_store(&c->port_up, true);
		} else if (ep) {
			xfer_rdma_ep_break(ep, ibv_event_type_str(type));
		}
	}
}

/* The timer ticks every RDMA_TICK_MS while work is out, so that a stall
 * is seen within a fraction of a second; once a second while retired
 * endpoints wait to be reaped; not at all when the context is idle (a
 * completion, an async event or a submit wakes it). */
static void set_tick(struct rdma_ctx *c, int tick)
{
	static const struct timeval second = { 1, 0 },
				    fast = { 0, RDMA_TICK_MS * 1000 };

	if (tick == c->tick)
		return;
	c->tick = tick;
	if (tick == RDMA_TICK_OFF)
		event_del(c->timer_ev);
	else
		event_add(c->timer_ev, tick == RDMA_TICK_FAST ? &fast : &second);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct rdma_ctx *c = arg;
	bool busy;

	(void)fd;
	(void)what;
	busy = xfer_rdma_ep_check(c, xfer_rdma_now_ns());
	xfer_rdma_ep_progress_all(c);
	set_tick(c, busy ? RDMA_TICK_FAST : !TAILQ_EMPTY(&c->retired) ?
		    RDMA_TICK_SLOW : RDMA_TICK_OFF);
}

static void ctx_cancel(void *arg)
{
	struct rdma_ctx *c = arg;
	struct rdma_ep_list *lists[] = { &c->pool.eps, &c->retired };
	struct rdma_ep *ep;

	pthread_mutex_lock(&c->lock);
	xfer_slices_cancel(&c->in_head, &c->in_tail, 0);
	pthread_mutex_unlock(&c->lock);
	for (int list = 0; list < 2; list++)
		TAILQ_FOREACH(ep, lists[list], link)
			xfer_slices_cancel(&ep->wait_head, &ep->wait_tail, 0);
}

void xfer_rdma_ctx_cancel(struct rdma_ctx *c)
{
	/* Posted work completes: the NIC may write a READ's slice until
	 * then, and the task ends only after it. */
	xfer_reactor_run(c->r, ctx_cancel, c);
}

/* Slices from submitters: find or make their endpoints, queue, post. */
static void on_kick(struct xfer_job *j)
{
	struct rdma_ctx *c = container_of(j, struct rdma_ctx, kick);
	struct rdma_ep *ep = NULL, *touched = NULL, *evicted, *next_ep;
	struct xfer_segment *last_seg = NULL;
	struct xfer_slice *s, *next;
	char path[2 * XFER_JSON_MAX_STR], host[64];
	unsigned last_dev = 0;
	uint16_t port;

	pthread_mutex_lock(&c->lock);
	s = c->in_head;
	c->in_head = NULL;
	c->in_tail = &c->in_head;
	c->kick_pending = false;
	pthread_mutex_unlock(&c->lock);

	for (; s; s = next) {
		next = s->next;
		/* Slices of one task come in runs to the same peer NIC: look
		 * its endpoint up once a run. */
		if (!ep || s->task->segment != last_seg ||
		    rdma_slice(s)->peer_dev != last_dev) {
			ep = NULL;
			if (xfer_rdma_peer_of(s, path, sizeof(path), host, &port)) {
				xfer_rdma_retry(c->t, s, XFER_FAILED, true);
				continue;
			}
			ep = xfer_rdma_pool_get(&c->pool, path);
			if (!ep && (ep = xfer_rdma_ep_new(c, path))) {
				evicted = xfer_rdma_pool_add(&c->pool, ep);
				if (evicted)
					xfer_rdma_ep_retire(evicted);
			}
			if (!ep) {
				xfer_rdma_retry(c->t, s, XFER_FAILED, true);
				continue;
			}
			if (!*ep->host) {
				snprintf(ep->host, sizeof(ep->host), "%s", host);
				ep->port = port;
			}
			last_seg = s->task->segment;
			last_dev = rdma_slice(s)->peer_dev;
		}
		xfer_rdma_ep_push(ep, s);
		if (!ep->touched) {
			ep->touched = true;
			ep->touch_next = touched;
			touched = ep;
		}
	}
	for (ep = touched; ep; ep = next_ep) {
		next_ep = ep->touch_next;
		ep->touched = false;
		xfer_rdma_ep_progress(ep); /* may free ep */
	}
	set_tick(c, RDMA_TICK_FAST);
}

/* The GID to use: configured, else RoCE v2 with an IPv4 address, else the
 * first non-zero one. ibv_query_gid_ex() returns the errno (ibv_query_gid()
 * only -1); a configured empty slot reads as zeros, as ibv_query_gid()
 * gives it. */
static int pick_gid(struct rdma_ctx *c, int len, int configured)
{
	static const uint8_t v4mapped[12] = { [10] = 0xff, [11] = 0xff };
	struct ibv_gid_entry ge;
	union ibv_gid g;
	int ret, any = -1;

	if (configured >= 0) {
		c->gid_index = configured;
		ret = ibv_query_gid_ex(c->verbs, c->port, configured, &ge, 0);
		if (ret && ret != ENODATA)
			return -ret;
		c->gid = ret ? (union ibv_gid){ .raw = { 0 } } : ge.gid;
		return 0;
	}
	for (int i = 0; i < len; i++) {
		if (ibv_query_gid_ex(c->verbs, c->port, i, &ge, 0))
			continue; /* an empty slot */
		g = ge.gid;
		if (!(g.global.subnet_prefix | g.global.interface_id))
			continue;
		if (ge.gid_type == IBV_GID_TYPE_ROCE_V2 &&
		    !memcmp(g.raw, v4mapped, sizeof(v4mapped))) {
			any = i;
			c->gid = g;
			break;
		}
		if (any < 0) {
			any = i;
			c->gid = g;
		}
	}
	if (any < 0)
		return -ENODEV;
	c->gid_index = any;
	return 0;
}

static enum ibv_mtu mtu_enum(int bytes)
{
	switch (bytes) {
	case 256: return IBV_MTU_256;
	case 512: return IBV_MTU_512;
	case 1024: return IBV_MTU_1024;
	case 2048: return IBV_MTU_2048;
	default: return IBV_MTU_4096;
	}
}

/* The device @p name opened, or NULL with errno: ENODEV where no device
 * has the name, else what ibv_get_device_list() or ibv_open_device() set. */
static struct ibv_context *open_device(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *v = NULL;
	int err = list ? ENODEV : errno;

	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name)) {
			v = ibv_open_device(list[i]);
			err = errno;
			break;
		}
	if (list)
		ibv_free_device_list(list);
	errno = err;
	return v;
}

/* The knob @p want within the device's @p max (0: no limit known),
 * saying so when it does not fit. */
static int within(struct rdma_ctx *c, const char *what, long long want,
		  int max)
{
	if (max > 0 && want > max) {
		xfer_log(XFER_LOG_INFO, "rdma %s: %s %lld is over the device's "
			 "%d: %d", c->name, what, want, max, max);
		return max;
	}
	return (int)want;
}

/* What CQs and QPs are made with: the knobs, within the device's limits
 * (Mooncake's "or the highest value supported by the platform"). Max
 * inline data has no device attribute: xfer_rdma_qp_caps() probes it. */
static int limits(struct rdma_ctx *c, const struct ibv_port_attr *pa)
{
	const union xfer_knob_val *k = c->t->k;
	struct ibv_device_attr da;
	int ret;

	ret = ibv_query_device(c->verbs, &da);
	if (ret)
		return -ret;
	c->ncq = (int)k[K_NUM_CQ].num;
	c->nchan = (int)k[K_NUM_CHAN].num;
	c->cqe = within(c, "max_cqe", k[K_MAX_CQE].num, da.max_cqe);
	c->max_wr = within(c, "max_wr", k[K_MAX_WR].num, da.max_qp_wr);
	c->max_sge = within(c, "max_sge", k[K_MAX_SGE].num, da.max_sge);
	c->max_msg = pa->max_msg_sz ? pa->max_msg_sz : UINT32_MAX;
	return 0;
}

/* Device, PD, port, GID and limits. */
static int open_verbs(struct rdma_ctx *c)
{
	const union xfer_knob_val *k = c->t->k;
	struct ibv_port_attr pa;
	int ret;

	/* Verbs return the errno or set it: passed on as it is (a provider
	 * that leaves errno 0 still fails). */
	c->verbs = open_device(c->name);
	if (!c->verbs)
		return errno ? -errno : -ENODEV;
	c->pd = ibv_alloc_pd(c->verbs);
	if (!c->pd)
		return errno ? -errno : -ENOMEM;
	c->port = (uint8_t)k[K_IB_PORT].num;
	ret = ibv_query_port(c->verbs, c->port, &pa);
	if (ret)
		return -ret;
	ret = limits(c, &pa);
	if (ret)
		return ret;
	c->lid = pa.lid;
	c->mtu = k[K_MTU].num ? mtu_enum((int)k[K_MTU].num) : pa.active_mtu;
	atomic_store(&c->port_up, pa.state == IBV_PORT_ACTIVE);
	ret = pick_gid(c, pa.gid_tbl_len, (int)k[K_GID].num);
	if (ret)
		return ret;
	return xfer_rdma_nonblock(c->verbs->async_fd);
}

/* Bind the calling thread and its allocations to the device's node. */
static void pin_here(struct rdma_ctx *c)
{
	if (!c->t->k[K_PIN].num || c->numa_node < 0 ||
	    numa_available() < 0 || c->numa_node > numa_max_node())
		return;
	if (numa_run_on_node(c->numa_node))
		xfer_log(XFER_LOG_WARN, "rdma %s: pin to node %d: %s", c->name,
			 c->numa_node, strerror(errno));
	numa_set_preferred(c->numa_node);
}

/* CQs, completion channels, QP capabilities and events: made by the
 * worker, on its node. */
static int setup_events(struct rdma_ctx *c)
{
	struct event_base *base = c->r->base;
	int ret;

	ret = xfer_rdma_cq_open(c);
	if (!ret)
		ret = xfer_rdma_qp_caps(c);
	if (ret)
		return ret;
	c->async_ev = event_new(base, c->verbs->async_fd, EV_READ | EV_PERSIST,
				on_async, c);
	c->timer_ev = event_new(base, -1, EV_PERSIST, on_timer, c);
	if (!c->async_ev || !c->timer_ev || event_add(c->async_ev, NULL))
		return -ENOMEM;
	return 0;
}

/* Setup run on the worker thread, with the opener waiting. */
struct setup {
	struct rdma_ctx *c;
	int ret;
};

static void run_setup(void *arg)
{
	struct setup *su = arg;

	pin_here(su->c);
	su->ret = setup_events(su->c);
}

/* Set up on the context's worker; inline when the context shares the
 * control reactor (nothing dispatches it yet). */
static int setup_on_worker(struct rdma_ctx *c)
{
	struct setup su = { .c = c };

	if (c->r != &c->own)
		return setup_events(c);
	xfer_reactor_run(c->r, run_setup, &su);
	return su.ret;
}

int xfer_rdma_ctx_open(struct rdma_transport *t, struct rdma_ctx *c,
		       int index)
{
	const struct xfer_transport_env *env = t->base.env;
	char wname[16];
	int ret;

	c->t = t;
	c->index = index;
	snprintf(c->name, sizeof(c->name), "%s", t->topo.devs[index].name);
	c->numa_node = t->topo.devs[index].numa_node;
	c->in_tail = &c->in_head;
	c->kick.fn = on_kick;
	xfer_rdma_pool_init(&c->pool, (size_t)t->k[K_MAX_EP].num);
	TAILQ_INIT(&c->retired);
	pthread_mutex_init(&c->lock, NULL);
	if (asprintf(&c->nic_path, "%s@%s", env->name, c->name) < 0) {
		c->nic_path = NULL;
		return -ENOMEM;
	}
	ret = open_verbs(c);
	if (ret)
		return xfer_error_set(env->err, ret, "rdma %s: open: %s",
				      c->name, strerror(-ret));
	/* Plugin mode without workers: everything on the control reactor. */
	if (env->nworkers == 0) {
		c->r = env->control;
	} else {
		snprintf(wname, sizeof(wname), "xfer-%.10s", c->name);
		ret = xfer_reactor_init(&c->own, NULL, wname);
		if (ret)
			return ret;
		c->r = &c->own;
		ret = xfer_reactor_start(&c->own);
		if (ret)
			return ret;
	}
	ret = setup_on_worker(c);
	if (ret)
		return xfer_error_set(env->err, ret, "rdma %s: CQ: %s",
				      c->name, strerror(-ret));
	xfer_log(XFER_LOG_INFO, "rdma %s: node %d, GID index %d, MTU %d, "
		 "%d CQs of %d on %d channels, QP depth %d, %d SGEs, inline %u",
		 c->name, c->numa_node, c->gid_index, 128 << c->mtu, c->ncq,
		 c->cqe, c->nchan, c->max_wr, c->max_sge, c->max_inline);
	return 0;
}

/* End the slices of a list: @p st for each. */
static void end_list(struct xfer_slice *s, enum xfer_status st)
{
	struct xfer_slice *next;

	for (; s; s = next) {
		next = s->next;
		xfer_slice_done(s, st);
	}
}

static void free_ep_list(struct rdma_ep_list *l)
{
	struct rdma_ep *ep;

	while ((ep = TAILQ_FIRST(l))) {
		TAILQ_REMOVE(l, ep, link);
		end_list(ep->wait_head, XFER_CANCELED);
		ep->wait_head = NULL;
		xfer_rdma_ep_free(ep);
	}
}

void xfer_rdma_ctx_close(struct rdma_ctx *c)
{
	if (c->r == &c->own) {
		xfer_reactor_stop(&c->own);
		xfer_reactor_destroy(&c->own);
	}
	if (c->async_ev)
		event_free(c->async_ev);
	if (c->timer_ev)
		event_free(c->timer_ev);
	end_list(c->in_head, XFER_CANCELED);
	xfer_rdma_cq_flush(c);
	free_ep_list(&c->pool.eps);
	free_ep_list(&c->retired);
	xfer_rdma_cq_close(c);
	if (c->pd)
		ibv_dealloc_pd(c->pd);
	if (c->verbs)
		ibv_close_device(c->verbs);
	free(c->nic_path);
	pthread_mutex_destroy(&c->lock);
}
