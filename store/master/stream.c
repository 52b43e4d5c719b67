/*
 * The journal stream (stream_internal.h). The leader taps its journal
 * (journal_set_tap): each change is encoded as a record into the batch
 * of the open transaction, and each commit sends the batch, ended by an
 * 'E' record with the commit's number, to every standby. A standby
 * that connects first gets a copy of the whole journal ('S', then the
 * rows, then 'E'), taken between commits. Records are idempotent (rows
 * put or deleted by key or sid), so a copy that overlaps a batch does
 * no harm. The standby replays each record on its journal and commits at
 * 'E', then sends the number back; a batch cut short by a lost leader is
 * rolled back. Objects carry their versions, and the copy the last
 * version given, so a new leader never gives one twice. Nothing from the
 * peer is trusted: a record that does not decode closes the stream.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "store/master/journal_internal.h"
#include "store/master/master_internal.h"
#include "store/master/stream_internal.h"
#include "util/auth_internal.h"
#include "util/log_internal.h"
#include "util/net_internal.h"

#define REC_MAX 8192               /* a record's bytes, its length after */
#define PEER_OUT_MAX (256u << 20)  /* a standby this far behind is cut */
#define UP_TIMEOUT_S 5             /* connect, and prove the secret */

struct peer {
	struct peer *next;
	struct stream *st;
	struct bufferevent *bev;
	uint64_t acked;                /* the last commit it holds */
	bool want_copy;                /* the copy waits for a commit */
};

struct stream {
	struct event_base *base;
	struct journal *j;
	void (*lost)(void *arg, bool dead);
	void *lost_arg;
	/* the leader */
	struct stored *state;          /* NULL: not leading */
	bool sync;
	struct evbuffer *batch;        /* the open transaction's records */
	uint64_t seq;                  /* commits sent */
	struct peer *peers;
	/* the standby */
	const struct xfer_auth *auth;  /* the secret to prove, or NULL */
	int fd;                        /* connecting or proving, or -1 */
	struct event *conn_ev;
	struct xfer_auth_cli auth_cli;
	struct bufferevent *up;        /* to the leader, once proved */
	struct store_msg *msg;
	bool hello;                    /* the leader took our ha_follow */
	bool copied;                   /* this stream brought a copy */
	bool synced;                   /* our journal is a leader's (the
					  last one followed, up to when its
					  stream ended) */
	bool waiting_logged;
	int conn_err;                  /* connect()'s own failure */
	char addr[300];                /* the leader followed */
	bool addr_up;                  /* a stream from it ran */
};

/* ---- records ---- */

struct rec {
	uint8_t b[REC_MAX];
	size_t n;
	const uint8_t *p, *end;        /* decoding */
	bool bad;
};

static void put_n(struct rec *r, uint64_t v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		r->b[r->n++] = (uint8_t)(v >> (8 * i));
}

static void put_raw(struct rec *r, const void *p, size_t n)
{
	memcpy(r->b + r->n, p, n);
	r->n += n;
}

static uint64_t get_n(struct rec *r, unsigned n)
{
	uint64_t v = 0;

	if ((size_t)(r->end - r->p) < n) {
		r->bad = true;
		return 0;
	}
	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)r->p[i] << (8 * i);
	r->p += n;
	return v;
}

static const uint8_t *get_raw(struct rec *r, size_t n)
{
	const uint8_t *p = r->p;

	if ((size_t)(r->end - r->p) < n) {
		r->bad = true;
		return NULL;
	}
	r->p += n;
	return p;
}

static void rec_start(struct rec *r, char op)
{
	r->n = 4;
	r->b[r->n++] = (uint8_t)op;
}

/* Append @p r, its length first, to @p b. */
static int rec_add(struct rec *r, struct evbuffer *b)
{
	size_t body = r->n - 4;

	for (unsigned i = 0; i < 4; i++)
		r->b[i] = (uint8_t)(body >> (8 * i));
	return evbuffer_add(b, r->b, r->n);
}

