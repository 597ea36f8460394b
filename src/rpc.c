// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * rpc.c - control-socket transport: frames, the libev server, the
 * blocking client.
 *
 * A frame is a 4-byte big-endian length and that many bytes of protobuf.
 * Every length read from a peer is checked against ZA_RPC_MAX_FRAME_BYTES
 * before a byte is allocated for it, and a body is decoded only once it
 * is whole. The server reads exactly one frame at a time (header, then
 * body) so that it never buffers more than one request per connection;
 * a connection is idle, reading a frame, waiting for its request to be
 * answered, or flushing its last words before closing. A peer gets
 * ZA_RPC_DEFAULT_TIMEOUT_S to deliver a whole request: one that sends
 * half a frame and stalls is closed, so it cannot hold a slot forever.
 *
 * Refused peers (credentials, too many connections) get one error
 * response written straight to the fresh socket, whose buffer is empty so
 * the small frame always fits, and are closed without ever being read
 * from: nothing an unprivileged peer sends is parsed.
 *
 * It does not interpret commands, and it keeps no state between
 * connections.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <ev.h>

#include "io.h"
#include "log.h"
#include "rpc.h"

/* Output a peer has not read yet, past which it is dropped. */
#define RPC_MAX_OUT_BYTES (4u << 20)
/* Accepts per wake-up, so that a connection storm cannot starve the rest. */
#define RPC_ACCEPT_BATCH 32
#define RPC_MAX_PEER_GROUPS 1024

/* ---- frames ---- */

int za_rpc_frame_len(const uint8_t hdr[ZA_RPC_HDR_BYTES], uint32_t *len)
{
	uint32_t v = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 |
		     (uint32_t)hdr[2] << 8 | (uint32_t)hdr[3];

	if (v == 0 || v > ZA_RPC_MAX_FRAME_BYTES)
		return -EMSGSIZE;
	*len = v;
	return 0;
}

static int encode(const ProtobufCMessage *m, uint8_t **buf, size_t *len)
{
	size_t n;
	uint8_t *b;

	/* Our own messages: a missing required field is a bug here. */
	if (!protobuf_c_message_check(m)) {
		za_log_err("rpc: refusing to encode an incomplete %s",
			   m->descriptor->name);
		return -EINVAL;
	}
	n = protobuf_c_message_get_packed_size(m);
	if (n == 0 || n > ZA_RPC_MAX_FRAME_BYTES)
		return -EMSGSIZE;
	b = malloc(ZA_RPC_HDR_BYTES + n);
	if (!b)
		return -ENOMEM;
	b[0] = (uint8_t)(n >> 24);
	b[1] = (uint8_t)(n >> 16);
	b[2] = (uint8_t)(n >> 8);
	b[3] = (uint8_t)n;
	protobuf_c_message_pack(m, b + ZA_RPC_HDR_BYTES);
	*buf = b;
	*len = ZA_RPC_HDR_BYTES + n;
	return 0;
}

int za_rpc_encode_request(const Zarray__Request *m, uint8_t **buf, size_t *len)
{
	return encode(&m->base, buf, len);
}

int za_rpc_encode_response(const Zarray__Response *m, uint8_t **buf,
			   size_t *len)
{
	return encode(&m->base, buf, len);
}

int za_rpc_decode_request(const uint8_t *body, size_t len,
			  Zarray__Request **out)
{
	Zarray__Request *m;

	if (len == 0 || len > ZA_RPC_MAX_FRAME_BYTES)
		return -EBADMSG;
	m = zarray__request__unpack(NULL, len, body);
	if (!m)
		return -EBADMSG;
	*out = m;
	return 0;
}

int za_rpc_decode_response(const uint8_t *body, size_t len,
			   Zarray__Response **out)
{
	Zarray__Response *m;

	if (len == 0 || len > ZA_RPC_MAX_FRAME_BYTES)
		return -EBADMSG;
	m = zarray__response__unpack(NULL, len, body);
	if (!m)
		return -EBADMSG;
	*out = m;
	return 0;
}

