// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * args.c - the command lines of the commands that go through zarrayd:
 * their usage texts, the common end of option parsing (--help, an unknown
 * option), and the arguments that must be right before anything is sent:
 * DEVICE paths made absolute (the daemon runs in / and compares paths as
 * strings; symlinks resolved so that it and the array layer compare like
 * with like) and --tcp addresses. It sends nothing and knows nothing of
 * the protocol: whether a request is acceptable is the daemon's call.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "export.h"

static const struct {
	const char *cmd, *usage, *text;
} helps[] = {
	{ "create",
	  "zarray create NAME --data K --parity P [--chunk SIZE] [--size SIZE] "
	  "[--tcp [HOST:]PORT] [--force] DEVICE...",
	  "Format the DEVICEs into a new K+P array, create its volume and "
	  "export it\nover NBD on RUNDIR/NAME.nbd; prints the NBD URI. --chunk: "
	  "interleave unit\n(default 64K); --size: volume size (default: what "
	  "the devices hold);\n--tcp: also export on TCP (HOST 127.0.0.1 unless "
	  "given; PORT 0: any free\nport) and print that URI; --force: take "
	  "devices that belong to another\narray.\n" },
	{ "assemble", "zarray assemble NAME DEVICE...",
	  "Start the array NAME from its DEVICEs (any order) and export it; "
	  "prints\nthe NBD URI. It starts degraded if at most P members are "
	  "missing.\n" },
	{ "stop", "zarray stop NAME",
	  "Stop its NBD export (commands in flight finish), flush and stop the "
	  "array;\nits devices keep it (assemble starts it again) and zarrayd "
	  "no longer\nassembles it at start.\n" },
	{ "destroy", "zarray destroy NAME [--force]",
	  "Stop the array and wipe its superblocks. Without --force an array "
	  "that\nholds data is refused.\n" },
	{ "list", "zarray list [--json]",
	  "One line per running array: name, state, geometry, size, used, "
	  "members,\njobs.\n" },
	{ "status", "zarray status [NAME] [--json] [--test]",
	  "State, geometry, size, members (path, index, state, size, errors) "
	  "and\nbackground jobs of NAME, or of every array. With --test the "
	  "exit status\nsays the worst state: 0 healthy, 1 degraded, 2 "
	  "unusable, 4 no\ninformation (no daemon, no such array).\n" },
	{ "add", "zarray add NAME DEVICE...",
	  "Add devices to the array; new segments use them at once.\n" },
	{ "remove", "zarray remove NAME DEVICE...",
	  "Drain the members' data onto the others, then remove them.\n" },
	{ "fail", "zarray fail NAME DEVICE",
	  "Mark a member failed, as if it had failed: no new writes go to "
	  "it and\nits data is read by decoding.\n" },
	{ "replace", "zarray replace NAME OLD NEW",
	  "Rebuild the member OLD's data onto NEW, then remove OLD.\n" },
	{ "grow", "zarray grow NAME --size SIZE [--json]",
	  "Grow the array's volume to SIZE (K, M, G, T suffixes: powers of "
	  "1024; a\nmultiple of 4 KiB), typically after zarray add. Shrinking "
	  "is not supported;\nthe most it takes is max_size_bytes in zarray "
	  "status --json. New NBD\nconnections see the new size; connections "
	  "already open keep the size they\nwere given until they reconnect.\n" },
	{ "rebuild",
	  "zarray rebuild NAME start|pause|resume|status [--rate MB/s] "
	  "[--json]",
	  "Control the rebuild of lost redundancy. --rate limits it (MB/s, "
	  "10^6\nbytes; 0: no limit) and applies to start and resume.\n" },
	{ "gc",
	  "zarray gc NAME pause|resume|status [--json] | zarray gc NAME rate MB/s",
	  "Control garbage collection, which moves the live data out of "
	  "mostly dead\nzone groups and resets them. pause holds its "
	  "background work (GC while\nidle); below its start point of free "
	  "space it still runs, or writes would\nrun out of room. rate "
	  "limits the bytes it moves (MB/s, 10^6 bytes; 0: no\nlimit), under "
	  "the same exception. status shows its state, progress and\n"
	  "limit.\n" },
	{ "scrub",
	  "zarray scrub NAME start|stop|pause|resume|status [--rate MB/s] "
	  "[--json]",
	  "Read and verify every live stripe, repairing what fails its "
	  "checksum.\n--rate limits it (MB/s of stripes read, 10^6 bytes; 0: "
	  "no limit) and goes\nwith start or resume. pause holds a run, resume "
	  "goes on; a stopped scrub\nstarts again where it stopped; one running "
	  "when zarrayd stops goes on by\nitself when it starts again.\n" },
	{ "watch", "zarray watch NAME [--json]",
	  "Follow the array's background jobs until they end: a progress bar "
	  "on a\nterminal, a line per percent otherwise, JSON lines with "
	  "--json.\n" },
	{ "export", "zarray export NAME [--tcp [HOST:]PORT] [--json]",
	  "Print the array's NBD URI (nbd+unix://). --tcp: also export it on "
	  "TCP\n(HOST 127.0.0.1 unless given; PORT 0: any free port), "
	  "remembered across\nrestarts, and print that URI (nbd://).\n" },
	{ "shutdown", "zarray shutdown",
	  "Stop every array cleanly, then zarrayd.\n" },
};

