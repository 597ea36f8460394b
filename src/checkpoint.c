// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * checkpoint.c - encoding and checking checkpoint parts (checkpoint.h;
 * the bytes are in docs/format.md, "Checkpoint block").
 *
 * Decoding validates every field before the caller sees any of it, and
 * the encoder refuses what the decoder would refuse, so that the encoding
 * is canonical and a round trip gives back the same bytes. What a part
 * cannot say about itself (that it belongs with the others, that the
 * extents go on increasing across parts, that none is missing) is the
 * reader's job. Whether a checkpoint is the right one to use, and whether
 * its groups still exist, is the volume's; so are, in version 3, the map
 * pages its records name (mpage.c decodes them).
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "byteorder.h"
#include "checkpoint.h"
#include "crc.h"
#include "mpage.h"

#define CKPT_MAGIC "ZACHKPNT"
/*
 * Version 2 adds nr_table_parts at 68, and is written only by checkpoints
 * with an engine table (nr_table_parts >= 1); those without one are still
 * written and read as version 1 (reserved zero there), so each has one
 * encoding. Version 3 adds nr_map_extents at 72 and map_levels at 80, and
 * its map records are page records, the root of a paged map (mpage.h):
 * it is written only when asked for (h.version = 3), and always with an
 * engine table. Version 4 is version 3 with nr_counts at 88 and as many
 * count records after the unmap records (asked for as h.version = 4).
 */
#define CKPT_V3 3u
#define CKPT_V4 4u
#define CKPT_CRC_OFF 12u
#define CKPT_TABLE_OFF 68u
#define CKPT_MAP_EXTENTS_OFF 72u
#define CKPT_MAP_LEVELS_OFF 80u
#define CKPT_COUNTS_OFF 88u
/* Where each version's reserved header bytes start, and end. */
static const uint32_t reserved_off[] = { 0, 68, 72, 81, 81 };
static const uint32_t reserved_end[] = { 0, 96, 96, 96, 88 };

static uint64_t nr_recs_all(const struct za_ckpt_hdr *h)
{
	return h->nr_extents + h->nr_unmaps + h->nr_counts;
}

uint32_t za_ckpt_nr_parts(uint64_t nr_extents, uint64_t nr_unmaps)
{
	uint64_t total, parts;

	if (nr_extents > ZA_CKPT_MAX_SIZE_BLOCKS ||
	    nr_unmaps > ZA_CKPT_MAX_SIZE_BLOCKS)
		return 0;
	total = nr_extents + nr_unmaps;
	parts = total ? (total + ZA_CKPT_RECS_PER_BLOCK - 1) /
				ZA_CKPT_RECS_PER_BLOCK :
			1;
	return parts > UINT32_MAX ? 0 : (uint32_t)parts;
}

/* Records part @part holds in a canonical encoding. */
static uint32_t recs_in_part(const struct za_ckpt_hdr *h, uint32_t part)
{
	uint64_t total = nr_recs_all(h);
	uint64_t first = (uint64_t)part * ZA_CKPT_RECS_PER_BLOCK;

	if (first >= total)
		return 0;
	return total - first < ZA_CKPT_RECS_PER_BLOCK ?
		       (uint32_t)(total - first) :
		       ZA_CKPT_RECS_PER_BLOCK;
}

/*
 * The version @h is written as, and was read as when decoded: 3 or 4
 * when asked for; else 2 with an engine table, 1 without.
 */
static uint32_t hdr_version(const struct za_ckpt_hdr *h)
{
	if (h->version == CKPT_V3 || h->version == CKPT_V4)
		return h->version;
	return h->nr_table_parts ? 2 : 1;
}

/* Versions 3 and 4 hold a paged map. */
static bool hdr_paged(const struct za_ckpt_hdr *h)
{
	return hdr_version(h) >= CKPT_V3;
}

