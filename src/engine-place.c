// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * engine-place.c - where the engine's segments go: zones taken from and
 * given back to members, groups of segments opened on the members with
 * the most free zones (their segments cut to balance member pairs),
 * segments finished and groups stopped. It does not write the stripes
 * (engine-write.c) nor reclaim the zones (engine-space.c), and the
 * replacement zones of column rebuilds are chosen in engine-rebuild.c.
 *
 * Placement: a new group takes the writable members with the most free
 * zones that are not already in a taking group of the same stream, ties
 * rotated; so load and capacity spread over all members, mixed sizes
 * included, and each stream holds at most one open zone per member, well
 * inside ZNS open/active limits (counted per member).
 */
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "engine-int.h"

/* ---- placement ---- */

/* Zone @z of @m, if in use, is empty again (reset, or never written):
 * free for segments and rebuilds. The reverse of take_zone_min(). */
void eng_zone_give_back(struct member *m, uint32_t z)
{
	if (m->zkind && m->zkind[z] == Z_USED) {
		m->zkind[z] = Z_FREE;
		m->free_zones++;
	}
}

/* Append @q to @l; false (@l unchanged) without memory. */
bool eng_quar_push(struct quar_list *l, struct quar_zone q)
{
	if (l->nr == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		struct quar_zone *n = realloc(l->v, cap * sizeof(*n));

		if (!n)
			return false;
		l->v = n;
		l->cap = cap;
	}
	l->v[l->nr++] = q;
	return true;
}

void eng_quar_clear(struct quar_list *l)
{
	free(l->v);
	memset(l, 0, sizeof(*l));
}

/*
 * Zone @z of member @mi (free or used, not counted free any more) goes
 * into quarantine until a table numbered above @epoch is live. Returns
 * false, changing nothing, without the memory to list it.
 */
bool eng_quar_add(struct za_engine *e, unsigned mi, uint32_t z, uint32_t epoch)
{
	struct member *m = &e->m[mi];

	if (!eng_quar_push(&e->quar, (struct quar_zone){ .zone = z,
							 .member = (uint16_t)mi,
							 .epoch = epoch }))
		return false;
	m->zkind[z] = Z_QUARANTINE;
	m->quar_zones++;
	return true;
}

/*
 * Zone @z of member @mi, a place of segment @g, was reset (a released
 * group, a column moved off it): free again, unless an engine table taken
 * since @g was opened names it. Such a table may be the one a recovery
 * loads, and recovery takes a written zone the table gives to @g as
 * still @g's (design.md 9.6): so the zone waits in quarantine until a
 * table taken after now is live (za_engine_table_live()). Without memory
 * to list it, it stays used until the next assembly: nothing is lost.
 */
void eng_zone_release(struct za_engine *e, const struct za_segment *g,
		      unsigned mi, uint32_t z)
{
	struct member *m = &e->m[mi];

	if (!m->zkind || m->zkind[z] != Z_USED)
		return;
	if (g->born_epoch == e->tab_epoch || g->st->rescan)
		eng_zone_give_back(m, z);
	else if (!eng_quar_add(e, mi, z, e->tab_epoch))
		za_log_warn("%s: zone %u: no memory to quarantine it; it "
			    "stays in use until the next assembly",
			    m->dev->path, z);
}

void za_engine_stream_set_rescan(struct za_engine *e, unsigned id)
{
	assert(id < e->nr_streams);
	e->streams[id].rescan = true;
}

void za_engine_table_live(struct za_engine *e, uint32_t snap)
{
	size_t i, o;

	for (i = 0, o = 0; i < e->quar.nr; i++) {
		const struct quar_zone *q = &e->quar.v[i];
		struct member *m = &e->m[q->member];

		if (q->epoch >= snap) {
			e->quar.v[o++] = *q;
			continue;
		}
		if (m->zkind && m->zkind[q->zone] == Z_QUARANTINE) {
			m->zkind[q->zone] = Z_FREE;
			m->free_zones++;
			m->quar_zones--;
		}
	}
	e->quar.nr = o;
}

