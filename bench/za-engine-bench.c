// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * za-engine-bench - write throughput of the segment engine on emulated
 * drives: N drives in DIR (tmpfs for "memory-backed"), k+p coding, full
 * stripes of random data written with many in flight for a fixed time.
 * Prints user bytes per second, device bytes per second and, when the
 * drives are bandwidth-limited (--bw), the limit N x bw x k/(k+p) and the
 * ratio to it (P2 in the design brief). It measures; it asserts nothing.
 * bench/engine.sh runs it next to za-ec-rate and reports the ratios.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dev-emu.h"
#include "dev.h"
#include "io.h"
#include "log.h"
#include "sb.h"
#include "engine.h"

struct opts {
	unsigned n, k, p, inflight;
	uint32_t chunk;
	uint64_t bw; /* bytes/s per drive; 0: unlimited */
	uint64_t zone_bytes, drive_bytes;
	double seconds;
	const char *dir;
	int json;
};

static struct za_engine *eng;
static unsigned outstanding;
static uint64_t bytes_done, stripes_done;
static int failed;

static void usage(FILE *f)
{
	fprintf(f,
		"usage: za-engine-bench --drives N -k K -p P [--chunk BYTES]\n"
		"         [--bw MB/s] [--seconds S] [--zone-mib M]\n"
		"         [--drive-mib M] [--inflight N] [--dir DIR] [--json]\n");
}

