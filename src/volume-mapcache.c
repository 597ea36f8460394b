/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * volume-mapcache.c - the volume's side of the map cache (docs/design.md
 * 9.8): reading map pages back from the drives when an operation needs a
 * leaf or a directory node that left memory, and letting clean pages
 * leave memory down to za_volume_params.map_cache_bytes.
 *
 * The map (map.c) decides what may leave and says what an operation
 * needs (za_map_need()); this file reads that page through the engine
 * (verified, repaired from parity like any block), checks it against
 * what its parent said (level, range, extents within the volume, written
 * by a checkpoint that is live or older) and hands it to the map, which
 * checks the rest. Whoever waited asks again: an operation on several
 * leaves may need several pages, one after another. One read per page
 * however many wait for it. It does not decide when a checkpoint writes
 * pages (volume-checkpoint.c). Recovery, which loads a checkpoint's root
 * only when a limit is set, reads what its replay needs through
 * vol_map_fault_sync() (design.md 9.8).
 *
 * When may pages leave (vol_map_trim())? Not while GC has a victim: it
 * found the victim's live blocks in leaves that must still be there when
 * it moves them (gc_put()); and not while a whole walk waits for the map
 * to be complete. A page being read is pinned (za_map_pin()): its
 * directory node stays, which would free its leaves' page handles, the
 * one being read among them. Loop thread only.
 */
#include <assert.h>
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "log.h"
#include "map.h"
#include "mpage.h"
#include "volume-int.h"

struct mread {
	struct za_read er;
	struct za_volume *v;
	struct za_map_page *pg; /* valid until filled (map.h) */
	uint64_t group, pos; /* pg's, for the log */
	bool dir;
	struct za_vol_mwait *waiters;
	struct mread *next;
	uint8_t *blk;
};

static struct mread *mread_find(struct za_volume *v,
				const struct za_map_page *pg)
{
	struct mread *m;

	for (m = v->mc.reads; m; m = m->next)
		if (m->pg == pg)
			return m;
	return NULL;
}

int vol_leaf_extents(const struct za_volume *v, const struct za_ckpt_rec *recs,
		     uint32_t n, struct za_map_ext *e)
{
	uint32_t i;

	if (n > ZA_MAP_LEAF_CAP)
		return -EBADMSG;
	for (i = 0; i < n; i++) {
		/* Untrusted: within the volume (the map checks the rest). */
		if (recs[i].nr_blocks > v->size_blocks ||
		    recs[i].lba > v->size_blocks - recs[i].nr_blocks)
			return -EBADMSG;
		e[i] = (struct za_map_ext){
			.lba = recs[i].lba,
			.len = recs[i].nr_blocks,
			.loc = { .kind = recs[i].type == ZA_CKPT_REC_DATA ?
						 ZA_MAP_DATA :
						 ZA_MAP_JOURNAL,
				 .group = recs[i].group,
				 .pos = recs[i].pos },
		};
	}
	return 0;
}

/* Check page @blk as what @pg's parent names, and fill the map with it. */
static int page_fill(struct za_volume *v, struct za_map_page *pg, bool dir,
		     const uint8_t *blk)
{
	struct za_ckpt_rec *recs;
	struct za_mpage_hdr h;
	uint32_t i;
	int ret;

	recs = malloc(ZA_MPAGE_MAX_RECS * sizeof(*recs));
	if (!recs)
		return -ENOMEM;
	ret = za_mpage_decode(blk, ZA_MPAGE_BYTES, &h, recs);
	/* Written by a checkpoint that is live, or an older one: only
	 * durable pages leave memory. */
	if (!ret && (h.level != (dir ? 1 : 0) || h.ckpt_id > v->ck.live_id))
		ret = -EBADMSG;
	if (!ret && dir) {
		struct za_map_ref *c = malloc(h.nr_recs * sizeof(*c));

		if (!c) {
			free(recs);
			return -ENOMEM;
		}
		for (i = 0; i < h.nr_recs; i++)
			c[i] = (struct za_map_ref){
				.lo = recs[i].lba,
				.hi = recs[i].lba + recs[i].nr_blocks,
				.group = recs[i].group,
				.pos = recs[i].pos,
			};
		/* Every page of the tree is counted live in its group. */
		ret = za_map_fill_dir(v->map, pg, c, h.nr_recs, true);
		free(c);
	} else if (!ret) {
		struct za_map_ext e[ZA_MAP_LEAF_CAP];

		ret = vol_leaf_extents(v, recs, h.nr_recs, e);
		if (!ret)
			ret = za_map_fill_leaf(v->map, pg, e, h.nr_recs);
	}
	free(recs);
	return ret == -EALREADY ? 0 : ret;
}

