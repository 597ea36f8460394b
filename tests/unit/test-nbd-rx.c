// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test-nbd-rx.c - the NBD receive thread (src/nbd-rx.c) on a socketpair:
 * a stream written in random pieces comes out whole and in order whatever
 * mix of small reads and large direct ("target") reads takes it, with a
 * ring smaller than one read or larger than many; the end of input and an
 * error reach the reader after the bytes before them; stopping a thread
 * that waits for input, or that holds a half-filled target, returns.
 * Payloads taken in place (peek, skip) are whole and contiguous across
 * the ring's wrap, and a reader waiting for one is woken once it is all
 * there, not for each piece. A ring is kept for the next connection once
 * nothing holds it.
 */
#include <check.h>

#include "tap.h"
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "io.h"
#include "nbd-rx.h"
#include "payload.h"

struct rig {
	struct za_io *io;
	struct za_nbd_rx *rx;
	bool pull; /* no thread: reads pull from the socket */
	int fd[2]; /* [0] the server's end, [1] the client's */
	bool woken;
	unsigned wakes;
};

static void wake(void *arg)
{
	struct rig *g = arg;

	g->woken = true;
	g->wakes++;
}

static void nonblock(int fd)
{
	ck_assert_int_eq(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK),
			 0);
}

static void rig_start(struct rig *g, size_t ring, int sndbuf, bool pull)
{
	memset(g, 0, sizeof(*g));
	g->pull = pull;
	ck_assert_int_eq(za_io_new(NULL, &g->io), 0);
	ck_assert_int_eq(
		socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, g->fd), 0);
	nonblock(g->fd[0]);
	nonblock(g->fd[1]);
	if (sndbuf)
		setsockopt(g->fd[1], SOL_SOCKET, SO_SNDBUF, &sndbuf,
			   sizeof(sndbuf));
	ck_assert_int_eq(za_nbd_rx_start(za_io_loop(g->io), g->fd[0], ring,
					 pull, wake, g, &g->rx),
			 0);
}

static void rig_stop(struct rig *g)
{
	za_nbd_rx_stop(g->rx);
	if (g->fd[1] >= 0)
		close(g->fd[1]);
	close(g->fd[0]);
	za_io_free(g->io);
}

/* Wait (at most @ms) for the thread to say something. Without one the
 * next read pulls what the socket holds: a millisecond is enough. */
static void rig_wait(struct rig *g, unsigned ms)
{
	g->woken = false;
	if (g->pull && ms > 1)
		ms = 1;
	za_io_run_until(g->io, &g->woken, (uint64_t)ms * 1000000ull);
}

static uint8_t stream_byte(uint64_t i)
{
	return (uint8_t)((i * 2654435761u) >> 13 ^ i >> 7);
}

/* The client sends the stream's next piece, of random size (up to 300
 * KiB, never past @total), as much of it as the socket takes now. */
static void send_piece(struct rig *g, uint8_t *src, uint64_t *sent,
		       uint64_t total, unsigned *seed)
{
	size_t k = 1 + (size_t)rand_r(seed) % (300u << 10), j;
	ssize_t n;

	if (k > total - *sent)
		k = (size_t)(total - *sent);
	for (j = 0; j < k; j++)
		src[j] = stream_byte(*sent + j);
	n = send(g->fd[1], src, k, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n > 0)
		*sent += (uint64_t)n;
	else
		ck_assert(n < 0 && errno == EAGAIN);
}

/* @n bytes at stream offset @off are what was sent there. */
static void check_bytes(const uint8_t *p, size_t n, uint64_t off)
{
	size_t j;

	for (j = 0; j < n; j++)
		if (p[j] != stream_byte(off + j))
			break;
	ck_assert_msg(j == n, "byte %llu of the stream differs",
		      (unsigned long long)(off + j));
}

/*
 * The next 28-byte header (fewer at the stream's end @total), as much of
 * it as has come: checked and counted in @got. True when it came whole.
 */
