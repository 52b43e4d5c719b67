/*
 * RDMA transport (PROTOCOL.md §4): one context per device, each with its
 * own worker reactor pinned to the device's NUMA node; reliable-connected
 * endpoints set up through the handshake socket; one-sided READ/WRITE
 * work requests, each carrying one slice or several adjacent ones (one
 * SGE each), posted in chains with one signalled WR per chain or per
 * RDMA_SIGNAL_EVERY; completions through completion channels, never
 * polled in a loop.
 *
 *   rdma.c      ops table, knobs, memory registration, the Connection
 *               requests of the handshake socket, CPU of the workers
 *   route.c     each slice to a (local NIC, peer NIC) path, retries
 *   context.c   device, PD, device limits, async events, worker
 *   cq.c        the context's CQs and completion channels: events, polls
 *   endpoint.c  QPs, Connection handshake, progress, failure, timeouts
 *   post.c      work request chains (gather, inline, selective
 *               signalling) and the send queues' accounting
 *   ep_pool.c   endpoints of a context by peer NIC path, SIEVE eviction
 *   topology.c  devices, NUMA nodes, priority matrix
 *   desc.c      the descriptor's RDMA fields, GIDs, matrix JSON
 *
 * Calls go one way: rdma.c → context.c → cq.c → endpoint.c → post.c →
 * route.c, ep_pool.c; route.c hands slices to a context through its inbox
 * and kick job.
 */
#ifndef XFER_RDMA_INTERNAL_H
#define XFER_RDMA_INTERNAL_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/queue.h>

#include "core/buffers_internal.h"
#include "core/config_internal.h"
#include "core/segment_internal.h"
#include "core/slice_internal.h"
#include "core/transport.h"
#include "reactor/reactor_internal.h"
#include "transports/rdma/desc_internal.h"
#include "transports/rdma/topology_internal.h"
#include "util/log_internal.h"

struct xfer_hs_conn;
struct xfer_hs_req;
struct rdma_ep;

/* A signalled WR at least every this many on a QP, so that long chains
 * free send queue slots and complete slices as they go. */
#define RDMA_SIGNAL_EVERY 16

/* A context's timer ticks this often while it has work out (once a second
 * when idle); an endpoint with work out and no progress for RDMA_STALL_MS
 * probes the peer's handshake port: a refused connection says its process
 * is gone (QPs to a dead peer retry for ever on Soft-RoCE, for seconds on
 * hardware), and its slices fail at once. */
#define RDMA_TICK_MS 100
/* The context timer (context.c): off, once a second, every RDMA_TICK_MS */
enum { RDMA_TICK_OFF, RDMA_TICK_SLOW, RDMA_TICK_FAST };
#define RDMA_STALL_MS 200

