// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * make-seeds.c - writes the committed seed corpora, fuzz/corpus/<target>/:
 * small valid inputs made with zarray's own encoders (stripe headers,
 * checkpoints, engine tables, checkpoint anchors, map pages, superblocks,
 * protobuf messages, emulated drive files) or written out
 * byte by byte from the protocol (NBD), and near-valid ones that each
 * break one rule, so that the fuzzers and the replay test start next to
 * every check.
 *
 * Usage: make-seeds [CORPUS-DIR]   (default: fuzz/corpus; run from the
 * source tree: rm -rf fuzz/corpus && BUILD/fuzz/make-seeds fuzz/corpus,
 * so that seeds no longer made disappear). It is deterministic: fixed
 * UUIDs, times and data, so regenerating changes no file unless a format
 * changed. Each input starts with its target's mode byte(s) (see the
 * target's source).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "anchor.h"
#include "byteorder.h"
#include "checkpoint.h"
#include "crc.h"
#include "dev-emu.h"
#include "dev.h"
#include "etab.h"
#include "fuzz.h"
#include "io.h"
#include "journal.h"
#include "mpage.h"
#include "rpc.h"
#include "sb.h"
#include "stripe.h"

static const char *top = "fuzz/corpus";
static unsigned nr_written;

static void die(const char *what)
{
	fprintf(stderr, "make-seeds: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* Write @mode then @len bytes of @buf as CORPUS/@target/@name. */
static void seed(const char *target, const char *name, uint8_t mode,
		 const void *buf, size_t len)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", top, target);
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		die(path);
	snprintf(path, sizeof(path), "%s/%s/%s", top, target, name);
	f = fopen(path, "wb");
	if (!f)
		die(path);
	if (fwrite(&mode, 1, 1, f) != 1 ||
	    (len && fwrite(buf, 1, len, f) != len) || fclose(f))
		die(path);
	nr_written++;
}

/* Length of @buf without its trailing zeroes (harnesses pad them back). */
static size_t trim_zeroes(const uint8_t *buf, size_t len)
{
	while (len && !buf[len - 1])
		len--;
	return len;
}

/* ---- a byte-string builder ---- */

struct bld {
	uint8_t b[256 << 10];
	size_t n;
};

static struct bld B;

static void b_reset(void)
{
	B.n = 0;
}

static void b_bytes(const void *p, size_t len)
{
	if (B.n + len > sizeof(B.b)) {
		fprintf(stderr, "make-seeds: builder overflow\n");
		exit(1);
	}
	memcpy(B.b + B.n, p, len);
	B.n += len;
}

static void b_u8(uint8_t v)
{
	b_bytes(&v, 1);
}

static void b_be16(uint16_t v)
{
	uint8_t p[2] = { (uint8_t)(v >> 8), (uint8_t)v };

	b_bytes(p, 2);
}

static void b_be32(uint32_t v)
{
	b_be16((uint16_t)(v >> 16));
	b_be16((uint16_t)v);
}

static void b_be64(uint64_t v)
{
	b_be32((uint32_t)(v >> 32));
	b_be32((uint32_t)v);
}

static void b_le16(uint16_t v)
{
	uint8_t p[2];

	za_put_le16(p, v);
	b_bytes(p, 2);
}

static void b_fill(uint8_t v, size_t len)
{
	while (len--)
		b_u8(v);
}

/* ---- stripe headers ---- */

#define ST_HDR_CRC_OFF 12u

static void stripe_hdr(uint8_t *blk, unsigned k, unsigned p, unsigned rows,
		       uint32_t chunk, uint8_t col, uint8_t kind,
		       uint32_t nr_blocks)
{
	struct za_stripe_hdr h;
	uint32_t cb = chunk / 4096, i;

	memset(&h, 0, sizeof(h));
	memset(blk, 0, ZA_STRIPE_HDR_BYTES);
	for (i = 0; i < 16; i++)
		h.array_uuid.b[i] = (uint8_t)(0x10 + i);
	h.seg_id = 42;
	h.seq = 1000;
	h.stripe_idx = 3;
	h.col = col;
	h.k = (uint8_t)k;
	h.p = (uint8_t)p;
	h.rows = (uint8_t)rows;
	h.kind = kind;
	h.chunk_bytes = chunk;
	h.nr_blocks = nr_blocks;
	h.group_id = 7;
	h.group_w = 2;
	h.group_idx = 1;
	h.group_stripes = 16;
	h.stream = kind == ZA_STRIPE_META ? 1 : 0;
	for (i = 0; i < k + p; i++) {
		h.members[i] = (uint16_t)(i * 3 % 1024);
		h.zones[i] = 5 + i;
	}
	for (i = 0; i < rows * cb; i++) {
		h.blk_crc[i] = 0x1000u + i;
		za_put_le64(blk + ZA_STRIPE_LBA_OFF + 8 * i,
			    i < nr_blocks ? 100 + i : ZA_STRIPE_LBA_NONE);
	}
	h.lba_crc = za_crc32c(blk + ZA_STRIPE_LBA_OFF, ZA_STRIPE_LBA_BYTES);
	za_stripe_hdr_encode(&h, blk);
}

static void seeds_stripe(void)
{
	static uint8_t blk[ZA_STRIPE_HDR_BYTES];
	static const struct {
		const char *name;
		unsigned off;
		uint8_t val;
	} breaks[] = {
		{ "bad-version", 8, 2 },
		{ "k-zero", 53, 0 },
		{ "p-seven", 54, 7 },
		{ "col-past-width", 52, 6 },
		{ "rows-zero", 55, 0 },
		{ "chunk-not-pow2", 57, 0x30 },
		{ "kind-three", 60, 3 },
		{ "reserved-61", 61, 1 },
		{ "nr-blocks-big", 65, 0x10 },
		{ "group-w-zero", 208, 0 },
		{ "group-idx-big", 210, 9 },
		{ "stripe-idx-big", 48, 16 },
		{ "member-big", 81, 0x04 },
		{ "member-past-width", 80 + 2 * 6, 0 },
		{ "zone-past-width", 1280 + 4 * 6, 1 },
		{ "blkcrc-past-col", 256 + 4 * 16, 1 },
		{ "reserved-1536", 1536, 1 },
		{ "reserved-217", 217, 1 },
	};
	unsigned i;

	stripe_hdr(blk, 4, 2, 1, 64 << 10, 0, ZA_STRIPE_DATA, 40);
	seed("stripe", "data-4+2", 0, blk, sizeof(blk));
	for (i = 0; i < sizeof(breaks) / sizeof(breaks[0]); i++) {
		uint8_t *b2 = malloc(sizeof(blk));

		if (!b2)
			die("malloc");
		memcpy(b2, blk, sizeof(blk));
		b2[breaks[i].off] = breaks[i].val;
		seed("stripe", breaks[i].name, 3, b2, sizeof(blk));
		free(b2);
	}
	blk[100] ^= 1;
	seed("stripe", "bad-crc", 0, blk, sizeof(blk));
	blk[0] = 'X';
	seed("stripe", "bad-magic", 0, blk, sizeof(blk));
	stripe_hdr(blk, 4, 2, 1, 64 << 10, 5, ZA_STRIPE_DATA, 64);
	seed("stripe", "parity-col", 0, blk, sizeof(blk));
	stripe_hdr(blk, 1, 2, 1, 4096, 0, ZA_STRIPE_META, 1);
	seed("stripe", "journal-meta", 0, blk, sizeof(blk));
	stripe_hdr(blk, 58, 6, 1, 4096, 63, ZA_STRIPE_DATA, 58);
	seed("stripe", "wide-58+6", 0, blk, sizeof(blk));
	stripe_hdr(blk, 2, 1, 16, 64 << 10, 1, ZA_STRIPE_DATA, 300);
	seed("stripe", "rows-16", 0, blk, sizeof(blk));
	stripe_hdr(blk, 8, 3, 1, 1u << 20, 2, ZA_STRIPE_DATA, 0);
	seed("stripe", "chunk-1m-empty", 0, blk, sizeof(blk));
	/* rows x chunk above 1 MiB, CRCs fixed by the harness. */
	stripe_hdr(blk, 2, 1, 1, 1u << 20, 0, ZA_STRIPE_DATA, 1);
	blk[55] = 2;
	seed("stripe", "rows-chunk-big", 3, blk, sizeof(blk));
	seed("stripe", "short", 0, blk, 100);
}

/* ---- journal: unmap records ---- */

/* Mode, volume size, then the record without its trailing zeroes. */
static void seed_unmap(const char *name, uint8_t mode, uint64_t vol,
		       const uint8_t *blk, size_t len)
{
	uint8_t b[8 + ZA_JOURNAL_BLOCK_BYTES];

	za_put_le64(b, vol);
	memcpy(b + 8, blk, len);
	seed("journal", name, mode, b,
	     8 + (mode & 1 ? len : trim_zeroes(blk, len)));
}

static void seeds_journal(void)
{
	uint8_t blk[ZA_JOURNAL_BLOCK_BYTES];

	za_journal_unmap_encode(blk, 10, 20);
	seed_unmap("one-range", 0, 2048, blk, sizeof(blk));
	seed_unmap("short", 1, 2048, blk, 100);
	za_journal_unmap_encode(blk, 0, 2048);
	seed_unmap("whole-volume", 0, 2048, blk, sizeof(blk));
	za_journal_unmap_encode(blk, 2040, 9);
	seed_unmap("past-end", 0, 2048, blk, sizeof(blk));
	za_journal_unmap_encode(blk, 5, UINT64_MAX - 2);
	seed_unmap("wraps", 0, 2048, blk, sizeof(blk));
	za_journal_unmap_encode(blk, 5, 0);
	seed_unmap("empty", 0, 2048, blk, sizeof(blk));
	/* Count 2 with the second range all zeros (empty). */
	za_journal_unmap_encode(blk, 10, 20);
	za_put_le32(blk + 8, 2);
	seed_unmap("second-range-empty", 0, 2048, blk, sizeof(blk));
	{
		struct za_journal_range r[ZA_JOURNAL_MAX_RANGES];
		unsigned i;

		for (i = 0; i < ZA_JOURNAL_MAX_RANGES; i++) {
			r[i].lba = 3 + 4 * (uint64_t)i;
			r[i].n = 1 + i % 3;
		}
		if (za_journal_unmap_encode_ranges(blk, r, 2))
			die("za_journal_unmap_encode_ranges");
		seed_unmap("two-ranges", 0, 2048, blk, sizeof(blk));
		if (za_journal_unmap_encode_ranges(blk, r,
						   ZA_JOURNAL_MAX_RANGES))
			die("za_journal_unmap_encode_ranges");
		seed_unmap("most-ranges", 0, 2048, blk, sizeof(blk));
		/* The second range made to touch the first. */
		za_journal_unmap_encode_ranges(blk, r, 2);
		za_put_le64(blk + 32, 4);
		seed_unmap("ranges-touch", 0, 2048, blk, sizeof(blk));
		/* And to start before it. */
		za_put_le64(blk + 32, 2);
		seed_unmap("ranges-backwards", 0, 2048, blk, sizeof(blk));
	}
	za_journal_unmap_encode(blk, 10, 20);
	blk[4000] = 1;
	seed_unmap("reserved-set", 0, 2048, blk, sizeof(blk));
	za_journal_unmap_encode(blk, 10, 20);
	blk[0] = 'X';
	seed_unmap("bad-magic", 0, 2048, blk, sizeof(blk));
}

/* Store @val as a little-endian field of @len bytes at @p (any record). */
static void etab_put(uint8_t *p, unsigned len, uint64_t val)
{
	if (len == 8)
		za_put_le64(p, val);
	else if (len == 4)
		za_put_le32(p, (uint32_t)val);
	else if (len == 2)
		za_put_le16(p, (uint16_t)val);
	else
		*p = (uint8_t)val;
}

/* ---- checkpoints ---- */

static uint64_t ck_rng = 12345;

static uint64_t ck_rnd(void)
{
	ck_rng = ck_rng * 6364136223846793005ull + 1442695040888963407ull;
	return ck_rng >> 17;
}

/*
 * Encode checkpoint @id: @extents extents (increasing, some adjacent) and
 * @unmaps unmap records in a volume of @size blocks, into @blocks (room
 * for 4 parts). Returns the number of parts.
 */
/* Engine table parts the next ckpt_make() announces (version 2). */
static uint32_t ck_table_parts;
/* Version 3: the next ckpt_make()'s map records are page records over a
 * map of so many extents in so many levels. */
static int ck_v3;
static uint64_t ck_map_extents;
static uint8_t ck_map_levels;
/* Version 4 (with ck_v3): so many count records after the unmaps. */
static uint64_t ck_counts;

static uint32_t ckpt_make(uint8_t *blocks, uint64_t id, uint64_t size,
			  uint64_t extents, uint64_t unmaps)
{
	struct za_ckpt_writer *w = malloc(sizeof(*w));
	uint64_t i, lba = size - extents * 3;

	if (!w || za_ckpt_nr_parts(extents, unmaps + ck_counts) > 4 ||
	    size < extents * 3)
		die("ckpt_make");
	if (za_ckpt_writer_init(w, id, 1000 + id, size, extents, unmaps,
				blocks))
		die("za_ckpt_writer_init");
	w->h.nr_table_parts = ck_table_parts;
	if (ck_v3) {
		w->h.version = 3;
		w->h.nr_map_extents = ck_map_extents;
		w->h.map_levels = ck_map_levels;
		if (ck_counts) {
			w->h.version = 4;
			w->h.nr_counts = ck_counts;
		}
	}
	for (i = 0; i < extents + unmaps + ck_counts; i++) {
		struct za_ckpt_rec r = { 0 };

		if (i >= extents + unmaps) {
			r.type = ZA_CKPT_REC_COUNT;
			r.group = 1 + 3 * (i - extents - unmaps);
			r.nr_blocks = 1 + ck_rnd() % 3000;
		} else if (i < extents) {
			r.type = ck_rnd() % 3 ? ZA_CKPT_REC_DATA :
						ZA_CKPT_REC_JOURNAL;
			if (ck_v3)
				r.type = ZA_CKPT_REC_PAGE;
			r.lba = lba + ck_rnd() % 2; /* gap 0 or 1 */
			r.nr_blocks = 1 + ck_rnd() % 2;
			r.group = 1 + ck_rnd() % 9;
			r.pos = ck_rnd() % 5000;
			lba = r.lba + r.nr_blocks;
		} else {
			r.type = ZA_CKPT_REC_UNMAP;
			r.lba = ck_rnd() % size;
			r.nr_blocks = 1 + ck_rnd() % (size - r.lba);
			r.group = 1 + ck_rnd() % 9;
		}
		if (za_ckpt_writer_add(w, &r))
			die("za_ckpt_writer_add");
	}
	if (za_ckpt_writer_finish(w))
		die("za_ckpt_writer_finish");
	free(w);
	return za_ckpt_nr_parts(extents, unmaps + ck_counts);
}

/*
 * Version 3: page records, the root of a paged map, with the map's totals
 * at 72 and 80. Made on the side of the random sequence, as version 2's.
 */
static void seeds_checkpoint_v3(void)
{
	static uint8_t a[4 * ZA_CKPT_BLOCK_BYTES], b[4 * ZA_CKPT_BLOCK_BYTES];
	static const struct {
		const char *name;
		unsigned off, len;
		uint64_t val;
	} breaks[] = {
		{ "v3-no-table", 68, 4, 0 },
		{ "v3-levels-zero", 80, 1, 0 },
		{ "v3-levels-eight", 80, 1, 8 },
		{ "v3-map-extents-few", 72, 8, 1 },
		{ "v3-map-extents-zero", 72, 8, 0 },
		{ "v3-map-extents-past-size", 72, 8, (1u << 20) + 1 },
		{ "v3-reserved-81", 81, 1, 1 },
		{ "v3-reserved-95", 95, 1, 1 },
		{ "v3-extent-as-map-record", 96, 1, ZA_CKPT_REC_DATA },
		{ "v3-page-pos-max", 96 + 32, 8, UINT64_MAX },
	};
	uint64_t rng_saved = ck_rng;
	uint32_t n;
	unsigned i;

	ck_v3 = 1;
	ck_table_parts = 2;
	ck_map_extents = 12000;
	ck_map_levels = 2;
	n = ckpt_make(a, 8, 1u << 20, 150, 20);
	seed("checkpoint", "v3-paged", 0, a, n * ZA_CKPT_BLOCK_BYTES);
	for (i = 0; i < sizeof(breaks) / sizeof(breaks[0]); i++) {
		memcpy(b, a, ZA_CKPT_BLOCK_BYTES);
		etab_put(b + breaks[i].off, breaks[i].len, breaks[i].val);
		seed("checkpoint", breaks[i].name, 1, b, ZA_CKPT_BLOCK_BYTES);
	}
	/* Parts that disagree on the map's levels (mode 3: CRCs fixed, the
	 * parts that decode fed to the reader). */
	memcpy(b, a, 2 * ZA_CKPT_BLOCK_BYTES);
	b[ZA_CKPT_BLOCK_BYTES + 80] = 3;
	seed("checkpoint", "v3-levels-disagree", 3, b, 2 * ZA_CKPT_BLOCK_BYTES);
	ck_map_extents = 0;
	ck_map_levels = 0;
	n = ckpt_make(a, 9, 1u << 16, 0, 30);
	seed("checkpoint", "v3-empty-map", 0, a,
	     trim_zeroes(a, n * ZA_CKPT_BLOCK_BYTES));
	/* Version 4: counts after the unmaps, their number at 88. */
	ck_map_extents = 12000;
	ck_map_levels = 2;
	ck_counts = 90;
	n = ckpt_make(a, 10, 1u << 20, 150, 20);
	seed("checkpoint", "v4-counts", 0, a, n * ZA_CKPT_BLOCK_BYTES);
	{
		static const struct {
			const char *name;
			unsigned off, len;
			uint64_t val;
		} v4breaks[] = {
			{ "v4-reserved-87", 87, 1, 1 },
			{ "v4-counts-fewer", 88, 8, 89 },
			{ "v4-count-zero", 96 + 40 * 70 + 16, 8, 0 },
			{ "v4-count-lba", 96 + 40 * 70 + 8, 8, 1 },
			{ "v4-count-group-backwards", 96 + 40 * 71 + 24, 8, 1 },
		};

		/* Part 1 holds unmaps 50..69 then counts from record 70. */
		for (i = 0; i < sizeof(v4breaks) / sizeof(v4breaks[0]); i++) {
			memcpy(b, a + ZA_CKPT_BLOCK_BYTES, ZA_CKPT_BLOCK_BYTES);
			etab_put(b + v4breaks[i].off, v4breaks[i].len,
				 v4breaks[i].val);
			seed("checkpoint", v4breaks[i].name, 1, b,
			     ZA_CKPT_BLOCK_BYTES);
		}
	}
	ck_counts = 0;
	ck_map_extents = 0;
	ck_map_levels = 0;
	ck_v3 = 0;
	ck_table_parts = 0;
	ck_rng = rng_saved;
}

static void seeds_checkpoint(void)
{
	static uint8_t a[4 * ZA_CKPT_BLOCK_BYTES], b[4 * ZA_CKPT_BLOCK_BYTES];
	static uint8_t two[2 * ZA_CKPT_BLOCK_BYTES];
	uint64_t rng_saved;
	static const struct {
		const char *name;
		unsigned off;
		uint8_t val;
	} breaks[] = {
		{ "bad-version", 8, 4 },
		{ "id-zero", 16, 0 },
		{ "size-zero", 33, 0 },
		{ "part-past-count", 56, 5 },
		{ "nr-parts-off", 60, 2 },
		{ "nr-recs-off", 64, 29 },
		{ "reserved-68", 68, 1 },
		{ "reserved-95", 95, 1 },
		{ "type-zero", 96, 0 },
		{ "type-four", 96, 4 },
		{ "unmap-among-extents", 96, ZA_CKPT_REC_UNMAP },
		{ "rec-reserved", 97, 1 },
		{ "nr-blocks-zero", 96 + 16, 0 },
		{ "lba-past-end", 96 + 15, 0x10 },
		{ "extents-backwards", 96 + 40 + 8, 0 },
		{ "unmap-with-pos", 96 + 40 * 30 + 32, 1 },
		{ "unused-slot", 96 + 40 * 33, 1 },
	};
	uint32_t n;
	unsigned i;

	n = ckpt_make(a, 1, 4096, 30, 3);
	seed("checkpoint", "one-part", 0, a,
	     trim_zeroes(a, ZA_CKPT_BLOCK_BYTES));
	for (i = 0; i < sizeof(breaks) / sizeof(breaks[0]); i++) {
		memcpy(b, a, ZA_CKPT_BLOCK_BYTES);
		b[breaks[i].off] = breaks[i].val;
		seed("checkpoint", breaks[i].name, 1, b, ZA_CKPT_BLOCK_BYTES);
	}
	memcpy(b, a, ZA_CKPT_BLOCK_BYTES);
	b[200] ^= 1;
	seed("checkpoint", "bad-crc", 0, b, ZA_CKPT_BLOCK_BYTES);
	b[0] = 'X';
	seed("checkpoint", "bad-magic", 0, b, ZA_CKPT_BLOCK_BYTES);
	seed("checkpoint", "short", 4, a, 100);

	n = ckpt_make(a, 2, 1u << 20, 250, 20);
	seed("checkpoint", "three-parts", 0, a, n * ZA_CKPT_BLOCK_BYTES);
	/* Torn: the middle part never made it. */
	memcpy(two, a, ZA_CKPT_BLOCK_BYTES);
	memcpy(two + ZA_CKPT_BLOCK_BYTES, a + 2 * ZA_CKPT_BLOCK_BYTES,
	       ZA_CKPT_BLOCK_BYTES);
	seed("checkpoint", "torn", 0, two, sizeof(two));
	/* Part 0 of one checkpoint, part 1 of the next. */
	ckpt_make(b, 3, 1u << 20, 250, 20);
	memcpy(two + ZA_CKPT_BLOCK_BYTES, b + ZA_CKPT_BLOCK_BYTES,
	       ZA_CKPT_BLOCK_BYTES);
	seed("checkpoint", "mixed-ids", 2, two, sizeof(two));
	n = ckpt_make(a, 4, 1u << 16, 0, 150);
	seed("checkpoint", "unmaps-only", 0, a, n * ZA_CKPT_BLOCK_BYTES);
	n = ckpt_make(a, 5, 2048, 0, 0);
	seed("checkpoint", "empty", 0, a, trim_zeroes(a, ZA_CKPT_BLOCK_BYTES));
	n = ckpt_make(a, 6, ZA_CKPT_MAX_SIZE_BLOCKS, 300, 90);
	seed("checkpoint", "largest-volume", 0, a, n * ZA_CKPT_BLOCK_BYTES);
	/* Version 2: engine table parts announced at byte 68. Made on the
	 * side of the random sequence, so that the seeds after these stay
	 * as they were. */
	rng_saved = ck_rng;
	ck_table_parts = 3;
	n = ckpt_make(a, 7, 1u << 20, 150, 20);
	ck_table_parts = 0;
	ck_rng = rng_saved;
	seed("checkpoint", "with-table", 0, a, n * ZA_CKPT_BLOCK_BYTES);
	memcpy(b, a, ZA_CKPT_BLOCK_BYTES);
	za_put_le32(b + 68, 0);
	seed("checkpoint", "v2-without-table", 1, b, ZA_CKPT_BLOCK_BYTES);
	za_put_le32(b + 68, ZA_CKPT_MAX_TABLE_PARTS + 1);
	seed("checkpoint", "table-parts-too-many", 1, b, ZA_CKPT_BLOCK_BYTES);
	memcpy(b, a, ZA_CKPT_BLOCK_BYTES);
	za_put_le32(b + 8, 1);
	seed("checkpoint", "v1-with-table", 1, b, ZA_CKPT_BLOCK_BYTES);
	memcpy(b, a, ZA_CKPT_BLOCK_BYTES);
	b[96] = ZA_CKPT_REC_PAGE;
	seed("checkpoint", "v2-page-record", 1, b, ZA_CKPT_BLOCK_BYTES);
	seeds_checkpoint_v3();
}

/* ---- engine tables ---- */

#define ET_BLK ZA_ETAB_BLOCK_BYTES

/* A segment of @width columns in a table whose groups are below
 * @next_group_id; every fourth column lost, some of them dead. */
static void etab_seg(struct za_etab_seg *s, uint64_t id, uint8_t width,
		     uint64_t next_group_id)
{
	uint32_t c;

	memset(s, 0, sizeof(*s));
	s->id = id;
	s->width = width;
	s->flags = (uint8_t)(ck_rnd() % 4);
	s->grp_idx = (uint16_t)(ck_rnd() % 1024);
	s->next_stripe = (uint32_t)ck_rnd();
	s->group_id = 1 + ck_rnd() % (next_group_id - 1);
	for (c = 0; c < width; c++) {
		struct za_etab_col *col = &s->col[c];

		col->member = (uint16_t)(ck_rnd() % 12);
		col->hdr_member = col->member;
		col->zone = (uint32_t)(ck_rnd() % 50000);
		col->hdr_zone = col->zone;
		col->upto = c % 3 ? UINT32_MAX : (uint32_t)(ck_rnd() % 1000);
		if (c % 4 == 3) {
			col->member = ZA_ETAB_MEMBER_ABSENT;
			col->zone = 0;
			if (c % 8 == 7)
				s->dead_cols |= 1ull << c;
		}
	}
}

/*
 * Write table @ckpt_id: @groups groups then @segs segments of @width
 * columns (0: each its own) into @blocks (room for 4 parts). Returns
 * the number of parts.
 */
static uint32_t etab_make(uint8_t *blocks, uint64_t ckpt_id, uint32_t groups,
			  uint32_t segs, uint8_t width)
{
	uint64_t next_group_id = 2 * (uint64_t)groups + 5;
	struct za_etab_writer w;
	struct za_etab_seg s;
	uint32_t i, parts;

	if (za_etab_writer_init(&w, ckpt_id, 1000 + ckpt_id, 1010 + ckpt_id,
				2 * (uint64_t)segs + 5, next_group_id))
		die("za_etab_writer_init");
	for (i = 0; i < groups; i++) {
		struct za_etab_group g = {
			.id = 2 * (uint64_t)i + 1,
			.stream = (uint8_t)(ck_rnd() % 4),
			.w = (uint16_t)(1 + ck_rnd() % 12),
			.nr_stripes = (uint32_t)(1 + ck_rnd() % 65536),
		};

		g.next_pos = ck_rnd() % ((uint64_t)g.w * g.nr_stripes + 1);
		if (za_etab_writer_add_group(&w, &g))
			die("za_etab_writer_add_group");
	}
	for (i = 0; i < segs; i++) {
		etab_seg(&s, 2 * (uint64_t)i + 1,
			 width ? width : (uint8_t)(1 + ck_rnd() % 64),
			 next_group_id);
		if (za_etab_writer_add_seg(&w, &s))
			die("za_etab_writer_add_seg");
	}
	if (za_etab_writer_finish(&w) || w.nr_parts > 4)
		die("za_etab_writer_finish");
	memcpy(blocks, w.blocks, (size_t)w.nr_parts * ET_BLK);
	parts = w.nr_parts;
	free(w.blocks);
	return parts;
}

/*
 * The table the broken seeds break, one part: groups 3 and 5, segments 2
 * (width 3) and 7 (width 2), counters at 10. Group 3 at 96, group 5 at
 * 120, segment 2 at 144 (columns at 184), segment 7 at 232 (columns at
 * 272), used_bytes 208. (tests/unit/test-etab.c has the same.)
 */
static void etab_fixture(uint8_t *blk)
{
	struct za_etab_group g[2] = {
		{ .id = 3,
		  .next_pos = 50,
		  .nr_stripes = 100,
		  .w = 4,
		  .stream = 1 },
		{ .id = 5,
		  .next_pos = 20,
		  .nr_stripes = 10,
		  .w = 2,
		  .stream = 2 },
	};
	struct za_etab_seg *s = calloc(2, sizeof(*s));
	struct za_etab_writer w;
	uint32_t c;

	if (!s)
		die("etab_fixture");
	s[0].id = 2;
	s[0].group_id = 3;
	s[0].dead_cols = 0x2;
	s[0].next_stripe = 7;
	s[0].grp_idx = 1;
	s[0].width = 3;
	s[0].flags = ZA_ETAB_SEG_SEALED;
	s[1].id = 7;
	s[1].group_id = 5;
	s[1].next_stripe = 9;
	s[1].width = 2;
	for (c = 0; c < 3; c++)
		s[0].col[c] = (struct za_etab_col){ .member = (uint16_t)c,
						    .hdr_member = (uint16_t)c,
						    .zone = 11 + c,
						    .hdr_zone = 11 + c,
						    .upto = 5 };
	for (c = 0; c < 2; c++)
		s[1].col[c] = (struct za_etab_col){ .member = (uint16_t)(4 + c),
						    .hdr_member = (uint16_t)c,
						    .zone = 21 + c,
						    .hdr_zone = 31 + c,
						    .upto = UINT32_MAX };
	if (za_etab_writer_init(&w, 4, 100, 110, 10, 10) ||
	    za_etab_writer_add_group(&w, &g[0]) ||
	    za_etab_writer_add_group(&w, &g[1]) ||
	    za_etab_writer_add_seg(&w, &s[0]) ||
	    za_etab_writer_add_seg(&w, &s[1]) || za_etab_writer_finish(&w) ||
	    w.nr_parts != 1)
		die("etab_fixture: writer");
	memcpy(blk, w.blocks, ET_BLK);
	free(w.blocks);
	free(s);
}

/* Decode part @i of @blocks into @p, or die. */
static void etab_get(const uint8_t *blocks, uint32_t i, struct za_etab_part *p)
{
	if (za_etab_block_decode(blocks + (size_t)i * ET_BLK, ET_BLK, p))
		die("etab_get");
}

static void etab_encode(uint8_t *blocks, uint32_t i,
			const struct za_etab_part *p)
{
	if (za_etab_block_encode(p, blocks + (size_t)i * ET_BLK))
		die("etab_encode");
}

static void seeds_etab(void)
{
	static uint8_t a[4 * ET_BLK], b[4 * ET_BLK];
	/* One field each, of the one-part table (mode 1: CRC fixed). */
	static const struct {
		const char *name;
		unsigned off, len;
		uint64_t val;
	} breaks[] = {
		{ "bad-version", 8, 4, 2 },
		{ "ckpt-id-zero", 16, 8, 0 },
		{ "next-seq-at-seq", 32, 8, 100 },
		{ "next-seg-id-zero", 40, 8, 0 },
		{ "next-seg-id-at-an-id", 40, 8, 7 },
		{ "next-group-id-zero", 48, 8, 0 },
		{ "next-group-id-at-an-id", 48, 8, 5 },
		{ "nr-groups-off", 56, 8, 3 },
		{ "nr-segs-off", 64, 8, 1 },
		{ "part-past-count", 72, 4, 1 },
		{ "nr-parts-zero", 76, 4, 0 },
		{ "nr-parts-past-records", 76, 4, 5 },
		{ "nr-recs-off", 80, 4, 3 },
		{ "used-bytes-cuts", 84, 4, 207 },
		{ "used-bytes-past", 84, 4, 209 },
		{ "used-bytes-past-payload", 84, 4, 4001 },
		{ "reserved-88", 88, 1, 1 },
		{ "reserved-95", 95, 1, 1 },
		{ "group-kind-zero", 96, 1, 0 },
		{ "group-kind-three", 96, 1, 3 },
		{ "stream-four", 97, 1, 4 },
		{ "w-zero", 98, 2, 0 },
		{ "w-1025", 98, 2, 1025 },
		{ "nr-stripes-zero", 100, 4, 0 },
		{ "group-id-zero", 104, 8, 0 },
		{ "group-ids-equal", 128, 8, 3 },
		{ "next-pos-past", 112, 8, 401 },
		{ "seg-kind-zero", 144, 1, 0 },
		{ "width-zero", 145, 1, 0 },
		{ "width-65", 145, 1, 65 },
		{ "width-past-used", 233, 1, 3 },
		{ "flags-bad", 146, 1, 0x04 },
		{ "seg-reserved-3", 147, 1, 1 },
		{ "grp-idx-1024", 148, 2, 1024 },
		{ "seg-reserved-6", 150, 2, 1 },
		{ "seg-reserved-12", 156, 4, 1 },
		{ "seg-id-zero", 160, 8, 0 },
		{ "seg-ids-equal", 248, 8, 2 },
		{ "seg-group-id-zero", 168, 8, 0 },
		{ "seg-group-id-past", 168, 8, 10 },
		{ "dead-col-past-width", 176, 8, 0x8 },
		{ "absent-member-zone", 184, 2, ZA_ETAB_MEMBER_ABSENT },
		{ "absent-hdr-member-zone", 290, 2, ZA_ETAB_MEMBER_ABSENT },
		{ "tail-nonzero", 304, 1, 1 },
	};
	struct za_etab_part *p = malloc(sizeof(*p)), *q = malloc(sizeof(*q));
	uint8_t g[ZA_ETAB_GROUP_BYTES], s[ZA_ETAB_SEG_BYTES + 3 * 16];
	uint32_t n, i;

	if (!p || !q)
		die("seeds_etab");
	etab_fixture(a);
	seed("etab", "one-part", 0, a, trim_zeroes(a, ET_BLK));
	for (i = 0; i < sizeof(breaks) / sizeof(breaks[0]); i++) {
		memcpy(b, a, ET_BLK);
		etab_put(b + breaks[i].off, breaks[i].len, breaks[i].val);
		seed("etab", breaks[i].name, 1, b, ET_BLK);
	}
	/* A group after a segment, within the part. */
	memcpy(g, a + 120, sizeof(g));
	memcpy(s, a + 144, sizeof(s));
	memcpy(b, a, ZA_ETAB_HDR_BYTES);
	memset(b + ZA_ETAB_HDR_BYTES, 0, ZA_ETAB_PAYLOAD_BYTES);
	za_put_le64(b + 56, 1);
	za_put_le64(b + 64, 1);
	za_put_le32(b + 80, 2);
	za_put_le32(b + 84, sizeof(g) + sizeof(s));
	memcpy(b + 96, s, sizeof(s));
	memcpy(b + 96 + sizeof(s), g, sizeof(g));
	seed("etab", "group-after-seg", 1, b, ET_BLK);
	memcpy(b, a, ET_BLK);
	b[200] ^= 1;
	seed("etab", "bad-crc", 0, b, ET_BLK);
	b[0] = 'X';
	seed("etab", "bad-magic", 0, b, ET_BLK);
	seed("etab", "short", 4, a, 100);

	/* 166 groups; 134 groups and 3 segments; 17 segments. */
	n = etab_make(a, 2, 300, 20, 12);
	if (n != 3)
		die("etab: three parts");
	seed("etab", "three-parts", 0, a, n * ET_BLK);
	/* Torn: the middle part never made it. */
	memcpy(b, a, ET_BLK);
	memcpy(b + ET_BLK, a + 2 * ET_BLK, ET_BLK);
	seed("etab", "torn", 0, b, 2 * ET_BLK);
	/* Out of order. */
	memcpy(b, a + ET_BLK, ET_BLK);
	memcpy(b + ET_BLK, a, ET_BLK);
	memcpy(b + 2 * ET_BLK, a + 2 * ET_BLK, ET_BLK);
	seed("etab", "out-of-order", 2, b, 3 * ET_BLK);
	/* Part 0 of one table, parts 1 and 2 of the next. */
	etab_make(b, 3, 300, 20, 12);
	memcpy(b, a, ET_BLK);
	seed("etab", "mixed-ids", 2, b, 3 * ET_BLK);
	/* Every part says one group more than there are (mode 1). */
	memcpy(b, a, 3 * ET_BLK);
	for (i = 0; i < 3; i++)
		za_put_le64(b + i * ET_BLK + 56, 301);
	seed("etab", "totals-off", 1, b, 3 * ET_BLK);
	/* Part 0's last group moved to part 1, where it fits: the cut is
	 * not the canonical one (each part valid alone). */
	memcpy(b, a, 3 * ET_BLK);
	etab_get(b, 0, p);
	etab_get(b, 1, q);
	memmove(&q->groups[1], &q->groups[0],
		q->nr_groups * sizeof(q->groups[0]));
	q->groups[0] = p->groups[--p->nr_groups];
	q->nr_groups++;
	p->h.nr_recs--;
	p->h.used_bytes -= ZA_ETAB_GROUP_BYTES;
	q->h.nr_recs++;
	q->h.used_bytes += ZA_ETAB_GROUP_BYTES;
	etab_encode(b, 0, p);
	etab_encode(b, 1, q);
	seed("etab", "cut-early", 0, b, 3 * ET_BLK);
	/* Group ids going backwards across parts 0 and 1. */
	memcpy(b, a, 3 * ET_BLK);
	etab_get(b, 0, p);
	etab_get(b, 1, q);
	q->groups[0].id = p->groups[p->nr_groups - 1].id;
	etab_encode(b, 1, q);
	seed("etab", "ids-backwards", 0, b, 3 * ET_BLK);

	/* Four segments filling part 0 to its last byte, then a group. */
	memset(p, 0, sizeof(*p));
	p->h = (struct za_etab_hdr){ .ckpt_id = 1,
				     .seq = 1,
				     .next_seq = 2,
				     .next_seg_id = 10,
				     .next_group_id = 10,
				     .nr_groups = 1,
				     .nr_segs = 4,
				     .nr_parts = 2,
				     .nr_recs = 4,
				     .used_bytes = ZA_ETAB_PAYLOAD_BYTES };
	p->nr_segs = 4;
	for (i = 0; i < 4; i++)
		etab_seg(&p->segs[i], 1 + i, i < 3 ? 64 : 48, 10);
	etab_encode(b, 0, p);
	p->h.part = 1;
	p->h.nr_recs = 1;
	p->h.used_bytes = ZA_ETAB_GROUP_BYTES;
	p->nr_segs = 0;
	p->nr_groups = 1;
	p->groups[0] =
		(struct za_etab_group){ .id = 1, .nr_stripes = 1, .w = 1 };
	etab_encode(b, 1, p);
	seed("etab", "group-after-segs", 0, b,
	     ET_BLK + trim_zeroes(b + ET_BLK, ET_BLK));
	/* The same part 0 and a segment: valid, cut at the last byte. */
	p->nr_groups = 0;
	p->nr_segs = 1;
	p->h.nr_groups = 0;
	p->h.nr_segs = 5;
	p->h.used_bytes = ZA_ETAB_SEG_BYTES + ZA_ETAB_COL_BYTES;
	etab_seg(&p->segs[0], 5, 1, 10);
	etab_encode(b, 1, p);
	etab_get(b, 0, q);
	q->h.nr_groups = 0;
	q->h.nr_segs = 5;
	etab_encode(b, 0, q);
	seed("etab", "exact-fit", 0, b,
	     ET_BLK + trim_zeroes(b + ET_BLK, ET_BLK));

	n = etab_make(a, 5, 0, 0, 0);
	seed("etab", "empty", 0, a, trim_zeroes(a, ET_BLK));
	n = etab_make(a, 6, 160, 0, 0);
	seed("etab", "groups-only", 0, a, n * ET_BLK);
	n = etab_make(a, 7, 4, 9, 64);
	seed("etab", "width-64", 0, a, n * ET_BLK);
	n = etab_make(a, 8, 2, 100, 1);
	seed("etab", "width-1", 0, a, n * ET_BLK);
	n = etab_make(a, 9, 10, 12, 0);
	seed("etab", "widths-mixed", 0, a, n * ET_BLK);
	free(p);
	free(q);
}

/* ---- checkpoint anchors ---- */

/* The anchor's fixture (tests/unit/test-anchor.c has the same):
 * checkpoint 9 at S 1000, 5 parts, generation 3; slot 0 segment 11 (group
 * 4, first stripe 2, members 0 1 2, zones 10 11 12), slot 1 segment 12
 * (group 4, members 3 absent 5, zones 20 0 22); slot 2 unused. */
static void anchor_fixture(struct za_anchor *a)
{
	memset(a, 0, sizeof(*a));
	a->ckpt_id = 9;
	a->seq = 1000;
	a->nr_parts = 5;
	a->generation = 3;
	a->nr_segs = 2;
	a->segs[0] = (struct za_anchor_seg){ .seg_id = 11,
					     .group_id = 4,
					     .first_stripe = 2,
					     .width = 3,
					     .members = { 0, 1, 2 },
					     .zones = { 10, 11, 12 } };
	a->segs[1] = (struct za_anchor_seg){
		.seg_id = 12,
		.group_id = 4,
		.width = 3,
		.members = { 3, ZA_STRIPE_MEMBER_ABSENT, 5 },
		.zones = { 20, 0, 22 }
	};
}

/* @nr_segs segments of @width columns each, column @absent (if below the
 * width) lost; ids and places made up from @id. */
static void anchor_shape(struct za_anchor *a, uint64_t id, uint8_t nr_segs,
			 uint8_t width, unsigned absent)
{
	unsigned i, c;

	memset(a, 0, sizeof(*a));
	a->ckpt_id = id;
	a->seq = 1000 * id;
	a->nr_parts = 2 + (uint32_t)id;
	a->generation = (uint32_t)id;
	a->nr_segs = nr_segs;
	for (i = 0; i < nr_segs; i++) {
		struct za_anchor_seg *s = &a->segs[i];

		s->seg_id = 100 * id + i;
		s->group_id = 10 * id + i;
		s->first_stripe = i ? 0 : (uint32_t)id;
		s->width = width;
		for (c = 0; c < width; c++) {
			if (c == absent) {
				s->members[c] = ZA_STRIPE_MEMBER_ABSENT;
				continue;
			}
			s->members[c] = (uint16_t)(3 * i + 5 * c);
			s->zones[c] = 2 + 7 * i + c;
		}
	}
}

static void anchor_seed(const char *name, const struct za_anchor *a)
{
	uint8_t b[ZA_ANCHOR_BYTES];

	if (za_anchor_encode(a, b))
		die(name);
	seed("anchor", name, 0, b, trim_zeroes(b, sizeof(b)));
}

static void seeds_anchor(void)
{
	/* One field each, of the fixture (mode 1: CRC fixed). */
	static const struct {
		const char *name;
		unsigned off, len;
		uint64_t val;
	} breaks[] = {
		{ "flag-unknown", 8, 4, 0x2 },
		{ "nr-parts-zero", 12, 4, 0 },
		{ "no-ckpt-with-parts", 16, 8, 0 },
		{ "nr-segs-four", 36, 1, 4 },
		{ "nr-segs-empty-slot", 36, 1, 3 },
		{ "nr-segs-slot-left", 36, 1, 1 },
		{ "reserved-6", 6, 2, 1 },
		{ "reserved-37", 37, 1, 1 },
		{ "reserved-232", 232, 1, 1 },
		{ "reserved-251", 251, 1, 1 },
		{ "width-zero", 60, 1, 0 },
		{ "width-eight", 60, 1, 8 },
		{ "width-short", 60, 1, 2 },
		{ "slot-reserved-21", 61, 1, 1 },
		{ "member-1025", 62, 2, 1025 },
		{ "absent-with-zone", 62, 2, ZA_STRIPE_MEMBER_ABSENT },
		{ "absent-given-zone", 144, 4, 1 },
		{ "member-twice", 64, 2, 0 },
		{ "member-past-width", 68, 2, 7 },
		{ "zone-past-width", 100, 4, 1 },
		{ "seg-id-twice", 104, 8, 11 },
		{ "unused-slot", 168, 8, 13 },
	};
	struct za_anchor a;
	uint8_t fx[ZA_ANCHOR_BYTES], b[ZA_ANCHOR_BYTES];
	unsigned i;

	anchor_fixture(&a);
	anchor_seed("fixture", &a);
	if (za_anchor_encode(&a, fx))
		die("anchor fixture");
	for (i = 0; i < sizeof(breaks) / sizeof(breaks[0]); i++) {
		memcpy(b, fx, sizeof(b));
		etab_put(b + breaks[i].off, breaks[i].len, breaks[i].val);
		seed("anchor", breaks[i].name, 1, b, sizeof(b));
	}
	/* No checkpoint, with a seq (mode 1). */
	memset(&a, 0, sizeof(a));
	a.generation = 1;
	if (za_anchor_encode(&a, b))
		die("anchor none");
	etab_put(b + 24, 8, 1);
	seed("anchor", "no-ckpt-with-seq", 1, b, sizeof(b));
	memcpy(b, fx, sizeof(b));
	b[100] ^= 1;
	seed("anchor", "bad-crc", 0, b, sizeof(b));
	memcpy(b, fx, sizeof(b));
	b[0] = 'X';
	seed("anchor", "bad-magic", 0, b, sizeof(b));
	memcpy(b, fx, sizeof(b));
	b[4] = 2;
	seed("anchor", "bad-version", 0, b, sizeof(b));
	seed("anchor", "short", 0, fx, 100);
	seed("anchor", "all-zero", 0, NULL, 0);
	memset(b, 0, sizeof(b));
	seed("anchor", "all-zero-crc-fixed", 1, b, sizeof(b));

	/* A valid anchor of each shape. */
	memset(&a, 0, sizeof(a));
	anchor_seed("none", &a);
	a.flags = ZA_ANCHOR_REVOKED;
	a.generation = 2;
	anchor_seed("none-revoked", &a);
	anchor_shape(&a, 1, 0, 0, 0);
	anchor_seed("not-anchored", &a);
	anchor_shape(&a, 2, 1, 1, 7);
	anchor_seed("one-seg-width-1", &a);
	anchor_shape(&a, 3, 2, 4, 7);
	anchor_seed("two-segs-width-4", &a);
	anchor_shape(&a, 4, 3, 7, 7);
	anchor_seed("three-segs-width-7", &a);
	anchor_shape(&a, 5, 3, 7, 2);
	anchor_seed("absent-columns", &a);
	anchor_shape(&a, 6, 2, 3, 0);
	a.flags = ZA_ANCHOR_REVOKED;
	anchor_seed("revoked", &a);
	anchor_shape(&a, 7, 3, 7, 6);
	a.ckpt_id = UINT64_MAX;
	a.seq = UINT64_MAX;
	a.nr_parts = UINT32_MAX;
	a.generation = UINT32_MAX;
	for (i = 0; i < 3; i++) {
		unsigned c;

		a.segs[i].seg_id = UINT64_MAX - i;
		a.segs[i].group_id = UINT64_MAX;
		a.segs[i].first_stripe = UINT32_MAX;
		for (c = 0; c < 6; c++) {
			a.segs[i].members[c] = (uint16_t)(1023 - c);
			a.segs[i].zones[c] = UINT32_MAX;
		}
	}
	anchor_seed("limits", &a);
}

/* ---- map pages ---- */

/*
 * Encode a page of checkpoint @id at @level: @nr records from @lo, each
 * @len blocks with @gap blocks between two, into @b (ZA_MPAGE_BYTES).
 * Groups and positions at their limits with @big.
 */
static void mpage_make(uint8_t *b, uint64_t id, uint8_t level, uint32_t nr,
		       uint64_t lo, uint64_t len, uint64_t gap, int big)
{
	struct za_ckpt_rec r[ZA_MPAGE_MAX_RECS];
	struct za_mpage_hdr h = {
		.ckpt_id = id, .lo = lo, .level = level, .nr_recs = nr
	};
	uint64_t lba = lo;
	uint32_t i;

	for (i = 0; i < nr; i++) {
		r[i] = (struct za_ckpt_rec){ .lba = lba, .nr_blocks = len };
		if (level) {
			r[i].type = ZA_CKPT_REC_PAGE;
			r[i].group = big ? UINT64_MAX : 3 + i % 5;
			r[i].pos = big ? UINT64_MAX - 1 : 10 * i;
		} else {
			r[i].type = i % 3 ? ZA_CKPT_REC_DATA :
					    ZA_CKPT_REC_JOURNAL;
			r[i].group = big ? UINT64_MAX : 1 + i % 7;
			r[i].pos = big ? UINT64_MAX - len : 100 * i;
		}
		lba += len + gap;
	}
	h.hi = lba - gap;
	if (za_mpage_encode(&h, r, b))
		die("za_mpage_encode");
}

static void seeds_mpage(void)
{
	/*
	 * One field each of the fixture (mode 1: CRC fixed): a leaf of
	 * checkpoint 9 covering [100, 250), extents 100+10 at 96, 110+5 at
	 * 136, 200+50 at 176.
	 */
	static const struct {
		const char *name;
		unsigned off, len;
		uint64_t val;
	} breaks[] = {
		{ "ckpt-id-zero", 16, 8, 0 },
		{ "lo-off", 24, 8, 99 },
		{ "lo-at-hi", 24, 8, 250 },
		{ "hi-off", 32, 8, 251 },
		{ "hi-past-largest", 32, 8, ZA_CKPT_MAX_SIZE_BLOCKS + 1 },
		{ "level-one", 40, 1, 1 },
		{ "level-eight", 40, 1, 8 },
		{ "reserved-41", 41, 1, 1 },
		{ "reserved-48", 48, 1, 1 },
		{ "reserved-95", 95, 1, 1 },
		{ "nr-recs-zero", 44, 4, 0 },
		{ "nr-recs-short", 44, 4, 2 },
		{ "nr-recs-101", 44, 4, 101 },
		{ "type-unmap", 136, 1, ZA_CKPT_REC_UNMAP },
		{ "type-page-in-leaf", 136, 1, ZA_CKPT_REC_PAGE },
		{ "rec-reserved", 137, 1, 1 },
		{ "nr-blocks-zero", 136 + 16, 8, 0 },
		{ "overlap", 136 + 8, 8, 109 },
		{ "backwards", 176 + 8, 8, 100 },
		{ "pos-wraps", 176 + 32, 8, UINT64_MAX - 49 },
		{ "trailing", 216, 1, 1 },
		{ "last-byte", 4095, 1, 1 },
	};
	static const struct za_ckpt_rec fx_recs[] = {
		{ ZA_CKPT_REC_DATA, 100, 10, 5, 0 },
		{ ZA_CKPT_REC_JOURNAL, 110, 5, 6, 20 },
		{ ZA_CKPT_REC_DATA, 200, 50, 5, 40 },
	};
	static const struct za_mpage_hdr fx_h = { 9, 100, 250, 0, 3 };
	static uint8_t fx[ZA_MPAGE_BYTES], b[ZA_MPAGE_BYTES];
	static uint8_t lng[ZA_MPAGE_BYTES + 1];
	unsigned i;

	if (za_mpage_encode(&fx_h, fx_recs, fx))
		die("mpage fixture");
	seed("mpage", "fixture", 0, fx, trim_zeroes(fx, sizeof(fx)));
	for (i = 0; i < sizeof(breaks) / sizeof(breaks[0]); i++) {
		memcpy(b, fx, sizeof(b));
		etab_put(b + breaks[i].off, breaks[i].len, breaks[i].val);
		seed("mpage", breaks[i].name, 1, b, sizeof(b));
	}
	memcpy(b, fx, sizeof(b));
	b[100] ^= 1;
	seed("mpage", "bad-crc", 0, b, sizeof(b));
	memcpy(b, fx, sizeof(b));
	b[0] = 'X';
	seed("mpage", "bad-magic", 0, b, sizeof(b));
	memcpy(b, fx, sizeof(b));
	b[8] = 2;
	seed("mpage", "bad-version", 0, b, sizeof(b));
	seed("mpage", "short", 2, fx, 100);
	/* A read one byte longer than a block: not a page either. */
	memcpy(lng, fx, sizeof(fx));
	seed("mpage", "long", 2, lng, sizeof(lng));
	seed("mpage", "all-zero", 0, NULL, 0);

	/* A valid page of each kind. */
	mpage_make(b, 1, 0, 1, 0, 1, 0, 0);
	seed("mpage", "leaf-one-block", 0, b, trim_zeroes(b, sizeof(b)));
	mpage_make(b, 2, 0, ZA_MPAGE_MAX_RECS, 4096, 8, 1, 0);
	seed("mpage", "leaf-full", 0, b, sizeof(b));
	mpage_make(b, 3, 0, ZA_MPAGE_MAX_RECS, 0, 1, 0, 0);
	seed("mpage", "leaf-adjacent", 0, b, sizeof(b));
	mpage_make(b, UINT64_MAX, 0, 4, ZA_CKPT_MAX_SIZE_BLOCKS - 400, 100, 0,
		   1);
	seed("mpage", "leaf-at-the-top", 0, b, trim_zeroes(b, sizeof(b)));
	mpage_make(b, 4, 1, 1, 0, 1u << 20, 0, 0);
	seed("mpage", "level-1-one-child", 0, b, trim_zeroes(b, sizeof(b)));
	mpage_make(b, 5, 1, ZA_MPAGE_MAX_RECS, 1000, 500, 3, 0);
	seed("mpage", "level-1-full", 0, b, sizeof(b));
	mpage_make(b, 6, ZA_MPAGE_MAX_LEVEL, 7, 0, 1ull << 40, 0, 1);
	seed("mpage", "top-level", 0, b, trim_zeroes(b, sizeof(b)));
	/* Interior pages broken (mode 1): an extent among pages, a page
	 * that is no block, a leaf's records at level 2. */
	mpage_make(b, 7, 2, 3, 0, 100, 0, 0);
	b[96 + 40] = ZA_CKPT_REC_DATA;
	seed("mpage", "extent-in-interior", 1, b, sizeof(b));
	mpage_make(b, 7, 2, 3, 0, 100, 0, 0);
	za_put_le64(b + 96 + 32, UINT64_MAX);
	seed("mpage", "page-pos-max", 1, b, sizeof(b));
	memcpy(b, fx, sizeof(b));
	b[40] = 2;
	seed("mpage", "leaf-at-level-2", 1, b, sizeof(b));
}

/* ---- superblocks ---- */

static struct za_sb sbs[4];
static uint8_t rec[ZA_SB_RECORD_BYTES];

static void uuid_of(struct za_uuid *u, unsigned a, unsigned b)
{
	unsigned i;

	for (i = 0; i < 16; i++)
		u->b[i] = (uint8_t)(a * 31 + b * 7 + i * 13 + 1);
	u->b[0] = (uint8_t)a;
	u->b[1] = (uint8_t)(b >> 8);
	u->b[2] = (uint8_t)b;
}

/* An array of @nr members (uuid seed @a), as member @idx sees it. */
static void sb_make(struct za_sb *sb, unsigned a, const char *name, unsigned nr,
		    unsigned idx, uint64_t gen)
{
	unsigned i;

	memset(sb, 0, sizeof(*sb));
	uuid_of(&sb->array_uuid, a, 0);
	snprintf(sb->name, sizeof(sb->name), "%s", name);
	sb->generation = gen;
	sb->ctime_s = 1700000000;
	sb->nr_members = nr;
	sb->member_idx = idx;
	sb->geom = (struct za_geom){ .k = (uint8_t)(nr > 12 ? 10 :
						    nr > 2  ? nr - 2 :
							      1),
				     .p = nr > 2 ? 2 : 1,
				     .matrix = ZA_EC_MATRIX_CAUCHY,
				     .stripe_rows = 4,
				     .chunk_bytes = 64 << 10,
				     .lblock_bytes = 4096,
				     .hdr_bytes = 4096 };
	sb->volume_bytes = 1ull << 30;
	for (i = 0; i < sizeof(sb->volume_meta); i++)
		sb->volume_meta[i] = (uint8_t)i;
	for (i = 0; i < nr; i++) {
		struct za_sb_member *m = &sb->members[i];

		uuid_of(&m->uuid, a, i + 1);
		m->state = ZA_MEMBER_ONLINE;
		m->nr_zones = 64;
		m->zone_size_bytes = 256ull << 20;
		m->capacity_bytes = 64 * m->zone_size_bytes;
		snprintf(m->path_hint, sizeof(m->path_hint), "/dev/sd%c",
			 'a' + (char)(i % 26));
	}
	sb->member_uuid = sb->members[idx].uuid;
}

static void sb_encode(const struct za_sb *sb)
{
	if (za_sb_encode(sb, rec, sizeof(rec))) {
		fprintf(stderr, "make-seeds: za_sb_encode refused a seed\n");
		exit(1);
	}
}

/* Break one byte of the encoded record; the harness fixes the CRCs. */
static void sb_broken(const char *name, unsigned off, uint8_t val)
{
	uint8_t *r = malloc(sizeof(rec));

	if (!r)
		die("malloc");
	memcpy(r, rec, sizeof(rec));
	r[off] = val;
	seed("sb", name, 3, r, trim_zeroes(r, sizeof(rec)));
	free(r);
}

static void seeds_sb(void)
{
	struct za_sb *sb = &sbs[0];
	unsigned i;

	sb_make(sb, 1, "archive", 3, 1, 7);
	sb_encode(sb);
	seed("sb", "valid-3", 1, rec, trim_zeroes(rec, sizeof(rec)));
	sb_broken("bad-version", 8, 2);
	sb_broken("bad-record-bytes", 12, 0);
	sb_broken("name-bad-char", 40, '/');
	sb_broken("name-empty", 40, 0);
	sb_broken("name-not-padded", 40 + 20, 'x');
	sb_broken("generation-zero", 104, 0);
	sb_broken("member-idx-big", 136, 3);
	sb_broken("nr-members-zero", 140, 0);
	sb_broken("nr-members-big", 141, 0x04);
	sb_broken("geom-k-zero", 144, 0);
	sb_broken("geom-p-seven", 145, 7);
	sb_broken("geom-matrix", 146, 2);
	sb_broken("geom-rows-big", 147, 32);
	sb_broken("geom-lblock", 153, 0x20);
	sb_broken("volume-unaligned", 160, 1);
	sb_broken("reserved-hdr", 500, 1);
	sb_broken("member-uuid-mismatch", 120, 0xee);
	sb_broken("entry-state-zero", 4096 + 64 + 16, 0);
	sb_broken("entry-state-six", 4096 + 64 + 16, 6);
	sb_broken("entry-reserved", 4096 + 64 + 17, 1);
	sb_broken("entry-replacement-self", 4096 + 64 + 18, 2);
	sb_broken("entry-replacement-range", 4096 + 18, 9);
	sb_broken("entry-zones-zero", 4096 + 20, 0);
	sb_broken("entry-cap-big", 4096 + 24 + 5, 0x40);
	sb_broken("entry-hint-ctrl", 4096 + 40, 1);
	sb_broken("entry-hint-unterminated", 4096 + 40 + 23, 'x');
	sb_broken("unused-entry", 4096 + 64 * 5, 1);
	{
		/* A null array uuid. */
		uint8_t *r = malloc(sizeof(rec));

		if (!r)
			die("malloc");
		memcpy(r, rec, sizeof(rec));
		memset(r + 24, 0, 16);
		seed("sb", "null-array-uuid", 3, r,
		     trim_zeroes(r, sizeof(rec)));
		free(r);
	}
	{
		/* Two members with one uuid: copy entry 0's uuid to 2. */
		uint8_t *r = malloc(sizeof(rec));

		if (!r)
			die("malloc");
		memcpy(r, rec, sizeof(rec));
		memcpy(r + 4096 + 128, r + 4096, 16);
		seed("sb", "dup-member-uuid", 3, r,
		     trim_zeroes(r, sizeof(rec)));
		free(r);
	}
	rec[30] ^= 1;
	seed("sb", "bad-hdr-crc", 1, rec, trim_zeroes(rec, sizeof(rec)));
	seed("sb", "truncated", 0, rec, 5000);
	seed("sb", "no-magic", 1, "ZARRAYSX", 8);

	sb_make(sb, 2, "one", 1, 0, 1);
	sb_encode(sb);
	seed("sb", "valid-1", 1, rec, trim_zeroes(rec, sizeof(rec)));

	sb_make(sb, 3, "wide.array-64", 64, 63, 99);
	for (i = 0; i < 64; i++)
		sb->members[i].state = (uint8_t)(1 + i % 5);
	sb->members[63].state = ZA_MEMBER_ONLINE;
	sb_encode(sb);
	seed("sb", "valid-64-states", 1, rec, trim_zeroes(rec, sizeof(rec)));

	/* The whole record, unpadded: the decoder's exact-length path. */
	sb_make(sb, 4, "full", 1024, 1023, 3);
	sb_encode(sb);
	seed("sb", "valid-1024-unpadded", 0, rec, sizeof(rec));
}

/* ---- assembly ---- */

/* One drive of a fuzz-sb-assemble input: kind 0 and the compact record. */
static void asm_drive(const struct za_sb *sb)
{
	size_t tab = (size_t)sb->nr_members * 64;

	sb_encode(sb);
	b_u8(0);
	b_le16((uint16_t)(ZA_FUZZ_SB_HDR_USED + tab));
	b_bytes(rec, ZA_FUZZ_SB_HDR_USED);
	b_bytes(rec + 4096, tab);
}

static void asm_seed(const char *name, unsigned nr_drives, uint8_t sel,
		     const struct za_sb *const *drives, const uint8_t *kinds)
{
	unsigned i;

	b_reset();
	b_u8(sel);
	for (i = 0; i < nr_drives; i++) {
		if (drives[i])
			asm_drive(drives[i]);
		else
			b_u8(kinds[i]);
	}
	seed("sb-assemble", name, (uint8_t)nr_drives, B.b, B.n);
}

static void seeds_sb_assemble(void)
{
	static struct za_sb d[6];
	const struct za_sb *drv[8];
	uint8_t kinds[8] = { 0 };
	unsigned i;

	for (i = 0; i < 3; i++) {
		sb_make(&d[i], 1, "archive", 3, i, 5);
		drv[i] = &d[i];
	}
	asm_seed("healthy-3", 3, 0, drv, kinds);
	asm_seed("healthy-3-by-name", 3, 2, drv, kinds);
	asm_seed("no-such-name", 3, 1, drv, kinds);

	/* A crash during an update: drive 2 still has generation 4. */
	d[2].generation = 4;
	drv[3] = NULL;
	kinds[3] = 1; /* blank */
	drv[4] = NULL;
	kinds[4] = 2; /* corrupt */
	sb_make(&d[3], 9, "other", 3, 0, 2);
	drv[5] = &d[3];
	asm_seed("stale-blank-corrupt-foreign", 6, 0, drv, kinds);

	/* The reference says member 1 failed; its drive came back. */
	for (i = 0; i < 3; i++) {
		sb_make(&d[i], 1, "archive", 3, i, 6);
		d[i].members[1].state = ZA_MEMBER_FAILED;
		drv[i] = &d[i];
	}
	d[1].generation = 5;
	d[1].members[1].state = ZA_MEMBER_ONLINE;
	asm_seed("failed-member-returns", 3, 0, drv, kinds);

	/* Two drives claim member 0. */
	for (i = 0; i < 3; i++)
		sb_make(&d[i], 1, "archive", 3, i, 5);
	sb_make(&d[3], 1, "archive", 3, 0, 4);
	drv[3] = &d[3];
	asm_seed("duplicate-member", 4, 0, drv, kinds);

	/* Same name, two arrays; and two arrays equally new. */
	sb_make(&d[3], 2, "archive", 3, 0, 3);
	asm_seed("two-arrays-one-name", 4, 2, drv, kinds);
	sb_make(&d[3], 2, "other", 3, 0, 5);
	asm_seed("two-arrays-tie", 4, 0, drv, kinds);

	/* A drive whose uuid the reference does not know. */
	sb_make(&d[3], 1, "archive", 3, 0, 5);
	uuid_of(&d[3].member_uuid, 7, 7);
	d[3].members[0].uuid = d[3].member_uuid;
	asm_seed("unknown-member", 4, 0, drv, kinds);

	/* Eight drives of a 6+2 array, one missing and one read error. */
	for (i = 0; i < 8; i++) {
		static struct za_sb w[8];

		sb_make(&w[i], 5, "wide", 8, i, 11);
		drv[i] = &w[i];
	}
	drv[6] = NULL;
	kinds[6] = 3;
	drv[7] = NULL;
	kinds[7] = 1;
	asm_seed("wide-missing-two", 8, 0, drv, kinds);
}

/* ---- control protocol ---- */

static void rpc_frame_body(const ProtobufCMessage *m)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	uint8_t *p = malloc(n ? n : 1);

	if (!p)
		die("malloc");
	protobuf_c_message_pack(m, p);
	b_be32((uint32_t)n);
	b_bytes(p, n);
	free(p);
}

