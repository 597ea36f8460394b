// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * volume.c - the exported volume: write buffering into stripes, the
 * journal for small synced writes, flush ordering, reads through the map.
 *
 * Big theory
 * ----------
 * A write is copied into the open stripe buffer of the data stream and the
 * map points its blocks at (buffer id, block); it is acknowledged at once
 * (NBD allows it). A full buffer is handed to the engine; when the stripe
 * is complete on all its columns, the map entries that still point at the
 * buffer are moved to (group, group position) and the buffer is released.
 *
 * A flush must not return before every write acknowledged before it is
 * durable. Every stripe submitted belongs to the current "epoch"; a flush
 * first disposes of the open buffer, then closes the epoch and waits for
 * all stripes of it and of earlier epochs, then FLUSHes every member
 * (drives have volatile caches), then answers:
 *
 *   writes: w w w w      flush#1        w w      flush#2
 *   epoch:  [---- 1 ----] close 1 [---- 2 ----] close 2
 *   flush#1 waits for epoch 1's stripes, then one device FLUSH round.
 *
 * Disposing of the open buffer: padding it to a full stripe costs
 * (k+p)/k x a whole stripe of device bytes, which is what a small synced
 * write must not cost. So when it is cheaper, each of its blocks goes to
 * the journal stream instead: k = 1, p parity columns, one 4 KiB block per
 * stripe (header + block on each of p+1 members: 2(p+1) device blocks per
 * user block, the brief's bound for a 4 KiB write + FLUSH loop), and the
 * block stays there - the journal is its home until garbage collection
 * moves it. Otherwise the buffer is padded and written as a data stripe.
 *
 * A stripe that fails for good (-ENOSPC, -EIO) keeps its buffer so that
 * reads still return what was acknowledged, and makes every later flush
 * fail: acknowledged data that cannot be made durable is reported, never
 * hidden.
 *
 * Checkpoints ("checkpoints" below, docs/design.md 8.5) bound crash
 * recovery: at a quiescent point the map and the unmap records are
 * written as metadata stripes of a stream of their own, and recovery
 * replays only the stripes written after the latest complete one.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>

#include "byteorder.h"
#include "checkpoint.h"
#include "container.h"
#include "crash.h"
#include "journal.h"
#include "log.h"
#include "map.h"
#include "payload.h"
#include "volume.h"

#define BUF_HASH 256u
/* Live-counter table: buckets at first; it doubles as groups come. */
#define LIVE_HASH_MIN 256u
/* GC's usage buckets (fractions of a group live), and how many groups of
 * the lowest eligible bucket one choice scores (gc_choose()). */
#define GC_BUCKETS 64
#define GC_SCAN 32u
/* Payloads one buffer refers to at most; further blocks are copied. */
#define VBUF_MAX_PAYLOADS 16u

struct epoch {
	unsigned inflight; /* stripes of this epoch not yet complete */
	struct za_vol_req *waiters; /* flushes closing this epoch */
	struct epoch *next;
};

struct vbuf {
	struct za_volume *v;
	uint64_t id;
	unsigned stream;
	struct za_stripe_w *s;
	uint32_t nr; /* blocks filled */
	uint8_t kind; /* enum za_stripe_kind */
	bool failed;
	uint64_t ulba, un; /* unmap records: the range */
	struct epoch *ep;
	struct vbuf *hnext;
	/* What its stripe's referred-to blocks (za_stripe_w_refer()) are
	 * in: one reference each, dropped when the stripe no longer needs
	 * them. */
	struct za_payload *pl[VBUF_MAX_PAYLOADS];
	unsigned nr_pl;
};

struct urange {
	uint64_t lba, n;
};

/* What a group's stream is, to GC. */
enum live_kind { LK_UNKNOWN, LK_DATA, LK_JOURNAL, LK_CKPT, LK_OTHER };

/*
 * A group's live counter, for garbage collection: one per group of the
 * engine (rec_finish() makes one for every group there is at assembly;
 * later groups get theirs with their first stripe). Each is in a hash
 * chain by group id and, when GC may take its group, in the usage bucket
 * of the fraction of it that is live (gc_choose()).
 */
struct live {
	uint64_t group;
	uint64_t blocks;
	struct urange *unmaps; /* unmap records this (journal) group holds */
	unsigned nr_unmaps, cap_unmaps;
	bool stuck; /* garbage collection could not move its data */
	bool unmaps_lost; /* an unmap record is missing from the list */
	uint8_t kind; /* enum live_kind */
	int bucket; /* GC usage bucket, -1: in none */
	double zones; /* zones the group holds (segments x stream width) */
	struct live *next; /* hash chain */
	struct live *bprev, *bnext; /* usage bucket */
};

/*
 * Every group's live counter, by id, and GC's usage buckets. Bucket b
 * holds the groups GC may take whose live fraction u (live_u()) is in
 * [b, b+1) / GC_BUCKETS; a counter moves between buckets as its blocks
 * die, so a choice reads the lowest buckets instead of every group.
 */
struct live_tab {
	struct live **h;
	size_t size, nr;
	struct live *bucket[GC_BUCKETS], *btail[GC_BUCKETS]; /* FIFO */
	uint64_t dbps; /* data blocks per segment the buckets assume */
	uint64_t max_group; /* the newest group seen: ages for GC's score */
	struct za_group_info *gi; /* scratch for za_engine_group_info() */
};

/* Garbage collection: one victim group at a time. */
struct gc_ext {
	uint64_t lba, n, pos;
};

struct gc {
	/*
	 * GC as a background job (job.h): a run is a series of victims, from
	 * the first chosen while GC had nothing to do until it has nothing to
	 * do again; total counts the live bytes of the victims chosen, done
	 * those moved. Its rate limit and pause hold GC back only while no
	 * write waits for it (gc_urgent()).
	 */
	struct za_job job;
	bool active;
	bool held; /* reads of the victim wait for the pause or the rate */
	bool stopped; /* za_volume_gc_stop(): no new victim */
	uint64_t victim;
	uint8_t kind; /* ZA_MAP_DATA or ZA_MAP_JOURNAL */
	struct gc_ext *ext;
	size_t nr_ext, cap_ext, next_ext;
	uint64_t next_off; /* blocks of ext[next_ext] already read */
	unsigned reads;
	int error;
	struct za_vol_req flush;
	/* GC while the volume is idle (za_volume_params.idle_gc_ms). */
	ev_timer idle_w;
	unsigned idle_ms; /* za_volume_params.idle_gc_ms */
	bool idle_on; /* the timer runs */
	uint64_t idle_ops; /* user_ops at the last tick */
	uint64_t idle_base; /* free segments when its progress was last seen */
	unsigned idle_runs; /* victims it started since then */
};

/* Checkpoints: one being written at a time, and the live one. */
enum { CK_IDLE, CK_QUIESCE, CK_WRITE, CK_FLUSH };

struct ckpt {
	unsigned stream; /* engine stream of checkpoint parts */
	uint64_t interval_blocks; /* 0: the adaptive default */
	unsigned window; /* parts in flight */
	bool recover_full;
	uint64_t since_blocks; /* stripe blocks submitted since the last */
	/* Stripes the map depends on: bumped for each one submitted (and by
	 * a recovery that replayed some); what the live checkpoint saw. */
	uint64_t gen, snap_gen, live_gen;
	int state; /* CK_* */
	struct za_vol_req qflush; /* the flush that makes the point quiet */
	struct za_engine_flush ef; /* the one after the parts */
	struct za_vol_req *waiters; /* za_volume_checkpoint(), not yet covered */
	struct za_vol_req *cur_waiters; /* covered by the one being written */
	/* The one being written. */
	uint64_t id, seq;
	uint8_t *blocks; /* nr_parts encoded parts */
	uint64_t *part_group; /* where each part written landed */
	uint32_t nr_parts, next_part, done_parts;
	unsigned inflight;
	int error;
	/* The live one: the latest complete, flushed (or loaded) checkpoint. */
	uint64_t live_id, live_seq;
	uint64_t *live_groups; /* its parts' groups */
	uint32_t live_nr;
	uint64_t next_id;
};

struct eflush {
	struct za_engine_flush f;
	struct za_vol_req *waiters;
	struct za_volume *v;
};

/*
 * Writes wait while GC works to get space back, and while too many data
 * stripes are already on their way (backpressure: buffers are memory, and
 * a writer faster than the drives must not queue without bound).
 */
#define MAX_DATA_INFLIGHT 32u
/* Journal stripes on their way at most (one per synced small write). */
#define MAX_JRNL_INFLIGHT 64u

struct za_volume {
	struct za_io *io;
	struct za_engine *eng;
	unsigned jstream;
	uint64_t size_blocks;
	struct za_map *map;
	struct vbuf *cur;
	uint64_t next_buf_id;
	struct vbuf *bhash[BUF_HASH];
	struct live_tab lt;
	struct epoch *ep_head, *ep_tail;
	unsigned eflushes; /* device flush rounds in flight */
	unsigned reads; /* reads in flight */
	int error; /* sticky: a stripe could not be made durable */
	struct za_volume_stats st;
	uint64_t user_ops; /* requests from the volume's user, ever */
	struct gc gc;
	/* writes held back while free space is critically low */
	struct za_vol_req *stalled_head, *stalled_tail;
	bool critical; /* free space below the user-write floor */
	uint32_t data_credit; /* data stripes the free space allows */
	uint32_t jrnl_credit; /* journal stripes the free space allows */
	unsigned data_inflight; /* data stripes submitted, not complete */
	unsigned jrnl_inflight; /* journal stripes submitted, not complete */
	struct ckpt ck;
};

static void gc_kick(struct za_volume *v);
static void gc_job_timer(struct za_job *j);
static void gc_idle_set(struct za_volume *v, bool on);
static bool space_critical(struct za_volume *v);
static void ckpt_kick(struct za_volume *v);
static void ckpt_pump(struct za_volume *v);
static void resume_stalled(struct za_volume *v);
static uint64_t default_size(const struct za_engine *e, bool streams_added);
static void write_now(struct za_volume *v, struct za_vol_req *r);

/* ---- live counters (per group, for garbage collection) ---- */

static int live_tab_init(struct live_tab *lt)
{
	lt->size = LIVE_HASH_MIN;
	lt->h = calloc(lt->size, sizeof(*lt->h));
	lt->gi = malloc(sizeof(*lt->gi));
	if (!lt->h || !lt->gi)
		return -ENOMEM;
	return 0;
}

/* The fraction of @l's zones its live blocks would take in data
 * segments: what moving it costs against what it frees. */
static double live_u(const struct za_volume *v, const struct live *l)
{
	double live_zones;

	if (!v->lt.dbps || l->zones <= 0)
		return 1;
	live_zones = (double)l->blocks * za_engine_layout(v->eng)->width /
		     (double)v->lt.dbps;
	return live_zones / l->zones;
}

/* The bucket @l belongs in: -1 when GC must not take its group. */
static int live_bucket(const struct za_volume *v, const struct live *l)
{
	double u;

	if (l->stuck || l->kind == LK_UNKNOWN || l->kind == LK_OTHER)
		return -1;
	/* Superseded (or torn) checkpoints only: the live one, and the one
	 * being written, count their parts. */
	if (l->kind == LK_CKPT && l->blocks)
		return -1;
	u = live_u(v, l);
	if (u >= 1)
		return GC_BUCKETS - 1;
	return (int)(u * GC_BUCKETS);
}

static void live_unbucket(struct live_tab *lt, struct live *l)
{
	if (l->bucket < 0)
		return;
	if (l->bprev)
		l->bprev->bnext = l->bnext;
	else
		lt->bucket[l->bucket] = l->bnext;
	if (l->bnext)
		l->bnext->bprev = l->bprev;
	else
		lt->btail[l->bucket] = l->bprev;
	l->bprev = l->bnext = NULL;
	l->bucket = -1;
}

/* Put @l in the bucket its counter says, after any change to it: at the
 * tail, so that the groups longest in a bucket are scored first. */
static void live_index(struct za_volume *v, struct live *l)
{
	struct live_tab *lt = &v->lt;
	int b = live_bucket(v, l);

	if (b == l->bucket)
		return;
	live_unbucket(lt, l);
	if (b < 0)
		return;
	l->bucket = b;
	l->bprev = lt->btail[b];
	if (l->bprev)
		l->bprev->bnext = l;
	else
		lt->bucket[b] = l;
	lt->btail[b] = l;
}

/* Learn @l's stream and size from the engine (0, or -ENOENT: no such
 * group, and GC leaves the counter alone). */
static int live_learn(struct za_volume *v, struct live *l)
{
	struct za_group_info *gi = v->lt.gi;

	if (za_engine_group_info(v->eng, l->group, gi)) {
		l->kind = LK_UNKNOWN;
		live_index(v, l);
		return -ENOENT;
	}
	l->kind = gi->stream == ZA_STREAM_DATA ? LK_DATA :
		  gi->stream == v->jstream     ? LK_JOURNAL :
		  gi->stream == v->ck.stream   ? LK_CKPT :
						 LK_OTHER;
	l->zones = (double)gi->nr_segs *
		   za_engine_stream_layout(v->eng, gi->stream)->width;
	live_index(v, l);
	return 0;
}

static void live_grow(struct live_tab *lt)
{
	size_t size = 2 * lt->size, i;
	struct live **h = calloc(size, sizeof(*h));

	if (!h)
		return; /* longer chains, nothing lost */
	for (i = 0; i < lt->size; i++)
		while (lt->h[i]) {
			struct live *l = lt->h[i];

			lt->h[i] = l->next;
			l->next = h[l->group & (size - 1)];
			h[l->group & (size - 1)] = l;
		}
	free(lt->h);
	lt->h = h;
	lt->size = size;
}

static struct live *live_get(struct za_volume *v, uint64_t group, bool make)
{
	struct live_tab *lt = &v->lt;
	struct live **h = &lt->h[group & (lt->size - 1)], *l;

	for (l = *h; l; l = l->next)
		if (l->group == group)
			return l;
	if (!make)
		return NULL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	l->group = group;
	l->bucket = -1;
	l->next = *h;
	*h = l;
	if (group > lt->max_group)
		lt->max_group = group;
	live_learn(v, l);
	if (++lt->nr > 2 * lt->size)
		live_grow(lt);
	return l;
}

/* Add @delta (which may be negative) to @l's blocks, never below 0. */
static void live_add(struct za_volume *v, struct live *l, int64_t delta)
{
	if (delta < 0 && (uint64_t)-delta > l->blocks)
		l->blocks = 0;
	else
		l->blocks += (uint64_t)delta;
	live_index(v, l);
}

/* GC must never take @l's group (again). */
static void live_stick(struct za_volume *v, struct live *l)
{
	l->stuck = true;
	live_index(v, l);
}

/* Forget @l, found at *@lp in its chain. */
static void live_drop(struct za_volume *v, struct live **lp)
{
	struct live *l = *lp;

	*lp = l->next;
	live_unbucket(&v->lt, l);
	v->lt.nr--;
	free(l->unmaps);
	free(l);
}

static void live_forget(struct za_volume *v, uint64_t group)
{
	struct live **lp = &v->lt.h[group & (v->lt.size - 1)];

	for (; *lp; lp = &(*lp)->next)
		if ((*lp)->group == group) {
			live_drop(v, lp);
			return;
		}
}

static void live_clear(struct za_volume *v)
{
	size_t i;

	for (i = 0; i < v->lt.size; i++)
		while (v->lt.h[i])
			live_drop(v, &v->lt.h[i]);
}

static struct vbuf *vbuf_find(struct za_volume *v, uint64_t id);

/* Remember that journal group @group holds an unmap record of a range. */
static void live_add_unmap(struct za_volume *v, uint64_t group, uint64_t lba,
			   uint64_t n)
{
	struct live *l = live_get(v, group, true);

	if (!l)
		return;
	if (l->nr_unmaps == l->cap_unmaps) {
		unsigned cap = l->cap_unmaps ? 2 * l->cap_unmaps : 4;
		struct urange *u = realloc(l->unmaps, cap * sizeof(*u));

		if (!u) {
			/* Without the list GC must never drop this group, and
			 * no checkpoint may be written without the record. */
			l->unmaps_lost = true;
			live_stick(v, l);
			return;
		}
		l->unmaps = u;
		l->cap_unmaps = cap;
	}
	l->unmaps[l->nr_unmaps].lba = lba;
	l->unmaps[l->nr_unmaps++].n = n;
}

static void on_dead(void *priv, const struct za_map_loc *old, uint64_t n)
{
	struct za_volume *v = priv;
	struct live *l;

	if (old->kind == ZA_MAP_BUFFER) {
		struct vbuf *b = vbuf_find(v, old->group);
		uint64_t i;

		/*
		 * A buffer not yet handed to the engine must not claim these
		 * blocks any more: it will be written after the newer data,
		 * with a higher sequence number, and replay would bring the
		 * old blocks back. A submitted stripe keeps its LBA table: it
		 * already has its sequence number, lower than the newer
		 * data's, and it may still be waiting in the engine's queue,
		 * its headers not yet filled. Dropping the LBAs there would
		 * write a flushed block's only copy without its LBA while the
		 * newer version is not flushed yet (NEWS: seed 7017).
		 */
		if (b && b->ep)
			return;
		for (i = 0; b && i < n; i++)
			b->s->lbas[old->pos + i] = ZA_STRIPE_LBA_NONE;
		return;
	}
	l = live_get(v, old->group, false);
	if (l)
		live_add(v, l, -(int64_t)n);
}

/* ---- buffers ---- */

static struct vbuf *vbuf_find(struct za_volume *v, uint64_t id)
{
	struct vbuf *b;

	for (b = v->bhash[id % BUF_HASH]; b; b = b->hnext)
		if (b->id == id)
			return b;
	return NULL;
}

static struct vbuf *vbuf_new(struct za_volume *v, unsigned stream)
{
	struct vbuf *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	b->s = za_engine_stripe_get_stream(v->eng, stream);
	if (!b->s) {
		free(b);
		return NULL;
	}
	b->v = v;
	b->stream = stream;
	b->id = v->next_buf_id++;
	b->hnext = v->bhash[b->id % BUF_HASH];
	v->bhash[b->id % BUF_HASH] = b;
	return b;
}

static void vbuf_drop_payloads(struct vbuf *b)
{
	while (b->nr_pl)
		za_payload_put(b->pl[--b->nr_pl]);
}

/* @b's stripe holds all its blocks itself, before it outlives its write
 * (failed, or kept for the map): the payloads are not kept for it. */
static void vbuf_own(struct vbuf *b)
{
	za_stripe_w_own(b->v->eng, b->s);
	vbuf_drop_payloads(b);
}

static void vbuf_release(struct vbuf *b)
{
	struct za_volume *v = b->v;
	struct vbuf **p = &v->bhash[b->id % BUF_HASH];

	while (*p != b)
		p = &(*p)->hnext;
	*p = b->hnext;
	za_engine_stripe_put(v->eng, b->s);
	vbuf_drop_payloads(b);
	free(b);
}

static void progress(struct za_volume *v);

/* The stripe of @b is complete (or failed for good). */
static void vbuf_done(struct za_stripe_w *s, int result)
{
	struct vbuf *b = s->priv;
	struct za_volume *v = b->v;
	struct epoch *ep = b->ep;
	const struct za_stripe_layout *l =
		za_engine_stream_layout(v->eng, b->stream);
	uint32_t i, j;
	bool data = b->stream == ZA_STREAM_DATA;
	bool jrnl = b->stream == v->jstream; /* b may be freed below */

	if (result) {
		/* Logged once: every later stripe fails the same way. */
		if (!v->error)
			za_log_err("volume: a %s stripe could not be written: "
				   "%s; flushes will fail",
				   b->stream == ZA_STREAM_DATA ? "data" :
								 "journal",
				   strerror(-result));
		if (!v->error)
			v->error = result;
		b->failed = true; /* kept: reads still see the data */
		vbuf_own(b);
	} else {
		uint8_t kind = b->stream == ZA_STREAM_DATA ? ZA_MAP_DATA :
							     ZA_MAP_JOURNAL;
		uint64_t base = s->group_pos * l->data_blocks;
		struct live *lv = live_get(v, s->group_id, true);
		bool stuck = false;

		if (!data)
			za_crash_point("journal-append");
		if (b->kind == ZA_STRIPE_META)
			live_add_unmap(v, s->group_id, b->ulba, b->un);

		/* Move each run of consecutive LBAs in one map operation. */
		for (i = 0; i < b->nr; i = j) {
			struct za_map_loc from = { .kind = ZA_MAP_BUFFER,
						   .group = b->id,
						   .pos = i };
			struct za_map_loc to = { .kind = kind,
						 .group = s->group_id,
						 .pos = base + i };
			int64_t moved;

			if (s->lbas[i] == ZA_STRIPE_LBA_NONE) { /* dead */
				j = i + 1;
				continue;
			}
			for (j = i + 1;
			     j < b->nr && s->lbas[j] == s->lbas[j - 1] + 1; j++)
				;
			moved = za_map_move(v->map, s->lbas[i], j - i, &from,
					    &to);
			if (moved < 0)
				stuck = true;
			else if (lv)
				live_add(v, lv, moved);
		}
		if (stuck) {
			za_log_err("volume: out of memory updating the map; "
				   "buffer %llu kept",
				   (unsigned long long)b->id);
			vbuf_own(b);
		} else {
			vbuf_release(b);
		}
	}
	ep->inflight--;
	if (data)
		v->data_inflight--;
	else if (jrnl)
		v->jrnl_inflight--;
	progress(v);
	ckpt_kick(v);
	gc_kick(v);
	resume_stalled(v);
}

static void vbuf_submit(struct za_volume *v, struct vbuf *b)
{
	b->ep = v->ep_tail;
	b->ep->inflight++;
	if (b->stream == ZA_STREAM_DATA)
		v->data_inflight++;
	else if (b->stream == v->jstream)
		v->jrnl_inflight++;
	b->s->nr_blocks = b->nr;
	b->s->kind = b->kind ? b->kind : ZA_STRIPE_DATA;
	b->s->done = vbuf_done;
	b->s->priv = b;
	v->ck.since_blocks += b->nr;
	v->ck.gen++;
	if (b->stream == ZA_STREAM_DATA) {
		v->st.data_stripes++;
		if (b->nr < za_engine_layout(v->eng)->data_blocks)
			v->st.padded_stripes++;
	} else {
		v->st.journal_blocks++;
	}
	za_engine_write(v->eng, b->s);
}

/*
 * Every request of the volume's user passes here first, and arms GC while
 * idle if its timer stopped (it stops when it finds nothing to do, so an
 * idle daemon sleeps). Never before the first request: until the volume
 * serves, recovery may still be building the map and the live counters,
 * and a group whose counter is not built yet looks dead (a victim
 * released then was data lost: tests/lifecycle-daemon.sh, test_gc_idle).
 */
static void user_op(struct za_volume *v)
{
	v->user_ops++;
	if (v->gc.idle_ms && !v->gc.idle_on)
		gc_idle_set(v, true);
}

/* ---- construction ---- */

int za_volume_new(struct za_io *io, const struct za_volume_params *p,
		  struct za_volume **out)
{
	const struct za_stripe_layout *dl = za_engine_layout(p->eng);
	struct za_geom jg = { 0 };
	struct za_volume *v;
	int ret;

	if (p->size_bytes % 4096)
		return -EINVAL;
	v = calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	v->io = io;
	v->eng = p->eng;
	v->size_blocks = p->size_bytes / 4096;
	v->next_buf_id = 1;
	jg.k = 1;
	jg.p = (uint8_t)dl->p;
	jg.matrix = ZA_EC_MATRIX_CAUCHY;
	jg.stripe_rows = 1;
	jg.chunk_bytes = 4096;
	jg.lblock_bytes = 4096;
	jg.hdr_bytes = 4096;
	ret = za_engine_stream_add(p->eng, &jg, 1, &v->jstream);
	if (ret)
		goto err_free;
	/* Checkpoints: the journal's geometry, a stream of their own so that
	 * their groups hold nothing else (docs/design.md 8.5). */
	ret = za_engine_stream_add(p->eng, &jg, 1, &v->ck.stream);
	if (ret)
		goto err_free;
	v->ck.interval_blocks = p->ckpt_interval_bytes / 4096;
	if (p->ckpt_interval_bytes == UINT64_MAX)
		v->ck.interval_blocks = UINT64_MAX;
	v->ck.window = p->ckpt_window ? p->ckpt_window : 8;
	v->ck.recover_full = p->recover_full;
	v->ck.next_id = 1;
	/* The default size counts both write sets: add them first. */
	if (!p->size_bytes)
		v->size_blocks = default_size(p->eng, true) / 4096;
	if (!v->size_blocks) {
		ret = -ENOSPC;
		goto err_free;
	}
	ret = live_tab_init(&v->lt);
	if (ret)
		goto err_live;
	ret = za_map_new(&v->map);
	if (ret)
		goto err_live;
	v->ep_head = v->ep_tail = calloc(1, sizeof(*v->ep_head));
	if (!v->ep_head) {
		ret = -ENOMEM;
		goto err_map;
	}
	/* The first write must see how much space there is (and recovery
	 * looks again, once it knows what the drives hold). */
	v->critical = space_critical(v);
	v->gc.idle_ms = p->idle_gc_ms; /* armed by the first request */
	za_job_init(&v->gc.job, io, "gc", 0, gc_job_timer);
	*out = v;
	return 0;

err_map:
	za_map_free(v->map);
err_live:
	free(v->lt.h);
	free(v->lt.gi);
err_free:
	free(v);
	return ret;
}

void za_volume_gc_stop(struct za_volume *v)
{
	v->gc.stopped = true;
}

bool za_volume_busy(const struct za_volume *v)
{
	const struct epoch *ep;

	for (ep = v->ep_head; ep; ep = ep->next)
		if (ep->inflight || ep->waiters)
			return true;
	return v->reads || v->eflushes || v->gc.active || v->stalled_head ||
	       za_job_busy(&v->gc.job) || v->ck.state != CK_IDLE;
}

void za_volume_free(struct za_volume *v)
{
	unsigned i;

	if (!v)
		return;
	assert(!za_volume_busy(v));
	if (v->gc.idle_on)
		gc_idle_set(v, false);
	for (i = 0; i < BUF_HASH; i++)
		while (v->bhash[i])
			vbuf_release(v->bhash[i]);
	if (v->lt.h)
		live_clear(v);
	free(v->lt.h);
	free(v->lt.gi);
	while (v->ep_head) {
		struct epoch *ep = v->ep_head;

		v->ep_head = ep->next;
		free(ep);
	}
	free(v->gc.ext);
	free(v->ck.blocks);
	free(v->ck.part_group);
	free(v->ck.live_groups);
	za_map_free(v->map);
	free(v);
}

uint64_t za_volume_size(const struct za_volume *v)
{
	return v->size_blocks * 4096;
}

static int check_range(const struct za_volume *v, uint64_t off, uint64_t len)
{
	uint64_t size = v->size_blocks * 4096;

	if (off % 4096 || len % 4096 || len > size || off > size - len)
		return -EINVAL;
	return 0;
}

static void req_init(struct za_volume *v, struct za_vol_req *r)
{
	r->vol = v;
	r->next = NULL;
	r->pending = 0;
	r->result = 0;
	r->fua_flush = false;
	r->op = 0;
	r->payload = NULL;
}

/* ---- flush ---- */

static void eflush_done(struct za_engine_flush *f, int result)
{
	struct eflush *ef = f->priv;
	struct za_volume *v = ef->v;
	struct za_vol_req *r;

	v->eflushes--;
	if (!result && v->error)
		result = -EIO;
	while ((r = ef->waiters)) {
		ef->waiters = r->next;
		r->done(r, result);
	}
	free(ef);
}

/*
 * Retire epochs whose stripes are all complete; their flushes get one
 * device FLUSH round, then their answer.
 */
static void progress(struct za_volume *v)
{
	struct za_vol_req *batch = NULL, *r;
	struct eflush *ef;

	while (v->ep_head != v->ep_tail && !v->ep_head->inflight) {
		struct epoch *ep = v->ep_head;

		while ((r = ep->waiters)) {
			ep->waiters = r->next;
			r->next = batch;
			batch = r;
		}
		v->ep_head = ep->next;
		free(ep);
	}
	if (!batch)
		return;
	ef = calloc(1, sizeof(*ef));
	if (!ef || v->error) {
		int err = ef ? -EIO : -ENOMEM;

		free(ef);
		while ((r = batch)) {
			batch = r->next;
			r->done(r, err);
		}
		return;
	}
	ef->v = v;
	ef->waiters = batch;
	ef->f.done = eflush_done;
	ef->f.priv = ef;
	v->eflushes++;
	za_engine_flush(v->eng, &ef->f);
}

/* Send the open buffer to the drives: journal or padded stripe. */
static void seal_open_buffer(struct za_volume *v, bool force_stripe)
{
	const struct za_stripe_layout *dl = za_engine_layout(v->eng);
	struct vbuf *cur = v->cur;
	uint64_t cost_journal, cost_stripe;
	uint32_t b;

	if (!cur || !cur->nr)
		return;
	v->cur = NULL;
	/* Device blocks written: header + block on p+1 columns per block,
	 * against a whole stripe with its headers. */
	cost_journal = (uint64_t)cur->nr * 2 * (dl->p + 1);
	cost_stripe = (uint64_t)dl->width * (dl->slot_bytes / 4096);
	/* Garbage collection moving journal blocks must not journal them
	 * again: it always writes stripes. */
	if (force_stripe || cost_journal >= cost_stripe) {
		vbuf_submit(v, cur);
		return;
	}
	for (b = 0; b < cur->nr; b++) {
		struct za_map_loc from = { .kind = ZA_MAP_BUFFER,
					   .group = cur->id,
					   .pos = b };
		struct za_map_loc to = { .kind = ZA_MAP_BUFFER, .pos = 0 };
		uint64_t lba = cur->s->lbas[b];
		struct vbuf *jb;
		int64_t moved;

		if (lba == ZA_STRIPE_LBA_NONE)
			continue; /* overwritten or unmapped since */
		jb = vbuf_new(v, v->jstream);
		if (!jb) {
			/* No memory for the journal: pad the stripe instead. */
			za_log_warn("volume: journal buffer allocation failed; "
				    "writing a padded stripe");
			vbuf_submit(v, cur);
			return;
		}
		to.group = jb->id;
		moved = za_map_move(v->map, lba, 1, &from, &to);
		if (moved != 1) {
			/* Overwritten later in the same buffer: dead. */
			vbuf_release(jb);
			continue;
		}
		memcpy(za_stripe_w_block(v->eng, jb->s, 0),
		       za_stripe_w_data(v->eng, cur->s, b), 4096);
		jb->s->lbas[0] = lba;
		jb->nr = 1;
		vbuf_submit(v, jb);
	}
	vbuf_release(cur);
}

static void flush_enqueue(struct za_volume *v, struct za_vol_req *r)
{
	struct epoch *ep = calloc(1, sizeof(*ep));

	if (!ep) {
		r->done(r, -ENOMEM);
		return;
	}
	v->st.flushes++;
	seal_open_buffer(v, r->internal);
	r->next = v->ep_tail->waiters;
	v->ep_tail->waiters = r;
	v->ep_tail->next = ep;
	v->ep_tail = ep;
	progress(v);
}

void za_volume_flush(struct za_volume *v, struct za_vol_req *r)
{
	user_op(v);
	req_init(v, r);
	flush_enqueue(v, r);
}

/* ---- write ---- */

/*
 * Space is managed in zones (docs/design.md 8.4): garbage collection
 * starts below gc_start free zones, user writes wait below the floor (one
 * write set: what GC needs to move one victim), and the default volume
 * size leaves a reserve above the start so that GC always finds dead
 * space to reclaim.
 *
 * za_engine_space() counts the checkpoint stream's one open segment (p+1
 * zones) as a whole write set. GC needs no room for it (checkpoint
 * garbage is released as it lies, nothing moved), so it is left out of
 * the write sets here and counted once in the default size's reserve.
 */
static uint64_t gc_write_sets(const struct za_engine_space *sp)
{
	return sp->write_set_segs > 1 ? sp->write_set_segs - 1 :
					sp->write_set_segs;
}

static uint64_t gc_start_segs(const struct za_engine_space *sp)
{
	uint64_t a = sp->total_segs / 10, b = 2 * gc_write_sets(sp) + 1;

	return a > b ? a : b;
}

/*
 * Below one write set of free segments, plus room for the data stripes
 * already on their way: each may still need a new segment, and with small
 * zones (a few stripes per segment) MAX_DATA_INFLIGHT stripes are several
 * segments. Counting only the write set lets those stripes, then the
 * checkpoint stream, take the last free segment while GC waits to move a
 * victim, and data stripes fail with -ENOSPC (NEWS: seed 5010).
 */
/* Stripes of @per_seg a segment that @segs segments hold: 1 to @max. */
static uint32_t credit(uint64_t segs, uint64_t per_seg, uint32_t max)
{
	uint64_t n = segs * per_seg;

	return n < 1 ? 1 : n < max ? (uint32_t)n : max;
}

static bool space_critical(struct za_volume *v)
{
	const struct za_stripe_layout *dl = za_engine_layout(v->eng);
	const struct za_stripe_layout *jl =
		za_engine_stream_layout(v->eng, v->jstream);
	struct za_engine_space sp;
	uint64_t per_seg, jper_seg, on_way, floor, above;

	za_engine_space(v->eng, &sp);
	per_seg = sp.data_blocks_per_seg / dl->data_blocks;
	if (!per_seg)
		per_seg = 1;
	/*
	 * Journal stripes take room too: a deep queue of small FUA writes
	 * is a journal stripe each, and counted nowhere they took the
	 * segments below the floor while GC ran (test_ckpt_below_floor).
	 * A journal segment (p+1 zones) is counted as a whole data one.
	 */
	jper_seg = per_seg * dl->slot_bytes / jl->slot_bytes;
	if (!jper_seg)
		jper_seg = 1;
	on_way = (v->data_inflight + per_seg - 1) / per_seg +
		 (v->jrnl_inflight + jper_seg - 1) / jper_seg;
	floor = gc_write_sets(&sp) + 1;
	/* And no more stripes on their way than the space above the floor
	 * holds (always one, so that writes never wait on nothing). */
	above = sp.free_segs > floor ? sp.free_segs - floor : 0;
	v->data_credit = credit(above, per_seg, MAX_DATA_INFLIGHT);
	v->jrnl_credit = credit(above, jper_seg, MAX_JRNL_INFLIGHT);
	return sp.free_segs < floor + on_way;
}

static uint64_t default_size(const struct za_engine *e, bool streams_added)
{
	struct za_engine_space sp;
	uint64_t reserve, a, b, ws;

	za_engine_space(e, &sp);
	/* Before the volume's streams exist: the journal's write set. */
	ws = streams_added ? gc_write_sets(&sp) : sp.write_set_segs + 1;
	a = sp.total_segs * 15 / 100;
	b = 3 * ws + 2 + 1; /* + 1: the checkpoint stream's segment */
	reserve = a > b ? a : b;
	if (sp.free_segs <= reserve)
		return 0;
	return (sp.free_segs - reserve) * sp.data_blocks_per_seg * 4096;
}

uint64_t za_volume_default_size(const struct za_engine *e)
{
	return default_size(e, false);
}

/*
 * za_volume_max_size()'s formula over the members writable once @change
 * is made: every zone of theirs, used or free, since the user may fill
 * the whole volume after a drain, less the same reserve.
 */
uint64_t za_volume_max_size_if(const struct za_volume *v,
			       const enum za_space_change *change)
{
	struct za_engine_space sp;
	uint64_t reserve, a, b;

	za_engine_space_if(v->eng, change, &sp);
	a = sp.total_segs * 15 / 100;
	b = 3 * gc_write_sets(&sp) + 2 + 1;
	reserve = a > b ? a : b;
	if (sp.total_segs <= reserve)
		return 0;
	return (sp.total_segs - reserve) * sp.data_blocks_per_seg * 4096;
}

/*
 * Below the floor with a victim being moved, GC goes first: nothing else
 * may take free zones (user writes, checkpoint parts) until the victim's
 * live data has its room and the victim is released.
 */
static bool gc_goes_first(const struct za_volume *v)
{
	return v->critical && v->gc.active;
}

static bool can_write(const struct za_volume *v)
{
	return !gc_goes_first(v) && v->data_inflight < v->data_credit &&
	       v->jrnl_inflight < v->jrnl_credit && v->ck.state != CK_QUIESCE;
}

/* What a held-back request is (za_vol_req.op). */
enum { OP_WRITE = 0, OP_TRIM = 1, OP_ZEROES = 2 };

static void stall(struct za_volume *v, struct za_vol_req *r)
{
	v->st.writes_stalled++;
	r->next = NULL;
	if (v->stalled_tail)
		v->stalled_tail->next = r;
	else
		v->stalled_head = r;
	v->stalled_tail = r;
}

static void unmap_now(struct za_volume *v, struct za_vol_req *r);

static void resume_stalled(struct za_volume *v)
{
	struct za_vol_req *r;

	v->critical = space_critical(v);
	while ((r = v->stalled_head) && can_write(v)) {
		v->stalled_head = r->next;
		if (!v->stalled_head)
			v->stalled_tail = NULL;
		if (r->op == OP_WRITE)
			write_now(v, r);
		else
			unmap_now(v, r);
	}
}

/*
 * Is a write asked for now taken at once (write_now()), or held back?
 * Below the floor GC goes first (gc_kick() also looks at the space
 * again): once started, it holds writes back until the victim's live data
 * has its room. za_volume_write_copies() asks here too, and the write
 * that follows gets the same answer: were GC started only by the write,
 * a caller told "copied at once" would see its write held back, its
 * buffer (the NBD receive ring's bytes, lent for the call only) reused
 * and the next payload written in its place (NEWS: seed 7028).
 */
static bool write_admitted(struct za_volume *v)
{
	if (v->critical)
		gc_kick(v);
	return !v->stalled_head && can_write(v);
}

void za_volume_write(struct za_volume *v, struct za_vol_req *r, uint64_t off,
		     uint64_t len, const void *buf, bool fua)
{
	za_volume_write_ref(v, r, off, len, buf, fua, NULL);
}

void za_volume_write_ref(struct za_volume *v, struct za_vol_req *r,
			 uint64_t off, uint64_t len, const void *buf, bool fua,
			 struct za_payload *pl)
{
	int ret;

	user_op(v);
	req_init(v, r);
	ret = check_range(v, off, len);
	if (ret) {
		r->done(r, ret);
		return;
	}
	r->off = off;
	r->len = len;
	r->buf = buf;
	r->fua = fua;
	if (!write_admitted(v)) {
		stall(v, r);
		return;
	}
	r->payload = pl;
	write_now(v, r);
	r->payload = NULL;
}

void za_volume_let_go(struct za_volume *v)
{
	/* Submitted stripes drop theirs when written; the open buffer
	 * waits for more writes. */
	if (v->cur && v->cur->nr_pl)
		vbuf_own(v->cur);
}

bool za_volume_write_copies(struct za_volume *v)
{
	/* write_now() copies (or refers to a kept payload) at once. */
	return write_admitted(v);
}

/* May @b refer to blocks of @pl instead of copying them? Takes a
 * reference for @b the first time. */
static bool vbuf_refer(struct vbuf *b, struct za_payload *pl)
{
	if (!pl)
		return false;
	if (b->nr_pl && b->pl[b->nr_pl - 1] == pl)
		return true; /* a payload fills the buffer in order */
	if (b->nr_pl == VBUF_MAX_PAYLOADS)
		return false;
	b->pl[b->nr_pl++] = za_payload_get(pl);
	return true;
}

static void write_now(struct za_volume *v, struct za_vol_req *r)
{
	const struct za_stripe_layout *dl = za_engine_layout(v->eng);
	const uint8_t *src = r->buf;
	uint64_t lba = r->off / 4096, n = r->len / 4096;
	int ret;

	r->next = NULL;
	while (n) {
		struct za_map_loc loc = { .kind = ZA_MAP_BUFFER };
		uint32_t take, i;

		if (!v->cur) {
			v->cur = vbuf_new(v, ZA_STREAM_DATA);
			if (!v->cur) {
				r->done(r, -ENOMEM);
				return;
			}
		}
		take = dl->data_blocks - v->cur->nr;
		if (take > n)
			take = (uint32_t)n;
		if (vbuf_refer(v->cur, r->payload)) {
			for (i = 0; i < take; i++)
				za_stripe_w_refer(v->eng, v->cur->s,
						  v->cur->nr + i,
						  src + (uint64_t)i * 4096);
		} else {
			for (i = 0; i < take; i++)
				memcpy(za_stripe_w_block(v->eng, v->cur->s,
							 v->cur->nr + i),
				       src + (uint64_t)i * 4096, 4096);
		}
		for (i = 0; i < take; i++)
			v->cur->s->lbas[v->cur->nr + i] = lba + i;
		loc.group = v->cur->id;
		loc.pos = v->cur->nr;
		ret = za_map_set(v->map, lba, take, &loc, on_dead, v);
		if (ret) {
			r->done(r, ret);
			return;
		}
		v->cur->nr += take;
		if (v->cur->nr == dl->data_blocks) {
			struct vbuf *full = v->cur;

			v->cur = NULL;
			vbuf_submit(v, full);
		}
		lba += take;
		n -= take;
		src += (uint64_t)take * 4096;
	}
	v->st.user_write_bytes += r->len;
	if (r->fua) {
		flush_enqueue(v, r);
		return;
	}
	r->done(r, 0);
}

/*
 * An unmap record: a journal stripe of kind META whose block says which
 * range reads as zeros from then on (docs/format.md, "Unmap record").
 * Written like any journal block, so it is durable with the next flush
 * and replayed in sequence order.
 */

static int unmap(struct za_volume *v, uint64_t lba, uint64_t n)
{
	struct vbuf *jb;
	uint8_t *blk;
	int ret;

	jb = vbuf_new(v, v->jstream);
	if (!jb)
		return -ENOMEM;
	ret = za_map_clear(v->map, lba, n, on_dead, v);
	if (ret) {
		vbuf_release(jb);
		return ret;
	}
	blk = za_stripe_w_block(v->eng, jb->s, 0);
	za_journal_unmap_encode(blk, lba, n);
	jb->s->lbas[0] = ZA_STRIPE_LBA_NONE;
	jb->nr = 1;
	jb->kind = ZA_STRIPE_META;
	jb->ulba = lba;
	jb->un = n;
	vbuf_submit(v, jb);
	return 0;
}

/* A trim or write-zeroes, now. */
static void unmap_now(struct za_volume *v, struct za_vol_req *r)
{
	int ret = 0;

	r->next = NULL;
	if (r->len)
		ret = unmap(v, r->off / 4096, r->len / 4096);
	if (ret || r->op != OP_ZEROES || !r->fua) {
		r->done(r, ret);
		return;
	}
	flush_enqueue(v, r);
}

static void unmap_req(struct za_volume *v, struct za_vol_req *r, uint8_t op,
		      uint64_t off, uint64_t len, bool fua)
{
	int ret;

	user_op(v);
	req_init(v, r);
	ret = check_range(v, off, len);
	if (ret) {
		r->done(r, ret);
		return;
	}
	r->op = op;
	r->off = off;
	r->len = len;
	r->fua = fua;
	/* Held back, like writes, while a checkpoint needs the map still. */
	if (v->ck.state == CK_QUIESCE) {
		stall(v, r);
		return;
	}
	unmap_now(v, r);
}

void za_volume_trim(struct za_volume *v, struct za_vol_req *r, uint64_t off,
		    uint64_t len)
{
	unmap_req(v, r, OP_TRIM, off, len, false);
}

void za_volume_write_zeroes(struct za_volume *v, struct za_vol_req *r,
			    uint64_t off, uint64_t len, bool fua)
{
	unmap_req(v, r, OP_ZEROES, off, len, fua);
}

/* ---- read ---- */

struct vread {
	struct za_read er;
	struct za_vol_req *r;
};

static void read_put(struct za_volume *v, struct za_vol_req *r, int err)
{
	if (err && !r->result)
		r->result = err;
	if (--r->pending == 0) {
		v->reads--;
		r->done(r, r->result);
	}
}

static void vread_done(struct za_read *er, int result)
{
	struct vread *vr = er->priv;
	struct za_vol_req *r = vr->r;

	free(vr);
	read_put(r->vol, r, result);
}

struct read_walk {
	struct za_volume *v;
	struct za_vol_req *r;
	uint8_t *buf;
	uint64_t lba0;
};

static int read_piece(void *priv, uint64_t lba, uint64_t n,
		      const struct za_map_loc *loc)
{
	struct read_walk *w = priv;
	uint8_t *dst = w->buf + (lba - w->lba0) * 4096;
	struct vread *vr;
	struct vbuf *b;
	uint64_t i;

	if (!loc) {
		memset(dst, 0, n * 4096);
		return 0;
	}
	if (loc->kind == ZA_MAP_BUFFER) {
		b = vbuf_find(w->v, loc->group);
		assert(b); /* the map never outlives a buffer it names */
		for (i = 0; i < n; i++)
			memcpy(dst + i * 4096,
			       za_stripe_w_data(w->v->eng, b->s,
						(uint32_t)(loc->pos + i)),
			       4096);
		return 0;
	}
	vr = calloc(1, sizeof(*vr));
	if (!vr)
		return -ENOMEM;
	vr->r = w->r;
	vr->er.group_id = loc->group;
	vr->er.gpos = loc->pos;
	vr->er.nr_blocks = (uint32_t)n;
	vr->er.buf = dst;
	vr->er.done = vread_done;
	vr->er.priv = vr;
	w->r->pending++;
	za_engine_read(w->v->eng, &vr->er);
	return 0;
}

void za_volume_read(struct za_volume *v, struct za_vol_req *r, uint64_t off,
		    uint64_t len, void *buf)
{
	struct read_walk w = { v, r, buf, off / 4096 };
	int ret;

	user_op(v);
	req_init(v, r);
	ret = check_range(v, off, len);
	if (ret) {
		r->done(r, ret);
		return;
	}
	v->st.user_read_bytes += len;
	v->reads++;
	r->pending = 1;
	ret = za_map_walk(v->map, off / 4096, len / 4096, read_piece, &w);
	read_put(v, r, ret);
}

/* ---- garbage collection ---- */

/*
 * Big theory
 * ----------
 * Overwrites leave dead blocks in old groups; garbage collection gives
 * their zones back. When free space falls below GC_START_PCT of the whole,
 * it picks the sealed group with the best cost-benefit score,
 * (1 - u) x age / (1 + u) (the LFS cleaner's rule: cold, mostly dead
 * groups first), where u is the zones its live blocks would take in data
 * stripes over the zones it holds - so journal groups, whose blocks take
 * 2(p+1) device blocks each, are worth compacting even when all live -
 * and then:
 *
 *   1. lists the map extents that point into it (the map is in memory);
 *   2. reads them (verified, decoded if need be) and puts every block
 *      that still maps there into the open data buffer, moving its map
 *      entry (a block overwritten meanwhile is dropped: the move finds
 *      the map changed);
 *   3. writes a new unmap record for every range of the victim's unmap
 *      records that still reads as zeros, so a crash cannot resurrect
 *      older data those records suppressed;
 *   4. flushes (always with a full stripe, never back into the journal)
 *      so that the moved data is durable;
 *   5. releases the victim: the engine resets its zones once no read of
 *      it runs.
 *
 * Journal groups are victims like any other, which is how small synced
 * writes end up in data stripes. User writes are held back while free
 * space is below one write set, so the reserve the volume was sized with
 * (15%, at least three write sets) always leaves GC room to work: a full volume under overwrite
 * waits, it does not deadlock. A group whose data cannot be read (more
 * than p losses) is marked stuck and never chosen again.
 */
#define GC_MAX_READS 4
#define GC_READ_BLOCKS 256u
/* gc.kind of a checkpoint group: no map entry points there. */
#define GC_KIND_CKPT 0xffu
/* Victims of more live data than this are not worth moving. */
#define GC_MAX_U 0.95
/* GC while idle moves only victims that free half their zones or more. */
#define GC_IDLE_MAX_U 0.5
/* ... and stops when this many in a row left free space no higher. */
#define GC_IDLE_TRIES 4

struct gc_read {
	struct za_read er;
	struct za_volume *v;
	uint64_t lba;
	uint64_t pos;
	uint8_t *buf;
};

static void gc_finish(struct za_volume *v, int err);
static void gc_start(struct za_volume *v, bool idle);

static bool gc_needed(const struct za_volume *v)
{
	struct za_engine_space sp;

	za_engine_space(v->eng, &sp);
	return sp.free_segs < gc_start_segs(&sp);
}

static int gc_collect(void *priv, uint64_t lba, uint64_t n,
		      const struct za_map_loc *loc)
{
	struct za_volume *v = priv;
	struct gc *gc = &v->gc;

	if (!loc || loc->group != gc->victim || loc->kind != gc->kind)
		return 0;
	if (gc->nr_ext == gc->cap_ext) {
		size_t cap = gc->cap_ext ? 2 * gc->cap_ext : 64;
		struct gc_ext *e = realloc(gc->ext, cap * sizeof(*e));

		if (!e)
			return -ENOMEM;
		gc->ext = e;
		gc->cap_ext = cap;
	}
	gc->ext[gc->nr_ext].lba = lba;
	gc->ext[gc->nr_ext].n = n;
	gc->ext[gc->nr_ext++].pos = loc->pos;
	return 0;
}

/* The buckets assume the data segments' length: when it changes (members
 * of another size came or went), every counter is put where it belongs. */
static void gc_rebucket(struct za_volume *v, uint64_t dbps)
{
	size_t i;
	struct live *l;

	v->lt.dbps = dbps;
	for (i = 0; i < v->lt.size; i++)
		for (l = v->lt.h[i]; l; l = l->next)
			live_index(v, l);
}

/*
 * The best victim of at most @max_u live, or false if none is worth it.
 *
 * The lowest usage bucket that holds a group GC may take now wins: it
 * frees the most zones per byte moved. Within it, of its first GC_SCAN
 * such groups, the one of the best cost-benefit score (free fraction
 * times age, over the cost of reading and writing the live part) - so a
 * choice reads a few groups, not all of them, and sees every group: a
 * group's bucket follows its counter as its blocks die.
 */
static bool gc_choose(struct za_volume *v, double max_u, uint64_t *victim,
		      uint8_t *kind)
{
	struct za_group_info *gi = v->lt.gi;
	struct za_engine_space sp;
	double best = 0;
	bool found = false;
	int b;

	za_engine_space(v->eng, &sp);
	if (sp.data_blocks_per_seg != v->lt.dbps)
		gc_rebucket(v, sp.data_blocks_per_seg);
	for (b = 0; !found && b < GC_BUCKETS; b++) {
		struct live *l, *next;
		unsigned seen = 0;

		if ((double)b / GC_BUCKETS > max_u)
			break; /* nothing (or too little) to gain */
		for (l = v->lt.bucket[b]; l && seen < GC_SCAN; l = next) {
			double u, score;

			next = l->bnext;
			if (za_engine_group_info(v->eng, l->group, gi)) {
				/* Gone: no longer GC's to take. */
				l->kind = LK_UNKNOWN;
				live_unbucket(&v->lt, l);
				continue;
			}
			if (gi->taking || gi->busy)
				continue;
			seen++;
			u = live_u(v, l);
			if (u > max_u)
				continue;
			score = (1 - u) *
				(double)(v->lt.max_group - l->group + 1) /
				(1 + u);
			if (!found || score > best) {
				best = score;
				*victim = l->group;
				*kind = l->kind == LK_DATA    ? ZA_MAP_DATA :
					l->kind == LK_JOURNAL ? ZA_MAP_JOURNAL :
								GC_KIND_CKPT;
				found = true;
			}
		}
	}
	return found;
}

/* Put one block read from the victim into the open buffer. */
static int gc_put(struct za_volume *v, uint64_t lba, uint64_t pos,
		  const uint8_t *data)
{
	const struct za_stripe_layout *dl = za_engine_layout(v->eng);
	struct za_map_loc from = { .kind = v->gc.kind,
				   .group = v->gc.victim,
				   .pos = pos };
	struct za_map_loc to = { .kind = ZA_MAP_BUFFER };
	struct live *l;
	int64_t moved;
	uint32_t b;

	if (!v->cur) {
		v->cur = vbuf_new(v, ZA_STREAM_DATA);
		if (!v->cur)
			return -ENOMEM;
	}
	b = v->cur->nr;
	to.group = v->cur->id;
	to.pos = b;
	moved = za_map_move(v->map, lba, 1, &from, &to);
	if (moved < 0)
		return (int)moved;
	if (!moved)
		return 0; /* overwritten or unmapped since: dead */
	memcpy(za_stripe_w_block(v->eng, v->cur->s, b), data, 4096);
	v->cur->s->lbas[b] = lba;
	v->cur->nr++;
	v->st.gc_moved_blocks++;
	za_job_progress(&v->gc.job, 4096);
	l = live_get(v, v->gc.victim, false);
	if (l)
		live_add(v, l, -1);
	if (v->cur->nr == dl->data_blocks) {
		struct vbuf *full = v->cur;

		v->cur = NULL;
		vbuf_submit(v, full);
	}
	return 0;
}

static void gc_pump(struct za_volume *v);
static bool gc_urgent(const struct za_volume *v);

static void gc_read_done(struct za_read *er, int result)
{
	struct gc_read *gr = er->priv;
	struct za_volume *v = gr->v;
	uint32_t i;

	v->gc.reads--;
	if (result) {
		za_log_err("gc: group %llu: data unreadable (%s); the group "
			   "is kept",
			   (unsigned long long)v->gc.victim, strerror(-result));
		if (!v->gc.error)
			v->gc.error = result;
	}
	for (i = 0; !result && i < er->nr_blocks; i++) {
		int ret = gc_put(v, gr->lba + i, gr->pos + i,
				 gr->buf + (size_t)i * 4096);

		if (ret && !v->gc.error)
			v->gc.error = ret;
	}
	free(gr->buf);
	free(gr);
	gc_pump(v);
}

struct holes {
	struct urange *r;
	size_t nr, cap;
};

static int collect_hole(void *priv, uint64_t lba, uint64_t n,
			const struct za_map_loc *loc)
{
	struct holes *h = priv;

	if (loc)
		return 0;
	if (h->nr == h->cap) {
		size_t cap = h->cap ? 2 * h->cap : 8;
		struct urange *r = realloc(h->r, cap * sizeof(*r));

		if (!r)
			return -ENOMEM;
		h->r = r;
		h->cap = cap;
	}
	h->r[h->nr].lba = lba;
	h->r[h->nr++].n = n;
	return 0;
}

static int unmap(struct za_volume *v, uint64_t lba, uint64_t n);
static void gc_flushed(struct za_vol_req *r, int result);
static void gc_released(void *priv, int result);

static void gc_pump(struct za_volume *v)
{
	struct gc *gc = &v->gc;
	struct live *l;
	unsigned i;

	gc->held = false;
	while (!gc->error && gc->next_ext < gc->nr_ext &&
	       gc->reads < GC_MAX_READS) {
		struct gc_ext *x = &gc->ext[gc->next_ext];
		uint64_t n = x->n - gc->next_off;
		struct gc_read *gr = calloc(1, sizeof(*gr));
		/* Once per read: it asks the engine for its free space. */
		bool urgent = gc_urgent(v);

		if (n > GC_READ_BLOCKS)
			n = GC_READ_BLOCKS;
		/*
		 * Unless writes wait for this victim: paused or stopped, it
		 * is left where it got to (the group keeps what was not
		 * moved) once its reads in flight are done, so that nothing
		 * stays busy; over its rate, it waits for the job's timer.
		 */
		if (!urgent &&
		    (gc->job.state == ZA_JOB_PAUSED || gc->stopped)) {
			free(gr);
			if (!gc->reads) {
				za_log_debug("gc: group %llu: left where it "
					     "got to (paused or stopping)",
					     (unsigned long long)gc->victim);
				gc_finish(v, 0);
			}
			return;
		}
		if (!urgent && !za_job_take(&gc->job, n * 4096)) {
			free(gr);
			gc->held = true;
			return;
		}
		if (!gr || posix_memalign((void **)&gr->buf, 4096, n * 4096)) {
			free(gr);
			gc->error = -ENOMEM;
			break;
		}
		gr->v = v;
		gr->lba = x->lba + gc->next_off;
		gr->pos = x->pos + gc->next_off;
		gr->er.group_id = gc->victim;
		gr->er.gpos = gr->pos;
		gr->er.nr_blocks = (uint32_t)n;
		gr->er.buf = gr->buf;
		gr->er.done = gc_read_done;
		/* Low priority while no write waits for this victim: user
		 * I/O on the same drives goes first. */
		gr->er.prio = urgent ? ZA_DEV_PRIO_NORMAL : ZA_DEV_PRIO_LOW;
		gr->er.priv = gr;
		gc->next_off += n;
		if (gc->next_off == x->n) {
			gc->next_ext++;
			gc->next_off = 0;
		}
		gc->reads++;
		za_engine_read(v->eng, &gr->er);
	}
	if (gc->reads || (gc->next_ext < gc->nr_ext && !gc->error))
		return;
	if (gc->error) {
		l = live_get(v, gc->victim, true);
		if (l)
			live_stick(v, l);
		gc_finish(v, gc->error);
		return;
	}
	/* Everything moved: re-record the unmaps that still hold. */
	l = live_get(v, gc->victim, false);
	for (i = 0; l && !gc->error && i < l->nr_unmaps; i++) {
		struct holes h = { 0 };
		size_t k;
		int ret;

		ret = za_map_walk(v->map, l->unmaps[i].lba, l->unmaps[i].n,
				  collect_hole, &h);
		for (k = 0; !ret && k < h.nr; k++)
			ret = unmap(v, h.r[k].lba, h.r[k].n);
		free(h.r);
		if (ret)
			gc->error = ret;
	}
	if (gc->error) {
		gc_finish(v, gc->error);
		return;
	}
	if (gc->kind == GC_KIND_CKPT) {
		/* Nothing to move, and the checkpoint that superseded these
		 * parts was flushed before they became garbage. */
		gc->flush.priv = v;
		gc_flushed(&gc->flush, 0);
		return;
	}
	gc->flush.done = gc_flushed;
	gc->flush.priv = v;
	req_init(v, &gc->flush);
	gc->flush.internal = true;
	flush_enqueue(v, &gc->flush);
}

static void gc_flushed(struct za_vol_req *r, int result)
{
	struct za_volume *v = r->priv;
	int ret;

	za_log_debug("gc: group %llu: moved data flushed (%d)",
		     (unsigned long long)v->gc.victim, result);
	if (result) {
		gc_finish(v, result);
		return;
	}
	za_crash_point("gc-move");
	ret = za_engine_group_release(v->eng, v->gc.victim, gc_released, v);
	if (ret)
		gc_finish(v, ret);
}

static void gc_released(void *priv, int result)
{
	struct za_volume *v = priv;

	/* The group is gone: forget its counters and unmap list. */
	live_forget(v, v->gc.victim);
	if (!result)
		v->st.gc_freed_groups++;
	za_log_debug("gc: group %llu released (%d)",
		     (unsigned long long)v->gc.victim, result);
	gc_finish(v, result);
}

static void gc_finish(struct za_volume *v, int err)
{
	if (err) {
		struct live *l = live_get(v, v->gc.victim, true);

		/* Never pick it again: a retry would fail the same way. */
		if (l)
			live_stick(v, l);
		za_log_warn("gc: group %llu: %s; it is kept",
			    (unsigned long long)v->gc.victim, strerror(-err));
		v->gc.job.pr.last_error = err;
	}
	v->gc.active = false;
	v->gc.nr_ext = 0;
	/*
	 * The next victim (or a checkpoint) before the held-back writes:
	 * resumed first, with GC idle and so not holding them back, they
	 * could take the room the next victim's live data needs.
	 */
	ckpt_kick(v); /* one may have waited for this victim */
	gc_kick(v);
	if (v->ck.state == CK_WRITE)
		ckpt_pump(v); /* its parts may have waited too */
	resume_stalled(v);
}

/*
 * A rebuild that took zones below GC's start point could take the last
 * free ones: GC then finds no segment to move a victim's live data into,
 * and data stripes, hence flushes, fail (NEWS: seed 1025). So a rebuild
 * takes a zone only at or above GC's start point and otherwise waits for
 * GC, which often frees those same degraded segments by moving their live
 * data (restoring its redundancy as well).
 */
bool za_volume_spare_ok(const struct za_volume *v)
{
	struct za_engine_space sp;

	za_engine_space(v->eng, &sp);
	return sp.free_segs >= gc_start_segs(&sp);
}

void za_volume_gc_kick(struct za_volume *v)
{
	gc_kick(v);
}

/*
 * GC is needed to keep writes flowing: free space is below GC's start
 * point (foreground GC), or writes are held back for it. Then neither its
 * pause nor its rate limit holds it: they hold GC's background work (GC
 * while idle, above the start point). Holding foreground GC too let the
 * writes of an overwrite take the last free zones before the floor could
 * stop them (tests/cli-gc.sh, with GC paused).
 */
static bool gc_urgent(const struct za_volume *v)
{
	return v->critical || v->stalled_head || gc_needed(v);
}

/* Nothing more to do: a running GC job's run is over (a paused one stays
 * paused, with its figures, until resumed). */
static void gc_run_end(struct za_volume *v)
{
	if (v->gc.job.state == ZA_JOB_RUNNING && !v->gc.active)
		za_job_end(&v->gc.job, v->gc.job.pr.last_error);
}

/* Go on with the victim's reads if they were held back. */
static void gc_unhold(struct za_volume *v)
{
	if (v->gc.active && v->gc.held)
		gc_pump(v);
}

static void gc_job_timer(struct za_job *j)
{
	struct za_volume *v = container_of(j, struct za_volume, gc.job);

	if (v->gc.active)
		gc_unhold(v);
	else
		gc_kick(v);
}

void za_volume_gc_pause(struct za_volume *v)
{
	v->gc.job.state = ZA_JOB_PAUSED;
	if (v->gc.idle_on)
		gc_idle_set(v, false);
}

void za_volume_gc_resume(struct za_volume *v)
{
	if (v->gc.job.state != ZA_JOB_PAUSED)
		return;
	v->gc.job.state = ZA_JOB_RUNNING;
	if (v->gc.idle_ms && !v->gc.idle_on && !v->gc.stopped)
		gc_idle_set(v, true);
	if (v->gc.active)
		gc_unhold(v);
	else
		gc_kick(v);
}

void za_volume_gc_set_rate(struct za_volume *v, uint64_t rate_bps)
{
	za_job_set_rate(&v->gc.job, rate_bps);
	if (!za_job_busy(&v->gc.job))
		gc_unhold(v);
}

void za_volume_gc_progress(const struct za_volume *v,
			   struct za_job_progress *pr)
{
	za_job_get_progress(&v->gc.job, pr);
}

static void gc_kick(struct za_volume *v)
{
	struct gc *gc = &v->gc;

	if (v->error || !v->ep_head)
		return;
	/* Kept current even while GC runs: writes check it on entry. */
	v->critical = space_critical(v);
	if (gc->active) {
		/* Held by its rate or a pause: writes waiting go first. */
		if (gc_urgent(v))
			gc_unhold(v);
		return;
	}
	if (v->ck.state == CK_QUIESCE)
		return;
	if (gc->stopped || !gc_needed(v)) {
		gc_run_end(v);
		resume_stalled(v);
		return;
	}
	if (gc->job.state == ZA_JOB_PAUSED && !gc_urgent(v))
		return;
	if (!gc_choose(v, GC_MAX_U, &gc->victim, &gc->kind)) {
		gc_run_end(v);
		resume_stalled(v);
		return;
	}
	gc_start(v, false);
}

/* Move the live data out of gc->victim (chosen while @idle), then release
 * it. */
static void gc_start(struct za_volume *v, bool idle)
{
	struct gc *gc = &v->gc;
	struct live *l = live_get(v, gc->victim, false);

	if (!za_job_in_run(&gc->job))
		za_job_begin(&gc->job);
	if (l && gc->kind != GC_KIND_CKPT)
		gc->job.pr.total_bytes += l->blocks * 4096;
	memset(&gc->flush, 0, sizeof(gc->flush));
	gc->active = true;
	gc->error = 0;
	gc->nr_ext = 0;
	gc->next_ext = 0;
	gc->next_off = 0;
	v->st.gc_runs++;
	if (gc->kind != GC_KIND_CKPT &&
	    za_map_walk(v->map, 0, v->size_blocks, gc_collect, v)) {
		gc->error = -ENOMEM;
		gc_finish(v, gc->error);
		return;
	}
	{
		struct za_engine_space sp;

		za_engine_space(v->eng, &sp);
		za_log_debug("gc%s: group %llu: %zu extents to move; free "
			     "%llu of %llu segments, write set %llu",
			     idle ? " (idle)" : "",
			     (unsigned long long)gc->victim, gc->nr_ext,
			     (unsigned long long)sp.free_segs,
			     (unsigned long long)sp.total_segs,
			     (unsigned long long)sp.write_set_segs);
	}
	gc_pump(v);
}

/*
 * GC while idle. Foreground GC keeps free space just below its start
 * point, so a burst of writes after a quiet spell meets GC at once and
 * shares the loop, the worker and the drives with it. When no request
 * came during a whole tick and nothing is in flight, one victim at most
 * half live (it frees at least half the zones it holds) is moved, one per
 * tick, until the free segments reach twice GC's start point (not while
 * the engine works for a rebuild or a scrub either). Then, or when
 * GC_IDLE_TRIES victims in a row left free space no higher than it was
 * (with tiny zones the flush after each victim pads a stripe that can
 * cost what the victim frees), the timer stops until the next request:
 * an idle volume neither churns nor wakes the loop. Requests never wait
 * for it: it starts nothing while they come, and a victim it started is
 * one foreground GC would move the same way.
 */
static void gc_idle_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct za_volume *v = w->data;
	struct gc *gc = &v->gc;
	struct za_engine_space sp;
	bool quiet = v->user_ops == gc->idle_ops;

	(void)loop;
	(void)revents;
	gc->idle_ops = v->user_ops;
	if (!quiet) {
		gc->idle_runs = 0;
		return;
	}
	if (gc->stopped || v->error || gc->job.state == ZA_JOB_PAUSED) {
		gc_idle_set(v, false);
		return;
	}
	/* The engine's own work (a rebuild, a scrub) counts as not idle. */
	if (za_volume_busy(v) || za_engine_busy(v->eng))
		return;
	za_engine_space(v->eng, &sp);
	if (!gc->idle_runs || sp.free_segs > gc->idle_base) {
		gc->idle_base = sp.free_segs;
		gc->idle_runs = 0;
	} else if (gc->idle_runs >= GC_IDLE_TRIES) {
		za_log_debug("gc (idle): %u victims freed nothing; waiting for "
			     "requests",
			     gc->idle_runs);
		gc_idle_set(v, false);
		gc_run_end(v);
		return;
	}
	if (sp.free_segs >= 2 * gc_start_segs(&sp) ||
	    !gc_choose(v, GC_IDLE_MAX_U, &gc->victim, &gc->kind)) {
		gc_idle_set(v, false);
		gc_run_end(v);
		return;
	}
	gc->idle_runs++;
	v->st.gc_idle_runs++;
	gc_start(v, true);
}

