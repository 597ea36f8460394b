// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test-map.c - the block map against a per-block reference model under
 * random sets, clears and moves (every block's location, the dead-range
 * callbacks summed per location, walks with holes), coalescing (a
 * sequential fill, stripe by stripe, leaves one extent; no two neighbours
 * that continue each other are ever left apart, whichever path - in
 * place or with cuts - an operation took), and memory per extent.
 */
#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "map.h"
#include "tap.h"

#define NBLK_MAX 65536

struct ref {
	uint8_t kind[NBLK_MAX];
	uint64_t group[NBLK_MAX], pos[NBLK_MAX];
};

/*
 * Shapes for the random test: a small space where ranges often span many
 * extents, and a large one where single-block writes leave tens of
 * thousands of extents (hundreds of leaves, as random 4 KiB writes do).
 */
static const struct shape {
	uint64_t nblk;
	int ops;
	unsigned single_pct; /* share of one-block operations */
	unsigned contig_pct; /* share of sets that continue their neighbours */
} shapes[] = {
	{ 4096, 3000, 0, 0 },	    { 4096, 3000, 0, 0 },
	{ 4096, 3000, 0, 0 },	    { 4096, 3000, 0, 0 },
	{ 4096, 3000, 0, 0 },	    { 4096, 3000, 0, 0 },
	{ NBLK_MAX, 40000, 95, 0 }, { NBLK_MAX, 40000, 80, 0 },
	{ 4096, 6000, 90, 50 },	    { NBLK_MAX, 40000, 95, 30 },
};

static uint64_t NBLK = 4096;

static uint64_t rng = 12345;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static uint64_t dead_blocks;

/* Run before each operation on [lba, lba + n) (@seams: a set, clear or
 * move): the cache's tests bring in what it needs. */
static void (*pre_op)(struct za_map *m, uint64_t lba, uint64_t n, bool seams);
/* Neighbours that continue each other are coalesced (not when leaves
 * were out of memory as they came together). */
static bool check_coalesced = true;

static void pre(struct za_map *m, uint64_t lba, uint64_t n, bool seams)
{
	if (pre_op)
		pre_op(m, lba, n, seams);
}

static void on_dead(void *priv, const struct za_map_loc *old, uint64_t n)
{
	(void)priv;
	if (old->kind >= ZA_MAP_BUFFER && old->kind <= ZA_MAP_JOURNAL)
		dead_blocks += n;
}

struct wcheck {
	const struct ref *r;
	uint64_t next;
	uint64_t pieces; /* mapped pieces: one per extent on a full walk */
	uint64_t bad; /* mismatches; asserted once (check's asserts are slow) */
	struct za_map_loc prev; /* the piece before, if it ended at next */
	bool has_prev;
};

static int check_piece(void *priv, uint64_t lba, uint64_t n,
		       const struct za_map_loc *loc)
{
	struct wcheck *w = priv;
	uint64_t i;

	w->bad += lba != w->next || !n;
	w->pieces += loc != NULL;
	/* Left apart from a neighbour it continues: not coalesced. */
	w->bad += check_coalesced && loc && w->has_prev &&
		  w->prev.kind == loc->kind && w->prev.group == loc->group &&
		  w->prev.pos == loc->pos;
	w->has_prev = loc != NULL;
	if (loc) {
		w->prev = *loc;
		w->prev.pos += n;
	}
	for (i = 0; i < n; i++) {
		if (!loc) {
			w->bad += w->r->kind[lba + i] != 0;
			continue;
		}
		w->bad += w->r->kind[lba + i] != loc->kind ||
			  w->r->group[lba + i] != loc->group ||
			  w->r->pos[lba + i] != loc->pos + i;
	}
	w->next = lba + n;
	return 0;
}

static void check_all(struct za_map *m, const struct ref *r)
{
	struct wcheck w = { .r = r };
	uint64_t a, b;
	int i;

	pre(m, 0, NBLK, false);
	ck_assert_int_eq(za_map_walk(m, 0, NBLK, check_piece, &w), 0);
	ck_assert_uint_eq(w.next, NBLK);
	ck_assert_uint_eq(w.pieces, za_map_extents(m));
	for (i = 0; i < 20; i++) {
		a = rnd() % NBLK;
		b = a + 1 + rnd() % (NBLK - a);
		w.next = a;
		w.has_prev = false;
		pre(m, a, b - a, false);
		ck_assert_int_eq(za_map_walk(m, a, b - a, check_piece, &w), 0);
		ck_assert_uint_eq(w.next, b);
	}
	ck_assert_uint_eq(w.bad, 0);
}

/* One random set, clear or move, applied to the map and the model. */
static void random_op(struct za_map *m, struct ref *r, const struct shape *sh)
{
	uint64_t lba = rnd() % NBLK, n, i, before;
	struct za_map_loc loc, to;
	unsigned what = (unsigned)(rnd() % 10);

	if (rnd() % 100 < sh->single_pct)
		n = 1;
	else
		n = 1 + rnd() % (rnd() % 4 ? 8 : 300);
	if (lba + n > NBLK)
		n = NBLK - lba;
	loc.kind = (uint8_t)(1 + rnd() % 3);
	loc.group = rnd() % 4;
	loc.pos = rnd() % 100000;
	if (rnd() % 100 < sh->contig_pct) {
		/* As a buffer filled in LBA order: merges both ways. */
		loc.kind = ZA_MAP_BUFFER;
		loc.group = 1;
		loc.pos = lba;
	}
	dead_blocks = 0;
	if (what < 6) {
		uint64_t overw = 0;

		for (i = 0; i < n; i++)
			overw += r->kind[lba + i] != 0;
		pre(m, lba, n, true);
		ck_assert_int_eq(za_map_set(m, lba, n, &loc, on_dead, NULL), 0);
		for (i = 0; i < n; i++) {
			r->kind[lba + i] = loc.kind;
			r->group[lba + i] = loc.group;
			r->pos[lba + i] = loc.pos + i;
		}
		ck_assert_uint_eq(dead_blocks, overw);
	} else if (what < 8) {
		for (before = 0, i = 0; i < n; i++)
			before += r->kind[lba + i] != 0;
		pre(m, lba, n, true);
		ck_assert_int_eq(za_map_clear(m, lba, n, on_dead, NULL), 0);
		for (i = 0; i < n; i++)
			r->kind[lba + i] = 0;
		ck_assert_uint_eq(dead_blocks, before);
	} else {
		/* Move whatever still maps to the location of lba. */
		int64_t moved, exp = 0;

		if (!r->kind[lba])
			return;
		loc.kind = r->kind[lba];
		loc.group = r->group[lba];
		loc.pos = r->pos[lba];
		to.kind = ZA_MAP_DATA;
		to.group = 100 + rnd() % 3;
		to.pos = rnd() % 100000;
		for (i = 0; i < n; i++)
			if (r->kind[lba + i] == loc.kind &&
			    r->group[lba + i] == loc.group &&
			    r->pos[lba + i] == loc.pos + i) {
				r->kind[lba + i] = to.kind;
				r->group[lba + i] = to.group;
				r->pos[lba + i] = to.pos + i;
				exp++;
			}
		pre(m, lba, n, true);
		moved = za_map_move(m, lba, n, &loc, &to);
		ck_assert_int_eq(moved, exp);
	}
}

