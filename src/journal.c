// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * journal.c - the unmap record's codec (journal.h; the layout is in
 * docs/format.md, "Unmap record"). It only turns a range into 4096 bytes
 * and back, checking every byte it reads; it does not write, flush or
 * replay anything (volume.c and volume-checkpoint.c do).
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "byteorder.h"
#include "journal.h"

#define UNMAP_MAGIC "ZAUNMAP1"
#define UNMAP_RANGES 16u /* offset of the first range; 16 bytes each */

/*
 * Records of one range (every record before GC merged them, and every
 * TRIM's) and of several (GC writing again the holes a victim's records
 * still cover: one journal stripe for up to 255, where one per hole
 * filled a journal group as fast as GC emptied one - design.md 10.4)
 * share the layout: the count was there from the start.
 */
static bool ranges_ok(const struct za_journal_range *r, unsigned nr,
		      uint64_t size_blocks)
{
	uint64_t end = 0;
	unsigned i;

	if (!nr || nr > ZA_JOURNAL_MAX_RANGES)
		return false;
	for (i = 0; i < nr; i++) {
		/* Written so that it cannot overflow: lba < size, then
		 * n <= size - lba. */
		if (!r[i].n || r[i].lba >= size_blocks ||
		    r[i].n > size_blocks - r[i].lba)
			return false;
		if (i && r[i].lba <= end)
			return false; /* overlapping, adjacent or backwards */
		end = r[i].lba + r[i].n;
	}
	return true;
}

void za_journal_unmap_encode(uint8_t *blk, uint64_t lba, uint64_t n)
{
	memset(blk, 0, ZA_JOURNAL_BLOCK_BYTES);
	memcpy(blk, UNMAP_MAGIC, 8);
	za_put_le32(blk + 8, 1);
	za_put_le64(blk + UNMAP_RANGES, lba);
	za_put_le64(blk + UNMAP_RANGES + 8, n);
}

int za_journal_unmap_encode_ranges(uint8_t *blk,
				   const struct za_journal_range *r,
				   unsigned nr)
{
	unsigned i;

	if (!ranges_ok(r, nr, UINT64_MAX))
		return -EINVAL;
	memset(blk, 0, ZA_JOURNAL_BLOCK_BYTES);
	memcpy(blk, UNMAP_MAGIC, 8);
	za_put_le32(blk + 8, nr);
	for (i = 0; i < nr; i++) {
		za_put_le64(blk + UNMAP_RANGES + 16 * i, r[i].lba);
		za_put_le64(blk + UNMAP_RANGES + 16 * i + 8, r[i].n);
	}
	return 0;
}

int za_journal_unmap_decode(const uint8_t *blk, size_t len,
			    uint64_t size_blocks, struct za_journal_range *r,
			    unsigned *nr)
{
	struct za_journal_range rr[ZA_JOURNAL_MAX_RANGES];
	uint32_t count;
	size_t i;

	if (len < ZA_JOURNAL_BLOCK_BYTES)
		return -EBADMSG;
	count = za_get_le32(blk + 8);
	if (memcmp(blk, UNMAP_MAGIC, 8) || !count ||
	    count > ZA_JOURNAL_MAX_RANGES || za_get_le32(blk + 12))
		return -EBADMSG;
	for (i = UNMAP_RANGES + 16 * (size_t)count; i < ZA_JOURNAL_BLOCK_BYTES;
	     i++)
		if (blk[i])
			return -EBADMSG;
	for (i = 0; i < count; i++) {
		rr[i].lba = za_get_le64(blk + UNMAP_RANGES + 16 * i);
		rr[i].n = za_get_le64(blk + UNMAP_RANGES + 16 * i + 8);
	}
	if (!ranges_ok(rr, count, size_blocks))
		return -EBADMSG;
	memcpy(r, rr, count * sizeof(*rr));
	*nr = count;
	return 0;
}