static void rpc_req(const char *name, Zarray__Request *r)
{
	b_reset();
	rpc_frame_body(&r->base);
	seed("rpc", name, 0, B.b, B.n);
}

static void rpc_resp(const char *name, Zarray__Response *r)
{
	b_reset();
	rpc_frame_body(&r->base);
	seed("rpc", name, 1, B.b, B.n);
}

static void seeds_rpc(void)
{
	static char *paths[] = { (char *)"/dev/sda", (char *)"/dev/sdb",
				 (char *)"/var/lib/zarray/d2.img" };
	Zarray__Request rq = ZARRAY__REQUEST__INIT;
	Zarray__Ping ping = ZARRAY__PING__INIT;
	Zarray__Create create = ZARRAY__CREATE__INIT;
	Zarray__Status status = ZARRAY__STATUS__INIT;
	Zarray__Replace replace = ZARRAY__REPLACE__INIT;
	Zarray__Rebuild rebuild = ZARRAY__REBUILD__INIT;
	Zarray__Watch watch = ZARRAY__WATCH__INIT;
	Zarray__Export exp = ZARRAY__EXPORT__INIT;
	Zarray__Response rs = ZARRAY__RESPONSE__INIT;
	Zarray__Error err = ZARRAY__ERROR__INIT;
	Zarray__ArrayList list = ZARRAY__ARRAY_LIST__INIT;
	Zarray__ArrayStatus as = ZARRAY__ARRAY_STATUS__INIT;
	Zarray__ArrayStatus *asp = &as;
	Zarray__MemberStatus ms = ZARRAY__MEMBER_STATUS__INIT;
	Zarray__MemberStatus *msp[2] = { &ms, &ms };
	Zarray__JobStatus js = ZARRAY__JOB_STATUS__INIT;
	Zarray__JobStatus *jsp = &js;
	Zarray__Event ev = ZARRAY__EVENT__INIT;
	Zarray__Pong pong = ZARRAY__PONG__INIT;

	rq.version = ZA_RPC_VERSION;
	rq.id = 1;
	rq.body_case = ZARRAY__REQUEST__BODY_PING;
	rq.ping = &ping;
	rpc_req("req-ping", &rq);
	rq.version = 2;
	rpc_req("req-ping-v2", &rq);
	rq.version = ZA_RPC_VERSION;

	create.name = (char *)"archive";
	create.k = 4;
	create.p = 2;
	create.has_chunk_bytes = true;
	create.chunk_bytes = 65536;
	create.n_paths = 3;
	create.paths = paths;
	create.tcp = (char *)"127.0.0.1:10809";
	rq.id = 2;
	rq.body_case = ZARRAY__REQUEST__BODY_CREATE;
	rq.create = &create;
	rpc_req("req-create", &rq);

	rq.body_case = ZARRAY__REQUEST__BODY_STATUS;
	rq.status = &status;
	rpc_req("req-status-all", &rq);
	status.name = (char *)"archive";
	rpc_req("req-status", &rq);

	replace.name = (char *)"archive";
	replace.old_path = paths[0];
	replace.new_path = paths[2];
	rq.body_case = ZARRAY__REQUEST__BODY_REPLACE;
	rq.replace = &replace;
	rpc_req("req-replace", &rq);

	rebuild.name = (char *)"archive";
	rebuild.action = ZARRAY__REBUILD_ACTION__REBUILD_START;
	rebuild.has_rate_bps = true;
	rebuild.rate_bps = 100 << 20;
	rq.body_case = ZARRAY__REQUEST__BODY_REBUILD;
	rq.rebuild = &rebuild;
	rpc_req("req-rebuild", &rq);

	watch.name = (char *)"archive";
	rq.body_case = ZARRAY__REQUEST__BODY_WATCH;
	rq.watch = &watch;
	rpc_req("req-watch", &rq);

	exp.name = (char *)"archive";
	exp.tcp = (char *)"0";
	rq.body_case = ZARRAY__REQUEST__BODY_EXPORT;
	rq.export = &exp;
	rpc_req("req-export", &rq);

	/* No body: what an old daemon sees of a newer command. */
	rq.body_case = ZARRAY__REQUEST__BODY__NOT_SET;
	rpc_req("req-no-body", &rq);

	rs.version = ZA_RPC_VERSION;
	rs.id = 2;
	err.code = ZARRAY__ERROR_CODE__ERR_NOT_FOUND;
	err.message = (char *)"no array called 'archive'";
	err.has_errno_value = true;
	err.errno_value = ENOENT;
	rs.error = &err;
	rpc_resp("resp-error", &rs);
	rs.error = NULL;

	pong.daemon_version = (char *)"0.1.0";
	pong.has_protocol_version = true;
	pong.protocol_version = 1;
	rs.body_case = ZARRAY__RESPONSE__BODY_PONG;
	rs.pong = &pong;
	rpc_resp("resp-pong", &rs);

	ms.path = paths[0];
	ms.uuid = (char *)"01234567-89ab-cdef-0123-456789abcdef";
	ms.index = 1;
	ms.state = ZARRAY__MEMBER_STATE__MEMBER_ONLINE;
	ms.size_bytes = 1ull << 40;
	js.kind = ZARRAY__JOB_KIND__JOB_REBUILD;
	js.state = ZARRAY__JOB_STATE__JOB_RUNNING;
	js.done_bytes = 10;
	js.total_bytes = 100;
	as.name = (char *)"archive";
	as.uuid = ms.uuid;
	as.state = ZARRAY__ARRAY_STATE__ARRAY_DEGRADED;
	as.data = 4;
	as.parity = 2;
	as.chunk_bytes = 65536;
	as.n_members = 2;
	as.members = msp;
	as.n_jobs = 1;
	as.jobs = &jsp;
	as.export_uri = (char *)"nbd+unix:///archive?socket=/run/zarray/a";
	list.n_arrays = 1;
	list.arrays = &asp;
	rs.body_case = ZARRAY__RESPONSE__BODY_ARRAYS;
	rs.arrays = &list;
	rpc_resp("resp-arrays", &rs);

	ev.name = (char *)"archive";
	ev.state = ZARRAY__ARRAY_STATE__ARRAY_HEALTHY;
	ev.n_jobs = 1;
	ev.jobs = &jsp;
	rs.body_case = ZARRAY__RESPONSE__BODY_EVENT;
	rs.event = &ev;
	rs.has_more = true;
	rs.more = true;
	rpc_resp("resp-event", &rs);

	/* Frame headers out of range, and bodies that do not decode. */
	b_reset();
	b_be32(0);
	seed("rpc", "len-zero", 0, B.b, B.n);
	b_reset();
	b_be32(ZA_RPC_MAX_FRAME_BYTES + 1);
	b_u8(0x08);
	seed("rpc", "len-over-cap", 0, B.b, B.n);
	b_reset();
	b_be32(3);
	b_u8(0x08);
	b_u8(0x01);
	b_u8(0x82); /* a varint cut short */
	seed("rpc", "truncated-varint", 0, B.b, B.n);
	b_reset();
	b_be32(4);
	b_u8(0x8a); /* field 17 (create), length-delimited */
	b_u8(0x01);
	b_u8(0xff); /* length beyond the body */
	b_u8(0x7f);
	seed("rpc", "submessage-too-long", 0, B.b, B.n);
}

