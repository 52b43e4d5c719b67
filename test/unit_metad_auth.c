/*
 * xfer-metad's guard on writes alone (metadata/metad/auth.c), on a clock
 * of the test's: a nonce proves one write, until 60 s after it was
 * handed out, and stays spent as long; a wrong MAC does not spend it;
 * no number of nonces asked for pushes one out; a nonce this guard did
 * not hand out is unknown; at most METAD_SPENT_MAX writes a minute; a
 * header that is not "<64 hex>:<64 hex>" or a MAC over anything else is
 * refused; the MAC is xfer_auth_write_mac()'s, which matches the spec
 * (PROTOCOL.md §2).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include <openssl/sha.h>

#include "util/auth_internal.h"
#include "metadata/metad/auth_internal.h"

#define SECRET "correct horse battery staple 42"

/* "<nonce hex>:<mac hex>" for @p method of @p key with @p body under
 * @p secret, by the spec. */
static void header_for(const char *secret, const char *nonce_hex,
		       const char *method, const char *key, const char *body,
		       char out[XFER_AUTH_HEADER_LEN + 1])
{
	uint8_t nonce[32], digest[32], mac[32];
	struct iovec parts[6] = {
		{ (void *)method, strlen(method) }, { "\n", 1 },
		{ (void *)key, strlen(key) }, { "\n", 1 },
		{ digest, 32 }, { nonce, 32 },
	};

	assert_int_equal(xfer_auth_unhex(nonce_hex, 32, nonce), 0);
	SHA256((const uint8_t *)body, strlen(body), digest);
	assert_int_equal(xfer_auth_mac(secret, strlen(secret),
				       "xfer-metad-1 write", parts, 6, mac), 0);
	memcpy(out, nonce_hex, 64);
	out[64] = ':';
	xfer_auth_hex(mac, 32, out + 65);
}

static const char *check(struct metad_auth *a, int64_t now, const char *hdr,
			 const char *method, const char *key, const char *body)
{
	return metad_auth_check(a, now, hdr, method, key, body, strlen(body));
}

static void test_write_mac_matches_spec(void **state)
{
	struct xfer_auth *a = xfer_auth_new(SECRET);
	uint8_t digest[32], nonce[32], mac[32];
	char hex[65], want[XFER_AUTH_HEADER_LEN + 1];

	(void)state;
	memset(nonce, 0xa5, sizeof(nonce));
	xfer_auth_hex(nonce, 32, hex);
	assert_int_equal(xfer_auth_sha256("body", 4, digest), 0);
	assert_int_equal(xfer_auth_write_mac(a, "PUT", "k/1", digest, nonce,
					     mac), 0);
	header_for(SECRET, hex, "PUT", "k/1", "body", want);
	xfer_auth_hex(mac, 32, hex);
	assert_string_equal(want + 65, hex);
	/* PROTOCOL.md §2's example (Python's hmac and hashlib agree) */
	{
		struct xfer_auth *k = xfer_auth_new("s3cret");

		for (int i = 0; i < 32; i++)
			nonce[i] = (uint8_t)i;
		assert_int_equal(xfer_auth_sha256("{}", 2, digest), 0);
		assert_int_equal(xfer_auth_write_mac(k, "PUT", "mooncake/ram/a",
						     digest, nonce, mac), 0);
		xfer_auth_hex(mac, 32, hex);
		assert_string_equal(hex, "52c4b4388050a1b3fe1240f49e6b44d4"
					 "c77f6bf6967cb772a4c129aee82e8aaa");
		xfer_auth_free(k);
	}
	/* SHA-256 of nothing: e3b0c442... */
	assert_int_equal(xfer_auth_sha256(NULL, 0, digest), 0);
	assert_int_equal(digest[0], 0xe3);
	assert_int_equal(digest[31], 0x55);
	xfer_auth_free(a);
}

static void test_one_try_each(void **state)
{
	struct metad_auth *a = metad_auth_new(SECRET);
	char n1[65], n2[65], h[XFER_AUTH_HEADER_LEN + 1];

	(void)state;
	assert_non_null(a);
	assert_int_equal(metad_auth_nonce(a, 1000, n1), 0);
	assert_int_equal(metad_auth_nonce(a, 1000, n2), 0);
	assert_int_equal(strlen(n1), 64);
	assert_string_not_equal(n1, n2);

	header_for(SECRET, n1, "PUT", "k", "v", h);
	assert_null(check(a, 1001, h, "PUT", "k", "v"));
	assert_non_null(strstr(check(a, 1002, h, "PUT", "k", "v"),
			       "spent nonce"));
	/* a wrong MAC does not spend it: the write it was for still goes */
	header_for("not the secret", n2, "PUT", "k", "v", h);
	assert_non_null(strstr(check(a, 1003, h, "PUT", "k", "v"),
			       "wrong MAC"));
	header_for(SECRET, n2, "PUT", "k", "v", h);
	assert_null(check(a, 1004, h, "PUT", "k", "v"));
	assert_non_null(strstr(check(a, 1005, h, "PUT", "k", "v"),
			       "spent nonce"));
	metad_auth_free(a);
}

