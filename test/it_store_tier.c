/*
 * xfer-stored's tiers (store/master/tier.c) as a real process driven by
 * a small client of its RPC: SSD replicas asked per put, DRAM replicas
 * listed first, promotion after the admission threshold, offload on
 * eviction, each copy handed to the client owning the DRAM side
 * (tier_poll) and reported (tier_done) by it alone, a failed copy, an
 * SSD segment unmounted under copies in flight, and removes refused
 * while a copy is in flight.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test/helpers.h"
#include "test/th_master.h"

static const uint8_t A[STORE_ID_LEN] = { 'A' }, B[STORE_ID_LEN] = { 'B' };

#define KiB 1024u

/* Mount A's DRAM segment "a" (id 1, @p dram bytes) and its SSD segment
 * "nvmeof/a" (id 2, @p ssd bytes, 4 MiB if 0), and B's DRAM segment "b"
 * (id 3). */
static void mount_ssd(int fd, uint64_t dram, uint64_t ssd)
{
	st_req->medium = STORE_MEDIUM_DRAM;
	assert_int_equal(st_mount(fd, A, 1, "a", 0x100000, dram), 0);
	assert_int_equal(st_mount(fd, B, 3, "b", 0x100000, dram), 0);
	st_req->medium = STORE_MEDIUM_SSD;
	assert_int_equal(st_mount(fd, A, 2, "nvmeof/a", 0,
				  ssd ? ssd : 4096 * KiB), 0);
	st_req->medium = STORE_MEDIUM_DRAM;
}

static void mount_all(int fd, uint64_t dram)
{
	mount_ssd(fd, dram, 0);
}

/* Put @p key of @p len bytes with @p dram and @p ssd replicas. */
static int put(int fd, const char *key, uint64_t len, uint8_t dram,
	       uint8_t ssd)
{
	int ret;

	st_req->ssd_replicas = ssd;
	ret = st_one(fd, STORE_PUT_START, A, key, len, dram, false);
	st_req->ssd_replicas = 0;
	return ret ? ret : st_one(fd, STORE_PUT_END, A, key, 0, 0, false);
}

/* The endpoints of @p key's replicas, joined by ',', into @p out. */
static const char *where(int fd, const char *key, char *out, size_t cap)
{
	out[0] = 0;
	if (st_one(fd, STORE_QUERY, A, key, 0, 0, false))
		return strcpy(out, "-");
	for (unsigned i = 0; i < st_rep->items[0].nrep; i++) {
		const struct store_str *e = &st_rep->items[0].rep[i].endpoint;

		snprintf(out + strlen(out), cap - strlen(out), "%s%.*s",
			 i ? "," : "", (int)e->len, e->p);
	}
	return out;
}

/* Poll as @p c. @return how many copies it got. */
static unsigned poll_as(int fd, const uint8_t *c)
{
	memcpy(st_req->client, c, STORE_ID_LEN);
	st_call(fd, STORE_TIER_POLL);
	assert_int_equal(st_rep->err, 0);
	return st_rep->n;
}

