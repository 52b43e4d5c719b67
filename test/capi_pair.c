/*
 * Mooncake's C API between two processes over TCP, written against
 * transfer_engine_c.h alone (and POSIX), as a Mooncake user's program
 * is: a target child registers a buffer and answers check requests sent
 * as notifications; the parent, the initiator, opens it, moves batches
 * both ways, and checks every byte, every status and every answer of
 * every call of the header, the refusals included.
 *
 *   capi_pair            run both over TCP (exit 0: all good)
 *   capi_pair --rdma     both install RDMA first (the RDMA tier runs it
 *                        on Soft-RoCE)
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "transfer_engine_c.h"

#define MiB (1u << 20)
#define TGT_LEN (8 * MiB)
#define LOC_LEN (4 * MiB)
#define WAIT_MS 30000

static const char *role = "initiator";
static bool rdma; /* --rdma: both engines install RDMA */

#define CHECK(c) do { if (!(c)) { \
	fprintf(stderr, "capi_pair %s: %s:%d: failed: %s\n", role, \
		__FILE__, __LINE__, #c); \
	exit(1); } } while (0)

#define CHECK_EQ(a, b) do { long long a_ = (long long)(a), \
	b_ = (long long)(b); if (a_ != b_) { \
	fprintf(stderr, "capi_pair %s: %s:%d: %s is %lld, want %lld\n", \
		role, __FILE__, __LINE__, #a, a_, b_); \
	exit(1); } } while (0)

static uint8_t pattern(unsigned seed, uint64_t i)
{
	return (uint8_t)(seed * 131 + i * 7 + (i >> 9));
}

static void fill(uint8_t *p, size_t len, unsigned seed, uint64_t off)
{
	for (size_t i = 0; i < len; i++)
		p[i] = pattern(seed, off + i);
}

/* Offset of the first byte that is not the pattern, or -1. */
static long long check(const uint8_t *p, size_t len, unsigned seed,
		       uint64_t off)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != pattern(seed, off + i))
			return (long long)i;
	return -1;
}

static int64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
	struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&t, NULL);
}

static void *alloc(size_t len)
{
	void *p = NULL;

	CHECK(posix_memalign(&p, 4096, len) == 0);
	memset(p, 0, len);
	return p;
}

/* The next notification (waits up to WAIT_MS); *name and *msg malloc'd. */
static void next_notify(transfer_engine_t e, char **name, char **msg)
{
	static notify_msg_t *v;
	static int n, i;
	int64_t end = now_ms() + WAIT_MS;

	while (i == n) {
		freeNotifsMsgBuf(v, n);
		v = getNotifsFromEngine(e, &n);
		i = 0;
		CHECK(v ? n > 0 : n == 0);
		if (!n) {
			CHECK(now_ms() < end);
			sleep_ms(1);
		}
	}
	*name = strdup(v[i].name);
	*msg = strdup(v[i].msg);
	i++;
}

/* TCP, and RDMA with --rdma (the priority matrix from sysfs). */
static void install(transfer_engine_t e)
{
	void *args[2] = { "", NULL };

	CHECK(installTransport(e, "tcp", NULL));
	if (rdma)
		CHECK(installTransport(e, "rdma", args));
}

/* ---- the target ---- */

static int target(int out_fd)
{
	transfer_engine_t e;
	uint8_t *buf = alloc(TGT_LEN);
	char self[128], line[300], *name, *msg;
	unsigned seed;
	unsigned long long off, len;
	long long bad;

	role = "target";
	e = createTransferEngine("P2PHANDSHAKE", "127.0.0.1", "127.0.0.1",
				 12345, 0);
	CHECK(e);
	install(e);
	fill(buf, TGT_LEN, 1, 0);
	CHECK_EQ(registerLocalMemory(e, buf, TGT_LEN, "cpu:0", 1), 0);
	CHECK_EQ(getLocalIpAndPort(e, self, sizeof(self)), 0);
	snprintf(line, sizeof(line), "%s %llu\n", self,
		 (unsigned long long)(uintptr_t)buf);
	CHECK(write(out_fd, line, strlen(line)) == (ssize_t)strlen(line));
	close(out_fd);

	/* "check SEED OFF LEN": answer the sender "ok SEED" or "bad ..." */
	for (;;) {
		next_notify(e, &name, &msg);
		if (!strcmp(msg, "quit"))
			break;
		CHECK(sscanf(msg, "check %u %llu %llu", &seed, &off, &len) == 3);
		CHECK(off + len <= TGT_LEN);
		bad = check(buf + off, len, seed, 0);
		if (bad < 0)
			snprintf(line, sizeof(line), "ok %u", seed);
		else
			snprintf(line, sizeof(line), "bad %u at %lld", seed, bad);
		{
			segment_id_t peer = openSegment(e, name);
			notify_msg_t reply = { self, line };

			CHECK(peer > 0);
			CHECK_EQ(genNotifyInEngine(e, (uint64_t)peer, reply), 0);
		}
		free(name);
		free(msg);
	}
	free(name);
	free(msg);
	CHECK_EQ(unregisterLocalMemory(e, buf), 0);
	destroyTransferEngine(e);
	free(buf);
	return 0;
}

