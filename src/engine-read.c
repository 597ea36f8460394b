// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * engine-read.c - reads of group positions: each column read is checked
 * against its header and block CRCs, a column that fails is decoded from
 * k verified others, and a member past its read error budget is failed.
 * It reads for the engine's callers only: crash recovery, column
 * rebuilds and stripe checks read for themselves (engine-recover.c,
 * engine-rebuild.c, engine-scrub.c), sharing its header place check.
 *
 * Reads are per (stripe, column) unit: the column's header and the needed
 * payload range are read, every block is checked against the CRC in the
 * header, and the header against the segment it should belong to. A unit
 * that fails (I/O error, bad header, bad CRC, failed member) is decoded
 * from k other columns of the same stripe, read the same way and verified
 * too; if fewer than k verify, the read fails with -EIO (invariant 5).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "container.h"
#include "crc.h"
#include "ec.h"
#include "log.h"
#include "engine-int.h"

/* ---- reading ---- */

/*
 * One column of one stripe, read for a unit: its header and the payload
 * blocks [lo, lo + n), verified.
 */
struct col_io {
	struct rd_unit *u;
	unsigned col;
	uint8_t *hdr; /* 4096 */
	uint8_t *data; /* n * 4096 */
	struct za_dev_req *reqs; /* 1 + data parts */
	unsigned nreq, pending;
	int err;
};

struct rd_unit {
	struct za_read *r;
	struct za_segment *g;
	uint32_t stripe_idx;
	uint64_t group_pos; /* the stripe's position in its group */
	unsigned col; /* the column the reader wants */
	uint32_t lo, n; /* payload block range of that column */
	uint64_t good; /* columns read and verified over [lo, lo + n) */
	uint64_t tried; /* columns read (or given up on) */
	unsigned outstanding;
	bool degraded;
	struct col_io *cio[ZA_EC_MAX_WIDTH];
};

static void unit_step(struct rd_unit *u);

static bool unit_wants(const struct za_engine *e, const struct rd_unit *u,
		       uint32_t j, uint64_t *dst_blk)
{
	const struct za_read *r = u->r;
	const struct za_stripe_layout *l = &u->g->st->l;
	uint64_t d = u->group_pos * l->data_blocks +
		     za_stripe_block_of(l, u->col, j);

	(void)e;
	if (d < r->gpos || d >= r->gpos + r->nr_blocks)
		return false;
	*dst_blk = d - r->gpos;
	return true;
}

/*
 * Does a decoded header of segment @g name the place it was read from?
 * Its members[]/zones[] are the segment's first placement; a column a
 * rebuild moved says so (F_RELOCATED) and where it is now. 0 or -EBADMSG.
 */
int eng_hdr_col_check(const struct za_engine *e, const struct za_segment *g,
		      uint32_t stripe_idx, unsigned c, const uint8_t *blk,
		      struct za_stripe_hdr *h)
{
	const struct za_stripe_layout *l = &g->st->l;
	uint8_t flags;

	if (za_stripe_hdr_decode(blk, h) ||
	    !za_uuid_eq(&h->array_uuid, &e->uuid) || h->seg_id != g->id ||
	    h->stripe_idx != stripe_idx || h->col != c || h->k != l->k ||
	    h->p != l->p || h->rows != l->rows ||
	    h->chunk_bytes != l->chunk_bytes || h->group_id != g->grp->id ||
	    h->group_idx != g->grp_idx)
		return -EBADMSG;
	flags = h->flags;
	h->flags &= (uint8_t)~ZA_STRIPE_F_HOLE;
	if (eng_hdr_place_check(g, h))
		return -EBADMSG;
	h->flags = flags;
	if (flags & ZA_STRIPE_F_HOLE)
		return (flags & ZA_STRIPE_F_RELOCATED) ? -ENODATA : -EBADMSG;
	return 0;
}

int eng_hdr_place_check(const struct za_segment *g,
			const struct za_stripe_hdr *h)
{
	unsigned i, c = h->col;
	bool moved = g->member[c] != g->hdr_member[c] ||
		     g->zone[c] != g->hdr_zone[c];

	for (i = 0; i < g->st->l.width; i++)
		if (h->members[i] != g->hdr_member[i] ||
		    h->zones[i] != g->hdr_zone[i])
			return -EBADMSG;
	if (h->flags & ZA_STRIPE_F_HOLE)
		return -EBADMSG; /* a dead stripe: nothing to read here */
	if (!moved)
		return (h->flags & ZA_STRIPE_F_RELOCATED) ? -EBADMSG : 0;
	if (!(h->flags & ZA_STRIPE_F_RELOCATED) ||
	    h->at_member != g->member[c] || h->at_zone != g->zone[c])
		return -EBADMSG;
	return 0;
}

