// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * engine-space.c - what the engine holds and can still hold: the space
 * arithmetic the volume sizes itself with (and its what-ifs), the release
 * of groups (garbage collection: their zones reset and free again), the
 * list of groups, the degraded segments and the rebuild plan, dead
 * columns, and the scan for the worst lost columns. It decides nothing:
 * the volume chooses what to release, rebuild.c what to rebuild.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "container.h"
#include "crash.h"
#include "log.h"
#include "engine-int.h"

/* ---- space ---- */

/* Writable once the what-if @change is made (za_engine_space_if). */
static bool writable_if(const struct za_engine *e, unsigned i,
			const enum za_space_change *change)
{
	const struct member *m = &e->m[i];

	if (change && change[i] == ZA_SPACE_GONE)
		return false;
	if (change && change[i] == ZA_SPACE_BACK)
		return eng_readable(m); /* online, or draining and back */
	return eng_writable(m);
}

static uint64_t min_zone_cap(const struct za_engine *e,
			     const enum za_space_change *change)
{
	uint64_t min = UINT64_MAX;
	unsigned i;

	for (i = 0; i < e->nr_members; i++)
		if (writable_if(e, i, change) && e->m[i].min_cap_bytes < min)
			min = e->m[i].min_cap_bytes;
	return min == UINT64_MAX ? 0 : min;
}

/*
 * How many segments of @width distinct members can be cut from per-member
 * zone counts @cnt: the largest s with sum(min(cnt_i, s)) >= s * width
 * (each member gives at most one zone per segment).
 */
