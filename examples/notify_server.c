/*
 * notify_server: a server on its own event loop that never blocks it.
 *
 * One application thread, one event_base, two engines on it with no
 * thread of their own (plugin mode, workers = 0): a client and a server.
 * The client asks for its data to be fetched with a notification; the
 * server, from its notification callback, opens the client's segment,
 * READs the data into its own memory and answers with a notification
 * that carries a checksum. Every call that talks to the network is the
 * asynchronous form; each step continues in the callback of the one
 * before.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <xfer/event.h>

#define LEN (1u << 20)

struct app {
	struct event_base *base;
	struct xfer_engine *client, *server;
	uint8_t *data, *copy;        /* the client's, the server's */
	uint64_t want;               /* the checksum of data */
	const char *failed;          /* NULL once the answer checked out */
};

static uint64_t sum(const uint8_t *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;

	while (n--)
		h = (h ^ *p++) * 1099511628211ull;
	return h;
}

static void fail(struct app *a, const char *why)
{
	a->failed = why;
	event_base_loopbreak(a->base);
}

static void sent(struct xfer_engine *e, int result, void *arg)
{
	(void)e;
	if (result)
		fail(arg, "notify");
}

/* ---- the server: fetch on request, answer with a checksum ---- */

struct job {
	struct app *a;
	char client[64];
	uint64_t addr;
	int64_t seg;
};

static void fetched(struct xfer_batch *b, enum xfer_status outcome,
		    void *arg)
{
	struct job *j = arg;
	char answer[32];

	xfer_batch_free(b);
	if (outcome != XFER_COMPLETED) {
		fail(j->a, "fetch");
	} else {
		snprintf(answer, sizeof(answer), "%" PRIx64,
			 sum(j->a->copy, LEN));
		if (xfer_notify_async(j->a->server, j->seg, "done", answer,
				      sent, j->a))
			fail(j->a, "answer");
	}
	free(j);
}

static void client_open(struct xfer_engine *e, int64_t seg, void *arg)
{
	struct job *j = arg;
	struct xfer_request r = { XFER_READ, j->a->copy, seg, j->addr, LEN };
	struct xfer_batch *b = seg < 0 ? NULL : xfer_batch_new(e, 1);

	j->seg = seg;
	if (!b || xfer_batch_set_callback(b, fetched, j) ||
	    xfer_batch_submit(b, &r, 1)) {
		fail(j->a, "open or submit");
		free(j);
	}
}

/* "fetch <addr>" from segment <name>. */
static void server_note(struct xfer_engine *e, const char *name,
			const char *msg, void *arg)
{
	struct job *j = calloc(1, sizeof(*j));

	if (!j || sscanf(msg, "fetch %" SCNu64, &j->addr) != 1) {
		free(j);
		fail(arg, "request");
		return;
	}
	j->a = arg;
	snprintf(j->client, sizeof(j->client), "%s", name);
	if (xfer_segment_open_async(e, j->client, client_open, j)) {
		free(j);
		fail(arg, "open");
	}
}

/* ---- the client: ask, then check the answer ---- */

static void client_note(struct xfer_engine *e, const char *name,
			const char *msg, void *arg)
{
	struct app *a = arg;

	(void)e;
	if (strcmp(name, "done") ||
	    strtoull(msg, NULL, 16) != a->want)
		fail(a, "the answer's checksum");
	else
		fail(a, NULL); /* done */
}

static void server_open(struct xfer_engine *e, int64_t seg, void *arg)
{
	struct app *a = arg;
	char req[48];

	snprintf(req, sizeof(req), "fetch %" PRIu64,
		 (uint64_t)(uintptr_t)a->data);
	/* name: where the server finds the data and sends the answer */
	if (seg < 0 || xfer_notify_async(e, seg, xfer_engine_name(e), req,
					 sent, a))
		fail(a, "ask");
}

static struct xfer_engine *engine(struct event_base *base)
{
	struct xfer_config *cfg = xfer_config_new();
	struct xfer_engine *e = NULL;

	if (cfg && !xfer_config_set(cfg, "bind_addr", "127.0.0.1") &&
	    !xfer_config_set(cfg, "local_server_name", "127.0.0.1") &&
	    !xfer_config_set(cfg, "workers", "0"))
		e = xfer_engine_new_on_base(base, cfg);
	xfer_config_free(cfg);
	return e;
}

static void on_start(evutil_socket_t fd, short what, void *arg)
{
	struct app *a = arg;

	(void)fd, (void)what;
	if (xfer_segment_open_async(a->client, xfer_engine_name(a->server),
				    server_open, a))
		fail(a, "open");
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
	(void)fd, (void)what;
	fail(arg, "no answer within 10 s");
}

int main(void)
{
	struct app a = { .failed = "loop ended early" };
	struct timeval now = { 0, 0 }, limit = { 10, 0 };
	struct event *start, *timeout;

	a.base = event_base_new();
	a.data = malloc(LEN);
	a.copy = calloc(1, LEN);
	if (!a.base || !a.data || !a.copy)
		return 1;
	for (size_t i = 0; i < LEN; i++)
		a.data[i] = (uint8_t)(i * 31 + 7);
	a.want = sum(a.data, LEN);
	a.client = engine(a.base);
	a.server = engine(a.base);
	/* peer-to-peer metadata: registering waits for nothing */
	if (!a.client || !a.server ||
	    xfer_register(a.client, a.data, LEN, "cpu:0", true) ||
	    xfer_register(a.server, a.copy, LEN, "cpu:0", false) ||
	    xfer_engine_set_notify_cb(a.client, client_note, &a) ||
	    xfer_engine_set_notify_cb(a.server, server_note, &a)) {
		fprintf(stderr, "notify_server: setup failed\n");
		return 1;
	}
	start = evtimer_new(a.base, on_start, &a);
	timeout = evtimer_new(a.base, on_timeout, &a);
	evtimer_add(start, &now);
	evtimer_add(timeout, &limit);
	event_base_dispatch(a.base);

	event_free(start);
	event_free(timeout);
	xfer_engine_free(a.client);
	xfer_engine_free(a.server);
	event_base_free(a.base);
	free(a.data);
	free(a.copy);
	if (a.failed) {
		fprintf(stderr, "notify_server: %s\n", a.failed);
		return 1;
	}
	puts("notify_server: ok");
	return 0;
}
