// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * gc.c - the volume's garbage collection: every group's live counter and
 * GC's usage buckets, the choice of a victim, moving its live data out
 * and releasing it, GC while the volume is idle, and GC as a background
 * job (pause, resume, rate, progress, stop). GC's start point, the floor
 * below which writes wait and the reserve are the space policy's
 * (volume.c, "write"); resetting a released group's zones is the engine's
 * (engine-space.c).
 *
 * Big theory
 * ----------
 * Overwrites leave dead blocks in old groups; garbage collection gives
 * their zones back. When free space falls below its start point
 * (vol_gc_start_segs(): 10% of the whole, at least two write sets + 1),
 * it picks the sealed group with the best cost-benefit score,
 * (1 - u) x age / (1 + u) (the LFS cleaner's rule: cold, mostly dead
 * groups first), where u is the zones its live blocks would take in data
 * stripes over the zones it holds - so journal groups, whose blocks take
 * 2(p+1) device blocks each, are worth compacting even when all live -
 * and then:
 *
 *   1. lists its live extents: it reads its stripes' LBA tables from
 *      their headers (za_engine_read_lbas(), a few batches of 32
 *      stripes at a time) and looks each run of them up in the map;
 *      what the map still places there is live - O(the victim), where
 *      walking the whole map was O(the map). Its live counter checks
 *      the result: blocks the headers did not name (stripes whose
 *      headers are unreadable) are looked for in the whole map, once,
 *      and a group is never given back while the map points into it;
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
 * (15%, at least three write sets) always leaves GC room to work: a
 * full volume under overwrite waits, it does not deadlock. A group whose data cannot be read (more
 * than p losses) is marked stuck and never chosen again.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <ev.h>

#include "container.h"
#include "crash.h"
#include "log.h"
#include "map.h"
#include "volume-int.h"

/* Live-counter table: buckets at first; it doubles as groups come. */
#define LIVE_HASH_MIN 256u
/* How many groups of the lowest eligible usage bucket one choice scores
 * (gc_choose()). */
#define GC_SCAN 32u

/* ---- live counters (per group, for garbage collection) ---- */

int vol_live_tab_init(struct live_tab *lt)
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

/*
 * Does moving @l's live blocks free anything? The flush after a victim
 * pads its last data stripe (step 4), so a move costs whole stripes: with
 * a few stripes per segment a victim can cost all it frees. GC then took
 * its own output, victim after victim (33 of 40 blocks live: 5 stripes
 * moved out of 5), free space never rising while writes waited for it
 * (test_gc_stop_ends_gc, design.md 10.4). Checkpoint groups move nothing.
 */
static bool live_gains(const struct za_volume *v, const struct live *l)
{
	const struct za_stripe_layout *dl = za_engine_layout(v->eng);
	uint64_t d = dl->data_blocks, cost, cap;

	if (l->kind == LK_CKPT || !v->lt.dbps || l->zones <= 0)
		return true;
	cost = (l->blocks + d - 1) / d * d;
	cap = (uint64_t)(l->zones * (double)v->lt.dbps / dl->width + 0.5);
	return cost < cap;
}

