// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz-anchor.c - fuzz target: the checkpoint anchor codec (anchor.h):
 * za_anchor_decode() on the 256 bytes of a superblock's volume_meta, as
 * assembly will read them from a drive.
 *
 * Input: one mode byte, then the record: shorter input is zero-padded to
 * 256 bytes (so seeds may drop trailing zeroes), longer input is cut.
 *   mode bit 0: store the record's CRC (bytes 252-255), so the field
 *               checks behind it are reached
 *
 * Oracles: decode returns only its documented errors, -ENOENT exactly
 * when the record is all zero, and leaves no anchor behind an error (the
 * output all zero, whatever it held); an anchor that decodes obeys the
 * format (flags, the "no checkpoint" rule, nr_segs, widths, members and
 * zones in range, no member twice in a slot, no segment twice, unused
 * slots and columns zero), is the same as itself (za_anchor_same()), and
 * encodes back to the very same 256 bytes (za_anchor_encode():
 * canonical); with its flags and generation changed it still encodes,
 * and still names the same checkpoint in the same places.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "anchor.h"
#include "byteorder.h"
#include "crc.h"
#include "fuzz.h"

#define BYTES ZA_ANCHOR_BYTES
#define ABSENT 1024u /* ZA_STRIPE_MEMBER_ABSENT */

static void fix_crc(uint8_t *b)
{
	za_put_le32(b + 252, za_crc32c(b, 252));
}

/* What the format promises about a decoded anchor, said again here. */
static void check_anchor(const struct za_anchor *a)
{
	unsigned i, j, c, d;

	ZA_FUZZ_CHECK(!(a->flags & ~ZA_ANCHOR_REVOKED),
		      "a decoded anchor has an unknown flag");
	ZA_FUZZ_CHECK(a->ckpt_id ? a->nr_parts >= 1 :
				   !a->nr_parts && !a->seq && !a->nr_segs,
		      "a decoded anchor's checkpoint fields disagree");
	ZA_FUZZ_CHECK(a->nr_segs <= ZA_ANCHOR_MAX_SEGS,
		      "a decoded anchor has too many segments");
	for (i = 0; i < ZA_ANCHOR_MAX_SEGS; i++) {
		const struct za_anchor_seg *s = &a->segs[i];

		if (i >= a->nr_segs) {
			static const struct za_anchor_seg zero;

			ZA_FUZZ_CHECK(!memcmp(s, &zero, sizeof(zero)),
				      "an unused slot is not zero");
			continue;
		}
		ZA_FUZZ_CHECK(s->width >= 1 && s->width <= ZA_ANCHOR_MAX_WIDTH,
			      "a decoded slot's width is out of range");
		for (j = 0; j < i; j++)
			ZA_FUZZ_CHECK(a->segs[j].seg_id != s->seg_id,
				      "a segment named twice");
		for (c = 0; c < ZA_ANCHOR_MAX_WIDTH; c++) {
			if (c >= s->width) {
				ZA_FUZZ_CHECK(!s->members[c] && !s->zones[c],
					      "an unused column is not zero");
				continue;
			}
			ZA_FUZZ_CHECK(s->members[c] <= ABSENT &&
					      (s->members[c] != ABSENT ||
					       !s->zones[c]),
				      "a decoded column is out of range");
			for (d = 0; d < c; d++)
				ZA_FUZZ_CHECK(s->members[c] == ABSENT ||
						      s->members[d] !=
							      s->members[c],
					      "a member twice in a segment");
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct za_anchor zero;
	struct za_anchor a, b;
	uint8_t rec[BYTES], again[BYTES];
	uint8_t mode;
	int ret;

	za_fuzz_init();
	if (size < 1)
		return 0;
	mode = data[0];
	data++;
	size--;
	memset(rec, 0, BYTES);
	memcpy(rec, data, size < BYTES ? size : BYTES);
	if (mode & 1)
		fix_crc(rec);
	/* The output is written whatever it held. */
	memset(&a, 0x5a, sizeof(a));
	ret = za_anchor_decode(rec, &a);
	ZA_FUZZ_CHECK(ret == 0 || ret == -ENOENT || ret == -EBADMSG ||
			      ret == -EPROTONOSUPPORT,
		      "za_anchor_decode: undocumented error");
	ZA_FUZZ_CHECK((ret == -ENOENT) == za_all_zero(rec, BYTES),
		      "-ENOENT is for an all-zero record, and only for it");
	if (ret) {
		ZA_FUZZ_CHECK(!memcmp(&a, &zero, sizeof(a)),
			      "a refused anchor left fields behind");
		return 0;
	}
	check_anchor(&a);
	ZA_FUZZ_CHECK(za_anchor_same(&a, &a), "an anchor differs from itself");
	ZA_FUZZ_CHECK(za_anchor_encode(&a, again) == 0,
		      "the encoder refuses what the decoder took");
	ZA_FUZZ_CHECK(!memcmp(again, rec, BYTES),
		      "decode then encode changed the record");
	/* Flags and generation are the volume's to change at will. */
	b = a;
	b.flags ^= ZA_ANCHOR_REVOKED;
	b.generation++;
	ZA_FUZZ_CHECK(za_anchor_encode(&b, again) == 0,
		      "the encoder refuses another flag or generation");
	memset(&b, 0x5a, sizeof(b));
	ZA_FUZZ_CHECK(za_anchor_decode(again, &b) == 0 &&
			      za_anchor_same(&a, &b) &&
			      b.generation == a.generation + 1 &&
			      b.flags == (a.flags ^ ZA_ANCHOR_REVOKED),
		      "another flag or generation changed the anchor");
	return 0;
}
