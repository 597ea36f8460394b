/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * map.h - the volume's block map: logical block ranges to locations, as
 * extents.
 *
 * A location is (kind, group, position): block i of an extent lives at
 * position pos + i of the group (engine.h: a group's data positions are
 * contiguous for sequential writes), or in an in-memory stripe buffer
 * before its stripe is durable. Memory grows with the number of extents,
 * never with capacity: adjacent extents that continue each other are
 * merged as they are made.
 *
 * The map does not know what a group is; it stores and splits ranges.
 * Overwritten and cleared ranges are reported through a callback so the
 * owner can keep per-group live counters (garbage collection).
 * Single-threaded (the loop thread).
 */
#ifndef ZA_MAP_H
#define ZA_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum za_map_kind {
	ZA_MAP_BUFFER = 1, /* in memory: group = buffer id */
	ZA_MAP_DATA = 2, /* a data-stream group */
	ZA_MAP_JOURNAL = 3, /* a journal-stream group */
};

struct za_map_loc {
	uint64_t group; /* group id, or buffer id for ZA_MAP_BUFFER */
	uint64_t pos; /* block position of the extent's first block */
	uint8_t kind; /* enum za_map_kind */
};

struct za_map;

/* Called for each piece of an old mapping that a set or clear removes. */
typedef void (*za_map_dead_fn)(void *priv, const struct za_map_loc *old,
			       uint64_t nr_blocks);

int za_map_new(struct za_map **out);
void za_map_free(struct za_map *m);

/*
 * Map [lba, lba + n) to @loc (block i at loc->pos + i). Returns 0 or
 * -ENOMEM (then the map is unchanged).
 */
int za_map_set(struct za_map *m, uint64_t lba, uint64_t n,
	       const struct za_map_loc *loc, za_map_dead_fn dead, void *priv);
/* Unmap [lba, lba + n). Returns 0 or -ENOMEM. */
int za_map_clear(struct za_map *m, uint64_t lba, uint64_t n,
		 za_map_dead_fn dead, void *priv);
/*
 * Where [lba, lba + n) still maps to @from (block-exact), map it to @to
 * instead (a buffered stripe became durable). Blocks mapped elsewhere
 * meanwhile (overwritten) are left alone. Returns the number of blocks
 * moved, or -ENOMEM.
 */
int64_t za_map_move(struct za_map *m, uint64_t lba, uint64_t n,
		    const struct za_map_loc *from, const struct za_map_loc *to);

/*
 * Visit [lba, lba + n) in order: @fn gets each mapped piece with its
 * location and each hole with loc == NULL. A non-zero return stops the
 * walk and is returned.
 */
int za_map_walk(const struct za_map *m, uint64_t lba, uint64_t n,
		int (*fn)(void *priv, uint64_t lba, uint64_t n,
			  const struct za_map_loc *loc),
		void *priv);

size_t za_map_extents(const struct za_map *m);

/*
 * ---- Pages (docs/design.md 9.7) ----
 *
 * The map is kept in pages for its checkpoints: each leaf of up to 64
 * extents is a page, and the leaves are grouped in LBA order under
 * directory nodes of up to ZA_MAP_DIR_CAP leaves, each a page too; the
 * checkpoint holds one record per directory node (the root). A page
 * whose content changed since the last snapshot is dirty (a directory
 * node is dirty when one of its leaves is, or its leaves changed), and
 * only dirty pages are handed out by a snapshot, bottom-up: a
 * checkpoint's device bytes follow what changed, not the map's size.
 *
 * Each page written has a struct za_map_page: the map makes one per
 * dirty page at a snapshot and keeps it with the node; the owner says
 * where its block landed (group, pos) and whether it counts it live
 * (counted). The map never reads those fields. A page stops being part
 * of the tree when its node is written again or freed; it is then
 * *superseded*, and handed back by the next snapshot's za_map_snap_end()
 * once that snapshot is live (or returned to the map if it failed).
 */
#define ZA_MAP_DIR_CAP 100u
#define ZA_MAP_LEAF_CAP 64u

struct za_map_ext {
	uint64_t lba, len;
	struct za_map_loc loc;
};

struct za_map_page {
	uint64_t group, pos; /* the owner's: where its block is */
	bool counted; /* the owner's: counted live in group */
	/* private */
	bool pending; /* handed out by a snapshot not ended yet */
	bool dir; /* node is a directory node (else a leaf) */
	void *node; /* the node whose page this is; NULL once superseded */
	struct za_map_page *next; /* a superseded list */
};

/* A child in a directory page or in the root: its LBA range and page. */
struct za_map_child {
	uint64_t lo, hi;
	struct za_map_page *pg;
};