static bool take_header(struct rig *g, uint64_t total, uint64_t *got)
{
	/* Zeroed: gcc with ASan cannot see that have stays 0 at len 0. */
	uint8_t hdr[28] = { 0 };
	size_t len = sizeof(hdr), have = 0;
	ssize_t n;

	if (len > total - *got)
		len = total - *got;
	while (have < len) {
		n = za_nbd_rx_recv(g->rx, hdr + have, len - have, false);
		if (n == -EAGAIN)
			break;
		ck_assert_int_gt(n, 0);
		have += (size_t)n;
	}
	check_bytes(hdr, have, *got);
	*got += have;
	return have == len;
}

/*
 * Loop: ring size x client socket buffer. The client sends @total bytes
 * in random pieces (never blocking); the reader takes them with random
 * reads: small ones (<= 64 KiB, not direct) and large direct ones into a
 * fresh buffer each, as nbd.c does for headers and payloads.
 */
static const struct {
	size_t ring;
	int sndbuf;
} shapes[] = {
	{ 4096, 8192 },	 { 64u << 10, 0 },  { 256u << 10, 16384 },
	{ 2u << 20, 0 }, { 102400, 50000 },
};

START_TEST(test_stream_in_order)
{
	const size_t total = 16u << 20;
	struct rig g;
	uint8_t *src = malloc(1u << 20);
	uint64_t sent = 0, got = 0;
	unsigned seed = 1234 + (unsigned)_i, waits = 0;

	ck_assert_ptr_nonnull(src);
	rig_start(&g, shapes[_i / 2].ring, shapes[_i / 2].sndbuf, _i % 2);
	while (got < total) {
		/* Send a random piece, as much as the socket takes. */
		if (sent < total) {
			send_piece(&g, src, &sent, total, &seed);
			if (sent == total) {
				close(g.fd[1]);
				g.fd[1] = -1;
			}
		}
		/* One read: a payload (direct) or a header-sized gulp. */
		{
			bool direct = rand_r(&seed) % 2;
			size_t len = direct ? 1 + (size_t)rand_r(&seed) %
							      (512u << 10) :
					      1 + (size_t)rand_r(&seed) %
							      (64u << 10);
			uint8_t *dst = malloc(len);
			size_t have = 0;

			ck_assert_ptr_nonnull(dst);
			if (len > total - got)
				len = total - got;
			while (have < len) {
				ssize_t n = za_nbd_rx_recv(g.rx, dst + have,
							   len - have, direct);

				if (n > 0) {
					check_bytes(dst + have, (size_t)n,
						    got + have);
					have += (size_t)n;
					continue;
				}
				ck_assert_int_eq(n, -EAGAIN);
				if (sent < total)
					break; /* send more first */
				rig_wait(&g, 100);
				ck_assert_uint_lt(++waits, 100000);
			}
			/* A target lent must be finished before it is freed:
			 * nbd.c keeps reading the same payload. */
			while (have < len && direct) {
				ssize_t n = za_nbd_rx_recv(g.rx, dst + have,
							   len - have, true);

				if (n > 0) {
					check_bytes(dst + have, (size_t)n,
						    got + have);
					have += (size_t)n;
					continue;
				}
				ck_assert_int_eq(n, -EAGAIN);
				if (sent < total) {
					size_t k = total - sent < (64u << 10) ?
							   total - sent :
							   (64u << 10);
					ssize_t m;

					for (size_t j = 0; j < k; j++)
						src[j] = stream_byte(sent + j);
					m = send(g.fd[1], src, k,
						 MSG_NOSIGNAL | MSG_DONTWAIT);
					if (m > 0)
						sent += (size_t)m;
					if (sent == total && g.fd[1] >= 0) {
						close(g.fd[1]);
						g.fd[1] = -1;
					}
				}
				rig_wait(&g, 10);
				ck_assert_uint_lt(++waits, 100000);
			}
			got += have;
			free(dst);
		}
	}
	/* Then the end of input, however often asked. */
	for (int i = 0; i < 2; i++) {
		uint8_t b;
		ssize_t n;

		while ((n = za_nbd_rx_recv(g.rx, &b, 1, false)) == -EAGAIN)
			rig_wait(&g, 100);
		ck_assert_int_eq(n, 0);
	}
	ck_assert(za_nbd_rx_ready(g.rx, 1));
	ck_assert(g.pull || g.wakes > 0);
	rig_stop(&g);
	free(src);
}
END_TEST

