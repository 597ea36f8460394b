// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test-volume.c - the volume over a real engine on emulated drives with
 * volatile caches: random writes, FUA writes, trims, zeroes and flushes
 * checked byte for byte against an in-memory model; the 4 KiB write +
 * FLUSH loop going to the journal at exactly 2(p+1) device bytes per user
 * byte instead of padded stripes; a partly filled buffer padded when that
 * is cheaper; everything flushed surviving a power cut of every drive
 * (read back from the drives); a sequential fill leaving one map extent
 * per group.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dev-emu.h"
#include "crc.h"
#include "dev.h"
#include "io.h"
#include "log.h"
#include "segment.h"
#include "tap.h"
#include "volume.h"

#define N 8
#define VOL_BLOCKS 2048u /* 8 MiB */

struct tvol {
	char dir[256];
	struct za_io *io;
	struct za_dev *devs[N];
	uint8_t states[N];
	struct za_engine *e;
	struct za_volume *v;
	uint8_t *model;
	unsigned k, p;
	struct za_uuid uuid;
	uint64_t drive_bytes; /* 0: 64 MiB */
	uint64_t vol_blocks; /* 0: VOL_BLOCKS; UINT64_MAX: 85% of capacity */
};

static void tvol_start(struct tvol *t, bool recover);

/*
 * A crash: whatever the drives' volatile caches hold is lost, and every
 * byte of memory is gone. Then the drives are opened again and the
 * volume rebuilt from them alone.
 */
static void tvol_crash_and_recover(struct tvol *t, unsigned missing_mask)
{
	unsigned i;
	char path[300];

	while (za_volume_busy(t->v) || za_engine_busy(t->e))
		za_io_run_once(t->io);
	for (i = 0; i < N; i++)
		if (t->devs[i])
			ck_assert_int_eq(za_dev_power_cut(t->devs[i]), 0);
	za_volume_free(t->v);
	za_engine_free(t->e);
	for (i = 0; i < N; i++) {
		if (t->devs[i])
			za_dev_close(t->devs[i]);
		t->devs[i] = NULL;
		if (missing_mask & (1u << i))
			continue; /* this drive does not come back */
		snprintf(path, sizeof(path), "%s/d%u", t->dir, i);
		ck_assert_int_eq(za_dev_open(t->io, path, 0, &t->devs[i]), 0);
	}
	tvol_start(t, true);
}

static uint64_t rng = 1;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Failures are exercised on purpose: log only when ZA_TEST_LOG is set. */
static void quiet(enum za_log_level lv, const char *msg)
{
	if (getenv("ZA_TEST_LOG"))
		fprintf(stderr, "[%d] %s\n", (int)lv, msg);
}

static void tvol_make_sized(struct tvol *t, unsigned k, unsigned p,
			    uint64_t drive_bytes, uint64_t vol_blocks)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	struct za_emu_params ep;
	unsigned i;

	memset(t, 0, sizeof(*t));
	t->drive_bytes = drive_bytes;
	t->vol_blocks = vol_blocks;
	snprintf(t->dir, sizeof(t->dir), "%s/za-vol-XXXXXX", tmp);
	ck_assert_ptr_nonnull(mkdtemp(t->dir));
	ck_assert_int_eq(za_io_new(NULL, &t->io), 0);
	for (i = 0; i < N; i++) {
		char path[300];

		snprintf(path, sizeof(path), "%s/d%u", t->dir, i);
		za_emu_params_default(&ep, i % 2 ? ZA_DEV_MODEL_ZNS :
						   ZA_DEV_MODEL_HM_SMR);
		ep.size_bytes = t->drive_bytes ? t->drive_bytes : 64ull << 20;
		ep.zone_size_bytes = 2ull << 20;
		ep.zone_cap_bytes = i % 2 ? (3ull << 19) : 0;
		ep.nr_conv_zones = 0;
		ep.cache_bytes = 4ull << 20; /* volatile: power cuts bite */
		ck_assert_int_eq(za_emu_create(path, &ep, true), 0);
		ck_assert_int_eq(za_dev_open(t->io, path, 0, &t->devs[i]), 0);
		t->states[i] = ZA_MEMBER_ONLINE;
	}
	t->k = k;
	t->p = p;
	ck_assert_int_eq(za_uuid_gen(&t->uuid), 0);
	tvol_start(t, false);
	t->model = calloc(t->vol_blocks, 4096);
	ck_assert_ptr_nonnull(t->model);
}

