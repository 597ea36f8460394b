// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * job.c - the background-job core: state, pacing, progress and status
 * shared by every kind of job, and the liveness walk they share. It does
 * not know what a job does: rebuild.c and scrub.c drive it (start,
 * pause, stop are theirs, built on these steps).
 *
 * States:
 *
 *            begin                 pause
 *   IDLE ----------> RUNNING <-----------> PAUSED
 *     ^                 |         resume     |
 *     |                 | end (result)       | end (a stop)
 *     +-- (never)       v                    v
 *                      DONE <----------------+
 *                        |  begin: a new run
 *                        +------> RUNNING
 *
 * A stop sets `stopping`; the kind winds its work down and calls
 * za_job_end(-ECANCELED). The rate limit is a token bucket over the
 * bytes the kind counts (za_pace); a refusal arms the job's one timer
 * for when the bucket will have enough, so nothing polls. The rate shown
 * folds a sample a second; an ETA is given only from the third sample
 * on, before which a rate measured over a second or two of a start
 * (columns queueing, the first flush) told hours for minutes of work.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "container.h"
#include "job.h"
#include "engine.h"
#include "volume.h"

/* Rate samples (one a second) before an ETA is given. */
#define ETA_MIN_SAMPLES 3u

const char *za_job_kind_str(enum za_job_kind k)
{
	switch (k) {
	case ZA_JOB_REBUILD:
		return "rebuild";
	case ZA_JOB_DRAIN:
		return "drain";
	case ZA_JOB_SCRUB:
		return "scrub";
	case ZA_JOB_GC:
		return "gc";
	}
	return "unknown";
}

const char *za_job_state_str(enum za_job_state s)
{
	switch (s) {
	case ZA_JOB_IDLE:
		return "idle";
	case ZA_JOB_RUNNING:
		return "running";
	case ZA_JOB_PAUSED:
		return "paused";
	case ZA_JOB_DONE:
		return "done";
	}
	return "unknown";
}

void za_job_init(struct za_job *j, struct za_io *io, const char *name,
		 uint64_t rate_limit_bps, void (*on_timer)(struct za_job *j))
{
	memset(j, 0, sizeof(*j));
	j->io = io;
	j->name = name;
	j->on_timer = on_timer;
	j->pr.rate_limit_bps = rate_limit_bps;
}

void za_job_begin(struct za_job *j)
{
	uint64_t limit = j->pr.rate_limit_bps;

	memset(&j->pr, 0, sizeof(j->pr));
	j->pr.rate_limit_bps = limit;
	memset(&j->pace, 0, sizeof(j->pace));
	j->samples = 0;
	j->state = ZA_JOB_RUNNING;
	j->stopping = false;
	j->start_ns = za_io_now_ns();
	j->end_ns = 0;
}

void za_job_end(struct za_job *j, int result)
{
	j->state = ZA_JOB_DONE;
	j->stopping = false;
	j->end_ns = za_io_now_ns();
	j->pr.last_error = result;
	if (!result)
		j->pr.rate_bps = 0;
}

bool za_job_in_run(const struct za_job *j)
{
	return j->state == ZA_JOB_RUNNING || j->state == ZA_JOB_PAUSED;
}

static void job_timer_fired(struct za_io_defer *d)
{
	struct za_job *j = container_of(d, struct za_job, timer);

	j->timer_pending = false;
	if (j->on_timer)
		j->on_timer(j);
}

void za_job_retry_at(struct za_job *j, uint64_t when_ns)
{
	if (j->timer_pending)
		return;
	j->timer_pending = true;
	j->timer.fn = job_timer_fired;
	za_io_defer_at(j->io, &j->timer, when_ns);
}

bool za_job_busy(const struct za_job *j)
{
	return j->timer_pending;
}

bool za_job_take(struct za_job *j, uint64_t bytes)
{
	uint64_t retry_ns;

	if (j->state != ZA_JOB_RUNNING || j->stopping)
		return false;
	if (za_pace_take(&j->pace, j->pr.rate_limit_bps, bytes, za_io_now_ns(),
			 &retry_ns))
		return true;
	j->pr.throttled++;
	za_job_retry_at(j, retry_ns);
	return false;
}

void za_job_progress(struct za_job *j, uint64_t bytes)
{
	uint64_t before = j->pace.rate_ns;

	j->pr.done_bytes += bytes;
	za_pace_sample(&j->pace, j->pr.done_bytes, za_io_now_ns(),
		       &j->pr.rate_bps);
	if (j->pace.rate_ns != before)
		j->samples++;
}

void za_job_unprogress(struct za_job *j, uint64_t bytes)
{
	j->pr.done_bytes -= bytes < j->pr.done_bytes ? bytes : j->pr.done_bytes;
	za_pace_unsample(&j->pace, bytes);
}

void za_job_set_rate(struct za_job *j, uint64_t rate_bps)
{
	j->pr.rate_limit_bps = rate_bps;
	za_pace_reset_bucket(&j->pace);
}

void za_job_get_progress(const struct za_job *j, struct za_job_progress *pr)
{
	uint64_t left;

	*pr = j->pr;
	pr->state = j->state;
	pr->elapsed_ns =
		j->start_ns ?
			(j->end_ns ? j->end_ns : za_io_now_ns()) - j->start_ns :
			0;
	left = pr->total_bytes > pr->done_bytes ?
		       pr->total_bytes - pr->done_bytes :
		       0;
	pr->eta_s = 0;
	if (pr->rate_bps && j->state == ZA_JOB_RUNNING &&
	    j->samples >= ETA_MIN_SAMPLES)
		pr->eta_s = (left + pr->rate_bps - 1) / pr->rate_bps;
}

