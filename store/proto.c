/*
 * The store's RPC codec (proto_internal.h, docs/PROTOCOL.md §7). Each
 * message type's body is a string of field letters, one table for both
 * directions; one walker reads or writes them, so the two cannot drift
 * apart. Letters: c client id, s segment id (16 bytes each), b base,
 * z size (u64), N name (str 1..255), p preferred segment (str 0..255),
 * r replicas, f flags, F force (u8, F only 0 or 1), m medium (u8, 0
 * DRAM or 1 SSD), d SSD replicas (u8), e error (i32), C count (i64),
 * V min_version (u64), x pattern (str 1..4096), T task id, a created,
 * u updated (u64), y task type (u8, 0..2), S task status (u8, 0..3),
 * M message (str 0..255), K key (str 1..4096), [ ] a batch (u32 count,
 * then its items); in an item: k key (str 0..4096), l length, t lease,
 * v version, T task id (u64), e error, R replicas (u8 count of buffers
 * up to 16, then per replica u8 shards, its buffers, and per buffer u64
 * address, u64 length, str endpoint 1..255).
 * A str is a u16 length and its bytes. Integers are little-endian.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "store/proto_internal.h"

static const struct {
	const char *name, *req, *rep;
} specs[STORE_TYPE_END] = {
	[STORE_PING] = { "ping", "c", "ef" },
	[STORE_MOUNT] = { "mount", "csbzNm", "e" },
	[STORE_UNMOUNT] = { "unmount", "cs", "e" },
	[STORE_PUT_START] = { "put_start", "crfpd[kl]", "e[eR]" },
	[STORE_PUT_END] = { "put_end", "c[k]", "e[ev]" },
	[STORE_PUT_REVOKE] = { "put_revoke", "c[k]", "e[e]" },
	[STORE_QUERY] = { "query", "V[k]", "e[eltvR]" },
	[STORE_EXIST] = { "exist", "[k]", "e[e]" },
	[STORE_REMOVE] = { "remove", "F[k]", "e[e]" },
	[STORE_REMOVE_ALL] = { "remove_all", "F", "eC" },
	[STORE_SYNC] = { "sync", "", "eC" },
	[STORE_REMOVE_REGEX] = { "remove_regex", "Fx", "eC" },
	[STORE_REPLICA_CLEAR] = { "replica_clear", "cp[k]", "e[e]" },
	[STORE_TIER_POLL] = { "tier_poll", "c", "e[klR]" },
	[STORE_TIER_DONE] = { "tier_done", "c[ke]", "e[e]" },
	[STORE_FLUSHED] = { "flushed", "c[kv]", "e[ev]" },
	[STORE_HA_FOLLOW] = { "ha_follow", "c", "e" },
	[STORE_REPLICATE] = { "replicate", "crd[k]", "e[eT]" },
	[STORE_QUERY_TASK] = { "query_task", "T", "eTySaucM" },
	[STORE_CREATE_TASK] = { "create_task", "cypK[k]", "eT" },
};

const char *store_type_name(unsigned type)
{
	return type && type < STORE_TYPE_END ? specs[type].name : NULL;
}

static uint64_t get_le(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static void put_le(uint8_t *p, uint64_t v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

int store_hdr_decode(const uint8_t *buf, struct store_hdr *h)
{
	if (get_le(buf, 4) != STORE_MAGIC)
		return -EPROTO;
	h->type = (uint16_t)get_le(buf + 4, 2);
	h->flags = (uint16_t)get_le(buf + 6, 2);
	h->seq = (uint32_t)get_le(buf + 8, 4);
	h->len = (uint32_t)get_le(buf + 12, 4);
	if (!store_type_name(h->type) || (h->flags & ~STORE_F_REPLY))
		return -EPROTO;
	return h->len > STORE_FRAME_MAX ? -EMSGSIZE : 0;
}

/* A walk over a body: reading (buf is the body) or writing (out). */
struct walk {
	const uint8_t *p, *end;          /* decoding */
	struct store_buf *out;           /* encoding */
	int err;                         /* the first: -EPROTO, -EINVAL,
					    -ENOMEM */
};

