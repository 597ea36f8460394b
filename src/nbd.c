// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * nbd.c - the NBD server: listeners, the fixed newstyle handshake, and the
 * transmission phase with several commands in flight per connection.
 *
 * Each connection reads through a small input buffer into a state machine
 * (client flags, option header, option body, request header, write
 * payload, discarded payload); large payloads are read straight into the
 * request's buffer. From a connection's first large WRITE on, its input
 * goes through a receive ring (nbd-rx.c), filled by the loop as it reads
 * or, with rx_thread, by a thread reading ahead, and the loop takes it
 * from there in the same state machine; a WRITE payload that the ring
 * holds whole goes to the backend in place when the backend says it
 * takes payloads at once (write_copies), else into a request buffer.
 * Every length a client sends is checked before anything is allocated
 * for it: option bodies are capped at ZA_NBD_MAX_OPT_BYTES, export names
 * at ZA_NBD_MAX_NAME_BYTES, payloads at the maximum payload. Refused
 * WRITEs within the payload limit have their payload read and dropped so
 * that the connection stays in step; a WRITE above the limit is a hard
 * disconnect, as the protocol allows.
 *
 * Replies go out in completion order. A request counts against its
 * connection's in-flight caps from its header until its reply has been
 * written, so a client that does not read replies stops being read from
 * instead of growing our memory. Replies completed during one loop
 * iteration are written together (one sendmsg) from an ev_prepare
 * watcher, just before the loop would block.
 *
 * A connection whose socket is closed stays allocated while the backend
 * still holds its requests, and the server while any connection does, so
 * a completion that arrives after the client (or the server's owner) left
 * finds valid memory and is dropped.
 *
 * It does not implement structured replies, block status, TLS or
 * resizing, and it has no notion of what the backend stores.
 */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <ev.h>

#include "io.h"
#include "log.h"
#include "nbd-rx.h"
#include "nbd.h"

/* ---- the wire (all integers big-endian) ---- */

#define NBD_MAGIC 0x4e42444d41474943ull /* "NBDMAGIC" */
#define NBD_IHAVEOPT 0x49484156454f5054ull /* "IHAVEOPT" */
#define NBD_OPT_REPLY_MAGIC 0x0003e889045565a9ull
#define NBD_REQUEST_MAGIC 0x25609513u
#define NBD_SIMPLE_REPLY_MAGIC 0x67446698u

#define NBD_FLAG_FIXED_NEWSTYLE (1u << 0)
#define NBD_FLAG_NO_ZEROES (1u << 1)
#define NBD_FLAG_C_FIXED_NEWSTYLE (1u << 0)
#define NBD_FLAG_C_NO_ZEROES (1u << 1)

#define NBD_FLAG_HAS_FLAGS (1u << 0)
#define NBD_FLAG_SEND_FLUSH (1u << 2)
#define NBD_FLAG_SEND_FUA (1u << 3)
#define NBD_FLAG_SEND_TRIM (1u << 5)
#define NBD_FLAG_SEND_WRITE_ZEROES (1u << 6)
#define NBD_FLAG_CAN_MULTI_CONN (1u << 8)
#define NBD_TRANSMISSION_FLAGS                                          \
	(NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA | \
	 NBD_FLAG_SEND_TRIM | NBD_FLAG_SEND_WRITE_ZEROES |              \
	 NBD_FLAG_CAN_MULTI_CONN)

#define NBD_OPT_EXPORT_NAME 1u
#define NBD_OPT_ABORT 2u
#define NBD_OPT_LIST 3u
#define NBD_OPT_INFO 6u
#define NBD_OPT_GO 7u

#define NBD_REP_ACK 1u
#define NBD_REP_SERVER 2u
#define NBD_REP_INFO 3u
#define NBD_REP_ERR_UNSUP 0x80000001u
#define NBD_REP_ERR_INVALID 0x80000003u
#define NBD_REP_ERR_UNKNOWN 0x80000006u
#define NBD_REP_ERR_SHUTDOWN 0x80000007u

#define NBD_INFO_EXPORT 0u
#define NBD_INFO_NAME 1u
#define NBD_INFO_DESCRIPTION 2u
#define NBD_INFO_BLOCK_SIZE 3u

#define NBD_CMD_FLAG_FUA (1u << 0)
#define NBD_CMD_FLAG_NO_HOLE (1u << 1)

#define NBD_EPERM 1u
#define NBD_EIO 5u
#define NBD_ENOMEM 12u
#define NBD_EINVAL 22u
#define NBD_ENOSPC 28u
#define NBD_EOVERFLOW 75u
#define NBD_ESHUTDOWN 108u

#define NBD_GREETING_BYTES 18
#define NBD_OPT_HDR_BYTES 16
#define NBD_OPT_REPLY_HDR_BYTES 20
#define NBD_REQ_HDR_BYTES 28
#define NBD_REPLY_BYTES 16

/* ---- limits of this implementation ---- */

#define NBD_IBUF_BYTES (64u << 10)
/* What a connection's receive ring holds ahead of the loop, payloads
 * kept for their stripes included; WRITE payloads up to 2 MiB are used
 * in place from the ring (larger ones go straight to their buffers). */
#define NBD_RX_RING_BYTES (16u << 20)
#define NBD_RX_RING_PAYLOAD (2u << 20)
/* Options per connection: haggling cannot go on forever. */
#define NBD_MAX_OPTS 1024u
/* Socket reads per wake-up, so that one busy client cannot starve others. */
#define NBD_READ_BUDGET 16
#define NBD_ACCEPT_BATCH 32
#define NBD_IOV 64
/* Freed requests kept for reuse, the largest buffer one keeps, and the
 * most buffer memory they keep in all. */
#define NBD_FREE_REQS 256u
#define NBD_KEEP_BUF_BYTES (1u << 20)
#define NBD_KEEP_ALL_BYTES (32u << 20)

static inline uint16_t get_be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t get_be64(const uint8_t *p)
{
	return (uint64_t)get_be32(p) << 32 | get_be32(p + 4);
}

static inline void put_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline void put_be64(uint8_t *p, uint64_t v)
{
	put_be32(p, (uint32_t)(v >> 32));
	put_be32(p + 4, (uint32_t)v);
}

/* ---- state ---- */

enum rd_state {
	RD_CLIENT_FLAGS,
	RD_OPT_HDR,
	RD_OPT_DATA,
	RD_REQ_HDR,
	RD_PAYLOAD,
	RD_DISCARD,
	RD_RING, /* a WRITE payload, to be used in place in the rx ring */
	RD_NONE, /* nothing more is read */
};

enum req_state {
	REQ_READING, /* its WRITE payload is being read or discarded */
	REQ_BACKEND,
	REQ_QUEUED, /* its reply waits in the output queue */
};

struct za_nbd_req {
	struct za_nbd_conn *c;
	struct za_nbd_req *next; /* output queue, free list */
	uint8_t cookie[8]; /* echoed as sent */
	uint64_t off;
	uint32_t len;
	uint16_t type, flags;
	uint32_t wire_err;
	enum req_state state;
	bool flushed; /* TRIM + FUA: the flush after the trim was issued */
	uint64_t acct_bytes; /* counted against the in-flight cap */
	uint8_t rep[NBD_REPLY_BYTES];
	void *buf;
	size_t buf_cap;
	/* the backend's area follows at REQ_PRIV_OFF */
};

#define REQ_PRIV_OFF ((sizeof(struct za_nbd_req) + 15) & ~(size_t)15)

struct za_nbd_conn {
	struct za_nbd_server *s;
	struct za_nbd_conn *prev, *next; /* open connections */
	struct za_nbd_conn *dirty_next; /* output to flush before polling */
	bool dirty;
	unsigned id;
	int fd;
	unsigned refs; /* 1 while open + 1 per request + callers' */
	bool closed;
	bool fixed, no_zeroes, transmission;
	bool draining; /* DISC, EOF or ABORT: close once replies are out */
	unsigned nr_opts;
	ev_io rw, ww;
	ev_timer hs_timer;

	/* input: from the socket, or from rx once transmission starts */
	struct za_nbd_rx *rx;
	bool rx_tried;
	/* During write() of a payload in the ring: its request, until the
	 * backend keeps the bytes (za_nbd_req_keep()). */
	struct za_nbd_req *ring_req;
	uint8_t *ibuf;
	size_t ipos, ilen;
	enum rd_state rd;
	uint8_t *rd_dst; /* NULL: discard */
	size_t rd_need, rd_have;
	uint8_t hdr[NBD_REQ_HDR_BYTES];
	uint32_t opt, opt_len;
	uint8_t *opt_buf;
	struct za_nbd_req *cur; /* WRITE whose payload is being read */

	/* output: handshake bytes first, then replies in completion order */
	uint8_t *hbuf;
	size_t hpos, hlen, hcap;
	struct za_nbd_req *out_head, *out_tail;
	size_t out_off; /* bytes of out_head already sent */

	uint64_t size; /* as advertised to this client */
	uint64_t inflight_bytes;
	unsigned nr_reqs;
};

struct nbd_listener {
	struct za_nbd_server *s;
	ev_io w;
	int fd;
	char *path; /* a Unix socket we created, unlinked at the end */
};

struct za_nbd_server {
	struct za_io *io;
	struct ev_loop *loop;
	const struct za_nbd_backend_ops *ops;
	void *be;
	char *name;
	size_t name_len;
	char *desc;
	unsigned max_conns;
	double hs_timeout_s;
	uint32_t pref_block, max_payload;
	uint64_t max_inflight_bytes;
	unsigned max_inflight_reqs;
	uint32_t rx_min_payload;
	bool rx_thread;
	size_t priv_bytes;

	struct nbd_listener **ls;
	unsigned nr_ls;
	ev_timer accept_retry;
	ev_prepare prep;
	struct za_nbd_conn *dirty_head;

	struct za_nbd_conn *conns;
	unsigned nr_open, next_id;
	unsigned refs; /* 1 for the owner + 1 per allocated connection */
	bool shutting_down, freeing, cap_logged;
	struct za_nbd_req *free_reqs;
	unsigned nr_free_reqs;
	size_t free_buf_bytes;
	struct za_nbd_stats st;
};

static void conn_close(struct za_nbd_conn *c);
static bool conn_ring_ok(const struct za_nbd_conn *c, uint32_t len);
static bool conn_ibuf_ok(const struct za_nbd_conn *c, uint32_t len);
static void got_ibuf_payload(struct za_nbd_conn *c);
static void conn_update(struct za_nbd_conn *c);
static void conn_kick(struct za_nbd_conn *c);
static void conn_write(struct za_nbd_conn *c);

/* ---- small helpers ---- */

uint32_t za_nbd_errno_to_wire(int err)
{
	switch (err < 0 ? -err : err) {
	case 0:
		return 0;
	case EPERM:
	case EACCES:
	case EROFS:
		return NBD_EPERM;
	case ENOMEM:
		return NBD_ENOMEM;
	case EINVAL:
	case EOPNOTSUPP:
		return NBD_EINVAL;
	case ENOSPC:
	case EDQUOT:
	case EFBIG:
		return NBD_ENOSPC;
	case EOVERFLOW:
		return NBD_EOVERFLOW;
	case ESHUTDOWN:
		return NBD_ESHUTDOWN;
	default:
		return NBD_EIO;
	}
}

/* A client-supplied name, printable and bounded, for a log line. */
static const char *name_for_log(const uint8_t *name, size_t len, char *out,
				size_t out_bytes)
{
	size_t i, n = 0;

	for (i = 0; i < len && n + 4 < out_bytes; i++)
		out[n++] = name[i] >= 0x20 && name[i] < 0x7f ? (char)name[i] :
							       '?';
	if (i < len && n + 4 <= out_bytes) {
		memcpy(out + n, "...", 3);
		n += 3;
	}
	out[n] = '\0';
	return out;
}

static void __attribute__((format(printf, 2, 3)))
conn_proto_err(struct za_nbd_conn *c, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	za_log_warn("nbd %s: connection %u: %s; closing it", c->s->name, c->id,
		    msg);
	c->s->st.protocol_errors++;
	conn_close(c);
}

static uint64_t export_size(struct za_nbd_server *s)
{
	return s->ops->size(s->be) & ~(uint64_t)(ZA_NBD_MIN_BLOCK_BYTES - 1);
}

static bool name_matches(const struct za_nbd_server *s, const uint8_t *name,
			 size_t len)
{
	return len == 0 ||
	       (len == s->name_len && memcmp(name, s->name, len) == 0);
}

/* ---- references ---- */

static void server_put(struct za_nbd_server *s)
{
	struct za_nbd_req *r;

	assert(s->refs > 0);
	if (--s->refs)
		return;
	while ((r = s->free_reqs)) {
		s->free_reqs = r->next;
		free(r->buf);
		free(r);
	}
	free(s->ls);
	free(s->name);
	free(s->desc);
	free(s);
}

static void conn_get(struct za_nbd_conn *c)
{
	c->refs++;
}

static void conn_put(struct za_nbd_conn *c)
{
	struct za_nbd_server *s = c->s;

	assert(c->refs > 0);
	if (--c->refs)
		return;
	assert(c->closed && !c->nr_reqs && !c->dirty);
	free(c->ibuf);
	free(c->hbuf);
	free(c->opt_buf);
	free(c);
	server_put(s);
}

/* ---- requests ---- */

static struct za_nbd_req *req_new(struct za_nbd_conn *c)
{
	struct za_nbd_server *s = c->s;
	struct za_nbd_req *r = s->free_reqs;
	void *buf = NULL;
	size_t cap = 0;

	if (r) {
		s->free_reqs = r->next;
		s->nr_free_reqs--;
		buf = r->buf;
		cap = r->buf_cap;
		s->free_buf_bytes -= cap;
	} else {
		r = malloc(REQ_PRIV_OFF + s->priv_bytes);
		if (!r)
			return NULL;
	}
	memset(r, 0, sizeof(*r));
	r->buf = buf;
	r->buf_cap = cap;
	r->c = c;
	r->state = REQ_READING;
	c->nr_reqs++;
	s->st.inflight++;
	conn_get(c);
	return r;
}

/* Give @r a buffer of at least @len bytes, 4096-aligned. */
static int req_buf(struct za_nbd_req *r, uint32_t len)
{
	void *p;

	if (r->buf_cap >= len)
		return 0;
	free(r->buf);
	r->buf = NULL;
	r->buf_cap = 0;
	if (posix_memalign(&p, 4096, len))
		return -ENOMEM;
	r->buf = p;
	r->buf_cap = len;
	return 0;
}

/* Forget @r (its reply was sent, or nobody is left to send it to). */
static void req_release(struct za_nbd_req *r)
{
	struct za_nbd_conn *c = r->c;
	struct za_nbd_server *s = c->s;

	c->nr_reqs--;
	c->inflight_bytes -= r->acct_bytes;
	s->st.inflight--;
	if (s->freeing || s->nr_free_reqs >= NBD_FREE_REQS) {
		free(r->buf);
		free(r);
	} else {
		if (r->buf_cap > NBD_KEEP_BUF_BYTES ||
		    s->free_buf_bytes + r->buf_cap > NBD_KEEP_ALL_BYTES) {
			free(r->buf);
			r->buf = NULL;
			r->buf_cap = 0;
		}
		s->free_buf_bytes += r->buf_cap;
		r->next = s->free_reqs;
		s->free_reqs = r;
		s->nr_free_reqs++;
	}
	conn_put(c);
}

static bool req_has_data(const struct za_nbd_req *r)
{
	return r->type == ZA_NBD_CMD_READ && !r->wire_err && r->len;
}

/* Queue @r's reply. */
static void req_reply(struct za_nbd_req *r, uint32_t wire_err)
{
	struct za_nbd_conn *c = r->c;

	r->wire_err = wire_err;
	if (wire_err)
		c->s->st.errors++;
	put_be32(r->rep, NBD_SIMPLE_REPLY_MAGIC);
	put_be32(r->rep + 4, wire_err);
	memcpy(r->rep + 8, r->cookie, 8);
	r->state = REQ_QUEUED;
	r->next = NULL;
	if (c->out_tail)
		c->out_tail->next = r;
	else
		c->out_head = r;
	c->out_tail = r;
	conn_kick(c);
}

void *za_nbd_req_priv(struct za_nbd_req *r)
{
	return (uint8_t *)r + REQ_PRIV_OFF;
}

static void req_dispatch(struct za_nbd_req *r)
{
	struct za_nbd_server *s = r->c->s;
	bool fua = r->flags & NBD_CMD_FLAG_FUA;

	r->state = REQ_BACKEND;
	switch (r->type) {
	case ZA_NBD_CMD_READ:
		s->ops->read(s->be, r, r->off, r->len, r->buf);
		break;
	case ZA_NBD_CMD_WRITE:
		s->ops->write(s->be, r, r->off, r->len, r->buf, fua);
		break;
	case ZA_NBD_CMD_FLUSH:
		s->ops->flush(s->be, r);
		break;
	case ZA_NBD_CMD_TRIM:
		s->ops->trim(s->be, r, r->off, r->len);
		break;
	case ZA_NBD_CMD_WRITE_ZEROES:
		s->ops->write_zeroes(s->be, r, r->off, r->len, fua);
		break;
	default:
		assert(0 && "dispatch of an unchecked command");
	}
}

/* A WRITE whose payload the backend takes at once (write_copies()) from
 * @p - the ring or the input buffer - instead of r->buf. */
static void req_write_from(struct za_nbd_req *r, const void *p)
{
	struct za_nbd_server *s = r->c->s;

	r->state = REQ_BACKEND;
	s->ops->write(s->be, r, r->off, r->len, p, r->flags & NBD_CMD_FLAG_FUA);
}

void za_nbd_complete(struct za_nbd_req *r, int err)
{
	struct za_nbd_conn *c = r->c;
	struct za_nbd_server *s = c->s;

	assert(r->state == REQ_BACKEND);
	/* TRIM has no FUA in the ops table: a flush after it gives it. */
	if (!err && r->type == ZA_NBD_CMD_TRIM &&
	    (r->flags & NBD_CMD_FLAG_FUA) && !r->flushed && !c->closed) {
		r->flushed = true;
		s->ops->flush(s->be, r);
		return;
	}
	if (!err) {
		switch (r->type) {
		case ZA_NBD_CMD_READ:
			s->st.read_bytes += r->len;
			break;
		case ZA_NBD_CMD_WRITE:
			s->st.write_bytes += r->len;
			break;
		case ZA_NBD_CMD_TRIM:
			s->st.trim_bytes += r->len;
			break;
		case ZA_NBD_CMD_WRITE_ZEROES:
			s->st.zero_bytes += r->len;
			break;
		}
	}
	if (c->closed) {
		req_release(r);
		return;
	}
	req_reply(r, za_nbd_errno_to_wire(err));
}

/* ---- handshake output ---- */

static int hbuf_reserve(struct za_nbd_conn *c, size_t more)
{
	size_t cap = c->hcap ? c->hcap : 256;
	uint8_t *p;

	if (c->hlen + more <= c->hcap)
		return 0;
	while (cap < c->hlen + more)
		cap *= 2;
	p = realloc(c->hbuf, cap);
	if (!p)
		return -ENOMEM;
	c->hbuf = p;
	c->hcap = cap;
	return 0;
}

/* Append raw handshake bytes; on failure the connection is closed. */
static uint8_t *hbuf_append(struct za_nbd_conn *c, size_t len)
{
	uint8_t *p;

	if (hbuf_reserve(c, len) < 0) {
		za_log_err("nbd %s: connection %u: out of memory; closing it",
			   c->s->name, c->id);
		conn_close(c);
		return NULL;
	}
	p = c->hbuf + c->hlen;
	c->hlen += len;
	conn_kick(c);
	return p;
}

/* An option reply: header + @len bytes of data (copied from @data if set). */
static uint8_t *opt_reply(struct za_nbd_conn *c, uint32_t type,
			  const void *data, uint32_t len)
{
	uint8_t *p = hbuf_append(c, NBD_OPT_REPLY_HDR_BYTES + len);

	if (!p)
		return NULL;
	put_be64(p, NBD_OPT_REPLY_MAGIC);
	put_be32(p + 8, c->opt);
	put_be32(p + 12, type);
	put_be32(p + 16, len);
	if (data && len)
		memcpy(p + NBD_OPT_REPLY_HDR_BYTES, data, len);
	return p + NBD_OPT_REPLY_HDR_BYTES;
}

/* An error reply with a message a human can read (nbdinfo prints it). */
static void opt_error(struct za_nbd_conn *c, uint32_t type, const char *msg)
{
	opt_reply(c, type, msg, (uint32_t)strlen(msg));
}

/* ---- input state machine ---- */

static void conn_expect(struct za_nbd_conn *c, enum rd_state st, void *dst,
			size_t need)
{
	c->rd = st;
	c->rd_dst = dst;
	c->rd_need = need;
	c->rd_have = 0;
}

static bool conn_has_output(const struct za_nbd_conn *c)
{
	return c->hpos < c->hlen || c->out_head;
}

static bool conn_want_read(const struct za_nbd_conn *c)
{
	const struct za_nbd_server *s = c->s;

	if (c->closed || c->draining || c->rd == RD_NONE)
		return false;
	/* One option at a time: its replies go out before the next is read. */
	if (!c->transmission && c->hpos < c->hlen)
		return false;
	if (c->rd == RD_REQ_HDR &&
	    (c->inflight_bytes >= s->max_inflight_bytes ||
	     c->nr_reqs >= s->max_inflight_reqs))
		return false;
	return true;
}

static void conn_maybe_finish(struct za_nbd_conn *c)
{
	if (!c->closed && c->draining && !c->nr_reqs && !conn_has_output(c))
		conn_close(c);
}

static void conn_start_transmission(struct za_nbd_conn *c, uint64_t size)
{
	ev_timer_stop(c->s->loop, &c->hs_timer);
	c->transmission = true;
	c->size = size;
	c->s->st.handshakes++;
	conn_expect(c, RD_REQ_HDR, c->hdr, NBD_REQ_HDR_BYTES);
}

static void conn_rx_wake(void *arg);

/*
 * A connection's first large WRITE gives it a receive ring, filled by the
 * loop or (rx_thread) by a thread reading ahead; payloads are used and
 * kept in place there. Only then: with small requests a thread's
 * hand-offs cost more than its overlap gained (random 4 KiB writes:
 * 255-285 MB/s with one, 340-400 without), and a connection stuck in its
 * handshake or sending small requests costs no ring. The loop fills it
 * by default: on two cores 1 MiB writes ran 2-18% faster that way than
 * with the thread (docs/design.md 14.3; bench/results/notes.md, P1).
 * Without a ring (no memory, or pthread_create failed) the loop goes on reading the socket itself.
 */
static void conn_rx_maybe_start(struct za_nbd_conn *c, uint32_t len)
{
	int ret;

	if (c->rx || c->rx_tried || len < c->s->rx_min_payload)
		return;
	c->rx_tried = true;
	ret = za_nbd_rx_start(c->s->loop, c->fd, NBD_RX_RING_BYTES,
			      !c->s->rx_thread, conn_rx_wake, c, &c->rx);
	if (ret == 0) {
		za_log_debug("nbd %s: connection %u: receive ring, filled by "
			     "%s",
			     c->s->name, c->id,
			     c->s->rx_thread ? "a thread" : "the loop");
		c->s->st.rx_rings++;
		c->s->st.rx_rings_reused += za_nbd_rx_ring_reused(c->rx);
	}
	if (ret < 0) {
		c->rx = NULL;
		za_log_warn("nbd %s: connection %u: no receive ring (%s); "
			    "reading on the loop",
			    c->s->name, c->id, strerror(-ret));
	}
}

static void opt_export_name(struct za_nbd_conn *c)
{
	struct za_nbd_server *s = c->s;
	uint64_t size;
	uint8_t *p;
	char log_name[80];

	/* This option cannot fail politely: the only refusal is a close. */
	if (s->shutting_down) {
		conn_close(c);
		return;
	}
	if (!name_matches(s, c->opt_buf, c->opt_len)) {
		conn_proto_err(c, "OPT_EXPORT_NAME: no export named '%s'",
			       name_for_log(c->opt_buf, c->opt_len, log_name,
					    sizeof(log_name)));
		return;
	}
	size = export_size(s);
	p = hbuf_append(c, 10 + (c->no_zeroes ? 0 : 124));
	if (!p)
		return;
	put_be64(p, size);
	put_be16(p + 8, NBD_TRANSMISSION_FLAGS);
	if (!c->no_zeroes)
		memset(p + 10, 0, 124);
	conn_start_transmission(c, size);
}

/* OPT_INFO and OPT_GO: same request, same replies; GO then transmits. */
static void opt_info_go(struct za_nbd_conn *c)
{
	struct za_nbd_server *s = c->s;
	const uint8_t *d = c->opt_buf;
	uint32_t len = c->opt_len, name_len, i;
	uint16_t nr_info;
	bool want_name = false, want_desc = false;
	char log_name[80];
	uint64_t size;
	uint8_t *p;

	if (len < 6) {
		opt_error(c, NBD_REP_ERR_INVALID, "option data too short");
		return;
	}
	name_len = get_be32(d);
	if (name_len > len - 6) {
		opt_error(c, NBD_REP_ERR_INVALID,
			  "export name longer than the option");
		return;
	}
	if (name_len > ZA_NBD_MAX_NAME_BYTES) {
		opt_error(c, NBD_REP_ERR_INVALID,
			  "export name longer than 4096 bytes");
		return;
	}
	nr_info = get_be16(d + 4 + name_len);
	if ((uint64_t)len != 6ull + name_len + 2ull * nr_info) {
		opt_error(c, NBD_REP_ERR_INVALID,
			  "information request count does not match the "
			  "option length");
		return;
	}
	for (i = 0; i < nr_info; i++) {
		uint16_t t = get_be16(d + 6 + name_len + 2 * i);

		want_name |= t == NBD_INFO_NAME;
		want_desc |= t == NBD_INFO_DESCRIPTION;
	}
	if (!name_matches(s, d + 4, name_len)) {
		za_log_info("nbd %s: connection %u: asked for unknown export "
			    "'%s'",
			    s->name, c->id,
			    name_for_log(d + 4, name_len, log_name,
					 sizeof(log_name)));
		opt_error(c, NBD_REP_ERR_UNKNOWN, "no such export");
		return;
	}

	size = export_size(s);
	p = opt_reply(c, NBD_REP_INFO, NULL, 12);
	if (!p)
		return;
	put_be16(p, NBD_INFO_EXPORT);
	put_be64(p + 2, size);
	put_be16(p + 10, NBD_TRANSMISSION_FLAGS);
	if (want_name) {
		p = opt_reply(c, NBD_REP_INFO, NULL, 2 + (uint32_t)s->name_len);
		if (!p)
			return;
		put_be16(p, NBD_INFO_NAME);
		memcpy(p + 2, s->name, s->name_len);
	}
	if (want_desc && s->desc) {
		uint32_t dlen = (uint32_t)strlen(s->desc);

		p = opt_reply(c, NBD_REP_INFO, NULL, 2 + dlen);
		if (!p)
			return;
		put_be16(p, NBD_INFO_DESCRIPTION);
		memcpy(p + 2, s->desc, dlen);
	}
	/*
	 * Always, requested or not: the minimum of 4096 is not the
	 * protocol's default, and clients that do not ask get EINVAL for
	 * unaligned requests rather than a refusal to connect.
	 */
	p = opt_reply(c, NBD_REP_INFO, NULL, 14);
	if (!p)
		return;
	put_be16(p, NBD_INFO_BLOCK_SIZE);
	put_be32(p + 2, ZA_NBD_MIN_BLOCK_BYTES);
	put_be32(p + 6, s->pref_block);
	put_be32(p + 10, s->max_payload);
	if (!opt_reply(c, NBD_REP_ACK, NULL, 0))
		return;
	if (c->opt == NBD_OPT_GO)
		conn_start_transmission(c, size);
}

static void opt_list(struct za_nbd_conn *c)
{
	struct za_nbd_server *s = c->s;
	size_t dlen = s->desc ? strlen(s->desc) : 0;
	uint8_t *p;

	if (c->opt_len) {
		opt_error(c, NBD_REP_ERR_INVALID, "OPT_LIST takes no data");
		return;
	}
	p = opt_reply(c, NBD_REP_SERVER, NULL,
		      (uint32_t)(4 + s->name_len + dlen));
	if (!p)
		return;
	put_be32(p, (uint32_t)s->name_len);
	memcpy(p + 4, s->name, s->name_len);
	if (dlen)
		memcpy(p + 4 + s->name_len, s->desc, dlen);
	opt_reply(c, NBD_REP_ACK, NULL, 0);
}

static void conn_option(struct za_nbd_conn *c)
{
	if (c->opt == NBD_OPT_EXPORT_NAME) {
		opt_export_name(c);
		return;
	}
	if (c->opt == NBD_OPT_ABORT) {
		/* Acknowledge, then close once that is out. */
		opt_reply(c, NBD_REP_ACK, NULL, 0);
		c->draining = true;
		c->rd = RD_NONE;
		return;
	}
	if (c->s->shutting_down) {
		opt_error(c, NBD_REP_ERR_SHUTDOWN, "server shutting down");
		return;
	}
	switch (c->opt) {
	case NBD_OPT_INFO:
	case NBD_OPT_GO:
		opt_info_go(c);
		break;
	case NBD_OPT_LIST:
		opt_list(c);
		break;
	default:
		/* STARTTLS, STRUCTURED_REPLY, meta contexts, ...: simple only. */
		opt_error(c, NBD_REP_ERR_UNSUP, "option not supported");
		break;
	}
}

static void got_client_flags(struct za_nbd_conn *c)
{
	uint32_t f = get_be32(c->hdr);

	if (f & ~(NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES)) {
		conn_proto_err(c, "unknown client flags %#x", f);
		return;
	}
	c->fixed = f & NBD_FLAG_C_FIXED_NEWSTYLE;
	c->no_zeroes = f & NBD_FLAG_C_NO_ZEROES;
	conn_expect(c, RD_OPT_HDR, c->hdr, NBD_OPT_HDR_BYTES);
}

static void got_opt_hdr(struct za_nbd_conn *c)
{
	uint64_t magic = get_be64(c->hdr);
	uint32_t opt = get_be32(c->hdr + 8), len = get_be32(c->hdr + 12);
	bool keep;

	if (magic != NBD_IHAVEOPT) {
		conn_proto_err(c,
			       "bad option magic %#llx (a command before "
			       "the handshake ended?)",
			       (unsigned long long)magic);
		return;
	}
	if (++c->nr_opts > NBD_MAX_OPTS) {
		conn_proto_err(c, "more than %u options", NBD_MAX_OPTS);
		return;
	}
	/* Checked before a byte is allocated for it. */
	if (len > ZA_NBD_MAX_OPT_BYTES) {
		conn_proto_err(c, "option %u: length %u above the %u-byte cap",
			       opt, len, ZA_NBD_MAX_OPT_BYTES);
		return;
	}
	if (!c->fixed && opt != NBD_OPT_EXPORT_NAME) {
		conn_proto_err(c,
			       "option %u from a client without fixed "
			       "newstyle",
			       opt);
		return;
	}
	if (opt == NBD_OPT_EXPORT_NAME && len > ZA_NBD_MAX_NAME_BYTES) {
		conn_proto_err(c, "OPT_EXPORT_NAME: name of %u bytes", len);
		return;
	}
	c->opt = opt;
	c->opt_len = len;
	/* Only options whose data we parse get a buffer; the rest is skipped. */
	keep = opt == NBD_OPT_EXPORT_NAME || opt == NBD_OPT_INFO ||
	       opt == NBD_OPT_GO;
	if (keep && len) {
		c->opt_buf = malloc(len);
		if (!c->opt_buf) {
			za_log_err("nbd %s: connection %u: out of memory; "
				   "closing it",
				   c->s->name, c->id);
			conn_close(c);
			return;
		}
	}
	conn_expect(c, RD_OPT_DATA, c->opt_buf, len);
}

static void got_opt_data(struct za_nbd_conn *c)
{
	conn_option(c);
	free(c->opt_buf);
	c->opt_buf = NULL;
	if (!c->closed && !c->transmission && c->rd == RD_OPT_DATA)
		conn_expect(c, RD_OPT_HDR, c->hdr, NBD_OPT_HDR_BYTES);
}

/* The NBD error for a request, or 0 if the backend may see it. */
static uint32_t req_check(const struct za_nbd_conn *c, uint16_t type,
			  uint16_t flags, uint64_t off, uint32_t len)
{
	const struct za_nbd_server *s = c->s;
	uint16_t allowed = NBD_CMD_FLAG_FUA; /* valid on every command */

	switch (type) {
	case ZA_NBD_CMD_READ:
	case ZA_NBD_CMD_WRITE:
	case ZA_NBD_CMD_FLUSH:
	case ZA_NBD_CMD_TRIM:
		break;
	case ZA_NBD_CMD_WRITE_ZEROES:
		allowed |= NBD_CMD_FLAG_NO_HOLE;
		break;
	default:
		return NBD_EINVAL;
	}
	if (s->shutting_down)
		return NBD_ESHUTDOWN;
	if (flags & ~allowed)
		return NBD_EINVAL;
	/* The offset and length of a FLUSH are reserved: ignored. */
	if (type == ZA_NBD_CMD_FLUSH)
		return 0;
	if (type == ZA_NBD_CMD_READ && len > s->max_payload)
		return NBD_EINVAL;
	if ((off | len) & (ZA_NBD_MIN_BLOCK_BYTES - 1))
		return NBD_EINVAL;
	/* Cannot overflow, unlike off + len > size. */
	if (len > c->size || off > c->size - len)
		return type == ZA_NBD_CMD_WRITE ||
				       type == ZA_NBD_CMD_WRITE_ZEROES ?
			       NBD_ENOSPC :
			       NBD_EINVAL;
	return 0;
}

/* No buffer for a request's payload: refused, the connection goes on. */
static uint32_t req_nomem(struct za_nbd_conn *c, uint32_t len)
{
	za_log_err("nbd %s: connection %u: out of memory for a %u-byte "
		   "payload; answering ENOMEM",
		   c->s->name, c->id, len);
	return NBD_ENOMEM;
}

static void got_req_hdr(struct za_nbd_conn *c)
{
	struct za_nbd_server *s = c->s;
	uint32_t magic = get_be32(c->hdr), len = get_be32(c->hdr + 24);
	uint16_t flags = get_be16(c->hdr + 4), type = get_be16(c->hdr + 6);
	uint64_t off = get_be64(c->hdr + 16);
	struct za_nbd_req *r;
	uint32_t err;

	if (magic != NBD_REQUEST_MAGIC) {
		conn_proto_err(c, "bad request magic %#x", magic);
		return;
	}
	s->st.cmds[type < ZA_NBD_CMD_OTHER && type != 5 ? type :
							  ZA_NBD_CMD_OTHER]++;
	if (type == ZA_NBD_CMD_DISC) {
		/* Finish what is in flight, then close; no reply. */
		c->draining = true;
		c->rd = RD_NONE;
		conn_maybe_finish(c);
		return;
	}
	if (type == ZA_NBD_CMD_WRITE && len > s->max_payload) {
		conn_proto_err(c,
			       "WRITE of %u bytes above the %u-byte payload "
			       "limit",
			       len, s->max_payload);
		return;
	}
	r = req_new(c);
	if (!r)
		goto err_nomem;
	memcpy(r->cookie, c->hdr + 8, 8);
	r->type = type;
	r->flags = flags;
	r->off = off;
	r->len = len;
	err = req_check(c, type, flags, off, len);
	if (type == ZA_NBD_CMD_READ || type == ZA_NBD_CMD_WRITE) {
		if (len <= s->max_payload) {
			r->acct_bytes = len;
			c->inflight_bytes += len;
		}
	}
	if (type == ZA_NBD_CMD_WRITE) {
		c->cur = r;
		if (!err && len && conn_ring_ok(c, len)) {
			conn_expect(c, RD_RING, NULL, len);
			return;
		}
		if (!err && len && conn_ibuf_ok(c, len)) {
			got_ibuf_payload(c);
			return;
		}
		if (!err && len && req_buf(r, len) < 0)
			err = req_nomem(c, len);
		if (err || !len) {
			/* Keep in step with the client: drop the payload. */
			r->wire_err = err;
			conn_expect(c, RD_DISCARD, NULL, len);
			return;
		}
		conn_expect(c, RD_PAYLOAD, r->buf, len);
		conn_rx_maybe_start(c, len);
		return;
	}
	conn_expect(c, RD_REQ_HDR, c->hdr, NBD_REQ_HDR_BYTES);
	if (err) {
		req_reply(r, err);
		return;
	}
	/* Zero-length: the protocol leaves it unspecified; a no-op here. */
	if (!len && type != ZA_NBD_CMD_FLUSH) {
		req_reply(r, 0);
		return;
	}
	if (type == ZA_NBD_CMD_READ && req_buf(r, len) < 0) {
		req_reply(r, req_nomem(c, len));
		return;
	}
	req_dispatch(r);
	return;

err_nomem:
	za_log_err("nbd %s: connection %u: out of memory for a request; "
		   "closing it",
		   s->name, c->id);
	conn_close(c);
}

/*
 * Is @c's next WRITE payload of @len bytes in the input buffer whole, and
 * does the backend take payloads at once? Then it goes to the backend
 * from there, without a copy into a request buffer first: a 4 KiB
 * random write's payload nearly always arrives with its header.
 */
static bool conn_ibuf_ok(const struct za_nbd_conn *c, uint32_t len)
{
	return !c->rx && c->ilen - c->ipos >= len && c->s->ops->write_copies &&
	       c->s->ops->write_copies(c->s->be);
}

/* The current WRITE's payload is in the input buffer: write it from
 * there, and consume it. */
static void got_ibuf_payload(struct za_nbd_conn *c)
{
	struct za_nbd_req *r = c->cur;
	uint32_t len = r->len;

	c->cur = NULL;
	conn_expect(c, RD_REQ_HDR, c->hdr, NBD_REQ_HDR_BYTES);
	c->s->st.ibuf_in_place++;
	req_write_from(r, c->ibuf + c->ipos);
	/* write() may have closed the connection, and freed the buffer. */
	if (c->closed)
		return;
	c->ipos += len;
	if (c->ipos == c->ilen)
		c->ipos = c->ilen = 0;
}

/*
 * Can @c's next WRITE payload of @len bytes be used in place in the
 * receive ring? Only with a ring, nothing of it sits in the
 * input buffer, it fits, and the backend can take payloads that way.
 */
static bool conn_ring_ok(const struct za_nbd_conn *c, uint32_t len)
{
	return c->rx && c->ipos == c->ilen && len <= NBD_RX_RING_PAYLOAD &&
	       c->s->ops->write_copies;
}

/*
 * The whole payload of the current WRITE is in the ring at @p. If the
 * backend takes it now, it gets it in place and the ring's bytes are
 * consumed when write() returns; otherwise (it would hold the buffer:
 * say, writes stalled on space) the payload is copied into the
 * request's own buffer first, as on the other paths.
 */
static void got_ring_payload(struct za_nbd_conn *c, const void *p)
{
	struct za_nbd_server *s = c->s;
	struct za_nbd_req *r = c->cur;
	uint32_t len = r->len;

	c->cur = NULL;
	conn_expect(c, RD_REQ_HDR, c->hdr, NBD_REQ_HDR_BYTES);
	if (s->ops->write_copies(s->be)) {
		s->st.rx_in_place++;
		c->ring_req = r;
		req_write_from(r, p);
		/* Not kept: consumed now. write() may have closed the
		 * connection, and the ring. */
		if (c->ring_req == r) {
			c->ring_req = NULL;
			if (c->rx)
				za_nbd_rx_skip(c->rx, len);
		}
		return;
	}
	if (req_buf(r, len) < 0) {
		za_nbd_rx_skip(c->rx, len);
		req_reply(r, req_nomem(c, len));
		return;
	}
	memcpy(r->buf, p, len);
	za_nbd_rx_skip(c->rx, len);
	req_dispatch(r);
}

struct za_payload *za_nbd_req_keep(struct za_nbd_req *r)
{
	struct za_nbd_conn *c = r->c;
	struct za_payload *pl;

	if (c->ring_req != r || !c->rx)
		return NULL;
	/* Room stays for the largest payload peeked whole: the loop waits
	 * for one before it reads on, whatever is kept meanwhile. */
	pl = za_nbd_rx_keep(c->rx, r->len, NBD_RX_RING_PAYLOAD);
	if (pl) {
		c->ring_req = NULL;
		c->s->st.rx_kept++;
	}
	return pl;
}

/* A WRITE's payload is in (or was dropped): dispatch it or refuse it. */
static void got_payload(struct za_nbd_conn *c)
{
	struct za_nbd_req *r = c->cur;
	bool dropped = c->rd == RD_DISCARD;

	c->cur = NULL;
	conn_expect(c, RD_REQ_HDR, c->hdr, NBD_REQ_HDR_BYTES);
	if (dropped)
		req_reply(r, r->wire_err);
	else
		req_dispatch(r);
}

/* @c->rd_need bytes have arrived for the current state. */
static void conn_got(struct za_nbd_conn *c)
{
	switch (c->rd) {
	case RD_CLIENT_FLAGS:
		got_client_flags(c);
		break;
	case RD_OPT_HDR:
		got_opt_hdr(c);
		break;
	case RD_OPT_DATA:
		got_opt_data(c);
		break;
	case RD_REQ_HDR:
		got_req_hdr(c);
		break;
	case RD_PAYLOAD:
	case RD_DISCARD:
		got_payload(c);
		break;
	case RD_RING:
		assert(0 && "a ring payload is taken in place");
		break;
	case RD_NONE:
		assert(0 && "input in RD_NONE");
		break;
	}
}

/* Move buffered input into the current state; run it when complete. */
static void conn_consume(struct za_nbd_conn *c)
{
	size_t take = c->ilen - c->ipos;

	if (take > c->rd_need - c->rd_have)
		take = c->rd_need - c->rd_have;
	if (take) {
		if (c->rd_dst)
			memcpy(c->rd_dst + c->rd_have, c->ibuf + c->ipos, take);
		c->rd_have += take;
		c->ipos += take;
	}
	if (c->ipos == c->ilen)
		c->ipos = c->ilen = 0;
	if (c->rd_have == c->rd_need)
		conn_got(c);
}

static void conn_eof(struct za_nbd_conn *c)
{
	if (!c->transmission) {
		za_log_debug("nbd %s: connection %u: closed during the "
			     "handshake",
			     c->s->name, c->id);
		conn_close(c);
		return;
	}
	/* The client may still read replies to what it sent (half-close). */
	if (c->cur) {
		struct za_nbd_req *r = c->cur;

		c->cur = NULL;
		req_release(r);
	}
	c->draining = true;
	c->rd = RD_NONE;
	conn_maybe_finish(c);
}

/* recv() from the socket or the receive ring: bytes, 0 (EOF), -errno. */
static ssize_t conn_recv(struct za_nbd_conn *c, void *dst, size_t len,
			 bool direct)
{
	ssize_t n;

	if (c->rx)
		return za_nbd_rx_recv(c->rx, dst, len, direct);
	n = recv(c->fd, dst, len, 0);
	return n < 0 ? -errno : n;
}

static void conn_read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct za_nbd_conn *c = w->data;
	unsigned budget = NBD_READ_BUDGET;
	bool let_go = false;
	ssize_t n;

	(void)revents;
	conn_get(c);
	while (conn_want_read(c) && budget) {
		if (c->ipos < c->ilen || c->rd_have == c->rd_need) {
			conn_consume(c);
			continue;
		}
		budget--;
		if (c->rd == RD_RING) {
			const void *p;

			n = za_nbd_rx_peek(c->rx, c->rd_need, &p);
			if (n > 0) {
				got_ring_payload(c, p);
				continue;
			}
		} else if (c->rd_dst && (c->rx || c->rd_need - c->rd_have >=
							  NBD_IBUF_BYTES)) {
			/* A payload: straight into its buffer (the ring
			 * copies small ones there at no extra cost). */
			n = conn_recv(c, c->rd_dst + c->rd_have,
				      c->rd_need - c->rd_have, true);
			if (n > 0) {
				c->rd_have += (size_t)n;
				continue;
			}
		} else {
			n = conn_recv(c, c->ibuf, NBD_IBUF_BYTES, false);
			if (n > 0) {
				c->ipos = 0;
				c->ilen = (size_t)n;
				continue;
			}
		}
		if (n == 0) {
			conn_eof(c);
			break;
		}
		if (n == -EINTR)
			continue;
		if ((n == -EAGAIN || n == -EWOULDBLOCK) && c->rx &&
		    za_nbd_rx_pulls(c->rx) && !let_go &&
		    za_nbd_rx_starved(c->rx) && c->s->ops->let_go) {
			/* Kept payloads fill the ring: the open stripe lets
			 * go of its own; submitted ones wake us when done. */
			let_go = true;
			c->s->ops->let_go(c->s->be);
			continue;
		}
		if (n == -EAGAIN || n == -EWOULDBLOCK)
			break;
		za_log_warn("nbd %s: connection %u: recv: %s; closing it",
			    c->s->name, c->id, strerror((int)-n));
		conn_close(c);
		break;
	}
	/*
	 * Out of budget with work in hand - input buffered, or a payload
	 * whose last bytes the final read brought in - come back next
	 * iteration: no new socket event may ever arrive for it (the client
	 * is waiting for our reply).
	 */
	if (conn_want_read(c) &&
	    (c->ipos < c->ilen || c->rd_have == c->rd_need))
		ev_feed_event(loop, &c->rw, EV_READ);
	conn_update(c);
	conn_put(c);
}

