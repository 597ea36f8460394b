// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * engine-write.c - stripes onto the drives: stripe buffers, their headers,
 * parity and checksums (on the worker thread for data), dispatch into each
 * stream's taking group in round robin, the write of every column at its
 * zone's write pointer, rewrites after a failed column, and flushes. It
 * does not choose where segments go (engine-place.c) nor read back what
 * it wrote (engine-read.c).
 *
 * A data stripe is placed on the loop (segment, stripe index, header
 * fields) and its parity, checksums and headers are computed on the
 * engine's worker thread (worker.h) from its own buffer alone; its
 * columns are submitted when it comes back. The worker is one thread,
 * first in first out, so a segment's stripes reach its zones in stripe
 * order, as writes at the write pointer must. Journal and checkpoint
 * stripes, small and waited for, are prepared on the loop.
 *
 * A stripe is complete when all k+p column writes completed; only then
 * does its done() run and anyone learn where it is (invariant 2). If a
 * column fails, its group stops taking stripes (its segments are sealed at
 * the stripes that completed), an -EIO/-ENODEV excludes the member at once
 * (invariant 4: no later group is placed on it), and every stripe of the
 * group that did not complete is written again, whole, from the buffer
 * still held, into a new group, keeping its sequence number.
 */
#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "byteorder.h"
#include "container.h"
#include "crash.h"
#include "crc.h"
#include "ec.h"
#include "log.h"
#include "engine-int.h"

/* ---- writing ---- */

struct za_stripe_w *za_engine_stripe_get_stream(struct za_engine *e,
						unsigned stream)
{
	struct stream *st = &e->streams[stream];
	struct za_stripe_w *s = st->pool;

	assert(stream < e->nr_streams);
	if (s) {
		st->pool = s->next;
	} else {
		s = calloc(1, sizeof(*s));
		if (!s)
			return NULL;
		if (posix_memalign((void **)&s->buf, 4096,
				   st->l.width * st->l.slot_bytes))
			s->buf = NULL;
		s->lbas = calloc(st->l.data_blocks, sizeof(*s->lbas));
		s->reqs = calloc((size_t)st->l.width * st->parts,
				 sizeof(*s->reqs));
		s->hdr = malloc(sizeof(*s->hdr));
		s->col_dev = calloc(st->l.width, sizeof(*s->col_dev));
		s->col_off = calloc(st->l.width, sizeof(*s->col_off));
		s->src = calloc(st->l.data_blocks, sizeof(*s->src));
		if (!s->buf || !s->lbas || !s->reqs || !s->hdr || !s->col_dev ||
		    !s->col_off || !s->src) {
			free(s->src);
			free(s->col_dev);
			free(s->col_off);
			free(s->buf);
			free(s->lbas);
			free(s->reqs);
			free(s->hdr);
			free(s);
			return NULL;
		}
	}
	s->stream = stream;
	s->eng = e;
	s->next = NULL;
	s->nr_blocks = 0;
	s->kind = ZA_STRIPE_DATA;
	s->done = NULL;
	s->priv = NULL;
	s->tries = 0;
	return s;
}

struct za_stripe_w *za_engine_stripe_get(struct za_engine *e)
{
	return za_engine_stripe_get_stream(e, ZA_STREAM_DATA);
}

void za_engine_stripe_put(struct za_engine *e, struct za_stripe_w *s)
{
	struct stream *st = &e->streams[s->stream];

	if (s->nr_src) {
		memset(s->src, 0, st->l.data_blocks * sizeof(*s->src));
		s->nr_src = 0;
	}
	s->next = st->pool;
	st->pool = s;
}

uint8_t *za_stripe_w_block(const struct za_engine *e, struct za_stripe_w *s,
			   uint32_t b)
{
	const struct za_stripe_layout *l = &e->streams[s->stream].l;
	unsigned col;
	uint32_t cb;

	assert(b < l->data_blocks);
	za_stripe_locate(l, b, &col, &cb);
	return s->buf + col * l->slot_bytes + ZA_STRIPE_HDR_BYTES +
	       (uint64_t)cb * 4096;
}

