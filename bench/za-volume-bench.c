// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * za-volume-bench - the volume's space and memory figures on emulated
 * drives (tmpfs by default), through the volume API without NBD:
 *   P5  map memory after a sequential fill, per TiB of data;
 *   P6  device bytes written per user byte: streaming (1 MiB writes),
 *       a 4 KiB write + FLUSH loop, and random 4 KiB overwrites of a
 *       volume kept 80% full (garbage collection included).
 * Each figure is printed with its limit from the design brief and the
 * ratio; nothing is asserted. bench/volume.sh runs it.
 *
 * --recovery GIB instead measures crash recovery (za_volume_recover) of
 * a volume filled with GIB GiB of 1 MiB writes and then --sync-ops
 * synced 4 KiB writes (one journal stripe each): replaying every stripe
 * (no checkpoint), after a checkpoint at a clean stop, and after a
 * checkpoint followed by 10% more writes, each over the same drives
 * (the median of three recoveries each).
 *
 * --checkpoints MAX instead measures S4, a checkpoint's cost against the
 * map's size (bench_checkpoints()).
 *
 * --kill EXTENTS instead measures S5, recovery after kill -9 against a
 * clean restart, with a map of EXTENTS extents (bench_kill()).
 *
 * --map-cache BYTES gives every volume opened or recovered that map
 * cache limit (za_volume_params.map_cache_bytes; default 0, none): a
 * map larger than it is recovered by its checkpoint's root only.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "dev-emu.h"
#include "dev.h"
#include "io.h"
#include "log.h"
#include "map.h"
#include "sb.h"
#include "engine.h"
#include "volume.h"

struct bench {
	unsigned n, k, p;
	struct za_io *io;
	struct za_dev **devs;
	char (*paths)[512];
	struct za_engine *e;
	struct za_volume *v;
	struct za_engine_params prm; /* to start the engine again */
	uint8_t *states;
};

static uint64_t rng = 0x2545f4914f6cdd1dull;
/* The volume's checkpoint interval (0: its default). */
static uint64_t open_ckpt_interval;
static uint64_t map_cache_bytes; /* --map-cache */

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static uint64_t dev_bytes(const struct bench *b)
{
	uint64_t sum = 0;
	unsigned i;

	for (i = 0; i < b->n; i++)
		sum += b->devs[i]->stats.write_bytes;
	return sum;
}

static int bench_open(struct bench *b, const char *dir, uint64_t drive_bytes,
		      uint64_t zone_bytes)
{
	struct za_engine_params prm = { 0 };
	struct za_volume_params vp = { 0 };
	struct za_emu_params ep;
	uint8_t *states = calloc(b->n, 1);
	unsigned i;

	b->devs = calloc(b->n, sizeof(*b->devs));
	b->paths = calloc(b->n, sizeof(*b->paths));
	if (!states || !b->devs || !b->paths || za_io_new(NULL, &b->io))
		return -ENOMEM;
	for (i = 0; i < b->n; i++) {
		snprintf(b->paths[i], sizeof(b->paths[i]), "%s/za-vb-%d-%03u",
			 dir, (int)getpid(), i);
		za_emu_params_default(&ep, ZA_DEV_MODEL_HM_SMR);
		ep.size_bytes = drive_bytes;
		ep.zone_size_bytes = zone_bytes;
		ep.nr_conv_zones = 0;
		ep.cache_bytes = 0;
		if (za_emu_create(b->paths[i], &ep, true) ||
		    za_dev_open(b->io, b->paths[i], 0, &b->devs[i]))
			return -EIO;
		/* Open files live on; nothing is left behind if we die. */
		unlink(b->paths[i]);
		states[i] = ZA_MEMBER_ONLINE;
	}
	prm.geom.k = (uint8_t)b->k;
	prm.geom.p = (uint8_t)b->p;
	prm.geom.matrix = ZA_EC_MATRIX_CAUCHY;
	prm.geom.chunk_bytes = 65536;
	prm.geom.stripe_rows = 4;
	prm.geom.lblock_bytes = 4096;
	prm.geom.hdr_bytes = 4096;
	za_uuid_gen(&prm.array_uuid);
	prm.nr_members = b->n;
	prm.devs = b->devs;
	prm.states = states;
	prm.next_seq = 1;
	prm.next_seg_id = 1;
	if (za_engine_new(b->io, &prm, &b->e))
		return -EINVAL;
	vp.eng = b->e;
	vp.size_bytes = za_volume_default_size(b->e);
	vp.ckpt_interval_bytes = open_ckpt_interval;
	vp.map_cache_bytes = map_cache_bytes;
	b->prm = prm;
	b->states = states;
	if (!vp.size_bytes)
		return -ENOSPC;
	return za_volume_new(b->io, &vp, &b->v);
}