/* ---- control socket streams ---- */

static void frame_req(uint32_t version, uint64_t id, int body)
{
	Zarray__Request rq = ZARRAY__REQUEST__INIT;
	Zarray__Ping ping = ZARRAY__PING__INIT;
	Zarray__Stop stop = ZARRAY__STOP__INIT;

	rq.version = version;
	rq.id = id;
	if (body == 0) {
		rq.body_case = ZARRAY__REQUEST__BODY_PING;
		rq.ping = &ping;
	} else {
		stop.name = (char *)"archive";
		rq.body_case = ZARRAY__REQUEST__BODY_STOP;
		rq.stop = &stop;
	}
	rpc_frame_body(&rq.base);
}

static void seeds_rpc_server(void)
{
	uint8_t m;

	for (m = 0; m < 4; m++) {
		char name[64];

		b_reset();
		frame_req(ZA_RPC_VERSION, 1, 0);
		frame_req(ZA_RPC_VERSION, 2, 1);
		frame_req(ZA_RPC_VERSION, 3, 0);
		snprintf(name, sizeof(name), "three-requests-mode%u", m);
		seed("rpc-server", name, m, B.b, B.n);
	}
	b_reset();
	frame_req(ZA_RPC_VERSION, 1, 0);
	frame_req(ZA_RPC_VERSION, 2, 1);
	seed("rpc-server", "small-bufs-more", 4 | 2, B.b, B.n);
	seed("rpc-server", "two-peers-deferred", 8 | 1, B.b, B.n);
	b_reset();
	frame_req(ZA_RPC_VERSION, 1, 0);
	frame_req(7, 2, 0);
	frame_req(ZA_RPC_VERSION, 3, 0);
	seed("rpc-server", "bad-version", 0, B.b, B.n);
	b_reset();
	frame_req(ZA_RPC_VERSION, 1, 0);
	b_be32(0);
	seed("rpc-server", "len-zero", 0, B.b, B.n);
	b_reset();
	b_be32(ZA_RPC_MAX_FRAME_BYTES + 1);
	seed("rpc-server", "len-over-cap", 0, B.b, B.n);
	b_reset();
	b_be32(5);
	b_fill(0xff, 5);
	seed("rpc-server", "garbage-body", 1, B.b, B.n);
	b_reset();
	frame_req(ZA_RPC_VERSION, 1, 1);
	B.n -= 3;
	seed("rpc-server", "cut-in-body", 2, B.b, B.n);
	b_reset();
	b_u8(0);
	b_u8(0);
	seed("rpc-server", "cut-in-header", 0, B.b, B.n);
}

