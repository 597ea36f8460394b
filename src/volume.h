/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * volume.h - the exported volume: 4 KiB logical blocks over the segment
 * engine, with NBD's semantics (a write may be acknowledged from memory; a
 * flush, or a FUA write, completes only when everything acknowledged
 * before it is on the drives with the array's redundancy).
 *
 * Writes fill a stripe buffer of the data stream; a full buffer is written
 * as one stripe. A flush with a partly filled buffer writes its blocks to
 * the journal stream (k = 1: p+1 columns, one block per stripe, where they
 * stay: no second write) when that costs fewer device bytes than padding
 * the stripe, and pads and writes the stripe otherwise. The block map
 * (map.h) says where every block is: in a buffer, a data group or a
 * journal group.
 *
 * Crash recovery replays every stripe on the drives (za_volume_recover);
 * not here yet: checkpoints that bound that replay, garbage collection.
 * Everything runs on the loop thread.
 */
#ifndef ZA_VOLUME_H
#define ZA_VOLUME_H

#include <stdbool.h>
#include <stdint.h>

#include "io.h"
#include "segment.h"

struct za_volume;

struct za_volume_params {
	struct za_engine *eng;
	uint64_t size_bytes; /* multiple of 4096; 0: za_volume_default_size()
			      * once the journal stream is added */
};

/* One request. done() runs once, possibly inside the call that started it. */
struct za_vol_req {
	void (*done)(struct za_vol_req *r, int result);
	void *priv;
	/* private */
	struct za_volume *vol;
	struct za_vol_req *next;
	unsigned pending;
	int result;
	bool fua_flush; /* a FUA write whose data is buffered: now flush */
	bool internal; /* garbage collection's own flush */
	uint64_t off, len; /* a write held back until space is freed */
	const void *buf;
	bool fua;
};

/* Adds the journal stream to @eng. Returns 0 or -errno. */
int za_volume_new(struct za_io *io, const struct za_volume_params *p,
		  struct za_volume **out);
/*
 * Rebuild the map from the drives (za_engine_recover(): every stripe
 * replayed in sequence order, unmap records included) on a volume just
 * created over an engine that has not written anything yet. Synchronous.
 * Returns 0 or -errno.
 */
int za_volume_recover(struct za_volume *v);
/*
 * The volume size an engine's free space supports with the reserve
 * garbage collection needs (15% of the segments, at least three write
 * sets with the journal's). For an engine the volume is not built on yet.
 */
uint64_t za_volume_default_size(const struct za_engine *e);
/* Nothing may be in flight (za_volume_busy). */
void za_volume_free(struct za_volume *v);
bool za_volume_busy(const struct za_volume *v);
uint64_t za_volume_size(const struct za_volume *v);

/*
 * The data path. Offsets and lengths are bytes, multiples of 4096, within
 * the volume (-EINVAL otherwise). Results: 0, -EIO (data lost beyond the
 * redundancy, or an earlier write could not be made durable), -ENOSPC.
 */
void za_volume_read(struct za_volume *v, struct za_vol_req *r, uint64_t off,
		    uint64_t len, void *buf);
void za_volume_write(struct za_volume *v, struct za_vol_req *r, uint64_t off,
		     uint64_t len, const void *buf, bool fua);
void za_volume_flush(struct za_volume *v, struct za_vol_req *r);
/* Unmap: reads return zeros. */
void za_volume_trim(struct za_volume *v, struct za_vol_req *r, uint64_t off,
		    uint64_t len);
void za_volume_write_zeroes(struct za_volume *v, struct za_vol_req *r,
			    uint64_t off, uint64_t len, bool fua);

struct za_volume_stats {
	uint64_t user_read_bytes, user_write_bytes;
	uint64_t data_stripes, padded_stripes, journal_blocks;
	uint64_t flushes;
	uint64_t gc_runs, gc_moved_blocks, gc_freed_groups, writes_stalled;
	uint64_t map_extents, map_bytes;
	uint64_t buffers; /* stripe buffers alive (in memory only) */
};
void za_volume_get_stats(const struct za_volume *v, struct za_volume_stats *st);

/* Synchronous wrappers for tools and tests. */
int za_volume_read_sync(struct za_volume *v, uint64_t off, uint64_t len,
			void *buf);
int za_volume_write_sync(struct za_volume *v, uint64_t off, uint64_t len,
			 const void *buf, bool fua);
int za_volume_flush_sync(struct za_volume *v);

#endif /* ZA_VOLUME_H */
