/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * engine.h - the segment engine: write sets of open segments across the
 * members, full-stripe writes with erasure coding, verified and degraded
 * reads, member exclusion.
 *
 * A segment is k+p zones on k+p distinct members, written together as a
 * log of fixed-size stripes (stripe.h) and sealed when full. With fewer
 * than k+p writable members (but k at least) new segments open on the
 * members there are, the missing columns absent (born lost, rebuilt
 * like lost ones once members are added). The engine
 * keeps enough segments open on disjoint members that every writable
 * member is busy, places new segments by free zones, and never places one
 * on a failed, missing, draining or removed member. docs/design.md,
 * "Segments and stripes", tells the whole story; engine.c opens with it.
 *
 * What it does not do: it does not know which logical block is where (the
 * volume's map does), it does not write superblocks (array.c does, when
 * the engine reports a member failure), and it does not decide when a
 * stripe is written: callers hand it full (or deliberately padded) stripes.
 *
 * Everything runs on the loop thread of the struct za_io it was given.
 */
#ifndef ZA_ENGINE_H
#define ZA_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "dev.h"
#include "io.h"
#include "progress.h"
#include "sb.h"
#include "stripe.h"
#include "worker.h"

struct za_engine;
struct za_segment;

enum za_seg_state {
	ZA_SEG_OPEN = 1, /* taking stripes */
	ZA_SEG_SEALED = 2, /* full, or closed early by a failure */
};

/* Per-member counters (status, tests, benchmarks). */
struct za_member_stats {
	uint64_t err_read; /* read errors from the drive */
	uint64_t err_write;
	uint64_t err_checksum; /* chunks whose CRC did not match */
	uint64_t repaired_bytes; /* bytes decoded because this member failed */
	uint64_t free_zones, used_zones;
};

struct za_engine_params {
	struct za_geom geom;
	struct za_uuid array_uuid;
	unsigned nr_members;
	struct za_dev **devs; /* nr_members; NULL for a missing member */
	const uint8_t *states; /* nr_members enum za_member_state */
	uint64_t next_seq; /* first sequence number to hand out */
	uint64_t next_seg_id; /* first segment id */
	unsigned inflight_per_seg; /* stripes in flight per segment; 0: 4 */
	unsigned max_group_segs; /* data write set width; 0: as many as fit */
	/*
	 * Read errors (I/O errors from the drive, not checksum mismatches) a
	 * member may return before the engine fails it, as one write error
	 * does; 0: never. It is not failed while p members are lost already:
	 * its errors are still repaired from the others.
	 */
	unsigned max_read_errors;
	/*
	 * Called (loop thread) when the engine excludes a member after I/O
	 * errors, after it has stopped placing anything on it; array.c
	 * persists the new state. @why is a static string.
	 */
	void (*member_failed)(struct za_engine *e, unsigned idx, int err,
			      void *priv);
	void *priv;
	/* Recovery reports where it is here, then forgets it; NULL: not
	 * reported. */
	struct za_progress *progress;
	/*
	 * za_engine_recover_from() follows: keep the write pointers of the
	 * zone reports taken at start for it (8 B per zone until it ends)
	 * instead of reporting every zone of every member again.
	 */
	bool recover;
	/*
	 * Compute data stripes' parity, checksums and headers on the loop
	 * itself instead of on the engine's worker thread (the default;
	 * journal and checkpoint stripes, small and waited for, always are).
	 */
	bool inline_prepare;
};

/*
 * Build an engine over the members. Every member's data zones (all but the
 * superblock zones and conventional zones) must be EMPTY, as after
 * za_engine_format(). Synchronous (zone reports). Returns 0 or -errno.
 */
int za_engine_new(struct za_io *io, const struct za_engine_params *prm,
		  struct za_engine **out);
/* No request may be in flight (see za_engine_busy). Does not close the
 * devices. */
void za_engine_free(struct za_engine *e);
/* Is anything queued or in flight (stripes, reads, zone finishes)? */
bool za_engine_busy(const struct za_engine *e);

/* Reset every non-empty data zone of @dev. Synchronous. 0 or -errno. */
int za_engine_format(struct za_dev *dev);

/* Stream 0 carries data with the array's geometry (params.geom). */
#define ZA_STREAM_DATA 0u
#define ZA_ENGINE_MAX_STREAMS 4u