/* The transport's scratch space inside a slice. */
struct rdma_slice {
	struct rdma_ep *ep;   /* where it is posted or waits */
	uint32_t rkey;
	uint16_t peer_dev;    /* index into the peer's devices */
	uint8_t ctx;          /* local context */
	uint8_t qp;           /* QP of ep it was posted on */
	uint8_t tries;        /* paths tried after a failure */
	bool wr_end;          /* the last slice of its work request */
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

struct rdma_ctx;

/* A completion channel of a context: one event on its worker reactor. */
struct rdma_chan {
	struct rdma_ctx *ctx;
	int index;
	struct ibv_comp_channel *ch;
	struct event *ev;
};

/* A CQ of a context, bound to channel index % nchan. The counters are
 * written by the worker and read by anyone (relaxed). */
struct rdma_cq {
	struct ibv_cq *cq;
	struct rdma_chan *chan;
	int outstanding;              /* WRs posted on its QPs, not completed */
	unsigned unacked;             /* CQ events got, not yet acked */
	bool fired;                   /* an event came; re-arm and poll it */
	atomic_uint_fast64_t events;  /* completion events so far */
	atomic_uint_fast64_t wcs;     /* work completions polled so far */
};

/* One QP of an endpoint and what is posted on it. */
struct rdma_qp {
	struct ibv_qp *qp;
	struct rdma_cq *cq;           /* its send CQ */
	int posted;                   /* WRs in its send queue, not known done */
	int unsignaled;               /* WRs posted since the last signalled */
	struct xfer_slice_queue sent; /* slices posted, in order */
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
	bool peer_gone;               /* broken as its peer's process is gone
				       * (logged once for the peer) */
	bool blamed;                  /* broken by a WR's failure: the others
				       * flushed or waiting are not to blame */
	bool in_pool, visited;        /* SIEVE */
	bool touched;
	int nqp;
	struct rdma_qp *qp;
	uint32_t *peer_qpn;
	int total;                    /* WRs outstanding on all QPs */
	unsigned next_qp;
	uint64_t progress;            /* posts and completions so far */
	uint64_t seen;                /* progress when the timer last looked */
	uint64_t seen_ns;             /* when it last changed, as the timer saw */
	uint64_t probed_ns;           /* when the last stall probe went out */
	struct xfer_slice *wait_head, **wait_tail;
	struct xfer_hs_req *hs;       /* our Connection request in flight */
	struct xfer_hs_req *probe;    /* a stall's Probe in flight */
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
	int nchan, ncq;
	struct rdma_chan *chans;
	struct rdma_cq *cqs;
	unsigned next_cq;             /* QPs spread over the CQs */
	int cqe;                      /* entries of each CQ */
	/* What each QP is made with: the knobs within the device's limits. */
	int max_wr;                   /* send queue depth */
	int max_sge;                  /* SGEs per WR: slices one WR gathers */
	uint32_t max_inline;          /* bytes a WRITE may carry inline */
	uint32_t max_msg;             /* bytes one WR may move */
	atomic_uint_fast64_t inline_wrs; /* WRs posted with inline data */
	atomic_uint_fast64_t gathered_wrs; /* WRs carrying several slices */
	uint8_t port;
	int gid_index;
	union ibv_gid gid;
	uint16_t lid;
	enum ibv_mtu mtu;
	_Atomic bool port_up;
	atomic_uint_fast64_t bytes;   /* completed as initiator */

	struct xfer_reactor own;      /* its worker, unless in plugin mode */
	struct xfer_reactor *r;       /* own or the engine's control */
	struct event *async_ev, *timer_ev;
	int tick;                     /* RDMA_TICK_*: how the timer runs */

	/* lock guards the inbox; the rest is the worker's alone. */
	pthread_mutex_t lock;
	struct xfer_slice *in_head, **in_tail; /* from submitters */
	bool kick_pending;
	struct xfer_job kick;

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
	_Atomic bool gone;            /* its handshake port refused us: the
				       * process is gone, its slices fail */
};

/* The knobs of ops->knobs, in order. */
enum {
	K_DEVICES, K_MATRIX, K_QPS, K_MAX_EP, K_RETRY, K_GID, K_MTU, K_MAX_WR,
	K_MAX_CQE, K_IB_PORT, K_PIN, K_PAUSE, K_NUM_CQ, K_NUM_CHAN, K_MAX_SGE,
	K_MAX_INLINE,
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
 *  end it with @p why when its tries are spent). The failure @p counts as
 *  one of its tries unless it was another's (flushed behind a WR that
 *  failed, or waiting on the endpoint that WR broke). */
void xfer_rdma_retry(struct rdma_transport *t, struct xfer_slice *s,
		     enum xfer_status why, bool counts);
/** The peer of segment @p seg is gone (@p why: its handshake port refused
 *  a connection): its slices fail from now on instead of being routed,
 *  retried included; logged once per peer. Any thread. */
void xfer_rdma_peer_gone(struct xfer_segment *seg, const char *why);
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

/* cq.c: on the context's worker (or before it runs) */
/** O_NONBLOCK on @p fd. @return 0 or -errno. Any thread. */
int xfer_rdma_nonblock(int fd);
/** Make the context's channels and CQs (ncq, nchan, cqe set), arm the CQs
 *  and add one event per channel to the worker's base. @return 0,
 *  -ENOMEM, -EIO. */
int xfer_rdma_cq_open(struct rdma_ctx *c);
/** QPs to the error state; end what they had posted (waiting at most a
 *  second for the device's flushes) as FAILED. The worker is stopped. */