/* Start or stop the idle timer. It never keeps the loop running. */
static void gc_idle_set(struct za_volume *v, bool on)
{
	struct ev_loop *loop = za_io_loop(v->io);
	struct gc *gc = &v->gc;

	if (on) {
		double t = gc->idle_ms / 1000.0;

		ev_timer_init(&gc->idle_w, gc_idle_cb, t, t);
		gc->idle_w.data = v;
		ev_timer_start(loop, &gc->idle_w);
		ev_unref(loop);
		gc->idle_ops = v->user_ops;
		gc->idle_runs = 0;
	} else {
		ev_ref(loop);
		ev_timer_stop(loop, &gc->idle_w);
	}
	gc->idle_on = on;
}

/* ---- checkpoints ---- */

/*
 * Big theory
 * ----------
 * A checkpoint is the map (every extent: LBA range, data or journal
 * group, position) and the unmap records that journal groups still hold,
 * as they are once every stripe with a sequence number up to S is on the
 * drives and none after S exists yet. Recovery loads it and replays only
 * the stripes after S (za_engine_recover_from()).
 *
 * "None after S exists yet" needs a quiet moment, because the map is
 * updated in acknowledgement order while stripes get their sequence
 * numbers when the engine writes them, and because a block still in a
 * buffer has no place on the drives to record. So a checkpoint:
 *
 *   1. quiesces: writes, trims and garbage collection are held back and a
 *      flush disposes of the open buffer, waits for every stripe in
 *      flight and flushes the drives. When it answers, no buffer is
 *      alive, every stripe handed out (seq <= S = next sequence - 1) is
 *      complete and durable, and the map names only drive locations;
 *   2. encodes the map and the unmap lists into parts (checkpoint.h) in
 *      memory, in one go on the loop thread, and lets writes go on;
 *   3. writes the parts as metadata stripes of its own stream (k = 1, p+1
 *      copies on distinct members, like the journal), a few at a time;
 *   4. flushes the drives; only then does it supersede the previous one,
 *      whose parts become garbage for GC to reclaim.
 *
 *   writes ......|held|.......................................
 *   flush         [==]                      (S fixed here)
 *   parts              [p0][p1][p2]...[pn-1]
 *   flush                                   [==] -> live; previous: garbage
 *
 * A crash before step 4 leaves a torn or unflushed checkpoint: recovery
 * finds it incomplete and falls back to the previous one, which is still
 * live, or to a full replay. Live parts are counted per group like live
 * blocks so GC never takes them; a group holding only superseded or torn
 * parts has no live count and is released without moving anything.
 */

