// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * za-rebuild-bench - P3 and P7 of the design brief, in one process, on
 * memory-backed emulated drives with the bandwidth model on: fills a
 * volume half full (sequential writes, unlimited bandwidth), limits every
 * drive to --bw, fails one member and measures the rebuild alone (time,
 * bytes read, progress over time), then 4 KiB FUA write latency during
 * the rebuilds of --p7-rounds further members failed one after another,
 * and on the healthy array for as long.
 *
 * Each figure is printed next to its reference from the same run: the
 * limit the survivors' bandwidth sets for the bytes that must move (k
 * reads and one write per byte of lost live column), a whole-drive
 * rebuild (one drive's capacity at one drive's bandwidth), k x the live
 * bytes lost, and the healthy latency. It asserts nothing.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dev-emu.h"
#include "log.h"
#include "rebuild.h"
#include "engine.h"
#include "volume.h"

struct opts {
	unsigned n, k, p, writers;
	uint64_t drive_bytes, zone_bytes, bw;
	double healthy_s;
	const char *dir, *out_dir;
	unsigned max_cols, rows, p7_rounds;
	uint32_t chunk;
};

struct writer {
	struct za_vol_req r;
	uint64_t off, t0;
	bool busy;
};

static struct za_volume *vol;
static uint8_t *wbuf;
static uint64_t *lat;
static size_t nlat, caplat;
static bool writing, rebuilding_done;
static uint64_t span_blocks, wseed = 1;
static int wfail;

static void usage(FILE *f)
{
	fprintf(f,
		"usage: za-rebuild-bench [--drives N] [-k K] [-p P] "
		"[--bw MB/s] [--drive-mib M]\n"
		"         [--zone-kib K] [--chunk-kib K] [--rows R] [--writers N] [--healthy-s S] "
		"[--max-cols N]\n"
		"         [--p7-rounds R] [--dir DIR] [--out DIR]\n");
}

static void lat_add(uint64_t ns)
{
	if (nlat == caplat) {
		size_t cap = caplat ? 2 * caplat : 4096;
		uint64_t *n = realloc(lat, cap * sizeof(*n));

		if (!n)
			return;
		lat = n;
		caplat = cap;
	}
	lat[nlat++] = ns;
}

static void wr_start(struct writer *w);

static void wr_done(struct za_vol_req *r, int result)
{
	struct writer *w = r->priv;

	w->busy = false;
	if (result)
		wfail = result;
	else
		lat_add(za_io_now_ns() - w->t0);
	if (writing)
		wr_start(w);
}

static void wr_start(struct writer *w)
{
	wseed = wseed * 6364136223846793005ull + 1442695040888963407ull;
	w->off = (wseed >> 20) % span_blocks * 4096;
	memset(&w->r, 0, sizeof(w->r));
	w->r.done = wr_done;
	w->r.priv = w;
	w->busy = true;
	w->t0 = za_io_now_ns();
	za_volume_write(vol, &w->r, w->off, 4096, wbuf, true);
}

static int cmp64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static double pct(double q)
{
	size_t i;

	if (!nlat)
		return 0;
	i = (size_t)(q / 100.0 * (double)(nlat - 1) + 0.5);
	return (double)lat[i] / 1e3;
}

/* Write the latency distribution and return p99.99 in microseconds. */
static double lat_dump(const char *dir, const char *name)
{
	static const double qs[] = { 50, 90, 99, 99.9, 99.99, 100 };
	char path[4096];
	FILE *f;
	size_t i;

	qsort(lat, nlat, sizeof(*lat), cmp64);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	if (f) {
		fprintf(f, "# percentile latency_us (%zu samples)\n", nlat);
		for (i = 0; i < sizeof(qs) / sizeof(qs[0]); i++)
			fprintf(f, "%g %.1f\n", qs[i], pct(qs[i]));
		fclose(f);
	}
	return pct(99.99);
}

static void rb_finished(struct za_rebuild *rb, int result, void *priv)
{
	(void)rb;
	(void)priv;
	if (result)
		fprintf(stderr, "rebuild ended: %s\n", strerror(-result));
	rebuilding_done = true;
}

