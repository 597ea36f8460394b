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

/* An extent is a struct za_map_ext (map.h): a leaf's extents are handed
 * out to a snapshot as they are. */
struct dnode;

/*
 * What a place in the list of leaves is (the cache, map.h): a leaf in
 * memory, a stub for a leaf whose page is only on the drives, or one
 * stub standing for a whole directory node only on the drives.
 */
enum leaf_state {
	LEAF_IN = 0,
	LEAF_OUT, /* its extents are in its page pg only */
	LEAF_DIR_OUT, /* stands for dn, whose page dn->pg is on the drives */
};

struct leaf {
	uint64_t key; /* e[0].lba: its key in the index (stubs: their lo) */
	union {
		uint64_t end; /* stubs: where their last extent ends (hi) */
		uint64_t used; /* in memory: the sweep's turn when last used */
	};
	uint32_t nr; /* extents (stubs: not known, 0) */
	uint8_t state; /* enum leaf_state */
	bool dirty; /* changed since its page was last handed out */
	bool ref; /* used since the cache's hand last passed */
	bool pinned; /* its page being read (za_map_pin()) */
	struct leaf *prev, *next; /* LBA order */
	struct dnode *dn; /* its directory node */
	struct za_map_page *pg; /* its page, NULL before the first */
	struct za_map_ext e[]; /* LEAF_CAP in memory; none in a stub */
};

#define LEAF_BYTES (sizeof(struct leaf) + LEAF_CAP * sizeof(struct za_map_ext))
#define STUB_BYTES sizeof(struct leaf)

static bool in(const struct leaf *lf)
{
	return lf->state == LEAF_IN;
}

/*
 * A directory node: a run of up to ZA_MAP_DIR_CAP consecutive leaves
 * (from @first, @nr of them), one page on the drives. Nodes are split in
 * halves when full and freed when empty, never merged: there are never
 * more of them than leaves.
 */
struct dnode {
	struct dnode *prev, *next; /* LBA order */
	struct leaf *first;
	uint32_t nr; /* places in the list of leaves: 1 when out */
	uint32_t nr_out; /* of them, stubs of leaves (LEAF_OUT) */
	uint32_t nr_pinned; /* its leaves' pages being read (za_map_pin()) */
	bool dirty;
	bool out; /* only on the drives: first is its LEAF_DIR_OUT stub */
	struct za_map_page *pg;
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
	/* pages */
	struct dnode *dhead;
	struct dnode *dspare[SPARES];
	unsigned nr_dspare;
	size_t nr_dnodes;
	uint32_t nr_dirty_leaves, nr_dirty_dirs;
	uint32_t nr_pending; /* pages a snapshot handed out, not ended */
	struct za_map_page *superseded; /* by frees since the last snapshot */
	struct dnode *load_dn; /* loading: the directory node being filled */
	struct leaf *load_last; /* loading: the last leaf loaded */
	/* the cache */
	size_t nr_stubs; /* LEAF_OUT places */
	size_t nr_dir_out; /* LEAF_DIR_OUT places (directory nodes out) */
	uint64_t hand; /* where the cache's sweep goes on: an LBA */
	uint64_t turn; /* the sweep's: one more for each (za_map_turn()) */
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
	while (m->nr_dspare)
		free(m->dspare[--m->nr_dspare]);
}

static void pages_free(struct za_map_page *pg)
{
	struct za_map_page *next;

	for (; pg; pg = next) {
		next = pg->next;
		free(pg);
	}
}

void za_map_free(struct za_map *m)
{
	struct leaf *lf, *next;

	if (!m)
		return;
	struct dnode *dn, *dnext;

	for (lf = m->head; lf; lf = next) {
		next = lf->next;
		free(lf->pg);
		free(lf);
	}
	for (dn = m->dhead; dn; dn = dnext) {
		dnext = dn->next;
		free(dn->pg);
		free(dn);
	}
	pages_free(m->superseded);
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
		struct leaf *lf = malloc(LEAF_BYTES);

		if (!lf)
			return -ENOMEM;
		m->spare[m->nr_spare++] = lf;
	}
	/* Each new leaf may split its directory node. */
	while (m->nr_dspare < SPARES) {
		struct dnode *dn = malloc(sizeof(*dn));

		if (!dn)
			return -ENOMEM;
		m->dspare[m->nr_dspare++] = dn;
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
	for (size_t off = 0; lf && off < LEAF_BYTES; off += 64)
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

	if (!p.lf) {
		/* Before the first leaf: za_map_need() asked for the head. */
		assert(!m->head || in(m->head));
		return (struct pos){ m->head, 0 };
	}
	/*
	 * After everything the leaf @lba was in held before @lba is gone,
	 * its key rose past @lba, and the leaf found is the one before: out
	 * of memory, and ending before @lba, its place ends where the next
	 * leaf begins (a set's insertion, test_map_cache).
	 */
	if (!in(p.lf) && lba >= p.lf->end && p.lf->next && in(p.lf->next))
		return (struct pos){ p.lf->next, 0 };
	/* The caller made sure with za_map_need() (map.h). */
	assert(in(p.lf));
	lo = 0;
	hi = p.lf->nr;
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		const struct za_map_ext *e = &p.lf->e[mid];

		if (e->lba + e->len > lba)
			hi = mid;
		else
			lo = mid + 1;
	}
	p.i = lo;
	if (p.i == p.lf->nr && p.lf->next && in(p.lf->next))
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