/*
 * A version 3 map: nr_extents page records at its root, over map_levels
 * levels of pages holding nr_map_extents extents. Each page holds at
 * least one record, so an empty map has no page and no level, and a
 * map that is not empty has at least one of each. 0 or -EBADMSG.
 */
static int map_check(const struct za_ckpt_hdr *h)
{
	if (h->nr_map_extents > h->size_blocks ||
	    h->nr_extents > h->nr_map_extents ||
	    h->map_levels > ZA_MPAGE_MAX_LEVEL ||
	    !h->map_levels != !h->nr_map_extents ||
	    (h->map_levels && !h->nr_extents))
		return -EBADMSG;
	return 0;
}

/* The header fields alone: 0 or -EBADMSG. */
static int hdr_check(const struct za_ckpt_hdr *h)
{
	uint32_t version = hdr_version(h);
	uint32_t parts;

	if (!h->id || !h->size_blocks ||
	    h->size_blocks > ZA_CKPT_MAX_SIZE_BLOCKS ||
	    h->nr_extents > h->size_blocks ||
	    h->nr_counts > ZA_CKPT_MAX_COUNTS ||
	    (version != CKPT_V4 && h->nr_counts))
		return -EBADMSG;
	parts = za_ckpt_nr_parts(h->nr_extents, h->nr_unmaps + h->nr_counts);
	if (!parts || h->nr_parts != parts || h->part >= parts ||
	    h->nr_recs != recs_in_part(h, h->part) ||
	    h->nr_table_parts > ZA_CKPT_MAX_TABLE_PARTS)
		return -EBADMSG;
	if (version >= CKPT_V3)
		return h->nr_table_parts ? map_check(h) : -EBADMSG;
	/* Versions 1 and 2 list the extents themselves. */
	return h->nr_map_extents || h->map_levels ? -EBADMSG : 0;
}

/*
 * A record's own ranges, by its type: inside [0, @size_blocks), and its
 * position what its type allows. Where the type may stand is the
 * caller's. 0 or -EBADMSG.
 */
static int rec_check(const struct za_ckpt_rec *r, uint64_t size_blocks)
{
	if (!r->nr_blocks || r->lba >= size_blocks ||
	    r->nr_blocks > size_blocks - r->lba)
		return -EBADMSG;
	switch (r->type) {
	case ZA_CKPT_REC_DATA:
	case ZA_CKPT_REC_JOURNAL:
		/* Block i is at pos + i: none of them may wrap. */
		return r->pos > UINT64_MAX - r->nr_blocks ? -EBADMSG : 0;
	case ZA_CKPT_REC_UNMAP:
		return r->pos ? -EBADMSG : 0;
	case ZA_CKPT_REC_PAGE:
		/* One block; UINT64_MAX is no block position of a group. */
		return r->pos == UINT64_MAX ? -EBADMSG : 0;
	}
	return -EBADMSG;
}

/* A count record alone, after one for @*prev (0: the first): 0 and
 * *@prev its group, or -EBADMSG. */
static int count_check(const struct za_ckpt_rec *r, uint64_t *prev)
{
	if (r->type != ZA_CKPT_REC_COUNT || r->lba || r->pos || !r->nr_blocks ||
	    r->nr_blocks > ZA_CKPT_MAX_SIZE_BLOCKS || !r->group ||
	    r->group <= *prev)
		return -EBADMSG;
	*prev = r->group;
	return 0;
}

int za_ckpt_map_rec_check(const struct za_ckpt_rec *r, bool pages,
			  uint64_t size_blocks, uint64_t *end)
{
	bool ok_type = pages ? r->type == ZA_CKPT_REC_PAGE :
			       r->type == ZA_CKPT_REC_DATA ||
				       r->type == ZA_CKPT_REC_JOURNAL;

	if (!ok_type || rec_check(r, size_blocks) || r->lba < *end)
		return -EBADMSG;
	*end = r->lba + r->nr_blocks;
	return 0;
}

/*
 * The records of one part: types where they belong (map records first:
 * extents, or page records in version 3), ranges inside the volume, map
 * records increasing and not overlapping. 0 or -EBADMSG.
 */
