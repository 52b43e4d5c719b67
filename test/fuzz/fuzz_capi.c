/*
 * Mooncake's C API (capi/): the arguments a careless or hostile caller
 * passes, as a sequence of calls on one engine (peer to peer on
 * 127.0.0.1, TCP, created once, with a peer engine whose memory it
 * reaches over TCP): batch sizes, counts, request fields, batch and
 * segment ids, task indices, NULLs, strings, buffer lengths.
 *
 * Each input byte-codes its calls (an opcode byte, then the arguments;
 * an input that runs out reads zeros). What a real caller could not pass
 * stays out: a list is as long as its count says, and what is registered
 * lies in the fuzzer's own area. Counts past any batch's capacity (2^24)
 * or whose size in bytes wraps are passed with short lists: the API must
 * refuse them without reading the list. Requests may name any address:
 * the engine checks them against what is registered. After each input
 * every batch it allocated is waited for and freed, every buffer it
 * registered unregistered, and the notifications taken.
 */
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <xfer/transfer_engine_c.h>

#include "test/fuzz/fuzz.h"

#define AREA_LEN (1u << 20)
#define BATCHES 8        /* batch ids an input holds at once */
#define LIST 8           /* entries of a list, at most */
#define REGS 64          /* registrations an input makes, at most */
#define MAX_CAP (1u << 24) /* xfer_batch_new()'s largest capacity */
#define WAIT_MS 10000

static transfer_engine_t eng, peer;
static uint8_t *area, *peer_area;   /* peer_area: registered in peer */
static segment_id_t peer_seg;

/* What the input being run holds. */
static batch_id_t batch[BATCHES];
static void *regs[REGS];
static size_t nregs;

struct in {
	const uint8_t *p;
	size_t n;
};

static uint8_t u8(struct in *in)
{
	if (!in->n)
		return 0;
	in->n--;
	return *in->p++;
}

static uint64_t u64(struct in *in)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | u8(in);
	return v;
}

static uint32_t u16(struct in *in)
{
	return (uint32_t)u8(in) << 8 | u8(in);
}

/* A count past what any batch holds or any memory holds (its size in
 * bytes wraps for every element size up to 64). */
static size_t huge(struct in *in)
{
	static const size_t v[] = {
		MAX_CAP + 1, SIZE_MAX, SIZE_MAX / 2 + 1, SIZE_MAX / 16 + 2,
		SIZE_MAX / 24 + 2, SIZE_MAX / 40 + 2, SIZE_MAX / 64 + 2,
	};
	uint8_t k = u8(in);

	return k < 7 ? v[k] : (size_t)u64(in) | ((size_t)MAX_CAP << 1);
}

/* An address in @p a (AREA_LEN bytes), and a length that stays in it. */
static void *in_area(struct in *in, uint8_t *a, size_t *len)
{
	size_t off = (size_t)u16(in) * 16 % AREA_LEN;

	if (len)
		*len = 1 + ((size_t)u16(in) << 4 | (u8(in) & 15)) %
			   (AREA_LEN - off);
	return a + off;
}

/* NULL, a short string, or one from the input (up to 31 bytes). */
static char *str(struct in *in, char *buf)
{
	uint8_t k = u8(in), n;

	if (k == 0)
		return NULL;
	if (k < 64)
		return strcpy(buf, k & 1 ? "cpu:0" : "*");
	n = u8(in) % 32;
	for (uint8_t i = 0; i < n; i++)
		buf[i] = (char)u8(in);
	buf[n] = '\0';
	return buf;
}

static batch_id_t batch_arg(struct in *in)
{
	uint8_t k = u8(in);

	if (k < 4 * BATCHES)
		return batch[k % BATCHES];
	return k & 1 ? INVALID_BATCH : u64(in);
}

static segment_id_t seg_arg(struct in *in)
{
	uint8_t k = u8(in) % 4;

	return k == 0 ? LOCAL_SEGMENT : k == 1 ? peer_seg :
	       (segment_id_t)u64(in);
}

static void request(struct in *in, transfer_request_t *r)
{
	uint8_t k = u8(in);

	r->opcode = k % 3;               /* READ, WRITE, or another */
	r->source = k & 8 ? in_area(in, area, NULL) :
		    k & 16 ? NULL : (void *)(uintptr_t)u64(in);
	r->target_id = seg_arg(in);
	r->file_id = k & 32 ? (file_id_t)u64(in) : 0;
	r->target_offset = k & 64 ? u64(in) :
			   (uintptr_t)in_area(in, r->target_id == peer_seg ?
						  peer_area : area, NULL);
	r->length = k & 128 ? u64(in) : u16(in);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { 0, ms * 1000000L };

	nanosleep(&ts, NULL);
}

