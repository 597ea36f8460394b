// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * nbd-rx.c - a receive ring for one NBD connection (see nbd-rx.h),
 * filled by the loop or by a thread.
 *
 * Pulled (the default), there is no thread: a read that lacks bytes
 * recv()s what the socket holds into the ring's free room, and a large
 * payload the ring does not hold is read straight into its buffer. The
 * rest of this comment is about the thread (zarrayd --rx-thread).
 *
 * Why a thread: the loop parses, maps and stripes what it reads, and a
 * 1 MiB WRITE keeps it away from the socket for a fraction of a
 * millisecond; a Unix socket holds only about 200 KiB, so the client
 * filled it and slept, then the loop slept while the client woke: the
 * two took turns instead of overlapping (bench/results/notes.md, P1). The
 * thread keeps reading into a ring while the loop works.
 *
 * The stream is cut in two places, in order: the ring, and at most one
 * *target*, a payload buffer the loop lends for a large payload so that
 * its bytes are not copied twice. The loop lends one right after the
 * payload's header, so whatever the ring holds then is the target's
 * first bytes: the thread moves them into the target (off the loop's
 * thread, which has the striping to do) and then reads straight into
 * it while the ring is empty; bytes that a read already under way put
 * in the ring meanwhile are moved into the target the same way, so the
 * target always holds a prefix of its bytes and the ring only bytes
 * after the target's. Only when the thread sleeps in poll() - the client
 * sends nothing more - does the loop move the ring's bytes itself
 * before lending the rest, since nothing would wake the thread for it.
 *
 * A payload the ring holds whole can also be kept there after the loop
 * has read past it (za_nbd_rx_keep()), for the volume to refer to until
 * its stripe is written instead of copying it: the ring's free space
 * then starts at the oldest kept payload, so keeping is refused once it
 * would leave less room than the largest payload that is peeked whole.
 *
 * Everything shared is under one mutex, the only lock; the thread does
 * its recv() and waits for input (poll()) outside it. It never parses,
 * allocates or touches the connection: nbd.c reads as if from recv().
 * A pulled ring takes the same lock (uncontended but for a kept
 * payload's release) so that both kinds share every path but the read.
 */
#include <assert.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <ev.h>

#include "nbd-rx.h"
#include "payload.h"

/* A direct read is worth lending a buffer for from this size on. */
#define RX_DIRECT_MIN (64u << 10)
#define RX_STACK_BYTES (1u << 20)
/* Payloads kept in place at once (za_nbd_rx_keep()). */
#define RX_MAX_HOLDS 32u

/* Ring bytes [start, end) kept for a payload's references. */
struct rx_hold {
	struct za_payload pl;
	struct za_nbd_rx *rx;
	uint64_t start, end;
	bool released;
};

struct za_nbd_rx {
	struct ev_loop *loop;
	int fd;
	void (*wake)(void *arg);
	void *arg;
	ev_async w;
	pthread_t th;

	pthread_mutex_t lock;
	pthread_cond_t cond; /* ring space, a target, or stop */
	/* Under lock. Ring bytes are [tail, head) of what it received;
	 * [free_pos, tail) were consumed but are still kept (holds). */
	uint8_t *ring;
	size_t cap;
	bool ring_reused; /* set at start */
	bool pull; /* no thread: the loop reads the socket into the ring */
	bool blocked; /* pull: no room for input until a hold goes */
	uint64_t head, tail, free_pos;
	bool stop, end;
	bool polling; /* the thread waits in poll() for the socket */
	size_t want; /* ring bytes worth waking the loop for (peek) */
	int err; /* at the end: 0 (EOF) or the socket's errno */
	/* The target: t_done bytes arrived at t_ptr, t_taken reported. */
	uint8_t *t_ptr;
	size_t t_len, t_done, t_taken;

	/* Loop thread only: kept payloads, oldest first, in slots
	 * h_first..h_next-1 (mod RX_MAX_HOLDS); stopped: za_nbd_rx_stop()
	 * ran while some were kept, and the last release frees it all. */
	struct rx_hold holds[RX_MAX_HOLDS];
	uint64_t h_first, h_next;
	bool stopped;
};

/* Under lock: what the loop consumed is free, except what holds keep. */
static void rx_update_free(struct za_nbd_rx *rx)
{
	uint64_t f = rx->h_first == rx->h_next ?
			     rx->tail :
			     rx->holds[rx->h_first % RX_MAX_HOLDS].start;

	if (f != rx->free_pos) {
		rx->free_pos = f;
		pthread_cond_signal(&rx->cond); /* room in the ring */
		if (rx->blocked) {
			rx->blocked = false;
			ev_async_send(rx->loop, &rx->w);
		}
	}
}

/* Under lock: up to @len bytes from the ring's tail into @dst. */
static size_t rx_ring_out(struct za_nbd_rx *rx, uint8_t *dst, size_t len)
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
	rx_update_free(rx);
	return done;
}