/*
 * Page @pg (at @group, @pos: kept, @pg may not outlive a fill) was read
 * into @blk with @result: fill the map with it and count it, or count
 * and log why not. 0, -ENOMEM (may pass), or -EIO: anything else is the
 * page's for good (the engine already tried the parity).
 */
static int page_done(struct za_volume *v, struct za_map_page *pg, bool dir,
		     uint64_t group, uint64_t pos, const uint8_t *blk,
		     int result)
{
	int ret = result ? result : page_fill(v, pg, dir, blk);

	if (!ret) {
		v->st.map_pages_read++;
		return 0;
	}
	v->st.map_page_errors++;
	za_log_err("volume: map %s page at group %llu position %llu not "
		   "usable: %s",
		   dir ? "directory" : "leaf", (unsigned long long)group,
		   (unsigned long long)pos, strerror(-ret));
	return ret == -ENOMEM ? -ENOMEM : -EIO;
}

static void mread_done(struct za_read *er, int result)
{
	struct mread *m = er->priv, **pp;
	struct za_volume *v = m->v;
	struct za_vol_mwait *w;
	int ret = result;

	for (pp = &v->mc.reads; *pp != m; pp = &(*pp)->next)
		;
	*pp = m->next;
	v->mc.nr_reads--;
	ret = page_done(v, m->pg, m->dir, m->group, m->pos, m->blk, ret);
	za_map_pin(v->map, m->pg, false);
	w = m->waiters;
	free(m->blk);
	free(m);
	while (w) {
		struct za_vol_mwait *next = w->next;

		w->next = NULL;
		w->fn(w, ret);
		w = next;
	}
	vol_map_trim(v, false);
}

int vol_map_fault(struct za_volume *v, uint64_t lba, uint64_t n, bool seams,
		  struct za_vol_mwait *w)
{
	struct za_map_page *pg;
	struct mread *m;

	/* Without the cache biting (every node in memory) nothing to ask:
	 * O(1) instead of a walk of the leaves per request. */
	if (za_map_whole(v->map)) {
		w->since = 0;
		return 0;
	}
	pg = za_map_need(v->map, lba, n, seams);
	if (!pg) {
		w->since = 0;
		return 0;
	}
	v->st.map_page_waits++;
	/* Its wait began now, and goes on across the pages it needs. */
	if (!w->since)
		w->since = za_map_turn(v->map) + 1;
	m = mread_find(v, pg);
	if (!m) {
		m = calloc(1, sizeof(*m));
		if (!m || posix_memalign((void **)&m->blk, 4096, 4096)) {
			free(m);
			w->since = 0;
			return -ENOMEM;
		}
		m->v = v;
		m->pg = pg;
		m->group = pg->group;
		m->pos = pg->pos;
		m->dir = pg->dir;
		m->er.group_id = pg->group;
		m->er.gpos = pg->pos;
		m->er.nr_blocks = 1;
		m->er.buf = m->blk;
		m->er.done = mread_done;
		m->er.priv = m;
		m->next = v->mc.reads;
		v->mc.reads = m;
		v->mc.nr_reads++;
		w->next = NULL;
		m->waiters = w;
		za_map_pin(v->map, pg, true);
		za_engine_read(v->eng, &m->er);
		return 1;
	}
	w->next = m->waiters;
	m->waiters = w;
	return 1;
}

