/*
 * Mooncake's C API in one process, written against transfer_engine_c.h
 * alone (and POSIX): transports installed (RDMA added to the running
 * engine where the host has devices, its batches kept) and uninstalled
 * (the engine remade; peers reopening; the RDMA tier runs this too),
 * auto discovery and MC_FORCE_TCP, file
 * segments, many threads on one engine, an engine freed with a
 * batch in flight, a central store (xfer-metad) named by a connection
 * string, NULL or bad arguments everywhere, and counts too large for a
 * batch or for memory.
 *
 *   capi_api [path of xfer-metad]   (default: beside this program's
 *                                     folder, ../xfer-metad)
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "transfer_engine_c.h"

#define MiB (1u << 20)
#define WAIT_MS 30000
#define THREADS 4
#define ROUNDS 50
#define PER 8             /* requests per batch */
#define BLOCK (16 * 1024) /* bytes per request */
#define REGION (PER * BLOCK)

#define CHECK(c) do { if (!(c)) { \
	fprintf(stderr, "capi_api: %s:%d: failed: %s\n", __FILE__, \
		__LINE__, #c); \
	exit(1); } } while (0)

#define CHECK_EQ(a, b) do { long long a_ = (long long)(a), \
	b_ = (long long)(b); if (a_ != b_) { \
	fprintf(stderr, "capi_api: %s:%d: %s is %lld, want %lld\n", \
		__FILE__, __LINE__, #a, a_, b_); \
	exit(1); } } while (0)

static int64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void *alloc(size_t len, int byte)
{
	void *p = NULL;

	CHECK(posix_memalign(&p, 4096, len) == 0);
	memset(p, byte, len);
	return p;
}

/* An engine peer to peer on 127.0.0.1 (auto discovery as asked). */
static transfer_engine_t engine(int auto_discover)
{
	transfer_engine_t e = createTransferEngine("P2PHANDSHAKE",
						   "127.0.0.1:12345", NULL, 0,
						   auto_discover);

	CHECK(e);
	return e;
}

static const char *name_of(transfer_engine_t e, char *buf, size_t len)
{
	CHECK_EQ(getLocalIpAndPort(e, buf, len), 0);
	return buf;
}

/* Submit @p r as task @p task of batch @p b and wait: its status. */
static int run1(transfer_engine_t e, batch_id_t b, size_t task,
		transfer_request_t *r)
{
	struct transfer_status st;
	int64_t end = now_ms() + WAIT_MS;

	CHECK_EQ(submitTransfer(e, b, r, 1), 0);
	do {
		CHECK_EQ(getTransferStatus(e, b, task, &st), 0);
		CHECK(now_ms() < end);
	} while (st.status == STATUS_WAITING);
	return st.status;
}

/* Move @len bytes with one request and wait: the task's status. */
static int xfer1_file(transfer_engine_t e, int op, void *src,
		      segment_id_t seg, file_id_t file, uint64_t off,
		      uint64_t len)
{
	transfer_request_t r = { .opcode = op, .source = src,
				 .target_id = seg, .file_id = file,
				 .target_offset = off, .length = len };
	batch_id_t b = allocateBatchID(e, 1);
	int st;

	CHECK(b != INVALID_BATCH);
	st = run1(e, b, 0, &r);
	CHECK_EQ(freeBatchID(e, b), 0);
	return st;
}

static int xfer1(transfer_engine_t e, int op, void *src, segment_id_t seg,
		 uint64_t off, uint64_t len)
{
	return xfer1_file(e, op, src, seg, 0, off, len);
}

/* The "protocol" a peer-to-peer engine at @p name advertises, asked
 * with a raw Metadata request (PROTOCOL.md §1). */