void za_stripe_w_refer(const struct za_engine *e, struct za_stripe_w *s,
		       uint32_t b, const void *data)
{
	assert(b < e->streams[s->stream].l.data_blocks && !s->src[b]);
	s->src[b] = data;
	s->nr_src++;
}

const uint8_t *za_stripe_w_data(const struct za_engine *e,
				struct za_stripe_w *s, uint32_t b)
{
	return s->src[b] ? s->src[b] : za_stripe_w_block(e, s, b);
}

void za_stripe_w_own(const struct za_engine *e, struct za_stripe_w *s)
{
	const struct za_stripe_layout *l = &e->streams[s->stream].l;
	uint32_t b;

	for (b = 0; s->nr_src && b < l->data_blocks; b++) {
		if (!s->src[b])
			continue;
		memcpy(za_stripe_w_block(e, s, b), s->src[b], 4096);
		s->src[b] = NULL;
		s->nr_src--;
	}
}

/*
 * Fill @reqs[0..parts) for one slot I/O of @len bytes at @off_bytes from
 * @buf, split at the engine's largest request size (every member takes
 * it). Nothing is submitted: callers submit once their counts are set.
 */
void eng_slot_reqs(const struct za_engine *e, struct za_dev_req *reqs,
		   unsigned parts, enum za_dev_op op, uint64_t off_bytes,
		   uint64_t len, uint8_t *buf,
		   void (*done)(struct za_dev_req *req), void *priv)
{
	unsigned i;

	for (i = 0; i < parts; i++) {
		struct za_dev_req *r = &reqs[i];
		uint64_t po = (uint64_t)i * e->io_max;
		uint64_t n = len - po > e->io_max ? e->io_max : len - po;

		memset(r, 0, sizeof(*r));
		r->op = op;
		r->off_bytes = off_bytes + po;
		r->len_bytes = n;
		r->buf = buf + po;
		r->done = done;
		r->priv = priv;
	}
}

/*
 * Loop thread: what every column's header of @s says (all but the column
 * number and the CRCs), and which columns are absent, as placed in @g.
 */
static void stripe_hdr_fill(const struct za_engine *e,
			    const struct za_stripe_w *s,
			    const struct za_segment *g, struct za_stripe_hdr *h,
			    uint64_t *absent)
{
	const struct za_stripe_layout *l = &g->st->l;
	unsigned c;

	memset(h, 0, sizeof(*h));
	h->array_uuid = e->uuid;
	h->seg_id = g->id;
	h->seq = s->seq;
	h->stripe_idx = s->stripe_idx;
	h->k = (uint8_t)l->k;
	h->p = (uint8_t)l->p;
	h->rows = (uint8_t)l->rows;
	h->kind = s->kind;
	h->chunk_bytes = l->chunk_bytes;
	h->nr_blocks = s->nr_blocks;
	h->group_id = g->grp->id;
	h->group_w = (uint16_t)g->grp->w;
	h->group_idx = (uint16_t)g->grp_idx;
	h->group_stripes = g->grp->nr_stripes;
	h->stream = (uint8_t)g->st->id;
	*absent = 0;
	for (c = 0; c < l->width; c++) {
		h->members[c] = g->hdr_member[c];
		h->zones[c] = g->hdr_zone[c];
		if (eng_col_absent(g, c))
			*absent |= 1ull << c;
	}
}

/* Rows [0, @rows) of data column @c that @s refers to, into @payload. */
static void buf_fill_rows(const struct za_stripe_layout *l,
			  const struct za_stripe_w *s, unsigned c,
			  uint8_t *payload, uint32_t rows)
{
	uint32_t j;

	for (j = 0; c < l->k && s->nr_src && j < rows; j++) {
		const uint8_t *src = s->src[za_stripe_block_of(l, c, j)];

		if (src)
			memcpy(payload + (uint64_t)j * 4096, src, 4096);
	}
}

