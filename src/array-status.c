// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * array-status.c - what an array reports: members, the volume's figures
 * and every job through one row shape (job_status_fill()). It reads; it
 * changes nothing.
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
	o->table_segments = vs.etab_segments;
	o->table_mismatches = vs.etab_mismatches;
	o->quarantined_zones = vs.quarantined_zones;
	o->quarantine_breaks = vs.quarantine_breaks;
	o->anchored = vs.anchored;
	o->anchor_mismatches = vs.anchor_mismatches;
	o->recovery_table = vs.recovery_table;
	o->recovery_zones = vs.recovery_zones;
	o->recovery_headers = vs.recovery_hdr_reads;
	o->recovery_table_segments = vs.recovery_table_segs;
	o->checkpoint_pages = vs.checkpoint_pages;
	o->checkpoint_pages_written = vs.checkpoint_pages_written;
	o->checkpoint_pages_cleaned = vs.checkpoint_pages_cleaned;
	o->recovery_counts = vs.recovery_counts_checked;
	o->recovery_count_mismatches = vs.recovery_count_mismatches;
	o->map_cache_bytes = vs.map_cache_bytes;
	o->map_pages_read = vs.map_pages_read;
	o->map_page_waits = vs.map_page_waits;
	o->map_page_errors = vs.map_page_errors;
}

/* What every kind of job shows, from the job core's progress. */
static void job_status_fill(struct za_array_job_status *js,
			    enum za_job_kind kind,
			    const struct za_job_progress *pr)
{
	js->kind = kind;
	js->state = pr->state;
	js->done_bytes = pr->done_bytes;
	js->total_bytes = pr->total_bytes;
	js->rate_bps = pr->rate_bps;
	js->eta_s = pr->eta_s;
	js->rate_limit_bps = pr->rate_limit_bps;
	js->elapsed_ns = pr->elapsed_ns;
	js->error = pr->last_error;
}

int za_array_gc_status(struct za_array *a, struct za_array_job_status *js)
{
	struct za_job_progress pr;

	if (!a->vol)
		return -EINVAL;
	za_volume_gc_progress(a->vol, &pr);
	memset(js, 0, sizeof(*js));
	job_status_fill(js, ZA_JOB_GC, &pr);
	if (js->state == ZA_JOB_IDLE)
		js->state = ZA_JOB_DONE; /* nothing to do yet */
	return 0;
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
		if (ss.job.state != ZA_JOB_IDLE) {
			struct za_array_job_status *js =
				&st->jobs[st->nr_jobs++];

			job_status_fill(js, ZA_JOB_SCRUB, &ss.job);
			js->read_bytes = ss.read_bytes;
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
		if (rs.job.state != ZA_JOB_IDLE) {
			struct za_array_job_status *js =
				&st->jobs[st->nr_jobs++];
			job_status_fill(js, rs.kind, &rs.job);
			js->read_bytes = rs.read_bytes;
			js->written_bytes = rs.written_bytes;
			if (js->state == ZA_JOB_DONE)
				js->cols_left =
					rs.cols_waiting + rs.cols_failed;
		}
	}
	/* GC is listed while a run of it goes on (or is paused); its totals
	 * since assembly are in the volume's figures. */
	if (!za_array_gc_status(a, &st->jobs[st->nr_jobs]) &&
	    (st->jobs[st->nr_jobs].state == ZA_JOB_RUNNING ||
	     st->jobs[st->nr_jobs].state == ZA_JOB_PAUSED))
		st->nr_jobs++;
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
		m->replaced_by = arr_replacement_of(a, i);
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
