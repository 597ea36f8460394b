// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test-nbd.c - the NBD server, driven through socketpairs and real
 * sockets by a hand-written client, over a RAM backend that completes
 * inside the call, on a later loop iteration, or only when the test says
 * (so the order of completions is the test's). It shows: the handshake
 * variants (GO, INFO then GO, EXPORT_NAME with and without zeroes,
 * non-fixed clients) and that INFO_BLOCK_SIZE always comes; OPT_LIST,
 * OPT_ABORT and ERR_UNSUP for other options; oversized option lengths,
 * overlong and wrong export names, bad client flags, and commands before
 * the handshake ends refused; every command with FUA, out-of-order
 * replies; range checks that cannot overflow, alignment, zero lengths,
 * unknown commands and flags, the payload limit; bad magic closes;
 * backend errors mapped to NBD values; the in-flight cap stops reading;
 * disconnects and server teardown with commands still at the backend
 * (run under the sanitizers tier); DISC drains; shutdown answers
 * ESHUTDOWN; the connection cap, the handshake timeout, TCP and Unix
 * listeners; a read budget that runs out on the recv() completing a
 * pipelined WRITE's payload still answers it.
 */
#include <check.h>

#include "tap.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "io.h"
#include "log.h"
#include "nbd.h"
#include "payload.h"

#define EXPORT "tank"
#define TB_SIZE (1ull << 20)
#define BLK 4096u

#define NBD_MAGIC 0x4e42444d41474943ull
#define IHAVEOPT 0x49484156454f5054ull
#define OPT_REPLY_MAGIC 0x0003e889045565a9ull
#define REQ_MAGIC 0x25609513u
#define REPLY_MAGIC 0x67446698u

#define C_FIXED 1u
#define C_NO_ZEROES 2u
#define TFLAGS 0x16du /* HAS_FLAGS FLUSH FUA TRIM WRITE_ZEROES MULTI_CONN */

enum {
	OPT_EXPORT_NAME = 1,
	OPT_ABORT = 2,
	OPT_LIST = 3,
	OPT_INFO = 6,
	OPT_GO = 7
};
enum { REP_ACK = 1, REP_SERVER = 2, REP_INFO = 3 };
#define REP_ERR_UNSUP 0x80000001u
#define REP_ERR_INVALID 0x80000003u
#define REP_ERR_UNKNOWN 0x80000006u
#define REP_ERR_SHUTDOWN 0x80000007u
enum { INFO_EXPORT = 0, INFO_NAME = 1, INFO_DESC = 2, INFO_BLOCK = 3 };
enum {
	CMD_READ = 0,
	CMD_WRITE = 1,
	CMD_DISC = 2,
	CMD_FLUSH = 3,
	CMD_TRIM = 4,
	CMD_CACHE = 5,
	CMD_WZ = 6
};
#define F_FUA 1u
#define F_NO_HOLE 2u
#define F_DF 4u

/* ---- big-endian ---- */

static void pb16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void pb32(uint8_t *p, uint32_t v)
{
	pb16(p, (uint16_t)(v >> 16));
	pb16(p + 2, (uint16_t)v);
}

static void pb64(uint8_t *p, uint64_t v)
{
	pb32(p, (uint32_t)(v >> 32));
	pb32(p + 4, (uint32_t)v);
}

static uint16_t gb16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t gb32(const uint8_t *p)
{
	return (uint32_t)gb16(p) << 16 | gb16(p + 2);
}

static uint64_t gb64(const uint8_t *p)
{
	return (uint64_t)gb32(p) << 32 | gb32(p + 4);
}

/* ---- the test backend ---- */

enum tb_mode { TB_NOW, TB_DEFER, TB_HOLD };
enum tb_op { OP_READ, OP_WRITE, OP_FLUSH, OP_TRIM, OP_ZERO, NR_OPS };

struct tb_req {
	struct za_io_defer d;
	struct za_nbd_req *r;
	int err;
};

#define MAX_HELD 512
static struct tb {
	struct za_io *io;
	uint8_t *data;
	uint64_t size;
	enum tb_mode mode;
	int err;
	unsigned calls[NR_OPS];
	bool last_fua;
	struct za_nbd_req *held[MAX_HELD];
	enum tb_op held_op[MAX_HELD];
	unsigned nr_held;
	unsigned outstanding;
} tb;

static void tb_done(struct za_io_defer *d)
{
	struct tb_req *q = (struct tb_req *)d;

	tb.outstanding--;
	za_nbd_complete(q->r, q->err);
}

static void tb_finish(struct za_nbd_req *r, enum tb_op op)
{
	struct tb_req *q = za_nbd_req_priv(r);

	ck_assert_uint_eq((uintptr_t)q % 16, 0);
	tb.calls[op]++;
	q->r = r;
	q->err = tb.err;
	switch (tb.mode) {
	case TB_NOW:
		za_nbd_complete(r, tb.err);
		break;
	case TB_DEFER:
		q->d.fn = tb_done;
		tb.outstanding++;
		za_io_defer(tb.io, &q->d);
		break;
	case TB_HOLD:
		ck_assert_uint_lt(tb.nr_held, MAX_HELD);
		tb.held_op[tb.nr_held] = op;
		tb.held[tb.nr_held++] = r;
		break;
	}
}

/* The server never passes a bad range, an unaligned or empty one. */
static void tb_check(uint64_t off, uint32_t len)
{
	ck_assert_uint_gt(len, 0);
	ck_assert_uint_eq(off % BLK, 0);
	ck_assert_uint_eq(len % BLK, 0);
	ck_assert_uint_le(len, tb.size);
	ck_assert_uint_le(off, tb.size - len);
}

static void tb_read(void *be, struct za_nbd_req *r, uint64_t off, uint32_t len,
		    void *buf)
{
	(void)be;
	tb_check(off, len);
	ck_assert_uint_eq((uintptr_t)buf % 4096, 0);
	memcpy(buf, tb.data + off, len);
	tb_finish(r, OP_READ);
}

static void tb_write(void *be, struct za_nbd_req *r, uint64_t off, uint32_t len,
		     const void *buf, bool fua)
{
	(void)be;
	tb_check(off, len);
	if (!tb.err)
		memcpy(tb.data + off, buf, len);
	tb.last_fua = fua;
	tb_finish(r, OP_WRITE);
}

static void tb_flush(void *be, struct za_nbd_req *r)
{
	(void)be;
	tb_finish(r, OP_FLUSH);
}

static void tb_trim(void *be, struct za_nbd_req *r, uint64_t off, uint32_t len)
{
	(void)be;
	tb_check(off, len);
	tb_finish(r, OP_TRIM);
}

static void tb_zero(void *be, struct za_nbd_req *r, uint64_t off, uint32_t len,
		    bool fua)
{
	(void)be;
	tb_check(off, len);
	if (!tb.err)
		memset(tb.data + off, 0, len);
	tb.last_fua = fua;
	tb_finish(r, OP_ZERO);
}

static uint64_t tb_size(void *be)
{
	(void)be;
	return tb.size;
}

static const struct za_nbd_backend_ops tb_ops = {
	.read = tb_read,
	.write = tb_write,
	.flush = tb_flush,
	.trim = tb_trim,
	.write_zeroes = tb_zero,
	.size = tb_size,
};

/*
 * The same backend, saying whether a write now copies its payload
 * (write_copies): always, or at random. A write told "no" keeps the
 * buffer it gets and copies from it only when it completes, a loop
 * iteration later - so a server that handed it a buffer it then reused
 * (its receive ring) would leave wrong bytes behind.
 */
static struct {
	bool random;
	bool keep; /* write() keeps payloads (za_nbd_req_keep()) */
	unsigned seed;
	bool said; /* the last answer */
	unsigned yes, no;
	/* Kept payloads: where, a copy of what they held, the reference. */
	struct tb_kept {
		const void *buf;
		void *copy;
		uint32_t len;
		struct za_payload *pl;
	} kept[64];
	unsigned nr_kept, kept_total;
	unsigned let_go; /* calls of let_go() */
} tbc;

/* Kept payload @i still holds what it held at write(); let it go. */
static void tb_kept_drop(unsigned i)
{
	struct tb_kept *k = &tbc.kept[i];

	ck_assert_mem_eq(k->buf, k->copy, k->len);
	za_payload_put(k->pl);
	free(k->copy);
	*k = tbc.kept[--tbc.nr_kept];
}

struct tb_late {
	struct za_io_defer d;
	struct za_nbd_req *r;
	const void *buf;
	uint64_t off;
	uint32_t len;
};

static bool tb_write_copies(void *be)
{
	(void)be;
	tbc.said = !tbc.random || rand_r(&tbc.seed) % 2;
	if (tbc.said)
		tbc.yes++;
	else
		tbc.no++;
	return tbc.said;
}

static void tb_late_done(struct za_io_defer *d)
{
	struct tb_late *q = (struct tb_late *)d;

	memcpy(tb.data + q->off, q->buf, q->len);
	tb.outstanding--;
	za_nbd_complete(q->r, 0);
}

static void tb_write_c(void *be, struct za_nbd_req *r, uint64_t off,
		       uint32_t len, const void *buf, bool fua)
{
	struct tb_late *q = za_nbd_req_priv(r);

	(void)be;
	tb_check(off, len);
	tb.calls[OP_WRITE]++;
	tb.last_fua = fua;
	if (tbc.said) {
		struct za_payload *pl = tbc.keep ? za_nbd_req_keep(r) : NULL;

		memcpy(tb.data + off, buf, len);
		if (pl) {
			/* Let go of them out of order, some of them only
			 * after the connection is gone. */
			if (tbc.nr_kept == 64 ||
			    (tbc.nr_kept && rand_r(&tbc.seed) % 3 == 0))
				tb_kept_drop((unsigned)rand_r(&tbc.seed) %
					     tbc.nr_kept);
			tbc.kept[tbc.nr_kept++] =
				(struct tb_kept){ .buf = buf,
						  .copy = malloc(len),
						  .len = len,
						  .pl = pl };
			ck_assert_ptr_nonnull(tbc.kept[tbc.nr_kept - 1].copy);
			memcpy(tbc.kept[tbc.nr_kept - 1].copy, buf, len);
			tbc.kept_total++;
		}
		za_nbd_complete(r, 0);
		return;
	}
	*q = (struct tb_late){ .r = r, .buf = buf, .off = off, .len = len };
	q->d.fn = tb_late_done;
	tb.outstanding++;
	za_io_defer(tb.io, &q->d);
}

/* The ring is full of what we keep: let go of it all. */
static void tb_let_go(void *be)
{
	(void)be;
	tbc.let_go++;
	while (tbc.nr_kept)
		tb_kept_drop(tbc.nr_kept - 1);
}

static const struct za_nbd_backend_ops tb_ops_copies = {
	.read = tb_read,
	.write = tb_write_c,
	.flush = tb_flush,
	.trim = tb_trim,
	.write_zeroes = tb_zero,
	.size = tb_size,
	.write_copies = tb_write_copies,
	.let_go = tb_let_go,
};

/* Complete held request @i (in hold order) with @err. */
static void tb_release(unsigned i, int err)
{
	struct za_nbd_req *r = tb.held[i];

	ck_assert_ptr_nonnull(r);
	tb.held[i] = NULL;
	za_nbd_complete(r, err);
}

/* ---- environment ---- */

static struct za_io *io;
static struct za_nbd_server *srv;

static void pump_ms(unsigned ms)
{
	bool never = false;

	za_io_run_until(io, &never, (uint64_t)ms * 1000000ull);
}

/* Run the loop until the backend holds @n requests (or 5 s pass), then a
 * little longer, so that a count above @n would show. */
static void pump_until_held(unsigned n)
{
	unsigned i;

	for (i = 0; i < 5000 && tb.nr_held < n; i++)
		pump_ms(1);
	pump_ms(10);
}

static void env_start_ops(struct za_nbd_params *p,
			  const struct za_nbd_backend_ops *ops, uint64_t size)
{
	uint64_t i;

	ck_assert_int_eq(za_io_new(NULL, &io), 0);
	memset(&tb, 0, sizeof(tb));
	tb.io = io;
	tb.size = size;
	tb.data = malloc(size);
	ck_assert_ptr_nonnull(tb.data);
	for (i = 0; i < size; i++)
		tb.data[i] = (uint8_t)(i * 7 + i / BLK);
	p->export_name = EXPORT;
	p->description = "test export";
	p->req_priv_bytes = sizeof(struct tb_req) > sizeof(struct tb_late) ?
				    sizeof(struct tb_req) :
				    sizeof(struct tb_late);
	ck_assert_int_eq(za_nbd_server_new(io, p, ops, &tb, &srv), 0);
}

static void env_start_with(struct za_nbd_params *p)
{
	env_start_ops(p, &tb_ops, TB_SIZE);
}

static void env_start(void)
{
	struct za_nbd_params p = { 0 };

	env_start_with(&p);
}

/* Free the server first, then complete what the backend still holds:
 * those completions land on freed connections and must be harmless. */
static void env_stop(void)
{
	unsigned i;

	za_nbd_server_free(srv);
	for (i = 0; i < tb.nr_held; i++)
		if (tb.held[i])
			tb_release(i, 0);
	while (tb.outstanding)
		za_io_run_once(io);
	za_io_free(io);
	free(tb.data);
}

static void nonblock(int fd)
{
	ck_assert_int_eq(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK),
			 0);
}

