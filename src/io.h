/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * io.h - the event context every device and service runs on.
 *
 * A struct za_io owns one libev loop (borrowed or created), one io_uring
 * (created on first use, so contexts that only drive emulated drives never
 * pay for it), the eventfd that wakes the loop when completions arrive, and
 * two queues of deferred callbacks: "ready" (run on the next loop iteration)
 * and "timed" (run at a monotonic deadline, for the emulated drives'
 * performance model and for injected latency).
 *
 * It does not know what a device or a request is: backends embed a
 * struct za_io_defer or a struct za_io_cqe_handler in their own requests.
 * Everything here runs on the loop's thread; nothing is thread-safe.
 */
#ifndef ZA_IO_H
#define ZA_IO_H

#include <stdbool.h>
#include <stdint.h>

struct ev_loop;
struct io_uring;
struct io_uring_sqe;
struct io_uring_cqe;
struct za_io;

/* A callback deferred to a later loop iteration or to a deadline. */
struct za_io_defer {
	void (*fn)(struct za_io_defer *d);
	struct za_io_defer *next; /* ready list */
	uint64_t when_ns; /* timed heap key (CLOCK_MONOTONIC) */
	uint64_t seq; /* FIFO order among equal deadlines */
};

/*
 * Embedded in a backend's request; its address is the SQE's user_data.
 * fn runs on the loop thread for each CQE carrying that user_data.
 */
struct za_io_cqe_handler {
	void (*fn)(struct za_io_cqe_handler *h, const struct io_uring_cqe *cqe);
};

/*
 * Create a context on @loop (NULL: a new private loop that za_io_free()
 * destroys). Returns 0 or -errno.
 */
int za_io_new(struct ev_loop *loop, struct za_io **out);
void za_io_free(struct za_io *io);
struct ev_loop *za_io_loop(struct za_io *io);

/*
 * Keep polling, not blocking, for @poll_ns after each loop iteration that
 * had work (0, the default: block at once). It costs CPU while it polls
 * and saves a sleep and a wake-up when work comes within the window.
 */
void za_io_set_poll(struct za_io *io, uint64_t poll_ns);

/* Monotonic time in nanoseconds. */
uint64_t za_io_now_ns(void);

/* Run @d->fn on a later loop iteration (never from inside this call). */
void za_io_defer(struct za_io *io, struct za_io_defer *d);
/* Run @d->fn once the monotonic clock reaches @when_ns. */
void za_io_defer_at(struct za_io *io, struct za_io_defer *d, uint64_t when_ns);

/*
 * io_uring access. za_io_ring_setup() creates the ring if it does not
 * exist yet; returns 0 or -errno. The ring has big entries (SQE128 |
 * CQE32, which NVMe passthrough needs) wherever the kernel has them:
 * za_io_ring_big() tells. za_io_get_sqe() returns a free SQE, submitting
 * queued ones first if the ring is full; NULL only if the ring cannot be
 * set up. Queued SQEs are submitted before the loop blocks.
 */
int za_io_ring_setup(struct za_io *io);
struct io_uring_sqe *za_io_get_sqe(struct za_io *io);
bool za_io_ring_big(struct za_io *io);

/*
 * Run the loop until *@done becomes true (for tests, tools and synchronous
 * wrappers). Returns 0, or -ETIMEDOUT if @timeout_ns (0 = none) passes first.
 */
int za_io_run_until(struct za_io *io, const bool *done, uint64_t timeout_ns);
/* Run one loop iteration, blocking if nothing is pending. */
void za_io_run_once(struct za_io *io);

#endif /* ZA_IO_H */