static void enc_segment(struct rec *r, const struct journal_segment *g)
{
	rec_start(r, 'M');
	put_n(r, (uint64_t)g->sid, 8);
	put_raw(r, g->id, STORE_ID_LEN);
	put_raw(r, g->client, STORE_ID_LEN);
	put_n(r, g->name_len, 2);
	put_raw(r, g->name, g->name_len);
	put_n(r, g->base, 8);
	put_n(r, g->size, 8);
}

static void enc_object(struct rec *r, const struct journal_object *o)
{
	rec_start(r, 'P');
	put_n(r, o->klen, 2);
	put_raw(r, o->key, o->klen);
	put_n(r, o->len, 8);
	put_n(r, o->flags, 1);
	put_n(r, o->state, 1);
	put_raw(r, o->writer, STORE_ID_LEN);
	put_n(r, o->version, 8);
	put_n(r, o->nrep, 1);
	for (unsigned i = 0; i < o->nrep; i++) {
		put_n(r, (uint64_t)o->rep[i].sid, 8);
		put_n(r, o->rep[i].off, 8);
		put_n(r, o->rep[i].part, 1);
		put_n(r, o->rep[i].parts, 1);
	}
}

/* ---- the leader ---- */

/* Do the standbys following (one at least) all hold the last commit?
 * Each does: whichever is elected next has it. */
static bool all_acked(const struct stream *st)
{
	const struct peer *p;

	for (p = st->peers; p; p = p->next)
		if (p->acked < st->seq)
			return false;
	return st->peers != NULL;
}

static void peer_free(struct peer *p)
{
	struct stream *st = p->st;
	struct peer **pp = &st->peers;

	while (*pp != p)
		pp = &(*pp)->next;
	*pp = p->next;
	bufferevent_free(p->bev);
	free(p);
	/* the others may hold every commit */
	if (st->state && all_acked(st))
		stored_release(st->state);
}

static struct rec *scratch(void)
{
	static struct rec r;           /* one thread; records one at a time */

	return &r;
}

static void tap_mount(void *arg, const struct journal_segment *g)
{
	struct stream *st = arg;
	struct rec *r = scratch();

	enc_segment(r, g);
	rec_add(r, st->batch);
}

static void tap_unmount(void *arg, int64_t sid)
{
	struct stream *st = arg;
	struct rec *r = scratch();

	rec_start(r, 'U');
	put_n(r, (uint64_t)sid, 8);
	rec_add(r, st->batch);
}

static void tap_put(void *arg, const struct journal_object *o)
{
	struct stream *st = arg;
	struct rec *r = scratch();

	enc_object(r, o);
	rec_add(r, st->batch);
}

/* 'C' (a put ended) or 'F' (the slower tier holds a version): a key
 * and a version. */
static struct rec *enc_versioned(char op, const char *key, uint16_t klen,
				 uint64_t version)
{
	struct rec *r = scratch();

	rec_start(r, op);
	put_n(r, klen, 2);
	put_raw(r, key, klen);
	put_n(r, version, 8);
	return r;
}

static void tap_complete(void *arg, const char *key, uint16_t klen,
			 uint64_t version)
{
	rec_add(enc_versioned('C', key, klen, version),
		((struct stream *)arg)->batch);
}

static void tap_flushed(void *arg, const char *key, uint16_t klen,
			uint64_t version)
{
	rec_add(enc_versioned('F', key, klen, version),
		((struct stream *)arg)->batch);
}

static void tap_del(void *arg, const char *key, uint16_t klen)
{
	struct stream *st = arg;
	struct rec *r = scratch();

	rec_start(r, 'D');
	put_n(r, klen, 2);
	put_raw(r, key, klen);
	rec_add(r, st->batch);
}

static int end_record(struct stream *st, struct evbuffer *out)
{
	struct rec *r = scratch();

	rec_start(r, 'E');
	put_n(r, st->seq, 8);
	return rec_add(r, out);
}

static int copy_segment(void *arg, const struct journal_segment *g)
{
	struct rec *r = scratch();

	enc_segment(r, g);
	return rec_add(r, arg) ? -ENOMEM : 0;
}

