// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * engine-rebuild.c - one column of one segment restored into a free zone
 * of another member: the replacement chosen (room for segments, rebuild
 * queues, load), each stripe decoded, copied or written as a hole, in
 * order, then the zone finished and the new place committed, and after a
 * move the old zone reset. It does not choose which columns to restore
 * nor how many at once: rebuild.c does, from za_engine_degraded(), and
 * scrub.c for the columns it repairs.
 */
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "container.h"
#include "crash.h"
#include "crc.h"
#include "ec.h"
#include "log.h"
#include "engine-int.h"

/* ---- rebuild: a lost column into a replacement zone ---- */

/*
 * A column on a lost member (failed, missing, removed) is rebuilt into a
 * free zone of a writable member outside the segment: stripes 0..nr-1 are
 * written in order at the zone's write pointer, each either decoded from
 * k verified columns (a live stripe) or a hole header and zeros (a dead
 * one: never read nor decoded). Every slot's header keeps the segment's
 * first placement and says where the column is now (F_RELOCATED); the
 * last one says the copy is complete (F_COMPLETE), so recovery can tell a
 * finished copy from an interrupted one. Only when every slot is written
 * does the segment read the column from its new place.
 */

/* One stripe of a column rebuild. */
struct rb_ent {
	struct za_col_rebuild *cr;
	uint32_t stripe;
	bool busy, live, ready;
	uint8_t *in; /* width slots: the columns read */
	uint8_t *out; /* the slot to write */
	struct za_dev_req *reqs; /* width * parts reads */
	unsigned col_pending[ZA_EC_MAX_WIDTH];
	uint16_t col_member[ZA_EC_MAX_WIDTH]; /* where each read went */
	uint64_t tried, good;
	unsigned outstanding; /* columns being read */
	struct za_dev_req *wreqs; /* parts */
	unsigned wpending;
	int werr;
};

struct rb_priv {
	struct za_engine *e;
	struct za_segment *g;
	struct member *dst;
	unsigned parts;
	uint32_t part_bytes; /* RB_IO_BYTES, or less if a member wants */
	uint32_t next_start, next_write, written;
	uint32_t wslots; /* counted in dst->rb_wslots */
	bool bound; /* rb_bind() ran: the replacement member is final */
	unsigned window;
	struct rb_ent *ent;
	struct za_col_rebuild *cr_back;
	bool aborting, ended;
	bool settling; /* the zone finish / flush / resets are under way */
	bool committed; /* the column reads from its new place */
	unsigned step; /* RB_STEP_*: what rp->fin is doing */
	unsigned old_member; /* where a moved column was */
	uint32_t old_zone;
	int err;
	struct za_io_defer defer;
	bool kick_pending; /* defer queued: rp outlives rb_end() until it runs */
	struct za_dev_req fin;
};

static uint32_t take_zone_min(struct member *m, uint64_t min_bytes)
{
	uint32_t i, z;

	for (i = 0; i < m->nr_zones; i++) {
		z = (m->hint + i) % m->nr_zones;
		if (m->zkind[z] == Z_FREE && eng_zcap(m, z) >= min_bytes) {
			m->zkind[z] = Z_USED;
			m->free_zones--;
			m->hint = z + 1;
			return z;
		}
	}
	return UINT32_MAX;
}

static bool has_zone_min(const struct member *m, uint64_t min_bytes)
{
	uint32_t i, z;

	if (!m->free_zones)
		return false;
	/* From the hint, as take_zone_min() looks: the zones before it are
	 * mostly in use, and a pass asks this of every member per column. */
	for (i = 0; i < m->nr_zones; i++) {
		z = (m->hint + i) % m->nr_zones;
		if (m->zkind[z] == Z_FREE && eng_zcap(m, z) >= min_bytes)
			return true;
	}
	return false;
}

/*
 * A member's rebuild work in this pass, in slots x (width - 1): the slots
 * read from it or written to it so far, and the reads planned but not
 * given yet (a peer of a degraded segment serves about k of its width - 1
 * readable columns). A pass queues its reads on every member at once and
 * a drive serves in order, so a member's total is about when it is done:
 * evening the totals out is what brings a pass's end near the limit.
 */
static uint64_t rb_load(const struct za_segment *g, const struct member *m)
{
	const struct za_stripe_layout *l = &g->st->l;

	return m->rb_plan * l->k + m->rb_pass_slots * (l->width - 1);
}

/*
 * May a rebuild column take one more of @m's open zones? Not past what
 * the streams need: a user write fails when its stream cannot open a
 * group, and a stream holds a zone per member while it writes and one more
 * while its full group rolls over to the next. So a rebuild leaves two per
 * stream, or, with fewer than that to share, takes one at most (NEWS:
 * seeds 7007, 7017).
 */
static bool rb_budget_ok(const struct za_engine *e, const struct member *m)
{
	unsigned keep = 2 * e->nr_streams;

	if (m->active >= m->limit)
		return false;
	return m->limit - m->active > keep || !m->rb_writes;
}

/* A member's rebuild slots queued or in service: reads and writes. */
static uint64_t rb_queue(const struct member *m)
{
	return (uint64_t)m->rb_reads + m->rb_wslots;
}

