/*
 * What the hardening tests (test/it_harden*.c: hostile peers, exhausted
 * resources, peer authentication) share: engines with extra keys, CPU and
 * memory of a process, stderr counted while a test runs, a child process
 * that holds connections, xfer-metad started with a lower fd limit, and
 * the good transfer that proves an engine still serves.
 */
#ifndef XFER_TEST_TH_HARDEN_H
#define XFER_TEST_TH_HARDEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct xfer_engine;

/**
 * A p2p engine as th_engine() (127.0.0.1, free ports, @p workers), with
 * the extra keys @p kv: key, value pairs ended by a NULL key (NULL: none).
 * Fails the test (cmocka) if a key is refused or the engine cannot be
 * made.
 */
struct xfer_engine *hd_engine(int workers, const char *const *kv);

/** User plus system CPU seconds used so far by process @p pid (0: this
 *  one), from /proc; -1 if it cannot be read. */
double hd_cpu_seconds(pid_t pid);

/** Resident memory of process @p pid (0: this one) in KiB (VmRSS), or
 *  -1. */
long hd_rss_kib(pid_t pid);

/** Descriptors this process has open (entries of /proc/self/fd), or -1. */
int hd_fd_count(void);

/** The RLIMIT_NOFILE that leaves this process @p spare more descriptors
 *  (new ones take the lowest free numbers; the limit caps the number). */
int hd_nofile_for(int spare);

/** Set this process's soft RLIMIT_NOFILE to @p n (fails the test if not);
 *  @return the soft limit it had. hd_teardown() puts back the first. */
long hd_set_nofile(long n);

/**
 * Count what is written to stderr from now on, in a thread that drains a
 * pipe put in its place (so a writer never blocks on it): every line, and
 * those that contain @p match (copied, up to 63 bytes). Lines that do not
 * match, and the first few that do, are passed on to the real stderr.
 */
void hd_capture_start(const char *match);

/** Stop counting, put stderr back. @p lines, @p matched (if not NULL) get
 *  the counts; @return the bytes seen (0 if not counting). */
long hd_capture_stop(long *lines, long *matched);

/** cmocka teardown of a test that may fail while stderr is counted or
 *  the fd limit lowered: puts both back. */
int hd_teardown(void **state);

/**
 * A child process that, once hd_holder_go() says so, connects @p n times
 * to 127.0.0.1:@p port (writing the @p first_len bytes at @p first on
 * each connection, if any), then holds the connections until
 * hd_holder_stop(); it reads nothing. At most 8 at once. @return its pid.
 */
pid_t hd_holder_new(uint16_t port, int n, const void *first,
		    size_t first_len);

/** hd_holder_new() whose connections come from the numeric IPv4 address
 *  @p src (any of 127.0.0.0/8 on loopback; NULL: the kernel's choice). */
pid_t hd_holder_new_from(const char *src, uint16_t port, int n,
			 const void *first, size_t first_len);

/** Let holder @p pid connect; returns once it has tried every
 *  connection. @return how many it made. */
int hd_holder_go(pid_t pid);

/** hd_holder_new() and hd_holder_go(); *@p made (if not NULL) gets how
 *  many connections it made. */
pid_t hd_holder_start(uint16_t port, int n, const void *first,
		      size_t first_len, int *made);

/** Make the holder close its connections and exit; reap it. */
void hd_holder_stop(pid_t pid);

/**
 * Start build/xfer-metad (--port 0) with its soft RLIMIT_NOFILE at
 * @p nofile (0: unchanged); with @p match, its stderr goes to a thread
 * that counts the lines holding @p match (else stderr is ours). @return
 * its pid; its port in *@p port. One at a time.
 */
pid_t hd_metad_start(long nofile, const char *match, uint16_t *port);

/** The lines of xfer-metad's stderr that matched so far; its bytes in
 *  *@p bytes if not NULL. */
long hd_metad_lines(long *bytes);

/** SIGTERM, reap, remove its scratch folder. */
void hd_metad_stop(pid_t pid);

/**
 * A fresh engine with keys @p kv opens the segment @p name and WRITEs
 * then READs 64 KiB + 1 at @p addr (which must lie in a buffer of that
 * segment), every byte checked against @p mem (the target's memory at
 * @p addr, in this process).
 */
void hd_good_transfer(const char *name, uint64_t addr, const uint8_t *mem,
		      const char *const *kv);

/**
 * The client's half of the challenge-response (PROTOCOL.md §6) on the
 * connected socket @p fd with @p secret: hello, challenge, proof, as raw
 * bytes (a data port) or in frames of type 0xC1 (@p framed: the
 * handshake port). @return 0, -EACCES if the server's proof is wrong,
 * -EPROTO for a malformed challenge, or another -errno.
 */
int hd_raw_auth(int fd, const char *secret, bool framed);

/** A Probe on the handshake port @p port answered "success" within
 *  @p ms (one try at least; connections may fail meanwhile). */
bool hd_probe_ok(uint16_t port, int ms);

/**
 * A sparse file of @p len bytes in a new folder under /var/tmp (O_DIRECT
 * works there): its path into @p path (@p size bytes). hd_scratch_rm()
 * removes both.
 */
void hd_scratch_file(char *path, size_t size, uint64_t len);
void hd_scratch_rm(const char *path);

/** Is @p fd closed by its peer (EOF or reset), without waiting? Bytes
 *  that arrived are read and dropped. */
bool hd_peer_closed(int fd);

#endif
