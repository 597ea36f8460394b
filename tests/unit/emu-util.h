/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * emu-util.h - helpers for unit tests that need an emulated drive: a
 * temporary file, an event context, synchronous I/O and patterns.
 */
#ifndef ZA_TEST_EMU_UTIL_H
#define ZA_TEST_EMU_UTIL_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dev-emu.h"
#include "dev.h"
#include "io.h"
#include "tap.h"

#define BLK 4096

struct tdrive {
	char path[256];
	struct za_io *io;
	struct za_dev *dev;
};

static inline void tdrive_make(struct tdrive *t, const struct za_emu_params *p)
{
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	int fd;

	snprintf(t->path, sizeof(t->path), "%s/za-unit-XXXXXX", dir);
	fd = mkstemp(t->path);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(za_emu_create(t->path, p, true), 0);
	ck_assert_int_eq(za_io_new(NULL, &t->io), 0);
	ck_assert_int_eq(za_dev_open(t->io, t->path, 0, &t->dev), 0);
}

static inline void tdrive_small_prealloc(struct tdrive *t, enum za_dev_model m,
					 bool prealloc)
{
	struct za_emu_params p;

	za_emu_params_default(&p, m);
	p.size_bytes = 16ull << 20;
	p.zone_size_bytes = 1ull << 20;
	p.zone_cap_bytes = m == ZA_DEV_MODEL_ZNS ? 768ull << 10 : 0;
	p.nr_conv_zones = m == ZA_DEV_MODEL_ZNS ? 0 : 2;
	p.cache_bytes = 256ull << 10;
	p.prealloc = prealloc;
	tdrive_make(t, &p);
}

static inline void tdrive_small(struct tdrive *t, enum za_dev_model m)
{
	tdrive_small_prealloc(t, m, false);
}

static inline int tdrive_reopen(struct tdrive *t)
{
	za_dev_close(t->dev);
	t->dev = NULL;
	return za_dev_open(t->io, t->path, 0, &t->dev);
}

static inline void tdrive_free(struct tdrive *t)
{
	za_dev_close(t->dev);
	za_io_free(t->io);
	unlink(t->path);
}

static inline void *talloc(size_t len)
{
	void *p = NULL;

	ck_assert_int_eq(posix_memalign(&p, BLK, len), 0);
	memset(p, 0, len);
	return p;
}

static inline void tfill(void *buf, size_t len, uint8_t seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		((uint8_t *)buf)[i] = (uint8_t)(seed + i * 7 + i / 4096);
}

static inline int tio(struct za_dev *dev, enum za_dev_op op, uint64_t off,
		      void *buf, uint64_t len)
{
	return za_dev_io_sync(dev, op, off, buf, len, NULL);
}

static inline struct za_zone tzone(struct za_dev *dev, uint32_t z)
{
	struct za_zone zone;
	unsigned n = 1;

	ck_assert_int_eq(za_dev_report_zones(
				 dev, (uint64_t)z * dev->caps.zone_size_bytes,
				 &zone, &n),
			 0);
	ck_assert_uint_eq(n, 1);
	return zone;
}

#endif /* ZA_TEST_EMU_UTIL_H */
