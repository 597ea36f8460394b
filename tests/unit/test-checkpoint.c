// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test-checkpoint.c - the checkpoint codec (checkpoint.h): round trips of
 * map shapes through the writer, the part decoder and the reader (parts
 * at every boundary, extents and unmap records, values at their limits),
 * canonical re-encoding, every single-bit flip of a part rejected, the
 * reserved bytes checked behind a valid CRC, truncated and garbage input,
 * and a reader that refuses parts missing, repeated, out of order, from
 * another checkpoint or with extents going backwards across parts. Version
 * 3 (a paged map's root level) likewise: round trips through writer and
 * reader, page records as its only map records and refused in versions 1
 * and 2, the map totals' rules, parts disagreeing on them.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "byteorder.h"
#include "checkpoint.h"
#include "crc.h"
#include "mpage.h"
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

/*
 * Encode a whole checkpoint of @s into new blocks; *parts set. With @v,
 * its version, table parts and map totals (version 3) are set in the
 * writer.
 */
static uint8_t *encode_v(const struct shape *s, const struct za_ckpt_rec *r,
			 uint64_t id, const struct za_ckpt_hdr *v,
			 uint32_t *parts)
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
	if (v) {
		w.h.version = v->version;
		w.h.nr_table_parts = v->nr_table_parts;
		w.h.nr_map_extents = v->nr_map_extents;
		w.h.map_levels = v->map_levels;
	}
	for (i = 0; i < s->extents + s->unmaps; i++)
		ck_assert_int_eq(za_ckpt_writer_add(&w, &r[i]), 0);
	ck_assert_int_eq(za_ckpt_writer_finish(&w), 0);
	return blocks;
}

