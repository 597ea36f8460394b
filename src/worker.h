/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * worker.h - one thread that runs jobs off the loop, in order, and hands
 * each back to the loop, in the same order.
 *
 * For CPU work the loop would otherwise do itself between two socket
 * reads (the segment engine's parity and checksums: docs/design.md 7.2).
 * A job owns the memory its run() touches from the moment it is queued
 * until its done() runs on the loop; nothing else is shared. Jobs are
 * first in, first out: done() calls come in queue order, so a caller that
 * queues writes for the same zone keeps their order.
 */
#ifndef ZA_WORKER_H
#define ZA_WORKER_H

struct za_io;
struct za_worker;

struct za_work {
	/* Worker thread: the job. Must not touch the loop's state. */
	void (*run)(struct za_work *w);
	/* Loop thread, after run(), in queue order. */
	void (*done)(struct za_work *w);
	struct za_work *next; /* private */
};

/* Start the thread. Returns 0 or -errno (no thread: run jobs inline). */
int za_worker_new(struct za_io *io, struct za_worker **out);
/* Loop thread: run @w on the worker, then @w->done on the loop. */
void za_worker_queue(struct za_worker *wk, struct za_work *w);
/* Jobs queued whose done() has not run yet. */
unsigned za_worker_pending(const struct za_worker *wk);
/*
 * Loop thread: stop and join the thread. The job it is running finishes;
 * jobs still queued, and done() calls not made yet, are dropped (callers
 * free only when nothing is pending, except when they give up on
 * everything, as a crash test does).
 */
void za_worker_free(struct za_worker *wk);
#endif /* ZA_WORKER_H */
