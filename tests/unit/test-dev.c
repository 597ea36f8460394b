// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test-dev.c - the device layer's shared contract: argument checks over a
 * table of geometries, zone-state checks over a table of zone conditions,
 * enum names, and za_dev_open() refusing things that are not zoned drives.
 */
#include <check.h>

#include "tap.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dev.h"
#include "log.h"

#define BLK 4096
#define MiB (1ull << 20)

static const struct geo {
	uint64_t zone_size, zone_cap;
	uint32_t nr_zones, gran, max_io, max_append;
} geos[] = {
	{ 64 * MiB, 64 * MiB, 16, 4096, 1 << 20, 1 << 20 },
	{ 64 * MiB, 60 * MiB, 16, 4096, 1 << 20, 512 << 10 },
	{ 256 * MiB, 256 * MiB, 4, 4096, 4 << 20, 4 << 20 },
	{ 1 * MiB, 1 * MiB, 3, 8192, 64 << 10, 64 << 10 },
	{ 2048 * MiB, 1077 * MiB, 2, 4096, 128 << 10, 128 << 10 },
};

static void geo_dev(struct za_dev *d, const struct geo *g)
{
	memset(d, 0, sizeof(*d));
	d->caps.zone_size_bytes = g->zone_size;
	d->caps.zone_cap_bytes = g->zone_cap;
	d->caps.nr_zones = g->nr_zones;
	d->caps.capacity_bytes = g->zone_size * g->nr_zones;
	d->caps.lblock_bytes = BLK;
	d->caps.write_gran_bytes = g->gran;
	d->caps.max_io_bytes = g->max_io;
	d->caps.max_append_bytes = g->max_append;
}

static int args(struct za_dev *d, enum za_dev_op op, uint64_t off, uint64_t len,
		void *buf)
{
	struct za_dev_req r = {
		.op = op, .off_bytes = off, .len_bytes = len, .buf = buf
	};

	return za_dev_check_args(d, &r);
}

START_TEST(test_check_args)
{
	const struct geo *g = &geos[_i];
	struct za_dev d;
	uint8_t *buf = NULL;
	uint64_t cap, zs = g->zone_size;

	ck_assert_int_eq(posix_memalign((void **)&buf, BLK, 2 * BLK), 0);
	geo_dev(&d, g);
	cap = d.caps.capacity_bytes;

	ck_assert_int_eq(args(&d, ZA_DEV_OP_READ, 0, BLK, buf), 0);
	ck_assert_int_eq(args(&d, ZA_DEV_OP_READ, zs - BLK, BLK, buf), 0);
	ck_assert_int_eq(args(&d, ZA_DEV_OP_READ, cap - BLK, BLK, buf), 0);
	ck_assert_int_eq(args(&d, ZA_DEV_OP_READ, 512, BLK, buf), -EINVAL);
	ck_assert_int_eq(args(&d, ZA_DEV_OP_READ, 0, 0, buf), -EINVAL);
	ck_assert_int_eq(args(&d, ZA_DEV_OP_READ, 0, 100, buf), -EINVAL);
	ck_assert_int_eq(args(&d, ZA_DEV_OP_READ, 0, BLK, buf + 8), -EINVAL);
	ck_assert_int_eq(args(&d, ZA_DEV_OP_READ, 0, BLK, NULL), -EINVAL);
	ck_assert_int_eq(args(&d, ZA_DEV_OP_READ, cap, BLK, buf), -EINVAL);
	ck_assert_int_eq(args(&d, ZA_DEV_OP_READ, cap - BLK, 2 * BLK, buf),
			 -EINVAL);
	/* Offsets and lengths that would wrap must not pass. */
	ck_assert_int_eq(args(&d, ZA_DEV_OP_READ, UINT64_MAX - BLK + 1, BLK,
			      buf),
			 -EINVAL);
	ck_assert_int_eq(args(&d, ZA_DEV_OP_READ, BLK, UINT64_MAX - BLK + 1,
			      buf),
			 -EINVAL);
	ck_assert_int_eq(args(&d, ZA_DEV_OP_READ, zs - BLK, 2 * BLK, buf),
			 -EINVAL);
	ck_assert_int_eq(args(&d, ZA_DEV_OP_READ, 0, (uint64_t)g->max_io + BLK,
			      buf),
			 -EINVAL);
	/* Writes: the granularity as well. */
	ck_assert_int_eq(args(&d, ZA_DEV_OP_WRITE, 0, g->gran, buf), 0);
	if (g->gran > BLK) {
		ck_assert_int_eq(args(&d, ZA_DEV_OP_WRITE, 0, BLK, buf),
				 -EINVAL);
		ck_assert_int_eq(args(&d, ZA_DEV_OP_WRITE, BLK, g->gran, buf),
				 -EINVAL);
		ck_assert_int_eq(args(&d, ZA_DEV_OP_READ, BLK, BLK, buf), 0);
	}
	/* Zone operations: at a zone start only. */
	ck_assert_int_eq(args(&d, ZA_DEV_OP_RESET, zs, 0, NULL), 0);
	ck_assert_int_eq(args(&d, ZA_DEV_OP_RESET, zs + BLK, 0, NULL), -EINVAL);
	ck_assert_int_eq(args(&d, ZA_DEV_OP_FINISH, cap, 0, NULL), -EINVAL);
	ck_assert_int_eq(args(&d, ZA_DEV_OP_APPEND, zs, g->gran, buf), 0);
	ck_assert_int_eq(args(&d, ZA_DEV_OP_APPEND, zs + g->gran, g->gran, buf),
			 -EINVAL);
	ck_assert_int_eq(args(&d, ZA_DEV_OP_APPEND, 0,
			      (uint64_t)g->max_append + g->gran, buf),
			 -EINVAL);
	ck_assert_int_eq(args(&d, ZA_DEV_OP_FLUSH, 0, 0, NULL), 0);
	ck_assert_int_eq(args(&d, (enum za_dev_op)0, 0, BLK, buf), -EINVAL);
	ck_assert_int_eq(args(&d, (enum za_dev_op)42, 0, BLK, buf), -EINVAL);
	free(buf);
}
END_TEST

