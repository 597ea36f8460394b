// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test-scrub.c - the scrub job on emulated drives behind fault wrappers:
 * a clean array reads every live stripe once and finds nothing; bits
 * rotten at rest in data, header and parity columns are counted as
 * checksum errors and repaired by moving the column; a parity column
 * rewritten with valid CRCs but the wrong content (payload or LBA table)
 * is caught as inconsistent, which reads never see; the rate limit holds
 * stripes back; pause holds, stop keeps a position that a new job goes
 * on from, and the owner is told each time it moves (early, under a rate
 * limit); with a volume, dead stripes are neither read nor repaired.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "byteorder.h"
#include "crc.h"
#include "dev-emu.h"
#include "dev-fault.h"
#include "dev.h"
#include "io.h"
#include "log.h"
#include "scrub.h"
#include "engine.h"
#include "stripe.h"
#include "tap.h"
#include "volume.h"

#define MAXN 16
#define ZONE_BYTES (1ull << 20)

struct tarr {
	char dir[256];
	unsigned n;
	struct za_io *io;
	struct za_dev *devs[MAXN];
	uint8_t states[MAXN];
	struct za_engine *e;
	struct za_volume *v;
	struct za_engine_params prm;
};

static const struct geo {
	unsigned k, p, n;
	uint32_t chunk;
	unsigned rows;
} geos[] = {
	{ 4, 2, 9, 4096, 2 }, /* one segment per group */
	{ 2, 1, 7, 8192, 1 }, /* two segments per group */
	{ 3, 3, 9, 4096, 3 },
	{ 1, 2, 7, 4096, 1 }, /* copies, two segments per group */
};

static uint64_t rng = 88172645463325252ull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* @n drives (SMR and ZNS, 14 zones of 1 MiB) behind fault wrappers. */
static void tarr_make(struct tarr *t, const struct geo *g)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	struct za_emu_params ep;
	unsigned i;

	memset(t, 0, sizeof(*t));
	t->n = g->n;
	snprintf(t->dir, sizeof(t->dir), "%s/za-scrub-XXXXXX", tmp);
	ck_assert_ptr_nonnull(mkdtemp(t->dir));
	ck_assert_int_eq(za_io_new(NULL, &t->io), 0);
	for (i = 0; i < t->n; i++) {
		char path[300];
		struct za_dev *inner;

		snprintf(path, sizeof(path), "%s/d%02u", t->dir, i);
		za_emu_params_default(&ep, i % 3 ? ZA_DEV_MODEL_HM_SMR :
						   ZA_DEV_MODEL_ZNS);
		ep.zone_size_bytes = ZONE_BYTES;
		ep.zone_cap_bytes = i % 3 ? 0 : 960ull << 10;
		ep.nr_conv_zones = 0;
		ep.size_bytes = 14 * ZONE_BYTES;
		ep.cache_bytes = 0; /* at rest means in the file */
		ck_assert_int_eq(za_emu_create(path, &ep, true), 0);
		ck_assert_int_eq(za_dev_open(t->io, path, 0, &inner), 0);
		ck_assert_int_eq(za_fault_wrap(inner, &t->devs[i]), 0);
		t->states[i] = ZA_MEMBER_ONLINE;
	}
	t->prm.geom.k = (uint8_t)g->k;
	t->prm.geom.p = (uint8_t)g->p;
	t->prm.geom.matrix = ZA_EC_MATRIX_CAUCHY;
	t->prm.geom.stripe_rows = (uint8_t)g->rows;
	t->prm.geom.chunk_bytes = g->chunk;
	t->prm.geom.lblock_bytes = 4096;
	t->prm.geom.hdr_bytes = 4096;
	ck_assert_int_eq(za_uuid_gen(&t->prm.array_uuid), 0);
	t->prm.nr_members = t->n;
	t->prm.devs = t->devs;
	t->prm.states = t->states;
	t->prm.next_seq = 1;
	t->prm.next_seg_id = 1;
	ck_assert_int_eq(za_engine_new(t->io, &t->prm, &t->e), 0);
}

static void tarr_free(struct tarr *t)
{
	unsigned i;
	char path[300];

	while ((t->v && za_volume_busy(t->v)) || za_engine_busy(t->e))
		za_io_run_once(t->io);
	if (t->v)
		za_volume_free(t->v);
	za_engine_free(t->e);
	for (i = 0; i < t->n; i++) {
		za_dev_close(t->devs[i]);
		snprintf(path, sizeof(path), "%s/d%02u", t->dir, i);
		unlink(path);
	}
	rmdir(t->dir);
	za_io_free(t->io);
}

/* ---- stripes written through the engine ---- */

struct wrec {
	uint64_t seg_id, group_id, group_pos;
	uint32_t stripe_idx, nr_blocks;
	uint64_t seed;
	bool sealed; /* its group takes no more stripes: scrub sees it */
};