static void tvol_make(struct tvol *t, unsigned k, unsigned p)
{
	tvol_make_sized(t, k, p, 0, VOL_BLOCKS);
}

/* Engine and volume over the open drives; recover from them if asked. */
static void tvol_start(struct tvol *t, bool recover)
{
	struct za_engine_params prm = { 0 };
	struct za_volume_params vp = { 0 };

	prm.geom.k = (uint8_t)t->k;
	prm.geom.p = (uint8_t)t->p;
	prm.geom.matrix = ZA_EC_MATRIX_CAUCHY;
	prm.geom.stripe_rows = 2;
	prm.geom.chunk_bytes = 8192;
	prm.geom.lblock_bytes = 4096;
	prm.geom.hdr_bytes = 4096;
	prm.array_uuid = t->uuid;
	prm.nr_members = N;
	prm.devs = t->devs;
	prm.states = t->states;
	prm.next_seq = 1;
	prm.next_seg_id = 1;
	ck_assert_int_eq(za_engine_new(t->io, &prm, &t->e), 0);
	vp.eng = t->e;
	if (t->vol_blocks == UINT64_MAX)
		t->vol_blocks = za_volume_default_size(t->e) / 4096;
	vp.size_bytes = t->vol_blocks * 4096;
	ck_assert_int_eq(za_volume_new(t->io, &vp, &t->v), 0);
	if (recover)
		ck_assert_int_eq(za_volume_recover(t->v), 0);
}

static void tvol_free(struct tvol *t)
{
	unsigned i;
	char path[300];

	while (za_volume_busy(t->v) || za_engine_busy(t->e))
		za_io_run_once(t->io);
	za_volume_free(t->v);
	za_engine_free(t->e);
	for (i = 0; i < N; i++) {
		if (t->devs[i])
			za_dev_close(t->devs[i]);
		snprintf(path, sizeof(path), "%s/d%u", t->dir, i);
		unlink(path);
	}
	rmdir(t->dir);
	za_io_free(t->io);
	free(t->model);
}

static void *ablk(size_t nblocks)
{
	void *p;

	ck_assert_int_eq(posix_memalign(&p, 4096, nblocks * 4096), 0);
	return p;
}

static void check_range(struct tvol *t, uint64_t lba, uint64_t n)
{
	uint8_t *buf = ablk(n);

	ck_assert_int_eq(za_volume_read_sync(t->v, lba * 4096, n * 4096, buf),
			 0);
	ck_assert_msg(!memcmp(buf, t->model + lba * 4096, n * 4096),
		      "blocks %llu+%llu differ from the model",
		      (unsigned long long)lba, (unsigned long long)n);
	free(buf);
}

static void write_rand(struct tvol *t, uint64_t lba, uint64_t n, bool fua)
{
	uint8_t *buf = ablk(n);
	uint64_t i;

	for (i = 0; i < n * 4096 / 8; i++)
		((uint64_t *)buf)[i] = rnd();
	ck_assert_int_eq(
		za_volume_write_sync(t->v, lba * 4096, n * 4096, buf, fua), 0);
	memcpy(t->model + lba * 4096, buf, n * 4096);
	free(buf);
}

static uint64_t dev_write_bytes(struct tvol *t)
{
	uint64_t sum = 0;
	unsigned i;

	for (i = 0; i < N; i++)
		sum += t->devs[i]->stats.write_bytes;
	return sum;
}

struct done_flag {
	bool done;
	int result;
};

static void on_done(struct za_vol_req *r, int result)
{
	struct done_flag *d = r->priv;

	d->result = result;
	d->done = true;
}

