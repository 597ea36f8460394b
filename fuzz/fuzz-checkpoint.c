// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz-checkpoint.c - fuzz target: the checkpoint codec (checkpoint.h,
 * versions 1 to 4): za_ckpt_block_decode() on up to four 4 KiB blocks
 * read from a drive, then za_ckpt_reader_add()/done() over the parts that
 * decoded, in the order given, as recovery assembles a checkpoint.
 *
 * Input: one mode byte, then the blocks, back to back (at most 4; the
 * last one zero-padded to 4096, so seeds may drop trailing zeroes).
 *   mode bit 0: store each block's CRC (bytes 12-15), so the field and
 *               record checks behind it are reached
 *   mode bit 1: feed only the parts that decode to the reader (otherwise
 *               a part that does not decode ends the checkpoint)
 *   mode bit 2: pass the last block with its real length, as a read that
 *               came back short
 *
 * Oracles: decode returns only its documented errors; a part that decodes
 * encodes back to the same 4096 bytes (canonical) and its header and
 * records obey the format (its version's rules: table parts, versions 3
 * and 4's map totals; ranges inside the volume; map records first, of the
 * types its version holds, and increasing; version 4's count records
 * last, their groups increasing); a checkpoint the reader accepts whole
 * has exactly the records its header announces, its map records and its
 * count records' groups increasing across parts.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "byteorder.h"
#include "checkpoint.h"
#include "crc.h"
#include "fuzz.h"
#include "mpage.h"

#define MAX_BLOCKS 4u

static void fix_crc(uint8_t *b)
{
	za_put_le32(b + 12, za_crc32c_zeroed(b, ZA_CKPT_BLOCK_BYTES, 12));
}

