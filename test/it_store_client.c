/*
 * The store's client (include/xfer/store.h) against a real xfer-stored,
 * with clients in several processes (forked, each with its own engine,
 * driven by lines over pipes) and this one: puts and gets across
 * processes, staged in pieces and zero-copy, the own segment by memcpy,
 * batches past one request, replicas on distinct segments read after
 * their holders are killed, a full store (-200) and room after a remove,
 * leases (-706, forced 0, -707 for a read that outlives its lease),
 * concurrent puts of one key (one object, never torn), the callback
 * base's rules (-EDEADLK), and a master that restarts. Every byte read
 * back is checked.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xfer/store.h>

#include "store/proto_internal.h"
#include "test/helpers.h"
#include "test/th_store.h"

#define MiB (1u << 20)
#define SEG (64 * MiB)
#define STAGE (4 * MiB)

static pid_t master;
static uint16_t mport;
static char maddr[32];

static void master_start(const char *const *args)
{
	master = th_stored_start(args, 0, &mport);
	snprintf(maddr, sizeof(maddr), "127.0.0.1:%u", mport);
}

static uint64_t seed_of(const char *key, uint64_t variant)
{
	uint64_t h = 0xcbf29ce484222325ull ^ variant;

	while (*key)
		h = (h ^ (uint8_t)*key++) * 0x100000001b3ull;
	return h;
}

/* A client with an engine of its own (p2p on 127.0.0.1), or NULL. No
 * cmocka: children call it. */
static struct xfer_kv *client_try(uint64_t seg, uint64_t stage)
{
	struct xfer_config *cfg = xfer_config_new();
	struct xfer_kv *kv = NULL;

	if (cfg && !xfer_config_set(cfg, "bind_addr", "127.0.0.1") &&
	    !xfer_config_set(cfg, "local_server_name", "127.0.0.1") &&
	    !xfer_config_set(cfg, "workers", "1"))
		kv = xfer_kv_new(NULL, cfg, maddr, seg, stage);
	xfer_config_free(cfg);
	return kv;
}

static struct xfer_kv *client(uint64_t seg, uint64_t stage)
{
	struct xfer_kv *kv = client_try(seg, stage);

	if (!kv)
		fail_msg("client: %s", strerror(errno));
	return kv;
}

/* ---- a client process, driven by lines ---- */

struct sizes {
	uint64_t seg, stage;
};

/* Put @p len bytes of seed_of(@p key, @p v) (zero-copy from a
 * registered buffer if @p z). */
static int64_t put_pattern(struct xfer_kv *kv, const char *key, size_t len,
			   uint64_t v, unsigned repl, bool z)
{
	struct xfer_kv_replicate rc = { .replica_num = repl };
	uint8_t *buf = malloc(len);
	int64_t ret = -ENOMEM;

	if (!buf)
		return ret;
	th_fill(buf, len, seed_of(key, v));
	if (!z)
		ret = xfer_kv_put(kv, key, buf, len, &rc);
	else if (!(ret = xfer_kv_register_buffer(kv, buf, len))) {
		ret = xfer_kv_put_from(kv, key, buf, len, &rc);
		xfer_kv_unregister_buffer(kv, buf);
	}
	free(buf);
	return ret;
}

/* Get @p key (capacity @p len): its length, an error, or -9999 if its
 * bytes are not seed_of(@p key, @p v)'s. */
static int64_t get_pattern(struct xfer_kv *kv, const char *key, size_t len,
			   uint64_t v, bool z)
{
	uint8_t *buf = malloc(len);
	int64_t ret = -ENOMEM;

	if (!buf)
		return ret;
	if (!z)
		ret = xfer_kv_get(kv, key, buf, len);
	else if (!(ret = xfer_kv_register_buffer(kv, buf, len))) {
		ret = xfer_kv_get_into(kv, key, buf, len);
		xfer_kv_unregister_buffer(kv, buf);
	}
	if (ret > 0 && th_check(buf, (size_t)ret, seed_of(key, v)) >= 0)
		ret = -9999;
	free(buf);
	return ret;
}

/* Put keys PREFIX0 .. PREFIX(n-1), as two processes racing each other. */
static int64_t race(struct xfer_kv *kv, const char *prefix, int n,
		    size_t len, uint64_t v)
{
	int64_t failed = 0;
	char key[160];

	for (int i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "%s%d", prefix, i);
		failed += put_pattern(kv, key, len, v, 1, false) != 0;
	}
	return failed;
}

