// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test-anchor.c - the checkpoint anchor codec (anchor.h): round trips of
 * anchor shapes (no checkpoint; 0, 1, 2 and 3 segments; widths 1 to 7;
 * absent columns; the revoked flag; values at their limits) with every
 * field found at its documented offset, canonical re-encoding, all zero
 * bytes taken as no anchor, every single-bit flip rejected, an unknown
 * version, every rule and every reserved byte checked behind a valid CRC,
 * an encoder that refuses what the decoder would, and za_anchor_same().
 * Whether the members, zones and segments exist in an array is the
 * volume's to check, and is not tested here.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "anchor.h"
#include "byteorder.h"
#include "crc.h"
#include "tap.h"

#define BYTES ZA_ANCHOR_BYTES
#define ABSENT 1024u /* ZA_STRIPE_MEMBER_ABSENT */
#define SLOT(i) (40u + 64u * (i)) /* segment slot i */

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
	za_put_le32(b + 252, za_crc32c(b, 252));
}

/* An anchor shape: its header and, per used slot, a width and which
 * columns are absent (bit c: column c). */
struct shape {
	const char *name;
	uint32_t flags;
	uint64_t ckpt_id, seq;
	uint32_t nr_parts, generation;
	uint8_t nr_segs;
	uint8_t width[ZA_ANCHOR_MAX_SEGS];
	uint8_t absent[ZA_ANCHOR_MAX_SEGS];
	int big; /* ids, stripes, members and zones at their limits */
};

static const struct shape shapes[] = {
	{ "no checkpoint", 0, 0, 0, 0, 0, 0, { 0 }, { 0 }, 0 },
	{ "no checkpoint, generation 7", 0, 0, 0, 0, 7, 0, { 0 }, { 0 }, 0 },
	/* The format does not tie the flag to a checkpoint. */
	{ "no checkpoint, revoked",
	  ZA_ANCHOR_REVOKED,
	  0,
	  0,
	  0,
	  1,
	  0,
	  { 0 },
	  { 0 },
	  0 },
	{ "parts in too many segments", 0, 12, 4000, 900, 3, 0, { 0 }, { 0 }, 0 },
	{ "seq 0", 0, 1, 0, 1, 0, 1, { 3 }, { 0 }, 0 },
	{ "1 segment, width 1", 0, 5, 77, 2, 9, 1, { 1 }, { 0 }, 0 },
	{ "1 segment, width 7", 0, 5, 78, 3, 10, 1, { 7 }, { 0 }, 0 },
	{ "2 segments, widths 3 and 4", 0, 6, 100, 10, 11, 2, { 3, 4 }, { 0 }, 0 },
	{ "3 segments, widths 2, 5, 6",
	  0,
	  7,
	  200,
	  30,
	  12,
	  3,
	  { 2, 5, 6 },
	  { 0 },
	  0 },
	{ "3 segments, width 7", 0, 8, 300, 40, 13, 3, { 7, 7, 7 }, { 0 }, 0 },
	{ "absent columns",
	  0,
	  9,
	  400,
	  5,
	  14,
	  3,
	  { 7, 7, 3 },
	  { 0x41, 0x3f, 0x02 },
	  0 },
	{ "every column absent", 0, 10, 500, 2, 15, 2, { 1, 4 }, { 0x1, 0xf }, 0 },
	{ "revoked",
	  ZA_ANCHOR_REVOKED,
	  11,
	  600,
	  6,
	  16,
	  2,
	  { 4, 4 },
	  { 0x8, 0 },
	  0 },
	{ "at the limits",
	  ZA_ANCHOR_REVOKED,
	  UINT64_MAX,
	  UINT64_MAX,
	  UINT32_MAX,
	  UINT32_MAX,
	  3,
	  { 7, 7, 7 },
	  { 0, 0x40, 0 },
	  1 },
	{ "revoked, not anchored, at the limits",
	  ZA_ANCHOR_REVOKED,
	  UINT64_MAX,
	  UINT64_MAX,
	  UINT32_MAX,
	  UINT32_MAX,
	  0,
	  { 0 },
	  { 0 },
	  1 },
};

