// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test-ec.c - the erasure coder over a table of geometries: parity matches
 * an independent scalar Cauchy code (the on-disk format), every erasure
 * pattern of up to p losses rebuilds byte-exact for small codes and random
 * ones for wide codes, p+1 losses are refused without touching the
 * outputs, the decode-table cache hits and stays bounded, and bad
 * arguments are refused.
 */
#include <check.h>

#include "tap.h"
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ec.h"

struct geo {
	unsigned k, p;
};

static const struct geo geos[] = {
	{ 1, 1 },  { 2, 1 },  { 3, 2 },	 { 4, 2 },  { 6, 3 },
	{ 8, 2 },  { 10, 2 }, { 10, 4 }, { 12, 6 }, { 16, 4 },
	{ 20, 6 }, { 32, 4 }, { 58, 6 }, { 63, 1 }, /* full 64-bit mask */
};
#define NR_GEOS (sizeof(geos) / sizeof(geos[0]))

/* Odd and tiny lengths take ISA-L's tail and non-SIMD paths. */
static const size_t lens[] = { 4096, 65536, 4097, 1000, 31 };
#define NR_LENS (sizeof(lens) / sizeof(lens[0]))

/*
 * ck_assert*() records a checkpoint (a write to check's pipe) on every
 * pass; inside loops over thousands of patterns and bytes that dominates
 * the run time, so hot loops check with this and only call check to fail.
 */
#define CHECK(cond, ...)                           \
	do {                                       \
		if (!(cond))                       \
			ck_abort_msg(__VA_ARGS__); \
	} while (0)

/* Codes this small are checked under every pattern, wider ones sampled. */
#define EXHAUSTIVE_MAX_WIDTH 12
/*
 * Building a table (inverting up to 58x58) costs far more than using it,
 * and does not depend on the length: the most patterns at the first length.
 */
#define RANDOM_PATTERNS_FIRST 300
#define RANDOM_PATTERNS 100

static uint64_t rng_next(uint64_t *s)
{
	/* xorshift64*: deterministic, seeded per test. */
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dull;
}

struct fx {
	struct za_ec *ec;
	unsigned k, p, n;
	size_t len;
	uint8_t *orig[ZA_EC_MAX_WIDTH]; /* data, then encoded parity */
	uint8_t *out[ZA_EC_MAX_WIDTH]; /* reconstruction targets */
	uint64_t rng;
};

static void fx_init(struct fx *f, unsigned k, unsigned p, size_t len,
		    uint64_t seed)
{
	unsigned i;
	size_t b;

	memset(f, 0, sizeof(*f));
	f->k = k;
	f->p = p;
	f->n = k + p;
	f->len = len;
	f->rng = seed * 0x9e3779b97f4a7c15ull + 1;
	ck_assert_int_eq(za_ec_new(k, p, &f->ec), 0);
	ck_assert_uint_eq(za_ec_k(f->ec), k);
	ck_assert_uint_eq(za_ec_p(f->ec), p);
	for (i = 0; i < f->n; i++) {
		f->orig[i] = malloc(len);
		f->out[i] = malloc(len);
		ck_assert_ptr_nonnull(f->orig[i]);
		ck_assert_ptr_nonnull(f->out[i]);
	}
	for (i = 0; i < k; i++)
		for (b = 0; b < len; b++)
			f->orig[i][b] = (uint8_t)(rng_next(&f->rng) >> 56);
	/* Parity buffers start as garbage: encode must overwrite all of it. */
	for (i = k; i < f->n; i++)
		memset(f->orig[i], 0x5a, len);
	za_ec_encode(f->ec, len, f->orig);
}

static void fx_fini(struct fx *f)
{
	unsigned i;

	for (i = 0; i < f->n; i++) {
		free(f->orig[i]);
		free(f->out[i]);
	}
	za_ec_free(f->ec);
}

/* Pointers for one call: wanted -> out[], lost and unwanted -> NULL. */
static void fx_ptrs(struct fx *f, uint64_t lost, uint64_t want, uint8_t **ptrs)
{
	unsigned i;

	for (i = 0; i < f->n; i++) {
		uint64_t bit = (uint64_t)1 << i;

		if (want & bit) {
			memset(f->out[i], 0xa5, f->len);
			ptrs[i] = f->out[i];
		} else {
			ptrs[i] = (lost & bit) ? NULL : f->orig[i];
		}
	}
}

static uint64_t all_mask(unsigned n)
{
	return n >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << n) - 1;
}

