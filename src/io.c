// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * io.c - the event context: a libev loop, an io_uring whose completions
 * wake the loop through an eventfd, and deferred and timed callbacks.
 *
 * Deferred callbacks are how every device completes a request "later":
 * za_io_defer() appends to a FIFO that an ev_check watcher drains after the
 * loop has polled, and an ev_idle watcher is kept running while the FIFO is
 * not empty so that the poll does not block. Timed callbacks live in a
 * binary min-heap keyed by (deadline, sequence) behind one ev_timer.
 * io_uring SQEs are submitted in batches from an ev_prepare watcher, just
 * before the loop would block; each CQE's user_data is the address of a
 * struct za_io_cqe_handler.
 *
 * Polling (za_io_set_poll()): for a while after an iteration that had work,
 * the same idle watcher keeps the loop polling without blocking. A client
 * that sends its next request a few microseconds after our reply then
 * finds the loop awake: neither side pays for a sleep and a wake-up (in a
 * VM, an inter-processor interrupt through the host). Only the daemon sets
 * it; an idle loop still sleeps once the window has passed.
 *
 * It does not create threads or know about devices.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <ev.h>
#include <liburing.h>

#include "io.h"
#include "log.h"

struct za_io {
	struct ev_loop *loop;
	bool own_loop;

	/* ready FIFO */
	struct za_io_defer *ready_head, *ready_tail;
	ev_prepare prepare;
	ev_check check;
	ev_idle idle;

	/* timed heap */
	struct za_io_defer **heap;
	size_t heap_len, heap_cap;
	uint64_t seq;
	ev_timer timer;

	/* io_uring */
	bool ring_ok;
	bool ring_big;
	struct io_uring ring;
	int efd;
	ev_io efd_watcher;

	/* polling: how long after work, and when work was last seen */
	uint64_t poll_ns, last_work_ns;
};

uint64_t za_io_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void io_run_ready(struct za_io *io)
{
	struct za_io_defer *d;

	/*
	 * Only what was queued before we started: callbacks that defer more
	 * work get it run on the next iteration, after a poll, so that a
	 * chain of deferrals cannot starve io_uring completions.
	 */
	d = io->ready_head;
	io->ready_head = io->ready_tail = NULL;
	while (d) {
		struct za_io_defer *next = d->next;

		d->next = NULL;
		d->fn(d);
		d = next;
	}
}

static void io_ring_submit(struct za_io *io)
{
	int ret;

	if (!io->ring_ok || !io_uring_sq_ready(&io->ring))
		return;
	ret = io_uring_submit(&io->ring);
	if (ret < 0 && ret != -EBUSY && ret != -EAGAIN)
		za_log_err("io_uring_submit: %s", strerror(-ret));
}

static void io_prepare_cb(struct ev_loop *loop, ev_prepare *w, int revents)
{
	struct za_io *io = w->data;

	(void)loop;
	(void)revents;
	io_ring_submit(io);
	if (io->ready_head ||
	    (io->poll_ns && za_io_now_ns() - io->last_work_ns < io->poll_ns))
		ev_idle_start(io->loop, &io->idle);
	else
		ev_idle_stop(io->loop, &io->idle);
}

static void io_check_cb(struct ev_loop *loop, ev_check *w, int revents)
{
	struct za_io *io = w->data;

	(void)revents;
	if (io->poll_ns) {
		/*
		 * Check watchers run first among what the poll found (libev
		 * invokes the pending in reverse order of queueing): anything
		 * pending besides our idle watcher is work. This needs
		 * io->check to be the loop's only check watcher (a second
		 * one would count as work on every iteration, and the loop
		 * would never sleep), and all watchers at one priority.
		 */
		unsigned n = ev_pending_count(loop);

		if (ev_is_pending(&io->idle))
			n--;
		if (n || io->ready_head)
			io->last_work_ns = za_io_now_ns();
	}
	io_run_ready(io);
}

static void io_idle_cb(struct ev_loop *loop, ev_idle *w, int revents)
{
	(void)loop;
	(void)w;
	(void)revents;
	/* Exists only to keep the poll from blocking; ev_check does work. */
}

/* ---- timed heap ---- */

static bool heap_less(const struct za_io_defer *a, const struct za_io_defer *b)
{
	if (a->when_ns != b->when_ns)
		return a->when_ns < b->when_ns;
	return a->seq < b->seq;
}