static uint64_t ckpt_interval(const struct za_volume *v)
{
	const struct ckpt *c = &v->ck;
	uint64_t base, by_size, p = za_engine_layout(v->eng)->p;

	if (c->interval_blocks)
		return c->interval_blocks;
	base = v->size_blocks / 8;
	if (base < (16ull << 20) / 4096)
		base = (16ull << 20) / 4096;
	if (base > (1ull << 30) / 4096)
		base = (1ull << 30) / 4096;
	/* A part costs 2(p+1) device blocks: a few percent of what the
	 * interval writes, whatever the map's size. */
	by_size = 64 * (p + 1) * c->live_nr;
	return base > by_size ? base : by_size;
}

static void ckpt_answer(struct za_vol_req **list, int result)
{
	struct za_vol_req *r;

	while ((r = *list)) {
		*list = r->next;
		r->done(r, result);
	}
}

/* Parts of a checkpoint stop counting as live in their groups. */
static void ckpt_drop_parts(struct za_volume *v, const uint64_t *groups,
			    uint32_t n)
{
	uint32_t i;

	for (i = 0; i < n; i++) {
		struct live *l = live_get(v, groups[i], false);

		if (l)
			live_add(v, l, -1);
	}
}

static void ckpt_end(struct za_volume *v, int err)
{
	struct ckpt *c = &v->ck;

	if (err) {
		if (c->part_group)
			ckpt_drop_parts(v, c->part_group, c->done_parts);
		v->st.checkpoint_failures++;
		za_log_warn("volume: checkpoint not written: %s; the previous "
			    "one (sequence %llu) stays in use",
			    strerror(-err), (unsigned long long)c->live_seq);
	}
	free(c->blocks);
	c->blocks = NULL;
	free(c->part_group);
	c->part_group = NULL;
	c->nr_parts = c->next_part = c->done_parts = 0;
	c->state = CK_IDLE;
	ckpt_answer(&c->cur_waiters, err);
	/* GC before the held-back writes, as after a victim (gc_finish()). */
	gc_kick(v);
	resume_stalled(v);
	ckpt_kick(v);
}

