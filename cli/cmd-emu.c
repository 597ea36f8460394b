// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * cmd-emu.c - `zarray emu create|powercut`: make emulated zoned drives
 * (one sparse or preallocated file each) and simulate a power cut on drives not in use.
 * Local commands: no daemon is involved.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dev-emu.h"
#include "dev.h"
#include "io.h"

static void emu_help(FILE *f)
{
	fprintf(f,
		"Usage: zarray emu create [OPTIONS] PATH...\n"
		"       zarray emu powercut PATH...\n"
		"\n"
		"create: make emulated zoned drives, one sparse file each.\n"
		"  --model hm-smr|zns   drive model (default hm-smr)\n"
		"  --size SIZE          capacity (default 16G; whole zones)\n"
		"  --zone-size SIZE     zone size (hm-smr 256M, zns 64M)\n"
		"  --zone-cap SIZE      zone capacity (hm-smr: zone size, zns "
		"60M)\n"
		"  --conv-zones N       conventional zones (hm-smr ~1%%, zns "
		"0)\n"
		"  --max-open N         open zone limit, 0 = none (hm-smr 128, "
		"zns 14)\n"
		"  --max-active N       active zone limit, 0 = none (hm-smr 0, "
		"zns 14)\n"
		"  --cache SIZE         volatile write cache, 0 = write-through "
		"(32M)\n"
		"  --bw MB/s            bandwidth cap (0 = none)\n"
		"  --lat USEC           latency per operation (0)\n"
		"  --seek USEC          full-stroke seek time (0)\n"
		"  --preallocate        write the whole file now and keep it "
		"allocated\n"
		"                       (for benchmarks on memory-backed "
		"files)\n"
		"  --force              replace existing files\n"
		"\n"
		"powercut: drop what each drive's volatile cache holds, as a "
		"power cut\nwould. The drive must not be in use.\n");
}

static int emu_create(struct za_cli *cli, int argc, char **argv)
{
	enum {
		O_MODEL = 256,
		O_SIZE,
		O_ZSIZE,
		O_ZCAP,
		O_CONV,
		O_MOPEN,
		O_MACTIVE,
		O_CACHE,
		O_BW,
		O_LAT,
		O_SEEK,
		O_FORCE,
		O_PREALLOC,
	};
	static const struct option opts[] = {
		{ "model", required_argument, NULL, O_MODEL },
		{ "size", required_argument, NULL, O_SIZE },
		{ "zone-size", required_argument, NULL, O_ZSIZE },
		{ "zone-cap", required_argument, NULL, O_ZCAP },
		{ "conv-zones", required_argument, NULL, O_CONV },
		{ "max-open", required_argument, NULL, O_MOPEN },
		{ "max-active", required_argument, NULL, O_MACTIVE },
		{ "cache", required_argument, NULL, O_CACHE },
		{ "bw", required_argument, NULL, O_BW },
		{ "lat", required_argument, NULL, O_LAT },
		{ "seek", required_argument, NULL, O_SEEK },
		{ "force", no_argument, NULL, O_FORCE },
		{ "preallocate", no_argument, NULL, O_PREALLOC },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	/* Options apply over the model's defaults, whatever their order. */
	const char *vals[O_FORCE - O_MODEL + 1] = { 0 };
	enum za_dev_model model = ZA_DEV_MODEL_HM_SMR;
	struct za_emu_params p;
	bool force = false, prealloc = false;
	int c, i, failed = 0;
	uint64_t v;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == 'h') {
			emu_help(stdout);
			return ZA_EXIT_OK;
		}
		if (c == O_FORCE) {
			force = true;
			continue;
		}
		if (c == O_PREALLOC) {
			prealloc = true;
			continue;
		}
		if (c < O_MODEL || c > O_SEEK) {
			emu_help(stderr);
			return ZA_EXIT_USAGE;
		}
		vals[c - O_MODEL] = optarg;
	}
	if (optind >= argc) {
		za_usage_error("emu create", "at least one PATH expected");
		return ZA_EXIT_USAGE;
	}
	if (vals[0] && za_dev_model_parse(vals[0], &model) < 0) {
		za_usage_error("emu create",
			       "--model: '%s' is not hm-smr or zns", vals[0]);
		return ZA_EXIT_USAGE;
	}
	za_emu_params_default(&p, model);
	p.prealloc = prealloc;
#define SIZE_OPT(idx, field, name)                                        \
	if (vals[idx]) {                                                  \
		if (za_parse_size(vals[idx], &v) < 0) {                   \
			za_usage_error("emu create", "%s: bad size '%s'", \
				       name, vals[idx]);                  \
			return ZA_EXIT_USAGE;                             \
		}                                                         \
		p.field = v;                                              \
	}