/* ---- the initiator's helpers ---- */

static transfer_engine_t E;
static char self_name[128], peer_name[128];
static uint64_t tgt;           /* the target buffer's address */
static uint8_t *A, *B;         /* local buffers */

static transfer_request_t req(int op, void *src, segment_id_t seg,
			      uint64_t off, uint64_t len)
{
	transfer_request_t r;

	memset(&r, 0, sizeof(r));
	r.opcode = op;
	r.source = src;
	r.target_id = seg;
	r.target_offset = off;
	r.length = len;
	return r;
}

/* Poll task @i until it leaves WAITING: its final status. */
static struct transfer_status wait_task(batch_id_t b, size_t i)
{
	struct transfer_status st;
	int64_t end = now_ms() + WAIT_MS;

	for (;;) {
		CHECK_EQ(getTransferStatus(E, b, i, &st), 0);
		if (st.status != STATUS_WAITING)
			return st;
		CHECK(now_ms() < end);
	}
}

/* One batch of @n requests, every task expected @want[i] (COMPLETED:
 * all its bytes counted); freed after. */
static void run_batch(transfer_request_t *r, size_t n, const int *want)
{
	batch_id_t b = allocateBatchID(E, n);

	CHECK(b != INVALID_BATCH);
	CHECK_EQ(submitTransfer(E, b, r, n), 0);
	for (size_t i = 0; i < n; i++) {
		struct transfer_status st = wait_task(b, i);

		CHECK_EQ(st.status, want[i]);
		if (want[i] == STATUS_COMPLETED)
			CHECK_EQ(st.transferred_bytes, r[i].length);
	}
	CHECK_EQ(freeBatchID(E, b), 0);
}

static void run1(int op, void *src, segment_id_t seg, uint64_t off,
		 uint64_t len)
{
	transfer_request_t r = req(op, src, seg, off, len);
	int want = STATUS_COMPLETED;

	run_batch(&r, 1, &want);
}

/* Ask the target to check [off, off+len) of its buffer against @seed,
 * by notification, and expect "ok". */
static void target_checks(segment_id_t seg, unsigned seed, uint64_t off,
			  uint64_t len)
{
	char msg[96], want[32], *name, *got;
	notify_msg_t n = { self_name, msg };

	snprintf(msg, sizeof(msg), "check %u %llu %llu", seed,
		 (unsigned long long)off, (unsigned long long)len);
	CHECK_EQ(genNotifyInEngine(E, (uint64_t)seg, n), 0);
	next_notify(E, &name, &got);
	snprintf(want, sizeof(want), "ok %u", seed);
	if (strcmp(got, want))
		fprintf(stderr, "target says: %s\n", got);
	CHECK(!strcmp(got, want));
	CHECK(!strcmp(name, peer_name));
	free(name);
	free(got);
}

/* ---- the initiator ---- */

/* Batches both ways, every byte checked: three WRITEs of odd sizes and
 * bad requests beside them (INVALID, the others go ahead), READ back,
 * the target's own bytes READ, a copy to the own segment. */
static void transfers(segment_id_t seg)
{
	transfer_request_t r[6];
	int want[6] = { STATUS_COMPLETED, STATUS_COMPLETED, STATUS_COMPLETED,
			STATUS_INVALID, STATUS_INVALID, STATUS_INVALID };

	fill(A, 2 * MiB, 2, 0);
	r[0] = req(OPCODE_WRITE, A, seg, tgt, 1);
	r[1] = req(OPCODE_WRITE, A + 1, seg, tgt + 1, 64 * 1024 + 7);
	r[2] = req(OPCODE_WRITE, A + 65543, seg, tgt + 65543,
		   2 * MiB - 65543);
	r[3] = req(OPCODE_WRITE, A, seg, tgt + TGT_LEN - 1, 2); /* past it */
	r[4] = req(OPCODE_WRITE, A, 999, tgt, 1);              /* no such id */
	r[5] = req(7, A, seg, tgt, 1);                          /* opcode */
	run_batch(r, 6, want);

	memset(B, 0, LOC_LEN);
	run1(OPCODE_READ, B, seg, tgt, 2 * MiB);
	CHECK_EQ(check(B, 2 * MiB, 2, 0), -1);
	run1(OPCODE_READ, B, seg, tgt + 4 * MiB, 4 * MiB);
	CHECK_EQ(check(B, 4 * MiB, 1, 4 * MiB), -1);
	target_checks(seg, 2, 0, 2 * MiB);

	fill(A, LOC_LEN, 5, 0);
	run1(OPCODE_WRITE, A, LOCAL_SEGMENT, (uint64_t)(uintptr_t)B, LOC_LEN);
	CHECK_EQ(check(B, LOC_LEN, 5, 0), -1);
}

