// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * scrub.c - the scrub job: reads every live stripe of the sealed
 * segments, all columns whole, has the engine check each one
 * (za_engine_stripe_check), counts what is wrong by kind, and repairs a
 * segment whose columns went bad by moving each bad column elsewhere,
 * rebuilt from the others. It does not scrub segments still being
 * written, nor decide when to run, nor persist its position (it says
 * when the position moves: the owner persists it).
 *
 * Big theory
 * ----------
 * Reads verify only what they return and stop at k good columns, so rot
 * in a parity column, or in data nobody reads, stays until a second
 * failure makes it fatal. A run closes that gap:
 *
 *   1. list:     every segment of the groups no longer taking stripes,
 *                in id order, after the position (a resumed run skips
 *                what an earlier run of the same pass finished);
 *   2. liveness: per batch of segments, one walk of the volume's map
 *                marks the stripes that hold a block the map points at
 *                (journal and metadata segments count as wholly live),
 *                then a volume flush makes that durable (as rebuild.c:
 *                a repair writes dead stripes as holes);
 *   3. check:    each live stripe is read whole, every readable column
 *                verified (header, CRC32C per block, one write), and
 *                every verified parity column compared with the code of
 *                the data: a column that fails is counted as a read
 *                error, a checksum error or inconsistent parity;
 *   4. repair:   once all of a segment's live stripes are checked, each
 *                column that was bad in any of them is moved to a free
 *                zone of a member outside the segment, up to the last
 *                live stripe, dead ones written as holes
 *                (za_engine_col_rebuild, move). A column found
 *                inconsistent anywhere is decoded from k others in every
 *                stripe (it verifies, so it can never be trusted); one
 *                with read or checksum errors is copied where it
 *                verifies and decoded where it does not, so that with
 *                p = 1 a stripe whose other column is the bad one still
 *                has k sources. Copies go first, one move per segment
 *                at a time, and a decoding move runs alone (see
 *                rep_may_go);
 *   5. position: the last segment id up to which every listed segment
 *                is done; a pass that completes sets it back to 0.
 *
 * A zoned drive cannot rewrite a slot in place: a sequential zone takes
 * writes only at its write pointer, and resetting it would drop every
 * other stripe of the column. So a repair is a move of the whole column,
 * which also takes the data off a zone that is rotting. A segment with a
 * stripe beyond its redundancy (fewer than k columns verify) is counted
 * and left as it is: a move would have to write that stripe as a hole.
 *
 * Several segments are checked at once (by default as many as the
 * writable members hold side by side), a few stripes each. Progress
 * counts stripe bytes (k+p slots) of live stripes; the rate limit is a
 * token bucket over the same bytes (a repair's stripe counts k slots);
 * pause holds new stripes and in-flight ones finish.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "container.h"
#include "ec.h"
#include "log.h"
#include "scrub.h"

#define BATCH_SEGS 65536u
#define BUSY_RETRY_NS (50ull * 1000 * 1000)
#define BUSY_TRIES 100u /* a segment still busy after 5 s is skipped */
#define NO_STRIPE UINT32_MAX

/* A listed segment. */
struct sseg {
	struct za_live_seg ls; /* id, group; live[] while its batch runs */
	bool done;
};

struct srun;

struct schk {
	struct za_stripe_check sc;
	struct srun *r;
	bool busy;
};

struct srep {
	struct za_col_rebuild cr;
	struct srun *r;
	unsigned tries;
	bool running;
	bool held; /* may_start said no: kick it when it may go on */
};

/* A segment being checked or repaired. */
struct srun {
	struct za_scrub *s;
	struct sseg *seg;
	const struct za_stripe_layout *l;
	uint64_t stripe_bytes; /* width slots */
	uint64_t left_bytes; /* live stripe bytes not checked yet */
	uint32_t next; /* next stripe to look at */
	unsigned inflight; /* checks */
	unsigned busy_tries;
	bool checks_done, repairs_started, gone;
	bool unrecoverable;
	uint64_t bad_cols;
	uint64_t inc_cols; /* bad_cols found inconsistent somewhere */
	uint32_t col_bad[ZA_EC_MAX_WIDTH]; /* stripes bad, per column */
	struct schk *chk; /* window */
	struct srep *rep[ZA_EC_MAX_WIDTH];
	unsigned repairs; /* started or waiting to */
	struct srun *next_run;
};

struct za_scrub {
	struct za_scrub_params p;
	struct za_job job; /* state, pacing, progress, the timer */
	bool in_run, listed, flushing, kick_pending;
	bool dispatching, again;
	struct za_vol_mwait mw; /* the volume's map pages (flushing meanwhile) */

	struct sseg *segs; /* the run's list, by id */
	size_t nr_segs;
	size_t batch_start, batch_end, next_seg, done_upto;
	struct za_live_set live; /* the batch's segments */
	struct srun *running;
	unsigned nr_running;
	unsigned moves; /* column moves running */
	bool decoding; /* one of them decodes: it runs alone */
	struct za_vol_req flush;
	struct za_io_defer kick; /* the first step of a run */
	int error; /* the first thing that went wrong in the run */
	int abort_err; /* ends the run (-ENOMEM) */

	uint64_t position;

	/* What the scrub counts beyond the job's progress. */
	struct za_scrub_status st;
};

static void on_timer(struct za_job *j);

int za_scrub_new(const struct za_scrub_params *p, struct za_scrub **out)
{
	struct za_scrub *s;

	if (!p->io || !p->eng)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->p = *p;
	s->position = p->start_after_seg;
	za_job_init(&s->job, p->io, "scrub", p->rate_bps, on_timer);
	za_live_init(&s->live, p->eng);
	*out = s;
	return 0;
}

static void batch_clear(struct za_scrub *s)
{
	size_t i;

	for (i = s->batch_start; i < s->batch_end; i++)
		za_live_seg_fini(&s->segs[i].ls);
	za_live_clear(&s->live);
}

static void run_clear(struct za_scrub *s)
{
	batch_clear(s);
	free(s->segs);
	s->segs = NULL;
	s->nr_segs = s->batch_start = s->batch_end = 0;
	s->next_seg = s->done_upto = 0;
}

bool za_scrub_busy(const struct za_scrub *s)
{
	return s->nr_running || s->flushing || za_job_busy(&s->job) ||
	       s->kick_pending;
}

void za_scrub_free(struct za_scrub *s)
{
	if (!s)
		return;
	run_clear(s);
	free(s);
}

/* ---- pacing ---- */

static void dispatch(struct za_scrub *s);

static void on_timer(struct za_job *j)
{
	dispatch(container_of(j, struct za_scrub, job));
}

static void set_error(struct za_scrub *s, int err)
{
	if (err && !s->error)
		s->error = err;
}

/* ---- one segment: checks ---- */

static uint32_t next_live(const struct sseg *g, uint32_t from)
{
	uint32_t i;

	for (i = from; i < g->ls.nr_written; i++)
		if (za_live_test(&g->ls, i))
			return i;
	return NO_STRIPE;
}

static void chk_done(struct za_stripe_check *sc, int result)
{
	struct schk *ck = sc->priv;
	struct srun *r = ck->r;
	struct za_scrub *s = r->s;
	uint64_t bad = sc->err_read_cols | sc->err_crc_cols |
		       sc->inconsistent_cols;
	unsigned c;

	ck->busy = false;
	r->inflight--;
	s->st.stripes_checked++;
	s->st.read_bytes += sc->read_bytes;
	s->st.err_read += (unsigned)__builtin_popcountll(sc->err_read_cols);
	s->st.err_checksum += (unsigned)__builtin_popcountll(sc->err_crc_cols);
	s->st.err_parity +=
		(unsigned)__builtin_popcountll(sc->inconsistent_cols);
	r->bad_cols |= bad;
	r->inc_cols |= sc->inconsistent_cols;
	for (c = 0; c < ZA_EC_MAX_WIDTH; c++)
		if (bad & (1ull << c))
			r->col_bad[c]++;
	if (result == -EIO) {
		s->st.stripes_lost++;
		r->unrecoverable = true;
		set_error(s, -EIO);
	} else if (result) {
		za_log_err("scrub: segment %llu stripe %u: %s",
			   (unsigned long long)r->seg->ls.seg_id,
			   sc->stripe_idx, strerror(-result));
		r->unrecoverable = true; /* not checked: repair nothing */
		set_error(s, result);
	}
	r->left_bytes -= r->stripe_bytes;
	za_job_progress(&s->job, r->stripe_bytes);
	dispatch(s);
}

/* Start checks while the window, the rate and the state allow. */
static void run_checks(struct srun *r)
{
	struct za_scrub *s = r->s;
	unsigned window = s->p.window ? s->p.window : 2, w;

	while (!r->gone && !s->abort_err) {
		uint32_t i = next_live(r->seg, r->next);
		struct schk *ck = NULL;
		int ret;

		if (i == NO_STRIPE)
			break;
		for (w = 0; w < window; w++)
			if (!r->chk[w].busy) {
				ck = &r->chk[w];
				break;
			}
		if (!ck || !za_job_take(&s->job, r->stripe_bytes))
			break;
		memset(&ck->sc, 0, sizeof(ck->sc));
		ck->sc.seg_id = r->seg->ls.seg_id;
		ck->sc.stripe_idx = i;
		ck->sc.done = chk_done;
		ck->sc.priv = ck;
		ck->r = r;
		ret = za_engine_stripe_check(s->p.eng, &ck->sc);
		if (ret == -EBUSY && ++r->busy_tries < BUSY_TRIES) {
			/* Stripes of a stopped group still settling. */
			za_pace_refund(&s->job.pace, r->stripe_bytes);
			za_job_retry_at(&s->job,
					za_io_now_ns() + BUSY_RETRY_NS);
			break;
		}
		if (ret == -ENOENT || ret == -EBUSY) {
			/* Released by garbage collection: nothing to scrub;
			 * or busy for too long: the next pass will. */
			if (ret == -EBUSY)
				za_log_warn(
					"scrub: segment %llu stays busy: "
					"skipped",
					(unsigned long long)r->seg->ls.seg_id);
			r->gone = true;
			break;
		}
		if (ret) {
			za_log_err("scrub: segment %llu stripe %u: %s",
				   (unsigned long long)r->seg->ls.seg_id, i,
				   strerror(-ret));
			s->abort_err = ret;
			break;
		}
		ck->busy = true;
		r->inflight++;
		r->next = i + 1;
	}
}

/* ---- one segment: repairs ---- */

static bool rep_may_start(struct za_col_rebuild *cr, uint64_t bytes)
{
	struct srep *rp = cr->priv;

	/* A moved stripe reads k slots. */
	if (za_job_take(&rp->r->s->job, bytes * rp->r->l->k))
		return true;
	rp->held = true;
	return false;
}

static void rep_done(struct za_col_rebuild *cr, int result)
{
	struct srep *rp = cr->priv;
	struct srun *r = rp->r;
	struct za_scrub *s = r->s;

	s->moves--;
	if (cr->decode)
		s->decoding = false;
	s->st.repair_read_bytes += cr->read_bytes;
	s->st.repair_written_bytes += cr->written_bytes;
	if (!result) {
		s->st.cols_repaired++;
		s->st.stripes_repaired += r->col_bad[cr->col];
		za_log_info("scrub: segment %llu column %u moved to member %u "
			    "zone %u: %u stripes bad, %u decoded",
			    (unsigned long long)r->seg->ls.seg_id, cr->col,
			    cr->member, cr->zone, r->col_bad[cr->col],
			    cr->rebuilt);
	} else if (result != -ECANCELED) {
		s->st.cols_repair_failed++;
		set_error(s, result);
	}
	r->rep[cr->col] = NULL;
	r->repairs--;
	free(rp);
	dispatch(s);
}

/* Which columns to move: bad ones still on a member that serves reads
 * (a lost one is the rebuild job's). */
static void reps_plan(struct srun *r)
{
	struct za_scrub *s = r->s;
	struct za_seg_info si;
	unsigned c;

	r->repairs_started = true;
	if (!r->bad_cols)
		return;
	if (s->p.check_only || r->gone)
		return;
	if (r->unrecoverable) {
		za_log_err("scrub: segment %llu has stripes beyond its "
			   "redundancy: its bad columns are left as they are",
			   (unsigned long long)r->seg->ls.seg_id);
		s->st.cols_repair_failed +=
			(unsigned)__builtin_popcountll(r->bad_cols);
		return;
	}
	if (za_engine_seg_info(s->p.eng, r->seg->ls.seg_id, &si)) {
		r->gone = true;
		return;
	}
	for (c = 0; c < r->l->width; c++) {
		enum za_member_state ms;
		struct srep *rp;

		if (!(r->bad_cols & (1ull << c)))
			continue;
		ms = za_engine_member_state(s->p.eng, si.members[c]);
		if (ms != ZA_MEMBER_ONLINE && ms != ZA_MEMBER_DRAINING)
			continue;
		rp = calloc(1, sizeof(*rp));
		if (!rp) {
			s->st.cols_repair_failed++;
			set_error(s, -ENOMEM);
			continue;
		}
		rp->r = r;
		rp->cr.seg_id = r->seg->ls.seg_id;
		rp->cr.col = c;
		rp->cr.nr_stripes = r->seg->ls.last_live + 1;
		rp->cr.live = r->seg->ls.live;
		rp->cr.move = true;
		/* A column that verifies where it is inconsistent must never
		 * be copied; one with bad CRCs is copied where it verifies
		 * (elsewhere decoded), so that a stripe with another column
		 * bad still has k to decode from when p = 1. */
		rp->cr.decode = (r->inc_cols >> c) & 1;
		/* A decoding move goes one stripe at a time (rep_may_go). */
		rp->cr.window = rp->cr.decode ? 1 : s->p.window;
		rp->cr.may_start = rep_may_start;
		rp->cr.done = rep_done;
		rp->cr.priv = rp;
		r->rep[c] = rp;
		r->repairs++;
	}
}

/*
 * May this planned move start now? A move that decodes waits until the
 * segment's copying moves are done (a column still bad somewhere may
 * leave a stripe fewer than k good columns to decode from) and runs
 * alone, one stripe at a time: the engine takes its sources from the
 * least busy members, and only with none busy are they the data
 * columns, the ones the check took as the truth; another column found
 * inconsistent (its CRCs hold) would otherwise be decoded from.
 */
static bool rep_may_go(const struct srun *r, const struct srep *rp)
{
	const struct za_scrub *s = r->s;
	unsigned c;

	/* One move per segment at a time: the engine places a moved column
	 * outside the segment as it is now, not outside the places other
	 * moves of it are still writing to. */
	for (c = 0; c < r->l->width; c++)
		if (r->rep[c] && r->rep[c]->running)
			return false;
	if (!rp->cr.decode)
		return !s->decoding;
	for (c = 0; c < r->l->width; c++)
		if (r->rep[c] && !r->rep[c]->cr.decode)
			return false;
	return !s->moves;
}

/* Start the planned moves that may go; kick held ones. */
static void reps_run(struct srun *r)
{
	struct za_scrub *s = r->s;
	unsigned c;

	for (c = 0; c < r->l->width; c++) {
		struct srep *rp = r->rep[c];
		int ret;

		if (!rp)
			continue;
		if (!rp->running && !s->job.stopping && !s->abort_err &&
		    !rep_may_go(r, rp))
			continue;
		if (rp->running) {
			/* Only a held one: a kick is not a no-op while the
			 * engine finishes the zone. */
			if (rp->held && s->job.state == ZA_JOB_RUNNING &&
			    !s->job.stopping) {
				rp->held = false;
				za_engine_col_rebuild_kick(s->p.eng, &rp->cr);
			}
			continue;
		}
		if (s->job.stopping || s->abort_err) {
			r->rep[c] = NULL;
			r->repairs--;
			free(rp);
			continue;
		}
		ret = za_engine_col_rebuild(s->p.eng, &rp->cr);
		if (!ret) {
			rp->running = true;
			s->moves++;
			s->decoding |= rp->cr.decode;
			continue;
		}
		if (ret == -EBUSY && ++rp->tries < BUSY_TRIES) {
			za_job_retry_at(&s->job,
					za_io_now_ns() + BUSY_RETRY_NS);
			continue;
		}
		if (ret != -ENOENT) {
			za_log_err("scrub: segment %llu column %u cannot be "
				   "moved: %s",
				   (unsigned long long)r->seg->ls.seg_id, c,
				   strerror(-ret));
			s->st.cols_repair_failed++;
			set_error(s, ret);
		}
		r->rep[c] = NULL;
		r->repairs--;
		free(rp);
	}
}

/* ---- segments ---- */

static void run_free(struct za_scrub *s, struct srun *r)
{
	struct srun **pp;

	for (pp = &s->running; *pp != r; pp = &(*pp)->next_run)
		;
	*pp = r->next_run;
	s->nr_running--;
	free(r->chk);
	free(r);
}

/* Advance a segment; ends it (frees @r) when nothing is left. */
static void seg_step(struct srun *r)
{
	struct za_scrub *s = r->s;

	if (!r->checks_done) {
		run_checks(r);
		if (r->inflight)
			return;
		if (!r->gone && next_live(r->seg, r->next) != NO_STRIPE &&
		    !s->job.stopping && !s->abort_err)
			return; /* held by the rate limit, a pause or busy */
		r->checks_done = !s->job.stopping && !s->abort_err;
	}
	if (r->checks_done && !r->repairs_started)
		reps_plan(r);
	if (r->repairs)
		reps_run(r);
	if (r->repairs)
		return;
	if (r->checks_done && !s->job.stopping) {
		r->seg->done = true;
		s->st.segs_done++;
		if (r->gone)
			s->st.segs_gone++;
		/* Stripes never checked (released meanwhile) leave the
		 * total, so that done reaches it. */
		s->job.pr.total_bytes -= r->left_bytes;
	}
	run_free(s, r);
	/* Its place may start the next segment: with nothing else running,
	 * no completion or timer would come back to dispatch() for it. */
	s->again = true;
}

static int seg_start(struct za_scrub *s, struct sseg *g)
{
	const struct za_stripe_layout *l =
		za_engine_stream_layout(s->p.eng, g->ls.stream);
	unsigned window = s->p.window ? s->p.window : 2;
	struct srun *r, **pp;

	if (!g->ls.nr_live) {
		g->done = true;
		s->st.segs_done++;
		return 0;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->chk = calloc(window, sizeof(*r->chk));
	if (!r->chk) {
		free(r);
		return -ENOMEM;
	}
	r->s = s;
	r->seg = g;
	r->l = l;
	r->stripe_bytes = (uint64_t)l->width * l->slot_bytes;
	r->left_bytes = (uint64_t)g->ls.nr_live * r->stripe_bytes;
	/*
	 * Oldest first: dispatch serves the runs in list order, and under a
	 * rate limit the first run takes the tokens. The position moves only
	 * when the oldest segment is done, so a newest-first order would
	 * starve it and leave nothing to resume from until the very end.
	 */
	for (pp = &s->running; *pp; pp = &(*pp)->next_run)
		;
	*pp = r;
	s->nr_running++;
	return 0;
}

static unsigned max_segs(const struct za_scrub *s)
{
	const struct za_stripe_layout *l = za_engine_layout(s->p.eng);
	unsigned n;

	if (s->p.max_segs)
		return s->p.max_segs;
	/* Each stripe check reads one slot on each of k+p members. */
	n = za_engine_nr_writable(s->p.eng) / l->width;
	return n < 2 ? 2 : n;
}

static void batch_next(struct za_scrub *s);
static void run_end(struct za_scrub *s, int result, bool complete);

/* Abort the moves running; call with dispatch held (one may end inside
 * the call). */
static void abort_moves(struct za_scrub *s)
{
	struct srun *r;
	unsigned c;

	for (r = s->running; r; r = r->next_run)
		for (c = 0; c < ZA_EC_MAX_WIDTH; c++)
			if (r->rep[c] && r->rep[c]->running)
				za_engine_col_rebuild_abort(s->p.eng,
							    &r->rep[c]->cr);
}

/* Start segments, advance them, and move on when the batch is done. */
static void dispatch(struct za_scrub *s)
{
	struct srun *r, *next;
	uint64_t pos = s->position;

	if (!s->in_run)
		return;
	if (s->dispatching) {
		s->again = true;
		return;
	}
	s->dispatching = true;
	do {
		s->again = false;
		while (!s->flushing && !s->job.stopping && !s->abort_err &&
		       s->job.state == ZA_JOB_RUNNING &&
		       s->next_seg < s->batch_end &&
		       s->nr_running < max_segs(s)) {
			int ret = seg_start(s, &s->segs[s->next_seg]);

			if (ret) {
				s->abort_err = ret;
				break;
			}
			s->next_seg++;
		}
		if (s->abort_err && !s->job.stopping) {
			s->job.stopping = true;
			abort_moves(s);
		}
		for (r = s->running; r; r = next) {
			next = r->next_run;
			seg_step(r);
		}
	} while (s->again);
	s->dispatching = false;
	while (s->done_upto < s->next_seg && s->segs[s->done_upto].done)
		s->position = s->segs[s->done_upto++].ls.seg_id;
	s->st.position = s->position;
	if (s->position != pos && s->p.moved)
		s->p.moved(s, s->position, s->p.priv);
	if (!s->listed || s->flushing || s->nr_running)
		return;
	if (s->job.stopping) {
		run_end(s, s->abort_err ? s->abort_err : -ECANCELED, false);
		return;
	}
	if (s->next_seg < s->batch_end)
		return; /* paused */
	batch_next(s);
}

/* ---- a batch: liveness, flush ---- */

static void flushed(struct za_vol_req *req, int result)
{
	struct za_scrub *s = req->priv;
	size_t i;

	s->flushing = false;
	if (result) {
		/* Liveness is not known to be durable: count all as live,
		 * so that a repair writes no stripe as a hole. */
		za_log_warn("scrub: volume flush failed (%s): dead stripes "
			    "are checked too",
			    strerror(-result));
		for (i = s->batch_start; i < s->batch_end; i++)
			za_live_set_all(&s->segs[i].ls);
	}
	/* The total counted every written stripe: take the dead out. */
	for (i = s->batch_start; i < s->batch_end; i++) {
		const struct za_live_seg *g = &s->segs[i].ls;
		const struct za_stripe_layout *l =
			za_engine_stream_layout(s->p.eng, g->stream);

		s->job.pr.total_bytes -=
			(uint64_t)(g->nr_written - g->nr_live) * l->width *
			l->slot_bytes;
	}
	dispatch(s);
}

/* 1: waiting for the volume's map pages (batch_go() again once in). */
static int batch_live(struct za_scrub *s)
{
	size_t i;
	int ret;

	/* Which blocks are live is the map's to say: all of it in memory
	 * first (design.md 9.8). */
	if (s->p.vol) {
		ret = za_volume_map_load(s->p.vol, &s->mw);
		if (ret)
			return ret;
	}
	for (i = s->batch_start; i < s->batch_end; i++) {
		ret = za_live_add(&s->live, &s->segs[i].ls);
		if (ret)
			return ret;
	}
	return za_live_walk(&s->live, s->p.vol);
}

static void batch_go(struct za_scrub *s);

/* The map pages batch_live() waited for are in (or failed). */
static void map_loaded(struct za_vol_mwait *w, int err)
{
	struct za_scrub *s = container_of(w, struct za_scrub, mw);

	s->flushing = false;
	if (err) {
		za_log_err("scrub: cannot read the volume's map: %s",
			   strerror(-err));
		run_end(s, err, false);
		return;
	}
	if (s->job.stopping) {
		dispatch(s); /* ends the run */
		return;
	}
	batch_go(s);
}

static void batch_next(struct za_scrub *s)
{
	size_t n = s->p.batch_segs ? s->p.batch_segs : BATCH_SEGS;

	batch_clear(s);
	if (s->batch_end >= s->nr_segs) {
		run_end(s, s->error, true);
		return;
	}
	s->batch_start = s->batch_end;
	s->batch_end = s->nr_segs - s->batch_start > n ? s->batch_start + n :
							 s->nr_segs;
	s->next_seg = s->batch_start;
	batch_go(s);
}

/* The batch's liveness, then the flush that makes it durable. */
static void batch_go(struct za_scrub *s)
{
	int ret;

	s->mw.fn = map_loaded;
	ret = batch_live(s);
	if (ret == 1) {
		s->flushing = true; /* nothing dispatched meanwhile */
		return;
	}
	if (ret) {
		za_log_err("scrub: cannot list live data: %s", strerror(-ret));
		run_end(s, ret, false);
		return;
	}
	memset(&s->flush, 0, sizeof(s->flush));
	s->flush.done = flushed;
	s->flush.priv = s;
	s->flushing = true;
	if (!s->p.vol)
		flushed(&s->flush, 0);
	else
		za_volume_flush(s->p.vol, &s->flush);
}

/* ---- a run ---- */

static int seg_cmp(const void *a, const void *b)
{
	const struct sseg *x = a, *y = b;

	return x->ls.seg_id < y->ls.seg_id ? -1 : x->ls.seg_id > y->ls.seg_id;
}

/* Every segment of the groups no longer taking stripes, after the
 * position, in id order. */
static int run_list(struct za_scrub *s)
{
	struct za_group_info *gi = malloc(sizeof(*gi));
	uint64_t *ids = NULL;
	unsigned n, i, j;
	size_t cap = 0;

	if (!gi)
		return -ENOMEM;
	n = za_engine_groups(s->p.eng, NULL, 0);
	ids = calloc(n ? n : 1, sizeof(*ids));
	if (!ids)
		goto err_mem;
	n = za_engine_groups(s->p.eng, ids, n);
	for (i = 0; i < n; i++) {
		if (za_engine_group_info(s->p.eng, ids[i], gi) || gi->taking)
			continue;
		for (j = 0; j < gi->nr_segs; j++) {
			struct za_seg_info si;
			const struct za_stripe_layout *l;
			struct sseg *g;

			if (!gi->seg_ids[j] || gi->seg_ids[j] <= s->position ||
			    za_engine_seg_info(s->p.eng, gi->seg_ids[j], &si) ||
			    !si.next_stripe)
				continue;
			if (s->nr_segs == cap) {
				size_t nc = cap ? 2 * cap : 256;
				struct sseg *ns =
					realloc(s->segs, nc * sizeof(*ns));

				if (!ns)
					goto err_mem;
				s->segs = ns;
				cap = nc;
			}
			g = &s->segs[s->nr_segs++];
			memset(g, 0, sizeof(*g));
			g->ls.seg_id = gi->seg_ids[j];
			g->ls.group_id = gi->id;
			g->ls.nr_written = si.next_stripe;
			g->ls.gpos = (uint16_t)j;
			g->ls.gw = (uint16_t)gi->nr_segs;
			g->ls.stream = (uint8_t)gi->stream;
			l = za_engine_stream_layout(s->p.eng, gi->stream);
			s->job.pr.total_bytes += (uint64_t)si.next_stripe *
						 l->width * l->slot_bytes;
		}
	}
	if (s->nr_segs)
		qsort(s->segs, s->nr_segs, sizeof(*s->segs), seg_cmp);
	s->st.segs_total = s->nr_segs;
	free(ids);
	free(gi);
	return 0;

err_mem:
	free(ids);
	free(gi);
	return -ENOMEM;
}

static void run_end(struct za_scrub *s, int result, bool complete)
{
	s->in_run = false;
	run_clear(s);
	za_job_end(&s->job, result);
	s->abort_err = 0;
	if (complete)
		s->position = 0; /* the pass is over: the next one starts */
	s->st.position = s->position;
	za_log_info("scrub: %s: %llu stripes checked, %llu bytes read; bad "
		    "columns: %llu read errors, %llu checksum, %llu parity; "
		    "%llu columns repaired, %llu not; %llu stripes lost; in "
		    "%.1f s",
		    result ? strerror(-result) : "done",
		    (unsigned long long)s->st.stripes_checked,
		    (unsigned long long)s->st.read_bytes,
		    (unsigned long long)s->st.err_read,
		    (unsigned long long)s->st.err_checksum,
		    (unsigned long long)s->st.err_parity,
		    (unsigned long long)s->st.cols_repaired,
		    (unsigned long long)s->st.cols_repair_failed,
		    (unsigned long long)s->st.stripes_lost,
		    (double)(s->job.end_ns - s->job.start_ns) / 1e9);
	if (s->p.finished)
		s->p.finished(s, result, s->p.priv);
}

/* The first step of a run, on the loop. */
static void on_start(struct za_io_defer *d)
{
	struct za_scrub *s = container_of(d, struct za_scrub, kick);
	int ret;

	s->kick_pending = false;
	if (!s->in_run)
		return;
	if (s->job.stopping) {
		run_end(s, -ECANCELED, false);
		return;
	}
	ret = run_list(s);
	if (ret) {
		za_log_err("scrub: cannot list segments: %s", strerror(-ret));
		run_end(s, ret, false);
		return;
	}
	s->listed = true;
	za_log_info("scrub: %zu sealed segments to check after segment %llu",
		    s->nr_segs, (unsigned long long)s->position);
	batch_next(s);
}

/* ---- control ---- */

int za_scrub_start(struct za_scrub *s)
{
	/* Nothing is in flight once a run has ended: a pending rate-limit
	 * timer finds the new run and only dispatches it. */
	if (s->in_run || s->kick_pending)
		return -EBUSY;
	memset(&s->st, 0, sizeof(s->st));
	s->st.position = s->position;
	s->st.start_position = s->position;
	za_job_begin(&s->job);
	s->in_run = true;
	s->listed = false;
	s->error = s->abort_err = 0;
	/* Never call finished() inside this call. */
	s->kick_pending = true;
	s->kick.fn = on_start;
	za_io_defer(s->p.io, &s->kick);
	return 0;
}

void za_scrub_pause(struct za_scrub *s)
{
	if (s->job.state == ZA_JOB_RUNNING)
		s->job.state = ZA_JOB_PAUSED;
}

void za_scrub_resume(struct za_scrub *s)
{
	if (s->job.state != ZA_JOB_PAUSED)
		return;
	s->job.state = ZA_JOB_RUNNING;
	dispatch(s);
}

void za_scrub_set_rate(struct za_scrub *s, uint64_t rate_bps)
{
	s->p.rate_bps = rate_bps;
	za_job_set_rate(&s->job, rate_bps);
	dispatch(s);
}

void za_scrub_stop(struct za_scrub *s)
{
	if (!s->in_run || s->job.stopping)
		return;
	s->job.stopping = true;
	if (!s->listed)
		return; /* on_start ends the run */
	/* Hold dispatch: an abort may end a move inside the call. */
	s->dispatching = true;
	abort_moves(s);
	s->dispatching = false;
	dispatch(s);
}

void za_scrub_status(const struct za_scrub *s, struct za_scrub_status *st)
{
	*st = s->st;
	st->position = s->position;
	za_job_get_progress(&s->job, &st->job);
}

uint64_t za_scrub_position(const struct za_scrub *s)
{
	return s->position;
}

int za_scrub_set_position(struct za_scrub *s, uint64_t after_seg)
{
	if (s->in_run)
		return -EBUSY;
	s->position = after_seg;
	s->st.position = after_seg;
	return 0;
}