/* Note the first error; the walk stops there. */
static void fail(struct walk *w, int err)
{
	if (!w->err)
		w->err = err;
}

static void grow(struct walk *w, size_t n)
{
	struct store_buf *b = w->out;
	size_t cap = b->cap ? b->cap : 256;
	uint8_t *p;

	if (b->cap - b->len >= n)
		return;
	while (cap - b->len < n)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p) {
		fail(w, -ENOMEM);
		return;
	}
	b->p = p;
	b->cap = cap;
}

/* Read or write an integer of @p n bytes, *@p v. */
static void num(struct walk *w, uint64_t *v, unsigned n)
{
	if (w->err)
		return;
	if (w->out) {
		grow(w, n);
		if (!w->err) {
			put_le(w->out->p + w->out->len, *v, n);
			w->out->len += n;
		}
		return;
	}
	if ((size_t)(w->end - w->p) < n) {
		fail(w, -EPROTO);
		*v = 0;
		return;
	}
	*v = get_le(w->p, n);
	w->p += n;
}

/* Read or write raw bytes @p b of length @p n. */
static void raw(struct walk *w, const uint8_t **b, size_t n)
{
	if (w->err)
		return;
	if (w->out) {
		grow(w, n);
		if (!w->err && n) {
			memcpy(w->out->p + w->out->len, *b, n);
			w->out->len += n;
		}
		return;
	}
	if ((size_t)(w->end - w->p) < n) {
		fail(w, -EPROTO);
		return;
	}
	*b = w->p;
	w->p += n;
}

#define NUM(w, lv, n) do {                                              \
	uint64_t v_ = (uint64_t)(lv);                                   \
	num(w, &v_, n);                                                 \
	if (!(w)->out)                                                  \
		(lv) = (__typeof__(lv))v_;                              \
} while (0)

/* A value past its limit: it would not decode. */
static void limit(struct walk *w)
{
	fail(w, w->out ? -EINVAL : -EPROTO);
}

/* A str from @p min to @p max bytes. */
static void str(struct walk *w, struct store_str *s, unsigned min,
		unsigned max)
{
	const uint8_t *p = (const uint8_t *)s->p;
	uint64_t len = s->len;

	if (w->out && (len < min || len > max))
		limit(w);
	num(w, &len, 2);
	if (len < min || len > max)
		limit(w);
	raw(w, &p, w->err ? 0 : len);
	if (!w->out && !w->err) {
		s->p = (const char *)p;
		s->len = (uint16_t)len;
	}
}

static void id(struct walk *w, uint8_t *v)
{
	const uint8_t *p = v;

	raw(w, &p, STORE_ID_LEN);
	if (!w->out && !w->err)
		memcpy(v, p, STORE_ID_LEN);
}

/* The buffers, grouped by replica: each group's count before it. */
static void replicas(struct walk *w, struct store_item *it)
{
	unsigned left = 0;

	NUM(w, it->nrep, 1);
	if (it->nrep > STORE_REPLICA_MAX)
		limit(w);
	for (unsigned i = 0; i < it->nrep && !w->err; i++) {
		struct store_replica *r = &it->rep[i];

		if (!left) {
			uint8_t n = r->shards ? r->shards : 1;

			NUM(w, n, 1);
			if (!n || n > it->nrep - i)
				limit(w);
			if (!w->out)
				r->shards = n;
			left = n;
		} else if (!w->out) {
			r->shards = 0;
		}
		left--;
		NUM(w, r->addr, 8);
		NUM(w, r->len, 8);
		str(w, &r->endpoint, 1, STORE_NAME_MAX);
	}
}

static void item_field(struct walk *w, char f, struct store_item *it)
{
	switch (f) {
	case 'k': str(w, &it->key, 0, STORE_KEY_MAX); break;
	case 'l': NUM(w, it->len, 8); break;
	case 't': NUM(w, it->lease_ms, 8); break;
	case 'v': NUM(w, it->version, 8); break;
	case 'T': NUM(w, it->task, 8); break;
	case 'e': NUM(w, it->err, 4); break;
	case 'R': replicas(w, it); break;
	default: fail(w, -EINVAL);
	}
}

