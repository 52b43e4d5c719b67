/*
 * JSON codecs (yajl) for the segment descriptor and the handshake bodies of
 * PROTOCOL.md §1–2. Decoders trust nothing: every field is type- and
 * range-checked, and a failure leaves a reason in @p err.
 */
#ifndef XFER_DESC_INTERNAL_H
#define XFER_DESC_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** Longest name, location or GID string accepted from a peer, in bytes. */
#define XFER_DESC_MAX_STR 4096
/** Most buffers accepted in one descriptor from a peer. */
#define XFER_DESC_MAX_BUFFERS 65536

/** Most RDMA devices accepted in one descriptor from a peer. */
#define XFER_DESC_MAX_DEVS 64

struct xfer_desc_buf {
	uint64_t addr;   /* owner's virtual address, non-zero */
	uint64_t length; /* bytes, non-zero, addr + length does not overflow */
	char *name;      /* location, e.g. "cpu:0" */
	uint32_t *lkey;  /* protocol "rdma": one key per device, devs order */
	uint32_t *rkey;
};

/** One RDMA device of a segment (PROTOCOL.md §2). */
struct xfer_desc_dev {
	char *name;      /* non-empty */
	uint32_t lid;    /* 0..65535 */
	uint8_t gid[16]; /* "fe:80:00:...:01" on the wire */
};

/** One row of a priority matrix: the NICs that serve a location. */
struct xfer_prio {
	char *location;  /* "cpu:0", "cuda:1", "*" */
	size_t npref, nother;
	char **pref;     /* preferred NIC names */
	char **other;    /* fallback NIC names */
};

/** The `mooncake/ram/<segment>` value. */
struct xfer_desc {
	char *name;
	char *protocol;          /* "tcp" or "rdma" */
	uint16_t tcp_data_port;  /* non-zero for protocol "tcp" */
	int tcp_proto_version;   /* 1 or 2; a missing field means 1 */
	char *timestamp;         /* "YYYY-MM-DD HH:MM:SS.ffffff", may be NULL */
	size_t nbufs;
	struct xfer_desc_buf *bufs;
	/* protocol "rdma" only: */
	size_t ndevs;            /* 1..XFER_DESC_MAX_DEVS */
	struct xfer_desc_dev *devs;
	size_t nprio;            /* may be 0 */
	struct xfer_prio *prio;
};

/**
 * Encode @p d as compact JSON ending in '\n' into a malloc'd, NUL-ended
 * string (*json, *len without the NUL). A NULL timestamp encodes the
 * current time. @return 0, -ENOMEM.
 */
int xfer_desc_encode(const struct xfer_desc *d, char **json, size_t *len);

/**
 * Decode @p len bytes of JSON (need not be NUL-ended) into a new
 * descriptor. Unknown fields are ignored; the fields above are required
 * (tcp_proto_version and timestamp excepted) and checked.
 * @return 0 with *out set, -EPROTO with a reason in @p err, -ENOMEM.
 */
int xfer_desc_decode(const char *json, size_t len, struct xfer_desc **out,
		     char *err, size_t errlen);

/** Free a decoded descriptor (NULL is fine). */
void xfer_desc_free(struct xfer_desc *d);

/**
 * Decode a priority matrix `{"<location>":[[names...],[names...]],...}`
 * (the seed's format; the descriptor's "priority_matrix" value) into a
 * malloc'd array of *n rows. Names must be non-empty strings.
 * @return 0, -EPROTO with a reason in @p err, -ENOMEM.
 */
int xfer_prio_decode(const char *json, size_t len, struct xfer_prio **out,
		     size_t *n, char *err, size_t errlen);

/** Free @p n rows of a matrix and the array (NULL is fine). */
void xfer_prio_free(struct xfer_prio *p, size_t n);

/** Parse a GID string: 16 two-digit hex bytes joined by ':'.
 *  @return 0, -EINVAL. */
int xfer_gid_parse(const char *s, uint8_t gid[16]);

/** Format a GID as 16 two-digit lowercase hex bytes joined by ':'. */
void xfer_gid_format(const uint8_t gid[16], char out[48]);

/** Connection body, same schema both ways (PROTOCOL.md §1). */
struct xfer_hs_conn {
	char *local_gid;
	uint32_t local_lid;
	char *local_nic_path;
	char *payload;
	char *peer_nic_path;
	size_t nqp;
	uint32_t *qp_num;
	bool ready_ack;
	char *reply_msg;
};

/** Encode as xfer_desc_encode(); NULL strings encode as "". */
int xfer_hs_conn_encode(const struct xfer_hs_conn *c, char **json,
			size_t *len);
/** Decode; every field is required and type-checked; @return as
 *  xfer_desc_decode(). Strings are malloc'd (never NULL on success). */
int xfer_hs_conn_decode(const char *json, size_t len, struct xfer_hs_conn *c,
			char *err, size_t errlen);
/** Free the strings and array of @p c (not @p c itself). */
void xfer_hs_conn_clear(struct xfer_hs_conn *c);

/** Notify body `{"name":str,"notify_msg":str}`. */
struct xfer_hs_notify {
	char *name;
	char *notify_msg;
};

int xfer_hs_notify_encode(const struct xfer_hs_notify *n, char **json,
			  size_t *len);
int xfer_hs_notify_decode(const char *json, size_t len,
			  struct xfer_hs_notify *n, char *err, size_t errlen);
void xfer_hs_notify_clear(struct xfer_hs_notify *n);

/**
 * Check that @p len bytes are one well-formed JSON object (the Probe and
 * Metadata request bodies, whose content is ignored).
 * @return 0, -EPROTO with a reason in @p err.
 */
int xfer_json_check_object(const char *json, size_t len, char *err,
			   size_t errlen);

/** The `mooncake/rpc_meta/<server>` value
 *  `{"ip_or_host_name":str,"rpc_port":uint16}`. */
int xfer_rpc_meta_encode(const char *host, uint16_t port, char **json,
			 size_t *len);
/** Decode; host non-empty (malloc'd into *host), port 1..65535.
 *  @return as xfer_desc_decode(). */
int xfer_rpc_meta_decode(const char *json, size_t len, char **host,
			 uint16_t *port, char *err, size_t errlen);

#endif
