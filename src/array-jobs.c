// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * array-jobs.c - the array's background jobs as policy: when the rebuild
 * (or drain) starts and what kind of run it is, what happens when it
 * ends (moved columns flushed, drained members retired and released),
 * scrub control and the state its owner keeps across restarts, and GC
 * control. The work itself is rebuild.c, scrub.c and the volume's GC
 * (gc.c), on the job core (job.c).
 */
#include <ctype.h>
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <stddef.h>
#include <time.h>

#include "array-int.h"
#include "container.h"
#include "dev-fault.h"
#include "dev.h"
#include "log.h"

/* ---- rebuild (rebuild.c does the work; this is policy) ---- */

/*
 * Close the devices of members that became REMOVED: the drive is the
 * admin's again (an emulated one's lock is dropped), as after a restart,
 * which opens no removed member. Requests still in flight to one (the
 * resets of the zones its moved columns left) hold it a while longer:
 * try again shortly. Returns true if one is still held.
 */
static bool release_removed(struct za_array *a)
{
	bool held = false;
	unsigned i;
	int r;

	for (i = 0; i < a->nr_members; i++) {
		if (a->states[i] != ZA_MEMBER_REMOVED || !a->devs[i])
			continue;
		r = za_engine_member_release(a->eng, i);
		if (r == -EBUSY) {
			held = true;
			continue;
		}
		if (r)
			continue;
		za_dev_close(a->devs[i]);
		a->devs[i] = NULL;
		za_log_info("array %s: member %u (%s) released", a->sb->name, i,
			    a->paths[i]);
	}
	return held;
}

#define ZA_ARRAY_RELEASE_RETRY_NS (10 * 1000 * 1000ull)

static void release_later(struct za_io_defer *d);

/* release_removed(), and again every 10 ms while a device is held. */
static void release_kick(struct za_array *a)
{
	if (a->rel_pending || a->stopping || !release_removed(a))
		return;
	a->rel_pending = true;
	a->rel_defer.fn = release_later;
	za_io_defer_at(a->io, &a->rel_defer,
		       za_io_now_ns() + ZA_ARRAY_RELEASE_RETRY_NS);
}

static void release_later(struct za_io_defer *d)
{
	struct za_array *a = container_of(d, struct za_array, rel_defer);

	a->rel_pending = false;
	release_kick(a);
}

void arr_rb_flushed(struct za_engine_flush *f, int result)
{
	struct za_array *a = container_of(f, struct za_array, rb_flush);
	bool changed = false;
	unsigned i;

	a->rb_flushing = false;
	if (result || a->stopping)
		return;
	/* With too few members for a full-width segment nothing could be
	 * rebuilt anywhere: the lost members stay counted as lost. */
	if (za_engine_nr_writable(a->eng) <
	    (unsigned)a->sb->geom.k + a->sb->geom.p)
		return;
	/* Members nothing needs any more are retired for good: a stale
	 * copy of one is then refused at assembly. */
	for (i = 0; i < a->nr_members; i++) {
		if ((a->states[i] != ZA_MEMBER_FAILED &&
		     a->states[i] != ZA_MEMBER_MISSING &&
		     a->states[i] != ZA_MEMBER_DRAINING) ||
		    za_engine_member_retire(a->eng, i))
			continue;
		za_log_info("array %s: member %u (%s) holds nothing live any "
			    "more: removed",
			    a->sb->name, i, a->paths[i]);
		/* A drained drive is released clean: no superblock. */
		if (a->states[i] == ZA_MEMBER_DRAINING && a->devs[i] &&
		    za_sb_clear(a->devs[i]))
			za_log_warn("%s: cannot clear its superblock",
				    a->paths[i]);
		a->states[i] = ZA_MEMBER_REMOVED;
		changed = true;
	}
	if (changed) {
		arr_sb_round(a);
		release_kick(a);
	}
}

/* Members that a rebuild run ends by retiring once nothing needs them. */
bool arr_members_to_retire(const struct za_array *a)
{
	unsigned i;

	for (i = 0; i < a->nr_members; i++)
		if (a->states[i] == ZA_MEMBER_FAILED ||
		    a->states[i] == ZA_MEMBER_MISSING ||
		    a->states[i] == ZA_MEMBER_DRAINING)
			return true;
	return false;
}

static void rb_finished(struct za_rebuild *rb, int result, void *priv)
{
	struct za_array *a = priv;

	(void)rb;
	if (result == -ECANCELED || a->stopping || a->rb_flushing)
		return;
	if (result)
		za_log_err("array %s: rebuild ended: %s", a->sb->name,
			   strerror(-result));
	/* The moved columns must be on the drives before the lost members
	 * they replace are forgotten. */
	a->rb_flushing = true;
	a->rb_flush.done = arr_rb_flushed;
	za_engine_flush(a->eng, &a->rb_flush);
}