static void check_pattern(struct fx *f, uint64_t lost, uint64_t want)
{
	uint8_t *ptrs[ZA_EC_MAX_WIDTH];
	unsigned i;
	int ret;

	fx_ptrs(f, lost, want, ptrs);
	ret = za_ec_reconstruct(f->ec, f->len, ptrs, all_mask(f->n) & ~lost,
				want);
	CHECK(ret == 0, "%u+%u len %zu lost %#llx want %#llx: %d", f->k, f->p,
	      f->len, (unsigned long long)lost, (unsigned long long)want, ret);
	for (i = 0; i < f->n; i++)
		if (want & ((uint64_t)1 << i))
			CHECK(!memcmp(f->out[i], f->orig[i], f->len),
			      "%u+%u len %zu lost %#llx: chunk %u differs",
			      f->k, f->p, f->len, (unsigned long long)lost, i);
}

/* A random set of 1..max distinct chunk indices below n. */
static uint64_t random_set(uint64_t *rng, unsigned n, unsigned max)
{
	unsigned nr = 1 + (unsigned)(rng_next(rng) % max);
	uint64_t m = 0;

	while ((unsigned)__builtin_popcountll(m) < nr)
		m |= (uint64_t)1 << (rng_next(rng) % n);
	return m;
}

/* A random non-empty subset of @m. */
static uint64_t random_subset(uint64_t *rng, uint64_t m)
{
	uint64_t s;

	do
		s = m & rng_next(rng);
	while (!s);
	return s;
}

/* ---- parity against an independent scalar Cauchy code ---- */

static uint8_t gf_exp[512], gf_log[256];

/* Called once from main(): forked tests inherit the tables. */
static void gf_setup(void)
{
	unsigned i, x = 1;

	/* GF(2^8) with polynomial 0x11d, generator 2: ISA-L's field. */
	for (i = 0; i < 255; i++) {
		gf_exp[i] = gf_exp[i + 255] = (uint8_t)x;
		gf_log[x] = (uint8_t)i;
		x <<= 1;
		if (x & 0x100)
			x ^= 0x11d;
	}
}

static uint8_t ref_mul(uint8_t a, uint8_t b)
{
	return (a && b) ? gf_exp[gf_log[a] + gf_log[b]] : 0;
}

static uint8_t ref_inv(uint8_t a)
{
	return gf_exp[255 - gf_log[a]];
}

START_TEST(test_encode_reference)
{
	const struct geo *g = &geos[_i];
	struct fx f;
	unsigned r, j;
	size_t b;

	fx_init(&f, g->k, g->p, 1000, _i);
	/* Parity row r is Cauchy: element j is 1 / ((k + r) xor j). */
	for (r = 0; r < g->p; r++)
		for (b = 0; b < f.len; b++) {
			uint8_t s = 0;

			for (j = 0; j < g->k; j++)
				s ^= ref_mul(ref_inv((uint8_t)((g->k + r) ^ j)),
					     f.orig[j][b]);
			CHECK(f.orig[g->k + r][b] == s,
			      "%u+%u parity %u byte %zu", g->k, g->p, r, b);
		}
	fx_fini(&f);
}
END_TEST

START_TEST(test_encode_zero_len)
{
	uint8_t d[2] = { 1, 2 }, q[1] = { 0x77 };
	uint8_t *ptrs[3] = { &d[0], &d[1], &q[0] };
	struct za_ec_stats st;
	struct za_ec *ec;

	ck_assert_int_eq(za_ec_new(2, 1, &ec), 0);
	za_ec_encode(ec, 0, ptrs);
	ck_assert_uint_eq(q[0], 0x77);
	za_ec_encode(ec, 1, ptrs);
	ck_assert_uint_eq(q[0],
			  ref_mul(ref_inv(2), 1) ^ ref_mul(ref_inv(3), 2));
	za_ec_get_stats(ec, &st);
	ck_assert_uint_eq(st.encodes, 2);
	ck_assert_uint_eq(st.decodes, 0);
	za_ec_free(ec);
}
END_TEST

/* ---- reconstruction ---- */

