/*
 * The transport contract's side in the core: the defaults of the slots a
 * transport leaves empty (core/transport.h says each one), installed once
 * over the list that transports/table.c supplies, and the lookups by name.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/config_internal.h"
#include "core/slice_internal.h"
#include "core/transport.h"
#include "xfer/xfer.h"

const struct xfer_knob xfer_transport_knobs[] = {
	/* Mooncake has no variable for it (its programs install transports):
	 * XFER_PROTOCOL only. */
	XFER_KNOB_S("protocol", "XFER_PROTOCOL", NULL, "tcp", "string",
		    "the transport this engine advertises: tcp or rdma"),
	XFER_KNOB_END,
};

static bool def_available(void)
{
	return true;
}

static int def_init(const struct xfer_transport_env *env,
		    struct xfer_transport **out)
{
	(void)env;
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

static void def_fini(struct xfer_transport *t)
{
	free(t);
}

static void def_describe(struct xfer_transport *t, struct xfer_desc *d)
{
	(void)t;
	(void)d;
}

static void def_describe_buffer(struct xfer_transport *t,
				const struct xfer_buffer *b,
				struct xfer_desc_buf *db)
{
	(void)t;
	(void)b;
	(void)db;
}

static int def_reg(struct xfer_transport *t, struct xfer_buffer *b)
{
	(void)t;
	(void)b;
	return 0;
}

static void def_unreg(struct xfer_transport *t, struct xfer_buffer *b)
{
	(void)t;
	(void)b;
}

static int def_open(struct xfer_transport *t, struct xfer_segment *seg)
{
	(void)t;
	(void)seg;
	return 0;
}

static void def_release(struct xfer_transport *t, void *priv)
{
	(void)t;
	(void)priv;
}

static void def_submit(struct xfer_transport *t, struct xfer_segment *seg,
		       struct xfer_slice *s, size_t n)
{
	(void)t;
	(void)seg;
	for (size_t i = 0; i < n; i++)
		xfer_slice_done(&s[i], XFER_FAILED);
}

static int def_connection(struct xfer_transport *t,
			  const struct xfer_hs_conn *req,
			  struct xfer_hs_conn *reply)
{
	(void)t;
	(void)req;
	(void)reply;
	return -EOPNOTSUPP;
}

static void def_cancel(struct xfer_transport *t)
{
	(void)t;
}

static int def_device_stats(struct xfer_transport *t, size_t i,
			    const char **name, uint64_t *bytes)
{
	(void)t;
	(void)i;
	(void)name;
	(void)bytes;
	return -ENOENT;
}

static double def_cpu_seconds(struct xfer_transport *t)
{
	(void)t;
	return 0;
}

static char *def_document(struct xfer_transport *t, size_t *len)
{
	(void)t;
	*len = 0;
	return NULL;
}

static int def_adopt(struct xfer_transport *t, struct xfer_segment *seg,
		     const char *json, size_t len, char *err, size_t errlen)
{
	(void)t;
	(void)seg;
	(void)json;
	(void)len;
	(void)err;
	(void)errlen;
	return -EOPNOTSUPP;
}

static bool def_covers(struct xfer_transport *t, struct xfer_segment *seg,
		       uint64_t off, uint64_t len)
{
	(void)t;
	(void)seg;
	(void)off;
	(void)len;
	return false;
}

static int def_buffer(struct xfer_transport *t, struct xfer_segment *seg,
		      size_t index, uint64_t *off, uint64_t *len,
		      const char **name)
{
	(void)t;
	(void)seg;
	(void)index;
	(void)off;
	(void)len;
	(void)name;
	return -ENOENT;
}

static struct xfer_transport_ops filled[XFER_TRANSPORTS_MAX];
static const struct xfer_transport_ops *table[XFER_TRANSPORTS_MAX + 1];
static const struct xfer_desc_codec *codecs[XFER_TRANSPORTS_MAX + 1];
static pthread_once_t once = PTHREAD_ONCE_INIT;

#define FILL(op) do { if (!f->op) f->op = def_##op; } while (0)

static void fill(void)
{
	size_t nc = 0;

	for (size_t i = 0; i < XFER_TRANSPORTS_MAX && xfer_transport_list[i];
	     i++) {
		struct xfer_transport_ops *f = &filled[i];

		*f = *xfer_transport_list[i];
		FILL(available);
		FILL(init);
		FILL(fini);
		FILL(describe);
		FILL(describe_buffer);
		FILL(reg);
		FILL(unreg);
		FILL(open);
		FILL(release);
		FILL(submit);
		FILL(connection);
		FILL(cancel);
		FILL(document);
		FILL(adopt);
		FILL(covers);
		FILL(buffer);
		FILL(device_stats);
		FILL(cpu_seconds);
		table[i] = f;
		if (f->codec)
			codecs[nc++] = f->codec;
	}
}

const struct xfer_transport_ops *const *xfer_transports(void)
{
	pthread_once(&once, fill);
	return table;
}

const struct xfer_transport_ops *xfer_transport_find(const char *name)
{
	const struct xfer_transport_ops *const *t = xfer_transports();

	for (; *t; t++)
		if (!((*t)->flags & XFER_TP_LOCAL) && !(*t)->kind &&
		    !strcmp((*t)->name, name))
			return *t;
	return NULL;
}

const struct xfer_desc_codec *const *xfer_transport_codecs(void)
{
	pthread_once(&once, fill);
	return codecs;
}

int xfer_transport_available(const char *name)
{
	const struct xfer_transport_ops *const *t = xfer_transports();

	if (!name)
		return 0;
	for (; *t; t++)
		if (!strcmp((*t)->name, name))
			return (*t)->available();
	return 0;
}
