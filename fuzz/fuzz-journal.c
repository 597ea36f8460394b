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
 * Oracles: only -EBADMSG is ever returned; a record that decodes names a
 * non-empty range inside the volume, and encodes back to the same 4096
 * bytes (the format is canonical).
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
	uint64_t vol, lba = 0, n = 0;
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
	ret = za_journal_unmap_decode(blk, len, vol, &lba, &n);
	ZA_FUZZ_CHECK(ret == 0 || ret == -EBADMSG,
		      "za_journal_unmap_decode: undocumented error");
	if (ret == 0) {
		ZA_FUZZ_CHECK(len == ZA_JOURNAL_BLOCK_BYTES,
			      "a short block decoded");
		ZA_FUZZ_CHECK(n > 0 && lba < vol && n <= vol - lba,
			      "a decoded range is empty or outside the volume");
		za_journal_unmap_encode(again, lba, n);
		ZA_FUZZ_CHECK(!memcmp(again, blk, ZA_JOURNAL_BLOCK_BYTES),
			      "decode then encode changed the record");
	}
	free(blk);
	return 0;
}
