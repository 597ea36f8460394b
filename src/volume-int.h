/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * volume-int.h - what the volume's files share and nothing else may use:
 * the bodies of struct za_volume, its stripe buffers and flush epochs,
 * the live counters and GC's usage buckets, the state of garbage
 * collection and of checkpoints, and the vol_ functions that cross
 * volume.c (buffers, flush, writes, reads, space), gc.c (live counters,
 * garbage collection), volume-checkpoint.c (checkpoints),
 * volume-recover.c (crash recovery) and volume-mapcache.c (the map
 * cache). It is not an interface: everything outside these files uses
 * volume.h. volume.c's opening comment tells how the pieces fit. Loop
 * thread only.
 */
#ifndef ZA_VOLUME_INT_H
#define ZA_VOLUME_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ev.h>

#include "anchor.h"
#include "checkpoint.h"
#include "engine.h"
#include "job.h"
#include "journal.h"
#include "map.h"
#include "volume.h"

#define BUF_HASH 256u
/* GC's usage buckets (fractions of a group live). */
#define GC_BUCKETS 64
/* Payloads one buffer refers to at most; further blocks are copied. */
#define VBUF_MAX_PAYLOADS 16u

struct epoch {
	unsigned inflight; /* stripes of this epoch not yet complete */
	struct za_vol_req *waiters; /* flushes closing this epoch */
	struct epoch *next;
};

struct vbuf {
	struct za_volume *v;
	uint64_t id;
	unsigned stream;
	struct za_stripe_w *s;
	uint32_t nr; /* blocks filled */
	uint8_t kind; /* enum za_stripe_kind */
	bool failed;
	struct epoch *ep;
	struct vbuf *hnext;
	/* What its stripe's referred-to blocks (za_stripe_w_refer()) are
	 * in: one reference each, dropped when the stripe no longer needs
	 * them. */
	struct za_payload *pl[VBUF_MAX_PAYLOADS];
	unsigned nr_pl;
};

struct urange {
	uint64_t lba, n;
};

/* What a group's stream is, to GC. */
enum live_kind { LK_UNKNOWN, LK_DATA, LK_JOURNAL, LK_CKPT, LK_OTHER };

/*
 * A group's live counter, for garbage collection: one per group of the
 * engine (rec_finish() makes one for every group there is at assembly;
 * later groups get theirs with their first stripe). Each is in a hash
 * chain by group id and, when GC may take its group, in the usage bucket
 * of the fraction of it that is live (gc_choose()).
 */
struct live {
	uint64_t group;
	uint64_t blocks;
	uint64_t pages; /* of blocks: map pages of the tree (checkpoint stream) */
	/* Recovery: the count the loaded checkpoint holds (version 4), and
	 * what the replay added and took since (design.md 9.8). */
	uint64_t rec_count;
	int64_t rec_delta;
	bool rec_listed;
	struct urange *unmaps; /* unmap records this (journal) group holds */
	unsigned nr_unmaps, cap_unmaps;
	bool stuck; /* garbage collection could not move its data */
	bool releasing; /* a checkpoint group given back, outside GC */
	bool unmaps_lost; /* an unmap record is missing from the list */
	uint8_t kind; /* enum live_kind */
	int bucket; /* GC usage bucket, -1: in none */
	double zones; /* zones the group holds (segments x stream width) */
	struct live *next; /* hash chain */
	struct live *bprev, *bnext; /* usage bucket */
};

/*
 * Every group's live counter, by id, and GC's usage buckets. Bucket b
 * holds the groups GC may take whose live fraction u (live_u()) is in
 * [b, b+1) / GC_BUCKETS; a counter moves between buckets as its blocks
 * die, so a choice reads the lowest buckets instead of every group.
 */
struct live_tab {
	struct live **h;
	size_t size, nr;
	struct live *bucket[GC_BUCKETS], *btail[GC_BUCKETS]; /* FIFO */
	uint64_t dbps; /* data blocks per segment the buckets assume */
	uint64_t max_group; /* the newest group seen: ages for GC's score */
	struct za_group_info *gi; /* scratch for za_engine_group_info() */
};

/* Garbage collection: one victim group at a time. */
struct gc_ext {
	uint64_t lba, n, pos;
};

