// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * cmd-zones.c - `zarray zones DEVICE [--json]`: the capabilities and zone
 * report of one drive, real or emulated, without the daemon (like
 * `zbd report`). Opens the drive read-only and changes nothing.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dev.h"
#include "io.h"

static void zones_help(FILE *f)
{
	fprintf(f, "Usage: zarray zones [--json] DEVICE\n"
		   "\n"
		   "Report a zoned drive's capabilities and every zone: type, "
		   "condition,\nstart, size, capacity and write pointer. "
		   "DEVICE is a zoned block\ndevice or an emulated-drive "
		   "file. Needs no daemon; changes nothing.\n");
}

static void print_caps_text(const struct za_dev *dev)
{
	const struct za_dev_caps *c = &dev->caps;
	char b1[32], b2[32], b3[32];

	printf("%s: %s (%s)\n", dev->path,
	       c->model == ZA_DEV_MODEL_ZNS ? "NVMe zoned namespace" :
					      "host-managed SMR",
	       c->vendor);
	printf("  capacity %s, %u zones of %s (capacity %s), %u "
	       "conventional\n",
	       za_fmt_size(c->capacity_bytes, b1, sizeof(b1)), c->nr_zones,
	       za_fmt_size(c->zone_size_bytes, b2, sizeof(b2)),
	       za_fmt_size(c->zone_cap_bytes, b3, sizeof(b3)),
	       c->nr_conv_zones);
	printf("  block %u B, write granularity %u B, max I/O %s, max "
	       "append %s\n",
	       c->lblock_bytes, c->write_gran_bytes,
	       za_fmt_size(c->max_io_bytes, b1, sizeof(b1)),
	       za_fmt_size(c->max_append_bytes, b2, sizeof(b2)));
	printf("  max open zones %s%.0u, max active zones %s%.0u, native "
	       "zone append %s, volatile cache %s\n",
	       c->max_open_zones ? "" : "no limit", c->max_open_zones,
	       c->max_active_zones ? "" : "no limit", c->max_active_zones,
	       c->native_append ? "yes" : "no",
	       c->volatile_cache ? "yes" : "no");
}

int za_cmd_zones(struct za_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct za_zone *zones = NULL;
	struct za_dev *dev = NULL;
	struct za_io *io = NULL;
	bool json = cli->json;
	unsigned nr = 0, i;
	int c, ret, rc = ZA_EXIT_FAIL;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'h':
			zones_help(stdout);
			return ZA_EXIT_OK;
		default:
			zones_help(stderr);
			return ZA_EXIT_USAGE;
		}
	}
	if (argc - optind != 1) {
		za_usage_error("zones", "one DEVICE expected");
		return ZA_EXIT_USAGE;
	}
	ret = za_io_new(NULL, &io);
	if (ret < 0)
		goto err;
	ret = za_dev_open(io, argv[optind], ZA_DEV_OPEN_RDONLY, &dev);
	if (ret < 0)
		goto err_io;
	ret = za_dev_report_all(dev, &zones, &nr);
	if (ret < 0) {
		fprintf(stderr, "zarray zones: %s: zone report failed: %s\n",
			argv[optind], strerror(-ret));
		goto err_dev;
	}
	if (json) {
		const struct za_dev_caps *k = &dev->caps;

		printf("{\"device\":");
		za_json_str(stdout, dev->path);
		printf(",\"model\":\"%s\",\"vendor\":",
		       za_dev_model_str(k->model));
		za_json_str(stdout, k->vendor);
		printf(",\"capacity_bytes\":%llu,\"zone_size_bytes\":%llu,"
		       "\"zone_cap_bytes\":%llu,\"nr_zones\":%u,"
		       "\"nr_conv_zones\":%u,\"lblock_bytes\":%u,"
		       "\"write_gran_bytes\":%u,\"max_open_zones\":%u,"
		       "\"max_active_zones\":%u,\"max_io_bytes\":%u,"
		       "\"max_append_bytes\":%u,\"native_append\":%s,"
		       "\"volatile_cache\":%s,\"zones\":[",
		       (unsigned long long)k->capacity_bytes,
		       (unsigned long long)k->zone_size_bytes,
		       (unsigned long long)k->zone_cap_bytes, k->nr_zones,
		       k->nr_conv_zones, k->lblock_bytes, k->write_gran_bytes,
		       k->max_open_zones, k->max_active_zones, k->max_io_bytes,
		       k->max_append_bytes, k->native_append ? "true" : "false",
		       k->volatile_cache ? "true" : "false");
		for (i = 0; i < nr; i++)
			printf("%s{\"index\":%u,\"type\":\"%s\",\"cond\":\"%s\","
			       "\"start_bytes\":%llu,\"len_bytes\":%llu,"
			       "\"cap_bytes\":%llu,\"wp_bytes\":%llu}",
			       i ? "," : "", i, za_zone_type_str(zones[i].type),
			       za_zone_cond_str(zones[i].cond),
			       (unsigned long long)zones[i].start_bytes,
			       (unsigned long long)zones[i].len_bytes,
			       (unsigned long long)zones[i].cap_bytes,
			       (unsigned long long)zones[i].wp_bytes);
		printf("]}\n");
	} else {
		print_caps_text(dev);
		printf("%6s %-4s %-9s %15s %12s %12s %15s\n", "ZONE", "TYPE",
		       "COND", "START", "LEN", "CAP", "WP");
		for (i = 0; i < nr; i++) {
			char wp[32];

			if (zones[i].type == ZA_ZONE_TYPE_CNV)
				snprintf(wp, sizeof(wp), "-");
			else
				snprintf(wp, sizeof(wp), "%llu",
					 (unsigned long long)zones[i].wp_bytes);
			printf("%6u %-4s %-9s %15llu %12llu %12llu %15s\n", i,
			       za_zone_type_str(zones[i].type),
			       za_zone_cond_str(zones[i].cond),
			       (unsigned long long)zones[i].start_bytes,
			       (unsigned long long)zones[i].len_bytes,
			       (unsigned long long)zones[i].cap_bytes, wp);
		}
	}
	rc = ZA_EXIT_OK;
	free(zones);
err_dev:
	za_dev_close(dev);
err_io:
	za_io_free(io);
err:
	/* Open failures were reported where they were found (za_log). */
	return rc;
}