/*
 * Any one thread: parity, LBA tables, block CRCs and the header of every
 * column not in @absent, from @s's data blocks and lbas[] and the shared
 * header @h (its col, blk_crc and lba_crc are filled in per column). It
 * touches @s's buffer, @h and @ec only, and reads the blocks @s refers
 * to (src): a column the drive stages is copied there from them; one
 * written from the buffer gets them copied into the buffer.
 */
static void stripe_encode(const struct za_stripe_layout *l, struct za_ec *ec,
			  struct za_stripe_w *s, struct za_stripe_hdr *h,
			  uint64_t absent)
{
	uint8_t *payload[ZA_EC_MAX_WIDTH], *lbat[ZA_EC_MAX_WIDTH];
	uint32_t blk_crc[ZA_EC_MAX_WIDTH][ZA_STRIPE_MAX_COL_BLOCKS];
	uint64_t stage = 0; /* columns still being staged */
	uint64_t staging; /* columns staged at all */
	unsigned c;
	uint32_t j;

	for (c = 0; c < l->width; c++) {
		uint8_t *col = s->buf + c * l->slot_bytes;

		payload[c] = col + ZA_STRIPE_HDR_BYTES;
		lbat[c] = col + ZA_STRIPE_LBA_OFF;
		if (s->col_dev[c] && s->col_dev[c]->ops->stage)
			stage |= 1ull << c;
	}
	staging = stage;
	/* Padding blocks are zeroed: nothing stale reaches a drive. */
	for (j = s->nr_blocks; j < l->data_blocks; j++) {
		uint32_t cb;

		za_stripe_locate(l, j, &c, &cb);
		memset(payload[c] + (uint64_t)cb * 4096, 0, 4096);
	}
	for (c = 0; c < l->k; c++)
		for (j = 0; j < l->col_blocks; j++) {
			uint32_t b = za_stripe_block_of(l, c, j);
			uint64_t lba = b < s->nr_blocks ? s->lbas[b] :
							  ZA_STRIPE_LBA_NONE;

			za_put_le64(lbat[c] + 8 * j, lba);
		}
	for (c = 0; c < l->k; c++)
		memset(lbat[c] + 8 * l->col_blocks, 0,
		       ZA_STRIPE_LBA_BYTES - 8 * l->col_blocks);
	za_ec_encode(ec, ZA_STRIPE_LBA_BYTES, lbat);

	/*
	 * Parity and CRCs one row of blocks at a time: the encode reads each
	 * data block from memory (the loop filled the buffer on another
	 * core) and the CRCs then find the row, parity included, in this
	 * core's cache. Whole columns at a time read every byte twice from
	 * afar, and cost the sequential write path about a fifth of the
	 * daemon's CPU (bench/results/notes.md, P1).
	 */
	for (j = 0; j < l->col_blocks; j++) {
		uint64_t off = (uint64_t)j * 4096;
		uint8_t *row[ZA_EC_MAX_WIDTH];
		uint64_t referred = 0; /* data columns read from src */

		for (c = 0; c < l->width; c++) {
			row[c] = payload[c] + off;
			if (c < l->k && s->nr_src &&
			    s->src[za_stripe_block_of(l, c, j)]) {
				/* The encode only reads data blocks. */
				row[c] = (uint8_t *)s->src[za_stripe_block_of(
					l, c, j)];
				referred |= 1ull << c;
			}
		}
		za_ec_encode(ec, 4096, row);
		for (c = 0; c < l->width; c++)
			if (!(absent & (1ull << c)))
				blk_crc[c][j] = za_crc32c(row[c], 4096);
		/* And into the drives while the row is in the cache. */
		for (c = 0; c < l->width; c++)
			if ((stage & (1ull << c)) &&
			    za_dev_stage(s->col_dev[c],
					 s->col_off[c] + ZA_STRIPE_HDR_BYTES +
						 off,
					 row[c], 4096) < 0) {
				stage &= ~(1ull << c);
				/* Written from the buffer after all. */
				buf_fill_rows(l, s, c, payload[c], j);
			}
		/* A column written from the buffer needs its bytes there. */
		for (c = 0; c < l->k; c++)
			if ((referred & (1ull << c)) &&
			    !((stage | absent) & (1ull << c)))
				memcpy(payload[c] + off, row[c], 4096);
	}
	for (c = 0; c < l->width; c++) {
		if (absent & (1ull << c))
			continue; /* never written: no header, no CRCs */
		h->col = (uint8_t)c;
		memcpy(h->blk_crc, blk_crc[c],
		       l->col_blocks * sizeof(uint32_t));
		h->lba_crc = za_crc32c(lbat[c], ZA_STRIPE_LBA_BYTES);
		za_stripe_hdr_encode(h, s->buf + c * l->slot_bytes);
		if ((stage & (1ull << c)) &&
		    za_dev_stage(s->col_dev[c], s->col_off[c],
				 s->buf + c * l->slot_bytes,
				 ZA_STRIPE_HDR_BYTES) < 0)
			stage &= ~(1ull << c);
	}
	/* The staged bytes reach memory before the loop submits the
	 * writes that expose them. */
	if (staging)
		za_dev_stage_fence();
	s->staged = stage;
}