/*
 * Add a stream with its own geometry (e.g. the journal: k = 1, one 4 KiB
 * chunk per stripe) and write-set width (@max_segs segments per group; 0:
 * as many as fit). Returns 0 and the stream id in @id, or -errno.
 */
int za_engine_stream_add(struct za_engine *e, const struct za_geom *g,
			 unsigned max_segs, unsigned *id);
/*
 * Stream @id's zones are read at every recovery whatever the engine
 * table says (the checkpoint stream: few zones, and where the table
 * itself is found). Its released zones are free at once, never in
 * quarantine (design.md 9.6). Call before anything is written.
 */
void za_engine_stream_set_rescan(struct za_engine *e, unsigned id);
const struct za_stripe_layout *za_engine_layout(const struct za_engine *e);
const struct za_stripe_layout *
za_engine_stream_layout(const struct za_engine *e, unsigned id);

/* ---- writing ---- */

/*
 * A stripe being written. The engine owns the buffer (k+p columns of
 * slot_bytes each, 4 KiB aligned): callers fill the data blocks through
 * za_stripe_w_block() and their LBAs in lbas[], set nr_blocks, kind,
 * done and priv, and hand it to za_engine_write().
 */
struct za_stripe_w {
	uint8_t *buf; /* width * slot_bytes */
	unsigned stream; /* set by za_engine_stripe_get_stream() */
	uint64_t *lbas; /* data_blocks entries */
	/* Data blocks that are not in buf but elsewhere (data_blocks
	 * entries; NULL: in buf), za_stripe_w_refer(). */
	const uint8_t **src;
	uint32_t nr_src;
	uint32_t nr_blocks; /* data blocks used: 0..nr_blocks-1 */
	uint8_t kind; /* enum za_stripe_kind */
	void (*done)(struct za_stripe_w *s, int result);
	void *priv;

	/* Set before done(result == 0): where the stripe is, durable on all
	 * k+p columns (as far as the drives' caches allow: see flush). Its
	 * data blocks are at group positions group_pos * data_blocks + b. */
	uint64_t group_id;
	uint64_t group_pos; /* stripe number within the group */
	uint64_t seg_id;
	uint32_t stripe_idx;
	uint64_t seq;

	/* private to the engine (engine-*.c) */
	struct za_work work; /* parity and headers on the engine's worker */
	struct za_stripe_hdr *hdr; /* the header its columns share */
	uint64_t absent; /* columns not written, at dispatch */
	/* Where each column goes, set at dispatch for the worker's staging
	 * (width entries), and the columns whose every byte it staged. */
	struct za_dev **col_dev;
	uint64_t *col_off;
	uint64_t staged;
	struct za_engine *eng;
	struct za_segment *seg;
	struct za_stripe_w *next;
	struct za_dev_req *reqs; /* width */
	unsigned pending;
	uint64_t fail_mask;
	int tries;
};

/* Allocate a stripe buffer (pooled). Returns NULL on allocation failure. */
struct za_stripe_w *za_engine_stripe_get(struct za_engine *e);
struct za_stripe_w *za_engine_stripe_get_stream(struct za_engine *e,
						unsigned stream);
void za_engine_stripe_put(struct za_engine *e, struct za_stripe_w *s);

/* Pointer to stripe data block @b (0 <= b < data_blocks) in the buffer. */
uint8_t *za_stripe_w_block(const struct za_engine *e, struct za_stripe_w *s,
			   uint32_t b);
/*
 * Data block @b is the 4096 bytes at @data, not in the buffer: the
 * engine reads them from there (parity, checksums, the drives) instead
 * of the caller copying them in. @data must stay valid and unchanged
 * until done() has run or za_stripe_w_own() was called; any alignment.
 * Each block is given once, either way.
 */
void za_stripe_w_refer(const struct za_engine *e, struct za_stripe_w *s,
		       uint32_t b, const void *data);
/* Where data block @b's bytes are now: referred to, or in the buffer. */
const uint8_t *za_stripe_w_data(const struct za_engine *e,
				struct za_stripe_w *s, uint32_t b);
/* Copy every referred-to block into the buffer: @s refers to nothing
 * after. Not while the stripe is being written (between za_engine_write()
 * and done()). */
void za_stripe_w_own(const struct za_engine *e, struct za_stripe_w *s);

/*
 * Write @s: assign it to an open segment, compute parity and headers,
 * write all k+p columns. done() runs once, later: 0 when every column
 * completed (s->seg_id/stripe_idx/seq say where); -ENOSPC when no
 * segment can be opened (too few writable members or no free zones);
 * -EIO when it failed too many times. A column that fails excludes its
 * member or seals its segment, and the stripe is written again, whole, in
 * another segment: callers never see that except in the counters.
 */
