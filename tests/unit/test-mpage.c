// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test-mpage.c - the map page codec (mpage.h): round trips of page shapes
 * (leaves and interior pages at every level, one record to a full page,
 * adjacent records and gaps, values at their limits) with every field
 * found at its documented offset, canonical re-encoding, every single-bit
 * flip rejected with the outputs left alone, every field's range, the
 * record types a level holds, records out of order or overlapping, lo and
 * hi that do not match the records, reserved bytes and the slots after
 * the records behind a valid CRC, lengths, magic and version, and an
 * encoder that refuses what the decoder would. How pages make a tree (a
 * child's level and range against the record naming it) is the caller's
 * to check, and is not tested here.
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

#define BLK ZA_MPAGE_BYTES
#define MAXR ZA_MPAGE_MAX_RECS
#define REC(i) (96u + 40u * (i)) /* record i's offset */

static uint64_t rng = 1;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void fix_crc(uint8_t *b)
{
	za_put_le32(b + 12, za_crc32c_zeroed(b, BLK, 12));
}

/* A page shape: its level, its records, where it starts. */
struct shape {
	const char *name;
	uint8_t level;
	uint32_t nr_recs;
	uint64_t lo; /* ignored when top */
	int top; /* ends at ZA_CKPT_MAX_SIZE_BLOCKS, groups and positions
		  * at their limits */
	int tight; /* records of one block, no gaps */
};

static const struct shape shapes[] = {
	{ "leaf, one extent", 0, 1, 0, 0, 0 },
	{ "leaf, one block at 0", 0, 1, 0, 0, 1 },
	{ "leaf, some extents", 0, 37, 12345, 0, 0 },
	{ "leaf, full", 0, MAXR, 1u << 20, 0, 0 },
	{ "leaf, full, every block its own extent", 0, MAXR, 7, 0, 1 },
	{ "leaf at the top of the largest volume", 0, MAXR, 0, 1, 0 },
	{ "level 1, one child", 1, 1, 4096, 0, 0 },
	{ "level 1, full", 1, MAXR, 0, 0, 0 },
	{ "level 2", 2, 50, 999, 0, 0 },
	{ "level 3, adjacent children", 3, 64, 1, 0, 1 },
	{ "the top level, full", ZA_MPAGE_MAX_LEVEL, MAXR, 77, 0, 0 },
	{ "the top level at the top", ZA_MPAGE_MAX_LEVEL, 3, 0, 1, 0 },
};

#define NR_SHAPES (int)(sizeof(shapes) / sizeof(shapes[0]))

/* The page of shape @s into @h and @recs. */
static void make_page(const struct shape *s, struct za_mpage_hdr *h,
		      struct za_ckpt_rec *recs)
{
	uint64_t lba = s->lo, span;
	uint32_t i;

	memset(recs, 0, MAXR * sizeof(*recs));
	for (i = 0; i < s->nr_recs; i++) {
		struct za_ckpt_rec *r = &recs[i];

		if (i && !s->tight)
			lba += rnd() % 3; /* a gap, or adjacent */
		r->lba = lba;
		r->nr_blocks = s->tight ? 1 : 1 + rnd() % 5000;
		lba += r->nr_blocks;
		if (s->level) {
			r->type = ZA_CKPT_REC_PAGE;
			r->group = s->top ? UINT64_MAX : 1 + rnd() % 50;
			r->pos = s->top ? UINT64_MAX - 1 : rnd() % 100000;
		} else {
			r->type = rnd() % 3 ? ZA_CKPT_REC_DATA :
					      ZA_CKPT_REC_JOURNAL;
			r->group = s->top ? UINT64_MAX - rnd() % 4 :
					    1 + rnd() % 50;
			/* The largest position whose blocks do not wrap. */
			r->pos = s->top ? UINT64_MAX - r->nr_blocks :
					  rnd() % 100000;
		}
	}
	span = lba - s->lo;
	if (s->top) /* moved up to end at the largest volume's end */
		for (i = 0; i < s->nr_recs; i++)
			recs[i].lba += ZA_CKPT_MAX_SIZE_BLOCKS - span - s->lo;
	*h = (struct za_mpage_hdr){
		.ckpt_id = s->top ? UINT64_MAX : 1 + rnd() % 1000,
		.lo = recs[0].lba,
		.hi = recs[s->nr_recs - 1].lba + recs[s->nr_recs - 1].nr_blocks,
		.level = s->level,
		.nr_recs = s->nr_recs,
	};
	if (s->top)
		ck_assert_uint_eq(h->hi, ZA_CKPT_MAX_SIZE_BLOCKS);
}

/* The fields at their documented offsets, read here independently. */
static void assert_layout(const uint8_t *b, const struct za_mpage_hdr *h,
			  const struct za_ckpt_rec *recs)
{
	uint32_t i;

	ck_assert_mem_eq(b, "ZAMAPPAG", 8);
	ck_assert_uint_eq(za_get_le32(b + 8), 1);
	ck_assert_uint_eq(za_get_le32(b + 12), za_crc32c_zeroed(b, BLK, 12));
	ck_assert_uint_eq(za_get_le64(b + 16), h->ckpt_id);
	ck_assert_uint_eq(za_get_le64(b + 24), h->lo);
	ck_assert_uint_eq(za_get_le64(b + 32), h->hi);
	ck_assert_uint_eq(b[40], h->level);
	ck_assert(za_all_zero(b + 41, 3));
	ck_assert_uint_eq(za_get_le32(b + 44), h->nr_recs);
	ck_assert(za_all_zero(b + 48, 48));
	for (i = 0; i < h->nr_recs; i++) {
		const uint8_t *p = b + REC(i);

		ck_assert_uint_eq(p[0], recs[i].type);
		ck_assert(za_all_zero(p + 1, 7));
		ck_assert_uint_eq(za_get_le64(p + 8), recs[i].lba);
		ck_assert_uint_eq(za_get_le64(p + 16), recs[i].nr_blocks);
		ck_assert_uint_eq(za_get_le64(p + 24), recs[i].group);
		ck_assert_uint_eq(za_get_le64(p + 32), recs[i].pos);
	}
	ck_assert(za_all_zero(b + REC(h->nr_recs), BLK - REC(h->nr_recs)));
}

static void assert_recs_eq(const struct za_ckpt_rec *a,
			   const struct za_ckpt_rec *b, uint32_t n)
{
	uint32_t i;

	for (i = 0; i < n; i++) {
		ck_assert_uint_eq(a[i].type, b[i].type);
		ck_assert_uint_eq(a[i].lba, b[i].lba);
		ck_assert_uint_eq(a[i].nr_blocks, b[i].nr_blocks);
		ck_assert_uint_eq(a[i].group, b[i].group);
		ck_assert_uint_eq(a[i].pos, b[i].pos);
	}
}

/*
 * Decode @b (@len bytes) into outputs full of a pattern: the result, and,
 * on an error, outputs still holding the pattern (nothing written).
 */
static int decode_untouched(const uint8_t *b, size_t len)
{
	static struct za_ckpt_rec recs[MAXR], pat_recs[MAXR];
	struct za_mpage_hdr h, pat_h;
	int ret;

	memset(&pat_h, 0x5a, sizeof(pat_h));
	memset(pat_recs, 0x5a, sizeof(pat_recs));
	h = pat_h;
	memcpy(recs, pat_recs, sizeof(recs));
	ret = za_mpage_decode(b, len, &h, recs);
	if (ret) {
		ck_assert_msg(!memcmp(&h, &pat_h, sizeof(h)) &&
				      !memcmp(recs, pat_recs, sizeof(recs)),
			      "a refused page wrote to the outputs");
	}
	return ret;
}

START_TEST(test_round_trip)
{
	const struct shape *s = &shapes[_i];
	struct za_ckpt_rec recs[MAXR], got[MAXR];
	struct za_mpage_hdr h, d;
	uint8_t b[BLK], again[BLK];

	rng = 100 + (uint64_t)_i;
	make_page(s, &h, recs);
	memset(b, 0xa5, sizeof(b)); /* the encoder writes every byte */
	ck_assert_int_eq(za_mpage_encode(&h, recs, b), 0);
	assert_layout(b, &h, recs);
	memset(&d, 0x5a, sizeof(d));
	memset(got, 0x5a, sizeof(got));
	ck_assert_int_eq(za_mpage_decode(b, BLK, &d, got), 0);
	ck_assert_uint_eq(d.ckpt_id, h.ckpt_id);
	ck_assert_uint_eq(d.lo, h.lo);
	ck_assert_uint_eq(d.hi, h.hi);
	ck_assert_uint_eq(d.level, h.level);
	ck_assert_uint_eq(d.nr_recs, h.nr_recs);
	assert_recs_eq(got, recs, h.nr_recs);
	/* Only the records there are are written. */
	if (h.nr_recs < MAXR)
		ck_assert_uint_eq(got[h.nr_recs].lba, 0x5a5a5a5a5a5a5a5aull);
	/* Canonical: what decodes encodes back to the same bytes. */
	memset(again, 0xa5, sizeof(again));
	ck_assert_int_eq(za_mpage_encode(&d, got, again), 0);
	ck_assert_mem_eq(again, b, BLK);
}
END_TEST

/*
 * Every single-bit flip is refused: in the magic as not a map page, in
 * the version as another version, anywhere else as a bad page; the
 * outputs are left alone.
 */
START_TEST(test_every_bit_flip_rejected)
{
	const struct shape *s = &shapes[_i];
	struct za_ckpt_rec recs[MAXR];
	struct za_mpage_hdr h;
	uint8_t b[BLK];
	size_t bit;

	rng = 200 + (uint64_t)_i;
	make_page(s, &h, recs);
	ck_assert_int_eq(za_mpage_encode(&h, recs, b), 0);
	for (bit = 0; bit < BLK * 8; bit++) {
		int ret, want = bit < 64 ? -ENOENT :
				bit < 96 ? -EPROTONOSUPPORT :
					   -EBADMSG;

		b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		ret = decode_untouched(b, BLK);
		ck_assert_msg(ret == want, "%s: bit %zu: decode gave %d",
			      s->name, bit, ret);
		b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	}
	ck_assert_int_eq(decode_untouched(b, BLK), 0);
}
END_TEST

/*
 * The fixtures of the field tests, behind a valid CRC:
 *   0, a leaf of checkpoint 9 covering [100, 250):
 *      DATA 100+10 (group 5, pos 0), JOURNAL 110+5 (6, 20),
 *      DATA 200+50 (5, 40);
 *   1, a page of level 2 of checkpoint 9 covering [1000, 2000):
 *      PAGE 1000+100 (7, 3), PAGE 1100+900 (7, 4).
 */
static void fixture(int which, uint8_t *b)
{
	static const struct za_ckpt_rec leaf[] = {
		{ ZA_CKPT_REC_DATA, 100, 10, 5, 0 },
		{ ZA_CKPT_REC_JOURNAL, 110, 5, 6, 20 },
		{ ZA_CKPT_REC_DATA, 200, 50, 5, 40 },
	};
	static const struct za_ckpt_rec node[] = {
		{ ZA_CKPT_REC_PAGE, 1000, 100, 7, 3 },
		{ ZA_CKPT_REC_PAGE, 1100, 900, 7, 4 },
	};
	struct za_mpage_hdr h = { .ckpt_id = 9 };

	if (which == 0) {
		h.lo = 100;
		h.hi = 250;
		h.nr_recs = 3;
		ck_assert_int_eq(za_mpage_encode(&h, leaf, b), 0);
	} else {
		h.lo = 1000;
		h.hi = 2000;
		h.level = 2;
		h.nr_recs = 2;
		ck_assert_int_eq(za_mpage_encode(&h, node, b), 0);
	}
}

/* A little-endian field of @len bytes at @off, of fixture @which. */
struct poke {
	const char *what;
	int which;
	unsigned off, len;
	uint64_t val;
};

static void apply(uint8_t *b, const struct poke *k)
{
	if (k->len == 8)
		za_put_le64(b + k->off, k->val);
	else if (k->len == 4)
		za_put_le32(b + k->off, (uint32_t)k->val);
	else
		b[k->off] = (uint8_t)k->val;
}

/* Each changes one field of a fixture; the decoder must refuse it. */
static const struct poke refused[] = {
	{ "ckpt_id 0", 0, 16, 8, 0 },
	{ "lo below the first record", 0, 24, 8, 99 },
	{ "lo above the first record", 0, 24, 8, 101 },
	{ "lo 0", 0, 24, 8, 0 },
	{ "lo at hi", 0, 24, 8, 250 },
	{ "lo past hi", 0, 24, 8, UINT64_MAX },
	{ "hi short of the last end", 0, 32, 8, 249 },
	{ "hi past the last end", 0, 32, 8, 251 },
	{ "hi 0", 0, 32, 8, 0 },
	{ "hi past the largest volume", 0, 32, 8, ZA_CKPT_MAX_SIZE_BLOCKS + 1 },
	{ "hi max", 0, 32, 8, UINT64_MAX },
	{ "a leaf at level 1", 0, 40, 1, 1 },
	{ "level 8", 0, 40, 1, ZA_MPAGE_MAX_LEVEL + 1 },
	{ "level 255", 0, 40, 1, 255 },
	{ "nr_recs 0", 0, 44, 4, 0 },
	{ "nr_recs short", 0, 44, 4, 2 },
	{ "nr_recs over", 0, 44, 4, 4 },
	{ "nr_recs 101", 0, 44, 4, MAXR + 1 },
	{ "nr_recs max", 0, 44, 4, UINT32_MAX },
	{ "type 0", 0, REC(0), 1, 0 },
	{ "an unmap record in a leaf", 0, REC(1), 1, ZA_CKPT_REC_UNMAP },
	{ "a page record in a leaf", 0, REC(1), 1, ZA_CKPT_REC_PAGE },
	{ "type 5", 0, REC(2), 1, 5 },
	{ "type 255", 0, REC(2), 1, 255 },
	{ "nr_blocks 0", 0, REC(1) + 16, 8, 0 },
	{ "nr_blocks max", 0, REC(2) + 16, 8, UINT64_MAX },
	{ "overlapping the one before", 0, REC(1) + 8, 8, 109 },
	{ "before the one before", 0, REC(1) + 8, 8, 50 },
	{ "the same lba as the one before", 0, REC(2) + 8, 8, 110 },
	{ "overlapping the one after", 0, REC(1) + 16, 8, 91 },
	{ "the last short of hi", 0, REC(2) + 16, 8, 49 },
	{ "the last past hi", 0, REC(2) + 16, 8, 51 },
	{ "an extent's blocks wrap", 0, REC(2) + 32, 8, UINT64_MAX - 49 },
	{ "an extent's pos max", 0, REC(0) + 32, 8, UINT64_MAX },
	{ "extents at level 2", 1, 40, 1, 0 },
	{ "a data extent among pages", 1, REC(0), 1, ZA_CKPT_REC_DATA },
	{ "a journal extent among pages", 1, REC(1), 1, ZA_CKPT_REC_JOURNAL },
	{ "an unmap among pages", 1, REC(1), 1, ZA_CKPT_REC_UNMAP },
	{ "a page's pos max", 1, REC(1) + 32, 8, UINT64_MAX },
	{ "pages overlapping", 1, REC(0) + 16, 8, 101 },
	{ "pages out of order", 1, REC(1) + 8, 8, 900 },
	{ "level 8 over pages", 1, 40, 1, ZA_MPAGE_MAX_LEVEL + 1 },
};

/* ...and these, to show that each refusal above is for its own reason. */
static const struct poke accepted[] = {
	{ "ckpt_id 1", 0, 16, 8, 1 },
	{ "ckpt_id max", 0, 16, 8, UINT64_MAX },
	{ "an extent's pos 0", 0, REC(1) + 32, 8, 0 },
	{ "the largest pos that does not wrap", 0, REC(2) + 32, 8,
	  UINT64_MAX - 50 },
	{ "group 0", 0, REC(0) + 24, 8, 0 },
	{ "group max", 0, REC(0) + 24, 8, UINT64_MAX },
	{ "journal for data", 0, REC(0), 1, ZA_CKPT_REC_JOURNAL },
	{ "a gap before", 0, REC(1) + 8, 8, 111 },
	{ "the gap closed", 0, REC(1) + 16, 8, 90 },
	{ "level 1", 1, 40, 1, 1 },
	{ "the top level", 1, 40, 1, ZA_MPAGE_MAX_LEVEL },
	{ "a page's pos max - 1", 1, REC(1) + 32, 8, UINT64_MAX - 1 },
	{ "a page's pos 0", 1, REC(0) + 32, 8, 0 },
	{ "a page's group max", 1, REC(0) + 24, 8, UINT64_MAX },
	{ "a gap between pages", 1, REC(0) + 16, 8, 99 },
};

START_TEST(test_fields_checked_behind_crc)
{
	uint8_t b[BLK];
	unsigned i;

	for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		fixture(refused[i].which, b);
		ck_assert_int_eq(decode_untouched(b, BLK), 0);
		apply(b, &refused[i]);
		fix_crc(b);
		ck_assert_msg(decode_untouched(b, BLK) == -EBADMSG,
			      "%s was accepted", refused[i].what);
	}
	for (i = 0; i < sizeof(accepted) / sizeof(accepted[0]); i++) {
		fixture(accepted[i].which, b);
		apply(b, &accepted[i]);
		fix_crc(b);
		ck_assert_msg(decode_untouched(b, BLK) == 0, "%s was refused",
			      accepted[i].what);
	}
}
END_TEST

