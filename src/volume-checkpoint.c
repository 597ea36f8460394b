// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * volume-checkpoint.c - the volume's checkpoints: when one is due, the
 * quiet point it needs, the map's pages that changed (or, short of
 * space, the whole map) and the unmap lists taken, pages and parts
 * written as metadata stripes of their own stream and flushed, the
 * anchor made durable, and the previous checkpoint then superseded;
 * cleaning of that stream. Crash recovery, which loads what this writes,
 * is volume-recover.c.
 *
 * It does not encode or check a part's or a page's bytes (checkpoint.c,
 * mpage.c: the codecs), nor an unmap record's (journal.c); it does not
 * keep track of what changed in the map (map.c hands out dirty pages);
 * it does not scan the drives for stripes, complete torn ones or order
 * them (the engine's recovery, engine-recover.c); and it gives back
 * checkpoint groups with nothing live through gc.c.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "container.h"
#include "crash.h"
#include "etab.h"
#include "journal.h"
#include "log.h"
#include "map.h"
#include "mpage.h"
#include "volume-int.h"

/* ---- checkpoints ---- */

/*
 * Big theory
 * ----------
 * A checkpoint is the map (every extent: LBA range, data or journal
 * group, position) and the unmap records that journal groups still hold,
 * as they are once every stripe with a sequence number up to S is on the
 * drives and none after S exists yet. Recovery loads it and replays only
 * the stripes after S (za_engine_recover_from()). The map travels as a
 * tree of pages (design.md 9.7): a checkpoint writes the pages that
 * changed since the last one - leaves, then the directory pages naming
 * where their leaves landed - and its parts hold the root; the pages it
 * did not write are the earlier checkpoints', named where they are.
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
 *   2. takes the map's dirty leaves (encoded at once), its dirty
 *      directory nodes' children and the unmap lists, on the loop
 *      thread, and lets writes go on;
 *   3. writes the pages, then the parts, as metadata stripes of its own
 *      stream (k = 1, p+1 copies on distinct members, like the journal),
 *      a few at a time;
 *   4. flushes the drives;
 *   5. has its anchor - its id, S, and the segments holding its pages
 *      and parts - written into every member's superblock
 *      (za_volume_params.anchor, design.md 9.6); only then does it
 *      supersede the previous one, whose parts, and the pages it
 *      replaced, become garbage.
 *
 *   writes ......|held|..................................................
 *   flush         [==]                            (S fixed here)
 *   pages              [leaves..][dirs.]
 *   parts                               [p0]..[pn-1]
 *   flush                                           [==]
 *   superblocks                                         [==] -> live;
 *                                                    replaced: garbage
 *
 * A crash before step 4 leaves a torn or unflushed checkpoint: recovery
 * finds it incomplete and falls back to the previous one, which is still
 * live, or to a full replay. A crash between 4 and the end of 5 leaves it
 * whole but not named: recovery loads the one the superblocks name (the
 * previous one, still whole) and replays more. Live parts and pages are
 * counted per group like live blocks so GC never takes them; a group
 * holding only superseded or torn ones has no live count and is given
 * back without moving anything (vol_gc_release_ckpt_garbage()).
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

/*
 * The map cache (9.8) can let go only of clean pages: dirty ones stay
 * until a checkpoint writes them. Under random writes nearly every leaf
 * is dirty by the end of an interval, so with the map beyond the cache's
 * limit a checkpoint is due once dirty nodes fill half of it - not
 * sooner than a MiB of stripes after the last, so that a tiny limit
 * does not checkpoint after every stripe; not where checkpoints are only
 * taken when asked (UINT64_MAX).
 */
#define CKPT_CACHE_MIN_BLOCKS 256u

bool vol_ckpt_for_cache(const struct za_volume *v)
{
	const struct ckpt *c = &v->ck;
	uint64_t lim = v->mc.limit_bytes;

	return lim && c->interval_blocks != UINT64_MAX &&
	       c->since_blocks >= CKPT_CACHE_MIN_BLOCKS &&
	       za_map_bytes(v->map) > lim &&
	       za_map_dirty_bytes(v->map) >= lim / 2;
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
		struct live *l = vol_live_get(v, groups[i], false);

		if (l)
			vol_live_add(v, l, -1);
	}
}

static void ckpt_end_finish(struct za_volume *v, int err);
static void anchor_send(struct za_volume *v);
static void ckpt_start(struct za_volume *v, bool for_space);

/* A map page counted live in its group, or no more. */
void vol_page_count(struct za_volume *v, struct za_map_page *pg, int d)
{
	struct live *l = vol_live_get(v, pg->group, d > 0);

	pg->counted = d > 0;
	v->ck.pages_live += (uint64_t)(int64_t)d;
	if (l) {
		l->pages += (uint64_t)(int64_t)d;
		vol_live_add(v, l, d);
	}
}

/* A page no live checkpoint names any more. */
static void page_drop(void *priv, struct za_map_page *pg)
{
	if (pg->counted)
		vol_page_count(priv, pg, -1);
}

/*
 * The map pages of the checkpoint being written are done with: it is
 * live (@live: the pages it superseded are garbage now) or it failed
 * (the pages it wrote are, and the map writes their nodes again next
 * time).
 */
static void ckpt_pages_end(struct za_volume *v, bool live)
{
	struct ckpt *c = &v->ck;
	uint32_t i;

	if (c->snapped) {
		if (!live)
			for (i = 0; i < c->snap.nr_fresh; i++)
				if (c->snap.fresh[i]->counted)
					vol_page_count(v, c->snap.fresh[i], -1);
		za_map_snap_end(v->map, &c->snap, live, page_drop, v);
		c->snapped = false;
		/* Its pages are durable now: they may leave memory. */
		if (live)
			vol_map_trim(v, true);
	}
	for (i = 0; c->pages && i < c->nr_pages; i++)
		free(c->pages[i].c);
	free(c->pages);
	c->pages = NULL;
	free(c->pblocks);
	c->pblocks = NULL;
	free(c->root);
	c->root = NULL;
	free(c->unmaps);
	c->unmaps = NULL;
	free(c->counts);
	c->counts = NULL;
	c->nr_counts = 0;
	free(c->tblocks);
	c->tblocks = NULL;
	c->nr_pages = c->nr_leaves = c->next_page = c->done_pages = 0;
	c->cb_leaves = c->cb_dirs = c->nr_root = 0;
	c->nr_unmaps = c->tparts = 0;
}

