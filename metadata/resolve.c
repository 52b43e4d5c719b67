/* Addresses for the metadata backends: see resolve_internal.h. */
#include <netdb.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "metadata/resolve_internal.h"

const char *xfer_store_parse_addr(const char *s, const char *stops,
				  char *host, size_t size, uint16_t *port,
				  uint16_t defport)
{
	const char *h = s, *end;
	unsigned long v = 0;
	size_t len;

	if (*h == '[') {
		end = strchr(++h, ']');
		if (!end)
			return NULL;
		len = (size_t)(end++ - h);
	} else {
		len = strcspn(h, ":");
		len = len < strcspn(h, stops) ? len : strcspn(h, stops);
		end = h + len;
	}
	if (!len || len >= size || strcspn(h, "@?/") < len ||
	    strcspn(h, stops) < len)
		return NULL;
	memcpy(host, h, len);
	host[len] = '\0';
	if (*end != ':') {
		*port = defport;
		return defport && (!*end || strchr(stops, *end)) ? end : NULL;
	}
	for (end++; *end >= '0' && *end <= '9' && v <= 65535; end++)
		v = v * 10 + (unsigned long)(*end - '0');
	if (!v || v > 65535 || (*end && !strchr(stops, *end)))
		return NULL;
	*port = (uint16_t)v;
	return end;
}

int xfer_store_resolve(const char *host, char *addr, size_t size)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *ai;
	int ret;

	ret = getaddrinfo(host, NULL, &hints, &res);
	if (ret)
		return ret;
	for (ai = res; ai && ai->ai_family != AF_INET; ai = ai->ai_next)
		;
	if (!ai)
		ai = res;
	ret = getnameinfo(ai->ai_addr, ai->ai_addrlen, addr, size, NULL, 0,
			  NI_NUMERICHOST);
	freeaddrinfo(res);
	return ret;
}