void za_engine_write(struct za_engine *e, struct za_stripe_w *s);

/*
 * FLUSH every online member. done(0) when all flushed (a member that fails
 * meanwhile is excluded and does not count), -EIO when some segment that
 * may hold live data has lost more than p columns (absent ones included):
 * not when more than p members are lost but their columns were rebuilt or
 * never shared a segment.
 */
struct za_engine_flush {
	void (*done)(struct za_engine_flush *f, int result);
	void *priv;
	/* private */
	struct za_engine *eng;
	struct za_dev_req *reqs;
	struct za_io_defer defer;
	unsigned pending;
	int result;
};
void za_engine_flush(struct za_engine *e, struct za_engine_flush *f);

/* ---- reading ---- */

struct za_read {
	uint64_t group_id;
	uint64_t gpos; /* data block position within the group */
	uint32_t nr_blocks;
	uint8_t *buf; /* nr_blocks * 4096, 4 KiB aligned */
	void (*done)(struct za_read *r, int result);
	void *priv;
	/* Background work (GC) reads at ZA_DEV_PRIO_LOW, so that user I/O
	 * queued behind it on a drive goes first. 0 (NORMAL) unless set. */
	enum za_dev_prio prio;

	/* Set before done(). */
	uint32_t repaired_blocks; /* blocks decoded from redundancy */
	/* private */
	struct za_engine *eng;
	struct za_io_defer defer;
	void *grp; /* pinned against release while the read runs */
	unsigned pending;
	int result;
};

/*
 * Read data blocks [gpos, gpos + nr_blocks) of a group, verified against
 * their stripe headers. A block that cannot be read or fails its CRC is
 * decoded from the other columns and counted against its member.
 * done(0) with exact data, or -EIO when more than p columns of a stripe
 * are lost (never wrong data), -EINVAL for a range outside what was
 * written, -ENOENT for an unknown group.
 */
void za_engine_read(struct za_engine *e, struct za_read *r);

/*
 * The LBA tables of group stripes [first_stripe, first_stripe +
 * nr_stripes) (engine-lbas.c): which logical block each of their data
 * positions holds, from the stripe headers alone, no payload read. Group
 * stripe j is stripe j / nr_segs of segment j % nr_segs (struct
 * za_group_info); its next_pos says how many were handed out.
 */
struct za_read_lbas {
	uint64_t group_id;
	uint64_t first_stripe; /* group stripe, group_pos of a stripe */
	uint32_t nr_stripes;
	/*
	 * Out: nr_stripes * data_blocks entries in group position order,
	 * entry i the LBA written at group position first_stripe *
	 * data_blocks + i, or ZA_STRIPE_LBA_NONE: a block written dead or
	 * padding, a metadata stripe (ZA_STRIPE_META: its LBAs are the
	 * owner's), a stripe a rebuild found dead that fewer than k
	 * headers describe now, or one recovery found nothing of. LBAs
	 * are as written (verified), not range-checked, and may no longer
	 * be live there: the map says which are.
	 */
	uint64_t *lbas;
	void (*done)(struct za_read_lbas *r, int result);
	void *priv;
	enum za_dev_prio prio; /* GC: ZA_DEV_PRIO_LOW */

	/* Set before done(): stripes whose table was decoded (a data
	 * column's header failed). */
	uint32_t decoded;
	/* private */
	struct za_engine *eng;
	struct za_io_defer defer;
	void *grp; /* pinned against release while the read runs */
	void *ctx;
	int result;
};

/*
 * Read them, up to 32 stripes at once, pinning the group against
 * release: for each stripe the k data columns' headers (each holds only
 * its own column's LBAs), each verified (CRCs, identity, place) before
 * use; a data column that fails is decoded from the LBA tables of k
 * verified headers, parity ones included, and counted against its member
 * as a read does. done() runs later, on the loop: 0; -EIO when some
 * stripe has fewer than k verified headers (and was not found dead);
 * -ENOENT for an unknown or released group; -EINVAL for an empty range or
 * one past next_pos; -EBUSY when a stripe of it is still being written;
 * -ENOMEM. After -EIO or -ENOMEM every entry of lbas is
 * ZA_STRIPE_LBA_NONE (nothing unverified, nothing partial); after
 * -ENOENT, -EINVAL or -EBUSY it is untouched.
 */