static int recs_check(const struct za_ckpt_hdr *h,
		      const struct za_ckpt_rec *recs)
{
	uint64_t idx = (uint64_t)h->part * ZA_CKPT_RECS_PER_BLOCK;
	bool pages = hdr_paged(h);
	uint64_t end = 0, group = 0;
	uint32_t i;

	for (i = 0; i < h->nr_recs; i++, idx++) {
		const struct za_ckpt_rec *r = &recs[i];

		if (idx < h->nr_extents) {
			if (za_ckpt_map_rec_check(r, pages, h->size_blocks,
						  &end))
				return -EBADMSG;
			continue;
		}
		if (idx >= h->nr_extents + h->nr_unmaps) {
			if (count_check(r, &group))
				return -EBADMSG;
			continue;
		}
		if (r->type != ZA_CKPT_REC_UNMAP ||
		    rec_check(r, h->size_blocks))
			return -EBADMSG;
	}
	return 0;
}

void za_ckpt_recs_put(uint8_t *p, const struct za_ckpt_rec *recs, uint32_t nr)
{
	uint32_t i;

	memset(p, 0, ZA_CKPT_RECS_PER_BLOCK * ZA_CKPT_REC_BYTES);
	for (i = 0; i < nr; i++, p += ZA_CKPT_REC_BYTES) {
		p[0] = recs[i].type;
		za_put_le64(p + 8, recs[i].lba);
		za_put_le64(p + 16, recs[i].nr_blocks);
		za_put_le64(p + 24, recs[i].group);
		za_put_le64(p + 32, recs[i].pos);
	}
}

int za_ckpt_recs_get(const uint8_t *p, uint32_t nr, struct za_ckpt_rec *recs)
{
	uint32_t i;

	if (nr > ZA_CKPT_RECS_PER_BLOCK)
		return -EBADMSG;
	for (i = 0; i < ZA_CKPT_RECS_PER_BLOCK; i++, p += ZA_CKPT_REC_BYTES) {
		if (i >= nr) {
			if (!za_all_zero(p, ZA_CKPT_REC_BYTES))
				return -EBADMSG;
			continue;
		}
		if (!za_all_zero(p + 1, 7))
			return -EBADMSG;
		recs[i].type = p[0];
		recs[i].lba = za_get_le64(p + 8);
		recs[i].nr_blocks = za_get_le64(p + 16);
		recs[i].group = za_get_le64(p + 24);
		recs[i].pos = za_get_le64(p + 32);
	}
	return 0;
}

static uint32_t block_crc(const uint8_t *blk)
{
	return za_crc32c_zeroed(blk, ZA_CKPT_BLOCK_BYTES, CKPT_CRC_OFF);
}

int za_ckpt_block_encode(const struct za_ckpt_hdr *h,
			 const struct za_ckpt_rec *recs, uint8_t *blk)
{
	if (hdr_check(h) || recs_check(h, recs))
		return -EINVAL;
	memset(blk, 0, ZA_CKPT_BLOCK_BYTES);
	memcpy(blk, CKPT_MAGIC, 8);
	za_put_le32(blk + 8, hdr_version(h));
	za_put_le64(blk + 16, h->id);
	za_put_le64(blk + 24, h->seq);
	za_put_le64(blk + 32, h->size_blocks);
	za_put_le64(blk + 40, h->nr_extents);
	za_put_le64(blk + 48, h->nr_unmaps);
	za_put_le32(blk + 56, h->part);
	za_put_le32(blk + 60, h->nr_parts);
	za_put_le32(blk + 64, h->nr_recs);
	/* Zero where a version has them reserved (hdr_check() saw to it). */
	za_put_le32(blk + CKPT_TABLE_OFF, h->nr_table_parts);
	za_put_le64(blk + CKPT_MAP_EXTENTS_OFF, h->nr_map_extents);
	blk[CKPT_MAP_LEVELS_OFF] = h->map_levels;
	za_put_le64(blk + CKPT_COUNTS_OFF, h->nr_counts);
	za_ckpt_recs_put(blk + ZA_CKPT_HDR_BYTES, recs, h->nr_recs);
	za_put_le32(blk + CKPT_CRC_OFF, block_crc(blk));
	return 0;
}

