/*
 * The store's RPC codec (store/proto.c): every message type encodes and
 * decodes back to the same fields and bytes, a frame cut short or with a
 * byte too many is refused, and every limit (key, name, batch, replicas,
 * frame) is refused by the encoder and the decoder alike; a striped
 * replica's buffers travel as one group, and a group that runs past the
 * buffers is refused.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store/proto_internal.h"

static struct store_msg *msg(unsigned type, bool reply)
{
	struct store_msg *m = calloc(1, sizeof(*m));

	assert_non_null(m);
	m->h.type = (uint16_t)type;
	m->h.flags = reply ? STORE_F_REPLY : 0;
	m->h.seq = 0x01020304u + type;
	return m;
}

static struct store_str S(const char *s)
{
	return (struct store_str){ s, (uint16_t)strlen(s) };
}

/* Decode the frame at @p b, its whole length. @return the decoder's
 * result; the message in *@p out (calloc'd). */
static int decode(const struct store_buf *b, struct store_msg **out)
{
	struct store_msg *m = calloc(1, sizeof(*m));
	int ret;

	assert_non_null(m);
	*out = m;
	assert_true(b->len >= STORE_HDR_LEN);
	ret = store_hdr_decode(b->p, &m->h);
	if (ret)
		return ret;
	assert_int_equal(m->h.len, b->len - STORE_HDR_LEN);
	return store_msg_decode(b->p + STORE_HDR_LEN, m);
}

/* Every field of every type: encode, decode, encode again; the bytes
 * agree, and so do the fields. */
static void test_round_trip(void **state)
{
	(void)state;
	for (unsigned t = STORE_PING; t < STORE_TYPE_END; t++) {
		for (int reply = 0; reply < 2; reply++) {
			struct store_msg *m = msg(t, reply), *d;
			struct store_buf b = { 0 }, b2 = { 0 };

			memset(m->client, 0xc1, STORE_ID_LEN);
			memset(m->segment, 0x5e, STORE_ID_LEN);
			m->base = 0x1000;
			m->size = 1 << 30;
			m->name = S("127.0.0.1:12345");
			m->preferred = S("");
			m->pattern = S("^some/");
			m->min_version = 7;
			m->replicas = 2;
			m->flags = 1;
			m->force = 1;
			m->medium = STORE_MEDIUM_SSD;
			m->ssd_replicas = 3;
			m->err = -706;
			m->count = -3;
			m->task = 0x123456789ull;
			m->task_type = STORE_TASK_REPLICA_MOVE;
			m->task_status = STORE_TASK_SUCCESS;
			m->created_ms = 1700000000000ull;
			m->updated_ms = 1700000000001ull;
			m->message = S("Task completed successfully");
			m->key = S("obj/key");
			m->n = 3;
			for (unsigned i = 0; i < 3; i++) {
				struct store_item *it = &m->items[i];

				it->key = S(i == 1 ? "" : "some/key");
				it->len = 4096u * (i + 1);
				it->err = i == 2 ? -200 : (int)i;
				it->lease_ms = 10000;
				it->version = 40 + i;
				it->task = 90 + i;
				it->nrep = (uint8_t)i;
				for (unsigned r = 0; r < i; r++)
					it->rep[r] = (struct store_replica){
						.addr = 0x7f0000000000ull + r,
						.len = it->len,
						.endpoint = S("h:1"),
					};
			}
			assert_int_equal(store_msg_encode(&b, m), 0);
			assert_int_equal(decode(&b, &d), 0);
			assert_int_equal(d->h.type, t);
			assert_int_equal(d->h.seq, m->h.seq);
			assert_int_equal(d->h.flags, m->h.flags);
			assert_int_equal(store_msg_encode(&b2, d), 0);
			assert_int_equal(b2.len, b.len);
			assert_memory_equal(b2.p, b.p, b.len);
			if (t == STORE_PUT_START && reply) {
				assert_int_equal(d->n, 3);
				assert_int_equal(d->items[2].err, -200);
				assert_int_equal(d->items[2].nrep, 2);
				assert_int_equal(d->items[2].rep[1].addr,
						 0x7f0000000001ull);
				assert_int_equal(d->items[2].rep[1].endpoint.len,
						 3);
			}
			if (t == STORE_PUT_START && !reply) {
				assert_int_equal(d->replicas, 2);
				assert_int_equal(d->ssd_replicas, 3);
			}
			if (t == STORE_TIER_POLL && reply) {
				assert_int_equal(d->items[2].nrep, 2);
				assert_int_equal(d->items[2].len, 3 * 4096);
			}
			if (t == STORE_MOUNT && !reply) {
				assert_int_equal(d->medium, STORE_MEDIUM_SSD);
				assert_int_equal(d->size, 1 << 30);
				assert_memory_equal(d->segment, m->segment,
						    STORE_ID_LEN);
			}
			if ((t == STORE_REMOVE_ALL || t == STORE_SYNC ||
			     t == STORE_REMOVE_REGEX) && reply)
				assert_int_equal(d->count, -3);
			if (t == STORE_QUERY) {
				assert_int_equal(d->n, 3);
				if (reply)
					assert_int_equal(d->items[2].version,
							 42);
				else
					assert_int_equal(d->min_version, 7);
			}
			if (t == STORE_REPLICATE) {
				assert_int_equal(d->n, 3);
				if (reply)
					assert_int_equal(d->items[2].task, 92);
				else
					assert_int_equal(d->ssd_replicas, 3);
			}
			if (t == STORE_QUERY_TASK) {
				assert_int_equal(d->task, 0x123456789ull);
				if (reply) {
					assert_int_equal(d->task_status,
							 STORE_TASK_SUCCESS);
					assert_int_equal(d->updated_ms,
							 1700000000001ull);
					assert_memory_equal(d->client,
							    m->client,
							    STORE_ID_LEN);
					assert_int_equal(d->message.len, 27);
				}
			}
			if (t == STORE_CREATE_TASK && !reply) {
				assert_int_equal(d->task_type,
						 STORE_TASK_REPLICA_MOVE);
				assert_memory_equal(d->key.p, "obj/key", 7);
				assert_int_equal(d->n, 3);
			}
			if (t == STORE_REMOVE_REGEX && !reply)
				assert_memory_equal(d->pattern.p, "^some/", 6);
			if (t == STORE_REPLICA_CLEAR && !reply)
				assert_int_equal(d->preferred.len, 0);
			store_buf_free(&b);
			store_buf_free(&b2);
			free(m);
			free(d);
		}
	}
}