static void ckpt_flushed(struct za_engine_flush *f, int result)
{
	struct za_volume *v = f->priv;
	struct ckpt *c = &v->ck;

	if (!result) {
		/* Complete and durable: it supersedes the previous one. */
		ckpt_drop_parts(v, c->live_groups, c->live_nr);
		free(c->live_groups);
		c->live_groups = c->part_group;
		c->part_group = NULL;
		c->live_nr = c->nr_parts;
		c->live_id = c->id;
		c->live_seq = c->seq;
		c->live_gen = c->snap_gen;
		v->st.checkpoints++;
		za_log_debug("volume: checkpoint %llu: sequence %llu, %u parts",
			     (unsigned long long)c->id,
			     (unsigned long long)c->seq, c->nr_parts);
	}
	ckpt_end(v, result);
}

static void ckpt_part_done(struct za_stripe_w *s, int result)
{
	struct za_volume *v = s->priv;
	struct ckpt *c = &v->ck;

	c->inflight--;
	if (!result) {
		struct live *l = live_get(v, s->group_id, true);

		/* Counted from now: GC must not take a group holding parts
		 * of the checkpoint being written either. */
		if (l)
			live_add(v, l, 1);
		c->part_group[c->done_parts++] = s->group_id;
	} else if (!c->error) {
		c->error = result;
	}
	za_engine_stripe_put(v->eng, s);
	if (!result)
		za_crash_point("checkpoint");
	if (c->error) {
		if (!c->inflight)
			ckpt_end(v, c->error);
		return;
	}
	if (c->done_parts < c->nr_parts) {
		ckpt_pump(v);
		return;
	}
	c->state = CK_FLUSH;
	memset(&c->ef, 0, sizeof(c->ef));
	c->ef.done = ckpt_flushed;
	c->ef.priv = v;
	za_engine_flush(v->eng, &c->ef);
}