/* The bytes before an abrupt end come first, then the end (not an error
 * for a peer that closed; ECONNRESET where the kernel says so). */
START_TEST(test_end_after_bytes)
{
	struct rig g;
	uint8_t buf[100], big[70000];
	ssize_t n;

	rig_start(&g, 4096, 0, _i);
	memset(big, 0x5a, sizeof(big));
	ck_assert_int_eq(send(g.fd[1], "hello", 5, MSG_NOSIGNAL), 5);
	close(g.fd[1]);
	g.fd[1] = -1;
	while ((n = za_nbd_rx_recv(g.rx, buf, sizeof(buf), false)) == -EAGAIN)
		rig_wait(&g, 100);
	ck_assert_int_eq(n, 5);
	ck_assert_mem_eq(buf, "hello", 5);
	/* A direct read at the end: no target is lent, the end comes. */
	while ((n = za_nbd_rx_recv(g.rx, big, sizeof(big), true)) == -EAGAIN)
		rig_wait(&g, 100);
	ck_assert_int_eq(n, 0);
	rig_stop(&g);
}
END_TEST

/* Stop returns whether the thread waits for input, holds a half-filled
 * target, or waits for room in a full ring. */
START_TEST(test_stop_anywhere)
{
	struct rig g;
	static uint8_t big[1u << 20], other[100000];
	ssize_t n;

	/* Waiting for input. */
	rig_start(&g, 65536, 0, false);
	rig_wait(&g, 10);
	ck_assert_int_eq(za_nbd_rx_recv(g.rx, big, 10, false), -EAGAIN);
	rig_stop(&g);

	/* A target lent and partly filled (from another buffer: the lent
	 * one is the thread's until it is accounted for). */
	rig_start(&g, 65536, 0, false);
	ck_assert_int_eq(za_nbd_rx_recv(g.rx, big, sizeof(big), true), -EAGAIN);
	ck_assert_int_eq(send(g.fd[1], other, 100000, MSG_NOSIGNAL), 100000);
	for (n = 0; n < 100000;) {
		ssize_t k =
			za_nbd_rx_recv(g.rx, big + n, sizeof(big) - n, true);

		if (k > 0)
			n += k;
		else
			rig_wait(&g, 100);
	}
	rig_stop(&g);

	/* A full ring, the client blocked behind it. */
	rig_start(&g, 4096, 0, false);
	while (send(g.fd[1], big, sizeof(big), MSG_NOSIGNAL | MSG_DONTWAIT) > 0)
		;
	rig_wait(&g, 10);
	ck_assert(za_nbd_rx_ready(g.rx, 1));
	rig_stop(&g);
}
END_TEST

/*
 * Loop: ring sizes. Headers of 28 bytes taken by recv, payloads of random
 * sizes up to half the ring taken in place: every byte where it belongs,
 * across the wrap, for 8 MiB.
 */
static const size_t peek_rings[] = { 4096, 65536, 102400, 4u << 20 };

/*
 * The stream as headers and payloads of random size (up to half the
 * ring): the next payload, whole and checked, in place; NULL after a
 * short wait while it (or its header) has not all come. @want is 0
 * while a header is due, else the payload's size.
 */
