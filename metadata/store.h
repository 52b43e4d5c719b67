/*
 * The metadata store ops table: a key/value view of PROTOCOL.md §2, one
 * backend per file, chosen by the metadata connection string.
 */
#ifndef XFER_STORE_H
#define XFER_STORE_H

#include <stddef.h>

struct xfer_store;

struct xfer_store_ops {
	const char *name;
	/** Does this backend serve connection string @p conn? */
	int (*accepts)(const char *conn);
	int (*open)(const char *conn, struct xfer_store **out);
	/** Fetch @p key: *value malloc'd, not NUL-ended, *len bytes.
	 *  @return 0, -ENOENT (absent), or a negative errno. May block. */
	int (*get)(struct xfer_store *s, const char *key, char **value,
		   size_t *len);
	void (*close)(struct xfer_store *s);
};

struct xfer_store {
	const struct xfer_store_ops *ops;
	unsigned handshake_max_len;
};

extern const struct xfer_store_ops xfer_p2p_ops;

/** The backend for @p conn, or NULL. */
const struct xfer_store_ops *xfer_store_find(const char *conn);

#endif