/* CPU time of this process so far (user + system), in ns. */
static uint64_t cpu_ns(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) *
		       1000000000ull +
	       ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) *
		       1000ull;
}

/* The CPU time of the last bench_recover_once(). */
static uint64_t last_recover_cpu_ns;

/*
 * Drop the volume and the engine (nothing in memory survives, the drives
 * keep what they hold), start both again over the same drives and
 * recover. Returns the recovery time in ns, or 0 on failure.
 */
static uint64_t bench_recover_once(struct bench *b,
				   uint64_t ckpt_interval_bytes,
				   struct za_volume_stats *st)
{
	struct za_volume_params vp = { 0 };
	uint64_t size = za_volume_size(b->v), t0, t1;

	while (za_volume_busy(b->v) || za_engine_busy(b->e))
		za_io_run_once(b->io);
	za_volume_free(b->v);
	za_engine_free(b->e);
	b->v = NULL;
	if (za_engine_new(b->io, &b->prm, &b->e))
		return 0;
	vp.eng = b->e;
	vp.size_bytes = size;
	vp.ckpt_interval_bytes = ckpt_interval_bytes;
	vp.map_cache_bytes = map_cache_bytes;
	if (za_volume_new(b->io, &vp, &b->v))
		return 0;
	last_recover_cpu_ns = cpu_ns();
	t0 = za_io_now_ns();
	if (za_volume_recover(b->v))
		return 0;
	t1 = za_io_now_ns();
	last_recover_cpu_ns = cpu_ns() - last_recover_cpu_ns;
	za_volume_get_stats(b->v, st);
	return t1 - t0 ? t1 - t0 : 1;
}

/* The median of three recoveries (the first finishes partly written
 * zones; the drives hold the same stripes for the next two). */
static uint64_t median_cpu_ns; /* of the last bench_recover() */

static uint64_t bench_recover(struct bench *b, uint64_t ckpt_interval_bytes,
			      struct za_volume_stats *st)
{
	uint64_t t[3], c[3], x;
	int i, j;

	for (i = 0; i < 3; i++) {
		t[i] = bench_recover_once(b, ckpt_interval_bytes, st);
		if (!t[i])
			return 0;
		c[i] = last_recover_cpu_ns;
		for (j = i; j > 0 && t[j] < t[j - 1]; j--) {
			x = t[j];
			t[j] = t[j - 1];
			t[j - 1] = x;
		}
		for (j = i; j > 0 && c[j] < c[j - 1]; j--) {
			x = c[j];
			c[j] = c[j - 1];
			c[j - 1] = x;
		}
	}
	median_cpu_ns = c[1];
	return t[1];
}

/* Write @blocks of 1 MiB writes from @lba, then @syncs synced 4 KiB
 * writes at random places below @lba + blocks. 0 or -errno. */
static int fill(struct bench *b, uint8_t *buf, uint64_t lba, uint64_t blocks,
		uint64_t syncs);

