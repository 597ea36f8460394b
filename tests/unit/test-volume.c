// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test-volume.c - the volume over a real engine on emulated drives with
 * volatile caches: random writes, FUA writes, trims, zeroes and flushes
 * checked byte for byte against an in-memory model; the 4 KiB write +
 * FLUSH loop going to the journal at exactly 2(p+1) device bytes per user
 * byte instead of padded stripes; a partly filled buffer padded when that
 * is cheaper; everything flushed surviving a power cut of every drive
 * (read back from the drives); a sequential fill leaving one map extent
 * per group. Checkpoints: recovery replays only what follows the latest
 * one, a torn one falls back to the one before, crashes at many points
 * (processes killed at crash points) against a model, superseded ones
 * reclaimed by GC, trims kept across checkpoints and GC. Small zones
 * under a deep queue of writes and flushes: GC near its floor, and no
 * data stripe ever runs out of space. A flushed block overwritten while
 * its journal stripe still waits in the engine's queue survives a crash;
 * a stripe a crash tore (one column missing) is completed by recovery.
 * A write za_volume_write_copies() said it would copy at once is never
 * held back, its buffer lent for the call only.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "anchor.h"
#include "byteorder.h"
#include "container.h"
#include "crash.h"
#include "dev-emu.h"
#include "crc.h"
#include "dev.h"
#include "io.h"
#include "log.h"
#include "payload.h"
#include "engine.h"
#include "etab.h"
#include "mpage.h"
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
	/* Geometry; 0: 2 MiB zones (ZNS members: 1.5 MiB capacity), two
	 * rows of 8 KiB chunks. */
	uint64_t zone_bytes, zns_cap_bytes;
	uint32_t chunk_bytes;
	unsigned rows;
	uint64_t vol_blocks; /* 0: VOL_BLOCKS; UINT64_MAX: 85% of capacity */
	uint64_t ckpt_interval; /* za_volume_params.ckpt_interval_bytes */
	unsigned ckpt_window;
	bool recover_full;
	bool prealloc; /* drives whose data the engine stages */
	unsigned idle_gc_ms; /* za_volume_params.idle_gc_ms */
	/*
	 * Checkpoint anchors, kept as an array keeps them in its
	 * superblocks (design.md 9.6): what was last made durable, and the
	 * one in its round. anchor_lose: rounds end but nothing reaches
	 * the drives (a power cut before the superblock writes).
	 */
	bool no_anchor;
	bool anchor_lose;
	uint8_t *anchor_durable; /* shared: a crashed child's is kept */
	uint8_t anchor_next[ZA_ANCHOR_BYTES];
	struct za_io_defer anchor_defer;
	bool anchor_queued; /* anchor_defer waits to run */
	/* Recovery may find the anchor disagreeing (a test tampered). */
	bool anchor_tampered;
	bool no_table_recovery; /* za_volume_params.no_table_recovery */
	bool in_diff; /* tvol_table_diff() is running */
	uint64_t counts_checked; /* by every recovery (version 4 counts) */
	uint64_t lazy_recoveries; /* that loaded the root only (map cache) */
	uint64_t map_cache; /* za_volume_params.map_cache_bytes */
};

/* The superblock round: done on the next loop iteration. */
static void tvol_anchor_round_end(struct za_io_defer *d)
{
	struct tvol *t = container_of(d, struct tvol, anchor_defer);

	t->anchor_queued = false;
	if (!t->anchor_lose)
		memcpy(t->anchor_durable, t->anchor_next, ZA_ANCHOR_BYTES);
	za_volume_anchored(t->v);
}

static void tvol_anchor(void *priv, const uint8_t *rec)
{
	struct tvol *t = priv;

	memcpy(t->anchor_next, rec, ZA_ANCHOR_BYTES);
	if (t->anchor_queued)
		return; /* the round queued carries this one */
	t->anchor_queued = true;
	t->anchor_defer.fn = tvol_anchor_round_end;
	za_io_defer(t->io, &t->anchor_defer);
}

static void tvol_start(struct tvol *t, bool recover);
static void tvol_table_diff(struct tvol *t);

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

static void tvol_init(struct tvol *t, unsigned k, unsigned p,
		      uint64_t drive_bytes, uint64_t vol_blocks)
{
	memset(t, 0, sizeof(*t));
	t->anchor_durable = mmap(NULL, ZA_ANCHOR_BYTES, PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(t->anchor_durable, MAP_FAILED);
	t->k = k;
	t->p = p;
	t->drive_bytes = drive_bytes;
	t->vol_blocks = vol_blocks;
}

/* Drives, engine and volume as tvol_init() and the caller set them. */
static void tvol_create(struct tvol *t)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	struct za_emu_params ep;
	unsigned i;

	snprintf(t->dir, sizeof(t->dir), "%s/za-vol-XXXXXX", tmp);
	ck_assert_ptr_nonnull(mkdtemp(t->dir));
	ck_assert_int_eq(za_io_new(NULL, &t->io), 0);
	for (i = 0; i < N; i++) {
		char path[300];

		snprintf(path, sizeof(path), "%s/d%u", t->dir, i);
		za_emu_params_default(&ep, i % 2 ? ZA_DEV_MODEL_ZNS :
						   ZA_DEV_MODEL_HM_SMR);
		ep.size_bytes = t->drive_bytes ? t->drive_bytes : 64ull << 20;
		ep.zone_size_bytes = t->zone_bytes ? t->zone_bytes : 2ull << 20;
		ep.zone_cap_bytes = 0;
		if (i % 2)
			ep.zone_cap_bytes = t->zns_cap_bytes ?
						    t->zns_cap_bytes :
						    3ull << 19;
		ep.nr_conv_zones = 0;
		ep.cache_bytes = 4ull << 20; /* volatile: power cuts bite */
		ep.prealloc = t->prealloc;
		ck_assert_int_eq(za_emu_create(path, &ep, true), 0);
		ck_assert_int_eq(za_dev_open(t->io, path, 0, &t->devs[i]), 0);
		t->states[i] = ZA_MEMBER_ONLINE;
	}
	ck_assert_int_eq(za_uuid_gen(&t->uuid), 0);
	tvol_start(t, false);
	t->model = calloc(t->vol_blocks, 4096);
	ck_assert_ptr_nonnull(t->model);
}

static void tvol_make_sized(struct tvol *t, unsigned k, unsigned p,
			    uint64_t drive_bytes, uint64_t vol_blocks)
{
	tvol_init(t, k, p, drive_bytes, vol_blocks);
	tvol_create(t);
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
	prm.geom.stripe_rows = (uint8_t)(t->rows ? t->rows : 2);
	prm.geom.chunk_bytes = t->chunk_bytes ? t->chunk_bytes : 8192;
	prm.geom.lblock_bytes = 4096;
	prm.geom.hdr_bytes = 4096;
	prm.array_uuid = t->uuid;
	prm.nr_members = N;
	prm.devs = t->devs;
	prm.states = t->states;
	prm.next_seq = 1;
	prm.next_seg_id = 1;
	/* Recovery with the zone reports of the start kept, as assembly
	 * does (test-engine.c's recover without: they report again). */
	prm.recover = recover;
	ck_assert_int_eq(za_engine_new(t->io, &prm, &t->e), 0);
	vp.eng = t->e;
	if (t->vol_blocks == UINT64_MAX)
		t->vol_blocks = za_volume_default_size(t->e) / 4096;
	vp.size_bytes = t->vol_blocks * 4096;
	vp.ckpt_interval_bytes = t->ckpt_interval;
	vp.ckpt_window = t->ckpt_window;
	vp.recover_full = t->recover_full;
	vp.idle_gc_ms = t->idle_gc_ms;
	vp.no_table_recovery = t->no_table_recovery;
	vp.map_cache_bytes = t->map_cache;
	if (!t->no_anchor) {
		vp.anchor = tvol_anchor;
		vp.anchor_priv = t;
		vp.anchor_rec = t->anchor_durable;
	}
	ck_assert_int_eq(za_volume_new(t->io, &vp, &t->v), 0);
	if (recover) {
		struct za_volume_stats st;

		ck_assert_int_eq(za_volume_recover(t->v), 0);
		/*
		 * Every recovery of every test: the engine table that came
		 * with the checkpoint says what the drives say (what may
		 * change since it was written aside), before recovery comes
		 * to rest on it (design.md 9.6).
		 */
		za_volume_get_stats(t->v, &st);
		ck_assert_msg(st.etab_mismatches == 0,
			      "the engine table disagrees with the drives "
			      "(%llu mismatches; ZA_TEST_LOG=1 says where)",
			      (unsigned long long)st.etab_mismatches);
		/* And the checkpoint loaded is the one the anchor names,
		 * where it says. */
		ck_assert_msg(t->anchor_tampered || st.anchor_mismatches == 0,
			      "the checkpoint anchor disagrees with the drives "
			      "(%llu mismatches; ZA_TEST_LOG=1 says where)",
			      (unsigned long long)st.anchor_mismatches);
		/* The counts a checkpoint keeps (version 4), carried
		 * through the replay, are what the whole map says. */
		ck_assert_msg(st.recovery_count_mismatches == 0,
			      "the checkpoint's counts disagree with the map "
			      "(%llu of %llu groups; ZA_TEST_LOG=1 says which)",
			      (unsigned long long)st.recovery_count_mismatches,
			      (unsigned long long)st.recovery_counts_checked);
		t->counts_checked += st.recovery_counts_checked;
		/* Loaded by its root (the map cache): the counters are the
		 * checkpoint's and the replay's, unchecked by recovery;
		 * here against the whole map. */
		if (!za_volume_map_whole(t->v)) {
			uint64_t checked, bad;

			ck_assert_int_eq(
				za_volume_recount(t->v, &checked, &bad), 0);
			ck_assert_msg(bad == 0,
				      "counters after a recovery by the "
				      "root disagree with the map (%llu of "
				      "%llu groups; ZA_TEST_LOG=1 says "
				      "which)",
				      (unsigned long long)bad,
				      (unsigned long long)checked);
			t->counts_checked += checked;
			t->lazy_recoveries++;
		}
		/* Resting on the table must build what reading every zone
		 * builds. */
		if (st.recovery_table && !t->in_diff)
			tvol_table_diff(t);
	}
}

/* The groups and segments of an engine table, decoded (dead columns are
 * marked again after every recovery: not compared). */
struct tab_recs {
	struct za_etab_group *g;
	struct za_etab_seg *s;
	size_t ng, ns;
};

static void tab_recs_get(struct za_engine *e, struct tab_recs *r)
{
	struct za_etab_part *p = malloc(sizeof(*p));
	uint8_t *b;
	uint32_t n, snap, i, j;

	ck_assert_ptr_nonnull(p);
	memset(r, 0, sizeof(*r));
	ck_assert_int_eq(za_engine_table_encode(e, 1, 1, &b, &n, &snap), 0);
	for (i = 0; i < n; i++) {
		ck_assert_int_eq(za_etab_block_decode(
					 b + (size_t)i * ZA_ETAB_BLOCK_BYTES,
					 ZA_ETAB_BLOCK_BYTES, p),
				 0);
		r->g = realloc(r->g,
			       (r->ng + p->nr_groups + 1) * sizeof(*r->g));
		r->s = realloc(r->s, (r->ns + p->nr_segs + 1) * sizeof(*r->s));
		ck_assert(r->g && r->s);
		for (j = 0; j < p->nr_groups; j++)
			r->g[r->ng++] = p->groups[j];
		for (j = 0; j < p->nr_segs; j++) {
			r->s[r->ns] = p->segs[j];
			r->s[r->ns++].dead_cols = 0;
		}
	}
	free(b);
	free(p);
}

/*
 * Recovery rested on the engine table (design.md 9.6 item 4): recover
 * the same drives again reading every zone, and compare what the two
 * built - every group and segment, column by column - then come back as
 * the test left it (a third recovery, resting on the table again).
 */
