/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * engine-int.h - what the engine's files share and nothing else may use:
 * the bodies of struct za_engine, its members, streams, groups and
 * segments, the member predicates, and the eng_ functions that cross
 * files. It is not an interface: everything outside src/engine*.c uses
 * engine.h. engine.c's opening comment tells how the pieces fit.
 */
#ifndef ZA_ENGINE_INT_H
#define ZA_ENGINE_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "ec.h"
#include "engine.h"

enum zkind {
	Z_FREE = 0,
	Z_RESERVED, /* superblock or conventional */
	Z_USED,
	Z_BAD,
	Z_UNCLAIMED, /* recovery: holds data no segment has claimed yet */
	/* Reset, but a live engine table may still name it: not handed out
	 * until a later table is live (eng_zone_release(), design.md 9.6). */
	Z_QUARANTINE,
};

struct member {
	struct za_dev *dev;
	uint8_t state; /* enum za_member_state */
	uint32_t nr_zones;
	uint8_t *zkind;
	/*
	 * Zone capacity: one figure for the whole member (cap_bytes), unless
	 * its zones differ, when zcap_blk holds each in 4 KiB blocks
	 * (eng_zcap()). Per zone the engine keeps only zkind: a byte, for
	 * 16 M zones at 256 drives (S2 in bench/results/notes.md).
	 */
	uint64_t cap_bytes;
	uint32_t *zcap_blk;
	/* Recovery only, NULL otherwise: write pointers at its start. */
	uint64_t *zwp;
	uint64_t zone_bytes;
	uint32_t free_zones;
	uint32_t quar_zones; /* in quarantine (Z_QUARANTINE) */
	/* Zones that are free, in quarantine or in use (not reserved, bad or unclaimed)
	 * and the smallest capacity among them: what za_engine_space()
	 * sums. Counted by eng_member_zstats() after init and recovery and when
	 * a zone turns bad, never per call: space is asked for on every
	 * write and every rebuild column, and a scan of every zone of
	 * every member (20 M on 256 drives of 80 k zones) was a third of
	 * the CPU time of a 256-drive rebuild. */
	uint32_t data_zones;
	uint64_t min_cap_bytes;
	uint32_t hint; /* next zone to look at */
	unsigned active; /* engine zones open on it */
	unsigned rb_writes; /* column rebuilds writing to it */
	unsigned rb_reads; /* rebuild column reads in flight on it */
	/* Rebuild slot reads this member is expected to serve in the
	 * current pass and not given yet (za_engine_rebuild_plan()), and
	 * the slots of rebuild reads and writes given to it in the pass:
	 * rb_pick() evens out the sum (see rb_load()). */
	uint64_t rb_plan;
	uint64_t rb_pass_slots;
	uint64_t rb_wslots; /* rebuild slot writes assigned, not done */
	unsigned limit; /* max engine zones open at once */
	unsigned taking; /* bit per stream: in that stream's taking group */
	struct za_member_stats st;
};

struct group;
struct stream;

struct za_segment {
	struct za_engine *eng;
	struct stream *st;
	struct group *grp;
	uint64_t id;
	enum za_seg_state state;
	bool taking;
	uint32_t nr_stripes;
	uint32_t next_stripe;
	unsigned inflight;
	/*
	 * Per column, in one allocation with the segment, as long as its
	 * width (eng_seg_alloc()): at 256 drives of 75,000 zones there are
	 * 1.6 M segments, and arrays of the largest width (64) made each
	 * 1,128 B - 1.8 GB where a 12-wide segment needs a fifth of it.
	 */
	/* Where each column is now: a rebuild may have moved one. */
	uint16_t *member;
	uint32_t *zone;
	/* Where the stripe headers say the columns are (as first placed). */
	uint16_t *hdr_member;
	uint32_t *hdr_zone;
	/* Stripes of a column readable where it is now: all for a column
	 * never moved; those a rebuild wrote for a moved one. */
	uint32_t *col_upto;
	uint64_t rb_cols; /* columns a rebuild is writing now */
	uint64_t dead_cols; /* lost columns left as they are: no live data */
	unsigned grp_idx; /* place in its group */
	/* e->tab_epoch when it was opened: a table taken since names it. */
	uint32_t born_epoch;
	struct za_segment *hnext;
	/* FINISH of the columns once sealed and idle */
	struct za_dev_req *fin;
	unsigned fin_pending;
	bool finished;
	bool rec_readable; /* recovery: a stripe of it has k columns */
	bool rec_home; /* recovery: a header found where it was first put */
	bool rec_table; /* recovery: taken from the engine table */
};

struct group {
	uint64_t id;
	struct stream *st;
	unsigned w;
	uint32_t nr_stripes; /* per segment */
	uint64_t next_pos;
	bool taking;
	struct za_segment **segs;
	struct group *hnext;
	unsigned readers; /* reads in flight, column rebuilds running */
	unsigned rebuilding; /* column rebuilds running */
	/* release (garbage collection) */
	bool releasing;
	unsigned rel_pending;
	int rel_result;
	struct za_dev_req *rel_reqs;
	unsigned rel_nreqs;
	struct za_io_defer rel_defer;
	struct za_engine *eng;
	void (*rel_done)(void *priv, int result);
	void *rel_priv;
};

