// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * engine-scrub.c - the check of one stripe: every readable column read
 * whole and verified, and the verified columns beyond the first k
 * recomputed from those k and compared. It writes nothing: scrub.c
 * repairs what it finds by moving the column (engine-rebuild.c).
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "container.h"
#include "crc.h"
#include "ec.h"
#include "log.h"
#include "engine-int.h"

/* ---- scrub: check one stripe ---- */

/*
 * A read stops at what it needs: the wanted blocks of one column, or k
 * verified columns. Scrub reads every readable column of a stripe whole
 * instead, because two kinds of damage hide from reads: rot in a column
 * no read touches (parity, while the data columns are healthy), and a
 * parity column whose CRCs hold but whose content is not the code of the
 * data (a write the drive acknowledged and misplaced, a bug). The first
 * k verified columns (the data columns when they all verify) are taken
 * as the truth and every other verified column is recomputed from them,
 * payload and LBA table both, and compared. Nothing is written here: the
 * caller repairs by moving the column (za_engine_col_rebuild(), move and
 * decode), the only repair a zoned drive allows.
 */

struct sc_priv {
	struct za_stripe_check *sc;
	struct za_engine *e;
	struct za_segment *g;
	struct group *grp;
	uint8_t *buf; /* width slots */
	struct za_dev_req *reqs; /* width * parts */
	unsigned parts;
	unsigned col_pending[ZA_EC_MAX_WIDTH];
	uint64_t failed; /* columns a read part failed on */
	unsigned outstanding; /* columns being read */
	struct za_io_defer defer;
};

/*
 * Check column @c of the stripe: 0 verified, -ENODATA a hole a rebuild
 * wrote where the stripe was dead, -EBADMSG anything else wrong.
 */
static int sc_verify(const struct za_engine *e, const struct za_segment *g,
		     uint32_t stripe_idx, unsigned c, const uint8_t *slot,
		     struct za_stripe_hdr *h)
{
	const struct za_stripe_layout *l = &g->st->l;
	uint32_t j;
	int ret = eng_hdr_col_check(e, g, stripe_idx, c, slot, h);

	if (ret)
		return ret;
	for (j = 0; j < l->col_blocks; j++)
		if (za_crc32c(slot + ZA_STRIPE_HDR_BYTES + (uint64_t)j * 4096,
			      4096) != h->blk_crc[j])
			return -EBADMSG;
	return 0;
}

/*
 * Recompute the verified columns outside the first k verified ones from
 * those k and compare; mark the ones that differ. 0 or -ENOMEM.
 */
static int sc_compare(struct za_engine *e, struct za_stripe_check *sc)
{
	struct sc_priv *sp = sc->priv_eng;
	const struct za_segment *g = sp->g;
	const struct za_stripe_layout *l = &g->st->l;
	uint8_t *pay[ZA_EC_MAX_WIDTH] = { 0 }, *tab[ZA_EC_MAX_WIDTH] = { 0 };
	uint64_t base = 0, others = 0,
		 unit = l->col_payload_bytes + ZA_STRIPE_LBA_BYTES;
	uint8_t *scratch = NULL;
	unsigned c, have = 0, n = 0;
	int ret;

	for (c = 0; c < l->width; c++) {
		if (!(sc->good_cols & (1ull << c)))
			continue;
		if (have < l->k) {
			uint8_t *slot = sp->buf + (size_t)c * l->slot_bytes;

			pay[c] = slot + ZA_STRIPE_HDR_BYTES;
			tab[c] = slot + ZA_STRIPE_LBA_OFF;
			base |= 1ull << c;
			have++;
		} else {
			others |= 1ull << c;
			n++;
		}
	}
	if (!n)
		return 0;
	if (posix_memalign((void **)&scratch, 4096, n * unit))
		return -ENOMEM;
	for (c = 0, n = 0; c < l->width; c++)
		if (others & (1ull << c)) {
			pay[c] = scratch + n * unit;
			tab[c] = pay[c] + l->col_payload_bytes;
			n++;
		}
	ret = za_ec_reconstruct(g->st->ec, l->col_payload_bytes, pay, base,
				others);
	if (!ret)
		ret = za_ec_reconstruct(g->st->ec, ZA_STRIPE_LBA_BYTES, tab,
					base, others);
	if (ret) {
		free(scratch);
		return ret;
	}
	sc->compared_cols = others;
	for (c = 0; c < l->width; c++) {
		const uint8_t *slot = sp->buf + (size_t)c * l->slot_bytes;
		struct member *m = &e->m[g->member[c]];

		if (!(others & (1ull << c)))
			continue;
		if (!memcmp(pay[c], slot + ZA_STRIPE_HDR_BYTES,
			    l->col_payload_bytes) &&
		    !memcmp(tab[c], slot + ZA_STRIPE_LBA_OFF,
			    ZA_STRIPE_LBA_BYTES))
			continue;
		sc->inconsistent_cols |= 1ull << c;
		sc->good_cols &= ~(1ull << c);
		za_log_warn("%s: zone %u stripe %u: column %u of segment %llu "
			    "verifies but disagrees with the others",
			    m->dev ? m->dev->path : "(missing)", g->zone[c],
			    sc->stripe_idx, c, (unsigned long long)g->id);
	}
	free(scratch);
	return 0;
}

