// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * dev-emu.c - a file-backed emulated zoned drive that obeys the rules a
 * real one enforces, so that the whole stack can be tested and benchmarked
 * on a machine without zoned drives.
 *
 * Big theory
 * ----------
 * The file holds a header, a zone table, an undo log and the data
 * (docs/format.md gives every byte):
 *
 *   0        4 KiB       zone table        undo index   data_off (1 MiB aligned)
 *   +--------+-----------------+-----------+------------+---------------+-----------+
 *   | header | 32 B per zone   | count +   |  (pad)     | zone 0 .. N-1 | undo data |
 *   |  CRC   | wp, flushed wp, | 8 B/slot  |            | (sparse)      | 4 KiB/slot|
 *   |        | cond, CRC       |           |            |               |           |
 *   +--------+-----------------+-----------+------------+---------------+-----------+
 *
 * The metadata (everything before data_off) is mmap()ed shared, so every
 * write pointer update survives the process being killed, exactly as a
 * real drive's write pointer survives its host process. A zone table
 * entry is written with one pwrite() rather than stores into the mapping:
 * a process killed between two stores would leave an entry that fails its
 * checksum, and a drive whose write pointer update is not atomic. Data
 * goes through pwrite()/pread() at data_off + the device offset.
 *
 * The volatile write cache is modelled, not simulated byte by byte: each
 * sequential zone keeps a "flushed" write pointer next to its write
 * pointer; FLUSH moves it up. A power cut (za_dev_power_cut(), or
 * `zarray emu powercut` on a file whose user was killed) moves every write
 * pointer back to its flushed value and punches the lost data out of the
 * file. Conventional zones can be overwritten, so before a cached write
 * overwrites a block that is not yet in the undo log, the old 4 KiB is
 * saved there; a power cut writes the saved blocks back. The cache has a
 * size: when the unflushed bytes would pass it, the drive writes back
 * (flushes) everything first, as a drive does when its cache fills. Zone
 * management commands (reset, finish) are durable when they complete.
 *
 * A preallocated drive (docs/format.md) writes its whole data region at
 * creation and never punches: on tmpfs in a VM a page's first touch costs
 * more than the write itself, which a log that always writes fresh zones
 * would pay on every byte. Its resets and power cuts only move write
 * pointers (nothing reads past one), and a finish writes zeros instead.
 * Its data goes through a shared mapping of the file rather than
 * pwrite()/pread(): the same page cache, without the per-page work.
 *
 * Requests are executed when submitted (the data is in the file before
 * submit returns; with the performance model on, a read copies its data
 * when it is served instead) and completed later on the loop: at once, or,
 * with the performance model on, when a drive that serves one request at a
 * time at the configured bandwidth, per-operation latency and seek cost
 * would have finished it; such a drive serves NORMAL requests before LOW ones
 * (background work: enum za_dev_prio), with aging (emu_serve()). Callers
 * still must not assume anything before completion.
 *
 * It does not emulate SCSI or NVMe commands, partial zone-size geometries,
 * or several namespaces; one file is one drive.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "byteorder.h"
#include "container.h"
#include "crc.h"
#include "dev-emu.h"
#include "log.h"

#define EMU_MAGIC 0x4d4559415252415aull /* "ZARRAYEM" on disk */
#define EMU_VERSION 1
#define EMU_HDR_BYTES 4096
#define EMU_ZENT_BYTES 32
#define EMU_BLOCK 4096
#define EMU_DATA_ALIGN (1ull << 20)
#define EMU_MIN_ZONE (64ull << 10)
#define EMU_MAX_ZONES (1u << 24)
/* Zone positions are kept in 32-bit block counts (struct emu_zone). */
#define EMU_MAX_ZONE_BYTES ((uint64_t)UINT32_MAX * EMU_BLOCK)
/* Header flags (docs/format.md). */
#define EMU_F_PREALLOC (1u << 0)
#define EMU_F_KNOWN EMU_F_PREALLOC

/* Header field offsets (docs/format.md, "Emulated drive file"). */
enum {
	H_MAGIC = 0,
	H_VERSION = 8,
	H_HDR_BYTES = 12,
	H_MODEL = 16,
	H_LBLOCK = 20,
	H_CAPACITY = 24,
	H_ZONE_SIZE = 32,
	H_ZONE_CAP = 40,
	H_NR_ZONES = 48,
	H_NR_CONV = 52,
	H_WRITE_GRAN = 56,
	H_MAX_OPEN = 60,
	H_MAX_ACTIVE = 64,
	H_MAX_IO = 68,
	H_MAX_APPEND = 72,
	H_FLAGS = 76,
	H_CACHE = 80,
	H_BW = 88,
	H_LAT = 96,
	H_SEEK = 104,
	H_ZT_OFF = 112,
	H_UNDO_IDX_OFF = 120,
	H_UNDO_DATA_OFF = 128,
	H_DATA_OFF = 136,
	H_FILE_BYTES = 144,
	H_UNDO_SLOTS = 152,
	H_CRC = EMU_HDR_BYTES - 4,
};

/* Zone table entry offsets. */
enum {
	Z_WP = 0,
	Z_FLUSHED = 8,
	Z_COND = 16,
	Z_CRC = 28,
};

/*
 * 16 bytes per zone: 256 emulated drives of 65,535 zones keep 16.8 M of
 * these, and the daemon's own figure per zone (S2) is measured beside
 * them. Positions in 4 KiB blocks (a zone is at most EMU_MAX_ZONE_BYTES).
 */
struct emu_zone {
	uint32_t wp_blk; /* blocks written */
	uint32_t flushed_blk; /* blocks that survive a power cut */
	uint32_t lru; /* last use, for implicit close (use_clock) */
	uint8_t cond; /* enum za_zone_cond */
	uint8_t dirty; /* in e->dirty: may hold unflushed blocks */
};

static inline uint64_t zwp_rel(const struct emu_zone *z)
{
	return (uint64_t)z->wp_blk * EMU_BLOCK;
}

static inline uint64_t zflushed_rel(const struct emu_zone *z)
{
	return (uint64_t)z->flushed_blk * EMU_BLOCK;
}

struct emu {
	struct za_dev dev;
	int fd;
	bool rdonly;
	bool prealloc; /* EMU_F_PREALLOC: never punch, zero on finish */
	uint8_t *data; /* preallocated: the data region, mapped */
	uint8_t *meta; /* mmap of [0, data_off) */
	size_t meta_bytes;
	uint64_t data_off, undo_idx_off, undo_data_off, zt_off;
	uint64_t undo_slots;
	uint64_t cache_bytes;
	struct emu_zone *zones;
	uint32_t nr_open, nr_active;
	uint32_t use_clock;
	uint64_t dirty_bytes; /* unflushed sequential bytes + undo blocks */
	/*
	 * The zones that may hold unflushed blocks (a zone is listed once,
	 * flagged in emu_zone.dirty): a flush writes back these, not every
	 * zone - 65,535 zones per drive made each FLUSH a walk of them all.
	 */
	uint32_t *dirty;
	uint32_t nr_dirty, cap_dirty;
	/* undo membership: open addressing on block offset + 1 (0 = empty) */
	uint64_t *undo_set;
	uint64_t undo_set_cap;
	/* performance model: one request in service, the others queued */
	uint64_t bw, lat_ns, seek_ns;
	uint64_t busy_until_ns;
	uint64_t last_end_bytes;
	struct za_dev_req *serving; /* completes at busy_until_ns */
	uint64_t low_served_ns; /* when a LOW request last started */
	struct za_dev_req *q_head[ZA_DEV_NR_PRIO], *q_tail[ZA_DEV_NR_PRIO];
	struct za_io_defer svc; /* pending exactly while serving is set */
};

