// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * nbd-rx.c - a receive thread for one NBD connection (see nbd-rx.h).
 *
 * Why a thread: the loop parses, maps and stripes what it reads, and a
 * 1 MiB WRITE keeps it away from the socket for a fraction of a
 * millisecond; a Unix socket holds only about 200 KiB, so the client
 * filled it and slept, then the loop slept while the client woke: the
 * two took turns instead of overlapping (P1, docs/design.md 8.6). The
 * thread keeps reading into a ring while the loop works.
 *
 * The stream is cut in two places, in order: the ring, and at most one
 * *target*, a payload buffer the loop lends for the rest of a large
 * payload so that its bytes are not copied twice. When the loop lends
 * one, it first takes everything the ring holds (all older than the
 * target's bytes); from then on the first bytes to arrive are the
 * target's. The thread reads straight into the target while the ring is
 * empty; bytes that a read already under way put in the ring meanwhile
 * are moved into the target by the thread, so the target always holds
 * a prefix of its bytes and the ring only bytes after the target's.
 *
 * Everything shared is under one mutex, the only lock; the thread does
 * its recv() and waits for input (poll()) outside it. It never parses,
 * allocates or touches the connection: nbd.c reads as if from recv().
 */
#include <assert.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <ev.h>

#include "nbd-rx.h"

/* A direct read is worth lending a buffer for from this size on. */
#define RX_DIRECT_MIN (64u << 10)
#define RX_STACK_BYTES (1u << 20)

struct za_nbd_rx {
	struct ev_loop *loop;
	int fd;
	void (*wake)(void *arg);
	void *arg;
	ev_async w;
	pthread_t th;

	pthread_mutex_t lock;
	pthread_cond_t cond; /* ring space, a target, or stop */
	/* Under lock. Ring bytes are [tail, head) of what it received. */
	uint8_t *ring;
	size_t cap;
	uint64_t head, tail;
	bool stop, end;
	int err; /* at the end: 0 (EOF) or the socket's errno */
	/* The target: t_done bytes arrived at t_ptr, t_taken reported. */
	uint8_t *t_ptr;
	size_t t_len, t_done, t_taken;
};

/* Thread, under lock: ring bytes that belong to the target go there. */
static void rx_fill_target(struct za_nbd_rx *rx)
{
	while (rx->t_ptr && rx->t_done < rx->t_len && rx->head != rx->tail) {
		size_t off = rx->tail % rx->cap, k = rx->head - rx->tail;

		if (k > rx->cap - off)
			k = rx->cap - off;
		if (k > rx->t_len - rx->t_done)
			k = rx->t_len - rx->t_done;
		memcpy(rx->t_ptr + rx->t_done, rx->ring + off, k);
		rx->t_done += k;
		rx->tail += k;
	}
}

static void *rx_main(void *arg)
{
	struct za_nbd_rx *rx = arg;

	pthread_mutex_lock(&rx->lock);
	while (!rx->stop) {
		bool to_target = false;
		uint8_t *dst;
		size_t room;
		ssize_t n;
		int err;

		if (rx->t_ptr && rx->t_done < rx->t_len &&
		    rx->head == rx->tail) {
			dst = rx->t_ptr + rx->t_done;
			room = rx->t_len - rx->t_done;
			to_target = true;
		} else if (rx->head - rx->tail < rx->cap) {
			size_t off = rx->head % rx->cap;

			room = rx->cap - (size_t)(rx->head - rx->tail);
			if (room > rx->cap - off)
				room = rx->cap - off;
			dst = rx->ring + off;
		} else {
			pthread_cond_wait(&rx->cond, &rx->lock);
			continue;
		}
		pthread_mutex_unlock(&rx->lock);
		n = recv(rx->fd, dst, room, MSG_DONTWAIT);
		err = errno;
		if (n < 0 &&
		    (err == EAGAIN || err == EWOULDBLOCK || err == EINTR)) {
			struct pollfd p = { .fd = rx->fd, .events = POLLIN };

			/* za_nbd_rx_stop() shuts the socket down to end it. */
			poll(&p, 1, -1);
			pthread_mutex_lock(&rx->lock);
			continue;
		}
		pthread_mutex_lock(&rx->lock);
		if (n <= 0) {
			rx->end = true;
			rx->err = n < 0 ? err : 0;
			ev_async_send(rx->loop, &rx->w);
			break;
		}
		if (to_target) {
			rx->t_done += (size_t)n;
		} else {
			rx->head += (size_t)n;
			rx_fill_target(rx);
		}
		ev_async_send(rx->loop, &rx->w);
	}
	pthread_mutex_unlock(&rx->lock);
	return NULL;
}

static void rx_async_cb(struct ev_loop *loop, ev_async *w, int revents)
{
	struct za_nbd_rx *rx = w->data;

	(void)loop;
	(void)revents;
	rx->wake(rx->arg);
}

int za_nbd_rx_start(struct ev_loop *loop, int fd, size_t ring_bytes,
		    void (*wake)(void *arg), void *arg, struct za_nbd_rx **out)
{
	struct za_nbd_rx *rx = calloc(1, sizeof(*rx));
	sigset_t all, old;
	pthread_attr_t attr;
	int ret;

	if (!rx)
		return -ENOMEM;
	rx->ring = malloc(ring_bytes);
	if (!rx->ring) {
		ret = -ENOMEM;
		goto err_free;
	}
	rx->cap = ring_bytes;
	rx->loop = loop;
	rx->fd = fd;
	rx->wake = wake;
	rx->arg = arg;
	pthread_mutex_init(&rx->lock, NULL);
	pthread_cond_init(&rx->cond, NULL);
	ev_async_init(&rx->w, rx_async_cb);
	rx->w.data = rx;
	ev_async_start(loop, &rx->w);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, RX_STACK_BYTES);
	/* Signals are for the loop's thread. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	ret = -pthread_create(&rx->th, &attr, rx_main, rx);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (ret)
		goto err_async;
	*out = rx;
	return 0;

err_async:
	ev_async_stop(loop, &rx->w);
	pthread_cond_destroy(&rx->cond);
	pthread_mutex_destroy(&rx->lock);
err_free:
	free(rx->ring);
	free(rx);
	return ret;
}

/* Under lock: up to @len ring bytes into @dst. */
static size_t rx_take_ring(struct za_nbd_rx *rx, uint8_t *dst, size_t len)
{
	size_t done = 0;

	while (done < len && rx->head != rx->tail) {
		size_t off = rx->tail % rx->cap, k = rx->head - rx->tail;

		if (k > rx->cap - off)
			k = rx->cap - off;
		if (k > len - done)
			k = len - done;
		memcpy(dst + done, rx->ring + off, k);
		done += k;
		rx->tail += k;
	}
	if (done)
		pthread_cond_signal(&rx->cond); /* room in the ring */
	return done;
}

ssize_t za_nbd_rx_recv(struct za_nbd_rx *rx, void *dst, size_t len, bool direct)
{
	ssize_t ret;
	size_t k;

	if (!len)
		return 0;
	pthread_mutex_lock(&rx->lock);
	if (rx->t_ptr) {
		/* Only the target's own bytes come before the ring's now. */
		assert((uint8_t *)dst == rx->t_ptr + rx->t_taken);
		k = rx->t_done - rx->t_taken;
		rx->t_taken = rx->t_done;
		if (rx->t_taken == rx->t_len) {
			rx->t_ptr = NULL;
			pthread_cond_signal(&rx->cond);
		}
		if (k) {
			ret = (ssize_t)k;
			goto out;
		}
	} else {
		k = rx_take_ring(rx, dst, len);
		if (direct && len - k >= RX_DIRECT_MIN && !rx->end) {
			/* The ring is empty: the next bytes are the target's. */
			rx->t_ptr = (uint8_t *)dst + k;
			rx->t_len = len - k;
			rx->t_done = rx->t_taken = 0;
			pthread_cond_signal(&rx->cond);
		}
		if (k) {
			ret = (ssize_t)k;
			goto out;
		}
	}
	if (rx->end && !(rx->t_ptr && rx->t_done > rx->t_taken) &&
	    rx->head == rx->tail)
		ret = rx->err ? -rx->err : 0;
	else
		ret = -EAGAIN;
out:
	pthread_mutex_unlock(&rx->lock);
	return ret;
}

bool za_nbd_rx_ready(struct za_nbd_rx *rx)
{
	bool r;

	pthread_mutex_lock(&rx->lock);
	r = rx->head != rx->tail || (rx->t_ptr && rx->t_done > rx->t_taken) ||
	    rx->end;
	pthread_mutex_unlock(&rx->lock);
	return r;
}

void za_nbd_rx_stop(struct za_nbd_rx *rx)
{
	if (!rx)
		return;
	pthread_mutex_lock(&rx->lock);
	rx->stop = true;
	pthread_cond_signal(&rx->cond);
	pthread_mutex_unlock(&rx->lock);
	/* Wakes a poll() or recv() on the socket; we read it no more. */
	shutdown(rx->fd, SHUT_RD);
	pthread_join(rx->th, NULL);
	ev_async_stop(rx->loop, &rx->w);
	pthread_cond_destroy(&rx->cond);
	pthread_mutex_destroy(&rx->lock);
	free(rx->ring);
	free(rx);
}