static const void *next_payload(struct rig *g, size_t ring, uint64_t total,
				uint64_t *got, size_t *want, unsigned *seed)
{
	const void *p;
	ssize_t n;

	if (!*want) {
		if (!take_header(g, total, got)) {
			rig_wait(g, 10);
			return NULL;
		}
		*want = 1 + (size_t)rand_r(seed) % (ring / 2);
		if (*want > total - *got)
			*want = total - *got;
		if (!*want)
			return NULL; /* the stream ended with the header */
	}
	n = za_nbd_rx_peek(g->rx, *want, &p);
	if (n == -EAGAIN) {
		rig_wait(g, 10);
		return NULL;
	}
	ck_assert_int_eq(n, (ssize_t)*want);
	check_bytes(p, *want, *got);
	return p;
}

START_TEST(test_peek_in_place)
{
	const size_t total = 8u << 20, ring = peek_rings[_i / 2];
	struct rig g;
	uint8_t *src = malloc(1u << 20);
	uint64_t sent = 0, got = 0;
	unsigned seed = 777 + (unsigned)_i;
	size_t want = 0; /* 0: a header next */

	ck_assert_ptr_nonnull(src);
	rig_start(&g, ring, 0, _i % 2);
	while (got < total) {
		const void *p;

		if (sent < total)
			send_piece(&g, src, &sent, total, &seed);
		p = next_payload(&g, ring, total, &got, &want, &seed);
		if (!p)
			continue;
		za_nbd_rx_skip(g.rx, want);
		got += want;
		want = 0;
	}
	rig_stop(&g);
	free(src);
}
END_TEST

/* A reader that waits for a whole payload is not woken for its pieces;
 * the end of input before it is all there ends the wait (0). */
/*
 * Loop over ring sizes: as test_peek_in_place, but payloads are kept
 * (za_nbd_rx_keep(), room for a half-ring payload reserved) and let go
 * of later in random order; each is checked unchanged when let go of,
 * so a thread that wrote into kept bytes fails. When the ring is full of
 * kept payloads (za_nbd_rx_starved()) all are let go of, as the export
 * does; the last ones only after the rig stopped.
 */
struct kept {
	struct za_payload *pl;
	const uint8_t *p;
	uint64_t off;
	size_t len;
};

static void kept_drop(struct kept *k, unsigned *nr, unsigned i)
{
	check_bytes(k[i].p, k[i].len, k[i].off);
	za_payload_put(k[i].pl);
	k[i] = k[--*nr];
}

START_TEST(test_keep_in_place)
{
	/* Enough half-ring payloads for the largest ring too. */
	const size_t ring = peek_rings[_i / 2],
		     total = ring < (1u << 20) ? 8u << 20 : 16 * ring;
	struct rig g;
	uint8_t *src = malloc(1u << 20);
	uint64_t sent = 0, got = 0;
	unsigned seed = 4242 + (unsigned)_i, nr = 0, kept = 0, starved = 0;
	struct kept k[64];
	size_t want = 0;

	ck_assert_ptr_nonnull(src);
	rig_start(&g, ring, 0, _i % 2);
	while (got < total) {
		struct za_payload *pl;
		const void *p;

		if (sent < total)
			send_piece(&g, src, &sent, total, &seed);
		if (za_nbd_rx_starved(g.rx)) {
			starved++;
			while (nr)
				kept_drop(k, &nr, nr - 1);
		}
		p = next_payload(&g, ring, total, &got, &want, &seed);
		if (!p)
			continue;
		pl = nr < 64 ? za_nbd_rx_keep(g.rx, want, ring / 2) : NULL;
		if (pl) {
			k[nr++] = (struct kept){ pl, p, got, want };
			kept++;
		} else {
			za_nbd_rx_skip(g.rx, want);
		}
		got += want;
		want = 0;
		if (nr && rand_r(&seed) % 3 == 0)
			kept_drop(k, &nr, (unsigned)rand_r(&seed) % nr);
	}
	ck_assert_uint_gt(kept, 10);
	/* The ring filled with kept payloads and said so, and once they
	 * were let go of the stream went on. */
	ck_assert_uint_gt(starved, 0);
	rig_stop(&g);
	while (nr)
		kept_drop(k, &nr, nr - 1);
	free(src);
}
END_TEST

