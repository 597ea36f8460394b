// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test-etab.c - the engine table codec (etab.h): round trips of table
 * shapes through the writer, the part decoder and the reader (empty,
 * groups only, segments of width 1, 12 and 64, columns absent, values at
 * their limits, parts filled to the last byte, many parts), canonical
 * re-encoding, every single-bit flip of a part rejected, every field
 * checked behind a valid CRC, truncated and garbage input, a reader that
 * refuses parts missing, out of order, disagreeing, cut where they need
 * not be or whose totals do not add up, and a writer that refuses what
 * a reader would. What the engine checks against the array (members,
 * zones, widths of a stream) is not tested here.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "byteorder.h"
#include "crc.h"
#include "etab.h"
#include "tap.h"

#define BLK ZA_ETAB_BLOCK_BYTES
#define PAY ZA_ETAB_PAYLOAD_BYTES

static uint64_t rng = 1;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* A table shape: so many groups and segments of that width. */
struct shape {
	const char *name;
	uint32_t groups, segs;
	uint8_t width; /* 0: each segment its own, 1..64 */
	int absent; /* some columns lost, some dead */
	int big; /* ids, counters and fields at their limits */
};

static const struct shape shapes[] = {
	{ "empty", 0, 0, 0, 0, 0 },
	{ "one group", 1, 0, 0, 0, 0 },
	{ "groups only", 100, 0, 0, 0, 0 },
	{ "groups fill a part", ZA_ETAB_MAX_GROUPS, 0, 0, 0, 0 },
	{ "groups spill", ZA_ETAB_MAX_GROUPS + 1, 0, 0, 0, 0 },
	{ "one segment", 0, 1, 1, 0, 0 },
	{ "width 1", 3, 150, 1, 0, 0 },
	{ "width 12", 20, 60, 12, 0, 0 },
	{ "width 64", 5, 10, 64, 0, 0 },
	{ "columns absent", 10, 40, 0, 1, 0 },
	{ "at the limits", 50, 20, 64, 1, 1 },
	{ "many parts", 1000, 300, 0, 1, 0 },
};

#define NR_SHAPES (int)(sizeof(shapes) / sizeof(shapes[0]))

struct table {
	uint64_t ckpt_id, seq, next_seq, next_seg_id, next_group_id;
	uint32_t nr_groups, nr_segs;
	struct za_etab_group *g;
	struct za_etab_seg *s;
};

static void table_free(struct table *t)
{
	free(t->g);
	free(t->s);
}

static void make_seg(struct za_etab_seg *s, uint8_t width, int absent, int big,
		     uint64_t next_group_id)
{
	uint32_t c;

	memset(s, 0, sizeof(*s));
	s->width = width;
	s->flags = big ? ZA_ETAB_SEG_FLAGS : (uint8_t)(rnd() % 4);
	s->grp_idx = big ? 1023 : (uint16_t)(rnd() % 1024);
	s->next_stripe = big ? UINT32_MAX : (uint32_t)rnd();
	s->group_id = big ? next_group_id - 1 : 1 + rnd() % (next_group_id - 1);
	for (c = 0; c < width; c++) {
		struct za_etab_col *col = &s->col[c];

		col->member = (uint16_t)(rnd() % 1000);
		col->hdr_member = rnd() % 4 ? col->member :
					      (uint16_t)(rnd() % 1000);
		col->zone = big ? UINT32_MAX : (uint32_t)rnd();
		col->hdr_zone = rnd() % 4 ? col->zone : (uint32_t)rnd();
		col->upto = rnd() % 3 ? UINT32_MAX : (uint32_t)rnd();
		if (absent && rnd() % 4 == 0) {
			col->member = ZA_ETAB_MEMBER_ABSENT;
			col->zone = 0;
			if (rnd() % 2)
				s->dead_cols |= 1ull << c;
		}
		if (absent && rnd() % 8 == 0) {
			col->hdr_member = ZA_ETAB_MEMBER_ABSENT;
			col->hdr_zone = 0;
		}
	}
	if (big)
		s->dead_cols = width == 64 ? UINT64_MAX : (1ull << width) - 1;
}

/* The records of a shape, ids increasing with gaps. */
static void make_table(const struct shape *sh, struct table *t)
{
	uint64_t id;
	uint32_t i;

	memset(t, 0, sizeof(*t));
	t->ckpt_id = sh->big ? UINT64_MAX : 3 + rnd() % 100;
	t->seq = sh->big ? UINT64_MAX - 1 : rnd() % 100000;
	t->next_seq = sh->big ? UINT64_MAX : t->seq + 1 + rnd() % 50;
	t->nr_groups = sh->groups;
	t->nr_segs = sh->segs;
	t->g = calloc(sh->groups + 1, sizeof(*t->g));
	t->s = calloc(sh->segs + 1, sizeof(*t->s));
	ck_assert_ptr_nonnull(t->g);
	ck_assert_ptr_nonnull(t->s);
	id = sh->big ? UINT64_MAX - 4 * (uint64_t)sh->groups - 1 : 0;
	for (i = 0; i < sh->groups; i++) {
		struct za_etab_group *g = &t->g[i];

		id += 1 + rnd() % 3;
		g->id = id;
		g->stream = (uint8_t)(sh->big ? 3 : rnd() % 4);
		g->w = (uint16_t)(sh->big ? 1024 : 1 + rnd() % 1024);
		g->nr_stripes = sh->big ? UINT32_MAX :
					  (uint32_t)(1 + rnd() % 100000);
		g->next_pos =
			sh->big ? (uint64_t)g->w * g->nr_stripes :
				  rnd() % ((uint64_t)g->w * g->nr_stripes + 1);
	}
	t->next_group_id = sh->big    ? UINT64_MAX :
			   sh->groups ? id + 1 + rnd() % 3 :
					2 + rnd() % 50;
	id = sh->big ? UINT64_MAX - 4 * (uint64_t)sh->segs - 1 : 0;
	for (i = 0; i < sh->segs; i++) {
		uint8_t width = sh->width ? sh->width :
					    (uint8_t)(1 + rnd() % 64);

		make_seg(&t->s[i], width, sh->absent, sh->big,
			 t->next_group_id);
		id += 1 + rnd() % 3;
		t->s[i].id = id;
	}
	t->next_seg_id = sh->big ? UINT64_MAX : id + 1 + rnd() % 3;
}

/* Parts a canonical packing takes, worked out here independently. */
static uint32_t expected_parts(const struct table *t)
{
	uint32_t parts = 1, used = 0, i;

	for (i = 0; i < t->nr_groups + t->nr_segs; i++) {
		uint32_t sz =
			i < t->nr_groups ?
				ZA_ETAB_GROUP_BYTES :
				ZA_ETAB_SEG_BYTES +
					ZA_ETAB_COL_BYTES *
						t->s[i - t->nr_groups].width;

		if (used + sz > PAY) {
			parts++;
			used = 0;
		}
		used += sz;
	}
	return parts;
}