/* A body cut at any byte, or with one more, does not decode. */
static void test_short_and_long(void **state)
{
	struct store_msg *m = msg(STORE_QUERY, true), *d = msg(0, 0);
	struct store_buf b = { 0 };
	size_t body;

	(void)state;
	m->n = 2;
	m->items[0].nrep = 1;
	m->items[0].rep[0].endpoint = S("seg");
	assert_int_equal(store_msg_encode(&b, m), 0);
	body = b.len - STORE_HDR_LEN;
	for (size_t cut = 0; cut < body; cut++) {
		assert_int_equal(store_hdr_decode(b.p, &d->h), 0);
		d->h.len = (uint32_t)cut;
		assert_int_equal(store_msg_decode(b.p + STORE_HDR_LEN, d),
				 -EPROTO);
	}
	b.p = realloc(b.p, b.len + 1);
	b.p[b.len] = 0;
	d->h.len = (uint32_t)body + 1;
	assert_int_equal(store_msg_decode(b.p + STORE_HDR_LEN, d), -EPROTO);
	d->h.len = (uint32_t)body;
	assert_int_equal(store_msg_decode(b.p + STORE_HDR_LEN, d), 0);
	store_buf_free(&b);
	free(m);
	free(d);
}

static void test_header(void **state)
{
	uint8_t h[STORE_HDR_LEN] = { 'X', 'S', 'R', '1', STORE_EXIST, 0,
				     STORE_F_REPLY, 0, 7, 0, 0, 0, 0, 0, 0x80,
				     0 };
	struct store_hdr hd;

	(void)state;
	assert_int_equal(store_hdr_decode(h, &hd), 0);
	assert_int_equal(hd.type, STORE_EXIST);
	assert_int_equal(hd.seq, 7);
	assert_int_equal(hd.len, STORE_FRAME_MAX);
	h[14] = 0x81;                    /* 1 byte past the limit */
	assert_int_equal(store_hdr_decode(h, &hd), -EMSGSIZE);
	h[14] = 0;
	h[6] = 2;                        /* a flag not defined */
	assert_int_equal(store_hdr_decode(h, &hd), -EPROTO);
	h[6] = 0;
	h[4] = STORE_TYPE_END;
	assert_int_equal(store_hdr_decode(h, &hd), -EPROTO);
	h[4] = 0;
	assert_int_equal(store_hdr_decode(h, &hd), -EPROTO);
	h[4] = STORE_PING;
	h[0] = 'Y';
	assert_int_equal(store_hdr_decode(h, &hd), -EPROTO);
	assert_string_equal(store_type_name(STORE_PUT_START), "put_start");
	assert_null(store_type_name(STORE_TYPE_END));
}

