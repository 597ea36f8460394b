// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * map.c - the block map as sorted arrays of extents (leaves) under a
 * sorted index.
 *
 * Extents are disjoint and kept in LBA order in leaves of up to LEAF_CAP
 * entries; the leaves form a list in LBA order, and one contiguous array
 * holds (first LBA, leaf) for every leaf, sorted. A lookup is a binary
 * search of that array, then of one leaf. Why not a tree node per extent
 * (the first version, a treap): after random 4 KiB writes the map holds
 * hundreds of thousands of extents, and each operation descended some 40
 * nodes scattered over the heap, each a cache and TLB miss; that was a
 * third of the daemon's time in P1's random writes. A treap of leaves
 * still missed once per level. Here a lookup touches a few pages of the
 * index (16 bytes per leaf) and one leaf. The price: adding or removing a
 * leaf moves the index entries after it, O(extents / LEAF_CAP) bytes x 16,
 * once per LEAF_CAP / 2 insertions at most (bench/results/notes.md, P1). The
 * leaf the last lookup found (the finger) is tried before the index, since
 * one operation looks up the same place several times.
 *
 * A range operation makes both ends extent boundaries (cuts), removes or
 * rewrites the extents between them, and coalesces extents that continue
 * each other (same kind and group, consecutive positions) within the
 * range and across its two seams, so a sequential fill leaves one extent
 * per group. A full leaf is split in halves, except when the insertion is
 * at its end (a sequential fill): then the new extent starts a new leaf,
 * so leaves filled in order stay full. An emptied leaf is freed. The
 * shapes random 4 KiB writes make - a range that is exactly one extent
 * (set, move) or lies in a hole (set) - are done in place after a single
 * lookup, without the cuts.
 *
 * Leaves and the index are the only allocations. Each mutating call first
 * makes sure that enough spare leaves and index room are at hand for
 * every split it may need, so an -ENOMEM leaves the mapping as it was.
 */
#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "map.h"

#define LEAF_CAP 64u
/* Splits one call may need: two cuts and one insertion. */
#define SPARES 3u

struct ext {
	uint64_t lba, len;
	struct za_map_loc loc;
};

struct leaf {
	uint64_t key; /* e[0].lba: its key in the index */
	uint32_t nr;
	struct leaf *prev, *next; /* LBA order */
	struct ext e[LEAF_CAP];
};

/* The index: one entry per leaf, sorted by key. */
struct ient {
	uint64_t key;
	struct leaf *lf;
};

struct za_map {
	struct ient *idx;
	size_t cap_idx;
	struct leaf *head;
	struct leaf *spare[SPARES];
	unsigned nr_spare;
	size_t nr; /* extents */
	size_t nr_leaves; /* = index entries */
	struct leaf *finger; /* the leaf the last lookup found, or NULL */
};

/* A place in the extent sequence: e[i] of @lf; i == lf->nr only at the
 * very end (lf is the last leaf). lf == NULL: the map is empty. */
struct pos {
	struct leaf *lf;
	uint32_t i;
};

int za_map_new(struct za_map **out)
{
	struct za_map *m = calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	*out = m;
	return 0;
}

static void drop_spares(struct za_map *m)
{
	while (m->nr_spare)
		free(m->spare[--m->nr_spare]);
}

void za_map_free(struct za_map *m)
{
	struct leaf *lf, *next;

	if (!m)
		return;
	for (lf = m->head; lf; lf = next) {
		next = lf->next;
		free(lf);
	}
	drop_spares(m);
	free(m->idx);
	free(m);
}

/* Have SPARES leaves at hand, and index room for them. 0 or -ENOMEM
 * (nothing changed). */
