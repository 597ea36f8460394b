/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * checkpoint.h - the codec of the volume's checkpoints: the block map and
 * the unmap records still held by journal groups, as of one sequence
 * number, cut into 4 KiB parts (docs/format.md, "Checkpoint block").
 *
 * A checkpoint is a list of records: the map records in increasing LBA
 * order, then the unmap ranges, 100 records per part, every part but the
 * last full. In versions 1 and 2 the map records are the map's extents,
 * every one of them. In version 3 they are page records, the root level
 * of the map's page tree: each names a map page (mpage.h) of the level
 * below, a block of the checkpoint stream written before the parts, and
 * the header says how many levels of pages there are and how many extents
 * their leaves hold. Version 4 adds count records after the unmap ones:
 * a number per group that the owner keeps with the checkpoint. Each part carries the whole header (version, id,
 * sequence number covered, volume size, totals, part i of n) and its own
 * CRC, so a part is checked alone (za_ckpt_block_decode) and a whole
 * checkpoint is accepted only when every part is there, in order, and
 * agrees with the others (struct za_ckpt_reader). The encoding is
 * canonical: one valid encoding per checkpoint.
 *
 * Pure functions, no I/O and no allocation; the decoder treats its input
 * as hostile (it comes from a drive). It does not read the pages a
 * version 3 checkpoint names, nor check that they hold what the header
 * says: whoever walks the tree does. Where checkpoints are written and
 * when they are used is the volume's business (volume-checkpoint.c).
 */
#ifndef ZA_CHECKPOINT_H
#define ZA_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ZA_CKPT_BLOCK_BYTES 4096u
#define ZA_CKPT_HDR_BYTES 96u
#define ZA_CKPT_REC_BYTES 40u
#define ZA_CKPT_RECS_PER_BLOCK 100u /* (4096 - 96) / 40 */
/* Volume sizes whose byte count fits 64 bits. */
#define ZA_CKPT_MAX_SIZE_BLOCKS (UINT64_MAX / 4096u)

enum za_ckpt_rec_type {
	ZA_CKPT_REC_DATA = 1, /* extent in a data-stream group */
	ZA_CKPT_REC_JOURNAL = 2, /* extent in a journal-stream group */
	ZA_CKPT_REC_UNMAP = 3, /* unmap record held by journal group @group */
	/*
	 * A page record: the map page (mpage.h) covering [lba, lba +
	 * nr_blocks), a block of the checkpoint stream at (@group, @pos).
	 */
	ZA_CKPT_REC_PAGE = 4,
	/*
	 * Version 4, after the unmap records: the owner's count for group
	 * @group, 1 to ZA_CKPT_MAX_SIZE_BLOCKS in @nr_blocks (lba and pos
	 * 0), groups strictly increasing. The volume: a data or journal
	 * group's live blocks as of S, a checkpoint-stream group's map pages
	 * once this checkpoint is live (design.md 9.8).
	 */
	ZA_CKPT_REC_COUNT = 5,
};

/* Count records a checkpoint may hold. */
#define ZA_CKPT_MAX_COUNTS (1ull << 40)

struct za_ckpt_rec {
	uint8_t type; /* enum za_ckpt_rec_type */
	uint64_t lba, nr_blocks;
	uint64_t group;
	/*
	 * extents: group position of the first block (pos + nr_blocks does
	 * not wrap); unmap: 0; page: the page's block (not UINT64_MAX)
	 */
	uint64_t pos;
};

struct za_ckpt_hdr {
	/*
	 * 1 to 4, set by the decoder. To write version 3 or 4 set it so (in
	 * a writer's h after za_ckpt_writer_init(), before the first
	 * record); any other value writes version 2 with table parts, 1
	 * without.
	 */
	uint32_t version;
	uint64_t id; /* >= 1, increasing with every checkpoint of a volume */
	uint64_t seq; /* what the drives held up to this sequence number */
	uint64_t size_blocks; /* the volume's size */
	/*
	 * Records in all parts: map records (extents; version 3: page
	 * records, <= nr_map_extents), and unmap records.
	 */
	uint64_t nr_extents, nr_unmaps;
	uint32_t part, nr_parts; /* this part, 0-based, of nr_parts */
	uint32_t nr_recs; /* records in this part */
	/*
	 * Engine table parts (etab.h) written with this checkpoint, after
	 * its own parts; version 2 on. Set it in a writer's h after
	 * za_ckpt_writer_init(), before the first record.
	 */
	uint32_t nr_table_parts;
	/*
	 * Version 3 (0 in versions 1 and 2), set like nr_table_parts: the
	 * extents in the whole map, all pages (<= size_blocks), and the
	 * levels of pages below the root: 0 for an empty map (then
	 * nr_extents is 0 too), else 1..ZA_MPAGE_MAX_LEVEL, the map records
	 * naming pages of level map_levels - 1. Version 3 requires
	 * nr_table_parts >= 1.
	 */
	uint64_t nr_map_extents;
	uint8_t map_levels;
	/*
	 * Version 4 (0 before), set like nr_table_parts: count records, after
	 * the unmap records. Version 4 is otherwise version 3.
	 */
	uint64_t nr_counts;
};
/* Table parts a checkpoint may announce. */
#define ZA_CKPT_MAX_TABLE_PARTS (1u << 24)

/* Parts a checkpoint with these totals takes (>= 1); 0 if too many. Count
 * records (version 4) go with the unmaps: pass nr_unmaps + nr_counts. */
