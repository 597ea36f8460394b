// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz-rpc-server.c - fuzz target: the control socket's server side
 * (src/rpc.c): a fuzzed byte stream from a peer on a socketpair, through
 * framing, the length cap, decoding, the version check and the
 * one-request-at-a-time state machine, to a stub owner that answers.
 *
 * The owner is a stub, not the daemon's dispatch: daemon commands take
 * paths from the request and would create, open and reset files on this
 * machine, so fuzzing them needs a sandbox (see docs/design.md, "Tests").
 * The stub answers like the daemon does: at once or on a later loop
 * iteration, with a stream of "more" responses or one final one, or by
 * closing the connection.
 *
 * Input: one mode byte, then the bytes the peer sends (then EOF).
 *   mode bits 0-1: 0 answer at once, 1 answer on a later iteration,
 *                  2 two "more" responses then the final one (the later
 *                  ones on later iterations), 3 close the connection
 *   mode bit 2:    minimal socket buffers (responses written in pieces)
 *   mode bit 3:    two peers at once, each sending the same bytes
 *
 * Oracles: every request handed to the owner decodes with its required
 * fields and our version; the server closes the connection after the
 * peer's EOF (no hang) and frees everything (ASan's leak check).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "io.h"
#include "rpc.h"

struct stub {
	struct za_io *io;
	unsigned mode;
	unsigned pending; /* deferred answers not yet sent */
	unsigned requests;
};

struct answer {
	struct za_io_defer d;
	struct stub *st;
	struct za_rpc_conn *c;
	uint64_t id;
	unsigned more; /* "more" responses still to send */
};

static void answer(struct za_rpc_conn *c, uint64_t id, bool more)
{
	Zarray__Response r = ZARRAY__RESPONSE__INIT;
	Zarray__Done done = ZARRAY__DONE__INIT;

	r.id = id;
	r.has_more = more;
	r.more = more;
	r.body_case = ZARRAY__RESPONSE__BODY_DONE;
	r.done = &done;
	done.message = (char *)"fuzz";
	/* -EPIPE when the peer is gone: the daemon ignores that too. */
	(void)za_rpc_reply(c, &r);
}

static void answer_cb(struct za_io_defer *d)
{
	struct answer *a = (struct answer *)d;

	if (a->more) {
		a->more--;
		answer(a->c, a->id, true);
		if (za_rpc_conn_alive(a->c)) {
			za_io_defer(a->st->io, &a->d);
			return;
		}
	}
	answer(a->c, a->id, false);
	za_rpc_conn_put(a->c);
	a->st->pending--;
	free(a);
}

static void on_request(struct za_rpc_conn *c, Zarray__Request *req, void *priv)
{
	struct stub *st = priv;
	struct answer *a;

	ZA_FUZZ_CHECK(protobuf_c_message_check(&req->base),
		      "a request without its required fields dispatched");
	ZA_FUZZ_CHECK(req->version == ZA_RPC_VERSION,
		      "a request of another version dispatched");
	st->requests++;
	switch (st->mode & 3) {
	case 0:
		answer(c, req->id, false);
		break;
	case 1:
	case 2:
		a = calloc(1, sizeof(*a));
		if (!a)
			abort();
		a->d.fn = answer_cb;
		a->st = st;
		a->c = c;
		a->id = req->id;
		a->more = (st->mode & 3) == 2 ? 2 : 0;
		za_rpc_conn_get(c);
		st->pending++;
		za_io_defer(st->io, &a->d);
		break;
	case 3:
		za_rpc_conn_close(c);
		break;
	}
	za_rpc_request_free(req);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct za_rpc_server_ops ops = { .request = on_request };
	struct za_rpc_server_params params = { 0 };
	struct za_rpc_server *srv;
	struct za_fuzz_peer peers[2];
	struct stub st = { 0 };
	unsigned nr_peers, i;
	int fd;

	za_fuzz_init();
	if (size < 1)
		return 0;
	st.mode = data[0];
	nr_peers = st.mode & 8 ? 2 : 1;
	if (za_io_new(NULL, &st.io))
		abort();
	if (za_rpc_server_new(st.io, -1, &params, &ops, &st, &srv))
		abort();
	for (i = 0; i < nr_peers; i++) {
		if (za_fuzz_peer_start(&peers[i], st.io, data + 1, size - 1,
				       &fd))
			abort();
		if (st.mode & 4) {
			za_fuzz_small_bufs(fd);
			za_fuzz_small_bufs(peers[i].fd);
		}
		ZA_FUZZ_CHECK(za_rpc_server_adopt(srv, fd) == 0,
			      "the server refused our own uid's connection");
	}
	for (i = 0; i < nr_peers; i++)
		za_fuzz_peer_run(&peers[i], st.io);
	/* Answers still queued find a closed connection: harmless. */
	while (st.pending)
		za_io_run_once(st.io);
	ZA_FUZZ_CHECK(za_rpc_server_nr_conns(srv) == 0,
		      "a connection left open after the peer's EOF");
	for (i = 0; i < nr_peers; i++)
		za_fuzz_peer_stop(&peers[i]);
	za_rpc_server_free(srv);
	za_io_free(st.io);
	return 0;
}
