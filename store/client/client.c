/*
 * The store's client (kv_internal.h): made and freed on the caller's
 * thread, run on the engine's control reactor. The own segment and the
 * staging buffer are anonymous mappings registered with the engine; the
 * segment is mounted under the engine's name (its memory's addresses are
 * what peers write to), again after every reconnection and whenever a
 * ping says the master forgot it. A timer every KV_PING_MS pings, fails
 * requests left unanswered and reconnects a lost connection.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>

#include <event2/event.h>

#include "core/control_internal.h"
#include "store/alloc_internal.h"
#include "store/client/kv_internal.h"
#include "util/log_internal.h"
#include "util/net_internal.h"
#include "util/wait_internal.h"

/* Live staging allocations at most: rounds of calls in flight. */
#define STAGE_ALLOCS 4096

static void op_gone(struct xfer_kv *kv);

/* xfer_kv_new() waits for this: 0 once mounted, or why not. */
static void ready(struct xfer_kv *kv, int err)
{
	if (!kv->ready_wait)
		return;
	xfer_wait_done(kv->ready_wait, err);
	kv->ready_wait = NULL;
}

static void on_mount(struct kv_rpc *r, const struct store_msg *rep)
{
	struct xfer_kv *kv = container_of(r, struct xfer_kv, mount_rpc);
	int err = rep ? rep->err : XFER_KV_RPC_FAIL;

	kv->mount_out = false;
	kv->mounted = !err;
	atomic_store(&kv->healthy, !err);
	if (err && !kv->ready_wait)
		xfer_log(XFER_LOG_WARN, "xfer store client: mounting %s "
			 "failed: %d", kv->name, err);
	ready(kv, !err ? 0 : rep ? -EPROTO : -ECONNRESET);
}

static void mount(struct xfer_kv *kv)
{
	if (kv->mount_out)
		return;
	kv->mount_out = true;
	kv->mount_rpc.done = on_mount;
	kv_mount_send(kv, &kv->mount_rpc, kv->segment_id,
		      (uintptr_t)kv->seg_mem, kv->seg_size, STORE_MEDIUM_DRAM,
		      kv->name);
}

static void connected(struct xfer_kv *kv)
{
	kv_ssd_mount(kv);
	kv_extra_mount(kv);
	if (kv->seg_size) {
		mount(kv);
		return;
	}
	atomic_store(&kv->healthy, true);
	ready(kv, 0);
}

static void connect_failed(struct xfer_kv *kv, int err)
{
	/* a master found in etcd may be about to listen: wait on */
	if (kv->disc)
		kv_disc_retry(kv);
	if (kv->ready_wait && !kv->disc)
		ready(kv, err);
	else
		xfer_log(XFER_LOG_DEBUG, "xfer store client: no connection to "
			 "the master: %s", strerror(-err));
}

static void on_ping(struct kv_rpc *r, const struct store_msg *rep)
{
	struct xfer_kv *kv = container_of(r, struct xfer_kv, ping_rpc);

	kv->ping_out = false;
	atomic_store(&kv->healthy, rep && !rep->err);
	/* the master does not know our segment (it expired us, or it
	 * restarted): mount it again */
	if (rep && !rep->err && (rep->flags & 1) && kv->seg_size &&
	    !kv->closing) {
		xfer_log(XFER_LOG_INFO, "xfer store client: the master lost "
			 "segment %s: mounting it again", kv->name);
		mount(kv);
	}
	if (rep && !rep->err && (rep->flags & 1)) {
		kv_ssd_mount(kv);
		kv_extra_mount(kv);
	}
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct xfer_kv *kv = arg;

	(void)fd;
	(void)what;
	kv_conn_check(kv, kv_now_ms());
	if (!kv->bev) {
		kv_disc_check(kv);
		if (!kv->closing && kv->addr_len)
			kv_conn_start(kv);
		return;
	}
	kv_ssd_tick(kv);
	if (kv->ping_out)
		return;
	kv->ping_out = true;
	memcpy(kv->req->client, kv->client_id, STORE_ID_LEN);
	kv->ping_rpc.done = on_ping;
	kv_rpc_send(kv, &kv->ping_rpc, STORE_PING);
}

