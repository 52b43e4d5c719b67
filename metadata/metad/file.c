/* xfer-metad's file helpers: read a whole file, fsync a folder. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "metadata/metad/file_internal.h"

char *metad_concat(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	char *s = malloc(la + lb + 1);

	if (!s)
		return NULL;
	memcpy(s, a, la);
	memcpy(s + la, b, lb + 1);
	return s;
}

int metad_read_file(const char *path, uint8_t **buf, size_t *len)
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
	*len = (size_t)st.st_size;
	*buf = malloc(*len ? *len : 1);
	if (!*buf) {
		ret = -ENOMEM;
		goto out_close;
	}
	while (got < *len) {
		n = read(fd, *buf + got, *len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			ret = n < 0 ? -errno : -EIO; /* shrank under us */
			free(*buf);
			*buf = NULL;
			goto out_close;
		}
		got += (size_t)n;
	}
out_close:
	close(fd);
	return ret;
}

int metad_sync_dir(const char *path)
{
	char *copy = strdup(path);
	int fd, ret = 0;

	if (!copy)
		return -ENOMEM;
	fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(copy);
	if (fd < 0)
		return -errno;
	if (fsync(fd))
		ret = -errno;
	close(fd);
	return ret;
}
