/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * array.h - an array: its member drives, their superblocks, its state and
 * its background jobs. This is the interface the daemon (rpc handlers) and
 * tools use; the segment engine and the volume sit beneath it.
 *
 * Everything here runs on the loop thread. Calls that take a @err buffer
 * fill it with one human line on failure (what failed and on which
 * device), suitable for the CLI to print as is.
 */
#ifndef ZA_ARRAY_H
#define ZA_ARRAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "io.h"
#include "job.h"
#include "progress.h"
#include "sb.h"

struct za_array;
struct za_engine;
struct za_volume;

enum za_array_state {
	ZA_ARRAY_HEALTHY = 1,
	ZA_ARRAY_DEGRADED = 2, /* 1..p members lost: readable, writable */
	ZA_ARRAY_FAILED = 3, /* more than p lost */
};
const char *za_array_state_str(enum za_array_state s);

/* Jobs' kinds and states: enum za_job_kind, enum za_job_state (job.h). */

/*
 * What an array does by itself: its policy, given when it is created or
 * assembled (zarrayd's options), kept by the array alone, so that two
 * arrays of one daemon - or two tests of one process - need not share
 * it. za_array_policy_default() fills in the defaults.
 */
struct za_array_policy {
	/* Start a rebuild by itself after a failure and at assembly; off:
	 * only by request (za_array_rebuild()). Drains start either way. */
	bool auto_rebuild;
	/* Read errors after which a member is failed (the engine's
	 * max_read_errors); 0: never. ZA_ARRAY_MAX_READ_ERRORS: md's
	 * default. */
	unsigned max_read_errors;
	/* GC while the volume is idle, checked every @idle_gc_ms
	 * milliseconds (za_volume_params.idle_gc_ms); 0: never. */
	unsigned idle_gc_ms;
	/* The volume's map cache, bytes (za_volume_params.map_cache_bytes;
	 * 0: no limit). za_array_policy_default(): a quarter of the host's
	 * memory, at least ZA_ARRAY_MAP_CACHE_MIN. */
	uint64_t map_cache_bytes;
	/* A test aid: every member is wrapped in the fault injector
	 * (dev-fault.h), and za_array_inject() sets its faults. */
	bool fault_injection;
	/* za_array_assemble() reports where it is here (loop thread; read
	 * it between loop runs, as status requests are); NULL: not
	 * reported. Not kept after the assembly. */
	struct za_progress *progress;
};
#define ZA_ARRAY_MAX_READ_ERRORS 20
#define ZA_ARRAY_IDLE_GC_MS 100
#define ZA_ARRAY_IDLE_GC_MS_MAX 60000
#define ZA_ARRAY_MAP_CACHE_MIN (64ull << 20)
void za_array_policy_default(struct za_array_policy *p);
/* A quarter of the host's memory, at least ZA_ARRAY_MAP_CACHE_MIN. */
uint64_t za_array_map_cache_default(void);

struct za_array_create_params {
	const char *name; /* 1..63 chars of [A-Za-z0-9_.-] */
	unsigned k, p;
	uint32_t chunk_bytes; /* 0: 64 KiB */
	uint64_t size_bytes; /* volume size; 0: the default */
	const char *const *paths;
	unsigned nr_paths;
	bool force; /* overwrite drives that hold another array */
	const struct za_array_policy *policy; /* NULL: the defaults */
};

/*
 * Format the members and start the array. Returns 0 or -errno with @err
 * set: -EINVAL (geometry, name, too few drives), -EBUSY (a drive already
 * in an array and !force, or open elsewhere), -EMEDIUMTYPE (not a zoned
 * drive), -ENOENT (no such path).
 */
int za_array_create(struct za_io *io, const struct za_array_create_params *p,
		    struct za_array **out, char *err, size_t errlen);

/*
 * Assemble the array called @name from @paths (any order, any paths to the
 * same drives). Returns 0 (possibly degraded) or -errno with @err set:
 * -ENOENT (no drive belongs to @name), -ENXIO (more than p members lost:
 * refused, the message lists them), -EEXIST (two arrays of that name).
 * @policy NULL: the defaults.
 */
int za_array_assemble(struct za_io *io, const char *name,
		      const char *const *paths, unsigned n,
		      const struct za_array_policy *policy,
		      struct za_array **out, char *err, size_t errlen);

/* Flush, write superblocks, close the members and free @a. */
int za_array_stop(struct za_array *a);
/* Stop @a and clear every member's superblock. */
int za_array_destroy(struct za_array *a);

const char *za_array_name(const struct za_array *a);
/* The array's segment engine (for the volume, tools and tests). */
struct za_engine *za_array_engine(struct za_array *a);
/* The array's exported volume. */
struct za_volume *za_array_volume(struct za_array *a);