static const struct zcase {
	enum za_zone_type type;
	enum za_zone_cond cond;
	uint64_t wp_rel;
	enum za_dev_op op;
	uint64_t off_rel, len;
	int want;
} zcases[] = {
	{ ZA_ZONE_TYPE_SWR, ZA_ZONE_COND_EMPTY, 0, ZA_DEV_OP_WRITE, 0, BLK, 0 },
	{ ZA_ZONE_TYPE_SWR, ZA_ZONE_COND_EMPTY, 0, ZA_DEV_OP_WRITE, BLK, BLK,
	  -ESPIPE },
	{ ZA_ZONE_TYPE_SWR, ZA_ZONE_COND_IMP_OPEN, 8 * BLK, ZA_DEV_OP_WRITE, 0,
	  BLK, -ESPIPE },
	{ ZA_ZONE_TYPE_SWR, ZA_ZONE_COND_IMP_OPEN, 8 * BLK, ZA_DEV_OP_WRITE,
	  8 * BLK, BLK, 0 },
	{ ZA_ZONE_TYPE_SWR, ZA_ZONE_COND_CLOSED, 8 * BLK, ZA_DEV_OP_READ, 0,
	  8 * BLK, 0 },
	{ ZA_ZONE_TYPE_SWR, ZA_ZONE_COND_CLOSED, 8 * BLK, ZA_DEV_OP_READ, 0,
	  9 * BLK, -ENODATA },
	{ ZA_ZONE_TYPE_SWR, ZA_ZONE_COND_EMPTY, 0, ZA_DEV_OP_READ, 0, BLK,
	  -ENODATA },
	{ ZA_ZONE_TYPE_SWR, ZA_ZONE_COND_FULL, 16 * BLK, ZA_DEV_OP_READ,
	  15 * BLK, BLK, 0 },
	{ ZA_ZONE_TYPE_SWR, ZA_ZONE_COND_FULL, 16 * BLK, ZA_DEV_OP_WRITE,
	  16 * BLK, BLK, -ENOSPC },
	{ ZA_ZONE_TYPE_SWR, ZA_ZONE_COND_FULL, 16 * BLK, ZA_DEV_OP_APPEND, 0,
	  BLK, -ENOSPC },
	{ ZA_ZONE_TYPE_SWR, ZA_ZONE_COND_IMP_OPEN, 15 * BLK, ZA_DEV_OP_WRITE,
	  15 * BLK, 2 * BLK, -ENOSPC },
	{ ZA_ZONE_TYPE_SWR, ZA_ZONE_COND_IMP_OPEN, 15 * BLK, ZA_DEV_OP_APPEND,
	  0, 2 * BLK, -ENOSPC },
	{ ZA_ZONE_TYPE_SWR, ZA_ZONE_COND_IMP_OPEN, 15 * BLK, ZA_DEV_OP_APPEND,
	  0, BLK, 0 },
	{ ZA_ZONE_TYPE_SWR, ZA_ZONE_COND_READONLY, 0, ZA_DEV_OP_WRITE, 0, BLK,
	  -EROFS },
	{ ZA_ZONE_TYPE_SWR, ZA_ZONE_COND_READONLY, 0, ZA_DEV_OP_RESET, 0, 0,
	  -EROFS },
	{ ZA_ZONE_TYPE_SWR, ZA_ZONE_COND_READONLY, 0, ZA_DEV_OP_READ, 0, BLK,
	  0 },
	{ ZA_ZONE_TYPE_SWR, ZA_ZONE_COND_OFFLINE, 0, ZA_DEV_OP_READ, 0, BLK,
	  -EIO },
	{ ZA_ZONE_TYPE_SWR, ZA_ZONE_COND_OFFLINE, 0, ZA_DEV_OP_RESET, 0, 0,
	  -EIO },
	{ ZA_ZONE_TYPE_CNV, ZA_ZONE_COND_NOT_WP, 0, ZA_DEV_OP_WRITE, 5 * BLK,
	  BLK, 0 },
	{ ZA_ZONE_TYPE_CNV, ZA_ZONE_COND_NOT_WP, 0, ZA_DEV_OP_READ, 5 * BLK,
	  BLK, 0 },
	{ ZA_ZONE_TYPE_CNV, ZA_ZONE_COND_NOT_WP, 0, ZA_DEV_OP_RESET, 0, 0,
	  -EINVAL },
	{ ZA_ZONE_TYPE_CNV, ZA_ZONE_COND_NOT_WP, 0, ZA_DEV_OP_APPEND, 0, BLK,
	  -EINVAL },
	{ ZA_ZONE_TYPE_SWR, ZA_ZONE_COND_CLOSED, BLK, ZA_DEV_OP_FINISH, 0, 0,
	  0 },
};

