// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * engine.c - the segment engine: engines made and freed, streams added,
 * members added, drained, failed, retired and released, their states and
 * counters, and the tables of segments and groups. Placement, writes,
 * reads, crash recovery, space, column rebuilds and stripe checks are in
 * the engine-*.c files beside it (engine-int.h is what they share). It
 * does not write superblocks: array.c does, when told of a failure.
 *
 * Big theory
 * ----------
 * Members are zoned drives. Zones 0 and 1 of each hold its superblock log
 * (sb.c); conventional zones are left alone; every other zone is a "data
 * zone", FREE (empty), USED (part of a segment, or holding data this engine
 * did not place) or BAD (offline, read-only, too small).
 *
 * A segment is k+p data zones on k+p distinct members (its columns). It is
 * written as a log of stripes, each stripe one slot of every column at the
 * same zone offset (stripe.h draws a slot):
 *
 *            member 3     member 7     member 0    ...  member 11
 *   zone       z41          z12          z40             z9
 *   stripe 0 [hdr|d0 ]   [hdr|d1 ]   [hdr|d2 ]  ...  [hdr|P1 ]
 *   stripe 1 [hdr|d0 ]   [hdr|d1 ]   [hdr|d2 ]  ...  [hdr|P1 ]
 *   ...
 *
 * Where each chunk lands: every column is written with WRITE at its zone's
 * write pointer, stripes of a segment in order, so stripe i sits at
 * i * slot in every zone of the segment and no landing offsets need to be
 * recorded (native append is not used for data). A segment is as long as
 * the shortest zone of its group.
 *
 * A stream is a class of stripes with one geometry: stream 0 carries data
 * with the array's k+p; the volume adds a journal stream (k = 1: p+1
 * copies of small synced writes). Each stream writes into one group at a
 * time: W segments on disjoint members opened together, W = as many as the
 * writable members allow (floor(writable / (k+p))) unless the stream asks
 * for fewer, so that every member writes. Stripes go round robin: group
 * stripe j is stripe j / W of segment j % W. Sequential data thus stays
 * contiguous in "group positions", and the volume's map needs an extent
 * per group rather than per stripe (P5), while all members work (P2).
 *
 * Degraded segments: with fewer writable members than k+p (members lost
 * and none added yet) but at least k, a group opens one segment on the
 * members there are and its last columns (parity first, so reads need no
 * decode) are *absent*: born lost, recorded as ZA_STRIPE_MEMBER_ABSENT in
 * every header. Parity of the present columns is computed as usual. An
 * absent column is a lost column with no member: in memory it names
 * member ZA_STRIPE_MEMBER_ABSENT, an entry past the real members that is
 * never readable nor writable (no device), so that reads, rebuilds, scrub
 * and za_engine_degraded() treat it as lost without knowing about it, and
 * a rebuild restores it like any other. Never chosen while k+p members
 * are writable: an absent column is redundancy given away.
 *
 * Each of the other files opens with its part of the story: placement
 * (engine-place.c), writes (engine-write.c), reads (engine-read.c), a
 * group's LBA tables for garbage collection (engine-lbas.c), crash
 * recovery (engine-recover.c), space, release and degraded lists
 * (engine-space.c), column rebuilds (engine-rebuild.c) and stripe checks
 * (engine-scrub.c).
 */
#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "ec.h"
#include "log.h"
#include "engine-int.h"

/* ---- the tables of segments and groups ---- */

/*
 * Segments and groups are found by id in chained hash tables that double
 * their buckets whenever they hold more entries than buckets: a fixed
 * 4096 made chains about 340 long with 256 drives of 65,535 zones (1.4 M
 * segments of 10+2), and every read, rebuild column and stripe check
 * looks one up. Ids are handed out in order, so id modulo a power of two
 * spreads them evenly. A table that cannot grow (no memory) stays as it
 * is, only slower. Entries go at the head of their chain, as before; no
 * caller depends on the order a walk meets them in (za_engine_groups()
 * sorts what it lists).
 */
static uint32_t slot_of(uint64_t id, uint32_t size)
{
	return (uint32_t)(id & (size - 1));
}