#define NR_SHAPES (int)(sizeof(shapes) / sizeof(shapes[0]))

static void make_anchor(const struct shape *sh, struct za_anchor *a)
{
	unsigned i, c;

	memset(a, 0, sizeof(*a));
	a->flags = sh->flags;
	a->ckpt_id = sh->ckpt_id;
	a->seq = sh->seq;
	a->nr_parts = sh->nr_parts;
	a->generation = sh->generation;
	a->nr_segs = sh->nr_segs;
	for (i = 0; i < sh->nr_segs; i++) {
		struct za_anchor_seg *s = &a->segs[i];
		/* Distinct members within a slot: 7 steps of 37 < 1024. */
		unsigned start = (unsigned)(rnd() % 1024);

		s->seg_id = sh->big ? UINT64_MAX - i : 1 + rnd() % 100000;
		s->group_id = sh->big ? UINT64_MAX : 1 + rnd() % 100000;
		s->first_stripe = sh->big ? UINT32_MAX : (uint32_t)rnd();
		s->width = sh->width[i];
		for (c = 0; c < s->width; c++) {
			if (sh->absent[i] & (1u << c)) {
				s->members[c] = ABSENT;
				s->zones[c] = 0;
				continue;
			}
			s->members[c] =
				sh->big ? (uint16_t)(1023 - c) :
					  (uint16_t)((start + 37 * c) % 1024);
			s->zones[c] = sh->big ? UINT32_MAX : (uint32_t)rnd();
		}
	}
	/* Ids drawn at random may collide: not what the shape is about. */
	for (i = 1; i < sh->nr_segs; i++)
		if (a->segs[i].seg_id == a->segs[i - 1].seg_id ||
		    (i == 2 && a->segs[2].seg_id == a->segs[0].seg_id))
			a->segs[i].seg_id += 1000000;
}

/* Garbage where the encoder must not look: past nr_segs and the widths. */
static void spoil_unused(struct za_anchor *a)
{
	unsigned i, c;

	for (i = 0; i < ZA_ANCHOR_MAX_SEGS; i++) {
		struct za_anchor_seg *s = &a->segs[i];

		if (i >= a->nr_segs) {
			memset(s, 0xa5, sizeof(*s));
			continue;
		}
		for (c = s->width; c < ZA_ANCHOR_MAX_WIDTH; c++) {
			s->members[c] = 0xffff;
			s->zones[c] = 0xdeadbeef;
		}
	}
}

/* @a field by field, every unused slot and column zero. */
static void assert_anchor_eq(const struct za_anchor *a,
			     const struct za_anchor *d)
{
	unsigned i, c;

	ck_assert_uint_eq(d->flags, a->flags);
	ck_assert_uint_eq(d->ckpt_id, a->ckpt_id);
	ck_assert_uint_eq(d->seq, a->seq);
	ck_assert_uint_eq(d->nr_parts, a->nr_parts);
	ck_assert_uint_eq(d->generation, a->generation);
	ck_assert_uint_eq(d->nr_segs, a->nr_segs);
	for (i = 0; i < ZA_ANCHOR_MAX_SEGS; i++) {
		const struct za_anchor_seg *s = &a->segs[i], *t = &d->segs[i];
		int used = i < a->nr_segs;

		ck_assert_uint_eq(t->seg_id, used ? s->seg_id : 0);
		ck_assert_uint_eq(t->group_id, used ? s->group_id : 0);
		ck_assert_uint_eq(t->first_stripe, used ? s->first_stripe : 0);
		ck_assert_uint_eq(t->width, used ? s->width : 0);
		for (c = 0; c < ZA_ANCHOR_MAX_WIDTH; c++) {
			used = i < a->nr_segs && c < s->width;
			ck_assert_uint_eq(t->members[c],
					  used ? s->members[c] : 0);
			ck_assert_uint_eq(t->zones[c], used ? s->zones[c] : 0);
		}
	}
}