/* Input from the receive thread, or room in a pulled ring (loop thread,
 * through its ev_async). */
static void conn_rx_wake(void *arg)
{
	struct za_nbd_conn *c = arg;
	struct za_nbd_server *s = c->s;

	if (c->rx && za_nbd_rx_starved(c->rx) && s->ops->let_go)
		s->ops->let_go(s->be);
	if (conn_want_read(c))
		conn_read_cb(c->s->loop, &c->rw, EV_READ);
}

/* ---- output ---- */

static size_t req_wire_bytes(const struct za_nbd_req *r)
{
	return NBD_REPLY_BYTES + (req_has_data(r) ? r->len : 0);
}

static void conn_write(struct za_nbd_conn *c)
{
	struct iovec iov[NBD_IOV];
	struct msghdr msg = { .msg_iov = iov };
	struct za_nbd_req *r;
	size_t skip, w;
	ssize_t n;
	int nr;

	while (!c->closed && conn_has_output(c)) {
		nr = 0;
		if (c->hpos < c->hlen)
			iov[nr++] = (struct iovec){ c->hbuf + c->hpos,
						    c->hlen - c->hpos };
		skip = c->out_off;
		for (r = c->out_head; r && nr < NBD_IOV - 1; r = r->next) {
			size_t data_off = 0;

			if (skip < NBD_REPLY_BYTES) {
				iov[nr++] = (struct iovec){
					r->rep + skip, NBD_REPLY_BYTES - skip
				};
			} else {
				data_off = skip - NBD_REPLY_BYTES;
			}
			skip = 0;
			if (req_has_data(r))
				iov[nr++] = (struct iovec){ (uint8_t *)r->buf +
								    data_off,
							    r->len - data_off };
		}
		msg.msg_iovlen = (size_t)nr;
		n = sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			/* The client went away: nobody to reply to. */
			za_log_debug("nbd %s: connection %u: send: %s",
				     c->s->name, c->id, strerror(errno));
			conn_close(c);
			return;
		}
		w = (size_t)n;
		if (c->hpos < c->hlen) {
			size_t t = c->hlen - c->hpos < w ? c->hlen - c->hpos :
							   w;

			c->hpos += t;
			w -= t;
			if (c->hpos == c->hlen)
				c->hpos = c->hlen = 0;
		}
		while (w && c->out_head) {
			size_t left;

			r = c->out_head;
			left = req_wire_bytes(r) - c->out_off;
			if (w < left) {
				c->out_off += w;
				break;
			}
			w -= left;
			c->out_off = 0;
			c->out_head = r->next;
			if (!c->out_head)
				c->out_tail = NULL;
			req_release(r);
		}
	}
	if (c->closed)
		return;
	conn_update(c);
	conn_maybe_finish(c);
}