static int copy_object(void *arg, const struct journal_object *o)
{
	struct rec *r = scratch();

	enc_object(r, o);
	return rec_add(r, arg) ? -ENOMEM : 0;
}

static int copy_flushed(void *arg, const char *key, uint16_t klen,
			uint64_t version)
{
	return rec_add(enc_versioned('F', key, klen, version), arg) ?
	       -ENOMEM : 0;
}

/* Send @p p the whole journal (committed: no transaction is open). */
static void send_copy(struct peer *p)
{
	const struct journal_load_cb cb = { copy_segment, copy_object };
	struct evbuffer *out = bufferevent_get_output(p->bev);
	struct rec *r = scratch();
	uint64_t version;
	char err[256];

	p->want_copy = false;
	rec_start(r, 'S');
	if (rec_add(r, out) || journal_version(p->st->j, &version))
		goto err;
	/* the last version given, which no object may hold any more */
	rec_start(r, 'V');
	put_n(r, version, 8);
	if (!rec_add(r, out) &&
	    !journal_load(p->st->j, &cb, out, err, sizeof(err)) &&
	    !journal_load_flushed(p->st->j, copy_flushed, out) &&
	    !end_record(p->st, out))
		return;
err:
	xfer_log(XFER_LOG_WARN, "xfer-stored: cannot copy the journal to a "
		 "standby: dropping it");
	peer_free(p);
}

static void tap_committed(void *arg)
{
	struct stream *st = arg;
	struct peer *p, *next;

	st->seq++;
	end_record(st, st->batch);
	for (p = st->peers; p; p = next) {
		struct evbuffer *out = bufferevent_get_output(p->bev);

		next = p->next;
		if (p->want_copy) {
			send_copy(p);
			continue;
		}
		if (evbuffer_get_length(out) > PEER_OUT_MAX ||
		    evbuffer_add(out, evbuffer_pullup(st->batch, -1),
				 evbuffer_get_length(st->batch))) {
			xfer_log(XFER_LOG_WARN, "xfer-stored: a standby fell "
				 "%u MiB behind: dropping it",
				 PEER_OUT_MAX >> 20);
			peer_free(p);
		}
	}
	evbuffer_drain(st->batch, evbuffer_get_length(st->batch));
}

static const struct journal_tap tap = {
	.mount = tap_mount, .unmount = tap_unmount, .put = tap_put,
	.complete = tap_complete, .flushed = tap_flushed, .del = tap_del,
	.committed = tap_committed,
};

/* With --sync_standby: hold the answers until every standby following
 * has the last commit. */
static bool gate(void *arg)
{
	struct stream *st = arg;

	if (!st->sync || all_acked(st))
		return false;
	if (!st->peers && !st->waiting_logged) {
		xfer_log(XFER_LOG_WARN, "xfer-stored: --sync_standby and no "
			 "standby: answers wait for one to follow");
		st->waiting_logged = true;
	}
	return true;
}

static void peer_read(struct bufferevent *bev, void *arg)
{
	struct peer *p = arg;
	struct stream *st = p->st;
	struct evbuffer *in = bufferevent_get_input(bev);
	uint8_t b[8];
	struct rec r;

	while (evbuffer_remove(in, b, 8) == 8) {
		uint64_t n;

		r.p = b;
		r.end = b + 8;
		n = get_n(&r, 8);
		if (n > st->seq) {
			xfer_log(XFER_LOG_WARN, "xfer-stored: a standby "
				 "acknowledged a commit not sent: dropping it");
			peer_free(p);
			return;
		}
		if (n > p->acked)
			p->acked = n;
	}
	if (all_acked(st))
		stored_release(st->state);
}

static void peer_event(struct bufferevent *bev, short what, void *arg)
{
	struct peer *p = arg;

	(void)bev;
	(void)what;
	xfer_log(XFER_LOG_WARN, "xfer-stored: a standby's stream closed");
	peer_free(p);
}

