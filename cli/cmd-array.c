// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * cmd-array.c - the commands that make, serve and end arrays through
 * zarrayd: create, assemble, stop, destroy, grow, export, shutdown. The
 * commands on members are in cmd-members.c, those on background jobs in
 * cmd-jobs.c, their usage texts and argument checks in args.c.
 *
 * Each parses its command line strictly (an unknown option or a number
 * that does not parse is a usage error, exit 2), turns DEVICE arguments
 * into absolute paths (the daemon does not share our working directory),
 * sends one request and prints the answer. Whether a request is
 * acceptable (geometry, state, whether this version can do it at all) is
 * the daemon's call; its one-line reason is printed as is, exit 1.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "client.h"

int za_cmd_create(struct za_cli *cli, int argc, char **argv)
{
	enum {
		O_DATA = 256,
		O_PARITY,
		O_CHUNK,
		O_SIZE,
		O_FORCE,
		O_JSON,
		O_TCP
	};
	static const struct option opts[] = {
		{ "data", required_argument, NULL, O_DATA },
		{ "parity", required_argument, NULL, O_PARITY },
		{ "chunk", required_argument, NULL, O_CHUNK },
		{ "size", required_argument, NULL, O_SIZE },
		{ "tcp", required_argument, NULL, O_TCP },
		{ "force", no_argument, NULL, O_FORCE },
		{ "json", no_argument, NULL, O_JSON },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	Zarray__Request req = ZARRAY__REQUEST__INIT;
	Zarray__Create m = ZARRAY__CREATE__INIT;
	const char *k = NULL, *p = NULL, *chunk = NULL, *size = NULL;
	bool json = cli->json;
	Zarray__Response *r;
	char **paths;
	uint64_t v;
	int c, rc, n;

	optind = 0; /* re-initialise: main parsed with "+" */
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case O_DATA:
			k = optarg;
			break;
		case O_PARITY:
			p = optarg;
			break;
		case O_CHUNK:
			chunk = optarg;
			break;
		case O_SIZE:
			size = optarg;
			break;
		case O_FORCE:
			m.has_force = true;
			m.force = true;
			break;
		case O_TCP:
			if (!za_cli_check_tcp("create", optarg))
				return ZA_EXIT_USAGE;
			m.tcp = optarg;
			break;
		case O_JSON:
			json = true;
			break;
		default:
			return za_cli_opt_end("create", c);
		}
	}
	if (argc - optind < 2) {
		za_usage_error("create", "NAME and at least one DEVICE "
					 "expected");
		return ZA_EXIT_USAGE;
	}
	if (!k || !p) {
		za_usage_error("create",
			       "--data K and --parity P are required");
		return ZA_EXIT_USAGE;
	}
	if (za_parse_uint(k, 255, &v) < 0) {
		za_usage_error("create",
			       "--data: '%s' is not a number from 0 "
			       "to 255",
			       k);
		return ZA_EXIT_USAGE;
	}
	m.k = (uint32_t)v;
	if (za_parse_uint(p, 255, &v) < 0) {
		za_usage_error("create",
			       "--parity: '%s' is not a number from "
			       "0 to 255",
			       p);
		return ZA_EXIT_USAGE;
	}
	m.p = (uint32_t)v;
	if (chunk) {
		if (za_parse_size(chunk, &v) < 0 || v > UINT32_MAX) {
			za_usage_error("create", "--chunk: bad size '%s'",
				       chunk);
			return ZA_EXIT_USAGE;
		}
		m.has_chunk_bytes = true;
		m.chunk_bytes = (uint32_t)v;
	}
	if (size) {
		if (za_parse_size(size, &v) < 0) {
			za_usage_error("create", "--size: bad size '%s'", size);
			return ZA_EXIT_USAGE;
		}
		m.has_size_bytes = true;
		m.size_bytes = v;
	}
	m.name = argv[optind];
	n = argc - optind - 1;
	paths = za_cli_abs_paths("create", argv + optind + 1, n, true);
	if (!paths)
		return ZA_EXIT_FAIL;
	m.n_paths = (size_t)n;
	m.paths = paths;
	req.body_case = ZARRAY__REQUEST__BODY_CREATE;
	req.create = &m;
	rc = za_client_run(cli, "create", &req, ZA_CLIENT_NO_TIMEOUT, &r);
	za_cli_free_paths(paths, n);
	if (rc)
		return rc;
	if (r->body_case != ZARRAY__RESPONSE__BODY_CREATED) {
		fprintf(stderr, "zarray create: unexpected answer from "
				"zarrayd\n");
		za_rpc_response_free(r);
		return ZA_EXIT_FAIL;
	}
	if (json) {
		printf("{\"name\":");
		za_json_str(stdout, r->created->name);
		printf(",\"uuid\":");
		za_json_str(stdout, r->created->uuid);
		printf(",\"export\":{\"uri\":");
		if (r->created->export_uri)
			za_json_str(stdout, r->created->export_uri);
		else
			printf("null");
		printf("}}\n");
	} else if (r->created->export_uri) {
		printf("%s\n", r->created->export_uri);
	}
	fprintf(stderr, "zarray create: %s created, uuid %s\n",
		r->created->name, r->created->uuid);
	/* Created but not served: the array is there, the command failed
	 * in part (`zarray export` tries again). */
	rc = ZA_EXIT_OK;
	if (r->created->export_error) {
		fprintf(stderr, "zarray create: %s is not exported: %s\n",
			r->created->name, r->created->export_error);
		rc = ZA_EXIT_FAIL;
	} else if (!r->created->export_uri) {
		fprintf(stderr,
			"zarray create: %s is not exported (a zarrayd "
			"without NBD export)\n",
			r->created->name);
	}
	za_rpc_response_free(r);
	return rc;
}

