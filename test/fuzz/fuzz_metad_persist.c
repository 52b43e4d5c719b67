/*
 * xfer-metad's persist file, as the server reads it at start:
 *  - the old format's parser alone (metadata/metad/legacy.c), on the
 *    input's bytes;
 *  - the file through metad_store_open(), the way the server starts: an
 *    old persist file is migrated into the SQLite database (migrate.c,
 *    db.c), anything else must be one of xfer-metad's databases or is
 *    refused.
 * If the input's first byte is odd, the rest is sealed with the old
 * format's checksum, so the fuzzer gets past it to the entries. A file
 * that loads gets one change (a put) and is opened once more: the second
 * start must find the same keys plus that one, at the next revision.
 *
 * To retarget at another loader, change open_store() and the seal: the
 * rest only needs a store opened from a file that may be bad.
 */
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

#include "metadata/metad/legacy_internal.h"
#include "metadata/metad/store_internal.h"
#include "test/fuzz/fuzz.h"

static char dir[PATH_MAX], path[PATH_MAX];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *tmp = getenv("TMPDIR");
	struct stat st;

	(void)argc;
	(void)argv;
	/* tmpfs when there is one: every change is fsync'd */
	if (!stat("/dev/shm", &st) && S_ISDIR(st.st_mode) &&
	    !access("/dev/shm", W_OK))
		tmp = "/dev/shm";
	snprintf(dir, sizeof(dir), "%s/xfer-fuzz-persist-XXXXXX",
		 tmp ? tmp : "/tmp");
	if (!mkdtemp(dir))
		FUZZ_DIE("mkdtemp %s: %s", dir, strerror(errno));
	snprintf(path, sizeof(path), "%s/store", dir);
	return 0;
}

/* Remove the file and whatever a start leaves beside it. */
static void clean(void)
{
	static const char *const sfx[] = {
		"", ".migrated", ".migrating", "-wal", "-shm", "-journal",
		".migrating-wal", ".migrating-shm", ".migrating-journal",
	};
	char p[PATH_MAX + 32];

	for (size_t i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++) {
		snprintf(p, sizeof(p), "%s%s", path, sfx[i]);
		unlink(p);
	}
}

static void write_file(const uint8_t *data, size_t size)
{
	FILE *f = fopen(path, "wb");

	if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f))
		FUZZ_DIE("write %s: %s", path, strerror(errno));
}

static struct metad_store *open_store(void)
{
	static const struct metad_limits limits = {
		.value_bytes = METAD_VALUE_BYTES_DEFAULT,
		.keys = METAD_KEYS_DEFAULT,
		.bytes = METAD_BYTES_DEFAULT,
	};
	char err[512];

	return metad_store_open(path, &limits, err, sizeof(err));
}

/* metad_entry_cb: count the entries (duplicates are the store's to
 * find, as the loader's callers do). */
static int count_entry(const char *key, size_t klen, const uint8_t *val,
		       size_t vlen, void *arg)
{
	(void)key;
	(void)klen;
	(void)val;
	(void)vlen;
	++*(size_t *)arg;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char key[] = "xfer-fuzz/added";
	struct metad_store *s, *again;
	uint8_t *file;
	size_t len, count, n = 0;
	uint64_t rev, sum;
	char err[256];

	if (!size)
		return 0;
	len = size - 1 + (data[0] & 1 ? 8 : 0);
	file = malloc(len ? len : 1);
	if (!file)
		FUZZ_DIE("malloc");
	memcpy(file, data + 1, size - 1);
	if (data[0] & 1) {
		sum = metad_fnv1a(METAD_FNV_OFFSET, data + 1, size - 1);
		for (int i = 0; i < 8; i++)
			file[size - 1 + i] = (uint8_t)(sum >> (8 * i));
	}
	metad_legacy_parse(file, len, count_entry, &n, &rev, err, sizeof(err));

	clean();
	write_file(file, len);
	free(file);
	s = open_store();
	if (!s)
		goto out;
	/* A store at the database's last revision takes no more changes. */
	if (s->revision >= INT64_MAX) {
		file = malloc(1);
		if (!file || metad_store_put(s, key, file, 1) != -EOVERFLOW)
			FUZZ_DIE("a change past the last revision was taken");
		metad_store_free(s);
		goto out;
	}
	count = s->count + !metad_store_get(s, key);
	rev = s->revision + 1;
	file = malloc(1);
	if (!file || metad_store_put(s, key, file, 1))
		FUZZ_DIE("put after a start failed");
	metad_store_free(s);
	again = open_store();
	if (!again)
		FUZZ_DIE("the store does not start again after one change");
	if (again->count != count || again->revision != rev ||
	    !metad_store_get(again, key))
		FUZZ_DIE("saved %zu keys at revision %llu, loaded %zu at %llu",
			 count, (unsigned long long)rev, again->count,
			 (unsigned long long)again->revision);
	metad_store_free(again);
out:
	clean();
	return 0;
}
