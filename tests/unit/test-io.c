// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test-io.c - the event context: deferred callbacks run later and in
 * order, timed ones by deadline, deferrals from a callback wait for the
 * next iteration, timeouts are reported, io_uring completions reach
 * their handler through the eventfd, and a polling loop does not sleep
 * right after work but does once its window has passed.
 */
#include <check.h>

#include "tap.h"
#include <errno.h>
#include <liburing.h>
#include <stdlib.h>
#include <unistd.h>

#include <ev.h>

#include "io.h"

struct rec {
	struct za_io_defer d;
	int id;
	int *log;
	int *n;
	struct za_io *io;
	struct rec *chain;
};

static void rec_fn(struct za_io_defer *d)
{
	struct rec *r = (struct rec *)d;

	r->log[(*r->n)++] = r->id;
	if (r->chain)
		za_io_defer(r->io, &r->chain->d);
}

START_TEST(test_defer_fifo)
{
	struct za_io *io;
	struct rec r[5];
	int log[8], n = 0, i;
	bool done = false;

	ck_assert_int_eq(za_io_new(NULL, &io), 0);
	for (i = 0; i < 5; i++) {
		r[i] = (struct rec){
			.d.fn = rec_fn, .id = i, .log = log, .n = &n, .io = io
		};
		za_io_defer(io, &r[i].d);
	}
	ck_assert_int_eq(n, 0); /* nothing runs inside za_io_defer() */
	ck_assert_int_eq(za_io_run_until(io, &done, 50000000ull), -ETIMEDOUT);
	ck_assert_int_eq(n, 5);
	for (i = 0; i < 5; i++)
		ck_assert_int_eq(log[i], i);
	za_io_free(io);
}
END_TEST

START_TEST(test_defer_chain)
{
	struct za_io *io;
	struct rec a, b;
	int log[4], n = 0;

	ck_assert_int_eq(za_io_new(NULL, &io), 0);
	b = (struct rec){ .d.fn = rec_fn, .id = 2, .log = log, .n = &n };
	a = (struct rec){ .d.fn = rec_fn,
			  .id = 1,
			  .log = log,
			  .n = &n,
			  .io = io,
			  .chain = &b };
	za_io_defer(io, &a.d);
	za_io_run_once(io);
	ck_assert_int_eq(n, 1); /* b waits for the next iteration */
	za_io_run_once(io);
	ck_assert_int_eq(n, 2);
	ck_assert_int_eq(log[1], 2);
	za_io_free(io);
}
END_TEST

START_TEST(test_defer_at_order)
{
	struct za_io *io;
	struct rec r[4];
	int log[4], n = 0;
	uint64_t now = za_io_now_ns(), t0;
	static const int delay_ms[4] = { 30, 10, 20, 10 };
	int i;
	bool done = false;

	ck_assert_int_eq(za_io_new(NULL, &io), 0);
	for (i = 0; i < 4; i++) {
		r[i] = (struct rec){
			.d.fn = rec_fn, .id = i, .log = log, .n = &n
		};
		za_io_defer_at(io, &r[i].d,
			       now + (uint64_t)delay_ms[i] * 1000000ull);
	}
	t0 = za_io_now_ns();
	za_io_run_until(io, &done, 100000000ull);
	ck_assert_int_eq(n, 4);
	/* by deadline, FIFO among equal deadlines */
	ck_assert_int_eq(log[0], 1);
	ck_assert_int_eq(log[1], 3);
	ck_assert_int_eq(log[2], 2);
	ck_assert_int_eq(log[3], 0);
	/* and never before the deadline */
	ck_assert_uint_ge(za_io_now_ns(), now + 30000000ull);
	(void)t0;
	za_io_free(io);
}
END_TEST

struct nop {
	struct za_io_cqe_handler h;
	int res;
	bool done;
};

static void nop_cb(struct za_io_cqe_handler *h, const struct io_uring_cqe *cqe)
{
	struct nop *n = (struct nop *)h;

	n->res = cqe->res;
	n->done = true;
}

START_TEST(test_uring_nop)
{
	struct za_io *io;
	struct io_uring_sqe *sqe;
	struct nop n = { .h.fn = nop_cb, .res = -1 };

	ck_assert_int_eq(za_io_new(NULL, &io), 0);
	sqe = za_io_get_sqe(io);
	ck_assert_ptr_nonnull(sqe);
	io_uring_prep_nop(sqe);
	io_uring_sqe_set_data(sqe, &n.h);
	ck_assert_int_eq(za_io_run_until(io, &n.done, 5000000000ull), 0);
	ck_assert_int_eq(n.res, 0);
	/*
	 * The ring made for the NOP already has big entries, so a drive
	 * opened now can still use NVMe passthrough (kernels >= 5.19).
	 */
	ck_assert(za_io_ring_big(io));
	ck_assert_int_eq(za_io_ring_setup(io), 0);
	za_io_free(io);
}
END_TEST

