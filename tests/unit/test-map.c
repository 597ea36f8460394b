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
	w->bad += loc && w->has_prev && w->prev.kind == loc->kind &&
		  w->prev.group == loc->group && w->prev.pos == loc->pos;
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

	ck_assert_int_eq(za_map_walk(m, 0, NBLK, check_piece, &w), 0);
	ck_assert_uint_eq(w.next, NBLK);
	ck_assert_uint_eq(w.pieces, za_map_extents(m));
	for (i = 0; i < 20; i++) {
		a = rnd() % NBLK;
		b = a + 1 + rnd() % (NBLK - a);
		w.next = a;
		w.has_prev = false;
		ck_assert_int_eq(za_map_walk(m, a, b - a, check_piece, &w), 0);
		ck_assert_uint_eq(w.next, b);
	}
	ck_assert_uint_eq(w.bad, 0);
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
			ck_assert_int_eq(
				za_map_set(m, lba, n, &loc, on_dead, NULL), 0);
			for (i = 0; i < n; i++) {
				r->kind[lba + i] = loc.kind;
				r->group[lba + i] = loc.group;
				r->pos[lba + i] = loc.pos + i;
			}
			ck_assert_uint_eq(dead_blocks, overw);
		} else if (what < 8) {
			for (before = 0, i = 0; i < n; i++)
				before += r->kind[lba + i] != 0;
			ck_assert_int_eq(za_map_clear(m, lba, n, on_dead, NULL),
					 0);
			for (i = 0; i < n; i++)
				r->kind[lba + i] = 0;
			ck_assert_uint_eq(dead_blocks, before);
		} else {
			/* Move whatever still maps to the location of lba. */
			int64_t moved, exp = 0;

			if (!r->kind[lba])
				continue;
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
			moved = za_map_move(m, lba, n, &loc, &to);
			ck_assert_int_eq(moved, exp);
		}
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

int main(void)
{
	Suite *s = suite_create("map");
	TCase *tc = tcase_create("map");

	tcase_add_loop_test(tc, test_random_against_model, 0,
			    (int)(sizeof(shapes) / sizeof(shapes[0])));
	tcase_add_test(tc, test_sequential_fill_coalesces);
	suite_add_tcase(s, tc);
	return trun(s);
}