/*
 * What a zone taken outside any segment - a rebuild's replacement - costs
 * the segments the data stream can still open (za_engine_space()'s
 * free_segs, s). Taken from member i, s stays unless all of i's free zones
 * count in it (free_i <= s) and sum(min(free_j, s)) has no slack above
 * s x width (eng_segs_from()). With the free zones skewed - a new drive beside
 * nearly full ones - columns placed by queue length alone can take the
 * last zones that k+p distinct members need for a segment, and then
 * neither writes nor GC can go on (NEWS: seed 7025). So a column goes
 * where it costs no segment whenever some member can take it so.
 * Computed as if @plus had one free zone more and @minus one less
 * (-1: none), for a column that would move; without memory for the
 * counts, every member is taken to cost nothing, as before this rule.
 */
struct room {
	uint64_t segs; /* free_segs */
	bool slack; /* a zone from any member leaves segs as it is */
};

static void room_of(const struct za_engine *e, int plus, int minus,
		    struct room *r)
{
	uint64_t *fc = calloc(e->nr_members ? e->nr_members : 1, sizeof(*fc));
	uint64_t sum = 0;
	unsigned i, n = 0, w;

	r->segs = 0;
	r->slack = true;
	if (!fc)
		return;
	for (i = 0; i < e->nr_members; i++) {
		if (!eng_writable(&e->m[i]))
			continue;
		fc[n] = e->m[i].free_zones;
		if ((int)i == plus)
			fc[n]++;
		if ((int)i == minus && fc[n])
			fc[n]--;
		n++;
	}
	w = eng_seg_width(&e->streams[0].l, n);
	r->segs = eng_segs_from(fc, n, w);
	for (i = 0; i < n; i++)
		sum += fc[i] < r->segs ? fc[i] : r->segs;
	r->slack = sum > r->segs * w;
	free(fc);
}

static bool room_kept(const struct room *r, const struct member *m)
{
	return r->slack || m->free_zones > r->segs;
}

/*
 * The replacement member: writable, outside the segment, with a zone long
 * enough and open-zone budget; one whose zone costs no openable segment
 * (struct room) before one whose zone does; then with @by_queue, the one
 * with the shortest rebuild queue (whose queue a write joins soonest: a
 * drive serves in order); then the one with least work in the pass
 * (rb_load()), then the one with most free zones, so that all survivors
 * share the work. @room (NULL: not wanted): the room before the pick,
 * for a caller that weighs a move against it.
 */
static int rb_pick(struct za_engine *e, const struct za_segment *g,
		   uint64_t need, int want, bool by_queue, struct room *room,
		   unsigned *out)
{
	unsigned i, c, best = UINT_MAX;
	bool budget = false, best_kept = false;
	struct room here;

	if (!room)
		room = &here;
	room_of(e, -1, -1, room);
	for (i = 0; i < e->nr_members; i++) {
		struct member *m = &e->m[i];
		bool in = false, kept;

		if (want >= 0 && i != (unsigned)want)
			continue;
		if (!eng_writable(m))
			continue;
		for (c = 0; c < g->st->l.width; c++)
			in |= g->member[c] == i || g->hdr_member[c] == i;
		if (in || !has_zone_min(m, need))
			continue;
		if (!rb_budget_ok(e, m)) {
			budget = true;
			continue;
		}
		kept = room_kept(room, m);
		if (best == UINT_MAX || kept != best_kept) {
			if (best == UINT_MAX || kept) {
				best = i;
				best_kept = kept;
			}
			continue;
		}
		if (by_queue && rb_queue(m) != rb_queue(&e->m[best])) {
			if (rb_queue(m) < rb_queue(&e->m[best]))
				best = i;
			continue;
		}
		if (rb_load(g, m) < rb_load(g, &e->m[best]) ||
		    (rb_load(g, m) == rb_load(g, &e->m[best]) &&
		     eng_better(e, i, best)))
			best = i;
	}
	if (best == UINT_MAX)
		return budget ? -EAGAIN : -ENOSPC;
	*out = best;
	return 0;
}

static void rb_pump(struct za_col_rebuild *cr);

/*
 * A rebuild's slot I/O, as requests of at most RB_IO_BYTES at
 * ZA_DEV_PRIO_LOW. A drive serves one request at a time and does not
 * preempt: a user write arriving while a rebuild request is in service
 * waits for the rest of it, so that request must be short next to the
 * user's own (16 KiB is 16 ms at 1 MB/s, a few at real drive speeds); a
 * real drive's scheduler merges the pieces back while nothing else waits.
 */
#define RB_IO_BYTES (16u << 10)

static void rb_reqs(const struct rb_priv *rp, struct za_dev_req *reqs,
		    enum za_dev_op op, uint64_t off_bytes, uint8_t *buf,
		    void (*done)(struct za_dev_req *req), void *priv)
{
	uint64_t len = rp->g->st->l.slot_bytes;
	unsigned i;

	for (i = 0; i < rp->parts; i++) {
		struct za_dev_req *r = &reqs[i];
		uint64_t po = (uint64_t)i * rp->part_bytes;

		memset(r, 0, sizeof(*r));
		r->op = op;
		r->off_bytes = off_bytes + po;
		r->len_bytes = len - po > rp->part_bytes ? rp->part_bytes :
							   len - po;
		r->buf = buf + po;
		r->done = done;
		r->priv = priv;
		r->prio = ZA_DEV_PRIO_LOW;
	}
}