static void fill_block(uint8_t *b, uint64_t seed, uint32_t blk)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + blk + 1;
	unsigned i;

	for (i = 0; i < 4096; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(b + i, &x, 8);
	}
}

/* Write @n stripes (random fill); mark those of groups now sealed. */
static unsigned write_stripes(struct tarr *t, struct wrec *w, unsigned n)
{
	const struct za_stripe_layout *l = za_engine_layout(t->e);
	unsigned i, sealed = 0;

	for (i = 0; i < n; i++) {
		struct za_stripe_w *s = za_engine_stripe_get(t->e);
		uint32_t b;

		ck_assert_ptr_nonnull(s);
		w[i].seed = rnd();
		w[i].nr_blocks = 1 + (uint32_t)(rnd() % l->data_blocks);
		for (b = 0; b < w[i].nr_blocks; b++) {
			fill_block(za_stripe_w_block(t->e, s, b), w[i].seed, b);
			s->lbas[b] = w[i].seed + b;
		}
		s->nr_blocks = w[i].nr_blocks;
		s->kind = ZA_STRIPE_DATA;
		ck_assert_int_eq(za_engine_write_sync(t->e, s), 0);
		w[i].seg_id = s->seg_id;
		w[i].stripe_idx = s->stripe_idx;
		w[i].group_id = s->group_id;
		w[i].group_pos = s->group_pos;
		za_engine_stripe_put(t->e, s);
	}
	while (za_engine_busy(t->e))
		za_io_run_once(t->io);
	for (i = 0; i < n; i++) {
		struct za_group_info *gi = malloc(sizeof(*gi));

		ck_assert_ptr_nonnull(gi);
		ck_assert_int_eq(za_engine_group_info(t->e, w[i].group_id, gi),
				 0);
		w[i].sealed = !gi->taking;
		sealed += w[i].sealed;
		free(gi);
	}
	return sealed;
}

/* Read stripe @w back: exact data; returns the blocks repaired. */
static uint32_t check_stripe(struct tarr *t, const struct wrec *w)
{
	const struct za_stripe_layout *l = za_engine_layout(t->e);
	uint8_t *buf, exp[4096];
	uint32_t b, rep = 0;

	ck_assert_int_eq(posix_memalign((void **)&buf, 4096,
					(size_t)w->nr_blocks * 4096),
			 0);
	ck_assert_int_eq(za_engine_read_sync(t->e, w->group_id,
					     w->group_pos * l->data_blocks,
					     w->nr_blocks, buf, &rep),
			 0);
	for (b = 0; b < w->nr_blocks; b++) {
		fill_block(exp, w->seed, b);
		ck_assert_msg(!memcmp(buf + (size_t)b * 4096, exp, 4096),
			      "segment %llu stripe %u block %u differs",
			      (unsigned long long)w->seg_id, w->stripe_idx, b);
	}
	free(buf);
	return rep;
}

/* ---- damage at rest: straight into the emulated drive's file ---- */

enum rot {
	ROT_PAYLOAD, /* a bit of a payload block: its CRC fails */
	ROT_HEADER, /* a bit of the header: the header CRC fails */
	FAKE_PAYLOAD, /* payload changed, CRCs made to match */
	FAKE_LBA, /* LBA table changed, CRCs made to match */
};

static void slot_io(struct tarr *t, uint64_t seg_id, uint32_t stripe,
		    unsigned col, uint8_t *buf, bool wr)
{
	const struct za_stripe_layout *l = za_engine_layout(t->e);
	struct za_seg_info si;
	char path[300];
	uint8_t hb[8];
	uint64_t off;
	int fd;

	ck_assert_int_eq(za_engine_seg_info(t->e, seg_id, &si), 0);
	snprintf(path, sizeof(path), "%s/d%02u", t->dir, si.members[col]);
	fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	/* docs/format.md: data_off at byte 136 of the file header. */
	ck_assert_int_eq(pread(fd, hb, 8, 136), 8);
	off = za_get_le64(hb) + si.zones[col] * ZONE_BYTES +
	      (uint64_t)stripe * l->slot_bytes;
	if (wr)
		ck_assert_int_eq(pwrite(fd, buf, l->slot_bytes, (off_t)off),
				 (ssize_t)l->slot_bytes);
	else
		ck_assert_int_eq(pread(fd, buf, l->slot_bytes, (off_t)off),
				 (ssize_t)l->slot_bytes);
	close(fd);
}

static void rot(struct tarr *t, uint64_t seg_id, uint32_t stripe, unsigned col,
		enum rot how)
{
	const struct za_stripe_layout *l = za_engine_layout(t->e);
	struct za_stripe_hdr h;
	uint8_t *buf = malloc(l->slot_bytes);
	uint64_t pos = rnd() % l->col_payload_bytes;