START_TEST(test_random_against_model)
{
	struct ref *r = calloc(1, sizeof(*r));
	struct za_map *m;
	int op;

	const struct shape *sh = &shapes[_i];

	NBLK = sh->nblk;
	rng = 777 + (uint64_t)_i;
	ck_assert_int_eq(za_map_new(&m), 0);
	for (op = 0; op < sh->ops; op++) {
		random_op(m, r, sh);
		if (op % (sh->ops / 30) == 0)
			check_all(m, r);
	}
	check_all(m, r);
	za_map_free(m);
	free(r);
}
END_TEST

/*
 * A sequential fill the way the volume does it: each stripe's blocks are
 * first mapped to a buffer, then moved to consecutive group positions.
 * The map ends with one extent per group.
 */
START_TEST(test_sequential_fill_coalesces)
{
	struct za_map *m;
	const uint64_t stripe = 640, groups = 3, per_group = 1000;
	uint64_t g, s, lba = 0;

	ck_assert_int_eq(za_map_new(&m), 0);
	for (g = 0; g < groups; g++)
		for (s = 0; s < per_group; s++) {
			struct za_map_loc buf = { .kind = ZA_MAP_BUFFER,
						  .group = lba / stripe,
						  .pos = 0 };
			struct za_map_loc to = { .kind = ZA_MAP_DATA,
						 .group = 10 + g,
						 .pos = s * stripe };

			ck_assert_int_eq(za_map_set(m, lba, stripe, &buf, NULL,
						    NULL),
					 0);
			ck_assert_int_eq(za_map_move(m, lba, stripe, &buf, &to),
					 (int64_t)stripe);
			lba += stripe;
		}
	ck_assert_uint_eq(za_map_extents(m), groups);
	/* Overwriting the middle of one splits it into three, not more. */
	{
		struct za_map_loc j = { .kind = ZA_MAP_JOURNAL,
					.group = 99,
					.pos = 0 };

		ck_assert_int_eq(za_map_set(m, 5000, 1, &j, NULL, NULL), 0);
		ck_assert_uint_eq(za_map_extents(m), groups + 2);
		ck_assert_int_eq(za_map_clear(m, 0, lba, NULL, NULL), 0);
		ck_assert_uint_eq(za_map_extents(m), 0);
	}
	ck_assert_uint_le(za_map_bytes(m), 256);
	za_map_free(m);
}
END_TEST

/*
 * Pages: a model "drive" keeps every page a snapshot hands out, by
 * position. After each live snapshot a second map is loaded from the
 * pages its root names and must equal the first; pages superseded are
 * dropped exactly once, never while the tree names them, and the pages
 * counted live are exactly the tree's; a failed snapshot's pages are
 * never named by a later one; a snapshot writes only what changed.
 */
struct spage {
	bool dir, live, failed, dropped;
	uint32_t n;
	uint64_t lo, hi;
	struct za_map_ext *e; /* leaf */
	struct za_map_ref *c; /* dir: its children, where they are */
};

struct pdrive {
	struct spage *pages;
	size_t nr, cap;
	struct za_map_child *root;
	uint32_t nr_root, cap_root;
	uint64_t live_pages, written;
};

static struct spage *pd_new(struct pdrive *d, struct za_map_page *pg)
{
	if (d->nr == d->cap) {
		d->cap = d->cap ? 2 * d->cap : 1024;
		d->pages = realloc(d->pages, d->cap * sizeof(*d->pages));
		ck_assert_ptr_nonnull(d->pages);
	}
	memset(&d->pages[d->nr], 0, sizeof(d->pages[0]));
	pg->group = 7;
	pg->pos = d->nr;
	pg->counted = true;
	d->live_pages++;
	d->written++;
	d->pages[d->nr].live = true;
	return &d->pages[d->nr++];
}

static void pd_leaf(void *priv, struct za_map_page *pg, uint64_t lo,
		    uint64_t hi, const struct za_map_ext *e, uint32_t n)
{
	struct spage *sp = pd_new(priv, pg);

	ck_assert(n >= 1 && n <= ZA_MAP_LEAF_CAP);
	ck_assert_uint_eq(lo, e[0].lba);
	ck_assert_uint_eq(hi, e[n - 1].lba + e[n - 1].len);
	sp->lo = lo;
	sp->hi = hi;
	sp->n = n;
	sp->e = malloc(n * sizeof(*e));
	memcpy(sp->e, e, n * sizeof(*e));
}

static void pd_dir(void *priv, struct za_map_page *pg, uint64_t lo, uint64_t hi,
		   const struct za_map_child *c, uint32_t n)
{
	struct spage *sp = pd_new(priv, pg);
	uint32_t i;

	ck_assert(n >= 1 && n <= ZA_MAP_DIR_CAP);
	sp->dir = true;
	sp->lo = lo;
	sp->hi = hi;
	sp->n = n;
	sp->c = malloc(n * sizeof(*sp->c));
	/* A child written by this snapshot already has its place: the
	 * model sets it at once (the volume, when its block lands). */
	for (i = 0; i < n; i++) {
		sp->c[i] = (struct za_map_ref){ c[i].lo, c[i].hi,
						c[i].pg->group, c[i].pg->pos };
		ck_assert(c[i].pg->counted);
	}
}

