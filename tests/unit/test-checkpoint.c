// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test-checkpoint.c - the checkpoint codec (checkpoint.h): round trips of
 * map shapes through the writer, the part decoder and the reader (parts
 * at every boundary, extents and unmap records, values at their limits),
 * canonical re-encoding, every single-bit flip of a part rejected, the
 * reserved bytes checked behind a valid CRC, truncated and garbage input,
 * and a reader that refuses parts missing, repeated, out of order, from
 * another checkpoint or with extents going backwards across parts.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "byteorder.h"
#include "checkpoint.h"
#include "crc.h"
#include "tap.h"

#define BLK ZA_CKPT_BLOCK_BYTES

static uint64_t rng = 1;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* A map shape: so many extents and unmap records in a volume this big. */
struct shape {
	const char *name;
	uint64_t extents, unmaps, size_blocks;
	uint64_t big; /* non-zero: groups and positions near their limits */
};

static const struct shape shapes[] = {
	{ "empty", 0, 0, 2048, 0 },
	{ "one extent", 1, 0, 2048, 0 },
	{ "one part minus one", 99, 0, 4096, 0 },
	{ "exactly one part", 100, 0, 4096, 0 },
	{ "one part plus one", 101, 0, 4096, 0 },
	{ "extents and unmaps", 250, 37, 1u << 20, 0 },
	{ "unmaps only", 0, 150, 1u << 20, 0 },
	{ "unmaps fill a part", 60, 40, 1u << 16, 0 },
	{ "many parts", 2345, 321, 1u << 24, 0 },
	{ "the largest volume", 300, 5, ZA_CKPT_MAX_SIZE_BLOCKS, 1 },
	{ "every block its own extent", 512, 0, 512, 0 },
};

#define NR_SHAPES (int)(sizeof(shapes) / sizeof(shapes[0]))

/* The records of a shape: extents increasing, some adjacent, the last
 * one possibly ending at the volume's end; unmap ranges anywhere. */
static struct za_ckpt_rec *make_recs(const struct shape *s)
{
	uint64_t total = s->extents + s->unmaps, i, lba = 0;
	uint64_t room = s->size_blocks - s->extents; /* spare for gaps */
	struct za_ckpt_rec *r = calloc(total + 1, sizeof(*r));

	ck_assert_ptr_nonnull(r);
	for (i = 0; i < s->extents; i++) {
		uint64_t gap = room ? rnd() % (room / (s->extents - i) + 1) : 0;
		uint64_t n = 1;

		room -= gap;
		lba += gap;
		/* Extra length comes out of the spare room too. */
		if (room && rnd() % 2) {
			n += rnd() % (room / (s->extents - i) + 1);
			room -= n - 1;
		}
		r[i].type = rnd() % 3 ? ZA_CKPT_REC_DATA : ZA_CKPT_REC_JOURNAL;
		r[i].lba = lba;
		r[i].nr_blocks = n;
		r[i].group = s->big ? UINT64_MAX - rnd() % 8 : 1 + rnd() % 40;
		r[i].pos = s->big ? UINT64_MAX - n - rnd() % 4 : rnd() % 100000;
		lba += n;
	}
	if (s->extents == s->size_blocks) /* every block: to the very end */
		ck_assert_uint_eq(lba, s->size_blocks);
	for (; i < total; i++) {
		r[i].type = ZA_CKPT_REC_UNMAP;
		r[i].lba = rnd() % s->size_blocks;
		r[i].nr_blocks = 1 + rnd() % (s->size_blocks - r[i].lba);
		r[i].group = 1 + rnd() % 40;
	}
	return r;
}

/* Encode a whole checkpoint of @s into new blocks; *parts set. */
static uint8_t *encode(const struct shape *s, const struct za_ckpt_rec *r,
		       uint64_t id, uint32_t *parts)
{
	struct za_ckpt_writer w;
	uint8_t *blocks;
	uint64_t i;

	*parts = za_ckpt_nr_parts(s->extents, s->unmaps);
	ck_assert_uint_ge(*parts, 1);
	blocks = malloc((size_t)*parts * BLK);
	ck_assert_ptr_nonnull(blocks);
	ck_assert_int_eq(za_ckpt_writer_init(&w, id, 777 + id, s->size_blocks,
					     s->extents, s->unmaps, blocks),
			 0);
	for (i = 0; i < s->extents + s->unmaps; i++)
		ck_assert_int_eq(za_ckpt_writer_add(&w, &r[i]), 0);
	ck_assert_int_eq(za_ckpt_writer_finish(&w), 0);
	return blocks;
}