static int advertises(const char *name, const char *protocol)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	uint8_t frame[8 + 4] = { 4, 0, 0, 0, 0, 0, 0, 0, 1, '{', '}', '\n' };
	char reply[65536], want[64];
	const char *colon = strrchr(name, ':');
	size_t n = 0;
	ssize_t r;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	CHECK(fd >= 0 && colon);
	sa.sin_port = htons((uint16_t)atoi(colon + 1));
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	CHECK(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	CHECK(write(fd, frame, sizeof(frame)) == (ssize_t)sizeof(frame));
	while (n < sizeof(reply) - 1 &&
	       (r = read(fd, reply + n, sizeof(reply) - 1 - n)) > 0)
		n += (size_t)r;
	close(fd);
	reply[n] = '\0';
	CHECK(n > 9);
	snprintf(want, sizeof(want), "\"protocol\":\"%s\"", protocol);
	return strstr(reply + 9, want) != NULL;
}

/* ---- transports ---- */

/* Whether the host has an RDMA device (as the library finds them). */
static int host_has_rdma(void)
{
	DIR *d = opendir("/sys/class/infiniband");
	struct dirent *de;
	int n = 0;

	while (d && (de = readdir(d)))
		n += de->d_name[0] != '.';
	if (d)
		closedir(d);
	return n > 0;
}

static void transports(void)
{
	transfer_engine_t a = engine(0), b = engine(0);
	char an[64], bn[64], again[64];
	uint8_t *abuf = alloc(MiB, 0xab), *bbuf = alloc(MiB, 0);
	const char *matrix = "";
	void *args[2] = { (void *)matrix, NULL };
	segment_id_t seg, bseg;
	batch_id_t live;
	transport_t rdma;

	CHECK_EQ(registerLocalMemory(a, abuf, MiB, "cpu:0", 1), 0);
	CHECK_EQ(registerLocalMemory(b, bbuf, MiB, "cpu:0", 1), 0);
	name_of(a, an, sizeof(an));
	seg = openSegment(b, name_of(a, an, sizeof(an)));
	CHECK(seg > 0);
	CHECK_EQ(xfer1(b, OPCODE_READ, bbuf, seg, (uintptr_t)abuf, MiB),
		 STATUS_COMPLETED);
	CHECK(advertises(an, "tcp"));

	CHECK(installTransport(a, "tcp", NULL) != NULL);
	CHECK(installTransport(a, "nvmeof", NULL) == NULL);
	CHECK(installTransport(a, NULL, NULL) == NULL);
	CHECK(installTransport(NULL, "tcp", NULL) == NULL);

	/* RDMA where the host has devices: added to the running engine,
	 * whose name, port, memory and batches stay (a batch allocated
	 * before moves bytes after); installed again, as it is. The peer,
	 * which needs RDMA too to reach it, opens it again. */
	live = allocateBatchID(a, 2);
	CHECK(live != INVALID_BATCH);
	name_of(b, bn, sizeof(bn));
	bseg = openSegment(a, bn);
	CHECK(bseg > 0);
	CHECK_EQ(run1(a, live, 0, &(transfer_request_t){
		.opcode = OPCODE_WRITE, .source = abuf, .target_id = bseg,
		.target_offset = (uintptr_t)bbuf, .length = MiB / 2 }),
		 STATUS_COMPLETED);
	rdma = installTransport(a, "rdma", args);
	CHECK_EQ(rdma != NULL, host_has_rdma());
	CHECK_EQ(strcmp(name_of(a, again, sizeof(again)), an), 0);
	CHECK(advertises(an, rdma ? "rdma" : "tcp"));
	CHECK(installTransport(a, "rdma", args) == rdma);
	memset(bbuf, 0, MiB);
	CHECK_EQ(run1(a, live, 1, &(transfer_request_t){
		.opcode = OPCODE_WRITE, .source = abuf, .target_id = bseg,
		.target_offset = (uintptr_t)bbuf, .length = MiB }),
		 STATUS_COMPLETED);
	CHECK(bbuf[0] == 0xab && bbuf[MiB - 1] == 0xab);
	/* uninstalling remakes the engine: refused while it has a batch */
	CHECK_EQ(uninstallTransport(a, "rdma"), rdma ? -4 : 0);
	CHECK_EQ(uninstallTransport(a, "tcp"), 0);
	CHECK_EQ(freeBatchID(a, live), 0);
	CHECK(!rdma || installTransport(b, "rdma", args));
	CHECK_EQ(openSegmentNoCache(b, an), seg);
	memset(bbuf, 0, MiB);
	CHECK_EQ(xfer1(b, OPCODE_READ, bbuf, seg, (uintptr_t)abuf, MiB),
		 STATUS_COMPLETED);
	CHECK(bbuf[0] == 0xab && bbuf[MiB - 1] == 0xab);
	CHECK_EQ(uninstallTransport(a, "rdma"), 0);
	CHECK(advertises(an, "tcp"));
	CHECK_EQ(uninstallTransport(b, "rdma"), 0);
	CHECK_EQ(uninstallTransport(a, "nvmeof"), -1);
	CHECK_EQ(uninstallTransport(a, NULL), -1);

	/* the own side of a remade engine: its memory is registered again */
	bn[0] = '\0';
	name_of(b, bn, sizeof(bn));
	seg = openSegment(a, bn);
	CHECK(seg > 0);
	CHECK_EQ(xfer1(a, OPCODE_WRITE, abuf, seg, (uintptr_t)bbuf, MiB),
		 STATUS_COMPLETED);

	destroyTransferEngine(a);
	destroyTransferEngine(b);
	free(abuf);
	free(bbuf);
}

