/*
 * Hostile peers on every port at once (issue 22): a target engine (with
 * a cluster secret, in a process of its own) is held by another process
 * with thousands of connections on its handshake, TCP data and file data
 * ports: silent ones, ones that send the hello of the challenge-response
 * and never prove themselves, and ones that know the secret, ask large
 * READs (8 MiB of memory, 64 MiB of a file) and read none of the
 * replies. Whatever the target closes, the other process opens again,
 * every SWEEP_MS. Meanwhile good peers open the target's RAM segment and
 * its file segment (through the owner) and WRITE and READ them, checked,
 * over and over: every transfer must complete, and the target's resident
 * memory must stay within RSS_BOUND_MIB of what it was before the
 * attack: 128 MiB, of which its file bounce memory (file_bounce_max) may
 * take 64 MiB, the rest its connections' state (a few KiB each). Figures:
 * RSS, the target's CPU, the good transfers and their slowest.
 */
#define _GNU_SOURCE /* POLLRDHUP */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <xfer/xfer.h>

#include "core/desc_internal.h"
#include "core/handshake_internal.h"
#include "util/auth_internal.h"
#include "test/helpers.h"
#include "test/th_harden.h"

#define MIB (1u << 20)
#define SECRET "xfer-hostile-test-secret-0123456789abcdef"
#define RAM_LEN (16 * MIB)
#define FILE_LEN (64 * MIB)
#define NSILENT 1000          /* per port */
#define NHELLO 1000           /* per port */
#define NSLOW 100             /* per data port */
#define SWEEP_MS 200
#define ATTACK_MS 6000        /* good transfers run this long */
#define RSS_BOUND_MIB 128     /* file_bounce_max, and as much again */

static const char *const with_secret[] = { "auth_secret", SECRET, NULL };
static const char *const by_owner[] = { "auth_secret", SECRET,
					  "file_local", "0", NULL };

/* What the target process tells: its ports, its buffer, its name. */
struct target {
	pid_t pid;
	int ctl;                 /* closing it stops the target */
	uint16_t hs_port, data_port, file_port;
	uint64_t addr;
	char name[64];
};

static char path[96];

/* One request on the handshake port, after the proof: the reply's JSON
 * (malloc'd). */
static char *hs_ask(uint16_t port, const char *req)
{
	int fd = th_connect(port);
	char *body = NULL, *json;
	size_t len;

	assert_int_equal(hd_raw_auth(fd, SECRET, true), 0);
	assert_int_equal(th_hs_send(fd, 1, req, strlen(req)), 0);
	assert_int_equal(th_hs_recv(fd, &body, &len, 3000), 0);
	close(fd);
	json = strndup(body + 1, len - 1);
	free(body);
	return json;
}

/* ---- the target, in a process of its own ---- */

static void target_main(int out, int ctl)
{
	struct rlimit rl = { 20000, 20000 };
	struct xfer_engine *e;
	struct xfer_desc *d = NULL;
	uint8_t *mem;
	char *json, *p, err[128], c;
	uint16_t file_port;
	FILE *f = fdopen(out, "w");

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	setrlimit(RLIMIT_NOFILE, &rl); /* its end of every connection */
	e = hd_engine(2, with_secret);
	mem = th_alloc(RAM_LEN);
	memset(mem, 0, RAM_LEN); /* resident from the start */
	if (xfer_register(e, mem, RAM_LEN, "cpu:0", true) ||
	    xfer_register_file(e, path, FILE_LEN, NULL))
		_exit(2);
	json = hs_ask(xfer_engine_rpc_port(e), "{}\n");
	if (xfer_desc_decode(json, strlen(json), xfer_transport_codecs(), &d,
			     err, sizeof(err)))
		_exit(3);
	free(json);
	json = hs_ask(xfer_engine_rpc_port(e), "{\"kind\":\"nvmeof\"}");
	p = strstr(json, "\"xfer_data_port\":");
	if (!p)
		_exit(4);
	file_port = (uint16_t)atoi(p + strlen("\"xfer_data_port\":"));
	free(json);
	fprintf(f, "%u %u %u %llu %s\n", xfer_engine_rpc_port(e),
		th_tcp(d)->data_port, file_port,
		(unsigned long long)(uintptr_t)mem, xfer_engine_name(e));
	fclose(f);
	xfer_desc_free(d);
	while (read(ctl, &c, 1) > 0)
		;
	_exit(0); /* the engine's threads go with the process */
}

static void target_start(struct target *t)
{
	int out[2], ctl[2];
	FILE *f;
	unsigned hs, data, file;
	unsigned long long addr;

	assert_int_equal(pipe(out), 0);
	assert_int_equal(pipe(ctl), 0);
	t->pid = fork();
	assert_true(t->pid >= 0);
	if (t->pid == 0) {
		close(out[0]);
		close(ctl[1]);
		target_main(out[1], ctl[0]);
	}
	close(out[1]);
	close(ctl[0]);
	t->ctl = ctl[1];
	f = fdopen(out[0], "r");
	assert_non_null(f);
	assert_int_equal(fscanf(f, "%u %u %u %llu %63s", &hs, &data, &file,
				&addr, t->name), 5);
	fclose(f);
	t->hs_port = (uint16_t)hs;
	t->data_port = (uint16_t)data;
	t->file_port = (uint16_t)file;
	t->addr = addr;
}

