/*
 * The slower tier (docs/STORE.md, "The slower tier"): a folder, one file
 * per key, holding the latest version flushed. A file is written under a
 * temporary name, synced, then renamed over the key's name, unless the
 * file there already holds that version or a later one: the check and
 * the rename are one step under a lock (a mutex for this process, flock
 * on the folder for others sharing it, which NFS maps to its own locks),
 * so a version never replaces a later one, whoever writes them. The
 * folder is synced after a rename, so what the master is told is on disk.
 *
 * Eager puts write on the control reactor (op.c), before they end. Lazy
 * ones are copied onto a queue that one thread of the client writes, in
 * the order their puts ended, reporting each batch written to the master
 * (STORE_FLUSHED) through a job posted to the reactor. The queue holds at
 * most KV_LAZY_MAX bytes: beyond, a put waits on the reactor for room.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/client/kv_internal.h"
#include "util/log_internal.h"

#define KV_LAZY_MAX (256ull << 20)      /* bytes queued for the thread */
#define KV_SPARES 8                     /* entries kept for reuse ... */
#define KV_SPARE_MAX (64ull << 20)      /* ... of at most these bytes */
#define TIER_MAGIC "XFERTIR1"
#define TIER_HDR 32                     /* magic, version, len, klen */
#define TIER_B64_MAX 150                /* longer keys: a hash names them */
#define TIER_NAME_MAX 224

/* A lazy flush: the key, then the value, in cap bytes (reused). */
struct kv_lazy {
	struct kv_lazy *next;
	uint64_t version, len, cap;
	uint16_t klen;
	bool skip;                      /* a later version is in the batch */
	char key[];
};

struct kv_tier {
	struct xfer_kv *kv;
	int dirfd;
	pthread_mutex_t rename_lock, qlock;
	pthread_cond_t more, room;
	struct kv_lazy *head, **tail;
	uint64_t queued;                /* bytes */
	struct kv_lazy *spare[KV_SPARES];
	unsigned nspare;
	bool stop;
	pthread_t thread;
	uint64_t tmp_seq;               /* under rename_lock */
};

/* A batch of (key, version) written, reported to the master. */
struct kv_report {
	struct xfer_job job;
	struct kv_rpc rpc;
	struct xfer_kv *kv;
	uint32_t n;
	struct {
		char *key;
		uint16_t klen;
		uint64_t version;
	} e[STORE_BATCH_MAX];
};

