// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz-journal.c - fuzz target: the journal's unmap record,
 * za_journal_unmap_decode(), on a block read from a drive, as crash
 * recovery decodes it before replaying a TRIM or WRITE_ZEROES.
 *
 * Input: one mode byte, 8 bytes of volume size in blocks (little endian;
 * 0 is taken as 1), then the block, at most 4096 bytes.
 *   mode bit 0: pass the block exactly as long as the input gives it, as
 *               a read that came back short; otherwise zero-pad it to
 *               4096 bytes (so seeds may drop trailing zeroes)
 *
 * Oracles: only -EBADMSG is ever returned; a record that decodes names 1
 * to 255 non-empty ranges inside the volume, in increasing order with
 * gaps, and encodes back to the same 4096 bytes (the format is
 * canonical).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "byteorder.h"
#include "fuzz.h"
#include "journal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *blk, again[ZA_JOURNAL_BLOCK_BYTES];
	struct za_journal_range r[ZA_JOURNAL_MAX_RANGES];
	uint64_t vol, end = 0;
	unsigned nr = 0, i;
	size_t len, have;
	uint8_t mode;
	int ret;

	za_fuzz_init();
	if (size < 9)
		return 0;
	mode = data[0];
	vol = za_get_le64(data + 1);
	if (!vol)
		vol = 1;
	data += 9;
	size -= 9;
	have = size < ZA_JOURNAL_BLOCK_BYTES ? size : ZA_JOURNAL_BLOCK_BYTES;
	len = mode & 1 ? have : ZA_JOURNAL_BLOCK_BYTES;
	/* Exactly @len bytes, so that ASan sees any read past them. */
	blk = calloc(1, len ? len : 1);
	if (!blk)
		abort();
	memcpy(blk, data, have);
	ret = za_journal_unmap_decode(blk, len, vol, r, &nr);
	ZA_FUZZ_CHECK(ret == 0 || ret == -EBADMSG,
		      "za_journal_unmap_decode: undocumented error");
	if (ret == 0) {
		ZA_FUZZ_CHECK(len == ZA_JOURNAL_BLOCK_BYTES,
			      "a short block decoded");
		ZA_FUZZ_CHECK(nr >= 1 && nr <= ZA_JOURNAL_MAX_RANGES,
			      "a decoded record has no ranges or too many");
		for (i = 0; i < nr; i++) {
			ZA_FUZZ_CHECK(r[i].n > 0 && r[i].lba < vol &&
					      r[i].n <= vol - r[i].lba,
				      "a decoded range is empty or outside "
				      "the volume");
			ZA_FUZZ_CHECK(!i || r[i].lba > end,
				      "decoded ranges overlap, touch or go "
				      "backwards");
			end = r[i].lba + r[i].n;
		}
		ZA_FUZZ_CHECK(!za_journal_unmap_encode_ranges(again, r, nr),
			      "a decoded record does not encode");
		ZA_FUZZ_CHECK(!memcmp(again, blk, ZA_JOURNAL_BLOCK_BYTES),
			      "decode then encode changed the record");
	}
	free(blk);
	return 0;
}