/*
 * A client process: says its engine's name, then answers each line
 *   put|putz|get|getz KEY LEN VARIANT [REPLICAS]   (z: zero-copy)
 *   race PREFIX N LEN VARIANT
 * with the call's result, until "q".
 */
static int role_client(int in, int out, void *arg)
{
	const struct sizes *sz = arg;
	struct xfer_kv *kv = client_try(sz->seg, sz->stage);
	char line[256], op[8], key[128], res[32];
	unsigned long long len, v;
	unsigned repl;
	int64_t ret;

	if (!kv)
		return 10;
	th_line_send(out, xfer_engine_name(xfer_kv_engine(kv)));
	while (th_line_recv(in, line, sizeof(line), 300000) >= 0 &&
	       strcmp(line, "q")) {
		repl = 1;
		if (sscanf(line, "%7s %127s %llu %llu %u", op, key, &len, &v,
			   &repl) < 4)
			return 11;
		if (!strcmp(op, "race"))
			ret = race(kv, key, (int)len, (size_t)v, repl);
		else if (op[0] == 'p')
			ret = put_pattern(kv, key, len, v, repl, op[3] == 'z');
		else
			ret = get_pattern(kv, key, len, v, op[3] == 'z');
		snprintf(res, sizeof(res), "%lld", (long long)ret);
		th_line_send(out, res);
	}
	return xfer_kv_free(kv) ? 12 : 0;
}

/* Start a client process; its engine's name into @p name (64 bytes). */
static void proc_start(struct th_proc *p, struct sizes *sz, char *name)
{
	th_spawn(p, role_client, sz);
	assert_true(th_line_recv(p->from, name, 64, 30000) > 0);
}

/* Send a line to @p p; @return the number it answers. */
static long long cmd(struct th_proc *p, const char *fmt, ...)
{
	char line[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	assert_int_equal(th_line_send(p->to, line), 0);
	assert_true(th_line_recv(p->from, line, sizeof(line), 120000) > 0);
	return atoll(line);
}

static void proc_stop(struct th_proc *p)
{
	th_line_send(p->to, "q");
	assert_int_equal(th_proc_exit(p, 30000), 0);
}

static int teardown(void **state)
{
	(void)state;
	th_kill(master);
	master = 0;
	return 0;
}

/* ---- tests ---- */

/* A writer process puts, through a holder's segment, what this process
 * reads: small, odd, larger than the staging buffer (in pieces), and
 * zero-copy; the holder reads its own segment by memcpy. Objects are
 * immutable; bad arguments are -600, a miss -704. */
static void test_put_get(void **state)
{
	struct sizes holder = { SEG, STAGE }, writer = { 0, STAGE };
	static const struct { const char *key; size_t len; bool z; } objs[] = {
		{ "small", 4096, false }, { "odd", MiB + 13, false },
		{ "large", 20 * MiB + 7, false }, { "zc", 3 * MiB, true },
	};
	struct th_proc h, w;
	char hname[64], wname[64];
	struct xfer_kv *kv;
	uint8_t one[16];

	(void)state;
	master_start(NULL);
	proc_start(&h, &holder, hname);
	proc_start(&w, &writer, wname);
	assert_string_not_equal(hname, wname);
	kv = client(0, STAGE);
	for (size_t i = 0; i < 4; i++)
		assert_int_equal(cmd(&w, "put%s %s %zu 1", objs[i].z ? "z" : "",
				     objs[i].key, objs[i].len), 0);
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(get_pattern(kv, objs[i].key, objs[i].len, 1,
					     false), objs[i].len);
		assert_int_equal(get_pattern(kv, objs[i].key, 32 * MiB, 1,
					     true), objs[i].len);
		assert_int_equal(xfer_kv_get_size(kv, objs[i].key),
				 objs[i].len);
	}
	/* the holder reads its own segment: a memcpy, no staging needed */
	assert_int_equal(cmd(&h, "get large %zu 1", 21 * MiB), 20 * MiB + 7);
	assert_int_equal(cmd(&h, "put own %zu 2", 2 * MiB), 0);
	assert_int_equal(get_pattern(kv, "own", 2 * MiB, 2, false), 2 * MiB);

	/* a put of an existing key succeeds and changes nothing */
	assert_int_equal(put_pattern(kv, "small", 4096, 99, 1, false), 0);
	assert_int_equal(get_pattern(kv, "small", 4096, 1, false), 4096);
	assert_int_equal(xfer_kv_get(kv, "missing", one, sizeof(one)),
			 XFER_KV_OBJECT_NOT_FOUND);
	assert_int_equal(xfer_kv_get(kv, "small", one, sizeof(one)),
			 XFER_KV_INVALID_PARAMS);       /* too small */
	assert_int_equal(xfer_kv_put(kv, "", one, 1, NULL),
			 XFER_KV_INVALID_PARAMS);
	assert_int_equal(xfer_kv_put(kv, "k", one, 0, NULL),
			 XFER_KV_INVALID_PARAMS);
	assert_int_equal(xfer_kv_put(kv, "k", one, 1,
				     &(struct xfer_kv_replicate){ 0 }),
			 XFER_KV_INVALID_PARAMS);
	assert_int_equal(xfer_kv_exist(kv, "odd"), 1);
	assert_int_equal(xfer_kv_exist(kv, "missing"), 0);
	assert_int_equal(xfer_kv_free(kv), 0);
	proc_stop(&w);
	proc_stop(&h);
	th_stored_stop(master);
	master = 0;
}

