// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz-sb.c - fuzz target: the member superblock parser, za_sb_decode(),
 * on a record read from a drive, and single-drive assembly of what it
 * accepts.
 *
 * Input: one mode byte, then the record.
 *   mode bit 0: pad the record with zeroes to ZA_SB_RECORD_BYTES (so
 *               seeds stay small: most of a record is zero); without it
 *               the decoder gets exactly the bytes given, short or long
 *   mode bit 1: store both CRCs first (only on a whole record), so the
 *               field checks are reached
 *
 * Oracles, for a record that decodes: its geometry passes
 * za_geom_check(); its strings are terminated; its index and states are
 * in range; encoding it again gives the same bytes (docs/format.md: the
 * encoding is canonical); and it assembles alone, as its own reference.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "sb.h"

static struct za_sb sb;
static struct za_asm_result res;

static void check_decoded(const uint8_t *rec)
{
	const struct za_sb *sbs[1] = { &sb };
	int rc[1] = { 0 };
	uint8_t *again;
	uint32_t i;

	ZA_FUZZ_CHECK(za_geom_check(&sb.geom, NULL) == 0,
		      "a decoded superblock has an invalid geometry");
	ZA_FUZZ_CHECK(sb.nr_members >= 1 && sb.nr_members <= ZA_SB_MAX_MEMBERS,
		      "member count out of range");
	ZA_FUZZ_CHECK(sb.member_idx < sb.nr_members,
		      "member index out of range");
	ZA_FUZZ_CHECK(sb.generation >= 1, "generation 0");
	ZA_FUZZ_CHECK(strnlen(sb.name, sizeof(sb.name)) < sizeof(sb.name) &&
			      sb.name[0],
		      "array name empty or not terminated");
	ZA_FUZZ_CHECK(!za_uuid_is_null(&sb.array_uuid), "null array uuid");
	for (i = 0; i < sb.nr_members; i++) {
		const struct za_sb_member *m = &sb.members[i];

		ZA_FUZZ_CHECK(m->state >= ZA_MEMBER_ONLINE &&
				      m->state <= ZA_MEMBER_REMOVED,
			      "member state out of range");
		ZA_FUZZ_CHECK(strnlen(m->path_hint, ZA_SB_HINT_BYTES) <
				      ZA_SB_HINT_BYTES,
			      "path hint not terminated");
		ZA_FUZZ_CHECK(m->zone_size_bytes && m->capacity_bytes &&
				      m->capacity_bytes / m->zone_size_bytes <=
					      m->nr_zones,
			      "member capacity above its zones");
	}
	ZA_FUZZ_CHECK(za_uuid_eq(&sb.member_uuid,
				 &sb.members[sb.member_idx].uuid),
		      "member uuid differs from its table entry");

	again = malloc(ZA_SB_RECORD_BYTES);
	if (!again)
		abort();
	ZA_FUZZ_CHECK(za_sb_encode(&sb, again, ZA_SB_RECORD_BYTES) == 0,
		      "a decoded superblock does not encode");
	ZA_FUZZ_CHECK(!memcmp(again, rec, ZA_SB_RECORD_BYTES),
		      "decode then encode changed the record");
	free(again);

	ZA_FUZZ_CHECK(za_sb_assemble(sbs, rc, 1, NULL, &res) == 0,
		      "a valid record does not assemble alone");
	ZA_FUZZ_CHECK(res.ref == &sb && res.ref_dev == 0,
		      "the only record is not the reference");
	ZA_FUZZ_CHECK(za_sb_assemble(sbs, rc, 1, sb.name, &res) == 0,
		      "a valid record does not assemble by its own name");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t len;
	uint8_t mode, *rec;
	int ret;

	za_fuzz_init();
	if (size < 1)
		return 0;
	mode = data[0];
	data++;
	size--;
	/* Exactly the bytes the decoder may read, so ASan sees overruns. */
	len = (mode & 1) && size < ZA_SB_RECORD_BYTES ? ZA_SB_RECORD_BYTES :
							size;
	rec = calloc(1, len ? len : 1);
	if (!rec)
		abort();
	memcpy(rec, data, size);
	if ((mode & 2) && len >= ZA_SB_RECORD_BYTES)
		za_fuzz_sb_fix_crcs(rec);

	ret = za_sb_decode(rec, len, &sb);
	ZA_FUZZ_CHECK(ret == 0 || ret == -ENOENT || ret == -EBADMSG ||
			      ret == -EPROTONOSUPPORT,
		      "za_sb_decode: undocumented error");
	if (ret == 0)
		check_decoded(rec);
	free(rec);
	return 0;
}