static const struct za_dev_ops emu_ops;

static struct emu *to_emu(struct za_dev *dev)
{
	return (struct emu *)dev;
}

bool za_dev_is_emu(const struct za_dev *dev)
{
	return dev->ops == &emu_ops;
}

/* ---- zone table persistence ---- */

static uint8_t *zent_ptr(struct emu *e, uint32_t i)
{
	return e->meta + e->zt_off + (uint64_t)i * EMU_ZENT_BYTES;
}

static void zent_store(struct emu *e, uint32_t i)
{
	uint8_t p[EMU_ZENT_BYTES] = { 0 };
	struct emu_zone *z = &e->zones[i];
	off_t off = (off_t)(e->zt_off + (uint64_t)i * EMU_ZENT_BYTES);

	if (e->rdonly)
		return;
	za_put_le64(p + Z_WP, zwp_rel(z));
	za_put_le64(p + Z_FLUSHED, zflushed_rel(z));
	p[Z_COND] = (uint8_t)z->cond;
	za_put_le32(p + Z_CRC, za_crc32c(p, Z_CRC));
	/*
	 * All or nothing for a killed process: a write within one page (the
	 * entries are 32-byte aligned) is copied whole or not at all, and
	 * the mapping sees it at once (one page cache).
	 */
	if (pwrite(e->fd, p, sizeof(p), off) == (ssize_t)sizeof(p))
		return;
	za_log_err("%s: zone %u: writing its zone table entry failed: %s",
		   e->dev.path, i, strerror(errno));
	memcpy(zent_ptr(e, i), p, sizeof(p));
}

static uint64_t *undo_count_ptr(struct emu *e)
{
	return (uint64_t *)(e->meta + e->undo_idx_off);
}

static uint8_t *undo_slot_ptr(struct emu *e, uint64_t slot)
{
	return e->meta + e->undo_idx_off + 8 + slot * 8;
}

static uint64_t undo_count(struct emu *e)
{
	return za_get_le64(undo_count_ptr(e));
}

static void undo_set_count(struct emu *e, uint64_t n)
{
	za_put_le64(undo_count_ptr(e), n);
}

/* ---- helpers ---- */

static bool zone_is_conv(const struct emu *e, uint32_t i)
{
	return i < e->dev.caps.nr_conv_zones;
}

static uint64_t zone_cap(const struct emu *e, uint32_t i)
{
	return zone_is_conv(e, i) ? e->dev.caps.zone_size_bytes :
				    e->dev.caps.zone_cap_bytes;
}

static bool cond_is_open(enum za_zone_cond c)
{
	return c == ZA_ZONE_COND_IMP_OPEN || c == ZA_ZONE_COND_EXP_OPEN;
}

static bool cond_is_active(enum za_zone_cond c)
{
	return cond_is_open(c) || c == ZA_ZONE_COND_CLOSED;
}

static void zone_to_za(const struct emu *e, uint32_t i, struct za_zone *out)
{
	const struct emu_zone *z = &e->zones[i];
	uint64_t zsz = e->dev.caps.zone_size_bytes;

	out->start_bytes = (uint64_t)i * zsz;
	out->len_bytes = zsz;
	out->cap_bytes = zone_cap(e, i);
	out->type = zone_is_conv(e, i) ? ZA_ZONE_TYPE_CNV : ZA_ZONE_TYPE_SWR;
	out->cond = z->cond;
	if (zone_is_conv(e, i))
		out->wp_bytes = out->start_bytes;
	else if (z->cond == ZA_ZONE_COND_FULL)
		out->wp_bytes = out->start_bytes + zsz;
	else
		out->wp_bytes = out->start_bytes + zwp_rel(z);
}

static void set_cond(struct emu *e, uint32_t i, enum za_zone_cond c)
{
	struct emu_zone *z = &e->zones[i];

	if (cond_is_open(z->cond))
		e->nr_open--;
	if (cond_is_active(z->cond))
		e->nr_active--;
	z->cond = c;
	if (cond_is_open(c))
		e->nr_open++;
	if (cond_is_active(c))
		e->nr_active++;
}

static int write_zeroes(struct emu *e, uint64_t off, uint64_t len);

/*
 * Make [off, off + len) of the data read as zeros and, in a sparse file,
 * give its space back. A preallocated file keeps its blocks (that is its
 * point): callers that only need the bytes gone from sight - reset and
 * power cut, which move the write pointer below them, and reads past the
 * write pointer are refused - call drop() instead.
 */
static int punch(struct emu *e, uint64_t off, uint64_t len)
{
	if (!len)
		return 0;
	if (e->prealloc)
		return write_zeroes(e, off, len);
	if (fallocate(e->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		      (off_t)(e->data_off + off), (off_t)len) == 0)
		return 0;
	if (errno != EOPNOTSUPP) {
		za_log_err("%s: punching %llu bytes at %llu: %s", e->dev.path,
			   (unsigned long long)len, (unsigned long long)off,
			   strerror(errno));
		return -EIO;
	}
	/* No hole punching on this file system: write zeroes instead. */
	return write_zeroes(e, off, len);
}

static int write_zeroes(struct emu *e, uint64_t off, uint64_t len)
{
	static const uint8_t zero[64 * EMU_BLOCK];

	if (e->data) {
		memset(e->data + off, 0, len);
		return 0;
	}
	while (len) {
		size_t n = len < sizeof(zero) ? (size_t)len : sizeof(zero);

		if (pwrite(e->fd, zero, n, (off_t)(e->data_off + off)) !=
		    (ssize_t)n) {
			za_log_err("%s: zeroing %zu bytes at %llu: %s",
				   e->dev.path, n, (unsigned long long)off,
				   strerror(errno));
			return -EIO;
		}
		off += n;
		len -= n;
	}
	return 0;
}

/* Bytes that only need to stop being readable: see punch(). */
static int drop(struct emu *e, uint64_t off, uint64_t len)
{
	return e->prealloc ? 0 : punch(e, off, len);
}

/* ---- undo log (conventional zones under the volatile cache) ---- */

static uint64_t undo_hash(uint64_t v, uint64_t cap)
{
	v ^= v >> 33;
	v *= 0xff51afd7ed558ccdull;
	v ^= v >> 33;
	return v & (cap - 1);
}

static bool undo_set_has(struct emu *e, uint64_t blk)
{
	uint64_t i;

	if (!e->undo_set_cap)
		return false;
	for (i = undo_hash(blk, e->undo_set_cap); e->undo_set[i];
	     i = (i + 1) & (e->undo_set_cap - 1))
		if (e->undo_set[i] == blk + 1)
			return true;
	return false;
}

static void undo_set_add(struct emu *e, uint64_t blk)
{
	uint64_t i;

	for (i = undo_hash(blk, e->undo_set_cap); e->undo_set[i];
	     i = (i + 1) & (e->undo_set_cap - 1))
		;
	e->undo_set[i] = blk + 1;
}

static void undo_clear(struct emu *e)
{
	if (e->undo_set_cap)
		memset(e->undo_set, 0, e->undo_set_cap * sizeof(uint64_t));
	if (!e->rdonly && e->undo_slots)
		undo_set_count(e, 0);
}

/* ---- the cache ---- */