static void wdone(struct za_stripe_w *s, int result)
{
	if (result)
		failed = result;
	else {
		bytes_done += (uint64_t)s->nr_blocks * 4096;
		stripes_done++;
	}
	outstanding--;
	za_engine_stripe_put(eng, s);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "drives", required_argument, NULL, 'n' },
		{ "chunk", required_argument, NULL, 'c' },
		{ "bw", required_argument, NULL, 'b' },
		{ "seconds", required_argument, NULL, 's' },
		{ "zone-mib", required_argument, NULL, 'z' },
		{ "drive-mib", required_argument, NULL, 'd' },
		{ "inflight", required_argument, NULL, 'i' },
		{ "dir", required_argument, NULL, 'D' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { .n = 12,
			  .k = 10,
			  .p = 2,
			  .chunk = 65536,
			  .zone_bytes = 64ull << 20,
			  .drive_bytes = 2ull << 30,
			  .seconds = 3,
			  .dir = "/dev/shm",
			  .inflight = 4 };
	struct za_engine_params prm = { 0 };
	struct za_emu_params ep;
	struct za_dev **devs;
	uint8_t *states;
	struct za_io *io;
	struct za_engine_stats st;
	uint64_t t0, t1, dev_bytes = 0, nb;
	unsigned i;
	int c;
	char(*paths)[512];
	uint8_t *pattern;
	double secs, ubps, dbps, limit = 0;

	while ((c = getopt_long(argc, argv, "k:p:h", lo, NULL)) != -1) {
		switch (c) {
		case 'n':
			o.n = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'k':
			o.k = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'p':
			o.p = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'c':
			o.chunk = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'b':
			o.bw = (uint64_t)(strtod(optarg, NULL) * 1e6);
			break;
		case 's':
			o.seconds = strtod(optarg, NULL);
			break;
		case 'z':
			o.zone_bytes = strtoull(optarg, NULL, 10) << 20;
			break;
		case 'd':
			o.drive_bytes = strtoull(optarg, NULL, 10) << 20;
			break;
		case 'i':
			o.inflight = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'D':
			o.dir = optarg;
			break;
		case 'j':
			o.json = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc || o.n < o.k + o.p || !o.k || !o.p ||
	    o.seconds <= 0 || !o.inflight) {
		usage(stderr);
		return 2;
	}
	za_log_set_level(ZA_LOG_ERR);
	devs = calloc(o.n, sizeof(*devs));
	states = calloc(o.n, 1);
	paths = calloc(o.n, sizeof(*paths));
	if (!devs || !states || !paths || za_io_new(NULL, &io))
		return 1;
	for (i = 0; i < o.n; i++) {
		snprintf(paths[i], sizeof(paths[i]), "%s/za-bench-%d-%03u",
			 o.dir, (int)getpid(), i);
		za_emu_params_default(&ep, ZA_DEV_MODEL_HM_SMR);
		ep.size_bytes = o.drive_bytes;
		ep.zone_size_bytes = o.zone_bytes;
		ep.nr_conv_zones = 0;
		ep.cache_bytes = 0;
		ep.bw_bytes_per_s = o.bw;
		if (za_emu_create(paths[i], &ep, true) ||
		    za_dev_open(io, paths[i], 0, &devs[i])) {
			fprintf(stderr, "cannot create drive %s\n", paths[i]);
			return 1;
		}
		/* Open files live on; nothing is left behind if we die. */
		unlink(paths[i]);
		states[i] = ZA_MEMBER_ONLINE;
	}
	prm.geom.k = (uint8_t)o.k;
	prm.geom.p = (uint8_t)o.p;
	prm.geom.matrix = ZA_EC_MATRIX_CAUCHY;
	prm.geom.chunk_bytes = o.chunk;
	prm.geom.stripe_rows =
		(uint8_t)(o.chunk >= (256u << 10) ? 1 : (256u << 10) / o.chunk);
	prm.geom.lblock_bytes = 4096;
	prm.geom.hdr_bytes = 4096;
	za_uuid_gen(&prm.array_uuid);
	prm.nr_members = o.n;
	prm.devs = devs;
	prm.states = states;
	prm.next_seq = 1;
	prm.next_seg_id = 1;
	prm.inflight_per_seg = o.inflight;
	if (za_engine_new(io, &prm, &eng)) {
		fprintf(stderr, "cannot start the engine\n");
		return 1;
	}
	nb = za_engine_layout(eng)->data_blocks;
	/* Data with some entropy, prepared once: we measure the engine. */
	pattern = malloc(nb * 4096);
	for (i = 0; i < nb * 4096 / 8; i++)
		((uint64_t *)pattern)[i] = (uint64_t)i * 0x9e3779b97f4a7c15ull;

	t0 = za_io_now_ns();
	t1 = t0 + (uint64_t)(o.seconds * 1e9);
	while (!failed) {
		uint64_t now = za_io_now_ns();

		while (now < t1 &&
		       outstanding < o.inflight * (o.n / (o.k + o.p)) + 2) {
			struct za_stripe_w *s = za_engine_stripe_get(eng);
			uint32_t b;

			for (b = 0; b < nb; b++) {
				memcpy(za_stripe_w_block(eng, s, b),
				       pattern + (uint64_t)b * 4096, 4096);
				s->lbas[b] = b;
			}
			s->nr_blocks = (uint32_t)nb;
			s->done = wdone;
			outstanding++;
			za_engine_write(eng, s);
		}
		if (now >= t1 && !outstanding)
			break;
		za_io_run_once(io);
	}
	secs = (double)(za_io_now_ns() - t0) / 1e9;
	za_engine_get_stats(eng, &st);
	for (i = 0; i < o.n; i++)
		dev_bytes += devs[i]->stats.write_bytes;
	while (za_engine_busy(eng))
		za_io_run_once(io);
	za_engine_free(eng);
	for (i = 0; i < o.n; i++) {
		za_dev_close(devs[i]);
		unlink(paths[i]);
	}
	if (failed) {
		fprintf(stderr, "write failed: %s\n", strerror(-failed));
		return 1;
	}
	ubps = (double)bytes_done / secs;
	dbps = (double)dev_bytes / secs;
	if (o.bw)
		limit = (double)o.n * (double)o.bw * o.k / (o.k + o.p);
	if (o.json) {
		printf("{\"drives\":%u,\"k\":%u,\"p\":%u,\"chunk_bytes\":%u,"
		       "\"seconds\":%.3f,\"stripes\":%llu,"
		       "\"user_bytes_per_s\":%.0f,\"device_bytes_per_s\":%.0f,"
		       "\"device_per_user\":%.4f,\"drive_bw_bytes_per_s\":%llu,"
		       "\"limit_bytes_per_s\":%.0f,\"ratio_to_limit\":%.4f}\n",
		       o.n, o.k, o.p, o.chunk, secs,
		       (unsigned long long)stripes_done, ubps, dbps,
		       bytes_done ? (double)dev_bytes / (double)bytes_done : 0,
		       (unsigned long long)o.bw, limit,
		       limit > 0 ? ubps / limit : 0);
	} else {
		printf("%u drives, %u+%u, chunk %u: %.1f MB/s user, %.1f MB/s "
		       "device (x%.3f)",
		       o.n, o.k, o.p, o.chunk, ubps / 1e6, dbps / 1e6,
		       bytes_done ? (double)dev_bytes / (double)bytes_done : 0);
		if (limit > 0)
			printf(", limit %.1f MB/s, ratio %.3f", limit / 1e6,
			       ubps / limit);
		printf("\n");
	}
	free(pattern);
	free(devs);
	free(states);
	free(paths);
	za_io_free(io);
	return 0;
}
