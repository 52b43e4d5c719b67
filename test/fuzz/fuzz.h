/*
 * What the libFuzzer targets of test/fuzz/ share. Each target is one
 * fuzz_<name>.c with LLVMFuzzerTestOneInput(), its seeds in
 * corpus/<name>/; mk/fuzz.mk builds them with clang and
 * -fsanitize=fuzzer,address,undefined against objects of their own.
 */
#ifndef XFER_TEST_FUZZ_H
#define XFER_TEST_FUZZ_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* A failure of the harness itself, not of the code under test. */
#define FUZZ_DIE(...) do { \
	fprintf(stderr, "fuzz: " __VA_ARGS__); \
	fputc('\n', stderr); \
	abort(); \
} while (0)

/* Keep the library's warnings (every refused input logs one) off the
 * fuzzer's output: errors only. */
static inline void fuzz_quiet(void)
{
	setenv("XFER_LOG_LEVEL", "error", 1);
}

/* Connect @p fd, whatever signals come meanwhile (libFuzzer's -timeout
 * is a SIGALRM each second). @return 0, or -1 with errno. */
static inline int fuzz_connect(int fd, const struct sockaddr *sa,
			       socklen_t len)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	socklen_t elen = sizeof(int);
	int err = 0;

	if (!connect(fd, sa, len))
		return 0;
	if (errno != EINTR && errno != EINPROGRESS)
		return -1;
	while (poll(&p, 1, -1) < 0)
		if (errno != EINTR)
			return -1;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) || err) {
		errno = err ? err : errno;
		return -1;
	}
	return 0;
}

/* Write what a non-blocking @p fd takes now of [*off, len); returns
 * false once the peer is gone. */
static inline int fuzz_write_some(int fd, const uint8_t *data, size_t len,
				  size_t *off)
{
	ssize_t n;

	if (*off >= len)
		return 1;
	n = send(fd, data + *off, len - *off, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n > 0)
		*off += (size_t)n;
	return n >= 0 || errno == EAGAIN || errno == EINTR;
}

/* Read and drop what is there on a non-blocking @p fd. @return 1 while
 * the peer is open, 0 once it closed (EOF or reset). */
static inline int fuzz_drain(int fd)
{
	char buf[65536];
	ssize_t n;

	for (;;) {
		n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n > 0)
			continue;
		if (n == 0)
			return 0;
		return errno == EAGAIN || errno == EINTR;
	}
}

#endif