static void rb_end(struct za_col_rebuild *cr)
{
	struct rb_priv *rp = cr->priv_eng;
	struct za_engine *e = rp->e;
	struct za_segment *g = rp->g;
	struct group *grp = g->grp;
	unsigned i;
	int err = rp->err;

	rp->ended = true;
	for (i = 0; i < rp->window; i++) {
		free(rp->ent[i].in);
		free(rp->ent[i].out);
		free(rp->ent[i].reqs);
		free(rp->ent[i].wreqs);
	}
	free(rp->ent);
	g->rb_cols &= ~(1ull << cr->col);
	rp->dst->rb_wslots -= rp->wslots;
	rp->wslots = 0;
	if (!rp->committed) {
		rp->dst->rb_writes--;
		rp->dst->active--;
	}
	if (!err)
		za_log_info("segment %llu column %u rebuilt on member %u zone "
			    "%u: %u stripes (%u copied), %u dead skipped",
			    (unsigned long long)g->id, cr->col, cr->member,
			    cr->zone, cr->rebuilt + cr->copied, cr->copied,
			    cr->holes);
	e->rebuilds--;
	grp->rebuilding--;
	if (--grp->readers == 0 && grp->releasing && !grp->rel_reqs)
		eng_group_release_start(e, grp);
	/* Its open zone is free again: a stream may be waiting for one. */
	eng_pump(e);
	if (!rp->kick_pending) /* else rb_kick_later() frees it */
		free(rp);
	cr->priv_eng = NULL;
	cr->done(cr, err);
}

enum {
	RB_STEP_RESET_DST = 1,
	RB_STEP_FINISH,
	RB_STEP_FLUSH,
	RB_STEP_RESET_OLD
};

static void rb_fin_done(struct za_dev_req *req);

static void rb_fin_submit(struct za_col_rebuild *cr, unsigned step,
			  struct member *m, enum za_dev_op op, uint32_t zone)
{
	struct rb_priv *rp = cr->priv_eng;

	memset(&rp->fin, 0, sizeof(rp->fin));
	rp->step = step;
	rp->fin.op = op;
	rp->fin.off_bytes =
		op == ZA_DEV_OP_FLUSH ? 0 : (uint64_t)zone * m->zone_bytes;
	rp->fin.done = rb_fin_done;
	rp->fin.priv = cr;
	za_dev_submit(m->dev, &rp->fin);
}

/* The copy is complete: reads use the new place from now on. */
static void rb_commit(struct za_col_rebuild *cr)
{
	struct rb_priv *rp = cr->priv_eng;
	struct za_segment *g = rp->g;

	g->member[cr->col] = (uint16_t)cr->member;
	g->zone[cr->col] = cr->zone;
	g->col_upto[cr->col] = cr->nr_stripes;
	rp->dst->rb_writes--;
	rp->dst->active--;
	rp->committed = true;
}

/*
 * After a committed move off a member still in service (a scrub repair,
 * a drain), its old zone is garbage: once the new copy is flushed, reset
 * it (eng_resettable() says why a draining member's too). A lost member's
 * zones stay as they are: nothing reads them. The new place need only be
 * in service, not writable: one that started draining meanwhile (`zarray
 * remove` of a replace's new drive, the old one back in service) holds
 * the copy all the same, and an old zone kept on a member in service
 * leaked, its stale slots still naming the segment for recovery to take
 * up after the segment was released (test_move_dst_drained).
 */
static void rb_after_commit(struct za_col_rebuild *cr)
{
	struct rb_priv *rp = cr->priv_eng;
	struct member *old = &rp->e->m[rp->old_member];

	if (cr->move && eng_resettable(old) && eng_readable(rp->dst) &&
	    rp->old_member != cr->member) {
		rb_fin_submit(cr, RB_STEP_FLUSH, rp->dst, ZA_DEV_OP_FLUSH, 0);
		return;
	}
	rb_end(cr);
}

static void rb_fin_done(struct za_dev_req *req)
{
	struct za_col_rebuild *cr = req->priv;
	struct rb_priv *rp = cr->priv_eng;
	struct member *old = &rp->e->m[rp->old_member];

	if (req->result)
		za_log_warn("%s: zone %u: %s failed: %s", req->dev->path,
			    rp->step == RB_STEP_RESET_OLD ? rp->old_zone :
							    cr->zone,
			    rp->step == RB_STEP_FINISH ? "finish" :
			    rp->step == RB_STEP_FLUSH  ? "flush" :
							 "reset",
			    strerror(-req->result));
	switch (rp->step) {
	case RB_STEP_RESET_DST:
		if (!req->result)
			eng_zone_give_back(rp->dst,
					   cr->zone); /* copy dropped */
		break;
	case RB_STEP_FINISH:
		/* A FINISH that fails only leaves the zone open. */
		rb_commit(cr);
		rb_after_commit(cr);
		return;
	case RB_STEP_FLUSH:
		if (req->result || !eng_resettable(old))
			break; /* keep the old zone: nothing is lost */
		rb_fin_submit(cr, RB_STEP_RESET_OLD, old, ZA_DEV_OP_RESET,
			      rp->old_zone);
		return;
	case RB_STEP_RESET_OLD:
		if (!req->result)
			eng_zone_release(rp->e, rp->g, rp->old_member,
					 rp->old_zone);
		break;
	}
	rb_end(cr);
}