void za_cli_help(const char *cmd, FILE *f)
{
	size_t i;

	for (i = 0; i < sizeof(helps) / sizeof(helps[0]); i++) {
		if (strcmp(helps[i].cmd, cmd))
			continue;
		fprintf(f, "Usage: %s\n\n%s", helps[i].usage, helps[i].text);
		if (f == stdout)
			fprintf(f,
				"\nGlobal options (before COMMAND): -s SOCKET, "
				"--json. See zarray(8).\n");
		return;
	}
}

int za_cli_opt_end(const char *cmd, int c)
{
	if (c == 'h') {
		za_cli_help(cmd, stdout);
		return ZA_EXIT_OK;
	}
	za_cli_help(cmd, stderr);
	return ZA_EXIT_USAGE;
}

/* Options: only --help. Returns -1 to go on, else an exit code. */
int za_cli_parse_plain(const char *cmd, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	optind = 0; /* re-initialise: main parsed with "+" */
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1)
		return za_cli_opt_end(cmd, c);
	return -1;
}

/*
 * An absolute form of @arg: resolved (symlinks too) when it exists, so
 * that the daemon and the array layer compare like with like. @must_exist:
 * a missing path is an error (said here); else it is made absolute as
 * written (a failed drive may have vanished). Returns NULL on error.
 */
char *za_cli_abs_path(const char *cmd, const char *arg, bool must_exist)
{
	char cwd[PATH_MAX], *out;
	struct stat st;

	if (!*arg) {
		fprintf(stderr, "zarray %s: empty device path\n", cmd);
		return NULL;
	}
	if (stat(arg, &st) == 0) {
		out = realpath(arg, NULL);
		if (out)
			return out;
	} else if (must_exist) {
		fprintf(stderr, "zarray %s: %s: %s\n", cmd, arg,
			strerror(errno));
		return NULL;
	}
	if (arg[0] == '/')
		return strdup(arg);
	if (!getcwd(cwd, sizeof(cwd)) ||
	    asprintf(&out, "%s/%s", cwd, arg) < 0) {
		fprintf(stderr, "zarray %s: %s: %s\n", cmd, arg,
			strerror(errno));
		return NULL;
	}
	return out;
}

void za_cli_free_paths(char **paths, int n)
{
	int i;

	if (!paths)
		return;
	for (i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
}

char **za_cli_abs_paths(const char *cmd, char **args, int n, bool must_exist)
{
	char **paths = calloc((size_t)n, sizeof(*paths));
	int i;

	if (!paths)
		return NULL;
	for (i = 0; i < n; i++) {
		paths[i] = za_cli_abs_path(cmd, args[i], must_exist);
		if (!paths[i]) {
			za_cli_free_paths(paths, i);
			return NULL;
		}
	}
	return paths;
}

/* --tcp's argument: a usage error unless it is [HOST:]PORT. */
bool za_cli_check_tcp(const char *cmd, const char *spec)
{
	char host[ZA_EXPORT_HOST_BYTES], port[8];

	if (za_export_parse_tcp(spec, host, port) == 0)
		return true;
	za_usage_error(cmd,
		       "--tcp: '%s' is not [HOST:]PORT (PORT 0 to 65535, an "
		       "IPv6 HOST in [])",
		       spec);
	return false;
}