int main(int argc, char **argv)
{
	struct opts o = { .n = 256,
			  .k = 8,
			  .p = 2,
			  .writers = 4,
			  .drive_bytes = 32ull << 20,
			  .zone_bytes = 512ull << 10,
			  .bw = 1000000,
			  .healthy_s = 3,
			  .dir = "/dev/shm",
			  .out_dir = ".",
			  .chunk = 32u << 10,
			  .rows = 4,
			  .p7_rounds = 1 };
	static const struct option lo[] = {
		{ "drives", required_argument, NULL, 'n' },
		{ "bw", required_argument, NULL, 'b' },
		{ "drive-mib", required_argument, NULL, 'd' },
		{ "zone-kib", required_argument, NULL, 'z' },
		{ "writers", required_argument, NULL, 'w' },
		{ "healthy-s", required_argument, NULL, 'H' },
		{ "max-cols", required_argument, NULL, 'c' },
		{ "chunk-kib", required_argument, NULL, 'C' },
		{ "rows", required_argument, NULL, 'r' },
		{ "p7-rounds", required_argument, NULL, 'R' },
		{ "dir", required_argument, NULL, 'D' },
		{ "out", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct za_engine_params prm = { 0 };
	struct za_volume_params vp = { 0 };
	struct za_rebuild_params rp = { 0 };
	struct za_rebuild_status rs;
	struct za_rebuild *rb;
	struct za_engine *eng;
	struct za_dev **devs;
	struct writer *ws;
	uint8_t *states, *fill;
	struct za_io *io;
	uint64_t vsize, off, t0, t1, t_end, next_sample, p7_ns = 0;
	size_t rebuild_n;
	double healthy_n, p_healthy, p_rebuild;
	char path[4096];
	FILE *prog;
	unsigned i, r;
	int c;

	while ((c = getopt_long(argc, argv, "k:p:h", lo, NULL)) != -1) {
		switch (c) {
		case 'n':
			o.n = (unsigned)atoi(optarg);
			break;
		case 'k':
			o.k = (unsigned)atoi(optarg);
			break;
		case 'p':
			o.p = (unsigned)atoi(optarg);
			break;
		case 'b':
			o.bw = (uint64_t)(strtod(optarg, NULL) * 1e6);
			break;
		case 'd':
			o.drive_bytes = strtoull(optarg, NULL, 0) << 20;
			break;
		case 'z':
			o.zone_bytes = strtoull(optarg, NULL, 0) << 10;
			break;
		case 'w':
			o.writers = (unsigned)atoi(optarg);
			break;
		case 'H':
			o.healthy_s = strtod(optarg, NULL);
			break;
		case 'c':
			o.max_cols = (unsigned)atoi(optarg);
			break;
		case 'C':
			o.chunk = (uint32_t)atoi(optarg) << 10;
			break;
		case 'r':
			o.rows = (unsigned)atoi(optarg);
			break;
		case 'R':
			o.p7_rounds = (unsigned)atoi(optarg);
			break;
		case 'D':
			o.dir = optarg;
			break;
		case 'o':
			o.out_dir = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc || o.n < o.k + o.p + 1 + o.p7_rounds || !o.k ||
	    !o.p || !o.bw || !o.writers || !o.p7_rounds) {
		usage(stderr);
		return 2;
	}
	za_log_set_level(getenv("ZA_RB_DEBUG") ? ZA_LOG_DEBUG : ZA_LOG_ERR);
	devs = calloc(o.n, sizeof(*devs));
	states = calloc(o.n, 1);
	ws = calloc(o.writers, sizeof(*ws));
	if (!devs || !states || !ws || za_io_new(NULL, &io))
		return 1;
	fprintf(stderr, "za-rebuild-bench: %u drives of %llu MiB, %u+%u\n", o.n,
		(unsigned long long)(o.drive_bytes >> 20), o.k, o.p);
	for (i = 0; i < o.n; i++) {
		struct za_emu_params ep;

		snprintf(path, sizeof(path), "%s/za-rbench-%d-%03u", o.dir,
			 (int)getpid(), i);
		za_emu_params_default(&ep, ZA_DEV_MODEL_HM_SMR);
		ep.size_bytes = o.drive_bytes;
		ep.zone_size_bytes = o.zone_bytes;
		ep.nr_conv_zones = 0;
		ep.cache_bytes = 0;
		if (za_emu_create(path, &ep, true) ||
		    za_dev_open(io, path, 0, &devs[i])) {
			fprintf(stderr, "cannot create drive %s\n", path);
			return 1;
		}
		unlink(path); /* nothing left behind if we die */
		states[i] = ZA_MEMBER_ONLINE;
	}
	prm.geom.k = (uint8_t)o.k;
	prm.geom.p = (uint8_t)o.p;
	prm.geom.matrix = ZA_EC_MATRIX_CAUCHY;
	prm.geom.chunk_bytes = o.chunk;
	prm.geom.stripe_rows = (uint8_t)o.rows;
	prm.geom.lblock_bytes = 4096;
	prm.geom.hdr_bytes = 4096;
	za_uuid_gen(&prm.array_uuid);
	prm.nr_members = o.n;
	prm.devs = devs;
	prm.states = states;
	prm.next_seq = 1;
	prm.next_seg_id = 1;
	if (za_engine_new(io, &prm, &eng)) {
		fprintf(stderr, "cannot start the engine\n");
		return 1;
	}
	vp.eng = eng;
	if (za_volume_new(io, &vp, &vol)) {
		fprintf(stderr, "cannot start the volume\n");
		return 1;
	}
	/* Half full: sequential 1 MiB writes at full speed. */
	vsize = za_volume_size(vol);
	fill = malloc(1u << 20);
	if (posix_memalign((void **)&wbuf, 4096, 4096) || !fill)
		return 1;
	for (i = 0; i < (1u << 20) / 8; i++)
		((uint64_t *)fill)[i] = i * 0x9e3779b97f4a7c15ull + 7;
	memset(wbuf, 0x5a, 4096);
	fprintf(stderr, "filling %llu MiB of %llu ...\n",
		(unsigned long long)(vsize / 2 >> 20),
		(unsigned long long)(vsize >> 20));
	for (off = 0; off + (1u << 20) <= vsize / 2; off += 1u << 20) {
		((uint64_t *)fill)[0] = off;
		if (za_volume_write_sync(vol, off, 1u << 20, fill, false)) {
			fprintf(stderr, "fill failed at %llu\n",
				(unsigned long long)off);
			return 1;
		}
	}
	if (za_volume_flush_sync(vol))
		return 1;
	span_blocks = vsize / 2 / 4096;
	for (i = 0; i < o.n; i++)
		za_emu_set_perf(devs[i], o.bw, 0, 0);

	/* P3: fail member 0 and rebuild, nothing else running. */
	rp.io = io;
	rp.eng = eng;
	rp.vol = vol;
	rp.max_cols = o.max_cols;
	rp.window = getenv("ZA_RB_WINDOW") ?
			    (unsigned)atoi(getenv("ZA_RB_WINDOW")) :
			    0;
	rp.finished = rb_finished;
	if (za_rebuild_new(&rp, &rb))
		return 1;
	za_engine_member_fail(eng, 0, -EIO);
	while (za_engine_busy(eng))
		za_io_run_once(io);
	snprintf(path, sizeof(path), "%s/rebuild-progress.dat", o.out_dir);
	prog = fopen(path, "w");
	fprintf(stderr, "rebuild after member 0 failed\n");
	t0 = za_io_now_ns();
	za_rebuild_start(rb);
	next_sample = t0;
	while (!rebuilding_done) {
		uint64_t now = za_io_now_ns();

		if (now >= next_sample && prog) {
			za_rebuild_status(rb, &rs);
			fprintf(prog, "%.3f %.4f\n", (double)(now - t0) / 1e9,
				rs.job.total_bytes ?
					(double)rs.job.done_bytes /
						(double)rs.job.total_bytes :
					0.0);
			next_sample = now + 20000000ull;
		}
		za_io_run_once(io);
	}
	t1 = za_io_now_ns();
	za_rebuild_status(rb, &rs);

	/*
	 * P7: members 1..R fail one after another, each rebuilt while the
	 * writers run; then the same writers on the healthy array (healthy
	 * again: every failed member's columns are rebuilt) for as long in
	 * all, or --healthy-s if longer. p99.99 needs about 10^4 samples:
	 * one rebuild of a second gives a few hundred, whose p99.99 is
	 * their maximum, so the rounds pool several. Both runs are of about
	 * one length, so they meet the array's own stalls (a journal group
	 * filling, a data stripe destaged) about as often.
	 */
	while (za_rebuild_busy(rb) || za_engine_busy(eng))
		za_io_run_once(io);
	fprintf(stderr,
		"P7: %u rebuilds, each after a member failed, with %u "
		"writers\n",
		o.p7_rounds, o.writers);
	nlat = 0;
	writing = true;
	for (i = 0; i < o.writers; i++)
		wr_start(&ws[i]);
	for (r = 0; r < o.p7_rounds; r++) {
		uint64_t a = za_io_now_ns();

		za_engine_member_fail(eng, 1 + r, -EIO);
		rebuilding_done = false;
		za_rebuild_start(rb);
		while (!rebuilding_done)
			za_io_run_once(io);
		p7_ns += za_io_now_ns() - a;
	}
	writing = false;
	for (i = 0; i < o.writers; i++)
		while (ws[i].busy)
			za_io_run_once(io);
	rebuild_n = nlat;
	p_rebuild = lat_dump(o.out_dir, "latency-rebuild.dat");
	nlat = 0;
	while (za_rebuild_busy(rb) || za_engine_busy(eng))
		za_io_run_once(io);
	if ((double)p7_ns / 1e9 > o.healthy_s)
		o.healthy_s = (double)p7_ns / 1e9;
	fprintf(stderr, "healthy: %u writers of 4 KiB FUA writes for %.1f s\n",
		o.writers, o.healthy_s);
	writing = true;
	for (i = 0; i < o.writers; i++)
		wr_start(&ws[i]);
	t_end = za_io_now_ns() + (uint64_t)(o.healthy_s * 1e9);
	while (za_io_now_ns() < t_end)
		za_io_run_once(io);
	writing = false;
	for (i = 0; i < o.writers; i++)
		while (ws[i].busy)
			za_io_run_once(io);
	healthy_n = (double)nlat;
	p_healthy = lat_dump(o.out_dir, "latency-healthy.dat");

	{
		const struct za_stripe_layout *l = za_engine_layout(eng);
		double secs = (double)(t1 - t0) / 1e9;
		/* Bytes that must move: per lost live column slot, k slot
		 * reads and one slot write, spread over the survivors. */
		double slots = (double)rs.job.done_bytes /
			       (double)l->col_payload_bytes;
		double must = slots * (double)l->slot_bytes * (o.k + 1);
		double limit_s = must / ((double)(o.n - 1) * (double)o.bw);
		double whole_s = (double)o.drive_bytes / (double)o.bw;
		double read_ratio =
			rs.job.done_bytes ?
				(double)rs.read_bytes /
					((double)o.k *
					 (double)rs.job.done_bytes) :
				0;

		if (prog) {
			/* The limit line: a rebuild at the limit's pace. */
			fprintf(prog, "# limit %.3f s\n", limit_s);
			fclose(prog);
		}
		printf("{\"drives\":%u,\"k\":%u,\"p\":%u,\"drive_bytes\":%llu,"
		       "\"drive_bw_bytes_per_s\":%llu,\"live_lost_bytes\":%llu,"
		       "\"read_bytes\":%llu,\"written_bytes\":%llu,"
		       "\"rebuild_s\":%.3f,\"limit_s\":%.3f,"
		       "\"whole_drive_s\":%.3f,\"ratio_to_limit\":%.3f,"
		       "\"speedup_vs_whole_drive\":%.1f,"
		       "\"read_per_k_live\":%.4f,\"error\":%d,"
		       "\"latency_healthy_p9999_us\":%.1f,"
		       "\"latency_rebuild_p9999_us\":%.1f,"
		       "\"latency_ratio\":%.3f,\"samples_healthy\":%.0f,"
		       "\"samples_rebuild\":%zu,\"write_errors\":%d}\n",
		       o.n, o.k, o.p, (unsigned long long)o.drive_bytes,
		       (unsigned long long)o.bw,
		       (unsigned long long)rs.job.done_bytes,
		       (unsigned long long)rs.read_bytes,
		       (unsigned long long)rs.written_bytes, secs, limit_s,
		       whole_s, secs > 0 ? limit_s / secs : 0,
		       secs > 0 ? whole_s / secs : 0, read_ratio,
		       rs.job.last_error, p_healthy, p_rebuild,
		       p_healthy > 0 ? p_rebuild / p_healthy : 0, healthy_n,
		       rebuild_n, wfail);
	}
	while (za_rebuild_busy(rb) || za_volume_busy(vol) ||
	       za_engine_busy(eng))
		za_io_run_once(io);
	za_rebuild_free(rb);
	za_volume_free(vol);
	za_engine_free(eng);
	for (i = 0; i < o.n; i++)
		za_dev_close(devs[i]);
	za_io_free(io);
	free(devs);
	free(states);
	free(ws);
	free(fill);
	free(wbuf);
	free(lat);
	return 0;
}