/* ---- liveness ---- */

#define LIVE_GRP_MIN 64u

struct za_live_grp {
	uint64_t id;
	unsigned w;
	struct za_live_seg **segs; /* by place in the group */
	struct za_live_grp *next;
};

void za_live_init(struct za_live_set *ls, struct za_engine *eng)
{
	memset(ls, 0, sizeof(*ls));
	ls->eng = eng;
}

void za_live_clear(struct za_live_set *ls)
{
	size_t h;

	for (h = 0; h < ls->size; h++) {
		struct za_live_grp *g;

		while ((g = ls->h[h])) {
			ls->h[h] = g->next;
			free(g->segs);
			free(g);
		}
	}
	free(ls->h);
	ls->h = NULL;
	ls->size = ls->nr = 0;
}

static struct za_live_grp *grp_find(const struct za_live_set *ls, uint64_t id)
{
	struct za_live_grp *g;

	if (!ls->size)
		return NULL;
	for (g = ls->h[id & (ls->size - 1)]; g; g = g->next)
		if (g->id == id)
			return g;
	return NULL;
}

/* Double the buckets when the groups outnumber them (no fixed cap). */
static int grp_grow(struct za_live_set *ls)
{
	size_t size = ls->size ? 2 * ls->size : LIVE_GRP_MIN, h;
	struct za_live_grp **nh = calloc(size, sizeof(*nh));

	if (!nh)
		return -ENOMEM;
	for (h = 0; h < ls->size; h++)
		while (ls->h[h]) {
			struct za_live_grp *g = ls->h[h];

			ls->h[h] = g->next;
			g->next = nh[g->id & (size - 1)];
			nh[g->id & (size - 1)] = g;
		}
	free(ls->h);
	ls->h = nh;
	ls->size = size;
	return 0;
}

void za_live_set(struct za_live_seg *s, uint32_t idx)
{
	if (idx >= s->nr_written)
		return;
	if (s->live[idx / 64] & (1ull << (idx % 64)))
		return;
	s->live[idx / 64] |= 1ull << (idx % 64);
	if (!s->nr_live || idx > s->last_live)
		s->last_live = idx;
	s->nr_live++;
}

void za_live_set_all(struct za_live_seg *s)
{
	uint32_t i;

	for (i = 0; i < s->nr_written; i++)
		za_live_set(s, i);
}

void za_live_seg_fini(struct za_live_seg *s)
{
	free(s->live);
	s->live = NULL;
}

bool za_live_test(const struct za_live_seg *s, uint32_t idx)
{
	return idx < s->nr_written && ((s->live[idx / 64] >> (idx % 64)) & 1);
}

int za_live_add(struct za_live_set *ls, struct za_live_seg *s)
{
	struct za_live_grp *g;

	s->live = calloc((s->nr_written + 63) / 64 + 1, sizeof(*s->live));
	if (!s->live)
		return -ENOMEM;
	s->nr_live = s->last_live = 0;
	/* Journal and metadata segments hold records the map does not
	 * show (unmaps, checkpoints): all of it counts. */
	if (s->stream != ZA_STREAM_DATA)
		za_live_set_all(s);
	g = grp_find(ls, s->group_id);
	if (!g) {
		if (ls->nr >= ls->size && grp_grow(ls))
			goto err_live;
		g = calloc(1, sizeof(*g));
		if (!g)
			goto err_live;
		g->segs = calloc(s->gw ? s->gw : 1, sizeof(*g->segs));
		if (!g->segs) {
			free(g);
			goto err_live;
		}
		g->id = s->group_id;
		g->w = s->gw;
		g->next = ls->h[g->id & (ls->size - 1)];
		ls->h[g->id & (ls->size - 1)] = g;
		ls->nr++;
	}
	if (s->gpos < g->w)
		g->segs[s->gpos] = s;
	return 0;

err_live:
	free(s->live);
	s->live = NULL;
	return -ENOMEM;
}

static int live_extent(void *priv, uint64_t group, uint64_t pos, uint64_t n)
{
	struct za_live_set *ls = priv;
	struct za_live_grp *g = grp_find(ls, group);
	const struct za_stripe_layout *l;
	uint64_t j, j0, j1;

	if (!g || !n)
		return 0;
	for (j = 0; j < g->w && !g->segs[j]; j++)
		;
	if (j == g->w)
		return 0;
	/* Stripe j of the group is stripe j / w of its segment j % w. */
	l = za_engine_stream_layout(ls->eng, g->segs[j]->stream);
	j0 = pos / l->data_blocks;
	j1 = (pos + n - 1) / l->data_blocks;
	for (j = j0; j <= j1; j++) {
		struct za_live_seg *s = g->segs[j % g->w];

		if (s)
			za_live_set(s, (uint32_t)(j / g->w));
	}
	return 0;
}

int za_live_walk(struct za_live_set *ls, struct za_volume *vol)
{
	size_t h;
	unsigned i;

	if (vol)
		return za_volume_walk_live(vol, live_extent, ls);
	for (h = 0; h < ls->size; h++) {
		struct za_live_grp *g;

		for (g = ls->h[h]; g; g = g->next)
			for (i = 0; i < g->w; i++)
				if (g->segs[i])
					za_live_set_all(g->segs[i]);
	}
	return 0;
}