static void pd_root(void *priv, const struct za_map_child *c)
{
	struct pdrive *d = priv;

	if (d->nr_root == d->cap_root) {
		d->cap_root = d->cap_root ? 2 * d->cap_root : 64;
		d->root = realloc(d->root, d->cap_root * sizeof(*d->root));
	}
	d->root[d->nr_root++] = *c;
}

static void pd_drop(void *priv, struct za_map_page *pg)
{
	struct pdrive *d = priv;
	struct spage *sp = &d->pages[pg->pos];

	ck_assert(!sp->dropped);
	sp->dropped = true;
	if (pg->counted) {
		ck_assert(sp->live);
		sp->live = false;
		d->live_pages--;
	}
}

static bool pick_even(void *priv, const struct za_map_page *pg)
{
	(void)priv;
	return pg->pos % 2 == 0;
}

static const struct za_map_snap_ops pd_ops = { pd_leaf, pd_dir, pd_root };

/* Load a map from the pages the root names; every one must be live. */
static struct za_map *pd_load(struct pdrive *d)
{
	struct za_map *m;
	struct za_map_page *pg;
	uint32_t i, j;

	ck_assert_int_eq(za_map_new(&m), 0);
	for (i = 0; i < d->nr_root; i++) {
		const struct spage *dp = &d->pages[d->root[i].pg->pos];

		ck_assert(dp->dir && dp->live && !dp->failed);
		ck_assert_uint_eq(dp->lo, d->root[i].lo);
		ck_assert_uint_eq(dp->hi, d->root[i].hi);
		ck_assert_int_eq(za_map_load_dir(m, 7, d->root[i].pg->pos, &pg),
				 0);
		for (j = 0; j < dp->n; j++) {
			const struct spage *lp = &d->pages[dp->c[j].pos];

			ck_assert(!lp->dir && lp->live && !lp->failed);
			ck_assert_uint_eq(lp->lo, dp->c[j].lo);
			ck_assert_uint_eq(lp->hi, dp->c[j].hi);
			ck_assert_int_eq(za_map_load_leaf(m, 7, dp->c[j].pos,
							  lp->e, lp->n, &pg),
					 0);
		}
	}
	ck_assert_int_eq(za_map_load_end(m), 0);
	return m;
}

/*
 * The same by the root only (recovery with the map cache, design.md
 * 9.8): a stub per directory page, the extent count given; pages come in
 * as operations need them (cache_pre()). A leaf may not follow an out
 * node, nor a node come before the last one's end.
 */
static struct za_map *pd_load_root(struct pdrive *d, uint64_t extents)
{
	struct za_map_ext e = { .lba = 0, .len = 1, .loc.kind = ZA_MAP_DATA };
	struct za_map_page *pg;
	struct za_map *m;
	uint32_t i;

	ck_assert_int_eq(za_map_new(&m), 0);
	for (i = 0; i < d->nr_root; i++) {
		ck_assert_int_eq(za_map_load_dir_out(m, d->root[i].lo,
						     d->root[i].hi, 7,
						     d->root[i].pg->pos, &pg),
				 0);
		ck_assert(pg->dir && pg->pos == d->root[i].pg->pos);
		ck_assert_int_eq(za_map_load_leaf(m, 7, 0, &e, 1, &pg),
				 -EBADMSG);
		if (d->root[i].lo)
			ck_assert_int_eq(za_map_load_dir_out(m, 0, 1, 7, 0,
							     &pg),
					 -EBADMSG);
	}
	ck_assert_int_eq(za_map_load_end(m), 0);
	za_map_load_extents(m, extents);
	ck_assert(!d->nr_root || !za_map_whole(m));
	return m;
}

/* Every BUFFER run becomes durable (moved to a data group). */
static void settle_buffers(struct za_map *m, struct ref *r)
{
	uint64_t b, e;

	for (b = 0; b < NBLK; b = e) {
		struct za_map_loc from,
			to = { .kind = ZA_MAP_DATA, .group = 200 };

		for (e = b + 1; e < NBLK && r->kind[b] == ZA_MAP_BUFFER &&
				r->kind[e] == ZA_MAP_BUFFER &&
				r->group[e] == r->group[b] &&
				r->pos[e] == r->pos[b] + (e - b);
		     e++)
			;
		if (r->kind[b] != ZA_MAP_BUFFER)
			continue;
		from.kind = ZA_MAP_BUFFER;
		from.group = r->group[b];
		from.pos = r->pos[b];
		to.pos = 1000000 + b;
		pre(m, b, e - b, true);
		ck_assert_int_eq(za_map_move(m, b, e - b, &from, &to),
				 (int64_t)(e - b));
		for (uint64_t i = b; i < e; i++) {
			r->kind[i] = ZA_MAP_DATA;
			r->group[i] = 200;
			r->pos[i] = 1000000 + i;
		}
	}
}

