// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * test-sb.c - member superblocks: UUIDs; geometry rules; the record's
 * encode/decode round trip over member counts, names and geometries;
 * rejection of every single-byte corruption at sampled offsets, of random
 * mutations, and of each invalid field with its CRCs made good; the log
 * in zones 0/1 on emulated SMR (0, 1, 2 conventional zones) and ZNS
 * (capacity below size, zones that fill up), with wrap-around resets,
 * torn and garbage tails, power cuts, failing drives and the asynchronous
 * write; and assembly resolution (foreign, blank, stale, missing,
 * duplicate, unknown and lagging members).
 */
#include <errno.h>

#include "byteorder.h"
#include "crc.h"
#include "dev-fault.h"
#include "emu-util.h"
#include "log.h"
#include "sb.h"

#define REC ZA_SB_RECORD_BYTES
#define HDR 4096u
#define ENT 64u
/* Header offsets, as docs/format.md gives them. */
#define O_VERSION 8
#define O_RECORD 12
#define O_HCRC 16
#define O_TCRC 20
#define O_ARRAY_UUID 24
#define O_NAME 40
#define O_GEN 104
#define O_CTIME 112
#define O_MEMBER_UUID 120
#define O_MEMBER_IDX 136
#define O_NR_MEMBERS 140
#define O_K 144
#define O_P 145
#define O_MATRIX 146
#define O_ROWS 147
#define O_CHUNK 148
#define O_LBLOCK 152
#define O_HDRB 156
#define O_VOLUME 160
#define O_META 168
#define O_RESERVED 424

static unsigned nr_logged;

static void quiet(enum za_log_level l, const char *msg)
{
	(void)l;
	(void)msg;
	nr_logged++;
}

static uint64_t rnd_state;

static uint64_t rnd(void)
{
	/* xorshift64*: reproducible from the seed, no libc state. */
	rnd_state ^= rnd_state >> 12;
	rnd_state ^= rnd_state << 25;
	rnd_state ^= rnd_state >> 27;
	return rnd_state * 0x2545f4914f6cdd1dull;
}

static void tuuid(struct za_uuid *u, uint32_t a, uint32_t b)
{
	unsigned i;

	for (i = 0; i < 16; i++)
		u->b[i] = (uint8_t)(a * 131 + b * 31 + i * 7 + 1);
	za_put_le32(u->b, a);
	za_put_le32(u->b + 4, b);
}

static const struct za_geom good_geoms[] = {
	{ 4, 2, ZA_EC_MATRIX_CAUCHY, 1, 65536, 4096, 4096 },
	{ 1, 1, ZA_EC_MATRIX_CAUCHY, 1, 4096, 4096, 4096 },
	{ 10, 4, ZA_EC_MATRIX_CAUCHY, 16, 65536, 4096, 4096 },
	{ 58, 6, ZA_EC_MATRIX_CAUCHY, 255, 4096, 4096, 4096 },
	{ 8, 3, ZA_EC_MATRIX_CAUCHY, 1, 1u << 20, 4096, 4096 },
	{ 63, 1, ZA_EC_MATRIX_CAUCHY, 2, 524288, 4096, 4096 },
};

static const struct bad_geom {
	struct za_geom g;
} bad_geoms[] = {
	{ { 0, 2, ZA_EC_MATRIX_CAUCHY, 1, 65536, 4096, 4096 } },
	{ { 4, 0, ZA_EC_MATRIX_CAUCHY, 1, 65536, 4096, 4096 } },
	{ { 4, 7, ZA_EC_MATRIX_CAUCHY, 1, 65536, 4096, 4096 } },
	{ { 59, 6, ZA_EC_MATRIX_CAUCHY, 1, 65536, 4096, 4096 } },
	{ { 64, 1, ZA_EC_MATRIX_CAUCHY, 1, 65536, 4096, 4096 } },
	{ { 4, 2, 0, 1, 65536, 4096, 4096 } },
	{ { 4, 2, 2, 1, 65536, 4096, 4096 } },
	{ { 4, 2, ZA_EC_MATRIX_CAUCHY, 0, 65536, 4096, 4096 } },
	{ { 4, 2, ZA_EC_MATRIX_CAUCHY, 17, 65536, 4096, 4096 } },
	{ { 4, 2, ZA_EC_MATRIX_CAUCHY, 2, 1u << 20, 4096, 4096 } },
	{ { 4, 2, ZA_EC_MATRIX_CAUCHY, 1, 2048, 4096, 4096 } },
	{ { 4, 2, ZA_EC_MATRIX_CAUCHY, 1, 0, 4096, 4096 } },
	{ { 4, 2, ZA_EC_MATRIX_CAUCHY, 1, 12288, 4096, 4096 } },
	{ { 4, 2, ZA_EC_MATRIX_CAUCHY, 1, 2u << 20, 4096, 4096 } },
	{ { 4, 2, ZA_EC_MATRIX_CAUCHY, 1, 65536, 512, 4096 } },
	{ { 4, 2, ZA_EC_MATRIX_CAUCHY, 1, 65536, 8192, 4096 } },
	{ { 4, 2, ZA_EC_MATRIX_CAUCHY, 1, 65536, 4096, 0 } },
	{ { 4, 2, ZA_EC_MATRIX_CAUCHY, 1, 65536, 4096, 8192 } },
};

/* A record of @nr members, this device being member @idx. */
static struct za_sb *make_sb(unsigned nr, unsigned idx, const char *name,
			     const struct za_geom *g, uint64_t gen)
{
	struct za_sb *sb = calloc(1, sizeof(*sb));
	unsigned i;

	ck_assert_ptr_nonnull(sb);
	tuuid(&sb->array_uuid, 0xa77a, (uint32_t)strlen(name));
	snprintf(sb->name, sizeof(sb->name), "%s", name);
	sb->generation = gen;
	sb->ctime_s = 1700000000u + nr;
	sb->geom = *g;
	sb->volume_bytes = (uint64_t)nr << 30;
	for (i = 0; i < sizeof(sb->volume_meta); i++)
		sb->volume_meta[i] = (uint8_t)(i * 13 + nr);
	sb->nr_members = nr;
	for (i = 0; i < nr; i++) {
		struct za_sb_member *m = &sb->members[i];

		tuuid(&m->uuid, 0x3e3b, i);
		m->state = (uint8_t)(i % 5 + 1);
		m->nr_zones = 100 + i;
		m->zone_size_bytes = 256ull << 20;
		m->capacity_bytes = (uint64_t)m->nr_zones * m->zone_size_bytes -
				    (i % 3) * 4096;
		snprintf(m->path_hint, sizeof(m->path_hint), "/dev/sd%u", i);
		/* Failed, missing and draining ones are being replaced by
		 * the next member. */
		if (m->state >= ZA_MEMBER_FAILED &&
		    m->state <= ZA_MEMBER_DRAINING && nr > 1)
			m->replacement = (uint16_t)((i + 1) % nr + 1);
	}
	sb->member_idx = idx;
	sb->member_uuid = sb->members[idx].uuid;
	return sb;
}

static void assert_sb_eq(const struct za_sb *a, const struct za_sb *b)
{
	unsigned i;

	ck_assert(za_uuid_eq(&a->array_uuid, &b->array_uuid));
	ck_assert_str_eq(a->name, b->name);
	ck_assert_uint_eq(a->generation, b->generation);
	ck_assert_uint_eq(a->ctime_s, b->ctime_s);
	ck_assert(za_uuid_eq(&a->member_uuid, &b->member_uuid));
	ck_assert_uint_eq(a->member_idx, b->member_idx);
	ck_assert_uint_eq(a->geom.k, b->geom.k);
	ck_assert_uint_eq(a->geom.p, b->geom.p);
	ck_assert_uint_eq(a->geom.matrix, b->geom.matrix);
	ck_assert_uint_eq(a->geom.stripe_rows, b->geom.stripe_rows);
	ck_assert_uint_eq(a->geom.chunk_bytes, b->geom.chunk_bytes);
	ck_assert_uint_eq(a->geom.lblock_bytes, b->geom.lblock_bytes);
	ck_assert_uint_eq(a->geom.hdr_bytes, b->geom.hdr_bytes);
	ck_assert_uint_eq(a->volume_bytes, b->volume_bytes);
	ck_assert_mem_eq(a->volume_meta, b->volume_meta,
			 sizeof(a->volume_meta));
	ck_assert_uint_eq(a->nr_members, b->nr_members);
	for (i = 0; i < a->nr_members; i++) {
		const struct za_sb_member *x = &a->members[i],
					  *y = &b->members[i];

		ck_assert(za_uuid_eq(&x->uuid, &y->uuid));
		ck_assert_uint_eq(x->state, y->state);
		ck_assert_uint_eq(x->replacement, y->replacement);
		ck_assert_uint_eq(x->nr_zones, y->nr_zones);
		ck_assert_uint_eq(x->capacity_bytes, y->capacity_bytes);
		ck_assert_uint_eq(x->zone_size_bytes, y->zone_size_bytes);
		ck_assert_str_eq(x->path_hint, y->path_hint);
	}
}

