// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * anchor.c - encoding and checking the checkpoint anchor (anchor.h; the
 * bytes are in docs/format.md, "Checkpoint anchor (superblock
 * volume_meta)").
 *
 * One set of checks serves both ways: anchor_check() says whether a
 * decoded anchor is one the format allows, and the encoder refuses what it
 * refuses, so that what is refused on reading can never be written. The
 * decoder adds what only the bytes show (magic, version, CRC, reserved
 * bytes, unused slots and columns zero), which with the encoder writing
 * zeros there keeps the encoding canonical. Whether the members, zones and
 * segments named exist, and whether the parts are where the anchor says,
 * is not checked here: that is the volume's, which knows the array. Nor
 * does anything here read or write a superblock: sb.c keeps volume_meta
 * opaque, and the volume puts these bytes in it.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "anchor.h"
#include "byteorder.h"
#include "crc.h"
#include "sb.h"
#include "stripe.h"

#define ANCHOR_MAGIC "ZAAN"
#define ANCHOR_VERSION 1u
#define ANCHOR_SLOT_OFF 40u /* the first segment slot */
#define ANCHOR_SLOT_BYTES 64u
#define ANCHOR_TAIL_OFF 232u /* reserved, up to the CRC */
#define ANCHOR_CRC_OFF 252u

/* Within a slot. */
#define SLOT_MEMBERS_OFF 22u /* then 2 bytes per column */
#define SLOT_ZONES_OFF 36u /* then 4 bytes per column */

_Static_assert(ZA_ANCHOR_BYTES == sizeof(((struct za_sb *)0)->volume_meta),
	       "an anchor fills the superblock's volume_meta");
_Static_assert(ANCHOR_SLOT_OFF + ZA_ANCHOR_MAX_SEGS * ANCHOR_SLOT_BYTES ==
		       ANCHOR_TAIL_OFF,
	       "the segment slots end where the reserved tail starts");
_Static_assert(SLOT_ZONES_OFF + 4 * ZA_ANCHOR_MAX_WIDTH == ANCHOR_SLOT_BYTES,
	       "a slot's zones end with the slot");
/* An absent column is one past the largest member index, as in stripe
 * headers and the engine: members <= ZA_STRIPE_MEMBER_ABSENT is the range
 * check. */
_Static_assert(ZA_STRIPE_MEMBER_ABSENT == ZA_SB_MAX_MEMBERS,
	       "the absent member is one past the largest index");

/* One used slot: width, members and zones in range, no member twice.
 * 0 or -EBADMSG. */
static int seg_check(const struct za_anchor_seg *s)
{
	unsigned c, d;

	if (!s->width || s->width > ZA_ANCHOR_MAX_WIDTH)
		return -EBADMSG;
	for (c = 0; c < s->width; c++) {
		uint16_t m = s->members[c];

		if (m > ZA_STRIPE_MEMBER_ABSENT ||
		    (m == ZA_STRIPE_MEMBER_ABSENT && s->zones[c]))
			return -EBADMSG;
		/* The copies of a stripe are on distinct members; several
		 * columns may be absent. */
		for (d = 0; d < c && m != ZA_STRIPE_MEMBER_ABSENT; d++)
			if (s->members[d] == m)
				return -EBADMSG;
	}
	return 0;
}

/* A whole anchor as decoded (what past nr_segs and the widths is not
 * looked at). 0 or -EBADMSG. */
static int anchor_check(const struct za_anchor *a)
{
	unsigned i, j;

	if ((a->flags & ~ZA_ANCHOR_FLAGS) || a->nr_segs > ZA_ANCHOR_MAX_SEGS)
		return -EBADMSG;
	/* No checkpoint yet: nothing about it either. */
	if (!a->ckpt_id && (a->nr_parts || a->seq || a->nr_segs))
		return -EBADMSG;
	if (a->ckpt_id && !a->nr_parts)
		return -EBADMSG;
	for (i = 0; i < a->nr_segs; i++) {
		if (seg_check(&a->segs[i]))
			return -EBADMSG;
		for (j = 0; j < i; j++)
			if (a->segs[j].seg_id == a->segs[i].seg_id)
				return -EBADMSG;
	}
	return 0;
}

static uint32_t anchor_crc(const uint8_t *b)
{
	/* The CRC is the record's last field: everything before it. */
	return za_crc32c(b, ANCHOR_CRC_OFF);
}

int za_anchor_encode(const struct za_anchor *a, uint8_t out[ZA_ANCHOR_BYTES])
{
	unsigned i, c;

	if (anchor_check(a))
		return -EINVAL;
	/* Reserved bytes, unused slots and columns stay zero. */
	memset(out, 0, ZA_ANCHOR_BYTES);
	memcpy(out, ANCHOR_MAGIC, 4);
	za_put_le16(out + 4, ANCHOR_VERSION);
	za_put_le32(out + 8, a->flags);
	za_put_le32(out + 12, a->nr_parts);
	za_put_le64(out + 16, a->ckpt_id);
	za_put_le64(out + 24, a->seq);
	za_put_le32(out + 32, a->generation);
	out[36] = a->nr_segs;
	for (i = 0; i < a->nr_segs; i++) {
		const struct za_anchor_seg *s = &a->segs[i];
		uint8_t *p = out + ANCHOR_SLOT_OFF + i * ANCHOR_SLOT_BYTES;

		za_put_le64(p, s->seg_id);
		za_put_le64(p + 8, s->group_id);
		za_put_le32(p + 16, s->first_stripe);
		p[20] = s->width;
		for (c = 0; c < s->width; c++) {
			za_put_le16(p + SLOT_MEMBERS_OFF + 2 * c,
				    s->members[c]);
			za_put_le32(p + SLOT_ZONES_OFF + 4 * c, s->zones[c]);
		}
	}
	za_put_le32(out + ANCHOR_CRC_OFF, anchor_crc(out));
	return 0;
}

