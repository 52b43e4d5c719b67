/*
 * Mooncake's C API: file segments. registerLocalFile() is
 * xfer_register_file(); the file's id is its index in the engine's file
 * segment ("nvmeof/<name>"), and a request to a file segment addresses
 * [target_offset, +length) of file file_id. The files are listed, to
 * register them again when installTransport() remakes the engine.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi/capi_internal.h"

#define KIND "nvmeof/"

bool supportFileBuffer(transfer_engine_t engine)
{
	return engine != NULL;
}

/* The index of @p path in @p e's own file segment, or -ENOENT. */
static int64_t file_index(struct xfer_engine *e, const char *path)
{
	char name[512];
	const char *at;
	uint64_t off, len;
	int64_t seg;

	snprintf(name, sizeof(name), KIND "%s", xfer_engine_name(e));
	seg = xfer_segment_open(e, name);
	for (size_t i = 0; seg >= 0; i++) {
		if (xfer_segment_buffer(e, seg, i, &off, &len, &at))
			return -ENOENT;
		if (!strcmp(at, path))
			return (int64_t)i;
	}
	return seg;
}

/* A file call's errno as Mooncake's code: a path that cannot be opened
 * or is not registered is a bad argument here, not a store's error. */
static int file_err(int ret)
{
	switch (-ret) {
	case 0:
	case ENOMEM:
	case EBUSY:
	case EPROTONOSUPPORT:
		return te_err(ret);
	default:
		return TE_ERR_INVALID_ARGUMENT;
	}
}

static int file_add(struct te *t, const char *path, size_t size)
{
	struct te_file *v;
	char *p = strdup(path);
	int ret = -ENOMEM;

	pthread_mutex_lock(&t->mem_lock);
	v = p ? realloc(t->files, (t->nfiles + 1) * sizeof(*v)) : NULL;
	if (v) {
		t->files = v;
		v[t->nfiles++] = (struct te_file){ p, size };
		p = NULL;
		ret = 0;
	}
	pthread_mutex_unlock(&t->mem_lock);
	free(p);
	return ret;
}

int registerLocalFile(transfer_engine_t engine, const char *path, size_t size,
		      file_id_t *id)
{
	struct te *t = engine;
	struct xfer_engine *e;
	int64_t index;
	int ret;

	if (!path || !id || !(e = te_enter(t)))
		return TE_ERR_INVALID_ARGUMENT;
	ret = xfer_register_file(e, path, size, NULL);
	index = ret ? ret : file_index(e, path);
	if (index >= 0 && (ret = file_add(t, path, size)))
		xfer_unregister_file(e, path);
	te_leave(t);
	if (ret || index < 0)
		return file_err(ret ? ret : (int)index);
	*id = (file_id_t)index;
	return 0;
}

int unregisterLocalFile(transfer_engine_t engine, const char *path)
{
	struct te *t = engine;
	struct xfer_engine *e;
	int ret;

	if (!path || !(e = te_enter(t)))
		return TE_ERR_INVALID_ARGUMENT;
	ret = xfer_unregister_file(e, path);
	pthread_mutex_lock(&t->mem_lock);
	for (size_t i = 0; !ret && i < t->nfiles; i++) {
		if (strcmp(t->files[i].path, path))
			continue;
		free(t->files[i].path);
		t->files[i] = t->files[--t->nfiles];
		break;
	}
	pthread_mutex_unlock(&t->mem_lock);
	te_leave(t);
	return file_err(ret);
}

int te_files_reregister(struct te *t)
{
	int ret = 0, r;

	/* the write lock is held: the list does not change meanwhile */
	for (size_t i = 0; i < t->nfiles; i++) {
		r = xfer_register_file(t->e, t->files[i].path,
				       t->files[i].size, NULL);
		if (r && !ret)
			ret = r;
	}
	return ret;
}

void te_files_fini(struct te *t)
{
	for (size_t i = 0; i < t->nfiles; i++)
		free(t->files[i].path);
	free(t->files);
	t->files = NULL;
	t->nfiles = 0;
}

uint64_t te_file_offset(struct te *t, const char *seg, int64_t xid,
			uint32_t file_id, uint64_t offset)
{
	uint64_t start, len;

	if (strncmp(seg, KIND, strlen(KIND)))
		return offset;
	if (xfer_segment_buffer(t->e, xid, file_id, &start, &len, NULL) ||
	    offset > UINT64_MAX - start)
		return UINT64_MAX; /* INVALID: no such file */
	return start + offset;
}