	ck_assert_ptr_nonnull(buf);
	slot_io(t, seg_id, stripe, col, buf, false);
	ck_assert_int_eq(za_stripe_hdr_decode(buf, &h), 0);
	switch (how) {
	case ROT_PAYLOAD:
		buf[ZA_STRIPE_HDR_BYTES + pos] ^= (uint8_t)(1u << (rnd() % 8));
		break;
	case ROT_HEADER:
		buf[8 + rnd() % 64] ^= (uint8_t)(1u << (rnd() % 8));
		break;
	case FAKE_PAYLOAD:
		buf[ZA_STRIPE_HDR_BYTES + pos] ^= 0x5a;
		h.blk_crc[pos / 4096] = za_crc32c(
			buf + ZA_STRIPE_HDR_BYTES + pos / 4096 * 4096, 4096);
		za_stripe_hdr_encode(&h, buf);
		break;
	case FAKE_LBA:
		buf[ZA_STRIPE_LBA_OFF + rnd() % ZA_STRIPE_LBA_BYTES] ^= 0x21;
		h.lba_crc =
			za_crc32c(buf + ZA_STRIPE_LBA_OFF, ZA_STRIPE_LBA_BYTES);
		za_stripe_hdr_encode(&h, buf);
		break;
	}
	if (how == FAKE_PAYLOAD || how == FAKE_LBA) {
		struct za_stripe_hdr d;

		/* Still a perfectly valid column on its own. */
		ck_assert_int_eq(za_stripe_hdr_decode(buf, &d), 0);
	}
	slot_io(t, seg_id, stripe, col, buf, true);
	free(buf);
}

/* ---- running a scrub ---- */

struct sctx {
	bool done;
	int result;
	unsigned calls;
};

static void on_finished(struct za_scrub *s, int result, void *priv)
{
	struct sctx *c = priv;

	(void)s;
	c->done = true;
	c->result = result;
	c->calls++;
}

static void scrub_new(struct tarr *t, struct za_scrub_params *p, struct sctx *c,
		      struct za_scrub **out)
{
	memset(c, 0, sizeof(*c));
	p->io = t->io;
	p->eng = t->e;
	p->vol = t->v;
	p->finished = on_finished;
	p->priv = c;
	ck_assert_int_eq(za_scrub_new(p, out), 0);
}

static void scrub_wait(struct tarr *t, struct za_scrub *s, struct sctx *c)
{
	while (!c->done)
		za_io_run_once(t->io);
	while (za_scrub_busy(s))
		za_io_run_once(t->io);
	ck_assert_uint_eq(c->calls, 1);
}

/* One whole run with @p (NULL: defaults); its status in @st. */
static int scrub_run(struct tarr *t, const struct za_scrub_params *p,
		     struct za_scrub_status *st)
{
	struct za_scrub_params prm = { 0 };
	struct za_scrub *s;
	struct sctx c;

	if (p)
		prm = *p;
	scrub_new(t, &prm, &c, &s);
	ck_assert_int_eq(za_scrub_start(s), 0);
	ck_assert(!c.done); /* never inside the call */
	ck_assert_int_eq(za_scrub_start(s), -EBUSY);
	scrub_wait(t, s, &c);
	za_scrub_status(s, st);
	ck_assert_int_eq(st->job.state, ZA_JOB_DONE);
	ck_assert_int_eq(st->job.last_error, c.result);
	za_scrub_free(s);
	return c.result;
}

static uint64_t dev_read_bytes(struct tarr *t)
{
	uint64_t n = 0;
	unsigned i;

	for (i = 0; i < t->n; i++)
		n += t->devs[i]->stats.read_bytes;
	return n;
}

static void assert_clean(const struct za_scrub_status *st)
{
	ck_assert_uint_eq(st->err_read, 0);
	ck_assert_uint_eq(st->err_checksum, 0);
	ck_assert_uint_eq(st->err_parity, 0);
	ck_assert_uint_eq(st->stripes_lost, 0);
	ck_assert_uint_eq(st->cols_repaired, 0);
	ck_assert_uint_eq(st->cols_repair_failed, 0);
}

/* Every member's checksum errors, summed. */
static uint64_t member_crc_errs(struct tarr *t)
{
	struct za_member_stats ms;
	uint64_t n = 0;
	unsigned i;

	for (i = 0; i < t->n; i++) {
		za_engine_member_stats(t->e, i, &ms);
		n += ms.err_checksum;
	}
	return n;
}

#define NW 260