/* A client on one end of a socketpair whose other end the server serves. */
static int env_client(void)
{
	int sv[2];

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
			 0);
	ck_assert_int_eq(za_nbd_server_adopt(srv, sv[0]), 0);
	nonblock(sv[1]);
	return sv[1];
}

/* ---- client I/O, pumping the server's loop while waiting ---- */

static void cl_send(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint64_t deadline = za_io_now_ns() + 10000000000ull;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		ck_assert_msg(n < 0 && errno == EAGAIN, "send: %s",
			      strerror(errno));
		ck_assert_msg(za_io_now_ns() < deadline, "send stalled");
		pump_ms(1);
	}
}

/* Receive up to @len bytes; fewer only at EOF. */
static size_t cl_recv(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;
	size_t got = 0;
	uint64_t deadline = za_io_now_ns() + 10000000000ull;

	while (got < len) {
		ssize_t n = recv(fd, p + got, len - got, 0);

		if (n > 0) {
			got += (size_t)n;
			continue;
		}
		if (n == 0 || errno == ECONNRESET)
			break;
		ck_assert_msg(errno == EAGAIN, "recv: %s", strerror(errno));
		ck_assert_msg(za_io_now_ns() < deadline,
			      "no reply (%zu of %zu bytes)", got, len);
		pump_ms(1);
	}
	return got;
}

static void cl_recv_all(int fd, void *buf, size_t len)
{
	ck_assert_uint_eq(cl_recv(fd, buf, len), len);
}

/* The server closes the connection (no more bytes, then EOF). */
static void cl_expect_eof(int fd)
{
	uint8_t b;

	ck_assert_uint_eq(cl_recv(fd, &b, 1), 0);
}

/* Nothing arrives for @ms, and the connection stays open. */
static void cl_expect_quiet(int fd, unsigned ms)
{
	uint8_t b;

	pump_ms(ms);
	ck_assert_int_eq(recv(fd, &b, 1, 0), -1);
	ck_assert_int_eq(errno, EAGAIN);
}

static void cl_greeting(int fd)
{
	uint8_t g[18];

	cl_recv_all(fd, g, sizeof(g));
	ck_assert_uint_eq(gb64(g), NBD_MAGIC);
	ck_assert_uint_eq(gb64(g + 8), IHAVEOPT);
	ck_assert_uint_eq(gb16(g + 16), 3); /* FIXED_NEWSTYLE | NO_ZEROES */
}

static void cl_flags(int fd, uint32_t f)
{
	uint8_t b[4];

	pb32(b, f);
	cl_send(fd, b, 4);
}

static void cl_opt(int fd, uint32_t opt, const void *data, uint32_t len)
{
	uint8_t h[16];

	pb64(h, IHAVEOPT);
	pb32(h + 8, opt);
	pb32(h + 12, len);
	cl_send(fd, h, sizeof(h));
	if (len)
		cl_send(fd, data, len);
}

/* One option reply; returns its type, its data in @buf (length *@len). */
static uint32_t cl_opt_reply(int fd, uint32_t opt, uint8_t *buf, size_t cap,
			     uint32_t *len)
{
	uint8_t h[20];

	cl_recv_all(fd, h, sizeof(h));
	ck_assert_uint_eq(gb64(h), OPT_REPLY_MAGIC);
	ck_assert_uint_eq(gb32(h + 8), opt);
	*len = gb32(h + 16);
	ck_assert_uint_le(*len, cap);
	cl_recv_all(fd, buf, *len);
	return gb32(h + 12);
}

struct info {
	uint64_t size;
	uint16_t tflags;
	uint32_t bmin, bpref, bmax;
	char name[64], desc[64];
	bool got_export, got_block, got_name, got_desc;
};

/* INFO or GO for @name asking for @infos; returns the final reply type. */
static uint32_t cl_info_go(int fd, uint32_t opt, const char *name,
			   const uint16_t *infos, unsigned nr, struct info *in)
{
	uint8_t d[512], rb[4200];
	uint32_t nlen = (uint32_t)strlen(name), len, type;
	unsigned i;

	pb32(d, nlen);
	memcpy(d + 4, name, nlen);
	pb16(d + 4 + nlen, (uint16_t)nr);
	for (i = 0; i < nr; i++)
		pb16(d + 6 + nlen + 2 * i, infos[i]);
	cl_opt(fd, opt, d, 6 + nlen + 2 * nr);
	memset(in, 0, sizeof(*in));
	for (;;) {
		type = cl_opt_reply(fd, opt, rb, sizeof(rb), &len);
		if (type != REP_INFO)
			return type;
		ck_assert_uint_ge(len, 2);
		switch (gb16(rb)) {
		case INFO_EXPORT:
			ck_assert_uint_eq(len, 12);
			in->size = gb64(rb + 2);
			in->tflags = gb16(rb + 10);
			in->got_export = true;
			break;
		case INFO_BLOCK:
			ck_assert_uint_eq(len, 14);
			in->bmin = gb32(rb + 2);
			in->bpref = gb32(rb + 6);
			in->bmax = gb32(rb + 10);
			in->got_block = true;
			break;
		case INFO_NAME:
			ck_assert_uint_lt(len - 2, sizeof(in->name));
			memcpy(in->name, rb + 2, len - 2);
			in->got_name = true;
			break;
		case INFO_DESC:
			ck_assert_uint_lt(len - 2, sizeof(in->desc));
			memcpy(in->desc, rb + 2, len - 2);
			in->got_desc = true;
			break;
		default:
			ck_abort_msg("unexpected info type %u", gb16(rb));
		}
	}
}

static void check_info(const struct info *in)
{
	ck_assert(in->got_export);
	ck_assert_uint_eq(in->size, tb.size);
	ck_assert_uint_eq(in->tflags, TFLAGS);
	ck_assert(in->got_block);
	ck_assert_uint_eq(in->bmin, 4096);
	ck_assert_uint_eq(in->bpref, 4096);
	ck_assert_uint_eq(in->bmax, 32u << 20);
}

/* A client in transmission through OPT_GO. */
static int env_connect(void)
{
	int fd = env_client();
	struct info in;

	cl_greeting(fd);
	cl_flags(fd, C_FIXED | C_NO_ZEROES);
	ck_assert_uint_eq(cl_info_go(fd, OPT_GO, "", NULL, 0, &in), REP_ACK);
	check_info(&in);
	return fd;
}

static void cl_req(int fd, uint16_t flags, uint16_t type, uint64_t cookie,
		   uint64_t off, uint32_t len, const void *payload)
{
	uint8_t h[28];

	pb32(h, REQ_MAGIC);
	pb16(h + 4, flags);
	pb16(h + 6, type);
	pb64(h + 8, cookie);
	pb64(h + 16, off);
	pb32(h + 24, len);
	cl_send(fd, h, sizeof(h));
	if (payload)
		cl_send(fd, payload, len);
}