/*
 * Below the floor with GC moving a victim, no new part is sent: a part may
 * need a new segment of the checkpoint stream (p+1 zones), and those could
 * be the zones the victim's live data needs - GC's stripes then failed
 * with -ENOSPC and every later flush with them (test_ckpt_below_floor,
 * small zones: a checkpoint of 6 parts opened a segment with one segment's
 * worth of zones free). gc_finish() sends the rest.
 */
static void ckpt_pump(struct za_volume *v)
{
	struct ckpt *c = &v->ck;

	while (!c->error && c->next_part < c->nr_parts &&
	       c->inflight < c->window && !gc_goes_first(v)) {
		struct za_stripe_w *s =
			za_engine_stripe_get_stream(v->eng, c->stream);

		if (!s) {
			c->error = -ENOMEM;
			break;
		}
		memcpy(za_stripe_w_block(v->eng, s, 0),
		       c->blocks + (size_t)c->next_part * ZA_CKPT_BLOCK_BYTES,
		       ZA_CKPT_BLOCK_BYTES);
		s->lbas[0] = ZA_STRIPE_LBA_NONE;
		s->nr_blocks = 1;
		s->kind = ZA_STRIPE_META;
		s->done = ckpt_part_done;
		s->priv = v;
		c->next_part++;
		c->inflight++;
		za_engine_write(v->eng, s);
	}
	if (c->error && !c->inflight)
		ckpt_end(v, c->error);
}