void stream_adopt(void *arg, struct bufferevent *bev,
		  const struct store_msg *req)
{
	struct stream *st = arg;
	struct store_msg *rep = st->msg;
	struct store_buf b = { 0 };
	struct peer *p = calloc(1, sizeof(*p));

	memset(&rep->h, 0, sizeof(rep->h));
	rep->h.type = STORE_HA_FOLLOW;
	rep->h.flags = STORE_F_REPLY;
	rep->h.seq = req->h.seq;
	rep->err = 0;
	if (!p || !st->state || store_msg_encode(&b, rep) ||
	    bufferevent_write(bev, b.p, b.len)) {
		free(p);
		store_buf_free(&b);
		bufferevent_free(bev);
		return;
	}
	store_buf_free(&b);
	p->st = st;
	p->bev = bev;
	p->next = st->peers;
	st->peers = p;
	st->waiting_logged = false;
	bufferevent_setcb(bev, peer_read, NULL, peer_event, p);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
	xfer_log(XFER_LOG_INFO, "xfer-stored: a standby follows");
	if (journal_dirty(st->j))
		p->want_copy = true;
	else
		send_copy(p);
}

void stream_lead(struct stream *st, struct stored *state, bool sync)
{
	st->state = state;
	st->sync = sync;
	journal_set_tap(st->j, &tap, st);
	stored_set_gate(state, gate, st);
}

/* ---- the standby ---- */

static void up_close(struct stream *st)
{
	if (st->conn_ev)
		event_free(st->conn_ev);
	st->conn_ev = NULL;
	if (st->fd >= 0)
		close(st->fd);
	st->fd = -1;
	if (st->up)
		bufferevent_free(st->up);
	st->up = NULL;
	st->hello = st->copied = false;
	journal_rollback(st->j);
}

static void up_lost(struct stream *st, const char *why, bool refused)
{
	xfer_log(XFER_LOG_WARN, "xfer-stored: the stream from the leader "
		 "ended: %s", why);
	up_close(st);
	st->lost(st->lost_arg, refused && st->addr_up);
}

/* Replay record @p r (its op byte next). @return 0, -EPROTO, -EIO. */
static int replay(struct stream *st, struct rec *r)
{
	uint8_t op = (uint8_t)get_n(r, 1);
	struct journal_segment g = { 0 };
	struct journal_object o = { 0 };
	uint8_t ack[8];

	switch (op) {
	case 'S':
		journal_reset(st->j);
		st->copied = true;
		break;
	case 'M':
		g.sid = (int64_t)get_n(r, 8);
		g.id = get_raw(r, STORE_ID_LEN);
		g.client = get_raw(r, STORE_ID_LEN);
		g.name_len = (uint16_t)get_n(r, 2);
		g.name = (const char *)get_raw(r, g.name_len);
		g.base = get_n(r, 8);
		g.size = get_n(r, 8);
		if (r->bad || g.sid <= 0)
			return -EPROTO;
		journal_mount(st->j, &g);
		break;
	case 'U':
		journal_unmount(st->j, (int64_t)get_n(r, 8));
		break;
	case 'P':
		o.klen = (uint16_t)get_n(r, 2);
		o.key = (const char *)get_raw(r, o.klen);
		o.len = get_n(r, 8);
		o.flags = (uint8_t)get_n(r, 1);
		o.state = (uint8_t)get_n(r, 1);
		o.writer = get_raw(r, STORE_ID_LEN);
		o.version = get_n(r, 8);
		o.nrep = (uint8_t)get_n(r, 1);
		if (o.nrep > STORE_REPLICA_MAX || !o.klen ||
		    o.klen > STORE_KEY_MAX)
			return -EPROTO;
		for (unsigned i = 0; i < o.nrep; i++) {
			o.rep[i].sid = (int64_t)get_n(r, 8);
			o.rep[i].off = get_n(r, 8);
			o.rep[i].part = (uint8_t)get_n(r, 1);
			o.rep[i].parts = (uint8_t)get_n(r, 1);
		}
		if (r->bad)
			return -EPROTO;
		journal_put(st->j, &o);
		break;
	case 'C':
	case 'D':
	case 'F':
		o.klen = (uint16_t)get_n(r, 2);
		o.key = (const char *)get_raw(r, o.klen);
		o.version = op != 'D' ? get_n(r, 8) : 0;
		if (r->bad || !o.klen || o.klen > STORE_KEY_MAX)
			return -EPROTO;
		if (op == 'C')
			journal_complete(st->j, o.key, o.klen, o.version);
		else if (op == 'F')
			journal_flushed(st->j, o.key, o.klen, o.version);
		else
			journal_del(st->j, o.key, o.klen);
		break;
	case 'V':
		o.version = get_n(r, 8);
		if (r->bad)
			return -EPROTO;
		journal_set_version(st->j, o.version);
		break;
	case 'E':
		memcpy(ack, r->p, r->end - r->p < 8 ? 0 : 8);
		get_n(r, 8);
		if (r->bad)
			return -EPROTO;
		if (journal_commit(st->j))
			return -EIO;
		st->synced = st->copied;
		return bufferevent_write(st->up, ack, 8) ? -EIO : 0;
	default:
		return -EPROTO;
	}
	return r->bad || r->p != r->end ? -EPROTO : 0;
}