struct za_segment *eng_seg_find(const struct za_engine *e, uint64_t id)
{
	struct za_segment *s;

	for (s = e->hash[slot_of(id, e->hash_size)]; s; s = s->hnext)
		if (s->id == id)
			return s;
	return NULL;
}

struct group *eng_group_find(const struct za_engine *e, uint64_t id)
{
	struct group *g;

	for (g = e->ghash[slot_of(id, e->ghash_size)]; g; g = g->hnext)
		if (g->id == id)
			return g;
	return NULL;
}

static void seg_table_grow(struct za_engine *e)
{
	uint32_t size = e->hash_size * 2, i;
	struct za_segment **h, *s, *next;

	if (size < e->hash_size)
		return; /* 2^31 buckets: as far as it goes */
	h = calloc(size, sizeof(*h));
	if (!h)
		return;
	for (i = 0; i < e->hash_size; i++)
		for (s = e->hash[i]; s; s = next) {
			next = s->hnext;
			s->hnext = h[slot_of(s->id, size)];
			h[slot_of(s->id, size)] = s;
		}
	free(e->hash);
	e->hash = h;
	e->hash_size = size;
}

static void group_table_grow(struct za_engine *e)
{
	uint32_t size = e->ghash_size * 2, i;
	struct group **h, *g, *next;

	if (size < e->ghash_size)
		return;
	h = calloc(size, sizeof(*h));
	if (!h)
		return;
	for (i = 0; i < e->ghash_size; i++)
		for (g = e->ghash[i]; g; g = next) {
			next = g->hnext;
			g->hnext = h[slot_of(g->id, size)];
			h[slot_of(g->id, size)] = g;
		}
	free(e->ghash);
	e->ghash = h;
	e->ghash_size = size;
}

/*
 * A zeroed segment with its per-column arrays for @width columns behind
 * it; free() releases both. NULL on -ENOMEM.
 */
struct za_segment *eng_seg_alloc(unsigned width)
{
	struct za_segment *g;
	uint8_t *p;

	assert(width && width <= ZA_EC_MAX_WIDTH);
	/* u32 arrays first, then u16: each stays naturally aligned. */
	g = calloc(1, sizeof(*g) + (size_t)width * (3 * 4 + 2 * 2));
	if (!g)
		return NULL;
	p = (uint8_t *)(g + 1);
	g->zone = (uint32_t *)p;
	g->hdr_zone = (uint32_t *)(p + (size_t)width * 4);
	g->col_upto = (uint32_t *)(p + (size_t)width * 8);
	g->member = (uint16_t *)(p + (size_t)width * 12);
	g->hdr_member = (uint16_t *)(p + (size_t)width * 14);
	return g;
}

void eng_seg_insert(struct za_engine *e, struct za_segment *g)
{
	struct za_segment **b = &e->hash[slot_of(g->id, e->hash_size)];

	g->hnext = *b;
	*b = g;
	if (++e->nr_segs > e->hash_size)
		seg_table_grow(e);
}

void eng_seg_unlink(struct za_engine *e, struct za_segment *g)
{
	struct za_segment **sp = &e->hash[slot_of(g->id, e->hash_size)];

	while (*sp != g)
		sp = &(*sp)->hnext;
	*sp = g->hnext;
	e->nr_segs--;
}

void eng_group_insert(struct za_engine *e, struct group *grp)
{
	struct group **b = &e->ghash[slot_of(grp->id, e->ghash_size)];

	grp->hnext = *b;
	*b = grp;
	if (++e->nr_groups > e->ghash_size)
		group_table_grow(e);
}

void eng_group_unlink(struct za_engine *e, struct group *grp)
{
	struct group **gp = &e->ghash[slot_of(grp->id, e->ghash_size)];

	while (*gp != grp)
		gp = &(*gp)->hnext;
	*gp = grp->hnext;
	e->nr_groups--;
}

/* ---- construction ---- */

