/*
 * The store's RPC between clients and the master, xfer-stored
 * (docs/PROTOCOL.md §7): frames of a 16-byte header and a body whose
 * fields each message type lists in one table (proto.c). One codec
 * serves both directions and both ends: decoding checks every length
 * against the limits below before anything is read past it, and points
 * into the body (no allocation); encoding writes what decoding reads.
 * Thread rules: none (no shared state).
 */
#ifndef XFER_STORE_PROTO_INTERNAL_H
#define XFER_STORE_PROTO_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STORE_MAGIC 0x31525358u        /* "XSR1" on the wire */
#define STORE_HDR_LEN 16
#define STORE_FRAME_MAX (8u << 20)     /* body bytes */
#define STORE_KEY_MAX 4096             /* key bytes */
#define STORE_NAME_MAX 255             /* segment names, endpoints */
#define STORE_BATCH_MAX 1024           /* keys in one request */
#define STORE_REPLICA_MAX 16           /* replicas of one object */
#define STORE_ID_LEN 16                /* client and segment ids */
#define STORE_PATTERN_MAX 4096         /* remove_regex pattern bytes */

#define STORE_F_REPLY 1                /* header flags */

/* A segment's medium (mount). */
#define STORE_MEDIUM_DRAM 0
#define STORE_MEDIUM_SSD 1

/* A task's type and status (query_task): Mooncake's TaskType and
 * TaskStatus, in their order; REPLICATE is xfer's. */
#define STORE_TASK_REPLICA_COPY 0
#define STORE_TASK_REPLICA_MOVE 1
#define STORE_TASK_REPLICATE 2
#define STORE_TASK_PENDING 0
#define STORE_TASK_PROCESSING 1
#define STORE_TASK_FAILED 2
#define STORE_TASK_SUCCESS 3
#define STORE_MESSAGE_MAX 255          /* query_task's message bytes */

enum store_type {
	STORE_PING = 1,
	STORE_MOUNT,
	STORE_UNMOUNT,
	STORE_PUT_START,
	STORE_PUT_END,
	STORE_PUT_REVOKE,
	STORE_QUERY,
	STORE_EXIST,
	STORE_REMOVE,
	STORE_REMOVE_ALL,
	STORE_SYNC,
	STORE_REMOVE_REGEX,
	STORE_REPLICA_CLEAR,
	STORE_TIER_POLL,
	STORE_TIER_DONE,
	STORE_FLUSHED,                 /* flush.c: versions in the slower tier */
	STORE_HA_FOLLOW,               /* a standby's journal stream */
	STORE_REPLICATE,
	STORE_QUERY_TASK,
	STORE_CREATE_TASK,
	STORE_TYPE_END
};

struct store_hdr {
	uint16_t type, flags;
	uint32_t seq, len;
};

/* A string of the body: not NUL-ended. */
struct store_str {
	const char *p;
	uint16_t len;
};

/* One buffer of a replica. A replica is whole (one buffer of the
 * object's length) or striped: several buffers on distinct segments
 * holding its bytes in order (PROTOCOL.md §7). */
struct store_replica {
	uint64_t addr, len;              /* in the endpoint's segment */
	struct store_str endpoint;       /* the segment's engine name */
	/* on a replica's first buffer: its buffers, this one first (0
	 * encodes as 1); 0 on the buffers that follow it */
	uint8_t shards;
};

/* One key of a batch, request or reply (PROTOCOL.md §7 says which
 * fields each carries). */
struct store_item {
	struct store_str key;
	uint64_t len;                    /* value bytes */
	int32_t err;                     /* 0 or a Mooncake ErrorCode */
	uint64_t lease_ms;
	uint64_t version;                /* of the put that made it */
	uint64_t task;                   /* replicate: the task made */
	uint8_t nrep;                    /* buffers, of every replica */
	struct store_replica rep[STORE_REPLICA_MAX];
};

/* Any message, either direction: the fields its type uses are set. */
struct store_msg {
	struct store_hdr h;
	uint8_t client[STORE_ID_LEN], segment[STORE_ID_LEN];
	uint64_t base, size;
	struct store_str name, preferred;
	struct store_str pattern;        /* remove_regex: POSIX ERE */
	uint64_t min_version;            /* query: 0, or the least wanted */
	uint8_t replicas, flags, force;
	uint8_t medium;                  /* mount */
	uint8_t ssd_replicas;            /* put_start */
	int32_t err;
	int64_t count;
	/* query_task: the task, its type and status (STORE_TASK_*), when
	 * made and last changed (ms since the epoch), and a message;
	 * .client is the client it was given to */
	uint64_t task, created_ms, updated_ms;
	uint8_t task_type, task_status;
	struct store_str message;
	struct store_str key;            /* create_task: the object's */
	uint32_t n;
	struct store_item items[STORE_BATCH_MAX];
};

/** The name of message type @p type ("put_start"), or NULL if unknown. */
const char *store_type_name(unsigned type);

/**
 * Read the header at @p buf (STORE_HDR_LEN bytes) into @p h.
 * @return 0; -EPROTO (not our magic, an unknown type, flag bits that are
 *         not defined); -EMSGSIZE (a body over STORE_FRAME_MAX).
 */
int store_hdr_decode(const uint8_t *buf, struct store_hdr *h);

/**
 * Decode the body of @p m->h (already decoded: type, reply flag, length)
 * at @p body into @p m. Strings point into @p body, which must outlive
 * their use.
 * @return 0; -EPROTO if the body does not hold exactly the fields of its
 *         type, or a length, count or flag is past its limit (requests:
 *         a batch of at least one key).
 */
int store_msg_decode(const uint8_t *body, struct store_msg *m);

/** A growing buffer to encode frames into. */
struct store_buf {
	uint8_t *p;
	size_t len, cap;
};

void store_buf_free(struct store_buf *b);

/**
 * Append the frame of @p m (header from m->h.type, flags, seq; the length
 * computed) to @p b.
 * @return 0; -EINVAL (a field past its limit: it would not decode);
 *         -EMSGSIZE (over STORE_FRAME_MAX); -ENOMEM. On error @p b is as
 *         it was.
 */
int store_msg_encode(struct store_buf *b, const struct store_msg *m);

#endif