/*
 * The slots of @b into @out, which is zeroed: every slot's bytes past
 * what it uses must be zero, a slot past nr_segs all of them, so that one
 * anchor has one encoding. Ranges are anchor_check()'s; the width is
 * checked here only as far as reading the columns needs. 0 or -EBADMSG.
 */
static int parse_slots(const uint8_t *b, struct za_anchor *out)
{
	unsigned i, c;

	for (i = 0; i < ZA_ANCHOR_MAX_SEGS; i++) {
		const uint8_t *p = b + ANCHOR_SLOT_OFF + i * ANCHOR_SLOT_BYTES;
		struct za_anchor_seg *s = &out->segs[i];
		uint8_t width;

		if (i >= out->nr_segs) {
			if (!za_all_zero(p, ANCHOR_SLOT_BYTES))
				return -EBADMSG;
			continue;
		}
		width = p[20];
		if (!width || width > ZA_ANCHOR_MAX_WIDTH || p[21] ||
		    !za_all_zero(p + SLOT_MEMBERS_OFF + 2 * width,
				 2 * (ZA_ANCHOR_MAX_WIDTH - width)) ||
		    !za_all_zero(p + SLOT_ZONES_OFF + 4 * width,
				 4 * (ZA_ANCHOR_MAX_WIDTH - width)))
			return -EBADMSG;
		s->seg_id = za_get_le64(p);
		s->group_id = za_get_le64(p + 8);
		s->first_stripe = za_get_le32(p + 16);
		s->width = width;
		for (c = 0; c < width; c++) {
			s->members[c] =
				za_get_le16(p + SLOT_MEMBERS_OFF + 2 * c);
			s->zones[c] = za_get_le32(p + SLOT_ZONES_OFF + 4 * c);
		}
	}
	return 0;
}

/* Everything but the all-zero case; @out is zeroed. 0 or -errno. */
static int decode(const uint8_t *in, struct za_anchor *out)
{
	if (memcmp(in, ANCHOR_MAGIC, 4))
		return -EBADMSG;
	/* Before the CRC: another version may place it elsewhere. */
	if (za_get_le16(in + 4) != ANCHOR_VERSION)
		return -EPROTONOSUPPORT;
	if (za_get_le32(in + ANCHOR_CRC_OFF) != anchor_crc(in) ||
	    za_get_le16(in + 6) || !za_all_zero(in + 37, 3) ||
	    !za_all_zero(in + ANCHOR_TAIL_OFF,
			 ANCHOR_CRC_OFF - ANCHOR_TAIL_OFF))
		return -EBADMSG;
	out->flags = za_get_le32(in + 8);
	out->nr_parts = za_get_le32(in + 12);
	out->ckpt_id = za_get_le64(in + 16);
	out->seq = za_get_le64(in + 24);
	out->generation = za_get_le32(in + 32);
	out->nr_segs = in[36];
	if (out->nr_segs > ZA_ANCHOR_MAX_SEGS || parse_slots(in, out) ||
	    anchor_check(out))
		return -EBADMSG;
	return 0;
}

int za_anchor_decode(const uint8_t in[ZA_ANCHOR_BYTES], struct za_anchor *out)
{
	int ret;

	memset(out, 0, sizeof(*out));
	if (za_all_zero(in, ZA_ANCHOR_BYTES))
		return -ENOENT;
	ret = decode(in, out);
	/* Never half an anchor: a caller that ignores the error still
	 * sees none. */
	if (ret)
		memset(out, 0, sizeof(*out));
	return ret;
}

bool za_anchor_same(const struct za_anchor *a, const struct za_anchor *b)
{
	unsigned i, c;

	if (a->ckpt_id != b->ckpt_id || a->seq != b->seq ||
	    a->nr_parts != b->nr_parts || a->nr_segs != b->nr_segs)
		return false;
	/* Bounded whatever the fields hold: the anchors may be unchecked. */
	for (i = 0; i < a->nr_segs && i < ZA_ANCHOR_MAX_SEGS; i++) {
		const struct za_anchor_seg *s = &a->segs[i], *t = &b->segs[i];

		if (s->seg_id != t->seg_id || s->group_id != t->group_id ||
		    s->first_stripe != t->first_stripe || s->width != t->width)
			return false;
		for (c = 0; c < s->width && c < ZA_ANCHOR_MAX_WIDTH; c++)
			if (s->members[c] != t->members[c] ||
			    s->zones[c] != t->zones[c])
				return false;
	}
	return true;
}
