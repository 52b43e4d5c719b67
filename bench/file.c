/*
 * xfer-bench --file: the target segment is a file segment. The target
 * (loopback: its engine) registers the file, initiators open
 * "nvmeof/<target name>" and address it from offset 0 as they would the
 * target's buffer 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/bench_internal.h"

/* --verify: the file holds the pattern, as a target buffer would. */
static void write_pattern(const struct bench_opts *o, int fd)
{
	size_t chunk = 1u << 20, n;
	uint8_t *buf = xmalloc(chunk);
	uint64_t off = 0;
	ssize_t w;

	while (off < o->buffer_size) {
		n = o->buffer_size - off < chunk ? o->buffer_size - off : chunk;
		bench_fill_pattern(buf, off, n);
		w = pwrite(fd, buf, n, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			die("--file: cannot write '%s': %s", o->file,
			    w < 0 ? strerror(errno) : "no progress");
		off += (uint64_t)w;
	}
	free(buf);
}

/* Reads past the end of a regular file fail: a short one is extended. */
void bench_register_file(const struct bench_opts *o, struct xfer_engine *e)
{
	struct stat st;
	int fd, ret;

	fd = open(o->file, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		die("--file: cannot open '%s': %s", o->file, strerror(errno));
	if (fstat(fd, &st))
		die("--file: cannot stat '%s': %s", o->file, strerror(errno));
	if (S_ISREG(st.st_mode) && (uint64_t)st.st_size < o->buffer_size &&
	    ftruncate(fd, (off_t)o->buffer_size))
		die("--file: cannot extend '%s' to %zu bytes: %s", o->file,
		    o->buffer_size, strerror(errno));
	if (o->verify)
		write_pattern(o, fd);
	close(fd);
	ret = xfer_register_file(e, o->file, o->buffer_size, NULL);
	if (ret)
		die_api(e, "xfer_register_file", ret);
}

char *bench_segment_name(const struct bench_opts *o, const char *name)
{
	size_t len = strlen(name) + sizeof("nvmeof/");
	char *s = xmalloc(len);

	snprintf(s, len, "%s%s", o->file ? "nvmeof/" : "", name);
	return s;
}