/* A simple reply; returns its error, its cookie in *@cookie. */
static uint32_t cl_reply(int fd, uint64_t *cookie)
{
	uint8_t h[16];

	cl_recv_all(fd, h, sizeof(h));
	ck_assert_uint_eq(gb32(h), REPLY_MAGIC);
	*cookie = gb64(h + 8);
	return gb32(h + 4);
}

static void cl_reply_eq(int fd, uint64_t want_cookie, uint32_t want_err)
{
	uint64_t cookie;
	uint32_t err = cl_reply(fd, &cookie);

	ck_assert_uint_eq(cookie, want_cookie);
	ck_assert_uint_eq(err, want_err);
}

/* READ and compare with the backend's bytes. */
static void cl_read_check(int fd, uint64_t cookie, uint64_t off, uint32_t len)
{
	uint8_t *buf = malloc(len);

	cl_req(fd, 0, CMD_READ, cookie, off, len, NULL);
	cl_reply_eq(fd, cookie, 0);
	cl_recv_all(fd, buf, len);
	ck_assert_mem_eq(buf, tb.data + off, len);
	free(buf);
}

static struct za_nbd_stats stats(void)
{
	struct za_nbd_stats st;

	za_nbd_server_stats(srv, &st);
	return st;
}

/* ---- handshake ---- */

enum hs_how { HS_GO, HS_INFO_GO, HS_EXPORT_NAME };
static const struct hs_case {
	uint32_t cflags;
	enum hs_how how;
	const char *name;
	uint16_t infos[3];
	unsigned nr_infos;
} hs_cases[] = {
	{ C_FIXED | C_NO_ZEROES, HS_GO, "", { 0 }, 0 },
	{ C_FIXED | C_NO_ZEROES, HS_GO, EXPORT, { INFO_BLOCK }, 1 },
	{ C_FIXED, HS_GO, EXPORT, { INFO_NAME, INFO_DESC, INFO_BLOCK }, 3 },
	{ C_FIXED | C_NO_ZEROES, HS_GO, EXPORT, { 0x4242, INFO_NAME }, 2 },
	{ C_FIXED | C_NO_ZEROES, HS_INFO_GO, EXPORT, { INFO_DESC }, 1 },
	{ C_FIXED | C_NO_ZEROES, HS_EXPORT_NAME, EXPORT, { 0 }, 0 },
	{ C_FIXED, HS_EXPORT_NAME, "", { 0 }, 0 },
	{ 0, HS_EXPORT_NAME, EXPORT, { 0 }, 0 }, /* not fixed newstyle */
};
#define NR_HS_CASES (int)(sizeof(hs_cases) / sizeof(hs_cases[0]))

START_TEST(test_handshake)
{
	const struct hs_case *hc = &hs_cases[_i];
	struct info in;
	unsigned i;
	bool want_name = false, want_desc = false;
	int fd;

	env_start();
	fd = env_client();
	cl_greeting(fd);
	cl_flags(fd, hc->cflags);
	for (i = 0; i < hc->nr_infos; i++) {
		want_name |= hc->infos[i] == INFO_NAME;
		want_desc |= hc->infos[i] == INFO_DESC;
	}
	if (hc->how == HS_EXPORT_NAME) {
		uint8_t r[134], zero[124] = { 0 };
		size_t want = hc->cflags & C_NO_ZEROES ? 10 : 134;

		cl_opt(fd, OPT_EXPORT_NAME, hc->name,
		       (uint32_t)strlen(hc->name));
		cl_recv_all(fd, r, want);
		ck_assert_uint_eq(gb64(r), TB_SIZE);
		ck_assert_uint_eq(gb16(r + 8), TFLAGS);
		if (want == 134)
			ck_assert_mem_eq(r + 10, zero, 124);
	} else {
		if (hc->how == HS_INFO_GO) {
			ck_assert_uint_eq(cl_info_go(fd, OPT_INFO, hc->name,
						     hc->infos, hc->nr_infos,
						     &in),
					  REP_ACK);
			check_info(&in);
			/* Still haggling: INFO does not start transmission. */
			ck_assert_uint_eq(stats().handshakes, 0);
		}
		ck_assert_uint_eq(cl_info_go(fd, OPT_GO, hc->name, hc->infos,
					     hc->nr_infos, &in),
				  REP_ACK);
		/* Block sizes come whether asked for or not. */
		check_info(&in);
		ck_assert(in.got_name == want_name);
		if (want_name)
			ck_assert_str_eq(in.name, EXPORT);
		ck_assert(in.got_desc == want_desc);
		if (want_desc)
			ck_assert_str_eq(in.desc, "test export");
	}
	ck_assert_uint_eq(stats().handshakes, 1);
	cl_read_check(fd, 7, 8192, BLK);
	close(fd);
	env_stop();
}
END_TEST

static const uint32_t bad_flags[] = { 4, C_FIXED | 8, 0x80000000u, REQ_MAGIC };

START_TEST(test_bad_client_flags)
{
	int fd;

	env_start();
	fd = env_client();
	cl_greeting(fd);
	cl_flags(fd, bad_flags[_i]);
	cl_expect_eof(fd);
	ck_assert_uint_eq(stats().protocol_errors, 1);
	ck_assert_uint_eq(stats().conns_open, 0);
	close(fd);
	env_stop();
}
END_TEST

START_TEST(test_opt_list)
{
	uint8_t b[256], junk[4] = { 0 };
	uint32_t len;
	struct info in;
	int fd;

	env_start();
	fd = env_client();
	cl_greeting(fd);
	cl_flags(fd, C_FIXED | C_NO_ZEROES);
	cl_opt(fd, OPT_LIST, NULL, 0);
	ck_assert_uint_eq(cl_opt_reply(fd, OPT_LIST, b, sizeof(b), &len),
			  REP_SERVER);
	ck_assert_uint_eq(gb32(b), 4);
	ck_assert_uint_eq(len, 4 + 4 + strlen("test export"));
	ck_assert_mem_eq(b + 4, EXPORT, 4);
	ck_assert_mem_eq(b + 8, "test export", strlen("test export"));
	ck_assert_uint_eq(cl_opt_reply(fd, OPT_LIST, b, sizeof(b), &len),
			  REP_ACK);
	ck_assert_uint_eq(len, 0);
	/* LIST takes no data */
	cl_opt(fd, OPT_LIST, junk, sizeof(junk));
	ck_assert_uint_eq(cl_opt_reply(fd, OPT_LIST, b, sizeof(b), &len),
			  REP_ERR_INVALID);
	ck_assert_uint_eq(cl_info_go(fd, OPT_GO, EXPORT, NULL, 0, &in),
			  REP_ACK);
	cl_read_check(fd, 1, 0, BLK);
	close(fd);
	env_stop();
}
END_TEST

START_TEST(test_opt_abort)
{
	uint8_t b[16];
	uint32_t len;
	int fd;

	env_start();
	fd = env_client();
	cl_greeting(fd);
	cl_flags(fd, C_FIXED | C_NO_ZEROES);
	cl_opt(fd, OPT_ABORT, NULL, 0);
	ck_assert_uint_eq(cl_opt_reply(fd, OPT_ABORT, b, sizeof(b), &len),
			  REP_ACK);
	cl_expect_eof(fd);
	ck_assert_uint_eq(stats().protocol_errors, 0);
	close(fd);
	env_stop();
}
END_TEST

/* STARTTLS, STRUCTURED_REPLY, meta contexts, extended headers, junk. */
static const uint32_t unsup_opts[] = { 5, 8, 9, 10, 11, 4, 0, 0x12345 };

START_TEST(test_opt_unsupported)
{
	uint8_t data[100], b[256];
	uint32_t len, opt = unsup_opts[_i];
	struct info in;
	int fd;

	memset(data, 0x5a, sizeof(data));
	env_start();
	fd = env_client();
	cl_greeting(fd);
	cl_flags(fd, C_FIXED | C_NO_ZEROES);
	cl_opt(fd, opt, NULL, 0);
	ck_assert_uint_eq(cl_opt_reply(fd, opt, b, sizeof(b), &len),
			  REP_ERR_UNSUP);
	/* with data, which is skipped */
	cl_opt(fd, opt, data, sizeof(data));
	ck_assert_uint_eq(cl_opt_reply(fd, opt, b, sizeof(b), &len),
			  REP_ERR_UNSUP);
	ck_assert_uint_eq(cl_info_go(fd, OPT_GO, EXPORT, NULL, 0, &in),
			  REP_ACK);
	cl_read_check(fd, 1, 0, BLK);
	close(fd);
	env_stop();
}
END_TEST

/* The cap is checked on the header: the server closes without waiting
 * for (or allocating) the body. */
static const struct {
	uint32_t opt, len;
} big_opts[] = {
	{ OPT_GO, 0xffffffffu },   { OPT_INFO, (64u << 10) + 1 },
	{ OPT_LIST, 0x80000000u }, { 0x12345, 0xfffffff0u },
	{ OPT_EXPORT_NAME, 4097 }, /* names are at most 4096 bytes */
};

START_TEST(test_opt_too_long)
{
	uint8_t h[16];
	int fd;

	env_start();
	fd = env_client();
	cl_greeting(fd);
	cl_flags(fd, C_FIXED | C_NO_ZEROES);
	pb64(h, IHAVEOPT);
	pb32(h + 8, big_opts[_i].opt);
	pb32(h + 12, big_opts[_i].len);
	cl_send(fd, h, sizeof(h));
	cl_expect_eof(fd);
	ck_assert_uint_eq(stats().protocol_errors, 1);
	close(fd);
	env_stop();
}
END_TEST

/* An unknown option exactly at the cap is read (and dropped) whole. */
START_TEST(test_opt_at_cap)
{
	uint32_t cap = 64u << 10, len;
	uint8_t *data = calloc(1, cap), b[64];
	struct info in;
	int fd;

	env_start();
	fd = env_client();
	cl_greeting(fd);
	cl_flags(fd, C_FIXED | C_NO_ZEROES);
	cl_opt(fd, 0x777, data, cap);
	ck_assert_uint_eq(cl_opt_reply(fd, 0x777, b, sizeof(b), &len),
			  REP_ERR_UNSUP);
	ck_assert_uint_eq(cl_info_go(fd, OPT_GO, "", NULL, 0, &in), REP_ACK);
	cl_read_check(fd, 1, 0, BLK);
	free(data);
	close(fd);
	env_stop();
}
END_TEST

