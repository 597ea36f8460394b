// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * stripe.c - stripe layout arithmetic and the stripe header codec.
 *
 * The header block is documented byte by byte in docs/format.md ("Stripe
 * header"). Decoding checks every field against its range before the
 * caller may use any of it; it does not check that the header belongs to
 * the segment the caller expected (the engine compares ids, columns and
 * geometry, because only it knows what it expected).
 */
#include <errno.h>
#include <string.h>

#include "byteorder.h"
#include "crc.h"
#include "stripe.h"

#define HDR_MAGIC "ZASTRIPE"
#define HDR_VERSION 1u
#define HDR_CRC_OFF 12u
#define HDR_MEMBERS_OFF 80u
#define HDR_BLKCRC_OFF 256u
#define HDR_GROUP_OFF 72u
#define HDR_GROUPW_OFF 208u
#define HDR_ZONES_OFF 1280u
#define HDR_MEMBER_NONE 0xffffu

int za_stripe_layout_init(struct za_stripe_layout *l, const struct za_geom *g)
{
	if (za_geom_check(g, NULL))
		return -EINVAL;
	memset(l, 0, sizeof(*l));
	l->k = g->k;
	l->p = g->p;
	l->width = (unsigned)g->k + g->p;
	l->rows = g->stripe_rows;
	l->chunk_bytes = g->chunk_bytes;
	l->chunk_blocks = g->chunk_bytes / 4096u;
	l->col_blocks = l->rows * l->chunk_blocks;
	l->data_blocks = l->k * l->col_blocks;
	l->col_payload_bytes = (uint64_t)l->rows * g->chunk_bytes;
	l->slot_bytes = ZA_STRIPE_HDR_BYTES + l->col_payload_bytes;
	return 0;
}

static uint32_t hdr_crc(const uint8_t *blk)
{
	return za_crc32c_zeroed(blk, ZA_STRIPE_LBA_OFF, HDR_CRC_OFF);
}

void za_stripe_hdr_encode(const struct za_stripe_hdr *h, void *blk)
{
	uint8_t *b = blk;
	unsigned i, width = (unsigned)h->k + h->p;

	memset(b, 0, ZA_STRIPE_LBA_OFF);
	memcpy(b, HDR_MAGIC, 8);
	za_put_le32(b + 8, HDR_VERSION);
	memcpy(b + 16, h->array_uuid.b, 16);
	za_put_le64(b + 32, h->seg_id);
	za_put_le64(b + 40, h->seq);
	za_put_le32(b + 48, h->stripe_idx);
	b[52] = h->col;
	b[53] = h->k;
	b[54] = h->p;
	b[55] = h->rows;
	za_put_le32(b + 56, h->chunk_bytes);
	b[60] = h->kind;
	za_put_le32(b + 64, h->nr_blocks);
	za_put_le32(b + 68, h->lba_crc);
	za_put_le64(b + HDR_GROUP_OFF, h->group_id);
	za_put_le16(b + HDR_GROUPW_OFF, h->group_w);
	za_put_le16(b + HDR_GROUPW_OFF + 2, h->group_idx);
	za_put_le32(b + HDR_GROUPW_OFF + 4, h->group_stripes);
	b[HDR_GROUPW_OFF + 8] = h->stream;
	b[HDR_GROUPW_OFF + 9] = h->flags;
	za_put_le16(b + HDR_GROUPW_OFF + 10, h->at_member);
	za_put_le32(b + HDR_GROUPW_OFF + 12, h->at_zone);
	for (i = 0; i < 64; i++) {
		za_put_le16(b + HDR_MEMBERS_OFF + 2 * i,
			    i < width ? h->members[i] : HDR_MEMBER_NONE);
		za_put_le32(b + HDR_ZONES_OFF + 4 * i,
			    i < width ? h->zones[i] : 0);
	}
	for (i = 0; i < ZA_STRIPE_MAX_COL_BLOCKS; i++)
		za_put_le32(b + HDR_BLKCRC_OFF + 4 * i, h->blk_crc[i]);
	za_put_le32(b + HDR_CRC_OFF, hdr_crc(b));
}

int za_stripe_hdr_decode(const void *blk, struct za_stripe_hdr *h)
{
	const uint8_t *b = blk;
	unsigned i, width, absent = 0;
	uint32_t col_blocks;

	if (memcmp(b, HDR_MAGIC, 8))
		return -ENOENT;
	if (za_get_le32(b + 8) != HDR_VERSION)
		return -EBADMSG;
	if (za_get_le32(b + HDR_CRC_OFF) != hdr_crc(b))
		return -EBADMSG;
	memset(h, 0, sizeof(*h));
	memcpy(h->array_uuid.b, b + 16, 16);
	h->seg_id = za_get_le64(b + 32);
	h->seq = za_get_le64(b + 40);
	h->stripe_idx = za_get_le32(b + 48);
	h->col = b[52];
	h->k = b[53];
	h->p = b[54];
	h->rows = b[55];
	h->chunk_bytes = za_get_le32(b + 56);
	h->kind = b[60];
	h->nr_blocks = za_get_le32(b + 64);
	h->lba_crc = za_get_le32(b + 68);
	h->group_id = za_get_le64(b + HDR_GROUP_OFF);
	h->group_w = za_get_le16(b + HDR_GROUPW_OFF);
	h->group_idx = za_get_le16(b + HDR_GROUPW_OFF + 2);
	h->group_stripes = za_get_le32(b + HDR_GROUPW_OFF + 4);
	h->stream = b[HDR_GROUPW_OFF + 8];
	h->flags = b[HDR_GROUPW_OFF + 9];
	h->at_member = za_get_le16(b + HDR_GROUPW_OFF + 10);
	h->at_zone = za_get_le32(b + HDR_GROUPW_OFF + 12);

	width = (unsigned)h->k + h->p;
	if (h->k < 1 || h->p < 1 || h->p > 6 || width > 64 || h->col >= width)
		return -EBADMSG;
	if (h->rows < 1 || h->chunk_bytes < 4096 ||
	    h->chunk_bytes > (1u << 20) ||
	    (h->chunk_bytes & (h->chunk_bytes - 1)))
		return -EBADMSG;
	if ((uint64_t)h->rows * h->chunk_bytes > (1u << 20))
		return -EBADMSG;
	if (h->flags & ~ZA_STRIPE_F_ALL)
		return -EBADMSG;
	/* A hole (a dead stripe a rebuild skipped) carries nothing. */
	if (h->flags & ZA_STRIPE_F_HOLE) {
		if (h->kind || h->seq || h->nr_blocks ||
		    !(h->flags & ZA_STRIPE_F_RELOCATED) ||
		    (h->flags & ZA_STRIPE_F_COMPLETE))
			return -EBADMSG;
	} else if (h->kind != ZA_STRIPE_DATA && h->kind != ZA_STRIPE_META) {
		return -EBADMSG;
	}
	if (h->flags & ZA_STRIPE_F_RELOCATED) {
		if (h->at_member >= ZA_SB_MAX_MEMBERS)
			return -EBADMSG;
	} else if (h->at_member || h->at_zone ||
		   (h->flags & ZA_STRIPE_F_COMPLETE)) {
		return -EBADMSG;
	}
	col_blocks = h->rows * (h->chunk_bytes / 4096u);
	if (h->nr_blocks > h->k * col_blocks)
		return -EBADMSG;
	if (!za_all_zero(b + 61, 3) ||
	    !za_all_zero(b + HDR_GROUPW_OFF + 16, 32) ||
	    !za_all_zero(b + HDR_ZONES_OFF + 256, 512))
		return -EBADMSG;
	/* A group of 1..1024 segments, this one inside it, and this stripe
	 * inside the segment. */
	if (!h->group_w || h->group_w > ZA_SB_MAX_MEMBERS ||
	    h->group_idx >= h->group_w || !h->group_stripes ||
	    h->stripe_idx >= h->group_stripes)
		return -EBADMSG;
	for (i = 0; i < 64; i++) {
		uint16_t m = za_get_le16(b + HDR_MEMBERS_OFF + 2 * i);

		h->members[i] = m;
		h->zones[i] = za_get_le32(b + HDR_ZONES_OFF + 4 * i);
		if (i >= width) {
			if (m != HDR_MEMBER_NONE || h->zones[i])
				return -EBADMSG;
		} else if (m == ZA_STRIPE_MEMBER_ABSENT) {
			/* Born lost: no zone; this column only if a
			 * rebuild wrote it elsewhere. */
			if (h->zones[i] ||
			    (i == h->col &&
			     !(h->flags & ZA_STRIPE_F_RELOCATED)))
				return -EBADMSG;
			absent++;
		} else if (m >= ZA_SB_MAX_MEMBERS) {
			return -EBADMSG;
		}
	}
	if (absent > h->p)
		return -EBADMSG;
	for (i = 0; i < ZA_STRIPE_MAX_COL_BLOCKS; i++) {
		h->blk_crc[i] = za_get_le32(b + HDR_BLKCRC_OFF + 4 * i);
		if (i >= col_blocks && h->blk_crc[i])
			return -EBADMSG;
	}
	if (za_crc32c(b + ZA_STRIPE_LBA_OFF, ZA_STRIPE_LBA_BYTES) != h->lba_crc)
		return -EBADMSG;
	return 0;
}

uint64_t za_stripe_hdr_lba(const void *blk, uint32_t i)
{
	return za_get_le64((const uint8_t *)blk + ZA_STRIPE_LBA_OFF + 8 * i);
}
