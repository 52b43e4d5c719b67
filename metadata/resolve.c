/* Name resolution for the metadata backends: see resolve_internal.h. */
#include <netdb.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "metadata/resolve_internal.h"

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
