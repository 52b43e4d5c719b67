/* Slow peers for the asynchronous-call tests (th_async.h). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test/helpers.h"
#include "test/th_async.h"

#define PROXY_PAIRS 16

/* Wait @p ms unless the server is stopped. @return true if stopped. */
static bool nap(struct th_server *s, int ms)
{
	struct pollfd p = { .fd = s->stop[0], .events = POLLIN };

	return poll(&p, 1, ms) > 0;
}

/* The next connection, or -1 once stopped. */
static int next_conn(struct th_server *s)
{
	struct pollfd p[2] = {
		{ .fd = s->lfd, .events = POLLIN },
		{ .fd = s->stop[0], .events = POLLIN },
	};

	while (poll(p, 2, -1) < 0 && errno == EINTR)
		;
	if (p[1].revents)
		return -1;
	return accept(s->lfd, NULL, NULL);
}

static void server_start(struct th_server *s, int delay_ms,
			 void *(*fn)(void *), void *arg)
{
	s->lfd = th_listen(&s->port);
	atomic_store(&s->delay_ms, delay_ms);
	atomic_store(&s->served, 0);
	assert_int_equal(pipe(s->stop), 0);
	assert_int_equal(pthread_create(&s->th, NULL, fn, arg), 0);
}

static void server_stop(struct th_server *s)
{
	char one = 1;

	assert_int_equal(write(s->stop[1], &one, 1), 1);
	pthread_join(s->th, NULL);
	close(s->stop[0]);
	close(s->stop[1]);
	close(s->lfd);
}

/* ---- handshake ---- */

static void *hs_main(void *arg)
{
	struct th_fake_hs *f = arg;
	char *body;
	size_t len;
	int fd;

	while ((fd = next_conn(&f->s)) >= 0) {
		body = NULL;
		if (th_hs_recv(fd, &body, &len, 5000) == 0 && len &&
		    !nap(&f->s, atomic_load(&f->s.delay_ms))) {
			th_hs_send(fd, (uint8_t)body[0], f->reply,
				   strlen(f->reply));
			atomic_fetch_add(&f->s.served, 1);
		}
		free(body);
		close(fd);
	}
	return NULL;
}

void th_fake_hs_start(struct th_fake_hs *f, const char *reply, int delay_ms)
{
	f->reply = reply;
	server_start(&f->s, delay_ms, hs_main, f);
}

void th_fake_hs_stop(struct th_fake_hs *f)
{
	server_stop(&f->s);
}

/* ---- relay ---- */

/* Forward what @p from has, at most @p max bytes. @return -1 at EOF or an
 * error, else the bytes moved. */
static long relay(int from, int to, size_t max)
{
	static _Thread_local char buf[1 << 16];
	ssize_t n = recv(from, buf, max < sizeof(buf) ? max : sizeof(buf),
			 MSG_DONTWAIT);

	if (n == 0 || (n < 0 && errno != EAGAIN))
		return -1;
	if (n < 0)
		return 0;
	return th_send_all(to, buf, (size_t)n) ? -1 : n;
}

static void *proxy_main(void *arg)
{
	struct th_proxy *p = arg;
	struct pollfd pf[2 + 2 * PROXY_PAIRS];
	int fds[2 * PROXY_PAIRS], n = 0;

	for (;;) {
		pf[0] = (struct pollfd){ .fd = p->s.stop[0], .events = POLLIN };
		pf[1] = (struct pollfd){ .fd = p->s.lfd, .events = POLLIN };
		for (int i = 0; i < n; i++)
			pf[2 + i] = (struct pollfd){ .fd = fds[i],
						     .events = POLLIN };
		if (poll(pf, 2 + n, 1) < 0 && errno != EINTR)
			break;
		if (pf[0].revents)
			break;
		if ((pf[1].revents & POLLIN) && n + 2 <= 2 * PROXY_PAIRS) {
			fds[n] = accept(p->s.lfd, NULL, NULL);
			fds[n + 1] = th_connect(p->to);
			atomic_fetch_add(&p->s.served, 1);
			n += 2;
		}
		/* pairs: fds[2k] the client, fds[2k + 1] the target */
		for (int i = 0; i < n; i++)
			if ((pf[2 + i].revents & (POLLIN | POLLHUP | POLLERR)) &&
			    relay(fds[i], fds[i ^ 1], p->bytes_per_ms) < 0) {
				close(fds[i & ~1]);
				close(fds[i | 1]);
				memmove(&fds[i & ~1], &fds[(i & ~1) + 2],
					(n - (i & ~1) - 2) * sizeof(*fds));
				n -= 2;
				break;
			}
		nap(&p->s, 1);
	}
	for (int i = 0; i < n; i++)
		close(fds[i]);
	return NULL;
}

