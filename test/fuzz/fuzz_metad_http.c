/*
 * xfer-metad's request handling (metadata/metad/http.c on evhttp, over
 * the store of store.c): the bytes a client sends on one connection,
 * one or more pipelined HTTP requests, to a fresh server on 127.0.0.1
 * holding a few keys. The fuzzer sends them, shuts its write side and
 * runs the server's base until the server closes the connection (or a
 * second passes: a held watch answers with its timer).
 */
#include <string.h>
#include <signal.h>
#include <time.h>
#include <netinet/in.h>

#include <event2/event.h>

#include "metadata/metad/http_internal.h"
#include "metadata/metad/store_internal.h"
#include "test/fuzz/fuzz.h"

#define GIVE_UP_MS 1000

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void put(struct metad_store *s, const char *key, const char *val)
{
	size_t len = strlen(val);
	uint8_t *v = malloc(len + 1);

	if (!v)
		FUZZ_DIE("malloc");
	memcpy(v, val, len + 1);
	if (metad_store_put(s, key, v, len))
		FUZZ_DIE("put %s", key);
}

static int connect_to(uint16_t port)
{
	struct sockaddr_in sin = {
		.sin_family = AF_INET,
		.sin_port = htons(port),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || fuzz_connect(fd, (struct sockaddr *)&sin, sizeof(sin)))
		FUZZ_DIE("connect: %s", strerror(errno));
	return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* small limits, so that a request can reach them */
	static const struct metad_limits limits = {
		.value_bytes = 4096, .keys = 8, .bytes = 16384,
	};
	/* close with a reset: no TIME_WAIT left behind per input */
	const struct linger rst = { .l_onoff = 1, .l_linger = 0 };
	struct event_base *base = event_base_new();
	struct metad_store *s;
	struct metad_http *h;
	char err[256];
	size_t off = 0;
	bool shut = false;
	uint16_t port;
	int64_t end;
	int fd;

	s = metad_store_open(NULL, &limits, err, sizeof(err));
	if (!base || !s)
		FUZZ_DIE("setup: %s", err);
	put(s, "mooncake/ram/a", "{\"name\":\"a\"}");
	put(s, "mooncake/rpc_meta/a", "{}");
	put(s, "k", "");
	h = metad_http_new(base, s, "/metadata");
	if (!h || metad_http_bind(h, "127.0.0.1", 0, &port))
		FUZZ_DIE("server: %s", strerror(errno));
	fd = connect_to(port);
	end = now_ms() + GIVE_UP_MS;
	while (now_ms() < end) {
		if (!fuzz_write_some(fd, data, size, &off))
			off = size; /* the server closed on us */
		if (off == size && !shut) {
			shutdown(fd, SHUT_WR);
			shut = true;
		}
		event_base_loop(base, EVLOOP_NONBLOCK);
		if (!fuzz_drain(fd))
			break;
	}
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &rst, sizeof(rst));
	close(fd);
	event_base_loop(base, EVLOOP_NONBLOCK);
	metad_http_free(h);
	metad_store_free(s);
	event_base_free(base);
	return 0;
}