static void assert_zeroed(const struct za_anchor *a)
{
	static const struct za_anchor zero;

	ck_assert_msg(!memcmp(a, &zero, sizeof(zero)),
		      "the anchor was not zeroed");
}

/* The fields at their documented offsets, read here independently. */
static void assert_layout(const uint8_t *b, const struct za_anchor *a)
{
	unsigned i, c;

	ck_assert_mem_eq(b, "ZAAN", 4);
	ck_assert_uint_eq(za_get_le16(b + 4), 1);
	ck_assert_uint_eq(za_get_le16(b + 6), 0);
	ck_assert_uint_eq(za_get_le32(b + 8), a->flags);
	ck_assert_uint_eq(za_get_le32(b + 12), a->nr_parts);
	ck_assert_uint_eq(za_get_le64(b + 16), a->ckpt_id);
	ck_assert_uint_eq(za_get_le64(b + 24), a->seq);
	ck_assert_uint_eq(za_get_le32(b + 32), a->generation);
	ck_assert_uint_eq(b[36], a->nr_segs);
	ck_assert(za_all_zero(b + 37, 3));
	for (i = 0; i < ZA_ANCHOR_MAX_SEGS; i++) {
		const uint8_t *p = b + SLOT(i);
		const struct za_anchor_seg *s = &a->segs[i];

		if (i >= a->nr_segs) {
			ck_assert(za_all_zero(p, 64));
			continue;
		}
		ck_assert_uint_eq(za_get_le64(p), s->seg_id);
		ck_assert_uint_eq(za_get_le64(p + 8), s->group_id);
		ck_assert_uint_eq(za_get_le32(p + 16), s->first_stripe);
		ck_assert_uint_eq(p[20], s->width);
		ck_assert_uint_eq(p[21], 0);
		for (c = 0; c < ZA_ANCHOR_MAX_WIDTH; c++) {
			int used = c < s->width;

			ck_assert_uint_eq(za_get_le16(p + 22 + 2 * c),
					  used ? s->members[c] : 0);
			ck_assert_uint_eq(za_get_le32(p + 36 + 4 * c),
					  used ? s->zones[c] : 0);
		}
	}
	ck_assert(za_all_zero(b + 232, 20));
	ck_assert_uint_eq(za_get_le32(b + 252), za_crc32c(b, 252));
}

START_TEST(test_round_trip)
{
	const struct shape *sh = &shapes[_i];
	struct za_anchor a, d, spoiled;
	uint8_t b[BYTES], again[BYTES];

	rng = 100 + (uint64_t)_i;
	make_anchor(sh, &a);
	ck_assert_int_eq(za_anchor_encode(&a, b), 0);
	assert_layout(b, &a);
	/* @out is written whatever it held. */
	memset(&d, 0x5a, sizeof(d));
	ck_assert_int_eq(za_anchor_decode(b, &d), 0);
	assert_anchor_eq(&a, &d);
	ck_assert(za_anchor_same(&a, &d));
	/* Canonical: what decodes encodes back to the same bytes. */
	ck_assert_int_eq(za_anchor_encode(&d, again), 0);
	ck_assert_mem_eq(again, b, BYTES);
	/* What lies past nr_segs and the widths is not written. */
	spoiled = a;
	spoil_unused(&spoiled);
	ck_assert_int_eq(za_anchor_encode(&spoiled, again), 0);
	ck_assert_mem_eq(again, b, BYTES);
	ck_assert(za_anchor_same(&spoiled, &d));
}
END_TEST