static void conn_write_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct za_nbd_conn *c = w->data;

	(void)loop;
	(void)revents;
	conn_get(c);
	conn_write(c);
	conn_put(c);
}

/* Write @c's output before the loop next blocks, with whatever else
 * completes in this iteration. */
static void conn_kick(struct za_nbd_conn *c)
{
	struct za_nbd_server *s = c->s;

	if (c->dirty || c->closed)
		return;
	c->dirty = true;
	conn_get(c);
	c->dirty_next = s->dirty_head;
	s->dirty_head = c;
	ev_prepare_start(s->loop, &s->prep);
}

static void server_flush_dirty(struct za_nbd_server *s, bool write)
{
	struct za_nbd_conn *c;

	while ((c = s->dirty_head)) {
		s->dirty_head = c->dirty_next;
		c->dirty = false;
		if (write)
			conn_write(c);
		conn_put(c);
	}
}

static void server_prepare_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
	struct za_nbd_server *s = w->data;

	(void)revents;
	/* Holds the server: a put below may drop the last connection. */
	s->refs++;
	server_flush_dirty(s, true);
	ev_prepare_stop(loop, &s->prep);
	server_put(s);
}

/* Start or stop @c's watchers to match what it is waiting for. */
static void conn_update(struct za_nbd_conn *c)
{
	struct ev_loop *loop = c->s->loop;
	bool want_r, want_w;

	if (c->closed)
		return;
	want_r = conn_want_read(c);
	/* Pending output is written by conn_kick(); ww only on EAGAIN. */
	want_w = conn_has_output(c) && !c->dirty;
	if (c->rx) {
		bool full = false, feed = false, sock;

		if (want_r)
			feed = za_nbd_rx_poll(c->rx,
					      c->rd == RD_RING ? c->rd_need : 1,
					      &full) ||
			       c->ipos < c->ilen;
		/*
		 * Input waiting in the ring is run from here: it will not
		 * make the socket readable. A thread reads the socket
		 * itself; for a pulled ring the loop watches the socket
		 * while the ring has room to read into.
		 */
		sock = want_r && za_nbd_rx_pulls(c->rx) && !full;
		if (sock && !ev_is_active(&c->rw))
			ev_io_start(loop, &c->rw);
		else if (!sock && ev_is_active(&c->rw))
			ev_io_stop(loop, &c->rw);
		if (feed)
			ev_feed_event(loop, &c->rw, EV_READ);
	} else if (want_r && !ev_is_active(&c->rw)) {
		ev_io_start(loop, &c->rw);
		/* Input already buffered will not make the socket readable. */
		if (c->ipos < c->ilen)
			ev_feed_event(loop, &c->rw, EV_READ);
	} else if (!want_r && ev_is_active(&c->rw)) {
		ev_io_stop(loop, &c->rw);
	}
	if (want_w && !ev_is_active(&c->ww))
		ev_io_start(loop, &c->ww);
	else if (!want_w && ev_is_active(&c->ww))
		ev_io_stop(loop, &c->ww);
}