static uint32_t crc_of(const uint8_t *blk)
{
	uint8_t *c = malloc(BLK);
	uint32_t v;

	ck_assert_ptr_nonnull(c);
	memcpy(c, blk, BLK);
	memset(c + 12, 0, 4);
	v = za_crc32c(c, BLK);
	free(c);
	return v;
}

static void fix_crc(uint8_t *blk)
{
	za_put_le32(blk + 12, crc_of(blk));
}

START_TEST(test_round_trip)
{
	const struct shape *s = &shapes[_i];
	struct za_ckpt_rec *r, got[ZA_CKPT_RECS_PER_BLOCK];
	struct za_ckpt_reader rd;
	struct za_ckpt_hdr h;
	uint8_t *blocks, again[BLK];
	uint32_t parts, p, k;
	uint64_t idx = 0;

	rng = 100 + (uint64_t)_i;
	r = make_recs(s);
	blocks = encode(s, r, 5, &parts);
	ck_assert_uint_eq(parts, s->extents + s->unmaps ?
					 (s->extents + s->unmaps + 99) / 100 :
					 1);
	za_ckpt_reader_init(&rd);
	for (p = 0; p < parts; p++) {
		ck_assert_int_eq(za_ckpt_block_decode(blocks + (size_t)p * BLK,
						      BLK, &h, got),
				 0);
		ck_assert_uint_eq(h.id, 5);
		ck_assert_uint_eq(h.seq, 782);
		ck_assert_uint_eq(h.size_blocks, s->size_blocks);
		ck_assert_uint_eq(h.nr_extents, s->extents);
		ck_assert_uint_eq(h.nr_unmaps, s->unmaps);
		ck_assert_uint_eq(h.part, p);
		ck_assert_uint_eq(h.nr_parts, parts);
		for (k = 0; k < h.nr_recs; k++, idx++) {
			ck_assert_uint_eq(got[k].type, r[idx].type);
			ck_assert_uint_eq(got[k].lba, r[idx].lba);
			ck_assert_uint_eq(got[k].nr_blocks, r[idx].nr_blocks);
			ck_assert_uint_eq(got[k].group, r[idx].group);
			ck_assert_uint_eq(got[k].pos, r[idx].pos);
		}
		ck_assert_int_eq(za_ckpt_reader_add(&rd, &h, got), 0);
		/* Canonical: what decodes encodes back to the same bytes. */
		ck_assert_int_eq(za_ckpt_block_encode(&h, got, again), 0);
		ck_assert_mem_eq(again, blocks + (size_t)p * BLK, BLK);
		/* Not complete until the last part. */
		if (p + 1 < parts)
			ck_assert_int_eq(za_ckpt_reader_done(&rd), -EBADMSG);
	}
	ck_assert_uint_eq(idx, s->extents + s->unmaps);
	ck_assert_int_eq(za_ckpt_reader_done(&rd), 0);
	free(blocks);
	free(r);
}
END_TEST

/* Every single-bit flip of the first and the last part is refused. */
START_TEST(test_every_bit_flip_rejected)
{
	const struct shape *s = &shapes[_i];
	struct za_ckpt_rec *r, got[ZA_CKPT_RECS_PER_BLOCK];
	struct za_ckpt_hdr h;
	uint8_t *blocks;
	uint32_t parts, which;
	size_t bit;

	rng = 200 + (uint64_t)_i;
	r = make_recs(s);
	blocks = encode(s, r, 9, &parts);
	for (which = 0; which < 2; which++) {
		uint8_t *b = blocks + (size_t)(which ? parts - 1 : 0) * BLK;

		for (bit = 0; bit < BLK * 8; bit++) {
			int ret;

			b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			ret = za_ckpt_block_decode(b, BLK, &h, got);
			ck_assert_msg(ret == -EBADMSG || ret == -ENOENT ||
					      ret == -EPROTONOSUPPORT,
				      "%s: part %u bit %zu: decode gave %d",
				      s->name, which, bit, ret);
			b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		}
		ck_assert_int_eq(za_ckpt_block_decode(b, BLK, &h, got), 0);
	}
	free(blocks);
	free(r);
}
END_TEST