struct za_array_member_status {
	char path[256];
	struct za_uuid uuid;
	unsigned idx;
	enum za_member_state state;
	uint64_t size_bytes, used_bytes;
	uint64_t err_read, err_write, err_checksum; /* per member */
	uint64_t repaired_bytes; /* data decoded because this member failed it */
	int replaced_by; /* zarray replace: the new member's index; -1: none */
	/* Device bytes read and written since assembly (0: no drive). */
	uint64_t read_bytes, written_bytes;
};

/* The volume's counters since assembly, and what it holds now. */
struct za_array_volume_status {
	uint64_t live_bytes; /* user data in stripes GC must keep */
	uint64_t read_bytes, written_bytes; /* by users */
	uint64_t flushes;
	uint64_t data_stripes, padded_stripes; /* padded: sealed by a flush */
	uint64_t journal_writes; /* journal stripes (small synced writes) */
	uint64_t gc_runs, gc_idle_runs, gc_moved_bytes, gc_freed_groups;
	uint64_t writes_stalled; /* held back for GC's reserve */
	bool gc_active; /* a victim is being collected now */
	uint64_t map_extents, map_bytes;
	uint64_t checkpoints, checkpoint_failures;
	uint64_t checkpoint_seq; /* what the live checkpoint covers; 0: none */
	uint64_t recovered_stripes; /* replayed at assembly */
	/* The loaded checkpoint's engine table: segments, mismatches with
	 * the drives (za_engine_table_check()). */
	uint64_t table_segments, table_mismatches;
	uint64_t quarantined_zones; /* free with the next checkpoint */
	uint64_t quarantine_breaks; /* freed early: no room for one */
	bool anchored; /* the superblocks name the live checkpoint */
	uint64_t anchor_mismatches; /* the anchor vs the drives at assembly */
	/* The assembly's recovery (za_volume_stats.recovery_*). */
	bool recovery_table;
	uint64_t recovery_zones, recovery_headers, recovery_table_segments;
	/* Map pages on the drives; written by the last checkpoint; written
	 * again to clean the checkpoint stream (za_volume_stats). */
	uint64_t checkpoint_pages, checkpoint_pages_written;
	uint64_t checkpoint_pages_cleaned;
	/* The checkpoint's counts compared at recovery, and mismatches. */
	uint64_t recovery_counts, recovery_count_mismatches;
	/* The map cache (za_volume_stats.map_cache_bytes and after). */
	uint64_t map_cache_bytes, map_pages_read, map_page_waits;
	uint64_t map_page_errors;
};

struct za_array_job_status {
	enum za_job_kind kind;
	enum za_job_state state;
	uint64_t done_bytes, total_bytes;
	uint64_t rate_bps; /* 0: not known yet */
	uint64_t eta_s; /* 0: not known */
	uint64_t rate_limit_bps; /* 0: none */
	uint64_t read_bytes, written_bytes; /* device bytes so far */
	uint64_t elapsed_ns;
	int error; /* DONE: 0 or why it stopped short (-errno) */
	/* rebuild, DONE: lost columns it could not restore (they wait for a
	 * drive with room, or failed) */
	uint64_t cols_left;
	/* scrub: what it found and what it repaired */
	uint64_t err_read, err_checksum, err_parity, repaired;
	/* scrub: segments with an id up to position are done in this pass;
	 * the run started after start_position (> 0: it resumed) */
	uint64_t position, start_position;
};

#define ZA_ARRAY_MAX_JOBS 4

struct za_array_status {
	char name[ZA_SB_NAME_BYTES];
	struct za_uuid uuid;
	enum za_array_state state;
	unsigned k, p;
	uint32_t chunk_bytes;
	uint64_t size_bytes; /* volume */
	uint64_t max_size_bytes; /* what za_array_grow() would take now */
	uint64_t used_bytes;
	uint64_t generation;
	unsigned nr_members;
	struct za_array_member_status *members; /* nr_members; free() it */
	unsigned nr_jobs;
	struct za_array_job_status jobs[ZA_ARRAY_MAX_JOBS];
	bool has_volume; /* false while it is being assembled */
	struct za_array_volume_status vol;
};

/* Fill @st (members[] is allocated; free it). Returns 0 or -ENOMEM. */
int za_array_status(struct za_array *a, struct za_array_status *st);

/*
 * Rebuild control. START begins a rebuild now (also with the automatic
 * policy off); PAUSE holds new work (in-flight stripes finish); RESUME
 * goes on; RATE sets the limit (bytes of lost live columns restored per
 * second; 0: none) and may come with START and RESUME. Returns 0 or
 * -errno with @err set (-EALREADY, -EINVAL).
 */
enum za_array_rebuild_op {
	ZA_ARRAY_REBUILD_START = 1,
	ZA_ARRAY_REBUILD_PAUSE = 2,
	ZA_ARRAY_REBUILD_RESUME = 3,
	ZA_ARRAY_REBUILD_RATE = 4,
};
int za_array_rebuild(struct za_array *a, enum za_array_rebuild_op op,
		     uint64_t rate_bps, char *err, size_t errlen);