/* Zone @i may now hold unflushed blocks. 0 or -ENOMEM. */
static int dirty_add(struct emu *e, uint32_t i)
{
	if (e->zones[i].dirty)
		return 0;
	if (e->nr_dirty == e->cap_dirty) {
		uint32_t cap = e->cap_dirty ? e->cap_dirty * 2 : 64;
		uint32_t *n = realloc(e->dirty, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		e->dirty = n;
		e->cap_dirty = cap;
	}
	e->dirty[e->nr_dirty++] = i;
	e->zones[i].dirty = 1;
	return 0;
}

static void dirty_clear(struct emu *e)
{
	uint32_t j;

	for (j = 0; j < e->nr_dirty; j++)
		e->zones[e->dirty[j]].dirty = 0;
	e->nr_dirty = 0;
}

static void emu_writeback_all(struct emu *e)
{
	uint32_t j;

	for (j = 0; j < e->nr_dirty; j++) {
		uint32_t i = e->dirty[j];
		struct emu_zone *z = &e->zones[i];

		if (z->flushed_blk != z->wp_blk) {
			z->flushed_blk = z->wp_blk;
			zent_store(e, i);
		}
	}
	dirty_clear(e);
	undo_clear(e);
	e->dirty_bytes = 0;
}

/* Make room in the cache for @bytes more dirty bytes. */
static void emu_cache_reserve(struct emu *e, uint64_t bytes)
{
	if (e->dirty_bytes + bytes > e->cache_bytes)
		emu_writeback_all(e);
}

/* Save the old contents of conventional blocks [off, off+len). */
static int emu_undo_save(struct emu *e, uint64_t off, uint64_t len)
{
	uint8_t blk[EMU_BLOCK] __attribute__((aligned(64)));
	uint64_t n = undo_count(e);
	uint64_t b;

	for (b = off / EMU_BLOCK; b < (off + len) / EMU_BLOCK; b++) {
		ssize_t r;

		if (undo_set_has(e, b))
			continue;
		if (n == e->undo_slots) {
			/* Undo log full: the drive writes its cache back. */
			emu_writeback_all(e);
			n = 0;
		}
		r = pread(e->fd, blk, EMU_BLOCK,
			  (off_t)(e->data_off + b * EMU_BLOCK));
		if (r != EMU_BLOCK) {
			za_log_err("%s: reading block %llu for the undo log "
				   "failed",
				   e->dev.path, (unsigned long long)b);
			return -EIO;
		}
		if (pwrite(e->fd, blk, EMU_BLOCK,
			   (off_t)(e->undo_data_off + n * EMU_BLOCK)) !=
		    EMU_BLOCK) {
			za_log_err("%s: writing undo slot %llu failed",
				   e->dev.path, (unsigned long long)n);
			return -EIO;
		}
		/* Slot content first, then its index, then the count. */
		za_put_le64(undo_slot_ptr(e, n), b * EMU_BLOCK);
		undo_set_count(e, n + 1);
		undo_set_add(e, b);
		n++;
		e->dirty_bytes += EMU_BLOCK;
	}
	return 0;
}

/* ---- open/active zone accounting (as a ZNS or ZBC drive does it) ---- */

static int emu_make_open(struct emu *e, uint32_t i, bool explicit)
{
	const struct za_dev_caps *c = &e->dev.caps;
	struct emu_zone *z = &e->zones[i];

	if (cond_is_open(z->cond)) {
		if (explicit)
			set_cond(e, i, ZA_ZONE_COND_EXP_OPEN);
		return 0;
	}
	if (z->cond == ZA_ZONE_COND_EMPTY && c->max_active_zones &&
	    e->nr_active >= c->max_active_zones)
		return -EOVERFLOW;
	if (c->max_open_zones && e->nr_open >= c->max_open_zones) {
		/* Close the least recently used implicitly open zone. */
		uint32_t j, victim = UINT32_MAX;

		for (j = 0; j < c->nr_zones; j++)
			if (e->zones[j].cond == ZA_ZONE_COND_IMP_OPEN &&
			    (victim == UINT32_MAX ||
			     e->zones[j].lru < e->zones[victim].lru))
				victim = j;
		if (victim == UINT32_MAX)
			return -ETOOMANYREFS;
		set_cond(e, victim, ZA_ZONE_COND_CLOSED);
		zent_store(e, victim);
	}
	set_cond(e, i,
		 explicit ? ZA_ZONE_COND_EXP_OPEN : ZA_ZONE_COND_IMP_OPEN);
	return 0;
}

/*
 * Mark zone @z used now, for the implicit close's choice. The clock is 32
 * bits, as each zone keeps it: when it wraps (every 4 G writes), the
 * other open zones forget their order and count as used long ago.
 */
static void emu_touch(struct emu *e, struct emu_zone *z)
{
	uint32_t j;

	if (!++e->use_clock) {
		for (j = 0; j < e->dev.caps.nr_zones; j++)
			e->zones[j].lru = 0;
		e->use_clock = 1;
	}
	z->lru = e->use_clock;
}

/* ---- operations ---- */

static int emu_do_read(struct emu *e, struct za_dev_req *req)
{
	ssize_t r;

	if (e->data) {
		memcpy(req->buf, e->data + req->off_bytes, req->len_bytes);
		return 0;
	}
	r = pread(e->fd, req->buf, req->len_bytes,
		  (off_t)(e->data_off + req->off_bytes));

	if (r < 0) {
		za_log_err("%s: zone %u: read of %llu bytes at %llu failed: %s",
			   e->dev.path, req->zone_idx,
			   (unsigned long long)req->len_bytes,
			   (unsigned long long)req->off_bytes, strerror(errno));
		return -EIO;
	}
	if ((uint64_t)r < req->len_bytes) /* past the end of a sparse file */
		memset((uint8_t *)req->buf + r, 0,
		       req->len_bytes - (uint64_t)r);
	return 0;
}

/*
 * The copy of a write into a preallocated drive's mapping, with stores
 * that bypass the CPU's caches: a real drive takes the data by DMA, which
 * neither reads the destination first nor leaves it in the host's cache,
 * and nothing reads a drive's data back soon. A plain memcpy() into this
 * cold memory reads every destination line before writing it, which made
 * the copy cost 1.7 times the copy of the same bytes into a stripe buffer
 * (bench/results/notes.md, P1). Buffers and offsets are 4 KiB aligned (dev.h);
 * anything else takes memcpy().
 */
void za_emu_stream_to_drive(void *dst, const void *src, size_t len)
{
#ifdef __SSE2__
	uint8_t *d = dst;
	const uint8_t *s = src;
	size_t i;

	/* The source may be anywhere (a payload kept in a receive ring):
	 * only the stores need aligned lines. */
	if (((uintptr_t)dst | len) % 64) {
		memcpy(dst, src, len);
		return;
	}
	for (i = 0; i < len; i += 64) {
		__m128i x0 = _mm_loadu_si128((const __m128i *)(s + i));
		__m128i x1 = _mm_loadu_si128((const __m128i *)(s + i + 16));
		__m128i x2 = _mm_loadu_si128((const __m128i *)(s + i + 32));
		__m128i x3 = _mm_loadu_si128((const __m128i *)(s + i + 48));

		_mm_stream_si128((__m128i *)(d + i), x0);
		_mm_stream_si128((__m128i *)(d + i + 16), x1);
		_mm_stream_si128((__m128i *)(d + i + 32), x2);
		_mm_stream_si128((__m128i *)(d + i + 48), x3);
	}
#else
	memcpy(dst, src, len);
#endif
}

void za_emu_copy_to_drive(void *dst, const void *src, size_t len)
{
	za_emu_stream_to_drive(dst, src, len);
	/* Streaming stores are weakly ordered: drain them before the write
	 * is reported done (and read back, from any thread). */
	za_dev_stage_fence();
}

static int emu_do_write(struct emu *e, struct za_dev_req *req, uint64_t off)
{
	uint32_t i = req->zone_idx;
	struct emu_zone *z = &e->zones[i];
	uint64_t zstart = (uint64_t)i * e->dev.caps.zone_size_bytes;
	ssize_t w;
	int ret;

	if (e->rdonly)
		return -EROFS;
	if (zone_is_conv(e, i)) {
		if (e->cache_bytes) {
			emu_cache_reserve(e, req->len_bytes);
			ret = emu_undo_save(e, off, req->len_bytes);
			if (ret < 0)
				return ret;
		}
	} else {
		ret = emu_make_open(e, i, false);
		if (ret < 0)
			return ret;
		if (e->cache_bytes)
			emu_cache_reserve(e, req->len_bytes);
	}
	if (e->data && req->staged && !zone_is_conv(e, i)) {
		w = (ssize_t)req->len_bytes; /* emu_stage() put it there */
	} else if (e->data) {
		za_emu_copy_to_drive(e->data + off, req->buf, req->len_bytes);
		w = (ssize_t)req->len_bytes;
	} else {
		w = pwrite(e->fd, req->buf, req->len_bytes,
			   (off_t)(e->data_off + off));
	}
	if (w != (ssize_t)req->len_bytes) {
		za_log_err("%s: zone %u: write of %llu bytes at %llu failed: "
			   "%s",
			   e->dev.path, i, (unsigned long long)req->len_bytes,
			   (unsigned long long)off,
			   w < 0 ? strerror(errno) : "short write");
		return -EIO;
	}
	req->landed_bytes = off;
	if (zone_is_conv(e, i))
		return 0;
	z->wp_blk = (uint32_t)((off + req->len_bytes - zstart) / EMU_BLOCK);
	emu_touch(e, z);
	/* Without room in the list, written through: durable at once. */
	if (e->cache_bytes && !dirty_add(e, i))
		e->dirty_bytes += req->len_bytes;
	else
		z->flushed_blk = z->wp_blk;
	if (zwp_rel(z) == zone_cap(e, i))
		set_cond(e, i, ZA_ZONE_COND_FULL);
	zent_store(e, i);
	return 0;
}

static int emu_do_zone_op(struct emu *e, struct za_dev_req *req)
{
	uint32_t i = req->zone_idx;
	struct emu_zone *z = &e->zones[i];
	uint64_t zstart = (uint64_t)i * e->dev.caps.zone_size_bytes;
	int ret = 0;

	if (e->rdonly)
		return -EROFS;
	switch (req->op) {
	case ZA_DEV_OP_RESET:
		ret = drop(e, zstart, e->dev.caps.zone_size_bytes);
		if (ret < 0)
			return ret;
		if (e->cache_bytes)
			e->dirty_bytes -= zwp_rel(z) - zflushed_rel(z);
		z->wp_blk = z->flushed_blk = 0;
		set_cond(e, i, ZA_ZONE_COND_EMPTY);
		break;
	case ZA_DEV_OP_FINISH:
		if (z->cond == ZA_ZONE_COND_FULL)
			break;
		/*
		 * Whatever the file holds past the write pointer (a write
		 * that reached the file but not the write pointer before a
		 * SIGKILL) must not become readable: a drive never returns
		 * data it did not acknowledge.
		 */
		ret = punch(e, zstart + zwp_rel(z),
			    e->dev.caps.zone_size_bytes - zwp_rel(z));
		if (ret < 0)
			return ret;
		if (e->cache_bytes)
			e->dirty_bytes -= zwp_rel(z) - zflushed_rel(z);
		/* Finishing makes the zone durable (see the theory above). */
		z->wp_blk = z->flushed_blk =
			(uint32_t)(zone_cap(e, i) / EMU_BLOCK);
		set_cond(e, i, ZA_ZONE_COND_FULL);
		break;
	case ZA_DEV_OP_OPEN_ZONE:
		if (z->cond == ZA_ZONE_COND_FULL)
			break;
		ret = emu_make_open(e, i, true);
		break;
	case ZA_DEV_OP_CLOSE_ZONE:
		if (!cond_is_open(z->cond))
			break;
		set_cond(e, i,
			 zwp_rel(z) ? ZA_ZONE_COND_CLOSED : ZA_ZONE_COND_EMPTY);
		break;
	default:
		assert(0);
	}
	zent_store(e, i);
	return ret;
}

static uint64_t emu_service_ns(struct emu *e, const struct za_dev_req *req)
{
	uint64_t ns = e->lat_ns;
	bool data = req->op == ZA_DEV_OP_READ || req->op == ZA_DEV_OP_WRITE ||
		    req->op == ZA_DEV_OP_APPEND;

	if (data && e->bw)
		ns += (uint64_t)((double)req->len_bytes * 1e9 / (double)e->bw);
	if (data && e->seek_ns) {
		uint64_t pos = req->landed_bytes, last = e->last_end_bytes;
		uint64_t dist = pos > last ? pos - last : last - pos;

		if (dist)
			ns += (uint64_t)((double)e->seek_ns *
					 sqrt((double)dist /
					      (double)e->dev.caps
						      .capacity_bytes));
		e->last_end_bytes = pos + req->len_bytes;
	}
	return ns;
}

/*
 * The queue of the performance model. A write or zone operation is
 * executed when it is submitted (the data is in the file at once), a read
 * copies its data out when it is served (so that submitting a queue of
 * reads costs the loop nothing up front), and every request completes
 * only when the modelled drive has served it: one request at a time,
 * NORMAL ones first, LOW ones (rebuild, drain, scrub) when no NORMAL one waits. So
 * that background work is slowed by user I/O but never starved by it,
 * one LOW request goes ahead when the oldest has waited
 * EMU_PRIO_AGING_NS and none has started for as long: a trickle, not a
 * flood (the kernel's mq-deadline ages its low-priority queue too, after
 * 10 s). Service is not preempted: a NORMAL request arriving while a LOW
 * one is served waits for the end of that one only, which is why
 * background work submits small requests. With NORMAL requests alone
 * this is the first-come first-served drive the model always was.
 */
#define EMU_PRIO_AGING_NS (500ull * 1000 * 1000)

static void emu_serve(struct emu *e);

static void emu_svc_done(struct za_io_defer *d)
{
	struct emu *e = container_of(d, struct emu, svc);
	struct za_dev_req *req = e->serving;

	e->serving = NULL;
	if (req->op == ZA_DEV_OP_READ && !req->result)
		req->result = emu_do_read(e, req);
	/* The next one starts before this one's done() can submit more. */
	emu_serve(e);
	za_dev_complete(req, req->result);
}

static void emu_serve(struct emu *e)
{
	struct za_dev_req *lo = e->q_head[ZA_DEV_PRIO_LOW], *req;
	uint64_t now = za_io_now_ns(), start;
	unsigned q = ZA_DEV_PRIO_NORMAL;

	if (e->serving)
		return;
	if (!e->q_head[q] || (lo && now - lo->submit_ns >= EMU_PRIO_AGING_NS &&
			      now - e->low_served_ns >= EMU_PRIO_AGING_NS))
		q = ZA_DEV_PRIO_LOW;
	req = e->q_head[q];
	if (!req)
		return;
	e->q_head[q] = req->next;
	if (!req->next)
		e->q_tail[q] = NULL;
	req->next = NULL;
	/* Back to back while busy: no drift from the loop's lateness. */
	start = e->busy_until_ns > req->submit_ns ? e->busy_until_ns :
						    req->submit_ns;
	e->busy_until_ns = start + emu_service_ns(e, req);
	if (q == ZA_DEV_PRIO_LOW)
		e->low_served_ns = now;
	e->serving = req;
	e->svc.fn = emu_svc_done;
	za_io_defer_at(e->dev.io, &e->svc, e->busy_until_ns);
}

static void emu_enqueue(struct emu *e, struct za_dev_req *req, int result)
{
	unsigned q = req->prio == ZA_DEV_PRIO_LOW ? ZA_DEV_PRIO_LOW :
						    ZA_DEV_PRIO_NORMAL;

	req->result = result; /* what it will complete with */
	req->submit_ns = za_io_now_ns();
	req->next = NULL;
	if (e->q_tail[q])
		e->q_tail[q]->next = req;
	else
		e->q_head[q] = req;
	e->q_tail[q] = req;
	emu_serve(e);
}

static void emu_submit(struct za_dev *dev, struct za_dev_req *req)
{
	struct emu *e = to_emu(dev);
	bool queued = e->bw || e->lat_ns || e->seek_ns || e->serving;
	struct za_zone zone;
	int ret = 0;

	if (req->op != ZA_DEV_OP_FLUSH) {
		zone_to_za(e, req->zone_idx, &zone);
		ret = za_dev_check_zone(dev, &zone, req);
		if (ret < 0)
			goto out;
	}
	switch (req->op) {
	case ZA_DEV_OP_READ:
		/* Queued in the model: copied out when served (emu_svc_done),
		 * so that a burst of submissions costs no copies up front. */
		if (!queued)
			ret = emu_do_read(e, req);
		req->landed_bytes = req->off_bytes;
		break;
	case ZA_DEV_OP_WRITE:
		ret = emu_do_write(e, req, req->off_bytes);
		break;
	case ZA_DEV_OP_APPEND:
		ret = emu_do_write(e, req, zone.wp_bytes);
		break;
	case ZA_DEV_OP_RESET:
	case ZA_DEV_OP_FINISH:
	case ZA_DEV_OP_OPEN_ZONE:
	case ZA_DEV_OP_CLOSE_ZONE:
		ret = emu_do_zone_op(e, req);
		break;
	case ZA_DEV_OP_FLUSH:
		if (!e->rdonly)
			emu_writeback_all(e);
		break;
	}
out:
	if (queued)
		emu_enqueue(e, req, ret);
	else
		za_dev_complete(req, ret);
}

static int emu_report_zones(struct za_dev *dev, uint64_t from_bytes,
			    struct za_zone *zones, unsigned *nr)
{
	struct emu *e = to_emu(dev);
	uint32_t i = za_dev_zone_idx(dev, from_bytes);
	unsigned n = 0;

	while (n < *nr && i < dev->caps.nr_zones)
		zone_to_za(e, i++, &zones[n++]);
	*nr = n;
	return 0;
}

static int emu_power_cut(struct za_dev *dev)
{
	struct emu *e = to_emu(dev);
	uint8_t blk[EMU_BLOCK] __attribute__((aligned(64)));
	uint64_t n, s;
	uint32_t i;
	int ret = 0;

	if (e->rdonly)
		return -EROFS;
	/* Conventional zones: put back what the cache had overwritten. */
	n = e->undo_slots ? undo_count(e) : 0;
	for (s = n; s-- > 0;) {
		uint64_t off = za_get_le64(undo_slot_ptr(e, s));

		if (pread(e->fd, blk, EMU_BLOCK,
			  (off_t)(e->undo_data_off + s * EMU_BLOCK)) !=
			    EMU_BLOCK ||
		    pwrite(e->fd, blk, EMU_BLOCK, (off_t)(e->data_off + off)) !=
			    EMU_BLOCK) {
			za_log_err("%s: power cut: restoring undo slot %llu "
				   "failed",
				   dev->path, (unsigned long long)s);
			ret = -EIO;
		}
	}
	undo_clear(e);
	/* Sequential zones: back to the flushed write pointer, closed. */
	for (i = dev->caps.nr_conv_zones; i < dev->caps.nr_zones; i++) {
		struct emu_zone *z = &e->zones[i];
		uint64_t zstart = (uint64_t)i * dev->caps.zone_size_bytes;

		if (zwp_rel(z) != zflushed_rel(z) ||
		    z->cond != ZA_ZONE_COND_FULL) {
			/* Everything past the flushed write pointer goes,
			 * including bytes a killed process left past the
			 * write pointer itself. */
			int r = drop(e, zstart + zflushed_rel(z),
				     dev->caps.zone_size_bytes -
					     zflushed_rel(z));

			if (r < 0)
				ret = r;
			z->wp_blk = z->flushed_blk;
			if (z->cond == ZA_ZONE_COND_FULL)
				set_cond(e, i, ZA_ZONE_COND_CLOSED);
		}
		if (cond_is_open(z->cond) || z->cond == ZA_ZONE_COND_CLOSED)
			set_cond(e, i,
				 zwp_rel(z) ? ZA_ZONE_COND_CLOSED :
					      ZA_ZONE_COND_EMPTY);
		zent_store(e, i);
	}
	dirty_clear(e);
	e->dirty_bytes = 0;
	if (!e->serving)
		e->busy_until_ns = 0;
	return ret;
}

static void emu_close(struct za_dev *dev)
{
	struct emu *e = to_emu(dev);

	if (e->meta)
		munmap(e->meta, e->meta_bytes);
	if (e->data)
		munmap(e->data, e->dev.caps.capacity_bytes);
	if (e->fd >= 0)
		close(e->fd);
	free(e->zones);
	free(e->dirty);
	free(e->undo_set);
	free(e);
}

int za_emu_set_perf(struct za_dev *dev, uint64_t bw_bytes_per_s,
		    uint64_t lat_ns, uint64_t seek_ns)
{
	struct emu *e;

	if (!za_dev_is_emu(dev))
		return -EOPNOTSUPP;
	e = to_emu(dev);
	e->bw = bw_bytes_per_s;
	e->lat_ns = lat_ns;
	e->seek_ns = seek_ns;
	return 0;
}

/*
 * Any thread: a sequential-zone write's data, copied into the mapping of
 * a preallocated drive ahead of its WRITE (za_dev_ops.stage). The bytes
 * sit past the write pointer, where no read, power cut or report can see
 * them, until the WRITE with req->staged moves the pointer without
 * copying. The engine stages each row of a stripe on its worker right
 * after the row's parity and CRCs, while the row is in that core's cache,
 * rather than have the loop copy the whole slot from memory later
 * (bench/results/notes.md, P1). Drives without a mapping, read-only ones and
 * conventional zones (overwritable: staging would change live data) say
 * -EOPNOTSUPP. Touches only e->data and fields fixed at open.
 */
static int emu_stage(struct za_dev *dev, uint64_t off_bytes, const void *buf,
		     uint64_t len_bytes)
{
	struct emu *e = to_emu(dev);

	if (!e->data || e->rdonly ||
	    zone_is_conv(e, za_dev_zone_idx(dev, off_bytes)))
		return -EOPNOTSUPP;
	/* The caller fences once for all it staged (dev.h). */
	za_emu_stream_to_drive(e->data + off_bytes, buf, len_bytes);
	return 0;
}

static const struct za_dev_ops emu_ops = {
	.name = "emu",
	.report_zones = emu_report_zones,
	.submit = emu_submit,
	.stage = emu_stage,
	.power_cut = emu_power_cut,
	.close = emu_close,
};

/* ---- layout, creation and validation ---- */

struct emu_layout {
	uint64_t zt_off, undo_idx_off, undo_slots, data_off, undo_data_off,
		file_bytes;
};

static int emu_layout(uint64_t capacity, uint32_t nr_zones, uint64_t cache,
		      struct emu_layout *l)
{
	uint64_t idx_end;

	l->zt_off = EMU_HDR_BYTES;
	l->undo_idx_off = l->zt_off + (uint64_t)nr_zones * EMU_ZENT_BYTES;
	l->undo_slots = cache / EMU_BLOCK;
	idx_end = l->undo_idx_off + 8 + l->undo_slots * 8;
	l->data_off = (idx_end + EMU_DATA_ALIGN - 1) & ~(EMU_DATA_ALIGN - 1);
	if (__builtin_add_overflow(l->data_off, capacity, &l->undo_data_off) ||
	    __builtin_add_overflow(l->undo_data_off, l->undo_slots * EMU_BLOCK,
				   &l->file_bytes))
		return -EINVAL;
	return 0;
}

/*
 * Write zeros over the whole data region, so that every block of it is
 * allocated and touched now rather than on its first write. On tmpfs in
 * a virtual machine a page's first touch costs several times a copy
 * (docs/design.md 4.4); a real drive's media is there all along.
 */
static int prealloc_data(int fd, const char *path, const struct emu_layout *l)
{
	size_t chunk = 1u << 20;
	uint64_t off;
	void *zero = calloc(1, chunk);

	if (!zero)
		return -ENOMEM;
	for (off = 0; off < l->undo_data_off - l->data_off; off += chunk) {
		if (pwrite(fd, zero, chunk, (off_t)(l->data_off + off)) !=
		    (ssize_t)chunk) {
			int ret = errno ? -errno : -EIO;

			za_log_err("%s: preallocating at %llu: %s", path,
				   (unsigned long long)off, strerror(-ret));
			free(zero);
			return ret;
		}
	}
	free(zero);
	return 0;
}

void za_emu_params_default(struct za_emu_params *p, enum za_dev_model model)
{
	memset(p, 0, sizeof(*p));
	p->model = model;
	p->size_bytes = 16ull << 30;
	p->nr_conv_zones = -1;
	p->write_gran_bytes = EMU_BLOCK;
	p->max_io_bytes = 1u << 20;
	p->cache_bytes = 32ull << 20;
	if (model == ZA_DEV_MODEL_ZNS) {
		p->zone_size_bytes = 64ull << 20;
		p->zone_cap_bytes = 60ull << 20;
		p->max_open_zones = 14;
		p->max_active_zones = 14;
		p->max_append_bytes = 512u << 10;
	} else {
		p->zone_size_bytes = 256ull << 20;
		p->zone_cap_bytes = 0;
		p->max_open_zones = 128;
		p->max_active_zones = 0;
		p->max_append_bytes = 1u << 20;
	}
}

#define EMU_BAD(...)                     \
	do {                             \
		za_log_err(__VA_ARGS__); \
		return -EINVAL;          \
	} while (0)

static int emu_params_check(const struct za_emu_params *p, uint32_t *nr_zones,
			    uint32_t *nr_conv, uint64_t *zcap)
{
	uint64_t nz;

	if (p->model != ZA_DEV_MODEL_HM_SMR && p->model != ZA_DEV_MODEL_ZNS)
		EMU_BAD("unknown drive model %d", (int)p->model);
	if (p->zone_size_bytes < EMU_MIN_ZONE ||
	    p->zone_size_bytes > EMU_MAX_ZONE_BYTES ||
	    p->zone_size_bytes % EMU_BLOCK)
		EMU_BAD("zone size %llu: must be a multiple of 4 KiB, at "
			"least 64 KiB and below 16 TiB",
			(unsigned long long)p->zone_size_bytes);
	*zcap = p->zone_cap_bytes ? p->zone_cap_bytes : p->zone_size_bytes;
	if (*zcap > p->zone_size_bytes || *zcap % EMU_BLOCK)
		EMU_BAD("zone capacity %llu: must be a multiple of 4 KiB and "
			"at most the zone size",
			(unsigned long long)*zcap);
	if (!p->write_gran_bytes || p->write_gran_bytes % EMU_BLOCK ||
	    *zcap % p->write_gran_bytes)
		EMU_BAD("write granularity %u: must be a multiple of 4 KiB "
			"dividing the zone capacity",
			p->write_gran_bytes);
	if (p->max_io_bytes < p->write_gran_bytes ||
	    p->max_io_bytes % EMU_BLOCK ||
	    p->max_append_bytes < p->write_gran_bytes ||
	    p->max_append_bytes % EMU_BLOCK)
		EMU_BAD("maximum I/O sizes must be multiples of 4 KiB, at "
			"least the write granularity");
	nz = p->size_bytes / p->zone_size_bytes;
	if (nz < 1 || nz > EMU_MAX_ZONES)
		EMU_BAD("size %llu holds %llu zones of %llu bytes: need 1 to "
			"%u",
			(unsigned long long)p->size_bytes,
			(unsigned long long)nz,
			(unsigned long long)p->zone_size_bytes, EMU_MAX_ZONES);
	*nr_zones = (uint32_t)nz;
	if (p->nr_conv_zones < 0)
		*nr_conv = p->model == ZA_DEV_MODEL_ZNS ?
				   0 :
				   (*nr_zones >= 100 ? *nr_zones / 100 : 1);
	else
		*nr_conv = (uint32_t)p->nr_conv_zones;
	if (*nr_conv >= *nr_zones)
		EMU_BAD("%u conventional zones leave no sequential zone among "
			"%u",
			*nr_conv, *nr_zones);
	if (p->max_active_zones && p->max_open_zones > p->max_active_zones)
		EMU_BAD("max open zones (%u) above max active zones (%u)",
			p->max_open_zones, p->max_active_zones);
	if (p->cache_bytes % EMU_BLOCK || p->cache_bytes > (64ull << 30))
		EMU_BAD("cache size %llu: a multiple of 4 KiB up to 64 GiB",
			(unsigned long long)p->cache_bytes);
	return 0;
}

int za_emu_create(const char *path, const struct za_emu_params *p, bool force)
{
	uint8_t *hdr = NULL, zent[EMU_ZENT_BYTES];
	uint32_t nr_zones, nr_conv, i;
	struct emu_layout l;
	uint64_t zcap;
	int fd, ret;

	ret = emu_params_check(p, &nr_zones, &nr_conv, &zcap);
	if (ret < 0)
		return ret;
	ret = emu_layout((uint64_t)nr_zones * p->zone_size_bytes, nr_zones,
			 p->cache_bytes, &l);
	if (ret < 0)
		EMU_BAD("%s: drive too large", path);

	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | (force ? 0 : O_EXCL),
		  0644);
	if (fd < 0) {
		ret = -errno;
		za_log_err("%s: %s", path,
			   errno == EEXIST ? "exists (use --force to replace "
					     "it)" :
					     strerror(errno));
		return ret;
	}
	if (ftruncate(fd, 0) < 0 || ftruncate(fd, (off_t)l.file_bytes) < 0) {
		ret = -errno;
		za_log_err("%s: sizing to %llu bytes: %s", path,
			   (unsigned long long)l.file_bytes, strerror(errno));
		goto err_close;
	}
	hdr = calloc(1, EMU_HDR_BYTES);
	if (!hdr) {
		ret = -ENOMEM;
		goto err_close;
	}
	za_put_le64(hdr + H_MAGIC, EMU_MAGIC);
	za_put_le32(hdr + H_VERSION, EMU_VERSION);
	za_put_le32(hdr + H_HDR_BYTES, EMU_HDR_BYTES);
	za_put_le32(hdr + H_MODEL, (uint32_t)p->model);
	za_put_le32(hdr + H_LBLOCK, EMU_BLOCK);
	za_put_le64(hdr + H_CAPACITY, (uint64_t)nr_zones * p->zone_size_bytes);
	za_put_le64(hdr + H_ZONE_SIZE, p->zone_size_bytes);
	za_put_le64(hdr + H_ZONE_CAP, zcap);
	za_put_le32(hdr + H_NR_ZONES, nr_zones);
	za_put_le32(hdr + H_NR_CONV, nr_conv);
	za_put_le32(hdr + H_WRITE_GRAN, p->write_gran_bytes);
	za_put_le32(hdr + H_MAX_OPEN, p->max_open_zones);
	za_put_le32(hdr + H_MAX_ACTIVE, p->max_active_zones);
	za_put_le32(hdr + H_MAX_IO, p->max_io_bytes);
	za_put_le32(hdr + H_MAX_APPEND, p->max_append_bytes);
	za_put_le32(hdr + H_FLAGS, p->prealloc ? EMU_F_PREALLOC : 0);
	za_put_le64(hdr + H_CACHE, p->cache_bytes);
	za_put_le64(hdr + H_BW, p->bw_bytes_per_s);
	za_put_le64(hdr + H_LAT, p->lat_ns);
	za_put_le64(hdr + H_SEEK, p->seek_ns);
	za_put_le64(hdr + H_ZT_OFF, l.zt_off);
	za_put_le64(hdr + H_UNDO_IDX_OFF, l.undo_idx_off);
	za_put_le64(hdr + H_UNDO_DATA_OFF, l.undo_data_off);
	za_put_le64(hdr + H_DATA_OFF, l.data_off);
	za_put_le64(hdr + H_FILE_BYTES, l.file_bytes);
	za_put_le64(hdr + H_UNDO_SLOTS, l.undo_slots);
	za_put_le32(hdr + H_CRC, za_crc32c(hdr, H_CRC));
	if (pwrite(fd, hdr, EMU_HDR_BYTES, 0) != EMU_HDR_BYTES)
		goto err_io;
	for (i = 0; i < nr_zones; i++) {
		memset(zent, 0, sizeof(zent));
		zent[Z_COND] = i < nr_conv ? ZA_ZONE_COND_NOT_WP :
					     ZA_ZONE_COND_EMPTY;
		za_put_le32(zent + Z_CRC, za_crc32c(zent, Z_CRC));
		if (pwrite(fd, zent, sizeof(zent),
			   (off_t)(l.zt_off + (uint64_t)i * EMU_ZENT_BYTES)) !=
		    (ssize_t)sizeof(zent))
			goto err_io;
	}
	/* The undo count (0) is already zero: the file is sparse. */
	if (p->prealloc) {
		ret = prealloc_data(fd, path, &l);
		if (ret < 0)
			goto err_free;
	}
	if (fsync(fd) < 0)
		goto err_io;
	free(hdr);
	close(fd);
	return 0;

err_io:
	ret = -EIO;
	za_log_err("%s: writing the drive's metadata: %s", path,
		   strerror(errno));
err_free:
	free(hdr);
err_close:
	close(fd);
	unlink(path);
	return ret;
}