/*
 * Behind a valid CRC: reserved bytes, unused record slots, record types
 * and ranges, header fields out of range are all refused.
 */
START_TEST(test_fields_checked_behind_crc)
{
	const struct shape s = { "x", 150, 10, 100000, 0 };
	struct za_ckpt_rec *r, got[ZA_CKPT_RECS_PER_BLOCK];
	struct za_ckpt_hdr h;
	uint8_t *blocks, *b, saved[BLK];
	uint32_t parts;
	size_t off;
	unsigned i;
	static const struct {
		unsigned off, len; /* little-endian field */
		uint64_t val;
	} bad[] = {
		{ 16, 8, 0 }, /* id 0 */
		{ 32, 8, 0 }, /* size 0 */
		{ 32, 8, ZA_CKPT_MAX_SIZE_BLOCKS + 1 },
		{ 40, 8, 100001 }, /* more extents than blocks */
		{ 48, 8, 11 }, /* one more unmap than the part holds */
		{ 56, 4, 2 }, /* part >= nr_parts */
		{ 60, 4, 3 },
		{ 64, 4, 59 }, /* the last part holds 60 records */
		{ 64, 4, 61 },
		{ 96, 1, 0 }, /* record type 0 */
		{ 96, 1, 4 },
		{ 96 + 40 * 49, 1,
		  ZA_CKPT_REC_UNMAP }, /* an unmap among extents */
		{ 96 + 40 * 50, 1,
		  ZA_CKPT_REC_DATA }, /* an extent among unmaps */
		{ 96 + 40 * 50 + 32, 8, 1 }, /* unmap with a position */
		{ 96 + 16, 8, 0 }, /* zero blocks */
		{ 96 + 8, 8, 100000 }, /* lba past the end */
		{ 96 + 16, 8, 100001 }, /* past the end */
		{ 96 + 32, 8, UINT64_MAX }, /* pos + n wraps */
		{ 96 + 40 + 8, 8, 0 }, /* extents going backwards */
	};

	rng = 300;
	r = make_recs(&s);
	blocks = encode(&s, r, 3, &parts);
	ck_assert_uint_eq(parts, 2);
	b = blocks + BLK; /* part 1: 50 extents then 10 unmaps */
	ck_assert_int_eq(za_ckpt_block_decode(b, BLK, &h, got), 0);
	memcpy(saved, b, BLK);
	/* Reserved header bytes, record padding, unused slots. */
	for (off = 68; off < BLK; off++) {
		size_t in_rec = (off - 96) % 40;

		if (off >= 96 && off < 96 + 60 * 40 &&
		    (in_rec == 0 || in_rec >= 8))
			continue; /* a used record's fields */
		b[off] = 0x20;
		fix_crc(b);
		ck_assert_msg(za_ckpt_block_decode(b, BLK, &h, got) == -EBADMSG,
			      "byte %zu is reserved but was accepted", off);
		memcpy(b, saved, BLK);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (bad[i].len == 8)
			za_put_le64(b + bad[i].off, bad[i].val);
		else if (bad[i].len == 4)
			za_put_le32(b + bad[i].off, (uint32_t)bad[i].val);
		else
			b[bad[i].off] = (uint8_t)bad[i].val;
		fix_crc(b);
		ck_assert_msg(za_ckpt_block_decode(b, BLK, &h, got) == -EBADMSG,
			      "case %u (offset %u) was accepted", i,
			      bad[i].off);
		memcpy(b, saved, BLK);
	}
	/* The version is checked before anything else but the magic. */
	za_put_le32(b + 8, 3);
	ck_assert_int_eq(za_ckpt_block_decode(b, BLK, &h, got),
			 -EPROTONOSUPPORT);
	free(blocks);
	free(r);
}
END_TEST