static struct za_map_ext *at(struct pos p)
{
	return &p.lf->e[p.i];
}

/* The next extent. A leaf not in memory is where the extents known end
 * (at_end()): what an operation touches is in memory (za_map_need()), so
 * only coalescing looks further, and it stops there. */
static struct pos next_pos(struct pos p)
{
	if (++p.i == p.lf->nr && p.lf->next && in(p.lf->next))
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
	if (!p.lf->prev || !in(p.lf->prev))
		return false;
	*out = (struct pos){ p.lf->prev, p.lf->prev->nr - 1 };
	return true;
}

/* ---- pages: what changed since the last snapshot ---- */

/* @pg (if any) is no longer a page of the tree. */
static void supersede(struct za_map_page **list, struct za_map_page *pg)
{
	if (!pg)
		return;
	pg->node = NULL;
	pg->next = *list;
	*list = pg;
}

static void dn_touch(struct za_map *m, struct dnode *dn)
{
	if (!dn->dirty) {
		dn->dirty = true;
		m->nr_dirty_dirs++;
	}
}

/* @lf's content changed: its page and its directory's are to be
 * written again. */
static void touch(struct za_map *m, struct leaf *lf)
{
	if (!lf->dirty) {
		lf->dirty = true;
		m->nr_dirty_leaves++;
	}
	dn_touch(m, lf->dn);
}

static struct dnode *dn_take(struct za_map *m)
{
	struct dnode *dn;

	assert(m->nr_dspare > 0);
	dn = m->dspare[--m->nr_dspare];
	memset(dn, 0, sizeof(*dn));
	m->nr_dnodes++;
	return dn;
}

/* Link @n into the list of directory nodes after @dn (NULL: first). */
static void dn_link(struct za_map *m, struct dnode *dn, struct dnode *n)
{
	n->prev = dn;
	n->next = dn ? dn->next : m->dhead;
	if (n->next)
		n->next->prev = n;
	if (dn)
		dn->next = n;
	else
		m->dhead = n;
}

static void dn_free(struct za_map *m, struct dnode *dn)
{
	if (dn->prev)
		dn->prev->next = dn->next;
	else
		m->dhead = dn->next;
	if (dn->next)
		dn->next->prev = dn->prev;
	if (dn->dirty)
		m->nr_dirty_dirs--;
	supersede(&m->superseded, dn->pg);
	m->nr_dnodes--;
	if (m->nr_dspare < SPARES)
		m->dspare[m->nr_dspare++] = dn;
	else
		free(dn);
}

/* @dn holds more than ZA_MAP_DIR_CAP leaves: its second half moves to a
 * new node after it. */
static void dn_split(struct za_map *m, struct dnode *dn)
{
	struct dnode *n = dn_take(m);
	struct leaf *lf = dn->first;
	uint32_t i;

	dn_link(m, dn, n);
	for (i = 0; i < dn->nr / 2; i++)
		lf = lf->next;
	n->first = lf;
	for (; lf && lf->dn == dn; lf = lf->next) {
		lf->dn = n;
		n->nr++;
		n->nr_out += lf->state == LEAF_OUT;
		n->nr_pinned += lf->pinned;
	}
	dn->nr -= n->nr;
	dn->nr_out -= n->nr_out;
	dn->nr_pinned -= n->nr_pinned;
	dn_touch(m, dn);
	dn_touch(m, n);
}

/* The last leaf (or stub) of @dn: before the next node's first. */
static struct leaf *dn_last(const struct dnode *dn)
{
	struct leaf *lf;
	uint32_t i;

	if (dn->next)
		return dn->next->first->prev;
	for (lf = dn->first, i = 1; i < dn->nr; i++)
		lf = lf->next;
	return lf;
}

/* @n was just linked into the list of leaves: it joins the directory
 * node of the leaf before it (or after it, as the new head). */
static void dn_join(struct za_map *m, struct leaf *n)
{
	struct dnode *dn;

	if (n->prev) {
		dn = n->prev->dn;
	} else if (n->next) {
		dn = n->next->dn;
		dn->first = n;
	} else {
		dn = dn_take(m);
		dn_link(m, NULL, dn);
		dn->first = n;
	}
	n->dn = dn;
	dn->nr++;
	touch(m, n);
	if (dn->nr > ZA_MAP_DIR_CAP)
		dn_split(m, dn);
}

