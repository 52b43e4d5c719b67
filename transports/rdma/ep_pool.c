/*
 * The endpoints of one context, by peer NIC path, at most max of them.
 * Eviction is SIEVE (Zhang et al., NSDI '24): a hit only sets a bit; the
 * hand walks from the oldest end, clearing bits, and evicts the first
 * endpoint not used since its last pass. Lists stay in insertion order.
 */
#include <string.h>

#include "transports/rdma/rdma_internal.h"

void xfer_rdma_pool_init(struct rdma_pool *p, size_t max)
{
	memset(p, 0, sizeof(*p));
	p->max = max;
	TAILQ_INIT(&p->eps);
}

struct rdma_ep *xfer_rdma_pool_get(struct rdma_pool *p, const char *peer_path)
{
	struct rdma_ep *ep;

	TAILQ_FOREACH(ep, &p->eps, link)
		if (!strcmp(ep->peer_path, peer_path)) {
			ep->visited = true;
			return ep;
		}
	return NULL;
}

void xfer_rdma_pool_remove(struct rdma_pool *p, struct rdma_ep *ep)
{
	if (p->hand == ep)
		p->hand = TAILQ_PREV(ep, rdma_ep_list, link);
	TAILQ_REMOVE(&p->eps, ep, link);
	ep->in_pool = false;
	p->n--;
}

/* The SIEVE victim: the first unvisited endpoint from the hand towards the
 * newest, wrapping to the oldest. */
static struct rdma_ep *victim(struct rdma_pool *p)
{
	struct rdma_ep *oldest = TAILQ_LAST(&p->eps, rdma_ep_list);
	struct rdma_ep *ep = p->hand ? p->hand : oldest;

	while (ep->visited) {
		ep->visited = false;
		ep = TAILQ_PREV(ep, rdma_ep_list, link);
		if (!ep)
			ep = oldest;
	}
	return ep;
}

struct rdma_ep *xfer_rdma_pool_add(struct rdma_pool *p, struct rdma_ep *ep)
{
	struct rdma_ep *out = NULL;

	if (p->n >= p->max && !TAILQ_EMPTY(&p->eps)) {
		out = victim(p);
		p->hand = out; /* the hand moves on to the next newer one */
		xfer_rdma_pool_remove(p, out);
	}
	TAILQ_INSERT_HEAD(&p->eps, ep, link);
	ep->in_pool = true;
	ep->visited = false;
	p->n++;
	return out;
}
