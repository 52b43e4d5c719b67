/*
 * Configuration keys ("knobs"): the core's and each transport's, each
 * with its XFER_* environment name and, where Mooncake has one, its MC_*
 * alias. struct xfer_config (public, opaque) holds a value for every
 * knob of the core and of every transport in the table.
 */
#ifndef XFER_CONFIG_INTERNAL_H
#define XFER_CONFIG_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include <xfer/xfer.h>

enum xfer_knob_type {
	XFER_KNOB_STR,
	XFER_KNOB_NUM,   /* a decimal integer in [min, max] */
	XFER_KNOB_BOOL,  /* 0, 1, true or false; a num of 0 or 1 */
};

/*
 * A knob: what xfer_config_next() says of it (name, variables, unit,
 * default, range, a line of doc; every table entry fills each), and how
 * its values are read.
 */
struct xfer_knob {
	struct xfer_config_key key;
	enum xfer_knob_type type;
	/** The alias counts in other units: its value times this (0: 1). */
	unsigned alias_scale;
	/** A further check of a number in range, or NULL. */
	bool (*check)(long long v);
};

/*
 * Table entries. @p n name, @p e XFER_* variable, @p a Mooncake's MC_*
 * name or NULL, @p d the default as xfer_config_get() gives it (NULL:
 * unset; booleans "true"/"false"), @p u the unit (xfer.h says which
 * there are), @p txt one line: what it is, what 0 or unset means.
 */
#define XFER_KNOB_KEY(n, e, a, lo, hi, d, u, txt) \
	{ .name = n, .env = e, .alias = a, .unit = u, .def = d, .min = lo, \
	  .max = hi, .doc = txt }
/* A string. */
#define XFER_KNOB_S(n, e, a, d, u, txt) \
	{ .key = XFER_KNOB_KEY(n, e, a, 0, 0, d, u, txt), \
	  .type = XFER_KNOB_STR }
/* A number in [lo, hi]. */
#define XFER_KNOB_N(n, e, a, lo, hi, d, u, txt) \
	{ .key = XFER_KNOB_KEY(n, e, a, lo, hi, d, u, txt), \
	  .type = XFER_KNOB_NUM }
/* A boolean. */
#define XFER_KNOB_B(n, e, a, d, txt) \
	{ .key = XFER_KNOB_KEY(n, e, a, 0, 1, d, "bool", txt), \
	  .type = XFER_KNOB_BOOL }
/* The end of a table. */
#define XFER_KNOB_END { .key.name = NULL }

union xfer_knob_val {
	long long num;
	const char *str; /* NULL when unset; owned by the config */
};

struct xfer_config;

/** The knobs of @p k, ended by one with a NULL key.name (NULL: none). */
size_t xfer_knobs_count(const struct xfer_knob *k);

/** A copy of @p cfg (strings too); NULL on ENOMEM. */
struct xfer_config *xfer_config_dup(const struct xfer_config *cfg);
/** The value of knob @p name, which must exist. */
union xfer_knob_val xfer_config_val(const struct xfer_config *cfg,
				    const char *name);
/** The values of the knobs @p knobs (ended by a NULL key.name) into
 *  @p out. */
void xfer_config_vals(const struct xfer_config *cfg,
		      const struct xfer_knob *knobs, union xfer_knob_val *out);

#endif