/* TRIM or WRITE_ZEROES (with FUA) through the asynchronous API. */
static int unmap_sync(struct tvol *t, uint64_t lba, uint64_t n, bool zeroes)
{
	struct done_flag d = { 0 };
	struct za_vol_req r = { .done = on_done, .priv = &d };

	if (zeroes)
		za_volume_write_zeroes(t->v, &r, lba * 4096, n * 4096, true);
	else
		za_volume_trim(t->v, &r, lba * 4096, n * 4096);
	za_io_run_until(t->io, &d.done, 0);
	return d.result;
}

START_TEST(test_random_ops_against_model)
{
	struct tvol t;
	int op;

	rng = 1000 + (uint64_t)_i;
	tvol_make(&t, 4, 2);
	for (op = 0; op < 600; op++) {
		uint64_t lba = rnd() % VOL_BLOCKS;
		uint64_t n = 1 + rnd() % (rnd() % 8 ? 8 : 100);
		unsigned what = (unsigned)(rnd() % 20);

		if (lba + n > VOL_BLOCKS)
			n = VOL_BLOCKS - lba;
		if (what < 12) {
			write_rand(&t, lba, n, what == 0);
		} else if (what < 14) {
			ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
		} else if (what < 15) {
			ck_assert_int_eq(unmap_sync(&t, lba, n, rnd() & 1), 0);
			memset(t.model + lba * 4096, 0, n * 4096);
		} else {
			check_range(&t, lba, n);
		}
	}
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	check_range(&t, 0, VOL_BLOCKS);
	/* Out of range and misaligned requests are refused. */
	{
		uint8_t *b = ablk(1);

		ck_assert_int_eq(za_volume_read_sync(t.v, VOL_BLOCKS * 4096ull,
						     4096, b),
				 -EINVAL);
		ck_assert_int_eq(za_volume_write_sync(t.v, 512, 4096, b, false),
				 -EINVAL);
		ck_assert_int_eq(za_volume_write_sync(t.v, UINT64_MAX - 4095,
						      8192, b, false),
				 -EINVAL);
		free(b);
	}
	tvol_free(&t);
}
END_TEST

/*
 * The versions a block may hold after a crash: the one at the last
 * completed flush and every one written since (unflushed writes may or
 * may not have reached the drives, in any combination), as CRCs.
 */
#define MAXV 24
struct versions {
	uint32_t crc[VOL_BLOCKS][MAXV];
	uint8_t nr[VOL_BLOCKS];
	bool any[VOL_BLOCKS];
};

static void versions_reset(struct versions *vs, const uint8_t *model)
{
	uint64_t b;

	for (b = 0; b < VOL_BLOCKS; b++) {
		vs->crc[b][0] = za_crc32c(model + b * 4096, 4096);
		vs->nr[b] = 1;
		vs->any[b] = false;
	}
}

static void versions_add(struct versions *vs, const uint8_t *model,
			 uint64_t lba, uint64_t n)
{
	uint64_t b;

	for (b = lba; b < lba + n; b++) {
		if (vs->nr[b] == MAXV) {
			vs->any[b] = true;
			continue;
		}
		vs->crc[b][vs->nr[b]++] = za_crc32c(model + b * 4096, 4096);
	}
}

static bool versions_ok(const struct versions *vs, uint64_t b,
			const uint8_t *got)
{
	uint32_t c = za_crc32c(got, 4096);
	unsigned i;

	if (vs->any[b])
		return true;
	for (i = 0; i < vs->nr[b]; i++)
		if (vs->crc[b][i] == c)
			return true;
	return false;
}

/*
 * Crash recovery: random writes, trims and zeroes, flushes, more of them
 * without a flush, a crash. After recovery every block reads back as it
 * was at the last flush or as one of the versions written since: never
 * anything else (and, for a block not touched since the flush, exactly
 * the flushed version).
 */