int za_cmd_assemble(struct za_cli *cli, int argc, char **argv)
{
	Zarray__Request req = ZARRAY__REQUEST__INIT;
	Zarray__Assemble m = ZARRAY__ASSEMBLE__INIT;
	Zarray__Response *r;
	char **paths;
	int rc, n;

	rc = za_cli_parse_plain("assemble", argc, argv);
	if (rc >= 0)
		return rc;
	if (argc - optind < 2) {
		za_usage_error("assemble", "NAME and at least one DEVICE "
					   "expected");
		return ZA_EXIT_USAGE;
	}
	m.name = argv[optind];
	n = argc - optind - 1;
	paths = za_cli_abs_paths("assemble", argv + optind + 1, n, true);
	if (!paths)
		return ZA_EXIT_FAIL;
	m.n_paths = (size_t)n;
	m.paths = paths;
	req.body_case = ZARRAY__REQUEST__BODY_ASSEMBLE;
	req.assemble = &m;
	rc = za_client_run(cli, "assemble", &req, ZA_CLIENT_NO_TIMEOUT, &r);
	za_cli_free_paths(paths, n);
	if (rc)
		return rc;
	if (r->body_case == ZARRAY__RESPONSE__BODY_ARRAYS &&
	    r->arrays->n_arrays == 1) {
		const Zarray__ArrayStatus *a = r->arrays->arrays[0];

		if (a->export_uri)
			printf("%s\n", a->export_uri);
		fprintf(stderr,
			"zarray assemble: %s started, %s, %u+%u, %zu "
			"members%s\n",
			a->name, za_cli_array_state_str(a->state), a->data,
			a->parity, a->n_members,
			a->export_uri ? "" :
					"; not exported (see zarrayd's log)");
	} else {
		fprintf(stderr, "zarray assemble: %s started\n", m.name);
	}
	za_rpc_response_free(r);
	return ZA_EXIT_OK;
}

int za_cmd_stop(struct za_cli *cli, int argc, char **argv)
{
	Zarray__Request req = ZARRAY__REQUEST__INIT;
	Zarray__Stop m = ZARRAY__STOP__INIT;
	int rc;

	rc = za_cli_parse_plain("stop", argc, argv);
	if (rc >= 0)
		return rc;
	if (argc - optind != 1) {
		za_usage_error("stop", "one NAME expected");
		return ZA_EXIT_USAGE;
	}
	m.name = argv[optind];
	req.body_case = ZARRAY__REQUEST__BODY_STOP;
	req.stop = &m;
	return za_client_change(cli, "stop", &req, m.name, "stopped");
}

int za_cmd_destroy(struct za_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "force", no_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	Zarray__Request req = ZARRAY__REQUEST__INIT;
	Zarray__Destroy m = ZARRAY__DESTROY__INIT;
	int c;

	optind = 0; /* re-initialise: main parsed with "+" */
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c != 'f')
			return za_cli_opt_end("destroy", c);
		m.has_force = true;
		m.force = true;
	}
	if (argc - optind != 1) {
		za_usage_error("destroy", "one NAME expected");
		return ZA_EXIT_USAGE;
	}
	m.name = argv[optind];
	req.body_case = ZARRAY__REQUEST__BODY_DESTROY;
	req.destroy = &m;
	return za_client_change(cli, "destroy", &req, m.name, "destroyed");
}

