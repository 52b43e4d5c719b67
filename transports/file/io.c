/*
 * Slices on files this host reaches. The slices of a task lie end to end
 * in memory and in the file, so each run of them up to RUN_MAX bytes is
 * one read or write of the file I/O engine on the transport's reactor
 * (its request in the run's first slice), O_DIRECT when memory, offset
 * and length are aligned for it. At most file_queue_depth runs are in the
 * engine; the rest wait in the inbox, where a cancel can still end them.
 *
 * A buffered run of up to LEND_MAX bytes that nothing waits ahead of is
 * first tried by the submitting thread itself (xfer_fio_now()), as TCP
 * lends a quiet connection: what the page cache answers at once, or any
 * run on a file in memory (tmpfs, ramfs: copied as the local transport
 * copies RAM, O_DIRECT or not), ends inside the submit with no thread
 * woken; what would wait goes to the reactor as above. It holds a place
 * of the depth meanwhile and counts as a read in flight for a cancel.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "transports/file/file_internal.h"

#define RUN_MAX (16u << 20)

/* The longest run a submitter moves itself: up to this a copy takes
 * tens of microseconds, less than the thread wake-ups of the reactor's
 * way on a busy host; longer copies go faster spread over io_uring's
 * workers (tmpfs) and leave the caller free sooner. */
#define LEND_MAX (256u << 10)

/* fo->lend: what a submitter may not do itself on the buffered fd of a
 * file on a device (fo->mem says whether the file is in memory). */
enum {
	LEND_NO_READ = 1,    /* RWF_NOWAIT refused for reads */
	LEND_NO_WRITE = 2,   /* and for writes */
};

static struct xfer_slice *slice_of(struct xfer_fio_req *r)
{
	return (struct xfer_slice *)((char *)r - offsetof(struct xfer_slice,
							  tp));
}

/* Start waiting slices while the engine has room (reactor thread). */
static void pump(struct file_transport *t)
{
	unsigned depth = (unsigned)t->k[K_DEPTH].num;
	struct xfer_slice *s;

	pthread_mutex_lock(&t->lock);
	while (!t->holds && t->inflight < depth && (s = t->in_head)) {
		t->in_head = s->next;
		if (!t->in_head)
			t->in_tail = &t->in_head;
		t->inflight++;
		t->reads += s->opcode == XFER_READ;
		pthread_mutex_unlock(&t->lock);
		xfer_fio_submit(t->fio, &file_slice(s)->req);
		pthread_mutex_lock(&t->lock);
	}
	pthread_mutex_unlock(&t->lock);
}

static void kick(struct xfer_job *j)
{
	struct file_transport *t = container_of(j, struct file_transport,
						kick);

	pthread_mutex_lock(&t->lock);
	t->kick_pending = false;
	pthread_mutex_unlock(&t->lock);
	pump(t);
}

/* Have the reactor pump soon; the job is posted once at a time. */
static void kick_post(struct file_transport *t, bool locked)
{
	bool post;

	if (!locked)
		pthread_mutex_lock(&t->lock);
	post = !t->kick_pending;
	t->kick_pending = true;
	t->kick.fn = kick;
	if (!locked)
		pthread_mutex_unlock(&t->lock);
	if (post)
		xfer_reactor_post(t->r, &t->kick);
}

/* End the run that starts at @p s, @p len bytes, as @p st. */
static void run_end(struct xfer_slice *s, size_t len, enum xfer_status st)
{
	size_t n = 0;

	/* counted first: the last slice done may end the task, and its
	 * slices with it */
	for (size_t left = len; left; left -= s[n++].len)
		;
	for (size_t i = 0; i < n; i++)
		xfer_slice_done(&s[i], st);
}

/* A run's place in the engine is free again (under t->lock). */
static void slot_put(struct file_transport *t, bool read)
{
	t->inflight--;
	if (read && !--t->reads)
		pthread_cond_broadcast(&t->reads_done);
}

/* The run at @p s ended with @p res (struct xfer_fio_req's). */
static void run_finish(struct xfer_slice *s, int res)
{
	struct xfer_fio_req *r = &file_slice(s)->req;
	struct file_open *fo = file_slice(s)->fo;
	struct file_transport *t = fo->t;
	bool read = s->opcode == XFER_READ;

	if (res)
		xfer_error_set(t->base.env->err, res, "file %s: %s of %zu "
			       "bytes at %llu: %s", fo->path, read ? "read" :
			       "write", r->len, (unsigned long long)r->off,
			       strerror(-res));
	xfer_file_open_put(fo);
	run_end(s, r->len, res ? XFER_FAILED : XFER_COMPLETED);
	pthread_mutex_lock(&t->lock);
	slot_put(t, read);
	pthread_mutex_unlock(&t->lock);
}

static void on_done(struct xfer_fio_req *r, int res)
{
	struct file_transport *t = file_slice(slice_of(r))->fo->t;

	run_finish(slice_of(r), res);
	if (!t->closing)
		pump(t);
}

/* May the submitter move the run at @p s itself (under t->lock)? On a
 * file in memory O_DIRECT changes nothing: either fd will do. */