int za_engine_format(struct za_dev *dev)
{
	struct za_zone *z;
	unsigned nr, i;
	int ret;

	ret = za_dev_report_all(dev, &z, &nr);
	if (ret)
		return ret;
	for (i = ZA_SB_ZONES; i < nr; i++) {
		if (z[i].type == ZA_ZONE_TYPE_CNV ||
		    z[i].cond == ZA_ZONE_COND_EMPTY ||
		    z[i].cond == ZA_ZONE_COND_OFFLINE ||
		    z[i].cond == ZA_ZONE_COND_READONLY)
			continue;
		ret = za_dev_io_sync(dev, ZA_DEV_OP_RESET, z[i].start_bytes,
				     NULL, 0, NULL);
		if (ret) {
			za_log_err("%s: zone %u: reset failed: %s", dev->path,
				   i, strerror(-ret));
			break;
		}
	}
	free(z);
	return ret;
}

/* Count the member's data zones and their smallest capacity. */
void eng_member_zstats(struct member *m)
{
	uint32_t z;

	m->data_zones = 0;
	m->min_cap_bytes = UINT64_MAX;
	for (z = 0; z < m->nr_zones; z++)
		if (m->zkind[z] == Z_FREE || m->zkind[z] == Z_USED ||
		    m->zkind[z] == Z_QUARANTINE) {
			m->data_zones++;
			if (eng_zcap(m, z) < m->min_cap_bytes)
				m->min_cap_bytes = eng_zcap(m, z);
		}
}

/*
 * Zone capacities: most drives give every zone the same, kept once; a
 * drive whose zones differ gets a table. A capacity is used in whole 4
 * KiB blocks (the engine writes nothing smaller).
 */
static int member_caps(struct member *m, const struct za_zone *z, unsigned nr)
{
	unsigned i;

	m->cap_bytes = nr > ZA_SB_ZONES ? z[ZA_SB_ZONES].cap_bytes & ~4095ull :
					  0;
	for (i = 0; i < nr; i++)
		if ((z[i].cap_bytes & ~4095ull) != m->cap_bytes)
			break;
	if (i == nr)
		return 0;
	m->zcap_blk = calloc(nr, sizeof(*m->zcap_blk));
	if (!m->zcap_blk)
		return -ENOMEM;
	for (i = 0; i < nr; i++)
		m->zcap_blk[i] = (uint32_t)(z[i].cap_bytes >> 12);
	return 0;
}

/*
 * Mapped, not malloc'd: 8 B per zone for the length of one recovery,
 * 512 KiB per 16 TiB drive. Freed into the heap, such arrays stayed
 * resident after recovery (glibc raises its mmap threshold as big blocks
 * are freed, and does not give back the middle of the heap): S2 measured
 * 8 B per zone more with the start's reports kept for recovery.
 */
