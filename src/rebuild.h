/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * rebuild.h - the rebuild job: restores the redundancy of live data after
 * members are lost, segment column by segment column, least redundancy
 * first, on all surviving members at once, paced by a rate limit and
 * pausable. rebuild.c opens with the whole story.
 *
 * It does not decide when to run (array.c starts it after a failure and at
 * assembly, by policy), nor persist anything: what is left to do after a
 * restart is read back from the drives (columns not moved yet).
 *
 * Everything runs on the loop thread.
 */
#ifndef ZA_REBUILD_H
#define ZA_REBUILD_H

#include <stdbool.h>
#include <stdint.h>

#include "io.h"
#include "engine.h"
#include "job.h"
#include "volume.h"

struct za_rebuild;

struct za_rebuild_params {
	struct za_io *io;
	struct za_engine *eng;
	struct za_volume *vol; /* tells live data from dead */
	unsigned max_cols; /* column rebuilds at once; 0: from the members */
	unsigned window; /* stripes in flight per column; 0: 4 */
	uint64_t rate_bps; /* bytes restored per second; 0: no limit */
	/*
	 * Loop thread, when a run ends with nothing left it could do:
	 * @result 0 (every live column restored), -EIO (some data is beyond
	 * the redundancy), -ENOSPC (no member could take a column) or
	 * -ECANCELED (za_rebuild_stop).
	 */
	void (*finished)(struct za_rebuild *rb, int result, void *priv);
	void *priv;
};

struct za_rebuild_status {
	/* State, rate, ETA, last error; done_bytes: lost column bytes of
	 * live stripes restored, total_bytes: ... to restore, as known so
	 * far. */
	struct za_job_progress job;
	enum za_job_kind kind; /* za_rebuild_set_kind() */
	uint64_t read_bytes, written_bytes; /* device bytes */
	uint64_t cols_done, cols_dead, cols_failed;
	uint64_t cols_waiting; /* no member outside the segment can take
				* them: they wait for a drive (last pass) */
	uint64_t space_waits; /* times a column waited for garbage collection
			       * to free space (za_volume_spare_ok), since
			       * the job was created */
};

int za_rebuild_new(const struct za_rebuild_params *p, struct za_rebuild **out);
/* Must not be busy (za_rebuild_busy). */
void za_rebuild_free(struct za_rebuild *rb);
bool za_rebuild_busy(const struct za_rebuild *rb);

/*
 * Start a run, or, while one runs, look again for lost columns once the
 * columns in flight are done (a new failure re-orders the work). A paused
 * job stays paused.
 */
void za_rebuild_start(struct za_rebuild *rb);
/*
 * Right after crash recovery, when memory holds nothing the drives do not
 * (the map is what they hold): mark the lost columns of segments with no
 * live data dead at once, as a run's pass would after its flush. Which
 * columns were left dead is not on the drives, and until then such
 * segments count as lost: with more than p of them gone the array would
 * assemble failed and every flush fail, the first pass's flush included.
 * Synchronous; does nothing while a run is in a pass. 0 or -ENOMEM.
 */
int za_rebuild_mark_dead_now(struct za_rebuild *rb);
/*
 * Pause: columns under way are aborted (stripes in flight finish; their
 * replacement zones are given back and what they restored is taken out of
 * done_bytes), so a paused rebuild holds no free zone and no segment.
 * Resume lists the work again and goes on.
 */
void za_rebuild_pause(struct za_rebuild *rb);
void za_rebuild_resume(struct za_rebuild *rb);
void za_rebuild_set_rate(struct za_rebuild *rb, uint64_t rate_bps);
/* Abort the columns in flight; finished(-ECANCELED) when they are. */
void za_rebuild_stop(struct za_rebuild *rb);
/*
 * What the runs from now on are, for status and the log: a rebuild
 * (default: lost columns restored) or a drain (columns moved off members
 * being removed or replaced). Kept when a run ends, so that a drain that
 * finished still says it was one.
 */
void za_rebuild_set_kind(struct za_rebuild *rb, enum za_job_kind kind);
/* Columns moved off member @from go to member @to when it can take them
 * (zarray replace); @to < 0: anywhere. */
void za_rebuild_set_dest(struct za_rebuild *rb, unsigned from, int to);
void za_rebuild_status(const struct za_rebuild *rb,
		       struct za_rebuild_status *st);

#endif /* ZA_REBUILD_H */