/* ---- NBD ---- */

#define NBD_OPT_EXPORT_NAME 1
#define NBD_OPT_ABORT 2
#define NBD_OPT_LIST 3
#define NBD_OPT_INFO 6
#define NBD_OPT_GO 7
#define NBD_INFO_NAME 1
#define NBD_INFO_DESCRIPTION 2
#define NBD_INFO_BLOCK_SIZE 3
#define NBD_CMD_READ 0
#define NBD_CMD_WRITE 1
#define NBD_CMD_DISC 2
#define NBD_CMD_FLUSH 3
#define NBD_CMD_TRIM 4
#define NBD_CMD_WRITE_ZEROES 6
#define NBD_CMD_FLAG_FUA 1
#define NBD_CMD_FLAG_NO_HOLE 2
#define NBD_REQUEST_MAGIC 0x25609513u

static void nbd_opt(uint32_t opt, const void *body, uint32_t len)
{
	b_bytes("IHAVEOPT", 8);
	b_be32(opt);
	b_be32(len);
	b_bytes(body, len);
}

/* OPT_GO / OPT_INFO with @name and @nr info requests. */
static void nbd_opt_go(uint32_t opt, const char *name, unsigned nr,
		       const uint16_t *infos)
{
	static uint8_t body[8192];
	size_t nl = strlen(name), n = 0;
	unsigned i;

	if (nl + 6 + 2 * nr > sizeof(body)) {
		fprintf(stderr, "make-seeds: option too long\n");
		exit(1);
	}

	body[0] = (uint8_t)(nl >> 24);
	body[1] = (uint8_t)(nl >> 16);
	body[2] = (uint8_t)(nl >> 8);
	body[3] = (uint8_t)nl;
	n = 4;
	memcpy(body + n, name, nl);
	n += nl;
	body[n++] = (uint8_t)(nr >> 8);
	body[n++] = (uint8_t)nr;
	for (i = 0; i < nr; i++) {
		body[n++] = (uint8_t)(infos[i] >> 8);
		body[n++] = (uint8_t)infos[i];
	}
	nbd_opt(opt, body, (uint32_t)n);
}

