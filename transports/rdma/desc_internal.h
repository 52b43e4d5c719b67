/*
 * The RDMA fields of the segment descriptor (PROTOCOL.md §2): devices with
 * LID and GID, the priority matrix, and per buffer one lkey and one rkey
 * per device; the priority matrix codec (the seed's JSON) that user
 * configuration shares; GID strings.
 */
#ifndef XFER_RDMA_DESC_INTERNAL_H
#define XFER_RDMA_DESC_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "core/desc_internal.h"

/** Most RDMA devices accepted in one descriptor from a peer. */
#define XFER_RDMA_MAX_DEVS 64

/** One RDMA device of a segment. */
struct xfer_rdma_dev {
	char *name;      /* non-empty */
	uint32_t lid;    /* 0..65535 */
	uint8_t gid[16]; /* "fe:80:00:...:01" on the wire */
};

/** One row of a priority matrix: the NICs that serve a location. */
struct xfer_rdma_prio {
	char *location;  /* "cpu:0", "cuda:1", "*" */
	size_t npref, nother;
	char **pref;     /* preferred NIC names */
	char **other;    /* fallback NIC names */
};

/** The descriptor's top-level RDMA fields (desc->tp). */
struct xfer_rdma_desc {
	size_t ndevs;    /* 1..XFER_RDMA_MAX_DEVS */
	struct xfer_rdma_dev *devs;
	size_t nprio;    /* may be 0 */
	struct xfer_rdma_prio *prio;
};

/** A buffer's keys (desc->bufs[i].tp): one of each per device, in the
 *  order of the devices. */
struct xfer_rdma_keys {
	uint32_t *lkey;
	uint32_t *rkey;
};

extern const struct xfer_desc_codec xfer_rdma_codec;

/**
 * Decode a priority matrix `{"<location>":[[names...],[names...]],...}`
 * (the seed's format; the descriptor's "priority_matrix" value) into a
 * malloc'd array of *n rows. Names must be non-empty strings.
 * @return 0, -EPROTO with a reason in @p err, -ENOMEM.
 */
int xfer_rdma_prio_decode(const char *json, size_t len,
			  struct xfer_rdma_prio **out, size_t *n, char *err,
			  size_t errlen);

/** Free @p n rows of a matrix and the array (NULL is fine). */
void xfer_rdma_prio_free(struct xfer_rdma_prio *p, size_t n);

/** Parse a GID string: 16 two-digit hex bytes joined by ':'.
 *  @return 0, -EINVAL. */
int xfer_rdma_gid_parse(const char *s, uint8_t gid[16]);

/** Format a GID as 16 two-digit lowercase hex bytes joined by ':'. */
void xfer_rdma_gid_format(const uint8_t gid[16], char out[48]);

#endif
