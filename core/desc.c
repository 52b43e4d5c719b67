/*
 * JSON codecs for the segment descriptor and the handshake bodies
 * (PROTOCOL.md §1–2), on yajl: yajl_gen to encode, yajl_tree to decode.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <yajl/yajl_gen.h>
#include <yajl/yajl_parse.h>
#include <yajl/yajl_tree.h>

#include "desc_internal.h"

/*
 * yajl_tree_free() recurses once per nesting level, so a deeply nested body
 * from a peer could exhaust the stack; ours nest at most 4 levels.
 */
#define JSON_MAX_DEPTH 32
/* Most QPs accepted in a Connection body (the peer uses 2 by default). */
#define HS_MAX_QP 64

__attribute__((format(printf, 3, 4)))
static int fail(char *err, size_t errlen, const char *fmt, ...)
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
static int oom(char *err, size_t errlen)
{
	if (err && errlen)
		snprintf(err, errlen, "out of memory");
	return -ENOMEM;
}

/* ---- GIDs ---- */

/* Not isxdigit(): the locale must not change what a peer may send. */
static int hex_val(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int xfer_gid_parse(const char *s, uint8_t gid[16])
{
	uint8_t tmp[16];
	int i, hi, lo;

	for (i = 0; i < 16; i++, s += 3) {
		/* stops at a NUL before reading past it */
		hi = hex_val(s[0]);
		lo = hi < 0 ? -1 : hex_val(s[1]);
		if (lo < 0 || s[2] != (i < 15 ? ':' : '\0'))
			return -EINVAL;
		tmp[i] = hi << 4 | lo;
	}
	memcpy(gid, tmp, sizeof(tmp));
	return 0;
}

void xfer_gid_format(const uint8_t gid[16], char out[48])
{
	static const char hex[] = "0123456789abcdef";
	int i;

	for (i = 0; i < 16; i++) {
		out[3 * i] = hex[gid[i] >> 4];
		out[3 * i + 1] = hex[gid[i] & 0xf];
		out[3 * i + 2] = i < 15 ? ':' : '\0';
	}
}

/* ---- encoding ---- */

static yajl_gen gen_new(void)
{
	yajl_gen g = yajl_gen_alloc(NULL);

	/* Emit only what a strict peer (and our own decoder) will accept. */
	if (g)
		yajl_gen_config(g, yajl_gen_validate_utf8, 1);
	return g;
}

static yajl_gen_status gen_str(yajl_gen g, const char *s)
{
	if (!s)
		s = "";
	return yajl_gen_string(g, (const unsigned char *)s, strlen(s));
}

/* yajl_gen_integer() takes a long long; addresses may be >= 2^63. */
static yajl_gen_status gen_u64(yajl_gen g, uint64_t v)
{
	char num[24];
	int n = snprintf(num, sizeof(num), "%" PRIu64, v);

	return yajl_gen_number(g, num, n);
}

/*
 * Turn the status of a chain of yajl_gen calls into a result: on success
 * copy the text out with the '\n' that ends every body on the wire. The only
 * failure a well-formed chain can meet is a string that is not UTF-8.
 */
static int gen_finish(yajl_gen g, int failed, char **json, size_t *len)
{
	const unsigned char *buf;
	size_t n;
	char *s;
	int ret;

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

/* Local time as the peer writes it: "YYYY-MM-DD HH:MM:SS.ffffff". */
static void now_str(char *buf, size_t size)
{
	struct timespec ts;
	struct tm tm;
	size_t n;

	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	n = strftime(buf, size, "%Y-%m-%d %H:%M:%S", &tm);
	snprintf(buf + n, size - n, ".%06ld", ts.tv_nsec / 1000);
}

static int gen_keys(yajl_gen g, const char *key, const uint32_t *keys,
		    size_t n)
{
	int failed = gen_str(g, key) || yajl_gen_array_open(g);
	size_t i;

	for (i = 0; !failed && i < n; i++)
		failed = gen_u64(g, keys[i]);
	return failed || yajl_gen_array_close(g);
}

/* Fields in alphabetical order, as the peer's writer (jsoncpp) has them. */
static int gen_buf(yajl_gen g, const struct xfer_desc_buf *b, size_t nkeys,
		   bool rdma)
{
	return yajl_gen_map_open(g) ||
	       gen_str(g, "addr") || gen_u64(g, b->addr) ||
	       gen_str(g, "length") || gen_u64(g, b->length) ||
	       (rdma && gen_keys(g, "lkey", b->lkey, nkeys)) ||
	       gen_str(g, "name") || gen_str(g, b->name) ||
	       (rdma && gen_keys(g, "rkey", b->rkey, nkeys)) ||
	       yajl_gen_map_close(g);
}

static int gen_bufs(yajl_gen g, const struct xfer_desc *d, bool rdma)
{
	int failed = gen_str(g, "buffers") || yajl_gen_array_open(g);
	size_t i;

	for (i = 0; !failed && i < d->nbufs; i++)
		failed = gen_buf(g, &d->bufs[i], d->ndevs, rdma);
	return failed || yajl_gen_array_close(g);
}

static int gen_devs(yajl_gen g, const struct xfer_desc *d)
{
	int failed = gen_str(g, "devices") || yajl_gen_array_open(g);
	char gid[48];
	size_t i;

	for (i = 0; !failed && i < d->ndevs; i++) {
		xfer_gid_format(d->devs[i].gid, gid);
		failed = yajl_gen_map_open(g) ||
			 gen_str(g, "gid") || gen_str(g, gid) ||
			 gen_str(g, "lid") || gen_u64(g, d->devs[i].lid) ||
			 gen_str(g, "name") || gen_str(g, d->devs[i].name) ||
			 yajl_gen_map_close(g);
	}
	return failed || yajl_gen_array_close(g);
}

static int gen_names(yajl_gen g, char *const *names, size_t n)
{
	int failed = yajl_gen_array_open(g);
	size_t i;

	for (i = 0; !failed && i < n; i++)
		failed = gen_str(g, names[i]);
	return failed || yajl_gen_array_close(g);
}

static int gen_prio(yajl_gen g, const struct xfer_desc *d)
{
	int failed = gen_str(g, "priority_matrix") || yajl_gen_map_open(g);
	const struct xfer_prio *p;
	size_t i;

	for (i = 0; !failed && i < d->nprio; i++) {
		p = &d->prio[i];
		failed = gen_str(g, p->location) || yajl_gen_array_open(g) ||
			 gen_names(g, p->pref, p->npref) ||
			 gen_names(g, p->other, p->nother) ||
			 yajl_gen_array_close(g);
	}
	return failed || yajl_gen_map_close(g);
}

int xfer_desc_encode(const struct xfer_desc *d, char **json, size_t *len)
{
	/* this codec speaks the TCP form when not told otherwise */
	const char *proto = d->protocol ? d->protocol : "tcp";
	bool rdma = !strcmp(proto, "rdma");
	const char *ts = d->timestamp;
	char now[32];
	yajl_gen g;
	int failed;

	if (!ts) {
		now_str(now, sizeof(now));
		ts = now;
	}
	g = gen_new();
	if (!g)
		return -ENOMEM;
	failed = yajl_gen_map_open(g) || gen_bufs(g, d, rdma) ||
		 (rdma && gen_devs(g, d)) ||
		 gen_str(g, "name") || gen_str(g, d->name) ||
		 (rdma && gen_prio(g, d)) ||
		 gen_str(g, "protocol") || gen_str(g, proto);
	if (!failed && !rdma)
		failed = gen_str(g, "tcp_data_port") ||
			 gen_u64(g, d->tcp_data_port) ||
			 gen_str(g, "tcp_proto_version") ||
			 gen_u64(g, d->tcp_proto_version);
	failed = failed || gen_str(g, "timestamp") || gen_str(g, ts) ||
		 yajl_gen_map_close(g);
	return gen_finish(g, failed, json, len);
}

int xfer_hs_conn_encode(const struct xfer_hs_conn *c, char **json,
			size_t *len)
{
	yajl_gen g;
	int failed;
	size_t i;

	g = gen_new();
	if (!g)
		return -ENOMEM;
	failed = yajl_gen_map_open(g) ||
		 gen_str(g, "local_gid") || gen_str(g, c->local_gid) ||
		 gen_str(g, "local_lid") || gen_u64(g, c->local_lid) ||
		 gen_str(g, "local_nic_path") ||
		 gen_str(g, c->local_nic_path) ||
		 gen_str(g, "payload") || gen_str(g, c->payload) ||
		 gen_str(g, "peer_nic_path") || gen_str(g, c->peer_nic_path) ||
		 gen_str(g, "qp_num") || yajl_gen_array_open(g);
	for (i = 0; !failed && i < c->nqp; i++)
		failed = gen_u64(g, c->qp_num[i]);
	failed = failed || yajl_gen_array_close(g) ||
		 gen_str(g, "ready_ack") || yajl_gen_bool(g, c->ready_ack) ||
		 gen_str(g, "reply_msg") || gen_str(g, c->reply_msg) ||
		 yajl_gen_map_close(g);
	return gen_finish(g, failed, json, len);
}

int xfer_hs_notify_encode(const struct xfer_hs_notify *n, char **json,
			  size_t *len)
{
	yajl_gen g;
	int failed;

	g = gen_new();
	if (!g)
		return -ENOMEM;
	failed = yajl_gen_map_open(g) ||
		 gen_str(g, "name") || gen_str(g, n->name) ||
		 gen_str(g, "notify_msg") || gen_str(g, n->notify_msg) ||
		 yajl_gen_map_close(g);
	return gen_finish(g, failed, json, len);
}

/* ---- parsing ---- */

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
	unsigned char *msg;
	yajl_status st;
	yajl_handle h;
	int ret;

	h = yajl_alloc(&scan_cbs, NULL, &scan);
	if (!h)
		return oom(err, errlen);
	/* as yajl_tree_parse() does, so both accept the same texts */
	yajl_config(h, yajl_allow_comments, 1);
	st = yajl_parse(h, (const unsigned char *)json, len);
	if (st == yajl_status_ok)
		st = yajl_complete_parse(h);

	if (st == yajl_status_client_canceled) {
		ret = fail(err, errlen, "nested deeper than %d levels",
			   JSON_MAX_DEPTH);
	} else if (st != yajl_status_ok) {
		/* the short form: the verbose one quotes the input */
		msg = yajl_get_error(h, 0, NULL, 0);
		if (msg) {
			msg[strcspn((char *)msg, "\n")] = '\0';
			ret = fail(err, errlen, "%s", msg);
			yajl_free_error(h, msg);
		} else {
			ret = oom(err, errlen);
		}
	} else if (!scan.object) {
		ret = fail(err, errlen, "not a JSON object");
	} else {
		ret = 0;
	}
	yajl_free(h);
	return ret;
}

/*
 * Parse @len bytes into a tree whose root is an object. The text is checked
 * first (depth, syntax, NUL bytes), so yajl_tree_parse(), which needs a
 * NUL-ended copy, can then fail only for want of memory.
 */
static int parse(const char *json, size_t len, yajl_val *root, char *err,
		 size_t errlen)
{
	char *s;
	int ret;

	ret = xfer_json_check_object(json, len, err, errlen);
	if (ret)
		return ret;
	s = malloc(len + 1);
	if (!s)
		return oom(err, errlen);
	memcpy(s, json, len);
	s[len] = '\0';
	*root = yajl_tree_parse(s, NULL, 0);
	free(s);
	return *root ? 0 : oom(err, errlen);
}

/* First value of @key in object @obj, NULL if absent. */
static yajl_val obj_get(yajl_val obj, const char *key)
{
	size_t i;

	for (i = 0; i < obj->u.object.len; i++)
		if (!strcmp(obj->u.object.keys[i], key))
			return obj->u.object.values[i];
	return NULL;
}

/*
 * yajl marks integers beyond long long as not-integer, so read the text.
 * JSON allows no '+' and no leading zeros: all digits is a non-negative
 * integer, and anything else (sign, fraction, exponent) is not one.
 */
static bool parse_u64(yajl_val v, uint64_t *out)
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

/* @where prefixes @key in messages: "" at top level, else "buffers[3].". */
static int get_uint(yajl_val obj, const char *where, const char *key,
		    uint64_t min, uint64_t max, uint64_t *out, char *err,
		    size_t errlen)
{
	yajl_val v = obj_get(obj, key);

	if (!v)
		return fail(err, errlen, "%s%s: missing", where, key);
	if (!parse_u64(v, out) || *out < min || *out > max)
		return fail(err, errlen,
			    "%s%s: must be an integer in %" PRIu64 "..%" PRIu64,
			    where, key, min, max);
	return 0;
}

/* Borrow the string @key of @obj: present, a string, not too long. */
static int get_strv(yajl_val obj, const char *where, const char *key,
		    const char **out, char *err, size_t errlen)
{
	yajl_val v = obj_get(obj, key);

	if (!v)
		return fail(err, errlen, "%s%s: missing", where, key);
	if (!YAJL_IS_STRING(v))
		return fail(err, errlen, "%s%s: must be a string", where, key);
	if (strlen(v->u.string) > XFER_DESC_MAX_STR)
		return fail(err, errlen, "%s%s: longer than %d bytes", where,
			    key, XFER_DESC_MAX_STR);
	*out = v->u.string;
	return 0;
}

static int get_str(yajl_val obj, const char *where, const char *key,
		   char **out, char *err, size_t errlen)
{
	const char *s;
	int ret = get_strv(obj, where, key, &s, err, errlen);

	if (ret)
		return ret;
	*out = strdup(s);
	return *out ? 0 : oom(err, errlen);
}

/* As get_str(), and the string must not be empty. */
static int get_name(yajl_val obj, const char *where, const char *key,
		    char **out, char *err, size_t errlen)
{
	int ret = get_str(obj, where, key, out, err, errlen);

	if (!ret && !(*out)[0])
		ret = fail(err, errlen, "%s%s: must not be empty", where, key);
	return ret;
}

/* A non-empty string of at most XFER_DESC_MAX_STR bytes, or NULL. */
static const char *name_val(yajl_val v)
{
	if (!YAJL_IS_STRING(v) || !v->u.string[0] ||
	    strlen(v->u.string) > XFER_DESC_MAX_STR)
		return NULL;
	return v->u.string;
}

/* ---- priority matrix ---- */

/* @v: an array of names into *out, *n. */
static int names_fill(yajl_val v, const char *where, size_t row, size_t list,
		      char ***out, size_t *n, char *err, size_t errlen)
{
	const char *s;
	size_t i;

	if (!YAJL_IS_ARRAY(v))
		return fail(err, errlen, "%sentry %zu[%zu]: must be an array",
			    where, row, list);
	if (!v->u.array.len)
		return 0;
	*out = calloc(v->u.array.len, sizeof(**out));
	if (!*out)
		return oom(err, errlen);
	*n = v->u.array.len;
	for (i = 0; i < *n; i++) {
		s = name_val(v->u.array.values[i]);
		if (!s)
			return fail(err, errlen,
				    "%sentry %zu[%zu][%zu]: must be a string of 1..%d bytes",
				    where, row, list, i, XFER_DESC_MAX_STR);
		(*out)[i] = strdup(s);
		if (!(*out)[i])
			return oom(err, errlen);
	}
	return 0;
}

/*
 * Entry @i of @obj: "<location>": [[preferred], [others]]. The message
 * names the entry by index: a location from a peer may hold a newline.
 */
static int prio_row_fill(struct xfer_prio *p, yajl_val obj, size_t i,
			 const char *where, char *err, size_t errlen)
{
	const char *loc = obj->u.object.keys[i];
	yajl_val v = obj->u.object.values[i];
	size_t n;
	int ret;

	if (!loc[0] || strlen(loc) > XFER_DESC_MAX_STR)
		return fail(err, errlen,
			    "%sentry %zu: location must be 1..%d bytes",
			    where, i, XFER_DESC_MAX_STR);
	/* the peer writes both lists; a missing others list means none */
	n = YAJL_IS_ARRAY(v) ? v->u.array.len : 0;
	if (n < 1 || n > 2)
		return fail(err, errlen,
			    "%sentry %zu: must be an array of 1 or 2 arrays",
			    where, i);
	p->location = strdup(loc);
	if (!p->location)
		return oom(err, errlen);
	ret = names_fill(v->u.array.values[0], where, i, 0, &p->pref,
			 &p->npref, err, errlen);
	if (!ret && n > 1)
		ret = names_fill(v->u.array.values[1], where, i, 1, &p->other,
				 &p->nother, err, errlen);
	return ret;
}

/* Shared by xfer_prio_decode() and the descriptor's "priority_matrix". */
static int prio_fill(yajl_val obj, const char *where, struct xfer_prio **out,
		     size_t *n, char *err, size_t errlen)
{
	struct xfer_prio *rows;
	size_t i, len = obj->u.object.len;
	int ret = 0;

	*out = NULL;
	*n = 0;
	if (!len)
		return 0;
	rows = calloc(len, sizeof(*rows));
	if (!rows)
		return oom(err, errlen);
	for (i = 0; !ret && i < len; i++)
		ret = prio_row_fill(&rows[i], obj, i, where, err, errlen);
	if (ret) {
		xfer_prio_free(rows, len);
		return ret;
	}
	*out = rows;
	*n = len;
	return 0;
}

int xfer_prio_decode(const char *json, size_t len, struct xfer_prio **out,
		     size_t *n, char *err, size_t errlen)
{
	yajl_val root;
	int ret;

	*out = NULL;
	*n = 0;
	ret = parse(json, len, &root, err, errlen);
	if (ret)
		return ret;
	ret = prio_fill(root, "", out, n, err, errlen);
	yajl_tree_free(root);
	return ret;
}

static void names_free(char **names, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

void xfer_prio_free(struct xfer_prio *p, size_t n)
{
	size_t i;

	if (!p)
		return;
	for (i = 0; i < n; i++) {
		free(p[i].location);
		names_free(p[i].pref, p[i].npref);
		names_free(p[i].other, p[i].nother);
	}
	free(p);
}

/* ---- descriptor ---- */

/* @n keys (one per device) under @key of buffer @obj. */
static int keys_fill(yajl_val obj, const char *where, const char *key,
		     size_t n, uint32_t **out, char *err, size_t errlen)
{
	yajl_val v = obj_get(obj, key);
	uint64_t u;
	size_t i;

	if (!v)
		return fail(err, errlen, "%s%s: missing", where, key);
	if (!YAJL_IS_ARRAY(v) || v->u.array.len != n)
		return fail(err, errlen,
			    "%s%s: must be an array of %zu keys, one per device",
			    where, key, n);
	*out = calloc(n, sizeof(**out));
	if (!*out)
		return oom(err, errlen);
	for (i = 0; i < n; i++) {
		if (!parse_u64(v->u.array.values[i], &u) || u > UINT32_MAX)
			return fail(err, errlen,
				    "%s%s[%zu]: must be an integer in 0..%"
				    PRIu32, where, key, i, UINT32_MAX);
		(*out)[i] = u;
	}
	return 0;
}

/* @d->ndevs is set first: non-zero only for protocol "rdma". */
static int buf_fill(const struct xfer_desc *d, struct xfer_desc_buf *b,
		    size_t i, yajl_val v, char *err, size_t errlen)
{
	char where[32];
	int ret;

	if (!YAJL_IS_OBJECT(v))
		return fail(err, errlen, "buffers[%zu]: must be an object", i);
	snprintf(where, sizeof(where), "buffers[%zu].", i);
	ret = get_uint(v, where, "addr", 1, UINT64_MAX, &b->addr, err,
		       errlen);
	if (ret)
		return ret;
	ret = get_uint(v, where, "length", 1, UINT64_MAX, &b->length, err,
		       errlen);
	if (ret)
		return ret;
	if (b->length > UINT64_MAX - b->addr)
		return fail(err, errlen,
			    "buffers[%zu]: addr + length overflows", i);
	ret = get_str(v, where, "name", &b->name, err, errlen);
	if (ret || !d->ndevs)
		return ret;
	ret = keys_fill(v, where, "lkey", d->ndevs, &b->lkey, err, errlen);
	if (ret)
		return ret;
	return keys_fill(v, where, "rkey", d->ndevs, &b->rkey, err, errlen);
}

static int bufs_fill(struct xfer_desc *d, yajl_val root, char *err,
		     size_t errlen)
{
	yajl_val bufs = obj_get(root, "buffers");
	size_t i, n;
	int ret;

	if (!bufs)
		return fail(err, errlen, "buffers: missing");
	if (!YAJL_IS_ARRAY(bufs))
		return fail(err, errlen, "buffers: must be an array");
	n = bufs->u.array.len;
	if (n > XFER_DESC_MAX_BUFFERS)
		return fail(err, errlen, "buffers: more than %d entries",
			    XFER_DESC_MAX_BUFFERS);
	if (!n)
		return 0;
	d->bufs = calloc(n, sizeof(*d->bufs));
	if (!d->bufs)
		return oom(err, errlen);
	d->nbufs = n;
	for (i = 0; i < n; i++) {
		ret = buf_fill(d, &d->bufs[i], i, bufs->u.array.values[i], err,
			       errlen);
		if (ret)
			return ret;
	}
	return 0;
}

static int tcp_fill(struct xfer_desc *d, yajl_val root, char *err,
		    size_t errlen)
{
	uint64_t v;
	int ret;

	ret = get_uint(root, "", "tcp_data_port", 1, UINT16_MAX, &v, err,
		       errlen);
	if (ret)
		return ret;
	d->tcp_data_port = v;
	/* Peers from before protocol v2 do not send the field. */
	v = 1;
	if (obj_get(root, "tcp_proto_version")) {
		ret = get_uint(root, "", "tcp_proto_version", 1, 2, &v, err,
			       errlen);
		if (ret)
			return ret;
	}
	d->tcp_proto_version = v;
	return 0;
}

static int dev_fill(struct xfer_desc_dev *dev, size_t i, yajl_val v,
		    char *err, size_t errlen)
{
	char where[32];
	const char *gid;
	uint64_t lid;
	int ret;

	if (!YAJL_IS_OBJECT(v))
		return fail(err, errlen, "devices[%zu]: must be an object", i);
	snprintf(where, sizeof(where), "devices[%zu].", i);
	ret = get_name(v, where, "name", &dev->name, err, errlen);
	if (ret)
		return ret;
	ret = get_uint(v, where, "lid", 0, UINT16_MAX, &lid, err, errlen);
	if (ret)
		return ret;
	dev->lid = lid;
	ret = get_strv(v, where, "gid", &gid, err, errlen);
	if (ret)
		return ret;
	if (xfer_gid_parse(gid, dev->gid))
		return fail(err, errlen,
			    "%sgid: must be 16 hex bytes joined by ':'", where);
	return 0;
}

static int devs_fill(struct xfer_desc *d, yajl_val root, char *err,
		     size_t errlen)
{
	yajl_val devs = obj_get(root, "devices");
	size_t i, j, n;
	int ret;

	if (!devs)
		return fail(err, errlen, "devices: missing");
	n = YAJL_IS_ARRAY(devs) ? devs->u.array.len : 0;
	if (n < 1 || n > XFER_DESC_MAX_DEVS)
		return fail(err, errlen,
			    "devices: must be an array of 1..%d entries",
			    XFER_DESC_MAX_DEVS);
	d->devs = calloc(n, sizeof(*d->devs));
	if (!d->devs)
		return oom(err, errlen);
	d->ndevs = n;
	for (i = 0; i < n; i++) {
		ret = dev_fill(&d->devs[i], i, devs->u.array.values[i], err,
			       errlen);
		if (ret)
			return ret;
		/* keys and the matrix address devices by name */
		for (j = 0; j < i; j++)
			if (!strcmp(d->devs[j].name, d->devs[i].name))
				return fail(err, errlen,
					    "devices[%zu].name: same as devices[%zu]",
					    i, j);
	}
	return 0;
}

/* "rdma" fields but the per-buffer keys, which bufs_fill() reads. */
static int rdma_fill(struct xfer_desc *d, yajl_val root, char *err,
		     size_t errlen)
{
	yajl_val m;
	int ret;

	ret = devs_fill(d, root, err, errlen);
	if (ret)
		return ret;
	m = obj_get(root, "priority_matrix");
	if (!m)
		return 0;
	if (!YAJL_IS_OBJECT(m))
		return fail(err, errlen, "priority_matrix: must be an object");
	return prio_fill(m, "priority_matrix: ", &d->prio, &d->nprio, err,
			 errlen);
}

/* Fill @d from @root; on failure what was filled is left for the caller. */
static int desc_fill(struct xfer_desc *d, yajl_val root, char *err,
		     size_t errlen)
{
	int ret;

	ret = get_name(root, "", "name", &d->name, err, errlen);
	if (ret)
		return ret;
	ret = get_str(root, "", "protocol", &d->protocol, err, errlen);
	if (ret)
		return ret;
	/* Other protocols carry neither TCP nor RDMA fields; leave those
	 * zero. */
	if (!strcmp(d->protocol, "tcp"))
		ret = tcp_fill(d, root, err, errlen);
	else if (!strcmp(d->protocol, "rdma"))
		ret = rdma_fill(d, root, err, errlen);
	if (ret)
		return ret;
	if (obj_get(root, "timestamp")) {
		ret = get_str(root, "", "timestamp", &d->timestamp, err,
			      errlen);
		if (ret)
			return ret;
	}
	return bufs_fill(d, root, err, errlen);
}

int xfer_desc_decode(const char *json, size_t len, struct xfer_desc **out,
		     char *err, size_t errlen)
{
	struct xfer_desc *d;
	yajl_val root;
	int ret;

	ret = parse(json, len, &root, err, errlen);
	if (ret)
		return ret;
	d = calloc(1, sizeof(*d));
	if (!d) {
		ret = oom(err, errlen);
		goto err_free_tree;
	}
	ret = desc_fill(d, root, err, errlen);
	if (ret)
		goto err_free_desc;
	yajl_tree_free(root);
	*out = d;
	return 0;

err_free_desc:
	xfer_desc_free(d);
err_free_tree:
	yajl_tree_free(root);
	return ret;
}

void xfer_desc_free(struct xfer_desc *d)
{
	size_t i;

	if (!d)
		return;
	for (i = 0; i < d->nbufs; i++) {
		free(d->bufs[i].name);
		free(d->bufs[i].lkey);
		free(d->bufs[i].rkey);
	}
	free(d->bufs);
	for (i = 0; i < d->ndevs; i++)
		free(d->devs[i].name);
	free(d->devs);
	xfer_prio_free(d->prio, d->nprio);
	free(d->timestamp);
	free(d->protocol);
	free(d->name);
	free(d);
}

static int conn_fill(struct xfer_hs_conn *c, yajl_val root, char *err,
		     size_t errlen)
{
	const struct {
		const char *key;
		char **dst;
	} strs[] = {
		{ "local_gid", &c->local_gid },
		{ "local_nic_path", &c->local_nic_path },
		{ "payload", &c->payload },
		{ "peer_nic_path", &c->peer_nic_path },
		{ "reply_msg", &c->reply_msg },
	};
	yajl_val v;
	uint64_t u;
	size_t i;
	int ret;

	for (i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
		ret = get_str(root, "", strs[i].key, strs[i].dst, err, errlen);
		if (ret)
			return ret;
	}
	ret = get_uint(root, "", "local_lid", 0, UINT32_MAX, &u, err, errlen);
	if (ret)
		return ret;
	c->local_lid = u;

	v = obj_get(root, "ready_ack");
	if (!v)
		return fail(err, errlen, "ready_ack: missing");
	if (!YAJL_IS_TRUE(v) && !YAJL_IS_FALSE(v))
		return fail(err, errlen, "ready_ack: must be true or false");
	c->ready_ack = YAJL_IS_TRUE(v);

	v = obj_get(root, "qp_num");
	if (!v)
		return fail(err, errlen, "qp_num: missing");
	if (!YAJL_IS_ARRAY(v))
		return fail(err, errlen, "qp_num: must be an array");
	if (v->u.array.len > HS_MAX_QP)
		return fail(err, errlen, "qp_num: more than %d entries",
			    HS_MAX_QP);
	if (!v->u.array.len)
		return 0;
	c->qp_num = calloc(v->u.array.len, sizeof(*c->qp_num));
	if (!c->qp_num)
		return oom(err, errlen);
	c->nqp = v->u.array.len;
	for (i = 0; i < c->nqp; i++) {
		if (!parse_u64(v->u.array.values[i], &u) || u > UINT32_MAX)
			return fail(err, errlen,
				    "qp_num[%zu]: must be an integer in 0..%"
				    PRIu32, i, UINT32_MAX);
		c->qp_num[i] = u;
	}
	return 0;
}

int xfer_hs_conn_decode(const char *json, size_t len, struct xfer_hs_conn *c,
			char *err, size_t errlen)
{
	yajl_val root;
	int ret;

	memset(c, 0, sizeof(*c));
	ret = parse(json, len, &root, err, errlen);
	if (ret)
		return ret;
	ret = conn_fill(c, root, err, errlen);
	if (ret)
		xfer_hs_conn_clear(c);
	yajl_tree_free(root);
	return ret;
}

void xfer_hs_conn_clear(struct xfer_hs_conn *c)
{
	free(c->local_gid);
	free(c->local_nic_path);
	free(c->payload);
	free(c->peer_nic_path);
	free(c->qp_num);
	free(c->reply_msg);
	memset(c, 0, sizeof(*c));
}

int xfer_hs_notify_decode(const char *json, size_t len,
			  struct xfer_hs_notify *n, char *err, size_t errlen)
{
	yajl_val root;
	int ret;

	memset(n, 0, sizeof(*n));
	ret = parse(json, len, &root, err, errlen);
	if (ret)
		return ret;
	ret = get_str(root, "", "name", &n->name, err, errlen);
	if (!ret)
		ret = get_str(root, "", "notify_msg", &n->notify_msg, err,
			      errlen);
	if (ret)
		xfer_hs_notify_clear(n);
	yajl_tree_free(root);
	return ret;
}

void xfer_hs_notify_clear(struct xfer_hs_notify *n)
{
	free(n->name);
	free(n->notify_msg);
	memset(n, 0, sizeof(*n));
}

int xfer_rpc_meta_encode(const char *host, uint16_t port, char **json,
			 size_t *len)
{
	yajl_gen g;
	int failed;

	g = gen_new();
	if (!g)
		return -ENOMEM;
	failed = yajl_gen_map_open(g) ||
		 gen_str(g, "ip_or_host_name") || gen_str(g, host) ||
		 gen_str(g, "rpc_port") || gen_u64(g, port) ||
		 yajl_gen_map_close(g);
	return gen_finish(g, failed, json, len);
}

int xfer_rpc_meta_decode(const char *json, size_t len, char **host,
			 uint16_t *port, char *err, size_t errlen)
{
	yajl_val root;
	char *h = NULL;
	uint64_t p;
	int ret;

	ret = parse(json, len, &root, err, errlen);
	if (ret)
		return ret;
	ret = get_name(root, "", "ip_or_host_name", &h, err, errlen);
	if (!ret)
		ret = get_uint(root, "", "rpc_port", 1, UINT16_MAX, &p, err,
			       errlen);
	yajl_tree_free(root);
	if (ret) {
		free(h);
		return ret;
	}
	*host = h;
	*port = p;
	return 0;
}