void za_rpc_request_free(Zarray__Request *m)
{
	if (m)
		zarray__request__free_unpacked(m, NULL);
}

void za_rpc_response_free(Zarray__Response *m)
{
	if (m)
		zarray__response__free_unpacked(m, NULL);
}

Zarray__ErrorCode za_rpc_errno_code(int err)
{
	switch (err < 0 ? -err : err) {
	case 0:
		return ZARRAY__ERROR_CODE__ERR_NONE;
	case ENOENT:
		return ZARRAY__ERROR_CODE__ERR_NOT_FOUND;
	case EEXIST:
		return ZARRAY__ERROR_CODE__ERR_EXISTS;
	case EBUSY:
	case EAGAIN:
		return ZARRAY__ERROR_CODE__ERR_BUSY;
	case EINVAL:
	case EMEDIUMTYPE:
	case ENOSYS:
	case EOPNOTSUPP:
	case ERANGE:
	case ENAMETOOLONG:
		return ZARRAY__ERROR_CODE__ERR_INVALID;
	case EPERM:
	case EACCES:
		return ZARRAY__ERROR_CODE__ERR_PERMISSION;
	case EIO:
	case ENODEV:
	case ENXIO:
	case EROFS:
	case ENOSPC:
	case EBADMSG:
		return ZARRAY__ERROR_CODE__ERR_IO;
	case EPROTO:
		return ZARRAY__ERROR_CODE__ERR_MALFORMED;
	default:
		return ZARRAY__ERROR_CODE__ERR_INTERNAL;
	}
}

const char *za_rpc_error_code_str(Zarray__ErrorCode code)
{
	switch (code) {
	case ZARRAY__ERROR_CODE__ERR_NONE:
		return "none";
	case ZARRAY__ERROR_CODE__ERR_VERSION:
		return "version";
	case ZARRAY__ERROR_CODE__ERR_MALFORMED:
		return "malformed";
	case ZARRAY__ERROR_CODE__ERR_PERMISSION:
		return "permission";
	case ZARRAY__ERROR_CODE__ERR_NOT_FOUND:
		return "not-found";
	case ZARRAY__ERROR_CODE__ERR_EXISTS:
		return "exists";
	case ZARRAY__ERROR_CODE__ERR_BUSY:
		return "busy";
	case ZARRAY__ERROR_CODE__ERR_INVALID:
		return "invalid";
	case ZARRAY__ERROR_CODE__ERR_IO:
		return "io";
	case ZARRAY__ERROR_CODE__ERR_INTERNAL:
		return "internal";
	default:
		break;
	}
	return "unknown";
}

/* ---- peers ---- */

bool za_rpc_peer_allowed(const struct za_rpc_peer *peer, const gid_t *groups,
			 unsigned nr_groups, bool have_group, gid_t group,
			 uid_t self)
{
	unsigned i;

	if (peer->uid == 0 || peer->uid == self)
		return true;
	if (!have_group)
		return false;
	if (peer->gid == group)
		return true;
	for (i = 0; i < nr_groups; i++)
		if (groups[i] == group)
			return true;
	return false;
}

/*
 * The peer process's supplementary groups. SO_PEERGROUPS (Linux 4.13)
 * gives the connecting process's own list, so a process that dropped its
 * groups is not let in by them; before that, the user's groups from NSS.
 * Returns the count (0 if none could be found).
 */
static unsigned peer_groups(int fd, const struct za_rpc_peer *peer,
			    gid_t *groups, unsigned max)
{
	socklen_t len = (socklen_t)(max * sizeof(gid_t));
	struct passwd pw, *pwp = NULL;
	char buf[4096];
	int n = (int)max;

#ifdef SO_PEERGROUPS
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) == 0)
		return (unsigned)(len / sizeof(gid_t));
	if (errno != ENOPROTOOPT)
		return 0; /* ERANGE: more than max groups; not trusted */