/* ---- connections ---- */

static void conn_close(struct za_nbd_conn *c)
{
	struct za_nbd_server *s = c->s;
	struct za_nbd_req *r;

	if (c->closed)
		return;
	c->closed = true;
	/* First: the thread may be reading into c->cur's buffer. */
	za_nbd_rx_stop(c->rx);
	c->rx = NULL;
	ev_io_stop(s->loop, &c->rw);
	ev_io_stop(s->loop, &c->ww);
	ev_timer_stop(s->loop, &c->hs_timer);
	close(c->fd);
	c->fd = -1;
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	s->nr_open--;
	s->st.conns_open--;
	s->cap_logged = false;
	free(c->opt_buf);
	c->opt_buf = NULL;
	free(c->ibuf);
	c->ibuf = NULL;
	c->ipos = c->ilen = 0;
	free(c->hbuf);
	c->hbuf = NULL;
	c->hpos = c->hlen = c->hcap = 0;
	c->rd = RD_NONE;
	za_log_debug("nbd %s: connection %u closed (%u requests at the "
		     "backend)",
		     s->name, c->id, c->nr_reqs);
	/* Requests at the backend hold @c until they complete. */
	conn_get(c);
	if (c->cur) {
		r = c->cur;
		c->cur = NULL;
		req_release(r);
	}
	while ((r = c->out_head)) {
		c->out_head = r->next;
		req_release(r);
	}
	c->out_tail = NULL;
	c->out_off = 0;
	conn_put(c);
	conn_put(c); /* the open reference */
}