/* Everything written (or given up): finish the zone, then end. */
static void rb_settle(struct za_col_rebuild *cr)
{
	struct rb_priv *rp = cr->priv_eng;
	const struct za_stripe_layout *l = &rp->g->st->l;
	unsigned i;

	if (rp->settling)
		return;
	for (i = 0; i < rp->window; i++) {
		struct rb_ent *en = &rp->ent[i];

		/* Given up: decoded stripes that will not be written. */
		if (rp->err && en->busy && !en->wpending && !en->outstanding)
			en->busy = false;
		if (en->busy)
			return;
	}
	if (!rp->err && rp->written < cr->nr_stripes)
		return;
	rp->settling = true;
	if (rp->err && eng_readable(rp->dst) && rp->next_write) {
		/*
		 * An unfinished copy is of no use: give the zone back, on a
		 * draining member too - kept, its slots would name the
		 * segment after its release, and the member may come back
		 * into service (a stopped replace's old drive).
		 */
		rb_fin_submit(cr, RB_STEP_RESET_DST, rp->dst, ZA_DEV_OP_RESET,
			      cr->zone);
		return;
	}
	if (rp->err) {
		/*
		 * Nothing was ever written to it: the zone is as empty as
		 * when it was taken, free again without a reset. Kept, it
		 * stayed used until a restart; an abort before the first
		 * write (a pause, za_rebuild_pause()) lost a zone so.
		 */
		if (!rp->next_write)
			eng_zone_give_back(rp->dst, cr->zone);
		rb_end(cr);
		return;
	}
	/*
	 * Finish the copy's zone on a draining member too: left open, it
	 * held one of the drive's open zones, and the member may come back
	 * into service (a stopped replace's old drive).
	 */
	if (eng_readable(rp->dst) && (uint64_t)cr->nr_stripes * l->slot_bytes <
					     eng_zcap(rp->dst, cr->zone)) {
		rb_fin_submit(cr, RB_STEP_FINISH, rp->dst, ZA_DEV_OP_FINISH,
			      cr->zone);
		return;
	}
	rb_commit(cr);
	rb_after_commit(cr);
}

static void rb_write_done(struct za_dev_req *req)
{
	struct rb_ent *en = req->priv;
	struct za_col_rebuild *cr = en->cr;
	struct rb_priv *rp = cr->priv_eng;

	if (req->result && !en->werr) {
		en->werr = req->result;
		eng_req_failed(rp->e, cr->member, cr->zone, req, true,
			       ENG_REQ_REBUILD_WRITE);
	}
	if (--en->wpending)
		return;
	if (en->werr && !rp->err)
		rp->err = -EIO;
	if (rp->wslots) {
		rp->wslots--;
		rp->dst->rb_wslots--;
	}
	rp->written++;
	za_crash_point("rebuild-step");
	cr->written_bytes += rp->g->st->l.slot_bytes;
	if (en->live && cr->progress)
		cr->progress(cr, rp->g->st->l.col_payload_bytes);
	en->busy = false;
	rb_pump(cr);
}

/* Write ready entries in stripe order: a zone takes writes in order. */
static void rb_write_ready(struct za_col_rebuild *cr)
{
	struct rb_priv *rp = cr->priv_eng;
	const struct za_stripe_layout *l = &rp->g->st->l;

	while (!rp->err && rp->next_write < rp->next_start) {
		struct rb_ent *en = &rp->ent[rp->next_write % rp->window];
		uint64_t base = (uint64_t)cr->zone * rp->dst->zone_bytes +
				(uint64_t)en->stripe * l->slot_bytes;
		unsigned i;

		if (!en->ready || en->stripe != rp->next_write)
			break;
		en->ready = false;
		en->wpending = rp->parts;
		en->werr = 0;
		rb_reqs(rp, en->wreqs, ZA_DEV_OP_WRITE, base, en->out,
			rb_write_done, en);
		rp->next_write++;
		for (i = 0; i < rp->parts; i++)
			za_dev_submit(rp->dst->dev, &en->wreqs[i]);
	}
}

/* Would a column's zone moving from member @from to @to (@from's zone
 * given back, one of @to's taken) leave as many openable segments as
 * @now, the room before the move? */
static bool move_keeps_room(const struct za_engine *e, const struct room *now,
			    unsigned from, unsigned to)
{
	struct room moved;

	room_of(e, (int)from, (int)to, &moved);
	return moved.segs >= now->segs;
}

/*
 * Choose the replacement member again when the first slot is ready to be
 * written, before anything names it. A pass starts all its columns in one
 * go, before any has chosen its sources, so the choice made at the start
 * knows only the reads planned; by now the reads are queued on the
 * members, and the column goes to the one with the shortest rebuild queue
 * (its writes are served soonest), then least work in the pass. The zone
 * taken at the start, never written, is given back - unless the move
 * would leave fewer segments to open (struct room). A replace keeps the
 * drive it was told to use.
 */