size_t za_engine_quarantine_break(struct za_engine *e)
{
	size_t n = e->quar.nr;

	za_engine_table_live(e, UINT32_MAX);
	return n;
}

size_t za_engine_quarantined(const struct za_engine *e)
{
	return e->quar.nr;
}

static uint32_t take_zone(struct member *m)
{
	uint32_t i, z;

	for (i = 0; i < m->nr_zones; i++) {
		z = (m->hint + i) % m->nr_zones;
		if (m->zkind[z] == Z_FREE) {
			m->zkind[z] = Z_USED;
			m->free_zones--;
			m->hint = z + 1;
			return z;
		}
	}
	assert(0 && "free_zones out of sync");
	return 0;
}

/* Is a better placement candidate than b (more free zones, then rotation)? */
bool eng_better(const struct za_engine *e, unsigned a, unsigned b)
{
	const struct member *ma = &e->m[a], *mb = &e->m[b];
	unsigned n = e->nr_members, r = e->rot % n;

	if (ma->free_zones != mb->free_zones)
		return ma->free_zones > mb->free_zones;
	return (a + n - r) % n < (b + n - r) % n;
}

/* Has a segment of @grp absent columns (opened on too few members)? */
bool eng_group_degraded(const struct group *grp)
{
	unsigned j, c;

	for (j = 0; j < grp->w; j++)
		for (c = 0; grp->segs[j] && c < grp->st->l.width; c++)
			if (eng_col_absent(grp->segs[j], c))
				return true;
	return false;
}
/* Count (@d = 1) or forget (@d = -1) the member pairs of a segment. */
void eng_pairs_add(struct za_engine *e, const struct za_segment *g, int d)
{
	unsigned a, b, w = g->st->l.width;

	for (a = 0; a < w; a++)
		for (b = 0; b < w; b++) {
			unsigned x = g->hdr_member[a], y = g->hdr_member[b];
			uint32_t *p;

			if (a == b || x >= ZA_SB_MAX_MEMBERS ||
			    y >= ZA_SB_MAX_MEMBERS)
				continue;
			p = &e->pairs[(size_t)x * ZA_SB_MAX_MEMBERS + y];
			if (d > 0 && *p < UINT32_MAX)
				(*p)++;
			else if (d < 0 && *p)
				(*p)--;
		}
}

/*
 * Cut the group's chosen members @cand (in shuffled order) into @nseg
 * segments of @present columns, balancing pairs (declustering, as
 * dRAID's permutation maps do): each member goes into the segment whose
 * members it has shared fewest segments with so far, ties to the segment
 * with most room left. When a drive fails, every survivor then holds
 * about the same number of its segments' other columns, and a rebuild
 * reads evenly from all of them; random cuts left some survivors with
 * twice the mean and the rebuild waited for them (bench/results/notes.md, P3).
 * Which members are chosen does not change. Output in @out, segment j's
 * columns at j * present.
 */
static void group_place(const struct za_engine *e, const unsigned *cand,
			unsigned nseg, unsigned present, unsigned *out)
{
	unsigned *fill = calloc(nseg, sizeof(*fill));
	unsigned i, j, c;

	if (!fill) { /* the shuffled cut: still a valid placement */
		memcpy(out, cand, (size_t)nseg * present * sizeof(*out));
		return;
	}
	for (i = 0; i < nseg * present; i++) {
		const uint32_t *row =
			&e->pairs[(size_t)cand[i] * ZA_SB_MAX_MEMBERS];
		unsigned best = UINT_MAX;
		uint64_t best_cost = 0;

		for (j = 0; j < nseg; j++) {
			uint64_t cost = 0;

			if (fill[j] == present)
				continue;
			for (c = 0; c < fill[j]; c++)
				cost += row[out[j * present + c]];
			if (best == UINT_MAX || cost < best_cost ||
			    (cost == best_cost && fill[j] < fill[best])) {
				best = j;
				best_cost = cost;
			}
		}
		out[best * present + fill[best]++] = cand[i];
	}
	free(fill);
}