/* A clean array: every live stripe read once, whole, nothing found. */
START_TEST(test_clean)
{
	const struct geo *g = &geos[_i];
	const struct za_stripe_layout *l;
	struct za_scrub_status st;
	struct tarr t;
	struct wrec *w = calloc(NW, sizeof(*w));
	unsigned sealed;
	uint64_t before;

	rng = 0xc1ea0000ull + _i;
	tarr_make(&t, g);
	l = za_engine_layout(t.e);
	sealed = write_stripes(&t, w, NW);
	ck_assert_uint_gt(sealed, 0);
	before = dev_read_bytes(&t);
	ck_assert_int_eq(scrub_run(&t, NULL, &st), 0);
	assert_clean(&st);
	ck_assert_uint_eq(st.stripes_checked, sealed);
	ck_assert_uint_eq(st.read_bytes,
			  (uint64_t)sealed * l->width * l->slot_bytes);
	/* Once: the drives saw exactly what the checks read. */
	ck_assert_uint_eq(dev_read_bytes(&t) - before, st.read_bytes);
	ck_assert_uint_eq(st.job.done_bytes, st.job.total_bytes);
	ck_assert_uint_eq(st.job.done_bytes, st.read_bytes);
	ck_assert_uint_eq(st.segs_done, st.segs_total);
	ck_assert_uint_eq(st.position, 0); /* the pass is complete */
	ck_assert_uint_eq(st.job.throttled, 0);
	ck_assert_uint_eq(member_crc_errs(&t), 0);
	tarr_free(&t);
	free(w);
}
END_TEST

/*
 * Pick @n distinct sealed stripes, the others outside out[0]'s segment
 * (pick_near() adds to it): a segment with many bad columns needs as
 * many members outside it to move them to.
 */
static void pick(const struct wrec *w, unsigned nw, unsigned *out, unsigned n)
{
	unsigned i, j, got = 0;

	while (got < n) {
		i = (unsigned)(rnd() % nw);
		if (!w[i].sealed || (got && w[i].seg_id == w[out[0]].seg_id))
			continue;
		for (j = 0; j < got; j++)
			if (out[j] == i)
				break;
		if (j == got)
			out[got++] = i;
	}
}

/* Make out[@i] another stripe of out[0]'s segment, not yet picked. */
static void pick_near(const struct wrec *w, unsigned nw, unsigned *out,
		      unsigned n, unsigned i)
{
	unsigned j, o;

	for (j = 0; j < nw; j++) {
		if (!w[j].sealed || w[j].seg_id != w[out[0]].seg_id)
			continue;
		for (o = 0; o < n; o++)
			if (out[o] == j)
				break;
		if (o == n) {
			out[i] = j;
			return;
		}
	}
	ck_abort_msg("segment %llu has one stripe",
		     (unsigned long long)w[out[0]].seg_id);
}

/* No two columns of a segment on one member. */
static void assert_spread(struct tarr *t, uint64_t seg_id)
{
	const struct za_stripe_layout *l = za_engine_layout(t->e);
	struct za_seg_info si;
	unsigned a, b;

	ck_assert_int_eq(za_engine_seg_info(t->e, seg_id, &si), 0);
	for (a = 0; a < l->width; a++)
		for (b = a + 1; b < l->width; b++)
			ck_assert_uint_ne(si.members[a], si.members[b]);
}

/* Distinct (segment, column) pairs among @n damaged columns. */
static unsigned nr_pairs(const uint64_t *seg, const unsigned *col, unsigned n)
{
	unsigned i, j, d = 0;

	for (i = 0; i < n; i++) {
		for (j = 0; j < i; j++)
			if (seg[j] == seg[i] && col[j] == col[i])
				break;
		d += j == i;
	}
	return d;
}

/*
 * Bits rotten at rest in data, header and parity columns: each counted
 * once as a checksum error, each bad column moved (decoded), and then a
 * second scrub finds nothing and reads repair nothing.
 */
START_TEST(test_rot_repaired)
{
	const struct geo *g = &geos[_i];
	const struct za_stripe_layout *l;
	struct za_scrub_status st;
	struct tarr t;
	struct wrec *w = calloc(NW, sizeof(*w));
	unsigned idx[6], col[6], i;
	uint64_t seg[6], crc0;
	struct za_seg_info before[6], after;

	rng = 0x0b170000ull + _i;
	tarr_make(&t, g);
	l = za_engine_layout(t.e);
	write_stripes(&t, w, NW);
	pick(w, NW, idx, 6);
	/* Two columns of one segment bad in different stripes: with p = 1
	 * each must be copied where it verifies. */
	pick_near(w, NW, idx, 6, 5);
	for (i = 0; i < 6; i++) {
		col[i] = i < 2 ? 0 :
			 i < 4 ? l->width - 1 :
			 i < 5 ? (unsigned)(rnd() % l->width) :
				 1;
		seg[i] = w[idx[i]].seg_id;
		ck_assert_int_eq(za_engine_seg_info(t.e, seg[i], &before[i]),
				 0);
		rot(&t, seg[i], w[idx[i]].stripe_idx, col[i],
		    i % 2 ? ROT_HEADER : ROT_PAYLOAD);
	}
	crc0 = member_crc_errs(&t);
	ck_assert_int_eq(scrub_run(&t, NULL, &st), 0);
	ck_assert_uint_eq(st.err_checksum, 6);
	ck_assert_uint_eq(st.err_read, 0);
	ck_assert_uint_eq(st.err_parity, 0);
	ck_assert_uint_eq(st.stripes_repaired, 6);
	ck_assert_uint_eq(st.cols_repaired, nr_pairs(seg, col, 6));
	ck_assert_uint_eq(st.cols_repair_failed, 0);
	ck_assert_uint_gt(st.repair_written_bytes, 0);
	/* Moves may meet a bad column again while decoding. */
	ck_assert_uint_ge(member_crc_errs(&t) - crc0, 6);
	for (i = 0; i < 6; i++) {
		/* Moved to a member the segment did not use. */
		unsigned c;

		ck_assert_int_eq(za_engine_seg_info(t.e, seg[i], &after), 0);
		ck_assert_uint_ne(after.members[col[i]],
				  before[i].members[col[i]]);
		for (c = 0; c < l->width; c++)
			ck_assert_uint_ne(after.members[col[i]],
					  before[i].members[c]);
		assert_spread(&t, seg[i]);
	}
	ck_assert_int_eq(scrub_run(&t, NULL, &st), 0);
	assert_clean(&st);
	for (i = 0; i < NW; i++)
		if (w[i].sealed)
			ck_assert_uint_eq(check_stripe(&t, &w[i]), 0);
	tarr_free(&t);
	free(w);
}
END_TEST