/* Every column is in: verify, check they are one write, compare. */
static void sc_finish(struct za_stripe_check *sc)
{
	struct sc_priv *sp = sc->priv_eng;
	struct za_engine *e = sp->e;
	const struct za_segment *g = sp->g;
	struct group *grp = sp->grp;
	const struct za_stripe_layout *l = &g->st->l;
	uint64_t seqs[ZA_EC_MAX_WIDTH] = { 0 };
	unsigned c, o, best = 0, best_n = 0;
	int result = 0;

	for (c = 0; c < l->width; c++) {
		const uint8_t *slot = sp->buf + (size_t)c * l->slot_bytes;
		struct member *m = &e->m[g->member[c]];
		struct za_stripe_hdr h;
		int ret;

		if ((sc->lost_cols | sc->err_read_cols) & (1ull << c))
			continue;
		ret = sc_verify(e, g, sc->stripe_idx, c, slot, &h);
		if (ret == -ENODATA) {
			sc->hole_cols |= 1ull << c;
		} else if (ret) {
			sc->err_crc_cols |= 1ull << c;
			m->st.err_checksum++;
			za_log_warn("%s: zone %u stripe %u: checksum mismatch "
				    "in column %u (scrub)",
				    m->dev->path, g->zone[c], sc->stripe_idx,
				    c);
		} else {
			sc->good_cols |= 1ull << c;
			seqs[c] = h.seq;
		}
	}
	/* Columns of another write than most are stale: not this stripe. */
	for (c = 0; c < l->width; c++) {
		unsigned n = 0;

		if (!(sc->good_cols & (1ull << c)))
			continue;
		for (o = 0; o < l->width; o++)
			n += (sc->good_cols & (1ull << o)) &&
			     seqs[o] == seqs[c];
		if (n > best_n) {
			best_n = n;
			best = c;
		}
	}
	for (c = 0; c < l->width; c++)
		if ((sc->good_cols & (1ull << c)) && seqs[c] != seqs[best]) {
			sc->good_cols &= ~(1ull << c);
			sc->err_crc_cols |= 1ull << c;
			e->m[g->member[c]].st.err_checksum++;
			za_log_warn("%s: zone %u stripe %u: column %u holds "
				    "sequence %llu, its stripe %llu",
				    e->m[g->member[c]].dev->path, g->zone[c],
				    sc->stripe_idx, c,
				    (unsigned long long)seqs[c],
				    (unsigned long long)seqs[best]);
		}
	if ((unsigned)__builtin_popcountll(sc->good_cols) >= l->k) {
		result = sc_compare(e, sc);
	} else {
		za_log_err("segment %llu stripe %u: only %u of %u columns "
			   "verify: more than %u lost",
			   (unsigned long long)g->id, sc->stripe_idx,
			   (unsigned)__builtin_popcountll(sc->good_cols),
			   l->width, l->p);
		result = -EIO;
	}
	free(sp->buf);
	free(sp->reqs);
	free(sp);
	sc->priv_eng = NULL;
	e->reads--;
	if (--grp->readers == 0 && grp->releasing && !grp->rel_reqs)
		eng_group_release_start(e, grp);
	sc->done(sc, result);
}