#define UINT_OPT(idx, max, name, expr)                                      \
	if (vals[idx]) {                                                    \
		if (za_parse_uint(vals[idx], max, &v) < 0) {                \
			za_usage_error("emu create", "%s: bad number '%s'", \
				       name, vals[idx]);                    \
			return ZA_EXIT_USAGE;                               \
		}                                                           \
		expr;                                                       \
	}
	SIZE_OPT(O_SIZE - O_MODEL, size_bytes, "--size");
	SIZE_OPT(O_ZSIZE - O_MODEL, zone_size_bytes, "--zone-size");
	SIZE_OPT(O_CACHE - O_MODEL, cache_bytes, "--cache");
	if (vals[O_ZSIZE - O_MODEL] && !vals[O_ZCAP - O_MODEL])
		p.zone_cap_bytes = 0; /* follow the new zone size */
	SIZE_OPT(O_ZCAP - O_MODEL, zone_cap_bytes, "--zone-cap");
	UINT_OPT(O_CONV - O_MODEL, 1u << 24, "--conv-zones",
		 p.nr_conv_zones = (int32_t)v);
	UINT_OPT(O_MOPEN - O_MODEL, 1u << 24, "--max-open",
		 p.max_open_zones = (uint32_t)v);
	UINT_OPT(O_MACTIVE - O_MODEL, 1u << 24, "--max-active",
		 p.max_active_zones = (uint32_t)v);
	UINT_OPT(O_BW - O_MODEL, 1000000000ull, "--bw",
		 p.bw_bytes_per_s = v * 1000000ull);
	UINT_OPT(O_LAT - O_MODEL, 60000000ull, "--lat", p.lat_ns = v * 1000);
	UINT_OPT(O_SEEK - O_MODEL, 60000000ull, "--seek", p.seek_ns = v * 1000);
#undef SIZE_OPT
#undef UINT_OPT
	/* Lowering only the active limit lowers the default open limit. */
	if (!vals[O_MOPEN - O_MODEL] && p.max_active_zones &&
	    p.max_open_zones > p.max_active_zones)
		p.max_open_zones = p.max_active_zones;

	for (i = optind; i < argc; i++) {
		char b1[32], b2[32];
		int ret = za_emu_create(argv[i], &p, force);

		if (ret < 0) {
			failed++;
			if (ret == -EINVAL) /* geometry: no point going on */
				return ZA_EXIT_USAGE;
			continue;
		}
		if (cli->json)
			continue;
		printf("%s: emulated %s drive, %s in zones of %s\n", argv[i],
		       za_dev_model_str(p.model),
		       za_fmt_size(p.size_bytes / p.zone_size_bytes *
					   p.zone_size_bytes,
				   b1, sizeof(b1)),
		       za_fmt_size(p.zone_size_bytes, b2, sizeof(b2)));
	}
	if (cli->json) {
		printf("{\"created\":[");
		for (i = optind; i < argc; i++) {
			printf("%s", i > optind ? "," : "");
			za_json_str(stdout, argv[i]);
		}
		printf("],\"failed\":%d}\n", failed);
	}
	return failed ? ZA_EXIT_FAIL : ZA_EXIT_OK;
}

static int emu_powercut(struct za_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct za_io *io;
	int i, c, failed = 0, ret;

	(void)cli;
	optind = 0; /* re-initialise: main parsed with "+" */
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		emu_help(c == 'h' ? stdout : stderr);
		return c == 'h' ? ZA_EXIT_OK : ZA_EXIT_USAGE;
	}
	if (optind >= argc) {
		za_usage_error("emu powercut", "at least one PATH expected");
		return ZA_EXIT_USAGE;
	}
	ret = za_io_new(NULL, &io);
	if (ret < 0)
		return ZA_EXIT_FAIL;
	for (i = optind; i < argc; i++) {
		struct za_dev *dev;

		if (!za_dev_emu_probe(argv[i])) {
			fprintf(stderr,
				"zarray emu powercut: %s: not an emulated "
				"drive\n",
				argv[i]);
			failed++;
			continue;
		}
		ret = za_dev_open(io, argv[i], 0, &dev);
		if (ret < 0) {
			failed++;
			continue;
		}
		ret = za_dev_power_cut(dev);
		za_dev_close(dev);
		if (ret < 0) {
			fprintf(stderr, "zarray emu powercut: %s: %s\n",
				argv[i], strerror(-ret));
			failed++;
		}
	}
	za_io_free(io);
	return failed ? ZA_EXIT_FAIL : ZA_EXIT_OK;
}

int za_cmd_emu(struct za_cli *cli, int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		emu_help(argc < 2 ? stderr : stdout);
		return argc < 2 ? ZA_EXIT_USAGE : ZA_EXIT_OK;
	}
	if (argv[1][0] == '-') {
		fprintf(stderr, "zarray emu: unrecognized option '%s'\n",
			argv[1]);
		emu_help(stderr);
		return ZA_EXIT_USAGE;
	}
	/* argv[1] becomes the subcommand's argv[0]: getopt's prefix. */
	if (!strcmp(argv[1], "create")) {
		argv[1] = (char *)"zarray emu create";
		return emu_create(cli, argc - 1, argv + 1);
	}
	if (!strcmp(argv[1], "powercut")) {
		argv[1] = (char *)"zarray emu powercut";
		return emu_powercut(cli, argc - 1, argv + 1);
	}
	za_usage_error("emu", "unknown subcommand '%s'", argv[1]);
	return ZA_EXIT_USAGE;
}
