// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test-journal.c - the unmap record's codec: every range of a table
 * encodes and decodes back, alone and 255 to a record; each way of
 * breaking a record (magic, count, reserved bytes, an empty range, one
 * past the volume's end, a range whose end wraps, ranges that overlap,
 * touch or go backwards, bytes after the last range, a short block) is
 * refused with -EBADMSG, and the encoder refuses what the decoder would.
 */
#include <check.h>

#include "tap.h"
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "byteorder.h"
#include "journal.h"

static const struct {
	uint64_t size, lba, n;
} ranges[] = {
	{ 1, 0, 1 },
	{ 2048, 0, 2048 },
	{ 2048, 2047, 1 },
	{ 2048, 100, 7 },
	{ UINT64_MAX / 4096, UINT64_MAX / 4096 - 1, 1 },
	{ UINT64_MAX / 4096, 0, UINT64_MAX / 4096 },
};

START_TEST(test_round_trip)
{
	uint8_t blk[ZA_JOURNAL_BLOCK_BYTES], again[ZA_JOURNAL_BLOCK_BYTES];
	struct za_journal_range r[ZA_JOURNAL_MAX_RANGES];
	unsigned nr = 0;

	za_journal_unmap_encode(blk, ranges[_i].lba, ranges[_i].n);
	ck_assert_int_eq(za_journal_unmap_decode(blk, sizeof(blk),
						 ranges[_i].size, r, &nr),
			 0);
	ck_assert_uint_eq(nr, 1);
	ck_assert_uint_eq(r[0].lba, ranges[_i].lba);
	ck_assert_uint_eq(r[0].n, ranges[_i].n);
	ck_assert_int_eq(za_journal_unmap_encode_ranges(again, r, nr), 0);
	ck_assert_mem_eq(blk, again, sizeof(blk)); /* canonical */
}
END_TEST

/* 1, 2, 254 and 255 ranges with gaps of 1 to 3 blocks. */
START_TEST(test_many_ranges)
{
	static const unsigned counts[] = { 1, 2, 254, ZA_JOURNAL_MAX_RANGES };
	uint8_t blk[ZA_JOURNAL_BLOCK_BYTES], again[ZA_JOURNAL_BLOCK_BYTES];
	struct za_journal_range in[ZA_JOURNAL_MAX_RANGES],
		out[ZA_JOURNAL_MAX_RANGES];
	unsigned nr = counts[_i], got = 0, i;
	uint64_t lba = 3;

	for (i = 0; i < nr; i++) {
		in[i].lba = lba;
		in[i].n = 1 + i % 5;
		lba += in[i].n + 1 + i % 3;
	}
	ck_assert_int_eq(za_journal_unmap_encode_ranges(blk, in, nr), 0);
	ck_assert_uint_eq(za_get_le32(blk + 8), nr);
	ck_assert_int_eq(
		za_journal_unmap_decode(blk, sizeof(blk), lba, out, &got), 0);
	ck_assert_uint_eq(got, nr);
	ck_assert_mem_eq(in, out, nr * sizeof(*in));
	ck_assert_int_eq(za_journal_unmap_encode_ranges(again, out, got), 0);
	ck_assert_mem_eq(blk, again, sizeof(blk));
	/* A volume that ends one block short of the last range's end. */
	lba = in[nr - 1].lba + in[nr - 1].n;
	ck_assert_int_eq(
		za_journal_unmap_decode(blk, sizeof(blk), lba, out, &got), 0);
	ck_assert_int_eq(za_journal_unmap_decode(blk, sizeof(blk), lba - 1, out,
						 &got),
			 -EBADMSG);
}
END_TEST