/*
 * Garbage collection control. PAUSE holds GC's background work (GC while
 * idle, above its start point of free space; below it GC runs whatever
 * was asked, or writes would run out of room); RESUME goes on; RATE sets
 * the limit of that work (bytes moved per second; 0: none).
 * Returns 0 or -errno with @err set (-EALREADY, -EINVAL).
 */
enum za_array_gc_op {
	ZA_ARRAY_GC_PAUSE = 1,
	ZA_ARRAY_GC_RESUME = 2,
	ZA_ARRAY_GC_RATE = 3,
};
int za_array_gc(struct za_array *a, enum za_array_gc_op op, uint64_t rate_bps,
		char *err, size_t errlen);
/* GC's job row whatever its state (never started: done, nothing moved).
 * 0, or -EINVAL when the array has no volume. */
int za_array_gc_status(struct za_array *a, struct za_array_job_status *js);

/*
 * Drive lifecycle, online. add: each drive is checked (zoned, unused),
 * formatted and becomes a member new segments use at once. remove: the
 * members drain (no new segments; their columns are copied to the others,
 * full redundancy kept throughout), then become "removed" with their
 * superblocks cleared; refused (-ENOSPC) when the members left would be
 * fewer than k+p or could not hold the whole volume with the reserve
 * garbage collection needs. replace: NEW is added and OLD drains onto it (a
 * failed OLD is rebuilt onto it). Each returns 0 once the job started,
 * or -errno with @err set.
 */
int za_array_add(struct za_array *a, const char *const *paths, unsigned n,
		 char *err, size_t errlen);
int za_array_remove(struct za_array *a, const char *const *paths, unsigned n,
		    char *err, size_t errlen);
int za_array_replace(struct za_array *a, const char *old_path,
		     const char *new_path, char *err, size_t errlen);
/*
 * Scrub. START reads every live stripe whole, checks checksums and
 * parity, and moves bad columns (rate-limited by @rate_bps, bytes read
 * per second; 0: none; UINT64_MAX: the limit it had); a stopped scrub
 * starts again after the last segment it finished. STOP ends the run
 * (its position kept); PAUSE holds it, listed as paused, and RESUME goes
 * on (@rate_bps as for START); RATE changes the limit, whatever the
 * state. 0 or -errno with @err set (-EALREADY: running or paused
 * already; -EINVAL: not in a state for it).
 */
enum za_array_scrub_op {
	ZA_ARRAY_SCRUB_START = 1,
	ZA_ARRAY_SCRUB_STOP = 2,
	ZA_ARRAY_SCRUB_PAUSE = 3,
	ZA_ARRAY_SCRUB_RESUME = 4,
	ZA_ARRAY_SCRUB_RATE = 5,
};
int za_array_scrub(struct za_array *a, enum za_array_scrub_op op,
		   uint64_t rate_bps, char *err, size_t errlen);
/*
 * Scrub state worth keeping across a restart. The owner (the daemon) is
 * told each change through the saver: a run starting, its position
 * advancing (@progress: only that; the owner may write it late), a run
 * ending (running false; position 0 once a pass completed). A run cut
 * short by za_array_stop() stays "running", so that
 * za_array_scrub_restore() after the next assembly goes on with it; one
 * stopped by request does not.
 */
struct za_array_scrub_save {
	bool running;
	bool progress;
	uint64_t position; /* segments up to this id are done in this pass */
	uint64_t rate_bps; /* 0: no limit */
};
void za_array_set_scrub_saver(struct za_array *a,
			      void (*save)(void *priv,
					   const struct za_array_scrub_save *s),
			      void *priv);
/* Set the position and rate; start the scrub if it was running. 0 or
 * -errno with @err set. */
int za_array_scrub_restore(struct za_array *a,
			   const struct za_array_scrub_save *s, char *err,
			   size_t errlen);

/*
 * Grow the volume to @size_bytes (a multiple of 4096, not smaller: no
 * shrinking, at most max_size_bytes of za_array_status(), which grows
 * when members are added). The new size is in every member's superblock
 * before the volume takes it. Returns 0 (also when it is the size
 * already) or -errno with @err set: -EINVAL, -ENOSPC, -EIO (the
 * superblocks could not be written).
 */
int za_array_grow(struct za_array *a, uint64_t size_bytes, char *err,
		  size_t errlen);

/* Mark the member at @path failed, as if it had failed. */
int za_array_fail(struct za_array *a, const char *path, char *err,
		  size_t errlen);

/*
 * Fault injection, a test aid (za_array_policy.fault_injection): sets the
 * faults of the member at @path from a za_fault_parse() spec, "none"
 * clearing them. Returns 0 or -errno with @err set: -ENOENT (not a
 * member), -ENODEV (missing), -EOPNOTSUPP (the array's members are not
 * wrapped: its policy has fault injection off), -EINVAL (spec).
 */
int za_array_inject(struct za_array *a, const char *path, const char *spec,
		    char *err, size_t errlen);

#endif /* ZA_ARRAY_H */