/* Check one column's header and blocks; 0 or -EBADMSG. */
static int col_verify(struct za_engine *e, struct rd_unit *u, struct col_io *ci,
		      bool only_wanted)
{
	const struct za_stripe_layout *l = &u->g->st->l;
	struct za_stripe_hdr h;
	uint64_t dst;
	uint32_t j;

	if (za_stripe_hdr_decode(ci->hdr, &h))
		return -EBADMSG;
	if (!za_uuid_eq(&h.array_uuid, &e->uuid) || h.seg_id != u->g->id ||
	    h.stripe_idx != u->stripe_idx || h.col != ci->col || h.k != l->k ||
	    h.p != l->p || h.rows != l->rows || h.chunk_bytes != l->chunk_bytes)
		return -EBADMSG;
	if (h.group_id != u->g->grp->id || h.group_idx != u->g->grp_idx)
		return -EBADMSG;
	if (eng_hdr_place_check(u->g, &h))
		return -EBADMSG;
	for (j = 0; j < u->n; j++) {
		if (only_wanted && !unit_wants(e, u, u->lo + j, &dst))
			continue;
		if (za_crc32c(ci->data + (uint64_t)j * 4096, 4096) !=
		    h.blk_crc[u->lo + j])
			return -EBADMSG;
	}
	return 0;
}

static void col_io_free(struct col_io *ci)
{
	if (!ci)
		return;
	free(ci->hdr);
	free(ci->data);
	free(ci->reqs);
	free(ci);
}

/*
 * Called where a member's read error is counted: past max_read_errors it
 * is failed, as after a write error, unless p members are lost already
 * (failing it would leave its stripes beyond their redundancy, while its
 * errors are still repaired); that is said once, when the count passes.
 */
void eng_read_errors_check(struct za_engine *e, unsigned idx)
{
	struct member *m = &e->m[idx];

	if (!e->max_read_errors || m->st.err_read <= e->max_read_errors ||
	    (m->state != ZA_MEMBER_ONLINE && m->state != ZA_MEMBER_DRAINING))
		return;
	if (za_engine_nr_lost(e) >= e->streams[0].l.p) {
		if (m->st.err_read == (uint64_t)e->max_read_errors + 1)
			za_log_err("%s: member %u: %llu read errors, more than "
				   "%u, but %u members are lost already: kept",
				   m->dev->path, idx,
				   (unsigned long long)m->st.err_read,
				   e->max_read_errors, za_engine_nr_lost(e));
		return;
	}
	za_log_err("%s: member %u: %llu read errors, more than %u: failing it",
		   m->dev->path, idx, (unsigned long long)m->st.err_read,
		   e->max_read_errors);
	eng_member_fail(e, idx, -EIO, true);
}

static void col_read_done(struct za_dev_req *req)
{
	struct col_io *ci = req->priv;
	struct rd_unit *u = ci->u;
	struct za_engine *e = u->r->eng;
	unsigned midx = u->g->member[ci->col];
	struct member *m = &e->m[midx];

	/* Only a column's first failed part counts: the others are the
	 * same failure. */
	if (req->result && !ci->err) {
		ci->err = req->result;
		eng_req_failed(e, midx, u->g->zone[ci->col], req, true,
			       ENG_REQ_READ);
	}
	if (--ci->pending)
		return;
	u->outstanding--;
	if (!ci->err) {
		bool target = ci->col == u->col && !u->degraded;

		if (col_verify(e, u, ci, target)) {
			m->st.err_checksum++;
			za_log_warn("%s: zone %u stripe %u: checksum mismatch "
				    "in column %u",
				    m->dev->path, u->g->zone[ci->col],
				    u->stripe_idx, ci->col);
			ci->err = -EBADMSG;
		}
	}
	if (!ci->err)
		u->good |= 1ull << ci->col;
	if (!u->outstanding)
		unit_step(u);
}

