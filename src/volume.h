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
 * Crash recovery (za_volume_recover) loads the latest complete checkpoint
 * - the map and the unmap records still held by journal groups, written
 * as metadata stripes of their own stream every so often and at a clean
 * stop (za_volume_checkpoint) - and replays only the stripes written
 * after it; without one it replays every stripe on the drives. Garbage
 * collection reclaims overwritten space and superseded checkpoints.
 * Everything runs on the loop thread.
 */
#ifndef ZA_VOLUME_H
#define ZA_VOLUME_H

#include <stdbool.h>
#include <stdint.h>

#include "io.h"
#include "job.h"
#include "engine.h"

struct za_volume;

struct za_volume_params {
	struct za_engine *eng;
	uint64_t size_bytes; /* multiple of 4096; 0: za_volume_default_size()
			      * once the journal stream is added */
	/*
	 * Checkpoints: one after this many bytes of stripes written since
	 * the last (0: an eighth of the volume, within 16 MiB..1 GiB, and at
	 * least 64(p+1) times the last checkpoint's size; UINT64_MAX: only
	 * when za_volume_checkpoint() asks).
	 */
	uint64_t ckpt_interval_bytes;
	unsigned ckpt_window; /* checkpoint parts in flight; 0: 8 */
	bool recover_full; /* recovery ignores checkpoints: replays all */
	/*
	 * Garbage collection while idle: checked every this many ms (0:
	 * never); when no request came since the last check, victims at
	 * most half live are moved until twice GC's start point is free.
	 */
	unsigned idle_gc_ms;
	/*
	 * Checkpoint anchors (design.md 9.6, anchor.h). Once a checkpoint is
	 * complete and flushed, anchor(anchor_priv, rec) gets its anchor
	 * (ZA_ANCHOR_BYTES, valid during the call) to make durable where
	 * assembly finds it - the superblock's volume_meta - and the
	 * checkpoint becomes the live one (the previous one superseded, its
	 * engine table freeing the quarantine) only when the owner then
	 * calls za_volume_anchored(). Loop thread. NULL: live at the flush
	 * (no superblock: tools and most unit tests).
	 */
	void (*anchor)(void *anchor_priv, const uint8_t *rec);
	void *anchor_priv;
	/*
	 * The anchor assembly found (ZA_ANCHOR_BYTES, read during
	 * za_volume_recover() only; untrusted), or NULL: recovery loads the
	 * checkpoint it names, not a newer one never anchored.
	 */
	const uint8_t *anchor_rec;
	/* Recovery reads every zone even where the anchor and its
	 * checkpoint's engine table would spare it (tests compare). */
	bool no_table_recovery;
	/*
	 * The map cache (design.md 9.8): once a checkpoint made its pages
	 * durable, the map's clean pages leave memory until it holds at most
	 * this many bytes, and are read back from the drives when a request
	 * needs them. 0: no limit (the whole map stays in memory).
	 */
	uint64_t map_cache_bytes;
};

/*
 * Waiting for map pages to be read back from the drives (private: the
 * volume's and its callers' structures embed one). fn(w, 0) once the
 * page waited for is in memory - the waiter asks again, and may wait for
 * another - or fn(w, -errno) when it could not be read.
 */
struct za_vol_mwait {
	struct za_vol_mwait *next;
	void (*fn)(struct za_vol_mwait *w, int err);
	/* 1 + the map sweep's turn when it began waiting (its pages stay
	 * meanwhile, vol_map_trim()); 0 when not waiting. Zero it before
	 * the first use; the volume keeps it after. */
	uint64_t since;
};

/* One request. done() runs once, possibly inside the call that started it. */
struct za_payload;

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
	uint8_t op; /* what was held back: write, trim, write zeroes */
	struct za_payload *payload; /* during za_volume_write_ref() only */
	void *own_buf; /* a copy of buf while it waits for map pages */
	struct za_vol_mwait mw; /* waiting for map pages */
};

/* Adds the journal stream to @eng. Returns 0 or -errno. */
int za_volume_new(struct za_io *io, const struct za_volume_params *p,
		  struct za_volume **out);
