/*
 * Unit tests: the peer authentication primitives (core/auth_internal.h):
 * HMAC-SHA256 against RFC 4231, a whole exchange, and each refusal.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "util/auth_internal.h"

/* RFC 4231, test case 2: key "Jefe". */
static void test_hmac_rfc4231(void **state)
{
	static const uint8_t want[32] = {
		0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e, 0x6a, 0x04,
		0x24, 0x26, 0x08, 0x95, 0x75, 0xc7, 0x5a, 0x00, 0x3f, 0x08,
		0x9d, 0x27, 0x39, 0x83, 0x9d, 0xec, 0x58, 0xb9, 0x64, 0xec,
		0x38, 0x43,
	};
	struct iovec parts[2] = {
		{ (void *)"what do ya want ", 16 },
		{ (void *)"for nothing?", 12 },
	};
	uint8_t mac[XFER_AUTH_MAC_LEN];

	(void)state;
	/* the label is the first bytes of the message */
	assert_int_equal(xfer_auth_mac("Jefe", 4, "", parts, 2, mac), 0);
	assert_memory_equal(mac, want, 32);
	assert_int_equal(xfer_auth_mac("Jefe", 4, "what do ya want ", parts + 1,
				       1, mac), 0);
	assert_memory_equal(mac, want, 32);
	assert_true(xfer_auth_equal(mac, want, 32));
	mac[31] ^= 1;
	assert_false(xfer_auth_equal(mac, want, 32));
}

/* Client and server with secrets @p cs and @p ss: @return what fails
 * first (0: none); *@p who says which side refused ('c' or 's'). */
static int exchange(const char *cs, const char *ss, char *who)
{
	struct xfer_auth *c = xfer_auth_new(cs), *s = xfer_auth_new(ss);
	struct xfer_auth_session cx, sx;
	uint8_t hello[XFER_AUTH_HELLO_LEN], ch[XFER_AUTH_CHALLENGE_LEN];
	uint8_t proof[XFER_AUTH_PROOF_LEN];
	int ret;

	assert_non_null(c);
	assert_non_null(s);
	assert_int_equal(xfer_auth_hello(&cx, hello), 0);
	assert_int_equal(xfer_auth_challenge(s, &sx, hello, ch), 0);
	*who = 'c';
	ret = xfer_auth_prove(c, &cx, ch, proof);
	if (!ret) {
		*who = 's';
		ret = xfer_auth_verify(s, &sx, proof);
	}
	xfer_auth_free(c);
	xfer_auth_free(s);
	return ret;
}

static void test_exchange(void **state)
{
	char who;

	(void)state;
	assert_int_equal(exchange("s3cret", "s3cret", &who), 0);
	/* the client sees the server's MAC fail before it proves itself */
	assert_int_equal(exchange("s3cret", "other", &who), -EACCES);
	assert_int_equal(who, 'c');
}

static void test_refusals(void **state)
{
	struct xfer_auth *a = xfer_auth_new("k");
	struct xfer_auth_session cx, sx, sy;
	uint8_t hello[XFER_AUTH_HELLO_LEN], ch[XFER_AUTH_CHALLENGE_LEN];
	uint8_t ch2[XFER_AUTH_CHALLENGE_LEN], proof[XFER_AUTH_PROOF_LEN];
	uint8_t hdr[24] = { 16 };

	(void)state;
	assert_non_null(a);
	assert_null(xfer_auth_new(""));
	assert_int_equal(errno, EINVAL);
	assert_null(xfer_auth_new(NULL));
	/* a request header is not a hello, from its first byte on */
	assert_false(xfer_auth_hello_prefix(hdr, 1));
	assert_true(xfer_auth_hello_prefix((const uint8_t *)"XFER", 4));
	memset(hello, 0, sizeof(hello));
	memcpy(hello, hdr, sizeof(hdr));
	assert_int_equal(xfer_auth_challenge(a, &sx, hello, ch), -EPROTO);
	/* fresh nonces: two challenges to one hello differ, and a proof
	 * for one does not pass the other */
	assert_int_equal(xfer_auth_hello(&cx, hello), 0);
	assert_int_equal(xfer_auth_challenge(a, &sx, hello, ch), 0);
	assert_int_equal(xfer_auth_challenge(a, &sy, hello, ch2), 0);
	assert_memory_not_equal(ch, ch2, XFER_AUTH_NONCE_LEN);
	assert_int_equal(xfer_auth_prove(a, &cx, ch, proof), 0);
	assert_int_equal(xfer_auth_verify(a, &sx, proof), 0);
	assert_int_equal(xfer_auth_verify(a, &sy, proof), -EACCES);
	/* the server's MAC is no proof of the client (labels differ) */
	assert_int_equal(xfer_auth_verify(a, &sx, ch + XFER_AUTH_NONCE_LEN),
			 -EACCES);
	xfer_auth_free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hmac_rfc4231),
		cmocka_unit_test(test_exchange),
		cmocka_unit_test(test_refusals),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