/* Encode @p m and expect -EINVAL; then set the field past its limit in
 * a valid frame's bytes by hand (at @p at, @p len bytes of @p v) and
 * expect the decoder to refuse. */
static void refuse_both(struct store_msg *m, void (*spoil)(struct store_msg *),
			size_t at, unsigned len, uint64_t v)
{
	struct store_msg *d = msg(0, 0);
	struct store_buf b = { 0 };

	assert_int_equal(store_msg_encode(&b, m), 0);
	for (unsigned i = 0; i < len; i++)
		b.p[STORE_HDR_LEN + at + i] = (uint8_t)(v >> (8 * i));
	assert_int_equal(store_hdr_decode(b.p, &d->h), 0);
	assert_int_equal(store_msg_decode(b.p + STORE_HDR_LEN, d), -EPROTO);
	spoil(m);
	b.len = 0;
	assert_int_equal(store_msg_encode(&b, m), -EINVAL);
	assert_int_equal(b.len, 0);
	store_buf_free(&b);
	free(d);
}

static void long_key(struct store_msg *m)
{
	static char k[STORE_KEY_MAX + 1];

	m->items[0].key = (struct store_str){ k, sizeof(k) };
}

static void big_batch(struct store_msg *m)
{
	m->n = STORE_BATCH_MAX + 1;
}

static void empty_batch(struct store_msg *m)
{
	m->n = 0;
}

static void many_replicas(struct store_msg *m)
{
	m->items[0].nrep = STORE_REPLICA_MAX + 1;
}

static void bad_force(struct store_msg *m)
{
	m->force = 2;
}

static void empty_pattern(struct store_msg *m)
{
	m->pattern = S("");
}

static void empty_name(struct store_msg *m)
{
	m->name = S("");
}

static void bad_medium(struct store_msg *m)
{
	m->medium = STORE_MEDIUM_SSD + 1;
}

static void bad_task_type(struct store_msg *m)
{
	m->task_type = STORE_TASK_REPLICATE;   /* not one to create */
}

static void empty_key(struct store_msg *m)
{
	m->key = S("");
}

static void bad_status(struct store_msg *m)
{
	m->task_status = STORE_TASK_SUCCESS + 1;
}