/* Make both CRCs good again after a deliberate change. */
static void fix_crcs(uint8_t *b)
{
	za_put_le32(b + O_TCRC, za_crc32c(b + HDR, REC - HDR));
	za_put_le32(b + O_HCRC, za_crc32c_update(za_crc32c(b, O_HCRC),
						 b + O_TCRC, HDR - O_TCRC));
}

static bool is_decode_err(int ret)
{
	return ret == -EBADMSG || ret == -ENOENT || ret == -EPROTONOSUPPORT;
}

/* ---- UUIDs and geometry ---- */

START_TEST(test_uuid)
{
	struct za_uuid a, b, c;
	char s[37];
	static const char *const bad[] = {
		"",
		"0123456789abcdef0123456789abcdef",
		"01234567-89ab-cdef-0123-456789abcde",
		"01234567-89ab-cdef-0123-456789abcdef0",
		"01234567-89ab-cdef-0123_456789abcdef",
		"0123456-789ab-cdef-0123-456789abcdef",
		"01234567-89ab-cdef-0123-456789abcdeg",
		"{1234567-89ab-cdef-0123-456789abcdef}",
		" 1234567-89ab-cdef-0123-456789abcdef",
		"01234567-89ab-cdef-0123-456789abcde ",
	};
	unsigned i;

	ck_assert_int_eq(za_uuid_gen(&a), 0);
	ck_assert_int_eq(za_uuid_gen(&b), 0);
	ck_assert(!za_uuid_eq(&a, &b));
	ck_assert(!za_uuid_is_null(&a));
	ck_assert_uint_eq(a.b[6] >> 4, 4);
	ck_assert_uint_eq(a.b[8] >> 6, 2);
	za_uuid_fmt(&a, s);
	ck_assert_uint_eq(strlen(s), 36);
	ck_assert(s[8] == '-' && s[13] == '-' && s[18] == '-' && s[23] == '-');
	ck_assert_int_eq(s[14], '4');
	for (i = 0; i < 36; i++)
		ck_assert(!(s[i] >= 'A' && s[i] <= 'Z'));
	ck_assert_int_eq(za_uuid_parse(s, &c), 0);
	ck_assert(za_uuid_eq(&a, &c));

	ck_assert_int_eq(
		za_uuid_parse("01234567-89AB-cdef-0123-456789abcdef", &c), 0);
	za_uuid_fmt(&c, s);
	ck_assert_str_eq(s, "01234567-89ab-cdef-0123-456789abcdef");
	ck_assert_uint_eq(c.b[0], 0x01);
	ck_assert_uint_eq(c.b[15], 0xef);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		b = a;
		ck_assert_int_eq(za_uuid_parse(bad[i], &b), -EINVAL);
		ck_assert(za_uuid_eq(&a, &b)); /* untouched on failure */
	}
	memset(&c, 0, sizeof(c));
	ck_assert(za_uuid_is_null(&c));
	ck_assert_int_eq(
		za_uuid_parse("00000000-0000-0000-0000-000000000000", &b), 0);
	ck_assert(za_uuid_is_null(&b));
}
END_TEST

START_TEST(test_geom_good)
{
	const char *why = "unset";

	ck_assert_int_eq(za_geom_check(&good_geoms[_i], &why), 0);
	ck_assert_ptr_null(why);
	ck_assert_int_eq(za_geom_check(&good_geoms[_i], NULL), 0);
}
END_TEST

START_TEST(test_geom_bad)
{
	const char *why = NULL;

	ck_assert_int_eq(za_geom_check(&bad_geoms[_i].g, &why), -EINVAL);
	ck_assert_ptr_nonnull(why);
	ck_assert_int_eq(za_geom_check(&bad_geoms[_i].g, NULL), -EINVAL);
}
END_TEST

/* ---- encoding ---- */

static const struct rt_case {
	unsigned nr, idx;
	const char *name;
	unsigned geom;
} rt_cases[] = {
	{ 1, 0, "a", 1 },
	{ 3, 2, "backup-01", 0 },
	{ 12, 5, "Archive_2024.v2", 2 },
	{ 256, 255, "x", 3 },
	{ 1024, 0,
	  "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz",
	  4 },
	{ 1024, 1023, "-._", 5 },
};

START_TEST(test_roundtrip)
{
	const struct rt_case *c = &rt_cases[_i];
	struct za_sb *sb = make_sb(c->nr, c->idx, c->name, &good_geoms[c->geom],
				   1000 + _i);
	struct za_sb *out = calloc(1, sizeof(*out));
	uint8_t *buf = talloc(REC + BLK), *buf2 = talloc(REC);
	unsigned i;

	ck_assert_int_eq(za_sb_encode(sb, buf, REC), 0);
	ck_assert_mem_eq(buf, "ZARRAYSB", 8);
	ck_assert_uint_eq(za_get_le32(buf + O_VERSION), 1);
	ck_assert_uint_eq(za_get_le32(buf + O_RECORD), REC);
	ck_assert_uint_eq(za_get_le64(buf + O_GEN), 1000 + _i);
	ck_assert_uint_eq(za_get_le32(buf + O_NR_MEMBERS), c->nr);
	ck_assert_uint_eq(buf[HDR + c->idx * ENT + 16],
			  sb->members[c->idx].state);
	for (i = c->nr * ENT; i < REC - HDR; i++)
		ck_assert_uint_eq(buf[HDR + i], 0);
	ck_assert_int_eq(za_sb_decode(buf, REC, out), 0);
	assert_sb_eq(sb, out);
	/* The encoding is canonical: decode then encode gives the bytes. */
	ck_assert_int_eq(za_sb_encode(out, buf2, REC), 0);
	ck_assert_mem_eq(buf, buf2, REC);
	/* Longer buffers are fine; the record is what is read. */
	ck_assert_int_eq(za_sb_decode(buf, REC + BLK, out), 0);
	/* Shorter ones are not, and nothing is read past them. */
	ck_assert_int_eq(za_sb_decode(buf, REC - 1, out), -EBADMSG);
	ck_assert_int_eq(za_sb_decode(buf, 16, out), -EBADMSG);
	ck_assert_int_eq(za_sb_decode(buf, 7, out), -ENOENT);
	ck_assert_int_eq(za_sb_decode(buf, 0, out), -ENOENT);
	free(buf);
	free(buf2);
	free(out);
	free(sb);
}
END_TEST

START_TEST(test_encode_rejects)
{
	struct za_sb *sb = make_sb(3, 1, "ok", &good_geoms[0], 7);
	uint8_t *buf = talloc(REC);
	struct za_sb save;

	za_log_set_sink(quiet);
	memcpy(&save, sb, sizeof(save));
	ck_assert_int_eq(za_sb_encode(sb, buf, REC - 1), -EINVAL);

#define REJECT(stmt)                                                   \
	do {                                                           \
		memcpy(sb, &save, sizeof(save));                       \
		stmt;                                                  \
		ck_assert_int_eq(za_sb_encode(sb, buf, REC), -EINVAL); \
	} while (0)
	REJECT(sb->name[0] = '\0');
	REJECT(strcpy(sb->name, "a/b"));
	REJECT(strcpy(sb->name, "a b"));
	REJECT(memset(sb->name, 'a', sizeof(sb->name)));
	REJECT(sb->generation = 0);
	REJECT(sb->nr_members = 0);
	REJECT(sb->nr_members = ZA_SB_MAX_MEMBERS + 1);
	REJECT(sb->member_idx = 3);
	REJECT(sb->member_uuid = sb->members[0].uuid);
	REJECT(sb->members[2].uuid = sb->members[0].uuid);
	REJECT(memset(&sb->members[0].uuid, 0, 16));
	REJECT(memset(&sb->array_uuid, 0, 16));
	REJECT(sb->members[0].state = 0);
	REJECT(sb->members[0].state = ZA_MEMBER_REMOVED + 1);
	/* A replacement: for a member out of service, another member. */
	REJECT(sb->members[0].replacement = 2); /* member 0 is online */
	REJECT(sb->members[1].replacement = 2); /* itself */
	REJECT(sb->members[1].replacement = 4); /* 3 members */
	REJECT(sb->members[0].zone_size_bytes = 0);
	REJECT(sb->members[0].capacity_bytes += 4096);
	REJECT(sb->geom.p = 7);
	REJECT(sb->volume_bytes = 4097);
#undef REJECT
	za_log_set_sink(NULL);

	/* The path hint is a hint: truncated and made printable. */
	memcpy(sb, &save, sizeof(save));
	memset(sb->members[1].path_hint, 'p', sizeof(sb->members[1].path_hint));
	sb->members[1].path_hint[3] = '\x1b';
	ck_assert_int_eq(za_sb_encode(sb, buf, REC), 0);
	ck_assert_int_eq(za_sb_decode(buf, REC, sb), 0);
	ck_assert_str_eq(sb->members[1].path_hint, "ppp?ppppppppppppppppppp");
	free(buf);
	free(sb);
}
END_TEST

