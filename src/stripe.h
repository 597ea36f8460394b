/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * stripe.h - the stripe layout and the stripe header: where each logical
 * block of a stripe lives, and the 4 KiB header that starts every chunk
 * column on disk.
 *
 * Pure functions and a parser: no I/O, no allocation. The parser treats
 * its input as hostile (it comes from a drive).
 *
 * Layout of one stripe of a segment (k data columns, p parity columns,
 * R rows of chunk C, cb = C / 4096 blocks per chunk):
 *
 *   column c on disk, at zone offset stripe_idx * slot:
 *   +--------+------------+------------+-----+--------------+
 *   | header | row 0 (C)  | row 1 (C)  | ... | row R-1 (C)  |
 *   +--------+------------+------------+-----+--------------+
 *   slot = 4096 + R * C
 *
 *   stripe data block b (0 <= b < k * R * cb), in logical order:
 *     row = b / (k * cb), col = (b / cb) % k, off = b % cb
 *     lives in column col at payload block row * cb + off.
 *
 * So consecutive logical blocks fill chunk C of column 0, then column 1,
 * ... column k-1, then the next row: the chunk is the interleave unit, as
 * in mdraid; R rows share one header so that its 4 KiB costs <= 3% of a
 * column (docs/design.md, "Stripes").
 *
 * Parity columns hold the erasure code of the data columns' payload AND of
 * their LBA tables (header bytes 2048..4095), so a lost data column's LBAs
 * are rebuilt with its data.
 */
#ifndef ZA_STRIPE_H
#define ZA_STRIPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sb.h"

#define ZA_STRIPE_HDR_BYTES 4096u
#define ZA_STRIPE_MAX_COL_BLOCKS 256u /* payload blocks per column */
#define ZA_STRIPE_LBA_OFF 2048u /* LBA table: u64 per payload block */
#define ZA_STRIPE_LBA_BYTES 2048u
#define ZA_STRIPE_LBA_NONE UINT64_MAX /* padding block */

enum za_stripe_kind {
	ZA_STRIPE_DATA = 1, /* volume data; LBAs are logical blocks */
	ZA_STRIPE_META = 2, /* metadata (checkpoints); LBAs are the owner's */
};

/*
 * Header flags, for columns written by a rebuild into a replacement zone
 * (rebuild.c): the header keeps the segment's original members[] and
 * zones[] (so it matches the other columns' headers) and says where this
 * column now lives.
 */
#define ZA_STRIPE_F_RELOCATED 0x01u /* this column is at at_member/at_zone */
#define ZA_STRIPE_F_HOLE 0x02u /* stripe was dead: no data, no LBA table */
#define ZA_STRIPE_F_COMPLETE 0x04u /* last slot of a finished rebuild */
#define ZA_STRIPE_F_ALL 0x07u

/*
 * members[c] of a column that is absent: the segment was opened with fewer
 * writable members than k + p (docs/design.md 6.5), so column c was never
 * written anywhere (born lost; its zones[c] is 0). At most p columns are
 * absent, and a header never describes an absent column itself unless it
 * was written by a rebuild (F_RELOCATED: at_member/at_zone say where).
 * One past the largest member index, so that it can also name the
 * engine's "no member" entry.
 */
#define ZA_STRIPE_MEMBER_ABSENT 1024u

/* Geometry-derived sizes, computed once (za_stripe_layout_init). */
struct za_stripe_layout {
	unsigned k, p, width; /* width = k + p */
	unsigned rows;
	uint32_t chunk_bytes;
	uint32_t chunk_blocks; /* cb */
	uint32_t col_blocks; /* payload blocks per column: rows * cb */
	uint32_t data_blocks; /* per stripe: k * col_blocks */
	uint64_t col_payload_bytes; /* rows * chunk */
	uint64_t slot_bytes; /* header + payload: one column of one stripe */
};

/* Returns 0 or -EINVAL (geometry rejected by za_geom_check). */
int za_stripe_layout_init(struct za_stripe_layout *l, const struct za_geom *g);

/* Where stripe data block @b lives: column and payload block index. */
static inline void za_stripe_locate(const struct za_stripe_layout *l,
				    uint32_t b, unsigned *col,
				    uint32_t *col_blk)
{
	uint32_t row = b / (l->k * l->chunk_blocks);
	uint32_t off = b % l->chunk_blocks;

	*col = (b / l->chunk_blocks) % l->k;
	*col_blk = row * l->chunk_blocks + off;
}

/* The inverse: the stripe data block at payload block @col_blk of @col. */
static inline uint32_t za_stripe_block_of(const struct za_stripe_layout *l,
					  unsigned col, uint32_t col_blk)
{
	uint32_t row = col_blk / l->chunk_blocks;

	return row * l->k * l->chunk_blocks + col * l->chunk_blocks +
	       col_blk % l->chunk_blocks;
}

/* The decoded header of one column of one stripe. */
struct za_stripe_hdr {
	struct za_uuid array_uuid;
	uint64_t seg_id;
	uint64_t seq; /* global write sequence number */
	uint32_t stripe_idx; /* within the segment */
	uint8_t col; /* this column: 0..k+p-1 */
	uint8_t k, p, rows;
	uint8_t kind; /* enum za_stripe_kind */
	uint32_t chunk_bytes;
	uint32_t nr_blocks; /* data blocks used: a prefix 0..nr-1 */
	uint32_t lba_crc; /* CRC32C of the LBA table bytes */
	/* The group the segment belongs to: enough to rebuild the engine's
	 * tables from the drives alone (crash recovery). */
	uint64_t group_id;
	uint16_t group_w; /* segments in the group */
	uint16_t group_idx; /* this segment's place in the group */
	uint32_t group_stripes; /* stripes per segment of the group */
	uint8_t stream; /* engine stream: 0 data, 1 journal, ... */
	uint8_t flags; /* ZA_STRIPE_F_* */
	uint16_t at_member; /* F_RELOCATED: where this column is; else 0 */
	uint32_t at_zone;
	uint16_t members[64]; /* member per column, or ..._MEMBER_ABSENT */
	uint32_t zones[64]; /* zone index per column */
	uint32_t blk_crc[ZA_STRIPE_MAX_COL_BLOCKS]; /* CRC32C per payload block */
};

/*
 * Encode @h into the first ZA_STRIPE_LBA_OFF bytes of @blk (the LBA table
 * at blk + ZA_STRIPE_LBA_OFF is the caller's: lba_crc must already be its
 * CRC). Computes the header CRC.
 */
void za_stripe_hdr_encode(const struct za_stripe_hdr *h, void *blk);

/*
 * Decode and validate a header block (4096 bytes): magic, version, CRC,
 * field ranges, and the LBA table against lba_crc. Returns 0; -ENOENT if
 * the magic is absent; -EBADMSG if anything else is wrong.
 */
int za_stripe_hdr_decode(const void *blk, struct za_stripe_hdr *h);

/* LBA table entry @i of a header block (no validation: decode first). */
uint64_t za_stripe_hdr_lba(const void *blk, uint32_t i);

#endif /* ZA_STRIPE_H */
