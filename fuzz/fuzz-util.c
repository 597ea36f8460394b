// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz-util.c - the helpers of fuzz.h: quiet logging, the oracle's
 * failure report, superblock CRC fix-ups, and the scripted socket peer.
 *
 * The peer writes its script as fast as the server reads it and drains
 * what the server answers, so that a server which stops reading until
 * its replies are read (NBD's in-flight caps, the control socket's one
 * request at a time) always makes progress. It does not parse replies.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "byteorder.h"
#include "crc.h"
#include "fuzz.h"
#include "io.h"
#include "log.h"
#include "sb.h"

static void quiet_sink(enum za_log_level l, const char *msg)
{
	(void)l;
	(void)msg;
}

void za_fuzz_init(void)
{
	static bool done;

	if (done)
		return;
	done = true;
	if (!getenv("ZA_FUZZ_LOG"))
		za_log_set_sink(quiet_sink);
	else
		za_log_set_level(ZA_LOG_DEBUG);
}

void za_fuzz_fail(const char *file, int line, const char *what)
{
	fprintf(stderr, "%s:%d: fuzz oracle failed: %s\n", file, line, what);
	abort();
}

/* docs/format.md, "Member superblock": the CRC fields and what they cover. */
#define SB_HDR_CRC_OFF 16u
#define SB_TABLE_CRC_OFF 20u
#define SB_HDR_BYTES 4096u

void za_fuzz_sb_fix_crcs(uint8_t *rec)
{
	uint32_t c;

	za_put_le32(rec + SB_TABLE_CRC_OFF,
		    za_crc32c(rec + SB_HDR_BYTES,
			      ZA_SB_RECORD_BYTES - SB_HDR_BYTES));
	c = za_crc32c(rec, SB_HDR_CRC_OFF);
	c = za_crc32c_update(c, rec + SB_TABLE_CRC_OFF,
			     SB_HDR_BYTES - SB_TABLE_CRC_OFF);
	za_put_le32(rec + SB_HDR_CRC_OFF, c);
}

static void peer_shut(struct za_fuzz_peer *p)
{
	ev_io_stop(p->loop, &p->ww);
	if (!p->shut)
		shutdown(p->fd, SHUT_WR);
	p->shut = true;
}

static void peer_write_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct za_fuzz_peer *p = w->data;

	(void)loop;
	(void)revents;
	while (p->in_off < p->in_len) {
		ssize_t n = send(p->fd, p->in + p->in_off,
				 p->in_len - p->in_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n < 0) {
			/* EPIPE, ECONNRESET: the server hung up first. */
			break;
		}
		p->in_off += (size_t)n;
	}
	peer_shut(p);
}

static void peer_read_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct za_fuzz_peer *p = w->data;
	uint8_t buf[64 << 10];

	(void)loop;
	(void)revents;
	for (;;) {
		ssize_t n = recv(p->fd, buf, sizeof(buf), MSG_DONTWAIT);

		if (n > 0) {
			p->out_bytes += (uint64_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		/* 0 or ECONNRESET: the server closed its end. */
		p->eof = true;
		ev_io_stop(p->loop, &p->rw);
		peer_shut(p);
		return;
	}
}

int za_fuzz_peer_start(struct za_fuzz_peer *p, struct za_io *io,
		       const uint8_t *in, size_t len, int *server_fd)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	if (fcntl(sv[1], F_SETFL, fcntl(sv[1], F_GETFL) | O_NONBLOCK) < 0) {
		int err = -errno;

		close(sv[0]);
		close(sv[1]);
		return err;
	}
	p->loop = za_io_loop(io);
	p->fd = sv[1];
	p->in = in;
	p->in_len = len;
	p->in_off = 0;
	p->shut = false;
	p->eof = false;
	p->out_bytes = 0;
	ev_io_init(&p->rw, peer_read_cb, p->fd, EV_READ);
	p->rw.data = p;
	ev_io_init(&p->ww, peer_write_cb, p->fd, EV_WRITE);
	p->ww.data = p;
	ev_io_start(p->loop, &p->rw);
	ev_io_start(p->loop, &p->ww);
	*server_fd = sv[0];
	return 0;
}

void za_fuzz_peer_run(struct za_fuzz_peer *p, struct za_io *io)
{
	if (za_io_run_until(io, &p->eof, (uint64_t)(ZA_FUZZ_HANG_S * 1e9)))
		za_fuzz_fail(__FILE__, __LINE__,
			     "hang: the server did not close the connection "
			     "after the peer's EOF");
}

void za_fuzz_small_bufs(int fd)
{
	int v = 1; /* the kernel rounds it up to its minimum */

	(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
}

void za_fuzz_peer_stop(struct za_fuzz_peer *p)
{
	ev_io_stop(p->loop, &p->rw);
	ev_io_stop(p->loop, &p->ww);
	close(p->fd);
	p->fd = -1;
}