/*
 * Parity columns that verify (CRCs rewritten to match) but are not the
 * code of the data, in the payload and in the LBA table: reads never
 * notice; a check-only scrub counts them and changes nothing; a
 * repairing scrub moves them; then all is clean.
 */
START_TEST(test_parity_inconsistent)
{
	const struct geo *g = &geos[_i];
	const struct za_stripe_layout *l;
	struct za_scrub_params prm = { 0 };
	struct za_scrub_status st;
	struct tarr t;
	struct wrec *w = calloc(NW, sizeof(*w));
	unsigned idx[4], col[4], i;
	uint64_t seg[4];

	rng = 0x9a710000ull + _i;
	tarr_make(&t, g);
	l = za_engine_layout(t.e);
	write_stripes(&t, w, NW);
	pick(w, NW, idx, 4);
	/* Two parity columns of one segment inconsistent in different
	 * stripes: neither may be decoded from the other. */
	pick_near(w, NW, idx, 4, 2);
	for (i = 0; i < 4; i++) {
		col[i] = i == 0 ? l->k :
			 i == 2 ? l->width - 1 :
				  l->k + (unsigned)(rnd() % l->p);
		seg[i] = w[idx[i]].seg_id;
		rot(&t, seg[i], w[idx[i]].stripe_idx, col[i],
		    i % 2 ? FAKE_LBA : FAKE_PAYLOAD);
	}
	for (i = 0; i < NW; i++)
		if (w[i].sealed)
			ck_assert_uint_eq(check_stripe(&t, &w[i]), 0);
	ck_assert_uint_eq(member_crc_errs(&t), 0);

	prm.check_only = true;
	ck_assert_int_eq(scrub_run(&t, &prm, &st), 0);
	ck_assert_uint_eq(st.err_parity, 4);
	ck_assert_uint_eq(st.err_checksum, 0);
	ck_assert_uint_eq(st.cols_repaired, 0);
	ck_assert_uint_eq(st.repair_written_bytes, 0);

	ck_assert_int_eq(scrub_run(&t, NULL, &st), 0);
	ck_assert_uint_eq(st.err_parity, 4);
	ck_assert_uint_eq(st.err_checksum, 0);
	ck_assert_uint_eq(st.stripes_repaired, 4);
	ck_assert_uint_eq(st.cols_repaired, nr_pairs(seg, col, 4));
	for (i = 0; i < 4; i++)
		assert_spread(&t, seg[i]);

	ck_assert_int_eq(scrub_run(&t, NULL, &st), 0);
	assert_clean(&st);
	tarr_free(&t);
	free(w);
}
END_TEST

/* A member lost: its columns are skipped, not bad, and the rest is
 * still checked against the code. */
START_TEST(test_lost_member_skipped)
{
	const struct geo *g = &geos[0];
	const struct za_stripe_layout *l;
	struct za_scrub_params prm = { 0 };
	struct za_scrub_status st;
	struct tarr t;
	struct wrec *w = calloc(NW, sizeof(*w));
	struct za_seg_info si;
	unsigned idx[1], x, sealed;

	rng = 0x10570000ull;
	tarr_make(&t, g);
	l = za_engine_layout(t.e);
	sealed = write_stripes(&t, w, NW);
	pick(w, NW, idx, 1);
	ck_assert_int_eq(za_engine_seg_info(t.e, w[idx[0]].seg_id, &si), 0);
	x = si.members[0];
	za_engine_member_fail(t.e, x, -EIO);
	while (za_engine_busy(t.e))
		za_io_run_once(t.io);
	rot(&t, w[idx[0]].seg_id, w[idx[0]].stripe_idx, l->k, FAKE_PAYLOAD);
	prm.check_only = true;
	ck_assert_int_eq(scrub_run(&t, &prm, &st), 0);
	/* The open group was sealed by the failure: everything counts. */
	ck_assert_uint_ge(st.stripes_checked, sealed);
	ck_assert_uint_eq(st.err_read + st.err_checksum, 0);
	ck_assert_uint_eq(st.err_parity, 1);
	ck_assert_uint_lt(st.read_bytes,
			  st.stripes_checked * l->width * l->slot_bytes);
	tarr_free(&t);
	free(w);
}
END_TEST