/*
 * Stream @total bytes of headers and payloads through @g, peeking each
 * payload in place; with @keep, keep the last one (checked unchanged
 * when let go of; one kept earlier would stop the stream once the ring
 * is round to it). Returns where the first payload was.
 */
static const void *pump(struct rig *g, size_t ring, uint64_t total,
			unsigned seed, struct kept *keep)
{
	uint8_t *src = malloc(1u << 20);
	uint64_t sent = 0, got = 0;
	const void *first = NULL;
	size_t want = 0;

	ck_assert_ptr_nonnull(src);
	while (got < total) {
		const void *p;

		if (sent < total)
			send_piece(g, src, &sent, total, &seed);
		p = next_payload(g, ring, total, &got, &want, &seed);
		if (!p)
			continue;
		if (keep && got + want == total) {
			keep->pl = za_nbd_rx_keep(g->rx, want, 0);
			ck_assert_ptr_nonnull(keep->pl);
			*keep = (struct kept){ keep->pl, p, got, want };
		} else {
			za_nbd_rx_skip(g->rx, want);
		}
		if (!first)
			first = p;
		got += want;
		want = 0;
	}
	free(src);
	ck_assert(!keep || keep->pl);
	return first;
}

/*
 * Loop over ring sizes: a connection's ring is kept for the next one
 * (its pages are touched already), but only once nothing holds it. A
 * connection stops while a payload of its ring is kept; the next one
 * gets a ring of its own and streams through it without touching the
 * kept bytes; once they are let go of, a third connection gets the
 * first one's ring, and its bytes come out right.
 */
START_TEST(test_ring_kept_for_next)
{
	const size_t ring = peek_rings[_i / 2];
	const bool pull = _i % 2;
	const uint64_t total = 3 * (uint64_t)ring;
	const void *first_a, *first_b, *first_c;
	struct kept k = { 0 };
	struct rig g;

	rig_start(&g, ring, 0, pull);
	first_a = pump(&g, ring, total, 11 + (unsigned)_i, &k);
	rig_stop(&g); /* k keeps the ring */

	rig_start(&g, ring, 0, pull);
	first_b = pump(&g, ring, total, 22 + (unsigned)_i, NULL);
	ck_assert_ptr_ne(first_b, first_a);
	/* (A spare left by an earlier test in this process may be
	 * reused here: the first ring is the one that must not be.) */
	check_bytes(k.p, k.len, k.off);
	za_payload_put(k.pl); /* the first ring is the spare now */
	rig_stop(&g); /* and this one goes: one spare is kept */

	rig_start(&g, ring, 0, pull);
	ck_assert(za_nbd_rx_ring_reused(g.rx));
	first_c = pump(&g, ring, total, 33 + (unsigned)_i, NULL);
	ck_assert_ptr_eq(first_c, first_a);
	rig_stop(&g);
}
END_TEST

/* A ring set aside before any connection is the first one's, whole: the
 * stream goes through it, wrap included, in order. Setting one aside
 * while a ring is kept already changes nothing. (Each test runs in a
 * process of its own: no spare is kept when it starts.) */
START_TEST(test_reserve_first_ring)
{
	const size_t ring = peek_rings[_i / 2];
	const bool pull = _i % 2;
	const void *first_a, *first_b;
	struct rig g;

	ck_assert_int_eq(za_nbd_rx_reserve(ring), 0);
	rig_start(&g, ring, 0, pull);
	ck_assert(za_nbd_rx_ring_reused(g.rx));
	first_a = pump(&g, ring, 3 * (uint64_t)ring, 44 + (unsigned)_i, NULL);
	rig_stop(&g); /* the spare again */

	ck_assert_int_eq(za_nbd_rx_reserve(ring), 0);
	rig_start(&g, ring, 0, pull);
	ck_assert(za_nbd_rx_ring_reused(g.rx));
	first_b = pump(&g, ring, 2 * (uint64_t)ring, 55 + (unsigned)_i, NULL);
	ck_assert_ptr_eq(first_b, first_a);
	rig_stop(&g);

	ck_assert_int_eq(za_nbd_rx_reserve(ring + 1), -EINVAL);
}
END_TEST