/* A group's shuffle seed: any well-mixed function of its id (never 0,
 * which xorshift cannot leave). Deterministic, so tests replay. */
static uint64_t grp_shuffle_seed(uint64_t group_id)
{
	return group_id * 0x9e3779b97f4a7c15ull + 1;
}

/*
 * Open a group for @st: W segments on W * width distinct members chosen
 * by free zones. Fewer segments than wanted when members are short of
 * zones or of open-zone budget; NULL when not even one fits. With fewer
 * writable members than width but at least k candidates: one segment on
 * them, its last columns absent (parity first: reads need no decode).
 */
struct group *eng_group_open(struct za_engine *e, struct stream *st)
{
	unsigned *cand, *place, n = 0, i, j, w = st->l.width, want, nseg,
				present;
	uint64_t min_cap = UINT64_MAX;
	struct group *grp;

	cand = malloc(e->nr_members * sizeof(*cand));
	if (!cand)
		return NULL;
	for (i = 0; i < e->nr_members; i++) {
		struct member *m = &e->m[i];

		if (eng_writable(m) && !(m->taking & (1u << st->id)) &&
		    m->free_zones && m->active < m->limit)
			cand[n++] = i;
	}
	want = za_engine_nr_writable(e) / w;
	if (st->max_segs && want > st->max_segs)
		want = st->max_segs;
	nseg = n / w < want ? n / w : want;
	present = w;
	if (!want && n >= st->l.k) {
		/* Forced: fewer than k+p members can write at all. */
		nseg = 1;
		present = n;
	}
	if (!nseg) {
		free(cand);
		return NULL;
	}
	/* Partial selection sort: the nseg * present best candidates first. */
	for (i = 0; i < nseg * present; i++) {
		unsigned best = i;

		for (j = i + 1; j < n; j++)
			if (eng_better(e, cand[j], cand[best]))
				best = j;
		j = cand[i];
		cand[i] = cand[best];
		cand[best] = j;
	}
	/*
	 * Shuffle the chosen members, differently for every group: the order
	 * in which group_place() deals them into segments, so that its ties
	 * fall differently each time. Which members are chosen does not
	 * change.
	 */
	{
		uint64_t x = grp_shuffle_seed(e->next_group_id);

		for (i = nseg * present; i > 1; i--) {
			unsigned t;

			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			j = (unsigned)(x % i);
			t = cand[i - 1];
			cand[i - 1] = cand[j];
			cand[j] = t;
		}
	}
	place = malloc((size_t)nseg * present * sizeof(*place));
	grp = calloc(1, sizeof(*grp));
	if (grp)
		grp->segs = calloc(nseg, sizeof(*grp->segs));
	if (!place || !grp || !grp->segs) {
		if (grp)
			free(grp->segs);
		free(grp);
		free(place);
		free(cand);
		return NULL;
	}
	group_place(e, cand, nseg, present, place);
	grp->id = e->next_group_id++;
	grp->eng = e;
	grp->st = st;
	grp->w = nseg;
	grp->taking = true;
	for (j = 0; j < nseg; j++) {
		struct za_segment *g = eng_seg_alloc(w);

		assert(g); /* small; treat as fatal like the kernel would */
		g->eng = e;
		g->st = st;
		g->grp = grp;
		g->grp_idx = j;
		g->id = e->next_seg_id++;
		g->born_epoch = e->tab_epoch;
		g->state = ZA_SEG_OPEN;
		g->taking = true;
		for (i = 0; i < w; i++) {
			struct member *m;

			g->col_upto[i] = UINT32_MAX;
			if (i >= present) { /* born lost: no member, no zone */
				g->member[i] = ZA_STRIPE_MEMBER_ABSENT;
				g->hdr_member[i] = ZA_STRIPE_MEMBER_ABSENT;
				continue;
			}
			m = &e->m[place[j * present + i]];
			g->member[i] = (uint16_t)place[j * present + i];
			g->zone[i] = take_zone(m);
			g->hdr_member[i] = g->member[i];
			g->hdr_zone[i] = g->zone[i];
			m->active++;
			m->taking |= 1u << st->id;
			if (eng_zcap(m, g->zone[i]) < min_cap)
				min_cap = eng_zcap(m, g->zone[i]);
		}
		eng_seg_insert(e, g);
		grp->segs[j] = g;
		eng_pairs_add(e, g, 1);
		e->st.segs_opened++;
	}
	grp->nr_stripes = (uint32_t)(min_cap / st->l.slot_bytes);
	for (j = 0; j < nseg; j++)
		grp->segs[j]->nr_stripes = grp->nr_stripes;
	eng_group_insert(e, grp);
	st->cur = grp;
	e->rot += nseg * present;
	e->st.groups_opened++;
	free(place);
	free(cand);
	if (present < w)
		za_log_warn("stream %u: group %llu opened degraded: %u of %u "
			    "columns (%u writable members), %u absent",
			    st->id, (unsigned long long)grp->id, present, w,
			    za_engine_nr_writable(e), w - present);
	za_log_debug("stream %u: group %llu opened: %u segments of %u stripes",
		     st->id, (unsigned long long)grp->id, nseg,
		     grp->nr_stripes);
	return grp;
}

