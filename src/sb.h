/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * sb.h - member superblocks: what each member drive says about the array it
 * belongs to, how that is written to the drive, and how a set of drives is
 * resolved into an array at assembly.
 *
 * Every member carries the same record (the array's identity, geometry and
 * member table, with its own identity in it), written as a log in the
 * member's first ZA_SB_ZONES zones and CRC-protected (docs/format.md,
 * "Member superblock", gives every byte). Each update bumps the generation;
 * generation g goes to superblock zone g % 2, so the other zone always
 * holds the previous good record while one is being written.
 *
 * Parsing validates everything (magic, version, lengths, ranges, CRC)
 * before anything is used: a drive's bytes are untrusted input.
 *
 * This module does not decide policy (when to fail a member, whether to
 * start degraded): it reports; array.c decides.
 */
#ifndef ZA_SB_H
#define ZA_SB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dev.h"

#define ZA_SB_ZONES 2 /* zones 0 and 1 of every member */
#define ZA_SB_MAX_MEMBERS 1024
#define ZA_SB_NAME_BYTES 64 /* array name, NUL-padded, at most 63 chars */
#define ZA_SB_HINT_BYTES 24 /* last known path of a member, truncated */
/* One record: a 4 KiB header block + 64 bytes per possible member. */
#define ZA_SB_RECORD_BYTES (4096u + ZA_SB_MAX_MEMBERS * 64u)

enum za_member_state {
	ZA_MEMBER_ONLINE = 1, /* in service */
	ZA_MEMBER_FAILED = 2, /* excluded; its data is decoded */
	ZA_MEMBER_MISSING = 3, /* not present at assembly */
	ZA_MEMBER_DRAINING = 4, /* being emptied for removal */
	ZA_MEMBER_REMOVED = 5, /* gone; slot kept so indices stay stable */
};
const char *za_member_state_str(enum za_member_state s);

enum za_ec_matrix {
	ZA_EC_MATRIX_CAUCHY = 1, /* gf_gen_cauchy1_matrix */
};

/* The array's geometry: fixed at creation. */
struct za_geom {
	uint8_t k; /* data chunks per stripe */
	uint8_t p; /* parity chunks per stripe */
	uint8_t matrix; /* enum za_ec_matrix */
	uint8_t stripe_rows; /* chunk rows sharing one stripe header */
	uint32_t chunk_bytes; /* interleave unit, multiple of 4096 */
	uint32_t lblock_bytes; /* logical block: 4096 */
	uint32_t hdr_bytes; /* stripe header block: 4096 */
};

struct za_uuid {
	uint8_t b[16];
};

/* Random (version 4) UUID from getrandom(). Returns 0 or -errno. */
int za_uuid_gen(struct za_uuid *u);
/* "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" + NUL: 37 bytes. */
void za_uuid_fmt(const struct za_uuid *u, char out[37]);
/* Returns 0 or -EINVAL. */
int za_uuid_parse(const char *s, struct za_uuid *u);
bool za_uuid_eq(const struct za_uuid *a, const struct za_uuid *b);
bool za_uuid_is_null(const struct za_uuid *u);

struct za_sb_member {
	struct za_uuid uuid;
	uint8_t state; /* enum za_member_state */
	/*
	 * 0, or 1 + the index of the member that takes this one's place
	 * (zarray replace): its columns go there, also after a restart.
	 * Only on a draining, failed or missing member.
	 */
	uint16_t replacement;
	uint32_t nr_zones;
	uint64_t capacity_bytes;
	uint64_t zone_size_bytes;
	char path_hint[ZA_SB_HINT_BYTES]; /* NUL-terminated, maybe truncated */
};

struct za_sb {
	struct za_uuid array_uuid;
	char name[ZA_SB_NAME_BYTES];
	uint64_t generation; /* >= 1; bumped on every change */
	uint64_t ctime_s; /* creation, seconds since the epoch */
	struct za_uuid member_uuid; /* this drive */
	uint32_t member_idx; /* this drive's index in members[] */
	struct za_geom geom;
	uint64_t volume_bytes; /* exported volume size (0: not yet set) */
	uint8_t volume_meta[256]; /* opaque to sb.c; owned by the volume */
	uint32_t nr_members;
	struct za_sb_member members[ZA_SB_MAX_MEMBERS];
};

/*
 * Validate a geometry: 1 <= k, 1 <= p <= 6, k + p <= 64, chunk a power of
 * two from 4 KiB to 1 MiB, stripe_rows from 1 to 255 with
 * rows * chunk <= 1 MiB, lblock and hdr 4096, matrix Cauchy.
 * Returns 0 or -EINVAL with @why (may be NULL) set to a static reason.
 */
int za_geom_check(const struct za_geom *g, const char **why);