/*
 * Rebuild the map from the drives on a volume just created over an engine
 * that has not written anything yet: the latest complete and valid
 * checkpoint (an older one, or none, when the newest is torn or does not
 * check), then every stripe written after it in sequence order, unmap
 * records included (za_engine_recover_from()). Synchronous. Returns 0 or
 * -errno.
 */
int za_volume_recover(struct za_volume *v);
/*
 * The volume size an engine's free space supports with the reserve
 * garbage collection needs (15% of the segments, at least three write
 * sets with the journal's). For an engine the volume is not built on yet.
 */
uint64_t za_volume_default_size(const struct za_engine *e);
/*
 * za_volume_max_size() as if the members @change names (one entry per
 * member; NULL: none) were gone or back (za_engine_space_if): the largest
 * volume the writable members could hold then (zarray remove, replace).
 */
uint64_t za_volume_max_size_if(const struct za_volume *v,
			       const enum za_space_change *change);
/* Nothing may be in flight (za_volume_busy). */
void za_volume_free(struct za_volume *v);
bool za_volume_busy(const struct za_volume *v);
/*
 * Start no more garbage collection (the victim being moved finishes), so
 * that za_volume_busy() turns false before a stop even where GC cannot
 * reach its start point and would take victim after victim (design.md
 * 10.4, the known limit). Loop thread; for good: there is no restart.
 */
void za_volume_gc_stop(struct za_volume *v);
/*
 * GC as a background job. Pause: no victim is started, and the current
 * one is left where it got to, while free space is above GC's start point
 * and no write waits - below it GC goes on whatever was asked, or writes
 * would run out of room. Resume goes on. The rate limit (bytes moved per
 * second; 0: none) holds GC the same way. Progress: live bytes of the
 * victims of the current (or last) run, chosen and moved.
 */
void za_volume_gc_pause(struct za_volume *v);
void za_volume_gc_resume(struct za_volume *v);
void za_volume_gc_set_rate(struct za_volume *v, uint64_t rate_bps);
void za_volume_gc_progress(const struct za_volume *v,
			   struct za_job_progress *pr);
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
/*
 * za_volume_write() of a @buf that @pl keeps valid and unchanged while
 * references to it are held (payload.h): when the write is taken at once
 * (za_volume_write_copies()), the volume may refer to @buf's blocks
 * instead of copying them, taking references on @pl, and drops them once
 * the stripe that holds them is written (or has copied them). The
 * caller keeps its own reference and drops it when it likes. @pl NULL:
 * za_volume_write().
 */
void za_volume_write_ref(struct za_volume *v, struct za_vol_req *r,
			 uint64_t off, uint64_t len, const void *buf, bool fua,
			 struct za_payload *pl);
/*
 * Sync: copy the blocks of za_volume_write_ref() payloads that wait in
 * the open buffer for more writes, and drop their references; those of
 * stripes on their way to the drives are dropped when they are written.
 */
void za_volume_let_go(struct za_volume *v);
/*
 * Would a za_volume_write() called now copy its buffer before it returns?
 * True unless writes are held back (space, a checkpoint's quiet point),
 * when the volume keeps the buffer until it takes the write. Below the
 * floor it starts GC first, as the write would: a write called right
 * after it (nothing run on the loop in between) gets the same answer, so
 * a caller told true may lend a buffer for the call only.
 */
bool za_volume_write_copies(struct za_volume *v);
void za_volume_flush(struct za_volume *v, struct za_vol_req *r);
/* Unmap: reads return zeros. */
void za_volume_trim(struct za_volume *v, struct za_vol_req *r, uint64_t off,
		    uint64_t len);
void za_volume_write_zeroes(struct za_volume *v, struct za_vol_req *r,
			    uint64_t off, uint64_t len, bool fua);

/*
 * Call @fn for every extent of blocks the map places on the drives (data
 * and journal groups): group id, first data block position in the group,
 * count. What a rebuild needs to tell live stripes from dead ones; the
 * answer is durable only once a flush started after the walk completes.
 * Returns 0 or what @fn returned.
 */