/* Write @t through the writer; the blocks are the caller's to free. */
static uint8_t *write_table(const struct table *t, uint32_t *parts)
{
	struct za_etab_writer w;
	uint32_t i;

	ck_assert_int_eq(za_etab_writer_init(&w, t->ckpt_id, t->seq,
					     t->next_seq, t->next_seg_id,
					     t->next_group_id),
			 0);
	for (i = 0; i < t->nr_groups; i++)
		ck_assert_int_eq(za_etab_writer_add_group(&w, &t->g[i]), 0);
	for (i = 0; i < t->nr_segs; i++)
		ck_assert_int_eq(za_etab_writer_add_seg(&w, &t->s[i]), 0);
	ck_assert_int_eq(za_etab_writer_finish(&w), 0);
	ck_assert_uint_eq(w.h.nr_groups, t->nr_groups);
	ck_assert_uint_eq(w.h.nr_segs, t->nr_segs);
	*parts = w.nr_parts;
	return w.blocks;
}

static struct za_etab_part *new_part(void)
{
	struct za_etab_part *p = malloc(sizeof(*p));

	ck_assert_ptr_nonnull(p);
	return p;
}

static void fix_crc(uint8_t *blk)
{
	static const uint8_t zero[4];
	uint32_t c = za_crc32c(blk, 12);

	c = za_crc32c_update(c, zero, sizeof(zero));
	za_put_le32(blk + 12, za_crc32c_update(c, blk + 16, BLK - 16));
}

static void assert_group_eq(const struct za_etab_group *a,
			    const struct za_etab_group *b)
{
	ck_assert_uint_eq(a->id, b->id);
	ck_assert_uint_eq(a->next_pos, b->next_pos);
	ck_assert_uint_eq(a->nr_stripes, b->nr_stripes);
	ck_assert_uint_eq(a->w, b->w);
	ck_assert_uint_eq(a->stream, b->stream);
}

static void assert_seg_eq(const struct za_etab_seg *a,
			  const struct za_etab_seg *b)
{
	uint32_t c;

	ck_assert_uint_eq(a->id, b->id);
	ck_assert_uint_eq(a->group_id, b->group_id);
	ck_assert_uint_eq(a->dead_cols, b->dead_cols);
	ck_assert_uint_eq(a->next_stripe, b->next_stripe);
	ck_assert_uint_eq(a->grp_idx, b->grp_idx);
	ck_assert_uint_eq(a->width, b->width);
	ck_assert_uint_eq(a->flags, b->flags);
	for (c = 0; c < a->width; c++) {
		ck_assert_uint_eq(a->col[c].member, b->col[c].member);
		ck_assert_uint_eq(a->col[c].hdr_member, b->col[c].hdr_member);
		ck_assert_uint_eq(a->col[c].zone, b->col[c].zone);
		ck_assert_uint_eq(a->col[c].hdr_zone, b->col[c].hdr_zone);
		ck_assert_uint_eq(a->col[c].upto, b->col[c].upto);
	}
}

START_TEST(test_round_trip)
{
	const struct shape *sh = &shapes[_i];
	struct za_etab_part *p = new_part();
	struct za_etab_writer w2;
	struct za_etab_reader rd;
	struct table t;
	uint8_t *blocks, again[BLK];
	uint32_t parts, i, k, gi = 0, si = 0;

	rng = 100 + (uint64_t)_i;
	make_table(sh, &t);
	blocks = write_table(&t, &parts);
	ck_assert_uint_eq(parts, expected_parts(&t));
	/* The same records written again, from what was decoded. */
	ck_assert_int_eq(za_etab_writer_init(&w2, t.ckpt_id, t.seq, t.next_seq,
					     t.next_seg_id, t.next_group_id),
			 0);
	za_etab_reader_init(&rd);
	for (i = 0; i < parts; i++) {
		const uint8_t *b = blocks + (size_t)i * BLK;
		uint32_t used = 0;

		ck_assert_int_eq(za_etab_block_decode(b, BLK, p), 0);
		ck_assert_uint_eq(p->h.ckpt_id, t.ckpt_id);
		ck_assert_uint_eq(p->h.seq, t.seq);
		ck_assert_uint_eq(p->h.next_seq, t.next_seq);
		ck_assert_uint_eq(p->h.next_seg_id, t.next_seg_id);
		ck_assert_uint_eq(p->h.next_group_id, t.next_group_id);
		ck_assert_uint_eq(p->h.nr_groups, t.nr_groups);
		ck_assert_uint_eq(p->h.nr_segs, t.nr_segs);
		ck_assert_uint_eq(p->h.part, i);
		ck_assert_uint_eq(p->h.nr_parts, parts);
		ck_assert_uint_eq(p->h.nr_recs, p->nr_groups + p->nr_segs);
		for (k = 0; k < p->nr_groups; k++, gi++) {
			assert_group_eq(&p->groups[k], &t.g[gi]);
			ck_assert_int_eq(
				za_etab_writer_add_group(&w2, &p->groups[k]),
				0);
			used += ZA_ETAB_GROUP_BYTES;
		}
		for (k = 0; k < p->nr_segs; k++, si++) {
			assert_seg_eq(&p->segs[k], &t.s[si]);
			ck_assert_int_eq(
				za_etab_writer_add_seg(&w2, &p->segs[k]), 0);
			used += ZA_ETAB_SEG_BYTES +
				ZA_ETAB_COL_BYTES * p->segs[k].width;
		}
		ck_assert_uint_eq(p->h.used_bytes, used);
		/* Not empty, unless the table is. */
		if (t.nr_groups + t.nr_segs)
			ck_assert_uint_ge(p->h.nr_recs, 1);
		ck_assert_int_eq(za_etab_reader_add(&rd, p), 0);
		/* Canonical: what decodes encodes back to the same bytes. */
		ck_assert_int_eq(za_etab_block_encode(p, again), 0);
		ck_assert_mem_eq(again, b, BLK);
		if (i + 1 < parts)
			ck_assert_int_eq(za_etab_reader_done(&rd), -EBADMSG);
	}
	ck_assert_uint_eq(gi, t.nr_groups);
	ck_assert_uint_eq(si, t.nr_segs);
	ck_assert_int_eq(za_etab_reader_done(&rd), 0);
	ck_assert_int_eq(za_etab_writer_finish(&w2), 0);
	ck_assert_uint_eq(w2.nr_parts, parts);
	ck_assert_mem_eq(w2.blocks, blocks, (size_t)parts * BLK);
	free(w2.blocks);
	free(blocks);
	free(p);
	table_free(&t);
}
END_TEST