static int bench_recovery(struct bench *b, uint64_t fill_gib, uint64_t syncs,
			  uint8_t *buf)
{
	uint64_t blocks = fill_gib << 18, vb = za_volume_size(b->v) / 4096;
	uint64_t t_full, t_stop, t_after, more;
	struct za_volume_stats full, stop, after;
	struct za_engine_stats es;

	if (blocks > vb * 80 / 100) {
		fprintf(stderr, "%llu GiB do not fit the volume (%llu MiB)\n",
			(unsigned long long)fill_gib,
			(unsigned long long)(vb >> 8));
		return 1;
	}
	/* No checkpoint while filling: the first recovery replays all. */
	fprintf(stderr, "filling %llu GiB, then %llu synced 4 KiB writes\n",
		(unsigned long long)fill_gib, (unsigned long long)syncs);
	if (fill(b, buf, 0, blocks, syncs))
		return 1;
	za_engine_get_stats(b->e, &es);
	t_full = bench_recover(b, UINT64_MAX, &full);
	/* A clean stop writes a checkpoint: nothing left to replay. */
	if (!t_full || za_volume_checkpoint_sync(b->v))
		return 1;
	t_stop = bench_recover(b, UINT64_MAX, &stop);
	/* A checkpoint, then 10% more written before the crash. */
	more = blocks / 10 / 256 * 256;
	if (!t_stop || za_volume_checkpoint_sync(b->v) ||
	    fill(b, buf, 0, more, syncs / 10))
		return 1;
	t_after = bench_recover(b, UINT64_MAX, &after);
	if (!t_after)
		return 1;
	printf("{\"drives\":%u,\"k\":%u,\"p\":%u,\"fill_bytes\":%llu,"
	       "\"sync_writes\":%llu,\"stripes_on_drives\":%llu,"
	       "\"full_replay_ms\":%.1f,\"full_replay_stripes\":%llu,"
	       "\"ckpt_at_stop_ms\":%.1f,\"ckpt_at_stop_stripes\":%llu,"
	       "\"ckpt_parts\":%llu,"
	       "\"ckpt_then_10pct_ms\":%.1f,\"ckpt_then_10pct_stripes\":%llu,"
	       "\"map_extents\":%llu}\n",
	       b->n, b->k, b->p, (unsigned long long)blocks * 4096,
	       (unsigned long long)syncs, (unsigned long long)es.next_seq - 1,
	       t_full / 1e6, (unsigned long long)full.recovered_stripes,
	       t_stop / 1e6, (unsigned long long)stop.recovered_stripes,
	       (unsigned long long)stop.checkpoint_blocks, t_after / 1e6,
	       (unsigned long long)after.recovered_stripes,
	       (unsigned long long)after.map_extents);
	return 0;
}

static void fill_rand(uint8_t *buf, size_t len);

/*
 * S4 (--checkpoints MAX): a checkpoint's cost against the map's size. The
 * map grows to 1 k, 16 k, 256 k ... MAX extents (single 4 KiB writes at
 * even LBAs: one extent each) with a checkpoint at each size; then
 * @dirty of those blocks are written again at random and one more
 * checkpoint taken, alone on the drives: how long it held writes (its
 * quiet point's flush included), its snapshot's part of that, the map
 * pages it wrote and its device bytes. With incremental checkpoints
 * these follow @dirty, not the map; a whole-map checkpoint would write
 * 40 B per extent (whole_map_bytes, computed, for reference).
 */
