/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * scrub.h - the scrub job: reads every live stripe of every sealed
 * segment whole, checks each column's checksums and the parity's
 * consistency with the data, repairs a segment's bad columns by moving
 * them (decoded from the others) and counts what it found, paced by a
 * rate limit, pausable, and resumable from a segment id. scrub.c opens
 * with the whole story.
 *
 * It does not decide when to run nor persist anything: array.c starts it
 * (by hand or by schedule) and stores za_scrub_position() where it likes
 * (told by moved() each time it advances), handing it back as
 * start_after_seg or with za_scrub_set_position() after a restart.
 *
 * Everything runs on the loop thread.
 */
#ifndef ZA_SCRUB_H
#define ZA_SCRUB_H

#include <stdbool.h>
#include <stdint.h>

#include "io.h"
#include "engine.h"
#include "job.h"
#include "volume.h"

struct za_scrub;

struct za_scrub_params {
	struct za_io *io;
	struct za_engine *eng;
	struct za_volume *vol; /* tells live data from dead; NULL: all live */
	/* Resume: segments with an id <= this were scrubbed in this pass
	 * (a position saved from za_scrub_position()); 0: from the start. */
	uint64_t start_after_seg;
	uint64_t rate_bps; /* bytes read per second; 0: no limit */
	unsigned max_segs; /* segments checked at once; 0: from the members */
	unsigned window; /* stripe checks in flight per segment; 0: 2 */
	unsigned batch_segs; /* segments per liveness walk; 0: 65536 */
	bool check_only; /* count what is wrong, repair nothing */
	/*
	 * Loop thread, when a run ends: 0 (the pass is complete, everything
	 * found repaired), -EIO (some stripes have fewer than k good
	 * columns, or a repair could not decode), -ENOSPC (no member could
	 * take a moved column), -ECANCELED (za_scrub_stop), -ENOMEM.
	 */
	void (*finished)(struct za_scrub *s, int result, void *priv);
	/*
	 * Optional, loop thread: the position advanced (a segment, or a run
	 * of them, is done) to @position during a run. Not called when a run
	 * ends (finished() is). Must not call back into the scrub.
	 */
	void (*moved)(struct za_scrub *s, uint64_t position, void *priv);
	void *priv;
};

struct za_scrub_status {
	/*
	 * State, rate, ETA, last error; progress in stripe bytes (k+p slots)
	 * of live stripes: total is the written stripes of the segments to
	 * scrub until their live ones are known (one walk of the map per
	 * batch of segments). job.throttled: checks and moves the rate limit
	 * held back.
	 */
	struct za_job_progress job;
	uint64_t read_bytes; /* device bytes the checks read */
	uint64_t repair_read_bytes, repair_written_bytes;
	uint64_t segs_total, segs_done; /* sealed segments of the run */
	uint64_t segs_gone; /* released (garbage collection) meanwhile */
	uint64_t stripes_checked;
	/* Bad columns found, one per column of a stripe, by kind. */
	uint64_t err_read, err_checksum, err_parity;
	uint64_t stripes_lost; /* fewer than k columns verify */
	uint64_t cols_repaired; /* segment columns moved */
	uint64_t stripes_repaired; /* bad columns of stripes they fixed */
	uint64_t cols_repair_failed;
	uint64_t position; /* za_scrub_position() */
	uint64_t start_position; /* the position the run started after */
};

int za_scrub_new(const struct za_scrub_params *p, struct za_scrub **out);
/* Must not be busy (za_scrub_busy). */
void za_scrub_free(struct za_scrub *s);
bool za_scrub_busy(const struct za_scrub *s);

/*
 * Start a run from the position (the segments after it, in id order);
 * a run that completes its pass sets the position back to 0. 0, or
 * -EBUSY while a run is going or still winding down.
 */
int za_scrub_start(struct za_scrub *s);
void za_scrub_pause(struct za_scrub *s);
void za_scrub_resume(struct za_scrub *s);
void za_scrub_set_rate(struct za_scrub *s, uint64_t rate_bps);
/* Stop starting checks, abort repairs; finished(-ECANCELED) when the
 * ones in flight end. The position stays where it got to. */
void za_scrub_stop(struct za_scrub *s);
void za_scrub_status(const struct za_scrub *s, struct za_scrub_status *st);
/*
 * The last segment id such that every segment of the pass up to it is
 * scrubbed (0: none yet, or the last pass completed): persist it and
 * hand it back as start_after_seg to go on after a restart.
 */
uint64_t za_scrub_position(const struct za_scrub *s);
/* Move the position (0: next run scrubs everything). -EBUSY while a
 * run is going. */
int za_scrub_set_position(struct za_scrub *s, uint64_t after_seg);

#endif /* ZA_SCRUB_H */