/* Every single-bit flip of the first and the last part is refused. */
START_TEST(test_every_bit_flip_rejected)
{
	const struct shape *sh = &shapes[_i];
	struct za_etab_part *p = new_part();
	struct table t;
	uint8_t *blocks;
	uint32_t parts, which;
	size_t bit;

	rng = 200 + (uint64_t)_i;
	make_table(sh, &t);
	blocks = write_table(&t, &parts);
	for (which = 0; which < 2; which++) {
		uint8_t *b = blocks + (size_t)(which ? parts - 1 : 0) * BLK;

		for (bit = 0; bit < BLK * 8; bit++) {
			int ret;

			b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			ret = za_etab_block_decode(b, BLK, p);
			ck_assert_msg(ret == -EBADMSG || ret == -ENOENT ||
					      ret == -EPROTONOSUPPORT,
				      "%s: part %u bit %zu: decode gave %d",
				      sh->name, which, bit, ret);
			b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		}
		ck_assert_int_eq(za_etab_block_decode(b, BLK, p), 0);
	}
	free(blocks);
	free(p);
	table_free(&t);
}
END_TEST

/*
 * The fixture of the field tests, one part: groups 3 and 5, segments 2
 * (width 3) and 7 (width 2), counters at 10:
 *   96 group 3, 120 group 5, 144 segment 2 (columns at 184, 200, 216),
 *   232 segment 7 (columns at 272, 288), used_bytes 208, tail from 304.
 */
static uint8_t *fixture(void)
{
	struct za_etab_group g[2] = {
		{ .id = 3,
		  .next_pos = 50,
		  .nr_stripes = 100,
		  .w = 4,
		  .stream = 1 },
		{ .id = 5,
		  .next_pos = 20,
		  .nr_stripes = 10,
		  .w = 2,
		  .stream = 2 },
	};
	struct za_etab_seg s[2];
	struct za_etab_writer w;
	uint32_t c;

	memset(s, 0, sizeof(s));
	s[0] = (struct za_etab_seg){ .id = 2,
				     .group_id = 3,
				     .dead_cols = 0x2,
				     .next_stripe = 7,
				     .grp_idx = 1,
				     .width = 3,
				     .flags = ZA_ETAB_SEG_SEALED };
	s[1] = (struct za_etab_seg){ .id = 7,
				     .group_id = 5,
				     .next_stripe = 9,
				     .grp_idx = 0,
				     .width = 2 };
	for (c = 0; c < 3; c++)
		s[0].col[c] = (struct za_etab_col){ .member = (uint16_t)c,
						    .hdr_member = (uint16_t)c,
						    .zone = 11 + c,
						    .hdr_zone = 11 + c,
						    .upto = 5 };
	for (c = 0; c < 2; c++)
		s[1].col[c] = (struct za_etab_col){ .member = (uint16_t)(4 + c),
						    .hdr_member = (uint16_t)c,
						    .zone = 21 + c,
						    .hdr_zone = 31 + c,
						    .upto = UINT32_MAX };
	ck_assert_int_eq(za_etab_writer_init(&w, 4, 100, 110, 10, 10), 0);
	ck_assert_int_eq(za_etab_writer_add_group(&w, &g[0]), 0);
	ck_assert_int_eq(za_etab_writer_add_group(&w, &g[1]), 0);
	ck_assert_int_eq(za_etab_writer_add_seg(&w, &s[0]), 0);
	ck_assert_int_eq(za_etab_writer_add_seg(&w, &s[1]), 0);
	ck_assert_int_eq(za_etab_writer_finish(&w), 0);
	ck_assert_uint_eq(w.nr_parts, 1);
	ck_assert_uint_eq(za_get_le32(w.blocks + 84), 208);
	return w.blocks;
}

/* A little-endian field of @len bytes at @off: one change of a part. */
struct poke {
	const char *what;
	unsigned off, len;
	uint64_t val;
};

static void apply(uint8_t *b, const struct poke *k)
{
	if (k->len == 8)
		za_put_le64(b + k->off, k->val);
	else if (k->len == 4)
		za_put_le32(b + k->off, (uint32_t)k->val);
	else if (k->len == 2)
		za_put_le16(b + k->off, (uint16_t)k->val);
	else
		b[k->off] = (uint8_t)k->val;
}

/* Each case changes one field of the fixture behind a valid CRC. */
static const struct poke refused[] = {
	/* header */
	{ "ckpt_id 0", 16, 8, 0 },
	{ "next_seq == seq", 32, 8, 100 },
	{ "next_seq < seq", 32, 8, 99 },
	{ "next_seg_id 0", 40, 8, 0 },
	{ "next_seg_id not above a segment id", 40, 8, 7 },
	{ "next_group_id 0", 48, 8, 0 },
	{ "next_group_id not above a group id", 48, 8, 5 },
	{ "nr_groups not the one part's", 56, 8, 1 },
	{ "nr_groups more than the one part's", 56, 8, 3 },
	{ "nr_segs not the one part's", 64, 8, 1 },
	{ "nr_segs more than the one part's", 64, 8, 3 },
	{ "part == nr_parts", 72, 4, 1 },
	{ "part past nr_parts", 72, 4, 7 },
	{ "nr_parts 0", 76, 4, 0 },
	{ "more parts than records", 76, 4, 5 },
	{ "nr_recs 0", 80, 4, 0 },
	{ "nr_recs one short", 80, 4, 3 },
	{ "nr_recs one more", 80, 4, 5 },
	{ "used_bytes 0", 84, 4, 0 },
	{ "used_bytes cuts a record", 84, 4, 207 },
	{ "used_bytes one past the records", 84, 4, 209 },
	{ "used_bytes a record's worth of zeroes more", 84, 4, 232 },
	{ "used_bytes past the payload", 84, 4, 4001 },
	{ "used_bytes huge", 84, 4, UINT32_MAX },
	{ "reserved 88", 88, 1, 1 },
	{ "reserved 95", 95, 1, 0x80 },
	/* group record */
	{ "kind 0", 96, 1, 0 },
	{ "kind 3", 96, 1, 3 },
	{ "a group as a segment", 96, 1, ZA_ETAB_SEGMENT },
	{ "stream 4", 97, 1, 4 },
	{ "w 0", 98, 2, 0 },
	{ "w 1025", 98, 2, 1025 },
	{ "nr_stripes 0", 100, 4, 0 },
	{ "group id 0", 104, 8, 0 },
	{ "group id == next_group_id", 120 + 8, 8, 10 },
	{ "group ids equal", 120 + 8, 8, 3 },
	{ "group ids decreasing", 120 + 8, 8, 2 },
	{ "next_pos past w x nr_stripes", 112, 8, 401 },
	/* segment record */
	{ "segment kind 0", 144, 1, 0 },
	{ "segment kind 3", 144, 1, 3 },
	{ "a segment as a group", 144, 1, ZA_ETAB_GROUP },
	{ "width 0", 145, 1, 0 },
	{ "width 65", 145, 1, 65 },
	{ "width runs into the next record", 145, 1, 4 },
	{ "width runs past used_bytes", 232 + 1, 1, 3 },
	{ "flag 0x04", 146, 1, 0x04 },
	{ "flag 0x80", 146, 1, 0x80 },
	{ "reserved byte 3", 147, 1, 1 },
	{ "grp_idx 1024", 148, 2, 1024 },
	{ "reserved bytes 6-7", 150, 2, 0x100 },
	{ "reserved bytes 12-15", 156, 4, 0x1000000 },
	{ "segment id 0", 160, 8, 0 },
	{ "segment id == next_seg_id", 232 + 16, 8, 10 },
	{ "segment ids equal", 232 + 16, 8, 2 },
	{ "segment ids decreasing", 232 + 16, 8, 1 },
	{ "group_id 0", 168, 8, 0 },
	{ "group_id == next_group_id", 168, 8, 10 },
	{ "group_id past next_group_id", 168, 8, UINT64_MAX },
	{ "a dead column at width", 176, 8, 0x8 },
	{ "a dead column at 63", 176, 8, 1ull << 63 },
	{ "absent member with a zone", 184, 2, ZA_ETAB_MEMBER_ABSENT },
	{ "absent header member with a zone", 232 + 40 + 16 + 2, 2,
	  ZA_ETAB_MEMBER_ABSENT },
	/* the unused tail */
	{ "tail first byte", 304, 1, ZA_ETAB_GROUP },
	{ "tail last byte", BLK - 1, 1, 1 },
};

