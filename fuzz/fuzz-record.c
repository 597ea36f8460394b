// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz-record.c - fuzz target: the daemon's state record parser,
 * za_daemon_record_parse(), on the contents of STATE/arrays/NAME.conf as
 * zarrayd reads them at start (a file anyone with write access to the
 * state directory, or a torn write, could have left).
 *
 * Input: one mode byte, then the file's contents.
 *   mode bit 0: the file is named "t.conf" (else "t.cfg", which must be
 *               refused whatever it holds)
 *
 * Oracles, for a record that parses: the file was a .conf; its name is
 * the file's ("t"); it has 1 to D_MAX_MEMBERS member paths, each one
 * za_daemon_path_valid() accepts; its TCP address is empty or one
 * za_export_parse_tcp() accepts; its strings are terminated. A refusal is
 * only ever -EBADMSG or -ENOMEM. Leaks show under the sanitizer tier.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "daemon-int.h"
#include "fuzz.h"

static struct d_record rec;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *file;
	char host[ZA_EXPORT_HOST_BYTES], port[8];
	unsigned i;
	FILE *f;
	int ret;

	za_fuzz_init();
	if (size < 1)
		return 0;
	file = (data[0] & 1) ? "t.conf" : "t.cfg";
	data++;
	size--;
	/* fmemopen() of 0 bytes fails with EINVAL: an empty file is "". */
	f = size ? fmemopen((void *)data, size, "r") : fmemopen("", 1, "r");
	if (!f)
		return 0;
	ret = za_daemon_record_parse(f, "fuzz", file, &rec);
	fclose(f);
	if (ret) {
		ZA_FUZZ_CHECK(ret == -EBADMSG || ret == -ENOMEM,
			      "a refusal other than -EBADMSG or -ENOMEM");
		return 0;
	}
	ZA_FUZZ_CHECK(!strcmp(file, "t.conf"), "a file not named .conf parsed");
	ZA_FUZZ_CHECK(!strcmp(rec.name, "t"), "the name is not the file's");
	ZA_FUZZ_CHECK(rec.nr_paths >= 1 && rec.nr_paths <= D_MAX_MEMBERS,
		      "member count out of range");
	for (i = 0; i < rec.nr_paths; i++)
		ZA_FUZZ_CHECK(rec.paths[i] &&
				      za_daemon_path_valid(rec.paths[i]),
			      "a member path the daemon would refuse");
	ZA_FUZZ_CHECK(strnlen(rec.tcp, sizeof(rec.tcp)) < sizeof(rec.tcp),
		      "TCP address not terminated");
	ZA_FUZZ_CHECK(!rec.tcp[0] ||
			      za_export_parse_tcp(rec.tcp, host, port) == 0,
		      "a TCP address the export would refuse");
	za_daemon_record_free(&rec);
	return 0;
}