START_TEST(test_uring_big)
{
	struct za_io *io;
	struct io_uring_sqe *sqe;
	struct nop n = { .h.fn = nop_cb, .res = -1 };

	ck_assert_int_eq(za_io_new(NULL, &io), 0);
	ck_assert_int_eq(za_io_ring_setup(io), 0);
	ck_assert(za_io_ring_big(io));
	sqe = za_io_get_sqe(io);
	io_uring_prep_nop(sqe);
	io_uring_sqe_set_data(sqe, &n.h);
	ck_assert_int_eq(za_io_run_until(io, &n.done, 5000000000ull), 0);
	ck_assert_int_eq(n.res, 0);
	za_io_free(io);
}
END_TEST

/* ---- polling ---- */

static void flag_timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	*(bool *)w->data = true;
}

static void pipe_cb(struct ev_loop *loop, ev_io *w, int revents)
{
	char c;

	(void)loop;
	(void)revents;
	ck_assert_int_eq(read(w->fd, &c, 1), 1);
	*(int *)w->data += 1;
}

/* Loop iterations until a timer @after_s away fires, stopping at @max. */
static unsigned iterations_idle(struct za_io *io, double after_s, unsigned max)
{
	struct ev_loop *loop = za_io_loop(io);
	bool fired = false;
	unsigned n = 0;
	ev_timer t;

	ev_timer_init(&t, flag_timer_cb, after_s, 0.0);
	t.data = &fired;
	ev_timer_start(loop, &t);
	while (!fired && n < max) {
		za_io_run_once(io);
		n++;
	}
	ev_timer_stop(loop, &t);
	return n;
}

/*
 * The same, right after some work (a pipe became readable). A loop that
 * sleeps when it has nothing to do takes one iteration, or a few if the
 * kernel wakes it early; one that polls takes as many as it can.
 */
static unsigned iterations_after_work(struct za_io *io, double after_s,
				      unsigned max)
{
	struct ev_loop *loop = za_io_loop(io);
	int fds[2], got = 0;
	unsigned n;
	ev_io rd;

	ck_assert_int_eq(pipe(fds), 0);
	ev_io_init(&rd, pipe_cb, fds[0], EV_READ);
	rd.data = &got;
	ev_io_start(loop, &rd);
	ck_assert_int_eq(write(fds[1], "x", 1), 1);
	while (!got)
		za_io_run_once(io);
	n = iterations_idle(io, after_s, max);
	ev_io_stop(loop, &rd);
	close(fds[0]);
	close(fds[1]);
	return n;
}

/*
 * za_io_set_poll(): without it (and with 0) the loop sleeps when it has
 * nothing to do, right after work too; with a window it sleeps when the
 * window has passed and polls after the next work (a thousand iterations
 * before a 2 s timer: each takes microseconds). Counting iterations rather
 * than timing them keeps a slow machine from deciding the result.
 */
START_TEST(test_poll_window)
{
	struct za_io *io;

	ck_assert_int_eq(za_io_new(NULL, &io), 0);
	ck_assert_uint_le(iterations_after_work(io, 0.02, 1000), 3);
	za_io_set_poll(io, 0);
	ck_assert_uint_le(iterations_after_work(io, 0.02, 1000), 3);
	/* A window that has passed when the work comes: the work opens it
	 * again (1000 iterations in 200 ms, 200 us each at most). */
	za_io_set_poll(io, 200000000);
	usleep(300000);
	ck_assert_uint_le(iterations_idle(io, 0.02, 1000), 3);
	ck_assert_uint_eq(iterations_after_work(io, 2.0, 1000), 1000);
	za_io_free(io);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("io");
	TCase *tc = tcase_create("io");

	tcase_add_test(tc, test_defer_fifo);
	tcase_add_test(tc, test_defer_chain);
	tcase_add_test(tc, test_defer_at_order);
	tcase_add_test(tc, test_uring_nop);
	tcase_add_test(tc, test_uring_big);
	tcase_add_test(tc, test_poll_window);
	suite_add_tcase(s, tc);
	return trun(s);
}
