/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * client.h - the CLI's side of the control socket: connect to zarrayd,
 * send one request, read its response(s), and turn every failure into
 * one line on stderr. Built on the blocking client of src/rpc.h.
 */
#ifndef ZA_CLI_CLIENT_H
#define ZA_CLI_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cli.h"
#include "rpc.h"

/* How long the CLI waits: to connect, and for a query's answer. */
#define ZA_CLIENT_CONNECT_MS 5000
#define ZA_CLIENT_QUERY_MS 30000
/* Commands that change arrays wait as long as they take. */
#define ZA_CLIENT_NO_TIMEOUT 0

struct za_client {
	const struct za_cli *cli;
	const char *cmd; /* for messages: "zarray CMD: ..." */
	int fd;
	uint64_t id; /* of the request in flight */
	bool quiet; /* print nothing (status --test without a daemon) */
};

/*
 * Connect to cli->socket_path. Returns 0, or -errno after printing
 * "zarray: cannot reach zarrayd at SOCKET: reason".
 */
int za_client_open(struct za_client *c, const struct za_cli *cli,
		   const char *cmd);
void za_client_close(struct za_client *c);

/*
 * Send @req (version and id are filled in) and wait for the first
 * response to it. Returns 0 with *@resp (which may carry an error: see
 * za_client_failed()), or -errno after printing why.
 */
int za_client_call(struct za_client *c, Zarray__Request *req, int timeout_ms,
		   Zarray__Response **resp);
/* The next response to the request in flight (streams: watch). */
int za_client_next(struct za_client *c, int timeout_ms,
		   Zarray__Response **resp);

/* If @resp carries an error, print "zarray CMD: message", return true. */
bool za_client_failed(const struct za_client *c, const Zarray__Response *resp);

/*
 * One-shot: open, call, close. Returns 0 with *@resp free of errors, or
 * ZA_EXIT_FAIL after printing why (nothing to free then).
 */
int za_client_run(const struct za_cli *cli, const char *cmd,
		  Zarray__Request *req, int timeout_ms,
		  Zarray__Response **resp);

/*
 * A command that changes something: send @req and wait as long as it
 * takes; on success say "zarray CMD: NAME DONE" on stderr (nothing if
 * @done is NULL; the daemon's own words if @done is ZA_CLIENT_SAID, for
 * requests whose outcome the daemon decides, such as a rate given to a
 * job already running). Returns an exit code, having printed why if it
 * fails.
 */
extern const char za_client_said[];
#define ZA_CLIENT_SAID za_client_said
int za_client_change(const struct za_cli *cli, const char *cmd,
		     Zarray__Request *req, const char *name, const char *done);

/* ---- printing what the daemon says (cmd-status.c) ---- */

const char *za_cli_array_state_str(int state);
const char *za_cli_member_state_str(int state);
const char *za_cli_job_kind_str(int kind);
const char *za_cli_job_state_str(int state);
/*
 * "rebuild running [=====>    ] 45.2% 1.2 GiB/2.7 GiB 310 MiB/s ETA
 * 0:00:05" (@bar: with the bar; rate and ETA only when known).
 */
const char *za_cli_job_line(const Zarray__JobStatus *j, bool bar, char *buf,
			    size_t len);
void za_cli_json_job(FILE *f, const Zarray__JobStatus *j);
void za_cli_json_array(FILE *f, const Zarray__ArrayStatus *a);

#endif /* ZA_CLI_CLIENT_H */