struct gc {
	/*
	 * GC as a background job (job.h): a run is a series of victims, from
	 * the first chosen while GC had nothing to do until it has nothing to
	 * do again; total counts the live bytes of the victims chosen, done
	 * those moved. Its rate limit and pause hold GC back only while no
	 * write waits for it (gc_urgent()).
	 */
	struct za_job job;
	bool active;
	bool held; /* reads of the victim wait for the pause or the rate */
	bool stopped; /* za_volume_gc_stop(): no new victim */
	unsigned ckpt_releases; /* vol_gc_release_ckpt_garbage(), in flight */
	uint64_t victim;
	uint8_t kind; /* ZA_MAP_DATA or ZA_MAP_JOURNAL */
	struct gc_ext *ext;
	size_t nr_ext, cap_ext, next_ext;
	uint64_t next_off; /* blocks of ext[next_ext] already read */
	unsigned reads;
	/*
	 * Collecting: the victim's stripes' LBA tables being read
	 * (gc_collect_pump()), col_next of col_stripes asked for so far,
	 * col_reads in flight; col_dbs data blocks per stripe.
	 */
	bool collecting;
	bool col_partial; /* some stripes' LBA tables were unreadable */
	bool walked; /* the whole map was walked for what they missed */
	uint64_t col_next, col_stripes;
	uint32_t col_dbs;
	unsigned col_reads;
	int error;
	struct za_vol_req flush;
	/*
	 * Map pages GC waits for (its victim's leaves are in memory from its
	 * collection until it ends: no shrink while GC is active): the LBA
	 * tables whose runs wait, and where each got to.
	 */
	struct za_vol_mwait mw;
	bool mw_busy; /* mw waits */
	struct gc_lbas *col_wait;
	/* GC while the volume is idle (za_volume_params.idle_gc_ms). */
	ev_timer idle_w;
	unsigned idle_ms; /* za_volume_params.idle_gc_ms */
	bool idle_on; /* the timer runs */
	uint64_t idle_ops; /* user_ops at the last tick */
	uint64_t idle_base; /* free segments when its progress was last seen */
	unsigned idle_runs; /* victims it started since then */
};

/*
 * The map cache's side in the volume (volume-mapcache.c, design.md 9.8):
 * pages being read back, one read per page however many wait for it.
 */
struct mread;
struct mcache {
	uint64_t limit_bytes; /* za_volume_params.map_cache_bytes; 0: none */
	struct mread *reads; /* in flight */
	unsigned nr_reads;
	unsigned waits; /* user requests waiting for a page */
	bool whole; /* a walk waits for the whole map: no shrink */
	bool hold; /* cleaning prepares a checkpoint: no shrink */
};

/* Checkpoints: one being written at a time, and the live one. */
/*
 * CK_ANCHOR: complete and flushed, its anchor being made durable
 * (za_volume_params.anchor); CK_REVOKE: out of room, the live anchor
 * being revoked before the quarantine is freed early.
 */
enum { CK_IDLE, CK_QUIESCE, CK_WRITE, CK_FLUSH, CK_ANCHOR, CK_REVOKE };
/* CK_WRITE: what is being written. */
enum { CKP_LEAVES, CKP_DIRS, CKP_PARTS };

/* A map page of the checkpoint being written. */
struct ck_page {
	struct za_volume *v;
	struct za_map_page *pg;
	uint64_t lo, hi;
	struct za_map_child *c; /* a directory page's children */
	uint32_t n;
};

