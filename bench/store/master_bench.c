/*
 * xfer-store-master-bench: the store's master alone, driven over its RPC
 * (docs/PROTOCOL.md §7) by this program, which starts xfer-stored
 * itself, pinned to CPU 0 (this program runs on CPU 1).
 *
 *   xfer-store-master-bench [--stored PATH] [--seconds S] [--objects N]
 *                           [--restart-objects N] [--dir DIR]
 *
 * Each line it prints is one figure:
 *   single    single-key exist requests/s, pipelined 256 deep on one
 *             connection
 *   batch     keys/s in exist and in query batches of 128 keys, 16
 *             batches in flight
 *   put       puts/s (put_start + put_end of 4 KiB objects), batches of
 *             1 (64 in flight) and of 128 (8 in flight), without and
 *             with --journal
 *   evict     the longest ping round trip (the loop's longest stall)
 *             while the master evicts, --objects stored (1 M), next to
 *             the longest one before eviction starts; then the same
 *             with the segments full and one put of 16 MiB (a run of
 *             neighbours evicted to make room for it)
 *   restart   --restart-objects (100 k) put with a journal, the master
 *             SIGKILLed, then the time until it serves again, its
 *             segments are mounted again and every object was queried
 *             back (and found)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "store/proto_internal.h"

#define SEGS 4
#define VALUE 4096
#define LARGE (16u << 20)

struct master {
	pid_t pid;
	uint16_t port, metrics_port;
};

/* A connection: frames out in one write, replies parsed from rbuf. */
struct conn {
	int fd;
	uint32_t seq;
	struct store_buf out;
	uint8_t *rbuf;
	size_t rlen, rcap;
	size_t used;                   /* bytes of the reply handed back */
	struct store_msg *req, *rep;
};

static const char *stored_path = "build/xfer-stored";
static const char *dir = "/tmp";
static double seconds = 2;
static long objects = 1000000, restart_objects = 100000;

/* CPU seconds the master used so far (utime + stime of its stat). */
static double master_cpu_s(pid_t pid)
{
	unsigned long long ut = 0, st = 0;
	char path[64], buf[1024], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')');
	/* after the name: state, then fields 4..13, utime and stime */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u "
			 "%*u %llu %llu", &ut, &st) != 2)
		return 0;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static pid_t running;                  /* the master to stop on exit */

static void die(const char *what)
{
	fprintf(stderr, "xfer-store-master-bench: %s\n", what);
	if (running > 0)
		kill(running, SIGKILL);
	exit(1);
}

static void pin(int cpu)
{
	cpu_set_t set;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

static int connect_to(uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static uint16_t free_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    getsockname(fd, (struct sockaddr *)&sa, &len))
		die("no free port");
	close(fd);
	return ntohs(sa.sin_port);
}

/* Start xfer-stored on CPU 0 with the flags @p extra (NULL-ended). */
static void master_start(struct master *m, uint16_t port,
			 const char *const *extra)
{
	char portflag[32], metricsflag[32];
	/* the segments' owner does not ping: it must not expire */
	const char *argv[16] = { stored_path, portflag,
				 "--rpc_address=127.0.0.1",
				 "--client_ttl=86400", metricsflag,
				 "--metrics_host=127.0.0.1" };
	int n = 6, fd;

	m->port = port ? port : free_port();
	m->metrics_port = free_port();
	snprintf(portflag, sizeof(portflag), "--port=%u", m->port);
	snprintf(metricsflag, sizeof(metricsflag), "--metrics_port=%u",
		 m->metrics_port);
	while (extra && *extra)
		argv[n++] = *extra++;
	m->pid = fork();
	if (m->pid < 0)
		die("fork");
	running = m->pid;
	if (!m->pid) {
		pin(0);
		execv(argv[0], (char **)argv);
		_exit(127);
	}
	for (int i = 0; i < 3000; i++) {
		if ((fd = connect_to(m->port)) >= 0) {
			close(fd);
			return;
		}
		if (waitpid(m->pid, NULL, WNOHANG) == m->pid)
			die("xfer-stored exited (--stored PATH?)");
		usleep(1000);
	}
	die("xfer-stored did not serve");
}

static void master_stop(struct master *m, int sig)
{
	kill(m->pid, sig);
	waitpid(m->pid, NULL, 0);
	running = 0;
}

