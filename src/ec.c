// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ec.c - k+p erasure coding through ISA-L: a Cauchy encode matrix and its
 * expanded encode tables built once per geometry, and a bounded cache of
 * decode tables keyed by erasure pattern (the k chunks read, the chunks
 * rebuilt). Any k rows of a Cauchy matrix are invertible, so every pattern
 * of up to p losses decodes; Vandermonde (gf_gen_rs_matrix) is not MDS for
 * some wide codes and is never used. It logs only the impossible (a
 * singular decode matrix): -EIO for too few chunks is an expected answer on
 * a degraded array, and only the caller knows which segment and stripe it
 * concerns, so the caller logs it.
 */
#include <assert.h>
#include <errno.h>
#include <isa-l.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "ec.h"
#include "log.h"

/*
 * Decode table cache: open addressing over a fixed array, probing a short
 * window and replacing the least recently used entry of that window when it
 * is full. 128 slots leave room for the 78 patterns of up to 2 losses in a
 * 10+2 code, and for the hot patterns of wider ones (a degraded array has
 * few); at most 128 * 58 * 6 * 32 bytes (1.4 MiB) for the widest code.
 */
#define EC_CACHE_SLOTS 128
#define EC_CACHE_PROBE 8

struct ec_tables {
	uint64_t src_mask; /* 0: slot empty (k >= 1, so never a real key) */
	uint64_t want_mask;
	uint64_t last_use;
	unsigned char *tbls; /* k * p * 32 bytes, allocated on first use */
};

struct za_ec {
	unsigned k, p;
	unsigned char *matrix; /* (k + p) x k, Cauchy; top k rows identity */
	unsigned char *enc_tbls; /* k * p * 32 bytes for the p parity rows */
	uint64_t tick;
	unsigned nr_cached;
	struct ec_tables cache[EC_CACHE_SLOTS];
	struct za_ec_stats stats;
};

static size_t tbls_bytes(unsigned k, unsigned rows)
{
	return (size_t)k * rows * 32;
}

int za_ec_new(unsigned k, unsigned p, struct za_ec **out)
{
	struct za_ec *ec;

	if (k < 1 || p < 1 || p > ZA_EC_MAX_PARITY || k > ZA_EC_MAX_WIDTH ||
	    k + p > ZA_EC_MAX_WIDTH)
		return -EINVAL;
	ec = calloc(1, sizeof(*ec));
	if (!ec)
		return -ENOMEM;
	ec->k = k;
	ec->p = p;
	ec->matrix = malloc((size_t)(k + p) * k);
	if (!ec->matrix)
		goto err_matrix;
	ec->enc_tbls = malloc(tbls_bytes(k, p));
	if (!ec->enc_tbls)
		goto err_tbls;
	gf_gen_cauchy1_matrix(ec->matrix, (int)(k + p), (int)k);
	ec_init_tables((int)k, (int)p, &ec->matrix[k * k], ec->enc_tbls);
	*out = ec;
	return 0;

err_tbls:
	free(ec->matrix);
err_matrix:
	free(ec);
	return -ENOMEM;
}

void za_ec_free(struct za_ec *ec)
{
	unsigned i;

	if (!ec)
		return;
	for (i = 0; i < EC_CACHE_SLOTS; i++)
		free(ec->cache[i].tbls);
	free(ec->enc_tbls);
	free(ec->matrix);
	free(ec);
}

unsigned za_ec_k(const struct za_ec *ec)
{
	return ec->k;
}

unsigned za_ec_p(const struct za_ec *ec)
{
	return ec->p;
}

/*
 * ec_encode_data() takes an int length: feed longer buffers in pieces. The
 * pointer arrays are not modified by ISA-L; its prototype just lacks const.
 */
static void ec_run(size_t len, unsigned k, unsigned rows, unsigned char *tbls,
		   uint8_t *const *src, uint8_t *const *dst)
{
	unsigned char *s[ZA_EC_MAX_WIDTH], *d[ZA_EC_MAX_WIDTH];
	size_t off = 0;
	unsigned i;

	if (len <= INT_MAX) {
		if (len)
			ec_encode_data((int)len, (int)k, (int)rows, tbls,
				       (unsigned char **)src,
				       (unsigned char **)dst);
		return;
	}
	while (off < len) {
		size_t n = len - off > (1u << 30) ? (1u << 30) : len - off;

		for (i = 0; i < k; i++)
			s[i] = src[i] + off;
		for (i = 0; i < rows; i++)
			d[i] = dst[i] + off;
		ec_encode_data((int)n, (int)k, (int)rows, tbls, s, d);
		off += n;
	}
}

void za_ec_encode(struct za_ec *ec, size_t len, uint8_t *const *chunks)
{
	ec_run(len, ec->k, ec->p, ec->enc_tbls, chunks, chunks + ec->k);
	ec->stats.encodes++;
}

static uint64_t width_mask(unsigned n)
{
	return n >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << n) - 1;
}

static unsigned slot_hash(uint64_t src, uint64_t want)
{
	/* splitmix64 finaliser: masks differ in few bits, spread them. */
	uint64_t x = src ^ (want * 0x9e3779b97f4a7c15ull);

	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	x ^= x >> 31;
	return (unsigned)(x % EC_CACHE_SLOTS);
}

/*
 * Build the decode rows for @want_mask from the k chunks in @src_mask into
 * @tbls. Returns 0, or -EIO if the chosen rows do not invert (impossible
 * for a Cauchy matrix; kept as an error, not an assert, so that a broken
 * ISA-L build cannot corrupt data silently).
 */
