/* Logging to stderr, level from XFER_LOG_LEVEL (error|warn|info|debug). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

static const char *const level_names[] = { "error", "warn", "info", "debug" };

static int max_level(void)
{
	static int level = -1;
	const char *v;

	if (level >= 0)
		return level;
	level = XFER_LOG_WARN;
	v = getenv("XFER_LOG_LEVEL");
	for (int i = 0; v && i <= XFER_LOG_DEBUG; i++)
		if (!strcasecmp(v, level_names[i]))
			level = i;
	return level;
}

void xfer_log(int level, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	if (level > max_level())
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "xfer %s: %s\n", level_names[level], line);
}