/*
 * Free the quarantine now: out of room for the checkpoint that would. The
 * zones it frees are room for that checkpoint: it is written again at
 * once (ckpt_end_finish()), its callers waiting for that one - a
 * `zarray checkpoint` asked for after a restart below the floor failed
 * with ENOSPC when GC's moves had taken the last free segment
 * (test_ckpt_below_floor, CI of b362a5e).
 */
static void ckpt_quarantine_break(struct za_volume *v)
{
	size_t n = za_engine_quarantine_break(v->eng);

	v->ck.retry = n > 0;
	v->st.quarantine_breaks++;
	za_log_warn("volume: no room for a checkpoint: %zu zones left "
		    "quarantine early; until the next checkpoint, the engine "
		    "table of checkpoint %llu may name zones others write%s",
		    n, (unsigned long long)v->ck.live_id,
		    v->ck.anchor ? " (its anchor says so)" : "");
}

static void ckpt_end(struct za_volume *v, int err)
{
	struct ckpt *c = &v->ck;

	if (c->for_space && err)
		c->space_failed = true;
	/*
	 * No room for the checkpoint that would free the zones in
	 * quarantine, and short of space: GC's next victim would only add to
	 * them, and writes fail. Free them now, and say what it costs. With
	 * anchors, the superblocks first say that the live table is not to
	 * be trusted (design.md 9.6): a freed zone may be written as soon as
	 * it is free, and a recovery that trusted the table then would take
	 * the new data for the old segment's.
	 */
	if (c->for_space && err == -ENOSPC && v->critical) {
		if (c->anchor) {
			c->state = CK_REVOKE;
			c->revoke_err = err;
			c->next_anchor = c->live_anchor;
			c->next_anchor.flags |= ZA_ANCHOR_REVOKED;
			anchor_send(v);
			return;
		}
		ckpt_quarantine_break(v);
		c->space_failed = false;
	}
	ckpt_end_finish(v, err);
}

static void ckpt_end_finish(struct za_volume *v, int err)
{
	struct ckpt *c = &v->ck;
	bool retry;

	c->for_space = false;
	if (err) {
		if (c->part_group)
			ckpt_drop_parts(v, c->part_group, c->done_parts);
		v->st.checkpoint_failures++;
		za_log_warn("volume: checkpoint not written: %s; the previous "
			    "one (sequence %llu) stays in use",
			    strerror(-err), (unsigned long long)c->live_seq);
	}
	ckpt_pages_end(v, false);
	free(c->blocks);
	c->blocks = NULL;
	free(c->part_group);
	c->part_group = NULL;
	free(c->part_pos);
	c->part_pos = NULL;
	c->nr_parts = c->next_part = c->done_parts = 0;
	c->state = CK_IDLE;
	if (err && c->retry && !v->error) {
		struct za_vol_req **w = &c->cur_waiters;

		/* Its callers wait for the next one, started below. */
		while (*w)
			w = &(*w)->next;
		*w = c->waiters;
		c->waiters = c->cur_waiters;
		c->cur_waiters = NULL;
		v->st.checkpoint_retries++;
		za_log_info("volume: checkpoint written again in the zones "
			    "that left quarantine");
	}
	retry = err && c->retry && !v->error && !v->gc.active;
	c->retry = false;
	ckpt_answer(&c->cur_waiters, err);
	if (retry) {
		ckpt_start(v, true);
		return;
	}
	/* GC before the held-back writes, as after a victim (gc_finish()). */
	vol_gc_kick(v);
	vol_resume_stalled(v);
	vol_ckpt_kick(v);
}

/* The checkpoint just written supersedes the previous one. */
static void ckpt_live(struct za_volume *v)
{
	struct ckpt *c = &v->ck;

	ckpt_drop_parts(v, c->live_groups, c->live_nr);
	c->last_stripes = c->nr_parts + c->nr_pages;
	ckpt_pages_end(v, true);
	free(c->live_groups);
	c->live_groups = c->part_group;
	c->part_group = NULL;
	c->live_nr = c->nr_parts;
	c->live_id = c->id;
	c->live_seq = c->seq;
	c->live_gen = c->snap_gen;
	c->space_failed = false;
	v->st.checkpoints++;
	/* No recovery loads an older table now: zones released before this
	 * one was taken leave quarantine. */
	za_engine_table_live(v->eng, c->tab_snap);
	/* What it superseded is garbage: give back the groups it empties. */
	vol_gc_release_ckpt_garbage(v);
	za_log_debug("volume: checkpoint %llu: sequence %llu, %u parts%s",
		     (unsigned long long)c->id, (unsigned long long)c->seq,
		     c->nr_parts, c->anchor ? ", anchored" : "");
}

/*
 * Add the segment holding stripe @stripe_idx of segment @seg_id (group
 * @group_id) to @a's list. 0, or -E2BIG when a fourth segment would be
 * needed (the checkpoint is then not placed: recovery scans).
 */
int vol_anchor_seg_add(struct za_anchor *a, uint64_t seg_id, uint64_t group_id,
		       uint32_t stripe_idx)
{
	unsigned i;

	for (i = 0; i < a->nr_segs; i++)
		if (a->segs[i].seg_id == seg_id) {
			if (stripe_idx < a->segs[i].first_stripe)
				a->segs[i].first_stripe = stripe_idx;
			return 0;
		}
	if (a->nr_segs == ZA_ANCHOR_MAX_SEGS)
		return -E2BIG;
	a->segs[a->nr_segs].seg_id = seg_id;
	a->segs[a->nr_segs].group_id = group_id;
	a->segs[a->nr_segs].first_stripe = stripe_idx;
	a->nr_segs++;
	return 0;
}

/*
 * The segments holding the parts at @group[i], @pos[i] (@n parts) and
 * their columns' places now, into @a (ckpt_id etc. set by the caller).
 * A part that cannot be located, or parts in more segments than an
 * anchor holds, leave the checkpoint unplaced (nr_segs 0).
 */
void vol_anchor_place(const struct za_volume *v, struct za_anchor *a,
		      const uint64_t *group, const uint64_t *pos, uint32_t n)
{
	const struct za_stripe_layout *l =
		za_engine_stream_layout(v->eng, v->ck.stream);
	unsigned width = l->k + l->p, i, j;
	struct za_seg_info si;
	uint64_t seg_id;
	uint32_t sidx;

	a->nr_segs = 0;
	memset(a->segs, 0, sizeof(a->segs));
	if (width > ZA_ANCHOR_MAX_WIDTH)
		return;
	for (i = 0; i < n; i++)
		if (za_engine_group_locate(v->eng, group[i], pos[i], &seg_id,
					   &sidx) ||
		    vol_anchor_seg_add(a, seg_id, group[i], sidx))
			goto unplaced;
	for (i = 0; i < a->nr_segs; i++) {
		struct za_anchor_seg *as = &a->segs[i];

		if (za_engine_seg_info(v->eng, as->seg_id, &si))
			goto unplaced;
		as->width = (uint8_t)width;
		for (j = 0; j < width; j++) {
			as->members[j] = si.members[j];
			as->zones[j] = si.members[j] ==
						       ZA_STRIPE_MEMBER_ABSENT ?
					       0 :
					       si.zones[j];
		}
	}
	return;
unplaced:
	a->nr_segs = 0;
	memset(a->segs, 0, sizeof(a->segs));
}

