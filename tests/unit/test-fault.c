// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test-fault.c - the fault-injecting wrapper over an emulated drive:
 * pass-through when idle, whole-drive failure (now and at op N), EIO at op
 * N and at a seeded rate (reproducible), flipped read bits, zone overlays,
 * latency, power cut pass-through, and the spec parser.
 */
#include <errno.h>

#include "dev-fault.h"
#include "emu-util.h"
#include "log.h"

static struct za_dev *wrap(struct tdrive *t)
{
	struct za_dev *f;

	ck_assert_int_eq(za_fault_wrap(t->dev, &f), 0);
	t->dev = f; /* tdrive_free() closes the wrapper, which closes inner */
	return f;
}

START_TEST(test_passthrough)
{
	struct tdrive t;
	uint8_t *w = talloc(2 * BLK), *r = talloc(2 * BLK);
	struct za_dev *f;
	uint64_t landed = 0;

	tdrive_small(&t, ZA_DEV_MODEL_ZNS);
	f = wrap(&t);
	ck_assert(za_dev_is_fault(f));
	tfill(w, 2 * BLK, 3);
	ck_assert_int_eq(za_dev_io_sync(f, ZA_DEV_OP_APPEND, 1 << 20, w,
					2 * BLK, &landed),
			 0);
	ck_assert_uint_eq(landed, 1 << 20);
	ck_assert_int_eq(tio(f, ZA_DEV_OP_READ, 1 << 20, r, 2 * BLK), 0);
	ck_assert_mem_eq(w, r, 2 * BLK);
	/* The inner drive's own errors pass through unchanged. */
	ck_assert_int_eq(tio(f, ZA_DEV_OP_WRITE, 1 << 20, w, BLK), -ESPIPE);
	ck_assert_uint_eq(tzone(f, 1).wp_bytes, (1 << 20) + 2 * BLK);
	free(w);
	free(r);
	tdrive_free(&t);
}
END_TEST

START_TEST(test_fail)
{
	struct tdrive t;
	uint8_t *w = talloc(BLK);
	struct za_fault_cfg cfg = { .fail_at_op = 3 };
	struct za_fault_stats st;
	struct za_zone z;
	unsigned n = 1;
	struct za_dev *f;

	tdrive_small(&t, ZA_DEV_MODEL_HM_SMR);
	f = wrap(&t);
	za_fault_set(f, &cfg);
	ck_assert_int_eq(tio(f, ZA_DEV_OP_WRITE, 4 << 20, w, BLK), 0);
	ck_assert_int_eq(tio(f, ZA_DEV_OP_READ, 4 << 20, w, BLK), 0);
	ck_assert_int_eq(tio(f, ZA_DEV_OP_READ, 4 << 20, w, BLK), -ENODEV);
	ck_assert_int_eq(tio(f, ZA_DEV_OP_FLUSH, 0, NULL, 0), -ENODEV);
	ck_assert_int_eq(tio(f, ZA_DEV_OP_RESET, 4 << 20, NULL, 0), -ENODEV);
	ck_assert_int_eq(za_dev_report_zones(f, 0, &z, &n), -ENODEV);
	ck_assert(za_fault_failed(f));
	za_fault_stats(f, &st);
	ck_assert_uint_eq(st.enodev, 3);
	free(w);
	tdrive_free(&t);
}
END_TEST

START_TEST(test_eio_at)
{
	struct tdrive t;
	uint8_t *w = talloc(BLK);
	struct za_fault_cfg cfg = { 0 };
	struct za_dev *f;

	tdrive_small(&t, ZA_DEV_MODEL_HM_SMR);
	f = wrap(&t);
	cfg.eio_at_op = 2;
	za_fault_set(f, &cfg);
	ck_assert_int_eq(tio(f, ZA_DEV_OP_WRITE, 4 << 20, w, BLK), 0);
	ck_assert_int_eq(tio(f, ZA_DEV_OP_WRITE, (4 << 20) + BLK, w, BLK),
			 -EIO);
	/* The failed write did not reach the drive. */
	ck_assert_uint_eq(tzone(f, 4).wp_bytes, (4 << 20) + BLK);
	ck_assert_int_eq(tio(f, ZA_DEV_OP_WRITE, (4 << 20) + BLK, w, BLK), 0);
	ck_assert(!za_fault_failed(f));
	free(w);
	tdrive_free(&t);
}
END_TEST