/*
 * Start (or re-plan) the rebuild, saying what it is: a drain while it only
 * moves columns off members being removed or replaced, a rebuild once a
 * member is lost (redundancy first). The kind stays when the run ends.
 */
static void rb_start(struct za_array *a)
{
	enum za_job_kind kind = ZA_JOB_REBUILD;
	unsigned i;

	if (!za_engine_nr_lost(a->eng))
		for (i = 0; i < a->nr_members; i++)
			if (a->states[i] == ZA_MEMBER_DRAINING)
				kind = ZA_JOB_DRAIN;
	za_rebuild_set_kind(a->rb, kind);
	za_rebuild_start(a->rb);
}

static void rb_start_later(struct za_io_defer *d)
{
	struct za_array *a = container_of(d, struct za_array, rb_defer);

	a->rb_defer_pending = false;
	if (a->rb && !a->stopping)
		rb_start(a);
}

/* Start (or re-plan) the rebuild on the loop, whatever the policy. */
void arr_rebuild_now(struct za_array *a)
{
	if (!a->rb || a->stopping || a->rb_defer_pending)
		return;
	a->rb_defer_pending = true;
	a->rb_defer.fn = rb_start_later;
	za_io_defer(a->io, &a->rb_defer);
}

/* Start (or re-plan) the rebuild on the loop, if the policy says so. */
void arr_rebuild_kick(struct za_array *a)
{
	if (!a->rb || !a->pol.auto_rebuild || a->stopping ||
	    a->rb_defer_pending)
		return;
	a->rb_defer_pending = true;
	a->rb_defer.fn = rb_start_later;
	za_io_defer(a->io, &a->rb_defer);
}

static void scrub_finished(struct za_scrub *sc, int result, void *priv)
{
	struct za_array *a = priv;
	struct za_scrub_status st;

	za_scrub_status(sc, &st);
	if (result == -ECANCELED)
		za_log_info("array %s: scrub stopped after segment %llu",
			    a->sb->name, (unsigned long long)st.position);
	else
		za_log_info("array %s: scrub %s: %llu stripes checked, %llu "
			    "read errors, %llu checksum errors, %llu "
			    "inconsistent parity, %llu columns repaired",
			    a->sb->name, result ? strerror(-result) : "done",
			    (unsigned long long)st.stripes_checked,
			    (unsigned long long)st.err_read,
			    (unsigned long long)st.err_checksum,
			    (unsigned long long)st.err_parity,
			    (unsigned long long)st.cols_repaired);
	if (a->scrub_save) {
		struct za_array_scrub_save sv = { 0 };

		/* Cut short by a stop of the array (a restart): go on with
		 * it after the next assembly, as zpool does after a reboot. */
		sv.running = result == -ECANCELED && !a->scrub_stop_asked;
		sv.position = st.position;
		sv.rate_bps = st.job.rate_limit_bps;
		a->scrub_save(a->scrub_save_priv, &sv);
	}
	a->scrub_stop_asked = false;
}

static void scrub_save_now(struct za_array *a, bool running, bool progress)
{
	struct za_array_scrub_save sv = { 0 };
	struct za_scrub_status st;

	if (!a->scrub_save || !a->scrub)
		return;
	za_scrub_status(a->scrub, &st);
	sv.running = running;
	sv.progress = progress;
	sv.position = st.position;
	sv.rate_bps = st.job.rate_limit_bps;
	a->scrub_save(a->scrub_save_priv, &sv);
}

static void scrub_moved(struct za_scrub *sc, uint64_t position, void *priv)
{
	(void)sc;
	(void)position;
	scrub_save_now(priv, true, true);
}

void za_array_set_scrub_saver(struct za_array *a,
			      void (*save)(void *priv,
					   const struct za_array_scrub_save *s),
			      void *priv)
{
	a->scrub_save = save;
	a->scrub_save_priv = priv;
}

int arr_rebuild_new(struct za_array *a)
{
	struct za_rebuild_params rp = { 0 };
	struct za_scrub_params sp = { 0 };
	int ret;

	sp.io = a->io;
	sp.eng = a->eng;
	sp.vol = a->vol;
	sp.finished = scrub_finished;
	sp.moved = scrub_moved;
	sp.priv = a;
	ret = za_scrub_new(&sp, &a->scrub);
	if (ret)
		return ret;

	rp.io = a->io;
	rp.eng = a->eng;
	rp.vol = a->vol;
	rp.finished = rb_finished;
	rp.priv = a;
	return za_rebuild_new(&rp, &a->rb);
}