/* The rate limit holds stripes back and the bytes read stay within it. */
START_TEST(test_rate_limit)
{
	const struct geo *g = &geos[0];
	const struct za_stripe_layout *l;
	struct za_scrub_params prm = { 0 };
	struct za_scrub_status st;
	struct tarr t;
	struct wrec *w = calloc(NW, sizeof(*w));
	double allowed;

	rng = 0x7a7e0000ull;
	tarr_make(&t, g);
	l = za_engine_layout(t.e);
	write_stripes(&t, w, NW);
	ck_assert_int_eq(scrub_run(&t, NULL, &st), 0);
	ck_assert_uint_eq(st.job.throttled, 0);
	/* About a quarter of a second for the whole run. */
	prm.rate_bps = st.read_bytes * 4;
	ck_assert_int_eq(scrub_run(&t, &prm, &st), 0);
	ck_assert_uint_gt(st.job.throttled, 0);
	ck_assert_uint_eq(st.job.rate_limit_bps, prm.rate_bps);
	/* The bucket starts empty: never more than the rate allows over
	 * the run (a slow machine only makes this easier). */
	allowed = (double)prm.rate_bps * (double)st.job.elapsed_ns / 1e9 +
		  (double)l->width * l->slot_bytes;
	ck_assert_msg((double)st.read_bytes <= allowed,
		      "read %llu bytes, the limit allowed %.0f",
		      (unsigned long long)st.read_bytes, allowed);
	tarr_free(&t);
	free(w);
}
END_TEST

/* What moved() reported: positions, and stripes checked at each. */
static struct {
	struct za_scrub *s;
	unsigned n;
	uint64_t pos[64], checked[64];
} mv;

static void on_moved(struct za_scrub *s, uint64_t position, void *priv)
{
	struct za_scrub_status st;

	(void)priv;
	ck_assert_ptr_eq(s, mv.s);
	za_scrub_status(s, &st);
	ck_assert_uint_eq(st.position, position);
	if (mv.n < 64) {
		mv.pos[mv.n] = position;
		mv.checked[mv.n] = st.stripes_checked;
	}
	mv.n++;
}

/*
 * The owner is told each time the position moves, in order, from early
 * in a rate-limited run with several segments at once (the oldest
 * segment is served first, so the position does not wait for the end);
 * a run given a position says it started there.
 */
START_TEST(test_position_reported)
{
	const struct geo *g = &geos[0];
	struct za_scrub_params prm = { 0 };
	struct za_scrub_status st;
	struct za_scrub *s;
	struct sctx c;
	struct tarr t;
	struct wrec *w = calloc(NW, sizeof(*w));
	unsigned i, sealed;

	rng = 0x90510000ull;
	tarr_make(&t, g);
	sealed = write_stripes(&t, w, NW);
	ck_assert_int_eq(scrub_run(&t, NULL, &st), 0);
	ck_assert_uint_eq(st.stripes_checked, sealed);
	ck_assert_uint_ge(st.segs_total, 3);

	memset(&mv, 0, sizeof(mv));
	prm.rate_bps = st.read_bytes * 4; /* about a quarter of a second */
	/*
	 * One segment at a time. The position moves when the lowest running
	 * segment is done; with several side by side at a shared rate, how
	 * far the others got by then is up to scheduling (148 of 240 once,
	 * under the sanitizers on a loaded machine), and the bound below
	 * would hold by luck.
	 */
	prm.max_segs = 1;
	prm.moved = on_moved;
	scrub_new(&t, &prm, &c, &s);
	mv.s = s;
	ck_assert_int_eq(za_scrub_start(s), 0);
	scrub_wait(&t, s, &c);
	ck_assert_int_eq(c.result, 0);
	za_scrub_status(s, &st);
	ck_assert_uint_eq(st.position, 0); /* complete: not reported */
	ck_assert_uint_eq(st.start_position, 0);
	ck_assert_uint_ge(mv.n, 2);
	ck_assert_uint_le(mv.n, 64);
	for (i = 1; i < mv.n; i++) {
		ck_assert_uint_gt(mv.pos[i], mv.pos[i - 1]);
		ck_assert_uint_ge(mv.checked[i], mv.checked[i - 1]);
	}
	ck_assert_msg(mv.checked[0] * 2 <= sealed,
		      "the position first moved after %llu of %u stripes",
		      (unsigned long long)mv.checked[0], sealed);
	za_scrub_free(s);

	/* Given a position, as after a restart: it says so. */
	memset(&prm, 0, sizeof(prm));
	prm.start_after_seg = mv.pos[0];
	ck_assert_int_eq(scrub_run(&t, &prm, &st), 0);
	ck_assert_uint_eq(st.start_position, mv.pos[0]);
	ck_assert_uint_lt(st.stripes_checked, sealed);
	tarr_free(&t);
	free(w);
}
END_TEST