static void rb_bind(struct za_col_rebuild *cr)
{
	struct rb_priv *rp = cr->priv_eng;
	struct za_engine *e = rp->e;
	const struct za_segment *g = rp->g;
	uint64_t need = (uint64_t)cr->nr_stripes * g->st->l.slot_bytes;
	struct member *old = rp->dst, *m;
	struct room now;
	uint64_t own;
	unsigned best;
	uint32_t z;

	if (rp->bound)
		return;
	rp->bound = true;
	if (cr->want_dst)
		return;
	/* Weigh every candidate without this column's own writes. A new
	 * pass's plan may have cleared the count meanwhile (a scrub's
	 * column runs beside a rebuild): take back no more than is there. */
	own = old->rb_pass_slots < cr->nr_stripes ? old->rb_pass_slots :
						    cr->nr_stripes;
	old->rb_pass_slots -= own;
	old->rb_wslots -= rp->wslots;
	if (rb_pick(e, g, need, -1, true, &now, &best) || best == cr->member ||
	    rb_queue(&e->m[best]) > rb_queue(old) ||
	    (rb_queue(&e->m[best]) == rb_queue(old) &&
	     rb_load(g, &e->m[best]) >= rb_load(g, old)) ||
	    !move_keeps_room(e, &now, cr->member, best) ||
	    (z = take_zone_min(&e->m[best], need)) == UINT32_MAX) {
		old->rb_pass_slots += own;
		old->rb_wslots += rp->wslots;
		return;
	}
	m = &e->m[best];
	assert(old->zkind[cr->zone] == Z_USED);
	eng_zone_give_back(old, cr->zone);
	old->active--;
	old->rb_writes--;
	za_log_debug("segment %llu column %u: replacement moved from member "
		     "%u zone %u to member %u zone %u",
		     (unsigned long long)g->id, cr->col, cr->member, cr->zone,
		     best, z);
	rp->dst = m;
	cr->member = best;
	cr->zone = z;
	m->active++;
	m->rb_writes++;
	m->rb_pass_slots += cr->nr_stripes;
	m->rb_wslots += rp->wslots;
}

/* Fill the entry's output slot: a hole, or the decoded column. */
static void rb_hole(struct za_col_rebuild *cr, struct rb_ent *en)
{
	struct rb_priv *rp = cr->priv_eng;
	const struct za_segment *g = rp->g;
	const struct za_stripe_layout *l = &g->st->l;
	struct za_stripe_hdr h;
	unsigned i;

	rb_bind(cr);
	memset(&h, 0, sizeof(h));
	h.array_uuid = rp->e->uuid;
	h.seg_id = g->id;
	h.stripe_idx = en->stripe;
	h.col = (uint8_t)cr->col;
	h.k = (uint8_t)l->k;
	h.p = (uint8_t)l->p;
	h.rows = (uint8_t)l->rows;
	h.chunk_bytes = l->chunk_bytes;
	h.group_id = g->grp->id;
	h.group_w = (uint16_t)g->grp->w;
	h.group_idx = (uint16_t)g->grp_idx;
	h.group_stripes = g->grp->nr_stripes;
	h.stream = (uint8_t)g->st->id;
	h.flags = ZA_STRIPE_F_RELOCATED | ZA_STRIPE_F_HOLE;
	h.at_member = (uint16_t)cr->member;
	h.at_zone = cr->zone;
	for (i = 0; i < l->width; i++) {
		h.members[i] = g->hdr_member[i];
		h.zones[i] = g->hdr_zone[i];
	}
	memset(en->out, 0, l->slot_bytes);
	for (i = 0; i < l->col_blocks; i++)
		h.blk_crc[i] = za_crc32c(en->out + ZA_STRIPE_HDR_BYTES, 4096);
	h.lba_crc = za_crc32c(en->out + ZA_STRIPE_LBA_OFF, ZA_STRIPE_LBA_BYTES);
	za_stripe_hdr_encode(&h, en->out);
	cr->holes++;
}

static int rb_decode(struct za_col_rebuild *cr, struct rb_ent *en)
{
	struct rb_priv *rp = cr->priv_eng;
	const struct za_segment *g = rp->g;
	const struct za_stripe_layout *l = &g->st->l;
	uint8_t *pay[ZA_EC_MAX_WIDTH] = { 0 }, *tab[ZA_EC_MAX_WIDTH] = { 0 };
	struct za_stripe_hdr h;
	uint64_t avail = 0;
	unsigned c, have = 0, src = 0;
	uint32_t j;
	int ret;

	rb_bind(cr);
	for (c = 0; c < l->width && have < l->k; c++)
		if (en->good & (1ull << c)) {
			uint8_t *slot = en->in + (size_t)c * l->slot_bytes;

			pay[c] = slot + ZA_STRIPE_HDR_BYTES;
			tab[c] = slot + ZA_STRIPE_LBA_OFF;
			avail |= 1ull << c;
			src = c;
			have++;
		}
	pay[cr->col] = en->out + ZA_STRIPE_HDR_BYTES;
	tab[cr->col] = en->out + ZA_STRIPE_LBA_OFF;
	ret = za_ec_reconstruct(g->st->ec, l->col_payload_bytes, pay, avail,
				1ull << cr->col);
	if (!ret)
		ret = za_ec_reconstruct(g->st->ec, ZA_STRIPE_LBA_BYTES, tab,
					avail, 1ull << cr->col);
	if (ret)
		return ret;
	/* The header: the stripe's fields from a verified column, this
	 * column's own checksums, and where it now is. */
	if (za_stripe_hdr_decode(en->in + (size_t)src * l->slot_bytes, &h))
		return -EBADMSG; /* verified just before: cannot happen */
	h.col = (uint8_t)cr->col;
	h.flags = ZA_STRIPE_F_RELOCATED;
	if (en->stripe + 1 == cr->nr_stripes)
		h.flags |= ZA_STRIPE_F_COMPLETE;
	h.at_member = (uint16_t)cr->member;
	h.at_zone = cr->zone;
	for (j = 0; j < l->col_blocks; j++)
		h.blk_crc[j] = za_crc32c(en->out + ZA_STRIPE_HDR_BYTES +
						 (uint64_t)j * 4096,
					 4096);
	h.lba_crc = za_crc32c(tab[cr->col], ZA_STRIPE_LBA_BYTES);
	za_stripe_hdr_encode(&h, en->out);
	cr->rebuilt++;
	return 0;
}

