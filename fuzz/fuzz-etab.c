// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz-etab.c - fuzz target: the engine table codec (etab.h):
 * za_etab_block_decode() on up to four 4 KiB blocks read from a drive,
 * then za_etab_reader_add()/done() over the parts that decoded, in the
 * order given, as recovery assembles a table; a table taken whole is
 * written again with the writer.
 *
 * Input: one mode byte, then the blocks, back to back (at most 4; the
 * last one zero-padded to 4096, so seeds may drop trailing zeroes).
 *   mode bit 0: store each block's CRC (bytes 12-15), so the field and
 *               record checks behind it are reached
 *   mode bit 1: feed only the parts that decode to the reader (otherwise
 *               a part that does not decode ends the table)
 *   mode bit 2: pass the last block with its real length, as a read that
 *               came back short (in a buffer of exactly that length, so
 *               that ASan sees a read past it)
 *
 * Oracles: decode returns only its documented errors; a part that
 * decodes obeys the format (ranges, counts, used_bytes the sum of its
 * records, ids increasing, an absent column without a zone) and encodes
 * back to the same 4096 bytes (za_etab_block_encode(): canonical); the
 * writer takes every record of every part the reader took; a table the
 * reader accepts whole has exactly the records its header announces, ids
 * increasing across parts, and the writer, given its records, writes the
 * very same blocks (the cut between parts is canonical too).
 *
 * Re-encoding one part goes through za_etab_block_encode() rather than
 * the writer, as the writer only writes whole tables (it numbers the
 * parts and counts the totals itself); the writer is the whole-table
 * oracle.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "byteorder.h"
#include "crc.h"
#include "etab.h"
#include "fuzz.h"

#define MAX_BLOCKS 4u
#define BLK ZA_ETAB_BLOCK_BYTES

static void fix_crc(uint8_t *b)
{
	za_put_le32(b + 12, za_crc32c_zeroed(b, BLK, 12));
}

/* What the format promises about one decoded part, said again here. */
static void check_part(const uint8_t *blk, const struct za_etab_part *p)
{
	const struct za_etab_hdr *h = &p->h;
	uint64_t used = 0;
	uint8_t *again;
	uint32_t i, c;

	ZA_FUZZ_CHECK(h->ckpt_id && h->next_seq > h->seq && h->next_seg_id &&
			      h->next_group_id,
		      "a decoded part has a counter out of range");
	ZA_FUZZ_CHECK(h->part < h->nr_parts &&
			      h->used_bytes <= ZA_ETAB_PAYLOAD_BYTES,
		      "a decoded part's numbering or size is off");
	ZA_FUZZ_CHECK(p->nr_groups <= ZA_ETAB_MAX_GROUPS &&
			      p->nr_segs <= ZA_ETAB_MAX_SEGS &&
			      h->nr_recs == p->nr_groups + p->nr_segs &&
			      p->nr_groups <= h->nr_groups &&
			      p->nr_segs <= h->nr_segs,
		      "a decoded part's record counts do not add up");
	ZA_FUZZ_CHECK(h->nr_groups < h->next_group_id &&
			      h->nr_segs < h->next_seg_id,
		      "more ids than the counters allow");
	for (i = 0; i < p->nr_groups; i++) {
		const struct za_etab_group *g = &p->groups[i];

		ZA_FUZZ_CHECK(g->stream <= 3 && g->w >= 1 && g->w <= 1024 &&
				      g->nr_stripes >= 1 && g->id >= 1 &&
				      g->id < h->next_group_id &&
				      g->next_pos <=
					      (uint64_t)g->w * g->nr_stripes,
			      "a decoded group is out of range");
		ZA_FUZZ_CHECK(!i || g->id > p->groups[i - 1].id,
			      "group ids not increasing within a part");
		used += ZA_ETAB_GROUP_BYTES;
	}
	for (i = 0; i < p->nr_segs; i++) {
		const struct za_etab_seg *s = &p->segs[i];

		ZA_FUZZ_CHECK(s->width >= 1 && s->width <= ZA_ETAB_MAX_WIDTH &&
				      !(s->flags & ~ZA_ETAB_SEG_FLAGS) &&
				      s->grp_idx < 1024 && s->id >= 1 &&
				      s->id < h->next_seg_id &&
				      s->group_id >= 1 &&
				      s->group_id < h->next_group_id,
			      "a decoded segment is out of range");
		ZA_FUZZ_CHECK(s->width == 64 || !(s->dead_cols >> s->width),
			      "a dead column past the width");
		ZA_FUZZ_CHECK(!i || s->id > p->segs[i - 1].id,
			      "segment ids not increasing within a part");
		for (c = 0; c < s->width; c++)
			ZA_FUZZ_CHECK((s->col[c].member !=
					       ZA_ETAB_MEMBER_ABSENT ||
				       !s->col[c].zone) &&
					      (s->col[c].hdr_member !=
						       ZA_ETAB_MEMBER_ABSENT ||
					       !s->col[c].hdr_zone),
				      "an absent column with a zone");
		used += ZA_ETAB_SEG_BYTES + ZA_ETAB_COL_BYTES * s->width;
	}
	ZA_FUZZ_CHECK(used == h->used_bytes,
		      "used_bytes is not what the records take");
	ZA_FUZZ_CHECK(h->nr_parts == 1 || h->nr_recs,
		      "an empty part in a table of several");
	again = malloc(BLK);
	if (!again)
		abort();
	ZA_FUZZ_CHECK(za_etab_block_encode(p, again) == 0,
		      "the encoder refuses what the decoder took");
	ZA_FUZZ_CHECK(!memcmp(again, blk, BLK),
		      "decode then encode changed the part");
	free(again);
}

