/* Open files, and the engine's own file segment and its document. */
#define _GNU_SOURCE /* statx, O_DIRECT */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "util/json_internal.h"
#include "transports/file/file_internal.h"

/* What O_DIRECT needs aligned (memory, offset, length): statx's answer,
 * else a block device's logical sector, else a page; 0 when the file
 * system says it takes no direct I/O. */
static unsigned dio_align(int fd)
{
	struct statx sx;
	int sector;

	if (!statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) &&
	    (sx.stx_mask & STATX_DIOALIGN))
		return sx.stx_dio_offset_align > sx.stx_dio_mem_align ?
		       sx.stx_dio_offset_align : sx.stx_dio_mem_align;
	if (!ioctl(fd, BLKSSZGET, &sector) && sector > 0)
		return (unsigned)sector;
	return 4096;
}

/* Is @p fd a regular file on tmpfs or ramfs? (A device node's file
 * system is devtmpfs, whose magic is tmpfs's: a block device is not.) */
static bool in_memory(int fd)
{
	struct statfs fs;
	struct stat st;

	return !fstat(fd, &st) && S_ISREG(st.st_mode) && !fstatfs(fd, &fs) &&
	       (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC);
}

int xfer_file_open(struct file_transport *t, const char *path,
		   struct file_open **out)
{
	struct file_open *fo = calloc(1, sizeof(*fo));
	int ret;

	if (!fo || !(fo->path = strdup(path))) {
		free(fo);
		return -ENOMEM;
	}
	fo->fd = open(path, O_RDWR | O_CLOEXEC);
	if (fo->fd < 0) {
		ret = -errno;
		free(fo->path);
		free(fo);
		return ret;
	}
	/* tmpfs and some others refuse O_DIRECT: buffered I/O only. */
	fo->dfd = open(path, O_RDWR | O_CLOEXEC | O_DIRECT);
	if (fo->dfd >= 0) {
		fo->align = dio_align(fo->dfd);
		if (!fo->align) {
			close(fo->dfd);
			fo->dfd = -1;
		}
	}
	fo->mem = in_memory(fo->fd);
	atomic_init(&fo->refs, 1);
	fo->t = t;
	*out = fo;
	return 0;
}

void xfer_file_open_get(struct file_open *fo)
{
	atomic_fetch_add(&fo->refs, 1);
}

void xfer_file_open_put(struct file_open *fo)
{
	if (atomic_fetch_sub(&fo->refs, 1) != 1)
		return;
	if (fo->map)
		munmap(fo->map, fo->map_len);
	if (fo->dfd >= 0)
		close(fo->dfd);
	close(fo->fd);
	free(fo->path);
	free(fo);
}

/* The bytes a file or block device holds now. */
static int file_size(int fd, uint64_t *size)
{
	struct stat st;

	if (fstat(fd, &st))
		return -errno;
	if (S_ISBLK(st.st_mode))
		return ioctl(fd, BLKGETSIZE64, size) ? -errno : 0;
	*size = (uint64_t)st.st_size;
	return 0;
}

static void own_file_free(struct own_file *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->nmap; i++) {
		free(f->map_host[i]);
		free(f->map_path[i]);
	}
	free(f->map_host);
	free(f->map_path);
	if (f->fo)
		xfer_file_open_put(f->fo);
	free(f);
}

static bool valid_str(const char *s)
{
	return s && s[0] && strlen(s) < XFER_JSON_MAX_STR;
}

/* A new own file for @p path with a copy of @p map, not yet open. */
static int own_file_new(const char *const *map, struct own_file **out)
{
	struct own_file *f = calloc(1, sizeof(*f));
	size_t n = 0;

	*out = f;
	if (!f)
		return -ENOMEM;
	while (map && map[2 * n]) {
		if (!valid_str(map[2 * n]) || !valid_str(map[2 * n + 1]))
			return -EINVAL;
		n++;
	}
	if (!n)
		return 0;
	f->map_host = calloc(n, sizeof(char *));
	f->map_path = calloc(n, sizeof(char *));
	if (!f->map_host || !f->map_path)
		return -ENOMEM;
	for (; f->nmap < n; f->nmap++) {
		f->map_host[f->nmap] = strdup(map[2 * f->nmap]);
		f->map_path[f->nmap] = strdup(map[2 * f->nmap + 1]);
		if (!f->map_host[f->nmap] || !f->map_path[f->nmap]) {
			f->nmap++;
			return -ENOMEM;
		}
	}
	return 0;
}

static struct own_file *own_by_path(struct file_transport *t,
				    const char *path)
{
	struct own_file *f;

	TAILQ_FOREACH(f, &t->files, link)
		if (!strcmp(f->fo->path, path))
			return f;
	return NULL;
}

/* Grow @p f to @p length; the same is no change, less is refused. */
static int own_grow(struct own_file *f, uint64_t length)
{
	if (length < f->length)
		return -EEXIST;
	f->length = length;
	return 0;
}

