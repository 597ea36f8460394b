// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * worker.c - a thread that runs jobs off the loop (see worker.h).
 *
 * Two lists under one mutex, the only lock: jobs to run, and jobs run
 * whose done() the loop has yet to call. The thread sleeps on a condition
 * variable while there is nothing to run and wakes the loop through an
 * ev_async when it finishes a job; the loop takes every finished job in
 * one go. The async watcher does not keep the loop running by itself.
 * It knows nothing of what the jobs do.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>

#include <ev.h>

#include "io.h"
#include "worker.h"

struct za_worker {
	struct ev_loop *loop;
	ev_async w;
	pthread_t th;
	unsigned pending; /* loop thread: queued, done() not called yet */

	pthread_mutex_t lock;
	pthread_cond_t cond;
	/* Under lock. */
	struct za_work *in_head, *in_tail; /* to run */
	struct za_work *out_head, *out_tail; /* run, done() to call */
	bool stop;
};

static void push(struct za_work **head, struct za_work **tail,
		 struct za_work *w)
{
	w->next = NULL;
	if (*tail)
		(*tail)->next = w;
	else
		*head = w;
	*tail = w;
}

static void *worker_main(void *arg)
{
	struct za_worker *wk = arg;
	struct za_work *w;

	pthread_mutex_lock(&wk->lock);
	for (;;) {
		while (!wk->stop && !wk->in_head)
			pthread_cond_wait(&wk->cond, &wk->lock);
		if (wk->stop)
			break;
		w = wk->in_head;
		wk->in_head = w->next;
		if (!wk->in_head)
			wk->in_tail = NULL;
		pthread_mutex_unlock(&wk->lock);
		w->run(w);
		pthread_mutex_lock(&wk->lock);
		push(&wk->out_head, &wk->out_tail, w);
		ev_async_send(wk->loop, &wk->w);
	}
	pthread_mutex_unlock(&wk->lock);
	return NULL;
}

static void worker_async_cb(struct ev_loop *loop, ev_async *a, int revents)
{
	struct za_worker *wk = a->data;
	struct za_work *w, *next;

	(void)loop;
	(void)revents;
	pthread_mutex_lock(&wk->lock);
	w = wk->out_head;
	wk->out_head = wk->out_tail = NULL;
	pthread_mutex_unlock(&wk->lock);
	for (; w; w = next) {
		next = w->next;
		assert(wk->pending > 0);
		wk->pending--;
		w->done(w);
	}
}

int za_worker_new(struct za_io *io, struct za_worker **out)
{
	struct za_worker *wk = calloc(1, sizeof(*wk));
	sigset_t all, old;
	int ret;

	if (!wk)
		return -ENOMEM;
	wk->loop = za_io_loop(io);
	pthread_mutex_init(&wk->lock, NULL);
	pthread_cond_init(&wk->cond, NULL);
	ev_async_init(&wk->w, worker_async_cb);
	wk->w.data = wk;
	ev_async_start(wk->loop, &wk->w);
	ev_unref(wk->loop);
	/* Signals are for the loop's thread. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	ret = -pthread_create(&wk->th, NULL, worker_main, wk);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (ret)
		goto err_async;
	*out = wk;
	return 0;

err_async:
	ev_ref(wk->loop);
	ev_async_stop(wk->loop, &wk->w);
	pthread_cond_destroy(&wk->cond);
	pthread_mutex_destroy(&wk->lock);
	free(wk);
	return ret;
}

void za_worker_queue(struct za_worker *wk, struct za_work *w)
{
	assert(w->run && w->done);
	wk->pending++;
	pthread_mutex_lock(&wk->lock);
	push(&wk->in_head, &wk->in_tail, w);
	pthread_cond_signal(&wk->cond);
	pthread_mutex_unlock(&wk->lock);
}

unsigned za_worker_pending(const struct za_worker *wk)
{
	return wk->pending;
}

void za_worker_free(struct za_worker *wk)
{
	if (!wk)
		return;
	pthread_mutex_lock(&wk->lock);
	wk->stop = true;
	pthread_cond_signal(&wk->cond);
	pthread_mutex_unlock(&wk->lock);
	pthread_join(wk->th, NULL);
	ev_ref(wk->loop);
	ev_async_stop(wk->loop, &wk->w);
	pthread_cond_destroy(&wk->cond);
	pthread_mutex_destroy(&wk->lock);
	free(wk);
}