/* Verify a column read for a rebuild: its header and every block. */
static int rb_verify(struct za_col_rebuild *cr, struct rb_ent *en, unsigned c,
		     uint64_t *seq)
{
	struct rb_priv *rp = cr->priv_eng;
	const struct za_segment *g = rp->g;
	const struct za_stripe_layout *l = &g->st->l;
	const uint8_t *slot = en->in + (size_t)c * l->slot_bytes;
	struct za_stripe_hdr h;
	uint32_t j;

	if (za_stripe_hdr_decode(slot, &h) ||
	    !za_uuid_eq(&h.array_uuid, &rp->e->uuid) || h.seg_id != g->id ||
	    h.stripe_idx != en->stripe || h.col != c || h.k != l->k ||
	    h.p != l->p || h.rows != l->rows ||
	    h.chunk_bytes != l->chunk_bytes || h.group_id != g->grp->id ||
	    h.group_idx != g->grp_idx || eng_hdr_place_check(g, &h))
		return -EBADMSG;
	if (*seq != UINT64_MAX && h.seq != *seq)
		return -EBADMSG;
	for (j = 0; j < l->col_blocks; j++)
		if (za_crc32c(slot + ZA_STRIPE_HDR_BYTES + (uint64_t)j * 4096,
			      4096) != h.blk_crc[j])
			return -EBADMSG;
	*seq = h.seq;
	return 0;
}

static void rb_read_more(struct za_col_rebuild *cr, struct rb_ent *en);

static void rb_read_done(struct za_dev_req *req)
{
	struct rb_ent *en = req->priv;
	struct za_col_rebuild *cr = en->cr;
	struct rb_priv *rp = cr->priv_eng;
	struct za_engine *e = rp->e;
	const struct za_segment *g = rp->g;
	unsigned c = (unsigned)(req - en->reqs) / rp->parts;
	struct member *m = &e->m[g->member[c]];

	if (req->result) {
		bool first = !(en->col_pending[c] & 0x80000000u);

		en->col_pending[c] |= 0x80000000u; /* failed */
		eng_req_failed(e, g->member[c], g->zone[c], req, first,
			       ENG_REQ_READ);
	}
	if ((--en->col_pending[c] & 0x7fffffffu))
		return;
	en->outstanding--;
	e->m[en->col_member[c]].rb_reads--;
	cr->read_bytes += g->st->l.slot_bytes;
	if (!(en->col_pending[c] & 0x80000000u)) {
		uint64_t seq = UINT64_MAX;
		unsigned o;

		/* All good columns must be of the same write. */
		for (o = 0; o < g->st->l.width; o++)
			if (en->good & (1ull << o)) {
				struct za_stripe_hdr h;

				if (!za_stripe_hdr_decode(
					    en->in +
						    (size_t)o *
							    g->st->l.slot_bytes,
					    &h))
					seq = h.seq;
				break;
			}
		if (!rb_verify(cr, en, c, &seq)) {
			en->good |= 1ull << c;
		} else {
			m->st.err_checksum++;
			za_log_warn("%s: zone %u stripe %u: checksum mismatch "
				    "in column %u (rebuild)",
				    m->dev->path, g->zone[c], en->stripe, c);
		}
	}
	en->col_pending[c] = 0;
	rb_read_more(cr, en);
}

/* Start reading column @c of the entry's stripe; false if unreadable. */
static bool rb_read_col(struct za_col_rebuild *cr, struct rb_ent *en,
			unsigned c)
{
	struct rb_priv *rp = cr->priv_eng;
	struct za_engine *e = rp->e;
	const struct za_segment *g = rp->g;
	const struct za_stripe_layout *l = &g->st->l;
	struct member *m = &e->m[g->member[c]];
	uint64_t base;
	unsigned i;

	if (!eng_readable(m) || en->stripe >= g->col_upto[c])
		return false;
	base = (uint64_t)g->zone[c] * m->zone_bytes +
	       (uint64_t)en->stripe * l->slot_bytes;
	en->col_pending[c] = rp->parts;
	en->outstanding++;
	en->col_member[c] = g->member[c];
	m->rb_reads++;
	m->rb_pass_slots++;
	if (m->rb_plan)
		m->rb_plan--;
	rb_reqs(rp, &en->reqs[c * rp->parts], ZA_DEV_OP_READ, base,
		en->in + (size_t)c * l->slot_bytes, rb_read_done, en);
	for (i = 0; i < rp->parts; i++)
		za_dev_submit(m->dev, &en->reqs[c * rp->parts + i]);
	return true;
}

/* The column's own verified copy, with where it now is in its header. */
static int rb_copy(struct za_col_rebuild *cr, struct rb_ent *en)
{
	struct rb_priv *rp = cr->priv_eng;
	const struct za_stripe_layout *l = &rp->g->st->l;
	struct za_stripe_hdr h;

	rb_bind(cr);
	memcpy(en->out, en->in + (size_t)cr->col * l->slot_bytes,
	       l->slot_bytes);
	if (za_stripe_hdr_decode(en->out, &h))
		return -EBADMSG;
	h.flags = ZA_STRIPE_F_RELOCATED;
	if (en->stripe + 1 == cr->nr_stripes)
		h.flags |= ZA_STRIPE_F_COMPLETE;
	h.at_member = (uint16_t)cr->member;
	h.at_zone = cr->zone;
	za_stripe_hdr_encode(&h, en->out);
	cr->copied++;
	return 0;
}