static void tvol_table_diff(struct tvol *t)
{
	struct tab_recs a, b;
	bool was_open[N];
	char path[300];
	unsigned i, pass;
	size_t j;

	tab_recs_get(t->e, &a);
	t->in_diff = true;
	for (pass = 0; pass < 2; pass++) {
		while (za_volume_busy(t->v) || za_engine_busy(t->e))
			za_io_run_once(t->io);
		za_volume_free(t->v);
		za_engine_free(t->e);
		for (i = 0; i < N; i++) {
			was_open[i] = t->devs[i] != NULL;
			if (t->devs[i])
				za_dev_close(t->devs[i]);
			t->devs[i] = NULL;
			if (!was_open[i])
				continue;
			snprintf(path, sizeof(path), "%s/d%u", t->dir, i);
			ck_assert_int_eq(
				za_dev_open(t->io, path, 0, &t->devs[i]), 0);
		}
		t->no_table_recovery = pass == 0;
		tvol_start(t, true);
		if (pass == 0)
			tab_recs_get(t->e, &b);
	}
	t->no_table_recovery = false;
	t->in_diff = false;
	ck_assert_uint_eq(a.ng, b.ng);
	for (j = 0; j < a.ng; j++)
		ck_assert_msg(a.g[j].id == b.g[j].id &&
				      a.g[j].next_pos == b.g[j].next_pos &&
				      a.g[j].nr_stripes == b.g[j].nr_stripes &&
				      a.g[j].w == b.g[j].w &&
				      a.g[j].stream == b.g[j].stream,
			      "group %llu/%llu: the table-based recovery "
			      "built it otherwise (next_pos %llu, full scan "
			      "%llu)",
			      (unsigned long long)a.g[j].id,
			      (unsigned long long)b.g[j].id,
			      (unsigned long long)a.g[j].next_pos,
			      (unsigned long long)b.g[j].next_pos);
	ck_assert_uint_eq(a.ns, b.ns);
	for (j = 0; j < a.ns; j++) {
		const struct za_etab_seg *x = &a.s[j], *y = &b.s[j];
		unsigned c;

		ck_assert_msg(
			x->id == y->id && x->group_id == y->group_id &&
				x->next_stripe == y->next_stripe &&
				x->grp_idx == y->grp_idx &&
				x->width == y->width && x->flags == y->flags,
			"segment %llu/%llu: the table-based recovery "
			"built it otherwise (next_stripe %u/%u, flags "
			"%u/%u)",
			(unsigned long long)x->id, (unsigned long long)y->id,
			x->next_stripe, y->next_stripe, x->flags, y->flags);
		for (c = 0; c < x->width; c++)
			ck_assert_msg(x->col[c].member == y->col[c].member &&
					      x->col[c].zone ==
						      y->col[c].zone &&
					      x->col[c].hdr_member ==
						      y->col[c].hdr_member &&
					      x->col[c].hdr_zone ==
						      y->col[c].hdr_zone &&
					      x->col[c].upto == y->col[c].upto,
				      "segment %llu column %u: member %u zone "
				      "%u upto %u; full scan: member %u zone "
				      "%u upto %u",
				      (unsigned long long)x->id, c,
				      x->col[c].member, x->col[c].zone,
				      x->col[c].upto, y->col[c].member,
				      y->col[c].zone, y->col[c].upto);
	}
	free(a.g);
	free(a.s);
	free(b.g);
	free(b.s);
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
	munmap(t->anchor_durable, ZA_ANCHOR_BYTES);
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

/*
 * The volume's live counters (what GC keeps) against the model: once
 * nothing is in flight - buffers flushed, no victim half moved - they
 * must count exactly the blocks that hold data (written, not trimmed or
 * zeroed; random data is never a whole zero block).
 */
static void check_live(struct tvol *t, uint64_t blocks)
{
	struct za_volume_stats st;
	uint64_t b, live = 0;

	while (za_volume_busy(t->v))
		za_io_run_once(t->io);
	for (b = 0; b < blocks; b++) {
		const uint64_t *w = (const uint64_t *)(t->model + b * 4096);
		unsigned i;

		for (i = 0; i < 4096 / 8 && !w[i]; i++)
			;
		live += i < 4096 / 8;
	}
	za_volume_get_stats(t->v, &st);
	ck_assert_uint_eq(st.live_blocks, live);
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
	check_live(&t, VOL_BLOCKS);
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
	/* Every victim's live blocks were found from its stripe headers. */
	ck_assert_uint_eq(st.gc_map_searches, 0);
	check_live(&t, vb);
	tvol_crash_and_recover(&t, 0);
	check_range(&t, 0, vb);
	check_live(&t, vb);
	tvol_free(&t);
}
END_TEST

/*
 * GC as a job: the overwrite of test_gc_overwrite with GC paused (_i 0)
 * or rate-limited (_i 1), then an idle spell. Below GC's start point
 * (foreground GC, writes waiting) neither holds it: the overwrite runs
 * GC, completes, and every block reads back. Above it they hold GC's
 * background work: paused, idle GC starts no victim and the job says
 * paused throughout, until resumed; rate-limited, idle GC's reads wait
 * for the limit (throttled) and the limit is shown. The job's progress
 * counts no more than the blocks GC moved.
 */
START_TEST(test_gc_job)
{
	const bool paused = _i == 0;
	const uint64_t rate = 2ull << 20;
	struct za_volume_stats st, st2;
	struct za_job_progress pr;
	uint64_t vb, lba, written = 0, fill;
	bool never = false;
	struct tvol t;

	rng = 4343 + (uint64_t)_i;
	tvol_init(&t, 4, 2, 24ull << 20, UINT64_MAX);
	t.idle_gc_ms = 10;
	tvol_create(&t);
	vb = t.vol_blocks;
	fill = vb * 80 / 100;
	for (lba = 0; lba + 16 <= fill; lba += 16)
		write_rand(&t, lba, 16, false);
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	za_volume_gc_progress(t.v, &pr);
	ck_assert_int_eq(pr.state, ZA_JOB_IDLE); /* nothing to collect yet */
	if (paused)
		za_volume_gc_pause(t.v);
	else
		za_volume_gc_set_rate(t.v, rate);
	while (written < 2 * fill) {
		uint64_t n = 1 + rnd() % 16;

		write_rand(&t, rnd() % (fill - n), n, false);
		if (rnd() % 20 == 0)
			ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
		written += n;
		if (paused) {
			za_volume_gc_progress(t.v, &pr);
			ck_assert_int_eq(pr.state, ZA_JOB_PAUSED);
		}
	}
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	while (za_volume_busy(t.v) || za_engine_busy(t.e))
		za_io_run_once(t.io);
	za_volume_get_stats(t.v, &st);
	ck_assert_uint_gt(st.gc_runs, 0); /* foreground GC ran */

	/* An idle spell. */
	za_io_run_until(t.io, &never, 500000000);
	while (za_volume_busy(t.v) || za_engine_busy(t.e))
		za_io_run_once(t.io);
	za_volume_get_stats(t.v, &st2);
	za_volume_gc_progress(t.v, &pr);
	ck_assert_uint_le(pr.done_bytes, st2.gc_moved_blocks * 4096);
	if (paused) {
		ck_assert_uint_eq(st2.gc_idle_runs, st.gc_idle_runs);
		ck_assert_int_eq(pr.state, ZA_JOB_PAUSED);
		za_volume_gc_resume(t.v);
		za_volume_gc_progress(t.v, &pr);
		ck_assert_int_ne(pr.state, ZA_JOB_PAUSED);
	} else {
		ck_assert_uint_gt(st2.gc_idle_runs, st.gc_idle_runs);
		ck_assert_uint_eq(pr.rate_limit_bps, rate);
		ck_assert_uint_gt(pr.throttled, 0);
	}
	while (za_volume_busy(t.v) || za_engine_busy(t.e))
		za_io_run_once(t.io);
	check_range(&t, 0, vb);
	check_live(&t, vb);
	tvol_free(&t);
}
END_TEST

/* The first half of the volume written twice: half of what it took is
 * garbage for GC. */
static void overwrite_half(struct tvol *t)
{
	uint64_t lba, half = t->vol_blocks / 2;
	unsigned pass;

	for (pass = 0; pass < 2; pass++)
		for (lba = 0; lba + 16 <= half; lba += 16)
			write_rand(t, lba, 16, false);
}

/*
 * Zone quarantine across a crash (docs/design.md 9.6): GC releases a group
 * that the live checkpoint's engine table names; its zones wait in
 * quarantine. zarrayd is killed before another checkpoint: recovery
 * loads that same table, finds the group gone and its places empty, and
 * quarantines them again, until the next checkpoint is live. Every
 * recovery checks that no place the table gives was written by another
 * segment (tvol_start()), and the data reads back throughout.
 */
START_TEST(test_quarantine_across_crash)
{
	struct za_volume_stats st0, st;
	struct za_engine_space sp0, sp1;
	uint64_t vb;
	struct tvol t;

	rng = 4700;
	tvol_init(&t, 4, 2, 24ull << 20, UINT64_MAX);
	t.idle_gc_ms = 10;
	t.ckpt_interval = UINT64_MAX; /* only the ones asked for */
	tvol_create(&t);
	vb = t.vol_blocks;
	overwrite_half(&t);
	ck_assert_int_eq(za_volume_checkpoint_sync(t.v), 0);
	za_volume_get_stats(t.v, &st0);
	ck_assert_uint_eq(st0.quarantined_zones, 0);
	/* Idle: GC takes a victim, and its zones go into quarantine. */
	do {
		za_io_run_once(t.io);
		za_volume_get_stats(t.v, &st);
	} while (st.gc_freed_groups == st0.gc_freed_groups ||
		 !st.quarantined_zones);
	za_volume_gc_stop(t.v); /* and no checkpoint to end it */
	ck_assert_uint_eq(st.checkpoints, st0.checkpoints);
	tvol_crash_and_recover(&t, 0);
	za_volume_get_stats(t.v, &st);
	ck_assert_msg(st.quarantined_zones > 0,
		      "recovery put none of the released group's places back "
		      "into quarantine");
	check_range(&t, 0, vb);
	za_engine_space(t.e, &sp0);
	ck_assert_int_eq(za_volume_checkpoint_sync(t.v), 0);
	za_volume_get_stats(t.v, &st);
	za_engine_space(t.e, &sp1);
	ck_assert_uint_eq(st.quarantined_zones, 0);
	ck_assert_uint_ge(sp1.free_zones, sp0.free_zones);
	tvol_crash_and_recover(&t, 0);
	check_range(&t, 0, vb);
	tvol_free(&t);
}
END_TEST

/*
 * GC while idle: half the volume written twice leaves the first copy's
 * groups dead, with free space above GC's start point, so foreground GC
 * leaves them be. A volume left idle then releases them (_i 1) - more
 * free segments, nothing lost, and it stops short of churning: a second
 * idle spell finds nothing more to do - while one that does not GC when
 * idle (_i 0) stays as it was. Requests during a spell hold it back: a
 * tick that saw one starts no victim. And recovery is never a spell.
 */
START_TEST(test_gc_idle)
{
	const bool idle = _i == 1;
	struct za_volume_stats st0, st1, st2;
	struct za_engine_space sp0, sp1, sp2;
	uint64_t vb, lba, half;
	bool never = false;
	struct tvol t;
	unsigned pass;

	rng = 4300 + (uint64_t)_i;
	tvol_init(&t, 4, 2, 24ull << 20, UINT64_MAX);
	t.idle_gc_ms = idle ? 10 : 0;
	tvol_create(&t);
	vb = t.vol_blocks;
	half = vb / 2;
	overwrite_half(&t);
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	za_volume_get_stats(t.v, &st0);
	za_engine_space(t.e, &sp0);

	/* Busy: a read every 2 ms for 100 ms starts nothing. */
	for (pass = 0; pass < 50; pass++) {
		check_range(&t, rnd() % (vb - 1), 1);
		za_io_run_until(t.io, &never, 2000000);
	}
	za_volume_get_stats(t.v, &st1);
	ck_assert_uint_eq(st1.gc_idle_runs, 0);

	/* Idle for 300 ms. */
	za_io_run_until(t.io, &never, 300000000);
	while (za_volume_busy(t.v) || za_engine_busy(t.e))
		za_io_run_once(t.io);
	za_volume_get_stats(t.v, &st1);
	za_engine_space(t.e, &sp1);
	if (idle) {
		ck_assert_uint_gt(st1.gc_idle_runs, 0);
		ck_assert_uint_gt(st1.gc_freed_groups, st0.gc_freed_groups);
		ck_assert_uint_gt(sp1.free_segs, sp0.free_segs);
	} else {
		ck_assert_uint_eq(st1.gc_runs, st0.gc_runs);
		ck_assert_uint_eq(sp1.free_segs, sp0.free_segs);
	}
	check_range(&t, 0, vb);

	/* A second spell: what was worth moving was moved. */
	za_io_run_until(t.io, &never, 200000000);
	while (za_volume_busy(t.v) || za_engine_busy(t.e))
		za_io_run_once(t.io);
	za_volume_get_stats(t.v, &st2);
	za_engine_space(t.e, &sp2);
	ck_assert_uint_eq(st2.gc_runs, st1.gc_runs);
	ck_assert_uint_eq(sp2.free_segs, sp1.free_segs);

	/*
	 * A restart with stripes to replay, ticking every millisecond:
	 * nothing is collected before the volume serves. A timer armed with
	 * the volume ticked during recovery, when groups whose live
	 * counters were not built yet looked dead, and released them.
	 */
	for (lba = 0; lba + 16 <= half; lba += 16)
		write_rand(&t, lba, 16, false);
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	t.idle_gc_ms = idle ? 1 : 0;
	tvol_crash_and_recover(&t, 0);
	za_volume_get_stats(t.v, &st2);
	ck_assert_uint_eq(st2.gc_runs, 0);
	check_range(&t, 0, vb);
	tvol_free(&t);
}
END_TEST

/* A payload the caller keeps for the volume: counts what it is told. */
struct tpayload {
	struct za_payload pl;
	unsigned released;
};

static void tpayload_release(struct za_payload *pl)
{
	((struct tpayload *)pl)->released++;
}

/*
 * za_volume_write_ref(): a payload at an odd address (as in a receive
 * ring), two and a half stripes long, is referred to, not copied. It
 * reads back while referred to; the references are dropped once its
 * stripes are written (after a flush), and a let-go drops the open
 * buffer's at once; what reads back after the caller scribbles over its
 * bytes is what was written - the drives hold it, not the payload.
 */
START_TEST(test_write_ref_payload)
{
	struct tvol t;
	struct tpayload tp = { .pl = { .refs = 1,
				       .release = tpayload_release } };
	struct done_flag d = { 0 };
	struct za_vol_req r = { .done = on_done, .priv = &d };
	uint64_t stripe_blocks, n, i;
	uint8_t *mem, *buf;

	rng = 91;
	/* Preallocated drives take the blocks straight from the payload
	 * (staging); the others have them copied into the stripe buffer. */
	tvol_init(&t, _i % 2 ? 6 : 4, _i % 2 ? 3 : 2, 0, VOL_BLOCKS);
	t.prealloc = _i >= 2;
	tvol_create(&t);
	stripe_blocks = za_engine_layout(t.e)->data_blocks;
	n = stripe_blocks * 5 / 2;
	mem = malloc(n * 4096 + 64);
	ck_assert_ptr_nonnull(mem);
	buf = mem + 3;
	for (i = 0; i < n * 4096 / 8; i++) {
		uint64_t x = rnd();

		memcpy(buf + 8 * i, &x, 8);
	}
	za_volume_write_ref(t.v, &r, 4096 * 7, n * 4096, buf, false, &tp.pl);
	za_io_run_until(t.io, &d.done, 0);
	ck_assert_int_eq(d.result, 0);
	memcpy(t.model + 4096 * 7, buf, n * 4096);
	/* Three buffers refer to it: two submitted, one open. */
	ck_assert_uint_eq(tp.pl.refs, 4);
	check_range(&t, 0, 7 + n + 5);
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	ck_assert_uint_eq(tp.pl.refs, 1);
	memset(buf, 0xa5, n * 4096);
	check_range(&t, 0, 7 + n + 5);

	/* Half a stripe waits in the open buffer until let go. */
	d.done = false;
	za_volume_write_ref(t.v, &r, 0, 4096 * (stripe_blocks / 2), buf, false,
			    &tp.pl);
	za_io_run_until(t.io, &d.done, 0);
	ck_assert_int_eq(d.result, 0);
	memcpy(t.model, buf, 4096 * (stripe_blocks / 2));
	ck_assert_uint_eq(tp.pl.refs, 2);
	za_volume_let_go(t.v);
	ck_assert_uint_eq(tp.pl.refs, 1);
	memset(buf, 0x5a, 4096 * (stripe_blocks / 2));
	check_range(&t, 0, stripe_blocks);
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	check_range(&t, 0, 7 + n + 5);
	ck_assert_uint_eq(tp.released, 0);
	free(mem);
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

/* ---- checkpoints ---- */

/* The engine stream of checkpoint parts: data 0, journal 1, then this. */
#define CKPT_STREAM 2u

/* Let go of volume, engine and drives, files kept, as an exit would. */
static void tvol_close(struct tvol *t)
{
	unsigned i;

	while (za_volume_busy(t->v) || za_engine_busy(t->e))
		za_io_run_once(t->io);
	za_volume_free(t->v);
	za_engine_free(t->e);
	t->v = NULL;
	t->e = NULL;
	for (i = 0; i < N; i++) {
		if (t->devs[i])
			za_dev_close(t->devs[i]);
		t->devs[i] = NULL;
	}
}

/* Open the drives again (after a power cut, if asked) and recover. */
static void tvol_open(struct tvol *t, bool power_cut)
{
	char path[300];
	unsigned i;

	for (i = 0; i < N; i++) {
		snprintf(path, sizeof(path), "%s/d%u", t->dir, i);
		ck_assert_int_eq(za_dev_open(t->io, path, 0, &t->devs[i]), 0);
		if (power_cut)
			ck_assert_int_eq(za_dev_power_cut(t->devs[i]), 0);
	}
	tvol_start(t, true);
}

/*
 * Run @fn in a child process over the volume's drives with crash point
 * @spec armed, and return its exit status: ZA_CRASH_EXIT when it died
 * there (as if SIGKILLed: what it wrote stays in the drive files, caches
 * included), 0 when it ran to the end. The parent's volume is closed
 * first; the caller opens it again. The child has a loop of its own.
 */
/* A volume that writes checkpoints only when asked (za_volume_checkpoint):
 * recovery replays everything after the last one a test wrote. */
static void tvol_make_manual_ckpt(struct tvol *t, unsigned k, unsigned p)
{
	tvol_make(t, k, p);
	t->ckpt_interval = UINT64_MAX;
	tvol_close(t);
	tvol_open(t, false);
}

static int run_child(struct tvol *t, const char *spec,
		     void (*fn)(struct tvol *t, void *arg), void *arg)
{
	pid_t pid;
	int status;

	tvol_close(t);
	fflush(NULL);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (za_io_new(NULL, &t->io))
			_exit(2);
		tvol_open(t, false);
		if (za_crash_arm(spec))
			_exit(3);
		fn(t, arg);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status), "the child was killed by signal %d",
		      WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	return WEXITSTATUS(status);
}

static uint64_t stripes_written(struct tvol *t)
{
	struct za_volume_stats st;

	za_volume_get_stats(t->v, &st);
	return st.data_stripes + st.journal_blocks;
}

/* The anchor the superblocks would hold now. */
static void durable_anchor(const struct tvol *t, struct za_anchor *a)
{
	ck_assert_int_eq(za_anchor_decode(t->anchor_durable, a), 0);
}

static void write_some(struct tvol *t, unsigned n)
{
	unsigned i;

	for (i = 0; i < n; i++) {
		uint64_t len = 1 + rnd() % 40, a = rnd() % (VOL_BLOCKS - len);

		write_rand(t, a, len, false);
	}
	ck_assert_int_eq(za_volume_flush_sync(t->v), 0);
}

/*
 * A checkpoint is live only once its anchor is durable (design.md 9.6):
 * the anchor names it and where its parts are; a crash after its flush
 * but before its superblock round finds the previous one, loads that,
 * not the newer, and replays the rest - the same data either way. Its
 * id is not used again.
 */
START_TEST(test_anchor_names_live_checkpoint)
{
	struct za_volume_stats st;
	struct za_anchor a1, a2, a3;
	uint64_t seq1, seq2;
	struct tvol t;
	unsigned i;

	rng = 640;
	tvol_make_manual_ckpt(&t, 4, 2);
	write_some(&t, 200);
	ck_assert_int_eq(za_volume_checkpoint_sync(t.v), 0);
	za_volume_get_stats(t.v, &st);
	ck_assert(st.anchored);
	ck_assert_uint_eq(st.anchors, 1);
	seq1 = st.checkpoint_seq;
	durable_anchor(&t, &a1);
	ck_assert_uint_ge(a1.ckpt_id, 1);
	ck_assert_uint_eq(a1.seq, seq1);
	ck_assert_uint_eq(a1.nr_parts, st.checkpoint_blocks);
	ck_assert_uint_eq(a1.flags, 0);
	ck_assert_uint_ge(a1.nr_segs, 1);
	for (i = 0; i < a1.nr_segs; i++)
		ck_assert_uint_eq(a1.segs[i].width, 3); /* k = 1, p = 2 */

	/* The next one's superblock round never reaches the drives. */
	write_some(&t, 200);
	t.anchor_lose = true;
	ck_assert_int_eq(za_volume_checkpoint_sync(t.v), 0);
	za_volume_get_stats(t.v, &st);
	seq2 = st.checkpoint_seq;
	ck_assert_uint_gt(seq2, seq1);
	t.anchor_lose = false;
	tvol_crash_and_recover(&t, 0);
	za_volume_get_stats(t.v, &st);
	ck_assert_uint_eq(st.checkpoint_seq, seq1);
	ck_assert(st.anchored);
	ck_assert_uint_gt(st.recovered_stripes, 0);
	check_range(&t, 0, VOL_BLOCKS);

	/* Checkpoints go on after it, with new ids. */
	write_some(&t, 50);
	ck_assert_int_eq(za_volume_checkpoint_sync(t.v), 0);
	durable_anchor(&t, &a2);
	ck_assert_uint_ge(a2.ckpt_id, a1.ckpt_id + 2);
	ck_assert_uint_eq(a2.generation, a1.generation + 1);
	tvol_crash_and_recover(&t, 0);
	za_volume_get_stats(t.v, &st);
	ck_assert_uint_eq(st.checkpoint_seq, a2.seq);
	ck_assert_uint_eq(st.recovered_stripes, 0);
	durable_anchor(&t, &a3);
	ck_assert(za_anchor_same(&a2, &a3));
	check_range(&t, 0, VOL_BLOCKS);
	tvol_free(&t);
}
END_TEST

/*
 * Resting on the anchored checkpoint's engine table, recovery reads the
 * zones written since the checkpoint and no others: after a large write
 * and a checkpoint, a few more writes and a crash, it reads a fraction of
 * the headers a recovery reading every zone reads, and the same data
 * comes back (design.md 9.6 item 4).
 */
START_TEST(test_table_recovery_reads_little)
{
	struct za_volume_stats st;
	uint64_t tab_hdrs, tab_zones;
	struct tvol t;

	rng = 670;
	tvol_make_manual_ckpt(&t, 4, 2);
	write_some(&t, 400);
	ck_assert_int_eq(za_volume_checkpoint_sync(t.v), 0);
	write_some(&t, 10);
	tvol_crash_and_recover(&t, 0);
	za_volume_get_stats(t.v, &st);
	ck_assert(st.recovery_table);
	ck_assert_uint_gt(st.recovery_table_segs, 0);
	ck_assert_uint_gt(st.recovered_stripes, 0);
	tab_hdrs = st.recovery_hdr_reads;
	tab_zones = st.recovery_zones;
	check_range(&t, 0, VOL_BLOCKS);

	/* The same drives, every zone read. */
	tvol_close(&t);
	t.no_table_recovery = true;
	tvol_open(&t, false);
	t.no_table_recovery = false;
	za_volume_get_stats(t.v, &st);
	ck_assert(!st.recovery_table);
	ck_assert_uint_eq(st.recovery_table_segs, 0);
	ck_assert_msg(tab_hdrs * 4 < st.recovery_hdr_reads,
		      "from the table %llu headers (%llu zones), reading every "
		      "zone %llu (%llu)",
		      (unsigned long long)tab_hdrs,
		      (unsigned long long)tab_zones,
		      (unsigned long long)st.recovery_hdr_reads,
		      (unsigned long long)st.recovery_zones);
	ck_assert_uint_lt(tab_zones, st.recovery_zones);
	check_range(&t, 0, VOL_BLOCKS);
	tvol_free(&t);
}
END_TEST

/* Rewrite the durable anchor through @fn and recover. */
static void recover_tampered(struct tvol *t, void (*fn)(struct za_anchor *a),
			     uint64_t want_mismatches)
{
	struct za_volume_stats st;
	struct za_anchor a;

	durable_anchor(t, &a);
	fn(&a);
	ck_assert_int_eq(za_anchor_encode(&a, t->anchor_durable), 0);
	t->anchor_tampered = true;
	tvol_crash_and_recover(t, 0);
	t->anchor_tampered = false;
	za_volume_get_stats(t->v, &st);
	ck_assert_uint_eq(st.anchor_mismatches, want_mismatches);
	check_range(t, 0, VOL_BLOCKS);
}

static void anchor_other_ckpt(struct za_anchor *a)
{
	a->ckpt_id += 1000; /* never written */
}

static void anchor_other_seq(struct za_anchor *a)
{
	a->seq--;
}

static void anchor_other_stripe(struct za_anchor *a)
{
	a->segs[0].first_stripe++;
}

static void anchor_other_seg(struct za_anchor *a)
{
	a->segs[0].seg_id += 1000;
}

static void anchor_revoked(struct za_anchor *a)
{
	a->flags |= ZA_ANCHOR_REVOKED;
}

/*
 * An anchor that disagrees with the drives is told apart and counted,
 * and recovery still loads a checkpoint that is whole (nothing is lost);
 * a revoked one (the quarantine freed early) leaves the engine table
 * unchecked, and is no mismatch.
 */
START_TEST(test_anchor_mismatch_counted)
{
	static void (*const tamper[])(struct za_anchor *) = {
		anchor_other_ckpt, anchor_other_seq, anchor_other_stripe,
		anchor_other_seg,  anchor_revoked,
	};
	struct za_volume_stats st;
	struct tvol t;

	rng = 650 + (uint64_t)_i;
	tvol_make_manual_ckpt(&t, 4, 2);
	write_some(&t, 150);
	ck_assert_int_eq(za_volume_checkpoint_sync(t.v), 0);
	write_some(&t, 50);
	recover_tampered(&t, tamper[_i], tamper[_i] == anchor_revoked ? 0 : 1);
	za_volume_get_stats(t.v, &st);
	if (tamper[_i] == anchor_revoked)
		ck_assert_uint_eq(st.etab_segments, 0); /* not checked */
	else
		ck_assert(tamper[_i] == anchor_other_ckpt ||
			  st.etab_segments > 0);
	tvol_free(&t);
}
END_TEST

/* A volume with no superblock to anchor in: live at the flush, as before. */
START_TEST(test_anchor_none)
{
	struct za_volume_stats st;
	struct tvol t;

	rng = 660;
	tvol_init(&t, 4, 2, 0, VOL_BLOCKS);
	t.no_anchor = true;
	t.ckpt_interval = UINT64_MAX;
	tvol_create(&t);
	write_some(&t, 100);
	ck_assert_int_eq(za_volume_checkpoint_sync(t.v), 0);
	za_volume_get_stats(t.v, &st);
	ck_assert(!st.anchored);
	ck_assert_uint_eq(st.anchors, 0);
	ck_assert_uint_eq(st.checkpoints, 1);
	tvol_crash_and_recover(&t, 0);
	za_volume_get_stats(t.v, &st);
	ck_assert_uint_gt(st.checkpoint_seq, 0);
	ck_assert_uint_eq(st.recovered_stripes, 0);
	check_range(&t, 0, VOL_BLOCKS);
	tvol_free(&t);
}
END_TEST

/*
 * After a checkpoint, recovery replays exactly the stripes written after
 * it; a checkpoint at a clean stop leaves nothing to replay; a full
 * replay (checkpoints ignored) reads the same data back.
 */
START_TEST(test_checkpoint_bounds_replay)
{
	struct za_volume_stats st;
	uint64_t seq, before, after, all;
	struct tvol t;
	unsigned i;

	rng = 600 + (uint64_t)_i;
	tvol_make_manual_ckpt(&t, 4, 2);
	for (i = 0; i < 300; i++) {
		uint64_t n = 1 + rnd() % 40, a = rnd() % (VOL_BLOCKS - n);

		if (i % 25 == 7) {
			ck_assert_int_eq(unmap_sync(&t, a, n, i & 1), 0);
			memset(t.model + a * 4096, 0, n * 4096);
		} else {
			write_rand(&t, a, n, false);
		}
	}
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	all = stripes_written(&t);
	ck_assert_int_eq(za_volume_checkpoint_sync(t.v), 0);
	za_volume_get_stats(t.v, &st);
	ck_assert_uint_eq(st.checkpoints, 1);
	ck_assert_uint_gt(st.checkpoint_blocks, 0);
	seq = st.checkpoint_seq;
	ck_assert_uint_gt(seq, 0);
	/* Nothing written since: no second checkpoint. */
	ck_assert_int_eq(za_volume_checkpoint_sync(t.v), 0);
	za_volume_get_stats(t.v, &st);
	ck_assert_uint_eq(st.checkpoints, 1);
	before = stripes_written(&t);
	for (i = 0; i < 12 + (unsigned)_i * 20; i++) {
		uint64_t n = 1 + rnd() % 20, a = rnd() % (VOL_BLOCKS - n);

		write_rand(&t, a, n, i % 5 == 0);
	}
	ck_assert_int_eq(unmap_sync(&t, 10, 30, false), 0);
	memset(t.model + 10 * 4096, 0, 30 * 4096);
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	after = stripes_written(&t) - before;
	all += after;
	ck_assert_uint_gt(after, 0);

	tvol_crash_and_recover(&t, 0);
	za_volume_get_stats(t.v, &st);
	ck_assert_uint_eq(st.checkpoint_seq, seq);
	ck_assert_uint_eq(st.recovered_stripes, after);
	/* The checkpoint's engine table was read and compared. */
	ck_assert_uint_gt(st.etab_segments, 0);
	check_range(&t, 0, VOL_BLOCKS);

	/* Everything, checkpoints ignored: the same data. */
	t.recover_full = true;
	tvol_crash_and_recover(&t, 0);
	za_volume_get_stats(t.v, &st);
	ck_assert_uint_eq(st.checkpoint_seq, 0);
	ck_assert_uint_ge(st.recovered_stripes, all);
	check_range(&t, 0, VOL_BLOCKS);

	/* A clean stop writes one: the next start replays nothing. */
	t.recover_full = false;
	ck_assert_int_eq(za_volume_checkpoint_sync(t.v), 0);
	za_volume_get_stats(t.v, &st);
	seq = st.checkpoint_seq;
	ck_assert_uint_eq(st.checkpoints, 1);
	tvol_crash_and_recover(&t, 0);
	za_volume_get_stats(t.v, &st);
	ck_assert_uint_eq(st.checkpoint_seq, seq);
	ck_assert_uint_eq(st.recovered_stripes, 0);
	check_range(&t, 0, VOL_BLOCKS);
	tvol_free(&t);
}
END_TEST

/* ---- incremental checkpoints (design.md 9.7) ---- */

#define CKPT_STREAM 2u /* data, journal, then the checkpoint stream */

/* Blocks the checkpoint stream's sealed groups with live blocks hold,
 * the live ones among them, and the biggest group. */
static void ckpt_stream_use(struct tvol *t, uint64_t *held, uint64_t *cap_max)
{
	struct za_group_info gi;
	uint64_t *ids;
	unsigned n, i;

	*held = *cap_max = 0;
	n = za_engine_groups(t->e, NULL, 0);
	ids = calloc(n + 1, sizeof(*ids));
	n = za_engine_groups(t->e, ids, n);
	for (i = 0; i < n; i++) {
		uint64_t cap;

		if (za_engine_group_info(t->e, ids[i], &gi) ||
		    gi.stream != CKPT_STREAM)
			continue;
		cap = (uint64_t)gi.nr_segs * gi.nr_stripes;
		*held += cap;
		if (cap > *cap_max)
			*cap_max = cap;
	}
	free(ids);
}

/*
 * A checkpoint writes only the map pages that changed since the one
 * before: after a first one of ~1,000 scattered extents, a few blocks
 * changed cost a few pages. The pages a checkpoint names are counted
 * live, exactly (what recovery counts from the pages it loads is the
 * same figure), and superseded ones are reclaimed. Cleaning: cold
 * regions written now and then, each then left alone, pin a few pages
 * in each group of the checkpoint stream while hot blocks are written
 * over and over; the stream stays within its bound (twice what is live,
 * plus a few groups) because cleaning rewrites the emptiest group. Every
 * recovery loads the map the data says.
 */
START_TEST(test_checkpoint_incremental)
{
	const uint64_t hot = 256, cold = 256;
	struct za_volume_stats st;
	uint64_t held, cap_max, live, a, phase, r, rounds, cleaned_all = 0;
	struct tvol t;
	unsigned i;

	rng = 3100;
	tvol_make_manual_ckpt(&t, 4, 2);
	/* _i 1: with a map cache of one byte, the cold leaves out of
	 * memory when cleaning comes to their pages' group. */
	if (_i) {
		t.map_cache = 1;
		tvol_close(&t);
		tvol_open(&t, false);
	}
	/* GC moving the cold blocks would make their leaves hot. */
	za_volume_gc_stop(t.v);
	for (a = 0; a < VOL_BLOCKS; a += 2)
		write_rand(&t, a, 1, false);
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	ck_assert_int_eq(za_volume_checkpoint_sync(t.v), 0);
	za_volume_get_stats(t.v, &st);
	ck_assert_uint_ge(st.checkpoint_pages_written, 16);
	ck_assert_uint_eq(st.checkpoint_pages, st.checkpoint_pages_written);
	ckpt_stream_use(&t, &held, &cap_max);
	/* Enough rounds for the stream to move to another group. */
	rounds = cap_max / 4 + 4;
	for (phase = 0; phase < (VOL_BLOCKS - hot) / cold; phase++) {
		/* A cold region: its leaves, written now, then left. */
		for (a = hot + phase * cold; a < hot + (phase + 1) * cold;
		     a += 2)
			write_rand(&t, a + 1, 1, false);
		for (r = 0; r < rounds; r++) {
			uint64_t cleaned = st.checkpoint_pages_cleaned;

			/* Synced: journal stripes, not data stripes where
			 * garbage next to cold blocks would have GC move
			 * them (and make their leaves hot). */
			for (i = 0; i < 3; i++)
				write_rand(&t, 2 * (rnd() % (hot / 2)), 1,
					   true);
			ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
			ck_assert_int_eq(za_volume_checkpoint_sync(t.v), 0);
			za_volume_get_stats(t.v, &st);
			/* The hot leaves at most (4), their directory page,
			 * and what cleaning rewrote; the cold region's
			 * leaves (5) in a phase's first round. */
			ck_assert_uint_le(st.checkpoint_pages_written,
					  5 + (r ? 0 : 5) +
						  st.checkpoint_pages_cleaned -
						  cleaned);
			/* The stream: at most twice what is live, plus the
			 * slack cleaning allows (two groups), the open one
			 * and the one being emptied. */
			ckpt_stream_use(&t, &held, &cap_max);
			live = st.checkpoint_pages + st.checkpoint_blocks;
			ck_assert_uint_le(held, 2 * live + 4 * cap_max);
		}
		live = st.checkpoint_pages;
		cleaned_all += st.checkpoint_pages_cleaned;
		tvol_crash_and_recover(&t, 0);
		za_volume_get_stats(t.v, &st);
		ck_assert_uint_eq(st.recovered_stripes, 0);
		ck_assert_uint_eq(st.checkpoint_pages, live);
		check_range(&t, 0, VOL_BLOCKS);
		za_volume_gc_stop(t.v);
	}
	/* Cold pages pinned groups: cleaning had to run. */
	ck_assert_uint_gt(cleaned_all, 0);
	/* Overwrites after the last checkpoint, replayed: the counts it
	 * keeps, carried through the replay, are what the map says. */
	for (i = 0; i < 300; i++)
		write_rand(&t, rnd() % VOL_BLOCKS, 1 + rnd() % 4, i % 7 == 0);
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	tvol_crash_and_recover(&t, 0);
	za_volume_get_stats(t.v, &st);
	ck_assert_uint_gt(st.recovered_stripes, 0);
	/* With the cache, the root only was loaded: checked by
	 * za_volume_recount() in the harness instead. */
	if (!_i)
		ck_assert_uint_gt(st.recovery_counts_checked, 0);
	else
		ck_assert_uint_gt(t.lazy_recoveries, 0);
	ck_assert_uint_eq(st.recovery_count_mismatches, 0);
	check_range(&t, 0, VOL_BLOCKS);
	ck_assert_uint_gt(t.counts_checked, 0);
	tvol_free(&t);
}
END_TEST

/* The block at (@group, @pos) of the checkpoint stream, on @copies of
 * its columns, overwritten in the drive files. */
static void rot_block(struct tvol *t, uint64_t group, uint64_t pos,
		      unsigned copies)
{
	const struct za_stripe_layout *l =
		za_engine_stream_layout(t->e, CKPT_STREAM);
	uint64_t zone_bytes = t->zone_bytes ? t->zone_bytes : 2ull << 20;
	uint8_t junk[4096], hdr[4096];
	struct za_seg_info si;
	uint64_t seg_id, off;
	uint32_t sidx;
	unsigned c;

	memset(junk, 0x5a, sizeof(junk));
	ck_assert_int_eq(
		za_engine_group_locate(t->e, group, pos, &seg_id, &sidx), 0);
	ck_assert_int_eq(za_engine_seg_info(t->e, seg_id, &si), 0);
	for (c = 0; c < copies; c++) {
		char path[300];
		int fd;

		snprintf(path, sizeof(path), "%s/d%u", t->dir, si.members[c]);
		fd = open(path, O_RDWR);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(pread(fd, hdr, sizeof(hdr), 0), sizeof(hdr));
		off = za_get_le64(hdr + 136) + si.zones[c] * zone_bytes +
		      sidx * l->slot_bytes + 4096;
		ck_assert_int_eq(pwrite(fd, junk, sizeof(junk), (off_t)off),
				 sizeof(junk));
		close(fd);
	}
}

/* Rot every map page of the checkpoint stream on @copies columns;
 * returns how many. */
static unsigned rot_map_pages(struct tvol *t, unsigned copies)
{
	struct za_ckpt_rec *recs = malloc(ZA_MPAGE_MAX_RECS * sizeof(*recs));
	struct za_group_info gi;
	struct za_mpage_hdr h;
	uint8_t *blk;
	uint64_t *ids, pos;
	unsigned n, i, rotted = 0;

	ck_assert_int_eq(posix_memalign((void **)&blk, 4096, 4096), 0);
	n = za_engine_groups(t->e, NULL, 0);
	ids = calloc(n + 1, sizeof(*ids));
	n = za_engine_groups(t->e, ids, n);
	for (i = 0; i < n; i++) {
		if (za_engine_group_info(t->e, ids[i], &gi) ||
		    gi.stream != CKPT_STREAM)
			continue;
		for (pos = 0; pos < gi.next_pos; pos++) {
			if (za_engine_read_sync(t->e, ids[i], pos, 1, blk,
						NULL) ||
			    za_mpage_decode(blk, 4096, &h, recs))
				continue;
			rot_block(t, ids[i], pos, copies);
			rotted++;
		}
	}
	free(ids);
	free(blk);
	free(recs);
	return rotted;
}

/*
 * Bit rot in map pages: on p of the p+1 copies it is repaired like data
 * (the checkpoint loads, the data reads back); on every copy the
 * checkpoint is not usable - said, never a crash, never wrong data - and
 * recovery replays from the start instead.
 */
START_TEST(test_checkpoint_pages_rot)
{
	struct za_volume_stats st;
	uint64_t seq, a;
	struct tvol t;

	rng = 3200;
	tvol_make_manual_ckpt(&t, 4, 2);
	for (a = 0; a < VOL_BLOCKS; a += 3)
		write_rand(&t, a, 1, false);
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	ck_assert_int_eq(za_volume_checkpoint_sync(t.v), 0);
	za_volume_get_stats(t.v, &st);
	seq = st.checkpoint_seq;
	ck_assert_uint_gt(st.checkpoint_pages, 2);

	ck_assert_uint_eq(rot_map_pages(&t, 2), st.checkpoint_pages);
	tvol_crash_and_recover(&t, 0);
	za_volume_get_stats(t.v, &st);
	ck_assert_uint_eq(st.checkpoint_seq, seq);
	check_range(&t, 0, VOL_BLOCKS);

	ck_assert_uint_gt(rot_map_pages(&t, 3), 0);
	/* The anchored checkpoint is not usable: that is counted. */
	t.anchor_tampered = true;
	tvol_crash_and_recover(&t, 0);
	za_volume_get_stats(t.v, &st);
	ck_assert_uint_eq(st.checkpoint_seq, 0);
	ck_assert_uint_eq(st.checkpoint_pages, 0);
	ck_assert_uint_gt(st.recovered_stripes, 0);
	check_range(&t, 0, VOL_BLOCKS);
	tvol_free(&t);
}
END_TEST

struct mc_read {
	struct za_vol_req r;
	bool done;
	int result;
	uint64_t lba, nr;
	uint8_t *buf;
};

static void mc_read_done(struct za_vol_req *r, int result)
{
	struct mc_read *m = container_of(r, struct mc_read, r);

	m->done = true;
	m->result = result;
}

/*
 * @n reads of up to @max_blocks each, all in flight at once, checked.
 * Reads across several leaves each need several pages, one after
 * another: the pages one has while it waits for the next must stay
 * (9.8, seed 7010: two such requests took turns evicting each other's
 * pages, 39 M page reads and no answer). So each read needs at most its
 * own pages once, and a page once per reader: a bound that a livelock
 * crosses, checked while they run.
 */
static void mc_reads(struct tvol *t, unsigned n, uint64_t max_blocks)
{
	struct mc_read *m = calloc(n, sizeof(*m));
	struct za_volume_stats st;
	uint64_t before, bound = 0;
	unsigned i, left = n;

	za_volume_get_stats(t->v, &st);
	before = st.map_pages_read;
	for (i = 0; i < n; i++) {
		m[i].nr = 1 + rnd() % max_blocks;
		m[i].lba = rnd() % (VOL_BLOCKS - m[i].nr + 1);
		m[i].buf = ablk(m[i].nr);
		m[i].r.done = mc_read_done;
		/* A leaf holds ~50 of the extents of 9.8's tests, one
		 * block in two: a directory page and the leaves. */
		bound += 2 + m[i].nr / 64 + 1;
		za_volume_read(t->v, &m[i].r, m[i].lba * 4096, m[i].nr * 4096,
			       m[i].buf);
	}
	while (left) {
		za_io_run_once(t->io);
		for (left = 0, i = 0; i < n; i++)
			left += !m[i].done;
		za_volume_get_stats(t->v, &st);
		ck_assert_uint_le(st.map_pages_read - before, bound);
	}
	for (i = 0; i < n; i++) {
		ck_assert_int_eq(m[i].result, 0);
		ck_assert(!memcmp(m[i].buf, t->model + m[i].lba * 4096,
				  m[i].nr * 4096));
		free(m[i].buf);
	}
	free(m);
}

/* A block written and a checkpoint: the map down to a stub or two. */
static void mc_ckpt_trim(struct tvol *t)
{
	struct za_volume_stats st;

	write_rand(t, 0, 1, false);
	ck_assert_int_eq(za_volume_flush_sync(t->v), 0);
	ck_assert_int_eq(za_volume_checkpoint_sync(t->v), 0);
	za_volume_get_stats(t->v, &st);
	ck_assert_uint_lt(st.map_bytes, 8192);
}

/*
 * The map cache (design.md 9.8): with a limit of one byte, every clean
 * page whose checkpoint is live leaves memory, and every request reads
 * back what it needs - reads, writes, trims, many at once for the same
 * pages, garbage collection's victims, a scrub's whole walk - and
 * finds exactly what the model holds, across a crash too. Pages rotten
 * on every copy make the requests that need them fail with EIO, never
 * read wrong data.
 */
START_TEST(test_map_cache)
{
	struct za_volume_stats st;
	uint64_t a, full, reads, waits;
	struct tvol t;
	int op;

	rng = 3300;
	tvol_init(&t, 4, 2, 0, VOL_BLOCKS);
	t.ckpt_interval = UINT64_MAX;
	t.map_cache = 1;
	tvol_create(&t);
	for (a = 0; a < VOL_BLOCKS; a += 2)
		write_rand(&t, a, 1, false);
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	za_volume_get_stats(t.v, &st);
	full = st.map_bytes;
	ck_assert_uint_eq(st.map_cache_bytes, 1);
	ck_assert_uint_eq(st.map_pages_read, 0);
	ck_assert_int_eq(za_volume_checkpoint_sync(t.v), 0);
	za_volume_get_stats(t.v, &st);
	/* 1,024 extents in ~20 leaves: a stub or two left. */
	ck_assert_uint_lt(st.map_bytes, full / 8);
	check_range(&t, 0, VOL_BLOCKS);
	za_volume_get_stats(t.v, &st);
	ck_assert_uint_ge(st.map_pages_read, 2);
	/*
	 * Many reads of the same few pages at once: one read per page. The
	 * whole read above kept every page it had until it had them all
	 * (za_map_sweep()): a checkpoint lets them go.
	 */
	mc_ckpt_trim(&t);
	za_volume_get_stats(t.v, &st);
	reads = st.map_pages_read;
	waits = st.map_page_waits;
	mc_reads(&t, 64, 1);
	za_volume_get_stats(t.v, &st);
	ck_assert_uint_gt(st.map_pages_read, reads);
	ck_assert_uint_gt(st.map_page_waits - waits, st.map_pages_read - reads);
	/* Reads across leaves, several at once (seed 7010). */
	mc_ckpt_trim(&t);
	za_volume_get_stats(t.v, &st);
	reads = st.map_pages_read;
	mc_reads(&t, 8, 300);
	za_volume_get_stats(t.v, &st);
	ck_assert_uint_gt(st.map_pages_read, reads + 8);

	/* Writes, trims, zeroes and reads among checkpoints. */
	for (op = 0; op < 800; op++) {
		uint64_t lba = rnd() % VOL_BLOCKS;
		uint64_t n = 1 + rnd() % (rnd() % 8 ? 8 : 100);
		unsigned what = (unsigned)(rnd() % 20);

		if (lba + n > VOL_BLOCKS)
			n = VOL_BLOCKS - lba;
		if (what < 10) {
			write_rand(&t, lba, n, what == 0);
		} else if (what < 12) {
			ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
			ck_assert_int_eq(za_volume_checkpoint_sync(t.v), 0);
		} else if (what < 14) {
			ck_assert_int_eq(unmap_sync(&t, lba, n, rnd() & 1), 0);
			memset(t.model + lba * 4096, 0, n * 4096);
		} else {
			check_range(&t, lba, n);
		}
	}
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	ck_assert_int_eq(za_volume_checkpoint_sync(t.v), 0);
	check_range(&t, 0, VOL_BLOCKS);
	check_live(&t, VOL_BLOCKS);
	za_volume_get_stats(t.v, &st);
	ck_assert_uint_eq(st.map_page_errors, 0);

	/*
	 * Recovery loads the checkpoint's root only, and reads the pages
	 * its replay needs: 50 blocks written at random in the first 256,
	 * a few of the map's pages (~3 leaves of ~20; the harness then
	 * checks the counts it kept against the whole map,
	 * za_volume_recount()).
	 */
	for (op = 0; op < 50; op++)
		write_rand(&t, rnd() % 256, 1, false);
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	tvol_crash_and_recover(&t, 0);
	za_volume_get_stats(t.v, &st);
	ck_assert_uint_gt(st.recovered_stripes, 0);
	ck_assert_uint_gt(st.recovery_map_pages, 0);
	ck_assert_uint_lt(st.recovery_map_pages, st.checkpoint_pages);
	ck_assert_uint_gt(t.lazy_recoveries, 0);
	check_range(&t, 0, VOL_BLOCKS);
	ck_assert_int_eq(za_volume_checkpoint_sync(t.v), 0);
	za_volume_get_stats(t.v, &st);
	ck_assert_uint_lt(st.map_bytes, full / 8);
	ck_assert_uint_eq(st.recovery_count_mismatches, 0);

	/* Rotten on every copy: EIO, said, never other data. */
	ck_assert_uint_gt(rot_map_pages(&t, 3), 0);
	{
		uint8_t *buf = ablk(VOL_BLOCKS);

		ck_assert_int_eq(za_volume_read_sync(t.v, 0,
						     VOL_BLOCKS * 4096ull, buf),
				 -EIO);
		free(buf);
	}
	za_volume_get_stats(t.v, &st);
	ck_assert_uint_gt(st.map_page_errors, 0);
	tvol_free(&t);
}
END_TEST

/*
 * A write that waited for a map page and finds, when the page is in,
 * that dirty pages fill the cache while a checkpoint is due, is held
 * back for that checkpoint (vol_map_full()); it must start it. It only
 * queued itself, and with nothing else in flight - the writes let in
 * before it buffered in a stripe not yet full, their client waiting for
 * this one - nothing ever did (fault loop, seed 7010: zarrayd idle, a
 * write never answered). Here: 2 MiB written into one leaf (a
 * checkpoint due by the data, not yet by the dirty pages), then writes
 * into eight leaves out of memory at once, each dirtying one more as
 * its page comes in.
 */
struct mc_write {
	struct za_vol_req r;
	bool done;
	int result;
};

static void mc_write_done(struct za_vol_req *r, int result)
{
	struct mc_write *m = container_of(r, struct mc_write, r);

	m->done = true;
	m->result = result;
}

START_TEST(test_map_cache_write_held)
{
	struct mc_write w[8] = { 0 };
	struct za_volume_stats st;
	uint8_t *buf[8];
	uint64_t a, ckpts;
	struct tvol t;
	unsigned i, left;

	rng = 3500;
	tvol_init(&t, 4, 2, 0, VOL_BLOCKS);
	t.ckpt_interval = 0; /* the default: checkpoints by themselves */
	t.map_cache = 12 << 10; /* four leaves or so */
	tvol_create(&t);
	write_rand(&t, 0, 64, false);
	for (a = 600; a < VOL_BLOCKS; a += 2)
		write_rand(&t, a, 1, false);
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	ck_assert_int_eq(za_volume_checkpoint_sync(t.v), 0);
	for (a = 0; a < 512; a += 64)
		write_rand(&t, a, 64, false);
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	za_volume_get_stats(t.v, &st);
	ckpts = st.checkpoints;
	for (i = 0; i < 8; i++) {
		uint64_t lba = 701 + 160 * i;

		buf[i] = ablk(1);
		for (a = 0; a < 4096 / 8; a++)
			((uint64_t *)buf[i])[a] = rnd();
		memcpy(t.model + lba * 4096, buf[i], 4096);
		w[i].r.done = mc_write_done;
		za_volume_write(t.v, &w[i].r, lba * 4096, 4096, buf[i], false);
	}
	do {
		za_io_run_once(t.io);
		for (left = 0, i = 0; i < 8; i++)
			left += !w[i].done;
	} while (left);
	for (i = 0; i < 8; i++) {
		ck_assert_int_eq(w[i].result, 0);
		free(buf[i]);
	}
	za_volume_get_stats(t.v, &st);
	/* Held, and let go by the checkpoint they started. */
	ck_assert_uint_gt(st.writes_stalled, 0);
	ck_assert_uint_gt(st.checkpoints, ckpts);
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	check_range(&t, 0, VOL_BLOCKS);
	tvol_free(&t);
}
END_TEST

/*
 * GC under the map cache: a volume near full, overwritten at random with
 * a cache of one byte, so that GC's victims' live blocks are found in
 * leaves read back from the drives (and stay until the victim is
 * moved); every block reads back as the model has it.
 */
START_TEST(test_map_cache_gc)
{
	struct za_volume_stats st;
	uint64_t i, n;
	struct tvol t;

	rng = 3400;
	tvol_init(&t, 4, 2, 24ull << 20, UINT64_MAX);
	t.map_cache = 1;
	tvol_create(&t);
	n = t.vol_blocks;
	for (i = 0; i < 3 * n; i++) {
		write_rand(&t, rnd() % (n - 3), rnd() % 2 ? 1 : 4, false);
		if (i % 2000 == 1999)
			ck_assert_int_eq(za_volume_checkpoint_sync(t.v), 0);
	}
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	za_volume_get_stats(t.v, &st);
	ck_assert_uint_gt(st.gc_runs, 0);
	ck_assert_uint_gt(st.map_pages_read, 0);
	ck_assert_uint_eq(st.map_page_errors, 0);
	for (i = 0; i < n; i += 256)
		check_range(&t, i, i + 256 <= n ? 256 : n - i);
	check_live(&t, n);
	tvol_free(&t);
}
END_TEST

static void child_checkpoint(struct tvol *t, void *arg)
{
	(void)arg;
	za_volume_checkpoint_sync(t->v);
}

/*
 * A process killed between two parts of a checkpoint (one part in flight
 * at a time) leaves it torn: recovery uses the previous one and replays
 * everything after it, with or without a power cut on top; the next
 * checkpoint does not reuse the torn one's id.
 */
START_TEST(test_checkpoint_torn_falls_back)
{
	struct za_volume_stats st;
	uint64_t c1, before, after, c3;
	struct tvol t;
	unsigned i;

	rng = 700 + (uint64_t)_i;
	tvol_make(&t, 4, 2);
	t.ckpt_interval = UINT64_MAX;
	t.ckpt_window = 1;
	tvol_close(&t);
	tvol_open(&t, false);
	/* Single blocks all over: hundreds of extents, several map pages
	 * and parts. */
	for (i = 0; i < 700; i++)
		write_rand(&t, rnd() % VOL_BLOCKS, 1, false);
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	ck_assert_int_eq(za_volume_checkpoint_sync(t.v), 0);
	za_volume_get_stats(t.v, &st);
	c1 = st.checkpoint_seq;
	ck_assert_uint_ge(st.checkpoint_blocks + st.checkpoint_pages, 3);
	before = stripes_written(&t);
	for (i = 0; i < 100; i++)
		write_rand(&t, rnd() % (VOL_BLOCKS - 4), 1 + rnd() % 4, false);
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	after = stripes_written(&t) - before;

	/* Dies once the second block (a map page) of the next checkpoint
	 * is written. */
	ck_assert_int_eq(run_child(&t, "checkpoint:2", child_checkpoint, NULL),
			 ZA_CRASH_EXIT);
	tvol_open(&t, _i == 1);
	za_volume_get_stats(t.v, &st);
	ck_assert_uint_eq(st.checkpoint_seq, c1);
	ck_assert_uint_eq(st.recovered_stripes, after);
	check_range(&t, 0, VOL_BLOCKS);

	/* The volume goes on; its next checkpoint is the one recovery uses. */
	for (i = 0; i < 50; i++)
		write_rand(&t, rnd() % (VOL_BLOCKS - 4), 1 + rnd() % 4, false);
	ck_assert_int_eq(za_volume_checkpoint_sync(t.v), 0);
	za_volume_get_stats(t.v, &st);
	c3 = st.checkpoint_seq;
	ck_assert_uint_gt(c3, c1);
	tvol_crash_and_recover(&t, 0);
	za_volume_get_stats(t.v, &st);
	ck_assert_uint_eq(st.checkpoint_seq, c3);
	ck_assert_uint_eq(st.recovered_stripes, 0);
	check_range(&t, 0, VOL_BLOCKS);
	tvol_free(&t);
}
END_TEST

/* What a child working until it is killed shares with the parent. */
struct crash_shared {
	struct versions vs;
	uint64_t ckpt_seq; /* latest complete checkpoint the child saw */
	uint64_t checkpoints;
};

static void child_workload(struct tvol *t, void *arg)
{
	struct crash_shared *sh = arg;
	struct za_volume_stats st;
	int op;

	for (op = 0; op < 400; op++) {
		uint64_t a = rnd() % VOL_BLOCKS;
		uint64_t n = 1 + rnd() % (rnd() % 6 ? 8 : 90);
		unsigned what = (unsigned)(rnd() % 14);

		if (a + n > VOL_BLOCKS)
			n = VOL_BLOCKS - a;
		/* The new version is possible from the moment it is asked
		 * for: the child may die in the middle of the request. */
		if (what == 0) {
			memset(t->model + a * 4096, 0, n * 4096);
			versions_add(&sh->vs, t->model, a, n);
			unmap_sync(t, a, n, rnd() & 1);
		} else {
			uint8_t *buf = ablk(n);
			uint64_t i;

			for (i = 0; i < n * 4096 / 8; i++)
				((uint64_t *)buf)[i] = rnd();
			memcpy(t->model + a * 4096, buf, n * 4096);
			versions_add(&sh->vs, t->model, a, n);
			za_volume_write_sync(t->v, a * 4096, n * 4096, buf,
					     what == 1);
			free(buf);
		}
		if (op % 40 == 39 && !za_volume_flush_sync(t->v))
			versions_reset(&sh->vs, t->model);
		za_volume_get_stats(t->v, &st);
		sh->ckpt_seq = st.checkpoint_seq;
		sh->checkpoints = st.checkpoints;
	}
}

/*
 * Crashes at many points while checkpoints are written every few
 * stripes: a process killed at the Nth checkpoint part, stripe
 * completion or journal append (a power cut on top in odd runs); every
 * block then reads back as at the last flush or as a version written
 * since, recovery used a checkpoint at least as new as the last complete
 * one, and the recovered volume writes, checkpoints and recovers again.
 */
START_TEST(test_checkpoint_crash_points)
{
	static const struct {
		const char *name;
		unsigned range;
	} points[] = {
		{ "checkpoint", 120 },
		{ "stripe-complete", 300 },
		{ "checkpoint", 40 },
		{ "journal-append", 30 },
	};
	struct crash_shared *sh;
	struct za_volume_stats st;
	struct tvol t;
	char spec[64];
	uint8_t *buf;
	uint64_t lba, bad = 0;
	int rc;

	rng = 800 + (uint64_t)_i * 7919;
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(sh, MAP_FAILED);
	tvol_make(&t, 4, 2);
	t.ckpt_interval = 64 * 4096; /* every few stripes */
	t.ckpt_window = 1 + (unsigned)_i % 3;
	versions_reset(&sh->vs, t.model);
	snprintf(spec, sizeof(spec), "%s:%u", points[_i % 4].name,
		 1 + (unsigned)(rnd() % points[_i % 4].range));
	rc = run_child(&t, spec, child_workload, sh);
	ck_assert_msg(rc == 0 || rc == ZA_CRASH_EXIT,
		      "%s: the child exited with %d", spec, rc);
	if (rc == 0) /* ran to the end: checkpoints were written */
		ck_assert_uint_gt(sh->checkpoints, 0);
	tvol_open(&t, _i & 1);
	buf = ablk(VOL_BLOCKS);
	ck_assert_int_eq(za_volume_read_sync(t.v, 0,
					     (uint64_t)VOL_BLOCKS * 4096, buf),
			 0);
	for (lba = 0; lba < VOL_BLOCKS; lba++)
		bad += !versions_ok(&sh->vs, lba, buf + lba * 4096);
	ck_assert_msg(bad == 0,
		      "%s: %llu blocks hold a version never written "
		      "or overwritten before a flush",
		      spec, (unsigned long long)bad);
	za_volume_get_stats(t.v, &st);
	ck_assert_msg(st.checkpoint_seq >= sh->ckpt_seq,
		      "%s: recovered from sequence %llu, but checkpoint %llu "
		      "was complete",
		      spec, (unsigned long long)st.checkpoint_seq,
		      (unsigned long long)sh->ckpt_seq);
	/* What was read is the truth; the volume goes on from there. */
	memcpy(t.model, buf, (size_t)VOL_BLOCKS * 4096);
	for (lba = 0; lba < 100; lba++)
		write_rand(&t, rnd() % (VOL_BLOCKS - 8), 1 + rnd() % 8,
			   lba % 9 == 0);
	ck_assert_int_eq(za_volume_checkpoint_sync(t.v), 0);
	write_rand(&t, 0, 20, true);
	tvol_crash_and_recover(&t, 0);
	check_range(&t, 0, VOL_BLOCKS);
	free(buf);
	munmap(sh, sizeof(*sh));
	tvol_free(&t);
}
END_TEST

/* Groups of the checkpoint stream that exist now, into @ids; count. */
#define JRNL_STREAM 1u

/* The groups of @stream, at most @max. */
static unsigned stream_groups(struct tvol *t, unsigned stream, uint64_t *ids,
			      unsigned max)
{
	static uint64_t all[4096];
	struct za_group_info *gi = malloc(sizeof(*gi));
	unsigned n, i, k = 0;

	ck_assert_ptr_nonnull(gi);
	n = za_engine_groups(t->e, all, 4096);
	ck_assert_uint_le(n, 4096);
	for (i = 0; i < n; i++)
		if (!za_engine_group_info(t->e, all[i], gi) &&
		    gi->stream == stream && k < max)
			ids[k++] = all[i];
	free(gi);
	return k;
}

static unsigned ckpt_groups(struct tvol *t, uint64_t *ids, unsigned max)
{
	return stream_groups(t, CKPT_STREAM, ids, max);
}

/*
 * GC and checkpoints: a default-size volume overwritten with checkpoints
 * every few stripes. Groups holding only superseded checkpoints are
 * reclaimed; the live one survives GC and a crash; trims survive too,
 * also when GC took the journal groups whose unmap records the
 * checkpoint carried and recovery then ignores checkpoints (a full
 * replay must not bring trimmed data back).
 */
START_TEST(test_gc_reclaims_checkpoints)
{
	static uint64_t seen[512], now[64];
	struct za_volume_stats st;
	unsigned nseen = 0, nnow, i, j, gone = 0;
	uint64_t vb, lba, written = 0, fill, seq;
	struct tvol t;
	int phase;

	rng = 4343;
	tvol_make_sized(&t, 4, 2, 24ull << 20, UINT64_MAX);
	t.ckpt_interval = 128 << 10;
	tvol_close(&t);
	tvol_open(&t, false);
	vb = t.vol_blocks;
	fill = vb * 80 / 100;
	for (lba = 0; lba + 16 <= fill; lba += 16)
		write_rand(&t, lba, 16, false);
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	for (phase = 0; phase < 2; phase++) {
		written = 0;
		while (written < 3 * fill) {
			uint64_t n = 1 + rnd() % 16;
			uint64_t a = rnd() % (fill - n);
			unsigned what = (unsigned)(rnd() % 30);

			if (what == 0) {
				ck_assert_int_eq(
					unmap_sync(&t, a, n, rnd() & 1), 0);
				memset(t.model + a * 4096, 0, n * 4096);
			} else {
				write_rand(&t, a, n, false);
				if (what < 3)
					ck_assert_int_eq(
						za_volume_flush_sync(t.v), 0);
			}
			written += n;
			nnow = ckpt_groups(&t, now, 64);
			for (i = 0; i < nnow; i++) {
				for (j = 0; j < nseen && seen[j] != now[i]; j++)
					;
				if (j == nseen && nseen < 512)
					seen[nseen++] = now[i];
			}
		}
		ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
		while (za_volume_busy(t.v) || za_engine_busy(t.e))
			za_io_run_once(t.io);
		za_volume_get_stats(t.v, &st);
		ck_assert_uint_gt(st.checkpoints, 3);
		ck_assert_uint_gt(st.gc_freed_groups, 0);
		seq = st.checkpoint_seq;
		check_range(&t, 0, vb);
		/* Phase 0 recovers from the checkpoint; phase 1, after GC
		 * ran on what that recovery rebuilt, ignores checkpoints. */
		t.recover_full = phase == 1;
		tvol_crash_and_recover(&t, 0);
		za_volume_get_stats(t.v, &st);
		ck_assert_uint_eq(st.checkpoint_seq, phase ? 0 : seq);
		check_range(&t, 0, vb);
		t.recover_full = false;
	}
	/* Superseded checkpoints' groups were given back. */
	nnow = ckpt_groups(&t, now, 64);
	for (j = 0; j < nseen; j++) {
		for (i = 0; i < nnow && now[i] != seen[j]; i++)
			;
		gone += i == nnow;
	}
	ck_assert_uint_ge(nseen, 2);
	ck_assert_uint_gt(gone, 0);
	ck_assert_uint_le(nnow, 3);
	tvol_crash_and_recover(&t, 0);
	check_range(&t, 0, vb);
	tvol_free(&t);
}
END_TEST

/*
 * Regression (fault loop seed 7005, design.md 10.4): GC writes again the
 * holes a journal victim's unmap records still cover, and wrote one
 * journal stripe per hole: a victim of ~190 records over fragmented holes
 * cost a new journal group as large as itself, which GC took next, and
 * free space never rose. Here 400 single-block trims over every other
 * block leave 400 records and 400 holes; an overwrite of the rest then
 * drives GC through the journal groups that hold them. Each such victim
 * now costs a journal stripe per 255 holes: the journal stripes written
 * during the overwrite (none of it goes to the journal) stay below one
 * per hole, the groups that held the records are gone, and the holes
 * read as zeros, also after a crash replaying every record (checkpoints
 * ignored).
 */
#define NHOLES 400
START_TEST(test_gc_merges_unmap_records)
{
	static uint64_t before[64], after[64];
	struct za_volume_stats st;
	uint64_t vb, lba, written = 0, fill, j0;
	unsigned nb, na, i, k, gone = 0;
	struct tvol t;

	rng = 7005;
	tvol_make_sized(&t, 4, 2, 24ull << 20, UINT64_MAX);
	vb = t.vol_blocks;
	fill = vb * 80 / 100;
	ck_assert_uint_gt(fill, 4 * NHOLES);
	for (lba = 0; lba + 16 <= fill; lba += 16)
		write_rand(&t, lba, 16, false);
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	for (i = 0; i < NHOLES; i++) {
		ck_assert_int_eq(unmap_sync(&t, 2 * i, 1, false), 0);
		memset(t.model + 2 * i * 4096, 0, 4096);
	}
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	nb = stream_groups(&t, JRNL_STREAM, before, 64);
	ck_assert_uint_gt(nb, 0);
	za_volume_get_stats(t.v, &st);
	j0 = st.journal_blocks;
	/* Overwrite everything but the holes' stretch, in whole stripes. */
	while (written < 4 * fill) {
		uint64_t a = 2 * NHOLES + rnd() % (fill - 2 * NHOLES - 16);

		write_rand(&t, a, 16, false);
		written += 16;
	}
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	while (za_volume_busy(t.v) || za_engine_busy(t.e))
		za_io_run_once(t.io);
	za_volume_get_stats(t.v, &st);
	ck_assert_uint_gt(st.gc_freed_groups, 0);
	na = stream_groups(&t, JRNL_STREAM, after, 64);
	for (i = 0; i < nb; i++) {
		for (k = 0; k < na && after[k] != before[i]; k++)
			;
		gone += k == na;
	}
	ck_assert_msg(gone > 0,
		      "GC took none of the %u journal groups "
		      "holding the records",
		      nb);
	ck_assert_msg(st.journal_blocks - j0 < NHOLES,
		      "%llu journal stripes for %u holes re-recorded",
		      (unsigned long long)(st.journal_blocks - j0), NHOLES);
	check_range(&t, 0, vb);
	t.recover_full = true;
	tvol_crash_and_recover(&t, 0);
	check_range(&t, 0, vb);
	t.recover_full = false;
	tvol_free(&t);
}
END_TEST

/*
 * Regression (found by tools/zloop): a TRIM queued in the journal behind
 * other journal records, then a full data stripe rewriting the trimmed
 * blocks, then a FLUSH. Sequence numbers used to be taken when a stream
 * dispatched a stripe, so the data stripe (its stream idle) got a lower
 * number than the unmap record still queued, and recovery, which replays
 * by sequence, zeroed flushed data. Numbers now follow the order the
 * volume hands stripes over. Recovery replays everything (no checkpoint)
 * so that the order of the replay decides the outcome.
 */
#define NTRIM 256
START_TEST(test_trim_then_rewrite_replay_order)
{
	struct tvol t;
	struct done_flag trims[NTRIM] = { 0 }, wr = { 0 };
	struct za_vol_req tr[NTRIM], w;
	const struct za_stripe_layout *l;
	uint64_t n, i, base = 512;
	uint8_t *buf;

	tvol_make(&t, 4, 2);
	t.recover_full = true;
	l = za_engine_layout(t.e);
	n = l->data_blocks;
	/* Blocks to trim hold data first, so that a lost ordering shows. */
	write_rand(&t, 0, n, false);
	write_rand(&t, base, NTRIM, false);
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	/* More unmap records than the journal takes at once; the last one
	 * covers the blocks the data stripe below rewrites. */
	for (i = 0; i < NTRIM; i++) {
		uint64_t lba = i + 1 < NTRIM ? base + i : 0,
			 cnt = i + 1 < NTRIM ? 1 : n;

		tr[i].done = on_done;
		tr[i].priv = &trims[i];
		za_volume_trim(t.v, &tr[i], lba * 4096, cnt * 4096);
		memset(t.model + lba * 4096, 0, cnt * 4096);
	}
	buf = ablk(n);
	for (i = 0; i < n * 4096 / 8; i++)
		((uint64_t *)buf)[i] = rnd();
	memcpy(t.model, buf, n * 4096);
	w.done = on_done;
	w.priv = &wr;
	za_volume_write(t.v, &w, 0, n * 4096, buf, false);
	for (i = 0; i < NTRIM; i++) {
		za_io_run_until(t.io, &trims[i].done, 0);
		ck_assert_int_eq(trims[i].result, 0);
	}
	za_io_run_until(t.io, &wr.done, 0);
	ck_assert_int_eq(wr.result, 0);
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	check_range(&t, 0, VOL_BLOCKS);
	tvol_crash_and_recover(&t, 0);
	check_range(&t, 0, VOL_BLOCKS);
	free(buf);
	tvol_free(&t);
}
END_TEST

/*
 * Regression (found by tools/zloop, seed 7017): a block flushed into the
 * journal and overwritten while its journal stripe still waited in the
 * engine's queue (here: for the journal's first group to open) lost its
 * LBA from that stripe's header, which was filled only when the stripe was
 * dispatched. The flush returned, the newer version was never flushed,
 * and after a crash the block read back as zeros. A stripe handed to the
 * engine now keeps its LBA table: the newer write has a higher sequence
 * number, so recovery's replay order alone decides.
 */
START_TEST(test_overwrite_while_journal_queued)
{
	enum { NQ = 16 }; /* journal stripes: more than a segment takes */
	struct tvol t;
	struct done_flag fd[NQ] = { 0 }, wd[NQ + 1] = { 0 };
	struct za_vol_req fr[NQ], wr[NQ + 1];
	const uint64_t base = 77;
	uint8_t *v1 = ablk(NQ), *v2 = ablk(1), *got = ablk(1);
	unsigned i;

	memset(fr, 0, sizeof(fr)); /* internal = false: a user's flush */
	memset(wr, 0, sizeof(wr));
	/* No checkpoint: it would make the last write durable too. */
	tvol_make_manual_ckpt(&t, 3, 3);
	memset(v1, 0xa1, NQ * 4096);
	memset(v2, 0xb2, 4096);
	/*
	 * Before the loop runs once: NQ one-block writes, each followed by
	 * a flush that journals it; the engine dispatches the first few
	 * journal stripes and queues the rest. Then the last block is
	 * written again while its journal stripe waits in that queue.
	 */
	for (i = 0; i < NQ; i++) {
		v1[i * 4096] = (uint8_t)i;
		wr[i].done = fr[i].done = on_done;
		wr[i].priv = &wd[i];
		fr[i].priv = &fd[i];
		za_volume_write(t.v, &wr[i], (base + i) * 4096, 4096,
				v1 + i * 4096, false);
		za_volume_flush(t.v, &fr[i]);
		memcpy(t.model + (base + i) * 4096, v1 + i * 4096, 4096);
	}
	wr[NQ].done = on_done;
	wr[NQ].priv = &wd[NQ];
	za_volume_write(t.v, &wr[NQ], (base + NQ - 1) * 4096, 4096, v2, false);
	for (i = 0; i <= NQ; i++) {
		za_io_run_until(t.io, &wd[i].done, 0);
		ck_assert_int_eq(wd[i].result, 0);
	}
	for (i = 0; i < NQ; i++) {
		za_io_run_until(t.io, &fd[i].done, 0);
		ck_assert_int_eq(fd[i].result, 0);
	}
	/* The blocks were flushed; the last write never was and stays in the
	 * open buffer, which the crash loses. */
	tvol_crash_and_recover(&t, 0);
	check_range(&t, base, NQ - 1);
	ck_assert_int_eq(
		za_volume_read_sync(t.v, (base + NQ - 1) * 4096, 4096, got), 0);
	ck_assert_msg(!memcmp(got, v1 + (NQ - 1) * 4096, 4096) ||
			      !memcmp(got, v2, 4096),
		      "block %llu holds neither the flushed version nor the "
		      "later one (first bytes 0x%02x 0x%02x)",
		      (unsigned long long)(base + NQ - 1), got[0], got[1]);
	free(v1);
	free(v2);
	free(got);
	tvol_free(&t);
}
END_TEST

/*
 * Regression (found by tools/zloop, seed 7016): a crash tore a stripe -
 * its columns are written in parallel, and one never reached its drive
 * while the others did. Recovery took the stripe (k + p - 1 columns are
 * readable), the volume served its blocks, and nothing ever restored the
 * missing column: after a flush, p more lost members made those blocks
 * unreadable. Recovery now completes a torn stripe's columns. Here every
 * drive but one of the stripe's writes back its cache before the power
 * cut; after recovery and a flush, p other members of the stripe are
 * lost, and every block still reads back.
 */
START_TEST(test_torn_stripe_completed)
{
	struct tvol t;
	uint64_t before[N], n;
	const uint64_t base = 256;
	unsigned i, torn = N, miss = 0, nmiss = 0;

	rng = 7016;
	tvol_make_manual_ckpt(&t, 4, 2); /* recovery replays the stripe */
	n = za_engine_layout(t.e)->data_blocks;
	write_rand(&t, 0, 64, false);
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	for (i = 0; i < N; i++)
		before[i] = t.devs[i]->stats.write_bytes;
	/* One whole data stripe, not flushed. */
	write_rand(&t, base, n, false);
	while (za_volume_busy(t.v) || za_engine_busy(t.e))
		za_io_run_once(t.io);
	for (i = 0; i < N; i++) {
		if (t.devs[i]->stats.write_bytes == before[i])
			continue; /* not a member of the stripe */
		if (torn == N) {
			torn = i; /* its column goes with the power cut */
			continue;
		}
		ck_assert_int_eq(za_dev_io_sync(t.devs[i], ZA_DEV_OP_FLUSH, 0,
						NULL, 0, NULL),
				 0);
		if (nmiss < 2) {
			miss |= 1u << i;
			nmiss++;
		}
	}
	ck_assert_uint_lt(torn, N);
	ck_assert_uint_eq(nmiss, 2);
	tvol_crash_and_recover(&t, 0);
	/* Readable from k + p - 1 columns: served, so it must be kept. */
	check_range(&t, 0, VOL_BLOCKS);
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	tvol_crash_and_recover(&t, miss);
	check_range(&t, 0, VOL_BLOCKS);
	tvol_free(&t);
}
END_TEST

/*
 * Regression (found by tools/zloop, seeds 5010 and 317): with small zones
 * a segment holds a few stripes, so the MAX_DATA_INFLIGHT (32) data
 * stripes a writer may have on their way are several segments' worth.
 * Writes used to be held back only below one write set of free segments:
 * the stripes already on their way, then the checkpoint stream, took the
 * last free segment while GC was moving a victim, and data stripes failed
 * with -ENOSPC (every later flush with them). Now the stripes on their
 * way count towards the floor, and writes get no more stripe credit than
 * the space above it holds. A default-size volume filled to 80% is
 * overwritten four times by batches of many writes submitted at once (far
 * more than 32 stripes of them) with flushes among them: GC runs near the
 * floor all the time, nothing fails, every block reads back as last
 * written, before and after a crash.
 */
static const struct small_geo {
	unsigned k, p, rows;
	uint32_t chunk_bytes;
	uint64_t zone_bytes, zns_cap_bytes;
	unsigned nr_zones;
} small_geos[] = {
	/* slot 20 KiB: 5 stripes in a ZNS zone, 6 in an SMR one */
	{ 2, 1, 2, 8192, 128ull << 10, 100ull << 10, 48 },
	/* slot 12 KiB: 5 stripes */
	{ 4, 2, 2, 4096, 64ull << 10, 60ull << 10, 64 },
	/* slot 12 KiB: 6 stripes (8 in an SMR zone) */
	{ 3, 3, 1, 8192, 96ull << 10, 72ull << 10, 64 },
};

/* A volume over drives of geometry @g, default size. */
static void tvol_make_small(struct tvol *t, const struct small_geo *g)
{
	tvol_init(t, g->k, g->p, g->zone_bytes * g->nr_zones, UINT64_MAX);
	t->zone_bytes = g->zone_bytes;
	t->zns_cap_bytes = g->zns_cap_bytes;
	t->chunk_bytes = g->chunk_bytes;
	t->rows = g->rows;
	tvol_create(t);
}

#define SQ_DEPTH 128u

struct sq_req {
	struct za_vol_req r;
	struct done_flag d;
	bool flush;
	uint64_t lba, n;
};

START_TEST(test_gc_small_zones_deep_queue)
{
	const struct small_geo *g = &small_geos[_i];
	static struct sq_req q[SQ_DEPTH];
	const struct za_stripe_layout *l;
	struct za_engine_space sp;
	struct za_volume_stats st;
	uint64_t vb, fill, lba, written = 0, per_seg, max_n, batches = 0;
	uint8_t *bufs;
	struct tvol t;
	unsigned i;

	rng = 9100 + (uint64_t)_i;
	tvol_make_small(&t, g);
	l = za_engine_layout(t.e);
	za_engine_space(t.e, &sp);
	per_seg = sp.data_blocks_per_seg / l->data_blocks;
	/* Few stripes per segment: 32 on their way are several segments. */
	ck_assert_uint_ge(per_seg, 2);
	ck_assert_uint_le(per_seg, 8);
	vb = t.vol_blocks;
	fill = vb * 80 / 100;
	ck_assert_uint_gt(fill, 1000);
	for (lba = 0; lba + 16 <= fill; lba += 16)
		write_rand(&t, lba, 16, false);
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);

	/* Up to two stripes per write: SQ_DEPTH of them are far more than
	 * MAX_DATA_INFLIGHT stripes. */
	max_n = 2 * l->data_blocks;
	bufs = ablk(SQ_DEPTH * max_n);
	while (written < 4 * fill) {
		for (i = 0; i < SQ_DEPTH; i++) {
			struct sq_req *x = &q[i];
			uint8_t *buf = bufs + (size_t)i * max_n * 4096;
			uint64_t w;

			memset(x, 0, sizeof(*x));
			x->r.done = on_done;
			x->r.priv = &x->d;
			x->flush = rnd() % 16 == 0;
			if (x->flush) {
				za_volume_flush(t.v, &x->r);
				continue;
			}
			x->n = 1 + rnd() % max_n;
			x->lba = rnd() % (fill - x->n);
			for (w = 0; w < x->n * 4096 / 8; w++)
				((uint64_t *)buf)[w] = rnd();
			/* Writes take effect in the order they were asked
			 * for, held back or not: the model follows it. */
			memcpy(t.model + x->lba * 4096, buf, x->n * 4096);
			written += x->n;
			za_volume_write(t.v, &x->r, x->lba * 4096, x->n * 4096,
					buf, false);
		}
		for (i = 0; i < SQ_DEPTH; i++) {
			za_io_run_until(t.io, &q[i].d.done, 0);
			ck_assert_msg(
				q[i].d.result == 0,
				"batch %llu: %s %u (%llu+%llu) failed: %s",
				(unsigned long long)batches,
				q[i].flush ? "flush" : "write", i,
				(unsigned long long)q[i].lba,
				(unsigned long long)q[i].n,
				strerror(-q[i].d.result));
		}
		batches++;
	}
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	za_volume_get_stats(t.v, &st);
	/* GC ran near the floor: writes had to wait for it. */
	ck_assert_uint_gt(st.gc_freed_groups, 0);
	ck_assert_uint_gt(st.writes_stalled, 0);
	ck_assert_uint_eq(st.gc_map_searches, 0);
	check_range(&t, 0, vb);
	tvol_crash_and_recover(&t, 0);
	check_range(&t, 0, vb);
	free(bufs);
	tvol_free(&t);
}
END_TEST

