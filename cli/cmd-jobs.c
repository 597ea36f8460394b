// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * cmd-jobs.c - the commands that control an array's background jobs
 * through zarrayd: rebuild (start, pause, resume, status) and scrub
 * (start, stop, status), with --rate in MB/s (10^6 bytes) where it
 * applies, and status as text lines or --json. A change waits as long as
 * it takes, a status is a query (30 s). Following a job to its end is
 * `zarray watch` (cmd-status.c); whether a job can start is the daemon's
 * call, its one-line reason printed as is, exit 1.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "client.h"

/* rebuild/scrub status: the jobs of that kind. */
static int print_jobs(struct za_cli *cli, const char *cmd,
		      const Zarray__Response *r, bool json)
{
	const Zarray__Jobs *j = r->jobs;
	char line[256];
	size_t i;

	if (r->body_case != ZARRAY__RESPONSE__BODY_JOBS) {
		fprintf(stderr, "zarray %s: unexpected answer from zarrayd\n",
			cmd);
		return ZA_EXIT_FAIL;
	}
	if (json || cli->json) {
		printf("{\"name\":");
		za_json_str(stdout, j->name);
		printf(",\"jobs\":[");
		for (i = 0; i < j->n_jobs; i++) {
			if (i)
				putchar(',');
			za_cli_json_job(stdout, j->jobs[i]);
		}
		printf("]}\n");
		return ZA_EXIT_OK;
	}
	if (!j->n_jobs)
		printf("%s: no %s\n", j->name, cmd);
	for (i = 0; i < j->n_jobs; i++)
		printf("%s: %s\n", j->name,
		       za_cli_job_line(j->jobs[i], false, line, sizeof(line)));
	return ZA_EXIT_OK;
}

int za_cmd_rebuild(struct za_cli *cli, int argc, char **argv)
{
	enum { O_RATE = 256, O_JSON };
	static const struct option opts[] = {
		{ "rate", required_argument, NULL, O_RATE },
		{ "json", no_argument, NULL, O_JSON },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct {
		const char *word;
		Zarray__RebuildAction action;
	} actions[] = {
		{ "start", ZARRAY__REBUILD_ACTION__REBUILD_START },
		{ "pause", ZARRAY__REBUILD_ACTION__REBUILD_PAUSE },
		{ "resume", ZARRAY__REBUILD_ACTION__REBUILD_RESUME },
		{ "status", ZARRAY__REBUILD_ACTION__REBUILD_STATUS },
	};
	Zarray__Request req = ZARRAY__REQUEST__INIT;
	Zarray__Rebuild m = ZARRAY__REBUILD__INIT;
	Zarray__Response *r;
	bool json = false;
	uint64_t v;
	size_t i;
	int c, rc;

	optind = 0; /* re-initialise: main parsed with "+" */
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == O_RATE) {
			if (za_parse_uint(optarg, 1000000, &v) < 0) {
				za_usage_error(
					"rebuild",
					"--rate: '%s' is not a number of "
					"MB/s (0 to 1000000)",
					optarg);
				return ZA_EXIT_USAGE;
			}
			m.has_rate_bps = true;
			m.rate_bps = v * 1000000ull;
		} else if (c == O_JSON) {
			json = true;
		} else {
			return za_cli_opt_end("rebuild", c);
		}
	}
	if (argc - optind != 2) {
		za_usage_error("rebuild", "NAME and one of start, pause, "
					  "resume, status expected");
		return ZA_EXIT_USAGE;
	}
	for (i = 0; i < sizeof(actions) / sizeof(actions[0]); i++)
		if (!strcmp(argv[optind + 1], actions[i].word))
			break;
	if (i == sizeof(actions) / sizeof(actions[0])) {
		za_usage_error("rebuild", "unknown action '%s'",
			       argv[optind + 1]);
		return ZA_EXIT_USAGE;
	}
	if (m.has_rate_bps &&
	    actions[i].action != ZARRAY__REBUILD_ACTION__REBUILD_START &&
	    actions[i].action != ZARRAY__REBUILD_ACTION__REBUILD_RESUME) {
		za_usage_error("rebuild", "--rate goes with start or resume");
		return ZA_EXIT_USAGE;
	}
	m.name = argv[optind];
	m.action = actions[i].action;
	req.body_case = ZARRAY__REQUEST__BODY_REBUILD;
	req.rebuild = &m;
	if (m.action != ZARRAY__REBUILD_ACTION__REBUILD_STATUS)
		return za_client_change(
			cli, "rebuild", &req, m.name,
			m.action == ZARRAY__REBUILD_ACTION__REBUILD_PAUSE ?
				"rebuild paused" :
				"rebuild running");
	rc = za_client_run(cli, "rebuild", &req, ZA_CLIENT_QUERY_MS, &r);
	if (rc)
		return rc;
	rc = print_jobs(cli, "rebuild", r, json);
	za_rpc_response_free(r);
	return rc;
}

