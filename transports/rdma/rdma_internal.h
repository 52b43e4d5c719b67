/*
 * RDMA transport (PROTOCOL.md §4): one context per device, each with its
 * own worker reactor pinned to the device's NUMA node; reliable-connected
 * endpoints set up through the handshake socket; one-sided READ/WRITE per
 * slice; completions through the completion channel, never polled in a
 * loop.
 *
 *   rdma.c      ops table, memory registration, descriptor, routing
 *   context.c   device, PD, CQ + completion channel, async events, worker
 *   endpoint.c  QPs, Connection handshake, posting, failure
 *   ep_pool.c   endpoints of a context by peer NIC path, SIEVE eviction
 *   topology.c  devices, NUMA nodes, priority matrix
 */
#ifndef XFER_RDMA_INTERNAL_H
#define XFER_RDMA_INTERNAL_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "engine_internal.h"
#include "topology.h"

struct hs_req;
struct rdma_ep;

/* The transport's scratch space inside a slice. */
struct rdma_slice {
	struct rdma_ep *ep;   /* where it is posted or waits */
	uint32_t rkey;
	uint16_t peer_dev;    /* index into the peer's devices */
	uint8_t ctx;          /* local context */
	uint8_t qp;           /* QP of ep it was posted on */
	uint8_t tries;        /* paths tried after a failure */
};
_Static_assert(sizeof(struct rdma_slice) <= sizeof(((struct xfer_slice *)0)->tp),
	       "slice scratch space");

static inline struct rdma_slice *rdma_slice(struct xfer_slice *s)
{
	return (struct rdma_slice *)s->tp.bytes;
}

enum rdma_ep_state {
	EP_NEW,         /* QPs in INIT, nobody asked yet */
	EP_CONNECTING,  /* our Connection request is out */
	EP_READY,       /* QPs in RTS: posting */
	EP_BROKEN,      /* QPs in ERR: posted work flushes back */
};

/* The connection from one context to one peer NIC. Only the context's
 * worker touches it. */
struct rdma_ep {
	struct rdma_ctx *ctx;
	char *peer_path;              /* "<server>@<device>" */
	char host[64];                /* peer's handshake address, "" unknown */
	uint16_t port;
	enum rdma_ep_state state;
	bool timed_out;               /* broken by the slice timeout */
	bool in_pool, visited;        /* SIEVE */
	bool touched;
	int nqp;
	struct ibv_qp **qp;
	uint32_t *peer_qpn;
	int *posted;                  /* per QP: WRs outstanding */
	int total;                    /* all QPs */
	unsigned next_qp;
	uint64_t progress_ns;         /* last completion or post */
	struct xfer_slice *wait_head, **wait_tail;
	struct hs_req *hs;            /* our Connection request in flight */
	struct rdma_ep *prev, *next;  /* pool (newest first) or retired list */
	struct rdma_ep *touch_next;
};

/* Endpoints of one context: a table by peer NIC path, SIEVE order. */
struct rdma_pool {
	size_t n, max;
	struct rdma_ep *head, *tail, *hand; /* newest at head */
};

struct rdma_ctx {
	struct xfer_transport *t;
	int index;
	char name[RDMA_DEV_NAME_MAX];
	char *nic_path;               /* "<engine>@<device>" */
	int numa_node;
	struct ibv_context *verbs;
	struct ibv_pd *pd;
	struct ibv_comp_channel *chan;
	struct ibv_cq *cq;
	int cqe;
	unsigned unacked;             /* CQ events got, not yet acked */
	uint8_t port;
	int gid_index;
	union ibv_gid gid;
	uint16_t lid;
	enum ibv_mtu mtu;
	_Atomic bool port_up;
	atomic_uint_fast64_t bytes;   /* completed as initiator */

	struct xfer_reactor own;      /* its worker, unless in plugin mode */
	struct xfer_reactor *r;       /* own or the engine's control */
	struct event *cq_ev, *async_ev, *timer_ev;

