/*
 * What the asynchronous-call tests share: peers that are slow on purpose,
 * each a thread of the test process on 127.0.0.1 — a handshake server that
 * answers late, a TCP relay that moves bytes slowly, and an HTTP metadata
 * server that stalls every answer.
 */
#ifndef XFER_TEST_TH_ASYNC_H
#define XFER_TEST_TH_ASYNC_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* A thread serving one listener until stopped. */
struct th_server {
	int lfd, stop[2];
	uint16_t port;
	atomic_int delay_ms;          /* may change while it runs */
	atomic_int served;
	pthread_t th;
};

/** A handshake server answering every request, after @p delay_ms, with
 *  its type byte and @p reply (kept by the caller). */
struct th_fake_hs {
	struct th_server s;
	const char *reply;
};

void th_fake_hs_start(struct th_fake_hs *f, const char *reply, int delay_ms);
void th_fake_hs_stop(struct th_fake_hs *f);

/** A relay from its own port to 127.0.0.1:@p to that forwards at most
 *  @p bytes_per_ms in each direction. */
struct th_proxy {
	struct th_server s;
	uint16_t to;
	size_t bytes_per_ms;
};

void th_proxy_start(struct th_proxy *p, uint16_t to, size_t bytes_per_ms);
void th_proxy_stop(struct th_proxy *p);

/** An HTTP metadata server that answers each request after @p delay_ms:
 *  200 to PUT and DELETE, 404 to anything else; one request a
 *  connection, each on a thread of its own. */
struct th_slow_http {
	struct th_server s;
	atomic_int busy;             /* requests being served */
};

void th_slow_http_start(struct th_slow_http *h, int delay_ms);
void th_slow_http_stop(struct th_slow_http *h);

/** The JSON a Metadata request to @p rpc_port gets, with
 *  "tcp_data_port" set to @p data_port (0: kept); malloc'd. */
char *th_desc_json(uint16_t rpc_port, uint16_t data_port);

#endif
