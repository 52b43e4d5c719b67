/*
 * Endpoints: reliable-connected QPs to one peer NIC, brought up through a
 * Connection exchange on the handshake socket (PROTOCOL.md §4); their
 * waiting slices go out as chains of work requests (post.c) while the
 * QPs' send queues and their CQs have room. One that stalls probes the
 * peer's handshake port: refused, the peer is gone. Everything here runs
 * on the context's worker.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/handshake_internal.h"
#include "transports/rdma/rdma_internal.h"

static const char *state_name(enum rdma_ep_state s)
{
	static const char *const names[] = { "new", "connecting", "ready",
					     "broken" };
	return names[s];
}

static int qp_init(struct rdma_ctx *c, struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = c->port,
		.pkey_index = 0,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE |
				   IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_ATOMIC,
	};

	return -ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			      IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

/* INIT → RTR → RTS towards the peer's QP @p qpn (attributes of §4). */
static int qp_connect(struct rdma_ctx *c, struct ibv_qp *qp, uint32_t qpn,
		      const uint8_t gid[16], uint16_t lid)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = c->mtu,
		.dest_qp_num = qpn,
		.rq_psn = 0,
		.max_dest_rd_atomic = 16,
		.min_rnr_timer = 12,
		.ah_attr = {
			.is_global = 1,
			.dlid = lid,
			.port_num = c->port,
			.grh = {
				.sgid_index = (uint8_t)c->gid_index,
				.hop_limit = 16,
			},
		},
	};
	int ret;

	memcpy(a.ah_attr.grh.dgid.raw, gid, 16);
	ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			    IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (ret)
		return -ret;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0;
	a.max_rd_atomic = 16;
	return -ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
			      IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			      IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

void xfer_rdma_ep_free(struct rdma_ep *ep)
{
	if (ep->hs)
		xfer_handshake_cancel(ep->hs);
	if (ep->probe)
		xfer_handshake_cancel(ep->probe);
	if (ep->qp)
		xfer_rdma_post_abandon(ep);
	for (int i = 0; ep->qp && i < ep->nqp; i++)
		if (ep->qp[i].qp)
			ibv_destroy_qp(ep->qp[i].qp);
	free(ep->qp);
	free(ep->peer_qpn);
	free(ep->peer_path);
	free(ep);
}

/* A QP's attributes: the context's depth, SGEs and inline size, on @p cq;
 * one-sided only, so nothing is ever received. */
static struct ibv_qp_init_attr qp_attr(const struct rdma_ctx *c,
				       struct ibv_cq *cq, uint32_t inline_len)
{
	return (struct ibv_qp_init_attr){
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 0,
		.cap = {
			.max_send_wr = (uint32_t)c->max_wr,
			.max_recv_wr = 1,
			.max_send_sge = (uint32_t)c->max_sge,
			.max_recv_sge = 1,
			.max_inline_data = inline_len,
		},
	};
}

int xfer_rdma_qp_caps(struct rdma_ctx *c)
{
	uint32_t want = (uint32_t)c->t->k[K_MAX_INLINE].num;
	struct ibv_qp_init_attr qa;
	struct ibv_qp *qp;

	/* No device attribute says it: ask for less until a QP is made. */
	for (uint32_t len = want;; len /= 2) {
		qa = qp_attr(c, c->cqs[0].cq, len);
		qp = ibv_create_qp(c->pd, &qa);
		if (qp) {
			ibv_destroy_qp(qp);
			c->max_inline = len;
			if (len < want)
				xfer_log(XFER_LOG_INFO, "rdma %s: max_inline %u "
					 "is over the device's: %u", c->name,
					 want, len);
			return 0;
		}
		if (!len)
			return errno ? -errno : -EINVAL;
	}
}

struct rdma_ep *xfer_rdma_ep_new(struct rdma_ctx *c, const char *peer_path)
{
	struct rdma_ep *ep = calloc(1, sizeof(*ep));
	int ret, n = (int)c->t->k[K_QPS].num;

