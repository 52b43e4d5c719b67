/* What the JSON codec tests share: bodies to build cases from, a decoder
 * behind one signature for each codec, and the checks on their results. */
#ifndef XFER_TEST_TH_JSON_H
#define XFER_TEST_TH_JSON_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/desc_internal.h"
#include "core/handshake_internal.h"
#include "util/json_internal.h"
#include "transports/rdma/desc_internal.h"
#include "transports/tcp/tcp_internal.h"
#include "core/transport.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
/* Every codec the engine knows, as segments decode with. */
#define CODECS xfer_transport_codecs()
/* The transport fields of a decoded descriptor. */
#define TCP(d) ((const struct xfer_tcp_desc *)(d)->tp)
#define RDMA(d) ((const struct xfer_rdma_desc *)(d)->tp)
#define KEYS(b) ((const struct xfer_rdma_keys *)(b).tp)

/*
 * Bodies are built from fields that each end in ',' and a closing unknown
 * field, so a case can drop or replace any one field.
 */
#define END	"\"zz\":0}"
#define GBUF	"{\"addr\":4096,\"length\":1024,\"name\":\"cpu:0\"}"
#define BUFS	"\"buffers\":[" GBUF "],"
#define NAME	"\"name\":\"h:1\","
#define PROTO	"\"protocol\":\"tcp\","
#define PORT	"\"tcp_data_port\":15432,"
#define DESC_OK	"{" BUFS NAME PROTO PORT END
/* A descriptor whose only buffer is @b. */
#define DBUF(b)	"{\"buffers\":[" b "]," NAME PROTO PORT END
#define BF(addr, len, name) \
	"{\"addr\":" addr ",\"length\":" len ",\"name\":" name "}"

/* RDMA: two devices, one buffer with a key per device, one matrix row. */
#define GID0	"fe:80:00:00:00:00:00:00:02:00:00:ff:fe:00:00:01"
#define GID1	"FE:80:00:00:00:00:00:00:0A:0B:0C:FF:FE:0D:0E:0F"
#define DEV(name, lid, gid) \
	"{\"name\":" name ",\"lid\":" lid ",\"gid\":" gid "}"
#define DEV0	DEV("\"mlx5_0\"", "1", "\"" GID0 "\"")
#define DEV1	DEV("\"mlx5_1\"", "65535", "\"" GID1 "\"")
#define R_PROTO	"\"protocol\":\"rdma\","
#define R_DEVS	"\"devices\":[" DEV0 "," DEV1 "],"
#define R_PRIO	\
	"\"priority_matrix\":{\"cpu:0\":[[\"mlx5_0\"],[\"mlx5_1\"]]},"
#define RBF(keys) "{\"addr\":4096,\"length\":1024,\"name\":\"cpu:0\"" keys "}"
#define R_KEYS	",\"lkey\":[1,2],\"rkey\":[3,4294967295]"
#define R_BUFS	"\"buffers\":[" RBF(R_KEYS) "],"
#define RDESC_OK "{" R_BUFS NAME R_PROTO R_DEVS R_PRIO END
/* One device @d, a buffer with one key each. */
#define RDEV(d)	"{\"buffers\":[" RBF(",\"lkey\":[1],\"rkey\":[2]") "]," \
	NAME R_PROTO "\"devices\":[" d "]," END
/* Two devices, the buffer's keys as @k. */
#define RKEY(k)	"{\"buffers\":[" RBF(k) "]," NAME R_PROTO R_DEVS END
/* The matrix as @m. */
#define RPRIO(m) "{" R_BUFS NAME R_PROTO R_DEVS "\"priority_matrix\":" m "," END

#define C_GID	"\"local_gid\":\"fe:80\","
#define C_LID	"\"local_lid\":7,"
#define C_LNIC	"\"local_nic_path\":\"h:1@mlx5_0\","
#define C_PAY	"\"payload\":\"\","
#define C_PNIC	"\"peer_nic_path\":\"h:2@mlx5_1\","
#define C_QP	"\"qp_num\":[1,2],"
#define C_ACK	"\"ready_ack\":false,"
#define C_REPLY	"\"reply_msg\":\"\","
#define CONN_OK	\
	"{" C_GID C_LID C_LNIC C_PAY C_PNIC C_QP C_ACK C_REPLY END

#define N_NAME	"\"name\":\"a\","
#define N_MSG	"\"notify_msg\":\"b\","
#define NOTIFY_OK "{" N_NAME N_MSG END

/* A TCP buffer: no keys. */
#define TBUF(a, l, n) { .addr = (a), .length = (l), .name = (n) }

/* Each decoder behind one signature; each also checks its failure
 * contract (output left empty) and frees what it decoded. */
typedef int (*decode_fn)(const char *json, size_t len, char *err,
			 size_t errlen);

int try_desc(const char *json, size_t len, char *err, size_t errlen);
int try_conn(const char *json, size_t len, char *err, size_t errlen);
int try_notify(const char *json, size_t len, char *err, size_t errlen);
int try_rpc(const char *json, size_t len, char *err, size_t errlen);
int try_prio(const char *json, size_t len, char *err, size_t errlen);
int try_check(const char *json, size_t len, char *err, size_t errlen);

/* Every decoder above, for the malformed-text cases. */
/* try_prio needs the RDMA part (mk/config.mk). */
#ifdef XFER_HAVE_RDMA
#define TH_NDECODERS 6
#else
#define TH_NDECODERS 5
#endif
extern const decode_fn th_decoders[TH_NDECODERS];

void *xmalloc(size_t size);
void expect_ok(decode_fn fn, const char *json);
/* -EPROTO with a one-line reason; returns the reason for further checks. */
const char *expect_reject_len(decode_fn fn, const char *json, size_t len);
const char *expect_reject(decode_fn fn, const char *json);
/* A body on the wire is one compact line. */
void check_line(const char *json, size_t len);
/* Encode @p in, check the line, decode it back (fails the test if not). */
struct xfer_desc *desc_round_trip(const struct xfer_desc *in);

#endif