static int ckpt_add_extent(void *priv, uint64_t lba, uint64_t n,
			   const struct za_map_loc *loc)
{
	struct za_ckpt_rec r = { 0 };

	if (!loc)
		return 0;
	if (loc->kind == ZA_MAP_BUFFER)
		return -EBUSY; /* not quiet: no place on the drives yet */
	r.type = loc->kind == ZA_MAP_DATA ? ZA_CKPT_REC_DATA :
					    ZA_CKPT_REC_JOURNAL;
	r.lba = lba;
	r.nr_blocks = n;
	r.group = loc->group;
	r.pos = loc->pos;
	return za_ckpt_writer_add(priv, &r);
}

/*
 * Step 2: encode the map and the unmap lists as of now, the quiet point.
 * Returns 0 (parts ready), 1 (nothing written since the live checkpoint)
 * or -errno.
 */
static int ckpt_snapshot(struct za_volume *v)
{
	struct ckpt *c = &v->ck;
	struct za_engine_stats es;
	struct za_ckpt_writer *w;
	uint64_t extents, unmaps = 0, seq;
	struct live *l;
	uint32_t parts;
	unsigned i, j;
	int ret;

	if (v->error)
		return -EIO;
	for (i = 0; i < BUF_HASH; i++)
		if (v->bhash[i])
			return -EBUSY; /* a buffer kept (map update failed) */
	/* Checkpoint parts take sequence numbers too: whether anything
	 * changed is told by the stripes the map depends on. */
	if (c->gen == c->live_gen)
		return 1;
	za_engine_get_stats(v->eng, &es);
	seq = es.next_seq - 1;
	/*
	 * Every extent lies inside [0, size_blocks) (the volume only
	 * grows), so the walk below presents each of them once: the map's
	 * own count is the record count, without a walk of its own.
	 */
	extents = za_map_extents(v->map);
	for (i = 0; i < v->lt.size; i++)
		for (l = v->lt.h[i]; l; l = l->next) {
			if (l->unmaps_lost)
				return -ENOMEM;
			unmaps += l->nr_unmaps;
		}
	parts = za_ckpt_nr_parts(extents, unmaps);
	if (!parts)
		return -EOVERFLOW;
	w = malloc(sizeof(*w));
	c->blocks = malloc((size_t)parts * ZA_CKPT_BLOCK_BYTES);
	c->part_group = calloc(parts, sizeof(*c->part_group));
	if (!w || !c->blocks || !c->part_group) {
		free(w);
		return -ENOMEM;
	}
	ret = za_ckpt_writer_init(w, c->next_id, seq, v->size_blocks, extents,
				  unmaps, c->blocks);
	if (!ret)
		ret = za_map_walk(v->map, 0, v->size_blocks, ckpt_add_extent,
				  w);
	for (i = 0; !ret && i < v->lt.size; i++)
		for (l = v->lt.h[i]; !ret && l; l = l->next)
			for (j = 0; !ret && j < l->nr_unmaps; j++) {
				struct za_ckpt_rec r = {
					.type = ZA_CKPT_REC_UNMAP,
					.lba = l->unmaps[j].lba,
					.nr_blocks = l->unmaps[j].n,
					.group = l->group,
				};

				ret = za_ckpt_writer_add(w, &r);
			}
	if (!ret)
		ret = za_ckpt_writer_finish(w);
	free(w);
	if (ret == -EBUSY)
		return ret; /* a block still in a buffer: not quiet after all */
	if (ret) {
		za_log_err("volume: checkpoint of sequence %llu: the map does "
			   "not encode (%s)",
			   (unsigned long long)seq, strerror(-ret));
		return ret;
	}
	c->id = c->next_id++;
	c->seq = seq;
	c->snap_gen = c->gen;
	c->nr_parts = parts;
	c->next_part = c->done_parts = 0;
	c->inflight = 0;
	c->error = 0;
	return 0;
}

