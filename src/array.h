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

enum za_job_kind {
	ZA_JOB_REBUILD = 1,
	ZA_JOB_DRAIN = 2,
	ZA_JOB_SCRUB = 3,
	ZA_JOB_GC = 4,
};
const char *za_job_kind_str(enum za_job_kind k);

enum za_job_state {
	ZA_JOB_RUNNING = 1,
	ZA_JOB_PAUSED = 2,
	ZA_JOB_DONE = 3,
};
const char *za_job_state_str(enum za_job_state s);

struct za_array_create_params {
	const char *name; /* 1..63 chars of [A-Za-z0-9_.-] */
	unsigned k, p;
	uint32_t chunk_bytes; /* 0: 64 KiB */
	uint64_t size_bytes; /* volume size; 0: the default */
	const char *const *paths;
	unsigned nr_paths;
	bool force; /* overwrite drives that hold another array */
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
 */
int za_array_assemble(struct za_io *io, const char *name,
		      const char *const *paths, unsigned n,
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
};

struct za_array_job_status {
	enum za_job_kind kind;
	enum za_job_state state;
	uint64_t done_bytes, total_bytes;
	uint64_t rate_bps; /* 0: not known yet */
	uint64_t eta_s; /* 0: not known */
};

#define ZA_ARRAY_MAX_JOBS 4

struct za_array_status {
	char name[ZA_SB_NAME_BYTES];
	struct za_uuid uuid;
	enum za_array_state state;
	unsigned k, p;
	uint32_t chunk_bytes;
	uint64_t size_bytes; /* volume */
	uint64_t used_bytes;
	uint64_t generation;
	unsigned nr_members;
	struct za_array_member_status *members; /* nr_members; free() it */
	unsigned nr_jobs;
	struct za_array_job_status jobs[ZA_ARRAY_MAX_JOBS];
};

/* Fill @st (members[] is allocated; free it). Returns 0 or -ENOMEM. */
int za_array_status(struct za_array *a, struct za_array_status *st);

/* Mark the member at @path failed, as if it had failed. */
int za_array_fail(struct za_array *a, const char *path, char *err,
		  size_t errlen);

#endif /* ZA_ARRAY_H */