START_TEST(test_pages_against_model)
{
	const struct shape *sh = &shapes[_i];
	struct ref *r = calloc(1, sizeof(*r));
	struct pdrive d = { 0 };
	struct za_map *m, *m2;
	struct za_map_snap snap;
	struct za_map_dirty dc;
	unsigned every = (unsigned)sh->ops / 40 + 1, round = 0;
	bool any_buffer;
	size_t i;
	int op;

	NBLK = sh->nblk;
	rng = 4242 + (uint64_t)_i;
	ck_assert_int_eq(za_map_new(&m), 0);
	for (op = 1; op <= sh->ops; op++) {
		random_op(m, r, sh);
		if (op % every && op != sh->ops)
			continue;
		round++;
		for (any_buffer = false, i = 0; i < NBLK; i++)
			any_buffer |= r->kind[i] == ZA_MAP_BUFFER;
		za_map_dirty_count(m, &dc);
		if (any_buffer) {
			struct za_map_dirty dc2;

			d.nr_root = 0;
			ck_assert_int_eq(za_map_snapshot(m, &pd_ops, &d, &snap),
					 -EBUSY);
			za_map_dirty_count(m, &dc2);
			ck_assert_mem_eq(&dc, &dc2, sizeof(dc));
			settle_buffers(m, r);
			za_map_dirty_count(m, &dc);
		}
		if (round % 11 == 6) {
			/* Whole (a version 2 checkpoint): no page handed
			 * out, every page superseded, every node dirty. */
			za_map_snapshot_whole(m, &snap);
			ck_assert_uint_eq(snap.nr_fresh, 0);
			za_map_snap_end(m, &snap, true, pd_drop, &d);
			za_map_dirty_count(m, &dc);
			ck_assert_uint_eq(d.live_pages, 0);
			ck_assert_uint_eq(dc.leaves, dc.leaves_all);
			ck_assert_uint_eq(dc.dirs, dc.nodes);
			continue;
		}
		d.nr_root = 0;
		d.written = 0;
		ck_assert_int_eq(za_map_snapshot(m, &pd_ops, &d, &snap), 0);
		/* Only what changed is written. */
		ck_assert_uint_eq(d.written, (uint64_t)dc.leaves + dc.dirs);
		ck_assert_uint_eq(d.nr_root, dc.nodes);
		if (round % 5 == 3) {
			/* Torn: its pages are never used, its nodes dirty
			 * again, and the older pages stay live. */
			for (i = 0; i < snap.nr_fresh; i++) {
				struct spage *sp = &d.pages[snap.fresh[i]->pos];

				sp->failed = true;
				sp->live = false;
				snap.fresh[i]->counted = false;
				d.live_pages--;
			}
			za_map_snap_end(m, &snap, false, NULL, NULL);
			za_map_dirty_count(m, &dc);
			ck_assert_uint_ge((uint64_t)dc.leaves + dc.dirs,
					  d.written);
			continue;
		}
		za_map_snap_end(m, &snap, true, pd_drop, &d);
		za_map_dirty_count(m, &dc);
		ck_assert_uint_eq(dc.leaves + dc.dirs, 0);
		/* The pages counted live are exactly the tree's. */
		ck_assert_uint_eq(d.live_pages,
				  (uint64_t)dc.leaves_all + dc.nodes);
		m2 = pd_load(&d);
		check_all(m2, r);
		ck_assert_uint_eq(za_map_extents(m2), za_map_extents(m));
		za_map_dirty_count(m2, &dc);
		ck_assert_uint_eq(dc.leaves + dc.dirs, 0);
		za_map_free(m2);
		if (round % 7 == 2) {
			/* Rewriting what lies in half the positions. */
			za_map_redirty(m, pick_even, NULL);
			za_map_dirty_count(m, &dc);
			ck_assert_uint_gt(dc.leaves + dc.dirs, 0);
		}
	}
	check_all(m, r);
	za_map_free(m);
	for (i = 0; i < d.nr; i++) {
		free(d.pages[i].e);
		free(d.pages[i].c);
	}
	free(d.pages);
	free(d.root);
	free(r);
}
END_TEST

/* Loading refuses what a map cannot be. */
START_TEST(test_pages_load_refused)
{
	struct za_map_ext e[2] = {
		{ 10, 5, { .kind = ZA_MAP_DATA, .group = 1, .pos = 0 } },
		{ 14, 2, { .kind = ZA_MAP_DATA, .group = 1, .pos = 9 } },
	};
	struct za_map_page *pg;
	struct za_map *m;

	ck_assert_int_eq(za_map_new(&m), 0);
	/* A leaf before any directory node. */
	ck_assert_int_eq(za_map_load_leaf(m, 1, 1, e, 1, &pg), -EBADMSG);
	ck_assert_int_eq(za_map_load_dir(m, 1, 0, &pg), 0);
	/* Overlapping extents, an empty leaf, a buffer, a zero length. */
	ck_assert_int_eq(za_map_load_leaf(m, 1, 1, e, 2, &pg), -EBADMSG);
	ck_assert_int_eq(za_map_load_leaf(m, 1, 1, e, 0, &pg), -EBADMSG);
	e[1].lba = 15;
	e[1].loc.kind = ZA_MAP_BUFFER;
	ck_assert_int_eq(za_map_load_leaf(m, 1, 1, e, 2, &pg), -EBADMSG);
	e[1].loc.kind = ZA_MAP_JOURNAL;
	e[1].len = 0;
	ck_assert_int_eq(za_map_load_leaf(m, 1, 1, e, 2, &pg), -EBADMSG);
	e[1].len = 2;
	/* An empty directory node. */
	ck_assert_int_eq(za_map_load_dir(m, 1, 2, &pg), -EBADMSG);
	ck_assert_int_eq(za_map_load_leaf(m, 1, 1, e, 2, &pg), 0);
	ck_assert_uint_eq(pg->pos, 1);
	/* A leaf not after the one before. */
	ck_assert_int_eq(za_map_load_leaf(m, 1, 3, e, 1, &pg), -EBADMSG);
	ck_assert_int_eq(za_map_load_dir(m, 1, 4, &pg), 0);
	ck_assert_int_eq(za_map_load_end(m), -EBADMSG);
	ck_assert_uint_eq(za_map_extents(m), 2);
	za_map_free(m);
}
END_TEST

/*
 * The cache: after each live snapshot the map lets leaves and directory
 * nodes leave memory down to a random target (sometimes none may stay),
 * and every operation and walk first brings back what za_map_need() asks
 * for, from the model drive's pages. Every block still reads as the
 * model says, dead ranges are still reported exactly, the pages asked
 * for are live ones, pages a snapshot has not ended are never let go,
 * and a map emptied to its stubs takes a fraction of the memory.
 */
static struct pdrive *cache_drive;
static uint64_t cache_fills;