/* Every single-bit flip of every shape is refused, and leaves no anchor. */
START_TEST(test_every_bit_flip_rejected)
{
	const struct shape *sh = &shapes[_i];
	struct za_anchor a, d;
	uint8_t b[BYTES];
	size_t bit;

	rng = 200 + (uint64_t)_i;
	make_anchor(sh, &a);
	ck_assert_int_eq(za_anchor_encode(&a, b), 0);
	for (bit = 0; bit < BYTES * 8; bit++) {
		int ret, want_version = bit >= 32 && bit < 48;

		b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		memset(&d, 0x5a, sizeof(d));
		ret = za_anchor_decode(b, &d);
		ck_assert_msg(
			ret == (want_version ? -EPROTONOSUPPORT : -EBADMSG),
			"%s: bit %zu: decode gave %d", sh->name, bit, ret);
		assert_zeroed(&d);
		b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	}
	ck_assert_int_eq(za_anchor_decode(b, &d), 0);
}
END_TEST

START_TEST(test_all_zero_is_no_anchor)
{
	struct za_anchor d;
	uint8_t b[BYTES];
	unsigned off, i, k;

	memset(b, 0, BYTES);
	memset(&d, 0x5a, sizeof(d));
	ck_assert_int_eq(za_anchor_decode(b, &d), -ENOENT);
	assert_zeroed(&d);
	/* One byte anywhere is not "no anchor" but a broken one. */
	for (off = 0; off < BYTES; off++) {
		b[off] = 0x01;
		memset(&d, 0x5a, sizeof(d));
		ck_assert_msg(za_anchor_decode(b, &d) == -EBADMSG,
			      "byte %u alone was not refused", off);
		assert_zeroed(&d);
		b[off] = 0;
	}
	/* A valid CRC makes no difference without the magic. */
	fix_crc(b);
	ck_assert_int_eq(za_anchor_decode(b, &d), -EBADMSG);
	for (i = 0; i < 200; i++) {
		for (k = 0; k < BYTES; k += 8)
			za_put_le64(b + k, rnd());
		ck_assert_int_eq(za_anchor_decode(b, &d), -EBADMSG);
		/* With the magic, the version and a valid CRC: still refused
		 * (random fields are out of range). */
		memcpy(b, "ZAAN\x01\x00", 6);
		fix_crc(b);
		ck_assert_int_eq(za_anchor_decode(b, &d), -EBADMSG);
		assert_zeroed(&d);
	}
}
END_TEST

/*
 * The fixture of the field tests: checkpoint 9 at S 1000, 5 parts,
 * generation 3, in two segments of width 3:
 *   slot 0 (40):  segment 11, group 4, first stripe 2,
 *                 members 0 1 2 (at 62), zones 10 11 12 (at 76);
 *   slot 1 (104): segment 12, group 4, first stripe 0,
 *                 members 3 absent 5 (at 126), zones 20 0 22 (at 140);
 *   slot 2 (168): unused.
 */
static void fixture(uint8_t *b, struct za_anchor *a)
{
	memset(a, 0, sizeof(*a));
	a->ckpt_id = 9;
	a->seq = 1000;
	a->nr_parts = 5;
	a->generation = 3;
	a->nr_segs = 2;
	a->segs[0] = (struct za_anchor_seg){ .seg_id = 11,
					     .group_id = 4,
					     .first_stripe = 2,
					     .width = 3,
					     .members = { 0, 1, 2 },
					     .zones = { 10, 11, 12 } };
	a->segs[1] = (struct za_anchor_seg){ .seg_id = 12,
					     .group_id = 4,
					     .first_stripe = 0,
					     .width = 3,
					     .members = { 3, ABSENT, 5 },
					     .zones = { 20, 0, 22 } };
	ck_assert_int_eq(za_anchor_encode(a, b), 0);
}

