/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * nbd-rx.h - a receive ring for one NBD connection, filled by the loop
 * (pull) or by a thread of its own.
 *
 * Pulled, the ring takes whatever the socket holds whenever the loop
 * lacks bytes: one recv() of up to the ring's free room instead of one
 * per header and payload. With a thread, the thread reads the socket
 * into the ring while the loop is busy with what it read before, so that
 * a client whose socket buffer is small (Unix sockets: about 200 KiB)
 * keeps sending instead of waiting for the loop to come back to recv();
 * on two cores the extra thread cost more than it overlapped
 * (docs/design.md 14.3; bench/results/notes.md, P1), hence the
 * default. The loop takes the bytes with za_nbd_rx_recv(), as it would with recv(); a large payload
 * may be read by the thread straight into its buffer, and one the ring
 * holds whole may be used in place (za_nbd_rx_peek()), even after the
 * loop has read past it (za_nbd_rx_keep()). The thread touches
 * nothing of the connection but the socket's receive side, the ring and
 * a destination the loop handed it; it parses nothing.
 */
#ifndef ZA_NBD_RX_H
#define ZA_NBD_RX_H
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct ev_loop;
struct za_nbd_rx;

/*
 * Synchronous, any thread. Unless a ring is kept for the next connection
 * already, maps one of @ring_bytes with its pages touched and keeps it:
 * the first connection to need a ring of that size then pays no first
 * touches (za_nbd_rx_ring_reused() is true for it). 0 or -errno.
 */
int za_nbd_rx_reserve(size_t ring_bytes);
/*
 * Start a receive ring on @fd (a connected stream socket; the caller
 * reads it no more). With @pull the loop's own calls below read @fd
 * (non-blocking) when the ring lacks bytes, and the caller watches @fd
 * for input while za_nbd_rx_starved() is false; @wake runs only when a
 * kept payload let go of makes room that such a read found missing.
 * Without, a thread reads @fd, and @wake runs on @loop's thread when
 * input or the end of input arrives. @wake may call za_nbd_rx_recv().
 * @ring_bytes is the most read ahead, a multiple of the page size.
 * Returns 0 or -errno (no ring: the caller goes on reading @fd itself).
 */
int za_nbd_rx_start(struct ev_loop *loop, int fd, size_t ring_bytes, bool pull,
		    void (*wake)(void *arg), void *arg, struct za_nbd_rx **out);
/* Does the loop read @rx's socket itself (no thread)? */
bool za_nbd_rx_pulls(const struct za_nbd_rx *rx);
/*
 * Did @rx's ring come from a connection that ended (its pages touched
 * already)? The ring of the last connection to end is kept for the next
 * one of the same ring size, once no payload of it is kept any more.
 */
bool za_nbd_rx_ring_reused(const struct za_nbd_rx *rx);
/*
 * Loop thread. Up to @len bytes of input into @dst: the count (> 0), 0 at
 * the end of input, -EAGAIN when nothing is there yet (@wake runs when
 * there is), or the -errno the socket gave. With @direct, the thread may
 * read the rest of @len straight into @dst: @dst must then stay valid
 * and untouched until calls with @dst advanced by the counts returned
 * have accounted for all of @len, or until za_nbd_rx_stop() returns.
 */
ssize_t za_nbd_rx_recv(struct za_nbd_rx *rx, void *dst, size_t len,
		       bool direct);
/*
 * Loop thread, with no target lent: the next @len bytes of input (@len at
 * most the ring's size) in place, contiguous, at *@p: returns @len once
 * the ring holds them all, -EAGAIN until then (@wake runs when more
 * comes), 0 if the input ended before, or the socket's -errno. The bytes
 * stay there, untouched by the thread, until za_nbd_rx_skip().
 */
ssize_t za_nbd_rx_peek(struct za_nbd_rx *rx, size_t len, const void **p);
/* Loop thread: consume @len bytes that za_nbd_rx_peek() showed. */
void za_nbd_rx_skip(struct za_nbd_rx *rx, size_t len);
/*
 * Loop thread: consume @len bytes that za_nbd_rx_peek() showed, like
 * za_nbd_rx_skip(), but keep them where they are, untouched, until the
 * reference returned (its count 1) is dropped; the ring reuses them, and
 * what it received after them, only then. NULL, with nothing consumed,
 * when keeping them would leave the ring less than @reserve bytes for
 * what follows (a caller that waits for a whole payload of up to that
 * size in the ring before it lets go of earlier ones must ask for it),
 * or when too many are kept already. The reference may outlive
 * za_nbd_rx_stop(): the ring is freed when the last one is dropped.
 */
struct za_payload *za_nbd_rx_keep(struct za_nbd_rx *rx, size_t len,
				  size_t reserve);
/*
 * Loop thread: is the ring full, with payloads kept? Then nothing more
 * comes in until some are let go: a holder that waits for more input
 * before it lets go must be asked to copy them now. (The thread wakes
 * the loop whenever it finds it so; a pulled ring is found so by the
 * read that needed room, which then returned -EAGAIN.)
 */
bool za_nbd_rx_starved(struct za_nbd_rx *rx);
/*
 * Loop thread, pulled ring: is the ring full (no room for input until a
 * kept payload is let go of)? Then @wake runs soon - once, so that the
 * holder can be asked to let go from the top of the loop - and again
 * when room is made; meanwhile the caller must not watch the socket,
 * which stays readable. The export asks whenever it decides whether to
 * watch: a ring can fill while the loop waits on something else (a
 * client at its in-flight cap), and nothing would read into it again.
 */
bool za_nbd_rx_full(struct za_nbd_rx *rx);
/*
 * Loop thread: is there input to take - @need bytes or more in the ring
 * (1, or what a za_nbd_rx_peek() waits for), bytes for the target, or
 * the end of input?
 */
bool za_nbd_rx_ready(struct za_nbd_rx *rx, size_t need);
/*
 * Loop thread: both questions under one lock, for the export's decision
 * per request - za_nbd_rx_ready(), returned, and on a pulled ring
 * za_nbd_rx_full() in *@full (with its wake-up; false for a thread's).
 */
bool za_nbd_rx_poll(struct za_nbd_rx *rx, size_t need, bool *full);
/*
 * Loop thread: stop and join the thread if there is one (it shuts the
 * socket's receive side down to wake it), and free everything - the ring
 * only once the last za_nbd_rx_keep() reference is dropped. The socket
 * stays open.
 */
void za_nbd_rx_stop(struct za_nbd_rx *rx);
#endif /* ZA_NBD_RX_H */
