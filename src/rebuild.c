// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * rebuild.c - the rebuild job: finds the segment columns that sit on lost
 * members, tells their live stripes from dead ones through the volume's
 * map, and has the engine rebuild each column into a replacement zone,
 * many columns at once, least redundancy first, paced and pausable.
 *
 * Big theory
 * ----------
 * Redundancy is a property of segments, not of drives. When member X is
 * lost, every segment with a column on X has one column fewer; the others
 * are untouched. A run goes in passes:
 *
 *   1. list:    za_engine_degraded(): segments with lost columns, those
 *               with the most lost first (then metadata streams first);
 *   2. liveness: one walk of the volume's map marks, per listed segment,
 *               the stripes that hold a block the map still points at
 *               (journal and metadata segments count as wholly live: they
 *               hold records the map does not show);
 *   3. flush:   a volume flush started after the walk, so that every
 *               block the walk saw dead is dead on the drives too (an
 *               acknowledged overwrite still in memory would otherwise
 *               come back after a crash and need the old stripe);
 *   4. columns: a segment with no live stripe is left as it is (garbage
 *               collection frees it first: it is all dead); otherwise
 *               each lost column is rebuilt up to its last live stripe,
 *               dead stripes before it written as holes without reading
 *               anything (za_engine_col_rebuild());
 *   5. again:   a failure meanwhile, or segments still being written,
 *               start another pass once the columns in flight are done.
 *
 *      member:  0   1   2   3   4   5   6   7   8   9  10  11
 *   seg 17:    [d] [d] [X] [d] [P] [P]  .   .   .   .   .   .
 *   seg 18:     .   .   .   .   .   .  [d] [d] [d] [d] [P] [P]
 *   seg 19:    [d] [P]  .  [d] [P] [d]  .   .   .   .   .   .
 *                        X fails: only seg 17 lost a column; it is
 *                        decoded from k of its others and written to a
 *                        free zone of a member outside seg 17 (say 8).
 *
 * Every surviving member works: a pass starts its columns all at once
 * (up to a memory budget, max_cols()), the engine counts what each
 * member will read for them (za_engine_rebuild_plan()), each stripe reads
 * the k least busy of its readable columns, and each column is written
 * to the member outside its segment with least rebuild work, chosen
 * again when its first slot is ready (the engine's rb_bind()). Placement
 * spreads a drive's segments evenly over all the others (group_place()),
 * so every survivor holds about the same share of the reads. Bytes read
 * are k per byte of lost live column; nothing dead is read or decoded.
 *
 * Progress counts bytes of lost live columns restored (done/total; total
 * grows when a new failure adds work). The rate limit is a token bucket
 * over those bytes. Pause aborts the columns under way (stripes in flight
 * finish, replacement zones are given back): a paused rebuild holds no
 * space and no segment; resume lists the work again.
 */
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "container.h"
#include "log.h"
#include "pace.h"
#include "rebuild.h"

#define GRP_HASH 256u
#define BUSY_RETRY_NS (50ull * 1000 * 1000)

struct rseg {
	struct za_engine_degraded d;
	uint64_t *live; /* nr_written bits */
	uint32_t nr_live;
	uint32_t last_live; /* valid if nr_live */
};

struct rgrp {
	uint64_t id;
	unsigned w;
	struct rseg **segs; /* by place in the group */
	struct rgrp *next;
};

struct rcol {
	struct za_col_rebuild cr;
	struct za_rebuild *rb;
	uint64_t done_bytes; /* counted in the run's progress */
	struct rcol *next;
};

struct za_rebuild {
	struct za_rebuild_params p;
	enum za_rebuild_state state;
	bool stopping;
	bool rescan; /* look again when the columns in flight are done */
	bool busy_left; /* some listed segments were still being written */
	bool space_wait; /* a column waits for GC to free space */
	bool flushing;
	bool timer_pending;
	bool start_again; /* a start came while the last run wound down */
	bool in_pass;

	/* the current pass */
	struct rseg *segs;
	size_t nr_segs, next_seg;
	uint64_t next_todo; /* columns of segs[next_seg] not started yet */
	struct rgrp *ghash[GRP_HASH];
	struct rcol *running;
	unsigned nr_running;
	struct za_vol_req flush;
	struct za_io_defer timer;
	int error; /* of the run: the first column that could not be done */

	/* replace: where the columns of a draining member go (-1: any) */
	int dest[ZA_SB_MAX_MEMBERS];

	struct za_pace pace; /* the rate limit's bucket, the rate shown */

	/* progress */
	struct za_rebuild_status st;
	uint64_t start_ns, end_ns;
};

const char *za_rebuild_state_str(enum za_rebuild_state s)
{
	switch (s) {
	case ZA_REBUILD_IDLE:
		return "idle";
	case ZA_REBUILD_RUNNING:
		return "running";
	case ZA_REBUILD_PAUSED:
		return "paused";
	case ZA_REBUILD_DONE:
		return "done";
	}
	return "unknown";
}

int za_rebuild_new(const struct za_rebuild_params *p, struct za_rebuild **out)
{
	struct za_rebuild *rb = calloc(1, sizeof(*rb));

	if (!rb)
		return -ENOMEM;
	rb->p = *p;
	rb->st.rate_limit_bps = p->rate_bps;
	for (unsigned i = 0; i < ZA_SB_MAX_MEMBERS; i++)
		rb->dest[i] = -1;
	*out = rb;
	return 0;
}

static void pass_clear(struct za_rebuild *rb)
{
	size_t i;
	unsigned h;

	for (i = 0; i < rb->nr_segs; i++)
		free(rb->segs[i].live);
	free(rb->segs);
	rb->segs = NULL;
	rb->nr_segs = rb->next_seg = 0;
	rb->next_todo = 0;
	rb->space_wait = false;
	for (h = 0; h < GRP_HASH; h++) {
		struct rgrp *g;

		while ((g = rb->ghash[h])) {
			rb->ghash[h] = g->next;
			free(g->segs);
			free(g);
		}
	}
}

bool za_rebuild_busy(const struct za_rebuild *rb)
{
	return rb->nr_running || rb->flushing || rb->timer_pending;
}

void za_rebuild_free(struct za_rebuild *rb)
{
	if (!rb)
		return;
	pass_clear(rb);
	free(rb);
}

/* ---- pacing ---- */

/* Abort every column under way: done(-ECANCELED) once its stripes in
 * flight end, inside the call when none are (col_done() then unlinks it:
 * the next one is taken first). */
static void abort_all(struct za_rebuild *rb)
{
	struct rcol *c, *next;

	for (c = rb->running; c; c = next) {
		next = c->next;
		za_engine_col_rebuild_abort(rb->p.eng, &c->cr);
	}
}

static void kick_all(struct za_rebuild *rb)
{
	struct rcol *c, *next;

	for (c = rb->running; c; c = next) {
		next = c->next; /* a kick may end the column */
		za_engine_col_rebuild_kick(rb->p.eng, &c->cr);
	}
}

static void pass_begin(struct za_rebuild *rb);
static void dispatch(struct za_rebuild *rb);

static void on_timer(struct za_io_defer *d)
{
	struct za_rebuild *rb = container_of(d, struct za_rebuild, timer);

	rb->timer_pending = false;
	if (rb->state != ZA_REBUILD_RUNNING && rb->state != ZA_REBUILD_PAUSED) {
		/* The run ended with this timer set: a start waited for it. */
		if (rb->start_again && !rb->stopping) {
			rb->start_again = false;
			za_rebuild_start(rb);
		}
		return;
	}
	kick_all(rb);
	/* A pass waiting for free space: try its next column again. */
	if (rb->in_pass) {
		dispatch(rb);
		return;
	}
	/* A pass waiting for segments still being written: look again. */
	if (rb->state == ZA_REBUILD_RUNNING)
		pass_begin(rb);
}

static void timer_at(struct za_rebuild *rb, uint64_t when_ns)
{
	if (rb->timer_pending)
		return;
	rb->timer_pending = true;
	rb->timer.fn = on_timer;
	za_io_defer_at(rb->p.io, &rb->timer, when_ns);
}

static bool may_start(struct za_col_rebuild *cr, uint64_t bytes)
{
	struct rcol *c = cr->priv;
	struct za_rebuild *rb = c->rb;
	uint64_t retry_ns;

	if (rb->state != ZA_REBUILD_RUNNING || rb->stopping)
		return false;
	if (za_pace_take(&rb->pace, rb->st.rate_limit_bps, bytes,
			 za_io_now_ns(), &retry_ns))
		return true;
	timer_at(rb, retry_ns);
	return false;
}

static void on_progress(struct za_col_rebuild *cr, uint64_t bytes)
{
	struct rcol *c = cr->priv;
	struct za_rebuild *rb = c->rb;

	c->done_bytes += bytes;
	rb->st.done_bytes += bytes;
	za_pace_sample(&rb->pace, rb->st.done_bytes, za_io_now_ns(),
		       &rb->st.rate_bps);
}

/* ---- columns ---- */

static void run_end(struct za_rebuild *rb, int result)
{
	rb->in_pass = false;
	pass_clear(rb);
	rb->state = ZA_REBUILD_DONE;
	rb->stopping = false;
	rb->end_ns = za_io_now_ns();
	rb->st.last_error = result;
	if (!result)
		rb->st.rate_bps = 0;
	/* Everything was done: what the total still counts vanished on the
	 * way (garbage collection freed those segments, or a column found
	 * them dead). A run that ended "done" shows 100%. */
	if (!result && !rb->st.cols_waiting && !rb->st.cols_failed)
		rb->st.total_bytes = rb->st.done_bytes;
	za_log_info("rebuild: %s: %llu of %llu bytes restored, %llu columns "
		    "rebuilt, %llu dead left alone, %llu failed, in %.1f s",
		    result ? strerror(-result) : "done",
		    (unsigned long long)rb->st.done_bytes,
		    (unsigned long long)rb->st.total_bytes,
		    (unsigned long long)rb->st.cols_done,
		    (unsigned long long)rb->st.cols_dead,
		    (unsigned long long)rb->st.cols_failed,
		    (double)(rb->end_ns - rb->start_ns) / 1e9);
	if (rb->st.cols_waiting)
		za_log_warn(
			"rebuild: %llu columns have no member outside their "
			"segment with a free zone: the array stays "
			"degraded until a drive is added",
			(unsigned long long)rb->st.cols_waiting);
	if (rb->p.finished)
		rb->p.finished(rb, result, rb->p.priv);
}

static void col_done(struct za_col_rebuild *cr, int result)
{
	struct rcol *c = cr->priv, **pp;
	struct za_rebuild *rb = c->rb;

	for (pp = &rb->running; *pp != c; pp = &(*pp)->next)
		;
	*pp = c->next;
	rb->nr_running--;
	rb->st.read_bytes += cr->read_bytes;
	rb->st.written_bytes += cr->written_bytes;
	if (result == -ECANCELED) {
		/* Aborted (a pause, a stop): its replacement zone was given
		 * back, so what it restored is not restored. A run's count
		 * is only reset with no column running. */
		assert(c->done_bytes <= rb->st.done_bytes);
		rb->st.done_bytes -= c->done_bytes;
		za_pace_unsample(&rb->pace, c->done_bytes);
	}
	if (!result) {
		rb->st.cols_done++;
	} else if (result != -ECANCELED) {
		rb->st.cols_failed++;
		/* Try again in a later pass (another member may take it);
		 * data beyond the redundancy stays -EIO. */
		if (!rb->error)
			rb->error = result;
		if (result != -EIO)
			rb->rescan = true;
	}
	free(c);
	dispatch(rb);
}

static int col_start(struct za_rebuild *rb, struct rseg *s, unsigned col)
{
	struct rcol *c = calloc(1, sizeof(*c));
	struct za_seg_info si;
	int ret;

	if (!c)
		return -ENOMEM;
	c->rb = rb;
	c->cr.seg_id = s->d.seg_id;
	c->cr.col = col;
	c->cr.nr_stripes = s->last_live + 1;
	c->cr.live = s->live;
	c->cr.window = rb->p.window;
	/* A column on a draining member is moved, not decoded. */
	c->cr.move = !(s->d.lost_cols & (1ull << col));
	if (za_engine_seg_info(rb->p.eng, s->d.seg_id, &si))
		si.members[col] = UINT16_MAX;
	/* Listed when its member was draining, which is in service again
	 * (a replace whose new drive failed): it stays. (One that failed
	 * since is listed as lost by the pass its failure starts.) */
	if (c->cr.move && si.members[col] < ZA_SB_MAX_MEMBERS &&
	    za_engine_member_state(rb->p.eng, si.members[col]) ==
		    ZA_MEMBER_ONLINE) {
		free(c);
		return -EALREADY;
	}
	/* The replace's new drive, while it is in service: one that failed
	 * or is being removed itself takes no column, and asking for it
	 * would only cost each column a refused try first. */
	if (si.members[col] < ZA_SB_MAX_MEMBERS &&
	    rb->dest[si.members[col]] >= 0 &&
	    za_engine_member_state(rb->p.eng,
				   (unsigned)rb->dest[si.members[col]]) ==
		    ZA_MEMBER_ONLINE) {
		c->cr.want_dst = true;
		c->cr.dst_member = (unsigned)rb->dest[si.members[col]];
	}
	c->cr.may_start = may_start;
	c->cr.progress = on_progress;
	c->cr.done = col_done;
	c->cr.priv = c;
	ret = za_engine_col_rebuild(rb->p.eng, &c->cr);
	if (c->cr.want_dst &&
	    (ret == -ENOSPC || (ret == -EAGAIN && !rb->nr_running))) {
		/* The chosen drive cannot take this one, and none of its
		 * columns running will free its open-zone budget: any drive
		 * will do. */
		c->cr.want_dst = false;
		ret = za_engine_col_rebuild(rb->p.eng, &c->cr);
	}
	if (ret) {
		free(c);
		return ret;
	}
	c->next = rb->running;
	rb->running = c;
	rb->nr_running++;
	return 0;
}

/*
 * As many columns at once as RB_MEM_BYTES of buffers hold (each holds
 * width + 1 slots per stripe in flight), and at least two per k + 1
 * writable members (each column reads k members and writes one). A pass
 * is fastest with all its columns queued at once: the engine then evens
 * out every member's share of the pass (za_engine_rebuild_plan()); in
 * waves of two per k + 1 members, 256 drives rebuilt at 0.60 of the
 * survivor-bandwidth limit instead of 0.92 (docs/design.md 9.4).
 */
#define RB_MEM_BYTES (1ull << 30)
/* With a rate limit: columns under way for this many seconds of it. */
#define RB_RATE_AHEAD_S 2u

static unsigned max_cols(const struct za_rebuild *rb)
{
	const struct za_stripe_layout *l = za_engine_layout(rb->p.eng);
	struct za_engine_space sp;
	uint64_t stripes, win, n, floor;

	if (rb->p.max_cols)
		return rb->p.max_cols;
	za_engine_space(rb->p.eng, &sp);
	stripes = l->data_blocks ? sp.data_blocks_per_seg / l->data_blocks : 1;
	win = rb->p.window ? rb->p.window : 4;
	if (win > stripes)
		win = stripes ? stripes : 1;
	n = RB_MEM_BYTES / ((l->width + 1) * l->slot_bytes * win);
	floor = 2 * za_engine_nr_writable(rb->p.eng) / (l->k + 1);
	if (n < floor)
		n = floor;
	/*
	 * Rate-limited: no more columns than RB_RATE_AHEAD_S of the rate
	 * keeps busy. Each column under way holds a free zone and keeps its
	 * segment from GC; started all at once, a slow rebuild held them
	 * for minutes while it crept through all of them at the same time,
	 * and could leave too few free zones to open a segment (the state
	 * of tools/zloop seed 130008, with --rate 1 before its pause).
	 */
	if (rb->st.rate_limit_bps && stripes) {
		uint64_t by_rate = rb->st.rate_limit_bps * RB_RATE_AHEAD_S /
				   (stripes * l->col_payload_bytes);

		if (n > by_rate)
			n = by_rate;
	}
	if (n < 2)
		n = 2;
	return n > UINT_MAX ? UINT_MAX : (unsigned)n;
}

/* Start columns while the budget allows; end the pass when all are done. */
static void dispatch(struct za_rebuild *rb)
{
	unsigned budget = max_cols(rb);

	while (rb->state == ZA_REBUILD_RUNNING && rb->in_pass &&
	       !rb->flushing && !rb->stopping && !rb->rescan &&
	       rb->next_seg < rb->nr_segs && rb->nr_running < budget) {
		struct rseg *s = &rb->segs[rb->next_seg];
		unsigned col;
		int ret;

		if (!rb->next_todo) {
			rb->next_seg++;
			if (rb->next_seg < rb->nr_segs)
				rb->next_todo = rb->segs[rb->next_seg].d.todo;
			continue;
		}
		col = (unsigned)__builtin_ctzll(rb->next_todo);
		rb->next_todo &= rb->next_todo - 1;
		if (s->d.busy) {
			int b = za_engine_col_busy(rb->p.eng, s->d.seg_id, col);

			if (b == -ENOSPC || b == -EAGAIN)
				rb->st.cols_waiting++; /* for a drive */
			else
				rb->busy_left = true;
			continue;
		}
		if (!s->nr_live) {
			za_engine_seg_mark_dead(rb->p.eng, s->d.seg_id,
						1ull << col);
			rb->st.cols_dead++;
			continue;
		}
		/* A new column takes a free zone: not out of GC's reserve
		 * (za_volume_spare_ok). Wait, keeping this column next. */
		if (rb->p.vol && !za_volume_spare_ok(rb->p.vol)) {
			rb->next_todo |= 1ull << col;
			if (!rb->space_wait) {
				rb->st.space_waits++;
				za_log_info("rebuild: waiting for garbage "
					    "collection to free space");
			}
			rb->space_wait = true;
			break;
		}
		rb->space_wait = false;
		ret = col_start(rb, s, col);
		if (ret == -EAGAIN && rb->nr_running) {
			/* The members that could take it have their open-zone
			 * budget in use, by columns running: go on when one
			 * ends (col_done()), keeping this column next. */
			rb->next_todo |= 1ull << col;
			break;
		}
		if (ret == -EBUSY) {
			rb->busy_left = true;
		} else if (ret == -ENOSPC || ret == -EAGAIN) {
			/* Every member outside the segment is in it, failed
			 * or full: not an error, the column waits for a drive
			 * (za_array_add starts the rebuild again). */
			rb->st.cols_waiting++;
		} else if (ret && ret != -EALREADY && ret != -ENOENT) {
			za_log_err("rebuild: segment %llu column %u: %s",
				   (unsigned long long)s->d.seg_id, col,
				   strerror(-ret));
			rb->st.cols_failed++;
			if (!rb->error)
				rb->error = ret;
		}
	}
	if (!rb->in_pass || rb->flushing || rb->nr_running)
		return;
	if (rb->stopping) {
		run_end(rb, -ECANCELED);
		return;
	}
	/* Paused: the pass waits, holding nothing, until resume() lists the
	 * work again. */
	if (rb->state == ZA_REBUILD_PAUSED)
		return;
	if (rb->space_wait && !rb->rescan) {
		/* Nothing running will call back: poll. */
		timer_at(rb, za_io_now_ns() + BUSY_RETRY_NS);
		return;
	}
	if (rb->next_seg < rb->nr_segs && !rb->rescan)
		return; /* cannot happen: the loop above ran them all */
	/* The pass is over. */
	rb->in_pass = false;
	pass_clear(rb);
	if (rb->rescan) {
		rb->rescan = false;
		rb->busy_left = false;
		pass_begin(rb);
		return;
	}
	if (rb->busy_left) {
		rb->busy_left = false;
		timer_at(rb, za_io_now_ns() + BUSY_RETRY_NS);
		return;
	}
	run_end(rb, rb->error);
}

/* ---- a pass: list, liveness, flush ---- */

static struct rgrp *grp_find(struct za_rebuild *rb, uint64_t id)
{
	struct rgrp *g;

	for (g = rb->ghash[id % GRP_HASH]; g; g = g->next)
		if (g->id == id)
			return g;
	return NULL;
}

static void set_live(struct rseg *s, uint32_t idx)
{
	if (idx >= s->d.nr_written)
		return;
	if (s->live[idx / 64] & (1ull << (idx % 64)))
		return;
	s->live[idx / 64] |= 1ull << (idx % 64);
	if (!s->nr_live || idx > s->last_live)
		s->last_live = idx;
	s->nr_live++;
}

static int live_extent(void *priv, uint64_t group, uint64_t pos, uint64_t n)
{
	struct za_rebuild *rb = priv;
	struct rgrp *g = grp_find(rb, group);
	const struct za_stripe_layout *l;
	uint64_t j, j0, j1;

	if (!g || !n)
		return 0;
	for (j = 0; j < g->w && !g->segs[j]; j++)
		;
	if (j == g->w)
		return 0;
	l = za_engine_stream_layout(rb->p.eng, g->segs[j]->d.stream);
	j0 = pos / l->data_blocks;
	j1 = (pos + n - 1) / l->data_blocks;
	for (j = j0; j <= j1; j++) {
		struct rseg *s = g->segs[j % g->w];

		if (s)
			set_live(s, (uint32_t)(j / g->w));
	}
	return 0;
}

static void flushed(struct za_vol_req *r, int result)
{
	struct za_rebuild *rb = r->priv;
	size_t i;

	rb->flushing = false;
	if (result) {
		/* Liveness is not known to be durable: count all as live. */
		za_log_warn("rebuild: volume flush failed (%s): dead stripes "
			    "are rebuilt too",
			    strerror(-result));
		for (i = 0; i < rb->nr_segs; i++) {
			struct rseg *s = &rb->segs[i];
			uint32_t k;

			for (k = 0; k < s->d.nr_written; k++)
				set_live(s, k);
		}
	}
	/*
	 * A pass starts with nothing in flight, so the run's total is what
	 * is done plus what this pass lists. Adding each pass's list to the
	 * total instead counted again every column a pass listed but did
	 * not start (a new failure ends a pass early; a segment still being
	 * written is retried every 50 ms): the total grew past the work.
	 */
	rb->st.total_bytes = rb->st.done_bytes;
	for (i = 0; i < rb->nr_segs; i++) {
		const struct rseg *s = &rb->segs[i];
		const struct za_stripe_layout *l =
			za_engine_stream_layout(rb->p.eng, s->d.stream);

		rb->st.total_bytes += (uint64_t)s->nr_live *
				      l->col_payload_bytes *
				      (unsigned)__builtin_popcountll(s->d.todo);
	}
	za_engine_rebuild_plan(rb->p.eng);
	dispatch(rb);
}

/*
 * List the degraded segments and walk the map for their live stripes
 * (steps 1 and 2). Returns 0 with rb->nr_segs == 0 when nothing is
 * degraded, or -errno; on an error the lists are cleared.
 */
static int list_live(struct za_rebuild *rb)
{
	struct za_engine_degraded *d;
	size_t n, i;
	int ret = 0;

	n = za_engine_degraded(rb->p.eng, NULL, 0);
	if (!n)
		return 0;
	rb->segs = calloc(n, sizeof(*rb->segs));
	d = calloc(n, sizeof(*d));
	if (!rb->segs || !d) {
		free(rb->segs);
		free(d);
		rb->segs = NULL;
		return -ENOMEM;
	}
	rb->nr_segs = za_engine_degraded(rb->p.eng, d, n);
	if (rb->nr_segs > n) /* cannot grow in between: same tick */
		rb->nr_segs = n;
	for (i = 0; i < rb->nr_segs; i++)
		rb->segs[i].d = d[i];
	free(d);
	for (i = 0; i < rb->nr_segs && !ret; i++) {
		struct rseg *s = &rb->segs[i];
		struct rgrp *g;

		s->live = calloc((s->d.nr_written + 63) / 64 + 1,
				 sizeof(*s->live));
		if (!s->live) {
			ret = -ENOMEM;
			break;
		}
		g = grp_find(rb, s->d.group_id);
		if (!g) {
			g = calloc(1, sizeof(*g));
			if (g)
				g->segs =
					calloc(s->d.group_w, sizeof(*g->segs));
			if (!g || !g->segs) {
				free(g);
				ret = -ENOMEM;
				break;
			}
			g->id = s->d.group_id;
			g->w = s->d.group_w;
			g->next = rb->ghash[g->id % GRP_HASH];
			rb->ghash[g->id % GRP_HASH] = g;
		}
		if (s->d.group_pos < g->w)
			g->segs[s->d.group_pos] = s;
		/* Journal and metadata segments hold records the map does
		 * not show (unmaps, checkpoints): all of it counts. */
		if (s->d.stream != ZA_STREAM_DATA) {
			uint32_t k;

			for (k = 0; k < s->d.nr_written; k++)
				set_live(s, k);
		}
	}
	if (!ret && rb->p.vol)
		ret = za_volume_walk_live(rb->p.vol, live_extent, rb);
	else if (!ret) /* no volume: everything written is live */
		for (i = 0; i < rb->nr_segs; i++) {
			uint32_t k;

			for (k = 0; k < rb->segs[i].d.nr_written; k++)
				set_live(&rb->segs[i], k);
		}
	if (ret)
		pass_clear(rb);
	return ret;
}

static void pass_begin(struct za_rebuild *rb)
{
	int ret;

	rb->st.cols_waiting = 0; /* counted again by this pass */
	ret = list_live(rb);
	if (ret) {
		za_log_err("rebuild: cannot list live data: %s",
			   strerror(-ret));
		run_end(rb, ret);
		return;
	}
	if (!rb->nr_segs) {
		run_end(rb, rb->error);
		return;
	}
	rb->in_pass = true;
	rb->next_seg = 0;
	rb->next_todo = rb->segs[0].d.todo;
	za_log_info("rebuild: %zu degraded segments to look at", rb->nr_segs);
	if (!rb->p.vol) {
		rb->flushing = true;
		flushed(&rb->flush, 0);
		return;
	}
	memset(&rb->flush, 0, sizeof(rb->flush));
	rb->flush.done = flushed;
	rb->flush.priv = rb;
	rb->flushing = true;
	za_volume_flush(rb->p.vol, &rb->flush);
}

int za_rebuild_mark_dead_now(struct za_rebuild *rb)
{
	unsigned marked = 0;
	size_t i;
	int ret;

	if (rb->in_pass || !rb->p.vol)
		return 0;
	ret = list_live(rb);
	if (ret)
		return ret;
	for (i = 0; i < rb->nr_segs; i++) {
		const struct rseg *s = &rb->segs[i];
		uint64_t cols = s->d.lost_cols & s->d.todo;

		if (s->nr_live || !cols || s->d.busy)
			continue;
		za_engine_seg_mark_dead(rb->p.eng, s->d.seg_id, cols);
		marked += (unsigned)__builtin_popcountll(cols);
	}
	if (marked)
		za_log_info("rebuild: %u lost columns of segments with no live "
			    "data left alone",
			    marked);
	pass_clear(rb);
	return 0;
}

/* ---- control ---- */

void za_rebuild_start(struct za_rebuild *rb)
{
	if (rb->state == ZA_REBUILD_RUNNING || rb->state == ZA_REBUILD_PAUSED) {
		/* A new failure: look again once the columns in flight end. */
		if (rb->in_pass)
			rb->rescan = true;
		else if (!rb->timer_pending && rb->state == ZA_REBUILD_RUNNING)
			pass_begin(rb);
		return;
	}
	if (rb->stopping)
		return; /* stopped on purpose: the array is going away */
	if (za_rebuild_busy(rb)) {
		/* Only a timer of the run that ended can be left (a run ends
		 * with no column running and no flush): start when it fires.
		 * Dropping the start instead left a member that failed just
		 * as a run ended unrebuilt until the next restart (zloop). */
		rb->start_again = true;
		return;
	}
	rb->state = ZA_REBUILD_RUNNING;
	rb->error = 0;
	rb->st.done_bytes = rb->st.total_bytes = 0;
	rb->st.read_bytes = rb->st.written_bytes = 0;
	rb->st.cols_done = rb->st.cols_dead = rb->st.cols_failed = 0;
	rb->st.rate_bps = 0;
	rb->st.last_error = 0;
	memset(&rb->pace, 0, sizeof(rb->pace));
	rb->start_ns = za_io_now_ns();
	rb->end_ns = 0;
	pass_begin(rb);
}

/*
 * A paused rebuild holds no space. Its columns under way are aborted:
 * stripes in flight finish, and each column's replacement zone is given
 * back (an unfinished copy is of no use). A pause that kept them held a
 * free zone per column for as long as it lasted, and pinned their
 * segments against garbage collection: with a replace's 29 columns on
 * the new drive, the other members' free zones could no longer make a
 * segment, GC moved its own young groups round and round, and writes
 * waited for minutes (tools/zloop seed 130008). At most a zone's worth
 * of copying per column is done again after resume(), which lists the
 * work afresh.
 */
void za_rebuild_pause(struct za_rebuild *rb)
{
	if (rb->state != ZA_REBUILD_RUNNING)
		return;
	rb->state = ZA_REBUILD_PAUSED;
	abort_all(rb);
}

void za_rebuild_resume(struct za_rebuild *rb)
{
	if (rb->state != ZA_REBUILD_PAUSED)
		return;
	rb->state = ZA_REBUILD_RUNNING;
	if (rb->in_pass) {
		/* What the pass listed may be gone or dead by now: its end
		 * (once aborted columns are done) begins a new one. */
		rb->rescan = true;
		dispatch(rb);
		return;
	}
	if (!rb->timer_pending)
		pass_begin(rb);
}

void za_rebuild_set_rate(struct za_rebuild *rb, uint64_t rate_bps)
{
	rb->st.rate_limit_bps = rate_bps;
	za_pace_reset_bucket(&rb->pace);
	kick_all(rb);
}

void za_rebuild_stop(struct za_rebuild *rb)
{
	/* A start waiting for the last run's timer is cancelled too: the
	 * array may be going away (its stop waits for that timer). */
	rb->start_again = false;
	if (rb->state != ZA_REBUILD_RUNNING && rb->state != ZA_REBUILD_PAUSED)
		return;
	rb->stopping = true;
	abort_all(rb);
	/* Columns with nothing in flight end inside the abort, and the last
	 * one's col_done() ends the run: ending it here again called
	 * finished() twice (a stop right after the columns started). */
	if (rb->state == ZA_REBUILD_DONE)
		return;
	if (rb->in_pass && !rb->nr_running && !rb->flushing) {
		run_end(rb, -ECANCELED);
	} else if (!rb->in_pass) {
		/* Waiting on the busy-retry timer: end now. */
		run_end(rb, -ECANCELED);
	}
}

void za_rebuild_status(const struct za_rebuild *rb,
		       struct za_rebuild_status *st)
{
	uint64_t left;

	*st = rb->st;
	st->state = rb->state;
	st->elapsed_ns = rb->start_ns ?
				 (rb->end_ns ? rb->end_ns : za_io_now_ns()) -
					 rb->start_ns :
				 0;
	left = st->total_bytes > st->done_bytes ?
		       st->total_bytes - st->done_bytes :
		       0;
	st->eta_s = st->rate_bps && rb->state == ZA_REBUILD_RUNNING ?
			    (left + st->rate_bps - 1) / st->rate_bps :
			    0;
}

void za_rebuild_set_dest(struct za_rebuild *rb, unsigned from, int to)
{
	if (from < ZA_SB_MAX_MEMBERS)
		rb->dest[from] = to;
}