/* ...and these, to show that each refusal above is for its own reason. */
static const struct poke accepted[] = {
	{ "next_pos == w x nr_stripes", 112, 8, 400 },
	{ "grp_idx 1023", 148, 2, 1023 },
	{ "both flags", 146, 1, ZA_ETAB_SEG_FLAGS },
	{ "every dead column", 176, 8, 0x7 },
	{ "next_stripe anything", 152, 4, UINT32_MAX },
	{ "stream 3", 97, 1, 3 },
	{ "w 1024", 98, 2, 1024 },
	{ "next_seg_id above the ids", 40, 8, 8 },
	{ "next_group_id above the ids", 48, 8, 6 },
	{ "seq anything below next_seq", 24, 8, 0 },
};

START_TEST(test_fields_checked_behind_crc)
{
	struct za_etab_part *p = new_part();
	uint8_t *b = fixture(), saved[BLK];
	size_t off;
	unsigned i;

	ck_assert_int_eq(za_etab_block_decode(b, BLK, p), 0);
	memcpy(saved, b, BLK);
	for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		apply(b, &refused[i]);
		fix_crc(b);
		ck_assert_msg(za_etab_block_decode(b, BLK, p) == -EBADMSG,
			      "%s was accepted", refused[i].what);
		memcpy(b, saved, BLK);
	}
	for (i = 0; i < sizeof(accepted) / sizeof(accepted[0]); i++) {
		apply(b, &accepted[i]);
		fix_crc(b);
		ck_assert_msg(za_etab_block_decode(b, BLK, p) == 0,
			      "%s was refused", accepted[i].what);
		memcpy(b, saved, BLK);
	}
	/* An absent member is fine with zone 0, the header's too. */
	za_put_le16(b + 184, ZA_ETAB_MEMBER_ABSENT);
	za_put_le32(b + 184 + 4, 0);
	za_put_le16(b + 272 + 2, ZA_ETAB_MEMBER_ABSENT);
	za_put_le32(b + 272 + 8, 0);
	fix_crc(b);
	ck_assert_int_eq(za_etab_block_decode(b, BLK, p), 0);
	ck_assert_uint_eq(p->segs[0].col[0].member, ZA_ETAB_MEMBER_ABSENT);
	ck_assert_uint_eq(p->segs[1].col[0].hdr_member, ZA_ETAB_MEMBER_ABSENT);
	memcpy(b, saved, BLK);
	/* Every reserved byte and every byte of the tail. */
	for (off = 88; off < BLK; off++) {
		size_t s0 = off - 144, s1 = off - 232;
		int rsv = off < 96 || off >= 304 ||
			  (off >= 144 && off < 184 &&
			   (s0 == 3 || s0 == 6 || s0 == 7 ||
			    (s0 >= 12 && s0 < 16))) ||
			  (off >= 232 && off < 272 &&
			   (s1 == 3 || s1 == 6 || s1 == 7 ||
			    (s1 >= 12 && s1 < 16)));

		if (!rsv)
			continue;
		b[off] = 0x20;
		fix_crc(b);
		ck_assert_msg(za_etab_block_decode(b, BLK, p) == -EBADMSG,
			      "byte %zu is reserved but was accepted", off);
		memcpy(b, saved, BLK);
	}
	/* The magic, the version, the length and the CRC. */
	b[3] ^= 1;
	ck_assert_int_eq(za_etab_block_decode(b, BLK, p), -ENOENT);
	memcpy(b, saved, BLK);
	za_put_le32(b + 8, 2);
	ck_assert_int_eq(za_etab_block_decode(b, BLK, p), -EPROTONOSUPPORT);
	za_put_le32(b + 8, 0);
	fix_crc(b);
	ck_assert_int_eq(za_etab_block_decode(b, BLK, p), -EPROTONOSUPPORT);
	memcpy(b, saved, BLK);
	ck_assert_int_eq(za_etab_block_decode(b, BLK - 1, p), -EBADMSG);
	b[12] ^= 0x10;
	ck_assert_int_eq(za_etab_block_decode(b, BLK, p), -EBADMSG);
	memcpy(b, saved, BLK);
	b[200] ^= 0x10;
	ck_assert_int_eq(za_etab_block_decode(b, BLK, p), -EBADMSG);
	free(b);
	free(p);
}
END_TEST

/*
 * What the header's totals say about one part of several: no more
 * records than the totals, ids below the counters, no more parts than
 * records, no empty part.
 */
