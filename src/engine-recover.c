// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * engine-recover.c - crash recovery: the engine's segments, groups and
 * counters rebuilt from the stripe headers on the drives (or from the
 * anchored checkpoint's engine table and the headers written since),
 * torn stripes completed, unfinished copies, released segments and stale
 * places dropped, unclaimed zones reset, and every readable stripe handed
 * to the owner in sequence order. Synchronous, once, before any write.
 * It does not know what the stripes hold: the owner (the volume) replays
 * them.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "byteorder.h"
#include "container.h"
#include "crc.h"
#include "ec.h"
#include "log.h"
#include "engine-int.h"

/* ---- crash recovery ---- */

/*
 * Recovery reads the drives in two passes. Pass 1 reads the header of
 * every slot of every non-empty data zone, learns each segment (members,
 * zones, group, stream) from any one of its columns, and keeps one compact
 * record per stripe with the columns found. Pass 2 goes through the
 * stripes in sequence order, reads their data columns' headers again for
 * the LBA tables (decoding a missing column's table from the others) and
 * hands them to the owner. Memory: one record per stripe, no headers.
 *
 * Resting on the table (design.md 9.6 item 4): the owner's plan callback
 * runs before pass 1. It reads the zones of the anchored checkpoint
 * (za_engine_recover_scan()), loads it, and has the engine adopt its
 * table (za_engine_table_adopt(), engine-table.c): every group and
 * segment as of the checkpoint's sequence number S, its zones claimed.
 * Pass 1 then reads only what the table does not account for:
 *
 *   zone written, held by no table segment  -> read whole (new since S:
 *                                              the checkpoint stream's,
 *                                              moved columns, new ones)
 *   zone of a table segment sealed at S     -> not read
 *   zone of a table segment open at S       -> read from its next stripe
 *   table segment, every place read empty   -> released since S: dropped
 *   header of an id below the table's next  -> released before S: stray
 *   id that it does not hold                   (the zone is garbage)
 *
 * What is read is O(what was written since S), and the stripe records
 * are as few: only stripes after S are replayed, so only those matter.
 * The quarantine (9.6 item 3) is what makes "held by a table segment"
 * mean "holds that segment or nothing": a zone a live table names is not
 * written again before a newer table is anchored. Without an adopted
 * table (no anchor, a revoked one, a table that does not hold) pass 1
 * reads everything, as before.
 */
struct rec_stripe {
	uint64_t seq;
	uint64_t seg_id;
	uint64_t group_id, group_pos;
	uint32_t stripe_idx;
	uint32_t nr_blocks;
	uint64_t cols; /* columns whose header was found */
	uint8_t kind, stream;
	bool bad; /* columns disagree */
};

struct rec_ra;

struct rec_ctx {
	struct za_engine *e;
	struct rec_stripe *st;
	size_t nr, cap;
	uint8_t *blk; /* 4 KiB, aligned */
	uint8_t *cblk; /* 4 KiB a column, aligned: pass 2's header reads */
	uint64_t max_seq, max_seg, max_group;
	struct rec_ra *ra; /* pass 1's headers, read ahead */
};

static const uint8_t *ra_get(struct rec_ra *ra, unsigned mi, uint64_t off);

/*
 * Recovery's groups and segments, whether found in headers
 * (rec_segment()) or taken from a table (engine-table.c).
 *
 * eng_rec_group_get(): group @id, made empty if new; NULL on -ENOMEM.
 * A group found already is returned as it is: the caller compares.
 */
struct group *eng_rec_group_get(struct za_engine *e, uint64_t id,
				struct stream *st, unsigned w,
				uint32_t nr_stripes)
{
	struct group *grp = eng_group_find(e, id);

	if (grp)
		return grp;
	grp = calloc(1, sizeof(*grp));
	if (grp)
		grp->segs = calloc(w, sizeof(*grp->segs));
	if (!grp || !grp->segs) {
		free(grp);
		return NULL;
	}
	grp->id = id;
	grp->eng = e;
	grp->st = st;
	grp->w = w;
	grp->nr_stripes = nr_stripes;
	eng_group_insert(e, grp);
	return grp;
}

/* A sealed, finished segment (no more stripes after a restart) at place
 * @idx of @grp, its columns to be set; not inserted yet. */
struct za_segment *eng_rec_seg_new(struct za_engine *e, struct group *grp,
				   unsigned idx, uint64_t id)
{
	struct za_segment *g = eng_seg_alloc(grp->st->l.width);

	if (!g)
		return NULL;
	g->eng = e;
	g->st = grp->st;
	g->grp = grp;
	g->grp_idx = idx;
	g->id = id;
	g->state = ZA_SEG_SEALED;
	g->nr_stripes = grp->nr_stripes;
	g->finished = true;
	return g;
}

void eng_rec_seg_insert(struct za_engine *e, struct za_segment *g)
{
	g->grp->segs[g->grp_idx] = g;
	eng_seg_insert(e, g);
	eng_pairs_add(e, g, 1);
}

/* Forget @g (on the hash chain *@gp points into; *@gp is its successor
 * afterwards), and its group once it holds no segment. */
static void rec_seg_drop(struct za_engine *e, struct za_segment *g)
{
	struct group *grp = g->grp;
	unsigned j;

	eng_seg_unlink(e, g);
	grp->segs[g->grp_idx] = NULL;
	eng_pairs_add(e, g, -1);
	free(g->fin);
	free(g);
	for (j = 0; j < grp->w && !grp->segs[j]; j++)
		;
	if (j == grp->w)
		eng_group_unlink_free(e, grp);
}

static struct za_segment *rec_segment(struct za_engine *e,
				      const struct za_stripe_hdr *h)
{
	struct za_segment *g = eng_seg_find(e, h->seg_id);
	struct group *grp;
	struct stream *st;
	unsigned i, width = (unsigned)h->k + h->p;

	if (g)
		return g;
	if (h->stream >= e->nr_streams)
		return NULL;
	st = &e->streams[h->stream];
	if (st->l.k != h->k || st->l.p != h->p || st->l.rows != h->rows ||
	    st->l.chunk_bytes != h->chunk_bytes)
		return NULL;
	for (i = 0; i < width; i++) {
		unsigned mi = h->members[i];

		if (mi == ZA_STRIPE_MEMBER_ABSENT)
			continue; /* born lost: the "no member" entry */
		if (mi >= e->nr_members ||
		    h->zones[i] >= (e->m[mi].nr_zones ? e->m[mi].nr_zones :
							UINT32_MAX))
			return NULL;
	}
	grp = eng_rec_group_get(e, h->group_id, st, h->group_w,
				h->group_stripes);
	if (!grp || grp->w != h->group_w || grp->st != st ||
	    grp->nr_stripes != h->group_stripes || grp->segs[h->group_idx])
		return NULL;
	g = eng_rec_seg_new(e, grp, h->group_idx, h->seg_id);
	if (!g)
		return NULL;
	for (i = 0; i < width; i++) {
		struct member *m = &e->m[h->members[i]];

		g->member[i] = g->hdr_member[i] = h->members[i];
		g->zone[i] = g->hdr_zone[i] = h->zones[i];
		g->col_upto[i] = UINT32_MAX;
		/* Lazily: every zone pass 1 reads is one still unclaimed
		 * (rec_claim() claims what segments hold afterwards). */
		if (e->rec_lazy)
			continue;
		if (m->zkind && m->zkind[g->zone[i]] == Z_FREE) {
			m->zkind[g->zone[i]] = Z_USED;
			m->free_zones--;
		} else if (m->zkind && m->zkind[g->zone[i]] == Z_UNCLAIMED) {
			m->zkind[g->zone[i]] = Z_USED;
		}
	}
	eng_rec_seg_insert(e, g);
	return g;
}

static int rec_add(struct rec_ctx *rc, const struct za_stripe_hdr *h)
{
	struct rec_stripe *r;

	if (rc->nr == rc->cap) {
		size_t cap = rc->cap ? rc->cap * 2 : 1024;
		struct rec_stripe *n = realloc(rc->st, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		rc->st = n;
		rc->cap = cap;
	}
	r = &rc->st[rc->nr++];
	memset(r, 0, sizeof(*r));
	r->seq = h->seq;
	r->seg_id = h->seg_id;
	r->group_id = h->group_id;
	r->group_pos = (uint64_t)h->stripe_idx * h->group_w + h->group_idx;
	r->stripe_idx = h->stripe_idx;
	r->nr_blocks = h->nr_blocks;
	r->cols = 1ull << h->col;
	r->kind = h->kind;
	r->stream = h->stream;
	if (h->seq > rc->max_seq)
		rc->max_seq = h->seq;
	if (h->seg_id > rc->max_seg)
		rc->max_seg = h->seg_id;
	if (h->group_id > rc->max_group)
		rc->max_group = h->group_id;
	return 0;
}

/* Where the column a header describes is (moved by a rebuild or not). */
static unsigned hdr_at_member(const struct za_stripe_hdr *h)
{
	return (h->flags & ZA_STRIPE_F_RELOCATED) ? h->at_member :
						    h->members[h->col];
}

static uint32_t hdr_at_zone(const struct za_stripe_hdr *h)
{
	return (h->flags & ZA_STRIPE_F_RELOCATED) ? h->at_zone :
						    h->zones[h->col];
}

/* A block never written: what a drive returns past the write pointer a
 * zone had when it was finished. */
static bool rec_blank(const uint8_t *blk)
{
	size_t i;

	for (i = 0; i < 4096; i++)
		if (blk[i])
			return false;
	return true;
}

/* Read and decode the header at @off of member @mi; -ENODATA if the
 * block was never written. */
/* Decode the header block @blk read from member @mi: -ENODATA if never
 * written, -EBADMSG if not a header of this array for that member. */
static int rec_hdr_check(const struct za_engine *e, unsigned mi,
			 const uint8_t *blk, struct za_stripe_hdr *h)
{
	int ret;

	if (rec_blank(blk))
		return -ENODATA;
	ret = za_stripe_hdr_decode(blk, h);
	if (ret)
		return ret;
	if (!za_uuid_eq(&h->array_uuid, &e->uuid) || hdr_at_member(h) != mi)
		return -EBADMSG;
	return 0;
}

/* Read and decode the header at @off of member @mi into rc->blk and @h;
 * -ENODATA if the block was never written. */
static int rec_read_hdr(struct rec_ctx *rc, unsigned mi, uint64_t off,
			struct za_stripe_hdr *h)
{
	struct za_engine *e = rc->e;
	const uint8_t *blk = rc->ra ? ra_get(rc->ra, mi, off) : NULL;
	int ret;

	if (blk) {
		e->st.rec_hdr_ahead++;
		memcpy(rc->blk, blk, 4096); /* where callers look */
	} else {
		e->st.rec_hdr_reads++;
		ret = za_dev_io_sync(e->m[mi].dev, ZA_DEV_OP_READ, off, rc->blk,
				     4096, NULL);
		if (ret)
			return ret;
	}
	return rec_hdr_check(e, mi, rc->blk, h);
}

/*
 * A column moved by a rebuild was found in zone @z of member @mi: make it
 * the column's place unless a finished copy is already known. Partial
 * copies (a rebuild interrupted) are dropped after pass 1. Returns true
 * if the zone now holds the column.
 */
static bool rec_relocated(struct za_engine *e, struct za_segment *g, unsigned c,
			  unsigned mi, uint32_t z)
{
	struct member *old;

	if (g->member[c] == mi && g->zone[c] == z)
		return true;
	if (g->member[c] != g->hdr_member[c] || g->zone[c] != g->hdr_zone[c]) {
		old = &e->m[g->member[c]];
		/* A finished copy is known - unless the table gave it and it
		 * is not there now: moved again since (and reset), or on a
		 * member lost since, a rebuild's new copy taking its place. */
		if (g->col_upto[c] &&
		    (!g->rec_table ||
		     (eng_readable(old) && old->zwp &&
		      old->zwp[g->zone[c]] >
			      (uint64_t)g->zone[c] * old->zone_bytes)))
			return false;
		if (old->zkind && old->zkind[g->zone[c]] == Z_USED)
			old->zkind[g->zone[c]] = Z_UNCLAIMED;
	}
	g->member[c] = (uint16_t)mi;
	g->zone[c] = z;
	g->col_upto[c] = 0; /* until its last slot says it is complete */
	if (e->m[mi].zkind[z] == Z_UNCLAIMED)
		e->m[mi].zkind[z] = Z_USED;
	return true;
}

/*
 * A header of a segment the adopted table does not hold but whose id it
 * had handed out: released before the table was taken, its zone not
 * reset (the reset failed, or a crash came first). Garbage, as it is to
 * a full scan, which never finds the segment whole. The checkpoint
 * stream's segments are read whatever the table says.
 */
static bool rec_stray(const struct za_engine *e, const struct za_stripe_hdr *h)
{
	return e->rec_tab && h->seg_id < e->rec_tab_next_seg &&
	       !eng_seg_find(e, h->seg_id) &&
	       !(h->stream < e->nr_streams && e->streams[h->stream].rescan);
}

/*
 * Pass 1 on one zone: every slot up to the write pointer, or up to the
 * first slot never written. Recovery finishes the zones of the segments
 * it found (no segment takes stripes after a restart), which moves their
 * write pointers to the end; without the second bound every later
 * assembly read each such zone whole, one header per slot - a journal
 * zone of 256 MiB in 8 KiB slots is 32,768 reads - and each restart left
 * more of them (S1, bench/results/notes.md). A written slot starts with
 * its header, and a zone is written in order, so nothing follows a blank
 * one.
 *
 * From byte @from of the zone on (a slot boundary; 0: the whole zone),
 * @slot_bytes, when @from is not 0, being the slot size of the segment
 * there: a table's segment open at its checkpoint, read from its next
 * stripe on.
 */
static int rec_scan_zone_from(struct rec_ctx *rc, unsigned mi, uint32_t z,
			      uint64_t from, uint64_t slot_bytes)
{
	struct za_engine *e = rc->e;
	struct member *m = &e->m[mi];
	uint64_t start = (uint64_t)z * m->zone_bytes, off = start + from;
	uint64_t slot = from ? slot_bytes : 0, end = m->zwp[z];
	struct za_stripe_hdr h;
	struct za_segment *g;
	int ret;

	e->st.rec_zones_scanned++;
	while (off + 4096 <= end) {
		ret = rec_read_hdr(rc, mi, off, &h);
		if (ret == -ENODEV)
			return ret;
		if (ret == -ENODATA)
			return 0; /* never written from here on */
		if (!ret && (hdr_at_zone(&h) != z || rec_stray(e, &h)))
			ret = -EBADMSG;
		if (!ret) {
			g = rec_segment(e, &h);
			if (g && (h.flags & ZA_STRIPE_F_RELOCATED) &&
			    !rec_relocated(e, g, h.col, mi, z))
				g = NULL;
			if (g && g->member[h.col] == mi &&
			    g->zone[h.col] == z) {
				slot = g->st->l.slot_bytes;
				if (!(h.flags & ZA_STRIPE_F_RELOCATED))
					g->rec_home = true;
				if (h.flags & ZA_STRIPE_F_COMPLETE)
					g->col_upto[h.col] = h.stripe_idx + 1;
				if (!(h.flags & ZA_STRIPE_F_HOLE))
					ret = rec_add(rc, &h);
				if (ret)
					return ret;
			} else {
				ret = -EBADMSG;
			}
		}
		if (ret && !slot)
			return 0; /* no valid first slot: the zone is garbage */
		off += slot;
	}
	return 0;
}

static int rec_scan_zone(struct rec_ctx *rc, unsigned mi, uint32_t z)
{
	return rec_scan_zone_from(rc, mi, z, 0, 0);
}

/*
 * Pass 1's read-ahead. rec_scan_zone_from() reads a zone's headers one
 * after the other, each read synchronous, zone after zone, member after
 * member: on drives with a seek per read, hundreds of zones to read after
 * a checkpoint (S1) were as many seeks in a row. Before pass 1 every zone
 * it will scan gets a chain that reads the same headers - the first slot,
 * then one slot of the header's stream further on, stopping at a blank
 * block, at the write pointer or at a first slot that is not ours - up to
 * RA_INFLIGHT zones at once on the loop, RA_BLOCKS blocks in all (a full
 * scan reads the rest as before). Pass 1 then runs as it did, taking each
 * block it reads from here when a chain read it: what it does with a
 * header is decided there alone, and a block no chain read (a chain that
 * guessed another slot, failed, or ran out) is read then.
 */
#define RA_INFLIGHT 256u
#define RA_BLOCKS 16384u /* 64 MiB */

struct ra_blk {
	uint64_t off;
	uint8_t *data;
};

struct ra_zone {
	struct rec_ra *ra;
	unsigned mi;
	uint32_t z;
	uint64_t off, end, slot;
	struct ra_blk *blk; /* in offset order */
	size_t nr, cap, used;
	struct za_dev_req req;
};

struct rec_ra {
	struct za_engine *e;
	struct ra_zone *zones; /* in (member, zone) order */
	size_t nr, cap, next;
	unsigned inflight;
	size_t blocks;
	bool done;
};

static void ra_chain_next(struct ra_zone *rz);

static const uint8_t *ra_get(struct rec_ra *ra, unsigned mi, uint64_t off)
{
	const struct za_engine *e = ra->e;
	uint32_t z = (uint32_t)(off / e->m[mi].zone_bytes);
	size_t lo = 0, hi = ra->nr;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		struct ra_zone *rz = &ra->zones[mid];

		if (rz->mi == mi && rz->z == z) {
			size_t a = 0, b = rz->nr;

			while (a < b) {
				size_t m = a + (b - a) / 2;

				if (rz->blk[m].off == off) {
					rz->used++;
					return rz->blk[m].data;
				}
				if (rz->blk[m].off < off)
					a = m + 1;
				else
					b = m;
			}
			return NULL;
		}
		if (rz->mi < mi || (rz->mi == mi && rz->z < z))
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* Zone @z of member @mi is to be scanned from byte @from (slot @slot). */
static int ra_add(struct rec_ra *ra, unsigned mi, uint32_t z, uint64_t from,
		  uint64_t slot)
{
	struct member *m = &ra->e->m[mi];
	struct ra_zone *rz;

	if (ra->nr == ra->cap) {
		size_t cap = ra->cap ? 2 * ra->cap : 64;
		struct ra_zone *v = realloc(ra->zones, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		ra->zones = v;
		ra->cap = cap;
	}
	rz = &ra->zones[ra->nr++];
	memset(rz, 0, sizeof(*rz));
	rz->mi = mi;
	rz->z = z;
	rz->off = (uint64_t)z * m->zone_bytes + from;
	rz->end = m->zwp[z];
	rz->slot = from ? slot : 0;
	return 0;
}

static void ra_chain_end(struct ra_zone *rz)
{
	struct rec_ra *ra = rz->ra;

	ra->inflight--;
	while (ra->inflight < RA_INFLIGHT && ra->next < ra->nr) {
		struct ra_zone *n = &ra->zones[ra->next++];

		ra->inflight++;
		n->ra = ra;
		ra_chain_next(n);
	}
	if (!ra->inflight)
		ra->done = true;
}

static void ra_read_done(struct za_dev_req *req)
{
	struct ra_zone *rz = container_of(req, struct ra_zone, req);
	struct za_engine *e = rz->ra->e;
	struct ra_blk *b = &rz->blk[rz->nr];
	struct za_stripe_hdr h;

	if (req->result) {
		free(b->data); /* pass 1 reads it again, and says why */
		ra_chain_end(rz);
		return;
	}
	rz->nr++;
	if (rec_blank(b->data)) {
		ra_chain_end(rz); /* never written from here on */
		return;
	}
	/* The slot pass 1 will step by: the stream's of a header of ours
	 * for this zone (pass 1 also checks its segment; where that fails
	 * it reads what it needs itself). */
	if (!za_stripe_hdr_decode(b->data, &h) &&
	    za_uuid_eq(&h.array_uuid, &e->uuid) &&
	    hdr_at_member(&h) == rz->mi && hdr_at_zone(&h) == rz->z &&
	    !rec_stray(e, &h) && h.stream < e->nr_streams)
		rz->slot = e->streams[h.stream].l.slot_bytes;
	if (!rz->slot) {
		ra_chain_end(rz); /* no valid first slot: garbage */
		return;
	}
	rz->off += rz->slot;
	ra_chain_next(rz);
}

static void ra_chain_next(struct ra_zone *rz)
{
	struct rec_ra *ra = rz->ra;
	struct ra_blk *b;

	if (rz->off + 4096 > rz->end || ra->blocks >= RA_BLOCKS) {
		ra_chain_end(rz);
		return;
	}
	if (rz->nr == rz->cap) {
		size_t cap = rz->cap ? 2 * rz->cap : 4;
		struct ra_blk *v = realloc(rz->blk, cap * sizeof(*v));

		if (!v) {
			ra_chain_end(rz);
			return;
		}
		rz->blk = v;
		rz->cap = cap;
	}
	b = &rz->blk[rz->nr];
	b->off = rz->off;
	if (posix_memalign((void **)&b->data, 4096, 4096)) {
		b->data = NULL;
		ra_chain_end(rz);
		return;
	}
	ra->blocks++;
	ra->e->st.rec_hdr_reads++;
	memset(&rz->req, 0, sizeof(rz->req));
	rz->req.op = ZA_DEV_OP_READ;
	rz->req.off_bytes = rz->off;
	rz->req.len_bytes = 4096;
	rz->req.buf = b->data;
	rz->req.done = ra_read_done;
	za_dev_submit(ra->e->m[rz->mi].dev, &rz->req);
}

static int ra_cmp(const void *a, const void *b)
{
	const struct ra_zone *x = a, *y = b;

	if (x->mi != y->mi)
		return x->mi < y->mi ? -1 : 1;
	return x->z < y->z ? -1 : x->z > y->z;
}

/* Read ahead every zone added; returns when every chain has ended. */
static void ra_run(struct rec_ra *ra)
{
	ra->done = !ra->nr;
	ra->next = 0;
	ra->inflight = 1; /* this start's own, ended below */
	ra_chain_end(&(struct ra_zone){ .ra = ra });
	if (!ra->done)
		za_io_run_until(ra->e->io, &ra->done, 0);
}

static void ra_free(struct rec_ra *ra)
{
	size_t i, j;

	if (!ra)
		return;
	for (i = 0; i < ra->nr; i++) {
		/* A block pass 1 took twice counts once more than it is. */
		if (ra->zones[i].nr > ra->zones[i].used)
			ra->e->st.rec_hdr_ahead_unused +=
				ra->zones[i].nr - ra->zones[i].used;
		for (j = 0; j < ra->zones[i].nr; j++)
			free(ra->zones[i].blk[j].data);
		free(ra->zones[i].blk);
	}
	free(ra->zones);
	free(ra);
}

/* Groups and segments learn how far they were written from records
 * @from on. */
static void rec_learn(struct rec_ctx *rc, size_t from)
{
	struct za_engine *e = rc->e;
	size_t i;

	for (i = from; i < rc->nr; i++) {
		struct group *grp = eng_group_find(e, rc->st[i].group_id);
		struct za_segment *g = eng_seg_find(e, rc->st[i].seg_id);

		if (g && grp && grp->next_pos < rc->st[i].group_pos + 1)
			grp->next_pos = rc->st[i].group_pos + 1;
		if (g && g->next_stripe < rc->st[i].stripe_idx + 1)
			g->next_stripe = rc->st[i].stripe_idx + 1;
	}
}

void za_engine_recover_plan(struct za_engine *e, int (*plan)(void *priv))
{
	e->rec_plan = plan;
}

int za_engine_recover_scan(struct za_engine *e, unsigned mi, uint32_t z)
{
	struct rec_ctx *rc = e->rec;
	struct member *m;
	size_t from;
	int ret;

	if (!rc || e->rec_tab)
		return -EINVAL;
	if (mi >= e->nr_members)
		return 0;
	m = &e->m[mi];
	if (!eng_readable(m) || !m->zkind || z >= m->nr_zones ||
	    m->zkind[z] != Z_UNCLAIMED)
		return 0; /* not to be read, or read already */
	from = rc->nr;
	ret = rec_scan_zone(rc, mi, z);
	rec_learn(rc, from);
	/* Read: pass 1 leaves it (rec_claim() decides who holds it). */
	m->zkind[z] = Z_USED;
	return ret;
}

int za_engine_recover_scan_seg(struct za_engine *e, unsigned mi, uint32_t z,
			       uint64_t seg_id)
{
	struct rec_ctx *rc = e->rec;
	struct za_stripe_hdr h;
	struct member *m;
	int ret;

	if (!rc || e->rec_tab)
		return -EINVAL;
	if (mi >= e->nr_members)
		return 0;
	m = &e->m[mi];
	if (!eng_readable(m) || !m->zkind || z >= m->nr_zones ||
	    m->zkind[z] != Z_UNCLAIMED ||
	    m->zwp[z] < (uint64_t)z * m->zone_bytes + 4096)
		return 0;
	ret = rec_read_hdr(rc, mi, (uint64_t)z * m->zone_bytes, &h);
	if (ret == -ENODEV)
		return ret;
	if (ret || h.seg_id != seg_id)
		return 0; /* someone else's now: pass 1 reads it */
	return za_engine_recover_scan(e, mi, z);
}

/*
 * Table mode, after pass 1: a segment of the table whose every readable
 * place is empty now was released since the table was taken (its zones
 * reset, and quarantined: not written since). Dropped, as a full scan
 * would never have found it: it finds a segment only in the headers of
 * readable zones. One with no readable place at all stays, as its
 * columns are on drives not read now (more than p missing: the array is
 * failed anyway) and a full scan would find it when they come back.
 */
static void rec_drop_released(struct za_engine *e)
{
	struct za_segment *g, **gp;
	unsigned i, c, seen, empty;

	for (i = 0; i < e->hash_size; i++)
		for (gp = &e->hash[i]; (g = *gp);) {
			for (c = 0, seen = 0, empty = 0;
			     g->rec_table && c < g->st->l.width; c++) {
				struct member *m = &e->m[g->member[c]];
				uint32_t z = g->zone[c];

				if (eng_col_absent(g, c) || !eng_readable(m))
					continue;
				seen++;
				empty += m->zwp[z] <=
					 (uint64_t)z * m->zone_bytes;
			}
			if (!g->rec_table || !seen || empty < seen) {
				gp = &g->hnext;
				continue;
			}
			za_log_debug(
				"recovery: segment %llu of the engine table "
				"was released since",
				(unsigned long long)g->id);
			rec_seg_drop(e, g); /* *gp is its successor now */
		}
}

/* Table mode: the table's open segments, from their next stripe on. */
/* Pass 1 reads zone @z of @m whole: not accounted for by an adopted
 * table (or, without one, written at all). */
static bool rec_zone_scanned(const struct za_engine *e, const struct member *m,
			     uint32_t z)
{
	return m->zkind[z] == Z_UNCLAIMED ||
	       (m->zkind[z] == Z_USED && !e->rec_tab);
}

/* rec_scan_open() reads column @c of the table's open segment @g from its
 * next stripe on. */
static bool rec_open_col_scanned(const struct za_engine *e,
				 const struct za_segment *g, unsigned c)
{
	const struct member *m = &e->m[g->member[c]];

	return !eng_col_absent(g, c) && eng_readable(m) && m->zkind &&
	       g->next_stripe < g->nr_stripes;
}

static int rec_scan_open(struct rec_ctx *rc)
{
	struct za_engine *e = rc->e;
	size_t i;
	unsigned c;
	int ret = 0;

	for (i = 0; i < e->rec_nr_open && !ret; i++) {
		struct za_segment *g = e->rec_open[i];
		uint64_t slot = g->st->l.slot_bytes;

		for (c = 0; c < g->st->l.width && !ret; c++) {
			if (!rec_open_col_scanned(e, g, c))
				continue;
			ret = rec_scan_zone_from(
				rc, g->member[c], g->zone[c],
				(uint64_t)g->next_stripe * slot, slot);
		}
	}
	return ret;
}

/*
 * Read ahead (ra_run()) the zones pass 1 is about to scan: those of the
 * loop in za_engine_recover_from(), then rec_scan_open()'s. 0 or -ENOMEM.
 */
static int rec_read_ahead(struct rec_ctx *rc)
{
	struct za_engine *e = rc->e;
	struct rec_ra *ra = calloc(1, sizeof(*ra));
	unsigned mi, c;
	uint32_t z;
	size_t i;
	int ret = 0;

	if (!ra)
		return -ENOMEM;
	ra->e = e;
	for (mi = 0; mi < e->nr_members && !ret; mi++) {
		struct member *m = &e->m[mi];

		if (!eng_readable(m))
			continue;
		for (z = 0; z < m->nr_zones && !ret; z++)
			if (rec_zone_scanned(e, m, z))
				ret = ra_add(ra, mi, z, 0, 0);
	}
	for (i = 0; e->rec_tab && i < e->rec_nr_open && !ret; i++) {
		struct za_segment *g = e->rec_open[i];
		uint64_t slot = g->st->l.slot_bytes;

		for (c = 0; c < g->st->l.width && !ret; c++) {
			if (!rec_open_col_scanned(e, g, c))
				continue;
			ret = ra_add(ra, g->member[c], g->zone[c],
				     (uint64_t)g->next_stripe * slot, slot);
		}
	}
	if (ret) {
		ra_free(ra);
		return ret;
	}
	/* ra_get() looks zones up by (member, zone): one entry each. */
	if (ra->nr) /* qsort(NULL, 0) is undefined */
		qsort(ra->zones, ra->nr, sizeof(*ra->zones), ra_cmp);
	ra_run(ra);
	rc->ra = ra;
	return 0;
}

static int rec_cmp_pos(const void *a, const void *b)
{
	const struct rec_stripe *x = a, *y = b;

	if (x->seg_id != y->seg_id)
		return x->seg_id < y->seg_id ? -1 : 1;
	if (x->stripe_idx != y->stripe_idx)
		return x->stripe_idx < y->stripe_idx ? -1 : 1;
	return 0;
}

static int rec_cmp_seq(const void *a, const void *b)
{
	const struct rec_stripe *x = a, *y = b;

	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Pass 2 for one stripe: its LBAs, decoding missing columns' tables. */
/* A column header's read among a stripe's (rec_read_cols()). */
struct rec_col_read {
	struct za_dev_req req;
	unsigned *left;
	bool *done;
};

static void rec_col_read_done(struct za_dev_req *req)
{
	struct rec_col_read *rd = container_of(req, struct rec_col_read, req);

	if (!--*rd->left)
		*rd->done = true;
}

/*
 * Pass 2 reads a stripe's data columns' headers for their LBA tables: k
 * reads on k members, which one after the other cost k drives' latency
 * in a row (S1, bench/results/notes.md). Read the headers of @g's columns
 * in @cols of stripe @idx side by side into @blks (4 KiB a column, at
 * c x 4096) and wait for all; @res[c] is each one's result.
 */
static void rec_read_cols(struct za_engine *e, const struct za_segment *g,
			  uint32_t idx, uint64_t cols, uint8_t *blks, int *res)
{
	const struct za_stripe_layout *l = &g->st->l;
	struct rec_col_read rd[ZA_EC_MAX_WIDTH];
	unsigned c, left = 0;
	bool done = false;

	for (c = 0; c < l->width; c++) {
		if (!(cols & (1ull << c)))
			continue;
		memset(&rd[c], 0, sizeof(rd[c]));
		rd[c].req.op = ZA_DEV_OP_READ;
		rd[c].req.off_bytes =
			(uint64_t)g->zone[c] * e->m[g->member[c]].zone_bytes +
			(uint64_t)idx * l->slot_bytes;
		rd[c].req.len_bytes = 4096;
		rd[c].req.buf = blks + (size_t)c * 4096;
		rd[c].req.done = rec_col_read_done;
		rd[c].left = &left;
		rd[c].done = &done;
		left++;
		e->st.rec_hdr_reads++;
	}
	if (!left)
		return;
	/* All counted before the first is submitted: none ends early. */
	for (c = 0; c < l->width; c++)
		if (cols & (1ull << c))
			za_dev_submit(e->m[g->member[c]].dev, &rd[c].req);
	za_io_run_until(e->io, &done, 0);
	for (c = 0; c < l->width; c++)
		if (cols & (1ull << c))
			res[c] = rd[c].req.result;
}

/* Pass 2 for one stripe: its LBAs, decoding missing columns' tables. */
static int rec_lbas(struct rec_ctx *rc, const struct rec_stripe *r,
		    uint64_t *lbas)
{
	struct za_engine *e = rc->e;
	struct za_segment *g = eng_seg_find(e, r->seg_id);
	const struct za_stripe_layout *l = &g->st->l;
	uint8_t *tab[ZA_EC_MAX_WIDTH] = { 0 }, *mem;
	int res[ZA_EC_MAX_WIDTH];
	uint64_t avail = 0, want = 0, cand = 0, batch;
	unsigned c, have = 0;
	uint32_t j;
	int ret = 0;

	mem = malloc((size_t)l->width * ZA_STRIPE_LBA_BYTES);
	if (!mem)
		return -ENOMEM;
	for (c = 0; c < l->width; c++) {
		tab[c] = mem + (size_t)c * ZA_STRIPE_LBA_BYTES;
		if ((r->cols & (1ull << c)) &&
		    eng_readable(&e->m[g->member[c]]) &&
		    r->stripe_idx < g->col_upto[c])
			cand |= 1ull << c;
	}
	/*
	 * Every data column's header at once; then parity columns, as many
	 * as data columns are missing, until k tables are in hand or none
	 * is left to read - the reads of one column at a time, in order,
	 * made side by side.
	 */
	batch = cand & ((1ull << l->k) - 1);
	for (;;) {
		if (!batch) /* data columns read: parity, as many as missing */
			for (c = l->k; c < l->width; c++)
				if ((cand & (1ull << c)) &&
				    have + (unsigned)__builtin_popcountll(
						   batch) <
					    l->k)
					batch |= 1ull << c;
		if (!batch)
			break;
		rec_read_cols(e, g, r->stripe_idx, batch, rc->cblk, res);
		for (c = 0; c < l->width; c++) {
			struct za_stripe_hdr h;

			if (!(batch & (1ull << c)))
				continue;
			cand &= ~(1ull << c);
			if (res[c] ||
			    rec_hdr_check(e, g->member[c],
					  rc->cblk + (size_t)c * 4096, &h) ||
			    h.seq != r->seq)
				continue;
			memcpy(tab[c],
			       rc->cblk + (size_t)c * 4096 + ZA_STRIPE_LBA_OFF,
			       ZA_STRIPE_LBA_BYTES);
			avail |= 1ull << c;
			have++;
		}
		batch = 0;
		cand &= ~((1ull << l->k) - 1); /* data columns: read once */
	}
	for (c = 0; c < l->k; c++)
		if (!(avail & (1ull << c)))
			want |= 1ull << c;
	if (want) {
		while ((unsigned)__builtin_popcountll(avail) > l->k)
			avail &= avail - 1; /* drop the lowest: keep k */
		ret = za_ec_reconstruct(g->st->ec, ZA_STRIPE_LBA_BYTES, tab,
					avail, want);
	}
	if (!ret)
		for (c = 0; c < l->k; c++)
			for (j = 0; j < l->col_blocks; j++)
				lbas[za_stripe_block_of(l, c, j)] =
					za_get_le64(tab[c] + 8 * j);
	free(mem);
	return ret;
}

/*
 * A crash can tear a stripe: its columns are written in parallel, so some
 * may be on the drives while others never got there (or only their first
 * part: a slot larger than one I/O is written in pieces). Such a stripe
 * was never complete, so nothing flushed depends on it, but with k
 * columns or more it is readable and replayed, and its blocks become what
 * the volume serves. Left as it is, it would have fewer than p columns of
 * redundancy, and nothing would ever restore them (NEWS: seed 7016).
 * Dropping it instead is not stable:
 * the end of recovery finishes the zone, and the next recovery would find
 * the slot inside a full zone and take the stripe after all.
 *
 * So recovery completes it: every torn column of a writable member, still
 * at its original place, whose zone's write pointer stops inside or at
 * the start of the stripe's slot, is decoded from k verified columns and
 * written from the write pointer to the end of the slot (the bytes before
 * it are already there, from the same buffer). A stripe that cannot be
 * completed (fewer than k verified columns, a member not writable) is
 * left as before. Returns the number of columns written.
 */
static unsigned rec_complete(struct rec_ctx *rc, struct rec_stripe *r)
{
	struct za_engine *e = rc->e;
	struct za_segment *g = eng_seg_find(e, r->seg_id);
	const struct za_stripe_layout *l;
	uint8_t *in = NULL, *pay[ZA_EC_MAX_WIDTH] = { 0 },
		*tab[ZA_EC_MAX_WIDTH] = { 0 };
	uint64_t torn = 0, avail = 0, off[ZA_EC_MAX_WIDTH];
	struct za_stripe_hdr h;
	unsigned c, have = 0, src = 0, done = 0;
	uint32_t j;

	if (!g || r->bad)
		return 0;
	l = &g->st->l;
	for (c = 0; c < l->width; c++) {
		struct member *m = &e->m[g->member[c]];

		if (eng_col_absent(g, c) || !eng_readable(m) ||
		    g->member[c] != g->hdr_member[c] ||
		    g->zone[c] != g->hdr_zone[c] ||
		    r->stripe_idx >= g->col_upto[c])
			continue;
		off[c] = (uint64_t)g->zone[c] * m->zone_bytes +
			 (uint64_t)r->stripe_idx * l->slot_bytes;
		if (m->zwp[g->zone[c]] >= off[c] + l->slot_bytes)
			continue; /* written: present, or damaged at rest */
		if (!eng_writable(m) || m->zwp[g->zone[c]] < off[c])
			return 0; /* cannot write it, or not its turn */
		torn |= 1ull << c;
	}
	if (!torn)
		return 0;
	if (posix_memalign((void **)&in, 4096,
			   (size_t)(l->width + 1) * l->slot_bytes))
		return 0;
	/* k verified columns of this very write. */
	for (c = 0; c < l->width && have < l->k; c++) {
		struct member *m = &e->m[g->member[c]];
		uint8_t *slot = in + (size_t)c * l->slot_bytes;
		uint64_t base, o;
		bool bad = false;

		if ((torn & (1ull << c)) || !(r->cols & (1ull << c)) ||
		    eng_col_absent(g, c) || !eng_readable(m) ||
		    r->stripe_idx >= g->col_upto[c])
			continue;
		base = (uint64_t)g->zone[c] * m->zone_bytes +
		       (uint64_t)r->stripe_idx * l->slot_bytes;
		for (o = 0; o < l->slot_bytes && !bad; o += e->io_max) {
			uint64_t n = l->slot_bytes - o < e->io_max ?
					     l->slot_bytes - o :
					     e->io_max;

			bad = za_dev_io_sync(m->dev, ZA_DEV_OP_READ, base + o,
					     slot + o, n, NULL) != 0;
		}
		if (bad || za_stripe_hdr_decode(slot, &h) ||
		    !za_uuid_eq(&h.array_uuid, &e->uuid) || h.seg_id != g->id ||
		    h.stripe_idx != r->stripe_idx || h.col != c ||
		    h.seq != r->seq || eng_hdr_place_check(g, &h))
			continue;
		for (j = 0; j < l->col_blocks && !bad; j++)
			bad = za_crc32c(slot + ZA_STRIPE_HDR_BYTES +
						(uint64_t)j * 4096,
					4096) != h.blk_crc[j];
		if (bad)
			continue;
		pay[c] = slot + ZA_STRIPE_HDR_BYTES;
		tab[c] = slot + ZA_STRIPE_LBA_OFF;
		avail |= 1ull << c;
		src = c;
		have++;
	}
	if (have < l->k)
		goto out;
	for (c = 0; c < l->width; c++) {
		struct member *m = &e->m[g->member[c]];
		uint8_t *out = in + (size_t)l->width * l->slot_bytes;
		uint32_t z = g->zone[c];
		uint64_t from, o;
		int ret = 0;

		if (!(torn & (1ull << c)))
			continue;
		memset(out, 0, l->slot_bytes);
		pay[c] = out + ZA_STRIPE_HDR_BYTES;
		tab[c] = out + ZA_STRIPE_LBA_OFF;
		if (za_ec_reconstruct(g->st->ec, l->col_payload_bytes, pay,
				      avail, 1ull << c) ||
		    za_ec_reconstruct(g->st->ec, ZA_STRIPE_LBA_BYTES, tab,
				      avail, 1ull << c) ||
		    za_stripe_hdr_decode(in + (size_t)src * l->slot_bytes, &h))
			break;
		pay[c] = tab[c] = NULL;
		/* The stripe's fields, this column's own checksums, and the
		 * column at its first place (no rebuild flags). */
		h.col = (uint8_t)c;
		h.flags = 0;
		h.at_member = 0;
		h.at_zone = 0;
		for (j = 0; j < l->col_blocks; j++)
			h.blk_crc[j] = za_crc32c(out + ZA_STRIPE_HDR_BYTES +
							 (uint64_t)j * 4096,
						 4096);
		h.lba_crc =
			za_crc32c(out + ZA_STRIPE_LBA_OFF, ZA_STRIPE_LBA_BYTES);
		za_stripe_hdr_encode(&h, out);
		from = m->zwp[z];
		for (o = from - off[c]; o < l->slot_bytes && !ret;) {
			uint64_t n = l->slot_bytes - o < e->io_max ?
					     l->slot_bytes - o :
					     e->io_max;

			ret = za_dev_io_sync(m->dev, ZA_DEV_OP_WRITE,
					     off[c] + o, out + o, n, NULL);
			if (!ret)
				m->zwp[z] = off[c] + o + n;
			o += n;
		}
		if (ret) {
			za_log_warn("%s: zone %u offset %llu: completing "
				    "stripe %u of segment %llu failed: %s",
				    m->dev->path, z, (unsigned long long)from,
				    r->stripe_idx, (unsigned long long)g->id,
				    strerror(-ret));
			continue;
		}
		/* Not left open: torn zones of many segments may follow. */
		za_dev_io_sync(m->dev, ZA_DEV_OP_CLOSE_ZONE,
			       (uint64_t)z * m->zone_bytes, NULL, 0, NULL);
		r->cols |= 1ull << c;
		done++;
		za_log_info("recovery: segment %llu stripe %u: column %u, torn "
			    "by the crash, completed on member %u zone %u",
			    (unsigned long long)g->id, r->stripe_idx, c,
			    g->member[c], z);
	}
out:
	free(in);
	return done;
}

/* Columns whose rebuild was interrupted go back to their lost place. */
static void rec_drop_partial(struct za_engine *e)
{
	struct za_segment *g;
	unsigned i, c;

	for (i = 0; i < e->hash_size; i++)
		for (g = e->hash[i]; g; g = g->hnext)
			for (c = 0; c < g->st->l.width; c++) {
				struct member *m = &e->m[g->member[c]];

				if (g->col_upto[c])
					continue;
				za_log_info("recovery: segment %llu column %u: "
					    "unfinished rebuild on member %u "
					    "zone %u dropped",
					    (unsigned long long)g->id, c,
					    g->member[c], g->zone[c]);
				if (m->zkind[g->zone[c]] == Z_USED)
					m->zkind[g->zone[c]] = Z_UNCLAIMED;
				g->member[c] = g->hdr_member[c];
				g->zone[c] = g->hdr_zone[c];
				g->col_upto[c] = UINT32_MAX;
			}
}

/* Every zone in use on a readable member is claimed by nothing yet. */
static void rec_unclaim(struct za_engine *e)
{
	unsigned mi;
	uint32_t z;

	for (mi = 0; mi < e->nr_members; mi++) {
		struct member *m = &e->m[mi];

		if (!eng_readable(m))
			continue;
		for (z = 0; z < m->nr_zones; z++)
			if (m->zkind[z] == Z_USED)
				m->zkind[z] = Z_UNCLAIMED;
	}
}

/*
 * A segment whose every header found was in a copy dropped as unfinished
 * is gone: the partial copy outlived the segment's release. A release
 * resets the places columns hold, not a copy under way, and an aborted
 * copy's zone is reset only if its drive answers; zarrayd killed first,
 * or the drive out of reach, and the zone keeps slots naming the
 * segment. Kept, such a segment claims first places that newer segments
 * have taken since, and releasing it again resets their zones (NEWS:
 * seed 840013). A segment with any header
 * at a place it still holds, its first place or a finished copy's, stays.
 * So does one with k or more of its places on drives not read (missing
 * or failed): what those hold is not known, and it may still be whole.
 * With p + 1 places or more read and none holding it, fewer than k of its
 * columns can exist: nothing readable is lost by dropping it.
 */
static void rec_drop_orphans(struct za_engine *e)
{
	struct za_segment *g, **gp;
	unsigned i, c, seen;
	bool held;

	for (i = 0; i < e->hash_size; i++)
		for (gp = &e->hash[i]; (g = *gp);) {
			held = g->rec_home;
			for (c = 0, seen = 0; c < g->st->l.width && !held;
			     c++) {
				held = g->member[c] != g->hdr_member[c] ||
				       g->zone[c] != g->hdr_zone[c];
				seen += !eng_col_absent(g, c) &&
					eng_readable(&e->m[g->member[c]]);
			}
			if (held || seen <= g->st->l.p) {
				gp = &g->hnext;
				continue;
			}
			za_log_warn("recovery: segment %llu found only in "
				    "unfinished copies: released before the "
				    "crash; dropped",
				    (unsigned long long)g->id);
			rec_seg_drop(e, g); /* *gp is its successor now */
		}
}

/*
 * Which zones are in use is decided by the places columns hold now, once
 * unfinished copies and released segments are dropped. The scan claims
 * every zone a header names, and every header names each column's first
 * place, moved or not. A column moved off a member that stayed in service
 * (a replace stopped, its old drive back) had its old zone reset and
 * given back when the copy was flushed, and a restart claimed it again,
 * empty, for as long as the segment lived: each restart after such moves
 * took more of that drive's zones (test_moved_old_zone_free_after_restart;
 * NEWS: seed 840013). And a copy killed
 * after its last slot but before the old zone was reset left the old zone
 * holding the segment's slots, claimed, so never reset: after the
 * segment's release it brought the segment back. Zones claimed by the
 * scan and not held now go back to unclaimed: reset and free at the end
 * of recovery.
 */
static void rec_claim(struct za_engine *e)
{
	struct za_segment *g;
	unsigned i, c;

	rec_unclaim(e);
	for (i = 0; i < e->hash_size; i++)
		for (g = e->hash[i]; g; g = g->hnext)
			for (c = 0; c < g->st->l.width; c++) {
				struct member *m = &e->m[g->member[c]];

				if (eng_col_absent(g, c) || !m->zkind)
					continue;
				if (m->zkind[g->zone[c]] == Z_FREE)
					m->free_zones--;
				if (m->zkind[g->zone[c]] == Z_FREE ||
				    m->zkind[g->zone[c]] == Z_UNCLAIMED)
					m->zkind[g->zone[c]] = Z_USED;
			}
}

/*
 * Columns whose place is an empty zone hold nothing: count them lost. A
 * column moved off a member in service leaves its old zone reset once the
 * copy is flushed; if the copy's member fails later, nothing reads it at
 * the next assembly and every header of the segment still names the old
 * zone as the column's first place. Read there, each read fails with
 * ENODATA and counts against the member that now holds the zone, until
 * it is failed for read errors (NEWS: seed 840022). Absent, the column
 * is decoded on reads and restored by the rebuild. A torn column on a
 * writable member was completed before this (rec_complete()), so an empty
 * zone here is one that cannot be written or had nothing to complete.
 * Only segments with a stripe found whole enough to read (k columns): a
 * segment whose every stripe was torn holds nothing anyone was told is
 * written, and columns made absent there could count as more than p
 * lost in a segment that lost nothing.
 */
static void rec_drop_vanished(struct za_engine *e, const struct rec_ctx *rc)
{
	struct za_segment *g;
	unsigned i, c;
	size_t j;

	for (j = 0; j < rc->nr; j++) {
		const struct rec_stripe *r = &rc->st[j];

		g = eng_seg_find(e, r->seg_id);
		if (g && !r->bad &&
		    (unsigned)__builtin_popcountll(r->cols) >= g->st->l.k)
			g->rec_readable = true;
	}
	for (i = 0; i < e->hash_size; i++)
		for (g = e->hash[i]; g; g = g->hnext)
			for (c = 0; c < g->st->l.width && g->rec_readable;
			     c++) {
				struct member *m = &e->m[g->member[c]];
				uint32_t z = g->zone[c];

				if (eng_col_absent(g, c) || !eng_readable(m) ||
				    m->zwp[z] > (uint64_t)z * m->zone_bytes)
					continue;
				za_log_warn("recovery: segment %llu column %u: "
					    "member %u zone %u is empty; the "
					    "column is lost",
					    (unsigned long long)g->id, c,
					    g->member[c], z);
				if (m->zkind[z] == Z_USED)
					m->zkind[z] = Z_UNCLAIMED;
				g->member[c] = ZA_STRIPE_MEMBER_ABSENT;
				g->zone[c] = 0;
				g->col_upto[c] = UINT32_MAX;
			}
}

/*
 * Columns whose place holds another segment's column: count them lost.
 * The case of rec_drop_vanished(), one step further: a column moved off X
 * onto Y by a replace that was then stopped, X back in service with the
 * old zone reset and given back, and taken since by a new segment; then Y
 * removed (every segment it held dead by then, though not yet released)
 * or failed. After a restart nothing is read from Y and the other
 * columns' headers name X's old zone as the column's first place - a zone
 * now full of the new segment's column, not empty. Taken as the old
 * segment's, its reads fail on X until X is failed for read errors, and
 * releasing the old segment resets the zone under the new one (NEWS:
 * seed 7033). So before pass 2 - which reads and completes columns at
 * their places - a column of which pass 1 found no header anywhere, at a
 * place whose first slot holds a valid header of another column, is
 * detached; the zone stays its owner's. @rc->st is merged and sorted by
 * segment here.
 */
static void rec_drop_foreign(struct rec_ctx *rc)
{
	struct za_engine *e = rc->e;
	struct za_stripe_hdr h;
	size_t i = 0, j;

	while (i < rc->nr) {
		struct za_segment *g = eng_seg_find(e, rc->st[i].seg_id);
		uint64_t found = 0;
		unsigned c;

		for (j = i; j < rc->nr && rc->st[j].seg_id == rc->st[i].seg_id;
		     j++)
			found |= rc->st[j].cols;
		i = j;
		for (c = 0; g && c < g->st->l.width; c++) {
			struct member *m;
			uint32_t z = g->zone[c];
			uint64_t start;

			if (eng_col_absent(g, c) || (found >> c) & 1)
				continue;
			m = &e->m[g->member[c]];
			start = (uint64_t)z * m->zone_bytes;
			if (!eng_readable(m) || m->zwp[z] <= start ||
			    rec_read_hdr(rc, g->member[c], start, &h) ||
			    hdr_at_zone(&h) != z ||
			    (h.seg_id == g->id && h.col == c))
				continue; /* empty (see below), or not known */
			za_log_warn("recovery: segment %llu column %u: member "
				    "%u zone %u holds segment %llu column %u; "
				    "the column is lost",
				    (unsigned long long)g->id, c, g->member[c],
				    z, (unsigned long long)h.seg_id, h.col);
			g->member[c] = ZA_STRIPE_MEMBER_ABSENT;
			g->zone[c] = 0;
			g->col_upto[c] = UINT32_MAX;
		}
	}
}

/*
 * The write pointer of every zone of every readable member, for this
 * recovery only: the engine keeps none (a FULL zone's is its capacity,
 * as finishing a zone moves it there).
 */
static int rec_load_wps(struct za_engine *e)
{
	struct za_zone *z;
	unsigned mi, nr;
	int ret;

	for (mi = 0; mi < e->nr_members; mi++) {
		struct member *m = &e->m[mi];

		za_progress_set(e->progress, "reading zone reports", mi,
				e->nr_members);
		if (!eng_readable(m) || !m->zkind || m->zwp)
			continue; /* kept from the start (keep_wps) */
		ret = za_dev_report_all(m->dev, &z, &nr);
		if (!ret && nr != m->nr_zones) {
			free(z);
			ret = -EIO;
		}
		if (ret) {
			za_log_err("%s: zone report failed: %s", m->dev->path,
				   strerror(-ret));
			return ret;
		}
		ret = eng_member_wps(m, z, nr);
		free(z);
		if (ret)
			return ret;
	}
	return 0;
}

static void rec_free_wps(struct za_engine *e)
{
	unsigned mi;

	for (mi = 0; mi < e->nr_members; mi++) {
		eng_member_wps_free(&e->m[mi]);
	}
	e->keep_wps = false; /* members added from now on keep none */
}

/*
 * The places the loaded table gives to segments that no longer hold them
 * (za_engine_table_check()) and are empty now wait in quarantine until a
 * newer table is live: a crash before then brings this same table back,
 * and a zone it names must hold its segment or nothing (design.md 9.6).
 * Epoch 0: the first table taken from now on frees them.
 */
static void rec_quarantine(struct za_engine *e)
{
	size_t i;

	for (i = 0; i < e->rec_quar.nr; i++) {
		const struct quar_zone *q = &e->rec_quar.v[i];
		struct member *m = &e->m[q->member];

		if (!eng_readable(m) || !m->zkind ||
		    m->zkind[q->zone] != Z_FREE)
			continue;
		/* Without memory to list it: in use until the next
		 * assembly, which is safe too. */
		if (!eng_quar_add(e, q->member, q->zone, 0))
			m->zkind[q->zone] = Z_USED;
		m->free_zones--;
	}
	eng_quar_clear(&e->rec_quar);
}

int za_engine_recover_from(
	struct za_engine *e, int (*start)(void *priv, uint64_t *min_seq),
	int (*fn)(void *priv, const struct za_recovered_stripe *rs), void *priv)
{
	struct rec_ctx rc = { .e = e };
	uint64_t *lbas = NULL, min_seq = 0, to_scan;
	unsigned completed = 0;
	uint32_t maxdb = 0;
	size_t i, o;
	unsigned mi, si;
	uint32_t z;
	int ret = 0;

	if (posix_memalign((void **)&rc.blk, 4096, 4096))
		return -ENOMEM;
	if (posix_memalign((void **)&rc.cblk, 4096,
			   (size_t)ZA_EC_MAX_WIDTH * 4096)) {
		free(rc.blk);
		return -ENOMEM;
	}
	e->rec = &rc;
	e->st.rec_zones_scanned = e->st.rec_hdr_reads = 0;
	e->st.rec_hdr_ahead = e->st.rec_hdr_ahead_unused = 0;
	e->st.rec_table_segs = 0;
	ret = rec_load_wps(e);
	if (ret)
		goto out;
	/* Pass 1: every readable member, every zone that holds something,
	 * claimed when a header (of any column) names the zone. */
	rec_unclaim(e);
	/*
	 * The owner's plan first: with a table adopted, pass 1 reads only
	 * the zones it does not account for (design.md 9.6 item 4).
	 */
	if (e->rec_plan) {
		e->rec_lazy = true;
		za_progress_set(e->progress, "loading the checkpoint", 0, 0);
		ret = e->rec_plan(priv);
		if (ret)
			goto out;
	}
	/* The zones pass 1 reads: those rec_unclaim() just marked. */
	for (mi = 0, to_scan = 0; mi < e->nr_members; mi++)
		for (z = 0; eng_readable(&e->m[mi]) && z < e->m[mi].nr_zones;
		     z++)
			to_scan += e->m[mi].zkind[z] == Z_UNCLAIMED;
	za_progress_set(e->progress, "scanning zones", 0, to_scan);
	ret = rec_read_ahead(&rc);
	for (mi = 0; mi < e->nr_members && !ret; mi++) {
		struct member *m = &e->m[mi];

		if (!eng_readable(m))
			continue;
		for (z = 0; z < m->nr_zones && !ret; z++)
			if (rec_zone_scanned(e, m, z)) {
				ret = rec_scan_zone(&rc, mi, z);
				if (e->progress)
					e->progress->done++;
			}
	}
	if (!ret && e->rec_tab)
		ret = rec_scan_open(&rc);
	ra_free(rc.ra);
	rc.ra = NULL;
	if (ret)
		goto out;
	if (e->rec_tab)
		rec_drop_released(e);
	rec_drop_partial(e);
	rec_drop_orphans(e);
	rec_claim(e);
	/* One record per stripe: merge the columns found. */
	if (rc.nr) /* qsort(NULL, 0) is undefined */
		qsort(rc.st, rc.nr, sizeof(*rc.st), rec_cmp_pos);
	for (i = 0, o = 0; i < rc.nr; i++) {
		if (o && rc.st[o - 1].seg_id == rc.st[i].seg_id &&
		    rc.st[o - 1].stripe_idx == rc.st[i].stripe_idx) {
			struct rec_stripe *p = &rc.st[o - 1];

			p->bad |= p->seq != rc.st[i].seq ||
				  p->nr_blocks != rc.st[i].nr_blocks ||
				  p->kind != rc.st[i].kind;
			p->cols |= rc.st[i].cols;
			continue;
		}
		rc.st[o++] = rc.st[i];
	}
	rc.nr = o;
	rec_drop_foreign(&rc);
	/* Groups learn how far they were written. */
	rec_learn(&rc, 0);
	for (si = 0; si < e->nr_streams; si++)
		if (e->streams[si].l.data_blocks > maxdb)
			maxdb = e->streams[si].l.data_blocks;
	lbas = malloc((size_t)maxdb * sizeof(*lbas));
	if (!lbas) {
		ret = -ENOMEM;
		goto out;
	}
	/* Pass 2, in the order things were written. The owner may know the
	 * drives up to a sequence number already (a checkpoint it reads now,
	 * the tables being rebuilt): older stripes are left alone. */
	if (rc.nr)
		qsort(rc.st, rc.nr, sizeof(*rc.st), rec_cmp_seq);
	if (!e->rec_tab)
		za_progress_set(e->progress, "loading the checkpoint", 0, 0);
	if (start)
		ret = start(priv, &min_seq);
	za_progress_set(e->progress, "replaying stripes", 0, rc.nr);
	for (i = 0; i < rc.nr && !ret; i++) {
		struct rec_stripe *r = &rc.st[i];
		struct za_recovered_stripe rs = { 0 };
		struct za_segment *g = eng_seg_find(e, r->seg_id);

		if (e->progress)
			e->progress->done = i;

		completed += rec_complete(&rc, r);
		if (r->seq <= min_seq)
			continue;
		if (r->bad || !g ||
		    (unsigned)__builtin_popcountll(r->cols) < g->st->l.k) {
			za_log_info("recovery: segment %llu stripe %u skipped "
				    "(%u columns found)",
				    (unsigned long long)r->seg_id,
				    r->stripe_idx,
				    (unsigned)__builtin_popcountll(r->cols));
			continue;
		}
		if (rec_lbas(&rc, r, lbas)) {
			za_log_warn("recovery: segment %llu stripe %u: LBA "
				    "table unreadable; skipped",
				    (unsigned long long)r->seg_id,
				    r->stripe_idx);
			continue;
		}
		rs.stream = r->stream;
		rs.kind = r->kind;
		rs.seq = r->seq;
		rs.group_id = r->group_id;
		rs.group_pos = r->group_pos;
		rs.nr_blocks = r->nr_blocks;
		rs.lbas = lbas;
		ret = fn(priv, &rs);
	}
	if (ret)
		goto out;
	/* Completed columns are durable before their zones are finished. */
	if (completed) {
		for (mi = 0; mi < e->nr_members; mi++)
			if (eng_writable(&e->m[mi]))
				za_dev_io_sync(e->m[mi].dev, ZA_DEV_OP_FLUSH, 0,
					       NULL, 0, NULL);
		za_log_info("recovery: %u torn stripe columns completed",
			    completed);
	}
	rec_drop_vanished(e, &rc);
	za_progress_set(e->progress, "resetting and finishing zones", 0, 0);
	/* Zones nobody claims are garbage: reset them for reuse. */
	for (mi = 0; mi < e->nr_members; mi++) {
		struct member *m = &e->m[mi];

		for (z = 0; z < m->nr_zones; z++) {
			if (m->zkind[z] != Z_UNCLAIMED)
				continue;
			/*
			 * Reset where releases reset (eng_resettable(): a
			 * draining member too); keep the rest.
			 */
			m->zkind[z] = Z_USED;
			if (!eng_resettable(m) ||
			    za_dev_io_sync(m->dev, ZA_DEV_OP_RESET,
					   (uint64_t)z * m->zone_bytes, NULL, 0,
					   NULL))
				continue;
			m->zkind[z] = eng_zcap(m, z) >= 8192 ? Z_FREE : Z_BAD;
			m->free_zones += m->zkind[z] == Z_FREE;
		}
		eng_member_zstats(m);
	}
	rec_quarantine(e);
	/* Recovered segments take no more stripes: finish partial zones. */
	for (i = 0; i < e->hash_size; i++) {
		struct za_segment *g;

		for (g = e->hash[i]; g; g = g->hnext) {
			unsigned c;

			for (c = 0; c < g->st->l.width; c++) {
				struct member *m = &e->m[g->member[c]];
				uint32_t zz = g->zone[c];

				if (eng_writable(m) &&
				    m->zwp[zz] < (uint64_t)zz * m->zone_bytes +
							 eng_zcap(m, zz))
					za_dev_io_sync(m->dev, ZA_DEV_OP_FINISH,
						       (uint64_t)zz *
							       m->zone_bytes,
						       NULL, 0, NULL);
			}
		}
	}
	if (rc.max_seq >= e->seq)
		e->seq = rc.max_seq + 1;
	if (rc.max_seg >= e->next_seg_id)
		e->next_seg_id = rc.max_seg + 1;
	if (rc.max_group >= e->next_group_id)
		e->next_group_id = rc.max_group + 1;
	if (e->next_group_id < e->next_seg_id)
		e->next_group_id = e->next_seg_id;
	za_log_info("recovery: %zu stripes found, next sequence %llu; %llu "
		    "zones scanned, %llu headers read (%llu of those used "
		    "read ahead), %llu segments from the engine table",
		    rc.nr, (unsigned long long)e->seq,
		    (unsigned long long)e->st.rec_zones_scanned,
		    (unsigned long long)e->st.rec_hdr_reads,
		    (unsigned long long)e->st.rec_hdr_ahead,
		    (unsigned long long)e->st.rec_table_segs);
out:
	e->rec = NULL;
	e->rec_tab = e->rec_lazy = false;
	free(e->rec_open);
	e->rec_open = NULL;
	e->rec_nr_open = 0;
	eng_quar_clear(&e->rec_quar);
	e->progress = NULL; /* the assembly's: not kept past it */
	rec_free_wps(e);
	free(lbas);
	free(rc.st);
	free(rc.blk);
	free(rc.cblk);
	return ret;
}
