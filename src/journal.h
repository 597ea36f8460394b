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

/* Fill the 4096-byte @blk with the record "blocks @lba..@lba+@n read as
 * zeros from here on". @n > 0. */
void za_journal_unmap_encode(uint8_t *blk, uint64_t lba, uint64_t n);

/*
 * Decode @len bytes as an unmap record of a volume of @size_blocks
 * blocks. Returns 0 with the range in @lba/@n; -EBADMSG if it is not a
 * valid record (magic, count, reserved bytes, a range that is empty or
 * not inside the volume; a short block).
 */
int za_journal_unmap_decode(const uint8_t *blk, size_t len,
			    uint64_t size_blocks, uint64_t *lba, uint64_t *n);

#endif /* ZA_JOURNAL_H */