static int bench_checkpoints(struct bench *b, uint64_t max_ext, uint64_t dirty,
			     uint8_t *buf)
{
	uint64_t vb = za_volume_size(b->v) / 4096, have = 0, target, i;
	const char *sep = "";

	if (2 * max_ext > vb * 8 / 10) {
		fprintf(stderr, "%llu extents do not fit the volume\n",
			(unsigned long long)max_ext);
		return 1;
	}
	printf("[");
	for (target = 1000;; target *= 16) {
		struct za_volume_stats st;
		uint64_t d0, d1;

		if (target > max_ext)
			target = max_ext;
		fprintf(stderr, "map of %llu extents\n",
			(unsigned long long)target);
		for (; have < target; have++) {
			fill_rand(buf, 4096);
			if (za_volume_write_sync(b->v, 2 * have * 4096, 4096,
						 buf, false))
				return 1;
		}
		if (za_volume_flush_sync(b->v) ||
		    za_volume_checkpoint_sync(b->v))
			return 1;
		for (i = 0; i < dirty; i++) {
			fill_rand(buf, 4096);
			if (za_volume_write_sync(b->v,
						 2 * (rnd() % have) * 4096,
						 4096, buf, false))
				return 1;
		}
		if (za_volume_flush_sync(b->v))
			return 1;
		d0 = dev_bytes(b);
		if (za_volume_checkpoint_sync(b->v))
			return 1;
		d1 = dev_bytes(b);
		za_volume_get_stats(b->v, &st);
		printf("%s\n {\"extents\":%llu,\"dirty_blocks\":%llu,"
		       "\"hold_ms\":%.3f,\"snapshot_ms\":%.3f,"
		       "\"pages_written\":%llu,\"pages\":%llu,"
		       "\"parts\":%llu,\"device_bytes\":%llu,"
		       "\"whole_map_bytes\":%llu}",
		       sep, (unsigned long long)st.map_extents,
		       (unsigned long long)dirty, st.checkpoint_hold_ns / 1e6,
		       st.checkpoint_snapshot_ns / 1e6,
		       (unsigned long long)st.checkpoint_pages_written,
		       (unsigned long long)st.checkpoint_pages,
		       (unsigned long long)st.checkpoint_blocks,
		       (unsigned long long)(d1 - d0),
		       (unsigned long long)((st.map_extents * 40 + 3999) /
					    4000 * 4096 * (b->p + 1)));
		fflush(stdout);
		sep = ",";
		if (target == max_ext)
			break;
	}
	printf("\n]\n");
	return 0;
}

/*
 * S5 (--kill EXTENTS): recovery after kill -9 against a clean restart,
 * with a map of EXTENTS extents (single 4 KiB writes at even LBAs). A
 * clean stop writes a checkpoint: its restart loads it and replays
 * nothing. Then as much as the volume writes between two checkpoints by
 * default (an eighth of the volume within 16 MiB..1 GiB, at least 64
 * (p+1) times the live checkpoint's blocks: ckpt_interval()) is
 * written as random 4 KiB overwrites of those blocks and flushed, and
 * the process "dies" without a checkpoint: the worst kill -9, just
 * before the next one was due. Both recoveries are the median of three,
 * wall and CPU time.
 */
