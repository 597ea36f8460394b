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
/* Bytes of memory the map holds (nodes and the map itself). */
size_t za_map_bytes(const struct za_map *m);

#endif /* ZA_MAP_H */
