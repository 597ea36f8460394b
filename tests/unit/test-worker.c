// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test-worker.c - the worker thread (src/worker.c): jobs run off the
 * loop's thread, one at a time, and come back to the loop in the order
 * they were queued, each exactly once, however the queueing and the
 * loop's turns interleave; the pending count follows; freeing the worker
 * with jobs still queued or finished but not handed back drops them
 * without running their done().
 */
#include <check.h>

#include "tap.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "io.h"
#include "worker.h"

#define NR_JOBS 2000

struct job {
	struct za_work w;
	unsigned idx;
	unsigned work; /* iterations of busy work in run() */
	uint64_t sum; /* run()'s result, checked in done() */
	pthread_t ran_on;
	int runs, dones;
};

static pthread_t loop_thread;
static unsigned next_done, running, max_running;
static pthread_mutex_t run_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t busy(unsigned idx, unsigned n)
{
	uint64_t x = idx + 1;
	unsigned i;

	for (i = 0; i < n; i++)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	return x;
}

static void job_run(struct za_work *w)
{
	struct job *j = (struct job *)w;

	pthread_mutex_lock(&run_lock);
	if (++running > max_running)
		max_running = running;
	pthread_mutex_unlock(&run_lock);
	j->ran_on = pthread_self();
	j->sum = busy(j->idx, j->work);
	j->runs++;
	pthread_mutex_lock(&run_lock);
	running--;
	pthread_mutex_unlock(&run_lock);
}

static void job_done(struct za_work *w)
{
	struct job *j = (struct job *)w;

	ck_assert(pthread_equal(pthread_self(), loop_thread));
	ck_assert_uint_eq(j->idx, next_done);
	ck_assert_int_eq(j->runs, 1);
	ck_assert_uint_eq(j->sum, busy(j->idx, j->work));
	ck_assert(!pthread_equal(j->ran_on, loop_thread));
	j->dones++;
	next_done++;
}

/* Loop: jobs queued all at once, or a few at a time between loop turns. */
START_TEST(test_fifo)
{
	struct za_io *io;
	struct za_worker *wk;
	struct job *jobs = calloc(NR_JOBS, sizeof(*jobs));
	unsigned seed = 7 + (unsigned)_i, q = 0, i;

	ck_assert_ptr_nonnull(jobs);
	loop_thread = pthread_self();
	next_done = 0;
	max_running = 0;
	ck_assert_int_eq(za_io_new(NULL, &io), 0);
	ck_assert_int_eq(za_worker_new(io, &wk), 0);
	for (i = 0; i < NR_JOBS; i++) {
		jobs[i].idx = i;
		jobs[i].work = (unsigned)rand_r(&seed) % 20000;
		jobs[i].w.run = job_run;
		jobs[i].w.done = job_done;
	}
	while (next_done < NR_JOBS) {
		unsigned n = _i == 0 ? NR_JOBS :
				       1 + (unsigned)rand_r(&seed) % 7;

		for (i = 0; i < n && q < NR_JOBS; i++)
			za_worker_queue(wk, &jobs[q++].w);
		ck_assert_uint_eq(za_worker_pending(wk), q - next_done);
		za_io_run_once(io);
	}
	ck_assert_uint_eq(za_worker_pending(wk), 0);
	for (i = 0; i < NR_JOBS; i++)
		ck_assert_int_eq(jobs[i].dones, 1);
	ck_assert_uint_eq(max_running, 1);
	za_worker_free(wk);
	za_io_free(io);
	free(jobs);
}
END_TEST

static void never_done(struct za_work *w)
{
	(void)w;
	ck_abort_msg("done() after the worker was freed");
}

/* Freed with jobs queued, running and finished: nothing comes back. */
START_TEST(test_free_pending)
{
	struct za_io *io;
	struct za_worker *wk;
	static struct job jobs[64];
	unsigned i;

	loop_thread = pthread_self();
	ck_assert_int_eq(za_io_new(NULL, &io), 0);
	ck_assert_int_eq(za_worker_new(io, &wk), 0);
	for (i = 0; i < 64; i++) {
		memset(&jobs[i], 0, sizeof(jobs[i]));
		jobs[i].idx = i;
		jobs[i].work = 100000;
		jobs[i].w.run = job_run;
		jobs[i].w.done = never_done;
		za_worker_queue(wk, &jobs[i].w);
	}
	za_worker_free(wk);
	/* The loop runs on; the worker's watcher is gone with it. */
	for (i = 0; i < 3; i++)
		za_io_run_once(io);
	za_io_free(io);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("worker");
	TCase *tc = tcase_create("worker");

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_fifo, 0, 2);
	tcase_add_test(tc, test_free_pending);
	suite_add_tcase(s, tc);
	return trun(s);
}