	if (!ep)
		return NULL;
	ep->ctx = c;
	ep->nqp = n;
	ep->wait_tail = &ep->wait_head;
	ep->peer_path = strdup(peer_path);
	ep->qp = calloc(n, sizeof(*ep->qp));
	ep->peer_qpn = calloc(n, sizeof(*ep->peer_qpn));
	if (!ep->peer_path || !ep->qp || !ep->peer_qpn)
		goto err_free;
	for (int i = 0; i < n; i++) {
		struct rdma_qp *p = &ep->qp[i];
		struct ibv_qp_init_attr qa;

		/* The QPs of the context take the CQs in turn. */
		p->cq = &c->cqs[c->next_cq++ % (unsigned)c->ncq];
		xfer_slice_q_init(&p->sent);
		qa = qp_attr(c, p->cq->cq, c->max_inline);
		qa.qp_context = ep;
		p->qp = ibv_create_qp(c->pd, &qa);
		ret = p->qp ? qp_init(c, p->qp) : -errno;
		if (ret || !p->qp) {
			xfer_log(XFER_LOG_ERROR, "rdma %s: create QP: %s", c->name,
				 strerror(-ret));
			goto err_free;
		}
	}
	return ep;

err_free:
	xfer_rdma_ep_free(ep);
	return NULL;
}

/* Our side of a Connection body; strings malloc'd. */
static int describe_self(struct rdma_ep *ep, struct xfer_hs_conn *m,
			 bool ready_ack)
{
	struct rdma_ctx *c = ep->ctx;
	char gid[48];

	xfer_rdma_gid_format(c->gid.raw, gid);
	memset(m, 0, sizeof(*m));
	m->local_gid = strdup(gid);
	m->local_lid = c->lid;
	m->local_nic_path = strdup(c->nic_path);
	m->peer_nic_path = strdup(ep->peer_path);
	m->payload = strdup("");
	m->reply_msg = strdup("");
	m->nqp = (size_t)ep->nqp;
	m->qp_num = calloc(ep->nqp, sizeof(*m->qp_num));
	m->ready_ack = ready_ack;
	if (!m->local_gid || !m->local_nic_path || !m->peer_nic_path ||
	    !m->payload || !m->reply_msg || !m->qp_num) {
		xfer_hs_conn_clear(m);
		return -ENOMEM;
	}
	for (int i = 0; i < ep->nqp; i++)
		m->qp_num[i] = ep->qp[i].qp->qp_num;
	return 0;
}

/* Bring our QPs up towards the peer described by @p m. */
static int connect_qps(struct rdma_ep *ep, const struct xfer_hs_conn *m,
		       const char **why)
{
	uint8_t gid[16];
	int ret;

	if (m->nqp != (size_t)ep->nqp) {
		*why = "QP count differs";
		return -EPROTO;
	}
	if (xfer_rdma_gid_parse(m->local_gid, gid) || m->local_lid > UINT16_MAX) {
		*why = "bad GID or LID";
		return -EPROTO;
	}
	for (int i = 0; i < ep->nqp; i++) {
		ret = qp_connect(ep->ctx, ep->qp[i].qp, m->qp_num[i], gid,
				 (uint16_t)m->local_lid);
		if (ret) {
			*why = "modify QP to RTS failed";
			return ret;
		}
		ep->peer_qpn[i] = m->qp_num[i];
	}
	ep->state = EP_READY;
	ep->progress++;
	return 0;
}

static bool same_qpns(const struct rdma_ep *ep, const struct xfer_hs_conn *m)
{
	if (m->nqp != (size_t)ep->nqp)
		return false;
	for (int i = 0; i < ep->nqp; i++)
		if (ep->peer_qpn[i] != m->qp_num[i])
			return false;
	return true;
}

/* The reply of the ready_ack round carries nothing we need. */
static void ignore_reply(int err, const char *json, size_t len, void *arg)
{
	(void)err;
	(void)json;
	(void)len;
	(void)arg;
}