START_TEST(test_totals_checked_in_a_part)
{
	static const struct poke two_parts = { "nr_parts 2", 76, 4, 2 };
	static const struct {
		struct poke k;
		int want;
	} cases[] = {
		{ { "the part's groups are all there are", 56, 8, 2 }, 0 },
		{ { "more groups in the part than in all", 56, 8, 1 },
		  -EBADMSG },
		{ { "more segments in the part than in all", 64, 8, 1 },
		  -EBADMSG },
		{ { "nr_groups below next_group_id", 56, 8, 9 }, 0 },
		{ { "nr_groups == next_group_id", 56, 8, 10 }, -EBADMSG },
		{ { "nr_groups huge", 56, 8, UINT64_MAX }, -EBADMSG },
		{ { "nr_segs below next_seg_id", 64, 8, 9 }, 0 },
		{ { "nr_segs == next_seg_id", 64, 8, 10 }, -EBADMSG },
		{ { "as many parts as records", 76, 4, 4 }, 0 },
		{ { "more parts than records", 76, 4, 5 }, -EBADMSG },
		{ { "the last of 2", 72, 4, 1 }, 0 },
	};
	struct za_etab_part *p = new_part();
	struct za_etab_writer w;
	uint8_t *b = fixture(), saved[BLK];
	unsigned i;

	memcpy(saved, b, BLK);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		apply(b, &two_parts);
		apply(b, &cases[i].k);
		fix_crc(b);
		ck_assert_msg(za_etab_block_decode(b, BLK, p) == cases[i].want,
			      "%s: not %d", cases[i].k.what, cases[i].want);
		memcpy(b, saved, BLK);
	}
	free(b);

	/* The empty table: one part, no records. */
	ck_assert_int_eq(za_etab_writer_init(&w, 1, 0, 1, 1, 3), 0);
	ck_assert_int_eq(za_etab_writer_finish(&w), 0);
	ck_assert_uint_eq(w.nr_parts, 1);
	b = w.blocks;
	ck_assert_int_eq(za_etab_block_decode(b, BLK, p), 0);
	ck_assert_uint_eq(p->h.nr_recs, 0);
	ck_assert_uint_eq(p->h.used_bytes, 0);
	/* An empty part of two is never written. */
	za_put_le64(b + 56, 2);
	za_put_le32(b + 76, 2);
	fix_crc(b);
	ck_assert_int_eq(za_etab_block_decode(b, BLK, p), -EBADMSG);
	/* Nor one part with none of the records it announces. */
	za_put_le32(b + 76, 1);
	fix_crc(b);
	ck_assert_int_eq(za_etab_block_decode(b, BLK, p), -EBADMSG);
	free(b);
	free(p);
}
END_TEST

/* A group after a segment, each fine alone, is refused by its place. */
START_TEST(test_groups_before_segments)
{
	struct za_etab_part *p = new_part();
	uint8_t *b = fixture(), g[24], s[88];

	memcpy(g, b + 120, sizeof(g)); /* group 5 */
	memcpy(s, b + 144, sizeof(s)); /* segment 2, width 3 */
	memset(b + 96, 0, BLK - 96);
	za_put_le64(b + 56, 1);
	za_put_le64(b + 64, 1);
	za_put_le32(b + 80, 2);
	za_put_le32(b + 84, sizeof(g) + sizeof(s));
	memcpy(b + 96, g, sizeof(g));
	memcpy(b + 96 + sizeof(g), s, sizeof(s));
	fix_crc(b);
	ck_assert_int_eq(za_etab_block_decode(b, BLK, p), 0);
	memcpy(b + 96, s, sizeof(s));
	memcpy(b + 96 + sizeof(s), g, sizeof(g));
	fix_crc(b);
	ck_assert_int_eq(za_etab_block_decode(b, BLK, p), -EBADMSG);
	free(b);
	free(p);
}
END_TEST

START_TEST(test_truncated_and_garbage)
{
	struct za_etab_part *p = new_part();
	uint8_t *b = fixture(), g[BLK];
	size_t len;
	unsigned i, k;

	for (len = 0; len < BLK; len += len < 16 ? 1 : 97)
		ck_assert_int_eq(za_etab_block_decode(b, len, p),
				 len < 8 ? -ENOENT : -EBADMSG);
	/* The version is looked at before the length. */
	za_put_le32(b + 8, 7);
	ck_assert_int_eq(za_etab_block_decode(b, 100, p), -EPROTONOSUPPORT);
	za_put_le32(b + 8, 1);
	ck_assert_int_eq(za_etab_block_decode(b, BLK + 100, p), 0);
	for (i = 0; i < 200; i++) {
		for (k = 0; k < BLK; k += 8)
			za_put_le64(g + k, rnd());
		ck_assert_int_eq(za_etab_block_decode(g, BLK, p), -ENOENT);
		/* With the magic, the version and a valid CRC: still refused
		 * (random fields are out of range). */
		memcpy(g, b, 12);
		fix_crc(g);
		ck_assert_int_eq(za_etab_block_decode(g, BLK, p), -EBADMSG);
	}
	memset(g, 0, BLK);
	ck_assert_int_eq(za_etab_block_decode(g, BLK, p), -ENOENT);
	free(b);
	free(p);
}
END_TEST

/* Parts filled to the last byte: the next record starts a part, and the
 * reader takes that cut. */
START_TEST(test_exact_fit)
{
	static const uint8_t widths[] = { 64, 64, 64, 48, 1 };
	struct za_etab_part *p = new_part();
	struct za_etab_writer w;
	struct za_etab_reader rd;
	struct za_etab_seg s;
	uint32_t i;

	rng = 600;
	ck_assert_uint_eq(4 * 1064 - 16 * 16, PAY); /* 3 x 64 + 48 */
	ck_assert_int_eq(za_etab_writer_init(&w, 1, 5, 6, 100, 2), 0);
	for (i = 0; i < sizeof(widths); i++) {
		make_seg(&s, widths[i], 1, 0, 2);
		s.id = 1 + i;
		ck_assert_int_eq(za_etab_writer_add_seg(&w, &s), 0);
	}
	ck_assert_int_eq(za_etab_writer_finish(&w), 0);
	ck_assert_uint_eq(w.nr_parts, 2);
	za_etab_reader_init(&rd);
	ck_assert_int_eq(za_etab_block_decode(w.blocks, BLK, p), 0);
	ck_assert_uint_eq(p->h.used_bytes, PAY);
	ck_assert_uint_eq(p->nr_segs, 4);
	ck_assert_int_eq(za_etab_reader_add(&rd, p), 0);
	ck_assert_int_eq(za_etab_block_decode(w.blocks + BLK, BLK, p), 0);
	ck_assert_uint_eq(p->nr_segs, 1);
	ck_assert_int_eq(za_etab_reader_add(&rd, p), 0);
	ck_assert_int_eq(za_etab_reader_done(&rd), 0);
	free(w.blocks);

	/* ZA_ETAB_MAX_GROUPS groups fill a part but for 16 bytes. */
	ck_assert_int_eq(za_etab_writer_init(&w, 1, 5, 6, 100, 1000), 0);
	for (i = 0; i < ZA_ETAB_MAX_GROUPS; i++) {
		struct za_etab_group g = {
			.id = 1 + i, .nr_stripes = 1, .w = 1, .stream = 0
		};

		ck_assert_int_eq(za_etab_writer_add_group(&w, &g), 0);
	}
	/* A segment of width 1 (56 bytes) does not fit in the 16 left. */
	make_seg(&s, 1, 0, 0, 1000);
	s.id = 1;
	ck_assert_int_eq(za_etab_writer_add_seg(&w, &s), 0);
	ck_assert_int_eq(za_etab_writer_finish(&w), 0);
	ck_assert_uint_eq(w.nr_parts, 2);
	ck_assert_int_eq(za_etab_block_decode(w.blocks, BLK, p), 0);
	ck_assert_uint_eq(p->h.used_bytes, PAY - 16);
	free(w.blocks);
	free(p);
}
END_TEST