/* A little-endian field of @len bytes at @off: one change of a record. */
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
	{ "flag 0x2", 8, 4, 0x2 },
	{ "flag 0x80000000", 8, 4, 0x80000000u },
	{ "every flag", 8, 4, UINT32_MAX },
	{ "nr_parts 0 with a checkpoint", 12, 4, 0 },
	{ "no checkpoint, but parts", 16, 8, 0 },
	{ "nr_segs 3, slot 2 empty", 36, 1, 3 },
	{ "nr_segs 4", 36, 1, 4 },
	{ "nr_segs 255", 36, 1, 255 },
	{ "nr_segs 1, slot 1 left", 36, 1, 1 },
	{ "nr_segs 0, slots left", 36, 1, 0 },
	{ "width 0", SLOT(0) + 20, 1, 0 },
	{ "width 8", SLOT(0) + 20, 1, 8 },
	{ "width 255", SLOT(0) + 20, 1, 255 },
	{ "width 2, column 2 left", SLOT(0) + 20, 1, 2 },
	{ "width 4, column 3 empty: member 0 twice", SLOT(0) + 20, 1, 4 },
	{ "member 1025", SLOT(0) + 22, 2, 1025 },
	{ "member 0xffff", SLOT(0) + 22, 2, 0xffff },
	{ "absent member with a zone", SLOT(0) + 22, 2, ABSENT },
	{ "absent column given a zone", SLOT(1) + 36 + 4, 4, 1 },
	{ "member twice", SLOT(0) + 22 + 2, 2, 0 },
	{ "member twice, apart", SLOT(0) + 22 + 4, 2, 0 },
	{ "member twice, across an absent column", SLOT(1) + 22 + 4, 2, 3 },
	{ "seg_id twice", SLOT(1), 8, 11 },
	{ "a member past the width", SLOT(0) + 22 + 6, 2, 7 },
	{ "a zone past the width", SLOT(0) + 36 + 12, 4, 7 },
	{ "the last zone past the width", SLOT(0) + 36 + 24, 4, 1 },
	{ "unused slot's seg_id", SLOT(2), 8, 13 },
	{ "unused slot's width", SLOT(2) + 20, 1, 3 },
	{ "unused slot's last byte", SLOT(2) + 63, 1, 1 },
};

/* ...and these, to show that each refusal above is for its own reason. */
static const struct poke accepted[] = {
	{ "revoked", 8, 4, ZA_ANCHOR_REVOKED },
	{ "nr_parts 1", 12, 4, 1 },
	{ "nr_parts max", 12, 4, UINT32_MAX },
	{ "seq 0", 24, 8, 0 },
	{ "generation 0", 32, 4, 0 },
	{ "generation max", 32, 4, UINT32_MAX },
	{ "member 1023", SLOT(0) + 22, 2, 1023 },
	{ "a member of another segment", SLOT(1) + 22, 2, 0 },
	{ "seg_id 0", SLOT(0), 8, 0 },
	{ "segment ids decreasing", SLOT(1), 8, 10 },
	{ "group_id anything", SLOT(1) + 8, 8, UINT64_MAX },
	{ "first_stripe max", SLOT(0) + 16, 4, UINT32_MAX },
	{ "zone max", SLOT(0) + 36, 4, UINT32_MAX },
	{ "zone 0 on a member", SLOT(0) + 36, 4, 0 },
};

/* Bytes the fixture must have zero: reserved, unused slot and columns. */
static int fixture_reserved(unsigned off)
{
	unsigned s, in;

	if (off == 6 || off == 7 || (off >= 37 && off < 40) ||
	    (off >= 232 && off < 252))
		return 1;
	if (off < SLOT(0) || off >= SLOT(3))
		return 0;
	s = (off - SLOT(0)) / 64;
	in = (off - SLOT(0)) % 64;
	/* Slot 2 is unused; slots 0 and 1 are 3 wide. */
	return s == 2 || in == 21 || (in >= 22 + 2 * 3 && in < 36) ||
	       in >= 36 + 4 * 3;
}