/* Wait for every task of @p id, then free it. */
static void drop_batch(batch_id_t id)
{
	struct transfer_status st;
	int ms = 0, ret;

	for (size_t i = 0; !getTransferStatus(eng, id, i, &st); i++)
		while (st.status == STATUS_WAITING && ms++ < WAIT_MS) {
			sleep_ms(1);
			if (getTransferStatus(eng, id, i, &st))
				FUZZ_DIE("task %zu of a live batch gone", i);
		}
	while ((ret = freeBatchID(eng, id)) == 4 && ms++ < WAIT_MS)
		sleep_ms(1);
	if (ret)
		FUZZ_DIE("freeBatchID of a finished batch: %d", ret);
}

static void allocate(struct in *in)
{
	uint64_t size = u64(in);
	batch_id_t id;
	unsigned slot = u8(in) % BATCHES;

	if (size > 64 && size <= MAX_CAP) /* memory of its own, kept small */
		size = 1 + size % 64;
	id = allocateBatchID(eng, size);
	if ((id == INVALID_BATCH) != (size == 0 || size > MAX_CAP))
		FUZZ_DIE("allocateBatchID(%llu): %llx",
			 (unsigned long long)size, (unsigned long long)id);
	if (id == INVALID_BATCH)
		return;
	if (batch[slot] != INVALID_BATCH)
		drop_batch(batch[slot]);
	batch[slot] = id;
}

static void submit(struct in *in, bool notify)
{
	transfer_request_t r[LIST];
	notify_msg_t note;
	char name[32], msg[32];
	batch_id_t id = batch_arg(in);
	size_t n = u8(in) % (LIST + 1), count = n;
	bool big = u8(in) & 1;
	int ret;

	for (size_t i = 0; i < n; i++)
		request(in, &r[i]);
	if (big)
		count = huge(in);
	if (notify) {
		note.name = str(in, name);
		note.msg = str(in, msg);
		ret = submitTransferWithNotify(eng, id, n ? r : NULL, count,
					       note);
	} else {
		ret = submitTransfer(eng, id, n ? r : NULL, count);
	}
	if (ret != 0 && ret != 1 && ret != 2 && ret != 4 && ret != 302)
		FUZZ_DIE("submit: status %d", ret);
	if (big && ret != 1 && ret != 2)
		FUZZ_DIE("submit of %zu requests: status %d", count, ret);
}

static void status(struct in *in)
{
	struct transfer_status st;
	batch_id_t id = batch_arg(in);
	uint8_t k = u8(in);
	size_t task = k & 1 ? (size_t)u64(in) : k >> 1;
	int ret = getTransferStatus(eng, id, task, k & 2 ? NULL : &st);

	if (ret != 0 && ret != 1)
		FUZZ_DIE("getTransferStatus: %d", ret);
}

static void free_batch(struct in *in)
{
	unsigned slot = u8(in) % BATCHES;
	batch_id_t id = u8(in) & 1 ? batch[slot] : batch_arg(in);
	int ret = freeBatchID(eng, id);

	if (ret != 0 && ret != 1 && ret != 4)
		FUZZ_DIE("freeBatchID: %d", ret);
	for (unsigned i = 0; !ret && i < BATCHES; i++)
		if (batch[i] == id)
			batch[i] = INVALID_BATCH;
}

static void reg(struct in *in)
{
	buffer_entry_t l[LIST];
	char loc[32];
	size_t n = u8(in) % (LIST + 1), count = n;
	bool big = u8(in) & 1;
	char *where = str(in, loc);
	int ret;

	for (size_t i = 0; i < n; i++)
		l[i].addr = in_area(in, area, &l[i].length);
	if (n == 1 && !big) {
		ret = registerLocalMemory(eng, l[0].addr, l[0].length, where,
					  u8(in) & 1);
	} else {
		if (big)
			count = SIZE_MAX / sizeof(*l) + 1 + u8(in) % 4;
		ret = registerLocalMemoryBatch(eng, n ? l : NULL, count,
					       where);
	}
	if (big && !ret)
		FUZZ_DIE("registerLocalMemoryBatch of %zu buffers took them",
			 count);
	for (size_t i = 0; !ret && i < n && nregs < REGS; i++)
		regs[nregs++] = l[i].addr;
}