START_TEST(test_reconstruct)
{
	const struct geo *g = &geos[_i / NR_LENS];
	size_t len = lens[_i % NR_LENS];
	struct za_ec_stats st;
	uint64_t lost, calls = 0;
	struct fx f;
	unsigned i;

	fx_init(&f, g->k, g->p, len, _i);
	if (f.n <= EXHAUSTIVE_MAX_WIDTH) {
		for (lost = 1; lost <= all_mask(f.n); lost++) {
			if ((unsigned)__builtin_popcountll(lost) > g->p)
				continue;
			check_pattern(&f, lost, lost);
			calls++;
			/* Rebuilding only one of several lost chunks. */
			if (lost & (lost - 1)) {
				check_pattern(&f, lost, lost & -lost);
				calls++;
			}
		}
	} else {
		unsigned nr = _i % NR_LENS ? RANDOM_PATTERNS :
					     RANDOM_PATTERNS_FIRST;

		for (i = 0; i < nr; i++) {
			lost = random_set(&f.rng, f.n, g->p);
			check_pattern(&f, lost,
				      i % 3 ? lost :
					      random_subset(&f.rng, lost));
			calls++;
		}
	}
	za_ec_get_stats(f.ec, &st);
	ck_assert_uint_eq(st.decodes, calls);
	ck_assert_uint_eq(st.table_hits + st.table_misses, calls);
	ck_assert_uint_eq(st.encodes, 1);
	fx_fini(&f);
}
END_TEST

START_TEST(test_too_many_losses)
{
	const struct geo *g = &geos[_i];
	uint8_t *ptrs[ZA_EC_MAX_WIDTH];
	struct za_ec_stats st;
	uint64_t lost;
	struct fx f;
	unsigned i, t;
	size_t b;

	fx_init(&f, g->k, g->p, 4096, _i);
	for (t = 0; t < 20; t++) {
		/* p+1 lost (all of them for a 1+1 code), some wanted. */
		lost = 0;
		while ((unsigned)__builtin_popcountll(lost) < g->p + 1)
			lost |= (uint64_t)1 << (rng_next(&f.rng) % f.n);
		fx_ptrs(&f, lost, lost, ptrs);
		ck_assert_int_eq(za_ec_reconstruct(f.ec, f.len, ptrs,
						   all_mask(f.n) & ~lost,
						   random_subset(&f.rng, lost)),
				 -EIO);
		for (i = 0; i < f.n; i++) {
			if (!(lost & ((uint64_t)1 << i)))
				continue;
			for (b = 0; b < f.len; b++)
				CHECK(f.out[i][b] == 0xa5,
				      "%u+%u: chunk %u byte %zu written", g->k,
				      g->p, i, b);
		}
	}
	za_ec_get_stats(f.ec, &st);
	ck_assert_uint_eq(st.decodes, 0);
	ck_assert_uint_eq(st.table_hits + st.table_misses, 0);
	ck_assert_uint_eq(za_ec_cached_tables(f.ec), 0);
	fx_fini(&f);
}
END_TEST

/* ---- the decode-table cache ---- */

START_TEST(test_cache_hit)
{
	struct za_ec_stats st;
	struct fx f;

	fx_init(&f, 10, 2, 4096, 1);
	check_pattern(&f, 0x3, 0x3);
	za_ec_get_stats(f.ec, &st);
	ck_assert_uint_eq(st.table_misses, 1);
	ck_assert_uint_eq(st.table_hits, 0);
	check_pattern(&f, 0x3, 0x3);
	za_ec_get_stats(f.ec, &st);
	ck_assert_uint_eq(st.table_misses, 1);
	ck_assert_uint_eq(st.table_hits, 1);
	ck_assert_uint_eq(za_ec_cached_tables(f.ec), 1);
	/* Same sources, other wanted set: other tables. */
	check_pattern(&f, 0x3, 0x1);
	za_ec_get_stats(f.ec, &st);
	ck_assert_uint_eq(st.table_misses, 2);
	ck_assert_uint_eq(za_ec_cached_tables(f.ec), 2);
	/*
	 * One chunk lost out of 12: the sources are chunks 1..10 whether or
	 * not chunk 11 is offered, so both calls share one table.
	 */
	check_pattern(&f, 0x1, 0x1);
	check_pattern(&f, 0x801, 0x1);
	za_ec_get_stats(f.ec, &st);
	ck_assert_uint_eq(st.table_misses, 3);
	ck_assert_uint_eq(st.table_hits, 2);
	ck_assert_uint_eq(st.decodes, 5);
	fx_fini(&f);
}
END_TEST