/*
 * SQ_DEPTH requests submitted at once into @q: writes of 1 to two
 * stripes of random data within [0, @span) (the model follows them),
 * the last one a flush if @flush_last. @bufs holds SQ_DEPTH buffers of
 * two stripes. Every request must succeed.
 */
static bool deep_fua; /* deep_batch(): single-block FUA writes instead */

static void deep_batch(struct tvol *t, struct sq_req *q, uint8_t *bufs,
		       uint64_t span, bool flush_last)
{
	uint64_t max_n = 2 * za_engine_layout(t->e)->data_blocks;
	unsigned i;

	for (i = 0; i < SQ_DEPTH; i++) {
		struct sq_req *x = &q[i];
		uint8_t *buf = bufs + (size_t)i * max_n * 4096;
		uint64_t w;

		memset(x, 0, sizeof(*x));
		x->r.done = on_done;
		x->r.priv = &x->d;
		x->flush = flush_last && i == SQ_DEPTH - 1;
		if (x->flush) {
			za_volume_flush(t->v, &x->r);
			continue;
		}
		x->n = deep_fua ? 1 : 1 + rnd() % max_n;
		x->lba = rnd() % (span - x->n);
		for (w = 0; w < x->n * 4096 / 8; w++)
			((uint64_t *)buf)[w] = rnd();
		memcpy(t->model + x->lba * 4096, buf, x->n * 4096);
		za_volume_write(t->v, &x->r, x->lba * 4096, x->n * 4096, buf,
				deep_fua);
	}
	for (i = 0; i < SQ_DEPTH; i++) {
		za_io_run_until(t->io, &q[i].d.done, 0);
		ck_assert_msg(q[i].d.result == 0,
			      "%s %u (%llu+%llu) failed: %s",
			      q[i].flush ? "flush" : "write", i,
			      (unsigned long long)q[i].lba,
			      (unsigned long long)q[i].n,
			      strerror(-q[i].d.result));
	}
}