static void start(void *arg)
{
	struct timeval tv = { KV_PING_MS / 1000, KV_PING_MS % 1000 * 1000 };
	struct xfer_kv *kv = arg;

	kv->tick_ev = event_new(kv->r->base, -1, EV_PERSIST, on_tick, kv);
	if (kv_conn_init(kv) || !kv->tick_ev || event_add(kv->tick_ev, &tv)) {
		ready(kv, -ENOMEM);
		return;
	}
	if (kv->disc) {
		/* connects once etcd names the master */
		if (kv_disc_start(kv))
			ready(kv, -EINVAL);
		return;
	}
	kv_conn_start(kv);
}

/* On the reactor, once the caller stopped waiting: nothing of ours runs
 * after this. */
static void stop(void *arg)
{
	struct xfer_kv *kv = arg;

	if (kv->ready_wait) {
		xfer_wait_drop(kv->ready_wait);
		kv->ready_wait = NULL;
	}
	if (kv->tick_ev) {
		event_free(kv->tick_ev);
		kv->tick_ev = NULL;
	}
	kv_disc_free(kv);
	kv_conn_fini(kv);
	kv_segs_free(kv);
}

/* An anonymous mapping of @p len bytes registered with the engine. */
static int map_region(struct xfer_kv *kv, uint64_t len, bool remote,
		      uint8_t **mem)
{
	void *p;
	int ret;

	if (len > SIZE_MAX)
		return -EINVAL;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE |
		 MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	ret = xfer_register(kv->e, p, len, "*", remote);
	if (ret) {
		munmap(p, len);
		return ret;
	}
	*mem = p;
	return 0;
}

static void unmap_region(struct xfer_kv *kv, uint8_t *mem, uint64_t len)
{
	if (!mem)
		return;
	/* peers' reads of the segment end first (or time out) */
	while (xfer_unregister(kv->e, mem) == -EBUSY)
		nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
	munmap(mem, len);
}

/* The largest staging round an empty allocator grants (its bins round a
 * request up, so not always the whole buffer). */
static int stage_init(struct xfer_kv *kv)
{
	uint64_t len, off;
	uint32_t id;

	kv->stage = store_alloc_new(kv->stage_size, KV_STAGE_ALIGN,
				    STAGE_ALLOCS);
	if (!kv->stage)
		return -errno;
	len = store_alloc_size(kv->stage);
	while (store_alloc_get(kv->stage, len, &off, &id)) {
		if (len <= KV_STAGE_ALIGN)
			return -ENOMEM;
		len -= len / 16 > KV_STAGE_ALIGN ? len / 16 : KV_STAGE_ALIGN;
	}
	store_alloc_release(kv->stage, id);
	kv->stage_max = len;
	return 0;
}

static void destroy(struct xfer_kv *kv)
{
	if (kv->r)
		xfer_reactor_run(kv->r, stop, kv);
	else
		kv_disc_free(kv);      /* never started: no etcd open */
	kv_ssd_forget(kv);
	kv_extra_free_all(kv);
	unmap_region(kv, kv->seg_mem, kv->seg_size);
	unmap_region(kv, kv->stage_mem, kv->stage_size);
	store_alloc_free(kv->stage);
	kv_tier_free(kv);
	if (kv->own_engine)
		xfer_engine_free(kv->e);
	store_buf_free(&kv->out);
	free(kv->req);
	free(kv->rep);
	free(kv);
}

static int resolve(struct xfer_kv *kv, const char *master)
{
	char host[256];
	uint16_t port;
	int ret;

	if (master && (ret = kv_disc_new(kv, master)) <= 0)
		return ret;
	if (!master || xfer_split_host_port(master, host, sizeof(host),
					    &port))
		return -EINVAL;
	return xfer_net_resolve(host, port, &kv->addr, &kv->addr_len);
}