static void cache_pre(struct za_map *m, uint64_t lba, uint64_t n, bool seams)
{
	struct za_map_page *pg;
	unsigned guard = 0;

	while ((pg = za_map_need(m, lba, n, seams))) {
		const struct spage *sp = &cache_drive->pages[pg->pos];

		ck_assert_uint_eq(pg->group, 7);
		ck_assert(sp->live && !sp->failed && !sp->dropped);
		ck_assert(sp->dir == pg->dir);
		if (sp->dir)
			ck_assert_int_eq(
				za_map_fill_dir(m, pg, sp->c, sp->n, true), 0);
		else
			ck_assert_int_eq(za_map_fill_leaf(m, pg, sp->e, sp->n),
					 0);
		cache_fills++;
		ck_assert_uint_lt(guard++, 100000);
	}
}

START_TEST(test_cache_against_model)
{
	const struct shape *sh = &shapes[_i];
	struct ref *r = calloc(1, sizeof(*r));
	struct pdrive d = { 0 };
	struct za_map *m, *m2;
	struct za_map_snap snap;
	unsigned every = (unsigned)sh->ops / 40 + 1, round = 0;
	bool emptied = false;
	size_t i;
	int op;

	NBLK = sh->nblk;
	rng = 9191 + (uint64_t)_i;
	cache_drive = &d;
	cache_fills = 0;
	pre_op = cache_pre;
	check_coalesced = false;
	ck_assert_int_eq(za_map_new(&m), 0);
	for (op = 1; op <= sh->ops; op++) {
		size_t before, after, target;

		random_op(m, r, sh);
		if (op % every && op != sh->ops)
			continue;
		round++;
		settle_buffers(m, r);
		if (round % 9 == 4) {
			/* Whole: everything is brought in first. */
			cache_pre(m, 0, NBLK, false);
			ck_assert(za_map_whole(m));
			za_map_snapshot_whole(m, &snap);
			za_map_snap_end(m, &snap, true, pd_drop, &d);
			continue;
		}
		d.nr_root = 0;
		ck_assert_int_eq(za_map_snapshot(m, &pd_ops, &d, &snap), 0);
		/* Pages not durable yet never leave with their node. */
		before = za_map_bytes(m);
		za_map_shrink(m, 0, UINT64_MAX);
		if (round % 5 == 3) {
			for (i = 0; i < snap.nr_fresh; i++) {
				struct spage *sp = &d.pages[snap.fresh[i]->pos];

				sp->failed = true;
				sp->live = false;
				snap.fresh[i]->counted = false;
				d.live_pages--;
			}
			za_map_snap_end(m, &snap, false, NULL, NULL);
			check_all(m, r);
			continue;
		}
		za_map_snap_end(m, &snap, true, pd_drop, &d);
		m2 = pd_load(&d);
		check_all(m2, r);
		za_map_free(m2);
		m2 = pd_load_root(&d, za_map_extents(m));
		ck_assert_uint_eq(za_map_extents(m2), za_map_extents(m));
		check_all(m2, r);
		za_map_free(m2);
		/* Now down to a random target, often nothing. */
		before = za_map_bytes(m);
		target = rnd() % 3 ? 0 : rnd() % (before + 1);
		after = za_map_shrink(m, target, UINT64_MAX);
		if (!target && za_map_extents(m) >= 2000) {
			ck_assert(!za_map_whole(m));
			ck_assert_uint_lt(after, before / 8);
			emptied = true;
		}
		if (target)
			ck_assert_uint_le(after,
					  target > 100000 ? target : before);
		check_all(m, r);
	}
	check_all(m, r);
	if (sh->nblk == NBLK_MAX)
		ck_assert(emptied);
	ck_assert_uint_gt(cache_fills, 0);
	za_map_free(m);
	pre_op = NULL;
	check_coalesced = true;
	for (i = 0; i < d.nr; i++) {
		free(d.pages[i].e);
		free(d.pages[i].c);
	}
	free(d.pages);
	free(d.root);
	free(r);
}
END_TEST

/* Filling refuses what does not fit the node it is for. */
START_TEST(test_cache_fill_refused)
{
	struct pdrive d = { 0 };
	struct za_map *m;
	struct za_map_snap snap;
	struct za_map_page *pg;
	struct za_map_loc loc = { .kind = ZA_MAP_DATA, .group = 3 };
	struct za_map_ext e[ZA_MAP_LEAF_CAP];
	struct za_map_ref c[2];
	uint64_t lba;
	const struct spage *sp;

	ck_assert_int_eq(za_map_new(&m), 0);
	/* 200 leaves of one-block extents, two blocks apart. */
	for (lba = 0; lba < 2 * 64 * 200; lba += 2) {
		loc.pos = 5 * lba;
		ck_assert_int_eq(za_map_set(m, lba, 1, &loc, NULL, NULL), 0);
	}
	ck_assert_int_eq(za_map_snapshot(m, &pd_ops, &d, &snap), 0);
	za_map_snap_end(m, &snap, true, pd_drop, &d);
	za_map_shrink(m, 0, UINT64_MAX);
	ck_assert(!za_map_whole(m));
	pg = za_map_need(m, 1000, 1, false);
	ck_assert_ptr_nonnull(pg);
	ck_assert(pg->dir);
	sp = &d.pages[pg->pos];
	ck_assert_uint_ge(sp->n, 2);
	/* A leaf's content for a directory node, a child missing, a range
	 * not the node's, children out of order. */
	ck_assert_int_eq(za_map_fill_leaf(m, pg, e, 1), -ESTALE);
	ck_assert_int_eq(za_map_fill_dir(m, pg, sp->c, sp->n - 1, true),
			 -EBADMSG);
	ck_assert_int_eq(za_map_fill_dir(m, pg, sp->c + 1, sp->n - 1, true),
			 -EBADMSG);
	ck_assert_int_eq(za_map_fill_dir(m, pg, sp->c, 0, true), -EBADMSG);
	c[0] = sp->c[0];
	c[1] = sp->c[sp->n - 1];
	c[1].lo = c[0].lo;
	ck_assert_int_eq(za_map_fill_dir(m, pg, c, 2, true), -EBADMSG);
	ck_assert_int_eq(za_map_fill_dir(m, pg, sp->c, sp->n, true), 0);
	ck_assert_int_eq(za_map_fill_dir(m, pg, sp->c, sp->n, true), -EALREADY);
	pg = za_map_need(m, 1000, 1, false);
	ck_assert_ptr_nonnull(pg);
	ck_assert(!pg->dir);
	sp = &d.pages[pg->pos];
	memcpy(e, sp->e, sp->n * sizeof(*e));
	/* A buffer, an extent too many, a range not the leaf's. */
	e[1].loc.kind = ZA_MAP_BUFFER;
	ck_assert_int_eq(za_map_fill_leaf(m, pg, e, sp->n), -EBADMSG);
	e[1].loc.kind = ZA_MAP_DATA;
	ck_assert_int_eq(za_map_fill_leaf(m, pg, e, sp->n - 1), -EBADMSG);
	e[0].lba++;
	e[0].len = 0;
	ck_assert_int_eq(za_map_fill_leaf(m, pg, e, sp->n), -EBADMSG);
	ck_assert_int_eq(za_map_fill_leaf(m, pg, sp->e, sp->n), 0);
	ck_assert_int_eq(za_map_fill_leaf(m, pg, sp->e, sp->n), -EALREADY);
	ck_assert_ptr_null(za_map_need(m, 1000, 1, false));
	za_map_free(m);
	for (size_t i = 0; i < d.nr; i++) {
		free(d.pages[i].e);
		free(d.pages[i].c);
	}
	free(d.pages);
	free(d.root);
}
END_TEST

