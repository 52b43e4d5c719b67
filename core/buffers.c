/* Registry of the local segment's buffers: sorted, read-mostly. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/buffers_internal.h"
#include "core/desc_internal.h"

void xfer_buffers_init(struct xfer_buffers *bs)
{
	memset(bs, 0, sizeof(*bs));
	pthread_rwlock_init(&bs->lock, NULL);
}

struct xfer_buffer *xfer_buffer_new(uint64_t addr, uint64_t len,
				    const char *location, bool remote_access)
{
	struct xfer_buffer *b = calloc(1, sizeof(*b));

	if (!b || !(b->location = strdup(location))) {
		free(b);
		return NULL;
	}
	b->addr = addr;
	b->len = len;
	b->remote_access = remote_access;
	return b;
}

void xfer_buffer_free(struct xfer_buffer *b)
{
	if (b) {
		free(b->location);
		free(b->leave);
	}
	free(b);
}

void xfer_buffers_fini(struct xfer_buffers *bs)
{
	for (size_t i = 0; i < bs->n; i++)
		xfer_buffer_free(bs->v[i]);
	free(bs->v);
	pthread_rwlock_destroy(&bs->lock);
}

/* Index of the first buffer whose start is above @p addr. */
static size_t upper_bound(const struct xfer_buffers *bs, uint64_t addr)
{
	size_t lo = 0, hi = bs->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (bs->v[mid]->addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

struct xfer_buffer *xfer_buffers_find(struct xfer_buffers *bs, uint64_t addr,
				      uint64_t len, bool remote_only)
{
	size_t i = upper_bound(bs, addr);
	struct xfer_buffer *b;

	if (i == 0 || len == 0 || addr + len < addr)
		return NULL;
	b = bs->v[i - 1];
	if (addr + len > b->addr + b->len || (remote_only && !b->remote_access) ||
	    (atomic_load(&b->pins) & XFER_BUFFER_LEAVING))
		return NULL;
	return b;
}

void xfer_buffer_pin(struct xfer_buffer *b)
{
	atomic_fetch_add(&b->pins, 1);
}

void xfer_buffer_unpin(struct xfer_buffers *bs, struct xfer_buffer *b)
{
	/* exactly one caller sees the last pin of a leaving buffer go */
	if (atomic_fetch_sub(&b->pins, 1) == (XFER_BUFFER_LEAVING | 1))
		bs->unpinned(b, bs->arg);
}

int64_t xfer_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool xfer_buffer_overdue(const struct xfer_buffer *b)
{
	return (atomic_load(&b->pins) & XFER_BUFFER_LEAVING) &&
	       xfer_now_ms() >= atomic_load(&b->deadline_ms);
}

struct xfer_buffer *xfer_buffers_acquire(struct xfer_buffers *bs,
					 uint64_t addr, uint64_t len)
{
	struct xfer_buffer *b;

	pthread_rwlock_rdlock(&bs->lock);
	b = xfer_buffers_find(bs, addr, len, false);
	if (b)
		atomic_fetch_add(&b->users, 1);
	pthread_rwlock_unlock(&bs->lock);
	return b;
}

int xfer_buffers_insert(struct xfer_buffers *bs, struct xfer_buffer *b)
{
	int ret = -EEXIST;
	size_t i;

	pthread_rwlock_wrlock(&bs->lock);
	i = upper_bound(bs, b->addr);
	if ((i > 0 && bs->v[i - 1]->addr + bs->v[i - 1]->len > b->addr) ||
	    (i < bs->n && bs->v[i]->addr < b->addr + b->len))
		goto err_unlock;
	if (bs->n == bs->cap) {
		size_t cap = bs->cap ? bs->cap * 2 : 8;
		struct xfer_buffer **v = realloc(bs->v, cap * sizeof(*v));

		ret = -ENOMEM;
		if (!v)
			goto err_unlock;
		bs->v = v;
		bs->cap = cap;
	}
	memmove(&bs->v[i + 1], &bs->v[i], (bs->n - i) * sizeof(*bs->v));
	bs->v[i] = b;
	bs->n++;
	pthread_rwlock_unlock(&bs->lock);
	return 0;

err_unlock:
	pthread_rwlock_unlock(&bs->lock);
	return ret;
}

/* Drop entry @p i; caller holds the write lock. */
static void drop_at(struct xfer_buffers *bs, size_t i)
{
	memmove(&bs->v[i], &bs->v[i + 1], (bs->n - i - 1) * sizeof(*bs->v));
	bs->n--;
}

int xfer_buffers_remove(struct xfer_buffers *bs, uint64_t addr,
			struct xfer_buffer **out)
{
	int ret = xfer_buffers_leave(bs, addr, 0, NULL, out);

	return ret == -EAGAIN ? -EBUSY : ret;
}

int xfer_buffers_leave(struct xfer_buffers *bs, uint64_t addr,
		       int64_t deadline_ms, void *leave,
		       struct xfer_buffer **out)
{
	struct xfer_buffer *b;
	long pins;
	size_t i;
	int ret = -ENOENT;

	pthread_rwlock_wrlock(&bs->lock);
	i = upper_bound(bs, addr);
	if (i == 0 || bs->v[i - 1]->addr != addr)
		goto out;
	b = bs->v[i - 1];
	ret = -EBUSY;
	pins = atomic_load(&b->pins);
	if (atomic_load(&b->users) || (pins & XFER_BUFFER_LEAVING))
		goto out;
	ret = -EAGAIN;
	if (pins && !leave)
		goto out;
	if (pins) {
		/* under the write lock no pin is added; one may go, and
		 * whoever sees the count reach 0 with the flag set finishes */
		b->leave = leave;
		atomic_store(&b->deadline_ms, deadline_ms);
		pins = atomic_fetch_or(&b->pins, XFER_BUFFER_LEAVING);
		ret = -EINPROGRESS;
		if (pins)
			goto out;
		b->leave = NULL; /* the last pin went meanwhile */
	}
	drop_at(bs, i - 1);
	*out = b;
	ret = 0;
out:
	pthread_rwlock_unlock(&bs->lock);
	return ret;
}

void xfer_buffers_take(struct xfer_buffers *bs, struct xfer_buffer *b)
{
	pthread_rwlock_wrlock(&bs->lock);
	for (size_t i = 0; i < bs->n; i++)
		if (bs->v[i] == b) {
			drop_at(bs, i);
			break;
		}
	pthread_rwlock_unlock(&bs->lock);
}

int xfer_buffers_describe(struct xfer_buffers *bs, struct xfer_desc *d,
			  void (*keys)(const struct xfer_buffer *b,
				       struct xfer_desc_buf *db, void *arg),
			  void *arg)
{
	int ret = 0;

	pthread_rwlock_rdlock(&bs->lock);
	d->nbufs = 0;
	d->bufs = calloc(bs->n ? bs->n : 1, sizeof(*d->bufs));
	if (!d->bufs) {
		ret = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < bs->n; i++) {
		struct xfer_buffer *b = bs->v[i];
		struct xfer_desc_buf *db = &d->bufs[d->nbufs];

		if (!b->remote_access)
			continue;
		db->name = strdup(b->location);
		if (!db->name) {
			ret = -ENOMEM;
			goto out;
		}
		db->addr = b->addr;
		db->length = b->len;
		d->nbufs++;
		if (keys)
			keys(b, db, arg);
	}
out:
	pthread_rwlock_unlock(&bs->lock);
	return ret;
}