static int bench_kill(struct bench *b, uint64_t ext, uint8_t *buf)
{
	uint64_t vb = za_volume_size(b->v) / 4096, i, interval, base;
	struct za_volume_stats clean, kill;
	uint64_t t_clean, t_kill, c_clean;

	if (2 * ext > vb * 8 / 10) {
		fprintf(stderr, "%llu extents do not fit the volume\n",
			(unsigned long long)ext);
		return 1;
	}
	fprintf(stderr, "map of %llu extents\n", (unsigned long long)ext);
	for (i = 0; i < ext; i++) {
		fill_rand(buf, 4096);
		if (za_volume_write_sync(b->v, 2 * i * 4096, 4096, buf, false))
			return 1;
	}
	if (za_volume_flush_sync(b->v) || za_volume_checkpoint_sync(b->v))
		return 1;
	t_clean = bench_recover(b, UINT64_MAX, &clean);
	c_clean = median_cpu_ns;
	if (!t_clean)
		return 1;
	base = vb / 8;
	if (base < (16ull << 20) / 4096)
		base = (16ull << 20) / 4096;
	if (base > (1ull << 30) / 4096)
		base = (1ull << 30) / 4096;
	interval = 64 * (b->p + 1) * clean.checkpoint_blocks;
	if (interval < base)
		interval = base;
	fprintf(stderr, "%llu random 4 KiB overwrites, then kill\n",
		(unsigned long long)interval);
	for (i = 0; i < interval; i++) {
		fill_rand(buf, 4096);
		if (za_volume_write_sync(b->v, 2 * (rnd() % ext) * 4096, 4096,
					 buf, false))
			return 1;
	}
	if (za_volume_flush_sync(b->v))
		return 1;
	t_kill = bench_recover(b, UINT64_MAX, &kill);
	if (!t_kill)
		return 1;
	printf("{\"extents\":%llu,\"clean_ms\":%.1f,\"clean_cpu_ms\":%.1f,"
	       "\"clean_replayed\":%llu,\"interval_blocks\":%llu,"
	       "\"kill_ms\":%.1f,\"kill_cpu_ms\":%.1f,"
	       "\"kill_replayed\":%llu,\"kill_extents\":%llu}\n",
	       (unsigned long long)clean.map_extents, t_clean / 1e6,
	       c_clean / 1e6, (unsigned long long)clean.recovered_stripes,
	       (unsigned long long)interval, t_kill / 1e6, median_cpu_ns / 1e6,
	       (unsigned long long)kill.recovered_stripes,
	       (unsigned long long)kill.map_extents);
	return 0;
}

static void bench_close(struct bench *b)
{
	unsigned i;

	free(b->states);
	while (za_volume_busy(b->v) || za_engine_busy(b->e))
		za_io_run_once(b->io);
	za_volume_free(b->v);
	za_engine_free(b->e);
	for (i = 0; i < b->n; i++) {
		za_dev_close(b->devs[i]);
		unlink(b->paths[i]);
	}
	free(b->devs);
	free(b->paths);
	za_io_free(b->io);
}

static void fill_rand(uint8_t *buf, size_t len)
{
	size_t i;

	for (i = 0; i < len / 8; i++)
		((uint64_t *)buf)[i] = rnd();
}

static int fill(struct bench *b, uint8_t *buf, uint64_t lba, uint64_t blocks,
		uint64_t syncs)
{
	uint64_t i;

	for (i = 0; i < blocks; i += 256) {
		fill_rand(buf, 1 << 20);
		if (za_volume_write_sync(b->v, (lba + i) * 4096, 1 << 20, buf,
					 false))
			return -EIO;
	}
	for (i = 0; i < syncs; i++) {
		fill_rand(buf, 4096);
		if (za_volume_write_sync(b->v, (lba + rnd() % blocks) * 4096,
					 4096, buf, false) ||
		    za_volume_flush_sync(b->v))
			return -EIO;
	}
	return za_volume_flush_sync(b->v);
}

