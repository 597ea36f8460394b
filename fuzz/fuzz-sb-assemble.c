// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz-sb-assemble.c - fuzz target: assembly, za_sb_assemble(), over the
 * records of up to 8 drives, each one decoded by za_sb_decode() from
 * fuzzed bytes (assembly only ever sees decoded records).
 *
 * Input:
 *   byte 0       number of drives, modulo 9
 *   byte 1       which name to assemble: 0 none (the newest array), 1 a
 *                name no drive has, n >= 2 the name of drive (n - 2) % N
 *   per drive    one kind byte: 0 a record follows; 1 blank (-ENOENT);
 *                2 corrupt (-EBADMSG); 3 read error (-EIO);
 *                for a record, a 16-bit little-endian length, then that
 *                many bytes in compact form: the first
 *                ZA_FUZZ_SB_HDR_USED go to the header, the rest to the
 *                member table at 4096; the record is zero-padded and its
 *                CRCs are fixed up, so every field check is reached.
 *   A record that does not decode is passed as NULL with the decoder's
 *   error, as za_sb_read() would.
 *
 * Oracles, when assembly succeeds: the reference is one of the accepted
 * records and the newest of its array; every member is claimed by at
 * most one drive, and only by a drive of the array that has that member
 * uuid at that index; the counts match the tables.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "byteorder.h"
#include "fuzz.h"
#include "sb.h"

#define MAX_DEVS 8

static struct za_sb recs[MAX_DEVS];
static struct za_asm_result res;

static void check_result(const struct za_sb *const *sbs, const int *rc,
			 unsigned n)
{
	const struct za_sb *ref = res.ref;
	unsigned i, m, present = 0, lost = 0, claimed[MAX_DEVS] = { 0 };

	ZA_FUZZ_CHECK(ref && res.ref_dev < n && sbs[res.ref_dev] == ref &&
			      rc[res.ref_dev] == 0,
		      "the reference is not one of the accepted records");
	for (i = 0; i < n; i++) {
		ZA_FUZZ_CHECK(res.dev_state[i] >= ZA_ASM_DEV_MEMBER &&
				      res.dev_state[i] <= ZA_ASM_DEV_DUPLICATE,
			      "a drive left unclassified");
		if (!sbs[i] || rc[i]) {
			ZA_FUZZ_CHECK(res.dev_state[i] == ZA_ASM_DEV_BLANK ||
					      res.dev_state[i] ==
						      ZA_ASM_DEV_CORRUPT,
				      "a drive without a record classified");
			continue;
		}
		if (za_uuid_eq(&sbs[i]->array_uuid, &ref->array_uuid) &&
		    !strcmp(sbs[i]->name, ref->name))
			ZA_FUZZ_CHECK(sbs[i]->generation <= ref->generation,
				      "the reference is not the newest record");
		else
			ZA_FUZZ_CHECK(res.dev_state[i] == ZA_ASM_DEV_FOREIGN,
				      "another array's drive not foreign");
	}
	for (m = 0; m < ZA_SB_MAX_MEMBERS; m++) {
		int d = res.member_dev[m];

		if (m >= ref->nr_members) {
			ZA_FUZZ_CHECK(d == -1, "a drive past the member table");
			continue;
		}
		if (d >= 0) {
			ZA_FUZZ_CHECK((unsigned)d < n &&
					      res.dev_state[d] ==
						      ZA_ASM_DEV_MEMBER,
				      "a member claimed by a non-member drive");
			ZA_FUZZ_CHECK(za_uuid_eq(&sbs[d]->member_uuid,
						 &ref->members[m].uuid) &&
					      sbs[d]->member_idx == m,
				      "a member claimed by the wrong drive");
			ZA_FUZZ_CHECK(za_uuid_eq(&sbs[d]->array_uuid,
						 &ref->array_uuid),
				      "a member from another array");
			claimed[d]++;
			present++;
		}
		if (res.member_state[m] == ZA_MEMBER_FAILED ||
		    res.member_state[m] == ZA_MEMBER_MISSING)
			lost++;
	}
	for (i = 0; i < n; i++)
		ZA_FUZZ_CHECK(claimed[i] == (unsigned)(res.dev_state[i] ==
						       ZA_ASM_DEV_MEMBER),
			      "a member drive claims no member, or two");
	ZA_FUZZ_CHECK(present == res.nr_present, "nr_present miscounted");
	ZA_FUZZ_CHECK(lost == res.nr_lost, "nr_lost miscounted");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct za_sb *sbs[MAX_DEVS];
	int rc[MAX_DEVS];
	const char *name = NULL;
	unsigned n, i, sel;
	size_t pos = 2;
	uint8_t *rec;
	int ret;

	za_fuzz_init();
	if (size < 2)
		return 0;
	n = data[0] % (MAX_DEVS + 1);
	sel = data[1];
	rec = malloc(ZA_SB_RECORD_BYTES);
	if (!rec)
		abort();
	for (i = 0; i < n; i++) {
		uint8_t kind = pos < size ? data[pos++] : 1;
		size_t len, hlen;

		sbs[i] = NULL;
		switch (kind % 4) {
		case 1:
			rc[i] = -ENOENT;
			continue;
		case 2:
			rc[i] = -EBADMSG;
			continue;
		case 3:
			rc[i] = -EIO;
			continue;
		}
		len = pos + 2 <= size ? za_get_le16(data + pos) : 0;
		pos = pos + 2 <= size ? pos + 2 : size;
		if (len > size - pos)
			len = size - pos;
		if (len > ZA_SB_RECORD_BYTES - 4096 + ZA_FUZZ_SB_HDR_USED)
			len = ZA_SB_RECORD_BYTES - 4096 + ZA_FUZZ_SB_HDR_USED;
		memset(rec, 0, ZA_SB_RECORD_BYTES);
		hlen = len < ZA_FUZZ_SB_HDR_USED ? len : ZA_FUZZ_SB_HDR_USED;
		memcpy(rec, data + pos, hlen);
		memcpy(rec + 4096, data + pos + hlen, len - hlen);
		pos += len;
		za_fuzz_sb_fix_crcs(rec);
		rc[i] = za_sb_decode(rec, ZA_SB_RECORD_BYTES, &recs[i]);
		if (rc[i] == 0)
			sbs[i] = &recs[i];
	}
	free(rec);
	if (sel == 1)
		name = "no-such-array";
	else if (sel >= 2 && n) {
		i = (sel - 2) % n;
		if (sbs[i])
			name = sbs[i]->name;
	}

	ret = za_sb_assemble(sbs, rc, n, name, &res);
	ZA_FUZZ_CHECK(ret == 0 || ret == -ENOENT || ret == -EEXIST,
		      "za_sb_assemble: undocumented error");
	if (ret == 0)
		check_result(sbs, rc, n);
	return 0;
}