struct ckpt {
	unsigned stream; /* engine stream of checkpoint parts */
	uint64_t interval_blocks; /* 0: the adaptive default */
	unsigned window; /* parts in flight */
	bool recover_full;
	bool no_table_recovery; /* za_volume_params.no_table_recovery */
	uint64_t since_blocks; /* stripe blocks submitted since the last */
	/* Stripes the map depends on: bumped for each one submitted (and by
	 * a recovery that replayed some); what the live checkpoint saw. */
	uint64_t gen, snap_gen, live_gen;
	int state; /* CK_* */
	struct za_vol_req qflush; /* the flush that makes the point quiet */
	struct za_engine_flush ef; /* the one after the parts */
	struct za_vol_req *waiters; /* za_volume_checkpoint(), not yet covered */
	struct za_vol_req *cur_waiters; /* covered by the one being written */
	/* The one being written. */
	uint64_t id, seq;
	uint32_t tab_snap; /* its engine table's number (za_engine_table_live) */
	bool for_space; /* started to free zones in quarantine */
	bool whole; /* holds the map whole, in its parts (version 2) */
	bool space_failed; /* such a one failed: not again before a victim */
	bool retry; /* it failed for want of room its end then freed */
	uint32_t last_stripes; /* parts and pages the live one wrote */
	uint8_t *blocks; /* nr_parts encoded parts, once the pages are out */
	uint64_t *part_group; /* where each part written landed */
	uint64_t *part_pos; /* its group position */
	uint32_t nr_parts, next_part, done_parts;
	unsigned inflight;
	int error;
	/*
	 * Its map pages (design.md 9.7): what changed since the last one,
	 * written first, leaves then directory pages (each naming its
	 * children's places, so written after them), then the parts (the
	 * root: a record per directory page, the unmap records) and the
	 * engine table.
	 */
	int phase; /* CKP_* */
	uint64_t start_ns; /* when writes were held */
	struct za_map_snap snap;
	bool snapped; /* snap outstanding: za_map_snap_end() to come */
	struct ck_page *pages; /* nr_leaves leaves, then directory pages */
	uint8_t *pblocks; /* their blocks, in the same order */
	uint32_t nr_pages, nr_leaves, next_page, done_pages;
	uint32_t cb_leaves, cb_dirs; /* filled by the snapshot */
	struct za_map_child *root;
	uint32_t nr_root;
	struct za_ckpt_rec *unmaps; /* as of S */
	uint64_t nr_unmaps;
	/* Count records (version 4): the data and journal groups' live
	 * blocks as of S, then (at the parts) the stream's pages. */
	struct za_ckpt_rec *counts;
	uint64_t nr_counts;
	uint64_t map_extents; /* as of S */
	uint8_t *tblocks; /* the engine table as of S */
	uint32_t tparts;
	uint64_t pages_live; /* map pages counted live in their groups */
	/*
	 * Cleaning with the map cache (ckpt_clean_prep()): before the next
	 * checkpoint starts, the victim group's blocks are read and the
	 * nodes whose pages they are brought into memory, so that the
	 * checkpoint can write them again; nothing leaves memory meanwhile
	 * (mcache.hold). A batch of blocks at a time.
	 */
	bool cleaning, clean_ready;
	uint64_t clean_victim, clean_next, clean_end;
	struct za_read clean_er;
	struct za_vol_mwait clean_mw;
	uint8_t *clean_buf;
	uint32_t clean_i, clean_n; /* in the batch read */
	/* The live one: the latest complete, flushed (or loaded) checkpoint. */
	uint64_t live_id, live_seq;
	uint64_t *live_groups; /* its parts' groups */
	uint32_t live_nr;
	uint64_t next_id;
	/* Anchors (design.md 9.6): the owner's hook, and the live one. */
	void (*anchor)(void *priv, const uint8_t *rec);
	void *anchor_priv;
	const uint8_t *anchor_rec; /* what assembly found (recovery only) */
	struct za_anchor live_anchor; /* ckpt_id 0: none (yet) */
	struct za_anchor next_anchor; /* being made durable */
	int revoke_err; /* CK_REVOKE: the error ckpt_end() had */
};

struct za_volume {
	struct za_io *io;
	struct za_engine *eng;
	unsigned jstream;
	uint64_t size_blocks;
	struct za_map *map;
	struct vbuf *cur;
	uint64_t next_buf_id;
	struct vbuf *bhash[BUF_HASH];
	struct live_tab lt;
	struct epoch *ep_head, *ep_tail;
	unsigned eflushes; /* device flush rounds in flight */
	unsigned reads; /* reads in flight */
	int error; /* sticky: a stripe could not be made durable */
	struct za_volume_stats st;
	uint64_t user_ops; /* requests from the volume's user, ever */
	struct gc gc;
	/* writes held back while free space is critically low */
	struct za_vol_req *stalled_head, *stalled_tail;
	bool critical; /* free space below the user-write floor */
	uint32_t data_credit; /* data stripes the free space allows */
	uint32_t jrnl_credit; /* journal stripes the free space allows */
	unsigned data_inflight; /* data stripes submitted, not complete */
	unsigned jrnl_inflight; /* journal stripes submitted, not complete */
	struct ckpt ck;
	struct mcache mc;
};

/* volume.c */
struct vbuf *vol_vbuf_find(struct za_volume *v, uint64_t id);
struct vbuf *vol_vbuf_new(struct za_volume *v, unsigned stream);
void vol_vbuf_submit(struct za_volume *v, struct vbuf *b);
void vol_req_init(struct za_volume *v, struct za_vol_req *r);
void vol_flush_enqueue(struct za_volume *v, struct za_vol_req *r);
int vol_unmap(struct za_volume *v, uint64_t lba, uint64_t n);
/* One unmap record of up to ZA_JOURNAL_MAX_RANGES ranges (journal.h's
 * order: increasing, with gaps). */
int vol_unmap_ranges(struct za_volume *v, const struct za_journal_range *r,
		     unsigned nr);
uint64_t vol_gc_start_segs(const struct za_engine_space *sp);
uint64_t vol_gc_floor_segs(const struct za_volume *v,
			   const struct za_engine_space *sp);
uint64_t vol_ckpt_segs(const struct za_volume *v,
		       const struct za_engine_space *sp);