START_TEST(test_crash_recovery)
{
	struct tvol t;
	struct versions *vs = malloc(sizeof(*vs));
	uint8_t *buf;
	uint64_t lba, bad = 0;
	int op, round;

	rng = 5000 + (uint64_t)_i;
	tvol_make(&t, 4, 2);
	buf = ablk(VOL_BLOCKS);
	versions_reset(vs, t.model);
	for (round = 0; round < 3; round++) {
		for (op = 0; op < 150; op++) {
			uint64_t a = rnd() % VOL_BLOCKS;
			uint64_t n = 1 + rnd() % (rnd() % 6 ? 8 : 90);

			if (a + n > VOL_BLOCKS)
				n = VOL_BLOCKS - a;
			if (rnd() % 12 == 0) {
				ck_assert_int_eq(
					unmap_sync(&t, a, n, rnd() & 1), 0);
				memset(t.model + a * 4096, 0, n * 4096);
			} else {
				write_rand(&t, a, n, rnd() % 30 == 0);
			}
			versions_add(vs, t.model, a, n);
			if (op % 50 == 49) {
				ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
				versions_reset(vs, t.model);
			}
		}
		/* Odd runs lose two drives (p = 2) in the last crash: the
		 * LBA tables and data of their columns are decoded. */
		tvol_crash_and_recover(&t, (_i & 1) && round == 2 ? 0x12 : 0);
		ck_assert_int_eq(
			za_volume_read_sync(t.v, 0, (uint64_t)VOL_BLOCKS * 4096,
					    buf),
			0);
		for (lba = 0; lba < VOL_BLOCKS; lba++)
			bad += !versions_ok(vs, lba, buf + lba * 4096);
		ck_assert_msg(bad == 0,
			      "round %d: %llu blocks hold a version that was "
			      "never written or was overwritten before a flush",
			      round, (unsigned long long)bad);
		/* What was read is the truth from now on. */
		memcpy(t.model, buf, (size_t)VOL_BLOCKS * 4096);
		versions_reset(vs, t.model);
	}
	free(vs);
	free(buf);
	tvol_free(&t);
}
END_TEST

/*
 * Garbage collection: a volume at the default size (85% of the capacity),
 * filled to 80%, overwritten three times over by random writes of 4 KiB
 * to 64 KiB with some small synced writes and trims. Without GC the
 * drives would fill long before; with it every block reads back, GC ran,
 * moved blocks and freed groups, and it all survives a crash.
 */
START_TEST(test_gc_overwrite)
{
	struct tvol t;
	struct za_volume_stats st;
	uint64_t vb, lba, written = 0, fill;

	rng = 4242;
	tvol_make_sized(&t, 4, 2, 24ull << 20, UINT64_MAX);
	vb = t.vol_blocks;
	ck_assert_uint_gt(vb, 2000);
	fill = vb * 80 / 100;
	for (lba = 0; lba + 16 <= fill; lba += 16)
		write_rand(&t, lba, 16, false);
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	while (written < 3 * fill) {
		uint64_t n = 1 + rnd() % 16;
		uint64_t a = rnd() % (fill - n);
		unsigned what = (unsigned)(rnd() % 40);

		if (what == 0) {
			ck_assert_int_eq(unmap_sync(&t, a, n, true), 0);
			memset(t.model + a * 4096, 0, n * 4096);
		} else {
			write_rand(&t, a, n, false);
			if (what < 3)
				ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
		}
		written += n;
	}
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	check_range(&t, 0, vb);
	za_volume_get_stats(t.v, &st);
	ck_assert_uint_gt(st.gc_runs, 0);
	ck_assert_uint_gt(st.gc_freed_groups, 0);
	ck_assert_uint_gt(st.gc_moved_blocks, 0);
	tvol_crash_and_recover(&t, 0);
	check_range(&t, 0, vb);
	tvol_free(&t);
}
END_TEST

