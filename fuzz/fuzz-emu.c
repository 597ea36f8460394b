// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fuzz-emu.c - fuzz target: opening an emulated drive file
 * (src/dev-emu.c through za_dev_open()): the header, the zone table and
 * the undo log index, all of it read from a file the fuzzer wrote.
 *
 * Input: one mode byte, then the file's first bytes (docs/format.md,
 * "Emulated drive file"): the header at 0, the zone table at 4096, then
 * the undo log index.
 *   mode bit 0: pad the header to 4096 bytes and store its CRC
 *   mode bit 1: store the CRC of every zone table entry present
 *   mode bit 2: extend the file (sparse) to the header's file_bytes, at
 *               most MAX_FILE_BYTES, so that the size check passes
 *   mode bit 3: open read-only
 *   mode bit 4: (read-write) cut the power, close and open again
 *
 * Oracles, for a drive that opens: its zone report is consistent (zone
 * i starts at i x zone size, its write pointer inside its capacity, or
 * at its end when full), and a drive that opened and lost power opens again
 * (a power cut leaves a drive its own parser accepts).
 *
 * The file lives in a private directory under $TMPDIR (or /tmp),
 * removed at exit.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "byteorder.h"
#include "crc.h"
#include "dev.h"
#include "fuzz.h"
#include "io.h"

/* docs/format.md, "Emulated drive file". */
#define EMU_HDR_BYTES 4096u
#define EMU_HDR_CRC_OFF 4092u
#define EMU_NR_ZONES_OFF 48u
#define EMU_FILE_BYTES_OFF 144u
#define EMU_ZENT_BYTES 32u
#define EMU_ZENT_CRC_OFF 28u
/* Sparse, but the drive's metadata is mapped: keep it sane. */
#define MAX_FILE_BYTES (64ull << 30)

static char dir[256], path[300];
static struct za_io *io;

static void cleanup(void)
{
	if (path[0])
		unlink(path);
	if (dir[0])
		rmdir(dir);
}

static void setup(void)
{
	const char *tmp = getenv("TMPDIR");

	if (io)
		return;
	snprintf(dir, sizeof(dir), "%s/za-fuzz-emu.XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		perror("fuzz-emu: mkdtemp");
		abort();
	}
	snprintf(path, sizeof(path), "%s/drive", dir);
	atexit(cleanup);
	if (za_io_new(NULL, &io))
		abort();
}

static void write_file(const uint8_t *buf, size_t len, uint64_t extend_to)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	size_t off = 0;

	if (fd < 0) {
		perror("fuzz-emu: open");
		abort();
	}
	while (off < len) {
		ssize_t n = write(fd, buf + off, len - off);

		if (n <= 0) {
			perror("fuzz-emu: write");
			abort();
		}
		off += (size_t)n;
	}
	if (extend_to > len && ftruncate(fd, (off_t)extend_to) < 0) {
		perror("fuzz-emu: ftruncate");
		abort();
	}
	close(fd);
}

static void check_zones(struct za_dev *dev)
{
	const struct za_dev_caps *c = &dev->caps;
	struct za_zone *z;
	unsigned nr, i;

	if (za_dev_report_all(dev, &z, &nr))
		return;
	ZA_FUZZ_CHECK(nr == c->nr_zones, "zone report misses zones");
	for (i = 0; i < nr; i++) {
		uint64_t start = (uint64_t)i * c->zone_size_bytes;

		ZA_FUZZ_CHECK(z[i].start_bytes == start,
			      "zone start is not i x zone size");
		ZA_FUZZ_CHECK(z[i].cap_bytes <= c->zone_size_bytes,
			      "zone capacity above the zone size");
		if (z[i].cond == ZA_ZONE_COND_FULL)
			ZA_FUZZ_CHECK(z[i].wp_bytes ==
					      start + c->zone_size_bytes,
				      "a full zone's write pointer not at its "
				      "end");
		else
			ZA_FUZZ_CHECK(z[i].wp_bytes >= start &&
					      z[i].wp_bytes <=
						      start + z[i].cap_bytes,
				      "write pointer outside its zone");
	}
	free(z);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned flags;
	uint64_t extend = 0;
	struct za_dev *dev;
	size_t len, i, nz;
	uint8_t mode, *buf;
	int ret;

	za_fuzz_init();
	if (size < 1)
		return 0;
	setup();
	mode = data[0];
	data++;
	size--;
	len = (mode & 1) && size < EMU_HDR_BYTES ? EMU_HDR_BYTES : size;
	buf = calloc(1, len ? len : 1);
	if (!buf)
		abort();
	memcpy(buf, data, size);
	if (mode & 1)
		za_put_le32(buf + EMU_HDR_CRC_OFF,
			    za_crc32c(buf, EMU_HDR_CRC_OFF));
	if ((mode & 2) && len >= EMU_HDR_BYTES) {
		nz = (len - EMU_HDR_BYTES) / EMU_ZENT_BYTES;
		if (nz > za_get_le32(buf + EMU_NR_ZONES_OFF))
			nz = za_get_le32(buf + EMU_NR_ZONES_OFF);
		for (i = 0; i < nz; i++) {
			uint8_t *e = buf + EMU_HDR_BYTES + i * EMU_ZENT_BYTES;

			za_put_le32(e + EMU_ZENT_CRC_OFF,
				    za_crc32c(e, EMU_ZENT_CRC_OFF));
		}
	}
	if ((mode & 4) && len >= EMU_HDR_BYTES) {
		extend = za_get_le64(buf + EMU_FILE_BYTES_OFF);
		if (extend > MAX_FILE_BYTES)
			extend = 0;
	}
	write_file(buf, len, extend);
	free(buf);

	flags = mode & 8 ? ZA_DEV_OPEN_RDONLY : 0;
	ret = za_dev_open(io, path, flags, &dev);
	if (ret)
		return 0;
	check_zones(dev);
	if ((mode & 0x10) && !(mode & 8)) {
		(void)za_dev_power_cut(dev);
		za_dev_close(dev);
		ret = za_dev_open(io, path, 0, &dev);
		ZA_FUZZ_CHECK(ret == 0,
			      "a drive that opened does not open after a "
			      "power cut");
		check_zones(dev);
	}
	za_dev_close(dev);
	return 0;
}
