/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * mpage.h - the codec of a map page: one 4 KiB block of the block map's
 * page tree, which a checkpoint of version 3 names from its root level
 * instead of listing every extent (docs/format.md, "Map page block").
 *
 * A page covers the LBA range [lo, hi) and holds up to ZA_MPAGE_MAX_RECS
 * records in increasing LBA order, not overlapping, the first starting at
 * lo and the last ending at hi: a leaf (level 0) holds extents, the
 * records of checkpoint parts (types DATA and JOURNAL); a page of level
 * n >= 1 holds page records (type PAGE), each naming a page of level n - 1
 * by the range it covers and the block of the checkpoint stream it is
 * (group, pos). The page carries the id of the checkpoint that wrote it,
 * which may be older than the checkpoint naming it (pages not changed are
 * not written again), and its own CRC. The encoding is canonical: one
 * valid encoding per page.
 *
 * Pure functions, no I/O and no allocation; the decoder treats its input
 * as hostile (it comes from a drive). It checks what a page can say about
 * itself. That a child has the level, the range and an id no newer than
 * the record naming it says, that the extents counted add up to the
 * checkpoint's, and that the groups exist, is the caller's to check while
 * it walks the tree, as only it sees parent and child together.
 */
#ifndef ZA_MPAGE_H
#define ZA_MPAGE_H

#include <stddef.h>
#include <stdint.h>

#include "checkpoint.h"

#define ZA_MPAGE_BYTES 4096u
#define ZA_MPAGE_HDR_BYTES 96u
#define ZA_MPAGE_MAX_RECS 100u /* (4096 - 96) / 40 */
#define ZA_MPAGE_MAX_LEVEL 7u

struct za_mpage_hdr {
	uint64_t ckpt_id; /* the checkpoint that wrote it, >= 1 */
	/* The LBA range it covers: lo = first record's lba, hi = last
	 * record's end; lo < hi <= ZA_CKPT_MAX_SIZE_BLOCKS. */
	uint64_t lo, hi;
	/* 0: a leaf (extent records, types 1 and 2); 1..ZA_MPAGE_MAX_LEVEL:
	 * page records (type 4) naming pages of level - 1. */
	uint8_t level;
	uint32_t nr_recs; /* 1..ZA_MPAGE_MAX_RECS */
};

/*
 * Encode page @h with its @h->nr_recs records @recs into @blk
 * (ZA_MPAGE_BYTES), CRC included. Returns 0, or -EINVAL for a page the
 * decoder would refuse (then @blk is undefined).
 */
int za_mpage_encode(const struct za_mpage_hdr *h,
		    const struct za_ckpt_rec *recs, uint8_t *blk);

/*
 * Decode and check the page of @len bytes at @blk: -ENOENT without the
 * magic (not a map page); -EPROTONOSUPPORT for another version; -EBADMSG
 * for anything else wrong: a length other than ZA_MPAGE_BYTES, the CRC,
 * reserved bytes or the slots after the records not zero, a header field
 * out of range, a record of the wrong type for the level or out of range,
 * records not increasing or overlapping, lo and hi not the records' first
 * LBA and last end. 0 otherwise, @h and the @h->nr_recs first of @recs
 * (room for ZA_MPAGE_MAX_RECS) filled; nothing is written to them on
 * error.
 */
int za_mpage_decode(const uint8_t *blk, size_t len, struct za_mpage_hdr *h,
		    struct za_ckpt_rec *recs);

#endif /* ZA_MPAGE_H */