/* Encode @sb into @buf (ZA_SB_RECORD_BYTES). Returns 0 or -EINVAL. */
int za_sb_encode(const struct za_sb *sb, void *buf, size_t len);
/*
 * Decode and validate a record. Returns 0; -ENOENT if @buf does not start
 * with the magic (a blank or foreign block); -EPROTONOSUPPORT for an
 * unknown version; -EBADMSG for a bad CRC, length or any out-of-range
 * field (a member index >= nr_members, a bad geometry, an unknown state...).
 */
int za_sb_decode(const void *buf, size_t len, struct za_sb *out);

/*
 * Superblock I/O on one member; synchronous (they run the device's loop
 * until done, so call them from outside event callbacks: assembly, create,
 * tools). The asynchronous write is for the running array.
 *
 * za_sb_read(): the valid record with the highest generation among both
 * superblock zones. Returns 0; -ENOENT if neither zone holds one (a blank
 * drive); -EBADMSG if something is there but nothing valid; -EIO/-ENODEV
 * from the drive.
 */
int za_sb_read(struct za_dev *dev, struct za_sb *out);
/*
 * za_sb_read() of @devs[0..@n) (all on one loop; a NULL entry is skipped
 * with -ENODEV) into @outs[i], its result in @rcs[i]: every member's
 * newest records are read at once, then checked one member at a time (a
 * record found torn or corrupt falls back as za_sb_read() does, reading
 * then). Synchronous: runs the loop until the reads are done. Returns 0,
 * or -ENOMEM with nothing read.
 */
int za_sb_read_many(struct za_dev *const *devs, unsigned n,
		    struct za_sb *const *outs, int *rcs);
/* Write @sb (zone sb->generation % 2), then FLUSH. Returns 0 or -errno. */
int za_sb_write(struct za_dev *dev, const struct za_sb *sb);
/* Reset both superblock zones (conventional ones: zero the record). */
int za_sb_clear(struct za_dev *dev);
/* Does @dev have room for the superblock zones (>= 3 zones, zone >= record)? */
int za_sb_check_dev(const struct za_dev *dev);

struct za_sb_write_op {
	/* private */
	struct za_dev *dev;
	struct za_dev_req req[2];
	void *buf;
	int step;
	void (*done)(struct za_sb_write_op *op, int result);
	void *priv;
};
/*
 * Asynchronous za_sb_write(): @done runs once, on the loop, with 0 or
 * -errno. @op must stay valid until then. Returns 0 or -ENOMEM (then
 * @done never runs).
 */
int za_sb_write_async(struct za_sb_write_op *op, struct za_dev *dev,
		      const struct za_sb *sb,
		      void (*done)(struct za_sb_write_op *op, int result),
		      void *priv);

/* ---- assembly ---- */

enum za_asm_dev {
	ZA_ASM_DEV_MEMBER = 1, /* accepted as members[idx] */
	ZA_ASM_DEV_BLANK, /* no superblock */
	ZA_ASM_DEV_CORRUPT, /* a superblock, but none valid */
	ZA_ASM_DEV_FOREIGN, /* another array (uuid or name differs) */
	ZA_ASM_DEV_STALE, /* the reference table says failed/removed */
	ZA_ASM_DEV_UNKNOWN, /* its member uuid is not in the table */
	ZA_ASM_DEV_DUPLICATE, /* another device claims the same member */
};
const char *za_asm_dev_str(enum za_asm_dev s);

struct za_asm_result {
	/* The reference record: the highest generation among accepted. */
	const struct za_sb *ref;
	unsigned ref_dev; /* index of the device it came from */
	/* Per input device. */
	enum za_asm_dev dev_state[ZA_SB_MAX_MEMBERS];
	/* Per member of ref: input device index, or -1. */
	int member_dev[ZA_SB_MAX_MEMBERS];
	/* Per member: the state to run with (ONLINE members without a device
	 * become MISSING). */
	uint8_t member_state[ZA_SB_MAX_MEMBERS];
	unsigned nr_present; /* members with a device */
	unsigned nr_lost; /* FAILED + MISSING members */
};

/*
 * Resolve @n devices (sbs[i] the decoded record of device i, NULL if it
 * had none; rc[i] the za_sb_read() result) into one array. @name (or NULL
 * for "whatever the newest record says") selects the array.
 * Returns 0 (see @out, including nr_lost, which the caller compares with
 * p); -ENOENT if no device belongs to an array called @name; -EEXIST if
 * two different arrays (uuids) both call themselves @name.
 */
int za_sb_assemble(const struct za_sb *const *sbs, const int *rc, unsigned n,
		   const char *name, struct za_asm_result *out);

#endif /* ZA_SB_H */