static void heap_swap(struct za_io *io, size_t i, size_t j)
{
	struct za_io_defer *t = io->heap[i];

	io->heap[i] = io->heap[j];
	io->heap[j] = t;
}

static void heap_push(struct za_io *io, struct za_io_defer *d)
{
	size_t i;

	if (io->heap_len == io->heap_cap) {
		size_t cap = io->heap_cap ? io->heap_cap * 2 : 64;
		struct za_io_defer **h = realloc(io->heap, cap * sizeof(*h));

		if (!h) {
			/* Out of memory: run it as soon as possible instead. */
			za_io_defer(io, d);
			return;
		}
		io->heap = h;
		io->heap_cap = cap;
	}
	i = io->heap_len++;
	io->heap[i] = d;
	while (i > 0 && heap_less(io->heap[i], io->heap[(i - 1) / 2])) {
		heap_swap(io, i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
}

static struct za_io_defer *heap_pop(struct za_io *io)
{
	struct za_io_defer *top = io->heap[0];
	size_t i = 0;

	io->heap[0] = io->heap[--io->heap_len];
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;

		if (l < io->heap_len && heap_less(io->heap[l], io->heap[m]))
			m = l;
		if (r < io->heap_len && heap_less(io->heap[r], io->heap[m]))
			m = r;
		if (m == i)
			break;
		heap_swap(io, i, m);
		i = m;
	}
	return top;
}

static void io_timer_arm(struct za_io *io)
{
	uint64_t now = za_io_now_ns();
	double delay;

	ev_timer_stop(io->loop, &io->timer);
	if (!io->heap_len)
		return;
	delay = io->heap[0]->when_ns > now ?
			(double)(io->heap[0]->when_ns - now) / 1e9 :
			0.0;
	ev_timer_set(&io->timer, delay, 0.0);
	ev_timer_start(io->loop, &io->timer);
}

static void io_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct za_io *io = w->data;
	uint64_t now = za_io_now_ns();

	(void)loop;
	(void)revents;
	while (io->heap_len && io->heap[0]->when_ns <= now) {
		struct za_io_defer *d = heap_pop(io);

		d->fn(d);
	}
	io_timer_arm(io);
}

void za_io_defer(struct za_io *io, struct za_io_defer *d)
{
	d->next = NULL;
	if (io->ready_tail)
		io->ready_tail->next = d;
	else
		io->ready_head = d;
	io->ready_tail = d;
	/* In case we are called from outside a loop callback. */
	ev_idle_start(io->loop, &io->idle);
}

void za_io_defer_at(struct za_io *io, struct za_io_defer *d, uint64_t when_ns)
{
	bool earliest;

	d->when_ns = when_ns;
	d->seq = io->seq++;
	heap_push(io, d);
	earliest = io->heap_len && io->heap[0] == d;
	if (earliest)
		io_timer_arm(io);
}

/* ---- io_uring ---- */