void za_engine_read_lbas(struct za_engine *e, struct za_read_lbas *r);

/* Synchronous wrappers for tools and tests (run the loop until done). */
int za_engine_write_sync(struct za_engine *e, struct za_stripe_w *s);
int za_engine_read_sync(struct za_engine *e, uint64_t group_id, uint64_t gpos,
			uint32_t nr_blocks, void *buf, uint32_t *repaired);
int za_engine_read_lbas_sync(struct za_engine *e, uint64_t group_id,
			     uint64_t first_stripe, uint32_t nr_stripes,
			     uint64_t *lbas, uint32_t *decoded);
int za_engine_flush_sync(struct za_engine *e);

/* ---- members and segments ---- */

/*
 * A new member (zarray add): @dev's data zones must be empty (formatted).
 * New groups use it at once; a group taking stripes with absent columns
 * (too few members for k+p) stops, so that the next is as wide as the
 * members now allow. Returns 0 and its index, -ENOSPC (1024 members),
 * -EINVAL (I/O size or write granularity unsuitable), -ENOMEM.
 */
int za_engine_member_add(struct za_engine *e, struct za_dev *dev,
			 unsigned *idx);
/*
 * Start draining member @idx (zarray remove/replace): no new segment uses
 * it, it still serves reads, and za_engine_degraded() lists its columns
 * to move. 0, or -EINVAL if it is not online.
 */
int za_engine_member_drain(struct za_engine *e, unsigned idx);
/*
 * Take a draining member back into service (a replace whose new drive
 * failed): new segments may use it again and what it holds stays; a
 * column moving off it now finishes where it goes. 0, or -EINVAL if it is
 * not draining.
 */
int za_engine_member_undrain(struct za_engine *e, unsigned idx);
/* Exclude member @idx now (zarray fail, or I/O errors): see params. */
void za_engine_member_fail(struct za_engine *e, unsigned idx, int err);
enum za_member_state za_engine_member_state(const struct za_engine *e,
					    unsigned idx);
void za_engine_member_stats(const struct za_engine *e, unsigned idx,
			    struct za_member_stats *st);
/* Members new segments can be placed on. */
unsigned za_engine_nr_writable(const struct za_engine *e);
/* Members currently failed or missing. */
unsigned za_engine_nr_lost(const struct za_engine *e);
/*
 * Redundancy the worst segment that may hold live data has lost: its
 * columns absent (opened on fewer than k+p members) or on members not
 * readable, rebuilding or not. Segments with columns marked dead
 * (za_engine_seg_mark_dead) do not count. 0: every segment is whole.
 */
unsigned za_engine_seg_lost_max(const struct za_engine *e);

struct za_seg_info {
	uint64_t id;
	enum za_seg_state state;
	uint32_t nr_stripes; /* stripes that fit */
	uint32_t next_stripe; /* stripes handed out (written or in flight) */
	/* Per column: where it is now; ZA_STRIPE_MEMBER_ABSENT (zone 0) for
	 * a column born absent and not rebuilt yet. */
	uint16_t members[64];
	uint32_t zones[64]; /* zone index per column */
};
/* Returns 0 or -ENOENT. */
int za_engine_seg_info(const struct za_engine *e, uint64_t seg_id,
		       struct za_seg_info *info);
/*
 * A group: the segments of one stream opened together and written round
 * robin, stripe j of the group being stripe j / nr_segs of segment
 * j % nr_segs. Sequential data stays contiguous in group positions
 * whatever the width of the write set, so the volume's map needs one
 * extent per group, not per stripe.
 */
struct za_group_info {
	uint64_t id;
	unsigned stream;
	unsigned nr_segs;
	uint32_t nr_stripes; /* per segment */
	uint64_t next_pos; /* stripes handed out */
	bool taking;
	bool busy; /* stripes or zone finishes in flight */
	uint64_t seg_ids[ZA_SB_MAX_MEMBERS];
};
int za_engine_group_info(const struct za_engine *e, uint64_t group_id,
			 struct za_group_info *info);
/* Locate group stripe @pos: its segment and stripe index. 0 or -ENOENT. */
int za_engine_group_locate(const struct za_engine *e, uint64_t group_id,
			   uint64_t pos, uint64_t *seg_id,
			   uint32_t *stripe_idx);

/*
 * Data blocks the free zones of the writable members can hold in data
 * stripes, counting every zone at the smallest zone capacity (a group is
 * as long as its shortest zone): a floor, not an upper bound.
 */