/* Bytes a map costs per extent, measured on a million distinct ones. */
static double map_bytes_per_extent(void)
{
	const uint64_t n = 1000000;
	struct za_map_loc loc = { 0, 0, ZA_MAP_DATA };
	struct za_map *m;
	size_t b0, b1;
	uint64_t i;

	if (za_map_new(&m))
		return -1;
	b0 = za_map_bytes(m);
	for (i = 0; i < n; i++) {
		loc.group = i; /* another group: no coalescing */
		if (za_map_set(m, i * 256, 256, &loc, NULL, NULL)) {
			za_map_free(m);
			return -1;
		}
	}
	b1 = za_map_bytes(m);
	za_map_free(m);
	return (double)(b1 - b0) / (double)n;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "drives", required_argument, NULL, 'n' },
		{ "drive-mib", required_argument, NULL, 'd' },
		{ "zone-mib", required_argument, NULL, 'z' },
		{ "dir", required_argument, NULL, 'D' },
		{ "sync-ops", required_argument, NULL, 's' },
		{ "overwrite", required_argument, NULL, 'o' },
		{ "recovery", required_argument, NULL, 'R' },
		{ "checkpoints", required_argument, NULL, 'C' },
		{ "dirty", required_argument, NULL, 'y' },
		{ "kill", required_argument, NULL, 'K' },
		{ "map-cache", required_argument, NULL, 'M' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct bench b = { .n = 12, .k = 10, .p = 2 };
	const char *dir = "/dev/shm";
	uint64_t drive_mib = 1024, zone_mib = 64, sync_ops = 2000, rec_gib = 0;
	uint64_t ckpt_ext = 0, dirty = 1000, kill_ext = 0;
	double overwrite = 1.0;
	struct za_volume_stats st;
	uint64_t vb, lba, d0, u0, fill_blocks, user, dev;
	double p5, p5raw, per_ext, p6s, p6y, p6g;
	uint64_t map0, map1, ext1;
	uint8_t *buf;
	int c;

	while ((c = getopt_long(argc, argv, "k:p:h", lo, NULL)) != -1) {
		switch (c) {
		case 'n':
			b.n = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'k':
			b.k = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'p':
			b.p = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'd':
			drive_mib = strtoull(optarg, NULL, 10);
			break;
		case 'z':
			zone_mib = strtoull(optarg, NULL, 10);
			break;
		case 'D':
			dir = optarg;
			break;
		case 's':
			sync_ops = strtoull(optarg, NULL, 10);
			break;
		case 'o':
			overwrite = strtod(optarg, NULL);
			break;
		case 'R':
			rec_gib = strtoull(optarg, NULL, 10);
			break;
		case 'C':
			ckpt_ext = strtoull(optarg, NULL, 10);
			/* Only the checkpoints it asks for. */
			open_ckpt_interval = UINT64_MAX;
			break;
		case 'y':
			dirty = strtoull(optarg, NULL, 10);
			break;
		case 'K':
			kill_ext = strtoull(optarg, NULL, 10);
			open_ckpt_interval = UINT64_MAX;
			break;
		case 'M':
			map_cache_bytes = strtoull(optarg, NULL, 10);
			break;
		case 'h':
			printf("usage: za-volume-bench [--drives N] [-k K] [-p P] "
			       "[--drive-mib M] [--zone-mib M] [--dir DIR]\n"
			       "         [--sync-ops N] [--overwrite X] "
			       "[--recovery GIB]\n"
			       "         [--checkpoints MAX_EXTENTS [--dirty "
			       "BLOCKS]] [--kill EXTENTS]\n"
			       "         [--map-cache BYTES]\n");
			return 0;
		default:
			return 2;
		}
	}
	za_log_set_level(getenv("ZA_BENCH_DEBUG") ? ZA_LOG_DEBUG : ZA_LOG_ERR);
	if (posix_memalign((void **)&buf, 4096, 1 << 20))
		return 1;

	/* P5 and P6 streaming: a sequential fill in 1 MiB writes. */
	if (bench_open(&b, dir, drive_mib << 20, zone_mib << 20)) {
		fprintf(stderr, "cannot set up the drives in %s\n", dir);
		return 1;
	}
	if (ckpt_ext) {
		c = bench_checkpoints(&b, ckpt_ext, dirty, buf);
		bench_close(&b);
		free(buf);
		return c;
	}
	if (kill_ext) {
		c = bench_kill(&b, kill_ext, buf);
		bench_close(&b);
		free(buf);
		return c;
	}
	if (rec_gib) {
		c = bench_recovery(&b, rec_gib, sync_ops, buf);
		bench_close(&b);
		free(buf);
		return c;
	}
	vb = za_volume_size(b.v) / 4096;
	fill_blocks = vb * 80 / 100 / 256 * 256;
	fprintf(stderr, "volume %llu MiB on %u drives; filling %llu MiB\n",
		(unsigned long long)(vb >> 8), b.n,
		(unsigned long long)(fill_blocks >> 8));
	za_volume_get_stats(b.v, &st);
	map0 = st.map_bytes;
	d0 = dev_bytes(&b);
	for (lba = 0; lba < fill_blocks; lba += 256) {
		fill_rand(buf, 1 << 20);
		if (za_volume_write_sync(b.v, lba * 4096, 1 << 20, buf, false))
			return 1;
	}
	if (za_volume_flush_sync(b.v))
		return 1;
	/*
	 * P5: how the map grows with the data, per TiB. The fill gives the
	 * extents per byte of data (one per group, after a sequential fill);
	 * a map of a million such extents, built here, gives the bytes each
	 * costs. The map's first allocations (a leaf of 64 extents, spare
	 * leaves, the index: ~10 KiB) do not grow with capacity: divided by
	 * this bench's fill of a GiB or so, they read as 8.5 MiB "per TiB"
	 * (p5_raw_bytes_per_tib, reported beside it).
	 */
	za_volume_get_stats(b.v, &st);
	map1 = st.map_bytes;
	ext1 = st.map_extents;
	per_ext = map_bytes_per_extent();
	if (per_ext < 0)
		return 1;
	p5 = (double)ext1 * per_ext * (double)(1ull << 40) /
	     ((double)fill_blocks * 4096);
	p5raw = (double)(map1 - map0) * (double)(1ull << 40) /
		((double)fill_blocks * 4096);
	p6s = (double)(dev_bytes(&b) - d0) / ((double)fill_blocks * 4096);

	/* P6, 4 KiB write + FLUSH. */
	d0 = dev_bytes(&b);
	for (u0 = 0; u0 < sync_ops; u0++) {
		fill_rand(buf, 4096);
		if (za_volume_write_sync(b.v, (rnd() % fill_blocks) * 4096,
					 4096, buf, false) ||
		    za_volume_flush_sync(b.v))
			return 1;
	}
	p6y = (double)(dev_bytes(&b) - d0) / ((double)sync_ops * 4096);

	/* P6, GC: random 4 KiB overwrites of the 80% full volume. */
	user = (uint64_t)((double)fill_blocks * overwrite);
	d0 = dev_bytes(&b);
	for (u0 = 0; u0 < user; u0++) {
		fill_rand(buf, 4096);
		if (za_volume_write_sync(b.v, (rnd() % fill_blocks) * 4096,
					 4096, buf, false))
			return 1;
	}
	if (za_volume_flush_sync(b.v))
		return 1;
	dev = dev_bytes(&b) - d0;
	p6g = (double)dev / ((double)user * 4096);
	za_volume_get_stats(b.v, &st);
	printf("{\"drives\":%u,\"k\":%u,\"p\":%u,\"volume_bytes\":%llu,"
	       "\"fill_bytes\":%llu,"
	       "\"p5_map_bytes_per_tib\":%.0f,\"p5_limit\":%u,"
	       "\"p5_raw_bytes_per_tib\":%.0f,\"p5_map_bytes\":%llu,"
	       "\"p5_map_extents\":%llu,\"p5_bytes_per_extent\":%.2f,"
	       "\"p6_stream\":%.4f,\"p6_stream_limit\":%.4f,"
	       "\"p6_sync\":%.4f,\"p6_sync_limit\":%u,"
	       "\"p6_gc\":%.4f,\"p6_gc_limit\":3.0,"
	       "\"gc_runs\":%llu,\"gc_moved_blocks\":%llu,"
	       "\"gc_freed_groups\":%llu}\n",
	       b.n, b.k, b.p, (unsigned long long)vb * 4096,
	       (unsigned long long)fill_blocks * 4096, p5, 1u << 20, p5raw,
	       (unsigned long long)map1, (unsigned long long)ext1, per_ext, p6s,
	       (double)(b.k + b.p) / b.k * 1.03, p6y, 2 * (b.p + 1), p6g,
	       (unsigned long long)st.gc_runs,
	       (unsigned long long)st.gc_moved_blocks,
	       (unsigned long long)st.gc_freed_groups);
	bench_close(&b);
	free(buf);
	return 0;
}