int za_ckpt_block_decode(const uint8_t *blk, size_t len, struct za_ckpt_hdr *h,
			 struct za_ckpt_rec *recs)
{
	struct za_ckpt_rec rr[ZA_CKPT_RECS_PER_BLOCK];
	struct za_ckpt_hdr hh;
	uint32_t version, resv;

	if (len < 8 || memcmp(blk, CKPT_MAGIC, 8))
		return -ENOENT;
	if (len < 12)
		return -EBADMSG;
	version = za_get_le32(blk + 8);
	if (version < 1 || version > CKPT_V4)
		return -EPROTONOSUPPORT;
	resv = reserved_off[version];
	if (len < ZA_CKPT_BLOCK_BYTES ||
	    za_get_le32(blk + CKPT_CRC_OFF) != block_crc(blk) ||
	    !za_all_zero(blk + resv, reserved_end[version] - resv) ||
	    (version < CKPT_V4 && !za_all_zero(blk + CKPT_COUNTS_OFF, 8)))
		return -EBADMSG;
	hh.id = za_get_le64(blk + 16);
	hh.seq = za_get_le64(blk + 24);
	hh.size_blocks = za_get_le64(blk + 32);
	hh.nr_extents = za_get_le64(blk + 40);
	hh.nr_unmaps = za_get_le64(blk + 48);
	hh.part = za_get_le32(blk + 56);
	hh.nr_parts = za_get_le32(blk + 60);
	hh.nr_recs = za_get_le32(blk + 64);
	hh.nr_table_parts = version >= 2 ? za_get_le32(blk + CKPT_TABLE_OFF) :
					   0;
	hh.version = version;
	hh.nr_map_extents =
		version >= 3 ? za_get_le64(blk + CKPT_MAP_EXTENTS_OFF) : 0;
	hh.map_levels = version >= 3 ? blk[CKPT_MAP_LEVELS_OFF] : 0;
	hh.nr_counts = version >= 4 ? za_get_le64(blk + CKPT_COUNTS_OFF) : 0;
	/* The version it would be written as: a version 2 part without an
	 * engine table is not canonical. */
	if (hdr_check(&hh) || hdr_version(&hh) != version ||
	    za_ckpt_recs_get(blk + ZA_CKPT_HDR_BYTES, hh.nr_recs, rr) ||
	    recs_check(&hh, rr))
		return -EBADMSG;
	*h = hh;
	memcpy(recs, rr, hh.nr_recs * sizeof(*rr));
	return 0;
}

void za_ckpt_reader_init(struct za_ckpt_reader *r)
{
	memset(r, 0, sizeof(*r));
}

int za_ckpt_reader_add(struct za_ckpt_reader *r, const struct za_ckpt_hdr *h,
		       const struct za_ckpt_rec *recs)
{
	const struct za_ckpt_hdr *f = &r->first;
	uint32_t i;

	if (hdr_check(h) || recs_check(h, recs) || h->part != r->next_part)
		return -EBADMSG;
	if (h->part == 0)
		r->first = *h;
	else if (h->id != f->id || h->seq != f->seq ||
		 h->size_blocks != f->size_blocks ||
		 h->nr_extents != f->nr_extents ||
		 h->nr_unmaps != f->nr_unmaps || h->nr_parts != f->nr_parts ||
		 h->nr_table_parts != f->nr_table_parts ||
		 hdr_version(h) != hdr_version(f) ||
		 h->nr_map_extents != f->nr_map_extents ||
		 h->map_levels != f->map_levels || h->nr_counts != f->nr_counts)
		return -EBADMSG;
	for (i = 0; i < h->nr_recs; i++) {
		if (recs[i].type == ZA_CKPT_REC_UNMAP) {
			r->unmaps++;
			continue;
		}
		/* The checks recs_check() made within the part, across. */
		if (recs[i].type == ZA_CKPT_REC_COUNT) {
			if (count_check(&recs[i], &r->count_group))
				return -EBADMSG;
			r->counts++;
			continue;
		}
		if (za_ckpt_map_rec_check(&recs[i], hdr_paged(h),
					  h->size_blocks, &r->end_lba))
			return -EBADMSG;
		r->extents++;
	}
	r->next_part++;
	return 0;
}

