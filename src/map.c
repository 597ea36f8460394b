// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * map.c - the block map as a treap of extents.
 *
 * A treap (a binary search tree on the extent's first block, heap-ordered
 * on random priorities) gives expected O(log n) split and merge, which is
 * all a range operation needs: cut the extents that straddle the range's
 * ends, split the tree into before / inside / after, rebuild the inside,
 * and merge the three back. Adjacent extents that continue each other
 * (same kind and group, consecutive positions) are coalesced whenever a
 * range is rebuilt, so a sequential fill leaves one extent per group.
 *
 * Cuts are the only allocations and happen before anything is detached,
 * so an -ENOMEM leaves the mapping as it was.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "map.h"

struct node {
	uint64_t lba, len;
	struct za_map_loc loc;
	uint32_t prio;
	struct node *l, *r;
};

struct za_map {
	struct node *root;
	size_t nr;
	uint64_t rng;
};

static uint32_t rnd(struct za_map *m)
{
	m->rng ^= m->rng << 13;
	m->rng ^= m->rng >> 7;
	m->rng ^= m->rng << 17;
	return (uint32_t)(m->rng >> 16);
}

int za_map_new(struct za_map **out)
{
	struct za_map *m = calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	m->rng = 0x9e3779b97f4a7c15ull;
	*out = m;
	return 0;
}

static void free_tree(struct node *n)
{
	if (!n)
		return;
	free_tree(n->l);
	free_tree(n->r);
	free(n);
}

void za_map_free(struct za_map *m)
{
	if (!m)
		return;
	free_tree(m->root);
	free(m);
}

/* Split @t into nodes with lba < key (*a) and lba >= key (*b). */
static void split(struct node *t, uint64_t key, struct node **a,
		  struct node **b)
{
	if (!t) {
		*a = *b = NULL;
	} else if (t->lba < key) {
		split(t->r, key, &t->r, b);
		*a = t;
	} else {
		split(t->l, key, a, &t->l);
		*b = t;
	}
}

/* Merge two treaps, every key of @a below every key of @b. */
static struct node *merge(struct node *a, struct node *b)
{
	if (!a)
		return b;
	if (!b)
		return a;
	if (a->prio > b->prio) {
		a->r = merge(a->r, b);
		return a;
	}
	b->l = merge(a, b->l);
	return b;
}

static struct node *insert(struct node *t, struct node *n)
{
	struct node *a, *b;

	split(t, n->lba, &a, &b);
	return merge(merge(a, n), b);
}

/* The extent containing @lba, or NULL. */
static struct node *find(struct node *t, uint64_t lba)
{
	struct node *best = NULL;

	while (t) {
		if (t->lba <= lba) {
			best = t;
			t = t->r;
		} else {
			t = t->l;
		}
	}
	return best && lba < best->lba + best->len ? best : NULL;
}