/* Auto discovery: RDMA where there are devices, else TCP; MC_FORCE_TCP:
 * TCP whatever the host has. */
static void auto_discovery(void)
{
	char n[64];
	transfer_engine_t e;

	setenv("MC_FORCE_TCP", "1", 1);
	e = engine(1);
	CHECK(advertises(name_of(e, n, sizeof(n)), "tcp"));
	destroyTransferEngine(e);
	unsetenv("MC_FORCE_TCP");
	e = engine(1);
	name_of(e, n, sizeof(n));
	CHECK(advertises(n, "rdma") || advertises(n, "tcp"));
	destroyTransferEngine(e);
}

/* File segments: two files registered get ids 0 and 1; a request names
 * its file and the offset in it; a file the segment lacks is INVALID. */
static void files(void)
{
	transfer_engine_t e = engine(0);
	char dir[] = "/tmp/capi_api.XXXXXX", path[2][64], n[128], seg[160];
	uint8_t *buf = alloc(8192, 0x5a), back[100];
	file_id_t id = 9;
	segment_id_t s;
	FILE *f;

	CHECK(supportFileBuffer(e));
	CHECK(mkdtemp(dir));
	for (int i = 0; i < 2; i++) {
		snprintf(path[i], sizeof(path[i]), "%s/f%d", dir, i);
		f = fopen(path[i], "w");
		CHECK(f && fclose(f) == 0);
		CHECK_EQ(registerLocalFile(e, path[i], 4096, &id), 0);
		CHECK_EQ(id, i);
	}
	CHECK_EQ(registerLocalFile(e, "/nonexistent/f", 4096, &id), -1);
	CHECK_EQ(registerLocalMemory(e, buf, 8192, "cpu:0", 1), 0);
	snprintf(seg, sizeof(seg), "nvmeof/%s", name_of(e, n, sizeof(n)));
	s = openSegment(e, seg);
	CHECK(s >= 0);
	CHECK_EQ(xfer1_file(e, OPCODE_WRITE, buf, s, 1, 100, 100),
		 STATUS_COMPLETED);
	f = fopen(path[1], "r");
	CHECK(f && fseek(f, 100, SEEK_SET) == 0);
	CHECK_EQ(fread(back, 1, 100, f), 100);
	fclose(f);
	CHECK(back[0] == 0x5a && back[99] == 0x5a);
	CHECK_EQ(xfer1_file(e, OPCODE_READ, buf + 4096, s, 1, 100, 100),
		 STATUS_COMPLETED);
	CHECK(buf[4096] == 0x5a && buf[4195] == 0x5a);
	CHECK_EQ(xfer1_file(e, OPCODE_READ, buf, s, 2, 0, 1), STATUS_INVALID);
	CHECK_EQ(xfer1_file(e, OPCODE_READ, buf, s, 0, 4000, 100),
		 STATUS_INVALID);
	for (int i = 0; i < 2; i++) {
		CHECK_EQ(unregisterLocalFile(e, path[i]), 0);
		unlink(path[i]);
	}
	CHECK_EQ(unregisterLocalFile(e, path[0]), -1);
	CHECK_EQ(registerLocalFile(e, NULL, 4096, &id), -1);
	CHECK_EQ(unregisterLocalFile(NULL, "/tmp/f"), -1);
	CHECK_EQ(unregisterLocalMemory(e, buf), 0);
	destroyTransferEngine(e);
	rmdir(dir);
	free(buf);
}