static int build_decode_tables(struct za_ec *ec, uint64_t src_mask,
			       uint64_t want_mask, unsigned char *tbls)
{
	unsigned k = ec->k, n = ec->k + ec->p;
	unsigned char b[ZA_EC_MAX_WIDTH * ZA_EC_MAX_WIDTH];
	unsigned char inv[ZA_EC_MAX_WIDTH * ZA_EC_MAX_WIDTH];
	unsigned char rows[ZA_EC_MAX_PARITY * ZA_EC_MAX_WIDTH];
	unsigned r = 0, w = 0, idx, i, j;

	/* b: the encode rows of the chunks we read (copy: invert destroys). */
	for (idx = 0; idx < n; idx++)
		if (src_mask & ((uint64_t)1 << idx))
			memcpy(&b[k * r++], &ec->matrix[k * idx], k);
	assert(r == k);
	if (gf_invert_matrix(b, inv, (int)k) < 0) {
		za_log_err(
			"ec %u+%u: decode matrix for sources %#llx is singular",
			ec->k, ec->p, (unsigned long long)src_mask);
		return -EIO;
	}
	for (idx = 0; idx < n; idx++) {
		if (!(want_mask & ((uint64_t)1 << idx)))
			continue;
		assert(w < ec->p);
		if (idx < k) {
			/* A data chunk: its row of the inverse. */
			memcpy(&rows[k * w], &inv[k * idx], k);
		} else {
			/* A parity chunk: its encode row times the inverse. */
			for (i = 0; i < k; i++) {
				unsigned char s = 0;

				for (j = 0; j < k; j++)
					s ^= gf_mul(ec->matrix[k * idx + j],
						    inv[k * j + i]);
				rows[k * w + i] = s;
			}
		}
		w++;
	}
	ec_init_tables((int)k, (int)w, rows, tbls);
	return 0;
}

/* Find or build the tables for a pattern; NULL with *err set on failure. */
static unsigned char *get_decode_tables(struct za_ec *ec, uint64_t src_mask,
					uint64_t want_mask, int *err)
{
	unsigned h = slot_hash(src_mask, want_mask);
	struct ec_tables *victim = NULL, *e;
	unsigned i;
	int ret;

	ec->tick++;
	/*
	 * Always scan the whole window (8 compares): a slot emptied by a
	 * failed build then cannot hide a key stored beyond it.
	 */
	for (i = 0; i < EC_CACHE_PROBE; i++) {
		e = &ec->cache[(h + i) % EC_CACHE_SLOTS];
		if (e->src_mask == src_mask && e->want_mask == want_mask) {
			e->last_use = ec->tick;
			ec->stats.table_hits++;
			return e->tbls;
		}
		if (victim && !victim->src_mask)
			continue; /* keep the first empty slot */
		if (!victim || !e->src_mask || e->last_use < victim->last_use)
			victim = e;
	}
	assert(victim);
	if (!victim->tbls) {
		victim->tbls = malloc(tbls_bytes(ec->k, ec->p));
		if (!victim->tbls) {
			*err = -ENOMEM;
			return NULL;
		}
	}
	/* Forget the old key first: a failed build must not leave it valid. */
	if (victim->src_mask)
		ec->nr_cached--;
	victim->src_mask = 0;
	ret = build_decode_tables(ec, src_mask, want_mask, victim->tbls);
	if (ret) {
		*err = ret;
		return NULL;
	}
	victim->src_mask = src_mask;
	victim->want_mask = want_mask;
	victim->last_use = ec->tick;
	ec->nr_cached++;
	ec->stats.table_misses++;
	return victim->tbls;
}

int za_ec_reconstruct(struct za_ec *ec, size_t len, uint8_t *const *chunks,
		      uint64_t avail_mask, uint64_t want_mask)
{
	uint8_t *src[ZA_EC_MAX_WIDTH], *dst[ZA_EC_MAX_PARITY];
	unsigned n = ec->k + ec->p, nr_src = 0, nr_dst = 0, idx;
	uint64_t src_mask = 0;
	unsigned char *tbls;
	int err = 0;

	/* Masks may come from on-disk state: check, never assert. */
	if ((avail_mask | want_mask) & ~width_mask(n))
		return -EINVAL;
	if ((avail_mask & want_mask) || !want_mask)
		return -EINVAL;
	if ((unsigned)__builtin_popcountll(avail_mask) < ec->k)
		return -EIO;

	for (idx = 0; idx < n; idx++) {
		uint64_t bit = (uint64_t)1 << idx;

		if ((avail_mask & bit) && nr_src < ec->k) {
			assert(chunks[idx]);
			src[nr_src++] = chunks[idx];
			src_mask |= bit;
		} else if (want_mask & bit) {
			/* Disjoint from >= k available: at most p wanted. */
			assert(nr_dst < ec->p);
			assert(chunks[idx]);
			dst[nr_dst++] = chunks[idx];
		}
	}

	tbls = get_decode_tables(ec, src_mask, want_mask, &err);
	if (!tbls)
		return err;
	ec_run(len, ec->k, nr_dst, tbls, src, dst);
	ec->stats.decodes++;
	return 0;
}

unsigned za_ec_cached_tables(const struct za_ec *ec)
{
	return ec->nr_cached;
}

void za_ec_get_stats(const struct za_ec *ec, struct za_ec_stats *st)
{
	*st = ec->stats;
}