/* Thread, under lock: ring bytes that belong to the target go there. */
static void rx_fill_target(struct za_nbd_rx *rx)
{
	if (rx->t_ptr)
		rx->t_done += rx_ring_out(rx, rx->t_ptr + rx->t_done,
					  rx->t_len - rx->t_done);
}

/* Under lock: does the target wait for bytes the ring holds? */
static bool rx_target_in_ring(const struct za_nbd_rx *rx)
{
	return rx->t_ptr && rx->t_done < rx->t_len && rx->head != rx->tail;
}

/*
 * Pull mode, loop thread: one recv() of what the socket holds. Returns the
 * bytes read (> 0), -EINTR or -EAGAIN (again, or later), or 0 at the end
 * of input, with its cause in *@err (0: the client closed the socket).
 */
static ssize_t rx_sock_recv(int fd, void *dst, size_t len, int *err)
{
	ssize_t n = recv(fd, dst, len, MSG_DONTWAIT);

	*err = 0;
	if (n >= 0)
		return n;
	if (errno == EINTR)
		return -EINTR;
	if (errno == EAGAIN || errno == EWOULDBLOCK)
		return -EAGAIN;
	*err = errno;
	return 0;
}

/*
 * Pull mode, loop thread, under lock: read what the socket holds into the
 * ring's free room until it holds @need bytes. The room is contiguous
 * from head on (the ring is mapped twice). Keeping leaves room for a
 * payload peeked whole (za_nbd_rx_keep()'s reserve), but bytes consumed
 * after a kept payload can take that room too: then the ring is marked
 * blocked, and the first room made wakes the loop (rx_update_free()).
 */