static void conn_open(struct conn *c, uint16_t port)
{
	memset(c, 0, sizeof(*c));
	c->fd = connect_to(port);
	c->req = calloc(1, sizeof(*c->req));
	c->rep = calloc(1, sizeof(*c->rep));
	c->rcap = STORE_HDR_LEN + STORE_FRAME_MAX;
	c->rbuf = malloc(c->rcap);
	if (c->fd < 0 || !c->req || !c->rep || !c->rbuf)
		die("cannot connect");
}

static void conn_close(struct conn *c)
{
	close(c->fd);
	store_buf_free(&c->out);
	free(c->rbuf);
	free(c->req);
	free(c->rep);
}

/* Queue c->req as @p type. */
static void queue(struct conn *c, unsigned type)
{
	c->req->h = (struct store_hdr){ .type = (uint16_t)type,
					.seq = ++c->seq };
	if (store_msg_encode(&c->out, c->req))
		die("cannot encode");
}

static void flush(struct conn *c)
{
	for (size_t off = 0; off < c->out.len;) {
		ssize_t n = write(c->fd, c->out.p + off, c->out.len - off);

		if (n <= 0)
			die("write");
		off += (size_t)n;
	}
	c->out.len = 0;
}

/* The next reply into c->rep (valid until the next call). */
static struct store_msg *next_reply(struct conn *c)
{
	ssize_t n;

	memmove(c->rbuf, c->rbuf + c->used, c->rlen - c->used);
	c->rlen -= c->used;
	c->used = 0;
	for (;;) {
		if (c->rlen >= STORE_HDR_LEN) {
			if (store_hdr_decode(c->rbuf, &c->rep->h))
				die("bad reply");
			if (c->rlen >= STORE_HDR_LEN + c->rep->h.len) {
				if (store_msg_decode(c->rbuf + STORE_HDR_LEN,
						     c->rep))
					die("bad reply");
				c->used = STORE_HDR_LEN + c->rep->h.len;
				return c->rep;
			}
		}
		/* rcap holds the largest frame: the decoder checked */
		n = read(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen);
		if (n <= 0)
			die("the master closed");
		c->rlen += (size_t)n;
	}
}

static char keys[STORE_BATCH_MAX][24];

static void set_keys(struct conn *c, long first, unsigned n)
{
	c->req->n = n;
	for (unsigned k = 0; k < n; k++) {
		long v = first + k;

		/* "key-" and 12 digits, without snprintf's cost */
		memcpy(keys[k], "key-", 4);
		for (int d = 15; d >= 4; d--, v /= 10)
			keys[k][d] = (char)('0' + v % 10);
		c->req->items[k].key = (struct store_str){ keys[k], 16 };
		c->req->items[k].len = VALUE;
	}
}

static void mount_segs(struct conn *c, uint64_t seg_size)
{
	static const char *const names[SEGS] = { "seg0", "seg1", "seg2",
						 "seg3" };

	memset(c->req->client, 'M', STORE_ID_LEN);
	for (int g = 0; g < SEGS; g++) {
		memset(c->req->segment, 'a' + g, STORE_ID_LEN);
		c->req->base = (uint64_t)g << 40;
		c->req->size = seg_size;
		c->req->name = (struct store_str){ names[g], 4 };
		queue(c, STORE_MOUNT);
		flush(c);
		if (next_reply(c)->err)
			die("mount refused");
	}
}

/* Put keys [first, first + n) in batches of @p batch, @p window
 * requests in flight. @return the keys whose put failed. */
static long put_range(struct conn *c, long first, long n, unsigned batch,
		      unsigned window)
{
	long failed = 0;

	memset(c->req->client, 'W', STORE_ID_LEN);
	c->req->replicas = 1;
	for (long i = 0; i < n; i += (long)batch * window) {
		unsigned w = 0;

		for (; w < window && i + (long)w * batch < n; w++) {
			set_keys(c, first + i + (long)w * batch, batch);
			queue(c, STORE_PUT_START);
		}
		flush(c);
		for (unsigned k = 0; k < w; k++)
			next_reply(c);
		for (unsigned k = 0; k < w; k++) {
			set_keys(c, first + i + (long)k * batch, batch);
			queue(c, STORE_PUT_END);
		}
		flush(c);
		for (unsigned k = 0; k < w; k++) {
			struct store_msg *r = next_reply(c);

			for (uint32_t x = 0; x < r->n; x++)
				failed += r->items[x].err != 0;
		}
	}
	return failed;
}