	/* lock guards the inbox; the rest is the worker's alone. */
	pthread_mutex_t lock;
	struct xfer_slice *in_head, **in_tail; /* from submitters */
	bool kick_pending;
	struct xfer_job kick;
	pthread_cond_t accepted;      /* a passive Connection was answered */

	int outstanding;              /* WRs posted, not completed */
	struct rdma_pool pool;
	struct rdma_ep *retired;      /* out of the pool, freed when idle */
};

/* A peer as seen by the transport (one per open segment and descriptor). */
struct rdma_seg {
	char host[64];                /* numeric, for the handshake */
	uint16_t port;
	size_t ndevs;
	struct rdma_matrix matrix;    /* the peer's, over its devices */
	_Atomic uint64_t *paused;     /* [ctx * ndevs + dev]: until, ns */
};

struct xfer_transport {
	struct xfer_engine *e;
	struct rdma_topo topo;
	int nctx;                     /* at most XFER_DESC_MAX_DEVS */
	struct rdma_ctx *ctx;
	struct xfer_desc_dev *devs;   /* published: names point into ctx */
	atomic_uint rr;               /* spreads slices over preferred NICs */
};

/* rdma.c */
uint64_t rdma_now_ns(void);
/** Route a slice anew after a failure on its path, pausing that path (or
 *  end it with @p why when its tries are spent). Any thread. */
void rdma_retry(struct xfer_transport *t, struct xfer_slice *s,
		enum xfer_status why);
/** The peer NIC path of slice @p s into @p path, and the peer's handshake
 *  address. @return 0, -ENOENT if its segment lost that device. */
int rdma_peer_of(struct xfer_slice *s, char *path, size_t len,
		 char host[64], uint16_t *port);

/* context.c */
int rdma_ctx_open(struct xfer_transport *t, struct rdma_ctx *c, int index);
void rdma_ctx_close(struct rdma_ctx *c);
/** Queue slices (linked by ->next) for the context's worker. Any thread. */
void rdma_ctx_enqueue(struct rdma_ctx *c, struct xfer_slice *head,
		      struct xfer_slice **tail);

/* endpoint.c: on the context's worker unless said otherwise */
struct rdma_ep *rdma_ep_new(struct rdma_ctx *c, const char *peer_path);
/** Queue slice @p s on @p ep and post what the QPs allow. */
void rdma_ep_push(struct rdma_ep *ep, struct xfer_slice *s);
/** Post waiting slices while the QPs and the CQ have room. */
void rdma_ep_progress(struct rdma_ep *ep);
/** Mark broken: QPs to the error state (posted work flushes back), waiting
 *  slices rerouted; out of the pool. */
void rdma_ep_break(struct rdma_ep *ep, const char *why);
/** One completion of a WR posted on @p ep. */
void rdma_ep_completed(struct rdma_ep *ep, struct xfer_slice *s,
		       enum ibv_wc_status st);
/** Move @p ep out of the pool; freed once idle. */
void rdma_ep_retire(struct rdma_ep *ep);
/** Free @p ep if it is retired and idle; @return whether it was freed. */
bool rdma_ep_reap(struct rdma_ep *ep);
/** Break every endpoint stalled for longer than the transfer timeout. */
void rdma_ep_check_timeouts(struct rdma_ctx *c, uint64_t now);
/** Answer a passive Connection request (on the worker). */
int rdma_ep_accept(struct rdma_ctx *c, const struct xfer_hs_conn *req,
		   struct xfer_hs_conn *reply);
/** Free an endpoint now (context closing). */
void rdma_ep_free(struct rdma_ep *ep);

/* ep_pool.c (on the worker) */
struct rdma_ep *rdma_pool_get(struct rdma_pool *p, const char *peer_path);
/** Add @p ep; a full pool first evicts one (SIEVE), returned to retire. */
struct rdma_ep *rdma_pool_add(struct rdma_pool *p, struct rdma_ep *ep);
void rdma_pool_remove(struct rdma_pool *p, struct rdma_ep *ep);

#endif
