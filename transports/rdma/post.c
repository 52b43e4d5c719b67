/*
 * Work requests: the slices waiting on an endpoint go out to one QP as a
 * chain, one ibv_post_send per chain. A WR gathers adjacent slices (one
 * opcode, one remote buffer, each next slice starting where the one
 * before ends remotely) with one SGE each, up to the QP's max_sge and the
 * port's largest message; a WRITE of at most max_inline bytes goes
 * inline. Selective signalling: only the last WR of a chain, and every
 * RDMA_SIGNAL_EVERY-th on the QP, asks for a completion. A QP completes
 * its WRs in order, so one completion ends every WR posted before it:
 * each QP keeps its posted slices in order (rdma_qp.sent), and a
 * completion takes them off up to its own. Send queue slots, CQ room and
 * the endpoint's count are freed there too, so neither the send queue
 * nor the CQ can overflow (every WR may still come back on its own: a
 * failed one always does). Everything here runs on the context's worker.
 */
#include <errno.h>

#include "transports/rdma/rdma_internal.h"

#define POST_CHAIN 64  /* WRs per ibv_post_send */
#define POST_SGES 256  /* SGEs per ibv_post_send */

/* May @p s join the WR that @p last ends, which holds @p nsge slices of
 * @p len bytes, at most @p max_sge? */
static bool gathers(const struct rdma_ctx *c, struct xfer_slice *last,
		    struct xfer_slice *s, int nsge, int max_sge, uint64_t len)
{
	return nsge < max_sge && s->opcode == last->opcode &&
	       s->remote == last->remote + last->len &&
	       rdma_slice(s)->rkey == rdma_slice(last)->rkey &&
	       len + s->len <= c->max_msg;
}

/* One WR from the slices starting at @p s, its SGEs from @p sge; the
 * slices it took are marked (wr_end on its last). @return the slice after
 * them. */
static struct xfer_slice *build_wr(struct rdma_ctx *c, int q,
				   struct xfer_slice *s, struct ibv_send_wr *w,
				   struct ibv_sge *sge, int max_sge)
{
	struct xfer_slice *first = s, *last;
	uint64_t len = 0;
	int k = 0;

	do {
		struct rdma_mem *m = s->task->source->tp_mem;

		sge[k++] = (struct ibv_sge){
			.addr = (uintptr_t)s->local,
			.length = s->len,
			.lkey = m->keys.lkey[c->index],
		};
		len += s->len;
		rdma_slice(s)->qp = (uint8_t)q;
		rdma_slice(s)->wr_end = false;
		last = s;
		s = s->next;
	} while (s && gathers(c, last, s, k, max_sge, len));
	rdma_slice(last)->wr_end = true;
	*w = (struct ibv_send_wr){
		.wr_id = (uintptr_t)last,
		.sg_list = sge,
		.num_sge = k,
		.opcode = first->opcode == XFER_WRITE ? IBV_WR_RDMA_WRITE
						      : IBV_WR_RDMA_READ,
		.wr.rdma = { .remote_addr = first->remote,
			     .rkey = rdma_slice(first)->rkey },
	};
	if (first->opcode == XFER_WRITE && len <= c->max_inline) {
		w->send_flags = IBV_SEND_INLINE;
		atomic_fetch_add_explicit(&c->inline_wrs, 1,
					  memory_order_relaxed);
	}
	if (k > 1)
		atomic_fetch_add_explicit(&c->gathered_wrs, 1,
					  memory_order_relaxed);
	return s;
}