static void up_read(struct bufferevent *bev, void *arg)
{
	struct stream *st = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	uint8_t hdr[STORE_HDR_LEN];
	struct rec *r = scratch();
	size_t len;
	int ret;

	if (!st->hello) {
		if (evbuffer_copyout(in, hdr, sizeof(hdr)) != sizeof(hdr))
			return;
		if (store_hdr_decode(hdr, &st->msg->h) ||
		    st->msg->h.type != STORE_HA_FOLLOW ||
		    evbuffer_get_length(in) < STORE_HDR_LEN + st->msg->h.len)
			goto wait_or_bad;
		r->p = evbuffer_pullup(in, STORE_HDR_LEN + st->msg->h.len);
		if (store_msg_decode(r->p + STORE_HDR_LEN, st->msg) ||
		    st->msg->err) {
			up_lost(st, "the leader refused to stream", false);
			return;
		}
		evbuffer_drain(in, STORE_HDR_LEN + st->msg->h.len);
		st->hello = st->addr_up = true;
	}
	while (evbuffer_copyout(in, hdr, 4) == 4) {
		len = (size_t)hdr[0] | (size_t)hdr[1] << 8 |
		      (size_t)hdr[2] << 16 | (size_t)hdr[3] << 24;
		if (!len || len > REC_MAX - 4) {
			up_lost(st, "a record that is not one", false);
			return;
		}
		if (evbuffer_get_length(in) < 4 + len)
			return;
		r->p = evbuffer_pullup(in, 4 + len) + 4;
		r->end = r->p + len;
		r->bad = false;
		ret = replay(st, r);
		if (ret) {
			up_lost(st, ret == -EIO ? "the journal cannot be "
				"written" : "a record that is not one", false);
			return;
		}
		evbuffer_drain(in, 4 + len);
	}
	return;
wait_or_bad:
	if (store_hdr_decode(hdr, &st->msg->h) ||
	    st->msg->h.type != STORE_HA_FOLLOW)
		up_lost(st, "not an answer to ha_follow", false);
}

static void up_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	up_lost(arg, what & BEV_EVENT_EOF ? "closed" : "connection error",
		false);
}

/* Connected, and proved if there is a secret: ask for the stream. */
static void up_start(struct stream *st)
{
	struct store_msg *m = st->msg;
	struct store_buf b = { 0 };
	int ret;

	event_free(st->conn_ev);
	st->conn_ev = NULL;
	st->up = bufferevent_socket_new(st->base, st->fd,
					BEV_OPT_CLOSE_ON_FREE);
	if (!st->up) {
		up_lost(st, "no memory", false);
		return;
	}
	st->fd = -1;
	memset(m, 0, sizeof(m->h) + sizeof(m->client));
	m->h.type = STORE_HA_FOLLOW;
	ret = store_msg_encode(&b, m) ||
	      bufferevent_write(st->up, b.p, b.len);
	store_buf_free(&b);
	bufferevent_setcb(st->up, up_read, NULL, up_event, st);
	if (ret || bufferevent_enable(st->up, EV_READ | EV_WRITE))
		up_lost(st, "no memory", false);
}