static void test_limits(void **state)
{
	struct store_msg *m = msg(STORE_EXIST, false);

	(void)state;
	m->n = 1;
	m->items[0].key = S("k");
	/* body: u32 n, u16 key length */
	refuse_both(m, long_key, 4, 2, STORE_KEY_MAX + 1);
	m->items[0].key = S("k");
	refuse_both(m, big_batch, 0, 4, STORE_BATCH_MAX + 1);
	m->n = 1;
	refuse_both(m, empty_batch, 0, 4, 0);
	free(m);

	m = msg(STORE_QUERY, true);
	m->n = 1;
	/* body: i32 err, u32 n, i32 err, u64 len, u64 lease, u64 version,
	 * u8 nrep */
	refuse_both(m, many_replicas, 36, 1, STORE_REPLICA_MAX + 1);
	free(m);

	m = msg(STORE_REMOVE_REGEX, false);
	m->pattern = S("x");
	/* body: u8 force, u16 pattern length */
	refuse_both(m, empty_pattern, 1, 2, 0);
	free(m);

	m = msg(STORE_CREATE_TASK, false);
	m->key = S("k");
	m->n = 1;
	m->items[0].key = S("seg");
	/* body: id client, u8 type, u16 source length (0), u16 key length */
	refuse_both(m, bad_task_type, 16, 1, STORE_TASK_REPLICATE);
	m->task_type = STORE_TASK_REPLICA_COPY;
	refuse_both(m, empty_key, 19, 2, 0);
	free(m);

	m = msg(STORE_QUERY_TASK, true);
	/* body: i32 err, u64 task, u8 type, u8 status */
	refuse_both(m, bad_status, 13, 1, STORE_TASK_SUCCESS + 1);
	free(m);

	m = msg(STORE_REMOVE_ALL, false);
	refuse_both(m, bad_force, 0, 1, 2);
	free(m);

	m = msg(STORE_MOUNT, false);
	m->name = S("n");
	/* body: two ids, base, size, u16 name length */
	refuse_both(m, empty_name, 48, 2, 0);
	m->name = S("n");
	/* then the name's byte, u8 medium */
	refuse_both(m, bad_medium, 51, 1, 2);
	free(m);
}

/* The largest request and reply the limits allow fit in a frame. */
static void test_frame_limit(void **state)
{
	static char k[STORE_KEY_MAX];
	struct store_msg *m = msg(STORE_PUT_END, false);
	struct store_buf b = { 0 };

	(void)state;
	m->n = STORE_BATCH_MAX;
	for (unsigned i = 0; i < m->n; i++)
		m->items[i].key = (struct store_str){ k, sizeof(k) };
	assert_int_equal(store_msg_encode(&b, m), 0); /* 4 MiB fits */
	m->h.type = STORE_QUERY;
	m->h.flags = STORE_F_REPLY;
	for (unsigned i = 0; i < m->n; i++) {
		m->items[i].nrep = STORE_REPLICA_MAX;
		for (unsigned r = 0; r < STORE_REPLICA_MAX; r++)
			m->items[i].rep[r].endpoint =
				(struct store_str){ k, STORE_NAME_MAX };
	}
	b.len = 0;
	assert_int_equal(store_msg_encode(&b, m), 0); /* 4.5 MiB fits */
	store_buf_free(&b);
	free(m);
}

/* Buffers grouped by replica: a whole one (shards 0 encodes as 1), a
 * striped one of three, another whole one; the decoder marks each
 * group's first; a group past the buffers is refused both ways. */
static void test_shards(void **state)
{
	struct store_msg *m = msg(STORE_QUERY, true), *d;
	struct store_buf b = { 0 };
	const uint8_t want[5] = { 1, 3, 0, 0, 1 };

	(void)state;
	m->n = 1;
	m->items[0].nrep = 5;
	for (unsigned i = 0; i < 5; i++) {
		m->items[0].rep[i].addr = 4096 * i;
		m->items[0].rep[i].len = 100 + i;
		m->items[0].rep[i].endpoint = S("seg");
	}
	m->items[0].rep[1].shards = 3;
	m->items[0].rep[2].shards = 7;   /* inside a group: not sent */
	assert_int_equal(store_msg_encode(&b, m), 0);
	/* count, then per group a shards byte: 1 + 3 + 1 of them */
	assert_int_equal(decode(&b, &d), 0);
	assert_int_equal(d->items[0].nrep, 5);
	for (unsigned i = 0; i < 5; i++) {
		assert_int_equal(d->items[0].rep[i].shards, want[i]);
		assert_int_equal(d->items[0].rep[i].len, 100 + i);
	}
	/* the last group's count, 1, made 2: one buffer too few */
	b.p[b.len - (1 + 8 + 8 + 2 + 3)] = 2;
	free(d);
	assert_int_equal(decode(&b, &d), -EPROTO);
	free(d);
	m->items[0].rep[4].shards = 2;
	b.len = 0;
	assert_int_equal(store_msg_encode(&b, m), -EINVAL);
	store_buf_free(&b);
	free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_short_and_long),
		cmocka_unit_test(test_header),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_frame_limit),
		cmocka_unit_test(test_shards),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