static void sc_read_done(struct za_dev_req *req)
{
	struct za_stripe_check *sc = req->priv;
	struct sc_priv *sp = sc->priv_eng;
	struct za_engine *e = sp->e;
	const struct za_segment *g = sp->g;
	unsigned c = (unsigned)(req - sp->reqs) / sp->parts;

	if (req->result) {
		bool first = !(sp->failed & (1ull << c));

		sp->failed |= 1ull << c;
		eng_req_failed(e, g->member[c], g->zone[c], req, first,
			       ENG_REQ_SCRUB_READ);
	}
	if (--sp->col_pending[c])
		return;
	if (sp->failed & (1ull << c))
		sc->err_read_cols |= 1ull << c;
	if (--sp->outstanding == 0)
		sc_finish(sc);
}

static void sc_none(struct za_io_defer *d)
{
	struct sc_priv *sp = container_of(d, struct sc_priv, defer);

	sc_finish(sp->sc);
}

int za_engine_stripe_check(struct za_engine *e, struct za_stripe_check *sc)
{
	struct za_segment *g = eng_seg_find(e, sc->seg_id);
	const struct za_stripe_layout *l;
	struct sc_priv *sp;
	unsigned c, i;

	if (!g || g->grp->releasing)
		return -ENOENT;
	l = &g->st->l;
	if (!sc->done || sc->stripe_idx >= g->next_stripe)
		return -EINVAL;
	if (g->taking || g->inflight)
		return -EBUSY;
	sp = calloc(1, sizeof(*sp));
	if (!sp)
		return -ENOMEM;
	sp->sc = sc;
	sp->e = e;
	sp->g = g;
	sp->grp = g->grp;
	sp->parts = (unsigned)((l->slot_bytes + e->io_max - 1) / e->io_max);
	if (posix_memalign((void **)&sp->buf, 4096,
			   (size_t)l->width * l->slot_bytes))
		sp->buf = NULL;
	sp->reqs = calloc((size_t)l->width * sp->parts, sizeof(*sp->reqs));
	if (!sp->buf || !sp->reqs) {
		free(sp->buf);
		free(sp->reqs);
		free(sp);
		return -ENOMEM;
	}
	sc->lost_cols = sc->hole_cols = sc->err_read_cols = 0;
	sc->err_crc_cols = sc->inconsistent_cols = 0;
	sc->good_cols = sc->compared_cols = 0;
	sc->read_bytes = 0;
	sc->priv_eng = sp;
	e->reads++;
	g->grp->readers++; /* pinned against release */
	for (c = 0; c < l->width; c++) {
		struct member *m = &e->m[g->member[c]];
		uint64_t base = (uint64_t)g->zone[c] * m->zone_bytes +
				(uint64_t)sc->stripe_idx * l->slot_bytes;

		/* A lost member, or a moved column that stops before this
		 * stripe (it was dead): nothing to read, nothing wrong. */
		if (!eng_readable(m) || sc->stripe_idx >= g->col_upto[c]) {
			sc->lost_cols |= 1ull << c;
			continue;
		}
		sp->col_pending[c] = sp->parts;
		sp->outstanding++;
		sc->read_bytes += l->slot_bytes;
		eng_slot_reqs(e, &sp->reqs[c * sp->parts], sp->parts,
			      ZA_DEV_OP_READ, base, l->slot_bytes,
			      sp->buf + (size_t)c * l->slot_bytes, sc_read_done,
			      sc);
		for (i = 0; i < sp->parts; i++) /* scrub: background */
			sp->reqs[c * sp->parts + i].prio = ZA_DEV_PRIO_LOW;
	}
	if (!sp->outstanding) { /* done() still on the loop, never here */
		sp->defer.fn = sc_none;
		za_io_defer(e->io, &sp->defer);
		return 0;
	}
	/* Submit only now: a completion must not see a partial count. */
	for (c = 0; c < l->width; c++)
		if (sp->col_pending[c])
			for (i = 0; i < sp->parts; i++)
				za_dev_submit(e->m[g->member[c]].dev,
					      &sp->reqs[c * sp->parts + i]);
	return 0;
}
