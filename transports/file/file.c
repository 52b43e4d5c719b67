/* File transport: the ops table, its knobs, start and stop, and where the
 * slices of a task go (file_internal.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/container_internal.h"
#include "transports/file/file_internal.h"

static struct file_transport *ft(struct xfer_transport *t)
{
	return container_of(t, struct file_transport, base);
}

static int file_init(const struct xfer_transport_env *env,
		     struct xfer_transport **out)
{
	struct file_transport *t = calloc(1, sizeof(*t));
	int ret;

	if (!t)
		return -ENOMEM;
	t->base.env = env; /* the server's messages need it now */
	t->k = env->knobs;
	if (gethostname(t->host, sizeof(t->host) - 1))
		t->host[0] = '\0';
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->reads_done, NULL);
	TAILQ_INIT(&t->files);
	xfer_sstream_table_init(&t->sconns, "file");
	SLIST_INIT(&t->rpeers);
	t->in_tail = &t->in_head;
	t->r = env->worker(env->arg);
	ret = xfer_fio_new(t->r, (unsigned)t->k[K_DEPTH].num,
			   t->k[K_THREADS].num, &t->fio);
	if (!ret && (ret = xfer_file_server_start(t)))
		xfer_fio_free(t->fio);
	if (ret) {
		pthread_cond_destroy(&t->reads_done);
		pthread_mutex_destroy(&t->lock);
		xfer_sstream_table_fini(&t->sconns);
		free(t);
		return xfer_error_set(env->err, ret, "file transport: %s",
				      strerror(-ret));
	}
	*out = &t->base;
	return 0;
}

/* The reactors are stopped: what the engine still holds ends first, then
 * the connections that fed it. */
static void file_fini(struct xfer_transport *tp)
{
	struct file_transport *t = ft(tp);

	xfer_file_io_close(t);
	xfer_file_server_stop(t);
	xfer_file_client_close(t);
	xfer_file_own_free(t);
	pthread_cond_destroy(&t->reads_done);
	pthread_mutex_destroy(&t->lock);
	xfer_sstream_table_fini(&t->sconns);
	free(t);
}

static void fail_all(struct xfer_transport *t, struct xfer_segment *seg,
		     struct xfer_slice *s, size_t n, bool held)
{
	xfer_error_set(t->env->err, held ? -ENOTCONN : -ENOENT, "file: "
		       "segment %s: [%llu, %llu): %s", seg->name,
		       (unsigned long long)s[0].remote,
		       (unsigned long long)(s[n - 1].remote + s[n - 1].len),
		       held ? "not reachable here, and its owner serves no "
		       "data port" : "no longer in one of its files");
	for (size_t i = 0; i < n; i++)
		xfer_slice_done(&s[i], XFER_FAILED);
}

/* The slices of one task lie in one file (covers() asks for it): here,
 * or at its owner. */
static void file_submit(struct xfer_transport *tp, struct xfer_segment *seg,
			struct xfer_slice *s, size_t n)
{
	struct file_transport *t = ft(tp);
	uint64_t first = s[0].remote, in = 0;
	uint64_t len = s[n - 1].remote + s[n - 1].len - first;
	struct file_open *fo = NULL;
	struct file_rpeer *owner = NULL;
	struct file_peer *p;
	long i = -1;

	if (seg->local) {
		fo = xfer_file_own_find(t, first, len, &in);
	} else {
		pthread_rwlock_rdlock(&seg->lock);
		p = seg->tp_priv;
		i = p ? xfer_file_doc_find(p->doc, first, len, &in) : -1;
		if (i >= 0 && (fo = p->fo[i]))
			xfer_file_open_get(fo);
		else if (i >= 0)
			owner = p->remote; /* lives as long as the transport */
		pthread_rwlock_unlock(&seg->lock);
	}
	if (fo) {
		xfer_file_io_submit(t, fo, first - in, s, n);
		xfer_file_open_put(fo);
	} else if (owner) {
		xfer_file_rpeer_submit(owner, s, n);
	} else {
		fail_all(tp, seg, s, n, i >= 0);
	}
}

static void file_cancel(struct xfer_transport *tp)
{
	xfer_file_io_cancel(ft(tp));
	xfer_file_client_cancel(ft(tp));
}

/* Its one thread of its own: the file I/O engine's worker, when io_uring
 * is not used (io_uring's kernel workers are the kernel's). */
static double file_cpu_seconds(struct xfer_transport *tp)
{
	return xfer_fio_cpu_seconds(ft(tp)->fio);
}

static const struct xfer_knob file_knobs[] = {
	[K_DEPTH] = XFER_KNOB_N("file_queue_depth", "XFER_FILE_QUEUE_DEPTH",
				"MC_FILE_QUEUE_DEPTH", 1, XFER_FIO_MAX_DEPTH,
				"64", "count", "file reads and writes in "
				"flight at once"),
	[K_THREADS] = XFER_KNOB_B("file_threads", "XFER_FILE_THREADS", NULL,
				  "false", "file I/O on a worker thread, "
				  "not io_uring"),
	[K_LOCAL] = XFER_KNOB_B("file_local", "XFER_FILE_LOCAL", NULL, "true",
				"files this host reaches are read and "
				"written here, not through their owner"),
	[K_BOUNCE] = XFER_KNOB_N("file_bounce_max", "XFER_FILE_BOUNCE_MAX",
				 NULL, XFER_FILE_PIECE, 1LL << 40, "67108864",
				 "bytes", "bounce memory the data port's "
				 "requests hold, all together"),
	XFER_KNOB_END,
};

const struct xfer_transport_ops xfer_file_ops = {
	.name = "file",
	.flags = XFER_TP_ALWAYS,
	.knobs = file_knobs,
	.kind = "nvmeof",
	.init = file_init,
	.fini = file_fini,
	.submit = file_submit,
	.cancel = file_cancel,
	.cpu_seconds = file_cpu_seconds,
	.release = xfer_file_release,
	.document = xfer_file_document,
	.adopt = xfer_file_adopt,
	.covers = xfer_file_covers,
	.buffer = xfer_file_buffer,
};