#endif
	if (getpwuid_r(peer->uid, &pw, buf, sizeof(buf), &pwp) || !pwp)
		return 0;
	if (getgrouplist(pwp->pw_name, pwp->pw_gid, groups, &n) < 0)
		return 0;
	return (unsigned)n;
}

int za_rpc_group_gid(const char *name, gid_t *gid)
{
	struct group gr, *grp = NULL;
	size_t len = 4096;
	char *buf = NULL;
	int ret;

	/* A big group's member list can outgrow any fixed buffer. */
	for (;;) {
		char *n = realloc(buf, len);

		if (!n) {
			free(buf);
			return -ENOMEM;
		}
		buf = n;
		ret = getgrnam_r(name, &gr, buf, len, &grp);
		if (ret != ERANGE || len >= (16u << 20))
			break;
		len *= 4;
	}
	if (ret == 0 && grp)
		*gid = grp->gr_gid;
	free(buf);
	if (ret)
		return -ret;
	return grp ? 0 : -ENOENT;
}

/* ---- server ---- */

struct za_rpc_conn {
	struct za_rpc_server *srv;
	struct za_rpc_conn *prev, *next;
	int fd;
	ev_io rio, wio;
	ev_timer timer;
	struct za_rpc_peer peer;
	unsigned refs;
	bool open; /* on the server's list, fd valid */
	bool busy; /* a request awaits its final response */
	bool closing; /* flush, then close; read nothing more */
	uint8_t hdr[ZA_RPC_HDR_BYTES];
	size_t hdr_have;
	uint8_t *body;
	uint32_t body_len, body_have;
	uint8_t *out;
	size_t out_len, out_off, out_cap;
};

struct za_rpc_server {
	struct za_io *io;
	struct ev_loop *loop;
	int lfd;
	ev_io lio;
	ev_timer backoff;
	struct za_rpc_server_ops ops;
	void *priv;
	unsigned max_conns;
	double timeout_s;
	char group_name[64];
	bool have_group;
	gid_t group;
	uid_t self;
	struct za_rpc_conn *conns;
	unsigned nr_conns;
};

static void conn_flush(struct za_rpc_conn *c);
static void conn_read(struct za_rpc_conn *c);

void za_rpc_conn_get(struct za_rpc_conn *c)
{
	c->refs++;
}

void za_rpc_conn_put(struct za_rpc_conn *c)
{
	if (--c->refs)
		return;
	free(c->body);
	free(c->out);
	free(c);
}

const struct za_rpc_peer *za_rpc_conn_peer(const struct za_rpc_conn *c)
{
	return &c->peer;
}

bool za_rpc_conn_alive(const struct za_rpc_conn *c)
{
	return c->open && !c->closing;
}

void za_rpc_conn_close(struct za_rpc_conn *c)
{
	struct za_rpc_server *s = c->srv;

	if (!c->open)
		return;
	c->open = false;
	ev_io_stop(s->loop, &c->rio);
	ev_io_stop(s->loop, &c->wio);
	ev_timer_stop(s->loop, &c->timer);
	close(c->fd);
	c->fd = -1;
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->prev = c->next = NULL;
	s->nr_conns--;
	free(c->body);
	c->body = NULL;
	free(c->out);
	c->out = NULL;
	c->out_len = c->out_off = c->out_cap = 0;
	/* The list's reference keeps @c alive through the callback. */
	if (s->ops.closed)
		s->ops.closed(c, s->priv);
	za_rpc_conn_put(c);
}

static void conn_arm_timer(struct za_rpc_conn *c)
{
	ev_timer_stop(c->srv->loop, &c->timer);
	ev_timer_set(&c->timer, c->srv->timeout_s, 0.0);
	ev_timer_start(c->srv->loop, &c->timer);
}

