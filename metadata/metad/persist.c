/*
 * xfer-metad's persist file: the whole store, rewritten on every change
 * (write FILE.tmp, fsync it, rename it over FILE, fsync the folder) before
 * the change is answered, so a crash at any point leaves the old store or
 * the new one on disk, never a mix. A rewrite costs the size of the store
 * and two fsyncs per change: fine for the few thousand small descriptors
 * a cluster keeps, not meant for bulk data.
 *
 * Layout, integers little-endian:
 *   magic     8 bytes   "XFERMETA"
 *   version   u32       1
 *   revision  u64
 *   count     u64       entries
 *   count x { klen u32, vlen u64, key (klen bytes), value (vlen bytes) }
 *   checksum  u64       FNV-1a 64 of every byte before it
 *
 * Loading checks everything (lengths against the limits, keys, duplicates,
 * the checksum, nothing left over) and refuses the file on any doubt: the
 * server would rather not start than start with part of its data.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "metadata/metad/key_internal.h"
#include "metadata/metad/persist_internal.h"

#define MAGIC "XFERMETA"
#define MAGIC_LEN 8
#define VERSION 1
#define HEADER_LEN (MAGIC_LEN + 4 + 8 + 8)
#define SUM_LEN 8

/* parse()'s answer when memory, not the file, is the trouble */
static const char nomem[] = "out of memory";

struct metad_persist {
	char *path;                    /* the file */
	char *tmp;                     /* path + ".tmp" */
	char *dir;                     /* the folder to fsync after rename */
};

struct metad_persist_writer {
	FILE *f;
	uint64_t sum;
	bool failed;
};

struct metad_persist *metad_persist_new(const char *path)
{
	struct metad_persist *p = calloc(1, sizeof(*p));
	size_t len = strlen(path);
	char *copy = strdup(path);

	if (!p || !copy)
		goto err_free;
	p->path = strdup(path);
	p->tmp = malloc(len + sizeof(".tmp"));
	if (!p->path || !p->tmp)
		goto err_free;
	memcpy(p->tmp, path, len);
	memcpy(p->tmp + len, ".tmp", sizeof(".tmp"));
	p->dir = strdup(dirname(copy));
	if (!p->dir)
		goto err_free;
	free(copy);
	return p;

err_free:
	free(copy);
	metad_persist_free(p);
	errno = ENOMEM;
	return NULL;
}

void metad_persist_free(struct metad_persist *p)
{
	if (!p)
		return;
	free(p->path);
	free(p->tmp);
	free(p->dir);
	free(p);
}

static void put(struct metad_persist_writer *w, const void *p, size_t len)
{
	w->sum = metad_fnv1a(w->sum, p, len);
	if (len && fwrite(p, 1, len, w->f) != len)
		w->failed = true;
}

static void put_le(struct metad_persist_writer *w, uint64_t v, size_t bytes)
{
	uint8_t b[8];

	for (size_t i = 0; i < bytes; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	put(w, b, bytes);
}

static int fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int ret = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd))
		ret = -errno;
	close(fd);
	return ret;
}

void metad_persist_write(struct metad_persist_writer *w, const char *key,
			 size_t klen, const uint8_t *val, size_t vlen)
{
	put_le(w, klen, 4);
	put_le(w, vlen, 8);
	put(w, key, klen);
	put(w, val, vlen);
}

/* Write the file's contents to p->tmp and make it durable. */
static int write_tmp(const struct metad_persist *p, uint64_t revision,
		     uint64_t count, metad_persist_walk_cb walk, void *arg)
{
	struct metad_persist_writer w = { .sum = METAD_FNV_OFFSET };
	int fd, ret = 0;

	fd = open(p->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
		  0644);
	if (fd < 0)
		return -errno;
	w.f = fdopen(fd, "wb");
	if (!w.f) {
		ret = -errno;
		close(fd);
		return ret;
	}
	put(&w, MAGIC, MAGIC_LEN);
	put_le(&w, VERSION, 4);
	put_le(&w, revision, 8);
	put_le(&w, count, 8);
	walk(&w, arg);
	put_le(&w, w.sum, SUM_LEN);
	if (w.failed || fflush(w.f))
		ret = errno ? -errno : -EIO;
	else if (fsync(fileno(w.f)))
		ret = -errno;
	if (fclose(w.f) && !ret)
		ret = -errno;
	return ret;
}

int metad_persist_save(const struct metad_persist *p, uint64_t revision,
		       uint64_t count, metad_persist_walk_cb walk, void *arg)
{
	int ret;

	errno = 0;
	ret = write_tmp(p, revision, count, walk, arg);
	if (ret) {
		unlink(p->tmp);
	} else if (rename(p->tmp, p->path)) {
		ret = -errno;
		unlink(p->tmp);
	} else {
		/* Without this the rename itself may not survive a crash.
		 * If it fails the change is refused (and undone in memory)
		 * although the file may already hold it: the client sees
		 * the error and retries, which is safe for PUT and DELETE. */
		ret = fsync_dir(p->dir);
	}
	if (ret)
		fprintf(stderr, "xfer-metad: cannot save %s: %s\n",
			p->path, strerror(-ret));
	return ret;
}