/* Stop the rebuild and wait for everything it has in flight. */
void arr_rebuild_quiesce(struct za_array *a)
{
	if (a->scrub) {
		za_scrub_stop(a->scrub);
		while (za_scrub_busy(a->scrub))
			za_io_run_once(a->io);
	}
	if (!a->rb)
		return;
	za_rebuild_stop(a->rb);
	while (za_rebuild_busy(a->rb) || a->rb_defer_pending ||
	       a->rb_flushing || a->rel_pending)
		za_io_run_once(a->io);
}

int za_array_rebuild(struct za_array *a, enum za_array_rebuild_op op,
		     uint64_t rate_bps, char *err, size_t errlen)
{
	struct za_rebuild_status st;

	if (!a->rb) {
		arr_seterr(err, errlen, "array '%s' has no volume",
			   a->sb->name);
		return -EINVAL;
	}
	za_rebuild_status(a->rb, &st);
	switch (op) {
	case ZA_ARRAY_REBUILD_START:
		if (st.job.state == ZA_JOB_RUNNING) {
			arr_seterr(err, errlen, "a rebuild of '%s' is running",
				   a->sb->name);
			return -EALREADY;
		}
		if (st.job.state == ZA_JOB_PAUSED) {
			arr_seterr(err, errlen,
				   "the rebuild of '%s' is paused: resume it",
				   a->sb->name);
			return -EALREADY;
		}
		if (rate_bps)
			za_rebuild_set_rate(a->rb, rate_bps);
		za_log_info("array %s: rebuild started by request",
			    a->sb->name);
		rb_start(a);
		return 0;
	case ZA_ARRAY_REBUILD_PAUSE:
		if (st.job.state != ZA_JOB_RUNNING) {
			arr_seterr(err, errlen, "no rebuild of '%s' is running",
				   a->sb->name);
			return -EINVAL;
		}
		za_rebuild_pause(a->rb);
		za_log_info("array %s: rebuild paused", a->sb->name);
		return 0;
	case ZA_ARRAY_REBUILD_RESUME:
		if (st.job.state != ZA_JOB_PAUSED) {
			arr_seterr(err, errlen,
				   "the rebuild of '%s' is not paused",
				   a->sb->name);
			return -EINVAL;
		}
		if (rate_bps)
			za_rebuild_set_rate(a->rb, rate_bps);
		za_rebuild_resume(a->rb);
		za_log_info("array %s: rebuild resumed", a->sb->name);
		return 0;
	case ZA_ARRAY_REBUILD_RATE:
		za_rebuild_set_rate(a->rb, rate_bps);
		za_log_info("array %s: rebuild rate limit %llu B/s%s",
			    a->sb->name, (unsigned long long)rate_bps,
			    rate_bps ? "" : " (none)");
		return 0;
	}
	arr_seterr(err, errlen, "unknown rebuild operation");
	return -EINVAL;
}

int za_array_gc(struct za_array *a, enum za_array_gc_op op, uint64_t rate_bps,
		char *err, size_t errlen)
{
	struct za_job_progress pr;

	if (!a->vol) {
		arr_seterr(err, errlen, "array '%s' has no volume",
			   a->sb->name);
		return -EINVAL;
	}
	za_volume_gc_progress(a->vol, &pr);
	switch (op) {
	case ZA_ARRAY_GC_PAUSE:
		if (pr.state == ZA_JOB_PAUSED) {
			arr_seterr(err, errlen,
				   "garbage collection of '%s' is "
				   "paused already",
				   a->sb->name);
			return -EALREADY;
		}
		za_volume_gc_pause(a->vol);
		za_log_info("array %s: garbage collection paused (it still "
			    "runs below its start point of free space)",
			    a->sb->name);
		return 0;
	case ZA_ARRAY_GC_RESUME:
		if (pr.state != ZA_JOB_PAUSED) {
			arr_seterr(err, errlen,
				   "garbage collection of '%s' is "
				   "not paused",
				   a->sb->name);
			return -EINVAL;
		}
		za_volume_gc_resume(a->vol);
		za_log_info("array %s: garbage collection resumed",
			    a->sb->name);
		return 0;
	case ZA_ARRAY_GC_RATE:
		za_volume_gc_set_rate(a->vol, rate_bps);
		za_log_info("array %s: garbage collection rate limit %llu "
			    "B/s%s",
			    a->sb->name, (unsigned long long)rate_bps,
			    rate_bps ? "" : " (none)");
		return 0;
	}
	arr_seterr(err, errlen, "unknown garbage collection operation");
	return -EINVAL;
}