int xfer_rdma_post(struct rdma_ep *ep, int q, int room)
{
	struct rdma_ctx *c = ep->ctx;
	struct rdma_qp *p = &ep->qp[q];
	struct ibv_send_wr wr[POST_CHAIN], *bad = NULL;
	struct ibv_sge sge[POST_SGES];
	int max_sge = c->max_sge < POST_SGES ? c->max_sge : POST_SGES;
	struct xfer_slice *head = ep->wait_head, *s = head, *next;
	int n = 0, nsge = 0, posted, wi, ret;

	if (room > POST_CHAIN)
		room = POST_CHAIN;
	while (s && n < room && nsge + max_sge <= POST_SGES) {
		s = build_wr(c, q, s, &wr[n], &sge[nsge], max_sge);
		nsge += wr[n].num_sge;
		if (n)
			wr[n - 1].next = &wr[n];
		if (++p->unsignaled >= RDMA_SIGNAL_EVERY) {
			wr[n].send_flags |= IBV_SEND_SIGNALED;
			p->unsignaled = 0;
		}
		n++;
	}
	/* The chain's last WR is signalled: nothing is left unsignalled. */
	if (!(wr[n - 1].send_flags & IBV_SEND_SIGNALED)) {
		wr[n - 1].send_flags |= IBV_SEND_SIGNALED;
		p->unsignaled = 0;
	}
	ep->wait_head = s;
	if (!s)
		ep->wait_tail = &ep->wait_head;

	ret = ibv_post_send(p->qp, wr, &bad);
	/* WRs from bad on were not posted: their slices are routed anew. */
	posted = ret ? (bad ? (int)(bad - wr) : 0) : n;
	for (wi = 0; head != s; head = next) {
		next = head->next;
		if (wi < posted)
			xfer_slice_q_push(&p->sent, head);
		else
			xfer_rdma_retry(c->t, head, XFER_FAILED, true);
		wi += rdma_slice(head)->wr_end;
	}
	p->posted += posted;
	p->cq->outstanding += posted;
	ep->total += posted;
	return ret ? -ret : posted;
}

/* The slices of one WR, ended with @p st. */
static void end_group(struct rdma_ep *ep, struct xfer_slice_queue *g,
		      enum ibv_wc_status st, bool retry)
{
	struct rdma_ctx *c = ep->ctx;
	enum xfer_status fail = ep->timed_out ? XFER_TIMEOUT : XFER_FAILED;

	while (g->head) {
		struct xfer_slice *s = xfer_slice_q_pop(g);

		if (st == IBV_WC_SUCCESS) {
			atomic_fetch_add(&c->bytes, s->len);
			xfer_slice_done(s, XFER_COMPLETED);
		} else if (retry) {
			/* Flushed because another WR failed: not its fault. */
			xfer_rdma_retry(c->t, s, fail,
					st != IBV_WC_WR_FLUSH_ERR || !ep->blamed);
		} else {
			xfer_slice_done(s, XFER_FAILED);
		}
	}
}

int xfer_rdma_post_done(struct rdma_ep *ep, int q, struct xfer_slice *s,
			enum ibv_wc_status st, bool retry)
{
	struct rdma_qp *p = &ep->qp[q];
	/* Earlier WRs ended before this one: well, unless this is a flush
	 * (then they were flushed too, without a completion of their own). */
	enum ibv_wc_status before = st == IBV_WC_WR_FLUSH_ERR ? st
							      : IBV_WC_SUCCESS;
	struct xfer_slice_queue g;
	struct xfer_slice *x;
	int wrs = 0;

	xfer_slice_q_init(&g);
	while (p->sent.head) {
		x = xfer_slice_q_pop(&p->sent);
		xfer_slice_q_push(&g, x);
		if (!rdma_slice(x)->wr_end)
			continue;
		wrs++;
		end_group(ep, &g, x == s ? st : before, retry);
		if (x == s)
			break;
	}
	end_group(ep, &g, before, retry); /* none left: s ends a WR */
	p->posted -= wrs;
	p->cq->outstanding -= wrs;
	ep->total -= wrs;
	return wrs;
}

void xfer_rdma_post_abandon(struct rdma_ep *ep)
{
	for (int q = 0; q < ep->nqp; q++) {
		struct rdma_qp *p = &ep->qp[q];
		int wrs = 0;

		while (p->sent.head) {
			struct xfer_slice *x = xfer_slice_q_pop(&p->sent);

			wrs += rdma_slice(x)->wr_end;
			xfer_slice_done(x, XFER_FAILED);
		}
		p->posted -= wrs;
		if (p->cq)
			p->cq->outstanding -= wrs;
		ep->total -= wrs;
	}
}