/* What the format promises about one decoded part. */
static void check_part(const uint8_t *blk, const struct za_ckpt_hdr *h,
		       const struct za_ckpt_rec *recs)
{
	uint64_t idx = (uint64_t)h->part * ZA_CKPT_RECS_PER_BLOCK, end = 0;
	uint64_t group = 0;
	bool paged = h->version >= 3;
	uint8_t *again;
	uint32_t i;

	ZA_FUZZ_CHECK(h->id && h->size_blocks &&
			      h->size_blocks <= ZA_CKPT_MAX_SIZE_BLOCKS,
		      "a decoded part has an id or size out of range");
	ZA_FUZZ_CHECK(
		h->part < h->nr_parts &&
			h->nr_parts ==
				za_ckpt_nr_parts(h->nr_extents,
						 h->nr_unmaps + h->nr_counts),
		"a decoded part's numbering does not add up");
	ZA_FUZZ_CHECK(h->nr_recs <= ZA_CKPT_RECS_PER_BLOCK,
		      "more records than a part holds");
	ZA_FUZZ_CHECK(h->version >= 1 && h->version <= 4 &&
			      (h->version == 1) == !h->nr_table_parts,
		      "a decoded part's version or table parts are off");
	ZA_FUZZ_CHECK(h->version == 4 || !h->nr_counts,
		      "count records before version 4");
	if (paged)
		ZA_FUZZ_CHECK(h->nr_extents <= h->nr_map_extents &&
				      h->nr_map_extents <= h->size_blocks &&
				      h->map_levels <= ZA_MPAGE_MAX_LEVEL &&
				      !h->map_levels == !h->nr_map_extents &&
				      (!h->map_levels || h->nr_extents),
			      "a version 3 or 4 part's map totals are off");
	else
		ZA_FUZZ_CHECK(!h->nr_map_extents && !h->map_levels,
			      "map totals in a version 1 or 2 part");
	for (i = 0; i < h->nr_recs; i++, idx++) {
		const struct za_ckpt_rec *r = &recs[i];

		if (idx >= h->nr_extents + h->nr_unmaps) {
			ZA_FUZZ_CHECK(r->type == ZA_CKPT_REC_COUNT && !r->lba &&
					      !r->pos && r->nr_blocks &&
					      r->group > group,
				      "a bad count record");
			group = r->group;
			continue;
		}
		ZA_FUZZ_CHECK(r->nr_blocks && r->lba < h->size_blocks &&
				      r->nr_blocks <= h->size_blocks - r->lba,
			      "a decoded record is outside the volume");
		if (idx < h->nr_extents) {
			if (paged)
				ZA_FUZZ_CHECK(r->type == ZA_CKPT_REC_PAGE &&
						      r->pos != UINT64_MAX,
					      "a bad page record");
			else
				ZA_FUZZ_CHECK(
					r->type == ZA_CKPT_REC_DATA ||
						r->type == ZA_CKPT_REC_JOURNAL,
					"an extent of the wrong type");
			ZA_FUZZ_CHECK(r->lba >= end, "map records overlap");
			end = r->lba + r->nr_blocks;
		} else {
			ZA_FUZZ_CHECK(r->type == ZA_CKPT_REC_UNMAP && !r->pos,
				      "an unmap record among the extents");
		}
	}
	again = malloc(ZA_CKPT_BLOCK_BYTES);
	if (!again)
		abort();
	ZA_FUZZ_CHECK(za_ckpt_block_encode(h, recs, again) == 0,
		      "the encoder refuses what the decoder took");
	ZA_FUZZ_CHECK(!memcmp(again, blk, ZA_CKPT_BLOCK_BYTES),
		      "decode then encode changed the part");
	free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct za_ckpt_rec recs[ZA_CKPT_RECS_PER_BLOCK];
	struct za_ckpt_reader rd;
	struct za_ckpt_hdr h;
	uint64_t extents = 0, unmaps = 0, counts = 0, end = 0, group = 0;
	size_t nr, i, len;
	uint8_t mode, *blk;
	bool ok = true;
	uint32_t k;
	int ret;

	za_fuzz_init();
	if (size < 1)
		return 0;
	mode = data[0];
	data++;
	size--;
	nr = (size + ZA_CKPT_BLOCK_BYTES - 1) / ZA_CKPT_BLOCK_BYTES;
	if (nr > MAX_BLOCKS)
		nr = MAX_BLOCKS;
	/* One block at a time, exactly its size, so ASan sees overreads. */
	blk = calloc(1, ZA_CKPT_BLOCK_BYTES);
	if (!blk)
		abort();
	za_ckpt_reader_init(&rd);
	for (i = 0; i < nr; i++) {
		len = size - i * ZA_CKPT_BLOCK_BYTES;
		if (len > ZA_CKPT_BLOCK_BYTES)
			len = ZA_CKPT_BLOCK_BYTES;
		memset(blk, 0, ZA_CKPT_BLOCK_BYTES);
		memcpy(blk, data + i * ZA_CKPT_BLOCK_BYTES, len);
		if (mode & 1)
			fix_crc(blk);
		ret = za_ckpt_block_decode(
			blk, (mode & 4) ? len : ZA_CKPT_BLOCK_BYTES, &h, recs);
		ZA_FUZZ_CHECK(ret == 0 || ret == -ENOENT || ret == -EBADMSG ||
				      ret == -EPROTONOSUPPORT,
			      "za_ckpt_block_decode: undocumented error");
		if (ret) {
			if (!(mode & 2))
				ok = false;
			continue;
		}
		check_part(blk, &h, recs);
		if (!ok || za_ckpt_reader_add(&rd, &h, recs)) {
			ok = false;
			continue;
		}
		for (k = 0; k < h.nr_recs; k++) {
			if (recs[k].type == ZA_CKPT_REC_UNMAP) {
				unmaps++;
				continue;
			}
			if (recs[k].type == ZA_CKPT_REC_COUNT) {
				ZA_FUZZ_CHECK(recs[k].group > group,
					      "the reader took count records "
					      "going backwards");
				group = recs[k].group;
				counts++;
				continue;
			}
			ZA_FUZZ_CHECK(
				recs[k].lba >= end,
				"the reader took map records going backwards");
			end = recs[k].lba + recs[k].nr_blocks;
			extents++;
		}
	}
	if (ok && za_ckpt_reader_done(&rd) == 0)
		ZA_FUZZ_CHECK(extents == rd.first.nr_extents &&
				      unmaps == rd.first.nr_unmaps &&
				      counts == rd.first.nr_counts &&
				      rd.next_part == rd.first.nr_parts,
			      "the reader took a checkpoint whose counts are "
			      "off");
	free(blk);
	return 0;
}