int eng_member_wps(struct member *m, const struct za_zone *z, unsigned nr)
{
	unsigned i;
	void *p;

	p = mmap(NULL, (size_t)nr * sizeof(*m->zwp), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -ENOMEM;
	m->zwp = p;
	/* A FULL zone's pointer is its capacity: where FINISH leaves it. */
	for (i = 0; i < nr; i++)
		m->zwp[i] = z[i].cond == ZA_ZONE_COND_FULL ?
				    z[i].start_bytes + z[i].cap_bytes :
				    z[i].wp_bytes;
	return 0;
}

void eng_member_wps_free(struct member *m)
{
	if (m->zwp)
		munmap(m->zwp, (size_t)m->nr_zones * sizeof(*m->zwp));
	m->zwp = NULL;
}

static int member_init(struct za_engine *e, unsigned idx, struct za_dev *dev,
		       uint64_t min_slot)
{
	struct member *m = &e->m[idx];
	const struct za_dev_caps *c = &dev->caps;
	struct za_zone *z;
	unsigned nr, i, lim;
	int ret;

	m->dev = dev;
	if (c->lblock_bytes != 4096 || c->write_gran_bytes > 4096 ||
	    4096 % c->write_gran_bytes) {
		za_log_err("%s: block %u / write granularity %u: zarray needs "
			   "4096-byte blocks and a granularity dividing 4096",
			   dev->path, c->lblock_bytes, c->write_gran_bytes);
		return -EINVAL;
	}
	ret = za_dev_report_all(dev, &z, &nr);
	if (ret) {
		za_log_err("%s: zone report failed: %s", dev->path,
			   strerror(-ret));
		return ret;
	}
	m->nr_zones = nr;
	m->zone_bytes = c->zone_size_bytes;
	m->zkind = calloc(nr, 1);
	if (!m->zkind) {
		free(z);
		return -ENOMEM;
	}
	ret = member_caps(m, z, nr);
	if (!ret && e->keep_wps)
		ret = eng_member_wps(m, z, nr);
	if (ret) {
		free(z);
		return ret;
	}
	for (i = 0; i < nr; i++) {
		if (i < ZA_SB_ZONES || z[i].type == ZA_ZONE_TYPE_CNV)
			m->zkind[i] = Z_RESERVED;
		else if (z[i].cond == ZA_ZONE_COND_OFFLINE ||
			 z[i].cond == ZA_ZONE_COND_READONLY)
			m->zkind[i] = Z_BAD;
		else if (z[i].cond != ZA_ZONE_COND_EMPTY)
			m->zkind[i] = Z_USED;
		else if (z[i].cap_bytes < min_slot)
			m->zkind[i] = Z_BAD; /* too small for one stripe */
		else {
			m->zkind[i] = Z_FREE;
			m->free_zones++;
		}
	}
	free(z);
	eng_member_zstats(m);
	lim = c->max_active_zones;
	if (c->max_open_zones && (!lim || c->max_open_zones < lim))
		lim = c->max_open_zones;
	/* The superblock zones may stay open/active: leave them room. */
	m->limit = !lim ? ~0u : lim > ZA_SB_ZONES + 1 ? lim - ZA_SB_ZONES : 1;
	if (c->max_io_bytes < e->io_max)
		e->io_max = c->max_io_bytes & ~4095u;
	return 0;
}

static void stream_fini(struct stream *st)
{
	struct za_stripe_w *s;

	while ((s = st->pool)) {
		st->pool = s->next;
		free(s->buf);
		free(s->lbas);
		free(s->reqs);
		free(s->hdr);
		free(s->col_dev);
		free(s->col_off);
		free(s->src);
		free(s);
	}
	za_ec_free(st->ec);
	za_ec_free(st->prep_ec);
	st->ec = NULL;
	st->prep_ec = NULL;
}

static int stream_init(struct za_engine *e, struct stream *st,
		       const struct za_geom *g, unsigned max_segs)
{
	unsigned i;
	int ret;

	memset(st, 0, sizeof(*st));
	ret = za_stripe_layout_init(&st->l, g);
	if (ret)
		return ret;
	for (i = 0; i < e->nr_members; i++)
		if (e->m[i].dev &&
		    st->l.chunk_bytes % e->m[i].dev->caps.write_gran_bytes)
			return -EINVAL;
	ret = za_ec_new(st->l.k, st->l.p, &st->ec);
	if (ret)
		return ret;
	st->max_segs = max_segs;
	st->parts = (unsigned)((st->l.slot_bytes + e->io_max - 1) / e->io_max);
	return 0;
}

int za_engine_new(struct za_io *io, const struct za_engine_params *prm,
		  struct za_engine **out)
{
	struct za_stripe_layout l;
	struct za_engine *e;
	unsigned i;
	int ret;

	if (!prm->nr_members || prm->nr_members > ZA_SB_MAX_MEMBERS)
		return -EINVAL;
	ret = za_stripe_layout_init(&l, &prm->geom);
	if (ret)
		return ret;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->io = io;
	e->uuid = prm->array_uuid;
	e->progress = prm->progress;
	e->keep_wps = prm->recover;
	e->seq = prm->next_seq;
	e->next_seg_id = prm->next_seg_id;
	e->next_group_id = prm->next_seg_id;
	e->inflight_per_seg = prm->inflight_per_seg ? prm->inflight_per_seg : 4;
	e->max_read_errors = prm->max_read_errors;
	e->member_failed = prm->member_failed;
	e->priv = prm->priv;
	e->io_max = 1u << 30;
	e->nr_members = prm->nr_members;
	/* Fixed: member pointers stay valid, and absent columns index the
	 * last entry (no device, never readable). */
	e->m = calloc(M_SLOTS, sizeof(*e->m));
	/* 4 MiB of address space; only the rows of members in use are
	 * ever touched. */
	e->pairs = calloc((size_t)ZA_SB_MAX_MEMBERS * ZA_SB_MAX_MEMBERS,
			  sizeof(*e->pairs));
	e->hash_size = e->ghash_size = HASH_MIN;
	e->hash = calloc(e->hash_size, sizeof(*e->hash));
	e->ghash = calloc(e->ghash_size, sizeof(*e->ghash));
	if (!e->m || !e->pairs || !e->hash || !e->ghash) {
		ret = -ENOMEM;
		goto err_tables;
	}
	e->m[ZA_STRIPE_MEMBER_ABSENT].state = ZA_MEMBER_REMOVED;
	for (i = 0; i < prm->nr_members; i++) {
		e->m[i].state = prm->states[i];
		if (!prm->devs[i]) {
			if (e->m[i].state == ZA_MEMBER_ONLINE ||
			    e->m[i].state == ZA_MEMBER_DRAINING)
				e->m[i].state = ZA_MEMBER_MISSING;
			continue;
		}
		/* Zones that cannot hold one 8 KiB journal stripe are bad. */
		ret = member_init(e, i, prm->devs[i], 8192);
		if (ret)
			goto err_members;
	}
	if (e->io_max < 4096) {
		ret = -EINVAL;
		goto err_members;
	}
	ret = stream_init(e, &e->streams[0], &prm->geom, prm->max_group_segs);
	if (ret)
		goto err_members;
	e->nr_streams = 1;
	if (!prm->inline_prepare) {
		/* The data stream's coder for the worker (one per thread). */
		ret = za_ec_new(l.k, l.p, &e->streams[0].prep_ec);
		if (!ret)
			ret = za_worker_new(io, &e->prep);
		if (ret) {
			za_log_warn("engine: no worker thread (%s); data "
				    "stripes are prepared on the loop",
				    strerror(-ret));
			e->prep = NULL;
		}
	}
	*out = e;
	return 0;

err_members:
	for (i = 0; i < prm->nr_members; i++) {
		free(e->m[i].zkind);
		free(e->m[i].zcap_blk);
		eng_member_wps_free(&e->m[i]);
	}
err_tables:
	free(e->hash);
	free(e->ghash);
	free(e->m);
	free(e->pairs);
	free(e);
	return ret;
}

int za_engine_stream_add(struct za_engine *e, const struct za_geom *g,
			 unsigned max_segs, unsigned *id)
{
	int ret;

	if (e->nr_streams == ZA_ENGINE_MAX_STREAMS)
		return -ENOSPC;
	ret = stream_init(e, &e->streams[e->nr_streams], g, max_segs);
	if (ret)
		return ret;
	e->streams[e->nr_streams].id = e->nr_streams;
	*id = e->nr_streams++;
	return 0;
}

void za_engine_free(struct za_engine *e)
{
	unsigned i;

	if (!e)
		return;
	/* Before the stripes it may hold are freed with their streams. */
	za_worker_free(e->prep);
	for (i = 0; i < e->hash_size; i++) {
		struct za_segment *g = e->hash[i], *n;

		for (; g; g = n) {
			n = g->hnext;
			free(g->fin);
			free(g);
		}
	}
	for (i = 0; i < e->ghash_size; i++) {
		struct group *gr = e->ghash[i], *gn;

		for (; gr; gr = gn) {
			gn = gr->hnext;
			free(gr->segs);
			free(gr);
		}
	}
	free(e->hash);
	free(e->ghash);
	for (i = 0; i < e->nr_streams; i++)
		stream_fini(&e->streams[i]);
	for (i = 0; i < e->nr_members; i++) {
		free(e->m[i].zkind);
		free(e->m[i].zcap_blk);
		eng_member_wps_free(&e->m[i]);
	}
	eng_quar_clear(&e->quar);
	eng_quar_clear(&e->rec_quar);
	free(e->m);
	free(e->pairs);
	free(e);
}

bool za_engine_busy(const struct za_engine *e)
{
	unsigned i;

	for (i = 0; i < e->nr_streams; i++)
		if (e->streams[i].pend_head)
			return true;
	return e->inflight || e->fin_pending || e->reads || e->rel_pending ||
	       e->rebuilds;
}

const struct za_stripe_layout *za_engine_layout(const struct za_engine *e)
{
	return &e->streams[0].l;
}

const struct za_stripe_layout *
za_engine_stream_layout(const struct za_engine *e, unsigned id)
{
	assert(id < e->nr_streams);
	return &e->streams[id].l;
}

/* ---- members: add, drain, fail ---- */

void eng_member_fail(struct za_engine *e, unsigned idx, int err, bool notify)
{
	struct member *m = &e->m[idx];
	unsigned i, j, c;

	if (m->state == ZA_MEMBER_FAILED || m->state == ZA_MEMBER_REMOVED)
		return;
	m->state = ZA_MEMBER_FAILED;
	za_log_err("%s: member %u failed (%s): excluded from new segments",
		   m->dev ? m->dev->path : "(missing)", idx, strerror(-err));
	/* Groups still taking stripes on it stop now (invariant 4). */
	for (i = 0; i < e->nr_streams; i++) {
		struct group *grp = e->streams[i].cur;
		bool has = false;

		if (!grp)
			continue;
		for (j = 0; j < grp->w; j++)
			for (c = 0; c < e->streams[i].l.width; c++)
				has |= grp->segs[j]->member[c] == idx;
		if (has)
			eng_group_stop(e, grp);
	}
	if (notify && e->member_failed)
		e->member_failed(e, idx, err, e->priv);
}

int za_engine_member_add(struct za_engine *e, struct za_dev *dev, unsigned *idx)
{
	unsigned n = e->nr_members, i;
	struct member *m;
	int ret;

	/* e->m never moves (M_SLOTS), so column rebuilds running keep their
	 * member pointers: a member is added whenever it comes. */
	if (n >= ZA_SB_MAX_MEMBERS)
		return -ENOSPC;
	/* Stripe buffers are split for the engine's I/O size already. */
	if ((dev->caps.max_io_bytes & ~4095u) < e->io_max) {
		za_log_err("%s: largest I/O %u bytes, below the array's %u",
			   dev->path, dev->caps.max_io_bytes, e->io_max);
		return -EINVAL;
	}
	for (i = 0; i < e->nr_streams; i++)
		if (e->streams[i].l.chunk_bytes % dev->caps.write_gran_bytes)
			return -EINVAL;
	m = &e->m[n]; /* e->m has room for every member index */
	memset(m, 0, sizeof(*m));
	m->state = ZA_MEMBER_ONLINE;
	ret = member_init(e, n, dev, 8192);
	if (ret) {
		free(e->m[n].zkind);
		free(e->m[n].zcap_blk);
		eng_member_wps_free(&e->m[n]);
		memset(&e->m[n], 0, sizeof(e->m[n]));
		return ret;
	}
	e->nr_members = n + 1;
	*idx = n;
	za_log_info("%s: member %u added: %u free zones", dev->path, n,
		    e->m[n].free_zones);
	/* A degraded group taking stripes stops: the next one may be full
	 * width now, and its absent columns can be rebuilt once sealed. */
	for (i = 0; i < e->nr_streams; i++)
		if (e->streams[i].cur && eng_group_degraded(e->streams[i].cur))
			eng_group_stop(e, e->streams[i].cur);
	eng_pump(e);
	return 0;
}

int za_engine_member_drain(struct za_engine *e, unsigned idx)
{
	struct member *m = &e->m[idx];
	unsigned i, j, c;

	assert(idx < e->nr_members);
	if (m->state != ZA_MEMBER_ONLINE || !m->dev)
		return -EINVAL;
	m->state = ZA_MEMBER_DRAINING;
	za_log_info("%s: member %u draining: no new segments; its columns "
		    "move to other members",
		    m->dev->path, idx);
	/* Groups still taking stripes on it stop now, as for a failure. */
	for (i = 0; i < e->nr_streams; i++) {
		struct group *grp = e->streams[i].cur;
		bool has = false;

		if (!grp)
			continue;
		for (j = 0; j < grp->w; j++)
			for (c = 0; c < e->streams[i].l.width; c++)
				has |= grp->segs[j]->member[c] == idx;
		if (has)
			eng_group_stop(e, grp);
	}
	eng_pump(e);
	return 0;
}

int za_engine_member_undrain(struct za_engine *e, unsigned idx)
{
	struct member *m = &e->m[idx];

	assert(idx < e->nr_members);
	if (m->state != ZA_MEMBER_DRAINING || !m->dev)
		return -EINVAL;
	m->state = ZA_MEMBER_ONLINE;
	za_log_info("%s: member %u in service again: new segments may use it",
		    m->dev->path, idx);
	eng_pump(e);
	return 0;
}

void za_engine_member_fail(struct za_engine *e, unsigned idx, int err)
{
	assert(idx < e->nr_members);
	eng_member_fail(e, idx, err ? err : -EIO, true);
	eng_pump(e);
}

/*
 * One answer to a failed device request, whoever sent it (stripe writes,
 * reads, rebuilds, stripe checks), so that a member is judged by the same
 * rules wherever its errors show. The error is counted against member
 * @midx and logged with the device, @zone and offset, once per column
 * (@first: the caller's first failure of this column; a column written or
 * read in parts may fail in each). Then a write that failed with EIO or
 * ENODEV fails the member at once (invariant 4); a failed read fails it
 * when the device is gone (ENODEV) and is weighed against its read error
 * budget (eng_read_errors_check()). The caller has marked the column
 * failed already and does what its own state needs after.
 */
void eng_req_failed(struct za_engine *e, unsigned midx, uint32_t zone,
		    const struct za_dev_req *req, bool first,
		    enum eng_req_kind kind)
{
	struct member *m = &e->m[midx];
	int err = req->result;
	bool write = kind == ENG_REQ_WRITE || kind == ENG_REQ_REBUILD_WRITE;

	if (first && write) {
		m->st.err_write++;
		za_log_err("%s: zone %u offset %llu: %s write failed: %s",
			   m->dev->path, zone,
			   (unsigned long long)req->off_bytes,
			   kind == ENG_REQ_WRITE ? "stripe" : "rebuild",
			   strerror(-err));
	} else if (first) {
		m->st.err_read++;
		za_log_warn("%s: zone %u offset %llu: read failed: %s%s",
			    m->dev->path, zone,
			    (unsigned long long)req->off_bytes, strerror(-err),
			    kind == ENG_REQ_SCRUB_READ ? " (scrub)" : "");
	}
	if (write) {
		if (err == -EIO || err == -ENODEV)
			eng_member_fail(e, midx, err, true);
		return;
	}
	if (err == -ENODEV)
		eng_member_fail(e, midx, err, true);
	eng_read_errors_check(e, midx);
}

/* ---- members, segments, counters ---- */

enum za_member_state za_engine_member_state(const struct za_engine *e,
					    unsigned idx)
{
	assert(idx < e->nr_members);
	return (enum za_member_state)e->m[idx].state;
}

void za_engine_member_stats(const struct za_engine *e, unsigned idx,
			    struct za_member_stats *st)
{
	const struct member *m = &e->m[idx];
	uint32_t z;

	assert(idx < e->nr_members);
	*st = m->st;
	st->free_zones = m->free_zones;
	st->used_zones = 0;
	for (z = 0; z < m->nr_zones; z++)
		st->used_zones += m->zkind[z] == Z_USED;
}

unsigned za_engine_nr_writable(const struct za_engine *e)
{
	unsigned i, n = 0;

	for (i = 0; i < e->nr_members; i++)
		n += eng_writable(&e->m[i]);
	return n;
}

unsigned za_engine_nr_lost(const struct za_engine *e)
{
	unsigned i, n = 0;

	for (i = 0; i < e->nr_members; i++)
		n += e->m[i].state == ZA_MEMBER_FAILED ||
		     e->m[i].state == ZA_MEMBER_MISSING;
	return n;
}

int za_engine_seg_info(const struct za_engine *e, uint64_t seg_id,
		       struct za_seg_info *info)
{
	const struct za_segment *g = eng_seg_find(e, seg_id);
	unsigned i;

	if (!g)
		return -ENOENT;
	memset(info, 0, sizeof(*info));
	info->id = g->id;
	info->state = g->state;
	info->nr_stripes = g->nr_stripes;
	info->next_stripe = g->next_stripe;
	for (i = 0; i < g->st->l.width; i++) {
		info->members[i] = g->member[i];
		info->zones[i] = g->zone[i];
	}
	return 0;
}

int za_engine_group_info(const struct za_engine *e, uint64_t group_id,
			 struct za_group_info *info)
{
	const struct group *grp = eng_group_find(e, group_id);
	unsigned j;

	if (!grp)
		return -ENOENT;
	info->id = grp->id;
	info->stream = grp->st->id;
	info->nr_segs = grp->w;
	info->nr_stripes = grp->nr_stripes;
	info->next_pos = grp->next_pos;
	info->taking = grp->taking;
	info->busy = grp->releasing || grp->rebuilding;
	for (j = 0; j < grp->w; j++) {
		info->seg_ids[j] = grp->segs[j] ? grp->segs[j]->id : 0;
		if (grp->segs[j] &&
		    (grp->segs[j]->inflight || grp->segs[j]->fin_pending))
			info->busy = true;
	}
	return 0;
}

int za_engine_group_locate(const struct za_engine *e, uint64_t group_id,
			   uint64_t pos, uint64_t *seg_id, uint32_t *stripe_idx)
{
	const struct group *grp = eng_group_find(e, group_id);

	if (!grp || pos >= (uint64_t)grp->w * grp->nr_stripes ||
	    !grp->segs[pos % grp->w])
		return -ENOENT;
	*seg_id = grp->segs[pos % grp->w]->id;
	*stripe_idx = (uint32_t)(pos / grp->w);
	return 0;
}

void za_engine_get_stats(const struct za_engine *e, struct za_engine_stats *st)
{
	unsigned i;

	*st = e->st;
	st->next_seq = e->seq;
	st->open_segs = 0;
	for (i = 0; i < e->nr_streams; i++)
		if (e->streams[i].cur)
			st->open_segs += e->streams[i].cur->w;
	st->free_zones = 0;
	st->quarantined_zones = e->quar.nr;
	for (i = 0; i < e->nr_members; i++)
		if (eng_writable(&e->m[i]))
			st->free_zones += e->m[i].free_zones;
}

unsigned za_engine_member_refs(const struct za_engine *e, unsigned idx)
{
	const struct za_segment *g;
	unsigned i, c, n = 0;

	for (i = 0; i < e->hash_size; i++)
		for (g = e->hash[i]; g; g = g->hnext)
			for (c = 0; c < g->st->l.width; c++)
				n += g->member[c] == idx &&
				     !(g->dead_cols & (1ull << c));
	return n;
}

int za_engine_member_retire(struct za_engine *e, unsigned idx)
{
	struct member *m = &e->m[idx];

	assert(idx < e->nr_members);
	if (m->state != ZA_MEMBER_FAILED && m->state != ZA_MEMBER_MISSING &&
	    m->state != ZA_MEMBER_DRAINING)
		return -EINVAL;
	if (za_engine_member_refs(e, idx))
		return -EBUSY;
	m->state = ZA_MEMBER_REMOVED;
	return 0;
}

int za_engine_member_release(struct za_engine *e, unsigned idx)
{
	struct member *m = &e->m[idx];

	assert(idx < e->nr_members);
	if (m->state != ZA_MEMBER_REMOVED || !m->dev)
		return -EINVAL;
	/* Resets of the zones its moved columns left may still be on it. */
	if (m->dev->inflight)
		return -EBUSY;
	m->dev = NULL;
	return 0;
}
