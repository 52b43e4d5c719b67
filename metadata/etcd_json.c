/*
 * The etcd JSON gateway's encoding: keys and values as base64 (RFC 4648,
 * padded; OpenSSL's codec) in JSON bodies, int64 fields as JSON strings.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <openssl/evp.h>

#include "metadata/etcd_internal.h"

static const char b64_chars[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int b64_add(struct evbuffer *out, const void *src, size_t len)
{
	struct evbuffer_iovec v;
	size_t n = (len + 2) / 3 * 4;

	if (!n)
		return 0;
	if (len > INT_MAX / 4 * 3)
		return -1;
	/* EVP_EncodeBlock ends the text with a NUL: room for it too. */
	if (evbuffer_reserve_space(out, n + 1, &v, 1) < 1)
		return -1;
	v.iov_len = (size_t)EVP_EncodeBlock(v.iov_base, src, (int)len);
	return evbuffer_commit_space(out, &v, 1);
}

int xfer_etcd_add_b64_field(struct evbuffer *b, const char *name,
			    const void *data, size_t len)
{
	if (evbuffer_add_printf(b, "\"%s\":\"", name) < 0 ||
	    b64_add(b, data, len) || evbuffer_add(b, "\"", 1))
		return -1;
	return 0;
}

ssize_t xfer_etcd_b64_decode(const char *s, char **out)
{
	size_t n = strlen(s), pad = 0;
	int len;
	char *d;

	/* EVP_DecodeBlock skips white space around the text and reads '='
	 * anywhere as zero bits: take only the alphabet, then at most two
	 * '=' that end it. */
	if (n % 4 || n > INT_MAX)
		return -EPROTO;
	while (pad < 2 && pad < n && s[n - 1 - pad] == '=')
		pad++;
	if (strspn(s, b64_chars) != n - pad)
		return -EPROTO;
	d = malloc(n / 4 * 3 + 1);
	if (!d)
		return -ENOMEM;
	len = EVP_DecodeBlock((unsigned char *)d, (const unsigned char *)s,
			      (int)n);
	if (len < (int)pad) {
		free(d);
		return -EPROTO;
	}
	/* It counts the padding as zero bytes. */
	len -= (int)pad;
	d[len] = '\0';
	*out = d;
	return len;
}

yajl_val xfer_etcd_json_get(yajl_val v, const char *a, const char *b)
{
	const char *path[] = { a, b, NULL };

	return yajl_tree_get(v, path, yajl_t_any);
}

int64_t xfer_etcd_json_i64(yajl_val v)
{
	if (YAJL_IS_STRING(v))
		return strtoll(v->u.string, NULL, 10);
	return YAJL_IS_INTEGER(v) ? YAJL_GET_INTEGER(v) : 0;
}

yajl_val xfer_etcd_parse_body(struct evhttp_request *req)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	const char *s;

	if (evbuffer_add(in, "", 1))
		return NULL;
	s = (const char *)evbuffer_pullup(in, -1);
	return s ? yajl_tree_parse(s, NULL, 0) : NULL;
}
