/*
 * Mooncake Store's C API, written against store_c.h alone (and POSIX),
 * as its Go and Rust bindings call it: two stores in one process (one
 * lends a segment, one does not) against a real xfer-stored; put, get
 * into registered memory, batches, exist, size, leases, removal, the
 * host name, health, and NULL or bad arguments. Every byte read back is
 * checked.
 *
 *   capi_store [path of xfer-stored]   (default: beside this program's
 *                                        folder, ../xfer-stored)
 */
#include <arpa/inet.h>
#include <libgen.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "store_c.h"

#define MiB (1u << 20)
#define N 8

#define CHECK(c) do { if (!(c)) { \
	fprintf(stderr, "capi_store: %s:%d: failed: %s\n", __FILE__, \
		__LINE__, #c); \
	exit(1); } } while (0)

static uint16_t free_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(fd >= 0 && !bind(fd, (struct sockaddr *)&sa, sizeof(sa)) &&
	      !getsockname(fd, (struct sockaddr *)&sa, &len));
	close(fd);
	return ntohs(sa.sin_port);
}

static int serves(uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0), ok;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ok = !connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	close(fd);
	return ok;
}

static pid_t stored_start(const char *prog, uint16_t port)
{
	char flag[32];
	pid_t pid;

	snprintf(flag, sizeof(flag), "--port=%u", port);
	pid = fork();
	CHECK(pid >= 0);
	if (!pid) {
		freopen("/dev/null", "w", stdout);
		execl(prog, prog, flag, "--rpc_address=127.0.0.1",
		      "--metrics_port=0", (char *)0);
		_exit(127);
	}
	for (int i = 0; i < 1000 && !serves(port); i++)
		usleep(10000);
	CHECK(serves(port));
	return pid;
}

static void fill(uint8_t *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(i * 131 + seed * 7 + (i >> 9));
}

static int same(const uint8_t *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != (uint8_t)(i * 131 + seed * 7 + (i >> 9)))
			return 0;
	return 1;
}