/* The bucket @l belongs in: -1 when GC must not take its group. */
static int live_bucket(const struct za_volume *v, const struct live *l)
{
	double u;

	if (l->stuck || l->releasing || l->kind == LK_UNKNOWN ||
	    l->kind == LK_OTHER)
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
void vol_live_index(struct za_volume *v, struct live *l)
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
int vol_live_learn(struct za_volume *v, struct live *l)
{
	struct za_group_info *gi = v->lt.gi;

	if (za_engine_group_info(v->eng, l->group, gi)) {
		l->kind = LK_UNKNOWN;
		vol_live_index(v, l);
		return -ENOENT;
	}
	l->kind = gi->stream == ZA_STREAM_DATA ? LK_DATA :
		  gi->stream == v->jstream     ? LK_JOURNAL :
		  gi->stream == v->ck.stream   ? LK_CKPT :
						 LK_OTHER;
	l->zones = (double)gi->nr_segs *
		   za_engine_stream_layout(v->eng, gi->stream)->width;
	vol_live_index(v, l);
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

struct live *vol_live_get(struct za_volume *v, uint64_t group, bool make)
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
	vol_live_learn(v, l);
	if (++lt->nr > 2 * lt->size)
		live_grow(lt);
	return l;
}

/* Add @delta (which may be negative) to @l's blocks, never below 0. */
void vol_live_add(struct za_volume *v, struct live *l, int64_t delta)
{
	if (delta < 0 && (uint64_t)-delta > l->blocks)
		l->blocks = 0;
	else
		l->blocks += (uint64_t)delta;
	vol_live_index(v, l);
}

/* GC must never take @l's group (again). */
static void live_stick(struct za_volume *v, struct live *l)
{
	l->stuck = true;
	vol_live_index(v, l);
}

/* Forget @l, found at *@lp in its chain. */
void vol_live_drop(struct za_volume *v, struct live **lp)
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
			vol_live_drop(v, lp);
			return;
		}
}

/*
 * Groups of the checkpoint stream with nothing live are given back at
 * once, not when GC comes to them as victims: they hold nothing to move
 * (a part or page is garbage only once the checkpoint that superseded it
 * is live), GC runs only short of space, and recovery reads that stream
 * whole (design.md 9.6), so garbage left there would cost every assembly
 * in proportion to the checkpoints ever written (S1).
 */
struct ckpt_rel {
	struct za_volume *v;
	uint64_t group;
};

static void ckpt_group_released(void *priv, int result)
{
	struct ckpt_rel *r = priv;
	struct za_volume *v = r->v;
	struct live *l;

	v->gc.ckpt_releases--;
	if (!result) {
		live_forget(v, r->group);
		v->st.gc_freed_groups++;
	} else {
		za_log_warn("gc: checkpoint group %llu: %s; it is kept",
			    (unsigned long long)r->group, strerror(-result));
		l = vol_live_get(v, r->group, false);
		if (l) {
			l->releasing = false;
			live_stick(v, l);
		}
	}
	free(r);
	/* Zones came back: what waited for them may go. */
	vol_gc_kick(v);
	if (!v->gc.ckpt_releases)
		vol_ckpt_pump(v);
	vol_resume_stalled(v);
}

void vol_gc_release_ckpt_garbage(struct za_volume *v)
{
	struct za_group_info *gi = v->lt.gi;
	struct ckpt_rel *r;
	struct live *l;
	size_t i;

	for (i = 0; i < v->lt.size; i++)
		for (l = v->lt.h[i]; l; l = l->next) {
			if (l->kind != LK_CKPT || l->blocks || l->releasing ||
			    l->stuck ||
			    (v->gc.active && v->gc.victim == l->group))
				continue;
			if (za_engine_group_info(v->eng, l->group, gi) ||
			    gi->taking || gi->busy)
				continue;
			r = malloc(sizeof(*r));
			if (!r)
				return; /* GC takes it later */
			r->v = v;
			r->group = l->group;
			if (za_engine_group_release(v->eng, l->group,
						    ckpt_group_released, r)) {
				free(r);
				continue;
			}
			l->releasing = true;
			vol_live_index(v, l);
			v->gc.ckpt_releases++;
		}
}

void vol_live_clear(struct za_volume *v)
{
	size_t i;

	for (i = 0; i < v->lt.size; i++)
		while (v->lt.h[i])
			vol_live_drop(v, &v->lt.h[i]);
}