/* Send @p count requests of @p type, @p batch keys each, from key *at on
 * (wrapping before @p n). */
static void send_reads(struct conn *c, unsigned type, long n, unsigned batch,
		       unsigned count, long *at)
{
	for (unsigned w = 0; w < count; w++) {
		set_keys(c, *at, batch);
		*at = (*at + batch) % (n - batch);
		queue(c, type);
	}
	flush(c);
}

/* Requests of @p type over @p n existing keys in batches of @p batch,
 * @p window in flight (sent in quarters as the replies of one come), for
 * --seconds. @return keys/s; *missed counts keys not found, *per_cpu_s
 * keys per CPU second of the master @p pid. */
static double read_rate(struct conn *c, unsigned type, long n,
			unsigned batch, unsigned window, long *missed,
			pid_t pid, double *per_cpu_s)
{
	unsigned part = window / 4 ? window / 4 : 1;
	double t0 = now_s(), t, cpu0 = master_cpu_s(pid);
	long done = 0, at = 0;

	*missed = 0;
	for (unsigned q = 0; q < window / part; q++)
		send_reads(c, type, n, batch, part, &at);
	do {
		for (unsigned w = 0; w < part; w++) {
			struct store_msg *r = next_reply(c);

			for (uint32_t x = 0; x < r->n; x++)
				*missed += type == STORE_EXIST ?
					   r->items[x].err != 1 :
					   r->items[x].err != 0;
		}
		done += (long)batch * part;
		send_reads(c, type, n, batch, part, &at);
		t = now_s();
	} while (t - t0 < seconds);
	cpu0 = master_cpu_s(pid) - cpu0;
	*per_cpu_s = cpu0 > 0 ? done / cpu0 : 0;
	for (unsigned q = 0; q < window / part * part; q++)
		next_reply(c);
	return done / (t - t0);
}

static void bench_reads(void)
{
	static const struct {
		unsigned type, batch, window;
		const char *what;
	} runs[] = {
		{ STORE_EXIST, 1, 256, "single   %.0f exist requests/s (1 key, "
		  "256 in flight, one connection)" },
		{ STORE_QUERY, 1, 256, "single   %.0f query requests/s (1 key, "
		  "256 in flight, one connection)" },
		{ STORE_EXIST, 128, 16, "batch    %.0f keys/s in exist batches "
		  "of 128 (16 in flight)" },
		{ STORE_QUERY, 128, 16, "batch    %.0f keys/s in query batches "
		  "of 128 (16 in flight)" },
	};
	struct master m;
	struct conn c;
	long n = 100000, missed;
	double r, per_cpu;

	master_start(&m, 0, NULL);
	conn_open(&c, m.port);
	mount_segs(&c, 1ull << 32);
	if (put_range(&c, 0, n, 128, 8))
		die("puts failed");
	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		r = read_rate(&c, runs[i].type, n, runs[i].batch,
			      runs[i].window, &missed, m.pid, &per_cpu);
		printf(runs[i].what, r);
		printf("; %.0f per CPU second of the master%s\n", per_cpu,
		       missed ? "; MISSES" : "");
	}
	conn_close(&c);
	master_stop(&m, SIGTERM);
}

static void bench_puts(void)
{
	static const unsigned shape[2][2] = { { 1, 64 }, { 128, 8 } };
	char jflag[300], path[256];

	snprintf(path, sizeof(path), "%s/xfer-store-bench.%d.journal", dir,
		 (int)getpid());
	snprintf(jflag, sizeof(jflag), "--journal=%s", path);
	for (int j = 0; j < 2; j++)
		for (int s = 0; s < 2; s++) {
			const char *extra[] = { jflag, NULL };
			struct master m;
			struct conn c;
			long done = 0;
			double t0, t;

			unlink(path);
			master_start(&m, 0, j ? extra : NULL);
			conn_open(&c, m.port);
			mount_segs(&c, 1ull << 36);
			t0 = now_s();
			do {
				if (put_range(&c, done, 4096, shape[s][0],
					      shape[s][1]))
					die("puts failed");
				done += 4096;
				t = now_s();
			} while (t - t0 < seconds);
			printf("put      %.0f puts/s, batches of %u (%u in "
			       "flight), %s\n", done / (t - t0), shape[s][0],
			       shape[s][1], j ? "with --journal" :
			       "no journal");
			conn_close(&c);
			master_stop(&m, SIGTERM);
		}
	unlink(path);
	snprintf(jflag, sizeof(jflag), "%s-wal", path);
	unlink(jflag);
}