START_TEST(test_refused)
{
	uint8_t good[ZA_JOURNAL_BLOCK_BYTES], blk[ZA_JOURNAL_BLOCK_BYTES];
	struct za_journal_range r[ZA_JOURNAL_MAX_RANGES] = { { 5, 6 } };
	struct za_journal_range two[2];
	unsigned i, nr = 7;

	za_journal_unmap_encode(good, 10, 20);
	/*
	 * Any single byte changed in magic, count or the reserved parts: a
	 * count of 65 (0x41) asks for 64 more ranges, which are zeros
	 * (empty): refused too.
	 */
	for (i = 0; i < ZA_JOURNAL_BLOCK_BYTES; i++) {
		if (i >= 16 && i < 32)
			continue; /* the range: below */
		memcpy(blk, good, sizeof(blk));
		blk[i] ^= 0x40;
		ck_assert_int_eq(za_journal_unmap_decode(blk, sizeof(blk), 100,
							 r, &nr),
				 -EBADMSG);
	}
	/* Counts of 0 and 256. */
	memcpy(blk, good, sizeof(blk));
	za_put_le32(blk + 8, 0);
	ck_assert_int_eq(za_journal_unmap_decode(blk, sizeof(blk), 100, r, &nr),
			 -EBADMSG);
	za_put_le32(blk + 8, ZA_JOURNAL_MAX_RANGES + 1);
	ck_assert_int_eq(za_journal_unmap_decode(blk, sizeof(blk), 100, r, &nr),
			 -EBADMSG);
	/* Ranges: empty, past the end, wrapping. */
	za_journal_unmap_encode(blk, 10, 0);
	ck_assert_int_eq(za_journal_unmap_decode(blk, sizeof(blk), 100, r, &nr),
			 -EBADMSG);
	za_journal_unmap_encode(blk, 100, 1);
	ck_assert_int_eq(za_journal_unmap_decode(blk, sizeof(blk), 100, r, &nr),
			 -EBADMSG);
	za_journal_unmap_encode(blk, 90, 11);
	ck_assert_int_eq(za_journal_unmap_decode(blk, sizeof(blk), 100, r, &nr),
			 -EBADMSG);
	za_journal_unmap_encode(blk, 50, UINT64_MAX - 10);
	ck_assert_int_eq(za_journal_unmap_decode(blk, sizeof(blk), 100, r, &nr),
			 -EBADMSG);
	/* Two ranges that overlap, touch, or go backwards: the decoder
	 * refuses them (written by hand) and so does the encoder. */
	{
		static const uint64_t pairs[][4] = {
			{ 10, 5, 12, 5 }, /* overlap */
			{ 10, 5, 15, 5 }, /* touch: one range */
			{ 30, 5, 10, 5 }, /* backwards */
		};

		for (i = 0; i < 3; i++) {
			two[0].lba = pairs[i][0];
			two[0].n = pairs[i][1];
			two[1].lba = pairs[i][2];
			two[1].n = pairs[i][3];
			ck_assert_int_eq(za_journal_unmap_encode_ranges(blk,
									two, 2),
					 -EINVAL);
			memcpy(blk, good, sizeof(blk));
			za_put_le32(blk + 8, 2);
			za_put_le64(blk + 16, two[0].lba);
			za_put_le64(blk + 24, two[0].n);
			za_put_le64(blk + 32, two[1].lba);
			za_put_le64(blk + 40, two[1].n);
			ck_assert_int_eq(za_journal_unmap_decode(
						 blk, sizeof(blk), 100, r, &nr),
					 -EBADMSG);
		}
	}
	/* A byte after the last range. */
	memcpy(blk, good, sizeof(blk));
	blk[32] = 1;
	ck_assert_int_eq(za_journal_unmap_decode(blk, sizeof(blk), 100, r, &nr),
			 -EBADMSG);
	/* The encoder: no ranges, too many, an empty one. */
	ck_assert_int_eq(za_journal_unmap_encode_ranges(blk, r, 0), -EINVAL);
	ck_assert_int_eq(za_journal_unmap_encode_ranges(
				 blk, r, ZA_JOURNAL_MAX_RANGES + 1),
			 -EINVAL);
	two[0].lba = 3;
	two[0].n = 0;
	ck_assert_int_eq(za_journal_unmap_encode_ranges(blk, two, 1), -EINVAL);
	/* A short read. */
	ck_assert_int_eq(za_journal_unmap_decode(good, sizeof(good) - 1, 100, r,
						 &nr),
			 -EBADMSG);
	/* Nothing refused was written out. */
	ck_assert_uint_eq(nr, 7);
	ck_assert_uint_eq(r[0].lba, 5);
	ck_assert_uint_eq(r[0].n, 6);
	ck_assert_int_eq(
		za_journal_unmap_decode(good, sizeof(good), 100, r, &nr), 0);
	ck_assert_uint_eq(nr, 1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("journal");
	TCase *tc = tcase_create("unmap");

	tcase_add_loop_test(tc, test_round_trip, 0,
			    sizeof(ranges) / sizeof(ranges[0]));
	tcase_add_loop_test(tc, test_many_ranges, 0, 4);
	tcase_add_test(tc, test_refused);
	suite_add_tcase(s, tc);
	return trun(s);
}