static struct xfer_hs_req *send_conn(struct rdma_ep *ep, bool ready_ack,
				     xfer_hs_cb cb, void *arg)
{
	struct xfer_hs_conn m;
	struct xfer_hs_req *q = NULL;
	size_t len;
	char *json;

	if (describe_self(ep, &m, ready_ack))
		return NULL;
	if (!xfer_hs_conn_encode(&m, &json, &len)) {
		q = xfer_handshake_request(ep->ctx->r->base, NULL,
					   ep->ctx->t->base.env->auth, ep->host,
					   ep->port, XFER_HS_CONNECTION, json,
					   len,
					   ep->ctx->t->base.env->handshake_max_len,
					   cb, arg);
		free(json);
	}
	xfer_hs_conn_clear(&m);
	return q;
}

/* A slice of @p ep, waiting or posted (all go to one peer), or NULL. */
static struct xfer_slice *any_slice(const struct rdma_ep *ep)
{
	if (ep->wait_head)
		return ep->wait_head;
	for (int i = 0; i < ep->nqp; i++)
		if (ep->qp[i].sent.head)
			return ep->qp[i].sent.head;
	return NULL;
}

/* The peer's handshake port refused our @p what (-ECONNREFUSED): nothing
 * listens there, its process is gone. Every slice to it fails (not
 * rerouted: no NIC reaches it) and the peer's one log line says why, so
 * this endpoint breaks without a line of its own. */
static void peer_refused(struct rdma_ep *ep, const char *what, int err)
{
	struct xfer_slice *s = any_slice(ep);
	char why[160];

	snprintf(why, sizeof(why), "%s to %s:%u: %s", what, ep->host,
		 ep->port, strerror(-err));
	if (s)
		xfer_rdma_peer_gone(s->task->segment, why);
	ep->peer_gone = true;
	xfer_rdma_ep_break(ep, why);
}

static void on_reply(int err, const char *json, size_t len, void *arg)
{
	struct rdma_ep *ep = arg;
	struct rdma_ctx *c = ep->ctx;
	struct xfer_hs_conn m = { 0 };
	const char *why = NULL;
	char msg[160];

	ep->hs = NULL;
	if (ep->state == EP_BROKEN) {
		xfer_rdma_ep_reap(ep);
		return;
	}
	if (err == -ECONNREFUSED) {
		peer_refused(ep, "handshake", err);
		return;
	}
	if (err) {
		snprintf(msg, sizeof(msg), "handshake with %s:%u: %s", ep->host,
			 ep->port, strerror(-err));
		xfer_rdma_ep_break(ep, msg);
		return;
	}
	if (xfer_hs_conn_decode(json, len, &m, msg, sizeof(msg))) {
		why = msg;
	} else if (*m.reply_msg) {
		snprintf(msg, sizeof(msg), "refused: %.120s", m.reply_msg);
		why = msg;
	} else if (strcmp(m.local_nic_path, ep->peer_path) ||
		   strcmp(m.peer_nic_path, c->nic_path)) {
		why = "reply names other NIC paths";
	} else if (ep->state == EP_READY) {
		/* The peer connected to us meanwhile: keep one connection. */
		if (!same_qpns(ep, &m))
			why = "peer QPs changed";
	} else if (!connect_qps(ep, &m, &why) && m.ready_ack) {
		send_conn(ep, true, ignore_reply, NULL);
	}
	xfer_hs_conn_clear(&m);
	if (why)
		xfer_rdma_ep_break(ep, why);
	else
		xfer_rdma_ep_progress(ep);
}

/* Start our Connection request. */
static void start_connect(struct rdma_ep *ep)
{
	if (!*ep->host) {
		xfer_rdma_ep_break(ep, "peer handshake address unknown");
		return;
	}
	ep->state = EP_CONNECTING;
	ep->hs = send_conn(ep, false, on_reply, ep);
	if (!ep->hs)
		xfer_rdma_ep_break(ep, "handshake: out of memory");
}

void xfer_rdma_ep_push(struct rdma_ep *ep, struct xfer_slice *s)
{
	rdma_slice(s)->ep = ep;
	s->next = NULL;
	*ep->wait_tail = s;
	ep->wait_tail = &s->next;
}

/* A QP with room in its send queue and its CQ, round robin, and that
 * room in *@p room; -1 if none has any. */
