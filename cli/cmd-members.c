// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * cmd-members.c - the commands that change an array's members through
 * zarrayd: add, remove (a drain onto the others), fail and replace. DEVICE
 * arguments are made absolute; a drive that joins (add, replace's NEW)
 * must exist, one that leaves (remove, fail, replace's OLD) may be gone
 * already, since a pulled drive is what these commands are for. Each
 * sends one request and says what was done; the rebuild or drain that
 * follows is the daemon's, followed with `zarray watch`. Whether the
 * change is possible (state, room, which drive is which) is the daemon's
 * call, its one-line reason printed as is, exit 1.
 */
#include <getopt.h>
#include <stdlib.h>

#include "cli.h"
#include "client.h"

/* add and remove: NAME DEVICE... */
static int members_cmd(struct za_cli *cli, const char *cmd, int argc,
		       char **argv, bool add)
{
	Zarray__Request req = ZARRAY__REQUEST__INIT;
	Zarray__Add ma = ZARRAY__ADD__INIT;
	Zarray__Remove mr = ZARRAY__REMOVE__INIT;
	char **paths;
	int rc, n;

	rc = za_cli_parse_plain(cmd, argc, argv);
	if (rc >= 0)
		return rc;
	if (argc - optind < 2) {
		za_usage_error(cmd, "NAME and at least one DEVICE expected");
		return ZA_EXIT_USAGE;
	}
	n = argc - optind - 1;
	/* A device being removed may already be gone. */
	paths = za_cli_abs_paths(cmd, argv + optind + 1, n, add);
	if (!paths)
		return ZA_EXIT_FAIL;
	if (add) {
		ma.name = argv[optind];
		ma.n_paths = (size_t)n;
		ma.paths = paths;
		req.body_case = ZARRAY__REQUEST__BODY_ADD;
		req.add = &ma;
	} else {
		mr.name = argv[optind];
		mr.n_paths = (size_t)n;
		mr.paths = paths;
		req.body_case = ZARRAY__REQUEST__BODY_REMOVE;
		req.remove = &mr;
	}
	rc = za_client_change(cli, cmd, &req, argv[optind],
			      add ? "grew" : "is draining the devices");
	za_cli_free_paths(paths, n);
	return rc;
}

int za_cmd_add(struct za_cli *cli, int argc, char **argv)
{
	return members_cmd(cli, "add", argc, argv, true);
}

int za_cmd_remove(struct za_cli *cli, int argc, char **argv)
{
	return members_cmd(cli, "remove", argc, argv, false);
}

int za_cmd_fail(struct za_cli *cli, int argc, char **argv)
{
	Zarray__Request req = ZARRAY__REQUEST__INIT;
	Zarray__Fail m = ZARRAY__FAIL__INIT;
	char *path;
	int rc;

	rc = za_cli_parse_plain("fail", argc, argv);
	if (rc >= 0)
		return rc;
	if (argc - optind != 2) {
		za_usage_error("fail", "NAME and one DEVICE expected");
		return ZA_EXIT_USAGE;
	}
	path = za_cli_abs_path("fail", argv[optind + 1], false);
	if (!path)
		return ZA_EXIT_FAIL;
	m.name = argv[optind];
	m.path = path;
	req.body_case = ZARRAY__REQUEST__BODY_FAIL;
	req.fail = &m;
	rc = za_client_change(cli, "fail", &req, path, "marked failed");
	free(path);
	return rc;
}

int za_cmd_replace(struct za_cli *cli, int argc, char **argv)
{
	Zarray__Request req = ZARRAY__REQUEST__INIT;
	Zarray__Replace m = ZARRAY__REPLACE__INIT;
	char *old_path, *new_path;
	int rc;

	rc = za_cli_parse_plain("replace", argc, argv);
	if (rc >= 0)
		return rc;
	if (argc - optind != 3) {
		za_usage_error("replace", "NAME OLD NEW expected");
		return ZA_EXIT_USAGE;
	}
	old_path = za_cli_abs_path("replace", argv[optind + 1], false);
	if (!old_path)
		return ZA_EXIT_FAIL;
	new_path = za_cli_abs_path("replace", argv[optind + 2], true);
	if (!new_path) {
		free(old_path);
		return ZA_EXIT_FAIL;
	}
	m.name = argv[optind];
	m.old_path = old_path;
	m.new_path = new_path;
	req.body_case = ZARRAY__REQUEST__BODY_REPLACE;
	req.replace = &m;
	rc = za_client_change(cli, "replace", &req, m.name,
			      "is rebuilding onto NEW");
	free(old_path);
	free(new_path);
	return rc;
}
