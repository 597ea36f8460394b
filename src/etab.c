// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * etab.c - encoding and checking engine table parts, assembling them, and
 * writing a whole table (etab.h; the bytes are in docs/format.md, "Engine
 * table block").
 *
 * One set of checks serves everyone: part_check() says whether a decoded
 * part is one the format allows, and the decoder, the encoder, the reader
 * and the writer all go through it (the writer record by record, with the
 * same group_check() and seg_check()), so that what is refused on reading
 * can never be written and the encoding stays canonical. The decoder adds
 * what only the bytes show (reserved bytes, the unused tail, records
 * filling exactly used_bytes). Where parts are cut is the reader's to
 * check, as only it sees consecutive parts. Whether groups and segments
 * make sense for the array (members, zones, widths of a stream, segments
 * of groups that exist) is not checked here: that is the engine's
 * (engine-table.c).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "byteorder.h"
#include "crc.h"
#include "etab.h"

#define ETAB_MAGIC "ZAENGTAB"
#define ETAB_VERSION 1u
#define ETAB_CRC_OFF 12u
#define ETAB_NR_RECS_OFF 80u
#define ETAB_USED_OFF 84u
#define ETAB_RESERVED_OFF 88u

#define ETAB_NR_STREAMS 4u /* engine streams 0..3 */
#define ETAB_MAX_GROUP_W 1024u /* segments in a group */

/* The bytes record @kind of @width columns takes (width unused for
 * groups). */
static uint32_t rec_bytes(uint8_t kind, uint8_t width)
{
	if (kind == ZA_ETAB_GROUP)
		return ZA_ETAB_GROUP_BYTES;
	return ZA_ETAB_SEG_BYTES + (uint32_t)width * ZA_ETAB_COL_BYTES;
}

/* A group against the header's counter: 0 or -EBADMSG. */
static int group_check(const struct za_etab_hdr *h,
		       const struct za_etab_group *g)
{
	if (g->stream >= ETAB_NR_STREAMS || !g->w || g->w > ETAB_MAX_GROUP_W ||
	    !g->nr_stripes || !g->id || g->id >= h->next_group_id ||
	    g->next_pos > (uint64_t)g->w * g->nr_stripes)
		return -EBADMSG;
	return 0;
}

/* A segment and its columns against the header's counters: 0 or
 * -EBADMSG. */
static int seg_check(const struct za_etab_hdr *h, const struct za_etab_seg *s)
{
	uint32_t i;

	if (!s->width || s->width > ZA_ETAB_MAX_WIDTH ||
	    (s->flags & ~ZA_ETAB_SEG_FLAGS) || s->grp_idx >= ETAB_MAX_GROUP_W ||
	    !s->id || s->id >= h->next_seg_id || !s->group_id ||
	    s->group_id >= h->next_group_id)
		return -EBADMSG;
	/* A dead column is one of the segment's (the shift is undefined at
	 * 64, where every bit is one). */
	if (s->width < 64 && (s->dead_cols >> s->width))
		return -EBADMSG;
	for (i = 0; i < s->width; i++) {
		const struct za_etab_col *c = &s->col[i];

		if ((c->member == ZA_ETAB_MEMBER_ABSENT && c->zone) ||
		    (c->hdr_member == ZA_ETAB_MEMBER_ABSENT && c->hdr_zone))
			return -EBADMSG;
	}
	return 0;
}

/* The header fields alone: 0 or -EBADMSG. */
static int hdr_check(const struct za_etab_hdr *h)
{
	if (!h->ckpt_id || h->next_seq <= h->seq || !h->next_seg_id ||
	    !h->next_group_id || !h->nr_parts || h->part >= h->nr_parts ||
	    h->used_bytes > ZA_ETAB_PAYLOAD_BYTES)
		return -EBADMSG;
	/* Ids are distinct and below their counters. */
	if (h->nr_groups >= h->next_group_id || h->nr_segs >= h->next_seg_id)
		return -EBADMSG;
	/*
	 * Each part of several holds a record (an empty table is one part):
	 * not empty, and no more parts than records. The sum is taken only
	 * when both totals are below nr_parts, so it cannot wrap.
	 */
	if (h->nr_parts > 1 &&
	    (!h->nr_recs ||
	     (h->nr_groups < h->nr_parts && h->nr_segs < h->nr_parts &&
	      h->nr_groups + h->nr_segs < h->nr_parts)))
		return -EBADMSG;
	return 0;
}

/*
 * A whole part as decoded: its header, its record counts and bytes, every
 * record in range, ids increasing within the part. 0 or -EBADMSG.
 */
static int part_check(const struct za_etab_part *p)
{
	const struct za_etab_hdr *h = &p->h;
	uint64_t used = 0;
	uint32_t i;

	if (hdr_check(h) || p->nr_groups > ZA_ETAB_MAX_GROUPS ||
	    p->nr_segs > ZA_ETAB_MAX_SEGS ||
	    h->nr_recs != p->nr_groups + p->nr_segs ||
	    p->nr_groups > h->nr_groups || p->nr_segs > h->nr_segs)
		return -EBADMSG;
	/* A table of one part holds every record in it. */
	if (h->nr_parts == 1 &&
	    (p->nr_groups != h->nr_groups || p->nr_segs != h->nr_segs))
		return -EBADMSG;
	for (i = 0; i < p->nr_groups; i++) {
		if (group_check(h, &p->groups[i]) ||
		    (i && p->groups[i].id <= p->groups[i - 1].id))
			return -EBADMSG;
		used += ZA_ETAB_GROUP_BYTES;
	}
	for (i = 0; i < p->nr_segs; i++) {
		if (seg_check(h, &p->segs[i]) ||
		    (i && p->segs[i].id <= p->segs[i - 1].id))
			return -EBADMSG;
		used += rec_bytes(ZA_ETAB_SEGMENT, p->segs[i].width);
	}
	return used == h->used_bytes ? 0 : -EBADMSG;
}

static uint32_t block_crc(const uint8_t *blk)
{
	return za_crc32c_zeroed(blk, ZA_ETAB_BLOCK_BYTES, ETAB_CRC_OFF);
}

/* The header but its CRC; reserved bytes are left as they are (zero). */
static void put_hdr(uint8_t *blk, const struct za_etab_hdr *h)
{
	memcpy(blk, ETAB_MAGIC, 8);
	za_put_le32(blk + 8, ETAB_VERSION);
	za_put_le64(blk + 16, h->ckpt_id);
	za_put_le64(blk + 24, h->seq);
	za_put_le64(blk + 32, h->next_seq);
	za_put_le64(blk + 40, h->next_seg_id);
	za_put_le64(blk + 48, h->next_group_id);
	za_put_le64(blk + 56, h->nr_groups);
	za_put_le64(blk + 64, h->nr_segs);
	za_put_le32(blk + 72, h->part);
	za_put_le32(blk + 76, h->nr_parts);
	za_put_le32(blk + ETAB_NR_RECS_OFF, h->nr_recs);
	za_put_le32(blk + ETAB_USED_OFF, h->used_bytes);
}

static void put_group(uint8_t *p, const struct za_etab_group *g)
{
	p[0] = ZA_ETAB_GROUP;
	p[1] = g->stream;
	za_put_le16(p + 2, g->w);
	za_put_le32(p + 4, g->nr_stripes);
	za_put_le64(p + 8, g->id);
	za_put_le64(p + 16, g->next_pos);
}

/* Into zeroed bytes: the reserved ones stay zero. */
static void put_seg(uint8_t *p, const struct za_etab_seg *s)
{
	uint32_t i;

	p[0] = ZA_ETAB_SEGMENT;
	p[1] = s->width;
	p[2] = s->flags;
	za_put_le16(p + 4, s->grp_idx);
	za_put_le32(p + 8, s->next_stripe);
	za_put_le64(p + 16, s->id);
	za_put_le64(p + 24, s->group_id);
	za_put_le64(p + 32, s->dead_cols);
	for (i = 0; i < s->width; i++) {
		uint8_t *c = p + ZA_ETAB_SEG_BYTES + i * ZA_ETAB_COL_BYTES;

		za_put_le16(c, s->col[i].member);
		za_put_le16(c + 2, s->col[i].hdr_member);
		za_put_le32(c + 4, s->col[i].zone);
		za_put_le32(c + 8, s->col[i].hdr_zone);
		za_put_le32(c + 12, s->col[i].upto);
	}
}

int za_etab_block_encode(const struct za_etab_part *p, uint8_t *blk)
{
	uint32_t off = ZA_ETAB_HDR_BYTES, i;

	if (part_check(p))
		return -EINVAL;
	memset(blk, 0, ZA_ETAB_BLOCK_BYTES);
	put_hdr(blk, &p->h);
	for (i = 0; i < p->nr_groups; i++, off += ZA_ETAB_GROUP_BYTES)
		put_group(blk + off, &p->groups[i]);
	for (i = 0; i < p->nr_segs; i++) {
		put_seg(blk + off, &p->segs[i]);
		off += rec_bytes(ZA_ETAB_SEGMENT, p->segs[i].width);
	}
	za_put_le32(blk + ETAB_CRC_OFF, block_crc(blk));
	return 0;
}

/*
 * The records of the payload, @used bytes from @pay, into @out: kinds,
 * lengths within @used, reserved bytes, groups first. Ranges and order
 * are part_check()'s. 0 or -EBADMSG.
 */
static int parse_recs(const uint8_t *pay, uint32_t used,
		      struct za_etab_part *out)
{
	uint32_t off = 0, i;

	out->nr_groups = 0;
	out->nr_segs = 0;
	while (off < used) {
		const uint8_t *p = pay + off;
		struct za_etab_group *g;
		struct za_etab_seg *s;

		if (p[0] == ZA_ETAB_GROUP) {
			if (used - off < ZA_ETAB_GROUP_BYTES || out->nr_segs ||
			    out->nr_groups == ZA_ETAB_MAX_GROUPS)
				return -EBADMSG;
			g = &out->groups[out->nr_groups++];
			g->stream = p[1];
			g->w = za_get_le16(p + 2);
			g->nr_stripes = za_get_le32(p + 4);
			g->id = za_get_le64(p + 8);
			g->next_pos = za_get_le64(p + 16);
			off += ZA_ETAB_GROUP_BYTES;
			continue;
		}
		/* The fixed part first, for the width, then the columns. */
		if (p[0] != ZA_ETAB_SEGMENT || used - off < ZA_ETAB_SEG_BYTES ||
		    !p[1] || p[1] > ZA_ETAB_MAX_WIDTH ||
		    used - off < rec_bytes(ZA_ETAB_SEGMENT, p[1]) || p[3] ||
		    !za_all_zero(p + 6, 2) || !za_all_zero(p + 12, 4) ||
		    out->nr_segs == ZA_ETAB_MAX_SEGS)
			return -EBADMSG;
		s = &out->segs[out->nr_segs++];
		s->width = p[1];
		s->flags = p[2];
		s->grp_idx = za_get_le16(p + 4);
		s->next_stripe = za_get_le32(p + 8);
		s->id = za_get_le64(p + 16);
		s->group_id = za_get_le64(p + 24);
		s->dead_cols = za_get_le64(p + 32);
		for (i = 0; i < s->width; i++) {
			const uint8_t *c =
				p + ZA_ETAB_SEG_BYTES + i * ZA_ETAB_COL_BYTES;

			s->col[i].member = za_get_le16(c);
			s->col[i].hdr_member = za_get_le16(c + 2);
			s->col[i].zone = za_get_le32(c + 4);
			s->col[i].hdr_zone = za_get_le32(c + 8);
			s->col[i].upto = za_get_le32(c + 12);
		}
		off += rec_bytes(ZA_ETAB_SEGMENT, s->width);
	}
	return 0;
}

int za_etab_block_decode(const uint8_t *blk, size_t len,
			 struct za_etab_part *out)
{
	struct za_etab_hdr *h = &out->h;

	if (len < 8 || memcmp(blk, ETAB_MAGIC, 8))
		return -ENOENT;
	if (len < 12)
		return -EBADMSG;
	if (za_get_le32(blk + 8) != ETAB_VERSION)
		return -EPROTONOSUPPORT;
	/* From here on the whole block is there: nothing reads past it. */
	if (len < ZA_ETAB_BLOCK_BYTES ||
	    za_get_le32(blk + ETAB_CRC_OFF) != block_crc(blk) ||
	    !za_all_zero(blk + ETAB_RESERVED_OFF,
			 ZA_ETAB_HDR_BYTES - ETAB_RESERVED_OFF))
		return -EBADMSG;
	h->ckpt_id = za_get_le64(blk + 16);
	h->seq = za_get_le64(blk + 24);
	h->next_seq = za_get_le64(blk + 32);
	h->next_seg_id = za_get_le64(blk + 40);
	h->next_group_id = za_get_le64(blk + 48);
	h->nr_groups = za_get_le64(blk + 56);
	h->nr_segs = za_get_le64(blk + 64);
	h->part = za_get_le32(blk + 72);
	h->nr_parts = za_get_le32(blk + 76);
	h->nr_recs = za_get_le32(blk + ETAB_NR_RECS_OFF);
	h->used_bytes = za_get_le32(blk + ETAB_USED_OFF);
	if (hdr_check(h) ||
	    parse_recs(blk + ZA_ETAB_HDR_BYTES, h->used_bytes, out) ||
	    !za_all_zero(blk + ZA_ETAB_HDR_BYTES + h->used_bytes,
			 ZA_ETAB_PAYLOAD_BYTES - h->used_bytes) ||
	    part_check(out))
		return -EBADMSG;
	return 0;
}

void za_etab_reader_init(struct za_etab_reader *r)
{
	memset(r, 0, sizeof(*r));
}

/* The bytes of @p's first record (it has one). */
static uint32_t first_rec_bytes(const struct za_etab_part *p)
{
	if (p->nr_groups)
		return ZA_ETAB_GROUP_BYTES;
	return rec_bytes(ZA_ETAB_SEGMENT, p->segs[0].width);
}

int za_etab_reader_add(struct za_etab_reader *r, const struct za_etab_part *p)
{
	const struct za_etab_hdr *f = &r->first, *h = &p->h;

	if (part_check(p) || h->part != r->next_part)
		return -EBADMSG;
	if (h->part &&
	    (h->ckpt_id != f->ckpt_id || h->seq != f->seq ||
	     h->next_seq != f->next_seq || h->next_seg_id != f->next_seg_id ||
	     h->next_group_id != f->next_group_id ||
	     h->nr_groups != f->nr_groups || h->nr_segs != f->nr_segs ||
	     h->nr_parts != f->nr_parts))
		return -EBADMSG;
	/*
	 * Canonical cut: the previous part was closed only because this
	 * part's first record did not fit in it. part_check() saw to it that
	 * a part of several is not empty.
	 */
	if (h->part &&
	    (!h->nr_recs ||
	     first_rec_bytes(p) <= ZA_ETAB_PAYLOAD_BYTES - r->last_used))
		return -EBADMSG;
	/* Within the part part_check() saw to the order; across parts: */
	if (p->nr_groups && (r->segs || p->groups[0].id <= r->last_group))
		return -EBADMSG;
	if (p->nr_segs && p->segs[0].id <= r->last_seg)
		return -EBADMSG;
	/* Not more records than announced: the totals must add up. */
	if (p->nr_groups > h->nr_groups - r->groups ||
	    p->nr_segs > h->nr_segs - r->segs)
		return -EBADMSG;
	if (!h->part)
		r->first = *h;
	if (p->nr_groups)
		r->last_group = p->groups[p->nr_groups - 1].id;
	if (p->nr_segs)
		r->last_seg = p->segs[p->nr_segs - 1].id;
	r->groups += p->nr_groups;
	r->segs += p->nr_segs;
	r->last_used = h->used_bytes;
	r->next_part++;
	return 0;
}

int za_etab_reader_done(const struct za_etab_reader *r)
{
	if (!r->next_part || r->next_part != r->first.nr_parts ||
	    r->groups != r->first.nr_groups || r->segs != r->first.nr_segs)
		return -EBADMSG;
	return 0;
}

int za_etab_writer_init(struct za_etab_writer *w, uint64_t ckpt_id,
			uint64_t seq, uint64_t next_seq, uint64_t next_seg_id,
			uint64_t next_group_id)
{
	memset(w, 0, sizeof(*w));
	w->h.ckpt_id = ckpt_id;
	w->h.seq = seq;
	w->h.next_seq = next_seq;
	w->h.next_seg_id = next_seg_id;
	w->h.next_group_id = next_group_id;
	if (!ckpt_id || next_seq <= seq || !next_seg_id || !next_group_id)
		w->error = -EINVAL;
	return w->error;
}

/* The block of part @i. */
static uint8_t *part_blk(const struct za_etab_writer *w, uint32_t i)
{
	return w->blocks + (size_t)i * ZA_ETAB_BLOCK_BYTES;
}

/* Record the part being filled holds, in its header (finish does the
 * rest). */
static void close_part(struct za_etab_writer *w)
{
	uint8_t *blk = part_blk(w, w->nr_parts - 1);

	za_put_le32(blk + ETAB_NR_RECS_OFF, w->recs);
	za_put_le32(blk + ETAB_USED_OFF, w->used);
}

/* Start a new, zeroed part, growing the buffer: 0 or -ENOMEM. */
static int new_part(struct za_etab_writer *w)
{
	if (w->nr_parts)
		close_part(w);
	if (w->nr_parts == UINT32_MAX)
		return -ENOMEM;
	if (w->nr_parts == w->cap_parts) {
		size_t cap = w->cap_parts ? w->cap_parts * 2 : 4;
		uint8_t *b;

		if (cap > SIZE_MAX / ZA_ETAB_BLOCK_BYTES)
			return -ENOMEM;
		b = realloc(w->blocks, cap * ZA_ETAB_BLOCK_BYTES);
		if (!b)
			return -ENOMEM;
		w->blocks = b;
		w->cap_parts = cap;
	}
	memset(part_blk(w, w->nr_parts), 0, ZA_ETAB_BLOCK_BYTES);
	w->nr_parts++;
	w->used = 0;
	w->recs = 0;
	return 0;
}

/* Room for @bytes more in the part being filled, or a new part. Canonical:
 * a part is closed only when the next record does not fit in it. */
static uint8_t *room_for(struct za_etab_writer *w, uint32_t bytes)
{
	uint8_t *p;

	if (!w->nr_parts || w->used + bytes > ZA_ETAB_PAYLOAD_BYTES) {
		w->error = new_part(w);
		if (w->error)
			return NULL;
	}
	p = part_blk(w, w->nr_parts - 1) + ZA_ETAB_HDR_BYTES + w->used;
	w->used += bytes;
	w->recs++;
	return p;
}

int za_etab_writer_add_group(struct za_etab_writer *w,
			     const struct za_etab_group *g)
{
	uint8_t *p;

	if (w->error)
		return w->error;
	if (group_check(&w->h, g) || w->last_seg || g->id <= w->last_group) {
		w->error = -EINVAL;
		return w->error;
	}
	p = room_for(w, ZA_ETAB_GROUP_BYTES);
	if (!p)
		return w->error;
	put_group(p, g);
	w->last_group = g->id;
	w->h.nr_groups++;
	return 0;
}

int za_etab_writer_add_seg(struct za_etab_writer *w,
			   const struct za_etab_seg *s)
{
	uint8_t *p;

	if (w->error)
		return w->error;
	if (seg_check(&w->h, s) || s->id <= w->last_seg) {
		w->error = -EINVAL;
		return w->error;
	}
	p = room_for(w, rec_bytes(ZA_ETAB_SEGMENT, s->width));
	if (!p)
		return w->error;
	put_seg(p, s);
	w->last_seg = s->id;
	w->h.nr_segs++;
	return 0;
}

/* What is written is what a reader takes: decode every part and assemble
 * them. 0, -EINVAL or -ENOMEM. */
static int writer_verify(const struct za_etab_writer *w)
{
	struct za_etab_part *p = malloc(sizeof(*p));
	struct za_etab_reader rd;
	uint32_t i;
	int ret = 0;

	if (!p)
		return -ENOMEM;
	za_etab_reader_init(&rd);
	for (i = 0; i < w->nr_parts && !ret; i++)
		if (za_etab_block_decode(part_blk(w, i), ZA_ETAB_BLOCK_BYTES,
					 p) ||
		    za_etab_reader_add(&rd, p))
			ret = -EINVAL;
	if (!ret && za_etab_reader_done(&rd))
		ret = -EINVAL;
	free(p);
	return ret;
}

int za_etab_writer_finish(struct za_etab_writer *w)
{
	uint32_t i;

	if (w->error)
		return w->error;
	/* An empty table is one part with no records. */
	if (!w->nr_parts) {
		w->error = new_part(w);
		if (w->error)
			return w->error;
	}
	close_part(w);
	w->h.nr_parts = w->nr_parts;
	for (i = 0; i < w->nr_parts; i++) {
		uint8_t *blk = part_blk(w, i);
		struct za_etab_hdr h = w->h;

		/* close_part() stored each part's own counts. */
		h.part = i;
		h.nr_recs = za_get_le32(blk + ETAB_NR_RECS_OFF);
		h.used_bytes = za_get_le32(blk + ETAB_USED_OFF);
		put_hdr(blk, &h);
		za_put_le32(blk + ETAB_CRC_OFF, block_crc(blk));
	}
	w->error = writer_verify(w);
	return w->error;
}