static int pick_qp(struct rdma_ep *ep, int *room)
{
	struct rdma_ctx *c = ep->ctx;

	for (int k = 0; k < ep->nqp; k++) {
		int q = (int)((ep->next_qp + k) % ep->nqp);
		struct rdma_qp *p = &ep->qp[q];
		int cq_room = c->cqe - p->cq->outstanding;

		/* Neither the send queue nor the CQ may overflow: every WR
		 * may come back as a completion (errors always do). */
		*room = c->max_wr - p->posted;
		if (*room > cq_room)
			*room = cq_room;
		if (*room > 0) {
			ep->next_qp = q + 1;
			return q;
		}
	}
	return -1;
}

void xfer_rdma_ep_progress(struct rdma_ep *ep)
{
	int q, room;

	if (ep->state == EP_NEW && ep->wait_head)
		start_connect(ep);
	if (ep->state != EP_READY)
		return;
	while (ep->wait_head && (q = pick_qp(ep, &room)) >= 0) {
		if (xfer_rdma_post(ep, q, room) < 0) {
			xfer_rdma_ep_break(ep, "post send failed");
			return;
		}
		ep->progress++;
	}
}

void xfer_rdma_ep_progress_all(struct rdma_ctx *c)
{
	struct rdma_ep *ep, *next;

	/* Progress may break an endpoint, which moves or frees it. */
	for (ep = TAILQ_FIRST(&c->pool.eps); ep; ep = next) {
		next = TAILQ_NEXT(ep, link);
		if (ep->wait_head)
			xfer_rdma_ep_progress(ep);
	}
	for (ep = TAILQ_FIRST(&c->retired); ep; ep = next) {
		next = TAILQ_NEXT(ep, link);
		if (ep->wait_head)
			xfer_rdma_ep_progress(ep);
		else
			xfer_rdma_ep_reap(ep);
	}
}

void xfer_rdma_ep_retire(struct rdma_ep *ep)
{
	struct rdma_ctx *c = ep->ctx;

	if (ep->in_pool)
		xfer_rdma_pool_remove(&c->pool, ep);
	TAILQ_INSERT_HEAD(&c->retired, ep, link);
	xfer_rdma_ep_reap(ep);
}

bool xfer_rdma_ep_reap(struct rdma_ep *ep)
{
	struct rdma_ctx *c = ep->ctx;

	if (ep->in_pool || ep->total || ep->wait_head || ep->hs || ep->probe)
		return false;
	TAILQ_REMOVE(&c->retired, ep, link);
	xfer_rdma_ep_free(ep);
	return true;
}

void xfer_rdma_ep_break(struct rdma_ep *ep, const char *why)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	struct rdma_ctx *c = ep->ctx;
	struct xfer_slice *s, *next;

	if (ep->state == EP_BROKEN)
		return;
	xfer_log(ep->peer_gone ? XFER_LOG_INFO : XFER_LOG_WARN,
		 "rdma %s -> %s: endpoint %s broken: %s", c->name,
		 ep->peer_path, state_name(ep->state), why);
	ep->state = EP_BROKEN;
	for (int i = 0; i < ep->nqp; i++)
		ibv_modify_qp(ep->qp[i].qp, &a, IBV_QP_STATE);
	s = ep->wait_head;
	ep->wait_head = NULL;
	ep->wait_tail = &ep->wait_head;
	for (; s; s = next) {
		next = s->next;
		xfer_rdma_retry(c->t, s, ep->timed_out ? XFER_TIMEOUT : XFER_FAILED,
				!ep->blamed);
	}
	if (ep->in_pool)
		xfer_rdma_ep_retire(ep);
	else
		xfer_rdma_ep_reap(ep);
}

void xfer_rdma_ep_completed(struct rdma_ep *ep, struct xfer_slice *s,
			    enum ibv_wc_status st)
{
	char why[96];

	/* The failed slices are rerouted first: that pauses this path. */
	xfer_rdma_post_done(ep, rdma_slice(s)->qp, s, st, true);
	ep->progress++;
	if (st != IBV_WC_SUCCESS && st != IBV_WC_WR_FLUSH_ERR) {
		if (ep->state != EP_BROKEN)
			ep->blamed = true;
		snprintf(why, sizeof(why), "completion: %s",
			 ibv_wc_status_str(st));
		xfer_rdma_ep_break(ep, why); /* may free ep */
	}
}