/* Make @key an extent boundary. 0 or -ENOMEM. */
static int cut(struct za_map *m, uint64_t key)
{
	struct node *n = find(m->root, key), *t;

	if (!n || n->lba == key)
		return 0;
	t = malloc(sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->lba = key;
	t->len = n->lba + n->len - key;
	t->loc = n->loc;
	t->loc.pos += key - n->lba;
	t->prio = rnd(m);
	t->l = t->r = NULL;
	n->len = key - n->lba;
	m->root = insert(m->root, t);
	m->nr++;
	return 0;
}

static bool continues(const struct node *a, const struct node *b)
{
	return a->lba + a->len == b->lba && a->loc.kind == b->loc.kind &&
	       a->loc.group == b->loc.group &&
	       a->loc.pos + a->len == b->loc.pos;
}

static struct node *max_node(struct node *t)
{
	while (t && t->r)
		t = t->r;
	return t;
}

/* Remove and return the smallest node of *t. */
static struct node *pop_min(struct node **t)
{
	struct node **p = t, *n;

	if (!*t)
		return NULL;
	while ((*p)->l)
		p = &(*p)->l;
	n = *p;
	*p = n->r;
	n->r = NULL;
	return n;
}

/*
 * Rebuilding the inside of a range: nodes arrive in order and are appended
 * to @acc, coalesced with the previous one when they continue it.
 */
struct rebuild {
	struct za_map *m;
	struct node *acc; /* treap of nodes done, all before @last */
	struct node *last; /* pending node, not yet in acc */
};

static void rb_add(struct rebuild *rb, struct node *n)
{
	n->l = n->r = NULL;
	if (rb->last && continues(rb->last, n)) {
		rb->last->len += n->len;
		free(n);
		rb->m->nr--;
		return;
	}
	if (rb->last)
		rb->acc = merge(rb->acc, rb->last);
	rb->last = n;
}

static struct node *rb_end(struct rebuild *rb)
{
	if (rb->last)
		rb->acc = merge(rb->acc, rb->last);
	return rb->acc;
}

/*
 * Put A + middle + C back together, coalescing across both seams: the
 * middle's first node may continue A's last, C's first may continue the
 * middle's (or A's) last.
 */
static void reassemble(struct za_map *m, struct node *a, struct node *mid,
		       struct node *c)
{
	struct rebuild rb = { .m = m };
	struct node *amax = max_node(a), *n, *last, *cmin;

	while ((n = pop_min(&mid)))
		rb_add(&rb, n);
	mid = rb_end(&rb);
	/* Seam A | mid. */
	n = pop_min(&mid);
	if (n && amax && continues(amax, n)) {
		amax->len += n->len;
		free(n);
		m->nr--;
	} else if (n) {
		mid = merge(n, mid);
	}
	/* Seam mid | C (or A | C when mid was absorbed or empty). */
	last = mid ? max_node(mid) : amax;
	cmin = pop_min(&c);
	if (cmin && last && continues(last, cmin)) {
		last->len += cmin->len;
		free(cmin);
		m->nr--;
	} else if (cmin) {
		c = merge(cmin, c);
	}
	m->root = merge(merge(a, mid), c);
}

static void kill_tree(struct za_map *m, struct node *t, za_map_dead_fn dead,
		      void *priv)
{
	if (!t)
		return;
	kill_tree(m, t->l, dead, priv);
	if (dead)
		dead(priv, &t->loc, t->len);
	kill_tree(m, t->r, dead, priv);
	free(t);
	m->nr--;
}

int za_map_set(struct za_map *m, uint64_t lba, uint64_t n,
	       const struct za_map_loc *loc, za_map_dead_fn dead, void *priv)
{
	struct node *a, *b, *c, *nn;

	if (!n)
		return 0;
	nn = malloc(sizeof(*nn));
	if (!nn)
		return -ENOMEM;
	if (cut(m, lba) || cut(m, lba + n)) {
		free(nn);
		return -ENOMEM;
	}
	split(m->root, lba, &a, &b);
	split(b, lba + n, &b, &c);
	kill_tree(m, b, dead, priv);
	nn->lba = lba;
	nn->len = n;
	nn->loc = *loc;
	nn->prio = rnd(m);
	nn->l = nn->r = NULL;
	m->nr++;
	reassemble(m, a, nn, c);
	return 0;
}

int za_map_clear(struct za_map *m, uint64_t lba, uint64_t n,
		 za_map_dead_fn dead, void *priv)
{
	struct node *a, *b, *c;

	if (!n)
		return 0;
	if (cut(m, lba) || cut(m, lba + n))
		return -ENOMEM;
	split(m->root, lba, &a, &b);
	split(b, lba + n, &b, &c);
	kill_tree(m, b, dead, priv);
	m->root = merge(a, c);
	return 0;
}

struct move_ctx {
	uint64_t lba;
	const struct za_map_loc *from, *to;
	int64_t moved;
};

static void move_tree(struct node *t, struct move_ctx *mc)
{
	if (!t)
		return;
	move_tree(t->l, mc);
	if (t->loc.kind == mc->from->kind && t->loc.group == mc->from->group &&
	    t->loc.pos - mc->from->pos == t->lba - mc->lba) {
		t->loc.kind = mc->to->kind;
		t->loc.group = mc->to->group;
		t->loc.pos = mc->to->pos + (t->lba - mc->lba);
		mc->moved += (int64_t)t->len;
	}
	move_tree(t->r, mc);
}

int64_t za_map_move(struct za_map *m, uint64_t lba, uint64_t n,
		    const struct za_map_loc *from, const struct za_map_loc *to)
{
	struct move_ctx mc = { .lba = lba, .from = from, .to = to };
	struct node *a, *b, *c;

	if (!n)
		return 0;
	if (cut(m, lba) || cut(m, lba + n))
		return -ENOMEM;
	split(m->root, lba, &a, &b);
	split(b, lba + n, &b, &c);
	move_tree(b, &mc);
	reassemble(m, a, b, c);
	return mc.moved;
}

struct walk_ctx {
	uint64_t pos, end;
	int (*fn)(void *priv, uint64_t lba, uint64_t n,
		  const struct za_map_loc *loc);
	void *priv;
};

static int walk_tree(const struct node *t, struct walk_ctx *w)
{
	int ret;

	if (!t || w->pos >= w->end)
		return 0;
	if (t->lba > w->pos) {
		ret = walk_tree(t->l, w);
		if (ret)
			return ret;
	}
	if (w->pos >= w->end)
		return 0;
	if (t->lba + t->len > w->pos && t->lba < w->end) {
		uint64_t s = t->lba > w->pos ? t->lba : w->pos;
		uint64_t e = t->lba + t->len < w->end ? t->lba + t->len :
							w->end;
		struct za_map_loc loc = t->loc;

		if (s > w->pos) {
			ret = w->fn(w->priv, w->pos, s - w->pos, NULL);
			if (ret)
				return ret;
		}
		loc.pos += s - t->lba;
		ret = w->fn(w->priv, s, e - s, &loc);
		if (ret)
			return ret;
		w->pos = e;
	}
	if (t->lba + t->len < w->end)
		return walk_tree(t->r, w);
	return 0;
}

int za_map_walk(const struct za_map *m, uint64_t lba, uint64_t n,
		int (*fn)(void *priv, uint64_t lba, uint64_t n,
			  const struct za_map_loc *loc),
		void *priv)
{
	struct walk_ctx w = {
		.pos = lba, .end = lba + n, .fn = fn, .priv = priv
	};
	int ret;

	if (!n)
		return 0;
	ret = walk_tree(m->root, &w);
	if (!ret && w.pos < w.end)
		ret = fn(priv, w.pos, w.end - w.pos, NULL);
	return ret;
}

size_t za_map_extents(const struct za_map *m)
{
	return m->nr;
}

size_t za_map_bytes(const struct za_map *m)
{
	return sizeof(*m) + m->nr * sizeof(struct node);
}
