/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * rpc.h - the control protocol's transport: frames (a 4-byte big-endian
 * length + an encoded zarray.Request or zarray.Response), a non-blocking
 * server on the libev loop of a struct za_io, and a blocking client for
 * the CLI.
 *
 * The server owns connections: it checks each peer's credentials
 * (SO_PEERCRED) when it accepts it, caps the number of connections and
 * the frame length (before allocating), closes a peer that stalls inside
 * a frame, and hands each decoded, version-checked request to its owner.
 * A connection carries one request at a time: the next one is not read
 * until the current one has had its final response (more unset), so a
 * client that pipelines waits in the socket buffer, not in our memory.
 *
 * It does not know what a command means: the daemon (daemon-cmd.c) does.
 * Everything runs on the loop thread; nothing is thread-safe.
 */
#ifndef ZA_RPC_H
#define ZA_RPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "zarray.pb-c.h"

#define ZA_RPC_VERSION 1
#define ZA_RPC_HDR_BYTES 4
/* Largest encoded message either side accepts. */
#define ZA_RPC_MAX_FRAME_BYTES (1u << 20)
#define ZA_RPC_DEFAULT_MAX_CONNS 128
#define ZA_RPC_DEFAULT_TIMEOUT_S 5.0
#define ZA_RPC_DEFAULT_GROUP "zarray"

struct za_io;
struct za_rpc_server;
struct za_rpc_conn;

/* ---- frames ---- */

/*
 * The body length a header announces. Returns 0, or -EMSGSIZE if it is 0
 * or above ZA_RPC_MAX_FRAME_BYTES (then nothing may be allocated for it).
 */
int za_rpc_frame_len(const uint8_t hdr[ZA_RPC_HDR_BYTES], uint32_t *len);
/*
 * Encode @m as one frame in a malloc'ed buffer (*@buf, *@len: header
 * included). Returns 0, -EMSGSIZE if it would exceed the cap, -ENOMEM.
 */
int za_rpc_encode_request(const Zarray__Request *m, uint8_t **buf, size_t *len);
int za_rpc_encode_response(const Zarray__Response *m, uint8_t **buf,
			   size_t *len);
/*
 * Decode a frame's body (header excluded). Returns 0 or -EBADMSG (does
 * not decode, a required field is missing, or a length is out of range).
 * Free with za_rpc_request_free() / za_rpc_response_free().
 */
int za_rpc_decode_request(const uint8_t *body, size_t len,
			  Zarray__Request **out);
int za_rpc_decode_response(const uint8_t *body, size_t len,
			   Zarray__Response **out);
void za_rpc_request_free(Zarray__Request *m);
void za_rpc_response_free(Zarray__Response *m);

/* The ErrorCode that best describes a -errno. */
Zarray__ErrorCode za_rpc_errno_code(int err);
const char *za_rpc_error_code_str(Zarray__ErrorCode code);

/* ---- peers ---- */

struct za_rpc_peer {
	pid_t pid;
	uid_t uid;
	gid_t gid;
};

/*
 * Access policy: root, the server's own uid, or a member of @group (the
 * peer's gid or one of its supplementary groups, @groups[0..n)). Pass
 * have_group false when the group does not exist.
 */
bool za_rpc_peer_allowed(const struct za_rpc_peer *peer, const gid_t *groups,
			 unsigned nr_groups, bool have_group, gid_t group,
			 uid_t self);

/* The gid of group @name: 0, -ENOENT (no such group) or -errno. */
int za_rpc_group_gid(const char *name, gid_t *gid);

/* ---- server ---- */

struct za_rpc_server_ops {
	/*
	 * A decoded request whose version is ours. The callee owns @req
	 * (free it with za_rpc_request_free()) and must answer it with
	 * za_rpc_reply*() sooner or later; to answer later it takes a
	 * reference with za_rpc_conn_get(). Nothing more is read from @c
	 * until the final response (more unset) has been queued.
	 */
	void (*request)(struct za_rpc_conn *c, Zarray__Request *req,
			void *priv);
	/* @c is closing (optional): drop what refers to it. */
	void (*closed)(struct za_rpc_conn *c, void *priv);
};

struct za_rpc_server_params {
	unsigned max_conns; /* 0: ZA_RPC_DEFAULT_MAX_CONNS */
	/* How long a peer may take to send a whole request, counted from
	 * accept or from the last final response. 0: the default. */
	double timeout_s;
	const char *group; /* NULL: ZA_RPC_DEFAULT_GROUP */
};

/*
 * Serve @listen_fd (a listening Unix stream socket; the server owns it
 * and closes it) on @io's loop. @listen_fd may be -1 for a server that
 * only serves adopted connections (tests). Returns 0 or -errno.
 */
int za_rpc_server_new(struct za_io *io, int listen_fd,
		      const struct za_rpc_server_params *p,
		      const struct za_rpc_server_ops *ops, void *priv,
		      struct za_rpc_server **out);
/* Serve an already connected socket (e.g. one end of a socketpair). */
int za_rpc_server_adopt(struct za_rpc_server *s, int fd);
/* Connections currently open. */
unsigned za_rpc_server_nr_conns(const struct za_rpc_server *s);
/*
 * Try once more to write what each connection has queued, then close
 * them all and the listening socket, and free @s. Connections the caller
 * still holds references to stay allocated (closed) until put.
 */
void za_rpc_server_free(struct za_rpc_server *s);

/*
 * Create a listening socket at @path (an existing socket there is
 * replaced: the caller holds the lock that says it is stale), mode @mode,
 * group @gid unless it is (gid_t)-1. Returns 0 or -errno (logged).
 */
int za_rpc_listen(const char *path, mode_t mode, gid_t gid, int *fd);

/*
 * Queue @resp on @c (version filled in). Returns 0, or -EPIPE if @c is
 * closed (the response is dropped), -ENOMEM/-EMSGSIZE (the connection is
 * closed).
 */
int za_rpc_reply(struct za_rpc_conn *c, Zarray__Response *resp);
/* Final error response: code, one line, -errno (0: none). */
int za_rpc_reply_error(struct za_rpc_conn *c, uint64_t id,
		       Zarray__ErrorCode code, int err, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

const struct za_rpc_peer *za_rpc_conn_peer(const struct za_rpc_conn *c);
bool za_rpc_conn_alive(const struct za_rpc_conn *c);
void za_rpc_conn_get(struct za_rpc_conn *c);
void za_rpc_conn_put(struct za_rpc_conn *c);
/* Close @c now (its queued output is dropped). */
void za_rpc_conn_close(struct za_rpc_conn *c);

/* ---- blocking client ---- */

/*
 * Connect to @path within @timeout_ms (<= 0: no limit). Returns 0 with
 * *@fd, or -errno (-ENOENT, -ECONNREFUSED, -ETIMEDOUT, ...).
 */
int za_rpc_connect(const char *path, int timeout_ms, int *fd);
/* Send one request; returns 0 or -errno (-EPIPE: the peer closed). */
int za_rpc_send_request(int fd, const Zarray__Request *req, int timeout_ms);
/*
 * Receive one response. Returns 0 with *@out, -ETIMEDOUT, -ECONNRESET
 * (the peer closed), -EMSGSIZE (length out of range: nothing allocated),
 * -EBADMSG.
 */
int za_rpc_recv_response(int fd, int timeout_ms, Zarray__Response **out);

#endif /* ZA_RPC_H */
