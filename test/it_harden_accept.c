/*
 * Listeners when file descriptors run out (issue 13, defect 1): with the
 * fd limit lowered and more connections waiting than can be accepted, a
 * listener must pause and back off instead of retrying accept() in a
 * loop: CPU stays near idle, a few log lines say how many accepts failed,
 * and service comes back by itself once the connections close. The
 * engine's handshake, TCP data and file data listeners, and xfer-metad's.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <xfer/xfer.h>

#include "core/desc_internal.h"
#include "test/helpers.h"
#include "test/th_harden.h"

#define HOLD 100         /* connections held on each port */
#define SPARE_FDS 32     /* what the lowered limit leaves the process */
#define WATCH_MS 3000    /* CPU and log lines counted over this */
#define CPU_MAX 0.3      /* seconds of CPU allowed over WATCH_MS */
/* log lines allowed over WATCH_MS per listener: one a second, and one
 * at the edges */
#define LINES_MAX (WATCH_MS / 1000 + 2)

/* The file data port, from the engine's file segment document. */
static uint16_t file_port(uint16_t rpc)
{
	size_t len;
	char *doc = th_hs_call(rpc, 1, "{\"kind\":\"nvmeof\"}\n", &len);
	const char *p = strstr(doc, "\"xfer_data_port\":");
	uint16_t port;

	assert_non_null(p);
	port = (uint16_t)atoi(p + strlen("\"xfer_data_port\":"));
	free(doc);
	assert_true(port != 0);
	return port;
}

static void test_engine_listeners(void **state)
{
	struct xfer_engine *t = hd_engine(1, NULL);
	uint16_t rpc = xfer_engine_rpc_port(t), data, file;
	uint8_t *tb = th_alloc(1 << 20);
	struct xfer_desc *d;
	long old, lines, matched, bytes;
	int made_hs, made_data, made_file;
	int64_t back;
	pid_t h1, h2, h3;
	double cpu;

	(void)state;
	assert_int_equal(xfer_register(t, tb, 1 << 20, "cpu:0", true), 0);
	d = th_fetch_desc(rpc);
	data = th_tcp(d)->data_port;
	xfer_desc_free(d);
	file = file_port(rpc);

	hd_capture_start("accept");
	h1 = hd_holder_new(rpc, HOLD, NULL, 0);
	h2 = hd_holder_new(data, HOLD, NULL, 0);
	h3 = hd_holder_new(file, HOLD, NULL, 0);
	old = hd_set_nofile(hd_nofile_for(SPARE_FDS));
	made_hs = hd_holder_go(h1);
	made_data = hd_holder_go(h2);
	made_file = hd_holder_go(h3);
	cpu = xfer_engine_cpu_seconds(t);
	usleep(WATCH_MS * 1000);
	cpu = xfer_engine_cpu_seconds(t) - cpu;
	hd_holder_stop(h1);
	hd_holder_stop(h2);
	hd_holder_stop(h3);
	/* under the same limit: the listeners resume by themselves */
	back = th_now_ms();
	assert_true(hd_probe_ok(rpc, 4000));
	back = th_now_ms() - back;
	hd_set_nofile(old);
	bytes = hd_capture_stop(&lines, &matched);
	print_message("engine: %d + %d + %d connections held (handshake, "
		      "TCP data, file data), limit %d spare fds: "
		      "%.2f CPU s in %d ms, %ld log lines about accept "
		      "(%ld bytes of stderr); served again %lld ms after "
		      "they closed\n", made_hs, made_data, made_file,
		      SPARE_FDS, cpu,
		      WATCH_MS, matched, bytes, (long long)back);
	assert_int_equal(made_hs, HOLD);
	assert_int_equal(made_data, HOLD);
	assert_int_equal(made_file, HOLD);
	assert_true(cpu < CPU_MAX);
	assert_true(matched >= 3 && matched <= 3 * LINES_MAX);
	hd_good_transfer(xfer_engine_name(t), (uintptr_t)tb + 64, tb + 64,
			 NULL);
	assert_int_equal(th_unregister(t, tb), 0);
	xfer_engine_free(t);
	free(tb);
}

/* GET of an absent key: 404 within @p ms (connections may fail). */
static bool metad_ok(uint16_t port, int ms)
{
	static const char req[] = "GET /metadata?key=absent HTTP/1.1\r\n"
				  "Host: x\r\nConnection: close\r\n\r\n";
	int64_t end = th_now_ms() + ms;

	while (th_now_ms() < end) {
		int fd = th_connect_try(port);
		char buf[64] = "";
		long n;

		if (fd < 0) {
			usleep(20000);
			continue;
		}
		n = th_send_all(fd, req, sizeof(req) - 1) ? -1 :
		    th_recv_all(fd, buf, 12, 1000);
		close(fd);
		if (n == 12 && !memcmp(buf, "HTTP/1.1 404", 12))
			return true;
		usleep(20000);
	}
	return false;
}

static void test_metad_listener(void **state)
{
	long bytes, matched;
	uint16_t port;
	int64_t back;
	double cpu;
	pid_t m, h;
	int made;

	(void)state;
	m = hd_metad_start(64, "accept", &port);
	assert_true(metad_ok(port, 2000));
	h = hd_holder_start(port, HOLD, NULL, 0, &made);
	cpu = hd_cpu_seconds(m);
	usleep(WATCH_MS * 1000);
	cpu = hd_cpu_seconds(m) - cpu;
	matched = hd_metad_lines(&bytes);
	hd_holder_stop(h);
	back = th_now_ms();
	assert_true(metad_ok(port, 4000));
	back = th_now_ms() - back;
	print_message("xfer-metad: %d connections held, fd limit 64: %.2f CPU "
		      "s in %d ms, %ld log lines about accept (%ld bytes of "
		      "stderr); served again %lld ms after they closed\n",
		      made, cpu, WATCH_MS, matched, bytes, (long long)back);
	hd_metad_stop(m);
	assert_int_equal(made, HOLD);
	assert_true(cpu < CPU_MAX);
	assert_true(matched >= 1 && matched <= LINES_MAX);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_engine_listeners, hd_teardown),
		cmocka_unit_test_teardown(test_metad_listener, hd_teardown),
	};

	return cmocka_run_group_tests_name("harden: accept under EMFILE",
					   tests, NULL, NULL);
}