int xfer_file_add(struct file_transport *t, const char *path,
		  uint64_t length, const char *const *map)
{
	struct xfer_error *err = t->base.env->err;
	struct own_file *f, *old;
	int ret;

	if (!valid_str(path))
		return xfer_error_set(err, -EINVAL, "register file: no path");
	ret = own_file_new(map, &f);
	if (!ret) /* may block: not under the lock */
		ret = xfer_file_open(t, path, &f->fo);
	if (!ret && !length && !(ret = file_size(f->fo->fd, &length)) &&
	    !length)
		ret = -EINVAL;
	if (ret) {
		own_file_free(f);
		return xfer_error_set(err, ret, "register file %s: %s", path,
				      ret == -EINVAL ? "empty, or a bad "
				      "local_path_map" : strerror(-ret));
	}
	f->length = length;
	pthread_mutex_lock(&t->lock);
	old = own_by_path(t, path);
	if (old)
		ret = own_grow(old, length);
	else
		TAILQ_INSERT_TAIL(&t->files, f, link);
	pthread_mutex_unlock(&t->lock);
	if (!old)
		return 1;
	own_file_free(f);
	return ret ? xfer_error_set(err, ret, "register file %s: registered "
				    "with a larger length", path) : 0;
}

int xfer_file_remove(struct file_transport *t, const char *path)
{
	struct own_file *f;
	int ret = -ENOENT;

	pthread_mutex_lock(&t->lock);
	f = path ? own_by_path(t, path) : NULL;
	if (f && atomic_load(&f->fo->refs) > 1) {
		ret = -EBUSY;
	} else if (f) {
		TAILQ_REMOVE(&t->files, f, link);
		ret = 0;
	}
	pthread_mutex_unlock(&t->lock);
	if (!ret) {
		own_file_free(f);
		return 0;
	}
	return xfer_error_set(t->base.env->err, ret, "unregister file %s: %s",
			      path ? path : "(null)", ret == -EBUSY ?
			      "in use by a transfer" : "not registered");
}

struct file_open *xfer_file_own_find(struct file_transport *t, uint64_t off,
				     uint64_t len, uint64_t *in_file)
{
	struct file_open *fo = NULL;
	struct own_file *f;
	uint64_t start = 0;

	if (!len || off + len < off)
		return NULL;
	pthread_mutex_lock(&t->lock);
	TAILQ_FOREACH(f, &t->files, link) {
		if (off >= start && off - start < f->length) {
			if (off - start + len <= f->length) {
				fo = f->fo;
				xfer_file_open_get(fo);
				*in_file = off - start;
			}
			break;
		}
		start += f->length;
	}
	pthread_mutex_unlock(&t->lock);
	return fo;
}

int xfer_file_own_buffer(struct file_transport *t, size_t index,
			 uint64_t *off, uint64_t *len, const char **name)
{
	struct own_file *f;
	uint64_t start = 0;
	int ret = -ENOENT;

	pthread_mutex_lock(&t->lock);
	TAILQ_FOREACH(f, &t->files, link) {
		if (!index--) {
			*off = start;
			*len = f->length;
			if (name)
				*name = f->fo->path;
			ret = 0;
			break;
		}
		start += f->length;
	}
	pthread_mutex_unlock(&t->lock);
	return ret;
}

/* Buffer @p b of the document for @p f, borrowing its strings: its map,
 * and this host with the path itself unless the map names this host. */
static int doc_buf(struct file_transport *t, struct own_file *f,
		   struct xfer_file_buf *b)
{
	bool self = true;

	b->length = f->length;
	b->file_path = f->fo->path;
	b->map_host = calloc(f->nmap + 1, sizeof(char *));
	b->map_path = calloc(f->nmap + 1, sizeof(char *));
	if (!b->map_host || !b->map_path)
		return -ENOMEM;
	for (; b->nmap < f->nmap; b->nmap++) {
		b->map_host[b->nmap] = f->map_host[b->nmap];
		b->map_path[b->nmap] = f->map_path[b->nmap];
		self = self && strcmp(f->map_host[b->nmap], t->host);
	}
	if (self) {
		b->map_host[b->nmap] = t->host;
		b->map_path[b->nmap++] = f->fo->path;
	}
	return 0;
}

char *xfer_file_document(struct xfer_transport *tp, size_t *len)
{
	struct file_transport *t = container_of(tp, struct file_transport,
						base);
	struct xfer_file_doc d = {
		.server_name = (char *)tp->env->name,
		.data_port = t->data_port,
	};
	struct own_file *f;
	char *json = NULL;
	int ret = 0;

	pthread_mutex_lock(&t->lock);
	TAILQ_FOREACH(f, &t->files, link)
		d.nbufs++;
	d.bufs = calloc(d.nbufs + 1, sizeof(*d.bufs));
	d.nbufs = 0;
	if (!d.bufs)
		ret = -ENOMEM;
	TAILQ_FOREACH(f, &t->files, link)
		if (!ret)
			ret = doc_buf(t, f, &d.bufs[d.nbufs++]);
	if (!ret && xfer_file_doc_encode(&d, &json, len))
		json = NULL;
	pthread_mutex_unlock(&t->lock);
	for (size_t i = 0; d.bufs && i < d.nbufs; i++) {
		free(d.bufs[i].map_host);
		free(d.bufs[i].map_path);
	}
	free(d.bufs);
	return json;
}

void xfer_file_own_free(struct file_transport *t)
{
	struct own_file *f;

	while ((f = TAILQ_FIRST(&t->files))) {
		TAILQ_REMOVE(&t->files, f, link);
		own_file_free(f);
	}
}
