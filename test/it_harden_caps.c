/*
 * Connection caps that peers cannot fill (issue 22, defect 3): with 4200
 * connections held open by another process (silent, stopped after one
 * request, or halfway through the challenge-response), a good peer is
 * still served at once by the TCP data port and the handshake port at
 * their default caps; and one source address past
 * max_data_conns_per_addr keeps no more than that many open.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xfer/xfer.h>

#include "core/desc_internal.h"
#include "util/auth_internal.h"
#include "test/helpers.h"
#include "test/th_harden.h"

#define MIB (1u << 20)
#define NHOSTILE 4200
#define SECRET "xfer-caps-test-secret-0123456789abcdef"

static const char *const with_secret[] = { "auth_secret", SECRET, NULL };

struct target {
	struct xfer_engine *e;
	uint8_t *mem;
	uint16_t data_port, hs_port;
};

/* The descriptor, asked on the handshake port (with @p secret first, if
 * not NULL). */
static struct xfer_desc *fetch_desc(uint16_t port, const char *secret)
{
	int fd = th_connect(port);
	struct xfer_desc *d = NULL;
	char *body = NULL, err[128];
	size_t len;

	if (secret)
		assert_int_equal(hd_raw_auth(fd, secret, true), 0);
	assert_int_equal(th_hs_send(fd, 1, "{}\n", 3), 0);
	assert_int_equal(th_hs_recv(fd, &body, &len, 3000), 0);
	assert_int_equal(xfer_desc_decode(body + 1, len - 1,
					  xfer_transport_codecs(), &d, err,
					  sizeof(err)), 0);
	free(body);
	close(fd);
	return d;
}

/* A target with keys @p kv (@p secret among them, or NULL), with room
 * for its end of every connection. */
static void target_new(struct target *t, const char *const *kv,
		       const char *secret)
{
	struct xfer_desc *d;

	hd_set_nofile(20000);
	t->e = hd_engine(1, kv);
	t->mem = th_alloc(MIB);
	memset(t->mem, 0, MIB);
	assert_int_equal(xfer_register(t->e, t->mem, MIB, "cpu:0", true), 0);
	t->hs_port = xfer_engine_rpc_port(t->e);
	d = fetch_desc(t->hs_port, secret);
	t->data_port = th_tcp(d)->data_port;
	xfer_desc_free(d);
}

static void target_free(struct target *t)
{
	assert_int_equal(th_unregister(t->e, t->mem), 0);
	xfer_engine_free(t->e);
	free(t->mem);
}

/* The good transfer, timed. */
static int64_t good(struct target *t, const char *const *kv)
{
	int64_t t0 = th_now_ms();

	hd_good_transfer(xfer_engine_name(t->e), (uintptr_t)t->mem + 100,
			 t->mem + 100, kv);
	return th_now_ms() - t0;
}

/* NHOSTILE connections to @p port, each sending @p first; then a good
 * peer (keys @p kv) is served. */
static void flood_then_good(struct target *t, uint16_t port,
			    const void *first, size_t first_len,
			    const char *const *kv, const char *what)
{
	double cpu = xfer_engine_cpu_seconds(t->e);
	int made;
	pid_t pid = hd_holder_start(port, NHOSTILE, first, first_len, &made);
	int64_t ms = good(t, kv);

	print_message("%d %s data connections held: a good peer's WRITE and "
		      "READ took %lld ms; target %.2f CPU s, %d descriptors "
		      "open\n", made, what, (long long)ms,
		      xfer_engine_cpu_seconds(t->e) - cpu, hd_fd_count());
	assert_int_equal(made, NHOSTILE);
	hd_holder_stop(pid);
}

static void test_data_silent(void **state)
{
	struct target t;

	(void)state;
	target_new(&t, NULL, NULL);
	flood_then_good(&t, t.data_port, NULL, 0, NULL, "silent");
	target_free(&t);
}

/* Each connection takes one READ (its reply never read), then idles. */
static void test_data_idle(void **state)
{
	uint8_t h[24] = { 0 };
	struct target t;

	(void)state;
	target_new(&t, NULL, NULL);
	th_put_le64(h, 1);
	th_put_le64(h + 8, (uintptr_t)t.mem);
	h[16] = 0x80; /* READ, v2 */
	flood_then_good(&t, t.data_port, h, sizeof(h), NULL,
			"idle (one request each)");
	target_free(&t);
}

/* With a secret, each connection sends its hello, takes the challenge
 * and never proves itself. */
static void test_data_half_auth(void **state)
{
	uint8_t hello[XFER_AUTH_HELLO_LEN];
	struct xfer_auth_session s;
	struct target t;

	(void)state;
	target_new(&t, with_secret, SECRET);
	assert_int_equal(xfer_auth_hello(&s, hello), 0);
	flood_then_good(&t, t.data_port, hello, sizeof(hello), with_secret,
			"half-authenticated");
	target_free(&t);
}

static void test_handshake_silent(void **state)
{
	struct target t;
	int made, ok = 0;
	pid_t pid;

	(void)state;
	target_new(&t, NULL, NULL);
	pid = hd_holder_start(t.hs_port, NHOSTILE, NULL, 0, &made);
	for (int i = 0; i < 10; i++)
		ok += hd_probe_ok(t.hs_port, 0);
	print_message("%d silent handshake connections held: %d of 10 "
		      "probes answered at once\n", made, ok);
	assert_int_equal(made, NHOSTILE);
	assert_int_equal(ok, 10);
	hd_holder_stop(pid);
	target_free(&t);
}

/* One address past its cap: its oldest idle connections are closed. */
static void test_per_addr(void **state)
{
	static const char *const kv[] = { "max_data_conns_per_addr", "100",
					  NULL };
	uint8_t h[24] = { 0 };
	struct target t;
	int fds0, fds, made;
	pid_t pid;

	(void)state;
	target_new(&t, kv, NULL);
	th_put_le64(h, 1);
	th_put_le64(h + 8, (uintptr_t)t.mem);
	h[16] = 0x80;
	pid = hd_holder_new_from("127.0.0.2", t.data_port, 300, h, sizeof(h));
	fds0 = hd_fd_count();
	made = hd_holder_go(pid);
	usleep(300000);
	fds = hd_fd_count() - fds0;
	print_message("max_data_conns_per_addr 100: %d connections from "
		      "127.0.0.2, %d open at the target\n", made, fds);
	assert_int_equal(made, 300);
	assert_true(fds <= 100);
	good(&t, NULL); /* from 127.0.0.1 */
	hd_holder_stop(pid);
	target_free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_data_silent, hd_teardown),
		cmocka_unit_test_teardown(test_data_idle, hd_teardown),
		cmocka_unit_test_teardown(test_data_half_auth, hd_teardown),
		cmocka_unit_test_teardown(test_handshake_silent, hd_teardown),
		cmocka_unit_test_teardown(test_per_addr, hd_teardown),
	};

	return cmocka_run_group_tests_name("harden: connection caps", tests,
					   NULL, NULL);
}