static uint8_t *encoded(unsigned nr, unsigned idx)
{
	struct za_sb *sb = make_sb(nr, idx, "corrupt-me", &good_geoms[2], 42);
	uint8_t *buf = talloc(REC);

	ck_assert_int_eq(za_sb_encode(sb, buf, REC), 0);
	free(sb);
	return buf;
}

static int expect_for(size_t off)
{
	if (off < 8)
		return -ENOENT;
	if (off < 12)
		return -EPROTONOSUPPORT;
	return -EBADMSG;
}

START_TEST(test_corrupt_each_byte)
{
	static const unsigned nrs[] = { 3, 1024 };
	static const uint8_t xors[] = { 0x01, 0x80, 0xff };
	uint8_t *buf = encoded(nrs[_i], nrs[_i] - 1);
	struct za_sb *out = calloc(1, sizeof(*out));
	unsigned x, tried = 0;
	size_t off;

	for (off = 0; off < REC; off += off < 512 ? 1 : off < HDR ? 29 : 97) {
		for (x = 0; x < sizeof(xors); x++) {
			buf[off] ^= xors[x];
			out->generation = 0xdead;
			ck_assert_int_eq(za_sb_decode(buf, REC, out),
					 expect_for(off));
			/* Nothing is written to @out on failure. */
			ck_assert_uint_eq(out->generation, 0xdead);
			buf[off] ^= xors[x];
			tried++;
		}
	}
	/* The last bytes of both parts, and each CRC byte. */
	for (off = HDR - 4; off < HDR + 4; off++) {
		buf[off] ^= 0x10;
		ck_assert_int_eq(za_sb_decode(buf, REC, out), -EBADMSG);
		buf[off] ^= 0x10;
	}
	buf[REC - 1] ^= 0x10;
	ck_assert_int_eq(za_sb_decode(buf, REC, out), -EBADMSG);
	buf[REC - 1] ^= 0x10;
	ck_assert_int_gt(tried, 3000);
	ck_assert_int_eq(za_sb_decode(buf, REC, out), 0);
	free(out);
	free(buf);
}
END_TEST

START_TEST(test_random_mutations)
{
	uint8_t *ref = encoded(12, 4), *buf = talloc(REC);
	struct za_sb *out = calloc(1, sizeof(*out));
	unsigned i, j, accepted = 0;

	rnd_state = 0x5eed0001;
	for (i = 0; i < 3000; i++) {
		unsigned n = 1 + (unsigned)(rnd() % 8);
		bool changed = false;

		memcpy(buf, ref, REC);
		for (j = 0; j < n; j++) {
			/* Mostly the header and the used entries. */
			size_t off = rnd() % 4 ? rnd() % (HDR + 12 * ENT) :
						 rnd() % REC;
			uint8_t v = (uint8_t)rnd();

			changed |= buf[off] != v;
			buf[off] = v;
		}
		if (!changed)
			continue;
		ck_assert(is_decode_err(za_sb_decode(buf, REC, out)));

		/*
		 * The same change with the CRCs made good reaches the field
		 * checks: either refused, or a record whose canonical
		 * encoding is exactly these bytes.
		 */
		if (memcmp(buf, "ZARRAYSB", 8) ||
		    za_get_le32(buf + O_VERSION) != 1 ||
		    za_get_le32(buf + O_RECORD) != REC)
			continue;
		fix_crcs(buf);
		if (za_sb_decode(buf, REC, out) == 0) {
			uint8_t *again = talloc(REC);

			ck_assert_int_eq(za_sb_encode(out, again, REC), 0);
			ck_assert_mem_eq(again, buf, REC);
			free(again);
			accepted++;
		}
	}
	/* Changes to free-form fields (ctime, volume_meta) do get through. */
	ck_assert_int_gt(accepted, 0);
	free(out);
	free(buf);
	free(ref);
}
END_TEST

/* Set a field, make the CRCs good, expect @want from decode. */
static void field_case(const uint8_t *ref, size_t off, const void *val,
		       size_t len, int want)
{
	uint8_t *buf = talloc(REC);
	struct za_sb *out = calloc(1, sizeof(*out));

	memcpy(buf, ref, REC);
	memcpy(buf + off, val, len);
	fix_crcs(buf);
	ck_assert_msg(za_sb_decode(buf, REC, out) == want,
		      "offset %zu: want %d", off, want);
	free(out);
	free(buf);
}

static void u8_case(const uint8_t *ref, size_t off, uint8_t v, int want)
{
	field_case(ref, off, &v, 1, want);
}

static void u32_case(const uint8_t *ref, size_t off, uint32_t v, int want)
{
	uint8_t b[4];

	za_put_le32(b, v);
	field_case(ref, off, b, 4, want);
}

static void u64_case(const uint8_t *ref, size_t off, uint64_t v, int want)
{
	uint8_t b[8];

	za_put_le64(b, v);
	field_case(ref, off, b, 8, want);
}

START_TEST(test_field_rules)
{
	/* 3 members, this device is member 1. */
	uint8_t *ref = encoded(3, 1);
	const size_t e0 = HDR, e1 = HDR + ENT, e2 = HDR + 2 * ENT,
		     e3 = HDR + 3 * ENT;
	uint8_t many[64], zero16[16] = { 0 };

	/* Controls: free-form fields may take any value. */
	u64_case(ref, O_CTIME, 1, 0);
	u8_case(ref, O_META + 100, 0x5a, 0);
	u64_case(ref, O_VOLUME, 0, 0);
	u64_case(ref, O_GEN, 1, 0);
	u8_case(ref, e0 + 16, ZA_MEMBER_REMOVED, 0);

	u32_case(ref, O_VERSION, 2, -EPROTONOSUPPORT);
	u32_case(ref, O_VERSION, 0, -EPROTONOSUPPORT);
	u32_case(ref, O_RECORD, REC + 4096, -EBADMSG);
	u32_case(ref, O_RECORD, 4096, -EBADMSG);
	field_case(ref, 0, "ZARRAYSC", 8, -ENOENT);
	field_case(ref, O_ARRAY_UUID, zero16, 16, -EBADMSG);
	u8_case(ref, O_NAME, 0, -EBADMSG);
	u8_case(ref, O_NAME, '/', -EBADMSG);
	u8_case(ref, O_NAME + 3, ' ', -EBADMSG);
	u8_case(ref, O_NAME + 30, 'x', -EBADMSG); /* after the NUL */
	memset(many, 'n', sizeof(many));
	field_case(ref, O_NAME, many, 64, -EBADMSG); /* no NUL */
	field_case(ref, O_NAME, many, 63, 0); /* 63 chars is the most */
	u64_case(ref, O_GEN, 0, -EBADMSG);
	u32_case(ref, O_MEMBER_IDX, 3, -EBADMSG);
	u32_case(ref, O_MEMBER_IDX, 0xffffffffu, -EBADMSG);
	u32_case(ref, O_MEMBER_IDX, 0, -EBADMSG); /* uuid is member 1's */
	field_case(ref, O_MEMBER_UUID, ref + e2, 16, -EBADMSG);
	u32_case(ref, O_NR_MEMBERS, 0, -EBADMSG);
	u32_case(ref, O_NR_MEMBERS, 2, -EBADMSG); /* entry 2 is not zero */
	u32_case(ref, O_NR_MEMBERS, 4, -EBADMSG); /* entry 3 is zero */
	u32_case(ref, O_NR_MEMBERS, ZA_SB_MAX_MEMBERS + 1, -EBADMSG);
	u32_case(ref, O_NR_MEMBERS, 0xffffffffu, -EBADMSG);
	u8_case(ref, O_K, 0, -EBADMSG);
	u8_case(ref, O_P, 7, -EBADMSG);
	u8_case(ref, O_MATRIX, 2, -EBADMSG);
	u8_case(ref, O_ROWS, 0, -EBADMSG);
	u32_case(ref, O_CHUNK, 3 * 4096, -EBADMSG);
	u32_case(ref, O_LBLOCK, 512, -EBADMSG);
	u32_case(ref, O_HDRB, 8192, -EBADMSG);
	u64_case(ref, O_VOLUME, 4095, -EBADMSG);
	u8_case(ref, O_RESERVED, 1, -EBADMSG);
	u8_case(ref, HDR - 1, 1, -EBADMSG);

	/* Member entries. */
	field_case(ref, e0, zero16, 16, -EBADMSG);
	field_case(ref, e2, ref + e0, 16, -EBADMSG); /* duplicate uuid */
	u8_case(ref, e0 + 16, 0, -EBADMSG);
	u8_case(ref, e0 + 16, 6, -EBADMSG);
	u8_case(ref, e0 + 17, 1, -EBADMSG);
	u8_case(ref, e0 + 19, 1, -EBADMSG);
	/* The replacement (le16 at 18): member 1 is failed, 0 online. */
	u8_case(ref, e1 + 18, 0, 0);
	u8_case(ref, e1 + 18, 1, 0);
	u8_case(ref, e1 + 18, 3, 0);
	u8_case(ref, e1 + 18, 2, -EBADMSG); /* itself */
	u8_case(ref, e1 + 18, 4, -EBADMSG); /* past the table */
	u8_case(ref, e1 + 19, 1, -EBADMSG); /* 256 + ... */
	u8_case(ref, e0 + 18, 2, -EBADMSG); /* online: no replacement */
	u32_case(ref, e0 + 20, 0, -EBADMSG);
	u64_case(ref, e0 + 24, 0, -EBADMSG);
	u64_case(ref, e0 + 24, 4095, -EBADMSG);
	u64_case(ref, e0 + 24, 100ull * (256 << 20) + 4096, -EBADMSG);
	u64_case(ref, e0 + 24, 100ull * (256 << 20), 0);
	u64_case(ref, e0 + 32, 0, -EBADMSG);
	u64_case(ref, e0 + 32, 1000, -EBADMSG);
	field_case(ref, e1 + 40, many, 24, -EBADMSG); /* hint without NUL */
	u8_case(ref, e1 + 40, 0x01, -EBADMSG);
	u8_case(ref, e1 + 40 + 20, 'x', -EBADMSG); /* after the NUL */
	u8_case(ref, e3, 1, -EBADMSG); /* an unused entry */
	u8_case(ref, REC - 1, 1, -EBADMSG);
	free(ref);
}
END_TEST