uint64_t eng_segs_from(const uint64_t *cnt, unsigned n, unsigned width)
{
	uint64_t lo = 0, hi = 0, sum, mid;
	unsigned i;

	for (i = 0; i < n; i++)
		hi += cnt[i];
	hi = hi / width + 1;
	while (lo + 1 < hi) {
		mid = lo + (hi - lo) / 2;
		for (sum = 0, i = 0; i < n; i++)
			sum += cnt[i] < mid ? cnt[i] : mid;
		if (sum >= mid * width)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* Fewer writable members (@n) than columns: segments open on all of
 * them, the rest absent (group_open). */
unsigned eng_seg_width(const struct za_stripe_layout *l, unsigned n)
{
	return n < l->width && n >= l->k ? n : l->width;
}

/*
 * One body for za_engine_space() (@change NULL) and the what-if of
 * za_engine_space_if(), so that a drain is judged by exactly the
 * arithmetic the volume sizes itself with.
 */
static void space_of(const struct za_engine *e,
		     const enum za_space_change *change,
		     struct za_engine_space *sp)
{
	const struct za_stripe_layout *l = &e->streams[0].l;
	uint64_t *fc, *tc, quar = 0;
	unsigned i, n = 0, w = 0;

	memset(sp, 0, sizeof(*sp));
	for (i = 0; i < e->nr_members; i++)
		w += writable_if(e, i, change);
	fc = calloc(e->nr_members, sizeof(*fc));
	tc = calloc(e->nr_members, sizeof(*tc));
	if (!fc || !tc)
		goto out;
	for (i = 0; i < e->nr_members; i++) {
		const struct member *m = &e->m[i];

		if (!writable_if(e, i, change))
			continue;
		fc[n] = m->free_zones;
		tc[n] = m->data_zones;
		quar += m->quar_zones;
		sp->free_zones += fc[n];
		sp->total_zones += tc[n];
		n++;
	}
	sp->free_segs = eng_segs_from(fc, n, eng_seg_width(l, n));
	sp->total_segs = eng_segs_from(tc, n, eng_seg_width(l, n));
	/* Space asks on every stripe: the second count only when some zone
	 * is in quarantine, in the free counts' own array. */
	if (quar) {
		for (i = 0, n = 0; i < e->nr_members; i++)
			if (writable_if(e, i, change))
				fc[n++] += e->m[i].quar_zones;
		sp->quar_segs = eng_segs_from(fc, n, eng_seg_width(l, n)) -
				sp->free_segs;
	}
	for (i = 0; i < e->nr_streams; i++) {
		const struct stream *st = &e->streams[i];
		unsigned segs = w / st->l.width;

		if (!segs && w >= st->l.k)
			segs = 1; /* one degraded segment */
		if (st->max_segs && segs > st->max_segs)
			segs = st->max_segs;
		/* Other streams' segments, counted as whole data segments. */
		sp->write_set_segs += i == 0 ? segs : segs ? 1 : 0;
	}
	sp->data_blocks_per_seg =
		min_zone_cap(e, change) / l->slot_bytes * l->data_blocks;
out:
	free(fc);
	free(tc);
}

uint64_t za_engine_member_data_bytes(const struct za_engine *e, unsigned idx)
{
	const struct member *m;
	uint64_t sum = 0;
	uint32_t z;

	if (idx >= e->nr_members || !e->m[idx].zkind)
		return 0;
	m = &e->m[idx];
	for (z = 0; z < m->nr_zones; z++)
		if (m->zkind[z] == Z_FREE || m->zkind[z] == Z_USED ||
		    m->zkind[z] == Z_QUARANTINE)
			sum += eng_zcap(m, z);
	return sum;
}

void za_engine_space(const struct za_engine *e, struct za_engine_space *sp)
{
	space_of(e, NULL, sp);
}

void za_engine_space_if(const struct za_engine *e,
			const enum za_space_change *change,
			struct za_engine_space *sp)
{
	space_of(e, change, sp);
}

uint64_t za_engine_data_capacity_blocks(const struct za_engine *e)
{
	struct za_engine_space sp;

	za_engine_space(e, &sp);
	return sp.free_segs * sp.data_blocks_per_seg;
}

/* ---- releasing groups (garbage collection) ---- */

void eng_group_unlink_free(struct za_engine *e, struct group *grp)
{
	unsigned j;

	for (j = 0; j < grp->w; j++) {
		struct za_segment *g = grp->segs[j];

		if (!g)
			continue;
		eng_seg_unlink(e, g);
		eng_pairs_add(e, g, -1);
		free(g->fin);
		free(g);
	}
	eng_group_unlink(e, grp);
	free(grp->segs);
	free(grp->rel_reqs);
	free(grp);
}

/* Every reset answered: the zones that reset are free again. */
static void release_finish(struct group *grp)
{
	struct za_engine *e = grp->eng;
	void (*done)(void *priv, int result) = grp->rel_done;
	void *priv = grp->rel_priv;
	int result = grp->rel_result;
	unsigned j, c, i = 0;

	for (j = 0; j < grp->w && grp->rel_reqs; j++) {
		struct za_segment *g = grp->segs[j];

		if (!g)
			continue;
		for (c = 0; c < g->st->l.width; c++, i++) {
			struct member *m = &e->m[g->member[c]];
			struct za_dev_req *r = &grp->rel_reqs[i];

			if (!r->op)
				continue; /* member gone: its zone stays used */
			if (!r->result) {
				eng_zone_release(e, g, g->member[c],
						 g->zone[c]);
			} else {
				m->zkind[g->zone[c]] = Z_BAD;
				eng_member_zstats(m);
			}
		}
	}
	e->rel_pending--;
	eng_group_unlink_free(e, grp);
	if (done)
		done(priv, result);
}

static void release_reset_done(struct za_dev_req *req)
{
	struct group *grp = req->priv;

	za_crash_point("zone-reset");
	if (req->result && !grp->rel_result) {
		grp->rel_result = req->result;
		za_log_err("%s: zone at %llu: reset failed: %s", req->dev->path,
			   (unsigned long long)req->off_bytes,
			   strerror(-req->result));
	}
	if (--grp->rel_pending == 0)
		release_finish(grp);
}

static void release_none(struct za_io_defer *d)
{
	struct group *grp = container_of(d, struct group, rel_defer);

	release_finish(grp);
}

void eng_group_release_start(struct za_engine *e, struct group *grp)
{
	unsigned j, c, n = 0, i = 0;

	for (j = 0; j < grp->w; j++)
		if (grp->segs[j])
			n += grp->segs[j]->st->l.width;
	grp->rel_reqs = calloc(n ? n : 1, sizeof(*grp->rel_reqs));
	if (!grp->rel_reqs)
		grp->rel_result = -ENOMEM;
	grp->rel_nreqs = n;
	grp->rel_pending = 0;
	for (j = 0; j < grp->w && grp->rel_reqs; j++) {
		struct za_segment *g = grp->segs[j];

		if (!g)
			continue;
		for (c = 0; c < g->st->l.width; c++, i++) {
			struct member *m = &e->m[g->member[c]];

			if (!eng_resettable(m))
				continue;
			grp->rel_reqs[i].op = ZA_DEV_OP_RESET;
			grp->rel_reqs[i].off_bytes =
				(uint64_t)g->zone[c] * m->zone_bytes;
			grp->rel_reqs[i].done = release_reset_done;
			grp->rel_reqs[i].priv = grp;
			grp->rel_pending++;
		}
	}
	if (!grp->rel_pending) {
		/* Nothing to reset: still answer on the loop, never inline. */
		grp->rel_defer.fn = release_none;
		za_io_defer(e->io, &grp->rel_defer);
		return;
	}
	/* Submit only now: a completion must not see a partial count. */
	for (i = 0; i < n; i++) {
		struct za_dev_req *r = &grp->rel_reqs[i];
		unsigned mi = 0, k2 = 0;

		if (!r->op)
			continue;
		for (j = 0; j < grp->w; j++) {
			struct za_segment *g = grp->segs[j];

			if (!g)
				continue;
			if (i < k2 + g->st->l.width) {
				mi = g->member[i - k2];
				break;
			}
			k2 += g->st->l.width;
		}
		za_dev_submit(e->m[mi].dev, r);
	}
}

int za_engine_group_release(struct za_engine *e, uint64_t group_id,
			    void (*done)(void *priv, int result), void *priv)
{
	struct group *grp = eng_group_find(e, group_id);
	unsigned j;

	if (!grp)
		return -ENOENT;
	if (grp->taking || grp->releasing || grp == grp->st->cur)
		return -EBUSY;
	for (j = 0; j < grp->w; j++)
		if (grp->segs[j] &&
		    (grp->segs[j]->inflight || grp->segs[j]->fin_pending))
			return -EBUSY;
	grp->releasing = true;
	grp->rel_done = done;
	grp->rel_priv = priv;
	e->rel_pending++;
	if (!grp->readers)
		eng_group_release_start(e, grp);
	return 0;
}

uint64_t za_engine_group_capacity_blocks(const struct za_engine *e,
					 uint64_t group_id)
{
	const struct group *grp = eng_group_find(e, group_id);

	return grp ? (uint64_t)grp->w * grp->nr_stripes *
			       grp->st->l.data_blocks :
		     0;
}

static int id_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

unsigned za_engine_groups(const struct za_engine *e, uint64_t *ids,
			  unsigned max)
{
	unsigned i, n = 0;
	const struct group *g;

	for (i = 0; i < e->ghash_size; i++)
		for (g = e->ghash[i]; g; g = g->hnext)
			if (!g->releasing) {
				if (n < max)
					ids[n] = g->id;
				n++;
			}
	/*
	 * In id order, whatever the table's size: the walk meets ids in
	 * bucket order, which changes as the table grows. GC picks its
	 * victim among equals by the order it is given, and with the
	 * fixed table of 4096 buckets small arrays always listed their
	 * groups by id.
	 */
	if (n && max)
		qsort(ids, n < max ? n : max, sizeof(*ids), id_cmp);
	return n;
}

/* ---- degraded segments ---- */

bool eng_col_lost(const struct za_engine *e, const struct za_segment *g,
		  unsigned c)
{
	return !eng_readable(&e->m[g->member[c]]);
}

/* Is column @c of @g to be rebuilt or moved, and not dead nor running? */
static bool col_to_restore(const struct za_engine *e,
			   const struct za_segment *g, unsigned c)
{
	return (eng_col_lost(e, g, c) ||
		e->m[g->member[c]].state == ZA_MEMBER_DRAINING) &&
	       !((g->dead_cols | g->rb_cols) & (1ull << c));
}

static int degraded_cmp(const void *a, const void *b)
{
	const struct za_engine_degraded *x = a, *y = b;

	if (x->lost != y->lost)
		return x->lost > y->lost ? -1 : 1;
	if (x->stream != y->stream) /* metadata first */
		return x->stream > y->stream ? -1 : 1;
	return x->seg_id < y->seg_id ? -1 : x->seg_id > y->seg_id;
}

size_t za_engine_degraded(const struct za_engine *e,
			  struct za_engine_degraded *out, size_t max)
{
	const struct za_segment *g;
	size_t n = 0;
	unsigned i, c;

	for (i = 0; i < e->hash_size; i++)
		for (g = e->hash[i]; g; g = g->hnext) {
			const struct za_stripe_layout *l = &g->st->l;
			struct za_engine_degraded d = { 0 };

			if (g->grp->releasing || !g->next_stripe)
				continue;
			for (c = 0; c < l->width; c++) {
				bool lost = eng_col_lost(e, g, c);

				if (!lost && e->m[g->member[c]].state !=
						     ZA_MEMBER_DRAINING)
					continue;
				d.lost += lost;
				if (lost)
					d.lost_cols |= 1ull << c;
				if (col_to_restore(e, g, c))
					d.todo |= 1ull << c;
			}
			if (!d.todo)
				continue;
			if (n < max) {
				d.seg_id = g->id;
				d.group_id = g->grp->id;
				d.group_pos = g->grp_idx;
				d.group_w = g->grp->w;
				d.stream = g->st->id;
				d.nr_written = g->next_stripe;
				d.busy = g->taking || g->inflight ||
					 g->fin_pending;
				out[n] = d;
			}
			n++;
		}
	if (out && n)
		qsort(out, n < max ? n : max, sizeof(*out), degraded_cmp);
	return n;
}

void za_engine_rebuild_plan(struct za_engine *e)
{
	const struct za_segment *g;
	unsigned i, c;

	for (i = 0; i < e->nr_members; i++)
		e->m[i].rb_plan = e->m[i].rb_pass_slots = 0;
	for (i = 0; i < e->hash_size; i++)
		for (g = e->hash[i]; g; g = g->hnext) {
			const struct za_stripe_layout *l = &g->st->l;
			bool listed = false;

			if (g->grp->releasing || !g->next_stripe)
				continue;
			for (c = 0; c < l->width; c++)
				listed |= col_to_restore(e, g, c);
			if (!listed)
				continue;
			for (c = 0; c < l->width; c++)
				if (!eng_col_lost(e, g, c))
					e->m[g->member[c]].rb_plan +=
						g->next_stripe;
		}
}

int za_engine_seg_mark_dead(struct za_engine *e, uint64_t seg_id, uint64_t cols)
{
	struct za_segment *g = eng_seg_find(e, seg_id);

	if (!g)
		return -ENOENT;
	g->dead_cols |= cols;
	return 0;
}

/* ---- lost columns ---- */

/*
 * Lost columns (absent, or on a member not readable) of the worst segment
 * that may hold live data (a segment with columns marked dead holds none);
 * *beyond is set when some segment lost more than
 * its code's p: data there is gone. Members count only through the
 * segments they hold: a lost member whose columns were rebuilt, or two
 * that never shared a segment, lose nothing.
 */
unsigned eng_seg_lost_scan(const struct za_engine *e, bool *beyond)
{
	const struct za_segment *g;
	unsigned i, c, worst = 0;
	bool any = false;

	*beyond = false;
	for (i = 0; i < e->nr_members && !any; i++)
		any = !eng_readable(&e->m[i]);
	for (i = 0; i < e->hash_size; i++)
		for (g = e->hash[i]; g; g = g->hnext) {
			uint64_t lost = 0;
			unsigned n;

			if (g->grp->releasing || !g->next_stripe)
				continue;
			for (c = 0; c < g->st->l.width; c++)
				if (eng_col_absent(g, c) ||
				    (any && !eng_readable(&e->m[g->member[c]])))
					lost |= 1ull << c;
			/* Columns are marked dead only in a segment that
			 * holds no live stripe (za_engine_seg_mark_dead), and
			 * a sealed segment never gets any: all of it is dead,
			 * whatever it loses later. */
			if (!lost || g->dead_cols)
				continue;
			n = (unsigned)__builtin_popcountll(lost);
			if (n > worst)
				worst = n;
			if (n > g->st->l.p)
				*beyond = true;
		}
	return worst;
}

unsigned za_engine_seg_lost_max(const struct za_engine *e)
{
	bool beyond;

	return eng_seg_lost_scan(e, &beyond);
}
