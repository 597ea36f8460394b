/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * pace.h - what background jobs (rebuild, scrub) share to pace and report
 * themselves: a token bucket over the bytes they move, for the rate limit
 * an admin sets, and the measured rate that status and watch show,
 * smoothed over one-second samples. Pure arithmetic on times the caller
 * gives (za_io_now_ns()); no timers, no I/O: the job arms its own timer
 * for the retry time the bucket names.
 */
#ifndef ZA_PACE_H
#define ZA_PACE_H

#include <stdbool.h>
#include <stdint.h>

struct za_pace {
	uint64_t tokens, tok_ns; /* the bucket: bytes, when last filled */
	uint64_t rate_ns, rate_bytes; /* the last rate sample */
};

/* Empty the bucket (a new rate, a new run). */
void za_pace_reset_bucket(struct za_pace *p);

/*
 * May @bytes move now, at @rate_bps (0: no limit)? The bucket fills at
 * the rate and holds a tenth of a second's worth, or four requests,
 * whichever is more. Returns true and takes them, or false with
 * *@retry_ns set to when enough will be there.
 */
bool za_pace_take(struct za_pace *p, uint64_t rate_bps, uint64_t bytes,
		  uint64_t now_ns, uint64_t *retry_ns);

/* Give back @bytes taken for work that did not happen after all. */
void za_pace_refund(struct za_pace *p, uint64_t bytes);

/*
 * @bytes counted in done_bytes were taken back (work dropped): the next
 * sample's base goes down with them, so the rate never sees done_bytes
 * shrink.
 */
void za_pace_unsample(struct za_pace *p, uint64_t bytes);

/*
 * @done_bytes moved so far in all: once a second, fold the rate since
 * the last sample into *@rate_bps (70% old, 30% new, so that status does
 * not jump about; the first sample is taken as it is).
 */
void za_pace_sample(struct za_pace *p, uint64_t done_bytes, uint64_t now_ns,
		    uint64_t *rate_bps);

#endif /* ZA_PACE_H */