int za_cmd_grow(struct za_cli *cli, int argc, char **argv)
{
	enum { O_SIZE = 256, O_JSON };
	static const struct option opts[] = {
		{ "size", required_argument, NULL, O_SIZE },
		{ "json", no_argument, NULL, O_JSON },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	Zarray__Request req = ZARRAY__REQUEST__INIT;
	Zarray__Grow m = ZARRAY__GROW__INIT;
	const char *size = NULL;
	bool json = cli->json;
	Zarray__Response *r;
	char b1[32], b2[32];
	int c, rc;

	optind = 0; /* re-initialise: main parsed with "+" */
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == O_SIZE)
			size = optarg;
		else if (c == O_JSON)
			json = true;
		else
			return za_cli_opt_end("grow", c);
	}
	if (argc - optind != 1) {
		za_usage_error("grow", "one NAME expected");
		return ZA_EXIT_USAGE;
	}
	if (!size) {
		za_usage_error("grow", "--size SIZE is required");
		return ZA_EXIT_USAGE;
	}
	if (za_parse_size(size, &m.size_bytes) < 0) {
		za_usage_error("grow", "--size: bad size '%s'", size);
		return ZA_EXIT_USAGE;
	}
	m.name = argv[optind];
	req.body_case = ZARRAY__REQUEST__BODY_GROW;
	req.grow = &m;
	rc = za_client_run(cli, "grow", &req, ZA_CLIENT_NO_TIMEOUT, &r);
	if (rc)
		return rc;
	if (r->body_case != ZARRAY__RESPONSE__BODY_GROWN) {
		fprintf(stderr,
			"zarray grow: unexpected answer from zarrayd\n");
		za_rpc_response_free(r);
		return ZA_EXIT_FAIL;
	}
	if (json) {
		printf("{\"name\":");
		za_json_str(stdout, r->grown->name);
		printf(",\"old_size_bytes\":%llu,\"size_bytes\":%llu}\n",
		       (unsigned long long)r->grown->old_size_bytes,
		       (unsigned long long)r->grown->size_bytes);
	}
	if (r->grown->old_size_bytes == r->grown->size_bytes)
		fprintf(stderr, "zarray grow: %s is %s already\n",
			r->grown->name,
			za_fmt_size(r->grown->size_bytes, b1, sizeof(b1)));
	else
		fprintf(stderr, "zarray grow: %s grew from %s to %s\n",
			r->grown->name,
			za_fmt_size(r->grown->old_size_bytes, b1, sizeof(b1)),
			za_fmt_size(r->grown->size_bytes, b2, sizeof(b2)));
	za_rpc_response_free(r);
	return ZA_EXIT_OK;
}

int za_cmd_export(struct za_cli *cli, int argc, char **argv)
{
	enum { O_TCP = 256, O_JSON };
	static const struct option opts[] = {
		{ "tcp", required_argument, NULL, O_TCP },
		{ "json", no_argument, NULL, O_JSON },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	Zarray__Request req = ZARRAY__REQUEST__INIT;
	Zarray__Export m = ZARRAY__EXPORT__INIT;
	bool json = cli->json;
	Zarray__Response *r;
	int c, rc;

	optind = 0; /* re-initialise: main parsed with "+" */
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == O_JSON) {
			json = true;
			continue;
		}
		if (c != O_TCP)
			return za_cli_opt_end("export", c);
		if (!za_cli_check_tcp("export", optarg))
			return ZA_EXIT_USAGE;
		m.tcp = optarg;
	}
	if (argc - optind != 1) {
		za_usage_error("export", "one NAME expected");
		return ZA_EXIT_USAGE;
	}
	m.name = argv[optind];
	req.body_case = ZARRAY__REQUEST__BODY_EXPORT;
	req.export = &m;
	/* Listening on TCP changes the array's state: no query timeout. */
	rc = za_client_run(cli, "export", &req,
			   m.tcp ? ZA_CLIENT_NO_TIMEOUT : ZA_CLIENT_QUERY_MS,
			   &r);
	if (rc)
		return rc;
	if (r->body_case != ZARRAY__RESPONSE__BODY_EXPORTED) {
		fprintf(stderr, "zarray export: unexpected answer from "
				"zarrayd\n");
		za_rpc_response_free(r);
		return ZA_EXIT_FAIL;
	}
	if (json) {
		printf("{\"name\":");
		za_json_str(stdout, m.name);
		printf(",\"export\":{\"uri\":");
		za_json_str(stdout, r->exported->uri);
		printf("}}\n");
	} else {
		printf("%s\n", r->exported->uri);
	}
	za_rpc_response_free(r);
	return ZA_EXIT_OK;
}

int za_cmd_shutdown(struct za_cli *cli, int argc, char **argv)
{
	Zarray__Request req = ZARRAY__REQUEST__INIT;
	Zarray__Shutdown m = ZARRAY__SHUTDOWN__INIT;
	int rc;

	rc = za_cli_parse_plain("shutdown", argc, argv);
	if (rc >= 0)
		return rc;
	if (optind < argc) {
		za_usage_error("shutdown", "no argument expected");
		return ZA_EXIT_USAGE;
	}
	req.body_case = ZARRAY__REQUEST__BODY_SHUTDOWN;
	req.shutdown = &m;
	return za_client_change(cli, "shutdown", &req, "zarrayd", "stopped");
}