START_TEST(test_small_sync_writes_use_journal)
{
	struct tvol t;
	struct za_volume_stats st;
	uint64_t before, after;
	const unsigned p = 2, loops = 50;
	unsigned i;

	rng = 77;
	tvol_make(&t, 4, p);
	before = dev_write_bytes(&t);
	for (i = 0; i < loops; i++) {
		write_rand(&t, rnd() % VOL_BLOCKS, 1, false);
		ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	}
	after = dev_write_bytes(&t);
	za_volume_get_stats(t.v, &st);
	ck_assert_uint_eq(st.journal_blocks, loops);
	ck_assert_uint_eq(st.data_stripes, 0);
	/* Header + block on each of p+1 members: 2(p+1) per user block. */
	ck_assert_uint_eq(after - before, (uint64_t)loops * 4096 * 2 * (p + 1));
	check_range(&t, 0, VOL_BLOCKS);
	tvol_free(&t);
}
END_TEST

START_TEST(test_partial_buffer_padded_when_cheaper)
{
	struct tvol t;
	struct za_volume_stats st;

	rng = 78;
	tvol_make(&t, 4, 2);
	/* 4+2, 2 rows of 2 blocks: 16 data blocks per stripe; 15 blocks
	 * journaled would cost 15 x 6 = 90 blocks, a padded stripe 6 x 5. */
	write_rand(&t, 100, 15, false);
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	za_volume_get_stats(t.v, &st);
	ck_assert_uint_eq(st.padded_stripes, 1);
	ck_assert_uint_eq(st.journal_blocks, 0);
	check_range(&t, 90, 40);
	tvol_free(&t);
}
END_TEST

START_TEST(test_flushed_data_survives_power_cut)
{
	struct tvol t;
	unsigned i;

	rng = 79;
	tvol_make(&t, 4, 2);
	struct za_volume_stats st;

	for (i = 0; i < 40; i++) {
		write_rand(&t, rnd() % (VOL_BLOCKS - 64), 1 + rnd() % 64,
			   false);
		/* Some single synced blocks: the journal path too. */
		if (i % 5 == 0) {
			write_rand(&t, rnd() % VOL_BLOCKS, 1, false);
			ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
		}
	}
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	while (za_volume_busy(t.v) || za_engine_busy(t.e))
		za_io_run_once(t.io);
	/* Nothing is left only in memory: reads below come from drives. */
	za_volume_get_stats(t.v, &st);
	ck_assert_uint_eq(st.buffers, 0);
	ck_assert_uint_gt(st.journal_blocks, 0);
	for (i = 0; i < N; i++)
		ck_assert_int_eq(za_dev_power_cut(t.devs[i]), 0);
	/* Everything acknowledged before the flush reads back exactly. */
	check_range(&t, 0, VOL_BLOCKS);
	tvol_free(&t);
}
END_TEST

START_TEST(test_sequential_fill_map_extents)
{
	struct tvol t;
	struct za_volume_stats st;
	uint64_t lba;

	rng = 80;
	tvol_make(&t, 4, 2);
	for (lba = 0; lba < VOL_BLOCKS; lba += 64)
		write_rand(&t, lba, 64, false);
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	za_volume_get_stats(t.v, &st);
	/* One group of one segment holds 2 MiB zones' worth of stripes:
	 * 8 MiB of data spans a few groups, never one extent per stripe. */
	ck_assert_uint_le(st.map_extents, 8);
	ck_assert_uint_gt(st.data_stripes, 100);
	check_range(&t, 0, VOL_BLOCKS);
	tvol_free(&t);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("volume");
	TCase *tc = tcase_create("volume");

	za_log_set_sink(quiet);
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_random_ops_against_model, 0, 3);
	tcase_add_loop_test(tc, test_crash_recovery, 0, 4);
	tcase_add_test(tc, test_small_sync_writes_use_journal);
	tcase_add_test(tc, test_gc_overwrite);
	if (getenv("ZA_TEST_ONLY_GC")) {
		Suite *g = suite_create("gc");
		TCase *gt = tcase_create("gc");

		tcase_set_timeout(gt, 300);
		tcase_add_test(gt, test_gc_overwrite);
		suite_add_tcase(g, gt);
		return trun(g);
	}
	tcase_add_test(tc, test_partial_buffer_padded_when_cheaper);
	tcase_add_test(tc, test_flushed_data_survives_power_cut);
	tcase_add_test(tc, test_sequential_fill_map_extents);
	suite_add_tcase(s, tc);
	return trun(s);
}