/*
 * Pause holds the checks; stop keeps the position; a new job given that
 * position (as after a restart) scrubs only the segments after it, and
 * completing the pass sets it back to 0.
 */
START_TEST(test_pause_stop_resume)
{
	const struct geo *g = &geos[0];
	struct za_scrub_params prm = { 0 };
	struct za_scrub_status st, st0;
	struct za_scrub *s;
	struct sctx c;
	struct tarr t;
	struct wrec *w = calloc(NW, sizeof(*w));
	uint64_t pos, after = 0;
	unsigned i, sealed, i_lo = NW, i_hi = NW;
	bool never = false;

	rng = 0x57090000ull;
	tarr_make(&t, g);
	sealed = write_stripes(&t, w, NW);

	prm.max_segs = 1;
	prm.window = 1;
	scrub_new(&t, &prm, &c, &s);
	ck_assert_int_eq(za_scrub_start(s), 0);
	do {
		za_io_run_once(t.io);
		za_scrub_status(s, &st);
	} while (st.stripes_checked < 3 && !c.done);
	za_scrub_pause(s);
	za_scrub_status(s, &st0);
	ck_assert_int_eq(st0.job.state, ZA_JOB_PAUSED);
	za_io_run_until(t.io, &never, 100ull * 1000 * 1000);
	za_scrub_status(s, &st);
	/* At most what was in flight (one segment, window one). */
	ck_assert_uint_le(st.stripes_checked, st0.stripes_checked + 1);
	ck_assert(!c.done);
	za_scrub_resume(s);
	do {
		za_io_run_once(t.io);
		za_scrub_status(s, &st);
	} while (st.segs_done < 1 && !c.done);
	ck_assert(!c.done);
	za_scrub_stop(s);
	scrub_wait(&t, s, &c);
	ck_assert_int_eq(c.result, -ECANCELED);
	pos = za_scrub_position(s);
	ck_assert_uint_gt(pos, 0);
	za_scrub_status(s, &st);
	ck_assert_uint_eq(st.position, pos);
	ck_assert_uint_lt(st.stripes_checked, sealed);
	za_scrub_free(s);

	/* Damage one stripe before the position and one after it. */
	for (i = 0; i < NW; i++) {
		if (!w[i].sealed)
			continue;
		if (w[i].seg_id <= pos && i_lo == NW)
			i_lo = i;
		if (w[i].seg_id > pos) {
			i_hi = i;
			after++;
		}
	}
	ck_assert_uint_lt(i_lo, NW);
	ck_assert_uint_lt(i_hi, NW);
	rot(&t, w[i_lo].seg_id, w[i_lo].stripe_idx, 0, ROT_PAYLOAD);
	rot(&t, w[i_hi].seg_id, w[i_hi].stripe_idx, 1, ROT_PAYLOAD);

	memset(&prm, 0, sizeof(prm));
	prm.start_after_seg = pos;
	ck_assert_int_eq(scrub_run(&t, &prm, &st), 0);
	ck_assert_uint_eq(st.stripes_checked, after);
	ck_assert_uint_eq(st.err_checksum, 1);
	ck_assert_uint_eq(st.cols_repaired, 1);
	ck_assert_uint_eq(st.position, 0);
	/* The next pass starts over and finds the other one. */
	ck_assert_int_eq(scrub_run(&t, NULL, &st), 0);
	ck_assert_uint_eq(st.stripes_checked, sealed);
	ck_assert_uint_eq(st.err_checksum, 1);
	ck_assert_int_eq(scrub_run(&t, NULL, &st), 0);
	assert_clean(&st);
	tarr_free(&t);
	free(w);
}
END_TEST

/* ---- with a volume: liveness ---- */

#define VBLK 2048u

static void vol_fill(struct tarr *t, uint8_t *model, uint64_t from, uint64_t n,
		     uint64_t seed)
{
	uint64_t b;

	for (b = from; b < from + n; b++)
		fill_block(model + b * 4096, seed, (uint32_t)b);
	for (b = from; b < from + n; b += 64)
		ck_assert_int_eq(
			za_volume_write_sync(
				t->v, b * 4096,
				(from + n - b < 64 ? from + n - b : 64) * 4096,
				model + b * 4096, false),
			0);
	ck_assert_int_eq(za_volume_flush_sync(t->v), 0);
}