struct below_floor {
	uint64_t fill;
};

/*
 * The child of test_gc_restart_below_floor: overwrites the filled volume
 * with batches of SQ_DEPTH writes, and dies (as if SIGKILLed) after the
 * first batch that leaves free space below the floor, GC in flight.
 */
static void child_below_floor(struct tvol *t, void *arg)
{
	struct below_floor *bf = arg;
	const struct za_stripe_layout *l = za_engine_layout(t->e);
	static struct sq_req q[SQ_DEPTH];
	struct za_engine_space sp;
	uint8_t *bufs = ablk(SQ_DEPTH * 2 * l->data_blocks);
	unsigned round;

	for (round = 0; round < 64; round++) {
		deep_batch(t, q, bufs, bf->fill, false);
		/* The batch on the drives: a segment opened for a stripe
		 * not yet written would be free again after recovery. */
		if (za_volume_flush_sync(t->v))
			_exit(4);
		za_engine_space(t->e, &sp);
		if (sp.free_segs < za_volume_floor_segs(t->v))
			_exit(ZA_CRASH_EXIT);
	}
	_exit(0); /* never below the floor: the parent fails */
}

/*
 * A default-size small-zones volume overwritten in a child process that
 * dies while free space is below the floor, opened again until it opens
 * below the floor (recovery may find free what the child did not: a
 * reset it had started, or a segment of the open group that no stripe
 * reached yet; then the child goes on from there), up to 32 times: up
 * to 7 tries were seen to open at the floor, and with 8 allowed
 * test_write_copies_holds failed to set up in one of about 120 runs.
 * Its model is what recovery made of it. Returns the span written.
 */