/* submitTransferWithNotify: the notification comes after the data; the
 * target checks the bytes and says so. freeBatchID() once every task is
 * terminal works whether or not the peer has answered yet. */
static void with_notify(segment_id_t seg)
{
	char msg[96];
	notify_msg_t n = { self_name, msg };
	transfer_request_t r;
	batch_id_t b = allocateBatchID(E, 1);
	char *name, *got;

	fill(A, MiB, 3, 0);
	r = req(OPCODE_WRITE, A, seg, tgt + 6 * MiB, MiB);
	snprintf(msg, sizeof(msg), "check 3 %u %u", 6 * MiB, MiB);
	CHECK(b != INVALID_BATCH);
	CHECK_EQ(submitTransferWithNotify(E, b, &r, 1, n), 0);
	CHECK_EQ(wait_task(b, 0).status, STATUS_COMPLETED);
	CHECK_EQ(freeBatchID(E, b), 0);
	next_notify(E, &name, &got);
	CHECK(!strcmp(got, "ok 3"));
	CHECK(!strcmp(name, peer_name));
	free(name);
	free(got);
}

/* freeBatchID() is refused while a task is in flight: the target is
 * stopped, so a WRITE waits for its answer; transferred_bytes stays a
 * lower bound meanwhile. */
static void busy(pid_t child, segment_id_t seg)
{
	transfer_request_t r = req(OPCODE_WRITE, A, seg, tgt, 64 * 1024);
	batch_id_t b = allocateBatchID(E, 1);
	struct transfer_status st;

	CHECK(b != INVALID_BATCH);
	CHECK(kill(child, SIGSTOP) == 0);
	CHECK_EQ(submitTransfer(E, b, &r, 1), 0);
	sleep_ms(100);
	CHECK_EQ(getTransferStatus(E, b, 0, &st), 0);
	CHECK_EQ(st.status, STATUS_WAITING);
	CHECK(st.transferred_bytes <= r.length);
	CHECK_EQ(freeBatchID(E, b), 4); /* batch busy */
	CHECK(kill(child, SIGCONT) == 0);
	CHECK_EQ(wait_task(b, 0).status, STATUS_COMPLETED);
	CHECK_EQ(freeBatchID(E, b), 0);
}

/* Batch ids: unknown ones, a full batch, task ids past the last. */
static void batch_ids(segment_id_t seg)
{
	transfer_request_t r[3];
	struct transfer_status st;
	batch_id_t b = allocateBatchID(E, 2);

	for (int i = 0; i < 3; i++)
		r[i] = req(OPCODE_READ, B + i, seg, tgt + (unsigned)i, 1);
	CHECK(b != INVALID_BATCH);
	CHECK_EQ(allocateBatchID(E, 0), INVALID_BATCH);
	CHECK_EQ(submitTransfer(E, b, r, 3), 2); /* too many requests */
	CHECK_EQ(submitTransfer(E, b, r, 0), 0);
	CHECK_EQ(getTransferStatus(E, b, 0, &st), 1); /* none yet */
	CHECK_EQ(submitTransfer(E, b, r, 2), 0);
	CHECK_EQ(wait_task(b, 1).status, STATUS_COMPLETED);
	CHECK_EQ(getTransferStatus(E, b, 2, &st), 1);
	CHECK_EQ(submitTransfer(E, b, r, 1), 2); /* full */
	CHECK_EQ(wait_task(b, 0).status, STATUS_COMPLETED);
	CHECK_EQ(freeBatchID(E, b), 0);
	CHECK_EQ(freeBatchID(E, b), 1);
	CHECK_EQ(getTransferStatus(E, b, 0, &st), 1);
	CHECK_EQ(submitTransfer(E, b, r, 1), 1);
	CHECK_EQ(freeBatchID(E, b + 1), 1);
}

/* Segment ids: the same for the same name, LOCAL_SEGMENT for the own,
 * refusals; closed and opened again (same id), removed (a new one). */