/* Step 1 done: the point is quiet (or the flush failed). */
static void ckpt_quiesced(struct za_vol_req *r, int result)
{
	struct za_volume *v = r->priv;
	struct ckpt *c = &v->ck;
	int ret = result;

	/* Everything acknowledged before these callers asked is covered. */
	c->cur_waiters = c->waiters;
	c->waiters = NULL;
	c->since_blocks = 0; /* a failure retries after another interval */
	if (!ret)
		ret = ckpt_snapshot(v);
	if (ret) {
		ckpt_end(v, ret > 0 ? 0 : ret);
		return;
	}
	c->state = CK_WRITE;
	/*
	 * GC before the writes held back while we quiesced, as after a
	 * victim (gc_finish()): let in first, below the floor with GC idle,
	 * only their credits hold them. gc_kick() resumes them itself when
	 * GC has nothing to do.
	 */
	gc_kick(v);
	resume_stalled(v);
	ckpt_pump(v);
}

static void ckpt_kick(struct za_volume *v)
{
	struct ckpt *c = &v->ck;

	if (c->state != CK_IDLE)
		return;
	if (v->error) {
		ckpt_answer(&c->waiters, -EIO);
		return;
	}
	if (!c->waiters && c->since_blocks < ckpt_interval(v))
		return;
	if (v->gc.active)
		return; /* gc_finish() comes back */
	c->state = CK_QUIESCE;
	memset(&c->qflush, 0, sizeof(c->qflush));
	c->qflush.done = ckpt_quiesced;
	c->qflush.priv = v;
	req_init(v, &c->qflush);
	flush_enqueue(v, &c->qflush);
}

void za_volume_checkpoint(struct za_volume *v, struct za_vol_req *r)
{
	req_init(v, r);
	r->next = v->ck.waiters;
	v->ck.waiters = r;
	ckpt_kick(v);
}

/* ---- crash recovery ---- */

struct rec_vol {
	struct za_volume *v;
	uint8_t *blk;
	uint64_t stripes, unmaps, skipped;
};

static int rec_apply_unmap(struct rec_vol *rv,
			   const struct za_recovered_stripe *rs)
{
	struct za_volume *v = rv->v;
	uint64_t lba, n;
	int ret;

	ret = za_engine_read_sync(v->eng, rs->group_id, rs->group_pos, 1,
				  rv->blk, NULL);
	if (ret)
		return ret;
	/* Untrusted until checked: magic, count, reserved bytes, range. */
	ret = za_journal_unmap_decode(rv->blk, 4096, v->size_blocks, &lba, &n);
	if (ret)
		return ret;
	rv->unmaps++;
	live_add_unmap(v, rs->group_id, lba, n);
	return za_map_clear(v->map, lba, n, on_dead, v);
}

static int rec_apply(void *priv, const struct za_recovered_stripe *rs)
{
	struct rec_vol *rv = priv;
	struct za_volume *v = rv->v;
	const struct za_stripe_layout *l =
		za_engine_stream_layout(v->eng, rs->stream);
	uint8_t kind = rs->stream == ZA_STREAM_DATA ? ZA_MAP_DATA :
						      ZA_MAP_JOURNAL;
	struct live *lv;
	uint32_t b, e;
	int ret;

	if (rs->stream != ZA_STREAM_DATA && rs->stream != v->jstream)
		return 0;
	if (rs->kind == ZA_STRIPE_META) {
		if (rs->stream != v->jstream)
			return 0;
		ret = rec_apply_unmap(rv, rs);
		if (ret == -EBADMSG || ret == -EIO) {
			za_log_warn("recovery: unreadable unmap record at "
				    "group %llu position %llu: skipped",
				    (unsigned long long)rs->group_id,
				    (unsigned long long)rs->group_pos);
			rv->skipped++;
			return 0;
		}
		return ret;
	}
	lv = live_get(v, rs->group_id, true);
	for (b = 0; b < rs->nr_blocks && b < l->data_blocks; b = e) {
		struct za_map_loc loc = { .kind = kind, .group = rs->group_id };
		uint64_t lba = rs->lbas[b];

		e = b + 1;
		/* LBAs come from a drive: only what fits the volume counts. */
		if (lba == ZA_STRIPE_LBA_NONE || lba >= v->size_blocks)
			continue;
		while (e < rs->nr_blocks && e < l->data_blocks &&
		       rs->lbas[e] == rs->lbas[e - 1] + 1 &&
		       rs->lbas[e] < v->size_blocks)
			e++;
		loc.pos = rs->group_pos * l->data_blocks + b;
		ret = za_map_set(v->map, lba, e - b, &loc, on_dead, v);
		if (ret)
			return ret;
		if (lv)
			live_add(v, lv, e - b);
	}
	rv->stripes++;
	return 0;
}

/*
 * Loading a checkpoint (za_engine_recover_from() calls rec_start() once
 * the engine's tables are rebuilt, before any stripe is replayed). The
 * checkpoint stream's groups are read backwards from the newest block:
 * parts of later checkpoints always sit after those of earlier ones (one
 * checkpoint is written at a time), so the first checkpoint seen whole is
 * the latest complete one, and the blocks of any newer, torn one were
 * read before it (their ids are not reused).
 */
struct ck_cand {
	uint64_t id, seq;
	uint32_t nr_parts, found;
	uint64_t *group, *pos; /* per part; pos UINT64_MAX: not found */
	bool failed;
};

/* Forget a checkpoint that did not load: empty map, no live counters. */
static int ckpt_unload(struct za_volume *v)
{
	live_clear(v);
	za_map_free(v->map);
	v->map = NULL;
	return za_map_new(&v->map);
}

/* Read, check and apply every part of @c. 0, -EBADMSG/-EIO (not usable:
 * the map and counters are back to empty), or -ENOMEM. */
static int ckpt_load(struct rec_vol *rv, const struct ck_cand *c,
		     struct za_ckpt_rec *recs)
{
	struct za_volume *v = rv->v;
	struct za_ckpt_reader rd;
	struct za_ckpt_hdr h;
	uint32_t part, i;
	int ret = 0, r;

	za_ckpt_reader_init(&rd);
	for (part = 0; part < c->nr_parts && !ret; part++) {
		ret = za_engine_read_sync(v->eng, c->group[part], c->pos[part],
					  1, rv->blk, NULL);
		if (!ret)
			ret = za_ckpt_block_decode(rv->blk, ZA_CKPT_BLOCK_BYTES,
						   &h, recs);
		if (!ret)
			ret = za_ckpt_reader_add(&rd, &h, recs);
		/* A bigger volume than ours: not ours to load. */
		if (!ret && (h.id != c->id || h.size_blocks > v->size_blocks))
			ret = -EBADMSG;
		for (i = 0; !ret && i < h.nr_recs; i++) {
			struct za_map_loc loc = { .group = recs[i].group,
						  .pos = recs[i].pos };

			if (recs[i].type == ZA_CKPT_REC_UNMAP) {
				live_add_unmap(v, recs[i].group, recs[i].lba,
					       recs[i].nr_blocks);
				continue;
			}
			loc.kind = recs[i].type == ZA_CKPT_REC_DATA ?
					   ZA_MAP_DATA :
					   ZA_MAP_JOURNAL;
			ret = za_map_set(v->map, recs[i].lba, recs[i].nr_blocks,
					 &loc, NULL, NULL);
		}
	}
	if (!ret)
		ret = za_ckpt_reader_done(&rd);
	if (ret) {
		za_log_warn("recovery: checkpoint %llu (sequence %llu) is not "
			    "usable: %s",
			    (unsigned long long)c->id,
			    (unsigned long long)c->seq, strerror(-ret));
		r = ckpt_unload(v);
		if (r)
			return r;
		return ret == -ENOMEM ? ret : -EBADMSG;
	}
	return 0;
}

/* Keep @c: it is the live checkpoint now. */
static int ckpt_adopt(struct za_volume *v, struct ck_cand *c)
{
	struct ckpt *ck = &v->ck;
	uint32_t i;

	for (i = 0; i < c->nr_parts; i++) {
		struct live *l = live_get(v, c->group[i], true);

		if (!l)
			return -ENOMEM;
		live_add(v, l, 1);
	}
	free(ck->live_groups);
	ck->live_groups = c->group;
	c->group = NULL;
	ck->live_nr = c->nr_parts;
	ck->live_id = c->id;
	ck->live_seq = c->seq;
	return 0;
}

static int cmp_desc(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x > y ? -1 : x < y;
}