static uint64_t open_below_floor(struct tvol *t, const struct small_geo *g)
{
	struct below_floor *bf;
	struct za_engine_space sp;
	uint64_t lba, fill;
	unsigned tries;
	int rc;

	bf = mmap(NULL, sizeof(*bf), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(bf, MAP_FAILED);
	tvol_make_small(t, g);
	bf->fill = t->vol_blocks * 80 / 100;
	for (lba = 0; lba + 16 <= bf->fill; lba += 16)
		write_rand(t, lba, 16, false);
	ck_assert_int_eq(za_volume_flush_sync(t->v), 0);
	for (tries = 0; tries < 32; tries++) {
		rc = run_child(t, "", child_below_floor, bf);
		ck_assert_msg(rc == ZA_CRASH_EXIT,
			      "the child exited with %d, free space never "
			      "below the floor",
			      rc);
		tvol_open(t, false);
		za_engine_space(t->e, &sp);
		if (sp.free_segs < za_volume_floor_segs(t->v))
			break;
	}
	ck_assert_msg(sp.free_segs < za_volume_floor_segs(t->v),
		      "reopened with %llu free segments, floor %llu: the "
		      "case is not set up",
		      (unsigned long long)sp.free_segs,
		      (unsigned long long)za_volume_floor_segs(t->v));
	/* What recovery made of it is the truth from here. */
	ck_assert_int_eq(za_volume_read_sync(t->v, 0, t->vol_blocks * 4096,
					     t->model),
			 0);
	fill = bf->fill;
	munmap(bf, sizeof(*bf));
	return fill;
}

/*
 * After open_below_floor(), 4 (8 with @fua) deep batches of writes and
 * flushes, every one succeeding, behind a checkpoint asked for first if
 * @ckpt; the volume reads back as written, also after a crash.
 */
static void below_floor_batches(unsigned geo, uint64_t seed, bool ckpt,
				bool fua)
{
	static struct sq_req q[SQ_DEPTH];
	struct sq_req ck;
	uint64_t fill;
	uint8_t *bufs;
	struct tvol t;
	unsigned round;

	rng = seed;
	fill = open_below_floor(&t, &small_geos[geo]);
	bufs = ablk(SQ_DEPTH * 2 * za_engine_layout(t.e)->data_blocks);
	memset(&ck, 0, sizeof(ck));
	ck.r.done = on_done;
	ck.r.priv = &ck.d;
	if (ckpt)
		za_volume_checkpoint(t.v, &ck.r);
	deep_fua = fua;
	for (round = 0; round < (fua ? 8u : 4u); round++)
		deep_batch(&t, q, bufs, fill, !fua || round % 2);
	deep_fua = false;
	if (ckpt) {
		za_io_run_until(t.io, &ck.d.done, 0);
		ck_assert_int_eq(ck.d.result, 0);
	}
	check_range(&t, 0, t.vol_blocks);
	tvol_crash_and_recover(&t, 0);
	check_range(&t, 0, t.vol_blocks);
	free(bufs);
	tvol_free(&t);
}

/*
 * Regression (found by tools/zloop, seed 7002): a volume opened with free
 * space below the floor took writes with the full stripe credit of an
 * empty one, because nothing had looked at the space yet, and GC, not
 * started, did not hold them back: they took the last free segments and
 * the victim's live data then had nowhere to go (-ENOSPC, every later
 * flush failing). Now the volume looks at the space when it is created
 * and when recovery ends, and a write below the floor starts GC before it
 * is let in. Deep batches of writes and flushes into a volume opened
 * below the floor succeed and read back as written.
 */
START_TEST(test_gc_restart_below_floor)
{
	below_floor_batches(_i, 9300 + (uint64_t)_i, false, false);
}
END_TEST

/*
 * Regression (tools/zloop seed 7002 in the configurations of
 * e1c8885..c960808): each small FUA write is a journal stripe, and the
 * space kept above the floor counted only data stripes, so a deep queue
 * of them took the last free segments while GC moved a victim; a journal
 * stripe then failed with -ENOSPC and every later flush with it. Small
 * FUA writes and flushes queued behind a checkpoint asked for right after
 * a restart below the floor (the checkpoint, once quiesced, lets them go
 * at once) all succeed and read back as written. Without the journal
 * credit every geometry fails with EIO. Regression too (CI of 968e5e9,
 * one run in 50-100): the restart left 1 segment free, the floor being
 * 4, and the checkpoint's first part opened a segment of its stream with
 * the zones GC needed for the victim's live data - now parts wait below
 * the floor while GC runs.
 */
START_TEST(test_ckpt_below_floor)
{
	below_floor_batches(_i, 9700 + (uint64_t)_i, true, true);
}
END_TEST

/*
 * Regression (tools/zloop seed 7028: after a crash, a block read back
 * holding the block written after it): below the floor, a write started
 * GC and was then held back by it - after za_volume_write_copies() had
 * said it would be copied at once. The NBD server lends a payload in its
 * receive ring for the call only, so the next payload arrived where the
 * held-back write's bytes had been, and was written in their place.
 * Here every write is asked for as the server asks: write_copies() first;
 * on a yes its bytes are lent for the call and scribbled over as soon as
 * it returns (the ring reusing them), on a no they stay until it
 * completes. Opened below the floor with GC idle, some writes are held
 * back, some lent, and every block reads back as written, also after a
 * crash. Before the fix the first write, lent, was held back, and
 * small_geos[0] and [2] read back the scribble.
 */
START_TEST(test_write_copies_holds)
{
	static struct sq_req q[SQ_DEPTH];
	struct za_volume_stats st;
	uint64_t fill, max_n, w, lent_writes = 0;
	uint8_t *bufs, *lent;
	unsigned round, i;
	struct tvol t;

	rng = 9900 + (uint64_t)_i;
	fill = open_below_floor(&t, &small_geos[_i]);
	max_n = 2 * za_engine_layout(t.e)->data_blocks;
	bufs = ablk(SQ_DEPTH * max_n);
	lent = ablk(max_n);
	/* Rounds until a write is lent: GC may hold every write of the
	 * first ones back (12 rounds for small_geos[1]). */
	for (round = 0; round < 4 || (!lent_writes && round < 64); round++) {
		for (i = 0; i < SQ_DEPTH; i++) {
			struct sq_req *x = &q[i];
			uint8_t *buf = bufs + (size_t)i * max_n * 4096;

			memset(x, 0, sizeof(*x));
			x->r.done = on_done;
			x->r.priv = &x->d;
			x->n = 1 + rnd() % max_n;
			x->lba = rnd() % (fill - x->n);
			for (w = 0; w < x->n * 4096 / 8; w++)
				((uint64_t *)buf)[w] = rnd();
			memcpy(t.model + x->lba * 4096, buf, x->n * 4096);
			if (!za_volume_write_copies(t.v)) {
				za_volume_write(t.v, &x->r, x->lba * 4096,
						x->n * 4096, buf, false);
				continue;
			}
			memcpy(lent, buf, x->n * 4096);
			za_volume_write_ref(t.v, &x->r, x->lba * 4096,
					    x->n * 4096, lent, false, NULL);
			memset(lent, 0xa5, x->n * 4096);
			lent_writes++;
		}
		for (i = 0; i < SQ_DEPTH; i++) {
			za_io_run_until(t.io, &q[i].d.done, 0);
			ck_assert_int_eq(q[i].d.result, 0);
		}
		ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
		/*
		 * None lent yet: let GC and the checkpoint it asked for finish
		 * first, or each round's writes can find one of them under way
		 * and all be held back again (CI of 915e3f7: 64 rounds,
		 * small_geos[2], the checkpoint's superblock round making its
		 * window longer).
		 */
		while (!lent_writes && za_volume_busy(t.v))
			za_io_run_once(t.io);
	}
	za_volume_get_stats(t.v, &st);
	/* Both kinds happened: the case is set up. */
	ck_assert_uint_gt(st.writes_stalled, 0);
	ck_assert_uint_gt(lent_writes, 0);
	check_range(&t, 0, t.vol_blocks);
	tvol_crash_and_recover(&t, 0);
	check_range(&t, 0, t.vol_blocks);
	free(lent);
	free(bufs);
	tvol_free(&t);
}
END_TEST

/*
 * GC sees every group, however many (regression: gc_choose() listed at
 * most 4096 groups into a static array and scored only those, so past
 * ~4096 groups most dead space was out of its sight). A 2+1 array of
 * 64 KiB zones is filled to its default size: well over 4096 groups.
 * Then the group the engine lists last (the one a capped listing misses
 * first) is trimmed whole - nothing in it is live - and the group it
 * lists first is trimmed three quarters. Left idle (once it has taken
 * what the fill left dead), GC must take the empty one, and before the
 * quarter-live one; what is around them reads back.
 */
struct gsum {
	uint64_t group, lba; /* the group sought, and where its run starts */
	uint64_t next_lba; /* blocks walked so far: the volume is full */
	uint64_t first_lba, blocks;
	bool found;
};

static int gsum_one(void *priv, uint64_t group, uint64_t pos, uint64_t n)
{
	struct gsum *g = priv;

	(void)pos;
	if (group == g->group) {
		if (!g->found)
			g->first_lba = g->next_lba;
		/* One contiguous run: a sequential fill. */
		ck_assert_uint_eq(g->first_lba + g->blocks, g->next_lba);
		g->found = true;
		g->blocks += n;
	}
	g->next_lba += n;
	return 0;
}

static bool group_exists(struct tvol *t, uint64_t id)
{
	struct za_group_info *gi = malloc(sizeof(*gi));
	bool ret;

	ck_assert_ptr_nonnull(gi);
	ret = !za_engine_group_info(t->e, id, gi);
	free(gi);
	return ret;
}

/* The first (@last false) or last sealed data group the engine lists. */
static uint64_t listed_data_group(struct tvol *t, const uint64_t *ids,
				  unsigned n, bool last)
{
	struct za_group_info *gi = malloc(sizeof(*gi));
	uint64_t id = 0;
	unsigned i;

	ck_assert_ptr_nonnull(gi);
	for (i = 0; i < n; i++) {
		unsigned j = last ? n - 1 - i : i;

		ck_assert_int_eq(za_engine_group_info(t->e, ids[j], gi), 0);
		if (gi->stream == ZA_STREAM_DATA && !gi->taking) {
			id = ids[j];
			break;
		}
	}
	free(gi);
	ck_assert_uint_ne(id, 0);
	return id;
}

/* Trim the first @frac_num/@frac_den of @group's blocks; where they are. */
static uint64_t trim_group(struct tvol *t, uint64_t group, uint64_t frac_num,
			   uint64_t frac_den)
{
	struct gsum g = { .group = group };
	uint64_t n;

	ck_assert_int_eq(za_volume_walk_live(t->v, gsum_one, &g), 0);
	ck_assert_msg(g.found, "group %llu holds nothing",
		      (unsigned long long)group);
	n = g.blocks * frac_num / frac_den;
	ck_assert_int_eq(unmap_sync(t, g.first_lba, n, false), 0);
	memset(t->model + g.first_lba * 4096, 0, n * 4096);
	return g.first_lba;
}

/* Run until idle GC has started no victim for 200 ticks of 1 ms. */
static void gc_settle(struct tvol *t)
{
	struct za_volume_stats st;
	uint64_t runs = UINT64_MAX;
	unsigned quiet = 0;
	bool never = false;

	while (quiet < 200) {
		za_io_run_until(t->io, &never, 1000000);
		za_volume_get_stats(t->v, &st);
		quiet = st.gc_runs == runs && !st.gc_active ? quiet + 1 : 0;
		runs = st.gc_runs;
	}
}

START_TEST(test_gc_sees_every_group)
{
	struct za_volume_stats st;
	uint64_t *ids, empty, quarter, lba, vb, at[2];
	bool never = false, empty_gone = false, quarter_first = false;
	uint64_t runs = 0;
	unsigned n, i, quiet = 0;
	struct tvol t;

	rng = 4096;
	tvol_init(&t, 2, 1, 4000ull * (64 << 10), UINT64_MAX);
	t.zone_bytes = 64 << 10;
	t.zns_cap_bytes = 56 << 10;
	t.chunk_bytes = 4096;
	t.rows = 1;
	t.idle_gc_ms = 1;
	tvol_create(&t);
	vb = t.vol_blocks;
	for (lba = 0; lba < vb; lba += 256)
		write_rand(&t, lba, lba + 256 <= vb ? 256 : vb - lba, false);
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	/* Idle GC first takes the superseded checkpoints' groups, as empty
	 * and older: let it, so that they do not count below. */
	gc_settle(&t);

	n = za_engine_groups(t.e, NULL, 0);
	ck_assert_uint_gt(n, 4096 + 256); /* the premise */
	ids = calloc(n, sizeof(*ids));
	ck_assert_ptr_nonnull(ids);
	ck_assert_uint_eq(za_engine_groups(t.e, ids, n), n);
	empty = listed_data_group(&t, ids, n, true);
	quarter = listed_data_group(&t, ids, n, false);
	free(ids);
	at[0] = trim_group(&t, empty, 1, 1);
	at[1] = trim_group(&t, quarter, 3, 4);
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);

	/*
	 * Idle: GC takes the empty group, before the quarter-live one. It
	 * fails if GC goes quiet (no victim in 200 ticks of 1 ms) first.
	 */
	while (!empty_gone) {
		za_io_run_until(t.io, &never, 1000000);
		empty_gone = !group_exists(&t, empty);
		if (!empty_gone && !group_exists(&t, quarter))
			quarter_first = true;
		za_volume_get_stats(t.v, &st);
		quiet = st.gc_runs == runs && !st.gc_active ? quiet + 1 : 0;
		runs = st.gc_runs;
		ck_assert_msg(quiet < 200,
			      "GC went quiet after %llu victims; the empty "
			      "group %llu is still there",
			      (unsigned long long)st.gc_runs,
			      (unsigned long long)empty);
	}
	ck_assert_msg(!quarter_first,
		      "the quarter-live group went before the empty one");
	while (za_volume_busy(t.v) || za_engine_busy(t.e))
		za_io_run_once(t.io);
	/* Around both groups (reading all of it takes longer than the rest). */
	for (i = 0; i < 2; i++) {
		lba = at[i] > 1024 ? at[i] - 1024 : 0;
		check_range(&t, lba, lba + 2048 <= vb ? 2048 : vb - lba);
	}
	check_live(&t, vb);
	tvol_free(&t);
}
END_TEST