/*
 * A checkpoint with engine table parts is written as version 2 with their
 * count at byte 68; without, as version 1 with zero there: one encoding
 * each. A version 2 part announcing none, a count past the limit, and
 * parts that disagree on the count are refused.
 */
START_TEST(test_table_parts)
{
	const struct shape s = { "x", 150, 20, 5000, 0 };
	struct za_ckpt_rec *r, got[ZA_CKPT_RECS_PER_BLOCK];
	struct za_ckpt_writer w;
	struct za_ckpt_reader rd;
	struct za_ckpt_hdr h, h1;
	uint8_t *blocks, again[BLK];
	uint32_t parts = za_ckpt_nr_parts(s.extents, s.unmaps), p;
	uint64_t i;

	rng = 500;
	r = make_recs(&s);
	blocks = malloc((size_t)parts * BLK);
	ck_assert_ptr_nonnull(blocks);
	ck_assert_int_eq(za_ckpt_writer_init(&w, 9, 99, s.size_blocks,
					     s.extents, s.unmaps, blocks),
			 0);
	w.h.nr_table_parts = 3;
	for (i = 0; i < s.extents + s.unmaps; i++)
		ck_assert_int_eq(za_ckpt_writer_add(&w, &r[i]), 0);
	ck_assert_int_eq(za_ckpt_writer_finish(&w), 0);
	ck_assert_uint_eq(parts, 2);
	za_ckpt_reader_init(&rd);
	for (p = 0; p < parts; p++) {
		uint8_t *b = blocks + (size_t)p * BLK;

		ck_assert_uint_eq(za_get_le32(b + 8), 2);
		ck_assert_uint_eq(za_get_le32(b + 68), 3);
		ck_assert_int_eq(za_ckpt_block_decode(b, BLK, &h, got), 0);
		ck_assert_uint_eq(h.nr_table_parts, 3);
		ck_assert_int_eq(za_ckpt_block_encode(&h, got, again), 0);
		ck_assert_mem_eq(again, b, BLK);
		ck_assert_int_eq(za_ckpt_reader_add(&rd, &h, got), 0);
	}
	ck_assert_int_eq(za_ckpt_reader_done(&rd), 0);
	/* Parts that disagree on the table. */
	za_ckpt_reader_init(&rd);
	ck_assert_int_eq(za_ckpt_block_decode(blocks, BLK, &h, got), 0);
	ck_assert_int_eq(za_ckpt_reader_add(&rd, &h, got), 0);
	ck_assert_int_eq(za_ckpt_block_decode(blocks + BLK, BLK, &h1, got), 0);
	h1.nr_table_parts = 4;
	ck_assert_int_eq(za_ckpt_reader_add(&rd, &h1, got), -EBADMSG);
	/* Version 2 with no table parts, or too many. */
	za_put_le32(blocks + 68, 0);
	fix_crc(blocks);
	ck_assert_int_eq(za_ckpt_block_decode(blocks, BLK, &h, got), -EBADMSG);
	za_put_le32(blocks + 68, ZA_CKPT_MAX_TABLE_PARTS + 1);
	fix_crc(blocks);
	ck_assert_int_eq(za_ckpt_block_decode(blocks, BLK, &h, got), -EBADMSG);
	/* Version 1 with a count where it has reserved bytes. */
	za_put_le32(blocks + 8, 1);
	za_put_le32(blocks + 68, 3);
	fix_crc(blocks);
	ck_assert_int_eq(za_ckpt_block_decode(blocks, BLK, &h, got), -EBADMSG);
	free(blocks);
	free(r);
}
END_TEST

