// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * volume.c - the exported volume: write buffering into stripes, the
 * journal for small synced writes, flush ordering, reads through the map,
 * trims, and the space the volume may use (GC's start point, the floor
 * below which writes wait, the default and largest sizes). Garbage
 * collection and the live counters are in gc.c, checkpoints and crash
 * recovery in volume-checkpoint.c; volume-int.h is what they share.
 *
 * Big theory
 * ----------
 * A write is copied into the open stripe buffer of the data stream and the
 * map points its blocks at (buffer id, block); it is acknowledged at once
 * (NBD allows it). A full buffer is handed to the engine; when the stripe
 * is complete on all its columns, the map entries that still point at the
 * buffer are moved to (group, group position) and the buffer is released.
 *
 * A flush must not return before every write acknowledged before it is
 * durable. Every stripe submitted belongs to the current "epoch"; a flush
 * first disposes of the open buffer, then closes the epoch and waits for
 * all stripes of it and of earlier epochs, then FLUSHes every member
 * (drives have volatile caches), then answers:
 *
 *   writes: w w w w      flush#1        w w      flush#2
 *   epoch:  [---- 1 ----] close 1 [---- 2 ----] close 2
 *   flush#1 waits for epoch 1's stripes, then one device FLUSH round.
 *
 * Disposing of the open buffer: padding it to a full stripe costs
 * (k+p)/k x a whole stripe of device bytes, which is what a small synced
 * write must not cost. So when it is cheaper, each of its blocks goes to
 * the journal stream instead: k = 1, p parity columns, one 4 KiB block per
 * stripe (header + block on each of p+1 members: 2(p+1) device blocks per
 * user block, the brief's bound for a 4 KiB write + FLUSH loop), and the
 * block stays there - the journal is its home until garbage collection
 * moves it. Otherwise the buffer is padded and written as a data stripe.
 *
 * A stripe that fails for good (-ENOSPC, -EIO) keeps its buffer so that
 * reads still return what was acknowledged, and makes every later flush
 * fail: acknowledged data that cannot be made durable is reported, never
 * hidden.
 *
 * Checkpoints (volume-checkpoint.c, docs/design.md 9.5) bound crash
 * recovery: at a quiescent point the map and the unmap records are
 * written as metadata stripes of a stream of their own, and recovery
 * replays only the stripes written after the latest complete one.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "container.h"
#include "crash.h"
#include "journal.h"
#include "log.h"
#include "map.h"
#include "payload.h"
#include "volume-int.h"

struct eflush {
	struct za_engine_flush f;
	struct za_vol_req *waiters;
	struct za_volume *v;
};

/*
 * Writes wait while GC works to get space back, and while too many data
 * stripes are already on their way (backpressure: buffers are memory, and
 * a writer faster than the drives must not queue without bound).
 */
#define MAX_DATA_INFLIGHT 32u
/* Journal stripes on their way at most (one per synced small write). */
#define MAX_JRNL_INFLIGHT 64u

static uint64_t default_size(const struct za_engine *e, bool streams_added);
static void write_now(struct za_volume *v, struct za_vol_req *r);

/* ---- buffers ---- */

struct vbuf *vol_vbuf_find(struct za_volume *v, uint64_t id)
{
	struct vbuf *b;

	for (b = v->bhash[id % BUF_HASH]; b; b = b->hnext)
		if (b->id == id)
			return b;
	return NULL;
}

struct vbuf *vol_vbuf_new(struct za_volume *v, unsigned stream)
{
	struct vbuf *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	b->s = za_engine_stripe_get_stream(v->eng, stream);
	if (!b->s) {
		free(b);
		return NULL;
	}
	b->v = v;
	b->stream = stream;
	b->id = v->next_buf_id++;
	b->hnext = v->bhash[b->id % BUF_HASH];
	v->bhash[b->id % BUF_HASH] = b;
	return b;
}

static void vbuf_drop_payloads(struct vbuf *b)
{
	while (b->nr_pl)
		za_payload_put(b->pl[--b->nr_pl]);
}

/* @b's stripe holds all its blocks itself, before it outlives its write
 * (failed, or kept for the map): the payloads are not kept for it. */
static void vbuf_own(struct vbuf *b)
{
	za_stripe_w_own(b->v->eng, b->s);
	vbuf_drop_payloads(b);
}

/* An unmap record is on the drives in @group: its ranges count there
 * (what GC must write again if it takes the group). The record's own
 * block says which: it was encoded from them. */
static void unmap_written(struct za_volume *v, struct vbuf *b, uint64_t group)
{
	struct za_journal_range r[ZA_JOURNAL_MAX_RANGES];
	unsigned nr = 0, i;

	if (za_journal_unmap_decode(za_stripe_w_block(v->eng, b->s, 0),
				    ZA_JOURNAL_BLOCK_BYTES, v->size_blocks, r,
				    &nr)) {
		assert(0 && "an unmap record we encoded does not decode");
		return;
	}
	for (i = 0; i < nr; i++)
		vol_live_add_unmap(v, group, r[i].lba, r[i].n);
}

static void vbuf_release(struct vbuf *b)
{
	struct za_volume *v = b->v;
	struct vbuf **p = &v->bhash[b->id % BUF_HASH];

	while (*p != b)
		p = &(*p)->hnext;
	*p = b->hnext;
	za_engine_stripe_put(v->eng, b->s);
	vbuf_drop_payloads(b);
	free(b);
}

static void progress(struct za_volume *v);

/* The stripe of @b is complete (or failed for good). */
static void vbuf_done(struct za_stripe_w *s, int result)
{
	struct vbuf *b = s->priv;
	struct za_volume *v = b->v;
	struct epoch *ep = b->ep;
	const struct za_stripe_layout *l =
		za_engine_stream_layout(v->eng, b->stream);
	uint32_t i, j;
	bool data = b->stream == ZA_STREAM_DATA;
	bool jrnl = b->stream == v->jstream; /* b may be freed below */

	if (result) {
		/* Logged once: every later stripe fails the same way. */
		if (!v->error)
			za_log_err("volume: a %s stripe could not be written: "
				   "%s; flushes will fail",
				   b->stream == ZA_STREAM_DATA ? "data" :
								 "journal",
				   strerror(-result));
		if (!v->error)
			v->error = result;
		b->failed = true; /* kept: reads still see the data */
		vbuf_own(b);
	} else {
		uint8_t kind = b->stream == ZA_STREAM_DATA ? ZA_MAP_DATA :
							     ZA_MAP_JOURNAL;
		uint64_t base = s->group_pos * l->data_blocks;
		struct live *lv = vol_live_get(v, s->group_id, true);
		bool stuck = false;

		if (!data)
			za_crash_point("journal-append");
		if (b->kind == ZA_STRIPE_META)
			unmap_written(v, b, s->group_id);

		/* Move each run of consecutive LBAs in one map operation. */
		for (i = 0; i < b->nr; i = j) {
			struct za_map_loc from = { .kind = ZA_MAP_BUFFER,
						   .group = b->id,
						   .pos = i };
			struct za_map_loc to = { .kind = kind,
						 .group = s->group_id,
						 .pos = base + i };
			int64_t moved;

			if (s->lbas[i] == ZA_STRIPE_LBA_NONE) { /* dead */
				j = i + 1;
				continue;
			}
			for (j = i + 1;
			     j < b->nr && s->lbas[j] == s->lbas[j - 1] + 1; j++)
				;
			moved = za_map_move(v->map, s->lbas[i], j - i, &from,
					    &to);
			if (moved < 0)
				stuck = true;
			else if (lv)
				vol_live_add(v, lv, moved);
		}
		if (stuck) {
			za_log_err("volume: out of memory updating the map; "
				   "buffer %llu kept",
				   (unsigned long long)b->id);
			vbuf_own(b);
		} else {
			vbuf_release(b);
		}
	}
	ep->inflight--;
	if (data)
		v->data_inflight--;
	else if (jrnl)
		v->jrnl_inflight--;
	progress(v);
	vol_ckpt_kick(v);
	vol_gc_kick(v);
	vol_resume_stalled(v);
}

void vol_vbuf_submit(struct za_volume *v, struct vbuf *b)
{
	b->ep = v->ep_tail;
	b->ep->inflight++;
	if (b->stream == ZA_STREAM_DATA)
		v->data_inflight++;
	else if (b->stream == v->jstream)
		v->jrnl_inflight++;
	b->s->nr_blocks = b->nr;
	b->s->kind = b->kind ? b->kind : ZA_STRIPE_DATA;
	b->s->done = vbuf_done;
	b->s->priv = b;
	v->ck.since_blocks += b->nr;
	v->ck.gen++;
	if (b->stream == ZA_STREAM_DATA) {
		v->st.data_stripes++;
		if (b->nr < za_engine_layout(v->eng)->data_blocks)
			v->st.padded_stripes++;
	} else {
		v->st.journal_blocks++;
	}
	za_engine_write(v->eng, b->s);
}

/*
 * Every request of the volume's user passes here first, and arms GC while
 * idle if its timer stopped (it stops when it finds nothing to do, so an
 * idle daemon sleeps). Never before the first request: until the volume
 * serves, recovery may still be building the map and the live counters,
 * and a group whose counter is not built yet looks dead (a victim
 * released then was data lost: tests/lifecycle-daemon.sh, test_gc_idle).
 */
static void user_op(struct za_volume *v)
{
	v->user_ops++;
	if (v->gc.idle_ms && !v->gc.idle_on)
		vol_gc_idle_set(v, true);
}

/* ---- construction ---- */

int za_volume_new(struct za_io *io, const struct za_volume_params *p,
		  struct za_volume **out)
{
	const struct za_stripe_layout *dl = za_engine_layout(p->eng);
	struct za_geom jg = { 0 };
	struct za_volume *v;
	int ret;

	if (p->size_bytes % 4096)
		return -EINVAL;
	v = calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	v->io = io;
	v->eng = p->eng;
	v->size_blocks = p->size_bytes / 4096;
	v->next_buf_id = 1;
	jg.k = 1;
	jg.p = (uint8_t)dl->p;
	jg.matrix = ZA_EC_MATRIX_CAUCHY;
	jg.stripe_rows = 1;
	jg.chunk_bytes = 4096;
	jg.lblock_bytes = 4096;
	jg.hdr_bytes = 4096;
	ret = za_engine_stream_add(p->eng, &jg, 1, &v->jstream);
	if (ret)
		goto err_free;
	/* Checkpoints: the journal's geometry, a stream of their own so that
	 * their groups hold nothing else (docs/design.md 9.5). */
	ret = za_engine_stream_add(p->eng, &jg, 1, &v->ck.stream);
	if (ret)
		goto err_free;
	za_engine_stream_set_rescan(p->eng, v->ck.stream);
	v->ck.interval_blocks = p->ckpt_interval_bytes / 4096;
	if (p->ckpt_interval_bytes == UINT64_MAX)
		v->ck.interval_blocks = UINT64_MAX;
	v->ck.window = p->ckpt_window ? p->ckpt_window : 8;
	v->ck.recover_full = p->recover_full;
	v->ck.next_id = 1;
	v->ck.anchor = p->anchor;
	v->ck.anchor_priv = p->anchor_priv;
	v->ck.anchor_rec = p->anchor_rec;
	v->ck.no_table_recovery = p->no_table_recovery;
	v->mc.limit_bytes = p->map_cache_bytes;
	/* The default size counts both write sets: add them first. */
	if (!p->size_bytes)
		v->size_blocks = default_size(p->eng, true) / 4096;
	if (!v->size_blocks) {
		ret = -ENOSPC;
		goto err_free;
	}
	ret = vol_live_tab_init(&v->lt);
	if (ret)
		goto err_live;
	ret = za_map_new(&v->map);
	if (ret)
		goto err_live;
	v->ep_head = v->ep_tail = calloc(1, sizeof(*v->ep_head));
	if (!v->ep_head) {
		ret = -ENOMEM;
		goto err_map;
	}
	/* The first write must see how much space there is (and recovery
	 * looks again, once it knows what the drives hold). */
	v->critical = vol_space_critical(v);
	v->gc.idle_ms = p->idle_gc_ms; /* armed by the first request */
	za_job_init(&v->gc.job, io, "gc", 0, vol_gc_job_timer);
	*out = v;
	return 0;

err_map:
	za_map_free(v->map);
err_live:
	free(v->lt.h);
	free(v->lt.gi);
err_free:
	free(v);
	return ret;
}

bool za_volume_busy(const struct za_volume *v)
{
	const struct epoch *ep;

	for (ep = v->ep_head; ep; ep = ep->next)
		if (ep->inflight || ep->waiters)
			return true;
	return v->reads || v->eflushes || v->gc.active || v->stalled_head ||
	       v->mc.reads || v->mc.waits || v->ck.cleaning ||
	       v->gc.ckpt_releases || za_job_busy(&v->gc.job) ||
	       v->ck.state != CK_IDLE;
}

void za_volume_free(struct za_volume *v)
{
	unsigned i;

	if (!v)
		return;
	assert(!za_volume_busy(v));
	if (v->gc.idle_on)
		vol_gc_idle_set(v, false);
	for (i = 0; i < BUF_HASH; i++)
		while (v->bhash[i])
			vbuf_release(v->bhash[i]);
	if (v->lt.h)
		vol_live_clear(v);
	free(v->lt.h);
	free(v->lt.gi);
	while (v->ep_head) {
		struct epoch *ep = v->ep_head;

		v->ep_head = ep->next;
		free(ep);
	}
	free(v->gc.ext);
	vol_map_cache_free(v);
	vol_ckpt_free(v);
	za_map_free(v->map);
	free(v);
}

uint64_t za_volume_size(const struct za_volume *v)
{
	return v->size_blocks * 4096;
}

static int check_range(const struct za_volume *v, uint64_t off, uint64_t len)
{
	uint64_t size = v->size_blocks * 4096;

	if (off % 4096 || len % 4096 || len > size || off > size - len)
		return -EINVAL;
	return 0;
}

void vol_req_init(struct za_volume *v, struct za_vol_req *r)
{
	r->vol = v;
	r->next = NULL;
	r->pending = 0;
	r->result = 0;
	r->fua_flush = false;
	r->op = 0;
	r->payload = NULL;
	r->own_buf = NULL;
	r->mw.since = 0;
}

/* ---- flush ---- */

static void eflush_done(struct za_engine_flush *f, int result)
{
	struct eflush *ef = f->priv;
	struct za_volume *v = ef->v;
	struct za_vol_req *r;

	v->eflushes--;
	if (!result && v->error)
		result = -EIO;
	while ((r = ef->waiters)) {
		ef->waiters = r->next;
		r->done(r, result);
	}
	free(ef);
}

/*
 * Retire epochs whose stripes are all complete; their flushes get one
 * device FLUSH round, then their answer.
 */
static void progress(struct za_volume *v)
{
	struct za_vol_req *batch = NULL, *r;
	struct eflush *ef;

	while (v->ep_head != v->ep_tail && !v->ep_head->inflight) {
		struct epoch *ep = v->ep_head;

		while ((r = ep->waiters)) {
			ep->waiters = r->next;
			r->next = batch;
			batch = r;
		}
		v->ep_head = ep->next;
		free(ep);
	}
	if (!batch)
		return;
	ef = calloc(1, sizeof(*ef));
	if (!ef || v->error) {
		int err = ef ? -EIO : -ENOMEM;

		free(ef);
		while ((r = batch)) {
			batch = r->next;
			r->done(r, err);
		}
		return;
	}
	ef->v = v;
	ef->waiters = batch;
	ef->f.done = eflush_done;
	ef->f.priv = ef;
	v->eflushes++;
	za_engine_flush(v->eng, &ef->f);
}

/* Send the open buffer to the drives: journal or padded stripe. */
static void seal_open_buffer(struct za_volume *v, bool force_stripe)
{
	const struct za_stripe_layout *dl = za_engine_layout(v->eng);
	struct vbuf *cur = v->cur;
	uint64_t cost_journal, cost_stripe;
	uint32_t b;

	if (!cur || !cur->nr)
		return;
	v->cur = NULL;
	/* Device blocks written: header + block on p+1 columns per block,
	 * against a whole stripe with its headers. */
	cost_journal = (uint64_t)cur->nr * 2 * (dl->p + 1);
	cost_stripe = (uint64_t)dl->width * (dl->slot_bytes / 4096);
	/* Garbage collection moving journal blocks must not journal them
	 * again: it always writes stripes. */
	if (force_stripe || cost_journal >= cost_stripe) {
		vol_vbuf_submit(v, cur);
		return;
	}
	for (b = 0; b < cur->nr; b++) {
		struct za_map_loc from = { .kind = ZA_MAP_BUFFER,
					   .group = cur->id,
					   .pos = b };
		struct za_map_loc to = { .kind = ZA_MAP_BUFFER, .pos = 0 };
		uint64_t lba = cur->s->lbas[b];
		struct vbuf *jb;
		int64_t moved;

		if (lba == ZA_STRIPE_LBA_NONE)
			continue; /* overwritten or unmapped since */
		jb = vol_vbuf_new(v, v->jstream);
		if (!jb) {
			/* No memory for the journal: pad the stripe instead. */
			za_log_warn("volume: journal buffer allocation failed; "
				    "writing a padded stripe");
			vol_vbuf_submit(v, cur);
			return;
		}
		to.group = jb->id;
		moved = za_map_move(v->map, lba, 1, &from, &to);
		if (moved != 1) {
			/* Overwritten later in the same buffer: dead. */
			vbuf_release(jb);
			continue;
		}
		memcpy(za_stripe_w_block(v->eng, jb->s, 0),
		       za_stripe_w_data(v->eng, cur->s, b), 4096);
		jb->s->lbas[0] = lba;
		jb->nr = 1;
		vol_vbuf_submit(v, jb);
	}
	vbuf_release(cur);
}

void vol_flush_enqueue(struct za_volume *v, struct za_vol_req *r)
{
	struct epoch *ep = calloc(1, sizeof(*ep));

	if (!ep) {
		r->done(r, -ENOMEM);
		return;
	}
	v->st.flushes++;
	seal_open_buffer(v, r->internal);
	r->next = v->ep_tail->waiters;
	v->ep_tail->waiters = r;
	v->ep_tail->next = ep;
	v->ep_tail = ep;
	progress(v);
}

void za_volume_flush(struct za_volume *v, struct za_vol_req *r)
{
	user_op(v);
	vol_req_init(v, r);
	vol_flush_enqueue(v, r);
}

/* ---- write ---- */

/*
 * Space is managed in zones (docs/design.md 10.1): garbage collection
 * starts below gc_start free zones, user writes wait below the floor (one
 * write set: what GC needs to move one victim), and the default volume
 * size leaves a reserve above the start so that GC always finds dead
 * space to reclaim.
 *
 * za_engine_space() counts the checkpoint stream's one open segment (p+1
 * zones) as a whole write set. GC needs no room for it (checkpoint
 * garbage is released as it lies, nothing moved), so it is left out of
 * the write sets here and counted once in the default size's reserve.
 */
static uint64_t gc_write_sets(const struct za_engine_space *sp)
{
	return sp->write_set_segs > 1 ? sp->write_set_segs - 1 :
					sp->write_set_segs;
}

uint64_t vol_gc_start_segs(const struct za_engine_space *sp)
{
	uint64_t a = sp->total_segs / 10, b = 2 * gc_write_sets(sp) + 1;

	return a > b ? a : b;
}

/*
 * The floor without the stripes on their way (vol_space_critical()): GC's
 * write sets and room for a checkpoint, which below the floor goes first
 * to free the zones in quarantine. That is one segment of its stream, or
 * as many as the last one took: with small zones a checkpoint written
 * whole is 16 stripes where a segment holds 9, and at a floor counting
 * one it took the segment GC needed next - a victim then found no room
 * and a data stripe failed with ENOSPC (test_ckpt_below_floor, 1 run in
 * 180).
 */
uint64_t vol_gc_floor_segs(const struct za_volume *v,
			   const struct za_engine_space *sp)
{
	return gc_write_sets(sp) + vol_ckpt_segs(v, sp);
}

uint64_t za_volume_floor_segs(const struct za_volume *v)
{
	struct za_engine_space sp;

	za_engine_space(v->eng, &sp);
	return vol_gc_floor_segs(v, &sp);
}

/*
 * Below one write set of free segments, plus room for the data stripes
 * already on their way: each may still need a new segment, and with small
 * zones (a few stripes per segment) MAX_DATA_INFLIGHT stripes are several
 * segments. Counting only the write set lets those stripes, then the
 * checkpoint stream, take the last free segment while GC waits to move a
 * victim, and data stripes fail with -ENOSPC (NEWS: seed 5010).
 */
/* Stripes of @per_seg a segment that @segs segments hold: 1 to @max. */
static uint32_t credit(uint64_t segs, uint64_t per_seg, uint32_t max)
{
	uint64_t n = segs * per_seg;

	return n < 1 ? 1 : n < max ? (uint32_t)n : max;
}

bool vol_space_critical(struct za_volume *v)
{
	const struct za_stripe_layout *dl = za_engine_layout(v->eng);
	const struct za_stripe_layout *jl =
		za_engine_stream_layout(v->eng, v->jstream);
	struct za_engine_space sp;
	uint64_t per_seg, jper_seg, on_way, floor, above;

	za_engine_space(v->eng, &sp);
	per_seg = sp.data_blocks_per_seg / dl->data_blocks;
	if (!per_seg)
		per_seg = 1;
	/*
	 * Journal stripes take room too: a deep queue of small FUA writes
	 * is a journal stripe each, and counted nowhere they took the
	 * segments below the floor while GC ran (test_ckpt_below_floor).
	 * A journal segment (p+1 zones) is counted as a whole data one.
	 */
	jper_seg = per_seg * dl->slot_bytes / jl->slot_bytes;
	if (!jper_seg)
		jper_seg = 1;
	on_way = (v->data_inflight + per_seg - 1) / per_seg +
		 (v->jrnl_inflight + jper_seg - 1) / jper_seg;
	floor = vol_gc_floor_segs(v, &sp);
	/* And no more stripes on their way than the space above the floor
	 * holds (always one, so that writes never wait on nothing). */
	above = sp.free_segs > floor ? sp.free_segs - floor : 0;
	v->data_credit = credit(above, per_seg, MAX_DATA_INFLIGHT);
	v->jrnl_credit = credit(above, jper_seg, MAX_JRNL_INFLIGHT);
	return sp.free_segs < floor + on_way;
}

static uint64_t default_size(const struct za_engine *e, bool streams_added)
{
	struct za_engine_space sp;
	uint64_t reserve, a, b, ws;

	za_engine_space(e, &sp);
	/* Before the volume's streams exist: the journal's write set. */
	ws = streams_added ? gc_write_sets(&sp) : sp.write_set_segs + 1;
	a = sp.total_segs * 15 / 100;
	b = 3 * ws + 2 + 1; /* + 1: the checkpoint stream's segment */
	reserve = a > b ? a : b;
	if (sp.free_segs <= reserve)
		return 0;
	return (sp.free_segs - reserve) * sp.data_blocks_per_seg * 4096;
}

uint64_t za_volume_default_size(const struct za_engine *e)
{
	return default_size(e, false);
}

/*
 * za_volume_max_size()'s formula over the members writable once @change
 * is made: every zone of theirs, used or free, since the user may fill
 * the whole volume after a drain, less the same reserve.
 */
uint64_t za_volume_max_size_if(const struct za_volume *v,
			       const enum za_space_change *change)
{
	struct za_engine_space sp;
	uint64_t reserve, a, b;

	za_engine_space_if(v->eng, change, &sp);
	a = sp.total_segs * 15 / 100;
	b = 3 * gc_write_sets(&sp) + 2 + 1;
	reserve = a > b ? a : b;
	if (sp.total_segs <= reserve)
		return 0;
	return (sp.total_segs - reserve) * sp.data_blocks_per_seg * 4096;
}

/*
 * Below the floor with a victim being moved, GC goes first: nothing else
 * may take free zones (user writes, checkpoint parts) until the victim's
 * live data has its room and the victim is released.
 */
bool vol_gc_goes_first(const struct za_volume *v)
{
	return v->critical && v->gc.active;
}

/*
 * Below the floor, a checkpoint written to free the zones in quarantine
 * goes first as well: GC waits for it (vol_gc_kick()), and writes let in
 * meanwhile took the last free zones (test_gc_small_zones_deep_queue).
 */
static bool ckpt_goes_first(const struct za_volume *v)
{
	return v->critical && v->ck.for_space && v->ck.state != CK_IDLE;
}

static bool can_write(const struct za_volume *v)
{
	return !vol_gc_goes_first(v) && !ckpt_goes_first(v) &&
	       v->data_inflight < v->data_credit &&
	       v->jrnl_inflight < v->jrnl_credit && v->ck.state != CK_QUIESCE &&
	       !vol_map_full(v);
}

/* What a held-back request is (za_vol_req.op). */
enum { OP_WRITE = 0, OP_TRIM = 1, OP_ZEROES = 2 };

/*
 * Hold @r back until vol_resume_stalled(). The caller must not touch @r
 * after: a checkpoint started here may let it in at once.
 */
static void stall(struct za_volume *v, struct za_vol_req *r)
{
	v->st.writes_stalled++;
	r->next = NULL;
	if (v->stalled_tail)
		v->stalled_tail->next = r;
	else
		v->stalled_head = r;
	v->stalled_tail = r;
	/*
	 * Held for a checkpoint that is due (vol_map_full()): it must be
	 * under way. A write that waited for a map page came back here
	 * without asking write_admitted(), and with nothing else in flight
	 * (the writes before it buffered in a stripe not yet full) nothing
	 * started it: zarrayd idle, the write never answered (seed 7010,
	 * test_map_cache_write_held).
	 */
	if (vol_map_full(v))
		vol_ckpt_kick(v);
}

static void unmap_now(struct za_volume *v, struct za_vol_req *r);

void vol_resume_stalled(struct za_volume *v)
{
	struct za_vol_req *r;

	v->critical = vol_space_critical(v);
	while ((r = v->stalled_head) && can_write(v)) {
		v->stalled_head = r->next;
		if (!v->stalled_head)
			v->stalled_tail = NULL;
		if (r->op == OP_WRITE)
			write_now(v, r);
		else
			unmap_now(v, r);
	}
}

/*
 * Is a write asked for now taken at once (write_now()), or held back?
 * Below the floor GC goes first (vol_gc_kick() also looks at the space
 * again): once started, it holds writes back until the victim's live data
 * has its room. za_volume_write_copies() asks here too, and the write
 * that follows gets the same answer: were GC started only by the write,
 * a caller told "copied at once" would see its write held back, its
 * buffer (the NBD receive ring's bytes, lent for the call only) reused
 * and the next payload written in its place (NEWS: seed 7028).
 */
static bool write_admitted(struct za_volume *v)
{
	if (v->critical)
		vol_gc_kick(v);
	/* Held for a checkpoint that is due: nothing else may start it
	 * once no stripe is in flight. */
	if (vol_map_full(v))
		vol_ckpt_kick(v);
	return !v->stalled_head && can_write(v);
}

void za_volume_write(struct za_volume *v, struct za_vol_req *r, uint64_t off,
		     uint64_t len, const void *buf, bool fua)
{
	za_volume_write_ref(v, r, off, len, buf, fua, NULL);
}

void za_volume_write_ref(struct za_volume *v, struct za_vol_req *r,
			 uint64_t off, uint64_t len, const void *buf, bool fua,
			 struct za_payload *pl)
{
	int ret;

	user_op(v);
	vol_req_init(v, r);
	ret = check_range(v, off, len);
	if (ret) {
		r->done(r, ret);
		return;
	}
	r->off = off;
	r->len = len;
	r->buf = buf;
	r->fua = fua;
	if (!write_admitted(v)) {
		stall(v, r);
		return;
	}
	r->payload = pl;
	write_now(v, r);
	r->payload = NULL;
}

void za_volume_let_go(struct za_volume *v)
{
	/* Submitted stripes drop theirs when written; the open buffer
	 * waits for more writes. */
	if (v->cur && v->cur->nr_pl)
		vbuf_own(v->cur);
}

bool za_volume_write_copies(struct za_volume *v)
{
	/* write_now() copies (or refers to a kept payload) at once. */
	return write_admitted(v);
}

/* May @b refer to blocks of @pl instead of copying them? Takes a
 * reference for @b the first time. */
static bool vbuf_refer(struct vbuf *b, struct za_payload *pl)
{
	if (!pl)
		return false;
	if (b->nr_pl && b->pl[b->nr_pl - 1] == pl)
		return true; /* a payload fills the buffer in order */
	if (b->nr_pl == VBUF_MAX_PAYLOADS)
		return false;
	b->pl[b->nr_pl++] = za_payload_get(pl);
	return true;
}

/* A write is done with: its copy of the buffer (if it waited) goes. */
static void write_end(struct za_vol_req *r, int result)
{
	free(r->own_buf);
	r->own_buf = NULL;
	r->done(r, result);
}

/* The map page a write waited for is in (or failed). */
static void write_paged(struct za_vol_mwait *w, int err)
{
	struct za_vol_req *r = container_of(w, struct za_vol_req, mw);
	struct za_volume *v = r->vol;

	v->mc.waits--;
	if (err) {
		write_end(r, err);
		return;
	}
	/* Taken again as if it came now: a checkpoint's quiet point or
	 * the space may hold it back meanwhile. */
	if (v->stalled_head || !can_write(v)) {
		stall(v, r);
		return;
	}
	write_now(v, r);
}

/*
 * Does the write need map pages that left memory (design.md 9.8)? Then it
 * waits for them with a copy of its buffer, which the caller may reuse as
 * soon as this returns (za_volume_write_copies() said it would be
 * copied). Returns true when it waits (or failed).
 */
static bool write_waits(struct za_volume *v, struct za_vol_req *r)
{
	uint64_t lba = r->off / 4096, n = r->len / 4096;
	int ret;

	if (za_map_whole(v->map) || !za_map_need(v->map, lba, n, true))
		return false;
	if (!r->own_buf) {
		r->own_buf = malloc(r->len);
		if (!r->own_buf) {
			r->done(r, -ENOMEM);
			return true;
		}
		memcpy(r->own_buf, r->buf, r->len);
		r->buf = r->own_buf;
		r->payload = NULL;
	}
	r->mw.fn = write_paged;
	ret = vol_map_fault(v, lba, n, true, &r->mw);
	if (ret == 1) {
		v->mc.waits++;
		return true;
	}
	if (ret < 0) {
		write_end(r, ret);
		return true;
	}
	return false;
}

static void write_now(struct za_volume *v, struct za_vol_req *r)
{
	const struct za_stripe_layout *dl = za_engine_layout(v->eng);
	const uint8_t *src;
	uint64_t lba = r->off / 4096, n = r->len / 4096;
	int ret;

	r->next = NULL;
	if (write_waits(v, r))
		return;
	src = r->buf;
	while (n) {
		struct za_map_loc loc = { .kind = ZA_MAP_BUFFER };
		uint32_t take, i;

		if (!v->cur) {
			v->cur = vol_vbuf_new(v, ZA_STREAM_DATA);
			if (!v->cur) {
				write_end(r, -ENOMEM);
				return;
			}
		}
		take = dl->data_blocks - v->cur->nr;
		if (take > n)
			take = (uint32_t)n;
		if (vbuf_refer(v->cur, r->payload)) {
			for (i = 0; i < take; i++)
				za_stripe_w_refer(v->eng, v->cur->s,
						  v->cur->nr + i,
						  src + (uint64_t)i * 4096);
		} else {
			for (i = 0; i < take; i++)
				memcpy(za_stripe_w_block(v->eng, v->cur->s,
							 v->cur->nr + i),
				       src + (uint64_t)i * 4096, 4096);
		}
		for (i = 0; i < take; i++)
			v->cur->s->lbas[v->cur->nr + i] = lba + i;
		loc.group = v->cur->id;
		loc.pos = v->cur->nr;
		ret = za_map_set(v->map, lba, take, &loc, vol_on_dead, v);
		if (ret) {
			write_end(r, ret);
			return;
		}
		v->cur->nr += take;
		if (v->cur->nr == dl->data_blocks) {
			struct vbuf *full = v->cur;

			v->cur = NULL;
			vol_vbuf_submit(v, full);
		}
		lba += take;
		n -= take;
		src += (uint64_t)take * 4096;
	}
	v->st.user_write_bytes += r->len;
	free(r->own_buf); /* copied into the stripes */
	r->own_buf = NULL;
	if (r->fua) {
		vol_flush_enqueue(v, r);
		return;
	}
	r->done(r, 0);
}

/*
 * An unmap record: a journal stripe of kind META whose block says which
 * range reads as zeros from then on (docs/format.md, "Unmap record").
 * Written like any journal block, so it is durable with the next flush
 * and replayed in sequence order.
 */

int vol_unmap(struct za_volume *v, uint64_t lba, uint64_t n)
{
	struct za_journal_range r = { .lba = lba, .n = n };

	return vol_unmap_ranges(v, &r, 1);
}

int vol_unmap_ranges(struct za_volume *v, const struct za_journal_range *r,
		     unsigned nr)
{
	struct vbuf *jb;
	unsigned i;
	int ret = 0;

	jb = vol_vbuf_new(v, v->jstream);
	if (!jb)
		return -ENOMEM;
	ret = za_journal_unmap_encode_ranges(
		za_stripe_w_block(v->eng, jb->s, 0), r, nr);
	for (i = 0; i < nr && !ret; i++)
		ret = za_map_clear(v->map, r[i].lba, r[i].n, vol_on_dead, v);
	if (ret) {
		/* The map may be cleared in part: as a TRIM that failed, it
		 * reads as zeros or as before, block by block. */
		vbuf_release(jb);
		return ret;
	}
	jb->s->lbas[0] = ZA_STRIPE_LBA_NONE;
	jb->nr = 1;
	jb->kind = ZA_STRIPE_META;
	vol_vbuf_submit(v, jb);
	return 0;
}

/* The map page a trim or write-zeroes waited for is in (or failed). */
static void unmap_paged(struct za_vol_mwait *w, int err)
{
	struct za_vol_req *r = container_of(w, struct za_vol_req, mw);
	struct za_volume *v = r->vol;

	v->mc.waits--;
	if (err) {
		r->done(r, err);
		return;
	}
	if (v->ck.state == CK_QUIESCE) {
		stall(v, r);
		return;
	}
	unmap_now(v, r);
}

/* A trim or write-zeroes, now (once the map pages it needs are in). */
static void unmap_now(struct za_volume *v, struct za_vol_req *r)
{
	int ret = 0;

	r->next = NULL;
	if (r->len) {
		r->mw.fn = unmap_paged;
		ret = vol_map_fault(v, r->off / 4096, r->len / 4096, true,
				    &r->mw);
		if (ret == 1) {
			v->mc.waits++;
			return;
		}
	}
	if (r->len && !ret)
		ret = vol_unmap(v, r->off / 4096, r->len / 4096);
	if (ret || r->op != OP_ZEROES || !r->fua) {
		r->done(r, ret);
		return;
	}
	vol_flush_enqueue(v, r);
}

static void unmap_req(struct za_volume *v, struct za_vol_req *r, uint8_t op,
		      uint64_t off, uint64_t len, bool fua)
{
	int ret;

	user_op(v);
	vol_req_init(v, r);
	ret = check_range(v, off, len);
	if (ret) {
		r->done(r, ret);
		return;
	}
	r->op = op;
	r->off = off;
	r->len = len;
	r->fua = fua;
	/* Held back, like writes, while a checkpoint needs the map still. */
	if (v->ck.state == CK_QUIESCE) {
		stall(v, r);
		return;
	}
	unmap_now(v, r);
}

void za_volume_trim(struct za_volume *v, struct za_vol_req *r, uint64_t off,
		    uint64_t len)
{
	unmap_req(v, r, OP_TRIM, off, len, false);
}

void za_volume_write_zeroes(struct za_volume *v, struct za_vol_req *r,
			    uint64_t off, uint64_t len, bool fua)
{
	unmap_req(v, r, OP_ZEROES, off, len, fua);
}

/* ---- read ---- */

struct vread {
	struct za_read er;
	struct za_vol_req *r;
};

static void read_put(struct za_volume *v, struct za_vol_req *r, int err)
{
	if (err && !r->result)
		r->result = err;
	if (--r->pending == 0) {
		v->reads--;
		r->done(r, r->result);
	}
}

static void vread_done(struct za_read *er, int result)
{
	struct vread *vr = er->priv;
	struct za_vol_req *r = vr->r;

	free(vr);
	read_put(r->vol, r, result);
}

struct read_walk {
	struct za_volume *v;
	struct za_vol_req *r;
	uint8_t *buf;
	uint64_t lba0;
};

static int read_piece(void *priv, uint64_t lba, uint64_t n,
		      const struct za_map_loc *loc)
{
	struct read_walk *w = priv;
	uint8_t *dst = w->buf + (lba - w->lba0) * 4096;
	struct vread *vr;
	struct vbuf *b;
	uint64_t i;

	if (!loc) {
		memset(dst, 0, n * 4096);
		return 0;
	}
	if (loc->kind == ZA_MAP_BUFFER) {
		b = vol_vbuf_find(w->v, loc->group);
		assert(b); /* the map never outlives a buffer it names */
		for (i = 0; i < n; i++)
			memcpy(dst + i * 4096,
			       za_stripe_w_data(w->v->eng, b->s,
						(uint32_t)(loc->pos + i)),
			       4096);
		return 0;
	}
	vr = calloc(1, sizeof(*vr));
	if (!vr)
		return -ENOMEM;
	vr->r = w->r;
	vr->er.group_id = loc->group;
	vr->er.gpos = loc->pos;
	vr->er.nr_blocks = (uint32_t)n;
	vr->er.buf = dst;
	vr->er.done = vread_done;
	vr->er.priv = vr;
	w->r->pending++;
	za_engine_read(w->v->eng, &vr->er);
	return 0;
}

static void read_run(struct za_volume *v, struct za_vol_req *r);

/* The map page a read waited for is in (or failed). */
static void read_paged(struct za_vol_mwait *w, int err)
{
	struct za_vol_req *r = container_of(w, struct za_vol_req, mw);
	struct za_volume *v = r->vol;

	v->mc.waits--;
	if (err) {
		read_put(v, r, err);
		return;
	}
	read_run(v, r);
}

/* Once the map pages it needs are in: each piece read, or zeros. */
static void read_run(struct za_volume *v, struct za_vol_req *r)
{
	/* The caller's buffer, written to: za_volume_read() had it so. */
	struct read_walk w = { v, r, (uint8_t *)(uintptr_t)r->buf,
			       r->off / 4096 };
	int ret;

	r->mw.fn = read_paged;
	ret = vol_map_fault(v, r->off / 4096, r->len / 4096, false, &r->mw);
	if (ret == 1) {
		v->mc.waits++;
		return;
	}
	if (!ret)
		ret = za_map_walk(v->map, r->off / 4096, r->len / 4096,
				  read_piece, &w);
	read_put(v, r, ret);
}

void za_volume_read(struct za_volume *v, struct za_vol_req *r, uint64_t off,
		    uint64_t len, void *buf)
{
	int ret;

	user_op(v);
	vol_req_init(v, r);
	ret = check_range(v, off, len);
	if (ret) {
		r->done(r, ret);
		return;
	}
	v->st.user_read_bytes += len;
	v->reads++;
	r->pending = 1;
	r->off = off;
	r->len = len;
	r->buf = buf;
	read_run(v, r);
}

/* ---- stats and synchronous wrappers ---- */

void za_volume_get_stats(const struct za_volume *v, struct za_volume_stats *st)
{
	unsigned i;
	const struct vbuf *b;
	const struct live *l;
	uint64_t ckpt_parts;

	*st = v->st;
	st->live_blocks = 0;
	for (i = 0; i < v->lt.size; i++)
		for (l = v->lt.h[i]; l; l = l->next)
			st->live_blocks += l->blocks;
	/* Each checkpoint part counts one in its group's counter, to keep
	 * GC off it; it is not user data. */
	ckpt_parts = v->ck.live_nr + (v->ck.part_group ? v->ck.done_parts : 0) +
		     v->ck.pages_live;
	st->live_blocks -= ckpt_parts < st->live_blocks ? ckpt_parts :
							  st->live_blocks;
	st->buffers = 0;
	for (i = 0; i < BUF_HASH; i++)
		for (b = v->bhash[i]; b; b = b->hnext)
			st->buffers++;
	st->gc_active = v->gc.active;
	st->map_extents = za_map_extents(v->map);
	st->map_bytes = za_map_bytes(v->map);
	st->map_cache_bytes = v->mc.limit_bytes;
	st->checkpoint_seq = v->ck.live_seq;
	st->checkpoint_blocks = v->ck.live_nr;
	st->checkpoint_pages = v->ck.pages_live;
	st->anchored = v->ck.live_anchor.ckpt_id &&
		       v->ck.live_anchor.ckpt_id == v->ck.live_id;
	st->quarantined_zones = za_engine_quarantined(v->eng);
}

struct vsync {
	struct za_vol_req r;
	bool done;
	int result;
};

static void vsync_done(struct za_vol_req *r, int result)
{
	struct vsync *s = r->priv;

	s->result = result;
	s->done = true;
}

static int vsync_wait(struct za_volume *v, struct vsync *s)
{
	za_io_run_until(v->io, &s->done, 0);
	return s->result;
}

int za_volume_read_sync(struct za_volume *v, uint64_t off, uint64_t len,
			void *buf)
{
	struct vsync s = { .r = { .done = vsync_done } };

	s.r.priv = &s;
	za_volume_read(v, &s.r, off, len, buf);
	return vsync_wait(v, &s);
}

int za_volume_write_sync(struct za_volume *v, uint64_t off, uint64_t len,
			 const void *buf, bool fua)
{
	struct vsync s = { .r = { .done = vsync_done } };

	s.r.priv = &s;
	za_volume_write(v, &s.r, off, len, buf, fua);
	return vsync_wait(v, &s);
}

int za_volume_flush_sync(struct za_volume *v)
{
	struct vsync s = { .r = { .done = vsync_done } };

	s.r.priv = &s;
	za_volume_flush(v, &s.r);
	return vsync_wait(v, &s);
}

int za_volume_checkpoint_sync(struct za_volume *v)
{
	struct vsync s = { .r = { .done = vsync_done } };

	s.r.priv = &s;
	za_volume_checkpoint(v, &s.r);
	return vsync_wait(v, &s);
}

/* ---- liveness, for rebuild ---- */

struct live_walk {
	int (*fn)(void *priv, uint64_t group, uint64_t pos, uint64_t n);
	void *priv;
};

static int live_walk_one(void *priv, uint64_t lba, uint64_t n,
			 const struct za_map_loc *loc)
{
	struct live_walk *lw = priv;

	(void)lba;
	if (!loc || (loc->kind != ZA_MAP_DATA && loc->kind != ZA_MAP_JOURNAL))
		return 0;
	return lw->fn(lw->priv, loc->group, loc->pos, n);
}

int za_volume_walk_live(struct za_volume *v,
			int (*fn)(void *priv, uint64_t group, uint64_t pos,
				  uint64_t n),
			void *priv)
{
	struct live_walk lw = { .fn = fn, .priv = priv };

	/* za_volume_map_load() first: a page out of memory is no hole. */
	if (!za_map_whole(v->map))
		return -EAGAIN;
	return za_map_walk(v->map, 0, v->size_blocks, live_walk_one, &lw);
}

uint64_t za_volume_group_live(struct za_volume *v, uint64_t group)
{
	struct live *l = vol_live_get(v, group, false);

	return l ? l->blocks + l->pages : 0;
}

/* ---- growing ---- */

/*
 * The reserve is default_size()'s (15% of the segments, at least three
 * write sets, the checkpoint stream's segment), taken over every zone of
 * the writable members, used or free: what the volume could be had it
 * been created on them.
 */
uint64_t za_volume_max_size(const struct za_volume *v)
{
	return za_volume_max_size_if(v, NULL);
}

/*
 * Only the bound moves: the map holds extents, not a table per block, so
 * the new blocks simply have no extent yet and read as zeros. Requests
 * already checked against the old size are within the new one.
 */
int za_volume_grow(struct za_volume *v, uint64_t size_bytes)
{
	if (size_bytes % 4096 || size_bytes < za_volume_size(v))
		return -EINVAL;
	if (size_bytes > za_volume_max_size(v))
		return -ENOSPC;
	v->size_blocks = size_bytes / 4096;
	return 0;
}