int za_ckpt_reader_done(const struct za_ckpt_reader *r)
{
	if (!r->next_part || r->next_part != r->first.nr_parts ||
	    r->extents != r->first.nr_extents ||
	    r->unmaps != r->first.nr_unmaps || r->counts != r->first.nr_counts)
		return -EBADMSG;
	return 0;
}

int za_ckpt_writer_init(struct za_ckpt_writer *w, uint64_t id, uint64_t seq,
			uint64_t size_blocks, uint64_t nr_extents,
			uint64_t nr_unmaps, uint8_t *blocks)
{
	memset(w, 0, sizeof(*w));
	w->h.id = id;
	w->h.seq = seq;
	w->h.size_blocks = size_blocks;
	w->h.nr_extents = nr_extents;
	w->h.nr_unmaps = nr_unmaps;
	w->h.nr_parts = za_ckpt_nr_parts(nr_extents, nr_unmaps);
	w->blocks = blocks;
	za_ckpt_reader_init(&w->rd);
	if (!id || !size_blocks || size_blocks > ZA_CKPT_MAX_SIZE_BLOCKS ||
	    nr_extents > size_blocks || !w->h.nr_parts)
		w->error = -EINVAL;
	return w->error;
}

/* The parts, once the caller set nr_counts (version 4) after init. */
static void writer_parts(struct za_ckpt_writer *w)
{
	w->h.nr_parts = za_ckpt_nr_parts(w->h.nr_extents,
					 w->h.nr_unmaps + w->h.nr_counts);
	if (!w->h.nr_parts || w->h.nr_counts > ZA_CKPT_MAX_COUNTS)
		w->error = -EINVAL;
}

/* Encode the part being filled and check it against the ones before. */
static int writer_flush(struct za_ckpt_writer *w)
{
	uint8_t *blk = w->blocks + (size_t)w->h.part * ZA_CKPT_BLOCK_BYTES;

	w->h.nr_recs = recs_in_part(&w->h, w->h.part);
	if (za_ckpt_block_encode(&w->h, w->recs, blk) ||
	    za_ckpt_reader_add(&w->rd, &w->h, w->recs))
		return -EINVAL;
	w->h.part++;
	return 0;
}

int za_ckpt_writer_add(struct za_ckpt_writer *w, const struct za_ckpt_rec *rec)
{
	if (w->error)
		return w->error;
	if (!w->added)
		writer_parts(w);
	if (w->error || w->added == nr_recs_all(&w->h)) {
		w->error = -EINVAL;
		return w->error;
	}
	w->recs[w->added++ % ZA_CKPT_RECS_PER_BLOCK] = *rec;
	if (w->added % ZA_CKPT_RECS_PER_BLOCK == 0)
		w->error = writer_flush(w);
	return w->error;
}

int za_ckpt_writer_finish(struct za_ckpt_writer *w)
{
	if (!w->error && !w->added)
		writer_parts(w);
	if (!w->error && w->added != nr_recs_all(&w->h))
		w->error = -EINVAL;
	/* The last part, unless the records filled it exactly. */
	if (!w->error && w->h.part < w->h.nr_parts)
		w->error = writer_flush(w);
	if (!w->error && za_ckpt_reader_done(&w->rd))
		w->error = -EINVAL;
	return w->error;
}
