/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * cli.h - what the zarray CLI's commands share: global options, exit
 * codes, size parsing and printing, and a minimal JSON writer.
 *
 * Data goes to stdout, messages to stderr. Exit codes are stable:
 * ZA_EXIT_OK, ZA_EXIT_FAIL (the command failed), ZA_EXIT_USAGE (bad
 * command line). `zarray status --test` has its own, mdadm-like codes.
 */
#ifndef ZA_CLI_H
#define ZA_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "log.h" /* za_fmt_size() */
#include "units.h" /* za_parse_size() */

enum {
	ZA_EXIT_OK = 0,
	ZA_EXIT_FAIL = 1,
	ZA_EXIT_USAGE = 2,
};

/* `zarray status --test`, as mdadm --detail --test. */
enum {
	ZA_EXIT_TEST_HEALTHY = 0,
	ZA_EXIT_TEST_DEGRADED = 1,
	ZA_EXIT_TEST_UNUSABLE = 2,
	ZA_EXIT_TEST_NO_INFO = 4, /* no daemon, no such array */
};

struct za_cli {
	const char *socket_path;
	bool json;
	int verbose;
};

/* Commands: argv[0] is the command's name. Return an exit code. */
int za_cmd_zones(struct za_cli *cli, int argc, char **argv);
int za_cmd_emu(struct za_cli *cli, int argc, char **argv);
/* Through zarrayd (cmd-array.c, cmd-members.c, cmd-jobs.c, cmd-status.c). */
int za_cmd_create(struct za_cli *cli, int argc, char **argv);
int za_cmd_assemble(struct za_cli *cli, int argc, char **argv);
int za_cmd_stop(struct za_cli *cli, int argc, char **argv);
int za_cmd_destroy(struct za_cli *cli, int argc, char **argv);
int za_cmd_add(struct za_cli *cli, int argc, char **argv);
int za_cmd_remove(struct za_cli *cli, int argc, char **argv);
int za_cmd_fail(struct za_cli *cli, int argc, char **argv);
int za_cmd_replace(struct za_cli *cli, int argc, char **argv);
int za_cmd_rebuild(struct za_cli *cli, int argc, char **argv);
int za_cmd_gc(struct za_cli *cli, int argc, char **argv);
int za_cmd_scrub(struct za_cli *cli, int argc, char **argv);
int za_cmd_export(struct za_cli *cli, int argc, char **argv);
int za_cmd_grow(struct za_cli *cli, int argc, char **argv);
int za_cmd_shutdown(struct za_cli *cli, int argc, char **argv);
int za_cmd_list(struct za_cli *cli, int argc, char **argv);
int za_cmd_status(struct za_cli *cli, int argc, char **argv);
int za_cmd_watch(struct za_cli *cli, int argc, char **argv);
/* Testing aids through zarrayd (cmd-debug.c). */
int za_cmd_debug(struct za_cli *cli, int argc, char **argv);

/* Parse an unsigned decimal integer up to @max. */
int za_parse_uint(const char *s, uint64_t max, uint64_t *out);

/* JSON string with escapes, quotes included. */
void za_json_str(FILE *f, const char *s);

void za_usage_error(const char *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* ---- the daemon commands' arguments (args.c) ---- */

/* Usage of a daemon command; @f stderr means a usage error. */
void za_cli_help(const char *cmd, FILE *f);
/*
 * Common end of option parsing: -h/--help prints the help and returns
 * ZA_EXIT_OK, an unknown option prints it to stderr and returns
 * ZA_EXIT_USAGE; -1 means go on.
 */
int za_cli_opt_end(const char *cmd, int c);
/* Options: only --help. Returns -1 to go on, else an exit code. */
int za_cli_parse_plain(const char *cmd, int argc, char **argv);
/*
 * An absolute form of @arg, resolved when it exists; with @must_exist a
 * missing path is an error. Returns NULL after saying why.
 */
char *za_cli_abs_path(const char *cmd, const char *arg, bool must_exist);
/* za_cli_abs_path() of @n arguments; NULL if any fails. */
char **za_cli_abs_paths(const char *cmd, char **args, int n, bool must_exist);
void za_cli_free_paths(char **paths, int n);
/* --tcp's argument: a usage error (said here) unless it is [HOST:]PORT. */
bool za_cli_check_tcp(const char *cmd, const char *spec);

#endif /* ZA_CLI_H */