bool za_dev_emu_probe(const char *path)
{
	uint8_t buf[8];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	bool ok;

	if (fd < 0)
		return false;
	ok = pread(fd, buf, sizeof(buf), 0) == (ssize_t)sizeof(buf) &&
	     za_get_le64(buf) == EMU_MAGIC;
	close(fd);
	return ok;
}

#define EMU_CORRUPT(...)                 \
	do {                             \
		za_log_err(__VA_ARGS__); \
		ret = -EUCLEAN;          \
		goto err;                \
	} while (0)

/*
 * Parse and check the header into @e->dev.caps and the layout fields.
 * Every number is range-checked before it sizes anything.
 */
static int emu_parse_header(struct emu *e, const uint8_t *h, uint64_t fsize)
{
	struct za_dev_caps *c = &e->dev.caps;
	const char *path = e->dev.path;
	struct emu_layout l;
	uint32_t version, model, lblock, flags;
	uint64_t zcap, cap;
	int ret;

	if (za_get_le64(h + H_MAGIC) != EMU_MAGIC)
		EMU_CORRUPT("%s: not an emulated drive (bad magic)", path);
	if (za_get_le32(h + H_CRC) != za_crc32c(h, H_CRC))
		EMU_CORRUPT("%s: emulated drive header checksum mismatch",
			    path);
	version = za_get_le32(h + H_VERSION);
	if (version != EMU_VERSION) {
		za_log_err("%s: emulated drive format version %u, this "
			   "zarray reads version %u",
			   path, version, EMU_VERSION);
		return -EPROTONOSUPPORT;
	}
	model = za_get_le32(h + H_MODEL);
	lblock = za_get_le32(h + H_LBLOCK);
	if (za_get_le32(h + H_HDR_BYTES) != EMU_HDR_BYTES ||
	    (model != ZA_DEV_MODEL_HM_SMR && model != ZA_DEV_MODEL_ZNS) ||
	    lblock != EMU_BLOCK)
		EMU_CORRUPT("%s: header: bad size, model or block size", path);
	c->model = (enum za_dev_model)model;
	c->lblock_bytes = lblock;
	c->capacity_bytes = cap = za_get_le64(h + H_CAPACITY);
	c->zone_size_bytes = za_get_le64(h + H_ZONE_SIZE);
	zcap = za_get_le64(h + H_ZONE_CAP);
	c->nr_zones = za_get_le32(h + H_NR_ZONES);
	c->nr_conv_zones = za_get_le32(h + H_NR_CONV);
	c->write_gran_bytes = za_get_le32(h + H_WRITE_GRAN);
	c->max_open_zones = za_get_le32(h + H_MAX_OPEN);
	c->max_active_zones = za_get_le32(h + H_MAX_ACTIVE);
	c->max_io_bytes = za_get_le32(h + H_MAX_IO);
	c->max_append_bytes = za_get_le32(h + H_MAX_APPEND);
	if (c->zone_size_bytes < EMU_MIN_ZONE ||
	    c->zone_size_bytes > EMU_MAX_ZONE_BYTES ||
	    c->zone_size_bytes % EMU_BLOCK || !zcap ||
	    zcap > c->zone_size_bytes || zcap % EMU_BLOCK)
		EMU_CORRUPT("%s: header: bad zone size or capacity", path);
	if (!c->nr_zones || c->nr_zones > EMU_MAX_ZONES ||
	    c->nr_conv_zones >= c->nr_zones ||
	    cap / c->zone_size_bytes != c->nr_zones || cap % c->zone_size_bytes)
		EMU_CORRUPT("%s: header: capacity does not match the zones",
			    path);
	if (!c->write_gran_bytes || c->write_gran_bytes % EMU_BLOCK ||
	    zcap % c->write_gran_bytes ||
	    c->max_io_bytes < c->write_gran_bytes ||
	    c->max_io_bytes % EMU_BLOCK ||
	    c->max_append_bytes < c->write_gran_bytes ||
	    c->max_append_bytes % EMU_BLOCK)
		EMU_CORRUPT("%s: header: bad write granularity or I/O sizes",
			    path);
	c->zone_cap_bytes = zcap;
	e->cache_bytes = za_get_le64(h + H_CACHE);
	if (e->cache_bytes % EMU_BLOCK || e->cache_bytes > (64ull << 30))
		EMU_CORRUPT("%s: header: bad cache size", path);
	ret = emu_layout(cap, c->nr_zones, e->cache_bytes, &l);
	if (ret < 0 || za_get_le64(h + H_ZT_OFF) != l.zt_off ||
	    za_get_le64(h + H_UNDO_IDX_OFF) != l.undo_idx_off ||
	    za_get_le64(h + H_UNDO_SLOTS) != l.undo_slots ||
	    za_get_le64(h + H_DATA_OFF) != l.data_off ||
	    za_get_le64(h + H_UNDO_DATA_OFF) != l.undo_data_off ||
	    za_get_le64(h + H_FILE_BYTES) != l.file_bytes)
		EMU_CORRUPT("%s: header: inconsistent layout", path);
	if (fsize < l.file_bytes)
		EMU_CORRUPT("%s: truncated: %llu bytes, the drive needs %llu",
			    path, (unsigned long long)fsize,
			    (unsigned long long)l.file_bytes);
	e->zt_off = l.zt_off;
	e->undo_idx_off = l.undo_idx_off;
	e->undo_slots = l.undo_slots;
	e->data_off = l.data_off;
	e->undo_data_off = l.undo_data_off;
	flags = za_get_le32(h + H_FLAGS);
	if (flags & ~EMU_F_KNOWN)
		EMU_CORRUPT("%s: header: unknown flags 0x%x", path,
			    flags & ~EMU_F_KNOWN);
	e->prealloc = flags & EMU_F_PREALLOC;
	e->bw = za_get_le64(h + H_BW);
	e->lat_ns = za_get_le64(h + H_LAT);
	e->seek_ns = za_get_le64(h + H_SEEK);
	c->native_append = c->model == ZA_DEV_MODEL_ZNS;
	c->volatile_cache = e->cache_bytes != 0;
	snprintf(c->vendor, sizeof(c->vendor), "zarray emulated %s",
		 za_dev_model_str(c->model));
	return 0;
err:
	return ret;
}