/* @lf is about to leave the list of leaves. */
static void dn_leave(struct za_map *m, struct leaf *lf)
{
	struct dnode *dn = lf->dn;

	if (lf->dirty)
		m->nr_dirty_leaves--;
	supersede(&m->superseded, lf->pg);
	lf->pg = NULL;
	dn->nr--;
	if (dn->first == lf)
		dn->first = lf->next && lf->next->dn == dn ? lf->next : NULL;
	if (!dn->nr)
		dn_free(m, dn);
	else
		dn_touch(m, dn);
}

static struct leaf *leaf_take(struct za_map *m)
{
	struct leaf *lf;

	assert(m->nr_spare > 0);
	lf = m->spare[--m->nr_spare];
	lf->nr = 0;
	lf->used = m->turn;
	lf->state = LEAF_IN;
	lf->ref = true;
	lf->dirty = false;
	lf->pinned = false;
	lf->prev = lf->next = NULL;
	lf->dn = NULL;
	lf->pg = NULL;
	return lf;
}

/* Link @n into the list after @lf (NULL: as the head), and into a
 * directory node. */
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
	dn_join(m, n);
}

static void leaf_free(struct za_map *m, struct leaf *lf)
{
	if (m->finger == lf)
		m->finger = NULL;
	dn_leave(m, lf);
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
static struct pos ins(struct za_map *m, struct pos p,
		      const struct za_map_ext *x)
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
	if (p.i == 0 && lf->prev && in(lf->prev) && lf->prev->nr < LEAF_CAP)
		p = (struct pos){ lf->prev, lf->prev->nr };
	lf = p.lf;
	if (lf->nr < LEAF_CAP) {
		touch(m, lf);
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
	touch(m, lf);
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
	touch(m, lf);
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
	struct leaf *lf = leaf_find(m, key);
	struct za_map_ext *e, tail;
	struct pos p;

	/*
	 * A leaf out of memory that starts at @key: an extent starts
	 * there, a boundary already. The only leaf out of memory a cut may
	 * meet: the end of a move by GC or of a stripe made durable, whose
	 * range was in memory but whose next leaf need not be (map.h).
	 */
	if (lf && !in(lf) && lf->key == key)
		return;
	p = lookup_in(m, lf, key);

	if (at_end(p) || at(p)->lba >= key)
		return;
	e = at(p);
	touch(m, p.lf);
	tail = *e;
	tail.lba = key;
	tail.len = e->lba + e->len - key;
	tail.loc.pos += key - e->lba;
	e->len = key - e->lba;
	p.i++;
	ins(m, p, &tail);
}

static bool continues(const struct za_map_ext *a, const struct za_map_ext *b)
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
		if (!in(next)) {
			assert(next->key >= end); /* za_map_need() */
			break;
		}
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
		struct za_map_ext *a = at(p);
		struct pos n = next_pos(p);

		if (at_end(n) || a->lba >= end)
			break;
		if (continues(a, at(n))) {
			touch(m, p.lf);
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
	struct za_map_ext x = { .lba = lba, .len = n, .loc = *loc };
	struct pos p;

	if (!n)
		return 0;
	/*
	 * Random small writes first overwrite holes, then extents of exactly
	 * their size: both take one lookup here instead of five.
	 */
	p = lookup(m, lba);
	if (!at_end(p) && at(p)->lba == lba && at(p)->len == n) {
		struct za_map_ext *e = at(p);

		if (dead)
			dead(priv, &e->loc, n);
		touch(m, p.lf);
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
		struct za_map_ext *e = at(p);

		if (e->loc.kind != from->kind || e->loc.group != from->group ||
		    e->loc.pos != from->pos)
			return 0;
		touch(m, p.lf);
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
		struct za_map_ext *e = at(p);

		if (e->loc.kind == from->kind && e->loc.group == from->group &&
		    e->loc.pos - from->pos == e->lba - lba) {
			touch(m, p.lf);
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
		const struct za_map_ext *e = at(p);
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
	/* A leaf out of memory within the range would read as a hole: the
	 * caller asked za_map_need() first. */
	assert(!p.lf || !p.lf->next || in(p.lf->next) ||
	       p.lf->next->key >= end);
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
	size_t stubs = m->nr_stubs + m->nr_dir_out;

	return sizeof(*m) + (m->nr_leaves - stubs + m->nr_spare) * LEAF_BYTES +
	       stubs * STUB_BYTES +
	       (m->nr_dnodes + m->nr_dspare) * sizeof(struct dnode) +
	       (m->nr_leaves - m->nr_dir_out + m->nr_dnodes) *
		       sizeof(struct za_map_page) +
	       m->cap_idx * sizeof(struct ient);
}

size_t za_map_dirty_bytes(const struct za_map *m)
{
	return ((size_t)m->nr_dirty_leaves + m->nr_pending) * LEAF_BYTES +
	       m->nr_dirty_dirs * sizeof(struct dnode);
}

/* ---- pages: snapshots ---- */

void za_map_dirty_count(const struct za_map *m, struct za_map_dirty *d)
{
	d->leaves = m->nr_dirty_leaves;
	d->dirs = m->nr_dirty_dirs;
	d->nodes = (uint32_t)m->nr_dnodes;
	d->leaves_all = (uint32_t)(m->nr_leaves - m->nr_dir_out);
}

static uint64_t leaf_end(const struct leaf *lf)
{
	if (!in(lf))
		return lf->end;
	return lf->e[lf->nr - 1].lba + lf->e[lf->nr - 1].len;
}

static struct za_map_page *fresh_page(struct za_map *m, struct za_map_snap *s,
				      void *node, bool dir)
{
	struct za_map_page *pg = s->fresh[s->nr_fresh++];

	m->nr_pending++;

	pg->node = node;
	pg->dir = dir;
	pg->pending = true;
	return pg;
}

int za_map_snapshot(struct za_map *m, const struct za_map_snap_ops *ops,
		    void *priv, struct za_map_snap *s)
{
	struct za_map_child c[ZA_MAP_DIR_CAP];
	uint32_t n = m->nr_dirty_leaves + m->nr_dirty_dirs, i;
	struct leaf *lf;
	struct dnode *dn;

	memset(s, 0, sizeof(*s));
	/* A block with no place on the drives cannot be written down. Only
	 * a dirty leaf can hold one (a clean one was written or loaded since
	 * it last changed), and only under a dirty directory node. */
	for (dn = m->dhead; dn; dn = dn->next) {
		uint32_t j;

		for (lf = dn->first, j = 0; dn->dirty && j < dn->nr;
		     j++, lf = lf->next)
			for (i = 0; lf->dirty && i < lf->nr; i++)
				if (lf->e[i].loc.kind == ZA_MAP_BUFFER)
					return -EBUSY;
	}
	s->fresh = calloc((size_t)n + 1, sizeof(*s->fresh));
	if (!s->fresh)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		s->fresh[i] = calloc(1, sizeof(**s->fresh));
		if (!s->fresh[i]) {
			while (i--)
				free(s->fresh[i]);
			free(s->fresh);
			s->fresh = NULL;
			return -ENOMEM;
		}
	}
	/* Nothing fails from here on. */
	for (dn = m->dhead; dn; dn = dn->next) {
		struct za_map_child r;

		if (dn->out) {
			/* Only on the drives: clean, named where it is. */
			r.lo = dn->first->key;
			r.hi = dn->first->end;
			r.pg = dn->pg;
			ops->root(priv, &r);
			continue;
		}
		if (!dn->dirty) {
			/*
			 * Clean, so are its leaves (a leaf that changes
			 * dirties its node): its page names them as they
			 * are. Only its range is needed - its first leaf's
			 * key and its last leaf's end - not a walk of its
			 * leaves: a snapshot costs O(nodes + what changed).
			 */
			assert(dn->pg);
			r.lo = dn->first->key;
			r.hi = leaf_end(dn_last(dn));
			r.pg = dn->pg;
			ops->root(priv, &r);
			continue;
		}
		for (lf = dn->first, i = 0; i < dn->nr; i++, lf = lf->next) {
			assert(lf && lf->dn == dn);
			c[i].lo = lf->key;
			c[i].hi = leaf_end(lf);
			if (lf->dirty) {
				assert(in(lf));
				supersede(&s->superseded, lf->pg);
				lf->pg = fresh_page(m, s, lf, false);
				lf->dirty = false;
				m->nr_dirty_leaves--;
				ops->leaf(priv, lf->pg, c[i].lo, c[i].hi, lf->e,
					  lf->nr);
			}
			assert(lf->pg);
			c[i].pg = lf->pg;
		}
		r.lo = c[0].lo;
		r.hi = c[dn->nr - 1].hi;
		if (dn->dirty) {
			supersede(&s->superseded, dn->pg);
			dn->pg = fresh_page(m, s, dn, true);
			dn->dirty = false;
			m->nr_dirty_dirs--;
			ops->dir(priv, dn->pg, r.lo, r.hi, c, dn->nr);
		}
		assert(dn->pg);
		r.pg = dn->pg;
		ops->root(priv, &r);
	}
	assert(s->nr_fresh == n && !m->nr_dirty_leaves && !m->nr_dirty_dirs);
	/* Pages of nodes freed since the last snapshot leave with it. */
	while (m->superseded) {
		struct za_map_page *pg = m->superseded;

		m->superseded = pg->next;
		supersede(&s->superseded, pg);
	}
	return 0;
}

void za_map_snapshot_whole(struct za_map *m, struct za_map_snap *s)
{
	struct leaf *lf;
	struct dnode *dn;

	memset(s, 0, sizeof(*s));
	assert(za_map_whole(m));
	for (lf = m->head; lf; lf = lf->next) {
		supersede(&s->superseded, lf->pg);
		lf->pg = NULL;
		touch(m, lf);
	}
	for (dn = m->dhead; dn; dn = dn->next) {
		supersede(&s->superseded, dn->pg);
		dn->pg = NULL;
		dn_touch(m, dn);
	}
	while (m->superseded) {
		struct za_map_page *pg = m->superseded;

		m->superseded = pg->next;
		supersede(&s->superseded, pg);
	}
}

/* The node whose page @pg is, if it still is, is to be written again. */
static void pg_touch(struct za_map *m, struct za_map_page *pg)
{
	if (!pg->node)
		return;
	if (pg->dir)
		dn_touch(m, pg->node);
	else
		touch(m, pg->node);
}

void za_map_snap_end(struct za_map *m, struct za_map_snap *s, bool live,
		     void (*drop)(void *priv, struct za_map_page *pg),
		     void *priv)
{
	struct za_map_page *pg, *next;
	uint32_t i;

	for (i = 0; i < s->nr_fresh; i++)
		s->fresh[i]->pending = false;
	m->nr_pending -= s->nr_fresh;
	if (live) {
		for (pg = s->superseded; pg; pg = next) {
			next = pg->next;
			if (drop)
				drop(priv, pg);
			free(pg);
		}
	} else {
		for (i = 0; i < s->nr_fresh; i++)
			pg_touch(m, s->fresh[i]);
		for (pg = s->superseded; pg; pg = next) {
			next = pg->next;
			supersede(&m->superseded, pg);
		}
	}
	free(s->fresh);
	memset(s, 0, sizeof(*s));
}

uint32_t za_map_redirty(struct za_map *m,
			bool (*pick)(void *priv, const struct za_map_page *pg),
			void *priv)
{
	uint32_t n = 0;
	struct leaf *lf;
	struct dnode *dn;

	for (lf = m->head; lf; lf = lf->next)
		if (in(lf) && lf->pg && !lf->dirty && pick(priv, lf->pg)) {
			touch(m, lf);
			n++;
		}
	for (dn = m->dhead; dn; dn = dn->next)
		if (!dn->out && dn->pg && pick(priv, dn->pg)) {
			n += !dn->dirty;
			dn_touch(m, dn);
		}
	return n;
}

/* ---- pages: loading ---- */

static struct za_map_page *load_page(void *node, bool dir, uint64_t group,
				     uint64_t pos)
{
	struct za_map_page *pg = calloc(1, sizeof(*pg));

	if (pg) {
		pg->node = node;
		pg->dir = dir;
		pg->group = group;
		pg->pos = pos;
	}
	return pg;
}

int za_map_load_dir(struct za_map *m, uint64_t group, uint64_t pos,
		    struct za_map_page **pg)
{
	struct dnode *dn;

	if (m->load_dn ? !m->load_dn->nr : m->head != NULL)
		return -EBADMSG; /* an empty node, or a map not empty */
	dn = calloc(1, sizeof(*dn));
	if (!dn)
		return -ENOMEM;
	dn->pg = load_page(dn, true, group, pos);
	if (!dn->pg) {
		free(dn);
		return -ENOMEM;
	}
	dn_link(m, m->load_dn, dn);
	m->nr_dnodes++;
	m->load_dn = dn;
	*pg = dn->pg;
	return 0;
}

int za_map_load_dir_out(struct za_map *m, uint64_t lo, uint64_t hi,
			uint64_t group, uint64_t pos, struct za_map_page **pg)
{
	uint64_t end = m->load_last ? leaf_end(m->load_last) : 0;
	struct dnode *dn;
	struct leaf *sent;
	int ret;

	if (m->load_dn ? !m->load_dn->nr : m->head != NULL)
		return -EBADMSG; /* an empty node, or a map not empty */
	if (lo >= hi || lo < end)
		return -EBADMSG;
	ret = reserve(m);
	if (ret)
		return ret;
	dn = calloc(1, sizeof(*dn));
	sent = calloc(1, STUB_BYTES);
	if (dn)
		dn->pg = load_page(dn, true, group, pos);
	if (!dn || !sent || !dn->pg) {
		if (dn)
			free(dn->pg);
		free(dn);
		free(sent);
		return -ENOMEM;
	}
	/* As dn_evict() leaves a node: one stub standing for its range. */
	sent->key = lo;
	sent->end = hi;
	sent->state = LEAF_DIR_OUT;
	sent->dn = dn;
	sent->prev = m->load_last;
	if (sent->prev)
		sent->prev->next = sent;
	else
		m->head = sent;
	tree_insert(m, sent); /* at the end: keys increase */
	dn->first = sent;
	dn->nr = 1;
	dn->out = true;
	dn_link(m, m->load_dn, dn);
	m->nr_dnodes++;
	m->nr_dir_out++;
	m->load_dn = dn;
	m->load_last = sent;
	*pg = dn->pg;
	return 0;
}

size_t za_map_bytes_whole(uint64_t nr_extents)
{
	/* Leaves at least half full (split in halves, merged when low). */
	uint64_t leaves = nr_extents / (LEAF_CAP / 2) + 1;

	return (size_t)(leaves * (LEAF_BYTES + sizeof(struct za_map_page) +
				  sizeof(struct ient))) +
	       sizeof(struct za_map);
}

void za_map_load_extents(struct za_map *m, uint64_t nr_extents)
{
	m->nr = nr_extents;
}

int za_map_load_leaf(struct za_map *m, uint64_t group, uint64_t pos,
		     const struct za_map_ext *e, uint32_t n,
		     struct za_map_page **pg)
{
	struct dnode *dn = m->load_dn;
	uint64_t end = m->load_last ? leaf_end(m->load_last) : 0;
	struct leaf *lf;
	uint32_t i;
	int ret;

	if (!dn || dn->out || dn->nr >= ZA_MAP_DIR_CAP || !n || n > LEAF_CAP)
		return -EBADMSG;
	for (i = 0; i < n; i++) {
		if (e[i].lba < end || !e[i].len ||
		    e[i].lba + e[i].len < e[i].lba ||
		    (e[i].loc.kind != ZA_MAP_DATA &&
		     e[i].loc.kind != ZA_MAP_JOURNAL))
			return -EBADMSG;
		end = e[i].lba + e[i].len;
	}
	ret = reserve(m);
	if (ret)
		return ret;
	lf = calloc(1, LEAF_BYTES);
	if (!lf)
		return -ENOMEM;
	lf->pg = load_page(lf, false, group, pos);
	if (!lf->pg) {
		free(lf);
		return -ENOMEM;
	}
	memcpy(lf->e, e, n * sizeof(*e));
	lf->nr = n;
	lf->key = e[0].lba;
	lf->prev = m->load_last;
	if (lf->prev)
		lf->prev->next = lf;
	else
		m->head = lf;
	lf->dn = dn;
	if (!dn->nr)
		dn->first = lf;
	dn->nr++;
	tree_insert(m, lf); /* at the end: keys increase */
	m->nr += n;
	m->load_last = lf;
	*pg = lf->pg;
	return 0;
}

int za_map_load_end(struct za_map *m)
{
	bool empty = m->load_dn && !m->load_dn->nr;

	m->load_dn = NULL;
	m->load_last = NULL;
	return empty ? -EBADMSG : 0;
}

/* ---- the cache: pages only on the drives ---- */

bool za_map_whole(const struct za_map *m)
{
	return !m->nr_stubs && !m->nr_dir_out;
}

struct za_map_page *za_map_need(struct za_map *m, uint64_t lba, uint64_t n,
				bool seams)
{
	uint64_t last = seams ? lba + n : lba + n - 1;
	struct leaf *lf;
	bool first = true;

	if (!n && !seams)
		return NULL;
	/* Before the first leaf, the head is asked for whatever its key:
	 * an operation there may take it (lookup_in()). */
	lf = tree_find(m, lba);
	if (!lf)
		lf = m->head;
	for (; lf; lf = lf->next, first = false) {
		if (!first && lf->key > last)
			break;
		if (lf->state == LEAF_DIR_OUT)
			return lf->dn->pg;
		if (lf->state == LEAF_OUT)
			return lf->pg;
		lf->ref = true;
		lf->used = m->turn;
		/*
		 * A set that empties the first leaf it meets (every extent
		 * of it within [lba, lba + n)) frees it, then inserts after
		 * the leaf before: that one must be in memory too
		 * (za_map_set() asserted on a random write that covered a
		 * leaf of one extent, test_map_cache).
		 */
		if (first && seams && lf->prev && lf->e[0].lba >= lba &&
		    leaf_end(lf) <= lba + n) {
			/* Marked like the rest when in: a request waiting
			 * for more pages keeps it (za_map_sweep()). */
			if (in(lf->prev)) {
				lf->prev->ref = true;
				lf->prev->used = m->turn;
			} else {
				return lf->prev->state == LEAF_DIR_OUT ?
					       lf->prev->dn->pg :
					       lf->prev->pg;
			}
		}
	}
	return NULL;
}

static struct za_map_page *load_page(void *node, bool dir, uint64_t group,
				     uint64_t pos);

/* Put @n where @old is, in the list, the index and its node. */
static void replace_place(struct za_map *m, struct leaf *old, struct leaf *n)
{
	n->prev = old->prev;
	n->next = old->next;
	if (n->prev)
		n->prev->next = n;
	else
		m->head = n;
	if (n->next)
		n->next->prev = n;
	m->idx[idx_of(m, old)].lf = n;
	if (old->dn->first == old)
		old->dn->first = n;
	if (m->finger == old)
		m->finger = NULL;
}

int za_map_fill_dir(struct za_map *m, struct za_map_page *pg,
		    const struct za_map_ref *c, uint32_t n, bool counted)
{
	struct dnode *dn = pg->node;
	struct leaf *sent, **st;
	size_t i0;
	uint32_t i;

	if (!dn || !pg->dir)
		return -ESTALE;
	if (!dn->out)
		return -EALREADY;
	sent = dn->first;
	if (!n || n > ZA_MAP_DIR_CAP || c[0].lo != sent->key ||
	    c[n - 1].hi != sent->end)
		return -EBADMSG;
	for (i = 0; i < n; i++)
		if (c[i].lo >= c[i].hi || (i && c[i].lo < c[i - 1].hi))
			return -EBADMSG;
	if (m->nr_leaves + n > m->cap_idx) {
		size_t cap = m->cap_idx ? m->cap_idx : 16;
		struct ient *ix;

		while (cap < m->nr_leaves + n)
			cap *= 2;
		ix = realloc(m->idx, cap * sizeof(*ix));
		if (!ix)
			return -ENOMEM;
		m->idx = ix;
		m->cap_idx = cap;
	}
	st = calloc(n, sizeof(*st));
	if (!st)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		st[i] = calloc(1, STUB_BYTES);
		if (st[i])
			st[i]->pg =
				load_page(st[i], false, c[i].group, c[i].pos);
		if (!st[i] || !st[i]->pg) {
			do {
				if (st[i])
					free(st[i]->pg);
				free(st[i]);
			} while (i--);
			free(st);
			return -ENOMEM;
		}
	}
	/* Nothing fails from here on: the stubs take the sentinel's place. */
	i0 = idx_of(m, sent);
	memmove(&m->idx[i0 + n], &m->idx[i0 + 1],
		(m->nr_leaves - i0 - 1) * sizeof(m->idx[0]));
	for (i = 0; i < n; i++) {
		struct leaf *lf = st[i];

		lf->key = c[i].lo;
		lf->end = c[i].hi;
		lf->state = LEAF_OUT;
		lf->dn = dn;
		lf->pg->counted = counted;
		lf->prev = i ? st[i - 1] : sent->prev;
		lf->next = i + 1 < n ? st[i + 1] : sent->next;
		m->idx[i0 + i].key = lf->key;
		m->idx[i0 + i].lf = lf;
	}
	if (sent->prev)
		sent->prev->next = st[0];
	else
		m->head = st[0];
	if (sent->next)
		sent->next->prev = st[n - 1];
	m->nr_leaves += n - 1;
	m->nr_stubs += n;
	m->nr_dir_out--;
	dn->first = st[0];
	dn->nr = n;
	dn->nr_out = n;
	dn->out = false;
	free(sent);
	free(st);
	return 0;
}

int za_map_fill_leaf(struct za_map *m, struct za_map_page *pg,
		     const struct za_map_ext *e, uint32_t n)
{
	struct leaf *stub = pg->node, *lf;
	uint64_t end;
	uint32_t i;

	if (!stub || pg->dir)
		return -ESTALE;
	if (stub->state != LEAF_OUT)
		return -EALREADY;
	if (!n || n > LEAF_CAP || e[0].lba != stub->key)
		return -EBADMSG;
	for (end = stub->key, i = 0; i < n; i++) {
		if (e[i].lba < end || !e[i].len ||
		    e[i].lba + e[i].len < e[i].lba ||
		    (e[i].loc.kind != ZA_MAP_DATA &&
		     e[i].loc.kind != ZA_MAP_JOURNAL))
			return -EBADMSG;
		end = e[i].lba + e[i].len;
	}
	if (end != stub->end)
		return -EBADMSG;
	lf = malloc(LEAF_BYTES);
	if (!lf)
		return -ENOMEM;
	memcpy(lf, stub, STUB_BYTES);
	memcpy(lf->e, e, n * sizeof(*e));
	lf->nr = n;
	lf->used = m->turn;
	lf->state = LEAF_IN;
	lf->ref = true;
	replace_place(m, stub, lf);
	pg->node = lf;
	lf->dn->nr_out--;
	m->nr_stubs--;
	free(stub);
	return 0;
}

/*
 * All of @dn's leaves are stubs, and it is clean and its page durable:
 * one stub stands for it all. Returns the place after it.
 */
static struct leaf *dn_evict(struct za_map *m, struct dnode *dn)
{
	struct leaf *sent = dn->first, *lf = sent->next, *next;
	uint64_t end = sent->end;
	size_t i0 = idx_of(m, sent);
	uint32_t i;

	for (i = 1; i < dn->nr; i++, lf = next) {
		assert(lf->dn == dn && lf->state == LEAF_OUT);
		next = lf->next;
		end = lf->end;
		free(lf->pg); /* still in the tree, only not in memory */
		free(lf);
	}
	memmove(&m->idx[i0 + 1], &m->idx[i0 + dn->nr],
		(m->nr_leaves - i0 - dn->nr) * sizeof(m->idx[0]));
	m->nr_leaves -= dn->nr - 1;
	m->nr_stubs -= dn->nr;
	m->nr_dir_out++;
	sent->next = lf;
	if (lf)
		lf->prev = sent;
	free(sent->pg);
	sent->pg = NULL;
	sent->end = end;
	sent->state = LEAF_DIR_OUT;
	dn->nr = 1;
	dn->nr_out = 0;
	dn->out = true;
	return lf;
}

static bool dn_evictable(const struct dnode *dn)
{
	return !dn->out && dn->nr_out == dn->nr && !dn->dirty && dn->pg &&
	       !dn->pg->pending && !dn->nr_pinned;
}

/* @lf (in memory, clean, its page durable) leaves memory; its stub
 * stays. Returns the place after it, or NULL with @*stop on -ENOMEM. */
static struct leaf *leaf_evict(struct za_map *m, struct leaf *lf, bool *stop)
{
	struct leaf *stub = malloc(STUB_BYTES), *next;

	if (!stub) {
		*stop = true;
		return NULL;
	}
	memcpy(stub, lf, STUB_BYTES);
	stub->end = leaf_end(lf);
	stub->nr = 0;
	stub->state = LEAF_OUT;
	replace_place(m, lf, stub);
	stub->pg->node = stub;
	stub->dn->nr_out++;
	m->nr_stubs++;
	free(lf);
	next = stub->next;
	if (dn_evictable(stub->dn))
		next = dn_evict(m, stub->dn);
	return next;
}

void za_map_pin(struct za_map *m, struct za_map_page *pg, bool on)
{
	struct leaf *lf = pg->node;

	(void)m;
	if (pg->dir || !lf)
		return; /* a directory node out stays out until filled */
	/* On the leaf, which a split of its directory node carries to the
	 * new one (dn_split()): a count on the node alone went with the
	 * wrong half (S3, za_map_pin() asserted). */
	assert(lf->pinned != on);
	lf->pinned = on;
	if (on)
		lf->dn->nr_pinned++;
	else
		lf->dn->nr_pinned--;
}

/* The clock, for at most @passes turns of the hand. */
static size_t shrink(struct za_map *m, size_t target_bytes, unsigned passes,
		     uint64_t keep_from)
{
	struct leaf *lf;
	size_t seen = 0, limit = 2 * m->nr_leaves + 2;
	uint64_t start;
	bool stop = false, wrapped = false;

	drop_spares(m);
	/* What is used from now on is used after this turn began. */
	m->turn++;
	lf = tree_find(m, m->hand);
	if (!lf)
		lf = m->head;
	start = lf ? lf->key : 0;
	while (!stop && lf && za_map_bytes(m) > target_bytes &&
	       seen++ < limit) {
		struct leaf *next = lf->next;

		/* One turn: back where it started (leaves merge into
		 * directory stubs on the way: count places, not steps). */
		if (passes == 1 && wrapped && lf->key >= start)
			break;
		if (lf->state == LEAF_OUT && dn_evictable(lf->dn)) {
			next = dn_evict(m, lf->dn);
		} else if (in(lf) && !lf->dirty && lf->pg && !lf->pg->pending &&
			   lf->used < keep_from) {
			if (lf->ref)
				lf->ref = false;
			else
				next = leaf_evict(m, lf, &stop);
		}
		if (!next)
			wrapped = true;
		lf = next ? next : m->head;
	}
	m->hand = lf ? lf->key : 0;
	return za_map_bytes(m);
}

size_t za_map_shrink(struct za_map *m, size_t target_bytes, uint64_t keep_from)
{
	return shrink(m, target_bytes, 2, keep_from);
}

size_t za_map_sweep(struct za_map *m, size_t target_bytes, uint64_t keep_from)
{
	return shrink(m, target_bytes, 1, keep_from);
}

uint64_t za_map_turn(const struct za_map *m)
{
	return m->turn;
}