static void conn_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct za_rpc_conn *c = w->data;

	(void)loop;
	(void)revents;
	za_log_info("rpc: closing connection of pid %d uid %u: %s within "
		    "%.1f s",
		    (int)c->peer.pid, (unsigned)c->peer.uid,
		    c->closing ? "it did not read its error" :
				 "no complete request",
		    c->srv->timeout_s);
	za_rpc_conn_close(c);
}

static int conn_queue(struct za_rpc_conn *c, const uint8_t *buf, size_t len)
{
	size_t pending = c->out_len - c->out_off;

	if (pending + len > RPC_MAX_OUT_BYTES) {
		za_log_warn("rpc: pid %d uid %u does not read its responses "
			    "(%zu bytes queued): closing",
			    (int)c->peer.pid, (unsigned)c->peer.uid, pending);
		za_rpc_conn_close(c);
		return -ENOBUFS;
	}
	if (c->out_off && pending) {
		memmove(c->out, c->out + c->out_off, pending);
	}
	c->out_len = pending;
	c->out_off = 0;
	if (pending + len > c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap : 4096;
		uint8_t *n;

		while (cap < pending + len)
			cap *= 2;
		n = realloc(c->out, cap);
		if (!n) {
			za_rpc_conn_close(c);
			return -ENOMEM;
		}
		c->out = n;
		c->out_cap = cap;
	}
	memcpy(c->out + c->out_len, buf, len);
	c->out_len += len;
	return 0;
}

static void conn_flush(struct za_rpc_conn *c)
{
	struct za_rpc_server *s = c->srv;

	while (c->open && c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off,
				 c->out_len - c->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				ev_io_start(s->loop, &c->wio);
				return;
			}
			za_log_debug("rpc: pid %d: send: %s", (int)c->peer.pid,
				     strerror(errno));
			za_rpc_conn_close(c);
			return;
		}
		c->out_off += (size_t)n;
	}
	if (!c->open)
		return;
	c->out_off = c->out_len = 0;
	ev_io_stop(s->loop, &c->wio);
	if (c->closing)
		za_rpc_conn_close(c);
}

static void conn_write_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct za_rpc_conn *c = w->data;

	(void)loop;
	(void)revents;
	za_rpc_conn_get(c);
	conn_flush(c);
	za_rpc_conn_put(c);
}

int za_rpc_reply(struct za_rpc_conn *c, Zarray__Response *resp)
{
	bool final = !(resp->has_more && resp->more);
	uint8_t *buf;
	size_t len;
	int ret;

	if (!c->open)
		return -EPIPE;
	resp->version = ZA_RPC_VERSION;
	ret = za_rpc_encode_response(resp, &buf, &len);
	if (ret < 0) {
		za_log_err("rpc: cannot encode a response to pid %d: %s",
			   (int)c->peer.pid, strerror(-ret));
		za_rpc_conn_close(c);
		return ret;
	}
	za_rpc_conn_get(c);
	ret = conn_queue(c, buf, len);
	free(buf);
	if (ret == 0 && final && c->busy) {
		/* The next request may come now. */
		c->busy = false;
		if (!c->closing) {
			conn_arm_timer(c);
			ev_io_start(c->srv->loop, &c->rio);
		}
	}
	if (ret == 0)
		conn_flush(c);
	if (!c->open && ret == 0)
		ret = -EPIPE;
	za_rpc_conn_put(c);
	return ret;
}

static void fill_error(Zarray__Response *r, Zarray__Error *e, uint64_t id,
		       Zarray__ErrorCode code, int err, char *msg)
{
	zarray__response__init(r);
	zarray__error__init(e);
	r->version = ZA_RPC_VERSION;
	r->id = id;
	r->error = e;
	e->code = code;
	e->message = msg;
	if (err) {
		e->has_errno_value = true;
		e->errno_value = err < 0 ? -err : err;
	}
}

int za_rpc_reply_error(struct za_rpc_conn *c, uint64_t id,
		       Zarray__ErrorCode code, int err, const char *fmt, ...)
{
	Zarray__Response r;
	Zarray__Error e;
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fill_error(&r, &e, id, code, err, msg);
	return za_rpc_reply(c, &r);
}