START_TEST(test_truncated_and_garbage)
{
	const struct shape s = { "x", 30, 3, 5000, 0 };
	struct za_ckpt_rec *r, got[ZA_CKPT_RECS_PER_BLOCK];
	struct za_ckpt_hdr h;
	uint8_t *blocks, g[BLK];
	uint32_t parts;
	size_t len;
	unsigned i, k;

	rng = 400;
	r = make_recs(&s);
	blocks = encode(&s, r, 1, &parts);
	for (len = 0; len < BLK; len += len < 16 ? 1 : 97)
		ck_assert_int_eq(za_ckpt_block_decode(blocks, len, &h, got),
				 len < 8 ? -ENOENT : -EBADMSG);
	ck_assert_int_eq(za_ckpt_block_decode(blocks, BLK + 100, &h, got), 0);
	for (i = 0; i < 200; i++) {
		for (k = 0; k < BLK; k += 8)
			za_put_le64(g + k, rnd());
		ck_assert_int_eq(za_ckpt_block_decode(g, BLK, &h, got),
				 -ENOENT);
		/* With the magic, the version and a valid CRC: still refused
		 * (random fields are out of range). */
		memcpy(g, blocks, 12);
		fix_crc(g);
		ck_assert_int_eq(za_ckpt_block_decode(g, BLK, &h, got),
				 -EBADMSG);
	}
	memset(g, 0, BLK);
	ck_assert_int_eq(za_ckpt_block_decode(g, BLK, &h, got), -ENOENT);
	free(blocks);
	free(r);
}
END_TEST

static void add_part(struct za_ckpt_reader *rd, const uint8_t *blk, int want)
{
	struct za_ckpt_rec got[ZA_CKPT_RECS_PER_BLOCK];
	struct za_ckpt_hdr h;

	ck_assert_int_eq(za_ckpt_block_decode(blk, BLK, &h, got), 0);
	ck_assert_int_eq(za_ckpt_reader_add(rd, &h, got), want);
}

START_TEST(test_reader_refuses_mixtures)
{
	const struct shape s = { "x", 250, 20, 1u << 20, 0 };
	struct za_ckpt_rec *r, *r2;
	struct za_ckpt_reader rd;
	struct za_ckpt_hdr h;
	uint8_t *a, *b, blk[BLK];
	uint32_t parts, parts2;

	rng = 500;
	r = make_recs(&s);
	a = encode(&s, r, 7, &parts);
	ck_assert_uint_eq(parts, 3);
	/* Same shape, another id (the next checkpoint). */
	rng = 501;
	r2 = make_recs(&s);
	b = encode(&s, r2, 8, &parts2);

	/* A missing part. */
	za_ckpt_reader_init(&rd);
	add_part(&rd, a, 0);
	add_part(&rd, a + BLK, 0);
	ck_assert_int_eq(za_ckpt_reader_done(&rd), -EBADMSG);
	/* Out of order, repeated. */
	za_ckpt_reader_init(&rd);
	add_part(&rd, a + BLK, -EBADMSG);
	add_part(&rd, a, 0);
	add_part(&rd, a, -EBADMSG);
	add_part(&rd, a + 2 * BLK, -EBADMSG);
	/* A part of the next checkpoint in the middle. */
	za_ckpt_reader_init(&rd);
	add_part(&rd, a, 0);
	add_part(&rd, b + BLK, -EBADMSG);
	/* Nothing at all is not a checkpoint. */
	za_ckpt_reader_init(&rd);
	ck_assert_int_eq(za_ckpt_reader_done(&rd), -EBADMSG);

	/* Extents going backwards across parts: each part valid alone. */
	{
		struct za_ckpt_rec one[ZA_CKPT_RECS_PER_BLOCK] = { { 0 } };
		unsigned i;

		h = (struct za_ckpt_hdr){ .id = 1,
					  .seq = 2,
					  .size_blocks = 1000,
					  .nr_extents = 101,
					  .nr_parts = 2,
					  .nr_recs = 100 };
		for (i = 0; i < 100; i++)
			one[i] = (struct za_ckpt_rec){ .type = 1,
						       .lba = 5 * i,
						       .nr_blocks = 5,
						       .group = 1 };
		za_ckpt_reader_init(&rd);
		ck_assert_int_eq(za_ckpt_block_encode(&h, one, blk), 0);
		add_part(&rd, blk, 0);
		h.part = 1;
		h.nr_recs = 1;
		one[0].lba = 499; /* part 0 ended at 500 */
		ck_assert_int_eq(za_ckpt_block_encode(&h, one, blk), 0);
		add_part(&rd, blk, -EBADMSG);
		one[0].lba = 500; /* adjacent is fine */
		ck_assert_int_eq(za_ckpt_block_encode(&h, one, blk), 0);
		add_part(&rd, blk, 0);
		ck_assert_int_eq(za_ckpt_reader_done(&rd), 0);
		/* The encoder refuses what the decoder would. */
		h.nr_recs = 2;
		ck_assert_int_eq(za_ckpt_block_encode(&h, one, blk), -EINVAL);
	}
	free(a);
	free(b);
	free(r);
	free(r2);
}
END_TEST

