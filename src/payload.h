/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * payload.h - a counted reference to a WRITE payload that stays where it
 * arrived.
 *
 * Why: the sequential write path copied every payload from the receive
 * ring into a stripe buffer, a fifth of the loop's time (docs/design.md
 * 8.6). With a reference, the volume records where each block is and the
 * engine's worker reads it from there for the parity, the checksums and
 * the drives. The owner (the NBD receive ring) keeps the bytes untouched
 * until the last reference is dropped. Loop thread only: the count is
 * not atomic, and release() runs on the thread that drops the last one.
 */
#ifndef ZA_PAYLOAD_H
#define ZA_PAYLOAD_H

struct za_payload {
	unsigned refs;
	/* Sync, loop thread: the bytes are no longer referred to. */
	void (*release)(struct za_payload *pl);
};

static inline struct za_payload *za_payload_get(struct za_payload *pl)
{
	pl->refs++;
	return pl;
}

static inline void za_payload_put(struct za_payload *pl)
{
	if (pl && !--pl->refs)
		pl->release(pl);
}

#endif /* ZA_PAYLOAD_H */
