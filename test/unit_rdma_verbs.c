/*
 * Opening an RDMA context (transports/rdma/context.c, cq.c) passes on the
 * errno each verbs call gives, as its man page says it gives it (returned:
 * ibv_query_device, ibv_query_port, ibv_query_gid_ex, ibv_req_notify_cq;
 * set with NULL: ibv_open_device, ibv_alloc_pd, ibv_create_comp_channel,
 * ibv_create_cq). The verbs are this file's: defined here, they take the
 * place of libibverbs' in this program, over one fake device "fake0", and
 * fail one at a time with an errno no code was ever invented as.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "reactor/reactor_internal.h"
#include "transports/rdma/rdma_internal.h"

#undef ibv_query_port

enum step {
	NONE, OPEN, QUERY_DEVICE, ALLOC_PD, QUERY_PORT, QUERY_GID,
	COMP_CHANNEL, CREATE_CQ, NOTIFY_CQ,
};

static enum step failing;
static int fail_errno;
static struct ibv_device dev;
static struct ibv_context vctx;
static struct ibv_pd pd;
static struct ibv_comp_channel chan;
static struct ibv_cq cq;
static struct ibv_qp qp;

/* The step's errno: returned, or set with a NULL (@p set). */
static bool fails(enum step s, bool set)
{
	if (failing != s)
		return false;
	if (set)
		errno = fail_errno;
	return true;
}

struct ibv_device **ibv_get_device_list(int *n)
{
	static struct ibv_device *list[] = { &dev, NULL };

	if (n)
		*n = 1;
	return list;
}

void ibv_free_device_list(struct ibv_device **list)
{
	(void)list;
}

const char *ibv_get_device_name(struct ibv_device *d)
{
	(void)d;
	return "fake0";
}

static int fake_notify(struct ibv_cq *c, int solicited)
{
	(void)c;
	(void)solicited;
	return fails(NOTIFY_CQ, false) ? fail_errno : 0;
}

struct ibv_context *ibv_open_device(struct ibv_device *d)
{
	if (fails(OPEN, true))
		return NULL;
	vctx.device = d;
	vctx.ops.req_notify_cq = fake_notify;
	vctx.num_comp_vectors = 1;
	return &vctx;
}

int ibv_close_device(struct ibv_context *c)
{
	(void)c;
	return 0;
}

int ibv_query_device(struct ibv_context *c, struct ibv_device_attr *a)
{
	(void)c;
	memset(a, 0, sizeof(*a)); /* no limits */
	return fails(QUERY_DEVICE, false) ? fail_errno : 0;
}

struct ibv_pd *ibv_alloc_pd(struct ibv_context *c)
{
	pd.context = c;
	return fails(ALLOC_PD, true) ? NULL : &pd;
}

int ibv_dealloc_pd(struct ibv_pd *p)
{
	(void)p;
	return 0;
}

/* The symbol the header's inline falls back to for a context without
 * extended ops: its attribute struct is ibv_port_attr's leading part. */
int ibv_query_port(struct ibv_context *c, uint8_t port,
		   struct _compat_ibv_port_attr *compat)
{
	struct ibv_port_attr *a = (struct ibv_port_attr *)compat;

	(void)c;
	(void)port;
	a->state = IBV_PORT_ACTIVE;
	a->active_mtu = IBV_MTU_1024;
	a->gid_tbl_len = 1;
	return fails(QUERY_PORT, false) ? fail_errno : 0;
}

int _ibv_query_gid_ex(struct ibv_context *c, uint32_t port, uint32_t index,
		      struct ibv_gid_entry *e, uint32_t flags, size_t size)
{
	(void)c;
	(void)port;
	(void)flags;
	(void)size;
	memset(e, 0, sizeof(*e));
	e->gid.raw[10] = e->gid.raw[11] = 0xff;
	e->gid.raw[12] = 10;
	e->gid.raw[15] = 1;
	e->gid_index = index;
	e->gid_type = IBV_GID_TYPE_ROCE_V2;
	return fails(QUERY_GID, false) ? fail_errno : 0;
}

struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *c)
{
	if (fails(COMP_CHANNEL, true))
		return NULL;
	chan.context = c;
	return &chan;
}

int ibv_destroy_comp_channel(struct ibv_comp_channel *ch)
{
	(void)ch;
	return 0;
}