/* Decode part @i of @blocks and give it to @rd: the reader's answer. */
static int add_part(struct za_etab_reader *rd, const uint8_t *blocks,
		    uint32_t i)
{
	struct za_etab_part *p = new_part();
	int ret;

	ck_assert_int_eq(za_etab_block_decode(blocks + (size_t)i * BLK, BLK, p),
			 0);
	ret = za_etab_reader_add(rd, p);
	free(p);
	return ret;
}

/*
 * A table of 3 parts for the reader: 166 groups; 134 groups and 3
 * segments of width 12; 17 segments.
 */
static uint8_t *reader_table(struct table *t)
{
	static const struct shape sh = { "reader", 300, 20, 12, 0, 0 };
	uint8_t *blocks;
	uint32_t parts;

	rng = 700;
	make_table(&sh, t);
	t->seq = 100;
	t->next_seq = 110;
	blocks = write_table(t, &parts);
	ck_assert_uint_eq(parts, 3);
	return blocks;
}

START_TEST(test_reader_refuses)
{
	/* Part 1's header disagreeing with part 0's, fine alone. */
	static const struct poke disagree[] = {
		{ "ckpt_id", 16, 8, 0 },       { "seq", 24, 8, 101 },
		{ "next_seq", 32, 8, 111 },    { "next_seg_id", 40, 8, 0 },
		{ "next_group_id", 48, 8, 0 }, { "nr_groups", 56, 8, 0 },
		{ "nr_segs", 64, 8, 0 },       { "nr_parts", 76, 4, 4 },
	};
	struct za_etab_reader rd;
	struct table t;
	uint8_t *a = reader_table(&t), *b;
	unsigned i;

	b = malloc(3 * BLK);
	ck_assert_ptr_nonnull(b);
	/* All of it, in order. */
	za_etab_reader_init(&rd);
	for (i = 0; i < 3; i++)
		ck_assert_int_eq(add_part(&rd, a, i), 0);
	ck_assert_int_eq(za_etab_reader_done(&rd), 0);
	/* Nothing at all is not a table. */
	za_etab_reader_init(&rd);
	ck_assert_int_eq(za_etab_reader_done(&rd), -EBADMSG);
	/* A missing part: the last, or one in the middle. */
	za_etab_reader_init(&rd);
	ck_assert_int_eq(add_part(&rd, a, 0), 0);
	ck_assert_int_eq(add_part(&rd, a, 1), 0);
	ck_assert_int_eq(za_etab_reader_done(&rd), -EBADMSG);
	za_etab_reader_init(&rd);
	ck_assert_int_eq(add_part(&rd, a, 0), 0);
	ck_assert_int_eq(add_part(&rd, a, 2), -EBADMSG);
	/* Out of order, repeated. */
	za_etab_reader_init(&rd);
	ck_assert_int_eq(add_part(&rd, a, 1), -EBADMSG);
	ck_assert_int_eq(add_part(&rd, a, 0), 0);
	ck_assert_int_eq(add_part(&rd, a, 0), -EBADMSG);
	ck_assert_int_eq(add_part(&rd, a, 2), -EBADMSG);
	ck_assert_int_eq(add_part(&rd, a, 1), 0);
	ck_assert_int_eq(add_part(&rd, a, 1), -EBADMSG);
	ck_assert_int_eq(add_part(&rd, a, 2), 0);
	ck_assert_int_eq(za_etab_reader_done(&rd), 0);

	/* Disagreeing headers. */
	for (i = 0; i < sizeof(disagree) / sizeof(disagree[0]); i++) {
		struct poke k = disagree[i];
		uint8_t *p1 = b + BLK;

		memcpy(b, a, 3 * BLK);
		if (!k.val) /* one more than part 0 says */
			k.val = (k.len == 8 ? za_get_le64(p1 + k.off) :
					      za_get_le32(p1 + k.off)) +
				1;
		apply(p1, &k);
		fix_crc(p1);
		za_etab_reader_init(&rd);
		ck_assert_int_eq(add_part(&rd, b, 0), 0);
		ck_assert_msg(add_part(&rd, b, 1) == -EBADMSG,
			      "part 1 with another %s was taken", k.what);
	}
	free(b);
	free(a);
	table_free(&t);
}
END_TEST

/* Encode @p into part @i of @blocks (it must be valid alone). */
static void put_part(uint8_t *blocks, uint32_t i, const struct za_etab_part *p)
{
	ck_assert_int_eq(za_etab_block_encode(p, blocks + (size_t)i * BLK), 0);
}

static void get_part(const uint8_t *blocks, uint32_t i, struct za_etab_part *p)
{
	ck_assert_int_eq(za_etab_block_decode(blocks + (size_t)i * BLK, BLK, p),
			 0);
}

START_TEST(test_reader_refuses_a_cut_that_is_not_canonical)
{
	struct za_etab_part *p0 = new_part(), *p1 = new_part();
	struct za_etab_reader rd;
	struct table t;
	uint8_t *a = reader_table(&t);
	uint32_t i;

	/* Part 0's last group moved to the start of part 1: it fitted. */
	get_part(a, 0, p0);
	get_part(a, 1, p1);
	ck_assert_uint_eq(p1->h.used_bytes + ZA_ETAB_GROUP_BYTES <= PAY, 1);
	for (i = p1->nr_groups; i > 0; i--)
		p1->groups[i] = p1->groups[i - 1];
	p1->groups[0] = p0->groups[--p0->nr_groups];
	p1->nr_groups++;
	p0->h.nr_recs--;
	p0->h.used_bytes -= ZA_ETAB_GROUP_BYTES;
	p1->h.nr_recs++;
	p1->h.used_bytes += ZA_ETAB_GROUP_BYTES;
	put_part(a, 0, p0);
	put_part(a, 1, p1);
	za_etab_reader_init(&rd);
	ck_assert_int_eq(add_part(&rd, a, 0), 0);
	ck_assert_int_eq(add_part(&rd, a, 1), -EBADMSG);
	free(a);
	table_free(&t);

	/* Part 1's last segment moved to part 2, which has room for it once
	 * its own last one is dropped (and the totals follow). */
	a = reader_table(&t);
	get_part(a, 1, p0);
	get_part(a, 2, p1);
	ck_assert_uint_eq(p0->nr_segs, 3);
	p1->nr_segs--;
	for (i = p1->nr_segs; i > 0; i--)
		p1->segs[i] = p1->segs[i - 1];
	p1->segs[0] = p0->segs[--p0->nr_segs];
	p1->nr_segs++;
	p0->h.nr_recs--;
	p0->h.used_bytes -= ZA_ETAB_SEG_BYTES + 12 * ZA_ETAB_COL_BYTES;
	for (i = 0; i < 3; i++) {
		struct za_etab_part *p = i == 1 ? p0 : i == 2 ? p1 : NULL;
		struct za_etab_part *q = new_part();

		if (!p) {
			get_part(a, 0, q);
			p = q;
		}
		p->h.nr_segs--;
		put_part(a, i, p);
		free(q);
	}
	za_etab_reader_init(&rd);
	ck_assert_int_eq(add_part(&rd, a, 0), 0);
	ck_assert_int_eq(add_part(&rd, a, 1), 0);
	ck_assert_int_eq(add_part(&rd, a, 2), -EBADMSG);
	free(a);
	table_free(&t);
	free(p0);
	free(p1);
}
END_TEST

