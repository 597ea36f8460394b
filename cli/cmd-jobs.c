// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * cmd-jobs.c - the commands that control an array's background jobs
 * through zarrayd: rebuild (start, pause, resume, status), gc (pause,
 * resume, rate, status) and scrub (start, stop, pause, resume, status),
 * with rates in MB/s (10^6 bytes) where they apply, and status as text
 * lines or --json. A change waits as long as it takes, a status is a query (30 s). Following a job to its end is
 * `zarray watch` (cmd-status.c); whether a job can start is the daemon's
 * call, its one-line reason printed as is, exit 1.
 */
#include <errno.h>
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

/* One action of a job command, as the user spells it. */
struct job_action {
	const char *word;
	int action; /* the protocol's action value */
	bool rate_opt; /* takes --rate */
	bool rate_arg; /* takes a number of MB/s after the word */
	const char *done; /* NULL: a query, answered with job rows */
};

struct job_args {
	const char *name;
	const struct job_action *act;
	bool has_rate;
	uint64_t rate_bps;
	bool json;
};

/* "a, b or c" of the actions that pass @want (NULL: every one). */
static void job_words(const struct job_action *acts, size_t n,
		      bool (*want)(const struct job_action *), char *out,
		      size_t len)
{
	size_t i, k = 0, m = 0, used = 0;

	for (i = 0; i < n; i++)
		m += !want || want(&acts[i]);
	out[0] = '\0';
	for (i = 0; i < n; i++) {
		if (want && !want(&acts[i]))
			continue;
		used += snprintf(out + used, used < len ? len - used : 0,
				 "%s%s", k ? (k + 1 == m ? " or " : ", ") : "",
				 acts[i].word);
		k++;
	}
}

static bool takes_rate(const struct job_action *a)
{
	return a->rate_opt;
}

/* A rate in MB/s (10^6 bytes), 0 to 10^6. */
static int rate_parse(const char *cmd, const char *what, const char *s,
		      uint64_t *bps)
{
	uint64_t v;

	if (za_parse_uint(s, 1000000, &v) < 0) {
		za_usage_error(cmd,
			       "%s: '%s' is not a number of MB/s (0 to "
			       "1000000)",
			       what, s);
		return -EINVAL;
	}
	*bps = v * 1000000ull;
	return 0;
}

/*
 * `zarray CMD [--rate MB/s] [--json] NAME ACTION [MB/s]`: what every job
 * command takes, checked against its table of actions. Returns -1 to go
 * on, else an exit code (--help printed, or a usage error).
 */
static int job_parse(const char *cmd, const struct job_action *acts, size_t n,
		     int argc, char **argv, struct job_args *out)
{
	enum { O_RATE = 256, O_JSON };
	static const struct option with_rate[] = {
		{ "rate", required_argument, NULL, O_RATE },
		{ "json", no_argument, NULL, O_JSON },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const struct option *opts = with_rate;
	char words[128];
	size_t i;
	int c;

	memset(out, 0, sizeof(*out));
	for (i = 0; i < n && !acts[i].rate_opt; i++)
		;
	if (i == n)
		opts = with_rate + 1; /* no action takes --rate */
	optind = 0; /* re-initialise: main parsed with "+" */
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == O_RATE) {
			if (rate_parse(cmd, "--rate", optarg, &out->rate_bps))
				return ZA_EXIT_USAGE;
			out->has_rate = true;
		} else if (c == O_JSON) {
			out->json = true;
		} else {
			return za_cli_opt_end(cmd, c);
		}
	}
	if (argc - optind < 2) {
		job_words(acts, n, NULL, words, sizeof(words));
		za_usage_error(cmd, "NAME and one of %s expected", words);
		return ZA_EXIT_USAGE;
	}
	for (i = 0; i < n; i++)
		if (!strcmp(argv[optind + 1], acts[i].word))
			break;
	if (i == n) {
		za_usage_error(cmd, "unknown action '%s'", argv[optind + 1]);
		return ZA_EXIT_USAGE;
	}
	out->act = &acts[i];
	if (argc - optind != 2 + out->act->rate_arg) {
		za_usage_error(cmd,
			       out->act->rate_arg ? "%s takes one number of "
						    "MB/s" :
						    "%s takes no argument",
			       out->act->word);
		return ZA_EXIT_USAGE;
	}
	if (out->act->rate_arg) {
		if (rate_parse(cmd, out->act->word, argv[optind + 2],
			       &out->rate_bps))
			return ZA_EXIT_USAGE;
		out->has_rate = true;
	} else if (out->has_rate && !out->act->rate_opt) {
		job_words(acts, n, takes_rate, words, sizeof(words));
		za_usage_error(cmd, "--rate goes with %s", words);
		return ZA_EXIT_USAGE;
	}
	out->name = argv[optind];
	return -1;
}