/*
 * Protocol errors found while reading: answer if we can, then close once
 * the answer is out. The request id is 0 when nothing decoded.
 */
static void conn_fatal(struct za_rpc_conn *c, uint64_t id,
		       Zarray__ErrorCode code, const char *msg)
{
	Zarray__Response r;
	Zarray__Error e;

	za_log_warn("rpc: pid %d uid %u: %s: closing", (int)c->peer.pid,
		    (unsigned)c->peer.uid, msg);
	fill_error(&r, &e, id, code, 0, (char *)msg);
	c->closing = true;
	ev_io_stop(c->srv->loop, &c->rio);
	conn_arm_timer(c);
	/* Closes @c once the answer is out (or at once if it cannot go). */
	za_rpc_reply(c, &r);
}

static void conn_dispatch(struct za_rpc_conn *c)
{
	struct za_rpc_server *s = c->srv;
	Zarray__Request *req = NULL;
	char msg[128];
	int ret;

	ret = za_rpc_decode_request(c->body, c->body_len, &req);
	free(c->body);
	c->body = NULL;
	c->hdr_have = 0;
	if (ret < 0) {
		conn_fatal(c, 0, ZARRAY__ERROR_CODE__ERR_MALFORMED,
			   "request does not decode");
		return;
	}
	if (req->version != ZA_RPC_VERSION) {
		snprintf(msg, sizeof(msg),
			 "protocol version %u not supported (zarrayd speaks "
			 "%u)",
			 req->version, ZA_RPC_VERSION);
		conn_fatal(c, req->id, ZARRAY__ERROR_CODE__ERR_VERSION, msg);
		za_rpc_request_free(req);
		return;
	}
	c->busy = true;
	ev_io_stop(s->loop, &c->rio);
	ev_timer_stop(s->loop, &c->timer);
	s->ops.request(c, req, s->priv);
}

static void conn_read(struct za_rpc_conn *c)
{
	while (c->open && !c->busy && !c->closing) {
		uint8_t *dst;
		size_t want;
		ssize_t n;

		if (c->hdr_have < ZA_RPC_HDR_BYTES) {
			dst = c->hdr + c->hdr_have;
			want = ZA_RPC_HDR_BYTES - c->hdr_have;
		} else {
			dst = c->body + c->body_have;
			want = c->body_len - c->body_have;
		}
		n = recv(c->fd, dst, want, MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK) {
				za_log_debug("rpc: pid %d: recv: %s",
					     (int)c->peer.pid, strerror(errno));
				za_rpc_conn_close(c);
			}
			return;
		}
		if (n == 0) {
			if (c->hdr_have)
				za_log_info("rpc: pid %d uid %u closed its "
					    "connection inside a frame",
					    (int)c->peer.pid,
					    (unsigned)c->peer.uid);
			za_rpc_conn_close(c);
			return;
		}
		if (c->hdr_have < ZA_RPC_HDR_BYTES) {
			c->hdr_have += (size_t)n;
			if (c->hdr_have < ZA_RPC_HDR_BYTES)
				continue;
			if (za_rpc_frame_len(c->hdr, &c->body_len) < 0) {
				char msg[96];

				snprintf(msg, sizeof(msg),
					 "frame length %u out of range (1 to "
					 "%u bytes)",
					 (unsigned)c->hdr[0] << 24 |
						 (unsigned)c->hdr[1] << 16 |
						 (unsigned)c->hdr[2] << 8 |
						 c->hdr[3],
					 ZA_RPC_MAX_FRAME_BYTES);
				conn_fatal(c, 0,
					   ZARRAY__ERROR_CODE__ERR_MALFORMED,
					   msg);
				return;
			}
			c->body = malloc(c->body_len);
			if (!c->body) {
				za_rpc_conn_close(c);
				return;
			}
			c->body_have = 0;
			continue;
		}
		c->body_have += (uint32_t)n;
		if (c->body_have == c->body_len)
			conn_dispatch(c);
	}
}