int za_volume_walk_live(struct za_volume *v,
			int (*fn)(void *priv, uint64_t group, uint64_t pos,
				  uint64_t n),
			void *priv);
/*
 * Blocks group @group holds that the map or its tree names (data and
 * journal blocks, map pages): its live count, kept as the map changes
 * and checked by recovery against the map (version 4 counts). Without
 * the whole map in memory, what tells a group with nothing live.
 */
uint64_t za_volume_group_live(struct za_volume *v, uint64_t group);
/*
 * Tests and tools: read the whole map in (at once, reading pages
 * synchronously), count every group's live blocks from it, and compare
 * with the counters kept (after a recovery that loaded the root only,
 * the checkpoint's counts plus the replay's changes). *@checked groups,
 * *@mismatches of them differ (each logged; the map's count stays). 0 or
 * -errno. Not on a daemon's loop: it blocks.
 */
int za_volume_recount(struct za_volume *v, uint64_t *checked,
		      uint64_t *mismatches);
/*
 * The walk above needs the whole map in memory: 0 when it is, or 1 when
 * pages were out of memory and are being read: @w->fn() is called when
 * one is in (ask again; with the cache's limit lifted until the walk, a
 * page read stays) or failed. Loop thread. za_volume_map_unwait() takes
 * a waiter back (its owner is going away); the read goes on.
 */
int za_volume_map_load(struct za_volume *v, struct za_vol_mwait *w);
bool za_volume_map_whole(const struct za_volume *v);
void za_volume_map_unwait(struct za_volume *v, struct za_vol_mwait *w);
/*
 * Whether background work that spends free zones without freeing any (a
 * rebuild's replacement zones) may take one now: only while free space is
 * at or above the point where garbage collection starts. Below it, GC
 * gets space back first; such work kicks it (za_volume_gc_kick()), waits
 * and asks again. A question only: it changes nothing. Loop thread.
 */
bool za_volume_spare_ok(const struct za_volume *v);
/* Let GC look at the space now (it starts a victim if it is needed). */
void za_volume_gc_kick(struct za_volume *v);
struct za_volume_stats {
	uint64_t user_read_bytes, user_write_bytes;
	uint64_t data_stripes, padded_stripes, journal_blocks;
	uint64_t flushes;
	uint64_t gc_runs, gc_moved_blocks, gc_freed_groups, writes_stalled;
	/* Victims whose stripe headers did not name all their live blocks
	 * (unreadable ones, or a counter off): the whole map was searched. */
	uint64_t gc_map_searches;
	uint64_t gc_idle_runs; /* of gc_runs, started while idle */
	bool gc_active; /* a victim is being collected now */
	uint64_t map_extents, map_bytes;
	/* The map cache (za_volume_params.map_cache_bytes): its limit (0:
	 * none), map pages read back from the drives, requests that waited
	 * for one, pages that could not be read or did not check. */
	uint64_t map_cache_bytes, map_pages_read, map_page_waits;
	uint64_t map_page_errors;
	/* Blocks in stripes on the members that the map points to: what
	 * garbage collection must keep (blocks still in buffers are not
	 * counted). */
	uint64_t live_blocks;
	uint64_t buffers; /* stripe buffers alive (in memory only) */
	uint64_t checkpoints, checkpoint_failures; /* written, given up */
	uint64_t checkpoint_retries; /* written again after a quarantine break */
	uint64_t checkpoint_seq; /* sequence number the live checkpoint
				  * covers (loaded or written); 0: none */
	uint64_t checkpoint_blocks; /* its parts */
	/* Map pages on the drives that a checkpoint names (the live one's,
	 * and those the one being written wrote so far), and how many the
	 * last one taken wrote: what changed since the one before. */
	uint64_t checkpoint_pages, checkpoint_pages_written;
	/* Pages written again to empty a group of the checkpoint stream. */
	uint64_t checkpoint_pages_cleaned;
	/* The last checkpoint's hold on writes, from its start to the end
	 * of its snapshot (the quiet point's flush included), and the
	 * snapshot's part of it (taking what changed). */
	uint64_t checkpoint_hold_ns, checkpoint_snapshot_ns;
	uint64_t recovered_stripes; /* replayed by the last recovery */
	/* The engine table of the checkpoint recovery loaded, against what
	 * the scan of the drives found (za_engine_table_check()): its
	 * segments, and what differed that may not (0 unless a bug). */
	uint64_t etab_segments, etab_mismatches;
	/* Zones released and reset but named by a table a recovery could
	 * load: free again with the next checkpoint (design.md 9.6). */
	uint64_t quarantined_zones;
	/* Times no checkpoint could be written to free them: freed early. */
	uint64_t quarantine_breaks;
	/*
	 * Anchors: the live checkpoint is the one the superblocks name
	 * (written with za_volume_params.anchor); where the anchor recovery
	 * read disagreed with the drives (0 unless a bug; design.md 9.6);
	 * anchors written.
	 */
	bool anchored;
	uint64_t anchor_mismatches, anchors;
	/*
	 * The last recovery: whether it rested on the anchored checkpoint's
	 * engine table (read only the zones the table does not account
	 * for), the zones and stripe headers it read, and the segments it
	 * took from the table.
	 */
	bool recovery_table;
	uint64_t recovery_zones, recovery_hdr_reads, recovery_table_segs;
	/* Map pages the last recovery read: its replay's, when it loaded
	 * the checkpoint's root only (the map cache); else 0 (it read the
	 * whole map with the checkpoint). */
	uint64_t recovery_map_pages;
	/*
	 * The last recovery, from a checkpoint of version 4: the groups
	 * whose count it holds (live blocks; pages in the checkpoint
	 * stream) were compared, after the replay, with what loading the
	 * whole map and replaying gave, and so many differed (each logged).
	 * Both 0 when it loaded the root only (the map cache): the counts
	 * are then taken as kept (za_volume_recount() checks them).
	 */
	uint64_t recovery_counts_checked, recovery_count_mismatches;
};
void za_volume_get_stats(const struct za_volume *v, struct za_volume_stats *st);

