/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * job.h - the core every background job (rebuild, drain, scrub; GC to
 * come) is built on: its state (idle, running, paused, done) and how it
 * moves between them, the rate limit (a token bucket, changeable while
 * it runs), progress (bytes to do and done, a rate averaged over a
 * window, an ETA only once that rate is known), the one timer a job
 * needs (rate-limit and busy retries), and one status shape for every
 * kind. What to do, and in what order, stays in each kind's file.
 *
 * And the liveness walk the jobs share: given a set of segments, one
 * walk of the volume's map marks which of their stripes hold a block the
 * map still points at (za_live_*).
 *
 * Everything runs on the loop thread.
 */
#ifndef ZA_JOB_H
#define ZA_JOB_H

#include <stdbool.h>
#include <stdint.h>

#include "io.h"
#include "pace.h"

struct za_volume;
struct za_engine;

enum za_job_kind {
	ZA_JOB_REBUILD = 1,
	ZA_JOB_DRAIN = 2,
	ZA_JOB_SCRUB = 3,
	ZA_JOB_GC = 4,
};
const char *za_job_kind_str(enum za_job_kind k);

enum za_job_state {
	ZA_JOB_IDLE = 0, /* never started */
	ZA_JOB_RUNNING = 1,
	ZA_JOB_PAUSED = 2,
	ZA_JOB_DONE = 3, /* the last run ended (see last_error) */
};
const char *za_job_state_str(enum za_job_state s);

/* The figures every job reports, whatever its kind. */
struct za_job_progress {
	enum za_job_state state;
	uint64_t done_bytes, total_bytes;
	uint64_t rate_bps; /* recent; 0 until measured */
	uint64_t eta_s; /* 0: unknown (not running, or no rate yet) */
	uint64_t rate_limit_bps; /* 0: none */
	uint64_t throttled; /* times the rate limit held work back */
	uint64_t elapsed_ns; /* of the current or last run */
	int last_error; /* of the last run that ended */
};

struct za_job {
	struct za_io *io;
	const char *name; /* in log lines: "rebuild", "scrub" */
	enum za_job_state state;
	bool stopping; /* a stop was asked for; the run winds down */
	struct za_job_progress pr; /* done, total, rates, last_error */
	struct za_pace pace;
	unsigned samples; /* rate samples taken this run */
	uint64_t start_ns, end_ns;
	/* The job's one timer: armed by za_job_take() when the rate limit
	 * says wait, and by za_job_retry_at(); calls on_timer once. */
	struct za_io_defer timer;
	bool timer_pending;
	void (*on_timer)(struct za_job *j);
};

/* Set up @j idle; @on_timer is called (loop thread) when its timer
 * fires. */
void za_job_init(struct za_job *j, struct za_io *io, const char *name,
		 uint64_t rate_limit_bps, void (*on_timer)(struct za_job *j));

/* A run begins: running, progress zeroed (the rate limit kept). */
void za_job_begin(struct za_job *j);
/* The run ended with @result (0 or -errno): done, its time and result
 * kept for status. */
void za_job_end(struct za_job *j, int result);
/* Running, or paused (a run is under way either way). */
bool za_job_in_run(const struct za_job *j);

/*
 * May @bytes of work start now? False when the job is not running or is
 * stopping, or when the rate limit says wait: then the timer is armed
 * for when it may, and the refusal counted.
 */
bool za_job_take(struct za_job *j, uint64_t bytes);
/* @bytes of work done; @bytes of work counted done but undone after all
 * (an aborted column), taken back. */
void za_job_progress(struct za_job *j, uint64_t bytes);
void za_job_unprogress(struct za_job *j, uint64_t bytes);
/* A new rate limit, in force at once (0: none). */
void za_job_set_rate(struct za_job *j, uint64_t rate_bps);
/* Call on_timer at @when_ns (if the timer is not armed already). */
void za_job_retry_at(struct za_job *j, uint64_t when_ns);
bool za_job_busy(const struct za_job *j); /* its timer is armed */

/* Fill @pr: ETA only once the rate is known (a few samples in). */
void za_job_get_progress(const struct za_job *j, struct za_job_progress *pr);

/* ---- liveness ---- */

/*
 * A segment whose live stripes a job wants to know. The caller fills
 * the first fields and calls za_live_add(); za_live_walk() marks live[].
 */
struct za_live_seg {
	uint64_t seg_id, group_id;
	uint32_t nr_written; /* stripes written: bits of live[] */
	uint16_t gpos, gw; /* place in its group, the group's width */
	uint8_t stream;
	uint64_t *live; /* bitmap, allocated by za_live_add() */
	uint32_t nr_live;
	uint32_t last_live; /* valid if nr_live */
};

/* The segments of one walk, by group. */
struct za_live_set {
	struct za_live_grp **h;
	size_t size, nr;
	struct za_engine *eng;
};

void za_live_init(struct za_live_set *ls, struct za_engine *eng);
/* Forget the segments (their live[] is theirs: za_live_seg_fini()); the
 * set can be reused. */
void za_live_clear(struct za_live_set *ls);
/*
 * Take part in the next walk: allocates @s->live, all clear. Journal and
 * metadata segments (stream not data) are marked wholly live at once:
 * they hold records the map does not show. 0 or -ENOMEM.
 */
int za_live_add(struct za_live_set *ls, struct za_live_seg *s);
/* Free @s->live. */
void za_live_seg_fini(struct za_live_seg *s);
/* Mark stripe @idx of @s live / every written stripe of @s live. */
void za_live_set(struct za_live_seg *s, uint32_t idx);
void za_live_set_all(struct za_live_seg *s);
bool za_live_test(const struct za_live_seg *s, uint32_t idx);
/* One walk of @vol's map marks the live stripes of every added segment
 * (@vol NULL: everything written counts as live). 0 or -errno. */
int za_live_walk(struct za_live_set *ls, struct za_volume *vol);

#endif /* ZA_JOB_H */
