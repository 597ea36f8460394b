// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz-mpage.c - fuzz target: the map page codec (mpage.h):
 * za_mpage_decode() on one 4 KiB block of the checkpoint stream, as
 * recovery will read the pages of a checkpoint's map.
 *
 * Input: one mode byte, then the block: shorter input is zero-padded to
 * 4096 bytes (so seeds may drop trailing zeroes), longer input is cut.
 *   mode bit 0: store the block's CRC (bytes 12-15), so the field and
 *               record checks behind it are reached
 *   mode bit 1: pass the block with the input's real length (what is
 *               left after the mode byte, 4097 at most), as a read that
 *               came back short or long
 *
 * Oracles: decode returns only its documented errors, and writes nothing
 * to its outputs behind one; a page that decodes obeys the format
 * (ckpt_id, lo < hi within the largest volume, level, nr_recs, the record
 * types its level holds, records increasing without overlap from lo
 * exactly to hi, positions in range) and encodes back to the very same
 * 4096 bytes (za_mpage_encode(): canonical).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "byteorder.h"
#include "checkpoint.h"
#include "crc.h"
#include "fuzz.h"
#include "mpage.h"

#define BLK ZA_MPAGE_BYTES

/* What the format promises about a decoded page, said again here. */
static void check_page(const struct za_mpage_hdr *h,
		       const struct za_ckpt_rec *recs)
{
	uint64_t end;
	uint32_t i;

	ZA_FUZZ_CHECK(h->ckpt_id && h->lo < h->hi &&
			      h->hi <= ZA_CKPT_MAX_SIZE_BLOCKS,
		      "a decoded page's id or range is out of range");
	ZA_FUZZ_CHECK(h->level <= ZA_MPAGE_MAX_LEVEL && h->nr_recs >= 1 &&
			      h->nr_recs <= ZA_MPAGE_MAX_RECS,
		      "a decoded page's level or record count is out of range");
	ZA_FUZZ_CHECK(recs[0].lba == h->lo, "lo is not the first record's");
	end = h->lo;
	for (i = 0; i < h->nr_recs; i++) {
		const struct za_ckpt_rec *r = &recs[i];

		if (h->level)
			ZA_FUZZ_CHECK(r->type == ZA_CKPT_REC_PAGE &&
					      r->pos != UINT64_MAX,
				      "a bad page record in an interior page");
		else
			ZA_FUZZ_CHECK((r->type == ZA_CKPT_REC_DATA ||
				       r->type == ZA_CKPT_REC_JOURNAL) &&
					      r->pos <=
						      UINT64_MAX - r->nr_blocks,
				      "a bad extent in a leaf");
		ZA_FUZZ_CHECK(r->nr_blocks && r->lba >= end &&
				      r->nr_blocks <= h->hi - r->lba,
			      "records overlap or leave the page's range");
		end = r->lba + r->nr_blocks;
	}
	ZA_FUZZ_CHECK(end == h->hi, "hi is not the last record's end");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct za_ckpt_rec recs[ZA_MPAGE_MAX_RECS],
		pat[ZA_MPAGE_MAX_RECS];
	struct za_mpage_hdr h, pat_h;
	uint8_t *blk, *again;
	uint8_t mode;
	size_t len;
	int ret;

	za_fuzz_init();
	if (size < 1)
		return 0;
	mode = data[0];
	data++;
	size--;
	len = size < BLK + 1 ? size : BLK + 1;
	/* Exactly the bytes passed, so ASan sees any read past them. */
	blk = calloc(1, (mode & 2) ? (len ? len : 1) : BLK);
	again = malloc(BLK);
	if (!blk || !again)
		abort();
	memcpy(blk, data, (mode & 2) ? len : (len < BLK ? len : BLK));
	if (!(mode & 2))
		len = BLK;
	if ((mode & 1) && len >= BLK)
		za_put_le32(blk + 12, za_crc32c_zeroed(blk, BLK, 12));
	memset(&pat_h, 0x5a, sizeof(pat_h));
	memset(pat, 0x5a, sizeof(pat));
	h = pat_h;
	memcpy(recs, pat, sizeof(recs));
	ret = za_mpage_decode(blk, len, &h, recs);
	ZA_FUZZ_CHECK(ret == 0 || ret == -ENOENT || ret == -EBADMSG ||
			      ret == -EPROTONOSUPPORT,
		      "za_mpage_decode: undocumented error");
	if (ret) {
		ZA_FUZZ_CHECK(!memcmp(&h, &pat_h, sizeof(h)) &&
				      !memcmp(recs, pat, sizeof(recs)),
			      "a refused page wrote to the outputs");
		goto out;
	}
	ZA_FUZZ_CHECK(len == BLK, "a page of another length was taken");
	check_page(&h, recs);
	ZA_FUZZ_CHECK(za_mpage_encode(&h, recs, again) == 0,
		      "the encoder refuses what the decoder took");
	ZA_FUZZ_CHECK(!memcmp(again, blk, BLK),
		      "decode then encode changed the page");
out:
	free(again);
	free(blk);
	return 0;
}