/* Synchronous wrappers for tools and tests. */
int za_volume_read_sync(struct za_volume *v, uint64_t off, uint64_t len,
			void *buf);
int za_volume_write_sync(struct za_volume *v, uint64_t off, uint64_t len,
			 const void *buf, bool fua);
int za_volume_flush_sync(struct za_volume *v);

/*
 * Write a checkpoint covering everything acknowledged before the call (it
 * flushes first), so that recovery replays nothing older; a clean stop
 * calls it. done(0) once the checkpoint is complete on the drives (at
 * once if nothing was written since the last one), -EIO after a write
 * that could not be made durable, -ENOSPC or another error when it could
 * not be written (the previous checkpoint stays in use).
 */
void za_volume_checkpoint(struct za_volume *v, struct za_vol_req *r);
int za_volume_checkpoint_sync(struct za_volume *v);
/*
 * The anchor last given to za_volume_params.anchor() is durable (the
 * superblock round that carries it has ended). Loop thread; may be
 * called from inside that anchor() call.
 */
void za_volume_anchored(struct za_volume *v);

/*
 * The largest size the volume could have over the writable members as they
 * are now (every zone, used or free), with the reserve garbage collection
 * needs (za_volume_default_size's). It grows when members are added.
 */
uint64_t za_volume_max_size(const struct za_volume *v);
/*
 * The floor: below this many free segments (the stripes on their way not
 * counted) user writes wait for garbage collection. GC's write sets, and
 * room for the checkpoint that frees the zones in quarantine - as many
 * segments as the last checkpoint took (docs/design.md 10.1).
 */
uint64_t za_volume_floor_segs(const struct za_volume *v);
/*
 * Grow the volume to @size_bytes: blocks past the old end read as zeros
 * until written. The size is not persisted here: the caller records it
 * (array.c: in the superblocks) before growing, since recovery ignores
 * blocks beyond the size it is given. Returns 0; -EINVAL (not a multiple
 * of 4096, or smaller: shrinking is not supported); -ENOSPC (above
 * za_volume_max_size()).
 */
int za_volume_grow(struct za_volume *v, uint64_t size_bytes);

#endif /* ZA_VOLUME_H */