static void conn_read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct za_rpc_conn *c = w->data;

	(void)loop;
	(void)revents;
	za_rpc_conn_get(c);
	conn_read(c);
	za_rpc_conn_put(c);
}

/* A refused peer: one error frame on the fresh socket, then close. */
static void refuse(int fd, Zarray__ErrorCode code, const char *msg)
{
	Zarray__Response r;
	Zarray__Error e;
	uint8_t *buf;
	size_t len;

	fill_error(&r, &e, 0, code, 0, (char *)msg);
	if (za_rpc_encode_response(&r, &buf, &len) == 0) {
		if (send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
			za_log_debug("rpc: refused peer: send: %s",
				     strerror(errno));
		free(buf);
	}
	close(fd);
}

static int conn_new(struct za_rpc_server *s, int fd)
{
	gid_t groups[RPC_MAX_PEER_GROUPS];
	struct za_rpc_conn *c;
	struct za_rpc_peer peer;
	struct ucred cr;
	socklen_t crlen = sizeof(cr);
	unsigned nr_groups = 0;
	char msg[160];

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) < 0) {
		int err = errno;

		za_log_err("rpc: SO_PEERCRED: %s", strerror(err));
		close(fd);
		return -err;
	}
	peer.pid = cr.pid;
	peer.uid = cr.uid;
	peer.gid = cr.gid;
	if (peer.uid != 0 && peer.uid != s->self && s->have_group)
		nr_groups = peer_groups(fd, &peer, groups, RPC_MAX_PEER_GROUPS);
	if (!za_rpc_peer_allowed(&peer, groups, nr_groups, s->have_group,
				 s->group, s->self)) {
		za_log_warn("rpc: refused connection of pid %d uid %u gid %u: "
			    "not root nor in group '%s'",
			    (int)peer.pid, (unsigned)peer.uid,
			    (unsigned)peer.gid, s->group_name);
		snprintf(msg, sizeof(msg),
			 "permission denied: uid %u is not root nor in group "
			 "'%s'",
			 (unsigned)peer.uid, s->group_name);
		refuse(fd, ZARRAY__ERROR_CODE__ERR_PERMISSION, msg);
		return -EACCES;
	}
	if (s->nr_conns >= s->max_conns) {
		za_log_warn("rpc: refused connection of pid %d uid %u: %u "
			    "connections open",
			    (int)peer.pid, (unsigned)peer.uid, s->nr_conns);
		snprintf(msg, sizeof(msg),
			 "too many connections to zarrayd (%u); try again",
			 s->nr_conns);
		refuse(fd, ZARRAY__ERROR_CODE__ERR_BUSY, msg);
		return -EBUSY;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return -ENOMEM;
	}
	c->srv = s;
	c->fd = fd;
	c->peer = peer;
	c->refs = 1;
	c->open = true;
	ev_io_init(&c->rio, conn_read_cb, fd, EV_READ);
	c->rio.data = c;
	ev_io_init(&c->wio, conn_write_cb, fd, EV_WRITE);
	c->wio.data = c;
	ev_init(&c->timer, conn_timer_cb);
	c->timer.data = c;
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;
	s->nr_conns++;
	za_log_debug("rpc: connection of pid %d uid %u", (int)peer.pid,
		     (unsigned)peer.uid);
	conn_arm_timer(c);
	ev_io_start(s->loop, &c->rio);
	return 0;
}

int za_rpc_server_adopt(struct za_rpc_server *s, int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		close(fd);
		return -errno;
	}
	return conn_new(s, fd);
}

unsigned za_rpc_server_nr_conns(const struct za_rpc_server *s)
{
	return s->nr_conns;
}

static void backoff_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct za_rpc_server *s = w->data;

	(void)revents;
	ev_io_start(loop, &s->lio);
}

