/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * progress.h - where a long synchronous step stands, for whoever shows it
 * while the step runs (status during an assembly). No behaviour: a phase
 * and two counters.
 */
#ifndef ZA_PROGRESS_H
#define ZA_PROGRESS_H

#include <stdint.h>

/*
 * Where a long synchronous step is (assembly): a phase, a static string,
 * and how far through it, in the phase's own units (total 0: not known).
 * Written on the loop thread by the step, read by whoever shows it
 * between its loop runs.
 */
struct za_progress {
	const char *phase;
	uint64_t done, total;
};

static inline void za_progress_set(struct za_progress *p, const char *phase,
				   uint64_t done, uint64_t total)
{
	if (!p)
		return;
	p->phase = phase;
	p->done = done;
	p->total = total;
}

#endif /* ZA_PROGRESS_H */
