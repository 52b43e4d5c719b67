/*
 * RDMA topology from sysfs: the devices to open, their NUMA nodes, and the
 * NIC priority matrix (the user's, or one that prefers same-node NICs).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <numa.h>

#include "transports/rdma/topology_internal.h"

__attribute__((format(printf, 4, 5)))
static int fail(int ret, char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return ret;
}

/* ---- sysfs ---- */

/* First line of @path without trailing whitespace; false if unreadable. */
static bool read_line(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "r");
	size_t len;
	bool ok;

	if (!f)
		return false;
	ok = fgets(buf, (int)size, f) != NULL;
	fclose(f);
	if (!ok)
		return false;
	len = strlen(buf);
	while (len && isspace((unsigned char)buf[len - 1]))
		buf[--len] = '\0';
	return true;
}

/* The node in a numa_node file; -1 if missing, malformed or unknown. */
static int read_numa_node(const char *path)
{
	char buf[32], *end;
	long v;

	if (!read_line(path, buf, sizeof(buf)))
		return -1;
	errno = 0;
	v = strtol(buf, &end, 10);
	if (errno || end == buf || *end || v < 0 || v > INT_MAX)
		return -1;
	return (int)v;
}

/* A name read from sysfs becomes a path component: keep it to one. */
static bool safe_component(const char *s)
{
	return *s && strcmp(s, ".") && strcmp(s, "..") && !strchr(s, '/');
}

/* The device's own node, else that of its first netdev (RoCE, rxe). */
static int sysfs_numa_node(const char *root, const char *dev)
{
	char path[PATH_MAX], ndev[256];
	int node;

	snprintf(path, sizeof(path), "%s/class/infiniband/%s/device/numa_node",
		 root, dev);
	node = read_numa_node(path);
	if (node >= 0)
		return node;
	snprintf(path, sizeof(path),
		 "%s/class/infiniband/%s/ports/1/gid_attrs/ndevs/0", root, dev);
	if (!read_line(path, ndev, sizeof(ndev)) || !safe_component(ndev))
		return -1;
	snprintf(path, sizeof(path), "%s/class/net/%s/device/numa_node", root,
		 ndev);
	return read_numa_node(path);
}

static int cmp_dev(const void *a, const void *b)
{
	const struct rdma_topo_dev *x = a, *y = b;

	return strcmp(x->name, y->name);
}

/* Every entry of <root>/class/infiniband, sorted by name. */
static int list_devices(const char *root, struct rdma_topo_dev **out,
			size_t *n, char *err, size_t errlen)
{
	struct rdma_topo_dev *devs = NULL, *tmp;
	size_t cnt = 0, cap = 0;
	char path[PATH_MAX];
	struct dirent *de;
	DIR *d;

	snprintf(path, sizeof(path), "%s/class/infiniband", root);
	d = opendir(path);
	if (!d)
		return fail(-ENODEV, err, errlen, "no RDMA device: looked in "
			    "%s: %s", path, strerror(errno));
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' ||
		    strlen(de->d_name) >= RDMA_DEV_NAME_MAX)
			continue;
		if (cnt == cap) {
			cap = cap ? 2 * cap : 8;
			tmp = realloc(devs, cap * sizeof(*devs));
			if (!tmp)
				goto err_nomem;
			devs = tmp;
		}
		strcpy(devs[cnt].name, de->d_name);
		devs[cnt++].numa_node = -1;
	}
	closedir(d);
	if (cnt)
		qsort(devs, cnt, sizeof(*devs), cmp_dev);
	*out = devs;
	*n = cnt;
	return 0;

err_nomem:
	closedir(d);
	free(devs);
	return fail(-ENOMEM, err, errlen, "out of memory");
}

static ssize_t dev_index(const struct rdma_topo_dev *devs, size_t n,
			 const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(devs[i].name, name))
			return (ssize_t)i;
	return -1;
}

/* ---- device selection ---- */

/*
 * Mark the devices named in the comma list @p names. @return 1 if the list
 * named any (a blank list means no filter), 0 if not, or an error.
 */