START_TEST(test_reader_refuses_totals_and_ids)
{
	struct za_etab_part *p = new_part();
	struct za_etab_reader rd;
	struct table t;
	uint8_t *a = reader_table(&t), saved[3 * BLK];
	uint32_t i;
	uint64_t last;

	memcpy(saved, a, sizeof(saved));
	/* One group more than there are, said by every part. */
	for (i = 0; i < 3; i++) {
		za_put_le64(a + i * BLK + 56, t.nr_groups + 1);
		fix_crc(a + i * BLK);
	}
	za_etab_reader_init(&rd);
	for (i = 0; i < 3; i++)
		ck_assert_int_eq(add_part(&rd, a, i), 0);
	ck_assert_int_eq(za_etab_reader_done(&rd), -EBADMSG);
	/* One segment more. */
	memcpy(a, saved, sizeof(saved));
	for (i = 0; i < 3; i++) {
		za_put_le64(a + i * BLK + 64, t.nr_segs + 1);
		fix_crc(a + i * BLK);
	}
	za_etab_reader_init(&rd);
	for (i = 0; i < 3; i++)
		ck_assert_int_eq(add_part(&rd, a, i), 0);
	ck_assert_int_eq(za_etab_reader_done(&rd), -EBADMSG);
	/* One group fewer: part 1 brings more than are left. */
	memcpy(a, saved, sizeof(saved));
	for (i = 0; i < 3; i++) {
		za_put_le64(a + i * BLK + 56, t.nr_groups - 1);
		fix_crc(a + i * BLK);
	}
	za_etab_reader_init(&rd);
	ck_assert_int_eq(add_part(&rd, a, 0), 0);
	ck_assert_int_eq(add_part(&rd, a, 1), -EBADMSG);
	/* One segment fewer: part 2 does. */
	memcpy(a, saved, sizeof(saved));
	for (i = 0; i < 3; i++) {
		za_put_le64(a + i * BLK + 64, t.nr_segs - 1);
		fix_crc(a + i * BLK);
	}
	za_etab_reader_init(&rd);
	ck_assert_int_eq(add_part(&rd, a, 0), 0);
	ck_assert_int_eq(add_part(&rd, a, 1), 0);
	ck_assert_int_eq(add_part(&rd, a, 2), -EBADMSG);

	/* Group ids not increasing across parts 0 and 1. */
	memcpy(a, saved, sizeof(saved));
	get_part(a, 0, p);
	last = p->groups[p->nr_groups - 1].id;
	get_part(a, 1, p);
	p->groups[0].id = last;
	put_part(a, 1, p);
	za_etab_reader_init(&rd);
	ck_assert_int_eq(add_part(&rd, a, 0), 0);
	ck_assert_int_eq(add_part(&rd, a, 1), -EBADMSG);
	/* Segment ids not increasing across parts 1 and 2. */
	memcpy(a, saved, sizeof(saved));
	get_part(a, 1, p);
	last = p->segs[p->nr_segs - 1].id;
	get_part(a, 2, p);
	p->segs[0].id = last - 1;
	put_part(a, 2, p);
	za_etab_reader_init(&rd);
	ck_assert_int_eq(add_part(&rd, a, 0), 0);
	ck_assert_int_eq(add_part(&rd, a, 1), 0);
	ck_assert_int_eq(add_part(&rd, a, 2), -EBADMSG);
	free(a);
	table_free(&t);
	free(p);
}
END_TEST

/*
 * A group after a segment across parts: part 0 is four segments filling it
 * to the last byte (so the cut is canonical), part 1 one group.
 */
START_TEST(test_reader_refuses_a_group_after_segments)
{
	static const uint8_t widths[] = { 64, 64, 64, 48 };
	struct za_etab_part *p = new_part();
	struct za_etab_reader rd;
	uint8_t blocks[2 * BLK];
	uint32_t i;

	rng = 800;
	memset(p, 0, sizeof(*p));
	p->h = (struct za_etab_hdr){ .ckpt_id = 1,
				     .seq = 1,
				     .next_seq = 2,
				     .next_seg_id = 10,
				     .next_group_id = 10,
				     .nr_groups = 1,
				     .nr_segs = 4,
				     .nr_parts = 2,
				     .nr_recs = 4,
				     .used_bytes = PAY };
	p->nr_segs = 4;
	for (i = 0; i < 4; i++) {
		make_seg(&p->segs[i], widths[i], 0, 0, 10);
		p->segs[i].id = 1 + i;
	}
	put_part(blocks, 0, p);
	p->h.part = 1;
	p->h.nr_recs = 1;
	p->h.used_bytes = ZA_ETAB_GROUP_BYTES;
	p->nr_segs = 0;
	p->nr_groups = 1;
	p->groups[0] =
		(struct za_etab_group){ .id = 1, .nr_stripes = 1, .w = 1 };
	put_part(blocks, 1, p);
	za_etab_reader_init(&rd);
	ck_assert_int_eq(add_part(&rd, blocks, 0), 0);
	ck_assert_int_eq(add_part(&rd, blocks, 1), -EBADMSG);
	free(p);
}
END_TEST

/* The encoder refuses what the decoder would refuse alone. */
START_TEST(test_encoder_refuses)
{
	struct za_etab_part *p = new_part(), *q = new_part();
	uint8_t *b = fixture(), out[BLK];

	ck_assert_int_eq(za_etab_block_decode(b, BLK, p), 0);
	*q = *p;
	ck_assert_int_eq(za_etab_block_encode(q, out), 0);
	ck_assert_mem_eq(out, b, BLK);
	q->h.used_bytes++;
	ck_assert_int_eq(za_etab_block_encode(q, out), -EINVAL);
	*q = *p;
	q->h.nr_recs++;
	ck_assert_int_eq(za_etab_block_encode(q, out), -EINVAL);
	*q = *p;
	q->nr_groups = ZA_ETAB_MAX_GROUPS + 1;
	ck_assert_int_eq(za_etab_block_encode(q, out), -EINVAL);
	*q = *p;
	q->segs[1].width = 0;
	ck_assert_int_eq(za_etab_block_encode(q, out), -EINVAL);
	*q = *p;
	q->groups[1].id = q->groups[0].id;
	ck_assert_int_eq(za_etab_block_encode(q, out), -EINVAL);
	*q = *p;
	q->h.ckpt_id = 0;
	ck_assert_int_eq(za_etab_block_encode(q, out), -EINVAL);
	free(b);
	free(p);
	free(q);
}
END_TEST