/* ---- threads: batches from several threads on one engine ---- */

struct worker {
	pthread_t tid;
	transfer_engine_t e;
	segment_id_t seg;
	uint8_t *local;
	uint64_t remote;
	int index;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	transfer_request_t r[PER];
	struct transfer_status st;

	for (int round = 0; round < ROUNDS; round++) {
		int op = round % 2 ? OPCODE_READ : OPCODE_WRITE;
		batch_id_t b = allocateBatchID(w->e, PER);
		int64_t end = now_ms() + WAIT_MS;

		CHECK(b != INVALID_BATCH);
		if (op == OPCODE_WRITE)
			memset(w->local, w->index * 16 + round, REGION);
		for (int i = 0; i < PER; i++)
			r[i] = (transfer_request_t){
				.opcode = op, .source = w->local + i * BLOCK,
				.target_id = w->seg,
				.target_offset = w->remote + i * BLOCK,
				.length = BLOCK };
		if (op == OPCODE_READ)
			memset(w->local, 0, REGION);
		CHECK_EQ(submitTransfer(w->e, b, r, PER), 0);
		for (int i = 0; i < PER; i++) {
			do {
				CHECK_EQ(getTransferStatus(w->e, b, i, &st), 0);
				CHECK(now_ms() < end);
			} while (st.status == STATUS_WAITING);
			CHECK_EQ(st.status, STATUS_COMPLETED);
		}
		CHECK_EQ(freeBatchID(w->e, b), 0);
		for (int i = 0; op == OPCODE_READ && i < REGION; i++)
			CHECK_EQ(w->local[i],
				 (uint8_t)(w->index * 16 + round - 1));
	}
	return NULL;
}

static void threads(void)
{
	transfer_engine_t a = engine(0), b = engine(0);
	uint8_t *abuf = alloc(THREADS * REGION, 0);
	uint8_t *bbuf = alloc(THREADS * REGION, 0);
	struct worker w[THREADS];
	char bn[64];
	segment_id_t seg;

	CHECK_EQ(registerLocalMemory(a, abuf, THREADS * REGION, "*", 1), 0);
	CHECK_EQ(registerLocalMemory(b, bbuf, THREADS * REGION, "*", 1), 0);
	seg = openSegment(a, name_of(b, bn, sizeof(bn)));
	CHECK(seg > 0);
	for (int i = 0; i < THREADS; i++) {
		w[i] = (struct worker){ .e = a, .seg = seg, .index = i,
					.local = abuf + i * REGION,
					.remote = (uintptr_t)bbuf + i * REGION };
		CHECK(pthread_create(&w[i].tid, NULL, work, &w[i]) == 0);
	}
	for (int i = 0; i < THREADS; i++)
		CHECK(pthread_join(w[i].tid, NULL) == 0);
	destroyTransferEngine(a);
	destroyTransferEngine(b);
	free(abuf);
	free(bbuf);
}

/* An engine freed with a batch in flight and one never freed: it
 * cancels and frees them, and returns. */
static void destroy_busy(void)
{
	transfer_engine_t a = engine(0), b = engine(0);
	uint8_t *abuf = alloc(16 * MiB, 1), *bbuf = alloc(16 * MiB, 2);
	transfer_request_t r = { .opcode = OPCODE_READ, .source = abuf,
				 .length = 16 * MiB };
	batch_id_t idle, busy;
	char bn[64];
	int64_t t0;

	CHECK_EQ(registerLocalMemory(a, abuf, 16 * MiB, "cpu:0", 1), 0);
	CHECK_EQ(registerLocalMemory(b, bbuf, 16 * MiB, "cpu:0", 1), 0);
	r.target_id = openSegment(a, name_of(b, bn, sizeof(bn)));
	r.target_offset = (uintptr_t)bbuf;
	CHECK(r.target_id > 0);
	idle = allocateBatchID(a, 1);
	busy = allocateBatchID(a, 1);
	CHECK(idle != INVALID_BATCH && busy != INVALID_BATCH);
	CHECK(idle != busy);
	CHECK_EQ(submitTransfer(a, busy, &r, 1), 0);
	t0 = now_ms();
	destroyTransferEngine(a);
	CHECK(now_ms() - t0 < 10000);
	destroyTransferEngine(b);
	free(abuf);
	free(bbuf);
}