static void field(struct walk *w, char f, struct store_msg *m)
{
	switch (f) {
	case 'c': id(w, m->client); break;
	case 's': id(w, m->segment); break;
	case 'b': NUM(w, m->base, 8); break;
	case 'z': NUM(w, m->size, 8); break;
	case 'N': str(w, &m->name, 1, STORE_NAME_MAX); break;
	case 'p': str(w, &m->preferred, 0, STORE_NAME_MAX); break;
	case 'r': NUM(w, m->replicas, 1); break;
	case 'f': NUM(w, m->flags, 1); break;
	case 'F':
		NUM(w, m->force, 1);
		if (m->force > 1)
			limit(w);
		break;
	case 'm':
		NUM(w, m->medium, 1);
		if (m->medium > STORE_MEDIUM_SSD)
			limit(w);
		break;
	case 'd': NUM(w, m->ssd_replicas, 1); break;
	case 'e': NUM(w, m->err, 4); break;
	case 'C': NUM(w, m->count, 8); break;
	case 'V': NUM(w, m->min_version, 8); break;
	case 'x': str(w, &m->pattern, 1, STORE_PATTERN_MAX); break;
	case 'T': NUM(w, m->task, 8); break;
	case 'a': NUM(w, m->created_ms, 8); break;
	case 'u': NUM(w, m->updated_ms, 8); break;
	case 'y':
		NUM(w, m->task_type, 1);
		if (m->task_type > STORE_TASK_REPLICATE ||
		    (!(m->h.flags & STORE_F_REPLY) &&
		     m->task_type > STORE_TASK_REPLICA_MOVE))
			limit(w);
		break;
	case 'S':
		NUM(w, m->task_status, 1);
		if (m->task_status > STORE_TASK_SUCCESS)
			limit(w);
		break;
	case 'M': str(w, &m->message, 0, STORE_MESSAGE_MAX); break;
	case 'K': str(w, &m->key, 1, STORE_KEY_MAX); break;
	default: fail(w, -EINVAL);
	}
}

/* The body of @p m, as its type and direction list. */
static void walk_msg(struct walk *w, struct store_msg *m)
{
	bool reply = m->h.flags & STORE_F_REPLY;
	const char *spec = reply ? specs[m->h.type].rep : specs[m->h.type].req;
	const char *items = NULL;

	for (const char *f = spec; *f && !w->err; f++) {
		if (*f == ']')
			break;
		if (*f != '[') {
			field(w, *f, m);
			continue;
		}
		items = f + 1;
		NUM(w, m->n, 4);
		/* a request names at least one key */
		if (m->n > STORE_BATCH_MAX || (!reply && !m->n))
			limit(w);
		for (uint32_t i = 0; i < m->n && !w->err; i++)
			for (const char *g = items; *g != ']'; g++)
				item_field(w, *g, &m->items[i]);
		f = strchr(f, ']');
	}
}

int store_msg_decode(const uint8_t *body, struct store_msg *m)
{
	struct walk w = { .p = body, .end = body + m->h.len };

	walk_msg(&w, m);
	return w.err || w.p != w.end ? -EPROTO : 0;
}

void store_buf_free(struct store_buf *b)
{
	free(b->p);
	*b = (struct store_buf){ 0 };
}

int store_msg_encode(struct store_buf *b, const struct store_msg *m)
{
	struct walk w = { .out = b };
	size_t start = b->len, len;

	if (!store_type_name(m->h.type) || (m->h.flags & ~STORE_F_REPLY))
		return -EINVAL;
	grow(&w, STORE_HDR_LEN);
	if (w.err)
		return w.err;
	b->len += STORE_HDR_LEN;
	/* writing, the walker only reads m */
	walk_msg(&w, (struct store_msg *)m);
	len = b->len - start - STORE_HDR_LEN;
	if (w.err || len > STORE_FRAME_MAX) {
		b->len = start;
		return w.err ? w.err : -EMSGSIZE;
	}
	put_le(b->p + start, STORE_MAGIC, 4);
	put_le(b->p + start + 4, m->h.type, 2);
	put_le(b->p + start + 6, m->h.flags, 2);
	put_le(b->p + start + 8, m->h.seq, 4);
	put_le(b->p + start + 12, len, 4);
	return 0;
}
