/*
 * The persist file of xfer-metad before SQLite: the whole store, which
 * the server used to rewrite on every change. Read only, to migrate it.
 *
 * Layout, integers little-endian:
 *   magic     8 bytes   "XFERMETA"
 *   version   u32       1
 *   revision  u64
 *   count     u64       entries
 *   count x { klen u32, vlen u64, key (klen bytes), value (vlen bytes) }
 *   checksum  u64       FNV-1a 64 of every byte before it
 *
 * Parsing checks everything (lengths against the old limits, keys, the
 * checksum, nothing left over) in a first pass that hands out nothing,
 * and only then hands the entries out: a corrupt file yields no entry.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "metadata/metad/key_internal.h"
#include "metadata/metad/legacy_internal.h"

#define VERSION 1
#define HEADER_LEN (METAD_LEGACY_MAGIC_LEN + 4 + 8 + 8)
#define ENTRY_HEADER_LEN 12
#define SUM_LEN 8

struct reader {
	const uint8_t *p;
	size_t left;
};

/* The next @p len bytes, or NULL if the file ends first. */
static const uint8_t *take(struct reader *r, uint64_t len)
{
	const uint8_t *p = r->p;

	if (len > r->left)
		return NULL;
	r->p += len;
	r->left -= (size_t)len;
	return p;
}

static uint64_t le(const uint8_t *p, size_t bytes)
{
	uint64_t v = 0;

	for (size_t i = 0; i < bytes; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

bool metad_legacy_is(const uint8_t *buf, size_t len)
{
	return len >= METAD_LEGACY_MAGIC_LEN &&
	       !memcmp(buf, METAD_LEGACY_MAGIC, METAD_LEGACY_MAGIC_LEN);
}

/*
 * Walk the entries after the header; with @p cb, hand each out (the
 * second pass), without, check each (the first).
 * @return NULL, or the reason the file is refused; *cb_ret holds what a
 *         failing @p cb returned.
 */
static const char *walk(struct reader *r, uint64_t count, metad_entry_cb cb,
			void *arg, int *cb_ret)
{
	const uint8_t *p, *key, *val;
	uint64_t vlen;
	uint32_t klen;

	for (uint64_t i = 0; i < count; i++) {
		if (!(p = take(r, ENTRY_HEADER_LEN)))
			return "truncated entry header";
		klen = (uint32_t)le(p, 4);
		vlen = le(p + 4, 8);
		if (klen == 0 || klen > METAD_KEY_MAX)
			return "key length out of range";
		if (vlen > METAD_LEGACY_VALUE_MAX)
			return "value longer than 64 MiB";
		if (!(key = take(r, klen)) || !(val = take(r, vlen)))
			return "truncated entry";
		if (metad_key_check((const char *)key, klen))
			return "invalid key";
		if (cb && (*cb_ret = cb((const char *)key, klen, val,
					(size_t)vlen, arg)))
			return *cb_ret == -EEXIST ? "duplicate key" : "";
	}
	if (r->left)
		return "bytes after the last entry";
	return NULL;
}

int metad_legacy_parse(const uint8_t *buf, size_t len, metad_entry_cb cb,
		       void *arg, uint64_t *revision, char *err,
		       size_t errlen)
{
	struct reader r;
	uint64_t rev, count;
	const char *why;
	int cb_ret = 0;

	if (len < HEADER_LEN + SUM_LEN)
		why = "shorter than a header";
	else if (!metad_legacy_is(buf, len))
		why = "not an xfer-metad persist file (bad magic)";
	else if (le(buf + len - SUM_LEN, SUM_LEN) !=
		 metad_fnv1a(METAD_FNV_OFFSET, buf, len - SUM_LEN))
		why = "checksum mismatch (damaged or truncated)";
	else if (le(buf + METAD_LEGACY_MAGIC_LEN, 4) != VERSION)
		why = "unknown format version";
	else
		why = NULL;
	if (why)
		goto refuse;

	rev = le(buf + METAD_LEGACY_MAGIC_LEN + 4, 8);
	count = le(buf + METAD_LEGACY_MAGIC_LEN + 12, 8);
	if (count > rev) {
		why = "more keys than changes";
		goto refuse;
	}
	if (rev >= INT64_MAX) { /* the database keeps it signed, and adds */
		why = "revision out of range";
		goto refuse;
	}
	/* the entries, between the header and the checksum, twice */
	r.p = buf + HEADER_LEN;
	r.left = len - SUM_LEN - HEADER_LEN;
	if ((why = walk(&r, count, NULL, NULL, NULL)))
		goto refuse;
	r.p = buf + HEADER_LEN;
	r.left = len - SUM_LEN - HEADER_LEN;
	why = walk(&r, count, cb, arg, &cb_ret);
	if (why && cb_ret != -EEXIST)
		return cb_ret;
	if (why)
		goto refuse;
	*revision = rev;
	return 0;

refuse:
	snprintf(err, errlen, "%s", why);
	return -EINVAL;
}