/*
 * The turn the oldest operation waiting for pages began waiting in
 * (UINT64_MAX: none waits). Every waiter is on the list of the page it
 * waits for: a few reads in flight, a few waiters each.
 */
static uint64_t oldest_wait(const struct za_volume *v)
{
	uint64_t turn = UINT64_MAX;
	const struct mread *m;
	const struct za_vol_mwait *w;

	for (m = v->mc.reads; m; m = m->next)
		for (w = m->waiters; w; w = w->next)
			if (w->since && w->since - 1 < turn)
				turn = w->since - 1;
	return turn;
}

int vol_map_fault_sync(struct za_volume *v, uint64_t lba, uint64_t n,
		       bool seams)
{
	struct za_map_page *pg;
	uint8_t *blk = NULL;
	int ret = 0;

	while (!za_map_whole(v->map) &&
	       (pg = za_map_need(v->map, lba, n, seams))) {
		uint64_t group = pg->group, pos = pg->pos;
		bool dir = pg->dir;

		if (!blk && posix_memalign((void **)&blk, 4096, 4096))
			return -ENOMEM;
		ret = za_engine_read_sync(v->eng, group, pos, 1, blk, NULL);
		ret = page_done(v, pg, dir, group, pos, blk, ret);
		if (ret)
			break;
	}
	free(blk);
	return ret;
}

void vol_map_trim(struct za_volume *v, bool all)
{
	if (!v->mc.limit_bytes || v->gc.active || v->mc.whole || v->mc.hold ||
	    !vol_ckpt_pages_ok(v))
		return;
	if (za_map_bytes(v->map) > v->mc.limit_bytes)
		(all ? za_map_shrink : za_map_sweep)(v->map, v->mc.limit_bytes,
						     oldest_wait(v));
	/*
	 * Leaves (2.6 KiB) and stubs (56 B) come and go interleaved: what
	 * they free stays in malloc's heap, resident, and the process grew
	 * to the map's high-water mark and the checkpoint's encoded pages
	 * and engine table. Given back after each checkpoint (a few ms),
	 * not after each page.
	 */
	if (all)
		malloc_trim(0);
}

bool vol_map_full(const struct za_volume *v)
{
	/* Asked at every write's admission: the cheap tests first. */
	if (!v->mc.limit_bytes || v->error ||
	    za_map_dirty_bytes(v->map) <= v->mc.limit_bytes ||
	    !vol_ckpt_pages_ok(v))
		return false;
	return v->ck.state != CK_IDLE || vol_ckpt_for_cache(v);
}

void vol_map_cache_free(struct za_volume *v)
{
	/* za_volume_free(): nothing in flight (za_volume_busy()). */
	assert(!v->mc.reads);
	(void)v;
}

/* ---- whole walks ---- */

bool za_volume_map_whole(const struct za_volume *v)
{
	return za_map_whole(v->map);
}

int za_volume_map_load(struct za_volume *v, struct za_vol_mwait *w)
{
	int ret;

	/* The walk runs as soon as the map is whole, before anything may
	 * leave again; another walker still waiting sets it again when it
	 * asks. */
	if (za_map_whole(v->map)) {
		v->mc.whole = false;
		return 0;
	}
	ret = vol_map_fault(v, 0, v->size_blocks, false, w);
	if (ret == 1)
		v->mc.whole = true;
	return ret;
}

void za_volume_map_unwait(struct za_volume *v, struct za_vol_mwait *w)
{
	struct za_vol_mwait **pp;
	struct mread *m;

	for (m = v->mc.reads; m; m = m->next)
		for (pp = &m->waiters; *pp; pp = &(*pp)->next)
			if (*pp == w) {
				*pp = w->next;
				w->next = NULL;
				v->mc.whole = false;
				return;
			}
}
