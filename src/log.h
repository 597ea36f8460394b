/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * log.h - leveled logging for the daemon, the CLI and the tools.
 *
 * Messages go to stderr (and to syslog once za_log_open_syslog() is
 * called, for the daemon when it leaves the foreground). The rule is that
 * an error is logged once, where it is detected, with the device, zone
 * and offset it concerns; callers up the stack only pass the -errno on.
 */
#ifndef ZA_LOG_H
#define ZA_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum za_log_level {
	ZA_LOG_ERR = 3,
	ZA_LOG_WARN = 4,
	ZA_LOG_INFO = 6,
	ZA_LOG_DEBUG = 7,
};
const char *za_log_level_str(enum za_log_level l);

void za_log_set_level(enum za_log_level l);
enum za_log_level za_log_get_level(void);
/* Prefix every line with this program name (default "zarray"). */
void za_log_set_ident(const char *ident);
void za_log_open_syslog(void);
/* Send messages to a capture function instead (tests); NULL restores. */
void za_log_set_sink(void (*sink)(enum za_log_level l, const char *msg));

void za_log(enum za_log_level l, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define za_log_err(...) za_log(ZA_LOG_ERR, __VA_ARGS__)
#define za_log_warn(...) za_log(ZA_LOG_WARN, __VA_ARGS__)
#define za_log_info(...) za_log(ZA_LOG_INFO, __VA_ARGS__)
#define za_log_debug(...) za_log(ZA_LOG_DEBUG, __VA_ARGS__)

/*
 * A size for people, in IEC units: "512 B", "64 MiB", "1.5 GiB" (one
 * decimal unless whole), into @buf; returns @buf. For the messages of
 * the daemon and the CLI alike; JSON and logs meant for programs keep
 * raw byte counts.
 */
const char *za_fmt_size(uint64_t bytes, char *buf, size_t len);

#endif /* ZA_LOG_H */