START_TEST(test_bad_names)
{
	uint8_t d[4200 + 8], b[256];
	uint32_t len;
	struct info in;
	int fd;

	env_start();
	fd = env_client();
	cl_greeting(fd);
	cl_flags(fd, C_FIXED | C_NO_ZEROES);
	/* a 4097-byte name in GO: invalid, the connection goes on */
	pb32(d, 4097);
	memset(d + 4, 'a', 4097);
	pb16(d + 4 + 4097, 0);
	cl_opt(fd, OPT_GO, d, 4 + 4097 + 2);
	ck_assert_uint_eq(cl_opt_reply(fd, OPT_GO, b, sizeof(b), &len),
			  REP_ERR_INVALID);
	/* a name length beyond the option */
	pb32(d, 100);
	memcpy(d + 4, "tank", 4);
	pb16(d + 8, 0);
	cl_opt(fd, OPT_INFO, d, 10);
	ck_assert_uint_eq(cl_opt_reply(fd, OPT_INFO, b, sizeof(b), &len),
			  REP_ERR_INVALID);
	/* an information count that does not match the length */
	pb32(d, 4);
	pb16(d + 8, 3);
	cl_opt(fd, OPT_GO, d, 10 + 2);
	ck_assert_uint_eq(cl_opt_reply(fd, OPT_GO, b, sizeof(b), &len),
			  REP_ERR_INVALID);
	/* too short to hold a name length and a count */
	cl_opt(fd, OPT_GO, d, 5);
	ck_assert_uint_eq(cl_opt_reply(fd, OPT_GO, b, sizeof(b), &len),
			  REP_ERR_INVALID);
	/* wrong names */
	ck_assert_uint_eq(cl_info_go(fd, OPT_INFO, "nope", NULL, 0, &in),
			  REP_ERR_UNKNOWN);
	ck_assert(!in.got_export);
	ck_assert_uint_eq(cl_info_go(fd, OPT_GO, "tan", NULL, 0, &in),
			  REP_ERR_UNKNOWN);
	ck_assert_uint_eq(cl_info_go(fd, OPT_GO, "tankX", NULL, 0, &in),
			  REP_ERR_UNKNOWN);
	ck_assert_uint_eq(stats().handshakes, 0);
	/* and the right one still works */
	ck_assert_uint_eq(cl_info_go(fd, OPT_GO, EXPORT, NULL, 0, &in),
			  REP_ACK);
	cl_read_check(fd, 1, 0, BLK);
	close(fd);

	/* EXPORT_NAME cannot answer an error: a wrong name closes */
	fd = env_client();
	cl_greeting(fd);
	cl_flags(fd, C_FIXED | C_NO_ZEROES);
	cl_opt(fd, OPT_EXPORT_NAME, "nope", 4);
	cl_expect_eof(fd);
	close(fd);
	env_stop();
}
END_TEST

START_TEST(test_not_fixed_newstyle)
{
	int fd;

	env_start();
	fd = env_client();
	cl_greeting(fd);
	cl_flags(fd, 0);
	/* only EXPORT_NAME is valid without fixed newstyle */
	cl_opt(fd, OPT_LIST, NULL, 0);
	cl_expect_eof(fd);
	close(fd);
	env_stop();
}
END_TEST

START_TEST(test_cmd_before_handshake)
{
	int fd;

	env_start();
	/* after the client flags, in place of an option */
	fd = env_client();
	cl_greeting(fd);
	cl_flags(fd, C_FIXED | C_NO_ZEROES);
	cl_req(fd, 0, CMD_READ, 1, 0, BLK, NULL);
	cl_expect_eof(fd);
	close(fd);
	/* in place of the client flags */
	fd = env_client();
	cl_greeting(fd);
	cl_req(fd, 0, CMD_WRITE, 1, 0, BLK, NULL);
	cl_expect_eof(fd);
	close(fd);
	/* after OPT_INFO, which does not end the handshake */
	fd = env_client();
	cl_greeting(fd);
	cl_flags(fd, C_FIXED | C_NO_ZEROES);
	{
		struct info in;

		ck_assert_uint_eq(cl_info_go(fd, OPT_INFO, EXPORT, NULL, 0,
					     &in),
				  REP_ACK);
	}
	cl_req(fd, 0, CMD_READ, 1, 0, BLK, NULL);
	cl_expect_eof(fd);
	close(fd);
	ck_assert_uint_eq(tb.calls[OP_READ], 0);
	ck_assert_uint_eq(stats().protocol_errors, 3);
	env_stop();
}
END_TEST

/* Bytes sent a few at a time: the state machine resumes anywhere. */
START_TEST(test_trickle)
{
	uint8_t msg[200], *p = msg, b[BLK];
	uint64_t cookie;
	size_t i, n;
	int fd;

	env_start();
	fd = env_client();
	cl_greeting(fd);
	pb32(p, C_FIXED | C_NO_ZEROES);
	p += 4;
	pb64(p, IHAVEOPT);
	pb32(p + 8, OPT_GO);
	pb32(p + 12, 6);
	pb32(p + 16, 0);
	pb16(p + 20, 0);
	p += 22;
	pb32(p, REQ_MAGIC);
	pb16(p + 4, 0);
	pb16(p + 6, CMD_READ);
	pb64(p + 8, 0xabcdef0123456789ull);
	pb64(p + 16, BLK);
	pb32(p + 24, BLK);
	p += 28;
	n = (size_t)(p - msg);
	for (i = 0; i < n; i += 3) {
		cl_send(fd, msg + i, i + 3 <= n ? 3 : n - i);
		pump_ms(1);
	}
	/* INFO_EXPORT, INFO_BLOCK_SIZE, ACK, then the read's reply */
	{
		uint8_t rb[64];
		uint32_t len;

		ck_assert_uint_eq(cl_opt_reply(fd, OPT_GO, rb, sizeof(rb),
					       &len),
				  REP_INFO);
		ck_assert_uint_eq(cl_opt_reply(fd, OPT_GO, rb, sizeof(rb),
					       &len),
				  REP_INFO);
		ck_assert_uint_eq(cl_opt_reply(fd, OPT_GO, rb, sizeof(rb),
					       &len),
				  REP_ACK);
	}
	ck_assert_uint_eq(cl_reply(fd, &cookie), 0);
	ck_assert_uint_eq(cookie, 0xabcdef0123456789ull);
	cl_recv_all(fd, b, BLK);
	ck_assert_mem_eq(b, tb.data + BLK, BLK);
	close(fd);
	env_stop();
}
END_TEST

/* ---- transmission ---- */

static const enum tb_mode modes[] = { TB_NOW, TB_DEFER };

START_TEST(test_commands)
{
	uint32_t big = 1u << 20;
	uint8_t *pat = malloc(big), zero[BLK] = { 0 };
	struct za_nbd_stats st;
	unsigned flushes;
	int fd;

	env_start();
	tb.mode = modes[_i];
	fd = env_connect();
	memset(pat, 0xab, big);

	cl_req(fd, 0, CMD_WRITE, 1, BLK, 2 * BLK, pat);
	cl_reply_eq(fd, 1, 0);
	ck_assert(!tb.last_fua);
	ck_assert_mem_eq(tb.data + BLK, pat, 2 * BLK);
	cl_read_check(fd, 2, 0, 4 * BLK);

	memset(pat, 0xcd, big);
	cl_req(fd, F_FUA, CMD_WRITE, 3, 0, BLK, pat);
	cl_reply_eq(fd, 3, 0);
	ck_assert(tb.last_fua);

	/* the whole export in one write: payload read straight in, and
	 * from there on through a receive ring (small ones did not start
	 * it) */
	ck_assert_uint_eq(stats().rx_rings, 0);
	cl_req(fd, 0, CMD_WRITE, 4, 0, big, pat);
	cl_reply_eq(fd, 4, 0);
	ck_assert_uint_eq(stats().rx_rings, 1);
	ck_assert_mem_eq(tb.data, pat, big);
	cl_read_check(fd, 5, 0, big);

	cl_req(fd, F_NO_HOLE, CMD_WZ, 6, BLK, BLK, NULL);
	cl_reply_eq(fd, 6, 0);
	ck_assert(!tb.last_fua);
	ck_assert_mem_eq(tb.data + BLK, zero, BLK);
	cl_req(fd, F_FUA, CMD_WZ, 7, 3 * BLK, BLK, NULL);
	cl_reply_eq(fd, 7, 0);
	ck_assert(tb.last_fua);
	ck_assert_mem_eq(tb.data + 3 * BLK, zero, BLK);

	flushes = tb.calls[OP_FLUSH];
	cl_req(fd, 0, CMD_FLUSH, 8, 0, 0, NULL);
	cl_reply_eq(fd, 8, 0);
	ck_assert_uint_eq(tb.calls[OP_FLUSH], flushes + 1);
	/* FUA on FLUSH and READ is accepted (and meaningless) */
	cl_req(fd, F_FUA, CMD_FLUSH, 9, 0, 0, NULL);
	cl_reply_eq(fd, 9, 0);
	cl_req(fd, F_FUA, CMD_READ, 10, 0, BLK, NULL);
	cl_reply_eq(fd, 10, 0);
	{
		uint8_t b[BLK];

		cl_recv_all(fd, b, BLK);
	}

	cl_req(fd, 0, CMD_TRIM, 11, 8 * BLK, 4 * BLK, NULL);
	cl_reply_eq(fd, 11, 0);
	ck_assert_uint_eq(tb.calls[OP_TRIM], 1);
	/* TRIM with FUA: the trim, then a flush, then the reply */
	flushes = tb.calls[OP_FLUSH];
	cl_req(fd, F_FUA, CMD_TRIM, 12, 8 * BLK, BLK, NULL);
	cl_reply_eq(fd, 12, 0);
	ck_assert_uint_eq(tb.calls[OP_TRIM], 2);
	ck_assert_uint_eq(tb.calls[OP_FLUSH], flushes + 1);

	st = stats();
	ck_assert_uint_eq(st.cmds[ZA_NBD_CMD_WRITE], 3);
	ck_assert_uint_eq(st.cmds[ZA_NBD_CMD_READ], 3);
	ck_assert_uint_eq(st.cmds[ZA_NBD_CMD_WRITE_ZEROES], 2);
	ck_assert_uint_eq(st.cmds[ZA_NBD_CMD_FLUSH], 2);
	ck_assert_uint_eq(st.cmds[ZA_NBD_CMD_TRIM], 2);
	ck_assert_uint_eq(st.write_bytes, 3 * BLK + big);
	ck_assert_uint_eq(st.read_bytes, 5 * BLK + big);
	ck_assert_uint_eq(st.zero_bytes, 2 * BLK);
	ck_assert_uint_eq(st.trim_bytes, 5 * BLK);
	ck_assert_uint_eq(st.errors, 0);

	/* DISC: no reply, the server closes */
	cl_req(fd, 0, CMD_DISC, 13, 0, 0, NULL);
	cl_expect_eof(fd);
	ck_assert_uint_eq(stats().cmds[ZA_NBD_CMD_DISC], 1);
	ck_assert_uint_eq(stats().conns_open, 0);
	free(pat);
	close(fd);
	env_stop();
}
END_TEST