/*
 * What a snapshot hands out, in LBA order: for each directory node, its
 * dirty leaves, then the node itself if dirty, then its root record.
 * Called on the caller's thread, inside za_map_snapshot(); the arrays
 * are only valid during the call.
 */
struct za_map_snap_ops {
	void (*leaf)(void *priv, struct za_map_page *pg, uint64_t lo,
		     uint64_t hi, const struct za_map_ext *e, uint32_t n);
	void (*dir)(void *priv, struct za_map_page *pg, uint64_t lo,
		    uint64_t hi, const struct za_map_child *c, uint32_t n);
	void (*root)(void *priv, const struct za_map_child *c);
};

struct za_map_snap {
	struct za_map_page *superseded; /* out of the tree once this is live */
	struct za_map_page **fresh; /* the pages it made */
	uint32_t nr_fresh;
};

struct za_map_dirty {
	uint32_t leaves, dirs; /* dirty pages of each kind */
	uint32_t nodes; /* directory nodes: the root's records */
	uint32_t leaves_all; /* leaves known: in memory or stubs */
};

void za_map_dirty_count(const struct za_map *m, struct za_map_dirty *d);
/*
 * Hand out every dirty page through @ops (above), each with a new struct
 * za_map_page, and mark them clean. 0; -EBUSY when a block still lives
 * in a buffer (no place on the drives yet) or -ENOMEM: then nothing
 * changed. @s is the caller's until za_map_snap_end().
 */
int za_map_snapshot(struct za_map *m, const struct za_map_snap_ops *ops,
		    void *priv, struct za_map_snap *s);
/*
 * A snapshot for a checkpoint that holds the map whole instead (every
 * extent in its own parts): no page is handed out, every page of the tree
 * is superseded by it, and every node is dirty (written as a page again by
 * the next snapshot that hands pages out). Cannot fail. Only with every
 * node in memory (za_map_whole()).
 */
void za_map_snapshot_whole(struct za_map *m, struct za_map_snap *s);
/*
 * The snapshot @s is live (@live: its pages and root durable and in
 * use): every page it superseded goes to @drop, then is freed. Or it
 * failed: the nodes whose pages it made are dirty again, and what it
 * superseded is superseded by the next one instead.
 */
void za_map_snap_end(struct za_map *m, struct za_map_snap *s, bool live,
		     void (*drop)(void *priv, struct za_map_page *pg),
		     void *priv);
/* Make dirty every node whose page @pick chooses (to rewrite pages out
 * of a place being emptied). Returns how many. */
uint32_t za_map_redirty(struct za_map *m,
			bool (*pick)(void *priv, const struct za_map_page *pg),
			void *priv);
/*
 * Loading a map saved in pages, into an empty map, in LBA order: each
 * directory node, then its leaves. Nodes loaded are clean, with the page
 * at (@group, @pos) (*@pg, for the owner's counted). 0, -EBADMSG (a leaf
 * empty, too big, not after the previous one, or before any directory
 * node; a directory node with more than ZA_MAP_DIR_CAP leaves or none)
 * or -ENOMEM. za_map_load_end() checks the last node.
 */
int za_map_load_dir(struct za_map *m, uint64_t group, uint64_t pos,
		    struct za_map_page **pg);
int za_map_load_leaf(struct za_map *m, uint64_t group, uint64_t pos,
		     const struct za_map_ext *e, uint32_t n,
		     struct za_map_page **pg);
int za_map_load_end(struct za_map *m);
/*
 * Loading the root only (the map cache, design.md 9.8): the directory
 * node whose page at (@group, @pos) maps [@lo, @hi) stays on the drives,
 * one stub standing for it, as if it had left memory; za_map_need()
 * names its page when an operation needs it. Same rules as
 * za_map_load_dir() (in LBA order, a leaf may not follow it). 0,
 * -EBADMSG or -ENOMEM. za_map_load_extents() then says how many
 * extents the whole map holds (the checkpoint's count): za_map_extents()
 * counts those out of memory too.
 */
int za_map_load_dir_out(struct za_map *m, uint64_t lo, uint64_t hi,
			uint64_t group, uint64_t pos, struct za_map_page **pg);
void za_map_load_extents(struct za_map *m, uint64_t nr_extents);
/* At most what a whole map of @nr_extents extents holds in memory. */
size_t za_map_bytes_whole(uint64_t nr_extents);
/* Bytes of memory the map holds (nodes and the map itself). */
size_t za_map_bytes(const struct za_map *m);
/* Of them, what cannot leave memory now: the dirty nodes (until a
 * snapshot writes them) and those whose pages a snapshot handed out and
 * has not ended (counted as leaves, a bound). */
size_t za_map_dirty_bytes(const struct za_map *m);