/* An operation's seams: a set up to a leaf out of memory asks for it
 * (its cut falls on that leaf's first block), a walk up to it does not. */
START_TEST(test_cache_seams)
{
	struct pdrive d = { 0 };
	struct za_map *m;
	struct za_map_snap snap;
	struct za_map_loc loc = { .kind = ZA_MAP_DATA, .group = 3 };
	struct za_map_page *pg;
	struct ref *r = calloc(1, sizeof(*r));
	uint64_t lba;

	NBLK = 4096;
	ck_assert_int_eq(za_map_new(&m), 0);
	/* Full leaves of one-block extents at even blocks: the second leaf
	 * starts at block 128. */
	for (lba = 0; lba < 2 * 64 * 20; lba += 2) {
		loc.pos = 5 * lba;
		ck_assert_int_eq(za_map_set(m, lba, 1, &loc, NULL, NULL), 0);
		r->kind[lba] = loc.kind;
		r->group[lba] = loc.group;
		r->pos[lba] = loc.pos;
	}
	ck_assert_int_eq(za_map_snapshot(m, &pd_ops, &d, &snap), 0);
	za_map_snap_end(m, &snap, true, pd_drop, &d);
	za_map_shrink(m, 0, UINT64_MAX);
	cache_drive = &d;
	cache_pre(m, 120, 8, false);
	ck_assert_ptr_null(za_map_need(m, 120, 8, false));
	pg = za_map_need(m, 120, 8, true);
	ck_assert_ptr_nonnull(pg);
	ck_assert(!pg->dir);
	ck_assert_uint_eq(d.pages[pg->pos].lo, 128);
	cache_pre(m, 120, 8, true);
	/* Over a whole extent and a hole; blocks 120..127 change. */
	loc.pos = 777;
	ck_assert_int_eq(za_map_set(m, 121, 7, &loc, on_dead, NULL), 0);
	for (lba = 121; lba < 128; lba++) {
		r->kind[lba] = loc.kind;
		r->group[lba] = loc.group;
		r->pos[lba] = loc.pos + lba - 121;
	}
	pre_op = cache_pre;
	check_coalesced = false;
	check_all(m, r);
	pre_op = NULL;
	check_coalesced = true;
	za_map_free(m);
	for (size_t i = 0; i < d.nr; i++) {
		free(d.pages[i].e);
		free(d.pages[i].c);
	}
	free(d.pages);
	free(d.root);
	free(r);
}
END_TEST

/*
 * A set over the first extents of a leaf whose neighbour before is out
 * of memory: the leaf's key rises past the set's first block, and the
 * insertion finds the neighbour - it goes at the start of the leaf
 * instead (za_map_set() asserted: test_map_cache in test-volume.c). A
 * set over a whole leaf frees it, and inserts after the neighbour: that
 * one is asked for first.
 */