START_TEST(test_fields_checked_behind_crc)
{
	struct za_anchor a, d;
	uint8_t b[BYTES], saved[BYTES];
	unsigned i, off;

	fixture(b, &a);
	ck_assert_int_eq(za_anchor_decode(b, &d), 0);
	memcpy(saved, b, BYTES);
	for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		apply(b, &refused[i]);
		fix_crc(b);
		memset(&d, 0x5a, sizeof(d));
		ck_assert_msg(za_anchor_decode(b, &d) == -EBADMSG,
			      "%s was accepted", refused[i].what);
		assert_zeroed(&d);
		memcpy(b, saved, BYTES);
	}
	for (i = 0; i < sizeof(accepted) / sizeof(accepted[0]); i++) {
		apply(b, &accepted[i]);
		fix_crc(b);
		ck_assert_msg(za_anchor_decode(b, &d) == 0, "%s was refused",
			      accepted[i].what);
		memcpy(b, saved, BYTES);
	}
	/* Every reserved byte, unused slot and unused column. */
	for (off = 0; off < 252; off++) {
		if (!fixture_reserved(off))
			continue;
		b[off] = 0x20;
		fix_crc(b);
		ck_assert_msg(za_anchor_decode(b, &d) == -EBADMSG,
			      "byte %u must be zero but was accepted", off);
		memcpy(b, saved, BYTES);
	}
	/* The CRC itself, and a field changed without it. */
	b[252] ^= 0x01;
	ck_assert_int_eq(za_anchor_decode(b, &d), -EBADMSG);
	memcpy(b, saved, BYTES);
	b[24] ^= 0x01;
	ck_assert_int_eq(za_anchor_decode(b, &d), -EBADMSG);
	memcpy(b, saved, BYTES);

	/* Two absent columns, and a third: no member twice among them. */
	za_put_le16(b + SLOT(1) + 22, ABSENT);
	za_put_le32(b + SLOT(1) + 36, 0);
	fix_crc(b);
	ck_assert_int_eq(za_anchor_decode(b, &d), 0);
	ck_assert_uint_eq(d.segs[1].members[0], ABSENT);
	ck_assert_uint_eq(d.segs[1].members[1], ABSENT);
	za_put_le16(b + SLOT(1) + 26, ABSENT);
	za_put_le32(b + SLOT(1) + 44, 0);
	fix_crc(b);
	ck_assert_int_eq(za_anchor_decode(b, &d), 0);
	memcpy(b, saved, BYTES);

	/* A third slot, all of it: taken. */
	b[36] = 3;
	za_put_le64(b + SLOT(2), 13);
	b[SLOT(2) + 20] = 1;
	za_put_le16(b + SLOT(2) + 22, 6);
	za_put_le32(b + SLOT(2) + 36, 30);
	fix_crc(b);
	ck_assert_int_eq(za_anchor_decode(b, &d), 0);
	ck_assert_uint_eq(d.segs[2].seg_id, 13);
	ck_assert_uint_eq(d.segs[2].zones[0], 30);
	/* ...with the seg_id of slot 0, or of slot 1: refused. */
	za_put_le64(b + SLOT(2), 11);
	fix_crc(b);
	ck_assert_int_eq(za_anchor_decode(b, &d), -EBADMSG);
	za_put_le64(b + SLOT(2), 12);
	fix_crc(b);
	ck_assert_int_eq(za_anchor_decode(b, &d), -EBADMSG);
	memcpy(b, saved, BYTES);

	/* No segments, the slots emptied: a checkpoint not anchored by
	 * place. */
	b[36] = 0;
	memset(b + SLOT(0), 0, 3 * 64);
	fix_crc(b);
	ck_assert_int_eq(za_anchor_decode(b, &d), 0);
	ck_assert_uint_eq(d.ckpt_id, 9);
	ck_assert_uint_eq(d.nr_segs, 0);
}
END_TEST

