// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * sb.c - member superblocks: the on-disk record (encode, and a decode that
 * validates every byte before anything is used), its log in the first two
 * zones of a member (read the newest valid record, append a new one, clear
 * them), random UUIDs, and the pure logic that resolves a set of drives
 * into one array at assembly.
 *
 * It does not open drives, choose generations or decide policy (whether an
 * array may start degraded, when a member fails): array.c does, from what
 * this file reports. docs/format.md, "Member superblock", gives every byte.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "byteorder.h"
#include "container.h"
#include "crash.h"
#include "crc.h"
#include "log.h"
#include "sb.h"

#define SB_MAGIC "ZARRAYSB"
#define SB_VERSION 1u
#define SB_HDR_BYTES 4096u
#define SB_ENT_BYTES 64u
#define SB_TABLE_BYTES (ZA_SB_MAX_MEMBERS * SB_ENT_BYTES)
#define SB_BLOCK 4096u
/* Records examined per zone, newest first, before giving up on it. */
#define SB_READ_TRIES 4

/* Header block offsets (docs/format.md, "Member superblock"). */
enum {
	H_MAGIC = 0,
	H_VERSION = 8,
	H_RECORD_BYTES = 12,
	H_HDR_CRC = 16,
	H_TABLE_CRC = 20,
	H_ARRAY_UUID = 24,
	H_NAME = 40,
	H_GENERATION = 104,
	H_CTIME = 112,
	H_MEMBER_UUID = 120,
	H_MEMBER_IDX = 136,
	H_NR_MEMBERS = 140,
	H_K = 144,
	H_P = 145,
	H_MATRIX = 146,
	H_STRIPE_ROWS = 147,
	H_CHUNK_BYTES = 148,
	H_LBLOCK_BYTES = 152,
	H_HDR_BYTES = 156,
	H_VOLUME_BYTES = 160,
	H_VOLUME_META = 168,
	H_RESERVED = 424, /* to the end of the block */
};

/* Member entry offsets. */
enum {
	E_UUID = 0,
	E_STATE = 16,
	E_RESERVED = 17, /* 1 byte */
	E_REPLACEMENT = 18, /* le16 */
	E_NR_ZONES = 20,
	E_CAPACITY = 24,
	E_ZONE_SIZE = 32,
	E_PATH_HINT = 40,
};

_Static_assert(H_VOLUME_META + 256 == H_RESERVED, "header layout");
_Static_assert(E_PATH_HINT + ZA_SB_HINT_BYTES == SB_ENT_BYTES, "entry layout");
_Static_assert(ZA_SB_RECORD_BYTES == SB_HDR_BYTES + SB_TABLE_BYTES,
	       "record layout");

const char *za_member_state_str(enum za_member_state s)
{
	switch (s) {
	case ZA_MEMBER_ONLINE:
		return "online";
	case ZA_MEMBER_FAILED:
		return "failed";
	case ZA_MEMBER_MISSING:
		return "missing";
	case ZA_MEMBER_DRAINING:
		return "draining";
	case ZA_MEMBER_REMOVED:
		return "removed";
	}
	return "unknown";
}

const char *za_asm_dev_str(enum za_asm_dev s)
{
	switch (s) {
	case ZA_ASM_DEV_MEMBER:
		return "member";
	case ZA_ASM_DEV_BLANK:
		return "blank";
	case ZA_ASM_DEV_CORRUPT:
		return "corrupt";
	case ZA_ASM_DEV_FOREIGN:
		return "foreign";
	case ZA_ASM_DEV_STALE:
		return "stale";
	case ZA_ASM_DEV_UNKNOWN:
		return "unknown-member";
	case ZA_ASM_DEV_DUPLICATE:
		return "duplicate";
	}
	return "unknown";
}

/* ---- UUIDs ---- */

int za_uuid_gen(struct za_uuid *u)
{
	size_t got = 0;

	while (got < sizeof(u->b)) {
		ssize_t n = getrandom(u->b + got, sizeof(u->b) - got, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			za_log_err("getrandom: %s", strerror(errno));
			return -errno;
		}
		got += (size_t)n;
	}
	/* RFC 9562: version 4 (random), variant 10. */
	u->b[6] = (uint8_t)((u->b[6] & 0x0f) | 0x40);
	u->b[8] = (uint8_t)((u->b[8] & 0x3f) | 0x80);
	return 0;
}