/*
 * Blocks overwritten leave dead stripes: rot in a dead stripe is never
 * read; rot in a live one is repaired, the moved column writing the dead
 * stripes as holes; the volume reads back exactly and scrubs clean.
 */
START_TEST(test_volume_liveness)
{
	const struct geo *g = &geos[0];
	struct za_volume_params vp = { 0 };
	struct za_scrub_params prm = { 0 };
	struct za_scrub_status st, all;
	struct tarr t;
	uint8_t *model, *buf;
	uint64_t ids[64], seg0 = 0, grp0 = UINT64_MAX;
	struct za_group_info *gi = malloc(sizeof(*gi));
	unsigned n, i;
	uint8_t slot[4096 * 8];
	const struct za_stripe_layout *l;

	rng = 0x7a110000ull;
	tarr_make(&t, g);
	l = za_engine_layout(t.e);
	ck_assert_uint_le(l->slot_bytes, sizeof(slot));
	vp.eng = t.e;
	vp.size_bytes = (uint64_t)VBLK * 4096;
	vp.ckpt_interval_bytes = UINT64_MAX;
	ck_assert_int_eq(za_volume_new(t.io, &vp, &t.v), 0);
	model = calloc(VBLK, 4096);
	ck_assert_ptr_nonnull(model);
	vol_fill(&t, model, 0, VBLK, 1);
	/* The first data group holds block 0 at its stripe 0. */
	n = za_engine_groups(t.e, ids, 64);
	ck_assert_uint_le(n, 64);
	for (i = 0; i < n; i++) {
		ck_assert_int_eq(za_engine_group_info(t.e, ids[i], gi), 0);
		if (gi->stream == ZA_STREAM_DATA && ids[i] < grp0) {
			grp0 = ids[i];
			seg0 = gi->seg_ids[0];
		}
	}
	ck_assert_int_eq(za_engine_group_info(t.e, grp0, gi), 0);
	ck_assert(!gi->taking);
	slot_io(&t, seg0, 0, 0, slot, false);
	ck_assert_uint_eq(za_stripe_hdr_lba(slot, 0), 0);
	/* Its first 40 stripes die. */
	vol_fill(&t, model, 0, 40ull * l->data_blocks, 2);

	ck_assert_int_eq(scrub_run(&t, NULL, &all), 0);
	assert_clean(&all);
	rot(&t, seg0, 3, 0, ROT_PAYLOAD); /* dead */
	ck_assert_int_eq(scrub_run(&t, NULL, &st), 0);
	assert_clean(&st);
	ck_assert_uint_eq(st.stripes_checked, all.stripes_checked);
	/* Without the volume every written stripe counts. */
	{
		struct za_volume *v = t.v;

		t.v = NULL;
		prm.check_only = true;
		ck_assert_int_eq(scrub_run(&t, &prm, &st), 0);
		t.v = v;
		ck_assert_uint_ge(st.stripes_checked, all.stripes_checked + 40);
		ck_assert_uint_eq(st.err_checksum, 1);
	}
	rot(&t, seg0, 45, 1, ROT_PAYLOAD); /* live */
	ck_assert_int_eq(scrub_run(&t, NULL, &st), 0);
	ck_assert_uint_eq(st.err_checksum, 1);
	ck_assert_uint_eq(st.cols_repaired, 1);
	ck_assert_uint_eq(st.stripes_checked, all.stripes_checked);
	ck_assert_int_eq(scrub_run(&t, NULL, &st), 0);
	assert_clean(&st);
	buf = malloc((size_t)VBLK * 4096);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(
		za_volume_read_sync(t.v, 0, (uint64_t)VBLK * 4096, buf), 0);
	ck_assert(!memcmp(buf, model, (size_t)VBLK * 4096));
	free(buf);
	free(model);
	free(gi);
	tarr_free(&t);
}
END_TEST

static void quiet(enum za_log_level lv, const char *msg)
{
	(void)lv;
	(void)msg;
}

int main(void)
{
	Suite *s = suite_create("scrub");
	TCase *tc = tcase_create("scrub");
	int ng = (int)(sizeof(geos) / sizeof(geos[0]));

	/* Damage is the point here: keep the expected warnings quiet. */
	if (!getenv("ZA_TEST_VERBOSE"))
		za_log_set_sink(quiet);
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_clean, 0, ng);
	tcase_add_loop_test(tc, test_rot_repaired, 0, ng);
	tcase_add_loop_test(tc, test_parity_inconsistent, 0, ng);
	tcase_add_test(tc, test_lost_member_skipped);
	tcase_add_test(tc, test_rate_limit);
	tcase_add_test(tc, test_pause_stop_resume);
	tcase_add_test(tc, test_position_reported);
	tcase_add_test(tc, test_volume_liveness);
	suite_add_tcase(s, tc);
	return trun(s);
}
