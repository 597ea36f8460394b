// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * cmd-debug.c - `zarray debug`: testing aids that act on a running array
 * through zarrayd. One subcommand so far: `inject NAME DEVICE SPEC` sets
 * the faults the daemon injects into one member (a dev-fault spec such as
 * "eio-ppm=20000,seed=7", "fail", or "none" to clear them).
 *
 * The daemon refuses it unless it was started with --fault-injection;
 * whether the spec parses is also its call (one parser, in dev-fault.c),
 * its one-line reason printed as is, exit 1. It is not meant for arrays
 * that hold data anyone needs, and it does not touch drives itself.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "client.h"

static void debug_help(FILE *f)
{
	fprintf(f, "Usage: zarray debug inject NAME DEVICE SPEC\n"
		   "\n"
		   "Testing only; zarrayd must run with --fault-injection.\n"
		   "inject: set the faults injected into the member DEVICE of "
		   "NAME. SPEC is\na comma-separated list of fail, fail-at=N, "
		   "eio-at=N, eio-ppm=N,\nflip-ppm=N, latency-us=N, seed=N; "
		   "none clears them. A write that fails\nwith EIO fails the "
		   "member.\n");
	if (f == stdout)
		fprintf(f, "\nGlobal options (before COMMAND): -s SOCKET. "
			   "See zarray(8), TESTING.\n");
}

/*
 * The member's path as the daemon knows it: absolute, symlinks resolved
 * when it exists (as the other commands send it), else as written.
 */
static char *member_path(const char *arg)
{
	char cwd[PATH_MAX], *out;

	out = realpath(arg, NULL);
	if (out)
		return out;
	if (arg[0] == '/')
		return strdup(arg);
	if (!getcwd(cwd, sizeof(cwd)) || asprintf(&out, "%s/%s", cwd, arg) < 0)
		return NULL;
	return out;
}

static int debug_inject(struct za_cli *cli, int argc, char **argv)
{
	Zarray__Request req = ZARRAY__REQUEST__INIT;
	Zarray__DebugInject m = ZARRAY__DEBUG_INJECT__INIT;
	Zarray__Response *r;
	char *path;
	int rc;

	if (argc >= 1 &&
	    (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))) {
		debug_help(stdout);
		return ZA_EXIT_OK;
	}
	if (argc != 3) {
		za_usage_error("debug", "inject needs NAME DEVICE SPEC");
		return ZA_EXIT_USAGE;
	}
	if (!*argv[1] || !*argv[2]) {
		za_usage_error("debug", "empty DEVICE or SPEC");
		return ZA_EXIT_USAGE;
	}
	path = member_path(argv[1]);
	if (!path) {
		fprintf(stderr, "zarray debug: %s: %s\n", argv[1],
			strerror(errno));
		return ZA_EXIT_FAIL;
	}
	m.name = argv[0];
	m.path = path;
	m.spec = argv[2];
	req.body_case = ZARRAY__REQUEST__BODY_DEBUG_INJECT;
	req.debug_inject = &m;
	rc = za_client_run(cli, "debug", &req, ZA_CLIENT_QUERY_MS, &r);
	if (rc == 0) {
		fprintf(stderr, "zarray debug: %s: faults set: %s\n", path,
			argv[2]);
		za_rpc_response_free(r);
	}
	free(path);
	return rc;
}

int za_cmd_debug(struct za_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	optind = 0; /* re-initialise: main parsed with "+" */
	/* '+': stop at the subcommand; SPEC may not start with '-' anyway. */
	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		if (c == 'h') {
			debug_help(stdout);
			return ZA_EXIT_OK;
		}
		debug_help(stderr);
		return ZA_EXIT_USAGE;
	}
	if (optind >= argc) {
		za_usage_error("debug", "a subcommand is needed: inject");
		return ZA_EXIT_USAGE;
	}
	if (!strcmp(argv[optind], "inject"))
		return debug_inject(cli, argc - optind - 1, argv + optind + 1);
	za_usage_error("debug", "unknown subcommand '%s'", argv[optind]);
	return ZA_EXIT_USAGE;
}