static int emu_load_zones(struct emu *e)
{
	const struct za_dev_caps *c = &e->dev.caps;
	const char *path = e->dev.path;
	uint64_t n, s, wp, fl;
	uint32_t i;
	int ret;

	for (i = 0; i < c->nr_zones; i++) {
		const uint8_t *p = zent_ptr(e, i);
		struct emu_zone *z = &e->zones[i];
		uint8_t cond = p[Z_COND];
		bool conv = zone_is_conv(e, i);

		if (za_get_le32(p + Z_CRC) != za_crc32c(p, Z_CRC))
			EMU_CORRUPT("%s: zone %u: zone table entry checksum "
				    "mismatch",
				    path, i);
		wp = za_get_le64(p + Z_WP);
		fl = za_get_le64(p + Z_FLUSHED);
		if (wp > zone_cap(e, i) || fl > wp || wp % EMU_BLOCK ||
		    fl % EMU_BLOCK)
			EMU_CORRUPT("%s: zone %u: write pointer out of range",
				    path, i);
		z->wp_blk = (uint32_t)(wp / EMU_BLOCK);
		z->flushed_blk = (uint32_t)(fl / EMU_BLOCK);
		if (conv ? cond != ZA_ZONE_COND_NOT_WP :
			   !(cond == ZA_ZONE_COND_EMPTY ||
			     cond == ZA_ZONE_COND_IMP_OPEN ||
			     cond == ZA_ZONE_COND_EXP_OPEN ||
			     cond == ZA_ZONE_COND_CLOSED ||
			     cond == ZA_ZONE_COND_READONLY ||
			     cond == ZA_ZONE_COND_FULL ||
			     cond == ZA_ZONE_COND_OFFLINE))
			EMU_CORRUPT("%s: zone %u: bad condition 0x%x", path, i,
				    cond);
		if ((cond == ZA_ZONE_COND_EMPTY && zwp_rel(z)) ||
		    (cond == ZA_ZONE_COND_FULL && zwp_rel(z) != zone_cap(e, i)))
			EMU_CORRUPT("%s: zone %u: condition %s does not match "
				    "write pointer %llu",
				    path, i,
				    za_zone_cond_str((enum za_zone_cond)cond),
				    (unsigned long long)zwp_rel(z));
		z->cond = ZA_ZONE_COND_NOT_WP;
		set_cond(e, i, (enum za_zone_cond)cond);
		e->dirty_bytes += zwp_rel(z) - zflushed_rel(z);
		if (z->wp_blk != z->flushed_blk && dirty_add(e, i))
			return -ENOMEM;
	}
	if (c->max_active_zones && e->nr_active > c->max_active_zones)
		EMU_CORRUPT("%s: %u active zones, above the limit of %u", path,
			    e->nr_active, c->max_active_zones);
	if (!e->undo_slots)
		return 0;
	n = undo_count(e);
	if (n > e->undo_slots)
		EMU_CORRUPT("%s: undo log count %llu above its %llu slots",
			    path, (unsigned long long)n,
			    (unsigned long long)e->undo_slots);
	e->undo_set_cap = 16;
	while (e->undo_set_cap < 2 * e->undo_slots)
		e->undo_set_cap *= 2;
	e->undo_set = calloc(e->undo_set_cap, sizeof(uint64_t));
	if (!e->undo_set)
		return -ENOMEM;
	for (s = 0; s < n; s++) {
		uint64_t off = za_get_le64(undo_slot_ptr(e, s));

		if (off % EMU_BLOCK ||
		    off >= (uint64_t)c->nr_conv_zones * c->zone_size_bytes)
			EMU_CORRUPT("%s: undo slot %llu: offset %llu is not "
				    "in a conventional zone",
				    path, (unsigned long long)s,
				    (unsigned long long)off);
		if (!undo_set_has(e, off / EMU_BLOCK))
			undo_set_add(e, off / EMU_BLOCK);
		e->dirty_bytes += EMU_BLOCK;
	}
	return 0;
err:
	return ret;
}