struct xfer_kv *xfer_kv_new(struct xfer_engine *e,
			    const struct xfer_config *cfg, const char *master,
			    uint64_t segment_size, uint64_t buffer_size)
{
	struct xfer_kv *kv = calloc(1, sizeof(*kv));
	struct xfer_wait *w;
	int64_t ret;

	if (!kv) {
		errno = ENOMEM;
		return NULL;
	}
	ret = resolve(kv, master);
	if (!ret && segment_size && segment_size < 64)
		ret = -EINVAL;
	if (!ret && e && xfer_reactor_on_thread(xfer_engine_control(e)))
		ret = -EDEADLK;
	if (ret) {
		kv_disc_free(kv);
		free(kv);
		errno = (int)-ret;
		return NULL;
	}
	kv->e = e;
	if (!e) {
		kv->e = xfer_engine_new(cfg);
		if (!kv->e) {
			kv_disc_free(kv);
			free(kv);
			return NULL;
		}
		kv->own_engine = true;
	}
	kv->name = xfer_engine_name(kv->e);
	kv->auth = xfer_engine_auth(kv->e);
	kv->seg_size = segment_size;
	kv->stage_size = buffer_size;
	kv->stage_wait_tail = &kv->stage_wait;
	kv->connected = connected;
	kv->connect_failed = connect_failed;
	kv->op_gone = op_gone;
	kv->req = calloc(1, sizeof(*kv->req));
	kv->rep = calloc(1, sizeof(*kv->rep));
	kv->ready_wait = xfer_wait_new();
	kv->close_wait = xfer_wait_new();
	ret = -ENOMEM;
	if (!kv->req || !kv->rep || !kv->ready_wait || !kv->close_wait ||
	    getrandom(kv->client_id, STORE_ID_LEN, 0) != STORE_ID_LEN ||
	    getrandom(kv->segment_id, STORE_ID_LEN, 0) != STORE_ID_LEN)
		goto err;
	if ((segment_size &&
	     (ret = map_region(kv, segment_size, true, &kv->seg_mem))) ||
	    (buffer_size &&
	     ((ret = map_region(kv, buffer_size, false, &kv->stage_mem)) ||
	      (ret = stage_init(kv)))))
		goto err;
	w = kv->ready_wait;            /* the reactor's from now on */
	kv->r = xfer_engine_control(kv->e);
	xfer_reactor_run(kv->r, start, kv);
	/* connect, prove and mount each time out on their own */
	ret = xfer_wait_for(w, 3 * KV_CONNECT_TIMEOUT_MS);
	if (!ret)
		return kv;
err:
	/* waiters no callback holds (stop() drops the reactor's side) */
	for (int i = 0; i < 2; i++) {
		if (!kv->r && kv->ready_wait)
			xfer_wait_drop(kv->ready_wait);
		if (kv->close_wait)
			xfer_wait_drop(kv->close_wait);
	}
	if (!kv->r)
		kv->ready_wait = NULL;
	destroy(kv);
	errno = (int)-ret;
	return NULL;
}

/* Every call has ended: unmount, then let xfer_kv_free() go on. */
static void drained(struct xfer_kv *kv)
{
	bool last;

	if (kv->drained)
		return;
	kv->drained = true;
	/* answers come in order: the last request's ends the close */
	last = !kv->bev || !(kv->ssd_mounted || kv->mounted);
	if (kv_extra_unmount_all(kv, last) && last)
		return;
	if (kv_ssd_unmount(kv) && !kv->mounted)
		return;                /* its answer ends the close */
	if (!kv->bev || !kv->mounted) {
		xfer_wait_done(kv->close_wait, 0);
		return;
	}
	kv_unmount_send(kv, &kv->unmount_rpc, kv->segment_id);
}

static void on_unmount(struct kv_rpc *r, const struct store_msg *rep)
{
	struct xfer_kv *kv = container_of(r, struct xfer_kv, unmount_rpc);

	(void)rep;
	kv->mounted = false;
	xfer_wait_done(kv->close_wait, 0);
}

static void op_gone(struct xfer_kv *kv)
{
	if (kv->closing && !kv->ops)
		drained(kv);
}

static void close_begin(void *arg)
{
	struct xfer_kv *kv = arg;

	kv->unmount_rpc.done = on_unmount;
	op_gone(kv);
}

int xfer_kv_free(struct xfer_kv *kv)
{
	if (!kv)
		return 0;
	if (xfer_reactor_on_thread(kv->r))
		return -EDEADLK;
	kv_tier_stop(kv);      /* what is queued is written and reported */
	atomic_store(&kv->closing, true);
	xfer_reactor_run(kv->r, close_begin, kv);
	/* calls end on their own timeouts, the unmount within 10 s */
	xfer_wait_for(kv->close_wait, INT_MAX);
	destroy(kv);
	return 0;
}

int xfer_kv_healthy(const struct xfer_kv *kv)
{
	return atomic_load(&kv->healthy);
}

struct xfer_engine *xfer_kv_engine(struct xfer_kv *kv)
{
	return kv->e;
}

int xfer_kv_register_buffer(struct xfer_kv *kv, void *addr, size_t len)
{
	return xfer_register(kv->e, addr, len, "*", false);
}

int xfer_kv_unregister_buffer(struct xfer_kv *kv, void *addr)
{
	return xfer_unregister(kv->e, addr);
}