START_TEST(test_peek_wakes_once)
{
	struct rig g;
	static uint8_t buf[40000];
	const void *p;
	ssize_t n;

	rig_start(&g, 65536, 0, false);
	memset(buf, 0x77, sizeof(buf));
	ck_assert_int_eq(za_nbd_rx_peek(g.rx, 32768, &p), -EAGAIN);
	ck_assert_int_eq(send(g.fd[1], buf, 1000, MSG_NOSIGNAL), 1000);
	rig_wait(&g, 100);
	ck_assert(!g.woken);
	ck_assert(!za_nbd_rx_ready(g.rx, 32768));
	ck_assert(za_nbd_rx_ready(g.rx, 1000));
	ck_assert_int_eq(send(g.fd[1], buf, 31768, MSG_NOSIGNAL), 31768);
	rig_wait(&g, 5000);
	ck_assert(g.woken);
	ck_assert_int_eq(za_nbd_rx_peek(g.rx, 32768, &p), 32768);
	ck_assert_mem_eq(p, buf, 32768);
	za_nbd_rx_skip(g.rx, 32768);

	/* 100 bytes, then the end: a peek for more gets 0, not a hang. */
	ck_assert_int_eq(send(g.fd[1], buf, 100, MSG_NOSIGNAL), 100);
	close(g.fd[1]);
	g.fd[1] = -1;
	while ((n = za_nbd_rx_peek(g.rx, 4096, &p)) == -EAGAIN)
		rig_wait(&g, 100);
	ck_assert_int_eq(n, 0);
	ck_assert_int_eq(za_nbd_rx_peek(g.rx, 100, &p), 100);
	rig_stop(&g);
}
END_TEST

/*
 * Without a thread the loop reads the socket only when it lacks bytes,
 * and kept payloads can leave a ring with no room while the socket holds
 * more: the peek says -EAGAIN, the ring says starved, and letting go of
 * the payload wakes the loop (nothing on the socket would: it stays
 * readable all along, and the export stops watching it meanwhile).
 */
/*
 * A pulled rig of @ring bytes whose client sent @ring + @extra bytes of
 * the stream: one pull fills the ring, its first half is kept (*@pl, at
 * *@p), its second half consumed.
 */
static void pull_fill_half_kept(struct rig *g, size_t ring, size_t extra,
				const void **p, struct za_payload **pl)
{
	uint8_t *buf = malloc(ring + extra);
	const void *q;

	ck_assert_ptr_nonnull(buf);
	rig_start(g, ring, 0, true);
	for (size_t i = 0; i < ring + extra; i++)
		buf[i] = stream_byte(i);
	ck_assert_int_eq(send(g->fd[1], buf, ring + extra, MSG_NOSIGNAL),
			 (ssize_t)(ring + extra));
	free(buf);
	ck_assert_int_eq(za_nbd_rx_peek(g->rx, ring / 2, p), (ssize_t)ring / 2);
	*pl = za_nbd_rx_keep(g->rx, ring / 2, 0);
	ck_assert_ptr_nonnull(*pl);
	ck_assert(za_nbd_rx_ready(g->rx, ring / 2));
	ck_assert_int_eq(za_nbd_rx_peek(g->rx, ring / 2, &q),
			 (ssize_t)ring / 2);
	check_bytes(q, ring / 2, ring / 2);
	za_nbd_rx_skip(g->rx, ring / 2);
}

