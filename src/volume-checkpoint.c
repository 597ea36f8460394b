// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * volume-checkpoint.c - the volume's checkpoints and its crash recovery.
 * Checkpoints: when one is due, the quiet point it needs, the map's pages
 * that changed (or, short of space, the whole map) and the unmap lists
 * taken, pages and parts written as metadata stripes of their own stream
 * and flushed, the anchor made durable, and the previous checkpoint then
 * superseded; cleaning of that stream. Recovery: at assembly, the
 * anchored (or latest complete) checkpoint found and its map loaded page
 * by page, the stripes written after it replayed into the map (data,
 * journal blocks, unmap records), and every group's live counter rebuilt
 * from the result.
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
static void page_count(struct za_volume *v, struct za_map_page *pg, int d)
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
		page_count(priv, pg, -1);
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
					page_count(v, c->snap.fresh[i], -1);
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
static int anchor_seg_add(struct za_anchor *a, uint64_t seg_id,
			  uint64_t group_id, uint32_t stripe_idx)
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
static void anchor_place(const struct za_volume *v, struct za_anchor *a,
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
		    anchor_seg_add(a, seg_id, group[i], sidx))
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
	anchor_place(v, a, g, p, n);
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
		page_count(v, cp->pg, 1);
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

/* ---- crash recovery ---- */

struct ck_cand;

struct rec_vol {
	struct za_volume *v;
	uint8_t *blk;
	uint64_t stripes, unmaps, skipped;
	/* The checkpoint search (rec_ckpt_find()), kept from the engine's
	 * plan callback (rec_plan()) to its start callback (rec_start()). */
	bool searched;
	struct ck_cand *cands, *got;
	unsigned nc;
	uint64_t max_id; /* the highest checkpoint id seen */
	struct za_anchor an;
	bool an_read; /* an and limit are set (rec_anchor_read()) */
	bool limit; /* load the anchored checkpoint, not a newer one */
	uint8_t *tblocks; /* got's engine table, as read */
	bool adopted; /* the engine took it (za_engine_table_adopt()) */
	bool planning; /* in rec_plan(): only some zones read yet */
	const struct ck_cand *cand; /* the one being loaded */
	uint8_t *tblocks_plan; /* its engine table, read while planning */
	/* The map pages the loaded checkpoint wrote itself (its anchor
	 * places them with its parts). */
	uint64_t *own_group, *own_pos;
	uint32_t nr_own, cap_own;
	/* Its count records (version 4), kept until the replay is done. */
	struct za_ckpt_rec *counts;
	uint64_t nr_counts, cap_counts;
	bool counted;
	/* Loaded its root only (the map cache, design.md 9.8): directory
	 * pages stay on the drives until the replay or a request needs
	 * them; the counts are the checkpoint's, not the map walked. */
	bool lazy;
};

/* A count record of the checkpoint being loaded. 0 or -ENOMEM. */
static int rec_count_keep(struct rec_vol *rv, const struct za_ckpt_rec *r)
{
	if (rv->nr_counts == rv->cap_counts) {
		uint64_t cap = rv->cap_counts ? 2 * rv->cap_counts : 256;
		struct za_ckpt_rec *c = realloc(rv->counts, cap * sizeof(*c));

		if (!c)
			return -ENOMEM;
		rv->counts = c;
		rv->cap_counts = cap;
	}
	rv->counts[rv->nr_counts++] = *r;
	return 0;
}

/* The checkpoint is loaded: each group it counts gets its count, and the
 * replay's changes from here on are added to it. 0 or -ENOMEM. */
static int rec_counts_apply(struct rec_vol *rv)
{
	uint64_t i;

	for (i = 0; i < rv->nr_counts; i++) {
		struct live *l = vol_live_get(rv->v, rv->counts[i].group, true);

		if (!l)
			return -ENOMEM;
		l->rec_count = rv->counts[i].nr_blocks;
		l->rec_listed = true;
		l->rec_delta = 0;
	}
	rv->counted = true;
	return 0;
}

static int rec_apply_unmap(struct rec_vol *rv,
			   const struct za_recovered_stripe *rs)
{
	struct za_volume *v = rv->v;
	struct za_journal_range r[ZA_JOURNAL_MAX_RANGES];
	unsigned nr, i;
	int ret;

	ret = za_engine_read_sync(v->eng, rs->group_id, rs->group_pos, 1,
				  rv->blk, NULL);
	if (ret)
		return ret;
	/* Untrusted until checked: magic, count, reserved bytes, ranges. */
	ret = za_journal_unmap_decode(rv->blk, 4096, v->size_blocks, r, &nr);
	if (ret)
		return ret;
	rv->unmaps++;
	for (i = 0; i < nr && !ret; i++) {
		vol_live_add_unmap(v, rs->group_id, r[i].lba, r[i].n);
		ret = vol_map_fault_sync(v, r[i].lba, r[i].n, true);
		if (!ret)
			ret = za_map_clear(v->map, r[i].lba, r[i].n,
					   vol_on_dead, v);
	}
	return ret;
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
	lv = vol_live_get(v, rs->group_id, true);
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
		ret = vol_map_fault_sync(v, lba, e - b, true);
		if (ret)
			return ret;
		ret = za_map_set(v->map, lba, e - b, &loc, vol_on_dead, v);
		if (ret)
			return ret;
		if (lv) {
			lv->rec_delta += e - b;
			vol_live_add(v, lv, e - b);
		}
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
	uint32_t nr_parts, found; /* nr_parts 0: no map part seen yet */
	uint64_t *group, *pos; /* per part; pos UINT64_MAX: not found */
	/* The engine table's parts (etab.h), which follow the map's. */
	uint32_t nr_table, tfound;
	uint64_t *tgroup, *tpos;
	bool has_table; /* nr_table known (from either kind of part) */
	bool failed;
};