void za_uuid_fmt(const struct za_uuid *u, char out[37])
{
	static const char hex[] = "0123456789abcdef";
	unsigned i, o = 0;

	for (i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[o++] = '-';
		out[o++] = hex[u->b[i] >> 4];
		out[o++] = hex[u->b[i] & 0xf];
	}
	out[o] = '\0';
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int za_uuid_parse(const char *s, struct za_uuid *u)
{
	struct za_uuid tmp;
	unsigned i, pos = 0;

	/* Exactly the 8-4-4-4-12 form: no braces, no spaces, no "urn:". */
	for (i = 0; i < 16; i++) {
		int hi, lo;

		if (i == 4 || i == 6 || i == 8 || i == 10) {
			if (s[pos] != '-')
				return -EINVAL;
			pos++;
		}
		hi = hexval(s[pos]);
		if (hi < 0)
			return -EINVAL;
		lo = hexval(s[pos + 1]);
		if (lo < 0)
			return -EINVAL;
		tmp.b[i] = (uint8_t)(hi << 4 | lo);
		pos += 2;
	}
	if (s[pos] != '\0')
		return -EINVAL;
	*u = tmp;
	return 0;
}

bool za_uuid_eq(const struct za_uuid *a, const struct za_uuid *b)
{
	return !memcmp(a->b, b->b, sizeof(a->b));
}

bool za_uuid_is_null(const struct za_uuid *u)
{
	static const struct za_uuid null_uuid;

	return za_uuid_eq(u, &null_uuid);
}

/* ---- geometry ---- */

int za_geom_check(const struct za_geom *g, const char **why)
{
	const char *r = NULL;

	if (g->k < 1)
		r = "k must be at least 1";
	else if (g->p < 1 || g->p > 6)
		r = "p must be from 1 to 6";
	else if (g->k + g->p > 64)
		r = "k + p must be at most 64";
	else if (g->matrix != ZA_EC_MATRIX_CAUCHY)
		r = "unknown coding matrix";
	else if (g->chunk_bytes < 4096 || g->chunk_bytes > (1u << 20) ||
		 (g->chunk_bytes & (g->chunk_bytes - 1)))
		r = "chunk size must be a power of two from 4 KiB to 1 MiB";
	else if (g->stripe_rows < 1)
		r = "stripe rows must be from 1 to 255";
	else if ((uint64_t)g->stripe_rows * g->chunk_bytes > (1u << 20))
		r = "stripe rows x chunk size must be at most 1 MiB";
	else if (g->lblock_bytes != 4096)
		r = "logical block must be 4096 bytes";
	else if (g->hdr_bytes != 4096)
		r = "stripe header must be 4096 bytes";
	if (why)
		*why = r;
	return r ? -EINVAL : 0;
}

/* ---- encoding ---- */

static bool name_char_ok(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}

/*
 * A NUL-terminated string field: the string, then zeroes to the end of the
 * field, so that every byte of a record has exactly one valid value.
 */
static bool str_field_ok(const uint8_t *f, size_t len, bool is_name)
{
	size_t n = strnlen((const char *)f, len), i;

	if (n == len)
		return false;
	if (is_name && n == 0)
		return false;
	for (i = 0; i < n; i++) {
		if (is_name ? !name_char_ok((char)f[i]) :
			      (f[i] < 0x20 || f[i] > 0x7e))
			return false;
	}
	for (i = n; i < len; i++) {
		if (f[i])
			return false;
	}
	return true;
}

static uint32_t hdr_crc(const uint8_t *b)
{
	/* Bytes 0-15 and 20-4095: everything but the field itself. */
	return za_crc32c_update(za_crc32c(b, H_HDR_CRC), b + H_TABLE_CRC,
				SB_HDR_BYTES - H_TABLE_CRC);
}

static int cmp_uuid(const void *a, const void *b)
{
	return memcmp(a, b, 16);
}

/* The header's fields, once its CRCs matched: NULL or what is wrong. */
static const char *sb_check_hdr(const uint8_t *b)
{
	uint32_t nr = za_get_le32(b + H_NR_MEMBERS);
	uint32_t idx = za_get_le32(b + H_MEMBER_IDX);
	const char *why = NULL;
	struct za_geom g = {
		.k = b[H_K],
		.p = b[H_P],
		.matrix = b[H_MATRIX],
		.stripe_rows = b[H_STRIPE_ROWS],
		.chunk_bytes = za_get_le32(b + H_CHUNK_BYTES),
		.lblock_bytes = za_get_le32(b + H_LBLOCK_BYTES),
		.hdr_bytes = za_get_le32(b + H_HDR_BYTES),
	};

	if (za_uuid_is_null((const struct za_uuid *)(b + H_ARRAY_UUID)))
		return "null array uuid";
	if (!str_field_ok(b + H_NAME, ZA_SB_NAME_BYTES, true))
		return "bad array name";
	if (za_get_le64(b + H_GENERATION) < 1)
		return "generation 0";
	if (nr < 1 || nr > ZA_SB_MAX_MEMBERS)
		return "member count out of range";
	if (idx >= nr)
		return "member index out of range";
	if (za_geom_check(&g, &why))
		return why;
	if (za_get_le64(b + H_VOLUME_BYTES) % g.lblock_bytes)
		return "volume size not a multiple of the logical block";
	if (!za_all_zero(b + H_RESERVED, SB_HDR_BYTES - H_RESERVED))
		return "reserved header bytes not zero";
	if (memcmp(b + H_MEMBER_UUID,
		   b + SB_HDR_BYTES + (size_t)idx * SB_ENT_BYTES + E_UUID, 16))
		return "member uuid differs from its member table entry";
	return NULL;
}

/* One member table entry (@used: below nr_members). */
static const char *sb_check_ent(const uint8_t *e, bool used)
{
	uint64_t zsz = za_get_le64(e + E_ZONE_SIZE);
	uint64_t cap = za_get_le64(e + E_CAPACITY);
	uint32_t nz = za_get_le32(e + E_NR_ZONES);

	if (!used)
		return za_all_zero(e, SB_ENT_BYTES) ?
			       NULL :
			       "unused member entry not zero";
	if (za_uuid_is_null((const struct za_uuid *)(e + E_UUID)))
		return "null member uuid";
	if (e[E_STATE] < ZA_MEMBER_ONLINE || e[E_STATE] > ZA_MEMBER_REMOVED)
		return "unknown member state";
	if (!za_all_zero(e + E_RESERVED, 1))
		return "reserved member bytes not zero";
	if (za_get_le16(e + E_REPLACEMENT) &&
	    e[E_STATE] != ZA_MEMBER_DRAINING &&
	    e[E_STATE] != ZA_MEMBER_FAILED && e[E_STATE] != ZA_MEMBER_MISSING)
		return "a replacement named for a member in service or removed";
	/* 0 < capacity <= nr_zones x zone size, without overflowing. */
	if (!zsz || zsz % SB_BLOCK || !nz || !cap || cap % SB_BLOCK ||
	    cap / zsz > nz || (cap / zsz == nz && cap % zsz))
		return "member size out of range";
	if (!str_field_ok(e + E_PATH_HINT, ZA_SB_HINT_BYTES, false))
		return "bad member path hint";
	return NULL;
}

/*
 * Every check a record must pass, on the raw bytes, before any field is
 * used. Returns 0 or the decode error with *why set.
 */
static int sb_check(const uint8_t *b, size_t len, const char **why)
{
	uint8_t uuids[ZA_SB_MAX_MEMBERS][16];
	uint32_t nr, i;

	*why = NULL;
	if (len < 8 || memcmp(b + H_MAGIC, SB_MAGIC, 8)) {
		*why = "no superblock magic";
		return -ENOENT;
	}
	if (len < H_RECORD_BYTES + 4) {
		*why = "record truncated";
		return -EBADMSG;
	}
	if (za_get_le32(b + H_VERSION) != SB_VERSION) {
		*why = "unknown superblock version";
		return -EPROTONOSUPPORT;
	}
	if (za_get_le32(b + H_RECORD_BYTES) != ZA_SB_RECORD_BYTES)
		*why = "wrong record length";
	else if (len < ZA_SB_RECORD_BYTES)
		*why = "record truncated";
	else if (za_get_le32(b + H_HDR_CRC) != hdr_crc(b))
		*why = "header CRC mismatch";
	else if (za_get_le32(b + H_TABLE_CRC) !=
		 za_crc32c(b + SB_HDR_BYTES, SB_TABLE_BYTES))
		*why = "member table CRC mismatch";
	else
		*why = sb_check_hdr(b);
	if (*why)
		return -EBADMSG;

	nr = za_get_le32(b + H_NR_MEMBERS);
	for (i = 0; i < ZA_SB_MAX_MEMBERS && !*why; i++)
		*why = sb_check_ent(b + SB_HDR_BYTES + (size_t)i * SB_ENT_BYTES,
				    i < nr);
	/* A replacement is another member of the table. */
	for (i = 0; i < nr && !*why; i++) {
		uint16_t r =
			za_get_le16(b + SB_HDR_BYTES +
				    (size_t)i * SB_ENT_BYTES + E_REPLACEMENT);

		if (r && (r - 1u >= nr || r - 1u == i))
			*why = "replacement member out of range";
	}
	if (*why)
		return -EBADMSG;

	/* Unique member uuids: sort a copy (16 KiB at most). */
	for (i = 0; i < nr; i++)
		memcpy(uuids[i], b + SB_HDR_BYTES + (size_t)i * SB_ENT_BYTES,
		       16);
	qsort(uuids, nr, 16, cmp_uuid);
	for (i = 1; i < nr; i++) {
		if (!memcmp(uuids[i - 1], uuids[i], 16)) {
			*why = "two members with one uuid";
			return -EBADMSG;
		}
	}
	return 0;
}

/* Fill @out from a record that passed sb_check(). */
static void sb_parse(const uint8_t *b, struct za_sb *out)
{
	uint32_t i;

	memset(out, 0, sizeof(*out));
	memcpy(out->array_uuid.b, b + H_ARRAY_UUID, 16);
	memcpy(out->name, b + H_NAME, ZA_SB_NAME_BYTES);
	out->generation = za_get_le64(b + H_GENERATION);
	out->ctime_s = za_get_le64(b + H_CTIME);
	memcpy(out->member_uuid.b, b + H_MEMBER_UUID, 16);
	out->member_idx = za_get_le32(b + H_MEMBER_IDX);
	out->nr_members = za_get_le32(b + H_NR_MEMBERS);
	out->geom.k = b[H_K];
	out->geom.p = b[H_P];
	out->geom.matrix = b[H_MATRIX];
	out->geom.stripe_rows = b[H_STRIPE_ROWS];
	out->geom.chunk_bytes = za_get_le32(b + H_CHUNK_BYTES);
	out->geom.lblock_bytes = za_get_le32(b + H_LBLOCK_BYTES);
	out->geom.hdr_bytes = za_get_le32(b + H_HDR_BYTES);
	out->volume_bytes = za_get_le64(b + H_VOLUME_BYTES);
	memcpy(out->volume_meta, b + H_VOLUME_META, sizeof(out->volume_meta));
	for (i = 0; i < out->nr_members; i++) {
		const uint8_t *e = b + SB_HDR_BYTES + (size_t)i * SB_ENT_BYTES;
		struct za_sb_member *m = &out->members[i];

		memcpy(m->uuid.b, e + E_UUID, 16);
		m->state = e[E_STATE];
		m->replacement = za_get_le16(e + E_REPLACEMENT);
		m->nr_zones = za_get_le32(e + E_NR_ZONES);
		m->capacity_bytes = za_get_le64(e + E_CAPACITY);
		m->zone_size_bytes = za_get_le64(e + E_ZONE_SIZE);
		memcpy(m->path_hint, e + E_PATH_HINT, ZA_SB_HINT_BYTES);
	}
}

static int sb_decode(const void *buf, size_t len, struct za_sb *out,
		     const char **why)
{
	int ret = sb_check(buf, len, why);

	if (!ret)
		sb_parse(buf, out);
	return ret;
}

int za_sb_decode(const void *buf, size_t len, struct za_sb *out)
{
	const char *why;

	return sb_decode(buf, len, out, &why);
}

/* Copy a string into a zero-padded field; the check rejects what is bad. */
static void put_str(uint8_t *f, const char *s, size_t len)
{
	size_t n = strnlen(s, len);

	memset(f, 0, len);
	memcpy(f, s, n);
}

int za_sb_encode(const struct za_sb *sb, void *buf, size_t len)
{
	uint8_t *b = buf;
	const char *why;
	uint32_t i;
	int ret;

	if (len < ZA_SB_RECORD_BYTES) {
		za_log_err("superblock: encode buffer of %zu bytes, need %u",
			   len, ZA_SB_RECORD_BYTES);
		return -EINVAL;
	}
	if (sb->nr_members < 1 || sb->nr_members > ZA_SB_MAX_MEMBERS) {
		za_log_err("superblock: cannot encode %u members",
			   sb->nr_members);
		return -EINVAL;
	}
	memset(b, 0, ZA_SB_RECORD_BYTES);
	memcpy(b + H_MAGIC, SB_MAGIC, 8);
	za_put_le32(b + H_VERSION, SB_VERSION);
	za_put_le32(b + H_RECORD_BYTES, ZA_SB_RECORD_BYTES);
	memcpy(b + H_ARRAY_UUID, sb->array_uuid.b, 16);
	put_str(b + H_NAME, sb->name, ZA_SB_NAME_BYTES);
	za_put_le64(b + H_GENERATION, sb->generation);
	za_put_le64(b + H_CTIME, sb->ctime_s);
	memcpy(b + H_MEMBER_UUID, sb->member_uuid.b, 16);
	za_put_le32(b + H_MEMBER_IDX, sb->member_idx);
	za_put_le32(b + H_NR_MEMBERS, sb->nr_members);
	b[H_K] = sb->geom.k;
	b[H_P] = sb->geom.p;
	b[H_MATRIX] = sb->geom.matrix;
	b[H_STRIPE_ROWS] = sb->geom.stripe_rows;
	za_put_le32(b + H_CHUNK_BYTES, sb->geom.chunk_bytes);
	za_put_le32(b + H_LBLOCK_BYTES, sb->geom.lblock_bytes);
	za_put_le32(b + H_HDR_BYTES, sb->geom.hdr_bytes);
	za_put_le64(b + H_VOLUME_BYTES, sb->volume_bytes);
	memcpy(b + H_VOLUME_META, sb->volume_meta, sizeof(sb->volume_meta));
	for (i = 0; i < sb->nr_members; i++) {
		const struct za_sb_member *m = &sb->members[i];
		uint8_t *e = b + SB_HDR_BYTES + (size_t)i * SB_ENT_BYTES;
		size_t j;

		memcpy(e + E_UUID, m->uuid.b, 16);
		e[E_STATE] = m->state;
		za_put_le16(e + E_REPLACEMENT, m->replacement);
		za_put_le32(e + E_NR_ZONES, m->nr_zones);
		za_put_le64(e + E_CAPACITY, m->capacity_bytes);
		za_put_le64(e + E_ZONE_SIZE, m->zone_size_bytes);
		/*
		 * The hint is for people reading a report; a path that is not
		 * printable ASCII is kept readable rather than refused.
		 */
		put_str(e + E_PATH_HINT, m->path_hint, ZA_SB_HINT_BYTES - 1);
		for (j = 0; j < ZA_SB_HINT_BYTES && e[E_PATH_HINT + j]; j++) {
			if (e[E_PATH_HINT + j] < 0x20 ||
			    e[E_PATH_HINT + j] > 0x7e)
				e[E_PATH_HINT + j] = '?';
		}
	}
	za_put_le32(b + H_TABLE_CRC,
		    za_crc32c(b + SB_HDR_BYTES, SB_TABLE_BYTES));
	za_put_le32(b + H_HDR_CRC, hdr_crc(b));

	/* The writer obeys the same rules as the reader. */
	ret = sb_check(b, len, &why);
	if (ret) {
		za_log_err("superblock: cannot encode: %s", why);
		memset(b, 0, ZA_SB_RECORD_BYTES);
		return -EINVAL;
	}
	return 0;
}

/* ---- I/O ---- */

static uint64_t round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

static uint64_t sb_wgran(const struct za_dev *dev)
{
	return dev->caps.write_gran_bytes ? dev->caps.write_gran_bytes :
					    SB_BLOCK;
}

/* Records sit at multiples of this in a sequential zone. */
static uint64_t sb_slot_bytes(const struct za_dev *dev)
{
	return round_up(ZA_SB_RECORD_BYTES, sb_wgran(dev));
}

/* Largest single I/O, a multiple of @unit. */
static uint64_t sb_chunk_bytes(const struct za_dev *dev, uint64_t unit)
{
	uint64_t c = dev->caps.max_io_bytes / unit * unit;

	return c ? c : unit;
}

int za_sb_check_dev(const struct za_dev *dev)
{
	const struct za_dev_caps *c = &dev->caps;

	if (c->lblock_bytes != SB_BLOCK) {
		za_log_err("%s: logical block of %u bytes: zarray needs 4096",
			   dev->path, c->lblock_bytes);
		return -EINVAL;
	}
	if (c->nr_zones < ZA_SB_ZONES + 1) {
		za_log_err("%s: %u zones: a member needs at least %u (%u for "
			   "superblocks, the rest for data)",
			   dev->path, c->nr_zones, ZA_SB_ZONES + 1,
			   ZA_SB_ZONES);
		return -EINVAL;
	}
	if (c->zone_cap_bytes < sb_slot_bytes(dev) ||
	    c->zone_size_bytes < sb_slot_bytes(dev)) {
		za_log_err("%s: zone capacity of %llu bytes: a superblock "
			   "record needs %llu",
			   dev->path, (unsigned long long)c->zone_cap_bytes,
			   (unsigned long long)sb_slot_bytes(dev));
		return -EINVAL;
	}
	return 0;
}

static int sb_zone(struct za_dev *dev, uint32_t zidx, struct za_zone *z)
{
	unsigned n = 1;
	int ret;

	ret = za_dev_report_zones(
		dev, (uint64_t)zidx * dev->caps.zone_size_bytes, z, &n);
	if (!ret && n != 1)
		ret = -EIO;
	if (ret)
		za_log_err("%s: superblock zone %u: zone report failed: %s",
			   dev->path, zidx, strerror(-ret));
	return ret;
}

/* How far a sequential zone has been written, within its capacity. */
static uint64_t zone_written(const struct za_zone *z)
{
	uint64_t w;

	if (z->cond == ZA_ZONE_COND_FULL)
		return z->cap_bytes; /* the drive reports wp = zone end */
	w = z->wp_bytes > z->start_bytes ? z->wp_bytes - z->start_bytes : 0;
	return w < z->cap_bytes ? w : z->cap_bytes;
}

static int sb_io(struct za_dev *dev, enum za_dev_op op, uint64_t off,
		 uint8_t *buf, uint64_t len, uint32_t zidx)
{
	uint64_t chunk = sb_chunk_bytes(dev, op == ZA_DEV_OP_READ ?
						     dev->caps.lblock_bytes :
						     sb_wgran(dev));
	uint64_t done = 0;

	while (done < len) {
		uint64_t n = len - done < chunk ? len - done : chunk;
		int ret = za_dev_io_sync(dev, op, off + done, buf + done, n,
					 NULL);

		if (ret) {
			za_log_err("%s: superblock zone %u: %s of %llu bytes "
				   "at %llu failed: %s",
				   dev->path, zidx, za_dev_op_str(op),
				   (unsigned long long)n,
				   (unsigned long long)(off + done),
				   strerror(-ret));
			return ret;
		}
		done += n;
	}
	return 0;
}

/*
 * The newest valid record of one superblock zone into @out. Returns 0,
 * -ENOENT (nothing with our magic: blank, or another program's data),
 * -EBADMSG (records, none valid), -EPROTONOSUPPORT (the newest is a
 * format we do not know) or an I/O error.
 */
/*
 * A superblock zone's report and its newest record, read ahead of
 * sb_read_zone() by za_sb_read_many(), every member's at once.
 */
struct sb_ahead {
	int report; /* sb_zone()'s result; 1: not reported */
	struct za_zone z;
	uint8_t *buf; /* the newest record's slot once read, or NULL */
	struct za_dev_req *reqs; /* its chunks */
	unsigned nr_reqs;
	int result; /* the first chunk's error */
	unsigned *left; /* reads in flight over every zone */
	bool *all_done;
};

/* Records a superblock zone holds (written slots; one if conventional). */
static uint64_t sb_zone_records(const struct za_dev *dev,
				const struct za_zone *z)
{
	uint64_t slot = sb_slot_bytes(dev);

	if (z->type == ZA_ZONE_TYPE_CNV)
		return z->cap_bytes >= slot ? 1 : 0;
	return zone_written(z) / slot;
}

/* The newest record of one superblock zone into @out, the zone's report
 * and that record taken from @ah when it has them. */
static int sb_read_zone(struct za_dev *dev, uint32_t zidx, uint8_t *buf,
			struct za_sb *out, const struct sb_ahead *ah)
{
	uint64_t slot = sb_slot_bytes(dev), n, i;
	struct za_zone z;
	const char *why;
	int ret, res = -ENOENT;

	if (ah && ah->report <= 0) {
		ret = ah->report;
		z = ah->z;
	} else {
		ret = sb_zone(dev, zidx, &z);
	}
	if (ret)
		return ret;
	if (z.cond == ZA_ZONE_COND_OFFLINE) {
		za_log_err("%s: superblock zone %u is offline", dev->path,
			   zidx);
		return -EIO;
	}
	n = sb_zone_records(dev, &z);

	/* Newest first; a torn or corrupt tail falls back a few records. */
	for (i = 0; i < n && i < SB_READ_TRIES; i++) {
		uint64_t off = z.start_bytes + (n - 1 - i) * slot;
		const uint8_t *rec = buf;

		if (!i && ah && ah->buf && !ah->result)
			rec = ah->buf; /* read ahead */
		else if ((ret = sb_io(dev, ZA_DEV_OP_READ, off, buf, slot,
				      zidx)))
			return ret;
		ret = sb_decode(rec, slot, out, &why);
		if (!ret) {
			if (i)
				za_log_warn(
					"%s: superblock zone %u: using the "
					"record at %llu, generation %llu",
					dev->path, zidx,
					(unsigned long long)off,
					(unsigned long long)out->generation);
			return 0;
		}
		if (ret == -ENOENT) {
			za_log_debug("%s: superblock zone %u: no record at "
				     "%llu",
				     dev->path, zidx, (unsigned long long)off);
			continue;
		}
		za_log_warn("%s: superblock zone %u: record at %llu: %s",
			    dev->path, zidx, (unsigned long long)off, why);
		if (ret == -EPROTONOSUPPORT && i == 0)
			return ret;
		res = -EBADMSG;
	}
	return res;
}

static int sb_read_dev(struct za_dev *dev, struct za_sb *out,
		       const struct sb_ahead *ah)
{
	struct za_sb *tmp = NULL;
	uint8_t *buf = NULL;
	int ret, rz[ZA_SB_ZONES], best = -1;
	uint32_t z;

	ret = za_sb_check_dev(dev);
	if (ret)
		return ret;
	tmp = malloc(sizeof(*tmp));
	if (!tmp)
		return -ENOMEM;
	if (posix_memalign((void **)&buf, SB_BLOCK, sb_slot_bytes(dev))) {
		ret = -ENOMEM;
		goto err_buf;
	}
	for (z = 0; z < ZA_SB_ZONES; z++) {
		rz[z] = sb_read_zone(dev, z, buf, tmp, ah ? &ah[z] : NULL);
		if (rz[z])
			continue;
		if (best < 0 || tmp->generation > out->generation) {
			memcpy(out, tmp, sizeof(*out));
			best = (int)z;
		}
	}

	ret = 0;
	for (z = 0; z < ZA_SB_ZONES; z++) {
		/* A newer format on the drive: do not act on an older copy. */
		if (rz[z] == -EPROTONOSUPPORT) {
			za_log_err("%s: superblock zone %u holds a record of a "
				   "newer format version",
				   dev->path, z);
			ret = -EPROTONOSUPPORT;
			goto done;
		}
	}
	if (best >= 0)
		goto done;
	for (z = 0; z < ZA_SB_ZONES && !ret; z++) {
		if (rz[z] != -ENOENT && rz[z] != -EBADMSG)
			ret = rz[z];
	}
	for (z = 0; z < ZA_SB_ZONES && !ret; z++) {
		if (rz[z] == -EBADMSG)
			ret = -EBADMSG;
	}
	if (!ret)
		ret = -ENOENT;
	if (ret == -EBADMSG)
		za_log_err("%s: superblock zones hold no valid record",
			   dev->path);
done:
	free(buf);
err_buf:
	free(tmp);
	return ret;
}

int za_sb_read(struct za_dev *dev, struct za_sb *out)
{
	return sb_read_dev(dev, out, NULL);
}

static void sb_ahead_done(struct za_dev_req *req)
{
	struct sb_ahead *ah = req->priv;

	if (req->result && !ah->result)
		ah->result = req->result;
	if (!--*ah->left)
		*ah->all_done = true;
}

/* Report @dev's superblock zone @zidx into @ah and start reading its
 * newest record; *@ah->left counts the reads started. */
static void sb_ahead_start(struct za_dev *dev, uint32_t zidx,
			   struct sb_ahead *ah)
{
	uint64_t slot = sb_slot_bytes(dev), n, off, done;
	uint64_t chunk = sb_chunk_bytes(dev, dev->caps.lblock_bytes);
	unsigned c;

	ah->report = sb_zone(dev, zidx, &ah->z);
	if (ah->report || ah->z.cond == ZA_ZONE_COND_OFFLINE)
		return;
	n = sb_zone_records(dev, &ah->z);
	if (!n)
		return;
	ah->nr_reqs = (unsigned)((slot + chunk - 1) / chunk);
	ah->reqs = calloc(ah->nr_reqs, sizeof(*ah->reqs));
	if (!ah->reqs || posix_memalign((void **)&ah->buf, SB_BLOCK, slot)) {
		free(ah->reqs);
		ah->reqs = NULL;
		ah->buf = NULL;
		return; /* read when it is needed instead */
	}
	off = ah->z.start_bytes + (n - 1) * slot;
	for (c = 0, done = 0; c < ah->nr_reqs; c++, done += chunk) {
		struct za_dev_req *r = &ah->reqs[c];

		r->op = ZA_DEV_OP_READ;
		r->off_bytes = off + done;
		r->len_bytes = slot - done < chunk ? slot - done : chunk;
		r->buf = ah->buf + done;
		r->done = sb_ahead_done;
		r->priv = ah;
		(*ah->left)++;
	}
	for (c = 0; c < ah->nr_reqs; c++)
		za_dev_submit(dev, &ah->reqs[c]);
}

int za_sb_read_many(struct za_dev *const *devs, unsigned n,
		    struct za_sb *const *outs, int *rcs)
{
	struct sb_ahead *ah;
	unsigned i, z, left = 0;
	bool all_done = false;

	ah = calloc((size_t)n * ZA_SB_ZONES, sizeof(*ah));
	if (!ah)
		return -ENOMEM;
	for (i = 0; i < n * ZA_SB_ZONES; i++) {
		ah[i].report = 1;
		ah[i].left = &left;
		ah[i].all_done = &all_done;
	}
	for (i = 0; i < n; i++) {
		if (!devs[i] || za_sb_check_dev(devs[i]))
			continue; /* sb_read_dev() says why */
		for (z = 0; z < ZA_SB_ZONES; z++)
			sb_ahead_start(devs[i], z, &ah[i * ZA_SB_ZONES + z]);
	}
	/* A read submitted always completes: the loop runs until the last. */
	if (left)
		za_io_run_until(devs[0]->io, &all_done, 0);
	for (i = 0; i < n; i++) {
		rcs[i] = devs[i] ? sb_read_dev(devs[i], outs[i],
					       &ah[i * ZA_SB_ZONES]) :
				   -ENODEV;
		for (z = 0; z < ZA_SB_ZONES; z++) {
			free(ah[i * ZA_SB_ZONES + z].buf);
			free(ah[i * ZA_SB_ZONES + z].reqs);
		}
	}
	free(ah);
	return 0;
}

/* Where the next record of a superblock zone goes. */
struct sb_plan {
	uint32_t zidx;
	uint64_t zone_start;
	bool reset; /* the zone must be reset first */
	uint64_t off; /* device offset of the write (pad, then record) */
	uint64_t pad; /* zero bytes before the record, up to a slot boundary */
};

static int sb_plan(struct za_dev *dev, uint32_t zidx, struct sb_plan *p)
{
	uint64_t slot = sb_slot_bytes(dev), w;
	struct za_zone z;
	int ret;

	ret = sb_zone(dev, zidx, &z);
	if (ret)
		return ret;
	memset(p, 0, sizeof(*p));
	p->zidx = zidx;
	p->zone_start = z.start_bytes;
	p->off = z.start_bytes;
	if (z.cond == ZA_ZONE_COND_OFFLINE || z.cond == ZA_ZONE_COND_READONLY) {
		za_log_err("%s: superblock zone %u is %s", dev->path, zidx,
			   za_zone_cond_str(z.cond));
		return z.cond == ZA_ZONE_COND_OFFLINE ? -EIO : -EROFS;
	}
	if (z.cap_bytes < slot) {
		za_log_err("%s: superblock zone %u: capacity %llu is below "
			   "one record",
			   dev->path, zidx, (unsigned long long)z.cap_bytes);
		return -EINVAL;
	}
	if (z.type == ZA_ZONE_TYPE_CNV)
		return 0; /* one record at the zone start, in place */

	/*
	 * Append after the last record, at the next slot boundary (a torn
	 * write may have left the write pointer between two). When that does
	 * not fit, or the zone is FULL, start over: the other superblock zone
	 * holds the previous generation meanwhile.
	 */
	w = zone_written(&z);
	if (z.cond == ZA_ZONE_COND_FULL || w % sb_wgran(dev) ||
	    round_up(w, slot) + slot > z.cap_bytes) {
		p->reset = true;
		return 0;
	}
	p->off = z.start_bytes + w;
	p->pad = round_up(w, slot) - w;
	return 0;
}

/*
 * Encode @sb into a new buffer with room for a pad of up to a slot in
 * front; done before any I/O so that a bad record touches nothing.
 */
static int sb_wbuf(struct za_dev *dev, const struct za_sb *sb, uint8_t **out)
{
	uint64_t slot = sb_slot_bytes(dev);
	uint8_t *b;
	int ret;

	if (posix_memalign((void **)&b, SB_BLOCK, 2 * slot))
		return -ENOMEM;
	memset(b, 0, 2 * slot);
	ret = za_sb_encode(sb, b, slot);
	if (ret) {
		free(b);
		return ret;
	}
	*out = b;
	return 0;
}

/* Move the record behind @pad zero bytes (the pad is below a slot). */
static void sb_wbuf_pad(struct za_dev *dev, uint8_t *b, uint64_t pad)
{
	if (!pad)
		return;
	memmove(b + pad, b, sb_slot_bytes(dev));
	memset(b, 0, pad);
}

int za_sb_write(struct za_dev *dev, const struct za_sb *sb)
{
	uint32_t zidx = (uint32_t)(sb->generation % ZA_SB_ZONES);
	struct sb_plan p;
	uint8_t *b;
	int ret;

	ret = za_sb_check_dev(dev);
	if (ret)
		return ret;
	ret = sb_wbuf(dev, sb, &b);
	if (ret)
		return ret;
	ret = sb_plan(dev, zidx, &p);
	if (ret)
		goto done;
	sb_wbuf_pad(dev, b, p.pad);
	if (p.reset) {
		ret = za_dev_io_sync(dev, ZA_DEV_OP_RESET, p.zone_start, NULL,
				     0, NULL);
		if (ret) {
			za_log_err("%s: superblock zone %u: reset failed: %s",
				   dev->path, zidx, strerror(-ret));
			goto done;
		}
	}
	ret = sb_io(dev, ZA_DEV_OP_WRITE, p.off, b, p.pad + sb_slot_bytes(dev),
		    zidx);
	if (ret)
		goto done;
	ret = za_dev_io_sync(dev, ZA_DEV_OP_FLUSH, 0, NULL, 0, NULL);
	if (ret)
		za_log_err("%s: flush after superblock generation %llu "
			   "failed: %s",
			   dev->path, (unsigned long long)sb->generation,
			   strerror(-ret));
done:
	free(b);
	return ret;
}

int za_sb_clear(struct za_dev *dev)
{
	uint64_t slot = sb_slot_bytes(dev);
	uint8_t *zero = NULL;
	struct za_zone z;
	uint32_t zidx;
	int ret;

	ret = za_sb_check_dev(dev);
	if (ret)
		return ret;
	if (posix_memalign((void **)&zero, SB_BLOCK, slot))
		return -ENOMEM;
	memset(zero, 0, slot);
	for (zidx = 0; zidx < ZA_SB_ZONES; zidx++) {
		ret = sb_zone(dev, zidx, &z);
		if (ret)
			goto done;
		if (z.type == ZA_ZONE_TYPE_CNV) {
			ret = sb_io(dev, ZA_DEV_OP_WRITE, z.start_bytes, zero,
				    slot, zidx);
		} else {
			ret = za_dev_io_sync(dev, ZA_DEV_OP_RESET,
					     z.start_bytes, NULL, 0, NULL);
			if (ret)
				za_log_err("%s: superblock zone %u: reset "
					   "failed: %s",
					   dev->path, zidx, strerror(-ret));
		}
		if (ret)
			goto done;
	}
	ret = za_dev_io_sync(dev, ZA_DEV_OP_FLUSH, 0, NULL, 0, NULL);
	if (ret)
		za_log_err("%s: flush after clearing superblocks failed: %s",
			   dev->path, strerror(-ret));
done:
	free(zero);
	return ret;
}

/* ---- asynchronous write ---- */

/*
 * What an asynchronous write carries between steps. op->buf points here:
 * the op's layout is fixed by sb.h, and its callers need not know this.
 */
struct sb_wstate {
	struct za_sb_write_op *op;
	struct za_io_defer defer; /* delivers an error found before any I/O */
	int result;
	struct sb_plan plan;
	uint8_t *data; /* pad + record */
	uint64_t len; /* bytes of data */
	uint64_t done; /* bytes of data written */
	uint64_t generation;
};

enum { SB_STEP_RESET = 1, SB_STEP_WRITE, SB_STEP_FLUSH };

static void sb_async_finish(struct za_sb_write_op *op, int result)
{
	struct sb_wstate *st = op->buf;

	free(st->data);
	free(st);
	op->buf = NULL;
	op->done(op, result);
}

static void sb_async_defer_cb(struct za_io_defer *d)
{
	struct sb_wstate *st = container_of(d, struct sb_wstate, defer);

	sb_async_finish(st->op, st->result);
}

static void sb_async_cb(struct za_dev_req *req);

static void sb_async_submit(struct za_sb_write_op *op, struct za_dev_req *req,
			    enum za_dev_op zop, uint64_t off, void *buf,
			    uint64_t len)
{
	memset(req, 0, sizeof(*req));
	req->op = zop;
	req->off_bytes = off;
	req->buf = buf;
	req->len_bytes = len;
	req->done = sb_async_cb;
	req->priv = op;
	za_dev_submit(op->dev, req);
}

static void sb_async_write_next(struct za_sb_write_op *op)
{
	struct sb_wstate *st = op->buf;
	uint64_t chunk = sb_chunk_bytes(op->dev, sb_wgran(op->dev));
	uint64_t n = st->len - st->done < chunk ? st->len - st->done : chunk;

	op->step = SB_STEP_WRITE;
	sb_async_submit(op, &op->req[0], ZA_DEV_OP_WRITE,
			st->plan.off + st->done, st->data + st->done, n);
}

static void sb_async_cb(struct za_dev_req *req)
{
	struct za_sb_write_op *op = req->priv;
	struct sb_wstate *st = op->buf;
	struct za_dev *dev = op->dev;

	if (req->result) {
		if (op->step == SB_STEP_FLUSH)
			za_log_err("%s: flush after superblock generation "
				   "%llu failed: %s",
				   dev->path,
				   (unsigned long long)st->generation,
				   strerror(-req->result));
		else
			za_log_err("%s: superblock zone %u: %s of %llu bytes "
				   "at %llu failed: %s",
				   dev->path, st->plan.zidx,
				   za_dev_op_str(req->op),
				   (unsigned long long)req->len_bytes,
				   (unsigned long long)req->off_bytes,
				   strerror(-req->result));
		sb_async_finish(op, req->result);
		return;
	}
	switch (op->step) {
	case SB_STEP_RESET:
		sb_async_write_next(op);
		break;
	case SB_STEP_WRITE:
		st->done += req->len_bytes;
		if (st->done < st->len) {
			sb_async_write_next(op);
			break;
		}
		op->step = SB_STEP_FLUSH;
		sb_async_submit(op, &op->req[1], ZA_DEV_OP_FLUSH, 0, NULL, 0);
		break;
	case SB_STEP_FLUSH:
		za_crash_point("sb-write");
		sb_async_finish(op, 0);
		break;
	}
}

/*
 * Steps: [RESET] -> WRITE (pad + record, in pieces of at most max_io_bytes)
 * -> FLUSH -> done. One superblock write per member at a time: the plan
 * comes from the write pointer as the zone report gives it now.
 */
int za_sb_write_async(struct za_sb_write_op *op, struct za_dev *dev,
		      const struct za_sb *sb,
		      void (*done)(struct za_sb_write_op *op, int result),
		      void *priv)
{
	struct sb_wstate *st;
	int ret;

	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	memset(op, 0, sizeof(*op));
	op->dev = dev;
	op->buf = st;
	op->done = done;
	op->priv = priv;
	st->op = op;
	st->generation = sb->generation;
	st->defer.fn = sb_async_defer_cb;

	/* The zone report is synchronous; errors still arrive on the loop. */
	ret = za_sb_check_dev(dev);
	if (!ret)
		ret = sb_wbuf(dev, sb, &st->data);
	if (!ret)
		ret = sb_plan(dev, (uint32_t)(sb->generation % ZA_SB_ZONES),
			      &st->plan);
	if (!ret)
		sb_wbuf_pad(dev, st->data, st->plan.pad);
	if (ret == -ENOMEM) {
		free(st->data);
		free(st);
		op->buf = NULL;
		return ret;
	}
	if (ret) {
		st->result = ret;
		za_io_defer(dev->io, &st->defer);
		return 0;
	}
	st->len = st->plan.pad + sb_slot_bytes(dev);
	if (st->plan.reset) {
		op->step = SB_STEP_RESET;
		sb_async_submit(op, &op->req[0], ZA_DEV_OP_RESET,
				st->plan.zone_start, NULL, 0);
	} else {
		sb_async_write_next(op);
	}
	return 0;
}

/* ---- assembly ---- */

static bool asm_valid(const struct za_sb *const *sbs, const int *rc, unsigned i)
{
	return sbs[i] && rc[i] == 0;
}

int za_sb_assemble(const struct za_sb *const *sbs, const int *rc, unsigned n,
		   const char *name, struct za_asm_result *out)
{
	const struct za_sb *pick = NULL, *ref;
	unsigned i, j, order[ZA_SB_MAX_MEMBERS];
	int best = -1;

	memset(out, 0, sizeof(*out));
	for (j = 0; j < ZA_SB_MAX_MEMBERS; j++)
		out->member_dev[j] = -1;
	if (n > ZA_SB_MAX_MEMBERS) {
		za_log_err("assembly: %u devices given, at most %u", n,
			   ZA_SB_MAX_MEMBERS);
		return -EINVAL;
	}

	/* Which array: the one called @name, or the newest record's. */
	for (i = 0; i < n; i++) {
		if (!asm_valid(sbs, rc, i))
			continue;
		if (name && strcmp(sbs[i]->name, name))
			continue;
		if (!pick || sbs[i]->generation > pick->generation)
			pick = sbs[i];
	}
	if (!pick) {
		if (name)
			za_log_err("assembly: no device belongs to an array "
				   "called '%s'",
				   name);
		else
			za_log_err("assembly: no device holds a superblock");
		return -ENOENT;
	}
	for (i = 0; i < n; i++) {
		char a[37], b[37];

		if (!asm_valid(sbs, rc, i) ||
		    za_uuid_eq(&sbs[i]->array_uuid, &pick->array_uuid))
			continue;
		if (!name && sbs[i]->generation == pick->generation) {
			/* "The newest" names no single array. */
			za_uuid_fmt(&pick->array_uuid, a);
			za_uuid_fmt(&sbs[i]->array_uuid, b);
			za_log_err("assembly: arrays '%s' (%s) and '%s' (%s) "
				   "are equally new: name one",
				   pick->name, a, sbs[i]->name, b);
			return -EEXIST;
		}
		if (strcmp(sbs[i]->name, pick->name))
			continue;
		/* Two arrays answer to one name: refuse to guess. */
		za_uuid_fmt(&pick->array_uuid, a);
		za_uuid_fmt(&sbs[i]->array_uuid, b);
		za_log_err("assembly: two arrays are called '%s' (%s and %s)",
			   pick->name, a, b);
		return -EEXIST;
	}

	/* Classify; the reference is the newest record of the array. */
	for (i = 0; i < n; i++) {
		if (!sbs[i] || rc[i]) {
			out->dev_state[i] = rc[i] == -ENOENT ?
						    ZA_ASM_DEV_BLANK :
						    ZA_ASM_DEV_CORRUPT;
			continue;
		}
		if (!za_uuid_eq(&sbs[i]->array_uuid, &pick->array_uuid) ||
		    strcmp(sbs[i]->name, pick->name)) {
			out->dev_state[i] = ZA_ASM_DEV_FOREIGN;
			continue;
		}
		if (best < 0 || sbs[i]->generation > sbs[best]->generation)
			best = (int)i;
	}
	/* pick itself belongs, so best is set. */
	ref = sbs[best];
	out->ref = ref;
	out->ref_dev = (unsigned)best;

	/*
	 * Members, newest record first (ties: lower index first), so that of
	 * two devices claiming one member the newer one wins.
	 */
	for (i = 0, j = 0; i < n; i++) {
		if (!out->dev_state[i])
			order[j++] = i;
	}
	/* Insertion sort by generation, stable: n <= 1024. */
	for (i = 1; i < j; i++) {
		unsigned d = order[i], k = i;

		while (k > 0 &&
		       sbs[order[k - 1]]->generation < sbs[d]->generation) {
			order[k] = order[k - 1];
			k--;
		}
		order[k] = d;
	}
	for (i = 0; i < j; i++) {
		const struct za_sb *s = sbs[order[i]];
		unsigned d = order[i], m;

		for (m = 0; m < ref->nr_members; m++) {
			if (za_uuid_eq(&ref->members[m].uuid, &s->member_uuid))
				break;
		}
		if (m == ref->nr_members || m != s->member_idx)
			out->dev_state[d] = ZA_ASM_DEV_UNKNOWN;
		else if (ref->members[m].state == ZA_MEMBER_FAILED ||
			 ref->members[m].state == ZA_MEMBER_REMOVED)
			out->dev_state[d] = ZA_ASM_DEV_STALE;
		else if (out->member_dev[m] >= 0)
			out->dev_state[d] = ZA_ASM_DEV_DUPLICATE;
		else {
			out->dev_state[d] = ZA_ASM_DEV_MEMBER;
			out->member_dev[m] = (int)d;
		}
	}

	for (j = 0; j < ref->nr_members; j++) {
		uint8_t st = ref->members[j].state;

		if (out->member_dev[j] >= 0)
			out->nr_present++;
		else if (st == ZA_MEMBER_ONLINE || st == ZA_MEMBER_DRAINING)
			st = ZA_MEMBER_MISSING;
		out->member_state[j] = st;
		if (st == ZA_MEMBER_FAILED || st == ZA_MEMBER_MISSING)
			out->nr_lost++;
	}
	return 0;
}