struct stream {
	unsigned id;
	struct za_stripe_layout l;
	struct za_ec *ec;
	struct za_ec *prep_ec; /* data stream: the worker's (per thread) */
	unsigned max_segs; /* 0: as many as fit */
	unsigned parts; /* requests per column write */
	bool rescan; /* recovery reads its zones always: no quarantine */
	struct group *cur; /* taking group, or NULL */
	struct za_stripe_w *pend_head, *pend_tail;
	struct za_stripe_w *pool;
};

/* A zone in quarantine: reset after table snapshot @epoch - 1 was taken. */
struct quar_zone {
	uint32_t zone;
	uint16_t member;
	uint32_t epoch;
};

/* A list of them, grown by doubling (eng_quar_push()). */
struct quar_list {
	struct quar_zone *v;
	size_t nr, cap;
};

/* Buckets of a new segment or group table (they double as they fill). */
#define HASH_MIN 256u

struct za_engine {
	struct za_io *io;
	struct za_uuid uuid;
	struct za_progress *progress; /* recovery's, or NULL */
	bool keep_wps; /* members keep their zones' write pointers (zwp) */
	unsigned nr_members;
	struct member *m;
	uint64_t seq;
	uint64_t next_seg_id;
	uint64_t next_group_id;
	unsigned inflight_per_seg;
	uint32_t io_max; /* largest READ/WRITE every member takes */
	unsigned rot; /* placement tie-break rotation */
	/* pairs[a * ZA_SB_MAX_MEMBERS + b]: segments members a and b share
	 * (placement's declustering; see group_place()). */
	uint32_t *pairs;
	struct stream streams[ZA_ENGINE_MAX_STREAMS];
	unsigned nr_streams;
	/* Segments and groups by id: chained, with as many buckets (a power
	 * of two) as entries or more (eng_seg_insert(), eng_group_insert()).
	 * Walks go over hash_size / ghash_size buckets, and none may insert:
	 * a table that grows moves its entries. */
	struct za_segment **hash;
	struct group **ghash;
	uint32_t hash_size, ghash_size;
	size_t nr_segs, nr_groups;
	bool pumping;
	unsigned inflight; /* stripes being written */
	unsigned fin_pending; /* FINISH requests in flight */
	unsigned reads; /* reads in flight */
	unsigned rel_pending; /* group releases not finished */
	unsigned rebuilds; /* column rebuilds running */
	unsigned max_read_errors; /* fail a member past this; 0: never */
	/* Prepares data stripes off the loop (stripe_work_run()); NULL:
	 * inline. FIFO, so a segment's stripes reach its zones in order. */
	struct za_worker *prep;
	struct za_engine_stats st;
	/*
	 * Zone quarantine (design.md 9.6): tab_epoch counts the engine
	 * tables taken (za_engine_table_encode()), 1 for one loaded at
	 * recovery; quar lists the zones waiting for a table taken after
	 * their release to be live, in release order (epochs rising).
	 */
	uint32_t tab_epoch;
	struct quar_list quar;
	/* Recovery: the loaded table's places its segments no longer hold
	 * (za_engine_table_check()), quarantined once recovery ends. */
	struct quar_list rec_quar;
	/*
	 * Recovery from the table (design.md 9.6 item 4): the owner's plan
	 * callback (za_engine_recover_plan()), the scan state it may add to
	 * (za_engine_recover_scan()), and, once a table is adopted
	 * (za_engine_table_adopt()), the segment ids it had handed out and
	 * its segments still open then (scanned from their next stripe).
	 */
	int (*rec_plan)(void *priv);
	struct rec_ctx *rec;
	bool rec_tab;
	bool rec_lazy; /* a header claims only the zone it is read from */
	uint64_t rec_tab_next_seg;
	struct za_segment **rec_open;
	size_t rec_nr_open;
	void (*member_failed)(struct za_engine *e, unsigned idx, int err,
			      void *priv);
	void *priv;
};

/* The "no member" entry of absent columns is e->m[ZA_STRIPE_MEMBER_ABSENT]:
 * e->m always has room for every member index and that one. */
_Static_assert(ZA_STRIPE_MEMBER_ABSENT == ZA_SB_MAX_MEMBERS,
	       "absent columns index the entry past the largest member");
#define M_SLOTS (ZA_SB_MAX_MEMBERS + 1u)

/* What the synchronous wrappers (za_engine_*_sync()) wait for. */
struct sync_ctx {
	bool done;
	int result;
};

static inline bool eng_col_absent(const struct za_segment *g, unsigned c)
{
	return g->member[c] == ZA_STRIPE_MEMBER_ABSENT;
}

static inline uint64_t eng_zcap(const struct member *m, uint32_t z)
{
	return m->zcap_blk ? (uint64_t)m->zcap_blk[z] << 12 : m->cap_bytes;
}

static inline bool eng_writable(const struct member *m)
{
	return m->dev && m->state == ZA_MEMBER_ONLINE;
}