START_TEST(test_cache_first_extent)
{
	struct pdrive d = { 0 };
	struct za_map *m;
	struct za_map_snap snap;
	struct za_map_loc loc = { .kind = ZA_MAP_DATA, .group = 3 };
	struct za_map_page *pg;
	struct ref *r = calloc(1, sizeof(*r));
	uint64_t lba;

	NBLK = 4096;
	ck_assert_int_eq(za_map_new(&m), 0);
	/* Full leaves of one-block extents at even blocks: leaves start at
	 * blocks 0, 128, 256... */
	for (lba = 0; lba < 2 * 64 * 20; lba += 2) {
		loc.pos = 5 * lba;
		ck_assert_int_eq(za_map_set(m, lba, 1, &loc, NULL, NULL), 0);
		r->kind[lba] = loc.kind;
		r->group[lba] = loc.group;
		r->pos[lba] = loc.pos;
	}
	ck_assert_int_eq(za_map_snapshot(m, &pd_ops, &d, &snap), 0);
	za_map_snap_end(m, &snap, true, pd_drop, &d);
	za_map_shrink(m, 0, UINT64_MAX);
	cache_drive = &d;
	/* The first two extents of the leaf at 128: only it is needed. */
	cache_pre(m, 128, 3, true);
	pg = za_map_need(m, 0, 1, false);
	ck_assert_ptr_nonnull(pg); /* the leaf before is still out */
	loc.pos = 999;
	ck_assert_int_eq(za_map_set(m, 128, 3, &loc, on_dead, NULL), 0);
	for (lba = 128; lba < 131; lba++) {
		r->kind[lba] = loc.kind;
		r->group[lba] = loc.group;
		r->pos[lba] = loc.pos + lba - 128;
	}
	/* A move up to the first block of a leaf out of memory (GC's
	 * moves, a stripe made durable): only its own range is needed. */
	ck_assert_ptr_nonnull(za_map_need(m, 384, 1, false));
	cache_pre(m, 382, 2, false);
	ck_assert_ptr_nonnull(za_map_need(m, 382, 2, true));
	{
		struct za_map_loc from = { .kind = ZA_MAP_DATA,
					   .group = 3,
					   .pos = 5 * 382 };
		struct za_map_loc to = { .kind = ZA_MAP_JOURNAL,
					 .group = 4,
					 .pos = 10 };

		/* Block 382 and the hole at 383: no whole extent. */
		ck_assert_int_eq(za_map_move(m, 382, 2, &from, &to), 1);
		r->kind[382] = to.kind;
		r->group[382] = to.group;
		r->pos[382] = to.pos;
	}
	/* A set that would empty the leaf at 256 needs the leaf before it
	 * too; asking marks it like the rest, so that sweeps (one turn of
	 * the clock each, as after every page read) leave both while the
	 * set waits for more pages. */
	d.nr_root = 0;
	ck_assert_int_eq(za_map_snapshot(m, &pd_ops, &d, &snap), 0);
	za_map_snap_end(m, &snap, true, pd_drop, &d);
	za_map_shrink(m, 0, UINT64_MAX);
	cache_pre(m, 256, 128, true);
	for (int turn = 0; turn < 4; turn++) {
		ck_assert_ptr_null(za_map_need(m, 256, 128, true));
		za_map_sweep(m, 0, UINT64_MAX);
	}
	/* The whole leaf at 256 (and the hole after it): the leaf before
	 * it must come in first. */
	d.nr_root = 0;
	ck_assert_int_eq(za_map_snapshot(m, &pd_ops, &d, &snap), 0);
	za_map_snap_end(m, &snap, true, pd_drop, &d);
	za_map_shrink(m, 0, UINT64_MAX);
	cache_pre(m, 256, 1, true);
	pg = za_map_need(m, 256, 128, true);
	ck_assert_ptr_nonnull(pg);
	ck_assert_uint_eq(d.pages[pg->pos].lo, 128);
	cache_pre(m, 256, 128, true);
	loc.pos = 2000;
	ck_assert_int_eq(za_map_set(m, 256, 128, &loc, on_dead, NULL), 0);
	for (lba = 256; lba < 384; lba++) {
		r->kind[lba] = loc.kind;
		r->group[lba] = loc.group;
		r->pos[lba] = loc.pos + lba - 256;
	}
	pre_op = cache_pre;
	check_coalesced = false;
	check_all(m, r);
	pre_op = NULL;
	check_coalesced = true;
	/* A leaf's page being read (pinned) keeps its directory node in
	 * memory through a shrink: the page handle stays valid. */
	d.nr_root = 0;
	ck_assert_int_eq(za_map_snapshot(m, &pd_ops, &d, &snap), 0);
	za_map_snap_end(m, &snap, true, pd_drop, &d);
	za_map_shrink(m, 0, UINT64_MAX);
	pg = za_map_need(m, 0, 1, false);
	ck_assert(pg && pg->dir);
	ck_assert_int_eq(za_map_fill_dir(m, pg, d.pages[pg->pos].c,
					 d.pages[pg->pos].n, true),
			 0);
	pg = za_map_need(m, 0, 1, false);
	ck_assert(pg && !pg->dir);
	za_map_pin(m, pg, true);
	za_map_shrink(m, 0, UINT64_MAX);
	ck_assert_ptr_eq(za_map_need(m, 0, 1, false), pg);
	cache_pre(m, 0, 1, false);
	za_map_pin(m, pg, false);
	za_map_shrink(m, 0, UINT64_MAX);
	pg = za_map_need(m, 0, 1, false);
	ck_assert(pg && pg->dir);
	/*
	 * Leaves an operation waiting since turn T used stay through any
	 * number of sweeps told to keep T, though nobody asks for them in
	 * between (others' pages arriving sweep meanwhile: seed 7010); told
	 * to keep nothing, two sweeps take them.
	 */
	cache_pre(m, 0, 300, false);
	{
		uint64_t t0 = za_map_turn(m);

		ck_assert_ptr_null(za_map_need(m, 0, 300, false));
		for (int turn = 0; turn < 6; turn++) {
			za_map_sweep(m, 0, t0);
			ck_assert_uint_eq(za_map_turn(m), t0 + turn + 1);
		}
		za_map_shrink(m, 0, t0);
		ck_assert_ptr_null(za_map_need(m, 0, 300, false));
		/* Used again in a later turn: still kept from t0. */
		za_map_sweep(m, 0, t0);
		ck_assert_ptr_null(za_map_need(m, 0, 300, false));
		za_map_sweep(m, 0, UINT64_MAX);
		za_map_sweep(m, 0, UINT64_MAX);
		ck_assert_ptr_nonnull(za_map_need(m, 0, 300, false));
	}
	za_map_free(m);
	for (size_t i = 0; i < d.nr; i++) {
		free(d.pages[i].e);
		free(d.pages[i].c);
	}
	free(d.pages);
	free(d.root);
	free(r);
}
END_TEST

/*
 * A pinned page's leaf moves to the other half of its directory node
 * when that node splits (leaves added before it): the pin goes with it,
 * so that unpinning counts down the node it is in now (S3 aborted in
 * za_map_pin() when the count stayed with the old half).
 */