uint64_t za_engine_data_capacity_blocks(const struct za_engine *e);

/* Zone accounting for space management (garbage collection). */
struct za_engine_space {
	uint64_t free_zones; /* free data zones of writable members */
	uint64_t total_zones; /* free + used data zones of writable members */
	/*
	 * In data-stream segments (k+p zones on distinct members, or one
	 * zone on every writable member when fewer than k+p are): how many
	 * could still be opened from the free zones, how many the members
	 * hold in all, and how many one write set of every stream takes.
	 */
	uint64_t free_segs, total_segs, write_set_segs;
	/* Segments more that could be opened once the zones in quarantine
	 * are free (za_engine_table_live()). */
	uint64_t quar_segs;
	uint64_t data_blocks_per_seg; /* data stream, shortest zone */
};
void za_engine_space(const struct za_engine *e, struct za_engine_space *sp);
/* Bytes of data zones (free or in use: not superblock, conventional or
 * bad ones) member @idx has, by zone capacity; 0 if none are known (a
 * member missing since assembly). */
uint64_t za_engine_member_data_bytes(const struct za_engine *e, unsigned idx);
/* What a what-if (za_engine_space_if) does to one member. */
enum za_space_change {
	ZA_SPACE_AS_IS = 0,
	ZA_SPACE_GONE, /* not writable: drained away (zarray remove) */
	ZA_SPACE_BACK, /* draining, back in service: writable (the old drive
			* of a replace whose new one is removed) */
};
/*
 * The same numbers as if each member @change[i] names were gone or back:
 * what the writable members would have then. @change has one entry per
 * member, indexed as za_engine_member_add() and the params number them
 * (the array's member indices); NULL: as things are.
 */
void za_engine_space_if(const struct za_engine *e,
			const enum za_space_change *change,
			struct za_engine_space *sp);

/*
 * Give a group's zones back (garbage collection has moved its live data):
 * once no read of it is running, every zone of its segments is reset and
 * becomes free. The group must not be taking stripes nor have any in
 * flight (-EBUSY), and must exist (-ENOENT). @done runs later, on the
 * loop, with 0 or the first reset error (zones that failed to reset are
 * kept out of use). Returns 0 when the release has started.
 */
int za_engine_group_release(struct za_engine *e, uint64_t group_id,
			    void (*done)(void *priv, int result), void *priv);
/* Data blocks a group holds when every stripe is written. */
uint64_t za_engine_group_capacity_blocks(const struct za_engine *e,
					 uint64_t group_id);
/* Ids of the groups that exist (sealed or taking), up to @max of them,
 * sorted; returns how many exist (past @max, some are left out). */
unsigned za_engine_groups(const struct za_engine *e, uint64_t *ids,
			  unsigned max);

/* ---- crash recovery ---- */

/* A stripe found on the drives, handed to the owner in sequence order. */
struct za_recovered_stripe {
	unsigned stream;
	uint8_t kind; /* enum za_stripe_kind */
	uint64_t seq;
	uint64_t group_id;
	uint64_t group_pos;
	uint32_t nr_blocks;
	const uint64_t *lbas; /* data_blocks entries, stripe block order */
};

/*
 * Rebuild the engine's groups and segments from the stripe headers on the
 * drives, then hand every stripe that can still be read (at least k of its
 * columns found) to @fn in sequence order. Zones no stripe claims are
 * reset; partly written zones are finished; new writes go to new groups.
 * Call it once, after za_engine_new() and after every stream was added,
 * before any write. Synchronous. Returns 0, a negative value @fn returned,
 * or -errno.
 *
 * @start (may be NULL) runs once between the two: the tables are rebuilt,
 * reads work, nothing was handed over yet. It sets *min_seq when the
 * owner already knows what the drives hold up to that sequence number (a
 * checkpoint it has just read); stripes with seq <= *min_seq are then
 * neither read again nor handed to @fn. A negative return stops recovery.
 */
int za_engine_recover_from(struct za_engine *e,
			   int (*start)(void *priv, uint64_t *min_seq),
			   int (*fn)(void *priv,
				     const struct za_recovered_stripe *rs),
			   void *priv);