/* ---- the longest stall, as a pinger on its own connection sees it */

static atomic_bool ping_stop;
static atomic_long ping_max_us, ping_count;

static void *pinger(void *arg)
{
	struct conn c;

	conn_open(&c, *(uint16_t *)arg);
	memset(c.req->client, 'P', STORE_ID_LEN);
	while (!ping_stop) {
		double t0 = now_s();
		long us;

		queue(&c, STORE_PING);
		flush(&c);
		next_reply(&c);
		us = (long)((now_s() - t0) * 1e6);
		if (us > ping_max_us)
			ping_max_us = us;
		ping_count++;
		usleep(200);
	}
	conn_close(&c);
	return NULL;
}

/* The value of metric @p name in the master's /metrics, or -1. */
static double metric(const struct master *m, const char *name)
{
	static char buf[1 << 20];
	int fd = connect_to(m->metrics_port);
	size_t n = 0, len = strlen(name);
	ssize_t got;
	double v = -1;

	if (fd < 0)
		return -1;
	dprintf(fd, "GET /metrics HTTP/1.0\r\n\r\n");
	while (n < sizeof(buf) - 1 &&
	       (got = read(fd, buf + n, sizeof(buf) - 1 - n)) > 0)
		n += (size_t)got;
	close(fd);
	buf[n] = 0;
	for (char *p = buf; (p = strstr(p, name)); p += len)
		if (p[-1] == '\n' && p[len] == ' ')
			v = atof(p + len + 1);
	return v;
}

/* One put of LARGE into segments full of VALUE-byte objects: the
 * master evicts a run of neighbours. @return its put_start's err. */
static int32_t put_large(struct conn *c)
{
	int32_t err;

	set_keys(c, 2 * objects, 1);   /* put_range() may go past objects */
	c->req->items[0].len = LARGE;
	queue(c, STORE_PUT_START);
	flush(c);
	err = next_reply(c)->items[0].err;
	if (!err) {
		queue(c, STORE_PUT_END);
		flush(c);
		next_reply(c);
	}
	return err;
}

/* Fill --objects, just under the watermark, then 2 % more while a
 * pinger measures round trips; with @p journal_flag (or NULL). With
 * @p large, they fill the segments and one put of LARGE follows. */
static void evict_once(const char *journal_flag, bool large)
{
	/* the watermark sits just above what --objects fill */
	uint64_t seg = (uint64_t)((double)objects * VALUE /
				  (large ? 1 : 0.899) / SEGS);
	const char *extra[] = { large ? "--eviction_high_watermark_ratio=1" :
				"--eviction_high_watermark_ratio=0.9",
				journal_flag, NULL };
	char what[64] = "";
	struct master m;
	struct conn c;
	pthread_t t;
	long before;

	master_start(&m, 0, extra);
	conn_open(&c, m.port);
	mount_segs(&c, (seg + 4095) & ~4095ull);
	if (put_range(&c, 0, objects, 128, 8))
		die("puts failed while filling");
	ping_stop = false;
	ping_max_us = ping_count = 0;
	if (pthread_create(&t, NULL, pinger, &m.port))
		die("no thread");
	usleep(500000);
	before = ping_max_us;
	ping_max_us = 0;
	/* 2 % more: over the watermark, 5 % of the capacity goes */
	if (large)
		snprintf(what, sizeof(what), ", then one of %u MiB (%d)",
			 LARGE >> 20, put_large(&c));
	else
		put_range(&c, objects, objects / 50, 128, 8);
	usleep(2000000);
	ping_stop = true;
	pthread_join(t, NULL);
	printf("evict    %s, %ld objects stored%s: the costliest eviction "
	       "pass took %.1f ms of CPU (%.0f passes, %.0f objects "
	       "evicted); longest ping round trip %.1f ms while evicting "
	       "(%.1f ms before; %ld pings)\n",
	       journal_flag ? "with --journal" : "no journal", objects, what,
	       metric(&m, "xfer_stored_evict_pass_max_seconds") * 1e3,
	       metric(&m, "master_attempted_evictions_total"),
	       metric(&m, "master_evicted_key_count"), ping_max_us / 1e3,
	       before / 1e3, (long)ping_count);
	conn_close(&c);
	master_stop(&m, SIGTERM);
}