static void conn_timeout_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct za_nbd_conn *c = w->data;

	(void)loop;
	(void)revents;
	za_log_warn("nbd %s: connection %u: handshake not finished within "
		    "%.1f s; closing it",
		    c->s->name, c->id, c->s->hs_timeout_s);
	c->s->st.handshake_timeouts++;
	conn_close(c);
}

static int conn_new(struct za_nbd_server *s, int fd)
{
	struct za_nbd_conn *c = calloc(1, sizeof(*c));
	uint8_t *p;

	if (!c)
		goto err_close;
	c->ibuf = malloc(NBD_IBUF_BYTES);
	if (!c->ibuf || hbuf_reserve(c, NBD_GREETING_BYTES) < 0)
		goto err_free;
	c->s = s;
	c->fd = fd;
	c->id = ++s->next_id;
	c->refs = 1;
	s->refs++;
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;
	s->nr_open++;
	s->st.conns_open++;

	ev_io_init(&c->rw, conn_read_cb, fd, EV_READ);
	c->rw.data = c;
	ev_io_init(&c->ww, conn_write_cb, fd, EV_WRITE);
	c->ww.data = c;
	ev_timer_init(&c->hs_timer, conn_timeout_cb, s->hs_timeout_s, 0.0);
	c->hs_timer.data = c;
	ev_timer_start(s->loop, &c->hs_timer);

	p = c->hbuf;
	put_be64(p, NBD_MAGIC);
	put_be64(p + 8, NBD_IHAVEOPT);
	put_be16(p + 16, NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES);
	c->hlen = NBD_GREETING_BYTES;
	conn_expect(c, RD_CLIENT_FLAGS, c->hdr, 4);
	za_log_debug("nbd %s: connection %u opened", s->name, c->id);
	conn_kick(c);
	return 0;

err_free:
	free(c->ibuf);
	free(c->hbuf);
	free(c);
err_close:
	close(fd);
	za_log_err("nbd %s: out of memory for a connection", s->name);
	return -ENOMEM;
}

