#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "helpers.h"

struct xfer_engine *th_engine(int workers)
{
	struct xfer_config cfg;
	struct xfer_engine *e;

	assert_int_equal(xfer_config_init(&cfg), 0);
	cfg.bind_addr = "127.0.0.1";
	cfg.local_server_name = "127.0.0.1";
	cfg.rpc_port = 0;
	cfg.workers = workers;
	e = xfer_engine_new(&cfg);
	assert_non_null(e);
	return e;
}

static uint8_t pattern_byte(uint64_t seed, size_t i)
{
	uint64_t x = (seed + 1) * 0x9E3779B97F4A7C15ull ^ (i * 0xBF58476D1CE4E5B9ull);

	return (uint8_t)(x >> 56 ^ x >> 13 ^ i);
}

void th_fill(void *buf, size_t len, uint64_t seed)
{
	uint8_t *p = buf;

	for (size_t i = 0; i < len; i++)
		p[i] = pattern_byte(seed, i);
}

long th_check(const void *buf, size_t len, uint64_t seed)
{
	const uint8_t *p = buf;

	for (size_t i = 0; i < len; i++)
		if (p[i] != pattern_byte(seed, i))
			return (long)i;
	return -1;
}

int th_connect(uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

uint16_t th_name_port(const char *name)
{
	const char *colon = strrchr(name, ':');

	assert_non_null(colon);
	return (uint16_t)atoi(colon + 1);
}