/* Send @req: a change says what the daemon did, a query prints the job
 * rows it answers with. */
static int job_send(struct za_cli *cli, const char *cmd,
		    const struct job_args *a, Zarray__Request *req)
{
	Zarray__Response *r;
	int rc;

	if (a->act->done)
		return za_client_change(cli, cmd, req, a->name, a->act->done);
	rc = za_client_run(cli, cmd, req, ZA_CLIENT_QUERY_MS, &r);
	if (rc)
		return rc;
	rc = print_jobs(cli, cmd, r, a->json);
	za_rpc_response_free(r);
	return rc;
}

#define NR(a) (sizeof(a) / sizeof((a)[0]))

int za_cmd_rebuild(struct za_cli *cli, int argc, char **argv)
{
	static const struct job_action acts[] = {
		{ "start", ZARRAY__REBUILD_ACTION__REBUILD_START, 1, 0,
		  ZA_CLIENT_SAID },
		{ "pause", ZARRAY__REBUILD_ACTION__REBUILD_PAUSE, 0, 0,
		  ZA_CLIENT_SAID },
		{ "resume", ZARRAY__REBUILD_ACTION__REBUILD_RESUME, 1, 0,
		  ZA_CLIENT_SAID },
		{ "status", ZARRAY__REBUILD_ACTION__REBUILD_STATUS, 0, 0,
		  NULL },
	};
	Zarray__Request req = ZARRAY__REQUEST__INIT;
	Zarray__Rebuild m = ZARRAY__REBUILD__INIT;
	struct job_args a;
	int rc;

	rc = job_parse("rebuild", acts, NR(acts), argc, argv, &a);
	if (rc >= 0)
		return rc;
	m.name = (char *)a.name;
	m.action = a.act->action;
	m.has_rate_bps = a.has_rate;
	m.rate_bps = a.rate_bps;
	req.body_case = ZARRAY__REQUEST__BODY_REBUILD;
	req.rebuild = &m;
	return job_send(cli, "rebuild", &a, &req);
}

int za_cmd_gc(struct za_cli *cli, int argc, char **argv)
{
	static const struct job_action acts[] = {
		{ "pause", ZARRAY__GC_ACTION__GC_PAUSE, 0, 0, "gc paused" },
		{ "resume", ZARRAY__GC_ACTION__GC_RESUME, 0, 0, "gc running" },
		{ "status", ZARRAY__GC_ACTION__GC_STATUS, 0, 0, NULL },
		{ "rate", ZARRAY__GC_ACTION__GC_RATE, 0, 1,
		  "gc rate limit set" },
	};
	Zarray__Request req = ZARRAY__REQUEST__INIT;
	Zarray__Gc m = ZARRAY__GC__INIT;
	struct job_args a;
	int rc;

	rc = job_parse("gc", acts, NR(acts), argc, argv, &a);
	if (rc >= 0)
		return rc;
	m.name = (char *)a.name;
	m.action = a.act->action;
	m.has_rate_bps = a.has_rate;
	m.rate_bps = a.rate_bps;
	req.body_case = ZARRAY__REQUEST__BODY_GC;
	req.gc = &m;
	return job_send(cli, "gc", &a, &req);
}

int za_cmd_scrub(struct za_cli *cli, int argc, char **argv)
{
	static const struct job_action acts[] = {
		{ "start", ZARRAY__SCRUB_ACTION__SCRUB_START, 1, 0,
		  ZA_CLIENT_SAID },
		{ "stop", ZARRAY__SCRUB_ACTION__SCRUB_STOP, 0, 0,
		  ZA_CLIENT_SAID },
		{ "pause", ZARRAY__SCRUB_ACTION__SCRUB_PAUSE, 0, 0,
		  ZA_CLIENT_SAID },
		{ "resume", ZARRAY__SCRUB_ACTION__SCRUB_RESUME, 1, 0,
		  ZA_CLIENT_SAID },
		{ "status", ZARRAY__SCRUB_ACTION__SCRUB_STATUS, 0, 0, NULL },
	};
	Zarray__Request req = ZARRAY__REQUEST__INIT;
	Zarray__Scrub m = ZARRAY__SCRUB__INIT;
	struct job_args a;
	int rc;

	rc = job_parse("scrub", acts, NR(acts), argc, argv, &a);
	if (rc >= 0)
		return rc;
	m.name = (char *)a.name;
	m.action = a.act->action;
	m.has_rate_bps = a.has_rate;
	m.rate_bps = a.rate_bps;
	req.body_case = ZARRAY__REQUEST__BODY_SCRUB;
	req.scrub = &m;
	return job_send(cli, "scrub", &a, &req);
}