static void test_ssd_replicas_and_promotion(void **state)
{
	char w[256];
	int fd;

	(void)state;
	assert_int_equal(st_start(0, (const char *[]){
		"--promotion_on_hit=true", NULL }), 0);
	fd = th_connect(st_port);
	mount_all(fd, 1024 * KiB);
	assert_int_equal(put(fd, "s", 100 * KiB, 0, 1), 0);
	assert_string_equal(where(fd, "s", w, sizeof(w)), "nvmeof/a");
	assert_int_equal(put(fd, "two", 100 * KiB, 1, 1), 0);
	/* DRAM first, whatever the order of allocation */
	assert_true(!strcmp(where(fd, "two", w, sizeof(w)), "a,nvmeof/a") ||
		    !strcmp(w, "b,nvmeof/a"));
	assert_int_equal(put(fd, "none", 100 * KiB, 0, 0), -600);
	assert_int_equal(put(fd, "many", 100 * KiB, 9, 8), -600);

	/* "s" was read once above: the second read queues its promotion,
	 * handed to the owner of the DRAM segment chosen */
	assert_int_equal(poll_as(fd, A) + poll_as(fd, B), 0);
	assert_string_equal(where(fd, "s", w, sizeof(w)), "nvmeof/a");
	assert_int_equal(poll_as(fd, A), 1);    /* A's DRAM: on its host */
	assert_int_equal(st_rep->items[0].nrep, 2);
	assert_int_equal(st_rep->items[0].len, 100 * KiB);
	assert_memory_equal(st_rep->items[0].rep[0].endpoint.p, "nvmeof/a", 8);
	assert_memory_equal(st_rep->items[0].rep[1].endpoint.p, "a", 1);
	assert_int_equal(poll_as(fd, A), 0);    /* handed out once */
	/* not read while it fills */
	assert_string_equal(where(fd, "s", w, sizeof(w)), "nvmeof/a");
	/* a copy in flight: no remove unless forced */
	assert_int_equal(st_one(fd, STORE_REMOVE, A, "s", 0, 0, false), -706);
	assert_int_equal(st_tier_done(fd, B, "s", 0), -601);
	assert_int_equal(st_tier_done(fd, A, "s", -800), 0);   /* it failed */
	assert_string_equal(where(fd, "s", w, sizeof(w)), "nvmeof/a");
	assert_int_equal(st_tier_done(fd, A, "s", 0), -704);
	/* that read was the first of the next two */
	where(fd, "s", w, sizeof(w));
	assert_int_equal(poll_as(fd, A), 1);
	assert_int_equal(st_tier_done(fd, A, "s", 0), 0);
	assert_string_equal(where(fd, "s", w, sizeof(w)), "a,nvmeof/a");
	assert_int_equal(poll_as(fd, A), 0);    /* in DRAM: no more */
	{
		char *body;

		assert_int_equal(st_http_get(st_metrics_port, "/metrics",
					     &body, NULL), 200);
		assert_non_null(strstr(body, "\nmaster_promotion_completed_"
					     "total 1\n"));
		assert_non_null(strstr(body, "\nmaster_total_nof_capacity_"
					     "bytes 4194304\n"));
		assert_non_null(strstr(body, "\nmaster_nof_allocated_bytes "
					     "204800\n"));  /* s, two */
		free(body);
	}
	close(fd);
	st_stop();
}

static void test_offload_on_evict(void **state)
{
	char w[256], key[16];
	unsigned n, ssd = 0;
	int fd;

	(void)state;
	assert_int_equal(st_start(0, (const char *[]){
		"--enable_offload=true", "--offload_on_evict=true",
		"--eviction_high_watermark_ratio=0.5",
		"--eviction_ratio=0.25", NULL }), 0);
	fd = th_connect(st_port);
	mount_all(fd, 512 * KiB);
	/* 10 of 64 KiB in A's and B's DRAM: over the watermark */
	for (int i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		assert_int_equal(put(fd, key, 64 * KiB, 1, 0), 0);
	}
	usleep(300000);                         /* the tick evicts */
	/* A's objects and B's go to A's SSD segment; each copy goes to the
	 * owner of the DRAM side */
	n = poll_as(fd, A);
	for (unsigned i = 0; i < n; i++)
		assert_memory_equal(st_rep->items[i].rep[0].endpoint.p, "a", 1);
	{
		unsigned m;
		char keys[64][16];

		for (unsigned i = 0; i < n; i++)
			snprintf(keys[i], 16, "%.*s",
				 (int)st_rep->items[i].key.len,
				 st_rep->items[i].key.p);
		m = poll_as(fd, B);
		for (unsigned i = 0; i < m; i++)
			snprintf(keys[n + i], 16, "%.*s",
				 (int)st_rep->items[i].key.len,
				 st_rep->items[i].key.p);
		assert_true(n + m >= 3);
		/* a copy that fails: the object goes, as eviction wanted */
		assert_int_equal(st_tier_done(fd, n ? A : B, keys[0], -800), 0);
		assert_string_equal(where(fd, keys[0], w, sizeof(w)), "-");
		/* while it copies, it is read from DRAM; leased, it keeps its
		 * DRAM replica once copied */
		assert_string_not_equal(where(fd, keys[1], w, sizeof(w)),
					"nvmeof/a");
		assert_int_equal(st_tier_done(fd, n > 1 ? A : B, keys[1], 0),
				 0);
		where(fd, keys[1], w, sizeof(w));
		assert_true(!strcmp(w, "a,nvmeof/a") ||
			    !strcmp(w, "b,nvmeof/a"));
		for (unsigned i = 2; i < n + m; i++) {
			assert_int_equal(st_tier_done(fd, i < n ? A : B,
							 keys[i], 0), 0);
			assert_string_equal(where(fd, keys[i], w, sizeof(w)),
					    "nvmeof/a");
			ssd++;
		}
	}
	assert_true(ssd >= 1);
	close(fd);
	st_stop();
}

