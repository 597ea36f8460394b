// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz-stripe.c - fuzz target: the stripe header parser,
 * za_stripe_hdr_decode(), on a 4 KiB block read from a drive.
 *
 * Input: one mode byte, then the block (zero-padded or cut to 4096).
 *   mode bit 0: store the LBA table's CRC (bytes 2048-4095) at lba_crc
 *   mode bit 1: then store the header CRC, so the field checks are reached
 *
 * Oracles, for a block that decodes: the geometry it names passes
 * za_geom_check() and gives a layout; every used block maps to a column
 * and back (za_stripe_locate / za_stripe_block_of); and encoding the
 * decoded header gives back the same 2048 bytes (the format is
 * canonical: one valid encoding per header).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "byteorder.h"
#include "crc.h"
#include "fuzz.h"
#include "stripe.h"

/* docs/format.md, "Stripe header": the two CRC fields. */
#define HDR_CRC_OFF 12u
#define HDR_LBA_CRC_OFF 68u

static uint32_t hdr_crc(const uint8_t *b)
{
	static const uint8_t zero[4];
	uint32_t c = za_crc32c(b, HDR_CRC_OFF);

	c = za_crc32c_update(c, zero, sizeof(zero));
	return za_crc32c_update(c, b + HDR_CRC_OFF + 4,
				ZA_STRIPE_LBA_OFF - HDR_CRC_OFF - 4);
}

static void check_decoded(const uint8_t *blk, const struct za_stripe_hdr *h)
{
	struct za_geom g = {
		.k = h->k,
		.p = h->p,
		.matrix = ZA_EC_MATRIX_CAUCHY,
		.stripe_rows = h->rows,
		.chunk_bytes = h->chunk_bytes,
		.lblock_bytes = 4096,
		.hdr_bytes = ZA_STRIPE_HDR_BYTES,
	};
	struct za_stripe_layout l;
	uint8_t *again;
	uint32_t b, i;

	ZA_FUZZ_CHECK(za_stripe_layout_init(&l, &g) == 0,
		      "a decoded stripe header names an invalid geometry");
	ZA_FUZZ_CHECK(h->col < l.width, "column beyond k + p");
	ZA_FUZZ_CHECK(h->nr_blocks <= l.data_blocks,
		      "more used blocks than the stripe holds");
	ZA_FUZZ_CHECK(l.col_blocks <= ZA_STRIPE_MAX_COL_BLOCKS,
		      "more payload blocks than CRC slots");
	for (b = 0; b < h->nr_blocks; b++) {
		unsigned col;
		uint32_t cb;

		za_stripe_locate(&l, b, &col, &cb);
		ZA_FUZZ_CHECK(col < l.k && cb < l.col_blocks,
			      "a used block located outside the data columns");
		ZA_FUZZ_CHECK(za_stripe_block_of(&l, col, cb) == b,
			      "locate and block_of disagree");
	}
	for (i = 0; i < l.col_blocks; i++)
		(void)za_stripe_hdr_lba(blk, i);

	again = malloc(ZA_STRIPE_HDR_BYTES);
	if (!again)
		abort();
	memcpy(again + ZA_STRIPE_LBA_OFF, blk + ZA_STRIPE_LBA_OFF,
	       ZA_STRIPE_LBA_BYTES);
	za_stripe_hdr_encode(h, again);
	ZA_FUZZ_CHECK(!memcmp(again, blk, ZA_STRIPE_HDR_BYTES),
		      "decode then encode changed the header block");
	free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct za_stripe_hdr h;
	uint8_t mode, *blk;
	int ret;

	za_fuzz_init();
	if (size < 1)
		return 0;
	mode = data[0];
	data++;
	size--;
	/* Exactly one block, so that ASan sees any read past it. */
	blk = calloc(1, ZA_STRIPE_HDR_BYTES);
	if (!blk)
		abort();
	memcpy(blk, data,
	       size < ZA_STRIPE_HDR_BYTES ? size : ZA_STRIPE_HDR_BYTES);
	if (mode & 1)
		za_put_le32(blk + HDR_LBA_CRC_OFF,
			    za_crc32c(blk + ZA_STRIPE_LBA_OFF,
				      ZA_STRIPE_LBA_BYTES));
	if (mode & 2)
		za_put_le32(blk + HDR_CRC_OFF, hdr_crc(blk));

	ret = za_stripe_hdr_decode(blk, &h);
	ZA_FUZZ_CHECK(ret == 0 || ret == -ENOENT || ret == -EBADMSG,
		      "za_stripe_hdr_decode: undocumented error");
	if (ret == 0)
		check_decoded(blk, &h);
	free(blk);
	return 0;
}