/* ---- a central store: xfer-metad, segments found by name ---- */

static pid_t metad_start(const char *prog, uint16_t *port)
{
	char dir[] = "/tmp/capi_api.XXXXXX", file[64], buf[16] = "";
	int64_t end = now_ms() + WAIT_MS;
	FILE *f = NULL;
	pid_t pid;

	CHECK(mkdtemp(dir));
	snprintf(file, sizeof(file), "%s/port", dir);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		execl(prog, prog, "--port", "0", "--port-file", file,
		      (char *)NULL);
		_exit(127);
	}
	while (!(f = fopen(file, "r")) || !fgets(buf, sizeof(buf), f)) {
		if (f)
			fclose(f);
		f = NULL;
		CHECK(now_ms() < end);
		usleep(10000);
	}
	fclose(f);
	*port = (uint16_t)atoi(buf);
	unlink(file);
	rmdir(dir);
	CHECK(*port > 0);
	return pid;
}

static void store(const char *metad)
{
	uint8_t *abuf = alloc(MiB, 0x11), *bbuf = alloc(MiB, 0x22);
	transfer_engine_t a, b;
	char url[80], an[64];
	uint16_t port;
	segment_id_t seg;
	int status;
	pid_t pid = metad_start(metad, &port);

	snprintf(url, sizeof(url), "http://127.0.0.1:%u/metadata", port);
	setenv("MC_TCP_BIND_ADDRESS", "127.0.0.1", 1);
	a = createTransferEngine(url, "capi-a", NULL, 0, 0);
	b = createTransferEngine(url, "capi-b", NULL, 0, 0);
	CHECK(a && b);
	CHECK(!strncmp(name_of(a, an, sizeof(an)), "127.0.0.1:", 10));
	CHECK_EQ(registerLocalMemory(b, bbuf, MiB, "cpu:0", 1), 0);
	CHECK_EQ(registerLocalMemory(a, abuf, MiB, "cpu:0", 1), 0);
	CHECK_EQ(openSegment(a, "capi-a"), LOCAL_SEGMENT);
	seg = openSegment(a, "capi-b");
	CHECK(seg > 0);
	CHECK_EQ(xfer1(a, OPCODE_WRITE, abuf, seg, (uintptr_t)bbuf, MiB),
		 STATUS_COMPLETED);
	CHECK(bbuf[0] == 0x11 && bbuf[MiB - 1] == 0x11);
	CHECK_EQ(syncSegmentCache(a), 0);
	CHECK(openSegment(a, "capi-nobody") < 0);
	destroyTransferEngine(b);
	destroyTransferEngine(a);
	unsetenv("MC_TCP_BIND_ADDRESS");
	kill(pid, SIGTERM);
	CHECK(waitpid(pid, &status, 0) == pid);
	free(abuf);
	free(bbuf);
}

