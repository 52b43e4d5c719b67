/*
 * RDMA topology: which devices to open, the NUMA node of each (sysfs), and
 * the NIC priority matrix that says which devices serve which memory
 * location, built from sysfs or taken from the user (the seed's JSON).
 */
#ifndef XFER_RDMA_TOPOLOGY_INTERNAL_H
#define XFER_RDMA_TOPOLOGY_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "transports/rdma/desc_internal.h"

#define RDMA_DEV_NAME_MAX 64

/** A matrix row resolved to device indexes: preferred first, then others. */
struct rdma_row {
	char *location;
	size_t npref;     /* idx[0..npref) preferred */
	size_t n;         /* idx[npref..n) the others */
	uint16_t *idx;
};

/** A priority matrix over one device list (local, or a peer's). */
struct rdma_matrix {
	size_t nrows;
	struct rdma_row *rows;
	struct rdma_row any; /* location "*": every device preferred */
};

struct rdma_topo_dev {
	char name[RDMA_DEV_NAME_MAX];
	int numa_node;    /* -1: unknown */
};

struct rdma_topo {
	size_t ndevs;
	struct rdma_topo_dev *devs; /* the devices to open, sorted by name */
	size_t nprio;
	struct xfer_rdma_prio *prio;     /* the matrix to publish (names) */
	struct rdma_matrix matrix;  /* the same over devs indexes */
};

/**
 * Build the topology from @p sysfs_root ("/sys" in production; tests pass a
 * fake tree): devices are the entries of <root>/class/infiniband. NUMA
 * node: <root>/class/infiniband/<dev>/device/numa_node, else that of the
 * netdev under ports/1/gid_attrs/ndevs/0 (<root>/class/net/<ndev>/device/
 * numa_node), else from the user matrix (the node N of the first `cpu:N`
 * row that prefers the device), else -1.
 * @param device_names comma list of devices to use, NULL: every device
 *        (auto discovery), or with a user matrix those it names.
 * @param matrix_json the user's priority matrix or NULL: then `cpu:N` for
 *        every node N that has a device prefers the devices on N, the rest
 *        are others; devices of unknown node are preferred everywhere; a
 *        `*` row prefers every device.
 * @return 0; -ENODEV (no device, or a named device missing; reason in
 *         @p err), -EPROTO (bad matrix JSON, or it names an unknown
 *         device), -ENOMEM.
 */
int xfer_rdma_topo_build(const char *sysfs_root, const char *device_names,
			 const char *matrix_json, struct rdma_topo *out, char *err,
		    size_t errlen);

void xfer_rdma_topo_free(struct rdma_topo *t);

/**
 * Resolve @p rows (names) over the device list @p names[ndevs]: names not
 * in the list are dropped, as are duplicates. Fills out->any too.
 * @return 0, -ENOMEM.
 */
int xfer_rdma_matrix_build(const struct xfer_rdma_prio *rows, size_t nrows,
			   const char *const *names, size_t ndevs,
		      struct rdma_matrix *out);

void xfer_rdma_matrix_free(struct rdma_matrix *m);

/** The row for @p location: an exact match with at least one device, else
 *  the `*` row of the matrix, else m->any. Never NULL. */
const struct rdma_row *xfer_rdma_matrix_find(const struct rdma_matrix *m,
					     const char *location);

#endif