/*
 * A stop must end even where GC cannot: with a few stripes per segment a
 * default-size volume filled to 100% and overwritten can keep GC taking
 * victim after victim while idle (design.md 10.4, the known limit), so
 * waiting for the volume to go idle never ended. After
 * za_volume_gc_stop() no new victim starts: the volume goes idle within
 * a bounded number of loop turns, and every block reads back as written,
 * also after a crash.
 */
START_TEST(test_gc_stop_ends_gc)
{
	const struct small_geo *g = &small_geos[_i];
	static struct sq_req q[SQ_DEPTH];
	uint64_t vb, lba, turns;
	uint8_t *bufs;
	struct tvol t;
	unsigned round;

	rng = 9500 + (uint64_t)_i;
	tvol_make_small(&t, g);
	vb = t.vol_blocks;
	for (lba = 0; lba + 16 <= vb; lba += 16)
		write_rand(&t, lba, 16, false);
	bufs = ablk(SQ_DEPTH * 2 * za_engine_layout(t.e)->data_blocks);
	for (round = 0; round < 4; round++)
		deep_batch(&t, q, bufs, vb, false);
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	za_volume_gc_stop(t.v);
	for (turns = 0; za_volume_busy(t.v) || za_engine_busy(t.e); turns++) {
		ck_assert_msg(
			turns < 1000000,
			"still busy after %llu loop turns with GC stopped",
			(unsigned long long)turns);
		za_io_run_once(t.io);
	}
	check_range(&t, 0, vb);
	tvol_crash_and_recover(&t, 0);
	check_range(&t, 0, vb);
	free(bufs);
	tvol_free(&t);
}
END_TEST