uint32_t za_ckpt_nr_parts(uint64_t nr_extents, uint64_t nr_unmaps);

/*
 * Encode one part: header @h and its @h->nr_recs records into @blk
 * (ZA_CKPT_BLOCK_BYTES). Returns 0, or -EINVAL for a part the decoder
 * would refuse by itself (then @blk is undefined).
 */
int za_ckpt_block_encode(const struct za_ckpt_hdr *h,
			 const struct za_ckpt_rec *recs, uint8_t *blk);
/*
 * Decode and check one part of @len bytes: magic (-ENOENT when absent:
 * not a checkpoint block), version (1 to 4, else -EPROTONOSUPPORT; a
 * version 1 part announces no table parts, a version 2 or 3 part at
 * least one), length, CRC, every header field and record against its
 * range, the map records' type for the version (extents in 1 and 2, page
 * records in 3), record order within the part, reserved bytes zero (all
 * -EBADMSG). @recs has room for ZA_CKPT_RECS_PER_BLOCK. Nothing is
 * written to @h or @recs on error.
 */
int za_ckpt_block_decode(const uint8_t *blk, size_t len, struct za_ckpt_hdr *h,
			 struct za_ckpt_rec *recs);

/*
 * Assembling a whole checkpoint from decoded parts, fed in order 0..n-1:
 * each must carry the same version, id, sequence number, size, totals,
 * part count, table parts and (version 3) map totals as part 0, the right
 * number of records, and map records that go on increasing from the
 * previous part's. za_ckpt_reader_done() says whether everything came.
 */
struct za_ckpt_reader {
	struct za_ckpt_hdr first; /* part 0's header */
	uint32_t next_part;
	uint64_t extents, unmaps; /* records seen (extents: map records) */
	uint64_t counts; /* count records seen */
	uint64_t end_lba; /* end of the last map record seen */
	uint64_t count_group; /* group of the last count record seen */
};

void za_ckpt_reader_init(struct za_ckpt_reader *r);
/* 0, or -EBADMSG (then the checkpoint must not be used). */
int za_ckpt_reader_add(struct za_ckpt_reader *r, const struct za_ckpt_hdr *h,
		       const struct za_ckpt_rec *recs);
/* 0 when all parts were added, -EBADMSG otherwise. */
int za_ckpt_reader_done(const struct za_ckpt_reader *r);

/*
 * Writing one checkpoint: records are added in order (map records by LBA,
 * then unmaps) and packed into parts of @blocks (za_ckpt_nr_parts() x
 * ZA_CKPT_BLOCK_BYTES, the caller's), each encoded when full. For version
 * 3 set h.version, h.nr_map_extents and h.map_levels (and
 * h.nr_table_parts) after za_ckpt_writer_init(), before the first record;
 * then the map records are page records, and extents are refused as
 * such, as page records are in versions 1 and 2.
 */
struct za_ckpt_writer {
	struct za_ckpt_hdr h; /* id, seq, size and totals: from init */
	uint8_t *blocks;
	/* private */
	struct za_ckpt_rec recs[ZA_CKPT_RECS_PER_BLOCK];
	struct za_ckpt_reader rd; /* what is written is what a reader takes */
	uint64_t added;
	int error;
};

/* Returns 0 or -EINVAL (too many records, size out of range). */
int za_ckpt_writer_init(struct za_ckpt_writer *w, uint64_t id, uint64_t seq,
			uint64_t size_blocks, uint64_t nr_extents,
			uint64_t nr_unmaps, uint8_t *blocks);
/*
 * 0, or -EINVAL (more records than announced, out of order or range, of
 * the wrong type, a header out of range). A record is checked when its
 * part is encoded: by the add that fills the part, else by
 * za_ckpt_writer_finish(); the error stays.
 */
int za_ckpt_writer_add(struct za_ckpt_writer *w, const struct za_ckpt_rec *rec);
/* Encode the last part. 0, or -EINVAL (fewer records than announced, or an
 * earlier error). */
int za_ckpt_writer_finish(struct za_ckpt_writer *w);

/*
 * What map pages (mpage.c) share with checkpoint parts, so that a record
 * has one encoding and one check wherever it is: both blocks hold up to
 * ZA_CKPT_RECS_PER_BLOCK records of ZA_CKPT_REC_BYTES from byte
 * ZA_CKPT_HDR_BYTES to their end. Not for the volume's use.
 */
/* Write @nr records (<= ZA_CKPT_RECS_PER_BLOCK) at @p, zeroes after them. */
void za_ckpt_recs_put(uint8_t *p, const struct za_ckpt_rec *recs, uint32_t nr);
/*
 * Read @nr records from @p into @recs: 0, or -EBADMSG when @nr is over
 * ZA_CKPT_RECS_PER_BLOCK, a record's reserved bytes are not zero, or a
 * slot after the records is not all zero. The fields are not checked.
 */
int za_ckpt_recs_get(const uint8_t *p, uint32_t nr, struct za_ckpt_rec *recs);
/*
 * One record of a map's list (extents, or page records when @pages) that
 * follows one ending at *@end: of a type the list holds, inside [0,
 * @size_blocks), its position in range for its type, not before *@end.
 * 0 and *@end moved to the record's end, or -EBADMSG (*@end unchanged).
 */
int za_ckpt_map_rec_check(const struct za_ckpt_rec *r, bool pages,
			  uint64_t size_blocks, uint64_t *end);

#endif /* ZA_CHECKPOINT_H */