START_TEST(test_out_of_order)
{
	static const unsigned order[] = { 2, 0, 3, 1 };
	uint8_t b[BLK];
	uint64_t cookie;
	unsigned i;
	int fd;

	env_start();
	tb.mode = TB_HOLD;
	fd = env_connect();
	for (i = 0; i < 4; i++)
		cl_req(fd, 0, CMD_READ, 100 + i, (uint64_t)i * BLK, BLK, NULL);
	pump_until_held(4);
	ck_assert_uint_eq(tb.nr_held, 4);
	cl_expect_quiet(fd, 5);
	for (i = 0; i < 4; i++) {
		unsigned k = order[i];

		tb_release(k, 0);
		ck_assert_uint_eq(cl_reply(fd, &cookie), 0);
		ck_assert_uint_eq(cookie, 100 + k);
		cl_recv_all(fd, b, BLK);
		ck_assert_mem_eq(b, tb.data + (uint64_t)k * BLK, BLK);
	}
	/* a write overtaken by a flush sent after it */
	tb.nr_held = 0;
	memset(b, 0x11, sizeof(b));
	cl_req(fd, 0, CMD_WRITE, 200, 0, BLK, b);
	cl_req(fd, 0, CMD_FLUSH, 201, 0, 0, NULL);
	pump_until_held(2);
	tb_release(1, 0);
	cl_reply_eq(fd, 201, 0);
	tb_release(0, 0);
	cl_reply_eq(fd, 200, 0);
	close(fd);
	env_stop();
}
END_TEST

#define SZ TB_SIZE
#define TOP (UINT64_MAX & ~(uint64_t)(BLK - 1))
#define W_EINVAL 22u
#define W_ENOSPC 28u

static const struct bad_req {
	uint16_t type, flags;
	uint64_t off;
	uint32_t len;
	uint32_t want;
	bool payload;
} bad_reqs[] = {
	/* ranges: none of these may wrap around */
	{ CMD_READ, 0, UINT64_MAX - 1, BLK, W_EINVAL, false },
	{ CMD_READ, 0, TOP, BLK, W_EINVAL, false },
	{ CMD_READ, 0, SZ, BLK, W_EINVAL, false },
	{ CMD_READ, 0, SZ - BLK, 2 * BLK, W_EINVAL, false },
	{ CMD_READ, 0, BLK, 0xfffff000u, W_EINVAL, false },
	{ CMD_WRITE, 0, SZ, BLK, W_ENOSPC, true },
	{ CMD_WRITE, 0, TOP, BLK, W_ENOSPC, true },
	{ CMD_WRITE, 0, UINT64_MAX - 1, BLK, W_EINVAL, true },
	{ CMD_WZ, 0, BLK, 0xfffff000u, W_ENOSPC, false },
	{ CMD_WZ, 0, TOP, 0xfffff000u, W_ENOSPC, false },
	{ CMD_WZ, 0, SZ, BLK, W_ENOSPC, false },
	{ CMD_TRIM, 0, TOP, 2 * BLK, W_EINVAL, false },
	{ CMD_TRIM, 0, 0, 0xfffff000u, W_EINVAL, false },
	{ CMD_TRIM, 0, SZ - BLK, 2 * BLK, W_EINVAL, false },
	/* alignment */
	{ CMD_READ, 0, 512, BLK, W_EINVAL, false },
	{ CMD_READ, 0, 0, 512, W_EINVAL, false },
	{ CMD_WRITE, 0, 0, 512, W_EINVAL, true },
	{ CMD_WRITE, 0, 1, BLK, W_EINVAL, true },
	{ CMD_TRIM, 0, 0, BLK + 1, W_EINVAL, false },
	{ CMD_WZ, 0, 2048, BLK, W_EINVAL, false },
	/* flags not valid for the command, or not advertised */
	{ CMD_READ, F_DF, 0, BLK, W_EINVAL, false },
	{ CMD_WRITE, F_NO_HOLE, 0, BLK, W_EINVAL, true },
	{ CMD_TRIM, F_NO_HOLE, 0, BLK, W_EINVAL, false },
	{ CMD_WZ, 1u << 4, 0, BLK, W_EINVAL, false }, /* FAST_ZERO */
	{ CMD_FLUSH, 0x8000, 0, 0, W_EINVAL, false },
	/* unknown and unsupported commands */
	{ CMD_CACHE, 0, 0, BLK, W_EINVAL, false },
	{ 7, 0, 0, BLK, W_EINVAL, false }, /* BLOCK_STATUS */
	{ 8, 0, 0, 0, W_EINVAL, false },
	{ 0xffff, 0, 0, 0, W_EINVAL, false },
	/* zero lengths: a no-op success, the backend is not called */
	{ CMD_READ, 0, 0, 0, 0, false },
	{ CMD_WRITE, 0, BLK, 0, 0, false },
	{ CMD_TRIM, 0, 0, 0, 0, false },
	{ CMD_WZ, 0, SZ, 0, 0, false },
	/* the last block is fine */
	{ CMD_READ, 0, SZ - BLK, BLK, 0, false },
	{ CMD_WRITE, 0, SZ - BLK, BLK, 0, true },
	{ CMD_TRIM, 0, SZ - 2 * BLK, 2 * BLK, 0, false },
};
#define NR_BAD_REQS (int)(sizeof(bad_reqs) / sizeof(bad_reqs[0]))

START_TEST(test_request_checks)
{
	const struct bad_req *q = &bad_reqs[_i];
	uint8_t *payload = NULL;
	unsigned calls_before = 0, calls_after = 0, i;
	int fd;

	env_start();
	fd = env_connect();
	if (q->payload) {
		payload = calloc(1, q->len);
		ck_assert_ptr_nonnull(payload);
	}
	for (i = 0; i < NR_OPS; i++)
		calls_before += tb.calls[i];
	cl_req(fd, q->flags, q->type, 42, q->off, q->len, payload);
	cl_reply_eq(fd, 42, q->want);
	if (q->type == CMD_READ && !q->want && q->len) {
		uint8_t *b = malloc(q->len);

		cl_recv_all(fd, b, q->len);
		free(b);
	}
	for (i = 0; i < NR_OPS; i++)
		calls_after += tb.calls[i];
	/* refused and empty requests never reach the backend */
	if (q->want || !q->len)
		ck_assert_uint_eq(calls_after, calls_before);
	else
		ck_assert_uint_eq(calls_after, calls_before + 1);
	ck_assert_uint_eq(stats().errors, q->want ? 1 : 0);
	/* and the connection is still in step */
	cl_read_check(fd, 43, 0, BLK);
	free(payload);
	close(fd);
	env_stop();
}
END_TEST

START_TEST(test_payload_limit)
{
	struct za_nbd_params p = { .max_payload_bytes = 64u << 10 };
	uint8_t *buf = calloc(1, 64u << 10);
	struct info in;
	int fd;

	/* default limit: 32 MiB; one block more is refused */
	env_start();
	fd = env_connect();
	cl_req(fd, 0, CMD_READ, 1, 0, (32u << 20) + BLK, NULL);
	cl_reply_eq(fd, 1, W_EINVAL);
	/* a WRITE that large cannot be kept in step with: hard disconnect,
	 * before a byte of the payload */
	cl_req(fd, 0, CMD_WRITE, 2, 0, (32u << 20) + BLK, NULL);
	cl_expect_eof(fd);
	ck_assert_uint_eq(stats().protocol_errors, 1);
	ck_assert_uint_eq(tb.calls[OP_WRITE], 0);
	close(fd);
	env_stop();

	/* a configured limit is advertised and enforced */
	env_start_with(&p);
	fd = env_client();
	cl_greeting(fd);
	cl_flags(fd, C_FIXED | C_NO_ZEROES);
	ck_assert_uint_eq(cl_info_go(fd, OPT_GO, "", NULL, 0, &in), REP_ACK);
	ck_assert_uint_eq(in.bmax, 64u << 10);
	cl_req(fd, 0, CMD_WRITE, 3, 0, 64u << 10, buf);
	cl_reply_eq(fd, 3, 0);
	cl_req(fd, 0, CMD_READ, 4, 0, (64u << 10) + BLK, NULL);
	cl_reply_eq(fd, 4, W_EINVAL);
	/* TRIM and WRITE_ZEROES carry no payload: not limited */
	cl_req(fd, 0, CMD_WZ, 5, 0, 512u << 10, NULL);
	cl_reply_eq(fd, 5, 0);
	cl_req(fd, 0, CMD_WRITE, 6, 0, (64u << 10) + BLK, NULL);
	cl_expect_eof(fd);
	close(fd);
	free(buf);
	env_stop();
}
END_TEST

START_TEST(test_bad_magic)
{
	uint8_t h[28] = { 0 };
	int fd;

	env_start();
	fd = env_connect();
	pb32(h, 0x25609514u);
	pb16(h + 6, CMD_READ);
	pb32(h + 24, BLK);
	cl_send(fd, h, sizeof(h));
	cl_expect_eof(fd);
	ck_assert_uint_eq(stats().protocol_errors, 1);
	ck_assert_uint_eq(tb.calls[OP_READ], 0);
	close(fd);
	env_stop();
}
END_TEST