/*
 * GC whose victim has a stripe fewer than k of whose headers can be read:
 * its LBA tables come back unreadable for the whole batch of stripes
 * around it, so the live blocks of a neighbouring stripe are not named.
 * The victim's live counter says blocks remain; GC searches the whole map
 * once (gc_map_searches), moves them, and only then gives the group
 * back: every block reads back as written, also after a crash.
 */
START_TEST(test_gc_victim_headers_unreadable)
{
	const struct za_stripe_layout *l;
	uint64_t vb, fill, lba, written = 0, g, *lbas, dbs, keep_lo, keep_hi;
	uint64_t zone_bytes = 2ull << 20, seg_id, off, *ids;
	struct za_group_info gi;
	struct za_volume_stats st;
	struct za_seg_info si;
	uint8_t junk[4096], hdr[4096];
	unsigned n, c, i;
	uint32_t sidx;
	struct tvol t;

	rng = 6161;
	tvol_make_sized(&t, 4, 2, 24ull << 20, UINT64_MAX);
	vb = t.vol_blocks;
	fill = vb * 80 / 100;
	for (lba = 0; lba + 16 <= fill; lba += 16)
		write_rand(&t, lba, 16, false);
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	/* The first sealed data group, and what its stripes hold. */
	n = za_engine_groups(t.e, NULL, 0);
	ids = calloc(n + 1, sizeof(*ids));
	n = za_engine_groups(t.e, ids, n);
	g = listed_data_group(&t, ids, n, false);
	free(ids);
	ck_assert_int_eq(za_engine_group_info(t.e, g, &gi), 0);
	ck_assert_uint_ge(gi.next_pos, 4);
	l = za_engine_stream_layout(t.e, ZA_STREAM_DATA);
	dbs = l->data_blocks;
	lbas = calloc(gi.next_pos * dbs, sizeof(*lbas));
	ck_assert_int_eq(za_engine_read_lbas_sync(
				 t.e, g, 0, (uint32_t)gi.next_pos, lbas, NULL),
			 0);
	/* Stripe 1 stays live (a sequential fill: one run of LBAs); the
	 * rest of the group is trimmed, stripe 0 included. */
	keep_lo = lbas[dbs];
	keep_hi = lbas[2 * dbs - 1] + 1;
	ck_assert_uint_eq(keep_hi - keep_lo, dbs);
	for (i = 0; i < gi.next_pos * dbs; i++) {
		if (lbas[i] == ZA_STRIPE_LBA_NONE ||
		    (lbas[i] >= keep_lo && lbas[i] < keep_hi))
			continue;
		ck_assert_int_eq(unmap_sync(&t, lbas[i], 1, false), 0);
		memset(t.model + lbas[i] * 4096, 0, 4096);
	}
	free(lbas);
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	/* Stripe 0's headers rotted on p + 1 columns: k do not verify. */
	memset(junk, 0x5a, sizeof(junk));
	ck_assert_int_eq(za_engine_group_locate(t.e, g, 0, &seg_id, &sidx), 0);
	ck_assert_int_eq(za_engine_seg_info(t.e, seg_id, &si), 0);
	for (c = 0; c < t.p + 1; c++) {
		char path[300];
		int fd;

		snprintf(path, sizeof(path), "%s/d%u", t.dir, si.members[c]);
		fd = open(path, O_RDWR);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(pread(fd, hdr, sizeof(hdr), 0), sizeof(hdr));
		off = za_get_le64(hdr + 136) + si.zones[c] * zone_bytes +
		      sidx * l->slot_bytes;
		ck_assert_int_eq(pwrite(fd, junk, sizeof(junk), (off_t)off),
				 sizeof(junk));
		close(fd);
	}
	/* Overwrites elsewhere until GC has taken the group. */
	while (group_exists(&t, g) && written < 8 * fill) {
		uint64_t a = rnd() % (fill - 16);

		if (a + 16 > keep_lo && a < keep_hi)
			continue;
		write_rand(&t, a, 16, false);
		written += 16;
	}
	ck_assert_int_eq(za_volume_flush_sync(t.v), 0);
	ck_assert_msg(!group_exists(&t, g), "GC never took group %llu",
		      (unsigned long long)g);
	check_range(&t, 0, vb);
	za_volume_get_stats(t.v, &st);
	ck_assert_uint_ge(st.gc_map_searches, 1);
	tvol_crash_and_recover(&t, 0);
	check_range(&t, 0, vb);
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
	tcase_add_loop_test(tc, test_write_ref_payload, 0, 4);
	tcase_add_test(tc, test_gc_overwrite);
	tcase_add_test(tc, test_gc_victim_headers_unreadable);
	tcase_add_loop_test(tc, test_gc_idle, 0, 2);
	tcase_add_test(tc, test_quarantine_across_crash);
	tcase_add_loop_test(tc, test_gc_job, 0, 2);
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
	tcase_add_loop_test(tc, test_checkpoint_bounds_replay, 0, 2);
	tcase_add_loop_test(tc, test_checkpoint_incremental, 0, 1);
	tcase_add_test(tc, test_checkpoint_pages_rot);
	tcase_add_test(tc, test_anchor_names_live_checkpoint);
	tcase_add_loop_test(tc, test_anchor_mismatch_counted, 0, 5);
	tcase_add_test(tc, test_anchor_none);
	tcase_add_test(tc, test_table_recovery_reads_little);
	tcase_add_loop_test(tc, test_checkpoint_torn_falls_back, 0, 2);
	tcase_add_loop_test(tc, test_checkpoint_crash_points, 0, 12);
	tcase_add_test(tc, test_gc_reclaims_checkpoints);
	tcase_add_test(tc, test_gc_merges_unmap_records);
	tcase_add_test(tc, test_trim_then_rewrite_replay_order);
	tcase_add_test(tc, test_overwrite_while_journal_queued);
	tcase_add_test(tc, test_torn_stripe_completed);
	suite_add_tcase(s, tc);
	/* The map cache: CK_RUN_CASE=map-cache runs it alone. */
	tc = tcase_create("map-cache");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_map_cache);
	tcase_add_test(tc, test_map_cache_write_held);
	tcase_add_test(tc, test_map_cache_gc);
	/* Cleaning the checkpoint stream with leaves out of memory. */
	tcase_add_loop_test(tc, test_checkpoint_incremental, 1, 2);
	suite_add_tcase(s, tc);
	/* Thousands of groups: CK_RUN_CASE=many-groups runs it alone. */
	tc = tcase_create("many-groups");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_gc_sees_every_group);
	suite_add_tcase(s, tc);
	/* A case of its own: CK_RUN_CASE=small-zones runs it alone. */
	tc = tcase_create("small-zones");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_gc_small_zones_deep_queue, 0,
			    sizeof(small_geos) / sizeof(small_geos[0]));
	tcase_add_loop_test(tc, test_gc_restart_below_floor, 0,
			    sizeof(small_geos) / sizeof(small_geos[0]));
	tcase_add_loop_test(tc, test_gc_stop_ends_gc, 0,
			    sizeof(small_geos) / sizeof(small_geos[0]));
	tcase_add_loop_test(tc, test_ckpt_below_floor, 0,
			    sizeof(small_geos) / sizeof(small_geos[0]));
	tcase_add_loop_test(tc, test_write_copies_holds, 0,
			    sizeof(small_geos) / sizeof(small_geos[0]));
	suite_add_tcase(s, tc);
	return trun(s);
}