/* NULL or bad arguments: refused, nothing breaks. */
static void bad_args(void)
{
	struct transfer_status st;
	notify_msg_t n = { NULL, NULL };
	char buf[8];
	int size = 7;

	CHECK(createTransferEngine(NULL, "h", NULL, 0, 0) == NULL);
	CHECK(createTransferEngine("", "h", NULL, 0, 0) == NULL);
	CHECK(createTransferEngine("nosuch://x", "h", NULL, 0, 0) == NULL);
	destroyTransferEngine(NULL);
	CHECK_EQ(getLocalIpAndPort(NULL, buf, sizeof(buf)), -1);
	CHECK(openSegment(NULL, "x") < 0);
	CHECK_EQ(registerLocalMemory(NULL, buf, 8, "*", 1), -1);
	CHECK_EQ(allocateBatchID(NULL, 1), INVALID_BATCH);
	CHECK_EQ(getTransferStatus(NULL, 0, 0, &st), 1);
	CHECK(getNotifsFromEngine(NULL, &size) == NULL && size == 0);
	CHECK_EQ(freeNotifsMsgBuf(NULL, 0), 0);
	CHECK_EQ(genNotifyInEngine(NULL, 0, n), -1);
	CHECK_EQ(syncSegmentCache(NULL), -1);
	{
		transfer_engine_t e = engine(0);

		/* a short buffer gets what fits, NUL-ended */
		CHECK_EQ(getLocalIpAndPort(e, buf, sizeof(buf)), 0);
		CHECK_EQ(strlen(buf), sizeof(buf) - 1);
		CHECK(getNotifsFromEngine(e, &size) == NULL && size == 0);
		CHECK_EQ(genNotifyInEngine(e, LOCAL_SEGMENT, n), -1);
		CHECK_EQ(submitTransfer(e, 12345, NULL, 1), 1);
		destroyTransferEngine(e);
	}
}

/*
 * Counts past what a batch holds, or past what memory can hold (their
 * size in bytes wraps): refused before anything is allocated, nothing
 * appended, and the batch still takes what fits.
 */
static void too_many(void)
{
	transfer_engine_t e = engine(0);
	uint8_t *buf = alloc(4 * BLOCK, 7);
	buffer_entry_t l[2] = { { buf, BLOCK }, { buf + 2 * BLOCK, BLOCK } };
	transfer_request_t r[5];
	struct transfer_status st;
	int64_t end = now_ms() + WAIT_MS;
	batch_id_t b;

	CHECK_EQ(registerLocalMemoryBatch(e, l, SIZE_MAX / sizeof(*l) + 2,
					  "cpu:0"), -1);
	CHECK_EQ(registerLocalMemory(e, buf, 4 * BLOCK, "cpu:0", 1), 0);
	for (int i = 0; i < 5; i++)
		r[i] = (transfer_request_t){ .opcode = OPCODE_WRITE,
			.source = buf, .target_id = LOCAL_SEGMENT,
			.target_offset = (uintptr_t)buf + 2 * BLOCK,
			.length = BLOCK };
	b = allocateBatchID(e, 4);
	CHECK(b != INVALID_BATCH);
	CHECK_EQ(submitTransfer(e, b, r, 5), 2);
	CHECK_EQ(submitTransfer(e, b, r, SIZE_MAX), 2);
	/* one of these wraps to a small size for any request size <= 64 */
	for (size_t d = 2; d <= 64; d++)
		CHECK_EQ(submitTransfer(e, b, r, SIZE_MAX / d + 2), 2);
	CHECK_EQ(submitTransfer(e, b, r, 3), 0);
	CHECK_EQ(submitTransfer(e, b, r, 2), 2);
	CHECK_EQ(getTransferStatus(e, b, 3, &st), 1);
	CHECK_EQ(submitTransfer(e, b, r, 1), 0);
	for (size_t i = 0; i < 4; i++) {
		do {
			CHECK_EQ(getTransferStatus(e, b, i, &st), 0);
			CHECK(now_ms() < end);
		} while (st.status == STATUS_WAITING);
		CHECK_EQ(st.status, STATUS_COMPLETED);
	}
	CHECK_EQ(getTransferStatus(e, b, 4, &st), 1);
	CHECK_EQ(freeBatchID(e, b), 0);
	CHECK_EQ(unregisterLocalMemory(e, buf), 0);
	destroyTransferEngine(e);
	free(buf);
}

int main(int argc, char **argv)
{
	char self[4096], metad[4200];

	signal(SIGPIPE, SIG_IGN);
	snprintf(self, sizeof(self), "%s", argv[0]);
	snprintf(metad, sizeof(metad), "%s/../xfer-metad", dirname(self));
	transports();
	auto_discovery();
	files();
	threads();
	destroy_busy();
	store(argc > 1 ? argv[1] : metad);
	bad_args();
	too_many();
	printf("capi_api: transports, discovery, files, threads, teardown, "
	       "store, refusals and counts too large checked\n");
	return 0;
}