static const struct {
	int err;
	uint32_t wire;
} errmap[] = {
	{ -EIO, 5 },	 { -ENOSPC, 28 },    { -EROFS, 1 },
	{ -EPERM, 1 },	 { -ENODEV, 5 },     { -ESHUTDOWN, 108 },
	{ -ENOMEM, 12 }, { -EOVERFLOW, 75 }, { -EINVAL, 22 },
	{ -EDQUOT, 28 }, { -EBADMSG, 5 },    { -ENODATA, 5 },
};

START_TEST(test_backend_errors)
{
	uint8_t b[BLK] = { 0 };
	int fd;

	env_start();
	tb.mode = TB_DEFER;
	tb.err = errmap[_i].err;
	fd = env_connect();
	/* a failed READ sends no data: the next reply follows at once */
	cl_req(fd, 0, CMD_READ, 1, 0, BLK, NULL);
	cl_reply_eq(fd, 1, errmap[_i].wire);
	cl_req(fd, 0, CMD_WRITE, 2, 0, BLK, b);
	cl_reply_eq(fd, 2, errmap[_i].wire);
	cl_req(fd, 0, CMD_FLUSH, 3, 0, 0, NULL);
	cl_reply_eq(fd, 3, errmap[_i].wire);
	/* TRIM + FUA whose trim fails: no flush after it */
	cl_req(fd, F_FUA, CMD_TRIM, 4, 0, BLK, NULL);
	cl_reply_eq(fd, 4, errmap[_i].wire);
	ck_assert_uint_eq(tb.calls[OP_FLUSH], 1);
	tb.err = 0;
	cl_read_check(fd, 5, 0, BLK);
	ck_assert_uint_eq(stats().errors, 4);
	ck_assert_uint_eq(stats().read_bytes, BLK);
	close(fd);
	env_stop();
}
END_TEST

/* The socket is not read while a connection is at its in-flight cap. */
START_TEST(test_inflight_cap)
{
	struct za_nbd_params p = { .max_inflight_bytes = 16 * BLK,
				   .max_inflight_reqs = 24 };
	uint8_t b[BLK];
	uint64_t cookie;
	unsigned i, done = 0;
	int fd;

	env_start_with(&p);
	tb.mode = TB_HOLD;
	fd = env_connect();
	for (i = 0; i < 32; i++)
		cl_req(fd, 0, CMD_READ, i, 0, BLK, NULL);
	pump_until_held(16);
	ck_assert_uint_eq(tb.nr_held, 16);
	ck_assert_uint_eq(stats().inflight, 16);
	/* once a reply is out (the client has not read it yet), one more
	 * request is read */
	tb_release(0, 0);
	pump_until_held(17);
	ck_assert_uint_eq(tb.nr_held, 17);
	while (done < 32) {
		for (i = 0; i < tb.nr_held; i++)
			if (tb.held[i])
				tb_release(i, 0);
		ck_assert_uint_eq(cl_reply(fd, &cookie), 0);
		cl_recv_all(fd, b, BLK);
		done++;
	}
	ck_assert_uint_eq(tb.nr_held, 32);
	/* commands without data count against the request cap */
	tb.nr_held = 0;
	for (i = 0; i < 30; i++)
		cl_req(fd, 0, CMD_FLUSH, i, 0, 0, NULL);
	pump_until_held(24);
	ck_assert_uint_eq(tb.nr_held, 24);
	for (i = 0; i < 24; i++)
		tb_release(i, 0);
	for (i = 0; i < 24; i++)
		ck_assert_uint_eq(cl_reply(fd, &cookie), 0);
	pump_until_held(30);
	ck_assert_uint_eq(tb.nr_held, 30);
	close(fd);
	env_stop();
}
END_TEST

/* The client leaves with commands at the backend, which completes later:
 * nothing may touch freed memory, and nothing may leak. */
START_TEST(test_disconnect_inflight)
{
	uint8_t *b = calloc(1, 256u << 10);
	int fd;

	env_start();
	tb.mode = TB_HOLD;
	fd = env_connect();
	cl_req(fd, 0, CMD_WRITE, 1, 0, BLK, b);
	cl_req(fd, 0, CMD_READ, 2, 0, 256u << 10, NULL);
	cl_req(fd, 0, CMD_FLUSH, 3, 0, 0, NULL);
	cl_req(fd, F_FUA, CMD_TRIM, 4, 0, BLK, NULL);
	/* and half of a write's payload */
	cl_req(fd, 0, CMD_WRITE, 5, 0, 256u << 10, NULL);
	cl_send(fd, b, 100u << 10);
	pump_until_held(4);
	ck_assert_uint_eq(tb.nr_held, 4);
	close(fd);
	pump_ms(10);
	ck_assert_uint_eq(stats().inflight, 4);
	/* complete in a scrambled order; replies go nowhere */
	tb_release(2, 0);
	pump_ms(2);
	tb_release(0, -EIO);
	tb_release(3, 0); /* the TRIM: no flush for a client that left */
	pump_ms(2);
	tb_release(1, 0);
	pump_ms(10);
	ck_assert_uint_eq(tb.calls[OP_FLUSH], 1);
	ck_assert_uint_eq(stats().inflight, 0);
	ck_assert_uint_eq(stats().conns_open, 0);
	free(b);
	env_stop();
}
END_TEST

/* The owner frees the server while commands are at the backend. */
START_TEST(test_free_inflight)
{
	uint8_t b[BLK] = { 0 };
	int fd, fd2;

	env_start();
	tb.mode = TB_HOLD;
	fd = env_connect();
	fd2 = env_client(); /* one still in the handshake */
	cl_req(fd, 0, CMD_WRITE, 1, 0, BLK, b);
	cl_req(fd, 0, CMD_READ, 2, 0, BLK, NULL);
	pump_until_held(2);
	ck_assert_uint_eq(tb.nr_held, 2);
	/* one completes and its reply is queued but not yet written */
	tb_release(0, 0);
	/* env_stop frees the server, then completes the other */
	env_stop();
	close(fd);
	close(fd2);
}
END_TEST

/* DISC: what is in flight is answered before the close. */
START_TEST(test_disc_drains)
{
	uint8_t b[BLK];
	int fd;

	env_start();
	tb.mode = TB_HOLD;
	fd = env_connect();
	cl_req(fd, 0, CMD_READ, 1, BLK, BLK, NULL);
	cl_req(fd, 0, CMD_DISC, 2, 0, 0, NULL);
	pump_until_held(1);
	ck_assert_uint_eq(tb.nr_held, 1);
	cl_expect_quiet(fd, 5);
	tb_release(0, 0);
	cl_reply_eq(fd, 1, 0);
	cl_recv_all(fd, b, BLK);
	ck_assert_mem_eq(b, tb.data + BLK, BLK);
	cl_expect_eof(fd);
	close(fd);
	env_stop();
}
END_TEST

/* A client that half-closes still gets its replies. */
START_TEST(test_half_close)
{
	uint8_t b[BLK];
	int fd;

	env_start();
	tb.mode = TB_DEFER;
	fd = env_connect();
	cl_req(fd, 0, CMD_READ, 1, 0, BLK, NULL);
	shutdown(fd, SHUT_WR);
	cl_reply_eq(fd, 1, 0);
	cl_recv_all(fd, b, BLK);
	cl_expect_eof(fd);
	close(fd);
	env_stop();
}
END_TEST

START_TEST(test_shutdown)
{
	uint8_t b[BLK] = { 0 }, rb[64];
	uint32_t len;
	struct info in;
	int fd, fd2;

	env_start();
	tb.mode = TB_HOLD;
	fd = env_connect();
	fd2 = env_client();
	cl_greeting(fd2);
	cl_flags(fd2, C_FIXED | C_NO_ZEROES);
	cl_req(fd, 0, CMD_READ, 1, 0, BLK, NULL);
	pump_until_held(1);
	ck_assert_uint_eq(tb.nr_held, 1);
	za_nbd_server_shutdown(srv);
	/* new commands: ESHUTDOWN, a write's payload still consumed */
	cl_req(fd, 0, CMD_WRITE, 2, 0, BLK, b);
	cl_reply_eq(fd, 2, 108);
	cl_req(fd, 0, CMD_FLUSH, 3, 0, 0, NULL);
	cl_reply_eq(fd, 3, 108);
	/* in flight: finishes normally */
	tb_release(0, 0);
	cl_reply_eq(fd, 1, 0);
	cl_recv_all(fd, b, BLK);
	ck_assert_uint_eq(stats().inflight, 0);
	/* options get ERR_SHUTDOWN; ABORT still works */
	ck_assert_uint_eq(cl_info_go(fd2, OPT_GO, EXPORT, NULL, 0, &in),
			  REP_ERR_SHUTDOWN);
	cl_opt(fd2, OPT_LIST, NULL, 0);
	ck_assert_uint_eq(cl_opt_reply(fd2, OPT_LIST, rb, sizeof(rb), &len),
			  REP_ERR_SHUTDOWN);
	cl_opt(fd2, OPT_ABORT, NULL, 0);
	ck_assert_uint_eq(cl_opt_reply(fd2, OPT_ABORT, rb, sizeof(rb), &len),
			  REP_ACK);
	cl_expect_eof(fd2);
	/* no more adoption through listeners; adopt is still allowed */
	close(fd);
	close(fd2);
	env_stop();
}
END_TEST

START_TEST(test_handshake_timeout)
{
	struct za_nbd_params p = { .handshake_timeout_s = 0.3 };
	uint64_t t0;
	int fd, fd2, fd3;

	env_start_with(&p);
	fd = env_client();
	cl_greeting(fd);
	fd2 = env_connect(); /* finished its handshake: no timeout */
	fd3 = env_client(); /* stalls halfway through an option */
	cl_greeting(fd3);
	cl_flags(fd3, C_FIXED);
	cl_send(fd3, "IHAVE", 5);
	t0 = za_io_now_ns();
	cl_expect_eof(fd);
	cl_expect_eof(fd3);
	ck_assert_uint_lt(za_io_now_ns() - t0, 3000000000ull);
	ck_assert_uint_eq(stats().handshake_timeouts, 2);
	pump_ms(400);
	cl_read_check(fd2, 1, 0, BLK);
	close(fd);
	close(fd2);
	close(fd3);
	env_stop();
}
END_TEST