static void rx_pull(struct za_nbd_rx *rx, size_t need)
{
	while (!rx->end && rx->head - rx->tail < need) {
		size_t room = rx->cap - (size_t)(rx->head - rx->free_pos);
		ssize_t n;
		int err;

		if (!room) {
			rx->blocked = true;
			return;
		}
		n = rx_sock_recv(rx->fd, rx->ring + rx->head % rx->cap, room,
				 &err);
		if (n > 0) {
			rx->head += (uint64_t)n;
		} else if (n == -EAGAIN) {
			return;
		} else if (n == 0) {
			rx->err = err;
			rx->end = true;
		}
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

		if (rx_target_in_ring(rx)) {
			/* A target lent while the ring held its first bytes:
			 * they are moved here, off the loop's thread. */
			rx_fill_target(rx);
			ev_async_send(rx->loop, &rx->w);
			continue;
		}
		if (rx->t_ptr && rx->t_done < rx->t_len) {
			dst = rx->t_ptr + rx->t_done;
			room = rx->t_len - rx->t_done;
			to_target = true;
		} else if (rx->head - rx->free_pos < rx->cap) {
			size_t off = rx->head % rx->cap;

			room = rx->cap - (size_t)(rx->head - rx->free_pos);
			if (room > rx->cap - off)
				room = rx->cap - off;
			dst = rx->ring + off;
		} else {
			/* Full. If kept payloads fill it, the loop may be
			 * waiting for input that cannot come until their
			 * holder lets go (za_nbd_rx_starved()). */
			if (rx->h_first != rx->h_next)
				ev_async_send(rx->loop, &rx->w);
			pthread_cond_wait(&rx->cond, &rx->lock);
			continue;
		}
		pthread_mutex_unlock(&rx->lock);
		n = recv(rx->fd, dst, room, MSG_DONTWAIT);
		err = errno;
		if (n < 0 &&
		    (err == EAGAIN || err == EWOULDBLOCK || err == EINTR)) {
			struct pollfd p = { .fd = rx->fd, .events = POLLIN };

			pthread_mutex_lock(&rx->lock);
			/* A target lent meanwhile is filled before we sleep;
			 * once polling is set, the loop fills its own. */
			if (rx_target_in_ring(rx) || rx->stop)
				continue;
			rx->polling = true;
			pthread_mutex_unlock(&rx->lock);
			/* za_nbd_rx_stop() shuts the socket down to end it. */
			poll(&p, 1, -1);
			pthread_mutex_lock(&rx->lock);
			rx->polling = false;
			continue;
		}
		pthread_mutex_lock(&rx->lock);
		if (n <= 0) {
			rx_fill_target(rx); /* the thread ends here */
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
			/* A loop waiting for a whole payload is woken once. */
			if (!rx->t_ptr && rx->head - rx->tail < rx->want)
				continue;
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

/*
 * The ring of the last connection that ended, kept for the next one. A
 * ring's pages are touched as it first fills, and in a VM whose host
 * backs a page only on its first touch (bench/results/notes.md, P1) that costs
 * more than the copies the ring saves: 16 MiB of first touches took a
 * tenth of a 1 GiB sequential run over a new connection. One ring is
 * kept (its memory stays resident while no connection uses it); any
 * other is unmapped. za_nbd_rx_reserve() maps the first one, its pages
 * touched, before any connection needs it. Connections end on the loop's
 * thread, but a kept payload's last release may come from elsewhere,
 * hence the lock.
 */
static struct {
	pthread_mutex_t lock;
	uint8_t *ring;
	size_t bytes;
} rx_spare = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void rx_ring_unmap(uint8_t *ring, size_t bytes)
{
	pthread_mutex_lock(&rx_spare.lock);
	if (!rx_spare.ring) {
		rx_spare.ring = ring;
		rx_spare.bytes = bytes;
		ring = NULL;
	}
	pthread_mutex_unlock(&rx_spare.lock);
	if (ring)
		munmap(ring, 2 * bytes);
}

/*
 * The ring's memory, mapped twice in a row: any @bytes of it starting
 * anywhere in the first copy are contiguous, so a payload the ring holds
 * can be handed out in place (za_nbd_rx_peek()) even across the wrap.
 * The spare ring if it has the size.
 */
static int rx_ring_map(size_t bytes, bool populate, uint8_t **out, bool *reused)
{
	const int flags = MAP_SHARED | MAP_FIXED |
			  (populate ? MAP_POPULATE : 0);
	uint8_t *base;
	int fd, ret = 0;

	if (!bytes || bytes % (size_t)sysconf(_SC_PAGESIZE))
		return -EINVAL;
	pthread_mutex_lock(&rx_spare.lock);
	base = rx_spare.bytes == bytes ? rx_spare.ring : NULL;
	if (base)
		rx_spare.ring = NULL;
	pthread_mutex_unlock(&rx_spare.lock);
	*reused = base != NULL;
	if (base) {
		*out = base;
		return 0;
	}
	fd = memfd_create("za-nbd-rx", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)bytes)) {
		ret = -errno;
		goto out;
	}
	base = mmap(NULL, 2 * bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
		    0);
	if (base == MAP_FAILED) {
		ret = -errno;
		goto out;
	}
	if (mmap(base, bytes, PROT_READ | PROT_WRITE, flags, fd, 0) ==
		    MAP_FAILED ||
	    mmap(base + bytes, bytes, PROT_READ | PROT_WRITE, flags, fd, 0) ==
		    MAP_FAILED) {
		ret = -errno;
		munmap(base, 2 * bytes);
		goto out;
	}
	*out = base;
out:
	close(fd); /* the mappings keep the memory */
	return ret;
}

int za_nbd_rx_reserve(size_t ring_bytes)
{
	bool kept, reused;
	uint8_t *ring;
	int ret;

	if (!ring_bytes || ring_bytes % (size_t)sysconf(_SC_PAGESIZE))
		return -EINVAL;
	pthread_mutex_lock(&rx_spare.lock);
	kept = rx_spare.ring != NULL;
	pthread_mutex_unlock(&rx_spare.lock);
	if (kept)
		return 0;
	ret = rx_ring_map(ring_bytes, true, &ring, &reused);
	if (ret)
		return ret;
	rx_ring_unmap(ring, ring_bytes); /* kept as the spare */
	return 0;
}

int za_nbd_rx_start(struct ev_loop *loop, int fd, size_t ring_bytes, bool pull,
		    void (*wake)(void *arg), void *arg, struct za_nbd_rx **out)
{
	struct za_nbd_rx *rx = calloc(1, sizeof(*rx));
	sigset_t all, old;
	pthread_attr_t attr;
	int ret;

	if (!rx)
		return -ENOMEM;
	ret = rx_ring_map(ring_bytes, false, &rx->ring, &rx->ring_reused);
	if (ret)
		goto err_free;
	rx->cap = ring_bytes;
	rx->want = 1;
	rx->loop = loop;
	rx->fd = fd;
	rx->wake = wake;
	rx->arg = arg;
	pthread_mutex_init(&rx->lock, NULL);
	pthread_cond_init(&rx->cond, NULL);
	ev_async_init(&rx->w, rx_async_cb);
	rx->w.data = rx;
	ev_async_start(loop, &rx->w);
	if (pull) {
		rx->pull = true;
		*out = rx;
		return 0;
	}
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
	rx_ring_unmap(rx->ring, ring_bytes);
err_free:
	free(rx);
	return ret;
}

bool za_nbd_rx_pulls(const struct za_nbd_rx *rx)
{
	return rx->pull;
}

bool za_nbd_rx_ring_reused(const struct za_nbd_rx *rx)
{
	return rx->ring_reused;
}

/* Under lock: up to @len ring bytes into @dst, for the loop. */
static size_t rx_take_ring(struct za_nbd_rx *rx, uint8_t *dst, size_t len)
{
	return rx_ring_out(rx, dst, len);
}

ssize_t za_nbd_rx_recv(struct za_nbd_rx *rx, void *dst, size_t len, bool direct)
{
	ssize_t ret;
	size_t k;

	if (!len)
		return 0;
	pthread_mutex_lock(&rx->lock);
	rx->want = 1;
	if (rx->pull) {
		/* No targets: the ring's bytes, else the socket's. */
		if (rx->head == rx->tail && !rx->end) {
			if (direct && len >= RX_DIRECT_MIN) {
				/* A large payload: straight into its buffer. */
				int err;

				pthread_mutex_unlock(&rx->lock);
				ret = rx_sock_recv(rx->fd, dst, len, &err);
				if (ret == 0) {
					pthread_mutex_lock(&rx->lock);
					rx->end = true;
					rx->err = err;
					pthread_mutex_unlock(&rx->lock);
					ret = -err;
				}
				return ret;
			}
			rx_pull(rx, 1);
		}
		k = rx_take_ring(rx, dst, len);
		if (k) {
			ret = (ssize_t)k;
			goto out;
		}
	} else if (rx->t_ptr) {
		/* Only the target's own bytes come before the ring's now. */
		assert((uint8_t *)dst == rx->t_ptr + rx->t_taken);
		if (rx->end)
			rx_fill_target(rx); /* no thread to do it any more */
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
		if (direct && len >= RX_DIRECT_MIN && !rx->end &&
		    !rx->polling) {
			/* The ring's bytes are the target's first ones: the
			 * thread, awake, moves them there itself. */
			rx->t_ptr = dst;
			rx->t_len = len;
			rx->t_done = rx->t_taken = 0;
			pthread_cond_signal(&rx->cond);
			ret = -EAGAIN;
			goto out;
		}
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

ssize_t za_nbd_rx_peek(struct za_nbd_rx *rx, size_t len, const void **p)
{
	ssize_t ret;

	assert(len && len <= rx->cap);
	pthread_mutex_lock(&rx->lock);
	assert(!rx->t_ptr);
	rx->want = 1;
	if (rx->pull)
		rx_pull(rx, len);
	if (rx->head - rx->tail >= len) {
		*p = rx->ring + rx->tail % rx->cap;
		ret = (ssize_t)len;
	} else if (rx->end) {
		ret = rx->err ? -rx->err : 0;
	} else {
		rx->want = len; /* no wake-up before it is all there */
		ret = -EAGAIN;
	}
	pthread_mutex_unlock(&rx->lock);
	return ret;
}

void za_nbd_rx_skip(struct za_nbd_rx *rx, size_t len)
{
	pthread_mutex_lock(&rx->lock);
	assert(rx->head - rx->tail >= len);
	rx->tail += len;
	rx_update_free(rx);
	pthread_mutex_unlock(&rx->lock);
}

bool za_nbd_rx_starved(struct za_nbd_rx *rx)
{
	bool r;

	/* The state, not a flag the thread set: a flag could tell of
	 * holds already let go while a newer one fills the ring. */
	pthread_mutex_lock(&rx->lock);
	r = rx->h_first != rx->h_next && rx->head - rx->free_pos == rx->cap;
	pthread_mutex_unlock(&rx->lock);
	return r;
}

static void rx_free(struct za_nbd_rx *rx)
{
	pthread_cond_destroy(&rx->cond);
	pthread_mutex_destroy(&rx->lock);
	rx_ring_unmap(rx->ring, rx->cap);
	free(rx);
}

static void rx_hold_release(struct za_payload *pl)
{
	struct rx_hold *h = (struct rx_hold *)pl;
	struct za_nbd_rx *rx = h->rx;
	bool gone;

	/* The thread reads the holds (rx_update_free()) under the lock. */
	pthread_mutex_lock(&rx->lock);
	h->released = true;
	while (rx->h_first != rx->h_next &&
	       rx->holds[rx->h_first % RX_MAX_HOLDS].released)
		rx->h_first++;
	rx_update_free(rx);
	gone = rx->stopped && rx->h_first == rx->h_next;
	pthread_mutex_unlock(&rx->lock);
	if (gone)
		rx_free(rx);
}

struct za_payload *za_nbd_rx_keep(struct za_nbd_rx *rx, size_t len,
				  size_t reserve)
{
	struct rx_hold *h;

	if (rx->h_next - rx->h_first == RX_MAX_HOLDS)
		return NULL;
	pthread_mutex_lock(&rx->lock);
	assert(!rx->t_ptr && rx->head - rx->tail >= len);
	if (rx->tail + len - rx->free_pos + reserve > rx->cap) {
		pthread_mutex_unlock(&rx->lock);
		return NULL;
	}
	h = &rx->holds[rx->h_next++ % RX_MAX_HOLDS];
	*h = (struct rx_hold){ .pl = { .refs = 1, .release = rx_hold_release },
			       .rx = rx,
			       .start = rx->tail,
			       .end = rx->tail + len };
	rx->tail += len;
	rx_update_free(rx);
	/* A thread asleep on a full ring went to sleep with nothing kept:
	 * now it must tell the loop that the ring waits for a let-go. */
	pthread_cond_signal(&rx->cond);
	pthread_mutex_unlock(&rx->lock);
	return &h->pl;
}

/* Under lock: za_nbd_rx_full(). */
static bool rx_full(struct za_nbd_rx *rx)
{
	bool full = rx->head - rx->free_pos == rx->cap;

	if (full && !rx->blocked) {
		/* Told once now (the loop lets go of what it holds, from
		 * the top of the loop), then at the first room made. */
		rx->blocked = true;
		ev_async_send(rx->loop, &rx->w);
	}
	return full;
}

/* Under lock: za_nbd_rx_ready(). */
static bool rx_ready(const struct za_nbd_rx *rx, size_t need)
{
	return rx->head - rx->tail >= need ||
	       (rx->t_ptr && rx->t_done > rx->t_taken) || rx->end;
}

bool za_nbd_rx_full(struct za_nbd_rx *rx)
{
	bool full;

	assert(rx->pull);
	pthread_mutex_lock(&rx->lock);
	full = rx_full(rx);
	pthread_mutex_unlock(&rx->lock);
	return full;
}

bool za_nbd_rx_ready(struct za_nbd_rx *rx, size_t need)
{
	bool r;

	pthread_mutex_lock(&rx->lock);
	r = rx_ready(rx, need);
	pthread_mutex_unlock(&rx->lock);
	return r;
}

bool za_nbd_rx_poll(struct za_nbd_rx *rx, size_t need, bool *full)
{
	bool r;

	pthread_mutex_lock(&rx->lock);
	*full = rx->pull && rx_full(rx);
	r = rx_ready(rx, need);
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
	if (!rx->pull) {
		/* Wakes a poll() or recv() on the socket; we read it no
		 * more. */
		shutdown(rx->fd, SHUT_RD);
		pthread_join(rx->th, NULL);
	}
	ev_async_stop(rx->loop, &rx->w);
	/* No thread now: the holds are the loop's alone. */
	if (rx->h_first != rx->h_next) {
		rx->stopped = true; /* the last release frees it */
		return;
	}
	rx_free(rx);
}