static void nbd_req(uint16_t flags, uint16_t type, uint64_t cookie,
		    uint64_t off, uint32_t len)
{
	b_be32(NBD_REQUEST_MAGIC);
	b_be16(flags);
	b_be16(type);
	b_be64(cookie);
	b_be64(off);
	b_be32(len);
}

static void nbd_write(uint16_t flags, uint64_t off, uint32_t len)
{
	nbd_req(flags, NBD_CMD_WRITE, off, off, len);
	b_fill((uint8_t)(off >> 12), len);
}

/* A short session: a write, a read back, a flush, a disconnect. */
static void nbd_session(void)
{
	nbd_write(0, 4096, 4096);
	nbd_req(0, NBD_CMD_READ, 2, 4096, 4096);
	nbd_req(0, NBD_CMD_FLUSH, 3, 0, 0);
	nbd_req(0, NBD_CMD_DISC, 4, 0, 0);
}

/* An NBD seed: the harness's two mode bytes, then the stream in B. */
static void nbd_seed(const char *target, const char *name, uint8_t mode,
		     uint8_t mode2)
{
	uint8_t *buf = malloc(B.n + 1);

	if (!buf)
		die("malloc");
	buf[0] = mode2;
	memcpy(buf + 1, B.b, B.n);
	seed(target, name, mode, buf, B.n + 1);
	free(buf);
}