/* Batches past one request (1024 keys), staged through a small buffer in
 * many rounds, with two replicas (the own segment's by memcpy); then
 * zero-copy from and into several parts per object. */
static void test_batches(void **state)
{
	enum { N = 1500, LEN = 5000 };
	struct sizes holder = { SEG, STAGE };
	struct xfer_kv_replicate rc = { .replica_num = 2 };
	static char names[N + 1][16];
	const char *keys[N + 1];
	struct iovec iov[2 * N];
	size_t cnt[N];
	int64_t res[N + 1];
	char hname[64];
	struct th_proc h;
	struct xfer_kv *kv;
	uint8_t *src, *dst;

	(void)state;
	master_start(NULL);
	proc_start(&h, &holder, hname);
	kv = client(SEG, 1 * MiB);
	src = th_alloc((size_t)N * LEN);
	dst = th_alloc((size_t)N * LEN);
	th_fill(src, (size_t)N * LEN, 7);
	for (int i = 0; i <= N; i++) {
		snprintf(names[i], sizeof(names[i]), "b%d", i);
		keys[i] = names[i];
		iov[i] = (struct iovec){ src + (size_t)i * LEN, LEN };
	}
	assert_int_equal(xfer_kv_batch_put(kv, N, keys, iov, NULL, 0, &rc,
					   res), 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(res[i], 0);
	assert_int_equal(xfer_kv_batch_exist(kv, N + 1, keys, res), 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(res[i], 1);
	assert_int_equal(res[N], 0);                    /* never put */
	for (int i = 0; i < N; i++)
		iov[i] = (struct iovec){ dst + (size_t)i * LEN, LEN };
	assert_int_equal(xfer_kv_batch_get(kv, N, keys, iov, NULL, 0, res),
			 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(res[i], LEN);
	assert_int_equal(th_check(dst, (size_t)N * LEN, 7), -1);
	/* leased by the query: refused unless forced */
	assert_int_equal(xfer_kv_batch_remove(kv, 2, keys, false, res),
			 XFER_KV_OBJECT_HAS_LEASE);
	assert_int_equal(xfer_kv_batch_remove(kv, N, keys, true, res), 0);
	assert_int_equal(xfer_kv_exist(kv, "b1"), 0);

	/* zero-copy, object i from two parts and back into three */
	assert_int_equal(xfer_kv_register_buffer(kv, src, (size_t)N * LEN), 0);
	assert_int_equal(xfer_kv_register_buffer(kv, dst, (size_t)N * LEN), 0);
	for (int i = 0; i < 64; i++) {
		iov[2 * i] = (struct iovec){ src + (size_t)i * LEN, 100 };
		iov[2 * i + 1] = (struct iovec){ src + (size_t)i * LEN + 100,
						 LEN - 100 };
		cnt[i] = 2;
	}
	assert_int_equal(xfer_kv_batch_put(kv, 64, keys, iov, cnt,
					   XFER_KV_ZERO_COPY, &rc, res), 0);
	memset(dst, 0, (size_t)N * LEN);
	for (int i = 0; i < 64; i++) {
		uint8_t *d = dst + (size_t)i * LEN;

		iov[3 * i] = (struct iovec){ d, 50 };
		iov[3 * i + 1] = (struct iovec){ d + 50, 50 };
		iov[3 * i + 2] = (struct iovec){ d + 100, LEN };  /* room */
		cnt[i] = 3;
	}
	assert_int_equal(xfer_kv_batch_get(kv, 64, keys, iov, cnt,
					   XFER_KV_ZERO_COPY, res), 0);
	for (int i = 0; i < 64; i++)
		assert_int_equal(res[i], LEN);
	assert_int_equal(th_check(dst, (size_t)64 * LEN, 7), -1);
	assert_int_equal(xfer_kv_remove_all(kv, true), 64);
	assert_int_equal(xfer_kv_free(kv), 0);  /* unregisters its own */
	free(src);
	free(dst);
	proc_stop(&h);
}

/* The replicas of a query, by raw RPC: their endpoints into @p names
 * (NUL-ended, 64 bytes each). @return how many. */
static int raw_replicas(const char *key, char names[][64])
{
	static struct store_msg m, rep;
	static uint8_t body[1 << 16];
	struct store_buf b = { 0 };
	uint8_t hdr[STORE_HDR_LEN];
	int fd = th_connect(mport);

	m.h = (struct store_hdr){ .type = STORE_QUERY, .seq = 1 };
	m.n = 1;
	m.items[0].key = (struct store_str){ key, (uint16_t)strlen(key) };
	assert_int_equal(store_msg_encode(&b, &m), 0);
	assert_int_equal(th_send_all(fd, b.p, b.len), 0);
	store_buf_free(&b);
	assert_int_equal(th_recv_all(fd, hdr, sizeof(hdr), 5000), sizeof(hdr));
	assert_int_equal(store_hdr_decode(hdr, &rep.h), 0);
	assert_int_equal(th_recv_all(fd, body, rep.h.len, 5000), rep.h.len);
	assert_int_equal(store_msg_decode(body, &rep), 0);
	close(fd);
	assert_int_equal(rep.items[0].err, 0);
	for (unsigned i = 0; i < rep.items[0].nrep; i++)
		snprintf(names[i], 64, "%.*s", rep.items[0].rep[i].endpoint.len,
			 rep.items[0].rep[i].endpoint.p);
	return rep.items[0].nrep;
}

/* Three replicas on the three holders' segments; killed holders: the
 * read goes on from the next replica, and once the master expired them
 * one replica is left, still read. */
static void test_replicas_kill(void **state)
{
	struct sizes holder = { SEG, STAGE };
	char names[3][64], reps[STORE_REPLICA_MAX][64];
	struct th_proc h[3];
	struct xfer_kv *kv;

	(void)state;
	master_start((const char *[]){ "--client_ttl=2", NULL });
	for (int i = 0; i < 3; i++)
		proc_start(&h[i], &holder, names[i]);
	kv = client(0, STAGE);
	assert_int_equal(put_pattern(kv, "r", 8 * MiB, 3, 3, false), 0);
	assert_int_equal(raw_replicas("r", reps), 3);
	/* distinct: each holder's name once */
	for (int j = 0; j < 3; j++) {
		int seen = 0;

		for (int i = 0; i < 3; i++)
			seen += !strcmp(reps[i], names[j]);
		assert_int_equal(seen, 1);
	}
	/* kill the holders of the first two replicas the client will try */
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 3; j++)
			if (!strcmp(reps[i], names[j]))
				th_proc_kill(&h[j]);
	assert_int_equal(get_pattern(kv, "r", 8 * MiB, 3, false), 8 * MiB);
	/* the master drops their segments after --client_ttl */
	for (int64_t end = th_now_ms() + 10000;
	     raw_replicas("r", reps) > 1 && th_now_ms() < end;)
		usleep(100000);
	assert_int_equal(raw_replicas("r", reps), 1);
	assert_int_equal(get_pattern(kv, "r", 8 * MiB, 3, true), 8 * MiB);
	assert_int_equal(xfer_kv_free(kv), 0);
	for (int j = 0; j < 3; j++)
		if (h[j].pid)
			proc_stop(&h[j]);
}

/* Hard-pinned objects fill the store: -200; a remove makes room. */
static void test_capacity(void **state)
{
	struct xfer_kv_replicate pin = { .replica_num = 1,
					 .with_hard_pin = true };
	uint8_t *buf = th_alloc(MiB);
	struct xfer_kv *kv;
	char key[16];
	int i, ret = 0;

	(void)state;
	master_start(NULL);
	kv = client(4 * MiB, MiB);
	th_fill(buf, MiB, 5);
	for (i = 0; i < 8 && !ret; i++) {
		snprintf(key, sizeof(key), "p%d", i);
		ret = xfer_kv_put(kv, key, buf, MiB, &pin);
	}
	assert_int_equal(ret, XFER_KV_NO_AVAILABLE_HANDLE);
	assert_true(i >= 4 && i <= 5);
	assert_int_equal(xfer_kv_put(kv, key, buf, MiB, &pin),
			 XFER_KV_NO_AVAILABLE_HANDLE);
	assert_int_equal(xfer_kv_remove(kv, "p0", false), 0);
	assert_int_equal(xfer_kv_put(kv, key, buf, MiB, &pin), 0);
	assert_int_equal(xfer_kv_get(kv, key, buf, MiB), MiB);
	assert_int_equal(th_check(buf, MiB, 5), -1);
	assert_int_equal(xfer_kv_free(kv), 0);
	free(buf);
}

/* A query or exist leases: remove is refused (-706) unless forced, and
 * remove_all skips leased objects unless forced. */
static void test_leases(void **state)
{
	struct xfer_kv *kv;

	(void)state;
	master_start(NULL);
	kv = client(16 * MiB, MiB);
	assert_int_equal(put_pattern(kv, "l", 4096, 1, 1, false), 0);
	assert_int_equal(xfer_kv_remove(kv, "l", false), 0);  /* no lease */
	assert_int_equal(put_pattern(kv, "l", 4096, 1, 1, false), 0);
	assert_int_equal(xfer_kv_exist(kv, "l"), 1);
	assert_int_equal(xfer_kv_remove(kv, "l", false),
			 XFER_KV_OBJECT_HAS_LEASE);
	assert_int_equal(xfer_kv_remove(kv, "l", true), 0);
	assert_int_equal(xfer_kv_exist(kv, "l"), 0);
	assert_int_equal(xfer_kv_remove(kv, "l", true),
			 XFER_KV_OBJECT_NOT_FOUND);
	assert_int_equal(put_pattern(kv, "l", 4096, 1, 1, false), 0);
	assert_int_equal(put_pattern(kv, "m", 4096, 1, 1, false), 0);
	assert_int_equal(get_pattern(kv, "l", 4096, 1, false), 4096);
	assert_int_equal(xfer_kv_remove_all(kv, false), 1);    /* m only */
	assert_int_equal(xfer_kv_exist(kv, "l"), 1);
	assert_int_equal(xfer_kv_remove_all(kv, true), 1);
	assert_int_equal(xfer_kv_exist(kv, "l"), 0);
	assert_int_equal(xfer_kv_free(kv), 0);
}

/* A client without a staging buffer moves only zero-copy (or by memcpy
 * to and from its own segment, which it has none of here). */
static void test_no_staging(void **state)
{
	uint8_t *buf = th_alloc(MiB);
	struct xfer_kv *kv, *bare;

	(void)state;
	master_start(NULL);
	kv = client(16 * MiB, 0);
	bare = client(0, 0);
	th_fill(buf, MiB, 9);
	assert_int_equal(xfer_kv_put(bare, "s", buf, MiB, NULL),
			 XFER_KV_INVALID_PARAMS);
	assert_int_equal(xfer_kv_exist(bare, "s"), 0);      /* revoked */
	assert_int_equal(xfer_kv_register_buffer(bare, buf, MiB), 0);
	assert_int_equal(xfer_kv_put_from(bare, "s", buf, MiB, NULL), 0);
	assert_int_equal(xfer_kv_get(bare, "s", buf, MiB),
			 XFER_KV_INVALID_PARAMS);
	memset(buf, 0, MiB);
	assert_int_equal(xfer_kv_get_into(bare, "s", buf, MiB), MiB);
	assert_int_equal(th_check(buf, MiB, 9), -1);
	/* the holder reads its own segment by memcpy, staging or not */
	memset(buf, 0, MiB);
	assert_int_equal(xfer_kv_get(kv, "s", buf, MiB), MiB);
	assert_int_equal(th_check(buf, MiB, 9), -1);
	assert_int_equal(xfer_kv_free(bare), 0);
	assert_int_equal(xfer_kv_free(kv), 0);
	free(buf);
}

/* With a lease of 1 ms, a read of 32 MiB outlives it: -707, staged,
 * zero-copy and by memcpy from the own segment alike. */
static void test_lease_expired(void **state)
{
	struct sizes holder = { SEG, STAGE };
	struct th_proc h;
	char hname[64];
	struct xfer_kv *kv;

	(void)state;
	master_start((const char *[]){ "--default_kv_lease_ttl=1", NULL });
	proc_start(&h, &holder, hname);
	kv = client(0, STAGE);
	assert_int_equal(put_pattern(kv, "x", 32 * MiB, 4, 1, false), 0);
	assert_int_equal(get_pattern(kv, "x", 32 * MiB, 4, false),
			 XFER_KV_LEASE_EXPIRED);
	assert_int_equal(get_pattern(kv, "x", 32 * MiB, 4, true),
			 XFER_KV_LEASE_EXPIRED);
	assert_int_equal(cmd(&h, "get x %u 4", 32 * MiB),
			 XFER_KV_LEASE_EXPIRED);
	/* a small read within its lease still stands */
	assert_int_equal(xfer_kv_get_size(kv, "x"), 32 * MiB);
	assert_int_equal(xfer_kv_free(kv), 0);
	proc_stop(&h);
}

/* Two processes put the same keys with different bytes at once while
 * this one reads them: every put succeeds, each key ends as one object,
 * and no read ever sees bytes of both. */
static void test_concurrent_puts(void **state)
{
	enum { N = 40, LEN = 256 << 10 };
	struct sizes holder = { SEG, STAGE }, writer = { 0, STAGE };
	struct th_proc h, w[2];
	char name[64], key[16], line[32];
	uint8_t *buf = th_alloc(LEN);
	struct xfer_kv *kv;
	int reads = 0;

	(void)state;
	master_start(NULL);
	proc_start(&h, &holder, name);
	for (int i = 0; i < 2; i++)
		proc_start(&w[i], &writer, name);
	kv = client(0, STAGE);
	for (int i = 0; i < 2; i++)
		assert_int_equal(th_line_send(w[i].to, i ? "race c 40 262144 200"
					      : "race c 40 262144 100"), 0);
	for (int round = 0; round < 20; round++)
		for (int i = 0; i < N; i++) {
			int64_t ret;

			snprintf(key, sizeof(key), "c%d", i);
			ret = xfer_kv_get(kv, key, buf, LEN);
			if (ret == XFER_KV_OBJECT_NOT_FOUND ||
			    ret == XFER_KV_REPLICA_IS_NOT_READY)
				continue;
			assert_int_equal(ret, LEN);
			assert_true(th_check(buf, LEN, seed_of(key, 100)) < 0 ||
				    th_check(buf, LEN, seed_of(key, 200)) < 0);
			reads++;
		}
	for (int i = 0; i < 2; i++) {
		assert_true(th_line_recv(w[i].from, line, sizeof(line),
					 120000) > 0);
		assert_string_equal(line, "0");         /* no put failed */
	}
	for (int i = 0; i < N; i++) {
		snprintf(key, sizeof(key), "c%d", i);
		assert_int_equal(xfer_kv_get(kv, key, buf, LEN), LEN);
		assert_true(th_check(buf, LEN, seed_of(key, 100)) < 0 ||
			    th_check(buf, LEN, seed_of(key, 200)) < 0);
	}
	print_message("concurrent puts: %d reads during the race\n", reads);
	assert_int_equal(xfer_kv_free(kv), 0);
	for (int i = 0; i < 2; i++)
		proc_stop(&w[i]);
	proc_stop(&h);
	free(buf);
}

struct cb_rec {
	atomic_int calls;
	_Atomic int64_t result, nested, freed, exist;
	bool returned, inside;              /* the reactor's */
	pthread_t thread;
};

static void on_exist(struct xfer_kv *kv, int64_t result, void *arg)
{
	struct cb_rec *r = arg;

	(void)kv;
	r->inside = !r->returned;
	r->exist = result;
	atomic_fetch_add(&r->calls, 1);
}

static void on_put(struct xfer_kv *kv, int64_t result, void *arg)
{
	struct cb_rec *r = arg;

	r->thread = pthread_self();
	r->nested = xfer_kv_exist(kv, "a");     /* would wait for itself */
	r->freed = xfer_kv_free(kv);
	r->result = result;
	/* on this thread: a callback inside the call would run first */
	if (!xfer_kv_exist_async(kv, "a", on_exist, r))
		r->returned = true;
	atomic_fetch_add(&r->calls, 1);
}

/* Callbacks run on the engine's control thread, never inside the call;
 * there a blocking call or a free refuses with -EDEADLK. */
static void test_callbacks(void **state)
{
	static uint8_t val[8192];
	struct cb_rec r = { 0 };
	struct xfer_engine *e;
	struct xfer_kv *kv;

	(void)state;
	master_start(NULL);
	e = th_engine(1);
	kv = xfer_kv_new(e, NULL, maddr, 16 * MiB, MiB);
	assert_non_null(kv);
	assert_int_equal(xfer_kv_put_async(kv, "a", val, sizeof(val), NULL,
					   on_put, &r), 0);
	assert_true(th_wait_atomic(&r.calls, 2, 10000));
	assert_int_equal(r.result, 0);
	assert_int_equal(r.exist, 1);
	assert_false(r.inside);
	assert_int_equal(r.nested, -EDEADLK);
	assert_int_equal(r.freed, -EDEADLK);
	assert_false(pthread_equal(r.thread, pthread_self()));
	assert_int_equal(xfer_kv_put_async(kv, "b", val, sizeof(val), NULL,
					   NULL, NULL),
			 XFER_KV_INVALID_PARAMS);
	assert_int_equal(xfer_kv_free(kv), 0);
	assert_null(xfer_kv_new(e, NULL, "127.0.0.1", 0, 0));
	assert_int_equal(errno, EINVAL);
	assert_null(xfer_kv_new(e, NULL, maddr, 63, 0));
	assert_int_equal(errno, EINVAL);
	xfer_engine_free(e);
	th_stored_stop(master);
	master = 0;
	/* no master */
	assert_null(client_try(0, 0));
	assert_int_equal(errno, ECONNREFUSED);
}

/* The master is killed: calls fail with -900; restarted on its port, the
 * client reconnects and mounts again on its own. */
static void test_master_restart(void **state)
{
	struct xfer_kv *kv;
	int64_t ret = 0, end;

	(void)state;
	master_start(NULL);
	kv = client(16 * MiB, MiB);
	assert_int_equal(put_pattern(kv, "k", 4096, 1, 1, false), 0);
	assert_int_equal(xfer_kv_healthy(kv), 1);
	th_kill(master);
	master = 0;
	assert_int_equal(put_pattern(kv, "k2", 4096, 1, 1, false),
			 XFER_KV_RPC_FAIL);
	assert_int_equal(xfer_kv_healthy(kv), 0);
	master = th_stored_start(NULL, mport, &mport);
	end = th_now_ms() + 10000;
	do {
		usleep(100000);
		ret = put_pattern(kv, "k3", 4096, 1, 1, false);
	} while (ret && th_now_ms() < end);
	assert_int_equal(ret, 0);
	assert_int_equal(xfer_kv_healthy(kv), 1);
	assert_int_equal(get_pattern(kv, "k3", 4096, 1, false), 4096);
	assert_int_equal(xfer_kv_exist(kv, "k"), 0);    /* forgotten */
	assert_int_equal(xfer_kv_free(kv), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_put_get, teardown),
		cmocka_unit_test_teardown(test_batches, teardown),
		cmocka_unit_test_teardown(test_replicas_kill, teardown),
		cmocka_unit_test_teardown(test_capacity, teardown),
		cmocka_unit_test_teardown(test_leases, teardown),
		cmocka_unit_test_teardown(test_no_staging, teardown),
		cmocka_unit_test_teardown(test_lease_expired, teardown),
		cmocka_unit_test_teardown(test_concurrent_puts, teardown),
		cmocka_unit_test_teardown(test_callbacks, teardown),
		cmocka_unit_test_teardown(test_master_restart, teardown),
	};

	signal(SIGPIPE, SIG_IGN);
	if (getenv("TEST_FILTER"))
		cmocka_set_test_filter(getenv("TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