static int unix_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	nonblock(fd);
	return fd;
}

START_TEST(test_conn_cap_unix)
{
	struct za_nbd_params p = { .max_conns = 2 };
	char dir[] = "/tmp/za-nbd-test.XXXXXX", path[128];
	int a, b, c, d;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/s.sock", dir);
	env_start_with(&p);
	ck_assert_int_eq(za_nbd_listen_unix(srv, path, 0600), 0);
	a = unix_connect(path);
	cl_greeting(a);
	b = unix_connect(path);
	cl_greeting(b);
	c = unix_connect(path);
	cl_expect_eof(c); /* over the cap: closed without a greeting */
	ck_assert_uint_eq(stats().conns_refused, 1);
	ck_assert_uint_eq(stats().conns_open, 2);
	close(a);
	pump_ms(10);
	d = unix_connect(path);
	cl_greeting(d);
	cl_flags(d, C_FIXED | C_NO_ZEROES);
	{
		struct info in;

		ck_assert_uint_eq(cl_info_go(d, OPT_GO, EXPORT, NULL, 0, &in),
				  REP_ACK);
	}
	cl_read_check(d, 1, 0, BLK);
	/* not a socket: refused, left alone */
	{
		char f[160];
		FILE *fp;

		snprintf(f, sizeof(f), "%s/file", dir);
		fp = fopen(f, "w");
		ck_assert_ptr_nonnull(fp);
		fclose(fp);
		ck_assert_int_eq(za_nbd_listen_unix(srv, f, 0600), -EEXIST);
		unlink(f);
	}
	close(b);
	close(c);
	close(d);
	env_stop();
	/* the server removed its socket */
	ck_assert_int_ne(access(path, F_OK), 0);
	rmdir(dir);
}
END_TEST

START_TEST(test_tcp)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	uint16_t port = 0;
	int fd;

	env_start();
	ck_assert_int_eq(za_nbd_listen_tcp(srv, NULL, "0", &port), 0);
	ck_assert_uint_ne(port, 0);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	sa.sin_port = htons(port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	nonblock(fd);
	cl_greeting(fd);
	cl_flags(fd, C_FIXED | C_NO_ZEROES);
	{
		struct info in;

		ck_assert_uint_eq(cl_info_go(fd, OPT_GO, "", NULL, 0, &in),
				  REP_ACK);
	}
	cl_read_check(fd, 1, 4 * BLK, 2 * BLK);
	close(fd);
	ck_assert_int_lt(
		za_nbd_listen_tcp(srv, "127.0.0.1", "no-such-port", NULL), 0);
	env_stop();
}
END_TEST

START_TEST(test_several_conns)
{
	uint8_t b[BLK];
	int fds[4];
	unsigned i;

	env_start();
	tb.mode = TB_DEFER;
	for (i = 0; i < 4; i++)
		fds[i] = env_connect();
	for (i = 0; i < 4; i++) {
		memset(b, (int)i + 1, sizeof(b));
		cl_req(fds[i], 0, CMD_WRITE, i, (uint64_t)i * BLK, BLK, b);
	}
	for (i = 0; i < 4; i++)
		cl_reply_eq(fds[i], i, 0);
	/* each sees the others' writes */
	for (i = 0; i < 4; i++) {
		cl_read_check(fds[i], 10 + i, 0, 4 * BLK);
		ck_assert_uint_eq(tb.data[(uint64_t)((i + 1) % 4) * BLK],
				  (i + 1) % 4 + 1);
	}
	ck_assert_uint_eq(stats().conns_open, 4);
	for (i = 0; i < 4; i++)
		close(fds[i]);
	pump_ms(10);
	ck_assert_uint_eq(stats().conns_open, 0);
	env_stop();
}
END_TEST

/* @len bytes of xorshift64 output from state @x, into @dst. */
static void fill_xorshift(uint8_t *dst, uint32_t len, uint64_t *x)
{
	uint32_t j;

	for (j = 0; j < len / 8; j++) {
		*x ^= *x << 13;
		*x ^= *x >> 7;
		*x ^= *x << 17;
		memcpy(dst + 8 * j, x, 8);
	}
}

/*
 * Loop: the backend always takes payloads at once, or at random, or
 * always and keeps them in the ring (2: za_nbd_req_keep(), let go of in
 * random order, the last ones after the connection closed, each checked
 * unchanged when let go of), each with the ring filled by the loop and
 * by a receive thread (nbd-rx.h). After a first large WRITE gives the
 * connection its ring, batches of up to four
 * WRITEs (4 KiB to 3 MiB, each in its own quarter of a 16 MiB export,
 * FUA at random) are sent back to back and their replies read: every
 * byte lands, through the ring in place (up to 2 MiB, when the backend
 * says it copies), through a request buffer (when it does not), or
 * straight into one (larger payloads).
 */
START_TEST(test_ring_payloads)
{
	const uint64_t size = 16u << 20, quarter = size / 4;
	/* _i / 3: the ring filled by the loop, or by a thread. */
	struct za_nbd_params p = { .rx_thread = _i / 3 };
	uint8_t *mirror = malloc(size), *src = malloc(quarter);
	unsigned seed = 99, batch, i, writes = 0, small = 0;
	uint64_t cookie = 1, x = 88172645463325252ull;
	int fd;

	ck_assert(mirror && src);
	memset(&tbc, 0, sizeof(tbc));
	tbc.random = _i % 3 == 1;
	tbc.keep = _i % 3 == 2;
	tbc.seed = 5;
	env_start_ops(&p, &tb_ops_copies, size);
	memcpy(mirror, tb.data, size);
	fd = env_connect();
	for (batch = 0; batch < 60; batch++) {
		unsigned n = 1 + (batch ? (unsigned)rand_r(&seed) % 4 : 0);

		for (i = 0; i < n; i++) {
			uint32_t len =
				batch ? (1 + (uint32_t)rand_r(&seed) % 768) *
						BLK :
					1u << 20;
			uint64_t off = i * quarter +
				       (uint64_t)rand_r(&seed) %
					       ((quarter - len) / BLK + 1) *
					       BLK;

			fill_xorshift(src, len, &x);
			memcpy(mirror + off, src, len);
			cl_req(fd, rand_r(&seed) % 2 ? F_FUA : 0, CMD_WRITE,
			       cookie + i, off, len, src);
			writes++;
			small += batch && len <= (2u << 20);
		}
		for (i = 0; i < n; i++) {
			uint64_t got;

			ck_assert_uint_eq(cl_reply(fd, &got), 0);
			ck_assert_uint_ge(got, cookie);
			ck_assert_uint_lt(got, cookie + n);
		}
		cookie += n;
	}
	ck_assert_mem_eq(tb.data, mirror, size);
	ck_assert_uint_eq(tb.calls[OP_WRITE], writes);
	ck_assert_uint_eq(stats().rx_rings, 1);
	/* Every payload of the ring's size after the first went in place
	 * when the backend said yes, and only then. */
	ck_assert_uint_eq(stats().rx_in_place, tbc.yes);
	ck_assert_uint_eq(tbc.yes + tbc.no, small);
	if (tbc.random)
		ck_assert(tbc.yes > 10 && tbc.no > 10);
	/* Most payloads were kept; some were refused (the ring must keep
	 * room for a whole 2 MiB one) and copied - the data above says
	 * both kinds landed right. */
	if (tbc.keep) {
		ck_assert_uint_eq(stats().rx_kept, tbc.kept_total);
		ck_assert_uint_gt(tbc.kept_total, small / 2);
		ck_assert_uint_lt(tbc.kept_total, small);
		/* What is kept fills the ring between lets-go: the server
		 * asked for them rather than wait for ever. */
		ck_assert_uint_gt(tbc.let_go, 0);
	}
	close(fd);
	pump_ms(10);
	ck_assert_uint_eq(stats().conns_open, 0);
	while (tbc.nr_kept)
		tb_kept_drop(tbc.nr_kept - 1);
	env_stop();
	free(mirror);
	free(src);
}
END_TEST

/*
 * Loop: the backend always takes payloads at once, or at random. With no
 * receive thread (no large WRITE), 200 WRITEs of 4-60 KiB are sent in
 * batches of up to eight and their replies read: payloads that arrived
 * whole with their header go to the backend from the input buffer when
 * it says it copies, the others through request buffers - every byte
 * lands either way.
 */
START_TEST(test_ibuf_payloads)
{
	const uint64_t size = 4u << 20;
	struct za_nbd_params p = { 0 };
	uint8_t *mirror = malloc(size), *src = malloc(64u << 10);
	unsigned seed = 7, i, sent = 0;
	uint64_t cookie = 1, x = 1234567;
	int fd;

	ck_assert(mirror && src);
	memset(&tbc, 0, sizeof(tbc));
	tbc.random = _i == 1;
	tbc.seed = 11;
	env_start_ops(&p, &tb_ops_copies, size);
	memcpy(mirror, tb.data, size);
	fd = env_connect();
	while (sent < 200) {
		unsigned n = 1 + (unsigned)rand_r(&seed) % 8;

		for (i = 0; i < n; i++) {
			uint32_t len = (1 + (uint32_t)rand_r(&seed) % 15) * BLK;
			uint64_t off = (uint64_t)rand_r(&seed) %
				       ((size - len) / BLK + 1) * BLK;

			fill_xorshift(src, len, &x);
			memcpy(mirror + off, src, len);
			cl_req(fd, 0, CMD_WRITE, cookie + i, off, len, src);
		}
		for (i = 0; i < n; i++) {
			uint64_t got;

			ck_assert_uint_eq(cl_reply(fd, &got), 0);
		}
		cookie += n;
		sent += n;
	}
	ck_assert_mem_eq(tb.data, mirror, size);
	ck_assert_uint_eq(tb.calls[OP_WRITE], sent);
	ck_assert_uint_eq(stats().rx_rings, 0);
	/* Most came whole with their header; a "no" sent them the long way. */
	ck_assert_uint_gt(stats().ibuf_in_place, sent / 4);
	ck_assert_uint_le(stats().ibuf_in_place, tbc.yes);
	if (tbc.random)
		ck_assert_uint_gt(tbc.no, 10);
	close(fd);
	env_stop();
	free(mirror);
	free(src);
}
END_TEST