void th_proxy_start(struct th_proxy *p, uint16_t to, size_t bytes_per_ms)
{
	p->to = to;
	p->bytes_per_ms = bytes_per_ms;
	server_start(&p->s, 0, proxy_main, p);
}

void th_proxy_stop(struct th_proxy *p)
{
	server_stop(&p->s);
}

/* ---- HTTP ---- */

/* Read one request: headers, then Content-Length bytes of body. @return
 * whether it is a PUT or DELETE, -1 on failure. */
static int read_request(int fd)
{
	char buf[8192], *end, *cl;
	size_t got = 0;
	long body = 0, n;

	while (!(end = memmem(buf, got, "\r\n\r\n", 4))) {
		if (got == sizeof(buf) ||
		    (n = recv(fd, buf + got, sizeof(buf) - got, 0)) <= 0)
			return -1;
		got += (size_t)n;
	}
	*end = '\0';
	cl = strcasestr(buf, "\r\ncontent-length:");
	if (cl)
		body = strtol(cl + 17, NULL, 10);
	body -= (long)(got - (size_t)(end + 4 - buf));
	while (body > 0) {
		n = recv(fd, buf, sizeof(buf) < (size_t)body ? sizeof(buf)
							     : (size_t)body, 0);
		if (n <= 0)
			return -1;
		body -= n;
	}
	return !strncmp(buf, "PUT ", 4) || !strncmp(buf, "DELETE ", 7);
}

struct http_conn {
	struct th_slow_http *h;
	int fd;
};

/* One request on its own thread: the stalls of requests overlap, as they
 * would on a server that is just slow. */
static void *http_serve(void *arg)
{
	static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n"
				 "Connection: close\r\n\r\n";
	static const char nf[] = "HTTP/1.1 404 Not Found\r\n"
				 "Content-Length: 0\r\nConnection: close\r\n\r\n";
	struct http_conn *c = arg;
	struct th_slow_http *h = c->h;
	int kind = read_request(c->fd);

	if (kind >= 0 && !nap(&h->s, atomic_load(&h->s.delay_ms))) {
		th_send_all(c->fd, kind ? ok : nf,
			    kind ? sizeof(ok) - 1 : sizeof(nf) - 1);
		atomic_fetch_add(&h->s.served, 1);
	}
	close(c->fd);
	free(c);
	atomic_fetch_sub(&h->busy, 1);
	return NULL;
}

static void *http_main(void *arg)
{
	struct th_slow_http *h = arg;
	struct http_conn *c;
	pthread_t th;
	int fd;

	while ((fd = next_conn(&h->s)) >= 0) {
		c = malloc(sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		*c = (struct http_conn){ h, fd };
		atomic_fetch_add(&h->busy, 1);
		if (pthread_create(&th, NULL, http_serve, c)) {
			atomic_fetch_sub(&h->busy, 1);
			close(fd);
			free(c);
			continue;
		}
		pthread_detach(th);
	}
	return NULL;
}

void th_slow_http_start(struct th_slow_http *h, int delay_ms)
{
	server_start(&h->s, delay_ms, http_main, h);
}

void th_slow_http_stop(struct th_slow_http *h)
{
	server_stop(&h->s); /* wakes the naps of the requests too */
	while (atomic_load(&h->busy))
		nap(&h->s, 1);
}

char *th_desc_json(uint16_t rpc_port, uint16_t data_port)
{
	size_t len;
	char *json = th_hs_call(rpc_port, 1, "{}\n", &len), *p, *out;

	p = strstr(json, "\"tcp_data_port\":");
	if (!data_port || !p)
		return json;
	p += strlen("\"tcp_data_port\":");
	assert_true(asprintf(&out, "%.*s%u%s", (int)(p - json), json,
			     data_port, p + strspn(p, "0123456789")) > 0);
	free(json);
	return out;
}