static void target_stop(struct target *t)
{
	close(t->ctl);
	assert_true(th_wait_exit(t->pid, 10000) >= 0);
}

/* ---- the hostile process ---- */

enum kind { SILENT, HELLO, HELLO_FRAMED, SLOW };

struct hostile {
	enum kind kind;
	const char *src;         /* source address */
	uint16_t port;
	int n;
	uint8_t first[64];       /* what a SLOW one asks after its proof */
	size_t first_len;
	int *fds;
	long opened;
};

/* A connection of @p h's kind, its opening bytes sent; -1 if it could
 * not be made. Blocking until then, non-blocking after. */
static int hostile_open(struct hostile *h)
{
	static const int small = 4096; /* the kernel keeps little for it */
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct xfer_auth_session s;
	uint8_t hello[8 + 1 + XFER_AUTH_HELLO_LEN];
	int fd = socket(AF_INET, SOCK_STREAM, 0), ok;

	if (fd < 0)
		return -1;
	inet_pton(AF_INET, h->src, &sa.sin_addr);
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	ok = !bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons(h->port);
	ok = ok && !connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	th_put_le64(hello, 1 + XFER_AUTH_HELLO_LEN);
	hello[8] = XFER_HS_AUTH;
	if (ok && (h->kind == HELLO || h->kind == HELLO_FRAMED))
		ok = !xfer_auth_hello(&s, hello + 9);
	if (ok && h->kind == HELLO)
		ok = !th_send_all(fd, hello + 9, XFER_AUTH_HELLO_LEN);
	if (ok && h->kind == HELLO_FRAMED)
		ok = !th_send_all(fd, hello, sizeof(hello));
	if (ok && h->kind == SLOW)
		ok = !hd_raw_auth(fd, SECRET, false) &&
		     !th_send_all(fd, h->first, h->first_len);
	if (!ok) {
		close(fd);
		return -1;
	}
	fcntl(fd, F_SETFL, O_NONBLOCK);
	h->opened++;
	return fd;
}

/* Open every connection of @p hs (@p n kinds), then, every SWEEP_MS,
 * open again those the target closed, until @p ctl closes; the first
 * round's count goes to @p ready. */
static void hostile_main(struct hostile *hs, int n, int ready, int ctl)
{
	struct rlimit rl = { 20000, 20000 };
	struct pollfd pc = { .fd = ctl, .events = POLLIN };
	int total = 0;
	long opened = 0;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	setrlimit(RLIMIT_NOFILE, &rl);
	for (int k = 0; k < n; k++) {
		hs[k].fds = calloc((size_t)hs[k].n, sizeof(int));
		for (int i = 0; i < hs[k].n; i++)
			total += (hs[k].fds[i] = hostile_open(&hs[k])) >= 0;
	}
	(void)!write(ready, &total, sizeof(total));
	while (poll(&pc, 1, SWEEP_MS) == 0) {
		for (int k = 0; k < n; k++)
			for (int i = 0; i < hs[k].n; i++) {
				struct pollfd p = { .fd = hs[k].fds[i],
						    .events = POLLRDHUP };

				if (p.fd >= 0 && (poll(&p, 1, 0) == 0 ||
						  !(p.revents & (POLLRDHUP |
								 POLLHUP |
								 POLLERR))))
					continue;
				if (p.fd >= 0)
					close(p.fd);
				hs[k].fds[i] = hostile_open(&hs[k]);
			}
	}
	for (int k = 0; k < n; k++)
		opened += hs[k].opened;
	(void)!write(ready, &opened, sizeof(opened));
	_exit(0);
}

/* ---- good peers ---- */

/* WRITE then READ 1 MiB + 1 at @p off of segment @p name from a fresh
 * engine with @p kv, checked. @return the milliseconds it took. */
static int64_t good(const char *name, uint64_t off, const char *const *kv,
		    uint64_t seed)
{
	const size_t len = MIB + 1;
	int64_t t0 = th_now_ms();
	struct xfer_engine *i = hd_engine(1, kv);
	uint8_t *buf = th_alloc(2 * len);
	int64_t seg;

	th_fill(buf, len, seed);
	memset(buf + len, 0, len);
	assert_int_equal(xfer_register(i, buf, 2 * len, "cpu:0", false), 0);
	seg = xfer_segment_open(i, name);
	if (seg < 0)
		fail_msg("open %s: %s", name, xfer_engine_last_error(i));
	th_assert_status(th_xfer1(i, XFER_WRITE, buf, seg, off, len, NULL),
			 XFER_COMPLETED);
	th_assert_status(th_xfer1(i, XFER_READ, buf + len, seg, off, len,
				  NULL), XFER_COMPLETED);
	assert_int_equal(th_check(buf + len, len, seed), -1);
	xfer_engine_free(i);
	free(buf);
	return th_now_ms() - t0;
}

