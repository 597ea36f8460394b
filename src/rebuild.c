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
#include "rebuild.h"

#define BUSY_RETRY_NS (50ull * 1000 * 1000)

struct rseg {
	struct za_engine_degraded d;
	struct za_live_seg ls; /* its live stripes (job.h) */
};

struct rcol {
	struct za_col_rebuild cr;
	struct za_rebuild *rb;
	uint64_t done_bytes; /* counted in the run's progress */
	struct rcol *next;
};

struct za_rebuild {
	struct za_rebuild_params p;
	struct za_job job; /* state, pacing, progress, the timer */
	bool rescan; /* look again when the columns in flight are done */
	bool busy_left; /* some listed segments were still being written */
	bool space_wait; /* a column waits for GC to free space */
	bool flushing;
	bool start_again; /* a start came while the last run wound down */
	bool in_pass;
	bool map_wait; /* for the volume's map pages (list_live()) */
	struct za_vol_mwait mw;

	/* the current pass */
	struct rseg *segs;
	size_t nr_segs, next_seg;
	uint64_t next_todo; /* columns of segs[next_seg] not started yet */
	struct za_live_set live;
	struct rcol *running;
	unsigned nr_running;
	struct za_vol_req flush;
	int error; /* of the run: the first column that could not be done */

	/* replace: where the columns of a draining member go (-1: any) */
	int dest[ZA_SB_MAX_MEMBERS];

	/* What the rebuild counts beyond the job's progress. */
	struct za_rebuild_status st;
};

static void on_timer(struct za_job *j);

int za_rebuild_new(const struct za_rebuild_params *p, struct za_rebuild **out)
{
	struct za_rebuild *rb = calloc(1, sizeof(*rb));

	if (!rb)
		return -ENOMEM;
	rb->p = *p;
	za_job_init(&rb->job, p->io, "rebuild", p->rate_bps, on_timer);
	rb->st.kind = ZA_JOB_REBUILD;
	za_live_init(&rb->live, p->eng);
	for (unsigned i = 0; i < ZA_SB_MAX_MEMBERS; i++)
		rb->dest[i] = -1;
	*out = rb;
	return 0;
}

static void pass_clear(struct za_rebuild *rb)
{
	size_t i;

	for (i = 0; i < rb->nr_segs; i++)
		za_live_seg_fini(&rb->segs[i].ls);
	free(rb->segs);
	rb->segs = NULL;
	rb->nr_segs = rb->next_seg = 0;
	rb->next_todo = 0;
	rb->space_wait = false;
	za_live_clear(&rb->live);
}

