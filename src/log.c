// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * log.c - leveled logging to stderr and, for the daemon, syslog; sizes
 * for people in messages.
 *
 * One line per message, formatted once into a bounded buffer so that
 * concurrent writers (there are none yet, but threads may come) do not
 * interleave inside a line. It does not rate-limit: callers log an error
 * once, where they detect it.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>

#include "log.h"

static enum za_log_level log_level = ZA_LOG_WARN;
static const char *log_ident = "zarray";
static bool log_syslog;
static void (*log_sink)(enum za_log_level l, const char *msg);

const char *za_log_level_str(enum za_log_level l)
{
	switch (l) {
	case ZA_LOG_ERR:
		return "error";
	case ZA_LOG_WARN:
		return "warning";
	case ZA_LOG_INFO:
		return "info";
	case ZA_LOG_DEBUG:
		return "debug";
	}
	return "?";
}

void za_log_set_level(enum za_log_level l)
{
	log_level = l;
}

enum za_log_level za_log_get_level(void)
{
	return log_level;
}

void za_log_set_ident(const char *ident)
{
	log_ident = ident;
}

void za_log_open_syslog(void)
{
	openlog(log_ident, LOG_PID, LOG_DAEMON);
	log_syslog = true;
}

void za_log_set_sink(void (*sink)(enum za_log_level l, const char *msg))
{
	log_sink = sink;
}

void za_log(enum za_log_level l, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (l > log_level && !log_sink)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (log_sink) {
		log_sink(l, msg);
		return;
	}
	if (log_syslog)
		syslog((int)l, "%s", msg);
	else
		fprintf(stderr, "%s: %s%s%s\n", log_ident,
			l <= ZA_LOG_WARN ? za_log_level_str(l) : "",
			l <= ZA_LOG_WARN ? ": " : "", msg);
}

const char *za_fmt_size(uint64_t bytes, char *buf, size_t len)
{
	static const char *const unit[] = { "B",   "KiB", "MiB", "GiB",
					    "TiB", "PiB", "EiB" };
	double v = (double)bytes;
	int u = 0;

	while (v >= 1024 && u < 6) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
	else if (v == (double)(uint64_t)v)
		snprintf(buf, len, "%llu %s", (unsigned long long)v, unit[u]);
	else
		snprintf(buf, len, "%.1f %s", v, unit[u]);
	return buf;
}