START_TEST(test_decode_blank)
{
	uint8_t *buf = talloc(REC);
	struct za_sb *out = calloc(1, sizeof(*out));

	ck_assert_int_eq(za_sb_decode(buf, REC, out), -ENOENT);
	memset(buf, 0xff, REC);
	ck_assert_int_eq(za_sb_decode(buf, REC, out), -ENOENT);
	free(out);
	free(buf);
}
END_TEST

/* ---- I/O on emulated drives ---- */

#define SLOT4K ((uint64_t)REC) /* 17 blocks */

static const struct iogeo {
	enum za_dev_model model;
	int conv;
	uint64_t zsize;
	uint64_t zcap; /* 0: the zone size */
	uint32_t gran;
	bool fills; /* zone capacity is a whole number of records */
} iogeos[] = {
	{ ZA_DEV_MODEL_HM_SMR, 0, 1 << 20, 0, 4096, false },
	{ ZA_DEV_MODEL_HM_SMR, 1, 1 << 20, 0, 4096, false },
	{ ZA_DEV_MODEL_HM_SMR, 2, 1 << 20, 0, 4096, false },
	{ ZA_DEV_MODEL_ZNS, 0, 1 << 20, 768 << 10, 4096, false },
	/* FULL zones report wp = zone end, far past the capacity. */
	{ ZA_DEV_MODEL_ZNS, 0, 2 << 20, 15 * SLOT4K, 4096, true },
	{ ZA_DEV_MODEL_HM_SMR, 0, 1 << 20, 0, 8192, false },
	{ ZA_DEV_MODEL_HM_SMR, 1, 1 << 20, 0, 16384, false },
};
#define NR_IOGEOS (sizeof(iogeos) / sizeof(iogeos[0]))

static void io_drive(struct tdrive *t, const struct iogeo *g)
{
	struct za_emu_params p;

	za_emu_params_default(&p, g->model);
	p.size_bytes = 16ull << 20;
	p.zone_size_bytes = g->zsize;
	p.zone_cap_bytes = g->zcap;
	p.nr_conv_zones = g->conv;
	p.write_gran_bytes = g->gran;
	p.cache_bytes = 512ull << 10;
	tdrive_make(t, &p);
}

static uint64_t slot_of(const struct iogeo *g)
{
	return (REC + g->gran - 1) / g->gran * g->gran;
}

/* This drive's record of @gen. */
static struct za_sb *drive_sb(uint64_t gen)
{
	struct za_sb *sb = make_sb(5, 3, "io", &good_geoms[0], gen);

	sb->volume_meta[0] = (uint8_t)gen;
	return sb;
}

static void write_gen(struct za_dev *dev, uint64_t gen)
{
	struct za_sb *sb = drive_sb(gen);

	ck_assert_int_eq(za_sb_write(dev, sb), 0);
	free(sb);
}

static uint64_t read_gen(struct za_dev *dev)
{
	struct za_sb *sb = calloc(1, sizeof(*sb));
	struct za_sb *want;
	uint64_t gen;

	ck_assert_int_eq(za_sb_read(dev, sb), 0);
	gen = sb->generation;
	want = drive_sb(gen);
	assert_sb_eq(want, sb);
	free(want);
	free(sb);
	return gen;
}

static int read_rc(struct za_dev *dev)
{
	struct za_sb *sb = calloc(1, sizeof(*sb));
	int ret = za_sb_read(dev, sb);

	free(sb);
	return ret;
}

START_TEST(test_io_generations)
{
	const struct iogeo *g = &iogeos[_i];
	struct tdrive t;
	uint64_t gen, resets;
	bool saw_full = false;
	unsigned seq = (unsigned)(g->conv < 2 ? 2 - g->conv : 0);

	io_drive(&t, g);
	ck_assert_int_eq(za_sb_check_dev(t.dev), 0);
	ck_assert_int_eq(read_rc(t.dev), -ENOENT);
	/* 40 generations: 20 per zone, more than a zone holds. */
	for (gen = 1; gen <= 40; gen++) {
		struct za_zone z;

		write_gen(t.dev, gen);
		ck_assert_uint_eq(read_gen(t.dev), gen);
		z = tzone(t.dev, (uint32_t)(gen % 2));
		if (z.cond == ZA_ZONE_COND_FULL)
			saw_full = true; /* wp reads as the zone end */
		else if (z.type == ZA_ZONE_TYPE_SWR)
			/* Records are whole slots from the zone start. */
			ck_assert_uint_eq(
				(z.wp_bytes - z.start_bytes) % slot_of(g), 0);
	}
	resets = t.dev->stats.resets;
	if (seq)
		ck_assert_uint_gt(resets, 0);
	else
		ck_assert_uint_eq(resets, 0);
	ck_assert_int_eq(saw_full, g->fills);
	/* What is on the drive is what a fresh open finds. */
	ck_assert_int_eq(tdrive_reopen(&t), 0);
	ck_assert_uint_eq(read_gen(t.dev), 40);
	tdrive_free(&t);
}
END_TEST

struct async_ctx {
	bool done;
	int result;
	unsigned calls;
};

static void async_done(struct za_sb_write_op *op, int result)
{
	struct async_ctx *c = op->priv;

	c->done = true;
	c->result = result;
	c->calls++;
}

static int write_async(struct za_dev *dev, const struct za_sb *sb)
{
	struct za_sb_write_op op;
	struct async_ctx c = { 0 };

	ck_assert_int_eq(za_sb_write_async(&op, dev, sb, async_done, &c), 0);
	/* Never called back from inside the call. */
	ck_assert(!c.done);
	ck_assert_int_eq(za_io_run_until(dev->io, &c.done, 10ull * 1000000000),
			 0);
	ck_assert_uint_eq(c.calls, 1);
	return c.result;
}

START_TEST(test_io_async)
{
	const struct iogeo *g = &iogeos[_i];
	struct za_sb *sb;
	struct tdrive t;
	uint64_t gen;

	io_drive(&t, g);
	for (gen = 1; gen <= 36; gen++) {
		sb = drive_sb(gen);
		ck_assert_int_eq(write_async(t.dev, sb), 0);
		free(sb);
		ck_assert_uint_eq(read_gen(t.dev), gen);
		if (gen % 3 == 0) /* and the synchronous path agrees */
			write_gen(t.dev, ++gen);
	}
	/* The last write is asynchronous: its FLUSH is what a cut spares. */
	sb = drive_sb(38);
	ck_assert_int_eq(write_async(t.dev, sb), 0);
	free(sb);
	ck_assert_int_eq(za_dev_power_cut(t.dev), 0);
	ck_assert_uint_eq(read_gen(t.dev), 38);
	tdrive_free(&t);
}
END_TEST