static void col_write_done(struct za_dev_req *req);

static void stripe_fail_all(struct stream *st, int err)
{
	struct za_stripe_w *s;

	while ((s = st->pend_head)) {
		st->pend_head = s->next;
		if (!st->pend_head)
			st->pend_tail = NULL;
		s->done(s, err);
	}
}

static void stripe_work_run(struct za_work *w);
static void stripe_work_done(struct za_work *w);
static void stripe_submit(struct za_engine *e, struct za_stripe_w *s);

static void stripe_dispatch(struct za_engine *e, struct za_stripe_w *s,
			    struct group *grp)
{
	struct stream *st = grp->st;
	const struct za_stripe_layout *l = &st->l;
	struct za_segment *g = grp->segs[grp->next_pos % grp->w];
	unsigned c;

	s->seg = g;
	s->group_id = grp->id;
	s->group_pos = grp->next_pos++;
	s->stripe_idx = g->next_stripe++;
	assert(s->stripe_idx == s->group_pos / grp->w);
	s->fail_mask = 0;
	g->inflight++;
	e->inflight++;
	if (grp->next_pos == (uint64_t)grp->w * grp->nr_stripes)
		eng_group_stop(e, grp);
	stripe_hdr_fill(e, s, g, s->hdr, &s->absent);
	for (c = 0; c < l->width; c++) {
		const struct member *m = &e->m[g->member[c]];

		s->col_dev[c] = s->absent & (1ull << c) ? NULL : m->dev;
		s->col_off[c] = (uint64_t)g->zone[c] * m->zone_bytes +
				(uint64_t)s->stripe_idx * l->slot_bytes;
	}
	if (e->prep && st->id == ZA_STREAM_DATA) {
		/* Parity and checksums on the worker; its FIFO keeps this
		 * segment's stripes in order on their way to the zones. */
		s->work.run = stripe_work_run;
		s->work.done = stripe_work_done;
		za_worker_queue(e->prep, &s->work);
		return;
	}
	stripe_encode(l, st->ec, s, s->hdr, s->absent);
	stripe_submit(e, s);
}

/* Worker thread: the stripe's parity, checksums and headers. */
static void stripe_work_run(struct za_work *w)
{
	struct za_stripe_w *s = container_of(w, struct za_stripe_w, work);
	struct stream *st = &s->eng->streams[s->stream];

	stripe_encode(&st->l, st->prep_ec, s, s->hdr, s->absent);
}

/* Loop thread, in dispatch order: its columns go to the drives. */
static void stripe_work_done(struct za_work *w)
{
	struct za_stripe_w *s = container_of(w, struct za_stripe_w, work);

	stripe_submit(s->eng, s);
}

/*
 * Write the prepared @s to the slots its dispatch chose. A column whose
 * member was lost since is written anyway and fails like any write to
 * it; the columns absent at dispatch (born lost) have no header and are
 * not written, whatever happened to them since.
 */
