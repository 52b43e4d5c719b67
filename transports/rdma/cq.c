/*
 * The completion queues of a context and their completion channels
 * (Mooncake's MC_NUM_CQ_PER_CTX and MC_NUM_COMP_CHANNELS_PER_CTX): CQ i
 * reports to channel i % nchan, and each channel is one persistent event
 * on the context's worker reactor. Completions follow rdma-core's event
 * mode (ibv_get_cq_event(3)): get events until EAGAIN, re-arm the CQs
 * that fired, poll them dry, ack in batches. Nothing polls in a loop.
 * Everything here runs on the context's worker.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <event2/event.h>

#include "transports/rdma/rdma_internal.h"

#define ACK_BATCH 64 /* CQ events acked at once: ibv_ack_cq_events locks */
#define POLL_BATCH 32

int xfer_rdma_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) ? -errno : 0;
}

/* Hand each completion to its endpoint; @return how many were polled. */
static int poll_dry(struct rdma_cq *q)
{
	struct ibv_wc wc[POLL_BATCH];
	int n, total = 0;

	while ((n = ibv_poll_cq(q->cq, POLL_BATCH, wc)) > 0) {
		total += n;
		for (int i = 0; i < n; i++) {
			struct xfer_slice *s = (void *)(uintptr_t)wc[i].wr_id;

			xfer_rdma_ep_completed(rdma_slice(s)->ep, s,
					       wc[i].status);
		}
	}
	return total;
}

static void on_chan(evutil_socket_t fd, short what, void *arg)
{
	struct rdma_chan *ch = arg;
	struct rdma_ctx *c = ch->ctx;
	struct ibv_cq *cq;
	void *cq_ctx;

	(void)fd;
	(void)what;
	while (!ibv_get_cq_event(ch->ch, &cq, &cq_ctx)) {
		struct rdma_cq *q = cq_ctx;

		q->unacked++;
		q->fired = true;
		atomic_fetch_add_explicit(&q->events, 1, memory_order_relaxed);
	}
	/* The CQs of this channel: index, index + nchan, ... */
	for (int i = ch->index; i < c->ncq; i += c->nchan) {
		struct rdma_cq *q = &c->cqs[i];

		if (!q->fired)
			continue;
		q->fired = false;
		ibv_req_notify_cq(q->cq, 0);
		/* Poll after re-arming: a completion may have raced with it. */
		atomic_fetch_add_explicit(&q->wcs, (uint64_t)poll_dry(q),
					  memory_order_relaxed);
		if (q->unacked >= ACK_BATCH) {
			ibv_ack_cq_events(q->cq, q->unacked);
			q->unacked = 0;
		}
	}
	xfer_rdma_ep_progress_all(c);
}

int xfer_rdma_cq_open(struct rdma_ctx *c)
{
	struct event_base *base = c->r->base;
	int ret;

	c->chans = calloc((size_t)c->nchan, sizeof(*c->chans));
	c->cqs = calloc((size_t)c->ncq, sizeof(*c->cqs));
	if (!c->chans || !c->cqs)
		return -ENOMEM;
	for (int i = 0; i < c->nchan; i++) {
		struct rdma_chan *ch = &c->chans[i];

		ch->ctx = c;
		ch->index = i;
		ch->ch = ibv_create_comp_channel(c->verbs);
		if (!ch->ch)
			return errno ? -errno : -EIO;
		ret = xfer_rdma_nonblock(ch->ch->fd);
		if (ret)
			return ret;
		ch->ev = event_new(base, ch->ch->fd, EV_READ | EV_PERSIST,
				   on_chan, ch);
		if (!ch->ev || event_add(ch->ev, NULL))
			return -ENOMEM;
	}
	for (int i = 0; i < c->ncq; i++) {
		struct rdma_cq *q = &c->cqs[i];

		q->chan = &c->chans[i % c->nchan];
		q->cq = ibv_create_cq(c->verbs, c->cqe, q, q->chan->ch,
				      i % (c->verbs->num_comp_vectors > 0 ?
					   c->verbs->num_comp_vectors : 1));
		if (!q->cq)
			return errno ? -errno : -ENOMEM;
		ret = ibv_req_notify_cq(q->cq, 0);
		if (ret)
			return -ret;
	}
	return 0;
}

/* Every endpoint of the context. */
static void qps_to_error(struct rdma_ctx *c)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	struct rdma_ep_list *lists[] = { &c->pool.eps, &c->retired };
	struct rdma_ep *ep;

	for (int list = 0; list < 2; list++)
		TAILQ_FOREACH(ep, lists[list], link)
			for (int i = 0; i < ep->nqp; i++)
				ibv_modify_qp(ep->qp[i].qp, &a, IBV_QP_STATE);
}

static int outstanding(const struct rdma_ctx *c)
{
	int n = 0;

	for (int i = 0; i < c->ncq; i++)
		n += c->cqs[i].outstanding;
	return n;
}

void xfer_rdma_cq_flush(struct rdma_ctx *c)
{
	struct ibv_wc wc[POLL_BATCH];
	int n, got, waited = 0;

	if (!c->cqs)
		return;
	qps_to_error(c);
	while (outstanding(c) > 0 && waited < 1000) {
		got = 0;
		for (int i = 0; i < c->ncq; i++) {
			if (!c->cqs[i].cq)
				continue;
			n = ibv_poll_cq(c->cqs[i].cq, POLL_BATCH, wc);
			for (int k = 0; k < n; k++) {
				struct xfer_slice *s =
					(void *)(uintptr_t)wc[k].wr_id;
				struct rdma_slice *rs = rdma_slice(s);

				xfer_rdma_post_done(rs->ep, rs->qp, s,
						    wc[k].status, false);
			}
			got += n > 0 ? n : 0;
		}
		if (!got) {
			usleep(1000);
			waited++;
		}
	}
}

void xfer_rdma_cq_close(struct rdma_ctx *c)
{
	for (int i = 0; c->chans && i < c->nchan; i++)
		if (c->chans[i].ev)
			event_free(c->chans[i].ev);
	for (int i = 0; c->cqs && i < c->ncq; i++) {
		struct rdma_cq *q = &c->cqs[i];

		if (!q->cq)
			continue;
		if (q->unacked)
			ibv_ack_cq_events(q->cq, q->unacked);
		ibv_destroy_cq(q->cq);
	}
	for (int i = 0; c->chans && i < c->nchan; i++)
		if (c->chans[i].ch)
			ibv_destroy_comp_channel(c->chans[i].ch);
	free(c->cqs);
	free(c->chans);
	c->cqs = NULL;
	c->chans = NULL;
}