/* No checkpoint: nothing about one either. */
START_TEST(test_no_checkpoint_rules)
{
	static const struct poke cases[] = {
		{ "nr_parts", 12, 4, 1 },
		{ "seq", 24, 8, 1 },
		{ "seq high", 24, 8, 1ull << 63 },
		{ "nr_segs", 36, 1, 1 },
	};
	struct za_anchor a = { .generation = 4 }, d;
	uint8_t b[BYTES], saved[BYTES];
	unsigned i;

	ck_assert_int_eq(za_anchor_encode(&a, b), 0);
	ck_assert_int_eq(za_anchor_decode(b, &d), 0);
	ck_assert_uint_eq(d.ckpt_id, 0);
	ck_assert_uint_eq(d.generation, 4);
	memcpy(saved, b, BYTES);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		apply(b, &cases[i]);
		fix_crc(b);
		ck_assert_msg(za_anchor_decode(b, &d) == -EBADMSG,
			      "no checkpoint with %s was accepted",
			      cases[i].what);
		memcpy(b, saved, BYTES);
	}
	/* nr_segs 1 with a slot that is valid in itself. */
	b[36] = 1;
	za_put_le64(b + SLOT(0), 1);
	b[SLOT(0) + 20] = 1;
	za_put_le16(b + SLOT(0) + 22, 0);
	fix_crc(b);
	ck_assert_int_eq(za_anchor_decode(b, &d), -EBADMSG);
	/* ...which is fine once there is a checkpoint. */
	za_put_le64(b + 16, 1);
	za_put_le32(b + 12, 1);
	fix_crc(b);
	ck_assert_int_eq(za_anchor_decode(b, &d), 0);
}
END_TEST

START_TEST(test_bad_version)
{
	static const uint16_t versions[] = { 0, 2, 0x100, 0xffff };
	struct za_anchor a, d;
	uint8_t b[BYTES], saved[BYTES];
	unsigned i;

	fixture(b, &a);
	memcpy(saved, b, BYTES);
	for (i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
		za_put_le16(b + 4, versions[i]);
		memset(&d, 0x5a, sizeof(d));
		ck_assert_int_eq(za_anchor_decode(b, &d), -EPROTONOSUPPORT);
		assert_zeroed(&d);
		/* With its CRC right, too: the version is the reason. */
		fix_crc(b);
		ck_assert_int_eq(za_anchor_decode(b, &d), -EPROTONOSUPPORT);
		memcpy(b, saved, BYTES);
	}
	/* The magic and nothing else: version 0. */
	memset(b, 0, BYTES);
	memcpy(b, "ZAAN", 4);
	ck_assert_int_eq(za_anchor_decode(b, &d), -EPROTONOSUPPORT);
	/* A magic off by a letter is no magic. */
	memcpy(b, saved, BYTES);
	b[3] = 'M';
	fix_crc(b);
	ck_assert_int_eq(za_anchor_decode(b, &d), -EBADMSG);
}
END_TEST

START_TEST(test_encoder_refuses)
{
	struct za_anchor ok, a;
	uint8_t b[BYTES], want[BYTES], out[BYTES];
	unsigned i;

	fixture(want, &ok);
	for (i = 0;; i++) {
		a = ok;
		switch (i) {
		case 0:
			a.flags = 0x2;
			break;
		case 1:
			a.flags = ZA_ANCHOR_REVOKED | 0x100;
			break;
		case 2:
			a.ckpt_id = 0; /* with parts, seq and segments */
			break;
		case 3:
			a.ckpt_id = 0;
			a.nr_segs = 0;
			a.seq = 0; /* with parts */
			break;
		case 4:
			a.ckpt_id = 0;
			a.nr_segs = 0;
			a.nr_parts = 0; /* with a seq */
			break;
		case 5:
			a.ckpt_id = 0;
			a.seq = 0;
			a.nr_parts = 0; /* with segments */
			break;
		case 6:
			a.nr_parts = 0;
			break;
		case 7:
			a.nr_segs = 4;
			break;
		case 8:
			a.nr_segs = 255;
			break;
		case 9:
			a.nr_segs = 3; /* slot 2 zeroed: width 0 */
			break;
		case 10:
			a.segs[0].width = 0;
			break;
		case 11:
			a.segs[1].width = ZA_ANCHOR_MAX_WIDTH + 1;
			break;
		case 12:
			a.segs[0].members[2] = ABSENT + 1;
			break;
		case 13:
			a.segs[0].members[2] = 0xffff;
			break;
		case 14:
			a.segs[0].members[1] = ABSENT; /* its zone is 11 */
			break;
		case 15:
			a.segs[1].zones[1] = 1; /* an absent column's */
			break;
		case 16:
			a.segs[0].members[2] = 0;
			break;
		case 17:
			a.segs[1].members[2] = 3;
			break;
		case 18:
			a.segs[1].seg_id = a.segs[0].seg_id;
			break;
		case 19:
			a.segs[0].width = 4; /* column 3: member 0 again */
			break;
		default:
			goto done;
		}
		ck_assert_msg(za_anchor_encode(&a, out) == -EINVAL,
			      "bad anchor %u was encoded", i);
	}
done:
	/* What is past nr_segs and the widths is not looked at. */
	a = ok;
	spoil_unused(&a);
	ck_assert_int_eq(za_anchor_encode(&a, b), 0);
	ck_assert_mem_eq(b, want, BYTES);
	/* Two absent columns, and zone 0 on a member, are fine. */
	a = ok;
	a.segs[1].members[0] = ABSENT;
	a.segs[1].zones[0] = 0;
	a.segs[0].zones[0] = 0;
	ck_assert_int_eq(za_anchor_encode(&a, b), 0);
	/* No checkpoint: every other field may be anything but those. */
	memset(&a, 0, sizeof(a));
	a.flags = ZA_ANCHOR_REVOKED;
	a.generation = UINT32_MAX;
	spoil_unused(&a);
	ck_assert_int_eq(za_anchor_encode(&a, b), 0);
}
END_TEST

