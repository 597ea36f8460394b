/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * journal.h - the codec of the journal's own records: the unmap record a
 * TRIM or WRITE_ZEROES leaves in a journal block (docs/format.md, "Unmap
 * record"). Journal blocks that hold user data are plain logical blocks
 * and need no codec; the stripe header around every journal block is
 * stripe.c's.
 *
 * Pure functions, no I/O and no allocation; the decoder treats its input
 * as hostile (it comes from a drive). Where the journal is written, when
 * it is flushed and how recovery replays it is the volume's business
 * (volume.c, volume-checkpoint.c, docs/design.md 7.4, 9.2).
 */
#ifndef ZA_JOURNAL_H
#define ZA_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#define ZA_JOURNAL_BLOCK_BYTES 4096u
/* Ranges one record holds: (4096 - 16) / 16. */
#define ZA_JOURNAL_MAX_RANGES 255u

struct za_journal_range {
	uint64_t lba, n;
};

/* Fill the 4096-byte @blk with the record "blocks @lba..@lba+@n read as
 * zeros from here on". @n > 0. */
void za_journal_unmap_encode(uint8_t *blk, uint64_t lba, uint64_t n);

/*
 * The same for @nr ranges at once (1..ZA_JOURNAL_MAX_RANGES), each
 * non-empty, in increasing order with at least one block between two
 * (merge adjacent and overlapping ones first: one encoding per set of
 * blocks). Returns 0, or -EINVAL for what the decoder would refuse
 * (ranges are not checked against a volume size here).
 */
int za_journal_unmap_encode_ranges(uint8_t *blk,
				   const struct za_journal_range *r,
				   unsigned nr);

/*
 * Decode @len bytes as an unmap record of a volume of @size_blocks
 * blocks into @r (room for ZA_JOURNAL_MAX_RANGES) and *@nr. Returns 0;
 * -EBADMSG if it is not a valid record (magic, count, reserved bytes, a
 * range that is empty, not inside the volume or not after the previous
 * one with a gap; a short block). Nothing is written on error.
 */
int za_journal_unmap_decode(const uint8_t *blk, size_t len,
			    uint64_t size_blocks, struct za_journal_range *r,
			    unsigned *nr);

#endif /* ZA_JOURNAL_H */
