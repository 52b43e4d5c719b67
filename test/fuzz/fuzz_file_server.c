/*
 * The file transport's data port (transports/file/server.c, PROTOCOL.md
 * §5): the bytes a peer sends (24-byte headers, WRITE payloads,
 * pipelined), through a socketpair to the real server code and its file
 * I/O engine on a reactor of its own, driven here without a thread:
 * io_uring's completions come through an eventfd on that reactor (where
 * io_uring cannot be had, the engine falls back to its worker thread).
 *
 * The first input byte: bit 0, a cluster secret is set (the peer must
 * then pass the challenge-response of util/auth_sock.c first, which the
 * fuzzer's bytes meet as they are); bit 1, the peer closes its socket
 * once its bytes are out, without reading a reply (else it shuts its
 * write side and reads every reply). The rest is what the peer sends.
 *
 * The own segment is two real files in a folder of their own, unlinked
 * once registered: A, 64 KiB at [0, 0x10000), and B, 4 KiB long but
 * registered as 16 KiB at [0x10000, 0x14000), so a read past 0x11000
 * meets the end of the file (ENODATA) and a write there grows it; B is
 * cut back to 4 KiB after each input. After each input the connection
 * must be closed and every reference it took of a file given back.
 */
#include <fcntl.h>
#include <signal.h>
#include <string.h>

#include <event2/event.h>

#include "util/auth_internal.h"
#include "transports/file/file_internal.h"
#include "test/fuzz/fuzz.h"

#define A_LEN  0x10000ull
#define B_SIZE 0x1000ull          /* its bytes */
#define B_LEN  0x4000ull          /* as registered */

static struct xfer_reactor reactor;
static struct xfer_error err;
/* [0] without a secret, [1] with one */
static struct xfer_transport_env env[2];
static struct file_transport t;
static union xfer_knob_val knobs[K_BOUNCE + 1];
static int b_fd;                  /* B, to cut it back */

static struct xfer_reactor *worker(void *arg)
{
	(void)arg;
	return &reactor;
}

/* A write the server makes without MSG_NOSIGNAL to a peer that is gone
 * would kill the process with no report: make it a crash. */
static void on_sigpipe(int sig)
{
	static const char msg[] = "fuzz: SIGPIPE: the server wrote to a "
				  "closed peer without MSG_NOSIGNAL\n";
	ssize_t n = write(2, msg, sizeof(msg) - 1);

	(void)sig;
	(void)n;
	abort();
}

/* File @p name of @p size bytes in @p dir, its bytes @p fill, registered
 * as @p length (0: its size); @return an fd of the harness's own. */
static int add(const char *dir, const char *name, uint64_t size,
	       uint64_t length, uint8_t fill)
{
	static uint8_t buf[A_LEN];
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	memset(buf, fill, sizeof(buf));
	if (fd < 0 || size > sizeof(buf) ||
	    write(fd, buf, size) != (ssize_t)size)
		FUZZ_DIE("file %s: %s", path, strerror(errno));
	if (xfer_file_add(&t, path, length, NULL) != 1)
		FUZZ_DIE("register %s: %s", path, err.msg);
	unlink(path); /* nothing left behind, whatever way the run ends */
	return fd;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *tmp = getenv("TMPDIR");
	char dir[256];

	(void)argc;
	(void)argv;
	fuzz_quiet();
	signal(SIGPIPE, on_sigpipe);
	/* memory where there is some: the I/O is then the page cache's */
	snprintf(dir, sizeof(dir), "%s/xfer-fuzz-file.XXXXXX",
		 !access("/dev/shm", W_OK) ? "/dev/shm" : tmp ? tmp : "/tmp");
	if (!mkdtemp(dir))
		FUZZ_DIE("mkdtemp %s: %s", dir, strerror(errno));
	if (xfer_reactor_init(&reactor, NULL, "fuzz"))
		FUZZ_DIE("reactor");
	xfer_error_init(&err);
	for (int i = 0; i < 2; i++) {
		env[i] = (struct xfer_transport_env){
			.name = "fuzz",
			.idle_timeout_ms = 300000,
			.transfer_timeout_ms = 30000,
			.control = &reactor,
			.worker = worker,
			.max_conns = 4,
			.max_new_conns = 4,
			.max_conns_per_addr = 4,
			.auth_timeout_ms = 2000,
			.err = &err,
			.auth = i ? xfer_auth_new("xfer-fuzz-secret") : NULL,
		};
		if (i && !env[i].auth)
			FUZZ_DIE("xfer_auth_new");
	}
	/* file.c's init, less the listener: the hook below accepts; one
	 * piece of bounce memory */
	knobs[K_BOUNCE].num = XFER_FILE_PIECE;
	t.k = knobs;
	t.base.env = &env[0];
	t.r = &reactor;
	pthread_mutex_init(&t.lock, NULL);
	pthread_cond_init(&t.reads_done, NULL);
	TAILQ_INIT(&t.files);
	xfer_sstream_table_init(&t.sconns, "file");
	SLIST_INIT(&t.rpeers);
	t.in_tail = &t.in_head;
	if (xfer_fio_new(&reactor, 64, false, &t.fio) ||
	    xfer_file_server_init(&t))
		FUZZ_DIE("xfer_fio_new");
	close(add(dir, "a", A_LEN, 0, 0xa5));
	b_fd = add(dir, "b", B_SIZE, B_LEN, 0x5b);
	rmdir(dir);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct own_file *f;
	bool hangup, shut = false;
	size_t off = 0;
	int sv[2];

	if (!size)
		return 0;
	t.base.env = &env[data[0] & 1]; /* no connection is open here */
	hangup = data[0] & 2;
	data++;
	size--;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
		       sv))
		FUZZ_DIE("socketpair: %s", strerror(errno));
	xfer_file_server_accept(&t, sv[1]);
	/* sv[0] is -1 once the peer closed or saw the server close */
	while (sv[0] >= 0 || xfer_sstream_any(&t.sconns)) {
		if (sv[0] >= 0 && !fuzz_write_some(sv[0], data, size, &off))
			off = size; /* the server is gone */
		if (sv[0] >= 0 && off == size && !shut) {
			if (hangup) {
				close(sv[0]);
				sv[0] = -1;
			} else {
				shutdown(sv[0], SHUT_WR);
			}
			shut = true;
		}
		event_base_loop(reactor.base, EVLOOP_NONBLOCK);
		if (sv[0] >= 0 && !fuzz_drain(sv[0])) {
			close(sv[0]);
			sv[0] = -1;
		}
	}
	if (t.sconns.n)
		FUZZ_DIE("%u connections counted, none listed", t.sconns.n);
	TAILQ_FOREACH(f, &t.files, link)
		if (atomic_load(&f->fo->refs) != 1)
			FUZZ_DIE("a closed connection holds %s: %ld references",
				 f->fo->path, (long)atomic_load(&f->fo->refs));
	/* B as it was: the end of the file where it was */
	if (ftruncate(b_fd, (off_t)B_SIZE))
		FUZZ_DIE("ftruncate: %s", strerror(errno));
	return 0;
}