static void seeds_nbd_handshake(void)
{
	static const uint16_t infos[] = { NBD_INFO_NAME, NBD_INFO_DESCRIPTION,
					  NBD_INFO_BLOCK_SIZE, 99 };
	unsigned i;

	b_reset();
	b_be32(3);
	nbd_opt_go(NBD_OPT_GO, "", 0, NULL);
	nbd_session();
	nbd_seed("nbd-handshake", "go-default", 0, 0);

	b_reset();
	b_be32(1);
	nbd_opt_go(NBD_OPT_INFO, "fuzz", 4, infos);
	nbd_opt_go(NBD_OPT_GO, "fuzz", 3, infos);
	nbd_session();
	nbd_seed("nbd-handshake", "info-then-go", 0, 0);

	b_reset();
	b_be32(3);
	nbd_opt(NBD_OPT_LIST, NULL, 0);
	nbd_opt(NBD_OPT_ABORT, NULL, 0);
	nbd_seed("nbd-handshake", "list-abort", 0, 0);

	b_reset();
	b_be32(1);
	nbd_opt(NBD_OPT_EXPORT_NAME, "fuzz", 4);
	nbd_session();
	nbd_seed("nbd-handshake", "export-name", 0, 0);

	b_reset();
	b_be32(3);
	nbd_opt(99, "abc", 3);
	nbd_opt(NBD_OPT_LIST, "x", 1);
	nbd_opt_go(NBD_OPT_GO, "nope", 0, NULL);
	nbd_opt_go(NBD_OPT_GO, "", 0, NULL);
	nbd_session();
	nbd_seed("nbd-handshake", "unknown-bad-name-go", 0, 0);

	b_reset();
	b_be32(0);
	nbd_opt_go(NBD_OPT_GO, "", 0, NULL);
	nbd_seed("nbd-handshake", "not-fixed-newstyle", 0, 0);

	b_reset();
	b_be32(3);
	b_bytes("IHAVEOPX", 8);
	b_be32(NBD_OPT_GO);
	b_be32(0);
	nbd_seed("nbd-handshake", "bad-opt-magic", 0, 0);

	b_reset();
	b_be32(3);
	b_bytes("IHAVEOPT", 8);
	b_be32(NBD_OPT_GO);
	b_be32(6);
	b_be32(100); /* name longer than the option */
	b_be16(0);
	nbd_seed("nbd-handshake", "go-name-overruns", 0, 0);

	b_reset();
	b_be32(3);
	b_bytes("IHAVEOPT", 8);
	b_be32(NBD_OPT_INFO);
	b_be32(1u << 20); /* above the option body cap */
	nbd_seed("nbd-handshake", "opt-too-long", 0, 0);

	b_reset();
	b_be32(3);
	nbd_opt_go(NBD_OPT_GO, "", 0, NULL);
	nbd_session();
	nbd_seed("nbd-handshake", "go-shutdown", 0x80, 0);
	nbd_seed("nbd-handshake", "go-deferred-errors", 0x0c, 0);
	nbd_seed("nbd-handshake", "go-small-bufs-two-clients", 0x04, 3);

	b_reset();
	b_be32(3);
	{
		static char name[5001];

		memset(name, 'n', sizeof(name) - 1);
		nbd_opt_go(NBD_OPT_GO, name, 0, NULL);
	}
	nbd_seed("nbd-handshake", "go-name-over-4096", 0, 0);

	b_reset();
	b_be32(3);
	for (i = 0; i < 1100; i++)
		nbd_opt(99, NULL, 0);
	nbd_seed("nbd-handshake", "over-1024-options", 0, 0);
}

