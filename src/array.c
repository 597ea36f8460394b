// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * array.c - array lifecycle: create (format members, first superblocks),
 * assemble (resolve members from their superblocks, refuse what cannot be
 * trusted), member failure bookkeeping (superblock updates), status, stop
 * and destroy.
 *
 * It owns the member devices and the segment engine; the volume (map,
 * journal, GC) and the NBD export sit above it and are not here. Policy
 * lives here: an array starts degraded with up to p members lost and
 * refuses to start with more; a failed member is recorded in every
 * surviving member's superblock before anyone relies on it.
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

#include "array.h"
#include "container.h"
#include "dev-fault.h"
#include "dev.h"
#include "log.h"
#include "rebuild.h"
#include "scrub.h"
#include "engine.h"
#include "volume.h"

struct za_array {
	struct za_io *io;
	struct za_sb *sb; /* the current record (member fields: member 0) */
	unsigned nr_members;
	struct za_dev **devs; /* per member; NULL when missing */
	char (*paths)[256];
	uint8_t *states;
	struct za_engine *eng;
	struct za_volume *vol;
	struct za_rebuild *rb;
	struct za_scrub *scrub;
	struct za_io_defer rb_defer; /* start the rebuild on the loop */
	bool rb_defer_pending;
	struct za_engine_flush rb_flush; /* moved columns made durable */
	bool rb_flushing;
	struct za_io_defer rel_defer; /* release removed members' devices */
	bool rel_pending;
	/* Superblock updates: one round at a time, coalesced. */
	struct za_sb_write_op *sb_ops;
	unsigned sb_pending;
	uint64_t sb_written; /* superblock writes that completed */
	bool sb_dirty;
	bool stopping;
	/* The scrub's state, for its owner to keep across restarts. */
	void (*scrub_save)(void *priv, const struct za_array_scrub_save *s);
	void *scrub_save_priv;
	bool scrub_stop_asked; /* by request: not to resume after a restart */
};

static void seterr(char *err, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void seterr(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!err || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}

const char *za_array_state_str(enum za_array_state s)
{
	switch (s) {
	case ZA_ARRAY_HEALTHY:
		return "healthy";
	case ZA_ARRAY_DEGRADED:
		return "degraded";
	case ZA_ARRAY_FAILED:
		return "failed";
	}
	return "unknown";
}

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
	case ZA_JOB_RUNNING:
		return "running";
	case ZA_JOB_PAUSED:
		return "paused";
	case ZA_JOB_DONE:
		return "done";
	}
	return "unknown";
}

static bool name_ok(const char *n)
{
	size_t i, len = n ? strlen(n) : 0;

	if (!len || len >= ZA_SB_NAME_BYTES)
		return false;
	for (i = 0; i < len; i++)
		if (!isalnum((unsigned char)n[i]) && !strchr("_.-", n[i]))
			return false;
	return true;
}

static void rebuild_quiesce(struct za_array *a);

static void array_free(struct za_array *a)
{
	unsigned i;

	if (!a)
		return;
	if (a->vol) {
		za_volume_gc_stop(a->vol);
		while (za_volume_busy(a->vol))
			za_io_run_once(a->io);
	}
	rebuild_quiesce(a);
	if (a->eng) {
		while (za_engine_busy(a->eng) || a->sb_pending)
			za_io_run_once(a->io);
	}
	za_rebuild_free(a->rb);
	za_scrub_free(a->scrub);
	za_volume_free(a->vol);
	za_engine_free(a->eng);
	for (i = 0; i < a->nr_members; i++)
		if (a->devs && a->devs[i])
			za_dev_close(a->devs[i]);
	free(a->devs);
	free(a->paths);
	free(a->states);
	free(a->sb_ops);
	free(a->sb);
	free(a);
}

static struct za_array *array_alloc(struct za_io *io, unsigned n)
{
	struct za_array *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	a->io = io;
	a->nr_members = n;
	a->sb = calloc(1, sizeof(*a->sb));
	a->devs = calloc(n, sizeof(*a->devs));
	a->paths = calloc(n, sizeof(*a->paths));
	a->states = calloc(n, 1);
	a->sb_ops = calloc(n, sizeof(*a->sb_ops));
	if (!a->sb || !a->devs || !a->paths || !a->states || !a->sb_ops) {
		array_free(a);
		return NULL;
	}
	return a;
}

/* ---- fault injection (a test aid: zarrayd --fault-injection) ---- */

static bool fault_injection;

void za_array_set_fault_injection(bool on)
{
	fault_injection = on;
}

/* za_dev_open(), wrapped in the fault injector when it is on. */
static int member_open(struct za_io *io, const char *path, struct za_dev **out)
{
	struct za_dev *dev;
	int ret = za_dev_open(io, path, 0, &dev);

	if (ret || !fault_injection) {
		*out = ret ? NULL : dev;
		return ret;
	}
	ret = za_fault_wrap(dev, out);
	if (ret)
		za_dev_close(dev);
	return ret;
}

/*
 * The member @path names: one in service first, since a removed member's
 * drive may have been added again as a new member; else a removed one.
 */
static int member_find(const struct za_array *a, const char *path)
{
	int found = -1;
	unsigned i;

	for (i = 0; i < a->nr_members; i++) {
		if (strcmp(a->paths[i], path))
			continue;
		if (a->states[i] != ZA_MEMBER_REMOVED)
			return (int)i;
		found = (int)i;
	}
	return found;
}

int za_array_inject(struct za_array *a, const char *path, const char *spec,
		    char *err, size_t errlen)
{
	struct za_fault_cfg cfg = { 0 };
	const char *bad = NULL;
	int i = member_find(a, path);

	if (i < 0) {
		seterr(err, errlen, "%s is not a member of array '%s'", path,
		       a->sb->name);
		return -ENOENT;
	}
	if (!a->devs[i]) {
		seterr(err, errlen, "%s is %s: zarrayd holds no device for it",
		       path, za_member_state_str(a->states[i]));
		return -ENODEV;
	}
	if (!za_dev_is_fault(a->devs[i])) {
		seterr(err, errlen,
		       "fault injection is off: zarrayd was started without "
		       "--fault-injection");
		return -EOPNOTSUPP;
	}
	if (strcmp(spec, "none") && za_fault_parse(spec, &cfg, &bad)) {
		seterr(err, errlen, "invalid fault spec at '%.40s'",
		       bad ? bad : spec);
		return -EINVAL;
	}
	za_log_warn("array %s: member %d (%s): injecting faults: %s",
		    a->sb->name, i, path, spec);
	za_fault_set(a->devs[i], &cfg);
	return 0;
}

/* ---- superblock updates while running ---- */

static void sb_round(struct za_array *a);

static void sb_write_done(struct za_sb_write_op *op, int result)
{
	struct za_array *a = op->priv;
	unsigned idx = (unsigned)(op - a->sb_ops);

	if (result) {
		za_log_err("%s: superblock update failed: %s", a->paths[idx],
			   strerror(-result));
		if (a->eng && !a->stopping)
			za_engine_member_fail(a->eng, idx, result);
	} else {
		a->sb_written++;
	}
	if (--a->sb_pending == 0 && a->sb_dirty)
		sb_round(a);
}

/*
 * The member that takes member @i's place (zarray replace), if its record
 * still holds, or -1: while @i is draining, failed or missing and the new
 * member is online; once @i is removed, or the new one is not in service,
 * the record is dropped (a draining @i is back in service then:
 * replaces_abandon(); the rebuild puts a lost @i's columns anywhere).
 */
