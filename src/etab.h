/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * etab.h - the codec of the engine table: the segment engine's groups and
 * segments (where every column of every segment is, how far each was
 * written) and its counters, as of one checkpoint's sequence number, cut
 * into 4 KiB parts that travel with that checkpoint (docs/format.md,
 * "Engine table block").
 *
 * A table is a list of records, packed into parts without spanning one:
 * every group, then every segment with its columns, in increasing id
 * order each. Every part carries the whole header (checkpoint id and
 * sequence number, the engine's counters, part i of n) and its own CRC, so
 * a part is checked alone (za_etab_block_decode()) and a table is taken
 * only when every part is there, in order, and agrees with the others
 * (struct za_etab_reader). The encoding is canonical: one valid encoding
 * per table.
 *
 * Pure functions, no I/O; the decoder treats its input as hostile (it
 * comes from a drive). It checks what a part can say about itself; that
 * members and zones exist, that widths match a stream's geometry and that
 * segments name groups of the table is the engine's to check
 * (engine-table.c), which knows the array.
 */
#ifndef ZA_ETAB_H
#define ZA_ETAB_H

#include <stddef.h>
#include <stdint.h>

#define ZA_ETAB_BLOCK_BYTES 4096u
#define ZA_ETAB_HDR_BYTES 96u
#define ZA_ETAB_PAYLOAD_BYTES (ZA_ETAB_BLOCK_BYTES - ZA_ETAB_HDR_BYTES)
#define ZA_ETAB_GROUP_BYTES 24u
#define ZA_ETAB_SEG_BYTES 40u /* then ZA_ETAB_COL_BYTES per column */
#define ZA_ETAB_COL_BYTES 16u
#define ZA_ETAB_MAX_WIDTH 64u /* ZA_EC_MAX_WIDTH */
/* What one part can hold at most, of each kind. */
#define ZA_ETAB_MAX_GROUPS (ZA_ETAB_PAYLOAD_BYTES / ZA_ETAB_GROUP_BYTES)
#define ZA_ETAB_MAX_SEGS \
	(ZA_ETAB_PAYLOAD_BYTES / (ZA_ETAB_SEG_BYTES + ZA_ETAB_COL_BYTES))

/* Record kinds (byte 0 of a record). */
enum za_etab_kind {
	ZA_ETAB_GROUP = 1,
	ZA_ETAB_SEGMENT = 2,
};

struct za_etab_group {
	uint64_t id; /* >= 1 */
	uint64_t next_pos; /* group positions handed out, <= w x nr_stripes */
	uint32_t nr_stripes; /* per segment, >= 1 */
	uint16_t w; /* segments in the group, 1..1024 */
	uint8_t stream; /* 0..3 */
};

/* Segment flags. */
#define ZA_ETAB_SEG_SEALED 0x01 /* takes no more stripes */
#define ZA_ETAB_SEG_FINISHED 0x02 /* its zones were FINISHed */
#define ZA_ETAB_SEG_FLAGS 0x03 /* every flag defined */

/* A column's member when it has none (born lost, or lost since). */
#define ZA_ETAB_MEMBER_ABSENT 0xffffu

struct za_etab_col {
	uint16_t member; /* where it is now; ZA_ETAB_MEMBER_ABSENT: lost */
	uint16_t hdr_member; /* as first placed (what its headers say) */
	uint32_t zone, hdr_zone; /* 0 with an absent member */
	uint32_t upto; /* stripes readable where it is now; UINT32_MAX: all */
};

struct za_etab_seg {
	uint64_t id; /* >= 1 */
	uint64_t group_id; /* >= 1 */
	uint64_t dead_cols; /* lost columns left as they are; < 2^width */
	uint32_t next_stripe; /* stripes handed out in it */
	uint16_t grp_idx; /* its place in its group */
	uint8_t width; /* columns, 1..ZA_ETAB_MAX_WIDTH */
	uint8_t flags; /* ZA_ETAB_SEG_* */
	struct za_etab_col col[ZA_ETAB_MAX_WIDTH];
};

struct za_etab_hdr {
	uint64_t ckpt_id; /* the checkpoint it travels with, >= 1 */
	uint64_t seq; /* what it describes: the drives up to this seq */
	uint64_t next_seq; /* the engine's counters then: > seq */
	uint64_t next_seg_id, next_group_id; /* >= 1 */
	uint64_t nr_groups, nr_segs; /* records in all parts */
	uint32_t part, nr_parts; /* this part, 0-based, of nr_parts >= 1 */
	uint32_t nr_recs; /* records in this part */
	uint32_t used_bytes; /* of the payload, <= ZA_ETAB_PAYLOAD_BYTES */
};

/* One decoded part: its header and its records, groups before segments. */
struct za_etab_part {
	struct za_etab_hdr h;
	uint32_t nr_groups, nr_segs;
	struct za_etab_group groups[ZA_ETAB_MAX_GROUPS];
	struct za_etab_seg segs[ZA_ETAB_MAX_SEGS];
};

/*
 * Encode one part: @p's header and records into @blk (ZA_ETAB_BLOCK_BYTES),
 * CRC included. Returns 0, or -EINVAL for a part the decoder would refuse
 * by itself (then @blk is undefined). The writer is the way to write a
 * table; this is for re-encoding a decoded part (canonical: the same
 * bytes) and for tests that build parts by hand.
 */
int za_etab_block_encode(const struct za_etab_part *p, uint8_t *blk);

/*
 * Decode and check one part of @len bytes into @out: magic (-ENOENT when
 * absent: not an engine table block), version (-EPROTONOSUPPORT), length,
 * CRC, every header field against its range, every record (kind, ranges,
 * width, flags, an absent column with zone 0, dead columns within the
 * width, ids increasing within the part, groups before segments, records
 * filling exactly used_bytes), what the header's totals imply for one
 * part (no more records than the totals; all of them in a table of one
 * part; no empty part in a table of several), reserved bytes and the
 * unused tail zero (all -EBADMSG). Never reads past @len. @out is
 * undefined on error.
 */
int za_etab_block_decode(const uint8_t *blk, size_t len,
			 struct za_etab_part *out);

/*
 * Assembling a whole table from decoded parts, fed in order 0..n-1: each
 * must carry part 0's checkpoint id, sequence number, counters, totals
 * and part count, ids must go on increasing across parts (groups, then
 * segments), and each part must have been cut canonically (the previous
 * one closed only because this one's first record did not fit in it).
 * za_etab_reader_done() says whether everything came and the records
 * counted are the totals.
 */
struct za_etab_reader {
	struct za_etab_hdr first; /* part 0's header */
	uint32_t next_part;
	uint64_t groups, segs; /* records seen */
	uint64_t last_group, last_seg; /* ids seen last */
	uint32_t last_used; /* the previous part's used_bytes: where it was cut */
};

void za_etab_reader_init(struct za_etab_reader *r);
/* 0, or -EBADMSG (then the table must not be used). */
int za_etab_reader_add(struct za_etab_reader *r, const struct za_etab_part *p);
/* 0 when all parts were added, -EBADMSG otherwise. */
int za_etab_reader_done(const struct za_etab_reader *r);

/*
 * Writing one table: groups then segments are added in increasing id
 * order and packed into parts in a buffer the writer grows (malloc);
 * za_etab_writer_finish() numbers the parts and encodes their headers and
 * CRCs. The caller frees @blocks (also after an error).
 */
struct za_etab_writer {
	struct za_etab_hdr h; /* ids, seq and counters from init; totals */
	uint8_t *blocks; /* nr_parts x ZA_ETAB_BLOCK_BYTES once finished */
	uint32_t nr_parts;
	/* private */
	size_t cap_parts;
	uint32_t used, recs; /* in the part being filled */
	uint64_t last_group, last_seg;
	int error;
};

/* Returns 0 or -EINVAL (an id or counter out of range). */
int za_etab_writer_init(struct za_etab_writer *w, uint64_t ckpt_id,
			uint64_t seq, uint64_t next_seq, uint64_t next_seg_id,
			uint64_t next_group_id);
/* 0, -EINVAL (out of order or range, a group after a segment), -ENOMEM. */
int za_etab_writer_add_group(struct za_etab_writer *w,
			     const struct za_etab_group *g);
int za_etab_writer_add_seg(struct za_etab_writer *w,
			   const struct za_etab_seg *s);
/*
 * Number the parts and encode their headers and CRCs, then decode and
 * assemble them as a reader would: 0, or the first error (-EINVAL also
 * when that check fails), -ENOMEM. An empty table is one part with no
 * records.
 */
int za_etab_writer_finish(struct za_etab_writer *w);

#endif /* ZA_ETAB_H */
