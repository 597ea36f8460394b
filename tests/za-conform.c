// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * za-conform.c - the device-layer conformance suite: the same checks, run
 * through the same ops table, against any backend (an emulated drive here,
 * null_blk and NVMe ZNS drives in the QEMU guest of tools/vmtest). A
 * backend conforms when every check passes; the checks are the contract
 * written in src/dev.h and docs/design.md, "The device layer".
 *
 * Without --destructive only reads and reports run. With it, the suite
 * resets and writes the last sequential zones of the drive (and the first
 * conventional zone, if any), so never point it at a drive holding data.
 *
 * Output is TAP; the exit status is 0 only when every check passed.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dev.h"
#include "io.h"
#include "log.h"

#define BLK 4096

static int test_nr, test_failed;
static struct za_dev *dev;
static struct za_io *io;
static struct za_zone *zones;
static unsigned nr_zones;

static void result(bool ok, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void result(bool ok, const char *fmt, ...)
{
	va_list ap;

	test_nr++;
	if (!ok)
		test_failed++;
	printf("%s %d - ", ok ? "ok" : "not ok", test_nr);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

static void skip(const char *what, const char *why)
{
	test_nr++;
	printf("ok %d - %s # SKIP %s\n", test_nr, what, why);
}

static void *xalloc(size_t len)
{
	void *p = NULL;

	if (posix_memalign(&p, BLK, len ? len : BLK)) {
		fprintf(stderr, "out of memory\n");
		exit(2);
	}
	memset(p, 0, len);
	return p;
}

static void pattern(void *buf, size_t len, uint64_t seed)
{
	uint64_t *p = buf, x = seed * 0x9e3779b97f4a7c15ull + 1;
	size_t i;

	for (i = 0; i < len / 8; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = x;
	}
}

/* Each 4 KiB block's content depends only on its device offset. */
static void pattern_at(void *buf, size_t len, uint64_t dev_off)
{
	size_t i;

	for (i = 0; i < len; i += BLK)
		pattern((uint8_t *)buf + i, BLK, dev_off + i);
}

static int io_sync(enum za_dev_op op, uint64_t off, void *buf, uint64_t len,
		   uint64_t *landed)
{
	return za_dev_io_sync(dev, op, off, buf, len, landed);
}

static int zone_report(uint32_t z, struct za_zone *out)
{
	unsigned n = 1;
	int ret = za_dev_report_zones(
		dev, (uint64_t)z * dev->caps.zone_size_bytes, out, &n);

	if (ret == 0 && n != 1)
		ret = -EIO;
	return ret;
}

/* A READ of any length, split by the device's largest I/O. */
static int read_all(uint64_t off, void *buf, uint64_t len)
{
	uint64_t done = 0, max = dev->caps.max_io_bytes;
	int ret = 0;

	while (!ret && done < len) {
		uint64_t n = len - done < max ? len - done : max;

		ret = io_sync(ZA_DEV_OP_READ, off + done, (uint8_t *)buf + done,
			      n, NULL);
		done += n;
	}
	return ret;
}

static void expect_err(int got, int want, const char *what)
{
	result(got == want, "%s: got %d (%s), want %d (%s)", what, got,
	       got ? strerror(-got) : "ok", want,
	       want ? strerror(-want) : "ok");
}

/* ---- read-only checks ---- */

static void check_caps(void)
{
	const struct za_dev_caps *c = &dev->caps;

	result(c->zone_size_bytes && c->nr_zones &&
		       c->capacity_bytes ==
			       (uint64_t)c->nr_zones * c->zone_size_bytes,
	       "capacity %llu = %u zones x %llu bytes",
	       (unsigned long long)c->capacity_bytes, c->nr_zones,
	       (unsigned long long)c->zone_size_bytes);
	result(c->lblock_bytes >= 512 && c->lblock_bytes % 512 == 0 &&
		       c->write_gran_bytes % c->lblock_bytes == 0 &&
		       c->write_gran_bytes,
	       "block %u B, write granularity %u B", c->lblock_bytes,
	       c->write_gran_bytes);
	result(c->zone_cap_bytes && c->zone_cap_bytes <= c->zone_size_bytes &&
		       c->zone_cap_bytes % c->write_gran_bytes == 0,
	       "zone capacity %llu within zone size %llu",
	       (unsigned long long)c->zone_cap_bytes,
	       (unsigned long long)c->zone_size_bytes);
	result(c->max_io_bytes >= c->write_gran_bytes &&
		       c->max_append_bytes >= c->write_gran_bytes,
	       "max I/O %u, max append %u", c->max_io_bytes,
	       c->max_append_bytes);
	result(!c->max_active_zones || !c->max_open_zones ||
		       c->max_open_zones <= c->max_active_zones,
	       "max open %u <= max active %u (0 = no limit)", c->max_open_zones,
	       c->max_active_zones);
}

static void check_report(void)
{
	unsigned i, conv = 0;
	bool ok = true;
	int ret = za_dev_report_all(dev, &zones, &nr_zones);

	result(ret == 0 && nr_zones == dev->caps.nr_zones,
	       "report of every zone: %u zones (%s)", nr_zones,
	       ret ? strerror(-ret) : "ok");
	if (ret)
		return;
	for (i = 0; i < nr_zones; i++) {
		const struct za_zone *z = &zones[i];
		bool zok = z->start_bytes ==
				   (uint64_t)i * dev->caps.zone_size_bytes &&
			   z->len_bytes == dev->caps.zone_size_bytes &&
			   z->cap_bytes <= z->len_bytes;

		if (z->type == ZA_ZONE_TYPE_CNV) {
			conv++;
			zok = zok && z->cond == ZA_ZONE_COND_NOT_WP;
		} else {
			zok = zok &&
			      (z->type == ZA_ZONE_TYPE_SWR ||
			       z->type == ZA_ZONE_TYPE_SWP) &&
			      z->wp_bytes >= z->start_bytes &&
			      (z->cond == ZA_ZONE_COND_FULL ||
			       z->cond == ZA_ZONE_COND_OFFLINE ||
			       z->cond == ZA_ZONE_COND_READONLY ||
			       z->wp_bytes <= z->start_bytes + z->cap_bytes) &&
			      z->cap_bytes >= dev->caps.zone_cap_bytes;
		}
		if (!zok) {
			printf("# zone %u: start %llu len %llu cap %llu wp "
			       "%llu type %d cond %d\n",
			       i, (unsigned long long)z->start_bytes,
			       (unsigned long long)z->len_bytes,
			       (unsigned long long)z->cap_bytes,
			       (unsigned long long)z->wp_bytes, z->type,
			       z->cond);
			ok = false;
		}
	}
	result(ok, "zones are contiguous with sane types, conditions and "
		   "write pointers");
	result(conv == dev->caps.nr_conv_zones,
	       "%u conventional zones reported, caps say %u", conv,
	       dev->caps.nr_conv_zones);
}

static void check_bad_args(void)
{
	uint64_t zsz = dev->caps.zone_size_bytes;
	uint8_t *buf = xalloc(2 * BLK);

	expect_err(io_sync(ZA_DEV_OP_READ, 512, buf, BLK, NULL), -EINVAL,
		   "read at a misaligned offset");
	expect_err(io_sync(ZA_DEV_OP_READ, 0, buf, 0, NULL), -EINVAL,
		   "read of zero bytes");
	expect_err(io_sync(ZA_DEV_OP_READ, 0, buf + 512, BLK, NULL), -EINVAL,
		   "read into a misaligned buffer");
	expect_err(io_sync(ZA_DEV_OP_READ, dev->caps.capacity_bytes, buf, BLK,
			   NULL),
		   -EINVAL, "read past the end of the device");
	expect_err(io_sync(ZA_DEV_OP_READ, dev->caps.capacity_bytes - BLK, buf,
			   2 * BLK, NULL),
		   -EINVAL, "read running off the end of the device");
	expect_err(io_sync(ZA_DEV_OP_READ, zsz - BLK, buf, 2 * BLK, NULL),
		   -EINVAL, "read across a zone boundary");
	expect_err(io_sync(ZA_DEV_OP_RESET, BLK, NULL, 0, NULL), -EINVAL,
		   "reset not at a zone start");
	expect_err(io_sync((enum za_dev_op)99, 0, buf, BLK, NULL), -EINVAL,
		   "unknown operation");
	free(buf);
}

/* ---- destructive checks ---- */

struct multi {
	struct za_dev_req req;
	int *left;
	bool *all_done;
};

static void multi_done(struct za_dev_req *r)
{
	struct multi *m = (struct multi *)r;

	if (--*m->left == 0)
		*m->all_done = true;
}

/* Submit @n requests at once and wait for all of them. */
static void run_many(struct multi *m, int n)
{
	bool all_done = false;
	int left = n, i;

	for (i = 0; i < n; i++) {
		m[i].left = &left;
		m[i].all_done = &all_done;
		m[i].req.done = multi_done;
		za_dev_submit(dev, &m[i].req);
	}
	za_io_run_until(io, &all_done, 120ull * 1000000000ull);
}

static uint32_t pick_seq_zone(unsigned from_end)
{
	/* The last sequential zones, so the start of the drive is spared. */
	uint32_t z = dev->caps.nr_zones;

	while (z-- > 0) {
		if (zones[z].type != ZA_ZONE_TYPE_CNV &&
		    zones[z].cond != ZA_ZONE_COND_OFFLINE &&
		    zones[z].cond != ZA_ZONE_COND_READONLY && from_end-- == 0)
			return z;
	}
	return UINT32_MAX;
}

static uint64_t zstart(uint32_t z)
{
	return (uint64_t)z * dev->caps.zone_size_bytes;
}

static void check_write_rules(uint32_t z)
{
	uint64_t s = zstart(z), landed = 0;
	uint8_t *w = xalloc(4 * BLK), *r = xalloc(4 * BLK);
	struct za_zone zr;
	int ret;

	ret = io_sync(ZA_DEV_OP_RESET, s, NULL, 0, NULL);
	zone_report(z, &zr);
	result(ret == 0 && zr.cond == ZA_ZONE_COND_EMPTY && zr.wp_bytes == s,
	       "zone %u: reset leaves it empty with the write pointer at its "
	       "start (%s)",
	       z, strerror(-ret));

	expect_err(io_sync(ZA_DEV_OP_READ, s, r, BLK, NULL), -ENODATA,
		   "read of an empty zone (past the write pointer)");

	pattern(w, 3 * BLK, s);
	ret = io_sync(ZA_DEV_OP_WRITE, s, w, 3 * BLK, &landed);
	zone_report(z, &zr);
	result(ret == 0 && landed == s && zr.wp_bytes == s + 3 * BLK &&
		       (zr.cond == ZA_ZONE_COND_IMP_OPEN ||
			zr.cond == ZA_ZONE_COND_CLOSED),
	       "write of 3 blocks at the write pointer: wp +12288, zone open "
	       "(%s, cond %s)",
	       strerror(-ret), za_zone_cond_str(zr.cond));
	ret = io_sync(ZA_DEV_OP_READ, s, r, 3 * BLK, NULL);
	result(ret == 0 && !memcmp(w, r, 3 * BLK),
	       "read back what was written");

	expect_err(io_sync(ZA_DEV_OP_WRITE, s + 4 * BLK, w, BLK, NULL), -ESPIPE,
		   "write ahead of the write pointer");
	expect_err(io_sync(ZA_DEV_OP_WRITE, s, w, BLK, NULL), -ESPIPE,
		   "write behind the write pointer (overwrite)");
	zone_report(z, &zr);
	result(zr.wp_bytes == s + 3 * BLK,
	       "refused writes leave the write pointer alone");
	expect_err(io_sync(ZA_DEV_OP_WRITE, s + 3 * BLK, w + 512, BLK, NULL),
		   -EINVAL, "write from a misaligned buffer");
	expect_err(io_sync(ZA_DEV_OP_WRITE, s + 3 * BLK, w, 512, NULL), -EINVAL,
		   "write of a partial block");
	expect_err(io_sync(ZA_DEV_OP_READ, s + 2 * BLK, r, 2 * BLK, NULL),
		   -ENODATA, "read running past the write pointer");

	pattern(w, BLK, s + 77);
	ret = io_sync(ZA_DEV_OP_APPEND, s, w, BLK, &landed);
	result(ret == 0 && landed == s + 3 * BLK,
	       "append lands at the write pointer (landed %llu, want %llu)",
	       (unsigned long long)(landed - s), 3ull * BLK);
	ret = io_sync(ZA_DEV_OP_READ, landed, r, BLK, NULL);
	result(ret == 0 && !memcmp(w, r, BLK), "read back the append");
	expect_err(io_sync(ZA_DEV_OP_APPEND, s + BLK, w, BLK, NULL), -EINVAL,
		   "append not addressed to a zone start");

	ret = io_sync(ZA_DEV_OP_FLUSH, 0, NULL, 0, NULL);
	result(ret == 0, "flush (%s)", strerror(-ret));
	free(w);
	free(r);
}

static void check_concurrency(uint32_t z)
{
	const int n = 16;
	uint64_t s = zstart(z), len = 2 * BLK;
	uint64_t cap_left = dev->caps.zone_cap_bytes;
	struct multi m[16];
	uint8_t *w = xalloc(n * len), *r = xalloc(n * len);
	bool ok = true, seen[16] = { false };
	struct za_zone zr;
	int i, ret;

	if (cap_left < 2 * n * len) {
		skip("concurrent writes and appends", "zone too small");
		goto out;
	}
	io_sync(ZA_DEV_OP_RESET, s, NULL, 0, NULL);
	/* Pipelined WRITEs, each at the wp its predecessors leave. */
	pattern(w, n * len, s + 1);
	memset(m, 0, sizeof(m));
	for (i = 0; i < n; i++) {
		m[i].req.op = ZA_DEV_OP_WRITE;
		m[i].req.off_bytes = s + (uint64_t)i * len;
		m[i].req.len_bytes = len;
		m[i].req.buf = w + (uint64_t)i * len;
	}
	run_many(m, n);
	for (i = 0; i < n; i++)
		ok = ok && m[i].req.result == 0 &&
		     m[i].req.landed_bytes == s + (uint64_t)i * len;
	ret = read_all(s, r, n * len);
	result(ok && ret == 0 && !memcmp(w, r, n * len),
	       "%d pipelined writes at successive write pointers land in "
	       "order and read back",
	       n);

	/* Appends in flight together: any order, but each whole, no overlap. */
	pattern(w, n * len, s + 2);
	memset(m, 0, sizeof(m));
	for (i = 0; i < n; i++) {
		m[i].req.op = ZA_DEV_OP_APPEND;
		m[i].req.off_bytes = s;
		m[i].req.len_bytes = len;
		m[i].req.buf = w + (uint64_t)i * len;
	}
	run_many(m, n);
	ok = true;
	for (i = 0; i < n; i++) {
		uint64_t rel = m[i].req.landed_bytes - s - (uint64_t)n * len;
		uint64_t slot = rel / len;

		if (m[i].req.result || rel % len || slot >= (uint64_t)n ||
		    seen[slot]) {
			ok = false;
			continue;
		}
		seen[slot] = true;
		if (io_sync(ZA_DEV_OP_READ, m[i].req.landed_bytes, r, len,
			    NULL) ||
		    memcmp(r, w + (uint64_t)i * len, len))
			ok = false;
	}
	zone_report(z, &zr);
	result(ok && zr.wp_bytes == s + 2ull * n * len,
	       "%d appends in flight together each land whole in a distinct "
	       "slot and read back",
	       n);
out:
	free(w);
	free(r);
}

static void check_fill(uint32_t z)
{
	uint64_t s = zstart(z), cap = dev->caps.zone_cap_bytes;
	uint64_t chunk = dev->caps.max_io_bytes, off = 0;
	uint8_t *w = xalloc(chunk), *r = xalloc(chunk);
	struct za_zone zr;
	bool ok = true;
	int ret;

	if (zones[z].cap_bytes > cap)
		cap = zones[z].cap_bytes;
	if (chunk > 1u << 20)
		chunk = 1u << 20;
	io_sync(ZA_DEV_OP_RESET, s, NULL, 0, NULL);
	/* Fill to one block short of the capacity. */
	while (ok && off < cap - BLK) {
		uint64_t len = cap - BLK - off < chunk ? cap - BLK - off :
							 chunk;

		pattern_at(w, len, s + off);
		ok = io_sync(ZA_DEV_OP_WRITE, s + off, w, len, NULL) == 0;
		off += len;
	}
	result(ok,
	       "zone %u filled to one block short of its capacity (%llu "
	       "bytes)",
	       z, (unsigned long long)(cap - BLK));
	ret = io_sync(ZA_DEV_OP_WRITE, s + off, w, 2 * BLK, NULL);
	if (cap < dev->caps.zone_size_bytes)
		expect_err(ret, -ENOSPC,
			   "write running past the zone capacity");
	else
		expect_err(ret, -EINVAL,
			   "write running past the zone end (capacity = size)");
	ret = io_sync(ZA_DEV_OP_APPEND, s, w, 2 * BLK, NULL);
	expect_err(ret, -ENOSPC, "append larger than the space left");
	ret = io_sync(ZA_DEV_OP_WRITE, s + off, w, BLK, NULL);
	zone_report(z, &zr);
	result(ret == 0 && zr.cond == ZA_ZONE_COND_FULL,
	       "the last block makes the zone full (%s, cond %s)",
	       strerror(-ret), za_zone_cond_str(zr.cond));
	expect_err(io_sync(ZA_DEV_OP_APPEND, s, w, BLK, NULL), -ENOSPC,
		   "append to a full zone");
	expect_err(io_sync(ZA_DEV_OP_WRITE, s, w, BLK, NULL), -ENOSPC,
		   "write to a full zone");
	pattern_at(w, BLK, s + cap - 2 * BLK);
	ret = io_sync(ZA_DEV_OP_READ, s + cap - 2 * BLK, r, BLK, NULL);
	result(ret == 0 && !memcmp(w, r, BLK), "read near the end of a full "
					       "zone");
	ret = io_sync(ZA_DEV_OP_RESET, s, NULL, 0, NULL);
	zone_report(z, &zr);
	result(ret == 0 && zr.cond == ZA_ZONE_COND_EMPTY,
	       "reset of a full zone empties it");
	free(w);
	free(r);
}

static void check_finish_open_close(uint32_t z)
{
	uint64_t s = zstart(z);
	uint8_t *w = xalloc(BLK);
	struct za_zone zr;
	int ret;

	io_sync(ZA_DEV_OP_RESET, s, NULL, 0, NULL);
	ret = io_sync(ZA_DEV_OP_OPEN_ZONE, s, NULL, 0, NULL);
	zone_report(z, &zr);
	result(ret == 0 && zr.cond == ZA_ZONE_COND_EXP_OPEN,
	       "explicit open (%s, cond %s)", strerror(-ret),
	       za_zone_cond_str(zr.cond));
	ret = io_sync(ZA_DEV_OP_CLOSE_ZONE, s, NULL, 0, NULL);
	zone_report(z, &zr);
	result(ret == 0 && zr.cond == ZA_ZONE_COND_EMPTY,
	       "closing an open zone with nothing written empties it (%s)",
	       za_zone_cond_str(zr.cond));
	pattern(w, BLK, s);
	io_sync(ZA_DEV_OP_WRITE, s, w, BLK, NULL);
	ret = io_sync(ZA_DEV_OP_CLOSE_ZONE, s, NULL, 0, NULL);
	zone_report(z, &zr);
	result(ret == 0 && zr.cond == ZA_ZONE_COND_CLOSED &&
		       zr.wp_bytes == s + BLK,
	       "closing a written zone keeps its write pointer (%s)",
	       za_zone_cond_str(zr.cond));
	ret = io_sync(ZA_DEV_OP_WRITE, s + BLK, w, BLK, NULL);
	result(ret == 0, "a closed zone takes writes at its write pointer");
	ret = io_sync(ZA_DEV_OP_FINISH, s, NULL, 0, NULL);
	zone_report(z, &zr);
	result(ret == 0 && zr.cond == ZA_ZONE_COND_FULL,
	       "finish makes the zone full (%s)", za_zone_cond_str(zr.cond));
	expect_err(io_sync(ZA_DEV_OP_APPEND, s, w, BLK, NULL), -ENOSPC,
		   "append to a finished zone");
	ret = io_sync(ZA_DEV_OP_READ, s, w, BLK, NULL);
	result(ret == 0, "a finished zone reads below its old write pointer");
	io_sync(ZA_DEV_OP_RESET, s, NULL, 0, NULL);
	free(w);
}

static void check_limits(void)
{
	const struct za_dev_caps *c = &dev->caps;
	uint32_t lim = c->max_active_zones, i, used[1024];
	uint8_t *w = xalloc(BLK);
	unsigned nseq = c->nr_zones - c->nr_conv_zones, busy = 0;
	struct za_zone *now = NULL;
	unsigned nr = 0;
	int ret;

	/* Zones left open by others hold resources we cannot account for. */
	if (za_dev_report_all(dev, &now, &nr) == 0)
		for (i = 0; i < nr; i++)
			busy += now[i].cond == ZA_ZONE_COND_IMP_OPEN ||
				now[i].cond == ZA_ZONE_COND_EXP_OPEN ||
				now[i].cond == ZA_ZONE_COND_CLOSED;
	free(now);
	if (busy) {
		skip("active-zone limit", "other zones are open or closed");
		skip("open-zone limit", "other zones are open or closed");
		free(w);
		return;
	}

	if (!lim || lim + 1 > nseq || lim + 1 > 1024) {
		skip("active-zone limit",
		     lim ? "too few sequential zones" : "no active-zone limit");
	} else {
		bool ok = true;

		for (i = 0; i <= lim; i++) {
			used[i] = pick_seq_zone(i);
			if (used[i] == UINT32_MAX)
				ok = false;
		}
		for (i = 0; ok && i <= lim; i++)
			io_sync(ZA_DEV_OP_RESET, zstart(used[i]), NULL, 0,
				NULL);
		for (i = 0; ok && i < lim; i++)
			ok = io_sync(ZA_DEV_OP_WRITE, zstart(used[i]), w, BLK,
				     NULL) == 0;
		result(ok, "%u zones written: up to the active limit", lim);
		ret = io_sync(ZA_DEV_OP_WRITE, zstart(used[lim]), w, BLK, NULL);
		expect_err(ret, -EOVERFLOW,
			   "a write that would open one zone too many "
			   "(active limit)");
		ret = io_sync(ZA_DEV_OP_FINISH, zstart(used[0]), NULL, 0, NULL);
		ret = ret   ?:
			      io_sync(ZA_DEV_OP_WRITE, zstart(used[lim]), w,
				      BLK, NULL);
		result(ret == 0, "finishing a zone frees an active slot (%s)",
		       strerror(-ret));
		for (i = 0; i <= lim; i++)
			io_sync(ZA_DEV_OP_RESET, zstart(used[i]), NULL, 0,
				NULL);
	}

	lim = c->max_open_zones;
	if (!lim || lim + 1 > nseq || lim + 1 > 1024) {
		skip("open-zone limit",
		     lim ? "too few sequential zones" : "no open-zone limit");
		free(w);
		return;
	} else {
		bool ok = true;

		for (i = 0; i <= lim; i++) {
			used[i] = pick_seq_zone(i);
			if (used[i] == UINT32_MAX)
				ok = false;
		}
		for (i = 0; ok && i <= lim; i++)
			io_sync(ZA_DEV_OP_RESET, zstart(used[i]), NULL, 0,
				NULL);
		for (i = 0; ok && i < lim; i++)
			ok = io_sync(ZA_DEV_OP_OPEN_ZONE, zstart(used[i]), NULL,
				     0, NULL) == 0;
		result(ok, "%u zones opened explicitly: up to the open limit",
		       lim);
		ret = io_sync(ZA_DEV_OP_WRITE, zstart(used[lim]), w, BLK, NULL);
		expect_err(ret,
			   c->max_active_zones && c->max_active_zones <= lim ?
				   -EOVERFLOW :
				   -ETOOMANYREFS,
			   "a write to another zone when all open zones are "
			   "explicitly open");
		io_sync(ZA_DEV_OP_CLOSE_ZONE, zstart(used[0]), NULL, 0, NULL);
		for (i = 1; i < lim; i++)
			io_sync(ZA_DEV_OP_CLOSE_ZONE, zstart(used[i]), NULL, 0,
				NULL);
		/* Implicit opens beyond the limit: the drive closes others. */
		ok = true;
		if (!c->max_active_zones || c->max_active_zones > lim)
			for (i = 0; i <= lim; i++)
				ok = ok &&
				     io_sync(ZA_DEV_OP_WRITE, zstart(used[i]),
					     w, BLK, NULL) == 0;
		result(ok,
		       "writes to %u zones, one more than the open limit, "
		       "succeed (implicit close)",
		       lim + 1);
		for (i = 0; i <= lim; i++)
			io_sync(ZA_DEV_OP_RESET, zstart(used[i]), NULL, 0,
				NULL);
	}
	free(w);
}

static void check_conventional(void)
{
	uint8_t *w = xalloc(2 * BLK), *r = xalloc(2 * BLK);
	uint32_t z;
	int ret;

	for (z = 0; z < nr_zones && zones[z].type != ZA_ZONE_TYPE_CNV; z++)
		;
	if (z == nr_zones) {
		skip("conventional zone random writes", "no conventional zone");
		goto out;
	}
	pattern(w, 2 * BLK, 5);
	ret = io_sync(ZA_DEV_OP_WRITE, zstart(z) + 8 * BLK, w, BLK, NULL);
	ret = ret   ?:
		      io_sync(ZA_DEV_OP_WRITE, zstart(z) + 2 * BLK, w + BLK,
			      BLK, NULL);
	ret = ret   ?:
		      io_sync(ZA_DEV_OP_WRITE, zstart(z) + 8 * BLK, w + BLK,
			      BLK, NULL);
	result(ret == 0,
	       "conventional zone %u takes writes anywhere, and "
	       "overwrites (%s)",
	       z, strerror(-ret));
	ret = io_sync(ZA_DEV_OP_READ, zstart(z) + 8 * BLK, r, BLK, NULL);
	result(ret == 0 && !memcmp(r, w + BLK, BLK),
	       "the overwrite reads back");
	expect_err(io_sync(ZA_DEV_OP_RESET, zstart(z), NULL, 0, NULL), -EINVAL,
		   "reset of a conventional zone");
	expect_err(io_sync(ZA_DEV_OP_APPEND, zstart(z), w, BLK, NULL), -EINVAL,
		   "append to a conventional zone");
out:
	free(w);
	free(r);
}

static int reopen(const char *path)
{
	za_dev_close(dev);
	dev = NULL;
	return za_dev_open(io, path, 0, &dev);
}

static void check_persistence(const char *path, uint32_t z)
{
	uint64_t s = zstart(z);
	uint8_t *w = xalloc(2 * BLK), *r = xalloc(2 * BLK);
	struct za_zone zr;
	int ret;

	io_sync(ZA_DEV_OP_RESET, s, NULL, 0, NULL);
	pattern(w, 2 * BLK, 99);
	ret = io_sync(ZA_DEV_OP_WRITE, s, w, 2 * BLK, NULL);
	ret = ret ?: io_sync(ZA_DEV_OP_FLUSH, 0, NULL, 0, NULL);
	ret = ret ?: reopen(path);
	if (ret) {
		result(false, "reopen: %s", strerror(-ret));
		exit(1);
	}
	zone_report(z, &zr);
	ret = io_sync(ZA_DEV_OP_READ, s, r, 2 * BLK, NULL);
	result(zr.wp_bytes == s + 2 * BLK && ret == 0 && !memcmp(w, r, 2 * BLK),
	       "after close and reopen the write pointer and data are kept");
	io_sync(ZA_DEV_OP_RESET, s, NULL, 0, NULL);
	free(w);
	free(r);
}

/*
 * The device vanishes under us (@cmd pulls it, e.g. null_blk's configfs
 * power switch): every request must complete with an error, none may hang
 * or crash the process, and closing must still work.
 */
static void check_vanish(const char *cmd)
{
	static const enum za_dev_op ops[] = {
		ZA_DEV_OP_READ,	 ZA_DEV_OP_WRITE, ZA_DEV_OP_APPEND,
		ZA_DEV_OP_FLUSH, ZA_DEV_OP_RESET, ZA_DEV_OP_FINISH
	};
	uint8_t *w = xalloc(BLK);
	uint32_t z = pick_seq_zone(0);
	struct za_zone zr;
	unsigned i;
	int ret;

	if (z == UINT32_MAX) {
		result(false, "a writable sequential zone exists");
		free(w);
		return;
	}
	io_sync(ZA_DEV_OP_RESET, zstart(z), NULL, 0, NULL);
	ret = io_sync(ZA_DEV_OP_WRITE, zstart(z), w, BLK, NULL);
	result(ret == 0, "write before the device vanishes (%s)",
	       strerror(-ret));
	ret = system(cmd);
	result(ret == 0, "'%s' pulled the device (status %d)", cmd, ret);
	for (i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		struct multi m;

		memset(&m, 0, sizeof(m));
		m.req.op = ops[i];
		m.req.off_bytes = ops[i] == ZA_DEV_OP_WRITE ? zstart(z) + BLK :
							      zstart(z);
		m.req.len_bytes = ops[i] == ZA_DEV_OP_FLUSH ||
						  ops[i] == ZA_DEV_OP_RESET ||
						  ops[i] == ZA_DEV_OP_FINISH ?
					  0 :
					  BLK;
		m.req.buf = m.req.len_bytes ? w : NULL;
		m.req.result = 1;
		run_many(&m, 1);
		result(m.req.result < 0,
		       "%s on a vanished device fails cleanly: %d (%s)",
		       za_dev_op_str(ops[i]), m.req.result,
		       m.req.result <= 0 ? strerror(-m.req.result) :
					   "no completion");
	}
	ret = zone_report(z, &zr);
	result(ret < 0, "zone report of a vanished device fails: %d (%s)", ret,
	       strerror(-ret));
	free(w);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "destructive", no_argument, NULL, 'd' },
		{ "vanish", required_argument, NULL, 'x' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool destructive = false;
	const char *path, *vanish = NULL;
	int c, ret;

	while ((c = getopt_long(argc, argv, "dvh", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			destructive = true;
			break;
		case 'v':
			za_log_set_level(ZA_LOG_DEBUG);
			break;
		case 'x':
			vanish = optarg;
			destructive = true;
			break;
		case 'h':
			printf("Usage: za-conform [--destructive] [--vanish CMD] "
			       "DEVICE\n"
			       "  --vanish CMD  instead of the suite: write, run "
			       "CMD (which must pull\n"
			       "                the device), then check that "
			       "every request fails cleanly\n");
			return 0;
		default:
			return 2;
		}
	}
	if (optind + 1 != argc) {
		fprintf(stderr, "Usage: za-conform [--destructive] DEVICE\n");
		return 2;
	}
	path = argv[optind];
	za_log_set_ident("za-conform");
	ret = za_io_new(NULL, &io);
	if (ret == 0)
		ret = za_dev_open(io, path,
				  destructive ? 0 : ZA_DEV_OPEN_RDONLY, &dev);
	if (ret) {
		printf("Bail out! cannot open %s: %s\n", path, strerror(-ret));
		return 1;
	}
	printf("# %s: %s, backend %s, %u zones, zone %llu cap %llu, native "
	       "append %d\n",
	       path, za_dev_model_str(dev->caps.model), dev->ops->name,
	       dev->caps.nr_zones,
	       (unsigned long long)dev->caps.zone_size_bytes,
	       (unsigned long long)dev->caps.zone_cap_bytes,
	       dev->caps.native_append);
	check_caps();
	check_report();
	if (vanish && zones) {
		check_vanish(vanish);
	} else if (zones) {
		check_bad_args();
	}
	if (destructive && zones && !vanish) {
		uint32_t z = pick_seq_zone(0);

		if (z == UINT32_MAX) {
			result(false, "a writable sequential zone exists");
		} else {
			check_write_rules(z);
			check_concurrency(z);
			check_fill(z);
			check_finish_open_close(z);
			check_limits();
			check_conventional();
			check_persistence(path, z);
		}
	}
	printf("1..%d\n", test_nr);
	if (test_failed)
		printf("# %d of %d checks failed on %s\n", test_failed, test_nr,
		       path);
	free(zones);
	za_dev_close(dev);
	za_io_free(io);
	return test_failed ? 1 : 0;
}
