/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * ec.h - k+p erasure coding with ISA-L over Cauchy matrices.
 *
 * One struct za_ec per geometry (k data + p parity chunks, k >= 1,
 * 1 <= p <= ZA_EC_MAX_PARITY, k + p <= ZA_EC_MAX_WIDTH). It encodes parity
 * and reconstructs any missing chunks from any k that survive. Decode
 * tables are cached per erasure pattern (which k chunks are read, which are
 * rebuilt), so a degraded array pays for gf_invert_matrix() once per
 * pattern, not once per stripe.
 *
 * It knows nothing of stripes, headers or devices: callers hand it equal
 * length byte buffers, one per chunk, in chunk order (data 0..k-1, parity
 * k..k+p-1). Not thread-safe: one struct za_ec per thread.
 */
#ifndef ZA_EC_H
#define ZA_EC_H

#include <stddef.h>
#include <stdint.h>

#define ZA_EC_MAX_PARITY 6
#define ZA_EC_MAX_WIDTH 64 /* chunk indices fit one uint64_t mask */

struct za_ec;

struct za_ec_stats {
	uint64_t encodes;
	uint64_t decodes;
	uint64_t table_hits; /* decode tables found in the cache */
	uint64_t table_misses; /* decode tables built */
};

/* Returns 0, -EINVAL (bad k/p) or -ENOMEM. */
int za_ec_new(unsigned k, unsigned p, struct za_ec **out);
void za_ec_free(struct za_ec *ec);
unsigned za_ec_k(const struct za_ec *ec);
unsigned za_ec_p(const struct za_ec *ec);

/*
 * Compute the p parity chunks of @len bytes from the k data chunks.
 * chunks[0..k-1] are read, chunks[k..k+p-1] are written. Any @len.
 */
void za_ec_encode(struct za_ec *ec, size_t len, uint8_t *const *chunks);

/*
 * Rebuild the chunks in @want_mask (bit i = chunk i) from the chunks in
 * @avail_mask. chunks[] has k+p entries; available ones are read, wanted
 * ones are written (each must point to @len writable bytes), others are
 * ignored and may be NULL. The first k available chunks (lowest indices)
 * are used. Returns 0; -EIO if fewer than k chunks are available (the data
 * is lost: never guessed); -EINVAL if the masks overlap or name chunks
 * beyond k+p; -ENOMEM.
 */
int za_ec_reconstruct(struct za_ec *ec, size_t len, uint8_t *const *chunks,
		      uint64_t avail_mask, uint64_t want_mask);

void za_ec_get_stats(const struct za_ec *ec, struct za_ec_stats *st);
/* Decode tables held now: bounded, whatever the number of patterns seen. */
unsigned za_ec_cached_tables(const struct za_ec *ec);

#endif /* ZA_EC_H */