START_TEST(test_params)
{
	struct za_nbd_params p = { .export_name = EXPORT };
	struct za_nbd_backend_ops ops = tb_ops;
	struct za_nbd_server *s;
	char *long_name = malloc(4098);

	za_log_set_level(ZA_LOG_ERR - 1); /* quiet: errors expected */
	ck_assert_int_eq(za_io_new(NULL, &io), 0);
	memset(long_name, 'x', 4097);
	long_name[4097] = '\0';
	p.export_name = long_name;
	ck_assert_int_eq(za_nbd_server_new(io, &p, &tb_ops, NULL, &s), -EINVAL);
	p.export_name = NULL;
	ck_assert_int_eq(za_nbd_server_new(io, &p, &tb_ops, NULL, &s), -EINVAL);
	p.export_name = EXPORT;
	p.pref_block_bytes = 6000;
	ck_assert_int_eq(za_nbd_server_new(io, &p, &tb_ops, NULL, &s), -EINVAL);
	p.pref_block_bytes = 2048;
	ck_assert_int_eq(za_nbd_server_new(io, &p, &tb_ops, NULL, &s), -EINVAL);
	p.pref_block_bytes = 0;
	ops.trim = NULL;
	ck_assert_int_eq(za_nbd_server_new(io, &p, &ops, NULL, &s), -EINVAL);
	ck_assert_int_eq(za_nbd_server_new(io, &p, &tb_ops, NULL, &s), 0);
	za_nbd_server_free(s);
	za_io_free(io);
	free(long_name);

	/* errno mapping of the values the protocol defines */
	ck_assert_uint_eq(za_nbd_errno_to_wire(0), 0);
	ck_assert_uint_eq(za_nbd_errno_to_wire(-EOPNOTSUPP), 22);
	ck_assert_uint_eq(za_nbd_errno_to_wire(-EFBIG), 28);
	ck_assert_uint_eq(za_nbd_errno_to_wire(-ETIMEDOUT), 5);
}
END_TEST

/*
 * Regression: the server could leave a WRITE whose payload it had read
 * completely unprocessed when its read budget ran out (src/nbd.c,
 * conn_read_cb(): NBD_READ_BUDGET recv() calls per wake-up). A payload of
 * 64 KiB or more is received straight into its buffer; when the last
 * recv() of a wake-up completed such a payload and no input was left
 * buffered, nothing came back to it: no new socket event arrives while
 * the client waits for the reply.
 *
 * Deterministic through a SOCK_SEQPACKET socketpair, where one recv()
 * returns one packet: @_i + 1 packets each holding one pipelined 4 KiB
 * WRITE (the last one also the header of a 64 KiB WRITE), then that
 * payload in one packet, all queued before the server reads anything.
 * One run (@_i + 2 == the budget) ends its budget on exactly the recv()
 * that completes the big payload; every run must see every write
 * answered and stored. Failed before the fix for @_i = 14.
 */
#define SP_Q_BYTES (256u << 10)
static uint8_t sp_q[SP_Q_BYTES];
static size_t sp_qlen;

/* @len bytes from a SEQPACKET socket, whatever its packets' sizes. */
static void sp_recv_all(int fd, void *buf, size_t len)
{
	uint64_t deadline = za_io_now_ns() + 2000000000ull;

	while (sp_qlen < len) {
		ssize_t n = recv(fd, sp_q + sp_qlen, SP_Q_BYTES - sp_qlen, 0);

		if (n > 0) {
			sp_qlen += (size_t)n;
			continue;
		}
		ck_assert_msg(n < 0 && errno == EAGAIN, "recv: %s",
			      n ? strerror(errno) : "EOF");
		ck_assert_msg(za_io_now_ns() < deadline,
			      "no answer: %zu of %zu bytes", sp_qlen, len);
		pump_ms(1);
	}
	memcpy(buf, sp_q, len);
	memmove(sp_q, sp_q + len, sp_qlen - len);
	sp_qlen -= len;
}

/* One packet, whole, without running the server's loop. */
static void sp_send(int fd, const void *buf, size_t len)
{
	ck_assert_int_eq(send(fd, buf, len, MSG_NOSIGNAL), (ssize_t)len);
}

static void sp_hdr(uint8_t *h, uint64_t cookie, uint64_t off, uint32_t len)
{
	pb32(h, REQ_MAGIC);
	pb16(h + 4, 0);
	pb16(h + 6, CMD_WRITE);
	pb64(h + 8, cookie);
	pb64(h + 16, off);
	pb32(h + 24, len);
}

START_TEST(test_budget_ends_on_payload)
{
	const unsigned small = (unsigned)_i + 1;
	const uint32_t big = 64u << 10;
	uint8_t *pkt = malloc(28 + BLK + 28), *bigbuf = malloc(big), g[18];
	bool answered[64] = { false };
	int sv[2], fd, sz = 4 << 20;
	unsigned i;

	ck_assert_ptr_nonnull(pkt);
	ck_assert_ptr_nonnull(bigbuf);
	env_start();
	tb.mode = TB_NOW;
	sp_qlen = 0;
	ck_assert_int_eq(
		socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	fd = sv[1];
	nonblock(fd);
	/* Room for every packet at once (best effort without privilege). */
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)))
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	ck_assert_int_eq(za_nbd_server_adopt(srv, sv[0]), 0);
	/* Handshake, the oldest way: one reply, no option replies. */
	sp_recv_all(fd, g, sizeof(g));
	ck_assert_uint_eq(gb64(g + 8), IHAVEOPT);
	pb32(pkt, C_FIXED | C_NO_ZEROES);
	sp_send(fd, pkt, 4);
	pb64(pkt, IHAVEOPT);
	pb32(pkt + 8, OPT_EXPORT_NAME);
	pb32(pkt + 12, 0);
	sp_send(fd, pkt, 16);
	sp_recv_all(fd, pkt, 10);
	ck_assert_uint_eq(gb64(pkt), TB_SIZE);
	pump_ms(5); /* the server reads nothing more until all is queued */

	for (i = 0; i < small; i++) {
		size_t len = 28 + BLK;

		sp_hdr(pkt, 1 + i, (uint64_t)i * BLK, BLK);
		memset(pkt + 28, 0x40 + (int)i, BLK);
		if (i == small - 1) {
			sp_hdr(pkt + len, 1000, TB_SIZE - big, big);
			len += 28;
		}
		sp_send(fd, pkt, len);
	}
	memset(bigbuf, 0xb1, big);
	sp_send(fd, bigbuf, big);

	for (i = 0; i <= small; i++) {
		uint64_t cookie;
		uint8_t h[16];

		sp_recv_all(fd, h, sizeof(h));
		ck_assert_uint_eq(gb32(h), REPLY_MAGIC);
		ck_assert_uint_eq(gb32(h + 4), 0);
		cookie = gb64(h + 8);
		ck_assert(cookie == 1000 || (cookie >= 1 && cookie <= small));
		cookie = cookie == 1000 ? 0 : cookie;
		ck_assert_msg(!answered[cookie], "a reply came twice");
		answered[cookie] = true;
	}
	for (i = 0; i < small; i++) {
		memset(pkt, 0x40 + (int)i, BLK);
		ck_assert_mem_eq(tb.data + (uint64_t)i * BLK, pkt, BLK);
	}
	ck_assert_mem_eq(tb.data + TB_SIZE - big, bigbuf, big);
	close(fd);
	free(pkt);
	free(bigbuf);
	env_stop();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("nbd");
	TCase *tc;

	/* Protocol violations are logged as warnings: keep the TAP clean. */
	za_log_set_level(ZA_LOG_ERR);

	tc = tcase_create("handshake");
	tcase_add_loop_test(tc, test_handshake, 0, NR_HS_CASES);
	tcase_add_loop_test(tc, test_bad_client_flags, 0,
			    (int)(sizeof(bad_flags) / sizeof(bad_flags[0])));
	tcase_add_test(tc, test_opt_list);
	tcase_add_test(tc, test_opt_abort);
	tcase_add_loop_test(tc, test_opt_unsupported, 0,
			    (int)(sizeof(unsup_opts) / sizeof(unsup_opts[0])));
	tcase_add_loop_test(tc, test_opt_too_long, 0,
			    (int)(sizeof(big_opts) / sizeof(big_opts[0])));
	tcase_add_test(tc, test_opt_at_cap);
	tcase_add_test(tc, test_bad_names);
	tcase_add_test(tc, test_not_fixed_newstyle);
	tcase_add_test(tc, test_cmd_before_handshake);
	tcase_add_test(tc, test_trickle);
	suite_add_tcase(s, tc);

	tc = tcase_create("transmission");
	tcase_add_loop_test(tc, test_commands, 0,
			    (int)(sizeof(modes) / sizeof(modes[0])));
	tcase_add_test(tc, test_out_of_order);
	tcase_add_loop_test(tc, test_budget_ends_on_payload, 0, 24);
	tcase_add_loop_test(tc, test_request_checks, 0, NR_BAD_REQS);
	tcase_add_test(tc, test_payload_limit);
	tcase_add_test(tc, test_bad_magic);
	tcase_add_loop_test(tc, test_backend_errors, 0,
			    (int)(sizeof(errmap) / sizeof(errmap[0])));
	tcase_add_test(tc, test_inflight_cap);
	tcase_add_test(tc, test_several_conns);
	tcase_add_loop_test(tc, test_ring_payloads, 0, 6);
	tcase_add_loop_test(tc, test_ibuf_payloads, 0, 2);
	suite_add_tcase(s, tc);

	tc = tcase_create("lifetime");
	tcase_add_test(tc, test_disconnect_inflight);
	tcase_add_test(tc, test_free_inflight);
	tcase_add_test(tc, test_disc_drains);
	tcase_add_test(tc, test_half_close);
	tcase_add_test(tc, test_shutdown);
	tcase_add_test(tc, test_handshake_timeout);
	tcase_add_test(tc, test_conn_cap_unix);
	tcase_add_test(tc, test_tcp);
	tcase_add_test(tc, test_params);
	suite_add_tcase(s, tc);
	return trun(s);
}