static void seg_finish_done(struct za_dev_req *req)
{
	struct za_segment *g = req->priv;

	if (req->result && req->result != -ENODEV)
		za_log_warn("%s: zone at %llu: finish failed: %s",
			    req->dev->path, (unsigned long long)req->off_bytes,
			    strerror(-req->result));
	g->eng->fin_pending--;
	if (--g->fin_pending == 0) {
		free(g->fin);
		g->fin = NULL;
	}
}

/*
 * A segment that takes no more stripes and has none in flight: FINISH its
 * zones (releasing open/active resources on the drives) and stop counting
 * them against the members' limits.
 */
void eng_seg_maybe_finish(struct za_engine *e, struct za_segment *g)
{
	unsigned i, w = g->st->l.width;

	if (g->taking || g->inflight || g->finished)
		return;
	g->finished = true;
	g->state = ZA_SEG_SEALED;
	e->st.segs_sealed++;
	g->fin = calloc(w, sizeof(*g->fin));
	for (i = 0; i < w; i++) {
		struct member *m = &e->m[g->member[i]];
		uint64_t zstart = (uint64_t)g->zone[i] * m->zone_bytes;

		if (eng_col_absent(g, i))
			continue; /* no zone was taken for it */
		m->active--;
		if (!g->fin || !eng_writable(m) ||
		    (uint64_t)g->next_stripe * g->st->l.slot_bytes >=
			    eng_zcap(m, g->zone[i]))
			continue;
		g->fin[i].op = ZA_DEV_OP_FINISH;
		g->fin[i].off_bytes = zstart;
		g->fin[i].done = seg_finish_done;
		g->fin[i].priv = g;
		g->fin_pending++;
		e->fin_pending++;
		za_dev_submit(m->dev, &g->fin[i]);
	}
	if (g->fin && !g->fin_pending) {
		free(g->fin);
		g->fin = NULL;
	}
}

/* Stop @grp taking stripes (full, or a column failed): seal its segments. */
void eng_group_stop(struct za_engine *e, struct group *grp)
{
	unsigned i, j;

	if (!grp->taking)
		return;
	grp->taking = false;
	if (grp->st->cur == grp)
		grp->st->cur = NULL;
	for (j = 0; j < grp->w; j++) {
		struct za_segment *g = grp->segs[j];

		g->taking = false;
		for (i = 0; i < grp->st->l.width; i++)
			e->m[g->member[i]].taking &= ~(1u << grp->st->id);
	}
	for (j = 0; j < grp->w; j++)
		eng_seg_maybe_finish(e, grp->segs[j]);
}
