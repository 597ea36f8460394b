/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * anchor.h - the codec of the checkpoint anchor: 256 bytes the volume
 * keeps in the superblock's volume_meta field (sb.h) saying which
 * checkpoint is the live one and where its parts are, so that assembly
 * can find that checkpoint without scanning every zone (docs/format.md,
 * "Checkpoint anchor (superblock volume_meta)"; docs/design.md 9.6, item
 * 4).
 *
 * The checkpoint's parts (its map and its engine table) are metadata
 * stripes of the checkpoint stream, k = 1: each stripe is p + 1 identical
 * copies, one per column of a segment, so an anchor names up to
 * ZA_ANCHOR_MAX_SEGS segments with each column's place (member, zone) and
 * the first stripe of each that holds a part. A checkpoint in more
 * segments than fit is anchored by its id alone (nr_segs 0), and recovery
 * scans for it.
 *
 * Pure functions, no I/O; the decoder treats its input as hostile (it
 * comes from a drive). It checks what the record can say about itself:
 * ranges, reserved bytes zero, no member twice in a segment, no segment
 * twice. That the members, zones and segments exist in the array, that a
 * width is p + 1, and that the parts are really there is the volume's to
 * check, which knows the array. An array made before anchors has
 * volume_meta all zero: decoding says -ENOENT. The encoding is canonical:
 * one valid encoding per anchor.
 */
#ifndef ZA_ANCHOR_H
#define ZA_ANCHOR_H

#include <stdbool.h>
#include <stdint.h>

#define ZA_ANCHOR_BYTES 256 /* the superblock's volume_meta */
#define ZA_ANCHOR_MAX_SEGS 3 /* segments holding the parts that fit */
#define ZA_ANCHOR_MAX_WIDTH 7 /* columns per segment: p + 1, p <= 6 */

/*
 * flags: the anchored checkpoint's engine table may name zones others now
 * write (the quarantine was broken, docs/design.md 9.6 item 3): do not
 * rest on it.
 */
#define ZA_ANCHOR_REVOKED 0x1u
#define ZA_ANCHOR_FLAGS 0x1u /* every flag defined */

struct za_anchor_seg {
	uint64_t seg_id;
	uint64_t group_id;
	/* The segment's first stripe holding a part of this checkpoint. */
	uint32_t first_stripe;
	uint8_t width; /* columns, 1..ZA_ANCHOR_MAX_WIDTH */
	/* Per column: < ZA_SB_MAX_MEMBERS, or ZA_STRIPE_MEMBER_ABSENT (an
	 * absent column, then its zone is 0); no member twice. */
	uint16_t members[ZA_ANCHOR_MAX_WIDTH];
	uint32_t zones[ZA_ANCHOR_MAX_WIDTH]; /* zone index per column */
};

struct za_anchor {
	uint32_t flags; /* ZA_ANCHOR_* */
	/* The live checkpoint; 0: none yet (then nr_parts, seq and nr_segs
	 * are 0). */
	uint64_t ckpt_id;
	uint64_t seq; /* its sequence number S (its quiet point) */
	/* Its parts, map and engine table together; >= 1 with a checkpoint. */
	uint32_t nr_parts;
	uint32_t generation; /* bumped by the volume at every new anchor */
	/* 0..ZA_ANCHOR_MAX_SEGS; 0 with ckpt_id != 0: the parts are in more
	 * segments than fit (recovery scans). No seg_id twice. */
	uint8_t nr_segs;
	struct za_anchor_seg segs[ZA_ANCHOR_MAX_SEGS];
};

/*
 * Encode @a into @out (ZA_ANCHOR_BYTES), CRC included. Returns 0, or
 * -EINVAL for a field out of range, as the decoder would refuse it (then
 * @out is undefined). Slots past nr_segs and columns past a width are
 * written as zeros, whatever @a holds there.
 */
int za_anchor_encode(const struct za_anchor *a, uint8_t out[ZA_ANCHOR_BYTES]);

/*
 * Decode and check @in (ZA_ANCHOR_BYTES) into @out: -ENOENT if @in is all
 * zero (an array from before anchors, or no anchor written yet); -EBADMSG
 * for no magic on a non-zero record, a bad CRC, or any field out of range
 * (non-zero bytes in unused slots, columns or reserved fields too);
 * -EPROTONOSUPPORT for the magic with an unknown version; 0 otherwise.
 * @out is fully written whatever the result: all zero on an error, unused
 * slots and columns zero on success.
 */
int za_anchor_decode(const uint8_t in[ZA_ANCHOR_BYTES], struct za_anchor *out);

/*
 * Whether @a and @b name the same checkpoint in the same places: ckpt_id,
 * seq, nr_parts and every used slot's fields and used columns alike
 * (flags and generation are not compared; nor is what lies past nr_segs
 * or a width).
 */
bool za_anchor_same(const struct za_anchor *a, const struct za_anchor *b);

#endif /* ZA_ANCHOR_H */
