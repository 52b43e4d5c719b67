/* JSON helpers on yajl: generators, a strict checker, field readers. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_parse.h>

#include "util/json_internal.h"

/* Ours nest at most 4 levels. */
#define JSON_MAX_DEPTH 32

int xfer_json_fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -EPROTO;
}

/* Callers print @err on any failure, so fill it for this one too. */
int xfer_json_oom(char *err, size_t errlen)
{
	if (err && errlen)
		snprintf(err, errlen, "out of memory");
	return -ENOMEM;
}

/* ---- encoding ---- */

yajl_gen xfer_json_gen_new(void)
{
	yajl_gen g = yajl_gen_alloc(NULL);

	/* Emit only what a strict peer (and our own decoder) will accept. */
	if (g)
		yajl_gen_config(g, yajl_gen_validate_utf8, 1);
	return g;
}

int xfer_json_str(yajl_gen g, const char *s)
{
	if (!s)
		s = "";
	return yajl_gen_string(g, (const unsigned char *)s, strlen(s));
}

int xfer_json_u64(yajl_gen g, uint64_t v)
{
	char num[24];
	int n = snprintf(num, sizeof(num), "%" PRIu64, v);

	return yajl_gen_number(g, num, n);
}

/* The only failure a well-formed chain can meet is a string that is not
 * UTF-8. */
int xfer_json_finish(yajl_gen g, int failed, char **json, size_t *len)
{
	const unsigned char *buf;
	size_t n;
	char *s;
	int ret;

	if (!g)
		return -ENOMEM;
	if (failed) {
		ret = -EINVAL;
		goto out;
	}
	yajl_gen_get_buf(g, &buf, &n);
	s = malloc(n + 2);
	if (!s) {
		ret = -ENOMEM;
		goto out;
	}
	memcpy(s, buf, n);
	s[n] = '\n';
	s[n + 1] = '\0';
	*json = s;
	*len = n + 1;
	ret = 0;
out:
	yajl_gen_free(g);
	return ret;
}

/* ---- checking ---- */

struct json_scan {
	unsigned int depth;
	bool opened;	/* a map or array has been opened */
	bool object;	/* the first one opened was a map */
};

/* Only one top-level value is allowed, so it is an object iff the first
 * container opened is a map (a scalar opens none). */
static int scan_open(struct json_scan *s, bool map)
{
	if (!s->opened) {
		s->opened = true;
		s->object = map;
	}
	return ++s->depth <= JSON_MAX_DEPTH;
}

static int scan_map(void *ctx)
{
	return scan_open(ctx, true);
}

static int scan_array(void *ctx)
{
	return scan_open(ctx, false);
}

static int scan_close(void *ctx)
{
	((struct json_scan *)ctx)->depth--;
	return 1;
}

static const yajl_callbacks scan_cbs = {
	.yajl_start_map = scan_map,
	.yajl_end_map = scan_close,
	.yajl_start_array = scan_array,
	.yajl_end_array = scan_close,
};

int xfer_json_check_object(const char *json, size_t len, char *err,
			   size_t errlen)
{
	struct json_scan scan = { 0 };
	const char *nul = memchr(json, '\0', len);
	unsigned char *msg;
	yajl_status st;
	yajl_handle h;
	int ret;

	/* JSON has no place for one, but yajl lets it pass in a comment,
	 * where yajl_tree_parse()'s NUL-ended copy would then end early */
	if (nul)
		return xfer_json_fail(err, errlen, "NUL byte at offset %zu",
				      (size_t)(nul - json));
	h = yajl_alloc(&scan_cbs, NULL, &scan);
	if (!h)
		return xfer_json_oom(err, errlen);
	/* as yajl_tree_parse() does, so both accept the same texts */
	yajl_config(h, yajl_allow_comments, 1);
	st = yajl_parse(h, (const unsigned char *)json, len);
	if (st == yajl_status_ok)
		st = yajl_complete_parse(h);

	if (st == yajl_status_client_canceled) {
		ret = xfer_json_fail(err, errlen, "nested deeper than %d levels",
				     JSON_MAX_DEPTH);
	} else if (st != yajl_status_ok) {
		/* the short form: the verbose one quotes the input */
		msg = yajl_get_error(h, 0, NULL, 0);
		if (msg) {
			msg[strcspn((char *)msg, "\n")] = '\0';
			ret = xfer_json_fail(err, errlen, "%s", msg);
			yajl_free_error(h, msg);
		} else {
			ret = xfer_json_oom(err, errlen);
		}
	} else if (!scan.object) {
		ret = xfer_json_fail(err, errlen, "not a JSON object");
	} else {
		ret = 0;
	}
	yajl_free(h);
	return ret;
}