static void bench_evict(void)
{
	char jflag[300], path[256];

	snprintf(path, sizeof(path), "%s/xfer-store-bench.%d.evict", dir,
		 (int)getpid());
	snprintf(jflag, sizeof(jflag), "--journal=%s", path);
	for (int large = 0; large < 2; large++) {
		evict_once(NULL, large);
		unlink(path);
		evict_once(jflag, large);
		unlink(path);
	}
	snprintf(jflag, sizeof(jflag), "%s-wal", path);
	unlink(jflag);
}

static void bench_restart(void)
{
	char jflag[300], path[256];
	const char *extra[] = { jflag, NULL };
	struct master m;
	struct conn c;
	long missed = 0;
	double t0, t_serve, t_mount;

	snprintf(path, sizeof(path), "%s/xfer-store-bench.%d.restart", dir,
		 (int)getpid());
	snprintf(jflag, sizeof(jflag), "--journal=%s", path);
	unlink(path);
	master_start(&m, 0, extra);
	conn_open(&c, m.port);
	mount_segs(&c, 1ull << 36);
	if (put_range(&c, 0, restart_objects, 128, 8))
		die("puts failed");
	conn_close(&c);
	master_stop(&m, SIGKILL);

	t0 = now_s();
	master_start(&m, m.port, extra);
	t_serve = now_s();
	conn_open(&c, m.port);
	mount_segs(&c, 1ull << 36);
	t_mount = now_s();
	memset(c.req->client, 'R', STORE_ID_LEN);
	for (long i = 0; i < restart_objects; i += 128) {
		unsigned n = restart_objects - i < 128 ?
			     (unsigned)(restart_objects - i) : 128;

		set_keys(&c, i, n);
		queue(&c, STORE_QUERY);
		flush(&c);
		next_reply(&c);
		for (uint32_t x = 0; x < c.rep->n; x++)
			missed += c.rep->items[x].err != 0;
	}
	printf("restart  %ld objects: serving after %.0f ms, mounted again "
	       "after %.0f ms, all queried after %.0f ms; %ld missing\n",
	       restart_objects, (t_serve - t0) * 1e3, (t_mount - t0) * 1e3,
	       (now_s() - t0) * 1e3, missed);
	conn_close(&c);
	master_stop(&m, SIGTERM);
	unlink(path);
	snprintf(jflag, sizeof(jflag), "%s-wal", path);
	unlink(jflag);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "stored", required_argument, NULL, 's' },
		{ "seconds", required_argument, NULL, 't' },
		{ "objects", required_argument, NULL, 'n' },
		{ "restart-objects", required_argument, NULL, 'r' },
		{ "dir", required_argument, NULL, 'd' },
		{ "only", required_argument, NULL, 'o' },
		{ NULL, 0, NULL, 0 },
	};
	const char *only = NULL;
	int o;

	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 's': stored_path = optarg; break;
		case 't': seconds = atof(optarg); break;
		case 'n': objects = atol(optarg); break;
		case 'r': restart_objects = atol(optarg); break;
		case 'd': dir = optarg; break;
		case 'o': only = optarg; break;
		default:
			fprintf(stderr, "usage: xfer-store-master-bench "
				"[--stored PATH] [--seconds S] [--objects N] "
				"[--restart-objects N] [--dir DIR] "
				"[--only single|put|evict|restart]\n");
			return 2;
		}
	}
	if (seconds <= 0 || objects < 1000 || restart_objects < 128)
		die("--seconds > 0, --objects >= 1000, --restart-objects >= "
		    "128");
	signal(SIGPIPE, SIG_IGN);
	pin(1);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!only || !strcmp(only, "single"))
		bench_reads();
	if (!only || !strcmp(only, "put"))
		bench_puts();
	if (!only || !strcmp(only, "evict"))
		bench_evict();
	if (!only || !strcmp(only, "restart"))
		bench_restart();
	return 0;
}