/* Hand c->next_anchor to the owner; za_volume_anchored() comes back. */
static void anchor_send(struct za_volume *v)
{
	struct ckpt *c = &v->ck;
	uint8_t rec[ZA_ANCHOR_BYTES];
	int ret;

	c->next_anchor.generation = c->live_anchor.generation + 1;
	ret = za_anchor_encode(&c->next_anchor, rec);
	/* Built here from the engine's own state: always in range. */
	assert(!ret);
	(void)ret;
	c->anchor(c->anchor_priv, rec);
}

void za_volume_anchored(struct za_volume *v)
{
	struct ckpt *c = &v->ck;

	/* Only for the anchor last given; anything else is the owner's
	 * bug (seen once in CI of 87d63d1, test_ckpt_below_floor: not yet
	 * explained): said, and without effect. */
	if (c->state != CK_ANCHOR && c->state != CK_REVOKE) {
		za_log_warn("volume: an anchor said durable with none "
			    "outstanding: ignored");
		return;
	}
	c->live_anchor = c->next_anchor;
	v->st.anchors++;
	if (c->state == CK_ANCHOR) {
		ckpt_live(v);
		ckpt_end(v, 0);
		return;
	}
	ckpt_quarantine_break(v);
	c->space_failed = false;
	ckpt_end_finish(v, c->revoke_err);
}

/*
 * The anchor places the checkpoint's parts and the map pages it wrote:
 * recovery reads those segments first, and may find older pages only
 * through the engine table (whose segments as of S hold them), so a page
 * written after S in a segment opened after S must be anchored too.
 */
static void ckpt_anchor_place(const struct za_volume *v, struct za_anchor *a)
{
	const struct ckpt *c = &v->ck;
	uint32_t n = c->done_parts + c->nr_pages, i;
	uint64_t *g = malloc(((size_t)n + 1) * sizeof(*g));
	uint64_t *p = malloc(((size_t)n + 1) * sizeof(*p));

	if (!g || !p) {
		/* Unplaced: recovery reads every zone. */
		free(g);
		free(p);
		a->nr_segs = 0;
		return;
	}
	for (i = 0; i < c->done_parts; i++) {
		g[i] = c->part_group[i];
		p[i] = c->part_pos[i];
	}
	for (i = 0; i < c->nr_pages; i++) {
		g[c->done_parts + i] = c->pages[i].pg->group;
		p[c->done_parts + i] = c->pages[i].pg->pos;
	}
	vol_anchor_place(v, a, g, p, n);
	free(g);
	free(p);
}

static void ckpt_flushed(struct za_engine_flush *f, int result)
{
	struct za_volume *v = f->priv;
	struct ckpt *c = &v->ck;
	struct za_anchor *a = &c->next_anchor;

	if (result) {
		ckpt_end(v, result);
		return;
	}
	if (!c->anchor) {
		/* Complete and durable: it supersedes the previous one. */
		ckpt_live(v);
		ckpt_end(v, 0);
		return;
	}
	/*
	 * Complete and durable, but live only once the superblocks say so:
	 * a crash before then finds the previous anchor, and the previous
	 * checkpoint still whole (design.md 9.6).
	 */
	memset(a, 0, sizeof(*a));
	a->ckpt_id = c->id;
	a->seq = c->seq;
	a->nr_parts = c->nr_parts;
	ckpt_anchor_place(v, a);
	c->state = CK_ANCHOR;
	anchor_send(v);
}

static int ckpt_parts_encode(struct za_volume *v);

/* How many stripes a segment of the checkpoint stream holds: a data
 * segment's length in bytes of a zone over the stream's slot. */
