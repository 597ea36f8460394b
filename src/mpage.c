// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * mpage.c - encoding and checking map pages (mpage.h; the bytes are in
 * docs/format.md, "Map page block").
 *
 * One check, page_check(), serves the decoder and the encoder, so that
 * what is refused on reading can never be written and the encoding stays
 * canonical; the decoder adds what only the bytes show (magic, version,
 * length, CRC, reserved bytes). The records are checkpoint records, and
 * their bytes and their checks are checkpoint.c's (za_ckpt_recs_put(),
 * za_ckpt_recs_get(), za_ckpt_map_rec_check()), so that an extent is the
 * same thing in a leaf and in a checkpoint part. How pages make a tree
 * (a child's level, range and id against the record naming it) is not
 * checked here: a page alone cannot say.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "byteorder.h"
#include "crc.h"
#include "mpage.h"

#define MPAGE_MAGIC "ZAMAPPAG"
#define MPAGE_VERSION 1u
#define MPAGE_CRC_OFF 12u
#define MPAGE_LEVEL_OFF 40u
#define MPAGE_NR_RECS_OFF 44u
#define MPAGE_RESERVED_OFF 48u

/* The layout takes from checkpoint parts: records where theirs are. */
_Static_assert(ZA_MPAGE_BYTES == ZA_CKPT_BLOCK_BYTES &&
		       ZA_MPAGE_HDR_BYTES == ZA_CKPT_HDR_BYTES &&
		       ZA_MPAGE_MAX_RECS == ZA_CKPT_RECS_PER_BLOCK,
	       "a map page's records are laid out as a checkpoint part's");

/*
 * A page as decoded: header fields in range, every record of the type its
 * level holds and in range, increasing without overlap from lo exactly to
 * hi. 0 or -EBADMSG.
 */
static int page_check(const struct za_mpage_hdr *h,
		      const struct za_ckpt_rec *recs)
{
	uint64_t end;
	uint32_t i;

	if (!h->ckpt_id || h->lo >= h->hi || h->hi > ZA_CKPT_MAX_SIZE_BLOCKS ||
	    h->level > ZA_MPAGE_MAX_LEVEL || !h->nr_recs ||
	    h->nr_recs > ZA_MPAGE_MAX_RECS || recs[0].lba != h->lo)
		return -EBADMSG;
	/*
	 * Records inside [0, hi) and each from the end of the one before,
	 * the first at lo: all of them in [lo, hi).
	 */
	end = h->lo;
	for (i = 0; i < h->nr_recs; i++)
		if (za_ckpt_map_rec_check(&recs[i], h->level > 0, h->hi, &end))
			return -EBADMSG;
	return end == h->hi ? 0 : -EBADMSG;
}

static uint32_t block_crc(const uint8_t *blk)
{
	return za_crc32c_zeroed(blk, ZA_MPAGE_BYTES, MPAGE_CRC_OFF);
}

int za_mpage_encode(const struct za_mpage_hdr *h,
		    const struct za_ckpt_rec *recs, uint8_t *blk)
{
	if (page_check(h, recs))
		return -EINVAL;
	memset(blk, 0, ZA_MPAGE_HDR_BYTES);
	memcpy(blk, MPAGE_MAGIC, 8);
	za_put_le32(blk + 8, MPAGE_VERSION);
	za_put_le64(blk + 16, h->ckpt_id);
	za_put_le64(blk + 24, h->lo);
	za_put_le64(blk + 32, h->hi);
	blk[MPAGE_LEVEL_OFF] = h->level;
	za_put_le32(blk + MPAGE_NR_RECS_OFF, h->nr_recs);
	za_ckpt_recs_put(blk + ZA_MPAGE_HDR_BYTES, recs, h->nr_recs);
	za_put_le32(blk + MPAGE_CRC_OFF, block_crc(blk));
	return 0;
}

int za_mpage_decode(const uint8_t *blk, size_t len, struct za_mpage_hdr *h,
		    struct za_ckpt_rec *recs)
{
	struct za_ckpt_rec rr[ZA_MPAGE_MAX_RECS];
	struct za_mpage_hdr hh;

	if (len < 8 || memcmp(blk, MPAGE_MAGIC, 8))
		return -ENOENT;
	if (len < 12)
		return -EBADMSG;
	if (za_get_le32(blk + 8) != MPAGE_VERSION)
		return -EPROTONOSUPPORT;
	/* A page is one block: a read of any other length is not one. */
	if (len != ZA_MPAGE_BYTES ||
	    za_get_le32(blk + MPAGE_CRC_OFF) != block_crc(blk) ||
	    !za_all_zero(blk + MPAGE_LEVEL_OFF + 1, 3) ||
	    !za_all_zero(blk + MPAGE_RESERVED_OFF,
			 ZA_MPAGE_HDR_BYTES - MPAGE_RESERVED_OFF))
		return -EBADMSG;
	hh.ckpt_id = za_get_le64(blk + 16);
	hh.lo = za_get_le64(blk + 24);
	hh.hi = za_get_le64(blk + 32);
	hh.level = blk[MPAGE_LEVEL_OFF];
	hh.nr_recs = za_get_le32(blk + MPAGE_NR_RECS_OFF);
	/* za_ckpt_recs_get() refuses more records than the slots. */
	if (za_ckpt_recs_get(blk + ZA_MPAGE_HDR_BYTES, hh.nr_recs, rr) ||
	    page_check(&hh, rr))
		return -EBADMSG;
	*h = hh;
	memcpy(recs, rr, hh.nr_recs * sizeof(*rr));
	return 0;
}