static void accept_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct za_rpc_server *s = w->data;
	int i;

	(void)revents;
	for (i = 0; i < RPC_ACCEPT_BATCH; i++) {
		int fd = accept4(s->lfd, NULL, NULL,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd >= 0) {
			conn_new(s, fd);
			continue;
		}
		if (errno == EINTR || errno == ECONNABORTED)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return;
		/* Out of descriptors or memory: do not spin on the
		 * pending connection; retry shortly. */
		za_log_warn("rpc: accept: %s; pausing for 100 ms",
			    strerror(errno));
		ev_io_stop(loop, &s->lio);
		ev_timer_set(&s->backoff, 0.1, 0.0);
		ev_timer_start(loop, &s->backoff);
		return;
	}
}

int za_rpc_server_new(struct za_io *io, int listen_fd,
		      const struct za_rpc_server_params *p,
		      const struct za_rpc_server_ops *ops, void *priv,
		      struct za_rpc_server **out)
{
	const char *group = p && p->group ? p->group : ZA_RPC_DEFAULT_GROUP;
	struct za_rpc_server *s;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->io = io;
	s->loop = za_io_loop(io);
	s->lfd = listen_fd;
	s->ops = *ops;
	s->priv = priv;
	s->max_conns = p && p->max_conns ? p->max_conns :
					   ZA_RPC_DEFAULT_MAX_CONNS;
	s->timeout_s = p && p->timeout_s > 0 ? p->timeout_s :
					       ZA_RPC_DEFAULT_TIMEOUT_S;
	snprintf(s->group_name, sizeof(s->group_name), "%s", group);
	s->have_group = za_rpc_group_gid(group, &s->group) == 0;
	s->self = geteuid();
	ev_init(&s->backoff, backoff_cb);
	s->backoff.data = s;
	if (listen_fd >= 0) {
		ev_io_init(&s->lio, accept_cb, listen_fd, EV_READ);
		s->lio.data = s;
		ev_io_start(s->loop, &s->lio);
	}
	*out = s;
	return 0;
}

void za_rpc_server_free(struct za_rpc_server *s)
{
	if (!s)
		return;
	while (s->conns) {
		struct za_rpc_conn *c = s->conns;

		/* Last words (a shutdown's reply) get one more try. */
		za_rpc_conn_get(c);
		if (c->out_len > c->out_off)
			conn_flush(c);
		za_rpc_conn_close(c);
		za_rpc_conn_put(c);
	}
	if (s->lfd >= 0) {
		ev_io_stop(s->loop, &s->lio);
		close(s->lfd);
	}
	ev_timer_stop(s->loop, &s->backoff);
	free(s);
}

int za_rpc_listen(const char *path, mode_t mode, gid_t gid, int *fd)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	mode_t old;
	int s, ret;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		za_log_err("%s: socket path longer than %zu bytes", path,
			   sizeof(sa.sun_path) - 1);
		return -ENAMETOOLONG;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			za_log_err("%s: exists and is not a socket; not "
				   "replacing it",
				   path);
			return -EEXIST;
		}
		/* A dead daemon's socket: the caller holds the lock. */
		if (unlink(path) < 0) {
			ret = -errno;
			za_log_err("%s: cannot remove the stale socket: %s",
				   path, strerror(errno));
			return ret;
		}
	}
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s < 0) {
		ret = -errno;
		za_log_err("socket: %s", strerror(errno));
		return ret;
	}
	/* The socket never exists with looser permissions than @mode. */
	old = umask(0777 & ~mode);
	ret = bind(s, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (ret < 0) {
		ret = -errno;
		za_log_err("%s: bind: %s", path, strerror(errno));
		goto err_sock;
	}
	if (chmod(path, mode) < 0 ||
	    (gid != (gid_t)-1 && chown(path, (uid_t)-1, gid) < 0)) {
		ret = -errno;
		za_log_err("%s: cannot set its mode or group: %s", path,
			   strerror(errno));
		goto err_unlink;
	}
	if (listen(s, 128) < 0) {
		ret = -errno;
		za_log_err("%s: listen: %s", path, strerror(errno));
		goto err_unlink;
	}
	*fd = s;
	return 0;

err_unlink:
	unlink(path);
err_sock:
	close(s);
	return ret;
}