static inline bool eng_readable(const struct member *m)
{
	return m->dev &&
	       (m->state == ZA_MEMBER_ONLINE || m->state == ZA_MEMBER_DRAINING);
}

/*
 * May its zones be reset? A draining member is still in service: a zone it
 * holds for a segment that is gone (released, or a column moved off it)
 * must be reset like anyone's, or recovery after a restart finds the stale
 * headers, brings the segment back with its other zones, long since reset
 * and used again by other segments, and releasing it a second time resets
 * those (NEWS: seed 9015). Recovery resets the zones
 * nobody claims on the same members, for the same reason
 * (test_drain_unclaimed_reset).
 */
static inline bool eng_resettable(const struct member *m)
{
	return eng_readable(m);
}

/* engine.c */
struct za_segment *eng_seg_find(const struct za_engine *e, uint64_t id);
struct group *eng_group_find(const struct za_engine *e, uint64_t id);
struct za_segment *eng_seg_alloc(unsigned width);
/* m->zwp from a zone report of @nr zones (recovery's write pointers). */
int eng_member_wps(struct member *m, const struct za_zone *z, unsigned nr);
void eng_member_wps_free(struct member *m);
void eng_seg_insert(struct za_engine *e, struct za_segment *g);
void eng_seg_unlink(struct za_engine *e, struct za_segment *g);
void eng_group_insert(struct za_engine *e, struct group *grp);
void eng_group_unlink(struct za_engine *e, struct group *grp);
void eng_member_zstats(struct member *m);
void eng_member_fail(struct za_engine *e, unsigned idx, int err, bool notify);
/* Who sent a failed device request: what eng_req_failed() logs and does. */
enum eng_req_kind {
	ENG_REQ_WRITE, /* a stripe's column */
	ENG_REQ_REBUILD_WRITE, /* a rebuilt column's slot */
	ENG_REQ_READ, /* a read's or a rebuild's column */
	ENG_REQ_SCRUB_READ, /* a stripe check's column */
};
void eng_req_failed(struct za_engine *e, unsigned midx, uint32_t zone,
		    const struct za_dev_req *req, bool first,
		    enum eng_req_kind kind);

/* engine-place.c */
void eng_zone_give_back(struct member *m, uint32_t z);
void eng_zone_release(struct za_engine *e, const struct za_segment *g,
		      unsigned mi, uint32_t z);
bool eng_quar_add(struct za_engine *e, unsigned mi, uint32_t z, uint32_t epoch);
bool eng_quar_push(struct quar_list *l, struct quar_zone q);
void eng_quar_clear(struct quar_list *l);
bool eng_better(const struct za_engine *e, unsigned a, unsigned b);
bool eng_group_degraded(const struct group *grp);
void eng_pairs_add(struct za_engine *e, const struct za_segment *g, int d);
struct group *eng_group_open(struct za_engine *e, struct stream *st);
void eng_seg_maybe_finish(struct za_engine *e, struct za_segment *g);
void eng_group_stop(struct za_engine *e, struct group *grp);

/* engine-write.c */
void eng_slot_reqs(const struct za_engine *e, struct za_dev_req *reqs,
		   unsigned parts, enum za_dev_op op, uint64_t off_bytes,
		   uint64_t len, uint8_t *buf,
		   void (*done)(struct za_dev_req *req), void *priv);
void eng_pump(struct za_engine *e);

/* engine-read.c */
int eng_hdr_place_check(const struct za_segment *g,
			const struct za_stripe_hdr *h);
/*
 * Decode the header block of column @c of stripe @stripe_idx of @g into
 * *@h and check it is that column's (array, segment, stripe, column,
 * geometry, group, place): 0; -ENODATA for a hole a rebuild wrote where
 * the stripe was dead; -EBADMSG for anything else. Not its payload's
 * CRCs (scrub checks them, the LBA-table read needs none).
 */
int eng_hdr_col_check(const struct za_engine *e, const struct za_segment *g,
		      uint32_t stripe_idx, unsigned c, const uint8_t *blk,
		      struct za_stripe_hdr *h);
void eng_read_errors_check(struct za_engine *e, unsigned idx);

/* engine-space.c */
uint64_t eng_segs_from(const uint64_t *cnt, unsigned n, unsigned width);
unsigned eng_seg_width(const struct za_stripe_layout *l, unsigned n);
void eng_group_unlink_free(struct za_engine *e, struct group *grp);
/* Recovery (engine-recover.c): a group found or made, a sealed segment
 * made in it and, once its columns are set, inserted. */
struct group *eng_rec_group_get(struct za_engine *e, uint64_t id,
				struct stream *st, unsigned w,
				uint32_t nr_stripes);
struct za_segment *eng_rec_seg_new(struct za_engine *e, struct group *grp,
				   unsigned idx, uint64_t id);
void eng_rec_seg_insert(struct za_engine *e, struct za_segment *g);
void eng_group_release_start(struct za_engine *e, struct group *grp);
bool eng_col_lost(const struct za_engine *e, const struct za_segment *g,
		  unsigned c);
unsigned eng_seg_lost_scan(const struct za_engine *e, bool *beyond);

#endif /* ZA_ENGINE_INT_H */