/* Start reading column @col of @u; false if it cannot be read at all. */
static bool col_start(struct za_engine *e, struct rd_unit *u, unsigned col)
{
	struct member *m = &e->m[u->g->member[col]];
	uint64_t base, len, done;
	struct col_io *ci;
	unsigned i;

	u->tried |= 1ull << col;
	if (!eng_readable(m) || u->stripe_idx >= u->g->col_upto[col])
		return false;
	ci = calloc(1, sizeof(*ci));
	if (!ci)
		return false;
	ci->u = u;
	ci->col = col;
	len = (uint64_t)u->n * 4096;
	ci->nreq = 1 + (unsigned)((len + e->io_max - 1) / e->io_max);
	if (posix_memalign((void **)&ci->hdr, 4096, 4096))
		ci->hdr = NULL;
	if (posix_memalign((void **)&ci->data, 4096, len))
		ci->data = NULL;
	ci->reqs = calloc(ci->nreq, sizeof(*ci->reqs));
	if (!ci->hdr || !ci->data || !ci->reqs) {
		col_io_free(ci);
		return false;
	}
	u->cio[col] = ci;
	base = (uint64_t)u->g->zone[col] * m->zone_bytes +
	       (uint64_t)u->stripe_idx * u->g->st->l.slot_bytes;
	ci->reqs[0].off_bytes = base;
	ci->reqs[0].len_bytes = 4096;
	ci->reqs[0].buf = ci->hdr;
	for (i = 1, done = 0; i < ci->nreq; i++) {
		uint64_t part = len - done > e->io_max ? e->io_max : len - done;

		ci->reqs[i].off_bytes = base + ZA_STRIPE_HDR_BYTES +
					(uint64_t)u->lo * 4096 + done;
		ci->reqs[i].len_bytes = part;
		ci->reqs[i].buf = ci->data + done;
		done += part;
	}
	ci->pending = ci->nreq;
	u->outstanding++;
	for (i = 0; i < ci->nreq; i++) {
		ci->reqs[i].op = ZA_DEV_OP_READ;
		ci->reqs[i].prio = u->r->prio;
		ci->reqs[i].done = col_read_done;
		ci->reqs[i].priv = ci;
		za_dev_submit(m->dev, &ci->reqs[i]);
	}
	return true;
}

static void read_unpin(struct za_read *r)
{
	struct group *grp = r->grp;

	r->eng->reads--;
	r->grp = NULL;
	if (grp && --grp->readers == 0 && grp->releasing && !grp->rel_reqs)
		eng_group_release_start(r->eng, grp);
}

static void read_put(struct za_read *r, int err)
{
	if (err && !r->result)
		r->result = err;
	if (--r->pending == 0) {
		read_unpin(r);
		r->done(r, r->result);
	}
}

static void unit_end(struct rd_unit *u, int err)
{
	unsigned c;

	for (c = 0; c < ZA_EC_MAX_WIDTH; c++)
		col_io_free(u->cio[c]);
	read_put(u->r, err);
	free(u);
}

static void unit_copy_out(struct za_engine *e, struct rd_unit *u,
			  const uint8_t *data)
{
	uint64_t dst;
	uint32_t j;

	for (j = 0; j < u->n; j++)
		if (unit_wants(e, u, u->lo + j, &dst))
			memcpy(u->r->buf + dst * 4096,
			       data + (uint64_t)j * 4096, 4096);
}

/* Decode the wanted column from k verified ones. */
static int unit_decode(struct za_engine *e, struct rd_unit *u)
{
	const struct za_stripe_layout *l = &u->g->st->l;
	uint8_t *ptrs[ZA_EC_MAX_WIDTH] = { 0 };
	uint8_t *out = NULL;
	uint64_t avail = 0, len = (uint64_t)u->n * 4096, dst;
	struct member *m = &e->m[u->g->member[u->col]];
	unsigned c, have = 0;
	uint32_t j;
	int ret;

	for (c = 0; c < l->width && have < l->k; c++)
		if (u->good & (1ull << c)) {
			ptrs[c] = u->cio[c]->data;
			avail |= 1ull << c;
			have++;
		}
	if (posix_memalign((void **)&out, 4096, len))
		return -ENOMEM;
	ptrs[u->col] = out;
	ret = za_ec_reconstruct(u->g->st->ec, len, ptrs, avail, 1ull << u->col);
	if (ret) {
		free(out);
		return ret;
	}
	unit_copy_out(e, u, out);
	free(out);
	for (j = 0; j < u->n; j++)
		if (unit_wants(e, u, u->lo + j, &dst))
			u->r->repaired_blocks++;
	if (!eng_col_absent(u->g, u->col)) /* absent: no member to count on */
		m->st.repaired_bytes += (uint64_t)u->n * 4096;
	e->st.blocks_repaired += u->n;
	return 0;
}

/*
 * The unit's state machine, run whenever nothing of it is in flight:
 * done if the wanted column verified; otherwise read more columns until
 * k verify, then decode; -EIO if the stripe has lost more than p.
 */
