/*
 * The TCP transport's target side (transports/tcp/server.c): the bytes a
 * peer sends on a data connection (24-byte headers, WRITE payloads,
 * pipelined, v1 and v2), through a socketpair to the real server code on
 * a reactor of its own, driven here without a thread.
 *
 * The first input byte says whether a cluster secret is set (bit 0: the
 * peer must then pass the challenge-response of util/auth_sock.c first,
 * which the fuzzer's bytes meet as they are); the rest is what the peer
 * sends.
 *
 * The local segment holds two buffers at fixed addresses, so that seeds
 * can name them: RW (64 KiB, remotely accessible) and PRIV (4 KiB, not
 * remotely accessible), each between inaccessible guard pages, so a
 * read or write out of bounds faults at once. After each input the
 * connection must be closed (the fuzzer shuts its write side) and every
 * use it took of a buffer given back.
 */
#include <string.h>
#include <sys/mman.h>

#include <event2/event.h>

#include "util/auth_internal.h"
#include "transports/tcp/tcp_internal.h"
#include "test/fuzz/fuzz.h"

#define AREA     0x7e0000000000ull /* clear of ASan's shadow and heap */
#define AREA_LEN 0x40000ull
#define RW       (AREA + 0x10000)  /* 64 KiB, guards at both ends */
#define RW_LEN   0x10000ull
#define PRIV     (AREA + 0x30000)  /* 4 KiB, not remotely accessible */
#define PRIV_LEN 0x1000ull

static struct xfer_reactor reactor;
static struct xfer_buffers buffers;
static struct xfer_buffer *rw, *priv;
/* [0] without a secret, [1] with one */
static struct xfer_transport_env env[2];
static struct tcp_transport tp[2];

static struct xfer_reactor *worker(void *arg)
{
	(void)arg;
	return &reactor;
}

static struct xfer_buffer *add(uint64_t addr, uint64_t len, bool remote)
{
	struct xfer_buffer *b = xfer_buffer_new(addr, len, "cpu:0", remote);

	if (!b || mprotect((void *)(uintptr_t)addr, len,
			   PROT_READ | PROT_WRITE) ||
	    xfer_buffers_insert(&buffers, b))
		FUZZ_DIE("buffer at 0x%llx", (unsigned long long)addr);
	return b;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	void *area;

	(void)argc;
	(void)argv;
	fuzz_quiet();
	area = mmap((void *)(uintptr_t)AREA, AREA_LEN, PROT_NONE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (area != (void *)(uintptr_t)AREA)
		FUZZ_DIE("mmap at 0x%llx: %s", AREA, strerror(errno));
	if (xfer_reactor_init(&reactor, NULL, "fuzz"))
		FUZZ_DIE("reactor");
	xfer_buffers_init(&buffers);
	rw = add(RW, RW_LEN, true);
	priv = add(PRIV, PRIV_LEN, false);
	for (int i = 0; i < 2; i++) {
		env[i] = (struct xfer_transport_env){
			.name = "fuzz",
			.control = &reactor,
			.worker = worker,
			.buffers = &buffers,
			.max_conns = 4,
			.max_new_conns = 4,
			.max_conns_per_addr = 4,
			.auth_timeout_ms = 2000,
			.auth = i ? xfer_auth_new("xfer-fuzz-secret") : NULL,
		};
		if (i && !env[i].auth)
			FUZZ_DIE("xfer_auth_new");
		tp[i].base.env = &env[i];
		pthread_mutex_init(&tp[i].lock, NULL);
		xfer_sstream_table_init(&tp[i].sconns, "tcp");
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tcp_transport *t;
	int sv[2];
	size_t off = 0;
	bool shut = false, open = true;

	if (!size)
		return 0;
	t = &tp[data[0] & 1];
	data++;
	size--;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		FUZZ_DIE("socketpair: %s", strerror(errno));
	xfer_tcp_server_accept(t, sv[1]);
	while (open || xfer_sstream_any(&t->sconns)) {
		if (!fuzz_write_some(sv[0], data, size, &off))
			off = size; /* the server is gone */
		if (off == size && !shut) {
			shutdown(sv[0], SHUT_WR);
			shut = true;
		}
		event_base_loop(reactor.base, EVLOOP_NONBLOCK);
		if (open)
			open = fuzz_drain(sv[0]);
	}
	close(sv[0]);
	if (atomic_load(&rw->users) || atomic_load(&priv->users))
		FUZZ_DIE("a closed connection holds a buffer: %ld, %ld uses",
			 (long)atomic_load(&rw->users),
			 (long)atomic_load(&priv->users));
	return 0;
}