void xfer_rdma_cq_flush(struct rdma_ctx *c);
/** Free the events, ack what was got, destroy the CQs and channels. */
void xfer_rdma_cq_close(struct rdma_ctx *c);

/* endpoint.c: on the context's worker */
/** The QP capabilities the device grants (c->max_inline, probing with a
 *  QP on CQ 0); before any endpoint. @return 0 or -errno. */
int xfer_rdma_qp_caps(struct rdma_ctx *c);
struct rdma_ep *xfer_rdma_ep_new(struct rdma_ctx *c, const char *peer_path);
/** Queue slice @p s on @p ep and post what the QPs allow. */
void xfer_rdma_ep_push(struct rdma_ep *ep, struct xfer_slice *s);
/** Post waiting slices while the QPs and their CQs have room. */
void xfer_rdma_ep_progress(struct rdma_ep *ep);
/** Every endpoint of @p c with waiting slices posts what now fits; idle
 *  retired ones are freed. */
void xfer_rdma_ep_progress_all(struct rdma_ctx *c);
/** Mark broken: QPs to the error state (posted work flushes back), waiting
 *  slices rerouted; out of the pool. */
void xfer_rdma_ep_break(struct rdma_ep *ep, const char *why);
/** One work completion: the WR of @p ep whose last slice is @p s (its
 *  wr_id) ended with @p st; so did every WR posted before it on that QP
 *  (selective signalling). May break and free @p ep. */
void xfer_rdma_ep_completed(struct rdma_ep *ep, struct xfer_slice *s,
			    enum ibv_wc_status st);
/** Move @p ep out of the pool; freed once idle. */
void xfer_rdma_ep_retire(struct rdma_ep *ep);
/** Free @p ep if it is retired and idle; @return whether it was freed. */
bool xfer_rdma_ep_reap(struct rdma_ep *ep);
/** On each tick: break every endpoint stalled for longer than the
 *  transfer timeout, probe the peers of those stalled for RDMA_STALL_MS.
 *  @return whether any endpoint has work out or waiting. */
bool xfer_rdma_ep_check(struct rdma_ctx *c, uint64_t now);
/** Answer a passive Connection request. */
int xfer_rdma_ep_accept(struct rdma_ctx *c, const struct xfer_hs_conn *req,
			struct xfer_hs_conn *reply);
/** Free an endpoint now (context closing). */
void xfer_rdma_ep_free(struct rdma_ep *ep);

/* post.c: on the context's worker */
/**
 * Post the slices waiting on @p ep to QP @p q as one chain of at most
 * @p room WRs: adjacent slices of one opcode and remote buffer gathered
 * into a WR (up to max_sge, max_msg bytes), WRITEs up to max_inline bytes
 * inline, the last WR and every RDMA_SIGNAL_EVERY-th signalled. Counts
 * them in the QP's, the CQ's and the endpoint's accounting.
 * @return WRs posted (> 0), or the -errno of ibv_post_send (the slices
 *         it refused are rerouted; those before them stay posted).
 */
int xfer_rdma_post(struct rdma_ep *ep, int q, int room);
/**
 * Take the slices of QP @p q of @p ep up to @p s, the last slice of a WR
 * that completed with @p st, off the QP's sent queue: those of earlier
 * WRs ended before it (COMPLETED, or flushed when @p st is a flush), those
 * of its WR end with @p st. A failure reroutes the slice when @p retry,
 * else ends it FAILED. @return the WRs freed.
 */
int xfer_rdma_post_done(struct rdma_ep *ep, int q, struct xfer_slice *s,
			enum ibv_wc_status st, bool retry);
/** End every slice still posted on @p ep's QPs as FAILED (freeing). */
void xfer_rdma_post_abandon(struct rdma_ep *ep);

/* ep_pool.c: on the worker */
void xfer_rdma_pool_init(struct rdma_pool *p, size_t max);
struct rdma_ep *xfer_rdma_pool_get(struct rdma_pool *p, const char *peer_path);
/** Add @p ep; a full pool first evicts one (SIEVE), returned to retire. */
struct rdma_ep *xfer_rdma_pool_add(struct rdma_pool *p, struct rdma_ep *ep);
void xfer_rdma_pool_remove(struct rdma_pool *p, struct rdma_ep *ep);

#endif