/* Read columns until k verify, then decode; -EIO past the redundancy. */
static void rb_read_more(struct za_col_rebuild *cr, struct rb_ent *en)
{
	struct rb_priv *rp = cr->priv_eng;
	struct za_engine *e = rp->e;
	const struct za_segment *g = rp->g;
	const struct za_stripe_layout *l = &g->st->l;
	unsigned have = (unsigned)__builtin_popcountll(en->good);
	unsigned want, c, i;

	/* Moving a readable column: its own copy, when it verifies. */
	if (en->good & (1ull << cr->col)) {
		if (rb_copy(cr, en)) {
			en->good &= ~(1ull << cr->col);
		} else {
			en->ready = true;
			rb_pump(cr);
			return;
		}
	} else if (cr->move && !cr->decode &&
		   !(en->tried & (1ull << cr->col)) && !en->outstanding) {
		en->tried |= 1ull << cr->col;
		if (rb_read_col(cr, en, cr->col))
			return;
	}
	have = (unsigned)__builtin_popcountll(en->good);
	if (have >= l->k) {
		if (en->outstanding)
			return; /* extra reads in flight: wait for them */
		if (rb_decode(cr, en)) {
			za_log_err("segment %llu stripe %u: column %u cannot "
				   "be decoded",
				   (unsigned long long)g->id, en->stripe,
				   cr->col);
			if (!rp->err)
				rp->err = -EIO;
			en->busy = false;
			rb_pump(cr);
			return;
		}
		en->ready = true;
		rb_pump(cr);
		return;
	}
	want = l->k - have;
	want = want > en->outstanding ? want - en->outstanding : 0;
	/* The least busy sources first: columns of many segments share
	 * members, and a stripe waits for its slowest read. (Counting the
	 * writes assigned, or the reads planned, too was measured slower:
	 * bench/results/notes.md, P3.) */
	while (want) {
		unsigned best = UINT_MAX;

		for (c = 0; c < l->width; c++) {
			if ((en->tried & (1ull << c)) || c == cr->col)
				continue;
			/* A decoding move (scrub: the column is suspect) takes
			 * data columns first, as the check that judged it. */
			if (best == UINT_MAX ||
			    (!cr->decode &&
			     e->m[g->member[c]].rb_reads <
				     e->m[g->member[best]].rb_reads))
				best = c;
		}
		if (best == UINT_MAX)
			break;
		en->tried |= 1ull << best;
		if (rb_read_col(cr, en, best))
			want--;
	}
	(void)i;
	(void)e;
	if (en->outstanding)
		return;
	za_log_err("segment %llu stripe %u: more than %u columns lost: "
		   "column %u cannot be rebuilt",
		   (unsigned long long)g->id, en->stripe, l->p, cr->col);
	if (!rp->err)
		rp->err = -EIO;
	en->busy = false;
	rb_pump(cr);
}

/*
 * Is stripe @s to be restored (else: a hole)? The last one always is: it
 * was live when the column was listed, and only its slot can say the copy
 * is complete (F_COMPLETE), which a hole's header may not carry
 * (docs/format.md); without it recovery drops the copy as unfinished
 * (NEWS: seed 600065).
 */
static bool rb_stripe_live(const struct za_col_rebuild *cr, uint32_t s)
{
	return s + 1 == cr->nr_stripes || ((cr->live[s / 64] >> (s % 64)) & 1);
}

static void rb_start_ent(struct za_col_rebuild *cr, struct rb_ent *en,
			 uint32_t stripe)
{
	en->busy = true;
	en->ready = false;
	en->stripe = stripe;
	en->live = rb_stripe_live(cr, stripe);
	en->tried = 0;
	en->good = 0;
	en->outstanding = 0;
	if (!en->live) {
		rb_hole(cr, en);
		en->ready = true;
		return;
	}
	rb_read_more(cr, en);
}

static void rb_pump(struct za_col_rebuild *cr)
{
	struct rb_priv *rp = cr->priv_eng;
	const struct za_stripe_layout *l = &rp->g->st->l;

	if (rp->ended || rp->settling)
		return;
	rb_write_ready(cr);
	while (!rp->err && !rp->aborting && rp->next_start < cr->nr_stripes) {
		struct rb_ent *en = &rp->ent[rp->next_start % rp->window];
		uint32_t s = rp->next_start;
		bool live = rb_stripe_live(cr, s);

		if (en->busy)
			break;
		if (live && cr->may_start &&
		    !cr->may_start(cr, l->col_payload_bytes))
			break;
		rp->next_start++;
		rb_start_ent(cr, en, s);
		rb_write_ready(cr);
	}
	if (rp->aborting && !rp->err)
		rp->err = -ECANCELED;
	if (rp->err || rp->written == cr->nr_stripes)
		rb_settle(cr);
}

static void rb_kick_later(struct za_io_defer *d)
{
	struct rb_priv *rp = container_of(d, struct rb_priv, defer);

	rp->kick_pending = false;
	/* Aborted before its first kick (a stop right after the start):
	 * the column is over and its owner may have freed it. */
	if (rp->ended) {
		free(rp);
		return;
	}
	rb_pump(rp->cr_back);
}