static bool may_lend(struct file_transport *t, struct xfer_slice *s)
{
	struct file_slice *fs = file_slice(s);

	if (t->in_head || t->holds || t->closing ||
	    t->inflight >= (unsigned)t->k[K_DEPTH].num ||
	    fs->req.len > LEND_MAX)
		return false;
	return fs->fo->mem ||
	       (fs->req.fd == fs->fo->fd &&
		!(atomic_load(&fs->fo->lend) &
		  (fs->req.write ? LEND_NO_WRITE : LEND_NO_READ)));
}

/*
 * Move the runs of the list at @p head on this thread while they may be
 * lent and end at once (t->lock held, dropped meanwhile). @return the
 * first run left, with those after it.
 */
static struct xfer_slice *lend(struct file_transport *t,
			       struct xfer_slice *head)
{
	struct xfer_slice *s;

	while ((s = head) && may_lend(t, s)) {
		struct file_slice *fs = file_slice(s);
		bool read = s->opcode == XFER_READ;
		int ret;

		head = s->next;
		t->inflight++;
		t->reads += read;
		pthread_mutex_unlock(&t->lock);
		ret = xfer_fio_now(&fs->req, !fs->fo->mem);
		if (!ret) {
			run_finish(s, fs->req.res);
			pthread_mutex_lock(&t->lock);
			continue;
		}
		if (ret == -EOPNOTSUPP) /* not on this file: never again */
			atomic_fetch_or(&fs->fo->lend, read ? LEND_NO_READ :
					LEND_NO_WRITE);
		pthread_mutex_lock(&t->lock);
		slot_put(t, read);
		return s;
	}
	return head;
}

void xfer_file_io_submit(struct file_transport *t, struct file_open *fo,
			 uint64_t base, struct xfer_slice *s, size_t n)
{
	struct xfer_slice *head = NULL, **tail = &head;
	size_t i = 0, k;

	for (; i < n; i = k) {
		struct file_slice *fs = file_slice(&s[i]);
		uint64_t off = s[i].remote - base;
		size_t len = s[i].len;

		for (k = i + 1; k < n && len + s[k].len <= RUN_MAX; k++)
			len += s[k].len;
		xfer_file_open_get(fo);
		fs->fo = fo;
		fs->req = (struct xfer_fio_req){
			.fd = xfer_file_direct(fo, s[i].local, off, len) ?
			      fo->dfd : fo->fd,
			.write = s[i].opcode == XFER_WRITE,
			.buf = s[i].local,
			.len = len,
			.off = off,
			.done = on_done,
		};
		*tail = &s[i];
		tail = &s[i].next;
	}
	*tail = NULL;
	pthread_mutex_lock(&t->lock);
	head = lend(t, head);
	if (head) {
		*t->in_tail = head;
		t->in_tail = tail;
	}
	/* also for what others queued while a lent run held a place */
	if (t->in_head)
		kick_post(t, true);
	pthread_mutex_unlock(&t->lock);
}

/* End the runs taken off the inbox as @p st. */
static void end_all(struct xfer_slice *s, enum xfer_status st)
{
	while (s) {
		struct xfer_slice *next = s->next;

		xfer_file_open_put(file_slice(s)->fo);
		run_end(s, file_slice(s)->req.len, st);
		s = next;
	}
}

/* Take the inbox's slices of canceled tasks; start nothing more until
 * the cancel has seen the reads in flight land. */
static void purge(void *arg)
{
	struct file_transport *t = arg;
	struct xfer_slice **p = &t->in_head, *s, *gone = NULL, **gt = &gone;

	pthread_mutex_lock(&t->lock);
	while ((s = *p)) {
		if (xfer_slice_canceled(s)) {
			*p = s->next;
			*gt = s;
			gt = &s->next;
		} else {
			p = &s->next;
		}
	}
	*gt = NULL;
	t->in_tail = p;
	t->holds++;
	pthread_mutex_unlock(&t->lock);
	end_all(gone, XFER_CANCELED);
}

/*
 * A read in the kernel cannot be called back: wait until every read in
 * flight has landed, so nothing lands in a canceled task's memory after
 * the return. On the reactor's own thread (plugin mode, a callback) the
 * wait could never end; reads already issued may still land then.
 */
void xfer_file_io_cancel(struct file_transport *t)
{
	xfer_reactor_run(t->r, purge, t);
	pthread_mutex_lock(&t->lock);
	while (t->reads && !xfer_reactor_on_thread(t->r))
		pthread_cond_wait(&t->reads_done, &t->lock);
	t->holds--;
	kick_post(t, true);
	pthread_mutex_unlock(&t->lock);
}

void xfer_file_io_close(struct file_transport *t)
{
	struct xfer_slice *s;

	t->closing = true;
	xfer_fio_free(t->fio); /* those in flight end FAILED */
	pthread_mutex_lock(&t->lock);
	s = t->in_head;
	t->in_head = NULL;
	t->in_tail = &t->in_head;
	pthread_mutex_unlock(&t->lock);
	end_all(s, XFER_CANCELED);
}
