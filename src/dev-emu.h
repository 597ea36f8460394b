/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * dev-emu.h - creating and tuning file-backed emulated zoned drives.
 *
 * An emulated drive is one self-describing file (docs/format.md, "Emulated
 * drive file"); za_dev_open() recognises it. These calls create such files
 * and adjust the performance model of an open one.
 */
#ifndef ZA_DEV_EMU_H
#define ZA_DEV_EMU_H

#include <stdbool.h>
#include <stdint.h>

#include "dev.h"

/* The "emu" backend's constructor (za_dev_open() finds it in the backend
 * table, dev-backends.c) and its test: is @path a file that starts like
 * an emulated drive? */
int za_dev_emu_open(struct za_io *io, const char *path, unsigned flags,
		    struct za_dev **out);
bool za_dev_emu_probe(const char *path);

struct za_emu_params {
	enum za_dev_model model;
	uint64_t size_bytes; /* rounded down to whole zones */
	uint64_t zone_size_bytes;
	uint64_t zone_cap_bytes; /* 0: = zone size */
	int32_t nr_conv_zones; /* -1: the model's default */
	uint32_t max_open_zones; /* 0: no limit */
	uint32_t max_active_zones;
	uint32_t write_gran_bytes;
	uint32_t max_io_bytes;
	uint32_t max_append_bytes;
	uint64_t cache_bytes; /* volatile write cache; 0: write-through */
	/* Performance model; all 0 (the default) means "as fast as memory". */
	uint64_t bw_bytes_per_s;
	uint64_t lat_ns; /* per operation */
	uint64_t seek_ns; /* full-stroke seek; scaled by sqrt(distance) */
	/*
	 * Allocate and touch the whole data region at creation, and never
	 * give it back: resets and power cuts leave the blocks in place
	 * (nothing can read past a write pointer), a finish writes zeros.
	 * For benchmarks on memory-backed files.
	 */
	bool prealloc;
};

/* The defaults of `zarray emu create` for @model. */
void za_emu_params_default(struct za_emu_params *p, enum za_dev_model model);
/*
 * Create an emulated drive at @path (a sparse file, or a fully written one
 * with @p->prealloc). Refuses to replace an
 * existing file unless @force. Returns 0, -EEXIST, -EINVAL (with a logged
 * reason) or another -errno.
 */
int za_emu_create(const char *path, const struct za_emu_params *p, bool force);

/* Change the performance model of an open emulated drive (not persisted). */
int za_emu_set_perf(struct za_dev *dev, uint64_t bw_bytes_per_s,
		    uint64_t lat_ns, uint64_t seek_ns);
/* Is @dev an emulated drive? */
bool za_dev_is_emu(const struct za_dev *dev);
/*
 * Copy @len bytes of a write into a preallocated drive's memory as the
 * drive does: with stores that bypass the CPU's caches where @dst and
 * @len are 64-byte aligned, memcpy() otherwise. Any thread. The stores
 * are weakly ordered: other threads are sure to see them only after
 * za_dev_stage_fence() on this one. Exported for bench/za-write-floor,
 * which measures the same copy.
 */
void za_emu_stream_to_drive(void *dst, const void *src, size_t len);
/* za_emu_stream_to_drive(), then the fence: visible when it returns. */
void za_emu_copy_to_drive(void *dst, const void *src, size_t len);

#endif /* ZA_DEV_EMU_H */