/*
 * Recovery resting on the engine table (design.md 9.6 item 4). @plan
 * (NULL: none) runs once inside za_engine_recover_from(), with its @priv,
 * after the zone reports and before pass 1: it may read chosen zones
 * whole (za_engine_recover_scan(): the anchored checkpoint's), read
 * stripes of the segments found there (reads work on them), and adopt
 * the engine table of the checkpoint it loads (za_engine_table_adopt()).
 * Pass 1 then reads only what the table does not account for: written
 * zones no segment of it holds, and its segments still open at its
 * sequence number from their next stripe on. Without an adopted table,
 * pass 1 reads everything, as without a plan. A negative return stops
 * recovery. Call before za_engine_recover_from().
 */
void za_engine_recover_plan(struct za_engine *e, int (*plan)(void *priv));
/* From @plan only: read zone @zone of member @member whole, unless it is
 * empty, not readable or read already. 0 or -errno (-ENODEV). */
int za_engine_recover_scan(struct za_engine *e, unsigned member, uint32_t zone);
/* The same, only if the zone's first stripe header is one of segment
 * @seg_id's (a place an older table gives it may hold another's since).
 * 0 (read or left to pass 1) or -errno. */
int za_engine_recover_scan_seg(struct za_engine *e, unsigned member,
			       uint32_t zone, uint64_t seg_id);
/*
 * From @plan only: take the table in @blocks (@nr_parts parts, as read
 * from the drives: untrusted) as the engine's groups and segments, its
 * counters as a floor for the engine's, except the segments of a stream
 * recovery reads whole (za_engine_stream_set_rescan()). Everything is
 * checked first - places inside the array, no group place or zone given
 * twice, none recovery has given already - and nothing is changed unless
 * all holds. Returns 0, -EBADMSG (not usable: nothing changed; recovery
 * reads everything) or -ENOMEM (recovery must stop).
 */
int za_engine_table_adopt(struct za_engine *e, const uint8_t *blocks,
			  uint32_t nr_parts);

static inline int
za_engine_recover(struct za_engine *e,
		  int (*fn)(void *priv, const struct za_recovered_stripe *rs),
		  void *priv)
{
	return za_engine_recover_from(e, NULL, fn, priv);
}

/* ---- rebuild ---- */

/* A segment with columns on lost members (failed, missing, removed) or
 * absent (opened on fewer than k+p members): both are lost columns. */
struct za_engine_degraded {
	uint64_t seg_id;
	uint64_t group_id;
	unsigned group_pos; /* its place in the group: group stripe j is */
	unsigned group_w; /* stripe j / group_w of segment j % group_w */
	unsigned stream;
	uint32_t nr_written; /* stripes written */
	unsigned lost; /* columns lost */
	uint64_t lost_cols; /* columns on lost members */
	uint64_t todo; /* columns to rebuild or move off a draining member
			* (not dead, not running) */
	bool busy; /* still taking or writing stripes: come back later */
};

/*
 * Degraded segments with columns to rebuild, least redundancy left first
 * (then metadata streams first): fills up to @max entries of @out (may be
 * NULL) and returns how many there are in all.
 */
size_t za_engine_degraded(const struct za_engine *e,
			  struct za_engine_degraded *out, size_t max);

/*
 * Count, per member, the slots the rebuild of every listed column will
 * read from it (its share of the degraded segments' readable columns), so
 * that replacement zones go to members whose own reads are few. Called by
 * the rebuild job at the start of each pass, on the loop thread; a hint
 * for placement only.
 */
void za_engine_rebuild_plan(struct za_engine *e);
/* Lost columns @cols of a sealed segment that holds no live data at all:
 * leave them lost and stop reporting them; the segment no longer counts
 * as lost (za_engine_seg_lost_max), whatever it loses later. Only for a
 * segment with no live stripe. 0 or -ENOENT. */
int za_engine_seg_mark_dead(struct za_engine *e, uint64_t seg_id,
			    uint64_t cols);
/* Segment columns that still need member @idx (dead ones excluded). */
unsigned za_engine_member_refs(const struct za_engine *e, unsigned idx);
/* A lost member nothing needs any more becomes REMOVED: 0, or -EBUSY
 * while segment columns still need it, -EINVAL if it is not lost. */
int za_engine_member_retire(struct za_engine *e, unsigned idx);
/*
 * The engine lets go of a REMOVED member's device, which the caller may
 * then close: 0, -EBUSY while requests to it are in flight (try again
 * later), -EINVAL if the member is not REMOVED or has no device. Loop
 * thread.
 */
int za_engine_member_release(struct za_engine *e, unsigned idx);