static uint64_t count_eio(uint64_t seed)
{
	struct tdrive t;
	uint8_t *w = talloc(BLK);
	struct za_fault_cfg cfg = { .eio_rate_ppm = 250000, .seed = seed };
	struct za_dev *f;
	uint64_t pattern = 0;
	int i, n = 0;

	tdrive_small(&t, ZA_DEV_MODEL_HM_SMR);
	f = wrap(&t);
	za_fault_set(f, &cfg);
	for (i = 0; i < 200; i++) {
		int ret = tio(f, ZA_DEV_OP_READ, 0, w, BLK);

		ck_assert(ret == 0 || ret == -EIO);
		if (ret) {
			n++;
			pattern = pattern * 31 + (uint64_t)i;
		}
	}
	free(w);
	tdrive_free(&t);
	ck_assert_int_gt(n, 20);
	ck_assert_int_lt(n, 90);
	return pattern;
}

START_TEST(test_eio_rate_reproducible)
{
	ck_assert_uint_eq(count_eio(42), count_eio(42));
	ck_assert_uint_ne(count_eio(42), count_eio(43));
}
END_TEST

START_TEST(test_flip)
{
	struct tdrive t;
	uint8_t *w = talloc(BLK), *r = talloc(BLK);
	struct za_fault_cfg cfg = { .flip_rate_ppm = 1000000, .seed = 7 };
	struct za_fault_stats st;
	struct za_dev *f;
	int i, diff = 0;

	tdrive_small(&t, ZA_DEV_MODEL_HM_SMR);
	f = wrap(&t);
	tfill(w, BLK, 9);
	ck_assert_int_eq(tio(f, ZA_DEV_OP_WRITE, 4 << 20, w, BLK), 0);
	za_fault_set(f, &cfg);
	ck_assert_int_eq(tio(f, ZA_DEV_OP_READ, 4 << 20, r, BLK), 0);
	for (i = 0; i < BLK; i++)
		diff += __builtin_popcount(w[i] ^ r[i]);
	ck_assert_int_eq(diff, 1);
	za_fault_stats(f, &st);
	ck_assert_uint_eq(st.flips, 1);
	/* The medium itself is intact. */
	cfg.flip_rate_ppm = 0;
	za_fault_set(f, &cfg);
	ck_assert_int_eq(tio(f, ZA_DEV_OP_READ, 4 << 20, r, BLK), 0);
	ck_assert_mem_eq(w, r, BLK);
	free(w);
	free(r);
	tdrive_free(&t);
}
END_TEST

START_TEST(test_zone_overlay)
{
	struct tdrive t;
	uint8_t *w = talloc(BLK);
	struct za_dev *f;

	tdrive_small(&t, ZA_DEV_MODEL_HM_SMR);
	f = wrap(&t);
	ck_assert_int_eq(tio(f, ZA_DEV_OP_WRITE, 5 << 20, w, BLK), 0);
	ck_assert_int_eq(za_fault_zone_cond(f, 4, ZA_ZONE_COND_OFFLINE), 0);
	ck_assert_int_eq(za_fault_zone_cond(f, 5, ZA_ZONE_COND_READONLY), 0);
	ck_assert_int_eq(za_fault_zone_cond(f, 999, ZA_ZONE_COND_OFFLINE),
			 -EINVAL);
	ck_assert_int_eq(za_fault_zone_cond(f, 3, ZA_ZONE_COND_FULL), -EINVAL);
	ck_assert_int_eq(tzone(f, 4).cond, ZA_ZONE_COND_OFFLINE);
	ck_assert_int_eq(tzone(f, 5).cond, ZA_ZONE_COND_READONLY);
	ck_assert_int_eq(tio(f, ZA_DEV_OP_WRITE, 4 << 20, w, BLK), -EIO);
	ck_assert_int_eq(tio(f, ZA_DEV_OP_READ, 4 << 20, w, BLK), -EIO);
	ck_assert_int_eq(tio(f, ZA_DEV_OP_WRITE, (5 << 20) + BLK, w, BLK),
			 -EROFS);
	ck_assert_int_eq(tio(f, ZA_DEV_OP_RESET, 5 << 20, NULL, 0), -EROFS);
	ck_assert_int_eq(tio(f, ZA_DEV_OP_READ, 5 << 20, w, BLK), 0);
	ck_assert_int_eq(za_fault_zone_cond(f, 4, ZA_ZONE_COND_NOT_WP), 0);
	ck_assert_int_eq(tio(f, ZA_DEV_OP_WRITE, 4 << 20, w, BLK), 0);
	free(w);
	tdrive_free(&t);
}
END_TEST