/*
 * Every byte that must be zero, set alone behind a valid CRC: the
 * reserved header bytes, the records' padding, the slots after them.
 */
START_TEST(test_reserved_bytes)
{
	uint8_t b[BLK], saved[BLK];
	unsigned off, n = 0;

	fixture(0, saved);
	for (off = 16; off < BLK; off++) {
		int reserved =
			(off >= 41 && off < 44) || (off >= 48 && off < 96) ||
			(off >= REC(0) && off < REC(3) &&
			 (off - REC(0)) % 40 >= 1 && (off - REC(0)) % 40 < 8) ||
			off >= REC(3);

		if (!reserved)
			continue;
		memcpy(b, saved, BLK);
		b[off] = 0x01;
		fix_crc(b);
		ck_assert_msg(decode_untouched(b, BLK) == -EBADMSG,
			      "byte %u is reserved but was accepted", off);
		n++;
	}
	ck_assert_uint_eq(n, 3 + 48 + 3 * 7 + (BLK - REC(3)));
}
END_TEST

/*
 * The magic first (-ENOENT), then the version (-EPROTONOSUPPORT, before
 * the length and the CRC), then a page of exactly one block.
 */
START_TEST(test_magic_version_length)
{
	struct za_ckpt_hdr ch = { .id = 1, .size_blocks = 10, .nr_parts = 1 };
	uint8_t b[BLK + 8], saved[BLK + 8], g[BLK];
	size_t len;
	unsigned i, k;

	fixture(0, b);
	memcpy(saved, b, sizeof(b));
	for (len = 0; len < BLK; len += len < 16 ? 1 : 97)
		ck_assert_int_eq(decode_untouched(b, len),
				 len < 8 ? -ENOENT : -EBADMSG);
	ck_assert_int_eq(decode_untouched(b, BLK - 1), -EBADMSG);
	ck_assert_int_eq(decode_untouched(b, BLK + 1), -EBADMSG);
	ck_assert_int_eq(decode_untouched(b, BLK + 8), -EBADMSG);
	ck_assert_int_eq(decode_untouched(b, BLK), 0);
	/* Any magic byte changed: not a map page, whatever follows. */
	for (i = 0; i < 8; i++) {
		b[i] ^= 0x20;
		ck_assert_int_eq(decode_untouched(b, BLK), -ENOENT);
		ck_assert_int_eq(decode_untouched(b, 12), -ENOENT);
		b[i] ^= 0x20;
	}
	/* Another version is refused as such, at any length from 12. */
	for (i = 0; i < 4; i++) {
		static const uint32_t v[] = { 0, 2, 0x100, UINT32_MAX };

		za_put_le32(b + 8, v[i]);
		ck_assert_int_eq(decode_untouched(b, BLK), -EPROTONOSUPPORT);
		ck_assert_int_eq(decode_untouched(b, 12), -EPROTONOSUPPORT);
		fix_crc(b);
		ck_assert_int_eq(decode_untouched(b, BLK), -EPROTONOSUPPORT);
		memcpy(b, saved, sizeof(b));
	}
	/* A bad CRC alone. */
	b[REC(0) + 8] ^= 1;
	ck_assert_int_eq(decode_untouched(b, BLK), -EBADMSG);
	/* Zeroes, garbage, and a checkpoint block are not map pages. */
	memset(g, 0, BLK);
	ck_assert_int_eq(decode_untouched(g, BLK), -ENOENT);
	ck_assert_int_eq(za_ckpt_block_encode(&ch, NULL, g), 0);
	ck_assert_int_eq(decode_untouched(g, BLK), -ENOENT);
	rng = 300;
	for (i = 0; i < 200; i++) {
		for (k = 0; k < BLK; k += 8)
			za_put_le64(g + k, rnd());
		ck_assert_int_eq(decode_untouched(g, BLK), -ENOENT);
		/* With the magic, the version and a valid CRC: still refused
		 * (random fields are out of range). */
		memcpy(g, saved, 12);
		fix_crc(g);
		ck_assert_int_eq(decode_untouched(g, BLK), -EBADMSG);
	}
}
END_TEST