START_TEST(test_writer_refuses_bad_input)
{
	struct za_ckpt_rec e = {
		.type = ZA_CKPT_REC_DATA, .lba = 10, .nr_blocks = 5, .group = 1
	};
	struct za_ckpt_writer w;
	uint8_t *blocks = malloc(4 * BLK);

	ck_assert_ptr_nonnull(blocks);
	ck_assert_uint_eq(za_ckpt_nr_parts(0, 0), 1);
	ck_assert_uint_eq(za_ckpt_nr_parts(100, 0), 1);
	ck_assert_uint_eq(za_ckpt_nr_parts(60, 41), 2);
	ck_assert_uint_eq(za_ckpt_nr_parts(ZA_CKPT_MAX_SIZE_BLOCKS, 0), 0);
	ck_assert_uint_eq(za_ckpt_nr_parts(UINT64_MAX, 0), 0);
	/* More records than announced. */
	ck_assert_int_eq(za_ckpt_writer_init(&w, 1, 1, 100, 1, 0, blocks), 0);
	ck_assert_int_eq(za_ckpt_writer_add(&w, &e), 0);
	ck_assert_int_eq(za_ckpt_writer_add(&w, &e), -EINVAL);
	ck_assert_int_eq(za_ckpt_writer_finish(&w), -EINVAL);
	/* Fewer. */
	ck_assert_int_eq(za_ckpt_writer_init(&w, 1, 1, 100, 2, 0, blocks), 0);
	ck_assert_int_eq(za_ckpt_writer_add(&w, &e), 0);
	ck_assert_int_eq(za_ckpt_writer_finish(&w), -EINVAL);
	/* Out of order, or overlapping. */
	ck_assert_int_eq(za_ckpt_writer_init(&w, 1, 1, 100, 2, 0, blocks), 0);
	ck_assert_int_eq(za_ckpt_writer_add(&w, &e), 0);
	e.lba = 14;
	ck_assert_int_eq(za_ckpt_writer_add(&w, &e), 0);
	ck_assert_int_eq(za_ckpt_writer_finish(&w), -EINVAL);
	/* Past the end of the volume. */
	e.lba = 96;
	ck_assert_int_eq(za_ckpt_writer_init(&w, 1, 1, 100, 1, 0, blocks), 0);
	ck_assert_int_eq(za_ckpt_writer_add(&w, &e), 0);
	ck_assert_int_eq(za_ckpt_writer_finish(&w), -EINVAL);
	/* Bad parameters. */
	ck_assert_int_eq(za_ckpt_writer_init(&w, 0, 1, 100, 0, 0, blocks),
			 -EINVAL);
	ck_assert_int_eq(za_ckpt_writer_init(&w, 1, 1, 0, 0, 0, blocks),
			 -EINVAL);
	ck_assert_int_eq(za_ckpt_writer_init(&w, 1, 1, 10, 11, 0, blocks),
			 -EINVAL);
	ck_assert_int_eq(za_ckpt_writer_add(&w, &e), -EINVAL);
	free(blocks);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("checkpoint");
	TCase *tc = tcase_create("codec");

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_round_trip, 0, NR_SHAPES);
	tcase_add_loop_test(tc, test_every_bit_flip_rejected, 0, NR_SHAPES);
	tcase_add_test(tc, test_fields_checked_behind_crc);
	tcase_add_test(tc, test_table_parts);
	tcase_add_test(tc, test_truncated_and_garbage);
	tcase_add_test(tc, test_reader_refuses_mixtures);
	tcase_add_test(tc, test_writer_refuses_bad_input);
	suite_add_tcase(s, tc);
	return trun(s);
}