START_TEST(test_cache_pin_split)
{
	struct pdrive d = { 0 };
	struct za_map *m;
	struct za_map_snap snap;
	struct za_map_loc loc = { .kind = ZA_MAP_DATA, .group = 3 };
	struct za_map_page *pg;
	struct ref *r = calloc(1, sizeof(*r));
	const uint64_t base = 40000;
	uint64_t lba;

	NBLK = NBLK_MAX;
	ck_assert_int_eq(za_map_new(&m), 0);
	/* 20 full leaves of one-block extents from block 40000. */
	for (lba = base; lba < base + 2 * 64 * 20; lba += 2) {
		loc.pos = 5 * lba;
		ck_assert_int_eq(za_map_set(m, lba, 1, &loc, NULL, NULL), 0);
		r->kind[lba] = loc.kind;
		r->group[lba] = loc.group;
		r->pos[lba] = loc.pos;
	}
	ck_assert_int_eq(za_map_snapshot(m, &pd_ops, &d, &snap), 0);
	za_map_snap_end(m, &snap, true, pd_drop, &d);
	za_map_shrink(m, 0, UINT64_MAX);
	cache_drive = &d;
	/* The last leaf's page, being read. */
	lba = base + 2 * 64 * 19;
	pg = za_map_need(m, lba, 1, false);
	ck_assert(pg && pg->dir);
	ck_assert_int_eq(za_map_fill_dir(m, pg, d.pages[pg->pos].c,
					 d.pages[pg->pos].n, true),
			 0);
	pg = za_map_need(m, lba, 1, false);
	ck_assert(pg && !pg->dir);
	za_map_pin(m, pg, true);
	/* 90 leaves before the first: the node splits, the pinned leaf
	 * goes to the second half. */
	for (lba = 0; lba < 2 * 64 * 90; lba += 2) {
		loc.pos = 7 * lba;
		cache_pre(m, lba, 1, true);
		ck_assert_int_eq(za_map_set(m, lba, 1, &loc, NULL, NULL), 0);
		r->kind[lba] = loc.kind;
		r->group[lba] = loc.group;
		r->pos[lba] = loc.pos;
	}
	za_map_pin(m, pg, false);
	d.nr_root = 0;
	ck_assert_int_eq(za_map_snapshot(m, &pd_ops, &d, &snap), 0);
	za_map_snap_end(m, &snap, true, pd_drop, &d);
	/* Nothing pinned any more: every node may leave. */
	za_map_shrink(m, 0, UINT64_MAX);
	ck_assert(!za_map_whole(m));
	ck_assert_uint_lt(za_map_bytes(m), 8192);
	pre_op = cache_pre;
	check_coalesced = false;
	check_all(m, r);
	pre_op = NULL;
	check_coalesced = true;
	za_map_free(m);
	for (size_t i = 0; i < d.nr; i++) {
		free(d.pages[i].e);
		free(d.pages[i].c);
	}
	free(d.pages);
	free(d.root);
	free(r);
}
END_TEST

/*
 * A snapshot after a change in one place: only that leaf and its
 * directory node are written, and the root names every other directory
 * node - clean, its leaves not walked - by the range its page covers
 * (the map loaded back from the pages equals the model).
 */
START_TEST(test_pages_clean_nodes)
{
	struct ref *r = calloc(1, sizeof(*r));
	struct pdrive d = { 0 };
	struct za_map_loc loc = { .kind = ZA_MAP_DATA, .group = 3 };
	struct za_map_snap snap;
	struct za_map_dirty dc;
	struct za_map *m, *m2;
	uint64_t lba;
	unsigned round;

	NBLK = NBLK_MAX;
	rng = 5151;
	ck_assert_int_eq(za_map_new(&m), 0);
	for (lba = 0; lba < NBLK; lba += 2) {
		loc.pos = 3 * lba;
		ck_assert_int_eq(za_map_set(m, lba, 1, &loc, NULL, NULL), 0);
		r->kind[lba] = loc.kind;
		r->group[lba] = loc.group;
		r->pos[lba] = loc.pos;
	}
	ck_assert_int_eq(za_map_snapshot(m, &pd_ops, &d, &snap), 0);
	za_map_snap_end(m, &snap, true, pd_drop, &d);
	za_map_dirty_count(m, &dc);
	ck_assert_uint_gt(dc.nodes, 4);
	for (round = 0; round < 40; round++) {
		/* One block: set over a hole (the leaf's range may grow at
		 * either end), an extent written again, or one cleared. */
		lba = rnd() % NBLK;
		loc.pos = 7 * lba + round;
		if (round % 3 == 2) {
			ck_assert_int_eq(za_map_clear(m, lba, 1, NULL, NULL),
					 0);
			r->kind[lba] = 0;
		} else {
			ck_assert_int_eq(
				za_map_set(m, lba, 1, &loc, NULL, NULL), 0);
			r->kind[lba] = loc.kind;
			r->group[lba] = loc.group;
			r->pos[lba] = loc.pos;
		}
		d.nr_root = 0;
		d.written = 0;
		za_map_dirty_count(m, &dc);
		ck_assert_int_eq(za_map_snapshot(m, &pd_ops, &d, &snap), 0);
		ck_assert_uint_eq(d.written, (uint64_t)dc.leaves + dc.dirs);
		ck_assert_uint_le(d.written, 4);
		ck_assert_uint_eq(d.nr_root, dc.nodes);
		za_map_snap_end(m, &snap, true, pd_drop, &d);
		m2 = pd_load(&d);
		check_all(m2, r);
		za_map_free(m2);
	}
	za_map_free(m);
	for (size_t i = 0; i < d.nr; i++) {
		free(d.pages[i].e);
		free(d.pages[i].c);
	}
	free(d.pages);
	free(d.root);
	free(r);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("map");
	TCase *tc = tcase_create("map");

	tcase_add_loop_test(tc, test_random_against_model, 0,
			    (int)(sizeof(shapes) / sizeof(shapes[0])));
	tcase_add_test(tc, test_sequential_fill_coalesces);
	tcase_add_loop_test(tc, test_pages_against_model, 0,
			    (int)(sizeof(shapes) / sizeof(shapes[0])));
	tcase_add_test(tc, test_pages_load_refused);
	tcase_add_test(tc, test_pages_clean_nodes);
	tcase_add_loop_test(tc, test_cache_against_model, 0,
			    (int)(sizeof(shapes) / sizeof(shapes[0])));
	tcase_add_test(tc, test_cache_fill_refused);
	tcase_add_test(tc, test_cache_seams);
	tcase_add_test(tc, test_cache_first_extent);
	tcase_add_test(tc, test_cache_pin_split);
	suite_add_tcase(s, tc);
	return trun(s);
}