/* The encoder refuses (-EINVAL) what the decoder would. */
START_TEST(test_encoder_refuses)
{
	struct za_ckpt_rec r[2] = {
		{ ZA_CKPT_REC_DATA, 10, 5, 1, 0 },
		{ ZA_CKPT_REC_DATA, 20, 5, 1, 5 },
	};
	struct za_mpage_hdr h = { 1, 10, 25, 0, 2 }, x;
	uint8_t b[BLK];

	ck_assert_int_eq(za_mpage_encode(&h, r, b), 0);
	x = h;
	x.ckpt_id = 0;
	ck_assert_int_eq(za_mpage_encode(&x, r, b), -EINVAL);
	x = h;
	x.lo = 9;
	ck_assert_int_eq(za_mpage_encode(&x, r, b), -EINVAL);
	x = h;
	x.hi = 26;
	ck_assert_int_eq(za_mpage_encode(&x, r, b), -EINVAL);
	x = h;
	x.level = 1;
	ck_assert_int_eq(za_mpage_encode(&x, r, b), -EINVAL);
	x.level = ZA_MPAGE_MAX_LEVEL + 1;
	ck_assert_int_eq(za_mpage_encode(&x, r, b), -EINVAL);
	x = h;
	x.nr_recs = 0;
	ck_assert_int_eq(za_mpage_encode(&x, r, b), -EINVAL);
	x.nr_recs = MAXR + 1;
	ck_assert_int_eq(za_mpage_encode(&x, r, b), -EINVAL);
	x.nr_recs = 1; /* hi is then the first record's end */
	x.hi = 15;
	ck_assert_int_eq(za_mpage_encode(&x, r, b), 0);
	r[1].lba = 14;
	ck_assert_int_eq(za_mpage_encode(&h, r, b), -EINVAL);
	r[1].lba = 20;
	r[1].type = ZA_CKPT_REC_PAGE;
	ck_assert_int_eq(za_mpage_encode(&h, r, b), -EINVAL);
	/* Pages at level 1: then it is fine, but not with an extent. */
	r[0].type = ZA_CKPT_REC_PAGE;
	x = h;
	x.level = 1;
	ck_assert_int_eq(za_mpage_encode(&x, r, b), 0);
	r[0].pos = UINT64_MAX;
	ck_assert_int_eq(za_mpage_encode(&x, r, b), -EINVAL);
	r[0].pos = 0;
	r[0].type = ZA_CKPT_REC_JOURNAL;
	ck_assert_int_eq(za_mpage_encode(&x, r, b), -EINVAL);
	/* Past the largest volume, records and hi agreeing. */
	r[0] = (struct za_ckpt_rec){ ZA_CKPT_REC_DATA,
				     ZA_CKPT_MAX_SIZE_BLOCKS - 10, 11, 1, 0 };
	x = (struct za_mpage_hdr){ 1, ZA_CKPT_MAX_SIZE_BLOCKS - 10,
				   ZA_CKPT_MAX_SIZE_BLOCKS + 1, 0, 1 };
	ck_assert_int_eq(za_mpage_encode(&x, r, b), -EINVAL);
	r[0].nr_blocks = 10;
	x.hi = ZA_CKPT_MAX_SIZE_BLOCKS;
	ck_assert_int_eq(za_mpage_encode(&x, r, b), 0);
	/* ...and the same behind a valid CRC. */
	za_put_le64(b + 32, ZA_CKPT_MAX_SIZE_BLOCKS + 1);
	za_put_le64(b + REC(0) + 16, 11);
	fix_crc(b);
	ck_assert_int_eq(decode_untouched(b, BLK), -EBADMSG);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("mpage");
	TCase *tc = tcase_create("codec");

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_round_trip, 0, NR_SHAPES);
	tcase_add_loop_test(tc, test_every_bit_flip_rejected, 0, NR_SHAPES);
	tcase_add_test(tc, test_fields_checked_behind_crc);
	tcase_add_test(tc, test_reserved_bytes);
	tcase_add_test(tc, test_magic_version_length);
	tcase_add_test(tc, test_encoder_refuses);
	suite_add_tcase(s, tc);
	return trun(s);
}