static void read_header(uint8_t h[24], uint64_t size, uint64_t addr)
{
	memset(h, 0, 24);
	th_put_le64(h, size);
	th_put_le64(h + 8, addr);
	h[16] = 0x80; /* READ, v2 */
}

static void test_hostile_peers(void **state)
{
	struct target t;
	struct hostile hs[8];
	char file_name[96];
	int ready[2], ctl[2], held = 0, n = 0, good_ram = 0, good_file = 0;
	long rss0, rss, peak, opened = 0;
	int64_t end, slowest = 0, ms;
	double cpu0, cpu;
	pid_t pid;

	(void)state;
	target_start(&t);
	snprintf(file_name, sizeof(file_name), "nvmeof/%s", t.name);
	good(t.name, t.addr + MIB, with_secret, 1); /* warm */
	good(file_name, MIB, by_owner, 2);
	rss0 = peak = hd_rss_kib(t.pid);
	cpu0 = hd_cpu_seconds(t.pid);

	memset(hs, 0, sizeof(hs));
	for (int p = 0; p < 3; p++) {
		uint16_t port = p == 0 ? t.hs_port : p == 1 ? t.data_port :
				t.file_port;

		hs[n++] = (struct hostile){ .kind = SILENT,
					    .src = "127.0.0.2", .port = port,
					    .n = NSILENT };
		hs[n++] = (struct hostile){ .kind = p ? HELLO : HELLO_FRAMED,
					    .src = "127.0.0.3", .port = port,
					    .n = NHELLO };
	}
	hs[n] = (struct hostile){ .kind = SLOW, .src = "127.0.0.4",
				  .port = t.data_port, .n = NSLOW };
	read_header(hs[n].first, 8 * MIB, t.addr + 8 * MIB);
	hs[n++].first_len = 24;
	hs[n] = (struct hostile){ .kind = SLOW, .src = "127.0.0.4",
				  .port = t.file_port, .n = NSLOW };
	read_header(hs[n].first, FILE_LEN, 0);
	hs[n++].first_len = 24;

	assert_int_equal(pipe(ready), 0);
	assert_int_equal(pipe(ctl), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(ready[0]);
		close(ctl[1]);
		hostile_main(hs, n, ready[1], ctl[0]);
	}
	close(ready[1]);
	close(ctl[0]);
	assert_int_equal(read(ready[0], &held, sizeof(held)), sizeof(held));

	end = th_now_ms() + ATTACK_MS;
	while (th_now_ms() < end) {
		ms = good(t.name, t.addr + MIB, with_secret, 10 + good_ram);
		slowest = ms > slowest ? ms : slowest;
		good_ram++;
		ms = good(file_name, MIB, by_owner, 1000 + good_file);
		slowest = ms > slowest ? ms : slowest;
		good_file++;
		rss = hd_rss_kib(t.pid);
		peak = rss > peak ? rss : peak;
	}
	cpu = hd_cpu_seconds(t.pid) - cpu0;
	close(ctl[1]);
	assert_int_equal(read(ready[0], &opened, sizeof(opened)),
			 sizeof(opened));
	close(ready[0]);
	assert_true(th_wait_exit(pid, 10000) >= 0);
	print_message("hostile: %d connections held at once (%d silent, %d "
		      "hello only per port; %d slow readers per data port), "
		      "%ld opened in all over %d ms; the target: RSS %ld MiB "
		      "before, peak %ld MiB (bound +%d MiB), %.2f CPU s; good "
		      "peers: %d RAM and %d file WRITE+READ of 1 MiB + 1, all "
		      "completed, slowest %lld ms\n", held, NSILENT, NHELLO,
		      NSLOW, opened, ATTACK_MS, rss0 / 1024, peak / 1024,
		      RSS_BOUND_MIB, cpu, good_ram, good_file,
		      (long long)slowest);
	assert_int_equal(held, 3 * (NSILENT + NHELLO) + 2 * NSLOW);
	/* under ASan, plus its quarantine (256 MiB), where what the closed
	 * connections freed stays resident, and its redzones and shadow of
	 * each connection's read ahead: 512 MiB, still far under the GiBs
	 * an unbounded target reaches */
	assert_true(peak - rss0 < (RSS_BOUND_MIB +
				   (th_under_asan() ? 512 : 0)) * 1024);
	target_stop(&t);
}

static int setup(void **state)
{
	(void)state;
	hd_scratch_file(path, sizeof(path), FILE_LEN);
	hd_set_nofile(20000);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	hd_scratch_rm(path);
	return hd_teardown(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hostile_peers),
	};

	return cmocka_run_group_tests_name("hostile peers on every port",
					   tests, setup, teardown);
}