static int apply_filter(const char *root, const char *names,
			const struct rdma_topo_dev *all, size_t nall,
			bool *keep, char *err, size_t errlen)
{
	char *copy, *tok, *save = NULL;
	int ret = 0;
	ssize_t i;

	if (!names)
		return 0;
	copy = strdup(names);
	if (!copy)
		return fail(-ENOMEM, err, errlen, "out of memory");
	for (tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		char *end = tok + strlen(tok);

		while (isspace((unsigned char)*tok))
			tok++;
		while (end > tok && isspace((unsigned char)end[-1]))
			*--end = '\0';
		if (!*tok)
			continue;
		i = dev_index(all, nall, tok);
		if (i < 0) {
			ret = fail(-ENODEV, err, errlen, "RDMA device %s "
				   "(device_names) not found: looked in "
				   "%s/class/infiniband", tok, root);
			break;
		}
		keep[i] = true;
		ret = 1;
	}
	free(copy);
	return ret;
}

static int check_name(const char *name, const struct rdma_topo_dev *all,
		      size_t nall, bool *keep, bool filtered, char *err,
		      size_t errlen)
{
	ssize_t i = dev_index(all, nall, name);

	if (i < 0 || (filtered && !keep[i]))
		return fail(-EPROTO, err, errlen,
			    "matrix names unknown device %s", name);
	keep[i] = true;
	return 0;
}

/* Every device the matrix names must be usable; without a filter, the
 * matrix itself selects the devices. */
static int check_matrix(const struct xfer_rdma_prio *rows, size_t nrows,
			const struct rdma_topo_dev *all, size_t nall,
			bool *keep, bool filtered, char *err, size_t errlen)
{
	int ret;

	for (size_t r = 0; r < nrows; r++) {
		for (size_t j = 0; j < rows[r].npref; j++) {
			ret = check_name(rows[r].pref[j], all, nall, keep,
					 filtered, err, errlen);
			if (ret)
				return ret;
		}
		for (size_t j = 0; j < rows[r].nother; j++) {
			ret = check_name(rows[r].other[j], all, nall, keep,
					 filtered, err, errlen);
			if (ret)
				return ret;
		}
	}
	return 0;
}

/* N of a "cpu:N" location, else -1. */
static int cpu_location_node(const char *loc)
{
	char *end;
	long v;

	if (strncmp(loc, "cpu:", 4) || !isdigit((unsigned char)loc[4]))
		return -1;
	errno = 0;
	v = strtol(loc + 4, &end, 10);
	if (errno || *end || v > INT_MAX)
		return -1;
	return (int)v;
}

/* The node of the first "cpu:N" row that prefers @p dev, else -1. */
static int matrix_numa_node(const struct xfer_rdma_prio *rows, size_t nrows,
			    const char *dev)
{
	for (size_t r = 0; r < nrows; r++) {
		int node = cpu_location_node(rows[r].location);

		if (node < 0)
			continue;
		for (size_t j = 0; j < rows[r].npref; j++)
			if (!strcmp(rows[r].pref[j], dev))
				return node;
	}
	return -1;
}

/* ---- default matrix ---- */

/* Fill @p r with the devices marked in @p pref preferred, the rest others. */
static int fill_prio_row(struct xfer_rdma_prio *r, const char *location,
			 const struct rdma_topo_dev *devs, size_t n,
			 const bool *pref)
{
	char *name;

	r->location = strdup(location);
	r->pref = malloc(n * sizeof(*r->pref));
	r->other = malloc(n * sizeof(*r->other));
	if (!r->location || !r->pref || !r->other)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		name = strdup(devs[i].name);
		if (!name)
			return -ENOMEM;
		if (pref[i])
			r->pref[r->npref++] = name;
		else
			r->other[r->nother++] = name;
	}
	return 0;
}

/* Prefer the devices on @p node and those of unknown node; all if none. */
static void mark_node(const struct rdma_topo_dev *devs, size_t n, int node,
		      bool *pref)
{
	bool any = false;

	for (size_t i = 0; i < n; i++) {
		pref[i] = devs[i].numa_node == node || devs[i].numa_node < 0;
		any |= pref[i];
	}
	if (!any)
		for (size_t i = 0; i < n; i++)
			pref[i] = true;
}

/* A node gets a row if the machine has it or a device sits on it. */
static bool node_wants_row(const struct rdma_topo *t, int sys_max, int node)
{
	if (node <= sys_max)
		return true;
	for (size_t i = 0; i < t->ndevs; i++)
		if (t->devs[i].numa_node == node)
			return true;
	return false;
}

/*
 * "cpu:N" for every node of the machine or of a device, then "*". The rows
 * array is zeroed so that xfer_rdma_prio_free() can take a half-built one.
 */