/*
 * ---- The cache (docs/design.md 9.8) ----
 *
 * A clean leaf whose page is durable (written by a snapshot that ended
 * live, or loaded) may leave memory: a small stub keeps its place in the
 * list of leaves and the index (its LBA range and its page); and a clean
 * directory node all of whose leaves are stubs may leave too, one stub
 * standing for it (its range; the root still names its page). Nothing
 * else changes: a snapshot names what is out where it is.
 *
 * Every operation but za_map_snapshot() needs the leaves it touches in
 * memory: before za_map_walk(lba, n) those that [lba, lba + n) meets,
 * before za_map_set/clear/move(lba, n) those that [lba, lba + n] meets
 * (its seams), and the first leaf when lba is before it. The owner asks
 * za_map_need() until it says none is missing, reading each page it
 * names from the drives and handing its content to za_map_fill_dir() or
 * za_map_fill_leaf(), then runs the operation at once (nothing leaves
 * memory but through za_map_shrink()). The map asserts it; a leaf out of
 * memory is never taken for a hole. A move needs only [lba, lba + n):
 * the leaf after may be out (its cut there is a boundary already).
 */

/* Every node is in memory (as without the cache). */
bool za_map_whole(const struct za_map *m);
/*
 * The page to read before an operation on [lba, lba + n) (@seams: a set,
 * clear or move, [lba, lba + n]) can run: a directory node's page when
 * that node is out (its leaves are not known yet), else a leaf's; NULL
 * when all it needs is in memory. The page stays valid until it is
 * filled: the owner reads it once however many ask (fills after the
 * first say -EALREADY, and the page may be freed by then).
 */
struct za_map_page *za_map_need(struct za_map *m, uint64_t lba, uint64_t n,
				bool seams);
/* A child of a directory page as the drives hold it. */
struct za_map_ref {
	uint64_t lo, hi, group, pos;
};
/*
 * Fill the directory node of @pg, out of memory, with its @n children as
 * read from its page (untrusted): each becomes a stub of a leaf, its page
 * at (group, pos) with @counted for the owner. 0; -EALREADY (in memory
 * already), -ESTALE (@pg is not a directory page of the tree), -EBADMSG
 * (not 1..ZA_MAP_DIR_CAP children in order, or not spanning what the
 * node spans), -ENOMEM: then nothing changed.
 */
int za_map_fill_dir(struct za_map *m, struct za_map_page *pg,
		    const struct za_map_ref *c, uint32_t n, bool counted);
/* Fill the leaf of @pg with its extents as read (untrusted). 0,
 * -EALREADY, -ESTALE, -EBADMSG (as za_map_load_leaf() refuses, or not
 * spanning the leaf's range), -ENOMEM: then nothing changed. */
int za_map_fill_leaf(struct za_map *m, struct za_map_page *pg,
		     const struct za_map_ext *e, uint32_t n);
/*
 * While the owner reads the page @pg (@on), and until it is done with it
 * (filled or given up: !@on), its directory node does not leave memory
 * (which would free the page handles of its leaves' stubs, @pg among
 * them): the cache may shrink meanwhile.
 */
void za_map_pin(struct za_map *m, struct za_map_page *pg, bool on);
/*
 * Let clean leaves and directory nodes whose pages are durable leave
 * memory until za_map_bytes() is at most @target_bytes or nothing more
 * may leave (dirty nodes stay until a snapshot writes them). A clock:
 * what za_map_need() or a fill touched since the sweep last passed is
 * passed over once. Leaves used (za_map_need(), a fill) in turn
 * @keep_from or later stay whatever the clock says (UINT64_MAX: none).
 * Each call is a new turn (za_map_turn()). Returns za_map_bytes().
 *
 * Why @keep_from: an operation that waits for pages one after another
 * asks za_map_need() again after each, which marks those it has; but
 * while it waits, other operations' pages arrive and each arrival
 * sweeps. Two operations each needing two leaves took turns evicting
 * each other's (the fault loop's seed 7010: 39 M page reads, no answer).
 * The owner passes the turn its oldest waiting operation began in: that
 * one keeps every page it has, so it runs after at most as many reads
 * as it needs pages, then the next oldest. What stays meanwhile is
 * bounded by what the operations in flight need.
 */
size_t za_map_shrink(struct za_map *m, size_t target_bytes, uint64_t keep_from);
/*
 * The same, with one turn of the hand at most: what was used since it
 * last passed stays this time. The owner's steady trim (za_map_shrink()
 * could take on its second turn what an operation asked for a moment
 * ago).
 */
size_t za_map_sweep(struct za_map *m, size_t target_bytes, uint64_t keep_from);
/* The sweep's current turn: a count of za_map_shrink/sweep() calls. */
uint64_t za_map_turn(const struct za_map *m);

#endif /* ZA_MAP_H */