START_TEST(test_pull_room_wakes)
{
	const size_t ring = 65536;
	struct za_payload *pl;
	const void *p, *q;
	struct rig g;

	pull_fill_half_kept(&g, ring, 1000, &p, &pl);
	/* The last 1000 bytes have no room. */
	ck_assert_int_eq(za_nbd_rx_peek(g.rx, 1000, &q), -EAGAIN);
	ck_assert(za_nbd_rx_starved(g.rx));
	rig_wait(&g, 10);
	ck_assert(!g.woken);
	/* Let go: the loop is told, and the rest comes in. */
	check_bytes(p, ring / 2, 0);
	za_payload_put(pl);
	ck_assert(!za_nbd_rx_starved(g.rx));
	g.woken = false;
	za_io_run_until(g.io, &g.woken, 1000000000ull);
	ck_assert(g.woken);
	ck_assert_int_eq(za_nbd_rx_peek(g.rx, 1000, &q), 1000);
	check_bytes(q, 1000, ring);
	za_nbd_rx_skip(g.rx, 1000);
	rig_stop(&g);
}
END_TEST

/*
 * A pulled ring can also fill without a read finding it full: one pull
 * takes exactly its room, and the loop consumes it all and stops reading
 * (a client at its in-flight cap, say) while a payload is kept. Whoever
 * then asks whether to watch the socket (za_nbd_rx_full(), or _i 1:
 * za_nbd_rx_poll() as the export asks, with whether input is ready) is
 * told no, and the loop is woken once at once - to ask the holder to let
 * go - and again when room is made; asking again does not wake it again.
 */
static bool ask_full(struct za_nbd_rx *rx, int how)
{
	bool full;

	if (!how)
		return za_nbd_rx_full(rx);
	/* All taken: nothing ready, however full. */
	ck_assert(!za_nbd_rx_poll(rx, 1, &full));
	return full;
}

START_TEST(test_pull_full_wakes)
{
	const size_t ring = 65536;
	struct za_payload *pl;
	const void *p;
	struct rig g;

	pull_fill_half_kept(&g, ring, 0, &p, &pl);
	/* Full, and no read has found it so: asking says so, and wakes. */
	ck_assert(ask_full(g.rx, _i));
	ck_assert(za_nbd_rx_starved(g.rx));
	rig_wait(&g, 10);
	ck_assert(g.woken);
	ck_assert(ask_full(g.rx, _i));
	rig_wait(&g, 10);
	ck_assert(!g.woken);
	/* Room made: woken again, and no longer full. */
	check_bytes(p, ring / 2, 0);
	za_payload_put(pl);
	rig_wait(&g, 10);
	ck_assert(g.woken);
	ck_assert(!ask_full(g.rx, _i));
	rig_stop(&g);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("nbd-rx");
	TCase *tc = tcase_create("nbd-rx");

	tcase_set_timeout(tc, 60);
	/* Loop tests: even indexes with the thread, odd ones without. */
	tcase_add_loop_test(tc, test_stream_in_order, 0,
			    2 * sizeof(shapes) / sizeof(shapes[0]));
	tcase_add_loop_test(tc, test_peek_in_place, 0,
			    2 * sizeof(peek_rings) / sizeof(peek_rings[0]));
	tcase_add_loop_test(tc, test_keep_in_place, 0,
			    2 * sizeof(peek_rings) / sizeof(peek_rings[0]));
	tcase_add_loop_test(tc, test_ring_kept_for_next, 0,
			    2 * sizeof(peek_rings) / sizeof(peek_rings[0]));
	tcase_add_loop_test(tc, test_reserve_first_ring, 0,
			    2 * sizeof(peek_rings) / sizeof(peek_rings[0]));
	tcase_add_test(tc, test_peek_wakes_once);
	tcase_add_loop_test(tc, test_end_after_bytes, 0, 2);
	tcase_add_test(tc, test_pull_room_wakes);
	tcase_add_loop_test(tc, test_pull_full_wakes, 0, 2);
	tcase_add_test(tc, test_stop_anywhere);
	suite_add_tcase(s, tc);
	return trun(s);
}
