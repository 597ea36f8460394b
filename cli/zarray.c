// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * zarray.c - the zarray command line: global options and dispatch to
 * the commands. Commands that act on arrays talk to zarrayd over its
 * control socket; the local ones (zones, emu) open drives directly.
 */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "log.h"

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "?"
#endif

static const struct {
	const char *name;
	int (*fn)(struct za_cli *cli, int argc, char **argv);
	const char *summary;
} commands[] = {
	{ "create", za_cmd_create, "format devices into a new array" },
	{ "assemble", za_cmd_assemble, "start an existing array" },
	{ "stop", za_cmd_stop, "stop an array (its drives keep it)" },
	{ "destroy", za_cmd_destroy, "stop an array and wipe its drives" },
	{ "list", za_cmd_list, "list the running arrays" },
	{ "status", za_cmd_status, "show an array's state, members, jobs" },
	{ "add", za_cmd_add, "add devices to an array" },
	{ "remove", za_cmd_remove, "drain and remove devices" },
	{ "fail", za_cmd_fail, "mark a member failed" },
	{ "replace", za_cmd_replace, "replace a member by another device" },
	{ "grow", za_cmd_grow, "grow an array's volume" },
	{ "rebuild", za_cmd_rebuild, "start, pause, resume, show a rebuild" },
	{ "gc", za_cmd_gc,
	  "pause, resume, rate-limit, show garbage collection" },
	{ "scrub", za_cmd_scrub, "start, stop, pause, resume, show a scrub" },
	{ "watch", za_cmd_watch, "follow an array's jobs until they end" },
	{ "export", za_cmd_export, "print an array's NBD URI" },
	{ "shutdown", za_cmd_shutdown, "stop every array and zarrayd" },
	{ "zones", za_cmd_zones, "report the zones of a drive (local)" },
	{ "emu", za_cmd_emu, "create or power-cut emulated drives (local)" },
	{ "debug", za_cmd_debug, "testing aids: inject faults into members" },
};

static void usage(FILE *f)
{
	size_t i;

	fprintf(f, "Usage: zarray [-s SOCKET] [--json] [-v] COMMAND [ARGS]\n"
		   "\n"
		   "Commands:\n");
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-8s %s\n", commands[i].name,
			commands[i].summary);
	fprintf(f,
		"\n"
		"Options:\n"
		"  -s, --socket PATH  control socket (default $ZARRAY_SOCKET "
		"or /run/zarray/zarrayd.sock)\n"
		"      --json         machine-readable output\n"
		"  -v, --verbose      more messages (repeat for debug)\n"
		"  -V, --version      print the version\n"
		"  -h, --help         this help\n"
		"\n"
		"'zarray COMMAND --help' describes a command; see "
		"zarray(8).\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct za_cli cli = { 0 };
	size_t i;
	int c;

	za_log_set_ident("zarray");
	/* Empty is unset, as for most variables of the kind. */
	cli.socket_path = getenv("ZARRAY_SOCKET");
	if (!cli.socket_path || !*cli.socket_path)
		cli.socket_path = "/run/zarray/zarrayd.sock";
	/* '+': stop at the command; its own options follow it. */
	while ((c = getopt_long(argc, argv, "+s:vVh", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (!*optarg) {
				fprintf(stderr,
					"zarray: -s: empty socket path\n");
				usage(stderr);
				return ZA_EXIT_USAGE;
			}
			cli.socket_path = optarg;
			break;
		case 'j':
			cli.json = true;
			break;
		case 'v':
			cli.verbose++;
			break;
		case 'V':
			printf("zarray %s\n", PACKAGE_VERSION);
			return ZA_EXIT_OK;
		case 'h':
			usage(stdout);
			return ZA_EXIT_OK;
		default:
			usage(stderr);
			return ZA_EXIT_USAGE;
		}
	}
	if (cli.verbose)
		za_log_set_level(cli.verbose > 1 ? ZA_LOG_DEBUG : ZA_LOG_INFO);
	if (optind >= argc) {
		usage(stderr);
		return ZA_EXIT_USAGE;
	}
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (!strcmp(argv[optind], commands[i].name)) {
			static char prog[32];
			int sub_argc = argc - optind;
			char **sub_argv = argv + optind;

			/* getopt's own messages: "zarray CMD: ...". */
			snprintf(prog, sizeof(prog), "zarray %s",
				 commands[i].name);
			sub_argv[0] = prog;

			/*
			 * 0, not 1: glibc then starts afresh, forgetting the
			 * "+" (stop at the first operand) used above, so a
			 * command's options may follow its operands.
			 */
			optind = 0;
			return commands[i].fn(&cli, sub_argc, sub_argv);
		}
	}
	fprintf(stderr, "zarray: unknown command '%s'\n", argv[optind]);
	usage(stderr);
	return ZA_EXIT_USAGE;
}
