/* Logging to stderr, level from XFER_LOG_LEVEL (or Mooncake's MC_LOG_LEVEL,
 * MC_VERBOSE); an engine's last error. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "util/log_internal.h"

static const char *const level_names[] = { "error", "warn", "info", "debug" };

/* Mooncake's MC_LOG_LEVEL names (glog's), by level. */
static const char *const mc_level_names[] = { "ERROR", "WARNING", "INFO",
					      "TRACE" };

static int level_named(const char *v, const char *const *names)
{
	for (int i = 0; v && i <= XFER_LOG_DEBUG; i++)
		if (!strcasecmp(v, names[i]))
			return i;
	return -1;
}

/*
 * XFER_LOG_LEVEL, else Mooncake's MC_LOG_LEVEL (TRACE is debug), else
 * debug if Mooncake's MC_VERBOSE is set (to anything but "", 0 or
 * false: "more detailed logs"), else warn.
 */
static int max_level(void)
{
	static int level = -1;
	const char *v;

	if (level >= 0)
		return level;
	level = level_named(getenv("XFER_LOG_LEVEL"), level_names);
	if (level < 0)
		level = level_named(getenv("MC_LOG_LEVEL"), mc_level_names);
	v = getenv("MC_VERBOSE");
	if (level < 0 && v && *v && strcmp(v, "0") && strcasecmp(v, "false"))
		level = XFER_LOG_DEBUG;
	if (level < 0)
		level = XFER_LOG_WARN;
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

unsigned xfer_log_limited(struct xfer_log_limit *lim, int level,
			  const char *fmt, ...)
{
	struct timespec ts;
	int64_t now, next;
	unsigned skipped;
	char line[448];
	va_list ap;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	next = atomic_load(&lim->next_ms);
	/* one caller a second wins the exchange and logs */
	if (now < next ||
	    !atomic_compare_exchange_strong(&lim->next_ms, &next, now + 1000)) {
		atomic_fetch_add(&lim->skipped, 1);
		return 0;
	}
	skipped = atomic_exchange(&lim->skipped, 0);
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (skipped)
		xfer_log(level, "%s (%u more like it since the last line)",
			 line, skipped);
	else
		xfer_log(level, "%s", line);
	return skipped + 1;
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

const char *xfer_error_get(const struct xfer_error *er)
{
	static _Thread_local char copy[sizeof(er->msg)];
	/* The lock is the writers': the message itself stays read-only. */
	pthread_mutex_t *lock = (pthread_mutex_t *)&er->lock;

	pthread_mutex_lock(lock);
	memcpy(copy, er->msg, sizeof(copy));
	pthread_mutex_unlock(lock);
	return copy;
}
