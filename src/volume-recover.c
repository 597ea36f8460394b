// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * volume-recover.c - the volume's crash recovery: at assembly, the
 * anchored (or latest complete) checkpoint found and its map loaded -
 * whole, page by page, or by its root only when a map cache is set and
 * the map is large (design.md 9.8) - the stripes written after it
 * replayed into the map (data, journal blocks, unmap records), and every
 * group's live counter rebuilt from the result or taken from the
 * checkpoint's counts.
 *
 * It does not write checkpoints (volume-checkpoint.c), decode a part's
 * or a page's bytes (checkpoint.c, mpage.c), nor scan the drives for
 * stripes, complete torn ones or order them (the engine's recovery,
 * engine-recover.c). Loop thread, at assembly, before anything is
 * served; its reads are synchronous (za_engine_read_sync()).
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
	vol_page_count(v, pg, 1);
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
		vol_page_count(v, pg, 1);
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
					vol_page_count(v, pg, 1);
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
	vol_anchor_place(v, &found, got->group, got->pos, got->nr_parts);
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
		    vol_anchor_seg_add(&found, seg, g, sidx))
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