/* Forget a checkpoint that did not load: empty map, no live counters. */
static int ckpt_unload(struct za_volume *v)
{
	vol_live_clear(v);
	v->ck.pages_live = 0;
	za_map_free(v->map);
	v->map = NULL;
	return za_map_new(&v->map);
}

static int rec_scan_group(struct rec_vol *rv, const struct ck_cand *c,
			  uint64_t group);

/*
 * Read and check the map page a page record @r of checkpoint @id names,
 * at @level, into @h and @recs. 0, or -errno (logged: a page that does not
 * hold makes the checkpoint unusable, and says where).
 */
static int page_read(struct rec_vol *rv, uint64_t id,
		     const struct za_ckpt_rec *r, unsigned level,
		     struct za_mpage_hdr *h, struct za_ckpt_rec *recs)
{
	struct za_volume *v = rv->v;
	int ret;

	ret = za_engine_read_sync(v->eng, r->group, r->pos, 1, rv->blk, NULL);
	/*
	 * A group recovery does not know yet: while planning, only the
	 * anchored segments are read; the table says where the group's
	 * segments were (rec_scan_group()). Still unknown: the pages are
	 * where neither says, and every zone is read instead.
	 */
	if (ret == -ENOENT && rv->planning) {
		ret = rec_scan_group(rv, rv->cand, r->group);
		if (ret)
			return ret;
		ret = za_engine_read_sync(v->eng, r->group, r->pos, 1, rv->blk,
					  NULL);
		if (ret == -ENOENT)
			return -EAGAIN;
	}
	if (!ret)
		ret = za_mpage_decode(rv->blk, ZA_MPAGE_BYTES, h, recs);
	/* It must be the page its parent says: the range, the level, and
	 * written by this checkpoint or an older one. */
	if (!ret && (h->level != level || h->lo != r->lba ||
		     h->hi - h->lo != r->nr_blocks || h->ckpt_id > id))
		ret = -EBADMSG;
	if (!ret && h->ckpt_id == id) {
		if (rv->nr_own == rv->cap_own) {
			uint32_t cap = rv->cap_own ? 2 * rv->cap_own : 64;
			uint64_t *g = realloc(rv->own_group, cap * sizeof(*g));
			uint64_t *p;

			if (g)
				rv->own_group = g;
			p = realloc(rv->own_pos, cap * sizeof(*p));
			if (p)
				rv->own_pos = p;
			if (!g || !p)
				return -ENOMEM;
			rv->cap_own = cap;
		}
		rv->own_group[rv->nr_own] = r->group;
		rv->own_pos[rv->nr_own++] = r->pos;
	}
	if (ret && ret != -ENOMEM && ret != -EAGAIN)
		za_log_warn("recovery: checkpoint %llu: map page of LBAs "
			    "%llu+%llu at group %llu position %llu is not "
			    "usable: %s",
			    (unsigned long long)id, (unsigned long long)r->lba,
			    (unsigned long long)r->nr_blocks,
			    (unsigned long long)r->group,
			    (unsigned long long)r->pos, strerror(-ret));
	return ret;
}

/* Load the directory page @r names and its leaves; counts the pages
 * live and the extents into *@extents. */
static int ckpt_load_dir(struct rec_vol *rv, uint64_t id,
			 const struct za_ckpt_rec *r, struct za_ckpt_rec *drecs,
			 struct za_ckpt_rec *lrecs, uint64_t *extents)
{
	struct za_volume *v = rv->v;
	struct za_map_ext e[ZA_MAP_LEAF_CAP];
	struct za_mpage_hdr dh, lh;
	struct za_map_page *pg;
	uint32_t i;
	int ret;

	ret = page_read(rv, id, r, 1, &dh, drecs);
	if (!ret)
		ret = za_map_load_dir(v->map, r->group, r->pos, &pg);
	if (ret)
		return ret;
	page_count(v, pg, 1);
	for (i = 0; i < dh.nr_recs; i++) {
		ret = page_read(rv, id, &drecs[i], 0, &lh, lrecs);
		if (ret)
			return ret;
		ret = vol_leaf_extents(v, lrecs, lh.nr_recs, e);
		if (ret)
			return ret;
		ret = za_map_load_leaf(v->map, drecs[i].group, drecs[i].pos, e,
				       lh.nr_recs, &pg);
		if (ret)
			return ret;
		page_count(v, pg, 1);
		*extents += lh.nr_recs;
	}
	return 0;
}

/*
 * The largest map recovery loads whole when a map cache is set: ~25,000
 * leaf pages, ~0.6 s of synchronous reads at S5's ~24 us a page. Beyond,
 * by the root (S1: assembly in seconds whatever the map holds).
 */
#define REC_WHOLE_MAX_BYTES (64ull << 20)

/*
 * With a map cache, a map beyond its limit or beyond REC_WHOLE_MAX_BYTES,
 * from a checkpoint that counts its groups (version 4), is loaded by its
 * root only: what the replay needs is read then, the rest when requests
 * need it. Assembly's memory and reads are the root's, not the map's. A
 * smaller one is loaded whole (a fraction of a second), and its counts
 * checked against it.
 */
static bool rec_by_root(const struct za_volume *v, const struct za_ckpt_hdr *h)
{
	uint64_t max = v->mc.limit_bytes;

	if (!max || h->version < 4)
		return false;
	if (max > REC_WHOLE_MAX_BYTES)
		max = REC_WHOLE_MAX_BYTES;
	return za_map_bytes_whole(h->nr_map_extents) > max;
}

/* Read, check and apply every part of @c. 0, -EBADMSG/-EIO (not usable:
 * the map and counters are back to empty), or -ENOMEM. */