static void unreg(struct in *in)
{
	void *v[LIST];
	size_t n = u8(in) % (LIST + 1);

	for (size_t i = 0; i < n; i++) {
		uint8_t k = u8(in);

		v[i] = nregs && k < 128 ? regs[k % nregs] :
		       k & 1 ? in_area(in, area, NULL) :
			       (void *)(uintptr_t)u64(in);
	}
	unregisterLocalMemoryBatch(eng, n ? v : NULL, n);
}

static void notifs(struct in *in)
{
	int size = -1;
	notify_msg_t *v = getNotifsFromEngine(eng, u8(in) & 1 ? NULL : &size);

	freeNotifsMsgBuf(v, v ? size : 0);
}

static void gen_notify(struct in *in)
{
	char name[32], msg[32];
	uint8_t k = u8(in);
	uint64_t target = k & 1 ? u64(in) : (uint64_t)seg_arg(in);
	notify_msg_t note = { str(in, name), str(in, msg) };

	genNotifyInEngine(eng, target, note);
}

static void ip_port(struct in *in)
{
	char buf[64];
	uint8_t k = u8(in);

	if (!getLocalIpAndPort(eng, k & 1 ? NULL : buf, (k >> 1) % 65) &&
	    (k >> 1) % 65 && strnlen(buf, 64) >= (k >> 1) % 65u)
		FUZZ_DIE("getLocalIpAndPort wrote past its length");
}

/* A NULL engine everywhere: refused. */
static void null_engine(void)
{
	transfer_request_t r = { 0 };
	struct transfer_status st;
	notify_msg_t note = { NULL, NULL };
	int size = 3;

	if (submitTransfer(NULL, 0, &r, 1) != 1 ||
	    submitTransfer(NULL, 0, &r, SIZE_MAX) != 1 ||
	    getTransferStatus(NULL, 0, 0, &st) != 1 ||
	    freeBatchID(NULL, 0) != 1 ||
	    allocateBatchID(NULL, 1) != INVALID_BATCH ||
	    registerLocalMemoryBatch(NULL, NULL, SIZE_MAX, NULL) != -1 ||
	    getNotifsFromEngine(NULL, &size) || size != 0 ||
	    genNotifyInEngine(NULL, 0, note) != -1)
		FUZZ_DIE("a NULL engine was not refused");
}

/* An engine peer to peer on 127.0.0.1, and AREA_LEN bytes in *@p mem. */
static transfer_engine_t engine(uint8_t **mem)
{
	transfer_engine_t e = createTransferEngine("P2PHANDSHAKE", "127.0.0.1",
						   NULL, 0, 0);

	*mem = mmap(NULL, AREA_LEN, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!e || *mem == MAP_FAILED)
		FUZZ_DIE("engine: %s", strerror(errno));
	return e;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char name[64];

	(void)argc;
	(void)argv;
	fuzz_quiet();
	eng = engine(&area);
	peer = engine(&peer_area);
	if (registerLocalMemory(peer, peer_area, AREA_LEN, "cpu:0", 1) ||
	    getLocalIpAndPort(peer, name, sizeof(name)))
		FUZZ_DIE("peer");
	peer_seg = openSegment(eng, name);
	if (peer_seg <= 0)
		FUZZ_DIE("openSegment(%s): %d", name, peer_seg);
	for (int i = 0; i < BATCHES; i++)
		batch[i] = INVALID_BATCH;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct in in = { data, size };
	int calls = 0;

	while (in.n && calls++ < 64) {
		switch (u8(&in) % 13) {
		case 0: allocate(&in); break;
		case 1: submit(&in, false); break;
		case 2: submit(&in, true); break;
		case 3: status(&in); break;
		case 4: free_batch(&in); break;
		case 5: reg(&in); break;
		case 6: unreg(&in); break;
		case 7: notifs(&in); break;
		case 8: gen_notify(&in); break;
		case 9: ip_port(&in); break;
		case 10: /* any id but those the next inputs use */
			closeSegment(eng, (segment_id_t)u64(&in) | 1 << 30);
			break;
		case 11: syncSegmentCache(eng); break;
		default: null_engine(); break;
		}
	}
	for (int i = 0; i < BATCHES; i++) {
		if (batch[i] != INVALID_BATCH)
			drop_batch(batch[i]);
		batch[i] = INVALID_BATCH;
	}
	unregisterLocalMemoryBatch(eng, nregs ? regs : NULL, nregs);
	nregs = 0;
	notifs(&(struct in){ NULL, 0 });
	return 0;
}