static void put_le(uint8_t *p, uint64_t v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static uint64_t key_hash(const char *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	while (n--)
		h = (h ^ (uint8_t)*p++) * 0x100000001b3ull;
	return h;
}

/* The file name of @p key: 'k' and its base64url (no padding), or, for a
 * key over TIER_B64_MAX bytes, 'h' and 128 bits of two FNV-1a hashes (the
 * header's key tells a collision, which reads as absent). */
static void tier_name(const char *key, uint16_t klen, char *out)
{
	static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	const uint8_t *k = (const uint8_t *)key;
	size_t o = 0;

	if (klen > TIER_B64_MAX) {
		uint64_t h1 = key_hash(key, klen), h2 = 0x84222325cbf29ce4ull;

		for (size_t i = 0; i < klen; i++)     /* backwards */
			h2 = (h2 ^ k[klen - 1 - i]) * 0x100000001b3ull;
		snprintf(out, TIER_NAME_MAX, "h%016llx%016llx",
			 (unsigned long long)h1, (unsigned long long)h2);
		return;
	}
	out[o++] = 'k';
	for (size_t i = 0; i < klen; i += 3) {
		uint32_t v = (uint32_t)k[i] << 16 |
			     (i + 1 < klen ? (uint32_t)k[i + 1] << 8 : 0) |
			     (i + 2 < klen ? k[i + 2] : 0);

		out[o++] = b64[v >> 18];
		out[o++] = b64[(v >> 12) & 63];
		if (i + 1 < klen)
			out[o++] = b64[(v >> 6) & 63];
		if (i + 2 < klen)
			out[o++] = b64[v & 63];
	}
	out[o] = 0;
}

static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t w = write(fd, c, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

/* The version in the file @p name's header, 0 if none is readable. */
static uint64_t file_version(int dirfd, const char *name)
{
	uint8_t h[TIER_HDR];
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	ssize_t r;

	if (fd < 0)
		return 0;
	r = pread(fd, h, sizeof(h), 0);
	close(fd);
	if (r != TIER_HDR || memcmp(h, TIER_MAGIC, 8))
		return 0;
	return get_le(h + 8, 8);
}

/* Write @p key's @p version of @p len bytes (@p niov parts) into the
 * tier. @return 0 (there now, or a later version is), or -errno. */
static int tier_write(struct kv_tier *t, const char *key, uint16_t klen,
		      const struct iovec *iov, size_t niov, uint64_t len,
		      uint64_t version)
{
	char name[TIER_NAME_MAX], tmp[TIER_NAME_MAX + 40];
	uint8_t h[TIER_HDR];
	uint64_t seq;
	bool renamed = false;
	int fd, ret = 0;

	tier_name(key, klen, name);
	pthread_mutex_lock(&t->rename_lock);
	seq = ++t->tmp_seq;
	pthread_mutex_unlock(&t->rename_lock);
	snprintf(tmp, sizeof(tmp), ".%s.%d.%llu.tmp", name, (int)getpid(),
		 (unsigned long long)seq);
	fd = openat(t->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
		    0644);
	if (fd < 0)
		return -errno;
	memcpy(h, TIER_MAGIC, 8);
	put_le(h + 8, version, 8);
	put_le(h + 16, len, 8);
	put_le(h + 24, klen, 8);
	if (write_all(fd, h, sizeof(h)) || write_all(fd, key, klen))
		ret = -errno;
	for (size_t i = 0; !ret && i < niov; i++)
		if (write_all(fd, iov[i].iov_base, iov[i].iov_len))
			ret = -errno;
	if (!ret && fsync(fd))
		ret = -errno;
	if (close(fd) && !ret)
		ret = -errno;
	if (!ret) {
		pthread_mutex_lock(&t->rename_lock);
		if (flock(t->dirfd, LOCK_EX)) {
			ret = -errno;
		} else {
			if (file_version(t->dirfd, name) < version) {
				if (renameat(t->dirfd, tmp, t->dirfd, name))
					ret = -errno;
				else
					renamed = true;
			}
			flock(t->dirfd, LOCK_UN);
		}
		pthread_mutex_unlock(&t->rename_lock);
	}
	if (!renamed)
		unlinkat(t->dirfd, tmp, 0);
	if (renamed && fsync(t->dirfd))
		ret = -errno;
	return ret;
}

int kv_tier_eager(struct xfer_kv *kv, const struct kv_key *k)
{
	int ret = tier_write(kv->tier, k->key, k->klen, k->iov, k->niov,
			     k->len, k->version);

	if (ret)
		xfer_log(XFER_LOG_WARN, "xfer store client: cannot flush a "
			 "version %llu: %s", (unsigned long long)k->version,
			 strerror(-ret));
	return ret ? XFER_KV_FILE_WRITE_FAIL : 0;
}

int kv_tier_lazy(struct xfer_kv *kv, const struct kv_key *k)
{
	struct kv_tier *t = kv->tier;
	uint64_t need = k->klen + k->len;
	struct kv_lazy *e = NULL;
	char *p;

	/* a spare entry: no page faults of a fresh allocation */
	pthread_mutex_lock(&t->qlock);
	for (unsigned i = 0; i < t->nspare && !e; i++)
		if (t->spare[i]->cap >= need) {
			e = t->spare[i];
			t->spare[i] = t->spare[--t->nspare];
		}
	pthread_mutex_unlock(&t->qlock);
	if (!e && (e = malloc(sizeof(*e) + need)))
		e->cap = need;
	if (!e)
		return -ENOMEM;
	e->next = NULL;
	e->skip = false;
	e->version = k->version;
	e->len = k->len;
	e->klen = k->klen;
	memcpy(e->key, k->key, k->klen);
	p = e->key + k->klen;
	for (size_t i = 0; i < k->niov; i++) {
		memcpy(p, k->iov[i].iov_base, k->iov[i].iov_len);
		p += k->iov[i].iov_len;
	}
	pthread_mutex_lock(&t->qlock);
	while (t->queued && t->queued + e->len > KV_LAZY_MAX && !t->stop)
		pthread_cond_wait(&t->room, &t->qlock);
	t->queued += e->len;
	*t->tail = e;
	t->tail = &e->next;
	pthread_cond_signal(&t->more);
	pthread_mutex_unlock(&t->qlock);
	return 0;
}

int64_t kv_tier_get(struct xfer_kv *kv, struct kv_key *k, uint64_t want,
		    uint64_t min_version, bool read)
{
	char name[TIER_NAME_MAX], key[STORE_KEY_MAX];
	uint8_t h[TIER_HDR];
	uint64_t len, version, off;
	int64_t ret = XFER_KV_OBJECT_NOT_FOUND;
	struct stat st;
	int fd;

	tier_name(k->key, k->klen, name);
	fd = openat(kv->tier->dirfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? ret : XFER_KV_FILE_READ_FAIL;
	if (pread(fd, h, sizeof(h), 0) != TIER_HDR || fstat(fd, &st) ||
	    memcmp(h, TIER_MAGIC, 8)) {
		ret = XFER_KV_FILE_READ_FAIL;
		goto out;
	}
	version = get_le(h + 8, 8);
	len = get_le(h + 16, 8);
	/* another key of the same hash, or an older file than the master
	 * records (a tier not shared with the client that flushed) */
	if (get_le(h + 24, 8) != k->klen ||
	    pread(fd, key, k->klen, TIER_HDR) != k->klen ||
	    memcmp(key, k->key, k->klen) || version < want)
		goto out;
	ret = XFER_KV_FILE_READ_FAIL;
	if ((uint64_t)st.st_size != TIER_HDR + k->klen + len)
		goto out;
	k->version = version;
	ret = version < min_version ? XFER_KV_VERSION_TOO_OLD :
	      read && len > k->cap ? XFER_KV_INVALID_PARAMS : (int64_t)len;
	off = TIER_HDR + k->klen;
	for (size_t i = 0; read && ret >= 0 && i < k->niov &&
			    off < (uint64_t)st.st_size; i++) {
		size_t n = k->iov[i].iov_len;

		if (n > (uint64_t)st.st_size - off)
			n = (size_t)((uint64_t)st.st_size - off);
		if (pread(fd, k->iov[i].iov_base, n, (off_t)off) != (ssize_t)n)
			ret = XFER_KV_FILE_READ_FAIL;
		off += n;
	}
out:
	close(fd);
	return ret;
}

/* ---- the lazy thread and its reports ---- */

static void report_done(struct kv_rpc *r, const struct store_msg *rep)
{
	struct kv_report *b = container_of(r, struct kv_report, rpc);

	if (!rep || rep->err)
		xfer_log(XFER_LOG_WARN, "xfer store client: the master did "
			 "not take %u flushed versions (%d)", b->n,
			 rep ? rep->err : XFER_KV_RPC_FAIL);
	for (uint32_t i = 0; i < b->n; i++)
		free(b->e[i].key);
	free(b);
}

static void report_send(struct xfer_job *job)
{
	struct kv_report *b = container_of(job, struct kv_report, job);
	struct store_msg *m = b->kv->req;

	memcpy(m->client, b->kv->client_id, STORE_ID_LEN);
	m->n = b->n;
	for (uint32_t i = 0; i < b->n; i++) {
		m->items[i].key = (struct store_str){ b->e[i].key,
						      b->e[i].klen };
		m->items[i].version = b->e[i].version;
	}
	b->rpc.done = report_done;
	kv_rpc_send(b->kv, &b->rpc, STORE_FLUSHED);
}

static void report_post(struct kv_tier *t, struct kv_report **b)
{
	if (!*b)
		return;
	(*b)->job.fn = report_send;
	xfer_reactor_post(t->kv->r, &(*b)->job);
	*b = NULL;
}

/* Mark the entries of @p list whose key comes again later in it: only
 * the last version of a key in a batch is written (the design lets lazy
 * flushes skip versions, never reorder them). Without memory for the
 * table, none is skipped. */
static void skip_superseded(struct kv_lazy *list)
{
	struct kv_lazy **v, **tab;
	size_t n = 0, cap = 4;

	for (struct kv_lazy *e = list; e; e = e->next)
		n++;
	while (cap < 2 * n)
		cap *= 2;
	v = malloc(n * sizeof(*v));
	tab = calloc(cap, sizeof(*tab));
	n = 0;
	for (struct kv_lazy *e = list; v && e; e = e->next)
		v[n++] = e;
	while (v && tab && n--) {
		size_t i = key_hash(v[n]->key, v[n]->klen) & (cap - 1);

		while (tab[i] && (tab[i]->klen != v[n]->klen ||
				  memcmp(tab[i]->key, v[n]->key, v[n]->klen)))
			i = (i + 1) & (cap - 1);
		if (tab[i])
			v[n]->skip = true;
		else
			tab[i] = v[n];
	}
	free(v);
	free(tab);
}

static void *lazy_main(void *arg)
{
	struct kv_tier *t = arg;

	for (;;) {
		struct kv_lazy *e;
		struct kv_report *b = NULL;

		pthread_mutex_lock(&t->qlock);
		while (!t->head && !t->stop)
			pthread_cond_wait(&t->more, &t->qlock);
		e = t->head;
		t->head = NULL;
		t->tail = &t->head;
		pthread_mutex_unlock(&t->qlock);
		if (!e)
			return NULL;   /* stopped, and nothing is left */
		skip_superseded(e);
		while (e) {
			struct kv_lazy *next = e->next;
			struct iovec iov = { e->key + e->klen, e->len };
			int ret = e->skip ? 0 :
				  tier_write(t, e->key, e->klen, &iov, 1,
					     e->len, e->version);
			char *key = NULL;

			if (ret)
				xfer_log(XFER_LOG_WARN, "xfer store client: "
					 "cannot flush: %s", strerror(-ret));
			else if (!e->skip && !b && (b = calloc(1, sizeof(*b))))
				b->kv = t->kv;
			if (!ret && !e->skip && b && (key = malloc(e->klen))) {
				memcpy(key, e->key, e->klen);
				b->e[b->n].key = key;
				b->e[b->n].klen = e->klen;
				b->e[b->n++].version = e->version;
			}
			/* room for the next put at once (the writer and this
			 * thread overlap), and the entry kept for reuse */
			pthread_mutex_lock(&t->qlock);
			t->queued -= e->len;
			pthread_cond_broadcast(&t->room);
			if (t->nspare < KV_SPARES && e->cap <= KV_SPARE_MAX) {
				t->spare[t->nspare++] = e;
				e = NULL;
			}
			pthread_mutex_unlock(&t->qlock);
			free(e);
			if (b && b->n == STORE_BATCH_MAX)
				report_post(t, &b);
			e = next;
		}
		report_post(t, &b);
	}
}

static void tier_set(void *arg)
{
	struct kv_tier *t = arg;

	t->kv->tier = t;
}

int xfer_kv_set_root_fs_dir(struct xfer_kv *kv, const char *dir)
{
	struct kv_tier *t;
	int ret;

	if (!dir || !*dir)
		return -EINVAL;
	if (xfer_reactor_on_thread(kv->r))
		return -EDEADLK;
	if (kv->tier)
		return -EBUSY;
	if (!(t = calloc(1, sizeof(*t))))
		return -ENOMEM;
	t->kv = kv;
	t->tail = &t->head;
	t->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (t->dirfd < 0) {
		ret = -errno;
		free(t);
		return ret;
	}
	pthread_mutex_init(&t->rename_lock, NULL);
	pthread_mutex_init(&t->qlock, NULL);
	pthread_cond_init(&t->more, NULL);
	pthread_cond_init(&t->room, NULL);
	if ((ret = -pthread_create(&t->thread, NULL, lazy_main, t))) {
		close(t->dirfd);
		free(t);
		return ret;
	}
	xfer_reactor_run(kv->r, tier_set, t);
	return 0;
}

void kv_tier_stop(struct xfer_kv *kv)
{
	struct kv_tier *t = kv->tier;

	if (!t)
		return;
	pthread_mutex_lock(&t->qlock);
	t->stop = true;
	pthread_cond_signal(&t->more);
	pthread_mutex_unlock(&t->qlock);
	pthread_join(t->thread, NULL);
}

void kv_tier_free(struct xfer_kv *kv)
{
	struct kv_tier *t = kv->tier;

	if (!t)
		return;
	close(t->dirfd);
	while (t->nspare)
		free(t->spare[--t->nspare]);
	pthread_mutex_destroy(&t->rename_lock);
	pthread_mutex_destroy(&t->qlock);
	pthread_cond_destroy(&t->more);
	pthread_cond_destroy(&t->room);
	free(t);
	kv->tier = NULL;
}