/*
 * Rebuild lost column @col of a segment into a free zone of a writable
 * member outside it: stripes [0, nr_stripes) in order, each live one
 * (bit set in @live) decoded from k verified columns, each dead one
 * written as a hole without reading anything. The last stripe must be
 * live. The column moves to its new place when every stripe is written.
 */
struct za_col_rebuild {
	uint64_t seg_id;
	unsigned col;
	uint32_t nr_stripes;
	const uint64_t *live; /* bitmap, nr_stripes bits; the caller's */
	unsigned window; /* stripes in flight; 0: 4 */
	/*
	 * move: the column is readable but must go elsewhere (drain,
	 * replace, scrub repair): each stripe is copied from it (one read)
	 * when it verifies, decoded from k others when it does not, or
	 * always decoded with @decode. want_dst: put it on @dst_member.
	 */
	bool move, decode;
	bool want_dst;
	unsigned dst_member;
	/* Loop thread, before a live stripe is started: false to hold it
	 * (pause, rate limit) until za_engine_col_rebuild_kick(). */
	bool (*may_start)(struct za_col_rebuild *cr, uint64_t bytes);
	/* Loop thread, after each live stripe is written: @bytes of the
	 * lost column restored. */
	void (*progress)(struct za_col_rebuild *cr, uint64_t bytes);
	/* Loop thread, once: 0; -EIO (more than p columns of a stripe
	 * lost, or the replacement failed), -ECANCELED (aborted). */
	void (*done)(struct za_col_rebuild *cr, int result);
	void *priv;

	/* Set by the engine. */
	unsigned member; /* replacement member */
	uint32_t zone;
	uint64_t read_bytes, written_bytes;
	uint32_t rebuilt, holes; /* stripes decoded; dead ones skipped */
	uint32_t copied; /* move: stripes copied from the column itself */
	void *priv_eng;
};
/*
 * Loop thread, for a rebuild that found segment @seg_id busy: -ENOSPC or
 * -EAGAIN if it is open but idle and no member could take its lost
 * column @col (the column waits for a drive, as in a sealed segment);
 * otherwise -EBUSY (look again later), having sealed such a segment's
 * group when a member could take the column; -ENOENT if unknown.
 */
int za_engine_col_busy(struct za_engine *e, uint64_t seg_id, unsigned col);
/*
 * Start it (done() runs later, never inside the call). Its reads and
 * writes reach the drives at ZA_DEV_PRIO_LOW: user I/O goes first. Returns
 * 0, -ENOENT (no such segment), -EINVAL, -EBUSY (the segment is still written, or
 * that column is already being rebuilt), -EALREADY (the column is not
 * lost and !move), -EAGAIN (the members that could take it have their
 * open-zone budget in use: try again when a column ends), -ENOSPC (no
 * member can take it, or not @dst_member), -ENOMEM.
 */
int za_engine_col_rebuild(struct za_engine *e, struct za_col_rebuild *cr);
/* may_start() would now say yes: go on. */
void za_engine_col_rebuild_kick(struct za_engine *e, struct za_col_rebuild *cr);
/* Stop starting stripes; done(-ECANCELED) once those in flight end. */
void za_engine_col_rebuild_abort(struct za_engine *e,
				 struct za_col_rebuild *cr);

/* ---- scrub ---- */

/*
 * Check one stripe (scrub.c): read every readable column whole (header
 * and payload), verify each (header identity and place, CRC32C of every
 * block, one write's sequence number), then, with at least k verified,
 * recompute every verified column beyond the first k (the parity, when
 * the data columns verify) from those k, payload and LBA table, and
 * compare. Nothing is written: a bad column is repaired by moving it
 * (za_engine_col_rebuild with move and decode). Columns on lost members,
 * and stripes a moved column does not hold, are skipped, not bad.
 */
struct za_stripe_check {
	uint64_t seg_id;
	uint32_t stripe_idx;
	/* Loop thread, once, never inside the call: 0 when the check ran
	 * (whatever it found), -EIO when fewer than k columns verify (the
	 * masks still say what was found), -ENOMEM. */
	void (*done)(struct za_stripe_check *sc, int result);
	void *priv;

