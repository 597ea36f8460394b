// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * array.c - array lifecycle: create, assemble, stop, status.
 *
 * SCAFFOLDING: the segment engine and superblocks are being built; until
 * they land every entry point answers -ENOSYS so that the daemon and the
 * CLI can be built and tested around this interface. Not a feature.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "array.h"

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

int za_array_create(struct za_io *io, const struct za_array_create_params *p,
		    struct za_array **out, char *err, size_t errlen)
{
	(void)io;
	(void)p;
	(void)out;
	snprintf(err, errlen, "arrays are not implemented yet");
	return -ENOSYS;
}

int za_array_assemble(struct za_io *io, const char *name,
		      const char *const *paths, unsigned n,
		      struct za_array **out, char *err, size_t errlen)
{
	(void)io;
	(void)name;
	(void)paths;
	(void)n;
	(void)out;
	snprintf(err, errlen, "arrays are not implemented yet");
	return -ENOSYS;
}

int za_array_stop(struct za_array *a)
{
	(void)a;
	return -ENOSYS;
}

int za_array_destroy(struct za_array *a)
{
	(void)a;
	return -ENOSYS;
}

const char *za_array_name(const struct za_array *a)
{
	(void)a;
	return "";
}

int za_array_status(struct za_array *a, struct za_array_status *st)
{
	(void)a;
	memset(st, 0, sizeof(*st));
	return -ENOSYS;
}

int za_array_fail(struct za_array *a, const char *path, char *err,
		  size_t errlen)
{
	(void)a;
	(void)path;
	snprintf(err, errlen, "arrays are not implemented yet");
	return -ENOSYS;
}