struct reader {
	const uint8_t *p;
	size_t left;
};

/* The next @p len bytes, or NULL if the file ends first. */
static const uint8_t *take(struct reader *r, size_t len)
{
	const uint8_t *p = r->p;

	if (len > r->left)
		return NULL;
	r->p += len;
	r->left -= len;
	return p;
}

static uint64_t le(const uint8_t *p, size_t bytes)
{
	uint64_t v = 0;

	for (size_t i = 0; i < bytes; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* Read all of @p path into a malloc'd *buf. @return 0 or -errno. */
static int read_file(const char *path, uint8_t **buf, size_t *size)
{
	struct stat st;
	size_t got = 0;
	ssize_t n;
	int fd, ret = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		ret = -errno;
		goto out_close;
	}
	if (!S_ISREG(st.st_mode)) {
		ret = -EINVAL;
		goto out_close;
	}
	*size = (size_t)st.st_size;
	*buf = malloc(*size ? *size : 1);
	if (!*buf) {
		ret = -ENOMEM;
		goto out_close;
	}
	while (got < *size) {
		n = read(fd, *buf + got, *size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ret = n < 0 ? -errno : -EIO; /* shrank under us */
			free(*buf);
			goto out_close;
		}
		got += (size_t)n;
	}
out_close:
	close(fd);
	return ret;
}

/* Parse the file body (checksum already checked), handing each entry
 * to @p cb; the revision to *revision. */
static const char *parse(struct reader *r, metad_persist_entry_cb cb,
			 void *arg, uint64_t *revision_out)
{
	const uint8_t *p, *key, *val;
	uint64_t revision, count, vlen;
	uint32_t klen;
	uint8_t *copy;
	int ret;

	p = take(r, HEADER_LEN);
	if (memcmp(p, MAGIC, MAGIC_LEN))
		return "not an xfer-metad persist file (bad magic)";
	if (le(p + MAGIC_LEN, 4) != VERSION)
		return "unknown format version";
	revision = le(p + MAGIC_LEN + 4, 8);
	count = le(p + MAGIC_LEN + 12, 8);

	for (uint64_t i = 0; i < count; i++) {
		if (!(p = take(r, 12)))
			return "truncated entry header";
		klen = (uint32_t)le(p, 4);
		vlen = le(p + 4, 8);
		if (klen == 0 || klen > METAD_KEY_MAX)
			return "key length out of range";
		if (vlen > METAD_VALUE_MAX)
			return "value longer than 64 MiB";
		if (!(key = take(r, klen)) || !(val = take(r, vlen)))
			return "truncated entry";
		if (metad_key_check((const char *)key, klen))
			return "invalid key";
		copy = malloc(vlen ? vlen : 1);
		if (!copy)
			return nomem;
		memcpy(copy, val, vlen);
		ret = cb((const char *)key, klen, copy, vlen, arg);
		if (ret == -EEXIST)
			return "duplicate key";
		if (ret)
			return nomem;
	}
	if (r->left)
		return "bytes after the last entry";
	if (count > revision)
		return "more keys than changes";
	*revision_out = revision;
	return NULL;
}

int metad_persist_load(const struct metad_persist *p, metad_persist_entry_cb cb,
		       void *arg, uint64_t *revision, char *err,
		       size_t errlen)
{
	struct reader r;
	const char *why;
	uint8_t *buf = NULL;
	size_t size = 0;
	int ret;

	ret = read_file(p->path, &buf, &size);
	if (ret == -ENOENT)
		return 1;
	if (ret) {
		snprintf(err, errlen, "cannot read %s: %s", p->path,
			 strerror(-ret));
		return ret;
	}
	if (size < HEADER_LEN + SUM_LEN)
		why = "shorter than a header";
	else if (le(buf + size - SUM_LEN, SUM_LEN) !=
		 metad_fnv1a(METAD_FNV_OFFSET, buf, size - SUM_LEN))
		why = "checksum mismatch (damaged or truncated)";
	else {
		r.p = buf;
		r.left = size - SUM_LEN;
		why = parse(&r, cb, arg, revision);
	}
	free(buf);
	if (why == nomem) {
		snprintf(err, errlen, "cannot load %s: %s", p->path, why);
		return -ENOMEM;
	}
	if (why) {
		snprintf(err, errlen, "%s: corrupt persist file: %s (refusing "
			 "to start rather than lose data)", p->path, why);
		return -EINVAL;
	}
	return 0;
}