/* Remember that journal group @group holds an unmap record of a range. */
void vol_live_add_unmap(struct za_volume *v, uint64_t group, uint64_t lba,
			uint64_t n)
{
	struct live *l = vol_live_get(v, group, true);

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

void vol_on_dead(void *priv, const struct za_map_loc *old, uint64_t n)
{
	struct za_volume *v = priv;
	struct live *l;

	if (old->kind == ZA_MAP_BUFFER) {
		struct vbuf *b = vol_vbuf_find(v, old->group);
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
	l = vol_live_get(v, old->group, false);
	if (l) {
		l->rec_delta -= (int64_t)n;
		vol_live_add(v, l, -(int64_t)n);
	}
}

/* ---- garbage collection ---- */

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

bool vol_gc_needed(const struct za_volume *v)
{
	struct za_engine_space sp;

	za_engine_space(v->eng, &sp);
	/* Segments in quarantine are free with the next checkpoint: a
	 * victim more would be moved for nothing (vol_ckpt_for_space()). */
	return sp.free_segs + sp.quar_segs < vol_gc_start_segs(&sp);
}

/* The whole map's extents in the victim (the last resort, gc_pump()). */
static int gc_collect_walk(void *priv, uint64_t lba, uint64_t n,
			   const struct za_map_loc *loc);

/* One more extent to move: @n blocks from @lba, at victim position @pos. */
static int gc_ext_add(struct gc *gc, uint64_t lba, uint64_t n, uint64_t pos)
{
	if (gc->nr_ext &&
	    gc->ext[gc->nr_ext - 1].lba + gc->ext[gc->nr_ext - 1].n == lba &&
	    gc->ext[gc->nr_ext - 1].pos + gc->ext[gc->nr_ext - 1].n == pos) {
		gc->ext[gc->nr_ext - 1].n += n;
		return 0;
	}
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
	gc->ext[gc->nr_ext++].pos = pos;
	return 0;
}

/* A run of a stripe's LBA table: @n blocks from @lba written at victim
 * positions from @pos. */
struct gc_run {
	struct za_volume *v;
	uint64_t lba, pos;
};

/* The pieces of a run the map still places where the run was written
 * are live: to be moved. */
static int gc_collect(void *priv, uint64_t lba, uint64_t n,
		      const struct za_map_loc *loc)
{
	struct gc_run *run = priv;
	struct gc *gc = &run->v->gc;
	uint64_t pos = run->pos + (lba - run->lba);

	if (!loc || loc->group != gc->victim || loc->kind != gc->kind ||
	    loc->pos != pos)
		return 0;
	return gc_ext_add(gc, lba, n, pos);
}

static int gc_collect_walk(void *priv, uint64_t lba, uint64_t n,
			   const struct za_map_loc *loc)
{
	struct za_volume *v = priv;
	struct gc *gc = &v->gc;

	if (!loc || loc->group != gc->victim || loc->kind != gc->kind)
		return 0;
	return gc_ext_add(gc, lba, n, loc->pos);
}

static int gc_ext_cmp(const void *a, const void *b)
{
	const struct gc_ext *x = a, *y = b;

	return x->lba < y->lba ? -1 : x->lba > y->lba;
}

static void gc_pump(struct za_volume *v);
static void gc_collect_pump(struct za_volume *v);

/*
 * The LBA tables of some of the victim's stripes are in: each run of
 * consecutive LBAs at consecutive positions is looked up in the map, and
 * what still maps there is live. A stripe's LBAs may have been
 * overwritten since, or written twice in the victim: the map says which
 * copy lives.
 */
/* An LBA table read for the victim, and how far its runs are walked
 * (they wait in turn for map pages that left memory, design.md 9.8). */
struct gc_lbas {
	struct za_read_lbas r;
	uint64_t next_i;
	struct gc_lbas *next;
};

/*
 * Does GC need a map page that left memory for [lba, lba + n)? 0: no,
 * go on (unless that set gc->error: -ENOMEM); 1: it is being read, and
 * gc_paged() takes GC on from where it was once it is in.
 */
static void gc_paged(struct za_vol_mwait *w, int err);

static int gc_fault(struct za_volume *v, uint64_t lba, uint64_t n, bool seams)
{
	struct gc *gc = &v->gc;
	int ret;

	gc->mw.fn = gc_paged;
	ret = vol_map_fault(v, lba, n, seams, &gc->mw);

	if (ret == 1) {
		gc->mw_busy = true;
		return 1;
	}
	if (ret < 0 && !gc->error)
		gc->error = ret;
	return 0;
}

/* Walk the runs of the LBA tables read so far, in turn, each once the map
 * pages it meets are in memory; then collect more. */
static void gc_col_walk(struct za_volume *v)
{
	struct gc *gc = &v->gc;
	struct gc_lbas *gl;

	while ((gl = gc->col_wait)) {
		struct za_read_lbas *r = &gl->r;
		uint64_t n = (uint64_t)r->nr_stripes * gc->col_dbs, i, j;
		uint64_t base = r->first_stripe * gc->col_dbs;

		if (gc->mw_busy)
			return;
		for (i = gl->next_i; !gc->error && i < n; i = j) {
			struct gc_run run = { v, r->lbas[i], base + i };
			int ret;

			j = i + 1;
			if (r->lbas[i] == ZA_STRIPE_LBA_NONE ||
			    r->lbas[i] >= v->size_blocks)
				continue;
			while (j < n && r->lbas[j] == r->lbas[j - 1] + 1 &&
			       r->lbas[j] < v->size_blocks)
				j++;
			if (gc_fault(v, run.lba, j - i, false)) {
				gl->next_i = i;
				return;
			}
			if (gc->error)
				break;
			ret = za_map_walk(v->map, run.lba, j - i, gc_collect,
					  &run);
			if (ret)
				gc->error = ret;
		}
		gc->col_wait = gl->next;
		free(r->lbas);
		free(gl);
	}
	gc_collect_pump(v);
}

/* The map page GC waited for is in (or failed): on from where it was. */
static void gc_paged(struct za_vol_mwait *w, int err)
{
	struct za_volume *v = container_of(w, struct za_volume, gc.mw);
	struct gc *gc = &v->gc;

	gc->mw_busy = false;
	if (err && !gc->error)
		gc->error = err;
	if (gc->collecting)
		gc_col_walk(v);
	else
		gc_pump(v);
}

static void gc_lbas_done(struct za_read_lbas *r, int result)
{
	struct gc_lbas *gl = container_of(r, struct gc_lbas, r), **pp;
	struct za_volume *v = r->priv;
	struct gc *gc = &v->gc;

	gc->col_reads--;
	if (result == -EIO) {
		/* A stripe fewer than k of whose headers verify: whatever of
		 * it is live is found by the walk at the end (gc_pump()). */
		za_log_warn("gc: group %llu: stripe headers %llu+%u "
			    "unreadable; the map is searched for what they "
			    "hold",
			    (unsigned long long)gc->victim,
			    (unsigned long long)r->first_stripe, r->nr_stripes);
		gc->col_partial = true;
	} else if (result) {
		za_log_err("gc: group %llu: stripe headers %llu+%u not read "
			   "(%s)",
			   (unsigned long long)gc->victim,
			   (unsigned long long)r->first_stripe, r->nr_stripes,
			   strerror(-result));
		if (!gc->error)
			gc->error = result;
	}
	if (result || gc->error) {
		free(r->lbas);
		free(gl);
		gc_collect_pump(v);
		return;
	}
	gl->next_i = 0;
	gl->next = NULL;
	for (pp = &gc->col_wait; *pp; pp = &(*pp)->next)
		;
	*pp = gl;
	gc_col_walk(v);
}

#define GC_LBA_READS 2u
#define GC_LBA_STRIPES 32u

/*
 * Collect the victim's live extents from its own stripe headers, a few
 * reads at a time: O(the victim), not O(the map) as the walk of the
 * whole map it replaces (design.md 10). Then its reads start.
 */
static void gc_collect_pump(struct za_volume *v)
{
	struct gc *gc = &v->gc;

	while (!gc->error && gc->col_next < gc->col_stripes &&
	       gc->col_reads < GC_LBA_READS) {
		struct gc_lbas *gl = calloc(1, sizeof(*gl));
		struct za_read_lbas *r = gl ? &gl->r : NULL;
		uint64_t n = gc->col_stripes - gc->col_next;

		if (n > GC_LBA_STRIPES)
			n = GC_LBA_STRIPES;
		if (r)
			r->lbas = malloc(n * gc->col_dbs * sizeof(*r->lbas));
		if (!r || !r->lbas) {
			free(gl);
			gc->error = -ENOMEM;
			break;
		}
		r->group_id = gc->victim;
		r->first_stripe = gc->col_next;
		r->nr_stripes = (uint32_t)n;
		r->done = gc_lbas_done;
		r->priv = v;
		r->prio = ZA_DEV_PRIO_LOW;
		gc->col_next += n;
		gc->col_reads++;
		za_engine_read_lbas(v->eng, r);
	}
	if (gc->col_reads || gc->col_wait || gc->mw_busy)
		return;
	if (!gc->error && gc->col_next < gc->col_stripes)
		return; /* not reached: the loop issues while it can */
	gc->collecting = false;
	if (gc->error) {
		gc_finish(v, gc->error);
		return;
	}
	/*
	 * In LBA order, as the walk of the whole map gave them: the moved
	 * blocks land in that order, and neighbours in the volume that were
	 * written apart become one extent (the map, and a checkpoint of it,
	 * shrink). In the victim's order instead, GC at the floor with tiny
	 * segments moved victim after victim without gaining a segment
	 * (test_gc_stop_ends_gc timed out 2 runs in 60).
	 */
	if (gc->nr_ext) /* ext is NULL before the first */
		qsort(gc->ext, gc->nr_ext, sizeof(*gc->ext), gc_ext_cmp);
	{
		size_t i, o = 0;

		for (i = 1; i < gc->nr_ext; i++) {
			struct gc_ext *a = &gc->ext[o], *b = &gc->ext[i];

			if (a->lba + a->n == b->lba && a->pos + a->n == b->pos)
				a->n += b->n;
			else
				gc->ext[++o] = *b;
		}
		if (gc->nr_ext)
			gc->nr_ext = o + 1;
	}
	{
		struct za_engine_space sp;

		za_engine_space(v->eng, &sp);
		za_log_debug("gc: group %llu: %zu extents to move; free "
			     "%llu of %llu segments (%llu more in "
			     "quarantine), write set %llu",
			     (unsigned long long)gc->victim, gc->nr_ext,
			     (unsigned long long)sp.free_segs,
			     (unsigned long long)sp.total_segs,
			     (unsigned long long)sp.quar_segs,
			     (unsigned long long)sp.write_set_segs);
	}
	gc_pump(v);
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
			vol_live_index(v, l);
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
			if (u > max_u || !live_gains(v, l))
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
		v->cur = vol_vbuf_new(v, ZA_STREAM_DATA);
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
	l = vol_live_get(v, v->gc.victim, false);
	if (l)
		vol_live_add(v, l, -1);
	if (v->cur->nr == dl->data_blocks) {
		struct vbuf *full = v->cur;

		v->cur = NULL;
		vol_vbuf_submit(v, full);
	}
	return 0;
}

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

static int hole_cmp(const void *a, const void *b)
{
	const struct urange *x = a, *y = b;

	return x->lba < y->lba ? -1 : x->lba > y->lba;
}

/*
 * The parts of @l's unmap ranges that are still holes in the map, written
 * again as records of up to ZA_JOURNAL_MAX_RANGES ranges each: merged and
 * in order. One record per hole (as before) made a victim of ~190
 * records over fragmented holes cost ~190 journal stripes, a new journal
 * group as large as the victim, which was GC's next victim: free space
 * never rose (design.md 10.4; fault loop seed 7005).
 */
static int rerecord_unmaps(struct za_volume *v, const struct live *l)
{
	struct za_journal_range batch[ZA_JOURNAL_MAX_RANGES];
	struct holes h = { 0 };
	size_t i, k, o;
	unsigned nb = 0;
	int ret = 0;

	for (i = 0; !ret && i < l->nr_unmaps; i++)
		ret = za_map_walk(v->map, l->unmaps[i].lba, l->unmaps[i].n,
				  collect_hole, &h);
	if (!ret && h.nr) {
		/* Ranges of one victim may overlap: sort, then merge what
		 * overlaps or touches (the record format wants gaps). */
		qsort(h.r, h.nr, sizeof(*h.r), hole_cmp);
		for (k = 1, o = 0; k < h.nr; k++) {
			uint64_t end = h.r[o].lba + h.r[o].n;

			if (h.r[k].lba <= end) {
				if (h.r[k].lba + h.r[k].n > end)
					h.r[o].n = h.r[k].lba + h.r[k].n -
						   h.r[o].lba;
				continue;
			}
			h.r[++o] = h.r[k];
		}
		h.nr = o + 1;
	}
	for (k = 0; !ret && k < h.nr; k++) {
		batch[nb].lba = h.r[k].lba;
		batch[nb++].n = h.r[k].n;
		if (nb == ZA_JOURNAL_MAX_RANGES || k + 1 == h.nr) {
			ret = vol_unmap_ranges(v, batch, nb);
			nb = 0;
		}
	}
	free(h.r);
	return ret;
}

static void gc_flushed(struct za_vol_req *r, int result);
static void gc_released(void *priv, int result);

static void gc_pump(struct za_volume *v)
{
	struct gc *gc = &v->gc;
	struct live *l;

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
	if (gc->reads || (gc->next_ext < gc->nr_ext && !gc->error) ||
	    gc->mw_busy)
		return;
	if (gc->error) {
		l = vol_live_get(v, gc->victim, true);
		if (l)
			live_stick(v, l);
		gc_finish(v, gc->error);
		return;
	}
	/*
	 * Everything the stripe headers named is moved. The victim's counter
	 * says whether that was all of it: blocks in stripes whose headers
	 * were unreadable, or a counter off, are looked for in the whole map
	 * once, and moved (or found unreadable: the group is kept). Only
	 * what the map names is trusted; never is a group given back while
	 * the map still points into it.
	 */
	l = vol_live_get(v, gc->victim, false);
	if (gc->kind != GC_KIND_CKPT && !gc->walked && l && l->blocks) {
		/* The whole map, paged in first (design.md 9.8). */
		if (gc_fault(v, 0, v->size_blocks, false))
			return;
		if (gc->error) {
			gc_finish(v, gc->error);
			return;
		}
		za_log(gc->col_partial ? ZA_LOG_INFO : ZA_LOG_WARN,
		       "gc: group %llu: %llu live blocks its stripe headers "
		       "did not name; the whole map is searched",
		       (unsigned long long)gc->victim,
		       (unsigned long long)l->blocks);
		gc->walked = true;
		v->st.gc_map_searches++;
		gc->nr_ext = gc->next_ext = gc->next_off = 0;
		gc->error = za_map_walk(v->map, 0, v->size_blocks,
					gc_collect_walk, v);
		gc_pump(v);
		return;
	}
	if (gc->walked && l && l->blocks) {
		za_log_warn("gc: group %llu: its counter said %llu blocks more "
			    "than the map names in it",
			    (unsigned long long)gc->victim,
			    (unsigned long long)l->blocks);
		vol_live_add(v, l, -(int64_t)l->blocks);
	}
	/* Everything moved: re-record the unmaps that still hold, once
	 * the map pages they meet are in memory. */
	for (size_t i = 0; l && i < l->nr_unmaps && !gc->error; i++)
		if (gc_fault(v, l->unmaps[i].lba, l->unmaps[i].n, true))
			return;
	if (l && l->nr_unmaps && !gc->error)
		gc->error = rerecord_unmaps(v, l);
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
	vol_req_init(v, &gc->flush);
	gc->flush.internal = true;
	vol_flush_enqueue(v, &gc->flush);
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
		struct live *l = vol_live_get(v, v->gc.victim, true);

		/* Never pick it again: a retry would fail the same way. */
		if (l)
			live_stick(v, l);
		za_log_warn("gc: group %llu: %s; it is kept",
			    (unsigned long long)v->gc.victim, strerror(-err));
		v->gc.job.pr.last_error = err;
	}
	v->gc.active = false;
	v->gc.nr_ext = 0;
	vol_map_trim(v, false); /* what its victim paged in may go now */
	v->ck.space_failed = false; /* something changed: worth a retry */
	/*
	 * The next victim (or a checkpoint) before the held-back writes:
	 * resumed first, with GC idle and so not holding them back, they
	 * could take the room the next victim's live data needs.
	 */
	vol_ckpt_kick(v); /* one may have waited for this victim */
	vol_gc_kick(v);
	if (v->ck.state == CK_WRITE)
		vol_ckpt_pump(v); /* its parts may have waited too */
	vol_resume_stalled(v);
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
	return sp.free_segs >= vol_gc_start_segs(&sp);
}

void za_volume_gc_kick(struct za_volume *v)
{
	struct za_engine_space sp;

	/* Called by work that needs free zones now (a rebuild waiting at
	 * za_volume_spare_ok()): what is in quarantine is not, and GC,
	 * counting it as free, may have nothing to do. */
	za_engine_space(v->eng, &sp);
	if (sp.quar_segs && sp.free_segs < vol_gc_start_segs(&sp))
		vol_ckpt_free_quarantine(v);
	vol_gc_kick(v);
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
	return v->critical || v->stalled_head || vol_gc_needed(v);
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

void vol_gc_job_timer(struct za_job *j)
{
	struct za_volume *v = container_of(j, struct za_volume, gc.job);

	if (v->gc.active)
		gc_unhold(v);
	else
		vol_gc_kick(v);
}

void za_volume_gc_pause(struct za_volume *v)
{
	v->gc.job.state = ZA_JOB_PAUSED;
	if (v->gc.idle_on)
		vol_gc_idle_set(v, false);
}

void za_volume_gc_resume(struct za_volume *v)
{
	if (v->gc.job.state != ZA_JOB_PAUSED)
		return;
	v->gc.job.state = ZA_JOB_RUNNING;
	if (v->gc.idle_ms && !v->gc.idle_on && !v->gc.stopped)
		vol_gc_idle_set(v, true);
	if (v->gc.active)
		gc_unhold(v);
	else
		vol_gc_kick(v);
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

void za_volume_gc_stop(struct za_volume *v)
{
	v->gc.stopped = true;
}

void vol_gc_kick(struct za_volume *v)
{
	struct gc *gc = &v->gc;

	if (v->error || !v->ep_head)
		return;
	/* Kept current even while GC runs: writes check it on entry. */
	v->critical = vol_space_critical(v);
	if (gc->active) {
		/* Held by its rate or a pause: writes waiting go first. */
		if (gc_urgent(v))
			gc_unhold(v);
		return;
	}
	if (v->ck.state == CK_QUIESCE)
		return;
	/*
	 * Zones in quarantine come back only with a checkpoint: first that,
	 * while it is written no victim (its release would only add to the
	 * quarantine while its live data took free zones); ckpt_end() comes
	 * back here.
	 */
	if (vol_ckpt_for_space(v)) {
		if (v->ck.state == CK_IDLE)
			vol_ckpt_kick(v);
		else
			v->ck.for_space = true; /* one asked for: the same */
	}
	if (v->ck.state != CK_IDLE && v->ck.for_space)
		return;
	if (gc->stopped || !vol_gc_needed(v)) {
		gc_run_end(v);
		vol_resume_stalled(v);
		return;
	}
	if (gc->job.state == ZA_JOB_PAUSED && !gc_urgent(v))
		return;
	if (!gc_choose(v, GC_MAX_U, &gc->victim, &gc->kind)) {
		gc_run_end(v);
		vol_resume_stalled(v);
		return;
	}
	gc_start(v, false);
}

/* Move the live data out of gc->victim (chosen while @idle), then release
 * it. */
static void gc_start(struct za_volume *v, bool idle)
{
	struct gc *gc = &v->gc;
	struct live *l = vol_live_get(v, gc->victim, false);

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
	za_log_debug("gc%s: group %llu chosen: %lld blocks live in %.1f "
		     "zones (%.0f%%)",
		     idle ? " (idle)" : "", (unsigned long long)gc->victim,
		     l ? (long long)l->blocks : -1LL, l ? l->zones : -1.0,
		     l ? 100 * live_u(v, l) : -1.0);
	if (gc->kind != GC_KIND_CKPT) {
		struct za_group_info *gi = v->lt.gi;

		if (za_engine_group_info(v->eng, gc->victim, gi)) {
			gc->error = -ENOENT;
			gc_finish(v, gc->error);
			return;
		}
		gc->col_dbs =
			za_engine_stream_layout(v->eng, gi->stream)->data_blocks;
		gc->col_stripes = gi->next_pos;
		gc->col_next = 0;
		gc->col_reads = 0;
		gc->collecting = true;
		gc->col_partial = false;
		gc->walked = false;
		gc_collect_pump(v);
		return;
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
/* An idle run is over: the timer stops until the next request, and what
 * the run left in quarantine is freed by a checkpoint. */
static void idle_end(struct za_volume *v)
{
	vol_gc_idle_set(v, false);
	gc_run_end(v);
	vol_ckpt_free_quarantine(v);
}

static void gc_idle_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct za_volume *v = w->data;
	struct gc *gc = &v->gc;
	struct za_engine_space sp;
	uint64_t free_segs;
	bool quiet = v->user_ops == gc->idle_ops;

	(void)loop;
	(void)revents;
	gc->idle_ops = v->user_ops;
	if (!quiet) {
		gc->idle_runs = 0;
		return;
	}
	if (gc->stopped || v->error || gc->job.state == ZA_JOB_PAUSED) {
		vol_gc_idle_set(v, false);
		return;
	}
	/* The engine's own work (a rebuild, a scrub) counts as not idle. */
	if (za_volume_busy(v) || za_engine_busy(v->eng))
		return;
	za_engine_space(v->eng, &sp);
	/* What victims freed waits in quarantine for a checkpoint: counted
	 * as free here, and one checkpoint at the end of the run frees it
	 * (one per victim would write the whole map each time). */
	free_segs = sp.free_segs + sp.quar_segs;
	if (!gc->idle_runs || free_segs > gc->idle_base) {
		gc->idle_base = free_segs;
		gc->idle_runs = 0;
	} else if (gc->idle_runs >= GC_IDLE_TRIES) {
		za_log_debug("gc (idle): %u victims freed nothing; waiting for "
			     "requests",
			     gc->idle_runs);
		idle_end(v);
		return;
	}
	if (free_segs >= 2 * vol_gc_start_segs(&sp) ||
	    !gc_choose(v, GC_IDLE_MAX_U, &gc->victim, &gc->kind)) {
		idle_end(v);
		return;
	}
	gc->idle_runs++;
	v->st.gc_idle_runs++;
	gc_start(v, true);
}

/* Start or stop the idle timer. It never keeps the loop running. */
void vol_gc_idle_set(struct za_volume *v, bool on)
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