/* Write @len bytes of @data where the next record of zone @z would go. */
static void put_tail(struct za_dev *dev, const struct iogeo *g, uint32_t z,
		     const uint8_t *data, uint64_t len)
{
	struct za_zone zone = tzone(dev, z);
	uint64_t off = zone.type == ZA_ZONE_TYPE_CNV ? zone.start_bytes :
						       zone.wp_bytes;
	uint64_t slot = slot_of(g);
	uint8_t *b = talloc(slot);

	memcpy(b, data, len < slot ? len : slot);
	len = (len + g->gran - 1) / g->gran * g->gran;
	ck_assert_int_eq(tio(dev, ZA_DEV_OP_WRITE, off, b, len), 0);
	free(b);
}

START_TEST(test_io_torn)
{
	const struct iogeo *g = &iogeos[_i];
	uint64_t slot = slot_of(g);
	uint8_t *rec = talloc(slot);
	struct za_sb *sb;
	struct tdrive t;
	uint64_t gen;

	io_drive(&t, g);
	za_log_set_sink(quiet);
	for (gen = 1; gen <= 5; gen++)
		write_gen(t.dev, gen);

	/* Garbage after generation 5 in its zone: the zone falls back. */
	tfill(rec, slot, 0x33);
	put_tail(t.dev, g, 1, rec, slot);
	ck_assert_uint_eq(read_gen(t.dev), g->conv >= 2 ? 4 : 5);

	/* A torn generation 6 (bad CRC) in the other zone: still 5 or 4. */
	sb = drive_sb(6);
	ck_assert_int_eq(za_sb_encode(sb, rec, slot), 0);
	free(sb);
	rec[5000] ^= 1;
	put_tail(t.dev, g, 0, rec, slot);
	if (g->conv >= 2) /* both conventional copies are gone */
		ck_assert_int_eq(read_rc(t.dev), -EBADMSG);
	else
		ck_assert_uint_eq(read_gen(t.dev), 5);
	write_gen(t.dev, 6);
	ck_assert_uint_eq(read_gen(t.dev), 6);

	/*
	 * Half a record of generation 7: the write pointer stops between
	 * two slots. Reading ignores it; the next write pads to the slot.
	 */
	sb = drive_sb(7);
	ck_assert_int_eq(za_sb_encode(sb, rec, slot), 0);
	free(sb);
	put_tail(t.dev, g, 1, rec, 8 * 4096);
	ck_assert_uint_eq(read_gen(t.dev), 6);
	write_gen(t.dev, 7);
	ck_assert_uint_eq(read_gen(t.dev), 7);
	if (g->conv < 2) {
		struct za_zone z = tzone(t.dev, 1);

		ck_assert_int_eq(z.type, ZA_ZONE_TYPE_SWR);
		ck_assert_uint_eq((z.wp_bytes - z.start_bytes) % slot, 0);
	}
	ck_assert_int_eq(tdrive_reopen(&t), 0);
	ck_assert_uint_eq(read_gen(t.dev), 7);
	za_log_set_sink(NULL);
	free(rec);
	tdrive_free(&t);
}
END_TEST

START_TEST(test_io_nothing_valid)
{
	/* Sequential zones, each with more bad records than are tried. */
	const struct iogeo *g = &iogeos[0];
	uint64_t slot = slot_of(g);
	uint8_t *rec = talloc(slot);
	struct tdrive t;
	unsigned i;

	io_drive(&t, g);
	za_log_set_sink(quiet);
	/* Another program's data, no magic anywhere: not ours, not bad. */
	tfill(rec, slot, 9);
	put_tail(t.dev, g, 0, rec, slot);
	put_tail(t.dev, g, 1, rec, slot);
	ck_assert_int_eq(read_rc(t.dev), -ENOENT);
	write_gen(t.dev, 1);
	write_gen(t.dev, 2);
	/* Magic, version and length right; CRCs wrong. */
	tfill(rec, slot, 1);
	memcpy(rec, "ZARRAYSB", 8);
	za_put_le32(rec + O_VERSION, 1);
	za_put_le32(rec + O_RECORD, REC);
	for (i = 0; i < 5; i++) {
		put_tail(t.dev, g, 0, rec, slot);
		put_tail(t.dev, g, 1, rec, slot);
	}
	nr_logged = 0;
	ck_assert_int_eq(read_rc(t.dev), -EBADMSG);
	ck_assert_uint_gt(nr_logged, 0);
	/* The log continues after the garbage. */
	write_gen(t.dev, 3);
	ck_assert_uint_eq(read_gen(t.dev), 3);
	/* A newer format as the newest record of a zone: hands off. */
	za_put_le32(rec + O_VERSION, 2);
	put_tail(t.dev, g, 0, rec, slot);
	ck_assert_int_eq(read_rc(t.dev), -EPROTONOSUPPORT);
	za_log_set_sink(NULL);
	free(rec);
	tdrive_free(&t);
}
END_TEST

START_TEST(test_io_power_cut)
{
	const struct iogeo *g = &iogeos[_i];
	uint64_t slot = slot_of(g);
	uint8_t *rec = talloc(slot);
	struct za_sb *sb;
	struct tdrive t;
	uint64_t gen;

	io_drive(&t, g);
	for (gen = 1; gen <= 7; gen++)
		write_gen(t.dev, gen);
	ck_assert_int_eq(za_dev_power_cut(t.dev), 0);
	ck_assert_uint_eq(read_gen(t.dev), 7);

	/*
	 * The control: generation 8 written without a FLUSH is lost by the
	 * same cut, so the check above depends on za_sb_write flushing.
	 */
	sb = drive_sb(8);
	ck_assert_int_eq(za_sb_encode(sb, rec, slot), 0);
	free(sb);
	put_tail(t.dev, g, 0, rec, slot);
	ck_assert_uint_eq(read_gen(t.dev), 8);
	ck_assert_int_eq(za_dev_power_cut(t.dev), 0);
	ck_assert_uint_eq(read_gen(t.dev), 7);
	ck_assert_int_eq(tdrive_reopen(&t), 0);
	ck_assert_uint_eq(read_gen(t.dev), 7);
	free(rec);
	tdrive_free(&t);
}
END_TEST

START_TEST(test_io_clear)
{
	const struct iogeo *g = &iogeos[_i];
	struct tdrive t;

	io_drive(&t, g);
	ck_assert_int_eq(za_sb_clear(t.dev), 0);
	ck_assert_int_eq(read_rc(t.dev), -ENOENT);
	write_gen(t.dev, 1);
	write_gen(t.dev, 2);
	write_gen(t.dev, 3);
	ck_assert_int_eq(za_sb_clear(t.dev), 0);
	ck_assert_int_eq(read_rc(t.dev), -ENOENT);
	ck_assert_int_eq(za_dev_power_cut(t.dev), 0);
	ck_assert_int_eq(read_rc(t.dev), -ENOENT);
	write_gen(t.dev, 4);
	ck_assert_uint_eq(read_gen(t.dev), 4);
	tdrive_free(&t);
}
END_TEST

static struct za_dev *wrap(struct tdrive *t)
{
	struct za_dev *f;

	ck_assert_int_eq(za_fault_wrap(t->dev, &f), 0);
	t->dev = f;
	return f;
}

START_TEST(test_io_faults)
{
	struct za_fault_cfg cfg = { 0 };
	struct za_sb *sb = drive_sb(3);
	struct tdrive t;
	struct za_dev *f;

	io_drive(&t, &iogeos[1]);
	f = wrap(&t);
	za_log_set_sink(quiet);
	write_gen(f, 1);
	write_gen(f, 2);

	/* Every read comes back with a flipped bit: nothing valid. */
	cfg.flip_rate_ppm = 1000000;
	cfg.seed = 3;
	za_fault_set(f, &cfg);
	ck_assert_int_eq(read_rc(f), -EBADMSG);

	/* Every data op fails. */
	memset(&cfg, 0, sizeof(cfg));
	cfg.eio_rate_ppm = 1000000;
	za_fault_set(f, &cfg);
	ck_assert_int_eq(read_rc(f), -EIO);
	ck_assert_int_eq(za_sb_write(f, sb), -EIO);
	ck_assert_int_eq(write_async(f, sb), -EIO);

	memset(&cfg, 0, sizeof(cfg));
	za_fault_set(f, &cfg);
	ck_assert_uint_eq(read_gen(f), 2);

	/* One superblock zone offline: the other still answers. */
	ck_assert_int_eq(za_fault_zone_cond(f, 0, ZA_ZONE_COND_OFFLINE), 0);
	ck_assert_uint_eq(read_gen(f), 1);
	ck_assert_int_eq(za_sb_write(f, sb), 0); /* generation 3: zone 1 */
	ck_assert_uint_eq(read_gen(f), 3);
	sb->generation = 4;
	ck_assert_int_eq(za_sb_write(f, sb), -EIO);
	ck_assert_int_eq(write_async(f, sb), -EIO);
	ck_assert_int_eq(za_fault_zone_cond(f, 0, ZA_ZONE_COND_NOT_WP), 0);

	/* The drive is gone. */
	za_fault_fail(f);
	ck_assert_int_eq(read_rc(f), -ENODEV);
	ck_assert_int_eq(za_sb_write(f, sb), -ENODEV);
	ck_assert_int_eq(write_async(f, sb), -ENODEV);
	ck_assert_int_eq(za_sb_clear(f), -ENODEV);

	/* An invalid record is refused before any I/O, on the loop. */
	sb->generation = 0;
	ck_assert_int_eq(write_async(f, sb), -EINVAL);
	za_log_set_sink(NULL);
	free(sb);
	tdrive_free(&t);
}
END_TEST

