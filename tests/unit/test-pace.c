// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test-pace.c - the token bucket and the rate sample that rebuild and
 * scrub share: no limit takes everything; a limit lets a burst through,
 * then names a retry time at which the request does go through and not
 * before; over a long run the bytes taken follow the rate; a refund is
 * taken again at once; the rate shown is sampled once a second and
 * smoothed, and bytes taken back out of the total do not upset it.
 */
#include <check.h>

#include "tap.h"
#include <string.h>

#include "pace.h"

#define S 1000000000ull

START_TEST(test_no_limit)
{
	struct za_pace p;
	uint64_t retry = 7;
	unsigned i;

	memset(&p, 0, sizeof(p));
	for (i = 0; i < 1000; i++)
		ck_assert(za_pace_take(&p, 0, 1ull << 30, S + i, &retry));
	ck_assert_uint_eq(retry, 7); /* untouched */
}
END_TEST

static const uint64_t rates[] = { 1000000, 50000000, 4096 };

START_TEST(test_bucket)
{
	const uint64_t rate = rates[_i], req = 4096;
	struct za_pace p;
	uint64_t now = 5 * S, retry = 0, taken = 0, end;

	memset(&p, 0, sizeof(p));
	/* The first request starts the bucket empty: it waits. */
	ck_assert(!za_pace_take(&p, rate, req, now, &retry));
	ck_assert_uint_gt(retry, now);
	ck_assert(!za_pace_take(&p, rate, req, retry - 2000, &retry));
	ck_assert(za_pace_take(&p, rate, req, retry, &retry));
	/* Ten seconds of asking at every retry time: about the rate. */
	now = retry;
	end = now + 10 * S;
	while (now < end) {
		if (za_pace_take(&p, rate, req, now, &retry))
			taken += req;
		else
			now = retry;
	}
	ck_assert_uint_ge(taken, rate * 10 * 95 / 100 > req ?
					 rate * 10 * 95 / 100 - req :
					 0);
	ck_assert_uint_le(taken, rate * 10 * 105 / 100 + 4 * req + rate / 10);
	/* A refund goes through at once; an empty bucket again waits. */
	za_pace_reset_bucket(&p);
	ck_assert(!za_pace_take(&p, rate, req, now, &retry));
	za_pace_refund(&p, req);
	ck_assert(za_pace_take(&p, rate, req, now, &retry));
}
END_TEST

START_TEST(test_sample)
{
	struct za_pace p;
	uint64_t rate = 0;

	memset(&p, 0, sizeof(p));
	za_pace_sample(&p, 0, S, &rate); /* the start */
	za_pace_sample(&p, 500, S + S / 2, &rate);
	ck_assert_uint_eq(rate, 0); /* under a second: no sample yet */
	za_pace_sample(&p, 1000, 2 * S, &rate);
	ck_assert_uint_eq(rate, 1000); /* the first taken as it is */
	za_pace_sample(&p, 3000, 3 * S, &rate);
	ck_assert_uint_eq(rate, 1300); /* 0.7 x 1000 + 0.3 x 2000 */
}
END_TEST

/* Bytes taken back (a paused rebuild's aborted columns) shrink the base
 * with the total: the next sample sees only what moved since, never a
 * negative difference wrapped round; more than the base clamps at 0. */
START_TEST(test_unsample)
{
	struct za_pace p;
	uint64_t rate = 0;

	memset(&p, 0, sizeof(p));
	za_pace_sample(&p, 0, S, &rate);
	za_pace_sample(&p, 5000, 2 * S, &rate);
	ck_assert_uint_eq(rate, 5000);
	/* 4000 of the 5000 undone, then 1000 more moved in a second. */
	za_pace_unsample(&p, 4000);
	za_pace_sample(&p, 2000, 3 * S, &rate);
	ck_assert_uint_eq(rate, 3800); /* 0.7 x 5000 + 0.3 x 1000 */
	za_pace_unsample(&p, 1u << 20);
	za_pace_sample(&p, 0, 4 * S, &rate);
	ck_assert_uint_eq(rate, 2660); /* 0.7 x 3800 + 0.3 x 0 */
}
END_TEST

int main(void)
{
	Suite *s = suite_create("pace");
	TCase *tc = tcase_create("pace");

	tcase_add_test(tc, test_no_limit);
	tcase_add_loop_test(tc, test_bucket, 0,
			    sizeof(rates) / sizeof(rates[0]));
	tcase_add_test(tc, test_sample);
	tcase_add_test(tc, test_unsample);
	suite_add_tcase(s, tc);
	return trun(s);
}