static void io_efd_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	struct za_io *io = w->data;
	struct io_uring_cqe *cqe;
	uint64_t v;

	(void)loop;
	(void)revents;
	if (read(io->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		za_log_err("io_uring eventfd read: %s", strerror(errno));
	while (io_uring_peek_cqe(&io->ring, &cqe) == 0) {
		struct za_io_cqe_handler *h =
			(struct za_io_cqe_handler *)(uintptr_t)cqe->user_data;

		/*
		 * The handler may queue more SQEs; it must not hold on to cqe
		 * after returning, since the slot is released here.
		 */
		if (h)
			h->fn(h, cqe);
		io_uring_cqe_seen(&io->ring, cqe);
	}
}

static int io_ring_init(struct za_io *io, unsigned extra_flags)
{
	struct io_uring_params p;

	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_CQSIZE | extra_flags;
	p.cq_entries = 4096;
	return io_uring_queue_init_params(1024, &io->ring, &p);
}

int za_io_ring_setup(struct za_io *io)
{
	int ret;

	if (io->ring_ok)
		return 0;
	/*
	 * Always try for big entries: NVMe passthrough needs them, and a ring
	 * cannot grow them later, so a drive opened after the first I/O on
	 * another would otherwise lose native append. Kernels without them
	 * (before 5.19) refuse with EINVAL and get a small ring.
	 */
	ret = io_ring_init(io, IORING_SETUP_SQE128 | IORING_SETUP_CQE32);
	io->ring_big = ret == 0;
	if (ret == -EINVAL)
		ret = io_ring_init(io, 0);
	if (ret < 0) {
		za_log_err("io_uring_queue_init: %s", strerror(-ret));
		return ret;
	}
	io->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (io->efd < 0) {
		ret = -errno;
		za_log_err("eventfd: %s", strerror(errno));
		goto err_ring;
	}
	ret = io_uring_register_eventfd(&io->ring, io->efd);
	if (ret < 0) {
		za_log_err("io_uring_register_eventfd: %s", strerror(-ret));
		goto err_efd;
	}
	ev_io_init(&io->efd_watcher, io_efd_cb, io->efd, EV_READ);
	io->efd_watcher.data = io;
	ev_io_start(io->loop, &io->efd_watcher);
	io->ring_ok = true;
	return 0;

err_efd:
	close(io->efd);
	io->efd = -1;
err_ring:
	io_uring_queue_exit(&io->ring);
	return ret;
}

bool za_io_ring_big(struct za_io *io)
{
	return io->ring_ok && io->ring_big;
}

struct io_uring_sqe *za_io_get_sqe(struct za_io *io)
{
	struct io_uring_sqe *sqe;

	if (!io->ring_ok && za_io_ring_setup(io) < 0)
		return NULL;
	sqe = io_uring_get_sqe(&io->ring);
	if (!sqe) {
		/* Ring full: push what is queued to the kernel and retry. */
		io_uring_submit(&io->ring);
		sqe = io_uring_get_sqe(&io->ring);
	}
	return sqe;
}

/* ---- lifecycle ---- */

int za_io_new(struct ev_loop *loop, struct za_io **out)
{
	struct za_io *io = calloc(1, sizeof(*io));

	if (!io)
		return -ENOMEM;
	io->efd = -1;
	if (loop) {
		io->loop = loop;
	} else {
		io->loop = ev_loop_new(EVFLAG_AUTO);
		if (!io->loop) {
			free(io);
			return -ENOMEM;
		}
		io->own_loop = true;
	}
	ev_prepare_init(&io->prepare, io_prepare_cb);
	io->prepare.data = io;
	ev_prepare_start(io->loop, &io->prepare);
	ev_check_init(&io->check, io_check_cb);
	io->check.data = io;
	ev_check_start(io->loop, &io->check);
	ev_idle_init(&io->idle, io_idle_cb);
	io->idle.data = io;
	ev_init(&io->timer, io_timer_cb);
	io->timer.data = io;
	/* Housekeeping watchers must not keep ev_run() alive by themselves. */
	ev_unref(io->loop);
	ev_unref(io->loop);
	*out = io;
	return 0;
}

void za_io_free(struct za_io *io)
{
	if (!io)
		return;
	ev_ref(io->loop);
	ev_ref(io->loop);
	ev_prepare_stop(io->loop, &io->prepare);
	ev_check_stop(io->loop, &io->check);
	ev_idle_stop(io->loop, &io->idle);
	ev_timer_stop(io->loop, &io->timer);
	if (io->ring_ok) {
		ev_io_stop(io->loop, &io->efd_watcher);
		io_uring_queue_exit(&io->ring);
		close(io->efd);
	}
	if (io->own_loop)
		ev_loop_destroy(io->loop);
	free(io->heap);
	free(io);
}

void za_io_set_poll(struct za_io *io, uint64_t poll_ns)
{
	io->poll_ns = poll_ns;
	io->last_work_ns = za_io_now_ns();
}

struct ev_loop *za_io_loop(struct za_io *io)
{
	return io->loop;
}

void za_io_run_once(struct za_io *io)
{
	ev_run(io->loop, EVRUN_ONCE);
}

static void io_timeout_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	*(bool *)w->data = true;
}

int za_io_run_until(struct za_io *io, const bool *done, uint64_t timeout_ns)
{
	bool expired = false;
	ev_timer t;

	if (timeout_ns) {
		ev_timer_init(&t, io_timeout_cb, (double)timeout_ns / 1e9, 0.0);
		t.data = &expired;
		ev_timer_start(io->loop, &t);
	}
	while (!*done && !expired)
		ev_run(io->loop, EVRUN_ONCE);
	if (timeout_ns)
		ev_timer_stop(io->loop, &t);
	return *done ? 0 : -ETIMEDOUT;
}
