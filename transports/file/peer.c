/*
 * Peers' file segments: their documents, which of their files this host
 * reaches itself (local_path_map names a path for it that opens), and the
 * owner's data port for the others. The engine's own file segment, opened
 * by its own name, is answered from the registry (files.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/container_internal.h"
#include "util/net_internal.h"
#include "transports/file/file_internal.h"

static struct file_transport *ft(struct xfer_transport *t)
{
	return container_of(t, struct file_transport, base);
}

/* The path local_path_map gives this host for @p b, or NULL. */
static const char *local_path(const struct file_transport *t,
			      const struct xfer_file_buf *b)
{
	for (size_t i = 0; i < b->nmap; i++)
		if (!strcmp(b->map_host[i], t->host))
			return b->map_path[i];
	return NULL;
}

void xfer_file_release(struct xfer_transport *t, void *priv)
{
	struct file_peer *p = priv;

	(void)t;
	for (size_t i = 0; p->fo && i < p->doc->nbufs; i++)
		if (p->fo[i])
			xfer_file_open_put(p->fo[i]);
	free(p->fo);
	xfer_file_doc_free(p->doc);
	free(p);
}

/* Open what this host reaches of @p p's files. @return whether some file
 * is left for the owner to serve. */
static bool open_here(struct file_transport *t, struct xfer_segment *seg,
		      struct file_peer *p)
{
	bool rest = false;

	for (size_t i = 0; i < p->doc->nbufs; i++) {
		const char *path = t->k[K_LOCAL].num ?
				   local_path(t, &p->doc->bufs[i]) : NULL;
		int ret = path ? xfer_file_open(t, path, &p->fo[i]) : 0;

		if (ret)
			xfer_log(XFER_LOG_INFO, "file: segment %s: %s: %s; "
				 "through its owner", seg->name, path,
				 strerror(-ret));
		rest = rest || !p->fo[i];
	}
	return rest;
}

int xfer_file_adopt(struct xfer_transport *tp, struct xfer_segment *seg,
		    const char *json, size_t len, char *err, size_t errlen)
{
	struct file_transport *t = ft(tp);
	struct sockaddr_storage ss;
	struct file_peer *p;
	int ret;

	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	ret = xfer_file_doc_decode(json, len, &p->doc, err, errlen);
	if (ret) {
		free(p);
		return ret;
	}
	p->fo = calloc(p->doc->nbufs + 1, sizeof(*p->fo));
	if (!p->fo) {
		xfer_file_release(tp, p);
		return -ENOMEM;
	}
	/* Without a data port (a document another engine wrote) the files
	 * this host does not reach cannot be moved: their requests fail. */
	if (open_here(t, seg, p) && p->doc->data_port && seg->addrlen) {
		ss = seg->addr;
		xfer_net_set_port(&ss, p->doc->data_port);
		p->remote = xfer_file_rpeer(t, &ss, seg->addrlen);
		if (!p->remote) {
			xfer_file_release(tp, p);
			return -ENOMEM;
		}
	}
	seg->tp_priv = p;
	return 0;
}

bool xfer_file_covers(struct xfer_transport *tp, struct xfer_segment *seg,
		      uint64_t off, uint64_t len)
{
	const struct file_peer *p = seg->tp_priv;
	struct file_open *fo;
	uint64_t in;

	if (!seg->local)
		return p && xfer_file_doc_find(p->doc, off, len, &in) >= 0;
	fo = xfer_file_own_find(ft(tp), off, len, &in);
	if (fo)
		xfer_file_open_put(fo);
	return fo != NULL;
}

int xfer_file_buffer(struct xfer_transport *tp, struct xfer_segment *seg,
		     size_t index, uint64_t *off, uint64_t *len,
		     const char **name)
{
	const struct file_peer *p = seg->tp_priv;
	uint64_t start = 0;

	if (seg->local)
		return xfer_file_own_buffer(ft(tp), index, off, len, name);
	if (!p || index >= p->doc->nbufs)
		return -ENOENT;
	for (size_t i = 0; i < index; i++)
		start += p->doc->bufs[i].length;
	*off = start;
	*len = p->doc->bufs[index].length;
	if (name)
		*name = p->doc->bufs[index].file_path;
	return 0;
}