/* The SSD segment goes with copies in flight: they are dropped, their
 * objects stay in DRAM. */
static void test_unmount_under_copies(void **state)
{
	char w[256];
	int fd;

	(void)state;
	assert_int_equal(st_start(0, (const char *[]){
		"--enable_offload=true", NULL }), 0);
	fd = th_connect(st_port);
	mount_all(fd, 1024 * KiB);
	assert_int_equal(put(fd, "e", 64 * KiB, 1, 0), 0);
	/* eager: a copy at its put, by its DRAM segment's owner */
	assert_int_equal(poll_as(fd, A) + poll_as(fd, B), 1);
	assert_int_equal(st_unmount(fd, A, 2), 0);
	assert_int_equal(st_tier_done(fd, A, "e", 0), -704);
	assert_int_equal(st_tier_done(fd, B, "e", 0), -704);
	where(fd, "e", w, sizeof(w));
	assert_true(!strcmp(w, "a") || !strcmp(w, "b"));
	assert_int_equal(st_one(fd, STORE_REMOVE, A, "e", 0, 0, true), 0);
	close(fd);
	st_stop();
}

/* A full SSD tier makes room by evicting what lies only there, least
 * recently used first, unless --enable_disk_eviction=false. */
static void test_ssd_eviction(void **state)
{
	char w[256], key[16];
	int fd;

	(void)state;
	for (int on = 1; on >= 0; on--) {
		assert_int_equal(st_start(0, (const char *[]){
			on ? "--enable_disk_eviction=true" :
			     "--enable_disk_eviction=false", NULL }), 0);
		fd = th_connect(st_port);
		mount_ssd(fd, 1024 * KiB, 4096 * KiB);
		for (int i = 0; i < 4; i++) {
			snprintf(key, sizeof(key), "s%d", i);
			assert_int_equal(put(fd, key, 900 * KiB, 0, 1), 0);
		}
		/* s0 was used last: s1 goes */
		assert_string_equal(where(fd, "s0", w, sizeof(w)), "nvmeof/a");
		if (!on) {
			assert_int_equal(put(fd, "s4", 900 * KiB, 0, 1), -200);
			close(fd);
			st_stop();
			continue;
		}
		/* (the allocator's bins may want two holes for one) */
		assert_int_equal(put(fd, "s4", 900 * KiB, 0, 1), 0);
		assert_string_equal(where(fd, "s1", w, sizeof(w)), "-");
		assert_string_equal(where(fd, "s4", w, sizeof(w)), "nvmeof/a");
		assert_string_equal(where(fd, "s0", w, sizeof(w)), "nvmeof/a");
		close(fd);
		st_stop();
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ssd_replicas_and_promotion),
		cmocka_unit_test(test_offload_on_evict),
		cmocka_unit_test(test_unmount_under_copies),
		cmocka_unit_test(test_ssd_eviction),
	};

	return cmocka_run_group_tests(tests, st_setup, st_teardown);
}