static void stripe_submit(struct za_engine *e, struct za_stripe_w *s)
{
	struct za_segment *g = s->seg;
	struct stream *st = g->st;
	const struct za_stripe_layout *l = &st->l;
	unsigned c, part;

	s->pending = 0;
	for (c = 0; c < l->width; c++)
		s->pending += s->absent & (1ull << c) ? 0 : st->parts;
	for (c = 0; c < l->width; c++) {
		if (s->absent & (1ull << c))
			continue; /* born lost: nothing to write */
		/*
		 * The slot dispatch chose (and the worker staged into). A
		 * column changes member only when it is rebuilt, which no
		 * segment with stripes in flight is: dispatch's device is
		 * still the member's.
		 */
		assert(s->col_dev[c] == e->m[g->member[c]].dev);
		eng_slot_reqs(e, &s->reqs[c * st->parts], st->parts,
			      ZA_DEV_OP_WRITE, s->col_off[c], l->slot_bytes,
			      s->buf + c * l->slot_bytes, col_write_done, s);
		for (part = 0; part < st->parts; part++) {
			struct za_dev_req *r = &s->reqs[c * st->parts + part];

			r->staged = (s->staged >> c) & 1;
			e->st.cols_staged += r->staged && !part;
			za_dev_submit(s->col_dev[c], r);
		}
	}
}

static void pump_stream(struct za_engine *e, struct stream *st)
{
	struct group *grp;
	struct za_stripe_w *s;

	while (st->pend_head) {
		grp = st->cur;
		if (!grp)
			grp = eng_group_open(e, st);
		if (!grp) {
			/* Nothing in flight will free a zone: give up. A
			 * column rebuild running holds an open zone it gives
			 * back when it ends (rb_end() pumps again). */
			if (!e->inflight && !e->rebuilds) {
				za_log_err("stream %u: no segment can be "
					   "opened: %u writable members for "
					   "%u columns (%u at least)",
					   st->id, za_engine_nr_writable(e),
					   st->l.width, st->l.k);
				stripe_fail_all(st, -ENOSPC);
			}
			break;
		}
		/* Strict round robin: wait for the next segment's turn. */
		if (grp->segs[grp->next_pos % grp->w]->inflight >=
		    e->inflight_per_seg)
			break;
		s = st->pend_head;
		st->pend_head = s->next;
		if (!st->pend_head)
			st->pend_tail = NULL;
		stripe_dispatch(e, s, grp);
	}
}

void eng_pump(struct za_engine *e)
{
	unsigned i;

	if (e->pumping)
		return;
	e->pumping = true;
	for (i = 0; i < e->nr_streams; i++)
		pump_stream(e, &e->streams[i]);
	e->pumping = false;
}

static void enqueue(struct za_engine *e, struct za_stripe_w *s, bool front)
{
	struct stream *st = &e->streams[s->stream];

	s->next = NULL;
	if (front) {
		s->next = st->pend_head;
		st->pend_head = s;
		if (!st->pend_tail)
			st->pend_tail = s;
	} else if (st->pend_tail) {
		st->pend_tail->next = s;
		st->pend_tail = s;
	} else {
		st->pend_head = st->pend_tail = s;
	}
}

void za_engine_write(struct za_engine *e, struct za_stripe_w *s)
{
	assert(s->stream < e->nr_streams && s->done &&
	       s->nr_blocks <= e->streams[s->stream].l.data_blocks);
	s->tries = 0;
	/*
	 * The sequence number is taken here, in the order the owner hands
	 * stripes over, not when a stream dispatches them: streams queue
	 * separately, and recovery replays by sequence, so an unmap record
	 * queued in the journal before a data stripe rewriting those blocks
	 * must stay before it. A stripe written again after a failure keeps
	 * its number (the copies hold the same blocks).
	 */
	s->seq = e->seq++;
	enqueue(e, s, false);
	eng_pump(e);
}

