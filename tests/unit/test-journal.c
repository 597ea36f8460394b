// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test-journal.c - the unmap record's codec: every range of a table
 * encodes and decodes back; each way of breaking a record (magic, count,
 * reserved bytes, an empty range, one past the volume's end, a range
 * whose end wraps, a short block) is refused with -EBADMSG.
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
	uint64_t lba = 0, n = 0;

	za_journal_unmap_encode(blk, ranges[_i].lba, ranges[_i].n);
	ck_assert_int_eq(za_journal_unmap_decode(blk, sizeof(blk),
						 ranges[_i].size, &lba, &n),
			 0);
	ck_assert_uint_eq(lba, ranges[_i].lba);
	ck_assert_uint_eq(n, ranges[_i].n);
	za_journal_unmap_encode(again, lba, n);
	ck_assert_mem_eq(blk, again, sizeof(blk)); /* canonical */
}
END_TEST

START_TEST(test_refused)
{
	uint8_t good[ZA_JOURNAL_BLOCK_BYTES], blk[ZA_JOURNAL_BLOCK_BYTES];
	uint64_t lba = 5, n = 6;
	unsigned i;

	za_journal_unmap_encode(good, 10, 20);
	/* Any single byte changed in magic, count or the reserved parts. */
	for (i = 0; i < ZA_JOURNAL_BLOCK_BYTES; i++) {
		if (i >= 16 && i < 32)
			continue; /* the range: below */
		memcpy(blk, good, sizeof(blk));
		blk[i] ^= 0x40;
		ck_assert_int_eq(za_journal_unmap_decode(blk, sizeof(blk), 100,
							 &lba, &n),
				 -EBADMSG);
	}
	/* Ranges: empty, past the end, wrapping. */
	za_journal_unmap_encode(blk, 10, 0);
	ck_assert_int_eq(za_journal_unmap_decode(blk, sizeof(blk), 100, &lba,
						 &n),
			 -EBADMSG);
	za_journal_unmap_encode(blk, 100, 1);
	ck_assert_int_eq(za_journal_unmap_decode(blk, sizeof(blk), 100, &lba,
						 &n),
			 -EBADMSG);
	za_journal_unmap_encode(blk, 90, 11);
	ck_assert_int_eq(za_journal_unmap_decode(blk, sizeof(blk), 100, &lba,
						 &n),
			 -EBADMSG);
	za_journal_unmap_encode(blk, 50, UINT64_MAX - 10);
	ck_assert_int_eq(za_journal_unmap_decode(blk, sizeof(blk), 100, &lba,
						 &n),
			 -EBADMSG);
	/* A short read. */
	ck_assert_int_eq(za_journal_unmap_decode(good, sizeof(good) - 1, 100,
						 &lba, &n),
			 -EBADMSG);
	/* Nothing refused was written out. */
	ck_assert_uint_eq(lba, 5);
	ck_assert_uint_eq(n, 6);
	ck_assert_int_eq(
		za_journal_unmap_decode(good, sizeof(good), 100, &lba, &n), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("journal");
	TCase *tc = tcase_create("unmap");

	tcase_add_loop_test(tc, test_round_trip, 0,
			    sizeof(ranges) / sizeof(ranges[0]));
	tcase_add_test(tc, test_refused);
	suite_add_tcase(s, tc);
	return trun(s);
}
