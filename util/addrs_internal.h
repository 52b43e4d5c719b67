/*
 * Connections counted by their peer's source address, so that one host
 * cannot take every slot of a capped port: a table of addresses, each
 * with its connections oldest first. IPv4 addresses count one by one,
 * IPv6 ones by /64 (what one host is usually given); other families
 * (UNIX sockets of tests) share one entry. No locking: the owner's lock,
 * or its one thread, covers the table and every node in it.
 */
#ifndef XFER_ADDRS_INTERNAL_H
#define XFER_ADDRS_INTERNAL_H

#include <stdint.h>
#include <sys/queue.h>

#define XFER_ADDRS_BUCKETS 1024

struct xfer_addr;

/** A connection's place under its address; embedded in the connection. */
struct xfer_addr_node {
	TAILQ_ENTRY(xfer_addr_node) link;  /* a->nodes */
	struct xfer_addr *a;               /* NULL: in no table */
};

/** One source address and its connections, oldest first. */
struct xfer_addr {
	LIST_ENTRY(xfer_addr) link;        /* its bucket */
	TAILQ_HEAD(, xfer_addr_node) nodes;
	unsigned n;                        /* nodes */
	unsigned unproved;                 /* of them not proved: the
					    * owner counts them */
	uint8_t key[16];
};

struct xfer_addrs {
	uint64_t seed;                     /* of the bucket hash */
	LIST_HEAD(, xfer_addr) bucket[XFER_ADDRS_BUCKETS];
};

/** An empty table; its bucket hash keyed at random. */
void xfer_addrs_init(struct xfer_addrs *t);

/**
 * Put @p n, a connection on socket @p fd, last under its peer's address
 * (getpeername()). @return 0; -ENOMEM (the address was new and its entry
 * could not be made; @p n is in no table).
 */
int xfer_addrs_add(struct xfer_addrs *t, struct xfer_addr_node *n, int fd);

/** Take @p n out of its address (freed with its last node); nothing if
 *  it is in no table. */
void xfer_addrs_del(struct xfer_addr_node *n);

#endif