static void unit_step(struct rd_unit *u)
{
	struct za_engine *e = u->r->eng;
	const struct za_stripe_layout *l = &u->g->st->l;
	unsigned c, have, want;

	if (!u->degraded && (u->good & (1ull << u->col))) {
		unit_copy_out(e, u, u->cio[u->col]->data);
		unit_end(u, 0);
		return;
	}
	if (!u->degraded) {
		u->degraded = true;
		u->good &= ~(1ull << u->col);
	}
	for (;;) {
		have = (unsigned)__builtin_popcountll(u->good);
		if (have >= l->k) {
			unit_end(u, unit_decode(e, u));
			return;
		}
		want = l->k - have - u->outstanding;
		for (c = 0; c < l->width && want; c++) {
			if (u->tried & (1ull << c))
				continue;
			if (col_start(e, u, c))
				want--;
		}
		if (u->outstanding)
			return;
		if (want) {
			za_log_err("segment %llu stripe %u: more than %u "
				   "columns lost: data unreadable",
				   (unsigned long long)u->g->id, u->stripe_idx,
				   l->p);
			unit_end(u, -EIO);
			return;
		}
	}
}

static void read_fail_later(struct za_io_defer *d)
{
	struct za_read *r = container_of(d, struct za_read, defer);

	read_unpin(r);
	r->done(r, r->result);
}

void za_engine_read(struct za_engine *e, struct za_read *r)
{
	struct group *grp = eng_group_find(e, r->group_id);
	const struct za_stripe_layout *l = grp ? &grp->st->l : NULL;
	uint64_t d, end = r->gpos + r->nr_blocks;

	r->eng = e;
	r->result = 0;
	r->repaired_blocks = 0;
	r->pending = 1;
	r->grp = NULL;
	e->reads++;
	if (!grp || grp->releasing)
		r->result = -ENOENT;
	else if (!r->nr_blocks || r->gpos > UINT64_MAX - r->nr_blocks ||
		 end > grp->next_pos * l->data_blocks)
		r->result = -EINVAL;
	if (r->result) {
		r->defer.fn = read_fail_later;
		za_io_defer(e->io, &r->defer);
		return;
	}
	e->st.blocks_read += r->nr_blocks;
	r->grp = grp;
	grp->readers++;
	for (d = r->gpos; d < end;) {
		uint64_t j = d / l->data_blocks;
		uint64_t s_end = (j + 1) * l->data_blocks;
		struct za_segment *g = grp->segs[j % grp->w];
		uint32_t lo[ZA_EC_MAX_WIDTH], hi[ZA_EC_MAX_WIDTH];
		unsigned c;

		if (!g) { /* a recovered group's segment nothing was found in */
			if (!r->result)
				r->result = -EIO;
			d = s_end > end ? end : s_end;
			continue;
		}

		if (s_end > end)
			s_end = end;
		for (c = 0; c < l->k; c++) {
			lo[c] = UINT32_MAX;
			hi[c] = 0;
		}
		for (; d < s_end; d++) {
			uint32_t cb;

			za_stripe_locate(l, (uint32_t)(d % l->data_blocks), &c,
					 &cb);
			if (cb < lo[c])
				lo[c] = cb;
			if (cb > hi[c])
				hi[c] = cb;
		}
		for (c = 0; c < l->k; c++) {
			struct rd_unit *u;

			if (lo[c] == UINT32_MAX)
				continue;
			u = calloc(1, sizeof(*u));
			if (!u) {
				r->result = -ENOMEM;
				continue;
			}
			u->r = r;
			u->g = g;
			u->stripe_idx = (uint32_t)(j / grp->w);
			u->group_pos = j;
			u->col = c;
			u->lo = lo[c];
			u->n = hi[c] - lo[c] + 1;
			r->pending++;
			if (!col_start(e, u, c)) {
				u->tried |= 1ull << c;
				/* Failed member: decode; never inline done(). */
				unit_step(u);
			}
		}
	}
	/* Drop the guard; done() never runs inside this call. */
	if (--r->pending == 0) {
		r->defer.fn = read_fail_later;
		za_io_defer(e->io, &r->defer);
	}
}

static void sync_read_done(struct za_read *r, int result)
{
	struct sync_ctx *c = r->priv;

	c->result = result;
	c->done = true;
}

int za_engine_read_sync(struct za_engine *e, uint64_t group_id, uint64_t gpos,
			uint32_t nr_blocks, void *buf, uint32_t *repaired)
{
	struct sync_ctx c = { 0 };
	struct za_read r = { 0 };

	r.group_id = group_id;
	r.gpos = gpos;
	r.nr_blocks = nr_blocks;
	r.buf = buf;
	r.done = sync_read_done;
	r.priv = &c;
	za_engine_read(e, &r);
	za_io_run_until(e->io, &c.done, 0);
	if (repaired)
		*repaired = r.repaired_blocks;
	return c.result;
}