static uint8_t *encode(const struct shape *s, const struct za_ckpt_rec *r,
		       uint64_t id, uint32_t *parts)
{
	return encode_v(s, r, id, NULL, parts);
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

/*
 * Decode part @b into @h and check it: its records are @r's from *@idx
 * on (*@idx moves past them), @rd takes it, and it encodes back to the
 * same bytes (canonical).
 */
static void check_part(const uint8_t *b, const struct za_ckpt_rec *r,
		       uint64_t *idx, struct za_ckpt_reader *rd,
		       struct za_ckpt_hdr *h)
{
	struct za_ckpt_rec got[ZA_CKPT_RECS_PER_BLOCK];
	uint8_t again[BLK];
	uint32_t k;

	ck_assert_int_eq(za_ckpt_block_decode(b, BLK, h, got), 0);
	for (k = 0; k < h->nr_recs; k++, (*idx)++) {
		ck_assert_uint_eq(got[k].type, r[*idx].type);
		ck_assert_uint_eq(got[k].lba, r[*idx].lba);
		ck_assert_uint_eq(got[k].nr_blocks, r[*idx].nr_blocks);
		ck_assert_uint_eq(got[k].group, r[*idx].group);
		ck_assert_uint_eq(got[k].pos, r[*idx].pos);
	}
	ck_assert_int_eq(za_ckpt_reader_add(rd, h, got), 0);
	ck_assert_int_eq(za_ckpt_block_encode(h, got, again), 0);
	ck_assert_mem_eq(again, b, BLK);
}

/* Every single-bit flip of part @b is refused; @b is left as it was. */
static void check_flips(uint8_t *b, const char *name, uint32_t part)
{
	struct za_ckpt_rec got[ZA_CKPT_RECS_PER_BLOCK];
	struct za_ckpt_hdr h;
	size_t bit;

	for (bit = 0; bit < BLK * 8; bit++) {
		int ret;

		b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		ret = za_ckpt_block_decode(b, BLK, &h, got);
		ck_assert_msg(ret == -EBADMSG || ret == -ENOENT ||
				      ret == -EPROTONOSUPPORT,
			      "%s: part %u bit %zu: decode gave %d", name, part,
			      bit, ret);
		b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	}
	ck_assert_int_eq(za_ckpt_block_decode(b, BLK, &h, got), 0);
}

/* Store @val as a little-endian field of @len bytes at @off of part @b,
 * and the part's CRC. */
static void poke(uint8_t *b, unsigned off, unsigned len, uint64_t val)
{
	if (len == 8)
		za_put_le64(b + off, val);
	else if (len == 4)
		za_put_le32(b + off, (uint32_t)val);
	else
		b[off] = (uint8_t)val;
	fix_crc(b);
}

START_TEST(test_round_trip)
{
	const struct shape *s = &shapes[_i];
	struct za_ckpt_rec *r;
	struct za_ckpt_reader rd;
	struct za_ckpt_hdr h;
	uint8_t *blocks;
	uint32_t parts, p;
	uint64_t idx = 0;

	rng = 100 + (uint64_t)_i;
	r = make_recs(s);
	blocks = encode(s, r, 5, &parts);
	ck_assert_uint_eq(parts, s->extents + s->unmaps ?
					 (s->extents + s->unmaps + 99) / 100 :
					 1);
	za_ckpt_reader_init(&rd);
	for (p = 0; p < parts; p++) {
		check_part(blocks + (size_t)p * BLK, r, &idx, &rd, &h);
		ck_assert_uint_eq(h.version, 1);
		ck_assert_uint_eq(h.id, 5);
		ck_assert_uint_eq(h.seq, 782);
		ck_assert_uint_eq(h.size_blocks, s->size_blocks);
		ck_assert_uint_eq(h.nr_extents, s->extents);
		ck_assert_uint_eq(h.nr_unmaps, s->unmaps);
		ck_assert_uint_eq(h.part, p);
		ck_assert_uint_eq(h.nr_parts, parts);
		ck_assert_uint_eq(h.nr_map_extents, 0);
		ck_assert_uint_eq(h.map_levels, 0);
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
	struct za_ckpt_rec *r;
	uint8_t *blocks;
	uint32_t parts;

	rng = 200 + (uint64_t)_i;
	r = make_recs(s);
	blocks = encode(s, r, 9, &parts);
	check_flips(blocks, s->name, 0);
	check_flips(blocks + (size_t)(parts - 1) * BLK, s->name, parts - 1);
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
		poke(b, bad[i].off, bad[i].len, bad[i].val);
		ck_assert_msg(za_ckpt_block_decode(b, BLK, &h, got) == -EBADMSG,
			      "case %u (offset %u) was accepted", i,
			      bad[i].off);
		memcpy(b, saved, BLK);
	}
	/* The version is checked before anything else but the magic. */
	za_put_le32(b + 8, 5);
	ck_assert_int_eq(za_ckpt_block_decode(b, BLK, &h, got),
			 -EPROTONOSUPPORT);
	za_put_le32(b + 8, 0);
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

static void add_part(struct za_ckpt_reader *rd, const uint8_t *blk, int want)
{
	struct za_ckpt_rec got[ZA_CKPT_RECS_PER_BLOCK];
	struct za_ckpt_hdr h;

	ck_assert_int_eq(za_ckpt_block_decode(blk, BLK, &h, got), 0);
	ck_assert_int_eq(za_ckpt_reader_add(rd, &h, got), want);
}

/*
 * Map records going backwards across parts, each part valid alone: a
 * checkpoint like @h (its version and map totals) of 101 map records of
 * @type in 1000 blocks, whose part 0 ends at 500. Part 1's record at 499
 * is refused, at 500 taken.
 */
static void check_backwards(struct za_ckpt_hdr h, uint8_t type)
{
	struct za_ckpt_rec one[ZA_CKPT_RECS_PER_BLOCK] = { { 0 } };
	struct za_ckpt_reader rd;
	uint8_t blk[BLK];
	unsigned i;

	h.id = 1;
	h.seq = 2;
	h.size_blocks = 1000;
	h.nr_extents = 101;
	h.nr_parts = 2;
	h.nr_recs = 100;
	for (i = 0; i < 100; i++)
		one[i] = (struct za_ckpt_rec){
			.type = type, .lba = 5 * i, .nr_blocks = 5, .group = 1
		};
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

/*
 * Version 3: a paged map's root level. Its shapes: so many page records
 * and unmaps, and the map's totals below the root.
 */
struct v3_shape {
	struct shape s; /* extents: page records */
	uint64_t map_extents;
	uint8_t levels;
};

static const struct v3_shape v3_shapes[] = {
	{ { "empty", 0, 0, 2048, 0 }, 0, 0 },
	{ { "an empty map, unmaps", 0, 130, 1u << 16, 0 }, 0, 0 },
	{ { "one page", 1, 0, 4096, 0 }, 100, 1 },
	{ { "a part of pages", 100, 0, 1u << 20, 0 }, 10000, 2 },
	{ { "pages and unmaps", 250, 37, 1u << 20, 0 }, 20000, 2 },
	{ { "the largest volume, the top level", 300, 5,
	    ZA_CKPT_MAX_SIZE_BLOCKS, 1 },
	  ZA_CKPT_MAX_SIZE_BLOCKS,
	  7 },
};

#define NR_V3_SHAPES (int)(sizeof(v3_shapes) / sizeof(v3_shapes[0]))

/* The records of a version 3 shape: its map records made page records. */
static struct za_ckpt_rec *make_v3_recs(const struct v3_shape *v)
{
	struct za_ckpt_rec *r = make_recs(&v->s);
	uint64_t i;

	for (i = 0; i < v->s.extents; i++) {
		r[i].type = ZA_CKPT_REC_PAGE;
		/* A page is one block: any position but the last. */
		if (v->s.big)
			r[i].pos = UINT64_MAX - 1 - i % 2;
	}
	return r;
}

static uint8_t *encode_v3(const struct v3_shape *v, const struct za_ckpt_rec *r,
			  uint64_t id, uint32_t *parts)
{
	struct za_ckpt_hdr x = { .version = 3,
				 .nr_table_parts = 2,
				 .nr_map_extents = v->map_extents,
				 .map_levels = v->levels };

	return encode_v(&v->s, r, id, &x, parts);
}

/*
 * Version 3 through the writer, the decoder and the reader: the version
 * and map totals at their offsets, the page records given back, the
 * encoding canonical.
 */
START_TEST(test_v3_round_trip)
{
	const struct v3_shape *v = &v3_shapes[_i];
	struct za_ckpt_rec *r;
	struct za_ckpt_reader rd;
	struct za_ckpt_hdr h;
	uint8_t *blocks;
	uint32_t parts, p;
	uint64_t idx = 0;

	rng = 600 + (uint64_t)_i;
	r = make_v3_recs(v);
	blocks = encode_v3(v, r, 11, &parts);
	za_ckpt_reader_init(&rd);
	for (p = 0; p < parts; p++) {
		uint8_t *b = blocks + (size_t)p * BLK;

		ck_assert_uint_eq(za_get_le32(b + 8), 3);
		ck_assert_uint_eq(za_get_le32(b + 68), 2);
		ck_assert_uint_eq(za_get_le64(b + 72), v->map_extents);
		ck_assert_uint_eq(b[80], v->levels);
		ck_assert(za_all_zero(b + 81, 15));
		check_part(b, r, &idx, &rd, &h);
		ck_assert_uint_eq(h.version, 3);
		ck_assert_uint_eq(h.nr_table_parts, 2);
		ck_assert_uint_eq(h.nr_map_extents, v->map_extents);
		ck_assert_uint_eq(h.map_levels, v->levels);
		ck_assert_uint_eq(h.nr_extents, v->s.extents);
		ck_assert_uint_eq(h.nr_unmaps, v->s.unmaps);
	}
	ck_assert_uint_eq(idx, v->s.extents + v->s.unmaps);
	ck_assert_int_eq(za_ckpt_reader_done(&rd), 0);
	free(blocks);
	free(r);
}
END_TEST

/* Every single-bit flip of a version 3 part is refused too. */
START_TEST(test_v3_every_bit_flip_rejected)
{
	const struct v3_shape *v = &v3_shapes[4];
	struct za_ckpt_rec *r;
	uint8_t *blocks;
	uint32_t parts;

	rng = 700;
	r = make_v3_recs(v);
	blocks = encode_v3(v, r, 12, &parts);
	ck_assert_uint_eq(parts, 3);
	/* Page records, then unmaps. */
	check_flips(blocks + 2 * BLK, v->s.name, 2);
	free(blocks);
	free(r);
}
END_TEST

/*
 * A version 3 part's header rules behind a valid CRC: the fixture is one
 * part of 30 page records and 3 unmaps, a map of 3000 extents in 2
 * levels, 2 table parts, in a volume of 100000 blocks.
 */
START_TEST(test_v3_fields_checked_behind_crc)
{
	const struct v3_shape v = { { "x", 30, 3, 100000, 0 }, 3000, 2 };
	struct za_ckpt_rec *r, got[ZA_CKPT_RECS_PER_BLOCK];
	struct za_ckpt_hdr h;
	uint8_t *b, saved[BLK];
	uint32_t parts;
	unsigned i, off;
	static const struct {
		const char *what;
		unsigned off, len; /* little-endian field */
		uint64_t val;
		int ok;
	} cases[] = {
		{ "no table parts", 68, 4, 0, 0 },
		{ "map_levels 0 under a map", 80, 1, 0, 0 },
		{ "map_levels 8", 80, 1, 8, 0 },
		{ "map_levels 255", 80, 1, 255, 0 },
		{ "map_levels 1", 80, 1, 1, 1 },
		{ "map_levels 7", 80, 1, 7, 1 },
		{ "an empty map with levels", 72, 8, 0, 0 },
		{ "fewer extents than root records", 72, 8, 29, 0 },
		{ "as many extents as root records", 72, 8, 30, 1 },
		{ "more extents than blocks", 72, 8, 100001, 0 },
		{ "an extent a block", 72, 8, 100000, 1 },
		{ "nr_map_extents max", 72, 8, UINT64_MAX, 0 },
		{ "an extent as a map record", 96, 1, ZA_CKPT_REC_DATA, 0 },
		{ "a journal extent as a map record", 96 + 40 * 29, 1,
		  ZA_CKPT_REC_JOURNAL, 0 },
		{ "an unmap as a map record", 96 + 40 * 29, 1,
		  ZA_CKPT_REC_UNMAP, 0 },
		{ "a page record among unmaps", 96 + 40 * 30, 1,
		  ZA_CKPT_REC_PAGE, 0 },
		{ "a page record at no block", 96 + 32, 8, UINT64_MAX, 0 },
		{ "a page record at the last block but one", 96 + 32, 8,
		  UINT64_MAX - 1, 1 },
		{ "page records going backwards", 96 + 40 + 8, 8, 0, 0 },
		{ "as version 2", 8, 4, 2, 0 },
		{ "as version 1", 8, 4, 1, 0 },
	};

	rng = 800;
	r = make_v3_recs(&v);
	b = encode_v3(&v, r, 13, &parts);
	ck_assert_uint_eq(parts, 1);
	ck_assert_int_eq(za_ckpt_block_decode(b, BLK, &h, got), 0);
	memcpy(saved, b, BLK);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		poke(b, cases[i].off, cases[i].len, cases[i].val);
		ck_assert_msg(za_ckpt_block_decode(b, BLK, &h, got) ==
				      (cases[i].ok ? 0 : -EBADMSG),
			      "%s: %s", cases[i].what,
			      cases[i].ok ? "refused" : "accepted");
		memcpy(b, saved, BLK);
	}
	/* Version 3's reserved header bytes, 81 to 95. */
	for (off = 81; off < 96; off++) {
		b[off] = 0x20;
		fix_crc(b);
		ck_assert_msg(za_ckpt_block_decode(b, BLK, &h, got) == -EBADMSG,
			      "byte %u is reserved but was accepted", off);
		memcpy(b, saved, BLK);
	}
	free(b);
	free(r);
}
END_TEST

/*
 * The encoder and the writer: page records are map records in version 3
 * only, extents in versions 1 and 2 only; the map totals' rules; version
 * 3 with an engine table only.
 */
START_TEST(test_v3_writer_and_encoder)
{
	struct za_ckpt_rec page = { .type = ZA_CKPT_REC_PAGE,
				    .lba = 10,
				    .nr_blocks = 5,
				    .group = 1,
				    .pos = UINT64_MAX - 1 };
	struct za_ckpt_rec ext = page, unmap = { .type = ZA_CKPT_REC_UNMAP,
						 .lba = 0,
						 .nr_blocks = 100,
						 .group = 2 };
	struct za_ckpt_hdr h = { .version = 3,
				 .id = 1,
				 .size_blocks = 100,
				 .nr_extents = 1,
				 .nr_parts = 1,
				 .nr_recs = 1,
				 .nr_table_parts = 1,
				 .nr_map_extents = 5,
				 .map_levels = 1 },
			   x;
	struct za_ckpt_writer w;
	uint8_t blk[BLK];

	ext.type = ZA_CKPT_REC_DATA;
	ext.pos = 0;
	ck_assert_int_eq(za_ckpt_block_encode(&h, &page, blk), 0);
	ck_assert_int_eq(za_ckpt_block_encode(&h, &ext, blk), -EINVAL);
	/* Versions 1 and 2: extents, no page record, no map totals. */
	x = h;
	x.version = 0;
	x.nr_map_extents = 0;
	x.map_levels = 0;
	ck_assert_int_eq(za_ckpt_block_encode(&x, &ext, blk), 0);
	ck_assert_uint_eq(za_get_le32(blk + 8), 2);
	ck_assert_int_eq(za_ckpt_block_encode(&x, &page, blk), -EINVAL);
	x.nr_table_parts = 0;
	ck_assert_int_eq(za_ckpt_block_encode(&x, &ext, blk), 0);
	ck_assert_uint_eq(za_get_le32(blk + 8), 1);
	ck_assert_int_eq(za_ckpt_block_encode(&x, &page, blk), -EINVAL);
	x.nr_map_extents = 5;
	ck_assert_int_eq(za_ckpt_block_encode(&x, &ext, blk), -EINVAL);
	x.nr_map_extents = 0;
	x.map_levels = 1;
	ck_assert_int_eq(za_ckpt_block_encode(&x, &ext, blk), -EINVAL);
	/* Asking for version 2 or 1 is the rule of table parts. */
	x = h;
	x.version = 2;
	x.nr_table_parts = 0;
	x.nr_map_extents = 0;
	x.map_levels = 0;
	ck_assert_int_eq(za_ckpt_block_encode(&x, &ext, blk), 0);
	ck_assert_uint_eq(za_get_le32(blk + 8), 1);
	/* Version 3 without an engine table. */
	x = h;
	x.nr_table_parts = 0;
	ck_assert_int_eq(za_ckpt_block_encode(&x, &page, blk), -EINVAL);
	/* The map's totals. */
	x = h;
	x.map_levels = 0;
	ck_assert_int_eq(za_ckpt_block_encode(&x, &page, blk), -EINVAL);
	x.map_levels = ZA_MPAGE_MAX_LEVEL + 1;
	ck_assert_int_eq(za_ckpt_block_encode(&x, &page, blk), -EINVAL);
	x.map_levels = ZA_MPAGE_MAX_LEVEL;
	ck_assert_int_eq(za_ckpt_block_encode(&x, &page, blk), 0);
	x.nr_map_extents = 0;
	ck_assert_int_eq(za_ckpt_block_encode(&x, &page, blk), -EINVAL);
	x.nr_map_extents = 101;
	ck_assert_int_eq(za_ckpt_block_encode(&x, &page, blk), -EINVAL);
	x.nr_map_extents = 100;
	ck_assert_int_eq(za_ckpt_block_encode(&x, &page, blk), 0);
	/* An empty map: no root record, no level; unmaps are fine. */
	x = h;
	x.nr_extents = 0;
	x.nr_recs = 0;
	ck_assert_int_eq(za_ckpt_block_encode(&x, NULL, blk), -EINVAL);
	x.nr_map_extents = 0;
	ck_assert_int_eq(za_ckpt_block_encode(&x, NULL, blk), -EINVAL);
	x.map_levels = 0;
	ck_assert_int_eq(za_ckpt_block_encode(&x, NULL, blk), 0);
	x.nr_unmaps = 1;
	x.nr_recs = 1;
	ck_assert_int_eq(za_ckpt_block_encode(&x, &unmap, blk), 0);
	x.nr_map_extents = 1; /* a map of one extent with no page */
	x.map_levels = 1;
	ck_assert_int_eq(za_ckpt_block_encode(&x, &unmap, blk), -EINVAL);
	/* As few extents as root records: each page holds one. */
	x = h;
	x.nr_map_extents = 1;
	ck_assert_int_eq(za_ckpt_block_encode(&x, &page, blk), 0);

	/* The writer: version 3 takes page records, not extents... */
	ck_assert_int_eq(za_ckpt_writer_init(&w, 1, 1, 100, 1, 1, blk), 0);
	w.h.version = 3;
	w.h.nr_table_parts = 1;
	w.h.nr_map_extents = 5;
	w.h.map_levels = 1;
	ck_assert_int_eq(za_ckpt_writer_add(&w, &page), 0);
	ck_assert_int_eq(za_ckpt_writer_add(&w, &unmap), 0);
	ck_assert_int_eq(za_ckpt_writer_finish(&w), 0);
	ck_assert_uint_eq(za_get_le32(blk + 8), 3);
	ck_assert_int_eq(za_ckpt_writer_init(&w, 1, 1, 100, 1, 1, blk), 0);
	w.h.version = 3;
	w.h.nr_table_parts = 1;
	w.h.nr_map_extents = 5;
	w.h.map_levels = 1;
	ck_assert_int_eq(za_ckpt_writer_add(&w, &ext), 0);
	ck_assert_int_eq(za_ckpt_writer_add(&w, &unmap), 0);
	ck_assert_int_eq(za_ckpt_writer_finish(&w), -EINVAL);
	/* ...versions 2 and 1 extents, not page records. */
	ck_assert_int_eq(za_ckpt_writer_init(&w, 1, 1, 100, 1, 0, blk), 0);
	w.h.nr_table_parts = 1;
	ck_assert_int_eq(za_ckpt_writer_add(&w, &page), 0);
	ck_assert_int_eq(za_ckpt_writer_finish(&w), -EINVAL);
	ck_assert_int_eq(za_ckpt_writer_init(&w, 1, 1, 100, 1, 0, blk), 0);
	ck_assert_int_eq(za_ckpt_writer_add(&w, &page), 0);
	ck_assert_int_eq(za_ckpt_writer_finish(&w), -EINVAL);
	/* Map totals without version 3. */
	ck_assert_int_eq(za_ckpt_writer_init(&w, 1, 1, 100, 1, 0, blk), 0);
	w.h.nr_table_parts = 1;
	w.h.nr_map_extents = 5;
	w.h.map_levels = 1;
	ck_assert_int_eq(za_ckpt_writer_add(&w, &ext), 0);
	ck_assert_int_eq(za_ckpt_writer_finish(&w), -EINVAL);
	/* Version 3 with a full part: the add that fills it refuses. */
	{
		struct za_ckpt_rec *many = calloc(100, sizeof(*many));
		uint8_t *two = malloc(2 * BLK);
		unsigned i;

		ck_assert_ptr_nonnull(many);
		ck_assert_ptr_nonnull(two);
		ck_assert_int_eq(
			za_ckpt_writer_init(&w, 1, 1, 1000, 101, 0, two), 0);
		w.h.version = 3;
		w.h.nr_table_parts = 1;
		w.h.nr_map_extents = 500;
		w.h.map_levels = 2;
		for (i = 0; i < 100; i++) {
			many[i] = page;
			many[i].lba = 5 * i;
			if (i == 50)
				many[i].type = ZA_CKPT_REC_JOURNAL;
			ck_assert_int_eq(za_ckpt_writer_add(&w, &many[i]),
					 i < 99 ? 0 : -EINVAL);
		}
		ck_assert_int_eq(za_ckpt_writer_finish(&w), -EINVAL);
		free(many);
		free(two);
	}
}
END_TEST

/*
 * The reader: parts of one version 3 checkpoint that disagree on its
 * version or its map's totals, or whose page records go backwards across
 * parts, each part valid alone.
 */
START_TEST(test_v3_reader_refuses_mixtures)
{
	const struct v3_shape v = { { "x", 150, 20, 1u << 20, 0 }, 4000, 2 };
	const struct v3_shape u = { { "unmaps", 0, 150, 1u << 16, 0 }, 0, 0 };
	struct za_ckpt_rec *r, got[ZA_CKPT_RECS_PER_BLOCK];
	struct za_ckpt_reader rd;
	struct za_ckpt_hdr h0, h1, x;
	uint8_t *blocks, blk[BLK];
	uint32_t parts;
	unsigned i;

	rng = 900;
	r = make_v3_recs(&v);
	blocks = encode_v3(&v, r, 14, &parts);
	ck_assert_uint_eq(parts, 2);
	ck_assert_int_eq(za_ckpt_block_decode(blocks, BLK, &h0, got), 0);
	for (i = 0; i < 3; i++) {
		za_ckpt_reader_init(&rd);
		ck_assert_int_eq(za_ckpt_block_decode(blocks, BLK, &h0, got),
				 0);
		ck_assert_int_eq(za_ckpt_reader_add(&rd, &h0, got), 0);
		ck_assert_int_eq(
			za_ckpt_block_decode(blocks + BLK, BLK, &h1, got), 0);
		x = h1;
		if (i == 0)
			x.nr_map_extents++;
		else if (i == 1)
			x.map_levels++;
		/* Each part still valid alone: encoded again. */
		ck_assert_int_eq(za_ckpt_block_encode(&x, got, blk), 0);
		ck_assert_int_eq(za_ckpt_block_decode(blk, BLK, &x, got), 0);
		ck_assert_int_eq(za_ckpt_reader_add(&rd, &x, got),
				 i < 2 ? -EBADMSG : 0);
	}
	ck_assert_int_eq(za_ckpt_reader_done(&rd), 0);
	free(blocks);
	free(r);

	/* The version alone: an empty map, unmaps in two parts, the second
	 * written as version 2. */
	rng = 901;
	r = make_v3_recs(&u);
	blocks = encode_v3(&u, r, 15, &parts);
	ck_assert_uint_eq(parts, 2);
	za_ckpt_reader_init(&rd);
	ck_assert_int_eq(za_ckpt_block_decode(blocks, BLK, &h0, got), 0);
	ck_assert_int_eq(za_ckpt_reader_add(&rd, &h0, got), 0);
	ck_assert_int_eq(za_ckpt_block_decode(blocks + BLK, BLK, &h1, got), 0);
	x = h1;
	x.version = 2;
	ck_assert_int_eq(za_ckpt_block_encode(&x, got, blk), 0);
	ck_assert_int_eq(za_ckpt_block_decode(blk, BLK, &x, got), 0);
	ck_assert_uint_eq(x.version, 2);
	ck_assert_int_eq(za_ckpt_reader_add(&rd, &x, got), -EBADMSG);
	ck_assert_int_eq(za_ckpt_reader_add(&rd, &h1, got), 0);
	ck_assert_int_eq(za_ckpt_reader_done(&rd), 0);
	free(blocks);
	free(r);

	/* Page records going backwards across parts. */
	check_backwards((struct za_ckpt_hdr){ .version = 3,
					      .nr_table_parts = 1,
					      .nr_map_extents = 900,
					      .map_levels = 3 },
			ZA_CKPT_REC_PAGE);
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

START_TEST(test_reader_refuses_mixtures)
{
	const struct shape s = { "x", 250, 20, 1u << 20, 0 };
	struct za_ckpt_rec *r, *r2;
	struct za_ckpt_reader rd;
	uint8_t *a, *b;
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
	check_backwards((struct za_ckpt_hdr){ 0 }, ZA_CKPT_REC_DATA);
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

/*
 * Version 4: a version 3 checkpoint with count records after the unmap
 * records. Encoded with @nr_counts counts (groups 3, 5, 7, ...) into new
 * blocks; *@parts set; *@all the records in order (the caller frees).
 */
static uint8_t *encode_v4(const struct v3_shape *v, uint64_t nr_counts,
			  uint64_t id, uint32_t *parts,
			  struct za_ckpt_rec **all)
{
	struct za_ckpt_rec *r = make_v3_recs(v);
	uint64_t n = v->s.extents + v->s.unmaps, i;
	struct za_ckpt_writer w;
	uint8_t *blocks;

	r = realloc(r, (n + nr_counts + 1) * sizeof(*r));
	ck_assert_ptr_nonnull(r);
	for (i = 0; i < nr_counts; i++)
		r[n + i] = (struct za_ckpt_rec){ .type = ZA_CKPT_REC_COUNT,
						 .nr_blocks = 1 + rnd() % 5000,
						 .group = 3 + 2 * i };
	*parts = za_ckpt_nr_parts(v->s.extents, v->s.unmaps + nr_counts);
	blocks = malloc((size_t)*parts * BLK);
	ck_assert_ptr_nonnull(blocks);
	ck_assert_int_eq(za_ckpt_writer_init(&w, id, 900 + id, v->s.size_blocks,
					     v->s.extents, v->s.unmaps, blocks),
			 0);
	w.h.version = 4;
	w.h.nr_table_parts = 1;
	w.h.nr_map_extents = v->map_extents;
	w.h.map_levels = v->levels;
	w.h.nr_counts = nr_counts;
	for (i = 0; i < n + nr_counts; i++)
		ck_assert_int_eq(za_ckpt_writer_add(&w, &r[i]), 0);
	ck_assert_int_eq(za_ckpt_writer_finish(&w), 0);
	*all = r;
	return blocks;
}

/* Version 4 through the writer, the decoder and the reader, for every
 * version 3 shape with 0, 1 and 250 counts. */
START_TEST(test_v4_round_trip)
{
	static const uint64_t counts[] = { 0, 1, 250 };
	const struct v3_shape *v = &v3_shapes[_i];
	unsigned c;

	rng = 1600 + (uint64_t)_i;
	for (c = 0; c < 3; c++) {
		struct za_ckpt_rec *r;
		struct za_ckpt_reader rd;
		struct za_ckpt_hdr h;
		uint8_t *blocks;
		uint32_t parts, p;
		uint64_t idx = 0;

		blocks = encode_v4(v, counts[c], 21, &parts, &r);
		za_ckpt_reader_init(&rd);
		for (p = 0; p < parts; p++) {
			uint8_t *b = blocks + (size_t)p * BLK;

			ck_assert_uint_eq(za_get_le32(b + 8), 4);
			ck_assert(za_all_zero(b + 81, 7));
			ck_assert_uint_eq(za_get_le64(b + 88), counts[c]);
			check_part(b, r, &idx, &rd, &h);
			ck_assert_uint_eq(h.version, 4);
			ck_assert_uint_eq(h.nr_counts, counts[c]);
			ck_assert_uint_eq(h.map_levels, v->levels);
		}
		ck_assert_uint_eq(idx, v->s.extents + v->s.unmaps + counts[c]);
		ck_assert_int_eq(za_ckpt_reader_done(&rd), 0);
		ck_assert_uint_eq(rd.counts, counts[c]);
		free(blocks);
		free(r);
	}
}
END_TEST

/* A version 4 part's own rules behind a valid CRC, and every bit flip. */
START_TEST(test_v4_fields_checked_behind_crc)
{
	/* 30 page records, 3 unmaps, 20 counts: records 33 to 52. */
	const struct v3_shape v = { { "x", 30, 3, 100000, 0 }, 3000, 2 };
	struct za_ckpt_rec *r, got[ZA_CKPT_RECS_PER_BLOCK];
	struct za_ckpt_hdr h;
	uint8_t *b, saved[BLK];
	uint32_t parts;
	unsigned i, off;
	const unsigned c0 = 96 + 40 * 33, c1 = c0 + 40;
	const struct {
		const char *what;
		unsigned off, len;
		uint64_t val;
		int ok;
	} cases[] = {
		{ "a count with an lba", c0 + 8, 8, 1, 0 },
		{ "a count with a position", c0 + 32, 8, 1, 0 },
		{ "a count of zero", c0 + 16, 8, 0, 0 },
		{ "a count past the largest volume", c0 + 16, 8,
		  ZA_CKPT_MAX_SIZE_BLOCKS + 1, 0 },
		{ "the largest count", c0 + 16, 8, ZA_CKPT_MAX_SIZE_BLOCKS, 1 },
		{ "a count of group 0", c0 + 24, 8, 0, 0 },
		{ "counts not increasing", c1 + 24, 8, 3, 0 },
		{ "counts increasing by one", c1 + 24, 8, 4, 1 },
		{ "an unmap among counts", c1, 1, ZA_CKPT_REC_UNMAP, 0 },
		{ "a count among unmaps", 96 + 40 * 32, 1, ZA_CKPT_REC_COUNT,
		  0 },
		{ "a count among page records", 96, 1, ZA_CKPT_REC_COUNT, 0 },
		{ "one count fewer", 88, 8, 19, 0 },
		{ "as version 3", 8, 4, 3, 0 },
	};

	rng = 1700;
	b = encode_v4(&v, 20, 22, &parts, &r);
	ck_assert_uint_eq(parts, 1);
	ck_assert_int_eq(za_ckpt_block_decode(b, BLK, &h, got), 0);
	memcpy(saved, b, BLK);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		poke(b, cases[i].off, cases[i].len, cases[i].val);
		ck_assert_msg(za_ckpt_block_decode(b, BLK, &h, got) ==
				      (cases[i].ok ? 0 : -EBADMSG),
			      "%s: %s", cases[i].what,
			      cases[i].ok ? "refused" : "accepted");
		memcpy(b, saved, BLK);
	}
	for (off = 81; off < 88; off++) {
		b[off] = 0x20;
		fix_crc(b);
		ck_assert_msg(za_ckpt_block_decode(b, BLK, &h, got) == -EBADMSG,
			      "byte %u is reserved but was accepted", off);
		memcpy(b, saved, BLK);
	}
	check_flips(b, "v4", 0);
	free(b);
	free(r);
}
END_TEST

/* Across parts the counts go on increasing, and come whole. */
START_TEST(test_v4_reader_across_parts)
{
	const struct v3_shape v = { { "x", 150, 10, 1u << 20, 0 }, 9000, 2 };
	struct za_ckpt_rec *r, got[ZA_CKPT_RECS_PER_BLOCK];
	struct za_ckpt_reader rd;
	struct za_ckpt_hdr h;
	uint8_t *b;
	uint32_t parts, p;

	rng = 1800;
	/* Parts: 100 pages; 50 pages, 10 unmaps, 40 counts; 100; 60. */
	b = encode_v4(&v, 200, 23, &parts, &r);
	ck_assert_uint_eq(parts, 4);
	/* The first count of part 2 made no greater than the last of part
	 * 1: each part is fine alone, the reader refuses them together. */
	poke(b + 2 * BLK, 96 + 24, 8, 3 + 2 * 39);
	fix_crc(b + 2 * BLK);
	ck_assert_int_eq(za_ckpt_block_decode(b + 2 * BLK, BLK, &h, got), 0);
	za_ckpt_reader_init(&rd);
	for (p = 0; p < 2; p++) {
		ck_assert_int_eq(
			za_ckpt_block_decode(b + p * BLK, BLK, &h, got), 0);
		ck_assert_int_eq(za_ckpt_reader_add(&rd, &h, got), 0);
	}
	ck_assert_int_eq(za_ckpt_block_decode(b + 2 * BLK, BLK, &h, got), 0);
	ck_assert_int_eq(za_ckpt_reader_add(&rd, &h, got), -EBADMSG);
	/* A part missing at the end. */
	free(b);
	free(r);
	b = encode_v4(&v, 200, 24, &parts, &r);
	za_ckpt_reader_init(&rd);
	for (p = 0; p < 3; p++) {
		ck_assert_int_eq(
			za_ckpt_block_decode(b + p * BLK, BLK, &h, got), 0);
		ck_assert_int_eq(za_ckpt_reader_add(&rd, &h, got), 0);
	}
	ck_assert_int_eq(za_ckpt_reader_done(&rd), -EBADMSG);
	free(b);
	free(r);
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
	tcase_add_loop_test(tc, test_v3_round_trip, 0, NR_V3_SHAPES);
	tcase_add_test(tc, test_v3_every_bit_flip_rejected);
	tcase_add_test(tc, test_v3_fields_checked_behind_crc);
	tcase_add_test(tc, test_v3_writer_and_encoder);
	tcase_add_test(tc, test_v3_reader_refuses_mixtures);
	tcase_add_loop_test(tc, test_v4_round_trip, 0, NR_V3_SHAPES);
	tcase_add_test(tc, test_v4_fields_checked_behind_crc);
	tcase_add_test(tc, test_v4_reader_across_parts);
	tcase_add_test(tc, test_truncated_and_garbage);
	tcase_add_test(tc, test_reader_refuses_mixtures);
	tcase_add_test(tc, test_writer_refuses_bad_input);
	suite_add_tcase(s, tc);
	return trun(s);
}