/*
 * The text is checked first (depth, syntax, NUL bytes), so
 * yajl_tree_parse(), which needs a NUL-ended copy, can then fail only for
 * want of memory.
 */
int xfer_json_parse(const char *json, size_t len, yajl_val *root, char *err,
		    size_t errlen)
{
	char *s;
	int ret;

	ret = xfer_json_check_object(json, len, err, errlen);
	if (ret)
		return ret;
	s = malloc(len + 1);
	if (!s)
		return xfer_json_oom(err, errlen);
	memcpy(s, json, len);
	s[len] = '\0';
	*root = yajl_tree_parse(s, NULL, 0);
	free(s);
	return *root ? 0 : xfer_json_oom(err, errlen);
}

/* ---- reading ---- */

yajl_val xfer_json_get(yajl_val obj, const char *key)
{
	for (size_t i = 0; i < obj->u.object.len; i++)
		if (!strcmp(obj->u.object.keys[i], key))
			return obj->u.object.values[i];
	return NULL;
}

/*
 * yajl marks integers beyond long long as not-integer, so read the text.
 * JSON allows no '+' and no leading zeros: all digits is a non-negative
 * integer, and anything else (sign, fraction, exponent) is not one.
 */
bool xfer_json_to_u64(yajl_val v, uint64_t *out)
{
	const char *s;

	if (!YAJL_IS_NUMBER(v))
		return false;
	s = YAJL_GET_NUMBER(v);
	if (s[strspn(s, "0123456789")] != '\0')
		return false;
	errno = 0;
	*out = strtoull(s, NULL, 10);
	return errno == 0;
}

const char *xfer_json_name(yajl_val v)
{
	if (!YAJL_IS_STRING(v) || !v->u.string[0] ||
	    strlen(v->u.string) > XFER_JSON_MAX_STR)
		return NULL;
	return v->u.string;
}

int xfer_json_get_uint(yajl_val obj, const char *where, const char *key,
		       uint64_t min, uint64_t max, uint64_t *out, char *err,
		       size_t errlen)
{
	yajl_val v = xfer_json_get(obj, key);

	if (!v)
		return xfer_json_fail(err, errlen, "%s%s: missing", where, key);
	if (!xfer_json_to_u64(v, out) || *out < min || *out > max)
		return xfer_json_fail(err, errlen,
				      "%s%s: must be an integer in %" PRIu64
				      "..%" PRIu64, where, key, min, max);
	return 0;
}

int xfer_json_get_strv(yajl_val obj, const char *where, const char *key,
		       const char **out, char *err, size_t errlen)
{
	yajl_val v = xfer_json_get(obj, key);

	if (!v)
		return xfer_json_fail(err, errlen, "%s%s: missing", where, key);
	if (!YAJL_IS_STRING(v))
		return xfer_json_fail(err, errlen, "%s%s: must be a string",
				      where, key);
	if (strlen(v->u.string) > XFER_JSON_MAX_STR)
		return xfer_json_fail(err, errlen, "%s%s: longer than %d bytes",
				      where, key, XFER_JSON_MAX_STR);
	*out = v->u.string;
	return 0;
}

int xfer_json_get_str(yajl_val obj, const char *where, const char *key,
		      char **out, char *err, size_t errlen)
{
	const char *s;
	int ret = xfer_json_get_strv(obj, where, key, &s, err, errlen);

	if (ret)
		return ret;
	*out = strdup(s);
	return *out ? 0 : xfer_json_oom(err, errlen);
}

int xfer_json_get_name(yajl_val obj, const char *where, const char *key,
		       char **out, char *err, size_t errlen)
{
	int ret = xfer_json_get_str(obj, where, key, out, err, errlen);

	if (!ret && !(*out)[0])
		ret = xfer_json_fail(err, errlen, "%s%s: must not be empty",
				     where, key);
	return ret;
}