static int replacement_of(const struct za_array *a, unsigned i)
{
	unsigned r = a->sb->members[i].replacement;

	if (!r || r - 1 >= a->nr_members || r - 1 == i)
		return -1;
	if ((a->states[i] != ZA_MEMBER_DRAINING &&
	     a->states[i] != ZA_MEMBER_FAILED &&
	     a->states[i] != ZA_MEMBER_MISSING) ||
	    a->states[r - 1] != ZA_MEMBER_ONLINE)
		return -1;
	return (int)r - 1;
}

/*
 * Stop the replace of member @o, draining for it: @o goes back into
 * service, as md keeps the original device when its replacement fails or
 * is removed, and the record is dropped; the columns the new member had
 * taken are rebuilt from the others (it failed) or move off it like any
 * draining member's (it is being removed). 0, or -EINVAL if @o is not
 * draining.
 */
static int replace_stop(struct za_array *a, unsigned o, const char *why)
{
	unsigned r = a->sb->members[o].replacement;

	if (za_engine_member_undrain(a->eng, o))
		return -EINVAL;
	a->states[o] = ZA_MEMBER_ONLINE;
	a->sb->members[o].replacement = 0;
	if (a->rb)
		za_rebuild_set_dest(a->rb, o, -1);
	za_log_warn("array %s: replace of member %u (%s) stopped: its "
		    "replacement, member %u (%s), %s; member %u stays in "
		    "service",
		    a->sb->name, o, a->paths[o], r - 1, a->paths[r - 1], why,
		    o);
	return 0;
}

/* The member whose replace member @n is (draining for it), or -1. */
static int replaced_by_member(const struct za_array *a, unsigned n)
{
	unsigned o;

	for (o = 0; o < a->nr_members; o++)
		if (a->states[o] == ZA_MEMBER_DRAINING &&
		    replacement_of(a, o) == (int)n)
			return (int)o;
	return -1;
}

/*
 * A replace whose new drive left service (failed, or missing at assembly)
 * before it had all of OLD's columns: an OLD that was whole, draining
 * only for the replace, goes back into service (replace_stop()). (A
 * failed OLD stays failed: its columns are rebuilt onto any member.) True
 * if any did.
 */
static bool replaces_abandon(struct za_array *a)
{
	char why[64];
	bool any = false;
	unsigned o, r;

	for (o = 0; o < a->nr_members; o++) {
		r = a->sb->members[o].replacement;
		if (!r || r - 1 >= a->nr_members || r - 1 == o ||
		    a->states[o] != ZA_MEMBER_DRAINING ||
		    a->states[r - 1] == ZA_MEMBER_ONLINE)
			continue;
		snprintf(why, sizeof(why), "is %s",
			 za_member_state_str(a->states[r - 1]));
		any |= replace_stop(a, o, why) == 0;
	}
	return any;
}

/*
 * Write the current record (with the next generation) to every member that
 * is still in service. A change made while a round is in flight is written
 * by the next round, so rounds never overlap on a drive.
 */
static void sb_round(struct za_array *a)
{
	unsigned i;

	if (a->sb_pending) {
		a->sb_dirty = true;
		return;
	}
	a->sb_dirty = false;
	a->sb->generation++;
	for (i = 0; i < a->nr_members; i++)
		a->sb->members[i].state = a->states[i];
	for (i = 0; i < a->nr_members; i++)
		if (replacement_of(a, i) < 0)
			a->sb->members[i].replacement = 0;
	for (i = 0; i < a->nr_members; i++) {
		if (!a->devs[i] || (a->states[i] != ZA_MEMBER_ONLINE &&
				    a->states[i] != ZA_MEMBER_DRAINING))
			continue;
		a->sb->member_uuid = a->sb->members[i].uuid;
		a->sb->member_idx = i;
		a->sb_pending++;
		if (za_sb_write_async(&a->sb_ops[i], a->devs[i], a->sb,
				      sb_write_done, a)) {
			a->sb_pending--;
			za_log_err("%s: cannot queue a superblock update",
				   a->paths[i]);
		}
	}
}

/* ---- rebuild (rebuild.c does the work; this is policy) ---- */

static bool auto_rebuild = true;

void za_array_set_auto_rebuild(bool on)
{
	auto_rebuild = on;
}

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

static void rb_flushed(struct za_engine_flush *f, int result)
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
		sb_round(a);
		release_kick(a);
	}
}

/* Members that a rebuild run ends by retiring once nothing needs them. */
static bool members_to_retire(const struct za_array *a)
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
	a->rb_flush.done = rb_flushed;
	za_engine_flush(a->eng, &a->rb_flush);
}

static void rb_start_later(struct za_io_defer *d)
{
	struct za_array *a = container_of(d, struct za_array, rb_defer);

	a->rb_defer_pending = false;
	if (a->rb && !a->stopping)
		za_rebuild_start(a->rb);
}

/* Start (or re-plan) the rebuild on the loop, whatever the policy. */
static void rebuild_now(struct za_array *a)
{
	if (!a->rb || a->stopping || a->rb_defer_pending)
		return;
	a->rb_defer_pending = true;
	a->rb_defer.fn = rb_start_later;
	za_io_defer(a->io, &a->rb_defer);
}