static int build_default_prio(struct rdma_topo *t)
{
	int sys_max = numa_available() >= 0 ? numa_max_node() : -1;
	int top = sys_max, ret = -ENOMEM;
	size_t nrows = 1, r = 0;
	char loc[32];
	bool *pref;

	for (size_t i = 0; i < t->ndevs; i++)
		if (t->devs[i].numa_node > top)
			top = t->devs[i].numa_node;
	for (int node = 0; node <= top; node++)
		nrows += node_wants_row(t, sys_max, node);

	pref = malloc(t->ndevs * sizeof(*pref));
	t->prio = calloc(nrows, sizeof(*t->prio));
	if (!pref || !t->prio)
		goto out;
	t->nprio = nrows;
	for (int node = 0; node <= top; node++) {
		if (!node_wants_row(t, sys_max, node))
			continue;
		snprintf(loc, sizeof(loc), "cpu:%d", node);
		mark_node(t->devs, t->ndevs, node, pref);
		ret = fill_prio_row(&t->prio[r++], loc, t->devs, t->ndevs,
				    pref);
		if (ret)
			goto out;
	}
	memset(pref, 1, t->ndevs * sizeof(*pref));
	ret = fill_prio_row(&t->prio[r], "*", t->devs, t->ndevs, pref);
out:
	free(pref);
	return ret;
}

/* ---- rdma_topo_build ---- */

/* Copy the kept devices into @p t and find their nodes. */
static int take_devices(struct rdma_topo *t, const char *root,
			const struct rdma_topo_dev *all, size_t nall,
			const bool *keep, const struct xfer_rdma_prio *rows,
			size_t nrows)
{
	size_t n = 0;

	for (size_t i = 0; i < nall; i++)
		n += keep[i];
	if (!n)
		return -ENODEV;
	t->devs = calloc(n, sizeof(*t->devs));
	if (!t->devs)
		return -ENOMEM;
	for (size_t i = 0; i < nall; i++) {
		struct rdma_topo_dev *d = &t->devs[t->ndevs];

		if (!keep[i])
			continue;
		*d = all[i];
		d->numa_node = sysfs_numa_node(root, d->name);
		if (d->numa_node < 0)
			d->numa_node = matrix_numa_node(rows, nrows, d->name);
		t->ndevs++;
	}
	return 0;
}

static int resolve_matrix(struct rdma_topo *t)
{
	const char **names = malloc(t->ndevs * sizeof(*names));
	int ret;

	if (!names)
		return -ENOMEM;
	for (size_t i = 0; i < t->ndevs; i++)
		names[i] = t->devs[i].name;
	ret = xfer_rdma_matrix_build(t->prio, t->nprio, names, t->ndevs,
				     &t->matrix);
	free(names);
	return ret;
}

int xfer_rdma_topo_build(const char *sysfs_root, const char *device_names,
			 const char *matrix_json, struct rdma_topo *out, char *err,
		    size_t errlen)
{
	struct rdma_topo_dev *all = NULL;
	struct xfer_rdma_prio *rows = NULL;
	size_t nall = 0, nrows = 0;
	bool *keep = NULL;
	int ret, filtered;

	memset(out, 0, sizeof(*out));
	ret = list_devices(sysfs_root, &all, &nall, err, errlen);
	if (ret)
		return ret;
	if (matrix_json) {
		ret = xfer_rdma_prio_decode(matrix_json, strlen(matrix_json), &rows,
					    &nrows, err, errlen);
		if (ret)
			goto out;
	}
	keep = calloc(nall ? nall : 1, sizeof(*keep));
	if (!keep) {
		ret = fail(-ENOMEM, err, errlen, "out of memory");
		goto out;
	}
	filtered = apply_filter(sysfs_root, device_names, all, nall, keep, err,
				errlen);
	if (filtered < 0) {
		ret = filtered;
		goto out;
	}
	if (!filtered && !matrix_json)
		memset(keep, 1, nall * sizeof(*keep));
	ret = check_matrix(rows, nrows, all, nall, keep, filtered, err,
			   errlen);
	if (ret)
		goto out;

	ret = take_devices(out, sysfs_root, all, nall, keep, rows, nrows);
	if (ret == -ENODEV) {
		fail(ret, err, errlen,
		     "no RDMA device: looked in %s/class/infiniband: empty",
		     sysfs_root);
		goto out;
	}
	if (ret)
		goto out_nomem;
	if (matrix_json) {
		/* The user's matrix is published as given. */
		out->prio = rows;
		out->nprio = nrows;
		rows = NULL;
		nrows = 0;
	} else if (build_default_prio(out)) {
		goto out_nomem;
	}
	if (resolve_matrix(out))
		goto out_nomem;
	ret = 0;
	goto out;

out_nomem:
	ret = fail(-ENOMEM, err, errlen, "out of memory");
out:
	if (ret)
		xfer_rdma_topo_free(out);
	xfer_rdma_prio_free(rows, nrows);
	free(keep);
	free(all);
	return ret;
}

