/*
 * The endpoints of one context, by peer NIC path, at most max of them.
 * Eviction is SIEVE (Zhang et al., NSDI '24): a hit only sets a bit; the
 * hand walks from the oldest end, clearing bits, and evicts the first
 * endpoint not used since its last pass. Lists stay in insertion order.
 */
#include <string.h>

#include "rdma_internal.h"

struct rdma_ep *rdma_pool_get(struct rdma_pool *p, const char *peer_path)
{
	for (struct rdma_ep *ep = p->head; ep; ep = ep->next)
		if (!strcmp(ep->peer_path, peer_path)) {
			ep->visited = true;
			return ep;
		}
	return NULL;
}

void rdma_pool_remove(struct rdma_pool *p, struct rdma_ep *ep)
{
	if (p->hand == ep)
		p->hand = ep->prev;
	if (ep->prev)
		ep->prev->next = ep->next;
	else
		p->head = ep->next;
	if (ep->next)
		ep->next->prev = ep->prev;
	else
		p->tail = ep->prev;
	ep->prev = ep->next = NULL;
	ep->in_pool = false;
	p->n--;
}

/* The SIEVE victim: the first unvisited endpoint from the hand towards the
 * newest, wrapping to the oldest. */
static struct rdma_ep *victim(struct rdma_pool *p)
{
	struct rdma_ep *ep = p->hand ? p->hand : p->tail;

	while (ep->visited) {
		ep->visited = false;
		ep = ep->prev ? ep->prev : p->tail;
	}
	return ep;
}

struct rdma_ep *rdma_pool_add(struct rdma_pool *p, struct rdma_ep *ep)
{
	struct rdma_ep *out = NULL;

	if (p->n >= p->max && p->tail) {
		out = victim(p);
		p->hand = out; /* the hand moves on to the next older one */
		rdma_pool_remove(p, out);
	}
	ep->prev = NULL;
	ep->next = p->head;
	if (p->head)
		p->head->prev = ep;
	else
		p->tail = ep;
	p->head = ep;
	ep->in_pool = true;
	ep->visited = false;
	p->n++;
	return out;
}