START_TEST(test_check_dev)
{
	struct za_dev d;
	struct za_emu_params p;
	struct tdrive t;

	memset(&d, 0, sizeof(d));
	snprintf(d.path, sizeof(d.path), "fake");
	d.caps.lblock_bytes = 4096;
	d.caps.write_gran_bytes = 4096;
	d.caps.nr_zones = 3;
	d.caps.zone_size_bytes = 1 << 20;
	d.caps.zone_cap_bytes = REC;
	d.caps.max_io_bytes = 1 << 20;
	ck_assert_int_eq(za_sb_check_dev(&d), 0);

	za_log_set_sink(quiet);
	nr_logged = 0;
	d.caps.nr_zones = 2;
	ck_assert_int_eq(za_sb_check_dev(&d), -EINVAL);
	d.caps.nr_zones = 3;
	d.caps.zone_cap_bytes = REC - 4096;
	ck_assert_int_eq(za_sb_check_dev(&d), -EINVAL);
	d.caps.zone_cap_bytes = REC;
	d.caps.lblock_bytes = 512;
	ck_assert_int_eq(za_sb_check_dev(&d), -EINVAL);
	d.caps.lblock_bytes = 4096;
	d.caps.write_gran_bytes = 8192; /* the record takes 72 KiB then */
	ck_assert_int_eq(za_sb_check_dev(&d), -EINVAL);
	ck_assert_uint_eq(nr_logged, 4);

	/* A real drive with zones too small for a record. */
	za_emu_params_default(&p, ZA_DEV_MODEL_HM_SMR);
	p.size_bytes = 1 << 20;
	p.zone_size_bytes = 64 << 10;
	p.nr_conv_zones = 0;
	tdrive_make(&t, &p);
	ck_assert_int_eq(za_sb_check_dev(t.dev), -EINVAL);
	ck_assert_int_eq(read_rc(t.dev), -EINVAL);
	za_log_set_sink(NULL);
	tdrive_free(&t);
}
END_TEST

START_TEST(test_io_small_max_io)
{
	/* A drive whose largest I/O is below one record. */
	struct za_emu_params p;
	struct tdrive t;
	uint64_t gen;

	za_emu_params_default(&p, ZA_DEV_MODEL_ZNS);
	p.size_bytes = 8ull << 20;
	p.zone_size_bytes = 1ull << 20;
	p.zone_cap_bytes = 512ull << 10;
	p.max_io_bytes = 16384;
	p.max_append_bytes = 16384;
	tdrive_make(&t, &p);
	for (gen = 1; gen <= 20; gen++) {
		if (gen % 2)
			write_gen(t.dev, gen);
		else {
			struct za_sb *sb = drive_sb(gen);

			ck_assert_int_eq(write_async(t.dev, sb), 0);
			free(sb);
		}
		ck_assert_uint_eq(read_gen(t.dev), gen);
	}
	tdrive_free(&t);
}
END_TEST

/*
 * za_sb_read_many() reads every member's newest records at once, then
 * checks each as za_sb_read() does: for drives in every state it answers
 * exactly what za_sb_read() answers of each - blank, several generations,
 * garbage or a torn record after the newest (the fallback reads then), a
 * missing member, a drive whose reads all fail, one whose
 * first superblock zone is offline, one whose largest I/O is below a
 * record (several chunks per read). The drives are opened side by side
 * on one loop by za_dev_open_many(), which also answers for a path that
 * does not exist.
 */
#define RM_DRIVES 10
START_TEST(test_io_read_many)
{
	const struct iogeo *g = &iogeos[_i];
	struct za_sb *many[RM_DRIVES], *one = calloc(1, sizeof(*one));
	struct za_dev *devs[RM_DRIVES];
	const char *paths[RM_DRIVES];
	struct tdrive t[RM_DRIVES];
	int rc_open[RM_DRIVES], rc[RM_DRIVES];
	uint64_t reads[RM_DRIVES];
	struct za_fault_cfg cfg = { 0 };
	uint64_t slot = slot_of(g), gen;
	uint8_t *rec = talloc(slot);
	struct za_sb *sb;
	struct za_io *io;
	unsigned i;

	za_log_set_sink(quiet);
	for (i = 0; i < RM_DRIVES; i++) {
		if (i == 8) {
			struct za_emu_params p;

			za_emu_params_default(&p, ZA_DEV_MODEL_ZNS);
			p.size_bytes = 8ull << 20;
			p.zone_size_bytes = 1ull << 20;
			p.zone_cap_bytes = 512ull << 10;
			p.max_io_bytes = 16384;
			p.max_append_bytes = 16384;
			tdrive_make(&t[i], &p);
		} else {
			io_drive(&t[i], g);
		}
		many[i] = calloc(1, sizeof(*many[i]));
	}
	for (gen = 1; gen <= 3; gen++)
		write_gen(t[1].dev, gen);
	for (gen = 1; gen <= 5; gen++) {
		write_gen(t[2].dev, gen);
		write_gen(t[3].dev, gen);
	}
	tfill(rec, slot, 0x33);
	put_tail(t[2].dev, g, 1, rec, slot);
	sb = drive_sb(6);
	ck_assert_int_eq(za_sb_encode(sb, rec, slot), 0);
	free(sb);
	rec[5000] ^= 1;
	put_tail(t[3].dev, g, 0, rec, slot);
	for (gen = 1; gen <= 9; gen++)
		write_gen(t[5].dev, gen);
	for (gen = 1; gen <= 2; gen++) {
		write_gen(t[6].dev, gen);
		write_gen(t[7].dev, gen);
	}
	for (gen = 1; gen <= 7; gen++)
		write_gen(t[8].dev, gen);

	/* All on one loop now, opened side by side. */
	ck_assert_int_eq(za_io_new(NULL, &io), 0);
	for (i = 0; i < RM_DRIVES; i++) {
		za_dev_close(t[i].dev);
		t[i].dev = NULL;
		paths[i] = t[i].path;
	}
	paths[4] = "/nonexistent/za-unit-drive";
	za_dev_open_many(io, paths, RM_DRIVES, 0, devs, rc_open);
	for (i = 0; i < RM_DRIVES; i++) {
		ck_assert_int_eq(rc_open[i], i == 4 ? -ENOENT : 0);
		ck_assert(i == 4 ? !devs[i] : devs[i] && devs[i]->io == io);
	}
	ck_assert_int_eq(za_fault_wrap(devs[6], &devs[6]), 0);
	cfg.eio_rate_ppm = 1000000;
	za_fault_set(devs[6], &cfg);
	ck_assert_int_eq(za_fault_wrap(devs[7], &devs[7]), 0);
	ck_assert_int_eq(za_fault_zone_cond(devs[7], 0, ZA_ZONE_COND_OFFLINE),
			 0);

	for (i = 0; i < RM_DRIVES; i++)
		reads[i] = devs[i] ? devs[i]->stats.reads : 0;
	ck_assert_int_eq(za_sb_read_many(devs, RM_DRIVES, many, rc), 0);
	for (i = 0; i < RM_DRIVES; i++) {
		uint64_t r0 = devs[i] ? devs[i]->stats.reads : 0;
		int want = devs[i] ? za_sb_read(devs[i], one) : -ENODEV;
		uint64_t r1 = devs[i] ? devs[i]->stats.reads : 0;

		ck_assert_msg(rc[i] == want, "drive %u: %d, za_sb_read() %d", i,
			      rc[i], want);
		if (!want)
			assert_sb_eq(one, many[i]);
		/* The records read ahead were the ones needed: no more
		 * reads than za_sb_read() (a failed one is read again). */
		if (i != 6)
			ck_assert_uint_eq(r0 - reads[i], r1 - r0);
	}
	/* And what that is, drive by drive. */
	ck_assert_int_eq(rc[0], -ENOENT);
	ck_assert_uint_eq(many[1]->generation, 3);
	ck_assert_uint_eq(many[2]->generation, g->conv >= 2 ? 4 : 5);
	if (g->conv < 2)
		ck_assert_uint_eq(many[3]->generation, 5);
	ck_assert_uint_eq(many[5]->generation, 9);
	ck_assert_int_eq(rc[6], -EIO);
	ck_assert_uint_eq(many[7]->generation, 1);
	ck_assert_uint_eq(many[8]->generation, 7);

	for (i = 0; i < RM_DRIVES; i++) {
		za_dev_close(devs[i]);
		tdrive_free(&t[i]);
		free(many[i]);
	}
	za_io_free(io);
	za_log_set_sink(NULL);
	free(one);
	free(rec);
}
END_TEST