int za_dev_emu_open(struct za_io *io, const char *path, unsigned flags,
		    struct za_dev **out)
{
	bool rdonly = flags & ZA_DEV_OPEN_RDONLY;
	uint8_t hdr[EMU_HDR_BYTES];
	struct emu *e;
	struct stat st;
	int ret;

	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->dev.ops = &emu_ops;
	e->dev.io = io;
	e->rdonly = rdonly;
	snprintf(e->dev.path, sizeof(e->dev.path), "%s", path);
	e->fd = open(path, (rdonly ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	if (e->fd < 0) {
		ret = -errno;
		za_log_err("%s: %s", path, strerror(errno));
		goto err_free;
	}
	if (fstat(e->fd, &st) < 0) {
		ret = -errno;
		goto err_free;
	}
	if (pread(e->fd, hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr)) {
		za_log_err("%s: too short to be an emulated drive", path);
		ret = -EUCLEAN;
		goto err_free;
	}
	ret = emu_parse_header(e, hdr, (uint64_t)st.st_size);
	if (ret < 0)
		goto err_free;
	/* Only writers take the lock: two writers would corrupt the drive. */
	if (!rdonly && flock(e->fd, LOCK_EX | LOCK_NB) < 0) {
		ret = -EBUSY;
		za_log_err("%s: in use by another process", path);
		goto err_free;
	}
	e->meta_bytes = e->data_off;
	e->meta = mmap(NULL, e->meta_bytes,
		       rdonly ? PROT_READ : PROT_READ | PROT_WRITE, MAP_SHARED,
		       e->fd, 0);
	if (e->meta == MAP_FAILED) {
		ret = -errno;
		e->meta = NULL;
		za_log_err("%s: mmap: %s", path, strerror(errno));
		goto err_free;
	}
	e->zones = calloc(e->dev.caps.nr_zones, sizeof(*e->zones));
	if (!e->zones) {
		ret = -ENOMEM;
		goto err_free;
	}
	ret = emu_load_zones(e);
	if (ret < 0)
		goto err_free;
	if (e->prealloc) {
		/*
		 * Data by memcpy() through a populated mapping: the same page
		 * cache as pwrite(), so a killed process leaves the same file,
		 * without pwrite()'s lookups and accounting per page (a fifth
		 * of the loop's time in P1's sequential writes). Only here:
		 * mapping a sparse file would fault on every first touch.
		 */
		e->data = mmap(NULL, e->dev.caps.capacity_bytes,
			       rdonly ? PROT_READ : PROT_READ | PROT_WRITE,
			       MAP_SHARED | MAP_POPULATE, e->fd,
			       (off_t)e->data_off);
		if (e->data == MAP_FAILED) {
			e->data = NULL;
			za_log_warn("%s: mapping the data: %s; using pread() "
				    "and pwrite()",
				    path, strerror(errno));
		}
	}
	*out = &e->dev;
	return 0;

err_free:
	emu_close(&e->dev);
	return ret;
}
