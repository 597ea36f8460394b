// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * engine-table.c - the engine table: the engine's groups, segments and
 * counters written with each checkpoint (za_engine_table_encode(), at the
 * checkpoint's quiet point); at recovery, adopted as the engine's own
 * when the checkpoint is the anchored one (za_engine_table_adopt(), so
 * that pass 1 reads only what was written since: docs/design.md 9.6),
 * and checked against what recovery found (za_engine_table_check()) -
 * which also lists the places it gives to segments that no longer hold
 * them, for quarantine. It does not write or read anything itself (the
 * volume carries the parts with its checkpoint).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine-int.h"
#include "etab.h"
#include "log.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void seg_to_rec(const struct za_segment *g, struct za_etab_seg *s)
{
	unsigned c;

	memset(s, 0, sizeof(*s));
	s->id = g->id;
	s->group_id = g->grp->id;
	s->dead_cols = g->dead_cols;
	s->next_stripe = g->next_stripe;
	s->grp_idx = (uint16_t)g->grp_idx;
	s->width = (uint8_t)g->st->l.width;
	s->flags = (g->state == ZA_SEG_SEALED ? ZA_ETAB_SEG_SEALED : 0) |
		   (g->finished ? ZA_ETAB_SEG_FINISHED : 0);
	for (c = 0; c < g->st->l.width; c++) {
		struct za_etab_col *col = &s->col[c];

		col->member = g->member[c] == ZA_STRIPE_MEMBER_ABSENT ?
				      ZA_ETAB_MEMBER_ABSENT :
				      g->member[c];
		col->zone = col->member == ZA_ETAB_MEMBER_ABSENT ? 0 :
								   g->zone[c];
		col->hdr_member = g->hdr_member[c] == ZA_STRIPE_MEMBER_ABSENT ?
					  ZA_ETAB_MEMBER_ABSENT :
					  g->hdr_member[c];
		col->hdr_zone = col->hdr_member == ZA_ETAB_MEMBER_ABSENT ?
					0 :
					g->hdr_zone[c];
		col->upto = g->col_upto[c];
	}
}

int za_engine_table_encode(struct za_engine *e, uint64_t ckpt_id, uint64_t seq,
			   uint8_t **blocks, uint32_t *nr_parts, uint32_t *snap)
{
	struct za_etab_writer w;
	struct za_etab_seg *rec = NULL;
	uint64_t *ids = NULL;
	size_t n = e->nr_groups > e->nr_segs ? e->nr_groups : e->nr_segs;
	size_t i, k;
	int ret;

	*blocks = NULL;
	*nr_parts = 0;
	/* From here on, what is released was named by a table: quarantined
	 * (eng_zone_release()); a failed encode only quarantines in vain. */
	*snap = ++e->tab_epoch;
	ret = za_etab_writer_init(&w, ckpt_id, seq, e->seq, e->next_seg_id,
				  e->next_group_id);
	if (ret)
		return ret;
	ids = malloc((n + 1) * sizeof(*ids));
	rec = malloc(sizeof(*rec));
	if (!ids || !rec) {
		ret = -ENOMEM;
		goto out;
	}
	for (i = 0, k = 0; i < e->ghash_size; i++) {
		const struct group *grp;

		for (grp = e->ghash[i]; grp; grp = grp->hnext)
			ids[k++] = grp->id;
	}
	if (k)
		qsort(ids, k, sizeof(*ids), cmp_u64);
	for (i = 0; i < k && !ret; i++) {
		const struct group *grp = eng_group_find(e, ids[i]);
		struct za_etab_group g = {
			.id = grp->id,
			.next_pos = grp->next_pos,
			.nr_stripes = grp->nr_stripes,
			.w = (uint16_t)grp->w,
			.stream = (uint8_t)grp->st->id,
		};

		ret = za_etab_writer_add_group(&w, &g);
	}
	for (i = 0, k = 0; !ret && i < e->hash_size; i++) {
		const struct za_segment *g;

		for (g = e->hash[i]; g; g = g->hnext)
			ids[k++] = g->id;
	}
	if (!ret && k)
		qsort(ids, k, sizeof(*ids), cmp_u64);
	for (i = 0; !ret && i < k; i++) {
		seg_to_rec(eng_seg_find(e, ids[i]), rec);
		ret = za_etab_writer_add_seg(&w, rec);
	}
	if (!ret)
		ret = za_etab_writer_finish(&w);
out:
	free(rec);
	free(ids);
	if (ret) {
		free(w.blocks);
		return ret;
	}
	*blocks = w.blocks;
	*nr_parts = w.nr_parts;
	return 0;
}

/* A member and zone of the table: inside the array, or absent. */
static bool place_ok(const struct za_engine *e, uint16_t mi, uint32_t z)
{
	if (mi == ZA_ETAB_MEMBER_ABSENT)
		return true;
	if (mi >= e->nr_members)
		return false;
	return !e->m[mi].nr_zones || z < e->m[mi].nr_zones;
}

static uint16_t eng_member(uint16_t mi)
{
	return mi == ZA_STRIPE_MEMBER_ABSENT ? ZA_ETAB_MEMBER_ABSENT : mi;
}

/*
 * Place @mi/@z, given by the table to a segment that no longer holds it,
 * must be empty or hold nothing any segment claims: zones the live table
 * names are quarantined until a newer table is live (eng_zone_release()).
 * Returns 1 (a mismatch: another segment wrote it), 0, or -ENOMEM; the
 * place is kept for quarantine at the end of recovery.
 */
static int vacated(struct za_engine *e, uint64_t seg_id, uint16_t mi,
		   uint32_t z)
{
	struct member *m;

	if (mi == ZA_ETAB_MEMBER_ABSENT)
		return 0;
	m = &e->m[mi];
	if (!eng_readable(m) || !m->zkind)
		return 0; /* its zones are not handed out */
	if (!eng_quar_push(&e->rec_quar,
			   (struct quar_zone){ .zone = z, .member = mi }))
		return -ENOMEM;
	if (m->zkind[z] != Z_USED)
		return 0;
	za_log_warn("recovery: engine table: %s zone %u was segment %llu's "
		    "at the checkpoint and is another segment's now: a zone "
		    "reused before its quarantine ended",
		    m->dev->path, z, (unsigned long long)seg_id);
	return 1;
}

/*
 * One segment of the table against the one the scan found. What may
 * differ because of what happened after the checkpoint: where a column
 * is now (moved since, or lost), how far it is written (more stripes
 * since), whether it is sealed and finished (recovery finishes every
 * zone), its dead columns (marked again after recovery). What may not:
 * its group, its place in it, its width, where its columns were first
 * put, and a stripe handed out before the checkpoint - every one was on
 * the drives at its quiet point - missing now.
 */
static unsigned seg_compare(const struct za_etab_seg *t,
			    const struct za_segment *g,
			    const struct za_etab_group *tg)
{
	unsigned c, bad = 0;

	if (!tg || g->grp->id != t->group_id || g->grp_idx != t->grp_idx ||
	    g->st->l.width != t->width || g->grp->w != tg->w ||
	    g->grp->nr_stripes != tg->nr_stripes || g->st->id != tg->stream) {
		za_log_warn("recovery: engine table: segment %llu: group, "
			    "place or geometry differ from the drives' "
			    "(group %llu/%llu, index %u/%u, width %u/%u)",
			    (unsigned long long)t->id,
			    (unsigned long long)t->group_id,
			    (unsigned long long)g->grp->id, t->grp_idx,
			    g->grp_idx, t->width, g->st->l.width);
		return 1;
	}
	for (c = 0; c < t->width; c++) {
		const struct za_etab_col *col = &t->col[c];

		if (col->hdr_member != eng_member(g->hdr_member[c]) ||
		    (col->hdr_member != ZA_ETAB_MEMBER_ABSENT &&
		     col->hdr_zone != g->hdr_zone[c])) {
			za_log_warn("recovery: engine table: segment %llu "
				    "column %u: first placed on member %u "
				    "zone %u, the drives say member %u zone "
				    "%u",
				    (unsigned long long)t->id, c,
				    col->hdr_member, col->hdr_zone,
				    g->hdr_member[c], g->hdr_zone[c]);
			bad++;
		}
	}
	if (g->next_stripe < t->next_stripe) {
		za_log_warn("recovery: engine table: segment %llu: %u stripes "
			    "at the checkpoint, %u found on the drives",
			    (unsigned long long)t->id, t->next_stripe,
			    g->next_stripe);
		bad++;
	}
	return bad;
}

struct tab_groups {
	struct za_etab_group *g;
	size_t nr, cap;
};

static const struct za_etab_group *tab_group(const struct tab_groups *tg,
					     uint64_t id)
{
	size_t lo = 0, hi = tg->nr;

	while (lo < hi) { /* ids increase: the reader saw to it */
		size_t mid = lo + (hi - lo) / 2;

		if (tg->g[mid].id == id)
			return &tg->g[mid];
		if (tg->g[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

int za_engine_table_check(struct za_engine *e, const uint8_t *blocks,
			  uint32_t nr_parts, struct za_engine_table_stats *out)
{
	struct za_etab_reader rd;
	struct za_etab_part *p = NULL;
	struct tab_groups tg = { 0 };
	uint64_t *seen = NULL, next_seg = 0;
	size_t nr_seen = 0, cap_seen = 0, i;
	uint32_t part, j;
	unsigned c;
	int ret = 0;

	memset(out, 0, sizeof(*out));
	eng_quar_clear(&e->rec_quar);
	p = malloc(sizeof(*p));
	if (!p)
		return -ENOMEM;
	za_etab_reader_init(&rd);
	for (part = 0; part < nr_parts && !ret; part++) {
		ret = za_etab_block_decode(blocks + (size_t)part *
							    ZA_ETAB_BLOCK_BYTES,
					   ZA_ETAB_BLOCK_BYTES, p);
		if (!ret)
			ret = za_etab_reader_add(&rd, p);
		if (ret)
			break;
		next_seg = p->h.next_seg_id;
		for (j = 0; j < p->nr_groups && !ret; j++) {
			const struct za_etab_group *g = &p->groups[j];

			if (g->stream >= e->nr_streams) {
				ret = -EBADMSG;
				break;
			}
			if (tg.nr == tg.cap) {
				size_t cap = tg.cap ? tg.cap * 2 : 64;
				struct za_etab_group *n =
					realloc(tg.g, cap * sizeof(*n));

				if (!n) {
					ret = -ENOMEM;
					break;
				}
				tg.g = n;
				tg.cap = cap;
			}
			tg.g[tg.nr++] = *g;
		}
		for (j = 0; j < p->nr_segs && !ret; j++) {
			const struct za_etab_seg *s = &p->segs[j];
			const struct za_etab_group *sg =
				tab_group(&tg, s->group_id);
			const struct za_segment *g = eng_seg_find(e, s->id);

			/* What the drive's bytes claim, checked against the
			 * array before anything is compared. */
			for (c = 0; c < s->width && !ret; c++)
				if (!place_ok(e, s->col[c].member,
					      s->col[c].zone) ||
				    !place_ok(e, s->col[c].hdr_member,
					      s->col[c].hdr_zone))
					ret = -EBADMSG;
			if (!ret &&
			    (!sg || s->grp_idx >= sg->w ||
			     s->width != e->streams[sg->stream].l.width))
				ret = -EBADMSG;
			if (ret)
				break;
			out->segments++;
			/* A stream read whole at recovery needs no quarantine
			 * (za_engine_stream_set_rescan()). */
			for (c = 0; c < s->width && ret >= 0 &&
				    !e->streams[sg->stream].rescan;
			     c++) {
				const struct za_etab_col *col = &s->col[c];

				if (g &&
				    col->member == eng_member(g->member[c]) &&
				    (col->member == ZA_ETAB_MEMBER_ABSENT ||
				     col->zone == g->zone[c]))
					continue;
				ret = vacated(e, s->id, col->member, col->zone);
				if (ret > 0)
					out->mismatches++;
				out->vacated += col->member !=
						ZA_ETAB_MEMBER_ABSENT;
			}
			if (ret < 0)
				break;
			ret = 0;
			if (!g) {
				out->released++;
				continue;
			}
			if (nr_seen == cap_seen) {
				size_t cap = cap_seen ? cap_seen * 2 : 64;
				uint64_t *n = realloc(seen, cap * sizeof(*n));

				if (!n) {
					ret = -ENOMEM;
					break;
				}
				seen = n;
				cap_seen = cap;
			}
			seen[nr_seen++] = s->id;
			if (seg_compare(s, g, sg))
				out->mismatches++;
			else
				out->matched++;
		}
	}
	if (!ret)
		ret = za_etab_reader_done(&rd);
	/* Segments the drives hold that the table does not: new since it,
	 * or - with an id it had handed out already - released before it
	 * and found again, which must never be. */
	for (i = 0; !ret && i < e->hash_size; i++) {
		const struct za_segment *g;

		for (g = e->hash[i]; g; g = g->hnext) {
			size_t lo = 0, hi = nr_seen;

			while (lo < hi) {
				size_t mid = lo + (hi - lo) / 2;

				if (seen[mid] < g->id)
					lo = mid + 1;
				else
					hi = mid;
			}
			if (lo < nr_seen && seen[lo] == g->id)
				continue;
			if (g->id >= next_seg) {
				out->added++;
				continue;
			}
			za_log_warn(
				"recovery: engine table: segment %llu is on "
				"the drives but not in the table, which "
				"had handed out ids below %llu",
				(unsigned long long)g->id,
				(unsigned long long)next_seg);
			out->mismatches++;
		}
	}
	free(seen);
	free(tg.g);
	free(p);
	if (ret)
		eng_quar_clear(&e->rec_quar);
	else if (!e->tab_epoch) {
		/* The segments recovery found are named by a table now. */
		e->tab_epoch = 1;
	}
	return ret == -EBADMSG || ret == -EPROTONOSUPPORT || ret == -ENOENT ?
		       -EBADMSG :
		       ret;
}

/* ---- recovery from the table ---- */

/*
 * Adopting a table (design.md 9.6 item 4) takes its groups and segments
 * as the engine's own instead of finding them on the drives: two passes
 * over the parts. The first checks everything a corrupt table (whose
 * CRCs hold: a bug of ours) could get wrong and the array could not take
 * - places outside the array, a group or a place in a group taken twice,
 * two segments in one zone, a zone recovery has already given to another
 * segment - and changes nothing; the second builds. The checkpoint
 * stream's segments are not taken: recovery reads its zones whatever the
 * table says (za_engine_stream_set_rescan()), so they are found as
 * before.
 */
struct adopt_group {
	struct za_etab_group g;
	uint8_t *idx_seen; /* a bit per place in the group */
};

struct adopt {
	struct za_engine *e;
	struct adopt_group *g;
	size_t nr, cap;
	uint8_t **zone_seen; /* per member, a bit per zone: a place now */
	struct za_etab_hdr h;
	uint64_t segs;
};

static struct adopt_group *adopt_group(struct adopt *a, uint64_t id)
{
	size_t lo = 0, hi = a->nr;

	while (lo < hi) { /* ids increase: the reader saw to it */
		size_t mid = lo + (hi - lo) / 2;

		if (a->g[mid].g.id == id)
			return &a->g[mid];
		if (a->g[mid].g.id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static bool bit_test_set(uint8_t *bits, uint64_t i)
{
	bool was = bits[i / 8] & (1u << (i % 8));

	bits[i / 8] |= (uint8_t)(1u << (i % 8));
	return was;
}

/* Pass 1 for one segment: 0, -EBADMSG or -ENOMEM. */
static int adopt_check_seg(struct adopt *a, const struct za_etab_seg *s)
{
	struct za_engine *e = a->e;
	struct adopt_group *ag = adopt_group(a, s->group_id);
	unsigned c;

	if (!ag || s->grp_idx >= ag->g.w ||
	    s->width != e->streams[ag->g.stream].l.width ||
	    s->next_stripe > ag->g.nr_stripes)
		return -EBADMSG;
	for (c = 0; c < s->width; c++)
		if (!place_ok(e, s->col[c].member, s->col[c].zone) ||
		    !place_ok(e, s->col[c].hdr_member, s->col[c].hdr_zone))
			return -EBADMSG;
	if (e->streams[ag->g.stream].rescan)
		return 0; /* found on the drives, not taken */
	/* Recovery has it from a header already: not from this table. */
	if (eng_seg_find(e, s->id) || eng_group_find(e, ag->g.id))
		return -EBADMSG;
	if (!ag->idx_seen) {
		ag->idx_seen = calloc(((size_t)ag->g.w + 7) / 8, 1);
		if (!ag->idx_seen)
			return -ENOMEM;
	}
	if (bit_test_set(ag->idx_seen, s->grp_idx))
		return -EBADMSG;
	for (c = 0; c < s->width; c++) {
		uint16_t mi = s->col[c].member;
		struct member *m;

		if (mi == ZA_ETAB_MEMBER_ABSENT)
			continue;
		m = &e->m[mi];
		if (!m->zkind || !eng_readable(m))
			continue; /* not read at this assembly */
		if (m->zkind[s->col[c].zone] == Z_USED)
			return -EBADMSG; /* another segment's already */
		if (!a->zone_seen[mi]) {
			a->zone_seen[mi] =
				calloc(((size_t)m->nr_zones + 7) / 8, 1);
			if (!a->zone_seen[mi])
				return -ENOMEM;
		}
		if (bit_test_set(a->zone_seen[mi], s->col[c].zone))
			return -EBADMSG;
	}
	return 0;
}

/* Pass 2 for one segment (checked): its group made if new, itself. */
static int adopt_seg(struct adopt *a, const struct za_etab_seg *s)
{
	struct za_engine *e = a->e;
	struct adopt_group *ag = adopt_group(a, s->group_id);
	struct stream *st = &e->streams[ag->g.stream];
	struct za_segment *g, **open;
	struct group *grp;
	unsigned c;

	if (st->rescan)
		return 0;
	grp = eng_rec_group_get(e, ag->g.id, st, ag->g.w, ag->g.nr_stripes);
	if (!grp)
		return -ENOMEM;
	grp->next_pos = ag->g.next_pos;
	g = eng_rec_seg_new(e, grp, s->grp_idx, s->id);
	if (!g)
		return -ENOMEM;
	if (!(s->flags & ZA_ETAB_SEG_SEALED)) {
		open = realloc(e->rec_open,
			       (e->rec_nr_open + 1) * sizeof(*open));
		if (!open) {
			free(g);
			return -ENOMEM;
		}
		e->rec_open = open;
		open[e->rec_nr_open++] = g;
	}
	g->next_stripe = s->next_stripe;
	g->dead_cols = s->dead_cols;
	g->rec_table = true;
	g->rec_home = true;
	g->rec_readable = s->next_stripe > 0;
	for (c = 0; c < s->width; c++) {
		const struct za_etab_col *col = &s->col[c];
		struct member *m;

		g->member[c] = col->member == ZA_ETAB_MEMBER_ABSENT ?
				       ZA_STRIPE_MEMBER_ABSENT :
				       col->member;
		g->zone[c] = col->zone;
		g->hdr_member[c] = col->hdr_member == ZA_ETAB_MEMBER_ABSENT ?
					   ZA_STRIPE_MEMBER_ABSENT :
					   col->hdr_member;
		g->hdr_zone[c] = col->hdr_zone;
		g->col_upto[c] = col->upto;
		if (col->member == ZA_ETAB_MEMBER_ABSENT)
			continue;
		m = &e->m[col->member];
		if (!m->zkind)
			continue;
		if (m->zkind[col->zone] == Z_FREE) {
			m->zkind[col->zone] = Z_USED;
			m->free_zones--;
		} else if (m->zkind[col->zone] == Z_UNCLAIMED) {
			m->zkind[col->zone] = Z_USED;
		}
	}
	eng_rec_seg_insert(e, g);
	a->segs++;
	return 0;
}

/* One pass over every part: pass 1 (@build false) or 2. */
static int adopt_pass(struct adopt *a, const uint8_t *blocks, uint32_t nr_parts,
		      struct za_etab_part *p, bool build)
{
	struct za_engine *e = a->e;
	struct za_etab_reader rd;
	uint32_t part, j;
	int ret = 0;

	za_etab_reader_init(&rd);
	for (part = 0; part < nr_parts && !ret; part++) {
		ret = za_etab_block_decode(blocks + (size_t)part *
							    ZA_ETAB_BLOCK_BYTES,
					   ZA_ETAB_BLOCK_BYTES, p);
		if (!ret)
			ret = za_etab_reader_add(&rd, p);
		if (ret)
			break;
		a->h = p->h;
		for (j = 0; j < p->nr_groups && !ret && !build; j++) {
			if (p->groups[j].stream >= e->nr_streams) {
				ret = -EBADMSG;
				break;
			}
			if (a->nr == a->cap) {
				size_t cap = a->cap ? a->cap * 2 : 64;
				struct adopt_group *n =
					realloc(a->g, cap * sizeof(*n));

				if (!n) {
					ret = -ENOMEM;
					break;
				}
				a->g = n;
				a->cap = cap;
			}
			memset(&a->g[a->nr], 0, sizeof(a->g[a->nr]));
			a->g[a->nr++].g = p->groups[j];
		}
		for (j = 0; j < p->nr_segs && !ret; j++)
			ret = build ? adopt_seg(a, &p->segs[j]) :
				      adopt_check_seg(a, &p->segs[j]);
	}
	if (!ret)
		ret = za_etab_reader_done(&rd);
	return ret;
}

int za_engine_table_adopt(struct za_engine *e, const uint8_t *blocks,
			  uint32_t nr_parts)
{
	struct adopt a = { .e = e };
	struct za_etab_part *p;
	size_t i;
	int ret;

	if (!e->rec || e->rec_tab)
		return -EINVAL;
	p = malloc(sizeof(*p));
	a.zone_seen = calloc(e->nr_members + 1, sizeof(*a.zone_seen));
	if (!p || !a.zone_seen) {
		ret = -ENOMEM;
		goto out;
	}
	/* Pass 2 finds what pass 1 did: only memory can fail it. */
	ret = adopt_pass(&a, blocks, nr_parts, p, false);
	if (!ret)
		ret = adopt_pass(&a, blocks, nr_parts, p, true);
	if (ret) {
		if (ret != -ENOMEM)
			ret = -EBADMSG;
		goto out;
	}
	e->rec_tab = true;
	e->rec_tab_next_seg = a.h.next_seg_id;
	if (e->seq < a.h.next_seq)
		e->seq = a.h.next_seq;
	if (e->next_seg_id < a.h.next_seg_id)
		e->next_seg_id = a.h.next_seg_id;
	if (e->next_group_id < a.h.next_group_id)
		e->next_group_id = a.h.next_group_id;
	e->st.rec_table_segs = a.segs;
out:
	for (i = 0; i < a.nr; i++)
		free(a.g[i].idx_seen);
	free(a.g);
	for (i = 0; a.zone_seen && i <= e->nr_members; i++)
		free(a.zone_seen[i]);
	free(a.zone_seen);
	free(p);
	return ret;
}