/* ---- assembly ---- */

#define AN 6 /* members of the test array */

struct aset {
	struct za_sb *sb[16];
	const struct za_sb *in[16];
	int rc[16];
	unsigned n;
	struct za_asm_result res;
};

/* Device records of a healthy 4+2 array at generation @gen. */
static struct za_sb *member_sb(unsigned idx, uint64_t gen)
{
	struct za_sb *sb = make_sb(AN, idx, "tank", &good_geoms[0], gen);
	unsigned i;

	for (i = 0; i < AN; i++)
		sb->members[i].state = ZA_MEMBER_ONLINE;
	return sb;
}

static void aset_add(struct aset *s, struct za_sb *sb, int rc)
{
	ck_assert_uint_lt(s->n, 16);
	s->sb[s->n] = sb;
	s->in[s->n] = rc ? NULL : sb;
	s->rc[s->n] = rc;
	s->n++;
}

static void aset_free(struct aset *s)
{
	unsigned i;

	for (i = 0; i < s->n; i++)
		free(s->sb[i]);
	s->n = 0;
}

static int aset_run(struct aset *s, const char *name)
{
	return za_sb_assemble(s->in, s->rc, s->n, name, &s->res);
}

START_TEST(test_asm_all_present)
{
	static const unsigned perm[AN] = { 4, 0, 5, 2, 1, 3 };
	struct aset s = { .n = 0 };
	unsigned i;

	for (i = 0; i < AN; i++)
		aset_add(&s, member_sb(perm[i], 10), 0);
	ck_assert_int_eq(aset_run(&s, "tank"), 0);
	ck_assert_uint_eq(s.res.nr_present, AN);
	ck_assert_uint_eq(s.res.nr_lost, 0);
	ck_assert_uint_eq(s.res.ref->generation, 10);
	ck_assert_ptr_eq(s.res.ref, s.in[s.res.ref_dev]);
	for (i = 0; i < AN; i++) {
		ck_assert_int_eq(s.res.dev_state[i], ZA_ASM_DEV_MEMBER);
		ck_assert_int_eq(s.res.member_dev[perm[i]], (int)i);
		ck_assert_uint_eq(s.res.member_state[i], ZA_MEMBER_ONLINE);
	}
	ck_assert_int_eq(s.res.member_dev[AN], -1);
	/* No name: the newest record's array. */
	ck_assert_int_eq(aset_run(&s, NULL), 0);
	ck_assert_uint_eq(s.res.nr_present, AN);
	za_log_set_sink(quiet);
	ck_assert_int_eq(aset_run(&s, "pond"), -ENOENT);
	za_log_set_sink(NULL);
	aset_free(&s);
}
END_TEST

START_TEST(test_asm_foreign_blank_corrupt)
{
	struct aset s = { .n = 0 };
	struct za_sb *other = make_sb(3, 0, "pond", &good_geoms[0], 99);
	struct za_sb *renamed = member_sb(5, 10);
	unsigned i;

	for (i = 0; i < AN - 1; i++)
		aset_add(&s, member_sb(i, 10), 0);
	tuuid(&other->array_uuid, 0xf0, 0xf0);
	aset_add(&s, other, 0); /* 5 */
	strcpy(renamed->name, "tank2"); /* same uuid, other name */
	aset_add(&s, renamed, 0); /* 6 */
	aset_add(&s, NULL, -ENOENT); /* 7 */
	aset_add(&s, NULL, -EBADMSG); /* 8 */
	aset_add(&s, NULL, -EIO); /* 9 */
	aset_add(&s, member_sb(0, 10), -EPROTONOSUPPORT); /* 10 */
	ck_assert_int_eq(aset_run(&s, "tank"), 0);
	for (i = 0; i < AN - 1; i++)
		ck_assert_int_eq(s.res.dev_state[i], ZA_ASM_DEV_MEMBER);
	ck_assert_int_eq(s.res.dev_state[5], ZA_ASM_DEV_FOREIGN);
	ck_assert_int_eq(s.res.dev_state[6], ZA_ASM_DEV_FOREIGN);
	ck_assert_int_eq(s.res.dev_state[7], ZA_ASM_DEV_BLANK);
	ck_assert_int_eq(s.res.dev_state[8], ZA_ASM_DEV_CORRUPT);
	ck_assert_int_eq(s.res.dev_state[9], ZA_ASM_DEV_CORRUPT);
	ck_assert_int_eq(s.res.dev_state[10], ZA_ASM_DEV_CORRUPT);
	ck_assert_uint_eq(s.res.nr_present, AN - 1);
	ck_assert_uint_eq(s.res.member_state[5], ZA_MEMBER_MISSING);
	ck_assert_uint_eq(s.res.nr_lost, 1);

	/* No name: "pond" has the newest record. */
	ck_assert_int_eq(aset_run(&s, NULL), 0);
	ck_assert_ptr_eq(s.res.ref, other);
	ck_assert_int_eq(s.res.dev_state[5], ZA_ASM_DEV_MEMBER);
	ck_assert_int_eq(s.res.dev_state[0], ZA_ASM_DEV_FOREIGN);
	ck_assert_uint_eq(s.res.nr_present, 1);
	/* Its members 1 and 2 are FAILED and MISSING in its own table. */
	ck_assert_uint_eq(s.res.member_state[1], ZA_MEMBER_FAILED);
	ck_assert_uint_eq(s.res.member_state[2], ZA_MEMBER_MISSING);
	ck_assert_uint_eq(s.res.nr_lost, 2);
	aset_free(&s);

	/* Nothing but blanks. */
	za_log_set_sink(quiet);
	aset_add(&s, NULL, -ENOENT);
	ck_assert_int_eq(aset_run(&s, NULL), -ENOENT);
	ck_assert_int_eq(aset_run(&s, "tank"), -ENOENT);
	ck_assert_int_eq(za_sb_assemble(NULL, NULL, 0, "tank", &s.res),
			 -ENOENT);
	za_log_set_sink(NULL);
	aset_free(&s);
}
END_TEST

START_TEST(test_asm_two_arrays_one_name)
{
	struct aset s = { .n = 0 };
	struct za_sb *twin = member_sb(0, 3);
	unsigned i;

	for (i = 0; i < AN; i++)
		aset_add(&s, member_sb(i, 10), 0);
	tuuid(&twin->array_uuid, 0x7, 0x7);
	aset_add(&s, twin, 0);
	za_log_set_sink(quiet);
	ck_assert_int_eq(aset_run(&s, "tank"), -EEXIST);
	ck_assert_int_eq(aset_run(&s, NULL), -EEXIST);
	/* Another name altogether: no conflict. */
	strcpy(twin->name, "tank-old");
	ck_assert_int_eq(aset_run(&s, "tank"), 0);
	ck_assert_int_eq(s.res.dev_state[AN], ZA_ASM_DEV_FOREIGN);
	ck_assert_int_eq(aset_run(&s, "tank-old"), 0);
	ck_assert_int_eq(s.res.dev_state[AN], ZA_ASM_DEV_MEMBER);
	/* Two different arrays equally new, no name given: refuse. */
	twin->generation = 10;
	ck_assert_int_eq(aset_run(&s, NULL), -EEXIST);
	za_log_set_sink(NULL);
	aset_free(&s);
}
END_TEST

START_TEST(test_asm_stale)
{
	struct aset s = { .n = 0 };
	unsigned i;

	/* Generation 10: member 2 failed, member 4 removed. Their drives
	 * carry generation 9, written while they were still online. */
	for (i = 0; i < AN; i++) {
		bool old = i == 2 || i == 4;
		struct za_sb *sb = member_sb(i, old ? 9 : 10);

		if (!old) {
			sb->members[2].state = ZA_MEMBER_FAILED;
			sb->members[4].state = ZA_MEMBER_REMOVED;
		}
		aset_add(&s, sb, 0);
	}
	ck_assert_int_eq(aset_run(&s, "tank"), 0);
	ck_assert_uint_eq(s.res.ref->generation, 10);
	ck_assert_int_eq(s.res.dev_state[2], ZA_ASM_DEV_STALE);
	ck_assert_int_eq(s.res.dev_state[4], ZA_ASM_DEV_STALE);
	ck_assert_int_eq(s.res.member_dev[2], -1);
	ck_assert_int_eq(s.res.member_dev[4], -1);
	ck_assert_uint_eq(s.res.member_state[2], ZA_MEMBER_FAILED);
	ck_assert_uint_eq(s.res.member_state[4], ZA_MEMBER_REMOVED);
	ck_assert_uint_eq(s.res.nr_present, AN - 2);
	ck_assert_uint_eq(s.res.nr_lost, 1); /* removed is not lost */
	aset_free(&s);
}
END_TEST