bool za_rebuild_busy(const struct za_rebuild *rb)
{
	return rb->nr_running || rb->flushing || rb->map_wait ||
	       za_job_busy(&rb->job);
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

static void on_timer(struct za_job *j)
{
	struct za_rebuild *rb = container_of(j, struct za_rebuild, job);

	if (!za_job_in_run(j)) {
		/* The run ended with this timer set: a start waited for it. */
		if (rb->start_again && !j->stopping) {
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
	if (j->state == ZA_JOB_RUNNING)
		pass_begin(rb);
}

static bool may_start(struct za_col_rebuild *cr, uint64_t bytes)
{
	struct rcol *c = cr->priv;

	return za_job_take(&c->rb->job, bytes);
}

static void on_progress(struct za_col_rebuild *cr, uint64_t bytes)
{
	struct rcol *c = cr->priv;

	c->done_bytes += bytes;
	za_job_progress(&c->rb->job, bytes);
}

/* ---- columns ---- */

static void run_end(struct za_rebuild *rb, int result)
{
	struct za_job_progress *pr = &rb->job.pr;

	rb->in_pass = false;
	pass_clear(rb);
	za_job_end(&rb->job, result);
	/* Everything was done: what the total still counts vanished on the
	 * way (garbage collection freed those segments, or a column found
	 * them dead). A run that ended "done" shows 100%. */
	if (!result && !rb->st.cols_waiting && !rb->st.cols_failed)
		pr->total_bytes = pr->done_bytes;
	za_log_info("%s: %s: %llu of %llu bytes restored, %llu columns "
		    "rebuilt, %llu dead left alone, %llu failed, in %.1f s",
		    rb->job.name, result ? strerror(-result) : "done",
		    (unsigned long long)pr->done_bytes,
		    (unsigned long long)pr->total_bytes,
		    (unsigned long long)rb->st.cols_done,
		    (unsigned long long)rb->st.cols_dead,
		    (unsigned long long)rb->st.cols_failed,
		    (double)(rb->job.end_ns - rb->job.start_ns) / 1e9);
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
		assert(c->done_bytes <= rb->job.pr.done_bytes);
		za_job_unprogress(&rb->job, c->done_bytes);
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
	c->cr.nr_stripes = s->ls.last_live + 1;
	c->cr.live = s->ls.live;
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
 * survivor-bandwidth limit instead of 0.92 (bench/results/notes.md, P3).
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
	 * segment from GC; started all at once, a slow rebuild would hold
	 * them for minutes while it crept through all of them at the same
	 * time, and could leave too few free zones to open a segment (NEWS:
	 * seed 130008).
	 */
	if (rb->job.pr.rate_limit_bps && stripes) {
		uint64_t by_rate = rb->job.pr.rate_limit_bps * RB_RATE_AHEAD_S /
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

	while (rb->job.state == ZA_JOB_RUNNING && rb->in_pass &&
	       !rb->flushing && !rb->job.stopping && !rb->rescan &&
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
		if (!s->ls.nr_live) {
			za_engine_seg_mark_dead(rb->p.eng, s->d.seg_id,
						1ull << col);
			rb->st.cols_dead++;
			continue;
		}
		/* A new column takes a free zone: not out of GC's reserve
		 * (za_volume_spare_ok). Wait, keeping this column next. */
		if (rb->p.vol && !za_volume_spare_ok(rb->p.vol)) {
			za_volume_gc_kick(rb->p.vol);
			rb->next_todo |= 1ull << col;
			if (!rb->space_wait) {
				rb->st.space_waits++;
				za_log_info("%s: waiting for garbage "
					    "collection to free space",
					    rb->job.name);
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
	if (rb->job.stopping) {
		run_end(rb, -ECANCELED);
		return;
	}
	/* Paused: the pass waits, holding nothing, until resume() lists the
	 * work again. */
	if (rb->job.state == ZA_JOB_PAUSED)
		return;
	if (rb->space_wait && !rb->rescan) {
		/* Nothing running will call back: poll. */
		za_job_retry_at(&rb->job, za_io_now_ns() + BUSY_RETRY_NS);
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
		za_job_retry_at(&rb->job, za_io_now_ns() + BUSY_RETRY_NS);
		return;
	}
	run_end(rb, rb->error);
}

/* ---- a pass: list, liveness, flush ---- */

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
		for (i = 0; i < rb->nr_segs; i++)
			za_live_set_all(&rb->segs[i].ls);
	}
	/*
	 * A pass starts with nothing in flight, so the run's total is what
	 * is done plus what this pass lists. Adding each pass's list to the
	 * total instead counted again every column a pass listed but did
	 * not start (a new failure ends a pass early; a segment still being
	 * written is retried every 50 ms): the total grew past the work.
	 */
	rb->job.pr.total_bytes = rb->job.pr.done_bytes;
	for (i = 0; i < rb->nr_segs; i++) {
		const struct rseg *s = &rb->segs[i];
		const struct za_stripe_layout *l =
			za_engine_stream_layout(rb->p.eng, s->d.stream);

		rb->job.pr.total_bytes +=
			(uint64_t)s->ls.nr_live * l->col_payload_bytes *
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

		s->ls.seg_id = s->d.seg_id;
		s->ls.group_id = s->d.group_id;
		s->ls.nr_written = s->d.nr_written;
		s->ls.gpos = (uint16_t)s->d.group_pos;
		s->ls.gw = (uint16_t)s->d.group_w;
		s->ls.stream = (uint8_t)s->d.stream;
		ret = za_live_add(&rb->live, &s->ls);
	}
	if (!ret)
		ret = za_live_walk(&rb->live, rb->p.vol);
	if (ret)
		pass_clear(rb);
	return ret;
}

/* The map pages list_live() waited for are in (or failed). */
static void map_loaded(struct za_vol_mwait *w, int err)
{
	struct za_rebuild *rb = container_of(w, struct za_rebuild, mw);

	rb->map_wait = false;
	if (!za_job_in_run(&rb->job) || rb->job.stopping)
		return; /* stopped meanwhile: the run ended */
	if (err) {
		za_log_err("rebuild: cannot read the volume's map: %s",
			   strerror(-err));
		run_end(rb, err);
		return;
	}
	pass_begin(rb);
}

static void pass_begin(struct za_rebuild *rb)
{
	int ret;

	if (rb->map_wait)
		return; /* map_loaded() begins it */
	/* Which blocks are live is the map's to say: all of it in memory
	 * first (design.md 9.8). */
	if (rb->p.vol) {
		rb->mw.fn = map_loaded;
		ret = za_volume_map_load(rb->p.vol, &rb->mw);
		if (ret == 1) {
			rb->map_wait = true;
			return;
		}
		if (ret) {
			za_log_err("rebuild: cannot read the volume's map: %s",
				   strerror(-ret));
			run_end(rb, ret);
			return;
		}
	}
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
	za_log_info("%s: %zu degraded segments to look at", rb->job.name,
		    rb->nr_segs);
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

static int mark_dead_by_counts(struct za_rebuild *rb)
{
	struct za_engine_degraded *d;
	unsigned marked = 0;
	size_t n, got, i;

	n = za_engine_degraded(rb->p.eng, NULL, 0);
	if (!n)
		return 0;
	d = calloc(n, sizeof(*d));
	if (!d)
		return -ENOMEM;
	got = za_engine_degraded(rb->p.eng, d, n);
	if (got < n)
		n = got;
	for (i = 0; i < n; i++) {
		uint64_t cols = d[i].lost_cols & d[i].todo;

		if (!cols || d[i].busy ||
		    za_volume_group_live(rb->p.vol, d[i].group_id))
			continue;
		za_engine_seg_mark_dead(rb->p.eng, d[i].seg_id, cols);
		marked += (unsigned)__builtin_popcountll(cols);
	}
	free(d);
	if (marked)
		za_log_info("rebuild: %u lost columns of segments whose groups "
			    "hold nothing live left alone",
			    marked);
	return 0;
}

int za_rebuild_mark_dead_now(struct za_rebuild *rb)
{
	unsigned marked = 0;
	size_t i;
	int ret;

	if (rb->in_pass || !rb->p.vol)
		return 0;
	/*
	 * With map pages out of memory (the cache), by the groups' live
	 * counts: a degraded segment whose group holds nothing live is
	 * dead whole. Left to the pass, such a segment that lost more than
	 * p columns to a power cut (its stripes never flushed) had the
	 * array say "failed" until the pass came (fault loop, seed 7010).
	 */
	if (!za_volume_map_whole(rb->p.vol))
		return mark_dead_by_counts(rb);
	ret = list_live(rb);
	if (ret)
		return ret;
	for (i = 0; i < rb->nr_segs; i++) {
		const struct rseg *s = &rb->segs[i];
		uint64_t cols = s->d.lost_cols & s->d.todo;

		if (s->ls.nr_live || !cols || s->d.busy)
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
	if (za_job_in_run(&rb->job)) {
		/* A new failure: look again once the columns in flight end. */
		if (rb->in_pass)
			rb->rescan = true;
		else if (!za_job_busy(&rb->job) &&
			 rb->job.state == ZA_JOB_RUNNING)
			pass_begin(rb);
		return;
	}
	if (rb->job.stopping)
		return; /* stopped on purpose: the array is going away */
	if (za_rebuild_busy(rb)) {
		/* Only a timer of the run that ended can be left (a run ends
		 * with no column running and no flush): start when it fires.
		 * Dropping the start would leave a member that failed just as
		 * a run ended unrebuilt until the next restart (NEWS). */
		rb->start_again = true;
		return;
	}
	za_job_begin(&rb->job);
	rb->error = 0;
	rb->st.read_bytes = rb->st.written_bytes = 0;
	rb->st.cols_done = rb->st.cols_dead = rb->st.cols_failed = 0;
	pass_begin(rb);
}

/*
 * A paused rebuild holds no space. Its columns under way are aborted:
 * stripes in flight finish, and each column's replacement zone is given
 * back (an unfinished copy is of no use). A pause that kept them would
 * hold a free zone per column for as long as it lasted and pin their
 * segments against garbage collection, until the other members' free
 * zones could no longer make a segment and writes waited (NEWS: seed
 * 130008). At most a zone's worth of copying per column is done again
 * after resume(), which lists the work afresh.
 */
void za_rebuild_pause(struct za_rebuild *rb)
{
	if (rb->job.state != ZA_JOB_RUNNING)
		return;
	rb->job.state = ZA_JOB_PAUSED;
	abort_all(rb);
}

void za_rebuild_resume(struct za_rebuild *rb)
{
	if (rb->job.state != ZA_JOB_PAUSED)
		return;
	rb->job.state = ZA_JOB_RUNNING;
	if (rb->in_pass) {
		/* What the pass listed may be gone or dead by now: its end
		 * (once aborted columns are done) begins a new one. */
		rb->rescan = true;
		dispatch(rb);
		return;
	}
	if (!za_job_busy(&rb->job))
		pass_begin(rb);
}

void za_rebuild_set_rate(struct za_rebuild *rb, uint64_t rate_bps)
{
	za_job_set_rate(&rb->job, rate_bps);
	kick_all(rb);
}

void za_rebuild_stop(struct za_rebuild *rb)
{
	/* A start waiting for the last run's timer is cancelled too: the
	 * array may be going away (its stop waits for that timer). */
	rb->start_again = false;
	if (!za_job_in_run(&rb->job))
		return;
	rb->job.stopping = true;
	abort_all(rb);
	/* Columns with nothing in flight end inside the abort, and the last
	 * one's col_done() ends the run: ending it here again called
	 * finished() twice (a stop right after the columns started). */
	if (rb->job.state == ZA_JOB_DONE)
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
	*st = rb->st;
	za_job_get_progress(&rb->job, &st->job);
}

void za_rebuild_set_kind(struct za_rebuild *rb, enum za_job_kind kind)
{
	rb->st.kind = kind;
	rb->job.name = za_job_kind_str(kind);
}

void za_rebuild_set_dest(struct za_rebuild *rb, unsigned from, int to)
{
	if (from < ZA_SB_MAX_MEMBERS)
		rb->dest[from] = to;
}