/* Take @fd as a new connection unless at the cap; closes it otherwise. */
static int server_take(struct za_nbd_server *s, int fd)
{
	int one = 1;

	s->st.conns_accepted++;
	if (s->nr_open >= s->max_conns) {
		s->st.conns_refused++;
		if (!s->cap_logged)
			za_log_warn("nbd %s: %u connections open; refusing "
				    "more",
				    s->name, s->nr_open);
		s->cap_logged = true;
		close(fd);
		return -EBUSY;
	}
	/* Replies are whole messages: do not hold small ones back. Fails
	 * harmlessly on Unix sockets. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return conn_new(s, fd);
}

/* ---- listeners ---- */

static void listeners_enable(struct za_nbd_server *s, bool on)
{
	unsigned i;

	for (i = 0; i < s->nr_ls; i++) {
		if (on)
			ev_io_start(s->loop, &s->ls[i]->w);
		else
			ev_io_stop(s->loop, &s->ls[i]->w);
	}
}

static void accept_retry_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	listeners_enable(w->data, true);
}

static void listen_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct nbd_listener *l = w->data;
	struct za_nbd_server *s = l->s;
	int i, fd;

	(void)loop;
	(void)revents;
	for (i = 0; i < NBD_ACCEPT_BATCH; i++) {
		fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			/* EMFILE and friends: the socket stays readable, so
			 * pause rather than spin. */
			za_log_warn("nbd %s: accept: %s; pausing for 100 ms",
				    s->name, strerror(errno));
			listeners_enable(s, false);
			ev_timer_stop(s->loop, &s->accept_retry);
			ev_timer_set(&s->accept_retry, 0.1, 0.0);
			ev_timer_start(s->loop, &s->accept_retry);
			break;
		}
		server_take(s, fd);
	}
}

