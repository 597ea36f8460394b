/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * dev-fault.h - a device wrapper that injects failures, for tests, the
 * fault loop and (through the daemon) administrators' drills.
 *
 * It wraps any backend: requests pass through unless a configured fault
 * applies. Faults: the whole drive fails (now, or when operation N is
 * submitted), EIO at operation N or at a rate, flipped bits in read data,
 * a zone going offline or read-only, added latency, and a power cut that
 * drops the inner drive's unflushed writes (emulated drives only).
 */
#ifndef ZA_DEV_FAULT_H
#define ZA_DEV_FAULT_H

#include <stdint.h>

#include "dev.h"

struct za_fault_cfg {
	uint64_t fail_at_op; /* the drive fails at op N (1-based); 0: never */
	uint64_t eio_at_op; /* op N fails with -EIO; 0: never */
	uint32_t eio_rate_ppm; /* data ops failing with -EIO, per million */
	uint32_t flip_rate_ppm; /* reads returned with one bit flipped */
	uint64_t latency_ns; /* added to every completion */
	uint64_t seed; /* for the rates; 0 picks 1 */
};

struct za_fault_stats {
	uint64_t ops; /* requests seen */
	uint64_t enodev; /* answered -ENODEV (drive failed) */
	uint64_t eio; /* injected -EIO */
	uint64_t flips; /* reads returned with a flipped bit */
	uint64_t zone_errs; /* refused because of an offline/read-only zone */
};

/* Wrap @inner (ownership passes to the wrapper). Returns 0 or -errno. */
int za_fault_wrap(struct za_dev *inner, struct za_dev **out);
bool za_dev_is_fault(const struct za_dev *dev);
struct za_dev *za_fault_inner(struct za_dev *dev);

void za_fault_set(struct za_dev *dev, const struct za_fault_cfg *cfg);
void za_fault_get(struct za_dev *dev, struct za_fault_cfg *cfg);
void za_fault_stats(struct za_dev *dev, struct za_fault_stats *st);
/* Fail the whole drive now: every later request gets -ENODEV. */
void za_fault_fail(struct za_dev *dev);
bool za_fault_failed(struct za_dev *dev);
/*
 * Make zone @zone_idx appear OFFLINE or READONLY (or clear it with
 * ZA_ZONE_COND_NOT_WP). Returns 0 or -EINVAL.
 */
int za_fault_zone_cond(struct za_dev *dev, uint32_t zone_idx,
		       enum za_zone_cond cond);
/*
 * Parse a comma-separated spec: "fail", "fail-at=N", "eio-at=N",
 * "eio-ppm=N", "flip-ppm=N", "latency-us=N", "seed=N". Unknown keys and
 * malformed numbers give -EINVAL (with *bad pointing at the offending
 * item, if bad is not NULL). "fail" sets fail_at_op to 1.
 */
int za_fault_parse(const char *spec, struct za_fault_cfg *cfg,
		   const char **bad);

#endif /* ZA_DEV_FAULT_H */
