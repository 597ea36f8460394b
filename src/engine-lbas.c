// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * engine-lbas.c - reads of the LBA tables of a range of a group's
 * stripes: which logical block each data position holds, from the stripe
 * headers alone, so that a cleaner finds a victim's blocks without
 * walking the whole map (the log-structured cleaner's segment summary).
 * Every header is verified (its CRCs, then identity and place, as
 * engine-read.c checks them) before its table is used, and a table that
 * cannot be read is decoded from k verified ones. It reads no payload and
 * knows nothing of the map: which LBAs still live at these positions, and
 * whether they fit the volume, are the caller's questions.
 *
 * A stripe's LBA table is not in any one header: each data column's
 * header holds the LBAs of that column's payload blocks (col_blocks
 * entries), and each parity column's header the erasure code of the data
 * columns' tables (stripe.h). So a stripe takes k header reads, one per
 * data column, all at once; a column that fails (I/O error, lost or
 * absent member, bad header, wrong place, a sequence number the others do
 * not share) is replaced by the next untried column, parity ones
 * included, until k verify; the missing data columns' tables are then
 * decoded from those k, as recovery does (engine-recover.c, rec_lbas()).
 * Fewer than k: the request fails with -EIO, every entry wiped, unless a
 * rebuild found the stripe dead - a verified header of it is a hole, or a
 * moved column stops before it (col_upto) - when it holds nothing live
 * and its entries are ZA_STRIPE_LBA_NONE (its blocks cannot be read
 * either way). With k verified, a dead stripe's LBAs are returned as
 * written: nothing maps them there any more, which the caller's map
 * lookup finds.
 *
 *   request: stripes [first, first + n) of a group, LB_WINDOW at a time
 *      stripe: read headers of columns 0..k-1 (lost ones: the next ones)
 *              verify each; agree on one sequence number
 *              >= k verified: data tables, decoded where missing -> lbas
 *              else more columns; none left: a hole -> NONE, or -EIO
 *
 * Stripes the group handed out but nothing of was found at recovery (past
 * their segment's last stripe found) are ZA_STRIPE_LBA_NONE without a
 * read; a segment the group lost entirely is -EIO, as za_engine_read()
 * says of it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "byteorder.h"
#include "container.h"
#include "ec.h"
#include "log.h"
#include "engine-int.h"

/* Stripes read at once: at most LB_WINDOW * (k + p) headers in memory. */
#define LB_WINDOW 32u

struct lb_ctx;

/* One stripe being read. */
struct lb_stripe {
	struct lb_ctx *cx;
	struct za_segment *g;
	uint64_t i; /* its place in the request */
	uint32_t stripe_idx;
	uint8_t *hdr; /* width blocks of 4 KiB, column c at c * 4096 */
	struct za_dev_req *reqs; /* width, column c at c */
	uint64_t seq[ZA_EC_MAX_WIDTH]; /* of each verified header */
	uint64_t tried, good, holes; /* column masks */
	unsigned outstanding;
	bool busy;
};

struct lb_ctx {
	struct za_read_lbas *r;
	struct za_engine *e;
	struct group *grp;
	uint64_t next; /* stripes of the request started */
	unsigned running, nr_slots;
	bool filling; /* lb_fill() runs: stripes that end do not call it */
	uint8_t *hdrs;
	struct za_dev_req *reqs;
	struct lb_stripe slot[];
};

static void lb_fill(struct lb_ctx *cx);

static void lb_stripe_end(struct lb_stripe *s, int err)
{
	struct lb_ctx *cx = s->cx;

	if (err && !cx->r->result)
		cx->r->result = err;
	s->busy = false;
	cx->running--;
	if (!cx->filling)
		lb_fill(cx);
}

static void lb_step(struct lb_stripe *s);

static void lb_col_done(struct za_dev_req *req)
{
	struct lb_stripe *s = req->priv;
	struct za_engine *e = s->cx->e;
	unsigned c = (unsigned)(req - s->reqs);
	unsigned midx = s->g->member[c];
	struct za_stripe_hdr h;
	int ret;

	if (req->result) { /* counted and logged there, once */
		eng_req_failed(e, midx, s->g->zone[c], req, true, ENG_REQ_READ);
	} else {
		ret = eng_hdr_col_check(e, s->g, s->stripe_idx, c,
					s->hdr + (size_t)c * 4096, &h);
		if (ret == -ENODATA) {
			s->holes |= 1ull << c;
		} else if (ret) {
			e->m[midx].st.err_checksum++;
			za_log_warn("%s: zone %u offset %llu: segment %llu "
				    "stripe %u: bad header in column %u",
				    e->m[midx].dev->path, s->g->zone[c],
				    (unsigned long long)req->off_bytes,
				    (unsigned long long)s->g->id, s->stripe_idx,
				    c);
		} else {
			s->good |= 1ull << c;
			s->seq[c] = h.seq;
		}
	}
	if (--s->outstanding == 0)
		lb_step(s);
}

/* Start reading column @c's header; false if it cannot be read at all. */
static bool lb_col_start(struct lb_stripe *s, unsigned c)
{
	struct za_engine *e = s->cx->e;
	const struct za_segment *g = s->g;
	struct member *m = &e->m[g->member[c]];
	struct za_dev_req *req = &s->reqs[c];

	s->tried |= 1ull << c;
	/* A moved column that stops before this stripe: the rebuild found
	 * it dead, as a hole would say (0: a copy recovery has not found
	 * complete yet, which says nothing). */
	if (s->stripe_idx >= g->col_upto[c]) {
		if (g->col_upto[c])
			s->holes |= 1ull << c;
		return false;
	}
	if (!eng_readable(m)) /* lost or absent */
		return false;
	memset(req, 0, sizeof(*req));
	req->op = ZA_DEV_OP_READ;
	req->off_bytes = (uint64_t)g->zone[c] * m->zone_bytes +
			 (uint64_t)s->stripe_idx * g->st->l.slot_bytes;
	req->len_bytes = ZA_STRIPE_HDR_BYTES;
	req->buf = s->hdr + (size_t)c * 4096;
	req->prio = s->cx->r->prio;
	req->done = lb_col_done;
	req->priv = s;
	s->outstanding++;
	za_dev_submit(m->dev, req);
	return true;
}

/*
 * Verified headers of another write than most of them are not this
 * stripe's (engine-scrub.c's rule): they are dropped, and counted.
 */
static void lb_agree(struct lb_stripe *s)
{
	struct za_engine *e = s->cx->e;
	const struct za_segment *g = s->g;
	unsigned c, o, best = 0, best_n = 0;

	for (c = 0; c < g->st->l.width; c++) {
		unsigned n = 0;

		if (!(s->good & (1ull << c)))
			continue;
		for (o = 0; o < g->st->l.width; o++)
			n += (s->good & (1ull << o)) && s->seq[o] == s->seq[c];
		if (n > best_n) {
			best_n = n;
			best = c;
		}
	}
	for (c = 0; c < g->st->l.width; c++) {
		struct member *m = &e->m[g->member[c]];

		if (!(s->good & (1ull << c)) || s->seq[c] == s->seq[best])
			continue;
		s->good &= ~(1ull << c);
		m->st.err_checksum++;
		za_log_warn("%s: zone %u offset %llu: column %u holds "
			    "sequence %llu, its stripe %llu",
			    m->dev->path, g->zone[c],
			    (unsigned long long)s->reqs[c].off_bytes, c,
			    (unsigned long long)s->seq[c],
			    (unsigned long long)s->seq[best]);
	}
}

/* k headers verified: the stripe's LBAs into the request's table. */
static int lb_out(struct lb_stripe *s)
{
	struct za_read_lbas *r = s->cx->r;
	const struct za_segment *g = s->g;
	const struct za_stripe_layout *l = &g->st->l;
	uint8_t *tab[ZA_EC_MAX_WIDTH] = { 0 }, *mem = NULL;
	uint64_t avail = 0, want = 0, *out;
	unsigned c, have = 0, ref = 0, n = 0;
	struct za_stripe_hdr h;
	uint32_t j;
	int ret;

	for (c = 0; c < l->width && have < l->k; c++)
		if (s->good & (1ull << c)) {
			tab[c] = s->hdr + (size_t)c * 4096 + ZA_STRIPE_LBA_OFF;
			avail |= 1ull << c;
			ref = c;
			have++;
		}
	/* Verified already: the stripe's kind and length. */
	if (za_stripe_hdr_decode(s->hdr + (size_t)ref * 4096, &h))
		return -EIO;
	if (h.kind != ZA_STRIPE_DATA)
		return 0; /* the owner's numbers, not LBAs: NONE */
	for (c = 0; c < l->k; c++)
		if (!(avail & (1ull << c)))
			want |= 1ull << c;
	if (want) {
		mem = malloc((size_t)__builtin_popcountll(want) *
			     ZA_STRIPE_LBA_BYTES);
		if (!mem)
			return -ENOMEM;
		for (c = 0; c < l->k; c++)
			if (want & (1ull << c))
				tab[c] =
					mem + (size_t)n++ * ZA_STRIPE_LBA_BYTES;
		ret = za_ec_reconstruct(g->st->ec, ZA_STRIPE_LBA_BYTES, tab,
					avail, want);
		if (ret) {
			free(mem);
			return ret;
		}
		r->decoded++;
	}
	out = r->lbas + s->i * l->data_blocks;
	for (c = 0; c < l->k; c++)
		for (j = 0; j < l->col_blocks; j++) {
			uint32_t b = za_stripe_block_of(l, c, j);

			if (b < h.nr_blocks)
				out[b] = za_get_le64(tab[c] + 8 * j);
		}
	free(mem);
	return 0;
}

/*
 * The stripe's state machine, run whenever nothing of it is in flight:
 * done once k headers agree; otherwise read more columns; none left: a
 * dead stripe (a verified hole) or -EIO.
 */
static void lb_step(struct lb_stripe *s)
{
	const struct za_stripe_layout *l = &s->g->st->l;
	unsigned c, have, want;

	if (s->cx->r->result) { /* the request failed: stop here */
		lb_stripe_end(s, 0);
		return;
	}
	lb_agree(s);
	have = (unsigned)__builtin_popcountll(s->good);
	if (have >= l->k) {
		lb_stripe_end(s, lb_out(s));
		return;
	}
	want = l->k - have;
	for (c = 0; c < l->width && want; c++)
		if (!(s->tried & (1ull << c)) && lb_col_start(s, c))
			want--;
	if (s->outstanding)
		return;
	if (s->holes) { /* dead when moved, and nothing else tells */
		lb_stripe_end(s, 0);
		return;
	}
	za_log_err("segment %llu stripe %u: %u of %u stripe headers verify, "
		   "%u needed: LBA table unreadable",
		   (unsigned long long)s->g->id, s->stripe_idx, have, l->width,
		   l->k);
	lb_stripe_end(s, -EIO);
}

static void lb_stripe_start(struct lb_ctx *cx, struct lb_stripe *s, uint64_t i)
{
	struct group *grp = cx->grp;
	uint64_t j = cx->r->first_stripe + i;

	s->g = grp->segs[j % grp->w];
	s->i = i;
	s->stripe_idx = (uint32_t)(j / grp->w);
	s->tried = s->good = s->holes = 0;
	s->outstanding = 0;
	s->busy = true;
	cx->running++;
	if (!s->g) { /* a recovered group's segment nothing was found of */
		za_log_err("group %llu stripe %llu: its segment is lost: LBA "
			   "table unreadable",
			   (unsigned long long)grp->id, (unsigned long long)j);
		lb_stripe_end(s, -EIO);
		return;
	}
	if (s->stripe_idx >= s->g->next_stripe) {
		lb_stripe_end(s, 0); /* never found on the drives: NONE */
		return;
	}
	lb_step(s);
}

static void lb_done_later(struct za_io_defer *d)
{
	struct za_read_lbas *r = container_of(d, struct za_read_lbas, defer);
	struct za_engine *e = r->eng;
	struct group *grp = r->grp;
	uint64_t i, n;

	if (grp) {
		if (r->result) { /* nothing unverified, nothing partial */
			n = (uint64_t)r->nr_stripes * grp->st->l.data_blocks;
			for (i = 0; i < n; i++)
				r->lbas[i] = ZA_STRIPE_LBA_NONE;
		}
		r->grp = NULL;
		if (--grp->readers == 0 && grp->releasing && !grp->rel_reqs)
			eng_group_release_start(e, grp);
	}
	e->reads--;
	r->done(r, r->result);
}

/* Start stripes while there is room; the end once all have ended. */
static void lb_fill(struct lb_ctx *cx)
{
	struct za_read_lbas *r = cx->r;
	unsigned k;

	/* A stripe that ends at once (nothing to read) frees its slot for
	 * the next in this loop, not in a call of its own. */
	cx->filling = true;
	while (!r->result && cx->next < r->nr_stripes &&
	       cx->running < cx->nr_slots) {
		for (k = 0; cx->slot[k].busy; k++)
			;
		lb_stripe_start(cx, &cx->slot[k], cx->next++);
	}
	cx->filling = false;
	if (cx->running)
		return;
	free(cx->hdrs);
	free(cx->reqs);
	free(cx);
	r->ctx = NULL;
	r->defer.fn = lb_done_later;
	za_io_defer(r->eng->io, &r->defer);
}

/* Refuse what cannot be read now: 0, -ENOENT, -EINVAL or -EBUSY. */
static int lb_check(const struct za_read_lbas *r, const struct group *grp)
{
	uint64_t j, end;

	if (!grp || grp->releasing)
		return -ENOENT;
	if (!r->nr_stripes || !r->lbas || r->first_stripe > grp->next_pos ||
	    r->nr_stripes > grp->next_pos - r->first_stripe)
		return -EINVAL;
	/* A segment's stripes are written in order: the range's last
	 * stripe in each segment tells whether any of it is in flight. */
	end = r->first_stripe + r->nr_stripes;
	j = end - r->first_stripe > grp->w ? end - grp->w : r->first_stripe;
	for (; j < end; j++) {
		const struct za_segment *g = grp->segs[j % grp->w];

		if (g && g->inflight &&
		    j / grp->w >= g->next_stripe - g->inflight)
			return -EBUSY;
	}
	return 0;
}

void za_engine_read_lbas(struct za_engine *e, struct za_read_lbas *r)
{
	struct group *grp = eng_group_find(e, r->group_id);
	const struct za_stripe_layout *l;
	struct lb_ctx *cx = NULL;
	unsigned k, slots;
	uint64_t i;

	r->eng = e;
	r->result = lb_check(r, grp);
	r->decoded = 0;
	r->grp = NULL;
	r->ctx = NULL;
	e->reads++;
	if (r->result) {
		r->defer.fn = lb_done_later;
		za_io_defer(e->io, &r->defer);
		return;
	}
	l = &grp->st->l;
	for (i = 0; i < (uint64_t)r->nr_stripes * l->data_blocks; i++)
		r->lbas[i] = ZA_STRIPE_LBA_NONE;
	r->grp = grp;
	grp->readers++;
	slots = r->nr_stripes < LB_WINDOW ? r->nr_stripes : LB_WINDOW;
	cx = calloc(1, sizeof(*cx) + slots * sizeof(cx->slot[0]));
	if (cx) {
		cx->reqs = calloc((size_t)slots * l->width, sizeof(*cx->reqs));
		if (posix_memalign((void **)&cx->hdrs, 4096,
				   (size_t)slots * l->width * 4096))
			cx->hdrs = NULL;
	}
	if (!cx || !cx->reqs || !cx->hdrs) {
		if (cx) {
			free(cx->reqs);
			free(cx->hdrs);
			free(cx);
		}
		r->result = -ENOMEM;
		r->defer.fn = lb_done_later;
		za_io_defer(e->io, &r->defer);
		return;
	}
	cx->r = r;
	cx->e = e;
	cx->grp = grp;
	cx->nr_slots = slots;
	for (k = 0; k < slots; k++) {
		cx->slot[k].cx = cx;
		cx->slot[k].hdr = cx->hdrs + (size_t)k * l->width * 4096;
		cx->slot[k].reqs = cx->reqs + (size_t)k * l->width;
	}
	r->ctx = cx;
	lb_fill(cx); /* done() never runs inside this call */
}

static void sync_lbas_done(struct za_read_lbas *r, int result)
{
	struct sync_ctx *c = r->priv;

	c->result = result;
	c->done = true;
}

int za_engine_read_lbas_sync(struct za_engine *e, uint64_t group_id,
			     uint64_t first_stripe, uint32_t nr_stripes,
			     uint64_t *lbas, uint32_t *decoded)
{
	struct sync_ctx c = { 0 };
	struct za_read_lbas r = { 0 };

	r.group_id = group_id;
	r.first_stripe = first_stripe;
	r.nr_stripes = nr_stripes;
	r.lbas = lbas;
	r.done = sync_lbas_done;
	r.priv = &c;
	za_engine_read_lbas(e, &r);
	za_io_run_until(e->io, &c.done, 0);
	if (decoded)
		*decoded = r.decoded;
	return c.result;
}