static int listener_add(struct za_nbd_server *s, int fd, const char *path)
{
	struct nbd_listener *l, **ls;

	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	if (path) {
		l->path = strdup(path);
		if (!l->path)
			goto err_free;
	}
	ls = realloc(s->ls, (s->nr_ls + 1) * sizeof(*ls));
	if (!ls)
		goto err_free;
	s->ls = ls;
	l->s = s;
	l->fd = fd;
	ev_io_init(&l->w, listen_cb, fd, EV_READ);
	l->w.data = l;
	if (!s->shutting_down)
		ev_io_start(s->loop, &l->w);
	s->ls[s->nr_ls++] = l;
	return 0;

err_free:
	free(l->path);
	free(l);
	return -ENOMEM;
}

static void listeners_close(struct za_nbd_server *s)
{
	unsigned i;

	ev_timer_stop(s->loop, &s->accept_retry);
	for (i = 0; i < s->nr_ls; i++) {
		struct nbd_listener *l = s->ls[i];

		ev_io_stop(s->loop, &l->w);
		close(l->fd);
		if (l->path && unlink(l->path) < 0 && errno != ENOENT)
			za_log_warn("nbd %s: %s: %s", s->name, l->path,
				    strerror(errno));
		free(l->path);
		free(l);
	}
	s->nr_ls = 0;
}