START_TEST(test_check_zone)
{
	const struct zcase *c = &zcases[_i];
	uint64_t start = 16 * BLK;
	struct za_zone z = { .start_bytes = start,
			     .len_bytes = 16 * BLK,
			     .cap_bytes = 16 * BLK,
			     .wp_bytes = start + c->wp_rel,
			     .type = c->type,
			     .cond = c->cond };
	struct za_dev_req r = { .op = c->op,
				.off_bytes = start + c->off_rel,
				.len_bytes = c->len };

	ck_assert_msg(za_dev_check_zone(NULL, &z, &r) == c->want,
		      "case %d: %s on %s zone: got %d want %d", _i,
		      za_dev_op_str(c->op), za_zone_cond_str(c->cond),
		      za_dev_check_zone(NULL, &z, &r), c->want);
}
END_TEST

START_TEST(test_names)
{
	enum za_dev_model m;

	ck_assert_str_eq(za_dev_model_str(ZA_DEV_MODEL_ZNS), "zns");
	ck_assert_str_eq(za_dev_model_str(ZA_DEV_MODEL_HM_SMR), "hm-smr");
	ck_assert_int_eq(za_dev_model_parse("zns", &m), 0);
	ck_assert_int_eq(m, ZA_DEV_MODEL_ZNS);
	ck_assert_int_eq(za_dev_model_parse("hm-smr", &m), 0);
	ck_assert_int_eq(m, ZA_DEV_MODEL_HM_SMR);
	ck_assert_int_eq(za_dev_model_parse("ssd", &m), -EINVAL);
	ck_assert_str_eq(za_zone_cond_str(ZA_ZONE_COND_IMP_OPEN), "imp-open");
	ck_assert_str_eq(za_zone_type_str(ZA_ZONE_TYPE_CNV), "cnv");
	ck_assert_str_eq(za_dev_op_str(ZA_DEV_OP_APPEND), "append");
	ck_assert_str_eq(za_dev_op_str((enum za_dev_op)77), "unknown");
}
END_TEST

static void quiet(enum za_log_level l, const char *msg)
{
	(void)l;
	(void)msg;
}

START_TEST(test_open_not_zoned)
{
	char path[] = "/tmp/za-unit-plain-XXXXXX";
	struct za_dev *dev = NULL;
	struct za_io *io;
	int fd;

	za_log_set_sink(quiet);
	ck_assert_int_eq(za_io_new(NULL, &io), 0);
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "hello, not a drive", 18), 18);
	close(fd);
	ck_assert_int_eq(za_dev_open(io, path, 0, &dev), -EMEDIUMTYPE);
	ck_assert_int_eq(za_dev_open(io, "/dev/null", 0, &dev), -EMEDIUMTYPE);
	ck_assert_int_eq(za_dev_open(io, "/nonexistent/za", 0, &dev), -ENOENT);
	unlink(path);
	za_io_free(io);
	za_log_set_sink(NULL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("dev");
	TCase *tc = tcase_create("dev");

	tcase_add_loop_test(tc, test_check_args, 0,
			    sizeof(geos) / sizeof(geos[0]));
	tcase_add_loop_test(tc, test_check_zone, 0,
			    sizeof(zcases) / sizeof(zcases[0]));
	tcase_add_test(tc, test_names);
	tcase_add_test(tc, test_open_not_zoned);
	suite_add_tcase(s, tc);
	return trun(s);
}