int za_engine_col_busy(struct za_engine *e, uint64_t seg_id, unsigned col)
{
	struct za_segment *g = eng_seg_find(e, seg_id);
	uint64_t need;
	unsigned m;
	int ret;

	if (!g || col >= g->st->l.width)
		return -ENOENT;
	if (!g->taking || g->inflight || g->fin_pending || g->grp->releasing ||
	    !eng_col_lost(e, g, col))
		return -EBUSY;
	/*
	 * Open, idle, a column lost: it takes stripes only while writes
	 * come, so with none it stays open, and a rebuild that waited for
	 * it looked again every 50 ms for ever (tests/rebuild-incomplete.sh
	 * hung so). With no member to take the column it waits for a drive
	 * like a sealed segment. With one, the group opened short of members
	 * and new ones will not be: seal it, to be rebuilt once finished.
	 */
	need = (uint64_t)(g->next_stripe ? g->next_stripe : 1) *
	       g->st->l.slot_bytes;
	ret = rb_pick(e, g, need, -1, false, NULL, &m);
	if (ret)
		return ret;
	eng_group_stop(e, g->grp);
	return -EBUSY;
}

int za_engine_col_rebuild(struct za_engine *e, struct za_col_rebuild *cr)
{
	struct za_segment *g = eng_seg_find(e, cr->seg_id);
	const struct za_stripe_layout *l;
	struct rb_priv *rp;
	uint64_t need;
	unsigned i;
	int ret;

	if (!g || g->grp->releasing)
		return -ENOENT;
	l = &g->st->l;
	if (cr->col >= l->width || !cr->nr_stripes ||
	    cr->nr_stripes > g->next_stripe || !cr->live || !cr->done ||
	    !((cr->live[(cr->nr_stripes - 1) / 64] >>
	       ((cr->nr_stripes - 1) % 64)) &
	      1))
		return -EINVAL;
	if (g->taking || g->inflight || g->fin_pending ||
	    (g->rb_cols & (1ull << cr->col)))
		return -EBUSY;
	if (!eng_col_lost(e, g, cr->col) && !cr->move)
		return -EALREADY;
	need = (uint64_t)cr->nr_stripes * l->slot_bytes;
	ret = rb_pick(e, g, need,
		      cr->want_dst && cr->dst_member < e->nr_members ?
			      (int)cr->dst_member :
		      cr->want_dst ? INT_MAX :
				     -1,
		      false, NULL, &cr->member);
	if (ret)
		return ret;
	rp = calloc(1, sizeof(*rp));
	if (!rp)
		return -ENOMEM;
	rp->e = e;
	rp->g = g;
	rp->cr_back = cr;
	rp->dst = &e->m[cr->member];
	rp->old_member = g->member[cr->col];
	rp->old_zone = g->zone[cr->col];
	rp->part_bytes = e->io_max < RB_IO_BYTES ? e->io_max : RB_IO_BYTES;
	rp->parts = (unsigned)((l->slot_bytes + rp->part_bytes - 1) /
			       rp->part_bytes);
	rp->window = cr->window ? cr->window : 4;
	/* No more entries than stripes: each holds width + 1 slots, and a
	 * pass starts hundreds of columns at once. */
	if (rp->window > cr->nr_stripes)
		rp->window = cr->nr_stripes;
	rp->ent = calloc(rp->window, sizeof(*rp->ent));
	if (!rp->ent)
		goto err_mem;
	for (i = 0; i < rp->window; i++) {
		struct rb_ent *en = &rp->ent[i];

		en->cr = cr;
		if (posix_memalign((void **)&en->in, 4096,
				   (size_t)l->width * l->slot_bytes))
			en->in = NULL;
		if (posix_memalign((void **)&en->out, 4096, l->slot_bytes))
			en->out = NULL;
		en->reqs =
			calloc((size_t)l->width * rp->parts, sizeof(*en->reqs));
		en->wreqs = calloc(rp->parts, sizeof(*en->wreqs));
		if (!en->in || !en->out || !en->reqs || !en->wreqs)
			goto err_ents;
	}
	cr->zone = take_zone_min(rp->dst, need);
	assert(cr->zone != UINT32_MAX); /* rb_pick checked */
	rp->dst->active++;
	rp->dst->rb_writes++;
	rp->dst->rb_pass_slots += cr->nr_stripes;
	rp->wslots = cr->nr_stripes;
	rp->dst->rb_wslots += rp->wslots;
	cr->read_bytes = cr->written_bytes = 0;
	cr->rebuilt = cr->holes = 0;
	cr->priv_eng = rp;
	g->rb_cols |= 1ull << cr->col;
	g->grp->readers++; /* pinned against release */
	g->grp->rebuilding++;
	e->rebuilds++;
	za_log_debug("segment %llu column %u: rebuilding %u stripes on member "
		     "%u zone %u",
		     (unsigned long long)g->id, cr->col, cr->nr_stripes,
		     cr->member, cr->zone);
	/* Start on the loop, never inside this call. */
	rp->defer.fn = rb_kick_later;
	rp->kick_pending = true;
	za_io_defer(e->io, &rp->defer);
	return 0;

err_ents:
	for (i = 0; i < rp->window; i++) {
		free(rp->ent[i].in);
		free(rp->ent[i].out);
		free(rp->ent[i].reqs);
		free(rp->ent[i].wreqs);
	}
	free(rp->ent);
err_mem:
	free(rp);
	return -ENOMEM;
}

void za_engine_col_rebuild_kick(struct za_engine *e, struct za_col_rebuild *cr)
{
	(void)e;
	if (cr->priv_eng)
		rb_pump(cr);
}

void za_engine_col_rebuild_abort(struct za_engine *e, struct za_col_rebuild *cr)
{
	struct rb_priv *rp = cr->priv_eng;

	(void)e;
	if (!rp || rp->aborting)
		return;
	rp->aborting = true;
	rb_pump(cr);
}