START_TEST(test_same)
{
	struct za_anchor a, b;
	uint8_t buf[BYTES];
	unsigned i;

	fixture(buf, &a);
	ck_assert(za_anchor_same(&a, &a));
	for (i = 0;; i++) {
		b = a;
		switch (i) {
		case 0:
			b.ckpt_id++;
			break;
		case 1:
			b.seq++;
			break;
		case 2:
			b.nr_parts++;
			break;
		case 3:
			b.nr_segs = 1;
			break;
		case 4:
			b.segs[1].seg_id++;
			break;
		case 5:
			b.segs[0].group_id++;
			break;
		case 6:
			b.segs[1].first_stripe++;
			break;
		case 7:
			b.segs[0].width = 2;
			break;
		case 8:
			b.segs[0].members[2] = 7;
			break;
		case 9:
			b.segs[1].zones[2]++;
			break;
		case 10:
			b.segs[1].members[1] = 9; /* absent in @a */
			break;
		default:
			goto done;
		}
		ck_assert_msg(!za_anchor_same(&a, &b) &&
				      !za_anchor_same(&b, &a),
			      "change %u not seen", i);
	}
done:
	/* Flags and generation are not where the checkpoint is. */
	b = a;
	b.flags = ZA_ANCHOR_REVOKED;
	b.generation = a.generation + 1;
	ck_assert(za_anchor_same(&a, &b));
	/* Nor what lies past nr_segs and the widths. */
	spoil_unused(&b);
	ck_assert(za_anchor_same(&a, &b));
	/* Unchecked anchors: nothing read past the slots and columns. */
	memset(&a, 0xff, sizeof(a));
	b = a;
	ck_assert(za_anchor_same(&a, &b));
	b.segs[ZA_ANCHOR_MAX_SEGS - 1].zones[ZA_ANCHOR_MAX_WIDTH - 1] = 0;
	ck_assert(!za_anchor_same(&a, &b));
	/* Two "no checkpoint" anchors. */
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	b.generation = 9;
	ck_assert(za_anchor_same(&a, &b));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("anchor");
	TCase *tc = tcase_create("codec");

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_round_trip, 0, NR_SHAPES);
	tcase_add_loop_test(tc, test_every_bit_flip_rejected, 0, NR_SHAPES);
	tcase_add_test(tc, test_all_zero_is_no_anchor);
	tcase_add_test(tc, test_fields_checked_behind_crc);
	tcase_add_test(tc, test_no_checkpoint_rules);
	tcase_add_test(tc, test_bad_version);
	tcase_add_test(tc, test_encoder_refuses);
	tcase_add_test(tc, test_same);
	suite_add_tcase(s, tc);
	return trun(s);
}
