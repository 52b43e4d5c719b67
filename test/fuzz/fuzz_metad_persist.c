/*
 * xfer-metad's persist loader (metadata/metad/persist.c through
 * metad_store_open(), the way the server starts). The input becomes the
 * persist file; if its first byte is odd, the rest is sealed with the
 * checksum the loader expects, so the fuzzer gets past it to the
 * entries. A file that loads is saved again with one change (a put) and
 * loaded once more: the second load must find the same keys plus that
 * one, at the next revision.
 *
 * To retarget at another loader, change open_store() and seal(): the
 * rest only needs a store opened from a file that may be bad.
 */
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

#include "metadata/metad/key_internal.h"
#include "metadata/metad/store_internal.h"
#include "test/fuzz/fuzz.h"

static char dir[PATH_MAX], path[PATH_MAX];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *tmp = getenv("TMPDIR");
	struct stat st;

	(void)argc;
	(void)argv;
	/* tmpfs when there is one: a save fsyncs twice */
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

static void write_file(const uint8_t *data, size_t size, bool sealed)
{
	uint64_t sum = metad_fnv1a(METAD_FNV_OFFSET, data, size);
	uint8_t le[8];
	FILE *f = fopen(path, "wb");

	for (int i = 0; i < 8; i++)
		le[i] = (uint8_t)(sum >> (8 * i));
	if (!f || (size && fwrite(data, 1, size, f) != size) ||
	    (sealed && fwrite(le, 1, 8, f) != 8) || fclose(f))
		FUZZ_DIE("write %s: %s", path, strerror(errno));
}

static struct metad_store *open_store(void)
{
	char err[512];

	return metad_store_open(path, err, sizeof(err));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char key[] = "xfer-fuzz/added";
	struct metad_store *s, *again;
	size_t count;
	uint64_t rev;
	uint8_t *val;

	if (!size)
		return 0;
	write_file(data + 1, size - 1, data[0] & 1);
	s = open_store();
	if (!s)
		goto out;
	/* Known, left to the store's owner: a file at revision 2^64-1 loads,
	 * the next change wraps the revision to 0, and the file saved then
	 * (more keys than changes) is refused at the next start. Until the
	 * loader refuses that revision or a change refuses to wrap it, such
	 * a file is only loaded here. */
	if (s->revision == UINT64_MAX) {
		metad_store_free(s);
		goto out;
	}
	count = s->count + !metad_store_get(s, key);
	rev = s->revision + 1;
	val = malloc(1);
	if (!val || metad_store_put(s, key, val, 1))
		FUZZ_DIE("put after a load failed");
	metad_store_free(s);
	again = open_store();
	if (!again)
		FUZZ_DIE("the file the store saved does not load");
	if (again->count != count || again->revision != rev ||
	    !metad_store_get(again, key))
		FUZZ_DIE("saved %zu keys at revision %llu, loaded %zu at %llu",
			 count, (unsigned long long)rev, again->count,
			 (unsigned long long)again->revision);
	metad_store_free(again);
out:
	unlink(path);
	return 0;
}