static void seeds_nbd_transmission(void)
{
	unsigned i;

	b_reset();
	nbd_session();
	nbd_seed("nbd-transmission", "session", 0, 0);
	nbd_seed("nbd-transmission", "session-deferred", 0x04, 0);
	nbd_seed("nbd-transmission", "session-errors", 0x0c, 0);
	nbd_seed("nbd-transmission", "session-export-name", 0x40, 0);
	nbd_seed("nbd-transmission", "session-shutdown", 0x80, 0);
	nbd_seed("nbd-transmission", "session-size-4096", 0x02, 0);
	nbd_seed("nbd-transmission", "session-size-0", 0x03, 0);
	nbd_seed("nbd-transmission", "session-small-bufs", 0x04, 1);
	nbd_seed("nbd-transmission", "session-two-clients", 0x04, 2);

	/* Above the 64 KiB input buffer: read straight into the request. */
	b_reset();
	nbd_write(0, 0, 72 << 10);
	nbd_req(0, NBD_CMD_READ, 2, 0, 72 << 10);
	nbd_req(0, NBD_CMD_DISC, 3, 0, 0);
	nbd_seed("nbd-transmission", "write-read-72k", 0, 0);
	nbd_seed("nbd-transmission", "write-read-72k-small-bufs", 0x04, 1);

	b_reset();
	nbd_write(NBD_CMD_FLAG_FUA, 0, 8192);
	nbd_req(NBD_CMD_FLAG_FUA, NBD_CMD_TRIM, 1, 4096, 8192);
	nbd_req(NBD_CMD_FLAG_NO_HOLE, NBD_CMD_WRITE_ZEROES, 2, 0, 4096);
	nbd_req(NBD_CMD_FLAG_FUA, NBD_CMD_WRITE_ZEROES, 3, 8192, 4096);
	nbd_req(0, NBD_CMD_READ, 4, 0, 16384);
	nbd_seed("nbd-transmission", "fua-trim-zeroes", 0x04, 0);

	b_reset();
	nbd_req(0, NBD_CMD_READ, 1, 1u << 20, 4096); /* past the end */
	nbd_req(0, NBD_CMD_READ, 2, 100, 4096); /* unaligned */
	nbd_req(0, NBD_CMD_READ, 3, 0, 0); /* empty */
	nbd_req(0, 9, 4, 0, 4096); /* unknown command */
	nbd_req(0x80, NBD_CMD_FLUSH, 5, 0, 0); /* unknown flag */
	nbd_req(0, NBD_CMD_TRIM, 6, (1u << 20) - 4096, 8192);
	nbd_req(0, NBD_CMD_READ, 7, UINT64_MAX - 4095, 8192); /* wraps */
	nbd_write(0, 4096, 4096);
	nbd_req(0, NBD_CMD_DISC, 8, 0, 0);
	nbd_seed("nbd-transmission", "bad-requests", 0, 0);

	b_reset();
	nbd_write(0, 12, 4096); /* refused, payload still read */
	nbd_write(0, (1u << 20), 4096);
	nbd_req(0, NBD_CMD_READ, 9, 0, 4096);
	nbd_seed("nbd-transmission", "refused-writes", 0, 0);

	b_reset();
	nbd_req(0, NBD_CMD_WRITE, 1, 0, (64u << 10) + 4096); /* above limit */
	b_fill(1, 64);
	nbd_seed("nbd-transmission", "write-over-payload", 0x10, 0);

	b_reset();
	for (i = 0; i < 8; i++)
		nbd_req(0, NBD_CMD_READ, i, (uint64_t)i * 32768, 32768);
	nbd_req(0, NBD_CMD_DISC, 99, 0, 0);
	nbd_seed("nbd-transmission", "reads-over-cap-reqs", 0x24, 0);
	nbd_seed("nbd-transmission", "reads-over-cap-bytes", 0x34, 0);

	b_reset();
	b_be32(0x25609514);
	b_fill(0, 24);
	nbd_seed("nbd-transmission", "bad-magic", 0, 0);

	b_reset();
	nbd_req(0, NBD_CMD_WRITE, 1, 0, 8192);
	b_fill(7, 5000); /* EOF inside the payload */
	nbd_seed("nbd-transmission", "eof-in-payload", 0x04, 0);

	/* A write starts the receive thread (from 4 KiB on with mode2 bit
	 * 2); the writes after it are taken from its ring in place when the
	 * backend says it copies. */
	b_reset();
	nbd_write(0, 0, 8192);
	for (i = 0; i < 6; i++)
		nbd_write(i % 2 ? NBD_CMD_FLAG_FUA : 0, (uint64_t)i * 65536,
			  (uint32_t)(4096u << (i % 3)));
	nbd_req(0, NBD_CMD_READ, 20, 0, 16384);
	nbd_write(0, 8192, 4096);
	nbd_req(0, NBD_CMD_FLUSH, 21, 0, 0);
	nbd_req(0, NBD_CMD_DISC, 22, 0, 0);
	nbd_seed("nbd-transmission", "ring-in-place", 0, 4);
	nbd_seed("nbd-transmission", "ring-in-place-deferred", 0x04, 4);
	nbd_seed("nbd-transmission", "ring-in-place-small-bufs", 0x04, 5);
	nbd_seed("nbd-transmission", "ring-no-copies", 0x04, 0);
}