/* ---- blocking client ---- */

static uint64_t deadline_of(int timeout_ms)
{
	return timeout_ms > 0 ?
		       za_io_now_ns() + (uint64_t)timeout_ms * 1000000ull :
		       0;
}

/* Wait for @events on @fd until @deadline (0: forever). */
static int wait_fd(int fd, short events, uint64_t deadline)
{
	struct pollfd pfd = { .fd = fd, .events = events };

	for (;;) {
		int ms = -1, n;

		if (deadline) {
			uint64_t now = za_io_now_ns();

			if (now >= deadline)
				return -ETIMEDOUT;
			ms = (int)((deadline - now + 999999) / 1000000);
		}
		n = poll(&pfd, 1, ms);
		if (n > 0)
			return 0;
		if (n == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

int za_rpc_connect(const char *path, int timeout_ms, int *fd)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { 0 };
	int s, ret;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	/* A blocking AF_UNIX connect waits for backlog room up to the send
	 * timeout, which a non-blocking one cannot (it fails with EAGAIN). */
	if (timeout_ms > 0) {
		tv.tv_sec = timeout_ms / 1000;
		tv.tv_usec = (timeout_ms % 1000) * 1000;
		setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	}
	do {
		ret = connect(s, (struct sockaddr *)&sa, sizeof(sa));
	} while (ret < 0 && errno == EINTR);
	if (ret < 0) {
		ret = errno == EAGAIN || errno == EINPROGRESS ? -ETIMEDOUT :
								-errno;
		close(s);
		return ret;
	}
	if (fcntl(s, F_SETFL, fcntl(s, F_GETFL) | O_NONBLOCK) < 0) {
		ret = -errno;
		close(s);
		return ret;
	}
	*fd = s;
	return 0;
}

int za_rpc_send_request(int fd, const Zarray__Request *req, int timeout_ms)
{
	uint64_t deadline = deadline_of(timeout_ms);
	size_t len, off = 0;
	uint8_t *buf;
	int ret;

	ret = za_rpc_encode_request(req, &buf, &len);
	if (ret < 0)
		return ret;
	while (off < len) {
		ssize_t n = send(fd, buf + off, len - off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n >= 0) {
			off += (size_t)n;
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK) {
			ret = -errno;
			break;
		}
		ret = wait_fd(fd, POLLOUT, deadline);
		if (ret < 0)
			break;
	}
	free(buf);
	return off == len ? 0 : ret;
}

static int recv_full(int fd, uint8_t *buf, size_t len, uint64_t deadline)
{
	size_t off = 0;
	int ret;

	while (off < len) {
		ssize_t n = recv(fd, buf + off, len - off, MSG_DONTWAIT);

		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n == 0)
			return -ECONNRESET;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		ret = wait_fd(fd, POLLIN, deadline);
		if (ret < 0)
			return ret;
	}
	return 0;
}

int za_rpc_recv_response(int fd, int timeout_ms, Zarray__Response **out)
{
	uint64_t deadline = deadline_of(timeout_ms);
	uint8_t hdr[ZA_RPC_HDR_BYTES], *body;
	uint32_t len;
	int ret;

	ret = recv_full(fd, hdr, sizeof(hdr), deadline);
	if (ret < 0)
		return ret;
	ret = za_rpc_frame_len(hdr, &len);
	if (ret < 0)
		return ret;
	body = malloc(len);
	if (!body)
		return -ENOMEM;
	ret = recv_full(fd, body, len, deadline);
	if (ret == 0)
		ret = za_rpc_decode_response(body, len, out);
	free(body);
	return ret;
}
