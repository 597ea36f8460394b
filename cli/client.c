// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * client.c - the CLI's connection to zarrayd: one connection per command,
 * one request on it, its response(s) checked before use (the id must be
 * ours, or 0 for a connection-level refusal), and every failure said in
 * one line. It does not print what a response contains.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "log.h"

static void say(const struct za_client *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void say(const struct za_client *c, const char *fmt, ...)
{
	va_list ap;

	if (c->quiet)
		return;
	fprintf(stderr, "zarray %s: ", c->cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int za_client_open(struct za_client *c, const struct za_cli *cli,
		   const char *cmd)
{
	int ret;

	c->cli = cli;
	c->cmd = cmd;
	c->fd = -1;
	c->id = 0;
	ret = za_rpc_connect(cli->socket_path, ZA_CLIENT_CONNECT_MS, &c->fd);
	if (ret < 0) {
		say(c, "cannot reach zarrayd at %s: %s", cli->socket_path,
		    strerror(-ret));
		return ret;
	}
	return 0;
}

void za_client_close(struct za_client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

int za_client_next(struct za_client *c, int timeout_ms, Zarray__Response **resp)
{
	Zarray__Response *r;
	int ret;

	for (;;) {
		ret = za_rpc_recv_response(c->fd, timeout_ms, &r);
		if (ret == -ECONNRESET) {
			say(c,
			    "zarrayd at %s closed the connection without "
			    "answering",
			    c->cli->socket_path);
			return ret;
		}
		if (ret == -ETIMEDOUT) {
			say(c, "no answer from zarrayd at %s (timed out)",
			    c->cli->socket_path);
			return ret;
		}
		if (ret < 0) {
			say(c, "bad answer from zarrayd at %s: %s",
			    c->cli->socket_path, strerror(-ret));
			return ret;
		}
		if (r->version != ZA_RPC_VERSION) {
			say(c,
			    "zarrayd at %s speaks protocol version %u, not "
			    "%u",
			    c->cli->socket_path, r->version, ZA_RPC_VERSION);
			za_rpc_response_free(r);
			return -EPROTO;
		}
		/* A refusal before our request was read carries id 0. */
		if (r->id == c->id || (r->id == 0 && r->error)) {
			*resp = r;
			return 0;
		}
		za_log_debug("ignoring a response to request %llu",
			     (unsigned long long)r->id);
		za_rpc_response_free(r);
	}
}

int za_client_call(struct za_client *c, Zarray__Request *req, int timeout_ms,
		   Zarray__Response **resp)
{
	int ret;

	c->id = ((uint64_t)getpid() << 20) + 1;
	req->version = ZA_RPC_VERSION;
	req->id = c->id;
	ret = za_rpc_send_request(c->fd, req, ZA_CLIENT_CONNECT_MS);
	if (ret < 0 && ret != -EPIPE && ret != -ECONNRESET) {
		say(c, "cannot send to zarrayd at %s: %s", c->cli->socket_path,
		    strerror(-ret));
		return ret;
	}
	/* Even when the send failed, the daemon may have said why it
	 * closed (permission, too many connections): read that. */
	return za_client_next(c, timeout_ms, resp);
}

bool za_client_failed(const struct za_client *c, const Zarray__Response *resp)
{
	if (!resp->error)
		return false;
	if (!c->quiet)
		fprintf(stderr, "zarray %s: %s\n", c->cmd,
			resp->error->message);
	return true;
}

int za_client_run(const struct za_cli *cli, const char *cmd,
		  Zarray__Request *req, int timeout_ms, Zarray__Response **resp)
{
	struct za_client c = { 0 };
	Zarray__Response *r;
	int ret;

	if (za_client_open(&c, cli, cmd) < 0)
		return ZA_EXIT_FAIL;
	ret = za_client_call(&c, req, timeout_ms, &r);
	za_client_close(&c);
	if (ret < 0)
		return ZA_EXIT_FAIL;
	if (za_client_failed(&c, r)) {
		za_rpc_response_free(r);
		return ZA_EXIT_FAIL;
	}
	*resp = r;
	return 0;
}

const char za_client_said[] = "done";

int za_client_change(const struct za_cli *cli, const char *cmd,
		     Zarray__Request *req, const char *name, const char *done)
{
	Zarray__Response *r;
	int rc;

	rc = za_client_run(cli, cmd, req, ZA_CLIENT_NO_TIMEOUT, &r);
	if (rc)
		return rc;
	if (done == ZA_CLIENT_SAID &&
	    r->body_case == ZARRAY__RESPONSE__BODY_DONE && r->done->message &&
	    *r->done->message)
		done = r->done->message;
	if (done)
		fprintf(stderr, "zarray %s: %s %s\n", cmd, name, done);
	za_rpc_response_free(r);
	return ZA_EXIT_OK;
}
