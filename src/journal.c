// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * journal.c - the unmap record's codec (journal.h; the layout is in
 * docs/format.md, "Unmap record"). It only turns a range into 4096 bytes
 * and back, checking every byte it reads; it does not write, flush or
 * replay anything (volume.c and volume-checkpoint.c do).
 */
#include <errno.h>
#include <string.h>

#include "byteorder.h"
#include "journal.h"

#define UNMAP_MAGIC "ZAUNMAP1"
#define UNMAP_COUNT 1u /* ranges per record: one, so far */
#define UNMAP_END 32u /* bytes used; the rest is reserved, zero */

void za_journal_unmap_encode(uint8_t *blk, uint64_t lba, uint64_t n)
{
	memset(blk, 0, ZA_JOURNAL_BLOCK_BYTES);
	memcpy(blk, UNMAP_MAGIC, 8);
	za_put_le32(blk + 8, UNMAP_COUNT);
	za_put_le64(blk + 16, lba);
	za_put_le64(blk + 24, n);
}

int za_journal_unmap_decode(const uint8_t *blk, size_t len,
			    uint64_t size_blocks, uint64_t *lba, uint64_t *n)
{
	uint64_t a, b;
	size_t i;

	if (len < ZA_JOURNAL_BLOCK_BYTES)
		return -EBADMSG;
	if (memcmp(blk, UNMAP_MAGIC, 8) ||
	    za_get_le32(blk + 8) != UNMAP_COUNT || za_get_le32(blk + 12))
		return -EBADMSG;
	for (i = UNMAP_END; i < ZA_JOURNAL_BLOCK_BYTES; i++)
		if (blk[i])
			return -EBADMSG;
	a = za_get_le64(blk + 16);
	b = za_get_le64(blk + 24);
	/* Written so that it cannot overflow: a < size, then b <= size - a. */
	if (!b || a >= size_blocks || b > size_blocks - a)
		return -EBADMSG;
	*lba = a;
	*n = b;
	return 0;
}