static uint32_t seg_stripes(const struct za_volume *v,
			    const struct za_engine_space *sp)
{
	const struct za_stripe_layout *d = za_engine_layout(v->eng);
	const struct za_stripe_layout *l =
		za_engine_stream_layout(v->eng, v->ck.stream);
	uint64_t n;

	if (!d->data_blocks || !l->slot_bytes)
		return 0;
	n = sp->data_blocks_per_seg / d->data_blocks * d->slot_bytes /
	    l->slot_bytes;
	return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

/*
 * Pages need segments of the checkpoint stream long enough to hold many
 * of them: with small zones (5 to 7 stripes a segment in the unit
 * tests' small geometries) a tree's pages spread over so many segments
 * that the first checkpoint after a restart below GC's floor found no
 * room (test_ckpt_below_floor, one run in 20 under the sanitizers). Such
 * an array writes the map whole, and so keeps it whole in memory (no
 * cache: vol_map_trim()); a real drive's zone holds ~65,000.
 */
#define CKPT_PAGES_MIN_STRIPES 128u

static uint32_t ckpt_seg_stripes(const struct za_volume *v)
{
	struct za_engine_space sp;

	za_engine_space(v->eng, &sp);
	return seg_stripes(v, &sp);
}

bool vol_ckpt_pages_ok(const struct za_volume *v)
{
	return ckpt_seg_stripes(v) >= CKPT_PAGES_MIN_STRIPES;
}

/* The segments of its stream the next checkpoint may need: as many as the
 * last one's parts and pages filled, at least one (the floor's). */
uint64_t vol_ckpt_segs(const struct za_volume *v,
		       const struct za_engine_space *sp)
{
	uint32_t per_seg = seg_stripes(v, sp);
	uint64_t n;

	if (!per_seg)
		return 1;
	n = ((uint64_t)v->ck.last_stripes + per_seg - 1) / per_seg;
	return n > 1 ? n : 1;
}

static void ckpt_part_done(struct za_stripe_w *s, int result)
{
	struct za_volume *v = s->priv;
	struct ckpt *c = &v->ck;

	c->inflight--;
	if (!result) {
		struct live *l = vol_live_get(v, s->group_id, true);

		/* Counted from now: GC must not take a group holding parts
		 * of the checkpoint being written either. */
		if (l)
			vol_live_add(v, l, 1);
		c->part_group[c->done_parts] = s->group_id;
		c->part_pos[c->done_parts++] = s->group_pos;
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
		vol_ckpt_pump(v);
		return;
	}
	c->state = CK_FLUSH;
	memset(&c->ef, 0, sizeof(c->ef));
	c->ef.done = ckpt_flushed;
	c->ef.priv = v;
	za_engine_flush(v->eng, &c->ef);
}

/* A directory page, now that its children have their places. */
static void dir_encode(const struct ck_page *cp, uint64_t ckpt_id, uint8_t *blk)
{
	struct za_ckpt_rec recs[ZA_MAP_DIR_CAP];
	struct za_mpage_hdr h = { .ckpt_id = ckpt_id,
				  .lo = cp->lo,
				  .hi = cp->hi,
				  .level = 1,
				  .nr_recs = cp->n };
	uint32_t i;
	int ret;

	for (i = 0; i < cp->n; i++) {
		/* Every child was written before: in this checkpoint's
		 * leaves, or an earlier one's, still live. */
		assert(cp->c[i].pg->counted);
		recs[i] = (struct za_ckpt_rec){ .type = ZA_CKPT_REC_PAGE,
						.lba = cp->c[i].lo,
						.nr_blocks = cp->c[i].hi -
							     cp->c[i].lo,
						.group = cp->c[i].pg->group,
						.pos = cp->c[i].pg->pos };
	}
	ret = za_mpage_encode(&h, recs, blk);
	/* Made from the map's own leaves: always in range. */
	assert(!ret);
	(void)ret;
}

/*
 * Every page of the current phase is written: go on to the next. The
 * directory pages are encoded now, their children placed; the parts
 * (the root) once the directory pages are. 0, or -errno.
 */
static int ckpt_phase_next(struct za_volume *v)
{
	struct ckpt *c = &v->ck;
	uint32_t i;

	if (c->phase == CKP_LEAVES && c->nr_pages > c->nr_leaves) {
		c->phase = CKP_DIRS;
		for (i = c->nr_leaves; i < c->nr_pages; i++)
			dir_encode(&c->pages[i], c->id,
				   c->pblocks + (size_t)i * ZA_MPAGE_BYTES);
		return 0;
	}
	c->phase = CKP_PARTS;
	return ckpt_parts_encode(v);
}

static void ckpt_page_done(struct za_stripe_w *s, int result)
{
	struct ck_page *cp = s->priv;
	struct za_volume *v = cp->v;
	struct ckpt *c = &v->ck;

	c->inflight--;
	if (!result) {
		cp->pg->group = s->group_id;
		cp->pg->pos = s->group_pos;
		/* Counted from now, like a part. */
		vol_page_count(v, cp->pg, 1);
		c->done_pages++;
	} else if (!c->error) {
		c->error = result;
	}
	za_engine_stripe_put(v->eng, s);
	if (!result)
		za_crash_point("checkpoint");
	if (!c->error &&
	    c->done_pages ==
		    (c->phase == CKP_LEAVES ? c->nr_leaves : c->nr_pages))
		c->error = ckpt_phase_next(v);
	if (c->error) {
		if (!c->inflight)
			ckpt_end(v, c->error);
		return;
	}
	vol_ckpt_pump(v);
}

/*
 * Write what is ready, up to the window: the pages of the current phase,
 * then the parts.
 *
 * Below the floor with GC moving a victim, nothing new is sent: a block
 * may need a new segment of the checkpoint stream (p+1 zones), and those
 * could be the zones the victim's live data needs - GC's stripes then
 * failed with -ENOSPC and every later flush with them
 * (test_ckpt_below_floor, small zones: a checkpoint of 6 parts opened a
 * segment with one segment's worth of zones free). gc_finish() sends the
 * rest.
 */
void vol_ckpt_pump(struct za_volume *v)
{
	struct ckpt *c = &v->ck;

	if (c->state != CK_WRITE)
		return;
	/* Garbage of the stream being given back (ckpt_start()): its zones
	 * first; ckpt_group_released() comes back. */
	if (v->gc.ckpt_releases)
		return;
	while (!c->error && c->inflight < c->window && !vol_gc_goes_first(v)) {
		struct za_stripe_w *s;
		const uint8_t *blk;
		uint32_t end;

		end = c->phase == CKP_LEAVES ? c->nr_leaves : c->nr_pages;
		if (c->phase != CKP_PARTS && c->next_page == end)
			break; /* the rest waits for these */
		if (c->phase == CKP_PARTS && c->next_part == c->nr_parts)
			break;
		s = za_engine_stripe_get_stream(v->eng, c->stream);
		if (!s) {
			c->error = -ENOMEM;
			break;
		}
		if (c->phase == CKP_PARTS) {
			blk = c->blocks +
			      (size_t)c->next_part++ * ZA_CKPT_BLOCK_BYTES;
			s->done = ckpt_part_done;
			s->priv = v;
		} else {
			blk = c->pblocks +
			      (size_t)c->next_page * ZA_MPAGE_BYTES;
			s->done = ckpt_page_done;
			s->priv = &c->pages[c->next_page++];
		}
		memcpy(za_stripe_w_block(v->eng, s, 0), blk,
		       ZA_CKPT_BLOCK_BYTES);
		s->lbas[0] = ZA_STRIPE_LBA_NONE;
		s->nr_blocks = 1;
		s->kind = ZA_STRIPE_META;
		c->inflight++;
		za_engine_write(v->eng, s);
	}
	if (c->error && !c->inflight)
		ckpt_end(v, c->error);
}

/* ---- the snapshot: the map's pages as of the quiet point ---- */

static void snap_leaf(void *priv, struct za_map_page *pg, uint64_t lo,
		      uint64_t hi, const struct za_map_ext *e, uint32_t n)
{
	struct za_volume *v = priv;
	struct ckpt *c = &v->ck;
	struct za_ckpt_rec recs[ZA_MAP_LEAF_CAP];
	uint32_t idx = c->cb_leaves++, i;
	struct za_mpage_hdr h = {
		.ckpt_id = c->id, .lo = lo, .hi = hi, .level = 0, .nr_recs = n
	};
	int ret;

	assert(idx < c->nr_leaves && n <= ZA_MAP_LEAF_CAP);
	c->pages[idx] =
		(struct ck_page){ .v = v, .pg = pg, .lo = lo, .hi = hi };
	for (i = 0; i < n; i++)
		recs[i] = (struct za_ckpt_rec){
			.type = e[i].loc.kind == ZA_MAP_DATA ?
					ZA_CKPT_REC_DATA :
					ZA_CKPT_REC_JOURNAL,
			.lba = e[i].lba,
			.nr_blocks = e[i].len,
			.group = e[i].loc.group,
			.pos = e[i].loc.pos,
		};
	ret = za_mpage_encode(&h, recs,
			      c->pblocks + (size_t)idx * ZA_MPAGE_BYTES);
	/* The map's own extents, inside the volume (whose size the
	 * codec bounds): always in range. */
	assert(!ret);
	(void)ret;
}

static void snap_dir(void *priv, struct za_map_page *pg, uint64_t lo,
		     uint64_t hi, const struct za_map_child *ch, uint32_t n)
{
	struct za_volume *v = priv;
	struct ckpt *c = &v->ck;
	uint32_t idx = c->nr_leaves + c->cb_dirs++;
	struct ck_page *cp = &c->pages[idx];

	assert(idx < c->nr_pages && cp->c);
	cp->v = v;
	cp->pg = pg;
	cp->lo = lo;
	cp->hi = hi;
	cp->n = n;
	/* Room made before the snapshot (ckpt_snapshot()). */
	memcpy(cp->c, ch, n * sizeof(*ch));
}

static void snap_root(void *priv, const struct za_map_child *ch)
{
	struct za_volume *v = priv;

	v->ck.root[v->ck.nr_root++] = *ch;
}

static const struct za_map_snap_ops snap_ops = { snap_leaf, snap_dir,
						 snap_root };

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

/* The parts: the root of the map's pages (or, whole, every extent) and
 * the unmap records, then the engine table. 0, or -errno (logged). */
static int count_cmp(const void *a, const void *b)
{
	const struct za_ckpt_rec *x = a, *y = b;

	return x->group < y->group ? -1 : x->group > y->group;
}

/*
 * At the quiet point: every data and journal group's live blocks, as of
 * S, for the count records (version 4). Recovery starts its counters
 * from them and replays what came after (design.md 9.8).
 */
static int ckpt_counts_take(struct za_volume *v)
{
	struct ckpt *c = &v->ck;
	uint64_t n = 0;
	struct live *l;
	size_t i;

	c->counts = malloc((v->lt.nr + 1) * sizeof(*c->counts));
	if (!c->counts)
		return -ENOMEM;
	/* A group holding map pages is the census's (ckpt_census()). */
	for (i = 0; i < v->lt.size; i++)
		for (l = v->lt.h[i]; l; l = l->next)
			if (l->kind != LK_CKPT && !l->pages && l->blocks)
				c->counts[n++] = (struct za_ckpt_rec){
					.type = ZA_CKPT_REC_COUNT,
					.nr_blocks = l->blocks,
					.group = l->group,
				};
	c->nr_counts = n;
	return 0;
}

/*
 * Once the pages are placed: the checkpoint stream's groups' pages as
 * they will be when this checkpoint is live - those counted now, the
 * ones it wrote among them, less the ones it supersedes - joined to the
 * counts taken at the quiet point, all by group.
 */
static int ckpt_census(struct za_volume *v)
{
	struct ckpt *c = &v->ck;
	struct za_map_page *pg;
	struct za_ckpt_rec *all, key = { 0 };
	uint64_t n = c->nr_counts, i, j;
	struct live *l;

	for (i = 0; i < v->lt.size; i++)
		for (l = v->lt.h[i]; l; l = l->next)
			n += l->pages != 0;
	all = realloc(c->counts, (n + 1) * sizeof(*all));
	if (!all)
		return -ENOMEM;
	c->counts = all;
	n = c->nr_counts;
	for (i = 0; i < v->lt.size; i++)
		for (l = v->lt.h[i]; l; l = l->next)
			if (l->pages)
				all[n++] = (struct za_ckpt_rec){
					.type = ZA_CKPT_REC_COUNT,
					.nr_blocks = l->pages,
					.group = l->group,
				};
	qsort(all, n, sizeof(*all), count_cmp);
	for (pg = c->snap.superseded; pg; pg = pg->next) {
		struct za_ckpt_rec *r;

		if (!pg->counted)
			continue;
		key.group = pg->group;
		r = bsearch(&key, all, n, sizeof(*all), count_cmp);
		/* Counted pages are in their group's count; were one not,
		 * recovery's comparison would say so. */
		if (r && r->nr_blocks)
			r->nr_blocks--;
	}
	/* The format wants groups strictly increasing: a group twice (not
	 * expected) keeps its first count rather than fail the checkpoint. */
	for (i = j = 0; i < n; i++)
		if (all[i].nr_blocks &&
		    (!j || all[j - 1].group != all[i].group))
			all[j++] = all[i];
	c->nr_counts = j;
	return 0;
}

static int ckpt_parts_encode(struct za_volume *v)
{
	struct ckpt *c = &v->ck;
	struct za_ckpt_writer *w;
	uint32_t parts;
	uint64_t i;
	int ret;

	if (!c->whole) {
		ret = ckpt_census(v);
		if (ret)
			return ret;
	}
	parts = za_ckpt_nr_parts(c->whole ? c->map_extents : c->nr_root,
				 c->nr_unmaps + c->nr_counts);
	if (!parts)
		return -EOVERFLOW;
	w = malloc(sizeof(*w));
	c->blocks = malloc(((size_t)parts + c->tparts) * ZA_CKPT_BLOCK_BYTES);
	c->part_group =
		calloc((size_t)parts + c->tparts, sizeof(*c->part_group));
	c->part_pos = calloc((size_t)parts + c->tparts, sizeof(*c->part_pos));
	if (!w || !c->blocks || !c->part_group || !c->part_pos) {
		free(w);
		return -ENOMEM;
	}
	memcpy(c->blocks + (size_t)parts * ZA_CKPT_BLOCK_BYTES, c->tblocks,
	       (size_t)c->tparts * ZA_ETAB_BLOCK_BYTES);
	ret = za_ckpt_writer_init(w, c->id, c->seq, v->size_blocks,
				  c->whole ? c->map_extents : c->nr_root,
				  c->nr_unmaps, c->blocks);
	w->h.nr_table_parts = c->tparts;
	if (c->whole) {
		/* At the quiet point still: the map as of S. */
		if (!ret)
			ret = za_map_walk(v->map, 0, v->size_blocks,
					  ckpt_add_extent, w);
	} else {
		w->h.version = 4;
		w->h.nr_map_extents = c->map_extents;
		w->h.map_levels = c->nr_root ? 2 : 0;
		w->h.nr_counts = c->nr_counts;
	}
	for (i = 0; !ret && !c->whole && i < c->nr_root; i++) {
		struct za_ckpt_rec r = {
			.type = ZA_CKPT_REC_PAGE,
			.lba = c->root[i].lo,
			.nr_blocks = c->root[i].hi - c->root[i].lo,
			.group = c->root[i].pg->group,
			.pos = c->root[i].pg->pos,
		};

		assert(c->root[i].pg->counted);
		ret = za_ckpt_writer_add(w, &r);
	}
	for (i = 0; !ret && i < c->nr_unmaps; i++)
		ret = za_ckpt_writer_add(w, &c->unmaps[i]);
	for (i = 0; !ret && i < c->nr_counts; i++)
		ret = za_ckpt_writer_add(w, &c->counts[i]);
	if (!ret)
		ret = za_ckpt_writer_finish(w);
	free(w);
	if (ret == -EBUSY)
		return ret; /* a block still in a buffer: not quiet after all */
	if (ret) {
		za_log_err("volume: checkpoint %llu of sequence %llu: its root "
			   "does not encode (%s)",
			   (unsigned long long)c->id,
			   (unsigned long long)c->seq, strerror(-ret));
		return ret;
	}
	c->nr_parts = parts + c->tparts;
	c->next_part = c->done_parts = 0;
	return 0;
}

static bool page_in_group(void *priv, const struct za_map_page *pg)
{
	return pg->group == *(const uint64_t *)priv;
}

/*
 * Cleaning the checkpoint stream. A page stays where it was written
 * until its node changes, so groups of the stream end up holding a few
 * live pages among superseded ones, and GC takes a checkpoint group only
 * once nothing in it is live (it cannot move a page: only a checkpoint
 * writes one, with its parent). So when the stream's sealed groups hold
 * more than twice what is live in them (plus two groups of slack), the
 * one with the fewest live blocks has its pages written again by this
 * checkpoint: once it is live, that group is garbage. Greedy, like a
 * log-structured file system's cleaner: a group is rewritten only when
 * at least half the stream is garbage, so on average at most one live
 * page is copied per superseded one.
 */
/* The group cleaning would take now (0: none), its live pages in @live. */
static uint64_t ckpt_clean_pick(struct za_volume *v)
{
	struct za_group_info *gi = v->lt.gi;
	uint64_t live = 0, held = 0, biggest = 0, victim = 0, min = UINT64_MAX;
	struct live *l;
	size_t i;

	for (i = 0; i < v->lt.size; i++)
		for (l = v->lt.h[i]; l; l = l->next) {
			uint64_t cap;

			if (l->kind != LK_CKPT || !l->blocks ||
			    za_engine_group_info(v->eng, l->group, gi) ||
			    gi->taking)
				continue;
			cap = (uint64_t)gi->nr_segs * gi->nr_stripes;
			live += l->blocks;
			held += cap;
			if (cap > biggest)
				biggest = cap;
			if (l->blocks < min) {
				min = l->blocks;
				victim = l->group;
			}
		}
	if (!victim || held <= 2 * live + 2 * biggest)
		return 0;
	za_log_debug("volume: checkpoint stream holds %llu blocks for %llu "
		     "live: group %llu to be written again",
		     (unsigned long long)held, (unsigned long long)live,
		     (unsigned long long)victim);
	return victim;
}

static void ckpt_clean(struct za_volume *v)
{
	struct ckpt *c = &v->ck;
	uint64_t victim;
	uint32_t n;

	/* Prepared (ckpt_clean_prep()): its pages' nodes are in memory. */
	victim = c->clean_ready ? c->clean_victim : ckpt_clean_pick(v);
	c->clean_ready = false;
	v->mc.hold = false;
	if (!victim)
		return;
	n = za_map_redirty(v->map, page_in_group, &victim);
	v->st.checkpoint_pages_cleaned += n;
	za_log_debug("volume: %u map pages of group %llu written again", n,
		     (unsigned long long)victim);
}

/*
 * With the map cache (9.8), the victim's live pages may belong to nodes
 * out of memory, which za_map_redirty() cannot see: that group would
 * never empty, and the stream would grow (test_checkpoint_incremental
 * with a cache of one byte). So before a checkpoint starts, the victim's
 * blocks are read, CLEAN_BATCH at a time, and for each that is a map
 * page the node holding its first LBA is brought in (a page superseded
 * since brings in whatever holds that LBA now: harmless). Then the
 * checkpoint starts, and rewrites them.
 */
#define CLEAN_BATCH 64u

static void clean_batch(struct za_volume *v);

static void clean_end(struct za_volume *v, bool ready)
{
	struct ckpt *c = &v->ck;

	c->cleaning = false;
	c->clean_ready = ready;
	if (!ready)
		v->mc.hold = false;
	free(c->clean_buf);
	c->clean_buf = NULL;
	vol_ckpt_kick(v);
}

/* Bring in the nodes of the pages in the batch read, from clean_i on. */
static void clean_walk(struct za_volume *v)
{
	struct ckpt *c = &v->ck;
	struct za_mpage_hdr h;
	struct za_ckpt_rec *recs = malloc(ZA_MPAGE_MAX_RECS * sizeof(*recs));

	if (!recs) {
		clean_end(v, false);
		return;
	}
	for (; c->clean_i < c->clean_n; c->clean_i++) {
		const uint8_t *blk = c->clean_buf + (size_t)c->clean_i * 4096;
		int ret;

		if (za_mpage_decode(blk, ZA_MPAGE_BYTES, &h, recs) ||
		    h.level > 1 || h.lo >= v->size_blocks)
			continue; /* a part, a table block, or not ours */
		ret = vol_map_fault(v, h.lo, 1, false, &c->clean_mw);
		if (ret == 1) {
			free(recs);
			return; /* clean_paged() goes on */
		}
		if (ret < 0) {
			free(recs);
			clean_end(v, false);
			return;
		}
	}
	free(recs);
	clean_batch(v);
}

static void clean_paged(struct za_vol_mwait *w, int err)
{
	struct za_volume *v = container_of(w, struct za_volume, ck.clean_mw);

	if (err) {
		clean_end(v, false);
		return;
	}
	clean_walk(v);
}

static void clean_read_done(struct za_read *er, int result)
{
	struct za_volume *v = er->priv;
	struct ckpt *c = &v->ck;

	/* Unreadable blocks: their pages stay where they are, and the
	 * group with them; cleaning tries another time. */
	if (result) {
		clean_end(v, false);
		return;
	}
	c->clean_i = 0;
	clean_walk(v);
}

static void clean_batch(struct za_volume *v)
{
	struct ckpt *c = &v->ck;
	uint64_t n = c->clean_end - c->clean_next;

	if (!n) {
		clean_end(v, true);
		return;
	}
	if (n > CLEAN_BATCH)
		n = CLEAN_BATCH;
	memset(&c->clean_er, 0, sizeof(c->clean_er));
	c->clean_er.group_id = c->clean_victim;
	c->clean_er.gpos = c->clean_next;
	c->clean_er.nr_blocks = (uint32_t)n;
	c->clean_er.buf = c->clean_buf;
	c->clean_er.done = clean_read_done;
	c->clean_er.priv = v;
	c->clean_er.prio = ZA_DEV_PRIO_LOW;
	c->clean_n = (uint32_t)n;
	c->clean_next += n;
	za_engine_read(v->eng, &c->clean_er);
}

/*
 * Before a checkpoint starts: true while cleaning's victim is being
 * prepared (the checkpoint starts when it is: vol_ckpt_kick() again).
 */
static bool ckpt_clean_prep(struct za_volume *v, bool for_space)
{
	struct ckpt *c = &v->ck;
	struct za_group_info *gi = v->lt.gi;
	uint64_t victim;

	if (c->cleaning)
		return true;
	if (c->clean_ready || for_space || za_map_whole(v->map) ||
	    !vol_ckpt_pages_ok(v))
		return false;
	victim = ckpt_clean_pick(v);
	if (!victim || za_engine_group_info(v->eng, victim, gi))
		return false;
	if (posix_memalign((void **)&c->clean_buf, 4096,
			   (size_t)CLEAN_BATCH * 4096)) {
		c->clean_buf = NULL;
		return false;
	}
	c->cleaning = true;
	v->mc.hold = true;
	c->clean_victim = victim;
	c->clean_next = 0;
	c->clean_end = gi->next_pos *
		       za_engine_stream_layout(v->eng, c->stream)->data_blocks;
	c->clean_mw.fn = clean_paged;
	clean_batch(v);
	return c->cleaning;
}

/*
 * Step 2: take what a checkpoint holds as of now, the quiet point: the
 * map's pages that changed since the last one (encoded now, the leaves;
 * the directory pages once their children are placed), the unmap lists
 * and the engine table. Returns 0 (ready to write), 1 (nothing written
 * since the live checkpoint) or -errno.
 */
static int ckpt_snapshot(struct za_volume *v)
{
	struct ckpt *c = &v->ck;
	struct za_engine_stats es;
	struct za_map_dirty dc;
	uint64_t unmaps = 0, seq, n = 0;
	struct live *l;
	uint32_t i, j;
	int ret;

	if (v->error)
		return -EIO;
	for (i = 0; i < BUF_HASH; i++)
		if (v->bhash[i])
			return -EBUSY; /* a buffer kept (map update failed) */
	/* Checkpoint parts take sequence numbers too: whether anything
	 * changed is told by the stripes the map depends on, and by zones
	 * released since (in quarantine until a table without their
	 * segments is live). */
	if (c->gen == c->live_gen && !za_engine_quarantined(v->eng))
		return 1;
	za_engine_get_stats(v->eng, &es);
	seq = es.next_seq - 1;
	for (i = 0; i < v->lt.size; i++)
		for (l = v->lt.h[i]; l; l = l->next) {
			if (l->unmaps_lost)
				return -ENOMEM;
			unmaps += l->nr_unmaps;
		}
	/*
	 * Short of space (a checkpoint to free zones in quarantine, or
	 * free space below GC's start point), the map is written whole, as
	 * version 2: 100 extents per block against ~45 in a leaf page, and
	 * the pages the stream holds all become garbage once it is live -
	 * with small zones, the pages of the tree spread over the stream's
	 * groups took the zones GC needed (test_gc_stop_ends_gc livelocked,
	 * test_ckpt_below_floor failed one run in 25). Only while the map
	 * is whole in memory and within the cache's limit: otherwise in
	 * pages (there, zones hold >= CKPT_PAGES_MIN_STRIPES stripes, which
	 * the tests' small zones lacked). Paging it all in to write it whole
	 * would break the limit when space is short, and a whole checkpoint
	 * leaves every node dirty: nothing could leave memory under GC
	 * (test_map_cache_gc).
	 */
	c->whole = ((c->for_space || v->critical || vol_gc_needed(v)) &&
		    za_map_whole(v->map) &&
		    (!v->mc.limit_bytes ||
		     za_map_bytes(v->map) <= v->mc.limit_bytes)) ||
		   ckpt_seg_stripes(v) < CKPT_PAGES_MIN_STRIPES;
	if (!c->whole)
		ckpt_clean(v);
	za_map_dirty_count(v->map, &dc);
	if (c->whole)
		dc.leaves = dc.dirs = dc.nodes = 0;
	if (!za_ckpt_nr_parts(dc.nodes, unmaps))
		return -EOVERFLOW;
	c->id = c->next_id;
	c->seq = seq;
	/* The engine's table goes with it, after the root's parts. */
	ret = za_engine_table_encode(v->eng, c->id, seq, &c->tblocks,
				     &c->tparts, &c->tab_snap);
	if (ret) {
		za_log_err("volume: checkpoint of sequence %llu: the engine "
			   "table does not encode (%s)",
			   (unsigned long long)seq, strerror(-ret));
		goto err;
	}
	ret = -EOVERFLOW;
	if (c->tparts > ZA_CKPT_MAX_TABLE_PARTS)
		goto err;
	ret = -ENOMEM;
	c->nr_leaves = dc.leaves;
	c->nr_pages = dc.leaves + dc.dirs;
	c->pages = calloc((size_t)c->nr_pages + 1, sizeof(*c->pages));
	c->pblocks = malloc(((size_t)c->nr_pages + 1) * ZA_MPAGE_BYTES);
	c->root = malloc(((size_t)dc.nodes + 1) * sizeof(*c->root));
	c->unmaps = malloc((unmaps + 1) * sizeof(*c->unmaps));
	if (!c->pages || !c->pblocks || !c->root || !c->unmaps)
		goto err;
	for (i = c->nr_leaves; i < c->nr_pages; i++) {
		c->pages[i].c = malloc(ZA_MAP_DIR_CAP * sizeof(*c->pages[i].c));
		if (!c->pages[i].c)
			goto err;
	}
	for (i = 0; i < v->lt.size; i++)
		for (l = v->lt.h[i]; l; l = l->next)
			for (j = 0; j < l->nr_unmaps; j++)
				c->unmaps[n++] = (struct za_ckpt_rec){
					.type = ZA_CKPT_REC_UNMAP,
					.lba = l->unmaps[j].lba,
					.nr_blocks = l->unmaps[j].n,
					.group = l->group,
				};
	c->nr_unmaps = n;
	c->map_extents = za_map_extents(v->map);
	if (!c->whole && ckpt_counts_take(v))
		goto err;
	if (c->whole) {
		ret = ckpt_parts_encode(v);
		if (ret)
			goto err;
		za_map_snapshot_whole(v->map, &c->snap);
		c->snapped = true;
		c->phase = CKP_PARTS;
		goto taken;
	}
	ret = za_map_snapshot(v->map, &snap_ops, v, &c->snap);
	if (ret == -EBUSY)
		goto err; /* a block still in a buffer: not quiet after all */
	if (ret) {
		za_log_err("volume: checkpoint of sequence %llu: the map's "
			   "pages are not taken (%s)",
			   (unsigned long long)seq, strerror(-ret));
		goto err;
	}
	assert(c->cb_leaves == c->nr_leaves &&
	       c->nr_leaves + c->cb_dirs == c->nr_pages &&
	       c->nr_root == dc.nodes);
	c->snapped = true;
	c->phase = CKP_LEAVES;
taken:
	c->next_id++;
	c->snap_gen = c->gen;
	c->next_page = c->done_pages = 0;
	c->inflight = 0;
	c->error = 0;
	v->st.checkpoint_pages_written = c->nr_pages;
	if (c->phase == CKP_LEAVES && !c->nr_leaves) {
		ret = ckpt_phase_next(v);
		if (ret)
			return ret; /* ckpt_end() frees what was taken */
	}
	return 0;
err:
	ckpt_pages_end(v, false);
	return ret;
}

/* Step 1 done: the point is quiet (or the flush failed). */
static void ckpt_quiesced(struct za_vol_req *r, int result)
{
	struct za_volume *v = r->priv;
	struct ckpt *c = &v->ck;
	int ret = result;
	uint64_t t0 = za_io_now_ns();

	/* Everything acknowledged before these callers asked is covered. */
	c->cur_waiters = c->waiters;
	c->waiters = NULL;
	c->since_blocks = 0; /* a failure retries after another interval */
	if (!ret)
		ret = ckpt_snapshot(v);
	/* Cleaning's preparation is used (ckpt_clean()) or lost with it. */
	c->clean_ready = false;
	v->mc.hold = false;
	if (!ret) {
		uint64_t t1 = za_io_now_ns();

		v->st.checkpoint_snapshot_ns = t1 - t0;
		v->st.checkpoint_hold_ns = t1 - c->start_ns;
	}
	if (ret) {
		ckpt_end(v, ret > 0 ? 0 : ret);
		return;
	}
	c->state = CK_WRITE;
	/*
	 * GC before the writes held back while we quiesced, as after a
	 * victim (gc_finish()): let in first, below the floor with GC idle,
	 * only their credits hold them. vol_gc_kick() resumes them itself when
	 * GC has nothing to do.
	 */
	vol_gc_kick(v);
	vol_resume_stalled(v);
	vol_ckpt_pump(v);
}

/*
 * A checkpoint is due to free the zones in quarantine once free space
 * comes within a write set of the floor: GC counts them as free (it takes
 * no victim they would make needless, vol_gc_needed()), and writes take free
 * zones meanwhile. Not sooner: until checkpoints are incremental each
 * writes the whole map, and one per victim raised P6's GC figure by 10%
 * (design.md 9.6).
 */
bool vol_ckpt_for_space(const struct za_volume *v)
{
	struct za_engine_space sp;

	/* Asked after every stripe (vol_ckpt_kick()): nothing to compute
	 * while nothing is in quarantine, as is most of the time. */
	if (v->ck.space_failed || !za_engine_quarantined(v->eng))
		return false; /* GC goes on; its next victim retries */
	za_engine_space(v->eng, &sp);
	if (!sp.quar_segs)
		return false;
	return v->critical ||
	       sp.free_segs < vol_gc_floor_segs(v, &sp) + sp.write_set_segs;
}

static void ckpt_start(struct za_volume *v, bool for_space)
{
	struct ckpt *c = &v->ck;

	c->for_space = for_space;
	c->state = CK_QUIESCE;
	c->start_ns = za_io_now_ns();
	/*
	 * The checkpoint stream's groups with nothing live - after a
	 * restart, a torn checkpoint's - go back before it needs room:
	 * restarted short of space, the first checkpoint failed for want
	 * of their zones (test_ckpt_below_floor, one run in 25). Nothing
	 * of it is written before they are back (vol_ckpt_pump()).
	 */
	vol_gc_release_ckpt_garbage(v);
	memset(&c->qflush, 0, sizeof(c->qflush));
	c->qflush.done = ckpt_quiesced;
	c->qflush.priv = v;
	vol_req_init(v, &c->qflush);
	vol_flush_enqueue(v, &c->qflush);
}

/* A checkpoint now, for the zones in quarantine only (idle GC). */
void vol_ckpt_free_quarantine(struct za_volume *v)
{
	if (v->ck.state != CK_IDLE || v->error || v->gc.active ||
	    v->ck.space_failed || !za_engine_quarantined(v->eng))
		return;
	ckpt_start(v, true);
}

void vol_ckpt_kick(struct za_volume *v)
{
	struct ckpt *c = &v->ck;
	bool for_space;

	if (c->state != CK_IDLE)
		return;
	if (v->error) {
		ckpt_answer(&c->waiters, -EIO);
		return;
	}
	for_space = !c->waiters && c->since_blocks < ckpt_interval(v) &&
		    !vol_ckpt_for_cache(v);
	if (for_space && !vol_ckpt_for_space(v))
		return;
	if (v->gc.active)
		return; /* gc_finish() comes back */
	if (ckpt_clean_prep(v, for_space))
		return; /* clean_end() comes back */
	ckpt_start(v, for_space);
}

void za_volume_checkpoint(struct za_volume *v, struct za_vol_req *r)
{
	vol_req_init(v, r);
	r->next = v->ck.waiters;
	v->ck.waiters = r;
	vol_ckpt_kick(v);
}

void vol_ckpt_free(struct za_volume *v)
{
	struct ckpt *c = &v->ck;

	if (c->snapped) {
		za_map_snap_end(v->map, &c->snap, false, NULL, NULL);
		c->snapped = false;
	}
	ckpt_pages_end(v, false);
	free(c->blocks);
	free(c->part_group);
	free(c->part_pos);
	free(c->live_groups);
	c->blocks = NULL;
	c->part_group = NULL;
	c->part_pos = NULL;
	c->live_groups = NULL;
}