static void on_auth(evutil_socket_t fd, short what, void *arg)
{
	struct stream *st = arg;
	int ret;

	if (what & EV_TIMEOUT) {
		up_lost(st, "the leader did not answer the secret's proof",
			false);
		return;
	}
	ret = xfer_auth_cli_step(st->auth, &st->auth_cli, fd,
				 "xfer-stored's leader");
	if (ret < 0)
		up_lost(st, "the secret's proof failed", false);
	else if (ret == 0)
		up_start(st);
}

static void on_connect(evutil_socket_t fd, short what, void *arg)
{
	struct timeval tv = { UP_TIMEOUT_S, 0 };
	struct stream *st = arg;
	socklen_t len = sizeof(int);
	int err = 0;

	if (what & EV_TIMEOUT) {
		up_lost(st, "connect timed out", false);
		return;
	}
	if (st->conn_err || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) ||
	    err) {
		if (st->conn_err)
			err = st->conn_err;
		/* refused: nothing listens there (a partition would time
		 * out instead) */
		up_lost(st, err == ECONNREFUSED ? "refused" :
			"connection error", err == ECONNREFUSED);
		return;
	}
	if (!st->auth) {
		up_start(st);
		return;
	}
	event_free(st->conn_ev);
	st->conn_ev = event_new(st->base, fd, EV_READ | EV_PERSIST, on_auth,
				st);
	if (!st->conn_ev || event_add(st->conn_ev, &tv) ||
	    xfer_auth_cli_start(&st->auth_cli, fd))
		up_lost(st, "cannot prove the secret", false);
}

int stream_follow(struct stream *st, const char *addr)
{
	struct timeval tv = { UP_TIMEOUT_S, 0 };
	struct sockaddr_storage ss;
	char host[256];
	uint16_t port;
	socklen_t len;
	int one = 1;

	up_close(st);
	if (strcmp(addr, st->addr)) {
		snprintf(st->addr, sizeof(st->addr), "%s", addr);
		st->addr_up = false;
		st->synced = false;    /* until this leader's copy is in */
	}
	if (xfer_split_host_port(addr, host, sizeof(host), &port) ||
	    xfer_net_parse(host, port, &ss, &len))
		return -EINVAL;
	st->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK |
			SOCK_CLOEXEC, 0);
	if (st->fd < 0)
		return -errno;
	setsockopt(st->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	st->conn_err = 0;
	if (connect(st->fd, (struct sockaddr *)&ss, len) &&
	    errno != EINPROGRESS)
		st->conn_err = errno;
	st->conn_ev = event_new(st->base, st->fd, EV_WRITE, on_connect, st);
	if (!st->conn_ev || event_add(st->conn_ev, &tv)) {
		up_close(st);
		return -ENOMEM;
	}
	/* a refusal can come at once (loopback): told from the loop */
	if (st->conn_err)
		event_active(st->conn_ev, EV_WRITE, 0);
	return 0;
}

void stream_unfollow(struct stream *st)
{
	up_close(st);
}

bool stream_synced(const struct stream *st)
{
	return st->synced;
}

struct stream *stream_new(struct event_base *base, struct journal *j,
			  const struct xfer_auth *auth,
			  void (*lost)(void *arg, bool dead), void *arg)
{
	struct stream *st = calloc(1, sizeof(*st));

	if (!st)
		return NULL;
	st->base = base;
	st->auth = auth;
	st->fd = -1;
	st->j = j;
	st->lost = lost;
	st->lost_arg = arg;
	st->batch = evbuffer_new();
	st->msg = calloc(1, sizeof(*st->msg));
	if (!st->batch || !st->msg) {
		stream_free(st);
		return NULL;
	}
	return st;
}

void stream_free(struct stream *st)
{
	if (!st)
		return;
	st->state = NULL;              /* answers are not released now */
	while (st->peers)
		peer_free(st->peers);
	up_close(st);
	if (st->j)
		journal_set_tap(st->j, NULL, NULL);
	if (st->batch)
		evbuffer_free(st->batch);
	free(st->msg);
	free(st);
}
