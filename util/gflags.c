/* gflags syntax (util/gflags_internal.h); a '-' in a flag's name stands
 * for a '_' (--list-config is --list_config). */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/gflags_internal.h"

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* Whether @p name (@p len bytes) names flag @p f, a '-' standing for a
 * '_' (--list-config is --list_config). */
static bool named(const char *f, const char *name, size_t len)
{
	if (strlen(f) != len)
		return false;
	for (size_t i = 0; i < len; i++)
		if (f[i] != name[i] && !(f[i] == '_' && name[i] == '-'))
			return false;
	return true;
}

static const struct xfer_gflag *lookup(const struct xfer_gflag *flags,
				       const char *name, size_t len)
{
	for (; flags->name; flags++)
		if (named(flags->name, name, len))
			return flags;
	return NULL;
}

static int parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "true", "t", "yes", "y", "1" };
	static const char *const no[] = { "false", "f", "no", "n", "0" };

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (!strcasecmp(s, yes[i])) {
			*out = true;
			return 0;
		}
		if (!strcasecmp(s, no[i])) {
			*out = false;
			return 0;
		}
	}
	return -EINVAL;
}

/* Store @p value into flag @p f. */
static int set(const struct xfer_gflag *f, const char *value, char *err,
	       size_t errlen)
{
	long long n;
	double d;
	char *end;
	bool b;

	switch (f->type) {
	case XFER_GF_STRING:
		*(const char **)f->dst = value;
		return 0;
	case XFER_GF_BOOL:
		if (parse_bool(value, &b))
			return fail(err, errlen, "--%s: '%s' is not a boolean "
				    "(true, false, 1, 0, yes, no)", f->name, value);
		*(bool *)f->dst = b;
		return 0;
	case XFER_GF_INT:
		errno = 0;
		n = strtoll(value, &end, !strncasecmp(value, "0x", 2) ? 16 : 10);
		if (errno || end == value || *end || n < f->min || n > f->max)
			return fail(err, errlen, "--%s: '%s' is not an integer in "
				    "[%lld, %lld]", f->name, value, f->min, f->max);
		*(long long *)f->dst = n;
		return 0;
	case XFER_GF_DOUBLE:
		errno = 0;
		d = strtod(value, &end);
		if (errno || end == value || *end || !(d >= (double)f->min) ||
		    d > (double)f->max)
			return fail(err, errlen, "--%s: '%s' is not a number in "
				    "[%lld, %lld]", f->name, value, f->min, f->max);
		*(double *)f->dst = d;
		return 0;
	}
	return fail(err, errlen, "--%s: bad flag type", f->name);
}

int xfer_gflags_parse(int argc, char **argv, const struct xfer_gflag *flags,
		 char *err, size_t errlen)
{
	int i;

	for (i = 1; i < argc; i++) {
		const char *arg = argv[i], *name, *eq;
		const struct xfer_gflag *f;
		size_t len;

		if (!strcmp(arg, "--"))
			return i + 1;
		if (arg[0] != '-' || !arg[1])
			return i; /* the first word that is not a flag */
		name = arg + 1 + (arg[1] == '-');
		eq = strchr(name, '=');
		len = eq ? (size_t)(eq - name) : strlen(name);
		f = lookup(flags, name, len);
		if (!f && !eq && len > 2 && !strncmp(name, "no", 2)) {
			f = lookup(flags, name + 2, len - 2);
			if (f && f->type == XFER_GF_BOOL) {
				*(bool *)f->dst = false;
				continue;
			}
			f = NULL;
		}
		if (!f)
			return fail(err, errlen, "unknown command line flag '%.*s'",
				    (int)len, name);
		if (eq) {
			if (set(f, eq + 1, err, errlen))
				return -EINVAL;
		} else if (f->type == XFER_GF_BOOL) {
			*(bool *)f->dst = true;
		} else if (i + 1 == argc) {
			return fail(err, errlen, "flag '--%s' is missing its "
				    "argument", f->name);
		} else if (set(f, argv[++i], err, errlen)) {
			return -EINVAL;
		}
	}
	return i;
}

void xfer_gflags_usage(FILE *out, const char *intro, const struct xfer_gflag *flags)
{
	static const char *const types[] = {
		[XFER_GF_STRING] = "string", [XFER_GF_BOOL] = "bool",
		[XFER_GF_INT] = "int", [XFER_GF_DOUBLE] = "number",
	};

	fputs(intro, out);
	for (; flags->name; flags++)
		fprintf(out, "  --%s (%s) %s\n", flags->name,
			types[flags->type], flags->help);
}