/* ---- emulated drives ---- */

#define EMU_HDR_CRC_OFF 4092u
#define EMU_UNDO_IDX_OFF 120u
#define EMU_UNDO_SLOTS_OFF 152u

static char emu_dir[] = "/tmp/za-make-seeds.XXXXXX";
static char emu_path[300];

/* The drive file's metadata: header, zone table, undo log index. */
static size_t emu_meta(uint8_t *buf, size_t cap)
{
	int fd = open(emu_path, O_RDONLY | O_CLOEXEC);
	uint8_t hdr[4096];
	uint64_t end;
	ssize_t n;

	if (fd < 0 || pread(fd, hdr, sizeof(hdr), 0) != sizeof(hdr))
		die(emu_path);
	end = za_get_le64(hdr + EMU_UNDO_IDX_OFF) + 8 +
	      8 * za_get_le64(hdr + EMU_UNDO_SLOTS_OFF);
	if (end > cap) {
		fprintf(stderr, "make-seeds: drive metadata too large\n");
		exit(1);
	}
	n = pread(fd, buf, end, 0);
	if (n != (ssize_t)end)
		die(emu_path);
	close(fd);
	return (size_t)end;
}

static void emu_create(const struct za_emu_params *p)
{
	unlink(emu_path);
	if (za_emu_create(emu_path, p, true)) {
		fprintf(stderr, "make-seeds: za_emu_create failed\n");
		exit(1);
	}
}

/* Break one byte of the drive metadata in B; the harness fixes CRCs. */
static void emu_broken(const char *name, size_t len, unsigned off, uint8_t val,
		       uint8_t mode)
{
	uint8_t *m = malloc(len);

	if (!m)
		die("malloc");
	memcpy(m, B.b, len);
	m[off] = val;
	seed("emu", name, mode, m, len);
	free(m);
}

static void seeds_emu(void)
{
	struct za_emu_params p;
	struct za_io *io;
	struct za_dev *dev;
	static uint8_t data[64 << 10] __attribute__((aligned(4096)));
	size_t len;

	if (!mkdtemp(emu_dir))
		die("mkdtemp");
	snprintf(emu_path, sizeof(emu_path), "%s/drive", emu_dir);
	if (za_io_new(NULL, &io))
		exit(1);

	/* SMR: 8 zones of 64 KiB, one conventional, a 64 KiB cache. */
	za_emu_params_default(&p, ZA_DEV_MODEL_HM_SMR);
	p.size_bytes = 8 * (64 << 10);
	p.zone_size_bytes = 64 << 10;
	p.nr_conv_zones = 1;
	p.max_open_zones = 4;
	p.max_io_bytes = 64 << 10;
	p.max_append_bytes = 64 << 10;
	p.cache_bytes = 64 << 10;
	emu_create(&p);
	len = emu_meta(B.b, sizeof(B.b));
	seed("emu", "smr-blank", 0x04, B.b, len);
	seed("emu", "smr-blank-rdonly", 0x0c, B.b, len);
	seed("emu", "smr-truncated", 0x00, B.b, len);
	emu_broken("hdr-zone-size", len, 33, 0xf0, 0x05);
	emu_broken("hdr-nr-conv", len, 52, 8, 0x05);
	emu_broken("hdr-nr-zones", len, 48, 9, 0x05);
	emu_broken("hdr-model", len, 16, 3, 0x05);
	emu_broken("hdr-version", len, 8, 2, 0x05);
	emu_broken("hdr-gran", len, 57, 0x30, 0x05);
	emu_broken("hdr-cache", len, 80, 1, 0x05);
	emu_broken("hdr-layout", len, 136, 1, 0x05);
	emu_broken("hdr-open-above-active", len, 64, 1, 0x05);
	emu_broken("zone-bad-cond", len, 4096 + 32 * 2 + 16, 7, 0x07);
	emu_broken("zone-empty-with-wp", len, 4096 + 32 * 2 + 1, 0x10, 0x07);
	emu_broken("zone-wp-past-cap", len, 4096 + 32 * 2 + 2, 0x10, 0x07);
	emu_broken("zone-conv-cond", len, 4096 + 16, 1, 0x07);
	emu_broken("zone-bad-crc", len, 4096 + 32 * 3 + 20, 1, 0x05);
	emu_broken("undo-count-big", len, 4096 + 32 * 8, 17, 0x07);
	seed("emu", "short", 0x00, B.b, 100);

	/* Unflushed writes: undo entries, write pointers above flushed. */
	if (za_dev_open(io, emu_path, 0, &dev))
		exit(1);
	memset(data, 0x5a, sizeof(data));
	if (za_dev_io_sync(dev, ZA_DEV_OP_WRITE, 8192, data, 8192, NULL) ||
	    za_dev_io_sync(dev, ZA_DEV_OP_WRITE, 64 << 10, data, 16384, NULL) ||
	    za_dev_io_sync(dev, ZA_DEV_OP_FLUSH, 0, NULL, 0, NULL) ||
	    za_dev_io_sync(dev, ZA_DEV_OP_WRITE, (64 << 10) + 16384, data, 8192,
			   NULL) ||
	    za_dev_io_sync(dev, ZA_DEV_OP_WRITE, 0, data, 4096, NULL) ||
	    za_dev_io_sync(dev, ZA_DEV_OP_WRITE, 2 * (64 << 10), data, 64 << 10,
			   NULL)) {
		fprintf(stderr, "make-seeds: writing the emulated drive\n");
		exit(1);
	}
	za_dev_close(dev);
	len = emu_meta(B.b, sizeof(B.b));
	seed("emu", "smr-dirty-powercut", 0x14, B.b, len);
	seed("emu", "smr-dirty-rdonly", 0x0c, B.b, len);
	emu_broken("undo-offset-seq", len, 4096 + 32 * 8 + 8 + 2, 0x02, 0x07);

	/* ZNS: capacity below the zone size, open/active limits. */
	za_emu_params_default(&p, ZA_DEV_MODEL_ZNS);
	p.size_bytes = 6 * (128 << 10);
	p.zone_size_bytes = 128 << 10;
	p.zone_cap_bytes = 96 << 10;
	p.max_open_zones = 2;
	p.max_active_zones = 3;
	p.max_io_bytes = 64 << 10;
	p.max_append_bytes = 32 << 10;
	p.cache_bytes = 0;
	emu_create(&p);
	if (za_dev_open(io, emu_path, 0, &dev))
		exit(1);
	if (za_dev_io_sync(dev, ZA_DEV_OP_WRITE, 0, data, 8192, NULL) ||
	    za_dev_io_sync(dev, ZA_DEV_OP_FINISH, 128 << 10, NULL, 0, NULL)) {
		fprintf(stderr, "make-seeds: writing the ZNS drive\n");
		exit(1);
	}
	za_dev_close(dev);
	len = emu_meta(B.b, sizeof(B.b));
	seed("emu", "zns-open-full", 0x14, B.b, len);
	emu_broken("zns-full-wrong-wp", len, 4096 + 32 + 1, 0x10, 0x07);
	emu_broken("zns-closed-empty", len, 4096 + 32 * 2 + 16, 4, 0x07);

	unlink(emu_path);
	rmdir(emu_dir);
	za_io_free(io);
}

/* ---- record: the daemon's state record, STATE/arrays/NAME.conf ---- */

static void seed_text(const char *name, uint8_t mode, const char *text)
{
	seed("record", name, mode, text, strlen(text));
}

static void seeds_record(void)
{
	static char longtcp[512];

	seed_text("minimal", 1, "name t\nmember /dev/sdb\n");
	seed_text(
		"full", 1,
		"# zarrayd: assembled at start; written by zarrayd, which "
		"rewrites it\nname t\nuuid 0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0\n"
		"member /dev/sdb\nmember /dev/sdc\nmember /var/tmp/d2.img\n"
		"tcp 127.0.0.1:10809\nscrub running 17 2000000\n"
		"gc paused 7000000\nrebuild-rate 9000000\n");
	seed_text("settings-bad", 1,
		  "name t\nmember /dev/sdb\nscrub sideways 1 2\ngc running x\n"
		  "rebuild-rate 99999999999999999999\nfuture-line 1\n");
	seed_text("tcp-v6", 1, "name t\nmember /dev/sdb\ntcp [::1]:10809\n");
	/* A host longer than its buffer within a spec that fits: the
	 * parser copied it whole (found by this target). */
	snprintf(longtcp, sizeof(longtcp),
		 "name t\nmember /dev/sdb\ntcp [%0258d]:1\n", 0);
	seed_text("tcp-long-host", 1, longtcp);
	seed_text("wrong-name", 1, "name tank\nmember /dev/sdb\n");
	seed_text("relative-path", 1, "name t\nmember dev/sdb\n");
	seed_text("no-member", 1, "name t\n");
	seed_text("unterminated", 1, "name t\nmember /dev/sdb");
	seed_text("not-conf", 0, "name t\nmember /dev/sdb\n");
	seed_text("empty", 1, "");
}

int main(int argc, char **argv)
{
	if (argc > 2) {
		fprintf(stderr, "usage: make-seeds [CORPUS-DIR]\n");
		return 2;
	}
	if (argc == 2)
		top = argv[1];
	if (mkdir(top, 0755) < 0 && errno != EEXIST)
		die(top);
	seeds_stripe();
	seeds_checkpoint();
	seeds_etab();
	seeds_anchor();
	seeds_mpage();
	seeds_journal();
	seeds_sb();
	seeds_sb_assemble();
	seeds_rpc();
	seeds_rpc_server();
	seeds_nbd_handshake();
	seeds_nbd_transmission();
	seeds_emu();
	seeds_record();
	printf("make-seeds: %u seed files written under %s\n", nr_written, top);
	return 0;
}