/* Start (or re-plan) the rebuild on the loop, if the policy says so. */
static void rebuild_kick(struct za_array *a)
{
	if (!a->rb || !auto_rebuild || a->stopping || a->rb_defer_pending)
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
		sv.rate_bps = st.rate_limit_bps;
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
	sv.rate_bps = st.rate_limit_bps;
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

static int rebuild_new(struct za_array *a)
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
static void rebuild_quiesce(struct za_array *a)
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
		seterr(err, errlen, "array '%s' has no volume", a->sb->name);
		return -EINVAL;
	}
	za_rebuild_status(a->rb, &st);
	switch (op) {
	case ZA_ARRAY_REBUILD_START:
		if (st.state == ZA_REBUILD_RUNNING) {
			seterr(err, errlen, "a rebuild of '%s' is running",
			       a->sb->name);
			return -EALREADY;
		}
		if (st.state == ZA_REBUILD_PAUSED) {
			seterr(err, errlen,
			       "the rebuild of '%s' is paused: resume it",
			       a->sb->name);
			return -EALREADY;
		}
		if (rate_bps)
			za_rebuild_set_rate(a->rb, rate_bps);
		za_log_info("array %s: rebuild started by request",
			    a->sb->name);
		za_rebuild_start(a->rb);
		return 0;
	case ZA_ARRAY_REBUILD_PAUSE:
		if (st.state != ZA_REBUILD_RUNNING) {
			seterr(err, errlen, "no rebuild of '%s' is running",
			       a->sb->name);
			return -EINVAL;
		}
		za_rebuild_pause(a->rb);
		za_log_info("array %s: rebuild paused", a->sb->name);
		return 0;
	case ZA_ARRAY_REBUILD_RESUME:
		if (st.state != ZA_REBUILD_PAUSED) {
			seterr(err, errlen, "the rebuild of '%s' is not paused",
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
	seterr(err, errlen, "unknown rebuild operation");
	return -EINVAL;
}

static void on_member_failed(struct za_engine *e, unsigned idx, int err,
			     void *priv)
{
	struct za_array *a = priv;

	(void)e;
	a->states[idx] = ZA_MEMBER_FAILED;
	za_log_err("array %s: member %u (%s) failed: %s; %u of %u lost",
		   a->sb->name, idx, a->paths[idx], strerror(-err),
		   za_engine_nr_lost(a->eng), (unsigned)a->sb->geom.p);
	replaces_abandon(a);
	sb_round(a);
	rebuild_kick(a);
}

/*
 * md's default (max_corrected_read_errors): a few unreadable sectors in a
 * drive's life are normal and repaired from parity; a drive that keeps
 * returning them is dying, and its reads cost a decode each. Our count is
 * of failed reads, never decayed, and starts again at each assembly.
 */
static unsigned max_read_errors = ZA_ARRAY_MAX_READ_ERRORS;

void za_array_set_max_read_errors(unsigned n)
{
	max_read_errors = n;
}

static unsigned idle_gc_ms = ZA_ARRAY_IDLE_GC_MS;

void za_array_set_idle_gc_ms(unsigned ms)
{
	idle_gc_ms = ms;
}

static int engine_start(struct za_array *a, uint64_t next_seq,
			uint64_t next_seg)
{
	struct za_engine_params prm = { 0 };

	prm.geom = a->sb->geom;
	prm.array_uuid = a->sb->array_uuid;
	prm.nr_members = a->nr_members;
	prm.devs = a->devs;
	prm.states = a->states;
	prm.next_seq = next_seq;
	prm.next_seg_id = next_seg;
	prm.max_read_errors = max_read_errors;
	prm.member_failed = on_member_failed;
	prm.priv = a;
	return za_engine_new(a->io, &prm, &a->eng);
}

static int volume_start(struct za_array *a)
{
	struct za_volume_params vp = { 0 };

	vp.eng = a->eng;
	vp.size_bytes = a->sb->volume_bytes;
	/* Garbage collected while idle, so that writes after a quiet spell
	 * find room (docs/design.md 8.4). */
	vp.idle_gc_ms = idle_gc_ms;
	return za_volume_new(a->io, &vp, &a->vol);
}

/* ---- create ---- */

static bool same_file(const struct stat *x, const struct stat *y)
{
	if (S_ISBLK(x->st_mode) && S_ISBLK(y->st_mode))
		return x->st_rdev == y->st_rdev;
	return x->st_dev == y->st_dev && x->st_ino == y->st_ino;
}

/* Default rows: a column of at least 256 KiB per header, at most 1 MiB. */
static uint8_t default_rows(uint32_t chunk)
{
	uint32_t rows = chunk >= (256u << 10) ? 1 : (256u << 10) / chunk;

	return (uint8_t)(rows > 255 ? 255 : rows);
}

/* Drives that hold no volume of k+p with the GC reserve, asked or not. */
static void seterr_too_small(char *err, size_t errlen, unsigned k, unsigned p)
{
	seterr(err, errlen,
	       "these drives are too small for %u+%u with the reserve "
	       "garbage collection needs",
	       k, p);
}

int za_array_create(struct za_io *io, const struct za_array_create_params *p,
		    struct za_array **out, char *err, size_t errlen)
{
	struct stat *st = NULL;
	struct za_array *a = NULL;
	const char *why = NULL;
	struct za_geom g = { 0 };
	unsigned i, j, n = p->nr_paths;
	int ret;

	if (!name_ok(p->name)) {
		seterr(err, errlen,
		       "invalid array name '%s': 1-63 characters of "
		       "A-Z a-z 0-9 _ . -",
		       p->name ? p->name : "");
		return -EINVAL;
	}
	g.k = (uint8_t)p->k;
	g.p = (uint8_t)p->p;
	g.matrix = ZA_EC_MATRIX_CAUCHY;
	g.chunk_bytes = p->chunk_bytes ? p->chunk_bytes : 64u << 10;
	g.stripe_rows = default_rows(g.chunk_bytes);
	g.lblock_bytes = 4096;
	g.hdr_bytes = 4096;
	if (p->k < 1 || p->k > 63 || p->p < 1 || p->p > 6 ||
	    za_geom_check(&g, &why)) {
		seterr(err, errlen, "invalid geometry %u+%u, chunk %u: %s",
		       p->k, p->p, g.chunk_bytes,
		       why ? why : "data must be 1-63, parity 1-6");
		return -EINVAL;
	}
	if (n < p->k + p->p) {
		seterr(err, errlen, "%u+%u needs at least %u drives, %u given",
		       p->k, p->p, p->k + p->p, n);
		return -EINVAL;
	}
	if (p->size_bytes % 4096) {
		seterr(err, errlen,
		       "the volume size must be a multiple of 4 KiB");
		return -EINVAL;
	}
	if (n > ZA_SB_MAX_MEMBERS) {
		seterr(err, errlen, "at most %u drives per array",
		       ZA_SB_MAX_MEMBERS);
		return -EINVAL;
	}
	st = calloc(n, sizeof(*st));
	a = array_alloc(io, n);
	if (!st || !a) {
		ret = -ENOMEM;
		seterr(err, errlen, "out of memory");
		goto err_free;
	}
	for (i = 0; i < n; i++) {
		if (stat(p->paths[i], &st[i])) {
			ret = -errno;
			seterr(err, errlen, "%s: %s", p->paths[i],
			       strerror(errno));
			goto err_free;
		}
		for (j = 0; j < i; j++)
			if (same_file(&st[i], &st[j])) {
				ret = -EINVAL;
				seterr(err, errlen,
				       "%s and %s are the same drive",
				       p->paths[j], p->paths[i]);
				goto err_free;
			}
	}
	/* Open and check every drive before writing anything to any. */
	for (i = 0; i < n; i++) {
		struct za_sb *old;

		snprintf(a->paths[i], sizeof(a->paths[i]), "%s", p->paths[i]);
		ret = member_open(io, p->paths[i], &a->devs[i]);
		if (ret) {
			seterr(err, errlen, "%s: %s", p->paths[i],
			       ret == -EMEDIUMTYPE ?
				       "not a zoned drive" :
			       ret == -EWOULDBLOCK || ret == -EBUSY ?
				       "in use by another process" :
				       strerror(-ret));
			if (ret == -EWOULDBLOCK)
				ret = -EBUSY;
			goto err_free;
		}
		ret = za_sb_check_dev(a->devs[i]);
		if (ret) {
			seterr(err, errlen,
			       "%s: unsuitable drive (too few or too small "
			       "zones, or blocks other than 4096 bytes)",
			       p->paths[i]);
			goto err_free;
		}
		old = malloc(sizeof(*old));
		if (!old) {
			ret = -ENOMEM;
			goto err_free;
		}
		ret = za_sb_read(a->devs[i], old);
		if (ret == 0 && !p->force) {
			char u[37];

			za_uuid_fmt(&old->array_uuid, u);
			seterr(err, errlen,
			       "%s belongs to array '%s' (%s); use --force to "
			       "overwrite it",
			       p->paths[i], old->name, u);
			free(old);
			ret = -EBUSY;
			goto err_free;
		}
		free(old);
		if (ret && ret != -ENOENT && ret != -EBADMSG &&
		    ret != -EPROTONOSUPPORT) {
			seterr(err, errlen, "%s: cannot read: %s", p->paths[i],
			       strerror(-ret));
			goto err_free;
		}
	}
	/* Format: clear old superblocks and data zones, then write ours. */
	ret = za_uuid_gen(&a->sb->array_uuid);
	if (ret)
		goto err_free;
	snprintf(a->sb->name, sizeof(a->sb->name), "%s", p->name);
	a->sb->generation = 1;
	a->sb->ctime_s = (uint64_t)time(NULL);
	a->sb->geom = g;
	a->sb->volume_bytes = p->size_bytes;
	a->sb->nr_members = n;
	for (i = 0; i < n; i++) {
		struct za_sb_member *m = &a->sb->members[i];
		const struct za_dev_caps *c = &a->devs[i]->caps;
		const char *hint = p->paths[i];

		if (strlen(hint) >= ZA_SB_HINT_BYTES)
			hint += strlen(hint) - (ZA_SB_HINT_BYTES - 1);
		ret = za_uuid_gen(&m->uuid);
		if (ret)
			goto err_free;
		m->state = ZA_MEMBER_ONLINE;
		m->nr_zones = c->nr_zones;
		m->capacity_bytes = c->capacity_bytes;
		m->zone_size_bytes = c->zone_size_bytes;
		snprintf(m->path_hint, sizeof(m->path_hint), "%s", hint);
		a->states[i] = ZA_MEMBER_ONLINE;
	}
	for (i = 0; i < n; i++) {
		ret = za_sb_clear(a->devs[i]);
		if (!ret)
			ret = za_engine_format(a->devs[i]);
		if (!ret) {
			a->sb->member_uuid = a->sb->members[i].uuid;
			a->sb->member_idx = i;
			ret = za_sb_write(a->devs[i], a->sb);
		}
		if (ret) {
			seterr(err, errlen, "%s: formatting failed: %s",
			       p->paths[i], strerror(-ret));
			goto err_free;
		}
	}
	ret = engine_start(a, 1, 1);
	if (ret) {
		seterr(err, errlen, "cannot start the array: %s",
		       strerror(-ret));
		goto err_free;
	}
	{
		uint64_t usable = za_volume_default_size(a->eng);
		char b1[32], b2[32];

		if (p->size_bytes && !usable) {
			seterr_too_small(err, errlen, p->k, p->p);
			ret = -ENOSPC;
			goto err_clear;
		}
		if (p->size_bytes > usable) {
			seterr(err, errlen,
			       "--size %s is more than the %s these drives "
			       "can hold with %u+%u and a reserve for garbage "
			       "collection (at most %llu bytes)",
			       za_fmt_size(p->size_bytes, b1, sizeof(b1)),
			       za_fmt_size(usable, b2, sizeof(b2)), p->k, p->p,
			       (unsigned long long)usable);
			ret = -EINVAL;
			goto err_clear;
		}
	}
	ret = volume_start(a);
	if (ret) {
		if (ret == -ENOSPC)
			seterr_too_small(err, errlen, p->k, p->p);
		else
			seterr(err, errlen, "cannot start the volume (%u+%u)",
			       p->k, p->p);
		goto err_clear;
	}
	ret = rebuild_new(a);
	if (ret) {
		seterr(err, errlen, "out of memory");
		goto err_clear;
	}
	if (!p->size_bytes) {
		a->sb->volume_bytes = za_volume_size(a->vol);
		a->sb->generation++;
		for (i = 0; i < n && !ret; i++) {
			a->sb->member_uuid = a->sb->members[i].uuid;
			a->sb->member_idx = i;
			ret = za_sb_write(a->devs[i], a->sb);
		}
		if (ret) {
			seterr(err, errlen, "%s: superblock write failed: %s",
			       p->paths[i - 1], strerror(-ret));
			goto err_clear;
		}
	}
	free(st);
	za_log_info("array %s created: %u+%u over %u drives", p->name, p->k,
		    p->p, n);
	*out = a;
	return 0;

err_clear:
	/* Leave no half-made array behind. */
	za_engine_free(a->eng);
	a->eng = NULL;
	for (i = 0; i < n; i++)
		za_sb_clear(a->devs[i]);
err_free:
	free(st);
	array_free(a);
	return ret;
}

/* ---- assemble ---- */

int za_array_assemble(struct za_io *io, const char *name,
		      const char *const *paths, unsigned n,
		      struct za_array **out, char *err, size_t errlen)
{
	struct za_dev **devs = NULL;
	struct za_sb **sbs = NULL;
	struct za_asm_result *res = NULL;
	struct za_array *a = NULL;
	int *rc = NULL, ret;
	unsigned i, nm;
	bool changed = false;

	if (!n || n > ZA_SB_MAX_MEMBERS) {
		seterr(err, errlen, "give between 1 and %u drives",
		       ZA_SB_MAX_MEMBERS);
		return -EINVAL;
	}
	devs = calloc(n, sizeof(*devs));
	sbs = calloc(n, sizeof(*sbs));
	rc = calloc(n, sizeof(*rc));
	res = calloc(1, sizeof(*res));
	if (!devs || !sbs || !rc || !res) {
		ret = -ENOMEM;
		goto out;
	}
	for (i = 0; i < n; i++) {
		ret = member_open(io, paths[i], &devs[i]);
		if (ret) {
			seterr(err, errlen, "%s: %s", paths[i],
			       ret == -EMEDIUMTYPE ?
				       "not a zoned drive" :
			       ret == -EWOULDBLOCK ?
				       "in use by another process" :
				       strerror(-ret));
			if (ret == -EWOULDBLOCK)
				ret = -EBUSY;
			goto out;
		}
		sbs[i] = malloc(sizeof(**sbs));
		if (!sbs[i]) {
			ret = -ENOMEM;
			goto out;
		}
		rc[i] = za_sb_read(devs[i], sbs[i]);
		if (rc[i]) {
			free(sbs[i]);
			sbs[i] = NULL;
		}
	}
	ret = za_sb_assemble((const struct za_sb *const *)sbs, rc, n, name,
			     res);
	if (ret == -ENOENT) {
		seterr(err, errlen, "no drive given belongs to an array '%s'",
		       name ? name : "");
		goto out;
	}
	if (ret == -EEXIST) {
		seterr(err, errlen,
		       "two different arrays are called '%s' among these "
		       "drives: give the drives of one",
		       name ? name : "");
		goto out;
	}
	if (ret) {
		seterr(err, errlen, "assembly failed: %s", strerror(-ret));
		goto out;
	}
	for (i = 0; i < n; i++)
		if (res->dev_state[i] != ZA_ASM_DEV_MEMBER)
			za_log_warn("%s: not used: %s", paths[i],
				    za_asm_dev_str(res->dev_state[i]));
	nm = res->ref->nr_members;
	if (res->nr_lost > res->ref->geom.p) {
		char list[512] = "";
		size_t off = 0;

		for (i = 0; i < nm && off < sizeof(list) - 64; i++)
			if (res->member_state[i] == ZA_MEMBER_MISSING ||
			    res->member_state[i] == ZA_MEMBER_FAILED)
				off += (size_t)snprintf(
					list + off, sizeof(list) - off,
					"%s%u (%s, last seen %s)",
					off ? ", " : "", i,
					za_member_state_str(
						res->member_state[i]),
					res->ref->members[i].path_hint);
		seterr(err, errlen,
		       "array '%s' cannot start: %u members lost, parity "
		       "covers %u: %s",
		       res->ref->name, res->nr_lost, res->ref->geom.p, list);
		ret = -ENXIO;
		goto out;
	}
	a = array_alloc(io, nm);
	if (!a) {
		ret = -ENOMEM;
		goto out;
	}
	*a->sb = *res->ref;
	for (i = 0; i < nm; i++) {
		int d = res->member_dev[i];

		a->states[i] = res->member_state[i];
		if (a->states[i] != a->sb->members[i].state)
			changed = true;
		if (d >= 0) {
			a->devs[i] = devs[d];
			devs[d] = NULL;
			snprintf(a->paths[i], sizeof(a->paths[i]), "%s",
				 paths[d]);
		} else {
			const char *path = a->sb->members[i].path_hint;
			unsigned x;

			/* A drive given that this member was (stale: failed
			 * or removed since) has its full path; the hint is
			 * only the path's end. */
			for (x = 0; x < n; x++)
				if (sbs[x] &&
				    res->dev_state[x] == ZA_ASM_DEV_STALE &&
				    za_uuid_eq(&sbs[x]->member_uuid,
					       &a->sb->members[i].uuid)) {
					path = paths[x];
					break;
				}
			snprintf(a->paths[i], sizeof(a->paths[i]), "%s", path);
		}
	}
	/*
	 * Data zones already written are kept (USED) by the engine until
	 * recovery has read them; sequence numbers and ids then continue
	 * after the highest found on the drives.
	 */
	ret = engine_start(a, 1, 1);
	if (ret) {
		seterr(err, errlen, "cannot start the array: %s",
		       strerror(-ret));
		goto out;
	}
	ret = volume_start(a);
	if (!ret)
		ret = za_volume_recover(a->vol);
	if (!ret)
		ret = rebuild_new(a);
	if (!ret)
		ret = za_rebuild_mark_dead_now(a->rb);
	if (ret) {
		seterr(err, errlen, "cannot recover the volume: %s",
		       strerror(-ret));
		goto out;
	}
	/* A replace goes on onto the drive it was given. Without this the
	 * resumed drain spread the columns over the other members, filling
	 * them while the new drive stayed empty (tools/zloop seed 7025).
	 * One whose drive is gone stops. */
	changed |= replaces_abandon(a);
	for (i = 0; i < nm; i++) {
		int r = replacement_of(a, i);

		if (r < 0)
			continue;
		za_rebuild_set_dest(a->rb, i, r);
		za_log_info("array %s: member %u (%s) is still being replaced "
			    "by member %d (%s)",
			    a->sb->name, i, a->paths[i], r, a->paths[r]);
	}
	/* Columns lost before the restart (or a rebuild interrupted by it)
	 * are found again on the drives: carry on. A lost or draining member
	 * with nothing left to rebuild (GC freed its last columns) needs a
	 * run too: only the end of one retires members (rb_flushed). */
	if (za_engine_degraded(a->eng, NULL, 0) || members_to_retire(a))
		rebuild_kick(a);
	if (changed)
		sb_round(a);
	za_log_info("array %s assembled: %u members, %u lost", a->sb->name, nm,
		    res->nr_lost);
	*out = a;
	a = NULL;
	ret = 0;
out:
	if (a)
		array_free(a);
	for (i = 0; devs && i < n; i++) {
		if (devs[i])
			za_dev_close(devs[i]);
		if (sbs)
			free(sbs[i]);
	}
	free(devs);
	free(sbs);
	free(rc);
	free(res);
	return ret;
}

/* ---- running ---- */

int za_array_stop(struct za_array *a)
{
	int ret = 0;

	if (!a)
		return 0;
	rebuild_quiesce(a);
	a->stopping = true;
	if (a->vol) {
		/* Nothing new for GC to start: a stop must end. */
		za_volume_gc_stop(a->vol);
		ret = za_volume_flush_sync(a->vol);
	}
	/* A clean stop leaves nothing to replay at the next assembly. A
	 * checkpoint that fails loses nothing: the stop goes on. */
	if (a->vol && !ret && za_volume_checkpoint_sync(a->vol))
		za_log_warn("array %s: no checkpoint at stop: the next "
			    "assembly replays the log",
			    a->sb->name);
	if (a->eng) {
		int r;

		while (za_engine_busy(a->eng) || a->sb_pending)
			za_io_run_once(a->io);
		r = za_engine_flush_sync(a->eng);
		if (!ret)
			ret = r;
	}
	za_log_info("array %s stopped", a->sb->name);
	array_free(a);
	return ret;
}

int za_array_destroy(struct za_array *a)
{
	unsigned i;
	int ret = 0, r;

	if (!a)
		return 0;
	rebuild_quiesce(a);
	a->stopping = true;
	if (a->vol) {
		za_volume_gc_stop(a->vol);
		while (za_volume_busy(a->vol))
			za_io_run_once(a->io);
		za_volume_free(a->vol);
		a->vol = NULL;
	}
	if (a->eng) {
		while (za_engine_busy(a->eng) || a->sb_pending)
			za_io_run_once(a->io);
		za_engine_free(a->eng);
		a->eng = NULL;
	}
	for (i = 0; i < a->nr_members; i++) {
		if (!a->devs[i])
			continue;
		r = za_sb_clear(a->devs[i]);
		if (!r)
			r = za_engine_format(a->devs[i]);
		if (r && !ret)
			ret = r;
	}
	za_log_info("array %s destroyed", a->sb->name);
	array_free(a);
	return ret;
}

const char *za_array_name(const struct za_array *a)
{
	return a->sb->name;
}

struct za_engine *za_array_engine(struct za_array *a)
{
	return a->eng;
}

struct za_volume *za_array_volume(struct za_array *a)
{
	return a->vol;
}

/* The volume's counters in the array's terms (bytes, not blocks). */
static void volume_status(const struct za_volume *v,
			  struct za_array_volume_status *o)
{
	struct za_volume_stats vs;

	za_volume_get_stats(v, &vs);
	o->live_bytes = vs.live_blocks * 4096;
	o->read_bytes = vs.user_read_bytes;
	o->written_bytes = vs.user_write_bytes;
	o->flushes = vs.flushes;
	o->data_stripes = vs.data_stripes;
	o->padded_stripes = vs.padded_stripes;
	o->journal_writes = vs.journal_blocks;
	o->gc_runs = vs.gc_runs;
	o->gc_idle_runs = vs.gc_idle_runs;
	o->gc_moved_bytes = vs.gc_moved_blocks * 4096;
	o->gc_freed_groups = vs.gc_freed_groups;
	o->writes_stalled = vs.writes_stalled;
	o->gc_active = vs.gc_active;
	o->map_extents = vs.map_extents;
	o->map_bytes = vs.map_bytes;
	o->checkpoints = vs.checkpoints;
	o->checkpoint_failures = vs.checkpoint_failures;
	o->checkpoint_seq = vs.checkpoint_seq;
	o->recovered_stripes = vs.recovered_stripes;
}

int za_array_status(struct za_array *a, struct za_array_status *st)
{
	unsigned i, worst = 0;
	uint64_t used_zone_bytes = 0;
	struct za_engine_degraded *d;
	size_t nd, j;

	memset(st, 0, sizeof(*st));
	st->members = calloc(a->nr_members, sizeof(*st->members));
	if (!st->members)
		return -ENOMEM;
	snprintf(st->name, sizeof(st->name), "%s", a->sb->name);
	st->uuid = a->sb->array_uuid;
	/*
	 * Redundancy is per segment: the array is as degraded as its worst
	 * segment with live data, or as the members lost and not yet
	 * rebuilt away (as assembly counts them). Once rebuilt, lost
	 * members are retired and no longer count, whatever their number.
	 */
	nd = za_engine_degraded(a->eng, NULL, 0);
	d = nd ? calloc(nd, sizeof(*d)) : NULL;
	if (d)
		nd = za_engine_degraded(a->eng, d, nd);
	for (j = 0; d && j < nd; j++)
		if (d[j].todo && d[j].lost > worst)
			worst = d[j].lost;
	if (nd && !d) /* no memory to look: go by members */
		worst = za_engine_nr_lost(a->eng);
	free(d);
	/* Absent columns (segments opened on fewer than k+p members) and
	 * columns still being rebuilt have no member left to count, and
	 * the list above leaves out the running ones: ask the segments. */
	if (za_engine_seg_lost_max(a->eng) > worst)
		worst = za_engine_seg_lost_max(a->eng);
	/* A lost member not yet retired (its rebuild has not finished, or
	 * not started) leaves the array degraded even if no live data was
	 * on it: that is what an admin needs to hear. */
	if (za_engine_nr_lost(a->eng) > worst)
		worst = za_engine_nr_lost(a->eng);
	/* Too few members left for a full-width segment: new data cannot
	 * get its redundancy. */
	if (!worst && za_engine_nr_writable(a->eng) <
			      (unsigned)a->sb->geom.k + a->sb->geom.p)
		worst = 1;
	st->state = !worst		   ? ZA_ARRAY_HEALTHY :
		    worst <= a->sb->geom.p ? ZA_ARRAY_DEGRADED :
					     ZA_ARRAY_FAILED;
	if (a->scrub) {
		struct za_scrub_status ss;

		za_scrub_status(a->scrub, &ss);
		if (ss.state != ZA_SCRUB_IDLE) {
			struct za_array_job_status *js =
				&st->jobs[st->nr_jobs++];

			js->kind = ZA_JOB_SCRUB;
			js->state =
				ss.state == ZA_SCRUB_RUNNING ? ZA_JOB_RUNNING :
				ss.state == ZA_SCRUB_PAUSED  ? ZA_JOB_PAUSED :
							       ZA_JOB_DONE;
			js->done_bytes = ss.done_bytes;
			js->total_bytes = ss.total_bytes;
			js->rate_bps = ss.rate_bps;
			js->eta_s = ss.eta_s;
			js->rate_limit_bps = ss.rate_limit_bps;
			js->read_bytes = ss.read_bytes;
			js->elapsed_ns = ss.elapsed_ns;
			js->error = ss.last_error;
			js->err_read = ss.err_read;
			js->err_checksum = ss.err_checksum;
			js->err_parity = ss.err_parity;
			js->repaired = ss.cols_repaired;
			js->position = ss.position;
			js->start_position = ss.start_position;
		}
	}
	if (a->rb) {
		struct za_rebuild_status rs;

		za_rebuild_status(a->rb, &rs);
		if (rs.state != ZA_REBUILD_IDLE) {
			struct za_array_job_status *js =
				&st->jobs[st->nr_jobs++];

			js->kind = ZA_JOB_REBUILD;
			/* Moving columns off draining members: a drain. */
			for (i = 0; i < a->nr_members; i++)
				if (a->states[i] == ZA_MEMBER_DRAINING)
					js->kind = ZA_JOB_DRAIN;
			js->state = rs.state == ZA_REBUILD_RUNNING ?
					    ZA_JOB_RUNNING :
				    rs.state == ZA_REBUILD_PAUSED ?
					    ZA_JOB_PAUSED :
					    ZA_JOB_DONE;
			js->done_bytes = rs.done_bytes;
			js->total_bytes = rs.total_bytes;
			js->rate_bps = rs.rate_bps;
			js->eta_s = rs.eta_s;
			js->rate_limit_bps = rs.rate_limit_bps;
			js->read_bytes = rs.read_bytes;
			js->written_bytes = rs.written_bytes;
			js->elapsed_ns = rs.elapsed_ns;
			js->error = rs.last_error;
			if (js->state == ZA_JOB_DONE)
				js->cols_left =
					rs.cols_waiting + rs.cols_failed;
		}
	}
	st->k = a->sb->geom.k;
	st->p = a->sb->geom.p;
	st->chunk_bytes = a->sb->geom.chunk_bytes;
	st->size_bytes = a->sb->volume_bytes;
	st->max_size_bytes = a->vol ? za_volume_max_size(a->vol) : 0;
	st->generation = a->sb->generation;
	st->nr_members = a->nr_members;
	for (i = 0; i < a->nr_members; i++) {
		struct za_array_member_status *m = &st->members[i];
		struct za_member_stats ms;

		za_engine_member_stats(a->eng, i, &ms);
		snprintf(m->path, sizeof(m->path), "%s", a->paths[i]);
		m->uuid = a->sb->members[i].uuid;
		m->idx = i;
		m->state = za_engine_member_state(a->eng, i);
		m->size_bytes = a->sb->members[i].capacity_bytes;
		m->used_bytes =
			ms.used_zones * a->sb->members[i].zone_size_bytes;
		m->err_read = ms.err_read;
		m->err_write = ms.err_write;
		m->err_checksum = ms.err_checksum;
		m->repaired_bytes = ms.repaired_bytes;
		m->replaced_by = replacement_of(a, i);
		if (a->devs[i]) {
			m->read_bytes = a->devs[i]->stats.read_bytes;
			m->written_bytes = a->devs[i]->stats.write_bytes;
		}
		used_zone_bytes += m->used_bytes;
	}
	/* Space allocated to segments, data share only. */
	st->used_bytes = used_zone_bytes * st->k / (st->k + st->p);
	if (a->vol)
		volume_status(a->vol, &st->vol);
	st->has_volume = a->vol != NULL;
	return 0;
}

int za_array_fail(struct za_array *a, const char *path, char *err,
		  size_t errlen)
{
	int i = member_find(a, path);

	if (i < 0) {
		seterr(err, errlen, "%s is not a member of array '%s'", path,
		       a->sb->name);
		return -ENOENT;
	}
	if (a->states[i] == ZA_MEMBER_FAILED) {
		seterr(err, errlen, "%s is already failed", path);
		return -EALREADY;
	}
	if (a->states[i] != ZA_MEMBER_ONLINE &&
	    a->states[i] != ZA_MEMBER_DRAINING) {
		seterr(err, errlen, "%s is %s", path,
		       za_member_state_str(a->states[i]));
		return -EINVAL;
	}
	za_log_warn("array %s: member %d (%s) failed by request", a->sb->name,
		    i, path);
	za_engine_member_fail(a->eng, (unsigned)i, -ECANCELED);
	return 0;
}

/* ---- drive lifecycle: add, remove, replace ---- */

/* Grow the per-member arrays by one (no superblock write in flight). */
static int members_grow(struct za_array *a)
{
	unsigned n = a->nr_members + 1;
	struct za_dev **devs;
	char(*paths)[256];
	uint8_t *states;
	struct za_sb_write_op *ops;

	while (a->sb_pending) /* their ops live in sb_ops */
		za_io_run_once(a->io);
	devs = realloc(a->devs, n * sizeof(*devs));
	if (devs)
		a->devs = devs;
	paths = realloc(a->paths, n * sizeof(*paths));
	if (paths)
		a->paths = paths;
	states = realloc(a->states, n);
	if (states)
		a->states = states;
	ops = realloc(a->sb_ops, n * sizeof(*ops));
	if (ops)
		a->sb_ops = ops;
	if (!devs || !paths || !states || !ops)
		return -ENOMEM;
	a->devs[n - 1] = NULL;
	a->paths[n - 1][0] = 0;
	a->states[n - 1] = ZA_MEMBER_REMOVED;
	memset(&a->sb_ops[n - 1], 0, sizeof(a->sb_ops[n - 1]));
	return 0;
}

/* Open, check and format @path and make it member a->nr_members. */
static int add_one(struct za_array *a, const char *path, unsigned *idx,
		   char *err, size_t errlen)
{
	struct za_sb_member *m;
	struct za_dev *dev;
	struct za_sb *old;
	const char *hint = path;
	unsigned i, eidx;
	int ret, found;

	if (a->nr_members >= ZA_SB_MAX_MEMBERS) {
		seterr(err, errlen, "array '%s' has %u members, the most",
		       a->sb->name, a->nr_members);
		return -ENOSPC;
	}
	found = member_find(a, path);
	if (found >= 0 && a->states[found] != ZA_MEMBER_REMOVED) {
		seterr(err, errlen, "%s is already a member of '%s'", path,
		       a->sb->name);
		return -EEXIST;
	}
	ret = member_open(a->io, path, &dev);
	if (ret) {
		seterr(err, errlen, "%s: %s", path,
		       ret == -EMEDIUMTYPE ? "not a zoned drive" :
		       ret == -EWOULDBLOCK || ret == -EBUSY ?
					     "in use by another process" :
					     strerror(-ret));
		return ret == -EWOULDBLOCK ? -EBUSY : ret;
	}
	for (i = 0; i < a->nr_members; i++) {
		struct stat x, y;

		if (a->devs[i] && !stat(a->paths[i], &x) && !stat(path, &y) &&
		    same_file(&x, &y)) {
			seterr(err, errlen, "%s is member %s already", path,
			       a->paths[i]);
			ret = -EEXIST;
			goto err_close;
		}
	}
	ret = za_sb_check_dev(dev);
	if (ret) {
		seterr(err, errlen,
		       "%s: unsuitable drive (too few or too small zones, or "
		       "blocks other than 4096 bytes)",
		       path);
		goto err_close;
	}
	old = malloc(sizeof(*old));
	if (!old) {
		ret = -ENOMEM;
		goto err_close;
	}
	ret = za_sb_read(dev, old);
	if (!ret) {
		seterr(err, errlen,
		       "%s belongs to array '%s'; destroy that array or clear "
		       "the drive first",
		       path, old->name);
		free(old);
		ret = -EBUSY;
		goto err_close;
	}
	free(old);
	ret = members_grow(a);
	if (ret)
		goto err_close;
	ret = za_sb_clear(dev);
	if (!ret)
		ret = za_engine_format(dev);
	if (ret) {
		seterr(err, errlen, "%s: formatting failed: %s", path,
		       strerror(-ret));
		goto err_close;
	}
	ret = za_engine_member_add(a->eng, dev, &eidx);
	if (ret) {
		seterr(err, errlen, "%s: %s", path,
		       ret == -EBUSY ? "a rebuild is running; add the drive "
				       "when it has finished" :
				       "the array cannot use this drive");
		goto err_close;
	}
	assert(eidx == a->nr_members);
	i = a->nr_members++;
	a->devs[i] = dev;
	snprintf(a->paths[i], sizeof(a->paths[i]), "%s", path);
	a->states[i] = ZA_MEMBER_ONLINE;
	a->sb->nr_members = a->nr_members;
	m = &a->sb->members[i];
	memset(m, 0, sizeof(*m));
	if (strlen(hint) >= ZA_SB_HINT_BYTES)
		hint += strlen(hint) - (ZA_SB_HINT_BYTES - 1);
	za_uuid_gen(&m->uuid);
	m->state = ZA_MEMBER_ONLINE;
	m->nr_zones = dev->caps.nr_zones;
	m->capacity_bytes = dev->caps.capacity_bytes;
	m->zone_size_bytes = dev->caps.zone_size_bytes;
	snprintf(m->path_hint, sizeof(m->path_hint), "%s", hint);
	*idx = i;
	return 0;

err_close:
	za_dev_close(dev);
	return ret;
}

int za_array_add(struct za_array *a, const char *const *paths, unsigned n,
		 char *err, size_t errlen)
{
	unsigned i, idx;
	int ret = 0;

	for (i = 0; i < n && !ret; i++) {
		ret = add_one(a, paths[i], &idx, err, errlen);
		if (!ret)
			za_log_info("array %s: member %u (%s) added",
				    a->sb->name, idx, paths[i]);
	}
	if (i > 1 || !ret) {
		sb_round(a); /* the drives added so far are members */
		/* Columns that had nowhere to go (absent ones of segments
		 * opened on fewer than k+p members, lost ones with no member
		 * outside their segment) have somewhere now. */
		if (za_engine_degraded(a->eng, NULL, 0))
			rebuild_kick(a);
	}
	return ret;
}

/*
 * Can the @n members @idx stop taking new segments, with the @nb members
 * @back (old drives of replaces the removal stops) in service again?
 * Enough writable members must remain for k+p, and they must hold the
 * whole volume (not only today's live data: the user may fill it at any
 * time) with the reserve garbage collection needs, the one the volume
 * was sized with. A drain that does not fit runs out of zones halfway
 * (tools/zloop --drain, seed 30110); refusing up front leaves the array
 * as it was.
 */
static int drain_check(struct za_array *a, const int *idx, unsigned n,
		       const int *back, unsigned nb, char *err, size_t errlen)
{
	unsigned w = (unsigned)a->sb->geom.k + a->sb->geom.p;
	unsigned left = za_engine_nr_writable(a->eng) + nb;
	enum za_space_change change[ZA_SB_MAX_MEMBERS] = { ZA_SPACE_AS_IS };
	uint64_t room, size;
	unsigned i;

	if (left < n || left - n < w) {
		seterr(err, errlen,
		       "removing would leave %u writable members; %u+%u "
		       "needs %u",
		       left >= n ? left - n : 0, (unsigned)a->sb->geom.k,
		       (unsigned)a->sb->geom.p, w);
		return -ENOSPC;
	}
	if (!a->vol)
		return 0;
	assert(a->nr_members <= ZA_SB_MAX_MEMBERS);
	for (i = 0; i < n; i++)
		change[idx[i]] = ZA_SPACE_GONE;
	for (i = 0; i < nb; i++)
		change[back[i]] = ZA_SPACE_BACK;
	room = za_volume_max_size_if(a->vol, change);
	size = za_volume_size(a->vol);
	if (size > room) {
		char b1[32], b2[32];

		seterr(err, errlen,
		       "removing would leave room for %s of volume on %u "
		       "writable members with %u+%u and the reserve garbage "
		       "collection needs; '%s' is %s (add a drive first)",
		       za_fmt_size(room, b1, sizeof(b1)), left - n,
		       (unsigned)a->sb->geom.k, (unsigned)a->sb->geom.p,
		       a->sb->name, za_fmt_size(size, b2, sizeof(b2)));
		return -ENOSPC;
	}
	return 0;
}

static int drain_start(struct za_array *a, unsigned idx)
{
	int ret = za_engine_member_drain(a->eng, idx);

	if (ret)
		return ret;
	a->states[idx] = ZA_MEMBER_DRAINING;
	return 0;
}

int za_array_remove(struct za_array *a, const char *const *paths, unsigned n,
		    char *err, size_t errlen)
{
	int idx[64], back[64];
	unsigned i, j, nb = 0;
	int ret, o;

	if (n > 64) {
		seterr(err, errlen, "remove at most 64 drives at once");
		return -EINVAL;
	}
	for (i = 0; i < n; i++) {
		idx[i] = member_find(a, paths[i]);
		if (idx[i] < 0) {
			seterr(err, errlen, "%s is not a member of array '%s'",
			       paths[i], a->sb->name);
			return -ENOENT;
		}
		for (j = 0; j < i; j++)
			if (idx[j] == idx[i]) {
				seterr(err, errlen, "%s is named twice",
				       paths[i]);
				return -EINVAL;
			}
		if (a->states[idx[i]] != ZA_MEMBER_ONLINE) {
			seterr(err, errlen, "%s is %s", paths[i],
			       za_member_state_str(a->states[idx[i]]));
			return -EINVAL;
		}
	}
	/* Removing the new drive of a replace stops the replace: the old
	 * one stays (replace_stop()), and takes columns again. */
	for (i = 0; i < n; i++)
		if ((o = replaced_by_member(a, (unsigned)idx[i])) >= 0)
			back[nb++] = o;
	ret = drain_check(a, idx, n, back, nb, err, errlen);
	if (ret)
		return ret;
	for (i = 0; i < nb; i++)
		replace_stop(a, (unsigned)back[i], "is being removed");
	for (i = 0; i < n; i++) {
		drain_start(a, (unsigned)idx[i]);
		za_log_info("array %s: member %u (%s) draining for removal",
			    a->sb->name, idx[i], paths[i]);
	}
	sb_round(a);
	rebuild_now(a);
	return 0;
}

/*
 * Can NEW take OLD's place (member @o)? When the other members hold the
 * whole volume with GC's reserve without OLD, any NEW will do; otherwise
 * NEW must have at least OLD's data zones (by capacity), or the drain
 * runs out of space halfway, as a drain without a replacement would
 * (drain_check). Reads NEW's zones without claiming it; add_one() checks
 * everything else about it.
 */
static int replace_check(struct za_array *a, unsigned o, const char *new_path,
			 char *err, size_t errlen)
{
	enum za_space_change change[ZA_SB_MAX_MEMBERS] = { ZA_SPACE_AS_IS };
	uint64_t room, size, need, have = 0;
	char b1[32], b2[32], b3[32], b4[32];
	struct za_zone *z;
	struct za_dev *dev;
	unsigned nz, i;

	if (!a->vol)
		return 0;
	change[o] = ZA_SPACE_GONE;
	room = za_volume_max_size_if(a->vol, change);
	size = za_volume_size(a->vol);
	need = za_engine_member_data_bytes(a->eng, o);
	if (size <= room || !need)
		return 0;
	if (member_open(a->io, new_path, &dev))
		return 0; /* add_one() says why */
	if (za_dev_report_all(dev, &z, &nz)) {
		za_dev_close(dev);
		return 0;
	}
	za_dev_close(dev);
	for (i = ZA_SB_ZONES; i < nz; i++)
		if (z[i].type != ZA_ZONE_TYPE_CNV &&
		    z[i].cond != ZA_ZONE_COND_OFFLINE &&
		    z[i].cond != ZA_ZONE_COND_READONLY)
			have += z[i].cap_bytes;
	free(z);
	if (have >= need)
		return 0;
	seterr(err, errlen,
	       "%s has %s of data zones, fewer than the %s of the member it "
	       "would replace, and the others could not hold the volume ('%s' "
	       "is %s, room for %s without it): replace it by a drive at "
	       "least as large, or add a drive first",
	       new_path, za_fmt_size(have, b1, sizeof(b1)),
	       za_fmt_size(need, b2, sizeof(b2)), a->sb->name,
	       za_fmt_size(size, b3, sizeof(b3)),
	       za_fmt_size(room, b4, sizeof(b4)));
	return -ENOSPC;
}

int za_array_replace(struct za_array *a, const char *old_path,
		     const char *new_path, char *err, size_t errlen)
{
	int o = member_find(a, old_path);
	unsigned idx;
	int ret;

	if (o < 0) {
		seterr(err, errlen, "%s is not a member of array '%s'",
		       old_path, a->sb->name);
		return -ENOENT;
	}
	if (a->states[o] != ZA_MEMBER_ONLINE &&
	    a->states[o] != ZA_MEMBER_FAILED &&
	    a->states[o] != ZA_MEMBER_MISSING) {
		seterr(err, errlen, "%s is %s", old_path,
		       za_member_state_str(a->states[o]));
		return -EINVAL;
	}
	ret = replace_check(a, (unsigned)o, new_path, err, errlen);
	if (ret)
		return ret;
	ret = add_one(a, new_path, &idx, err, errlen);
	if (ret)
		return ret;
	/* OLD serves reads until NEW has its columns (a failed OLD is
	 * decoded instead); every column goes to NEW if NEW can take it. */
	if (a->states[o] == ZA_MEMBER_ONLINE)
		drain_start(a, (unsigned)o);
	za_rebuild_set_dest(a->rb, (unsigned)o, (int)idx);
	a->sb->members[o].replacement = (uint16_t)(idx + 1);
	za_log_info("array %s: replacing member %d (%s) with %u (%s)",
		    a->sb->name, o, old_path, idx, new_path);
	sb_round(a);
	rebuild_now(a);
	return 0;
}

int za_array_scrub(struct za_array *a, bool start, uint64_t rate_bps, char *err,
		   size_t errlen)
{
	struct za_scrub_status st;
	int ret;

	if (!a->scrub) {
		seterr(err, errlen, "array '%s' has no volume", a->sb->name);
		return -EINVAL;
	}
	za_scrub_status(a->scrub, &st);
	if (!start) {
		if (st.state != ZA_SCRUB_RUNNING &&
		    st.state != ZA_SCRUB_PAUSED) {
			seterr(err, errlen, "no scrub of '%s' is running",
			       a->sb->name);
			return -EINVAL;
		}
		a->scrub_stop_asked = true;
		za_scrub_stop(a->scrub);
		return 0;
	}
	if (st.state == ZA_SCRUB_RUNNING || st.state == ZA_SCRUB_PAUSED) {
		seterr(err, errlen, "a scrub of '%s' is running", a->sb->name);
		return -EALREADY;
	}
	if (rate_bps != UINT64_MAX)
		za_scrub_set_rate(a->scrub, rate_bps);
	/* A stopped scrub goes on after the last segment it finished. */
	ret = za_scrub_start(a->scrub);
	if (ret) {
		seterr(err, errlen, "cannot start a scrub: %s", strerror(-ret));
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
		seterr(err, errlen, "array '%s' has no volume", a->sb->name);
		return -EINVAL;
	}
	ret = za_scrub_set_position(a->scrub, s->position);
	if (ret) {
		seterr(err, errlen, "a scrub of '%s' is running", a->sb->name);
		return ret;
	}
	za_scrub_set_rate(a->scrub, s->rate_bps);
	if (!s->running)
		return 0;
	ret = za_scrub_start(a->scrub);
	if (ret) {
		seterr(err, errlen, "cannot resume the scrub: %s",
		       strerror(-ret));
		return ret;
	}
	za_log_info("array %s: scrub resumed after segment %llu", a->sb->name,
		    (unsigned long long)s->position);
	scrub_save_now(a, true, false);
	return 0;
}

/* ---- growing the volume ---- */

int za_array_grow(struct za_array *a, uint64_t size_bytes, char *err,
		  size_t errlen)
{
	uint64_t cur, max, old, written;
	int ret;

	if (!a->vol) {
		seterr(err, errlen, "array '%s' has no volume", a->sb->name);
		return -EINVAL;
	}
	cur = za_volume_size(a->vol);
	if (size_bytes % 4096) {
		seterr(err, errlen,
		       "%llu bytes is not a multiple of 4 KiB (4096 bytes)",
		       (unsigned long long)size_bytes);
		return -EINVAL;
	}
	if (size_bytes < cur) {
		seterr(err, errlen,
		       "shrinking is not supported: '%s' is %llu bytes, %llu "
		       "asked",
		       a->sb->name, (unsigned long long)cur,
		       (unsigned long long)size_bytes);
		return -EINVAL;
	}
	if (size_bytes == cur)
		return 0;
	max = za_volume_max_size(a->vol);
	if (size_bytes > max) {
		seterr(err, errlen,
		       "%llu bytes is more than '%s' can hold: at most %llu "
		       "bytes over its %u writable members with %u+%u and the "
		       "reserve garbage collection needs",
		       (unsigned long long)size_bytes, a->sb->name,
		       (unsigned long long)max, za_engine_nr_writable(a->eng),
		       (unsigned)a->sb->geom.k, (unsigned)a->sb->geom.p);
		return -ENOSPC;
	}
	/*
	 * Superblocks first: recovery ignores blocks beyond the size it is
	 * given, so a block written past the old end must never be on the
	 * drives while the old size is all they say.
	 */
	old = a->sb->volume_bytes;
	written = a->sb_written;
	a->sb->volume_bytes = size_bytes;
	sb_round(a);
	while (a->sb_pending)
		za_io_run_once(a->io);
	if (a->sb_written == written) {
		a->sb->volume_bytes = old;
		seterr(err, errlen,
		       "cannot record the new size: no superblock could be "
		       "written");
		return -EIO;
	}
	ret = za_volume_grow(a->vol, size_bytes);
	if (ret) { /* checked above: not expected */
		seterr(err, errlen, "cannot grow the volume: %s",
		       strerror(-ret));
		return ret;
	}
	za_log_info("array %s: volume grown from %llu to %llu bytes",
		    a->sb->name, (unsigned long long)cur,
		    (unsigned long long)size_bytes);
	return 0;
}
