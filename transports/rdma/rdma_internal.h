/*
 * RDMA transport (PROTOCOL.md §4): one context per device, each with its
 * own worker reactor pinned to the device's NUMA node; reliable-connected
 * endpoints set up through the handshake socket; one-sided READ/WRITE per
 * slice; completions through the completion channel, never polled in a
 * loop.
 *
 *   rdma.c      ops table, knobs, memory registration, the Connection
 *               requests of the handshake socket
 *   route.c     each slice to a (local NIC, peer NIC) path, retries
 *   context.c   device, PD, CQ + completion channel, async events, worker
 *   endpoint.c  QPs, Connection handshake, posting, failure
 *   ep_pool.c   endpoints of a context by peer NIC path, SIEVE eviction
 *   topology.c  devices, NUMA nodes, priority matrix
 *   desc.c      the descriptor's RDMA fields, GIDs, matrix JSON
 *
 * Calls go one way: rdma.c → context.c → endpoint.c → route.c, ep_pool.c;
 * route.c hands slices to a context through its inbox and kick job.
 */
#ifndef XFER_RDMA_INTERNAL_H
#define XFER_RDMA_INTERNAL_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/queue.h>

#include "transports/rdma/desc_internal.h"
#include "transports/rdma/topology_internal.h"
#include "transports/transport.h"

struct xfer_hs_conn;
struct xfer_hs_req;
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

TAILQ_HEAD(rdma_ep_list, rdma_ep);

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
	struct xfer_hs_req *hs;       /* our Connection request in flight */
	TAILQ_ENTRY(rdma_ep) link;    /* pool (newest first) or retired */
	struct rdma_ep *touch_next;
};

/* Endpoints of one context: a table by peer NIC path, SIEVE order. */
struct rdma_pool {
	size_t n, max;
	struct rdma_ep_list eps;      /* newest first */
	struct rdma_ep *hand;
};

struct rdma_ctx {
	struct rdma_transport *t;
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

	int outstanding;              /* WRs posted, not completed */
	struct rdma_pool pool;
	struct rdma_ep_list retired;  /* out of the pool, freed when idle */
};

/* A peer as seen by the transport (one per open segment and descriptor). */
struct rdma_seg {
	char host[64];                /* numeric, for the handshake */
	uint16_t port;
	size_t ndevs;
	struct rdma_matrix matrix;    /* the peer's, over its devices */
	_Atomic uint64_t *paused;     /* [ctx * ndevs + dev]: until, ns */
};

/* The knobs of ops->knobs, in order. */
enum {
	K_DEVICES, K_MATRIX, K_QPS, K_MAX_EP, K_RETRY, K_GID, K_MTU, K_MAX_WR,
	K_MAX_CQE, K_IB_PORT, K_PIN, K_PAUSE,
};

struct rdma_transport {
	struct xfer_transport base;
	const union xfer_knob_val *k; /* base.env->knobs */
	struct rdma_topo topo;
	int nctx;                     /* at most XFER_RDMA_MAX_DEVS */
	struct rdma_ctx *ctx;
	struct xfer_rdma_desc desc;   /* published: names point into ctx */
	atomic_uint rr;               /* spreads slices over preferred NICs */
};

/* A registered buffer: its MR on each device, and their keys as the
 * descriptor publishes them. */
struct rdma_mem {
	struct ibv_mr **mrs;
	struct xfer_rdma_keys keys;
};

/* route.c: any thread */
uint64_t xfer_rdma_now_ns(void);
/** Route the @p n slices of one task and hand them to their contexts. */
void xfer_rdma_submit(struct rdma_transport *t, struct xfer_segment *seg,
		      struct xfer_slice *s, size_t n);
/** Route a slice anew after a failure on its path, pausing that path (or
 *  end it with @p why when its tries are spent). */
void xfer_rdma_retry(struct rdma_transport *t, struct xfer_slice *s,
		     enum xfer_status why);
/** The peer NIC path of slice @p s into @p path, and the peer's handshake
 *  address. @return 0, -ENOENT if its segment lost that device. */
int xfer_rdma_peer_of(struct xfer_slice *s, char *path, size_t len,
		      char host[64], uint16_t *port);

/* context.c */
int xfer_rdma_ctx_open(struct rdma_transport *t, struct rdma_ctx *c,
		       int index);
void xfer_rdma_ctx_close(struct rdma_ctx *c);
/** End the waiting slices of canceled tasks, on the context's worker. */
void xfer_rdma_ctx_cancel(struct rdma_ctx *c);

/* endpoint.c: on the context's worker */
struct rdma_ep *xfer_rdma_ep_new(struct rdma_ctx *c, const char *peer_path);
/** Queue slice @p s on @p ep and post what the QPs allow. */
void xfer_rdma_ep_push(struct rdma_ep *ep, struct xfer_slice *s);
/** Post waiting slices while the QPs and the CQ have room. */
void xfer_rdma_ep_progress(struct rdma_ep *ep);
/** Mark broken: QPs to the error state (posted work flushes back), waiting
 *  slices rerouted; out of the pool. */
void xfer_rdma_ep_break(struct rdma_ep *ep, const char *why);
/** One completion of a WR posted on @p ep. */
void xfer_rdma_ep_completed(struct rdma_ep *ep, struct xfer_slice *s,
			    enum ibv_wc_status st);
/** Move @p ep out of the pool; freed once idle. */
void xfer_rdma_ep_retire(struct rdma_ep *ep);
/** Free @p ep if it is retired and idle; @return whether it was freed. */
bool xfer_rdma_ep_reap(struct rdma_ep *ep);
/** Break every endpoint stalled for longer than the transfer timeout. */
void xfer_rdma_ep_check_timeouts(struct rdma_ctx *c, uint64_t now);
/** Answer a passive Connection request. */
int xfer_rdma_ep_accept(struct rdma_ctx *c, const struct xfer_hs_conn *req,
			struct xfer_hs_conn *reply);
/** Free an endpoint now (context closing). */
void xfer_rdma_ep_free(struct rdma_ep *ep);

/* ep_pool.c: on the worker */
void xfer_rdma_pool_init(struct rdma_pool *p, size_t max);
struct rdma_ep *xfer_rdma_pool_get(struct rdma_pool *p, const char *peer_path);
/** Add @p ep; a full pool first evicts one (SIEVE), returned to retire. */
struct rdma_ep *xfer_rdma_pool_add(struct rdma_pool *p, struct rdma_ep *ep);
void xfer_rdma_pool_remove(struct rdma_pool *p, struct rdma_ep *ep);

#endif