int za_cmd_gc(struct za_cli *cli, int argc, char **argv)
{
	enum { O_JSON = 256 };
	static const struct option opts[] = {
		{ "json", no_argument, NULL, O_JSON },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct {
		const char *word;
		Zarray__GcAction action;
		int nargs; /* after NAME and the action */
		const char *done;
	} actions[] = {
		{ "pause", ZARRAY__GC_ACTION__GC_PAUSE, 0, "gc paused" },
		{ "resume", ZARRAY__GC_ACTION__GC_RESUME, 0, "gc running" },
		{ "status", ZARRAY__GC_ACTION__GC_STATUS, 0, NULL },
		{ "rate", ZARRAY__GC_ACTION__GC_RATE, 1, "gc rate limit set" },
	};
	Zarray__Request req = ZARRAY__REQUEST__INIT;
	Zarray__Gc m = ZARRAY__GC__INIT;
	Zarray__Response *r;
	bool json = false;
	uint64_t v;
	size_t i;
	int c, rc;

	optind = 0; /* re-initialise: main parsed with "+" */
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == O_JSON)
			json = true;
		else
			return za_cli_opt_end("gc", c);
	}
	if (argc - optind < 2) {
		za_usage_error("gc", "NAME and one of pause, resume, status, "
				     "rate expected");
		return ZA_EXIT_USAGE;
	}
	for (i = 0; i < sizeof(actions) / sizeof(actions[0]); i++)
		if (!strcmp(argv[optind + 1], actions[i].word))
			break;
	if (i == sizeof(actions) / sizeof(actions[0])) {
		za_usage_error("gc", "unknown action '%s'", argv[optind + 1]);
		return ZA_EXIT_USAGE;
	}
	if (argc - optind != 2 + actions[i].nargs) {
		za_usage_error("gc",
			       actions[i].nargs ?
				       "rate takes one number of MB/s" :
				       "%s takes no argument",
			       actions[i].word);
		return ZA_EXIT_USAGE;
	}
	if (actions[i].action == ZARRAY__GC_ACTION__GC_RATE) {
		if (za_parse_uint(argv[optind + 2], 1000000, &v) < 0) {
			za_usage_error("gc",
				       "rate: '%s' is not a number of MB/s "
				       "(0 to 1000000)",
				       argv[optind + 2]);
			return ZA_EXIT_USAGE;
		}
		m.has_rate_bps = true;
		m.rate_bps = v * 1000000ull;
	}
	m.name = argv[optind];
	m.action = actions[i].action;
	req.body_case = ZARRAY__REQUEST__BODY_GC;
	req.gc = &m;
	if (actions[i].done)
		return za_client_change(cli, "gc", &req, m.name,
					actions[i].done);
	rc = za_client_run(cli, "gc", &req, ZA_CLIENT_QUERY_MS, &r);
	if (rc)
		return rc;
	rc = print_jobs(cli, "gc", r, json);
	za_rpc_response_free(r);
	return rc;
}

int za_cmd_scrub(struct za_cli *cli, int argc, char **argv)
{
	enum { O_RATE = 256 };
	static const struct option opts[] = {
		{ "rate", required_argument, NULL, O_RATE },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	Zarray__Request req = ZARRAY__REQUEST__INIT;
	Zarray__Scrub m = ZARRAY__SCRUB__INIT;
	Zarray__Response *r;
	bool json = false;
	const char *act;
	uint64_t v;
	int c, rc;

	optind = 0; /* re-initialise: main parsed with "+" */
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == O_RATE) {
			if (za_parse_uint(optarg, 1000000, &v) < 0) {
				za_usage_error(
					"scrub",
					"--rate: '%s' is not a number of "
					"MB/s (0 to 1000000)",
					optarg);
				return ZA_EXIT_USAGE;
			}
			m.has_rate_bps = true;
			m.rate_bps = v * 1000000ull;
		} else if (c == 'j') {
			json = true;
		} else {
			return za_cli_opt_end("scrub", c);
		}
	}
	if (argc - optind != 2) {
		za_usage_error("scrub", "NAME and one of start, stop, status "
					"expected");
		return ZA_EXIT_USAGE;
	}
	act = argv[optind + 1];
	if (!strcmp(act, "start")) {
		m.action = ZARRAY__SCRUB_ACTION__SCRUB_START;
	} else if (!strcmp(act, "stop")) {
		m.action = ZARRAY__SCRUB_ACTION__SCRUB_STOP;
	} else if (!strcmp(act, "status")) {
		m.action = ZARRAY__SCRUB_ACTION__SCRUB_STATUS;
	} else {
		za_usage_error("scrub", "unknown action '%s'", act);
		return ZA_EXIT_USAGE;
	}
	if (m.has_rate_bps && m.action != ZARRAY__SCRUB_ACTION__SCRUB_START) {
		za_usage_error("scrub", "--rate goes with start");
		return ZA_EXIT_USAGE;
	}
	m.name = argv[optind];
	req.body_case = ZARRAY__REQUEST__BODY_SCRUB;
	req.scrub = &m;
	if (m.action != ZARRAY__SCRUB_ACTION__SCRUB_STATUS)
		return za_client_change(
			cli, "scrub", &req, m.name,
			m.action == ZARRAY__SCRUB_ACTION__SCRUB_START ?
				"scrub running" :
				"scrub stopped");
	rc = za_client_run(cli, "scrub", &req, ZA_CLIENT_QUERY_MS, &r);
	if (rc)
		return rc;
	rc = print_jobs(cli, "scrub", r, json);
	za_rpc_response_free(r);
	return rc;
}