START_TEST(test_latency)
{
	struct tdrive t;
	uint8_t *w = talloc(BLK);
	struct za_fault_cfg cfg = { .latency_ns = 30000000 };
	struct za_dev *f;
	uint64_t t0;

	tdrive_small(&t, ZA_DEV_MODEL_HM_SMR);
	f = wrap(&t);
	za_fault_set(f, &cfg);
	t0 = za_io_now_ns();
	ck_assert_int_eq(tio(f, ZA_DEV_OP_READ, 0, w, BLK), 0);
	ck_assert_uint_ge(za_io_now_ns() - t0, 30000000ull);
	free(w);
	tdrive_free(&t);
}
END_TEST

START_TEST(test_power_cut)
{
	struct tdrive t;
	uint8_t *w = talloc(BLK);
	struct za_dev *f;

	tdrive_small(&t, ZA_DEV_MODEL_HM_SMR);
	f = wrap(&t);
	ck_assert_int_eq(tio(f, ZA_DEV_OP_WRITE, 4 << 20, w, BLK), 0);
	ck_assert_int_eq(za_dev_power_cut(f), 0);
	ck_assert_uint_eq(tzone(f, 4).wp_bytes, 4 << 20);
	free(w);
	tdrive_free(&t);
}
END_TEST

START_TEST(test_parse)
{
	struct za_fault_cfg c;
	const char *bad = NULL;

	ck_assert_int_eq(za_fault_parse("", &c, &bad), 0);
	ck_assert_uint_eq(c.fail_at_op, 0);
	ck_assert_int_eq(za_fault_parse("fail", &c, &bad), 0);
	ck_assert_uint_eq(c.fail_at_op, 1);
	ck_assert_int_eq(za_fault_parse("eio-at=7,eio-ppm=100,flip-ppm=5,"
					"latency-us=250,seed=9,fail-at=1000",
					&c, &bad),
			 0);
	ck_assert_uint_eq(c.eio_at_op, 7);
	ck_assert_uint_eq(c.eio_rate_ppm, 100);
	ck_assert_uint_eq(c.flip_rate_ppm, 5);
	ck_assert_uint_eq(c.latency_ns, 250000);
	ck_assert_uint_eq(c.seed, 9);
	ck_assert_uint_eq(c.fail_at_op, 1000);
	ck_assert_int_eq(za_fault_parse("eio-at=", &c, &bad), -EINVAL);
	ck_assert_int_eq(za_fault_parse("eio-at=x", &c, &bad), -EINVAL);
	ck_assert_int_eq(za_fault_parse("eio-at=0", &c, &bad), -EINVAL);
	ck_assert_int_eq(za_fault_parse("eio-ppm=1000001", &c, &bad), -EINVAL);
	ck_assert_int_eq(za_fault_parse("seed=99999999999999999999999", &c,
					&bad),
			 -EINVAL);
	ck_assert_int_eq(za_fault_parse("fail,bogus=1", &c, &bad), -EINVAL);
	ck_assert_str_eq(bad, "bogus=1");
	ck_assert_int_eq(za_fault_parse("fail=1", &c, &bad), -EINVAL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("fault");
	TCase *tc = tcase_create("fault");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_passthrough);
	tcase_add_test(tc, test_fail);
	tcase_add_test(tc, test_eio_at);
	tcase_add_test(tc, test_eio_rate_reproducible);
	tcase_add_test(tc, test_flip);
	tcase_add_test(tc, test_zone_overlay);
	tcase_add_test(tc, test_latency);
	tcase_add_test(tc, test_power_cut);
	tcase_add_test(tc, test_parse);
	suite_add_tcase(s, tc);
	return trun(s);
}