static int ckpt_load(struct rec_vol *rv, const struct ck_cand *c,
		     struct za_ckpt_rec *recs)
{
	struct za_volume *v = rv->v;
	struct za_ckpt_rec *drecs, *lrecs;
	struct za_ckpt_reader rd;
	struct za_ckpt_hdr h;
	uint64_t extents = 0;
	uint32_t part, i;
	int ret = 0, r;

	drecs = malloc(2 * ZA_MPAGE_MAX_RECS * sizeof(*drecs));
	if (!drecs)
		return -ENOMEM;
	rv->nr_own = 0;
	rv->nr_counts = 0;
	rv->counted = false;
	rv->lazy = false;
	lrecs = drecs + ZA_MPAGE_MAX_RECS;
	za_ckpt_reader_init(&rd);
	for (part = 0; part < c->nr_parts && !ret; part++) {
		ret = za_engine_read_sync(v->eng, c->group[part], c->pos[part],
					  1, rv->blk, NULL);
		if (!ret)
			ret = za_ckpt_block_decode(rv->blk, ZA_CKPT_BLOCK_BYTES,
						   &h, recs);
		if (!ret)
			ret = za_ckpt_reader_add(&rd, &h, recs);
		if (!ret && !part)
			rv->lazy = rec_by_root(v, &h);
		/* A bigger volume than ours: not ours to load. */
		if (!ret && (h.id != c->id || h.size_blocks > v->size_blocks))
			ret = -EBADMSG;
		for (i = 0; !ret && i < h.nr_recs; i++) {
			struct za_map_loc loc = { .group = recs[i].group,
						  .pos = recs[i].pos };

			if (recs[i].type == ZA_CKPT_REC_UNMAP) {
				vol_live_add_unmap(v, recs[i].group,
						   recs[i].lba,
						   recs[i].nr_blocks);
				continue;
			}
			if (recs[i].type == ZA_CKPT_REC_COUNT) {
				ret = rec_count_keep(rv, &recs[i]);
				continue;
			}
			if (recs[i].type == ZA_CKPT_REC_PAGE && rv->lazy) {
				struct za_map_page *pg;

				ret = za_map_load_dir_out(
					v->map, recs[i].lba,
					recs[i].lba + recs[i].nr_blocks,
					recs[i].group, recs[i].pos, &pg);
				if (!ret)
					page_count(v, pg, 1);
				continue;
			}
			if (recs[i].type == ZA_CKPT_REC_PAGE) {
				ret = ckpt_load_dir(rv, c->id, &recs[i], drecs,
						    lrecs, &extents);
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
	if (!ret)
		ret = za_map_load_end(v->map);
	/* Versions 3 and 4: the pages hold every extent the checkpoint
	 * counted. */
	if (!ret && rd.first.version >= 3 &&
	    ((!rv->lazy && extents != rd.first.nr_map_extents) ||
	     (rd.first.map_levels && rd.first.map_levels != 2)))
		ret = -EBADMSG;
	if (!ret && rv->lazy)
		za_map_load_extents(v->map, rd.first.nr_map_extents);
	if (!ret && rd.first.version >= 4)
		ret = rec_counts_apply(rv);
	free(drecs);
	if (ret) {
		za_log_warn("recovery: checkpoint %llu (sequence %llu) is not "
			    "usable: %s",
			    (unsigned long long)c->id,
			    (unsigned long long)c->seq, strerror(-ret));
		r = ckpt_unload(v);
		if (r)
			return r;
		return ret == -ENOMEM || ret == -EAGAIN ? ret : -EBADMSG;
	}
	return 0;
}

/* Keep @c: it is the live checkpoint now. */
static int ckpt_adopt(struct za_volume *v, struct ck_cand *c)
{
	struct ckpt *ck = &v->ck;
	uint64_t *all;
	uint32_t i, n = c->nr_parts + c->nr_table;

	all = malloc(((size_t)n + 1) * sizeof(*all));
	if (!all)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		struct live *l;

		all[i] = i < c->nr_parts ? c->group[i] :
					   c->tgroup[i - c->nr_parts];
		l = vol_live_get(v, all[i], true);
		if (!l) {
			free(all);
			return -ENOMEM;
		}
		vol_live_add(v, l, 1);
	}
	free(ck->live_groups);
	ck->live_groups = all;
	ck->live_nr = n;
	ck->last_stripes = n; /* its pages not counted: not known here */
	ck->live_id = c->id;
	ck->live_seq = c->seq;
	return 0;
}

static int cmp_desc(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x > y ? -1 : x < y;
}

/* The candidate with checkpoint id @id, made if new; NULL on -ENOMEM. */
static struct ck_cand *cand_get(struct ck_cand **cands, unsigned *nc,
				uint64_t id, uint64_t seq)
{
	struct ck_cand *nca;
	unsigned j;

	for (j = 0; j < *nc; j++)
		if ((*cands)[j].id == id)
			return &(*cands)[j];
	nca = realloc(*cands, (*nc + 1) * sizeof(**cands));
	if (!nca)
		return NULL;
	*cands = nca;
	memset(&nca[*nc], 0, sizeof(nca[*nc]));
	nca[*nc].id = id;
	nca[*nc].seq = seq;
	return &nca[(*nc)++];
}

/* Room for @n places found, all "not found" yet. */
static int places_new(uint64_t **group, uint64_t **pos, uint32_t n)
{
	uint32_t j;

	*group = malloc(((size_t)n + 1) * sizeof(uint64_t));
	*pos = malloc(((size_t)n + 1) * sizeof(uint64_t));
	if (!*group || !*pos)
		return -ENOMEM;
	for (j = 0; j < n; j++)
		(*pos)[j] = UINT64_MAX;
	return 0;
}

/* The table's part count, told by a map part or a table part: every
 * part must say the same. */
static int cand_table(struct ck_cand *c, uint32_t nr_table)
{
	if (c->has_table) {
		if (c->nr_table != nr_table)
			c->failed = true;
		return 0;
	}
	c->has_table = true;
	c->nr_table = nr_table;
	return places_new(&c->tgroup, &c->tpos, nr_table);
}

static bool cand_whole(const struct ck_cand *c)
{
	return c->nr_parts && c->found == c->nr_parts && c->has_table &&
	       c->tfound == c->nr_table;
}

/* Read @c's engine table into *@out (malloc'd; NULL when it has none). */
static int ckpt_table_read(struct rec_vol *rv, const struct ck_cand *c,
			   uint8_t **out)
{
	struct za_volume *v = rv->v;
	uint8_t *blocks;
	uint32_t i;
	int ret = 0;

	*out = NULL;
	if (!c->nr_table)
		return 0;
	blocks = malloc((size_t)c->nr_table * ZA_ETAB_BLOCK_BYTES);
	if (!blocks)
		return -ENOMEM;
	for (i = 0; i < c->nr_table && !ret; i++)
		ret = za_engine_read_sync(
			v->eng, c->tgroup[i], c->tpos[i], 1,
			blocks + (size_t)i * ZA_ETAB_BLOCK_BYTES, NULL);
	if (ret) {
		free(blocks);
		return ret;
	}
	*out = blocks;
	return 0;
}

/*
 * Compare the engine table of @c (@blocks, read; NULL: unreadable) with
 * what recovery found (engine-table.c), which also lists the places it
 * gives to segments that no longer hold them, for quarantine. Recovery
 * rests on it when it was adopted; otherwise it is only reported
 * (docs/design.md 9.6).
 */
static int ckpt_table_check(struct rec_vol *rv, const struct ck_cand *c,
			    const uint8_t *blocks)
{
	struct za_volume *v = rv->v;
	struct za_engine_table_stats ts;
	int ret = -EIO;

	if (!c->nr_table)
		return 0;
	if (blocks)
		ret = za_engine_table_check(v->eng, blocks, c->nr_table, &ts);
	if (ret == -ENOMEM)
		return ret;
	if (ret) {
		za_log_warn("recovery: the engine table of checkpoint %llu is "
			    "not usable: %s",
			    (unsigned long long)c->id, strerror(-ret));
		v->st.etab_mismatches++;
		return 0;
	}
	v->st.etab_segments = ts.segments;
	v->st.etab_mismatches += ts.mismatches;
	if (ts.mismatches)
		za_log_warn("recovery: engine table of checkpoint %llu: %llu "
			    "segments, %llu mismatches with the drives",
			    (unsigned long long)c->id,
			    (unsigned long long)ts.segments,
			    (unsigned long long)ts.mismatches);
	za_log_info("recovery: engine table of checkpoint %llu: %llu segments, "
		    "%llu as the drives say, %llu released and %llu added "
		    "since",
		    (unsigned long long)c->id, (unsigned long long)ts.segments,
		    (unsigned long long)ts.matched,
		    (unsigned long long)ts.released,
		    (unsigned long long)ts.added);
	return 0;
}

/*
 * The anchor assembly found (design.md 9.6): into @an (zeroed when there
 * is none or it is not valid) and the live anchor. True if recovery must
 * load the checkpoint it names rather than any newer one.
 */
static bool rec_anchor_read(struct za_volume *v, struct za_anchor *an)
{
	int ret;

	memset(an, 0, sizeof(*an));
	if (!v->ck.anchor_rec)
		return false;
	ret = za_anchor_decode(v->ck.anchor_rec, an);
	if (ret == -ENOENT)
		return false; /* none written yet, or an array made before */
	if (ret) {
		/* The superblock's CRC held: written so by us, a bug. */
		za_log_warn("recovery: the checkpoint anchor in the "
			    "superblocks is not valid (%s): the latest "
			    "complete checkpoint is loaded",
			    strerror(-ret));
		v->st.anchor_mismatches++;
		memset(an, 0, sizeof(*an));
		return false;
	}
	v->ck.live_anchor = *an;
	return an->ckpt_id && !v->ck.recover_full;
}

/*
 * The checkpoint recovery loaded (@got, NULL: none) against the anchor:
 * the one it names must be whole on the drives (it is not superseded
 * before a newer one is anchored), its parts in the segments it names.
 * Counted (design.md 9.6): recovery found it there (rec_plan()) or read
 * every zone, so a disagreement is a bug to report, not a loss.
 */
static void rec_anchor_check(struct rec_vol *rv, const struct za_anchor *an,
			     const struct ck_cand *got)
{
	struct za_volume *v = rv->v;
	struct za_anchor found = { 0 };
	struct za_seg_info si;
	unsigned i, j, stale = 0;

	if (!got || got->id != an->ckpt_id) {
		za_log_warn("recovery: the anchored checkpoint %llu (sequence "
			    "%llu) is not whole on the drives; %s",
			    (unsigned long long)an->ckpt_id,
			    (unsigned long long)an->seq,
			    got ? "an older one was loaded" :
				  "every stripe is replayed");
		v->st.anchor_mismatches++;
		return;
	}
	if (got->seq != an->seq ||
	    got->nr_parts + got->nr_table != an->nr_parts) {
		za_log_warn("recovery: checkpoint %llu: sequence %llu and %u "
			    "parts on the drives, %llu and %u in its anchor",
			    (unsigned long long)got->id,
			    (unsigned long long)got->seq,
			    got->nr_parts + got->nr_table,
			    (unsigned long long)an->seq, an->nr_parts);
		v->st.anchor_mismatches++;
		return;
	}
	if (!an->nr_segs)
		return; /* in more segments than an anchor holds */
	anchor_place(v, &found, got->group, got->pos, got->nr_parts);
	/* The table's parts and the map pages it wrote too: the anchor
	 * places all of them. */
	for (i = 0; i < got->nr_table + rv->nr_own && found.nr_segs; i++) {
		uint64_t seg, g, p;
		uint32_t sidx;

		g = i < got->nr_table ? got->tgroup[i] :
					rv->own_group[i - got->nr_table];
		p = i < got->nr_table ? got->tpos[i] :
					rv->own_pos[i - got->nr_table];
		if (za_engine_group_locate(v->eng, g, p, &seg, &sidx) ||
		    anchor_seg_add(&found, seg, g, sidx))
			found.nr_segs = 0;
	}
	for (i = 0; i < an->nr_segs && found.nr_segs == an->nr_segs; i++) {
		for (j = 0; j < found.nr_segs; j++)
			if (found.segs[j].seg_id == an->segs[i].seg_id)
				break;
		/* Without its pages (rec_vol.lazy), the first stripe found
		 * may be after the first it wrote. */
		if (j == found.nr_segs ||
		    found.segs[j].group_id != an->segs[i].group_id ||
		    (found.segs[j].first_stripe != an->segs[i].first_stripe &&
		     !(rv->lazy &&
		       found.segs[j].first_stripe > an->segs[i].first_stripe)))
			break;
		/* A column moved since (a rebuild) leaves a stale place:
		 * its copy is read elsewhere; said, not counted. */
		if (za_engine_seg_info(v->eng, an->segs[i].seg_id, &si))
			break;
		for (j = 0; j < an->segs[i].width; j++)
			stale += an->segs[i].members[j] != si.members[j] ||
				 (si.members[j] != ZA_STRIPE_MEMBER_ABSENT &&
				  an->segs[i].zones[j] != si.zones[j]);
	}
	/*
	 * Loaded by its root only (rec_vol.lazy), its pages were not read:
	 * the segments its parts and table are in must be anchored, and
	 * the anchor may name more (those of its pages).
	 */
	if (rv->lazy && found.nr_segs && found.nr_segs < an->nr_segs) {
		for (j = 0; j < found.nr_segs; j++) {
			for (i = 0; i < an->nr_segs; i++)
				if (found.segs[j].seg_id ==
					    an->segs[i].seg_id &&
				    found.segs[j].group_id ==
					    an->segs[i].group_id)
					break;
			if (i == an->nr_segs)
				break;
		}
		if (j == found.nr_segs) {
			za_log_info("recovery: checkpoint %llu: its parts are "
				    "where its anchor says (its pages not "
				    "read: the root only was loaded)",
				    (unsigned long long)got->id);
			return;
		}
		i = 0;
	}
	if (found.nr_segs != an->nr_segs || i < an->nr_segs) {
		za_log_warn("recovery: checkpoint %llu is not where its "
			    "anchor says (%u segments there, %u found)",
			    (unsigned long long)got->id, an->nr_segs,
			    found.nr_segs);
		v->st.anchor_mismatches++;
		return;
	}
	za_log_info("recovery: checkpoint %llu is where its anchor says "
		    "(%u segments%s)",
		    (unsigned long long)got->id, an->nr_segs,
		    stale ? ", some columns moved since" : "");
}

/* Forget the search (a fallback to a full scan, or the end). */
static void rec_search_free(struct rec_vol *rv)
{
	unsigned j;

	for (j = 0; j < rv->nc; j++) {
		free(rv->cands[j].group);
		free(rv->cands[j].pos);
		free(rv->cands[j].tgroup);
		free(rv->cands[j].tpos);
	}
	free(rv->cands);
	free(rv->tblocks);
	free(rv->tblocks_plan);
	rv->cands = rv->got = NULL;
	rv->tblocks = NULL;
	rv->tblocks_plan = NULL;
	rv->cand = NULL;
	rv->nc = 0;
	rv->searched = false;
}

/*
 * While planning (only the anchored segments read yet), a map page in
 * group @group the engine does not know: read the zones of that group's
 * segments, as @c's engine table places them. Such a group holds pages
 * the anchored checkpoint names, so it was not released since the table
 * was taken; but a column of it may have been moved by a rebuild, and
 * its old zone reused: a zone is read only when its first header is the
 * segment's (za_engine_recover_scan_seg()). 0, or -errno.
 */
static int rec_scan_group(struct rec_vol *rv, const struct ck_cand *c,
			  uint64_t group)
{
	struct za_volume *v = rv->v;
	struct za_etab_part *tp;
	uint32_t i, j, k;
	int ret = 0;

	if (!rv->tblocks_plan) {
		ret = ckpt_table_read(rv, c, &rv->tblocks_plan);
		if (ret || !rv->tblocks_plan)
			return ret == -ENOMEM ? ret : 0;
	}
	tp = malloc(sizeof(*tp));
	if (!tp)
		return -ENOMEM;
	for (i = 0; i < c->nr_table && !ret; i++) {
		if (za_etab_block_decode(
			    rv->tblocks_plan + (size_t)i * ZA_ETAB_BLOCK_BYTES,
			    ZA_ETAB_BLOCK_BYTES, tp))
			break;
		for (j = 0; j < tp->nr_segs && !ret; j++) {
			const struct za_etab_seg *sg = &tp->segs[j];

			if (sg->group_id != group)
				continue;
			for (k = 0; k < sg->width && !ret; k++)
				if (sg->col[k].member != ZA_ETAB_MEMBER_ABSENT)
					ret = za_engine_recover_scan_seg(
						v->eng, sg->col[k].member,
						sg->col[k].zone, sg->id);
		}
	}
	free(tp);
	return ret;
}

/*
 * Find and load the checkpoint to recover from among the checkpoint
 * stream's groups the engine knows (rv->got: NULL when none is whole),
 * its engine table read (rv->tblocks), every id seen counted
 * (rv->max_id). With @ids_after (table mode, once every group is known),
 * load nothing: only count the ids of the parts newer than checkpoint
 * @ids_after's, stopping at the first of its own.
 */
static int rec_ckpt_find(struct rec_vol *rv, uint64_t ids_after)
{
	struct za_volume *v = rv->v;
	struct za_ckpt_rec *recs = NULL;
	struct za_group_info *gi = NULL;
	struct za_etab_part *tp = NULL;
	struct za_mpage_hdr mh;
	uint64_t *ids = NULL, blocks = 0, pos, id;
	unsigned n, i, nr = 0;
	struct za_ckpt_hdr h;
	bool stop = false;
	int ret = 0, r;

	n = za_engine_groups(v->eng, NULL, 0);
	ids = malloc((n + 1) * sizeof(*ids));
	gi = malloc(sizeof(*gi));
	recs = malloc(ZA_CKPT_RECS_PER_BLOCK * sizeof(*recs));
	tp = malloc(sizeof(*tp));
	if (!ids || !gi || !recs || !tp) {
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
	for (i = 0; i < nr && !stop && !ret; i++) {
		if (za_engine_group_info(v->eng, ids[i], gi))
			continue;
		for (pos = gi->next_pos; pos-- > 0 && !stop && !ret;) {
			struct ck_cand *c;

			if (za_engine_read_sync(v->eng, ids[i], pos, 1, rv->blk,
						NULL))
				continue; /* lost beyond p */
			r = za_ckpt_block_decode(rv->blk, ZA_CKPT_BLOCK_BYTES,
						 &h, recs);
			if (r == -ENOENT) {
				/* Not a part: a table part, a map page (its
				 * id counts), or torn. */
				if (za_etab_block_decode(
					    rv->blk, ZA_ETAB_BLOCK_BYTES, tp)) {
					if (!za_mpage_decode(rv->blk,
							     ZA_MPAGE_BYTES,
							     &mh, recs) &&
					    mh.ckpt_id > rv->max_id)
						rv->max_id = mh.ckpt_id;
					continue;
				}
				id = tp->h.ckpt_id;
			} else if (r) {
				continue; /* torn, or lost beyond p */
			} else {
				id = h.id;
			}
			/* Ignoring checkpoints still takes their ids: a new
			 * one must never share a torn one's. */
			if (id > rv->max_id)
				rv->max_id = id;
			if (ids_after) {
				stop = id <= ids_after;
				continue;
			}
			if (v->ck.recover_full)
				continue;
			if (r == -ENOENT) {
				if (tp->h.nr_parts > blocks)
					continue;
				c = cand_get(&rv->cands, &rv->nc, tp->h.ckpt_id,
					     tp->h.seq);
				if (!c || cand_table(c, tp->h.nr_parts)) {
					ret = -ENOMEM;
					break;
				}
				if (c->seq != tp->h.seq)
					c->failed = true;
				if (c->failed ||
				    c->tpos[tp->h.part] != UINT64_MAX)
					continue;
				c->tgroup[tp->h.part] = ids[i];
				c->tpos[tp->h.part] = pos;
				c->tfound++;
			} else {
				/* More parts than blocks on the drives: it can
				 * never be complete (and a hostile count must
				 * not size an allocation). */
				if (h.nr_parts > blocks ||
				    h.nr_table_parts > blocks)
					continue;
				c = cand_get(&rv->cands, &rv->nc, h.id, h.seq);
				if (!c || cand_table(c, h.nr_table_parts)) {
					ret = -ENOMEM;
					break;
				}
				if (!c->nr_parts) {
					c->nr_parts = h.nr_parts;
					if (places_new(&c->group, &c->pos,
						       h.nr_parts)) {
						ret = -ENOMEM;
						break;
					}
				}
				if (c->seq != h.seq ||
				    c->nr_parts != h.nr_parts)
					c->failed = true; /* two, one id */
				/* A part found twice was written again after a
				 * column failed: the same bytes. */
				if (c->failed || c->pos[h.part] != UINT64_MAX)
					continue;
				c->group[h.part] = ids[i];
				c->pos[h.part] = pos;
				c->found++;
			}
			/* Newer than the anchor: written, never live. */
			if (!cand_whole(c) ||
			    (rv->limit && c->id > rv->an.ckpt_id))
				continue;
			if (rv->cand != c) {
				free(rv->tblocks_plan);
				rv->tblocks_plan = NULL;
				rv->cand = c;
			}
			ret = ckpt_load(rv, c, recs);
			if (ret == -EAGAIN)
				break;
			if (ret == -EBADMSG) {
				c->failed = true;
				ret = 0;
			} else if (!ret) {
				rv->got = c;
				stop = true;
				r = ckpt_table_read(rv, c, &rv->tblocks);
				if (r == -ENOMEM)
					ret = r;
			}
		}
	}
out:
	rv->searched = !ret && !ids_after;
	free(tp);
	free(recs);
	free(gi);
	free(ids);
	return ret;
}

/*
 * The engine's plan callback (za_engine_recover_plan()): with an anchor
 * that places its checkpoint, read only the anchored segments' zones,
 * load that checkpoint, and have the engine adopt its table, so that
 * pass 1 reads only what the table does not account for (design.md 9.6
 * item 4). Anything short of that - no anchor, an unplaced or revoked
 * one, the anchored checkpoint not whole there, a table that does not
 * hold - and recovery reads everything, as before anchors.
 */
static int rec_plan(void *priv)
{
	struct rec_vol *rv = priv;
	struct za_volume *v = rv->v;
	const struct za_anchor_seg *as;
	unsigned i, c;
	int ret;

	rv->limit = rec_anchor_read(v, &rv->an);
	rv->an_read = true;
	if (!rv->limit || !rv->an.nr_segs ||
	    (rv->an.flags & ZA_ANCHOR_REVOKED) || v->ck.no_table_recovery)
		return 0;
	for (i = 0; i < rv->an.nr_segs; i++)
		for (as = &rv->an.segs[i], c = 0; c < as->width; c++) {
			if (as->members[c] == ZA_STRIPE_MEMBER_ABSENT)
				continue;
			ret = za_engine_recover_scan(v->eng, as->members[c],
						     as->zones[c]);
			if (ret)
				return ret;
		}
	rv->planning = true;
	ret = rec_ckpt_find(rv, 0);
	rv->planning = false;
	if (ret == -EAGAIN) {
		za_log_warn("recovery: checkpoint %llu has map pages where its "
			    "anchor and engine table do not say: every zone "
			    "is read",
			    (unsigned long long)rv->an.ckpt_id);
		rec_search_free(rv);
		rv->counted = false;
		return ckpt_unload(v);
	}
	if (ret)
		return ret;
	if (rv->got && rv->got->id == rv->an.ckpt_id && rv->tblocks) {
		ret = za_engine_table_adopt(v->eng, rv->tblocks,
					    rv->got->nr_table);
		if (!ret) {
			rv->adopted = true;
			return 0;
		}
		if (ret == -ENOMEM)
			return ret;
		za_log_warn("recovery: the engine table of checkpoint %llu "
			    "does not hold (%s): every zone is read",
			    (unsigned long long)rv->got->id, strerror(-ret));
		v->st.etab_mismatches++;
	} else {
		za_log_warn("recovery: the anchored checkpoint %llu is not "
			    "whole where its anchor says: every zone is read",
			    (unsigned long long)rv->an.ckpt_id);
	}
	/* Back to a full scan: the search starts again over everything. */
	rec_search_free(rv);
	rv->counted = false;
	return ckpt_unload(v);
}

static int rec_start(void *priv, uint64_t *min_seq)
{
	struct rec_vol *rv = priv;
	struct za_volume *v = rv->v;
	struct ck_cand *got;
	unsigned j;
	int ret = 0;

	if (!rv->an_read)
		rv->limit = rec_anchor_read(v, &rv->an);
	rv->an_read = true;
	if (!rv->searched)
		ret = rec_ckpt_find(rv, 0);
	else if (rv->got)
		/* Groups newer than the anchored segments are known now:
		 * their checkpoint ids are taken too. */
		ret = rec_ckpt_find(rv, rv->got->id);
	if (ret)
		return ret;
	got = rv->got;
	v->ck.next_id = rv->max_id + 1;
	if (got) {
		if (rv->an.flags & ZA_ANCHOR_REVOKED)
			za_log_info("recovery: the engine table of checkpoint "
				    "%llu is not checked: its anchor was "
				    "revoked (quarantine freed early)",
				    (unsigned long long)got->id);
		else
			ret = ckpt_table_check(rv, got, rv->tblocks);
		if (!ret)
			ret = ckpt_adopt(v, got);
		if (ret)
			return ret;
	}
	for (j = 0; j < rv->nc; j++)
		if (!got || rv->cands[j].id > got->id)
			za_log_info(
				"recovery: checkpoint %llu not used: %s (%u "
				"of %u parts and %u of %u table parts found)",
				(unsigned long long)rv->cands[j].id,
				rv->cands[j].failed	   ? "invalid" :
				!cand_whole(&rv->cands[j]) ? "torn" :
							     "never anchored",
				rv->cands[j].found, rv->cands[j].nr_parts,
				rv->cands[j].tfound, rv->cands[j].nr_table);
	if (rv->limit)
		rec_anchor_check(rv, &rv->an, got);
	if (got) {
		*min_seq = got->seq;
		za_log_info("recovery: checkpoint %llu loaded: sequence %llu, "
			    "%u parts and %u table parts, %zu extents%s",
			    (unsigned long long)got->id,
			    (unsigned long long)got->seq, got->nr_parts,
			    got->nr_table, za_map_extents(v->map),
			    rv->adopted ? "; its engine table adopted" : "");
	} else if (rv->nc) {
		za_log_warn("recovery: no complete checkpoint among %u found; "
			    "replaying every stripe",
			    rv->nc);
	}
	return 0;
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
	l = vol_live_get(rc->v, loc->group, true);
	if (!l)
		return -ENOMEM;
	vol_live_add(rc->v, l, (int64_t)n);
	return 0;
}

/*
 * A version 4 checkpoint's counts, carried through the replay, against
 * the counters rebuilt from the whole map (design.md 9.8): a data or
 * journal group's live blocks, a checkpoint-stream group's map pages.
 * Each difference is logged; the rebuilt counters stay.
 */
static void rec_counts_check(struct za_volume *v)
{
	size_t h;

	for (h = 0; h < v->lt.size; h++) {
		const struct live *l;

		for (l = v->lt.h[h]; l; l = l->next) {
			uint64_t want = l->rec_listed ? l->rec_count : 0;
			uint64_t got = l->kind == LK_CKPT ? l->pages :
							    l->blocks;

			/* Orphans: mapped to groups the drives lost. */
			if (l->kind == LK_UNKNOWN || l->kind == LK_OTHER)
				continue;
			if (l->kind != LK_CKPT)
				want += (uint64_t)l->rec_delta;
			v->st.recovery_counts_checked++;
			if (want == got)
				continue;
			if (v->st.recovery_count_mismatches++ < 10)
				za_log_warn(
					"recovery: group %llu: the checkpoint "
					"counts %llu %s, the map %llu",
					(unsigned long long)l->group,
					(unsigned long long)want,
					l->kind == LK_CKPT ? "map pages" :
							     "live blocks",
					(unsigned long long)got);
		}
	}
}

/*
 * The root only was loaded (rec_vol.lazy): a group's live blocks are
 * what the checkpoint counted plus what the replay added and took; a
 * checkpoint-stream group's pages, what it counted (its directory pages
 * were counted as loaded, its leaves are not in memory to count).
 */
static void rec_count_lazy(struct za_volume *v, struct live *l)
{
	if (l->kind != LK_CKPT) {
		int64_t b = (l->rec_listed ? (int64_t)l->rec_count : 0) +
			    l->rec_delta;

		l->blocks = b > 0 ? (uint64_t)b : 0;
		vol_live_index(v, l);
	} else if (l->rec_listed && l->rec_count != l->pages) {
		int64_t d = (int64_t)l->rec_count - (int64_t)l->pages;

		l->pages = l->rec_count;
		v->ck.pages_live += (uint64_t)d;
		vol_live_add(v, l, d);
	}
}

static int rec_finish(struct za_volume *v, bool counted, bool lazy)
{
	struct rec_count rc = { .v = v };
	uint64_t *ids;
	unsigned n, i;
	size_t h;
	int ret = 0;

	for (h = 0; h < v->lt.size; h++) {
		struct live **lp = &v->lt.h[h], *l;

		while ((l = *lp)) {
			if (vol_live_learn(v, l)) {
				vol_live_drop(v, lp);
				continue;
			}
			if (lazy) {
				rec_count_lazy(v, l);
			} else if (l->kind != LK_CKPT) {
				l->blocks = 0;
				vol_live_index(v, l);
			}
			lp = &l->next;
		}
	}
	if (!lazy)
		ret = za_map_walk(v->map, 0, v->size_blocks, rec_count_extent,
				  &rc);
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
		if (!vol_live_get(v, ids[i], true))
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
	v->st.recovery_counts_checked = v->st.recovery_count_mismatches = 0;
	if (!ret && counted && !lazy)
		rec_counts_check(v);
	return ret;
}

int za_volume_recount(struct za_volume *v, uint64_t *checked,
		      uint64_t *mismatches)
{
	struct rec_count rc = { .v = v };
	size_t h;
	int ret;

	*checked = *mismatches = 0;
	ret = vol_map_fault_sync(v, 0, v->size_blocks, false);
	if (ret)
		return ret;
	/* What the counters say, kept aside; then the map walked. */
	for (h = 0; h < v->lt.size; h++) {
		struct live *l;

		for (l = v->lt.h[h]; l; l = l->next) {
			if (l->kind != LK_DATA && l->kind != LK_JOURNAL)
				continue;
			l->rec_count = l->blocks;
			l->blocks = 0;
			vol_live_index(v, l);
		}
	}
	ret = za_map_walk(v->map, 0, v->size_blocks, rec_count_extent, &rc);
	for (h = 0; h < v->lt.size; h++) {
		const struct live *l;

		for (l = v->lt.h[h]; l; l = l->next) {
			if (l->kind != LK_DATA && l->kind != LK_JOURNAL)
				continue;
			(*checked)++;
			if (l->rec_count == l->blocks)
				continue;
			if ((*mismatches)++ < 10)
				za_log_warn("volume: group %llu: counted %llu "
					    "live blocks, the map %llu",
					    (unsigned long long)l->group,
					    (unsigned long long)l->rec_count,
					    (unsigned long long)l->blocks);
		}
	}
	vol_map_trim(v, true);
	return ret;
}

int za_volume_recover(struct za_volume *v)
{
	struct rec_vol rv = { .v = v };
	struct za_engine_stats es;
	uint64_t t0 = za_io_now_ns();
	int ret;

	if (posix_memalign((void **)&rv.blk, 4096, 4096))
		return -ENOMEM;
	za_engine_recover_plan(v->eng, v->ck.anchor_rec ? rec_plan : NULL);
	ret = za_engine_recover_from(v->eng, rec_start, rec_apply, &rv);
	za_engine_recover_plan(v->eng, NULL);
	rec_search_free(&rv);
	free(rv.blk);
	free(rv.own_group);
	free(rv.own_pos);
	v->st.recovery_table = rv.adopted;
	za_engine_get_stats(v->eng, &es);
	v->st.recovery_zones = es.rec_zones_scanned;
	v->st.recovery_hdr_reads = es.rec_hdr_reads;
	v->st.recovery_table_segs = es.rec_table_segs;
	if (!ret)
		ret = rec_finish(v, rv.counted, rv.lazy);
	free(rv.counts);
	/*
	 * Recomputed before any write is admitted: otherwise writes take the
	 * last free segments of a volume restarted below the floor while GC,
	 * not yet started, waits for a victim's room (NEWS: seed 7002).
	 */
	v->critical = vol_space_critical(v);
	v->st.recovered_stripes = rv.stripes + rv.unmaps;
	/* Replayed stripes are not in the live checkpoint (if any). */
	v->ck.gen = v->st.recovered_stripes ? 1 : 0;
	/* Loaded whole, or pages read for the replay: what the live
	 * checkpoint holds may leave memory. */
	if (!ret)
		vol_map_trim(v, true);
	v->st.recovery_map_pages = v->st.map_pages_read;
	if (!ret)
		za_log_info(
			"volume: recovered %llu stripes and %llu unmap "
			"records after sequence %llu in %llu ms; %llu extents "
			"mapped%s (%llu map pages read)",
			(unsigned long long)rv.stripes,
			(unsigned long long)rv.unmaps,
			(unsigned long long)v->ck.live_seq,
			(unsigned long long)((za_io_now_ns() - t0) / 1000000),
			(unsigned long long)za_map_extents(v->map),
			rv.lazy ? ", the checkpoint's root loaded" : "",
			(unsigned long long)v->st.recovery_map_pages);
	return ret;
}
