/* Connections counted by source address (addrs_internal.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <netinet/in.h>

#include "util/addrs_internal.h"

void xfer_addrs_init(struct xfer_addrs *t)
{
	/* a peer that picks its addresses should not pick their buckets */
	if (getrandom(&t->seed, sizeof(t->seed), GRND_NONBLOCK) !=
	    sizeof(t->seed))
		t->seed = (uint64_t)(uintptr_t)t;
	for (size_t i = 0; i < XFER_ADDRS_BUCKETS; i++)
		LIST_INIT(&t->bucket[i]);
}

/* The key of @p fd's peer: an IPv4 address as ::ffff:a.b.c.d, an IPv6
 * one's /64, else zeros. */
static void key_of(int fd, uint8_t key[16])
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	memset(key, 0, 16);
	if (getpeername(fd, (struct sockaddr *)&ss, &len))
		return;
	if (ss.ss_family == AF_INET) {
		key[10] = key[11] = 0xff;
		memcpy(key + 12, &((struct sockaddr_in *)&ss)->sin_addr, 4);
	} else if (ss.ss_family == AF_INET6) {
		memcpy(key, &((struct sockaddr_in6 *)&ss)->sin6_addr, 8);
	}
}

/* FNV-1a over the seed and the key. */
static size_t bucket_of(const struct xfer_addrs *t, const uint8_t key[16])
{
	uint64_t h = 0xcbf29ce484222325ull ^ t->seed;

	for (int i = 0; i < 16; i++)
		h = (h ^ key[i]) * 0x100000001b3ull;
	return (size_t)(h ^ h >> 32) % XFER_ADDRS_BUCKETS;
}

int xfer_addrs_add(struct xfer_addrs *t, struct xfer_addr_node *n, int fd)
{
	uint8_t key[16];
	size_t b;
	struct xfer_addr *a;

	key_of(fd, key);
	b = bucket_of(t, key);
	LIST_FOREACH(a, &t->bucket[b], link)
		if (!memcmp(a->key, key, 16))
			break;
	if (!a) {
		a = calloc(1, sizeof(*a));
		if (!a) {
			n->a = NULL;
			return -ENOMEM;
		}
		memcpy(a->key, key, 16);
		TAILQ_INIT(&a->nodes);
		LIST_INSERT_HEAD(&t->bucket[b], a, link);
	}
	TAILQ_INSERT_TAIL(&a->nodes, n, link);
	a->n++;
	n->a = a;
	return 0;
}

void xfer_addrs_del(struct xfer_addr_node *n)
{
	struct xfer_addr *a = n->a;

	if (!a)
		return;
	TAILQ_REMOVE(&a->nodes, n, link);
	n->a = NULL;
	if (--a->n == 0) {
		LIST_REMOVE(a, link);
		free(a);
	}
}