static void col_write_done(struct za_dev_req *req)
{
	struct za_stripe_w *s = req->priv;
	struct za_engine *e = s->eng;
	struct za_segment *g = s->seg;
	unsigned idx = (unsigned)(req - s->reqs) / g->st->parts;

	if (req->result) {
		bool first = !(s->fail_mask & (1ull << idx));

		s->fail_mask |= 1ull << idx;
		eng_req_failed(e, g->member[idx], g->zone[idx], req, first,
			       ENG_REQ_WRITE);
		eng_group_stop(e, g->grp);
	}
	if (--s->pending)
		return;
	g->inflight--;
	e->inflight--;
	if (!s->fail_mask) {
		s->seg_id = g->id;
		e->st.stripes_written++;
		eng_seg_maybe_finish(e, g);
		za_crash_point("stripe-complete");
		s->done(s, 0);
	} else {
		eng_seg_maybe_finish(e, g);
		if (++s->tries > 8) {
			s->done(s, -EIO);
		} else {
			e->st.stripes_rewritten++;
			enqueue(e, s, true);
		}
	}
	eng_pump(e);
}

/* ---- flush ---- */

static int flush_result(const struct za_engine *e)
{
	bool beyond;

	eng_seg_lost_scan(e, &beyond);
	return beyond ? -EIO : 0;
}

static void flush_done(struct za_dev_req *req)
{
	struct za_engine_flush *f = req->priv;
	struct za_engine *e = f->eng;
	unsigned idx = (unsigned)(req - f->reqs);

	if (req->result) {
		e->m[idx].st.err_write++;
		eng_member_fail(e, idx, req->result, true);
	}
	if (--f->pending)
		return;
	free(f->reqs);
	f->reqs = NULL;
	f->done(f, flush_result(e));
	eng_pump(e);
}

static void flush_none(struct za_io_defer *d)
{
	struct za_engine_flush *f =
		container_of(d, struct za_engine_flush, defer);

	f->done(f, flush_result(f->eng));
}

void za_engine_flush(struct za_engine *e, struct za_engine_flush *f)
{
	unsigned i;

	f->eng = e;
	f->result = 0;
	f->pending = 0;
	f->reqs = calloc(e->nr_members, sizeof(*f->reqs));
	if (!f->reqs) {
		f->defer.fn = flush_none; /* reports the state; see below */
		za_io_defer(e->io, &f->defer);
		return;
	}
	for (i = 0; i < e->nr_members; i++)
		if (eng_readable(&e->m[i]))
			f->pending++;
	for (i = 0; i < e->nr_members; i++) {
		if (!eng_readable(&e->m[i]))
			continue;
		f->reqs[i].op = ZA_DEV_OP_FLUSH;
		f->reqs[i].done = flush_done;
		f->reqs[i].priv = f;
		za_dev_submit(e->m[i].dev, &f->reqs[i]);
	}
	if (!f->pending) {
		/* Nothing to flush: still complete on the loop, never inline. */
		free(f->reqs);
		f->reqs = NULL;
		f->defer.fn = flush_none;
		za_io_defer(e->io, &f->defer);
	}
}

/* ---- synchronous wrappers ---- */

static void sync_write_done(struct za_stripe_w *s, int result)
{
	struct sync_ctx *c = s->priv;

	c->result = result;
	c->done = true;
}

int za_engine_write_sync(struct za_engine *e, struct za_stripe_w *s)
{
	struct sync_ctx c = { 0 };

	s->done = sync_write_done;
	s->priv = &c;
	za_engine_write(e, s);
	za_io_run_until(e->io, &c.done, 0);
	return c.result;
}

static void sync_flush_done(struct za_engine_flush *f, int result)
{
	struct sync_ctx *c = f->priv;

	c->result = result;
	c->done = true;
}

int za_engine_flush_sync(struct za_engine *e)
{
	struct sync_ctx c = { 0 };
	struct za_engine_flush f = { 0 };

	f.done = sync_flush_done;
	f.priv = &c;
	za_engine_flush(e, &f);
	za_io_run_until(e->io, &c.done, 0);
	return c.result;
}