void xfer_rdma_topo_free(struct rdma_topo *t)
{
	free(t->devs);
	xfer_rdma_prio_free(t->prio, t->nprio);
	xfer_rdma_matrix_free(&t->matrix);
	memset(t, 0, sizeof(*t));
}

/* ---- resolved matrix ---- */

static ssize_t name_index(const char *const *names, size_t n,
			  const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(names[i], name))
			return (ssize_t)i;
	return -1;
}

/* Append the known, not yet seen names of @p list to @p r. */
static void add_names(struct rdma_row *r, char *const *list, size_t nlist,
		      const char *const *names, size_t ndevs, bool *seen)
{
	for (size_t j = 0; j < nlist; j++) {
		ssize_t i = name_index(names, ndevs, list[j]);

		if (i < 0 || seen[i])
			continue;
		seen[i] = true;
		r->idx[r->n++] = (uint16_t)i;
	}
}

static int resolve_row(struct rdma_row *r, const struct xfer_rdma_prio *p,
		       const char *const *names, size_t ndevs, bool *seen)
{
	r->location = strdup(p->location);
	r->idx = malloc((ndevs ? ndevs : 1) * sizeof(*r->idx));
	if (!r->location || !r->idx)
		return -ENOMEM;
	memset(seen, 0, ndevs * sizeof(*seen));
	add_names(r, p->pref, p->npref, names, ndevs, seen);
	r->npref = r->n;
	add_names(r, p->other, p->nother, names, ndevs, seen);
	return 0;
}

static int build_any(struct rdma_row *r, size_t ndevs)
{
	r->location = strdup("*");
	r->idx = malloc((ndevs ? ndevs : 1) * sizeof(*r->idx));
	if (!r->location || !r->idx)
		return -ENOMEM;
	for (size_t i = 0; i < ndevs; i++)
		r->idx[i] = (uint16_t)i;
	r->npref = r->n = ndevs;
	return 0;
}

int xfer_rdma_matrix_build(const struct xfer_rdma_prio *rows, size_t nrows,
			   const char *const *names, size_t ndevs,
		      struct rdma_matrix *out)
{
	bool *seen;
	int ret = -ENOMEM;

	memset(out, 0, sizeof(*out));
	seen = malloc(ndevs ? ndevs : 1);
	out->rows = calloc(nrows ? nrows : 1, sizeof(*out->rows));
	if (!seen || !out->rows)
		goto out;
	out->nrows = nrows;
	for (size_t r = 0; r < nrows; r++) {
		ret = resolve_row(&out->rows[r], &rows[r], names, ndevs, seen);
		if (ret)
			goto out;
	}
	ret = build_any(&out->any, ndevs);
out:
	free(seen);
	if (ret)
		xfer_rdma_matrix_free(out);
	return ret;
}

static void free_row(struct rdma_row *r)
{
	free(r->location);
	free(r->idx);
}

void xfer_rdma_matrix_free(struct rdma_matrix *m)
{
	for (size_t r = 0; r < m->nrows; r++)
		free_row(&m->rows[r]);
	free(m->rows);
	free_row(&m->any);
	memset(m, 0, sizeof(*m));
}

static const struct rdma_row *find_row(const struct rdma_matrix *m,
				       const char *location)
{
	for (size_t r = 0; r < m->nrows; r++)
		if (m->rows[r].n && !strcmp(m->rows[r].location, location))
			return &m->rows[r];
	return NULL;
}

const struct rdma_row *xfer_rdma_matrix_find(const struct rdma_matrix *m,
					     const char *location)
{
	const struct rdma_row *r = NULL;

	if (location)
		r = find_row(m, location);
	if (!r)
		r = find_row(m, "*");
	return r ? r : &m->any;
}
