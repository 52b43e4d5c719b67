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

enum xfer_knob_type {
	XFER_KNOB_STR,
	XFER_KNOB_NUM,   /* a decimal integer in [min, max] */
	XFER_KNOB_BOOL,  /* 0, 1, true or false; a num of 0 or 1 */
};

struct xfer_knob {
	const char *name;         /* "slice_size" */
	const char *env;          /* "XFER_SLICE_SIZE" */
	const char *alias;        /* Mooncake's name, or NULL */
	enum xfer_knob_type type;
	long long min, max;
	/** The alias counts in other units: its value times this (0: 1). */
	unsigned alias_scale;
	/** The default, as set would take it; NULL: unset (strings only). */
	const char *def;
	/** A further check of a number in range, or NULL. */
	bool (*check)(long long v);
};

/* Table entries: a string, a number in [lo, hi], with default @p d. */
#define XFER_KNOB_S(n, e, a, d) \
	{ .name = n, .env = e, .alias = a, .type = XFER_KNOB_STR, .def = d }
#define XFER_KNOB_N(n, e, a, lo, hi, d) \
	{ .name = n, .env = e, .alias = a, .type = XFER_KNOB_NUM, \
	  .min = lo, .max = hi, .def = d }

union xfer_knob_val {
	long long num;
	const char *str; /* NULL when unset; owned by the config */
};

struct xfer_config;

/** The knobs of @p k, ended by one with a NULL name (NULL: none). */
size_t xfer_knobs_count(const struct xfer_knob *k);

/** A copy of @p cfg (strings too); NULL on ENOMEM. */
struct xfer_config *xfer_config_dup(const struct xfer_config *cfg);
/** The value of knob @p name, which must exist. */
union xfer_knob_val xfer_config_val(const struct xfer_config *cfg,
				    const char *name);
/** The values of the knobs @p knobs (ended by a NULL name) into @p out. */
void xfer_config_vals(const struct xfer_config *cfg,
		      const struct xfer_knob *knobs, union xfer_knob_val *out);

#endif
