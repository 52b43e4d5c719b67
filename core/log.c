/* Logging to stderr, level from XFER_LOG_LEVEL; an engine's last error. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log_internal.h"

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

void xfer_error_init(struct xfer_error *er)
{
	pthread_mutex_init(&er->lock, NULL);
	er->msg[0] = '\0';
}

void xfer_error_fini(struct xfer_error *er)
{
	pthread_mutex_destroy(&er->lock);
}

int xfer_error_set(struct xfer_error *er, int err, const char *fmt, ...)
{
	char msg[sizeof(er->msg)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&er->lock);
	memcpy(er->msg, msg, sizeof(msg));
	pthread_mutex_unlock(&er->lock);
	xfer_log(XFER_LOG_INFO, "%s", msg);
	return err;
}