static segment_id_t segments(void)
{
	char slash[140];
	segment_id_t seg, again;
	transfer_request_t r;
	int invalid = STATUS_INVALID;

	seg = openSegment(E, peer_name);
	CHECK(seg > 0);
	CHECK_EQ(openSegment(E, peer_name), seg);
	snprintf(slash, sizeof(slash), "/%s", peer_name);
	CHECK_EQ(openSegment(E, slash), seg);
	CHECK_EQ(openSegmentNoCache(E, peer_name), seg);
	CHECK_EQ(openSegment(E, self_name), LOCAL_SEGMENT);
	CHECK(openSegment(E, "") < 0);
	CHECK(openSegment(E, "127.0.0.1:1") < 0);
	CHECK_EQ(syncSegmentCache(E), 0);

	CHECK_EQ(closeSegment(E, seg), 0);
	r = req(OPCODE_READ, B, seg, tgt, 1);
	run_batch(&r, 1, &invalid);
	CHECK_EQ(openSegment(E, peer_name), seg);
	run1(OPCODE_READ, B, seg, tgt, 4096);
	CHECK_EQ(closeSegment(E, 4242), -1);
	CHECK_EQ(closeSegment(E, LOCAL_SEGMENT), 0);

	CHECK_EQ(removeLocalSegment(E, peer_name), 0);
	CHECK_EQ(removeLocalSegment(E, ""), -1);
	run_batch(&r, 1, &invalid);
	again = openSegment(E, peer_name);
	CHECK(again > 0 && again != seg);
	run1(OPCODE_READ, B, again, tgt, 4096);
	return again;
}

static void initiator(pid_t child)
{
	buffer_entry_t both[2], overlap[2];
	void *addrs[2];
	segment_id_t seg;
	notify_msg_t quit = { self_name, "quit" };

	E = createTransferEngine("P2PHANDSHAKE", "127.0.0.1", NULL, 0, 0);
	CHECK(E);
	install(E);
	CHECK_EQ(getLocalIpAndPort(E, self_name, sizeof(self_name)), 0);
	CHECK(!strncmp(self_name, "127.0.0.1:", 10));

	A = alloc(LOC_LEN);
	B = alloc(LOC_LEN);
	both[0] = (buffer_entry_t){ A, LOC_LEN };
	both[1] = (buffer_entry_t){ B, LOC_LEN };
	overlap[0] = (buffer_entry_t){ A, 8192 };
	overlap[1] = (buffer_entry_t){ A + 4096, 8192 };
	CHECK_EQ(registerLocalMemoryBatch(E, overlap, 2, "cpu:0"), -7);
	CHECK_EQ(registerLocalMemoryBatch(E, both, 2, "cpu:0"), 0);
	CHECK_EQ(registerLocalMemory(E, A + 4096, 4096, "cpu:0", 1), -7);
	CHECK_EQ(registerLocalMemory(E, A, 0, "cpu:0", 1), -1);

	seg = segments();
	transfers(seg);
	with_notify(seg);
	/* an RDMA WRITE needs no CPU of the target: stopping it holds none */
	if (!rdma)
		busy(child, seg);
	else
		run1(OPCODE_WRITE, A, seg, tgt, 64 * 1024);
	batch_ids(seg);
	/* A's first 64 KiB went there, seed 3 since with_notify() */
	target_checks(seg, 3, 0, 64 * 1024);
	{
		notify_msg_t n = { self_name, "x" };

		CHECK_EQ(genNotifyInEngine(E, 999, n), -200);
	}

	addrs[0] = A;
	addrs[1] = B;
	CHECK_EQ(unregisterLocalMemoryBatch(E, addrs, 2), 0);
	CHECK_EQ(unregisterLocalMemory(E, A), -3);
	CHECK_EQ(genNotifyInEngine(E, (uint64_t)seg, quit), 0);
	destroyTransferEngine(E);
	free(A);
	free(B);
}

int main(int argc, char **argv)
{
	char line[300];
	int pfd[2], status;
	size_t n = 0;
	pid_t pid;

	signal(SIGPIPE, SIG_IGN);
	rdma = argc > 1 && !strcmp(argv[1], "--rdma");
	CHECK(pipe(pfd) == 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		close(pfd[0]);
		exit(target(pfd[1]));
	}
	close(pfd[1]);
	while (n < sizeof(line) - 1 && read(pfd[0], line + n, 1) == 1 &&
	       line[n] != '\n')
		n++;
	line[n] = '\0';
	close(pfd[0]);
	CHECK(sscanf(line, "%127s %llu", peer_name,
		     (unsigned long long *)&tgt) == 2);

	initiator(pid);

	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	printf("capi_pair: every call of transfer_engine_c.h checked between "
	       "two processes over %s\n", rdma ? "RDMA" : "TCP");
	return 0;
}