static void test_bound_to_the_request(void **state)
{
	struct metad_auth *a = metad_auth_new(SECRET);
	char n[65], h[XFER_AUTH_HEADER_LEN + 1];
	const char *cases[][3] = {
		/* proved for PUT k v, sent as: */
		{ "PUT", "k", "w" },
		{ "PUT", "K", "v" },
		{ "DELETE", "k", "v" },
		{ "PUT", "k", "v " },
		{ "PUT", "k\n", "v" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(metad_auth_nonce(a, 0, n), 0);
		header_for(SECRET, n, "PUT", "k", "v", h);
		assert_non_null(strstr(check(a, 0, h, cases[i][0], cases[i][1],
					     cases[i][2]), "wrong MAC"));
	}
	/* upper-case hex is the same nonce and MAC */
	assert_int_equal(metad_auth_nonce(a, 0, n), 0);
	header_for(SECRET, n, "DELETE", "k", "", h);
	for (char *p = h; *p; p++)
		if (*p >= 'a' && *p <= 'f')
			*p = (char)(*p - 'a' + 'A');
	assert_null(check(a, 0, h, "DELETE", "k", ""));
	metad_auth_free(a);
}

static void test_expiry(void **state)
{
	struct metad_auth *a = metad_auth_new(SECRET);
	char n1[65], n2[65], h[XFER_AUTH_HEADER_LEN + 1];

	(void)state;
	assert_int_equal(metad_auth_nonce(a, 5000, n1), 0);
	assert_int_equal(metad_auth_nonce(a, 5000, n2), 0);
	header_for(SECRET, n1, "PUT", "k", "v", h);
	assert_null(check(a, 5000 + METAD_NONCE_TTL_MS, h, "PUT", "k", "v"));
	header_for(SECRET, n2, "PUT", "k", "v", h);
	assert_non_null(strstr(check(a, 5001 + METAD_NONCE_TTL_MS, h, "PUT",
				     "k", "v"), "expired nonce"));
	metad_auth_free(a);
}

/* Spent for as long as it could prove a write again, across the
 * generations of what is kept (each METAD_NONCE_TTL_MS long). */
static void test_spent_for_its_life(void **state)
{
	struct metad_auth *a = metad_auth_new(SECRET);
	const int64_t ttl = METAD_NONCE_TTL_MS;
	char n[65], h[XFER_AUTH_HEADER_LEN + 1];

	(void)state;
	/* proved at a third of its life, tried again until its end: the
	 * generations turn at every phase of that */
	for (int64_t born = 0; born < 8 * ttl; born += ttl + ttl / 7) {
		assert_int_equal(metad_auth_nonce(a, born, n), 0);
		header_for(SECRET, n, "PUT", "k", "v", h);
		assert_null(check(a, born + ttl / 3, h, "PUT", "k", "v"));
		for (int64_t t = born + ttl / 3; t <= born + ttl; t += ttl / 16)
			assert_non_null(strstr(check(a, t, h, "PUT", "k", "v"),
					       "spent nonce"));
		assert_non_null(strstr(check(a, born + ttl, h, "PUT", "k",
					     "v"), "spent nonce"));
	}
	metad_auth_free(a);
}

/* A stranger asks for 10000 nonces between an engine's and its write:
 * both the engine's and the stranger's first still prove a write. */
static void test_flood_takes_nothing(void **state)
{
	struct metad_auth *a = metad_auth_new(SECRET);
	char mine[65], first[65], n[65], h[XFER_AUTH_HEADER_LEN + 1];

	(void)state;
	assert_int_equal(metad_auth_nonce(a, 0, mine), 0);
	assert_int_equal(metad_auth_nonce(a, 0, first), 0);
	for (unsigned i = 1; i < 10000; i++)
		assert_int_equal(metad_auth_nonce(a, i / 1000, n), 0);
	header_for(SECRET, mine, "PUT", "k", "v", h);
	assert_null(check(a, 20, h, "PUT", "k", "v"));
	header_for(SECRET, first, "PUT", "k", "v", h);
	assert_null(check(a, 20, h, "PUT", "k", "v"));
	metad_auth_free(a);
}

/* Nonces this guard did not hand out: random bytes, another guard's
 * (another server, or this one before a restart), one with its time or
 * random bytes changed. */
static void test_unknown(void **state)
{
	struct metad_auth *a = metad_auth_new(SECRET);
	struct metad_auth *b = metad_auth_new(SECRET);
	char n[65], h[XFER_AUTH_HEADER_LEN + 1];

	(void)state;
	memset(n, '7', 64);
	n[64] = '\0';
	header_for(SECRET, n, "PUT", "k", "v", h);
	assert_non_null(strstr(check(a, 0, h, "PUT", "k", "v"),
			       "unknown nonce"));
	assert_int_equal(metad_auth_nonce(b, 0, n), 0);
	header_for(SECRET, n, "PUT", "k", "v", h);
	assert_non_null(strstr(check(a, 0, h, "PUT", "k", "v"),
			       "unknown nonce"));
	for (int i = 0; i < 32; i += 16) { /* its time, its random bytes */
		assert_int_equal(metad_auth_nonce(a, 1000, n), 0);
		n[i] = n[i] == '0' ? '1' : '0';
		header_for(SECRET, n, "PUT", "k", "v", h);
		assert_non_null(strstr(check(a, 1000, h, "PUT", "k", "v"),
				       "unknown nonce"));
	}
	metad_auth_free(a);
	metad_auth_free(b);
}

/* At most METAD_SPENT_MAX writes proved in one nonce's life; the next
 * life takes as many again. */
static void test_writes_bounded(void **state)
{
	struct metad_auth *a = metad_auth_new(SECRET);
	char n[65], h[XFER_AUTH_HEADER_LEN + 1];

	(void)state;
	for (unsigned i = 0; i < METAD_SPENT_MAX; i++) {
		assert_int_equal(metad_auth_nonce(a, 0, n), 0);
		header_for(SECRET, n, "PUT", "k", "v", h);
		assert_null(check(a, 0, h, "PUT", "k", "v"));
	}
	assert_int_equal(metad_auth_nonce(a, 0, n), 0);
	header_for(SECRET, n, "PUT", "k", "v", h);
	assert_non_null(strstr(check(a, 0, h, "PUT", "k", "v"),
			       "too many writes"));
	assert_null(check(a, METAD_NONCE_TTL_MS, h, "PUT", "k", "v"));
	metad_auth_free(a);
}

static void test_malformed(void **state)
{
	struct metad_auth *a = metad_auth_new(SECRET);
	char n[65], good[XFER_AUTH_HEADER_LEN + 1], h[XFER_AUTH_HEADER_LEN + 8];

	(void)state;
	assert_int_equal(metad_auth_nonce(a, 0, n), 0);
	header_for(SECRET, n, "PUT", "k", "v", good);
	assert_non_null(strstr(check(a, 0, NULL, "PUT", "k", "v"),
			       "no X-Xfer-Auth header"));
	assert_non_null(strstr(check(a, 0, "", "PUT", "k", "v"),
			       "malformed"));
	/* one short, one long, the colon moved, a non-hex digit */
	memcpy(h, good, sizeof(good));
	h[XFER_AUTH_HEADER_LEN - 1] = '\0';
	assert_non_null(strstr(check(a, 0, h, "PUT", "k", "v"), "malformed"));
	snprintf(h, sizeof(h), "%s0", good);
	assert_non_null(strstr(check(a, 0, h, "PUT", "k", "v"), "malformed"));
	memcpy(h, good, sizeof(good));
	h[64] = h[63];
	h[63] = ':';
	assert_non_null(strstr(check(a, 0, h, "PUT", "k", "v"), "malformed"));
	memcpy(h, good, sizeof(good));
	h[100] = 'g';
	assert_non_null(strstr(check(a, 0, h, "PUT", "k", "v"), "malformed"));
	memcpy(h, good, sizeof(good));
	h[10] = ' ';
	assert_non_null(strstr(check(a, 0, h, "PUT", "k", "v"), "malformed"));
	/* none of that spent the nonce */
	assert_null(check(a, 0, good, "PUT", "k", "v"));
	metad_auth_free(a);
	assert_null(metad_auth_new(""));
	assert_null(metad_auth_new(NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_write_mac_matches_spec),
		cmocka_unit_test(test_one_try_each),
		cmocka_unit_test(test_bound_to_the_request),
		cmocka_unit_test(test_expiry),
		cmocka_unit_test(test_spent_for_its_life),
		cmocka_unit_test(test_flood_takes_nothing),
		cmocka_unit_test(test_unknown),
		cmocka_unit_test(test_writes_bounded),
		cmocka_unit_test(test_malformed),
	};

	return cmocka_run_group_tests_name("xfer-metad: the guard on writes",
					   tests, NULL, NULL);
}
