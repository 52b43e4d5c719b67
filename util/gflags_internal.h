/*
 * A command line read as gflags reads one, so that Mooncake's programs'
 * command lines work unchanged (xfer-bench, xfer-stored):
 *
 *   --flag=value  -flag=value  --flag value  -flag value
 *   --flag (a boolean: true)  --noflag (false)  --flag=true|false|1|0|
 *   yes|no|t|f|y|n (any case)  --  (ends the flags)
 *
 * A boolean takes its value only after '=' (the next word is not its
 * value). Integers are decimal, or hexadecimal after 0x. An unknown flag,
 * a missing or malformed value, a number out of range: an error naming
 * the flag. No state: any thread.
 */
#ifndef XFER_GFLAGS_INTERNAL_H
#define XFER_GFLAGS_INTERNAL_H

#include <stddef.h>
#include <stdio.h>

enum xfer_gflag_type { XFER_GF_STRING, XFER_GF_BOOL, XFER_GF_INT,
		       XFER_GF_DOUBLE };

/* A flag: where its value goes (const char *, bool, long long or
 * double), the range of a number, a line of help. Tables end with a
 * NULL name. */
struct xfer_gflag {
	const char *name;
	enum xfer_gflag_type type;
	void *dst;
	long long min, max;
	const char *help;
};

/* Read the flags of @p argv (gflags syntax) into their places; a string
 * flag points into @p argv.
 * @return the index of the first argument that is not a flag (argc if
 *         none), or -EINVAL with a message naming the flag in @p err
 *         (@p errlen bytes). */
int xfer_gflags_parse(int argc, char **argv, const struct xfer_gflag *flags,
		      char *err, size_t errlen);

/* @p intro, then a line per flag. */
void xfer_gflags_usage(FILE *out, const char *intro,
		       const struct xfer_gflag *flags);

#endif
