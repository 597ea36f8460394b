// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * pace.c - the token bucket and rate sampling that rebuild.c and scrub.c
 * share (pace.h). Arithmetic only: the callers own the timers and the
 * clock.
 */
#include "pace.h"

void za_pace_reset_bucket(struct za_pace *p)
{
	p->tokens = 0;
	p->tok_ns = 0;
}

bool za_pace_take(struct za_pace *p, uint64_t rate_bps, uint64_t bytes,
		  uint64_t now_ns, uint64_t *retry_ns)
{
	uint64_t burst;

	if (!rate_bps)
		return true;
	burst = rate_bps / 10 > 4 * bytes ? rate_bps / 10 : 4 * bytes;
	if (p->tok_ns) {
		uint64_t add = (uint64_t)((double)(now_ns - p->tok_ns) *
					  rate_bps / 1e9);

		p->tokens = p->tokens + add > burst ? burst : p->tokens + add;
	}
	p->tok_ns = now_ns;
	if (p->tokens >= bytes) {
		p->tokens -= bytes;
		return true;
	}
	/* + 1 us: the next fill must cover the request, not fall short by
	 * a rounding. */
	*retry_ns = now_ns +
		    (uint64_t)((double)(bytes - p->tokens) * 1e9 / rate_bps) +
		    1000;
	return false;
}

void za_pace_refund(struct za_pace *p, uint64_t bytes)
{
	p->tokens += bytes;
}

void za_pace_unsample(struct za_pace *p, uint64_t bytes)
{
	p->rate_bytes = p->rate_bytes > bytes ? p->rate_bytes - bytes : 0;
}

void za_pace_sample(struct za_pace *p, uint64_t done_bytes, uint64_t now_ns,
		    uint64_t *rate_bps)
{
	double r;

	if (!p->rate_ns) {
		p->rate_ns = now_ns;
		p->rate_bytes = done_bytes;
		return;
	}
	if (now_ns - p->rate_ns < 1000000000ull)
		return;
	r = (double)(done_bytes - p->rate_bytes) * 1e9 /
	    (double)(now_ns - p->rate_ns);
	*rate_bps = *rate_bps ? (uint64_t)(0.7 * *rate_bps + 0.3 * r) :
				(uint64_t)r;
	p->rate_ns = now_ns;
	p->rate_bytes = done_bytes;
}