static int reserve(struct za_map *m)
{
	if (m->nr_leaves + SPARES > m->cap_idx) {
		size_t cap = m->cap_idx ? 2 * m->cap_idx : 16;
		struct ient *ix = realloc(m->idx, cap * sizeof(*ix));

		if (!ix)
			return -ENOMEM;
		m->idx = ix;
		m->cap_idx = cap;
	}
	while (m->nr_spare < SPARES) {
		struct leaf *lf = malloc(sizeof(*lf));

		if (!lf)
			return -ENOMEM;
		m->spare[m->nr_spare++] = lf;
	}
	return 0;
}

/* An empty map keeps no memory. */
static void settle(struct za_map *m)
{
	if (m->nr)
		return;
	drop_spares(m);
	free(m->idx);
	m->idx = NULL;
	m->cap_idx = 0;
}

/* ---- the index of leaves ---- */

/* The first index entry whose key is above @key. */
static size_t idx_upper(const struct za_map *m, uint64_t key)
{
	size_t lo = 0, hi = m->nr_leaves;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (m->idx[mid].key <= key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The entry of @lf (found by its key: keys are distinct). */
static size_t idx_of(const struct za_map *m, const struct leaf *lf)
{
	size_t i = idx_upper(m, lf->key);

	assert(i > 0 && m->idx[i - 1].lf == lf);
	return i - 1;
}

/* @lf is linked, with its key set: enter it (room was reserved). */
static void tree_insert(struct za_map *m, struct leaf *lf)
{
	size_t i = idx_upper(m, lf->key);

	assert(m->nr_leaves < m->cap_idx);
	memmove(&m->idx[i + 1], &m->idx[i],
		(m->nr_leaves - i) * sizeof(m->idx[0]));
	m->idx[i].key = lf->key;
	m->idx[i].lf = lf;
	m->nr_leaves++;
}

static void tree_remove(struct za_map *m, struct leaf *lf)
{
	size_t i = idx_of(m, lf);

	memmove(&m->idx[i], &m->idx[i + 1],
		(m->nr_leaves - i - 1) * sizeof(m->idx[0]));
	m->nr_leaves--;
}

/* The first LBA of @lf changed: its key follows (the order holds, since
 * extents never cross into a neighbouring leaf's range). */
static void set_key(struct za_map *m, struct leaf *lf, uint64_t key)
{
	size_t i = idx_of(m, lf);

	m->idx[i].key = key;
	lf->key = key;
}

/* The leaf with the greatest key <= @lba, or NULL. */
static struct leaf *tree_find(const struct za_map *m, uint64_t lba)
{
	size_t i = idx_upper(m, lba);

	return i ? m->idx[i - 1].lf : NULL;
}

/*
 * tree_find() through the finger: one operation looks up the same place
 * several times (cuts, removal, insertion, coalescing), and the leaf the
 * last lookup found answers if @lba is within its key range, without a
 * search of the index.
 */
static struct leaf *leaf_find(struct za_map *m, uint64_t lba)
{
	struct leaf *lf = m->finger;

	if (lf && lf->key <= lba && (!lf->next || lf->next->key > lba))
		return lf;
	lf = tree_find(m, lba);
	m->finger = lf;
	/*
	 * A leaf found through the index is usually not in the cache
	 * (random writes touch leaves all over the map), and each step of
	 * the binary search that follows loads what the step before chose,
	 * so its misses would come one after another: ask for the whole
	 * leaf (2.5 KiB) at once and let them overlap. The finger's leaf was
	 * just searched, so it needs none.
	 */
	for (size_t off = 0; lf && off < sizeof(*lf); off += 64)
		__builtin_prefetch((const char *)lf + off);
	return lf;
}

/* ---- positions ---- */

/* In @lf (tree_find(@lba)): the first extent that ends after @lba (holds
 * it, or follows it). */
static struct pos lookup_in(const struct za_map *m, struct leaf *lf,
			    uint64_t lba)
{
	struct pos p = { lf, 0 };
	uint32_t lo, hi;

	if (!p.lf)
		return (struct pos){ m->head, 0 };
	lo = 0;
	hi = p.lf->nr;
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		const struct ext *e = &p.lf->e[mid];

		if (e->lba + e->len > lba)
			hi = mid;
		else
			lo = mid + 1;
	}
	p.i = lo;
	if (p.i == p.lf->nr && p.lf->next)
		p = (struct pos){ p.lf->next, 0 };
	return p;
}

static struct pos lookup(struct za_map *m, uint64_t lba)
{
	return lookup_in(m, leaf_find(m, lba), lba);
}

static bool at_end(struct pos p)
{
	return !p.lf || p.i == p.lf->nr;
}

static struct ext *at(struct pos p)
{
	return &p.lf->e[p.i];
}

static struct pos next_pos(struct pos p)
{
	if (++p.i == p.lf->nr && p.lf->next)
		p = (struct pos){ p.lf->next, 0 };
	return p;
}

/* The extent before @p, if any. */
static bool prev_pos(const struct za_map *m, struct pos p, struct pos *out)
{
	if (!p.lf)
		return false;
	(void)m;
	if (p.i) {
		*out = (struct pos){ p.lf, p.i - 1 };
		return true;
	}
	if (!p.lf->prev)
		return false;
	*out = (struct pos){ p.lf->prev, p.lf->prev->nr - 1 };
	return true;
}

static struct leaf *leaf_take(struct za_map *m)
{
	struct leaf *lf;

	assert(m->nr_spare > 0);
	lf = m->spare[--m->nr_spare];
	lf->nr = 0;
	lf->prev = lf->next = NULL;
	return lf;
}

/* Link @n into the list after @lf (NULL: as the head). */
static void list_after(struct za_map *m, struct leaf *lf, struct leaf *n)
{
	n->prev = lf;
	n->next = lf ? lf->next : m->head;
	if (n->next)
		n->next->prev = n;
	if (lf)
		lf->next = n;
	else
		m->head = n;
}

static void leaf_free(struct za_map *m, struct leaf *lf)
{
	if (m->finger == lf)
		m->finger = NULL;
	tree_remove(m, lf);
	if (lf->prev)
		lf->prev->next = lf->next;
	else
		m->head = lf->next;
	if (lf->next)
		lf->next->prev = lf->prev;
	if (m->nr_spare < SPARES)
		m->spare[m->nr_spare++] = lf;
	else
		free(lf);
}

/* Insert @x at @p; returns where it is. Never fails (spares reserved). */
static struct pos ins(struct za_map *m, struct pos p, const struct ext *x)
{
	struct leaf *lf = p.lf, *n;
	uint32_t half;

	m->nr++;
	if (!lf) {
		lf = leaf_take(m);
		lf->e[0] = *x;
		lf->nr = 1;
		lf->key = x->lba;
		list_after(m, NULL, lf);
		tree_insert(m, lf);
		return (struct pos){ lf, 0 };
	}
	/* Between two leaves: the end of the previous one may have room. */
	if (p.i == 0 && lf->prev && lf->prev->nr < LEAF_CAP)
		p = (struct pos){ lf->prev, lf->prev->nr };
	lf = p.lf;
	if (lf->nr < LEAF_CAP) {
		memmove(&lf->e[p.i + 1], &lf->e[p.i],
			(lf->nr - p.i) * sizeof(lf->e[0]));
		lf->e[p.i] = *x;
		lf->nr++;
		if (p.i == 0)
			set_key(m, lf, x->lba);
		return p;
	}
	n = leaf_take(m);
	if (p.i == LEAF_CAP) {
		/* Appending: start a new leaf and leave this one full. */
		n->e[0] = *x;
		n->nr = 1;
		n->key = x->lba;
		list_after(m, lf, n);
		tree_insert(m, n);
		return (struct pos){ n, 0 };
	}
	half = LEAF_CAP / 2;
	memcpy(n->e, &lf->e[half], (LEAF_CAP - half) * sizeof(n->e[0]));
	n->nr = LEAF_CAP - half;
	lf->nr = half;
	n->key = n->e[0].lba;
	list_after(m, lf, n);
	tree_insert(m, n);
	if (p.i > half)
		p = (struct pos){ n, p.i - half };
	lf = p.lf;
	memmove(&lf->e[p.i + 1], &lf->e[p.i],
		(lf->nr - p.i) * sizeof(lf->e[0]));
	lf->e[p.i] = *x;
	lf->nr++;
	if (p.i == 0)
		set_key(m, lf, x->lba);
	return p;
}

/* Remove @cnt extents from e[i] of @lf on; frees the leaf if emptied. */
static void del(struct za_map *m, struct leaf *lf, uint32_t i, uint32_t cnt)
{
	if (!cnt)
		return;
	memmove(&lf->e[i], &lf->e[i + cnt],
		(lf->nr - i - cnt) * sizeof(lf->e[0]));
	lf->nr -= cnt;
	m->nr -= cnt;
	if (!lf->nr)
		leaf_free(m, lf);
	else if (i == 0)
		set_key(m, lf, lf->e[0].lba);
}

/* ---- range operations ---- */

/* Make @key an extent boundary. */
static void cut(struct za_map *m, uint64_t key)
{
	struct pos p = lookup(m, key);
	struct ext *e, tail;

	if (at_end(p) || at(p)->lba >= key)
		return;
	e = at(p);
	tail = *e;
	tail.lba = key;
	tail.len = e->lba + e->len - key;
	tail.loc.pos += key - e->lba;
	e->len = key - e->lba;
	p.i++;
	ins(m, p, &tail);
}

static bool continues(const struct ext *a, const struct ext *b)
{
	return a->lba + a->len == b->lba && a->loc.kind == b->loc.kind &&
	       a->loc.group == b->loc.group &&
	       a->loc.pos + a->len == b->loc.pos;
}

/*
 * Remove the extents within [lba, end) (both are boundaries), reporting
 * each to @dead.
 */
static void remove_range(struct za_map *m, uint64_t lba, uint64_t end,
			 za_map_dead_fn dead, void *priv)
{
	struct pos p = lookup(m, lba);

	while (!at_end(p) && at(p)->lba < end) {
		struct leaf *lf = p.lf, *next = lf->next;
		uint32_t j = p.i;
		bool stopped;

		while (j < lf->nr && lf->e[j].lba < end) {
			if (dead)
				dead(priv, &lf->e[j].loc, lf->e[j].len);
			j++;
		}
		stopped = j < lf->nr;
		del(m, lf, p.i, j - p.i); /* may free lf */
		if (stopped || !next)
			break;
		p = (struct pos){ next, 0 };
	}
}

/*
 * Coalesce extents that continue each other from the one before @p up to
 * the first one starting at or after @end.
 */
static void coalesce_at(struct za_map *m, struct pos p, uint64_t end)
{
	struct pos q;

	if (!p.lf)
		return;
	if (prev_pos(m, p, &q))
		p = q;
	while (!at_end(p)) {
		struct ext *a = at(p);
		struct pos n = next_pos(p);

		if (at_end(n) || a->lba >= end)
			break;
		if (continues(a, at(n))) {
			a->len += at(n)->len;
			del(m, n.lf, n.i, 1);
			/* p is still valid: n was after it. */
			continue;
		}
		p = n;
	}
}

/* coalesce_at() from the first extent that ends after @lba. */
static void coalesce(struct za_map *m, uint64_t lba, uint64_t end)
{
	coalesce_at(m, lookup(m, lba), end);
}

int za_map_set(struct za_map *m, uint64_t lba, uint64_t n,
	       const struct za_map_loc *loc, za_map_dead_fn dead, void *priv)
{
	struct ext x = { .lba = lba, .len = n, .loc = *loc };
	struct pos p;

	if (!n)
		return 0;
	/*
	 * Random small writes first overwrite holes, then extents of exactly
	 * their size: both take one lookup here instead of five.
	 */
	p = lookup(m, lba);
	if (!at_end(p) && at(p)->lba == lba && at(p)->len == n) {
		struct ext *e = at(p);

		if (dead)
			dead(priv, &e->loc, n);
		e->loc = *loc;
		coalesce_at(m, p, lba + n);
		return 0;
	}
	if (reserve(m))
		return -ENOMEM;
	if (at_end(p) || at(p)->lba >= lba + n) {
		/* A hole (reserve() moved no leaf: p holds). */
		coalesce_at(m, ins(m, p, &x), lba + n);
		return 0;
	}
	cut(m, lba);
	cut(m, lba + n);
	remove_range(m, lba, lba + n, dead, priv);
	ins(m, lookup(m, lba), &x);
	coalesce(m, lba, lba + n);
	return 0;
}

int za_map_clear(struct za_map *m, uint64_t lba, uint64_t n,
		 za_map_dead_fn dead, void *priv)
{
	if (!n)
		return 0;
	if (reserve(m))
		return -ENOMEM;
	cut(m, lba);
	cut(m, lba + n);
	remove_range(m, lba, lba + n, dead, priv);
	settle(m);
	return 0;
}

int64_t za_map_move(struct za_map *m, uint64_t lba, uint64_t n,
		    const struct za_map_loc *from, const struct za_map_loc *to)
{
	int64_t moved = 0;
	struct pos p;

	if (!n)
		return 0;
	/* A whole extent (one block of a stripe of random writes): in
	 * place, with one lookup. */
	p = lookup(m, lba);
	if (!at_end(p) && at(p)->lba == lba && at(p)->len == n) {
		struct ext *e = at(p);

		if (e->loc.kind != from->kind || e->loc.group != from->group ||
		    e->loc.pos != from->pos)
			return 0;
		e->loc = *to;
		coalesce_at(m, p, lba + n);
		return (int64_t)n;
	}
	if (reserve(m))
		return -ENOMEM;
	cut(m, lba);
	cut(m, lba + n);
	for (p = lookup(m, lba); !at_end(p) && at(p)->lba < lba + n;
	     p = next_pos(p)) {
		struct ext *e = at(p);

		if (e->loc.kind == from->kind && e->loc.group == from->group &&
		    e->loc.pos - from->pos == e->lba - lba) {
			e->loc.kind = to->kind;
			e->loc.group = to->group;
			e->loc.pos = to->pos + (e->lba - lba);
			moved += (int64_t)e->len;
		}
	}
	coalesce(m, lba, lba + n);
	return moved;
}

int za_map_walk(const struct za_map *m, uint64_t lba, uint64_t n,
		int (*fn)(void *priv, uint64_t lba, uint64_t n,
			  const struct za_map_loc *loc),
		void *priv)
{
	uint64_t cur = lba, end = lba + n;
	struct pos p;
	int ret;

	if (!n)
		return 0;
	for (p = lookup_in(m, tree_find(m, lba), lba);
	     !at_end(p) && at(p)->lba < end; p = next_pos(p)) {
		const struct ext *e = at(p);
		uint64_t s = e->lba > cur ? e->lba : cur;
		uint64_t t = e->lba + e->len < end ? e->lba + e->len : end;
		struct za_map_loc loc = e->loc;

		if (s > cur) {
			ret = fn(priv, cur, s - cur, NULL);
			if (ret)
				return ret;
		}
		loc.pos += s - e->lba;
		ret = fn(priv, s, t - s, &loc);
		if (ret)
			return ret;
		cur = t;
	}
	if (cur < end)
		return fn(priv, cur, end - cur, NULL);
	return 0;
}

size_t za_map_extents(const struct za_map *m)
{
	return m->nr;
}

size_t za_map_bytes(const struct za_map *m)
{
	return sizeof(*m) + (m->nr_leaves + m->nr_spare) * sizeof(struct leaf) +
	       m->cap_idx * sizeof(struct ient);
}