bool vol_space_critical(struct za_volume *v);
bool vol_gc_goes_first(const struct za_volume *v);
void vol_resume_stalled(struct za_volume *v);

/* gc.c */
int vol_live_tab_init(struct live_tab *lt);
void vol_live_index(struct za_volume *v, struct live *l);
int vol_live_learn(struct za_volume *v, struct live *l);
struct live *vol_live_get(struct za_volume *v, uint64_t group, bool make);
void vol_live_add(struct za_volume *v, struct live *l, int64_t delta);
void vol_live_drop(struct za_volume *v, struct live **lp);
void vol_live_clear(struct za_volume *v);
void vol_live_add_unmap(struct za_volume *v, uint64_t group, uint64_t lba,
			uint64_t n);
void vol_on_dead(void *priv, const struct za_map_loc *old, uint64_t n);
void vol_gc_kick(struct za_volume *v);
void vol_gc_job_timer(struct za_job *j);
void vol_gc_idle_set(struct za_volume *v, bool on);

/* volume-mapcache.c */
/*
 * Is what an operation on [lba, lba + n) needs of the map in memory
 * (@seams: a set, clear or move, map.h)? 0: yes, run it now; 1: a page
 * is being read, and @w->fn() is called once it is in or failed (then
 * ask again); -ENOMEM.
 */
int vol_map_fault(struct za_volume *v, uint64_t lba, uint64_t n, bool seams,
		  struct za_vol_mwait *w);
/*
 * The same, reading the pages at once (za_engine_read_sync()): recovery's
 * replay, which loaded the root only. 0, -EIO (a page unreadable or not
 * as its parent says: logged, counted) or -ENOMEM.
 */
int vol_map_fault_sync(struct za_volume *v, uint64_t lba, uint64_t n,
		       bool seams);
/*
 * A leaf page's @n records, as read (untrusted), into extents @e (at
 * least ZA_MAP_LEAF_CAP): 0, or -EBADMSG for too many records or one
 * beyond the volume. Recovery's whole load and the cache's fill share it.
 */
int vol_leaf_extents(const struct za_volume *v, const struct za_ckpt_rec *recs,
		     uint32_t n, struct za_map_ext *e);
/*
 * Let clean pages leave memory down to the limit, where nothing forbids
 * it now (GC active, a whole walk waiting). @all: two turns of the clock
 * (a checkpoint made its pages durable; recovery), else one. Either way
 * the pages used since the oldest waiter began waiting stay, so that it
 * gets all it needs at once (za_map_sweep(), seed 7010).
 */
void vol_map_trim(struct za_volume *v, bool all);
/*
 * What cannot leave memory (dirty nodes, pages a checkpoint is writing)
 * fills the cache's limit, and a checkpoint is under way or due: user
 * writes wait for it (can_write()), or the map would grow past the limit
 * as fast as they come.
 */
bool vol_map_full(const struct za_volume *v);
void vol_map_cache_free(struct za_volume *v);

/* volume-checkpoint.c */
void vol_ckpt_kick(struct za_volume *v);
bool vol_ckpt_for_space(const struct za_volume *v);
/* The checkpoint stream's segments are long enough for map pages (else
 * checkpoints hold the map whole, and it stays whole in memory). */
bool vol_ckpt_pages_ok(const struct za_volume *v);
/* With the map beyond the cache's limit, dirty nodes fill half of it: a
 * checkpoint is due (design.md 9.8). */
bool vol_ckpt_for_cache(const struct za_volume *v);
void vol_ckpt_free_quarantine(struct za_volume *v);
void vol_ckpt_pump(struct za_volume *v);
void vol_ckpt_free(struct za_volume *v);
/* A map page counted live in its group (@d 1), or no more (-1). */
void vol_page_count(struct za_volume *v, struct za_map_page *pg, int d);
/*
 * Add the segment holding stripe @stripe_idx of segment @seg_id (group
 * @group_id) to @a's list: 0, or -E2BIG past an anchor's segments. And
 * the segments holding the parts at @group[i], @pos[i] (@n parts) into
 * @a (nr_segs 0 when they cannot all be placed). Checkpoints place
 * their anchor so; recovery checks it so (volume-recover.c).
 */
int vol_anchor_seg_add(struct za_anchor *a, uint64_t seg_id, uint64_t group_id,
		       uint32_t stripe_idx);
void vol_anchor_place(const struct za_volume *v, struct za_anchor *a,
		      const uint64_t *group, const uint64_t *pos, uint32_t n);
void vol_gc_release_ckpt_garbage(struct za_volume *v);
/* Free space below GC's start point, zones in quarantine counted free. */
bool vol_gc_needed(const struct za_volume *v);

#endif /* ZA_VOLUME_INT_H */