	/* Set before done(): column masks, bit c for column c. */
	uint64_t lost_cols; /* not read: lost member, or not held there */
	uint64_t hole_cols; /* a rebuild wrote the stripe here as dead */
	uint64_t err_read_cols; /* read error */
	uint64_t err_crc_cols; /* bad header or block CRC, or stale */
	uint64_t inconsistent_cols; /* verifies, disagrees with the code */
	uint64_t good_cols; /* verified and consistent */
	uint64_t compared_cols; /* recomputed from k others and compared */
	uint64_t read_bytes;
	void *priv_eng;
};
/*
 * Start it; its reads are ZA_DEV_PRIO_LOW (scrub is background work).
 * Returns 0 (done() runs later), -ENOENT (no such segment, or
 * its group is being released), -EINVAL (stripe not written, no done),
 * -EBUSY (the segment is still taking or writing stripes), -ENOMEM.
 */
int za_engine_stripe_check(struct za_engine *e, struct za_stripe_check *sc);

struct za_engine_stats {
	uint64_t stripes_written;
	uint64_t stripes_rewritten; /* written again after a column failed */
	uint64_t cols_staged; /* column writes whose data was staged */
	uint64_t segs_opened, segs_sealed, groups_opened;
	uint64_t blocks_read, blocks_repaired;
	uint64_t free_zones; /* over all writable members */
	uint64_t quarantined_zones; /* waiting for a table (9.6), all members */
	uint64_t next_seq;
	unsigned open_segs; /* segments taking stripes, all streams */
	/* The last recovery: zones it read, headers it read, segments it
	 * took from the engine table instead (design.md 9.6); the headers
	 * pass 1 used that were read ahead side by side, and those read
	 * ahead it did not use (9.2). */
	uint64_t rec_zones_scanned, rec_hdr_reads, rec_table_segs;
	uint64_t rec_hdr_ahead, rec_hdr_ahead_unused;
};
void za_engine_get_stats(const struct za_engine *e, struct za_engine_stats *st);

/*
 * The engine table (engine-table.c; docs/format.md, "Engine table
 * block"): the engine's groups, segments and counters, as of sequence
 * number @seq, encoded into *@nr_parts parts of ZA_ETAB_BLOCK_BYTES in
 * *@blocks (malloc'd; the caller frees it) for the checkpoint @ckpt_id.
 * *@snap numbers the table among those taken: pass it to
 * za_engine_table_live() once the checkpoint holding it is live. Call at
 * a quiet point (nothing in flight). Loop thread, synchronous. Returns
 * 0, -ENOMEM or -EINVAL (a state the format cannot say).
 */
int za_engine_table_encode(struct za_engine *e, uint64_t ckpt_id, uint64_t seq,
			   uint8_t **blocks, uint32_t *nr_parts,
			   uint32_t *snap);

/*
 * Table @snap is the live one (its checkpoint flushed): no recovery can
 * load an older one, so the zones released before it was taken leave
 * quarantine and are free again (design.md 9.6). Loop thread.
 */
void za_engine_table_live(struct za_engine *e, uint32_t snap);

/* Zones in quarantine now, waiting for a table to be live. */
size_t za_engine_quarantined(const struct za_engine *e);
/*
 * Free every zone in quarantine now, before any table is live: the last
 * resort of a volume with no room left to write the checkpoint that
 * would free them (design.md 9.6). Until a table taken after this is
 * live, the live one may name zones other segments write. Returns how
 * many were freed.
 */
size_t za_engine_quarantine_break(struct za_engine *e);

/* What za_engine_table_check() found. */
struct za_engine_table_stats {
	uint64_t segments; /* in the table */
	uint64_t matched; /* found on the drives as the table says */
	uint64_t released; /* in the table, not on the drives: since gone */
	uint64_t added; /* on the drives, newer than the table */
	uint64_t mismatches; /* what may not differ did (each logged) */
	/* Places the table gives a segment that no longer holds them
	 * (released, or the column moved since): quarantined at the end of
	 * recovery; one written by another segment is a mismatch. */
	uint64_t vacated;
};

/*
 * At recovery, between the scan of the drives and the replay (the
 * owner's start callback of za_engine_recover_from()): compare the table
 * in @blocks (@nr_parts parts, as read from the drives: untrusted) with
 * what the scan found, and keep the places it gives to segments that no
 * longer hold them, to quarantine when recovery ends. Pass the table of
 * the checkpoint recovery loads, and only that one. Returns 0 (then @out
 * says how they compare), -EBADMSG (the table does not decode or names
 * what the array does not have) or -ENOMEM.
 */
int za_engine_table_check(struct za_engine *e, const uint8_t *blocks,
			  uint32_t nr_parts, struct za_engine_table_stats *out);

#endif /* ZA_ENGINE_H */