int za_nbd_listen_unix(struct za_nbd_server *s, const char *path, mode_t mode)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	mode_t old;
	int fd, ret;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		za_log_err("nbd %s: %s: socket path longer than %zu bytes",
			   s->name, path, sizeof(sa.sun_path) - 1);
		return -ENAMETOOLONG;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			za_log_err("nbd %s: %s exists and is not a socket; not "
				   "replacing it",
				   s->name, path);
			return -EEXIST;
		}
		if (unlink(path) < 0) {
			ret = -errno;
			za_log_err("nbd %s: cannot remove the stale socket %s: "
				   "%s",
				   s->name, path, strerror(errno));
			return ret;
		}
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		ret = -errno;
		za_log_err("nbd %s: socket: %s", s->name, strerror(errno));
		return ret;
	}
	/* The socket never exists with looser permissions than @mode. */
	old = umask(0777 & ~mode);
	ret = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (ret < 0) {
		ret = -errno;
		za_log_err("nbd %s: bind %s: %s", s->name, path,
			   strerror(errno));
		goto err_close;
	}
	if (chmod(path, mode) < 0 || listen(fd, 128) < 0) {
		ret = -errno;
		za_log_err("nbd %s: %s: %s", s->name, path, strerror(errno));
		goto err_unlink;
	}
	ret = listener_add(s, fd, path);
	if (ret < 0) {
		za_log_err("nbd %s: out of memory for a listener", s->name);
		goto err_unlink;
	}
	return 0;

err_unlink:
	unlink(path);
err_close:
	close(fd);
	return ret;
}

int za_nbd_listen_tcp(struct za_nbd_server *s, const char *host,
		      const char *port, uint16_t *bound_port)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC,
				  .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE };
	struct addrinfo *res, *ai;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int fd = -1, ret, one = 1;

	if (!host)
		host = "127.0.0.1";
	ret = getaddrinfo(host, port, &hints, &res);
	if (ret) {
		za_log_err("nbd %s: %s port %s: %s", s->name, host, port,
			   gai_strerror(ret));
		return -EINVAL;
	}
	ret = -EADDRNOTAVAIL;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family,
			    ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
			    ai->ai_protocol);
		if (fd < 0) {
			ret = -errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
		    listen(fd, 128) == 0)
			break;
		ret = -errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		za_log_err("nbd %s: cannot listen on %s port %s: %s", s->name,
			   host, port, strerror(-ret));
		return ret;
	}
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
		ret = -errno;
		za_log_err("nbd %s: getsockname: %s", s->name, strerror(errno));
		goto err_close;
	}
	if (bound_port)
		*bound_port =
			ntohs(ss.ss_family == AF_INET6 ?
				      ((struct sockaddr_in6 *)&ss)->sin6_port :
				      ((struct sockaddr_in *)&ss)->sin_port);
	ret = listener_add(s, fd, NULL);
	if (ret < 0) {
		za_log_err("nbd %s: out of memory for a listener", s->name);
		goto err_close;
	}
	return 0;

err_close:
	close(fd);
	return ret;
}

/* ---- the server ---- */

int za_nbd_server_new(struct za_io *io, const struct za_nbd_params *p,
		      const struct za_nbd_backend_ops *ops, void *be,
		      struct za_nbd_server **out)
{
	struct za_nbd_server *s;
	int ret;
	uint32_t pref = p->pref_block_bytes ? p->pref_block_bytes :
					      ZA_NBD_DEFAULT_PREF_BLOCK_BYTES;

	if (!p->export_name || strlen(p->export_name) > ZA_NBD_MAX_NAME_BYTES ||
	    (p->description &&
	     strlen(p->description) > ZA_NBD_MAX_NAME_BYTES)) {
		za_log_err("nbd: export name or description missing or longer "
			   "than %u bytes",
			   ZA_NBD_MAX_NAME_BYTES);
		return -EINVAL;
	}
	if (!ops->read || !ops->write || !ops->flush || !ops->trim ||
	    !ops->write_zeroes || !ops->size) {
		za_log_err("nbd %s: backend lacks an operation",
			   p->export_name);
		return -EINVAL;
	}
	if (pref < ZA_NBD_MIN_BLOCK_BYTES || (pref & (pref - 1))) {
		za_log_err("nbd %s: preferred block size %u is not a power of "
			   "2 >= %u",
			   p->export_name, pref, ZA_NBD_MIN_BLOCK_BYTES);
		return -EINVAL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->name = strdup(p->export_name);
	s->desc = p->description ? strdup(p->description) : NULL;
	if (!s->name || (p->description && !s->desc)) {
		free(s->name);
		free(s->desc);
		free(s);
		return -ENOMEM;
	}
	s->io = io;
	s->loop = za_io_loop(io);
	s->ops = ops;
	s->be = be;
	s->name_len = strlen(s->name);
	s->max_conns = p->max_conns ? p->max_conns : ZA_NBD_DEFAULT_MAX_CONNS;
	s->hs_timeout_s = p->handshake_timeout_s > 0 ?
				  p->handshake_timeout_s :
				  ZA_NBD_DEFAULT_HANDSHAKE_TIMEOUT_S;
	s->max_payload =
		p->max_payload_bytes && p->max_payload_bytes <=
						ZA_NBD_MAX_PAYLOAD_BYTES ?
			p->max_payload_bytes & ~(ZA_NBD_MIN_BLOCK_BYTES - 1) :
			ZA_NBD_MAX_PAYLOAD_BYTES;
	if (s->max_payload < pref)
		s->max_payload = pref;
	s->pref_block = pref;
	s->max_inflight_bytes = p->max_inflight_bytes ?
					p->max_inflight_bytes :
					ZA_NBD_DEFAULT_MAX_INFLIGHT_BYTES;
	s->max_inflight_reqs = p->max_inflight_reqs ?
				       p->max_inflight_reqs :
				       ZA_NBD_DEFAULT_MAX_INFLIGHT_REQS;
	s->rx_min_payload = p->rx_min_payload_bytes ?
				    p->rx_min_payload_bytes :
				    ZA_NBD_DEFAULT_RX_MIN_PAYLOAD_BYTES;
	s->rx_thread = p->rx_thread;
	/* A client's first large WRITEs would otherwise fill a ring whose
	 * pages are touched for the first time (nbd-rx.c, rx_spare). Only
	 * a cost saved, so a failure just leaves it to the connection. */
	ret = za_nbd_rx_reserve(NBD_RX_RING_BYTES);
	if (ret)
		za_log_warn("nbd %s: no receive ring set aside: %s", s->name,
			    strerror(-ret));
	s->priv_bytes = p->req_priv_bytes;
	s->refs = 1;
	ev_init(&s->accept_retry, accept_retry_cb);
	s->accept_retry.data = s;
	ev_prepare_init(&s->prep, server_prepare_cb);
	s->prep.data = s;
	*out = s;
	return 0;
}

int za_nbd_server_adopt(struct za_nbd_server *s, int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		int ret = -errno;

		close(fd);
		return ret;
	}
	return server_take(s, fd);
}

void za_nbd_server_stats(const struct za_nbd_server *s, struct za_nbd_stats *st)
{
	*st = s->st;
}

void za_nbd_server_shutdown(struct za_nbd_server *s)
{
	s->shutting_down = true;
	listeners_close(s);
}

void za_nbd_server_free(struct za_nbd_server *s)
{
	if (!s)
		return;
	s->shutting_down = true;
	s->freeing = true;
	listeners_close(s);
	while (s->conns)
		conn_close(s->conns);
	ev_prepare_stop(s->loop, &s->prep);
	server_flush_dirty(s, false);
	server_put(s);
}
