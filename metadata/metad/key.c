/* xfer-metad's key check: length, no NUL, valid UTF-8. */
#include <stdint.h>
#include <string.h>

#include "metadata/metad/key_internal.h"

/* Length of the UTF-8 sequence at @p p (@p n bytes left), 0 if invalid:
 * overlong forms, UTF-16 surrogates and code points past U+10FFFF are. */
static size_t utf8_len(const uint8_t *p, size_t n)
{
	uint32_t c;
	size_t len;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf) {
		len = 2;
		c = p[0] & 0x1f;
	} else if ((p[0] & 0xf0) == 0xe0) {
		len = 3;
		c = p[0] & 0x0f;
	} else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
		len = 4;
		c = p[0] & 0x07;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (p[i] & 0x3f);
	}
	if ((len == 3 && c < 0x800) || (len == 4 && c < 0x10000) ||
	    (c >= 0xd800 && c <= 0xdfff) || c > 0x10ffff)
		return 0;
	return len;
}

const char *metad_key_check(const char *key, size_t len)
{
	const uint8_t *p = (const uint8_t *)key;

	if (len > METAD_KEY_MAX)
		return "longer than 4096 bytes";
	if (memchr(key, '\0', len))
		return "contains a NUL byte";
	for (size_t i = 0, n; i < len; i += n)
		if (!(n = utf8_len(p + i, len - i)))
			return "not valid UTF-8";
	return NULL;
}