START_TEST(test_asm_missing)
{
	struct aset s = { .n = 0 };
	unsigned i;

	for (i = 0; i < AN; i++) {
		struct za_sb *sb;

		if (i == 1 || i == 3)
			continue;
		sb = member_sb(i, 10);
		sb->members[3].state = ZA_MEMBER_DRAINING;
		sb->members[5].state = ZA_MEMBER_DRAINING;
		aset_add(&s, sb, 0);
	}
	ck_assert_int_eq(aset_run(&s, "tank"), 0);
	ck_assert_uint_eq(s.res.nr_present, AN - 2);
	ck_assert_uint_eq(s.res.nr_lost, 2);
	ck_assert_uint_eq(s.res.member_state[1], ZA_MEMBER_MISSING);
	ck_assert_uint_eq(s.res.member_state[3], ZA_MEMBER_MISSING);
	ck_assert_uint_eq(s.res.member_state[5], ZA_MEMBER_DRAINING);
	ck_assert_int_eq(s.res.member_dev[1], -1);
	ck_assert_int_eq(s.res.member_dev[5], 3);
	aset_free(&s);
}
END_TEST

START_TEST(test_asm_duplicate)
{
	struct aset s = { .n = 0 };
	unsigned i;

	/* The older copy of member 1 comes first; the newer one wins. */
	aset_add(&s, member_sb(1, 9), 0);
	for (i = 0; i < AN; i++)
		aset_add(&s, member_sb(i, 10), 0);
	aset_add(&s, member_sb(3, 10), 0); /* same drive seen twice */
	ck_assert_int_eq(aset_run(&s, "tank"), 0);
	ck_assert_int_eq(s.res.dev_state[0], ZA_ASM_DEV_DUPLICATE);
	ck_assert_int_eq(s.res.member_dev[1], 2);
	ck_assert_int_eq(s.res.dev_state[2], ZA_ASM_DEV_MEMBER);
	ck_assert_int_eq(s.res.member_dev[3], 4);
	ck_assert_int_eq(s.res.dev_state[AN + 1], ZA_ASM_DEV_DUPLICATE);
	ck_assert_uint_eq(s.res.nr_present, AN);
	ck_assert_uint_eq(s.res.nr_lost, 0);
	aset_free(&s);
}
END_TEST

START_TEST(test_asm_unknown_and_lagging)
{
	struct aset s = { .n = 0 };
	struct za_sb *stranger, *moved, *lagging;
	unsigned i;

	for (i = 0; i < 4; i++)
		aset_add(&s, member_sb(i, 10), 0);
	/* Lagging: member 4's last update before a crash was generation 8. */
	lagging = member_sb(4, 8);
	aset_add(&s, lagging, 0); /* 4 */
	/* A member uuid the table does not have. */
	stranger = member_sb(5, 10);
	tuuid(&stranger->members[5].uuid, 0xbad, 5);
	stranger->member_uuid = stranger->members[5].uuid;
	aset_add(&s, stranger, 0); /* 5 */
	/* Member 5's uuid, but claiming index 0 (its own table swapped). */
	moved = member_sb(5, 7);
	moved->members[0].uuid = moved->members[5].uuid;
	tuuid(&moved->members[5].uuid, 0x123, 0);
	moved->member_idx = 0;
	aset_add(&s, moved, 0); /* 6 */
	ck_assert_int_eq(aset_run(&s, "tank"), 0);
	ck_assert_uint_eq(s.res.ref->generation, 10);
	ck_assert_int_eq(s.res.dev_state[4], ZA_ASM_DEV_MEMBER);
	ck_assert_int_eq(s.res.member_dev[4], 4);
	ck_assert_int_eq(s.res.dev_state[5], ZA_ASM_DEV_UNKNOWN);
	ck_assert_int_eq(s.res.dev_state[6], ZA_ASM_DEV_UNKNOWN);
	ck_assert_int_eq(s.res.member_dev[5], -1);
	ck_assert_uint_eq(s.res.member_state[5], ZA_MEMBER_MISSING);
	ck_assert_uint_eq(s.res.nr_present, 5);
	ck_assert_uint_eq(s.res.nr_lost, 1);
	aset_free(&s);
}
END_TEST

START_TEST(test_asm_ref_is_newest)
{
	struct aset s = { .n = 0 };
	unsigned i;

	/* Generation 12 lists member 0 failed; older drives still say it
	 * is online, and the failed drive itself is the oldest. */
	for (i = 0; i < AN; i++) {
		struct za_sb *sb = member_sb(i, 10 + i % 3);

		if (sb->generation == 12)
			sb->members[0].state = ZA_MEMBER_FAILED;
		aset_add(&s, sb, 0);
	}
	ck_assert_int_eq(aset_run(&s, "tank"), 0);
	ck_assert_uint_eq(s.res.ref->generation, 12);
	ck_assert_uint_eq(s.res.ref_dev, 2); /* first of 2 and 5 */
	ck_assert_int_eq(s.res.dev_state[0], ZA_ASM_DEV_STALE);
	ck_assert_uint_eq(s.res.member_state[0], ZA_MEMBER_FAILED);
	ck_assert_uint_eq(s.res.nr_lost, 1);
	ck_assert_uint_eq(s.res.nr_present, AN - 1);
	aset_free(&s);
}
END_TEST

START_TEST(test_asm_strings)
{
	ck_assert_str_eq(za_member_state_str(ZA_MEMBER_ONLINE), "online");
	ck_assert_str_eq(za_member_state_str(ZA_MEMBER_REMOVED), "removed");
	ck_assert_str_eq(za_member_state_str((enum za_member_state)0),
			 "unknown");
	ck_assert_str_eq(za_asm_dev_str(ZA_ASM_DEV_STALE), "stale");
	ck_assert_str_eq(za_asm_dev_str((enum za_asm_dev)99), "unknown");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sb");
	TCase *tc = tcase_create("record");
	TCase *io = tcase_create("io");
	TCase *as = tcase_create("assemble");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_uuid);
	tcase_add_loop_test(tc, test_geom_good, 0,
			    sizeof(good_geoms) / sizeof(good_geoms[0]));
	tcase_add_loop_test(tc, test_geom_bad, 0,
			    sizeof(bad_geoms) / sizeof(bad_geoms[0]));
	tcase_add_loop_test(tc, test_roundtrip, 0,
			    sizeof(rt_cases) / sizeof(rt_cases[0]));
	tcase_add_test(tc, test_encode_rejects);
	tcase_add_loop_test(tc, test_corrupt_each_byte, 0, 2);
	tcase_add_test(tc, test_random_mutations);
	tcase_add_test(tc, test_field_rules);
	tcase_add_test(tc, test_decode_blank);
	suite_add_tcase(s, tc);

	tcase_set_timeout(io, 60);
	tcase_add_loop_test(io, test_io_generations, 0, NR_IOGEOS);
	tcase_add_loop_test(io, test_io_async, 0, NR_IOGEOS);
	tcase_add_loop_test(io, test_io_torn, 0, NR_IOGEOS);
	tcase_add_test(io, test_io_nothing_valid);
	tcase_add_loop_test(io, test_io_power_cut, 0, NR_IOGEOS);
	tcase_add_loop_test(io, test_io_clear, 0, NR_IOGEOS);
	tcase_add_test(io, test_io_faults);
	tcase_add_test(io, test_check_dev);
	tcase_add_test(io, test_io_small_max_io);
	tcase_add_loop_test(io, test_io_read_many, 0, NR_IOGEOS);
	suite_add_tcase(s, io);

	tcase_add_test(as, test_asm_all_present);
	tcase_add_test(as, test_asm_foreign_blank_corrupt);
	tcase_add_test(as, test_asm_two_arrays_one_name);
	tcase_add_test(as, test_asm_stale);
	tcase_add_test(as, test_asm_missing);
	tcase_add_test(as, test_asm_duplicate);
	tcase_add_test(as, test_asm_unknown_and_lagging);
	tcase_add_test(as, test_asm_ref_is_newest);
	tcase_add_test(as, test_asm_strings);
	suite_add_tcase(s, as);
	return trun(s);
}