struct ibv_cq *ibv_create_cq(struct ibv_context *c, int cqe, void *ctx,
			     struct ibv_comp_channel *ch, int vector)
{
	(void)cqe;
	(void)vector;
	if (fails(CREATE_CQ, true))
		return NULL;
	cq.context = c;
	cq.cq_context = ctx;
	cq.channel = ch;
	return &cq;
}

int ibv_destroy_cq(struct ibv_cq *c)
{
	(void)c;
	return 0;
}

struct ibv_qp *ibv_create_qp(struct ibv_pd *p, struct ibv_qp_init_attr *a)
{
	(void)a;
	qp.pd = p;
	return &qp;
}

int ibv_destroy_qp(struct ibv_qp *q)
{
	(void)q;
	return 0;
}

/* Open the context of "fake0" with @p gid_index configured (-1: pick one)
 * while @p s fails with @p err; @return what the open returned. */
static int open_ctx(enum step s, int err, int gid_index)
{
	union xfer_knob_val k[K_MAX_INLINE + 1] = { 0 };
	struct xfer_transport_env env = { .name = "host:1", .nworkers = 0 };
	struct rdma_topo_dev tdev = { .name = "fake0", .numa_node = -1 };
	struct rdma_transport t = { .k = k };
	struct xfer_reactor control;
	struct xfer_error er;
	struct rdma_ctx c = { 0 };
	int fd, ret;

	k[K_GID].num = gid_index;
	k[K_IB_PORT].num = 1;
	k[K_QPS].num = 1;
	k[K_MAX_EP].num = 4;
	k[K_MAX_WR].num = k[K_MAX_CQE].num = 16;
	k[K_NUM_CQ].num = k[K_NUM_CHAN].num = k[K_MAX_SGE].num = 1;
	k[K_MAX_INLINE].num = 64;
	fd = eventfd(0, 0);
	assert_true(fd >= 0);
	vctx.async_fd = fd;
	chan.fd = fd;
	assert_int_equal(xfer_reactor_init(&control, NULL, "test"), 0);
	xfer_error_init(&er);
	env.control = &control;
	env.err = &er;
	t.base.env = &env;
	t.topo.ndevs = 1;
	t.topo.devs = &tdev;
	failing = s;
	fail_errno = err;
	errno = 0;
	ret = xfer_rdma_ctx_open(&t, &c, 0);
	xfer_rdma_ctx_close(&c);
	xfer_error_fini(&er);
	xfer_reactor_destroy(&control);
	close(fd);
	return ret;
}

static void test_opens_when_nothing_fails(void **state)
{
	(void)state;
	assert_int_equal(open_ctx(NONE, 0, -1), 0);
	assert_int_equal(open_ctx(NONE, 0, 0), 0);
}

static void test_returned_errno(void **state)
{
	(void)state;
	assert_int_equal(open_ctx(QUERY_DEVICE, EPERM, -1), -EPERM);
	assert_int_equal(open_ctx(QUERY_PORT, ENXIO, -1), -ENXIO);
	assert_int_equal(open_ctx(QUERY_GID, ENOMEM, 0), -ENOMEM);
	assert_int_equal(open_ctx(NOTIFY_CQ, ENOSPC, -1), -ENOSPC);
}

static void test_set_errno(void **state)
{
	(void)state;
	assert_int_equal(open_ctx(OPEN, EACCES, -1), -EACCES);
	assert_int_equal(open_ctx(ALLOC_PD, EACCES, -1), -EACCES);
	assert_int_equal(open_ctx(COMP_CHANNEL, EMFILE, -1), -EMFILE);
	assert_int_equal(open_ctx(CREATE_CQ, EINVAL, -1), -EINVAL);
}

/* A configured slot that is empty reads as zeros, as ibv_query_gid()
 * gives it; no slot to pick from is -ENODEV. */
static void test_gid_slots(void **state)
{
	(void)state;
	assert_int_equal(open_ctx(QUERY_GID, ENODATA, 0), 0);
	assert_int_equal(open_ctx(QUERY_GID, ENODATA, -1), -ENODEV);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_opens_when_nothing_fails),
		cmocka_unit_test(test_returned_errno),
		cmocka_unit_test(test_set_errno),
		cmocka_unit_test(test_gid_slots),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