/* A writer with group 3 and segment 2 of the fixture's kind. */
static void writer_start(struct za_etab_writer *w, int with_seg)
{
	struct za_etab_group g = { .id = 3, .nr_stripes = 10, .w = 2 };
	struct za_etab_seg s;

	ck_assert_int_eq(za_etab_writer_init(w, 4, 100, 110, 10, 10), 0);
	ck_assert_int_eq(za_etab_writer_add_group(w, &g), 0);
	if (!with_seg)
		return;
	make_seg(&s, 3, 0, 0, 10);
	s.id = 2;
	ck_assert_int_eq(za_etab_writer_add_seg(w, &s), 0);
}

/* After a refusal the writer refuses everything, finish included. */
static void assert_stuck(struct za_etab_writer *w)
{
	struct za_etab_group g = { .id = 8, .nr_stripes = 10, .w = 2 };
	struct za_etab_seg s;

	make_seg(&s, 1, 0, 0, 10);
	s.id = 9;
	ck_assert_int_eq(za_etab_writer_add_group(w, &g), -EINVAL);
	ck_assert_int_eq(za_etab_writer_add_seg(w, &s), -EINVAL);
	ck_assert_int_eq(za_etab_writer_finish(w), -EINVAL);
	free(w->blocks);
}

START_TEST(test_writer_refuses_groups)
{
	static const struct za_etab_group bad[] = {
		{ .id = 4, .nr_stripes = 1, .w = 1, .stream = 4 },
		{ .id = 4, .nr_stripes = 1, .w = 0 },
		{ .id = 4, .nr_stripes = 1, .w = 1025 },
		{ .id = 4, .nr_stripes = 0, .w = 1 },
		{ .id = 0, .nr_stripes = 1, .w = 1 },
		{ .id = 10, .nr_stripes = 1, .w = 1 }, /* == next_group_id */
		{ .id = 3, .nr_stripes = 1, .w = 1 }, /* == the last one */
		{ .id = 2, .nr_stripes = 1, .w = 1 }, /* below it */
		{ .id = 4, .nr_stripes = 3, .w = 2, .next_pos = 7 },
	};
	struct za_etab_group ok = {
		.id = 9, .nr_stripes = 3, .w = 2, .next_pos = 6, .stream = 3
	};
	struct za_etab_writer w;
	unsigned i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		writer_start(&w, 0);
		ck_assert_msg(za_etab_writer_add_group(&w, &bad[i]) == -EINVAL,
			      "bad group %u was taken", i);
		assert_stuck(&w);
	}
	/* A group after a segment. */
	writer_start(&w, 1);
	ck_assert_int_eq(za_etab_writer_add_group(&w, &ok), -EINVAL);
	assert_stuck(&w);
	/* The limits are fine. */
	writer_start(&w, 0);
	ck_assert_int_eq(za_etab_writer_add_group(&w, &ok), 0);
	ck_assert_int_eq(za_etab_writer_finish(&w), 0);
	free(w.blocks);
}
END_TEST

START_TEST(test_writer_refuses_segments)
{
	struct za_etab_writer w;
	struct za_etab_seg ok, s;
	unsigned i;

	rng = 900;
	make_seg(&ok, 3, 0, 0, 10);
	ok.id = 5;
	for (i = 0;; i++) {
		s = ok;
		switch (i) {
		case 0:
			s.width = 0;
			break;
		case 1:
			s.width = 65;
			break;
		case 2:
			s.flags = 0x04;
			break;
		case 3:
			s.grp_idx = 1024;
			break;
		case 4:
			s.id = 0;
			break;
		case 5:
			s.id = 10; /* == next_seg_id */
			break;
		case 6:
			s.id = 2; /* == the last one */
			break;
		case 7:
			s.id = 1; /* below it */
			break;
		case 8:
			s.group_id = 0;
			break;
		case 9:
			s.group_id = 10; /* == next_group_id */
			break;
		case 10:
			s.dead_cols = 1u << 3; /* column 3 of 3 */
			break;
		case 11:
			s.col[1].member = ZA_ETAB_MEMBER_ABSENT;
			s.col[1].zone = 1;
			break;
		case 12:
			s.col[2].hdr_member = ZA_ETAB_MEMBER_ABSENT;
			s.col[2].hdr_zone = 1;
			break;
		default:
			goto done;
		}
		writer_start(&w, 1);
		ck_assert_msg(za_etab_writer_add_seg(&w, &s) == -EINVAL,
			      "bad segment %u was taken", i);
		assert_stuck(&w);
	}
done:
	/* Init out of range. */
	ck_assert_int_eq(za_etab_writer_init(&w, 0, 1, 2, 1, 1), -EINVAL);
	assert_stuck(&w);
	ck_assert_int_eq(za_etab_writer_init(&w, 1, 2, 2, 1, 1), -EINVAL);
	assert_stuck(&w);
	ck_assert_int_eq(za_etab_writer_init(&w, 1, 3, 2, 1, 1), -EINVAL);
	assert_stuck(&w);
	ck_assert_int_eq(za_etab_writer_init(&w, 1, 1, 2, 0, 1), -EINVAL);
	assert_stuck(&w);
	ck_assert_int_eq(za_etab_writer_init(&w, 1, 1, 2, 1, 0), -EINVAL);
	assert_stuck(&w);
	/* The absent columns done right, every dead column. */
	s = ok;
	s.col[1].member = ZA_ETAB_MEMBER_ABSENT;
	s.col[1].zone = 0;
	s.col[2].hdr_member = ZA_ETAB_MEMBER_ABSENT;
	s.col[2].hdr_zone = 0;
	s.dead_cols = 0x7;
	writer_start(&w, 1);
	ck_assert_int_eq(za_etab_writer_add_seg(&w, &s), 0);
	ck_assert_int_eq(za_etab_writer_finish(&w), 0);
	free(w.blocks);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("etab");
	TCase *tc = tcase_create("codec");

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_round_trip, 0, NR_SHAPES);
	tcase_add_loop_test(tc, test_every_bit_flip_rejected, 0, NR_SHAPES);
	tcase_add_test(tc, test_fields_checked_behind_crc);
	tcase_add_test(tc, test_totals_checked_in_a_part);
	tcase_add_test(tc, test_groups_before_segments);
	tcase_add_test(tc, test_truncated_and_garbage);
	tcase_add_test(tc, test_exact_fit);
	tcase_add_test(tc, test_reader_refuses);
	tcase_add_test(tc, test_reader_refuses_a_cut_that_is_not_canonical);
	tcase_add_test(tc, test_reader_refuses_totals_and_ids);
	tcase_add_test(tc, test_reader_refuses_a_group_after_segments);
	tcase_add_test(tc, test_encoder_refuses);
	tcase_add_test(tc, test_writer_refuses_groups);
	tcase_add_test(tc, test_writer_refuses_segments);
	suite_add_tcase(s, tc);
	return trun(s);
}