int za_array_scrub(struct za_array *a, enum za_array_scrub_op op,
		   uint64_t rate_bps, char *err, size_t errlen)
{
	struct za_scrub_status st;
	bool in_run;
	int ret;

	if (!a->scrub) {
		arr_seterr(err, errlen, "array '%s' has no volume",
			   a->sb->name);
		return -EINVAL;
	}
	za_scrub_status(a->scrub, &st);
	in_run = st.job.state == ZA_JOB_RUNNING ||
		 st.job.state == ZA_JOB_PAUSED;
	switch (op) {
	case ZA_ARRAY_SCRUB_START:
		break;
	case ZA_ARRAY_SCRUB_STOP:
		if (!in_run) {
			arr_seterr(err, errlen, "no scrub of '%s' is running",
				   a->sb->name);
			return -EINVAL;
		}
		a->scrub_stop_asked = true;
		za_scrub_stop(a->scrub);
		return 0;
	case ZA_ARRAY_SCRUB_PAUSE:
		if (st.job.state == ZA_JOB_PAUSED) {
			arr_seterr(err, errlen,
				   "the scrub of '%s' is paused already",
				   a->sb->name);
			return -EALREADY;
		}
		if (st.job.state != ZA_JOB_RUNNING) {
			arr_seterr(err, errlen, "no scrub of '%s' is running",
				   a->sb->name);
			return -EINVAL;
		}
		za_scrub_pause(a->scrub);
		za_log_info("array %s: scrub paused", a->sb->name);
		return 0;
	case ZA_ARRAY_SCRUB_RESUME:
		if (st.job.state != ZA_JOB_PAUSED) {
			arr_seterr(err, errlen,
				   "the scrub of '%s' is not paused",
				   a->sb->name);
			return -EINVAL;
		}
		if (rate_bps != UINT64_MAX)
			za_scrub_set_rate(a->scrub, rate_bps);
		za_scrub_resume(a->scrub);
		za_log_info("array %s: scrub resumed", a->sb->name);
		return 0;
	case ZA_ARRAY_SCRUB_RATE:
		za_scrub_set_rate(a->scrub, rate_bps);
		za_log_info("array %s: scrub rate limit %llu B/s%s",
			    a->sb->name, (unsigned long long)rate_bps,
			    rate_bps ? "" : " (none)");
		/* Kept with the position for the next start. */
		if (in_run)
			scrub_save_now(a, true, false);
		return 0;
	default:
		arr_seterr(err, errlen, "unknown scrub operation");
		return -EINVAL;
	}
	if (in_run) {
		arr_seterr(err, errlen, "a scrub of '%s' is %s", a->sb->name,
			   st.job.state == ZA_JOB_PAUSED ? "paused: resume it" :
							   "running");
		return -EALREADY;
	}
	if (rate_bps != UINT64_MAX)
		za_scrub_set_rate(a->scrub, rate_bps);
	/* A stopped scrub goes on after the last segment it finished. */
	ret = za_scrub_start(a->scrub);
	if (ret) {
		arr_seterr(err, errlen, "cannot start a scrub: %s",
			   strerror(-ret));
		return ret;
	}
	za_log_info("array %s: scrub started after segment %llu", a->sb->name,
		    (unsigned long long)za_scrub_position(a->scrub));
	scrub_save_now(a, true, false);
	return 0;
}

int za_array_scrub_restore(struct za_array *a,
			   const struct za_array_scrub_save *s, char *err,
			   size_t errlen)
{
	int ret;

	if (!a->scrub) {
		arr_seterr(err, errlen, "array '%s' has no volume",
			   a->sb->name);
		return -EINVAL;
	}
	ret = za_scrub_set_position(a->scrub, s->position);
	if (ret) {
		arr_seterr(err, errlen, "a scrub of '%s' is running",
			   a->sb->name);
		return ret;
	}
	za_scrub_set_rate(a->scrub, s->rate_bps);
	if (!s->running)
		return 0;
	ret = za_scrub_start(a->scrub);
	if (ret) {
		arr_seterr(err, errlen, "cannot resume the scrub: %s",
			   strerror(-ret));
		return ret;
	}
	za_log_info("array %s: scrub resumed after segment %llu", a->sb->name,
		    (unsigned long long)s->position);
	scrub_save_now(a, true, false);
	return 0;
}
