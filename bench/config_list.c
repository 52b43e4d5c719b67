/*
 * xfer-bench --list-config: the library's configuration keys, as
 * xfer_config_next() describes them, one paragraph each. With --markdown
 * they are the list docs/CONFIG.md and include/xfer/xfer.h hold (make
 * docs writes it there; make test-unit checks it is the same).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bench/bench_internal.h"

/* Paragraphs wrap at this column (3 more in xfer.h, behind " * "). */
#define WIDTH 74

/* @p v with a binary unit where it is a whole number of them. */
static void bytes(char *out, size_t len, long long v)
{
	static const char *const unit[] = { "KiB", "MiB", "GiB", "TiB" };
	int i = -1;

	while (i < 3 && v >= 1024 && v % 1024 == 0) {
		v /= 1024;
		i++;
	}
	if (i < 0)
		snprintf(out, len, "%lld", v);
	else
		snprintf(out, len, "%lld %s", v, unit[i]);
}

static void number(char *out, size_t len, const struct xfer_config_key *k,
		   long long v)
{
	if (!strcmp(k->unit, "bytes"))
		bytes(out, len, v);
	else
		snprintf(out, len, "%lld", v);
}

/* "default X" or "unset by default", a number in its unit. */
static void default_of(char *out, size_t len, const struct xfer_config_key *k)
{
	char num[32];
	long long n;

	if (!k->def) {
		snprintf(out, len, "unset by default");
	} else if (!strcmp(k->unit, "string")) {
		snprintf(out, len, "default \"%s\"", k->def);
	} else if (strcmp(k->unit, "bool") && sscanf(k->def, "%lld", &n) == 1) {
		number(num, sizeof(num), k, n);
		snprintf(out, len, "default %s", num);
	} else {
		snprintf(out, len, "default %s", k->def);
	}
}

/* The paragraph of @p k into @p out: "- `name`, unit, default, range
 * (`env`, `alias`): doc." (text: no list mark, no backquotes). */
static void paragraph(char *out, size_t len, const struct xfer_config_key *k,
		      bool md)
{
	const char *q = md ? "`" : "";
	char def[64], lo[32], hi[32], range[80] = "", alias[96] = "";

	default_of(def, sizeof(def), k);
	if (k->min != k->max && strcmp(k->unit, "bool")) {
		number(lo, sizeof(lo), k, k->min);
		number(hi, sizeof(hi), k, k->max);
		snprintf(range, sizeof(range), ", %s..%s", lo, hi);
	}
	if (k->alias)
		snprintf(alias, sizeof(alias), ", %s%s%s%s%s", q, k->alias, q,
			 k->alias_unit ? " in " : "",
			 k->alias_unit ? k->alias_unit : "");
	snprintf(out, len, "%s%s%s%s, %s, %s%s (%s%s%s%s): %s.", md ? "- " : "",
		 q, k->name, q, k->unit, def, range, q, k->env, q, alias,
		 k->doc);
}

/* @p text wrapped at WIDTH, continued lines indented by two. */
static void wrap(FILE *f, const char *text)
{
	size_t col = 0;

	while (*text) {
		size_t w = strcspn(text, " ");

		if (col && col + 1 + w > WIDTH) {
			fputs("\n  ", f);
			col = 2;
		} else if (col) {
			fputc(' ', f);
			col++;
		}
		fwrite(text, 1, w, f);
		col += w;
		text += w;
		text += strspn(text, " ");
	}
	fputc('\n', f);
}

void bench_list_config(FILE *f, bool markdown)
{
	const struct xfer_config_key *k;
	size_t iter = 0;
	char text[1024];
	int ret;

	while ((ret = xfer_config_next(&iter, &k)) == 0) {
		paragraph(text, sizeof(text), k, markdown);
		wrap(f, text);
	}
	if (ret != -ENOENT)
		die_api(NULL, "xfer_config_next", ret);
}