START_TEST(test_cache_bounded)
{
	unsigned i, hot_misses, cached_1000 = 0;
	uint64_t hot = 0x5, lost;
	struct za_ec_stats st, st0;
	struct fx f;

	/* 20+6: far more patterns than any cache holds. */
	fx_init(&f, 20, 6, 64, 2);
	for (i = 0; i < 2000; i++) {
		/* A hot pattern between new ones must stay cached (LRU). */
		za_ec_get_stats(f.ec, &st0);
		check_pattern(&f, hot, hot);
		za_ec_get_stats(f.ec, &st);
		hot_misses = (unsigned)(st.table_misses - st0.table_misses);
		CHECK(hot_misses == (i == 0 ? 1u : 0u),
		      "hot pattern missed %u times at round %u", hot_misses, i);
		lost = random_set(&f.rng, f.n, 6);
		check_pattern(&f, lost, lost);
		CHECK(za_ec_cached_tables(f.ec) <= 256, "%u tables cached",
		      za_ec_cached_tables(f.ec));
		if (i == 999)
			cached_1000 = za_ec_cached_tables(f.ec);
	}
	za_ec_get_stats(f.ec, &st);
	/* Random 1..6 of 26: almost all distinct, so mostly misses. */
	ck_assert_uint_gt(st.table_misses, 1500);
	ck_assert_uint_eq(za_ec_cached_tables(f.ec), cached_1000);
	ck_assert_uint_gt(cached_1000, 16);
	fx_fini(&f);
}
END_TEST

/* ---- arguments ---- */

START_TEST(test_bad_geometry)
{
	static const struct geo bad[] = { { 0, 1 },  { 1, 0 },
					  { 1, 7 },  { 59, 6 },
					  { 64, 1 }, { 0, 0 },
					  { 65, 1 }, { 4000000000u, 2 } };
	struct za_ec *ec = NULL;
	unsigned i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_int_eq(za_ec_new(bad[i].k, bad[i].p, &ec), -EINVAL);
	ck_assert_ptr_null(ec);
	ck_assert_int_eq(za_ec_new(63, 1, &ec), 0);
	za_ec_free(ec);
	ck_assert_int_eq(za_ec_new(1, 6, &ec), 0);
	za_ec_free(ec);
	za_ec_free(NULL);
}
END_TEST

START_TEST(test_bad_masks)
{
	uint8_t *ptrs[ZA_EC_MAX_WIDTH];
	struct za_ec_stats st;
	struct fx f;

	fx_init(&f, 10, 2, 4096, 3);
	fx_ptrs(&f, 0x3, 0x3, ptrs);
	/* Overlapping. */
	ck_assert_int_eq(za_ec_reconstruct(f.ec, f.len, ptrs, 0xffd, 0x3),
			 -EINVAL);
	/* Beyond k+p = 12, in either mask. */
	ck_assert_int_eq(za_ec_reconstruct(f.ec, f.len, ptrs, 0x1ffc, 0x3),
			 -EINVAL);
	ck_assert_int_eq(za_ec_reconstruct(f.ec, f.len, ptrs, 0xffc,
					   0x3 | (1ull << 63)),
			 -EINVAL);
	ck_assert_int_eq(za_ec_reconstruct(f.ec, f.len, ptrs, 0xffc, 0x1000),
			 -EINVAL);
	/* Nothing wanted. */
	ck_assert_int_eq(za_ec_reconstruct(f.ec, f.len, ptrs, 0xffc, 0),
			 -EINVAL);
	za_ec_get_stats(f.ec, &st);
	ck_assert_uint_eq(st.decodes, 0);
	ck_assert_uint_eq(st.table_misses, 0);
	ck_assert_uint_eq(f.out[0][0], 0xa5);
	ck_assert_uint_eq(f.out[1][f.len - 1], 0xa5);
	/* And the same call done right works. */
	check_pattern(&f, 0x3, 0x3);
	fx_fini(&f);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ec");
	TCase *tc;

	gf_setup();
	tc = tcase_create("encode");
	tcase_add_loop_test(tc, test_encode_reference, 0, NR_GEOS);
	tcase_add_test(tc, test_encode_zero_len);
	suite_add_tcase(s, tc);

	tc = tcase_create("reconstruct");
	/* Generous for sanitizer builds on slow cores; normally < 1 s. */
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_reconstruct, 0, NR_GEOS * NR_LENS);
	tcase_add_loop_test(tc, test_too_many_losses, 0, NR_GEOS);
	suite_add_tcase(s, tc);

	tc = tcase_create("cache");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_cache_hit);
	tcase_add_test(tc, test_cache_bounded);
	suite_add_tcase(s, tc);

	tc = tcase_create("args");
	tcase_add_test(tc, test_bad_geometry);
	tcase_add_test(tc, test_bad_masks);
	suite_add_tcase(s, tc);
	return trun(s);
}