static int rec_start(void *priv, uint64_t *min_seq)
{
	struct rec_vol *rv = priv;
	struct za_volume *v = rv->v;
	struct za_ckpt_rec *recs = NULL;
	struct ck_cand *cands = NULL, *got = NULL;
	struct za_group_info *gi = NULL;
	uint64_t *ids = NULL, max_id = 0, blocks = 0, pos;
	unsigned n, i, nr = 0, nc = 0, j;
	struct za_ckpt_hdr h;
	int ret = 0;

	n = za_engine_groups(v->eng, NULL, 0);
	ids = malloc((n + 1) * sizeof(*ids));
	gi = malloc(sizeof(*gi));
	recs = malloc(ZA_CKPT_RECS_PER_BLOCK * sizeof(*recs));
	if (!ids || !gi || !recs) {
		ret = -ENOMEM;
		goto out;
	}
	n = za_engine_groups(v->eng, ids, n);
	for (i = 0; i < n; i++)
		if (!za_engine_group_info(v->eng, ids[i], gi) &&
		    gi->stream == v->ck.stream) {
			ids[nr++] = ids[i];
			blocks += gi->next_pos;
		}
	if (nr)
		qsort(ids, nr, sizeof(*ids), cmp_desc);
	for (i = 0; i < nr && !got && !ret; i++) {
		if (za_engine_group_info(v->eng, ids[i], gi))
			continue;
		for (pos = gi->next_pos; pos-- > 0 && !got && !ret;) {
			struct ck_cand *c = NULL;

			if (za_engine_read_sync(v->eng, ids[i], pos, 1, rv->blk,
						NULL) ||
			    za_ckpt_block_decode(rv->blk, ZA_CKPT_BLOCK_BYTES,
						 &h, recs))
				continue; /* torn, or lost beyond p */
			if (h.id > max_id)
				max_id = h.id;
			/* Ignoring checkpoints still takes their ids: a new
			 * one must never share a torn one's. */
			if (v->ck.recover_full)
				continue;
			for (j = 0; j < nc && !c; j++)
				if (cands[j].id == h.id)
					c = &cands[j];
			if (!c) {
				struct ck_cand *nca;

				/* More parts than blocks on the drives: it can
				 * never be complete (and a hostile count must
				 * not size an allocation). */
				if (h.nr_parts > blocks)
					continue;
				nca = realloc(cands, (nc + 1) * sizeof(*cands));
				if (!nca) {
					ret = -ENOMEM;
					break;
				}
				cands = nca;
				c = &cands[nc++];
				memset(c, 0, sizeof(*c));
				c->id = h.id;
				c->seq = h.seq;
				c->nr_parts = h.nr_parts;
				c->group =
					malloc(h.nr_parts * sizeof(uint64_t));
				c->pos = malloc(h.nr_parts * sizeof(uint64_t));
				if (!c->group || !c->pos) {
					ret = -ENOMEM;
					break;
				}
				for (j = 0; j < h.nr_parts; j++)
					c->pos[j] = UINT64_MAX;
			}
			if (c->seq != h.seq || c->nr_parts != h.nr_parts)
				c->failed = true; /* two checkpoints, one id */
			/* A part found twice was written again after a
			 * column failed: the same bytes. */
			if (c->failed || c->pos[h.part] != UINT64_MAX)
				continue;
			c->group[h.part] = ids[i];
			c->pos[h.part] = pos;
			if (++c->found < c->nr_parts)
				continue;
			ret = ckpt_load(rv, c, recs);
			if (ret == -EBADMSG) {
				c->failed = true;
				ret = 0;
			} else if (!ret) {
				ret = ckpt_adopt(v, c);
				got = c;
			}
		}
	}
	if (ret)
		goto out;
	v->ck.next_id = max_id + 1;
	for (j = 0; j < nc; j++)
		if (!got || cands[j].id > got->id)
			za_log_info(
				"recovery: checkpoint %llu not used: %s (%u "
				"of %u parts found)",
				(unsigned long long)cands[j].id,
				cands[j].failed ? "invalid" : "torn",
				cands[j].found, cands[j].nr_parts);
	if (got) {
		*min_seq = got->seq;
		za_log_info("recovery: checkpoint %llu loaded: sequence %llu, "
			    "%u parts, %zu extents",
			    (unsigned long long)got->id,
			    (unsigned long long)got->seq, got->nr_parts,
			    za_map_extents(v->map));
	} else if (nc) {
		za_log_warn("recovery: no complete checkpoint among %u found; "
			    "replaying every stripe",
			    nc);
	}
out:
	for (j = 0; j < nc; j++) {
		free(cands[j].group);
		free(cands[j].pos);
	}
	free(cands);
	free(recs);
	free(gi);
	free(ids);
	return ret;
}

/*
 * After the replay: per-group live counts from the map (the checkpoint
 * names groups GC may have released since; their moved blocks were
 * replayed), and no counters or unmap lists for groups that are gone.
 */
struct rec_count {
	struct za_volume *v;
	uint64_t orphans;
};

static int rec_count_extent(void *priv, uint64_t lba, uint64_t n,
			    const struct za_map_loc *loc)
{
	struct rec_count *rc = priv;
	struct live *l;

	(void)lba;
	if (!loc)
		return 0;
	l = live_get(rc->v, loc->group, true);
	if (!l)
		return -ENOMEM;
	live_add(rc->v, l, (int64_t)n);
	return 0;
}

static int rec_finish(struct za_volume *v)
{
	struct rec_count rc = { .v = v };
	uint64_t *ids;
	unsigned n, i;
	size_t h;
	int ret;

	for (h = 0; h < v->lt.size; h++) {
		struct live **lp = &v->lt.h[h], *l;

		while ((l = *lp)) {
			if (live_learn(v, l)) {
				live_drop(v, lp);
				continue;
			}
			if (l->kind != LK_CKPT) {
				l->blocks = 0;
				live_index(v, l);
			}
			lp = &l->next;
		}
	}
	ret = za_map_walk(v->map, 0, v->size_blocks, rec_count_extent, &rc);
	/*
	 * A counter for every group the drives hold, also one that nothing
	 * maps to any more: GC's buckets list only groups with a counter,
	 * and it is the emptiest that GC should see first.
	 */
	n = ret ? 0 : za_engine_groups(v->eng, NULL, 0);
	ids = malloc((n + 1) * sizeof(*ids));
	if (!ids)
		ret = -ENOMEM;
	n = ret ? 0 : za_engine_groups(v->eng, ids, n);
	for (i = 0; i < n; i++)
		if (!live_get(v, ids[i], true))
			ret = -ENOMEM;
	free(ids);
	for (h = 0; !ret && h < v->lt.size; h++) {
		const struct live *l;

		for (l = v->lt.h[h]; l; l = l->next)
			if (l->blocks && l->kind == LK_UNKNOWN)
				rc.orphans += l->blocks;
	}
	if (rc.orphans)
		za_log_warn("recovery: %llu blocks map to groups no longer on "
			    "the drives; they will read as errors",
			    (unsigned long long)rc.orphans);
	return ret;
}

int za_volume_recover(struct za_volume *v)
{
	struct rec_vol rv = { .v = v };
	uint64_t t0 = za_io_now_ns();
	int ret;

	if (posix_memalign((void **)&rv.blk, 4096, 4096))
		return -ENOMEM;
	ret = za_engine_recover_from(v->eng, rec_start, rec_apply, &rv);
	free(rv.blk);
	if (!ret)
		ret = rec_finish(v);
	/*
	 * Recomputed before any write is admitted: otherwise writes take the
	 * last free segments of a volume restarted below the floor while GC,
	 * not yet started, waits for a victim's room (NEWS: seed 7002).
	 */
	v->critical = space_critical(v);
	v->st.recovered_stripes = rv.stripes + rv.unmaps;
	/* Replayed stripes are not in the live checkpoint (if any). */
	v->ck.gen = v->st.recovered_stripes ? 1 : 0;
	if (!ret)
		za_log_info(
			"volume: recovered %llu stripes and %llu unmap "
			"records after sequence %llu in %llu ms; %llu extents "
			"mapped",
			(unsigned long long)rv.stripes,
			(unsigned long long)rv.unmaps,
			(unsigned long long)v->ck.live_seq,
			(unsigned long long)((za_io_now_ns() - t0) / 1000000),
			(unsigned long long)za_map_extents(v->map));
	return ret;
}

/* ---- stats and synchronous wrappers ---- */

void za_volume_get_stats(const struct za_volume *v, struct za_volume_stats *st)
{
	unsigned i;
	const struct vbuf *b;
	const struct live *l;
	uint64_t ckpt_parts;

	*st = v->st;
	st->live_blocks = 0;
	for (i = 0; i < v->lt.size; i++)
		for (l = v->lt.h[i]; l; l = l->next)
			st->live_blocks += l->blocks;
	/* Each checkpoint part counts one in its group's counter, to keep
	 * GC off it; it is not user data. */
	ckpt_parts = v->ck.live_nr + (v->ck.part_group ? v->ck.done_parts : 0);
	st->live_blocks -= ckpt_parts < st->live_blocks ? ckpt_parts :
							  st->live_blocks;
	st->buffers = 0;
	for (i = 0; i < BUF_HASH; i++)
		for (b = v->bhash[i]; b; b = b->hnext)
			st->buffers++;
	st->gc_active = v->gc.active;
	st->map_extents = za_map_extents(v->map);
	st->map_bytes = za_map_bytes(v->map);
	st->checkpoint_seq = v->ck.live_seq;
	st->checkpoint_blocks = v->ck.live_nr;
}

struct vsync {
	struct za_vol_req r;
	bool done;
	int result;
};

static void vsync_done(struct za_vol_req *r, int result)
{
	struct vsync *s = r->priv;

	s->result = result;
	s->done = true;
}

static int vsync_wait(struct za_volume *v, struct vsync *s)
{
	za_io_run_until(v->io, &s->done, 0);
	return s->result;
}

int za_volume_read_sync(struct za_volume *v, uint64_t off, uint64_t len,
			void *buf)
{
	struct vsync s = { .r = { .done = vsync_done } };

	s.r.priv = &s;
	za_volume_read(v, &s.r, off, len, buf);
	return vsync_wait(v, &s);
}

int za_volume_write_sync(struct za_volume *v, uint64_t off, uint64_t len,
			 const void *buf, bool fua)
{
	struct vsync s = { .r = { .done = vsync_done } };

	s.r.priv = &s;
	za_volume_write(v, &s.r, off, len, buf, fua);
	return vsync_wait(v, &s);
}

int za_volume_flush_sync(struct za_volume *v)
{
	struct vsync s = { .r = { .done = vsync_done } };

	s.r.priv = &s;
	za_volume_flush(v, &s.r);
	return vsync_wait(v, &s);
}

int za_volume_checkpoint_sync(struct za_volume *v)
{
	struct vsync s = { .r = { .done = vsync_done } };

	s.r.priv = &s;
	za_volume_checkpoint(v, &s.r);
	return vsync_wait(v, &s);
}

/* ---- liveness, for rebuild ---- */

struct live_walk {
	int (*fn)(void *priv, uint64_t group, uint64_t pos, uint64_t n);
	void *priv;
};

static int live_walk_one(void *priv, uint64_t lba, uint64_t n,
			 const struct za_map_loc *loc)
{
	struct live_walk *lw = priv;

	(void)lba;
	if (!loc || (loc->kind != ZA_MAP_DATA && loc->kind != ZA_MAP_JOURNAL))
		return 0;
	return lw->fn(lw->priv, loc->group, loc->pos, n);
}

int za_volume_walk_live(struct za_volume *v,
			int (*fn)(void *priv, uint64_t group, uint64_t pos,
				  uint64_t n),
			void *priv)
{
	struct live_walk lw = { .fn = fn, .priv = priv };

	return za_map_walk(v->map, 0, v->size_blocks, live_walk_one, &lw);
}

/* ---- growing ---- */

/*
 * The reserve is default_size()'s (15% of the segments, at least three
 * write sets, the checkpoint stream's segment), taken over every zone of
 * the writable members, used or free: what the volume could be had it
 * been created on them.
 */
uint64_t za_volume_max_size(const struct za_volume *v)
{
	return za_volume_max_size_if(v, NULL);
}

/*
 * Only the bound moves: the map holds extents, not a table per block, so
 * the new blocks simply have no extent yet and read as zeros. Requests
 * already checked against the old size are within the new one.
 */
int za_volume_grow(struct za_volume *v, uint64_t size_bytes)
{
	if (size_bytes % 4096 || size_bytes < za_volume_size(v))
		return -EINVAL;
	if (size_bytes > za_volume_max_size(v))
		return -ENOSPC;
	v->size_blocks = size_bytes / 4096;
	return 0;
}