static void on_probe(int err, const char *body, size_t len, void *arg)
{
	struct rdma_ep *ep = arg;

	(void)body;
	(void)len;
	ep->probe = NULL;
	if (ep->state == EP_BROKEN)
		xfer_rdma_ep_reap(ep);
	else if (err == -ECONNREFUSED)
		peer_refused(ep, "probe", err);
	/* An answer, or no verdict (a timeout: the host may be away or
	 * slow): the QPs and the transfer timeout decide. */
}

/* Ask the peer's handshake port whether its process is still there. */
static void send_probe(struct rdma_ep *ep, uint64_t now)
{
	const struct xfer_transport_env *env = ep->ctx->t->base.env;

	ep->probed_ns = now;
	ep->probe = xfer_handshake_request(ep->ctx->r->base, NULL, env->auth,
					   ep->host, ep->port, XFER_HS_PROBE,
					   "{}\n", 3, env->handshake_max_len,
					   on_probe, ep);
}

bool xfer_rdma_ep_check(struct rdma_ctx *c, uint64_t now)
{
	uint64_t limit = (uint64_t)c->t->base.env->transfer_timeout_ms * 1000000;
	const uint64_t stall = (uint64_t)RDMA_STALL_MS * 1000000;
	struct rdma_ep_list *lists[] = { &c->pool.eps, &c->retired };
	struct rdma_ep *ep, *next;
	bool busy = false;

	for (int list = 0; list < 2; list++)
		for (ep = TAILQ_FIRST(lists[list]); ep; ep = next) {
			next = TAILQ_NEXT(ep, link);
			busy = busy || ep->total || ep->wait_head;
			/* Posts and completions only count; the clock is
			 * read here, once a tick. */
			if (ep->progress != ep->seen || !ep->total) {
				ep->seen = ep->progress;
				ep->seen_ns = now;
			} else if (ep->state == EP_BROKEN) {
				continue;
			} else if (limit && now - ep->seen_ns > limit) {
				ep->timed_out = true;
				xfer_rdma_ep_break(ep, "no completion within the "
						   "transfer timeout");
			} else if (ep->state == EP_READY && !ep->probe &&
				   now - ep->seen_ns >= stall &&
				   now - ep->probed_ns >= stall) {
				send_probe(ep, now);
			}
		}
	return busy;
}

/* ---- the passive side ---- */

static int refuse(struct xfer_hs_conn *reply, const char *why)
{
	memset(reply, 0, sizeof(*reply));
	reply->reply_msg = strdup(why);
	return reply->reply_msg ? 0 : -ENOMEM;
}

int xfer_rdma_ep_accept(struct rdma_ctx *c, const struct xfer_hs_conn *req,
			struct xfer_hs_conn *reply)
{
	struct rdma_ep *ep, *evicted;
	const char *why = NULL;
	int ret;

	if (!strchr(req->local_nic_path, '@'))
		return refuse(reply, "bad local_nic_path");
	if (req->nqp != (size_t)c->t->k[K_QPS].num)
		return refuse(reply, "QP count differs");
	ep = xfer_rdma_pool_get(&c->pool, req->local_nic_path);
	if (ep && ep->state == EP_READY && !same_qpns(ep, req)) {
		xfer_rdma_ep_break(ep, "peer QPs changed (restarted?)");
		ep = NULL;
	} else if (ep && ep->state == EP_BROKEN) {
		ep = NULL;
	}
	if (!ep) {
		ep = xfer_rdma_ep_new(c, req->local_nic_path);
		if (!ep)
			return refuse(reply, "cannot create QPs");
		evicted = xfer_rdma_pool_add(&c->pool, ep);
		if (evicted)
			xfer_rdma_ep_retire(evicted);
	}
	/* New, or ours is still asking (both sides connect at once). */
	if (ep->state != EP_READY && connect_qps(ep, req, &why)) {
		xfer_rdma_ep_break(ep, why);
		return refuse(reply, why);
	}
	ret = describe_self(ep, reply, false);
	xfer_rdma_ep_progress(ep);
	return ret;
}