int main(int argc, char **argv)
{
	char self[4096], prog[4200], master[32], host[64];
	mooncake_replicate_config_t rc = { .replica_num = 1 };
	const char *keys[N + 1];
	char names[N + 1][8];
	void *bufs[N];
	size_t sizes[N];
	int res[N + 1];
	int64_t got[N];
	uint8_t *src, *dst;
	mooncake_store_t a, b;
	uint16_t port;
	pid_t pid;

	signal(SIGPIPE, SIG_IGN);
	if (argc > 1) {
		snprintf(prog, sizeof(prog), "%s", argv[1]);
	} else {
		ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

		CHECK(n > 0);
		self[n] = 0;
		snprintf(prog, sizeof(prog), "%s/../xfer-stored",
			 dirname(self));
	}
	port = free_port();
	pid = stored_start(prog, port);
	snprintf(master, sizeof(master), "127.0.0.1:%u", port);

	a = mooncake_store_create();
	b = mooncake_store_create();
	CHECK(a && b);
	CHECK(mooncake_store_health_check(a) == 1);       /* not set up */
	CHECK(mooncake_store_put(a, "k", "v", 1, NULL) == -1);
	CHECK(mooncake_store_setup(a, "127.0.0.1", "P2PHANDSHAKE", 32 * MiB,
				   16 * MiB, "tcp", "", master) == 0);
	CHECK(mooncake_store_setup(a, "127.0.0.1", NULL, 32 * MiB, 0, NULL,
				   NULL, master) == -600);
	CHECK(mooncake_store_setup(b, "127.0.0.1", "P2PHANDSHAKE", 0, MiB,
				   "tcp", NULL, master) == 0);
	CHECK(mooncake_store_health_check(a) == 0);
	CHECK(mooncake_store_get_hostname(a, host, sizeof(host)) == 0);
	CHECK(!strncmp(host, "127.0.0.1:", 10));
	CHECK(mooncake_store_get_hostname(a, host, 4) == -1);

	/* a put staged by one, read zero-copy by the other */
	src = malloc(4 * MiB);
	dst = malloc(4 * MiB);
	CHECK(src && dst);
	fill(src, MiB, 1);
	CHECK(mooncake_store_put(a, "k", src, MiB, &rc) == 0);
	CHECK(mooncake_store_is_exist(b, "k") == 1);
	CHECK(mooncake_store_get_size(b, "k") == MiB);
	CHECK(mooncake_store_register_buffer(b, dst, 4 * MiB) == 0);
	CHECK(mooncake_store_register_buffer(b, dst, MiB) == -600);
	CHECK(mooncake_store_get_into(b, "k", dst, 4 * MiB) == MiB);
	CHECK(same(dst, MiB, 1));
	CHECK(mooncake_store_get_into(b, "k", dst, 100) == -600);
	CHECK(mooncake_store_get_into(b, "none", dst, 100) == -704);
	CHECK(mooncake_store_remove(b, "k", 0) == -706);  /* leased */
	CHECK(mooncake_store_remove(b, "k", 1) == 0);
	CHECK(mooncake_store_is_exist(a, "k") == 0);

	/* batches zero-copy, from b's registered memory into a's segment */
	fill(dst, 4 * MiB, 2);
	for (int i = 0; i <= N; i++) {
		snprintf(names[i], sizeof(names[i]), "b%d", i);
		keys[i] = names[i];
	}
	for (int i = 0; i < N; i++) {
		bufs[i] = dst + (size_t)i * 64 * 1024;
		sizes[i] = 64 * 1024 - (size_t)i;
	}
	CHECK(mooncake_store_batch_put_from(b, keys, bufs, sizes, N, &rc,
					    res) == 0);
	for (int i = 0; i < N; i++)
		CHECK(res[i] == 0);
	CHECK(mooncake_store_batch_is_exist(a, keys, N + 1, res) == 0);
	for (int i = 0; i < N; i++)
		CHECK(res[i] == 1);
	CHECK(res[N] == 0);
	memcpy(src, dst, (size_t)N * 64 * 1024);
	memset(dst, 0, (size_t)N * 64 * 1024);
	CHECK(mooncake_store_batch_get_into(b, keys, bufs, sizes, N, got) ==
	      0);
	for (int i = 0; i < N; i++) {
		CHECK(got[i] == (int64_t)sizes[i]);
		CHECK(!memcmp(bufs[i], src + (size_t)i * 64 * 1024, sizes[i]));
	}
	CHECK(mooncake_store_batch_put_from(b, keys, bufs, sizes, 0, &rc,
					    res) == 0);
	CHECK(mooncake_store_batch_put_from(b, NULL, bufs, sizes, N, &rc,
					    res) == -1);
	CHECK(mooncake_store_remove_by_regex(a, "^b0$", 1) == 1);
	CHECK(mooncake_store_remove_by_regex(a, "(", 1) == -600);
	CHECK(mooncake_store_remove_by_regex(a, NULL, 1) == -1);
	CHECK(mooncake_store_remove_all(a, 1) == N - 1);
	CHECK(mooncake_store_unregister_buffer(b, dst) == 0);
	CHECK(mooncake_store_unregister_buffer(b, dst) == -600);

	/* NULL everywhere */
	CHECK(mooncake_store_health_check(NULL) == -1);
	CHECK(mooncake_store_is_exist(a, NULL) == -1);
	CHECK(mooncake_store_get_size(NULL, "k") == -1);
	CHECK(mooncake_store_remove_all(NULL, 0) == -1);
	mooncake_store_destroy(NULL);
	mooncake_store_destroy(b);
	mooncake_store_destroy(a);

	/* no master there */
	kill(pid, SIGTERM);
	CHECK(waitpid(pid, NULL, 0) == pid);
	a = mooncake_store_create();
	CHECK(mooncake_store_setup(a, "127.0.0.1", NULL, 0, 0, "tcp", NULL,
				   master) == -900);
	CHECK(mooncake_store_health_check(a) == 1);
	mooncake_store_destroy(a);
	free(src);
	free(dst);
	printf("capi_store: passed\n");
	return 0;
}