/* Decode @len bytes of @blk (padded to BLK), in a buffer of exactly @len
 * bytes when that is short of a block. */
static int decode(const uint8_t *blk, size_t len, struct za_etab_part *p)
{
	uint8_t *exact;
	int ret;

	if (len >= BLK)
		return za_etab_block_decode(blk, BLK, p);
	exact = malloc(len ? len : 1);
	if (!exact)
		abort();
	memcpy(exact, blk, len);
	ret = za_etab_block_decode(exact, len, p);
	free(exact);
	return ret;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct za_etab_writer w = { 0 };
	struct za_etab_reader rd;
	struct za_etab_part *p;
	uint64_t groups = 0, segs = 0, last_group = 0, last_seg = 0;
	uint8_t mode, *blk, *taken;
	size_t nr, i, len;
	uint32_t nr_taken = 0, k;
	bool ok = true, writing = false;
	int ret;

	za_fuzz_init();
	if (size < 1)
		return 0;
	mode = data[0];
	data++;
	size--;
	nr = (size + BLK - 1) / BLK;
	if (nr > MAX_BLOCKS)
		nr = MAX_BLOCKS;
	blk = calloc(1, BLK);
	taken = malloc(MAX_BLOCKS * BLK); /* the parts the reader took */
	p = malloc(sizeof(*p));
	if (!blk || !taken || !p)
		abort();
	za_etab_reader_init(&rd);
	for (i = 0; i < nr; i++) {
		len = size - i * BLK;
		if (len > BLK)
			len = BLK;
		memset(blk, 0, BLK);
		memcpy(blk, data + i * BLK, len);
		if (mode & 1)
			fix_crc(blk);
		ret = decode(blk, (mode & 4) ? len : BLK, p);
		ZA_FUZZ_CHECK(ret == 0 || ret == -ENOENT || ret == -EBADMSG ||
				      ret == -EPROTONOSUPPORT,
			      "za_etab_block_decode: undocumented error");
		if (ret) {
			if (!(mode & 2))
				ok = false;
			continue;
		}
		check_part(blk, p);
		if (!ok || za_etab_reader_add(&rd, p)) {
			ok = false;
			continue;
		}
		/* What the reader took, checked again across parts. */
		ZA_FUZZ_CHECK(!p->nr_groups ||
				      (!segs && p->groups[0].id > last_group),
			      "the reader took groups out of order");
		ZA_FUZZ_CHECK(!p->nr_segs || p->segs[0].id > last_seg,
			      "the reader took segments out of order");
		groups += p->nr_groups;
		segs += p->nr_segs;
		if (p->nr_groups)
			last_group = p->groups[p->nr_groups - 1].id;
		if (p->nr_segs)
			last_seg = p->segs[p->nr_segs - 1].id;
		memcpy(taken + (size_t)nr_taken++ * BLK, blk, BLK);
		/* ...and written again. */
		if (!writing) {
			ZA_FUZZ_CHECK(za_etab_writer_init(
					      &w, p->h.ckpt_id, p->h.seq,
					      p->h.next_seq, p->h.next_seg_id,
					      p->h.next_group_id) == 0,
				      "the writer refuses the reader's header");
			writing = true;
		}
		for (k = 0; k < p->nr_groups; k++)
			ZA_FUZZ_CHECK(za_etab_writer_add_group(
					      &w, &p->groups[k]) == 0,
				      "the writer refuses a group the reader "
				      "took");
		for (k = 0; k < p->nr_segs; k++)
			ZA_FUZZ_CHECK(za_etab_writer_add_seg(&w, &p->segs[k]) ==
					      0,
				      "the writer refuses a segment the reader "
				      "took");
	}
	if (ok && za_etab_reader_done(&rd) == 0) {
		ZA_FUZZ_CHECK(groups == rd.first.nr_groups &&
				      segs == rd.first.nr_segs &&
				      nr_taken == rd.first.nr_parts,
			      "the reader took a table whose counts are off");
		ZA_FUZZ_CHECK(za_etab_writer_finish(&w) == 0,
			      "the writer cannot write what the reader took");
		ZA_FUZZ_CHECK(w.nr_parts == nr_taken &&
				      !memcmp(w.blocks, taken,
					      (size_t)nr_taken * BLK),
			      "the writer cuts or encodes the table otherwise");
	}
	free(w.blocks);
	free(p);
	free(taken);
	free(blk);
	return 0;
}
